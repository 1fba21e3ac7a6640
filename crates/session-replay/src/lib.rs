//! Turning stored session records back into conversations (spec §5–6; compat notes §2.3, §2.12,
//! §3, §5 items 9–10).
//!
//! The core is pure: functions take records (a slice of [`session_schema::Record`] or of the
//! [`RecordLine`]s of a run read whole), runs ([`RunRead`], session-schema's one type for a run
//! read whole, as a reader or a storage backend returns it) or messages, and return their result plus a `Vec<`[`Diagnostic`]`>`. They never read files,
//! never fail on bad data and never panic; what is odd about the data is in the diagnostics.
//!
//! * [`invocations`] / [`session_invocations`]: the LLM invocations of a run (request,
//!   response, timing, retries, missing responses) by session-scoped `seq`.
//! * [`prompt_at`]: the prompt of one invocation exactly as sent, with over-inclusive snapshots
//!   (a request that already holds its own response, compat notes §5 item 9) detected and
//!   corrected ([`Prompt::corrected_messages`]).
//! * [`check_snapshots`]: each request must extend the previous one within a run unless a
//!   compaction happened in between; the first divergence of each pair is reported.
//! * [`RunChecker`]: [`verify_run`], the pairing of [`invocations`] and [`check_snapshots`]
//!   fed one record or damage report at a time, as a reader yields them, so a run of any
//!   size is checked in memory that follows its longest line (the whole-run functions are
//!   thin wrappers over the same checks: [`RunStructureCheck`], [`InvocationPairing`],
//!   [`SnapshotCheck`]).
//! * [`transcript`] / [`render_markdown`]: a typed, timestamped account of a run and its
//!   Markdown rendering; a crashed run ends with [`EntryKind::Incomplete`].
//! * [`view_tool_output`]: a tool result sorted into the shapes renderers show as text (a
//!   shell result's command, stdout, stderr and exit code; an edit's diff; other JSON
//!   indented).
//! * [`session_history`]: the reference's `session.history` replay.
//! * [`prepare_resume`]: a saved history made ready for resuming (reminders and saved startup
//!   system messages stripped, tool-call pairing repaired, current system prompt first).
//! * [`history_from_run`]: the conversation as it stood at the end of a run, rebuilt from its
//!   last request snapshot, response and tool outputs (for a lost or damaged saved state).
//! * [`stats`]: tokens per invocation, run, session, model and day; durations; tool error rates.
//!
//! The [`io`] module is the thin, fallible edge: it reads run logs through session-jsonl and
//! finds a session's runs through session-state's run index.
//!
//! ```
//! use session_replay::{invocations, prompt_at};
//! use session_schema::parse_record;
//!
//! let lines = [
//!     r#"{"type":"header","schema_version":1,"run_id":"r1","session_id":"s1","started_at":"2026-02-03T12:00:00.123Z"}"#,
//!     r#"{"type":"llm.request","run_id":"r1","ts":"2026-02-03T12:00:01.000Z","seq":4,"input":{"messages":[{"role":"user","content":"hi"}],"tools":null,"tool_choice":null}}"#,
//!     r#"{"type":"llm.response","run_id":"r1","ts":"2026-02-03T12:00:02.000Z","seq":4,"output":{"messages":[{"role":"assistant","content":"hello"}],"usage":null,"stop_reason":"end_turn","provider_meta":null}}"#,
//! ];
//! let records: Vec<_> = lines.iter().map(|l| parse_record(l.as_bytes()).unwrap().value).collect();
//! let (invs, diags) = invocations(&records);
//! assert_eq!(invs[0].seq, 4);
//! assert_eq!(invs[0].duration_ms(), Some(1000));
//! assert!(diags.is_empty());
//! let (prompt, _) = prompt_at(&records, None);
//! assert_eq!(prompt.unwrap().messages.len(), 1);
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

mod check;
mod diagnostic;
mod history;
mod invocation;
#[cfg(feature = "io")]
#[cfg_attr(docsrs, doc(cfg(feature = "io")))]
pub mod io;
mod markdown;
mod recover;
mod resume;
mod run;
pub mod search;
mod stats;
mod tool_output;
mod transcript;

pub use check::{RunCheckReport, RunChecker};
pub use diagnostic::{Diagnostic, DiagnosticKind, Severity};
pub use history::{HistoryEvent, HistoryOptions, SessionHistory, session_history};
pub use invocation::{
    Divergence, Invocation, InvocationPairing, OverInclusive, PairingStep, Prompt, Retry,
    SnapshotCheck, SnapshotReport, check_snapshots, invocations, own_response_position, prompt_at,
    session_invocations,
};
pub use recover::history_from_run;
pub use resume::{
    NO_RESULT_TEXT, RESUME_DIFF_TAG, ResumeChange, ResumeOptions, UnansweredCalls,
    is_resume_diff_reminder, prepare_resume, prepare_state_for_resume,
};
pub use run::{
    RunMeta, RunMetaFold, RunStructureCheck, SkipKind, SkippedLine, skipped_lines, verify_run,
};
/// A run read whole and a record with its position: session-schema's, re-exported (the core
/// takes them as they are).
pub use session_schema::{RecordLine, RunRead};
pub use stats::{InvocationStats, RunStats, Stats, Tokens, ToolStats, stats};
pub use tool_output::{
    EditOutput, ShellOutput, ToolOutputView, tool_output_markdown, tool_output_text,
    view_tool_output,
};
pub use transcript::{
    Entry, EntryKind, IncompleteReason, Transcript, TranscriptBuilder, describe_retry,
    render_markdown, render_markdown_entry, render_markdown_head, tool_output_ids, transcript,
    transcript_with,
};
