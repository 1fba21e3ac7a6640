//! `messages/<session_id>.jsonl`: serializing a message list and reading one back tolerantly.

use std::path::Path;

use serde_json::value::RawValue;
use session_schema::{BaseMessage, Extra, ParseError, RawJson, UnknownObject, parse_message};

use crate::compact::compact_json;
use crate::error::{Result, StateError};
use crate::fsutil::{chain_digest, line_digest};
use crate::types::{LoadNote, MessageDamage, MessageDamageKind};

/// Serialized message lines (compact JSON + `\n` each) with their digests, for the messages
/// `base..` of a list (`base` > 0 when the prefix is known to be stored already).
pub(crate) struct Lines {
    pub(crate) base: usize,
    pub(crate) lines: Vec<Vec<u8>>,
    pub(crate) digests: Vec<u64>,
}

impl Lines {
    /// Serializes `messages` the way the reference does (`JSON.stringify(m) + "\n"`).
    pub(crate) fn serialize(session_id: &str, messages: &[BaseMessage]) -> Result<Lines> {
        Lines::serialize_from(session_id, messages, 0)
    }

    /// Serializes `messages[base..]` only.
    pub(crate) fn serialize_from(
        session_id: &str,
        messages: &[BaseMessage],
        base: usize,
    ) -> Result<Lines> {
        let tail = messages.get(base..).unwrap_or(&[]);
        let mut lines = Vec::with_capacity(tail.len());
        let mut digests = Vec::with_capacity(tail.len());
        for (i, m) in tail.iter().enumerate() {
            let index = base + i;
            let json = serde_json::to_vec(m).map_err(|source| StateError::Serialize {
                session_id: session_id.to_owned(),
                index,
                source,
            })?;
            let mut line = compact_json(&json);
            line.push(b'\n');
            digests.push(line_digest(&line));
            lines.push(line);
        }
        Ok(Lines {
            base,
            lines,
            digests,
        })
    }

    /// The serialized line of message `index` (with its `\n`), when it is among these.
    pub(crate) fn line(&self, index: usize) -> Option<&[u8]> {
        self.lines
            .get(index.checked_sub(self.base)?)
            .map(Vec::as_slice)
    }

    /// Number of messages in the whole list (`base` + serialized ones).
    pub(crate) fn count(&self) -> usize {
        self.base + self.lines.len()
    }

    /// `(byte length, digest chain)` of the first `n` lines (requires `base == 0`).
    pub(crate) fn prefix(&self, n: usize) -> (u64, u64) {
        debug_assert_eq!(self.base, 0);
        let mut len = 0u64;
        let mut chain = crate::fsutil::EMPTY_DIGEST;
        for (line, d) in self.lines.iter().zip(&self.digests).take(n) {
            len += line.len() as u64;
            chain = chain_digest(chain, *d);
        }
        (len, chain)
    }

    /// Extends a digest chain with lines `from..` (`from >= base`).
    pub(crate) fn extend_digest(&self, mut chain: u64, from: usize) -> u64 {
        for d in &self.digests[from - self.base..] {
            chain = chain_digest(chain, *d);
        }
        chain
    }

    /// Concatenation of lines `from..` (`from >= base`).
    pub(crate) fn concat(&self, from: usize) -> Vec<u8> {
        let rest = &self.lines[from - self.base..];
        let total: usize = rest.iter().map(Vec::len).sum();
        let mut out = Vec::with_capacity(total);
        for l in rest {
            out.extend_from_slice(l);
        }
        out
    }

    /// Puts `line` (a complete line with its `\n`) in place of line `index` (requires
    /// `base == 0`).
    pub(crate) fn replace(&mut self, index: usize, line: &[u8]) {
        debug_assert_eq!(self.base, 0);
        if let (Some(l), Some(d)) = (self.lines.get_mut(index), self.digests.get_mut(index)) {
            *l = line.to_vec();
            *d = line_digest(line);
        }
    }

    /// Total byte length (requires `base == 0`).
    pub(crate) fn total_len(&self) -> u64 {
        debug_assert_eq!(self.base, 0);
        self.lines.iter().map(|l| l.len() as u64).sum()
    }
}

/// Messages read from a file, plus what had to be skipped.
pub(crate) struct ReadMessages {
    pub(crate) messages: Vec<BaseMessage>,
    pub(crate) damage: Vec<MessageDamage>,
    /// Lone surrogate escapes that were repaired to U+FFFD, one note each.
    pub(crate) notes: Vec<LoadNote>,
    /// For messages (by index in `messages`) whose line held lone surrogate escapes: the
    /// line as it was written, compact, escapes restored, with its `\n` — what a save writes
    /// back for such a message while it is unchanged, since serializing the repaired value
    /// would write U+FFFD instead of the escape.
    pub(crate) restored: Vec<(usize, Vec<u8>)>,
    /// Number of `\n`-terminated lines plus a final fragment without one, as counted by the
    /// bookkeeping's digest chain.
    pub(crate) line_count: u64,
}

impl ReadMessages {
    /// Whether the file is exactly one complete, cleanly parsed message per line (no damage,
    /// no blank line, `\n` after the last one) and those messages are, by value, the start
    /// of `list` — so that appending `list`'s other messages keeps every byte and gives a file
    /// holding `list`. Values are compared as parsed: a line whose lone surrogate escapes were
    /// repaired equals the repaired message a caller got from `load`.
    pub(crate) fn is_prefix_of(&self, bytes: &[u8], list: &[BaseMessage]) -> bool {
        self.damage.is_empty()
            && (bytes.is_empty() || bytes.ends_with(b"\n"))
            && self.line_count == self.messages.len() as u64
            && self.messages.len() <= list.len()
            && self.messages[..] == list[..self.messages.len()]
    }

    /// The written line of every message of `list` that equals (by value) the message at the
    /// same index here and whose line had lone surrogate escapes, so that a rewrite keeps it.
    pub(crate) fn unchanged_lines<'a>(
        &'a self,
        list: &'a [BaseMessage],
    ) -> impl Iterator<Item = (usize, &'a [u8])> + 'a {
        self.restored.iter().filter_map(move |(i, line)| {
            (list.get(*i) == self.messages.get(*i)).then_some((*i, line.as_slice()))
        })
    }
}

/// Parses the content of a messages file tolerantly (compat §2.7 plus §5 item 4):
/// lines split on `\n`, CR and surrounding white space trimmed, blank lines skipped. A line
/// that cannot be a message is reported in `damage` and skipped, except a JSON object with a
/// string `role` that does not fit the typed model, which is kept verbatim.
///
/// A line with lone surrogate escapes (`\ud83c` without its pair, which JavaScript writes for
/// a cut emoji) loads with U+FFFD in their place; each one is reported as a
/// [`LoadNote::LoneSurrogate`] and the line as written is kept in `restored`.
pub(crate) fn parse_messages(path: &Path, bytes: &[u8]) -> ReadMessages {
    let mut messages = Vec::new();
    let mut damage = Vec::new();
    let mut notes = Vec::new();
    let mut restored = Vec::new();
    let mut start = 0usize;
    let mut line_no = 0u64;
    while start < bytes.len() {
        line_no += 1;
        let (end, has_newline) = match memchr_nl(&bytes[start..]) {
            Some(p) => (start + p, true),
            None => (bytes.len(), false),
        };
        let line = &bytes[start..end];
        match parse_message(line) {
            Ok(parsed) if parsed.lone_surrogates.is_empty() => messages.push(parsed.value),
            Ok(parsed) => {
                // Offsets are within the line after BOM and white space trimming.
                let trimmed = session_schema::trim_line(line).0;
                let lead = (trimmed.as_ptr() as usize).saturating_sub(line.as_ptr() as usize);
                for ls in &parsed.lone_surrogates {
                    notes.push(LoadNote::LoneSurrogate {
                        path: path.to_path_buf(),
                        line: line_no,
                        byte_offset: (start + lead + ls.offset) as u64,
                        escape: ls.escape_str().to_owned(),
                    });
                }
                if let Ok(json) = parsed.to_json() {
                    let mut written = compact_json(&json);
                    written.push(b'\n');
                    restored.push((messages.len(), written));
                }
                messages.push(parsed.value);
            }
            Err(ParseError::Empty) => {}
            Err(err) => {
                let (kind, kept) = match &err {
                    e if e.is_eof() && !has_newline => (MessageDamageKind::TornTail, None),
                    ParseError::Syntax { .. } | ParseError::InvalidUtf8 { .. } => {
                        (MessageDamageKind::Corrupt, None)
                    }
                    ParseError::NotObject => (MessageDamageKind::NotObject, None),
                    ParseError::MissingTag { .. } => (MessageDamageKind::MissingRole, None),
                    _ => match keep_raw(line) {
                        Some(m) => (MessageDamageKind::Shape, Some(m)),
                        None => (MessageDamageKind::MissingRole, None),
                    },
                };
                damage.push(MessageDamage {
                    path: path.to_path_buf(),
                    line: Some(line_no),
                    byte_offset: start as u64,
                    kind,
                    kept: kept.is_some(),
                    detail: err.to_string(),
                });
                if let Some(m) = kept {
                    messages.push(m);
                }
            }
        }
        start = if has_newline { end + 1 } else { end };
    }
    ReadMessages {
        messages,
        damage,
        notes,
        restored,
        line_count: line_no,
    }
}

fn memchr_nl(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}

/// Keeps a JSON object with a string `role` as `BaseMessage::Unknown` (fields in order).
pub(crate) fn keep_raw(line: &[u8]) -> Option<BaseMessage> {
    let text = std::str::from_utf8(session_schema::trim_line(line).0).ok()?;
    let pairs: OrderedObject = serde_json::from_str(text).ok()?;
    let mut role = None;
    let mut fields = Vec::new();
    for (k, v) in pairs.0 {
        if k == "role" && role.is_none() {
            role = Some(serde_json::from_str::<String>(v.get()).ok()?);
        } else {
            let compact = compact_json(v.get().as_bytes());
            let raw = RawJson::from_json(String::from_utf8(compact).ok()?).ok()?;
            fields.push((k, raw));
        }
    }
    Some(BaseMessage::Unknown(UnknownObject {
        tag: role?,
        fields: Extra(fields),
    }))
}

/// A JSON object's members in document order, values raw.
struct OrderedObject(Vec<(String, Box<RawValue>)>);

impl<'de> serde::Deserialize<'de> for OrderedObject {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = OrderedObject;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<OrderedObject, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, Box<RawValue>>()? {
                    out.push((k, v));
                }
                Ok(OrderedObject(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// Members of a JSON object in document order (for legacy snapshots).
pub(crate) fn ordered_object(
    text: &str,
) -> std::result::Result<Vec<(String, Box<RawValue>)>, serde_json::Error> {
    serde_json::from_str::<OrderedObject>(text).map(|o| o.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torn_corrupt_and_odd_lines_are_reported_and_good_ones_kept() {
        let input = b"{\"role\":\"user\",\"content\":\"a\"}\r\n\n  {\"role\":\"assistant\",\"content\":\"b\"}  \nnot json\n[1]\n{\"content\":\"x\"}\n{\"role\":\"user\",\"content\":[null]}\n{\"role\":\"assistant\",\"content\":\"to";
        let r = parse_messages(Path::new("m.jsonl"), input);
        let kinds: Vec<_> = r
            .damage
            .iter()
            .map(|d| (d.line, d.kind.clone(), d.kept))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (Some(4), MessageDamageKind::Corrupt, false),
                (Some(5), MessageDamageKind::NotObject, false),
                (Some(6), MessageDamageKind::MissingRole, false),
                (Some(7), MessageDamageKind::Shape, true),
                (Some(8), MessageDamageKind::TornTail, false),
            ]
        );
        assert_eq!(r.messages.len(), 3);
        assert_eq!(r.messages[2].role(), "user");
        assert_eq!(
            serde_json::to_string(&r.messages[2]).unwrap(),
            r#"{"role":"user","content":[null]}"#
        );
    }
}
