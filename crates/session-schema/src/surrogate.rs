//! Lone UTF-16 surrogate escapes (`"\ud83c"` without its pair).
//!
//! JavaScript's `JSON.stringify` writes a lone surrogate as a `\udXXX` escape; serde_json
//! rejects it when decoding into a `String`. We repair such a line by replacing each lone escape
//! with `\ufffd` — the same six bytes long, so every byte offset stays valid — and remember the
//! originals so that re-serialization can put them back (see `RestorePlan`).

/// One lone surrogate escape that was replaced by `\ufffd`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoneSurrogate {
    /// Byte offset of the backslash within the line (after BOM and whitespace trimming).
    pub offset: usize,
    /// The original escape, e.g. `\ud83c` (six ASCII bytes, case kept).
    pub escape: [u8; 6],
}

impl LoneSurrogate {
    /// The original escape as text.
    pub fn escape_str(&self) -> &str {
        std::str::from_utf8(&self.escape).unwrap_or("\\ufffd")
    }
}

fn hex4(b: &[u8]) -> Option<u16> {
    let s = std::str::from_utf8(b.get(..4)?).ok()?;
    u16::from_str_radix(s, 16).ok()
}

/// Finds every lone surrogate escape inside JSON strings of `line`.
pub fn find_lone_surrogates(line: &[u8]) -> Vec<LoneSurrogate> {
    let mut out = Vec::new();
    let mut in_string = false;
    let mut i = 0;
    while i < line.len() {
        let b = line[i];
        if !in_string {
            if b == b'"' {
                in_string = true;
            }
            i += 1;
            continue;
        }
        match b {
            b'"' => {
                in_string = false;
                i += 1;
            }
            b'\\' => {
                if line.get(i + 1) == Some(&b'u') {
                    let Some(n) = line.get(i + 2..).and_then(hex4) else {
                        i += 2;
                        continue;
                    };
                    if (0xD800..0xDC00).contains(&n) {
                        let paired = line.get(i + 6) == Some(&b'\\')
                            && line.get(i + 7) == Some(&b'u')
                            && line
                                .get(i + 8..)
                                .and_then(hex4)
                                .is_some_and(|m| (0xDC00..0xE000).contains(&m));
                        if paired {
                            i += 12;
                            continue;
                        }
                        push(&mut out, line, i);
                    } else if (0xDC00..0xE000).contains(&n) {
                        push(&mut out, line, i);
                    }
                    i += 6;
                } else {
                    i += 2;
                }
            }
            _ => i += 1,
        }
    }
    out
}

fn push(out: &mut Vec<LoneSurrogate>, line: &[u8], at: usize) {
    let mut escape = [0u8; 6];
    escape.copy_from_slice(&line[at..at + 6]);
    out.push(LoneSurrogate { offset: at, escape });
}

/// Returns `line` with each lone surrogate escape replaced by `\ufffd`.
pub fn repair(line: &[u8], found: &[LoneSurrogate]) -> Vec<u8> {
    let mut fixed = line.to_vec();
    for s in found {
        fixed[s.offset..s.offset + 6].copy_from_slice(b"\\ufffd");
    }
    fixed
}

/// Positions of every U+FFFD inside JSON strings of `json`, raw (`EF BF BD`) or escaped
/// (`\ufffd`, any case), as `(start, len)`.
fn replacement_chars(json: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut in_string = false;
    let mut i = 0;
    while i < json.len() {
        let b = json[i];
        if !in_string {
            in_string = b == b'"';
            i += 1;
            continue;
        }
        match b {
            b'"' => {
                in_string = false;
                i += 1;
            }
            b'\\' => {
                if json.get(i + 1) == Some(&b'u') {
                    if json.get(i + 2..).and_then(hex4) == Some(0xFFFD) {
                        out.push((i, 6));
                    }
                    i += 6;
                } else {
                    i += 2;
                }
            }
            0xEF if json.get(i + 1..i + 3) == Some(&[0xBF, 0xBD]) => {
                out.push((i, 3));
                i += 3;
            }
            _ => i += 1,
        }
    }
    out
}

/// How to put lone escapes back after re-serialization: the total number of U+FFFD characters
/// in the repaired line and, for each repaired one, its ordinal among them and its original escape.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RestorePlan {
    total: usize,
    at: Vec<(usize, [u8; 6])>,
}

impl RestorePlan {
    /// Plans the restoration for a line repaired by [`repair`].
    pub(crate) fn new(repaired: &[u8], found: &[LoneSurrogate]) -> Self {
        let chars = replacement_chars(repaired);
        let at = chars
            .iter()
            .enumerate()
            .filter_map(|(k, &(start, _))| {
                found
                    .iter()
                    .find(|s| s.offset == start)
                    .map(|s| (k, s.escape))
            })
            .collect();
        RestorePlan {
            total: chars.len(),
            at,
        }
    }

    /// Puts the original lone escapes back into `output`, the re-serialization of the repaired
    /// line.
    ///
    /// The k-th U+FFFD of the output corresponds to the k-th U+FFFD of the repaired input when
    /// the strings were not changed in between; if the counts differ, `output` is returned
    /// unchanged (the repaired characters stay U+FFFD).
    pub(crate) fn apply(&self, output: Vec<u8>) -> Vec<u8> {
        if self.at.is_empty() {
            return output;
        }
        let chars = replacement_chars(&output);
        if chars.len() != self.total {
            return output;
        }
        let mut result = Vec::with_capacity(output.len() + self.at.len() * 3);
        let mut last = 0;
        for &(k, escape) in &self.at {
            let (start, len) = chars[k];
            result.extend_from_slice(&output[last..start]);
            result.extend_from_slice(&escape);
            last = start + len;
        }
        result.extend_from_slice(&output[last..]);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_only_lone_halves() {
        let line = br#"{"a":"x\ud83c y","b":"\ud83d\ude00","c":"\\ud83c","d":"\uDC00"}"#;
        let found = find_lone_surrogates(line);
        let escapes: Vec<&str> = found.iter().map(LoneSurrogate::escape_str).collect();
        assert_eq!(escapes, ["\\ud83c", "\\uDC00"]);
        let fixed = repair(line, &found);
        assert_eq!(fixed.len(), line.len());
        let plan = RestorePlan::new(&fixed, &found);
        assert_eq!(plan.apply(fixed.clone()), line);
        // Re-serialized strings hold raw U+FFFD, which is mapped back too.
        let value: serde_json::Value = serde_json::from_slice(&fixed).unwrap();
        let out = serde_json::to_vec(&value).unwrap();
        assert_eq!(
            plan.apply(out),
            r#"{"a":"x\ud83c y","b":"😀","c":"\\ud83c","d":"\uDC00"}"#
                .as_bytes()
                .to_vec()
        );
    }
}
