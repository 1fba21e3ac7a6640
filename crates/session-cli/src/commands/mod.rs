//! One file per subcommand: `commands/<name>.rs` holds `run(ctx, args)` for `sessions <name>`
//! (and, for the commands that also work on a shared store, its `*_shared` variant). Each
//! returns the exit code on success.
//!
//! The commands share nothing with each other directly: what two of them need (opening the
//! store, resolving ids and targets, findings, run listings, renderers, tables) lives in
//! [`crate::support`], which never imports a command.

mod archive;
mod delete;
mod export;
mod gc;
mod history;
mod name;
mod pin;
mod reindex;
mod repair;
mod replay;
mod restore;
mod runs;
mod search;
#[cfg(feature = "serve")]
mod serve;
mod sessions;
mod show;
mod stats;
mod storage;
mod sync;
mod tail;
mod unarchive;
mod unpin;
mod verify;
mod r#where;

use crate::Ctx;
use crate::backend::{Shared, StoreSource, local_only};
use crate::cli::Command;
use crate::error::{CliError, EXIT_OK};

/// Runs `command` on the local store at [`Ctx::root`], or on the shared store when one is
/// named ([`Ctx::shared`]).
///
/// # Errors
/// The command's error.
pub(crate) fn dispatch(ctx: &mut Ctx<'_>, command: Command) -> Result<i32, CliError> {
    if let Some(shared) = ctx.shared.clone() {
        return dispatch_shared(ctx, &shared, command);
    }
    match command {
        Command::Where(a) => r#where::run(ctx, &a),
        Command::Runs(a) => runs::run(ctx, &a),
        Command::Sessions(a) => sessions::run(ctx, &a),
        Command::Show(a) => show::run(ctx, &a),
        Command::Search(a) => search::run(ctx, &a),
        Command::Replay(a) => replay::run(ctx, &a),
        Command::History(a) => history::run(ctx, &a),
        Command::Tail(a) => tail::run(ctx, &a),
        Command::Verify(a) => verify::run(ctx, &a),
        Command::Repair(a) => repair::run(ctx, &a),
        Command::Stats(a) => stats::run(ctx, &a),
        Command::Export(a) => export::run(ctx, &a),
        Command::Gc(a) => gc::run(ctx, &a),
        Command::Archive(a) => archive::run(ctx, &a),
        Command::Unarchive(a) => unarchive::run(ctx, &a),
        Command::Reindex(a) => reindex::run(ctx, &a),
        #[cfg(feature = "serve")]
        Command::Serve(a) => serve::run(ctx, &a),
        #[cfg(not(feature = "serve"))]
        Command::Serve(_) => Err(CliError::Usage(
            "this build has no web viewer: rebuild with the `serve` feature (on by default)".into(),
        )),
        Command::Sync(a) => sync::run(ctx, &a),
        Command::Delete(a) => delete::run(ctx, &a),
        Command::Restore(a) => restore::run(ctx, &a),
        Command::Pin(a) => pin::run(ctx, &a),
        Command::Unpin(a) => unpin::run(ctx, &a),
        Command::Name(a) => name::run(ctx, &a),
        Command::Storage(a) => storage::run(ctx, &a),
        // Answered before the store is looked for (see `run_with`).
        Command::Completions(_) => Ok(EXIT_OK),
    }
}

/// Runs `command` on the shared store: the reading commands through the storage traits
/// ([`session_storage::RunCatalogue`], [`session_storage::SessionStore`]) and the same
/// renderers as on a local store; every other command refuses with one line naming itself and
/// the store ([`local_only`]).
fn dispatch_shared(ctx: &mut Ctx<'_>, shared: &Shared, command: Command) -> Result<i32, CliError> {
    match command {
        Command::Where(a) => r#where::run(ctx, &a),
        Command::Runs(a) => runs::runs_shared(ctx, shared, &a),
        Command::Show(a) => show::show_shared(ctx, shared, &a),
        // These resolve their argument on the shared store themselves.
        Command::Export(a) => export::run(ctx, &a),
        Command::Replay(a) => replay::run(ctx, &a),
        Command::History(a) => history::run(ctx, &a),
        Command::Tail(a) => tail::run(ctx, &a),
        Command::Gc(a) => gc::gc_shared(ctx, shared, &a),
        Command::Stats(a) => stats::stats_shared(ctx, shared, &a),
        Command::Verify(a) => verify::verify_shared(ctx, shared, &a),
        Command::Sessions(a) => sessions::sessions_shared(ctx, shared, &a),
        Command::Search(a) => search::search_shared(ctx, shared, &a),
        // `sync` reads the local store; a shared store named by the environment is its
        // default destination, not its source.
        Command::Sync(a) if shared.source == StoreSource::EnvVar => sync::run(ctx, &a),
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
