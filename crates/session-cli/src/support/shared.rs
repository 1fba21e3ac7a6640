//! The commands on a shared store (`--store postgres://…`, `$SESSIONS_STORE`): the reading
//! commands through the storage traits ([`RunCatalogue`], [`SessionStore`]) and the same
//! renderers as on a local store (their input is a [`RunRef`]); every other command refuses
//! with one line naming itself and the store ([`crate::backend::local_only`]).

use std::sync::Arc;

use session_pg::PgBackend;
use session_storage::{RunCatalogue, RunListQuery, RunSummary, SessionListQuery, SessionStore};

use crate::Ctx;
use crate::backend::{RunRef, Shared, storage_err};
use crate::error::CliError;
use crate::support::ids::Want;

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
    let runs: Vec<RunRef> = session_runs(shared, &*pg, &full)?
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

/// What an id argument names on a shared store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Named {
    /// A run.
    Run,
    /// A session (saved, or known by its runs only).
    Session,
}

/// Most candidates an ambiguous prefix lists per kind.
const MAX_CANDIDATES: usize = 10;

/// `id` as a whole run or session id of the shared store, the way the local store resolves
/// it ([`crate::support::ids`]): `-` is the newest of the current directory's workspace (its newest
/// saved session, else its newest run, as `want` allows), a whole id is itself, anything
/// else a unique prefix of at least [`crate::support::ids::MIN_PREFIX`] characters. `@title` is a
/// usage error: titles are kept in a local store's `state.db` only.
///
/// # Errors
/// Usage (2) for an unsafe id, `@title` or an ambiguous prefix (listing the candidates);
/// not found (3) when nothing has that id or prefix; data (4) when the store fails.
pub(crate) fn resolve_id(
    ctx: &crate::Ctx<'_>,
    shared: &Shared,
    id: &str,
    want: crate::support::ids::Want,
) -> Result<(Named, String), CliError> {
    use crate::support::ids::{MIN_PREFIX, NEWEST, Want};
    if id.starts_with('@') && want != Want::Run {
        return Err(CliError::Usage(format!(
            "{id}: session titles are kept in a local store's state.db; the shared store {} \
             has none (give the session id or a prefix of it)",
            shared.describe()
        )));
    }
    crate::support::ids::check(id, want)?;
    let pg = shared.backend()?;
    let err = |e| storage_err(shared, e);
    let runs_ok = matches!(want, Want::Run | Want::Either);
    let sessions_ok = matches!(want, Want::Session | Want::Either);
    if id == NEWEST {
        let ws = crate::support::paths::workspace_of(&ctx.cwd()?)
            .to_string_lossy()
            .into_owned();
        if sessions_ok {
            let page = pg
                .list_sessions(&SessionListQuery {
                    workspace: Some(ws.clone()),
                    limit: Some(1),
                    after: None,
                })
                .map_err(err)?;
            if let Some(s) = page.sessions.into_iter().next() {
                return Ok((Named::Session, s.session_id));
            }
        }
        if runs_ok {
            let page = pg
                .list_runs(&RunListQuery {
                    workspace: Some(ws.clone()),
                    limit: Some(1),
                    ..RunListQuery::default()
                })
                .map_err(err)?;
            if let Some(r) = page.runs.into_iter().next() {
                return Ok((Named::Run, r.run_id));
            }
        }
        return Err(CliError::NotFound(format!(
            "no {} in workspace {ws} in the shared store {} (`-` and --last mean the newest of \
             the current directory's workspace)",
            noun(want),
            shared.describe()
        )));
    }
    let found = pg.ids_with_prefix(id, MAX_CANDIDATES + 1).map_err(err)?;
    let runs: Vec<_> = if runs_ok { found.runs } else { Vec::new() };
    let sessions: Vec<_> = if sessions_ok {
        found.sessions
    } else {
        Vec::new()
    };
    if runs.iter().any(|m| m.id == id) {
        return Ok((Named::Run, id.to_owned()));
    }
    if sessions.iter().any(|m| m.id == id) {
        return Ok((Named::Session, id.to_owned()));
    }
    // A session with runs but no saved state is known by its runs.
    if sessions_ok && sessions.is_empty() && has_runs_of_session(shared, &*pg, id)? {
        return Ok((Named::Session, id.to_owned()));
    }
    if id.len() < MIN_PREFIX {
        return Err(not_found(shared, id, want));
    }
    match (runs.as_slice(), sessions.as_slice()) {
        ([], []) => Err(not_found(shared, id, want)),
        ([one], []) => Ok((Named::Run, one.id.clone())),
        ([], [one]) => Ok((Named::Session, one.id.clone())),
        _ => {
            let mut list: Vec<(&str, &session_pg::PrefixMatch)> = Vec::new();
            list.extend(runs.iter().take(MAX_CANDIDATES).map(|m| ("run", m)));
            list.extend(sessions.iter().take(MAX_CANDIDATES).map(|m| ("session", m)));
            Err(crate::support::ids::ambiguous_list(
                ctx,
                id,
                (runs.len(), sessions.len()),
                list.iter()
                    .map(|(kind, m)| (*kind, m.id.as_str(), m.time.as_deref(), m.text.as_deref())),
            ))
        }
    }
}

fn noun(want: crate::support::ids::Want) -> &'static str {
    match want {
        crate::support::ids::Want::Run => "run",
        crate::support::ids::Want::Session => "session",
        crate::support::ids::Want::Either => "run or session",
    }
}

fn not_found(shared: &Shared, id: &str, want: crate::support::ids::Want) -> CliError {
    let short = if id.len() < crate::support::ids::MIN_PREFIX {
        format!(
            " (an id prefix needs at least {} characters)",
            crate::support::ids::MIN_PREFIX
        )
    } else {
        String::new()
    };
    CliError::NotFound(format!(
        "no {} {id} in the shared store {}{short}",
        noun(want),
        shared.describe()
    ))
}

fn has_runs_of_session(
    shared: &Shared,
    pg: &dyn RunCatalogue,
    session_id: &str,
) -> Result<bool, CliError> {
    let page = pg
        .list_runs(&RunListQuery {
            session: Some(session_id.to_owned()),
            limit: Some(1),
            ..RunListQuery::default()
        })
        .map_err(|e| storage_err(shared, e))?;
    Ok(!page.runs.is_empty())
}

/// The runs of session `session_id` in the shared store, oldest `started_at` first (then run
/// id), as the local store orders a session's runs.
///
/// # Errors
/// Data (4) when the store fails.
pub(crate) fn session_runs(
    shared: &Shared,
    pg: &dyn RunCatalogue,
    session_id: &str,
) -> Result<Vec<session_storage::RunSummary>, CliError> {
    let mut out = Vec::new();
    let mut query = RunListQuery {
        session: Some(session_id.to_owned()),
        limit: Some(500),
        ..RunListQuery::default()
    };
    loop {
        let page = pg.list_runs(&query).map_err(|e| storage_err(shared, e))?;
        out.extend(page.runs);
        match page.next_cursor {
            Some(c) => query.after = Some(c),
            None => break,
        }
    }
    out.reverse();
    Ok(out)
}
