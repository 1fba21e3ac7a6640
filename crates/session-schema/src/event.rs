//! `AgentEvent` (compat notes §1.6): the UI-playback events inside `agent.event` records.
//!
//! Events are passed through untouched by the reference, so every field here is optional: an
//! event with an unexpected shape (`{"type":"final","text":…}`) still reads, keeps its unknown
//! keys and is written back verbatim.

use crate::number::Num;
use crate::raw::RawJson;

json_union! {
    /// One agent event, discriminated by `type`.
    pub enum AgentEvent tag "type" {
        /// Assistant text emitted mid-run.
        "text" => Text(TextEvent),
        /// Reasoning text.
        "reasoning" => Reasoning(TextEvent),
        /// A provider call is being retried.
        "llm.retry" => LlmRetry(LlmRetryEvent),
        /// A tool step starts.
        "step_start" => StepStart(StepStartEvent),
        /// A tool is called.
        "tool_call" => ToolCall(ToolCallEvent),
        /// A tool returned.
        "tool_result" => ToolResult(ToolResultEvent),
        /// Permission preview (RPC only; never persisted by the reference).
        "permission.preview" => PermissionPreview(PermissionPreviewEvent),
        /// Permission ready (RPC only; never persisted by the reference).
        "permission.ready" => PermissionReady(PermissionReadyEvent),
        /// A tool step ended.
        "step_complete" => StepComplete(StepCompleteEvent),
        /// Context compaction starts.
        "compaction_start" => CompactionStart(CompactionStartEvent),
        /// Context compaction ended.
        "compaction_complete" => CompactionComplete(CompactionCompleteEvent),
        /// A run's input replayed by `session.history` (synthesized, never in files).
        "hidden_user_message" => HiddenUserMessage(ContentEvent),
        /// The final answer.
        "final" => Final(ContentEvent),
    }
}

impl Default for AgentEvent {
    fn default() -> Self {
        AgentEvent::Final(ContentEvent::default())
    }
}

json_object! {
    /// `{type:"text"|"reasoning", content, timestamp}` (`timestamp` in epoch ms).
    pub struct TextEvent {
        /// The text.
        "content" => content: opt String,
        /// Epoch milliseconds.
        "timestamp" => timestamp: opt Num,
    }
}

json_object! {
    /// `{type:"final"|"hidden_user_message", content}`.
    pub struct ContentEvent {
        /// The text.
        "content" => content: opt String,
    }
}

open_enum! {
    /// Why a provider call failed (`llm.retry.failure_kind`).
    pub enum FailureKind {
        /// HTTP 429.
        RateLimit = "rate_limit",
        /// Provider overloaded (529).
        Overloaded = "overloaded",
        /// Timed out.
        Timeout = "timeout",
        /// Network error.
        Network = "network",
        /// Other provider error.
        Provider = "provider",
    }
}

json_object! {
    /// `{type:"llm.retry", provider, failure_kind, next_attempt, max_attempts, delay_ms, delay_source, status?}`.
    pub struct LlmRetryEvent {
        /// Provider name.
        "provider" => provider: opt String,
        /// Failure class.
        "failure_kind" => failure_kind: opt FailureKind,
        /// 1-based number of the attempt about to be made.
        "next_attempt" => next_attempt: opt Num,
        /// Attempt budget.
        "max_attempts" => max_attempts: opt Num,
        /// Wait before the next attempt, in milliseconds.
        "delay_ms" => delay_ms: opt Num,
        /// `retry-after`, `reset-header`, `provider-body`, `backoff`.
        "delay_source" => delay_source: opt String,
        /// HTTP status.
        "status" => status: opt Num,
    }
}

json_object! {
    /// `{type:"step_start", step_id, title, step_number}`.
    pub struct StepStartEvent {
        /// Step id (the tool call id for tool steps).
        "step_id" => step_id: opt String,
        /// Human title.
        "title" => title: opt String,
        /// 1-based step number.
        "step_number" => step_number: opt Num,
    }
}

json_object! {
    /// `{type:"tool_call", tool, args, raw_args?, tool_call_id, display_name?}`.
    pub struct ToolCallEvent {
        /// Tool name.
        "tool" => tool: opt String,
        /// Parsed arguments (`{_raw: text}` when they did not parse).
        "args" => args: opt RawJson,
        /// Arguments as sent by the model.
        "raw_args" => raw_args: opt String,
        /// Call id.
        "tool_call_id" => tool_call_id: opt String,
        /// Display name.
        "display_name" => display_name: opt String,
    }
}

json_object! {
    /// `{type:"tool_result", tool, result, tool_call_id, is_error?, screenshot_base64?}`.
    pub struct ToolResultEvent {
        /// Tool name.
        "tool" => tool: opt String,
        /// Result text (display rendering).
        "result" => result: opt String,
        /// Call id.
        "tool_call_id" => tool_call_id: opt String,
        /// Whether the tool failed.
        "is_error" => is_error: opt bool,
        /// Screenshot (base64) or `null`.
        "screenshot_base64" => screenshot_base64: opt Option<String>,
    }
}

json_object! {
    /// `{type:"permission.preview", tool, tool_call_id?, file_path?, language?, diff?, summary?, truncated?}`.
    pub struct PermissionPreviewEvent {
        /// Tool name.
        "tool" => tool: opt String,
        /// Call id.
        "tool_call_id" => tool_call_id: opt String,
        /// File concerned.
        "file_path" => file_path: opt String,
        /// Language id.
        "language" => language: opt String,
        /// Diff text.
        "diff" => diff: opt String,
        /// Summary text.
        "summary" => summary: opt String,
        /// Whether the preview was truncated.
        "truncated" => truncated: opt bool,
    }
}

json_object! {
    /// `{type:"permission.ready", tool, tool_call_id?}`.
    pub struct PermissionReadyEvent {
        /// Tool name.
        "tool" => tool: opt String,
        /// Call id.
        "tool_call_id" => tool_call_id: opt String,
    }
}

open_enum! {
    /// Outcome of a step (`step_complete.status`).
    pub enum StepStatus {
        /// The step succeeded.
        Completed = "completed",
        /// The step failed.
        Error = "error",
    }
}

json_object! {
    /// `{type:"step_complete", step_id, status, duration_ms}`.
    pub struct StepCompleteEvent {
        /// Step id.
        "step_id" => step_id: opt String,
        /// Outcome.
        "status" => status: opt StepStatus,
        /// Duration in milliseconds.
        "duration_ms" => duration_ms: opt Num,
    }
}

json_object! {
    /// `{type:"compaction_start", timestamp}`.
    pub struct CompactionStartEvent {
        /// Epoch milliseconds.
        "timestamp" => timestamp: opt Num,
    }
}

json_object! {
    /// `{type:"compaction_complete", timestamp, compacted}`.
    pub struct CompactionCompleteEvent {
        /// Epoch milliseconds.
        "timestamp" => timestamp: opt Num,
        /// Whether the history was actually compacted.
        "compacted" => compacted: opt bool,
    }
}
