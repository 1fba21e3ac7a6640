//! `sessions stats [--by day|model|session]`: token usage and run counts from the run index,
//! with a small bar chart of total tokens.

use std::collections::BTreeMap;

use session_state::{RunGrouping, RunQuery, RunTotals};

use super::runs::bound;
use super::state::{open_reading, refresh_index, state_err};
use crate::Ctx;
use crate::cli::{StatsArgs, StatsBy};
use crate::error::{CliError, EXIT_OK};
use crate::jsonw::JsonObj;
use crate::style::thousands;
use crate::table::{Cell, Column, Step, Table};

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
        for (k, g) in &groups {
            writeln!(ctx.out, "{}", group_json(by, k, g))?;
        }
        let mut line = group_json(by, "", &all);
        line = line.replacen(&format!("\"{by}\":\"\""), "\"total\":true", 1);
        writeln!(ctx.out, "{line}")?;
        return Ok(EXIT_OK);
    }
    // On a terminal: the bar narrows first (to 10 cells), then the key (a session id to its
    // 8-character prefix, a model name clipped), then the split by outcome goes.
    const KEY: usize = 0;
    const BAR: usize = 9;
    let key = match args.by {
        StatsBy::Day => Column::text("DAY"),
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
    let max = groups.values().map(|g| g.total).max().unwrap_or(0);
    let cells = |key: &str, g: &Group| {
        vec![
            Cell::text(key),
            Cell::text(g.runs.to_string()),
            Cell::text(g.completed.to_string()),
            Cell::text(g.errors.to_string()),
            Cell::text(g.cancelled.to_string()),
            Cell::text(g.open.to_string()),
            Cell::text(thousands(g.input)),
            Cell::text(thousands(g.output)),
            Cell::text(thousands(g.total)),
        ]
    };
    for (k, g) in &groups {
        let mut row = cells(k, g);
        row.push(Cell::Bar {
            value: g.total,
            max,
        });
        table.row(row);
    }
    table.row(cells("all", &all));
    ctx.table(&table)?;
    ctx.hint(&format!(
        "{} invocation(s); {} cached input tokens",
        thousands(all.invocations),
        thousands(all.cached)
    ))?;
    Ok(EXIT_OK)
}

fn group_json(by: &str, key: &str, g: &Group) -> String {
    let mut o = JsonObj::new();
    o.str(by, key);
    o.unum("runs", g.runs);
    o.unum("completed", g.completed);
    o.unum("error", g.errors);
    o.unum("cancelled", g.cancelled);
    o.unum("open", g.open);
    o.unum("invocations", g.invocations);
    o.unum("input_tokens", g.input);
    o.unum("cached_input_tokens", g.cached);
    o.unum("output_tokens", g.output);
    o.unum("total_tokens", g.total);
    o.finish()
}
