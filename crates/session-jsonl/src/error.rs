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
    /// An archived `.jsonl.zst` run file was met by a build of this crate without its
    /// `archive` feature (no zstd): it is listed, but cannot be read, compressed or restored.
    #[error(
        "run file {path} is archived (zstd), and this build of session-jsonl has no `archive` feature to read it"
    )]
    ArchiveUnsupported {
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
    /// An append failed part-way (a full disk, an I/O error, a short write that could not be
    /// completed, or the `fdatasync` that was to make it durable). The writer cut its partial
    /// write back (`ftruncate`) to the last complete line at `offset`, so the file ends on a
    /// line boundary and holds none of the failed record; the writer can be used again (the
    /// next append retries the cut first if it failed too). `source` is the OS error (`No
    /// space left on device`, …).
    #[error("{}", append_failed_message(.path, .op, *.offset, *.buffered, .cut_error.as_ref(), .source))]
    AppendFailed {
        /// The run file.
        path: PathBuf,
        /// What failed: `write` or `fdatasync`.
        op: &'static str,
        /// Length of the file after the cut: where the next record goes.
        offset: u64,
        /// Records appended earlier in [`Durability::Buffered`](crate::Durability::Buffered)
        /// mode that are still in the writer's buffer (kept for the next flush; 0 otherwise).
        buffered: u64,
        /// Why cutting the partial write back failed, when it did (the file may then end in a
        /// partial line until the next append's retry of the cut succeeds).
        cut_error: Option<io::Error>,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// An earlier failed append left a partial write that could not be cut back yet, and
    /// cutting it back failed again now; nothing was appended.
    #[error(
        "cannot cut {path} back to its last complete line at byte offset {offset}: {source}; \
         nothing is appended until this succeeds"
    )]
    CutBackFailed {
        /// The run file.
        path: PathBuf,
        /// The length the file is to be cut back to.
        offset: u64,
        /// The OS error of `ftruncate`.
        #[source]
        source: io::Error,
    },
    /// A run file with this run id exists elsewhere in the store (another date directory, or
    /// an archive); run ids are unique in a store.
    #[error("run id {run_id:?} is already used by {existing}; a run id names one run in the store")]
    RunIdTaken {
        /// The id of the run to create.
        run_id: String,
        /// A file that holds it already.
        existing: PathBuf,
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
            | JsonlError::ArchiveUnsupported { path }
            | JsonlError::NotARunFile { path }
            | JsonlError::HeaderFirst { path, .. }
            | JsonlError::SecondHeader { path }
            | JsonlError::Serialize { path, .. }
            | JsonlError::WriterFailed { path, .. }
            | JsonlError::ArchiveMismatch { path, .. }
            | JsonlError::AppendFailed { path, .. }
            | JsonlError::CutBackFailed { path, .. } => Some(path),
            JsonlError::RunIdTaken { existing, .. } => Some(existing),
            JsonlError::NotFound { root, .. } => Some(root),
            JsonlError::UnsafeRunId { .. } => None,
        }
    }

    /// Whether the error is [`JsonlError::Locked`] (a run being written by someone else).
    pub fn is_locked(&self) -> bool {
        matches!(self, JsonlError::Locked { .. })
    }
}

fn append_failed_message(
    path: &std::path::Path,
    op: &str,
    offset: u64,
    buffered: u64,
    cut_error: Option<&io::Error>,
    source: &io::Error,
) -> String {
    let mut m = format!(
        "cannot append to {}: {op} failed: {source}; ",
        path.display()
    );
    match cut_error {
        None => m.push_str(&format!(
            "the file was cut back to its last complete line at byte offset {offset} and the \
             record was not appended (the writer can be used again)"
        )),
        Some(e) => m.push_str(&format!(
            "cutting the partial write back to byte offset {offset} failed too ({e}); the next \
             append tries again before writing"
        )),
    }
    if buffered > 0 {
        m.push_str(&format!(
            "; {buffered} earlier record(s) stay in the writer's buffer for the next flush"
        ));
    }
    m
}
