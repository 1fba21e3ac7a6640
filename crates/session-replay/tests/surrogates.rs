//! A lone surrogate escape inside a request's messages (a cut emoji written by
//! `JSON.stringify`) never costs a message: `prompt_at` keeps it with U+FFFD, its raw text is
//! strict JSON, and a record built in memory with the escape still in its raw messages gets a
//! `repaired-line` note instead of an `undecodable` warning.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use session_replay::{DiagnosticKind, invocations, prompt_at};
use session_schema::surrogate::find_lone_surrogates;
use session_schema::{BaseMessage, Lazy, MessageContent, RawJson, Record, parse_record};

const LINES: [&str; 3] = [
    r#"{"type":"header","schema_version":1,"run_id":"r1","started_at":"2026-02-03T12:00:00.000Z"}"#,
    r#"{"type":"llm.request","run_id":"r1","ts":"2026-02-03T12:00:01.000Z","seq":3,"input":{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"what is \ud83c?"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"echo","arguments":"{\"s\":\"\udc00\"}"}}]}],"tools":null,"tool_choice":null}}"#,
    r#"{"type":"llm.response","run_id":"r1","ts":"2026-02-03T12:00:02.000Z","seq":3,"output":{"messages":[{"role":"assistant","content":"a cut \ud83d emoji"}],"usage":null,"stop_reason":"end_turn","provider_meta":null}}"#,
];

fn records() -> Vec<Record> {
    LINES
        .iter()
        .map(|l| parse_record(l.as_bytes()).unwrap().value)
        .collect()
}

fn text_of(m: &BaseMessage) -> String {
    match m {
        BaseMessage::System(s) => format!("{:?}", s.content),
        BaseMessage::User(u) => format!("{:?}", u.content),
        BaseMessage::Assistant(a) => format!(
            "{:?} {:?}",
            a.content,
            a.tool_calls
                .iter()
                .flatten()
                .map(|c| c.function.arguments.clone())
                .collect::<Vec<_>>()
        ),
        other => format!("{other:?}"),
    }
}

#[test]
fn prompt_at_keeps_every_message_of_a_snapshot_with_lone_surrogates() {
    let records = records();
    let (prompt, diags) = prompt_at(&records, None);
    let prompt = prompt.unwrap();
    assert_eq!(
        diags
            .iter()
            .filter(|d| d.kind == DiagnosticKind::Undecodable)
            .count(),
        0,
        "{diags:?}"
    );
    assert_eq!(
        prompt.messages.iter().map(text_of).collect::<Vec<_>>(),
        [
            r#"Text("be brief")"#.to_owned(),
            "Text(\"what is \u{fffd}?\")".to_owned(),
            "None [\"{\\\"s\\\":\\\"\u{fffd}\\\"}\"]".to_owned(),
        ]
    );
    // The raw messages are strict JSON: no unpaired escape, and they parse.
    assert!(find_lone_surrogates(prompt.raw_messages.as_bytes()).is_empty());
    let strict: serde_json::Value = serde_json::from_str(&prompt.raw_messages).unwrap();
    assert_eq!(strict[1]["content"], "what is \u{fffd}?");
    // The response's messages decode too.
    let (invs, _) = invocations(&records);
    let answer = invs[0].response_messages().unwrap().unwrap();
    assert_eq!(
        answer.iter().map(text_of).collect::<Vec<_>>(),
        ["Some(Text(\"a cut \u{fffd} emoji\")) []"]
    );
}

#[test]
fn a_record_built_in_memory_with_lone_surrogates_is_decoded_and_reported() {
    let mut records = records();
    let Record::LlmRequest(req) = &mut records[1] else {
        panic!()
    };
    let raw = r#"[{"role":"user","content":"x\ud83cy"},{"role":"user","content":"fine"}]"#;
    req.input.messages = Lazy::from_raw(RawJson::from_json(raw).unwrap());
    let (prompt, diags) = prompt_at(&records, Some(3));
    let prompt = prompt.unwrap();
    assert_eq!(prompt.messages.len(), 2);
    let BaseMessage::User(u) = &prompt.messages[0] else {
        panic!()
    };
    assert_eq!(u.content, MessageContent::Text("x\u{fffd}y".into()));
    let repaired: Vec<String> = diags
        .iter()
        .filter(|d| d.kind == DiagnosticKind::RepairedLine)
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        repaired,
        [
            r"note[repaired-line] run r1 record 1: 1 lone surrogate escape(s) in the messages decoded as U+FFFD, first \ud83c at byte 28 of the messages array"
        ]
    );
    assert_eq!(
        prompt.raw_messages,
        r#"[{"role":"user","content":"x\ufffdy"},{"role":"user","content":"fine"}]"#
    );
}
