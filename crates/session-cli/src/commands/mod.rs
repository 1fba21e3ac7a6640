//! One function per subcommand. Each returns the exit code on success.

mod cold;
mod export;
pub(crate) mod housekeeping;
pub(crate) mod manage;
mod replay;
pub(crate) mod runs;
pub(crate) mod search;
#[cfg(feature = "serve")]
mod serve;
pub(crate) mod sessions;
pub(crate) mod shared;
pub(crate) mod show;
pub(crate) mod state;
pub(crate) mod stats;
mod sync;
mod tail;
mod trash;
mod trash_cmds;
mod unarchive;
pub(crate) mod verify;

pub(crate) use export::export;
pub(crate) use housekeeping::{archive, gc, repair};
pub(crate) use manage::{name, pin, storage};
pub(crate) use replay::replay;
#[cfg(feature = "serve")]
pub(crate) use serve::serve;
pub(crate) use trash_cmds::{delete, restore};

/// `sessions serve` in a build without the `serve` feature: a usage error that says so.
#[cfg(not(feature = "serve"))]
pub(crate) fn serve(_ctx: &mut Ctx<'_>, _args: &crate::cli::ServeArgs) -> Result<i32, CliError> {
    Err(CliError::Usage(
        "this build has no web viewer: rebuild with the `serve` feature (on by default)".into(),
    ))
}
pub(crate) use runs::runs;
pub(crate) use search::search;
pub(crate) use sessions::{history, sessions, workspace_of};
pub(crate) use show::show;
pub(crate) use state::reindex;
pub(crate) use stats::stats;
pub(crate) use sync::{SyncArgs, sync};
pub(crate) use tail::tail;
pub(crate) use unarchive::unarchive;
pub(crate) use verify::verify;

use crate::Ctx;
use crate::cli::WhereArgs;
use crate::error::{CliError, EXIT_OK};
use crate::json_rows::{Row, WhereRow, write_row};

/// `sessions where`.
pub(crate) fn where_cmd(ctx: &mut Ctx<'_>, args: &WhereArgs) -> Result<i32, CliError> {
    if let Some(shared) = ctx.shared.clone() {
        return shared::where_cmd(ctx, &shared, args);
    }
    let root = &ctx.root;
    let exists = root.path.is_dir();
    if args.json {
        write_row(ctx.out, &where_row(root, None))?;
    } else {
        writeln!(ctx.out, "{}", root.path.display())?;
        writeln!(ctx.out, "  chosen: {}", root.source)?;
        let order: Vec<&str> = crate::root::PRECEDENCE
            .iter()
            .map(|(_, how)| *how)
            .collect();
        writeln!(ctx.out, "  precedence: {}", order.join(" > "))?;
        if !exists {
            writeln!(ctx.out, "  (the directory does not exist yet)")?;
        }
    }
    Ok(EXIT_OK)
}

/// `where --json`'s row for the local root `root`, with the shared store when one is named
/// (`store`; the local and the shared `where` write the same row).
pub(crate) fn where_row(
    root: &crate::root::Root,
    store: Option<crate::json_rows::SharedStoreRow>,
) -> Row {
    Row::Where(WhereRow {
        root: root.path.to_string_lossy().into_owned(),
        source: root.source.key(),
        exists: root.path.is_dir(),
        precedence: crate::root::RootSource::ORDER
            .iter()
            .map(crate::root::RootSource::key)
            .collect(),
        store,
    })
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

/// Resolves a run id (first) or a session id (`@title`: the session with that title). A session is found through its runs in the run
/// index and through its saved state (a legacy session may have no run files at all; loading
/// it migrates it, as the reference's `load` does, unless the store is read-only). `-` is the
/// newest session of the current directory's workspace (its newest run when it has no saved
/// session), and an id that names nothing is expanded as a unique prefix
/// ([`crate::ids`]).
///
/// # Errors
/// Usage (2) for an unsafe id or an ambiguous prefix; not found (3) when neither a run file
/// nor a session with that id (or prefix) exists.
pub(crate) fn resolve_target(ctx: &mut Ctx<'_>, id: &str) -> Result<Target, CliError> {
    use crate::ids::{self, Want};
    if id.starts_with('@') {
        let full = manage::resolve_id(ctx, id)?;
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
    if let Some(path) = crate::store::try_locate_run(ctx, id)? {
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

/// The bytes of a small file of the store or its trash (a manifest, a session snapshot): never
/// through a link, at most [`session_state::MAX_SESSION_FILE_BYTES`].
///
/// # Errors
/// I/O (4) naming the file.
pub(crate) fn trash_read(path: &std::path::Path) -> Result<Vec<u8>, CliError> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| CliError::io(path, e))?;
    if !meta.is_file() {
        return Err(CliError::Data(format!(
            "{}: not a regular file",
            path.display()
        )));
    }
    if meta.len() > session_state::MAX_SESSION_FILE_BYTES {
        return Err(CliError::Data(format!(
            "{}: {} bytes, more than a session file may hold",
            path.display(),
            meta.len()
        )));
    }
    std::fs::read(path).map_err(|e| CliError::io(path, e))
}
