//! Run and session ids.
//!
//! Reading accepts any string: files in the wild are not all UUIDs. Anything that becomes part of
//! a path (`<run_id>.jsonl`, `messages/<session_id>.jsonl`, `state/<session_id>.json`) must first
//! pass [`is_safe_id`] — the writers in session-jsonl and session-state do so before touching the
//! file system (compat notes §5 item 6).

use std::fmt;

/// Longest id accepted by [`is_safe_id`], in bytes (a UUID is 36).
pub const MAX_ID_LEN: usize = 128;

/// Why an id cannot be used as a file name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdError {
    /// The id is the empty string.
    #[error("id is empty")]
    Empty,
    /// The id is longer than [`MAX_ID_LEN`] bytes.
    #[error("id is {len} bytes long, more than the {max} allowed")]
    TooLong {
        /// Length in bytes.
        len: usize,
        /// The limit, [`MAX_ID_LEN`].
        max: usize,
    },
    /// The id contains a character that could leave the directory or confuse a file system.
    #[error("id {id:?} contains the forbidden character {ch:?}")]
    ForbiddenChar {
        /// The id as given.
        id: String,
        /// The first forbidden character.
        ch: char,
    },
    /// The id is `.`/`..` or starts with a dot.
    #[error("id {id:?} starts with a dot")]
    LeadingDot {
        /// The id as given.
        id: String,
    },
}

/// Checks that `id` is usable as a single file-name component on every platform.
///
/// Allowed: ASCII letters, digits, `-`, `_`, `.` (not first) and `:`-free printable ASCII
/// subsets thereof; 1 to [`MAX_ID_LEN`] bytes. Refused: empty, `/`, `\`, NUL and every other
/// control character, `..`/leading dot, anything non-ASCII, and the characters Windows
/// reserves (`<>:"|?*`).
///
/// # Errors
/// [`IdError`] naming the first problem.
pub fn check_id(id: &str) -> Result<(), IdError> {
    if id.is_empty() {
        return Err(IdError::Empty);
    }
    if id.len() > MAX_ID_LEN {
        return Err(IdError::TooLong {
            len: id.len(),
            max: MAX_ID_LEN,
        });
    }
    if id.starts_with('.') {
        return Err(IdError::LeadingDot { id: id.to_owned() });
    }
    if let Some(ch) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '+' | '@' | '=')))
    {
        return Err(IdError::ForbiddenChar {
            id: id.to_owned(),
            ch,
        });
    }
    Ok(())
}

/// Whether [`check_id`] accepts `id`.
pub fn is_safe_id(id: &str) -> bool {
    check_id(id).is_ok()
}

/// An id that passed [`check_id`]: safe to join onto a directory.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SafeId(String);

impl SafeId {
    /// Validates `id`.
    ///
    /// # Errors
    /// See [`check_id`].
    pub fn new(id: impl Into<String>) -> Result<Self, IdError> {
        let id = id.into();
        check_id(&id)?;
        Ok(SafeId(id))
    }

    /// A fresh random UUIDv4 id (what the reference uses for runs and sessions).
    pub fn new_v4() -> Self {
        SafeId(uuid::Uuid::new_v4().to_string())
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SafeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SafeId({:?})", self.0)
    }
}

impl fmt::Display for SafeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for SafeId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// Whether `id` is a UUID in the canonical hyphenated form (what the reference writes).
pub fn is_uuid(id: &str) -> bool {
    id.len() == 36 && uuid::Uuid::parse_str(id).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_uuids_and_common_ids() {
        for id in [
            "8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a",
            "session_1",
            "legacy_1",
            "run.v2",
            "a",
        ] {
            assert!(is_safe_id(id), "{id}");
        }
        assert!(is_uuid(SafeId::new_v4().as_str()));
    }

    #[test]
    fn refuses_everything_that_could_escape() {
        for id in [
            "", "..", ".", "../x", "../../x", "a/b", "a\\b", "a\0b", ".hidden", "a b", "a\nb", "é",
            "C:x", "a*b",
        ] {
            assert!(!is_safe_id(id), "{id:?}");
        }
        assert!(matches!(
            check_id(&"x".repeat(MAX_ID_LEN + 1)),
            Err(IdError::TooLong { .. })
        ));
        assert!(is_safe_id(&"x".repeat(MAX_ID_LEN)));
    }
}
