//! The one error type of this crate.

use std::io;
use std::path::PathBuf;

use session_schema::IdError;

/// Everything that can go wrong in session-state.
///
/// `Display` is a lower-case fragment without a full stop; `source()` is wired to the underlying
/// error. Variants carry the file path, 1-based line and byte offset where one exists.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// A session or run id failed the safe-id check before any path was built from it
    /// (compat notes §5 item 6).
    #[error("unsafe id {id:?}")]
    UnsafeId {
        /// The id as given.
        id: String,
        /// Why it was refused.
        #[source]
        source: IdError,
    },
    /// A file-system operation failed.
    #[error("{op} {}", path.display())]
    Io {
        /// What was being done (`"read"`, `"write"`, `"fsync"`, `"rename"`, …).
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// SQLite reported an error on `state.db` (never "database is locked" for a busy database:
    /// saves wait and retry, see [`crate::StoreOptions::busy_timeout`]).
    #[error("state database {}: {context}", path.display())]
    Db {
        /// Path of `state.db`.
        path: PathBuf,
        /// What was being done.
        context: &'static str,
        /// The SQLite error.
        #[source]
        source: rusqlite::Error,
    },
    /// A full-text search query that SQLite's FTS5 refuses (`sessions search --fts` with
    /// invalid syntax). Plain-text queries are quoted and never end here.
    #[error("search query {query:?} is not valid FTS5 syntax: {message}")]
    SearchQuery {
        /// The query as passed to FTS5.
        query: String,
        /// SQLite's explanation.
        message: String,
    },
    /// The database stayed locked by another writer for longer than the busy timeout and every
    /// retry (a process holding a write transaction open for that long).
    #[error("state database {} stayed busy for {waited_ms} ms", path.display())]
    Busy {
        /// Path of `state.db`.
        path: PathBuf,
        /// How long the save waited in total, in milliseconds.
        waited_ms: u64,
        /// The last SQLite error.
        #[source]
        source: rusqlite::Error,
    },
    /// Compare-and-swap failed: the session changed since the caller loaded it
    /// ([`crate::StateStore::save_expecting`]). Nothing was written.
    #[error(
        "session {session_id} was saved by another writer (expected {expected}, found {found})"
    )]
    Conflict {
        /// The session.
        session_id: String,
        /// The generation the caller expected (`none` = the session must not exist yet).
        expected: String,
        /// The generation found in the database (`none` = no row).
        found: String,
    },
    /// A batch of saves ([`crate::StateStore::save_batch`]) that cannot be saved as given: a
    /// session appears twice, or it holds more than [`crate::MAX_BATCH_SESSIONS`] sessions.
    /// Nothing was written.
    #[error("batch of saves refused: {detail}")]
    InvalidBatch {
        /// What is wrong with it.
        detail: String,
    },
    /// A legacy `state/<id>.json` snapshot is not a valid session state (cut mid-write,
    /// not JSON, or fields of the wrong type). The file is left untouched.
    #[error("legacy snapshot {} is invalid at line {line}, byte {byte_offset}: {reason}", path.display())]
    LegacyInvalid {
        /// The snapshot file.
        path: PathBuf,
        /// 1-based line of the problem (1 when unknown).
        line: u64,
        /// Byte offset of the problem within the file (0 when unknown).
        byte_offset: u64,
        /// What is wrong.
        reason: String,
        /// The parse error, when there is one.
        #[source]
        source: Option<Box<session_schema::ParseError>>,
    },
    /// A message could not be serialized (a hand-built [`session_schema::RawJson`] holding
    /// invalid JSON).
    #[error("message {index} of session {session_id} cannot be serialized")]
    Serialize {
        /// The session.
        session_id: String,
        /// 0-based index of the message in `SessionState.messages` (`usize::MAX` for `meta`).
        index: usize,
        /// The serializer's error.
        #[source]
        source: serde_json::Error,
    },
    /// A run file could not be read by the run index.
    #[error("run file {}", path.display())]
    Run {
        /// The run file.
        path: PathBuf,
        /// The reader's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The store was opened with [`crate::StateStore::open_read_only`] and the operation
    /// would write (`save`, `delete`, legacy migration, the run index).
    #[error("state store {} is open read-only: cannot {op}", root.display())]
    ReadOnly {
        /// The sessions root.
        root: PathBuf,
        /// What was refused (`"save"`, `"delete"`, `"index runs"`, …).
        op: &'static str,
    },
    /// A pagination cursor string could not be decoded.
    #[error("invalid cursor {token:?}")]
    InvalidCursor {
        /// The token as given.
        token: String,
    },
    /// A store file (`messages/<id>.jsonl`, `state/<id>.json`, a temp file) is not a regular
    /// file: a symbolic link (never followed: a save must not write outside the store), a FIFO
    /// (reading it would wait forever), a socket, a device or a directory. Nothing was read
    /// from it or written to it.
    #[error("{} is a {kind}, not a regular file: not followed, read or written", path.display())]
    NotRegularFile {
        /// The path.
        path: PathBuf,
        /// What it is (`"symbolic link"`, `"FIFO"`, `"socket"`, `"character device"`,
        /// `"block device"`, `"directory"`).
        kind: &'static str,
    },
    /// A messages file or legacy snapshot is larger than a session file may be
    /// ([`crate::MAX_SESSION_FILE_BYTES`]); it was not read.
    #[error("{} holds {size} bytes, more than the {limit} bytes a session file may have", path.display())]
    FileTooLarge {
        /// The file.
        path: PathBuf,
        /// Its size in bytes (at least; it may still be growing).
        size: u64,
        /// The limit in bytes.
        limit: u64,
    },
    /// Another holder has the session open ([`crate::StateStore::lease`]): a runtime that
    /// resumed it, or a housekeeping step that outlasted the wait. Nothing was written.
    #[error("session {session_id} is open elsewhere ({holder})")]
    SessionBusy {
        /// The session.
        session_id: String,
        /// Who holds its lease: pid, host, since when and why, as far as known (boxed: it
        /// is the largest of the variants' fields).
        holder: Box<crate::holder::LeaseHolder>,
    },
    /// A lease label ([`crate::StateStore::lease_labelled`]) longer than
    /// [`crate::MAX_LABEL`] bytes; no lease was taken.
    #[error("session {session_id}: a lease label of {len} bytes is longer than the {max} allowed", max = crate::holder::MAX_LABEL)]
    LabelTooLong {
        /// The session.
        session_id: String,
        /// The label's length in bytes.
        len: usize,
    },
    /// The first save of a session found `messages/<id>.jsonl` without a `session_state` row
    /// (a lost or replaced `state.db`, the reference's file, a save that crashed before its
    /// commit) and the file is not the start of the list being saved: the store never
    /// overwrites a file it did not commit. `sessions repair` rebuilds the row from the file
    /// ([`crate::StateStore::reconstruct_orphans`]); loading then gives its messages.
    #[error(
        "session {session_id} has no state.db row but {} exists ({bytes} bytes, {lines} line(s)) and does not start the list being saved; refusing to overwrite it (rebuild its row with `sessions repair`, or move the file aside)",
        path.display()
    )]
    OrphanMessages {
        /// The session.
        session_id: String,
        /// The messages file.
        path: PathBuf,
        /// Its size in bytes.
        bytes: u64,
        /// Its lines (a final fragment without `\n` counts).
        lines: u64,
    },
    /// A save was stopped on purpose by a fault-injection hook (tests only; see
    /// [`crate::FaultPoint`]). The store is left exactly as a crash at that point would leave it.
    #[doc(hidden)]
    #[error("save stopped at injected fault point {point:?}")]
    InjectedFault {
        /// Where the save stopped.
        point: crate::fault_point::FaultPoint,
    },
}

/// `Result` with [`StateError`].
pub type Result<T, E = StateError> = std::result::Result<T, E>;

impl StateError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        StateError::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// Whether this is a refusal to write through a read-only store
    /// ([`StateError::ReadOnly`]).
    pub fn is_read_only(&self) -> bool {
        matches!(self, StateError::ReadOnly { .. })
    }

    /// Whether the store could not be opened or written because of access rights or a
    /// read-only file system: an I/O error `PermissionDenied` / `ReadOnlyFilesystem`, or
    /// SQLite's `SQLITE_READONLY`, `SQLITE_CANTOPEN`, `SQLITE_PERM` or `SQLITE_AUTH`. A
    /// caller that only reads can then use [`crate::StateStore::open_read_only`].
    pub fn is_permission_denied(&self) -> bool {
        use rusqlite::ErrorCode;
        match self {
            StateError::Io { source, .. } => matches!(
                source.kind(),
                io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem
            ),
            StateError::Db { source, .. } => matches!(
                source.sqlite_error_code(),
                Some(
                    ErrorCode::ReadOnly
                        | ErrorCode::CannotOpen
                        | ErrorCode::PermissionDenied
                        | ErrorCode::AuthorizationForStatementDenied
                )
            ),
            _ => false,
        }
    }

    /// Whether this is a compare-and-swap conflict ([`StateError::Conflict`]).
    pub fn is_conflict(&self) -> bool {
        matches!(self, StateError::Conflict { .. })
    }

    /// Whether another holder has the session open ([`StateError::SessionBusy`]).
    pub fn is_session_busy(&self) -> bool {
        matches!(self, StateError::SessionBusy { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permission_problems_are_recognised() {
        let io_err = |kind| StateError::io("open", "/s", io::Error::from(kind));
        assert!(io_err(io::ErrorKind::PermissionDenied).is_permission_denied());
        assert!(io_err(io::ErrorKind::ReadOnlyFilesystem).is_permission_denied());
        assert!(!io_err(io::ErrorKind::NotFound).is_permission_denied());
        let db_err = |code| StateError::Db {
            path: "/s/state.db".into(),
            context: "open",
            source: rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None),
        };
        assert!(db_err(rusqlite::ffi::SQLITE_READONLY).is_permission_denied());
        assert!(db_err(rusqlite::ffi::SQLITE_CANTOPEN).is_permission_denied());
        assert!(!db_err(rusqlite::ffi::SQLITE_CORRUPT).is_permission_denied());
        let ro = StateError::ReadOnly {
            root: "/s".into(),
            op: "save",
        };
        assert!(ro.is_read_only() && !ro.is_permission_denied());
    }
}
