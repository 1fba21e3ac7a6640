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
use crate::runs::{RUN_COLUMNS, RunQuery, row_from_sql, run_filters};

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

    fn of_row(row: &RunRow) -> RunTotals {
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
    /// Rows the aggregate query returned (one per group SQLite summed): what a caller pays
    /// to read the sums back. For tests that hold the cost.
    pub groups_summed: u64,
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

impl RunIndex {
    /// Totals of the runs [`RunIndex::list_runs`] would list for `query` (its filters; its
    /// `limit` and cursor are ignored), grouped `by`: the same runs, each counted once.
    ///
    /// # Cost
    /// One aggregate query (`GROUP BY` inside SQLite) over the matching rows plus one pass
    /// over the run-id index for run ids held by several files; only those rows are read
    /// one by one ([`GroupedRunTotals::rows_read`]). Does not scan the tree: call
    /// [`RunIndex::index_runs`] first. Partial rows (files the refresh read bounded,
    /// [`RunRow::partial`](crate::RunRow::partial)) are read one by one too and completed:
    /// their files are read whole (and the completed rows stored when the index can be
    /// written), so the sums are those of a whole read.
    ///
    /// Sums are exact up to `i64::MAX` per group; a group whose sum would overflow it
    /// (absurd stored counts) is summed row by row instead, saturating.
    ///
    /// # Errors
    /// [`StateError::Db`](crate::StateError::Db).
    pub fn run_totals(&self, query: &RunQuery, by: RunGrouping) -> Result<GroupedRunTotals> {
        let (filters, args) = run_filters(query, None);
        // Rows the refresh read bounded are summed once completed (`partial`).
        let whole = format!("{filters} AND partial <> 1");
        let key = key_sql(by);
        let mut out = GroupedRunTotals::default();
        let conn = self.lock();
        let sql = format!(
            "SELECT {key} AS k, count(*), \
             sum(outcome = 'completed'), sum(outcome = 'error'), sum(outcome = 'cancelled'), \
             sum(invocation_count), sum(input_tokens), sum(cached_input_tokens), \
             sum(output_tokens), sum(total_tokens) \
             FROM runs WHERE diagnostic IS NULL{whole} \
             AND run_id NOT IN ({DUPLICATED_IDS}) GROUP BY k"
        );
        let summed = {
            let mut stmt = conn
                .prepare(&sql)
                .map_err(db_err(&self.db_path, "sum runs"))?;
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
        let singles: Vec<RunRow> = match summed {
            Ok(groups) => {
                out.groups_summed = groups.len() as u64;
                for (k, t) in groups {
                    out.groups.entry(k).or_default().add(&t);
                }
                Vec::new()
            }
            // An integer overflow in a sum: read those rows one by one, saturating.
            Err(_) => self.matching_rows(&conn, &whole, &args, false)?,
        };
        let partial_filters = format!("{filters} AND partial = 1");
        let mut singles = singles;
        for row in self.matching_rows(&conn, &partial_filters, &args, false)? {
            singles.extend(self.complete_row(&conn, row)?);
        }
        let doubles = self.matching_rows(&conn, &filters, &args, true)?;
        out.rows_read = (singles.len() + doubles.len()) as u64;
        for row in singles {
            out.groups
                .entry(key_of(&row, by))
                .or_default()
                .add(&RunTotals::of_row(&row));
        }
        for row in doubles {
            if let Some(row) = self.chosen(&conn, row)? {
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
        let mut stmt = conn
            .prepare(&sql)
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
