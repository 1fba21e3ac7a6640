//! Commands that change the store: `repair`, `gc` (retention into a trash folder) and
//! `archive` (zstd compression of old run files).

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use session_jsonl::{JsonlError, RunEndState};
use session_state::{EntrySource, ListQuery, MigrationOutcome};
use time::OffsetDateTime;

use super::state::{open_store, open_store_read_only, refresh_index, state_err};
use crate::Ctx;
use crate::cli::{ArchiveArgs, GcArgs, RepairArgs};
use crate::error::{CliError, EXIT_OK, one_line};
use crate::jsonw::JsonObj;
use crate::progress::Progress;
use crate::store::{jsonl_err, rel};
use crate::style::{Paint, bytes as fmt_bytes};
use crate::timefmt::{before, parse_age};

/// Name of the trash folder under the root (never a date directory, so no reader sees it).
pub(crate) const TRASH_DIR: &str = "trash";
/// The record of what one `gc` moved, one JSON object per line, written before each move.
pub(crate) const MANIFEST: &str = "manifest.jsonl";

/// One line of output of a housekeeping command.
struct Action<'a> {
    action: &'a str,
    file: String,
    id: Option<String>,
    status: &'a str,
    detail: String,
}

fn emit(ctx: &mut Ctx<'_>, json: bool, a: &Action<'_>) -> Result<(), CliError> {
    if json {
        let mut o = JsonObj::new();
        o.str("action", a.action);
        o.str("file", &a.file);
        o.opt_str("id", a.id.as_deref());
        o.str("status", a.status);
        o.str("detail", &a.detail);
        writeln!(ctx.out, "{}", o.finish())?;
    } else {
        let s = ctx.style;
        let status = match a.status {
            "done" => s.paint(Paint::Green, a.status),
            "planned" => s.paint(Paint::Yellow, a.status),
            "failed" => s.paint(Paint::Red, a.status),
            other => s.paint(Paint::Dim, other),
        };
        let detail = if a.detail.is_empty() {
            String::new()
        } else {
            format!(" ({})", a.detail)
        };
        writeln!(ctx.out, "{status:<8} {} {}{detail}", a.action, a.file)?;
    }
    Ok(())
}

/// The store for a housekeeping command: read-only for a dry run (which must not change a
/// byte of the store, not even `state.db`'s bookkeeping), writable otherwise.
fn open_for(ctx: &mut Ctx<'_>, dry_run: bool) -> Result<session_state::StateStore, CliError> {
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
    let planned_or_done = if args.dry_run { "planned" } else { "done" };
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
                action: "seal-torn-tail",
                file: ".".into(),
                id: None,
                status: "failed",
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
                    action: "seal-torn-tail",
                    file: rel(&root, &f.path).into_owned(),
                    id: Some(f.run_id.clone()),
                    status: "failed",
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
            ("skipped", "a writer has the file open".to_owned())
        } else if let Some(why) = recent {
            (
                "skipped",
                format!(
                    "{why}, so a runtime that takes no lock, like the reference, may still be \
                     writing it; `sessions repair --force` seals it anyway"
                ),
            )
        } else if args.dry_run {
            (
                "planned",
                format!("would append a newline at byte offset {len}"),
            )
        } else {
            match session_jsonl::seal_torn_tail(&f.path) {
                Ok(true) => {
                    changes += 1;
                    ("done", format!("appended a newline at byte offset {len}"))
                }
                Ok(false) => ("skipped", "already sealed".to_owned()),
                Err(JsonlError::Locked { .. }) => {
                    ("skipped", "a writer has the file open".to_owned())
                }
                Err(e) => {
                    failures += 1;
                    ("failed", one_line(&e))
                }
            }
        };
        let a = Action {
            action: "seal-torn-tail",
            file: rel(&root, &f.path).into_owned(),
            id: Some(f.run_id.clone()),
            status,
            detail,
        };
        emit(ctx, args.json, &a)?;
    }
    bar.finish();
    // 2. Legacy snapshots without a row: migrate them (the files stay in place). The legacy
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
                let (status, detail) = match &e.outcome {
                    MigrationOutcome::WouldMigrate(s) => (
                        "planned",
                        format!("would migrate {} message(s)", s.message_count.unwrap_or(0)),
                    ),
                    MigrationOutcome::Migrated(s) => {
                        changes += 1;
                        (
                            "done",
                            format!(
                                "migrated {} message(s); the legacy file stays",
                                s.message_count.unwrap_or(0)
                            ),
                        )
                    }
                    MigrationOutcome::AlreadyIndexed => continue,
                    MigrationOutcome::Invalid { detail } => {
                        failures += 1;
                        ("failed", detail.clone())
                    }
                    MigrationOutcome::UnsafeName => {
                        ("skipped", "file name is not a safe session id".to_owned())
                    }
                    _ => ("skipped", String::new()),
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
                    action: "migrate-legacy",
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
    // Message logs without a state.db row: repair does not make rows up; loading such a
    // session is what rebuilds its row (session-state), so each is listed with what to do.
    if let Ok(page) = store.list(&ListQuery::all()) {
        let db_ids: BTreeSet<String> = page
            .entries
            .into_iter()
            .map(|e| e.summary.session_id)
            .collect();
        for (id, path) in super::state::orphan_messages(&root, &db_ids) {
            let a = Action {
                action: "orphan-messages",
                file: rel(&root, &path).into_owned(),
                id: Some(id),
                status: "skipped",
                detail: "message log without a state.db row; repair does not invent the row \
                         (the file is kept as it is)"
                    .into(),
            };
            emit(ctx, args.json, &a)?;
        }
    }
    // 3. The run index, rebuilt from the files.
    if args.dry_run {
        let n = listing.files.len();
        let a = Action {
            action: "rebuild-index",
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
                    action: "rebuild-index",
                    file: "state.db".into(),
                    id: None,
                    status: "done",
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
                    action: "rebuild-index",
                    file: "state.db".into(),
                    id: None,
                    status: "failed",
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
                action: "migrate-legacy",
                file: "state".into(),
                id: None,
                status: "failed",
                detail: format!("{batch_error}; listing the sessions: {}", one_line(&e)),
            };
            emit(ctx, args.json, &a)?;
            return Ok((0, 1));
        }
    };
    for d in &page.diagnostics {
        failures += 1;
        let a = Action {
            action: "migrate-legacy",
            file: rel(&root, &d.path).into_owned(),
            id: None,
            status: "failed",
            detail: d.detail.clone(),
        };
        emit(ctx, args.json, &a)?;
    }
    if page.diagnostics.is_empty() {
        // The listing saw nothing wrong: name the batch's own error once.
        failures += 1;
        let a = Action {
            action: "migrate-legacy",
            file: "state".into(),
            id: None,
            status: "failed",
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
                "done",
                format!(
                    "migrated {} message(s); the legacy file stays",
                    e.summary.message_count.unwrap_or(0)
                ),
            )
        } else if args.dry_run {
            (
                "planned",
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
                        "done",
                        format!(
                            "migrated {} message(s); the legacy file stays",
                            l.state.messages.len()
                        ),
                    )
                }
                Ok(None) => ("skipped", "the snapshot is gone".to_owned()),
                Err(err) => {
                    failures += 1;
                    ("failed", one_line(&err))
                }
            }
        };
        let a = Action {
            action: "migrate-legacy",
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

/// A run file as `gc`/`archive` see it.
struct RunFacts {
    path: PathBuf,
    run_id: String,
    session_id: Option<String>,
    started_at: Option<String>,
    last_ts: Option<String>,
    /// Latest of `started_at` and the last record's `ts`; `None` when neither parses.
    activity: Option<OffsetDateTime>,
    ended: bool,
    locked: bool,
    compressed: bool,
    size: u64,
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
        let head = session_jsonl::read_header(&f.path).map_err(jsonl_err)?;
        let tail = session_jsonl::terminal_state(&f.path).map_err(jsonl_err)?;
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
        out.push(RunFacts {
            locked: !f.compressed && session_jsonl::is_locked(&f.path).unwrap_or(true),
            size: fs::metadata(&f.path).map(|m| m.len()).unwrap_or(0),
            ended: !matches!(tail.end, RunEndState::Open),
            run_id: head.facts.run_id.clone().unwrap_or(f.run_id),
            session_id: head.facts.session_id.clone(),
            compressed: f.compressed,
            path: f.path,
            started_at,
            last_ts,
            activity,
        });
    }
    bar.finish();
    Ok(out)
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
fn manifest_line(path: &Path, line: &str) -> Result<(), CliError> {
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| CliError::io(path, e))?;
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
        fs::create_dir_all(parent).map_err(|e| CliError::io(parent, e))?;
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

/// Files (anything that is not a directory: regular files, symbolic links, sockets) and bytes
/// under `path`, without following symbolic links: a link counts as one file of its own size,
/// never as what it points to.
fn tree_size(path: &Path) -> (u64, u64) {
    let (mut files, mut bytes) = (0, 0);
    let mut stack = vec![path.to_owned()];
    while let Some(p) = stack.pop() {
        let Ok(meta) = fs::symlink_metadata(&p) else {
            continue;
        };
        if meta.is_dir() {
            if let Ok(rd) = fs::read_dir(&p) {
                stack.extend(rd.flatten().map(|e| e.path()));
            }
        } else {
            files += 1;
            bytes += meta.len();
        }
    }
    (files, bytes)
}

/// Deletes `path` and everything under it without following symbolic links: a link is
/// removed itself, whatever it points to.
fn remove_tree(path: &Path) -> Result<(), CliError> {
    let meta = fs::symlink_metadata(path).map_err(|e| CliError::io(path, e))?;
    if !meta.is_dir() {
        return fs::remove_file(path).map_err(|e| CliError::io(path, e));
    }
    let entries: Vec<PathBuf> = fs::read_dir(path)
        .map_err(|e| CliError::io(path, e))?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(|e| CliError::io(path, e))?;
    for e in &entries {
        remove_tree(e)?;
    }
    fs::remove_dir(path).map_err(|e| CliError::io(path, e))
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
            writeln!(
                ctx.out,
                "{}",
                JsonObj::new()
                    .str("action", "empty-trash")
                    .str("status", "skipped")
                    .str("detail", "no trash folder")
                    .finish()
            )?;
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
    for b in &batches {
        let (files, bytes) = tree_size(b);
        total_files += files;
        total_bytes += bytes;
        let status = if args.dry_run { "planned" } else { "done" };
        if !args.dry_run {
            remove_tree(b)?;
        }
        let a = Action {
            action: "delete",
            file: rel(&ctx.root.path, b).into_owned(),
            id: None,
            status,
            detail: format!("{files} file(s), {}", fmt_bytes(bytes)),
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
        writeln!(
            ctx.out,
            "{verb} {total_files} file(s), {} from the trash",
            fmt_bytes(total_bytes)
        )?;
    }
    Ok(EXIT_OK)
}

pub(crate) fn gc(ctx: &mut Ctx<'_>, args: &GcArgs) -> Result<i32, CliError> {
    if args.empty_trash {
        return empty_trash(ctx, args);
    }
    let older_than = args.older_than.as_deref().unwrap_or_default();
    let cutoff = before(ctx.now, parse_age(older_than)?, older_than)?;
    let store = open_for(ctx, args.dry_run)?;
    let root = ctx.root.path.clone();
    let runs = scan_runs(ctx)?;
    let sessions = store.list(&ListQuery::all()).map_err(state_err)?;
    // Sessions saved within the window keep all their runs.
    let mut session_updated: BTreeMap<String, Option<OffsetDateTime>> = BTreeMap::new();
    for e in &sessions.entries {
        session_updated.insert(e.summary.session_id.clone(), e.summary.updated_at.parse());
    }
    let active = |sid: &Option<String>| -> bool {
        sid.as_ref()
            .and_then(|s| session_updated.get(s))
            .is_some_and(|u| u.is_none_or(|t| t >= cutoff))
    };
    let mut moving: Vec<&RunFacts> = Vec::new();
    let mut kept_sessions: BTreeSet<String> = BTreeSet::new();
    let (mut kept_locked, mut kept_active, mut kept_undated) = (0, 0, 0);
    for r in &runs {
        let old = r.activity.is_some_and(|a| a < cutoff);
        if old && r.locked {
            kept_locked += 1;
        } else if old && active(&r.session_id) {
            kept_active += 1;
        } else if r.activity.is_none() {
            kept_undated += 1;
        } else if old {
            moving.push(r);
            continue;
        }
        if let Some(s) = &r.session_id {
            kept_sessions.insert(s.clone());
        }
    }
    // Sessions untouched since the cutoff whose runs all go (or that have none).
    let moving_sessions: Vec<_> = sessions
        .entries
        .iter()
        .filter(|e| {
            e.summary.updated_at.parse().is_some_and(|t| t < cutoff)
                && !kept_sessions.contains(&e.summary.session_id)
        })
        .collect();
    trash_meta(&root.join(TRASH_DIR), "move runs into it")?;
    let stamp = trash_stamp(ctx.now);
    let mut batch = root.join(TRASH_DIR).join(&stamp);
    let mut n = 2;
    while batch.exists() {
        batch = root.join(TRASH_DIR).join(format!("{stamp}-{n}"));
        n += 1;
    }
    let manifest = batch.join(MANIFEST);
    let status = if args.dry_run { "planned" } else { "done" };
    if !args.dry_run && (!moving.is_empty() || !moving_sessions.is_empty()) {
        fs::create_dir_all(&batch).map_err(|e| CliError::io(&batch, e))?;
        let mut o = JsonObj::new();
        o.str("op", "gc");
        o.str(
            "created_at",
            session_schema::Timestamp::from_datetime(ctx.now).as_str(),
        );
        o.str("older_than", args.older_than.as_deref().unwrap_or_default());
        o.str(
            "cutoff",
            session_schema::Timestamp::from_datetime(cutoff).as_str(),
        );
        o.str("root", &root.to_string_lossy());
        manifest_line(&manifest, &o.finish())?;
    }
    let mut moved_bytes = 0;
    for r in &moving {
        let from_rel = rel(&root, &r.path).into_owned();
        let to = batch.join(&from_rel);
        if !args.dry_run {
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
        }
        moved_bytes += r.size;
        let last = r
            .last_ts
            .as_deref()
            .or(r.started_at.as_deref())
            .unwrap_or("?");
        let a = Action {
            action: "move-run",
            file: from_rel,
            id: Some(r.run_id.clone()),
            status,
            detail: format!("last activity {last}"),
        };
        emit(ctx, args.json, &a)?;
    }
    let mut sessions_moved = 0usize;
    for e in &moving_sessions {
        let id = e.summary.session_id.clone();
        if !session_schema::is_safe_id(&id) {
            // A row whose id is not a safe file name (text that is not UTF-8, listed with
            // U+FFFD): it names no files to move or snapshot; `verify` reports it.
            let a = Action {
                action: "move-session",
                file: "state.db".into(),
                id: Some(id.clone()),
                status: "skipped",
                detail: "its session id in state.db is not a safe file name".into(),
            };
            emit(ctx, args.json, &a)?;
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
        if !args.dry_run {
            // Keep a complete snapshot in the legacy format: moving `state/<id>.json` back
            // under the root restores the session (it is migrated on the next load).
            let snapshot = batch.join("state").join(format!("{id}.json"));
            let state = match store.load(&id) {
                Ok(Some(l)) => serde_json::to_string(&l.state).map_err(|e| CliError::data(&e))?,
                Ok(None) => continue,
                Err(err) => {
                    // A session that cannot be loaded cannot be snapshotted: keep it.
                    let a = Action {
                        action: "move-session",
                        file: session_file.clone(),
                        id: Some(id.clone()),
                        status: "skipped",
                        detail: format!("cannot load: {}", one_line(&err)),
                    };
                    emit(ctx, args.json, &a)?;
                    continue;
                }
            };
            let mut o = JsonObj::new();
            o.str("op", "move_session");
            o.str("session_id", &id);
            o.str("updated_at", e.summary.updated_at.as_str());
            o.str("snapshot", &rel(&root, &snapshot));
            o.str(
                "source",
                if e.source == EntrySource::Legacy {
                    "legacy"
                } else {
                    "db"
                },
            );
            manifest_line(&manifest, &o.finish())?;
            if let Some(p) = snapshot.parent() {
                fs::create_dir_all(p).map_err(|e| CliError::io(p, e))?;
            }
            let mut f = File::create(&snapshot).map_err(|e| CliError::io(&snapshot, e))?;
            f.write_all(state.as_bytes())
                .and_then(|()| f.write_all(b"\n"))
                .and_then(|()| f.sync_all())
                .map_err(|e| CliError::io(&snapshot, e))?;
            for (src, sub) in [(&messages, "messages"), (&legacy, "state-legacy")] {
                if src.is_file() {
                    let to = batch.join(sub).join(src.file_name().unwrap_or_default());
                    fs::create_dir_all(batch.join(sub))
                        .map_err(|e| CliError::io(batch.join(sub), e))?;
                    fs::copy(src, &to).map_err(|e| CliError::io(src, e))?;
                }
            }
            store.delete(&id).map_err(state_err)?;
        }
        sessions_moved += 1;
        let a = Action {
            action: "move-session",
            file: session_file,
            id: Some(id),
            status,
            detail: format!("updated {}", e.summary.updated_at),
        };
        emit(ctx, args.json, &a)?;
    }
    if !args.dry_run && !moving.is_empty() {
        refresh_index(ctx, &store)?;
    }
    if !args.json {
        let verb = if args.dry_run { "would move" } else { "moved" };
        let whereto = if moving.is_empty() && moving_sessions.is_empty() {
            String::new()
        } else {
            format!(" to {}", rel(&root, &batch))
        };
        writeln!(
            ctx.out,
            "{verb} {} run(s) ({}) and {} session(s){whereto}; kept {kept_locked} locked, {kept_active} of sessions saved within {}, {kept_undated} undated",
            moving.len(),
            fmt_bytes(moved_bytes),
            sessions_moved,
            args.older_than.as_deref().unwrap_or_default()
        )?;
    }
    Ok(EXIT_OK)
}

// ---------------------------------------------------------------------------------------------
// archive

pub(crate) fn archive(ctx: &mut Ctx<'_>, args: &ArchiveArgs) -> Result<i32, CliError> {
    let cutoff = before(ctx.now, parse_age(&args.older_than)?, &args.older_than)?;
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
                action: "archive",
                file,
                id: Some(r.run_id.clone()),
                status: "skipped",
                detail: "a writer has the file open".into(),
            };
            emit(ctx, args.json, &a)?;
            continue;
        }
        if args.dry_run {
            before += r.size;
            count += 1;
            let a = Action {
                action: "archive",
                file,
                id: Some(r.run_id.clone()),
                status: "planned",
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
                    action: "archive",
                    file,
                    id: Some(r.run_id.clone()),
                    status: "done",
                    detail: format!("{} → {}", fmt_bytes(r.size), fmt_bytes(size)),
                };
                emit(ctx, args.json, &a)?;
            }
            Err(e) => {
                failed += 1;
                let a = Action {
                    action: "archive",
                    file,
                    id: Some(r.run_id.clone()),
                    status: "failed",
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
    if failed > 0 {
        return Err(CliError::Data(format!(
            "{failed} run file(s) could not be archived (listed above)"
        )));
    }
    Ok(EXIT_OK)
}
