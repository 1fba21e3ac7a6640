//! Public value types of the session-state API.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use session_schema::{SessionState, SessionStateSummary};

use crate::fault_point::FaultPoint;

/// Options of [`crate::StateStore::open_with`]; build with
/// `StoreOptions { busy_timeout, ..StoreOptions::default() }`.
#[derive(Clone)]
pub struct StoreOptions {
    /// SQLite busy timeout of one attempt to take the write lock (default 5 s, like the
    /// reference's better-sqlite3 connection).
    pub busy_timeout: Duration,
    /// Total time a write waits for the lock across retries before it fails with
    /// [`crate::StateError::Busy`] (default 120 s). Writers of different sessions only ever
    /// wait for each other; they never fail with "database is locked" while another process
    /// makes progress.
    pub max_busy_wait: Duration,
    /// What a completed save survives (default [`SaveDurability::Sync`]).
    pub durability: SaveDurability,
    /// Fault injection for crash-consistency tests: called at each [`FaultPoint`] of `save`;
    /// returning `true` stops the save right there, as a crash would (nothing is cleaned up),
    /// and `save` returns [`crate::StateError::InjectedFault`].
    #[doc(hidden)]
    pub fault_hook: Option<FaultHook>,
    /// I/O-error injection for failure tests: called at each [`IoStep`] of `save`; a returned
    /// [`IoFault`] makes that step fail with the OS error (a write may store part of its bytes
    /// first), as a full or failing disk would. Unlike [`StoreOptions::fault_hook`] the save
    /// then cleans up like for a real error.
    #[doc(hidden)]
    pub io_fault: Option<IoFaultHook>,
}

/// What a completed save survives. Both levels keep the crash-consistency guarantee for a
/// crash of the process (the order of writes is the same); they differ for power loss.
/// ([`StoreOptions::durability`]; the run-log writer's own modes are
/// `session_jsonl::Durability`.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SaveDurability {
    /// fsync of the messages file (`fdatasync` of an appended one; `fsync` of its directory
    /// after a create or rename) before the commit, and `synchronous=FULL` (SQLite syncs the
    /// WAL at every `COMMIT`): a returned save survives power loss, and a power loss at any
    /// point leaves the complete old or new state. Costs two syncs per appending save (as
    /// built in this workspace, both `fdatasync`: crate README, "Cost of a save").
    #[default]
    Sync,
    /// No fsync of files or directories, `synchronous=NORMAL` (the reference's level): a
    /// crash of the process still leaves the complete old or new state, but a power loss may
    /// lose recent saves or leave a messages file shorter than its commit (reported as
    /// damage by `load`).
    NoSync,
}

/// See [`StoreOptions::fault_hook`].
#[doc(hidden)]
pub type FaultHook = Arc<dyn Fn(FaultPoint) -> bool + Send + Sync>;

/// See [`StoreOptions::io_fault`].
#[doc(hidden)]
pub type IoFaultHook = Arc<dyn Fn(IoStep) -> Option<IoFault> + Send + Sync>;

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            busy_timeout: Duration::from_secs(5),
            max_busy_wait: Duration::from_secs(120),
            durability: SaveDurability::Sync,
            fault_hook: None,
            io_fault: None,
        }
    }
}

impl fmt::Debug for StoreOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreOptions")
            .field("busy_timeout", &self.busy_timeout)
            .field("max_busy_wait", &self.max_busy_wait)
            .field("durability", &self.durability)
            .field("fault_hook", &self.fault_hook.is_some())
            .field("io_fault", &self.io_fault.is_some())
            .finish()
    }
}

/// The I/O steps of `open` and `save` that can fail, in the order they happen; used by the
/// I/O-error injection hook ([`StoreOptions::io_fault`]).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum IoStep {
    /// `open`: switching `state.db` to WAL, which creates or grows its `-wal` and `-shm`
    /// files (fails as SQLite does on a full disk: `set journal_mode=WAL: disk I/O error`).
    DbSetup,
    /// Append path: recording the session in `messages/.append-intent` (see the crate
    /// README, "Crash consistency").
    IntentWrite,
    /// Append path: cutting an uncommitted tail off the messages file (`ftruncate`).
    TailTruncate,
    /// Append path: writing the new lines.
    AppendWrite,
    /// Append path: `fdatasync` of the messages file.
    AppendFsync,
    /// Append path: `fsync` of `messages/` after creating the file.
    AppendDirFsync,
    /// Rewrite path: creating the temp file.
    TempCreate,
    /// Rewrite path: writing the complete list to the temp file.
    TempWrite,
    /// Rewrite path: `fsync` of the temp file.
    TempFsync,
    /// Rewrite path: `fsync` of `messages/` (the temp file's name).
    TempDirFsync,
    /// The `COMMIT` of the row transaction (fails as SQLite's `SQLITE_FULL` / `SQLITE_IOERR`
    /// would: rolled back).
    Commit,
    /// Rewrite path, after the commit: renaming the temp file over the messages file.
    Rename,
    /// Rewrite path, after the commit: `fsync` of `messages/` after the rename.
    RenameDirFsync,
}

impl IoStep {
    /// Every step, in order.
    pub const ALL: [IoStep; 13] = [
        IoStep::DbSetup,
        IoStep::IntentWrite,
        IoStep::TailTruncate,
        IoStep::AppendWrite,
        IoStep::AppendFsync,
        IoStep::AppendDirFsync,
        IoStep::TempCreate,
        IoStep::TempWrite,
        IoStep::TempFsync,
        IoStep::TempDirFsync,
        IoStep::Commit,
        IoStep::Rename,
        IoStep::RenameDirFsync,
    ];
}

/// An injected I/O failure ([`StoreOptions::io_fault`]).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum IoFault {
    /// The step fails with this OS error number (`ENOSPC` is 28 and `EIO` 5 on Linux) and
    /// does nothing.
    Fail(i32),
    /// A write stores only its first `written` bytes, then fails with OS error `errno`
    /// (other steps just fail with `errno`).
    Short {
        /// Bytes stored before the failure.
        written: usize,
        /// The OS error number.
        errno: i32,
    },
}

/// Version token of a stored session, for compare-and-swap saves
/// ([`crate::StateStore::save_expecting`]).
///
/// It changes on every save by any writer: our own saves bump `counter` (kept in the
/// additive `session_files` table), and a save by the reference implementation, which does not
/// know that table, changes the row fingerprint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Generation {
    pub(crate) counter: u64,
    pub(crate) row: u64,
}

impl Generation {
    /// Number of saves made through this crate since the session was first saved by it
    /// (0 for a row only the reference has written).
    pub fn counter(&self) -> u64 {
        self.counter
    }
}

impl fmt::Display for Generation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{:016x}", self.counter, self.row)
    }
}

/// Where a loaded session came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LoadSource {
    /// The `session_state` row and `messages/<id>.jsonl`.
    Db,
    /// A legacy `state/<id>.json` snapshot (compat §2.8). `migrated` says whether it is now
    /// also stored in `state.db` (it is unless the migration failed or the store is read-only;
    /// see the load notes). When `messages/<id>.jsonl` existed too, the messages are that
    /// file's and the notes hold [`LoadNote::RebuiltFromMessages`].
    Legacy {
        /// Whether the migrated copy is durable in `state.db` + `messages/`.
        migrated: bool,
    },
}

/// A session returned by [`crate::StateStore::load`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LoadedSession {
    /// The state, keys in the reference's order (`schema_version` is always 1, like the
    /// reference's `load`).
    pub state: SessionState,
    /// Where it came from.
    pub source: LoadSource,
    /// Message lines that were skipped or kept only as raw objects, and file-level mismatches.
    /// Empty for a healthy session.
    pub damage: Vec<MessageDamage>,
    /// Other things worth telling the user (meta that is not JSON, a legacy file whose inner id
    /// differs, a failed migration, …). Empty for a healthy session.
    pub notes: Vec<LoadNote>,
    /// Version token for [`crate::StateStore::save_expecting`]; `None` when the session has no
    /// row in `state.db` (a legacy snapshot whose migration failed).
    pub generation: Option<Generation>,
}

/// One problem found in a messages file (or a legacy snapshot's `messages` array).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MessageDamage {
    /// The file.
    pub path: PathBuf,
    /// 1-based line (for a legacy snapshot: 1-based index in `messages`); `None` for
    /// file-level damage.
    pub line: Option<u64>,
    /// Byte offset of the line start within the file (0 for file-level damage and legacy).
    pub byte_offset: u64,
    /// What is wrong.
    pub kind: MessageDamageKind,
    /// Whether the message was still kept: a JSON object with a string `role` that does not
    /// fit the typed model is kept verbatim as `BaseMessage::Unknown` (tag = its role) so that
    /// nothing is lost on the next save.
    pub kept: bool,
    /// Human-readable detail (the parser's message).
    pub detail: String,
}

/// Kinds of [`MessageDamage`]: what is wrong with a session's messages file or its
/// `state.db` row (the damage kinds of run logs are `session_jsonl::DamageKind`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MessageDamageKind {
    /// The last line is cut short (a torn write): no `\n` and the JSON ends early.
    TornTail,
    /// A line is not valid JSON or not UTF-8.
    Corrupt,
    /// A line is valid JSON but not an object (the reference rejects these too, except
    /// arrays, which the typed model cannot hold).
    NotObject,
    /// An object without a string `role`.
    MissingRole,
    /// An object whose fields do not fit its role's schema (kept raw).
    Shape,
    /// The row's `message_count` differs from the number of messages found.
    CountMismatch {
        /// `message_count` of the row.
        expected: u64,
        /// Messages found (kept ones).
        found: u64,
    },
    /// The messages file does not hold what this crate committed (another writer rewrote or
    /// cut it); the whole file was read instead of the committed prefix.
    FileChanged,
    /// The messages file is not a regular file (a symbolic link, which is never followed, a
    /// FIFO, a socket or a device; a directory is an error): it was not read, and a save
    /// refuses to write it ([`crate::StateError::NotRegularFile`]).
    NotRegularFile {
        /// What it is (`"symbolic link"`, `"FIFO"`, …).
        kind: &'static str,
    },
    /// The messages file is larger than [`crate::MAX_SESSION_FILE_BYTES`]: it was not read.
    TooLarge {
        /// Its size in bytes.
        size: u64,
        /// The limit in bytes.
        limit: u64,
    },
    /// A value of the session's `state.db` row (or of our bookkeeping for it) is not what its
    /// column should hold: text that is not UTF-8 (the reference writes a lone surrogate as
    /// `ED A0 BC`), a BLOB, a NULL or a number of the wrong kind. The
    /// [`MessageDamage::path`] is `state.db`; no message is affected (`kept` is true). Text
    /// is used as decoded (U+FFFD), other values are left out; a save writes the decoded
    /// values back.
    Column(crate::ColumnDamage),
}

/// Non-damage observations made while loading.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LoadNote {
    /// `meta_json` is not a JSON object or array; meta was omitted (the reference does the
    /// same after reporting it).
    MetaUnreadable {
        /// The parser's message.
        detail: String,
    },
    /// A legacy snapshot field had a type the format does not allow (`invoke_seq` as a
    /// string, for example); the value was omitted. (Values of `state.db` columns are
    /// reported as [`MessageDamageKind::Column`].)
    ColumnType {
        /// Column (or legacy field) name.
        column: &'static str,
        /// What was found.
        found: String,
    },
    /// A legacy snapshot's inner `session_id` differs from its file name; it was loaded and
    /// migrated under the requested id (the reference migrates under the inner id and then
    /// re-migrates on every load).
    LegacyIdMismatch {
        /// The `session_id` inside the file.
        inner: String,
    },
    /// A legacy snapshot had `schema_version` other than 1; it is reported as 1.
    LegacySchemaVersion {
        /// The value found.
        found: String,
    },
    /// Migrating a legacy snapshot into `state.db` failed; the legacy state is still returned.
    MigrationFailed {
        /// The error.
        detail: String,
    },
    /// The session had no `session_state` row but a `messages/<id>.jsonl` file (a deleted or
    /// lost `state.db`; the reference keeps a legacy `state/<id>.json` beside the newer
    /// messages file). The row was rebuilt from the messages file, which the reference writes
    /// after the snapshot, instead of migrating the snapshot over it: the messages are the
    /// file's, `run_id`, `invoke_seq` and `meta` the snapshot's (none without one),
    /// `updated_at` the newer of the snapshot's and the file's modification time. Neither file
    /// is changed.
    RebuiltFromMessages {
        /// The messages file.
        path: PathBuf,
        /// Messages loaded from it.
        messages: u64,
        /// Elements of the snapshot's `messages` array (not used); `None` without a snapshot.
        legacy_messages: Option<u64>,
    },
    /// A save had written lines past the committed end of the messages file and then
    /// crashed before its commit; they were ignored (the next save cuts them off).
    UncommittedTail {
        /// Ignored bytes.
        bytes: u64,
    },
    /// A message line held a lone UTF-16 surrogate escape (`\ud83c` without its pair, as
    /// JavaScript's `JSON.stringify` writes a cut emoji). The message is loaded with U+FFFD in
    /// its place (a Rust string cannot hold it); saving the loaded message unchanged writes the
    /// line back with the original escape (so does the migration of a legacy snapshot).
    LoneSurrogate {
        /// The messages file (or the legacy snapshot).
        path: PathBuf,
        /// 1-based line (for a legacy snapshot: 1-based index in `messages`).
        line: u64,
        /// Byte offset of the escape's backslash within the file (for a legacy snapshot:
        /// within the message's compact JSON, since a snapshot may be pretty-printed).
        byte_offset: u64,
        /// The escape as written, e.g. `\ud83c`.
        escape: String,
    },
}

/// What [`crate::StateStore::save`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SaveReport {
    /// The new version token.
    pub generation: Generation,
    /// How the messages file was updated.
    pub mode: SaveMode,
    /// Bytes written to message files by this save (appended lines or the whole rewrite).
    pub bytes_written: u64,
    /// A rewrite whose commit succeeded but whose rename over `messages/<id>.jsonl` (or the
    /// directory fsync after it) failed. The save is durable: `load` reads the committed
    /// temp file, and the next `open` or `save` completes the rename.
    pub rename_deferred: Option<DeferredRename>,
    /// What the save found and settled before writing: an interrupted rename of an earlier
    /// save completed or its stale temp file kept aside, another session's uncommitted tail
    /// cut (see [`Recovery`]).
    pub recovery: Vec<Recovery>,
}

/// See [`SaveReport::rename_deferred`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DeferredRename {
    /// The committed temp file (`messages/<id>.jsonl.g<generation>.tmp`).
    pub temp: PathBuf,
    /// Why the rename (or the directory fsync after it) failed; its `source()` is the OS
    /// error.
    pub error: Arc<crate::StateError>,
}

impl PartialEq for DeferredRename {
    fn eq(&self, other: &Self) -> bool {
        self.temp == other.temp && self.error.to_string() == other.error.to_string()
    }
}

impl Eq for DeferredRename {}

/// Something `open` (or a save) found left behind by an interrupted save and settled
/// ([`crate::StateStore::recovery`], [`SaveReport::recovery`]; crate README, "Crash
/// consistency").
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Recovery {
    /// A committed rewrite whose rename a crash interrupted was completed: the temp file was
    /// renamed over `messages/<id>.jsonl`, after checking that the row, the temp file and the
    /// messages file are exactly what the commit recorded.
    RolledForward {
        /// The session.
        session_id: String,
        /// The temp file that became the messages file.
        temp: PathBuf,
    },
    /// The temp file of a committed rewrite whose rename was interrupted was *not* renamed:
    /// the session changed since that commit (`reason`), so renaming it would overwrite a
    /// newer save (the reference resumed and saved the session, for example). It was moved
    /// to `kept` (under `messages/stale/`) for forensics; nothing else was changed.
    StaleTempKept {
        /// The session.
        session_id: String,
        /// Where the temp file was.
        temp: PathBuf,
        /// Where it is now.
        kept: PathBuf,
        /// What changed since the commit.
        reason: StaleReason,
    },
    /// Bytes past the committed end of a messages file, written by a save that crashed or
    /// failed before its commit, were cut off, so that a reader of the whole file (the
    /// reference) does not take them for history.
    TailCut {
        /// The session.
        session_id: String,
        /// The messages file.
        path: PathBuf,
        /// Bytes removed.
        bytes: u64,
    },
    /// A recovery step failed (it is tried again by the next `open`); the store stays usable
    /// and `load` still returns the committed state.
    Failed {
        /// The session.
        session_id: String,
        /// The error, with its causes.
        detail: String,
    },
    /// A value of our bookkeeping that could not be read; that bookkeeping was not used.
    Damage(crate::ColumnDamage),
}

/// Why a pending temp file was kept aside instead of renamed ([`Recovery::StaleTempKept`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StaleReason {
    /// The session's `state.db` row changed (another writer saved the session) or is gone.
    RowChanged,
    /// The temp file no longer holds the committed bytes.
    TempChanged,
    /// `messages/<id>.jsonl` is no longer the file the rewrite replaces (another writer
    /// replaced it).
    MessagesFileChanged,
}

impl std::fmt::Display for StaleReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StaleReason::RowChanged => "the session's row changed since the commit",
            StaleReason::TempChanged => "the temp file no longer holds the committed bytes",
            StaleReason::MessagesFileChanged => "the messages file was replaced since the commit",
        })
    }
}

impl std::fmt::Display for Recovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Recovery::RolledForward { session_id, temp } => write!(
                f,
                "session {session_id}: completed the interrupted rename of {}",
                temp.display()
            ),
            Recovery::StaleTempKept {
                session_id,
                temp,
                kept,
                reason,
            } => write!(
                f,
                "session {session_id}: {} not renamed ({reason}); kept as {}",
                temp.display(),
                kept.display()
            ),
            Recovery::TailCut {
                session_id,
                path,
                bytes,
            } => write!(
                f,
                "session {session_id}: cut {bytes} uncommitted byte(s) off {}",
                path.display()
            ),
            Recovery::Failed { session_id, detail } => {
                write!(f, "session {session_id}: recovery failed: {detail}")
            }
            Recovery::Damage(d) => write!(f, "{d}"),
        }
    }
}

/// How a save updated `messages/<id>.jsonl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SaveMode {
    /// The new list extends the stored one: only new lines were appended (possibly none).
    Appended {
        /// Number of appended messages.
        messages: u64,
    },
    /// Earlier messages changed (or the file was not ours): the file was rewritten through a
    /// temp file, fsync, rename and directory fsync.
    Rewritten,
}

/// Filter of [`ListQuery`] on the `workspace_root` column.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum WorkspaceFilter {
    /// Every session, with or without a workspace root (`scope:"all"`).
    #[default]
    All,
    /// Sessions whose workspace root equals this one after normalisation
    /// ([`crate::normalize_workspace_root`] on both sides); sessions without one are hidden.
    Root(String),
}

/// Query of [`crate::StateStore::list`]; build with the methods or
/// `ListQuery { limit: Some(50), ..ListQuery::default() }`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListQuery {
    /// Workspace filter.
    pub workspace: WorkspaceFilter,
    /// Maximum number of entries (`None` = all).
    pub limit: Option<usize>,
    /// Continue after this entry (from [`ListPage::next_cursor`]).
    pub after: Option<ListCursor>,
}

impl ListQuery {
    /// Every session, newest first, no limit.
    pub fn all() -> Self {
        ListQuery::default()
    }

    /// Sets the workspace filter.
    pub fn workspace(mut self, root: impl Into<String>) -> Self {
        self.workspace = WorkspaceFilter::Root(root.into());
        self
    }

    /// Sets the limit.
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Sets the cursor.
    pub fn after(mut self, cursor: ListCursor) -> Self {
        self.after = Some(cursor);
        self
    }
}

/// Keyset position in a listing: `(updated_at, session_id)` of the last entry returned.
///
/// Order is `updated_at` descending by plain string comparison (what the reference's
/// `ORDER BY updated_at DESC` does), then `session_id` descending. Entries saved while a
/// listing is paged move to the front and are not repeated; entries that do not change are
/// neither skipped nor repeated.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ListCursor {
    /// `updated_at` of the last entry.
    pub updated_at: String,
    /// `session_id` of the last entry.
    pub session_id: String,
}

impl ListCursor {
    /// Encodes the cursor as one opaque string (`<len>:<session_id><updated_at>`) for command
    /// lines and RPC.
    pub fn to_token(&self) -> String {
        format!(
            "{}:{}{}",
            self.session_id.len(),
            self.session_id,
            self.updated_at
        )
    }

    /// Decodes [`ListCursor::to_token`] output.
    ///
    /// # Errors
    /// [`crate::StateError::InvalidCursor`] when the token is malformed.
    pub fn from_token(token: &str) -> crate::Result<Self> {
        let bad = || crate::StateError::InvalidCursor {
            token: token.to_owned(),
        };
        let (len, rest) = token.split_once(':').ok_or_else(bad)?;
        let len: usize = len.parse().map_err(|_| bad())?;
        if !rest.is_char_boundary(len.min(rest.len())) || rest.len() < len {
            return Err(bad());
        }
        let (id, updated_at) = rest.split_at(len);
        Ok(ListCursor {
            updated_at: updated_at.to_owned(),
            session_id: id.to_owned(),
        })
    }
}

/// Where a listed session lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EntrySource {
    /// A `session_state` row.
    Db,
    /// Only a legacy `state/<id>.json` snapshot (not migrated yet).
    Legacy,
}

/// One session in a listing.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ListEntry {
    /// The reference's summary shape (absent values are `None`).
    pub summary: SessionStateSummary,
    /// Where it lives.
    pub source: EntrySource,
}

/// A page of [`crate::StateStore::list`].
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct ListPage {
    /// Entries, newest first.
    pub entries: Vec<ListEntry>,
    /// Cursor for the next page; `None` when this page is the last.
    pub next_cursor: Option<ListCursor>,
    /// Legacy snapshots that could not be listed, and other problems that did not stop the
    /// listing.
    pub diagnostics: Vec<ListDiagnostic>,
}

/// A problem met while listing.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListDiagnostic {
    /// The file concerned (`state.db` for a value of a row).
    pub path: PathBuf,
    /// What is wrong.
    pub detail: String,
    /// For a value of a `session_state` row that is not what its column should hold (text
    /// that is not UTF-8, listed as decoded with U+FFFD): which session and column.
    pub column: Option<crate::ColumnDamage>,
}

/// What [`crate::StateStore::delete`] removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct DeleteReport {
    /// The `session_state` row existed.
    pub row: bool,
    /// `messages/<id>.jsonl` existed.
    pub messages_file: bool,
    /// `state/<id>.json` existed.
    pub legacy_file: bool,
}

impl DeleteReport {
    /// Whether anything was removed.
    pub fn found(&self) -> bool {
        self.row || self.messages_file || self.legacy_file
    }
}

/// Result of [`crate::StateStore::migrate_legacy`].
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct MigrationReport {
    /// One entry per file under `state/`, in file-name order.
    pub entries: Vec<MigrationEntry>,
}

/// One legacy snapshot in a [`MigrationReport`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct MigrationEntry {
    /// The id from the file name.
    pub session_id: String,
    /// The snapshot file.
    pub path: PathBuf,
    /// What happened (or would happen with `dry_run`).
    pub outcome: MigrationOutcome,
    /// Elements of the snapshot's `messages` array that were not migrated or were kept only
    /// raw (`line` = 1-based index in the array), or damage of the messages file when the row
    /// was rebuilt from it ([`LoadNote::RebuiltFromMessages`]). Empty for invalid and skipped
    /// snapshots.
    pub damage: Vec<MessageDamage>,
    /// Fields of the wrong type that were left out (`run_id`, `invoke_seq`, `meta` as
    /// [`LoadNote::ColumnType`]), an inner id that differs, lone surrogates, a rebuild from the
    /// messages file.
    pub notes: Vec<LoadNote>,
}

/// Outcome for one legacy snapshot.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum MigrationOutcome {
    /// `dry_run`: it would be migrated (summary of what would be stored).
    WouldMigrate(SessionStateSummary),
    /// It was migrated now; the legacy file stays in place.
    Migrated(SessionStateSummary),
    /// A row for this id already exists (the row wins; nothing to do).
    AlreadyIndexed,
    /// The snapshot is invalid and was left untouched.
    Invalid {
        /// Why.
        detail: String,
    },
    /// The file name is not a safe id; it was ignored.
    UnsafeName,
}

/// A loaded legacy snapshot with its problems (internal).
#[derive(Debug)]
pub(crate) struct LegacyLoad {
    pub(crate) state: SessionState,
    pub(crate) damage: Vec<MessageDamage>,
    pub(crate) notes: Vec<LoadNote>,
    /// Messages (by index) that had lone surrogate escapes, as written (compact, escapes
    /// restored, with `\n`): the migration writes these lines instead of U+FFFD.
    pub(crate) written: Vec<(usize, Vec<u8>)>,
    /// Elements of the snapshot's `messages` array (kept or not).
    pub(crate) elements: u64,
}
