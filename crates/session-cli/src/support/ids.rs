//! Run and session ids as people type them: a unique prefix of at least [`MIN_PREFIX`]
//! characters (as git takes a short hash), `-` (or `--last`) for the newest run or session of
//! the current directory's workspace, and a usage error (exit 2) for an id that is no safe
//! file name, whatever the command.
//!
//! An id that names a run or session exactly is used as it is, with the cost it always had.
//! Only when nothing has that id is it taken as a prefix and looked up by a range query on
//! the run index and `state.db` ([`StateStore::run_ids_with_prefix`],
//! [`StateStore::session_ids_with_prefix`]): never a walk of the run tree. Several matches
//! are a usage error listing them (id, time, first input), so a short id never silently picks
//! one of several.

use session_state::{IdKind, IdMatch, ListQuery, StateStore};

use crate::Ctx;
pub(crate) use crate::cli::NEWEST;
use crate::error::CliError;
use crate::style::{escape_controls, one_line};
use crate::support::open::{open_reading, refresh_index, state_err};

/// The shortest prefix expanded to a whole id.
pub(crate) const MIN_PREFIX: usize = 4;

/// At most this many candidates are listed for an ambiguous prefix.
const MAX_CANDIDATES: usize = 10;

/// What an id argument may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Want {
    /// A run id (`tail`, `replay`, `verify RUN`, `unarchive RUN`).
    Run,
    /// A session id (`history`, `--session`).
    Session,
    /// Either (`show`, `export`).
    Either,
}

impl Want {
    fn noun(self) -> &'static str {
        match self {
            Want::Run => "run",
            Want::Session => "session",
            Want::Either => "run or session",
        }
    }
}

/// Usage error (2) when `id` cannot be a run or session id (empty, a path, `..`, control or
/// non-ASCII characters: [`session_schema::check_id`]); `-` passes (it means the newest).
///
/// # Errors
/// [`CliError::Usage`] naming the problem.
pub(crate) fn check(id: &str, want: Want) -> Result<(), CliError> {
    if id == NEWEST {
        return Ok(());
    }
    session_schema::check_id(id).map_err(|e| {
        CliError::Usage(format!(
            "`{}` is not a {} id: {e}",
            one_line(&escape_controls(id), 80),
            want.noun()
        ))
    })
}

/// The ids starting with `prefix` that `want` allows, at most `limit` of each kind, runs
/// first; none for a prefix shorter than [`MIN_PREFIX`] or that is no safe id. Asks the
/// run index as it is first, and only when nothing matches brings it up to date (when the
/// store can be written) and asks again, so that a run written since the last listing is
/// found too.
fn candidates(ctx: &mut Ctx<'_>, prefix: &str, want: Want) -> Result<Vec<IdMatch>, CliError> {
    if prefix.len() < MIN_PREFIX || session_schema::check_id(prefix).is_err() {
        return Ok(Vec::new());
    }
    // Without `state.db` there is no index to ask, and a lookup creates nothing.
    let (store, _) = if ctx.root.path.join("state.db").exists() {
        open_reading(ctx)?
    } else {
        (crate::support::open::open_store_read_only(ctx)?, None)
    };
    let mut found = query(&store, prefix, want)?;
    if found.is_empty() && !store.is_read_only() {
        refresh_index(ctx, &store)?;
        found = query(&store, prefix, want)?;
    }
    Ok(found)
}

fn query(store: &StateStore, prefix: &str, want: Want) -> Result<Vec<IdMatch>, CliError> {
    let mut found = Vec::new();
    if matches!(want, Want::Run | Want::Either) {
        found.extend(
            store
                .run_ids_with_prefix(prefix, MAX_CANDIDATES + 1)
                .map_err(state_err)?,
        );
    }
    if matches!(want, Want::Session | Want::Either) {
        found.extend(
            store
                .session_ids_with_prefix(prefix, MAX_CANDIDATES + 1)
                .map_err(state_err)?,
        );
    }
    Ok(found)
}

/// What the run index and `state.db`, as they are (read-only, not brought up to date), say
/// `id` names: itself when a run or session has that whole id, else the one id it is a prefix
/// of (at least [`MIN_PREFIX`] characters); `None` when they know neither (the caller then
/// looks for the whole id the way it always did, and [`expand`]s after that). Asked first, so
/// that a short id costs index look-ups only, never a probe of the run tree.
///
/// # Errors
/// Usage (2) listing the candidates when several ids start with `id` and none is `id`
/// itself; data (4) when `state.db` cannot be read.
pub(crate) fn lookup_indexed(
    ctx: &mut Ctx<'_>,
    id: &str,
    want: Want,
) -> Result<Option<(IdKind, String)>, CliError> {
    if !ctx.root.path.join("state.db").is_file() || session_schema::check_id(id).is_err() {
        return Ok(None);
    }
    let Ok(store) = StateStore::open_read_only(&ctx.root.path) else {
        return Ok(None);
    };
    let found = query(&store, id, want)?;
    // Runs come first in `found`: a whole id that is a run's and a session's is the run.
    if let Some(m) = found.iter().find(|m| m.id == id) {
        return Ok(Some((m.kind, id.to_owned())));
    }
    if id.len() < MIN_PREFIX {
        return Ok(None);
    }
    match found.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some((one.kind, one.id.clone()))),
        _ => Err(ambiguous(ctx, id, &found)),
    }
}

/// The one id that `prefix` abbreviates: `Ok(None)` when nothing matches (the caller reports
/// "not found" as it did for an unknown whole id).
///
/// # Errors
/// Usage (2) listing the candidates when several ids match; data (4) when the store cannot
/// be read.
pub(crate) fn expand(
    ctx: &mut Ctx<'_>,
    prefix: &str,
    want: Want,
) -> Result<Option<(IdKind, String)>, CliError> {
    let mut found = candidates(ctx, prefix, want)?;
    match found.len() {
        0 => Ok(None),
        1 => Ok(found.pop().map(|m| (m.kind, m.id))),
        _ => Err(ambiguous(ctx, prefix, &found)),
    }
}

/// The usage error of an ambiguous prefix: one line per candidate, `kind id  time  text`.
fn ambiguous(ctx: &Ctx<'_>, prefix: &str, found: &[IdMatch]) -> CliError {
    let runs = found.iter().filter(|m| m.kind == IdKind::Run).count();
    let sessions = found.len() - runs;
    let listed = found
        .iter()
        .filter(|m| m.kind == IdKind::Run)
        .take(MAX_CANDIDATES)
        .chain(
            found
                .iter()
                .filter(|m| m.kind == IdKind::Session)
                .take(MAX_CANDIDATES),
        )
        .map(|m| {
            (
                m.kind.as_str(),
                m.id.as_str(),
                m.time.as_deref(),
                m.text.as_deref(),
            )
        });
    ambiguous_list(ctx, prefix, (runs, sessions), listed)
}

/// The usage error of an ambiguous prefix from `counts` (runs, sessions that match; more
/// than [`MAX_CANDIDATES`] reads "more than") and the candidates to list, each
/// `(kind, id, time, text)`, one line per candidate: `kind id  time  text`. Shared by the
/// local and the shared store ([`crate::support::shared::resolve_id`]).
pub(crate) fn ambiguous_list<'a>(
    ctx: &Ctx<'_>,
    prefix: &str,
    counts: (usize, usize),
    listed: impl Iterator<Item = (&'a str, &'a str, Option<&'a str>, Option<&'a str>)>,
) -> CliError {
    let times = ctx.times(false);
    let mut words = Vec::new();
    for (n, noun) in [(counts.0, "run"), (counts.1, "session")] {
        match n {
            0 => {}
            1 => words.push(format!("1 {noun}")),
            n if n > MAX_CANDIDATES => words.push(format!("more than {MAX_CANDIDATES} {noun}s")),
            n => words.push(format!("{n} {noun}s")),
        }
    }
    let mut msg = format!(
        "id prefix `{prefix}` is ambiguous: {} match; give more characters",
        words.join(" and ")
    );
    let listed: Vec<_> = listed.collect();
    let width = listed
        .iter()
        .map(|(_, id, _, _)| id.len())
        .max()
        .unwrap_or(0);
    for (kind, id, time, text) in listed {
        let time = time.map(|t| times.show(t)).unwrap_or_default();
        let text = text
            .map(|t| one_line(&escape_controls(t), 60))
            .unwrap_or_default();
        msg.push_str(&format!("\n  {kind:<7} {id:<width$}  {time:<20}  {text}"));
    }
    CliError::Usage(msg.trim_end().to_owned())
}

/// The "not found" error of an id that is neither a whole id nor a prefix of one.
pub(crate) fn not_found(ctx: &Ctx<'_>, id: &str, want: Want) -> CliError {
    let short = if id.len() < MIN_PREFIX {
        format!(" (an id prefix needs at least {MIN_PREFIX} characters)")
    } else {
        String::new()
    };
    CliError::NotFound(format!(
        "no {} {id} under {}{short}",
        want.noun(),
        ctx.root.path.display()
    ))
}

/// The newest run or session of the current directory's workspace (the workspace `sessions`
/// lists by default): for [`Want::Session`] and [`Want::Either`] the session the `sessions`
/// listing shows first (the most recently updated), for [`Want::Run`] (and [`Want::Either`]
/// when the workspace has no saved session) the run that started last.
///
/// # Errors
/// Not found (3) when the workspace has none; data (4) when the store cannot be read.
pub(crate) fn newest(ctx: &mut Ctx<'_>, want: Want) -> Result<(IdKind, String), CliError> {
    let ws = crate::support::paths::workspace_of(&ctx.cwd()?)
        .to_string_lossy()
        .into_owned();
    let (store, _) = open_reading(ctx)?;
    if matches!(want, Want::Session | Want::Either) {
        let page = store
            .list(&ListQuery::all().workspace(ws.clone()).limit(1))
            .map_err(state_err)?;
        if let Some(e) = page.entries.into_iter().next() {
            return Ok((IdKind::Session, e.summary.session_id));
        }
    }
    if matches!(want, Want::Run | Want::Either) {
        refresh_index(ctx, &store)?;
        if let Some(m) = store.newest_run_of_workspace(&ws).map_err(state_err)? {
            return Ok((IdKind::Run, m.id));
        }
    }
    Err(CliError::NotFound(format!(
        "no {} in workspace {ws} under {} (`-` and --last mean the newest of the current \
         directory's workspace; `sessions sessions --all` lists every workspace)",
        want.noun(),
        ctx.root.path.display()
    )))
}

/// `id` as a whole session id: [`id_arg`] for a session.
///
/// # Errors
/// As [`id_arg`].
pub(crate) fn session_arg(ctx: &mut Ctx<'_>, id: &str) -> Result<String, CliError> {
    id_arg(ctx, id, Want::Session)
}

/// `id` as a whole id for a command that wants `want`: `@title` is the session with that title
/// (not for a run), `-` is the [`newest`]; an id that names nothing is expanded as a prefix
/// ([`expand`]); anything else is returned as it is (for the command to find, or report as
/// not found).
///
/// # Errors
/// Usage (2) for an unsafe id or an ambiguous prefix; not found (3) for `-` in a workspace
/// without runs or sessions, or an unknown title.
pub(crate) fn id_arg(ctx: &mut Ctx<'_>, id: &str, want: Want) -> Result<String, CliError> {
    if id.starts_with('@') && want != Want::Run {
        return crate::support::labels::resolve_id(ctx, id);
    }
    check(id, want)?;
    if id == NEWEST {
        return newest(ctx, want).map(|(_, id)| id);
    }
    let (store, _) = open_reading(ctx)?;
    // The whole id sorts first among the ids it begins.
    if query(&store, id, want)?.iter().any(|m| m.id == id) {
        return Ok(id.to_owned());
    }
    drop(store);
    Ok(match expand(ctx, id, want)? {
        Some((_, full)) => full,
        None => id.to_owned(),
    })
}
