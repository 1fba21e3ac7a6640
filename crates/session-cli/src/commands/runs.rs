//! `sessions runs`: runs newest first from the run index, with filters and a cursor.

use session_state::{RunCursor, RunQuery, RunRow};
use session_storage::{PageCursor, RunCatalogue, RunListQuery, RunSummary, SessionStore};

use crate::Ctx;
use crate::backend::{Shared, storage_err};
use crate::cli::{OutcomeArg, RunsArgs};
use crate::error::{CliError, EXIT_OK};
use crate::json_rows::{self, CursorRow, Outcome, Row, write_row};
use crate::style::{Paint, thousands};
use crate::support::ids::Want;
use crate::support::listing::{
    WorkspaceMatch, bound, fetch, outcome_name, report_not_runs, workspace_arg,
};
use crate::support::open::{open_reading, open_store_read_only, refresh_index, state_err};
use crate::support::paths::rel;
use crate::support::shared::resolve_id;
use crate::support::store::warn_other_files;
use crate::support::table::{Cell, Column, Step, Table};

// RunQuery is non_exhaustive, so it cannot be built with a struct literal outside its crate.
#[allow(clippy::field_reassign_with_default)]
pub(crate) fn run(ctx: &mut Ctx<'_>, args: &RunsArgs) -> Result<i32, CliError> {
    if args.limit == 0 {
        return Err(CliError::Usage("--limit must be at least 1".into()));
    }
    let session = args
        .session
        .as_deref()
        .map(|s| crate::support::ids::session_arg(ctx, s))
        .transpose()?;
    let (store, why) = if args.no_refresh {
        (open_store_read_only(ctx)?, None)
    } else {
        let (store, why) = open_reading(ctx)?;
        refresh_index(ctx, &store)?;
        (store, why)
    };
    let mut query = RunQuery::default();
    query.session = session;
    query.since = bound(args.since.as_deref(), ctx.now, &ctx.zone)?;
    query.until = bound(args.until.as_deref(), ctx.now, &ctx.zone)?;
    let workspace = match args.workspace.as_deref() {
        Some(w) => Some(WorkspaceMatch::new(&store, &workspace_arg(ctx, w)?)?),
        None => None,
    };
    // Sessions (for --workspace) come from the store itself; runs from its index, or from the
    // run files when a read-only store has none.
    let source = crate::support::open::run_source(ctx, store, why)?;
    if let Some(c) = &args.cursor {
        query.after = Some(RunCursor::from_token(c).map_err(state_err)?);
    }
    let root = ctx.root.path.clone();
    let (store, rows, next, partial) = match source {
        crate::support::open::RunSource::Index(store) => {
            let (rows, next) = fetch(
                &store,
                &root,
                query,
                &args.outcome,
                workspace.as_ref(),
                args.limit,
                ctx.now,
            )?;
            (store, rows, next, Default::default())
        }
        crate::support::open::RunSource::Files(memory) => {
            let now = ctx.now;
            let page = crate::support::cold::fetch_from_files(
                ctx,
                &memory,
                &query,
                &args.outcome,
                workspace.as_ref(),
                args.limit,
                now,
            )?;
            (memory, page.rows, page.next, page.partial)
        }
    };
    warn_other_files(ctx, rows.iter().map(|(row, _)| row));
    for (row, _) in &rows {
        for d in &row.column_damage {
            ctx.warn(&format!(
                "run index: {d}; `sessions reindex` rebuilds it from the run file"
            ));
        }
    }
    // Files that are no runs are reported once, with the first page.
    let first_page = args.cursor.is_none();
    if args.json {
        for (row, outcome) in &rows {
            let listed = Listed::of_row(&root, row, partial.contains(&row.path));
            write_row(ctx.out, &Row::Run(run_row(&listed, outcome.clone())))?;
        }
        if first_page {
            report_not_runs(ctx, &store, true)?;
        }
        if let Some(n) = &next {
            write_row(
                ctx.out,
                &Row::Cursor(CursorRow {
                    next_cursor: n.clone(),
                }),
            )?;
        }
        return Ok(EXIT_OK);
    }
    let times = ctx.times(args.utc);
    if !rows.is_empty() {
        let listed: Vec<(Listed<'_>, Outcome)> = rows
            .iter()
            .map(|(row, o)| {
                (
                    Listed::of_row(&root, row, partial.contains(&row.path)),
                    o.clone(),
                )
            })
            .collect();
        ctx.table(&runs_table(&listed, times))?;
    } else {
        ctx.hint("(no runs match)")?;
    }
    if first_page {
        report_not_runs(ctx, &store, false)?;
    }
    if let Some(n) = next {
        ctx.hint(&format!(
            "more: sessions runs --cursor '{n}' (same filters)"
        ))?;
    }
    Ok(EXIT_OK)
}

/// One run of a listing as both kinds of store give it (the run index's [`RunRow`], a
/// catalogue's [`session_storage::RunSummary`]): what the table and the `--json` row show.
struct Listed<'a> {
    pub(crate) run_id: &'a str,
    pub(crate) session_id: Option<&'a str>,
    pub(crate) started_at: Option<&'a str>,
    pub(crate) last_status: Option<&'a str>,
    pub(crate) model_provider: Option<&'a str>,
    pub(crate) model_name: Option<&'a str>,
    pub(crate) invocation_count: u64,
    /// Input, cached input, cache creation, output and total tokens.
    pub(crate) tokens: [u64; 5],
    pub(crate) first_input: Option<&'a str>,
    pub(crate) workspace_root: Option<&'a str>,
    pub(crate) record_count: u64,
    pub(crate) damage_count: u64,
    pub(crate) last_ts: Option<&'a str>,
    /// The run file relative to the root; a shared store's location (`host:run_id`).
    pub(crate) file: String,
    /// Bytes stored (a file's size, compressed for archives).
    pub(crate) file_size: u64,
    pub(crate) compressed: bool,
    /// Read bounded from its file: counts unknown.
    pub(crate) partial: bool,
    /// The host the run came from (a shared store); `None` for local files.
    pub(crate) origin_host: Option<&'a str>,
}

impl<'a> Listed<'a> {
    /// A row of the local run index; `partial` for a row read bounded from its file (also
    /// when the index says so: a row whose file could not be read whole to complete it).
    fn of_row(root: &std::path::Path, row: &'a RunRow, partial: bool) -> Self {
        let partial = partial || row.partial;
        Listed {
            run_id: &row.run_id,
            session_id: row.session_id.as_deref(),
            started_at: row.started_at.as_deref(),
            last_status: row.last_status.as_deref(),
            model_provider: row.model_provider.as_deref(),
            model_name: row.model_name.as_deref(),
            invocation_count: row.invocation_count,
            tokens: [
                row.input_tokens,
                row.cached_input_tokens,
                row.cache_creation_tokens,
                row.output_tokens,
                row.total_tokens,
            ],
            first_input: row.first_input.as_deref(),
            workspace_root: row.workspace_root.as_deref(),
            record_count: row.record_count,
            damage_count: row.damage_count,
            last_ts: row.last_ts.as_deref(),
            file: rel(root, &row.path).into_owned(),
            file_size: row.file_size,
            compressed: row.compressed,
            partial,
            origin_host: None,
        }
    }

    /// A run of a catalogue listing (a shared store).
    fn of_summary(s: &'a session_storage::RunSummary) -> Self {
        Listed {
            run_id: &s.run_id,
            session_id: s.session_id.as_deref(),
            started_at: s.started_at.as_deref(),
            last_status: s.last_status.as_deref(),
            model_provider: s.model_provider.as_deref(),
            model_name: s.model_name.as_deref(),
            invocation_count: s.invocation_count,
            tokens: [
                s.tokens.input,
                s.tokens.cached_input,
                s.tokens.cache_creation,
                s.tokens.output,
                s.tokens.total,
            ],
            first_input: s.first_input.as_deref(),
            workspace_root: s.workspace_root.as_deref(),
            record_count: s.record_count,
            damage_count: s.damage_count,
            last_ts: s.last_ts.as_deref(),
            file: s.location.clone(),
            file_size: s.stored_bytes,
            compressed: s.archived,
            partial: false,
            origin_host: s.origin_host.as_deref(),
        }
    }
}

/// The catalogue's outcome filter for `--outcome` values it stores exactly (`running` and
/// `crashed` are both `open` there, told apart afterwards).
fn stored_outcome(o: OutcomeArg) -> session_storage::Outcome {
    match o {
        OutcomeArg::Completed => session_storage::Outcome::Completed,
        OutcomeArg::Error => session_storage::Outcome::Error,
        OutcomeArg::Cancelled => session_storage::Outcome::Cancelled,
        OutcomeArg::Running | OutcomeArg::Crashed => session_storage::Outcome::Open,
    }
}

/// Whether `shown` passes the `--outcome` filter (none given: everything).
fn outcome_wanted(outcomes: &[OutcomeArg], shown: &Outcome) -> bool {
    outcomes.is_empty() || outcomes.iter().any(|o| outcome_name(*o) == shown.as_str())
}

/// One run as a `--json` row; in a `partial` row (read bounded from its file) what only a
/// whole read can tell is `null`.
fn run_row(row: &Listed<'_>, outcome: Outcome) -> json_rows::RunRow {
    let partial = row.partial;
    let whole = |n: u64| (!partial).then_some(n);
    let [input, cached, creation, output, total] = row.tokens;
    let owned = |s: Option<&str>| s.map(str::to_owned);
    json_rows::RunRow {
        run_id: row.run_id.to_owned(),
        session_id: owned(row.session_id),
        started_at: owned(row.started_at),
        outcome,
        last_status: if partial {
            None
        } else {
            owned(row.last_status)
        },
        model_provider: owned(row.model_provider),
        model: owned(row.model_name),
        invocations: whole(row.invocation_count),
        input_tokens: whole(input),
        cached_input_tokens: whole(cached),
        cache_creation_tokens: whole(creation),
        output_tokens: whole(output),
        total_tokens: whole(total),
        first_input: owned(row.first_input),
        workspace_root: owned(row.workspace_root),
        records: whole(row.record_count),
        damage_count: whole(row.damage_count),
        last_ts: owned(row.last_ts),
        file: row.file.clone(),
        file_size: row.file_size,
        compressed: row.compressed,
        partial,
        origin_host: owned(row.origin_host),
    }
}

/// The runs listing: on a terminal the input is clipped first (to 20 columns), then the
/// session and run ids become their 8-character prefixes, then the session and invocation
/// columns go, then the model and the input are clipped further. A row read bounded
/// (`partial`) counted only its head block: it shows no counts. A HOST column (where each run
/// came from) is added when a row knows its host (a shared store).
fn runs_table(rows: &[(Listed<'_>, Outcome)], times: crate::timefmt::TimeDisplay) -> Table {
    const SESSION: usize = 2;
    const RUN: usize = 1;
    const MODEL: usize = 4;
    const INV: usize = 5;
    const INPUT: usize = 7;
    const HOST: usize = 8;
    let hosts = rows.iter().any(|(r, _)| r.origin_host.is_some());
    let mut columns = vec![
        Column::text("STARTED"),
        Column::id("RUN"),
        Column::id("SESSION"),
        Column::text("OUTCOME"),
        Column::text("MODEL"),
        Column::number("INV"),
        Column::number("TOKENS"),
        Column::text("INPUT"),
    ];
    let mut steps = vec![
        Step::Shrink(SESSION, 8),
        Step::Shrink(INPUT, 20),
        Step::Shrink(RUN, 8),
        Step::Drop(SESSION),
        Step::Drop(INV),
        Step::Shrink(MODEL, 10),
        Step::Shrink(INPUT, 8),
    ];
    if hosts {
        columns.push(Column::text("HOST"));
        steps.insert(0, Step::Shrink(HOST, 16));
    }
    let mut t = Table::new(columns, steps);
    for (row, outcome) in rows {
        let started = row.started_at.map_or_else(|| "-".into(), |t| times.show(t));
        let paint = match outcome {
            Outcome::Completed => Paint::Green,
            Outcome::Cancelled | Outcome::Running => Paint::Yellow,
            _ => Paint::Red,
        };
        let (inv, tokens) = if row.partial {
            ("-".to_owned(), "-".to_owned())
        } else {
            (row.invocation_count.to_string(), thousands(row.tokens[4]))
        };
        let mut cells = vec![
            Cell::text(started),
            Cell::text(row.run_id),
            Cell::text(row.session_id.unwrap_or("-")),
            Cell::painted(outcome.as_str(), paint),
            Cell::text(row.model_name.unwrap_or("-")),
            Cell::text(inv),
            Cell::text(tokens),
            Cell::text(row.first_input.unwrap_or("")),
        ];
        if hosts {
            cells.push(Cell::text(row.origin_host.unwrap_or("-")));
        }
        t.row(cells);
    }
    t
}

/// `sessions runs` on the shared store: the same filters, keyset paging through the
/// catalogue's cursor, and a HOST column (`origin_host` in `--json` rows).
pub(crate) fn runs_shared(
    ctx: &mut Ctx<'_>,
    shared: &Shared,
    args: &RunsArgs,
) -> Result<i32, CliError> {
    if args.limit == 0 {
        return Err(CliError::Usage("--limit must be at least 1".into()));
    }
    let pg = shared.backend()?;
    let session = match args.session.as_deref() {
        Some(s) => Some(match resolve_id(ctx, shared, s, Want::Session) {
            Ok((_, id)) => id,
            // An unknown session lists nothing, as on a local store.
            Err(CliError::NotFound(_)) => s.to_owned(),
            Err(e) => return Err(e),
        }),
        None => None,
    };
    let mut query = RunListQuery {
        session,
        since: bound(args.since.as_deref(), ctx.now, &ctx.zone)?,
        until: bound(args.until.as_deref(), ctx.now, &ctx.zone)?,
        after: args.cursor.clone().map(PageCursor::new),
        ..RunListQuery::default()
    };
    if let [only] = args.outcome.as_slice() {
        query.outcome = Some(stored_outcome(*only));
    }
    let workspace = match args.workspace.as_deref() {
        Some(w) => Some(WorkspaceOfShared::new(
            shared,
            &*pg,
            &crate::support::listing::workspace_arg(ctx, w)?,
        )?),
        None => None,
    };
    let now = ctx.now;
    let keep = |s: &RunSummary| -> Option<Outcome> {
        if workspace.as_ref().is_some_and(|w| !w.matches(s)) {
            return None;
        }
        let shown = crate::support::listing::summary_outcome(s, now);
        outcome_wanted(&args.outcome, &shown).then_some(shown)
    };
    let (rows, next) = fetch_shared(shared, &*pg, query, keep, args.limit)?;
    if args.json {
        for (s, outcome) in &rows {
            write_row(
                ctx.out,
                &Row::Run(run_row(&Listed::of_summary(s), outcome.clone())),
            )?;
        }
        if let Some(n) = &next {
            write_row(
                ctx.out,
                &Row::Cursor(CursorRow {
                    next_cursor: n.as_str().to_owned(),
                }),
            )?;
        }
        return Ok(EXIT_OK);
    }
    if rows.is_empty() {
        ctx.hint("(no runs match)")?;
    } else {
        let listed: Vec<(Listed<'_>, Outcome)> = rows
            .iter()
            .map(|(s, o)| (Listed::of_summary(s), o.clone()))
            .collect();
        let times = ctx.times(args.utc);
        ctx.table(&runs_table(&listed, times))?;
    }
    if let Some(n) = next {
        ctx.hint(&format!(
            "more: sessions runs --cursor '{n}' (same filters)"
        ))?;
    }
    Ok(EXIT_OK)
}

/// A run of a shared store's listing with its displayed outcome.
type SharedShown = (RunSummary, Outcome);

/// Up to `limit` runs matching `query` and `keep` (filters the catalogue cannot apply:
/// `running`/`crashed`, a workspace known from a session), and the catalogue's cursor after
/// the last one when more match. Pages of the catalogue are read one after the other; when a
/// page holds more matches than are needed, the cursor after the last one returned is asked
/// of the catalogue itself (one more round trip), so that cursors stay the catalogue's own.
///
/// # Errors
/// Usage (2) for a cursor the store did not make; data (4) when the store fails.
fn fetch_shared(
    shared: &Shared,
    pg: &dyn RunCatalogue,
    mut query: RunListQuery,
    keep: impl Fn(&RunSummary) -> Option<Outcome>,
    limit: usize,
) -> Result<(Vec<SharedShown>, Option<PageCursor>), CliError> {
    let err = |e| storage_err(shared, e);
    let page_size = limit.saturating_add(1).clamp(1, 1000);
    // (page start, index in the page) of every match.
    let mut matched: Vec<(RunSummary, Outcome, Option<PageCursor>, usize)> = Vec::new();
    'pages: loop {
        query.limit = Some(page_size);
        let start = query.after.clone();
        let page = pg.list_runs(&query).map_err(err)?;
        for (i, s) in page.runs.into_iter().enumerate() {
            if let Some(outcome) = keep(&s) {
                matched.push((s, outcome, start.clone(), i));
                if matched.len() > limit {
                    break 'pages;
                }
            }
        }
        match page.next_cursor {
            Some(c) => query.after = Some(c),
            None => break,
        }
    }
    let mut next = None;
    if matched.len() > limit {
        matched.truncate(limit);
        if let Some((_, _, start, i)) = matched.last() {
            let upto = pg
                .list_runs(&RunListQuery {
                    after: start.clone(),
                    limit: Some(i + 1),
                    ..query.clone()
                })
                .map_err(err)?;
            next = upto.next_cursor;
        }
    }
    Ok((
        matched.into_iter().map(|(s, o, _, _)| (s, o)).collect(),
        next,
    ))
}

/// `--workspace` on a shared store: a run belongs to a workspace when its own workspace root
/// names it, or when its session's saved `workspace_root` does (as on a local store).
struct WorkspaceOfShared {
    root: String,
    sessions: std::collections::BTreeSet<String>,
}

impl WorkspaceOfShared {
    fn new(shared: &Shared, pg: &dyn SessionStore, root: &str) -> Result<Self, CliError> {
        let mut sessions = std::collections::BTreeSet::new();
        let mut query = session_storage::SessionListQuery {
            workspace: Some(root.to_owned()),
            limit: Some(500),
            after: None,
        };
        loop {
            let page = pg
                .list_sessions(&query)
                .map_err(|e| storage_err(shared, e))?;
            sessions.extend(page.sessions.into_iter().map(|s| s.session_id));
            match page.next_cursor {
                Some(c) => query.after = Some(c),
                None => break,
            }
        }
        Ok(WorkspaceOfShared {
            root: session_pg::normalize_workspace_root(root),
            sessions,
        })
    }

    fn matches(&self, s: &RunSummary) -> bool {
        s.workspace_root
            .as_deref()
            .is_some_and(|w| session_pg::normalize_workspace_root(w) == self.root)
            || s.session_id
                .as_ref()
                .is_some_and(|id| self.sessions.contains(id))
    }
}
