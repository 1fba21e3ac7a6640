//! Text helpers for values that go into records: tool outputs that are not valid UTF-8, and
//! truncation that never splits a code point.
//!
//! Records are serialized by serde_json, which escapes NUL and every other control character
//! (`\u0000`, `\n`, …), so any Rust `String` is written as valid JSON on one line. Bytes that are
//! not UTF-8 must become a `String` first: [`lossy_text`] does that the way the reference's
//! `TextDecoder` does (invalid sequences become U+FFFD).

use std::borrow::Cow;

/// Decodes tool output bytes as UTF-8, replacing invalid sequences with U+FFFD.
pub fn lossy_text(bytes: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

/// The longest prefix of `s` that is at most `max_bytes` long and ends on a character
/// boundary.
pub fn truncate_utf8(s: &str, max_bytes: usize) -> &str {
    if s.len() <= max_bytes {
        return s;
    }
    let mut end = max_bytes;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Like [`truncate_utf8`], appending `marker` (e.g. `"…[truncated]"`) when something was cut;
/// the result including the marker is at most `max_bytes` long when the marker fits.
pub fn truncate_with_marker(s: &str, max_bytes: usize, marker: &str) -> String {
    if s.len() <= max_bytes {
        return s.to_owned();
    }
    let keep = truncate_utf8(s, max_bytes.saturating_sub(marker.len()));
    let mut out = String::with_capacity(keep.len() + marker.len());
    out.push_str(keep);
    out.push_str(marker);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_keeps_code_points_whole() {
        let s = "aé😀b";
        for max in 0..=s.len() + 1 {
            let t = truncate_utf8(s, max);
            assert!(t.len() <= max && s.starts_with(t));
        }
        assert_eq!(truncate_utf8(s, 3), "aé");
        assert_eq!(truncate_utf8(s, 6), "aé");
        assert_eq!(truncate_utf8(s, 7), "aé😀");
        assert_eq!(truncate_with_marker("😀😀😀", 9, "…"), "😀…");
    }

    #[test]
    fn invalid_bytes_become_replacement_characters() {
        assert_eq!(lossy_text(b"a\xffb\0"), "a\u{fffd}b\0");
        let json = serde_json::to_string(&*lossy_text(b"a\xff\0\x01")).unwrap();
        assert_eq!(json, "\"a\u{fffd}\\u0000\\u0001\"");
    }
}
