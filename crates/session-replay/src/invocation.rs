//! LLM invocations of a run and the prompt sent at each (spec §3 `llm.request`/`llm.response`,
//! §4, §5; compat notes §2.3, §5 items 9–10).
//!
//! An invocation is one `seq`: the `llm.request` snapshot, the `agent.event` `llm.retry` events
//! written while it was retried, and the `llm.response` (absent when the call failed for good,
//! was cancelled, or the runtime died). `seq` is session-scoped: it continues from the session's
//! `invoke_seq`, so a run's first invocation is rarely 1.
//!
//! Nothing here decodes request messages unless asked: [`invocations`] only borrows the records
//! (the messages stay [`Lazy`](session_schema::Lazy) raw JSON), and [`prompt_at`] decodes the one
//! request it returns.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::value::RawValue;
use session_schema::surrogate;
use session_schema::{
    AgentEvent, BaseMessage, LlmRequest, LlmResponse, LlmRetryEvent, ModelInfo, Record, RunRead,
    Timestamp, ToolChoice, ToolDefinition, Usage,
};

use crate::diagnostic::{Diagnostic, DiagnosticKind};
use crate::run::RunMeta;

/// One `agent.event` `llm.retry` seen while an invocation was pending.
#[derive(Debug, Clone, Copy)]
pub struct Retry<'a> {
    /// Index of the `agent.event` record in the slice passed in.
    pub record: usize,
    /// When it was written.
    pub ts: &'a Timestamp,
    /// The event (`failure_kind`, `next_attempt`, `max_attempts`, `delay_ms`, `status`, …).
    pub event: &'a LlmRetryEvent,
}

/// One LLM invocation (one `seq`) of a run, borrowing its records.
#[derive(Debug, Clone)]
pub struct Invocation<'a> {
    /// The invocation number (`llm.request.seq`, session-scoped).
    pub seq: i64,
    /// The `llm.request`, absent for a response whose request is missing (reported as
    /// [`DiagnosticKind::OrphanResponse`]).
    pub request: Option<&'a LlmRequest>,
    /// Index of the request record in the slice passed in.
    pub request_record: Option<usize>,
    /// The `llm.response`, absent when the call never completed.
    pub response: Option<&'a LlmResponse>,
    /// Index of the response record.
    pub response_record: Option<usize>,
    /// `llm.retry` events between the request and the response (or the next request).
    pub retries: Vec<Retry<'a>>,
}

impl<'a> Invocation<'a> {
    /// Whether the request never got a response.
    pub fn missing_response(&self) -> bool {
        self.response.is_none()
    }

    /// The run the invocation belongs to (from the request, else the response).
    pub fn run_id(&self) -> &'a str {
        match (self.request, self.response) {
            (Some(q), _) => &q.run_id,
            (None, Some(r)) => &r.run_id,
            (None, None) => "",
        }
    }

    /// When the request was written.
    pub fn requested_at(&self) -> Option<&'a Timestamp> {
        self.request.map(|q| &q.ts)
    }

    /// When the response was written.
    pub fn responded_at(&self) -> Option<&'a Timestamp> {
        self.response.map(|r| &r.ts)
    }

    /// Milliseconds from the request's `ts` to the response's `ts` (includes retry waits);
    /// `None` without both or when a timestamp does not parse.
    pub fn duration_ms(&self) -> Option<i64> {
        let start = self.requested_at()?.unix_millis()?;
        let end = self.responded_at()?.unix_millis()?;
        Some(end - start)
    }

    /// `llm.request.model` (`{provider, name}`).
    pub fn model(&self) -> Option<&'a ModelInfo> {
        self.request.and_then(|q| q.model.as_ref())
    }

    /// The model name to report: the usage's `model`, else the request's `model.name`, else
    /// `input.model`.
    pub fn model_name(&self) -> Option<&'a str> {
        if let Some(u) = self.usage() {
            return Some(&u.model);
        }
        let q = self.request?;
        q.model
            .as_ref()
            .and_then(|m| m.name.as_deref())
            .or(q.input.model.as_deref())
    }

    /// `llm.request.input.session_key`.
    pub fn session_key(&self) -> Option<&'a str> {
        self.request.and_then(|q| q.input.session_key.as_deref())
    }

    /// `llm.response.output.usage` when present and not `null`.
    pub fn usage(&self) -> Option<&'a Usage> {
        self.response
            .and_then(|r| r.output.usage.as_ref())
            .and_then(Option::as_ref)
    }

    /// `llm.response.output.stop_reason` when present and not `null`.
    pub fn stop_reason(&self) -> Option<&'a str> {
        self.response
            .and_then(|r| r.output.stop_reason.as_ref())
            .and_then(|s| s.as_deref())
    }

    /// `llm.request.input.tool_choice` (`None` for absent or `null`).
    pub fn tool_choice(&self) -> Option<&'a ToolChoice> {
        self.request
            .and_then(|q| q.input.tool_choice.as_ref())
            .and_then(Option::as_ref)
    }

    /// Decodes the request's messages (`None` without a request).
    ///
    /// # Errors
    /// The messages JSON does not fit `BaseMessage` (see [`prompt_at`] for a tolerant decode).
    pub fn request_messages(&self) -> Option<Result<Vec<BaseMessage>, serde_json::Error>> {
        self.request.map(|q| q.input.messages.parse())
    }

    /// Decodes the response's messages (`None` without a response).
    ///
    /// # Errors
    /// The messages JSON does not fit `BaseMessage`.
    pub fn response_messages(&self) -> Option<Result<Vec<BaseMessage>, serde_json::Error>> {
        self.response.map(|r| r.output.messages.parse())
    }

    /// Decodes the request's tools (`None` without a request; `Ok(None)` for absent or `null`).
    ///
    /// # Errors
    /// The tools JSON does not fit `ToolDefinition`.
    pub fn request_tools(&self) -> Option<Result<Option<Vec<ToolDefinition>>, serde_json::Error>> {
        self.request.map(|q| match &q.input.tools {
            None => Ok(None),
            Some(lazy) => lazy.parse(),
        })
    }
}

/// What [`InvocationPairing::push`] made of one record. Invocations are numbered from 0 in
/// order of their first record, as [`invocations`] returns them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairingStep {
    /// A record that is no part of an invocation.
    Other,
    /// An `llm.request` opened invocation `n`.
    Request(usize),
    /// An `llm.response` answered invocation `n`.
    Response(usize),
    /// An `llm.response` with no `llm.request` of its seq before it opened invocation `n`
    /// (reported as [`DiagnosticKind::OrphanResponse`]).
    OrphanResponse(usize),
    /// A second `llm.response` for a seq already answered (reported as
    /// [`DiagnosticKind::DuplicateSeq`]); it belongs to no invocation.
    DuplicateResponse,
    /// An `agent.event` `llm.retry` written while invocation `n` was pending (or, with none
    /// pending, after it, the latest).
    Retry(usize),
}

/// What [`InvocationPairing`] keeps of one invocation.
#[derive(Debug, Clone)]
struct Pairing {
    /// The invocation's seq.
    seq: i64,
    /// Index of its request record.
    request_record: Option<usize>,
    /// The request's run id while no response answered it (what its
    /// [`DiagnosticKind::MissingResponse`] note names).
    unanswered_run: Option<String>,
    /// Whether a response answered it (or opened it).
    answered: bool,
}

/// The pairing of requests and responses of one run, fed one record at a time: the one
/// implementation behind [`invocations`] (which builds the [`Invocation`]s from its steps) and
/// the streaming checks of a run that is never held whole.
///
/// Memory is a few words per invocation (its seq, its request's index and, until it is
/// answered, its run id), never a record's text. Diagnostics come out of
/// [`finish`](Self::finish) in the order [`invocations`] gives them: duplicate, decreasing and
/// orphan seqs in record order, then one [`DiagnosticKind::MissingResponse`] note per
/// unanswered request in invocation order.
#[derive(Debug, Clone, Default)]
pub struct InvocationPairing {
    /// Every invocation so far, in order of its first record.
    invocations: Vec<Pairing>,
    /// seq -> the latest invocation with that seq.
    by_seq: BTreeMap<i64, usize>,
    /// The previous request's seq.
    last_request_seq: Option<i64>,
    /// The invocation whose request waits for its response.
    pending: Option<usize>,
    /// Diagnostics found so far (record order).
    diags: Vec<Diagnostic>,
}

impl InvocationPairing {
    /// Takes record `index` (0-based, in file order; every record of the run is given, in
    /// order) and says what it is to the run's invocations.
    pub fn push(&mut self, index: usize, record: &Record) -> PairingStep {
        match record {
            Record::LlmRequest(q) => {
                if self.by_seq.contains_key(&q.seq) {
                    self.diags.push(
                        Diagnostic::warning(
                            DiagnosticKind::DuplicateSeq,
                            format!("llm.request seq {} appears more than once", q.seq),
                        )
                        .at(index)
                        .in_run(Some(&q.run_id)),
                    );
                } else if let Some(prev) = self.last_request_seq.filter(|p| q.seq <= *p) {
                    self.diags.push(
                        Diagnostic::warning(
                            DiagnosticKind::SeqNotIncreasing,
                            format!("llm.request seq {} follows seq {prev}", q.seq),
                        )
                        .at(index)
                        .in_run(Some(&q.run_id)),
                    );
                }
                let n = self.invocations.len();
                self.last_request_seq = Some(q.seq);
                self.by_seq.insert(q.seq, n);
                self.pending = Some(n);
                self.invocations.push(Pairing {
                    seq: q.seq,
                    request_record: Some(index),
                    unanswered_run: Some(q.run_id.clone()),
                    answered: false,
                });
                PairingStep::Request(n)
            }
            Record::LlmResponse(r) => {
                let open = self
                    .by_seq
                    .get(&r.seq)
                    .copied()
                    .and_then(|k| Some((k, self.invocations.get_mut(k)?)));
                match open {
                    Some((k, inv)) if !inv.answered => {
                        inv.answered = true;
                        inv.unanswered_run = None;
                        if self.pending == Some(k) {
                            self.pending = None;
                        }
                        PairingStep::Response(k)
                    }
                    Some(_) => {
                        self.diags.push(
                            Diagnostic::warning(
                                DiagnosticKind::DuplicateSeq,
                                format!("a second llm.response for seq {}", r.seq),
                            )
                            .at(index)
                            .in_run(Some(&r.run_id)),
                        );
                        PairingStep::DuplicateResponse
                    }
                    None => {
                        self.diags.push(
                            Diagnostic::warning(
                                DiagnosticKind::OrphanResponse,
                                format!("llm.response seq {} has no llm.request before it", r.seq),
                            )
                            .at(index)
                            .in_run(Some(&r.run_id)),
                        );
                        let n = self.invocations.len();
                        self.by_seq.insert(r.seq, n);
                        self.invocations.push(Pairing {
                            seq: r.seq,
                            request_record: None,
                            unanswered_run: None,
                            answered: true,
                        });
                        PairingStep::OrphanResponse(n)
                    }
                }
            }
            Record::AgentEvent(e) => match &e.event {
                AgentEvent::LlmRetry(_) => self
                    .pending
                    .or(self.invocations.len().checked_sub(1))
                    .map_or(PairingStep::Other, PairingStep::Retry),
                _ => PairingStep::Other,
            },
            _ => PairingStep::Other,
        }
    }

    /// Diagnostics found so far.
    pub(crate) fn found(&self) -> usize {
        self.diags.len()
    }

    /// The diagnostics: those found while pushing, then the missing responses.
    pub fn finish(self) -> Vec<Diagnostic> {
        let mut diags = self.diags;
        for inv in self.invocations {
            if !inv.answered {
                diags.push(
                    Diagnostic::note(
                        DiagnosticKind::MissingResponse,
                        format!("llm.request seq {} never got a response", inv.seq),
                    )
                    .at(inv.request_record.unwrap_or_default())
                    .in_run(Some(inv.unanswered_run.as_deref().unwrap_or_default())),
                );
            }
        }
        diags
    }
}

/// The invocations of one run's records, in order of their first record, plus diagnostics
/// (missing and orphan responses, duplicate or decreasing `seq`).
///
/// `records` are [`Record`]s, or the [`RecordLine`](session_schema::RecordLine)s of a
/// [`RunRead`] (`&run.records`). Cost: one pass over the records, no message decoding; the
/// result borrows `records`. The pairing is [`InvocationPairing`]'s, which checks a run fed
/// one record at a time.
pub fn invocations<R: AsRef<Record>>(records: &[R]) -> (Vec<Invocation<'_>>, Vec<Diagnostic>) {
    let mut out: Vec<Invocation<'_>> = Vec::new();
    let mut pairing = InvocationPairing::default();
    for (i, record) in records.iter().map(AsRef::as_ref).enumerate() {
        match (pairing.push(i, record), record) {
            (PairingStep::Request(_), Record::LlmRequest(q)) => out.push(Invocation {
                seq: q.seq,
                request: Some(q),
                request_record: Some(i),
                response: None,
                response_record: None,
                retries: Vec::new(),
            }),
            (PairingStep::Response(k), Record::LlmResponse(r)) => {
                if let Some(inv) = out.get_mut(k) {
                    inv.response = Some(r);
                    inv.response_record = Some(i);
                }
            }
            (PairingStep::OrphanResponse(_), Record::LlmResponse(r)) => out.push(Invocation {
                seq: r.seq,
                request: None,
                request_record: None,
                response: Some(r),
                response_record: Some(i),
                retries: Vec::new(),
            }),
            (PairingStep::Retry(k), Record::AgentEvent(e)) => {
                if let AgentEvent::LlmRetry(retry) = &e.event
                    && let Some(inv) = out.get_mut(k)
                {
                    inv.retries.push(Retry {
                        record: i,
                        ts: &e.ts,
                        event: retry,
                    });
                }
            }
            _ => {}
        }
    }
    (out, pairing.finish())
}

/// The invocations of a session's runs (given in `started_at` order), with one extra check
/// across runs: a `seq` reused by a later run (compat notes §5 item 10) is reported as
/// [`DiagnosticKind::DuplicateSeq`]. Record indices in diagnostics are per run; `run_id` says
/// which.
pub fn session_invocations(runs: &[RunRead]) -> (Vec<Invocation<'_>>, Vec<Diagnostic>) {
    let mut all = Vec::new();
    let mut diags = Vec::new();
    let mut seen: BTreeMap<i64, String> = BTreeMap::new();
    for run in runs {
        let meta = RunMeta::of(run);
        let (invs, d) = invocations(&run.records);
        diags.extend(d);
        for inv in invs {
            if inv.request.is_some() {
                if let Some(other) = seen.get(&inv.seq).filter(|o| **o != meta.run_id) {
                    diags.push(
                        Diagnostic::warning(
                            DiagnosticKind::DuplicateSeq,
                            format!("seq {} was already used by run {other}", inv.seq),
                        )
                        .at(inv.request_record.unwrap_or_default())
                        .in_run(Some(&meta.run_id)),
                    );
                }
                seen.insert(inv.seq, meta.run_id.clone());
            }
            all.push(inv);
        }
    }
    (all, diags)
}

/// The prompt of one invocation exactly as it was sent (spec §5: prompt-level replay uses the
/// `llm.request` snapshot).
#[derive(Debug, Clone)]
pub struct Prompt {
    /// The invocation number.
    pub seq: i64,
    /// The run it was sent in.
    pub run_id: String,
    /// Index of the `llm.request` record in the slice passed in.
    pub record: usize,
    /// When the request was written.
    pub ts: Timestamp,
    /// The messages as sent (decoded; elements that do not decode are left out and reported).
    pub messages: Vec<BaseMessage>,
    /// The messages array as written in the record, byte for byte except that a lone surrogate
    /// escape is `\ufffd` (records read by session-schema's line parsers already hold it so),
    /// so the text is strict JSON (docs/format.md "Lines").
    pub raw_messages: String,
    /// The tools offered (`None` for absent or `null`).
    pub tools: Option<Vec<ToolDefinition>>,
    /// The tool choice (`None` for absent or `null`).
    pub tool_choice: Option<ToolChoice>,
    /// `llm.request.model` (`{provider, name}`).
    pub model: Option<ModelInfo>,
    /// `llm.request.input.model`.
    pub input_model: Option<String>,
    /// `llm.request.input.session_key`.
    pub session_key: Option<String>,
    /// Set when the snapshot is over-inclusive: it already holds its own response (compat notes
    /// §5 item 9).
    pub over_inclusive: Option<OverInclusive>,
}

/// Where an over-inclusive snapshot's own response starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverInclusive {
    /// Index in the snapshot's messages where the invocation's own response begins; everything
    /// from here on was appended after the call was made.
    pub own_response_at: usize,
    /// Number of messages from `own_response_at` to the end (the response's messages plus any
    /// tool results answering its calls).
    pub appended: usize,
}

impl Prompt {
    /// The messages that were really in the history when the call was made: all of them, or,
    /// for an over-inclusive snapshot, those before its own response.
    pub fn corrected_messages(&self) -> &[BaseMessage] {
        match self.over_inclusive {
            Some(o) => &self.messages[..o.own_response_at.min(self.messages.len())],
            None => &self.messages,
        }
    }
}

/// The prompt of invocation `seq` (`None`: the last `llm.request`) in one run's records.
///
/// Only that request's messages (and its response's, to detect an over-inclusive snapshot) are
/// decoded, so the last prompt of a huge log costs one record's decode. Returns `None` (with a
/// [`DiagnosticKind::NoSuchInvocation`] diagnostic) when there is no such request; an
/// over-inclusive snapshot is reported as [`DiagnosticKind::OverInclusiveSnapshot`] and its
/// corrected prompt is [`Prompt::corrected_messages`].
///
/// # Examples
///
/// The reference serialized some requests only after the answer had been added to the history
/// (compat §5 item 9); such a snapshot ends with its own response, and the prompt really sent is
/// the corrected one.
///
/// ```
/// use session_replay::{DiagnosticKind, prompt_at};
/// use session_schema::parse_record;
///
/// let lines = [
///     r#"{"type":"header","schema_version":1,"run_id":"r1","session_id":"s1","started_at":"2026-02-03T12:00:00.000Z"}"#,
///     r#"{"type":"llm.request","run_id":"r1","ts":"2026-02-03T12:00:01.000Z","seq":7,"input":{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}],"tools":null,"tool_choice":null}}"#,
///     r#"{"type":"llm.response","run_id":"r1","ts":"2026-02-03T12:00:02.000Z","seq":7,"output":{"messages":[{"role":"assistant","content":"hello"}],"usage":null,"stop_reason":"end_turn","provider_meta":null}}"#,
/// ];
/// let records = lines
///     .iter()
///     .map(|l| parse_record(l.as_bytes()).map(|p| p.value))
///     .collect::<Result<Vec<_>, _>>()?;
///
/// let (prompt, diagnostics) = prompt_at(&records, Some(7));
/// let prompt = prompt.ok_or("no such invocation")?;
/// assert_eq!(prompt.raw_messages, r#"[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]"#);
/// assert_eq!(prompt.corrected_messages().len(), 1);
/// assert_eq!(diagnostics[0].kind, DiagnosticKind::OverInclusiveSnapshot);
///
/// // An invocation that does not exist is a diagnostic, not an error.
/// let (missing, diagnostics) = prompt_at(&records, Some(8));
/// assert!(missing.is_none());
/// assert_eq!(diagnostics[0].kind, DiagnosticKind::NoSuchInvocation);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn prompt_at<R: AsRef<Record>>(
    records: &[R],
    seq: Option<i64>,
) -> (Option<Prompt>, Vec<Diagnostic>) {
    let mut diags = Vec::new();
    let found = records
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, r)| match r.as_ref() {
            Record::LlmRequest(q) if seq.is_none_or(|s| s == q.seq) => Some((i, q)),
            _ => None,
        });
    let Some((index, request)) = found else {
        let what = match seq {
            Some(s) => format!("no llm.request with seq {s}"),
            None => "no llm.request in the run".to_owned(),
        };
        diags.push(Diagnostic::warning(DiagnosticKind::NoSuchInvocation, what));
        return (None, diags);
    };
    let response = records[index + 1..].iter().find_map(|r| match r.as_ref() {
        Record::LlmResponse(resp) if resp.seq == request.seq => Some(resp),
        _ => None,
    });

    let messages = decode_messages(
        request.input.messages.get(),
        index,
        &request.run_id,
        &mut diags,
    );
    let tools = match &request.input.tools {
        None => None,
        Some(lazy) => match lazy.parse() {
            Ok(t) => t,
            Err(e) => {
                diags.push(
                    Diagnostic::warning(
                        DiagnosticKind::Undecodable,
                        format!(
                            "tools of llm.request seq {} do not decode: {e}",
                            request.seq
                        ),
                    )
                    .at(index)
                    .in_run(Some(&request.run_id)),
                );
                None
            }
        },
    };
    let over_inclusive = response.and_then(|resp| {
        own_response_position(request.input.messages.get(), resp.output.messages.get())
    });
    if let Some(o) = over_inclusive {
        diags.push(over_inclusive_diagnostic(
            request.seq,
            &request.run_id,
            index,
            o,
        ));
    }
    let prompt = Prompt {
        seq: request.seq,
        run_id: request.run_id.clone(),
        record: index,
        ts: request.ts.clone(),
        messages,
        raw_messages: surrogate::repair_str(request.input.messages.get()).into_owned(),
        tools,
        tool_choice: request.input.tool_choice.clone().flatten(),
        model: request.model.clone(),
        input_model: request.input.model.clone(),
        session_key: request.input.session_key.clone(),
        over_inclusive,
    };
    (Some(prompt), diags)
}

fn over_inclusive_diagnostic(seq: i64, run_id: &str, index: usize, o: OverInclusive) -> Diagnostic {
    Diagnostic::warning(
        DiagnosticKind::OverInclusiveSnapshot,
        format!(
            "llm.request seq {seq} already holds its own response from message {} on ({} \
             appended message(s)); the prompt sent had {} message(s)",
            o.own_response_at, o.appended, o.own_response_at
        ),
    )
    .at(index)
    .in_run(Some(run_id))
}

/// Decodes a messages array, element by element when the whole does not decode. Lone
/// surrogate escapes (possible in records not read through session-schema's line parsers, which
/// repair them) decode as U+FFFD and are reported as [`DiagnosticKind::RepairedLine`]: the
/// message is kept.
fn decode_messages(
    raw: &str,
    index: usize,
    run_id: &str,
    diags: &mut Vec<Diagnostic>,
) -> Vec<BaseMessage> {
    if let Ok((all, repaired)) = surrogate::decode::<Vec<BaseMessage>>(raw) {
        if let Some(first) = repaired.first() {
            diags.push(
                Diagnostic::note(
                    DiagnosticKind::RepairedLine,
                    format!(
                        "{} lone surrogate escape(s) in the messages decoded as U+FFFD, first {} \
                         at byte {} of the messages array",
                        repaired.len(),
                        first.escape_str(),
                        first.offset
                    ),
                )
                .at(index)
                .in_run(Some(run_id)),
            );
        }
        return all;
    }
    let elems = match split_array(raw) {
        Ok(e) => e,
        Err(e) => {
            diags.push(
                Diagnostic::warning(
                    DiagnosticKind::Undecodable,
                    format!("messages are not a JSON array: {e}"),
                )
                .at(index)
                .in_run(Some(run_id)),
            );
            return Vec::new();
        }
    };
    let mut out = Vec::with_capacity(elems.len());
    for (n, elem) in elems.iter().enumerate() {
        match surrogate::decode::<BaseMessage>(elem.get()) {
            Ok((m, repaired)) => {
                if let Some(first) = repaired.first() {
                    diags.push(
                        Diagnostic::note(
                            DiagnosticKind::RepairedLine,
                            format!(
                                "message {n}: {} lone surrogate escape(s) decoded as U+FFFD, \
                                 first {}",
                                repaired.len(),
                                first.escape_str()
                            ),
                        )
                        .at(index)
                        .in_run(Some(run_id)),
                    );
                }
                out.push(m);
            }
            Err(e) => diags.push(
                Diagnostic::warning(
                    DiagnosticKind::Undecodable,
                    format!("message {n} does not decode and is left out: {e}"),
                )
                .at(index)
                .in_run(Some(run_id)),
            ),
        }
    }
    out
}

/// The elements of a JSON array as raw text slices (no decoding of the elements).
pub(crate) fn split_array(raw: &str) -> Result<Vec<&RawValue>, serde_json::Error> {
    serde_json::from_str::<Vec<&RawValue>>(raw)
}

/// Whether two raw JSON values are the same value: identical text, or equal after decoding
/// (key order and spacing ignored).
pub(crate) fn same_json(a: &RawValue, b: &RawValue) -> bool {
    if a.get() == b.get() {
        return true;
    }
    match (
        surrogate::decode::<serde_json::Value>(a.get()),
        surrogate::decode::<serde_json::Value>(b.get()),
    ) {
        (Ok((x, _)), Ok((y, _))) => x == y,
        _ => false,
    }
}

/// Where a request snapshot holds its own response: the response's messages as a block,
/// followed only by tool messages answering the response's tool calls, up to the end.
///
/// Returns `None` when the response is empty or not found in that position.
pub fn own_response_position(
    request_messages: &str,
    response_messages: &str,
) -> Option<OverInclusive> {
    let req = split_array(request_messages).ok()?;
    let resp = split_array(response_messages).ok()?;
    own_response_position_split(&req, &resp)
}

pub(crate) fn own_response_position_split(
    req: &[&RawValue],
    resp: &[&RawValue],
) -> Option<OverInclusive> {
    if resp.is_empty() || req.len() < resp.len() {
        return None;
    }
    let call_ids: Vec<String> = resp
        .iter()
        .filter_map(|m| {
            surrogate::decode::<BaseMessage>(m.get())
                .ok()
                .map(|(m, _)| m)
        })
        .flat_map(|m| {
            m.tool_calls()
                .iter()
                .map(|c| c.id.clone())
                .collect::<Vec<_>>()
        })
        .collect();
    // The block can only start where every later message is an answering tool result.
    let mut start = req.len() - resp.len();
    loop {
        let block_matches = req[start..start + resp.len()]
            .iter()
            .zip(resp)
            .all(|(a, b)| same_json(a, b));
        if block_matches {
            return Some(OverInclusive {
                own_response_at: start,
                appended: req.len() - start,
            });
        }
        // Extend the tail by one message if it answers one of the response's calls.
        if start == 0 || call_ids.is_empty() {
            return None;
        }
        let last = req[start + resp.len() - 1];
        let answers = match surrogate::decode::<BaseMessage>(last.get()) {
            Ok((BaseMessage::Tool(t), _)) => call_ids.contains(&t.tool_call_id),
            _ => false,
        };
        if !answers {
            return None;
        }
        start -= 1;
    }
}

/// A break in snapshot continuity: a request whose messages do not extend the previous
/// request's messages in the same run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Divergence {
    /// The request's seq.
    pub seq: i64,
    /// Index of its record.
    pub record: usize,
    /// The previous request's seq.
    pub previous_seq: i64,
    /// Index of the previous request's record.
    pub previous_record: usize,
    /// First message index at which the two differ (equal to the new request's length when it
    /// is a strict prefix of the previous one, i.e. messages were dropped).
    pub message_index: usize,
    /// Number of messages in the previous request.
    pub previous_len: usize,
    /// Number of messages in this request.
    pub len: usize,
}

/// The result of [`check_snapshots`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SnapshotReport {
    /// Number of `llm.request` records seen.
    pub requests: usize,
    /// Number of consecutive request pairs compared.
    pub compared: usize,
    /// Seqs whose snapshot holds its own response.
    pub over_inclusive: Vec<i64>,
    /// Seqs whose snapshot starts over after a compaction (expected).
    pub resets_after_compaction: Vec<i64>,
    /// Breaks in continuity not explained by a compaction.
    pub divergences: Vec<Divergence>,
}

impl SnapshotReport {
    /// Whether every snapshot extends its predecessor or is explained by a compaction.
    pub fn is_continuous(&self) -> bool {
        self.divergences.is_empty()
    }
}

/// The previous request, as [`SnapshotCheck`] keeps it.
#[derive(Debug, Clone)]
struct PreviousRequest {
    seq: i64,
    record: usize,
    /// Its messages array as written.
    raw: Arc<str>,
    /// Its number of messages.
    len: usize,
}

/// A request whose over-inclusive check waits for the first response of its seq.
#[derive(Debug, Clone)]
struct WaitingRequest {
    record: usize,
    run_id: String,
    /// Its messages array as written (shared with [`PreviousRequest`] while it is the
    /// previous request).
    raw: Arc<str>,
    /// When it extends the previous request element for element: the previous request's
    /// number of messages and where the appended ones are.
    extends: Option<(usize, Appended)>,
}

/// Checks the request snapshots of one run fed one record at a time (spec §5): the one
/// implementation behind [`check_snapshots`], for runs that are never held whole.
///
/// It keeps the previous request's messages text (one request's, the run's longest line at
/// most), the seqs that had a response, and the requests still waiting for the first response
/// of their seq: the over-inclusive check of a request needs that response (when it comes
/// after the request), so it runs when the response arrives; a request whose response comes
/// before the next request costs nothing more, one whose response never comes (a failed
/// call) keeps its text to the end, and so does every request answered only after a later
/// one (which a runtime does not write). Continuity
/// (divergences, resets after a compaction, undecodable snapshots) is decided at the request.
/// [`finish`](Self::finish) gives the report and the diagnostics in record order, as
/// [`check_snapshots`] does.
#[derive(Debug, Clone, Default)]
pub struct SnapshotCheck {
    report: SnapshotReport,
    /// Diagnostics with the order they were found in (sorted by record at the end).
    diags: Vec<Diagnostic>,
    /// `(record, seq)` of over-inclusive requests, in the order they were decided.
    over_inclusive: Vec<(usize, i64)>,
    /// Seqs that had an `llm.response`.
    responded: BTreeSet<i64>,
    /// Requests waiting for the first response of their seq.
    waiting: BTreeMap<i64, Vec<WaitingRequest>>,
    previous: Option<PreviousRequest>,
    /// Whether a compaction completed since the previous request.
    compacted: bool,
}

impl SnapshotCheck {
    /// Takes record `index` (0-based; every record of the run, in file order).
    pub fn push(&mut self, index: usize, record: &Record) {
        match record {
            Record::AgentEvent(e) => {
                if let AgentEvent::CompactionComplete(c) = &e.event
                    && c.compacted == Some(true)
                {
                    self.compacted = true;
                }
            }
            Record::LlmResponse(resp) => {
                if !self.responded.insert(resp.seq) {
                    return;
                }
                // The first response of its seq: the one every request of that seq before it
                // is checked against.
                let Some(waiting) = self.waiting.remove(&resp.seq) else {
                    return;
                };
                let Ok(answer) = split_array(resp.output.messages.get()) else {
                    return;
                };
                for w in waiting {
                    if let Some(o) = own_response_of(&w, &answer) {
                        self.over_inclusive.push((w.record, resp.seq));
                        self.diags
                            .push(over_inclusive_diagnostic(resp.seq, &w.run_id, w.record, o));
                    }
                }
            }
            Record::LlmRequest(q) => self.request(index, q),
            _ => {}
        }
    }

    /// Diagnostics found so far.
    pub(crate) fn found(&self) -> usize {
        self.diags.len()
    }

    fn request(&mut self, i: usize, q: &LlmRequest) {
        self.report.requests += 1;
        let raw = q.input.messages.get();
        // Fast path: the previous snapshot's text is a prefix of this one, element for
        // element, so only the appended messages need splitting; such a request extends the
        // previous one.
        let fast = self.previous.as_ref().and_then(|prev| {
            let appended = appended_elements(&prev.raw, raw)?;
            let new = split_array(appended.text(raw).as_ref()).ok()?.len();
            Some((prev.len, appended, prev.len + new))
        });
        let (len, extends) = match fast {
            Some((prev_len, appended, len)) => {
                self.report.compared += 1;
                (len, Some((prev_len, appended)))
            }
            None => {
                let current = match split_array(raw) {
                    Ok(c) => c,
                    Err(e) => {
                        self.diags.push(
                            Diagnostic::warning(
                                DiagnosticKind::Undecodable,
                                format!(
                                    "messages of llm.request seq {} are not an array: {e}",
                                    q.seq
                                ),
                            )
                            .at(i)
                            .in_run(Some(&q.run_id)),
                        );
                        self.previous = None;
                        return;
                    }
                };
                if let Some(prev) = &self.previous {
                    self.report.compared += 1;
                    let before = split_array(&prev.raw).unwrap_or_default();
                    let d = first_divergence(&before, &current).map(|k| Divergence {
                        seq: q.seq,
                        record: i,
                        previous_seq: prev.seq,
                        previous_record: prev.record,
                        message_index: k,
                        previous_len: before.len(),
                        len: current.len(),
                    });
                    match d {
                        Some(_) if self.compacted => {
                            self.report.resets_after_compaction.push(q.seq);
                            self.diags.push(
                                Diagnostic::note(
                                    DiagnosticKind::SnapshotReset,
                                    format!(
                                        "llm.request seq {} starts a new history after compaction",
                                        q.seq
                                    ),
                                )
                                .at(i)
                                .in_run(Some(&q.run_id)),
                            );
                        }
                        Some(d) => {
                            self.diags.push(
                                Diagnostic::warning(
                                    DiagnosticKind::SnapshotDivergence,
                                    divergence_message(&d),
                                )
                                .at(i)
                                .in_run(Some(&q.run_id)),
                            );
                            self.report.divergences.push(d);
                        }
                        None => {}
                    }
                }
                (current.len(), None)
            }
        };
        let raw: Arc<str> = Arc::from(raw);
        // A response of this seq before the request leaves it without one (the first
        // response of a seq is the one a request is checked against).
        if !self.responded.contains(&q.seq) {
            self.waiting.entry(q.seq).or_default().push(WaitingRequest {
                record: i,
                run_id: q.run_id.clone(),
                raw: Arc::clone(&raw),
                extends,
            });
        }
        self.compacted = false;
        self.previous = Some(PreviousRequest {
            seq: q.seq,
            record: i,
            raw,
            len,
        });
    }

    /// The report and the diagnostics, in record order (a request's over-inclusive finding
    /// after its continuity finding).
    pub fn finish(self) -> (SnapshotReport, Vec<Diagnostic>) {
        let mut report = self.report;
        let mut over = self.over_inclusive;
        over.sort_by_key(|(record, _)| *record);
        report.over_inclusive = over.into_iter().map(|(_, seq)| seq).collect();
        let mut diags = self.diags;
        diags.sort_by_key(|d| d.record);
        (report, diags)
    }
}

/// Where a waiting request's snapshot holds its own response `answer` (split): among the
/// appended messages when the request extends the previous one by at least as many messages
/// as the answer has, else among all its messages.
fn own_response_of(w: &WaitingRequest, answer: &[&RawValue]) -> Option<OverInclusive> {
    if let Some((prev_len, appended)) = &w.extends {
        let text = appended.text(&w.raw);
        if let Ok(new) = split_array(text.as_ref())
            && new.len() >= answer.len()
        {
            return own_response_position_split(&new, answer).map(|o| OverInclusive {
                own_response_at: o.own_response_at + prev_len,
                appended: o.appended,
            });
        }
    }
    let current = split_array(&w.raw).ok()?;
    own_response_position_split(&current, answer)
}

/// Checks the request snapshots of one run (spec §5): each request's messages must extend the
/// previous request's messages, unless a `compaction_complete` with `compacted: true` happened
/// in between. Also finds over-inclusive snapshots (compat notes §5 item 9): a request whose
/// messages end with those of the first `llm.response` of its seq, when that response comes
/// after it.
///
/// Compares messages as raw JSON (decoding only when the text differs), so it reads every
/// request once but decodes almost nothing. [`SnapshotCheck`] fed every record.
pub fn check_snapshots<R: AsRef<Record>>(records: &[R]) -> (SnapshotReport, Vec<Diagnostic>) {
    let mut check = SnapshotCheck::default();
    for (i, r) in records.iter().map(AsRef::as_ref).enumerate() {
        check.push(i, r);
    }
    check.finish()
}

/// The first index at which `current` stops extending `prev` (its length when it is a strict
/// prefix of `prev`), or `None` when it extends it.
fn first_divergence(prev: &[&RawValue], current: &[&RawValue]) -> Option<usize> {
    let common = prev.len().min(current.len());
    (0..common)
        .find(|&k| !same_json(prev[k], current[k]))
        .or((current.len() < prev.len()).then_some(current.len()))
}

/// The messages a request appends to the previous one's (see [`appended_elements`]), as a
/// place in the request's own text, so nothing is copied until it is split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Appended {
    /// The previous array is empty: every element.
    All,
    /// No element.
    Nothing,
    /// The elements from this byte of the request's text on (just after a `,`).
    From(usize),
}

impl Appended {
    /// The appended elements as a JSON array text, given the request's text `cur`.
    fn text(self, cur: &str) -> std::borrow::Cow<'_, str> {
        match self {
            Appended::All => std::borrow::Cow::Borrowed(cur),
            Appended::Nothing => std::borrow::Cow::Borrowed("[]"),
            Appended::From(at) => {
                std::borrow::Cow::Owned(format!("[{}", cur.get(at..).unwrap_or("]")))
            }
        }
    }
}

/// When the JSON array text `cur` starts with every element of the array text `prev`, spelled
/// the same, says where the remaining elements are ([`Appended::text`] gives them as a JSON
/// array text, `"[]"` when there are none).
///
/// Sound without parsing: `prev` without its closing `]` is a prefix of `cur`, and what follows
/// in `cur` is `,` or `]`; a complete JSON value followed by `,` or `]` cannot continue, so the
/// element boundaries agree. Only compact spelling qualifies (anything else returns `None` and
/// takes the parsing path).
fn appended_elements(prev: &str, cur: &str) -> Option<Appended> {
    let body = prev.strip_suffix(']')?;
    if !body.starts_with('[') || !cur.starts_with('[') {
        return None;
    }
    if body == "[" {
        return Some(Appended::All);
    }
    if body.ends_with(|c: char| c.is_ascii_whitespace()) {
        return None;
    }
    let rest = cur.strip_prefix(body)?;
    if rest.starts_with(']') {
        Some(Appended::Nothing)
    } else {
        rest.strip_prefix(',')
            .map(|_| Appended::From(body.len() + 1))
    }
}

fn divergence_message(d: &Divergence) -> String {
    if d.message_index >= d.len {
        format!(
            "llm.request seq {} (record {}) has {} message(s), fewer than the {} of seq {} \
             (record {})",
            d.seq, d.record, d.len, d.previous_len, d.previous_seq, d.previous_record
        )
    } else {
        format!(
            "llm.request seq {} (record {}) message {} differs from message {} of seq {} \
             (record {})",
            d.seq, d.record, d.message_index, d.message_index, d.previous_seq, d.previous_record
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SYS: &str = r#"{"role":"system","content":"s"}"#;
    const USER: &str = r#"{"role":"user","content":"q"}"#;
    const CALL: &str = r#"{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"read","arguments":"{}"}}]}"#;
    const RESULT: &str = r#"{"role":"tool","tool_call_id":"c1","tool_name":"read","content":"x"}"#;
    const OK: &str = r#"{"role":"assistant","content":"ok"}"#;

    fn arr(items: &[&str]) -> String {
        format!("[{}]", items.join(","))
    }

    #[test]
    fn own_response_at_the_tail() {
        let o = own_response_position(&arr(&[SYS, USER, CALL]), &arr(&[CALL])).unwrap();
        assert_eq!((o.own_response_at, o.appended), (2, 1));
    }

    #[test]
    fn own_response_followed_by_its_tool_results() {
        let o = own_response_position(&arr(&[SYS, USER, CALL, RESULT]), &arr(&[CALL])).unwrap();
        assert_eq!((o.own_response_at, o.appended), (2, 2));
    }

    #[test]
    fn an_equal_message_earlier_in_the_history_is_not_the_own_response() {
        // "ok" answered an earlier turn; the request ends with a user message, so it is clean.
        assert_eq!(
            own_response_position(&arr(&[SYS, USER, OK, USER]), &arr(&[OK])),
            None
        );
        assert_eq!(own_response_position(&arr(&[SYS, USER]), &arr(&[])), None);
    }

    #[test]
    fn key_order_and_spacing_do_not_hide_the_own_response() {
        let reordered = r#"{"content": "ok", "role": "assistant"}"#;
        assert!(own_response_position(&arr(&[SYS, USER, reordered]), &arr(&[OK])).is_some());
    }

    fn request(seq: i64, messages: &str) -> Record {
        let line = format!(
            r#"{{"type":"llm.request","run_id":"r","ts":"2026-01-01T00:00:00.000Z","seq":{seq},"input":{{"messages":{messages},"tools":null,"tool_choice":null}}}}"#
        );
        session_schema::parse_record(line.as_bytes()).unwrap().value
    }

    fn response(seq: i64, messages: &str) -> Record {
        let line = format!(
            r#"{{"type":"llm.response","run_id":"r","ts":"2026-01-01T00:00:01.000Z","seq":{seq},"output":{{"messages":{messages},"usage":null,"stop_reason":null,"provider_meta":null}}}}"#
        );
        session_schema::parse_record(line.as_bytes()).unwrap().value
    }

    /// The report computed the slow way: split every snapshot and compare element by element.
    fn naive(records: &[Record]) -> (Vec<(i64, usize)>, Vec<i64>) {
        let mut divergences = Vec::new();
        let mut over = Vec::new();
        let mut prev: Option<Vec<&RawValue>> = None;
        for (i, r) in records.iter().enumerate() {
            let Record::LlmRequest(q) = r else { continue };
            let cur = split_array(q.input.messages.get()).unwrap();
            if let Some(p) = &prev
                && let Some(k) = first_divergence(p, &cur)
            {
                divergences.push((q.seq, k));
            }
            let resp = records[i + 1..].iter().find_map(|r| match r {
                Record::LlmResponse(x) if x.seq == q.seq => Some(x),
                _ => None,
            });
            if let Some(resp) = resp
                && own_response_position_split(
                    &cur,
                    &split_array(resp.output.messages.get()).unwrap(),
                )
                .is_some()
            {
                over.push(q.seq);
            }
            prev = Some(cur);
        }
        (divergences, over)
    }

    const ALPHABET: &[&str] = &[
        SYS,
        USER,
        CALL,
        RESULT,
        OK,
        r#"{ "role": "user", "content": "q" }"#,
    ];

    proptest::proptest! {
        /// The prefix fast path of `check_snapshots` agrees with splitting every snapshot.
        #[test]
        fn fast_path_agrees_with_splitting(
            steps in proptest::collection::vec(
                (proptest::collection::vec(0..ALPHABET.len(), 0..4), 0..3usize, proptest::collection::vec(0..ALPHABET.len(), 0..3)),
                1..6,
            )
        ) {
            let mut history: Vec<String> = Vec::new();
            let mut records = Vec::new();
            for (seq, (append, drop, answer)) in steps.iter().enumerate() {
                let seq = seq as i64 + 1;
                // Mostly extend; sometimes drop messages from the end (a divergence).
                history.truncate(history.len().saturating_sub(*drop % 3 / 2));
                history.extend(append.iter().map(|k| ALPHABET[*k].to_owned()));
                // A response is new: providers give every call a fresh id, so its messages
                // never repeat earlier history byte for byte (identical messages would make
                // "the snapshot ends with its own response" ambiguous).
                let answer: Vec<String> = answer
                    .iter()
                    .map(|k| {
                        ALPHABET[*k]
                            .replace("\"c1\"", &format!("\"c1-{seq}\""))
                            .replace("\"ok\"", &format!("\"ok-{seq}\""))
                            .replace("\"x\"", &format!("\"x-{seq}\""))
                            .replace("\"q\"", &format!("\"q-{seq}\""))
                            .replace("\"s\"", &format!("\"s-{seq}\""))
                    })
                    .collect();
                // Sometimes the snapshot already holds its own response.
                let mut snapshot = history.clone();
                if *drop == 2 {
                    snapshot.extend(answer.iter().cloned());
                }
                let snapshot_refs: Vec<&str> = snapshot.iter().map(String::as_str).collect();
                let answer_refs: Vec<&str> = answer.iter().map(String::as_str).collect();
                records.push(request(seq, &arr(&snapshot_refs)));
                records.push(response(seq, &arr(&answer_refs)));
                history = snapshot;
                history.extend(answer.iter().cloned());
            }
            let (report, _) = check_snapshots(&records);
            let (divergences, over) = naive(&records);
            let got: Vec<(i64, usize)> = report.divergences.iter().map(|d| (d.seq, d.message_index)).collect();
            proptest::prop_assert_eq!(got, divergences);
            proptest::prop_assert_eq!(report.over_inclusive, over);
        }
    }
}
