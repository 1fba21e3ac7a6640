//! Commands and helpers backed by session-state: the store handle, the run index, session
//! listings, state checks for `verify`, and `reindex`.

use session_state::{
    DamageKind as MsgDamage, EntrySource, LoadSource, RunChange, StateError, StateStore,
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

/// Not found (3) when the root is not a directory: commands never create a store where there
/// was none.
fn check_root(ctx: &Ctx<'_>) -> Result<(), CliError> {
    let root = &ctx.root.path;
    if root.is_dir() {
        Ok(())
    } else {
        Err(CliError::NotFound(format!(
            "no session store at {} ({}); pass --root DIR or see `sessions where`",
            root.display(),
            ctx.root.source
        )))
    }
}

/// Opens the store at the root for a command that changes it (`repair`, `gc`, `archive`,
/// `reindex` without `--dry-run`). Opening migrates `state.db` to the current layout.
///
/// # Errors
/// Not found (3); usage (2) under `--read-only`; data (4) when `state.db` cannot be opened.
pub(crate) fn open_store(ctx: &Ctx<'_>) -> Result<StateStore, CliError> {
    check_root(ctx)?;
    if ctx.read_only {
        return Err(CliError::Usage(
            "--read-only: this command changes the store (use --dry-run to see the plan)".into(),
        ));
    }
    StateStore::open(&ctx.root.path).map_err(state_err)
}

/// Opens the store read-only, for commands and dry runs that change nothing: no file under
/// the root is created, migrated or written (not even `state.db`'s bookkeeping tables).
///
/// # Errors
/// Not found (3), or data (4) when `state.db` exists but cannot be read.
pub(crate) fn open_store_read_only(ctx: &Ctx<'_>) -> Result<StateStore, CliError> {
    check_root(ctx)?;
    // A `state.db` that is there but is no file (a directory, a socket) cannot be the
    // database; the read-only open would take it for a store without one.
    let db = ctx.root.path.join("state.db");
    if let Ok(m) = std::fs::metadata(&db)
        && !m.is_file()
    {
        return Err(CliError::Data(format!(
            "{}: not a regular file, cannot be read as the state database",
            db.display()
        )));
    }
    StateStore::open_read_only(&ctx.root.path).map_err(state_err)
}

/// How a reading command uses the run index, for [`open_store_for_reading`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IndexUse {
    /// The answer comes from the index (`runs`, `stats`): a read-only store answers from the
    /// index as the last writer left it, which is worth a warning.
    Answers,
    /// The index only finds a session's runs; on a read-only store they are found from the
    /// run files' headers instead (`show`, `history`, `export` of a session).
    FindsRuns,
}

/// Opens the store for a reading command that keeps the run index up to date: writable when
/// possible (the refresh writes the index in `state.db`); read-only under `--read-only`, or
/// when the store cannot be written (another user's store, a read-only mount), then with a
/// one-line warning.
///
/// # Errors
/// As [`open_store_read_only`]; data (4) when a writable open fails for another reason.
pub(crate) fn open_store_for_reading(
    ctx: &mut Ctx<'_>,
    index: IndexUse,
) -> Result<StateStore, CliError> {
    check_root(ctx)?;
    let stale = "the run index may be stale (runs written since it was last updated are missing)";
    if ctx.read_only {
        if index == IndexUse::Answers {
            ctx.warn(&format!("--read-only: {stale}"));
        }
        return open_store_read_only(ctx);
    }
    match StateStore::open(&ctx.root.path) {
        Ok(store) => Ok(store),
        Err(e) if e.is_permission_denied() => {
            let msg = match index {
                IndexUse::Answers => format!(
                    "cannot write the store ({}); reading it read-only: {stale}",
                    one_line(&e)
                ),
                IndexUse::FindsRuns => format!(
                    "cannot write the store ({}); reading it read-only",
                    one_line(&e)
                ),
            };
            ctx.warn(&msg);
            open_store_read_only(ctx)
        }
        Err(e) => Err(state_err(e)),
    }
}

/// Brings the run index up to date (new, changed and removed files), with a progress bar
/// when stderr is a terminal; files that cannot be read are warned about. Nothing happens
/// on a read-only store (its index is what the last writer left).
///
/// # Errors
/// Data (4) when the tree cannot be listed or the database fails.
pub(crate) fn refresh_index(ctx: &mut Ctx<'_>, store: &StateStore) -> Result<(), CliError> {
    if store.is_read_only() {
        return Ok(());
    }
    let bar = Progress::lazy(ctx.progress, "indexing runs");
    let report = store
        .index_runs_with_progress(&mut |done, total| bar.update(done, total))
        .map_err(state_err)?;
    bar.finish();
    for (path, err) in &report.failed {
        let msg = format!("{}: not indexed: {err}", rel(&ctx.root.path, path));
        ctx.warn(&msg);
    }
    Ok(())
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
    let store = match open_store_read_only(ctx) {
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
