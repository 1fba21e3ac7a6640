//! Record and message types of the session-store format.
//!
//! This crate is the serialization boundary of the workspace: every type that is persisted —
//! run-log records (spec §3), `BaseMessage`s, `SessionState` (spec §3.1) — is defined here, with
//! the tolerance the spec asks for (§8–9) and without losing data:
//!
//! * unknown fields are kept in [`Extra`] and written back in place;
//! * unknown record types (including `x.<org>.*`), roles, part and event types are kept as
//!   [`UnknownObject`]s;
//! * unknown string-enum values are kept as `Other(String)`;
//! * a header `schema_version` other than 1 is surfaced as [`SchemaMode::BestEffort`];
//! * lone surrogate escapes anywhere in a line, raw parts included, are repaired visibly
//!   ([`Parsed::lone_surrogates`]) and restored on write; raw values decode them as U+FFFD
//!   ([`Lazy::parse`], [`Lazy::parse_reported`]), and [`surrogate::repair_str`] makes JSON text
//!   about to be emitted strict.
//!
//! Parsing a line the reference implementation wrote and serializing it again gives the
//! identical bytes ([`Parsed::to_json`]): keys keep their order, `null` stays distinct from
//! absent, integers stay integers, and large opaque parts stay raw ([`RawJson`], [`Lazy`]).
//!
//! ```
//! use session_schema::{parse_record, Record};
//!
//! let line = br#"{"type":"run.end","run_id":"r1","ts":"2026-02-03T12:00:02.800Z","outcome":"completed","x_new":1}"#;
//! let parsed = parse_record(line).unwrap();
//! let Record::RunEnd(end) = &parsed.value else { panic!() };
//! assert_eq!(end.outcome.as_str(), "completed");
//! assert_eq!(parsed.to_json().unwrap(), line.to_vec());
//! ```
// Stored numbers are never truncated or reinterpreted by an `as` cast: conversions are
// checked (`try_from`) or say what they do (`cast_signed`, `cast_unsigned`); xtask tidy
// checks that these lints stay on in every library crate (test code may cast freely).
#![cfg_attr(
    not(test),
    warn(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_possible_wrap
    )
)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[macro_use]
mod object;

mod error;
mod event;
mod file_name;
mod ids;
mod line;
mod message;
mod number;
mod parsed;
mod raw;
mod record;
mod run_read;
mod state;
pub mod surrogate;
mod timestamp;
mod tool;

#[cfg(feature = "json-schema")]
pub mod json_schema;

pub use error::ParseError;
pub use event::{
    AgentEvent, CompactionCompleteEvent, CompactionStartEvent, ContentEvent, FailureKind,
    LlmRetryEvent, PermissionPreviewEvent, PermissionReadyEvent, StepCompleteEvent, StepStartEvent,
    StepStatus, TextEvent, ToolCallEvent, ToolResultEvent,
};
pub use file_name::{ARCHIVED_EXT, RUN_EXT, parse_run_file_name};
pub use ids::{IdError, MAX_ID_LEN, SafeId, check_id, is_safe_id, is_uuid};
pub use line::{
    parse_message, parse_record, parse_record_str, parse_session_state, parse_tagged, to_line,
    trim_line,
};
pub use message::{
    AssistantMessage, BaseMessage, ContentPart, DocumentPart, DocumentSource, FunctionCall,
    ImageDetail, ImagePart, ImageUrl, MessageContent, OtherPart, ReasoningMessage, SystemMessage,
    TextPart, ToolCall, ToolMessage, ToolOutputRef, UserMessage,
};
pub use number::Num;
pub use parsed::Parsed;
pub use raw::{Extra, KeyOrder, Lazy, RawJson};
pub use record::{
    ActiveFile, AgentEventRecord, ErrorInfo, Header, HeaderTools, LlmRequest, LlmRequestInput,
    LlmResponse, LlmResponseOutput, ModelInfo, ModelSource, NameVersion, PartsInput, Prompts,
    ProviderFailureKind, Record, RunContext, RunEnd, RunError, RunInput, RunOutcome, RunStart,
    RunStatus, RunStatusKind, RuntimeInfo, SCHEMA_VERSION, SchemaMode, Selection, TextInput,
    TextPosition, TextRange, ToolOutput, UiContextSnapshot, Usage,
};
pub use run_read::{Damage, DamageKind, Item, ItemSource, RecordLine, RunRead};
pub use state::{SessionState, SessionStateSummary};
pub use surrogate::LoneSurrogate;
pub use timestamp::Timestamp;
pub use tool::{FunctionTool, HostedSearchTool, ToolChoice, ToolDefinition};

/// An object whose discriminator (`type`/`role`) this version does not know, kept whole.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct UnknownObject {
    /// The discriminator value.
    pub tag: String,
    /// Every other field, in read order.
    pub fields: Extra,
}

impl UnknownObject {
    /// Its `ts` field when that is a JSON string (a record of a type this version does not
    /// know usually carries one, spec §3), else `None`. Renderers show it as the time of the
    /// record, like [`Record::ts`] for known types.
    pub fn ts(&self) -> Option<Timestamp> {
        self.fields
            .get("ts")
            .and_then(|v| v.parse::<String>().ok())
            .map(Timestamp::from_raw)
    }
}
