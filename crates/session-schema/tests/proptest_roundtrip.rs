//! Property: any record built from random values serializes, parses back to an equal value, and
//! re-serializes to the same bytes — including unknown fields, unknown enum values, arbitrary
//! Unicode and control characters, and shuffled key orders.

#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use session_schema::{
    AgentEvent, AgentEventRecord, ContentEvent, Extra, RawJson, Record, RunEnd, RunOutcome,
    RunStatus, RunStatusKind, Timestamp, ToolOutput, parse_record,
};

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9 ]{0,12}",
        any::<String>(),
        Just("line\nbreak\t\u{1}\u{7f}\u{2028}\"\\/".to_owned()),
        Just("日本語 🤔 emoji".to_owned()),
    ]
}

fn extra() -> impl Strategy<Value = Extra> {
    prop::collection::vec(("x_[a-z]{1,6}", any::<i32>()), 0..3).prop_map(|v| {
        let mut seen = std::collections::BTreeSet::new();
        Extra(
            v.into_iter()
                .filter(|(k, _)| seen.insert(k.clone()))
                .map(|(k, n)| (k, RawJson::from_value(&n).unwrap()))
                .collect(),
        )
    })
}

fn record() -> impl Strategy<Value = Record> {
    let ts = (0i64..4_102_444_800_000).prop_map(Timestamp::from_unix_millis);
    prop_oneof![
        (
            text(),
            ts.clone(),
            "[a-z_]{1,10}",
            prop::option::of(text()),
            extra()
        )
            .prop_map(
                |(run_id, ts, outcome, final_text, extra)| Record::RunEnd(RunEnd {
                    run_id,
                    ts,
                    outcome: RunOutcome::from(outcome.as_str()),
                    final_text,
                    extra,
                    ..Default::default()
                })
            ),
        (text(), ts.clone(), "[a-z_]{1,10}", prop::option::of(text())).prop_map(
            |(run_id, ts, status, message)| Record::RunStatus(RunStatus {
                run_id,
                ts,
                status: RunStatusKind::from(status.as_str()),
                message,
                ..Default::default()
            })
        ),
        (
            text(),
            ts.clone(),
            text(),
            text(),
            text(),
            prop::option::of(any::<bool>()),
            extra()
        )
            .prop_map(
                |(run_id, ts, tool, tool_call_id, result_raw, is_error, extra)| {
                    Record::ToolOutput(ToolOutput {
                        run_id,
                        ts,
                        tool,
                        tool_call_id,
                        result_raw,
                        is_error,
                        extra,
                        ..Default::default()
                    })
                }
            ),
        (text(), ts, any::<i64>(), prop::option::of(text())).prop_map(
            |(run_id, ts, seq, content)| Record::AgentEvent(AgentEventRecord {
                run_id,
                ts,
                seq,
                event: AgentEvent::Final(ContentEvent {
                    content,
                    ..Default::default()
                }),
                ..Default::default()
            })
        ),
    ]
}

proptest! {
    #[test]
    fn records_round_trip(rec in record()) {
        let bytes = serde_json::to_vec(&rec).unwrap();
        let parsed = parse_record(&bytes).unwrap();
        prop_assert_eq!(&parsed.value, &rec);
        prop_assert_eq!(parsed.to_json().unwrap(), bytes);
    }

    #[test]
    fn shuffled_key_order_is_kept(rec in record(), seed in any::<u64>()) {
        // Reorder the top-level keys (after `type`) and check the bytes survive.
        // Nested values stay raw so only the top-level order changes.
        let value: std::collections::BTreeMap<String, RawJson> =
            serde_json::from_slice(&serde_json::to_vec(&rec).unwrap()).unwrap();
        let mut entries: Vec<(String, RawJson)> = value.into_iter().collect();
        let tag = entries.iter().position(|(k, _)| k == "type").unwrap();
        let tag = entries.remove(tag);
        let n = entries.len();
        for i in 0..n {
            let j = (seed as usize).wrapping_mul(31).wrapping_add(i * 17) % n;
            entries.swap(i, j);
        }
        let mut line = format!("{{\"type\":{}", tag.1.get());
        for (k, v) in &entries {
            line.push_str(&format!(",{}:{}", serde_json::to_string(k).unwrap(), v.get()));
        }
        line.push('}');
        let parsed = parse_record(line.as_bytes()).unwrap();
        prop_assert_eq!(String::from_utf8(parsed.to_json().unwrap()).unwrap(), line);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = parse_record(&bytes);
        let _ = session_schema::parse_message(&bytes);
    }
}

/// Random JSON values: nested objects and arrays of scalars, with keys drawn from the format's
/// own key names so that known fields get values of every wrong type.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let keys = prop::sample::select(vec![
        "type",
        "role",
        "run_id",
        "ts",
        "seq",
        "event",
        "input",
        "output",
        "messages",
        "content",
        "tool_calls",
        "usage",
        "status",
        "outcome",
        "final",
        "text",
        "parts",
        "image_url",
        "meta",
        "schema_version",
        "started_at",
        "tools",
        "tool_choice",
        "error",
        "x_new",
    ]);
    let tags = prop::sample::select(vec![
        "header",
        "run.start",
        "run.context",
        "agent.event",
        "tool.output",
        "llm.request",
        "llm.response",
        "run.status",
        "run.error",
        "run.end",
        "text",
        "parts",
        "user",
        "assistant",
        "tool",
        "system",
        "reasoning",
        "final",
        "tool_call",
        "image_url",
        "x.acme.y",
    ]);
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(serde_json::Value::from),
        "[a-z\u{1f600}\\\\\"]{0,6}".prop_map(serde_json::Value::from),
        tags.prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            prop::collection::vec((keys.clone(), inner), 0..6).prop_map(|kv| {
                serde_json::Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
            }),
        ]
    })
}

proptest! {
    #[test]
    fn random_json_never_panics_and_what_parses_round_trips(
        value in json_value(),
        tag in prop::sample::select(vec!["header", "run.start", "agent.event", "llm.request", "llm.response", "run.end", "x.acme.y"]),
    ) {
        let mut object = match value {
            serde_json::Value::Object(map) => map,
            other => {
                let mut map = serde_json::Map::new();
                map.insert("input".to_owned(), other);
                map
            }
        };
        object.insert("type".to_owned(), serde_json::Value::from(tag));
        let line = serde_json::to_vec(&object).unwrap();
        if let Ok(parsed) = parse_record(&line) {
            let again = parse_record(&parsed.to_json().unwrap()).unwrap();
            prop_assert_eq!(again.value, parsed.value);
        }
        let _ = session_schema::parse_message(&line);
    }
}
