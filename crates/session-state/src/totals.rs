//! Token and outcome totals of the indexed runs, grouped by day, model or session, summed by
//! SQLite (`GROUP BY` over the `runs` table) instead of row by row: `sessions stats` costs
//! one aggregate query, not one materialised row per run.

use std::collections::BTreeMap;

use rusqlite::types::Value;

use crate::column::{OwnedValue, int_of, owned_row, text_of};
use crate::db::db_err;
use crate::error::Result;
use crate::index::RunIndex;
use crate::row::{IndexedRunOutcome, RunRow};
use crate::running_totals::{self, Kind, Window};
use crate::runs::{RUN_COLUMNS, RunQuery, run_filters};
use crate::utc::utc_key;

/// How [`RunIndex::run_totals`] groups runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RunGrouping {
    /// By the UTC date of `started_at` (`YYYY-MM-DD`; `(unknown date)` when it is missing or
    /// not an RFC 3339 timestamp).
    Day,
    /// By `provider/name` of the model (`name` without a provider; `(unknown model)`).
    Model,
    /// By session id (`(no session)`).
    Session,
    /// By the UTC minute of `started_at` (`YYYY-MM-DDTHH:MM`; `(unknown date)` as for
    /// [`RunGrouping::Day`]): fine enough for a caller to put each group into the day, week
    /// or month of any time zone whose offsets are whole minutes (every zone in use since
    /// 1972), while SQLite still does the summing.
    Minute,
    /// By the calendar date of `started_at` at a fixed UTC offset of this many minutes
    /// (`YYYY-MM-DD`; `(unknown date)` as for [`RunGrouping::Day`]; `DayAtOffset(0)` is
    /// [`RunGrouping::Day`]): the day of a zone without daylight-saving changes (`UTC`,
    /// `+05:30`), summed inside SQLite into one row per day instead of one per minute, so
    /// `sessions stats --by day` costs what its answer costs. Offsets beyond ±24 hours are
    /// clamped to ±24 hours.
    DayAtOffset(i32),
    /// By the UTC quarter-hour of `started_at` (`YYYY-MM-DDTHH:MM`, the minute rounded down
    /// to `00`, `15`, `30` or `45`; `(unknown date)` as for [`RunGrouping::Day`]): every UTC
    /// offset in use is a multiple of 15 minutes and every daylight-saving change falls on a
    /// quarter-hour, so a caller can put each group into the day, week or month of a zone
    /// with such changes (checking the rare quarter-hour a change falls inside), and the
    /// running totals answer it in one row per quarter-hour holding a run start.
    QuarterHour,
}

/// The largest offset [`RunGrouping::DayAtOffset`] applies, in minutes.
const MAX_OFFSET_MINUTES: i32 = 24 * 60;

/// Sums over a group of runs. Outcomes: `completed`, `error`, `cancelled`; every other run
/// (no `run.end`, or an outcome this version does not know) counts as `open`. Token sums
/// saturate at `u64::MAX`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunTotals {
    /// Runs (one per run id).
    pub runs: u64,
    /// Runs that ended `completed`.
    pub completed: u64,
    /// Runs that ended with an error.
    pub errors: u64,
    /// Runs that were cancelled.
    pub cancelled: u64,
    /// Every other run.
    pub open: u64,
    /// Model invocations ([`RunRow::invocation_count`]).
    pub invocations: u64,
    /// Input tokens.
    pub input_tokens: u64,
    /// Cached input tokens.
    pub cached_input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Total tokens.
    pub total_tokens: u64,
}

impl RunTotals {
    /// Adds the sums of `o` to these (saturating): the totals of two groups taken together,
    /// as when a caller puts minute groups ([`RunGrouping::Minute`]) into days, weeks or
    /// months of a time zone.
    pub fn add(&mut self, o: &RunTotals) {
        self.runs = self.runs.saturating_add(o.runs);
        self.completed = self.completed.saturating_add(o.completed);
        self.errors = self.errors.saturating_add(o.errors);
        self.cancelled = self.cancelled.saturating_add(o.cancelled);
        self.open = self.open.saturating_add(o.open);
        self.invocations = self.invocations.saturating_add(o.invocations);
        self.input_tokens = self.input_tokens.saturating_add(o.input_tokens);
        self.cached_input_tokens = self
            .cached_input_tokens
            .saturating_add(o.cached_input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(o.output_tokens);
        self.total_tokens = self.total_tokens.saturating_add(o.total_tokens);
    }

    /// Takes the sums of `o` out of these (saturating at 0): the inverse of [`RunTotals::add`]
    /// for a run the running totals counted once too often.
    fn sub(&mut self, o: &RunTotals) {
        self.runs = self.runs.saturating_sub(o.runs);
        self.completed = self.completed.saturating_sub(o.completed);
        self.errors = self.errors.saturating_sub(o.errors);
        self.cancelled = self.cancelled.saturating_sub(o.cancelled);
        self.open = self.open.saturating_sub(o.open);
        self.invocations = self.invocations.saturating_sub(o.invocations);
        self.input_tokens = self.input_tokens.saturating_sub(o.input_tokens);
        self.cached_input_tokens = self
            .cached_input_tokens
            .saturating_sub(o.cached_input_tokens);
        self.output_tokens = self.output_tokens.saturating_sub(o.output_tokens);
        self.total_tokens = self.total_tokens.saturating_sub(o.total_tokens);
    }

    /// The totals of one row of the running totals.
    pub(crate) fn of_sums(sums: &running_totals::Sums) -> RunTotals {
        let [
            runs,
            completed,
            errors,
            cancelled,
            invocations,
            input,
            cached,
            output,
            total,
        ] = *sums;
        RunTotals {
            runs,
            completed,
            errors,
            cancelled,
            open: runs.saturating_sub(completed.saturating_add(errors).saturating_add(cancelled)),
            invocations,
            input_tokens: input,
            cached_input_tokens: cached,
            output_tokens: output,
            total_tokens: total,
        }
    }

    pub(crate) fn of_row(row: &RunRow) -> RunTotals {
        let (completed, errors, cancelled) = match row.outcome {
            IndexedRunOutcome::Completed => (1, 0, 0),
            IndexedRunOutcome::Error => (0, 1, 0),
            IndexedRunOutcome::Cancelled => (0, 0, 1),
            _ => (0, 0, 0),
        };
        RunTotals {
            runs: 1,
            completed,
            errors,
            cancelled,
            open: 1 - completed - errors - cancelled,
            invocations: row.invocation_count,
            input_tokens: row.input_tokens,
            cached_input_tokens: row.cached_input_tokens,
            output_tokens: row.output_tokens,
            total_tokens: row.total_tokens,
        }
    }
}

/// The answer of [`RunIndex::run_totals`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupedRunTotals {
    /// Totals per group key, in key order.
    pub groups: BTreeMap<String, RunTotals>,
    /// Totals over every group.
    pub all: RunTotals,
    /// Runs held by several files (each counted once, from its most complete file, whose
    /// [`RunRow::other_files`] name the others): for a warning per duplicate.
    pub duplicated: Vec<RunRow>,
    /// Index rows read one by one (the rows of runs held by several files, or beside a file
    /// of the same name that is no run); every other run is summed inside SQLite. For tests
    /// that hold the cost.
    pub rows_read: u64,
    /// Rows the aggregate query or the running totals returned (one per group SQLite summed,
    /// one per quarter-hour, model or session of the running totals): what a caller pays to
    /// read the sums back. For tests that hold the cost.
    pub groups_summed: u64,
    /// Whether the answer came from the running totals kept with the index
    /// (`docs/format.md`, "Running totals") rather than from summing the matching rows.
    pub from_running_totals: bool,
    /// SQLite virtual-machine steps of the statements that summed the rows or read the
    /// running totals (the rows of runs held by several files not counted): grows with the
    /// rows SQLite visits, not with the answer alone. For tests that hold the cost.
    pub sql_steps: u64,
}

/// The group key of a `runs` row as SQL, for `by`.
fn key_sql(by: RunGrouping) -> std::borrow::Cow<'static, str> {
    if let RunGrouping::DayAtOffset(minutes) = by {
        let minutes = minutes.clamp(-MAX_OFFSET_MINUTES, MAX_OFFSET_MINUTES);
        if minutes != 0 {
            // `started_at_utc` is canonical (`YYYY-MM-DDTHH:MM:SS.sssZ`), which `date()` reads.
            return format!(
                "CASE WHEN started_at_utc IS NULL OR started_at_utc = '' THEN '(unknown date)' \
                 ELSE coalesce(date(started_at_utc, '{minutes:+} minutes'), '(unknown date)') END"
            )
            .into();
        }
    }
    match by {
        RunGrouping::Day | RunGrouping::DayAtOffset(_) => {
            "CASE WHEN started_at_utc IS NULL OR started_at_utc = '' THEN '(unknown date)' \
             ELSE substr(started_at_utc, 1, 10) END"
        }
        RunGrouping::Minute => {
            "CASE WHEN started_at_utc IS NULL OR started_at_utc = '' THEN '(unknown date)' \
             ELSE substr(started_at_utc, 1, 16) END"
        }
        RunGrouping::Model => {
            "CASE WHEN model_name IS NULL THEN '(unknown model)' \
             WHEN model_provider IS NULL THEN model_name \
             ELSE model_provider || '/' || model_name END"
        }
        RunGrouping::Session => "coalesce(session_id, '(no session)')",
        RunGrouping::QuarterHour => return running_totals::quarter_key_sql().into(),
    }
    .into()
}

/// Days from 1970-01-01 to the proleptic Gregorian date `y-m-d` (H. Hinnant's
/// `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date `(y, m, d)` of `days` since 1970-01-01 (`civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

/// The `YYYY-MM-DD` date at `minutes` from UTC of a canonical UTC start
/// (`YYYY-MM-DDTHH:MM…`), as SQLite's `date(…, '+N minutes')` gives it; `None` when the
/// text is no such start.
fn day_at_offset(utc: &str, minutes: i32) -> Option<String> {
    let field = |from: usize, to: usize| -> Option<i64> {
        let t = utc.get(from..to)?;
        t.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| t.parse().ok())
            .flatten()
    };
    let (y, mo, d) = (field(0, 4)?, field(5, 7)?, field(8, 10)?);
    let (h, mi) = (field(11, 13)?, field(14, 16)?);
    let minutes = i64::from(minutes.clamp(-MAX_OFFSET_MINUTES, MAX_OFFSET_MINUTES));
    let at = days_from_civil(y, mo, d) * 1440 + h * 60 + mi + minutes;
    let (y, mo, d) = civil_from_days(at.div_euclid(1440));
    Some(format!("{y:04}-{mo:02}-{d:02}"))
}

/// The group key of `row` for `by` (as [`key_sql`]).
fn key_of(row: &RunRow, by: RunGrouping) -> String {
    match by {
        RunGrouping::DayAtOffset(minutes)
            if minutes.clamp(-MAX_OFFSET_MINUTES, MAX_OFFSET_MINUTES) != 0 =>
        {
            row.started_at_utc
                .as_deref()
                .and_then(|k| day_at_offset(k, minutes))
                .unwrap_or_else(|| "(unknown date)".into())
        }
        RunGrouping::Day | RunGrouping::DayAtOffset(_) => match row.started_at_utc.as_deref() {
            Some(k) if k.len() >= 10 => k.get(..10).unwrap_or(k).to_owned(),
            _ => "(unknown date)".into(),
        },
        RunGrouping::Minute => match row.started_at_utc.as_deref() {
            Some(k) if k.len() >= 16 => k.get(..16).unwrap_or(k).to_owned(),
            _ => "(unknown date)".into(),
        },
        RunGrouping::Model => match (&row.model_provider, &row.model_name) {
            (Some(p), Some(n)) => format!("{p}/{n}"),
            (None, Some(n)) => n.clone(),
            _ => "(unknown model)".into(),
        },
        RunGrouping::Session => row
            .session_id
            .clone()
            .unwrap_or_else(|| "(no session)".into()),
        RunGrouping::QuarterHour => running_totals::quarter_key(row.started_at_utc.as_deref()),
    }
}

/// The key for `by` of the group of quarter-hour `key` (a key of [`RunGrouping::QuarterHour`]
/// of a canonical start, or `(unknown date)`): the same key every run start in that
/// quarter-hour gets from [`key_of`]. Only for groupings the running totals serve by
/// quarter-hour (`Day`, `DayAtOffset` of a multiple of 15 minutes, `QuarterHour`).
fn key_of_quarter(key: &str, by: RunGrouping) -> String {
    if key == "(unknown date)" {
        return key.to_owned();
    }
    match by {
        RunGrouping::DayAtOffset(minutes)
            if minutes.clamp(-MAX_OFFSET_MINUTES, MAX_OFFSET_MINUTES) != 0 =>
        {
            day_at_offset(key, minutes).unwrap_or_else(|| "(unknown date)".into())
        }
        RunGrouping::Day | RunGrouping::DayAtOffset(_) => key.get(..10).unwrap_or(key).to_owned(),
        _ => key.to_owned(),
    }
}

/// Run ids held by more than one indexed file, read from the run-id index alone (no table
/// look-up). Files that are not runs count here too, so a run with such a file beside it is
/// summed row by row; those rows are dropped there (`diagnostic IS NULL`), so it still counts
/// once.
const DUPLICATED_IDS: &str = "SELECT run_id FROM runs GROUP BY run_id HAVING count(*) > 1";

/// A non-negative SQL integer sum as `u64` (a NULL sum of no rows is 0).
fn sum_at(v: &[OwnedValue], i: usize) -> u64 {
    v.get(i)
        .and_then(|v| int_of(v.as_ref()))
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(0)
}

/// A statement's SQLite virtual-machine steps so far.
fn steps_of(stmt: &rusqlite::Statement<'_>) -> u64 {
    u64::try_from(stmt.get_status(rusqlite::StatementStatus::VmStep)).unwrap_or(0)
}

/// The running totals that can answer `query` grouped `by`, before looking at them: `None`
/// for a filter they do not hold (`session`, `outcome`, `workspace`) or a grouping finer than
/// their quarter-hours.
fn kept_kind(query: &RunQuery, by: RunGrouping) -> Option<Kind> {
    if query.session.is_some() || query.outcome.is_some() || query.workspace.is_some() {
        return None;
    }
    match by {
        RunGrouping::Day | RunGrouping::QuarterHour => Some(Kind::Quarter),
        RunGrouping::DayAtOffset(m)
            if m.clamp(-MAX_OFFSET_MINUTES, MAX_OFFSET_MINUTES) % 15 == 0 =>
        {
            Some(Kind::Quarter)
        }
        RunGrouping::Model => Some(Kind::Model),
        RunGrouping::Session => Some(Kind::Session),
        RunGrouping::Minute | RunGrouping::DayAtOffset(_) => None,
    }
}

/// Groups summed by an aggregate query: `(key, totals)` per group, or `None` when a sum
/// overflowed (SQLite's `sum()` fails on it); and the statement's VM steps.
type Summed = (Option<Vec<(String, RunTotals)>>, u64);

impl RunIndex {
    /// Totals of the runs [`RunIndex::list_runs`] would list for `query` (its filters; its
    /// `limit` and cursor are ignored), grouped `by`: the same runs, each counted once.
    ///
    /// # Cost
    /// Answered from the running totals the index keeps (`docs/format.md`, "Running
    /// totals"; [`GroupedRunTotals::from_running_totals`]) when they can: one row per UTC
    /// day holding a run start for [`RunGrouping::Day`] and `DayAtOffset(0)` (plus the
    /// quarter-hours of the at most two days `since` / `until` cut); one row per UTC
    /// quarter-hour holding a run start for [`RunGrouping::QuarterHour`] and
    /// [`RunGrouping::DayAtOffset`] of another multiple of 15 minutes; one per model or per
    /// session; plus the rows of the at most two quarter-hours `since` / `until` cut and the
    /// rows of run ids held by several files. Otherwise (a `session`, `outcome` or
    /// `workspace` filter; `since` / `until` with `by` model or session; [`RunGrouping::Minute`];
    /// an offset that is no multiple of 15 minutes; a read-only `state.db` of an older version;
    /// a sum past `i64::MAX`; a start time that is not canonical; partial rows that could not
    /// be stored completed) it is [`RunIndex::run_totals_by_scan`]: one aggregate query over
    /// the matching rows. Does not scan the tree: call [`RunIndex::index_runs`] first.
    ///
    /// Partial rows (files the refresh read bounded, [`RunRow::partial`](crate::RunRow::partial))
    /// are completed first: their files are read whole and, when the index can be written, the
    /// completed rows stored (the running totals follow them), so the sums are those of a whole
    /// read. Finding them reads only the partial index `runs_partial`.
    ///
    /// # Errors
    /// [`StateError::Db`](crate::StateError::Db).
    pub fn run_totals(&self, query: &RunQuery, by: RunGrouping) -> Result<GroupedRunTotals> {
        let conn = self.lock();
        if kept_kind(query, by).is_some()
            && self.settle_partial_rows(&conn)?
            && let Some(out) = self.kept_totals(&conn, query, by)?
        {
            return Ok(out);
        }
        self.scan_totals(&conn, query, by)
    }

    /// Completes the rows marked partial by the refresh (their files read whole, the rows
    /// stored) when the index can be written; whether none is left, so that the running
    /// totals hold the sums of whole reads.
    pub(crate) fn settle_partial_rows(&self, conn: &rusqlite::Connection) -> Result<bool> {
        let mut partial = self.partial_rows(conn)?;
        if !partial.is_empty() && !self.read_only {
            for row in partial {
                self.complete_row(conn, row)?;
            }
            partial = self.partial_rows(conn)?;
        }
        Ok(partial.is_empty())
    }

    /// Every row marked partial by the refresh (`partial = 1`), through the partial index
    /// `runs_partial`: no other row is read.
    fn partial_rows(&self, conn: &rusqlite::Connection) -> Result<Vec<RunRow>> {
        let sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE partial = 1");
        self.rows_of(conn, &sql, &[])
    }

    /// [`RunIndex::run_totals`] computed from the matching rows alone, never from the running
    /// totals: the reference those are checked against.
    ///
    /// # Cost
    /// One aggregate query (`GROUP BY` inside SQLite) over the matching rows plus one pass
    /// over the run-id index for run ids held by several files; only those rows are read
    /// one by one ([`GroupedRunTotals::rows_read`]).
    ///
    /// Sums are exact up to `i64::MAX` per group; a group whose sum would overflow it
    /// (absurd stored counts) is summed row by row instead, saturating.
    ///
    /// # Errors
    /// [`StateError::Db`](crate::StateError::Db).
    pub fn run_totals_by_scan(
        &self,
        query: &RunQuery,
        by: RunGrouping,
    ) -> Result<GroupedRunTotals> {
        let conn = self.lock();
        self.scan_totals(&conn, query, by)
    }

    /// Runs one aggregate query (`SELECT key, count(*), sums… GROUP BY key`).
    pub(crate) fn sum_groups(
        &self,
        conn: &rusqlite::Connection,
        sql: &str,
        args: &[Value],
    ) -> Result<Summed> {
        let mut stmt = conn
            .prepare(sql)
            .map_err(db_err(&self.db_path, "sum runs"))?;
        let summed = {
            let rows = stmt
                .query_map(rusqlite::params_from_iter(args.iter()), |r| {
                    let v = owned_row(r, 10)?;
                    let runs = sum_at(&v, 1);
                    let (completed, errors, cancelled) =
                        (sum_at(&v, 2), sum_at(&v, 3), sum_at(&v, 4));
                    let key = v.first().and_then(|k| text_of(k.as_ref()).0);
                    Ok((
                        key.unwrap_or_default(),
                        RunTotals {
                            runs,
                            completed,
                            errors,
                            cancelled,
                            open: runs.saturating_sub(completed + errors + cancelled),
                            invocations: sum_at(&v, 5),
                            input_tokens: sum_at(&v, 6),
                            cached_input_tokens: sum_at(&v, 7),
                            output_tokens: sum_at(&v, 8),
                            total_tokens: sum_at(&v, 9),
                        },
                    ))
                })
                .map_err(db_err(&self.db_path, "sum runs"))?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        };
        Ok((summed.ok(), steps_of(&stmt)))
    }

    /// The aggregate query over `runs` rows that are runs, matching `filters` and `extra`.
    pub(crate) fn sum_sql(key: &str, filters: &str, extra: &str) -> String {
        format!(
            "SELECT {key} AS k, count(*), \
             sum(outcome = 'completed'), sum(outcome = 'error'), sum(outcome = 'cancelled'), \
             sum(invocation_count), sum(input_tokens), sum(cached_input_tokens), \
             sum(output_tokens), sum(total_tokens) \
             FROM runs WHERE diagnostic IS NULL{filters}{extra} GROUP BY k"
        )
    }

    /// [`RunIndex::run_totals`] from the running totals; `None` when they cannot answer
    /// `query` by `by` exactly.
    fn kept_totals(
        &self,
        conn: &rusqlite::Connection,
        query: &RunQuery,
        by: RunGrouping,
    ) -> Result<Option<GroupedRunTotals>> {
        let Some(kind) = kept_kind(query, by) else {
            return Ok(None);
        };
        let err = || db_err(&self.db_path, "read running totals");
        if !running_totals::quarters_kept(conn).map_err(err())? {
            return Ok(None);
        }
        // Bounds as the row filter compares them.
        let bound = |b: &Option<String>| {
            b.as_deref()
                .map(|s| utc_key(s).unwrap_or_else(|| s.to_owned()))
        };
        let window = Window {
            since: bound(&query.since),
            until: bound(&query.until),
        };
        // A UTC calendar reads whole days one row each (user version 11).
        let by_utc_day = matches!(by, RunGrouping::Day)
            || matches!(by, RunGrouping::DayAtOffset(m)
                if m.clamp(-MAX_OFFSET_MINUTES, MAX_OFFSET_MINUTES) == 0);
        let read = if by_utc_day && running_totals::days_kept(conn).map_err(err())? {
            running_totals::read_days(conn, &window)
        } else {
            running_totals::read(conn, kind, &window)
        };
        let Some(read) = read.map_err(err())? else {
            return Ok(None);
        };
        let mut out = GroupedRunTotals {
            from_running_totals: true,
            groups_summed: read.rows,
            sql_steps: read.steps,
            ..GroupedRunTotals::default()
        };
        for (k, sums) in &read.groups {
            let key = match kind {
                Kind::Quarter => key_of_quarter(k, by),
                Kind::Model | Kind::Session => k.clone(),
            };
            out.groups
                .entry(key)
                .or_default()
                .add(&RunTotals::of_sums(sums));
        }
        // The quarter-hours `since` / `until` cut: their matching rows, summed by SQLite.
        let (filters, args) = run_filters(query, None);
        let quarter = running_totals::quarter_key_sql();
        for edge in &read.edges {
            let sql = Self::sum_sql(
                &quarter,
                &filters,
                " AND started_at_utc >= ? AND started_at_utc <= ?",
            );
            let mut edge_args = args.clone();
            edge_args.extend(running_totals::edge_args(edge));
            let (summed, steps) = self.sum_groups(conn, &sql, &edge_args)?;
            let Some(groups) = summed else {
                return Ok(None);
            };
            out.sql_steps = out.sql_steps.saturating_add(steps);
            out.groups_summed += groups.len() as u64;
            for (k, t) in groups {
                out.groups
                    .entry(key_of_quarter(&k, by))
                    .or_default()
                    .add(&t);
            }
        }
        // Runs held by several files: every file is in the sums; count each run once.
        let doubles = self.rows_of_dup_ids(conn, &filters, &args)?;
        out.rows_read = doubles.len() as u64;
        for row in doubles {
            let key = key_of(&row, by);
            if let Some(g) = out.groups.get_mut(&key) {
                g.sub(&RunTotals::of_row(&row));
            }
            if let Some(row) = self.chosen(conn, row)? {
                out.groups
                    .entry(key_of(&row, by))
                    .or_default()
                    .add(&RunTotals::of_row(&row));
                out.duplicated.push(row);
            }
        }
        out.groups.retain(|_, g| g.runs > 0);
        for t in out.groups.values() {
            out.all.add(t);
        }
        Ok(Some(out))
    }

    /// Rows matching `filters` whose run id is in `run_dup_ids` (held by several files).
    pub(crate) fn rows_of_dup_ids(
        &self,
        conn: &rusqlite::Connection,
        filters: &str,
        args: &[Value],
    ) -> Result<Vec<RunRow>> {
        let sql = format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE diagnostic IS NULL{filters} \
             AND run_id IN (SELECT run_id FROM run_dup_ids) \
             ORDER BY started_at_utc DESC, path DESC"
        );
        self.rows_of(conn, &sql, args)
    }

    /// [`RunIndex::run_totals_by_scan`] on a locked connection.
    fn scan_totals(
        &self,
        conn: &rusqlite::Connection,
        query: &RunQuery,
        by: RunGrouping,
    ) -> Result<GroupedRunTotals> {
        let (filters, args) = run_filters(query, None);
        let key = key_sql(by);
        let mut out = GroupedRunTotals::default();
        // Rows the refresh read bounded are summed once completed (`partial`).
        let whole = format!("{filters} AND partial <> 1");
        let sql = Self::sum_sql(
            &key,
            &whole,
            &format!(" AND run_id NOT IN ({DUPLICATED_IDS})"),
        );
        let (summed, steps) = self.sum_groups(conn, &sql, &args)?;
        out.sql_steps = steps;
        let mut singles: Vec<RunRow> = match summed {
            Some(groups) => {
                out.groups_summed = groups.len() as u64;
                for (k, t) in groups {
                    out.groups.entry(k).or_default().add(&t);
                }
                Vec::new()
            }
            // An integer overflow in a sum: read those rows one by one, saturating.
            None => self.matching_rows(conn, &whole, &args, false)?,
        };
        let partial_filters = format!("{filters} AND partial = 1");
        for row in self.matching_rows(conn, &partial_filters, &args, false)? {
            singles.extend(self.complete_row(conn, row)?);
        }
        let doubles = self.matching_rows(conn, &filters, &args, true)?;
        out.rows_read = (singles.len() + doubles.len()) as u64;
        for row in singles {
            out.groups
                .entry(key_of(&row, by))
                .or_default()
                .add(&RunTotals::of_row(&row));
        }
        for row in doubles {
            if let Some(row) = self.chosen(conn, row)? {
                out.groups
                    .entry(key_of(&row, by))
                    .or_default()
                    .add(&RunTotals::of_row(&row));
                out.duplicated.push(row);
            }
        }
        for t in out.groups.values() {
            out.all.add(t);
        }
        Ok(out)
    }

    /// Rows matching `filters` whose run id is (`duplicated`) or is not held by several files.
    fn matching_rows(
        &self,
        conn: &rusqlite::Connection,
        filters: &str,
        args: &[Value],
        duplicated: bool,
    ) -> Result<Vec<RunRow>> {
        let not = if duplicated { "" } else { "NOT " };
        let sql = format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE diagnostic IS NULL{filters} \
             AND run_id {not}IN ({DUPLICATED_IDS}) ORDER BY started_at_utc DESC, path DESC"
        );
        self.rows_of(conn, &sql, args)
    }
}

#[cfg(test)]
mod tests {
    use super::day_at_offset;

    #[test]
    fn day_at_offset_crosses_days_months_years_and_leap_days() {
        let cases = [
            ("2026-12-31T23:30:00.000Z", 60, Some("2027-01-01")),
            ("2026-12-31T23:30:00.000Z", 29, Some("2026-12-31")),
            ("2024-03-01T00:10:00.000Z", -20, Some("2024-02-29")),
            ("2023-03-01T00:10:00.000Z", -20, Some("2023-02-28")),
            ("2026-11-30T18:30:00.000Z", 330, Some("2026-12-01")),
            ("2026-11-30T18:29:00.000Z", 330, Some("2026-11-30")),
            ("2026-01-01T05:00:00.000Z", -300, Some("2026-01-01")),
            ("2026-01-01T04:59:00.000Z", -300, Some("2025-12-31")),
            ("2026-01-01T04:59:00.000Z", i32::MIN, Some("2025-12-31")),
            ("not a time", 60, None),
            ("2026-1", 60, None),
        ];
        for (utc, minutes, want) in cases {
            assert_eq!(
                day_at_offset(utc, minutes).as_deref(),
                want,
                "{utc} {minutes}"
            );
        }
    }
}
