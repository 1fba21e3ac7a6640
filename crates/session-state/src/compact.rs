//! Whitespace compaction of JSON text.
//!
//! Raw JSON kept verbatim by session-schema ([`session_schema::RawJson`]) may come from a
//! pretty-printed legacy snapshot. The reference writes `JSON.stringify` output (compact), and
//! a message line must never contain a raw newline, so every line and `meta_json` value goes
//! through [`compact_json`] before it is stored.

/// Removes JSON insignificant whitespace (space, tab, CR, LF outside strings).
///
/// Works on bytes and never fails: string contents and escapes are copied unchanged, so valid
/// JSON stays valid and equal in value; input that is already compact is returned as is.
pub(crate) fn compact_json(input: &[u8]) -> Vec<u8> {
    if !needs_compaction(input) {
        return input.to_vec();
    }
    let mut out = Vec::with_capacity(input.len());
    let mut in_string = false;
    let mut escaped = false;
    for &b in input {
        if in_string {
            out.push(b);
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else {
            match b {
                b' ' | b'\t' | b'\r' | b'\n' => {}
                b'"' => {
                    in_string = true;
                    out.push(b);
                }
                _ => out.push(b),
            }
        }
    }
    out
}

/// Whether `input` has whitespace outside strings.
pub(crate) fn needs_compaction(input: &[u8]) -> bool {
    let mut in_string = false;
    let mut escaped = false;
    for &b in input {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else {
            match b {
                b' ' | b'\t' | b'\r' | b'\n' => return true,
                b'"' => in_string = true,
                _ => {}
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_only_outside_strings() {
        let input = b"{\n  \"a b\": [1, 2],\r\n\t\"c\": \"x \\\" y\\\\\" }";
        assert_eq!(
            compact_json(input),
            b"{\"a b\":[1,2],\"c\":\"x \\\" y\\\\\"}".to_vec()
        );
        assert!(!needs_compaction(b"{\"a\":\" \"}"));
    }
}
