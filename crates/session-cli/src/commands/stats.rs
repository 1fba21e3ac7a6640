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
    let store = super::state::answering_store(ctx, store, why)?;
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
