//! What a messages file held when a rewrite of it was committed (`session_files.pending_base`),
//! below both the bookkeeping reads (`stored`) and the digest migration (`redigest`) that the
//! connection setup registers.

use std::io::Read;
use std::path::Path;

use crate::error::{Result, StateError};

/// The messages file a committed rewrite replaces, as it was at the commit: recorded in
/// `session_files.pending_base` so that the roll-forward of an interrupted rename can prove
/// nobody replaced the file since (compat: the reference may save the session in between).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Base {
    /// There was no messages file.
    Missing,
    /// The file's size, line count and digest chain (see `fsutil::digest_lines`).
    File { len: u64, lines: u64, digest: u64 },
}

impl Base {
    /// The column's text: `g<generation> missing` or `g<generation> <len> <lines> <digest>`
    /// (digest in 16 hex digits), so that a value left by an older writer of the row that did
    /// not know the column is recognised as stale by its generation.
    pub(crate) fn encode(self, generation: u64) -> String {
        match self {
            Base::Missing => format!("g{generation} missing"),
            Base::File { len, lines, digest } => {
                format!("g{generation} {len} {lines} {digest:016x}")
            }
        }
    }

    /// Parses [`Base::encode`] output recorded at `generation`; `None` for anything else.
    pub(crate) fn decode(text: &str, generation: u64) -> Option<Base> {
        let mut parts = text.split(' ');
        let g: u64 = parts.next()?.strip_prefix('g')?.parse().ok()?;
        if g != generation {
            return None;
        }
        let first = parts.next()?;
        let base = if first == "missing" {
            Base::Missing
        } else {
            Base::File {
                len: first.parse().ok()?,
                lines: parts.next()?.parse().ok()?,
                digest: u64::from_str_radix(parts.next()?, 16).ok()?,
            }
        };
        parts.next().is_none().then_some(base)
    }

    /// What `path` holds now (read whole; a rewrite is about to write as much).
    pub(crate) fn of_file(path: &Path) -> Result<Base> {
        let Some(bytes) = crate::fsutil::read_if_exists(path)? else {
            return Ok(Base::Missing);
        };
        let (digest, lines) = crate::fsutil::digest_lines(&bytes);
        Ok(Base::File {
            len: bytes.len() as u64,
            lines,
            digest,
        })
    }

    /// Whether `path` still holds exactly this content (a longer or shorter file, other bytes
    /// or a file that appeared or vanished do not).
    pub(crate) fn matches(self, path: &Path) -> Result<bool> {
        let file = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(self == Base::Missing);
            }
            Err(e) => return Err(StateError::io("open", path, e)),
        };
        let Base::File { len, lines, digest } = self else {
            return Ok(false);
        };
        let size = file
            .metadata()
            .map_err(|e| StateError::io("stat", path, e))?
            .len();
        if size != len {
            return Ok(false);
        }
        let mut bytes = Vec::new();
        file.take(len.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|e| StateError::io("read", path, e))?;
        Ok(bytes.len() as u64 == len && crate::fsutil::digest_lines(&bytes) == (digest, lines))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_round_trips_and_refuses_other_generations() {
        let b = Base::File {
            len: 120,
            lines: 3,
            digest: 0xdead_beef_0000_0001,
        };
        assert_eq!(b.encode(7), "g7 120 3 deadbeef00000001");
        assert_eq!(Base::decode(&b.encode(7), 7), Some(b));
        assert_eq!(Base::decode(&b.encode(7), 8), None);
        assert_eq!(Base::decode("g2 missing", 2), Some(Base::Missing));
        assert_eq!(Base::decode("g2 missing x", 2), None);
        assert_eq!(Base::decode("", 2), None);
    }
}
