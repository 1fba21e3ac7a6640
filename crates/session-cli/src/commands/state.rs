//! Commands and helpers backed by session-state: the store handle, the run index, session
//! listings, state checks for `verify`, and `reindex`.

use session_state::{
    DamageKind as MsgDamage, EntrySource, IndexReport, LoadSource, RunChange, StateError,
    StateStore,
};

use super::verify::Finding;
use crate::Ctx;
use crate::cli::ReindexArgs;
use crate::error::{CliError, EXIT_OK, one_line};
use crate::jsonw::JsonObj;
use crate::progress::Progress;
use crate::store::rel;

/// Maps a session-state error: unsafe id → usage (2), bad cursor → usage (2), else data (4).
pub(crate) fn state_err(e: StateError) -> CliError {
    match &e {
        StateError::UnsafeId { .. } | StateError::InvalidCursor { .. } => {
            CliError::Usage(one_line(&e))
        }
        _ => CliError::data(&e),
    }
}

/// Opens the store at the root. A missing root is "not found" (3): commands never create a
/// store where there was none.
///
/// # Errors
/// Not found (3), or data (4) when `state.db` cannot be opened.
pub(crate) fn open_store(ctx: &Ctx<'_>) -> Result<StateStore, CliError> {
    let root = &ctx.root.path;
    if !root.is_dir() {
        return Err(CliError::NotFound(format!(
            "no session store at {} ({}); pass --root DIR or see `sessions where`",
            root.display(),
            ctx.root.source
        )));
    }
    StateStore::open(root).map_err(state_err)
}

/// Brings the run index up to date (new, changed and removed files), with a progress bar
/// when stderr is a terminal; files that cannot be read are warned about.
///
/// # Errors
/// Data (4) when the tree cannot be listed or the database fails.
pub(crate) fn refresh_index(
    ctx: &mut Ctx<'_>,
    store: &StateStore,
) -> Result<IndexReport, CliError> {
    let bar = Progress::lazy(ctx.progress, "indexing runs");
    let report = store
        .index_runs_with_progress(&mut |done, total| bar.update(done, total))
        .map_err(state_err)?;
    bar.finish();
    for (path, err) in &report.failed {
        let msg = format!("{}: not indexed: {err}", rel(&ctx.root.path, path));
        ctx.warn(&msg);
    }
    Ok(report)
}

/// Checks every listed session: damage in its messages file, a row whose `message_count`
/// disagrees with the file, legacy snapshots not migrated yet. Legacy-only sessions are not
/// loaded (that would migrate them; `repair` does). Returns the number of sessions checked.
///
/// # Errors
/// Data (4) when the store cannot be opened or listed.
pub(crate) fn verify_state(
    ctx: &mut Ctx<'_>,
    findings: &mut Vec<Finding>,
) -> Result<usize, CliError> {
    // The run files were checked already; a state.db that cannot be opened or listed is one
    // more finding, not the end of the report.
    let db = ctx.root.path.join("state.db");
    let unavailable = |e: CliError| Finding {
        file: db.clone(),
        id: None,
        kind: "state_unavailable".into(),
        problem: true,
        line: None,
        offset: None,
        message: e.to_string(),
    };
    let store = match open_store(ctx) {
        Ok(s) => s,
        Err(e) => {
            findings.push(unavailable(e));
            return Ok(0);
        }
    };
    let page = match store.list(&session_state::ListQuery::all()) {
        Ok(p) => p,
        Err(e) => {
            findings.push(unavailable(state_err(e)));
            return Ok(0);
        }
    };
    for d in &page.diagnostics {
        findings.push(Finding {
            file: d.path.clone(),
            id: None,
            kind: "unlistable_snapshot".into(),
            problem: true,
            line: None,
            offset: None,
            message: d.detail.clone(),
        });
    }
    let bar = Progress::new(
        ctx.progress,
        page.entries.len() as u64,
        "verifying sessions",
    );
    for entry in &page.entries {
        bar.inc();
        let id = entry.summary.session_id.clone();
        if entry.source == EntrySource::Legacy {
            let file = store
                .legacy_path(&id)
                .unwrap_or_else(|_| ctx.root.path.join("state"));
            findings.push(Finding {
                file,
                id: Some(id),
                kind: "legacy_not_migrated".into(),
                problem: false,
                line: None,
                offset: None,
                message: "legacy snapshot without a state.db row; `sessions repair` migrates it"
                    .into(),
            });
            continue;
        }
        let messages = store
            .messages_path(&id)
            .unwrap_or_else(|_| ctx.root.path.join("messages"));
        let loaded = match store.load(&id) {
            Ok(Some(l)) => l,
            Ok(None) => continue,
            Err(e) => {
                findings.push(Finding {
                    file: messages,
                    id: Some(id),
                    kind: "unloadable_session".into(),
                    problem: true,
                    line: None,
                    offset: None,
                    message: one_line(&e),
                });
                continue;
            }
        };
        if matches!(loaded.source, LoadSource::Legacy { .. }) {
            continue;
        }
        for d in &loaded.damage {
            let (kind, problem) = match &d.kind {
                MsgDamage::TornTail => ("torn_tail", true),
                MsgDamage::Corrupt => ("corrupt_line", true),
                MsgDamage::NotObject => ("not_object", true),
                MsgDamage::MissingRole => ("missing_role", true),
                MsgDamage::Shape => ("schema_mismatch", true),
                MsgDamage::CountMismatch { .. } => ("message_count_mismatch", true),
                MsgDamage::FileChanged => ("messages_file_changed", true),
                _ => ("message_damage", true),
            };
            findings.push(Finding {
                file: d.path.clone(),
                id: Some(id.clone()),
                kind: kind.into(),
                problem,
                line: d.line,
                offset: Some(d.byte_offset),
                message: d.detail.clone(),
            });
        }
    }
    bar.finish();
    Ok(page.entries.len())
}

/// `sessions reindex`: rebuild the run index from scratch and report the difference.
pub(crate) fn reindex(ctx: &mut Ctx<'_>, args: &ReindexArgs) -> Result<i32, CliError> {
    let store = open_store(ctx)?;
    let bar = Progress::lazy(ctx.progress, "reindexing runs");
    let report = store
        .reindex_with_progress(&mut |done, total| bar.update(done, total))
        .map_err(state_err)?;
    bar.finish();
    let root = ctx.root.path.clone();
    let mut added = 0u64;
    let mut removed = 0u64;
    let mut changed = 0u64;
    for c in &report.changes {
        let (what, path, cols) = match c {
            RunChange::Added(p) => {
                added += 1;
                ("added", p, Vec::new())
            }
            RunChange::Removed(p) => {
                removed += 1;
                ("removed", p, Vec::new())
            }
            RunChange::Changed(p, cols) => {
                changed += 1;
                ("changed", p, cols.clone())
            }
            _ => continue,
        };
        if args.json {
            let mut o = JsonObj::new();
            o.str("change", what);
            o.str("file", &rel(&root, path));
            o.ser("columns", &cols);
            writeln!(ctx.out, "{}", o.finish())?;
        } else if cols.is_empty() {
            writeln!(ctx.out, "{what:<8} {}", rel(&root, path))?;
        } else {
            writeln!(
                ctx.out,
                "{what:<8} {} ({})",
                rel(&root, path),
                cols.join(", ")
            )?;
        }
    }
    for (path, err) in &report.failed {
        let msg = format!("{}: not indexed: {err}", rel(&root, path));
        ctx.warn(&msg);
    }
    if args.json {
        let mut o = JsonObj::new();
        o.bool("summary", true);
        o.unum("total", report.total);
        o.unum("unchanged", report.unchanged);
        o.unum("added", added);
        o.unum("removed", removed);
        o.unum("changed", changed);
        o.unum("failed", report.failed.len() as u64);
        writeln!(ctx.out, "{}", o.finish())?;
    } else {
        writeln!(
            ctx.out,
            "reindexed {} run(s): {} unchanged, {added} added, {removed} removed, {changed} changed, {} unreadable",
            report.total,
            report.unchanged,
            report.failed.len()
        )?;
    }
    Ok(EXIT_OK)
}
