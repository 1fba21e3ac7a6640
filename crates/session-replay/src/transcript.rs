//! Human-readable transcript of a run (spec §3 records, compat notes §2.3 emission order),
//! as a typed sequence and as Markdown.
//!
//! Built from the UI-playback records (`agent.event`) plus `run.start`, `tool.output` (full
//! tool output, compat notes §1.2), the invocation records, `run.error` and `run.end`. A run
//! without `run.end`, or whose log ends in a torn line, ends with an
//! [`EntryKind::Incomplete`] entry.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use session_schema::{AgentEvent, Record, RunInput, RunStatusKind, Timestamp, Usage};

use crate::markdown::push_fenced;
use crate::run::{SkipKind, SkippedLine};

/// A run's transcript: entries in record order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Transcript {
    /// The run id (from the header or the first record that has one).
    pub run_id: Option<String>,
    /// The session id (header or `run.start`).
    pub session_id: Option<String>,
    /// `header.started_at`.
    pub started_at: Option<Timestamp>,
    /// `header.model` as `provider/name` (plus ` (reasoning)` when set).
    pub model: Option<String>,
    /// The entries.
    pub entries: Vec<Entry>,
}

/// One transcript entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// When the underlying record was written (`None` for entries not tied to a record).
    pub ts: Option<Timestamp>,
    /// Index of the record it comes from in the slice passed in.
    pub record: Option<usize>,
    /// What happened.
    pub kind: EntryKind,
}

/// What a transcript entry says.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum EntryKind {
    /// The user's input (`run.start.input`): text, with each image part as `[image]`.
    UserInput {
        /// Display text (text parts concatenated, images as `[image]`).
        text: String,
        /// Number of image parts.
        images: usize,
    },
    /// An LLM call was made (`llm.request`).
    ModelRequest {
        /// Invocation number.
        seq: i64,
        /// Model name when recorded.
        model: Option<String>,
    },
    /// The LLM answered (`llm.response`).
    ModelResponse {
        /// Invocation number.
        seq: i64,
        /// Token usage.
        usage: Option<Usage>,
        /// Provider stop reason.
        stop_reason: Option<String>,
    },
    /// A provider call is retried (`llm.retry`).
    Retry {
        /// Failure class (`rate_limit`, `overloaded`, …).
        failure_kind: Option<String>,
        /// HTTP status.
        status: Option<String>,
        /// Attempt about to be made.
        next_attempt: Option<String>,
        /// Attempt budget.
        max_attempts: Option<String>,
        /// Wait in milliseconds.
        delay_ms: Option<String>,
    },
    /// Reasoning text.
    Reasoning {
        /// The text.
        text: String,
    },
    /// Assistant text emitted before tool calls.
    AssistantText {
        /// The text.
        text: String,
    },
    /// A tool call with its arguments.
    ToolCall {
        /// Call id.
        call_id: String,
        /// Tool name.
        tool: String,
        /// Arguments as compact JSON text.
        args: String,
    },
    /// A tool result (full `tool.output.result_raw`, else the `tool_result` event's text).
    ToolResult {
        /// Call id.
        call_id: String,
        /// Tool name.
        tool: String,
        /// The output.
        output: String,
        /// Whether the tool failed.
        is_error: bool,
    },
    /// Context compaction started.
    CompactionStarted,
    /// Context compaction finished.
    CompactionFinished {
        /// Whether the history was actually compacted.
        compacted: bool,
    },
    /// A non-running `run.status` with a message (`"Operation aborted"`).
    Status {
        /// The status.
        status: String,
        /// The message.
        message: Option<String>,
    },
    /// The run failed (`run.error`).
    Error {
        /// Error class name.
        name: String,
        /// Message.
        message: String,
    },
    /// The final answer.
    Final {
        /// The text.
        text: String,
    },
    /// How the run ended (`run.end.outcome`).
    Outcome {
        /// `completed`, `cancelled`, `error` or another value.
        outcome: String,
    },
    /// A record of a type this version does not know (`x.<org>.*` extensions, newer types),
    /// kept in place so nothing in the log goes unmentioned. Its entry time is the record's
    /// `ts` field when that is a string. Every renderer shows the type, the time and the JSON
    /// (terminal renderers clip the JSON; Markdown and HTML show it whole).
    UnknownRecord {
        /// Its `type`.
        kind: String,
        /// The whole record as compact JSON (`type` first, fields in stored order, no
        /// trailing newline).
        json: String,
    },
    /// A line of the log could not be read.
    Skipped {
        /// 1-based line.
        line: u64,
        /// Why.
        kind: SkipKind,
    },
    /// The run log stops before the run ended.
    Incomplete {
        /// Why the run is considered incomplete.
        reason: IncompleteReason,
    },
}

/// Why a transcript ends with [`EntryKind::Incomplete`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum IncompleteReason {
    /// No `run.end` record (crash, or the run is still going).
    NoRunEnd,
    /// The log ends in a torn line at this 1-based line.
    TornTail {
        /// The torn line.
        line: u64,
    },
}

/// The transcript of one run's records (no skipped-line information); `records` as for
/// [`transcript_with`].
pub fn transcript<R: AsRef<Record>>(records: &[R]) -> Transcript {
    transcript_with(records, &[])
}

/// The transcript of one run's records, with the lines the reader skipped: corrupt lines appear
/// as [`EntryKind::Skipped`] at their place, a torn tail as the final
/// [`EntryKind::Incomplete`]. `records` are [`Record`]s, or the
/// [`RecordLine`](session_schema::RecordLine)s of a run read whole with its
/// [`skipped_lines`](crate::skipped_lines).
pub fn transcript_with<R: AsRef<Record>>(records: &[R], skipped: &[SkippedLine]) -> Transcript {
    let mut b = TranscriptBuilder::new(tool_output_ids(records.iter().map(AsRef::as_ref)));
    let mut entries = Vec::new();
    for (i, record) in records.iter().map(AsRef::as_ref).enumerate() {
        b.record(i, record, &mut entries);
    }
    let mut t = b.head().clone();
    t.entries = entries;
    insert_skipped(&mut t, records.len(), skipped);
    let torn = skipped
        .iter()
        .find(|s| s.kind == SkipKind::TornTail)
        .map(|s| s.line);
    if let Some(entry) = b.incomplete(torn) {
        t.entries.push(entry);
    }
    t
}

/// Call ids that have a `tool.output` record: their `tool_result` events are not shown (the
/// full output is). The first pass of a streamed transcript ([`TranscriptBuilder`]).
pub fn tool_output_ids<'a>(records: impl IntoIterator<Item = &'a Record>) -> BTreeSet<String> {
    records
        .into_iter()
        .filter_map(|r| match r {
            Record::ToolOutput(o) => Some(o.tool_call_id.clone()),
            _ => None,
        })
        .collect()
}

/// Builds a transcript one record at a time, for renderers that stream a run log instead of
/// holding it ([`transcript_with`] is this over a slice). Two passes: the first collects the
/// call ids with a `tool.output` ([`tool_output_ids`], or [`TranscriptBuilder::note_tool_output`])
/// and the head ([`TranscriptBuilder::note_head`]); the second turns each record into its
/// entries ([`TranscriptBuilder::record`]); [`TranscriptBuilder::incomplete`] gives the
/// closing entry. Memory: the head, the call ids and two flags.
#[derive(Debug, Clone, Default)]
pub struct TranscriptBuilder {
    with_output: BTreeSet<String>,
    head: Transcript,
    final_seen: bool,
    ended: bool,
}

impl TranscriptBuilder {
    /// A builder that leaves out the `tool_result` events of the call ids in `with_output`.
    pub fn new(with_output: BTreeSet<String>) -> Self {
        TranscriptBuilder {
            with_output,
            ..TranscriptBuilder::default()
        }
    }

    /// First pass: remembers a `tool.output`'s call id.
    pub fn note_tool_output(&mut self, record: &Record) {
        if let Record::ToolOutput(o) = record {
            self.with_output.insert(o.tool_call_id.clone());
        }
    }

    /// The run's identity as far as the records noted tell: [`Transcript`] without entries
    /// (run id, session id, start time, model).
    pub fn head(&self) -> &Transcript {
        &self.head
    }

    /// Notes what `record` tells about the run's identity (the header; the first run id; the
    /// session id of `run.start` when the header has none). [`TranscriptBuilder::record`]
    /// does this too.
    pub fn note_head(&mut self, record: &Record) {
        let t = &mut self.head;
        if t.run_id.is_none() {
            t.run_id = record.run_id().map(str::to_owned);
        }
        match record {
            Record::Header(h) => {
                t.session_id = h.session_id.clone().or(t.session_id.take());
                t.started_at = Some(h.started_at.clone());
                t.model = h.model.as_ref().map(|m| {
                    let mut s = match (&m.provider, &m.name) {
                        (Some(p), Some(n)) => format!("{p}/{n}"),
                        (None, Some(n)) => n.clone(),
                        (Some(p), None) => p.clone(),
                        (None, None) => String::new(),
                    };
                    if let Some(r) = &m.reasoning {
                        let _ = write!(s, " ({r})");
                    }
                    s
                });
            }
            Record::RunStart(s) if t.session_id.is_none() => {
                t.session_id = s.session_id.clone();
            }
            _ => {}
        }
    }

    /// Appends the entries of record `i` to `out` (none for records a transcript does not
    /// show), and notes its part of the head.
    #[deny(clippy::wildcard_enum_match_arm)]
    pub fn record(&mut self, i: usize, record: &Record, out: &mut Vec<Entry>) {
        self.note_head(record);
        let push = |out: &mut Vec<Entry>, i: usize, ts: &Timestamp, kind: EntryKind| {
            out.push(Entry {
                ts: Some(ts.clone()),
                record: Some(i),
                kind,
            });
        };
        match record {
            Record::RunStart(s) => {
                let images = match &s.input {
                    RunInput::Parts(p) => p
                        .parts
                        .iter()
                        .filter(|p| matches!(p, session_schema::ContentPart::ImageUrl(_)))
                        .count(),
                    RunInput::Text(_) | RunInput::Unknown(_) => 0,
                    // A newer input shape session-schema adds: no images known.
                    _ => 0,
                };
                push(
                    out,
                    i,
                    &s.ts,
                    EntryKind::UserInput {
                        text: s.input.display_text(),
                        images,
                    },
                );
            }
            Record::LlmRequest(q) => push(
                out,
                i,
                &q.ts,
                EntryKind::ModelRequest {
                    seq: q.seq,
                    model: q
                        .model
                        .as_ref()
                        .and_then(|m| m.name.clone())
                        .or(q.input.model.clone()),
                },
            ),
            Record::LlmResponse(r) => push(
                out,
                i,
                &r.ts,
                EntryKind::ModelResponse {
                    seq: r.seq,
                    usage: r.output.usage.clone().flatten(),
                    stop_reason: r.output.stop_reason.clone().flatten(),
                },
            ),
            Record::AgentEvent(e) => {
                let kind = match &e.event {
                    AgentEvent::Text(x) => Some(EntryKind::AssistantText {
                        text: x.content.clone().unwrap_or_default(),
                    }),
                    AgentEvent::Reasoning(x) => Some(EntryKind::Reasoning {
                        text: x.content.clone().unwrap_or_default(),
                    }),
                    AgentEvent::LlmRetry(x) => Some(EntryKind::Retry {
                        failure_kind: x.failure_kind.as_ref().map(|k| k.as_str().to_owned()),
                        status: x.status.as_ref().map(ToString::to_string),
                        next_attempt: x.next_attempt.as_ref().map(ToString::to_string),
                        max_attempts: x.max_attempts.as_ref().map(ToString::to_string),
                        delay_ms: x.delay_ms.as_ref().map(ToString::to_string),
                    }),
                    AgentEvent::ToolCall(x) => Some(EntryKind::ToolCall {
                        call_id: x.tool_call_id.clone().unwrap_or_default(),
                        tool: x.tool.clone().unwrap_or_default(),
                        args: x
                            .args
                            .as_ref()
                            .map(|a| a.get().to_owned())
                            .or(x.raw_args.clone())
                            .unwrap_or_default(),
                    }),
                    AgentEvent::ToolResult(x) => {
                        let id = x.tool_call_id.as_deref().unwrap_or_default();
                        (!self.with_output.contains(id)).then(|| EntryKind::ToolResult {
                            call_id: id.to_owned(),
                            tool: x.tool.clone().unwrap_or_default(),
                            output: x.result.clone().unwrap_or_default(),
                            is_error: x.is_error == Some(true),
                        })
                    }
                    AgentEvent::CompactionStart(_) => Some(EntryKind::CompactionStarted),
                    AgentEvent::CompactionComplete(c) => Some(EntryKind::CompactionFinished {
                        compacted: c.compacted == Some(true),
                    }),
                    AgentEvent::Final(x) => {
                        self.final_seen = true;
                        Some(EntryKind::Final {
                            text: x.content.clone().unwrap_or_default(),
                        })
                    }
                    AgentEvent::StepStart(_)
                    | AgentEvent::StepComplete(_)
                    | AgentEvent::PermissionPreview(_)
                    | AgentEvent::PermissionReady(_)
                    | AgentEvent::HiddenUserMessage(_)
                    | AgentEvent::Unknown(_) => None,
                    _ => None,
                };
                if let Some(kind) = kind {
                    push(out, i, &e.ts, kind);
                }
            }
            Record::ToolOutput(o) => push(
                out,
                i,
                &o.ts,
                EntryKind::ToolResult {
                    call_id: o.tool_call_id.clone(),
                    tool: o.tool.clone(),
                    output: o.result_raw.clone(),
                    is_error: o.is_error == Some(true),
                },
            ),
            Record::RunStatus(s)
                if !matches!(s.status, RunStatusKind::Running | RunStatusKind::Completed)
                    && s.message.is_some() =>
            {
                push(
                    out,
                    i,
                    &s.ts,
                    EntryKind::Status {
                        status: s.status.as_str().to_owned(),
                        message: s.message.clone(),
                    },
                );
            }
            Record::RunError(e) => push(
                out,
                i,
                &e.ts,
                EntryKind::Error {
                    name: e.error.name.clone(),
                    message: e.error.message.clone(),
                },
            ),
            Record::RunEnd(e) => {
                self.ended = true;
                if !self.final_seen
                    && let Some(text) = &e.final_text
                {
                    push(out, i, &e.ts, EntryKind::Final { text: text.clone() });
                }
                push(
                    out,
                    i,
                    &e.ts,
                    EntryKind::Outcome {
                        outcome: e.outcome.as_str().to_owned(),
                    },
                );
            }
            Record::Unknown(u) => out.push(Entry {
                ts: u.ts(),
                record: Some(i),
                kind: EntryKind::UnknownRecord {
                    kind: u.tag.clone(),
                    json: compact_json(record),
                },
            }),
            // Shown in the head (header) or not part of a transcript (context usage, the
            // running/completed status changes and status changes without a message).
            Record::Header(_) | Record::RunContext(_) | Record::RunStatus(_) => {}
            // `Record` is `#[non_exhaustive]`: a type added to session-schema lands here until
            // it is listed above (clippy's `wildcard_enum_match_arm`, denied on this function,
            // fails the build while a known type is left to this arm).
            _ => {}
        }
    }

    /// The closing entry: [`EntryKind::Incomplete`] for a log that ends in a torn line (its
    /// 1-based line in `torn_tail`) or has no `run.end` among the records given so far.
    pub fn incomplete(&self, torn_tail: Option<u64>) -> Option<Entry> {
        let reason = match torn_tail {
            Some(line) => IncompleteReason::TornTail { line },
            None if !self.ended => IncompleteReason::NoRunEnd,
            None => return None,
        };
        Some(Entry {
            ts: None,
            record: None,
            kind: EntryKind::Incomplete { reason },
        })
    }
}

/// Places corrupt/shape-skipped lines among the entries by line number. Entries know record
/// indices, not lines; a skipped line sits after all records read before it, which is the
/// number of lines before it minus the skipped lines before it (one record per line).
fn insert_skipped(t: &mut Transcript, record_count: usize, skipped: &[SkippedLine]) {
    let mut inserts: Vec<(usize, Entry)> = Vec::new();
    for (n, s) in skipped.iter().enumerate() {
        if s.kind == SkipKind::TornTail {
            continue;
        }
        let records_before = usize::try_from(s.line.saturating_sub(1))
            .unwrap_or(usize::MAX)
            .saturating_sub(n)
            .min(record_count);
        let pos = t
            .entries
            .iter()
            .position(|e| e.record.is_some_and(|r| r >= records_before))
            .unwrap_or(t.entries.len());
        inserts.push((
            pos,
            Entry {
                ts: None,
                record: None,
                kind: EntryKind::Skipped {
                    line: s.line,
                    kind: s.kind,
                },
            },
        ));
    }
    for (pos, entry) in inserts.into_iter().rev() {
        t.entries.insert(pos, entry);
    }
}

/// The one-line description of an [`EntryKind::Retry`], shared by every renderer:
/// `Retry (attempt 2 of 5) after rate_limit (HTTP 429), waiting 1000 ms`, each part present only
/// when its field is.
pub fn describe_retry(
    failure_kind: Option<&str>,
    status: Option<&str>,
    next_attempt: Option<&str>,
    max_attempts: Option<&str>,
    delay_ms: Option<&str>,
) -> String {
    let mut line = String::from("Retry");
    if let (Some(n), Some(m)) = (next_attempt, max_attempts) {
        let _ = write!(line, " (attempt {n} of {m})");
    }
    if let Some(k) = failure_kind {
        let _ = write!(line, " after {k}");
    }
    if let Some(s) = status {
        let _ = write!(line, " (HTTP {s})");
    }
    if let Some(d) = delay_ms {
        let _ = write!(line, ", waiting {d} ms");
    }
    line
}

/// Renders a transcript as Markdown: a title with the run's identity, then one section per
/// entry (user input, reasoning, assistant text, tool calls and results in fenced blocks, final
/// answer), with the record timestamps; deterministic for a given transcript.
pub fn render_markdown(t: &Transcript) -> String {
    let mut out = render_markdown_head(t);
    for e in &t.entries {
        out.push_str(&render_markdown_entry(e));
    }
    out
}

/// The title and identity lines [`render_markdown`] starts with (only the head fields of `t`
/// are read), for a renderer that streams the entries ([`TranscriptBuilder`]).
pub fn render_markdown_head(t: &Transcript) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Run {}", t.run_id.as_deref().unwrap_or("(unknown)"));
    out.push('\n');
    if let Some(s) = &t.session_id {
        let _ = writeln!(out, "- Session: {s}");
    }
    if let Some(s) = &t.started_at {
        let _ = writeln!(out, "- Started: {s}");
    }
    if let Some(m) = &t.model {
        let _ = writeln!(out, "- Model: {m}");
    }
    out
}

/// One entry as [`render_markdown`] writes it: a blank line, then its section or line(s).
pub fn render_markdown_entry(e: &Entry) -> String {
    let mut out = String::new();
    out.push('\n');
    let ts = e.ts.as_ref().map(|t| format!(" · {t}")).unwrap_or_default();
    match &e.kind {
        EntryKind::UserInput { text, .. } => {
            let _ = writeln!(out, "## User{ts}\n");
            push_quoted_text(&mut out, text);
        }
        EntryKind::ModelRequest { seq, model } => {
            let m = model
                .as_deref()
                .map(|m| format!(" to {m}"))
                .unwrap_or_default();
            let _ = writeln!(out, "_LLM call {seq}{m}{ts}_");
        }
        EntryKind::ModelResponse {
            seq,
            usage,
            stop_reason,
        } => {
            let mut line = format!("_LLM answer {seq}");
            if let Some(r) = stop_reason {
                let _ = write!(line, " ({r})");
            }
            if let Some(u) = usage {
                let _ = write!(
                    line,
                    ": {} in ({} cached), {} out",
                    u.input_tokens,
                    u.input_cached_tokens.flatten().unwrap_or(0),
                    u.output_tokens
                );
            }
            let _ = writeln!(out, "{line}{ts}_");
        }
        EntryKind::Retry {
            failure_kind,
            status,
            next_attempt,
            max_attempts,
            delay_ms,
        } => {
            let line = describe_retry(
                failure_kind.as_deref(),
                status.as_deref(),
                next_attempt.as_deref(),
                max_attempts.as_deref(),
                delay_ms.as_deref(),
            );
            let _ = writeln!(out, "_{line}{ts}_");
        }
        EntryKind::Reasoning { text } => {
            let _ = writeln!(out, "## Reasoning{ts}\n");
            push_quoted_text(&mut out, text);
        }
        EntryKind::AssistantText { text } => {
            let _ = writeln!(out, "## Assistant{ts}\n");
            push_quoted_text(&mut out, text);
        }
        EntryKind::ToolCall {
            call_id,
            tool,
            args,
        } => {
            let _ = writeln!(out, "## Tool call `{tool}` ({call_id}){ts}\n");
            push_fenced(&mut out, "json", args);
        }
        EntryKind::ToolResult {
            call_id,
            tool,
            output,
            is_error,
        } => {
            let err = if *is_error { " — error" } else { "" };
            let _ = writeln!(out, "## Tool result `{tool}` ({call_id}){err}{ts}\n");
            crate::tool_output::push_markdown(&mut out, output);
        }
        EntryKind::CompactionStarted => {
            let _ = writeln!(out, "_Compaction started{ts}_");
        }
        EntryKind::CompactionFinished { compacted } => {
            let what = if *compacted {
                "history compacted"
            } else {
                "nothing compacted"
            };
            let _ = writeln!(out, "_Compaction finished: {what}{ts}_");
        }
        EntryKind::Status { status, message } => {
            let m = message
                .as_deref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default();
            let _ = writeln!(out, "_Status {status}{m}{ts}_");
        }
        EntryKind::Error { name, message } => {
            let _ = writeln!(out, "## Error{ts}\n");
            let _ = writeln!(out, "**{name}**: {message}");
        }
        EntryKind::Final { text } => {
            let _ = writeln!(out, "## Final answer{ts}\n");
            push_quoted_text(&mut out, text);
        }
        EntryKind::Outcome { outcome } => {
            let _ = writeln!(out, "**Outcome: {outcome}**{ts}");
        }
        EntryKind::UnknownRecord { kind, json } => {
            let _ = writeln!(out, "_Record of unknown type `{kind}`{ts}_\n");
            push_fenced(&mut out, "json", json);
        }
        EntryKind::Skipped { line, kind } => {
            let _ = writeln!(out, "> [line {line} skipped: {}]", kind.as_str());
        }
        EntryKind::Incomplete { reason } => {
            let why = match reason {
                IncompleteReason::NoRunEnd => "no run.end record".to_owned(),
                IncompleteReason::TornTail { line } => format!("torn line {line} at the end"),
            };
            let _ = writeln!(
                out,
                "**Incomplete: the log stops before the run ended ({why})**"
            );
        }
    }
    out
}

/// A record as one compact JSON text (no newline); empty when it cannot be serialized.
fn compact_json(record: &Record) -> String {
    serde_json::to_string(record).unwrap_or_default()
}

fn push_quoted_text(out: &mut String, text: &str) {
    if text.is_empty() {
        out.push_str("_(empty)_\n");
        return;
    }
    out.push_str(text);
    if !text.ends_with('\n') {
        out.push('\n');
    }
}
