//! [`StateStore`]: load, save (incremental, crash-consistent, compare-and-swap), list,
//! delete and legacy migration over `state.db` + `messages/` + `state/`.

use std::io::Read;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};
use rusqlite::{Connection, params};
use session_schema::{BaseMessage, Num, SessionState, Timestamp, check_id};

use crate::db::{self, ReadTx, WriteTx, db_err};
use crate::error::{Result, StateError};
use crate::fault_point::FaultPoint;
use crate::fsutil::{self, FileIdentity};
use crate::index::RunIndex;
use crate::messages::parse_messages;
use crate::stored::{FilesRow, Stored};
use crate::summary::summarize;
use crate::types::{
    Generation, IoStep, LoadNote, LoadSource, LoadedSession, MessageDamage, MessageDamageKind,
    Recovery, SaveDurability, SaveReport, StoreOptions,
};

/// Resumable session state under one sessions root (spec §2, §3.1; compat notes §2.5–2.11).
///
/// Layout, shared with the reference implementation (both may use it at once):
///
/// ```text
/// <root>/state.db                    SQLite, WAL: table session_state (reference schema),
///                                    plus our tables session_files and runs
/// <root>/messages/<session_id>.jsonl one compact message per line
/// <root>/state/<session_id>.json     legacy snapshots (read, migrated, never deleted by load)
/// ```
///
/// One connection per store, behind a mutex: a `StateStore` is `Send + Sync` and may be shared
/// between threads; several processes may open the same root at once.
pub struct StateStore {
    pub(crate) root: PathBuf,
    pub(crate) db_path: PathBuf,
    /// The `state.db` connection, shared with [`StateStore::run_index`].
    pub(crate) conn: Arc<Mutex<Connection>>,
    pub(crate) options: StoreOptions,
    /// The run index over this root, in `state.db` (or in memory), sharing `conn`.
    pub(crate) index: RunIndex,
    /// Opened with [`StateStore::open_read_only`]: every write is refused.
    pub(crate) read_only: bool,
    /// A run index in memory ([`StateStore::open_memory_index`]): read-only for every file,
    /// its in-memory `runs` table filled by [`StateStore::index_files`].
    pub(crate) memory_index: bool,
    /// Message lists of the last few sessions saved through this store, so that the next
    /// save of the same session serializes only the new messages.
    cache: Mutex<Vec<CachedSession>>,
    /// How many sessions the save cache keeps: [`CACHED_SESSIONS`], or the size of the
    /// largest batch saved through this store (at most [`MAX_CACHED_SESSIONS`]), so that every
    /// session of a batch saved again appends without reading its committed bytes.
    cache_room: std::sync::atomic::AtomicUsize,
    /// Sessions whose lease this store holds ([`StateStore::lease`]).
    pub(crate) leases: crate::lease_registry::Registry,
    /// What `open` settled ([`StateStore::recovery`]).
    pub(crate) recovered: Vec<Recovery>,
    /// Whether `session_state` stores a save's bound values unchanged
    /// ([`crate::stored::row_keeps_bound_values`]), learnt at the first save.
    row_keeps_bound: std::sync::OnceLock<bool>,
    /// `messages/.append-intent`, kept open after this store's first appending save.
    pub(crate) intent: Mutex<Option<std::fs::File>>,
}

/// Sessions kept in [`StateStore`]'s save cache.
const CACHED_SESSIONS: usize = 8;

/// Most sessions the save cache keeps after large batches ([`StateStore::save_batch`]).
const MAX_CACHED_SESSIONS: usize = 1024;

/// A prefix of a list to save that this store committed ([`StateStore::cached_prefix`]).
pub(crate) struct Remembered {
    /// The generation of that commit.
    pub(crate) generation: Generation,
    /// Its number of messages: the list's first `kept` messages.
    pub(crate) kept: usize,
    /// The summary's last user message of those messages (column `last_user_message`).
    pub(crate) last_user: Option<String>,
}

impl Remembered {
    fn of(entry: &CachedSession) -> Remembered {
        Remembered {
            generation: entry.generation,
            kept: entry.messages.len(),
            last_user: entry.last_user.clone(),
        }
    }
}

/// What this store last committed for one session.
struct CachedSession {
    session_id: String,
    generation: Generation,
    messages: Vec<BaseMessage>,
    /// The summary's last user message of `messages` (column `last_user_message`).
    last_user: Option<String>,
    /// `stat` of the messages file at that commit (see [`FileIdentity`]).
    identity: FileIdentity,
}

impl std::fmt::Debug for StateStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateStore")
            .field("root", &self.root)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl StateStore {
    /// Opens (creating when missing) the store under `sessions_root` with default options.
    ///
    /// Creates `sessions_root`, `messages/` and `state/` (mode 0700 when created) and
    /// `state.db` (mode 0600) with the reference's exact `session_state` schema and index,
    /// WAL journal, `synchronous=FULL` (see [`StoreOptions::durability`]) and a busy timeout. A database the reference created is
    /// migrated the way it would migrate it (`ADD COLUMN workspace_root`), plus a backfill of
    /// `workspace_root` from `meta_json`; our bookkeeping lives in the additional tables
    /// `session_files` and `runs` and in `PRAGMA user_version`.
    ///
    /// Committed saves whose final rename was interrupted by a crash are completed here,
    /// once it is proven that the session did not change since (else the temp file is kept
    /// aside in `messages/stale/`), and bytes a crashed save appended past the committed end
    /// of a messages file are cut off; [`StateStore::recovery`] says what was done.
    ///
    /// # Errors
    /// [`StateError::Io`] when a directory cannot be created; [`StateError::Db`] when
    /// `state.db` cannot be opened or initialised (for example when it is a directory);
    /// [`StateError::Busy`] when another process holds the write lock for longer than
    /// [`StoreOptions::max_busy_wait`].
    ///
    /// # Examples
    ///
    /// ```
    /// use session_state::StateStore;
    ///
    /// let root = tempfile::tempdir()?; // normally ~/.codelia/sessions
    /// let store = StateStore::open(root.path())?;
    /// assert!(root.path().join("state.db").is_file());
    /// assert!(root.path().join("messages").is_dir());
    /// assert!(store.load("f6d2c6d5-4a12-4cc4-bbc9-9a0c0d2b5af1")?.is_none());
    /// // Ids that could leave the directory are refused before any path is built.
    /// assert!(store.load("../elsewhere").is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open(sessions_root: impl AsRef<Path>) -> Result<StateStore> {
        StateStore::open_with(sessions_root, StoreOptions::default())
    }

    /// [`StateStore::open`] with explicit options.
    ///
    /// # Errors
    /// As [`StateStore::open`].
    pub fn open_with(sessions_root: impl AsRef<Path>, options: StoreOptions) -> Result<StateStore> {
        let root = sessions_root.as_ref().to_path_buf();
        fsutil::create_dir_private(&root)?;
        fsutil::create_dir_private(&root.join("messages"))?;
        fsutil::create_dir_private(&root.join("state"))?;
        let db_path = db::db_path(&root);
        if let Err(e) =
            crate::faults::Io(options.io_fault.as_ref()).check(IoStep::DbSetup, "open", &db_path)
        {
            return Err(crate::faults::sqlite_failure(
                &db_path,
                "set journal_mode=WAL",
                &e,
            ));
        }
        let conn = Arc::new(Mutex::new(db::open_db(&db_path, &options)?));
        let index = RunIndex::over(
            root.clone(),
            db_path.clone(),
            Arc::clone(&conn),
            options.clone(),
            false,
            false,
        );
        let mut store = StateStore {
            root,
            db_path,
            conn,
            options,
            index,
            read_only: false,
            memory_index: false,
            cache: Mutex::new(Vec::new()),
            cache_room: std::sync::atomic::AtomicUsize::new(CACHED_SESSIONS),
            leases: Default::default(),
            recovered: Vec::new(),
            row_keeps_bound: std::sync::OnceLock::new(),
            intent: Mutex::new(None),
        };
        store.recovered = store.recover_at_open()?;
        Ok(store)
    }

    /// [`StateError::ReadOnly`] when the store was opened read-only.
    pub(crate) fn check_writable(&self, op: &'static str) -> Result<()> {
        if self.read_only {
            Err(StateError::ReadOnly {
                root: self.root.clone(),
                op,
            })
        } else {
            Ok(())
        }
    }

    /// Opens the store under `sessions_root` for reading only, with default options.
    ///
    /// For a store the user cannot write (another user's, a read-only mount, a backup):
    /// nothing is created, migrated, rolled forward or written, in `state.db` or beside it.
    /// [`StateStore::list`], [`StateStore::load`], [`StateStore::runs_for_session`] and
    /// [`StateStore::list_runs`] work as on a writable store, with these differences:
    ///
    /// * `load` of a session that exists only as a legacy snapshot returns it with
    ///   [`LoadSource::Legacy`]` { migrated: false }` instead of migrating it;
    /// * the run index is what the last writer left (`index_runs` cannot bring it up to
    ///   date), so runs written since are missing from `list_runs`;
    /// * [`StateStore::save`], [`StateStore::save_expecting`], [`StateStore::delete`],
    ///   [`StateStore::migrate_legacy`] (unless `dry_run`), [`StateStore::index_runs`] and
    ///   [`StateStore::reindex`] return [`StateError::ReadOnly`] before touching anything.
    ///
    /// How `state.db` is opened (SQLite `mode=ro`, or `immutable=1` when no WAL is in use;
    /// an in-memory stand-in when there is no `state.db`; stand-ins for tables an older
    /// database lacks) is described on the crate README's "Read-only access".
    ///
    /// # Errors
    /// [`StateError::Io`] when `sessions_root` is not a directory; [`StateError::Db`] when
    /// `state.db` exists but cannot be read.
    pub fn open_read_only(sessions_root: impl AsRef<Path>) -> Result<StateStore> {
        StateStore::open_read_only_with(sessions_root, StoreOptions::default())
    }

    /// [`StateStore::open_read_only`] with explicit options (busy timeouts; `durability` is
    /// irrelevant).
    ///
    /// # Errors
    /// As [`StateStore::open_read_only`].
    pub fn open_read_only_with(
        sessions_root: impl AsRef<Path>,
        options: StoreOptions,
    ) -> Result<StateStore> {
        let root = sessions_root.as_ref().to_path_buf();
        match std::fs::metadata(&root) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(StateError::io(
                    "open",
                    &root,
                    std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory"),
                ));
            }
            Err(e) => return Err(StateError::io("open", &root, e)),
        }
        let db_path = db::db_path(&root);
        let conn = Arc::new(Mutex::new(db::open_db_read_only(&db_path, &options)?));
        let index = RunIndex::over(
            root.clone(),
            db_path.clone(),
            Arc::clone(&conn),
            options.clone(),
            true,
            false,
        );
        Ok(StateStore {
            root,
            db_path,
            conn,
            options,
            index,
            read_only: true,
            memory_index: false,
            cache: Mutex::new(Vec::new()),
            cache_room: std::sync::atomic::AtomicUsize::new(CACHED_SESSIONS),
            leases: Default::default(),
            recovered: Vec::new(),
            row_keeps_bound: std::sync::OnceLock::new(),
            intent: Mutex::new(None),
        })
    }

    /// A store over the root of `index` (an in-memory run index), sharing its connection,
    /// that refuses every write to files.
    pub(crate) fn memory_index_over(index: RunIndex) -> StateStore {
        StateStore {
            root: index.root.clone(),
            db_path: index.db_path.clone(),
            conn: Arc::clone(&index.conn),
            options: index.options.clone(),
            index,
            read_only: true,
            memory_index: true,
            cache: Mutex::new(Vec::new()),
            cache_room: std::sync::atomic::AtomicUsize::new(CACHED_SESSIONS),
            leases: Default::default(),
            recovered: Vec::new(),
            row_keeps_bound: std::sync::OnceLock::new(),
            intent: Mutex::new(None),
        }
    }

    /// The run index of this store's root (spec §2), kept in `state.db` and sharing this
    /// store's connection (in memory for [`StateStore::open_memory_index`]; read-only, so
    /// refusing a refresh, for [`StateStore::open_read_only`]). Refresh, listing, lookup and
    /// totals of runs are [`RunIndex`]'s.
    pub fn run_index(&self) -> &RunIndex {
        &self.index
    }

    /// Whether the store was opened with [`StateStore::open_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// The sessions root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Path of `state.db`.
    pub fn db_path(&self) -> &Path {
        &self.db_path
    }

    /// Path of `messages/<session_id>.jsonl`.
    ///
    /// # Errors
    /// [`StateError::UnsafeId`] when the id fails the safe-id check.
    pub fn messages_path(&self, session_id: &str) -> Result<PathBuf> {
        checked(session_id)?;
        Ok(self.messages_dir().join(format!("{session_id}.jsonl")))
    }

    /// Path of the legacy snapshot `state/<session_id>.json`.
    ///
    /// # Errors
    /// [`StateError::UnsafeId`] when the id fails the safe-id check.
    pub fn legacy_path(&self, session_id: &str) -> Result<PathBuf> {
        checked(session_id)?;
        Ok(self.root.join("state").join(format!("{session_id}.json")))
    }

    pub(crate) fn messages_dir(&self) -> PathBuf {
        self.root.join("messages")
    }

    pub(crate) fn temp_path(&self, session_id: &str, generation: u64) -> PathBuf {
        self.messages_dir()
            .join(format!("{session_id}.jsonl.g{generation}.tmp"))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock()
    }

    pub(crate) fn sync(&self) -> bool {
        self.options.durability == SaveDurability::Sync
    }

    pub(crate) fn sync_dir(&self, dir: &Path) -> Result<()> {
        if self.sync() {
            fsutil::sync_dir(dir)
        } else {
            Ok(())
        }
    }

    pub(crate) fn fault(&self, point: FaultPoint) -> Result<()> {
        match &self.options.fault_hook {
            Some(hook) if hook(point) => Err(StateError::InjectedFault { point }),
            _ => Ok(()),
        }
    }

    /// This store's file operations (with its I/O-error injection hook, if any).
    pub(crate) fn io(&self) -> crate::faults::Io<'_> {
        crate::faults::Io(self.options.io_fault.as_ref())
    }

    /// Reads the row and our bookkeeping for `session_id` (inside the caller's transaction).
    pub(crate) fn read_stored(
        &self,
        conn: &Connection,
        session_id: &str,
    ) -> Result<Option<Stored>> {
        crate::stored::read_stored(conn, &self.db_path, session_id)
    }

    /// The generation of the row of `id` (`None`: no row), inside the caller's transaction.
    pub(crate) fn stored_generation(
        &self,
        conn: &Connection,
        id: &str,
    ) -> Result<Option<Generation>> {
        Ok(self.read_stored(conn, id)?.map(|s| s.generation))
    }

    /// Saves `state` (no compare-and-swap: last writer wins, like the reference).
    ///
    /// See [`StateStore::save_expecting`] for what is written and the guarantees.
    ///
    /// # Errors
    /// As [`StateStore::save_expecting`], without [`StateError::Conflict`].
    pub fn save(&self, state: &SessionState) -> Result<SaveReport> {
        self.save_one(state, None, &[], None, true)
    }

    /// Saves `state` only if the stored session still has generation `expected`
    /// (`None` = the session must not exist yet); otherwise nothing is written and the result
    /// is [`StateError::Conflict`]. Use the generation from [`StateStore::load`] or from the
    /// previous [`SaveReport`].
    ///
    /// What is written: when the new message list extends the stored one, only the new lines
    /// are appended to `messages/<id>.jsonl` (one write, one fsync); otherwise the file is
    /// rewritten through a temp file, fsync, rename and directory fsync. Then the
    /// `session_state` row (every column as the reference writes it: summary per compat
    /// §2.6/§2.10/§2.11, `meta_json` = compact JSON of `meta`) and our bookkeeping row are
    /// committed in one transaction, the commit point. A crash at any step leaves
    /// [`StateStore::load`] returning the complete old or the complete new state (crate
    /// README, "Crash consistency").
    ///
    /// # Errors
    /// [`StateError::UnsafeId`] before anything is touched; [`StateError::Conflict`];
    /// [`StateError::Serialize`] for a message holding invalid raw JSON; [`StateError::Io`];
    /// [`StateError::Db`]; [`StateError::Busy`] after [`StoreOptions::max_busy_wait`];
    /// [`StateError::SessionBusy`] when another holder has the session open (a save without a
    /// lease checks the session's lease under the write lock of `state.db` and waits for a
    /// delete or housekeeping step that holds it, see [`StateStore::lease`]);
    /// [`StateError::OrphanMessages`] for a first save (no row) over a messages file that
    /// does not start the list; [`StateError::NotRegularFile`] / [`StateError::FileTooLarge`]
    /// when the messages file is a link, a FIFO, … or too large to read. Nothing is written.
    ///
    /// # Examples
    ///
    /// Two windows resumed the same session; the one that saves second is refused instead of
    /// silently overwriting the other's turn.
    ///
    /// ```
    /// use session_schema::{SessionState, Timestamp, parse_message};
    /// use session_state::{StateStore, StateError};
    ///
    /// let root = tempfile::tempdir()?;
    /// let store = StateStore::open(root.path())?;
    /// let mut state = SessionState {
    ///     session_id: "f6d2c6d5-4a12-4cc4-bbc9-9a0c0d2b5af1".into(),
    ///     updated_at: Timestamp::from_raw("2026-02-03T12:00:00.000Z"),
    ///     messages: vec![parse_message(br#"{"role":"user","content":"hi"}"#)?.value],
    ///     ..Default::default()
    /// };
    /// // `None`: the session must not exist yet.
    /// let saved = store.save_expecting(&state, None)?;
    ///
    /// let window_a = store.load(&state.session_id)?.ok_or("missing")?;
    /// let window_b = store.load(&state.session_id)?.ok_or("missing")?;
    /// assert_eq!(window_a.generation, Some(saved.generation));
    ///
    /// state.messages.push(parse_message(br#"{"role":"user","content":"from A"}"#)?.value);
    /// store.save_expecting(&state, window_a.generation)?;
    ///
    /// let mut from_b = window_b.state.clone();
    /// from_b.messages.push(parse_message(br#"{"role":"user","content":"from B"}"#)?.value);
    /// let refused = store.save_expecting(&from_b, window_b.generation);
    /// assert!(matches!(refused, Err(StateError::Conflict { .. })));
    /// let stored = store.load(&state.session_id)?.ok_or("missing")?;
    /// assert_eq!(stored.state.messages, state.messages); // A's turn is kept
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn save_expecting(
        &self,
        state: &SessionState,
        expected: Option<Generation>,
    ) -> Result<SaveReport> {
        self.save_one(state, Some(expected), &[], None, true)
    }

    /// [`StateStore::save`] for a caller that only appended messages since its last save of
    /// the session through this store: `state.messages[..kept]` are the messages that save
    /// stored, and only `state.messages[kept..]` are serialized and appended. The kept
    /// messages are not compared one by one (only the last of them is, against this store's
    /// copy), so a save costs what its new messages cost, not what the whole list does (a
    /// `save` compares every message with the stored list to find where the new ones start).
    ///
    /// The store checks what it can without reading the list: this store made the session's
    /// last commit (its generation is still the stored one, checked under the write lock),
    /// that commit held exactly `kept` messages, and the last of them equals
    /// `state.messages[kept - 1]`. When any of these fails (another process saved since, this
    /// store's cache of recent sessions let the session go, `kept` is not the count of the
    /// last save, the last kept message was changed) the save is a [`StateStore::save`],
    /// which compares every message. A list whose earlier messages were changed in place
    /// (compaction, an edit) must be saved with [`StateStore::save`]: here such a change is
    /// not seen, and the stored list keeps the messages as they were saved.
    ///
    /// # Errors
    /// As [`StateStore::save`].
    ///
    /// # Examples
    ///
    /// ```
    /// use session_schema::{SessionState, Timestamp, parse_message};
    /// use session_state::{SaveMode, StateStore};
    ///
    /// let root = tempfile::tempdir()?;
    /// let store = StateStore::open(root.path())?;
    /// let mut state = SessionState {
    ///     session_id: "f6d2c6d5-4a12-4cc4-bbc9-9a0c0d2b5af1".into(),
    ///     updated_at: Timestamp::from_raw("2026-02-03T12:00:00.000Z"),
    ///     messages: vec![parse_message(br#"{"role":"user","content":"hi"}"#)?.value],
    ///     ..Default::default()
    /// };
    /// store.save(&state)?;
    /// let saved = state.messages.len();
    /// state.messages.push(parse_message(br#"{"role":"assistant","content":"hello"}"#)?.value);
    /// let report = store.save_appended(&state, saved)?;
    /// assert_eq!(report.mode, SaveMode::Appended { messages: 1 });
    /// let stored = store.load(&state.session_id)?.ok_or("missing")?;
    /// assert_eq!(stored.state.messages, state.messages);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn save_appended(&self, state: &SessionState, kept: usize) -> Result<SaveReport> {
        self.save_one(state, None, &[], Some(kept), true)
    }

    /// [`StateStore::save_appended`] with the compare-and-swap of
    /// [`StateStore::save_expecting`]: saves only if the stored session still has generation
    /// `expected` (`None` = the session must not exist yet), `state.messages[..kept]` being
    /// the messages of this store's last save of it, unchanged.
    ///
    /// # Errors
    /// As [`StateStore::save_expecting`].
    pub fn save_appended_expecting(
        &self,
        state: &SessionState,
        expected: Option<Generation>,
        kept: usize,
    ) -> Result<SaveReport> {
        self.save_one(state, Some(expected), &[], Some(kept), true)
    }

    /// A legacy snapshot's migration: [`StateStore::save_expecting`] with `None`, writing
    /// the messages that had lone surrogate escapes as they were written.
    pub(crate) fn save_migrated(&self, legacy: &crate::types::LegacyLoad) -> Result<SaveReport> {
        self.save_one(&legacy.state, Some(None), &legacy.written, None, false)
    }

    /// Commits a save's transaction (the commit point). An injected `Commit` fault rolls
    /// back and fails as SQLite does when the disk is full (`SQLITE_FULL` for `ENOSPC`,
    /// `SQLITE_IOERR` otherwise).
    pub(crate) fn commit_save(&self, tx: WriteTx<'_>) -> Result<()> {
        if let Err(e) = self.io().check(IoStep::Commit, "commit", &self.db_path) {
            drop(tx);
            return Err(crate::faults::sqlite_failure(&self.db_path, "commit", &e));
        }
        tx.commit()
    }

    /// [`crate::stored::row_keeps_bound_values`] of this store's database, asked once.
    ///
    /// # Errors
    /// [`StateError::Db`] when the table's columns cannot be read.
    pub(crate) fn row_keeps_bound_values(&self, conn: &Connection) -> Result<bool> {
        if let Some(known) = self.row_keeps_bound.get() {
            return Ok(*known);
        }
        let known = crate::stored::row_keeps_bound_values(conn)
            .map_err(db_err(&self.db_path, "read session_state columns"))?;
        Ok(*self.row_keeps_bound.get_or_init(|| known))
    }

    /// What the cache says this store committed as a prefix `messages[..k]` of `messages`
    /// (compared by value).
    pub(crate) fn cached_prefix(&self, id: &str, messages: &[BaseMessage]) -> Option<Remembered> {
        let cache = self.cache.lock();
        let entry = cache.iter().find(|c| c.session_id == id)?;
        let k = entry.messages.len();
        (k <= messages.len() && entry.messages[..] == messages[..k]).then(|| Remembered::of(entry))
    }

    /// [`StateStore::cached_prefix`] as the caller of [`StateStore::save_appended`] says: when
    /// this store's last commit of `id` held exactly `kept` messages and the last of them
    /// equals `messages[kept - 1]`; the ones before it are not compared.
    pub(crate) fn cached_prefix_kept(
        &self,
        id: &str,
        messages: &[BaseMessage],
        kept: usize,
    ) -> Option<Remembered> {
        let cache = self.cache.lock();
        let entry = cache.iter().find(|c| c.session_id == id)?;
        let last_equal = match kept.checked_sub(1) {
            None => true,
            Some(last) => entry
                .messages
                .get(last)
                .is_some_and(|m| messages.get(last) == Some(m)),
        };
        (entry.messages.len() == kept && kept <= messages.len() && last_equal)
            .then(|| Remembered::of(entry))
    }

    /// Records what was just committed (most recent last, at most [`CACHED_SESSIONS`]).
    pub(crate) fn remember(
        &self,
        id: &str,
        generation: Generation,
        messages: &[BaseMessage],
        last_user: Option<&String>,
        extended: Option<(Generation, usize)>,
        identity: FileIdentity,
    ) {
        let mut cache = self.cache.lock();
        let mut entry = match cache.iter().position(|c| c.session_id == id) {
            Some(i) => cache.remove(i),
            None => CachedSession {
                session_id: id.to_owned(),
                generation,
                messages: Vec::new(),
                last_user: None,
                identity,
            },
        };
        entry.last_user = last_user.cloned();
        match extended {
            // The cached list is a prefix of `messages`: clone only the new ones.
            Some((_, k)) if entry.messages.len() == k => {
                entry.messages.extend_from_slice(&messages[k..]);
            }
            _ => entry.messages = messages.to_vec(),
        }
        entry.generation = generation;
        entry.identity = identity;
        cache.push(entry);
        let room = self
            .cache_room
            .load(std::sync::atomic::Ordering::Relaxed)
            .max(1);
        if cache.len() > room {
            let excess = cache.len() - room;
            cache.drain(..excess);
        }
    }

    /// Lets the save cache keep the `sessions` of a batch (at most [`MAX_CACHED_SESSIONS`]).
    pub(crate) fn widen_cache(&self, sessions: usize) {
        self.cache_room.fetch_max(
            sessions.min(MAX_CACHED_SESSIONS),
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    pub(crate) fn forget(&self, id: &str) {
        let mut cache = self.cache.lock();
        cache.retain(|c| c.session_id != id);
    }

    /// What `stat` said about the messages file when this store committed generation
    /// `current` of session `id` (`None` when this store did not commit it).
    pub(crate) fn cached_identity(
        &self,
        id: &str,
        current: Option<Generation>,
    ) -> Option<FileIdentity> {
        let cache = self.cache.lock();
        cache
            .iter()
            .find(|c| c.session_id == id && Some(c.generation) == current)
            .map(|c| c.identity)
    }

    /// Whether `main` still starts with exactly the bytes we committed (`f`), so that new
    /// lines may be appended after them. Cheap when this store made the commit and the file's
    /// `stat` is the one it saw then; otherwise (another process committed, or the file
    /// changed since) the committed bytes are read and their line count and digest
    /// chain compared. A missing file holds them only when nothing was committed; a shorter
    /// one never; a longer one when the bytes past the committed length are only an
    /// uncommitted tail (a crashed save).
    ///
    /// When the cheap check holds, the file it opened (read-write) comes back with its length,
    /// for the append to write through without opening it again.
    pub(crate) fn holds_committed(
        &self,
        main: &Path,
        f: &FilesRow,
        recorded: Option<FileIdentity>,
    ) -> Result<(bool, Option<(std::fs::File, u64)>)> {
        let Some((file, meta)) = fsutil::open_rw_if_exists(main)? else {
            return Ok((f.file_len == 0, None));
        };
        if meta.len() < f.file_len {
            return Ok((false, None));
        }
        if recorded == Some(FileIdentity::of(&meta)) {
            return Ok((true, Some((file, meta.len()))));
        }
        drop(file);
        Ok((self.read_committed(main, f)?.is_some(), None))
    }

    /// The committed bytes of `main` (its first `file_len` bytes) when their line count and
    /// digest chain are the committed ones; `None` when the file is missing, shorter or holds
    /// other bytes.
    pub(crate) fn read_committed(&self, main: &Path, f: &FilesRow) -> Result<Option<Vec<u8>>> {
        let Some((file, _)) = fsutil::open_rw_if_exists(main)? else {
            return Ok((f.file_len == 0).then(Vec::new));
        };
        let mut committed = Vec::new();
        file.take(f.file_len)
            .read_to_end(&mut committed)
            .map_err(|e| StateError::io("read", main, e))?;
        Ok((committed.len() as u64 == f.file_len
            && fsutil::digest_lines(&committed) == (f.file_digest, f.file_lines))
            .then_some(committed))
    }

    /// Loads a session: the `session_state` row and its messages file, or else a legacy
    /// `state/<id>.json` snapshot, which is then migrated into `state.db` under `session_id`
    /// (compat §2.7, §2.8 with the quirks fixed, see the crate README). `Ok(None)` when neither
    /// exists. A snapshot never replaces an existing `messages/<id>.jsonl`: with both and no
    /// row, the row is rebuilt from the messages file (fields from the snapshot) and
    /// [`LoadNote::RebuiltFromMessages`] says so. A messages file with neither row nor snapshot
    /// is not loaded (a first save that crashed before its commit leaves one).
    ///
    /// Tolerant: damaged message lines are reported in [`LoadedSession::damage`] and the
    /// complete messages are returned. Only the committed part of the messages file is read, so
    /// a crash in the middle of a save never shows new messages with old metadata.
    ///
    /// # Errors
    /// [`StateError::UnsafeId`] before any path is built; [`StateError::LegacyInvalid`] when
    /// only a legacy snapshot exists and it is not a valid state (the file is left untouched);
    /// [`StateError::Io`]; [`StateError::Db`].
    ///
    /// # Examples
    ///
    /// A session that only exists as a legacy snapshot is migrated when loaded; the snapshot
    /// stays where it was (the reference still reads it).
    ///
    /// ```
    /// use session_state::{LoadSource, StateStore};
    ///
    /// let root = tempfile::tempdir()?;
    /// let store = StateStore::open(root.path())?;
    /// let id = "f6d2c6d5-4a12-4cc4-bbc9-9a0c0d2b5af1";
    /// std::fs::write(
    ///     root.path().join(format!("state/{id}.json")),
    ///     format!(r#"{{"schema_version":1,"session_id":"{id}","updated_at":"2026-02-03T12:00:00.000Z","invoke_seq":7,"messages":[{{"role":"user","content":"hi"}}]}}"#),
    /// )?;
    ///
    /// let loaded = store.load(id)?.ok_or("not found")?;
    /// assert_eq!(loaded.source, LoadSource::Legacy { migrated: true });
    /// assert_eq!(loaded.state.invoke_seq, Some(7));
    /// assert_eq!(loaded.state.messages.len(), 1);
    /// assert!(loaded.damage.is_empty());
    /// assert!(root.path().join(format!("messages/{id}.jsonl")).is_file());
    /// assert!(root.path().join(format!("state/{id}.json")).is_file());
    /// // From now on it loads from state.db.
    /// assert_eq!(store.load(id)?.ok_or("not found")?.source, LoadSource::Db);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn load(&self, session_id: &str) -> Result<Option<LoadedSession>> {
        checked(session_id)?;
        // A rewrite by a concurrent writer between our snapshot of the row and our read of the
        // file shows up as a digest mismatch: take a fresh snapshot and read again.
        for _ in 0..3 {
            match self.load_db(session_id, false)? {
                LoadAttempt::Found(s) => return Ok(Some(*s)),
                LoadAttempt::Retry => continue,
                LoadAttempt::NoRow => return self.load_legacy_and_migrate(session_id),
            }
        }
        match self.load_db(session_id, true)? {
            LoadAttempt::Found(s) => Ok(Some(*s)),
            LoadAttempt::Retry => Ok(None),
            LoadAttempt::NoRow => self.load_legacy_and_migrate(session_id),
        }
    }

    fn load_db(&self, id: &str, last_try: bool) -> Result<LoadAttempt> {
        let stored = {
            let conn = self.lock();
            let _rtx = ReadTx::begin(&conn, &self.db_path, self.options.max_busy_wait)?;
            self.read_stored(&conn, id)?
        };
        let Some(stored) = stored else {
            return Ok(LoadAttempt::NoRow);
        };
        let main = self.messages_path(id)?;
        let mut damage = Vec::new();
        let mut notes = Vec::new();
        let messages = match &stored.files {
            Some(files) => {
                let pending = files
                    .pending_file
                    .as_deref()
                    .map(|p| self.messages_dir().join(p))
                    .filter(|p| p.exists());
                let path = pending.unwrap_or_else(|| main.clone());
                let (bytes, unreadable) = fsutil::read_for_load(&path, &mut damage)?;
                let committed = if unreadable {
                    0
                } else {
                    usize::try_from(files.file_len).unwrap_or(usize::MAX)
                };
                let prefix_ok = unreadable
                    || bytes.len() >= committed && {
                        let (digest, count) = fsutil::digest_lines(&bytes[..committed]);
                        digest == files.file_digest && count == files.file_lines
                    };
                if prefix_ok {
                    if bytes.len() > committed {
                        notes.push(LoadNote::UncommittedTail {
                            bytes: (bytes.len() - committed) as u64,
                        });
                    }
                    let read = parse_messages(&path, &bytes[..committed]);
                    damage.extend(read.damage);
                    notes.extend(read.notes);
                    read.messages
                } else if !last_try {
                    return Ok(LoadAttempt::Retry);
                } else {
                    damage.push(MessageDamage {
                        path: path.clone(),
                        line: None,
                        byte_offset: 0,
                        kind: MessageDamageKind::FileChanged,
                        kept: true,
                        detail: format!(
                            "file holds {} bytes, {} were committed with a different digest",
                            bytes.len(),
                            committed
                        ),
                    });
                    let read = parse_messages(&path, &bytes);
                    damage.extend(read.damage);
                    notes.extend(read.notes);
                    read.messages
                }
            }
            None => {
                // Written by the reference (or by an older tool): the whole file is the truth.
                let (bytes, _) = fsutil::read_for_load(&main, &mut damage)?;
                let read = parse_messages(&main, &bytes);
                damage.extend(read.damage);
                notes.extend(read.notes);
                read.messages
            }
        };
        let (row, column_damage) = crate::stored::decode_row(&stored.values, id, &mut notes);
        // A negative `message_count` (written by another tool) is a mismatch too; it is
        // reported as 0 with the value as written in the detail.
        if let Some(expected) = row.message_count
            && u64::try_from(expected).ok() != Some(messages.len() as u64)
        {
            damage.push(MessageDamage {
                path: main.clone(),
                line: None,
                byte_offset: 0,
                kind: MessageDamageKind::CountMismatch {
                    expected: u64::try_from(expected).unwrap_or(0),
                    found: messages.len() as u64,
                },
                kept: true,
                detail: format!(
                    "message_count of the row ({expected}) differs from the messages file"
                ),
            });
        }
        damage.extend(
            column_damage
                .into_iter()
                .chain(stored.damage)
                .map(|d| crate::stored::as_message_damage(&self.db_path, d)),
        );
        let crate::stored::RowFields {
            updated_at,
            run_id,
            invoke_seq,
            meta,
            ..
        } = row;
        let state = SessionState {
            schema_version: Some(Num::from(1i64)),
            session_id: id.to_owned(),
            updated_at: Timestamp::from_raw(updated_at),
            run_id,
            invoke_seq,
            messages,
            meta,
            ..Default::default()
        };
        Ok(LoadAttempt::Found(Box::new(LoadedSession {
            state,
            source: LoadSource::Db,
            damage,
            notes,
            generation: Some(stored.generation),
        })))
    }

    fn load_legacy_and_migrate(&self, id: &str) -> Result<Option<LoadedSession>> {
        let legacy_path = self.legacy_path(id)?;
        let Some(mut legacy) = crate::legacy::read_legacy(&legacy_path, id)? else {
            // A messages file without a row and without a snapshot stays invisible: it is
            // what a first save that crashed before its commit leaves (README, "Crash
            // consistency"), indistinguishable from a file whose row was lost.
            return Ok(None);
        };
        if let Some(adopted) = crate::legacy::adopt_messages_file(
            &self.messages_path(id)?,
            id,
            Some(&legacy),
            &legacy_path,
        )? {
            return self.load_adopted(id, adopted);
        }
        let mut notes = std::mem::take(&mut legacy.notes);
        if self.read_only {
            return Ok(Some(LoadedSession {
                state: legacy.state,
                source: LoadSource::Legacy { migrated: false },
                damage: legacy.damage,
                notes,
                generation: None,
            }));
        }
        match self.save_migrated(&legacy) {
            Ok(report) => Ok(Some(LoadedSession {
                state: legacy.state,
                source: LoadSource::Legacy { migrated: true },
                damage: legacy.damage,
                notes,
                generation: Some(report.generation),
            })),
            Err(StateError::Conflict { .. }) => {
                // Another process migrated (or saved) it first: its row wins.
                match self.load_db(id, true)? {
                    LoadAttempt::Found(s) => Ok(Some(*s)),
                    _ => Ok(None),
                }
            }
            Err(e) => {
                notes.push(LoadNote::MigrationFailed {
                    detail: e.to_string(),
                });
                Ok(Some(LoadedSession {
                    state: legacy.state,
                    source: LoadSource::Legacy { migrated: false },
                    damage: legacy.damage,
                    notes,
                    generation: None,
                }))
            }
        }
    }

    /// A session with a legacy snapshot and a messages file but no row: the row is rebuilt
    /// from the messages file ([`LoadNote::RebuiltFromMessages`]) and the session loaded
    /// through it; nothing is written to either file.
    fn load_adopted(
        &self,
        id: &str,
        adopted: crate::legacy::Adoption,
    ) -> Result<Option<LoadedSession>> {
        let unmigrated = |mut adopted: crate::legacy::Adoption, failure: Option<String>| {
            let mut notes = adopted.legacy_notes;
            notes.append(&mut adopted.file_notes);
            if let Some(detail) = failure {
                notes.push(LoadNote::MigrationFailed { detail });
            }
            Ok(Some(LoadedSession {
                state: adopted.state,
                source: LoadSource::Legacy { migrated: false },
                damage: adopted.damage,
                notes,
                generation: None,
            }))
        };
        if self.read_only {
            return unmigrated(adopted, None);
        }
        let inserted = match self.insert_adopted_row(&adopted.state) {
            Ok(inserted) => inserted,
            Err(e) => return unmigrated(adopted, Some(e.to_string())),
        };
        match self.load_db(id, true)? {
            LoadAttempt::Found(mut s) => {
                if inserted {
                    s.source = LoadSource::Legacy { migrated: true };
                    let mut notes = adopted.legacy_notes;
                    notes.append(&mut s.notes);
                    s.notes = notes;
                }
                Ok(Some(*s))
            }
            _ => Ok(None),
        }
    }

    /// Writes the `session_state` row of a session rebuilt from its messages file, unless a
    /// row exists by now (then `Ok(false)`). No `session_files` bookkeeping is written (a stale
    /// one is removed): like a row of the reference, the whole file is the session's messages,
    /// and the next save compares the file's lines with its list before appending.
    pub(crate) fn insert_adopted_row(&self, state: &SessionState) -> Result<bool> {
        let id = state.session_id.as_str();
        checked(id)?;
        self.check_writable("migrate legacy snapshot")?;
        let meta_json = state.meta.as_ref().map(|m| {
            String::from_utf8_lossy(&crate::compact::compact_json(m.get().as_bytes())).into_owned()
        });
        let summary = summarize(&state.messages, state.meta.as_ref());
        let conn = self.lock();
        let tx = WriteTx::begin(&conn, &self.db_path, self.options.max_busy_wait)?;
        let err = db_err(&self.db_path, "write rebuilt session row");
        let inserted = conn
            .prepare_cached(
                "INSERT INTO session_state (session_id, updated_at, run_id, invoke_seq, schema_version, meta_json, message_count, last_user_message, workspace_root) \
                 VALUES (?1, ?2, ?3, ?4, 1, ?5, ?6, ?7, ?8) ON CONFLICT(session_id) DO NOTHING",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    id,
                    state.updated_at.as_str(),
                    state.run_id,
                    state.invoke_seq,
                    meta_json,
                    i64::try_from(summary.message_count).unwrap_or(i64::MAX),
                    summary.last_user_message,
                    summary.workspace_root,
                ])
            })
            .map_err(err)?
            == 1;
        if inserted {
            conn.prepare_cached("DELETE FROM session_files WHERE session_id = ?1")
                .and_then(|mut stmt| stmt.execute([id]))
                .map_err(db_err(&self.db_path, "write rebuilt session row"))?;
        }
        tx.commit()?;
        drop(conn);
        self.forget(id);
        Ok(inserted)
    }

    /// Deletes a session: the legacy snapshot first (so it cannot reappear), then the row
    /// and our bookkeeping (one transaction), then the messages file and any temp file.
    ///
    /// # Errors
    /// [`StateError::UnsafeId`]; [`StateError::Io`]; [`StateError::Db`];
    /// [`StateError::Busy`]; [`StateError::SessionBusy`] when another holder has the session
    /// open.
    pub fn delete(&self, session_id: &str) -> Result<crate::types::DeleteReport> {
        checked(session_id)?;
        self.check_writable("delete")?;
        let _lease = self.write_guard(session_id)?;
        self.forget(session_id);
        let mut report = crate::types::DeleteReport::default();
        let legacy = self.legacy_path(session_id)?;
        report.legacy_file = fsutil::remove_if_exists(&legacy)?;
        if report.legacy_file {
            self.sync_dir(&self.root.join("state"))?;
        }
        let counter = {
            let conn = self.lock();
            let tx = WriteTx::begin(&conn, &self.db_path, self.options.max_busy_wait)?;
            let stored = self.read_stored(&conn, session_id)?;
            let counter = crate::column::query_int(
                &conn,
                "SELECT generation FROM session_files WHERE session_id = ?1",
                [session_id],
            )
            .map_err(db_err(&self.db_path, "read session bookkeeping"))?;
            let err = db_err(&self.db_path, "delete session");
            conn.execute(
                "DELETE FROM session_state WHERE session_id = ?1",
                [session_id],
            )
            .map_err(err)?;
            conn.execute(
                "DELETE FROM session_files WHERE session_id = ?1",
                [session_id],
            )
            .map_err(db_err(&self.db_path, "delete session bookkeeping"))?;
            tx.commit()?;
            report.row = stored.is_some();
            counter.cast_unsigned()
        };
        report.messages_file = fsutil::remove_if_exists(&self.messages_path(session_id)?)?;
        fsutil::remove_if_exists(&self.temp_path(session_id, counter))?;
        fsutil::remove_if_exists(&self.temp_path(session_id, counter.wrapping_add(1)))?;
        self.sync_dir(&self.messages_dir())?;
        Ok(report)
    }
}

enum LoadAttempt {
    Found(Box<LoadedSession>),
    Retry,
    NoRow,
}

pub(crate) fn checked(id: &str) -> Result<()> {
    check_id(id).map_err(|source| StateError::UnsafeId {
        id: id.to_owned(),
        source,
    })
}
