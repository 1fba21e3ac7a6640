//! Lone surrogate escapes inside raw parts of a record (request messages, `provider_meta`)
//! are reported by the reader like those in decoded fields: one `lone_surrogate` report naming
//! the line, the line's byte offset and the escape's byte within the line, then the record
//! (repaired, with its stored bytes kept).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use session_jsonl::{DamageKind, Item, Reader, ReaderOptions};
use session_schema::Record;

const HEADER: &str =
    r#"{"type":"header","schema_version":1,"run_id":"r1","started_at":"2026-02-03T12:00:00.000Z"}"#;
const REQUEST: &str = r#"{"type":"llm.request","run_id":"r1","ts":"2026-02-03T12:00:01.000Z","seq":1,"input":{"messages":[{"role":"user","content":"cut \ud83c"}],"tools":null,"tool_choice":null}}"#;
const RESPONSE: &str = r#"{"type":"llm.response","run_id":"r1","ts":"2026-02-03T12:00:02.000Z","seq":1,"output":{"messages":[{"role":"assistant","content":"ok"}],"usage":null,"stop_reason":null,"provider_meta":{"a":"\udc00","b":"\udfff"}}}"#;

#[test]
fn lone_surrogates_in_raw_parts_are_reported_with_line_and_offset() {
    // The response line starts with a BOM and two spaces: the byte in the message counts them.
    let file = format!("{HEADER}\n{REQUEST}\n\u{feff}  {RESPONSE}\n");
    let items: Vec<Item> = Reader::new(
        file.as_bytes(),
        ReaderOptions {
            keep_raw: true,
            ..Default::default()
        },
    )
    .map(Result::unwrap)
    .collect();
    let damage: Vec<(DamageKind, u64, u64, String)> = items
        .iter()
        .filter_map(Item::as_damage)
        .map(|d| (d.kind, d.line, d.offset, d.message.clone()))
        .collect();
    let request_at = HEADER.len() as u64 + 1;
    let response_at = request_at + REQUEST.len() as u64 + 1;
    assert_eq!(
        damage,
        [
            (
                DamageKind::LoneSurrogate,
                2,
                request_at,
                format!(
                    r"1 lone surrogate escape(s) repaired as U+FFFD, first \ud83c at byte {} of the line",
                    REQUEST.find(r"\ud83c").unwrap()
                )
            ),
            (
                DamageKind::LoneSurrogate,
                3,
                response_at,
                format!(
                    r"2 lone surrogate escape(s) repaired as U+FFFD, first \udc00 at byte {} of the line",
                    5 + RESPONSE.find(r"\udc00").unwrap()
                )
            ),
        ]
    );
    // Every record is still there; the request's messages decode, with U+FFFD.
    let records: Vec<&Record> = items
        .iter()
        .filter_map(Item::as_record)
        .map(|r| r.record())
        .collect();
    assert_eq!(records.len(), 3);
    let Record::LlmRequest(req) = records[1] else {
        panic!("{:?}", records[1])
    };
    let messages = req.input.messages.parse().unwrap();
    let session_schema::BaseMessage::User(user) = &messages[0] else {
        panic!("{messages:?}")
    };
    assert_eq!(
        user.content,
        session_schema::MessageContent::Text("cut \u{fffd}".into())
    );
    // The stored bytes are kept for byte-exact copies.
    let raws: Vec<&[u8]> = items
        .iter()
        .filter_map(Item::as_record)
        .map(|r| r.raw.as_deref().unwrap())
        .collect();
    assert_eq!(raws[1], REQUEST.as_bytes());
    assert_eq!(
        items
            .iter()
            .filter_map(Item::as_record)
            .nth(2)
            .unwrap()
            .parsed
            .to_json()
            .unwrap(),
        RESPONSE.as_bytes()
    );
}
