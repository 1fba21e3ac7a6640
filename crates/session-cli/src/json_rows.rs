//! The JSON contract of `sessions`: every line a command writes with `--json` (and the
//! documents of `replay` and `export --format json`) is one of the types in this file, so the
//! contract can be read here in one place. `docs/cli-json.md` describes it for users;
//! `docs/cli-json.schema.json` is its JSON Schema, generated from these types by
//! [`json_schema`] (`cargo xtask schema cli` writes it, a test keeps it identical).
//!
//! The rules every row follows:
//! - a line is one JSON object whose `"type"` names what it is ([`Row`]);
//! - keys are snake_case and always present (`null` when there is no value);
//! - a run's outcome is one [`Outcome`] word everywhere (`runs`, `stats`);
//! - token counts are `input_tokens`, `cached_input_tokens`, `cache_creation_tokens`,
//!   `output_tokens`, `total_tokens` wherever they appear;
//! - paths (`file`) are relative to the store root when under it;
//! - stored records and messages are embedded verbatim ([`RawValue`]: key order and escapes
//!   as stored); the one change is that a lone UTF-16 surrogate escape becomes `\ufffd`, so
//!   every line is strict JSON (docs/format.md "Stored bytes and emitted JSON").
//!
//! Byte-exact copies of stored lines (`show --raw`, `tail --raw`/`--json`, `export --format
//! jsonl`) are the stored format itself (docs/format.md), not rows of this contract.

use std::io::Write;

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::value::RawValue;

use crate::error::CliError;

/// One line of `--json` output; `"type"` is the variant's name in snake_case.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Row {
    /// `where --json`: the store root.
    Where(WhereRow),
    /// `runs --json`: one run of the listing.
    Run(RunRow),
    /// `runs --json` (after the last run when there is a next page): the cursor to continue.
    Cursor(CursorRow),
    /// `runs --json` (first page): a file under the run tree that is no run.
    Diagnostic(DiagnosticRow),
    /// `sessions --json`: one saved session.
    Session(SessionRow),
    /// `history --json`: one event of the replayed history.
    Event(EventRow),
    /// `verify --json`: one problem or note.
    Finding(FindingRow),
    /// `repair`, `gc`, `archive`, `unarchive --json`: one planned or performed action.
    Action(ActionRow),
    /// `archive`, `unarchive --json`: a remark about the whole command (nothing done by it).
    Note(NoteRow),
    /// `reindex --json`: one run file whose index row changed.
    IndexChange(IndexChangeRow),
    /// `stats --json`: the totals of one group.
    StatsGroup(StatsGroupRow),
    /// `storage --json`: the run files of one day.
    StorageDay(StorageDayRow),
    /// `storage --json`: the bytes of one session (or of the runs of no session).
    StorageSession(StorageSessionRow),
    /// `storage --json`: one trash batch.
    StorageBatch(StorageBatchRow),
    /// The last line of `history`, `verify`, `reindex`, `stats`, `storage`, `delete` and
    /// `restore --json`: totals of the whole answer.
    Summary(SummaryRow),
    /// `replay`: the exact prompt of one invocation.
    Prompt(PromptRow),
    /// `search --json`: one matching record, hits of one run together, best runs first.
    SearchHit(SearchHitRow),
    /// `search --json` (before the hits): a session whose title matches.
    TitleHit(TitleHitRow),
    /// `export --format json` of a run (the runs of a session export have the same fields,
    /// without `type`).
    #[expect(
        dead_code,
        reason = "the export is streamed record by record (commands/export.rs writes these fields in this order); the variant gives the schema its shape"
    )]
    RunExport(RunExport),
    /// `export --format json` of a session.
    #[expect(
        dead_code,
        reason = "streamed like `RunExport`; the variant gives the schema its shape"
    )]
    SessionExport(SessionExport),
}

/// How a run ended, one vocabulary for `runs` and `stats`: one of the five words, or a
/// `run.end` outcome this version does not know, as stored (the run has ended).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// `run.end` with outcome `completed`.
    Completed,
    /// `run.end` with outcome `error`, or a `run.error` record.
    Error,
    /// `run.end` with outcome `cancelled`.
    Cancelled,
    /// No terminal record, and a writer holds the file's lock or wrote to it in the last two
    /// minutes.
    Running,
    /// No terminal record and no sign of a writer.
    Crashed,
    /// A `run.end` outcome this version does not know, as stored.
    Other(String),
}

impl Outcome {
    /// The outcome word (`completed`, `error`, …, or the stored word).
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Outcome::Completed => "completed",
            Outcome::Error => "error",
            Outcome::Cancelled => "cancelled",
            Outcome::Running => "running",
            Outcome::Crashed => "crashed",
            Outcome::Other(word) => word,
        }
    }
}

impl Serialize for Outcome {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl JsonSchema for Outcome {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Outcome".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "How a run ended: completed, error, cancelled, running (no terminal record, a writer holds it or wrote in the last two minutes), crashed (no terminal record, no writer), or a run.end outcome this version does not know, as stored.",
            "anyOf": [
                { "enum": ["completed", "error", "cancelled", "running", "crashed"] },
                { "type": "string" }
            ]
        })
    }
}

/// `where`: the resolved store root.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct WhereRow {
    /// The store root (absolute path; not guaranteed to exist).
    pub(crate) root: String,
    /// How it was chosen.
    pub(crate) source: RootSource,
    /// Whether the directory exists.
    pub(crate) exists: bool,
    /// The rules that choose the root, in the order they are tried (the `source` names).
    pub(crate) precedence: Vec<RootSource>,
    /// The shared store the commands work on instead of the root, when `--store` or
    /// `$SESSIONS_STORE` names one (the root fields then describe the local store `sync`
    /// reads); `null` otherwise.
    pub(crate) store: Option<SharedStoreRow>,
}

/// `where`: the shared store in use.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SharedStoreRow {
    /// The connection string with every password replaced by `***`.
    pub(crate) connection: String,
    /// How it was chosen: `flag` (`--store`) or `env` (`$SESSIONS_STORE`).
    pub(crate) source: SharedStoreSource,
}

/// How the shared store was chosen (`where`).
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SharedStoreSource {
    /// `--store STORE`.
    Flag,
    /// `$SESSIONS_STORE`.
    Env,
}

/// How the store root was chosen (`sessions where`).
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RootSource {
    /// `--root DIR`.
    Flag,
    /// `$SESSIONS_ROOT`.
    Env,
    /// `CODELIA_LAYOUT=xdg` with `XDG_STATE_HOME` set.
    XdgStateHome,
    /// `CODELIA_LAYOUT=xdg` with `XDG_STATE_HOME` unset or empty (`~/.local/state`).
    XdgDefault,
    /// The reference's default: `~/.codelia/sessions`.
    Home,
}

/// `runs`: one run (one per run id) from the run index.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct RunRow {
    /// The run id.
    pub(crate) run_id: String,
    /// The session the run belongs to, if any.
    pub(crate) session_id: Option<String>,
    /// The header's `started_at` as stored (RFC 3339).
    pub(crate) started_at: Option<String>,
    /// How the run ended.
    pub(crate) outcome: Outcome,
    /// The last `run.status` value seen, as stored.
    pub(crate) last_status: Option<String>,
    /// The model's provider (`run.start` or the first `llm.request`).
    pub(crate) model_provider: Option<String>,
    /// The model's name.
    pub(crate) model: Option<String>,
    /// Model invocations (`llm.request` records). This and the token, `records` and
    /// `damage_count` fields are `null` in a `partial` row.
    pub(crate) invocations: Option<u64>,
    /// Input tokens, summed over the run's responses.
    pub(crate) input_tokens: Option<u64>,
    /// Input tokens served from the provider's cache.
    pub(crate) cached_input_tokens: Option<u64>,
    /// Input tokens written to the provider's cache.
    pub(crate) cache_creation_tokens: Option<u64>,
    /// Output tokens.
    pub(crate) output_tokens: Option<u64>,
    /// Total tokens as reported (or input + output).
    pub(crate) total_tokens: Option<u64>,
    /// The first user input (clipped by the index).
    pub(crate) first_input: Option<String>,
    /// The workspace root of the run (from `run.start` ui_context or the header's cwd).
    pub(crate) workspace_root: Option<String>,
    /// Records read from the file.
    pub(crate) records: Option<u64>,
    /// Lines that did not read as records (damage reports).
    pub(crate) damage_count: Option<u64>,
    /// The `ts` of the last record (RFC 3339).
    pub(crate) last_ts: Option<String>,
    /// The run file, relative to the store root.
    pub(crate) file: String,
    /// The file's size in bytes (compressed size for `.jsonl.zst`).
    pub(crate) file_size: u64,
    /// Whether the file is a zstd archive (`.jsonl.zst`).
    pub(crate) compressed: bool,
    /// Whether the row was read bounded from a long file (a listing without a usable index
    /// reads at most a head and a tail block of each file): what only a whole read can tell
    /// is `null` (`last_status`, `invocations`, tokens, `records`, `damage_count`).
    pub(crate) partial: bool,
    /// The host the run came from, in a shared store (`--store`): the host of the client
    /// that created it. `null` for a local store, whose files do not record it.
    pub(crate) origin_host: Option<String>,
}

/// `runs`: where the next page starts (`--cursor`).
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CursorRow {
    /// Pass as `--cursor` with the same filters for the next page.
    pub(crate) next_cursor: String,
}

/// A file under the run tree that is no run (empty, NUL bytes, no header).
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct DiagnosticRow {
    /// What is wrong; today always `not_a_run`.
    pub(crate) kind: DiagnosticKind,
    /// The file, relative to the store root.
    pub(crate) file: String,
    /// The file's size in bytes.
    pub(crate) bytes: u64,
    /// Why it is no run.
    pub(crate) message: String,
}

/// Kinds of [`DiagnosticRow`].
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum DiagnosticKind {
    /// The file holds no `header` record: listings leave it out.
    NotARun,
}

/// `sessions`: one saved session.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SessionRow {
    /// The session id.
    pub(crate) session_id: String,
    /// The session's title (`sessions name`), from our own table; `null` when it has none.
    pub(crate) title: Option<String>,
    /// Whether the session is pinned (`sessions pin`): no `gc` rule moves it or its runs.
    pub(crate) pinned: bool,
    /// When the session was last saved (RFC 3339, as stored).
    pub(crate) updated_at: String,
    /// The run that last saved it.
    pub(crate) run_id: Option<String>,
    /// Messages in the saved state (`null` when unknown).
    pub(crate) message_count: Option<u64>,
    /// The last user message (clipped).
    pub(crate) last_user_message: Option<String>,
    /// The session's workspace root.
    pub(crate) workspace_root: Option<String>,
    /// Where the session is stored.
    pub(crate) source: SessionSource,
    /// The runtime that has the session open (holds its lease), or `null`.
    pub(crate) open: Option<LeaseHolderRow>,
}

/// Where a session is stored.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SessionSource {
    /// A `state.db` row and `messages/<id>.jsonl`.
    Db,
    /// A legacy `state/<id>.json` snapshot.
    Legacy,
}

/// The holder of a session's lease, from its note.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct LeaseHolderRow {
    /// Process id.
    pub(crate) pid: Option<u32>,
    /// Host name.
    pub(crate) host: Option<String>,
    /// Since when it holds the lease (RFC 3339).
    pub(crate) since: Option<String>,
    /// Why it holds it: `open`, `write`, `housekeeping` or `unknown`.
    pub(crate) purpose: String,
    /// The program's name.
    pub(crate) program: Option<String>,
}

/// `history`: one event of the history the reference's `session.history` would send.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct EventRow {
    /// The run the event comes from.
    pub(crate) run_id: String,
    /// The event's `seq` in its run (negative for the user message that started the run).
    pub(crate) seq: i64,
    /// The event's own `type` (`text`, `tool_call`, `hidden_user_message`, …).
    pub(crate) event_type: String,
    /// The event as stored (the `event` of an `agent.event` record).
    #[schemars(with = "serde_json::Value")]
    pub(crate) event: Box<RawValue>,
}

/// `verify`: one problem or note about a file.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct FindingRow {
    /// The file, relative to the store root.
    pub(crate) file: String,
    /// The run id or session id the finding is about.
    pub(crate) id: Option<String>,
    /// Whether it counts as a problem (exit 1) or is a note.
    pub(crate) severity: Severity,
    /// What was found (`torn_tail`, `invalid_json`, `duplicate_run`, `column_damage`, …:
    /// docs/cli-json.md lists them).
    pub(crate) kind: String,
    /// 1-based line number, where there is one.
    pub(crate) line: Option<u64>,
    /// Byte offset of the line or problem in the file, where there is one.
    pub(crate) offset: Option<u64>,
    /// What is wrong, for people.
    pub(crate) message: String,
}

/// Weight of a [`FindingRow`].
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Severity {
    /// Counts toward exit status 1.
    Problem,
    /// Worth knowing; does not change the exit status.
    Note,
}

/// `repair`, `gc`, `archive`, `unarchive`: one action.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ActionRow {
    /// What is done.
    pub(crate) action: ActionKind,
    /// The file or directory acted on, relative to the store root (empty when none).
    pub(crate) file: String,
    /// The run id or session id acted on.
    pub(crate) id: Option<String>,
    /// Whether it was done.
    pub(crate) status: ActionStatus,
    /// More about it, for people (may be empty).
    pub(crate) detail: String,
}

/// The actions of the commands that change the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ActionKind {
    /// `repair`: seal a torn tail with `\n`.
    SealTornTail,
    /// `repair`: migrate a legacy `state/<id>.json` snapshot into `state.db`.
    MigrateLegacy,
    /// `repair`: rebuild the run index.
    RebuildIndex,
    /// `repair`: remove a stale temp file of an interrupted save.
    RemoveStaleTemp,
    /// `repair`: rebuild the `state.db` row of a message log without one.
    RebuildRow,
    /// `gc --empty-trash`: keep a trash file a writer still holds.
    KeepLocked,
    /// `gc --empty-trash`: delete the trash.
    Delete,
    /// `gc`, `delete`: move a run file into the trash.
    MoveRun,
    /// `gc`, `delete`: move a session into the trash.
    MoveSession,
    /// `gc --empty-trash` with no trash folder.
    EmptyTrash,
    /// `archive`: compress a run file to `.jsonl.zst`.
    Archive,
    /// `unarchive`: restore an archived run to `.jsonl`.
    Unarchive,
    /// `restore`: put a run file of a trash batch back.
    RestoreRun,
    /// `restore`: put a session of a trash batch back.
    RestoreSession,
    /// `gc` on a shared store: remove a run (recorded in the store's `gc_audit` table).
    RemoveRun,
    /// `gc` on a shared store: remove a session (recorded in the store's `gc_audit` table).
    RemoveSession,
}

impl ActionKind {
    /// The name printed in the human output (`seal-torn-tail`, …).
    pub(crate) fn human(self) -> &'static str {
        match self {
            ActionKind::SealTornTail => "seal-torn-tail",
            ActionKind::MigrateLegacy => "migrate-legacy",
            ActionKind::RebuildIndex => "rebuild-index",
            ActionKind::RemoveStaleTemp => "remove-stale-temp",
            ActionKind::RebuildRow => "rebuild-row",
            ActionKind::KeepLocked => "keep-locked",
            ActionKind::Delete => "delete",
            ActionKind::MoveRun => "move-run",
            ActionKind::MoveSession => "move-session",
            ActionKind::EmptyTrash => "empty-trash",
            ActionKind::RestoreRun => "restore-run",
            ActionKind::RestoreSession => "restore-session",
            ActionKind::Archive => "archive",
            ActionKind::Unarchive => "unarchive",
            ActionKind::RemoveRun => "remove-run",
            ActionKind::RemoveSession => "remove-session",
        }
    }
}

/// Whether an action happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ActionStatus {
    /// `--dry-run`: would be done.
    Planned,
    /// Done.
    Done,
    /// Left alone on purpose (`detail` says why).
    Skipped,
    /// Tried and failed (`detail` has the error); the command exits 4 at the end.
    Failed,
}

impl ActionStatus {
    /// The word printed in the human output.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ActionStatus::Planned => "planned",
            ActionStatus::Done => "done",
            ActionStatus::Skipped => "skipped",
            ActionStatus::Failed => "failed",
        }
    }
}

/// A remark about a whole housekeeping command.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct NoteRow {
    /// The remark, for people.
    pub(crate) message: String,
}

/// `reindex`: one run file whose index row changed.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct IndexChangeRow {
    /// How the row changed.
    pub(crate) change: IndexChange,
    /// The run file, relative to the store root.
    pub(crate) file: String,
    /// For `changed`: the index columns that differ (empty otherwise).
    pub(crate) columns: Vec<String>,
}

/// How a run's index row changed in `reindex`.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum IndexChange {
    /// A file the index did not have.
    Added,
    /// A row whose file is gone.
    Removed,
    /// A row that differed from its file.
    Changed,
}

/// Run counts per [`Outcome`]; every outcome is present.
#[derive(Debug, Default, Clone, Serialize, JsonSchema)]
pub(crate) struct OutcomeCounts {
    /// Runs that completed.
    pub(crate) completed: u64,
    /// Runs that ended with an error.
    pub(crate) error: u64,
    /// Runs that were cancelled.
    pub(crate) cancelled: u64,
    /// Runs still being written.
    pub(crate) running: u64,
    /// Runs that ended without a terminal record and have no writer.
    pub(crate) crashed: u64,
    /// Runs whose `run.end` outcome this version does not know.
    pub(crate) other: u64,
}

/// `stats --by`: how runs are grouped.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum StatsBy {
    /// Day of the run's start in `tz` (`YYYY-MM-DD`, or `(unknown date)`).
    Day,
    /// ISO week (Monday to Sunday) of the run's start in `tz` (`2026-W48`).
    Week,
    /// Month of the run's start in `tz` (`2026-11`).
    Month,
    /// `provider/model` (or the model alone, or `(unknown model)`).
    Model,
    /// Session id (or `(no session)`).
    Session,
}

/// The totals of a set of runs (a `stats` group, or all of them in the summary).
#[derive(Debug, Default, Clone, Serialize, JsonSchema)]
pub(crate) struct RunTotalsRow {
    /// Runs (each run id once).
    pub(crate) runs: u64,
    /// Runs per outcome; the counts add up to `runs`.
    pub(crate) outcomes: OutcomeCounts,
    /// Model invocations.
    pub(crate) invocations: u64,
    /// Input tokens.
    pub(crate) input_tokens: u64,
    /// Input tokens served from the provider's cache.
    pub(crate) cached_input_tokens: u64,
    /// Output tokens.
    pub(crate) output_tokens: u64,
    /// Total tokens.
    pub(crate) total_tokens: u64,
}

/// `stats`: the totals of one group.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct StatsGroupRow {
    /// What the runs are grouped by.
    pub(crate) by: StatsBy,
    /// The group's key (a day, ISO week or month, a model or a session id).
    pub(crate) key: String,
    /// The time zone of day, week and month keys (`UTC` or an IANA name); `null` for model
    /// and session groups.
    pub(crate) tz: Option<String>,
    /// The group's totals.
    #[serde(flatten)]
    pub(crate) totals: RunTotalsRow,
}

/// The last line of a command's `--json` output; `command` says whose and which fields follow.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(tag = "command", rename_all = "snake_case")]
pub(crate) enum SummaryRow {
    /// `history`.
    History(HistorySummary),
    /// `verify`.
    Verify(VerifySummary),
    /// `reindex`.
    Reindex(ReindexSummary),
    /// `stats`: the totals over every group.
    Stats(StatsSummary),
    /// `storage`: the bytes of the whole store, by area.
    Storage(StorageSummary),
    /// `delete`: what went (or, with `--dry-run`, would go) into the trash, and what stayed.
    Delete(DeleteSummary),
    /// `restore`: what came (or would come) back from the trash batch.
    Restore(RestoreSummary),
}

/// `history`'s summary.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct HistorySummary {
    /// Runs the history was built from.
    pub(crate) runs: u64,
    /// Events in the history (the `event` lines before this one).
    pub(crate) events_sent: u64,
    /// Whether older runs or events were dropped (`--max-runs`, `--max-events`).
    pub(crate) truncated: bool,
}

/// `verify`'s summary.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct VerifySummary {
    /// Run files checked.
    pub(crate) run_files: u64,
    /// Their size on disk in bytes.
    pub(crate) bytes: u64,
    /// Bytes of content read (larger than `bytes` for archives, read decompressed).
    pub(crate) content_bytes: u64,
    /// Sessions checked.
    pub(crate) sessions: u64,
    /// Findings with severity `problem`.
    pub(crate) problems: u64,
    /// Findings with severity `note`.
    pub(crate) notes: u64,
}

/// `reindex`'s summary.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ReindexSummary {
    /// Run files indexed.
    pub(crate) total: u64,
    /// Rows that were already right.
    pub(crate) unchanged: u64,
    /// Rows added.
    pub(crate) added: u64,
    /// Rows removed.
    pub(crate) removed: u64,
    /// Rows corrected.
    pub(crate) changed: u64,
    /// Files that could not be read (each named on stderr).
    pub(crate) failed: u64,
    /// `reindex --search`: run files the search index was rebuilt from (`null` without it).
    pub(crate) search_files: Option<u64>,
    /// `reindex --search`: documents in the rebuilt search index (`null` without it).
    pub(crate) search_documents: Option<u64>,
}

/// `stats`' summary: the totals over every group.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct StatsSummary {
    /// What the groups were.
    pub(crate) by: StatsBy,
    /// The time zone of the groups' keys, as in [`StatsGroupRow::tz`].
    pub(crate) tz: Option<String>,
    /// The totals.
    #[serde(flatten)]
    pub(crate) totals: RunTotalsRow,
}

/// `search`: one record (or saved message) that matches the query.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SearchHitRow {
    /// The run holding the record; `null` for a saved message no run log holds.
    pub(crate) run_id: Option<String>,
    /// The session, where known.
    pub(crate) session_id: Option<String>,
    /// The workspace root of the run or session, where known.
    pub(crate) workspace: Option<String>,
    /// The file holding the record, relative to the store root.
    pub(crate) file: String,
    /// Byte offset of the record's line in `file` (`show RUN --at OFFSET` opens it there).
    pub(crate) byte_offset: u64,
    /// What the text is: `user`, `assistant`, `reasoning`, `tool_call`, `tool_output` or
    /// `final` (the `--kind` names, snake_case).
    pub(crate) kind: String,
    /// The record's time (RFC 3339), where known.
    pub(crate) time: Option<String>,
    /// The text around the match, without markers.
    pub(crate) snippet: String,
    /// The matched parts of `snippet`, as `[start, end)` character offsets.
    pub(crate) highlights: Vec<[usize; 2]>,
    /// Which index found it.
    pub(crate) matched_by: MatchedBy,
}

/// `search`: a session whose title (`sessions name`) holds every word of the text.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct TitleHitRow {
    /// The session id.
    pub(crate) session_id: String,
    /// Its title.
    pub(crate) title: String,
    /// Whether it is pinned.
    pub(crate) pinned: bool,
}

/// Which index of `search.db` found a hit.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum MatchedBy {
    /// The word index (ranked).
    Words,
    /// The trigram index (a substring, newest first).
    Substring,
}

/// `storage`: the run files of one day of the run tree (`YYYY/MM/DD/`).
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct StorageDayRow {
    /// The day of the run tree's directory, `YYYY-MM-DD`.
    pub(crate) day: String,
    /// Run files of the day (`.jsonl` and `.jsonl.zst`).
    pub(crate) runs: u64,
    /// Their size on disk in bytes.
    pub(crate) bytes: u64,
    /// Of them, archived run files (`.jsonl.zst`).
    pub(crate) archived_runs: u64,
    /// The archived files' size on disk in bytes.
    pub(crate) archived_bytes: u64,
}

/// `storage`: the bytes of one session: its run files, its message log and its legacy
/// snapshot. The run files that belong to no session are one row with `session_id: null`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct StorageSessionRow {
    /// The session id; `null` for the run files of no session.
    pub(crate) session_id: Option<String>,
    /// The session's title (`sessions name`), or `null`.
    pub(crate) title: Option<String>,
    /// All of the session's bytes: `run_bytes + messages_bytes + legacy_bytes`.
    pub(crate) bytes: u64,
    /// Its run files (by the run index, or the file's header).
    pub(crate) runs: u64,
    /// Their size on disk in bytes.
    pub(crate) run_bytes: u64,
    /// The size of `messages/<id>.jsonl` in bytes (0 when there is none).
    pub(crate) messages_bytes: u64,
    /// The size of a legacy `state/<id>.json` snapshot in bytes (0 when there is none).
    pub(crate) legacy_bytes: u64,
}

/// `storage`: one trash batch (`trash/<batch>/`, what `delete` and `gc` moved there).
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct StorageBatchRow {
    /// The batch's name (its directory under `trash/`; `restore` takes it).
    pub(crate) batch: String,
    /// Files in it, its manifest included.
    pub(crate) files: u64,
    /// Their size in bytes.
    pub(crate) bytes: u64,
}

/// `storage`'s summary: the bytes of the whole store, by area (sizes on disk, links counted
/// by their own size).
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct StorageSummary {
    /// The store root (absolute path).
    pub(crate) root: String,
    /// All of it: `run_bytes + messages_bytes + legacy_bytes + state_db_bytes +
    /// trash_bytes`.
    pub(crate) bytes: u64,
    /// Run files under the run tree (`.jsonl` and `.jsonl.zst`).
    pub(crate) run_files: u64,
    /// Their bytes.
    pub(crate) run_bytes: u64,
    /// Of them, archived run files (`.jsonl.zst`).
    pub(crate) archived_files: u64,
    /// Their bytes.
    pub(crate) archived_bytes: u64,
    /// Message logs (`messages/<id>.jsonl`).
    pub(crate) messages_files: u64,
    /// Their bytes.
    pub(crate) messages_bytes: u64,
    /// Legacy snapshots (`state/<id>.json`).
    pub(crate) legacy_files: u64,
    /// Their bytes.
    pub(crate) legacy_bytes: u64,
    /// `state.db` with its `-wal` and `-shm` files, in bytes.
    pub(crate) state_db_bytes: u64,
    /// Files in the trash (every batch).
    pub(crate) trash_files: u64,
    /// Their bytes.
    pub(crate) trash_bytes: u64,
}

/// `delete`'s summary, after its `action` lines.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct DeleteSummary {
    /// The trash batch the items went to (its name under `trash/`, what `restore` takes);
    /// with `--dry-run` the name it would have; `null` when nothing moved.
    pub(crate) batch: Option<String>,
    /// Whether this was `--dry-run` (nothing moved; the counts are the plan).
    pub(crate) dry_run: bool,
    /// Run files moved into the trash.
    pub(crate) runs: u64,
    /// Their size in bytes.
    pub(crate) bytes: u64,
    /// Sessions moved into the trash.
    pub(crate) sessions: u64,
    /// Runs kept because a writer holds them.
    pub(crate) kept_locked: u64,
    /// Sessions kept because they are open (another holder has their lease, or a writer has
    /// one of their runs open).
    pub(crate) kept_open: u64,
    /// Runs and sessions kept because they changed since they were read.
    pub(crate) kept_changed: u64,
    /// Sessions whose move failed (kept; the command exits 4).
    pub(crate) failed: u64,
}

/// `restore`'s summary, after its `action` lines.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct RestoreSummary {
    /// The trash batch restored from (its name under `trash/`).
    pub(crate) batch: String,
    /// Whether this was `--dry-run` (nothing restored; the counts are the plan).
    pub(crate) dry_run: bool,
    /// Run files put back.
    pub(crate) runs: u64,
    /// Sessions put back.
    pub(crate) sessions: u64,
    /// Whether the batch is gone (nothing was left in it but its manifest).
    pub(crate) batch_removed: bool,
}

/// `replay`: the exact prompt sent at one invocation.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct PromptRow {
    /// The run id.
    pub(crate) run_id: String,
    /// The invocation's `seq`.
    pub(crate) seq: i64,
    /// The `llm.request`'s `ts`.
    pub(crate) ts: String,
    /// The 1-based line of the `llm.request` record in the run file (`null` when unknown).
    pub(crate) line: Option<u64>,
    /// The request's `model`, as stored.
    #[schemars(with = "serde_json::Value")]
    pub(crate) model: Box<RawValue>,
    /// The request's `input.model`, as stored.
    #[schemars(with = "serde_json::Value")]
    pub(crate) input_model: Box<RawValue>,
    /// The request's session key, as stored.
    #[schemars(with = "serde_json::Value")]
    pub(crate) session_key: Box<RawValue>,
    /// The request's `tool_choice`, as stored.
    #[schemars(with = "serde_json::Value")]
    pub(crate) tool_choice: Box<RawValue>,
    /// The tools offered, as stored.
    #[schemars(with = "serde_json::Value")]
    pub(crate) tools: Box<RawValue>,
    /// Set when the snapshot already holds the request's own response (compat §5.9).
    pub(crate) over_inclusive: Option<OverInclusive>,
    /// The messages sent (without the late response with `--corrected`).
    #[schemars(with = "serde_json::Value")]
    pub(crate) messages: Box<RawValue>,
}

/// Where a late-serialized request snapshot holds its own response.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct OverInclusive {
    /// Index of the first message that belongs to the response.
    pub(crate) own_response_at: u64,
    /// How many messages were appended after the request.
    pub(crate) appended: u64,
}

/// `export --format json` of one run.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct RunExport {
    /// The run id.
    pub(crate) run_id: String,
    /// The session the run belongs to.
    pub(crate) session_id: Option<String>,
    /// The header's `started_at`.
    pub(crate) started_at: String,
    /// The stored `run.end` outcome (`completed`, `error`, `cancelled` or a newer word), or
    /// `null` when the run has no `run.end`.
    pub(crate) outcome: Option<String>,
    /// The run file, relative to the store root.
    pub(crate) file: String,
    /// Whether every line of the file is among `records`.
    pub(crate) complete: bool,
    /// Lines that did not read as records.
    pub(crate) damage: Vec<RunDamage>,
    /// Every record, as stored.
    #[schemars(with = "Vec<serde_json::Value>")]
    pub(crate) records: Vec<Box<RawValue>>,
}

/// A damaged line of a run file.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct RunDamage {
    /// What kind of damage (`invalid_json`, `torn_tail`, …).
    pub(crate) kind: String,
    /// 1-based line number.
    pub(crate) line: u64,
    /// Byte offset of the line.
    pub(crate) offset: u64,
    /// What is wrong.
    pub(crate) message: String,
}

/// `export --format json` of a session.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SessionExport {
    /// The session id.
    pub(crate) session_id: String,
    /// Whether everything stored was exported (no lost line, no unloadable state).
    pub(crate) complete: bool,
    /// The saved session state, as stored, or `null` when it cannot be loaded.
    #[schemars(with = "serde_json::Value")]
    pub(crate) state: Box<RawValue>,
    /// Damage of the message log (and an `unloadable_session` entry when the state cannot be
    /// loaded).
    pub(crate) damage: Vec<MessageDamage>,
    /// Remarks about how the session was loaded.
    pub(crate) notes: Vec<LoadNote>,
    /// The session's runs, oldest first.
    pub(crate) runs: Vec<RunExport>,
}

/// Damage of a session's message log.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct MessageDamage {
    /// The file, relative to the store root (`null` for `unloadable_session`).
    pub(crate) file: Option<String>,
    /// 1-based line number, where there is one.
    pub(crate) line: Option<u64>,
    /// Byte offset, where there is one.
    pub(crate) offset: Option<u64>,
    /// What kind of damage.
    pub(crate) kind: String,
    /// Whether the damaged message was still loaded.
    pub(crate) kept: bool,
    /// For `count_mismatch`: the messages the row promised (`null` otherwise).
    pub(crate) expected: Option<u64>,
    /// For `count_mismatch`: the messages found (`null` otherwise).
    pub(crate) found: Option<u64>,
    /// What is wrong.
    pub(crate) message: String,
}

/// A remark about how a session was loaded.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct LoadNote {
    /// What happened.
    pub(crate) kind: String,
    /// The file concerned, relative to the store root, where there is one.
    pub(crate) file: Option<String>,
    /// 1-based line number, where there is one.
    pub(crate) line: Option<u64>,
    /// Byte offset, where there is one.
    pub(crate) offset: Option<u64>,
    /// For people.
    pub(crate) message: String,
}

/// `value` as raw JSON text (serialized once; a stored value keeps its key order and escapes).
pub(crate) fn raw<T: Serialize + ?Sized>(value: &T) -> Result<Box<RawValue>, CliError> {
    serde_json::value::to_raw_value(value).map_err(|e| CliError::Output(e.into()))
}

/// Stored JSON text (a record line, `null` for an empty text) as a [`RawValue`], byte for
/// byte but for a leading byte-order mark and surrounding whitespace (a CR); a text that is
/// not one JSON value is a data error.
pub(crate) fn raw_text(text: &str) -> Result<Box<RawValue>, CliError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text).trim();
    let text = if text.is_empty() { "null" } else { text };
    let repaired = session_schema::surrogate::repair_str(text);
    RawValue::from_string(repaired.into_owned())
        .map_err(|e| CliError::Data(format!("stored JSON cannot be embedded: {e}")))
}

/// `row` as its line of text (no newline): compact JSON, lone surrogate escapes written as
/// `\ufffd`.
pub(crate) fn to_line(row: &Row) -> Result<String, CliError> {
    let text = serde_json::to_string(row).map_err(|e| CliError::Output(e.into()))?;
    Ok(session_schema::surrogate::repair_str(&text).into_owned())
}

/// Writes `row` as one line.
pub(crate) fn write_row(out: &mut dyn Write, row: &Row) -> Result<(), CliError> {
    let mut line = to_line(row)?;
    line.push('\n');
    out.write_all(line.as_bytes())?;
    Ok(())
}

/// The JSON Schema of every line (`docs/cli-json.schema.json`, draft 2020-12): a `oneOf`
/// over the row types, told apart by `type`. Every key of every object is required (the rows
/// write `null` rather than leave a key out) and no other key is allowed
/// (`unevaluatedProperties: false` on each row and on each object value inside one; stored
/// JSON embedded in a row is left open).
pub fn json_schema() -> serde_json::Value {
    use serde_json::Value;
    let mut schema = serde_json::to_value(schemars::schema_for!(Row)).unwrap_or_default();
    let defs = schema.get("$defs").cloned().unwrap_or(Value::Null);
    require_every_property(&mut schema);
    if let Some(Value::Array(rows)) = schema.get_mut("oneOf") {
        for row in rows.iter_mut() {
            close(row);
        }
    }
    close_values(&mut schema, &defs);
    schema
}

/// Sets `required` of every object schema under `v` to all of its properties.
fn require_every_property(v: &mut serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::Object(map) => {
            if let Some(Value::Object(props)) = map.get("properties") {
                let names: Vec<Value> = props.keys().cloned().map(Value::from).collect();
                map.insert("required".into(), Value::Array(names));
            }
            map.values_mut().for_each(require_every_property);
        }
        Value::Array(items) => items.iter_mut().for_each(require_every_property),
        _ => {}
    }
}

fn close(v: &mut serde_json::Value) {
    if let Some(map) = v.as_object_mut() {
        map.insert(
            "unevaluatedProperties".into(),
            serde_json::Value::Bool(false),
        );
    }
}

/// Closes every property value and array item under `v` that describes one of the rows'
/// own objects (not stored JSON, which the schema leaves open).
fn close_values(v: &mut serde_json::Value, defs: &serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::Object(map) => {
            if let Some(Value::Object(props)) = map.get_mut("properties") {
                for p in props.values_mut() {
                    if describes_object(p, defs, 0) {
                        close(p);
                    }
                }
            }
            if let Some(items) = map.get_mut("items")
                && describes_object(items, defs, 0)
            {
                close(items);
            }
            map.values_mut().for_each(|c| close_values(c, defs));
        }
        Value::Array(items) => items.iter_mut().for_each(|c| close_values(c, defs)),
        _ => {}
    }
}

/// Whether the schema `v` describes an object with declared properties (directly, through a
/// `$ref` into `defs`, or in one of its `anyOf`/`oneOf`/`allOf` alternatives).
fn describes_object(v: &serde_json::Value, defs: &serde_json::Value, depth: usize) -> bool {
    if depth > 16 {
        return false;
    }
    if v.get("properties").is_some() {
        return true;
    }
    if let Some(name) = v
        .get("$ref")
        .and_then(|r| r.as_str())
        .and_then(|r| r.strip_prefix("#/$defs/"))
    {
        return defs
            .get(name)
            .is_some_and(|d| describes_object(d, defs, depth + 1));
    }
    ["anyOf", "oneOf", "allOf"].iter().any(|k| {
        v.get(*k)
            .and_then(|a| a.as_array())
            .is_some_and(|a| a.iter().any(|c| describes_object(c, defs, depth + 1)))
    })
}
