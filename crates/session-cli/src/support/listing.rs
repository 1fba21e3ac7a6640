//! Listing runs from the run index, as `runs`, `stats` and the web viewer share it: the
//! displayed outcome of a run (with the rule for a run that may still be written), time
//! bounds, the workspace filter, one page of rows, and the report of files that are no runs.

use session_state::{IndexedRunOutcome, RunCursor, RunQuery, RunRow, StateStore};
use time::OffsetDateTime;

use crate::Ctx;
use crate::cli::OutcomeArg;
use crate::error::CliError;
use crate::json_rows::{DiagnosticKind, DiagnosticRow, Outcome, Row, write_row};
use crate::support::open::state_err;
use crate::support::paths::rel;
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
    for d in store.run_file_diagnostics().map_err(state_err)? {
        let path = crate::support::open::real_path(store, &root, &d.path);
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
/// through the index; returns the rows (one per run id;
/// [`crate::support::store::warn_other_files`] names the files left out) and the cursor after
/// the last one returned.
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
        let page = store.list_runs(&query).map_err(state_err)?;
        let n = page.runs.len();
        for mut row in page.runs {
            row.path = crate::support::open::real_path(store, root, &row.path);
            if matched.len() > limit {
                break;
            }
            if workspace.is_some_and(|w| !w.matches(&row)) {
                continue;
            }
            row.other_files = row
                .other_files
                .iter()
                .map(|p| crate::support::open::real_path(store, root, p))
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

pub(crate) fn outcome_name(o: OutcomeArg) -> &'static str {
    match o {
        OutcomeArg::Completed => "completed",
        OutcomeArg::Error => "error",
        OutcomeArg::Cancelled => "cancelled",
        OutcomeArg::Running => "running",
        OutcomeArg::Crashed => "crashed",
    }
}
