//! `sessions runs` without a usable run index (a read-only store that has none): the day
//! directories are walked newest first and read into a run index in memory only until the
//! page is certain, each file read bounded (its head block and one tail block).
//!
//! Why stopping is safe: a run lives in the day directory of the UTC date of its
//! `started_at` (docs/format.md), and the listing is ordered by that time, newest first. Every
//! run of a day directory not yet walked started before every run of the days walked, so once
//! the walked days hold one match more than the page (which also says a next page exists),
//! no unwalked run can enter the page. A file placed by hand in a day directory other than
//! its start date is listed where its directory puts it in the walk.

use std::collections::BTreeSet;
use std::path::PathBuf;

use session_state::{RowRead, RunQuery, StateStore};
use time::OffsetDateTime;

use crate::Ctx;
use crate::cli::OutcomeArg;
use crate::error::CliError;
use crate::support::lib_errors::jsonl_err;
use crate::support::listing::{Shown, WorkspaceMatch, fetch};
use crate::support::open::{state_err, warn_not_indexed};
use crate::support::paths::rel;

/// A page of runs from the run files, with the files whose row was read bounded (their
/// counts cover only the head block).
pub(crate) struct ColdPage {
    pub(crate) rows: Vec<Shown>,
    pub(crate) next: Option<String>,
    pub(crate) partial: BTreeSet<PathBuf>,
}

/// `YYYY-MM-DD` (UTC) of a timestamp, when it parses.
fn utc_day(ts: &str) -> Option<String> {
    let t = session_schema::Timestamp::from_raw(ts).parse()?;
    let t = t.to_offset(time::UtcOffset::UTC);
    Some(format!(
        "{:04}-{:02}-{:02}",
        t.year(),
        u8::from(t.month()),
        t.day()
    ))
}

/// Fills `memory` (an empty run index in memory) from the newest day directories until the
/// page of `limit` runs matching `query` is certain, and returns it. Days newer than
/// `--until` or the cursor are not read; the walk stops at the first day older than
/// `--since`. Day directories are taken one, then one more, then as many again as were
/// walked so far (1, 1, 2, 4, …), the page queried after each round.
///
/// # Errors
/// Data (4) when the run tree cannot be listed or the in-memory index fails.
#[allow(clippy::too_many_arguments)]
pub(crate) fn fetch_from_files(
    ctx: &mut Ctx<'_>,
    memory: &StateStore,
    query: &RunQuery,
    outcomes: &[OutcomeArg],
    workspace: Option<&WorkspaceMatch>,
    limit: usize,
    now: OffsetDateTime,
) -> Result<ColdPage, CliError> {
    let root = ctx.root.path.clone();
    let mut walk = session_jsonl::day_dirs_newest_first(&root).map_err(jsonl_err)?;
    let newest = [
        query.until.as_deref().and_then(utc_day),
        query.after.as_ref().and_then(|c| utc_day(&c.started_at)),
    ]
    .into_iter()
    .flatten()
    .min();
    let oldest = query.since.as_deref().and_then(utc_day);
    let mut partial = BTreeSet::new();
    let mut batch = 1usize;
    let mut walked = 0usize;
    loop {
        let mut files = Vec::new();
        let mut days = 0;
        let mut walked_all = false;
        while days < batch {
            let Some(day) = walk.next() else {
                walked_all = true;
                break;
            };
            let key = format!(
                "{:04}-{:02}-{:02}",
                day.date.year, day.date.month, day.date.day
            );
            if newest.as_ref().is_some_and(|n| &key > n) {
                continue;
            }
            if oldest.as_ref().is_some_and(|o| &key < o) {
                walked_all = true;
                break;
            }
            match session_jsonl::list_day(&day) {
                Ok(f) => files.extend(f),
                Err(e) => ctx.warn(&format!(
                    "{}: not listed: {e}; its runs are missing",
                    rel(&root, &day.path)
                )),
            }
            days += 1;
        }
        walked = walked.saturating_add(days);
        let report = memory
            .run_index()
            .index_files(&files, RowRead::Bounded)
            .map_err(state_err)?;
        warn_not_indexed(ctx, &report);
        partial.extend(report.partial);
        let (rows, next) = fetch(
            memory,
            &root,
            query.clone(),
            outcomes,
            workspace,
            limit,
            now,
        )?;
        if next.is_some() || walked_all {
            for skipped in walk.take_skipped() {
                ctx.warn(&format!(
                    "{}: not listed: {}; its runs are missing",
                    rel(&root, &skipped.path),
                    skipped.error
                ));
            }
            return Ok(ColdPage {
                rows,
                next,
                partial,
            });
        }
        // One day, one more, then as many again as walked so far.
        batch = walked.max(1);
    }
}
