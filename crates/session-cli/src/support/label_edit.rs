//! Changing session labels (`sessions name`, `pin`, `unpin`): the writable store they need
//! and the session id they name, checked to exist.

use session_state::StateStore;

use crate::Ctx;
use crate::cli::PinArgs;
use crate::error::{CliError, EXIT_OK};
use crate::support::open::{open_store, state_err};

/// The store for a label change: writable, refusing `--read-only`.
///
/// # Errors
/// Usage (2) with `--read-only`; data (4) when `state.db` cannot be opened for writing.
pub(crate) fn open_for_labels(ctx: &mut Ctx<'_>) -> Result<StateStore, CliError> {
    if ctx.read_only {
        return Err(CliError::Usage(
            "--read-only: this command changes the store".into(),
        ));
    }
    open_store(ctx)
}

/// `raw` (an id, a unique prefix, `-` or `@title`) as the whole id of a session that exists:
/// a `state.db` row, a legacy snapshot, or runs in the run index.
///
/// # Errors
/// Usage (2) for an unsafe id or an ambiguous prefix; not found (3) when no session has it;
/// data (4) when the store cannot be read.
pub(crate) fn existing_session(
    ctx: &mut Ctx<'_>,
    store: &StateStore,
    raw: &str,
) -> Result<String, CliError> {
    // `@title`, `-` and unique prefixes as every command takes them.
    let id = crate::support::ids::session_arg(ctx, raw)?;
    let listed = store
        .list(&session_state::ListQuery::all())
        .map_err(state_err)?
        .entries
        .iter()
        .any(|e| e.summary.session_id == id);
    if listed || !crate::support::store::session_runs(ctx, store, &id)?.is_empty() {
        return Ok(id);
    }
    Err(CliError::NotFound(format!(
        "no session {id} under {}",
        ctx.root.path.display()
    )))
}

/// Now, as the `updated_at` text of a label change.
pub(crate) fn now_text(ctx: &Ctx<'_>) -> String {
    session_schema::Timestamp::from_datetime(ctx.now)
        .as_str()
        .to_owned()
}

/// `sessions pin ID…` (`pin = true`) and `sessions unpin ID…`: every id is checked before
/// any label changes.
///
/// # Errors
/// Usage (2) with `--read-only` or for an unsafe id; not found (3) for an unknown session;
/// data (4) when `state.db` cannot be written.
pub(crate) fn set_pinned(ctx: &mut Ctx<'_>, args: &PinArgs, pin: bool) -> Result<i32, CliError> {
    let store = open_for_labels(ctx)?;
    let mut ids = Vec::new();
    for raw in &args.ids {
        ids.push(existing_session(ctx, &store, raw)?);
    }
    let now = now_text(ctx);
    for id in &ids {
        store.set_pinned(id, pin, &now).map_err(state_err)?;
        if pin {
            writeln!(ctx.out, "pinned {id}: gc never moves it or its runs")?;
        } else {
            writeln!(ctx.out, "unpinned {id}")?;
        }
    }
    Ok(EXIT_OK)
}
