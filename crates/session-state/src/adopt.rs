//! Sessions whose `state.db` row is missing (a deleted, replaced or restored `state.db`): the
//! first save never overwrites their messages file, and [`StateStore::reconstruct_orphans`]
//! (`sessions repair`) rebuilds their rows from the messages files and the sessions' run logs,
//! marked as reconstructed in a table of ours.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};
use session_jsonl::{Item, Reader, ReaderOptions};
use session_schema::{
    BaseMessage, Num, Record, SessionState, SessionStateSummary, Timestamp, check_id,
};
use time::OffsetDateTime;

use crate::db::{ReadTx, WriteTx, db_err};
use crate::error::{Result, StateError};
use crate::fsutil::{self, EMPTY_DIGEST};
use crate::messages::parse_messages;
use crate::store::StateStore;
use crate::summary::summarize;
use crate::types::{LoadNote, MessageDamage};

/// Our table marking rows rebuilt by [`StateStore::reconstruct_orphans`]. Created on first
/// use (the reference ignores it); a row is reported as reconstructed while its fingerprint
/// is the one written (the first save of the session by anyone ends that).
const CREATE_RECONSTRUCTED: &str = "CREATE TABLE IF NOT EXISTS session_reconstructed (
    session_id TEXT PRIMARY KEY,
    reconstructed_at TEXT NOT NULL,
    row_fingerprint INTEGER NOT NULL,
    messages INTEGER NOT NULL,
    run_files INTEGER NOT NULL,
    legacy_snapshot INTEGER NOT NULL
)";

/// The columns of `session_reconstructed`, in [`CREATE_RECONSTRUCTED`] order.
const MARK_COLUMNS: [&str; 6] = [
    "session_id",
    "reconstructed_at",
    "row_fingerprint",
    "messages",
    "run_files",
    "legacy_snapshot",
];

/// Where the first save of a session (no row) appends: after the messages file's bytes when
/// they are exactly complete, clean lines whose messages start `messages` (a file the
/// reference wrote before its `state.db` row was lost, or what an earlier first save of the
/// same list left before its commit); at 0 when there is no file or an empty one. Returns
/// `(lines kept, their length, their digest chain)`.
///
/// # Errors
/// [`StateError::OrphanMessages`] when the file holds anything else: it is never cut or
/// overwritten by a save; [`StateError::NotRegularFile`], [`StateError::FileTooLarge`],
/// [`StateError::Io`].
pub(crate) fn first_save_base(
    id: &str,
    main: &Path,
    messages: &[BaseMessage],
) -> Result<(usize, u64, u64)> {
    let Some(bytes) = fsutil::read_if_exists(main)? else {
        return Ok((0, 0, EMPTY_DIGEST));
    };
    if bytes.is_empty() {
        return Ok((0, 0, EMPTY_DIGEST));
    }
    let read = parse_messages(main, &bytes);
    let (digest, lines) = fsutil::digest_lines(&bytes);
    if read.is_prefix_of(&bytes, messages) {
        return Ok((
            usize::try_from(lines).unwrap_or(usize::MAX),
            bytes.len() as u64,
            digest,
        ));
    }
    Err(StateError::OrphanMessages {
        session_id: id.to_owned(),
        path: main.to_path_buf(),
        bytes: bytes.len() as u64,
        lines,
    })
}

/// What [`StateStore::reconstruct_orphans`] did (or would do) for one messages file.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReconstructionOutcome {
    /// `dry_run`: the row would be written.
    WouldRebuild,
    /// The row was written and marked reconstructed.
    Rebuilt,
    /// A row appeared meanwhile (another process saved or rebuilt the session); nothing was
    /// written.
    AlreadyIndexed,
    /// The file cannot be used (not a regular file, too large, unreadable); nothing was
    /// written. Verify reports it.
    Skipped {
        /// Why.
        reason: String,
    },
}

/// One messages file without a row, and the row rebuilt for it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Reconstruction {
    /// The session id (the file name).
    pub session_id: String,
    /// `messages/<id>.jsonl`.
    pub path: PathBuf,
    /// What happened.
    pub outcome: ReconstructionOutcome,
    /// The row's summary columns: `updated_at`, `run_id`, `message_count`,
    /// `last_user_message` (the reference's display rule), `workspace_root`.
    pub summary: SessionStateSummary,
    /// The row's `invoke_seq`.
    pub invoke_seq: Option<i64>,
    /// The run files of the session that were read, oldest first.
    pub run_files: Vec<PathBuf>,
    /// Run files of the session that could not be read (path, error).
    pub unreadable_runs: Vec<(PathBuf, String)>,
    /// Whether a legacy snapshot `state/<id>.json` supplied `meta` (and older `run_id`,
    /// `invoke_seq`, `updated_at`).
    pub legacy_snapshot: bool,
    /// Why a legacy snapshot that exists was not used (it is invalid).
    pub legacy_error: Option<String>,
    /// Damage found in the messages file (the row counts the messages that loaded).
    pub damage: Vec<MessageDamage>,
    /// Notes about the messages file (lone surrogates).
    pub notes: Vec<LoadNote>,
}

/// Result of [`StateStore::reconstruct_orphans`].
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct ReconstructionReport {
    /// One entry per messages file without a row, in session-id order.
    pub entries: Vec<Reconstruction>,
}

/// A row that [`StateStore::reconstruct_orphans`] rebuilt and nobody has saved since, or a
/// mark of `session_reconstructed` holding values its columns should not (then
/// [`ReconstructedRow::column_damage`] says which, and [`ReconstructedRow::row_unchanged`]
/// whether the session's row is still the one rebuilt).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReconstructedRow {
    /// The session.
    pub session_id: String,
    /// When the row was rebuilt.
    pub reconstructed_at: Timestamp,
    /// Messages found in the file then.
    pub messages: u64,
    /// Run files read.
    pub run_files: u64,
    /// Whether a legacy snapshot supplied `meta`.
    pub legacy_snapshot: bool,
    /// Whether the session's `state.db` row is still the one rebuilt (nobody saved the
    /// session since). Always `true` for a mark without [`ReconstructedRow::column_damage`]
    /// (other marks are not returned); `false` for a damaged mark whose session id or
    /// fingerprint cannot be read or no longer matches.
    pub row_unchanged: bool,
    /// Values of the mark's `session_reconstructed` row that are not what their column
    /// should hold (text that is not UTF-8, a BLOB, a number of the wrong kind, a NULL, a
    /// negative count), read as decoded, or as 0 / `false`. A damaged mark is returned
    /// whatever [`ReconstructedRow::row_unchanged`] is, so that its damage is reported; the
    /// next save of the session drops the mark.
    pub column_damage: Vec<crate::ColumnDamage>,
}

/// A `session_reconstructed` row as read, with its fingerprint (`None` when unreadable).
struct Mark {
    row: ReconstructedRow,
    fingerprint: Option<u64>,
}

/// What one run file says about its session.
struct RunFacts {
    path: PathBuf,
    run_id: String,
    started_at: Option<OffsetDateTime>,
    /// The last record's `ts`, as written, with its instant.
    last: Option<(OffsetDateTime, String)>,
    max_seq: Option<i64>,
    workspace_root: Option<String>,
}

impl StateStore {
    /// Rebuilds a `session_state` row for every `messages/<id>.jsonl` (a regular file with a
    /// safe id) that has none — `state.db` deleted, replaced by an empty one or restored from
    /// an older backup — so that the session is listed and loadable again, here and by the
    /// reference. With `dry_run` nothing is written and the report is the plan.
    ///
    /// The row's fields, derived as the reference would have written them:
    ///
    /// * `message_count`, `last_user_message`: from the file's messages (display rule of the
    ///   reference); damaged lines are not counted and are reported.
    /// * `run_id`: the last of the session's runs (header `session_id`; ordered by
    ///   `started_at`, then path); `invoke_seq`: the highest `llm.request.seq` of those runs
    ///   (it continues across a session's runs).
    /// * `updated_at`: the `ts` of the session's last run record (the reference saves at the
    ///   end of every run, stamping the save within a millisecond of it); without runs, the
    ///   file's modification time.
    /// * `meta_json`: from a legacy snapshot `state/<id>.json` when there is a valid one (its
    ///   `run_id`, `invoke_seq` and `updated_at` count too when newer than the runs'); else
    ///   NULL: the resume context, to-dos and model override lived only in the lost row, and
    ///   the runtime writes them again on its next save.
    /// * `workspace_root`: `meta.codelia_workspace_root` when the snapshot has it; else the
    ///   last run's `run.start.ui_context.workspace_root`, header
    ///   `meta.runtime_environment.workspace.root` (the sandbox root) or `runtime.cwd`.
    ///
    /// The row is inserted only if there still is none (never over a row), no file is
    /// written, and our table `session_reconstructed` records it, so that `sessions verify`
    /// notes it ([`StateStore::reconstructed_sessions`]). No `session_files` bookkeeping is
    /// written: like a row of the reference, the whole file is the session, and the next save
    /// appends to it when its list extends the file.
    ///
    /// # Errors
    /// [`StateError::ReadOnly`] (unless `dry_run`); [`StateError::Io`] when `messages/` or
    /// the run tree cannot be listed; [`StateError::Db`]; [`StateError::Busy`]. A file that
    /// cannot be used is an entry with [`ReconstructionOutcome::Skipped`].
    pub fn reconstruct_orphans(&self, dry_run: bool) -> Result<ReconstructionReport> {
        if !dry_run {
            self.check_writable("rebuild session rows")?;
        }
        let mut report = ReconstructionReport::default();
        let mut orphans = Vec::new();
        for (id, path, kind) in self.message_files()? {
            if self.has_row(&id)? {
                continue;
            }
            match kind {
                Some(kind) => report.entries.push(skipped(
                    &id,
                    path,
                    format!("{kind}, not a regular file: not read"),
                )),
                None => orphans.push((id, path)),
            }
        }
        if orphans.is_empty() {
            return Ok(report);
        }
        let runs = self.runs_by_session()?;
        for (id, path) in orphans {
            let entry = self.reconstruct_one(&id, path, runs.get(&id), dry_run)?;
            report.entries.push(entry);
        }
        report
            .entries
            .sort_by(|a, b| a.session_id.cmp(&b.session_id));
        Ok(report)
    }

    /// Sessions whose row [`StateStore::reconstruct_orphans`] rebuilt and that nobody has
    /// saved since (the row is still the one written), by session id, plus every mark of
    /// `session_reconstructed` that holds values its columns should not, with
    /// [`ReconstructedRow::column_damage`] (and [`ReconstructedRow::row_unchanged`] saying
    /// whether the session's row is still the rebuilt one). Works on a read-only store.
    ///
    /// # Errors
    /// [`StateError::Db`]; [`StateError::Busy`].
    pub fn reconstructed_sessions(&self) -> Result<Vec<ReconstructedRow>> {
        let marks: Vec<Mark> = {
            let conn = self.lock();
            let _rtx = ReadTx::begin(&conn, &self.db_path, self.options.max_busy_wait)?;
            let err = || db_err(&self.db_path, "read reconstructed rows");
            let exists = crate::column::query_int(
                &conn,
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'session_reconstructed'",
                [],
            )
            .map_err(err())?
                > 0;
            if !exists {
                return Ok(Vec::new());
            }
            let mut stmt = conn
                .prepare(
                    "SELECT session_id, reconstructed_at, row_fingerprint, messages, run_files, \
                     legacy_snapshot FROM session_reconstructed ORDER BY session_id",
                )
                .map_err(err())?;
            let rows = stmt
                .query_map([], |r| {
                    // Read lossily: every problem of the row is reported, none stops the rest.
                    let mut c =
                        crate::column::Cols::new(r, "session_reconstructed", &MARK_COLUMNS)?;
                    let session_id = c.text_or_empty(0)?;
                    let reconstructed_at = c.text_or_empty(1)?;
                    let fingerprint = c.bits(2)?;
                    let messages = c.count_required(3)?.unwrap_or(0);
                    let run_files = c.count_required(4)?.unwrap_or(0);
                    let legacy_snapshot = c.int_required(5)?.is_some_and(|v| v != 0);
                    Ok(Mark {
                        row: ReconstructedRow {
                            session_id,
                            reconstructed_at: Timestamp::from_raw(reconstructed_at),
                            messages,
                            run_files,
                            legacy_snapshot,
                            row_unchanged: false,
                            column_damage: c.finish(),
                        },
                        fingerprint,
                    })
                })
                .map_err(err())?;
            rows.collect::<rusqlite::Result<Vec<_>>>().map_err(err())?
        };
        let mut out = Vec::new();
        for Mark {
            mut row,
            fingerprint,
        } in marks
        {
            if check_id(&row.session_id).is_ok()
                && let Some(fingerprint) = fingerprint
            {
                let current = {
                    let conn = self.lock();
                    let _rtx = ReadTx::begin(&conn, &self.db_path, self.options.max_busy_wait)?;
                    self.stored_generation(&conn, &row.session_id)?
                };
                row.row_unchanged = current.is_some_and(|g| g.row == fingerprint);
            }
            if row.row_unchanged || !row.column_damage.is_empty() {
                out.push(row);
            }
        }
        Ok(out)
    }

    /// `messages/<id>.jsonl` entries with a safe id, sorted, with what they are when they are
    /// not regular files (`lstat`: links are not followed).
    fn message_files(&self) -> Result<Vec<(String, PathBuf, Option<&'static str>)>> {
        let dir = self.messages_dir();
        let rd = match fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(StateError::io("read directory", &dir, e)),
        };
        let mut out = Vec::new();
        for entry in rd {
            let entry = entry.map_err(|e| StateError::io("read directory", &dir, e))?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            let Some(id) = name.strip_suffix(".jsonl") else {
                continue;
            };
            if check_id(id).is_err() {
                continue;
            }
            let kind = entry
                .file_type()
                .map_err(|e| StateError::io("stat", entry.path(), e))?;
            out.push((id.to_owned(), entry.path(), fsutil::irregular_kind(kind)));
        }
        out.sort();
        Ok(out)
    }

    fn has_row(&self, id: &str) -> Result<bool> {
        let conn = self.lock();
        conn.query_row(
            "SELECT 1 FROM session_state WHERE session_id = ?1",
            [id],
            |_| Ok(()),
        )
        .optional()
        .map(|r| r.is_some())
        .map_err(db_err(&self.db_path, "look up session"))
    }

    /// The run files of every session, by the header's `session_id` (the first 64 KiB of each
    /// file are read; files without a session are left out).
    fn runs_by_session(&self) -> Result<BTreeMap<String, Vec<PathBuf>>> {
        let listing = session_jsonl::list_run_files(&self.root).map_err(|e| StateError::Run {
            path: self.root.clone(),
            source: Box::new(e),
        })?;
        let mut by_session: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
        for f in listing.files {
            let Ok(head) = session_jsonl::read_header(&f.path) else {
                continue;
            };
            if let Some(sid) = head.facts.session_id {
                by_session.entry(sid).or_default().push(f.path);
            }
        }
        Ok(by_session)
    }

    fn reconstruct_one(
        &self,
        id: &str,
        path: PathBuf,
        run_paths: Option<&Vec<PathBuf>>,
        dry_run: bool,
    ) -> Result<Reconstruction> {
        let bytes = match fsutil::read_if_exists(&path) {
            Ok(Some(b)) => b,
            Ok(None) => return Ok(skipped(id, path, "the file is gone".to_owned())),
            Err(
                e @ (StateError::NotRegularFile { .. }
                | StateError::FileTooLarge { .. }
                | StateError::Io { .. }),
            ) => return Ok(skipped(id, path, e.to_string())),
            Err(e) => return Err(e),
        };
        let read = parse_messages(&path, &bytes);
        let (legacy, legacy_error) = match self
            .legacy_path(id)
            .and_then(|legacy_path| crate::legacy::read_legacy(&legacy_path, id))
        {
            Ok(l) => (l, None),
            Err(e) => (None, Some(e.to_string())),
        };
        let mut runs = Vec::new();
        let mut unreadable_runs = Vec::new();
        for p in run_paths.map(Vec::as_slice).unwrap_or_default() {
            match read_run_facts(p) {
                Ok(f) => runs.push(f),
                Err(e) => unreadable_runs.push((p.clone(), e)),
            }
        }
        // One run id, several files (a copy, an archive beside its original, a retried
        // start): counted once, as the file that got furthest.
        let mut by_id: BTreeMap<String, RunFacts> = BTreeMap::new();
        for r in runs {
            match by_id.get(&r.run_id) {
                Some(kept) if (&kept.last, kept.max_seq) >= (&r.last, r.max_seq) => {}
                _ => {
                    by_id.insert(r.run_id.clone(), r);
                }
            }
        }
        let mut runs: Vec<RunFacts> = by_id.into_values().collect();
        runs.sort_by(|a, b| {
            (a.started_at.is_some(), a.started_at, &a.path).cmp(&(
                b.started_at.is_some(),
                b.started_at,
                &b.path,
            ))
        });
        let last_run = runs.last();
        let runs_last = runs.iter().filter_map(|r| r.last.clone()).max();
        let runs_seq = runs.iter().filter_map(|r| r.max_seq).max();
        let snapshot = legacy.as_ref().map(|l| &l.state);
        let snapshot_at = snapshot.and_then(|s| s.updated_at.parse());
        let runs_newer = match (&runs_last, snapshot_at) {
            (Some((t, _)), Some(s)) => *t >= s,
            (Some(_), None) => true,
            (None, _) => false,
        };
        let updated_at = match (&runs_last, snapshot) {
            (Some((_, ts)), _) if runs_newer => Timestamp::from_raw(ts.clone()),
            (_, Some(s)) => s.updated_at.clone(),
            _ => fs::symlink_metadata(&path)
                .and_then(|m| m.modified())
                .map(|t| Timestamp::from_datetime(OffsetDateTime::from(t)))
                .unwrap_or_else(|_| Timestamp::now()),
        };
        let run_id = match (last_run, snapshot) {
            (Some(r), _) if runs_newer => Some(r.run_id.clone()),
            (_, Some(s)) => s.run_id.clone(),
            (r, None) => r.map(|r| r.run_id.clone()),
        };
        let invoke_seq = match (runs_seq, snapshot.and_then(|s| s.invoke_seq)) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        let meta = snapshot.and_then(|s| s.meta.clone());
        let summary = summarize(&read.messages, meta.as_ref());
        let workspace_root = summary.workspace_root.clone().or_else(|| {
            runs.iter()
                .rev()
                .find_map(|r| r.workspace_root.clone())
                .map(|w| w.trim().to_owned())
                .filter(|w| !w.is_empty())
        });
        let state = SessionState {
            schema_version: Some(Num::from(1i64)),
            session_id: id.to_owned(),
            updated_at: updated_at.clone(),
            run_id: run_id.clone(),
            invoke_seq,
            messages: read.messages,
            meta,
            ..Default::default()
        };
        let entry_summary = SessionStateSummary {
            session_id: id.to_owned(),
            updated_at,
            run_id,
            message_count: Some(summary.message_count),
            last_user_message: summary.last_user_message.clone(),
            workspace_root: workspace_root.clone(),
            ..Default::default()
        };
        let outcome = if dry_run {
            ReconstructionOutcome::WouldRebuild
        } else if self.insert_reconstructed(
            &state,
            &summary,
            workspace_root.as_deref(),
            runs.len(),
            legacy.is_some(),
        )? {
            ReconstructionOutcome::Rebuilt
        } else {
            ReconstructionOutcome::AlreadyIndexed
        };
        Ok(Reconstruction {
            session_id: id.to_owned(),
            path,
            outcome,
            summary: entry_summary,
            invoke_seq,
            run_files: runs.into_iter().map(|r| r.path).collect(),
            unreadable_runs,
            legacy_snapshot: legacy.is_some(),
            legacy_error,
            damage: read.damage,
            notes: read.notes,
        })
    }

    /// Inserts the rebuilt row unless one exists by now, and marks it reconstructed; one
    /// transaction. Returns whether it was inserted.
    fn insert_reconstructed(
        &self,
        state: &SessionState,
        summary: &crate::summary::Summary,
        workspace_root: Option<&str>,
        run_files: usize,
        legacy: bool,
    ) -> Result<bool> {
        let id = state.session_id.as_str();
        let meta_json = state.meta.as_ref().map(|m| {
            String::from_utf8_lossy(&crate::compact::compact_json(m.get().as_bytes())).into_owned()
        });
        let conn = self.lock();
        let tx = WriteTx::begin(&conn, &self.db_path, self.options.max_busy_wait)?;
        let err = || db_err(&self.db_path, "write rebuilt session row");
        let inserted = conn
            .execute(
                "INSERT INTO session_state (session_id, updated_at, run_id, invoke_seq, schema_version, meta_json, message_count, last_user_message, workspace_root) \
                 VALUES (?1, ?2, ?3, ?4, 1, ?5, ?6, ?7, ?8) ON CONFLICT(session_id) DO NOTHING",
                params![
                    id,
                    state.updated_at.as_str(),
                    state.run_id,
                    state.invoke_seq,
                    meta_json,
                    i64::try_from(summary.message_count).unwrap_or(i64::MAX),
                    summary.last_user_message,
                    workspace_root,
                ],
            )
            .map_err(err())?
            == 1;
        if inserted {
            conn.execute("DELETE FROM session_files WHERE session_id = ?1", [id])
                .map_err(err())?;
            let fingerprint = self
                .stored_generation(&conn, id)?
                .map_or(0, |g| g.row.cast_signed());
            conn.execute_batch(CREATE_RECONSTRUCTED).map_err(err())?;
            conn.execute(
                "INSERT OR REPLACE INTO session_reconstructed (session_id, reconstructed_at, row_fingerprint, messages, run_files, legacy_snapshot) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    id,
                    Timestamp::now().as_str(),
                    fingerprint,
                    i64::try_from(summary.message_count).unwrap_or(i64::MAX),
                    i64::try_from(run_files).unwrap_or(i64::MAX),
                    i64::from(legacy),
                ],
            )
            .map_err(err())?;
        }
        tx.commit()?;
        drop(conn);
        self.forget(id);
        Ok(inserted)
    }
}

/// Removes the reconstruction mark of `id` (inside the caller's write transaction), when the
/// table exists.
pub(crate) fn forget_reconstruction(conn: &Connection, db_path: &Path, id: &str) -> Result<()> {
    let exists = crate::column::query_int(
        conn,
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'session_reconstructed'",
        [],
    )
    .map_err(db_err(db_path, "read reconstructed rows"))?;
    if exists > 0 {
        conn.execute(
            "DELETE FROM session_reconstructed WHERE session_id = ?1",
            [id],
        )
        .map_err(db_err(db_path, "delete reconstruction mark"))?;
    }
    Ok(())
}

fn skipped(id: &str, path: PathBuf, reason: String) -> Reconstruction {
    Reconstruction {
        session_id: id.to_owned(),
        path,
        outcome: ReconstructionOutcome::Skipped { reason },
        summary: SessionStateSummary {
            session_id: id.to_owned(),
            ..Default::default()
        },
        invoke_seq: None,
        run_files: Vec::new(),
        unreadable_runs: Vec::new(),
        legacy_snapshot: false,
        legacy_error: None,
        damage: Vec::new(),
        notes: Vec::new(),
    }
}

/// Reads one run file for [`RunFacts`]. Damaged lines are skipped (their records are not
/// trusted for the facts); only an unreadable file is an error.
fn read_run_facts(path: &Path) -> std::result::Result<RunFacts, String> {
    let reader = Reader::open_with(
        path,
        ReaderOptions {
            max_line_len: 64 << 20,
            ..ReaderOptions::default()
        },
    )
    .map_err(|e| e.to_string())?;
    let mut facts = RunFacts {
        path: path.to_path_buf(),
        run_id: path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(session_jsonl::layout::parse_run_file_name)
            .map(|(id, _)| id.to_owned())
            .unwrap_or_default(),
        started_at: None,
        last: None,
        max_seq: None,
        workspace_root: None,
    };
    let mut ui_root: Option<String> = None;
    let mut sandbox_root: Option<String> = None;
    let mut cwd: Option<String> = None;
    let mut header_seen = false;
    for item in reader {
        let Item::Record(line) = item.map_err(|e| e.to_string())? else {
            continue;
        };
        let record = line.record();
        if !matches!(record, Record::Header(_))
            && let Some(ts) = record.ts()
            && let Some(t) = ts.parse()
            && facts.last.as_ref().is_none_or(|(l, _)| t >= *l)
        {
            facts.last = Some((t, ts.as_str().to_owned()));
        }
        match record {
            Record::Header(h) if !header_seen => {
                header_seen = true;
                facts.run_id = h.run_id.clone();
                facts.started_at = h.started_at.parse();
                cwd = h.runtime.as_ref().and_then(|r| r.cwd.clone());
                sandbox_root = h.meta.as_ref().and_then(|m| {
                    let v: serde_json::Value = serde_json::from_str(m.get()).ok()?;
                    v.pointer("/runtime_environment/workspace/root")?
                        .as_str()
                        .map(str::to_owned)
                });
            }
            Record::RunStart(s) => {
                if let Some(w) = s
                    .ui_context
                    .as_ref()
                    .and_then(|u| u.workspace_root.clone())
                    .filter(|w| !w.trim().is_empty())
                {
                    ui_root = Some(w);
                }
            }
            Record::LlmRequest(r) => {
                facts.max_seq = Some(facts.max_seq.map_or(r.seq, |m| m.max(r.seq)));
            }
            _ => {}
        }
    }
    facts.workspace_root = ui_root.or(sandbox_root).or(cwd);
    Ok(facts)
}
