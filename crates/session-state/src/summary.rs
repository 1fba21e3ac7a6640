//! Summary columns of `session_state` (compat notes §2.6, §2.10, §2.11).
//!
//! Everything here works on raw JSON text so that messages stay opaque: a message the typed
//! model cannot represent (a `null` content part, object content) still gets a summary instead
//! of failing the save, which is where the reference throws a `TypeError` (compat §5 item 14).

use std::collections::BTreeMap;

use serde_json::Value;
use serde_json::value::RawValue;
use session_schema::{BaseMessage, RawJson, surrogate};

use crate::compact::compact_json;

/// The three derived columns of a `session_state` row.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Summary {
    /// `messages.length`: every message, all roles (column `message_count`).
    pub message_count: u64,
    /// Display rendering of the last user message that has a `content` key
    /// (column `last_user_message`); `None` when there is no such message (column `NULL`).
    /// Never truncated, like the reference.
    pub last_user_message: Option<String>,
    /// `meta.codelia_workspace_root` trimmed, when it is a string whose trim is non-empty
    /// (column `workspace_root`); otherwise `None` (column `NULL`).
    pub workspace_root: Option<String>,
}

/// Summarises typed messages and meta exactly as the reference's `save` does (compat §2.6,
/// §2.10, §2.11).
///
/// Only the last user message is rendered; it is serialized and rendered from its JSON, so the
/// result is byte-identical to the reference's `JSON.stringify` fallback. Never fails.
pub fn summarize(messages: &[BaseMessage], meta: Option<&RawJson>) -> Summary {
    summarize_serialized(messages, meta, |_| None, None)
}

/// [`summarize`] for a save that knows part of the answer already: `line_of(i)` is message
/// `i`'s JSON line when it is at hand (a user message is then read from it instead of being
/// serialized again), and `known = Some((k, last))` says that `messages[..k]` are the list
/// whose last user message rendered as `last` (a save's remembered prefix), so that only the
/// messages after them are looked at.
pub(crate) fn summarize_serialized<'a>(
    messages: &[BaseMessage],
    meta: Option<&RawJson>,
    line_of: impl Fn(usize) -> Option<&'a [u8]>,
    known: Option<(usize, Option<String>)>,
) -> Summary {
    let from = known.as_ref().map_or(0, |(k, _)| (*k).min(messages.len()));
    let rendered = |(i, m): (usize, &BaseMessage)| {
        if m.role() != "user" {
            return None;
        }
        match line_of(i) {
            Some(line) => last_user_from_message_json(line),
            None => last_user_from_message_json(&serde_json::to_vec(m).ok()?),
        }
    };
    let tail = messages.get(from..).unwrap_or(&[]);
    let last_user_message = tail
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, m)| rendered((from + i, m)))
        .or(known.and_then(|(_, last)| last));
    Summary {
        message_count: messages.len() as u64,
        last_user_message,
        workspace_root: workspace_root_from_meta(meta.map(RawJson::get)),
    }
}

/// Summarises messages given as raw JSON lines (one message object per line, as in
/// `messages/<id>.jsonl`) and meta given as JSON text.
///
/// Lines that are not JSON objects still count towards `message_count` when they are valid
/// JSON (the reference counts every array element); a line that is not JSON at all counts too,
/// since the caller decided it is a message. Never fails.
pub fn summarize_lines<L: AsRef<[u8]>>(lines: &[L], meta: Option<&str>) -> Summary {
    let last_user_message = lines
        .iter()
        .rev()
        .find_map(|line| last_user_from_message_json(line.as_ref()));
    Summary {
        message_count: lines.len() as u64,
        last_user_message,
        workspace_root: workspace_root_from_meta(meta),
    }
}

/// `Some(rendering)` when `json` is a message object with `role == "user"` and a `content`
/// key.
fn last_user_from_message_json(json: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(json).ok()?;
    // A shallow parse: values stay raw, so only the winning `content` is walked.
    let map: BTreeMap<String, Box<RawValue>> = serde_json::from_str(text).ok()?;
    let (role, _) = surrogate::decode::<String>(map.get("role")?.get()).ok()?;
    if role != "user" {
        return None;
    }
    map.get("content").map(|c| display_content_json(c.get()))
}

/// Display-mode `stringifyContent` over the JSON text of a `content` value (compat §2.10).
///
/// * `null` → `""`; a string → verbatim;
/// * an array → each part rendered and joined with `""`: `text` → its `text` (missing → empty),
///   `image_url` → `[image]`, `document` → `[document]`, `other` →
///   `[other:<provider>/<kind>]`, any other part (unknown type, `null`, not an object) →
///   `[content]`; when the joined result is empty, the compact JSON of the content;
/// * anything else (object, number, boolean) → its compact JSON (the reference throws here;
///   deviation documented in the crate README).
pub fn display_content_json(content: &str) -> String {
    // A lone surrogate escape (a cut emoji) is shown as U+FFFD, not as the JSON fallback.
    let value: Value = match surrogate::decode(content) {
        Ok((v, _)) => v,
        Err(_) => return compact_text(content),
    };
    match value {
        Value::Null => String::new(),
        Value::String(s) => s,
        Value::Array(parts) => {
            let mut out = String::new();
            for part in &parts {
                push_part(&mut out, part);
            }
            if out.is_empty() {
                compact_text(content)
            } else {
                out
            }
        }
        _ => compact_text(content),
    }
}

fn push_part(out: &mut String, part: &Value) {
    let Value::Object(map) = part else {
        out.push_str("[content]");
        return;
    };
    match map.get("type").and_then(Value::as_str) {
        Some("text") => {
            if let Some(Value::String(t)) = map.get("text") {
                out.push_str(t);
            }
        }
        Some("image_url") => out.push_str("[image]"),
        Some("document") => out.push_str("[document]"),
        Some("other") => {
            out.push_str("[other:");
            push_template(out, map.get("provider"));
            out.push('/');
            push_template(out, map.get("kind"));
            out.push(']');
        }
        _ => out.push_str("[content]"),
    }
}

/// What a JavaScript template literal makes of a value: strings verbatim, `undefined` for an
/// absent key, compact JSON for the rest (close to `String(x)` for numbers and booleans).
fn push_template(out: &mut String, value: Option<&Value>) {
    match value {
        None => out.push_str("undefined"),
        Some(Value::String(s)) => out.push_str(s),
        Some(Value::Null) => out.push_str("null"),
        Some(other) => out.push_str(&other.to_string()),
    }
}

fn compact_text(text: &str) -> String {
    String::from_utf8(compact_json(text.as_bytes())).unwrap_or_else(|_| text.to_owned())
}

/// `workspace_root` column from the meta JSON text (compat §2.11): the trimmed
/// `codelia_workspace_root` when it is a string with a non-empty trim, else `None`.
///
/// Trimming follows JavaScript's `String.prototype.trim` (Unicode white space and U+FEFF).
pub fn workspace_root_from_meta(meta: Option<&str>) -> Option<String> {
    let map: BTreeMap<String, Box<RawValue>> = serde_json::from_str(meta?).ok()?;
    let (root, _) = surrogate::decode::<String>(map.get("codelia_workspace_root")?.get()).ok()?;
    let t = js_trim(&root);
    (!t.is_empty()).then(|| t.to_owned())
}

/// JavaScript `trim()`: Unicode `White_Space`, line terminators and U+FEFF.
pub(crate) fn js_trim(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_rules_match_the_reference() {
        let cases = [
            (
                r#"[{"type":"text","text":"hello"},{"type":"image_url","image_url":{"url":"x"}},{"type":"document","source":{"data":"x","media_type":"application/pdf"}},{"type":"other","provider":"custom","kind":"blob","payload":{}},{"type":"weird"}]"#,
                "hello[image][document][other:custom/blob][content]",
            ),
            ("[]", "[]"),
            (
                r#"[{"type":"text","text":""}]"#,
                r#"[{"type":"text","text":""}]"#,
            ),
            ("null", ""),
            (r#""plain""#, "plain"),
            (r#"[{"type":"text"}]"#, r#"[{"type":"text"}]"#),
            (r#"[null,{"type":"text","text":"a"}]"#, "[content]a"),
            (r#"{"b":1,"a":2}"#, r#"{"b":1,"a":2}"#),
            (r#"[ {"type" : "other"} ]"#, "[other:undefined/undefined]"),
            (
                r#"[ {"z":1, "type":"text","text":""} ]"#,
                r#"[{"z":1,"type":"text","text":""}]"#,
            ),
        ];
        for (input, want) in cases {
            assert_eq!(display_content_json(input), want, "{input}");
        }
    }

    #[test]
    fn last_user_message_scans_from_the_end() {
        let lines = [
            r#"{"role":"user","content":"first"}"#,
            r#"{"role":"assistant","content":"x"}"#,
            r#"{"role":"user"}"#,
            r#"[1,2]"#,
        ];
        let s = summarize_lines(
            &lines,
            Some(r#"{"codelia_workspace_root":"  /repo/main \n"}"#),
        );
        assert_eq!(s.message_count, 4);
        assert_eq!(s.last_user_message.as_deref(), Some("first"));
        assert_eq!(s.workspace_root.as_deref(), Some("/repo/main"));

        let s = summarize_lines(&[r#"{"role":"user","content":null}"#], Some("[]"));
        assert_eq!(s.last_user_message.as_deref(), Some(""));
        assert_eq!(s.workspace_root, None);
        let s = summarize_lines(&[r#"{"role":"assistant","content":"a"}"#], None);
        assert_eq!(s.last_user_message, None);
    }

    #[test]
    fn workspace_root_needs_a_non_blank_string() {
        for meta in [
            r#"{"codelia_workspace_root":"   "}"#,
            r#"{"codelia_workspace_root":5}"#,
            r#"{}"#,
            "null",
            "not json",
        ] {
            assert_eq!(workspace_root_from_meta(Some(meta)), None, "{meta}");
        }
        assert_eq!(
            workspace_root_from_meta(Some("{\"codelia_workspace_root\":\"\u{feff}/a\u{3000}\"}")),
            Some("/a".to_owned())
        );
    }

    #[test]
    fn typed_messages_summarise_like_raw_lines() {
        let lines = [
            r#"{"role":"system","content":"s"}"#,
            r#"{"role":"user","content":[{"type":"text","text":"hello"},{"type":"image_url","image_url":{"url":"data:x"}},{"type":"other","provider":"custom","kind":"blob","payload":{"a":1}}]}"#,
        ];
        let typed: Vec<BaseMessage> = lines
            .iter()
            .map(|l| session_schema::parse_message(l.as_bytes()).unwrap().value)
            .collect();
        let meta = RawJson::from_json(r#"{"codelia_workspace_root":"/repo/main"}"#).unwrap();
        let a = summarize(&typed, Some(&meta));
        let b = summarize_lines(&lines, Some(meta.get()));
        assert_eq!(a, b);
        assert_eq!(
            a.last_user_message.as_deref(),
            Some("hello[image][other:custom/blob]")
        );
        assert_eq!(a.message_count, 2);
    }
}
