//! Lone UTF-16 surrogate escapes anywhere in a record (docs/format.md "Lines"): inside raw,
//! lazily decoded parts (request and response messages, tool arguments, `provider_meta`,
//! event `args`, `meta`) they are repaired and reported when the line is read, exactly as in
//! decoded fields; the stored bytes come back from `Parsed::to_json`; JSON built from the value
//! is strict JSON.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use session_schema::surrogate::{decode, find_lone_surrogates, repair_str};
use session_schema::{
    AgentEvent, BaseMessage, Lazy, MessageContent, RawJson, Record, parse_message, parse_record,
};

/// Every `\uXXXX` escape of `json` in the surrogate range that is not part of a pair.
fn unpaired_escapes(json: &str) -> Vec<String> {
    find_lone_surrogates(json.as_bytes())
        .iter()
        .map(|s| s.escape_str().to_owned())
        .collect()
}

const REQUEST: &str = r#"{"type":"llm.request","run_id":"r1","ts":"2026-02-03T12:00:01.000Z","seq":1,"input":{"messages":[{"role":"user","content":"cut \ud83c here"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"write","arguments":"{\"text\":\"x\udc00\"}"},"provider_meta":{"sig":"\uD83D"}}]}],"tools":null,"tool_choice":null}}"#;

#[test]
fn lone_surrogates_inside_raw_message_arrays_are_repaired_and_reported_at_read_time() {
    let parsed = parse_record(REQUEST.as_bytes()).unwrap();
    let found: Vec<(usize, &str)> = parsed
        .lone_surrogates
        .iter()
        .map(|s| (s.offset, s.escape_str()))
        .collect();
    let at = |needle: &str| REQUEST.find(needle).unwrap();
    assert_eq!(
        found,
        [
            (at(r"\ud83c here"), r"\ud83c"),
            (at(r"\udc00"), r"\udc00"),
            (at(r"\uD83D"), r"\uD83D"),
        ]
    );
    let Record::LlmRequest(req) = &parsed.value else {
        panic!("{:?}", parsed.value)
    };
    // The raw array now holds `\ufffd`, so decoding it keeps every message.
    let messages = req.input.messages.parse().unwrap();
    assert_eq!(messages.len(), 2);
    let BaseMessage::User(u) = &messages[0] else {
        panic!("{:?}", messages[0])
    };
    assert_eq!(u.content, MessageContent::Text("cut \u{fffd} here".into()));
    let BaseMessage::Assistant(a) = &messages[1] else {
        panic!("{:?}", messages[1])
    };
    let call = &a.tool_calls.as_ref().unwrap()[0];
    assert_eq!(call.function.arguments, "{\"text\":\"x\u{fffd}\"}");
    assert_eq!(
        call.provider_meta.as_ref().unwrap().get(),
        r#"{"sig":"\ufffd"}"#
    );
    // Written back, the line is the stored bytes.
    assert_eq!(
        String::from_utf8(parsed.to_json().unwrap()).unwrap(),
        REQUEST
    );
    // Serialized as a value (what documents and listings are built from), it is strict JSON.
    let emitted = serde_json::to_string(&parsed.value).unwrap();
    assert_eq!(unpaired_escapes(&emitted), Vec::<String>::new());
    let strict: serde_json::Value = serde_json::from_str(&emitted).unwrap();
    assert_eq!(
        strict["input"]["messages"][0]["content"],
        "cut \u{fffd} here"
    );
}

#[test]
fn lone_surrogates_in_response_provider_meta_and_event_args_are_reported() {
    let response = r#"{"type":"llm.response","run_id":"r1","ts":"2026-02-03T12:00:02.000Z","seq":1,"output":{"messages":[{"role":"assistant","content":"ok"}],"usage":null,"stop_reason":null,"provider_meta":{"id":"\udbff"}}}"#;
    let parsed = parse_record(response.as_bytes()).unwrap();
    assert_eq!(parsed.lone_surrogates.len(), 1);
    assert_eq!(
        parsed.lone_surrogates[0].offset,
        response.find(r"\udbff").unwrap()
    );
    let Record::LlmResponse(resp) = &parsed.value else {
        panic!()
    };
    assert_eq!(
        resp.output.provider_meta.as_ref().unwrap().get(),
        r#"{"id":"\ufffd"}"#
    );
    assert_eq!(
        String::from_utf8(parsed.to_json().unwrap()).unwrap(),
        response
    );

    let event = r#"{"type":"agent.event","run_id":"r1","ts":"2026-02-03T12:00:03.000Z","seq":4,"event":{"type":"tool_call","tool":"shell","args":{"cmd":"echo \ud800"},"tool_call_id":"c1"}}"#;
    let parsed = parse_record(event.as_bytes()).unwrap();
    assert_eq!(
        parsed
            .lone_surrogates
            .iter()
            .map(|s| s.escape_str())
            .collect::<Vec<_>>(),
        [r"\ud800"]
    );
    let Record::AgentEvent(e) = &parsed.value else {
        panic!()
    };
    let AgentEvent::ToolCall(call) = &e.event else {
        panic!("{:?}", e.event)
    };
    assert_eq!(
        call.args.as_ref().unwrap().get(),
        r#"{"cmd":"echo \ufffd"}"#
    );
    assert_eq!(String::from_utf8(parsed.to_json().unwrap()).unwrap(), event);
}

#[test]
fn a_message_line_with_a_lone_surrogate_only_in_a_raw_part_is_reported() {
    let line = r#"{"role":"reasoning","content":"thinking","raw_item":{"encrypted":"\ud83e"}}"#;
    let parsed = parse_message(line.as_bytes()).unwrap();
    assert_eq!(parsed.lone_surrogates.len(), 1);
    assert_eq!(
        parsed.lone_surrogates[0].offset,
        line.find(r"\ud83e").unwrap()
    );
    assert_eq!(String::from_utf8(parsed.to_json().unwrap()).unwrap(), line);
}

#[test]
fn a_lazy_built_from_raw_text_decodes_with_replacement_characters_and_says_so() {
    let raw = RawJson::from_json(r#"[{"role":"user","content":"a\ud83cb"}]"#).unwrap();
    assert_eq!(raw.lone_surrogates().len(), 1);
    let lazy: Lazy<Vec<BaseMessage>> = Lazy::from_raw(raw);
    let messages = lazy.parse().unwrap();
    let BaseMessage::User(u) = &messages[0] else {
        panic!()
    };
    assert_eq!(u.content, MessageContent::Text("a\u{fffd}b".into()));
    let reported = lazy.parse_reported().unwrap();
    assert_eq!(reported.lone_surrogates.len(), 1);
    assert_eq!(reported.lone_surrogates[0].offset, 28);
    assert_eq!(reported.lone_surrogates[0].escape_str(), r"\ud83c");
    // Re-serialized through the report, the original escape comes back.
    assert_eq!(
        String::from_utf8(reported.to_json().unwrap()).unwrap(),
        r#"[{"role":"user","content":"a\ud83cb"}]"#
    );
    // A clean value reports nothing.
    let clean: Lazy<Vec<BaseMessage>> = Lazy::from_raw(
        RawJson::from_json(r#"[{"role":"user","content":"😀 \ud83d\ude00"}]"#).unwrap(),
    );
    assert!(clean.parse_reported().unwrap().lone_surrogates.is_empty());
    // Bad shapes are still errors.
    let bad: Lazy<Vec<BaseMessage>> = Lazy::from_raw(
        RawJson::from_json(r#"[{"role":"user","content":7,"x":"\ud83c"}]"#).unwrap(),
    );
    assert!(bad.parse().is_err());
}

#[test]
fn emitted_json_is_repaired_byte_for_byte_elsewhere() {
    let text = r#"{"a":"x\ud83c y","b":"\ud83d\ude00","c":"\\ud83c","d":["\uDC00"],"e":1}"#;
    assert_eq!(
        repair_str(text),
        r#"{"a":"x\ufffd y","b":"\ud83d\ude00","c":"\\ud83c","d":["\ufffd"],"e":1}"#
    );
    assert!(matches!(
        repair_str(r#"{"c":"\\ud83c","b":"\ud83d\ude00"}"#),
        std::borrow::Cow::Borrowed(_)
    ));
    let (v, found) = decode::<serde_json::Value>(text).unwrap();
    assert_eq!(found.len(), 2);
    assert_eq!(v["a"], "x\u{fffd} y");
    assert_eq!(v["c"], "\\ud83c");
}
