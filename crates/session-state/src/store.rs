//! [`StateStore`]: load, save (incremental, crash-consistent, compare-and-swap), list,
//! delete and legacy migration over `state.db` + `messages/` + `state/`.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use parking_lot::{Mutex, MutexGuard};
use rusqlite::{Connection, params};
use session_schema::{BaseMessage, Num, RawJson, SessionState, Timestamp, check_id};

use crate::db::{self, ReadTx, WriteTx, db_err};
use crate::error::{Result, StateError};
use crate::fsutil::{self, EMPTY_DIGEST, FileIdentity};
use crate::messages::{Lines, parse_messages};
use crate::recovery::Uncommitted;
use crate::stored::{Base, FilesRow, Stored};
use crate::summary::summarize;
use crate::types::{
    DeferredRename, FaultPoint, Generation, IoStep, LoadNote, LoadSource, LoadedSession,
    MessageDamage, MessageDamageKind, Recovery, SaveDurability, SaveMode, SaveReport, StoreOptions,
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
    pub(crate) conn: Mutex<Connection>,
    pub(crate) options: StoreOptions,
    /// Opened with [`StateStore::open_read_only`]: every write is refused.
    pub(crate) read_only: bool,
    /// A run index in memory ([`StateStore::open_memory_index`]): read-only for every file,
    /// its in-memory `runs` table filled by [`StateStore::index_files`].
    pub(crate) memory_index: bool,
    /// Message lists of the last few sessions saved through this store, so that the next
    /// save of the same session serializes only the new messages.
    cache: Mutex<Vec<CachedSession>>,
    /// Sessions whose lease this store holds ([`StateStore::lease`]).
    pub(crate) leases: crate::lease::Registry,
    /// What `open` settled ([`StateStore::recovery`]).
    pub(crate) recovered: Vec<Recovery>,
}

/// Sessions kept in [`StateStore`]'s save cache.
const CACHED_SESSIONS: usize = 8;

/// What this store last committed for one session.
struct CachedSession {
    session_id: String,
    generation: Generation,
    messages: Vec<BaseMessage>,
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
        let conn = db::open_db(&db_path, &options)?;
        let mut store = StateStore {
            root,
            db_path,
            conn: Mutex::new(conn),
            options,
            read_only: false,
            memory_index: false,
            cache: Mutex::new(Vec::new()),
            leases: Default::default(),
            recovered: Vec::new(),
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
        let conn = db::open_db_read_only(&db_path, &options)?;
        Ok(StateStore {
            root,
            db_path,
            conn: Mutex::new(conn),
            options,
            read_only: true,
            memory_index: false,
            cache: Mutex::new(Vec::new()),
            leases: Default::default(),
            recovered: Vec::new(),
        })
    }

    /// A store over `sessions_root` with the connection `conn` (an in-memory run index), that
    /// refuses every write to files.
    pub(crate) fn memory_index_over(
        root: PathBuf,
        db_path: PathBuf,
        conn: Connection,
        options: StoreOptions,
    ) -> StateStore {
        StateStore {
            root,
            db_path,
            conn: Mutex::new(conn),
            options,
            read_only: true,
            memory_index: true,
            cache: Mutex::new(Vec::new()),
            leases: Default::default(),
            recovered: Vec::new(),
        }
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

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        if self.sync() {
            fsutil::sync_dir(dir)
        } else {
            Ok(())
        }
    }

    fn fault(&self, point: FaultPoint) -> Result<()> {
        match &self.options.fault_hook {
            Some(hook) if hook(point) => Err(StateError::InjectedFault { point }),
            _ => Ok(()),
        }
    }

    /// Reads the row and our bookkeeping for `session_id` (inside the caller's transaction).
    fn read_stored(&self, conn: &Connection, session_id: &str) -> Result<Option<Stored>> {
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
        let _lease = self.write_guard(&state.session_id)?;
        self.save_inner(state, None, &[])
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
    /// lease takes the session's lease for its duration, see [`StateStore::lease`]);
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
        let _lease = self.write_guard(&state.session_id)?;
        self.save_inner(state, Some(expected), &[])
    }

    /// A legacy snapshot's migration: [`StateStore::save_expecting`] with `None`, writing
    /// the messages that had lone surrogate escapes as they were written.
    pub(crate) fn save_migrated(&self, legacy: &crate::types::LegacyLoad) -> Result<SaveReport> {
        self.save_inner(&legacy.state, Some(None), &legacy.written)
    }

    /// `written`: lines (by message index, with `\n`) to write instead of serializing those
    /// messages of `state` (their form as written, lone surrogate escapes restored).
    fn save_inner(
        &self,
        state: &SessionState,
        expected: Option<Option<Generation>>,
        written: &[(usize, Vec<u8>)],
    ) -> Result<SaveReport> {
        let id = state.session_id.as_str();
        checked(id)?;
        self.check_writable("save")?;
        // CPU work before taking the lock. When this store committed a prefix of the list
        // (checked by value, not by serializing), only the new messages are serialized;
        // whether that prefix is still the committed one is checked under the lock.
        let cached = self.cached_prefix(id, &state.messages);
        let mut lines = match cached {
            Some((_, k)) if written.is_empty() => Lines::serialize_from(id, &state.messages, k)?,
            _ => Lines::serialize(id, &state.messages)?,
        };
        for (i, line) in written {
            lines.replace(*i, line);
        }
        let meta_json = match &state.meta {
            Some(m) => Some(
                String::from_utf8(crate::compact::compact_json(m.get().as_bytes())).map_err(
                    |e| StateError::Serialize {
                        session_id: id.to_owned(),
                        index: usize::MAX,
                        source: serde::de::Error::custom(e),
                    },
                )?,
            ),
            None => None,
        };
        let meta_raw = match &meta_json {
            Some(m) => {
                Some(
                    RawJson::from_json(m.clone()).map_err(|source| StateError::Serialize {
                        session_id: id.to_owned(),
                        index: usize::MAX,
                        source,
                    })?,
                )
            }
            None => None,
        };
        let summary = summarize(&state.messages, meta_raw.as_ref());
        let schema_version = state
            .schema_version
            .as_ref()
            .and_then(Num::as_i64)
            .unwrap_or(1);

        let main = self.messages_path(id)?;
        let dir = self.messages_dir();
        let conn = self.lock();
        let tx = WriteTx::begin(&conn, &self.db_path, self.options.max_busy_wait)?;
        let stored = self.read_stored(&conn, id)?;
        let current = stored.as_ref().map(|s| s.generation);
        if let Some(expected) = expected
            && expected != current
        {
            return Err(StateError::Conflict {
                session_id: id.to_owned(),
                expected: expected.map_or_else(|| "none".to_owned(), |g| g.to_string()),
                found: current.map_or_else(|| "none".to_owned(), |g| g.to_string()),
            });
        }
        let files = stored.as_ref().and_then(|s| s.files.clone());
        // Complete a committed rewrite whose rename a crash interrupted, before touching the
        // file (its content is the committed one), once it is proven nobody saved since;
        // otherwise its temp file is kept aside.
        let mut recovery = Vec::new();
        if let Some(recorded) = stored.as_ref().and_then(|s| s.recorded.as_ref())
            && let Some(done) = self.roll_forward(id, stored.as_ref(), recorded)?
        {
            recovery.push(done);
        }
        let old_counter = current.map_or(0, |g| g.counter);
        // The counter comes from the database, which another tool may have written: wrap
        // instead of overflowing (a generation only needs to differ from the last one).
        let new_counter = old_counter.wrapping_add(1);

        // Append when our committed prefix is exactly the start of the new list.
        let cache_valid = match (cached, &files) {
            (Some((g, k)), Some(f)) => Some(g) == current && f.file_lines == k as u64,
            _ => false,
        };
        if lines.base != 0 && !cache_valid {
            lines = Lines::serialize(id, &state.messages)?;
        }
        // Where the new lines go, or `None` for a rewrite. `earlier` is the stored list as
        // read from the file when it had to be read, so that a rewrite keeps the written form
        // of unchanged lines.
        let mut earlier: Option<crate::messages::ReadMessages> = None;
        let append_from: Option<(usize, u64, u64)> = match (&stored, &files) {
            // No row: a messages file already there is never cut or overwritten.
            (None, _) => Some(crate::adopt::first_save_base(id, &main, &state.messages)?),
            (Some(_), Some(f)) => {
                let n = usize::try_from(f.file_lines).unwrap_or(usize::MAX);
                let serialized_match = cache_valid
                    || (n <= lines.count() && lines.prefix(n) == (f.file_len, f.file_digest));
                // The bookkeeping says which bytes we committed; appending is only safe when
                // the file still holds exactly them (it may have been replaced, cut, extended
                // or edited since).
                if serialized_match {
                    let recorded = self.cached_identity(id, current);
                    self.holds_committed(&main, f, recorded)?.then_some((
                        n,
                        f.file_len,
                        f.file_digest,
                    ))
                } else {
                    // The serialized list differs from the committed bytes, which may still
                    // hold the same messages (a line with repaired lone surrogates): compare
                    // the committed lines as parsed.
                    match self.read_committed(&main, f)? {
                        Some(bytes) => {
                            let read = parse_messages(&main, &bytes);
                            if read.is_prefix_of(&bytes, &state.messages) {
                                Some((n, f.file_len, f.file_digest))
                            } else {
                                earlier = Some(read);
                                None
                            }
                        }
                        None => None,
                    }
                }
            }
            (Some(_), None) => {
                // A row the reference wrote (or an older tool): the whole file is what it
                // stored. Append when it is one clean message per line and those messages
                // start the new list.
                let bytes = fsutil::read_if_exists(&main)?.unwrap_or_default();
                let read = parse_messages(&main, &bytes);
                if read.is_prefix_of(&bytes, &state.messages) {
                    let (digest, count) = fsutil::digest_lines(&bytes);
                    Some((
                        usize::try_from(count).unwrap_or(usize::MAX),
                        bytes.len() as u64,
                        digest,
                    ))
                } else {
                    earlier = Some(read);
                    None
                }
            }
        };
        let mut pending_file: Option<String> = None;
        // What this save writes before its commit; taken back when the save fails before the
        // commit lands (an injected crash leaves everything as a crash would).
        let mut uncommitted = Uncommitted::Nothing;
        let staged = (|| -> Result<(Written, u64)> {
            let written = match append_from {
                Some((n, committed_len, committed_digest)) => {
                    let (mut file, created) = fsutil::open_private_rw(&main)?;
                    let actual = file
                        .metadata()
                        .map_err(|e| StateError::io("stat", &main, e))?
                        .len();
                    let handle = file
                        .try_clone()
                        .map_err(|e| StateError::io("open", &main, e))?;
                    uncommitted = Uncommitted::Appended {
                        file: handle,
                        path: main.clone(),
                        committed_len,
                        created,
                    };
                    let new_bytes = lines.concat(n);
                    if !new_bytes.is_empty() || actual != committed_len {
                        // Bytes past the committed length are taken back if the save fails,
                        // and cut by the next open if it crashes.
                        self.record_append_intent(&conn, id, &mut recovery)?;
                    }
                    if actual != committed_len {
                        // An uncommitted tail of a crashed save (checked above: the committed
                        // bytes before it are ours), or an orphan file of a session that has
                        // no row yet.
                        self.io()
                            .set_len(IoStep::TailTruncate, &file, committed_len, &main)?;
                        self.fault(FaultPoint::TailTruncated)?;
                    }
                    if !new_bytes.is_empty() {
                        file.seek(SeekFrom::Start(committed_len))
                            .map_err(|e| StateError::io("seek", &main, e))?;
                        self.io()
                            .write_all(IoStep::AppendWrite, &mut file, &new_bytes, &main)?;
                        self.fault(FaultPoint::AppendWritten)?;
                    }
                    if !new_bytes.is_empty() || actual != committed_len || created {
                        if self.sync() {
                            self.io().sync_data(IoStep::AppendFsync, &file, &main)?;
                        }
                        self.fault(FaultPoint::AppendSynced)?;
                    }
                    if created {
                        if self.sync() {
                            self.io().sync_dir(IoStep::AppendDirFsync, &dir)?;
                        }
                        self.fault(FaultPoint::AppendDirSynced)?;
                    }
                    let identity = FileIdentity::of(
                        &file
                            .metadata()
                            .map_err(|e| StateError::io("stat", &main, e))?,
                    );
                    let digest = lines.extend_digest(committed_digest, n);
                    let len = committed_len + new_bytes.len() as u64;
                    (
                        SaveMode::Appended {
                            messages: (lines.count() - n) as u64,
                        },
                        new_bytes.len() as u64,
                        len,
                        digest,
                        identity,
                    )
                }
                None => {
                    if lines.base != 0 {
                        lines = Lines::serialize(id, &state.messages)?;
                    }
                    if let Some(read) = &earlier {
                        for (i, line) in read.unchanged_lines(&state.messages) {
                            lines.replace(i, line);
                        }
                    }
                    self.rewrite(id, &lines, new_counter, &mut pending_file, &mut uncommitted)?
                }
            };
            // What the messages file holds while the rewrite is pending: the roll-forward of
            // an interrupted rename checks that nobody replaced it since.
            let pending_base = match &pending_file {
                Some(_) => Some(Base::of_file(&main)?.encode(new_counter)),
                None => None,
            };

            // The commit point: the reference's row and our bookkeeping in one transaction.
            let err = db_err(&self.db_path, "write session row");
            conn.prepare_cached(
                "INSERT INTO session_state (session_id, updated_at, run_id, invoke_seq, schema_version, meta_json, message_count, last_user_message, workspace_root) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) \
                 ON CONFLICT(session_id) DO UPDATE SET updated_at = excluded.updated_at, run_id = excluded.run_id, \
                 invoke_seq = excluded.invoke_seq, schema_version = excluded.schema_version, meta_json = excluded.meta_json, \
                 message_count = excluded.message_count, last_user_message = excluded.last_user_message, \
                 workspace_root = excluded.workspace_root",
            )
            .and_then(|mut stmt| stmt.execute(params![
                    id,
                    state.updated_at.as_str(),
                    state.run_id,
                    state.invoke_seq,
                    schema_version,
                    meta_json,
                    i64::try_from(summary.message_count).unwrap_or(i64::MAX),
                    summary.last_user_message,
                    summary.workspace_root,
                ]))
            .map_err(err)?;
            let fresh = self.read_stored(&conn, id)?.ok_or_else(|| StateError::Db {
                path: self.db_path.clone(),
                context: "re-read session row",
                source: rusqlite::Error::QueryReturnedNoRows,
            })?;
            let (_, _, file_len, file_digest, _) = written;
            conn.prepare_cached(
                "INSERT INTO session_files (session_id, generation, row_fingerprint, file_len, file_lines, file_digest, pending_file, pending_base) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
                 ON CONFLICT(session_id) DO UPDATE SET generation = excluded.generation, row_fingerprint = excluded.row_fingerprint, \
                 file_len = excluded.file_len, file_lines = excluded.file_lines, file_digest = excluded.file_digest, \
                 pending_file = excluded.pending_file, pending_base = excluded.pending_base",
            )
            .and_then(|mut stmt| stmt.execute(params![
                    id,
                    new_counter.cast_signed(),
                    fresh.generation.row.cast_signed(),
                    file_len.cast_signed(),
                    i64::try_from(lines.count()).unwrap_or(i64::MAX),
                    file_digest.cast_signed(),
                    pending_file,
                    pending_base,
                ]))
            .map_err(db_err(&self.db_path, "write session bookkeeping"))?;
            Ok((written, fresh.generation.row))
        })();
        let ((mode, bytes_written, file_len, file_digest, identity), row) = match staged {
            Ok(v) => v,
            Err(e) => {
                drop(tx);
                return Err(abandon(e, uncommitted));
            }
        };
        let generation = Generation {
            counter: new_counter,
            row,
        };
        if let Err(e) = self.commit_save(tx) {
            // A failed COMMIT rolls back; make sure it did before taking the writes back.
            let landed = self.read_stored(&conn, id).ok().flatten().is_some_and(|s| {
                s.generation == generation
                    && s.files
                        .is_some_and(|f| f.file_len == file_len && f.file_digest == file_digest)
            });
            if !landed {
                return Err(abandon(e, uncommitted));
            }
        }
        drop(uncommitted);
        self.remember(
            id,
            generation,
            &state.messages,
            if cache_valid { cached } else { None },
            identity,
        );
        self.fault(FaultPoint::Committed)?;
        let mut rename_deferred = None;
        match &pending_file {
            Some(name) => {
                let tmp = dir.join(name);
                match self.finish_own_rename(&tmp, &main, &dir) {
                    Ok(()) => {}
                    Err(e @ StateError::InjectedFault { .. }) => return Err(e),
                    // The save is committed: `load` reads the temp file and the next open or
                    // save completes the rename.
                    Err(e) => {
                        rename_deferred = Some(DeferredRename {
                            temp: tmp,
                            error: std::sync::Arc::new(e),
                        });
                    }
                }
            }
            None => {
                // A crashed rewrite at this generation may have left its temp file behind
                // (best effort: the save is committed).
                let _ = fsutil::remove_if_exists(&self.temp_path(id, new_counter));
            }
        }
        Ok(SaveReport {
            generation,
            mode,
            bytes_written,
            rename_deferred,
            recovery,
        })
    }

    /// Commits a save's transaction (the commit point). An injected `Commit` fault rolls
    /// back and fails as SQLite does when the disk is full (`SQLITE_FULL` for `ENOSPC`,
    /// `SQLITE_IOERR` otherwise).
    fn commit_save(&self, tx: WriteTx<'_>) -> Result<()> {
        if let Err(e) = self.io().check(IoStep::Commit, "commit", &self.db_path) {
            drop(tx);
            return Err(crate::faults::sqlite_failure(&self.db_path, "commit", &e));
        }
        tx.commit()
    }

    /// Renames this save's committed temp file over the messages file and fsyncs the
    /// directory. A temp file that is gone was renamed by another process's roll-forward.
    fn finish_own_rename(&self, tmp: &Path, main: &Path, dir: &Path) -> Result<()> {
        match self.io().rename(IoStep::Rename, tmp, main) {
            Ok(()) => {}
            Err(StateError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                return Ok(());
            }
            Err(e) => return Err(e),
        }
        self.fault(FaultPoint::Renamed)?;
        if self.sync() {
            self.io().sync_dir(IoStep::RenameDirFsync, dir)?;
        }
        self.fault(FaultPoint::RenameDirSynced)
    }

    /// `(generation, k)` when the cache says this store committed `messages[..k]` as
    /// generation `generation` (compared by value).
    fn cached_prefix(&self, id: &str, messages: &[BaseMessage]) -> Option<(Generation, usize)> {
        let cache = self.cache.lock();
        let entry = cache.iter().find(|c| c.session_id == id)?;
        let k = entry.messages.len();
        (k <= messages.len() && entry.messages[..] == messages[..k])
            .then_some((entry.generation, k))
    }

    /// Records what was just committed (most recent last, at most [`CACHED_SESSIONS`]).
    fn remember(
        &self,
        id: &str,
        generation: Generation,
        messages: &[BaseMessage],
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
                identity,
            },
        };
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
        if cache.len() > CACHED_SESSIONS {
            cache.remove(0);
        }
    }

    pub(crate) fn forget(&self, id: &str) {
        let mut cache = self.cache.lock();
        cache.retain(|c| c.session_id != id);
    }

    /// Writes the complete list to a temp file that becomes the committed content
    /// (`pending_file`) at commit; renamed over the main file after the commit.
    fn rewrite(
        &self,
        id: &str,
        lines: &Lines,
        new_counter: u64,
        pending: &mut Option<String>,
        uncommitted: &mut Uncommitted,
    ) -> Result<Written> {
        let tmp = self.temp_path(id, new_counter);
        self.io().check(IoStep::TempCreate, "create", &tmp)?;
        let mut f = fsutil::create_private_truncate(&tmp)?;
        *uncommitted = Uncommitted::Temp(tmp.clone());
        let all = lines.concat(0);
        self.io().write_all(IoStep::TempWrite, &mut f, &all, &tmp)?;
        self.fault(FaultPoint::TempWritten)?;
        if self.sync() {
            self.io().sync_all(IoStep::TempFsync, &f, &tmp)?;
        }
        self.fault(FaultPoint::TempSynced)?;
        if self.sync() {
            self.io()
                .sync_dir(IoStep::TempDirFsync, &self.messages_dir())?;
        }
        self.fault(FaultPoint::TempDirSynced)?;
        // The rename keeps the inode; it may change the ctime, which only costs the next save
        // one read of the committed bytes.
        let identity =
            FileIdentity::of(&f.metadata().map_err(|e| StateError::io("stat", &tmp, e))?);
        *pending = tmp.file_name().map(|n| n.to_string_lossy().into_owned());
        Ok((
            SaveMode::Rewritten,
            all.len() as u64,
            lines.total_len(),
            lines.extend_digest(EMPTY_DIGEST, 0),
            identity,
        ))
    }

    /// What `stat` said about the messages file when this store committed generation
    /// `current` of session `id` (`None` when this store did not commit it).
    fn cached_identity(&self, id: &str, current: Option<Generation>) -> Option<FileIdentity> {
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
    fn holds_committed(
        &self,
        main: &Path,
        f: &FilesRow,
        recorded: Option<FileIdentity>,
    ) -> Result<bool> {
        let Some(file) = fsutil::open_rw_if_exists(main)? else {
            return Ok(f.file_len == 0);
        };
        let meta = file
            .metadata()
            .map_err(|e| StateError::io("stat", main, e))?;
        if meta.len() < f.file_len {
            return Ok(false);
        }
        if recorded == Some(FileIdentity::of(&meta)) {
            return Ok(true);
        }
        drop(file);
        Ok(self.read_committed(main, f)?.is_some())
    }

    /// The committed bytes of `main` (its first `file_len` bytes) when their line count and
    /// digest chain are the committed ones; `None` when the file is missing, shorter or holds
    /// other bytes.
    fn read_committed(&self, main: &Path, f: &FilesRow) -> Result<Option<Vec<u8>>> {
        let Some(file) = fsutil::open_rw_if_exists(main)? else {
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
        let Some(mut legacy) = crate::legacy::read_legacy(self, id)? else {
            // A messages file without a row and without a snapshot stays invisible: it is
            // what a first save that crashed before its commit leaves (README, "Crash
            // consistency"), indistinguishable from a file whose row was lost.
            return Ok(None);
        };
        let legacy_path = self.legacy_path(id)?;
        if let Some(adopted) =
            crate::legacy::adopt_messages_file(self, id, Some(&legacy), &legacy_path)?
        {
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

/// What the file side of a save wrote: how, the bytes written, the committed length and
/// digest chain of the messages file, and the file's `stat` identity.
type Written = (SaveMode, u64, u64, u64, FileIdentity);

/// A save failed before its commit landed: its file writes are taken back (unless the
/// failure is an injected crash, which must leave everything in place) and `e` is returned.
fn abandon(e: StateError, uncommitted: Uncommitted) -> StateError {
    if !matches!(e, StateError::InjectedFault { .. }) {
        uncommitted.take_back();
    }
    e
}

pub(crate) fn checked(id: &str) -> Result<()> {
    check_id(id).map_err(|source| StateError::UnsafeId {
        id: id.to_owned(),
        source,
    })
}
