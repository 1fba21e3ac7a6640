//! `session.history`: a session's past runs replayed as UI events, with the reference's
//! semantics (compat notes §2.12 and §4 `history.test.ts`).
//!
//! * The runs are ordered by `header.started_at` (string order, as the reference sorts) and the
//!   newest `max_runs` are kept.
//! * Each `run.start` becomes a `hidden_user_message` event with `seq` -1 whose content is the
//!   input text (text parts concatenated, images as `[image]`); an empty input (a forced
//!   compaction run) gives no event.
//! * Every `agent.event` follows as written.
//! * Only the newest `max_events` events are kept; `truncated` says whether any were dropped.
//!
//! Deliberate deviation: the reference picks candidate runs by file mtime before sorting by
//! `started_at`; here the run list comes from the session-state run index, so the newest
//! `max_runs` by `started_at` are kept.

use session_schema::{AgentEvent, ContentEvent, Record, Timestamp};

use session_schema::RunRead;

use crate::run::RunMeta;

/// Limits of [`session_history`] (the reference's RPC parameters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryOptions {
    /// At most this many runs, the newest (default 20).
    pub max_runs: usize,
    /// At most this many events, the newest (default 1500).
    pub max_events: usize,
}

impl Default for HistoryOptions {
    fn default() -> Self {
        HistoryOptions {
            max_runs: 20,
            max_events: 1500,
        }
    }
}

/// One replayed event.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryEvent {
    /// The run it comes from.
    pub run_id: String,
    /// `agent.event.seq`, or -1 for a `hidden_user_message`.
    pub seq: i64,
    /// The event as written (or the synthesized `hidden_user_message`).
    pub event: AgentEvent,
}

/// The answer of [`session_history`] (`{runs, events_sent, truncated}` plus the events).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionHistory {
    /// Number of runs replayed.
    pub runs: usize,
    /// Number of events returned.
    pub events_sent: usize,
    /// Whether older events were dropped to respect `max_events`.
    pub truncated: bool,
    /// The events, oldest first.
    pub events: Vec<HistoryEvent>,
}

/// Replays a session's runs as `session.history` does (see the module docs). `runs` may be in
/// any order; runs whose records are empty still count as replayed runs, as a run file with
/// only a header does in the reference.
pub fn session_history(runs: &[RunRead], options: HistoryOptions) -> SessionHistory {
    let mut order: Vec<(Timestamp, &RunRead)> = runs
        .iter()
        .map(|r| (RunMeta::of(r).started_at, r))
        .collect();
    // Newest first to apply max_runs, then oldest first for replay (stable on ties).
    order.sort_by(|(a, _), (b, _)| b.as_str().cmp(a.as_str()));
    order.truncate(options.max_runs);
    order.reverse();

    let mut events = Vec::new();
    for (_, run) in &order {
        for record in run.record_values() {
            match record {
                Record::RunStart(s) => {
                    let text = s.input.display_text();
                    if !text.is_empty() {
                        events.push(HistoryEvent {
                            run_id: s.run_id.clone(),
                            seq: -1,
                            event: AgentEvent::HiddenUserMessage(ContentEvent {
                                content: Some(text),
                                ..Default::default()
                            }),
                        });
                    }
                }
                Record::AgentEvent(e) => events.push(HistoryEvent {
                    run_id: e.run_id.clone(),
                    seq: e.seq,
                    event: e.event.clone(),
                }),
                _ => {}
            }
        }
    }
    let truncated = events.len() > options.max_events;
    if truncated {
        events.drain(..events.len() - options.max_events);
    }
    SessionHistory {
        runs: order.len(),
        events_sent: events.len(),
        truncated,
        events,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use session_schema::parse_record;

    fn run(lines: &[&str]) -> RunRead {
        RunRead::from_records(
            lines
                .iter()
                .map(|l| parse_record(l.as_bytes()).unwrap().value),
        )
    }

    /// history.test.ts 8: two runs, `max_events: 2` → the newer run's hidden user message and
    /// its `final`, `truncated: true`.
    #[test]
    fn max_events_keeps_the_newest() {
        let a = run(&[
            r#"{"type":"header","schema_version":1,"run_id":"a","session_id":"s","started_at":"2026-01-01T00:00:00.000Z"}"#,
            r#"{"type":"run.start","run_id":"a","session_id":"s","ts":"2026-01-01T00:00:00.001Z","input":{"type":"text","text":"one"}}"#,
            r#"{"type":"agent.event","run_id":"a","ts":"2026-01-01T00:00:01.000Z","seq":0,"event":{"type":"final","content":"1"}}"#,
        ]);
        let b = run(&[
            r#"{"type":"header","schema_version":1,"run_id":"b","session_id":"s","started_at":"2026-01-02T00:00:00.000Z"}"#,
            r#"{"type":"run.start","run_id":"b","session_id":"s","ts":"2026-01-02T00:00:00.001Z","input":{"type":"text","text":"two"}}"#,
            r#"{"type":"agent.event","run_id":"b","ts":"2026-01-02T00:00:01.000Z","seq":0,"event":{"type":"final","text":"verbatim"}}"#,
        ]);
        let h = session_history(
            &[b, a],
            HistoryOptions {
                max_events: 2,
                ..HistoryOptions::default()
            },
        );
        assert_eq!((h.runs, h.events_sent, h.truncated), (2, 2, true));
        assert_eq!(h.events[0].seq, -1);
        assert_eq!(h.events[0].run_id, "b");
        // Events pass through untouched, even with an unexpected shape.
        let AgentEvent::Final(f) = &h.events[1].event else {
            panic!("{:?}", h.events[1])
        };
        assert_eq!(f.extra.get("text").map(|v| v.get()), Some("\"verbatim\""));
    }

    /// history.test.ts 9: parts input → "check this [image] please".
    #[test]
    fn parts_input_renders_images() {
        let r = run(&[
            r#"{"type":"header","schema_version":1,"run_id":"a","session_id":"s","started_at":"2026-01-01T00:00:00.000Z"}"#,
            r#"{"type":"run.start","run_id":"a","session_id":"s","ts":"2026-01-01T00:00:00.001Z","input":{"type":"parts","parts":[{"type":"text","text":"check this "},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}},{"type":"text","text":" please"}]}}"#,
        ]);
        let h = session_history(&[r], HistoryOptions::default());
        let AgentEvent::HiddenUserMessage(m) = &h.events[0].event else {
            panic!()
        };
        assert_eq!(m.content.as_deref(), Some("check this [image] please"));
    }
}
