//! Tolerance without data loss (spec §8–9): unknown types, fields and enum values, BOM, CRLF,
//! lone surrogates, other schema versions, and typed errors for bad input.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use session_schema::{
    AgentEvent, BaseMessage, ContentPart, ParseError, Record, RunOutcome, RunStatusKind,
    SchemaMode, parse_message, parse_record,
};

/// Parses `line`, checks that it re-serializes to exactly `line`, returns the record.
fn roundtrip(line: &str) -> Record {
    let parsed = parse_record(line.as_bytes()).unwrap_or_else(|e| panic!("{line}: {e}"));
    assert_eq!(String::from_utf8(parsed.to_json().unwrap()).unwrap(), line);
    parsed.value
}

#[test]
fn unknown_record_type_is_kept_whole() {
    let line = r#"{"type":"x.acme.audit","run_id":"r1","ts":"2026-02-03T12:00:00.000Z","payload":{"k":[1,2.5,null]}}"#;
    let Record::Unknown(u) = roundtrip(line) else {
        panic!("expected Unknown")
    };
    assert_eq!(u.tag, "x.acme.audit");
    assert_eq!(
        u.fields.get("payload").unwrap().get(),
        r#"{"k":[1,2.5,null]}"#
    );
}

#[test]
fn unknown_fields_are_kept_in_place() {
    // An unknown key in the middle and one at the end, plus a known key out of order.
    let line = r#"{"type":"run.end","run_id":"r1","x_mid":{"a":1},"ts":"2026-02-03T12:00:02.800Z","outcome":"completed","final":"done","x_end":true}"#;
    let Record::RunEnd(end) = roundtrip(line) else {
        panic!()
    };
    assert_eq!(end.extra.keys().collect::<Vec<_>>(), ["x_mid", "x_end"]);
    assert!(!end.key_order.is_canonical());
    assert_eq!(end.final_text.as_deref(), Some("done"));
}

#[test]
fn unknown_enum_values_are_kept() {
    let Record::RunStatus(s) = roundtrip(
        r#"{"type":"run.status","run_id":"r","ts":"2026-02-03T12:00:02.750Z","status":"paused_for_review"}"#,
    ) else {
        panic!()
    };
    assert_eq!(s.status, RunStatusKind::Other("paused_for_review".into()));
    let Record::RunEnd(e) = roundtrip(
        r#"{"type":"run.end","run_id":"r","ts":"2026-02-03T12:00:02.800Z","outcome":"timed_out"}"#,
    ) else {
        panic!()
    };
    assert_eq!(e.outcome, RunOutcome::Other("timed_out".into()));
    assert!(!e.outcome.is_known());
}

#[test]
fn unknown_roles_parts_and_events_are_kept() {
    let msg = r#"{"role":"developer","content":"x","extra":1}"#;
    let parsed = parse_message(msg.as_bytes()).unwrap();
    assert!(matches!(&parsed.value, BaseMessage::Unknown(u) if u.tag == "developer"));
    assert_eq!(parsed.to_json().unwrap(), msg.as_bytes());

    let msg =
        r#"{"role":"user","content":[{"type":"text","text":"a"},{"type":"audio","data":"AAA"}]}"#;
    let parsed = parse_message(msg.as_bytes()).unwrap();
    let BaseMessage::User(u) = &parsed.value else {
        panic!()
    };
    assert_eq!(u.content.display_string(), "a[content]");
    let session_schema::MessageContent::Parts(parts) = &u.content else {
        panic!()
    };
    assert!(matches!(&parts[1], ContentPart::Unknown(p) if p.tag == "audio"));
    assert_eq!(parsed.to_json().unwrap(), msg.as_bytes());

    // The reference passes events through untouched, even with an unexpected shape.
    let Record::AgentEvent(ev) = roundtrip(
        r#"{"type":"agent.event","run_id":"r","ts":"2026-02-03T12:00:02.700Z","seq":3,"event":{"type":"final","text":"verbatim"}}"#,
    ) else {
        panic!()
    };
    let AgentEvent::Final(f) = &ev.event else {
        panic!()
    };
    assert_eq!(f.content, None);
    assert_eq!(f.extra.get("text").unwrap().get(), "\"verbatim\"");
    roundtrip(
        r#"{"type":"agent.event","run_id":"r","ts":"2026-02-03T12:00:02.700Z","seq":4,"event":{"type":"ui.confetti","n":3}}"#,
    );
}

#[test]
fn discriminator_not_first_still_dispatches() {
    let line =
        r#"{"run_id":"r","type":"run.end","ts":"2026-02-03T12:00:02.800Z","outcome":"error"}"#;
    let parsed = parse_record(line.as_bytes()).unwrap();
    let Record::RunEnd(end) = &parsed.value else {
        panic!()
    };
    assert_eq!(end.outcome, RunOutcome::Error);
    // The tag is always written first; the other keys keep their order.
    assert_eq!(
        String::from_utf8(parsed.to_json().unwrap()).unwrap(),
        r#"{"type":"run.end","run_id":"r","ts":"2026-02-03T12:00:02.800Z","outcome":"error"}"#
    );
}

#[test]
fn null_and_absent_stay_distinct_and_numbers_keep_their_spelling() {
    roundtrip(
        r#"{"type":"llm.response","run_id":"r","ts":"2026-02-03T12:00:02.100Z","seq":1,"output":{"messages":[],"usage":null,"stop_reason":null,"provider_meta":null}}"#,
    );
    roundtrip(
        r#"{"type":"llm.response","run_id":"r","ts":"2026-02-03T12:00:02.100Z","seq":1,"output":{"messages":[]}}"#,
    );
    roundtrip(
        r#"{"type":"run.context","run_id":"r","ts":"2026-02-03T12:00:02.100Z","context_left_percent":42.5}"#,
    );
    roundtrip(
        r#"{"type":"run.context","run_id":"r","ts":"2026-02-03T12:00:02.100Z","context_left_percent":95}"#,
    );
}

#[test]
fn bom_crlf_and_whitespace_are_accepted() {
    let line = "\u{feff}  {\"type\":\"run.end\",\"run_id\":\"r\",\"ts\":\"2026-02-03T12:00:02.800Z\",\"outcome\":\"completed\"} \r\n";
    let parsed = parse_record(line.as_bytes()).unwrap();
    assert!(parsed.had_bom);
    assert!(matches!(parsed.value, Record::RunEnd(_)));
}

#[test]
fn lone_surrogates_are_repaired_visibly_and_restored() {
    let line = r#"{"type":"tool.output","run_id":"r","ts":"2026-02-03T12:00:02.600Z","tool":"shell","tool_call_id":"c1","result_raw":"cut emoji \ud83c here, pair \ud83d\ude00, tail \udc00"}"#;
    let parsed = parse_record(line.as_bytes()).unwrap();
    assert_eq!(parsed.lone_surrogates.len(), 2);
    assert_eq!(parsed.lone_surrogates[0].escape_str(), "\\ud83c");
    let Record::ToolOutput(out) = &parsed.value else {
        panic!()
    };
    assert_eq!(
        out.result_raw,
        "cut emoji \u{fffd} here, pair 😀, tail \u{fffd}"
    );
    // The pair was decoded; serde_json writes it raw, so only compare the restored escapes.
    let back = String::from_utf8(parsed.to_json().unwrap()).unwrap();
    assert!(back.contains(r"cut emoji \ud83c here"), "{back}");
    assert!(back.contains(r"tail \udc00"), "{back}");
}

#[test]
fn lone_surrogate_inside_raw_fields_round_trips_exactly() {
    let line = r#"{"type":"run.start","run_id":"r","ts":"2026-02-03T12:00:00.456Z","input":{"type":"text","text":"a\ud800b"},"meta":{"note":"\udfff"}}"#;
    roundtrip(line);
}

#[test]
fn other_schema_versions_are_best_effort() {
    let Record::Header(h) = roundtrip(
        r#"{"type":"header","schema_version":2,"run_id":"r","started_at":"2027-01-01T00:00:00.000Z","new_thing":{}}"#,
    ) else {
        panic!()
    };
    assert_eq!(h.schema_mode(), SchemaMode::BestEffort { version: 2 });
}

#[test]
fn unparseable_timestamps_are_kept() {
    let Record::Header(h) =
        roundtrip(r#"{"type":"header","schema_version":1,"run_id":"r","started_at":"not a date"}"#)
    else {
        panic!()
    };
    assert!(h.started_at.parse().is_none());
}

#[test]
fn bad_input_gives_typed_errors() {
    type Case<'a> = (&'a [u8], fn(&ParseError) -> bool);
    let cases: &[Case] = &[
        (b"", |e| matches!(e, ParseError::Empty)),
        (b"   \r", |e| matches!(e, ParseError::Empty)),
        (b"not json", |e| {
            matches!(e, ParseError::Syntax { eof: false, .. })
        }),
        (br#"{"type":"run.end","run_id":"r","ts":"2026"#, |e| {
            e.is_eof()
        }),
        (b"[1,2]", |e| matches!(e, ParseError::NotObject)),
        (b"42", |e| matches!(e, ParseError::NotObject)),
        (br#"{"run_id":"r"}"#, |e| {
            matches!(e, ParseError::MissingTag { key: "type" })
        }),
        (
            br#"{"type":"run.end","run_id":7,"ts":"x","outcome":"completed"}"#,
            |e| matches!(e, ParseError::Shape { kind: Some(k), .. } if k == "run.end"),
        ),
        (
            br#"{"type":"agent.event","run_id":"r","ts":"x","seq":"one","event":{"type":"final"}}"#,
            |e| e.is_shape(),
        ),
        (b"{\"type\":\"run.end\",\"run_id\":\"\xff\"}", |e| {
            matches!(e, ParseError::InvalidUtf8 { offset: 28 })
        }),
        (b"{\"type\":\"run.end\",\"run_id\":\"a\0b\"}", |e| {
            matches!(e, ParseError::Syntax { .. })
        }),
    ];
    for (input, check) in cases {
        let err = parse_record(input).expect_err(&String::from_utf8_lossy(input));
        assert!(
            check(&err),
            "{:?} gave {err:?}",
            String::from_utf8_lossy(input)
        );
        // Display is a lower-case fragment without a full stop.
        let text = err.to_string();
        assert!(!text.ends_with('.'), "{text}");
    }
}
