//! The commands on a shared store (`--store postgres://…`, `$SESSIONS_STORE`): the reading
//! commands through the storage traits ([`RunCatalogue`], [`SessionStore`]) and the same
//! renderers as on a local store (their input is a [`RunRef`]); every other command refuses
//! with one line naming itself and the store ([`crate::backend::local_only`]).

use std::sync::Arc;

use session_pg::PgBackend;
use session_storage::{PageCursor, RunCatalogue, RunListQuery, RunSummary, SessionStore};

use crate::Ctx;
use crate::backend::{Named, RunRef, Shared, local_only, resolve_id, storage_err};
use crate::cli::{Command, GcArgs, RunsArgs, ShowArgs, WhereArgs};
use crate::error::{CliError, EXIT_OK};
use crate::ids::Want;
use crate::json_rows::{CursorRow, Outcome, Row, write_row};

use super::runs::{Listed, bound, outcome_wanted, run_row, runs_table, stored_outcome};

/// Runs `command` on the shared store.
pub(crate) fn dispatch(
    ctx: &mut Ctx<'_>,
    shared: &Shared,
    command: Command,
) -> Result<i32, CliError> {
    match command {
        Command::Where(a) => where_cmd(ctx, shared, &a),
        Command::Runs(a) => runs(ctx, shared, &a),
        Command::Show(a) => show(ctx, shared, &a),
        // These resolve their argument on the shared store themselves.
        Command::Export(a) => super::export(ctx, &a),
        Command::Replay(a) => super::replay(ctx, &a),
        Command::History(a) => super::history(ctx, &a),
        Command::Tail(a) => super::tail(ctx, &a),
        Command::Gc(a) => gc(ctx, shared, &a),
        Command::Stats(a) => super::stats::stats_shared(ctx, shared, &a),
        Command::Verify(a) => super::verify::verify_shared(ctx, shared, &a),
        Command::Sessions(a) => super::sessions::sessions_shared(ctx, shared, &a),
        Command::Search(a) => super::search::search_shared(ctx, shared, &a),
        // `sync` reads the local store; a shared store named by the environment is its
        // default destination, not its source.
        Command::Sync(a) if shared.source == crate::backend::StoreSource::EnvVar => {
            super::sync(ctx, &a)
        }
        Command::Sync(_) => Err(CliError::Usage(format!(
            "`sessions sync` ships a local store to a shared one: name the local store with \
             --root DIR (or $SESSIONS_ROOT) and the shared store with --to STORE, not --store \
             (here {})",
            shared.describe()
        ))),
        Command::Completions(_) => Ok(EXIT_OK),
        other => Err(local_only(command_name(&other), shared)),
    }
}

/// The subcommand's name as typed.
fn command_name(command: &Command) -> &'static str {
    match command {
        Command::Where(_) => "where",
        Command::Runs(_) => "runs",
        Command::Sessions(_) => "sessions",
        Command::Show(_) => "show",
        Command::Search(_) => "search",
        Command::Replay(_) => "replay",
        Command::History(_) => "history",
        Command::Tail(_) => "tail",
        Command::Verify(_) => "verify",
        Command::Repair(_) => "repair",
        Command::Stats(_) => "stats",
        Command::Export(_) => "export",
        Command::Gc(_) => "gc",
        Command::Archive(_) => "archive",
        Command::Unarchive(_) => "unarchive",
        Command::Reindex(_) => "reindex",
        Command::Serve(_) => "serve",
        Command::Sync(_) => "sync",
        Command::Delete(_) => "delete",
        Command::Restore(_) => "restore",
        Command::Pin(_) => "pin",
        Command::Unpin(_) => "unpin",
        Command::Name(_) => "name",
        Command::Storage(_) => "storage",
        Command::Completions(_) => "completions",
    }
}

/// `sessions where` naming the shared store (password redacted) and the local root that
/// `sync` would read.
pub(crate) fn where_cmd(
    ctx: &mut Ctx<'_>,
    shared: &Shared,
    args: &WhereArgs,
) -> Result<i32, CliError> {
    use crate::json_rows::{SharedStoreRow, SharedStoreSource};
    let root = ctx.root.clone();
    if args.json {
        let store = SharedStoreRow {
            connection: shared.config.redacted().to_owned(),
            source: match shared.source {
                crate::backend::StoreSource::Flag => SharedStoreSource::Flag,
                crate::backend::StoreSource::EnvVar => SharedStoreSource::Env,
            },
        };
        let row = super::where_row(&root, Some(store));
        write_row(ctx.out, &row)?;
        return Ok(EXIT_OK);
    }
    writeln!(ctx.out, "{}", shared.config.redacted())?;
    writeln!(
        ctx.out,
        "  chosen: a shared PostgreSQL store, from {}",
        shared.source.how()
    )?;
    writeln!(
        ctx.out,
        "  precedence: --store or --root > $SESSIONS_STORE > $SESSIONS_ROOT > the layouts"
    )?;
    if !root.path.as_os_str().is_empty() {
        writeln!(
            ctx.out,
            "  local store (what `sessions sync` reads): {}",
            root.path.display()
        )?;
    }
    Ok(EXIT_OK)
}

/// The run `run_id` of the shared store as the renderers read it.
fn stored_run(shared: &Shared, pg: &Arc<PgBackend>, run_id: &str) -> Result<RunRef, CliError> {
    let host = pg
        .run_origin(run_id)
        .map_err(|e| storage_err(shared, e))?
        .ok_or_else(|| {
            CliError::NotFound(format!(
                "no run {run_id} in the shared store {}",
                shared.describe()
            ))
        })?;
    let summary = RunSummary {
        run_id: run_id.to_owned(),
        location: format!("{host}:{run_id}"),
        ..RunSummary::default()
    };
    Ok(RunRef::stored(pg, &summary))
}

/// `sessions runs` on the shared store: the same filters, keyset paging through the
/// catalogue's cursor, and a HOST column (`origin_host` in `--json` rows).
fn runs(ctx: &mut Ctx<'_>, shared: &Shared, args: &RunsArgs) -> Result<i32, CliError> {
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
            &super::runs::workspace_arg(ctx, w)?,
        )?),
        None => None,
    };
    let now = ctx.now;
    let keep = |s: &RunSummary| -> Option<Outcome> {
        if workspace.as_ref().is_some_and(|w| !w.matches(s)) {
            return None;
        }
        let shown = super::runs::summary_outcome(s, now);
        outcome_wanted(&args.outcome, &shown).then_some(shown)
    };
    let (rows, next) = fetch(shared, &*pg, query, keep, args.limit)?;
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
pub(crate) type Shown = (RunSummary, Outcome);

/// Up to `limit` runs matching `query` and `keep` (filters the catalogue cannot apply:
/// `running`/`crashed`, a workspace known from a session), and the catalogue's cursor after
/// the last one when more match. Pages of the catalogue are read one after the other; when a
/// page holds more matches than are needed, the cursor after the last one returned is asked
/// of the catalogue itself (one more round trip), so that cursors stay the catalogue's own.
///
/// # Errors
/// Usage (2) for a cursor the store did not make; data (4) when the store fails.
pub(crate) fn fetch(
    shared: &Shared,
    pg: &dyn RunCatalogue,
    mut query: RunListQuery,
    keep: impl Fn(&RunSummary) -> Option<Outcome>,
    limit: usize,
) -> Result<(Vec<Shown>, Option<PageCursor>), CliError> {
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
pub(crate) struct WorkspaceOfShared {
    root: String,
    sessions: std::collections::BTreeSet<String>,
}

impl WorkspaceOfShared {
    pub(crate) fn new(
        shared: &Shared,
        pg: &dyn SessionStore,
        root: &str,
    ) -> Result<Self, CliError> {
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

/// What an id argument names on the shared store: its runs (oldest first) and the session's
/// saved state.
pub(crate) struct SharedTarget {
    /// The session id when the argument named a session.
    pub(crate) session: Option<String>,
    /// The session's saved state, when it has one.
    pub(crate) state: Option<session_schema::SessionState>,
    /// The runs.
    pub(crate) runs: Vec<RunRef>,
}

/// Resolves `id` for `want` on the shared store ([`resolve_id`]) into its runs and state.
///
/// # Errors
/// As [`resolve_id`]; not found (3) for a session with neither runs nor saved state.
pub(crate) fn resolve_target(
    ctx: &Ctx<'_>,
    shared: &Shared,
    id: &str,
    want: Want,
) -> Result<SharedTarget, CliError> {
    let pg = shared.backend()?;
    let (named, full) = resolve_id(ctx, shared, id, want)?;
    if named == Named::Run {
        return Ok(SharedTarget {
            session: None,
            state: None,
            runs: vec![stored_run(shared, &pg, &full)?],
        });
    }
    let state = pg
        .load_session(&full)
        .map_err(|e| storage_err(shared, e))?
        .map(|s| s.state);
    let runs: Vec<RunRef> = crate::backend::session_runs(shared, &*pg, &full)?
        .iter()
        .map(|s| RunRef::stored(&pg, s))
        .collect();
    if runs.is_empty() && state.is_none() {
        return Err(CliError::NotFound(format!(
            "no run or session {full} in the shared store {}",
            shared.describe()
        )));
    }
    Ok(SharedTarget {
        session: Some(full),
        state,
        runs,
    })
}

/// `sessions show` on the shared store.
fn show(ctx: &mut Ctx<'_>, shared: &Shared, args: &ShowArgs) -> Result<i32, CliError> {
    let id = crate::cli::id_or_newest(args.id.as_ref());
    let target = resolve_target(ctx, shared, id, Want::Either)?;
    super::show::show_target(
        ctx,
        args,
        target.session.as_deref(),
        target.state.as_ref(),
        &target.runs,
    )
}

/// `sessions gc --older-than AGE [--dry-run]` on the shared store
/// ([`PgBackend::gc`]): the same rules as on a local store (runs of a session saved within
/// the window stay, undated runs stay; also runs written to since the cutoff), one action
/// line (or `--json` row) per run and session, then the summary line. Removed items are
/// deleted, not moved to a trash; the store's `gc_audit` table records each of them.
fn gc(ctx: &mut Ctx<'_>, shared: &Shared, args: &GcArgs) -> Result<i32, CliError> {
    use super::housekeeping::{Action, emit};
    use crate::json_rows::{ActionKind, ActionStatus};
    if args.empty_trash || args.keep_last.is_some() || args.max_size.is_some() {
        return Err(CliError::Usage(format!(
            "on the shared store {} `sessions gc` takes --older-than (and --dry-run) only: \
             a shared store has no trash, and --keep-last and --max-size work on a local store",
            shared.describe()
        )));
    }
    let Some(age) = args.older_than.as_deref() else {
        return Err(CliError::Usage(
            "on a shared store `sessions gc` needs --older-than AGE".into(),
        ));
    };
    if ctx.read_only && !args.dry_run {
        return Err(CliError::Usage(
            "--read-only: `sessions gc` accepts only --dry-run".into(),
        ));
    }
    let cutoff = crate::timefmt::older_than(age, ctx.now, &ctx.zone)?;
    let cutoff_ms = i64::try_from(cutoff.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MIN);
    let pg = shared.backend()?;
    let report = pg.gc(cutoff_ms, args.dry_run).map_err(|e| {
        CliError::Data(format!(
            "shared store {}: gc: {}",
            shared.describe(),
            crate::error::one_line(&e)
        ))
    })?;
    let status = if args.dry_run {
        ActionStatus::Planned
    } else {
        ActionStatus::Done
    };
    let (mut runs, mut sessions, mut bytes) = (0u64, 0u64, 0u64);
    for item in &report.removed {
        let (action, file) = match item.kind {
            session_pg::GcKind::Session => {
                sessions += 1;
                (ActionKind::RemoveSession, item.id.clone())
            }
            _ => {
                runs += 1;
                bytes = bytes.saturating_add(item.bytes);
                let host = item.origin_host.as_deref().unwrap_or("-");
                (ActionKind::RemoveRun, format!("{host}:{}", item.id))
            }
        };
        let action = Action {
            action,
            file,
            id: Some(item.id.clone()),
            status,
            detail: format!("{} line(s), {} bytes", item.lines, item.bytes),
        };
        emit(ctx, args.json, &action)?;
    }
    if !args.json {
        let verb = if args.dry_run {
            "would remove"
        } else {
            "removed"
        };
        let audit = if args.dry_run || report.removed.is_empty() {
            ""
        } else {
            "; recorded in the store's gc_audit table"
        };
        writeln!(
            ctx.out,
            "{verb} {runs} run(s) ({}) and {sessions} session(s){audit}; kept {} of sessions \
             saved within {age}, {} undated, {} written to since the cutoff",
            crate::style::bytes(bytes),
            report.kept_active_session,
            report.kept_undated,
            report.kept_recent_write,
        )?;
    }
    Ok(EXIT_OK)
}
