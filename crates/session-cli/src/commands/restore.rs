//! `sessions restore`: a trash batch (of `gc` or `delete`), or one run or session of it,
//! back into the store. `restore` checks every item first and changes nothing when one would
//! overwrite something in the store (a run file of that id, a saved session of that id).

use std::fs;
use std::path::{Path, PathBuf};

use session_state::ListQuery;

use crate::Ctx;
use crate::cli::RestoreArgs;
use crate::error::{CliError, EXIT_OK, one_line};
use crate::json_rows::{ActionKind, ActionStatus, RestoreSummary, Row, SummaryRow, write_row};
use crate::jsonw::JsonObj;
use crate::support::housekeeping::{Action, MANIFEST, TRASH_DIR, count, emit, open_for};
use crate::support::open::{refresh_index, state_err};
use crate::support::paths::rel;

/// One item of a trash batch, from its manifest.
#[derive(Debug, Clone)]
enum Item {
    /// A run file: moved from `from` to `to` (both relative to the root).
    Run {
        run_id: String,
        session_id: Option<String>,
        from: String,
        to: String,
    },
    /// A session: its snapshot (`state/<id>.json` in the batch, relative to the root).
    Session {
        session_id: String,
        updated_at: String,
        snapshot: String,
    },
}

/// A batch's items still in the trash, in manifest order: `move_run` / `move_session` lines,
/// less sessions a `keep_session` line took back and items a `restore_*` line put back.
///
/// # Errors
/// I/O (4) when the manifest cannot be read; data (4) for a line that is not JSON.
fn batch_items(batch: &Path) -> Result<Vec<Item>, CliError> {
    let manifest = batch.join(MANIFEST);
    let bytes = crate::support::trash::trash_read(&manifest)?;
    let mut items: Vec<Item> = Vec::new();
    for (n, line) in bytes.split(|b| *b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let v: serde_json::Value = serde_json::from_slice(line)
            .map_err(|e| CliError::Data(format!("{} line {}: {e}", manifest.display(), n + 1)))?;
        let s = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_owned);
        match s("op").as_deref() {
            Some("move_run") => {
                if let (Some(run_id), Some(from), Some(to)) = (s("run_id"), s("from"), s("to")) {
                    items.push(Item::Run {
                        run_id,
                        session_id: s("session_id"),
                        from,
                        to,
                    });
                }
            }
            Some("move_session") => {
                if let (Some(session_id), Some(snapshot)) = (s("session_id"), s("snapshot")) {
                    items.push(Item::Session {
                        session_id,
                        updated_at: s("updated_at").unwrap_or_default(),
                        snapshot,
                    });
                }
            }
            Some("keep_session") | Some("restore_session") => {
                let id = s("session_id");
                items.retain(|i| !matches!(i, Item::Session { session_id, .. } if Some(session_id) == id.as_ref()));
            }
            Some("restore_run") => {
                let to = s("to");
                items.retain(|i| !matches!(i, Item::Run { to: t, .. } if Some(t) == to.as_ref()));
            }
            _ => {}
        }
    }
    Ok(items)
}

/// The batches under the trash folder, newest first (their names are UTC times).
fn batches(root: &Path) -> Result<Vec<PathBuf>, CliError> {
    let trash = root.join(TRASH_DIR);
    let entries = match fs::read_dir(&trash) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(CliError::io(&trash, e)),
    };
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .filter(|p| p.join(MANIFEST).is_file())
        .collect();
    // `20261201T100000Z-2` after `20261201T100000Z`: compare by (stamp, counter).
    out.sort_by_key(|p| {
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let (stamp, n) = match name.split_once('-') {
            Some((a, b)) => (a.to_owned(), b.parse::<u64>().unwrap_or(0)),
            None => (name.clone(), 0),
        };
        (stamp, n)
    });
    out.reverse();
    Ok(out)
}

/// `sessions restore BATCH|ID`: every item of a trash batch still in the trash, or the newest
/// trash copy of one run (that run) or session (the session and its runs of the same batch;
/// `@title` names a session by the title it had). With `--json`: an `action` row per item,
/// then the `summary` (`command: "restore"`).
pub(crate) fn run(ctx: &mut Ctx<'_>, args: &RestoreArgs) -> Result<i32, CliError> {
    if ctx.read_only && !args.dry_run {
        return Err(CliError::Usage(
            "--read-only: this command changes the store (use --dry-run to see the plan)".into(),
        ));
    }
    crate::support::open::check_root(ctx)?;
    let root = ctx.root.path.clone();
    let all = batches(&root)?;
    // A title outlives the session's stay in the trash: `@title` names it there too.
    let titled = crate::support::labels::resolve_id(ctx, &args.target)?;
    let target = titled.as_str();
    let (batch, items) = if let Some(b) = all
        .iter()
        .find(|b| b.file_name().is_some_and(|n| n == target))
    {
        (b.clone(), batch_items(b)?)
    } else {
        session_schema::check_id(target).map_err(|e| CliError::Usage(one_line(&e)))?;
        let mut found = None;
        for b in &all {
            let items = batch_items(b)?;
            let picked: Vec<Item> = items
                .iter()
                .filter(|i| match i {
                    Item::Run {
                        run_id, session_id, ..
                    } => run_id == target || session_id.as_deref() == Some(target),
                    Item::Session { session_id, .. } => session_id == target,
                })
                .cloned()
                .collect();
            if !picked.is_empty() {
                found = Some((b.clone(), picked));
                break;
            }
        }
        found.ok_or_else(|| {
            CliError::NotFound(format!(
                "no trash batch named {target} and no run or session {target} in the trash \
                 under {}",
                root.join(TRASH_DIR).display()
            ))
        })?
    };
    let store = open_for(ctx, args.dry_run)?;
    let listed = store.list(&ListQuery::all()).map_err(state_err)?;
    // Every item is checked before anything moves.
    let mut conflicts = Vec::new();
    let mut states: Vec<Option<session_schema::SessionState>> = Vec::new();
    for item in &items {
        match item {
            Item::Run {
                run_id, from, to, ..
            } => {
                states.push(None);
                let copy = root.join(to);
                if !fs::symlink_metadata(&copy).is_ok_and(|m| m.is_file()) {
                    conflicts.push(format!("run {run_id}: its copy {to} is not in the trash"));
                    continue;
                }
                let dest = root.join(from);
                if fs::symlink_metadata(&dest).is_ok() {
                    conflicts.push(format!(
                        "run {run_id}: {from} exists in the store; not overwriting it"
                    ));
                } else if let Ok(found) = session_jsonl::find_run(&root, run_id, None) {
                    conflicts.push(format!(
                        "run {run_id}: the store holds it already ({}); not restoring a second file",
                        rel(&root, &found.path)
                    ));
                }
            }
            Item::Session {
                session_id,
                updated_at,
                snapshot,
            } => {
                let path = root.join(snapshot);
                let bytes = crate::support::trash::trash_read(&path)?;
                let state: session_schema::SessionState = serde_json::from_slice(&bytes)
                    .map_err(|e| CliError::Data(format!("{}: {e}", path.display())))?;
                // A message log without a row (another writer's, a restored backup) would
                // refuse the save half way: it is a conflict like any other.
                let messages = store.messages_path(session_id).map_err(state_err)?;
                if fs::symlink_metadata(&messages).is_ok() {
                    conflicts.push(format!(
                        "session {session_id}: {} exists in the store; not overwriting it",
                        rel(&root, &messages)
                    ));
                }
                // The listing, not `load`: loading a legacy snapshot would migrate it, and a
                // refused restore changes nothing.
                if let Some(now) = listed
                    .entries
                    .iter()
                    .find(|e| e.summary.session_id == *session_id)
                {
                    let stored = now.summary.updated_at.as_str();
                    let newer = if stored > updated_at.as_str() {
                        "newer than"
                    } else {
                        "not newer than, but still"
                    };
                    conflicts.push(format!(
                        "session {session_id}: the store holds it (updated {stored}, {newer} the \
                         trash copy's {updated_at}); not overwriting it"
                    ));
                }
                states.push(Some(state));
            }
        }
    }
    if !conflicts.is_empty() {
        return Err(CliError::Data(format!(
            "nothing restored: {}",
            conflicts.join("; ")
        )));
    }
    let manifest = batch.join(MANIFEST);
    let status = if args.dry_run {
        ActionStatus::Planned
    } else {
        ActionStatus::Done
    };
    let (mut runs, mut sessions) = (0usize, 0usize);
    for (item, state) in items.iter().zip(states) {
        match item {
            Item::Run {
                run_id, from, to, ..
            } => {
                if !args.dry_run {
                    put_back(&root.join(to), &root.join(from))?;
                    let mut o = JsonObj::new();
                    o.str("op", "restore_run");
                    o.str("run_id", run_id);
                    o.str("to", to);
                    o.str(
                        "restored_at",
                        session_schema::Timestamp::from_datetime(ctx.now).as_str(),
                    );
                    crate::support::housekeeping::manifest_line(&manifest, &o.finish())?;
                }
                runs += 1;
                let a = Action {
                    action: ActionKind::RestoreRun,
                    file: from.clone(),
                    id: Some(run_id.clone()),
                    status,
                    detail: format!("from {to}"),
                };
                emit(ctx, args.json, &a)?;
            }
            Item::Session {
                session_id,
                snapshot,
                ..
            } => {
                if let (false, Some(state)) = (args.dry_run, &state) {
                    // `None`: only if the session still does not exist (compare-and-swap).
                    store.save_expecting(state, None).map_err(state_err)?;
                    let dir = root.join(snapshot);
                    let batch_dir = dir.parent().and_then(Path::parent).unwrap_or(&batch);
                    let copies = [
                        dir.clone(),
                        batch_dir
                            .join("messages")
                            .join(format!("{session_id}.jsonl")),
                        batch_dir
                            .join("state-legacy")
                            .join(format!("{session_id}.json")),
                    ];
                    crate::support::trash::remove_copies(&copies);
                    let mut o = JsonObj::new();
                    o.str("op", "restore_session");
                    o.str("session_id", session_id);
                    o.str(
                        "restored_at",
                        session_schema::Timestamp::from_datetime(ctx.now).as_str(),
                    );
                    crate::support::housekeeping::manifest_line(&manifest, &o.finish())?;
                }
                sessions += 1;
                let n = state.as_ref().map_or(0, |s| s.messages.len());
                let a = Action {
                    action: ActionKind::RestoreSession,
                    file: format!("messages/{session_id}.jsonl"),
                    id: Some(session_id.clone()),
                    status,
                    detail: format!("{n} message(s) from {snapshot}"),
                };
                emit(ctx, args.json, &a)?;
            }
        }
    }
    let mut batch_removed = false;
    if !args.dry_run {
        if runs > 0 {
            refresh_index(ctx, &store)?;
        }
        // A batch with nothing left in it but its manifest goes.
        if batch_items(&batch)?.is_empty() {
            let _ = fs::remove_file(&manifest);
            remove_empty_dirs(&batch);
            let _ = fs::remove_dir(root.join(TRASH_DIR));
            batch_removed = !batch.exists();
        }
    }
    if args.json {
        let summary = RestoreSummary {
            batch: batch
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            dry_run: args.dry_run,
            runs: count(runs),
            sessions: count(sessions),
            batch_removed,
        };
        write_row(ctx.out, &Row::Summary(SummaryRow::Restore(summary)))?;
    } else {
        let verb = if args.dry_run {
            "would restore"
        } else {
            "restored"
        };
        writeln!(
            ctx.out,
            "{verb} {runs} run(s) and {sessions} session(s) from {}",
            rel(&root, &batch)
        )?;
    }
    Ok(EXIT_OK)
}

/// Moves the trash copy `from` back to `to` without ever replacing a file there: a hard link
/// (refused by the kernel when `to` exists), then the copy's name is removed; both directories
/// are fsynced.
fn put_back(from: &Path, to: &Path) -> Result<(), CliError> {
    if let Some(parent) = to.parent() {
        crate::support::trash::create_private_dir(parent)?;
    }
    fs::hard_link(from, to).map_err(|e| CliError::io(to, e))?;
    fs::remove_file(from).map_err(|e| CliError::io(from, e))?;
    for dir in [to.parent(), from.parent()].into_iter().flatten() {
        if let Ok(d) = fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    if let Some(parent) = from.parent() {
        remove_empty_dirs(parent);
    }
    Ok(())
}

/// Removes `dir` and the directories under it when they hold no file (best effort).
fn remove_empty_dirs(dir: &Path) {
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_empty_dirs(&e.path());
            }
        }
    }
    let _ = fs::remove_dir(dir);
}
