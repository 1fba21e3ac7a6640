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

use std::collections::BTreeMap;

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

/// The invocations of one run's records, in order of their first record, plus diagnostics
/// (missing and orphan responses, duplicate or decreasing `seq`).
///
/// `records` are [`Record`]s, or the [`RecordLine`](session_schema::RecordLine)s of a
/// [`RunRead`] (`&run.records`). Cost: one pass over the records, no message decoding; the
/// result borrows `records`.
pub fn invocations<R: AsRef<Record>>(records: &[R]) -> (Vec<Invocation<'_>>, Vec<Diagnostic>) {
    let mut out: Vec<Invocation<'_>> = Vec::new();
    let mut diags = Vec::new();
    // seq -> index in `out` of the latest invocation with that seq.
    let mut by_seq: BTreeMap<i64, usize> = BTreeMap::new();
    let mut last_request_seq: Option<i64> = None;
    let mut pending: Option<usize> = None;
    for (i, record) in records.iter().map(AsRef::as_ref).enumerate() {
        match record {
            Record::LlmRequest(q) => {
                if by_seq.contains_key(&q.seq) {
                    diags.push(
                        Diagnostic::warning(
                            DiagnosticKind::DuplicateSeq,
                            format!("llm.request seq {} appears more than once", q.seq),
                        )
                        .at(i)
                        .in_run(Some(&q.run_id)),
                    );
                } else if let Some(prev) = last_request_seq.filter(|p| q.seq <= *p) {
                    diags.push(
                        Diagnostic::warning(
                            DiagnosticKind::SeqNotIncreasing,
                            format!("llm.request seq {} follows seq {prev}", q.seq),
                        )
                        .at(i)
                        .in_run(Some(&q.run_id)),
                    );
                }
                last_request_seq = Some(q.seq);
                by_seq.insert(q.seq, out.len());
                pending = Some(out.len());
                out.push(Invocation {
                    seq: q.seq,
                    request: Some(q),
                    request_record: Some(i),
                    response: None,
                    response_record: None,
                    retries: Vec::new(),
                });
            }
            Record::LlmResponse(r) => match by_seq.get(&r.seq).copied() {
                Some(k) if out[k].response.is_none() => {
                    out[k].response = Some(r);
                    out[k].response_record = Some(i);
                    if pending == Some(k) {
                        pending = None;
                    }
                }
                Some(_) => diags.push(
                    Diagnostic::warning(
                        DiagnosticKind::DuplicateSeq,
                        format!("a second llm.response for seq {}", r.seq),
                    )
                    .at(i)
                    .in_run(Some(&r.run_id)),
                ),
                None => {
                    diags.push(
                        Diagnostic::warning(
                            DiagnosticKind::OrphanResponse,
                            format!("llm.response seq {} has no llm.request before it", r.seq),
                        )
                        .at(i)
                        .in_run(Some(&r.run_id)),
                    );
                    by_seq.insert(r.seq, out.len());
                    out.push(Invocation {
                        seq: r.seq,
                        request: None,
                        request_record: None,
                        response: Some(r),
                        response_record: Some(i),
                        retries: Vec::new(),
                    });
                }
            },
            Record::AgentEvent(e) => {
                if let AgentEvent::LlmRetry(retry) = &e.event
                    && let Some(k) = pending.or(out.len().checked_sub(1))
                {
                    out[k].retries.push(Retry {
                        record: i,
                        ts: &e.ts,
                        event: retry,
                    });
                }
            }
            _ => {}
        }
    }
    for inv in &out {
        if inv.response.is_none() {
            diags.push(
                Diagnostic::note(
                    DiagnosticKind::MissingResponse,
                    format!("llm.request seq {} never got a response", inv.seq),
                )
                .at(inv.request_record.unwrap_or_default())
                .in_run(Some(inv.run_id())),
            );
        }
    }
    (out, diags)
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
        diags.push(over_inclusive_diagnostic(request, index, o));
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

fn over_inclusive_diagnostic(request: &LlmRequest, index: usize, o: OverInclusive) -> Diagnostic {
    Diagnostic::warning(
        DiagnosticKind::OverInclusiveSnapshot,
        format!(
            "llm.request seq {} already holds its own response from message {} on ({} appended \
             message(s)); the prompt sent had {} message(s)",
            request.seq, o.own_response_at, o.appended, o.own_response_at
        ),
    )
    .at(index)
    .in_run(Some(&request.run_id))
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

/// Checks the request snapshots of one run (spec §5): each request's messages must extend the
/// previous request's messages, unless a `compaction_complete` with `compacted: true` happened
/// in between. Also finds over-inclusive snapshots (compat notes §5 item 9).
///
/// Compares messages as raw JSON (decoding only when the text differs), so it reads every
/// request once but decodes almost nothing.
pub fn check_snapshots<R: AsRef<Record>>(records: &[R]) -> (SnapshotReport, Vec<Diagnostic>) {
    let mut report = SnapshotReport::default();
    let mut diags = Vec::new();
    let mut responses: BTreeMap<i64, usize> = BTreeMap::new();
    for (i, r) in records.iter().map(AsRef::as_ref).enumerate() {
        if let Record::LlmResponse(resp) = r {
            responses.entry(resp.seq).or_insert(i);
        }
    }
    // (seq, record index, raw messages text, number of messages) of the previous request.
    let mut previous: Option<(i64, usize, &str, usize)> = None;
    let mut compacted = false;
    for (i, r) in records.iter().map(AsRef::as_ref).enumerate() {
        match r {
            Record::AgentEvent(e) => {
                if let AgentEvent::CompactionComplete(c) = &e.event
                    && c.compacted == Some(true)
                {
                    compacted = true;
                }
            }
            Record::LlmRequest(q) => {
                report.requests += 1;
                let raw = q.input.messages.get();
                let response = responses.get(&q.seq).filter(|ri| **ri > i).and_then(|ri| {
                    match records[*ri].as_ref() {
                        Record::LlmResponse(resp) => split_array(resp.output.messages.get()).ok(),
                        _ => None,
                    }
                });
                // Fast path: the previous snapshot's text is a prefix of this one, element for
                // element, so only the appended messages need splitting.
                let fast = previous.and_then(|(_, _, prev_raw, prev_len)| {
                    let appended = appended_elements(prev_raw, raw)?;
                    let new = split_array(&appended).ok()?;
                    let own = match &response {
                        Some(resp) if new.len() >= resp.len() => Some(
                            own_response_position_split(&new, resp).map(|o| OverInclusive {
                                own_response_at: o.own_response_at + prev_len,
                                appended: o.appended,
                            }),
                        ),
                        Some(_) => None,
                        None => Some(None),
                    }?;
                    Some((prev_len + new.len(), own))
                });
                let (len, own) = match fast {
                    Some((len, own)) => {
                        report.compared += 1;
                        (len, own)
                    }
                    None => {
                        let current = match split_array(raw) {
                            Ok(c) => c,
                            Err(e) => {
                                diags.push(
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
                                previous = None;
                                continue;
                            }
                        };
                        if let Some((pseq, pidx, prev_raw, _)) = previous {
                            report.compared += 1;
                            let prev = split_array(prev_raw).unwrap_or_default();
                            let d = first_divergence(&prev, &current).map(|k| Divergence {
                                seq: q.seq,
                                record: i,
                                previous_seq: pseq,
                                previous_record: pidx,
                                message_index: k,
                                previous_len: prev.len(),
                                len: current.len(),
                            });
                            match d {
                                Some(_) if compacted => {
                                    report.resets_after_compaction.push(q.seq);
                                    diags.push(
                                        Diagnostic::note(
                                            DiagnosticKind::SnapshotReset,
                                            format!(
                                                "llm.request seq {} starts a new history after \
                                                 compaction",
                                                q.seq
                                            ),
                                        )
                                        .at(i)
                                        .in_run(Some(&q.run_id)),
                                    );
                                }
                                Some(d) => {
                                    diags.push(
                                        Diagnostic::warning(
                                            DiagnosticKind::SnapshotDivergence,
                                            divergence_message(&d),
                                        )
                                        .at(i)
                                        .in_run(Some(&q.run_id)),
                                    );
                                    report.divergences.push(d);
                                }
                                None => {}
                            }
                        }
                        let own = response
                            .as_ref()
                            .and_then(|resp| own_response_position_split(&current, resp));
                        (current.len(), own)
                    }
                };
                if let Some(o) = own {
                    report.over_inclusive.push(q.seq);
                    diags.push(over_inclusive_diagnostic(q, i, o));
                }
                compacted = false;
                previous = Some((q.seq, i, raw, len));
            }
            _ => {}
        }
    }
    (report, diags)
}

/// The first index at which `current` stops extending `prev` (its length when it is a strict
/// prefix of `prev`), or `None` when it extends it.
fn first_divergence(prev: &[&RawValue], current: &[&RawValue]) -> Option<usize> {
    let common = prev.len().min(current.len());
    (0..common)
        .find(|&k| !same_json(prev[k], current[k]))
        .or((current.len() < prev.len()).then_some(current.len()))
}

/// When the JSON array text `cur` starts with every element of the array text `prev`, spelled
/// the same, returns the remaining elements as a JSON array text (`"[]"` when there are none).
///
/// Sound without parsing: `prev` without its closing `]` is a prefix of `cur`, and what follows
/// in `cur` is `,` or `]`; a complete JSON value followed by `,` or `]` cannot continue, so the
/// element boundaries agree. Only compact spelling qualifies (anything else returns `None` and
/// takes the parsing path).
fn appended_elements(prev: &str, cur: &str) -> Option<String> {
    let body = prev.strip_suffix(']')?;
    if !body.starts_with('[') || !cur.starts_with('[') {
        return None;
    }
    if body == "[" {
        return Some(cur.to_owned());
    }
    if body.ends_with(|c: char| c.is_ascii_whitespace()) {
        return None;
    }
    let rest = cur.strip_prefix(body)?;
    if rest.starts_with(']') {
        Some("[]".to_owned())
    } else {
        rest.strip_prefix(',').map(|r| format!("[{r}"))
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
