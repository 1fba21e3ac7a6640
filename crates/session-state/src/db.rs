//! `state.db`: connection setup, the reference's schema, our additive tables, busy retries.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::functions::FunctionFlags;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, ErrorCode, OpenFlags};

use crate::column::{OwnedValue, int_of, owned_row, query_int, query_texts};
use crate::error::{Result, StateError};
use crate::summary::workspace_root_from_meta;
use crate::workspace::normalize_workspace_root;

/// The reference's `CREATE TABLE`, byte for byte (compat §2.5; the tabs are part of the text
/// SQLite keeps in `sqlite_master`).
pub(crate) const CREATE_SESSION_STATE: &str = "CREATE TABLE IF NOT EXISTS session_state (\n\t\t\t\tsession_id TEXT PRIMARY KEY,\n\t\t\t\tupdated_at TEXT NOT NULL,\n\t\t\t\trun_id TEXT,\n\t\t\t\tinvoke_seq INTEGER,\n\t\t\t\tschema_version INTEGER NOT NULL,\n\t\t\t\tmeta_json TEXT,\n\t\t\t\tmessage_count INTEGER,\n\t\t\t\tlast_user_message TEXT,\n\t\t\t\tworkspace_root TEXT\n\t\t\t)";

/// The reference's index.
pub(crate) const CREATE_UPDATED_AT_INDEX: &str = "CREATE INDEX IF NOT EXISTS idx_session_state_updated_at\n\t\t\tON session_state(updated_at DESC)";

/// Our additive bookkeeping (ignored by the reference, which only touches `session_state`).
const CREATE_OURS: &str = "
CREATE TABLE IF NOT EXISTS session_files (
    session_id TEXT PRIMARY KEY,
    generation INTEGER NOT NULL,
    row_fingerprint INTEGER NOT NULL,
    file_len INTEGER NOT NULL,
    file_lines INTEGER NOT NULL,
    file_digest INTEGER NOT NULL,
    pending_file TEXT,
    pending_base TEXT
);
CREATE TABLE IF NOT EXISTS runs (
    path TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    session_id TEXT,
    started_at TEXT,
    model_provider TEXT,
    model_name TEXT,
    outcome TEXT NOT NULL,
    last_status TEXT,
    record_count INTEGER NOT NULL,
    invocation_count INTEGER NOT NULL,
    input_tokens INTEGER NOT NULL,
    cached_input_tokens INTEGER NOT NULL,
    cache_creation_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    total_tokens INTEGER NOT NULL,
    file_size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    first_input TEXT,
    workspace_root TEXT,
    damage_count INTEGER NOT NULL,
    last_ts TEXT,
    compressed INTEGER NOT NULL,
    started_at_utc TEXT NOT NULL DEFAULT '',
    diagnostic TEXT,
    partial INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS run_dirs (
    path TEXT PRIMARY KEY,
    depth INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    scanned_ns INTEGER NOT NULL,
    run_count INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS run_watch (
    path TEXT PRIMARY KEY
);
CREATE TABLE IF NOT EXISTS run_resume (
    path TEXT PRIMARY KEY,
    checkpoint TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS session_labels (
    session_id TEXT PRIMARY KEY,
    title TEXT,
    pinned INTEGER NOT NULL DEFAULT 0,
    updated_at TEXT NOT NULL
);
";

/// Indexes of the run listing, on the normalised start time (created after the migration that
/// adds `started_at_utc`). Version 2 and earlier had `runs_by_session` and `runs_by_start` on
/// the raw `started_at`; the migration drops them.
const CREATE_RUN_INDEXES: &str = "
DROP INDEX IF EXISTS runs_by_session;
DROP INDEX IF EXISTS runs_by_start;
CREATE INDEX IF NOT EXISTS runs_by_session_utc ON runs(session_id, started_at_utc, path);
CREATE INDEX IF NOT EXISTS runs_by_start_utc ON runs(started_at_utc DESC, path DESC);
CREATE INDEX IF NOT EXISTS runs_by_run_id ON runs(run_id);
CREATE INDEX IF NOT EXISTS runs_not_runs ON runs(path) WHERE diagnostic IS NOT NULL;
";

/// The sessions with a pending rewrite (`session_files.pending_file` set), found at every
/// open by the recovery (`recover_at_open`) without reading the
/// row of every session: a partial index holding only those rows, usually none (user version
/// 12).
const CREATE_PENDING_INDEX: &str = "CREATE INDEX IF NOT EXISTS session_files_pending \
     ON session_files(session_id) WHERE pending_file IS NOT NULL;";

/// The `user_version` that added the partial index [`CREATE_PENDING_INDEX`].
const PENDING_USER_VERSION: i64 = 12;

/// SQL function giving the run index's UTC sort key of a `started_at` (`''` when unusable),
/// for the read-only stand-in over a `runs` table without `started_at_utc`.
pub(crate) const UTC_KEY_FN: &str = "session_store_utc_key";

/// `PRAGMA user_version` once our tables exist and `workspace_root` was backfilled: 1 added
/// `session_files` and `runs`, 2 added `run_dirs` and `run_watch` (the run index's record of
/// date directories and of run files that may still change), 3 added `runs.started_at_utc`
/// (filled from `started_at` for existing rows) and its indexes, 4 added `runs.diagnostic`
/// (files under the run tree that are not runs: empty, NUL bytes, no header) and the run-id
/// index that finds the other files of a run (rows that may be such files are dropped by the
/// migration, so the next refresh reads them again), 5 added `session_files.pending_base`
/// (what the messages file held when a pending rewrite was committed, checked before the
/// rewrite's interrupted rename is completed), 6 moved `file_digest` and the digest in
/// `pending_base` to the XXH3-64 chain of `docs/format.md` (recomputed from the messages files,
/// see `redigest`), 7 added `session_labels` (titles and pins of sessions, see `labels`), 8
/// added `run_resume` (where the index stopped reading each open run, see `resume`), 9 added
/// `runs.partial` (rows read bounded, counts unknown until completed, see `partial`), 10 added
/// `run_totals` and `run_dup_ids` with their triggers (see `running_totals`), 11 added
/// `run_day_totals` with its triggers (the same sums per UTC day, see `running_totals`), 12
/// added the partial index `session_files_pending` (the sessions with a pending rewrite,
/// looked up at every open).
const OUR_USER_VERSION: i64 = PENDING_USER_VERSION;

/// The first `user_version` of ours: databases below it have not been backfilled yet.
const FIRST_USER_VERSION: i64 = 1;

/// WAL pages after which a commit of a `SaveDurability::Sync` store checkpoints
/// (`PRAGMA wal_autocheckpoint`; SQLite's default is 1000): about 40 saves of one session (three
/// pages each), so that the WAL stops growing after the first few saves of a process and its
/// sync at `COMMIT` overwrites blocks the file already has (crate README, "Cost of a save").
pub(crate) const WAL_AUTOCHECKPOINT: u32 = 128;

/// `PRAGMA page_size` of the databases we create, in bytes: SQLite's default, as the reference
/// creates them. A save writes its three pages to the WAL whatever their size (measured in the
/// floor benchmark: 1 KiB pages saved no measurable time, a save's sync costing the same for 3
/// and 12 KiB), while a store-sized index pass writes about 3.5 times fewer pages of 4 KiB
/// than of 1 KiB: a `runs` row (~370 bytes) left a third of every 1 KiB page unused, and each
/// page is a WAL frame written and checkpointed by its own system calls (crate README, "Cost
/// of a save" and "Page size").
pub(crate) const NEW_DB_PAGE_SIZE: u32 = 4096;

/// SQL function normalising a workspace root, for the list filter.
pub(crate) const NORM_FN: &str = "session_store_norm_root";

pub(crate) fn db_err(
    path: &Path,
    context: &'static str,
) -> impl FnOnce(rusqlite::Error) -> StateError {
    let path = path.to_path_buf();
    move |source| StateError::Db {
        path,
        context,
        source,
    }
}

pub(crate) fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

/// Runs `op` until it does not fail with SQLITE_BUSY/LOCKED, up to `max_wait` in total.
pub(crate) fn retry_busy<T>(
    path: &Path,
    max_wait: Duration,
    context: &'static str,
    mut op: impl FnMut() -> rusqlite::Result<T>,
) -> Result<T> {
    let start = Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        match op() {
            Ok(v) => return Ok(v),
            Err(e) if is_busy(&e) => {
                if start.elapsed() >= max_wait {
                    return Err(StateError::Busy {
                        path: path.to_path_buf(),
                        waited_ms: u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
                        source: e,
                    });
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            Err(e) => return Err(db_err(path, context)(e)),
        }
    }
}

/// Runs one transaction-control statement (`BEGIN …`, `COMMIT`, `ROLLBACK`) through the
/// connection's statement cache: a save runs two of them, and parsing them again each time
/// costs more than running them.
fn run_cached(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

/// A write transaction taken with `BEGIN IMMEDIATE`; rolled back on drop unless committed.
pub(crate) struct WriteTx<'c> {
    pub(crate) conn: &'c Connection,
    path: &'c Path,
    open: bool,
}

impl<'c> WriteTx<'c> {
    /// Takes the write lock, waiting (busy timeout + retries) up to `max_wait`.
    pub(crate) fn begin(conn: &'c Connection, path: &'c Path, max_wait: Duration) -> Result<Self> {
        retry_busy(path, max_wait, "begin write transaction", || {
            run_cached(conn, "BEGIN IMMEDIATE")
        })?;
        Ok(WriteTx {
            conn,
            path,
            open: true,
        })
    }

    /// Commits. In WAL mode with `synchronous=FULL` the commit is durable on return.
    pub(crate) fn commit(mut self) -> Result<()> {
        self.open = false;
        match run_cached(self.conn, "COMMIT") {
            Ok(()) => Ok(()),
            Err(e) => {
                let _ = run_cached(self.conn, "ROLLBACK");
                Err(db_err(self.path, "commit")(e))
            }
        }
    }
}

impl Drop for WriteTx<'_> {
    fn drop(&mut self) {
        if self.open {
            let _ = run_cached(self.conn, "ROLLBACK");
        }
    }
}

/// Most page cache a store-sized write pass gives its connection, in KiB (256 MiB).
pub(crate) const PASS_CACHE_MAX_KIB: u64 = 256 << 10;

/// Page cache a write pass of `rows` run rows asks for, in KiB: 2 KiB per row (a row of the
/// run index with its share of the secondary indexes is about 1 KiB with 1 KiB pages), at
/// most [`PASS_CACHE_MAX_KIB`].
pub(crate) fn pass_cache_kib(rows: usize) -> u64 {
    u64::try_from(rows)
        .unwrap_or(u64::MAX)
        .saturating_mul(2)
        .min(PASS_CACHE_MAX_KIB)
}

/// The page cache of a connection raised for one store-sized write pass (a first build, a
/// reindex, a large catch-up of the run index) and set back when dropped. With the
/// connection's usual cache (32 MiB) a pass writing 100,000 rows spills dirty pages to the
/// WAL in the middle of its transaction and reads them back (`pread`) for the indexes built
/// after the rows and for the running totals: about 4 `pwrite` and 5 `pread` per row. The
/// cache only grows as pages are used: a small pass costs no more memory than before.
pub(crate) struct PassCache<'c> {
    conn: &'c Connection,
    /// `PRAGMA cache_size` before the pass (`None`: it could not be read, nothing changed).
    before: Option<i64>,
}

impl<'c> PassCache<'c> {
    /// Raises the page cache of `conn` to `kib` KiB when it is smaller. A cache size that
    /// cannot be read or set leaves the connection as it is (only speed depends on it).
    pub(crate) fn raise(conn: &'c Connection, kib: u64) -> Self {
        let before = crate::column::query_int(conn, "PRAGMA cache_size", []).ok();
        let page_size = crate::column::query_int(conn, "PRAGMA page_size", []).unwrap_or(4096);
        // A positive `cache_size` counts pages, a negative one KiB.
        let current_kib = before.map(|n| {
            if n < 0 {
                n.unsigned_abs()
            } else {
                n.unsigned_abs().saturating_mul(page_size.unsigned_abs()) / 1024
            }
        });
        let raise = current_kib.is_some_and(|c| c < kib);
        if raise
            && conn
                .execute_batch(&format!("PRAGMA cache_size = -{kib}"))
                .is_ok()
        {
            return PassCache { conn, before };
        }
        PassCache { conn, before: None }
    }
}

impl Drop for PassCache<'_> {
    fn drop(&mut self) {
        if let Some(n) = self.before {
            let _ = self.conn.execute_batch(&format!("PRAGMA cache_size = {n}"));
        }
    }
}

/// A read transaction (`BEGIN DEFERRED`): a consistent snapshot across several SELECTs.
pub(crate) struct ReadTx<'c> {
    pub(crate) conn: &'c Connection,
}

impl<'c> ReadTx<'c> {
    pub(crate) fn begin(conn: &'c Connection, path: &Path, max_wait: Duration) -> Result<Self> {
        retry_busy(path, max_wait, "begin read transaction", || {
            run_cached(conn, "BEGIN DEFERRED")
        })?;
        Ok(ReadTx { conn })
    }
}

impl Drop for ReadTx<'_> {
    fn drop(&mut self) {
        let _ = run_cached(self.conn, "COMMIT");
    }
}

/// Opens `state.db` under `root`: creates it with mode 0600 (and [`NEW_DB_PAGE_SIZE`] pages)
/// when missing,
/// switches it to WAL, sets `synchronous` per the durability option and the busy timeout, creates or migrates the reference's schema
/// and adds our tables.
pub(crate) fn open_db(db_path: &Path, options: &crate::types::StoreOptions) -> Result<Connection> {
    let busy_timeout = options.busy_timeout;
    let max_wait = options.max_busy_wait;
    // Create the file ourselves so it gets 0600; SQLite gives `-wal`/`-shm` the same mode.
    if !db_path.exists() {
        let (_f, _) = crate::fsutil::open_private_rw(db_path)?;
    }
    // Empty: nobody has written a database header yet (possibly another process racing us).
    let fresh = std::fs::metadata(db_path).is_ok_and(|m| m.is_file() && m.len() == 0);
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(db_path, flags).map_err(db_err(db_path, "open"))?;
    conn.busy_timeout(busy_timeout)
        .map_err(db_err(db_path, "set busy timeout"))?;
    register_functions(&conn, db_path)?;
    if fresh {
        // Set before the first write gives the file its header (SQLite's default too, unless
        // the library was built with another).
        conn.execute_batch(&format!("PRAGMA page_size = {NEW_DB_PAGE_SIZE}"))
            .map_err(db_err(db_path, "set page_size"))?;
    }
    // The reference switches every database it opens to WAL; so do we (a file system without
    // shared memory keeps the rollback journal, whose commits are atomic too).
    retry_busy(db_path, max_wait, "set journal_mode=WAL", || {
        conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))
    })?;
    // With `Sync`, the WAL is checkpointed every WAL_AUTOCHECKPOINT pages instead of SQLite's
    // 1000: a WAL that is reused from its start after a checkpoint is overwritten in place, and
    // its sync at `COMMIT` then flushes data only, where a WAL still growing makes every commit
    // write the inode as well, its size and new blocks (measured: 0.3 ms against 1–1.5 ms per
    // sync).
    // `NoSync` keeps SQLite's default: there, checkpoints are the only syncs.
    let sync = match options.durability {
        crate::types::SaveDurability::NoSync => "PRAGMA synchronous = NORMAL".to_owned(),
        _ => format!("PRAGMA synchronous = FULL; PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT}"),
    };
    conn.execute_batch(&sync)
        .map_err(db_err(db_path, "set synchronous"))?;
    // Listing and run queries read the whole table: a 32 MiB page cache and memory-mapped
    // reads keep a 100k-session index in memory instead of re-reading it through `pread`.
    conn.execute_batch("PRAGMA cache_size = -32768; PRAGMA mmap_size = 268435456;")
        .map_err(db_err(db_path, "set cache size"))?;
    if !schema_is_current(&conn).map_err(db_err(db_path, "read schema"))? {
        init_schema(&conn, db_path, max_wait)?;
    }
    Ok(conn)
}

/// SQL function giving `workspace_root` from `meta_json` (the backfill rule), for the view a
/// read-only connection puts over a `session_state` table without that column.
const META_ROOT_FN: &str = "session_store_meta_root";

/// Percent-encodes a path for an SQLite `file:` URI (everything but unreserved characters
/// and `/`).
fn uri_path(path: &Path) -> String {
    use std::fmt::Write as _;
    let text = path.to_string_lossy();
    let mut out = String::with_capacity(text.len() + 8);
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'/' | b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

fn table_exists(conn: &Connection, name: &str) -> rusqlite::Result<bool> {
    query_int(
        conn,
        "SELECT count(*) FROM main.sqlite_master WHERE type = 'table' AND name = ?1",
        [name],
    )
    .map(|n| n > 0)
}

/// Registers the SQL functions every connection needs.
fn register_functions(conn: &Connection, db_path: &Path) -> Result<()> {
    conn.create_scalar_function(
        NORM_FN,
        1,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| {
            Ok(match ctx.get_raw(0) {
                ValueRef::Text(t) => std::str::from_utf8(t).ok().map(normalize_workspace_root),
                _ => None,
            })
        },
    )
    .map_err(db_err(db_path, "register function"))?;
    conn.create_scalar_function(
        META_ROOT_FN,
        1,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| {
            Ok(match ctx.get_raw(0) {
                ValueRef::Text(t) => std::str::from_utf8(t)
                    .ok()
                    .and_then(|m| workspace_root_from_meta(Some(m))),
                _ => None,
            })
        },
    )
    .map_err(db_err(db_path, "register function"))?;
    conn.create_scalar_function(
        UTC_KEY_FN,
        1,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| {
            Ok(match ctx.get_raw(0) {
                ValueRef::Text(t) => std::str::from_utf8(t)
                    .ok()
                    .and_then(crate::utc::utc_key)
                    .unwrap_or_default(),
                _ => String::new(),
            })
        },
    )
    .map_err(db_err(db_path, "register function"))?;
    crate::redigest::register(conn, &messages_dir(db_path))
        .map_err(db_err(db_path, "register function"))
}

/// `messages/` beside `state.db`.
fn messages_dir(db_path: &Path) -> PathBuf {
    db_path
        .parent()
        .unwrap_or_else(|| Path::new("."))
        .join("messages")
}

/// Opens `state.db` for reading only: nothing is created, migrated or written, in the
/// database or beside it.
///
/// * No `state.db`: an empty in-memory database with the full schema stands in for it (the
///   store still lists legacy snapshots and loads them, unmigrated).
/// * Otherwise `mode=ro` when the WAL's `-wal` and `-shm` files exist (a writer has the
///   database open, or crashed: committed WAL content is read) and `immutable=1` when they
///   do not (the database was closed cleanly and holds everything; no lock or `-shm` file is
///   needed, so a directory the user cannot write is fine). An `immutable` reader assumes
///   nobody writes meanwhile: a writer that starts during a read can make it fail with an
///   error, never change the files.
/// * Tables this version expects but the file lacks (a database of the reference, or of an
///   older version of ours) are stood in for by empty TEMP tables, and a `session_state`
///   without `workspace_root` by a TEMP view computing it from `meta_json` as the migration
///   would.
pub(crate) fn open_db_read_only(
    db_path: &Path,
    options: &crate::types::StoreOptions,
) -> Result<Connection> {
    let exists = match std::fs::metadata(db_path) {
        Ok(m) => m.is_file() && m.len() > 0,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(StateError::io("stat", db_path, e)),
    };
    if !exists {
        let conn = Connection::open_in_memory().map_err(db_err(db_path, "open read-only"))?;
        configure_read_only(&conn, db_path, options)?;
        let create = || -> rusqlite::Result<()> {
            conn.execute_batch(CREATE_SESSION_STATE)?;
            conn.execute_batch(CREATE_UPDATED_AT_INDEX)?;
            conn.execute_batch(CREATE_OURS)
        };
        create().map_err(db_err(db_path, "create schema"))?;
        return Ok(conn);
    }
    let mut wal = db_path.as_os_str().to_owned();
    wal.push("-wal");
    let open = |mode: &str| -> Result<Connection> {
        let uri = format!("file:{}?{mode}", uri_path(db_path));
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn =
            Connection::open_with_flags(&uri, flags).map_err(db_err(db_path, "open read-only"))?;
        configure_read_only(&conn, db_path, options)?;
        // The first read of the file: a database that cannot be read fails here.
        retry_busy(db_path, options.max_busy_wait, "read schema", || {
            stand_in_tables(&conn)
        })?;
        Ok(conn)
    };
    if PathBuf::from(wal).exists() {
        // A WAL in use (or left by a crash): read it through the lock protocol. Without
        // write access to `-shm` SQLite may refuse; the file is then read as it is.
        open("mode=ro").or_else(|_| open("immutable=1"))
    } else {
        open("immutable=1")
    }
}

/// An empty database in memory with the full schema and the run listing's indexes, for a run
/// index that lives only as long as its store ([`StateStore::open_memory_index`]); `label`
/// names it in errors.
///
/// [`StateStore::open_memory_index`]: crate::StateStore::open_memory_index
pub(crate) fn open_db_in_memory(
    label: &Path,
    options: &crate::types::StoreOptions,
) -> Result<Connection> {
    let conn = Connection::open_in_memory().map_err(db_err(label, "open in memory"))?;
    configure_read_only(&conn, label, options)?;
    let create = || -> rusqlite::Result<()> {
        conn.execute_batch(CREATE_SESSION_STATE)?;
        conn.execute_batch(CREATE_UPDATED_AT_INDEX)?;
        conn.execute_batch(CREATE_OURS)?;
        conn.execute_batch(CREATE_RUN_INDEXES)
    };
    create().map_err(db_err(label, "create schema"))?;
    Ok(conn)
}

fn configure_read_only(
    conn: &Connection,
    db_path: &Path,
    options: &crate::types::StoreOptions,
) -> Result<()> {
    conn.busy_timeout(options.busy_timeout)
        .map_err(db_err(db_path, "set busy timeout"))?;
    register_functions(conn, db_path)?;
    conn.execute_batch(
        "PRAGMA temp_store = MEMORY; PRAGMA cache_size = -32768; PRAGMA mmap_size = 268435456;",
    )
    .map_err(db_err(db_path, "set cache size"))
}

/// Empty TEMP tables for the tables this version expects and the file lacks, and a TEMP view
/// over a `session_state` without `workspace_root` (computed from `meta_json` as the
/// migration's backfill would). Unqualified names find TEMP objects first.
fn stand_in_tables(conn: &Connection) -> rusqlite::Result<()> {
    if !table_exists(conn, "session_state")? {
        conn.execute_batch(&CREATE_SESSION_STATE.replacen("CREATE TABLE", "CREATE TEMP TABLE", 1))?;
    } else if !has_workspace_column(conn)? {
        conn.execute_batch(&format!(
            "CREATE TEMP VIEW IF NOT EXISTS session_state AS SELECT session_id, updated_at, \
             run_id, invoke_seq, schema_version, meta_json, message_count, last_user_message, \
             {META_ROOT_FN}(meta_json) AS workspace_root FROM main.session_state"
        ))?;
    }
    for stmt in CREATE_OURS
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let Some(name) = stmt
            .strip_prefix("CREATE TABLE IF NOT EXISTS ")
            .and_then(|rest| rest.split_whitespace().next())
        else {
            continue;
        };
        if !table_exists(conn, name)? {
            conn.execute_batch(&stmt.replacen("CREATE TABLE", "CREATE TEMP TABLE", 1))?;
        }
    }
    if table_exists(conn, "session_files")? {
        // Written by version 4 or earlier: no base was recorded. Written by version 5 or
        // earlier: digests of the old algorithm, recomputed as the migration would.
        let has_base = has_column(conn, "session_files", "pending_base")?;
        let old_digest =
            query_int(conn, "PRAGMA user_version", [])? < crate::redigest::DIGEST_USER_VERSION;
        if old_digest {
            use crate::redigest::{REBASE_FN, REDIGEST_FN};
            let base = if has_base {
                format!("{REBASE_FN}(session_id, generation, pending_base)")
            } else {
                "NULL".to_owned()
            };
            let args = "session_id, file_len, file_lines, file_digest, pending_file";
            conn.execute_batch(&format!(
                "CREATE TEMP VIEW IF NOT EXISTS session_files AS SELECT session_id, generation, \
                 row_fingerprint, file_len, {REDIGEST_FN}({args}, 0) AS file_lines, \
                 {REDIGEST_FN}({args}, 1) AS file_digest, pending_file, {base} AS pending_base \
                 FROM main.session_files"
            ))?;
        } else if !has_base {
            conn.execute_batch(
                "CREATE TEMP VIEW IF NOT EXISTS session_files AS SELECT *, NULL AS pending_base FROM main.session_files",
            )?;
        }
    }
    if table_exists(conn, "runs")? {
        // Indexed by an earlier version: the missing columns are computed as the migration
        // would (every row counts as a run: the old index cannot tell).
        let mut extra = String::new();
        if !has_column(conn, "runs", "started_at_utc")? {
            extra.push_str(&format!(", {UTC_KEY_FN}(started_at) AS started_at_utc"));
        }
        if !has_column(conn, "runs", "diagnostic")? {
            extra.push_str(", NULL AS diagnostic");
        }
        if !has_column(conn, "runs", "partial")? {
            extra.push_str(", 0 AS partial");
        }
        if !extra.is_empty() {
            conn.execute_batch(&format!(
                "CREATE TEMP VIEW IF NOT EXISTS runs AS SELECT *{extra} FROM main.runs"
            ))?;
        }
    }
    Ok(())
}

fn has_workspace_column(conn: &Connection) -> rusqlite::Result<bool> {
    has_column(conn, "session_state", "workspace_root")
}

fn schema_is_current(conn: &Connection) -> rusqlite::Result<bool> {
    let v = query_int(conn, "PRAGMA user_version", [])?;
    Ok(v >= OUR_USER_VERSION
        && table_exists(conn, "session_labels")?
        && table_exists(conn, "run_resume")?
        && has_workspace_column(conn)?
        && has_column(conn, "runs", "started_at_utc")?
        && has_column(conn, "runs", "diagnostic")?
        && has_column(conn, "runs", "partial")?
        && has_column(conn, "session_files", "pending_base")?
        && index_exists(conn, "session_files_pending")?
        && crate::running_totals::is_current(conn)?)
}

fn index_exists(conn: &Connection, name: &str) -> rusqlite::Result<bool> {
    query_int(
        conn,
        "SELECT count(*) FROM main.sqlite_master WHERE type = 'index' AND name = ?1",
        [name],
    )
    .map(|n| n > 0)
}

fn init_schema(conn: &Connection, db_path: &Path, max_wait: Duration) -> Result<()> {
    let tx = WriteTx::begin(conn, db_path, max_wait)?;
    let err = db_err(db_path, "create schema");
    let run = || -> rusqlite::Result<()> {
        conn.execute_batch(CREATE_SESSION_STATE)?;
        let added = if has_workspace_column(conn)? {
            false
        } else {
            conn.execute_batch("ALTER TABLE session_state ADD COLUMN workspace_root TEXT;")?;
            true
        };
        conn.execute_batch(CREATE_UPDATED_AT_INDEX)?;
        conn.execute_batch(CREATE_OURS)?;
        if !has_column(conn, "session_files", "pending_base")? {
            conn.execute_batch("ALTER TABLE session_files ADD COLUMN pending_base TEXT;")?;
        }
        conn.execute_batch(CREATE_PENDING_INDEX)?;
        if !has_column(conn, "runs", "started_at_utc")? {
            conn.execute_batch(
                "ALTER TABLE runs ADD COLUMN started_at_utc TEXT NOT NULL DEFAULT '';",
            )?;
            backfill_started_at_utc(conn)?;
        }
        if !has_column(conn, "runs", "diagnostic")? {
            conn.execute_batch("ALTER TABLE runs ADD COLUMN diagnostic TEXT;")?;
            crate::index_upgrade::forget_possible_non_runs(conn)?;
        }
        if !has_column(conn, "runs", "partial")? {
            // Every row written before was read whole.
            conn.execute_batch("ALTER TABLE runs ADD COLUMN partial INTEGER NOT NULL DEFAULT 0;")?;
        }
        // The rows `run_totals` completes before it reads the running totals: found without
        // reading the others.
        conn.execute_batch(
            "CREATE INDEX IF NOT EXISTS runs_partial ON runs(partial) WHERE partial = 1;",
        )?;
        conn.execute_batch(CREATE_RUN_INDEXES)?;
        let v = query_int(conn, "PRAGMA user_version", [])?;
        if added || v < FIRST_USER_VERSION {
            backfill_workspace_root(conn)?;
        }
        if v < crate::redigest::DIGEST_USER_VERSION {
            crate::redigest::migrate(conn, &messages_dir(db_path))?;
        }
        if v < crate::running_totals::DAYS_USER_VERSION || !crate::running_totals::is_current(conn)?
        {
            crate::running_totals::migrate(conn)?;
        }
        conn.execute_batch(&format!("PRAGMA user_version = {OUR_USER_VERSION}"))?;
        Ok(())
    };
    run().map_err(err)?;
    tx.commit()
}

/// Fills `runs.started_at_utc` of rows indexed by a version without it. A `started_at` that
/// is not valid UTF-8 text gets `''` (no place in time), like an unparseable one.
fn backfill_started_at_utc(conn: &Connection) -> rusqlite::Result<()> {
    let rows: Vec<(i64, Option<String>)> = {
        let mut stmt = conn.prepare("SELECT rowid, started_at FROM runs")?;
        let mut rows = stmt.query([])?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            let raw = owned_row(r, 2)?;
            let started = match raw.get(1).map(OwnedValue::as_ref) {
                Some(ValueRef::Text(t)) => std::str::from_utf8(t).ok().map(str::to_owned),
                _ => None,
            };
            if let Some(rowid) = raw.first().map(OwnedValue::as_ref).and_then(int_of) {
                out.push((rowid, started));
            }
        }
        out
    };
    let mut update = conn.prepare("UPDATE runs SET started_at_utc = ?1 WHERE rowid = ?2")?;
    for (rowid, started) in rows {
        let key = started
            .as_deref()
            .and_then(crate::utc::utc_key)
            .unwrap_or_default();
        update.execute(rusqlite::params![key, rowid])?;
    }
    Ok(())
}

fn has_column(conn: &Connection, table: &str, column: &str) -> rusqlite::Result<bool> {
    let names = query_texts(conn, &format!("PRAGMA table_info({table})"), [], 1)?;
    Ok(names.iter().any(|n| n == column))
}

/// Sets `workspace_root` from `meta_json` for rows where it is NULL (the reference adds the
/// column without backfilling, compat §5 item 12). Rows whose meta has no usable value stay
/// NULL.
///
/// Rows are addressed by `rowid`, so a `session_id` that is not valid UTF-8 is updated too; a
/// `meta_json` that is not valid UTF-8 text is left alone (its root cannot be trusted).
fn backfill_workspace_root(conn: &Connection) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare(
        "SELECT rowid, meta_json FROM session_state \
         WHERE workspace_root IS NULL AND meta_json LIKE '%codelia_workspace_root%'",
    )?;
    let mut rows = stmt.query([])?;
    let mut found: Vec<(i64, String)> = Vec::new();
    while let Some(r) = rows.next()? {
        let raw = owned_row(r, 2)?;
        let rowid = raw.first().map(OwnedValue::as_ref).and_then(int_of);
        let meta = match raw.get(1).map(OwnedValue::as_ref) {
            Some(ValueRef::Text(t)) => std::str::from_utf8(t).ok(),
            _ => None,
        };
        if let (Some(rowid), Some(root)) =
            (rowid, meta.and_then(|m| workspace_root_from_meta(Some(m))))
        {
            found.push((rowid, root));
        }
    }
    let mut update =
        conn.prepare("UPDATE session_state SET workspace_root = ?2 WHERE rowid = ?1")?;
    for (rowid, root) in found {
        update.execute(rusqlite::params![rowid, root])?;
    }
    Ok(())
}

/// Fingerprint of a `session_state` row: all nine columns with their storage classes.
pub(crate) fn row_fingerprint(values: &[ValueRef<'_>]) -> u64 {
    let mut chain = crate::fsutil::EMPTY_DIGEST;
    let mut buf: Vec<u8> = Vec::new();
    for v in values {
        buf.clear();
        match v {
            ValueRef::Null => buf.push(0),
            ValueRef::Integer(i) => {
                buf.push(1);
                buf.extend_from_slice(&i.to_le_bytes());
            }
            ValueRef::Real(f) => {
                buf.push(2);
                buf.extend_from_slice(&f.to_le_bytes());
            }
            ValueRef::Text(t) => {
                buf.push(3);
                buf.extend_from_slice(t);
            }
            ValueRef::Blob(b) => {
                buf.push(4);
                buf.extend_from_slice(b);
            }
        }
        chain = crate::fsutil::mix_chain(chain, crate::fsutil::mix_digest(&buf));
    }
    chain
}

/// Path of `state.db` under a sessions root.
pub(crate) fn db_path(root: &Path) -> PathBuf {
    root.join("state.db")
}
