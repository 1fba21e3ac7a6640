//! What a `<run-id|session-id>` argument names ([`Target`]): the run files to show, and for a
//! session its saved state with what loading it found.

use crate::Ctx;
use crate::error::CliError;
use crate::support::open::{IndexUse, open_store_for_reading};

/// What a `<run-id|session-id>` argument names: run files in the order to show them.
pub(crate) struct Target {
    /// The session id when the argument named a session.
    pub(crate) session: Option<String>,
    /// The session's saved state, when it has one.
    pub(crate) state: Option<session_schema::SessionState>,
    /// Run files (one for a run; a session's runs by `started_at`).
    pub(crate) paths: Vec<std::path::PathBuf>,
    /// What loading the saved state found wrong in the message log (empty for a run).
    pub(crate) damage: Vec<session_state::MessageDamage>,
    /// Other observations made while loading the saved state (empty for a run).
    pub(crate) notes: Vec<session_state::LoadNote>,
    /// Why the session's saved state could not be loaded (`state` is then `None`; already
    /// reported as a warning).
    pub(crate) state_error: Option<String>,
}

/// Resolves a run id (first) or a session id (`@title`: the session with that title). A session is found through its runs in the run
/// index and through its saved state (a legacy session may have no run files at all; loading
/// it migrates it, as the reference's `load` does, unless the store is read-only). `-` is the
/// newest session of the current directory's workspace (its newest run when it has no saved
/// session), and an id that names nothing is expanded as a unique prefix
/// ([`crate::support::ids`]).
///
/// # Errors
/// Usage (2) for an unsafe id or an ambiguous prefix; not found (3) when neither a run file
/// nor a session with that id (or prefix) exists.
pub(crate) fn resolve_target(ctx: &mut Ctx<'_>, id: &str) -> Result<Target, CliError> {
    use crate::support::ids::{self, Want};
    if id.starts_with('@') {
        let full = crate::support::labels::resolve_id(ctx, id)?;
        return resolve_exact(ctx, &full)?.ok_or_else(|| ids::not_found(ctx, &full, Want::Either));
    }
    ids::check(id, Want::Either)?;
    if id == ids::NEWEST {
        let (_, full) = ids::newest(ctx, Want::Either)?;
        return resolve_exact(ctx, &full)?.ok_or_else(|| ids::not_found(ctx, &full, Want::Either));
    }
    match ids::lookup_indexed(ctx, id, Want::Either)? {
        // A session the index knows: no run file has its id to look for.
        Some((session_state::IdKind::Session, full)) => {
            if let Some(t) = resolve_session(ctx, &full)? {
                return Ok(t);
            }
        }
        Some((_, full)) => {
            if let Some(t) = resolve_exact(ctx, &full)? {
                return Ok(t);
            }
        }
        None => {}
    }
    if let Some(t) = resolve_exact(ctx, id)? {
        return Ok(t);
    }
    match ids::expand(ctx, id, Want::Either)? {
        Some((_, full)) => {
            resolve_exact(ctx, &full)?.ok_or_else(|| ids::not_found(ctx, &full, Want::Either))
        }
        None => Err(ids::not_found(ctx, id, Want::Either)),
    }
}

/// [`resolve_target`] for a whole id (no `-`, no prefix; the web viewer's links): `None` when
/// no run or session has it.
pub(crate) fn resolve_exact(ctx: &mut Ctx<'_>, id: &str) -> Result<Option<Target>, CliError> {
    if let Some(path) = crate::support::store::try_locate_run(ctx, id)? {
        return Ok(Some(Target {
            session: None,
            state: None,
            paths: vec![path],
            damage: Vec::new(),
            notes: Vec::new(),
            state_error: None,
        }));
    }
    resolve_session(ctx, id)
}

/// The session `id` (whole): its runs and saved state; `None` when it has neither.
fn resolve_session(ctx: &mut Ctx<'_>, id: &str) -> Result<Option<Target>, CliError> {
    let store = open_store_for_reading(ctx, IndexUse::FindsRuns)?;
    let runs = crate::support::store::session_runs(ctx, &store, id)?;
    let (mut damage, mut notes, mut state_error) = (Vec::new(), Vec::new(), None);
    let state = match store.load(id) {
        Ok(found) => found.map(|l| {
            damage = l.damage;
            notes = l.notes;
            l.state
        }),
        Err(session_state::StateError::UnsafeId { .. }) => None,
        Err(e) => {
            // The runs can still be shown; say why the saved state is missing.
            let why = crate::error::one_line(&e);
            ctx.warn(&format!("saved state of session {id} not loaded: {why}"));
            state_error = Some(why);
            None
        }
    };
    if runs.is_empty() && state.is_none() {
        return Ok(None);
    }
    Ok(Some(Target {
        session: Some(id.to_owned()),
        state,
        paths: runs,
        damage,
        notes,
        state_error,
    }))
}
