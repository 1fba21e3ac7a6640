//! Bounded rows of the run index: what the refresh reads of a large run file (its head block
//! and a tail probe, never the whole file), and how readers complete such a row when they
//! answer with counts.
//!
//! A refresh ([`RunIndex::index_runs`](crate::RunIndex::index_runs), [`RunIndex::reindex`](crate::RunIndex::reindex)) reads a new or changed plain
//! run file longer than [`WHOLE_READ_MAX`] bounded: the head block
//! ([`session_jsonl::scan::HEAD_LIMIT`], 64 KiB) gives the header, the `run.start` (first
//! input, workspace) and the model; a tail probe of at most [`REFRESH_TAIL_PROBE`] bytes
//! ([`session_jsonl::terminal_state_probe`]) gives how the run ended and its last time. The row
//! is stored with `runs.partial = 1` ([`RunRow::partial`]): its counts (records, invocations,
//! tokens, damage) and its last `run.status` are unknown. Everything the listing filters and
//! orders on (run and session id, `started_at`, outcome, workspace) is exact, so the filters
//! stay in SQL.
//!
//! The file is read whole instead when head and tail cannot tell those exactly: an archive
//! (`.jsonl.zst` cannot be read backwards), no `header` record in the head block (whether the
//! file is a run at all depends on all of it), no `run.start` in the head block (a header
//! longer than the block), or a tail probe that cannot decide (the run ends in a record longer
//! than the probe, see [`session_jsonl::terminal_state`]). An open run with a stored
//! checkpoint goes on from it (`resume.rs`) whatever its size.
//!
//! Readers that answer with counts complete the partial rows they answer with
//! (`RunIndex::complete_row` in `runs.rs`): the file is read whole (answer-sized work) and, when the
//! index can be written, the completed row is stored (`partial = 0`) with the checkpoint of
//! an open run, so later refreshes of a growing run resume instead of reading it bounded
//! again. A read-only index completes rows for the answer only.
//!
//! Stored values of `runs.partial`: `0` read whole, `1` read bounded by the refresh
//! (completed on read), `2` read bounded on request ([`crate::RowRead::Bounded`] into an
//! index in memory: listed as read, its caller asked for a bounded answer).

use std::path::Path;

use session_jsonl::scan::HEAD_LIMIT;
use session_jsonl::{DamageKind, Item, Reader, RunEndState};

use crate::error::{Result, StateError};
use crate::fold::outcome_of_end;
use crate::fold::{read_run_row, row_from_items};
use crate::index_read::index_reader_options;
use crate::resume::RowRead;
use crate::row::{IndexedRunOutcome, RunRow};

/// Most bytes of its tail the refresh reads from a run file it reads bounded: two 64 KiB
/// blocks, so that a run ending in a `run.end` or `run.error` whose text is up to about
/// 128 KiB (a long final answer, a stack trace) is still decided from the tail, while a file
/// of any size costs at most [`HEAD_LIMIT`] + 128 KiB.
pub const REFRESH_TAIL_PROBE: u64 = 128 << 10;

/// Largest run file the refresh reads whole without trying the bounded read: a file no longer
/// than what the bounded read could read anyway (head block plus tail probe, 192 KiB).
pub const WHOLE_READ_MAX: u64 = HEAD_LIMIT as u64 + REFRESH_TAIL_PROBE;

/// Columns whose values a partial row does not claim (its counts, its last `run.status`, a
/// model only a later `llm.request` names, the last time when the last record has none,
/// `partial` itself): a rebuild
/// ([`RunIndex::reindex`](crate::RunIndex::reindex)) does not report them as changed when either side is partial.
pub(crate) const UNCLAIMED_COLUMNS: [&str; 13] = [
    "model_provider",
    "model_name",
    "last_status",
    "record_count",
    "invocation_count",
    "input_tokens",
    "cached_input_tokens",
    "cache_creation_tokens",
    "output_tokens",
    "total_tokens",
    "damage_count",
    "last_ts",
    "partial",
];

/// `runs.partial` of a row read whole.
const WHOLE: u64 = 0;
/// `runs.partial` of a row the refresh read bounded: completed by the readers.
const BY_REFRESH: u64 = 1;
/// `runs.partial` of a row read bounded on request: listed as read.
const ON_REQUEST: u64 = 2;

/// The `runs.partial` value of `row`.
pub(crate) fn partial_column(row: &RunRow) -> i64 {
    let value = match (row.partial, row.complete_on_read) {
        (false, _) => WHOLE,
        (true, true) => BY_REFRESH,
        (true, false) => ON_REQUEST,
    };
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Sets [`RunRow::partial`] from a stored `runs.partial` (a count: a value this version does
/// not know counts as partial and is completed on read, so that no answer claims counts it
/// was not given).
pub(crate) fn set_partial(row: &mut RunRow, stored: u64) {
    row.partial = stored != WHOLE;
    row.complete_on_read = row.partial && stored != ON_REQUEST;
}

/// A row read from at most the head block and a tail probe of `tail_budget` bytes.
pub(crate) struct Bounded {
    pub(crate) row: RunRow,
    /// Why the file is not a run, as far as the head block tells.
    pub(crate) diagnostic: Option<String>,
    /// Whether the row was read whole after all (a file no longer than the head block, or an
    /// archive): its counts are exact.
    pub(crate) whole: bool,
    /// Whether what the listing filters and orders on is exact: a header and a `run.start`
    /// in the head block, and a tail that decided how the run ended.
    pub(crate) exact: bool,
}

/// Reads a run file bounded: a file no longer than the head block, and an archive (which
/// cannot be read backwards), whole; a longer plain file as its head block (header fields,
/// first input, workspace, model, counts of the head block) and a tail probe of at most
/// `tail_budget` bytes (outcome and last time when the tail decides; open otherwise). A
/// `run.status` of the head block is not the last one: `last_status` is `None`. With
/// `only_exact`, the tail is not read when the head block already says the row cannot be
/// exact (no header, no `run.start`).
///
/// # Errors
/// [`StateError::Run`] when the file cannot be opened or read.
pub(crate) fn read_bounded(
    path: &Path,
    size: u64,
    mtime: i64,
    compressed: bool,
    tail_budget: u64,
    only_exact: bool,
) -> Result<Bounded> {
    let head_limit = u64::try_from(HEAD_LIMIT).unwrap_or(u64::MAX);
    if compressed || size <= head_limit {
        let (row, diagnostic) = read_run_row(path, size, mtime, compressed)?;
        return Ok(Bounded {
            row,
            diagnostic,
            whole: true,
            exact: true,
        });
    }
    let run_err = |e: session_jsonl::JsonlError| StateError::Run {
        path: path.to_path_buf(),
        source: Box::new(e),
    };
    let (head, block) = session_jsonl::read_head_block(path).map_err(run_err)?;
    // A buffer the block's size at once, not grown to it from a small one.
    let reader = Reader::with_position_and_hint(
        &block[..],
        index_reader_options(),
        0,
        1,
        u64::try_from(block.len()).ok(),
    );
    // The line the head block cuts is no torn tail: the file goes on.
    let items = reader.filter(|item| {
        !matches!(item, Ok(Item::Damage(d)) if d.kind == DamageKind::TornTail
            || d.offset.saturating_add(d.len) >= head_limit)
    });
    let (mut row, mut diagnostic) = row_from_items(path, items, size, mtime, compressed)?;
    // A header longer than the head block (the reference's can carry a long system prompt):
    // its small fields were read from its start.
    if diagnostic.is_some() && head.is_header() {
        diagnostic = None;
        if let Some(id) = &head.facts.run_id {
            row.run_id.clone_from(id);
        }
        row.session_id.clone_from(&head.facts.session_id);
        row.started_at = head
            .facts
            .started_at
            .as_ref()
            .map(|t| t.as_str().to_owned());
        row.started_at_utc = row.started_at.as_deref().and_then(crate::utc::utc_key);
    }
    // `first_input` is set by a `run.start`, whose input it shows.
    let head_exact = diagnostic.is_none() && row.first_input.is_some();
    if !head_exact && only_exact {
        row.partial = true;
        return Ok(Bounded {
            row,
            diagnostic,
            whole: false,
            exact: false,
        });
    }
    let tail = session_jsonl::terminal_state_probe(path, tail_budget).map_err(run_err)?;
    if !tail.undecided {
        row.outcome = match &tail.end {
            RunEndState::Ended { outcome, .. } => outcome_of_end(outcome.as_str()),
            RunEndState::Errored { .. } => IndexedRunOutcome::Error,
            _ => IndexedRunOutcome::Open,
        };
        if let Some(ts) = &tail.last_ts {
            row.last_ts = Some(ts.as_str().to_owned());
        }
    } else {
        // Nothing after the head block is known.
        row.outcome = IndexedRunOutcome::Open;
    }
    row.last_status = None;
    if tail.torn_tail {
        row.damage_count = row.damage_count.saturating_add(1);
    }
    let exact = head_exact && !tail.undecided;
    row.partial = true;
    Ok(Bounded {
        row,
        diagnostic,
        whole: false,
        exact,
    })
}

/// Reads one new or changed run file for the refresh: on from its stored checkpoint when it
/// has a usable one; bounded ([`read_bounded`] with [`REFRESH_TAIL_PROBE`]) when it is a plain
/// file longer than [`WHOLE_READ_MAX`] and head and tail tell the listed fields exactly (a
/// partial row, completed on read); whole otherwise (see the module documentation). A whole
/// read reads into `buf`, the read buffer of the previous file (empty for the first), and
/// leaves its buffer there for the next ([`crate::resume::read_row_reusing`]): a worker of the
/// refresh's read pool (`read_pool.rs`) allocates one buffer, not one per file.
///
/// # Errors
/// [`StateError::Run`] when the file cannot be opened or read.
pub(crate) fn read_for_refresh(
    path: &Path,
    size: u64,
    mtime: i64,
    compressed: bool,
    stored: Option<&str>,
    buf: &mut Vec<u8>,
) -> Result<RowRead> {
    if let Some(read) = crate::resume::resume_row(path, size, mtime, compressed, stored)? {
        return Ok(read);
    }
    if !compressed && size > WHOLE_READ_MAX {
        let b = read_bounded(path, size, mtime, compressed, REFRESH_TAIL_PROBE, true)?;
        if b.exact && !b.whole {
            let mut row = b.row;
            row.complete_on_read = true;
            return Ok(RowRead {
                row,
                diagnostic: None,
                checkpoint: None,
                resumed: false,
                after: None,
            });
        }
    }
    crate::resume::read_row_reusing(path, size, mtime, compressed, None, buf)
}

/// [`read_for_refresh`] of a file without a stored checkpoint that its caller opened already
/// (`file`, relative to its directory, whose `fstat` gave `size` and `mtime`): read whole
/// from `file` into `buf`; a plain file longer than [`WHOLE_READ_MAX`] is first tried bounded
/// (by its path, as [`read_for_refresh`] does: large files are few, and their bytes, not
/// their openings, are the cost).
///
/// # Errors
/// [`StateError::Run`] when the file cannot be read.
pub(crate) fn read_opened_for_refresh(
    file: std::fs::File,
    path: &Path,
    (size, mtime, compressed): (u64, i64, bool),
    buf: &mut Vec<u8>,
) -> Result<RowRead> {
    if !compressed && size > WHOLE_READ_MAX {
        let b = read_bounded(path, size, mtime, compressed, REFRESH_TAIL_PROBE, true)?;
        if b.exact && !b.whole {
            let mut row = b.row;
            row.complete_on_read = true;
            return Ok(RowRead {
                row,
                diagnostic: None,
                checkpoint: None,
                resumed: false,
                after: None,
            });
        }
    }
    crate::resume::read_opened_row_reusing(file, path, (size, mtime, compressed), buf)
}
