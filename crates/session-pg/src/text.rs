//! Small text rules shared with the local store, so that a listing of the shared store reads
//! exactly like a listing of the same data on disk: the UTC sort key of a `started_at`, the
//! normalised workspace root, the session summary columns (message count, display of the last
//! user message, trimmed workspace root). They follow session-state's rules (compat notes
//! §2.6, §2.10, §2.11); `tests/parity.rs` checks them against session-state.

use std::collections::BTreeMap;

use serde_json::Value;
use serde_json::value::RawValue;
use session_schema::{BaseMessage, RawJson, Timestamp};

/// Text for a PostgreSQL `text` column: `text` refuses NUL, so a NUL (possible in a string
/// decoded from a `\u0000` escape) becomes U+FFFD. Stored bytes are never changed; only
/// derived columns go through this.
pub(crate) fn pg_text(s: &str) -> String {
    if s.contains('\0') {
        s.replace('\0', "\u{fffd}")
    } else {
        s.to_owned()
    }
}

/// [`pg_text`] of an optional value.
pub(crate) fn pg_opt(s: Option<&str>) -> Option<String> {
    s.map(pg_text)
}

/// The listing key of a `started_at`: the instant in UTC as `YYYY-MM-DDTHH:MM:SS.mmmZ`;
/// `None` when it is not an RFC 3339 time or its year has no four-digit form.
pub(crate) fn utc_key(started_at: &str) -> Option<String> {
    let dt = Timestamp::from_raw(started_at.to_owned()).parse()?;
    let utc = dt.to_offset(time::UtcOffset::UTC);
    (0..=9999)
        .contains(&utc.year())
        .then(|| Timestamp::from_datetime(utc).as_str().to_owned())
}

/// A `since`/`until` bound as a listing key: an RFC 3339 time in UTC, else the text as given.
pub(crate) fn bound_key(s: &str) -> String {
    utc_key(s).unwrap_or_else(|| s.to_owned())
}

/// JavaScript `trim()`: Unicode white space and U+FEFF.
pub(crate) fn js_trim(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}')
}

/// A workspace root for comparison: trimmed, made absolute against the current directory,
/// `.`/`..`/empty segments resolved lexically, no trailing `/` (the root stays `/`).
pub fn normalize_workspace_root(root: &str) -> String {
    let trimmed = js_trim(root);
    let joined;
    let path = if trimmed.starts_with('/') {
        trimmed
    } else {
        joined = match std::env::current_dir() {
            Ok(cwd) => format!("{}/{}", cwd.to_string_lossy(), trimmed),
            Err(_) => format!("/{trimmed}"),
        };
        &joined
    };
    let mut parts: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    let mut out = String::with_capacity(path.len());
    for p in &parts {
        out.push('/');
        out.push_str(p);
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

/// The summary columns of a session row.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct SessionSummary {
    pub(crate) message_count: u64,
    pub(crate) last_user_message: Option<String>,
    pub(crate) workspace_root: Option<String>,
}

/// Summarises messages and meta as the reference's `save` does.
pub(crate) fn summarize(messages: &[BaseMessage], meta: Option<&RawJson>) -> SessionSummary {
    let last_user_message = messages.iter().rev().find_map(|m| {
        if m.role() != "user" {
            return None;
        }
        let json = serde_json::to_vec(m).ok()?;
        last_user_from_message_json(&json)
    });
    SessionSummary {
        message_count: messages.len() as u64,
        last_user_message,
        workspace_root: workspace_root_from_meta(meta.map(RawJson::get)),
    }
}

fn last_user_from_message_json(json: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(json).ok()?;
    let map: BTreeMap<String, Box<RawValue>> = serde_json::from_str(text).ok()?;
    let role: String = serde_json::from_str(map.get("role")?.get()).ok()?;
    if role != "user" {
        return None;
    }
    map.get("content").map(|c| display_content_json(c.get()))
}

/// Display rendering of a `content` value's JSON text (compat notes §2.10): `null` → `""`,
/// a string verbatim, parts rendered and joined (text, `[image]`, `[document]`,
/// `[other:<provider>/<kind>]`, `[content]`), an empty rendering or any other value as its
/// compact JSON.
pub(crate) fn display_content_json(content: &str) -> String {
    let value: Value = match serde_json::from_str(content) {
        Ok(v) => v,
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

fn push_template(out: &mut String, value: Option<&Value>) {
    match value {
        None => out.push_str("undefined"),
        Some(Value::String(s)) => out.push_str(s),
        Some(Value::Null) => out.push_str("null"),
        Some(other) => out.push_str(&other.to_string()),
    }
}

/// JSON text without insignificant white space (string contents untouched, key order kept).
fn compact_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    for c in text.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else {
            match c {
                ' ' | '\t' | '\r' | '\n' => {}
                '"' => {
                    in_string = true;
                    out.push(c);
                }
                _ => out.push(c),
            }
        }
    }
    out
}

/// The trimmed `meta.codelia_workspace_root` when it is a string with a non-empty trim.
pub(crate) fn workspace_root_from_meta(meta: Option<&str>) -> Option<String> {
    let map: BTreeMap<String, Box<RawValue>> = serde_json::from_str(meta?).ok()?;
    let root: String = serde_json::from_str(map.get("codelia_workspace_root")?.get()).ok()?;
    let t = js_trim(&root);
    (!t.is_empty()).then(|| t.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nul_never_reaches_a_text_column() {
        assert_eq!(pg_text("a\0b"), "a\u{fffd}b");
        assert_eq!(pg_text("plain"), "plain");
    }

    #[test]
    fn utc_keys_and_bounds() {
        assert_eq!(
            utc_key("2026-03-05T01:00:00.000+09:00").as_deref(),
            Some("2026-03-04T16:00:00.000Z")
        );
        assert_eq!(utc_key("not a time"), None);
        assert_eq!(
            bound_key("2026-03-02T00:00:00Z"),
            "2026-03-02T00:00:00.000Z"
        );
        assert_eq!(bound_key("garbage"), "garbage");
    }

    #[test]
    fn workspace_roots_normalise() {
        assert_eq!(normalize_workspace_root("/w/a/"), "/w/a");
        assert_eq!(normalize_workspace_root(" /w/./b/../a "), "/w/a");
        assert_eq!(normalize_workspace_root("/"), "/");
    }

    #[test]
    fn display_rules() {
        for (input, want) in [
            (
                r#"[{"type":"text","text":"hello"},{"type":"image_url","image_url":{"url":"x"}},{"type":"other","provider":"custom","kind":"blob"},{"type":"weird"}]"#,
                "hello[image][other:custom/blob][content]",
            ),
            ("[]", "[]"),
            ("null", ""),
            (r#""plain""#, "plain"),
            (r#"[ {"type" : "other"} ]"#, "[other:undefined/undefined]"),
            (r#"{"b": 1, "a": "x y"}"#, r#"{"b":1,"a":"x y"}"#),
        ] {
            assert_eq!(display_content_json(input), want, "{input}");
        }
    }
}
