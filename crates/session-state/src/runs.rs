//! The run index: our additive `runs` table, filled from the run tree
//! (`<root>/YYYY/MM/DD/<run_id>.jsonl[.zst]`, any writer) and queried without scanning it.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use rusqlite::types::Value;
use rusqlite::{Connection, Row};
use session_jsonl::{Item, Reader, ReaderOptions, list_run_files};
use session_schema::Record;

use crate::db::{NORM_FN, ReadTx, WriteTx, db_err};
use crate::error::{Result, StateError};
use crate::store::StateStore;
use crate::workspace::normalize_workspace_root;

/// Longest [`RunRow::first_input`], in characters.
pub const FIRST_INPUT_CHARS: usize = 200;

/// How a run ended, from its `run.end` record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RunOutcome {
    /// `run.end{outcome:"completed"}`.
    Completed,
    /// `run.end{outcome:"error"}`.
    Error,
    /// `run.end{outcome:"cancelled"}`.
    Cancelled,
    /// No `run.end`: the run is still being written, or its process died. Telling the two
    /// apart is the caller's job: a run written by session-jsonl holds an advisory lock while
    /// open (`session_jsonl::is_locked(&row.path)`); runs of the reference are never locked, so
    /// use [`RunRow::modified_unix_ns`] / [`RunRow::last_ts`] for those.
    Open,
    /// A `run.end` outcome this version does not know (kept verbatim).
    Other(String),
}

impl RunOutcome {
    /// The stored spelling: `completed`, `error`, `cancelled`, `open`, or the unknown value.
    pub fn as_str(&self) -> &str {
        match self {
            RunOutcome::Completed => "completed",
            RunOutcome::Error => "error",
            RunOutcome::Cancelled => "cancelled",
            RunOutcome::Open => "open",
            RunOutcome::Other(s) => s,
        }
    }

    /// Parses [`RunOutcome::as_str`] output.
    pub fn from_stored(s: &str) -> RunOutcome {
        match s {
            "completed" => RunOutcome::Completed,
            "error" => RunOutcome::Error,
            "cancelled" => RunOutcome::Cancelled,
            "open" => RunOutcome::Open,
            other => RunOutcome::Other(other.to_owned()),
        }
    }
}

/// One indexed run file.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunRow {
    /// Run id (header `run_id`, else the file name).
    pub run_id: String,
    /// Session id from the header (else from `run.start`).
    pub session_id: Option<String>,
    /// Absolute path of the file.
    pub path: PathBuf,
    /// Header `started_at` as written.
    pub started_at: Option<String>,
    /// Header `model.provider` (else the first `llm.request.model.provider`).
    pub model_provider: Option<String>,
    /// Header `model.name` (else the first `llm.request.model.name`).
    pub model_name: Option<String>,
    /// Terminal outcome.
    pub outcome: RunOutcome,
    /// Status of the last `run.status` record (`running`, `completed`, `error`, …).
    pub last_status: Option<String>,
    /// Records recovered from the file.
    pub record_count: u64,
    /// `llm.request` records (invocations, retries share one).
    pub invocation_count: u64,
    /// Sum of `usage.input_tokens` over `llm.response` records.
    pub input_tokens: u64,
    /// Sum of `usage.input_cached_tokens`.
    pub cached_input_tokens: u64,
    /// Sum of `usage.input_cache_creation_tokens`.
    pub cache_creation_tokens: u64,
    /// Sum of `usage.output_tokens`.
    pub output_tokens: u64,
    /// Sum of `usage.total_tokens`.
    pub total_tokens: u64,
    /// File size in bytes when indexed (compressed size for `.jsonl.zst`).
    pub file_size: u64,
    /// Modification time when indexed, nanoseconds since the Unix epoch.
    pub modified_unix_ns: i64,
    /// First line of the `run.start` input (images as `[image]`), at most
    /// [`FIRST_INPUT_CHARS`] characters.
    pub first_input: Option<String>,
    /// `run.start.ui_context.workspace_root`, else header `runtime.cwd`.
    pub workspace_root: Option<String>,
    /// Damage reports of the reader (torn tail, corrupt lines, missing header, …).
    pub damage_count: u64,
    /// `ts` of the last record that has one.
    pub last_ts: Option<String>,
    /// Whether the file is an archived `.jsonl.zst`.
    pub compressed: bool,
}

/// What [`StateStore::index_runs`] did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct IndexReport {
    /// Files indexed for the first time.
    pub added: u64,
    /// Files re-read because their size or mtime changed.
    pub updated: u64,
    /// Rows dropped because their file is gone.
    pub removed: u64,
    /// Files skipped because size and mtime are unchanged.
    pub unchanged: u64,
    /// Files read in this pass that had damage, with their damage counts.
    pub damaged: Vec<(PathBuf, u64)>,
    /// Files that could not be read at all (left out of the index), with the error.
    pub failed: Vec<(PathBuf, String)>,
}

/// One difference found by [`StateStore::reindex`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunChange {
    /// A file the index did not have.
    Added(PathBuf),
    /// A row whose file is gone.
    Removed(PathBuf),
    /// A row that differed from the file; the names of the differing columns.
    Changed(PathBuf, Vec<&'static str>),
}

/// What [`StateStore::reindex`] did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ReindexReport {
    /// Rows in the rebuilt index.
    pub total: u64,
    /// Rows identical before and after.
    pub unchanged: u64,
    /// Differences between the old and the rebuilt index, in path order.
    pub changes: Vec<RunChange>,
    /// Files that could not be read at all.
    pub failed: Vec<(PathBuf, String)>,
}

/// Keyset position in a run listing: `(started_at, path)` of the last row returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunCursor {
    /// `started_at` of the last row (empty when the run has none).
    pub started_at: String,
    /// Path of the last row relative to the sessions root.
    pub rel_path: String,
}

impl RunCursor {
    /// Encodes the cursor as one opaque string (`<len>:<rel_path><started_at>`).
    pub fn to_token(&self) -> String {
        format!(
            "{}:{}{}",
            self.rel_path.len(),
            self.rel_path,
            self.started_at
        )
    }

    /// Decodes [`RunCursor::to_token`] output.
    ///
    /// # Errors
    /// [`StateError::InvalidCursor`] when the token is malformed.
    pub fn from_token(token: &str) -> Result<Self> {
        let c = crate::types::ListCursor::from_token(token)?;
        Ok(RunCursor {
            started_at: c.updated_at,
            rel_path: c.session_id,
        })
    }
}

/// Query of [`StateStore::list_runs`]; all filters combine with AND.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunQuery {
    /// Only runs of this session.
    pub session: Option<String>,
    /// Only runs with `started_at >= since` (string comparison of ISO 8601 UTC timestamps).
    pub since: Option<String>,
    /// Only runs with `started_at < until`.
    pub until: Option<String>,
    /// Only runs with this outcome.
    pub outcome: Option<RunOutcome>,
    /// Only runs whose workspace root equals this one after normalisation.
    pub workspace: Option<String>,
    /// Maximum number of rows (`None` = all).
    pub limit: Option<usize>,
    /// Continue after this row.
    pub after: Option<RunCursor>,
}

/// A page of [`StateStore::list_runs`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct RunPage {
    /// Runs, newest `started_at` first.
    pub runs: Vec<RunRow>,
    /// Cursor of the next page; `None` on the last page.
    pub next_cursor: Option<RunCursor>,
}

const RUN_COLUMNS: &str = "path, run_id, session_id, started_at, model_provider, model_name, outcome, last_status, record_count, invocation_count, input_tokens, cached_input_tokens, cache_creation_tokens, output_tokens, total_tokens, file_size, mtime_ns, first_input, workspace_root, damage_count, last_ts, compressed";

/// Names of the compared columns, in [`RUN_COLUMNS`] order.
const RUN_COLUMN_NAMES: [&str; 22] = [
    "path",
    "run_id",
    "session_id",
    "started_at",
    "model_provider",
    "model_name",
    "outcome",
    "last_status",
    "record_count",
    "invocation_count",
    "input_tokens",
    "cached_input_tokens",
    "cache_creation_tokens",
    "output_tokens",
    "total_tokens",
    "file_size",
    "mtime_ns",
    "first_input",
    "workspace_root",
    "damage_count",
    "last_ts",
    "compressed",
];

/// A row as stored (relative path, `started_at` `''` when unknown).
#[derive(Debug, Clone, PartialEq)]
struct StoredRun {
    values: Vec<Value>,
}

fn rel_path(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

fn opt_text(s: &Option<String>) -> Value {
    s.as_ref().map_or(Value::Null, |s| Value::Text(s.clone()))
}

fn to_values(rel: &str, r: &RunRow) -> Vec<Value> {
    vec![
        Value::Text(rel.to_owned()),
        Value::Text(r.run_id.clone()),
        opt_text(&r.session_id),
        Value::Text(r.started_at.clone().unwrap_or_default()),
        opt_text(&r.model_provider),
        opt_text(&r.model_name),
        Value::Text(r.outcome.as_str().to_owned()),
        opt_text(&r.last_status),
        Value::Integer(r.record_count as i64),
        Value::Integer(r.invocation_count as i64),
        Value::Integer(r.input_tokens as i64),
        Value::Integer(r.cached_input_tokens as i64),
        Value::Integer(r.cache_creation_tokens as i64),
        Value::Integer(r.output_tokens as i64),
        Value::Integer(r.total_tokens as i64),
        Value::Integer(r.file_size as i64),
        Value::Integer(r.modified_unix_ns),
        opt_text(&r.first_input),
        opt_text(&r.workspace_root),
        Value::Integer(r.damage_count as i64),
        opt_text(&r.last_ts),
        Value::Integer(i64::from(r.compressed)),
    ]
}

fn row_from_sql(root: &Path, r: &Row<'_>) -> rusqlite::Result<RunRow> {
    let int = |i: usize| -> rusqlite::Result<u64> { Ok(r.get::<_, i64>(i)?.max(0) as u64) };
    let rel: String = r.get(0)?;
    let started: String = r.get(3)?;
    let outcome: String = r.get(6)?;
    Ok(RunRow {
        path: root.join(&rel),
        run_id: r.get(1)?,
        session_id: r.get(2)?,
        started_at: (!started.is_empty()).then_some(started),
        model_provider: r.get(4)?,
        model_name: r.get(5)?,
        outcome: RunOutcome::from_stored(&outcome),
        last_status: r.get(7)?,
        record_count: int(8)?,
        invocation_count: int(9)?,
        input_tokens: int(10)?,
        cached_input_tokens: int(11)?,
        cache_creation_tokens: int(12)?,
        output_tokens: int(13)?,
        total_tokens: int(14)?,
        file_size: int(15)?,
        modified_unix_ns: r.get(16)?,
        first_input: r.get(17)?,
        workspace_root: r.get(18)?,
        damage_count: int(19)?,
        last_ts: r.get(20)?,
        compressed: r.get::<_, i64>(21)? != 0,
    })
}

/// Size and mtime (ns since the epoch) of a file.
fn stat(path: &Path) -> std::io::Result<(u64, i64)> {
    let md = fs::metadata(path)?;
    let mtime = md
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    Ok((md.len(), mtime))
}

/// Reads one run file into a row. `size`/`mtime` are taken before reading, so a file that
/// grows meanwhile is re-read by the next pass.
pub(crate) fn read_run_row(path: &Path, size: u64, mtime: i64, compressed: bool) -> Result<RunRow> {
    let run_err = |e: session_jsonl::JsonlError| StateError::Run {
        path: path.to_path_buf(),
        source: Box::new(e),
    };
    let reader = Reader::open_with(
        path,
        ReaderOptions {
            max_line_len: 64 << 20,
            ..ReaderOptions::default()
        },
    )
    .map_err(run_err)?;
    let file_run_id = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(session_jsonl::layout::parse_run_file_name)
        .map(|(id, _)| id.to_owned())
        .unwrap_or_default();
    let mut row = RunRow {
        run_id: file_run_id,
        session_id: None,
        path: path.to_path_buf(),
        started_at: None,
        model_provider: None,
        model_name: None,
        outcome: RunOutcome::Open,
        last_status: None,
        record_count: 0,
        invocation_count: 0,
        input_tokens: 0,
        cached_input_tokens: 0,
        cache_creation_tokens: 0,
        output_tokens: 0,
        total_tokens: 0,
        file_size: size,
        modified_unix_ns: mtime,
        first_input: None,
        workspace_root: None,
        damage_count: 0,
        last_ts: None,
        compressed,
    };
    let mut header_seen = false;
    let mut header_cwd: Option<String> = None;
    let mut ui_root: Option<String> = None;
    let mut request_model: (Option<String>, Option<String>) = (None, None);
    for item in reader {
        let item = item.map_err(|e| StateError::Run {
            path: path.to_path_buf(),
            source: Box::new(e),
        })?;
        let rec = match item {
            Item::Damage(d) => {
                if !d.kind.record_recovered() || d.kind == session_jsonl::DamageKind::MissingHeader
                {
                    row.damage_count += 1;
                }
                continue;
            }
            Item::Record(r) => r,
        };
        row.record_count += 1;
        let record = rec.record();
        if !matches!(record, Record::Header(_))
            && let Some(ts) = record.ts()
        {
            row.last_ts = Some(ts.as_str().to_owned());
        }
        match record {
            Record::Header(h) if !header_seen => {
                header_seen = true;
                row.run_id = h.run_id.clone();
                row.session_id = h.session_id.clone();
                row.started_at = Some(h.started_at.as_str().to_owned());
                if let Some(m) = &h.model {
                    row.model_provider = m.provider.clone();
                    row.model_name = m.name.clone();
                }
                header_cwd = h.runtime.as_ref().and_then(|r| r.cwd.clone());
            }
            Record::RunStart(s) => {
                if row.session_id.is_none() {
                    row.session_id = s.session_id.clone();
                }
                if row.first_input.is_none() {
                    let text = s.input.display_text();
                    let first = text.lines().next().unwrap_or("");
                    row.first_input = Some(first.chars().take(FIRST_INPUT_CHARS).collect());
                }
                if ui_root.is_none() {
                    ui_root = s
                        .ui_context
                        .as_ref()
                        .and_then(|u| u.workspace_root.clone())
                        .filter(|w| !w.trim().is_empty());
                }
            }
            Record::LlmRequest(r) => {
                row.invocation_count += 1;
                if request_model.0.is_none()
                    && request_model.1.is_none()
                    && let Some(m) = &r.model
                {
                    request_model = (m.provider.clone(), m.name.clone());
                }
            }
            Record::LlmResponse(r) => {
                if let Some(Some(u)) = &r.output.usage {
                    row.input_tokens += u.input_tokens;
                    row.cached_input_tokens += u.input_cached_tokens.flatten().unwrap_or(0);
                    row.cache_creation_tokens +=
                        u.input_cache_creation_tokens.flatten().unwrap_or(0);
                    row.output_tokens += u.output_tokens;
                    row.total_tokens += u.total_tokens;
                }
            }
            Record::RunStatus(s) => row.last_status = Some(s.status.as_str().to_owned()),
            Record::RunEnd(e) => {
                row.outcome = match e.outcome.as_str() {
                    "completed" => RunOutcome::Completed,
                    "error" => RunOutcome::Error,
                    "cancelled" => RunOutcome::Cancelled,
                    other => RunOutcome::Other(other.to_owned()),
                }
            }
            _ => {}
        }
    }
    if row.model_provider.is_none() && row.model_name.is_none() {
        (row.model_provider, row.model_name) = request_model;
    }
    row.workspace_root = ui_root.or(header_cwd);
    Ok(row)
}

/// Every run file with its stat; unreadable files go to `failed`.
struct Scan {
    files: Vec<(PathBuf, String, u64, i64, bool)>,
    failed: Vec<(PathBuf, String)>,
    /// Relative paths (with a trailing `/`) of directories that could not be listed: rows
    /// under them are kept, not treated as removed.
    unlisted: Vec<String>,
}

fn scan_tree(root: &Path) -> Result<Scan> {
    let listing = list_run_files(root).map_err(|e| StateError::Run {
        path: root.to_path_buf(),
        source: Box::new(e),
    })?;
    let mut scan = Scan {
        files: Vec::with_capacity(listing.files.len()),
        failed: Vec::new(),
        unlisted: Vec::new(),
    };
    for skipped in listing.skipped {
        scan.unlisted
            .push(format!("{}/", rel_path(root, &skipped.path)));
        scan.failed
            .push((skipped.path, format!("cannot list: {}", skipped.error)));
    }
    for f in listing.files {
        match stat(&f.path) {
            Ok((size, mtime)) => {
                let rel = rel_path(root, &f.path);
                scan.files.push((f.path, rel, size, mtime, f.compressed));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => scan.failed.push((f.path, format!("cannot stat: {e}"))),
        }
    }
    scan.files.sort_by(|a, b| a.1.cmp(&b.1));
    Ok(scan)
}

fn upsert(conn: &Connection, values: &[Value]) -> rusqlite::Result<()> {
    let placeholders = (1..=values.len())
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut stmt = conn.prepare_cached(&format!(
        "INSERT OR REPLACE INTO runs ({RUN_COLUMNS}) VALUES ({placeholders})"
    ))?;
    stmt.execute(rusqlite::params_from_iter(values.iter()))?;
    Ok(())
}

impl StateStore {
    fn stored_runs(&self, conn: &Connection) -> Result<BTreeMap<String, StoredRun>> {
        let err = db_err(&self.db_path, "read run index");
        let mut stmt = conn
            .prepare(&format!("SELECT {RUN_COLUMNS} FROM runs"))
            .map_err(err)?;
        let rows = stmt
            .query_map([], |r| {
                let values: Vec<Value> = (0..RUN_COLUMN_NAMES.len())
                    .map(|i| r.get::<_, Value>(i))
                    .collect::<rusqlite::Result<_>>()?;
                Ok(values)
            })
            .map_err(db_err(&self.db_path, "read run index"))?;
        let mut out = BTreeMap::new();
        for values in rows {
            let values = values.map_err(db_err(&self.db_path, "read run index"))?;
            if let Value::Text(rel) = &values[0] {
                out.insert(rel.clone(), StoredRun { values });
            }
        }
        Ok(out)
    }

    /// Brings the `runs` table up to date with the run tree: new files are read, files whose
    /// size or mtime changed are re-read, rows of vanished files are dropped, unchanged files
    /// are not opened. Picks up runs of any writer (the reference's too) and `.jsonl.zst`
    /// archives. Reading happens without holding the database lock; the changes are applied in
    /// one transaction.
    ///
    /// # Errors
    /// [`StateError::Run`] when the sessions root cannot be listed; [`StateError::Db`] /
    /// [`StateError::Busy`]. Unreadable single files are reported in
    /// [`IndexReport::failed`], not as errors.
    pub fn index_runs(&self) -> Result<IndexReport> {
        self.index_runs_with_progress(&mut |_, _| {})
    }

    /// [`StateStore::index_runs`] calling `progress(done, total)` after each file considered
    /// (for a progress bar; this crate never prints).
    ///
    /// # Errors
    /// As [`StateStore::index_runs`].
    pub fn index_runs_with_progress(
        &self,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<IndexReport> {
        let scan = scan_tree(&self.root)?;
        let stored = {
            let conn = self.lock();
            let _rtx = ReadTx::begin(&conn, &self.db_path, self.options.max_busy_wait)?;
            self.stored_runs(&conn)?
        };
        let mut report = IndexReport {
            failed: scan.failed,
            ..Default::default()
        };
        let total = scan.files.len() as u64;
        let mut upserts: Vec<Vec<Value>> = Vec::new();
        let mut seen: Vec<&str> = Vec::with_capacity(scan.files.len());
        for (i, (path, rel, size, mtime, compressed)) in scan.files.iter().enumerate() {
            seen.push(rel);
            let known = stored.get(rel.as_str());
            let same = known.is_some_and(|k| {
                k.values[15] == Value::Integer(*size as i64)
                    && k.values[16] == Value::Integer(*mtime)
            });
            if same {
                report.unchanged += 1;
            } else {
                match read_run_row(path, *size, *mtime, *compressed) {
                    Ok(row) => {
                        if row.damage_count > 0 {
                            report.damaged.push((path.clone(), row.damage_count));
                        }
                        if known.is_some() {
                            report.updated += 1;
                        } else {
                            report.added += 1;
                        }
                        upserts.push(to_values(rel, &row));
                    }
                    Err(e) => report.failed.push((path.clone(), e.to_string())),
                }
            }
            progress(i as u64 + 1, total);
        }
        seen.sort_unstable();
        let removed: Vec<&str> = stored
            .keys()
            .map(String::as_str)
            .filter(|k| seen.binary_search(k).is_err())
            .filter(|k| !scan.unlisted.iter().any(|d| k.starts_with(d.as_str())))
            .collect();
        report.removed = removed.len() as u64;
        if !upserts.is_empty() || !removed.is_empty() {
            let conn = self.lock();
            let tx = WriteTx::begin(&conn, &self.db_path, self.options.max_busy_wait)?;
            for values in &upserts {
                upsert(&conn, values).map_err(db_err(&self.db_path, "write run index"))?;
            }
            for rel in &removed {
                conn.execute("DELETE FROM runs WHERE path = ?1", [rel])
                    .map_err(db_err(&self.db_path, "write run index"))?;
            }
            tx.commit()?;
        }
        Ok(report)
    }

    /// Rebuilds the `runs` table from scratch (every file read again, in path order) and
    /// reports every difference from the previous content. The result depends only on the
    /// files and their size/mtime, so two rebuilds of an unchanged tree are identical.
    ///
    /// # Errors
    /// As [`StateStore::index_runs`].
    pub fn reindex(&self) -> Result<ReindexReport> {
        self.reindex_with_progress(&mut |_, _| {})
    }

    /// [`StateStore::reindex`] with a `progress(done, total)` callback.
    ///
    /// # Errors
    /// As [`StateStore::index_runs`].
    pub fn reindex_with_progress(
        &self,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<ReindexReport> {
        let scan = scan_tree(&self.root)?;
        let total = scan.files.len() as u64;
        let mut fresh: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        let mut report = ReindexReport {
            failed: scan.failed,
            ..Default::default()
        };
        for (i, (path, rel, size, mtime, compressed)) in scan.files.iter().enumerate() {
            match read_run_row(path, *size, *mtime, *compressed) {
                Ok(row) => {
                    fresh.insert(rel.clone(), to_values(rel, &row));
                }
                Err(e) => report.failed.push((path.clone(), e.to_string())),
            }
            progress(i as u64 + 1, total);
        }
        let conn = self.lock();
        let tx = WriteTx::begin(&conn, &self.db_path, self.options.max_busy_wait)?;
        let old = self.stored_runs(&conn)?;
        let mut keys: Vec<&String> = old.keys().chain(fresh.keys()).collect();
        keys.sort();
        keys.dedup();
        for key in keys {
            let path = self.root.join(key);
            match (old.get(key), fresh.get(key)) {
                (Some(_), None) => report.changes.push(RunChange::Removed(path)),
                (None, Some(_)) => report.changes.push(RunChange::Added(path)),
                (Some(o), Some(n)) => {
                    let diff: Vec<&'static str> = RUN_COLUMN_NAMES
                        .iter()
                        .zip(o.values.iter().zip(n))
                        .filter(|(_, (a, b))| a != b)
                        .map(|(name, _)| *name)
                        .collect();
                    if diff.is_empty() {
                        report.unchanged += 1;
                    } else {
                        report.changes.push(RunChange::Changed(path, diff));
                    }
                }
                (None, None) => {}
            }
        }
        conn.execute("DELETE FROM runs", [])
            .map_err(db_err(&self.db_path, "clear run index"))?;
        for values in fresh.values() {
            upsert(&conn, values).map_err(db_err(&self.db_path, "write run index"))?;
        }
        tx.commit()?;
        report.total = fresh.len() as u64;
        Ok(report)
    }

    /// Runs of one session from the index, oldest `started_at` first (then path). Does not
    /// scan the tree: call [`StateStore::index_runs`] first to pick up new files.
    ///
    /// # Errors
    /// [`StateError::Db`].
    pub fn runs_for_session(&self, session_id: &str) -> Result<Vec<RunRow>> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {RUN_COLUMNS} FROM runs WHERE session_id = ?1 ORDER BY started_at, path"
            ))
            .map_err(db_err(&self.db_path, "query runs"))?;
        let rows = stmt
            .query_map([session_id], |r| row_from_sql(&self.root, r))
            .map_err(db_err(&self.db_path, "query runs"))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(db_err(&self.db_path, "read run row"))
    }

    /// Runs from the index, newest `started_at` first (then path descending), filtered and
    /// paged with a keyset cursor. Does not scan the tree.
    ///
    /// # Errors
    /// [`StateError::Db`].
    pub fn list_runs(&self, query: &RunQuery) -> Result<RunPage> {
        let mut sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE 1");
        let mut args: Vec<Value> = Vec::new();
        if let Some(s) = &query.session {
            sql.push_str(" AND session_id = ?");
            args.push(Value::Text(s.clone()));
        }
        if let Some(s) = &query.since {
            sql.push_str(" AND started_at >= ?");
            args.push(Value::Text(s.clone()));
        }
        if let Some(s) = &query.until {
            sql.push_str(" AND started_at < ?");
            args.push(Value::Text(s.clone()));
        }
        if let Some(o) = &query.outcome {
            sql.push_str(" AND outcome = ?");
            args.push(Value::Text(o.as_str().to_owned()));
        }
        if let Some(w) = &query.workspace {
            sql.push_str(&format!(" AND {NORM_FN}(workspace_root) = ?"));
            args.push(Value::Text(normalize_workspace_root(w)));
        }
        if let Some(c) = &query.after {
            sql.push_str(" AND (started_at < ? OR (started_at = ? AND path < ?))");
            args.push(Value::Text(c.started_at.clone()));
            args.push(Value::Text(c.started_at.clone()));
            args.push(Value::Text(c.rel_path.clone()));
        }
        sql.push_str(" ORDER BY started_at DESC, path DESC");
        if let Some(l) = query.limit {
            sql.push_str(&format!(" LIMIT {}", l.saturating_add(1)));
        }
        let conn = self.lock();
        let mut stmt = conn
            .prepare(&sql)
            .map_err(db_err(&self.db_path, "query runs"))?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(args.iter()), |r| {
                row_from_sql(&self.root, r)
            })
            .map_err(db_err(&self.db_path, "query runs"))?;
        let mut runs = rows
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(db_err(&self.db_path, "read run row"))?;
        let mut next_cursor = None;
        if let Some(l) = query.limit
            && runs.len() > l
        {
            runs.truncate(l);
            next_cursor = runs.last().map(|r| RunCursor {
                started_at: r.started_at.clone().unwrap_or_default(),
                rel_path: rel_path(&self.root, &r.path),
            });
        }
        Ok(RunPage { runs, next_cursor })
    }
}
