//! [`RunCatalogue`]: the repository of run logs — append lines with compare-and-swap on the
//! run's length, read stored bytes exactly (or through the tolerant reader), stat, list.

use std::io::Read;

use session_jsonl::{Reader, ReaderOptions, RunRead};

use crate::error::{Result, StorageError, Target};
use crate::types::{Appended, Extent, LinePosition, RunBytes, RunListPage, RunListQuery, RunStat};

/// The run catalogue: append-only run logs (`JSONL`, one record per line, spec §2–4), keyed
/// by run id.
///
/// # Contract (checked by `session_storage::conformance`)
///
/// * **Byte-exact.** A run is a byte string. Whatever complete lines are appended — NUL
///   runs, invalid UTF-8, lone surrogate escapes, a BOM, CRLF endings, two records glued on
///   one line, lines of megabytes — is stored and read back exactly. Nothing is parsed on the
///   way in and nothing is refused for its content: damage is reported by readers, never a
///   reason to refuse or drop a line.
/// * **Complete lines only.** Appended bytes must end with `\n`
///   ([`StorageError::IncompleteLine`] otherwise, nothing written), so a torn tail never
///   becomes a complete line.
/// * **Compare-and-swap on length.** An append names the committed length it expects. When
///   the run has exactly that length the lines are appended (a missing run has length 0 and
///   is created by an append at 0). When the run is longer and already holds these very bytes
///   at that offset (an earlier attempt succeeded but its acknowledgement was lost) the append
///   is acknowledged without writing them again; when it holds a complete-line prefix of them,
///   only the rest is written. Anything else is [`StorageError::LengthConflict`] and nothing
///   is written. Concurrent appenders to one run therefore never interleave or duplicate.
/// * **Durable when acknowledged.** A returned append survives a crash of the process (and,
///   in the local backend's default mode, a power loss).
/// * **Snapshots.** A read sees the run as it was when the read was opened.
/// * **Keyset paging.** [`list_runs`](Self::list_runs) pages never skip or repeat a run that
///   existed for the whole paging, whatever is appended or created meanwhile.
///
/// Methods are synchronous and the trait is object-safe (`&dyn RunCatalogue`).
pub trait RunCatalogue: Send + Sync {
    /// Appends `lines` (one or more complete lines, each ending with `\n`; empty is allowed)
    /// to run `run_id` if its committed length is `expected_len` — see the trait's contract
    /// for retries. Creates the run when it does not exist and `expected_len` is 0. Empty
    /// `lines` write nothing and create nothing; they only check the length.
    ///
    /// # Errors
    /// [`StorageError::UnsafeId`], [`StorageError::IncompleteLine`],
    /// [`StorageError::LengthConflict`] (nothing written), [`StorageError::RunArchived`],
    /// [`StorageError::Busy`] (another writer kept the run locked), [`StorageError::ReadOnly`],
    /// [`StorageError::Backend`].
    fn append_lines(&self, run_id: &str, expected_len: u64, lines: &[u8]) -> Result<Appended>;

    /// Stored bytes of run `run_id` from byte offset `from` to the end of `extent`, as they
    /// are when the call is made, streamed.
    ///
    /// # Errors
    /// [`StorageError::UnsafeId`], [`StorageError::RunNotFound`],
    /// [`StorageError::OffsetOutOfRange`] when `from` is past the end of `extent`,
    /// [`StorageError::Backend`].
    fn read_bytes(&self, run_id: &str, from: u64, extent: Extent) -> Result<RunBytes>;

    /// Length, line count, header facts and terminal state of run `run_id`; `None` when it
    /// does not exist.
    ///
    /// # Errors
    /// [`StorageError::UnsafeId`], [`StorageError::Backend`].
    fn stat_run(&self, run_id: &str) -> Result<Option<RunStat>>;

    /// Runs matching `query`, newest `started_at` first, one page.
    ///
    /// # Errors
    /// [`StorageError::InvalidCursor`], [`StorageError::Backend`].
    fn list_runs(&self, query: &RunListQuery) -> Result<RunListPage>;

    /// The run's records and damage reports from `from` on, through the workspace's tolerant
    /// reader ([`session_jsonl::Reader`]) over [`Extent::WithTornTail`], so that records,
    /// offsets, line numbers and damage reports are exactly those of reading the local file.
    /// From the start of the run, file-level damage (missing header, …) is reported as well;
    /// from a later position it is not (`expect_header` is turned off).
    ///
    /// # Errors
    /// As [`read_bytes`](Self::read_bytes); read failures while iterating are the reader's
    /// `io::Error` items.
    fn read_items(
        &self,
        run_id: &str,
        from: LinePosition,
        options: ReaderOptions,
    ) -> Result<Reader<RunBytes>> {
        let bytes = self.read_bytes(run_id, from.offset, Extent::WithTornTail)?;
        let mut options = options;
        if from.offset != 0 {
            options.expect_header = false;
        }
        Ok(Reader::with_position(
            bytes,
            options,
            from.offset,
            from.line.max(1),
        ))
    }

    /// The whole run through the tolerant reader (see [`read_items`](Self::read_items)):
    /// every recovered record and every damage report, as session-jsonl's [`RunRead`] (the
    /// one type for a run read whole; `path` is left empty, `bytes` is where reading ended:
    /// the run's length with its torn tail). Memory grows with the run; stream with
    /// `read_items` for large runs.
    ///
    /// # Errors
    /// As [`read_bytes`](Self::read_bytes); a read failure is [`StorageError::Backend`] with
    /// the offset where reading stopped.
    fn read_run(&self, run_id: &str) -> Result<RunRead> {
        let mut reader = self.read_items(run_id, LinePosition::START, ReaderOptions::default())?;
        RunRead::from_reader(std::path::PathBuf::new(), &mut reader).map_err(|e| {
            StorageError::backend("read", Target::run_at(run_id, reader.complete_offset()), e)
        })
    }

    /// All bytes of `extent` in memory (see [`read_bytes`](Self::read_bytes)).
    ///
    /// # Errors
    /// As [`read_bytes`](Self::read_bytes); a read failure is [`StorageError::Backend`].
    fn read_all(&self, run_id: &str, extent: Extent) -> Result<Vec<u8>> {
        let mut bytes = self.read_bytes(run_id, 0, extent)?;
        let mut out = Vec::with_capacity(usize::try_from(bytes.end()).unwrap_or(0));
        bytes.read_to_end(&mut out).map_err(|e| {
            StorageError::backend("read", Target::run_at(run_id, bytes.position()), e)
        })?;
        Ok(out)
    }
}

/// Checks that `lines` is empty or ends with `\n`, for backends' `append_lines`.
///
/// # Errors
/// [`StorageError::IncompleteLine`] naming where the incomplete line would start in the run
/// (`expected_len` + its offset in `lines`) and its length.
pub fn check_complete_lines(run_id: &str, expected_len: u64, lines: &[u8]) -> Result<()> {
    if lines.is_empty() || lines.ends_with(b"\n") {
        return Ok(());
    }
    let start = memchr::memrchr(b'\n', lines).map_or(0, |i| i + 1);
    Err(StorageError::IncompleteLine {
        run_id: run_id.to_owned(),
        offset: expected_len + start as u64,
        len: (lines.len() - start) as u64,
    })
}

/// How many leading bytes of `lines` (to be appended at `expected_len`) are already stored,
/// given `stored`, the run's bytes from `expected_len` to its committed end (or the first
/// `lines.len()` of them): `Some(n)` when `stored` starts with `lines` (`n = lines.len()`) or
/// `lines` starts with all of `stored` and `stored` ends at a line end (`n = stored.len()`),
/// `None` when the bytes differ (a real conflict). For backends' retry recognition;
/// `at_line_start` tells whether `expected_len` is the start of a line (0, or just after a
/// `\n`), without which nothing counts as present. Empty `lines` are never "present": an
/// empty append is a check of the length only.
pub fn already_present(stored: &[u8], lines: &[u8], at_line_start: bool) -> Option<usize> {
    if !at_line_start || lines.is_empty() {
        return None;
    }
    if stored.len() >= lines.len() {
        return (stored[..lines.len()] == *lines).then_some(lines.len());
    }
    let prefix_matches = lines[..stored.len()] == *stored;
    let ends_at_line = stored.is_empty() || stored.ends_with(b"\n");
    (prefix_matches && ends_at_line).then_some(stored.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complete_lines_are_checked() {
        assert!(check_complete_lines("r", 0, b"").is_ok());
        assert!(check_complete_lines("r", 0, b"a\nb\n").is_ok());
        match check_complete_lines("r", 100, b"a\nbc") {
            Err(StorageError::IncompleteLine {
                run_id,
                offset,
                len,
            }) => assert_eq!((run_id.as_str(), offset, len), ("r", 102, 2)),
            other => panic!("{other:?}"),
        }
        match check_complete_lines("r", 7, b"abc") {
            Err(StorageError::IncompleteLine { offset, len, .. }) => {
                assert_eq!((offset, len), (7, 3))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn retries_are_recognised_only_for_the_same_lines() {
        // The whole append is present (maybe followed by later lines).
        assert_eq!(already_present(b"a\nb\nc\n", b"a\nb\n", true), Some(4));
        // A complete-line prefix is present: the rest is to be written.
        assert_eq!(already_present(b"a\n", b"a\nb\n", true), Some(2));
        // Nothing present at the end of the run.
        assert_eq!(already_present(b"", b"a\n", true), Some(0));
        // Different bytes, a prefix that ends inside a line, or not at a line start.
        assert_eq!(already_present(b"x\n", b"a\n", true), None);
        assert_eq!(already_present(b"a", b"a\nb\n", true), None);
        assert_eq!(already_present(b"a\nb\n", b"a\nb\n", false), None);
        // An empty append at an older length is a length conflict, not a retry.
        assert_eq!(already_present(b"", b"", true), None);
    }
}
