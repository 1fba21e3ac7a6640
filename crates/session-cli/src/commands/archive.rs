//! `sessions archive`: compresses old run files with zstd (`.jsonl.zst`), which every reading
//! command reads as it reads a plain run file.

use std::fs;

use crate::Ctx;
use crate::cli::ArchiveArgs;
use crate::error::{CliError, EXIT_OK, one_line};
use crate::json_rows::{ActionKind, ActionStatus};
use crate::style::bytes as fmt_bytes;
use crate::support::housekeeping::{Action, emit, note, open_for, reference_note, scan_runs};
use crate::support::open::refresh_index;
use crate::support::paths::rel;
use crate::timefmt::older_than;

/// `sessions archive`: compresses run files older than the cutoff, one action line each.
///
/// # Errors
/// Usage (2), not found (3) or data (4), as the command's help describes.
pub(crate) fn run(ctx: &mut Ctx<'_>, args: &ArchiveArgs) -> Result<i32, CliError> {
    let cutoff = older_than(&args.older_than, ctx.now, &ctx.zone)?;
    let store = open_for(ctx, args.dry_run)?;
    let root = ctx.root.path.clone();
    let runs = scan_runs(ctx)?;
    let (mut before, mut after, mut count, mut failed) = (0u64, 0u64, 0usize, 0usize);
    for r in runs
        .iter()
        .filter(|r| !r.compressed && r.activity.is_some_and(|a| a < cutoff))
    {
        let file = rel(&root, &r.path).into_owned();
        if r.locked {
            let a = Action {
                action: ActionKind::Archive,
                file,
                id: Some(r.run_id.clone()),
                status: ActionStatus::Skipped,
                detail: "a writer has the file open".into(),
            };
            emit(ctx, args.json, &a)?;
            continue;
        }
        if args.dry_run {
            before += r.size;
            count += 1;
            let a = Action {
                action: ActionKind::Archive,
                file,
                id: Some(r.run_id.clone()),
                status: ActionStatus::Planned,
                detail: fmt_bytes(r.size),
            };
            emit(ctx, args.json, &a)?;
            continue;
        }
        match session_jsonl::compress_run(&r.path) {
            Ok(p) => {
                let size = fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
                before += r.size;
                after += size;
                count += 1;
                let a = Action {
                    action: ActionKind::Archive,
                    file,
                    id: Some(r.run_id.clone()),
                    status: ActionStatus::Done,
                    detail: format!("{} → {}", fmt_bytes(r.size), fmt_bytes(size)),
                };
                emit(ctx, args.json, &a)?;
            }
            Err(e) => {
                failed += 1;
                let a = Action {
                    action: ActionKind::Archive,
                    file,
                    id: Some(r.run_id.clone()),
                    status: ActionStatus::Failed,
                    detail: one_line(&e),
                };
                emit(ctx, args.json, &a)?;
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
                "would archive {count} run file(s) ({})",
                fmt_bytes(before)
            )?;
        } else {
            writeln!(
                ctx.out,
                "archived {count} run file(s): {} → {}; {failed} failure(s)",
                fmt_bytes(before),
                fmt_bytes(after)
            )?;
        }
    }
    if count > 0 {
        note(ctx, args.json, &reference_note(count, args.dry_run))?;
    }
    if failed > 0 {
        return Err(CliError::Data(format!(
            "{failed} run file(s) could not be archived (listed above)"
        )));
    }
    Ok(EXIT_OK)
}
