//! `sessions delete`: runs and sessions into the trash, the way `gc` moves them.
//!
//! Nothing here deletes: `delete` builds one trash batch through `gc`'s machinery
//! ([`crate::support::housekeeping::trash_batch`]: manifest line first, runs moved under their
//! lock, sessions snapshotted and deleted by compare-and-swap); `gc --empty-trash` stays the
//! only real delete (`sessions restore` puts a batch back).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use session_state::ListQuery;

use crate::Ctx;
use crate::cli::DeleteArgs;
use crate::error::CliError;
use crate::json_rows::{ActionKind, ActionStatus, DeleteSummary, Row, SummaryRow, write_row};
use crate::jsonw::JsonObj;
use crate::style::bytes as fmt_bytes;
use crate::support::housekeeping::{
    Action, RunFacts, count, emit, open_for, run_facts, trash_batch,
};
use crate::support::open::state_err;
use crate::support::paths::rel;

/// `sessions delete ID…`: each id names a run (that run) or a session (the session and every
/// run of it); all go into one trash batch. An id that names nothing is not found (3) and
/// nothing moves; a pinned session (or a run of one) is refused (2) until unpinned. With
/// `--json`: an `action` row per item, then the `summary` (`command: "delete"`, naming the
/// batch).
pub(crate) fn run(ctx: &mut Ctx<'_>, args: &DeleteArgs) -> Result<i32, CliError> {
    if ctx.read_only && !args.dry_run {
        return Err(CliError::Usage(
            "--read-only: this command changes the store (use --dry-run to see the plan)".into(),
        ));
    }
    let store = open_for(ctx, args.dry_run)?;
    let listing = store.list(&ListQuery::all()).map_err(state_err)?;
    let pins = crate::support::labels::pinned_sessions(&store)?;
    let mut runs: Vec<RunFacts> = Vec::new();
    let mut sessions: Vec<&session_state::ListEntry> = Vec::new();
    let mut seen_paths: BTreeSet<PathBuf> = BTreeSet::new();
    let mut seen_sessions: BTreeSet<String> = BTreeSet::new();
    for raw in &args.ids {
        // `@title`, `-` and unique prefixes as every command takes them.
        let id = crate::support::ids::id_arg(ctx, raw, crate::support::ids::Want::Either)?;
        if let Some(path) = crate::support::store::try_locate_run(ctx, &id)? {
            let compressed = is_archive(&path);
            let facts = run_facts(path, id.clone(), compressed)?;
            if let Some(s) = facts.session_id.as_deref().filter(|s| pins.contains(*s)) {
                return Err(pinned(&id, s));
            }
            if seen_paths.insert(facts.path.clone()) {
                runs.push(facts);
            }
            continue;
        }
        let entry = listing.entries.iter().find(|e| e.summary.session_id == id);
        let paths = crate::support::store::session_runs(ctx, &store, &id)?;
        if entry.is_none() && paths.is_empty() {
            return Err(CliError::NotFound(format!(
                "no run or session {id} under {}",
                ctx.root.path.display()
            )));
        }
        if pins.contains(&id) {
            return Err(pinned(&id, &id));
        }
        for path in paths {
            if seen_paths.insert(path.clone()) {
                let compressed = is_archive(&path);
                let run_id = crate::support::paths::run_id_of_path(&path).unwrap_or_default();
                runs.push(run_facts(path, run_id, compressed)?);
            }
        }
        if let Some(e) = entry
            && seen_sessions.insert(id.clone())
        {
            sessions.push(e);
        }
    }
    let mut header = JsonObj::new();
    header.str("op", "delete");
    header.str(
        "created_at",
        session_schema::Timestamp::from_datetime(ctx.now).as_str(),
    );
    header.ser("ids", &args.ids);
    header.str("root", &ctx.root.path.to_string_lossy());
    // A session one of whose runs a writer holds is being used: it stays (its other runs go,
    // as named).
    let mut kept_sessions = 0usize;
    let busy: BTreeSet<&str> = runs
        .iter()
        .filter(|r| r.locked)
        .filter_map(|r| r.session_id.as_deref())
        .collect();
    for e in sessions
        .iter()
        .filter(|e| busy.contains(e.summary.session_id.as_str()))
    {
        kept_sessions += 1;
        let a = Action {
            action: ActionKind::MoveSession,
            file: "state.db".into(),
            id: Some(e.summary.session_id.clone()),
            status: ActionStatus::Skipped,
            detail: "a writer has one of its runs open; kept".into(),
        };
        emit(ctx, args.json, &a)?;
    }
    sessions.retain(|e| !busy.contains(e.summary.session_id.as_str()));
    let run_refs: Vec<&RunFacts> = runs.iter().collect();
    let moved = trash_batch(
        ctx,
        &store,
        &run_refs,
        &sessions,
        &header.finish(),
        args.dry_run,
        args.json,
    )?;
    if args.json {
        let batch = (moved.runs > 0 || moved.sessions > 0)
            .then(|| moved.batch.file_name())
            .flatten()
            .map(|n| n.to_string_lossy().into_owned());
        let summary = DeleteSummary {
            batch,
            dry_run: args.dry_run,
            runs: count(moved.runs),
            bytes: moved.bytes,
            sessions: count(moved.sessions),
            kept_locked: count(moved.kept_locked),
            kept_open: count(moved.kept_open + kept_sessions),
            kept_changed: count(moved.kept_changed),
            failed: count(moved.failures),
        };
        write_row(ctx.out, &Row::Summary(SummaryRow::Delete(summary)))?;
    } else {
        let root = ctx.root.path.clone();
        let verb = if args.dry_run { "would move" } else { "moved" };
        let whereto = if moved.runs == 0 && moved.sessions == 0 {
            String::new()
        } else {
            let name = moved
                .batch
                .file_name()
                .map(|n| n.to_string_lossy().into_owned());
            format!(
                " to {} (`sessions restore {}` puts them back)",
                rel(&root, &moved.batch),
                name.unwrap_or_default()
            )
        };
        let mut kept = Vec::new();
        if moved.kept_locked > 0 {
            kept.push(format!("{} locked run(s)", moved.kept_locked));
        }
        if moved.kept_open + kept_sessions > 0 {
            kept.push(format!(
                "{} open session(s)",
                moved.kept_open + kept_sessions
            ));
        }
        if moved.kept_changed > 0 {
            kept.push(format!("{} changed since read", moved.kept_changed));
        }
        let kept = if kept.is_empty() {
            String::new()
        } else {
            format!("; kept {}", kept.join(", "))
        };
        writeln!(
            ctx.out,
            "{verb} {} run(s) ({}) and {} session(s){whereto}{kept}",
            moved.runs,
            fmt_bytes(moved.bytes),
            moved.sessions
        )?;
    }
    moved.result()
}

/// Whether `path` is an archived run (`.jsonl.zst`).
fn is_archive(path: &Path) -> bool {
    path.to_string_lossy().ends_with(".jsonl.zst")
}

fn pinned(id: &str, session: &str) -> CliError {
    CliError::Usage(format!(
        "{id}: session {session} is pinned; `sessions unpin {session}` first"
    ))
}
