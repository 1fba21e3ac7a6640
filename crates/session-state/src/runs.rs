//! The run index: our additive `runs` table, filled from the run tree
//! (`<root>/YYYY/MM/DD/<run_id>.jsonl[.zst]`, any writer) and queried without scanning it.
//!
//! One row per file. Listings show runs, one per run id:
//!
//! * A file without a `header` record (0 bytes, only NUL bytes or whitespace, garbage, records
//!   without a header) is not a run: its row keeps a [`RunFileDiagnostic`] message (column
//!   `diagnostic`), so it is not read again while it is unchanged, is never listed, and is
//!   reported by [`RunIndex::run_file_diagnostics`].
//! * Several files with one run id (a retried start, a clock jump, a copy, a plain file beside
//!   its archive): the most complete one is listed ([`session_jsonl::rank_files`], the rule
//!   every command uses) and names the others in [`RunRow::other_files`].

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use rusqlite::types::{Value, ValueRef};
use rusqlite::{Connection, Row};

use crate::column::{Cols, ColumnDamage, OwnedValue, TextBytes, owned_row};
use crate::db::{NORM_FN, PassCache, ReadTx, WriteTx, db_err, pass_cache_kib};
use crate::error::{Result, StateError};
use crate::index::RunIndex;
use crate::row::{IndexedRunOutcome, RunRow};
use crate::tree::{self, DateDir, Listed};
use crate::utc::utc_key;
use crate::workspace::normalize_workspace_root;

/// A file under the run tree that is not a run (no `header` record): indexed so that it is
/// not read again while unchanged, never listed, reported by
/// [`RunIndex::run_file_diagnostics`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunFileDiagnostic {
    /// Absolute path of the file.
    pub path: PathBuf,
    /// Its size in bytes when indexed.
    pub file_size: u64,
    /// Why it is not a run, lower case: `empty file (0 bytes)`, `only NUL bytes (4096)`,
    /// `no content but whitespace (3 bytes)`, `no header record: 2 damaged line(s), first
    /// corrupt_line`, `no header record: 5 record(s) without one`.
    pub message: String,
    /// Values of the file's index row that are not what their column should hold (text that
    /// is not UTF-8, a BLOB, a number of the wrong kind), in any of its columns: read as
    /// decoded, or as 0 / empty. Empty for a row the index wrote; `sessions reindex`
    /// ([`RunIndex::reindex`]) rebuilds a damaged row from its file.
    pub column_damage: Vec<ColumnDamage>,
}

/// What [`RunIndex::index_runs`] did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct IndexReport {
    /// Files indexed for the first time.
    pub added: u64,
    /// Files re-read because their size or mtime changed.
    pub updated: u64,
    /// Rows dropped because their file is gone.
    pub removed: u64,
    /// Indexed files known to be unchanged: files of unchanged day directories that are not
    /// watched, plus files looked at whose size and mtime are the indexed ones.
    pub unchanged: u64,
    /// Files read in this pass that had damage, with their damage counts.
    pub damaged: Vec<(PathBuf, u64)>,
    /// Files that could not be read at all (left out of the index, or their previous row
    /// kept), and directories that could not be listed, with the error.
    pub failed: Vec<(PathBuf, String)>,
    /// Day directories listed in this pass: new, changed (modification time differs from the
    /// recorded one) or racy (recorded too soon after their last change: within 2 s for
    /// whole-second timestamps, 100 ms for finer ones).
    pub dirs_listed: u64,
    /// Day directories not listed because their modification time is the recorded one.
    pub dirs_unchanged: u64,
    /// Run files looked at (`lstat`) in this pass: those of listed day directories plus the
    /// watched ones (no `run.end` yet, or a racy timestamp).
    pub files_checked: u64,
    /// Run files opened and read in this pass (new or changed).
    pub files_read: u64,
    /// Of [`IndexReport::files_read`], open runs read on from where the previous pass
    /// stopped (their stored checkpoint) instead of from the start.
    pub files_resumed: u64,
    /// Rows of the index (`runs`, `run_dirs`, `run_watch`) read in this pass that held values
    /// their columns should not (text that is not UTF-8, a BLOB, a number of the wrong
    /// kind). Each such row was dropped; its file is read again in this pass or, when its
    /// directory was not listed, by the next refresh.
    pub column_damage: Vec<ColumnDamage>,
}

/// One difference found by [`RunIndex::reindex`].
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

/// What [`RunIndex::reindex`] did.
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

/// Keyset position in a run listing: `(started_at_utc, path)` of the last row returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunCursor {
    /// [`RunRow::started_at_utc`] of the last row (empty when it has none); the row's
    /// `started_at` as written is accepted too (it is converted the same way).
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

/// Query of [`RunIndex::list_runs`]; all filters combine with AND.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunQuery {
    /// Only runs of this session.
    pub session: Option<String>,
    /// Only runs started at or after this instant (an RFC 3339 timestamp, any offset; compared
    /// with [`RunRow::started_at_utc`] at millisecond precision). Runs whose `started_at` is
    /// missing or unparseable never match a `since` or `until` bound. Text that is not an
    /// RFC 3339 timestamp is compared as given with the canonical UTC strings.
    pub since: Option<String>,
    /// Only runs started before this instant (same forms and rules as `since`).
    pub until: Option<String>,
    /// Only runs with this outcome.
    pub outcome: Option<IndexedRunOutcome>,
    /// Only runs whose workspace root equals this one after normalisation.
    pub workspace: Option<String>,
    /// Maximum number of rows (`None` = all).
    pub limit: Option<usize>,
    /// Continue after this row.
    pub after: Option<RunCursor>,
}

/// A page of [`RunIndex::list_runs`].
///
/// Order: newest [`RunRow::started_at_utc`] first (then path descending). Runs whose
/// `started_at` is missing or unparseable have no place in time: they come after every dated
/// run (as if oldest), in path order descending.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct RunPage {
    /// Runs, newest `started_at` first.
    pub runs: Vec<RunRow>,
    /// Cursor of the next page; `None` on the last page.
    pub next_cursor: Option<RunCursor>,
}

pub(crate) const RUN_COLUMNS: &str = "path, run_id, session_id, started_at, model_provider, model_name, outcome, last_status, record_count, invocation_count, input_tokens, cached_input_tokens, cache_creation_tokens, output_tokens, total_tokens, file_size, mtime_ns, first_input, workspace_root, damage_count, last_ts, compressed, started_at_utc, diagnostic, partial";

/// Number of columns of a `runs` row ([`RUN_COLUMNS`]).
const RUN_COLUMN_COUNT: usize = 25;

/// Names of the compared columns, in [`RUN_COLUMNS`] order.
const RUN_COLUMN_NAMES: [&str; RUN_COLUMN_COUNT] = [
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
    "started_at_utc",
    "diagnostic",
    "partial",
];

/// A row as stored (relative path, `started_at` `''` when unknown), every value as it is.
#[derive(Debug, Clone, PartialEq)]
struct StoredRun {
    values: Vec<OwnedValue>,
    rowid: i64,
}

/// The rows of `runs` as a rebuild reads them.
struct StoredRuns {
    /// By key (the path as decoded: keys that are not text, or not UTF-8, match no file).
    by_key: BTreeMap<String, StoredRun>,
    /// `rowid`s of rows whose decoded key another row has too (all but the last read).
    shadowed: Vec<i64>,
}

impl StoredRun {
    /// Whether the stored row holds exactly the values of `new` (same values, same types):
    /// then a rebuild leaves it as it is.
    fn holds(&self, new: &[ValueRef<'_>; RUN_COLUMN_COUNT]) -> bool {
        self.values.len() == RUN_COLUMN_COUNT
            && self.values.iter().zip(new).all(|(a, b)| a.as_ref() == *b)
    }

    /// The names of the columns whose stored values differ from `new` (a row about to be
    /// stored, [`run_refs`]); what a partial row (stored or new) does not claim is no
    /// difference.
    fn differing_columns(&self, new: &[ValueRef<'_>; RUN_COLUMN_COUNT]) -> Vec<&'static str> {
        let new_partial = matches!(new.last(), Some(ValueRef::Integer(p)) if *p != 0);
        let partial = self.is_partial() || new_partial;
        RUN_COLUMN_NAMES
            .iter()
            .zip(self.values.iter().zip(new))
            .filter(|(name, _)| !(partial && crate::partial::UNCLAIMED_COLUMNS.contains(name)))
            .filter(|(_, (a, b))| a.as_ref() != **b)
            .map(|(name, _)| *name)
            .collect()
    }

    /// Whether the stored row was read bounded (`runs.partial` other than 0).
    fn is_partial(&self) -> bool {
        self.values
            .get(RUN_COLUMN_NAMES.len() - 1)
            .and_then(|v| crate::column::int_of(v.as_ref()))
            .is_some_and(|p| p != 0)
    }
}

pub(crate) fn rel_path(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

/// A nullable text value, borrowed.
fn opt_text(s: &Option<String>) -> ValueRef<'_> {
    s.as_deref()
        .map_or(ValueRef::Null, |s| ValueRef::Text(s.as_bytes()))
}

/// The values of the `runs` row of `r` stored at `rel` ([`RUN_COLUMNS`] order), borrowed
/// from the row: what [`RunWriter`] binds and a rebuild compares, without a copy.
pub(crate) fn run_refs<'a>(
    rel: &'a str,
    r: &'a RunRow,
    diagnostic: Option<&'a str>,
) -> [ValueRef<'a>; RUN_COLUMN_COUNT] {
    let text = |s: &'a str| ValueRef::Text(s.as_bytes());
    [
        text(rel),
        text(&r.run_id),
        opt_text(&r.session_id),
        text(r.started_at.as_deref().unwrap_or_default()),
        opt_text(&r.model_provider),
        opt_text(&r.model_name),
        text(r.outcome.as_str()),
        opt_text(&r.last_status),
        sql_int(r.record_count),
        sql_int(r.invocation_count),
        sql_int(r.input_tokens),
        sql_int(r.cached_input_tokens),
        sql_int(r.cache_creation_tokens),
        sql_int(r.output_tokens),
        sql_int(r.total_tokens),
        sql_int(r.file_size),
        ValueRef::Integer(r.modified_unix_ns),
        opt_text(&r.first_input),
        opt_text(&r.workspace_root),
        sql_int(r.damage_count),
        opt_text(&r.last_ts),
        ValueRef::Integer(i64::from(r.compressed)),
        text(r.started_at_utc.as_deref().unwrap_or_default()),
        diagnostic.map_or(ValueRef::Null, text),
        ValueRef::Integer(crate::partial::partial_column(r)),
    ]
}

/// Positions in [`RUN_COLUMNS`] of the values the running totals read.
const TOTALS_COLUMNS: [usize; 10] = [22, 4, 5, 2, 6, 9, 10, 11, 13, 14];

/// The values of a row ([`run_refs`]) that the running totals read.
fn totals_of<'a>(values: &[ValueRef<'a>; RUN_COLUMN_COUNT]) -> crate::running_totals::TotalsOf<'a> {
    let v = TOTALS_COLUMNS.map(|i| values[i]);
    crate::running_totals::TotalsOf {
        started_at_utc: v[0],
        model_provider: v[1],
        model_name: v[2],
        session_id: v[3],
        outcome: v[4],
        counts: [v[5], v[6], v[7], v[8], v[9]],
    }
}

/// The values of the `runs` row of `r` stored at `rel`, owned ([`run_refs`]).
pub(crate) fn to_values(rel: &str, r: &RunRow, diagnostic: Option<&str>) -> Vec<Value> {
    run_refs(rel, r, diagnostic)
        .into_iter()
        .map(|v| match v {
            ValueRef::Null => Value::Null,
            ValueRef::Integer(i) => Value::Integer(i),
            ValueRef::Real(f) => Value::Real(f),
            ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
            ValueRef::Blob(b) => Value::Blob(b.to_vec()),
        })
        .collect()
}

/// A row of the index as a [`RunRow`]; values that are not what their column should hold
/// are read as decoded (text), or as 0 / `None`, and reported in [`RunRow::column_damage`].
pub(crate) fn row_from_sql(root: &Path, r: &Row<'_>) -> rusqlite::Result<RunRow> {
    Ok(row_and_diagnostic_from_sql(root, r)?.0)
}

/// As [`row_from_sql`], with the row's `diagnostic` column (why the file is not a run; `None`
/// for a run), whose damage is reported in [`RunRow::column_damage`] too.
fn row_and_diagnostic_from_sql(
    root: &Path,
    r: &Row<'_>,
) -> rusqlite::Result<(RunRow, Option<String>)> {
    let mut c = Cols::new(r, "runs", &RUN_COLUMN_NAMES)?;
    let n = |c: &mut Cols<'_, '_>, i: usize| -> rusqlite::Result<u64> {
        Ok(c.count_required(i)?.unwrap_or(0))
    };
    let rel = c.text_or_empty(0)?;
    let started = c.text_or_empty(3)?;
    let outcome = c.text_or_empty(6)?;
    let mut row = RunRow {
        path: root.join(&rel),
        run_id: c.text_or_empty(1)?,
        session_id: c.text(2)?,
        started_at: (!started.is_empty()).then_some(started),
        model_provider: c.text(4)?,
        model_name: c.text(5)?,
        outcome: IndexedRunOutcome::from_stored(&outcome),
        last_status: c.text(7)?,
        record_count: n(&mut c, 8)?,
        invocation_count: n(&mut c, 9)?,
        input_tokens: n(&mut c, 10)?,
        cached_input_tokens: n(&mut c, 11)?,
        cache_creation_tokens: n(&mut c, 12)?,
        output_tokens: n(&mut c, 13)?,
        total_tokens: n(&mut c, 14)?,
        file_size: n(&mut c, 15)?,
        modified_unix_ns: c.int_required(16)?.unwrap_or(0),
        first_input: c.text(17)?,
        workspace_root: c.text(18)?,
        damage_count: n(&mut c, 19)?,
        last_ts: c.text(20)?,
        compressed: c.int_required(21)?.is_some_and(|v| v != 0),
        started_at_utc: c.text(22)?.filter(|s| !s.is_empty()),
        partial: false,
        complete_on_read: false,
        column_damage: Vec::new(),
        other_files: Vec::new(),
    };
    let diagnostic = c.text(23)?;
    crate::partial::set_partial(&mut row, c.count_required(24)?.unwrap_or(0));
    row.column_damage = c.finish();
    Ok((row, diagnostic))
}

/// The ranking facts of an indexed run file.
fn completeness(row: &RunRow) -> session_jsonl::Completeness {
    session_jsonl::Completeness::new(
        &row.path,
        &row.run_id,
        row.outcome != IndexedRunOutcome::Open,
        row.record_count,
        row.file_size,
    )
}

/// A count or size from a file as an SQLite integer: values above `i64::MAX` are stored as
/// `i64::MAX` (the token sums are clamped before, and the clamp counted as damage).
fn sql_int(v: u64) -> ValueRef<'static> {
    ValueRef::Integer(i64::try_from(v).unwrap_or(i64::MAX))
}

/// What the refresh needs of a stored row: size, mtime and whether the run may still grow.
#[derive(Debug, Clone, Copy)]
struct Known {
    size: i64,
    mtime: i64,
    open: bool,
}

impl Known {
    fn matches(&self, f: &Listed) -> bool {
        self.size == i64::try_from(f.size).unwrap_or(i64::MAX) && self.mtime == f.mtime_ns
    }
}

/// A `run_dirs` row: one date directory as last seen.
#[derive(Debug, Clone, Copy)]
struct DirRow {
    depth: i64,
    mtime_ns: i64,
    scanned_ns: i64,
    run_count: i64,
}

/// What a refresh reads from the database before it touches the tree.
#[derive(Default)]
struct Snapshot {
    /// `run_dirs`, by relative path.
    dirs: BTreeMap<String, DirRow>,
    /// Distinct directory parts (`YYYY/MM/DD/`) of the indexed paths.
    prefixes: BTreeSet<String>,
    /// `run_watch` with the stored row of each watched path (`None`: the row is gone).
    watch: BTreeMap<String, Option<Known>>,
    /// Stored rows under the day directories that are listed again.
    relisted: BTreeMap<String, Known>,
    /// Rows read that held unusable values: dropped by the refresh.
    damaged: Vec<DamagedRow>,
    /// `run_resume`: where the reading of each open run stopped.
    checkpoints: BTreeMap<String, String>,
    /// Whether `runs` had no row: this refresh is a first build.
    runs_empty: bool,
}

/// A row of the index that holds values its columns should not (see
/// [`IndexReport::column_damage`]): the refresh drops it (by `rowid`, which finds it whatever
/// its key holds) and lists its day directory again on the next pass.
struct DamagedRow {
    table: &'static str,
    rowid: i64,
    /// Day directory to list again (the row's path, when it is readable).
    dir: Option<String>,
    damage: Vec<ColumnDamage>,
}

/// A file to compare with its row, and to read when it changed.
struct Candidate {
    listed: Listed,
    known: Option<Known>,
    watched: bool,
}

/// The `rowid` selected as column `i` (always an integer).
fn rowid_at(c: &Cols<'_, '_>, i: usize) -> rusqlite::Result<i64> {
    Ok(crate::column::int_of(c.raw(i)?).unwrap_or(0))
}

fn read_dirs(
    conn: &Connection,
    damaged: &mut Vec<DamagedRow>,
) -> rusqlite::Result<BTreeMap<String, DirRow>> {
    const NAMES: [&str; 6] = [
        "path",
        "depth",
        "mtime_ns",
        "scanned_ns",
        "run_count",
        "rowid",
    ];
    let mut stmt = conn.prepare_cached(
        "SELECT path, depth, mtime_ns, scanned_ns, run_count, rowid FROM run_dirs",
    )?;
    let mut rows = stmt.query([])?;
    let mut out = BTreeMap::new();
    while let Some(r) = rows.next()? {
        let mut c = Cols::new(r, "run_dirs", &NAMES)?;
        let path = c.text_or_empty(0)?;
        let row = DirRow {
            depth: c.int_required(1)?.unwrap_or(0),
            mtime_ns: c.int_required(2)?.unwrap_or(0),
            scanned_ns: c.int_required(3)?.unwrap_or(0),
            run_count: c.int_required(4)?.unwrap_or(0),
        };
        let rowid = rowid_at(&c, 5)?;
        if c.is_damaged() {
            damaged.push(DamagedRow {
                table: "run_dirs",
                rowid,
                dir: None,
                damage: c.finish(),
            });
        } else {
            out.insert(path, row);
        }
    }
    Ok(out)
}

/// The directory part of a stored path as bytes, and the smallest key after every key that
/// starts with it (so that a scan of the primary key makes progress whatever the bytes are).
fn prefix_and_next(path: &[u8]) -> (&[u8], Vec<u8>) {
    let prefix = match path.iter().rposition(|&b| b == b'/') {
        Some(i) => &path[..=i],
        None => path,
    };
    let mut next = prefix.to_vec();
    while let Some(last) = next.pop() {
        if last < 0xFF {
            next.push(last + 1);
            return (prefix, next);
        }
    }
    let mut next = path.to_vec();
    next.push(0);
    (prefix, next)
}

/// The distinct directory parts of `runs.path`, found by jumping over each directory's keys in
/// the primary-key index: one lookup per directory, not one per row. Paths that are not UTF-8
/// text (or not text at all) are reported as damaged rows.
fn read_prefixes(
    conn: &Connection,
    damaged: &mut Vec<DamagedRow>,
) -> rusqlite::Result<BTreeSet<String>> {
    const NAMES: [&str; 2] = ["path", "rowid"];
    let mut stmt =
        conn.prepare_cached("SELECT path, rowid FROM runs WHERE path >= ?1 ORDER BY path LIMIT 1")?;
    let mut out = BTreeSet::new();
    let mut from: Vec<u8> = Vec::new();
    loop {
        let mut rows = stmt.query([TextBytes(&from)])?;
        let Some(r) = rows.next()? else { break };
        let raw = owned_row(r, 2)?;
        let Some(OwnedValue::Text(path)) = raw.first() else {
            // Only TEXT keys are found from a TEXT bound (BLOBs sort after all of them).
            break;
        };
        let (prefix, next) = prefix_and_next(path);
        match (std::str::from_utf8(prefix), std::str::from_utf8(path)) {
            (Ok(p), Ok(_)) => {
                out.insert(p.to_owned());
            }
            _ => {
                let mut c = Cols::new(r, "runs", &NAMES)?;
                c.text(0)?;
                let rowid = rowid_at(&c, 1)?;
                damaged.push(DamagedRow {
                    table: "runs",
                    rowid,
                    dir: std::str::from_utf8(prefix).ok().map(str::to_owned),
                    damage: c.finish(),
                });
            }
        }
        from = next;
    }
    // NULL and BLOB keys, below and above every TEXT key of the index.
    let mut stmt =
        conn.prepare_cached("SELECT path, rowid FROM runs WHERE path IS NULL OR path >= x''")?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        let mut c = Cols::new(r, "runs", &NAMES)?;
        c.text_or_empty(0)?;
        let rowid = rowid_at(&c, 1)?;
        damaged.push(DamagedRow {
            table: "runs",
            rowid,
            dir: None,
            damage: c.finish(),
        });
    }
    Ok(out)
}

/// Size, mtime and outcome of a stored run row (columns 1–3 of `c`), or `None` when one of
/// them is unusable (reported in `c`).
fn known_of(c: &mut Cols<'_, '_>) -> rusqlite::Result<Option<Known>> {
    let size = c.int_required(1)?;
    let mtime = c.int_required(2)?;
    let outcome = c.text_or_empty(3)?;
    Ok(match (size, mtime) {
        (Some(size), Some(mtime)) if !c.is_damaged() => Some(Known {
            size,
            mtime,
            open: outcome == IndexedRunOutcome::Open.as_str(),
        }),
        _ => None,
    })
}

fn read_watch(
    conn: &Connection,
    damaged: &mut Vec<DamagedRow>,
) -> rusqlite::Result<BTreeMap<String, Option<Known>>> {
    const WATCH: [&str; 1] = ["path"];
    const RUNS: [&str; 4] = ["path", "file_size", "mtime_ns", "outcome"];
    let mut stmt = conn.prepare_cached(
        "SELECT w.path, r.file_size, r.mtime_ns, r.outcome, w.rowid, r.rowid \
         FROM run_watch w LEFT JOIN runs r ON r.path = w.path",
    )?;
    let mut rows = stmt.query([])?;
    let mut out = BTreeMap::new();
    while let Some(r) = rows.next()? {
        let mut w = Cols::new(r, "run_watch", &WATCH)?;
        let path = w.text_or_empty(0)?;
        let watch_rowid = rowid_at(&w, 4)?;
        if w.is_damaged() {
            damaged.push(DamagedRow {
                table: "run_watch",
                rowid: watch_rowid,
                dir: None,
                damage: w.finish(),
            });
            continue;
        }
        let mut c = Cols::new(r, "runs", &RUNS)?;
        let known = match c.raw(5)? {
            ValueRef::Null => None,
            _ => {
                let known = known_of(&mut c)?;
                if known.is_none() {
                    damaged.push(DamagedRow {
                        table: "runs",
                        rowid: rowid_at(&c, 5)?,
                        dir: Some(tree::parent_rel(&path).to_owned()),
                        damage: c.finish(),
                    });
                    damaged.push(DamagedRow {
                        table: "run_watch",
                        rowid: watch_rowid,
                        dir: None,
                        damage: Vec::new(),
                    });
                    continue;
                }
                known
            }
        };
        out.insert(path, known);
    }
    Ok(out)
}

fn read_prefix_rows(
    conn: &Connection,
    prefix: &str,
    out: &mut BTreeMap<String, Known>,
    damaged: &mut Vec<DamagedRow>,
) -> rusqlite::Result<()> {
    const NAMES: [&str; 5] = ["path", "file_size", "mtime_ns", "outcome", "rowid"];
    let mut stmt = conn.prepare_cached(
        "SELECT path, file_size, mtime_ns, outcome, rowid FROM runs WHERE path >= ?1 AND path < ?2",
    )?;
    let mut rows = stmt.query([prefix, tree::prefix_end(prefix).as_str()])?;
    while let Some(r) = rows.next()? {
        let mut c = Cols::new(r, "runs", &NAMES)?;
        let path = c.text_or_empty(0)?;
        match known_of(&mut c)? {
            Some(known) => {
                out.insert(path, known);
            }
            None => damaged.push(DamagedRow {
                table: "runs",
                rowid: rowid_at(&c, 4)?,
                dir: None,
                damage: c.finish(),
            }),
        }
    }
    Ok(())
}

/// Whether a run file must be looked at again on the next refresh although its directory did
/// not change: the run has no `run.end` yet (it may still grow), its timestamp was racy when
/// it was looked at, or it changed while it was being read.
fn keep_watching(open: bool, f: &Listed, reread_changed: bool) -> bool {
    open || tree::racy(f.mtime_ns, f.looked_ns) || reread_changed
}

fn upsert_dir(conn: &Connection, rel: &str, d: &DirRow) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT OR REPLACE INTO run_dirs (path, depth, mtime_ns, scanned_ns, run_count) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(rusqlite::params![
        rel,
        d.depth,
        d.mtime_ns,
        d.scanned_ns,
        d.run_count
    ])?;
    Ok(())
}

fn dir_row(d: &DateDir, run_count: usize) -> DirRow {
    DirRow {
        depth: i64::from(d.depth),
        mtime_ns: d.mtime_ns,
        scanned_ns: d.looked_ns,
        run_count: i64::try_from(run_count).unwrap_or(i64::MAX),
    }
}

/// The statement that stores one row of `runs` (values in [`RUN_COLUMNS`] order).
pub(crate) static UPSERT_RUN: LazyLock<String> = LazyLock::new(|| {
    let placeholders = (1..=RUN_COLUMN_COUNT)
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!("INSERT OR REPLACE INTO runs ({RUN_COLUMNS}) VALUES ({placeholders})")
});

/// Stores one row of `runs` given as owned values ([`to_values`]).
pub(crate) fn upsert(conn: &Connection, values: &[Value]) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(&UPSERT_RUN)?;
    stmt.execute(rusqlite::params_from_iter(values.iter()))?;
    Ok(())
}

/// What the `runs` writers ([`RunWriter`]) of this thread did, counted for the cost tests:
/// statements prepared, rows written (counted as each is written) and the SQLite VM steps of
/// those statements (each index a row goes into adds its own steps; counted when the writer
/// is dropped).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct WriteCost {
    pub(crate) statements: u64,
    pub(crate) rows: u64,
    pub(crate) vm_steps: u64,
}

thread_local! {
    static WRITE_COST: std::cell::Cell<WriteCost> = const {
        std::cell::Cell::new(WriteCost { statements: 0, rows: 0, vm_steps: 0 })
    };
}

/// The cost of the `runs` writes of this thread since the last call, and reset.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn take_write_cost() -> WriteCost {
    WRITE_COST.with(|c| c.replace(WriteCost::default()))
}

/// The writer of a pass's `runs` rows: one statement, prepared once per pass, each row's
/// values bound from its [`RunRow`] as they are ([`run_refs`]: no owned copy, no SQL text
/// built per row).
pub(crate) struct RunWriter<'c> {
    stmt: rusqlite::CachedStatement<'c>,
}

impl<'c> RunWriter<'c> {
    /// Prepares the statement (or takes it from the connection's cache).
    pub(crate) fn new(conn: &'c Connection) -> rusqlite::Result<RunWriter<'c>> {
        let stmt = conn.prepare_cached(&UPSERT_RUN)?;
        // Steps of earlier uses of the cached statement are not this writer's.
        stmt.reset_status(rusqlite::StatementStatus::VmStep);
        WRITE_COST.with(|c| {
            let mut cost = c.get();
            cost.statements += 1;
            c.set(cost);
        });
        Ok(RunWriter { stmt })
    }

    /// Stores the row of `row` at `rel` (replacing a row at the same path).
    pub(crate) fn write(
        &mut self,
        rel: &str,
        row: &RunRow,
        diagnostic: Option<&str>,
    ) -> rusqlite::Result<()> {
        self.write_values(&run_refs(rel, row, diagnostic))
    }

    /// [`RunWriter::write`], the row also added to `totals` when it is a run (no
    /// `diagnostic`) and the fold is summing ([`crate::running_totals::Fold::begin`]).
    pub(crate) fn write_summed(
        &mut self,
        rel: &str,
        row: &RunRow,
        diagnostic: Option<&str>,
        totals: &mut crate::running_totals::Fold,
    ) -> rusqlite::Result<()> {
        let values = run_refs(rel, row, diagnostic);
        self.write_values(&values)?;
        if diagnostic.is_none() && totals.is_folding() {
            totals.add(&totals_of(&values));
        }
        Ok(())
    }

    /// Stores a row given as its values ([`run_refs`]).
    fn write_values(&mut self, values: &[ValueRef<'_>; RUN_COLUMN_COUNT]) -> rusqlite::Result<()> {
        for (i, v) in values.iter().enumerate() {
            self.stmt
                .raw_bind_parameter(i + 1, rusqlite::types::ToSqlOutput::Borrowed(*v))?;
        }
        self.stmt.raw_execute()?;
        // Counted as it is written: a pass that writes while it reads shows its rows written
        // at each file taken.
        WRITE_COST.with(|c| {
            let mut cost = c.get();
            cost.rows += 1;
            c.set(cost);
        });
        Ok(())
    }
}

impl Drop for RunWriter<'_> {
    fn drop(&mut self) {
        let steps =
            u64::try_from(self.stmt.reset_status(rusqlite::StatementStatus::VmStep)).unwrap_or(0);
        WRITE_COST.with(|c| {
            let mut cost = c.get();
            cost.vm_steps += steps;
            c.set(cost);
        });
    }
}

/// Fewest rows written into an empty `runs` table for which its secondary indexes are
/// dropped and built after the rows ([`drop_run_indexes`]); below it the statements that
/// drop and create them cost about what they save.
const INDEX_REBUILD_ROWS: usize = 32;

/// The secondary indexes of `runs` (`CREATE INDEX` statements as stored, the primary key's
/// excepted) dropped, for a write of many rows into a table that had none: each index is
/// then built once from the sorted rows ([`create_run_indexes`]) instead of taking one
/// insertion per row in key order. Run inside the pass's write transaction, with the
/// re-creation: a pass that does not commit leaves the indexes as they were.
///
/// Partial indexes (`runs_not_runs`, `runs_partial`: a `WHERE` that few rows meet) are
/// kept: a row outside them costs its insert only the test of the condition, where building
/// one again reads every row of the table.
fn drop_run_indexes(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    const OF_RUNS: &str = "FROM sqlite_master AS m WHERE type = 'index' AND tbl_name = 'runs' \
                           AND sql IS NOT NULL AND NOT EXISTS (SELECT 1 FROM \
                           pragma_index_list('runs') AS l WHERE l.name = m.name AND l.partial) \
                           ORDER BY name";
    let names = crate::column::query_texts(conn, &format!("SELECT name {OF_RUNS}"), [], 0)?;
    let sqls = crate::column::query_texts(conn, &format!("SELECT sql {OF_RUNS}"), [], 0)?;
    for name in &names {
        conn.execute_batch(&format!("DROP INDEX \"{}\";", name.replace('"', "\"\"")))?;
    }
    Ok(sqls)
}

/// Creates again the indexes [`drop_run_indexes`] dropped.
fn create_run_indexes(conn: &Connection, sqls: &[String]) -> rusqlite::Result<()> {
    for sql in sqls {
        conn.execute_batch(sql)?;
    }
    Ok(())
}

/// Runs `write` (rows written into `runs`), with `rebuild` between [`drop_run_indexes`] and
/// [`create_run_indexes`]: the secondary indexes built once after the rows.
fn with_indexes_rebuilt(
    conn: &Connection,
    rebuild: bool,
    write: impl FnOnce() -> rusqlite::Result<()>,
) -> rusqlite::Result<()> {
    let indexes = if rebuild {
        drop_run_indexes(conn)?
    } else {
        Vec::new()
    };
    write()?;
    create_run_indexes(conn, &indexes)
}

/// Reads a rebuild's workers may be ahead of the one being taken (other passes:
/// [`crate::read_pool::WINDOW`], 256). Before a rebuild takes its first read it reads every
/// stored row of `runs` to compare (`stored_runs`: ~0.4 s for 100k rows here); with the
/// usual window the workers stopped after 256 files and waited that long. A read waiting is
/// one row (~1 KB), so the window costs at most ~64 MiB, next to the stored rows the pass
/// holds anyway. Measured on a 100k-run store (`reindex`, eight interleaved rounds): 1.44–1.79
/// s, median 1.70 s with 256; 1.40–1.65 s, median 1.50 s with 65,536 (maximum RSS 295 →
/// 325 MB); 1.34–1.77 s, median 1.55 s with no limit.
const REINDEX_WINDOW: usize = 65_536;

/// Whether `runs` has no row.
fn runs_empty(conn: &Connection) -> rusqlite::Result<bool> {
    Ok(crate::column::query_int(conn, "SELECT NOT EXISTS (SELECT 1 FROM runs)", [])? == 1)
}

/// Whether a refresh that reads `to_read` files takes the write transaction before it reads
/// them and writes each row as its read is taken, so that the writing overlaps the reading:
/// a first build (`runs` had no row) of at least [`INDEX_REBUILD_ROWS`] files, or a catch-up
/// of at least [`crate::running_totals::BULK_ROWS`] files. Any other refresh reads without
/// the lock and writes its changes afterwards, holding the lock only for that.
fn writes_while_reading(runs_empty: bool, to_read: usize) -> bool {
    to_read >= crate::running_totals::BULK_ROWS || (runs_empty && to_read >= INDEX_REBUILD_ROWS)
}

/// What a refresh goes through while it takes its candidates: the reads, the snapshot they
/// are compared with, and what it reports and changes.
struct Pass<'a> {
    snap: &'a Snapshot,
    reads: &'a mut crate::read_pool::RefreshReads,
    report: &'a mut IndexReport,
    changes: &'a mut Changes,
    failed_dirs: &'a mut BTreeSet<String>,
}

impl Pass<'_> {
    /// Compares candidate `i` (of the pass's list) with its stored row and, when it changed,
    /// takes its read: counts it in the report, records its watch entry and checkpoint
    /// changes, and returns the row to store with its diagnostic (`None`: the stored row
    /// stands, or the file could not be read).
    fn take(&mut self, i: usize, c: &Candidate) -> Option<(RunRow, Option<String>)> {
        let mut f = &c.listed;
        let seen_as;
        let mut upsert = None;
        let open = if let Some(k) = c.known.filter(|k| k.matches(f)) {
            self.report.unchanged += 1;
            Some((k.open, false))
        } else {
            // An open run that grew goes on from where the last pass stopped.
            let stored = c
                .known
                .and_then(|_| self.snap.checkpoints.get(&f.rel))
                .map(String::as_str);
            let (read, moved, seen) = self.reads.take(i, f, stored);
            if let Some(seen) = seen {
                // Listed by name only: as its reader's `fstat` showed it.
                seen_as = f.seen_as(seen);
                f = &seen_as;
            }
            match read {
                Ok(crate::resume::RowRead {
                    row,
                    diagnostic,
                    checkpoint,
                    resumed,
                    ..
                }) => {
                    if checkpoint.is_some() || self.snap.checkpoints.contains_key(&f.rel) {
                        self.changes.checkpoints.push((f.rel.clone(), checkpoint));
                    }
                    self.report.files_resumed += u64::from(resumed);
                    if row.damage_count > 0 {
                        self.report.damaged.push((f.path.clone(), row.damage_count));
                    }
                    if c.known.is_some() {
                        self.report.updated += 1;
                    } else {
                        self.report.added += 1;
                    }
                    self.report.files_read += 1;
                    let open = row.outcome == IndexedRunOutcome::Open;
                    upsert = Some((row, diagnostic));
                    Some((open, !open && moved))
                }
                Err(e) => {
                    self.report.failed.push((f.path.clone(), e.to_string()));
                    self.failed_dirs.insert(tree::parent_rel(&f.rel).to_owned());
                    None
                }
            }
        };
        match open {
            Some((open, moved)) => {
                let want = keep_watching(open, f, moved);
                if want && !c.watched {
                    self.changes.watch_add.push(f.rel.clone());
                } else if !want && c.watched {
                    self.changes.watch_drop.push(f.rel.clone());
                }
            }
            // Unreadable: looked at again next time (its directory or its watch entry).
            None if !c.watched && c.known.is_some() => {
                self.changes.watch_add.push(f.rel.clone());
            }
            None => {}
        }
        upsert
    }

    /// Records the day directories listed (with their number of files), once every file was
    /// taken: those with a file that could not be read or listed are dropped instead, so the
    /// next refresh lists them again.
    fn record_dirs(&mut self, listed: Vec<(&DateDir, usize)>) {
        for (d, n) in listed {
            if self.failed_dirs.contains(&d.rel) {
                self.changes.dir_deletes.push(d.rel.clone());
            } else {
                self.changes
                    .dir_upserts
                    .push((d.rel.clone(), dir_row(d, n)));
            }
        }
    }
}

/// Every change a refresh applies, in one transaction.
#[derive(Default)]
struct Changes {
    /// Damaged rows, by table and `rowid` (dropped first).
    drop_rows: Vec<(&'static str, i64)>,
    /// Rows to store: relative path, row, diagnostic.
    upserts: Vec<(String, RunRow, Option<String>)>,
    removed: Vec<String>,
    /// Directories (relative, trailing `/`) whose rows all go.
    vanished: Vec<String>,
    dir_upserts: Vec<(String, DirRow)>,
    dir_deletes: Vec<String>,
    /// `run_dirs.run_count` decrements for files that vanished from unchanged directories.
    dir_shrinks: BTreeMap<String, i64>,
    watch_add: Vec<String>,
    watch_drop: Vec<String>,
    /// `run_resume` rows to store (`Some`) or drop (`None`).
    checkpoints: Vec<(String, Option<String>)>,
}

impl Changes {
    fn is_empty(&self) -> bool {
        self.drop_rows.is_empty()
            && self.upserts.is_empty()
            && self.removed.is_empty()
            && self.vanished.is_empty()
            && self.dir_upserts.is_empty()
            && self.dir_deletes.is_empty()
            && self.dir_shrinks.is_empty()
            && self.watch_add.is_empty()
            && self.watch_drop.is_empty()
            && self.checkpoints.is_empty()
    }

    /// Applies the changes; returns the number of run rows deleted. With `rebuild_indexes`
    /// (rows written into an empty `runs` table) the secondary indexes of `runs` are built
    /// once after the rows ([`drop_run_indexes`]).
    fn apply(&self, conn: &Connection, rebuild_indexes: bool) -> rusqlite::Result<u64> {
        self.drop_damaged(conn)?;
        with_indexes_rebuilt(conn, rebuild_indexes, || {
            let mut writer = RunWriter::new(conn)?;
            for (rel, row, diagnostic) in &self.upserts {
                writer.write(rel, row, diagnostic.as_deref())?;
            }
            Ok(())
        })?;
        self.apply_rest(conn)
    }

    /// Drops the damaged rows (first of all changes: by `rowid`, before a row written now
    /// could take one of theirs).
    fn drop_damaged(&self, conn: &Connection) -> rusqlite::Result<()> {
        for (table, rowid) in &self.drop_rows {
            conn.prepare_cached(&format!("DELETE FROM {table} WHERE rowid = ?1"))?
                .execute([rowid])?;
        }
        Ok(())
    }

    /// Applies every change but the damaged rows and the rows to store (written before);
    /// returns the number of run rows deleted.
    fn apply_rest(&self, conn: &Connection) -> rusqlite::Result<u64> {
        let mut deleted = 0u64;
        for rel in &self.removed {
            deleted += conn
                .prepare_cached("DELETE FROM runs WHERE path = ?1")?
                .execute([rel])? as u64;
            conn.prepare_cached("DELETE FROM run_watch WHERE path = ?1")?
                .execute([rel])?;
            crate::resume::put_checkpoint(conn, rel, None)?;
        }
        for prefix in &self.vanished {
            let end = tree::prefix_end(prefix);
            deleted += conn
                .prepare_cached("DELETE FROM runs WHERE path >= ?1 AND path < ?2")?
                .execute([prefix.as_str(), end.as_str()])? as u64;
            conn.prepare_cached("DELETE FROM run_watch WHERE path >= ?1 AND path < ?2")?
                .execute([prefix.as_str(), end.as_str()])?;
            conn.prepare_cached("DELETE FROM run_resume WHERE path >= ?1 AND path < ?2")?
                .execute([prefix.as_str(), end.as_str()])?;
            conn.prepare_cached("DELETE FROM run_dirs WHERE path = ?1")?
                .execute([prefix])?;
        }
        for rel in &self.dir_deletes {
            conn.prepare_cached("DELETE FROM run_dirs WHERE path = ?1")?
                .execute([rel])?;
        }
        for (rel, d) in &self.dir_upserts {
            upsert_dir(conn, rel, d)?;
        }
        for (rel, n) in &self.dir_shrinks {
            conn.prepare_cached(
                "UPDATE run_dirs SET run_count = max(run_count - ?2, 0) WHERE path = ?1",
            )?
            .execute(rusqlite::params![rel, n])?;
        }
        for rel in &self.watch_drop {
            conn.prepare_cached("DELETE FROM run_watch WHERE path = ?1")?
                .execute([rel])?;
        }
        for rel in &self.watch_add {
            conn.prepare_cached("INSERT OR IGNORE INTO run_watch (path) VALUES (?1)")?
                .execute([rel])?;
        }
        for (rel, checkpoint) in &self.checkpoints {
            crate::resume::put_checkpoint(conn, rel, checkpoint.as_deref())?;
        }
        Ok(deleted)
    }
}

impl RunIndex {
    fn stored_runs(&self, conn: &Connection) -> Result<StoredRuns> {
        let err = db_err(&self.db_path, "read run index");
        let mut stmt = conn
            .prepare(&format!("SELECT {RUN_COLUMNS}, rowid FROM runs"))
            .map_err(err)?;
        let rows = stmt
            .query_map([], |r| owned_row(r, RUN_COLUMN_COUNT + 1))
            .map_err(db_err(&self.db_path, "read run index"))?;
        let mut out = StoredRuns {
            by_key: BTreeMap::new(),
            shadowed: Vec::new(),
        };
        for values in rows {
            let mut values = values.map_err(db_err(&self.db_path, "read run index"))?;
            let rowid = values
                .pop()
                .and_then(|v| crate::column::int_of(v.as_ref()))
                .unwrap_or(0);
            // Keys that are not text (or not UTF-8) are listed as decoded: they match no
            // file and are reported as removed.
            let (rel, _) =
                crate::column::text_of(values.first().map_or(ValueRef::Null, OwnedValue::as_ref));
            if let Some(before) = out
                .by_key
                .insert(rel.unwrap_or_default(), StoredRun { values, rowid })
            {
                out.shadowed.push(before.rowid);
            }
        }
        Ok(out)
    }

    fn walk_tree(&self) -> Result<tree::Walk> {
        tree::walk(&self.root).map_err(|e| StateError::Run {
            path: self.root.clone(),
            source: Box::new(e),
        })
    }

    /// Brings the `runs` table up to date with the run tree: new files are read, files whose
    /// size or mtime changed are re-read, rows of vanished files are dropped, unchanged files
    /// are not opened. Picks up runs of any writer (the reference's too) and `.jsonl.zst`
    /// archives. Reading happens without holding the database lock; the changes are applied in
    /// one transaction. A store-sized pass is the exception: a first build (`runs` had no row)
    /// of 32 files or more, or a refresh that reads 4,096 files or more, takes the write lock
    /// before its reads are taken and writes each row as its read comes in, while the workers
    /// read on (as [`RunIndex::reindex`] does): the writing overlaps the reading, readers go
    /// on reading the previous index, and another writer waits (up to the busy timeout) for
    /// the pass. It is one transaction too: a pass that fails or is interrupted leaves the
    /// index as it was, and the next refresh finds all of it still to do.
    ///
    /// # Cost
    ///
    /// Independent of the number of unchanged runs. The root and its year and month
    /// directories are listed and every day directory is looked at (`stat`); a day directory
    /// is listed again only when its modification time differs from the one recorded in the
    /// `run_dirs` table or was racy: recorded too soon after its last change to prove that a
    /// later change would get a different time (within 2 s for whole-second timestamps, file
    /// systems with coarse granularity; within 100 ms for finer ones, which covers the
    /// kernel's coarse clock). Creating, removing or renaming a run file (a new run,
    /// archiving `.jsonl` → `.jsonl.zst`, `gc` moving it away) changes its directory's
    /// modification time. Appending does not, so the files recorded in `run_watch` are looked
    /// at individually: open runs (neither `run.end` nor `run.error` yet: they may still
    /// grow; a `run.end` that follows a `run.error` is written right after it, within the
    /// racy window, so the file is still watched when it comes) and files whose own timestamp
    /// was racy when last looked at. A changed file is read again: on from its checkpoint
    /// when it is an open run that grew, bounded when it is a plain file over
    /// [`crate::WHOLE_READ_MAX`] (head block and a tail probe of at most
    /// [`crate::REFRESH_TAIL_PROBE`]: a partial row, [`RunRow::partial`], completed by the
    /// readers that answer with counts), whole otherwise; a new file alike. Only the rows of
    /// listed directories and watched files are read from the database.
    ///
    /// **Assumption:** a run file that has its `run.end` (and whose timestamp has settled) is
    /// not written again in place. A file appended to or edited after its `run.end` is picked
    /// up by [`RunIndex::reindex`], or by this refresh as soon as anything is created,
    /// removed or renamed in its day directory; `sessions verify` reads every file whatever
    /// the index says, so it sees such records too.
    ///
    /// # Errors
    /// [`StateError::ReadOnly`] on an index opened read-only ([`crate::StateStore::open_read_only`]) or in memory;
    /// [`StateError::Run`] when the sessions root cannot be listed; [`StateError::Db`] /
    /// [`StateError::Busy`]. Unreadable single files and directories are reported in
    /// [`IndexReport::failed`], not as errors, and looked at again by the next refresh.
    pub fn index_runs(&self) -> Result<IndexReport> {
        self.index_runs_with_progress(&mut |_, _| {})
    }

    /// [`RunIndex::index_runs`] calling `progress(done, total)` after each file considered
    /// (files of listed directories and watched files; for a progress bar, this crate never
    /// prints). A pass that writes while it reads (a first build, a large catch-up) calls it
    /// while it holds this index's connection, as [`RunIndex::reindex_with_progress`] does:
    /// `progress` must not call into the same index or store.
    ///
    /// # Errors
    /// As [`RunIndex::index_runs`].
    pub fn index_runs_with_progress(
        &self,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<IndexReport> {
        self.check_writable("index runs")?;
        let walk = self.walk_tree()?;
        let under_unlisted = |rel: &str| walk.unlisted.iter().any(|u| rel.starts_with(&u.1));
        let days: BTreeMap<&str, &DateDir> = walk
            .dirs
            .iter()
            .filter(|d| d.depth == 3)
            .map(|d| (d.rel.as_str(), d))
            .collect();

        // 1. What the index knows, read in one snapshot: O(directories + watched files).
        let (snap, relist) = {
            let conn = self.lock();
            let _rtx = ReadTx::begin(&conn, &self.db_path, self.options.max_busy_wait)?;
            let err = || db_err(&self.db_path, "read run index");
            let mut damaged = Vec::new();
            let dirs = read_dirs(&conn, &mut damaged).map_err(err())?;
            let relist: Vec<&DateDir> = days
                .values()
                .copied()
                .filter(|d| {
                    dirs.get(&d.rel).is_none_or(|s| {
                        s.depth != 3
                            || s.mtime_ns != d.mtime_ns
                            || tree::racy(s.mtime_ns, s.scanned_ns)
                    })
                })
                .collect();
            let mut relisted = BTreeMap::new();
            for d in &relist {
                read_prefix_rows(&conn, &d.rel, &mut relisted, &mut damaged).map_err(err())?;
            }
            let snap = Snapshot {
                prefixes: read_prefixes(&conn, &mut damaged).map_err(err())?,
                watch: read_watch(&conn, &mut damaged).map_err(err())?,
                checkpoints: crate::resume::read_checkpoints(&conn).map_err(err())?,
                runs_empty: runs_empty(&conn).map_err(err())?,
                dirs,
                relisted,
                damaged,
            };
            (snap, relist)
        };
        let relisted_dirs: BTreeSet<&str> = relist.iter().map(|d| d.rel.as_str()).collect();
        let vanished: BTreeSet<String> = snap
            .prefixes
            .iter()
            .chain(
                snap.dirs
                    .iter()
                    .filter(|(_, r)| r.depth == 3)
                    .map(|(k, _)| k),
            )
            .filter(|p| !days.contains_key(p.as_str()) && !under_unlisted(p))
            .cloned()
            .collect();

        let mut report = IndexReport::default();
        let mut changes = Changes::default();
        // Rows holding unusable values: dropped; a row under a directory that is not listed
        // in this pass gets that directory listed (and its file read) by the next one.
        for d in &snap.damaged {
            changes.drop_rows.push((d.table, d.rowid));
            if let Some(dir) = &d.dir
                && !relisted_dirs.contains(dir.as_str())
            {
                changes.dir_deletes.push(dir.clone());
            }
            report.column_damage.extend(d.damage.iter().cloned());
        }
        for (path, _, e) in &walk.unlisted {
            report
                .failed
                .push((path.clone(), format!("cannot list: {e}")));
        }
        // Year and month directories: recorded when new or changed, dropped when gone.
        for d in walk.dirs.iter().filter(|d| d.depth < 3) {
            if snap
                .dirs
                .get(&d.rel)
                .is_none_or(|s| s.mtime_ns != d.mtime_ns || s.depth != i64::from(d.depth))
            {
                changes.dir_upserts.push((d.rel.clone(), dir_row(d, 0)));
            }
        }
        let present: BTreeSet<&str> = walk.dirs.iter().map(|d| d.rel.as_str()).collect();
        for (rel, r) in &snap.dirs {
            if r.depth < 3 && !present.contains(rel.as_str()) && !under_unlisted(rel) {
                changes.dir_deletes.push(rel.clone());
            }
        }
        changes.vanished = vanished.iter().cloned().collect();

        // 2. Day directories that may have changed: list them, compare every file.
        let mut candidates: Vec<Candidate> = Vec::new();
        let mut failed_dirs: BTreeSet<String> = BTreeSet::new();
        let mut listed_ok: Vec<(&DateDir, usize)> = Vec::new();
        // A day without a stored row (a first build, a new day): every file in it is read, so
        // it is listed by name only and each file's size and mtime come from the `fstat` of
        // its reader; otherwise the `lstat` of each file is what tells which files changed.
        let threads = crate::read_pool::max_threads(relist.len());
        let listings = session_jsonl::list_days_on_threads(&relist, threads, |d: &&DateDir| {
            let end = tree::prefix_end(&d.rel);
            let nothing_known = snap
                .relisted
                .range::<str, _>((
                    std::ops::Bound::Included(d.rel.as_str()),
                    std::ops::Bound::Excluded(end.as_str()),
                ))
                .next()
                .is_none();
            if nothing_known {
                tree::list_day_unstatted(d)
            } else {
                tree::list_day(d)
            }
        });
        for (d, listed) in relist.iter().zip(listings) {
            report.dirs_listed += 1;
            let end = tree::prefix_end(&d.rel);
            let listing = match listed {
                Ok(l) => l,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    changes.vanished.push(d.rel.clone());
                    continue;
                }
                Err(e) => {
                    report
                        .failed
                        .push((d.path.clone(), format!("cannot list: {e}")));
                    changes.dir_deletes.push(d.rel.clone());
                    continue;
                }
            };
            report.files_checked += (listing.files.len() + listing.failed.len()) as u64;
            let keep: BTreeSet<String> = listing
                .files
                .iter()
                .map(|f| f.rel.clone())
                .chain(listing.failed.iter().map(|(p, _)| rel_path(&self.root, p)))
                .collect();
            for rel in snap
                .relisted
                .range::<str, _>((
                    std::ops::Bound::Included(d.rel.as_str()),
                    std::ops::Bound::Excluded(end.as_str()),
                ))
                .map(|(k, _)| k)
            {
                if !keep.contains(rel) {
                    changes.removed.push(rel.clone());
                }
            }
            if !listing.failed.is_empty() {
                failed_dirs.insert(d.rel.clone());
            }
            report.failed.extend(listing.failed);
            listed_ok.push((d, listing.files.len()));
            for f in listing.files {
                candidates.push(Candidate {
                    known: snap.relisted.get(&f.rel).copied(),
                    watched: snap.watch.contains_key(&f.rel),
                    listed: f,
                });
            }
        }
        // Unchanged day directories: their rows stand, except for the watched files.
        let mut unchanged_elsewhere: i64 = 0;
        for d in days.values() {
            if !relisted_dirs.contains(d.rel.as_str()) {
                report.dirs_unchanged += 1;
                unchanged_elsewhere = unchanged_elsewhere
                    .saturating_add(snap.dirs.get(&d.rel).map_or(0, |s| s.run_count));
            }
        }

        // 3. Watched files outside the listed directories: one `lstat` each.
        for (rel, known) in &snap.watch {
            let dir = tree::parent_rel(rel);
            if relisted_dirs.contains(dir) {
                continue;
            }
            let Some(known) = known else {
                changes.watch_drop.push(rel.clone());
                continue;
            };
            if vanished.contains(dir) || under_unlisted(rel) {
                continue;
            }
            let path = self.root.join(rel);
            let looked_ns = tree::now_ns();
            report.files_checked += 1;
            unchanged_elsewhere = unchanged_elsewhere.saturating_sub(1);
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let compressed =
                session_jsonl::layout::parse_run_file_name(name).is_some_and(|(_, zst)| zst);
            match fs::symlink_metadata(&path) {
                Ok(md) if md.is_file() => candidates.push(Candidate {
                    listed: Listed {
                        path,
                        rel: rel.clone(),
                        size: md.len(),
                        mtime_ns: tree::mtime_ns(&md),
                        compressed,
                        looked_ns,
                        stat_at_open: false,
                    },
                    known: Some(*known),
                    watched: true,
                }),
                Ok(_) => {
                    changes.removed.push(rel.clone());
                    *changes.dir_shrinks.entry(dir.to_owned()).or_default() += 1;
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    changes.removed.push(rel.clone());
                    *changes.dir_shrinks.entry(dir.to_owned()).or_default() += 1;
                }
                Err(e) => report.failed.push((path, format!("cannot stat: {e}"))),
            }
        }
        report.unchanged = u64::try_from(unchanged_elsewhere.max(0)).unwrap_or(0);

        // 4. Compare and read what changed (read ahead on the read pool, in this order).
        let jobs: Vec<(usize, crate::read_pool::FileJob)> = candidates
            .iter()
            .enumerate()
            .filter(|(_, c)| !c.known.is_some_and(|k| k.matches(&c.listed)))
            .map(|(i, c)| {
                let stored = c.known.and_then(|_| snap.checkpoints.get(&c.listed.rel));
                let job = crate::read_pool::FileJob::of(&c.listed, stored.map(String::as_str));
                (i, job)
            })
            .collect();
        let to_read = jobs.len();
        let mut reads = crate::read_pool::RefreshReads::start(jobs);
        let total = candidates.len() as u64;
        let mut pass = Pass {
            snap: &snap,
            reads: &mut reads,
            report: &mut report,
            changes: &mut changes,
            failed_dirs: &mut failed_dirs,
        };
        if !writes_while_reading(snap.runs_empty, to_read) {
            for (i, c) in candidates.iter().enumerate() {
                if let Some((row, diagnostic)) = pass.take(i, c) {
                    pass.changes
                        .upserts
                        .push((c.listed.rel.clone(), row, diagnostic));
                }
                progress(i as u64 + 1, total);
            }
            pass.record_dirs(listed_ok);

            // 5. One transaction for everything.
            if !changes.is_empty() {
                let conn = self.lock();
                let tx = WriteTx::begin(&conn, &self.db_path, self.options.max_busy_wait)?;
                let rows = changes.upserts.len() + changes.removed.len() + changes.vanished.len();
                // A first build or a large catch-up: a page cache that holds it, set back
                // after the commit (`db::PassCache`).
                let _cache = (changes.upserts.len() >= INDEX_REBUILD_ROWS)
                    .then(|| PassCache::raise(&conn, pass_cache_kib(rows)));
                let apply = || -> rusqlite::Result<u64> {
                    // A first build: the indexes are built once after the rows.
                    let first = changes.upserts.len() >= INDEX_REBUILD_ROWS && runs_empty(&conn)?;
                    if rows >= crate::running_totals::BULK_ROWS {
                        // A large catch-up: the running totals are summed once.
                        crate::running_totals::bulk(&conn, |_| changes.apply(&conn, first))
                    } else {
                        changes.apply(&conn, first)
                    }
                };
                report.removed = apply().map_err(db_err(&self.db_path, "write run index"))?;
                tx.commit()?;
            }
            return Ok(report);
        }

        // 4–5. A first build or a large catch-up: the write transaction is taken before the
        // reads are, and each row written as its read is taken, while the workers read on.
        let conn = self.lock();
        let tx = WriteTx::begin(&conn, &self.db_path, self.options.max_busy_wait)?;
        let rows = to_read + pass.changes.removed.len() + pass.changes.vanished.len();
        // Into an empty table (as it is now, under the lock): the indexes are built once after
        // the rows, and the running totals summed once from them.
        let first = to_read >= INDEX_REBUILD_ROWS
            && runs_empty(&conn).map_err(db_err(&self.db_path, "read run index"))?;
        // A store-sized write: a page cache that holds it, so that its pages are not spilled
        // to the WAL and read back (`db::PassCache`); set back after the commit.
        let _cache = PassCache::raise(&conn, pass_cache_kib(rows));
        let write = |totals: &mut crate::running_totals::Fold| -> rusqlite::Result<u64> {
            pass.changes.drop_damaged(&conn)?;
            if first {
                // Every row of the table is written here: its totals are summed as it is.
                totals.begin();
            }
            with_indexes_rebuilt(&conn, first, || {
                let mut writer = RunWriter::new(&conn)?;
                for (i, c) in candidates.iter().enumerate() {
                    if let Some((row, diagnostic)) = pass.take(i, c) {
                        writer.write_summed(&c.listed.rel, &row, diagnostic.as_deref(), totals)?;
                    }
                    progress(i as u64 + 1, total);
                }
                Ok(())
            })?;
            pass.record_dirs(listed_ok);
            pass.changes.apply_rest(&conn)
        };
        let written = if first || rows >= crate::running_totals::BULK_ROWS {
            // The running totals are summed once, not per row written.
            crate::running_totals::bulk(&conn, write)
        } else {
            write(&mut crate::running_totals::Fold::default())
        };
        report.removed = written.map_err(db_err(&self.db_path, "write run index"))?;
        tx.commit()?;
        Ok(report)
    }

    /// Rebuilds the `runs` table from the files (every day directory listed, every file read
    /// again, in path order) and reports every difference from the previous content. The
    /// result depends only on the files and their size/mtime, so two rebuilds of an unchanged
    /// tree are identical: the table holds what a rebuild from an empty table would write.
    /// Also rebuilds the directory and watch records that make the next
    /// [`RunIndex::index_runs`] incremental, and the running totals.
    ///
    /// # Cost
    ///
    /// Every file is read (on the read pool, `read_pool.rs`) while the one write transaction
    /// takes the rows in path order, so the writing overlaps the reading: the write lock of
    /// `state.db` is held for the whole pass (readers go on reading the previous index;
    /// another writer waits, up to the busy timeout). Only rows that differ from their
    /// file's (a value or a stored type) are written again, each bound from its [`RunRow`]
    /// into one prepared statement, and rows of no file deleted: a rebuild of an unchanged
    /// store writes no `runs` row. Into an empty table, or when more than an eighth of the
    /// rows are written, the secondary indexes of `runs` are dropped and built once after
    /// the rows. All of it is one transaction: a pass that fails or is interrupted leaves
    /// the previous index whole, indexes included.
    ///
    /// # Errors
    /// As [`RunIndex::index_runs`].
    pub fn reindex(&self) -> Result<ReindexReport> {
        self.reindex_with_progress(&mut |_, _| {})
    }

    /// [`RunIndex::reindex`] with a `progress(done, total)` callback.
    ///
    /// # Errors
    /// As [`RunIndex::index_runs`].
    pub fn reindex_with_progress(
        &self,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<ReindexReport> {
        self.check_writable("reindex runs")?;
        let walk = self.walk_tree()?;
        let mut report = ReindexReport::default();
        for (path, _, e) in &walk.unlisted {
            report
                .failed
                .push((path.clone(), format!("cannot list: {e}")));
        }
        let mut files: Vec<Listed> = Vec::new();
        let mut dir_rows: Vec<(String, DirRow)> = Vec::new();
        let mut failed_dirs: BTreeSet<String> = BTreeSet::new();
        // Every file is read: its size and mtime come from the `fstat` of its reader.
        let days: Vec<&DateDir> = walk.dirs.iter().filter(|d| d.depth >= 3).collect();
        let threads = crate::read_pool::max_threads(days.len());
        let mut listings =
            session_jsonl::list_days_on_threads(&days, threads, |d| tree::list_day_unstatted(d))
                .into_iter();
        for d in &walk.dirs {
            if d.depth < 3 {
                dir_rows.push((d.rel.clone(), dir_row(d, 0)));
                continue;
            }
            let listed = listings
                .next()
                .unwrap_or_else(|| tree::list_day_unstatted(d));
            match listed {
                Ok(l) => {
                    if !l.failed.is_empty() {
                        failed_dirs.insert(d.rel.clone());
                    }
                    report.failed.extend(l.failed);
                    dir_rows.push((d.rel.clone(), dir_row(d, l.files.len())));
                    files.extend(l.files);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => report
                    .failed
                    .push((d.path.clone(), format!("cannot list: {e}"))),
            }
        }
        files.sort_by(|a, b| a.rel.cmp(&b.rel));
        let total = files.len() as u64;
        // Read ahead on the read pool, taken in path order while the rows are written; the
        // workers read on while this thread reads the stored rows ([`REINDEX_WINDOW`]).
        let mut reads = crate::read_pool::RefreshReads::start_windowed(
            files
                .iter()
                .map(|f| crate::read_pool::FileJob::of(f, None))
                .enumerate()
                .collect(),
            REINDEX_WINDOW,
        );
        let conn = self.lock();
        let tx = WriteTx::begin(&conn, &self.db_path, self.options.max_busy_wait)?;
        // Every row written again: a page cache that holds the pass (`db::PassCache`).
        let _cache = PassCache::raise(&conn, pass_cache_kib(files.len()));
        let StoredRuns {
            by_key: mut old,
            shadowed,
        } = self.stored_runs(&conn)?;
        let old_len = old.len() + shadowed.len();
        // Differences keyed by relative path, reported in key order.
        let mut changes: Vec<(String, RunChange)> = Vec::new();
        let mut rows = 0u64;
        let write = |_: &mut crate::running_totals::Fold| -> rusqlite::Result<()> {
            conn.execute_batch(
                "DELETE FROM run_dirs; DELETE FROM run_watch; DELETE FROM run_resume;",
            )?;
            let mut delete = conn.prepare_cached("DELETE FROM runs WHERE rowid = ?1")?;
            for rowid in &shadowed {
                delete.execute([rowid])?;
            }
            // Rows written into an empty table, or more than an eighth of its rows: the
            // secondary indexes are dropped and built once after the rows.
            let mut indexes = (old_len == 0 && files.len() >= INDEX_REBUILD_ROWS)
                .then(|| drop_run_indexes(&conn))
                .transpose()?;
            let mut written = 0usize;
            let mut writer = RunWriter::new(&conn)?;
            let mut watch =
                conn.prepare_cached("INSERT OR IGNORE INTO run_watch (path) VALUES (?1)")?;
            for (i, listed) in files.iter().enumerate() {
                let (read, moved, seen) = reads.take(i, listed, None);
                let seen = seen.map(|s| listed.seen_as(s));
                let f = seen.as_ref().unwrap_or(listed);
                match read {
                    Ok(crate::resume::RowRead {
                        row,
                        diagnostic,
                        checkpoint,
                        ..
                    }) => {
                        let values = run_refs(&f.rel, &row, diagnostic.as_deref());
                        let (change, same) = match old.remove(&f.rel) {
                            None => (Some(RunChange::Added(f.path.clone())), false),
                            Some(o) => {
                                let diff = o.differing_columns(&values);
                                let same = o.holds(&values);
                                if !same {
                                    delete.execute([o.rowid])?;
                                }
                                if diff.is_empty() {
                                    report.unchanged += 1;
                                    (None, same)
                                } else {
                                    (Some(RunChange::Changed(f.path.clone(), diff)), same)
                                }
                            }
                        };
                        changes.extend(change.map(|c| (f.rel.clone(), c)));
                        if !same {
                            if indexes.is_none()
                                && written >= INDEX_REBUILD_ROWS
                                && written.saturating_mul(8) >= old_len
                            {
                                indexes = Some(drop_run_indexes(&conn)?);
                            }
                            writer.write_values(&values)?;
                            written += 1;
                        }
                        rows += 1;
                        let open = row.outcome == IndexedRunOutcome::Open;
                        if keep_watching(open, f, !open && moved) {
                            watch.execute([&f.rel])?;
                        }
                        if let Some(c) = checkpoint {
                            crate::resume::put_checkpoint(&conn, &f.rel, Some(c.as_str()))?;
                        }
                    }
                    Err(e) => {
                        report.failed.push((f.path.clone(), e.to_string()));
                        failed_dirs.insert(tree::parent_rel(&f.rel).to_owned());
                    }
                }
                progress(i as u64 + 1, total);
            }
            // Rows of no file read now.
            for o in old.values() {
                delete.execute([o.rowid])?;
            }
            drop(writer);
            if let Some(indexes) = indexes {
                create_run_indexes(&conn, &indexes)?;
            }
            for (rel, d) in &dir_rows {
                if !failed_dirs.contains(rel) {
                    upsert_dir(&conn, rel, d)?;
                }
            }
            Ok(())
        };
        // The running totals are summed again once, not per row written.
        crate::running_totals::bulk(&conn, write)
            .map_err(db_err(&self.db_path, "write run index"))?;
        tx.commit()?;
        // Rows whose file is gone (or whose stored key is no file's).
        changes.extend(
            old.into_keys()
                .map(|key| (key.clone(), RunChange::Removed(self.root.join(key)))),
        );
        changes.sort_by(|a, b| a.0.cmp(&b.0));
        report.changes = changes.into_iter().map(|(_, c)| c).collect();
        report.total = rows;
        Ok(report)
    }

    /// Runs of one session from the index, oldest `started_at` first (then path): files that
    /// are runs, one per run id (the most complete file; the others in
    /// [`RunRow::other_files`]). Does not scan the tree: call [`RunIndex::index_runs`] first
    /// to pick up new files. Partial rows are completed as in [`RunIndex::list_runs`].
    ///
    /// # Errors
    /// [`StateError::Db`].
    pub fn runs_for_session(&self, session_id: &str) -> Result<Vec<RunRow>> {
        let conn = self.lock();
        let rows = {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {RUN_COLUMNS} FROM runs WHERE session_id = ?1 AND diagnostic IS NULL \
                     ORDER BY started_at_utc, path"
                ))
                .map_err(db_err(&self.db_path, "query runs"))?;
            let rows = stmt
                .query_map([session_id], |r| row_from_sql(&self.root, r))
                .map_err(db_err(&self.db_path, "query runs"))?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
                .map_err(db_err(&self.db_path, "read run row"))?
        };
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            if let Some(row) = self.chosen(&conn, row)? {
                out.push(row);
            }
        }
        Ok(out)
    }

    /// Every indexed file whose header names run `run_id` (files that are not runs left out),
    /// in path order: one look-up in the run-id index (`runs_by_run_id`), whatever the size
    /// of the store. Does not scan the tree and does not check the files still exist: the
    /// index is as fresh as the last [`RunIndex::index_runs`]; callers look at the named
    /// directories and fall back to a probe of the tree when nothing is there
    /// ([`session_jsonl::find_run_in_dirs_of`]). A read-only store without `state.db` has no
    /// rows.
    ///
    /// # Errors
    /// [`StateError::Db`].
    pub fn run_files_of(&self, run_id: &str) -> Result<Vec<PathBuf>> {
        let conn = self.lock();
        // Paths decoded lossily: a damaged one names no file, and the caller probes instead.
        let rows = crate::column::query_texts(
            &conn,
            "SELECT path FROM runs WHERE run_id = ?1 AND diagnostic IS NULL ORDER BY path",
            [run_id],
            0,
        )
        .map_err(db_err(&self.db_path, "query runs"))?;
        Ok(rows.into_iter().map(|rel| self.root.join(rel)).collect())
    }

    /// `row` when it is the most complete file of its run (with the run's other files in
    /// [`RunRow::other_files`]), `None` when another file of the run is listed instead (or
    /// its file, read whole, is no run). One look-up in the run-id index per row. Partial
    /// rows are completed ([`RunIndex::complete_row`]): the returned row, and every file of
    /// the run when there are several (the ranking compares record counts).
    pub(crate) fn chosen(&self, conn: &Connection, row: RunRow) -> Result<Option<RunRow>> {
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {RUN_COLUMNS} FROM runs \
                 WHERE run_id = ?1 AND path <> ?2 AND diagnostic IS NULL"
            ))
            .map_err(db_err(&self.db_path, "query runs"))?;
        let rel = rel_path(&self.root, &row.path);
        let siblings = stmt
            .query_map([row.run_id.as_str(), rel.as_str()], |r| {
                row_from_sql(&self.root, r)
            })
            .map_err(db_err(&self.db_path, "query runs"))?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(db_err(&self.db_path, "read run row"))?;
        if siblings.is_empty() {
            return self.complete_row(conn, row);
        }
        // Ranking needs exact counts: partial rows are completed first.
        let Some(row) = self.complete_row(conn, row)? else {
            return Ok(None);
        };
        let mut complete = Vec::with_capacity(siblings.len());
        for s in siblings {
            if let Some(s) = self.complete_row(conn, s)? {
                complete.push(s);
            }
        }
        let siblings = complete;
        if siblings.is_empty() {
            return Ok(Some(row));
        }
        // Newest date directory first (the order `find_run` breaks ties in), then ranked.
        let mut all: Vec<session_jsonl::Completeness> = siblings
            .iter()
            .chain(std::iter::once(&row))
            .map(completeness)
            .collect();
        all.sort_by(|a, b| b.path.cmp(&a.path));
        session_jsonl::rank_files(&mut all);
        if all[0].path != row.path {
            return Ok(None);
        }
        let mut row = row;
        row.other_files = all.into_iter().skip(1).map(|c| c.path).collect();
        // The index rows of the other files are not listed: their damage is reported here.
        row.column_damage
            .extend(siblings.into_iter().flat_map(|s| s.column_damage));
        Ok(Some(row))
    }

    /// Files under the run tree that are not runs (no `header` record: empty, only NUL bytes
    /// or whitespace, damaged lines, records without a header), as the index last saw them,
    /// in path order. The listings leave them out; callers report each once.
    ///
    /// # Errors
    /// [`StateError::Db`].
    pub fn run_file_diagnostics(&self) -> Result<Vec<RunFileDiagnostic>> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {RUN_COLUMNS} FROM runs WHERE diagnostic IS NOT NULL ORDER BY path"
            ))
            .map_err(db_err(&self.db_path, "query runs"))?;
        let rows = stmt
            .query_map([], |r| {
                // Read whole and lossily: a damaged row still names its file and why, and
                // the damage of any of its columns is reported (nothing else reads the
                // row: it is never listed).
                let (row, diagnostic) = row_and_diagnostic_from_sql(&self.root, r)?;
                Ok(RunFileDiagnostic {
                    path: row.path,
                    file_size: row.file_size,
                    message: diagnostic.unwrap_or_default(),
                    column_damage: row.column_damage,
                })
            })
            .map_err(db_err(&self.db_path, "query runs"))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(db_err(&self.db_path, "read run row"))
    }

    /// Runs from the index, newest `started_at` first (then path descending), filtered and
    /// paged with a keyset cursor. Does not scan the tree.
    ///
    /// Only runs are listed, one row per run id: files without a header are left out (see
    /// [`RunIndex::run_file_diagnostics`]), and of several files with one run id only the
    /// most complete is listed, naming the others in [`RunRow::other_files`] (its filters
    /// apply to that file: a less complete twin that matches them does not stand in).
    ///
    /// Partial rows (files the refresh read bounded, [`RunRow::partial`]) of the page are
    /// completed before they are returned: their files are read whole, and the completed
    /// rows stored when the index can be written (`crate::partial`); so are the rows of a
    /// run's other files when the most complete one must be chosen.
    ///
    /// # Cost
    /// One indexed query per page plus one look-up in the run-id index per row returned;
    /// rows of less complete twins are skipped and the page filled from further rows. Each
    /// partial row of the page costs one whole read of its file, once.
    ///
    /// # Errors
    /// [`StateError::Db`].
    pub fn list_runs(&self, query: &RunQuery) -> Result<RunPage> {
        let mut runs: Vec<RunRow> = Vec::new();
        let mut after = query.after.clone();
        let conn = self.lock();
        let duplicated = self.duplicated_ids(&conn)?;
        loop {
            // One row more than asked for tells whether a next page exists.
            let want = query
                .limit
                .map(|l| l.saturating_add(1).saturating_sub(runs.len()).max(1));
            let batch = self.query_runs(&conn, query, after.as_ref(), want)?;
            let fetched = batch.len();
            for row in batch {
                after = Some(RunCursor {
                    started_at: row.started_at_utc.clone().unwrap_or_default(),
                    rel_path: rel_path(&self.root, &row.path),
                });
                // A run id held by one file has no other file to rank against.
                let single = duplicated
                    .as_ref()
                    .is_some_and(|ids| !ids.contains(&row.run_id));
                let row = if single {
                    self.complete_row(&conn, row)?
                } else {
                    self.chosen(&conn, row)?
                };
                if let Some(row) = row {
                    runs.push(row);
                }
            }
            match (query.limit, want) {
                (Some(l), Some(w)) if runs.len() <= l && fetched == w => {}
                _ => break,
            }
        }
        let mut next_cursor = None;
        if let Some(l) = query.limit
            && runs.len() > l
        {
            runs.truncate(l);
            next_cursor = runs.last().map(|r| RunCursor {
                started_at: r.started_at_utc.clone().unwrap_or_default(),
                rel_path: rel_path(&self.root, &r.path),
            });
        }
        Ok(RunPage { runs, next_cursor })
    }

    /// The run ids held by more than one indexed file, from the running totals' `run_dup_ids`
    /// (kept exact by triggers on `runs` for every writer of user version 10 or later): one
    /// small read instead of a run-id look-up per listed row. `None` when this `state.db`
    /// does not keep them (a read-only open of an older version, an index in memory): each
    /// row is then looked up ([`RunIndex::chosen`]).
    fn duplicated_ids(&self, conn: &Connection) -> Result<Option<BTreeSet<String>>> {
        let err = || db_err(&self.db_path, "read duplicated run ids");
        if !crate::running_totals::quarters_kept(conn).map_err(err())? {
            return Ok(None);
        }
        let mut stmt = conn
            .prepare_cached("SELECT run_id FROM run_dup_ids")
            .map_err(err())?;
        let mut rows = stmt.query([]).map_err(err())?;
        let mut out = BTreeSet::new();
        while let Some(r) = rows.next().map_err(err())? {
            let raw = owned_row(r, 1).map_err(err())?;
            match raw.first() {
                Some(OwnedValue::Text(t)) => match std::str::from_utf8(t) {
                    Ok(id) => {
                        out.insert(id.to_owned());
                    }
                    // An id no listed row holds as text: look every row up.
                    Err(_) => return Ok(None),
                },
                _ => return Ok(None),
            }
        }
        Ok(Some(out))
    }

    /// One page of rows that are runs, in listing order, after `after`, at most `limit`.
    fn query_runs(
        &self,
        conn: &Connection,
        query: &RunQuery,
        after: Option<&RunCursor>,
        limit: Option<usize>,
    ) -> Result<Vec<RunRow>> {
        let (filters, args) = run_filters(query, after);
        let mut sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE diagnostic IS NULL{filters}");
        sql.push_str(" ORDER BY started_at_utc DESC, path DESC");
        if let Some(l) = limit {
            sql.push_str(&format!(" LIMIT {l}"));
        }
        self.rows_of(conn, &sql, &args)
    }

    /// The rows `sql` (a `SELECT {RUN_COLUMNS} FROM runs …`) selects with `args` bound, in
    /// its order.
    pub(crate) fn rows_of(
        &self,
        conn: &Connection,
        sql: &str,
        args: &[Value],
    ) -> Result<Vec<RunRow>> {
        let mut stmt = conn
            .prepare(sql)
            .map_err(db_err(&self.db_path, "query runs"))?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(args.iter()), |r| {
                row_from_sql(&self.root, r)
            })
            .map_err(db_err(&self.db_path, "query runs"))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(db_err(&self.db_path, "read run row"))
    }
}

/// The `AND …` conditions of `query`'s filters (not its limit) and of the keyset cursor
/// `after` on the `runs` table, with their parameters in order.
pub(crate) fn run_filters(query: &RunQuery, after: Option<&RunCursor>) -> (String, Vec<Value>) {
    let mut sql = String::new();
    let mut args: Vec<Value> = Vec::new();
    if let Some(s) = &query.session {
        sql.push_str(" AND session_id = ?");
        args.push(Value::Text(s.clone()));
    }
    // Runs without a usable start time ('' in the column) match no time bound.
    if let Some(s) = &query.since {
        sql.push_str(" AND started_at_utc <> '' AND started_at_utc >= ?");
        args.push(Value::Text(utc_key(s).unwrap_or_else(|| s.clone())));
    }
    if let Some(s) = &query.until {
        sql.push_str(" AND started_at_utc <> '' AND started_at_utc < ?");
        args.push(Value::Text(utc_key(s).unwrap_or_else(|| s.clone())));
    }
    if let Some(o) = &query.outcome {
        sql.push_str(" AND outcome = ?");
        args.push(Value::Text(o.as_str().to_owned()));
    }
    if let Some(w) = &query.workspace {
        sql.push_str(&format!(" AND {NORM_FN}(workspace_root) = ?"));
        args.push(Value::Text(normalize_workspace_root(w)));
    }
    if let Some(c) = after {
        // A cursor made from a row's `started_at` as written works as well as one made
        // from `started_at_utc` (the key of a canonical value is itself).
        let key = utc_key(&c.started_at).unwrap_or_default();
        sql.push_str(" AND (started_at_utc < ? OR (started_at_utc = ? AND path < ?))");
        args.push(Value::Text(key.clone()));
        args.push(Value::Text(key));
        args.push(Value::Text(c.rel_path.clone()));
    }
    (sql, args)
}

impl RunIndex {
    /// `row` completed: when it is a partial row the refresh read bounded, its file is read
    /// whole (as it is now) and the row of that read returned; when the index can be written
    /// (not read-only, not in memory) the completed row and an open run's checkpoint are
    /// stored too, provided the stored row is still the partial one that was read (a refresh
    /// of another process may have replaced it). `None` when the file read whole turns out not
    /// to be a run (no `header` record): its row then holds why, and it is not listed.
    ///
    /// A file that cannot be read whole now (gone, unreadable) leaves the row partial
    /// ([`RunRow::partial`]: its counts are unknown); storing is best effort (a busy or full
    /// database leaves the stored row partial, completed again by the next reader). Never
    /// fails for either reason.
    ///
    /// `conn` is this index's connection, held by the caller.
    ///
    /// # Errors
    /// None today; the `Result` keeps the readers' signatures.
    pub(crate) fn complete_row(&self, conn: &Connection, row: RunRow) -> Result<Option<RunRow>> {
        if !row.complete_on_read {
            return Ok(Some(row));
        }
        let md = match std::fs::symlink_metadata(&row.path) {
            Ok(md) if md.is_file() => md,
            _ => return Ok(Some(row)),
        };
        let (size, mtime) = (md.len(), crate::tree::mtime_ns(&md));
        let Ok(read) = crate::resume::read_row(&row.path, size, mtime, row.compressed, None) else {
            return Ok(Some(row));
        };
        let mut whole = read.row;
        whole.column_damage.clone_from(&row.column_damage);
        if !self.read_only {
            // Best effort: the answer is complete either way.
            let _ = self.store_completed(
                conn,
                &row,
                &whole,
                read.diagnostic.as_deref(),
                read.checkpoint.as_deref(),
            );
        }
        Ok(read.diagnostic.is_none().then_some(whole))
    }

    /// Stores `whole` in place of the partial row `partial` (and the checkpoint of an open
    /// run), in one transaction, when the stored row is still `partial`.
    fn store_completed(
        &self,
        conn: &Connection,
        partial: &RunRow,
        whole: &RunRow,
        diagnostic: Option<&str>,
        checkpoint: Option<&str>,
    ) -> Result<()> {
        let rel = rel_path(&self.root, &partial.path);
        let tx = WriteTx::begin(conn, &self.db_path, self.options.max_busy_wait)?;
        let err = || db_err(&self.db_path, "store completed run row");
        let stored: Option<(i64, i64, i64)> = {
            const NAMES: [&str; 3] = ["file_size", "mtime_ns", "partial"];
            let mut stmt = conn
                .prepare_cached("SELECT file_size, mtime_ns, partial FROM runs WHERE path = ?1")
                .map_err(err())?;
            let mut rows = stmt.query([rel.as_str()]).map_err(err())?;
            match rows.next().map_err(err())? {
                Some(r) => {
                    let mut c = Cols::new(r, "runs", &NAMES).map_err(err())?;
                    let mut int = |i: usize| -> rusqlite::Result<i64> {
                        Ok(c.int_required(i)?.unwrap_or(-1))
                    };
                    Some((
                        int(0).map_err(err())?,
                        int(1).map_err(err())?,
                        int(2).map_err(err())?,
                    ))
                }
                None => None,
            }
        };
        let expected = (
            i64::try_from(partial.file_size).unwrap_or(i64::MAX),
            partial.modified_unix_ns,
            crate::partial::partial_column(partial),
        );
        if stored != Some(expected) {
            return Ok(());
        }
        let write = || -> rusqlite::Result<()> {
            upsert(conn, &to_values(&rel, whole, diagnostic))?;
            crate::resume::put_checkpoint(conn, &rel, checkpoint)
        };
        write().map_err(err())?;
        tx.commit()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_totals_columns_name_what_totals_of_reads() {
        let names = TOTALS_COLUMNS.map(|i| RUN_COLUMN_NAMES[i]);
        assert_eq!(names, crate::running_totals::TOTALS_NAMES);
        // RUN_COLUMN_NAMES is RUN_COLUMNS, name by name.
        let listed: Vec<&str> = RUN_COLUMNS.split(", ").collect();
        assert_eq!(listed, RUN_COLUMN_NAMES);
    }
}
