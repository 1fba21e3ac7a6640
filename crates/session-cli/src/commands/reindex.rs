//! `sessions reindex`: brings the run index (and `search.db`) up to date with the run files,
//! or rebuilds them from scratch with `--full`.

use session_state::{RunChange, StateStore};

use crate::Ctx;
use crate::cli::ReindexArgs;
use crate::error::{CliError, EXIT_OK};
use crate::json_rows::{IndexChange, IndexChangeRow, ReindexSummary, Row, SummaryRow, write_row};
use crate::progress::Progress;
use crate::support::open::{open_store, state_err};
use crate::support::paths::rel;

/// `sessions reindex`: rebuild the run index from scratch and report the difference.
pub(crate) fn run(ctx: &mut Ctx<'_>, args: &ReindexArgs) -> Result<i32, CliError> {
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
            let row = IndexChangeRow {
                change: match what {
                    "added" => IndexChange::Added,
                    "removed" => IndexChange::Removed,
                    _ => IndexChange::Changed,
                },
                file: rel(&root, path).into_owned(),
                columns: cols.iter().map(|c| c.to_string()).collect(),
            };
            write_row(ctx.out, &Row::IndexChange(row))?;
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
    let search = if args.search {
        Some(rebuild_search(ctx, &store)?)
    } else {
        None
    };
    if args.json {
        let summary = ReindexSummary {
            total: report.total,
            unchanged: report.unchanged,
            added,
            removed,
            changed,
            failed: report.failed.len() as u64,
            search_files: search.map(|(files, _)| files),
            search_documents: search.map(|(_, docs)| docs),
        };
        write_row(ctx.out, &Row::Summary(SummaryRow::Reindex(summary)))?;
    } else {
        writeln!(
            ctx.out,
            "reindexed {} run(s): {} unchanged, {added} added, {removed} removed, {changed} changed, {} unreadable",
            report.total,
            report.unchanged,
            report.failed.len()
        )?;
        if let Some((files, docs)) = search {
            writeln!(
                ctx.out,
                "rebuilt the search index: {docs} document(s) from {files} run file(s)"
            )?;
        }
    }
    Ok(EXIT_OK)
}

/// `reindex --search`: empties `search.db` and indexes every run file of the (rebuilt) run
/// index again. Returns the numbers of run files and documents indexed.
fn rebuild_search(ctx: &mut Ctx<'_>, store: &StateStore) -> Result<(u64, u64), CliError> {
    let index = session_state::SearchIndex::open(store.root()).map_err(state_err)?;
    index.clear().map_err(state_err)?;
    let bar = Progress::lazy(ctx.progress, "indexing text");
    let report = session_replay::io::search::refresh_search(store, &index)
        .map_err(|e| CliError::data(&e))?;
    bar.finish();
    for (path, err) in &report.failed {
        let msg = format!("{}: not searchable: {err}", rel(&ctx.root.path, path));
        ctx.warn(&msg);
    }
    let counts = index.counts().map_err(state_err)?;
    Ok((counts.files, counts.docs))
}
