//! Reading a store that cannot be written right now: a full disk, an I/O error, a read-only
//! mount or missing permissions make the writable open fail (`set journal_mode=WAL: disk I/O
//! error`, `SQLITE_FULL`, `EROFS`), but listing, loading and showing need no write.
//! [`StateStore::open_for_reading`] falls back to [`StateStore::open_read_only`] and says why
//! ([`ReadOnlyFallback`]).

use std::fmt;
use std::io;
use std::path::Path;

use crate::error::{Result, StateError};
use crate::store::StateStore;
use crate::types::StoreOptions;

/// Why a store cannot be written ([`StateError::write_unavailable`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WriteUnavailable {
    /// No permission to write (`EACCES`, `EPERM`; SQLite's `SQLITE_READONLY`, `SQLITE_PERM`,
    /// `SQLITE_AUTH`).
    PermissionDenied,
    /// SQLite cannot open a file it needs to write (`SQLITE_CANTOPEN`: `state.db`, its `-wal`
    /// or `-shm` file), usually for lack of permission, or because the name is taken by
    /// something that is not a file.
    CannotOpen,
    /// The file system is mounted read-only (`EROFS`).
    ReadOnlyFileSystem,
    /// No space left (`ENOSPC`, `EDQUOT`; SQLite's `SQLITE_FULL`).
    StorageFull,
    /// An I/O error (`EIO`; SQLite's `SQLITE_IOERR`, "disk I/O error", which is also what
    /// SQLite reports when it cannot grow its WAL or shared-memory file on a full disk).
    IoError,
}

impl fmt::Display for WriteUnavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WriteUnavailable::PermissionDenied => "permission denied",
            WriteUnavailable::CannotOpen => "cannot open the database files for writing",
            WriteUnavailable::ReadOnlyFileSystem => "read-only file system",
            WriteUnavailable::StorageFull => "no space left on device",
            WriteUnavailable::IoError => "I/O error",
        })
    }
}

/// `ENOSPC`, `EDQUOT` and `EIO` (the same numbers on every Unix this crate targets).
const ENOSPC: i32 = 28;
const EDQUOT: i32 = 122;
const EIO: i32 = 5;

fn io_reason(e: &io::Error) -> Option<WriteUnavailable> {
    match e.kind() {
        io::ErrorKind::PermissionDenied => return Some(WriteUnavailable::PermissionDenied),
        io::ErrorKind::ReadOnlyFilesystem => return Some(WriteUnavailable::ReadOnlyFileSystem),
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded => {
            return Some(WriteUnavailable::StorageFull);
        }
        _ => {}
    }
    match e.raw_os_error() {
        Some(ENOSPC | EDQUOT) => Some(WriteUnavailable::StorageFull),
        Some(EIO) => Some(WriteUnavailable::IoError),
        _ => None,
    }
}

fn sqlite_reason(e: &rusqlite::Error) -> Option<WriteUnavailable> {
    use rusqlite::ErrorCode;
    match e.sqlite_error_code()? {
        ErrorCode::ReadOnly
        | ErrorCode::PermissionDenied
        | ErrorCode::AuthorizationForStatementDenied => Some(WriteUnavailable::PermissionDenied),
        ErrorCode::CannotOpen => Some(WriteUnavailable::CannotOpen),
        ErrorCode::DiskFull => Some(WriteUnavailable::StorageFull),
        ErrorCode::SystemIoFailure => Some(WriteUnavailable::IoError),
        _ => None,
    }
}

impl StateError {
    /// Why the store could not be opened or written, when the cause is the storage or access
    /// to it rather than the data: missing permission, a read-only file system, a full disk or
    /// an I/O error (see [`WriteUnavailable`]). `None` for every other error (a damaged
    /// database, a conflict, an unsafe id, a refused write on a read-only store). A caller
    /// that only reads can then use [`StateStore::open_read_only`], as
    /// [`StateStore::open_for_reading`] does.
    pub fn write_unavailable(&self) -> Option<WriteUnavailable> {
        match self {
            StateError::Io { source, .. } => io_reason(source),
            StateError::Db { source, .. } => sqlite_reason(source),
            _ => None,
        }
    }
}

/// The store was opened read-only because it cannot be written ([`StateStore::open_for_reading`]).
#[derive(Debug)]
#[non_exhaustive]
pub struct ReadOnlyFallback {
    /// Why it cannot be written.
    pub reason: WriteUnavailable,
    /// The error of the writable open (its `source()` is the OS or SQLite error).
    pub error: StateError,
}

impl fmt::Display for ReadOnlyFallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The error with its causes, each said once.
        let mut text = self.error.to_string();
        let mut cur = std::error::Error::source(&self.error);
        while let Some(s) = cur {
            let s_text = s.to_string();
            if !text.contains(&s_text) {
                text.push_str(": ");
                text.push_str(&s_text);
            }
            cur = s.source();
        }
        write!(
            f,
            "cannot write the store ({}: {text}); reading it read-only",
            self.reason
        )
    }
}

impl StateStore {
    /// Opens the store under `sessions_root` for writing when it can be written, else for
    /// reading only, with default options. For callers that mostly read (listings that keep
    /// the run index up to date, showing a session): on a full disk, a read-only mount, a
    /// failing disk or without write permission they still read.
    ///
    /// Returns the store and, when it was opened read-only, why ([`ReadOnlyFallback`], for
    /// one warning line). A read-only store refuses writes ([`StateError::ReadOnly`]); its
    /// run index is what the last writer left.
    ///
    /// # Errors
    /// The writable open's error when it failed for another reason (a damaged database, a
    /// busy one, a root that is not a directory); the read-only open's error when that fails
    /// too.
    pub fn open_for_reading(
        sessions_root: impl AsRef<Path>,
    ) -> Result<(StateStore, Option<ReadOnlyFallback>)> {
        StateStore::open_for_reading_with(sessions_root, StoreOptions::default())
    }

    /// [`StateStore::open_for_reading`] with explicit options.
    ///
    /// # Errors
    /// As [`StateStore::open_for_reading`].
    pub fn open_for_reading_with(
        sessions_root: impl AsRef<Path>,
        options: StoreOptions,
    ) -> Result<(StateStore, Option<ReadOnlyFallback>)> {
        let root = sessions_root.as_ref();
        match StateStore::open_with(root, options.clone()) {
            Ok(store) => Ok((store, None)),
            Err(error) => match error.write_unavailable() {
                Some(reason) => {
                    let store = StateStore::open_read_only_with(root, options)?;
                    Ok((store, Some(ReadOnlyFallback { reason, error })))
                }
                None => Err(error),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io_err(e: io::Error) -> StateError {
        StateError::io("write", "/s/messages/x.jsonl", e)
    }

    fn db_err(code: i32) -> StateError {
        StateError::Db {
            path: "/s/state.db".into(),
            context: "set journal_mode=WAL",
            source: rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None),
        }
    }

    #[test]
    fn storage_and_access_failures_are_told_apart_from_data_errors() {
        let cases = [
            (
                io_err(io::Error::from_raw_os_error(ENOSPC)),
                Some(WriteUnavailable::StorageFull),
            ),
            (
                io_err(io::Error::from_raw_os_error(EIO)),
                Some(WriteUnavailable::IoError),
            ),
            (
                io_err(io::Error::from(io::ErrorKind::ReadOnlyFilesystem)),
                Some(WriteUnavailable::ReadOnlyFileSystem),
            ),
            (
                io_err(io::Error::from(io::ErrorKind::PermissionDenied)),
                Some(WriteUnavailable::PermissionDenied),
            ),
            (io_err(io::Error::from(io::ErrorKind::NotFound)), None),
            (
                db_err(rusqlite::ffi::SQLITE_IOERR),
                Some(WriteUnavailable::IoError),
            ),
            (
                db_err(rusqlite::ffi::SQLITE_FULL),
                Some(WriteUnavailable::StorageFull),
            ),
            (
                db_err(rusqlite::ffi::SQLITE_READONLY),
                Some(WriteUnavailable::PermissionDenied),
            ),
            (
                db_err(rusqlite::ffi::SQLITE_CANTOPEN),
                Some(WriteUnavailable::CannotOpen),
            ),
            (db_err(rusqlite::ffi::SQLITE_CORRUPT), None),
            (db_err(rusqlite::ffi::SQLITE_NOTADB), None),
        ];
        for (err, want) in cases {
            assert_eq!(err.write_unavailable(), want, "{err:?}");
        }
        let fallback = ReadOnlyFallback {
            reason: WriteUnavailable::IoError,
            error: db_err(rusqlite::ffi::SQLITE_IOERR),
        };
        assert_eq!(
            fallback.to_string(),
            "cannot write the store (I/O error: state database /s/state.db: set journal_mode=WAL: Error code 10: disk I/O error); reading it read-only"
        );
    }
}
