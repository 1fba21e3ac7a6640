//! A run as the run index holds it: its row ([`RunRow`]) and how it ended
//! ([`IndexedRunOutcome`]), below the index's reading (`fold.rs`, `resume.rs`) and its
//! queries (`runs.rs`, `totals.rs`, `memindex.rs`).

use std::path::PathBuf;

use crate::column::ColumnDamage;

/// Longest [`RunRow::first_input`], in characters.
pub const FIRST_INPUT_CHARS: usize = 200;

/// How a run ended, from its `run.end` record, as the run index stores it
/// ([`RunRow::outcome`], the [`RunQuery::outcome`](crate::RunQuery::outcome) filter). Unlike the record's own
/// `session_schema::RunOutcome` it has [`IndexedRunOutcome::Open`] for a run without `run.end`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IndexedRunOutcome {
    /// `run.end{outcome:"completed"}`.
    Completed,
    /// `run.end{outcome:"error"}`, or a `run.error` record with no `run.end` after it
    /// (`run.error` is terminal; a later `run.end` has the last word).
    Error,
    /// `run.end{outcome:"cancelled"}`.
    Cancelled,
    /// No `run.end`: the run is still being written, or its process died. Telling the two
    /// apart is the caller's job: a run written by session-jsonl holds an advisory lock while
    /// open (`session_jsonl::is_locked(&row.path)`); runs of the reference are never locked, so
    /// use [`RunRow::modified_unix_ns`] / [`RunRow::last_ts`] for those.
    Open,
    /// A `run.end` outcome this version does not know, kept verbatim (`open` and the empty
    /// string, which would read back as something else, as `other:open` and `other:`). The run
    /// has ended: it is not open.
    Other(String),
}

impl IndexedRunOutcome {
    /// The stored spelling: `completed`, `error`, `cancelled`, `open`, or the unknown value.
    pub fn as_str(&self) -> &str {
        match self {
            IndexedRunOutcome::Completed => "completed",
            IndexedRunOutcome::Error => "error",
            IndexedRunOutcome::Cancelled => "cancelled",
            IndexedRunOutcome::Open => "open",
            IndexedRunOutcome::Other(s) => s,
        }
    }

    /// Parses [`IndexedRunOutcome::as_str`] output.
    pub fn from_stored(s: &str) -> IndexedRunOutcome {
        match s {
            "completed" => IndexedRunOutcome::Completed,
            "error" => IndexedRunOutcome::Error,
            "cancelled" => IndexedRunOutcome::Cancelled,
            "open" => IndexedRunOutcome::Open,
            other => IndexedRunOutcome::Other(other.to_owned()),
        }
    }
}

/// One indexed run file.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunRow {
    /// Run id (header `run_id`, else the file name).
    pub run_id: String,
    /// Session id from the header (else from `run.start`).
    pub session_id: Option<String>,
    /// Absolute path of the file.
    pub path: PathBuf,
    /// Header `started_at` as written.
    pub started_at: Option<String>,
    /// `started_at` converted to UTC as `YYYY-MM-DDTHH:MM:SS.mmmZ` (millisecond precision);
    /// `None` when the header has none or it is not an RFC 3339 timestamp. The run listing
    /// orders, pages and filters (`since`/`until`) on this value (see [`RunQuery`](crate::RunQuery)).
    pub started_at_utc: Option<String>,
    /// Header `model.provider` (else the first `llm.request.model.provider`).
    pub model_provider: Option<String>,
    /// Header `model.name` (else the first `llm.request.model.name`).
    pub model_name: Option<String>,
    /// Terminal outcome.
    pub outcome: IndexedRunOutcome,
    /// Status of the last `run.status` record (`running`, `completed`, `error`, …).
    pub last_status: Option<String>,
    /// Records recovered from the file.
    pub record_count: u64,
    /// `llm.request` records (invocations, retries share one).
    pub invocation_count: u64,
    /// Sum of `usage.input_tokens` over `llm.response` records. Every token sum saturates at
    /// `i64::MAX` (the largest SQLite integer); a response whose usage made a sum saturate
    /// counts once in [`RunRow::damage_count`].
    pub input_tokens: u64,
    /// Sum of `usage.input_cached_tokens`.
    pub cached_input_tokens: u64,
    /// Sum of `usage.input_cache_creation_tokens`.
    pub cache_creation_tokens: u64,
    /// Sum of `usage.output_tokens`.
    pub output_tokens: u64,
    /// Sum of `usage.total_tokens`.
    pub total_tokens: u64,
    /// File size in bytes when indexed (compressed size for `.jsonl.zst`).
    pub file_size: u64,
    /// Modification time when indexed, nanoseconds since the Unix epoch.
    pub modified_unix_ns: i64,
    /// First line of the `run.start` input (images as `[image]`), at most
    /// [`FIRST_INPUT_CHARS`] characters.
    pub first_input: Option<String>,
    /// `run.start.ui_context.workspace_root`, else header `runtime.cwd`.
    pub workspace_root: Option<String>,
    /// Damage reports of the reader (torn tail, corrupt lines, missing header, …), plus one per
    /// `llm.response` whose usage made a token sum saturate at `i64::MAX`.
    pub damage_count: u64,
    /// `ts` of the last record that has one.
    pub last_ts: Option<String>,
    /// Whether the file is an archived `.jsonl.zst`.
    pub compressed: bool,
    /// Whether the row was read bounded (its file's head block and a tail probe, not the whole
    /// file) and its counts are unknown: [`RunRow::record_count`], the invocation and token
    /// counts and [`RunRow::damage_count`] cover only the head block, [`RunRow::last_status`]
    /// is `None`, the model may be missing when only a later `llm.request` names it, and
    /// [`RunRow::last_ts`] is that of the last record when it has one. Identity, `started_at`,
    /// first input, workspace and [`RunRow::outcome`] are exact.
    ///
    /// Rows the refresh reads bounded (`crate::partial`) are completed by every reader that
    /// answers with counts ([`RunIndex::list_runs`](crate::RunIndex::list_runs),
    /// [`RunIndex::runs_for_session`](crate::RunIndex::runs_for_session),
    /// [`RunIndex::run_totals`](crate::RunIndex::run_totals), the choice between two files of
    /// one run): `partial` is then `false`, unless the file could not be read whole at that
    /// moment. Rows read with [`RowRead::Bounded`](crate::RowRead::Bounded) into an index in
    /// memory stay partial: that caller asked for a bounded answer.
    pub partial: bool,
    /// Whether a reader completes this partial row (read bounded by the refresh) before it
    /// answers; `false` for whole rows and for rows read bounded on request.
    pub(crate) complete_on_read: bool,
    /// Other files that hold this run id (not listed themselves), most complete first; empty
    /// in the common case. Filled by the listings ([`RunIndex::list_runs`](crate::RunIndex::list_runs),
    /// [`RunIndex::runs_for_session`](crate::RunIndex::runs_for_session)), which list the most complete file of a run.
    pub other_files: Vec<PathBuf>,
    /// Values of this row in the index that are not what their column should hold (text that
    /// is not UTF-8, a BLOB, a number of the wrong kind): read as decoded, or as 0 / `None`.
    /// Always empty for a row read from a run file; `sessions reindex`
    /// ([`RunIndex::reindex`](crate::RunIndex::reindex)) rebuilds damaged rows from their files. A listed row also
    /// carries the damage of the index rows of its [`RunRow::other_files`].
    pub column_damage: Vec<ColumnDamage>,
}
