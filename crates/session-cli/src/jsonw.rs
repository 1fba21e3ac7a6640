//! A tiny JSON object writer that keeps key order and splices raw JSON text in unchanged. It
//! writes the lines of the trash manifest (`gc`'s `manifest.jsonl`), a file the store keeps;
//! what the commands print as JSON is built from the rows of [`crate::json_rows`].
//!
//! A lone UTF-16 surrogate escape (`\ud83c` without its pair, as JavaScript writes a cut emoji)
//! in spliced text becomes `\ufffd` (docs/format.md "Lines"), so every line is strict JSON.
//! The streamed `export --format json` document is written piece by piece with it and
//! [`splice`]; byte-exact copies of stored lines (`show --raw`, `tail --raw`,
//! `export --format jsonl`) do not go through this writer.

/// Builds one JSON object; values are written in the order they are added.
#[derive(Debug, Default)]
pub(crate) struct JsonObj {
    buf: String,
}

impl JsonObj {
    pub(crate) fn new() -> Self {
        JsonObj {
            buf: String::from("{"),
        }
    }

    fn key(&mut self, key: &str) {
        if self.buf.len() > 1 {
            self.buf.push(',');
        }
        self.buf
            .push_str(&serde_json::to_string(key).unwrap_or_else(|_| "\"\"".into()));
        self.buf.push(':');
    }

    /// `key: raw` where `raw` is JSON text (an empty string writes `null`); lone surrogate
    /// escapes in it are written as `\ufffd`.
    pub(crate) fn raw(&mut self, key: &str, raw: &str) -> &mut Self {
        self.key(key);
        if raw.is_empty() {
            self.buf.push_str("null");
        } else {
            self.buf
                .push_str(&session_schema::surrogate::repair_str(raw));
        }
        self
    }

    /// `key: "value"`.
    pub(crate) fn str(&mut self, key: &str, value: &str) -> &mut Self {
        let v = serde_json::to_string(value).unwrap_or_else(|_| "null".into());
        self.raw(key, &v)
    }

    /// `key: "value"` or `null`.
    pub(crate) fn opt_str(&mut self, key: &str, value: Option<&str>) -> &mut Self {
        match value {
            Some(v) => self.str(key, v),
            None => self.raw(key, "null"),
        }
    }

    /// `key: n` for unsigned values.
    pub(crate) fn unum(&mut self, key: &str, n: u64) -> &mut Self {
        self.raw(key, &n.to_string())
    }

    /// `key: true|false`.
    pub(crate) fn bool(&mut self, key: &str, b: bool) -> &mut Self {
        self.raw(key, if b { "true" } else { "false" })
    }

    /// Adds `key` with `value` serialized by serde (`null` if it cannot be).
    pub(crate) fn ser<T: serde::Serialize + ?Sized>(&mut self, key: &str, value: &T) -> &mut Self {
        let v = serde_json::to_string(value).unwrap_or_else(|_| "null".into());
        self.raw(key, &v)
    }

    /// The finished object text.
    pub(crate) fn finish(&mut self) -> String {
        let mut s = std::mem::take(&mut self.buf);
        s.push('}');
        s
    }
}

/// Raw JSON text to write into a document that is streamed piece by piece instead of built
/// as one [`JsonObj`] (`export --format json`): as [`JsonObj::raw`] splices it, lone
/// surrogate escapes written as `\ufffd`, an empty text as `null`.
pub(crate) fn splice(raw: &str) -> std::borrow::Cow<'_, str> {
    if raw.is_empty() {
        std::borrow::Cow::Borrowed("null")
    } else {
        session_schema::surrogate::repair_str(raw)
    }
}

/// A JSON array of raw JSON texts (spliced as they are: the array reaches output only through
/// [`JsonObj::raw`]).
pub(crate) fn raw_array<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let mut s = String::from("[");
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(item);
    }
    s.push(']');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn spliced_lone_surrogate_escapes_become_replacement_characters() {
        let mut o = JsonObj::new();
        o.raw(
            "m",
            r#"[{"c":"cut \ud83c","p":"\ud83d\ude00","e":"\\udc00"}]"#,
        );
        o.raw("n", r#""\uDFFF""#);
        assert_eq!(
            o.finish(),
            r#"{"m":[{"c":"cut \ufffd","p":"\ud83d\ude00","e":"\\udc00"}],"n":"\ufffd"}"#
        );
    }

    proptest! {
        #[test]
        fn objects_are_valid_json_in_key_order(keys in proptest::collection::vec("\\PC{0,12}", 0..6), value in "\\PC{0,40}", n in any::<i64>()) {
            let mut o = JsonObj::new();
            for k in &keys {
                o.str(k, &value);
            }
            o.raw("n", &n.to_string());
            o.raw("arr", "[1,\"x\",null]");
            let text = o.finish();
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(&v["n"], &serde_json::Value::from(n));
            // Keys come out in insertion order.
            let mut pos = 0;
            for k in &keys {
                let needle = serde_json::to_string(k).unwrap();
                let at = text[pos..].find(&needle).map(|i| i + pos);
                prop_assert!(at.is_some());
                pos = at.unwrap_or(pos);
            }
        }
    }
}
