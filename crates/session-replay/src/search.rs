//! What full-text search indexes: the searchable documents of run records and of saved
//! session messages (`sessions search`, docs/format.md "search.db").
//!
//! Pure functions over session-schema values, shared by every search backend (the local
//! `search.db` and a database backend) so that the same record yields the same documents
//! everywhere. A document is one piece of text of one kind taken from one record (or one saved
//! message); it is keyed by where that record starts, so a hit opens the transcript there.
//!
//! Indexed: the user's input (`run.start`), assistant and reasoning text (`agent.event` `text`
//! / `reasoning`), tool-call arguments (`agent.event` `tool_call`, prefixed with the tool's
//! name), tool output (`tool.output.result_raw`; the `tool_result` event's text only for a call
//! whose `tool.output` this extractor did not see), final answers (`agent.event` `final`, else
//! `run.end.final_text`). Never the `llm.request` snapshots: each repeats the whole history.

use session_schema::{AgentEvent, BaseMessage, Record};
use std::collections::BTreeSet;

/// The record types [`Extractor::documents`] takes documents from; every other record
/// (`header`, `llm.request`, `llm.response`, statuses, contexts, errors, unknown types) gives
/// none, so a reader feeding the extractor may pass their lines over unparsed
/// (session-jsonl's `Reader::parse_only`).
pub const INDEXED_RECORD_TYPES: &[&str] = &["run.start", "agent.event", "tool.output", "run.end"];

/// Most bytes of one record's tool output that are indexed (64 KiB). Longer output is cut at
/// the last character boundary before this many bytes; the rest of it is not searchable.
pub const TOOL_OUTPUT_CAP: usize = 64 * 1024;

/// Most bytes of any other single document (user input, assistant text, arguments, …) that
/// are indexed (256 KiB), cut the same way.
pub const TEXT_CAP: usize = 256 * 1024;

/// Which part of a conversation a document holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum DocKind {
    /// What the user typed (`run.start.input`, a saved user message).
    User,
    /// Assistant text (`text` events, saved assistant messages).
    Assistant,
    /// Reasoning text.
    Reasoning,
    /// A tool call: the tool's name, a space, its arguments as written.
    ToolCall,
    /// A tool's output, capped at [`TOOL_OUTPUT_CAP`] bytes.
    ToolOutput,
    /// The run's final answer.
    Final,
}

impl DocKind {
    /// Every kind, in the order above.
    pub const ALL: [DocKind; 6] = [
        DocKind::User,
        DocKind::Assistant,
        DocKind::Reasoning,
        DocKind::ToolCall,
        DocKind::ToolOutput,
        DocKind::Final,
    ];

    /// The kind's name as `--kind` takes it and `search.db` stores it: `user`, `assistant`,
    /// `reasoning`, `tool-call`, `tool-output`, `final`.
    pub fn as_str(self) -> &'static str {
        match self {
            DocKind::User => "user",
            DocKind::Assistant => "assistant",
            DocKind::Reasoning => "reasoning",
            DocKind::ToolCall => "tool-call",
            DocKind::ToolOutput => "tool-output",
            DocKind::Final => "final",
        }
    }

    /// The kind named `s` ([`DocKind::as_str`]), `None` for any other text.
    pub fn parse(s: &str) -> Option<DocKind> {
        DocKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// One searchable piece of text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    /// Byte offset of the record (or saved message line) it comes from.
    pub byte_offset: u64,
    /// What it is.
    pub kind: DocKind,
    /// The text, capped ([`TOOL_OUTPUT_CAP`], [`TEXT_CAP`]); never empty.
    pub text: String,
    /// The record's time in milliseconds since the Unix epoch, when it has a readable `ts`.
    pub time_ms: Option<i64>,
}

impl Document {
    /// A document of `text` cut to its kind's cap ([`TOOL_OUTPUT_CAP`] for tool output,
    /// [`TEXT_CAP`] otherwise); `None` when nothing but white space is left.
    fn capped(byte_offset: u64, kind: DocKind, text: String, time_ms: Option<i64>) -> Option<Self> {
        let cap = if kind == DocKind::ToolOutput {
            TOOL_OUTPUT_CAP
        } else {
            TEXT_CAP
        };
        let text = capped(text, cap);
        (!text.trim().is_empty()).then_some(Document {
            byte_offset,
            kind,
            text,
            time_ms,
        })
    }
}

/// Cuts `s` to at most `cap` bytes at a character boundary.
fn capped(mut s: String, cap: usize) -> String {
    if s.len() > cap {
        let mut end = cap;
        while end > 0 && !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

/// Turns the records of one run into documents, in order. Holds what it must remember between
/// records of the same run (the tool calls whose `tool.output` it saw, whether a `final` event
/// came), so feed it one run's records in file order; a new extractor per run, or per
/// incremental batch (then a `tool_result` event whose `tool.output` came in an earlier batch
/// is indexed a second time, as tool output of the same call).
#[derive(Debug, Default, Clone)]
pub struct Extractor {
    outputs_seen: BTreeSet<String>,
    final_seen: bool,
}

impl Extractor {
    /// A fresh extractor for one run.
    pub fn new() -> Self {
        Extractor::default()
    }

    /// The documents of `record`, which starts at byte `byte_offset` of its run log; empty for
    /// records that hold nothing searchable (headers, `llm.request`, usage, statuses, …) and
    /// for empty text.
    pub fn documents(&mut self, record: &Record, byte_offset: u64) -> Vec<Document> {
        let time_ms = record.ts().and_then(|t| t.unix_millis());
        let mut out = Vec::new();
        let mut push = |kind: DocKind, text: String| {
            out.extend(Document::capped(byte_offset, kind, text, time_ms));
        };
        match record {
            Record::RunStart(s) => push(DocKind::User, s.input.display_text()),
            Record::AgentEvent(e) => match &e.event {
                AgentEvent::Text(x) => {
                    push(DocKind::Assistant, x.content.clone().unwrap_or_default())
                }
                AgentEvent::Reasoning(x) => {
                    push(DocKind::Reasoning, x.content.clone().unwrap_or_default());
                }
                AgentEvent::ToolCall(x) => {
                    let args = x
                        .args
                        .as_ref()
                        .map(|a| a.get().to_owned())
                        .or_else(|| x.raw_args.clone())
                        .unwrap_or_default();
                    let tool = x.tool.as_deref().unwrap_or_default();
                    push(DocKind::ToolCall, format!("{tool} {args}"));
                }
                AgentEvent::ToolResult(x) => {
                    let id = x.tool_call_id.as_deref().unwrap_or_default();
                    if !self.outputs_seen.contains(id) {
                        let text = x.result.as_deref().unwrap_or_default();
                        push(DocKind::ToolOutput, crate::tool_output_text(text));
                    }
                }
                AgentEvent::Final(x) => {
                    self.final_seen = true;
                    push(DocKind::Final, x.content.clone().unwrap_or_default());
                }
                _ => {}
            },
            Record::ToolOutput(o) => {
                self.outputs_seen.insert(o.tool_call_id.clone());
                push(DocKind::ToolOutput, crate::tool_output_text(&o.result_raw));
            }
            Record::RunEnd(e) => {
                if !self.final_seen
                    && let Some(text) = &e.final_text
                {
                    push(DocKind::Final, text.clone());
                }
            }
            _ => {}
        }
        out
    }
}

/// The documents of one saved session message that starts at byte `byte_offset` of its
/// messages file (legacy-only sessions, whose history no run log holds): user text, assistant
/// text plus one tool-call document per call (`name arguments`), reasoning text, tool output
/// (capped at [`TOOL_OUTPUT_CAP`]). System prompts and unknown roles hold nothing searchable.
/// Saved messages carry no time: `time_ms` is `None`.
pub fn message_documents(message: &BaseMessage, byte_offset: u64) -> Vec<Document> {
    let mut out = Vec::new();
    let mut push = |kind: DocKind, text: String| {
        out.extend(Document::capped(byte_offset, kind, text, None));
    };
    match message {
        BaseMessage::User(m) => push(DocKind::User, m.content.plain_text()),
        BaseMessage::Assistant(m) => {
            if let Some(c) = &m.content {
                push(DocKind::Assistant, c.plain_text());
            }
            for call in message.tool_calls() {
                push(
                    DocKind::ToolCall,
                    format!("{} {}", call.function.name, call.function.arguments),
                );
            }
        }
        BaseMessage::Reasoning(m) => {
            push(DocKind::Reasoning, m.content.clone().unwrap_or_default())
        }
        BaseMessage::Tool(m) => push(
            DocKind::ToolOutput,
            crate::tool_output_text(&m.content.plain_text()),
        ),
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(json: &str) -> Record {
        serde_json::from_str(json).unwrap()
    }

    const R: &str = r#""run_id":"r1","ts":"2026-01-02T03:04:05.000Z""#;

    #[test]
    fn each_kind_from_its_record() {
        let mut x = Extractor::new();
        let docs = |x: &mut Extractor, j: String| {
            x.documents(&rec(&j), 7)
                .into_iter()
                .map(|d| (d.kind.as_str(), d.text))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            docs(
                &mut x,
                format!(
                    r#"{{"type":"run.start",{R},"input":{{"type":"text","text":"fix the bug"}}}}"#
                )
            ),
            vec![("user", "fix the bug".to_owned())]
        );
        assert_eq!(
            docs(
                &mut x,
                format!(
                    r#"{{"type":"agent.event",{R},"seq":1,"event":{{"type":"tool_call","tool":"bash","args":{{"cmd":"ls"}},"tool_call_id":"c1"}}}}"#
                )
            ),
            vec![("tool-call", r#"bash {"cmd":"ls"}"#.to_owned())]
        );
        assert_eq!(
            docs(
                &mut x,
                format!(
                    r#"{{"type":"tool.output",{R},"tool":"bash","tool_call_id":"c1","result_raw":"a.txt"}}"#
                )
            ),
            vec![("tool-output", "a.txt".to_owned())]
        );
        // The event repeating the output of a call whose tool.output was seen adds nothing.
        assert_eq!(
            docs(
                &mut x,
                format!(
                    r#"{{"type":"agent.event",{R},"seq":2,"event":{{"type":"tool_result","tool":"bash","result":"a.txt","tool_call_id":"c1"}}}}"#
                )
            ),
            vec![]
        );
        assert_eq!(
            docs(
                &mut x,
                format!(
                    r#"{{"type":"agent.event",{R},"seq":3,"event":{{"type":"reasoning","content":"think"}}}}"#
                )
            ),
            vec![("reasoning", "think".to_owned())]
        );
        assert_eq!(
            docs(
                &mut x,
                format!(
                    r#"{{"type":"agent.event",{R},"seq":4,"event":{{"type":"final","content":"done"}}}}"#
                )
            ),
            vec![("final", "done".to_owned())]
        );
        // run.end repeats the final answer already indexed.
        assert_eq!(
            docs(
                &mut x,
                format!(r#"{{"type":"run.end",{R},"outcome":"completed","final":"done"}}"#)
            ),
            vec![]
        );
        let d = &x.documents(
            &rec(&format!(
                r#"{{"type":"run.start",{R},"input":{{"type":"text","text":"x"}}}}"#
            )),
            9,
        )[0];
        assert_eq!((d.byte_offset, d.time_ms), (9, Some(1_767_323_045_000)));
    }

    #[test]
    fn final_text_of_run_end_when_no_final_event() {
        let mut x = Extractor::new();
        let d = x.documents(
            &rec(&format!(
                r#"{{"type":"run.end",{R},"outcome":"completed","final":"the answer"}}"#
            )),
            0,
        );
        assert_eq!(d.len(), 1);
        assert_eq!(
            (d[0].kind, d[0].text.as_str()),
            (DocKind::Final, "the answer")
        );
    }

    #[test]
    fn only_the_indexed_record_types_give_documents() {
        let lines = [
            r#"{"type":"header","schema_version":1,"run_id":"r1","started_at":"2026-01-02T03:04:05.000Z","model":{"provider":"p","name":"m"}}"#.to_owned(),
            format!(r#"{{"type":"run.context",{R},"context_left_percent":90}}"#),
            format!(r#"{{"type":"llm.request",{R},"seq":1,"input":{{"messages":[{{"role":"user","content":"secret"}}]}}}}"#),
            format!(r#"{{"type":"llm.response",{R},"seq":1,"output":{{"messages":[{{"role":"assistant","content":"secret"}}]}}}}"#),
            format!(r#"{{"type":"run.status",{R},"status":"running","message":"secret"}}"#),
            format!(r#"{{"type":"run.error",{R},"error":{{"name":"E","message":"secret"}}}}"#),
            format!(r#"{{"type":"future.kind",{R},"text":"secret"}}"#),
        ];
        for l in &lines {
            let r = rec(l);
            assert!(!INDEXED_RECORD_TYPES.contains(&r.kind()), "{l}");
            assert_eq!(Extractor::new().documents(&r, 0), vec![], "{l}");
        }
    }

    #[test]
    fn llm_request_is_never_indexed() {
        let mut x = Extractor::new();
        let r = rec(&format!(
            r#"{{"type":"llm.request",{R},"seq":1,"input":{{"messages":[{{"role":"user","content":"secret history"}}]}}}}"#
        ));
        assert_eq!(x.documents(&r, 0), vec![]);
    }

    #[test]
    fn shell_results_are_indexed_as_their_text() {
        let mut e = Extractor::new();
        let docs = e.documents(
            &rec(
                r#"{"type":"tool.output","run_id":"r","ts":"2026-11-24T09:14:42.000Z","tool":"shell","tool_call_id":"c1","result_raw":"{\"key\":\"k\",\"state\":\"completed\",\"command\":\"ls\",\"exit_code\":0,\"stdout\":\"AGENTS.md\\nREADME.md\\n\",\"stderr\":\"\"}"}"#,
            ),
            7,
        );
        assert_eq!(docs.len(), 1);
        assert_eq!(docs[0].kind, DocKind::ToolOutput);
        assert_eq!(docs[0].text, "ls\nAGENTS.md\nREADME.md\n");
    }

    #[test]
    fn tool_output_is_capped_at_a_char_boundary() {
        let mut x = Extractor::new();
        let long = "é".repeat(TOOL_OUTPUT_CAP); // 2 bytes each
        let line = serde_json::json!({"type":"tool.output","run_id":"r","ts":"2026-01-02T03:04:05Z",
            "tool":"t","tool_call_id":"c","result_raw":long});
        let d = x.documents(&serde_json::from_value(line).unwrap(), 0);
        assert_eq!(d[0].text.len(), TOOL_OUTPUT_CAP);
        assert_eq!(d[0].text.chars().count(), TOOL_OUTPUT_CAP / 2);
    }

    #[test]
    fn saved_messages() {
        let m: BaseMessage = serde_json::from_str(
            r#"{"role":"assistant","content":"sure","tool_calls":[{"id":"c","type":"function","function":{"name":"read","arguments":"{\"path\":\"a\"}"}}]}"#,
        )
        .unwrap();
        let d: Vec<_> = message_documents(&m, 40)
            .into_iter()
            .map(|d| (d.kind, d.text, d.byte_offset))
            .collect();
        assert_eq!(
            d,
            vec![
                (DocKind::Assistant, "sure".to_owned(), 40),
                (DocKind::ToolCall, r#"read {"path":"a"}"#.to_owned(), 40)
            ]
        );
        let sys: BaseMessage =
            serde_json::from_str(r#"{"role":"system","content":"rules"}"#).unwrap();
        assert_eq!(message_documents(&sys, 0), vec![]);
    }

    #[test]
    fn kinds_round_trip() {
        for k in DocKind::ALL {
            assert_eq!(DocKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(DocKind::parse("tool"), None);
    }
}
