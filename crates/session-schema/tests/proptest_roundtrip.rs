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
