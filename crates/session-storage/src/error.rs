//! The one error type of this crate: [`StorageError`], and [`Target`], what an error is about.

use std::fmt;

use session_schema::{IdError, Timestamp};

use crate::types::{Expected, HolderInfo, Version};

/// `Result` with [`StorageError`].
pub type Result<T, E = StorageError> = std::result::Result<T, E>;

/// A backend's own error, kept as the [`source`](std::error::Error::source) of
/// [`StorageError::Backend`] so that the cause ("No space left on device", a SQLite or
/// PostgreSQL error) stays visible.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What an error is about: a run (with the byte offset where one is known), a session, or
/// the store as a whole.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Target {
    /// A run of the run catalogue.
    Run {
        /// The run id.
        run_id: String,
        /// Byte offset in the run's stored bytes, when the failure has one.
        offset: Option<u64>,
    },
    /// A session of the session store.
    Session {
        /// The session id.
        session_id: String,
    },
    /// The store as a whole (opening it, listing, the index).
    Store,
}

impl Target {
    /// A run without an offset.
    pub fn run(run_id: impl Into<String>) -> Self {
        Target::Run {
            run_id: run_id.into(),
            offset: None,
        }
    }

    /// A run at byte `offset`.
    pub fn run_at(run_id: impl Into<String>, offset: u64) -> Self {
        Target::Run {
            run_id: run_id.into(),
            offset: Some(offset),
        }
    }

    /// A session.
    pub fn session(session_id: impl Into<String>) -> Self {
        Target::Session {
            session_id: session_id.into(),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Run {
                run_id,
                offset: None,
            } => write!(f, "run {run_id}"),
            Target::Run {
                run_id,
                offset: Some(o),
            } => write!(f, "run {run_id} at byte offset {o}"),
            Target::Session { session_id } => write!(f, "session {session_id}"),
            Target::Store => f.write_str("the store"),
        }
    }
}

/// Everything a storage backend can refuse or fail at.
///
/// Refusals a caller acts on have their own variants ([`LengthConflict`](Self::LengthConflict),
/// [`VersionConflict`](Self::VersionConflict), [`LeaseBusy`](Self::LeaseBusy), …); failures of
/// the backend itself are [`Backend`](Self::Backend) with the backend's error as `source()`.
/// Damage inside stored data is never an error: reads report it as
/// [`session_jsonl::Damage`] items and session loads as [`crate::SessionDamage`].
/// `Display` is a lower-case fragment without a full stop.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// A run or session id failed [`session_schema::check_id`]; nothing was touched.
    #[error("unsafe id {id:?}")]
    UnsafeId {
        /// The id as given.
        id: String,
        /// Why it was refused.
        #[source]
        source: IdError,
    },
    /// The bytes to append do not end with `\n`: their last `len` bytes would be a torn line.
    /// Only complete lines are stored; nothing was written.
    #[error(
        "cannot append to run {run_id}: the last {len} bytes (run byte offset {offset}) are not a complete line"
    )]
    IncompleteLine {
        /// The run.
        run_id: String,
        /// Where the incomplete line would have started in the run.
        offset: u64,
        /// Its length in bytes.
        len: u64,
    },
    /// Compare-and-swap on a run's length failed: the run holds `committed` bytes, not the
    /// `expected` ones, and the lines at `expected` are not the ones being appended (so this is
    /// not a retry). Nothing was written.
    #[error("run {run_id} holds {committed} bytes, not the expected {expected}")]
    LengthConflict {
        /// The run.
        run_id: String,
        /// The length the caller expected.
        expected: u64,
        /// The run's committed length (0 for a run that does not exist).
        committed: u64,
    },
    /// A read started past the end of the run's bytes.
    #[error("run {run_id} has {len} bytes; cannot read from byte offset {offset}")]
    OffsetOutOfRange {
        /// The run.
        run_id: String,
        /// The offset asked for.
        offset: u64,
        /// The run's length (of the extent asked for).
        len: u64,
    },
    /// No run with this id exists.
    #[error("no run {run_id}")]
    RunNotFound {
        /// The run id.
        run_id: String,
    },
    /// The run exists but can no longer be appended to (the local backend: it was archived to
    /// `.jsonl.zst`).
    #[error("run {run_id} is archived and cannot be appended to")]
    RunArchived {
        /// The run id.
        run_id: String,
    },
    /// Compare-and-swap on a session's version failed: the stored session is not the one the
    /// caller expected. Nothing was written or deleted.
    #[error("session {session_id} changed: expected {expected}, found {}", found.as_ref().map_or("no session", Version::as_str))]
    VersionConflict {
        /// The session.
        session_id: String,
        /// What the caller expected.
        expected: Expected,
        /// The stored version, `None` when no session is stored.
        found: Option<Version>,
    },
    /// Another holder has the session's lease.
    #[error("session {session_id} is leased by {}", holder.as_ref().map_or_else(|| "another holder".to_owned(), ToString::to_string))]
    LeaseBusy {
        /// The session.
        session_id: String,
        /// Who holds it, when the backend could tell.
        holder: Option<HolderInfo>,
        /// Since when, when the backend could tell.
        since: Option<Timestamp>,
    },
    /// A lease that was held is no longer (it expired before it was renewed, or the backend
    /// lost it); whatever the holder does next is no longer exclusive.
    #[error("the lease on session {session_id} was lost")]
    LeaseLost {
        /// The session.
        session_id: String,
    },
    /// Another writer held what the operation needed for longer than the backend waits.
    #[error("{target} stayed busy for {waited_ms} ms")]
    Busy {
        /// What was busy.
        target: Target,
        /// How long the operation waited, in milliseconds.
        waited_ms: u64,
    },
    /// A paging cursor could not be decoded (it comes from another backend or listing, or
    /// was edited).
    #[error("invalid cursor {token:?}")]
    InvalidCursor {
        /// The token as given.
        token: String,
    },
    /// The backend was opened read-only and the operation would write.
    #[error("the store is open read-only: cannot {op}")]
    ReadOnly {
        /// What was refused (`"append"`, `"save"`, …).
        op: &'static str,
    },
    /// The backend keeps no full-text search index ([`crate::RunSearch`]), or not yet (a
    /// read-only local store whose `search.db` was never built).
    #[error("the {backend} store cannot search: {reason}")]
    SearchUnavailable {
        /// The backend (`"local"`, `"postgresql"`, …).
        backend: &'static str,
        /// Why, for people.
        reason: String,
    },
    /// A search query in the backend's own syntax
    /// ([`RunSearchQuery::native_syntax`](crate::RunSearchQuery::native_syntax)) was refused
    /// by its parser; nothing was searched.
    #[error("invalid search query {query:?}: {message}")]
    InvalidSearchQuery {
        /// The query as given to the backend.
        query: String,
        /// The parser's message.
        message: String,
    },
    /// The backend failed (I/O, database, network); `source()` is its error.
    #[error("cannot {op} {target}: {source}")]
    Backend {
        /// What was being done (`"append to"`, `"read"`, `"list runs of"`, …).
        op: &'static str,
        /// What it was done to.
        target: Target,
        /// The backend's error.
        #[source]
        source: BoxError,
    },
}

impl StorageError {
    /// A [`StorageError::Backend`].
    pub fn backend(op: &'static str, target: Target, source: impl Into<BoxError>) -> StorageError {
        StorageError::Backend {
            op,
            target,
            source: source.into(),
        }
    }

    /// Whether a compare-and-swap failed ([`LengthConflict`](Self::LengthConflict) or
    /// [`VersionConflict`](Self::VersionConflict)): re-read and decide again.
    pub fn is_conflict(&self) -> bool {
        matches!(
            self,
            StorageError::LengthConflict { .. } | StorageError::VersionConflict { .. }
        )
    }

    /// Whether someone else holds what was needed ([`LeaseBusy`](Self::LeaseBusy) or
    /// [`Busy`](Self::Busy)): try again later.
    pub fn is_busy(&self) -> bool {
        matches!(
            self,
            StorageError::LeaseBusy { .. } | StorageError::Busy { .. }
        )
    }

    /// The run the error is about, when there is one.
    pub fn run_id(&self) -> Option<&str> {
        match self {
            StorageError::IncompleteLine { run_id, .. }
            | StorageError::LengthConflict { run_id, .. }
            | StorageError::OffsetOutOfRange { run_id, .. }
            | StorageError::RunNotFound { run_id }
            | StorageError::RunArchived { run_id } => Some(run_id),
            StorageError::Busy {
                target: Target::Run { run_id, .. },
                ..
            }
            | StorageError::Backend {
                target: Target::Run { run_id, .. },
                ..
            } => Some(run_id),
            _ => None,
        }
    }

    /// The session the error is about, when there is one.
    pub fn session_id(&self) -> Option<&str> {
        match self {
            StorageError::VersionConflict { session_id, .. }
            | StorageError::LeaseBusy { session_id, .. }
            | StorageError::LeaseLost { session_id } => Some(session_id),
            StorageError::Busy {
                target: Target::Session { session_id },
                ..
            }
            | StorageError::Backend {
                target: Target::Session { session_id },
                ..
            } => Some(session_id),
            _ => None,
        }
    }
}

/// Checks `id` with [`session_schema::check_id`] before any backend sees it.
///
/// # Errors
/// [`StorageError::UnsafeId`].
pub fn checked_id(id: &str) -> Result<()> {
    session_schema::check_id(id).map_err(|source| StorageError::UnsafeId {
        id: id.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn backend_errors_keep_their_cause_and_name_their_target() {
        let io = std::io::Error::from_raw_os_error(28);
        let e = StorageError::backend("append to", Target::run_at("r1", 42), io);
        assert_eq!(e.run_id(), Some("r1"));
        assert!(
            e.to_string()
                .starts_with("cannot append to run r1 at byte offset 42: ")
        );
        let cause = e.source().map(ToString::to_string).unwrap_or_default();
        assert!(cause.contains("No space left on device"), "{cause}");
    }

    #[test]
    fn classification() {
        let c = StorageError::LengthConflict {
            run_id: "r".into(),
            expected: 1,
            committed: 2,
        };
        assert!(c.is_conflict() && !c.is_busy());
        assert_eq!(c.to_string(), "run r holds 2 bytes, not the expected 1");
        let b = StorageError::LeaseBusy {
            session_id: "s".into(),
            holder: Some(HolderInfo {
                name: "worker-1".into(),
                host: "h".into(),
                pid: 7,
            }),
            since: None,
        };
        assert!(b.is_busy() && !b.is_conflict());
        assert_eq!(b.session_id(), Some("s"));
        assert_eq!(
            b.to_string(),
            "session s is leased by worker-1 (pid 7 on h)"
        );
        let v = StorageError::VersionConflict {
            session_id: "s".into(),
            expected: Expected::Absent,
            found: Some(Version::new("3")),
        };
        assert_eq!(
            v.to_string(),
            "session s changed: expected no session, found 3"
        );
    }
}
