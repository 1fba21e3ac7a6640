//! `search.db`: the full-text search index beside `state.db` (docs/format.md "search.db").
//!
//! A derived file (mode 0600; deleting it loses nothing, the next refresh rebuilds it) with
//! one row per searchable document of a run log, keyed by the run file and the byte offset of
//! the record it comes from, and two SQLite FTS5 tables over the documents' text: one with
//! the `unicode61` tokenizer (words, ranked by BM25) and one with the `trigram` tokenizer
//! (any substring of three characters or more, which finds a Japanese phrase inside a longer
//! run of text that the word tokenizer sees as one token).
//!
//! The index is advanced per run file by byte offset: `search_files` records, for every run
//! file of the run index, how far its complete lines were indexed and the size and
//! modification time seen then. [`SearchIndex::plan`] compares that with the run index (one
//! SQL join, no file opened) and returns what to read; the caller (session-replay's
//! `io::refresh_search`, which owns the extraction) reads from there and hands the documents
//! to [`SearchIndex::apply`]. This crate never parses documents out of records itself: it
//! stores what it is given.

mod bm25;
mod tokens;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use rusqlite::{Connection, OpenFlags, params};

use crate::column::{Cols, query_int};
use crate::db::db_err;
use crate::error::{Result, StateError};
use crate::store::StateStore;

/// File name of the search index under the sessions root.
pub const SEARCH_DB: &str = "search.db";

/// Marks the start of a matched part in [`SearchHit::snippet`] (a private-use character,
/// replaced by U+FFFD in indexed text so it never comes from the data).
pub const HIGHLIGHT_START: char = '\u{E000}';

/// Marks the end of a matched part in [`SearchHit::snippet`].
pub const HIGHLIGHT_END: char = '\u{E001}';

/// File name of the substring index under the sessions root (beside [`SEARCH_DB`], written by
/// its own connection so that its writes run beside those of `search.db`).
pub const SEARCH_TRIGRAM_DB: &str = "search-trigram.db";

/// `PRAGMA user_version` of the layouts below (both files); another value makes
/// [`SearchIndex::open`] drop and rebuild every table (the files are derived).
const SEARCH_USER_VERSION: i64 = 7;

/// The layout of `search.db`. FTS5 holds a transaction's new terms in memory up to `hashsize`
/// bytes (1 MiB by default) and writes an index segment each time that fills: 16 MiB makes a
/// refresh of many files write (and later merge) 16 times fewer segments, at the cost of up to
/// 16 MiB of memory per table while it writes. `phrase_docs` holds, for the phrases of past
/// queries that are in many documents, how many documents hold them (see [`bm25`]), kept
/// current by every write. Document ids are never used again (`AUTOINCREMENT`): the substring
/// index in [`SEARCH_TRIGRAM_DB`] follows `docs` by id. `trigram_gone` holds the documents
/// removed from `docs` (id and text) until the substring index has forgotten them;
/// `search_writes` a random token per transaction that adds or removes documents (the last
/// [`WRITES_KEPT`]), by which the substring index knows whether the state it took in is still
/// part of this file's history; `search_meta` the random `generation` of this file.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS search_files (
    path TEXT PRIMARY KEY,
    run_id TEXT,
    session_id TEXT,
    workspace TEXT,
    indexed_to INTEGER NOT NULL,
    next_line INTEGER NOT NULL,
    file_size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS docs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    file TEXT NOT NULL,
    byte_offset INTEGER NOT NULL,
    kind TEXT NOT NULL,
    time_ms INTEGER,
    text TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS docs_by_file ON docs(file, byte_offset);
CREATE INDEX IF NOT EXISTS docs_by_time ON docs(time_ms);
CREATE TABLE IF NOT EXISTS phrase_docs (
    phrase TEXT PRIMARY KEY,
    docs INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS trigram_gone (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id INTEGER NOT NULL,
    text TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS search_writes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    token TEXT NOT NULL UNIQUE
);
CREATE TABLE IF NOT EXISTS search_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
INSERT OR IGNORE INTO search_meta (key, value) VALUES ('generation', lower(hex(randomblob(16))));
CREATE INDEX IF NOT EXISTS search_files_by_session ON search_files(session_id);
CREATE INDEX IF NOT EXISTS search_files_by_workspace ON search_files(workspace);
CREATE VIRTUAL TABLE IF NOT EXISTS docs_words USING fts5(
    text, content='docs', content_rowid='id', tokenize='unicode61 remove_diacritics 2');
INSERT INTO docs_words (docs_words, rank) VALUES ('hashsize', 16777216);
";

const DROP: &str = "
DROP TRIGGER IF EXISTS docs_added;
DROP TRIGGER IF EXISTS docs_removed;
DROP TABLE IF EXISTS docs_words;
DROP TABLE IF EXISTS docs_trigram;
DROP TABLE IF EXISTS docs;
DROP TABLE IF EXISTS search_files;
DROP TABLE IF EXISTS phrase_docs;
DROP TABLE IF EXISTS trigram_gone;
DROP TABLE IF EXISTS search_meta;
DROP TABLE IF EXISTS search_writes;
";

/// The layout of [`SEARCH_TRIGRAM_DB`]: the `trigram` table, contentless (its text is that of
/// `search.db`'s `docs`, row for row by id), no positions (`detail=none`) and no per-row
/// length record (`columnsize=0`: nothing ranks by it); `trigram_state` records which
/// `search.db` it follows (`generation`), the highest document id it took in
/// (`indexed_through`), the last `trigram_gone` entry it acted on (`gone_through`) and the
/// token of the last `search_writes` entry it saw (`synced_write`).
const TRIGRAM_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS trigram_state (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    generation TEXT NOT NULL,
    indexed_through INTEGER NOT NULL,
    gone_through INTEGER NOT NULL,
    synced_write TEXT NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS docs_trigram USING fts5(
    text, content='', tokenize='trigram', detail='none', columnsize=0);
INSERT INTO docs_trigram (docs_trigram, rank) VALUES ('hashsize', 16777216);
";

/// Entries kept in `search_writes`: a substring index that lags more write transactions than
/// this behind is rebuilt.
const WRITES_KEPT: i64 = 10_000;

/// Records a write transaction of `search.db` that adds or removes documents (see
/// [`SCHEMA`]), forgetting the oldest entry beyond [`WRITES_KEPT`].
fn log_write(conn: &Connection) -> rusqlite::Result<()> {
    conn.prepare_cached("INSERT INTO search_writes (token) VALUES (lower(hex(randomblob(8))))")?
        .execute([])?;
    conn.prepare_cached("DELETE FROM search_writes WHERE seq <= ?1")?
        .execute([conn.last_insert_rowid() - WRITES_KEPT])?;
    Ok(())
}

const TRIGRAM_DROP: &str = "
DROP TABLE IF EXISTS main.docs_trigram;
DROP TABLE IF EXISTS main.trigram_state;
";

/// One document handed to [`SearchIndex::apply`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchDoc {
    /// Byte offset of its record in the (decompressed) run file.
    pub byte_offset: u64,
    /// Its kind as stored and filtered on (`user`, `assistant`, `reasoning`, `tool-call`,
    /// `tool-output`, `final`).
    pub kind: &'static str,
    /// The text.
    pub text: String,
    /// The record's time, milliseconds since the Unix epoch.
    pub time_ms: Option<i64>,
}

/// One run file whose new lines are to be indexed, from [`SearchIndex::plan`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SearchWork {
    /// Path relative to the sessions root (the run index's key).
    pub rel_path: String,
    /// Absolute path.
    pub path: PathBuf,
    /// The run id.
    pub run_id: String,
    /// The run's session id.
    pub session_id: Option<String>,
    /// The run's normalised workspace root.
    pub workspace: Option<String>,
    /// Byte offset to read from: the end of the last complete line indexed (0 for a file not
    /// indexed yet, or one that got shorter, whose documents are replaced).
    pub from: u64,
    /// 1-based line number at `from`.
    pub line: u64,
    /// The file's size as the run index saw it.
    pub file_size: u64,
    /// Its modification time (ns) as the run index saw it.
    pub mtime_ns: i64,
    /// A `.jsonl.zst` archive (read through the decompressor from the start).
    pub compressed: bool,
    /// The messages file of a saved session that no run log holds (`messages/<id>.jsonl`,
    /// `run_id` empty): indexed whole, one saved message per line, with
    /// `session_replay::search::message_documents`.
    pub session_file: bool,
    /// The legacy snapshot `state/<session_id>.json` of a session that has neither a
    /// `state.db` row nor a run log (`run_id` empty, `session_file` set too): indexed whole,
    /// each message of its `messages` array at the byte offset where the message starts.
    pub legacy_snapshot: bool,
}

/// What [`SearchIndex::plan`] found and settled without reading any run file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct SearchPlan {
    /// Files to read, in path order.
    pub work: Vec<SearchWork>,
    /// Files dropped from the index because the run index no longer has them (removed, moved
    /// to the trash by `gc`), with their documents.
    pub removed: u64,
    /// Files renamed in place by archiving or restoring (`.jsonl` ⇄ `.jsonl.zst`): their
    /// documents kept, not read again.
    pub renamed: u64,
}

/// A search request for [`SearchIndex::search`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct SearchQuery {
    /// What to look for: plain text (each whitespace-separated word becomes a quoted FTS5
    /// phrase, all of which must match) or, with [`SearchQuery::fts`], FTS5 query syntax.
    pub text: String,
    /// Pass [`SearchQuery::text`] to FTS5 as written.
    pub fts: bool,
    /// Only documents of this session.
    pub session_id: Option<String>,
    /// Only documents of runs with this (normalised) workspace root.
    pub workspace: Option<String>,
    /// Only documents at or after this time (ms since the epoch); documents without a time
    /// are left out when set.
    pub since_ms: Option<i64>,
    /// Only documents before this time (ms since the epoch).
    pub until_ms: Option<i64>,
    /// Only documents of these kinds (empty: all).
    pub kinds: Vec<String>,
    /// Most hits returned.
    pub limit: u64,
}

impl SearchQuery {
    /// A query for `text` with no filter and a limit of 20 hits.
    pub fn new(text: impl Into<String>) -> Self {
        SearchQuery {
            text: text.into(),
            limit: 20,
            ..Default::default()
        }
    }
}

/// How a hit was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MatchedBy {
    /// The word index (`unicode61`), ranked by BM25.
    Words,
    /// The substring index (`trigram`) only: the text occurs inside a longer word. Such hits
    /// come after the word hits, most recently indexed first.
    Substring,
}

/// One hit of [`SearchIndex::search`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SearchHit {
    /// Run file, relative to the sessions root.
    pub rel_path: String,
    /// The run id.
    pub run_id: String,
    /// The run's session id.
    pub session_id: Option<String>,
    /// The run's workspace root.
    pub workspace: Option<String>,
    /// Byte offset of the record in the run file (`show RUN --at OFFSET`).
    pub byte_offset: u64,
    /// The document's kind.
    pub kind: String,
    /// The record's time, ms since the epoch.
    pub time_ms: Option<i64>,
    /// Up to 16 tokens around the match (`…` where text was left out), each matched part
    /// between [`HIGHLIGHT_START`] and [`HIGHLIGHT_END`].
    pub snippet: String,
    /// Which index found it.
    pub matched_by: MatchedBy,
    /// BM25 score of its index (lower is better; comparable only within one index).
    pub score: f64,
}

/// One file's documents for [`SearchIndex::apply_many`].
#[derive(Debug, Clone, Copy)]
pub struct IndexedFile<'a> {
    /// The file, as [`SearchIndex::plan`] returned it.
    pub work: &'a SearchWork,
    /// Its documents from `work.from` on.
    pub docs: &'a [SearchDoc],
    /// End of its last complete line read.
    pub indexed_to: u64,
    /// 1-based number of the line at `indexed_to`.
    pub next_line: u64,
}

/// Writes one file's documents; `first_new` is the id of the first document the transaction
/// added (set by the first).
fn apply_one(
    conn: &Connection,
    work: &SearchWork,
    docs: &[SearchDoc],
    indexed_to: u64,
    next_line: u64,
    first_new: &mut Option<i64>,
) -> rusqlite::Result<()> {
    delete_docs(
        conn,
        &work.rel_path,
        work.from,
        first_new.unwrap_or(i64::MAX),
    )?;
    // One single-row statement per table and document, no trigger: FTS5 then keeps the
    // transaction's terms in memory and writes one segment at commit, where a trigger's
    // statement savepoint would make it write a segment (and merge) per document. The
    // trigram table is written from `docs` by [`SearchIndex::sync_substrings`].
    let mut ins = conn.prepare_cached(
        "INSERT INTO docs (file, byte_offset, kind, time_ms, text) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    let mut words = conn.prepare_cached("INSERT INTO docs_words (rowid, text) VALUES (?1, ?2)")?;
    for d in docs {
        let text = clean(&d.text);
        ins.execute(params![
            work.rel_path,
            to_i64(d.byte_offset),
            d.kind,
            d.time_ms,
            text
        ])?;
        let id = conn.last_insert_rowid();
        first_new.get_or_insert(id);
        words.execute(params![id, text])?;
    }
    conn.prepare_cached(
        "INSERT INTO search_files (path, run_id, session_id, workspace, indexed_to, \
         next_line, file_size, mtime_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
         ON CONFLICT(path) DO UPDATE SET run_id = excluded.run_id, \
         session_id = excluded.session_id, workspace = excluded.workspace, \
         indexed_to = excluded.indexed_to, next_line = excluded.next_line, \
         file_size = excluded.file_size, mtime_ns = excluded.mtime_ns",
    )?
    .execute(params![
        work.rel_path,
        work.run_id,
        work.session_id,
        work.workspace,
        to_i64(indexed_to),
        to_i64(next_line),
        to_i64(work.file_size),
        work.mtime_ns
    ])?;
    Ok(())
}

/// Removes the documents of `file` from byte offset `from` on, from the word table (an
/// external-content table forgets a row only when told its old text) and from `docs`, and
/// queues them in `trigram_gone` for the substring index (its contentless table forgets a row
/// only when told its old text too); those with ids below `added_from` (the first id the
/// transaction added, `i64::MAX` when none) are taken out of the kept phrase counts.
fn delete_docs(conn: &Connection, file: &str, from: u64, added_from: i64) -> rusqlite::Result<()> {
    // A statement of several rows makes FTS5 flush what it holds in memory (a statement
    // savepoint): run them only when there is something to delete (never for a new file).
    let any = query_int(
        conn,
        "SELECT EXISTS (SELECT 1 FROM docs WHERE file = ?1 AND byte_offset >= ?2)",
        params![file, to_i64(from)],
    )?;
    if any == 0 {
        return Ok(());
    }
    bm25::removing(conn, file, to_i64(from), added_from)?;
    conn.prepare_cached(
        "INSERT INTO docs_words (docs_words, rowid, text) SELECT 'delete', id, text FROM docs \
         WHERE file = ?1 AND byte_offset >= ?2",
    )?
    .execute(params![file, to_i64(from)])?;
    conn.prepare_cached(
        "INSERT INTO trigram_gone (id, text) SELECT id, text FROM docs \
         WHERE file = ?1 AND byte_offset >= ?2",
    )?
    .execute(params![file, to_i64(from)])?;
    conn.prepare_cached("DELETE FROM docs WHERE file = ?1 AND byte_offset >= ?2")?
        .execute(params![file, to_i64(from)])?;
    log_write(conn)
}

/// Counts of the index, for reports and benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct SearchCounts {
    /// Run files known.
    pub files: u64,
    /// Documents.
    pub docs: u64,
}

/// The search index of one store (`<root>/search.db`).
#[derive(Debug)]
pub struct SearchIndex {
    conn: Mutex<Connection>,
    path: PathBuf,
    /// The connection to [`SEARCH_TRIGRAM_DB`], with `search.db` attached as `m` (only ever
    /// in deferred transactions, so that it never takes `search.db`'s write lock for long);
    /// `None` for an index opened read-only without a usable substring file.
    trigram: Mutex<Option<Connection>>,
    trigram_path: PathBuf,
    root: PathBuf,
    /// Opened read-only: phrase counts are not kept.
    read_only: bool,
    /// Documents walked in the word index to count phrases' documents (see [`bm25`]).
    walked: AtomicU64,
    /// Ranked pages left to FTS5's `rank` (a text [`tokens`] does not claim, `--fts`).
    fts5_ranked: AtomicU64,
}

/// Removes a database file with its `-wal` and `-shm` (absent ones are fine).
fn remove_db_files(path: &Path) -> Result<()> {
    for suffix in ["", "-wal", "-shm"] {
        let p = PathBuf::from(format!("{}{suffix}", path.display()));
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(StateError::Io {
                    op: "remove damaged search index",
                    path: p,
                    source,
                });
            }
        }
    }
    Ok(())
}

/// What one [`SearchIndex::sync_substrings`] did, for tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct SubstringSync {
    /// Documents added to the substring index.
    pub added: u64,
    /// Documents it forgot (removed from `docs` since).
    pub forgotten: u64,
    /// Whether it was emptied first: it followed another `search.db` (deleted, rebuilt, or
    /// one that lost its last transactions), or a newer state of this one.
    pub rebuilt: bool,
}

/// The text of the first column of `sql`'s first row (empty when there is none, or it is
/// NULL), read through the column module.
fn query_text(conn: &Connection, sql: &str) -> rusqlite::Result<String> {
    Ok(crate::column::query_texts(conn, sql, [], 0)?
        .into_iter()
        .next()
        .unwrap_or_default())
}

/// Brings the substring index up to date with `docs`, in one transaction of the trigram file
/// that reads one snapshot of `search.db` (attached as `m`).
fn sync_trigrams(t: &Connection) -> rusqlite::Result<SubstringSync> {
    let mut done = SubstringSync::default();
    // A write first: the trigram file's write lock is taken before `search.db` is read, and
    // `search.db` is only ever read here (its writer goes on meanwhile).
    t.execute_batch("BEGIN")?;
    let result = (|| -> rusqlite::Result<bool> {
        t.execute(
            "INSERT OR IGNORE INTO main.trigram_state \
             (one, generation, indexed_through, gone_through, synced_write) \
             VALUES (1, '', 0, 0, '')",
            [],
        )?;
        let generation = query_text(
            t,
            "SELECT coalesce((SELECT value FROM m.search_meta WHERE key = 'generation'), '')",
        )?;
        let last_id = query_int(
            t,
            "SELECT coalesce((SELECT seq FROM m.sqlite_sequence WHERE name = 'docs'), 0)",
            [],
        )?;
        let last_gone = query_int(
            t,
            "SELECT coalesce((SELECT seq FROM m.sqlite_sequence WHERE name = 'trigram_gone'), 0)",
            [],
        )?;
        let last_write = query_text(
            t,
            "SELECT coalesce((SELECT token FROM m.search_writes ORDER BY seq DESC LIMIT 1), '')",
        )?;
        let was = query_text(t, "SELECT generation FROM main.trigram_state")?;
        let synced = query_text(t, "SELECT synced_write FROM main.trigram_state")?;
        let mut through = query_int(t, "SELECT indexed_through FROM main.trigram_state", [])?;
        let gone_through = query_int(t, "SELECT gone_through FROM main.trigram_state", [])?;
        // The write it last saw is gone from `search.db`'s history: lost by a crash (or
        // too long ago to tell).
        let lost = !synced.is_empty()
            && query_int(
                t,
                "SELECT NOT EXISTS (SELECT 1 FROM m.search_writes WHERE token = ?1)",
                [&synced],
            )? != 0;
        if was != generation || through > last_id || gone_through > last_gone || lost {
            // Another file, or one that lost transactions this index saw: start over.
            t.execute(
                "INSERT INTO main.docs_trigram (docs_trigram) VALUES ('delete-all')",
                [],
            )?;
            through = 0;
            done.rebuilt = true;
        } else if last_gone > gone_through {
            // Only what this index took in (ids up to `through`) is forgotten: a document
            // added and removed before it came is not in it.
            done.forgotten = t
                .prepare_cached(
                    "INSERT INTO main.docs_trigram (docs_trigram, rowid, text) \
                     SELECT 'delete', id, text FROM m.trigram_gone \
                     WHERE seq > ?1 AND id <= ?2 ORDER BY seq",
                )?
                .execute(params![gone_through, through])? as u64;
        }
        if last_id > through {
            done.added = t
                .prepare_cached(
                    "INSERT INTO main.docs_trigram (rowid, text) \
                     SELECT id, text FROM m.docs WHERE id > ?1 ORDER BY id",
                )?
                .execute([through])? as u64;
        }
        // Nothing new: nothing written (a refresh with no change writes neither file).
        if done.rebuilt
            || (was, through, gone_through, synced)
                != (generation.clone(), last_id, last_gone, last_write.clone())
        {
            t.execute(
                "UPDATE main.trigram_state SET generation = ?1, indexed_through = ?2, \
                 gone_through = ?3, synced_write = ?4",
                params![generation, last_id, last_gone, last_write],
            )?;
        }
        query_int(t, "SELECT EXISTS (SELECT 1 FROM m.trigram_gone)", []).map(|n| n != 0)
    })();
    let queued = match result {
        Ok(queued) => {
            t.execute_batch("COMMIT")?;
            queued
        }
        Err(e) => {
            let _ = t.execute_batch("ROLLBACK");
            return Err(e);
        }
    };
    if !queued {
        return Ok(done);
    }
    // The queue entries acted on (or moot) go. This writes `search.db`, whose writer may hold
    // it: when busy they stay, skipped by `gone_through`, and go with a later sync.
    match t.execute(
        "DELETE FROM m.trigram_gone WHERE seq <= \
         (SELECT gone_through FROM main.trigram_state)",
        [],
    ) {
        Ok(_) => {}
        Err(rusqlite::Error::SqliteFailure(f, _))
            if f.code == rusqlite::ErrorCode::DatabaseBusy
                || f.code == rusqlite::ErrorCode::DatabaseLocked => {}
        Err(e) => return Err(e),
    }
    Ok(done)
}

fn lossy_u64(v: Option<i64>) -> u64 {
    v.and_then(|n| u64::try_from(n).ok()).unwrap_or(0)
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Indexed text: the highlight markers replaced so a snippet's marks are always ours.
fn clean(text: &str) -> std::borrow::Cow<'_, str> {
    // Both markers start with the byte 0xEE in UTF-8 (U+E000 to U+EFFF do): a text without
    // it, nearly every one, is passed on after one byte scan, not a scan per character.
    if text.as_bytes().contains(&0xEE) && text.contains([HIGHLIGHT_START, HIGHLIGHT_END]) {
        std::borrow::Cow::Owned(text.replace([HIGHLIGHT_START, HIGHLIGHT_END], "\u{FFFD}"))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

/// Plain text as an FTS5 query: every whitespace-separated word a quoted phrase (`"` doubled),
/// all of which must match. `None` when there is no word.
pub fn quote_phrases(text: &str) -> Option<String> {
    let words: Vec<String> = text
        .split_whitespace()
        .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
        .collect();
    (!words.is_empty()).then(|| words.join(" "))
}

impl SearchIndex {
    /// Opens (creating it with mode 0600 when absent) `<root>/search.db`. A file of another
    /// layout version, or one that is not a usable database, is rebuilt empty (it is derived).
    ///
    /// # Errors
    /// [`StateError::Io`] when the file cannot be created; [`StateError::Db`] when SQLite
    /// fails (a full disk, a read-only file system).
    pub fn open(root: &Path) -> Result<SearchIndex> {
        let path = root.join(SEARCH_DB);
        if !path.exists() {
            let (_f, _) = crate::fsutil::open_private_rw(&path)?;
        }
        let conn = match Self::connect(&path) {
            Ok(c) => c,
            Err(StateError::Db { .. }) => {
                // Not a database (or a damaged one): it holds nothing that is not elsewhere.
                remove_db_files(&path)?;
                let (_f, _) = crate::fsutil::open_private_rw(&path)?;
                Self::connect(&path)?
            }
            Err(e) => return Err(e),
        };
        let trigram_path = root.join(SEARCH_TRIGRAM_DB);
        let trigram = match Self::connect_trigram(&trigram_path, &path) {
            Ok(c) => c,
            Err(StateError::Db { .. }) => {
                // Not a database (or a damaged one): rebuilt from `docs` by the next sync.
                remove_db_files(&trigram_path)?;
                Self::connect_trigram(&trigram_path, &path)?
            }
            Err(e) => return Err(e),
        };
        Ok(SearchIndex {
            conn: Mutex::new(conn),
            path,
            trigram: Mutex::new(Some(trigram)),
            trigram_path,
            root: root.to_path_buf(),
            read_only: false,
            walked: AtomicU64::new(0),
            fts5_ranked: AtomicU64::new(0),
        })
    }

    /// Opens an existing `<root>/search.db` read-only (a store opened read-only): nothing is
    /// created or changed. `None` when there is none, or when it has another layout version.
    ///
    /// # Errors
    /// [`StateError::Db`] when the file is there but cannot be read.
    pub fn open_read_only(root: &Path) -> Result<Option<SearchIndex>> {
        let path = root.join(SEARCH_DB);
        if !path.is_file() {
            return Ok(None);
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&path, flags).map_err(db_err(&path, "open"))?;
        let version =
            query_int(&conn, "PRAGMA user_version", []).map_err(db_err(&path, "read version"))?;
        if version != SEARCH_USER_VERSION {
            return Ok(None);
        }
        let trigram_path = root.join(SEARCH_TRIGRAM_DB);
        // Without a usable substring file, substrings are not found (nothing is created).
        let trigram = if trigram_path.is_file() {
            Connection::open_with_flags(&trigram_path, flags)
                .and_then(|t| {
                    let v = query_int(&t, "PRAGMA user_version", [])?;
                    t.execute("ATTACH DATABASE ?1 AS m", [path.to_string_lossy()])?;
                    Ok((v == SEARCH_USER_VERSION).then_some(t))
                })
                .ok()
                .flatten()
        } else {
            None
        };
        Ok(Some(SearchIndex {
            conn: Mutex::new(conn),
            path,
            trigram: Mutex::new(trigram),
            trigram_path,
            root: root.to_path_buf(),
            read_only: true,
            walked: AtomicU64::new(0),
            fts5_ranked: AtomicU64::new(0),
        }))
    }

    fn connect(path: &Path) -> Result<Connection> {
        open_derived(path, DROP, SCHEMA, "create search index")
    }

    /// Opens (creating it with mode 0600 when absent) the substring index at `path`, attaching
    /// `search.db` (`main`) as `m`; another layout version is rebuilt empty.
    fn connect_trigram(path: &Path, main: &Path) -> Result<Connection> {
        if !path.exists() {
            let (_f, _) = crate::fsutil::open_private_rw(path)?;
        }
        let conn = open_derived(path, TRIGRAM_DROP, TRIGRAM_SCHEMA, "create substring index")?;
        conn.execute("ATTACH DATABASE ?1 AS m", [main.to_string_lossy()])
            .map_err(db_err(path, "attach search index"))?;
        Ok(conn)
    }

    /// Path of `search.db`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Drops every document and file record (`sessions reindex --search` then refreshes).
    ///
    /// # Errors
    /// [`StateError::Db`].
    pub fn clear(&self) -> Result<()> {
        let conn = self.conn.lock();
        conn.execute_batch(&format!(
            "BEGIN IMMEDIATE; {DROP} {SCHEMA} PRAGMA user_version = {SEARCH_USER_VERSION}; COMMIT;"
        ))
        .map_err(db_err(&self.path, "clear search index"))?;
        drop(conn);
        // The substring index would see the new generation and empty itself; dropping its
        // table now gives its pages back at once.
        if let Some(t) = self.trigram.lock().as_ref() {
            t.execute_batch(&format!("BEGIN; {TRIGRAM_DROP} {TRIGRAM_SCHEMA} COMMIT;"))
                .map_err(db_err(&self.trigram_path, "clear substring index"))?;
        }
        Ok(())
    }

    /// Compares the index with `store`'s run index (refresh that first): files the run index
    /// no longer has are dropped with their documents, files archived or restored are renamed
    /// (documents kept), and every file that is new, grew or changed is returned to be read
    /// from where its indexing stopped. No run file is opened.
    ///
    /// # Errors
    /// [`StateError::Db`] (`state.db` cannot be attached or read, `search.db` written).
    pub fn plan(&self, store: &StateStore) -> Result<SearchPlan> {
        let conn = self.conn.lock();
        let err = || db_err(&self.path, "plan search refresh");
        conn.execute(
            "ATTACH DATABASE ?1 AS st",
            [store.db_path().to_string_lossy()],
        )
        .map_err(err())?;
        let result = self.plan_attached(&conn);
        let detached = conn.execute_batch("DETACH DATABASE st").map_err(err());
        let plan = result?;
        detached?;
        Ok(plan)
    }

    fn plan_attached(&self, conn: &Connection) -> Result<SearchPlan> {
        let err = || db_err(&self.path, "plan search refresh");
        let mut plan = SearchPlan::default();
        conn.execute_batch("BEGIN IMMEDIATE").map_err(err())?;
        let result = (|| -> rusqlite::Result<()> {
            // Files of the index the run index no longer lists as runs.
            let mut gone: Vec<String> = Vec::new();
            {
                let mut stmt = conn.prepare(
                    "SELECT f.path FROM search_files f WHERE f.run_id <> '' AND NOT EXISTS \
                     (SELECT 1 FROM st.runs r WHERE r.path = f.path AND r.diagnostic IS NULL)",
                )?;
                let mut rows = stmt.query([])?;
                while let Some(r) = rows.next()? {
                    let mut c = Cols::new(r, "search_files", &["path"])?;
                    gone.push(c.text_or_empty(0)?);
                }
            }
            const NAMES: &[&str] = &[
                "path",
                "run_id",
                "session_id",
                "workspace_root",
                "file_size",
                "mtime_ns",
                "compressed",
                "indexed_to",
                "next_line",
                "known_size",
                "known_mtime",
            ];
            let mut stmt = conn.prepare(
                "SELECT r.path, r.run_id, r.session_id, r.workspace_root, r.file_size, \
                 r.mtime_ns, r.compressed, f.indexed_to, f.next_line, f.file_size, f.mtime_ns \
                 FROM st.runs r LEFT JOIN search_files f ON f.path = r.path \
                 WHERE r.diagnostic IS NULL AND (f.path IS NULL \
                 OR f.file_size IS NOT r.file_size OR f.mtime_ns IS NOT r.mtime_ns) \
                 ORDER BY r.path",
            )?;
            let mut rows = stmt.query([])?;
            while let Some(r) = rows.next()? {
                let mut c = Cols::new(r, "runs", NAMES)?;
                let rel = c.text_or_empty(0)?;
                let file_size = lossy_u64(c.int(4)?);
                let mtime_ns = c.int(5)?.unwrap_or(0);
                let compressed = c.int(6)?.unwrap_or(0) != 0;
                let known = c.int(7)?.map(|to| (lossy_u64(Some(to)), c.int(8)));
                let mut work = SearchWork {
                    path: self.root.join(&rel),
                    run_id: c.text_or_empty(1)?,
                    session_id: c.text(2)?,
                    workspace: c.text(3)?.map(|w| crate::normalize_workspace_root(&w)),
                    rel_path: rel,
                    from: 0,
                    line: 1,
                    file_size,
                    mtime_ns,
                    compressed,
                    session_file: false,
                    legacy_snapshot: false,
                };
                let known = match known {
                    Some((to, line)) => Some((to, lossy_u64(line?))),
                    None => {
                        // Archived or restored: the same run under its other name.
                        let other = match work.rel_path.strip_suffix(".zst") {
                            Some(plain) => plain.to_owned(),
                            None => format!("{}.zst", work.rel_path),
                        };
                        match gone.iter().position(|g| *g == other) {
                            Some(i) => {
                                gone.swap_remove(i);
                                conn.execute(
                                    "UPDATE search_files SET path = ?1 WHERE path = ?2",
                                    params![work.rel_path, other],
                                )?;
                                conn.execute(
                                    "UPDATE docs SET file = ?1 WHERE file = ?2",
                                    params![work.rel_path, other],
                                )?;
                                plan.renamed += 1;
                                let mut q = conn.prepare_cached(
                                    "SELECT path, indexed_to, next_line FROM search_files \
                                     WHERE path = ?1",
                                )?;
                                let mut rows = q.query([&work.rel_path])?;
                                match rows.next()? {
                                    Some(r) => {
                                        let mut c = Cols::new(
                                            r,
                                            "search_files",
                                            &["path", "indexed_to", "next_line"],
                                        )?;
                                        Some((lossy_u64(c.int(1)?), lossy_u64(c.int(2)?)))
                                    }
                                    None => None,
                                }
                            }
                            None => None,
                        }
                    }
                };
                if let Some((to, line)) = known {
                    // An archive holds what was indexed (archiving takes finished runs);
                    // a file at exactly the indexed length has nothing new: record the new
                    // size and time without reading it.
                    if work.compressed || to == work.file_size {
                        conn.execute(
                            "UPDATE search_files SET file_size = ?2, mtime_ns = ?3 WHERE path = ?1",
                            params![work.rel_path, to_i64(work.file_size), work.mtime_ns],
                        )?;
                        continue;
                    }
                    if to < work.file_size {
                        work.from = to;
                        work.line = line.max(1);
                    }
                }
                plan.work.push(work);
            }
            gone.extend(self.plan_sessions(conn, &mut plan)?);
            for g in &gone {
                delete_docs(conn, g, 0, i64::MAX)?;
                conn.execute("DELETE FROM search_files WHERE path = ?1", [g])?;
            }
            plan.removed = gone.len() as u64;
            Ok(())
        })();
        match result {
            Ok(()) => {
                conn.execute_batch("COMMIT").map_err(err())?;
                Ok(plan)
            }
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK");
                Err(err()(e))
            }
        }
    }

    /// Saved sessions that no run log holds (no row of the run index names them): their
    /// messages files are indexed whole when new or changed (size or modification time; one
    /// `lstat` each). Returns the session files of the index that no longer qualify (the
    /// session got a run, or is gone).
    fn plan_sessions(
        &self,
        conn: &Connection,
        plan: &mut SearchPlan,
    ) -> rusqlite::Result<Vec<String>> {
        let mut known: std::collections::BTreeMap<String, (i64, i64)> = Default::default();
        {
            let mut stmt = conn
                .prepare("SELECT path, file_size, mtime_ns FROM search_files WHERE run_id = ''")?;
            let mut rows = stmt.query([])?;
            while let Some(r) = rows.next()? {
                let mut c = Cols::new(r, "search_files", &["path", "file_size", "mtime_ns"])?;
                let path = c.text_or_empty(0)?;
                let size = c.int(1)?.unwrap_or(-1);
                let mtime = c.int(2)?.unwrap_or(-1);
                known.insert(path, (size, mtime));
            }
        }
        let mut stmt = conn.prepare(
            "SELECT s.session_id, s.workspace_root FROM st.session_state s \
             WHERE NOT EXISTS (SELECT 1 FROM st.runs r WHERE r.session_id = s.session_id) \
             ORDER BY s.session_id",
        )?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let mut c = Cols::new(r, "session_state", &["session_id", "workspace_root"])?;
            let id = c.text_or_empty(0)?;
            if !session_schema::is_safe_id(&id) {
                continue;
            }
            let rel = saved_messages_key(&id);
            let path = self.root.join(&rel);
            let Ok(md) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if !md.is_file() {
                continue;
            }
            let size = to_i64(md.len());
            let mtime = crate::tree::mtime_ns(&md);
            let was = known.remove(&rel);
            if was == Some((size, mtime)) {
                continue;
            }
            plan.work.push(SearchWork {
                path,
                run_id: String::new(),
                session_id: Some(id),
                workspace: c.text(1)?.map(|w| crate::normalize_workspace_root(&w)),
                rel_path: rel,
                from: 0,
                line: 1,
                file_size: md.len(),
                mtime_ns: mtime,
                compressed: false,
                session_file: true,
                legacy_snapshot: false,
            });
        }
        self.plan_legacy(conn, plan, &mut known)?;
        Ok(known.into_keys().collect())
    }

    /// Legacy snapshots `state/<id>.json` of sessions that have no `state.db` row (not
    /// migrated yet) and that no run log names: indexed whole when new or changed (size or
    /// modification time; one directory read and one `lstat` each). A snapshot that stops
    /// qualifying (migrated: its messages file is indexed instead; deleted; given a run) is
    /// left in `known` and so dropped by the caller.
    fn plan_legacy(
        &self,
        conn: &Connection,
        plan: &mut SearchPlan,
        known: &mut std::collections::BTreeMap<String, (i64, i64)>,
    ) -> rusqlite::Result<()> {
        let dir = self.root.join("state");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            // No `state/` (or unreadable): no legacy snapshot to index; those of the index go.
            return Ok(());
        };
        let mut ids: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                e.file_name()
                    .to_str()
                    .and_then(|n| n.strip_suffix(".json"))
                    .filter(|id| session_schema::is_safe_id(id))
                    .map(str::to_owned)
            })
            .collect();
        ids.sort();
        for id in ids {
            let held = query_int(
                conn,
                "SELECT EXISTS (SELECT 1 FROM st.session_state WHERE session_id = ?1) \
                 OR EXISTS (SELECT 1 FROM st.runs WHERE session_id = ?1)",
                [&id],
            )?;
            if held != 0 {
                continue;
            }
            let rel = legacy_snapshot_key(&id);
            let path = self.root.join(&rel);
            let Ok(md) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if !md.is_file() {
                continue;
            }
            let size = to_i64(md.len());
            let mtime = crate::tree::mtime_ns(&md);
            if known.remove(&rel) == Some((size, mtime)) {
                continue;
            }
            plan.work.push(SearchWork {
                path,
                run_id: String::new(),
                session_id: Some(id),
                workspace: None,
                rel_path: rel,
                from: 0,
                line: 1,
                file_size: md.len(),
                mtime_ns: mtime,
                compressed: false,
                session_file: true,
                legacy_snapshot: true,
            });
        }
        Ok(())
    }

    /// Records the documents read from `work`'s file, in one transaction: from offset 0 the
    /// file's earlier documents are replaced, otherwise those from `work.from` on; the file is
    /// recorded as indexed up to `indexed_to` (the end of its last complete line) with
    /// `next_line` the number of the line there.
    ///
    /// # Errors
    /// [`StateError::Db`].
    pub fn apply(
        &self,
        work: &SearchWork,
        docs: &[SearchDoc],
        indexed_to: u64,
        next_line: u64,
    ) -> Result<()> {
        self.apply_many(&[IndexedFile {
            work,
            docs,
            indexed_to,
            next_line,
        }])
    }

    /// [`SearchIndex::apply`] for several files in one transaction (FTS5 writes one index
    /// segment per transaction: a refresh of many small files batches them), then the
    /// substring index brought up to date ([`SearchIndex::sync_substrings`]).
    ///
    /// # Errors
    /// [`StateError::Db`]; nothing of the batch is recorded then (when only the substring
    /// index fails, the batch is recorded and that index catches up with the next sync).
    pub fn apply_many(&self, files: &[IndexedFile<'_>]) -> Result<()> {
        self.write_many(files)?;
        self.sync_substrings().map(|_| ())
    }

    /// Brings the substring index ([`SEARCH_TRIGRAM_DB`]) up to date with `search.db`'s
    /// documents: those added since its last sync are taken in and those removed are
    /// forgotten, in one transaction of its file; when it follows another `search.db` (deleted
    /// or rebuilt since), or a state of this one that is gone (a crash lost `search.db`'s last
    /// transactions), it is emptied and takes in every document. Each file keeps its own
    /// watermark, so a crash between the two writes is mended by the next sync. Nothing is
    /// done for an index opened read-only.
    ///
    /// # Errors
    /// [`StateError::Db`] (on the substring file's path).
    pub fn sync_substrings(&self) -> Result<SubstringSync> {
        if self.read_only {
            return Ok(SubstringSync::default());
        }
        match self.trigram.lock().as_ref() {
            Some(t) => {
                sync_trigrams(t).map_err(db_err(&self.trigram_path, "write substring index"))
            }
            None => Ok(SubstringSync::default()),
        }
    }

    /// Runs `f` with a [`SubstringWriter`], whose writes of `search.db` leave the substring
    /// index to a second thread: after each batch it is brought up to date there
    /// ([`SearchIndex::sync_substrings`]) while the next batch is written, two SQLite writers
    /// on two files at once. Before returning, the thread has taken in everything written
    /// (and mended a substring index left behind by a crash, even when `f` writes nothing).
    ///
    /// # Errors
    /// [`StateError::Db`] when a sync of the substring index failed (the documents stay in
    /// `search.db`; the next sync takes them in); `f`'s own result is returned otherwise.
    pub fn with_substring_writer<R>(&self, f: impl FnOnce(&SubstringWriter<'_>) -> R) -> Result<R> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<()>(1);
        std::thread::scope(|scope| {
            let syncer = scope.spawn(move || -> Result<()> {
                let mut failed = None;
                // A first sync mends what a crash left; then one per nudge (nudges that came
                // while it ran are one; the last batch's nudge is received before the writer
                // is seen gone).
                loop {
                    if let Err(e) = self.sync_substrings() {
                        failed.get_or_insert(e);
                    }
                    if rx.recv().is_err() {
                        break;
                    }
                    while rx.try_recv().is_ok() {}
                }
                failed.map_or(Ok(()), Err)
            });
            let writer = SubstringWriter {
                index: self,
                nudge: tx,
            };
            let out = f(&writer);
            drop(writer);
            match syncer.join() {
                Ok(synced) => synced.map(|()| out),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        })
    }

    /// Writes the files' documents to `search.db` alone (see [`SearchIndex::apply_many`]).
    fn write_many(&self, files: &[IndexedFile<'_>]) -> Result<()> {
        let conn = self.conn.lock();
        let err = || db_err(&self.path, "write search index");
        conn.execute_batch("BEGIN IMMEDIATE").map_err(err())?;
        let result = (|| -> rusqlite::Result<()> {
            let mut first_new = None;
            for f in files {
                apply_one(
                    &conn,
                    f.work,
                    f.docs,
                    f.indexed_to,
                    f.next_line,
                    &mut first_new,
                )?;
            }
            if first_new.is_some() {
                log_write(&conn)?;
            }
            match first_new {
                Some(first) => bm25::added(&conn, first),
                None => Ok(()),
            }
        })();
        match result {
            Ok(()) => conn.execute_batch("COMMIT").map_err(err()),
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK");
                Err(err()(e))
            }
        }
    }

    /// Drops the documents of these run files (paths relative to the root), as `gc` does for
    /// the runs it moves to the trash, from both files. Returns how many files were known.
    ///
    /// # Errors
    /// [`StateError::Db`].
    pub fn remove_files(&self, rel_paths: &[String]) -> Result<u64> {
        let n = self.remove_from_docs(rel_paths)?;
        self.sync_substrings()?;
        Ok(n)
    }

    fn remove_from_docs(&self, rel_paths: &[String]) -> Result<u64> {
        let conn = self.conn.lock();
        let err = || db_err(&self.path, "remove from search index");
        conn.execute_batch("BEGIN IMMEDIATE").map_err(err())?;
        let result = (|| -> rusqlite::Result<u64> {
            let mut n = 0u64;
            for rel in rel_paths {
                delete_docs(&conn, rel, 0, i64::MAX)?;
                n += conn.execute("DELETE FROM search_files WHERE path = ?1", [rel])? as u64;
            }
            Ok(n)
        })();
        match result {
            Ok(n) => {
                conn.execute_batch("COMMIT").map_err(err())?;
                Ok(n)
            }
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK");
                Err(err()(e))
            }
        }
    }

    /// Numbers of files and documents.
    ///
    /// # Errors
    /// [`StateError::Db`].
    pub fn counts(&self) -> Result<SearchCounts> {
        let conn = self.conn.lock();
        let err = || db_err(&self.path, "count search index");
        Ok(SearchCounts {
            files: lossy_u64(Some(
                query_int(&conn, "SELECT count(*) FROM search_files", []).map_err(err())?,
            )),
            docs: lossy_u64(Some(
                query_int(&conn, "SELECT count(*) FROM docs", []).map_err(err())?,
            )),
        })
    }

    /// Ranked hits for `q`, at most [`SearchQuery::limit`] in all:
    ///
    /// 1. the word index (`unicode61`): of the documents that match (and pass the filters),
    ///    the [`RANK_WINDOW`] most recently indexed are ranked by BM25 (ties: file, offset)
    ///    and the best come first. When fewer match, every match is ranked; when more do,
    ///    older matches are left out of the ranking, which keeps a first page of a common
    ///    word fast however large the store (a rare word's matches are all ranked);
    /// 2. then those only the substring index (`trigram`) finds, when every query word has
    ///    three characters or more, most recently indexed first;
    /// 3. then, when a query word of one or two characters is in a script written without
    ///    spaces (Japanese, Chinese, Korean, Thai, …; too short for trigrams, and inside a
    ///    longer run of text that the word index holds as one token), a scan of the
    ///    [`SHORT_SCAN_WINDOW`] most recently indexed documents for every word as a
    ///    substring (ASCII letters of any case), newest first.
    ///
    /// All in one transaction. The first query that ranks a phrase found in at least 1,000
    /// documents writes its document count to `phrase_docs` (an index opened read-only, or
    /// one another process wrote to meanwhile, counts it and keeps nothing).
    ///
    /// # Errors
    /// [`StateError::SearchQuery`] when an [`SearchQuery::fts`] query is not valid FTS5
    /// syntax; [`StateError::Db`] otherwise.
    pub fn search(&self, q: &SearchQuery) -> Result<Vec<SearchHit>> {
        let expr = if q.fts {
            Some(q.text.clone())
        } else {
            quote_phrases(&q.text)
        };
        let Some(expr) = expr else {
            return Ok(Vec::new());
        };
        let conn = self.conn.lock();
        // One transaction: the window, its ranking (with the phrase counts it reads or keeps)
        // and the snippets see one state of the index.
        conn.execute_batch("BEGIN")
            .map_err(db_err(&self.path, "search"))?;
        match self.search_in(&conn, &expr, q) {
            Ok(hits) => {
                conn.execute_batch("COMMIT")
                    .map_err(db_err(&self.path, "search"))?;
                Ok(hits)
            }
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK");
                Err(e)
            }
        }
    }

    fn search_in(&self, conn: &Connection, expr: &str, q: &SearchQuery) -> Result<Vec<SearchHit>> {
        let limit = q.limit;
        let mut hits = self.ranked(conn, expr, q)?;
        let key = |h: &SearchHit| (h.rel_path.clone(), h.byte_offset, h.kind.clone());
        let mut seen: std::collections::BTreeSet<(String, u64, String)> =
            hits.iter().map(key).collect();
        let words: Vec<&str> = q.text.split_whitespace().collect();
        let substring_ok = !q.fts && words.iter().all(|w| w.chars().count() >= 3);
        if substring_ok && (hits.len() as u64) < limit {
            let want = limit.saturating_add(hits.len() as u64);
            for h in self.substrings(&words, q, want)? {
                if (hits.len() as u64) >= limit {
                    break;
                }
                if seen.insert(key(&h)) {
                    hits.push(h);
                }
            }
        }
        if !q.fts && (hits.len() as u64) < limit && words.iter().any(|w| is_short_unspaced(w)) {
            let want = limit.saturating_add(hits.len() as u64);
            for h in self.short_scan(conn, &words, q, want)? {
                if (hits.len() as u64) >= limit {
                    break;
                }
                if seen.insert(key(&h)) {
                    hits.push(h);
                }
            }
        }
        Ok(hits)
    }

    /// The word index's first page: the [`RANK_WINDOW`] newest matching documents that pass
    /// the filters (newest first, stopping there; see [`window`]), ranked by BM25 among
    /// themselves (see [`bm25`]; FTS5's `rank` when the query or a document holds text that
    /// [`tokens`] does not claim), then a snippet for each of the `limit` best.
    fn ranked(&self, conn: &Connection, expr: &str, q: &SearchQuery) -> Result<Vec<SearchHit>> {
        let table = "docs_words";
        let run = || -> rusqlite::Result<Vec<SearchHit>> {
            // Phase 1: the newest window of matches, by rowid (no score computed).
            let ids = window(conn, expr, q)?;
            if ids.is_empty() {
                return Ok(Vec::new());
            }
            // Phase 2: BM25 of the window's documents only, best first.
            let best = match self.own_rank(conn, q, &ids)? {
                Some(best) => best,
                None => {
                    self.fts5_ranked.fetch_add(1, Ordering::Relaxed);
                    fts5_rank(conn, expr, &ids, q.limit)?
                }
            };
            // Phase 3: the page's rows and snippets, one document each.
            let mut page = conn.prepare_cached(&format!(
                "SELECT {HIT_COLUMNS_F}, snippet({table}, 0, char(57344), char(57345), '…', 16) \
                 FROM {table} JOIN docs d ON d.id = {table}.rowid JOIN search_files f \
                 ON f.path = d.file WHERE {table} MATCH ?1 AND {table}.rowid = ?2"
            ))?;
            let mut out = Vec::with_capacity(best.len());
            for (id, score) in best {
                let mut rows = page.query(params![expr, id])?;
                if let Some(r) = rows.next()? {
                    out.push(hit(r, MatchedBy::Words, score)?);
                }
            }
            Ok(out)
        };
        run().map_err(|e| self.query_err(expr, e))
    }

    /// Phase 2 of [`SearchIndex::ranked`] without FTS5's `rank`: `None` for an expert
    /// (`--fts`) query, a query word without a token or with a character [`tokens`] does not
    /// claim, or a window document that [`bm25::rank_window`] cannot tokenize.
    fn own_rank(
        &self,
        conn: &Connection,
        q: &SearchQuery,
        ids: &[i64],
    ) -> rusqlite::Result<Option<Vec<(i64, f64)>>> {
        if q.fts {
            return Ok(None);
        }
        // The phrases of `quote_phrases`, one per whitespace-separated word.
        let mut phrases = Vec::new();
        for w in q.text.split_whitespace() {
            match tokens::folded(w) {
                Some(t) if !t.is_empty() => phrases.push(t),
                _ => return Ok(None),
            }
        }
        let keys: Vec<String> = phrases.iter().map(|p| bm25::phrase_key(p)).collect();
        let docs = || bm25::phrase_docs(conn, &keys, !self.read_only, &self.walked);
        let ranked = bm25::rank_window(conn, &phrases, docs, ids, q.limit)?;
        Ok(ranked.map(|r| r.into_iter().map(|(score, _, _, id)| (id, score)).collect()))
    }

    /// Step 3 of [`SearchIndex::search`]: every query word as a substring of the newest
    /// [`SHORT_SCAN_WINDOW`] documents, newest first, at most `limit`.
    fn short_scan(
        &self,
        conn: &Connection,
        words: &[&str],
        q: &SearchQuery,
        limit: u64,
    ) -> Result<Vec<SearchHit>> {
        let (filters, mut args) = filter_sql(q, 2);
        args.insert(0, SHORT_SCAN_WINDOW.into());
        let mut like = String::new();
        for w in words {
            args.push(format!("%{}%", escape_like(w)).into());
            like.push_str(&format!(" AND d.text LIKE ?{} ESCAPE '\\'", args.len()));
        }
        args.push(to_i64(limit).into());
        let sql = format!(
            "SELECT {HIT_COLUMNS_F}, d.text FROM docs d JOIN search_files f ON f.path = d.file \
             WHERE d.id > (SELECT coalesce(max(id), 0) FROM docs) - ?1{filters}{like} \
             ORDER BY d.id DESC LIMIT ?{}",
            args.len()
        );
        let run = || -> rusqlite::Result<Vec<SearchHit>> {
            let mut stmt = conn.prepare_cached(&sql)?;
            let mut rows = stmt.query(rusqlite::params_from_iter(args.iter()))?;
            let mut out = Vec::new();
            while let Some(r) = rows.next()? {
                let mut h = hit(r, MatchedBy::Substring, 0.0)?;
                h.snippet = substring_snippet(&h.snippet, words);
                out.push(h);
            }
            Ok(out)
        };
        run().map_err(|e| db_err(&self.path, "search")(e))
    }

    fn query_err(&self, expr: &str, e: rusqlite::Error) -> StateError {
        // Our SQL is fixed; a plain SQLITE_ERROR comes from FTS5 parsing the query
        // ("unterminated string", "fts5: syntax error near …", "no such column: x").
        match e {
            rusqlite::Error::SqliteFailure(ref f, Some(ref msg))
                if f.code == rusqlite::ErrorCode::Unknown && f.extended_code == 1 =>
            {
                StateError::SearchQuery {
                    query: expr.to_owned(),
                    message: msg.clone(),
                }
            }
            e => db_err(&self.path, "search")(e),
        }
    }

    /// The substring index's matches (step 2 of [`SearchIndex::search`]), newest first, at
    /// most `limit`, asked on the substring file's connection (`search.db` attached as `m`,
    /// read in a transaction of its own). The trigram table keeps no text and no positions
    /// (`contentless`, `detail=none`): each word is asked as every trigram it holds (all of
    /// them, see [`trigram_query`]), which FTS5 answers from its document lists, and then
    /// checked as a substring of the document's text (`LIKE`, ASCII letters of any case, `%`
    /// and `_` taken literally). FTS5 walks its document lists in rowid order and stops at
    /// the limit. Snippets are cut around the first match.
    fn substrings(&self, words: &[&str], q: &SearchQuery, limit: u64) -> Result<Vec<SearchHit>> {
        let guard = self.trigram.lock();
        let Some(t) = guard.as_ref() else {
            return Ok(Vec::new());
        };
        let Some(expr) = trigram_query(words) else {
            return Ok(Vec::new());
        };
        let mut args: Vec<rusqlite::types::Value> = vec![expr.into()];
        let mut like = String::new();
        for w in words {
            args.push(format!("%{}%", escape_like(w)).into());
            like.push_str(&format!(" AND d.text LIKE ?{} ESCAPE '\\'", args.len()));
        }
        let (filters, filter_args) = filter_sql(q, args.len() + 1);
        args.extend(filter_args);
        args.push(to_i64(limit).into());
        let sql = format!(
            "SELECT {HIT_COLUMNS_F}, d.text FROM main.docs_trigram t \
             JOIN m.docs d ON d.id = t.rowid JOIN m.search_files f ON f.path = d.file \
             WHERE t.docs_trigram MATCH ?1{like}{filters} ORDER BY t.rowid DESC LIMIT ?{}",
            args.len()
        );
        let run = || -> rusqlite::Result<Vec<SearchHit>> {
            let mut stmt = t.prepare_cached(&sql)?;
            let mut rows = stmt.query(rusqlite::params_from_iter(args.iter()))?;
            let mut out = Vec::new();
            while let Some(r) = rows.next()? {
                let mut h = hit(r, MatchedBy::Substring, 0.0)?;
                h.snippet = substring_snippet(&h.snippet, words);
                out.push(h);
            }
            Ok(out)
        };
        run().map_err(|e| db_err(&self.trigram_path, "search")(e))
    }
}

/// The trigram table's query for `words` (each of three characters or more): every distinct
/// run of three characters of every word as a quoted token (`"` doubled), all of which must
/// be in a document. `None` when there is none.
fn trigram_query(words: &[&str]) -> Option<String> {
    let mut seen = std::collections::BTreeSet::new();
    let mut terms = Vec::new();
    for w in words {
        let chars: Vec<char> = w.chars().collect();
        for three in chars.windows(3) {
            let t: String = three.iter().collect();
            if seen.insert(t.clone()) {
                terms.push(format!("\"{}\"", t.replace('"', "\"\"")));
            }
        }
    }
    (!terms.is_empty()).then(|| terms.join(" AND "))
}

/// [`SearchIndex::with_substring_writer`]'s writer of `search.db`.
#[derive(Debug)]
pub struct SubstringWriter<'a> {
    index: &'a SearchIndex,
    nudge: std::sync::mpsc::SyncSender<()>,
}

impl SubstringWriter<'_> {
    /// [`SearchIndex::apply_many`] but for the substring index, which the writer's second
    /// thread brings up to date meanwhile.
    ///
    /// # Errors
    /// [`StateError::Db`]; nothing of the batch is recorded then.
    pub fn apply_many(&self, files: &[IndexedFile<'_>]) -> Result<()> {
        self.index.write_many(files)?;
        // A sync already asked for takes this batch in too.
        let _ = self.nudge.try_send(());
        Ok(())
    }
}

/// The key under which the saved messages of a session that no run log holds are indexed:
/// its messages file relative to the root, `messages/<session_id>.jsonl` (what
/// [`SearchHit::rel_path`] holds for their hits and [`SearchIndex::remove_files`] takes).
pub fn saved_messages_key(session_id: &str) -> String {
    format!("messages/{session_id}.jsonl")
}

/// The key under which the legacy snapshot of a session that has neither a `state.db` row nor
/// a run log is indexed: `state/<session_id>.json`, relative to the root (what
/// [`SearchHit::rel_path`] holds for its hits and [`SearchIndex::remove_files`] takes).
pub fn legacy_snapshot_key(session_id: &str) -> String {
    format!("state/{session_id}.json")
}

/// The lines (compact JSON and `\n` each) that migrating the legacy snapshot `bytes` of
/// session `session_id` writes to `messages/<session_id>.jsonl`: what the search index holds
/// for a session that has only such a snapshot, so that its documents have the byte offsets
/// (and texts) they keep once it is migrated. At most [`crate::MAX_SESSION_FILE_BYTES`] of a
/// snapshot are read by the caller; `path` only names the file in errors.
///
/// # Errors
/// [`StateError::LegacyInvalid`] when the snapshot is not one the store can load (not UTF-8,
/// not a JSON object, no `session_id` or `updated_at`); [`StateError::Serialize`].
pub fn legacy_snapshot_lines(session_id: &str, path: &Path, bytes: &[u8]) -> Result<Vec<Vec<u8>>> {
    let legacy = crate::legacy::parse_legacy(path, session_id, bytes)?;
    let mut lines = crate::messages::Lines::serialize(session_id, &legacy.state.messages)?;
    for (i, line) in &legacy.written {
        lines.replace(*i, line);
    }
    Ok(lines.lines)
}

/// How many of the newest matching documents the word index ranks by BM25 for a first page
/// (2,000; see [`SearchIndex::search`]).
pub const RANK_WINDOW: i64 = 2_000;

/// How many of the newest documents a query word of one or two characters in a script
/// without spaces is looked for in (200,000; see [`SearchIndex::search`]).
pub const SHORT_SCAN_WINDOW: i64 = 200_000;

/// Most run files a `--session` or `--workspace` filter may leave for the ranking window to
/// be taken from their documents (see [`window`]).
const NARROW_FILES: i64 = 10_000;

/// Most documents a filter may leave for the ranking window to be taken from them (see
/// [`window`]): their ids are read first (a few milliseconds per 10,000).
const NARROW_DOCS: usize = 100_000;

/// Phase 2 of [`SearchIndex::ranked`] by FTS5's `rank` (its `bm25()`, which walks every
/// phrase's whole document list to count its documents): the `limit` best of `ids` with
/// their scores. The window is handed over as a JSON array; `+rowid` keeps SQLite from giving
/// FTS5 one lookup per id (each of which would count the phrases' documents again): FTS5
/// walks the rowid range once and BM25 is computed for the window's rows only.
fn fts5_rank(
    conn: &Connection,
    expr: &str,
    ids: &[i64],
    limit: u64,
) -> rusqlite::Result<Vec<(i64, f64)>> {
    let table = "docs_words";
    let (Some(floor), Some(ceiling)) = (ids.iter().min(), ids.iter().max()) else {
        return Ok(Vec::new());
    };
    let list = serde_json::to_string(ids)
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {table}.rowid, {table}.rank FROM {table} \
         JOIN docs d ON d.id = {table}.rowid JOIN search_files f ON f.path = d.file \
         WHERE {table} MATCH ?1 AND {table}.rowid >= ?2 AND {table}.rowid <= ?3 \
         AND +{table}.rowid IN (SELECT value FROM json_each(?4)) \
         ORDER BY {table}.rank, f.path, d.byte_offset LIMIT ?5"
    ))?;
    let mut rows = stmt.query(params![expr, floor, ceiling, list, to_i64(limit)])?;
    let mut best: Vec<(i64, f64)> = Vec::new();
    while let Some(r) = rows.next()? {
        let mut c = Cols::new(r, "docs_words", &["rowid", "rank"])?;
        let id = c.int(0)?.unwrap_or_default();
        best.push((id, score(c.raw(1)?)));
    }
    Ok(best)
}

/// The ids of the [`RANK_WINDOW`] newest documents that match `expr` in the word index and
/// pass `q`'s filters, newest first.
///
/// Without a narrowing filter the word index's document lists are walked newest first,
/// each match checked against the filters, until the window is full. When a session or
/// workspace filter leaves at most [`NARROW_FILES`] run files, or a time filter at most
/// [`NARROW_DOCS`] documents, the ids of the documents that pass every filter are read
/// first (at most [`NARROW_DOCS`]; from the files' index or the documents' time index) and
/// the word index is walked only between the lowest and the highest of them, newest first,
/// each match checked against those ids (a binary search, no join), until the window is
/// full. A run's documents are written together, so a session of a few runs spans a short
/// stretch of the word index however many other runs the store holds.
fn window(conn: &Connection, expr: &str, q: &SearchQuery) -> rusqlite::Result<Vec<i64>> {
    let table = "docs_words";
    let cap = usize::try_from(RANK_WINDOW).unwrap_or(usize::MAX);
    if let Some(ids) = narrow_candidates(conn, q)? {
        let (Some(&lo), Some(&hi)) = (ids.first(), ids.last()) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT rowid FROM {table} WHERE {table} MATCH ?1 AND rowid >= ?2 AND rowid <= ?3 \
             ORDER BY rowid DESC"
        ))?;
        let mut rows = stmt.query(params![expr, lo, hi])?;
        while let Some(r) = rows.next()? {
            let mut c = Cols::new(r, "docs_words", &["rowid"])?;
            let id = c.int(0)?.unwrap_or_default();
            if ids.binary_search(&id).is_ok() {
                out.push(id);
                if out.len() >= cap {
                    break;
                }
            }
        }
        return Ok(out);
    }
    let (filters, mut args) = filter_sql(q, 2);
    args.insert(0, expr.to_owned().into());
    args.push(RANK_WINDOW.into());
    // Every document has its `docs` and `search_files` rows: without a filter the word
    // index alone is walked, with filters of the document only (kind, time) its `docs` row
    // is looked up, not its file's.
    let joins = if filters.is_empty() {
        String::new()
    } else if q.session_id.is_none() && q.workspace.is_none() {
        format!(" JOIN docs d ON d.id = {table}.rowid")
    } else {
        format!(" JOIN docs d ON d.id = {table}.rowid JOIN search_files f ON f.path = d.file")
    };
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {table}.rowid FROM {table}{joins} WHERE {table} MATCH ?1{filters} \
         ORDER BY {table}.rowid DESC LIMIT ?{}",
        args.len()
    ))?;
    let mut rows = stmt.query(rusqlite::params_from_iter(args.iter()))?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let mut c = Cols::new(r, "docs_words", &["rowid"])?;
        out.push(c.int(0)?.unwrap_or_default());
    }
    Ok(out)
}

/// The ids, ascending, of the documents that pass `q`'s filters when a filter leaves few of
/// them (see [`window`]); `None` when none does (no filter, or only wide ones).
fn narrow_candidates(conn: &Connection, q: &SearchQuery) -> rusqlite::Result<Option<Vec<i64>>> {
    let timed = q.since_ms.is_some() || q.until_ms.is_some();
    let by_files = narrow_files(conn, q)?;
    let by_time = !by_files && timed && {
        let n = query_int(
            conn,
            &format!(
                "SELECT count(*) FROM (SELECT 1 FROM docs WHERE time_ms >= ?1 AND time_ms < ?2 \
                 LIMIT {})",
                NARROW_DOCS + 1
            ),
            params![
                q.since_ms.unwrap_or(i64::MIN),
                q.until_ms.unwrap_or(i64::MAX)
            ],
        )?;
        usize::try_from(n).is_ok_and(|n| n <= NARROW_DOCS)
    };
    if !by_files && !by_time {
        return Ok(None);
    }
    let (filters, args) = filter_sql(q, 1);
    let sql = if by_files {
        // From the files of the session or workspace (their indexes), then their documents.
        format!(
            "SELECT d.id FROM search_files f CROSS JOIN docs d WHERE d.file = f.path{filters} \
             LIMIT {}",
            NARROW_DOCS + 1
        )
    } else if q.session_id.is_some() || q.workspace.is_some() {
        // From the documents of the time range (their index), then their files.
        format!(
            "SELECT d.id FROM docs d CROSS JOIN search_files f WHERE f.path = d.file{filters} \
             LIMIT {}",
            NARROW_DOCS + 1
        )
    } else {
        format!(
            "SELECT d.id FROM docs d WHERE 1{filters} LIMIT {}",
            NARROW_DOCS + 1
        )
    };
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut rows = stmt.query(rusqlite::params_from_iter(args.iter()))?;
    let mut ids = Vec::new();
    while let Some(r) = rows.next()? {
        let mut c = Cols::new(r, "docs", &["id"])?;
        ids.push(c.int(0)?.unwrap_or_default());
        if ids.len() > NARROW_DOCS {
            return Ok(None);
        }
    }
    ids.sort_unstable();
    Ok(Some(ids))
}

/// Whether `q`'s session or workspace filter leaves at most [`NARROW_FILES`] files (counted
/// on their indexes).
fn narrow_files(conn: &Connection, q: &SearchQuery) -> rusqlite::Result<bool> {
    let mut narrow = false;
    for (column, value) in [("session_id", &q.session_id), ("workspace", &q.workspace)] {
        if let Some(v) = value {
            let n = query_int(
                conn,
                &format!(
                    "SELECT count(*) FROM (SELECT 1 FROM search_files WHERE {column} = ?1 \
                     LIMIT {})",
                    NARROW_FILES + 1
                ),
                [v],
            )?;
            narrow |= n <= NARROW_FILES;
        }
    }
    Ok(narrow)
}

/// The columns every hit query starts with, `f` the file and `d` the document.
const HIT_COLUMNS_F: &str =
    "f.path, f.run_id, f.session_id, f.workspace, d.byte_offset, d.kind, d.time_ms";

const HIT_NAMES: &[&str] = &[
    "path",
    "run_id",
    "session_id",
    "workspace",
    "byte_offset",
    "kind",
    "time_ms",
    "snippet",
];

/// A hit from a row of [`HIT_COLUMNS_F`] and a snippet (or text) column.
fn hit(r: &rusqlite::Row<'_>, by: MatchedBy, score: f64) -> rusqlite::Result<SearchHit> {
    let mut c = Cols::new(r, "docs", HIT_NAMES)?;
    Ok(SearchHit {
        rel_path: c.text_or_empty(0)?,
        run_id: c.text_or_empty(1)?,
        session_id: c.text(2)?,
        workspace: c.text(3)?,
        byte_offset: lossy_u64(c.int(4)?),
        kind: c.text_or_empty(5)?,
        time_ms: c.int(6)?,
        snippet: c.text_or_empty(7)?,
        matched_by: by,
        score,
    })
}

fn score(v: rusqlite::types::ValueRef<'_>) -> f64 {
    match v {
        rusqlite::types::ValueRef::Real(f) => f,
        rusqlite::types::ValueRef::Integer(i) => i as f64,
        _ => 0.0,
    }
}

/// The filters of `q` as ` AND …` conditions on `f` (file) and `d` (document), with their
/// arguments numbered from `first`.
fn filter_sql(q: &SearchQuery, first: usize) -> (String, Vec<rusqlite::types::Value>) {
    let mut sql = String::new();
    let mut args: Vec<rusqlite::types::Value> = Vec::new();
    let mut arg = |sql: &mut String, cond: &str, v: rusqlite::types::Value| {
        args.push(v);
        sql.push_str(&format!(" AND {cond} ?{}", first + args.len() - 1));
    };
    if let Some(s) = &q.session_id {
        arg(&mut sql, "f.session_id =", s.clone().into());
    }
    if let Some(w) = &q.workspace {
        arg(&mut sql, "f.workspace =", w.clone().into());
    }
    if let Some(t) = q.since_ms {
        arg(&mut sql, "d.time_ms >=", t.into());
    }
    if let Some(t) = q.until_ms {
        arg(&mut sql, "d.time_ms <", t.into());
    }
    if !q.kinds.is_empty() {
        let from = first + args.len();
        for k in &q.kinds {
            args.push(k.clone().into());
        }
        let marks: Vec<String> = (from..first + args.len())
            .map(|i| format!("?{i}"))
            .collect();
        sql.push_str(&format!(" AND d.kind IN ({})", marks.join(", ")));
    }
    (sql, args)
}

/// `s` for a `LIKE … ESCAPE '\'` pattern: `%`, `_` and `\` taken literally.
fn escape_like(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A character of a script written without spaces between words: CJK (from U+2E80 on:
/// radicals, kana, ideographs, Hangul, full-width forms, …), Thai, Lao, Myanmar, Khmer.
fn unspaced_script(c: char) -> bool {
    matches!(c, '\u{0E00}'..='\u{0EFF}' | '\u{1000}'..='\u{109F}' | '\u{1780}'..='\u{17FF}')
        || c >= '\u{2E80}'
}

/// A query word too short for the trigram index (one or two characters) holding a character
/// of a script without spaces.
fn is_short_unspaced(word: &str) -> bool {
    word.chars().count() < 3 && word.chars().any(unspaced_script)
}

/// Characters shown on each side of the first match in a [`substring_snippet`].
const SNIPPET_CONTEXT: usize = 32;

/// A snippet of `text` for a substring hit: up to 32 characters on each side
/// of the first match of any of `words` (ASCII letters of any case), `…` where text is left
/// out, every match inside between [`HIGHLIGHT_START`] and [`HIGHLIGHT_END`].
pub fn substring_snippet(text: &str, words: &[&str]) -> String {
    // ASCII lowering keeps every byte offset, so matches found in it are offsets of `text`.
    let folded = text.to_ascii_lowercase();
    let needles: Vec<String> = words
        .iter()
        .filter(|w| !w.is_empty())
        .map(|w| w.to_ascii_lowercase())
        .collect();
    let first = needles
        .iter()
        .filter_map(|n| folded.find(n.as_str()))
        .min()
        .unwrap_or(0);
    let start = text
        .get(..first)
        .map(|before| {
            let n = before.chars().count().saturating_sub(SNIPPET_CONTEXT);
            before.char_indices().nth(n).map_or(first, |(i, _)| i)
        })
        .unwrap_or(0);
    let end = text
        .get(first..)
        .map(|after| {
            let longest = needles.iter().map(|n| n.chars().count()).max().unwrap_or(0);
            after
                .char_indices()
                .nth(SNIPPET_CONTEXT + longest)
                .map_or(text.len(), |(i, _)| first + i)
        })
        .unwrap_or(text.len());
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    let mut at = start;
    while at < end {
        let next = needles
            .iter()
            .filter_map(|n| {
                folded
                    .get(at..end)
                    .and_then(|h| h.find(n.as_str()))
                    .map(|i| (at + i, n.len()))
            })
            .min_by_key(|(i, len)| (*i, usize::MAX - *len));
        match next {
            Some((i, len)) if i + len <= end => {
                out.push_str(text.get(at..i).unwrap_or_default());
                out.push(HIGHLIGHT_START);
                out.push_str(text.get(i..i + len).unwrap_or_default());
                out.push(HIGHLIGHT_END);
                at = i + len;
            }
            _ => {
                out.push_str(text.get(at..end).unwrap_or_default());
                at = end;
            }
        }
    }
    if end < text.len() {
        out.push('…');
    }
    out
}

/// Opens one of the search index's files (`search.db` or the substring index) for writing:
/// WAL, no `fsync` (`synchronous = OFF`: the data is derived; a process that dies keeps a
/// consistent file, an operating-system crash or power cut may lose the last transactions,
/// whose files the next refresh reads again, or damage the file, which `sessions reindex
/// --search`, or deleting it, rebuilds; nothing is lost that is not in the run logs), a
/// 64 MiB page cache. A file of another layout version is emptied and given `schema`
/// (`drop` first) in one transaction; `what` names that step in its error.
fn open_derived(path: &Path, drop: &str, schema: &str, what: &'static str) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(db_err(path, "open"))?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(db_err(path, "set busy timeout"))?;
    conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))
        .map_err(db_err(path, "set journal_mode=WAL"))?;
    conn.execute_batch(
        "PRAGMA synchronous = OFF; PRAGMA cache_size = -65536; PRAGMA temp_store = MEMORY;",
    )
    .map_err(db_err(path, "set pragmas"))?;
    let version =
        query_int(&conn, "PRAGMA user_version", []).map_err(db_err(path, "read version"))?;
    if version != SEARCH_USER_VERSION {
        conn.execute_batch(&format!(
            "BEGIN IMMEDIATE; {drop} {schema} PRAGMA user_version = {SEARCH_USER_VERSION}; COMMIT;"
        ))
        .map_err(db_err(path, what))?;
    }
    Ok(conn)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use rusqlite::OptionalExtension;

    fn work(rel: &str) -> SearchWork {
        SearchWork {
            rel_path: rel.to_owned(),
            path: PathBuf::from(rel),
            run_id: format!("run-{rel}"),
            session_id: Some("s".to_owned()),
            workspace: None,
            from: 0,
            line: 1,
            file_size: 0,
            mtime_ns: 0,
            compressed: false,
            session_file: false,
            legacy_snapshot: false,
        }
    }

    fn doc(offset: u64, text: String) -> SearchDoc {
        SearchDoc {
            byte_offset: offset,
            kind: "assistant",
            text,
            time_ms: None,
        }
    }

    fn offsets(hits: &[SearchHit]) -> Vec<(String, u64)> {
        hits.iter()
            .map(|h| (h.rel_path.clone(), h.byte_offset))
            .collect()
    }

    #[test]
    fn a_common_word_is_ranked_within_the_newest_window_a_rare_one_fully() {
        let dir = tempfile::tempdir().unwrap();
        let index = SearchIndex::open(dir.path()).unwrap();
        // Indexed first (oldest): the best matches of all, "needle" five times each, and the
        // only documents holding "rare" (once with "needle", once alone).
        let old = work("old");
        let old_docs = vec![
            doc(0, "needle needle needle needle needle rare".to_owned()),
            doc(1, "rare".to_owned()),
        ];
        index.apply(&old, &old_docs, 2, 3).unwrap();
        // Then a full window of weaker matches: "needle" once among other words.
        let mut new = work("new");
        new.session_id = Some("t".to_owned());
        let window = usize::try_from(RANK_WINDOW).unwrap();
        let new_docs: Vec<SearchDoc> = (0..window as u64)
            .map(|i| {
                let n = if i == 7 { 2 } else { 1 };
                doc(i, format!("{} hay stack filler {i}", "needle ".repeat(n)))
            })
            .collect();
        index.apply(&new, &new_docs, 9, 9).unwrap();

        let mut q = SearchQuery::new("needle");
        q.limit = 3;
        let hits = index.search(&q).unwrap();
        // The old documents are outside the newest RANK_WINDOW matches: not ranked, not
        // shown; within the window the document with two needles is best.
        assert_eq!(hits.len(), 3);
        assert_eq!(offsets(&hits)[0], ("new".to_owned(), 7));
        assert!(hits.iter().all(|h| h.rel_path == "new"), "{hits:?}");
        assert!(hits[0].score < hits[1].score);
        assert_eq!(hits[0].matched_by, MatchedBy::Words);

        // A filter narrows the window to what passes it: the old file's matches are then
        // the newest, and the best.
        q.session_id = Some("s".to_owned());
        q.kinds = vec!["assistant".to_owned()];
        assert_eq!(
            offsets(&index.search(&q).unwrap()),
            vec![("old".to_owned(), 0)]
        );

        // Fewer matches than the window: every match is ranked, the oldest best first.
        let mut q = SearchQuery::new("rare");
        q.limit = 5;
        let hits = index.search(&q).unwrap();
        assert_eq!(
            offsets(&hits),
            vec![("old".to_owned(), 1), ("old".to_owned(), 0)]
        );
        assert_eq!(
            hits[1].snippet,
            format!("needle needle needle needle needle {HIGHLIGHT_START}rare{HIGHLIGHT_END}")
        );
    }

    /// 200 files, alternately of sessions `a` and `b`, each with three documents holding
    /// "needle" (the second twice) at one-minute steps; the newest file last.
    fn interleaved(index: &SearchIndex) {
        let works: Vec<SearchWork> = (0..200)
            .map(|i| {
                let mut w = work(&format!("f{i:03}"));
                w.session_id = Some(if i % 2 == 0 { "a" } else { "b" }.to_owned());
                w
            })
            .collect();
        let docs: Vec<Vec<SearchDoc>> = (0..200i64)
            .map(|i| {
                (0..3u64)
                    .map(|k| SearchDoc {
                        time_ms: Some(i * 60_000),
                        ..doc(
                            k,
                            format!(
                                "{} hay stack f{i} word{k}",
                                "needle ".repeat(if k == 1 { 2 } else { 1 })
                            ),
                        )
                    })
                    .collect()
            })
            .collect();
        let files: Vec<IndexedFile<'_>> = works
            .iter()
            .zip(&docs)
            .map(|(work, docs)| IndexedFile {
                work,
                docs,
                indexed_to: 3,
                next_line: 4,
            })
            .collect();
        index.apply_many(&files).unwrap();
    }

    #[test]
    fn a_narrow_filter_takes_its_window_from_the_documents_that_pass_it() {
        let dir = tempfile::tempdir().unwrap();
        let index = SearchIndex::open(dir.path()).unwrap();
        interleaved(&index);
        let page = |q: &SearchQuery| -> Vec<(String, u64)> { offsets(&index.search(q).unwrap()) };
        // Session `a`: 100 files between which those of `b` lie (skipped); the best are the
        // documents with two needles, equal scores ordered by file and offset.
        let mut q = SearchQuery::new("needle");
        q.session_id = Some("a".to_owned());
        q.limit = 3;
        let conn = index.conn.lock();
        let ids = narrow_candidates(&conn, &q).unwrap().unwrap();
        assert_eq!(ids.len(), 300);
        assert_eq!(window(&conn, "\"needle\"", &q).unwrap().len(), 300);
        drop(conn);
        assert_eq!(
            page(&q),
            vec![
                ("f000".to_owned(), 1),
                ("f002".to_owned(), 1),
                ("f004".to_owned(), 1)
            ]
        );
        // With a kind, a time range and a word of one file only.
        q.kinds = vec!["assistant".to_owned()];
        q.since_ms = Some(50 * 60_000);
        q.until_ms = Some(54 * 60_000);
        assert_eq!(
            page(&q),
            vec![
                ("f050".to_owned(), 1),
                ("f052".to_owned(), 1),
                ("f050".to_owned(), 0)
            ]
        );
        q.text = "f52 word2".to_owned();
        assert_eq!(page(&q), vec![("f052".to_owned(), 2)]);
        q.session_id = Some("b".to_owned());
        assert_eq!(page(&q), vec![]);
        // A time range alone (from the documents' time index): files 198 and 199.
        let mut q = SearchQuery::new("needle");
        q.since_ms = Some(198 * 60_000);
        q.limit = 10;
        let conn = index.conn.lock();
        assert_eq!(
            narrow_candidates(&conn, &q).unwrap().map(|ids| ids.len()),
            Some(6)
        );
        drop(conn);
        assert_eq!(
            page(&q),
            vec![
                ("f198".to_owned(), 1),
                ("f199".to_owned(), 1),
                ("f198".to_owned(), 0),
                ("f198".to_owned(), 2),
                ("f199".to_owned(), 0),
                ("f199".to_owned(), 2)
            ]
        );
        // An old day with the newest matches outside it.
        q.since_ms = Some(3 * 60_000);
        q.until_ms = Some(4 * 60_000);
        assert_eq!(
            page(&q),
            vec![
                ("f003".to_owned(), 1),
                ("f003".to_owned(), 0),
                ("f003".to_owned(), 2)
            ]
        );
        // No filter: not narrow.
        let conn = index.conn.lock();
        assert_eq!(
            narrow_candidates(&conn, &SearchQuery::new("needle")).unwrap(),
            None
        );
    }

    #[test]
    fn an_index_of_an_older_layout_is_rebuilt_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let index = SearchIndex::open(dir.path()).unwrap();
        index
            .apply(&work("old"), &[doc(0, "kept words".to_owned())], 1, 2)
            .unwrap();
        // The previous layout: version 5, no phrase counts.
        {
            let conn = index.conn.lock();
            conn.execute_batch("DROP TABLE phrase_docs; PRAGMA user_version = 5;")
                .unwrap();
        }
        drop(index);
        assert!(SearchIndex::open_read_only(dir.path()).unwrap().is_none());
        let index = SearchIndex::open(dir.path()).unwrap();
        assert_eq!(index.counts().unwrap(), SearchCounts::default());
        let conn = index.conn.lock();
        assert_eq!(
            query_int(&conn, "PRAGMA user_version", []).unwrap(),
            SEARCH_USER_VERSION
        );
        assert_eq!(
            query_int(
                &conn,
                "SELECT count(*) FROM sqlite_master WHERE name = 'phrase_docs'",
                []
            )
            .unwrap(),
            1
        );
    }

    /// The first page of `q` as FTS5's `rank` orders the same window: (file, offset, score).
    fn fts5_page(index: &SearchIndex, q: &SearchQuery) -> Vec<(String, u64, f64)> {
        let conn = index.conn.lock();
        let expr = quote_phrases(&q.text).unwrap();
        let ids = window(&conn, &expr, q).unwrap();
        fts5_rank(&conn, &expr, &ids, q.limit)
            .unwrap()
            .into_iter()
            .map(|(id, score)| {
                let (file, offset) = conn
                    .query_row(
                        "SELECT file, byte_offset FROM docs WHERE id = ?1",
                        [id],
                        |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)),
                    )
                    .unwrap();
                (file, u64::try_from(offset).unwrap(), score)
            })
            .collect()
    }

    fn page(index: &SearchIndex, q: &SearchQuery) -> Vec<(String, u64, f64)> {
        index
            .search(q)
            .unwrap()
            .into_iter()
            .filter(|h| h.matched_by == MatchedBy::Words)
            .map(|h| (h.rel_path, h.byte_offset, h.score))
            .collect()
    }

    /// The kept count of documents holding `phrase` and FTS5's own count.
    fn kept_and_counted(index: &SearchIndex, phrase: &str) -> (Option<i64>, i64) {
        let conn = index.conn.lock();
        let kept = conn
            .query_row(
                "SELECT docs FROM phrase_docs WHERE phrase = ?1",
                [phrase],
                |r| r.get(0),
            )
            .optional()
            .unwrap();
        let counted = query_int(
            &conn,
            "SELECT count(*) FROM docs_words WHERE docs_words MATCH ?1",
            [format!("\"{phrase}\"")],
        )
        .unwrap();
        (kept, counted)
    }

    #[test]
    fn ranked_scores_equal_fts5s_to_the_bit() {
        let dir = tempfile::tempdir().unwrap();
        let index = SearchIndex::open(dir.path()).unwrap();
        let words = ["parser", "linker", "cache", "Module", "ux-capacity", "検索"];
        let docs: Vec<SearchDoc> = (0..400u64)
            .map(|i| {
                let n = usize::try_from(i).unwrap();
                let mut text = String::new();
                for k in 0..(n % 7 + 1) {
                    text.push_str(words[(n * 3 + k * 5) % words.len()]);
                    text.push_str(if k % 3 == 0 { " " } else { ", " });
                }
                text.push_str(&"filler ".repeat(n % 13));
                text.push_str(&format!("module_{} 全文検索 — “done” → ✓ {i}", n % 5));
                doc(i * 100, text)
            })
            .collect();
        index.apply(&work("a"), &docs, 40_000, 401).unwrap();
        for text in [
            "module",
            "MODULE cache",
            "linker parser",
            "ux-capacity",
            "capacity ux",
            "filler 検索",
            "module_3 done",
            "全文検索",
        ] {
            for limit in [1, 20, 500] {
                let mut q = SearchQuery::new(text);
                q.limit = limit;
                let ours = page(&index, &q);
                assert!(!ours.is_empty(), "{text}");
                assert_eq!(ours, fts5_page(&index, &q), "{text} limit {limit}");
            }
        }
        // Every page was ranked here, none by FTS5's `rank`.
        assert_eq!(index.fts5_ranked.load(Ordering::Relaxed), 0);
        // A window document with a character not claimed by the tokenizer (`é`): FTS5 ranks,
        // with the same result.
        index
            .apply(&work("b"), &[doc(0, "module café".to_owned())], 1, 2)
            .unwrap();
        let q = SearchQuery::new("module");
        assert_eq!(page(&index, &q), fts5_page(&index, &q));
        assert_eq!(index.fts5_ranked.load(Ordering::Relaxed), 1);
        // So does a query word with such a character, or expert syntax.
        let q = SearchQuery::new("café");
        assert_eq!(page(&index, &q).len(), 1);
        let mut q = SearchQuery::new("modul*");
        q.fts = true;
        assert_eq!(index.search(&q).unwrap().len(), 20);
        assert_eq!(index.fts5_ranked.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn a_common_phrase_is_counted_once_and_its_count_kept_current() {
        let dir = tempfile::tempdir().unwrap();
        let index = SearchIndex::open(dir.path()).unwrap();
        let many = |n: u64, from: u64, word: &str| -> Vec<SearchDoc> {
            (from..from + n)
                .map(|i| doc(i, format!("{word} common {}", i % 3)))
                .collect()
        };
        let common = usize::try_from(bm25::PHRASE_CACHE_MIN).unwrap() + 200;
        let a = many(common as u64, 0, "alpha");
        index
            .apply(&work("a"), &a, common as u64, common as u64 + 1)
            .unwrap();
        let walked = || index.walked.load(Ordering::Relaxed);
        let q = SearchQuery::new("common");
        let first = page(&index, &q);
        assert_eq!(first, fts5_page(&index, &q));
        // Counted once by walking its documents, then kept.
        assert_eq!(walked(), common as u64);
        assert_eq!(
            kept_and_counted(&index, "common"),
            (Some(common as i64), common as i64)
        );
        assert_eq!(page(&index, &q), first);
        assert_eq!(walked(), common as u64);
        // A rare phrase is counted every time, and not kept.
        let rare = SearchQuery::new("alpha 1");
        page(&index, &rare);
        page(&index, &rare);
        assert_eq!(kept_and_counted(&index, "alpha").0, Some(common as i64));
        assert_eq!(kept_and_counted(&index, "1").0, None);
        let walked_now = walked();
        // One transaction: a new file, file `a` replaced from offset 1,000 (its documents
        // there removed, new ones added), and file `c` written twice (the second replaces
        // what the first added in the same transaction).
        let b = many(300, 0, "beta");
        let mut a_again = work("a");
        a_again.from = 1_000;
        let mut a_tail = many(50, 1_000, "alpha");
        a_tail.push(doc(1_050, "without the word".to_owned()));
        let c = work("c");
        let c1 = many(10, 0, "gamma");
        let c2 = many(5, 0, "gamma");
        let (wb, wc) = (work("b"), c.clone());
        index
            .apply_many(&[
                IndexedFile {
                    work: &wb,
                    docs: &b,
                    indexed_to: 300,
                    next_line: 301,
                },
                IndexedFile {
                    work: &a_again,
                    docs: &a_tail,
                    indexed_to: 1_051,
                    next_line: 1_052,
                },
                IndexedFile {
                    work: &c,
                    docs: &c1,
                    indexed_to: 10,
                    next_line: 11,
                },
                IndexedFile {
                    work: &wc,
                    docs: &c2,
                    indexed_to: 5,
                    next_line: 6,
                },
            ])
            .unwrap();
        let expected = 1_000 + 50 + 300 + 5;
        assert_eq!(
            kept_and_counted(&index, "common"),
            (Some(expected), expected)
        );
        assert_eq!(kept_and_counted(&index, "alpha"), (Some(1_050), 1_050));
        assert_eq!(page(&index, &q), fts5_page(&index, &q));
        // Removed files leave the counts.
        assert_eq!(index.remove_files(&["b".to_owned()]).unwrap(), 1);
        assert_eq!(
            kept_and_counted(&index, "common"),
            (Some(expected - 300), expected - 300)
        );
        assert_eq!(page(&index, &q), fts5_page(&index, &q));
        // None of these pages walked a common phrase's documents again.
        assert_eq!(walked() - walked_now, 0);
        // Opened read-only: a new common phrase is counted, not kept.
        let d = many(common as u64, 0, "delta");
        index
            .apply(&work("d"), &d, common as u64, common as u64 + 1)
            .unwrap();
        drop(index);
        let index = SearchIndex::open_read_only(dir.path()).unwrap().unwrap();
        let q = SearchQuery::new("delta");
        assert_eq!(page(&index, &q), fts5_page(&index, &q));
        assert_eq!(kept_and_counted(&index, "delta"), (None, common as i64));
        assert_eq!(index.walked.load(Ordering::Relaxed), common as u64);
    }

    /// FTS5 segments of `table` (one per flush of its pending terms).
    fn segments(index: &SearchIndex, table: &str) -> i64 {
        let sql = format!("SELECT count(DISTINCT segid) FROM main.{table}_idx");
        if table == "docs_trigram" {
            query_int(index.trigram.lock().as_ref().unwrap(), &sql, []).unwrap()
        } else {
            query_int(&index.conn.lock(), &sql, []).unwrap()
        }
    }

    /// The statements `f` sends on the index's connection, by their first words (the table
    /// of an `INSERT`/`SELECT`/`DELETE`); the statements FTS5 runs itself on its shadow tables
    /// (traced as `-- …`) are left out.
    fn statements_sent(index: &SearchIndex, f: impl FnOnce()) -> Vec<String> {
        use rusqlite::trace::{TraceEvent, TraceEventCodes};
        let ran: std::sync::Arc<Mutex<Vec<String>>> = std::sync::Arc::default();
        let sink = std::sync::Arc::clone(&ran);
        index
            .conn
            .lock()
            .trace_v2(
                TraceEventCodes::SQLITE_TRACE_STMT,
                Some(move |e: TraceEvent<'_>| {
                    if let TraceEvent::Stmt(_, sql) = e
                        && !sql.starts_with("--")
                    {
                        let words: Vec<&str> = sql.split_whitespace().collect();
                        let after = |w: &str| {
                            let i = words.iter().position(|x| x.eq_ignore_ascii_case(w))?;
                            words.get(i + 1).map(|t| t.trim_end_matches('('))
                        };
                        let verb = words.first().copied().unwrap_or_default();
                        let table = match verb {
                            "INSERT" => after("INTO"),
                            "SELECT" | "DELETE" => after("FROM"),
                            _ => None,
                        };
                        sink.lock().push(match table {
                            Some(t) => format!("{verb} {t}"),
                            None => words.join(" "),
                        });
                    }
                }),
            )
            .unwrap();
        f();
        index
            .conn
            .lock()
            .trace_v2(
                TraceEventCodes::SQLITE_TRACE_STMT,
                None::<fn(TraceEvent<'_>)>,
            )
            .unwrap();
        ran.lock().clone()
    }

    #[test]
    fn a_batch_of_new_files_sends_two_statements_per_document_and_two_per_file() {
        let dir = tempfile::tempdir().unwrap();
        let index = SearchIndex::open(dir.path()).unwrap();
        let (a, b) = (work("a"), work("b"));
        let docs: Vec<SearchDoc> = (0..3u64)
            .map(|i| doc(i, format!("alpha number{i}")))
            .collect();
        let ran = statements_sent(&index, || {
            index
                .apply_many(&[
                    IndexedFile {
                        work: &a,
                        docs: &docs,
                        indexed_to: 3,
                        next_line: 4,
                    },
                    IndexedFile {
                        work: &b,
                        docs: &docs[..2],
                        indexed_to: 2,
                        next_line: 3,
                    },
                ])
                .unwrap();
        });
        // The trigram table is in the other file, written by its own connection.
        let per_doc = ["INSERT docs", "INSERT docs_words"];
        let mut want = vec!["BEGIN IMMEDIATE".to_owned()];
        for n in [3, 2] {
            // Whether the file has documents to replace: an index probe.
            want.push("SELECT docs".to_owned());
            for _ in 0..n {
                want.extend(per_doc.map(str::to_owned));
            }
            want.push("INSERT search_files".to_owned());
        }
        // The transaction's token for the substring index, the oldest beyond those kept
        // forgotten.
        want.push("INSERT search_writes".to_owned());
        want.push("DELETE search_writes".to_owned());
        // The kept phrase counts (none kept yet).
        want.push("SELECT phrase_docs".to_owned());
        want.push("COMMIT".to_owned());
        assert_eq!(ran, want);
    }

    #[test]
    fn one_transaction_writes_one_segment_per_table_and_removal_forgets_the_text() {
        let dir = tempfile::tempdir().unwrap();
        let index = SearchIndex::open(dir.path()).unwrap();
        let a = work("a");
        let b = work("b");
        let docs: Vec<SearchDoc> = (0..50u64)
            .map(|i| doc(i, format!("alpha beta gamma number{i}")))
            .collect();
        index
            .apply_many(&[
                IndexedFile {
                    work: &a,
                    docs: &docs,
                    indexed_to: 50,
                    next_line: 51,
                },
                IndexedFile {
                    work: &b,
                    docs: &docs,
                    indexed_to: 50,
                    next_line: 51,
                },
            ])
            .unwrap();
        // 100 documents, one transaction: the terms are flushed once, not per document.
        assert_eq!(segments(&index, "docs_words"), 1);
        assert_eq!(segments(&index, "docs_trigram"), 1);
        // Documents from an offset on are replaced; removed files are gone from both tables.
        let mut again = work("a");
        again.from = 40;
        index
            .apply(&again, &[doc(40, "delta".to_owned())], 41, 42)
            .unwrap();
        assert_eq!(index.remove_files(&["b".to_owned()]).unwrap(), 1);
        let found = |text: &str| index.search(&SearchQuery::new(text)).unwrap().len();
        assert_eq!(found("number45"), 0);
        assert_eq!(found("number39"), 1);
        assert_eq!(found("delta"), 1);
        // Substrings (the trigram table): number4 only, number40 to number49 are gone;
        // number3 and number30 to number39 stay.
        assert_eq!(found("umber4"), 1);
        assert_eq!(found("umber3"), 11);
    }

    #[test]
    fn short_japanese_words_are_found_by_a_scan() {
        let dir = tempfile::tempdir().unwrap();
        let index = SearchIndex::open(dir.path()).unwrap();
        let w = work("j");
        let docs = vec![
            doc(0, "全文検索機能を追加してください".to_owned()),
            doc(10, "説明書を読む".to_owned()),
            doc(20, "unrelated text".to_owned()),
            doc(30, "Rust の全文検索".to_owned()),
        ];
        index.apply(&w, &docs, 40, 5).unwrap();
        let found = |text: &str| -> Vec<(u64, String)> {
            index
                .search(&SearchQuery::new(text))
                .unwrap()
                .into_iter()
                .map(|h| {
                    assert_eq!(h.matched_by, MatchedBy::Substring);
                    let s = h
                        .snippet
                        .replace(HIGHLIGHT_START, "[")
                        .replace(HIGHLIGHT_END, "]");
                    (h.byte_offset, s)
                })
                .collect()
        };
        // Two characters inside a longer run of Japanese text, newest first.
        assert_eq!(
            found("検索"),
            vec![
                (30, "Rust の全文[検索]".to_owned()),
                (0, "全文[検索]機能を追加してください".to_owned())
            ]
        );
        // One character; and with an ASCII word of any case beside it.
        assert_eq!(found("説"), vec![(10, "[説]明書を読む".to_owned())]);
        assert_eq!(
            found("RUST 検索"),
            vec![(30, "[Rust] の全文[検索]".to_owned())]
        );
        // LIKE's own characters are taken literally.
        assert_eq!(found("検%"), vec![]);
        // Two ASCII letters are left to the word index (no scan).
        assert_eq!(found("ex"), vec![]);
    }

    #[test]
    fn substrings_come_from_a_trigram_table_without_positions() {
        let dir = tempfile::tempdir().unwrap();
        let index = SearchIndex::open(dir.path()).unwrap();
        let w = work("t");
        let docs = vec![
            doc(0, "set ux-capacity to 4".to_owned()),
            doc(10, "100% of xa_bx done".to_owned()),
            doc(20, "100x of xaXbx done".to_owned()),
            doc(30, "全文検索機能を追加".to_owned()),
        ];
        index.apply(&w, &docs, 40, 5).unwrap();
        // The trigram table keeps no positions (`detail=none`): FTS5 refuses phrases on it.
        {
            let guard = index.trigram.lock();
            let e = query_int(
                guard.as_ref().unwrap(),
                "SELECT count(*) FROM docs_trigram WHERE docs_trigram MATCH '\"capacity\"'",
                [],
            )
            .unwrap_err();
            assert!(e.to_string().contains("detail!=full"), "{e}");
        }
        let found = |text: &str| -> Vec<(u64, String)> {
            index
                .search(&SearchQuery::new(text))
                .unwrap()
                .into_iter()
                .map(|h| {
                    assert_eq!(h.matched_by, MatchedBy::Substring);
                    let s = h
                        .snippet
                        .replace(HIGHLIGHT_START, "[")
                        .replace(HIGHLIGHT_END, "]");
                    (h.byte_offset, s)
                })
                .collect()
        };
        assert_eq!(
            found("X-CAPAC"),
            vec![(0, "set u[x-capac]ity to 4".to_owned())]
        );
        assert_eq!(
            found("検索機能"),
            vec![(30, "全文[検索機能]を追加".to_owned())]
        );
        // `%` and `_` are text, not LIKE wildcards.
        assert_eq!(found("00%"), vec![(10, "1[00%] of xa_bx done".to_owned())]);
        assert_eq!(found("a_b"), vec![(10, "100% of x[a_b]x done".to_owned())]);
        // Every word must occur.
        assert_eq!(found("capac 検索機"), vec![]);
        // Expert syntax goes to the word index only: a prefix of a word is found, a
        // substring inside one is not.
        let mut q = SearchQuery::new("capac*");
        q.fts = true;
        assert_eq!(
            offsets(&index.search(&q).unwrap()),
            vec![("t".to_owned(), 0)]
        );
        q.text = "apacit".to_owned();
        assert_eq!(index.search(&q).unwrap().len(), 0);
        assert_eq!(found("apacit").len(), 1);
    }

    /// The byte offsets of the substring hits of `text`.
    fn substring_offsets(index: &SearchIndex, text: &str) -> Vec<u64> {
        index
            .search(&SearchQuery::new(text))
            .unwrap()
            .into_iter()
            .filter(|h| h.matched_by == MatchedBy::Substring)
            .map(|h| h.byte_offset)
            .collect()
    }

    #[test]
    fn the_substring_index_is_a_file_of_its_own_that_catches_up_after_a_crash() {
        let dir = tempfile::tempdir().unwrap();
        let index = SearchIndex::open(dir.path()).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(SEARCH_TRIGRAM_DB))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let a = work("a");
        index
            .apply(&a, &[doc(0, "set ux-capacity to 4".to_owned())], 1, 2)
            .unwrap();
        assert_eq!(substring_offsets(&index, "x-capac"), vec![0]);
        // `search.db` written, the process gone before the substring index was: that index
        // lags, and says nothing of the new document.
        let mut more = work("a");
        more.from = 1;
        index
            .write_many(&[IndexedFile {
                work: &more,
                docs: &[doc(1, "raise ux-capacity again".to_owned())],
                indexed_to: 2,
                next_line: 3,
            }])
            .unwrap();
        drop(index);
        let index = SearchIndex::open(dir.path()).unwrap();
        assert_eq!(substring_offsets(&index, "x-capac"), vec![0]);
        // The next refresh's writer catches it up before (and whether or not) it writes.
        index.with_substring_writer(|_| ()).unwrap();
        assert_eq!(substring_offsets(&index, "x-capac"), vec![1, 0]);
        assert_eq!(index.sync_substrings().unwrap(), SubstringSync::default());
    }

    #[test]
    fn a_removed_document_is_forgotten_once_even_when_its_queue_entry_stays() {
        let dir = tempfile::tempdir().unwrap();
        let index = SearchIndex::open(dir.path()).unwrap();
        let (a, b) = (work("a"), work("b"));
        index
            .apply(&a, &[doc(0, "alpha ux-capacity".to_owned())], 1, 2)
            .unwrap();
        index
            .apply(&b, &[doc(0, "beta ux-capacity".to_owned())], 1, 2)
            .unwrap();
        // `gc` removes `a`; the substring index forgets it in the next sync.
        assert_eq!(index.remove_from_docs(&["a".to_owned()]).unwrap(), 1);
        let queued: Vec<(i64, i64, String)> = {
            let conn = index.conn.lock();
            let mut stmt = conn
                .prepare("SELECT seq, id, text FROM trigram_gone")
                .unwrap();
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap()
        };
        assert_eq!(queued.len(), 1);
        let synced = index.sync_substrings().unwrap();
        assert_eq!(
            (synced.forgotten, synced.added, synced.rebuilt),
            (1, 0, false)
        );
        // The queue is emptied after the sync committed; were that lost (the process gone
        // in between, or `search.db` busy), the entry is not acted on twice.
        {
            let conn = index.conn.lock();
            assert_eq!(
                query_int(&conn, "SELECT count(*) FROM trigram_gone", []).unwrap(),
                0
            );
            for (seq, id, text) in &queued {
                conn.execute(
                    "INSERT INTO trigram_gone (seq, id, text) VALUES (?1, ?2, ?3)",
                    params![seq, id, text],
                )
                .unwrap();
            }
        }
        assert_eq!(index.sync_substrings().unwrap(), SubstringSync::default());
        assert_eq!(
            offsets(&index.search(&SearchQuery::new("x-capac")).unwrap()),
            vec![("b".to_owned(), 0)]
        );
        // A document added and removed before the substring index saw it is not forgotten
        // (it was never taken in).
        let c = work("c");
        index
            .write_many(&[IndexedFile {
                work: &c,
                docs: &[doc(0, "gamma ux-capacity".to_owned())],
                indexed_to: 1,
                next_line: 2,
            }])
            .unwrap();
        assert_eq!(index.remove_from_docs(&["c".to_owned()]).unwrap(), 1);
        assert_eq!(index.sync_substrings().unwrap(), SubstringSync::default());
        let t = index.trigram.lock();
        let t = t.as_ref().unwrap();
        t.execute(
            "INSERT INTO docs_trigram (docs_trigram, rank) VALUES ('integrity-check', 0)",
            [],
        )
        .unwrap();
    }

    #[test]
    fn a_substring_index_of_another_or_an_older_search_db_is_rebuilt() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let index = SearchIndex::open(root).unwrap();
        index
            .apply(&work("a"), &[doc(0, "alpha ux-capacity".to_owned())], 1, 2)
            .unwrap();
        // `search.db` deleted (the substring file left): a new file, a new generation.
        drop(index);
        remove_db_files(&root.join(SEARCH_DB)).unwrap();
        let index = SearchIndex::open(root).unwrap();
        index
            .write_many(&[IndexedFile {
                work: &work("b"),
                docs: &[doc(5, "beta ux-capacity".to_owned())],
                indexed_to: 6,
                next_line: 2,
            }])
            .unwrap();
        let synced = index.sync_substrings().unwrap();
        assert_eq!((synced.added, synced.rebuilt), (1, true));
        assert_eq!(substring_offsets(&index, "x-capac"), vec![5]);
        // `search.db` back at an older state (an operating-system crash lost its last
        // transactions, which the substring index had taken in): rebuilt too.
        {
            let conn = index.conn.lock();
            conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
                .unwrap();
        }
        let saved = std::fs::read(root.join(SEARCH_DB)).unwrap();
        index
            .apply(&work("c"), &[doc(7, "gamma ux-capacity".to_owned())], 8, 2)
            .unwrap();
        assert_eq!(substring_offsets(&index, "x-capac"), vec![7, 5]);
        drop(index);
        remove_db_files(&root.join(SEARCH_DB)).unwrap();
        std::fs::write(root.join(SEARCH_DB), saved).unwrap();
        let index = SearchIndex::open(root).unwrap();
        index
            .write_many(&[IndexedFile {
                work: &work("d"),
                docs: &[doc(9, "delta ux-capacity".to_owned())],
                indexed_to: 10,
                next_line: 2,
            }])
            .unwrap();
        // Document 2 is now "delta" in `search.db`, "gamma" in the substring index.
        let synced = index.sync_substrings().unwrap();
        assert_eq!((synced.added, synced.rebuilt), (2, true));
        assert_eq!(substring_offsets(&index, "x-capac"), vec![9, 5]);
        assert!(substring_offsets(&index, "amma ux").is_empty());
    }

    #[test]
    fn substring_snippets_cut_around_the_first_match() {
        let long = format!("{}検索{}", "あ".repeat(50), "い".repeat(50));
        assert_eq!(
            substring_snippet(&long, &["検索"]),
            format!(
                "…{}{HIGHLIGHT_START}検索{HIGHLIGHT_END}{}…",
                "あ".repeat(SNIPPET_CONTEXT),
                "い".repeat(SNIPPET_CONTEXT)
            )
        );
        assert_eq!(
            substring_snippet("aXb axb", &["x"]),
            format!("a{HIGHLIGHT_START}X{HIGHLIGHT_END}b a{HIGHLIGHT_START}x{HIGHLIGHT_END}b")
        );
        assert_eq!(substring_snippet("none", &["検"]), "none");
        assert_eq!(escape_like(r"a%b_c\d"), r"a\%b\_c\\d");
        assert!(is_short_unspaced("検索") && is_short_unspaced("ไท"));
        assert!(!is_short_unspaced("ab") && !is_short_unspaced("検索機"));
    }
}
