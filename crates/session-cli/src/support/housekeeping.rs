//! What the commands that change the store share (`repair`, `gc`, `archive`, `unarchive`,
//! `delete`, `restore`): the action lines they report, the facts of a run file, moving runs
//! and sessions into a trash batch with its manifest, and the store opened for a change.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use session_jsonl::RunEndState;
use session_state::EntrySource;
use time::OffsetDateTime;

use crate::Ctx;
use crate::error::{CliError, EXIT_OK, one_line};
use crate::json_rows::{ActionKind, ActionRow, ActionStatus, NoteRow, Row, write_row};
use crate::jsonw::JsonObj;
use crate::progress::Progress;
use crate::style::Paint;
use crate::support::lib_errors::jsonl_err;
use crate::support::open::{open_store, open_store_read_only, refresh_index, state_err};
use crate::support::paths::rel;

/// Name of the trash folder under the root (never a date directory, so no reader sees it).
pub(crate) const TRASH_DIR: &str = "trash";

/// The record of what one `gc` moved, one JSON object per line, written before each move.
pub(crate) const MANIFEST: &str = "manifest.jsonl";

/// One line of output of a housekeeping command.
pub(crate) struct Action {
    pub(crate) action: ActionKind,
    pub(crate) file: String,
    pub(crate) id: Option<String>,
    pub(crate) status: ActionStatus,
    pub(crate) detail: String,
}

pub(crate) fn emit(ctx: &mut Ctx<'_>, json: bool, a: &Action) -> Result<(), CliError> {
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
pub(crate) fn open_for(
    ctx: &mut Ctx<'_>,
    dry_run: bool,
) -> Result<session_state::StateStore, CliError> {
    if dry_run {
        open_store_read_only(ctx)
    } else {
        open_store(ctx)
    }
}

/// A run file as `gc`/`archive`/`delete` see it.
pub(crate) struct RunFacts {
    pub(crate) path: PathBuf,
    pub(crate) run_id: String,
    pub(crate) session_id: Option<String>,
    pub(crate) started_at: Option<String>,
    pub(crate) last_ts: Option<String>,
    /// Latest of `started_at` and the last record's `ts`; `None` when neither parses.
    pub(crate) activity: Option<OffsetDateTime>,
    pub(crate) ended: bool,
    pub(crate) locked: bool,
    pub(crate) compressed: bool,
    pub(crate) size: u64,
}

pub(crate) fn parse_ts(s: Option<&str>) -> Option<OffsetDateTime> {
    s.and_then(|t| session_schema::Timestamp::from_raw(t).parse())
}

pub(crate) fn scan_runs(ctx: &Ctx<'_>) -> Result<Vec<RunFacts>, CliError> {
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
pub(crate) fn run_facts(
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

pub(crate) fn trash_stamp(now: OffsetDateTime) -> String {
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
pub(crate) fn manifest_line(path: &Path, line: &str) -> Result<(), CliError> {
    let mut f =
        crate::support::trash::open_private_append(path).map_err(|e| CliError::io(path, e))?;
    f.write_all(line.as_bytes())
        .and_then(|()| f.write_all(b"\n"))
        .and_then(|()| f.sync_data())
        .map_err(|e| CliError::io(path, e))
}

pub(crate) fn fsync_dir(dir: &Path) {
    // Best effort: the rename itself is what matters; a failed directory fsync only weakens
    // durability across a power loss.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

pub(crate) fn move_file(from: &Path, to: &Path) -> Result<(), CliError> {
    if let Some(parent) = to.parent() {
        crate::support::trash::create_private_dir(parent)?;
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
pub(crate) fn remove_from_search(ctx: &mut Ctx<'_>, root: &Path, moved: &[String]) {
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

/// What [`trash_batch`] moved and kept.
pub(crate) struct TrashOutcome {
    /// The batch directory (`<root>/trash/<time>[-n]`; not created when nothing moved or in a
    /// dry run).
    pub(crate) batch: PathBuf,
    /// Runs moved (or, in a dry run, to move).
    pub(crate) runs: usize,
    /// Their bytes.
    pub(crate) bytes: u64,
    /// Sessions moved (or to move).
    pub(crate) sessions: usize,
    /// Runs kept because a writer holds them.
    pub(crate) kept_locked: usize,
    /// Sessions kept because another holder has them open.
    pub(crate) kept_open: usize,
    /// Runs and sessions kept because they changed since they were read.
    pub(crate) kept_changed: usize,
    /// Sessions whose move failed (kept).
    pub(crate) failures: usize,
}

impl TrashOutcome {
    /// Exit 0, or a data error (4) when a session could not be moved.
    pub(crate) fn result(&self) -> Result<i32, CliError> {
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
pub(crate) fn trash_batch(
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
        crate::support::trash::create_private_dir(&batch)?;
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
            let held = match crate::support::trash::lock_run_for_move(&r.path, r.size)? {
                crate::support::trash::RunLock::Held(f) => f,
                crate::support::trash::RunLock::Locked(pid) => {
                    kept_locked += 1;
                    let detail = format!(
                        "a writer has the file open{}; kept",
                        pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
                    );
                    emit(ctx, json, &action(ActionStatus::Skipped, detail))?;
                    continue;
                }
                crate::support::trash::RunLock::Changed(why) => {
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
pub(crate) enum SessionMove {
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
pub(crate) fn move_session(
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
        if let Err(err) =
            crate::support::trash::write_private_new(path, bytes, hooks, "gc-session-copy")
        {
            crate::support::trash::remove_copies(&written);
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
        crate::support::trash::remove_copies(&written);
        return Ok(SessionMove::Failed(one_line(&err)));
    }
    hooks.pause("gc-session-copied");
    match lease.delete_snapshotted(&snap) {
        Ok(_) => Ok(SessionMove::Moved),
        Err(err) if err.is_conflict() => {
            crate::support::trash::remove_copies(&written);
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

/// What archiving means for the reference runtime (docs/format.md, deviations): it reads only
/// `*.jsonl`, so archived runs vanish from its session history until restored.
pub(crate) fn reference_note(count: usize, dry_run: bool) -> String {
    format!(
        "the reference runtime reads only .jsonl files: {} archived run(s) {} missing from its \
         session history (resume, history) until `sessions unarchive` restores them; every \
         `sessions` command reads archives",
        count,
        if dry_run { "would be" } else { "are" }
    )
}

/// A note after the actions: `note: …` in text, `{"type":"note","message":…}` with `--json`.
pub(crate) fn note(ctx: &mut Ctx<'_>, json: bool, message: &str) -> Result<(), CliError> {
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

/// A count of items as a JSON number (`usize` is never wider than 64 bits on the targets
/// this builds for; saturates otherwise).
pub(crate) fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// What is at the trash folder's path: `None` when nothing is. Anything there but a real
/// directory is refused: a link named `trash` points somewhere gc never wrote, so emptying it
/// would delete files outside the store, and moving runs into it would carry them out of it.
///
/// # Errors
/// Data (4) naming the path and `doing`; I/O (4) when it cannot be examined.
pub(crate) fn trash_meta(trash: &Path, doing: &str) -> Result<Option<fs::Metadata>, CliError> {
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
