//! Usage statistics over runs: tokens per invocation, run, session, model and day; run
//! durations; tool call counts and error rates (spec §3 `llm.response.output.usage`,
//! `tool.output`, `run.end`).

use std::collections::BTreeMap;

use session_schema::{AgentEvent, Record, RunRead, Usage};

use crate::invocation::invocations;
use crate::run::RunMeta;

/// Token counts (compat notes §1.5). Absent or `null` counts add 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tokens {
    /// `input_tokens`.
    pub input: u64,
    /// `input_cached_tokens`.
    pub cached: u64,
    /// `input_cache_creation_tokens`.
    pub cache_creation: u64,
    /// `output_tokens`.
    pub output: u64,
    /// `total_tokens`.
    pub total: u64,
    /// Number of invocations counted (responses with usage).
    pub invocations: u64,
}

impl Tokens {
    /// The counts of one usage record.
    pub fn from_usage(u: &Usage) -> Tokens {
        Tokens {
            input: u.input_tokens,
            cached: u.input_cached_tokens.flatten().unwrap_or(0),
            cache_creation: u.input_cache_creation_tokens.flatten().unwrap_or(0),
            output: u.output_tokens,
            total: u.total_tokens,
            invocations: 1,
        }
    }

    /// Adds another count (saturating).
    pub fn add(&mut self, o: &Tokens) {
        self.input = self.input.saturating_add(o.input);
        self.cached = self.cached.saturating_add(o.cached);
        self.cache_creation = self.cache_creation.saturating_add(o.cache_creation);
        self.output = self.output.saturating_add(o.output);
        self.total = self.total.saturating_add(o.total);
        self.invocations = self.invocations.saturating_add(o.invocations);
    }
}

/// Usage of one invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvocationStats {
    /// The run.
    pub run_id: String,
    /// The invocation number.
    pub seq: i64,
    /// Model (usage `model`, else the request's model name).
    pub model: Option<String>,
    /// Tokens (zero with `invocations: 0` when there is no usage).
    pub tokens: Tokens,
    /// Request-to-response time in milliseconds.
    pub duration_ms: Option<i64>,
    /// Number of `llm.retry` events.
    pub retries: usize,
    /// Whether the request never got a response.
    pub missing_response: bool,
}

/// Totals of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunStats {
    /// The run.
    pub run_id: String,
    /// Its session.
    pub session_id: Option<String>,
    /// `header.started_at`.
    pub started_at: String,
    /// `run.end.outcome`, `None` when the run has no `run.end`.
    pub outcome: Option<String>,
    /// Milliseconds from `started_at` to `run.end` (or to the last record with a timestamp when
    /// the run did not end).
    pub duration_ms: Option<i64>,
    /// Number of invocations.
    pub invocations: usize,
    /// Invocations without a response.
    pub missing_responses: usize,
    /// Tokens.
    pub tokens: Tokens,
    /// Tool calls (`tool_call` events).
    pub tool_calls: u64,
    /// Tool results flagged `is_error` (`tool.output`, else `tool_result`).
    pub tool_errors: u64,
}

/// Per-tool counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ToolStats {
    /// Calls (`tool_call` events, else `tool.output` records).
    pub calls: u64,
    /// Results flagged as errors.
    pub errors: u64,
    /// Calls with no result recorded (cancel or crash).
    pub without_result: u64,
}

impl ToolStats {
    /// `errors / calls`, 0 without calls.
    pub fn error_rate(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.errors as f64 / self.calls as f64
        }
    }
}

/// Statistics over a set of runs.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Stats {
    /// Every invocation, in run order then seq order.
    pub invocations: Vec<InvocationStats>,
    /// Every run, in the order given.
    pub runs: Vec<RunStats>,
    /// Tokens per session id (runs without a session under `""`).
    pub by_session: BTreeMap<String, Tokens>,
    /// Tokens per model.
    pub by_model: BTreeMap<String, Tokens>,
    /// Tokens per UTC day (`YYYY-MM-DD` of the response's `ts`).
    pub by_day: BTreeMap<String, Tokens>,
    /// Counts per tool name.
    pub by_tool: BTreeMap<String, ToolStats>,
    /// Grand total.
    pub total: Tokens,
}

/// Computes [`Stats`] over `runs`.
pub fn stats(runs: &[RunRead]) -> Stats {
    let mut s = Stats::default();
    for run in runs {
        let meta = RunMeta::of(run);
        let (invs, _) = invocations(&run.records);
        let mut run_tokens = Tokens::default();
        let mut missing = 0;
        for inv in &invs {
            let tokens = inv.usage().map(Tokens::from_usage).unwrap_or_default();
            let model = inv.model_name().map(str::to_owned);
            if inv.usage().is_some() {
                run_tokens.add(&tokens);
                s.total.add(&tokens);
                s.by_model
                    .entry(model.clone().unwrap_or_default())
                    .or_default()
                    .add(&tokens);
                if let Some(day) = inv.responded_at().and_then(|t| t.parse()).map(|dt| {
                    session_schema::Timestamp::from_datetime(dt).as_str()[..10].to_owned()
                }) {
                    s.by_day.entry(day).or_default().add(&tokens);
                }
            }
            if inv.missing_response() {
                missing += 1;
            }
            s.invocations.push(InvocationStats {
                run_id: inv.run_id().to_owned(),
                seq: inv.seq,
                model,
                tokens,
                duration_ms: inv.duration_ms(),
                retries: inv.retries.len(),
                missing_response: inv.missing_response(),
            });
        }
        s.by_session
            .entry(meta.session_id.clone().unwrap_or_default())
            .or_default()
            .add(&run_tokens);

        let (tool_calls, tool_errors) = tool_counts(run.record_values(), &mut s.by_tool);
        let end = run.record_values().rev().find_map(|r| match r {
            Record::RunEnd(e) => Some(e),
            _ => None,
        });
        let start_ms = meta.started_at.unix_millis();
        let end_ms = match end {
            Some(e) => e.ts.unix_millis(),
            None => run
                .record_values()
                .rev()
                .find_map(|r| r.ts().and_then(|t| t.unix_millis())),
        };
        s.runs.push(RunStats {
            run_id: meta.run_id.clone(),
            session_id: meta.session_id.clone(),
            started_at: meta.started_at.as_str().to_owned(),
            outcome: end.map(|e| e.outcome.as_str().to_owned()),
            duration_ms: start_ms.zip(end_ms).map(|(a, b)| b - a),
            invocations: invs.len(),
            missing_responses: missing,
            tokens: run_tokens,
            tool_calls,
            tool_errors,
        });
    }
    s
}

/// Counts tool calls and errors of one run into `by_tool`; returns the run's (calls, errors).
fn tool_counts<'a>(
    records: impl Iterator<Item = &'a Record>,
    by_tool: &mut BTreeMap<String, ToolStats>,
) -> (u64, u64) {
    // call id -> (tool, result seen, error)
    let mut calls: BTreeMap<String, (String, bool, bool)> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    for r in records {
        match r {
            Record::AgentEvent(e) => match &e.event {
                AgentEvent::ToolCall(c) => {
                    let id = c.tool_call_id.clone().unwrap_or_default();
                    if !calls.contains_key(&id) {
                        order.push(id.clone());
                    }
                    calls
                        .entry(id)
                        .or_insert_with(|| (c.tool.clone().unwrap_or_default(), false, false));
                }
                AgentEvent::ToolResult(t) => {
                    let id = t.tool_call_id.clone().unwrap_or_default();
                    if !calls.contains_key(&id) {
                        order.push(id.clone());
                    }
                    let entry = calls
                        .entry(id)
                        .or_insert_with(|| (t.tool.clone().unwrap_or_default(), false, false));
                    entry.1 = true;
                    entry.2 |= t.is_error == Some(true);
                }
                _ => {}
            },
            Record::ToolOutput(o) => {
                if !calls.contains_key(&o.tool_call_id) {
                    order.push(o.tool_call_id.clone());
                }
                let entry = calls
                    .entry(o.tool_call_id.clone())
                    .or_insert_with(|| (o.tool.clone(), false, false));
                entry.1 = true;
                entry.2 |= o.is_error == Some(true);
            }
            _ => {}
        }
    }
    let (mut n, mut errors) = (0, 0);
    for id in order {
        if let Some((tool, result, error)) = calls.get(&id) {
            let t = by_tool.entry(tool.clone()).or_default();
            t.calls += 1;
            n += 1;
            if *error {
                t.errors += 1;
                errors += 1;
            }
            if !*result {
                t.without_result += 1;
            }
        }
    }
    (n, errors)
}
