//! `sessions unarchive [RUN…] [--all] [--since T] [--until T] [--session ID]`: restore
//! archived runs (`<run_id>.jsonl.zst`) to plain `<run_id>.jsonl`, the only form the reference
//! runtime reads. Each restore is verified and durable before its archive goes
//! ([`session_jsonl::decompress_run`]).

use std::fs;
use std::path::PathBuf;

use time::OffsetDateTime;

use crate::Ctx;
use crate::cli::UnarchiveArgs;
use crate::error::{CliError, EXIT_OK, one_line};
use crate::json_rows::{ActionKind, ActionStatus};
use crate::style::bytes as fmt_bytes;
use crate::support::housekeeping::{Action, emit, note, open_for};
use crate::support::lib_errors::jsonl_err;
use crate::support::open::refresh_index;
use crate::support::paths::rel;
use crate::timefmt::parse_instant;

/// An archived run chosen for restoring.
struct Chosen {
    archive: PathBuf,
    run_id: String,
}

/// Whether the archive's header matches the time and session filters (a run whose start time
/// is missing or unparseable matches no time bound, as in `runs`).
fn matches(
    archive: &std::path::Path,
    since: Option<OffsetDateTime>,
    until: Option<OffsetDateTime>,
    session: Option<&str>,
) -> Result<bool, CliError> {
    if since.is_none() && until.is_none() && session.is_none() {
        return Ok(true);
    }
    let head = session_jsonl::read_header(archive).map_err(jsonl_err)?;
    if session.is_some_and(|s| head.facts.session_id.as_deref() != Some(s)) {
        return Ok(false);
    }
    if since.is_none() && until.is_none() {
        return Ok(true);
    }
    let Some(started) = head.facts.started_at.as_ref().and_then(|t| t.parse()) else {
        return Ok(false);
    };
    Ok(since.is_none_or(|s| started >= s) && until.is_none_or(|u| started < u))
}

/// The whole run ids and session id of `unarchive`'s arguments: each RUN that names no run
/// file expanded as a unique prefix ([`crate::support::ids`]), `--session` likewise.
///
/// # Errors
/// Usage (2) for an unsafe id or an ambiguous prefix.
fn expand_ids(
    ctx: &mut Ctx<'_>,
    args: &UnarchiveArgs,
) -> Result<(Vec<String>, Option<String>), CliError> {
    let root = ctx.root.path.clone();
    let mut runs = Vec::with_capacity(args.runs.len());
    for id in &args.runs {
        crate::support::ids::check(id, crate::support::ids::Want::Run)?;
        let known = !session_jsonl::find_all_runs(&root, id)
            .map_err(jsonl_err)?
            .is_empty();
        let full = match known {
            true => None,
            false => crate::support::ids::expand(ctx, id, crate::support::ids::Want::Run)?,
        };
        runs.push(full.map_or_else(|| id.clone(), |(_, full)| full));
    }
    let session = args
        .session
        .as_deref()
        .map(|s| crate::support::ids::session_arg(ctx, s))
        .transpose()?;
    Ok((runs, session))
}

/// `sessions unarchive`: decompresses archived run files back into plain ones.
///
/// # Errors
/// Usage (2), not found (3) or data (4), as the command's help describes.
pub(crate) fn run(ctx: &mut Ctx<'_>, args: &UnarchiveArgs) -> Result<i32, CliError> {
    if args.runs.is_empty()
        && !args.all
        && args.since.is_none()
        && args.until.is_none()
        && args.session.is_none()
    {
        return Err(CliError::Usage(
            "say which runs to restore: RUN ids, --all, --since, --until or --session".into(),
        ));
    }
    let since = args
        .since
        .as_deref()
        .map(|t| parse_instant(t, ctx.now, &ctx.zone))
        .transpose()?;
    let until = args
        .until
        .as_deref()
        .map(|t| parse_instant(t, ctx.now, &ctx.zone))
        .transpose()?;
    // Short ids are expanded before anything is restored; a dry run looks them up read-only.
    let read_only = ctx.read_only;
    ctx.read_only |= args.dry_run;
    let wanted = expand_ids(ctx, args);
    ctx.read_only = read_only;
    let (run_ids, session) = wanted?;
    let store = open_for(ctx, args.dry_run)?;
    let root = ctx.root.path.clone();
    let mut chosen: Vec<Chosen> = Vec::new();
    let mut not_archived: Vec<(String, PathBuf)> = Vec::new();
    if run_ids.is_empty() {
        let listing = session_jsonl::list_run_files(&root).map_err(jsonl_err)?;
        for f in listing.files.into_iter().filter(|f| f.compressed) {
            chosen.push(Chosen {
                archive: f.path,
                run_id: f.run_id,
            });
        }
    } else {
        // Every id is checked before anything is restored: a typo restores nothing.
        for id in &run_ids {
            let files = session_jsonl::find_all_runs(&root, id).map_err(jsonl_err)?;
            if files.is_empty() {
                return Err(CliError::NotFound(format!(
                    "no run {id} under {}",
                    root.display()
                )));
            }
            let (archives, plain): (Vec<PathBuf>, Vec<PathBuf>) = files
                .into_iter()
                .partition(|p| session_jsonl::is_archived(p));
            if archives.is_empty() {
                not_archived.extend(plain.into_iter().map(|p| (id.clone(), p)));
            }
            chosen.extend(archives.into_iter().map(|archive| Chosen {
                archive,
                run_id: id.clone(),
            }));
        }
    }
    for (id, p) in &not_archived {
        let a = Action {
            action: ActionKind::Unarchive,
            file: rel(&root, p).into_owned(),
            id: Some(id.clone()),
            status: ActionStatus::Skipped,
            detail: "not archived".into(),
        };
        emit(ctx, args.json, &a)?;
    }
    let (mut count, mut failed) = (0usize, 0usize);
    let (mut before, mut after) = (0u64, 0u64);
    for c in &chosen {
        let file = rel(&root, &c.archive).into_owned();
        let fail = |detail: String| Action {
            action: ActionKind::Unarchive,
            file: file.clone(),
            id: Some(c.run_id.clone()),
            status: ActionStatus::Failed,
            detail,
        };
        match matches(&c.archive, since, until, session.as_deref()) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(e) => {
                failed += 1;
                emit(ctx, args.json, &fail(format!("header not read: {e}")))?;
                continue;
            }
        }
        let size = fs::metadata(&c.archive).map(|m| m.len()).unwrap_or(0);
        if args.dry_run {
            count += 1;
            before += size;
            let a = Action {
                action: ActionKind::Unarchive,
                file,
                id: Some(c.run_id.clone()),
                status: ActionStatus::Planned,
                detail: fmt_bytes(size),
            };
            emit(ctx, args.json, &a)?;
            continue;
        }
        match session_jsonl::decompress_run(&c.archive) {
            Ok(plain) => {
                let restored = fs::metadata(&plain).map(|m| m.len()).unwrap_or(0);
                count += 1;
                before += size;
                after += restored;
                let a = Action {
                    action: ActionKind::Unarchive,
                    file,
                    id: Some(c.run_id.clone()),
                    status: ActionStatus::Done,
                    detail: format!(
                        "{} → {} ({})",
                        fmt_bytes(size),
                        fmt_bytes(restored),
                        rel(&root, &plain)
                    ),
                };
                emit(ctx, args.json, &a)?;
            }
            Err(session_jsonl::JsonlError::Locked { .. }) => {
                let a = Action {
                    action: ActionKind::Unarchive,
                    file,
                    id: Some(c.run_id.clone()),
                    status: ActionStatus::Skipped,
                    detail: "another unarchive is restoring it now".into(),
                };
                emit(ctx, args.json, &a)?;
            }
            Err(e) => {
                failed += 1;
                emit(ctx, args.json, &fail(one_line(&e)))?;
            }
        }
    }
    if !args.dry_run && count > 0 {
        refresh_index(ctx, &store)?;
    }
    if !args.json {
        if args.dry_run {
            writeln!(
                ctx.out,
                "would restore {count} run file(s) ({})",
                fmt_bytes(before)
            )?;
        } else {
            writeln!(
                ctx.out,
                "restored {count} run file(s): {} → {}; {failed} failure(s)",
                fmt_bytes(before),
                fmt_bytes(after)
            )?;
        }
    }
    if count > 0 {
        let verb = if args.dry_run { "would read" } else { "reads" };
        note(
            ctx,
            args.json,
            &format!(
                "the reference runtime {verb} the {count} restored run(s) again (it reads only \
                 .jsonl files)"
            ),
        )?;
    }
    if failed > 0 {
        return Err(CliError::Data(format!(
            "{failed} run file(s) could not be restored (listed above)"
        )));
    }
    Ok(EXIT_OK)
}
