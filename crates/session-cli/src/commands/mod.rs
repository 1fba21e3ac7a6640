//! One function per subcommand. Each returns the exit code on success.

mod export;
mod housekeeping;
mod replay;
pub(crate) mod runs;
pub(crate) mod search;
#[cfg(feature = "serve")]
mod serve;
mod sessions;
mod show;
pub(crate) mod state;
mod stats;
mod sync;
mod tail;
mod trash;
mod unarchive;
pub(crate) mod verify;

pub(crate) use export::export;
pub(crate) use housekeeping::{archive, gc, repair};
pub(crate) use replay::replay;
#[cfg(feature = "serve")]
pub(crate) use serve::serve;

/// `sessions serve` in a build without the `serve` feature: a usage error that says so.
#[cfg(not(feature = "serve"))]
pub(crate) fn serve(_ctx: &mut Ctx<'_>, _args: &crate::cli::ServeArgs) -> Result<i32, CliError> {
    Err(CliError::Usage(
        "this build has no web viewer: rebuild with the `serve` feature (on by default)".into(),
    ))
}
pub(crate) use runs::runs;
pub(crate) use search::search;
pub(crate) use sessions::{history, sessions};
pub(crate) use show::show;
pub(crate) use state::reindex;
pub(crate) use stats::stats;
pub(crate) use sync::{SyncArgs, sync};
pub(crate) use tail::tail;
pub(crate) use unarchive::unarchive;
pub(crate) use verify::verify;

use std::io::Write;

use serde_json::{Value, json};

use crate::Ctx;
use crate::cli::WhereArgs;
use crate::error::{CliError, EXIT_OK};

/// Writes one compact JSON object and a newline (the `--json` line format).
pub(crate) fn json_line(out: &mut dyn Write, value: &Value) -> Result<(), CliError> {
    serde_json::to_writer(&mut *out, value).map_err(|e| CliError::Output(e.into()))?;
    out.write_all(b"\n")?;
    Ok(())
}

/// `sessions where`.
pub(crate) fn where_cmd(ctx: &mut Ctx<'_>, args: &WhereArgs) -> Result<i32, CliError> {
    let root = &ctx.root;
    let exists = root.path.is_dir();
    if args.json {
        let v = json!({
            "root": root.path.to_string_lossy(),
            "source": root.source.key(),
            "exists": exists,
        });
        json_line(ctx.out, &v)?;
    } else {
        writeln!(ctx.out, "{}", root.path.display())?;
        writeln!(ctx.out, "  chosen: {}", root.source)?;
        if !exists {
            writeln!(ctx.out, "  (the directory does not exist yet)")?;
        }
    }
    Ok(EXIT_OK)
}

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

/// Resolves a run id (first) or a session id. A session is found through its runs in the run
/// index and through its saved state (a legacy session may have no run files at all; loading
/// it migrates it, as the reference's `load` does, unless the store is read-only).
///
/// # Errors
/// Not found (3) when neither a run file nor a session with that id exists.
pub(crate) fn resolve_target(ctx: &mut Ctx<'_>, id: &str) -> Result<Target, CliError> {
    let root = ctx.root.path.clone();
    if let Some(path) = crate::store::try_locate_run(ctx, id)? {
        return Ok(Target {
            session: None,
            state: None,
            paths: vec![path],
            damage: Vec::new(),
            notes: Vec::new(),
            state_error: None,
        });
    }
    let store = state::open_store_for_reading(ctx, state::IndexUse::FindsRuns)?;
    let runs = crate::store::session_runs(ctx, &store, id)?;
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
        return Err(CliError::NotFound(format!(
            "no run or session {id} under {}",
            root.display()
        )));
    }
    Ok(Target {
        session: Some(id.to_owned()),
        state,
        paths: runs,
        damage,
        notes,
        state_error,
    })
}
