//! Totals of the runs started inside given stretches of UTC time ([`RunIndex::run_totals_in_spans`]):
//! the days, weeks and months of a time zone with daylight-saving changes, summed from the
//! running totals' UTC days (`run_day_totals`) with the quarter-hours (and the rows of a
//! quarter-hour) at each span's two ends added or taken out, so that the cost follows the
//! periods asked for rather than the runs or the quarter-hours they fill.

use std::collections::BTreeMap;

use rusqlite::Connection;
use rusqlite::types::Value;

use crate::db::db_err;
use crate::error::Result;
use crate::index::RunIndex;
use crate::running_totals::{self, Sums, Window};
use crate::runs::{RunQuery, run_filters};
use crate::totals::{GroupedRunTotals, RunTotals};
use crate::utc::utc_key;

/// A stretch of UTC time whose runs [`RunIndex::run_totals_in_spans`] sums into the group
/// `key`; several spans may share a key (their sums are added).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TimeSpan {
    /// The group the runs of this span count in (a day, week or month of a zone).
    pub key: String,
    /// The first instant of the span, inclusive: a canonical UTC key
    /// (`YYYY-MM-DDTHH:MM:SS.sssZ`, as [`crate::RunRow::started_at_utc`]).
    pub start: String,
    /// The end of the span, exclusive, in the same form.
    pub end: String,
}

impl TimeSpan {
    /// The span `[start, end)` of the group `key`.
    pub fn new(key: impl Into<String>, start: impl Into<String>, end: impl Into<String>) -> Self {
        TimeSpan {
            key: key.into(),
            start: start.into(),
            end: end.into(),
        }
    }
}

/// Whether `t` is a canonical UTC key (`YYYY-MM-DDTHH:MM:SS.sssZ`) with a valid time of day.
fn canonical(t: &str) -> bool {
    let b = t.as_bytes();
    b.len() == 24
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b'T',
            13 | 16 => *c == b':',
            19 => *c == b'.',
            23 => *c == b'Z',
            _ => c.is_ascii_digit(),
        })
        && t.get(11..13).is_some_and(|h| h < "24")
        && t.get(14..16).is_some_and(|m| m < "60")
}

/// Whether `spans` (ordered, not overlapping) cover every instant of the UTC day `day`
/// (`YYYY-MM-DD`) inside the window `w`: the runs of a day the calendar left out would be
/// missing from every group.
fn covers(spans: &[TimeSpan], day: &str, w: &Window) -> bool {
    let first = format!("{day}T00:00:00.000Z");
    let last = format!("{day}T23:59:59.999Z");
    let mut at = w
        .since
        .as_deref()
        .map_or(first.as_str(), |s| s.max(first.as_str()))
        .to_owned();
    let mut i = spans.partition_point(|s| s.end <= at);
    loop {
        if at > last || w.until.as_deref().is_some_and(|u| at.as_str() >= u) {
            return true;
        }
        match spans.get(i) {
            Some(s) if s.start <= at => {
                at.clone_from(&s.end);
                i += 1;
            }
            _ => return false,
        }
    }
}

/// Sums with room for taking parts out (a day's sums less the quarter-hours after an instant).
type Signed = [i128; 9];

fn signed(s: &Sums) -> Signed {
    s.map(i128::from)
}

fn add(a: &mut Signed, b: &Signed, sign: i128) {
    for (x, y) in a.iter_mut().zip(b) {
        *x += sign * y;
    }
}

/// The sums of `t` in the order of [`Sums`].
fn sums_of_totals(t: &RunTotals) -> Signed {
    [
        t.runs,
        t.completed,
        t.errors,
        t.cancelled,
        t.invocations,
        t.input_tokens,
        t.cached_input_tokens,
        t.output_tokens,
        t.total_tokens,
    ]
    .map(i128::from)
}

/// `s` as totals; `None` when a sum is negative or past `u64` (the running totals disagree
/// with themselves: the caller sums the rows instead).
fn totals_of(s: &Signed) -> Option<RunTotals> {
    let mut out = [0u64; 9];
    for (o, v) in out.iter_mut().zip(s) {
        *o = u64::try_from(*v).ok()?;
    }
    Some(RunTotals::of_sums(&out))
}

/// What answering one query reads, for [`GroupedRunTotals`]'s cost fields.
#[derive(Default)]
struct Cost {
    /// Rows of the running totals and aggregate rows read.
    rows: u64,
    /// SQLite virtual-machine steps.
    steps: u64,
}

impl RunIndex {
    /// Totals of the runs [`RunIndex::list_runs`] would list for `query` (its `since` and
    /// `until`; its limit and cursor are ignored) whose start lies inside a span of the
    /// calendar `spans_of` gives, grouped by the spans' keys. `spans_of` is called once with
    /// the UTC days (`YYYY-MM-DD`, ascending) holding a run start inside the window, and
    /// returns spans (ascending, not overlapping) that cover every instant of those days
    /// inside the window: for `sessions stats --by day|week|month` in a zone with
    /// daylight-saving changes, the zone's periods cut at the days' edges. Runs without a
    /// usable start are in the group `(unknown date)` when the query has no window (as in
    /// [`RunGrouping::Day`](crate::RunGrouping::Day)). Each run is counted once, as
    /// [`RunIndex::run_totals`] counts it.
    ///
    /// # Cost
    /// One row of the running totals per UTC day holding a run start (`run_day_totals`);
    /// per span end inside a day, one aggregate over at most 48 of that day's quarter-hours
    /// (those before the end, or the day less those after it) and, for an end inside a
    /// quarter-hour, one over that quarter-hour's rows; plus the rows of run ids held by
    /// several files. Not one row per run or per quarter-hour: a zone's calendar costs what
    /// the UTC one does, plus a constant per period.
    ///
    /// `Ok(None)` when the running totals cannot answer exactly (a `session`, `outcome` or
    /// `workspace` filter; a `state.db` without them; a start time that is not canonical; a
    /// sum past `i64::MAX`; partial rows that could not be stored completed; a bound that is
    /// no RFC 3339 timestamp; spans that overlap, are out of order or are not canonical UTC
    /// keys; a run of several files counted in a span that was not given): the caller groups
    /// by [`RunGrouping::QuarterHour`](crate::RunGrouping::QuarterHour) instead.
    ///
    /// # Errors
    /// [`StateError::Db`](crate::StateError::Db).
    pub fn run_totals_in_spans(
        &self,
        query: &RunQuery,
        spans_of: impl FnOnce(&[String]) -> Vec<TimeSpan>,
    ) -> Result<Option<GroupedRunTotals>> {
        if query.session.is_some() || query.outcome.is_some() || query.workspace.is_some() {
            return Ok(None);
        }
        let conn = self.lock();
        if !self.settle_partial_rows(&conn)? {
            return Ok(None);
        }
        let err = || db_err(&self.db_path, "read running totals");
        if !running_totals::is_current(&conn).map_err(err())? {
            return Ok(None);
        }
        let bound = |b: &Option<String>| -> std::result::Result<Option<String>, ()> {
            match b.as_deref() {
                None => Ok(None),
                Some(s) => utc_key(s).map(Some).ok_or(()),
            }
        };
        let (Ok(since), Ok(until)) = (bound(&query.since), bound(&query.until)) else {
            return Ok(None);
        };
        let window = Window { since, until };
        let mut cost = Cost::default();
        let Some((days, _, steps)) = running_totals::read_day_rows(&conn, &window).map_err(err())?
        else {
            return Ok(None);
        };
        cost.rows += days.len() as u64;
        cost.steps += steps;
        let dates: Vec<String> = days
            .keys()
            .filter(|d| d.as_str() != running_totals::UNKNOWN_DATE)
            .cloned()
            .collect();
        let spans = spans_of(&dates);
        let ordered = spans
            .iter()
            .all(|s| canonical(&s.start) && canonical(&s.end) && s.start < s.end)
            && spans.windows(2).all(|w| w[0].end <= w[1].start);
        if !ordered || !dates.iter().all(|d| covers(&spans, d, &window)) {
            return Ok(None);
        }
        let mut groups: BTreeMap<String, Signed> = BTreeMap::new();
        if window.since.is_none()
            && window.until.is_none()
            && let Some(unknown) = days.get(running_totals::UNKNOWN_DATE)
        {
            groups.insert(running_totals::UNKNOWN_DATE.to_owned(), signed(unknown));
        }
        // Prefix sums at span ends: the sums from the start of the end's UTC day to it.
        let mut at: BTreeMap<String, Signed> = BTreeMap::new();
        for s in &spans {
            let start = window
                .since
                .as_deref()
                .map_or(s.start.as_str(), |w| w.max(s.start.as_str()));
            let end = window
                .until
                .as_deref()
                .map_or(s.end.as_str(), |w| w.min(s.end.as_str()));
            if start >= end {
                continue;
            }
            // Whole days from the start's day up to the end's day, then the two ends.
            let (first, last) = (&start[..10], &end[..10]);
            let mut sums: Signed = [0; 9];
            for (_, d) in days.range::<str, _>((
                std::ops::Bound::Included(first),
                std::ops::Bound::Excluded(last),
            )) {
                add(&mut sums, &signed(d), 1);
            }
            for (t, sign) in [(end, 1), (start, -1)] {
                let prefix = match at.get(t) {
                    Some(p) => *p,
                    None => {
                        let Some(p) = self.day_prefix(&conn, &days, t, &mut cost)? else {
                            return Ok(None);
                        };
                        at.insert(t.to_owned(), p);
                        p
                    }
                };
                add(&mut sums, &prefix, sign);
            }
            add(groups.entry(s.key.clone()).or_insert([0; 9]), &sums, 1);
        }
        // Runs held by several files: every file is in the sums; count each run once.
        let in_span = |at: Option<&str>| -> Option<String> {
            match at {
                None | Some("") => (window.since.is_none() && window.until.is_none())
                    .then(|| running_totals::UNKNOWN_DATE.to_owned()),
                Some(t) => {
                    let i = spans.partition_point(|s| s.end.as_str() <= t);
                    spans
                        .get(i)
                        .filter(|s| s.start.as_str() <= t)
                        .map(|s| s.key.clone())
                }
            }
        };
        let (filters, args) = run_filters(query, None);
        let doubles = self.rows_of_dup_ids(&conn, &filters, &args)?;
        let rows_read = doubles.len() as u64;
        let mut duplicated = Vec::new();
        for row in doubles {
            let Some(key) = in_span(row.started_at_utc.as_deref()) else {
                return Ok(None);
            };
            add(
                groups.entry(key).or_insert([0; 9]),
                &sums_of_totals(&RunTotals::of_row(&row)),
                -1,
            );
            if let Some(row) = self.chosen(&conn, row)? {
                let Some(key) = in_span(row.started_at_utc.as_deref()) else {
                    return Ok(None);
                };
                add(
                    groups.entry(key).or_insert([0; 9]),
                    &sums_of_totals(&RunTotals::of_row(&row)),
                    1,
                );
                duplicated.push(row);
            }
        }
        let mut out = GroupedRunTotals {
            from_running_totals: true,
            rows_read,
            groups_summed: cost.rows,
            sql_steps: cost.steps,
            duplicated,
            ..GroupedRunTotals::default()
        };
        for (key, sums) in groups {
            let Some(t) = totals_of(&sums) else {
                return Ok(None);
            };
            if t.runs > 0 {
                out.all.add(&t);
                out.groups.insert(key, t);
            }
        }
        Ok(Some(out))
    }

    /// The sums of the runs started from the beginning of the UTC day of `t` (a canonical
    /// key) up to `t`, exclusive: nothing at midnight or on a day without runs; otherwise
    /// the quarter-hours before `t`'s (or the day's sums less the quarter-hours after it,
    /// whichever reads fewer), and the rows of `t`'s quarter-hour before `t` (or less those
    /// from `t` on). `None` when a sum is unusable.
    fn day_prefix(
        &self,
        conn: &Connection,
        days: &BTreeMap<String, Sums>,
        t: &str,
        cost: &mut Cost,
    ) -> Result<Option<Signed>> {
        let day = &t[..10];
        let Some(whole) = days.get(day) else {
            return Ok(Some([0; 9]));
        };
        if &t[10..] == "T00:00:00.000Z" {
            return Ok(Some([0; 9]));
        }
        let hour: u32 = t[11..13].parse().unwrap_or(0);
        let minute: u32 = t[14..16].parse().unwrap_or(0);
        let index = hour * 4 + minute / 15;
        let quarter = format!("{}{:02}", &t[..14], minute - minute % 15);
        let quarter_start = format!("{quarter}:00.000Z");
        let quarter_last = format!("{}{:02}:59.999Z", &t[..14], minute - minute % 15 + 14);
        let on_quarter = quarter_start == t;
        // Before half the day: the quarter-hours before `t`'s, plus its rows before `t`.
        // After: the day less the quarter-hours from `t`'s on (after it when `t` is inside
        // it), less its rows from `t` on.
        let (mut out, sign, from, to, edge) = if index < 48 {
            let edge = (!on_quarter).then(|| (quarter_start, t.to_owned(), "<"));
            ([0; 9], 1, format!("{day}T00:00"), quarter.clone(), edge)
        } else if on_quarter {
            (signed(whole), -1, quarter.clone(), format!("{day}U"), None)
        } else {
            let edge = Some((t.to_owned(), quarter_last, "<="));
            (
                signed(whole),
                -1,
                format!("{quarter}~"),
                format!("{day}U"),
                edge,
            )
        };
        let q = running_totals::quarter_range(conn, &from, &to)
            .map_err(db_err(&self.db_path, "read running totals"))?;
        let Some((q, steps)) = q else {
            return Ok(None);
        };
        cost.rows += 1;
        cost.steps += steps;
        add(&mut out, &signed(&q), sign);
        if let Some((from, to, op)) = edge {
            let sql = Self::sum_sql(
                "''",
                "",
                &format!(" AND started_at_utc >= ? AND started_at_utc {op} ?"),
            );
            let (summed, steps) =
                self.sum_groups(conn, &sql, &[Value::Text(from), Value::Text(to)])?;
            let Some(groups) = summed else {
                return Ok(None);
            };
            cost.rows += 1;
            cost.steps += steps;
            for (_, g) in groups {
                add(&mut out, &sums_of_totals(&g), sign);
            }
        }
        Ok(Some(out))
    }
}

#[cfg(test)]
mod tests {
    use super::canonical;

    #[test]
    fn only_canonical_utc_keys_are_span_ends() {
        assert!(canonical("2026-03-29T01:00:00.000Z"));
        assert!(canonical("1889-12-31T23:07:00.000Z"));
        assert!(!canonical("2026-03-29T24:00:00.000Z"));
        assert!(!canonical("2026-03-29T01:60:00.000Z"));
        assert!(!canonical("2026-03-29T01:00:00Z"));
        assert!(!canonical("2026-03-29 01:00:00.000Z"));
    }
}
