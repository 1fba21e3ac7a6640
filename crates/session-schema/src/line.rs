//! Parsing one line into a record or message, and writing it back.
//!
//! Accepted around the JSON (docs/format.md "Lines"): a UTF-8 BOM, leading/trailing whitespace
//! and a CR before the LF. Lone surrogate escapes are repaired (see [`crate::surrogate`]).

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::ParseError;
use crate::message::BaseMessage;
use crate::parsed::Parsed;
use crate::record::Record;
use crate::state::SessionState;
use crate::surrogate::{self, RestorePlan};

/// Serializes a value as one compact JSON line ending in `\n` (the reference's
/// `JSON.stringify(value) + "\n"`).
///
/// # Errors
/// The value's serialization failed.
pub fn to_line<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = serde_json::to_vec(value)?;
    out.push(b'\n');
    Ok(out)
}

/// Strips a BOM and surrounding whitespace; returns the rest and whether a BOM was there.
pub fn trim_line(line: &[u8]) -> (&[u8], bool) {
    let (rest, bom) = match line.strip_prefix(b"\xEF\xBB\xBF") {
        Some(rest) => (rest, true),
        None => (line, false),
    };
    (rest.trim_ascii(), bom)
}

/// Parses one run-log line (spec §3).
///
/// # Errors
/// [`ParseError`]: empty, not UTF-8, not JSON (with `eof` for a cut line), not an object, no
/// `type`, or a known type whose fields do not fit.
///
/// # Examples
///
/// ```
/// use session_schema::{Record, SchemaMode, parse_record};
///
/// // A header of a newer schema version is read as far as it is understood.
/// let line = br#"{"type":"header","schema_version":2,"run_id":"r1","started_at":"2026-02-03T12:00:00.000Z","x_new":true}"#;
/// let parsed = parse_record(line)?;
/// let Record::Header(header) = &parsed.value else { unreachable!() };
/// assert_eq!(header.schema_mode(), SchemaMode::BestEffort { version: 2 });
/// assert_eq!(parsed.to_json()?, line);
///
/// // A line cut short by a crash is an error that says so.
/// let err = parse_record(br#"{"type":"run.end","run_id":"r1","ts":"2026-02"#).unwrap_err();
/// assert!(err.is_eof());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn parse_record(line: &[u8]) -> Result<Parsed<Record>, ParseError> {
    parse_tagged(line, "type")
}

/// Parses one line of a `messages/<session_id>.jsonl` file.
///
/// # Errors
/// As [`parse_record`], with `role` as the discriminator.
pub fn parse_message(line: &[u8]) -> Result<Parsed<BaseMessage>, ParseError> {
    parse_tagged(line, "role")
}

/// Parses a whole `SessionState` document (a legacy `state/<id>.json` snapshot).
///
/// # Errors
/// As [`parse_record`]; a missing `session_id`/`updated_at`/`messages` is a shape error.
pub fn parse_session_state(text: &[u8]) -> Result<Parsed<SessionState>, ParseError> {
    parse_with(text, None)
}

/// Parses any value that may carry a discriminator key (`tag`).
///
/// # Errors
/// See [`parse_record`].
pub fn parse_tagged<T: DeserializeOwned>(
    line: &[u8],
    tag: &'static str,
) -> Result<Parsed<T>, ParseError> {
    parse_with(line, Some(tag))
}

/// Parses one run-log line that the caller has already checked to be valid UTF-8 (for
/// example with a SIMD validator over a whole buffer), skipping this crate's own check.
///
/// # Errors
/// As [`parse_record`], never [`ParseError::InvalidUtf8`].
pub fn parse_record_str(line: &str) -> Result<Parsed<Record>, ParseError> {
    let (text, had_bom) = match line.strip_prefix('\u{feff}') {
        Some(rest) => (rest, true),
        None => (line, false),
    };
    let text = text.trim_ascii();
    if text.is_empty() {
        return Err(ParseError::Empty);
    }
    parse_str_with(text, had_bom, Some("type"))
}

fn parse_with<T: DeserializeOwned>(
    line: &[u8],
    tag: Option<&'static str>,
) -> Result<Parsed<T>, ParseError> {
    let (text, had_bom) = trim_line(line);
    if text.is_empty() {
        return Err(ParseError::Empty);
    }
    let str_text = match std::str::from_utf8(text) {
        Ok(s) => s,
        Err(e) => {
            // `text` is a sub-slice of `line`; its start is where trimming stopped.
            let start = text.as_ptr() as usize - line.as_ptr() as usize;
            return Err(ParseError::InvalidUtf8 {
                offset: start + e.valid_up_to(),
            });
        }
    };
    parse_str_with(str_text, had_bom, tag)
}

/// Parses trimmed, non-empty, valid UTF-8 text.
///
/// Lone surrogate escapes are repaired wherever they are, also inside raw fields that are only
/// validated here ([`crate::RawJson`], [`crate::Lazy`]): serde_json accepts them there, and
/// they would otherwise reach every later decode and every JSON document built from the record.
fn parse_str_with<T: DeserializeOwned>(
    str_text: &str,
    had_bom: bool,
    tag: Option<&'static str>,
) -> Result<Parsed<T>, ParseError> {
    let mut found = if surrogate::may_hold_surrogate_escape(str_text) {
        surrogate::find_lone_surrogates(str_text.as_bytes())
    } else {
        Vec::new()
    };
    let repaired = (!found.is_empty()).then(|| surrogate::repair(str_text.as_bytes(), &found));
    // Six ASCII bytes were replaced by six ASCII bytes: the repaired text is still UTF-8.
    let text = match repaired.as_deref().map(std::str::from_utf8) {
        Some(Ok(fixed)) => fixed,
        _ => {
            found.clear();
            str_text
        }
    };
    match serde_json::from_str::<T>(text) {
        Ok(value) => Ok(Parsed {
            value,
            restore: match &repaired {
                Some(fixed) if !found.is_empty() => RestorePlan::new(fixed, &found),
                _ => RestorePlan::default(),
            },
            lone_surrogates: found,
            had_bom,
        }),
        Err(err) => Err(classify(err, text, tag)),
    }
}

fn classify(err: serde_json::Error, text: &str, tag: Option<&'static str>) -> ParseError {
    use serde_json::error::Category;
    match err.classify() {
        Category::Syntax | Category::Eof | Category::Io => ParseError::Syntax {
            column: err.column(),
            eof: err.is_eof(),
            message: err.to_string(),
            source: err,
        },
        Category::Data => {
            if !text.starts_with('{') {
                return ParseError::NotObject;
            }
            let kind = tag.and_then(|tag| {
                serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(text)
                    .ok()
                    .map(|m| m.get(tag).cloned())
            });
            match (tag, kind) {
                (Some(key), Some(None)) => ParseError::MissingTag { key },
                (_, kind) => ParseError::Shape {
                    kind: kind.flatten().map(|v| match v {
                        serde_json::Value::String(s) => s,
                        other => other.to_string(),
                    }),
                    column: err.column(),
                    message: err.to_string(),
                    source: err,
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_record_str_agrees_with_parse_record() {
        for line in [
            &b"\xEF\xBB\xBF {\"type\":\"run.end\",\"run_id\":\"r\",\"ts\":\"t\",\"outcome\":\"completed\"}\r"[..],
            b"{\"type\":\"x.acme\",\"s\":\"\\ud83d\"}",
            b"{\"type\":\"run.end\"}",
            b"{\"type\":",
            b"  ",
        ] {
            let text = std::str::from_utf8(line).unwrap();
            let a = parse_record(line).map(|p| (p.to_json().unwrap(), p.had_bom, p.lone_surrogates));
            let b = parse_record_str(text).map(|p| (p.to_json().unwrap(), p.had_bom, p.lone_surrogates));
            assert_eq!(format!("{a:?}"), format!("{b:?}"));
        }
    }
}
