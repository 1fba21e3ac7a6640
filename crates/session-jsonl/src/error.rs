//! The error type of this crate.

use std::io;
use std::path::PathBuf;

use session_schema::IdError;

/// Result alias with [`JsonlError`].
pub type Result<T, E = JsonlError> = std::result::Result<T, E>;

/// Everything that can go wrong putting run files on disk or getting them back.
///
/// Damage inside a run file (torn tail, corrupt line, …) is *not* an error: readers report it as
/// [`Damage`](crate::Damage) items. Errors are I/O failures, refused operations and misuse.
/// Variants carry the path and, where one exists, the 1-based line and byte offset.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JsonlError {
    /// An I/O operation on `path` failed.
    #[error("cannot {op} {path}: {source}")]
    Io {
        /// What was being done (`open`, `read`, `write`, `fdatasync`, `create directory`, …).
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Reading `path` failed at a known position (a read error, not damage).
    #[error("cannot read {path} at line {line}, byte offset {offset}: {source}")]
    Read {
        /// The run file.
        path: PathBuf,
        /// 1-based line being read.
        line: u64,
        /// Byte offset in the (decompressed) file where reading stopped.
        offset: u64,
        /// The OS or decompression error.
        #[source]
        source: io::Error,
    },
    /// A run id that could leave its directory was refused before any file was touched.
    #[error("run id {run_id:?} cannot be used as a file name: {source}")]
    UnsafeRunId {
        /// The id as given.
        run_id: String,
        /// Why it was refused.
        #[source]
        source: IdError,
    },
    /// Another writer holds the exclusive lock of the run file.
    #[error(
        "run file {path} is already open for writing by another writer{}",
        holder_pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
    )]
    Locked {
        /// The run file.
        path: PathBuf,
        /// The process holding the lock, when the kernel says (`/proc/locks`, Linux; see
        /// [`lock_holders`](crate::lock_holders)).
        holder_pid: Option<u32>,
    },
    /// The run file to create exists already (use [`RunWriter::open_append`](crate::RunWriter::open_append)).
    #[error("run file {path} already exists")]
    AlreadyExists {
        /// The existing file.
        path: PathBuf,
    },
    /// No run file with this id exists under the sessions root.
    #[error("no run file for run id {run_id:?} under {root}")]
    NotFound {
        /// The id looked for.
        run_id: String,
        /// The sessions root searched.
        root: PathBuf,
    },
    /// The operation needs a plain `.jsonl` file but got an archived `.jsonl.zst` one.
    #[error(
        "run file {path} is archived (zstd); it cannot be appended to, followed or compressed again"
    )]
    Compressed {
        /// The archived file.
        path: PathBuf,
    },
    /// The path does not name a run file (`<run_id>.jsonl` or `<run_id>.jsonl.zst`).
    #[error("{path} is not a run file name (`<run_id>.jsonl` or `<run_id>.jsonl.zst`)")]
    NotARunFile {
        /// The path given.
        path: PathBuf,
    },
    /// A record other than the header was appended before the header.
    #[error("cannot append a `{kind}` record to {path} before its header")]
    HeaderFirst {
        /// The run file.
        path: PathBuf,
        /// The record type refused.
        kind: String,
    },
    /// A second header was appended (the header is written once and never rewritten, spec §6).
    #[error("run file {path} already has a header")]
    SecondHeader {
        /// The run file.
        path: PathBuf,
    },
    /// A record could not be serialized; nothing was written.
    #[error("cannot serialize a `{kind}` record for {path}: {source}")]
    Serialize {
        /// The run file.
        path: PathBuf,
        /// The record type.
        kind: String,
        /// serde_json's error.
        #[source]
        source: serde_json::Error,
    },
    /// An earlier write or sync of this writer failed, so the file's durable state is unknown;
    /// the writer refuses further appends (reopen it with
    /// [`RunWriter::open_append`](crate::RunWriter::open_append), which seals a torn tail).
    #[error(
        "writer for {path} failed earlier at byte offset {offset}; reopen it to continue: {source}"
    )]
    WriterFailed {
        /// The run file.
        path: PathBuf,
        /// File length when the failure happened (best known).
        offset: u64,
        /// The original failure.
        #[source]
        source: io::Error,
    },
    /// An archive did not decompress to the bytes of its original; the original was kept.
    #[error("archive {path} does not match its original at byte offset {offset}")]
    ArchiveMismatch {
        /// The archive that failed verification (removed again).
        path: PathBuf,
        /// First differing byte offset.
        offset: u64,
    },
}

impl JsonlError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        JsonlError::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// The path the error is about, when there is one.
    pub fn path(&self) -> Option<&std::path::Path> {
        match self {
            JsonlError::Io { path, .. }
            | JsonlError::Read { path, .. }
            | JsonlError::Locked { path, .. }
            | JsonlError::AlreadyExists { path }
            | JsonlError::Compressed { path }
            | JsonlError::NotARunFile { path }
            | JsonlError::HeaderFirst { path, .. }
            | JsonlError::SecondHeader { path }
            | JsonlError::Serialize { path, .. }
            | JsonlError::WriterFailed { path, .. }
            | JsonlError::ArchiveMismatch { path, .. } => Some(path),
            JsonlError::NotFound { root, .. } => Some(root),
            JsonlError::UnsafeRunId { .. } => None,
        }
    }

    /// Whether the error is [`JsonlError::Locked`] (a run being written by someone else).
    pub fn is_locked(&self) -> bool {
        matches!(self, JsonlError::Locked { .. })
    }
}
