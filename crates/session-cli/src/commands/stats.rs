//! `sessions stats [--by day|week|month|model|session] [--tz ZONE]`: token usage and run
//! counts from the run index, with a small bar chart of total tokens.
//!
//! Day, week and month groups are calendar periods of the `--tz` zone: SQLite sums the runs
//! by UTC minute of their start ([`RunGrouping::Minute`]) and each minute is put into its
//! period here, so the cost stays one aggregate query.

use std::collections::BTreeMap;

use session_state::{RunGrouping, RunQuery, RunTotals};

use super::runs::bound;
use super::state::{open_reading, refresh_index, state_err};
use crate::Ctx;
use crate::cli::{StatsArgs, StatsBy};
use crate::error::{CliError, EXIT_OK};
use crate::jsonw::JsonObj;
use crate::style::{Paint, bar, pad, thousands};
use crate::timefmt::parse_zone;

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

impl Group {
    /// Adds `other` to this group (saturating).
    fn add(&mut self, other: &Group) {
        self.runs = self.runs.saturating_add(other.runs);
        self.completed = self.completed.saturating_add(other.completed);
        self.errors = self.errors.saturating_add(other.errors);
        self.cancelled = self.cancelled.saturating_add(other.cancelled);
        self.open = self.open.saturating_add(other.open);
        self.invocations = self.invocations.saturating_add(other.invocations);
        self.input = self.input.saturating_add(other.input);
        self.cached = self.cached.saturating_add(other.cached);
        self.output = self.output.saturating_add(other.output);
        self.total = self.total.saturating_add(other.total);
    }
}

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
pub(crate) fn stats(ctx: &mut Ctx<'_>, args: &StatsArgs) -> Result<i32, CliError> {
    let (store, why) = open_reading(ctx)?;
    refresh_index(ctx, &store)?;
    let mut query = RunQuery::default();
    let zone = parse_zone(&args.tz, &ctx.zone)?;
    query.since = bound(args.since.as_deref(), ctx.now, &zone)?;
    query.until = bound(args.until.as_deref(), ctx.now, &zone)?;
    let (store, _temp_index) = super::state::answering_store(ctx, store, why)?;
    let period = match args.by {
        StatsBy::Day => Some(Period::Day),
        StatsBy::Week => Some(Period::Week),
        StatsBy::Month => Some(Period::Month),
        StatsBy::Model | StatsBy::Session => None,
    };
    let grouping = match args.by {
        StatsBy::Day | StatsBy::Week | StatsBy::Month => RunGrouping::Minute,
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
    let mut groups: BTreeMap<String, Group> = BTreeMap::new();
    for (k, t) in &totals.groups {
        let key = match period {
            Some(p) => p.key(k, &zone),
            None => k.clone(),
        };
        groups.entry(key).or_default().add(&Group::from(t));
    }
    let all = Group::from(&totals.all);
    super::runs::warn_other_files(ctx, &totals.duplicated);
    super::runs::report_not_runs(ctx, &store, false)?;
    let by = match args.by {
        StatsBy::Day => "day",
        StatsBy::Week => "week",
        StatsBy::Month => "month",
        StatsBy::Model => "model",
        StatsBy::Session => "session",
    };
    let tz = period.map(|_| zone_name(&zone));
    if args.json {
        for (k, g) in &groups {
            writeln!(ctx.out, "{}", group_json(by, k, g, tz.as_deref()))?;
        }
        let mut line = group_json(by, "", &all, tz.as_deref());
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

fn group_json(by: &str, key: &str, g: &Group, tz: Option<&str>) -> String {
    let mut o = JsonObj::new();
    o.str(by, key);
    if let Some(tz) = tz {
        o.str("tz", tz);
    }
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
