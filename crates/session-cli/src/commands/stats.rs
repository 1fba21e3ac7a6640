//! `sessions stats [--by day|model|session]`: token usage and run counts from the run index,
//! with a small bar chart of total tokens.

use std::collections::BTreeMap;

use session_state::{RunGrouping, RunOutcome, RunQuery, RunTotals};

use super::runs::bound;
use super::state::{open_reading, refresh_index, state_err};
use crate::Ctx;
use crate::cli::{StatsArgs, StatsBy};
use crate::error::{CliError, EXIT_OK};
use crate::json_rows::{
    self, Outcome, OutcomeCounts, Row, RunTotalsRow, StatsGroupRow, StatsSummary, SummaryRow,
    write_row,
};
use crate::style::{Paint, bar, pad, thousands};

/// Totals of one group.
#[derive(Debug, Default, Clone)]
struct Group {
    runs: u64,
    completed: u64,
    errors: u64,
    cancelled: u64,
    open: u64,
    invocations: u64,
    input: u64,
    cached: u64,
    output: u64,
    total: u64,
}

impl From<&RunTotals> for Group {
    fn from(t: &RunTotals) -> Group {
        Group {
            runs: t.runs,
            completed: t.completed,
            errors: t.errors,
            cancelled: t.cancelled,
            open: t.open,
            invocations: t.invocations,
            input: t.input_tokens,
            cached: t.cached_input_tokens,
            output: t.output_tokens,
            total: t.total_tokens,
        }
    }
}

const BAR_WIDTH: usize = 30;

// RunQuery is non_exhaustive, so it cannot be built with a struct literal outside its crate.
#[allow(clippy::field_reassign_with_default)]
pub(crate) fn stats(ctx: &mut Ctx<'_>, args: &StatsArgs) -> Result<i32, CliError> {
    let (store, why) = open_reading(ctx)?;
    refresh_index(ctx, &store)?;
    let mut query = RunQuery::default();
    query.since = bound(args.since.as_deref(), ctx.now)?;
    query.until = bound(args.until.as_deref(), ctx.now)?;
    let query_filters = (query.since.clone(), query.until.clone());
    let (store, _temp_index) = super::state::answering_store(ctx, store, why)?;
    let grouping = match args.by {
        StatsBy::Day => RunGrouping::Day,
        StatsBy::Model => RunGrouping::Model,
        StatsBy::Session => RunGrouping::Session,
    };
    // Summed inside SQLite; only runs held by several files come back as rows.
    let mut totals = store.run_totals(&query, grouping).map_err(state_err)?;
    let root_path = ctx.root.path.clone();
    for row in &mut totals.duplicated {
        row.path = super::state::real_path(&store, &root_path, &row.path);
        row.other_files = row
            .other_files
            .iter()
            .map(|p| super::state::real_path(&store, &root_path, p))
            .collect();
    }
    let groups: BTreeMap<String, Group> = totals
        .groups
        .iter()
        .map(|(k, t)| (k.clone(), Group::from(t)))
        .collect();
    let all = Group::from(&totals.all);
    super::runs::warn_other_files(ctx, &totals.duplicated);
    super::runs::report_not_runs(ctx, &store, false)?;
    let by = match args.by {
        StatsBy::Day => "day",
        StatsBy::Model => "model",
        StatsBy::Session => "session",
    };
    if args.json {
        let split = split_unfinished(ctx, &store, query_filters, grouping, totals.all.open)?;
        let by = match args.by {
            StatsBy::Day => json_rows::StatsBy::Day,
            StatsBy::Model => json_rows::StatsBy::Model,
            StatsBy::Session => json_rows::StatsBy::Session,
        };
        let none = Unfinished::default();
        for (key, t) in &totals.groups {
            let row = StatsGroupRow {
                by,
                key: key.clone(),
                totals: totals_row(t, split.get(key).unwrap_or(&none)),
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
            totals: totals_row(&totals.all, &every),
        };
        write_row(ctx.out, &Row::Summary(SummaryRow::Stats(summary)))?;
        return Ok(EXIT_OK);
    }
    let s = ctx.style;
    let key_width = groups
        .keys()
        .map(|k| k.chars().count())
        .max()
        .unwrap_or(5)
        .clamp(5, 36);
    let max = groups.values().map(|g| g.total).max().unwrap_or(0);
    writeln!(
        ctx.out,
        "{}",
        s.paint(
            Paint::Bold,
            &format!(
                "{} {:>5} {:>5} {:>4} {:>4} {:>4} {:>12} {:>10} {:>12}  {}",
                pad(&by.to_uppercase(), key_width),
                "RUNS",
                "OK",
                "ERR",
                "CANC",
                "OPEN",
                "INPUT",
                "OUTPUT",
                "TOTAL",
                "TOTAL TOKENS"
            )
        )
    )?;
    for (k, g) in &groups {
        writeln!(
            ctx.out,
            "{} {:>5} {:>5} {:>4} {:>4} {:>4} {:>12} {:>10} {:>12}  {}",
            pad(k, key_width),
            g.runs,
            g.completed,
            g.errors,
            g.cancelled,
            g.open,
            thousands(g.input),
            thousands(g.output),
            thousands(g.total),
            s.paint(Paint::Cyan, &bar(g.total, max, BAR_WIDTH))
        )?;
    }
    writeln!(
        ctx.out,
        "{} {:>5} {:>5} {:>4} {:>4} {:>4} {:>12} {:>10} {:>12}",
        pad("all", key_width),
        all.runs,
        all.completed,
        all.errors,
        all.cancelled,
        all.open,
        thousands(all.input),
        thousands(all.output),
        thousands(all.total)
    )?;
    writeln!(
        ctx.out,
        "{}",
        s.paint(
            Paint::Dim,
            &format!(
                "{} invocation(s); {} cached input tokens",
                thousands(all.invocations),
                thousands(all.cached)
            )
        )
    )?;
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
    open: u64,
) -> Result<BTreeMap<String, Unfinished>, CliError> {
    let mut out: BTreeMap<String, Unfinished> = BTreeMap::new();
    if open == 0 {
        return Ok(out);
    }
    let mut query = RunQuery::default();
    query.since = since;
    query.until = until;
    query.outcome = Some(RunOutcome::Open);
    let limit = usize::try_from(open)
        .unwrap_or(usize::MAX)
        .min(crate::cli::MAX_COUNT);
    let (rows, _) = super::runs::fetch(store, &ctx.root.path, query, &[], None, limit, ctx.now)?;
    for (row, outcome) in &rows {
        let u = out.entry(group_key(row, by)).or_default();
        match outcome {
            Outcome::Running => u.running = u.running.saturating_add(1),
            Outcome::Crashed => u.crashed = u.crashed.saturating_add(1),
            _ => {}
        }
    }
    Ok(out)
}

/// The group key of a run for `by`, as the index's totals compute it.
fn group_key(row: &session_state::RunRow, by: RunGrouping) -> String {
    match by {
        RunGrouping::Model => match (&row.model_provider, &row.model_name) {
            (Some(p), Some(n)) => format!("{p}/{n}"),
            (None, Some(n)) => n.clone(),
            _ => "(unknown model)".into(),
        },
        RunGrouping::Session => row
            .session_id
            .clone()
            .unwrap_or_else(|| "(no session)".into()),
        _ => match row.started_at_utc.as_deref() {
            Some(k) if k.len() >= 10 => k.get(..10).unwrap_or(k).to_owned(),
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
