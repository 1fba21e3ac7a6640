//! `sessions repair`: seals torn tails, rebuilds missing `state.db` rows from the message logs,
//! migrates legacy snapshots, removes stale temporary files and rebuilds the run index.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use session_jsonl::JsonlError;
use session_state::{EntrySource, ListQuery, MigrationOutcome, ReconstructionOutcome};
use time::OffsetDateTime;

use crate::Ctx;
use crate::cli::RepairArgs;
use crate::error::{CliError, EXIT_OK, one_line};
use crate::json_rows::{ActionKind, ActionStatus};
use crate::progress::Progress;
use crate::support::housekeeping::{Action, emit, open_for};
use crate::support::paths::rel;

/// `sessions repair`: seals torn tails, rebuilds missing `state.db` rows, migrates legacy
/// snapshots and rebuilds the run index; one action line each.
///
/// # Errors
/// Usage (2), not found (3) or data (4), as the command's help describes.
pub(crate) fn run(ctx: &mut Ctx<'_>, args: &RepairArgs) -> Result<i32, CliError> {
    let store = open_for(ctx, args.dry_run)?;
    let root = ctx.root.path.clone();
    let planned_or_done = if args.dry_run {
        ActionStatus::Planned
    } else {
        ActionStatus::Done
    };
    let mut changes = 0usize;
    let mut failures = 0usize;
    // 1. Torn tails: append `\n` so the fragment stays a separate damaged line and the next
    //    append starts clean. Nothing is truncated or rewritten.
    // Each step and each item goes on when one fails: the failure is listed and counted, and
    // the exit status says so at the end.
    let listing = match session_jsonl::list_run_files(&root) {
        Ok(l) => l,
        Err(e) => {
            failures += 1;
            let a = Action {
                action: ActionKind::SealTornTail,
                file: ".".into(),
                id: None,
                status: ActionStatus::Failed,
                detail: format!("cannot list the run files: {}", one_line(&e)),
            };
            emit(ctx, args.json, &a)?;
            session_jsonl::RunListing::default()
        }
    };
    let bar = Progress::new(
        ctx.progress,
        listing.files.len() as u64,
        "checking run tails",
    );
    for f in listing.files.iter().filter(|f| !f.compressed) {
        bar.inc();
        let needs = match session_jsonl::needs_seal(&f.path) {
            Ok(n) => n,
            Err(e) => {
                failures += 1;
                let a = Action {
                    action: ActionKind::SealTornTail,
                    file: rel(&root, &f.path).into_owned(),
                    id: Some(f.run_id.clone()),
                    status: ActionStatus::Failed,
                    detail: one_line(&e),
                };
                emit(ctx, args.json, &a)?;
                continue;
            }
        };
        if !needs {
            continue;
        }
        let len = fs::metadata(&f.path).map(|m| m.len()).unwrap_or(0);
        let recent = if args.force {
            None
        } else {
            recent_write(&f.path, ctx.now)
        };
        let (status, detail) = if session_jsonl::is_locked(&f.path).unwrap_or(false) {
            (
                ActionStatus::Skipped,
                "a writer has the file open".to_owned(),
            )
        } else if let Some(why) = recent {
            (
                ActionStatus::Skipped,
                format!(
                    "{why}, so a runtime that takes no lock, like the reference, may still be \
                     writing it; `sessions repair --force` seals it anyway"
                ),
            )
        } else if args.dry_run {
            (
                ActionStatus::Planned,
                format!("would append a newline at byte offset {len}"),
            )
        } else {
            match session_jsonl::seal_torn_tail(&f.path) {
                Ok(true) => {
                    changes += 1;
                    (
                        ActionStatus::Done,
                        format!("appended a newline at byte offset {len}"),
                    )
                }
                Ok(false) => (ActionStatus::Skipped, "already sealed".to_owned()),
                Err(JsonlError::Locked { .. }) => (
                    ActionStatus::Skipped,
                    "a writer has the file open".to_owned(),
                ),
                Err(e) => {
                    failures += 1;
                    (ActionStatus::Failed, one_line(&e))
                }
            }
        };
        let a = Action {
            action: ActionKind::SealTornTail,
            file: rel(&root, &f.path).into_owned(),
            id: Some(f.run_id.clone()),
            status,
            detail,
        };
        emit(ctx, args.json, &a)?;
    }
    bar.finish();
    // Temporary files of an archive or unarchive that was killed: removed once no process
    // holds their run (session_jsonl::archive::remove_stale_temp takes its lock to know).
    let (c, f) = remove_stale_temps(ctx, args)?;
    changes += c;
    failures += f;
    // 2. Message logs without a state.db row (a lost, replaced or restored state.db): rebuild
    //    the row from the log and the session's run logs; no file is written.
    let rebuilt = rebuild_rows(ctx, &store, args, &mut changes, &mut failures)?;
    // 3. Legacy snapshots without a row: migrate them (the files stay in place). The legacy
    //    sessions are noted first: when the batch stops part way, those it migrated before
    //    stopping are still reported.
    let legacy_before: BTreeSet<String> = store
        .list(&ListQuery::all())
        .map(|p| {
            p.entries
                .into_iter()
                .filter(|e| e.source == EntrySource::Legacy)
                .map(|e| e.summary.session_id)
                .collect()
        })
        .unwrap_or_default();
    match store.migrate_legacy(args.dry_run) {
        Ok(report) => {
            for e in &report.entries {
                if rebuilt.contains(&e.session_id) {
                    // Its row was rebuilt (or, in a dry run, would be) from its messages file.
                    continue;
                }
                let (status, detail) = match &e.outcome {
                    MigrationOutcome::WouldMigrate(s) => (
                        ActionStatus::Planned,
                        format!("would migrate {} message(s)", s.message_count.unwrap_or(0)),
                    ),
                    MigrationOutcome::Migrated(s) => {
                        changes += 1;
                        (
                            ActionStatus::Done,
                            format!(
                                "migrated {} message(s); the legacy file stays",
                                s.message_count.unwrap_or(0)
                            ),
                        )
                    }
                    MigrationOutcome::AlreadyIndexed => continue,
                    MigrationOutcome::Invalid { detail } => {
                        failures += 1;
                        (ActionStatus::Failed, detail.clone())
                    }
                    MigrationOutcome::UnsafeName => (
                        ActionStatus::Skipped,
                        "file name is not a safe session id".to_owned(),
                    ),
                    _ => (ActionStatus::Skipped, String::new()),
                };
                // What the migration left out or kept raw is part of the report.
                let mut detail = detail;
                for d in &e.damage {
                    detail.push_str("; ");
                    detail.push_str(&crate::support::damage::describe_damage(&root, d));
                }
                for n in &e.notes {
                    detail.push_str("; ");
                    detail.push_str(&crate::support::damage::note_parts(&root, n).1);
                }
                let a = Action {
                    action: ActionKind::MigrateLegacy,
                    file: rel(&root, &e.path).into_owned(),
                    id: Some(e.session_id.clone()),
                    status,
                    detail,
                };
                emit(ctx, args.json, &a)?;
            }
        }
        Err(e) => {
            // One entry of `state/` stopped the batch (a directory named `<id>.json`, an
            // unreadable file): report it and migrate the others one by one.
            let (c, f) = migrate_one_by_one(ctx, &store, args, &legacy_before, &one_line(&e))?;
            changes += c;
            failures += f;
        }
    }
    // 4. The run index, rebuilt from the files.
    if args.dry_run {
        let n = listing.files.len();
        let a = Action {
            action: ActionKind::RebuildIndex,
            file: "state.db".into(),
            id: None,
            status: planned_or_done,
            detail: format!("would re-read {n} run file(s)"),
        };
        emit(ctx, args.json, &a)?;
    } else {
        let bar = Progress::lazy(ctx.progress, "rebuilding the run index");
        let result = store.reindex_with_progress(&mut |d, t| bar.update(d, t));
        bar.finish();
        let a = match result {
            Ok(r) => {
                changes += r.changes.len();
                Action {
                    action: ActionKind::RebuildIndex,
                    file: "state.db".into(),
                    id: None,
                    status: ActionStatus::Done,
                    detail: format!(
                        "{} run(s), {} difference(s), {} unreadable",
                        r.total,
                        r.changes.len(),
                        r.failed.len()
                    ),
                }
            }
            Err(e) => {
                failures += 1;
                Action {
                    action: ActionKind::RebuildIndex,
                    file: "state.db".into(),
                    id: None,
                    status: ActionStatus::Failed,
                    detail: one_line(&e),
                }
            }
        };
        emit(ctx, args.json, &a)?;
    }
    if !args.json {
        let verb = if args.dry_run {
            "dry run: nothing was changed"
        } else {
            "repair finished"
        };
        writeln!(
            ctx.out,
            "{verb}; {changes} change(s), {failures} failure(s)"
        )?;
    }
    if failures > 0 {
        return Err(CliError::Data(format!(
            "{failures} repair action(s) failed (listed above)"
        )));
    }
    Ok(EXIT_OK)
}

/// `repair`'s removal of the temporary files killed archive and unarchive runs left beside
/// run files. Returns (changes, failures).
fn remove_stale_temps(ctx: &mut Ctx<'_>, args: &RepairArgs) -> Result<(usize, usize), CliError> {
    let root = ctx.root.path.clone();
    let (mut changes, mut failures) = (0, 0);
    let temps = match session_jsonl::archive::stale_temp_files(&root) {
        Ok(t) => t,
        Err(e) => {
            let a = Action {
                action: ActionKind::RemoveStaleTemp,
                file: ".".into(),
                id: None,
                status: ActionStatus::Failed,
                detail: format!("cannot look for temporary files: {}", one_line(&e)),
            };
            emit(ctx, args.json, &a)?;
            return Ok((0, 1));
        }
    };
    for t in temps {
        let (status, detail) = if args.dry_run {
            (
                ActionStatus::Planned,
                "would remove this temporary file of an interrupted archive or unarchive, \
                 unless a process still holds its run"
                    .to_owned(),
            )
        } else {
            match session_jsonl::archive::remove_stale_temp(&t) {
                Ok(true) => {
                    changes += 1;
                    (
                        ActionStatus::Done,
                        "removed a temporary file of an interrupted archive or unarchive"
                            .to_owned(),
                    )
                }
                Ok(false) => (
                    ActionStatus::Skipped,
                    "in use: a process holds its run (an archive or unarchive running now)"
                        .to_owned(),
                ),
                Err(e) => {
                    failures += 1;
                    (ActionStatus::Failed, one_line(&e))
                }
            }
        };
        let a = Action {
            action: ActionKind::RemoveStaleTemp,
            file: rel(&root, &t).into_owned(),
            id: None,
            status,
            detail,
        };
        emit(ctx, args.json, &a)?;
    }
    Ok((changes, failures))
}

/// `repair`'s second step: a `state.db` row for every message log without one
/// (`StateStore::reconstruct_orphans`), one action line each. Returns the sessions whose row
/// was (or, in a dry run, would be) rebuilt, so that the legacy step does not list them again.
fn rebuild_rows(
    ctx: &mut Ctx<'_>,
    store: &session_state::StateStore,
    args: &RepairArgs,
    changes: &mut usize,
    failures: &mut usize,
) -> Result<BTreeSet<String>, CliError> {
    let root = ctx.root.path.clone();
    let report = match store.reconstruct_orphans(args.dry_run) {
        Ok(r) => r,
        Err(e) => {
            *failures += 1;
            let a = Action {
                action: ActionKind::RebuildRow,
                file: "messages".into(),
                id: None,
                status: ActionStatus::Failed,
                detail: one_line(&e),
            };
            emit(ctx, args.json, &a)?;
            return Ok(BTreeSet::new());
        }
    };
    let mut rebuilt = BTreeSet::new();
    for e in &report.entries {
        let (status, verb) = match &e.outcome {
            ReconstructionOutcome::WouldRebuild => (ActionStatus::Planned, "would rebuild"),
            ReconstructionOutcome::Rebuilt => {
                *changes += 1;
                (ActionStatus::Done, "rebuilt")
            }
            ReconstructionOutcome::AlreadyIndexed => continue,
            ReconstructionOutcome::Skipped { reason } => {
                let a = Action {
                    action: ActionKind::RebuildRow,
                    file: rel(&root, &e.path).into_owned(),
                    id: Some(e.session_id.clone()),
                    status: ActionStatus::Skipped,
                    detail: format!("message log without a state.db row: {reason}"),
                };
                emit(ctx, args.json, &a)?;
                continue;
            }
            _ => continue,
        };
        rebuilt.insert(e.session_id.clone());
        let s = &e.summary;
        let mut detail = format!(
            "{verb} its state.db row from the message log ({} message(s)) and {} run log(s){}: \
             updated_at {}, run_id {}, invoke_seq {}; marked reconstructed",
            s.message_count.unwrap_or(0),
            e.run_files.len(),
            if e.legacy_snapshot {
                " with the legacy snapshot's meta"
            } else {
                ""
            },
            s.updated_at.as_str(),
            s.run_id.as_deref().unwrap_or("none"),
            e.invoke_seq
                .map_or_else(|| "none".to_owned(), |n| n.to_string()),
        );
        for d in &e.damage {
            detail.push_str("; ");
            detail.push_str(&crate::support::damage::describe_damage(&root, d));
        }
        for (path, err) in &e.unreadable_runs {
            detail.push_str(&format!("; run log {} not read: {err}", rel(&root, path)));
        }
        if let Some(err) = &e.legacy_error {
            detail.push_str(&format!("; legacy snapshot not used: {err}"));
        }
        let a = Action {
            action: ActionKind::RebuildRow,
            file: rel(&root, &e.path).into_owned(),
            id: Some(e.session_id.clone()),
            status,
            detail,
        };
        emit(ctx, args.json, &a)?;
    }
    Ok(rebuilt)
}

/// `repair`'s legacy migration when the batch migration stopped at one entry (`batch_error`):
/// every `state/` entry the session listing could not read is a failed item, a session of
/// `legacy_before` that has a row now was migrated by the batch before it stopped, every
/// legacy session still without a row is migrated by loading it (loading migrates, as the
/// reference's `load` does) or, in a dry run, planned. Returns (changes, failures).
fn migrate_one_by_one(
    ctx: &mut Ctx<'_>,
    store: &session_state::StateStore,
    args: &RepairArgs,
    legacy_before: &BTreeSet<String>,
    batch_error: &str,
) -> Result<(usize, usize), CliError> {
    let root = ctx.root.path.clone();
    let (mut changes, mut failures) = (0, 0);
    let page = match store.list(&ListQuery::all()) {
        Ok(p) => p,
        Err(e) => {
            let a = Action {
                action: ActionKind::MigrateLegacy,
                file: "state".into(),
                id: None,
                status: ActionStatus::Failed,
                detail: format!("{batch_error}; listing the sessions: {}", one_line(&e)),
            };
            emit(ctx, args.json, &a)?;
            return Ok((0, 1));
        }
    };
    for d in &page.diagnostics {
        failures += 1;
        let a = Action {
            action: ActionKind::MigrateLegacy,
            file: rel(&root, &d.path).into_owned(),
            id: None,
            status: ActionStatus::Failed,
            detail: d.detail.clone(),
        };
        emit(ctx, args.json, &a)?;
    }
    if page.diagnostics.is_empty() {
        // The listing saw nothing wrong: name the batch's own error once.
        failures += 1;
        let a = Action {
            action: ActionKind::MigrateLegacy,
            file: "state".into(),
            id: None,
            status: ActionStatus::Failed,
            detail: batch_error.to_owned(),
        };
        emit(ctx, args.json, &a)?;
    }
    for e in page.entries.iter().filter(|e| {
        e.source == EntrySource::Legacy || legacy_before.contains(&e.summary.session_id)
    }) {
        let id = e.summary.session_id.clone();
        let file = store
            .legacy_path(&id)
            .map(|p| rel(&root, &p).into_owned())
            .unwrap_or_else(|_| format!("state/{id}.json"));
        let (status, detail) = if e.source != EntrySource::Legacy {
            changes += 1;
            (
                ActionStatus::Done,
                format!(
                    "migrated {} message(s); the legacy file stays",
                    e.summary.message_count.unwrap_or(0)
                ),
            )
        } else if args.dry_run {
            (
                ActionStatus::Planned,
                format!(
                    "would migrate {} message(s)",
                    e.summary.message_count.unwrap_or(0)
                ),
            )
        } else {
            match store.load(&id) {
                Ok(Some(l)) => {
                    changes += 1;
                    (
                        ActionStatus::Done,
                        format!(
                            "migrated {} message(s); the legacy file stays",
                            l.state.messages.len()
                        ),
                    )
                }
                Ok(None) => (ActionStatus::Skipped, "the snapshot is gone".to_owned()),
                Err(err) => {
                    failures += 1;
                    (ActionStatus::Failed, one_line(&err))
                }
            }
        };
        let a = Action {
            action: ActionKind::MigrateLegacy,
            file,
            id: Some(id),
            status,
            detail,
        };
        emit(ctx, args.json, &a)?;
    }
    Ok((changes, failures))
}

/// Why a run file with a torn tail may still be being written, the way `runs` decides that a
/// run without `run.end` is `running`: its last record is under two minutes old (by its `ts`,
/// against the current time, `SESSIONS_NOW` included), or, since the torn line's own time
/// cannot be read, the file was modified under two minutes ago (by the system clock; a
/// modification time in the future counts as recent). `None`: settled.
fn recent_write(path: &Path, now: OffsetDateTime) -> Option<String> {
    use crate::support::listing::{RECENT_SECS, recent_record};
    if let Ok(tail) = session_jsonl::terminal_state(path)
        && let Some(ago) = recent_record(tail.last_ts.as_ref().map(|t| t.as_str()), now)
    {
        return Some(format!("its last record is {ago} s old"));
    }
    let modified = fs::metadata(path).and_then(|m| m.modified()).ok()?;
    let ago = match std::time::SystemTime::now().duration_since(modified) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(_) => 0,
    };
    (ago < RECENT_SECS).then(|| format!("the file was modified {ago} s ago"))
}
