//! The run-log records (spec §3, compat notes §1.2).

use crate::event::AgentEvent;
use crate::message::{BaseMessage, ContentPart, ToolOutputRef};
use crate::number::Num;
use crate::raw::{Lazy, RawJson};
use crate::timestamp::Timestamp;
use crate::tool::{ToolChoice, ToolDefinition};

/// The `schema_version` this crate implements.
pub const SCHEMA_VERSION: u64 = 1;

json_union! {
    /// One line of a run log, discriminated by `type`.
    ///
    /// Unknown types (including namespaced `x.<org>.*`) read as [`Record::Unknown`] with all
    /// their fields kept.
    pub enum Record tag "type" {
        /// First line of every run log.
        "header" => Header(Header),
        /// The run's input.
        "run.start" => RunStart(RunStart),
        /// Context-window usage.
        "run.context" => RunContext(RunContext),
        /// A UI-playback event.
        "agent.event" => AgentEvent(AgentEventRecord),
        /// A tool's output.
        "tool.output" => ToolOutput(ToolOutput),
        /// The prompt sent for one LLM invocation.
        "llm.request" => LlmRequest(LlmRequest),
        /// The answer to one LLM invocation.
        "llm.response" => LlmResponse(LlmResponse),
        /// A run status change.
        "run.status" => RunStatus(RunStatus),
        /// The error that ended a run.
        "run.error" => RunError(RunError),
        /// The last record of a finished run.
        "run.end" => RunEnd(RunEnd),
    }
}

impl Record {
    /// The record's `type` as written.
    pub fn kind(&self) -> &str {
        self.tag()
    }

    /// The record's `ts` (`started_at` for the header; `None` for unknown types).
    pub fn ts(&self) -> Option<&Timestamp> {
        Some(match self {
            Record::Header(r) => &r.started_at,
            Record::RunStart(r) => &r.ts,
            Record::RunContext(r) => &r.ts,
            Record::AgentEvent(r) => &r.ts,
            Record::ToolOutput(r) => &r.ts,
            Record::LlmRequest(r) => &r.ts,
            Record::LlmResponse(r) => &r.ts,
            Record::RunStatus(r) => &r.ts,
            Record::RunError(r) => &r.ts,
            Record::RunEnd(r) => &r.ts,
            Record::Unknown(_) => return None,
        })
    }

    /// The record's `run_id` (`None` for unknown types).
    pub fn run_id(&self) -> Option<&str> {
        Some(match self {
            Record::Header(r) => &r.run_id,
            Record::RunStart(r) => &r.run_id,
            Record::RunContext(r) => &r.run_id,
            Record::AgentEvent(r) => &r.run_id,
            Record::ToolOutput(r) => &r.run_id,
            Record::LlmRequest(r) => &r.run_id,
            Record::LlmResponse(r) => &r.run_id,
            Record::RunStatus(r) => &r.run_id,
            Record::RunError(r) => &r.run_id,
            Record::RunEnd(r) => &r.run_id,
            Record::Unknown(_) => return None,
        })
    }

    /// Whether this record ends a run (`run.end`, or `run.error`, which the reference always
    /// follows with `run.end`).
    pub fn is_terminal(&self) -> bool {
        matches!(self, Record::RunEnd(_) | Record::RunError(_))
    }
}

/// Whether a header's `schema_version` is one this crate implements (spec §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaMode {
    /// `schema_version` is [`SCHEMA_VERSION`].
    Supported,
    /// Another version: read best-effort (unknown fields and types are kept, missing ones are
    /// reported as shape errors line by line).
    BestEffort {
        /// The version found.
        version: u64,
    },
}

json_object! {
    /// `{type:"header", schema_version, run_id, session_id?, started_at, client?, server?, model?,
    /// prompts?, tools?, runtime?, meta?}`.
    pub struct Header {
        /// Format version; `1` today.
        "schema_version" => schema_version: req u64,
        /// The run id (a UUIDv4 when written by the reference).
        "run_id" => run_id: req String,
        /// The session the run belongs to.
        "session_id" => session_id: opt String,
        /// When the run started; its UTC date names the directory.
        "started_at" => started_at: req Timestamp,
        /// The UI client.
        "client" => client: opt NameVersion,
        /// The runtime.
        "server" => server: opt NameVersion,
        /// The model configuration.
        "model" => model: opt ModelInfo,
        /// The startup system prompt.
        "prompts" => prompts: opt Prompts,
        /// The tool definitions offered.
        "tools" => tools: opt HeaderTools,
        /// Process facts.
        "runtime" => runtime: opt RuntimeInfo,
        /// Extensions (`runtime_environment`).
        "meta" => meta: opt RawJson,
    }
}

impl Header {
    /// Supported or best-effort, from `schema_version`.
    pub fn schema_mode(&self) -> SchemaMode {
        if self.schema_version == SCHEMA_VERSION {
            SchemaMode::Supported
        } else {
            SchemaMode::BestEffort {
                version: self.schema_version,
            }
        }
    }
}

json_object! {
    /// `{name, version}`.
    pub struct NameVersion {
        /// Name.
        "name" => name: req String,
        /// Version.
        "version" => version: req String,
    }
}

open_enum! {
    /// Where the header's model came from.
    pub enum ModelSource {
        /// The config file.
        Config = "config",
        /// A session override (`model.set` scope session).
        Session = "session",
    }
}

json_object! {
    /// `{provider?, name?, reasoning?, fast?, source?}`.
    pub struct ModelInfo {
        /// Provider (`anthropic`, `openai`, …).
        "provider" => provider: opt String,
        /// Model name.
        "name" => name: opt String,
        /// Reasoning effort (`low`, `medium`, `high`, `xhigh`, `max`, …).
        "reasoning" => reasoning: opt String,
        /// Fast mode.
        "fast" => fast: opt bool,
        /// Where the setting came from.
        "source" => source: opt ModelSource,
    }
}

json_object! {
    /// `{system?}`.
    pub struct Prompts {
        /// The full startup system prompt (can exceed 64 KiB).
        "system" => system: opt String,
    }
}

json_object! {
    /// `{definitions?, source?}`.
    pub struct HeaderTools {
        /// Tool definitions (decoded on demand).
        "definitions" => definitions: opt Lazy<Vec<ToolDefinition>>,
        /// `runtime` or `runtime+client`.
        "source" => source: opt String,
    }
}

json_object! {
    /// `{cwd?, os?, arch?, version?}`.
    pub struct RuntimeInfo {
        /// Working directory (present when the client sent a `ui_context`).
        "cwd" => cwd: opt String,
        /// `process.platform`.
        "os" => os: opt String,
        /// `process.arch`.
        "arch" => arch: opt String,
        /// Runtime version.
        "version" => version: opt String,
    }
}

json_object! {
    /// `{type:"run.start", run_id, session_id?, ts, input, ui_context?, meta?}`.
    pub struct RunStart {
        /// Run id.
        "run_id" => run_id: req String,
        /// Session id.
        "session_id" => session_id: opt String,
        /// When the record was written.
        "ts" => ts: req Timestamp,
        /// The raw client input (before skill-mention expansion).
        "input" => input: req RunInput,
        /// The client's UI context for this run.
        "ui_context" => ui_context: opt UiContextSnapshot,
        /// The client's `run.start` meta.
        "meta" => meta: opt RawJson,
    }
}

json_union! {
    /// `run.start.input`: `{type:"text", text}` or `{type:"parts", parts}`.
    pub enum RunInput tag "type" {
        /// Plain text.
        "text" => Text(TextInput),
        /// Text and image parts.
        "parts" => Parts(PartsInput),
    }
}

impl Default for RunInput {
    fn default() -> Self {
        RunInput::Text(TextInput::default())
    }
}

impl RunInput {
    /// The input as one line of text, images as `[image]` (the reference's
    /// `hidden_user_message` rendering).
    pub fn display_text(&self) -> String {
        match self {
            RunInput::Text(t) => t.text.clone(),
            RunInput::Parts(p) => {
                crate::message::MessageContent::Parts(p.parts.clone()).plain_text()
            }
            RunInput::Unknown(_) => String::new(),
        }
    }
}

json_object! {
    /// `{type:"text", text}`.
    pub struct TextInput {
        /// The text (may be empty: a forced compaction run).
        "text" => text: req String,
    }
}

json_object! {
    /// `{type:"parts", parts}`.
    pub struct PartsInput {
        /// Text and image parts.
        "parts" => parts: req Vec<ContentPart>,
    }
}

json_object! {
    /// `UiContextSnapshot`: `{cwd?, workspace_root?, active_file?, selection?, extensions?}`
    /// (compat notes §1.7).
    pub struct UiContextSnapshot {
        /// Client working directory.
        "cwd" => cwd: opt String,
        /// Client workspace root.
        "workspace_root" => workspace_root: opt String,
        /// Focused file.
        "active_file" => active_file: opt ActiveFile,
        /// Selected range.
        "selection" => selection: opt Selection,
        /// Client extensions (opaque).
        "extensions" => extensions: opt RawJson,
    }
}

json_object! {
    /// `{path, language_id?}`.
    pub struct ActiveFile {
        /// File path.
        "path" => path: req String,
        /// Language id.
        "language_id" => language_id: opt String,
    }
}

json_object! {
    /// `{path, range, selected_text?}`.
    pub struct Selection {
        /// File path.
        "path" => path: req String,
        /// 0-based range, end exclusive.
        "range" => range: req TextRange,
        /// Selected text.
        "selected_text" => selected_text: opt String,
    }
}

json_object! {
    /// `{start, end}`.
    pub struct TextRange {
        /// Start position.
        "start" => start: req TextPosition,
        /// End position (exclusive).
        "end" => end: req TextPosition,
    }
}

json_object! {
    /// `{line, column}`, both 0-based.
    pub struct TextPosition {
        /// 0-based line.
        "line" => line: req u64,
        /// 0-based column.
        "column" => column: req u64,
    }
}

json_object! {
    /// `{type:"run.context", run_id, ts, context_left_percent}`.
    pub struct RunContext {
        /// Run id.
        "run_id" => run_id: req String,
        /// When the record was written.
        "ts" => ts: req Timestamp,
        /// Context window left, percent (integers 0–100 from the reference).
        "context_left_percent" => context_left_percent: req Num,
        /// Extensions.
        "meta" => meta: opt RawJson,
    }
}

json_object! {
    /// `{type:"agent.event", run_id, ts, seq, event}`.
    pub struct AgentEventRecord {
        /// Run id.
        "run_id" => run_id: req String,
        /// When the record was written.
        "ts" => ts: req Timestamp,
        /// Per-run event counter from 0; may have gaps (unpersisted permission events).
        "seq" => seq: req i64,
        /// The event.
        "event" => event: req AgentEvent,
        /// Extensions.
        "meta" => meta: opt RawJson,
    }
}

json_object! {
    /// `{type:"tool.output", run_id, ts, tool, tool_call_id, result_raw, is_error?, output_ref?}`.
    pub struct ToolOutput {
        /// Run id.
        "run_id" => run_id: req String,
        /// When the record was written.
        "ts" => ts: req Timestamp,
        /// Tool name.
        "tool" => tool: req String,
        /// Call id.
        "tool_call_id" => tool_call_id: req String,
        /// Display rendering of the tool output (images as `[image]`).
        "result_raw" => result_raw: req String,
        /// Whether the tool failed (omitted on success by the reference).
        "is_error" => is_error: opt bool,
        /// Tool-output cache reference.
        "output_ref" => output_ref: opt ToolOutputRef,
        /// Extensions.
        "meta" => meta: opt RawJson,
    }
}

json_object! {
    /// `{type:"llm.request", run_id, ts, seq, model?, input}`.
    pub struct LlmRequest {
        /// Run id.
        "run_id" => run_id: req String,
        /// When the record was written.
        "ts" => ts: req Timestamp,
        /// Invocation number, continuing across a session's runs.
        "seq" => seq: req i64,
        /// `{provider, name}`.
        "model" => model: opt ModelInfo,
        /// The prompt.
        "input" => input: req LlmRequestInput,
        /// Extensions.
        "meta" => meta: opt RawJson,
    }
}

json_object! {
    /// `{messages, tools, tool_choice, model?, session_key?}`.
    pub struct LlmRequestInput {
        /// The full history sent (decoded on demand).
        "messages" => messages: req Lazy<Vec<BaseMessage>>,
        /// Tools offered; the reference writes `null` when absent.
        "tools" => tools: opt Lazy<Option<Vec<ToolDefinition>>>,
        /// Tool choice; `null` when absent.
        "tool_choice" => tool_choice: opt Option<ToolChoice>,
        /// Model name override.
        "model" => model: opt String,
        /// Session id (falls back to the run id).
        "session_key" => session_key: opt String,
    }
}

json_object! {
    /// `{type:"llm.response", run_id, ts, seq, output}`.
    pub struct LlmResponse {
        /// Run id.
        "run_id" => run_id: req String,
        /// When the record was written.
        "ts" => ts: req Timestamp,
        /// The matching `llm.request.seq`.
        "seq" => seq: req i64,
        /// The answer.
        "output" => output: req LlmResponseOutput,
        /// Extensions.
        "meta" => meta: opt RawJson,
    }
}

json_object! {
    /// `{messages, usage, stop_reason, provider_meta}` (the last three `null` when absent).
    pub struct LlmResponseOutput {
        /// The messages produced (decoded on demand).
        "messages" => messages: req Lazy<Vec<BaseMessage>>,
        /// Token usage.
        "usage" => usage: opt Option<Usage>,
        /// Provider stop reason (`end_turn`, `tool_use`, `completed`, …).
        "stop_reason" => stop_reason: opt Option<String>,
        /// Provider extras (opaque).
        "provider_meta" => provider_meta: opt RawJson,
    }
}

json_object! {
    /// `ChatInvokeUsage` (compat notes §1.5); token counts.
    pub struct Usage {
        /// Model that answered.
        "model" => model: req String,
        /// Provider's own model id.
        "provider_model" => provider_model: opt Option<String>,
        /// Input tokens.
        "input_tokens" => input_tokens: req u64,
        /// Input tokens read from cache.
        "input_cached_tokens" => input_cached_tokens: opt Option<u64>,
        /// Input tokens written to cache.
        "input_cache_creation_tokens" => input_cache_creation_tokens: opt Option<u64>,
        /// Image input tokens.
        "input_image_tokens" => input_image_tokens: opt Option<u64>,
        /// Output tokens.
        "output_tokens" => output_tokens: req u64,
        /// Total tokens.
        "total_tokens" => total_tokens: req u64,
    }
}

open_enum! {
    /// `run.status.status`.
    pub enum RunStatusKind {
        /// Running.
        Running = "running",
        /// Waiting for the UI (RPC only in the reference).
        AwaitingUi = "awaiting_ui",
        /// Finished.
        Completed = "completed",
        /// Failed.
        Error = "error",
        /// Cancelled.
        Cancelled = "cancelled",
    }
}

json_object! {
    /// `{type:"run.status", run_id, ts, status, message?}`.
    pub struct RunStatus {
        /// Run id.
        "run_id" => run_id: req String,
        /// When the record was written.
        "ts" => ts: req Timestamp,
        /// The new status.
        "status" => status: req RunStatusKind,
        /// Explanation (`"Operation aborted"`).
        "message" => message: opt String,
        /// Extensions.
        "meta" => meta: opt RawJson,
    }
}

json_object! {
    /// `{type:"run.error", run_id, ts, error}`.
    pub struct RunError {
        /// Run id.
        "run_id" => run_id: req String,
        /// When the record was written.
        "ts" => ts: req Timestamp,
        /// The error.
        "error" => error: req ErrorInfo,
        /// Extensions.
        "meta" => meta: opt RawJson,
    }
}

open_enum! {
    /// `run.error.error.kind`: provider failure classification.
    pub enum ProviderFailureKind {
        /// HTTP 429.
        RateLimit = "rate_limit",
        /// Overloaded.
        Overloaded = "overloaded",
        /// Timeout.
        Timeout = "timeout",
        /// Network.
        Network = "network",
        /// Quota exhausted.
        HardQuota = "hard_quota",
        /// Authentication.
        Auth = "auth",
        /// Permission.
        Permission = "permission",
        /// Request validation.
        Validation = "validation",
        /// Other provider failure.
        Provider = "provider",
        /// Cancelled.
        Cancelled = "cancelled",
    }
}

json_object! {
    /// `{name, message, stack?, provider?, kind?, status?, attempts?, max_attempts?}`.
    pub struct ErrorInfo {
        /// Error class name.
        "name" => name: req String,
        /// Message.
        "message" => message: req String,
        /// Stack trace.
        "stack" => stack: opt String,
        /// Provider (`openai`, `anthropic`, …).
        "provider" => provider: opt String,
        /// Failure class.
        "kind" => kind: opt ProviderFailureKind,
        /// HTTP status.
        "status" => status: opt Num,
        /// Attempts made.
        "attempts" => attempts: opt Num,
        /// Attempt budget.
        "max_attempts" => max_attempts: opt Num,
    }
}

open_enum! {
    /// `run.end.outcome`.
    pub enum RunOutcome {
        /// Completed normally.
        Completed = "completed",
        /// Cancelled by the user.
        Cancelled = "cancelled",
        /// Failed.
        Error = "error",
    }
}

json_object! {
    /// `{type:"run.end", run_id, ts, outcome, final?}`.
    pub struct RunEnd {
        /// Run id.
        "run_id" => run_id: req String,
        /// When the record was written.
        "ts" => ts: req Timestamp,
        /// How the run ended.
        "outcome" => outcome: req RunOutcome,
        /// The final answer (absent on error and most cancels).
        "final" => final_text: opt String,
        /// Extensions.
        "meta" => meta: opt RawJson,
    }
}
