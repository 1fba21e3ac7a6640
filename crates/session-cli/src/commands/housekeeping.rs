//! Commands that change the store: `repair`, `gc` (retention into a trash folder) and
//! `archive` (zstd compression of old run files).

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use session_jsonl::{JsonlError, RunEndState};
use session_state::{EntrySource, ListQuery, MigrationOutcome, ReconstructionOutcome};
use time::OffsetDateTime;

use super::state::{open_store, open_store_read_only, refresh_index, state_err};
use crate::Ctx;
use crate::cli::{ArchiveArgs, GcArgs, RepairArgs};
use crate::error::{CliError, EXIT_OK, one_line};
use crate::json_rows::{ActionKind, ActionRow, ActionStatus, NoteRow, Row, write_row};
use crate::jsonw::JsonObj;
use crate::progress::Progress;
use crate::store::{jsonl_err, rel};
use crate::style::{Paint, bytes as fmt_bytes};
use crate::timefmt::older_than;

/// Name of the trash folder under the root (never a date directory, so no reader sees it).
pub(crate) const TRASH_DIR: &str = "trash";
/// The record of what one `gc` moved, one JSON object per line, written before each move.
pub(crate) const MANIFEST: &str = "manifest.jsonl";

/// One line of output of a housekeeping command.
pub(super) struct Action {
    pub(super) action: ActionKind,
    pub(super) file: String,
    pub(super) id: Option<String>,
    pub(super) status: ActionStatus,
    pub(super) detail: String,
}

pub(super) fn emit(ctx: &mut Ctx<'_>, json: bool, a: &Action) -> Result<(), CliError> {
    if json {
        let row = ActionRow {
            action: a.action,
            file: a.file.clone(),
            id: a.id.clone(),
            status: a.status,
            detail: a.detail.clone(),
        };
        write_row(ctx.out, &Row::Action(row))?;
    } else {
        let s = ctx.style;
        let word = a.status.as_str();
        let status = match a.status {
            ActionStatus::Done => s.paint(Paint::Green, word),
            ActionStatus::Planned => s.paint(Paint::Yellow, word),
            ActionStatus::Failed => s.paint(Paint::Red, word),
            ActionStatus::Skipped => s.paint(Paint::Dim, word),
        };
        let detail = if a.detail.is_empty() {
            String::new()
        } else {
            format!(" ({})", a.detail)
        };
        writeln!(
            ctx.out,
            "{status:<8} {} {}{detail}",
            a.action.human(),
            a.file
        )?;
    }
    Ok(())
}

/// The store for a housekeeping command: read-only for a dry run (which must not change a
/// byte of the store, not even `state.db`'s bookkeeping), writable otherwise.
pub(super) fn open_for(
    ctx: &mut Ctx<'_>,
    dry_run: bool,
) -> Result<session_state::StateStore, CliError> {
    if dry_run {
        open_store_read_only(ctx)
    } else {
        open_store(ctx)
    }
}

// ---------------------------------------------------------------------------------------------
// repair

pub(crate) fn repair(ctx: &mut Ctx<'_>, args: &RepairArgs) -> Result<i32, CliError> {
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
                    detail.push_str(&super::export::describe_damage(&root, d));
                }
                for n in &e.notes {
                    detail.push_str("; ");
                    detail.push_str(&super::export::note_parts(&root, n).1);
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
            detail.push_str(&super::export::describe_damage(&root, d));
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
    use super::runs::{RECENT_SECS, recent_record};
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

// ---------------------------------------------------------------------------------------------
// gc

/// A run file as `gc`/`archive`/`delete` see it.
pub(super) struct RunFacts {
    pub(super) path: PathBuf,
    pub(super) run_id: String,
    pub(super) session_id: Option<String>,
    pub(super) started_at: Option<String>,
    pub(super) last_ts: Option<String>,
    /// Latest of `started_at` and the last record's `ts`; `None` when neither parses.
    pub(super) activity: Option<OffsetDateTime>,
    pub(super) ended: bool,
    pub(super) locked: bool,
    pub(super) compressed: bool,
    pub(super) size: u64,
}

fn parse_ts(s: Option<&str>) -> Option<OffsetDateTime> {
    s.and_then(|t| session_schema::Timestamp::from_raw(t).parse())
}

fn scan_runs(ctx: &Ctx<'_>) -> Result<Vec<RunFacts>, CliError> {
    let listing = session_jsonl::list_run_files(&ctx.root.path).map_err(jsonl_err)?;
    let bar = Progress::new(
        ctx.progress,
        listing.files.len() as u64,
        "reading run files",
    );
    let mut out = Vec::with_capacity(listing.files.len());
    for f in listing.files {
        bar.inc();
        out.push(run_facts(f.path, f.run_id, f.compressed)?);
    }
    bar.finish();
    Ok(out)
}

/// The facts of one run file (`run_id` from its name, replaced by its header's when it has
/// one; `compressed` for a `.jsonl.zst` archive).
pub(super) fn run_facts(
    path: PathBuf,
    run_id: String,
    compressed: bool,
) -> Result<RunFacts, CliError> {
    let head = session_jsonl::read_header(&path).map_err(jsonl_err)?;
    // gc acts on the answer: a run ending in a very long record is read back to its start.
    let tail = session_jsonl::terminal_state_exact(&path).map_err(jsonl_err)?;
    let started_at = head
        .facts
        .started_at
        .as_ref()
        .map(|t| t.as_str().to_owned());
    let last_ts = tail.last_ts.as_ref().map(|t| t.as_str().to_owned());
    let activity = match (
        parse_ts(started_at.as_deref()),
        parse_ts(last_ts.as_deref()),
    ) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    Ok(RunFacts {
        locked: !compressed && session_jsonl::is_locked(&path).unwrap_or(true),
        size: fs::metadata(&path).map(|m| m.len()).unwrap_or(0),
        ended: !matches!(tail.end, RunEndState::Open),
        run_id: head.facts.run_id.clone().unwrap_or(run_id),
        session_id: head.facts.session_id.clone(),
        compressed,
        path,
        started_at,
        last_ts,
        activity,
    })
}

fn trash_stamp(now: OffsetDateTime) -> String {
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    )
}

/// Appends one manifest line and fsyncs it (the record of a move exists before the move).
pub(super) fn manifest_line(path: &Path, line: &str) -> Result<(), CliError> {
    let mut f = super::trash::open_private_append(path).map_err(|e| CliError::io(path, e))?;
    f.write_all(line.as_bytes())
        .and_then(|()| f.write_all(b"\n"))
        .and_then(|()| f.sync_data())
        .map_err(|e| CliError::io(path, e))
}

fn fsync_dir(dir: &Path) {
    // Best effort: the rename itself is what matters; a failed directory fsync only weakens
    // durability across a power loss.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

fn move_file(from: &Path, to: &Path) -> Result<(), CliError> {
    if let Some(parent) = to.parent() {
        super::trash::create_private_dir(parent)?;
    }
    if to.exists() {
        return Err(CliError::Data(format!(
            "{} exists already; not overwriting",
            to.display()
        )));
    }
    fs::rename(from, to).map_err(|e| CliError::io(from, e))?;
    if let Some(p) = to.parent() {
        fsync_dir(p);
    }
    if let Some(p) = from.parent() {
        fsync_dir(p);
    }
    Ok(())
}

/// Drops the search documents of the run files (and saved messages files) `gc` or `delete`
/// moved to the trash (paths relative to the root), when the store has a search index; a failure is warned about (the next refresh
/// drops them too, as their files are gone).
fn remove_from_search(ctx: &mut Ctx<'_>, root: &Path, moved: &[String]) {
    if moved.is_empty() || !root.join(session_state::SEARCH_DB).exists() {
        return;
    }
    let removed = session_state::SearchIndex::open(root).and_then(|i| i.remove_files(moved));
    if let Err(e) = removed {
        ctx.warn(&format!(
            "search index: the documents of the moved runs stay until the next refresh: {}",
            crate::error::one_line(&e)
        ));
    }
}

/// What is at the trash folder's path: `None` when nothing is. Anything there but a real
/// directory is refused: a link named `trash` points somewhere gc never wrote, so emptying it
/// would delete files outside the store, and moving runs into it would carry them out of it.
///
/// # Errors
/// Data (4) naming the path and `doing`; I/O (4) when it cannot be examined.
fn trash_meta(trash: &Path, doing: &str) -> Result<Option<fs::Metadata>, CliError> {
    let meta = match fs::symlink_metadata(trash) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(CliError::io(trash, e)),
    };
    if meta.is_dir() {
        return Ok(Some(meta));
    }
    let what = if meta.file_type().is_symlink() {
        "is a symbolic link"
    } else {
        "is not a directory"
    };
    Err(CliError::Data(format!(
        "{}: {what}; refusing to {doing} (gc only uses a trash folder it made; remove or \
         rename it yourself)",
        trash.display()
    )))
}

fn empty_trash(ctx: &mut Ctx<'_>, args: &GcArgs) -> Result<i32, CliError> {
    if ctx.read_only && !args.dry_run {
        return Err(CliError::Usage(
            "--read-only: this command changes the store (use --dry-run to see the plan)".into(),
        ));
    }
    // Only a store's own trash: `--root ~` must never empty `~/trash`.
    super::state::check_root(ctx)?;
    let trash = ctx.root.path.join(TRASH_DIR);
    let meta = trash_meta(&trash, "empty it")?;
    if meta.is_none() {
        if args.json {
            let row = ActionRow {
                action: ActionKind::EmptyTrash,
                file: String::new(),
                id: None,
                status: ActionStatus::Skipped,
                detail: "no trash folder".into(),
            };
            write_row(ctx.out, &Row::Action(row))?;
        } else {
            writeln!(ctx.out, "the trash is empty")?;
        }
        return Ok(EXIT_OK);
    }
    let mut batches: Vec<PathBuf> = fs::read_dir(&trash)
        .map_err(|e| CliError::io(&trash, e))?
        .flatten()
        .map(|e| e.path())
        .collect();
    batches.sort();
    let mut total_files = 0;
    let mut total_bytes = 0;
    let mut kept = 0;
    let root = ctx.root.path.clone();
    for b in &batches {
        // A file a writer still holds (a run reopened just before gc moved it) is never
        // deleted: it and its directories stay.
        let emptied = super::trash::empty_tree(b, args.dry_run)?;
        total_files += emptied.files;
        total_bytes += emptied.bytes;
        kept += emptied.kept.len();
        for (path, pid) in &emptied.kept {
            let a = Action {
                action: ActionKind::KeepLocked,
                file: rel(&root, path).into_owned(),
                id: None,
                status: ActionStatus::Skipped,
                detail: format!(
                    "a writer has the file open{}; not deleted",
                    pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
                ),
            };
            emit(ctx, args.json, &a)?;
        }
        let status = if args.dry_run {
            ActionStatus::Planned
        } else {
            ActionStatus::Done
        };
        let a = Action {
            action: ActionKind::Delete,
            file: rel(&root, b).into_owned(),
            id: None,
            status,
            detail: format!("{} file(s), {}", emptied.files, fmt_bytes(emptied.bytes)),
        };
        emit(ctx, args.json, &a)?;
    }
    if !args.dry_run {
        let _ = fs::remove_dir(&trash);
        fsync_dir(&ctx.root.path);
    }
    if !args.json {
        let verb = if args.dry_run {
            "would delete"
        } else {
            "deleted"
        };
        let kept = if kept > 0 {
            format!("; kept {kept} file(s) a writer has open")
        } else {
            String::new()
        };
        writeln!(
            ctx.out,
            "{verb} {total_files} file(s), {} from the trash{kept}",
            fmt_bytes(total_bytes)
        )?;
    }
    Ok(EXIT_OK)
}

pub(crate) fn gc(ctx: &mut Ctx<'_>, args: &GcArgs) -> Result<i32, CliError> {
    if args.empty_trash {
        return empty_trash(ctx, args);
    }
    let cutoff = match args.older_than.as_deref() {
        Some(age) => Some(older_than(age, ctx.now, &ctx.zone)?),
        None => None,
    };
    let max_size = args
        .max_size
        .as_deref()
        .map(super::manage::parse_size)
        .transpose()?;
    let store = open_for(ctx, args.dry_run)?;
    let root = ctx.root.path.clone();
    let runs = scan_runs(ctx)?;
    let sessions = store.list(&ListQuery::all()).map_err(state_err)?;
    let plan = plan_gc(
        &store,
        &runs,
        &sessions.entries,
        cutoff,
        args.keep_last,
        max_size,
    )?;
    let GcPlan {
        moving,
        moving_sessions,
        kept_locked,
        kept_active,
        kept_undated,
        kept_pinned,
        kept_recent,
        over_size,
    } = plan;
    let mut header = JsonObj::new();
    header.str("op", "gc");
    header.str(
        "created_at",
        session_schema::Timestamp::from_datetime(ctx.now).as_str(),
    );
    if let (Some(age), Some(cutoff)) = (args.older_than.as_deref(), cutoff) {
        header.str("older_than", age);
        header.str(
            "cutoff",
            session_schema::Timestamp::from_datetime(cutoff).as_str(),
        );
    }
    if let Some(n) = args.keep_last {
        header.unum("keep_last", n as u64);
    }
    if let Some(m) = max_size {
        header.unum("max_size", m);
    }
    header.str("root", &root.to_string_lossy());
    let moved = trash_batch(
        ctx,
        &store,
        &moving,
        &moving_sessions,
        &header.finish(),
        args.dry_run,
        args.json,
    )?;
    let kept_locked = kept_locked + moved.kept_locked;
    if !args.json {
        let verb = if args.dry_run { "would move" } else { "moved" };
        let whereto = if moved.runs == 0 && moved.sessions == 0 {
            String::new()
        } else {
            format!(" to {}", rel(&root, &moved.batch))
        };
        let mut kept_more = String::new();
        if moved.kept_open > 0 {
            kept_more.push_str(&format!(", {} open session(s)", moved.kept_open));
        }
        if moved.kept_changed > 0 {
            kept_more.push_str(&format!(
                ", {} changed since they were read",
                moved.kept_changed
            ));
        }
        if kept_pinned > 0 {
            kept_more.push_str(&format!(", {kept_pinned} of pinned sessions"));
        }
        if kept_recent > 0 {
            kept_more.push_str(&format!(
                ", {kept_recent} of the newest {} sessions",
                args.keep_last.unwrap_or_default()
            ));
        }
        let window = match args.older_than.as_deref() {
            Some(age) => format!(", {kept_active} of sessions saved within {age}"),
            None => String::new(),
        };
        writeln!(
            ctx.out,
            "{verb} {} run(s) ({}) and {} session(s){whereto}; kept {kept_locked} locked{window}, {kept_undated} undated{kept_more}",
            moved.runs,
            fmt_bytes(moved.bytes),
            moved.sessions,
        )?;
        if let (Some(max), Some(over)) = (max_size, over_size) {
            writeln!(
                ctx.out,
                "the store stays {} over --max-size {}: what is left is pinned, among the newest kept, open, locked or undated",
                fmt_bytes(over),
                fmt_bytes(max)
            )?;
        }
    }
    moved.result()
}

/// What `gc`'s rules select.
struct GcPlan<'a> {
    moving: Vec<&'a RunFacts>,
    moving_sessions: Vec<&'a session_state::ListEntry>,
    kept_locked: usize,
    kept_active: usize,
    kept_undated: usize,
    /// Runs kept because their session is pinned.
    kept_pinned: usize,
    /// Runs kept because their session is among the newest `--keep-last`.
    kept_recent: usize,
    /// With `--max-size`: by how much the store stays over it after the move.
    over_size: Option<u64>,
}

/// `gc`'s selection. Pinned sessions and their runs never move. `keep_last`: the newest N
/// sessions (by `updated_at`; undated ones count as new) and their runs are kept; alone, every
/// other dated session moves with its runs. `cutoff` (`--older-than`): runs whose last
/// activity is before it move unless locked, undated, or of a session saved since; sessions
/// saved before it move when none of their runs is kept. `max_size`: then, while the runs,
/// messages logs and legacy snapshots of the store take more, the oldest remaining session
/// (with its runs, none locked) or run without a session moves.
fn plan_gc<'a>(
    store: &session_state::StateStore,
    runs: &'a [RunFacts],
    sessions: &'a [session_state::ListEntry],
    cutoff: Option<OffsetDateTime>,
    keep_last: Option<usize>,
    max_size: Option<u64>,
) -> Result<GcPlan<'a>, CliError> {
    let pinned = super::manage::pinned_sessions(store)?;
    let updated: BTreeMap<&str, Option<OffsetDateTime>> = sessions
        .iter()
        .map(|e| (e.summary.session_id.as_str(), e.summary.updated_at.parse()))
        .collect();
    // Newest first; undated sessions first of all (never taken for old).
    let mut by_age: Vec<(&str, Option<OffsetDateTime>)> =
        updated.iter().map(|(k, v)| (*k, *v)).collect();
    by_age.sort_by(|a, b| match (a.1, b.1) {
        (None, None) => a.0.cmp(b.0),
        (None, Some(_)) => std::cmp::Ordering::Less,
        (Some(_), None) => std::cmp::Ordering::Greater,
        (Some(x), Some(y)) => y.cmp(&x).then(a.0.cmp(b.0)),
    });
    let recent: BTreeSet<&str> = match keep_last {
        Some(n) => by_age.iter().take(n).map(|(id, _)| *id).collect(),
        None => BTreeSet::new(),
    };
    // Sessions the count rule alone expires (`beyond`, less the pinned ones).
    let beyond: BTreeSet<&str> = match (keep_last, cutoff) {
        (Some(n), None) => by_age
            .iter()
            .skip(n)
            .filter(|(_, t)| t.is_some())
            .map(|(id, _)| *id)
            .collect(),
        _ => BTreeSet::new(),
    };
    let expired: BTreeSet<&str> = beyond
        .iter()
        .copied()
        .filter(|id| !pinned.contains(*id))
        .collect();
    let active = |sid: &str, cutoff: OffsetDateTime| -> bool {
        updated
            .get(sid)
            .is_some_and(|u| u.is_none_or(|t| t >= cutoff))
    };
    let mut plan = GcPlan {
        moving: Vec::new(),
        moving_sessions: Vec::new(),
        kept_locked: 0,
        kept_active: 0,
        kept_undated: 0,
        kept_pinned: 0,
        kept_recent: 0,
        over_size: None,
    };
    let mut kept_sessions: BTreeSet<&str> = BTreeSet::new();
    for r in runs {
        let sid = r.session_id.as_deref();
        let old = cutoff.is_some_and(|c| r.activity.is_some_and(|a| a < c));
        let chosen = sid.is_some_and(|s| expired.contains(s));
        if sid.is_some_and(|s| pinned.contains(s)) {
            plan.kept_pinned += usize::from(old || sid.is_some_and(|s| beyond.contains(s)));
        } else if sid.is_some_and(|s| recent.contains(s)) {
            plan.kept_recent += usize::from(old);
        } else if (old || chosen) && r.locked {
            plan.kept_locked += 1;
        } else if chosen {
            plan.moving.push(r);
            continue;
        } else if old && sid.zip(cutoff).is_some_and(|(s, c)| active(s, c)) {
            plan.kept_active += 1;
        } else if r.activity.is_none() {
            plan.kept_undated += 1;
        } else if old {
            plan.moving.push(r);
            continue;
        }
        if let Some(s) = sid {
            kept_sessions.insert(s);
        }
    }
    let movable = |e: &session_state::ListEntry| {
        let id = e.summary.session_id.as_str();
        !pinned.contains(id) && !recent.contains(id) && !kept_sessions.contains(id)
    };
    plan.moving_sessions = sessions
        .iter()
        .filter(|e| {
            let id = e.summary.session_id.as_str();
            let old = cutoff.is_some_and(|c| e.summary.updated_at.parse().is_some_and(|t| t < c));
            (old || expired.contains(id)) && movable(e)
        })
        .collect();
    if let Some(max) = max_size {
        shrink_to(store, runs, sessions, &pinned, &recent, max, &mut plan)?;
    }
    Ok(plan)
}

/// `--max-size`: adds the oldest sessions (with all their runs; skipped when one is locked)
/// and runs without a saved session to `plan` until the store's runs, messages logs and
/// legacy snapshots take at most `max` bytes; notes in [`GcPlan::over_size`] what remains
/// over.
fn shrink_to<'a>(
    store: &session_state::StateStore,
    runs: &'a [RunFacts],
    sessions: &'a [session_state::ListEntry],
    pinned: &BTreeSet<String>,
    recent: &BTreeSet<&str>,
    max: u64,
    plan: &mut GcPlan<'a>,
) -> Result<(), CliError> {
    let file_size = |p: Result<PathBuf, session_state::StateError>| {
        p.ok()
            .and_then(|p| fs::symlink_metadata(p).ok())
            .filter(fs::Metadata::is_file)
            .map_or(0, |m| m.len())
    };
    let session_bytes =
        |id: &str| file_size(store.messages_path(id)) + file_size(store.legacy_path(id));
    let listed: BTreeSet<&str> = sessions
        .iter()
        .map(|e| e.summary.session_id.as_str())
        .collect();
    let moving_paths: BTreeSet<&Path> = plan.moving.iter().map(|r| r.path.as_path()).collect();
    let moving_ids: BTreeSet<&str> = plan
        .moving_sessions
        .iter()
        .map(|e| e.summary.session_id.as_str())
        .collect();
    let mut total: u64 = runs
        .iter()
        .filter(|r| !moving_paths.contains(r.path.as_path()))
        .map(|r| r.size)
        .sum();
    for id in listed.iter().filter(|id| !moving_ids.contains(*id)) {
        total += session_bytes(id);
    }
    // Candidates, oldest first: sessions by their last save, runs without a saved session
    // by their last activity.
    enum Unit<'a> {
        Session(&'a session_state::ListEntry),
        Run(&'a RunFacts),
    }
    let mut units: Vec<(OffsetDateTime, Unit<'a>)> = Vec::new();
    for e in sessions {
        let id = e.summary.session_id.as_str();
        if pinned.contains(id) || recent.contains(id) || moving_ids.contains(id) {
            continue;
        }
        if let Some(t) = e.summary.updated_at.parse() {
            units.push((t, Unit::Session(e)));
        }
    }
    for r in runs {
        let orphan = r.session_id.as_deref().is_none_or(|s| !listed.contains(s));
        let held = r.session_id.as_deref().is_some_and(|s| pinned.contains(s));
        if orphan
            && !held
            && !r.locked
            && !moving_paths.contains(r.path.as_path())
            && let Some(t) = r.activity
        {
            units.push((t, Unit::Run(r)));
        }
    }
    units.sort_by_key(|(t, _)| *t);
    for (_, unit) in units {
        if total <= max {
            break;
        }
        match unit {
            Unit::Run(r) => {
                total = total.saturating_sub(r.size);
                plan.moving.push(r);
            }
            Unit::Session(e) => {
                let id = e.summary.session_id.as_str();
                let of: Vec<&RunFacts> = runs
                    .iter()
                    .filter(|r| r.session_id.as_deref() == Some(id))
                    .filter(|r| !moving_paths.contains(r.path.as_path()))
                    .collect();
                if of.iter().any(|r| r.locked) {
                    continue;
                }
                for r in of {
                    total = total.saturating_sub(r.size);
                    plan.moving.push(r);
                }
                total = total.saturating_sub(session_bytes(id));
                plan.moving_sessions.push(e);
            }
        }
    }
    plan.over_size = (total > max).then(|| total - max);
    Ok(())
}

/// What [`trash_batch`] moved and kept.
pub(super) struct TrashOutcome {
    /// The batch directory (`<root>/trash/<time>[-n]`; not created when nothing moved or in a
    /// dry run).
    pub(super) batch: PathBuf,
    /// Runs moved (or, in a dry run, to move).
    pub(super) runs: usize,
    /// Their bytes.
    pub(super) bytes: u64,
    /// Sessions moved (or to move).
    pub(super) sessions: usize,
    /// Runs kept because a writer holds them.
    pub(super) kept_locked: usize,
    /// Sessions kept because another holder has them open.
    pub(super) kept_open: usize,
    /// Runs and sessions kept because they changed since they were read.
    pub(super) kept_changed: usize,
    /// Sessions whose move failed (kept).
    pub(super) failures: usize,
}

impl TrashOutcome {
    /// Exit 0, or a data error (4) when a session could not be moved.
    pub(super) fn result(&self) -> Result<i32, CliError> {
        if self.failures > 0 {
            return Err(CliError::Data(format!(
                "{} session(s) could not be moved to the trash (listed above); they were kept",
                self.failures
            )));
        }
        Ok(EXIT_OK)
    }
}

/// Moves `moving` runs and `moving_sessions` sessions into one new trash batch
/// (`<root>/trash/<time>[-n]/`, 0700): the manifest (`manifest.jsonl`, 0600) starts with
/// `header` (one JSON object: `op`, `created_at`, what selected the items) and gets one fsynced
/// line per item before it moves. A run is moved while its writer lock is held and only if it
/// is still the file that was read; a session is snapshotted under a housekeeping lease,
/// copied, and deleted only if still exactly what was snapshotted. One action line per item
/// (`move-run`, `move-session`); with `dry_run` nothing is written (`planned`). The run index
/// is refreshed after runs moved. Shared by `gc` and `delete`.
pub(super) fn trash_batch(
    ctx: &mut Ctx<'_>,
    store: &session_state::StateStore,
    moving: &[&RunFacts],
    moving_sessions: &[&session_state::ListEntry],
    header: &str,
    dry_run: bool,
    json: bool,
) -> Result<TrashOutcome, CliError> {
    let root = ctx.root.path.clone();
    let mut kept_locked = 0usize;
    trash_meta(&root.join(TRASH_DIR), "move runs into it")?;
    let stamp = trash_stamp(ctx.now);
    let mut batch = root.join(TRASH_DIR).join(&stamp);
    let mut n = 2;
    while batch.exists() {
        batch = root.join(TRASH_DIR).join(format!("{stamp}-{n}"));
        n += 1;
    }
    let manifest = batch.join(MANIFEST);
    let status = if dry_run {
        ActionStatus::Planned
    } else {
        ActionStatus::Done
    };
    if !dry_run && (!moving.is_empty() || !moving_sessions.is_empty()) {
        // The trash holds session history: 0700 directories, 0600 files, like the store.
        super::trash::create_private_dir(&batch)?;
        manifest_line(&manifest, header)?;
    }
    let mut moved_bytes = 0;
    let mut runs_moved = 0usize;
    let mut failures = 0usize;
    let (mut kept_open, mut kept_changed) = (0usize, 0usize);
    let mut moved_rels: Vec<String> = Vec::new();
    for r in moving {
        let from_rel = rel(&root, &r.path).into_owned();
        let to = batch.join(&from_rel);
        let action = |status, detail| Action {
            action: ActionKind::MoveRun,
            file: from_rel.clone(),
            id: Some(r.run_id.clone()),
            status,
            detail,
        };
        if !dry_run {
            // The run's lock is held from the check to the move: a writer reopening the run
            // meanwhile waits, then finds it gone (session-jsonl refuses a lock on a moved
            // file), instead of appending to the copy in the trash.
            let held = match super::trash::lock_run_for_move(&r.path, r.size)? {
                super::trash::RunLock::Held(f) => f,
                super::trash::RunLock::Locked(pid) => {
                    kept_locked += 1;
                    let detail = format!(
                        "a writer has the file open{}; kept",
                        pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
                    );
                    emit(ctx, json, &action(ActionStatus::Skipped, detail))?;
                    continue;
                }
                super::trash::RunLock::Changed(why) => {
                    kept_changed += 1;
                    emit(
                        ctx,
                        json,
                        &action(ActionStatus::Skipped, format!("{why}; kept")),
                    )?;
                    continue;
                }
            };
            ctx.hooks.pause("gc-run-locked");
            let mut o = JsonObj::new();
            o.str("op", "move_run");
            o.str("run_id", &r.run_id);
            o.opt_str("session_id", r.session_id.as_deref());
            o.opt_str("started_at", r.started_at.as_deref());
            o.opt_str("last_ts", r.last_ts.as_deref());
            o.bool("ended", r.ended);
            o.unum("bytes", r.size);
            o.str("from", &from_rel);
            o.str("to", &rel(&root, &to));
            manifest_line(&manifest, &o.finish())?;
            move_file(&r.path, &to)?;
            drop(held);
            moved_rels.push(from_rel.clone());
        }
        moved_bytes += r.size;
        runs_moved += 1;
        let last = r
            .last_ts
            .as_deref()
            .or(r.started_at.as_deref())
            .unwrap_or("?");
        emit(ctx, json, &action(status, format!("last activity {last}")))?;
    }
    remove_from_search(ctx, &root, &moved_rels);
    let mut sessions_moved = 0usize;
    // Saved messages indexed for search (sessions no run log holds) go with their session.
    let mut moved_messages: Vec<String> = Vec::new();
    for e in moving_sessions {
        let id = e.summary.session_id.clone();
        if !session_schema::is_safe_id(&id) {
            // A row whose id is not a safe file name (text that is not UTF-8, listed with
            // U+FFFD): it names no files to move or snapshot; `verify` reports it.
            let a = Action {
                action: ActionKind::MoveSession,
                file: "state.db".into(),
                id: Some(id.clone()),
                status: ActionStatus::Skipped,
                detail: "its session id in state.db is not a safe file name".into(),
            };
            emit(ctx, json, &a)?;
            continue;
        }
        let messages = store.messages_path(&id).map_err(state_err)?;
        let legacy = store.legacy_path(&id).map_err(state_err)?;
        // The file that names the session in the report: its legacy snapshot or messages log.
        let session_file = rel(
            &root,
            if e.source == EntrySource::Legacy {
                &legacy
            } else {
                &messages
            },
        )
        .into_owned();
        let action = |status, detail| Action {
            action: ActionKind::MoveSession,
            file: session_file.clone(),
            id: Some(id.clone()),
            status,
            detail,
        };
        let moved = if dry_run {
            match store.lease_holder(&id) {
                Ok(Some(holder)) => SessionMove::Open(holder.to_string()),
                _ => SessionMove::Moved,
            }
        } else {
            move_session(&ctx.hooks, store, &batch, &manifest, e)?
        };
        let (status, detail) = match moved {
            SessionMove::Moved => {
                sessions_moved += 1;
                if !dry_run {
                    moved_messages.push(session_state::saved_messages_key(&id));
                    moved_messages.push(session_state::legacy_snapshot_key(&id));
                }
                (status, format!("updated {}", e.summary.updated_at))
            }
            SessionMove::Gone => continue,
            SessionMove::Open(holder) => {
                kept_open += 1;
                (
                    ActionStatus::Skipped,
                    format!("the session is open ({holder}); kept"),
                )
            }
            SessionMove::Unloadable(why) => (ActionStatus::Skipped, format!("cannot load: {why}")),
            SessionMove::Changed => {
                kept_changed += 1;
                (
                    ActionStatus::Skipped,
                    "saved since it was snapshotted; kept (its copy in the trash was removed)"
                        .to_owned(),
                )
            }
            SessionMove::Failed(why) => {
                failures += 1;
                (ActionStatus::Failed, why)
            }
        };
        emit(ctx, json, &action(status, detail))?;
    }
    remove_from_search(ctx, &root, &moved_messages);
    if !dry_run
        && runs_moved == 0
        && sessions_moved == 0
        && (!moving.is_empty() || !moving_sessions.is_empty())
    {
        // Nothing went: no batch holding only its manifest.
        let _ = fs::remove_file(&manifest);
        let _ = fs::remove_dir(&batch);
        let _ = fs::remove_dir(root.join(TRASH_DIR));
    }
    if !dry_run && runs_moved > 0 {
        refresh_index(ctx, store)?;
    }
    Ok(TrashOutcome {
        batch,
        runs: runs_moved,
        bytes: moved_bytes,
        sessions: sessions_moved,
        kept_locked,
        kept_open,
        kept_changed,
        failures,
    })
}

/// What became of one session `gc` meant to move.
enum SessionMove {
    /// Copied into the trash and deleted from the store.
    Moved,
    /// It no longer exists.
    Gone,
    /// Another holder has it open (who); kept.
    Open(String),
    /// It cannot be loaded, so it cannot be snapshotted; kept.
    Unloadable(String),
    /// It was saved between the snapshot and the delete; kept, its trash copies removed.
    Changed,
    /// Writing its copies (or deleting it) failed; kept.
    Failed(String),
}

/// Moves one session to the trash: under a housekeeping lease (a runtime that has it open
/// keeps it), snapshot it, write the snapshot and its files into the batch (0600; removed
/// again when a write fails: no half copy stays), record it in the manifest, then delete it
/// only if it is still exactly what was snapshotted (compare-and-swap on the row and the
/// files): a save acknowledged in between keeps the session and removes the copies.
fn move_session(
    hooks: &crate::hooks::Hooks,
    store: &session_state::StateStore,
    batch: &Path,
    manifest: &Path,
    e: &session_state::ListEntry,
) -> Result<SessionMove, CliError> {
    let id = e.summary.session_id.as_str();
    let lease = match store.lease_for_housekeeping(id) {
        Ok(l) => l,
        Err(session_state::StateError::SessionBusy { holder, .. }) => {
            return Ok(SessionMove::Open(holder.to_string()));
        }
        Err(err) => return Ok(SessionMove::Failed(one_line(&err))),
    };
    let snap = match lease.snapshot() {
        Ok(Some(s)) => s,
        Ok(None) => return Ok(SessionMove::Gone),
        Err(err) => return Ok(SessionMove::Unloadable(one_line(&err))),
    };
    // A complete snapshot in the legacy format: moving `state/<id>.json` back under the root
    // restores the session (it is migrated on the next load).
    let mut state = serde_json::to_vec(&snap.loaded.state).map_err(|e| CliError::data(&e))?;
    state.push(b'\n');
    let mut copies: Vec<(PathBuf, &[u8])> =
        vec![(batch.join("state").join(format!("{id}.json")), &state[..])];
    if let Some(bytes) = &snap.messages_file {
        copies.push((batch.join("messages").join(format!("{id}.jsonl")), bytes));
    }
    if let Some(bytes) = &snap.legacy_file {
        copies.push((batch.join("state-legacy").join(format!("{id}.json")), bytes));
    }
    let mut written: Vec<PathBuf> = Vec::new();
    for (path, bytes) in &copies {
        if let Err(err) = super::trash::write_private_new(path, bytes, hooks, "gc-session-copy") {
            super::trash::remove_copies(&written);
            return Ok(SessionMove::Failed(one_line(&err)));
        }
        written.push(path.clone());
    }
    let root = store.root();
    let mut o = JsonObj::new();
    o.str("op", "move_session");
    o.str("session_id", id);
    o.str("updated_at", e.summary.updated_at.as_str());
    o.str("snapshot", &rel(root, &copies[0].0));
    o.str(
        "source",
        if e.source == EntrySource::Legacy {
            "legacy"
        } else {
            "db"
        },
    );
    if let Err(err) = manifest_line(manifest, &o.finish()) {
        super::trash::remove_copies(&written);
        return Ok(SessionMove::Failed(one_line(&err)));
    }
    hooks.pause("gc-session-copied");
    match lease.delete_snapshotted(&snap) {
        Ok(_) => Ok(SessionMove::Moved),
        Err(err) if err.is_conflict() => {
            super::trash::remove_copies(&written);
            let mut o = JsonObj::new();
            o.str("op", "keep_session");
            o.str("session_id", id);
            o.str("reason", "saved since it was snapshotted");
            let _ = manifest_line(manifest, &o.finish());
            Ok(SessionMove::Changed)
        }
        // The delete may have removed part of the session (the legacy file goes first): the
        // copies stay in the trash.
        Err(err) => Ok(SessionMove::Failed(one_line(&err))),
    }
}

// ---------------------------------------------------------------------------------------------
// archive

/// What archiving means for the reference runtime (docs/format.md, deviations): it reads only
/// `*.jsonl`, so archived runs vanish from its session history until restored.
fn reference_note(count: usize, dry_run: bool) -> String {
    format!(
        "the reference runtime reads only .jsonl files: {} archived run(s) {} missing from its \
         session history (resume, history) until `sessions unarchive` restores them; every \
         `sessions` command reads archives",
        count,
        if dry_run { "would be" } else { "are" }
    )
}

/// A note after the actions: `note: …` in text, `{"type":"note","message":…}` with `--json`.
pub(super) fn note(ctx: &mut Ctx<'_>, json: bool, message: &str) -> Result<(), CliError> {
    if json {
        let row = NoteRow {
            message: message.to_owned(),
        };
        write_row(ctx.out, &Row::Note(row))?;
    } else {
        let s = ctx.style;
        writeln!(ctx.out, "{} {message}", s.paint(Paint::Dim, "note:"))?;
    }
    Ok(())
}

pub(crate) fn archive(ctx: &mut Ctx<'_>, args: &ArchiveArgs) -> Result<i32, CliError> {
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
