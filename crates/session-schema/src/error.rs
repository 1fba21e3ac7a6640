//! Errors of this crate.

/// Why a line could not be turned into a record or message.
///
/// Positions are 1-based columns within the line (after a leading BOM), as serde_json reports
/// them. The categories follow serde_json's: syntax (not JSON), end of input (a cut line), and
/// data (valid JSON of the wrong shape).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    /// The line holds only whitespace.
    #[error("line is empty")]
    Empty,
    /// The line is not valid UTF-8.
    #[error("line is not valid UTF-8 (first bad byte at offset {offset})")]
    InvalidUtf8 {
        /// Byte offset of the first invalid byte within the line.
        offset: usize,
    },
    /// The line is not JSON (`eof`: it ends in the middle of a value, as a torn write does).
    #[error("line is not valid JSON at column {column}: {message}")]
    Syntax {
        /// 1-based column of the error.
        column: usize,
        /// Whether the JSON ended early (a cut line) rather than being malformed.
        eof: bool,
        /// serde_json's description.
        message: String,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
    /// The line is JSON but not an object.
    #[error("line is JSON but not an object")]
    NotObject,
    /// The object has no `type` (`role` for messages).
    #[error("object has no `{key}` field")]
    MissingTag {
        /// The discriminator key (`type` or `role`).
        key: &'static str,
    },
    /// The JSON does not fit the schema of its type.
    #[error("{} does not fit the schema at column {column}: {message}", kind.as_deref().map(|k| format!("record of type `{k}`")).unwrap_or_else(|| "value".to_owned()))]
    Shape {
        /// The record `type`/message `role` when it could be read.
        kind: Option<String>,
        /// 1-based column of the error.
        column: usize,
        /// serde_json's description.
        message: String,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
}

impl ParseError {
    /// Whether the line looks cut short (a torn write): JSON that ended in the middle.
    pub fn is_eof(&self) -> bool {
        matches!(self, ParseError::Syntax { eof: true, .. })
    }

    /// Whether the line was valid JSON of the wrong shape (its raw JSON is still usable).
    pub fn is_shape(&self) -> bool {
        matches!(
            self,
            ParseError::Shape { .. } | ParseError::MissingTag { .. } | ParseError::NotObject
        )
    }
}
