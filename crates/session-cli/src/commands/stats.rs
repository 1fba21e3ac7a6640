//! `sessions stats [--by day|week|month|model|session] [--tz ZONE]`: token usage and run
//! counts from the run index, with a small bar chart of total tokens.
//!
//! Day, week and month groups are calendar periods of the `--tz` zone. In a zone with one
//! fixed offset (`UTC`, `+05:30`) the index answers by the zone's date of each start
//! ([`RunGrouping::DayAtOffset`]) and each day is put into its period here; in a zone with
//! daylight-saving changes it answers by UTC quarter-hour ([`RunGrouping::QuarterHour`]) and
//! each quarter-hour is put into its period here. Both come from the running totals the index
//! keeps (one row per quarter-hour holding a run start, not one per run) when the offsets are
//! multiples of 15 minutes, as every offset in use is; a quarter-hour that a change of offset
//! falls inside, or whose offset is no multiple of 15 minutes (local mean time before a zone's
//! standard time), is summed again by minute for that quarter-hour alone. A fixed offset of
//! seconds is grouped by UTC minute ([`RunGrouping::Minute`]), summing the rows.

use std::collections::BTreeMap;

use session_state::{
    GroupedRunTotals, IndexedRunOutcome, RunGrouping, RunQuery, RunTotals, TimeSpan,
};

use crate::Ctx;
use crate::cli::{StatsArgs, StatsBy};
use crate::error::{CliError, EXIT_OK};
use crate::json_rows::{
    self, Outcome, OutcomeCounts, Row, RunTotalsRow, StatsGroupRow, StatsSummary, SummaryRow,
    write_row,
};
use crate::style::thousands;
use crate::support::listing::bound;
use crate::support::open::{open_reading, refresh_index, state_err};
use crate::support::table::{Cell, Column, Step, Table};
use crate::timefmt::parse_zone;

/// A calendar period of `stats --by day|week|month`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Period {
    Day,
    Week,
    Month,
}

impl Period {
    /// The period of `zone` holding the UTC minute `minute` (`YYYY-MM-DDTHH:MM`, a key of
    /// [`RunGrouping::Minute`]): `2026-11-30`, ISO week `2026-W48` (Monday to Sunday, in the
    /// ISO week-numbering year), or `2026-11`. Keys that are not minutes (`(unknown date)`)
    /// stay as they are.
    fn key(self, minute: &str, zone: &jiff::tz::TimeZone) -> String {
        let Ok(ts) = format!("{minute}:00Z").parse::<jiff::Timestamp>() else {
            return minute.to_owned();
        };
        let date = ts.to_zoned(zone.clone()).date();
        match self {
            Period::Day => date.to_string(),
            Period::Week => {
                let w = date.iso_week_date();
                format!("{:04}-W{:02}", w.year(), w.week())
            }
            Period::Month => format!("{:04}-{:02}", date.year(), date.month()),
        }
    }

    /// The period holding the date `day` (`YYYY-MM-DD`, a key of
    /// [`RunGrouping::DayAtOffset`], already the zone's date). Keys that are not dates
    /// (`(unknown date)`) stay as they are.
    fn key_of_day(self, day: &str) -> String {
        match day.parse::<jiff::civil::Date>() {
            Ok(date) => self.key_of_date(date),
            Err(_) => day.to_owned(),
        }
    }

    /// The period holding the date `date` of the zone.
    fn key_of_date(self, date: jiff::civil::Date) -> String {
        match self {
            Period::Day => date.to_string(),
            Period::Week => {
                let w = date.iso_week_date();
                format!("{:04}-W{:02}", w.year(), w.week())
            }
            Period::Month => format!("{:04}-{:02}", date.year(), date.month()),
        }
    }
}

/// Seconds in a day.
const DAY_SECS: i64 = 86_400;

/// The canonical UTC key (`YYYY-MM-DDTHH:MM:SS.sssZ`) of the whole second `secs` since the
/// epoch; `None` outside the years the run index keys (0000–9999).
fn utc_key_of(secs: i64) -> Option<String> {
    let t = jiff::Timestamp::from_second(secs).ok()?;
    let dt = jiff::tz::TimeZone::UTC.to_datetime(t);
    (0..=9999).contains(&dt.year()).then(|| {
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.000Z",
            dt.year(),
            dt.month(),
            dt.day(),
            dt.hour(),
            dt.minute(),
            dt.second()
        )
    })
}

/// The spans of `period`s of `zone` that cover the UTC days `days` (`YYYY-MM-DD`, ascending,
/// as [`session_state::RunIndex::run_totals_in_spans`] gives them), each cut at the days'
/// edges. A run counts in the period of its start's minute (as the quarter-hour path puts a
/// quarter-hour holding a change of day into periods minute by minute), so each span runs
/// from the first whole minute at or after its first instant. Within a day the period
/// changes at the zone's local midnight or at a change of offset, whichever comes first (a
/// change can move the date back: its periods get several spans); consecutive spans of one
/// period are joined.
fn zone_spans(period: Period, zone: &jiff::tz::TimeZone, days: &[String]) -> Vec<TimeSpan> {
    let ceil_minute = |s: i64| s.div_euclid(60) * 60 + if s.rem_euclid(60) > 0 { 60 } else { 0 };
    let mut out: Vec<(String, i64, i64)> = Vec::new();
    for day in days {
        let Ok(date) = day.parse::<jiff::civil::Date>() else {
            continue;
        };
        let Ok(start) = date.to_zoned(jiff::tz::TimeZone::UTC) else {
            continue;
        };
        let start = start.timestamp().as_second();
        let end = start + DAY_SECS;
        let mut t = start;
        while t < end {
            let Ok(at) = jiff::Timestamp::from_second(t) else {
                break;
            };
            let key = period.key_of_date(zone.to_datetime(at).date());
            let local = t + i64::from(zone.to_offset(at).seconds());
            let midnight = t + DAY_SECS - local.rem_euclid(DAY_SECS);
            let change = zone
                .following(at)
                .next()
                .map(|c| c.timestamp().as_second())
                .filter(|c| *c > t);
            let stop = change.map_or(midnight, |c| c.min(midnight)).min(end);
            let (a, b) = (ceil_minute(t), ceil_minute(stop));
            if a < b {
                match out.last_mut() {
                    Some((k, _, last_end)) if *k == key && *last_end == a => *last_end = b,
                    _ => out.push((key, a, b)),
                }
            }
            t = stop;
        }
    }
    out.into_iter()
        .filter_map(|(key, a, b)| Some(TimeSpan::new(key, utc_key_of(a)?, utc_key_of(b)?)))
        .collect()
}

/// How the index groups the runs for a calendar `period` of `zone`: by the zone's date
/// ([`RunGrouping::DayAtOffset`], one row per day) when the zone has one fixed offset of
/// whole minutes; by UTC minute ([`RunGrouping::Minute`]) for a fixed offset with seconds;
/// else by UTC quarter-hour ([`RunGrouping::QuarterHour`]), put into periods by
/// [`Period::key`] (or by minute where [`needs_minutes`]).
fn period_grouping(zone: &jiff::tz::TimeZone) -> RunGrouping {
    match zone.to_fixed_offset() {
        Ok(offset) if offset.seconds() % 60 == 0 => RunGrouping::DayAtOffset(offset.seconds() / 60),
        Ok(_) => RunGrouping::Minute,
        Err(_) => RunGrouping::QuarterHour,
    }
}

/// A quarter-hour of UTC.
const QUARTER: jiff::SignedDuration = jiff::SignedDuration::from_mins(15);

/// Whether the quarter-hour from `start` may hold instants of two days of `zone`: its offset
/// changes strictly inside it, or its offset is no multiple of 15 minutes (so a day of the
/// zone begins inside it). Its runs are then grouped by minute.
fn needs_minutes(zone: &jiff::tz::TimeZone, start: jiff::Timestamp) -> bool {
    if zone.to_offset(start).seconds() % (15 * 60) != 0 {
        return true;
    }
    let end = start.checked_add(QUARTER).unwrap_or(start);
    zone.following(start)
        .next()
        .is_some_and(|t| t.timestamp() < end)
}

/// The totals of the quarter-hour from `start` (within `query`'s window) by UTC minute.
// RunQuery is non_exhaustive, so it cannot be built with a struct literal outside its crate.
#[allow(clippy::field_reassign_with_default)]
fn minutes_of_quarter(
    store: &session_state::StateStore,
    query: &RunQuery,
    start: jiff::Timestamp,
) -> Result<BTreeMap<String, RunTotals>, CliError> {
    let end = start.checked_add(QUARTER).unwrap_or(start);
    let at = |t: Option<&String>| t.and_then(|t| t.parse::<jiff::Timestamp>().ok());
    let since = at(query.since.as_ref()).map_or(start, |s| s.max(start));
    let until = at(query.until.as_ref()).map_or(end, |u| u.min(end));
    let mut window = RunQuery::default();
    window.since = Some(since.to_string());
    window.until = Some(until.to_string());
    Ok(store
        .run_index()
        .run_totals(&window, RunGrouping::Minute)
        .map_err(state_err)?
        .groups)
}

/// The name of `zone` for `--json` (`UTC`, an IANA name, or the zone's rule).
fn zone_name(zone: &jiff::tz::TimeZone) -> String {
    match zone.iana_name() {
        Some("Etc/UTC" | "UTC") => "UTC".to_owned(),
        Some(name) => name.to_owned(),
        None if *zone == jiff::tz::TimeZone::UTC => "UTC".to_owned(),
        None => format!("{zone:?}"),
    }
}

const BAR_WIDTH: usize = 30;

// RunQuery is non_exhaustive, so it cannot be built with a struct literal outside its crate.
#[allow(clippy::field_reassign_with_default)]
pub(crate) fn run(ctx: &mut Ctx<'_>, args: &StatsArgs) -> Result<i32, CliError> {
    let (store, why) = open_reading(ctx)?;
    refresh_index(ctx, &store)?;
    let mut query = RunQuery::default();
    let zone = parse_zone(&args.tz, &ctx.zone)?;
    query.since = bound(args.since.as_deref(), ctx.now, &zone)?;
    query.until = bound(args.until.as_deref(), ctx.now, &zone)?;
    let query_filters = (query.since.clone(), query.until.clone());
    let store = crate::support::open::answering_store(ctx, store, why)?;
    let period = match args.by {
        StatsBy::Day => Some(Period::Day),
        StatsBy::Week => Some(Period::Week),
        StatsBy::Month => Some(Period::Month),
        StatsBy::Model | StatsBy::Session => None,
    };
    let grouping = match args.by {
        StatsBy::Day | StatsBy::Week | StatsBy::Month => period_grouping(&zone),
        StatsBy::Model => RunGrouping::Model,
        StatsBy::Session => RunGrouping::Session,
    };
    let (mut totals, groups) = period_totals(&store, &query, grouping, period, &zone)?;
    let root_path = ctx.root.path.clone();
    for row in &mut totals.duplicated {
        row.path = crate::support::open::real_path(&store, &root_path, &row.path);
        row.other_files = row
            .other_files
            .iter()
            .map(|p| crate::support::open::real_path(&store, &root_path, p))
            .collect();
    }
    let all = totals.all;
    crate::support::store::warn_other_files(ctx, &totals.duplicated);
    crate::support::listing::report_not_runs(ctx, &store, false)?;
    let split = if args.json {
        split_unfinished(
            ctx,
            &store,
            query_filters,
            grouping,
            period.map(|p| (p, &zone)),
            totals.all.open,
        )?
    } else {
        BTreeMap::new()
    };
    write_stats(ctx, args, period, &zone, &groups, &all, &split)
}

/// The totals of `query` grouped `by` (a calendar `period` of `zone` for day, week and
/// month) with the groups keyed as `stats` shows them. A zone with daylight-saving changes
/// is answered from the running totals' UTC days, with the quarter-hours at each period's
/// ends ([`zone_spans`], [`session_state::RunIndex::run_totals_in_spans`]): about one row per
/// day and two aggregates per period, not one row per quarter-hour holding a run. When
/// those cannot answer it is grouped by quarter-hour ([`by_grouping`]), with the same
/// result.
fn period_totals(
    store: &session_state::StateStore,
    query: &RunQuery,
    by: RunGrouping,
    period: Option<Period>,
    zone: &jiff::tz::TimeZone,
) -> Result<(GroupedRunTotals, BTreeMap<String, RunTotals>), CliError> {
    if let (RunGrouping::QuarterHour, Some(p)) = (by, period)
        && let Some(totals) = store
            .run_index()
            .run_totals_in_spans(query, |days| zone_spans(p, zone, days))
            .map_err(state_err)?
    {
        let groups = totals.groups.clone();
        return Ok((totals, groups));
    }
    by_grouping(store, query, by, period, zone)
}

/// [`period_totals`] from the index's groups `by` (summed inside SQLite; only runs held by
/// several files come back as rows), each put into its period of `zone` here: a day of the
/// zone's date, or a quarter-hour's period (minute by minute for a quarter-hour holding the
/// start of a day, [`needs_minutes`]).
fn by_grouping(
    store: &session_state::StateStore,
    query: &RunQuery,
    by: RunGrouping,
    period: Option<Period>,
    zone: &jiff::tz::TimeZone,
) -> Result<(GroupedRunTotals, BTreeMap<String, RunTotals>), CliError> {
    let totals = store.run_index().run_totals(query, by).map_err(state_err)?;
    let mut groups: BTreeMap<String, RunTotals> = BTreeMap::new();
    for (k, t) in &totals.groups {
        let key = match (period, by) {
            (Some(p), RunGrouping::DayAtOffset(_)) => p.key_of_day(k),
            (Some(p), RunGrouping::QuarterHour) => {
                match format!("{k}:00Z").parse::<jiff::Timestamp>() {
                    Ok(start) if needs_minutes(zone, start) => {
                        for (minute, t) in minutes_of_quarter(store, query, start)? {
                            groups.entry(p.key(&minute, zone)).or_default().add(&t);
                        }
                        continue;
                    }
                    _ => p.key(k, zone),
                }
            }
            (Some(p), _) => p.key(k, zone),
            (None, _) => k.clone(),
        };
        groups.entry(key).or_default().add(t);
    }
    Ok((totals, groups))
}

/// `stats` on a shared store: the catalogue's runs of the window
/// ([`RunCatalogue::list_runs`](session_storage::RunCatalogue::list_runs), paged), summed
/// per group here, shown as on a local store.
// RunTotals is non_exhaustive, so it cannot be built with a struct literal outside its crate.
#[allow(clippy::field_reassign_with_default)]
pub(crate) fn stats_shared(
    ctx: &mut Ctx<'_>,
    shared: &crate::backend::Shared,
    args: &StatsArgs,
) -> Result<i32, CliError> {
    use session_storage::{Outcome as Stored, RunCatalogue, RunListQuery};
    let zone = parse_zone(&args.tz, &ctx.zone)?;
    let period = match args.by {
        StatsBy::Day => Some(Period::Day),
        StatsBy::Week => Some(Period::Week),
        StatsBy::Month => Some(Period::Month),
        StatsBy::Model | StatsBy::Session => None,
    };
    let by = match args.by {
        StatsBy::Day | StatsBy::Week | StatsBy::Month => RunGrouping::Minute,
        StatsBy::Model => RunGrouping::Model,
        StatsBy::Session => RunGrouping::Session,
    };
    let pg = shared.backend()?;
    let mut query = RunListQuery {
        since: bound(args.since.as_deref(), ctx.now, &zone)?,
        until: bound(args.until.as_deref(), ctx.now, &zone)?,
        limit: Some(1000),
        ..RunListQuery::default()
    };
    let mut groups: BTreeMap<String, RunTotals> = BTreeMap::new();
    let mut split: BTreeMap<String, Unfinished> = BTreeMap::new();
    let mut all = RunTotals::default();
    loop {
        let page = pg
            .list_runs(&query)
            .map_err(|e| crate::backend::storage_err(shared, e))?;
        for s in &page.runs {
            let mut t = RunTotals::default();
            t.runs = 1;
            match &s.outcome {
                Stored::Completed => t.completed = 1,
                Stored::Error => t.errors = 1,
                Stored::Cancelled => t.cancelled = 1,
                _ => t.open = 1,
            }
            t.invocations = s.invocation_count;
            t.input_tokens = s.tokens.input;
            t.cached_input_tokens = s.tokens.cached_input;
            t.output_tokens = s.tokens.output;
            t.total_tokens = s.tokens.total;
            let key = group_key_of(
                s.model_provider.as_deref(),
                s.model_name.as_deref(),
                s.session_id.as_deref(),
                s.started_at_utc.as_deref(),
                by,
                period.map(|p| (p, &zone)),
            );
            match crate::support::listing::summary_outcome(s, ctx.now) {
                Outcome::Running => {
                    let u = split.entry(key.clone()).or_default();
                    u.running = u.running.saturating_add(1);
                }
                Outcome::Crashed => {
                    let u = split.entry(key.clone()).or_default();
                    u.crashed = u.crashed.saturating_add(1);
                }
                _ => {}
            }
            groups.entry(key).or_default().add(&t);
            all.add(&t);
        }
        match page.next_cursor {
            Some(c) => query.after = Some(c),
            None => break,
        }
    }
    write_stats(ctx, args, period, &zone, &groups, &all, &split)
}

/// The `stats` output of either kind of store: `--json` group rows and the summary, or the
/// table and its hint. `split` tells each group's open runs apart (needed with `--json`).
fn write_stats(
    ctx: &mut Ctx<'_>,
    args: &StatsArgs,
    period: Option<Period>,
    zone: &jiff::tz::TimeZone,
    groups: &BTreeMap<String, RunTotals>,
    all: &RunTotals,
    split: &BTreeMap<String, Unfinished>,
) -> Result<i32, CliError> {
    let tz = period.map(|_| zone_name(zone));
    if args.json {
        let by = match args.by {
            StatsBy::Day => json_rows::StatsBy::Day,
            StatsBy::Week => json_rows::StatsBy::Week,
            StatsBy::Month => json_rows::StatsBy::Month,
            StatsBy::Model => json_rows::StatsBy::Model,
            StatsBy::Session => json_rows::StatsBy::Session,
        };
        let none = Unfinished::default();
        for (key, g) in groups {
            let row = StatsGroupRow {
                by,
                key: key.clone(),
                tz: tz.clone(),
                totals: totals_row(g, split.get(key).unwrap_or(&none)),
            };
            write_row(ctx.out, &Row::StatsGroup(row))?;
        }
        let mut every = Unfinished::default();
        for u in split.values() {
            every.running = every.running.saturating_add(u.running);
            every.crashed = every.crashed.saturating_add(u.crashed);
        }
        let summary = StatsSummary {
            by,
            tz,
            totals: totals_row(all, &every),
        };
        write_row(ctx.out, &Row::Summary(SummaryRow::Stats(summary)))?;
        return Ok(EXIT_OK);
    }
    // On a terminal: the bar narrows first (to 10 cells), then the key (a session id to its
    // 8-character prefix, a model name clipped), then the split by outcome goes.
    const KEY: usize = 0;
    const BAR: usize = 9;
    let key = match args.by {
        StatsBy::Day => Column::text("DAY"),
        StatsBy::Week => Column::text("WEEK"),
        StatsBy::Month => Column::text("MONTH"),
        StatsBy::Model => Column::text("MODEL"),
        StatsBy::Session => Column::id("SESSION"),
    };
    let mut table = Table::new(
        vec![
            key,
            Column::number("RUNS"),
            Column::number("OK"),
            Column::number("ERR"),
            Column::number("CANC"),
            Column::number("OPEN"),
            Column::number("INPUT"),
            Column::number("OUTPUT"),
            Column::number("TOTAL"),
            Column::bar("TOTAL TOKENS", BAR_WIDTH),
        ],
        vec![
            Step::Shrink(BAR, 10),
            Step::Shrink(KEY, 12),
            Step::Shrink(KEY, 8),
            Step::Drop(2),
            Step::Drop(3),
            Step::Drop(4),
            Step::Drop(5),
            Step::Shrink(BAR, 4),
        ],
    );
    let max = groups.values().map(|g| g.total_tokens).max().unwrap_or(0);
    let cells = |key: &str, g: &RunTotals| {
        vec![
            Cell::text(key),
            Cell::text(g.runs.to_string()),
            Cell::text(g.completed.to_string()),
            Cell::text(g.errors.to_string()),
            Cell::text(g.cancelled.to_string()),
            Cell::text(g.open.to_string()),
            Cell::text(thousands(g.input_tokens)),
            Cell::text(thousands(g.output_tokens)),
            Cell::text(thousands(g.total_tokens)),
        ]
    };
    for (k, g) in groups {
        let mut row = cells(k, g);
        row.push(Cell::Bar {
            value: g.total_tokens,
            max,
        });
        table.row(row);
    }
    table.row(cells("all", all));
    ctx.table(&table)?;
    ctx.hint(&format!(
        "{} invocation(s); {} cached input tokens",
        thousands(all.invocations),
        thousands(all.cached_input_tokens)
    ))?;
    Ok(EXIT_OK)
}

/// Runs without a terminal record of one group, told apart the way `runs` does.
#[derive(Debug, Default, Clone, Copy)]
struct Unfinished {
    running: u64,
    crashed: u64,
}

/// Splits the runs the index has as open (no terminal record) into `running` and `crashed`
/// per group, as `runs` shows them: lists only those rows (`open` of them, known from the
/// totals) and probes each file's lock. Nothing is read when no run is open.
// RunQuery is non_exhaustive, so it cannot be built with a struct literal outside its crate.
#[allow(clippy::field_reassign_with_default)]
fn split_unfinished(
    ctx: &Ctx<'_>,
    store: &session_state::StateStore,
    (since, until): (Option<String>, Option<String>),
    by: RunGrouping,
    period: Option<(Period, &jiff::tz::TimeZone)>,
    open: u64,
) -> Result<BTreeMap<String, Unfinished>, CliError> {
    let mut out: BTreeMap<String, Unfinished> = BTreeMap::new();
    if open == 0 {
        return Ok(out);
    }
    let mut query = RunQuery::default();
    query.since = since;
    query.until = until;
    query.outcome = Some(IndexedRunOutcome::Open);
    let limit = usize::try_from(open)
        .unwrap_or(usize::MAX)
        .min(crate::cli::MAX_COUNT);
    let (rows, _) =
        crate::support::listing::fetch(store, &ctx.root.path, query, &[], None, limit, ctx.now)?;
    for (row, outcome) in &rows {
        let u = out.entry(group_key(row, by, period)).or_default();
        match outcome {
            Outcome::Running => u.running = u.running.saturating_add(1),
            Outcome::Crashed => u.crashed = u.crashed.saturating_add(1),
            _ => {}
        }
    }
    Ok(out)
}

/// The group key of a run for `by`, as the index's totals compute it (a calendar period of
/// the zone for `period`, from the run's UTC start minute).
fn group_key(
    row: &session_state::RunRow,
    by: RunGrouping,
    period: Option<(Period, &jiff::tz::TimeZone)>,
) -> String {
    group_key_of(
        row.model_provider.as_deref(),
        row.model_name.as_deref(),
        row.session_id.as_deref(),
        row.started_at_utc.as_deref(),
        by,
        period,
    )
}

/// [`group_key`] from a run's provider, model, session and UTC start.
fn group_key_of(
    provider: Option<&str>,
    model: Option<&str>,
    session: Option<&str>,
    started_at_utc: Option<&str>,
    by: RunGrouping,
    period: Option<(Period, &jiff::tz::TimeZone)>,
) -> String {
    match by {
        RunGrouping::Model => match (provider, model) {
            (Some(p), Some(n)) => format!("{p}/{n}"),
            (None, Some(n)) => n.to_owned(),
            _ => "(unknown model)".into(),
        },
        RunGrouping::Session => session.unwrap_or("(no session)").to_owned(),
        _ => match (started_at_utc, period) {
            (Some(k), Some((p, zone))) if k.len() >= 16 => p.key(k.get(..16).unwrap_or(k), zone),
            (Some(k), None) if k.len() >= 10 => k.get(..10).unwrap_or(k).to_owned(),
            _ => "(unknown date)".into(),
        },
    }
}

/// The `--json` totals of a group: the index's counts, its open runs split into running,
/// crashed and (the rest: a `run.end` outcome this version does not know) other.
fn totals_row(t: &RunTotals, u: &Unfinished) -> RunTotalsRow {
    let running = u.running.min(t.open);
    let crashed = u.crashed.min(t.open - running);
    RunTotalsRow {
        runs: t.runs,
        outcomes: OutcomeCounts {
            completed: t.completed,
            error: t.errors,
            cancelled: t.cancelled,
            running,
            crashed,
            other: t.open - running - crashed,
        },
        invocations: t.invocations,
        input_tokens: t.input_tokens,
        cached_input_tokens: t.cached_input_tokens,
        output_tokens: t.output_tokens,
        total_tokens: t.total_tokens,
    }
}

#[cfg(test)]
mod tests {
    use super::{
        Period, RunGrouping, RunQuery, by_grouping, period_grouping, period_totals, zone_spans,
    };

    #[test]
    fn a_fixed_offset_zone_is_grouped_by_its_day_in_sql_a_changing_one_by_minute() {
        use jiff::tz::{Offset, TimeZone};
        assert_eq!(period_grouping(&TimeZone::UTC), RunGrouping::DayAtOffset(0));
        let ist = TimeZone::fixed(Offset::from_seconds(330 * 60).unwrap());
        assert_eq!(period_grouping(&ist), RunGrouping::DayAtOffset(330));
        let west = TimeZone::fixed(Offset::from_seconds(-5 * 3600).unwrap());
        assert_eq!(period_grouping(&west), RunGrouping::DayAtOffset(-300));
        let odd = TimeZone::fixed(Offset::from_seconds(3600 + 7).unwrap());
        assert_eq!(period_grouping(&odd), RunGrouping::Minute);
        let berlin = TimeZone::get("Europe/Berlin").unwrap();
        assert_eq!(period_grouping(&berlin), RunGrouping::QuarterHour);
    }

    #[test]
    fn only_quarter_hours_holding_two_days_of_the_zone_are_grouped_by_minute() {
        use jiff::tz::TimeZone;
        let at = |t: &str| t.parse::<jiff::Timestamp>().unwrap();
        let berlin = TimeZone::get("Europe/Berlin").unwrap();
        // The change of 2026-03-29 is at 01:00 UTC, on a quarter-hour: no quarter holds it.
        for t in [
            "2026-03-29T00:45:00Z",
            "2026-03-29T01:00:00Z",
            "2026-07-01T12:15:00Z",
        ] {
            assert!(!super::needs_minutes(&berlin, at(t)), "{t}");
        }
        // Before 1893 Berlin kept local mean time, +00:53:28: its days begin mid-quarter.
        assert!(super::needs_minutes(&berlin, at("1890-01-01T00:00:00Z")));
        // Liberia changed from -00:44:30 to +00:00 on 1972-01-07 at 00:44:30 UTC.
        let monrovia = TimeZone::get("Africa/Monrovia").unwrap();
        assert!(super::needs_minutes(&monrovia, at("1972-01-07T00:30:00Z")));
        assert!(!super::needs_minutes(&monrovia, at("1972-01-07T00:45:00Z")));
    }

    /// Writes a run file under `root` started at `at` (canonical UTC, or `None` for a header
    /// without a start time) with `tokens` total tokens, ending with `outcome`.
    fn plant(root: &std::path::Path, run: &str, at: Option<&str>, tokens: u64, outcome: &str) {
        let day = root.join("2026/03/29");
        std::fs::create_dir_all(&day).unwrap();
        let started = at.map_or(String::new(), |t| format!(r#","started_at":"{t}""#));
        let ts = at.unwrap_or("2026-03-29T00:00:00.000Z");
        let lines = [
            format!(
                r#"{{"type":"header","schema_version":1,"run_id":"{run}","session_id":"s-1"{started}}}"#
            ),
            format!(
                r#"{{"type":"llm.response","run_id":"{run}","ts":"{ts}","seq":1,"output":{{"messages":[],"usage":{{"model":"m","input_tokens":{tokens},"output_tokens":1,"total_tokens":{}}}}}}}"#,
                tokens + 1
            ),
            format!(r#"{{"type":"run.end","run_id":"{run}","ts":"{ts}","outcome":"{outcome}"}}"#),
        ];
        let mut text = lines.join("\n");
        text.push('\n');
        std::fs::write(day.join(format!("{run}.jsonl")), text).unwrap();
    }

    /// Runs every 11 minutes around the changes of offset of 2026 in Europe and North
    /// America, around 1890-01-01 (Berlin's local mean time, +00:53:28), one without a start
    /// time, and one run held by two files that start on different days.
    fn zone_store() -> (tempfile::TempDir, session_state::StateStore) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let mut n = 0u64;
        let mut stretch = |from: &str, minutes: i64| {
            let start: jiff::Timestamp = from.parse().unwrap();
            let mut m = 0;
            while m < minutes {
                let at = start
                    .checked_add(jiff::SignedDuration::from_secs(m * 60 + (m % 7) * 5))
                    .unwrap();
                let key = at.strftime("%Y-%m-%dT%H:%M:%S.000Z").to_string();
                let outcome = ["completed", "error", "cancelled"][(n % 3) as usize];
                plant(root, &format!("r{n:06}"), Some(&key), 100 + n, outcome);
                n += 1;
                m += 11;
            }
        };
        stretch("2026-03-27T12:00:00Z", 4 * 1440);
        stretch("2026-10-24T12:00:00Z", 9 * 1440);
        stretch("1889-12-31T20:00:00Z", 8 * 60);
        plant(root, "no-start", None, 7, "completed");
        plant(
            root,
            "twice",
            Some("2026-03-28T23:30:00.000Z"),
            5,
            "completed",
        );
        let other = root.join("2026/03/30");
        std::fs::create_dir_all(&other).unwrap();
        let text = std::fs::read_to_string(root.join("2026/03/29/twice.jsonl")).unwrap();
        std::fs::write(
            other.join("twice.jsonl"),
            text.replace("2026-03-28T23:30:00.000Z", "2026-03-29T22:10:00.000Z"),
        )
        .unwrap();
        let store = session_state::StateStore::open(root).unwrap();
        store.index_runs().unwrap();
        (dir, store)
    }

    /// `stats --by day|week|month` in zones with daylight-saving changes (whole-hour,
    /// half-hour and half-hour-offset zones) and local mean time: the totals from UTC days
    /// and span ends are those of the quarter-hour path, group by group, with and without a
    /// window that cuts quarter-hours, and read a fraction of its rows.
    // RunQuery is non_exhaustive, so it cannot be built with a struct literal outside its crate.
    #[allow(clippy::field_reassign_with_default)]
    #[test]
    fn zone_periods_from_day_totals_equal_the_quarter_hour_path() {
        let (_dir, store) = zone_store();
        let mut windowed = RunQuery::default();
        windowed.since = Some("2026-03-28T13:07:30.000Z".into());
        windowed.until = Some("2026-10-31T00:52:10.250Z".into());
        for zone in [
            "Europe/Berlin",
            "America/New_York",
            "Asia/Kolkata",
            "Australia/Lord_Howe",
            "America/St_Johns",
        ] {
            let tz = jiff::tz::TimeZone::get(zone).unwrap();
            assert_eq!(period_grouping(&tz), RunGrouping::QuarterHour, "{zone}");
            for period in [Period::Day, Period::Week, Period::Month] {
                for query in [RunQuery::default(), windowed.clone()] {
                    let by_quarters =
                        by_grouping(&store, &query, RunGrouping::QuarterHour, Some(period), &tz)
                            .unwrap();
                    let spans = store
                        .run_index()
                        .run_totals_in_spans(&query, |days| zone_spans(period, &tz, days))
                        .unwrap()
                        .unwrap_or_else(|| panic!("{zone} {period:?}: no answer from spans"));
                    let (from_spans, groups) =
                        period_totals(&store, &query, RunGrouping::QuarterHour, Some(period), &tz)
                            .unwrap();
                    let what = format!("{zone} {period:?} {:?}", query.since);
                    assert_eq!(groups, by_quarters.1, "{what}");
                    assert_eq!(spans.groups, by_quarters.1, "{what}");
                    assert_eq!(from_spans.all, by_quarters.0.all, "{what}");
                    assert_eq!(from_spans.duplicated.len(), 1, "{what}");
                    assert!(from_spans.all.runs > 1000, "{what}");
                    // Day rows and two aggregates per span end, against one row per
                    // quarter-hour holding a run.
                    assert!(
                        spans.groups_summed * 3 < by_quarters.0.groups_summed,
                        "{what}: {} rows against {}",
                        spans.groups_summed,
                        by_quarters.0.groups_summed
                    );
                }
            }
        }
    }

    #[test]
    fn a_day_key_goes_into_the_period_a_minute_key_would() {
        let zone = jiff::tz::TimeZone::UTC;
        for (day, minute) in [
            ("2026-11-30", "2026-11-30T12:00"),
            ("2027-01-01", "2027-01-01T00:00"),
            ("2026-12-28", "2026-12-28T23:59"),
        ] {
            for p in [Period::Day, Period::Week, Period::Month] {
                assert_eq!(p.key_of_day(day), p.key(minute, &zone), "{day} {p:?}");
            }
        }
        assert_eq!(Period::Week.key_of_day("2027-01-01"), "2026-W53");
        assert_eq!(Period::Month.key_of_day("(unknown date)"), "(unknown date)");
    }
}
