//! `sessions runs`: runs newest first from the run index, with filters and a cursor.

use session_state::{IndexedRunOutcome, RunCursor, RunQuery, RunRow, StateStore};
use time::OffsetDateTime;

use super::state::{open_reading, open_store_read_only, refresh_index, state_err};
use crate::Ctx;
use crate::cli::{OutcomeArg, RunsArgs};
use crate::error::{CliError, EXIT_OK};
use crate::json_rows::{self, CursorRow, DiagnosticKind, DiagnosticRow, Outcome, Row, write_row};
use crate::store::rel;
use crate::style::{Paint, thousands};
use crate::table::{Cell, Column, Step, Table};
use crate::timefmt::parse_instant;

/// A run without `run.end` whose last record is newer than this (seconds) is taken as
/// possibly still being written even when no lock tells (the reference never locks its run
/// files): `runs` shows it as `running`, `repair` leaves its torn tail alone.
pub(crate) const RECENT_SECS: i64 = 120;

/// Seconds from the record time `last_ts` to `now` when that is under [`RECENT_SECS`] (a
/// time after `now` counts as 0).
pub(crate) fn recent_record(last_ts: Option<&str>, now: OffsetDateTime) -> Option<i64> {
    let t = session_schema::Timestamp::from_raw(last_ts?).parse()?;
    let ago = (now - t).whole_seconds();
    (ago < RECENT_SECS).then_some(ago.max(0))
}

/// The displayed outcome of an indexed run: `completed`, `error`, `cancelled`, `running`
/// (locked by a writer, or written to in the last two minutes), `crashed`, or the stored word
/// of a `run.end` outcome this version does not know.
pub(crate) fn display_outcome(row: &RunRow, now: OffsetDateTime) -> Outcome {
    match &row.outcome {
        IndexedRunOutcome::Open => {
            if session_jsonl::is_locked(&row.path).unwrap_or(false)
                || recent_record(row.last_ts.as_deref(), now).is_some()
            {
                Outcome::Running
            } else {
                Outcome::Crashed
            }
        }
        IndexedRunOutcome::Completed => Outcome::Completed,
        IndexedRunOutcome::Error => Outcome::Error,
        IndexedRunOutcome::Cancelled => Outcome::Cancelled,
        other => Outcome::Other(other.as_str().to_owned()),
    }
}

fn outcome_name(o: OutcomeArg) -> &'static str {
    match o {
        OutcomeArg::Completed => "completed",
        OutcomeArg::Error => "error",
        OutcomeArg::Cancelled => "cancelled",
        OutcomeArg::Running => "running",
        OutcomeArg::Crashed => "crashed",
    }
}

/// Canonical `YYYY-MM-DDTHH:MM:SS.mmmZ` of a `--since`/`--until` argument (index comparisons
/// are string comparisons of such timestamps).
pub(crate) fn bound(
    text: Option<&str>,
    now: OffsetDateTime,
    zone: &jiff::tz::TimeZone,
) -> Result<Option<String>, CliError> {
    text.map(|t| {
        parse_instant(t, now, zone).map(|dt| {
            session_schema::Timestamp::from_datetime(dt)
                .as_str()
                .to_owned()
        })
    })
    .transpose()
}

/// An absolute, normalised form of a `--workspace` argument.
pub(crate) fn workspace_arg(ctx: &Ctx<'_>, dir: &str) -> Result<String, CliError> {
    let p = std::path::Path::new(dir);
    if p.is_absolute() {
        Ok(dir.to_owned())
    } else {
        Ok(ctx.cwd()?.join(p).to_string_lossy().into_owned())
    }
}

/// `--workspace`: a run belongs to a workspace when its own `run.start.ui_context` (or header
/// cwd) names it, or when its session's saved `workspace_root` does (most clients send no
/// ui_context, so the session is usually what knows).
pub(crate) struct WorkspaceMatch {
    root: String,
    sessions: std::collections::BTreeSet<String>,
}

impl WorkspaceMatch {
    pub(crate) fn new(store: &StateStore, root: &str) -> Result<Self, CliError> {
        let page = store
            .list(&session_state::ListQuery::all().workspace(root.to_owned()))
            .map_err(state_err)?;
        Ok(WorkspaceMatch {
            root: session_state::normalize_workspace_root(root),
            sessions: page
                .entries
                .into_iter()
                .map(|e| e.summary.session_id)
                .collect(),
        })
    }

    fn matches(&self, row: &RunRow) -> bool {
        row.workspace_root
            .as_deref()
            .is_some_and(|w| session_state::normalize_workspace_root(w) == self.root)
            || row
                .session_id
                .as_ref()
                .is_some_and(|s| self.sessions.contains(s))
    }
}

/// One warning per file the listing left out because another file of the same run id is
/// more complete (the index lists one row per run: [`RunRow::other_files`]), naming both.
pub(crate) fn warn_other_files<'a>(ctx: &mut Ctx<'_>, rows: impl IntoIterator<Item = &'a RunRow>) {
    let root = ctx.root.path.clone();
    for row in rows {
        for other in &row.other_files {
            ctx.warn(&format!(
                "{} holds run {} again ({} is counted: it is the more complete file; the run is \
                 counted once; `sessions verify` reports the duplicate)",
                rel(&root, other),
                row.run_id,
                rel(&root, &row.path)
            ));
        }
    }
}

/// Reports the files under the run tree that are no runs (0 bytes, NUL bytes, no header;
/// [`StateStore::run_file_diagnostics`]), each once: a typed line on stdout with `--json`
/// (`{"type":"diagnostic","kind":"not_a_run","file":…,"bytes":…,"message":…}`), a warning on
/// stderr otherwise. Paths of an index in a temporary directory are mapped back to `root`.
pub(crate) fn report_not_runs(
    ctx: &mut Ctx<'_>,
    store: &StateStore,
    json: bool,
) -> Result<(), CliError> {
    let root = ctx.root.path.clone();
    for d in store
        .run_index()
        .run_file_diagnostics()
        .map_err(state_err)?
    {
        let path = super::state::real_path(store, &root, &d.path);
        let file = rel(&root, &path).into_owned();
        if json {
            write_row(
                ctx.out,
                &Row::Diagnostic(DiagnosticRow {
                    kind: DiagnosticKind::NotARun,
                    file,
                    bytes: d.file_size,
                    message: d.message.clone(),
                }),
            )?;
        } else {
            ctx.warn(&format!(
                "{file}: not a run, not listed: {} (`sessions verify` reports it)",
                d.message
            ));
        }
    }
    Ok(())
}

/// An indexed run with its displayed outcome.
pub(crate) type Shown = (RunRow, Outcome);

/// Fetches up to `limit` rows matching `query` plus the client-side outcome filter, paging
/// through the index; returns the rows (one per run id; [`warn_other_files`] names the
/// files left out) and the cursor after the last one returned.
pub(crate) fn fetch(
    store: &StateStore,
    root: &std::path::Path,
    mut query: RunQuery,
    outcomes: &[OutcomeArg],
    workspace: Option<&WorkspaceMatch>,
    limit: usize,
    now: OffsetDateTime,
) -> Result<(Vec<Shown>, Option<String>), CliError> {
    let wanted: Vec<&str> = outcomes.iter().map(|o| outcome_name(*o)).collect();
    // One outcome the index knows exactly is filtered there.
    if let [only] = outcomes {
        query.outcome = match only {
            OutcomeArg::Completed => Some(IndexedRunOutcome::Completed),
            OutcomeArg::Error => Some(IndexedRunOutcome::Error),
            OutcomeArg::Cancelled => Some(IndexedRunOutcome::Cancelled),
            OutcomeArg::Running | OutcomeArg::Crashed => Some(IndexedRunOutcome::Open),
        };
    }
    // Collect one match more than asked for: it tells whether a next page exists.
    // Outcomes the index stores exactly are filtered there; the rest is filtered here.
    let index_filters_outcome = matches!(
        outcomes,
        [OutcomeArg::Completed | OutcomeArg::Error | OutcomeArg::Cancelled]
    );
    let client_side = workspace.is_some() || (!wanted.is_empty() && !index_filters_outcome);
    let page_size = if client_side {
        limit.saturating_add(1).max(200)
    } else {
        limit.saturating_add(1)
    };
    let mut matched: Vec<Shown> = Vec::new();
    loop {
        query.limit = Some(page_size);
        let page = store.run_index().list_runs(&query).map_err(state_err)?;
        let n = page.runs.len();
        for mut row in page.runs {
            row.path = super::state::real_path(store, root, &row.path);
            if matched.len() > limit {
                break;
            }
            if workspace.is_some_and(|w| !w.matches(&row)) {
                continue;
            }
            row.other_files = row
                .other_files
                .iter()
                .map(|p| super::state::real_path(store, root, p))
                .collect();
            let shown = display_outcome(&row, now);
            if wanted.is_empty() || wanted.contains(&shown.as_str()) {
                matched.push((row, shown));
            }
        }
        if matched.len() > limit {
            break;
        }
        match page.next_cursor {
            Some(c) if n > 0 => query.after = Some(c),
            _ => break,
        }
    }
    let next = if matched.len() > limit {
        matched.truncate(limit);
        matched.last().map(|(row, _)| {
            RunCursor {
                started_at: row.started_at.clone().unwrap_or_default(),
                rel_path: rel(root, &row.path).into_owned(),
            }
            .to_token()
        })
    } else {
        None
    };
    Ok((matched, next))
}

// RunQuery is non_exhaustive, so it cannot be built with a struct literal outside its crate.
#[allow(clippy::field_reassign_with_default)]
pub(crate) fn runs(ctx: &mut Ctx<'_>, args: &RunsArgs) -> Result<i32, CliError> {
    if args.limit == 0 {
        return Err(CliError::Usage("--limit must be at least 1".into()));
    }
    let session = args
        .session
        .as_deref()
        .map(|s| crate::ids::session_arg(ctx, s))
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
    let source = super::state::run_source(ctx, store, why)?;
    if let Some(c) = &args.cursor {
        query.after = Some(RunCursor::from_token(c).map_err(state_err)?);
    }
    let root = ctx.root.path.clone();
    let (store, rows, next, partial) = match source {
        super::state::RunSource::Index(store) => {
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
        super::state::RunSource::Files(memory) => {
            let now = ctx.now;
            let page = super::cold::fetch_from_files(
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
pub(crate) struct Listed<'a> {
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
    /// A row of the local run index; `partial` for a row read bounded from its file.
    pub(crate) fn of_row(root: &std::path::Path, row: &'a RunRow, partial: bool) -> Self {
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
    pub(crate) fn of_summary(s: &'a session_storage::RunSummary) -> Self {
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

/// The displayed outcome of a catalogue's run: as [`display_outcome`], without the lock a
/// shared store cannot see (an open run written to in the last two minutes is `running`).
pub(crate) fn summary_outcome(s: &session_storage::RunSummary, now: OffsetDateTime) -> Outcome {
    use session_storage::Outcome as O;
    match &s.outcome {
        O::Open => {
            if recent_record(s.last_ts.as_deref(), now).is_some() {
                Outcome::Running
            } else {
                Outcome::Crashed
            }
        }
        O::Completed => Outcome::Completed,
        O::Error => Outcome::Error,
        O::Cancelled => Outcome::Cancelled,
        O::Other(other) => Outcome::Other(other.clone()),
    }
}

/// The catalogue's outcome filter for `--outcome` values it stores exactly (`running` and
/// `crashed` are both `open` there, told apart afterwards).
pub(crate) fn stored_outcome(o: OutcomeArg) -> session_storage::Outcome {
    match o {
        OutcomeArg::Completed => session_storage::Outcome::Completed,
        OutcomeArg::Error => session_storage::Outcome::Error,
        OutcomeArg::Cancelled => session_storage::Outcome::Cancelled,
        OutcomeArg::Running | OutcomeArg::Crashed => session_storage::Outcome::Open,
    }
}

/// Whether `shown` passes the `--outcome` filter (none given: everything).
pub(crate) fn outcome_wanted(outcomes: &[OutcomeArg], shown: &Outcome) -> bool {
    outcomes.is_empty() || outcomes.iter().any(|o| outcome_name(*o) == shown.as_str())
}

/// One run as a `--json` row; in a `partial` row (read bounded from its file) what only a
/// whole read can tell is `null`.
pub(crate) fn run_row(row: &Listed<'_>, outcome: Outcome) -> json_rows::RunRow {
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
pub(crate) fn runs_table(
    rows: &[(Listed<'_>, Outcome)],
    times: crate::timefmt::TimeDisplay,
) -> Table {
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
