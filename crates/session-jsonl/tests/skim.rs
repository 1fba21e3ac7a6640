//! Skimmed `llm.request` lines give what a full read gives for everything but the messages:
//! the recorded reference runs, and `llm.request` lines cut at any byte and sealed or glued to
//! the next record, are classified alike; the skim decodes no request the writers wrote.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use session_jsonl::{
    Item, Reader, ReaderOptions, list_run_files, llm_requests_deserialized_on_this_thread,
    llm_requests_skimmed_on_this_thread,
};
use session_schema::Record;

/// What an index can see of an item: its kind and place, damage kind, and for records every
/// field but an `llm.request`'s messages.
fn seen(items: &[Item]) -> Vec<String> {
    items
        .iter()
        .map(|i| match i {
            Item::Record(r) => match r.record() {
                Record::LlmRequest(q) => format!(
                    "llm.request {} {} {} {} {} {:?} {:?} {:?} {:?}",
                    r.offset,
                    r.line,
                    q.run_id,
                    q.ts.as_str(),
                    q.seq,
                    q.model,
                    q.input.tool_choice,
                    q.input.model,
                    q.meta
                ),
                other => format!("record {} {} {other:?}", r.offset, r.line),
            },
            Item::Damage(d) => format!("damage {} {} {} {}", d.kind, d.offset, d.line, d.len),
        })
        .collect()
}

fn read(bytes: &[u8], skim: bool) -> Vec<Item> {
    Reader::new(
        bytes,
        ReaderOptions {
            skim_llm_requests: skim,
            ..ReaderOptions::default()
        },
    )
    .collect::<Result<_, _>>()
    .unwrap()
}

#[test]
fn the_recorded_runs_read_alike_skimmed_and_no_request_is_decoded() {
    let listing = list_run_files(&session_test_support::codelia_sessions_dir()).unwrap();
    let mut requests = 0;
    for f in &listing.files {
        let bytes = std::fs::read(&f.path).unwrap();
        let full_before = llm_requests_deserialized_on_this_thread();
        let full = read(&bytes, false);
        let decoded_full = llm_requests_deserialized_on_this_thread() - full_before;
        let (d0, s0) = (
            llm_requests_deserialized_on_this_thread(),
            llm_requests_skimmed_on_this_thread(),
        );
        let skimmed = read(&bytes, true);
        let decoded = llm_requests_deserialized_on_this_thread() - d0;
        let skims = llm_requests_skimmed_on_this_thread() - s0;
        assert_eq!(seen(&skimmed), seen(&full), "{}", f.path.display());
        assert_eq!(decoded, 0, "{}", f.path.display());
        assert_eq!(skims, decoded_full, "{}", f.path.display());
        requests += skims;
    }
    assert!(requests >= 20, "{requests}");
}

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            4 => any::<char>(),
            2 => Just('"'),
            2 => Just('\\'),
            1 => prop_oneof![Just('['), Just(']'), Just('{'), Just('}')],
            1 => Just('\u{2028}'),
        ],
        0..16,
    )
    .prop_map(|cs| cs.into_iter().collect())
}

fn request(seq: u32, texts: &[String]) -> String {
    let messages: Vec<serde_json::Value> = texts
        .iter()
        .map(|t| serde_json::json!({"role": "user", "content": t}))
        .collect();
    serde_json::json!({
        "type": "llm.request", "run_id": "r", "ts": "2026-02-03T12:00:00.000Z", "seq": seq,
        "model": {"provider": "p", "name": "m"},
        "input": {"messages": messages, "tools": null, "tool_choice": "auto"},
    })
    .to_string()
}

const HEADER: &str =
    r#"{"type":"header","schema_version":1,"run_id":"r","started_at":"2026-02-03T12:00:00.000Z"}"#;
const STATUS: &str =
    r#"{"type":"run.status","run_id":"r","ts":"2026-02-03T12:00:01.000Z","status":"running"}"#;

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// A request cut at any byte, then sealed with `\n`, glued to the next record, or left as
    /// the torn tail: the same items skimmed or not.
    #[test]
    fn cut_requests_are_classified_alike(
        texts in prop::collection::vec(text(), 0..4),
        cut_frac in 0.0f64..=1.0,
        how in 0..3u8,
    ) {
        let req = request(1, &texts);
        let cut = ((req.len() as f64) * cut_frac) as usize;
        let cut = (0..=cut).rev().find(|&c| req.is_char_boundary(c)).unwrap_or(0);
        let piece = &req[..cut];
        let file = match how {
            0 => format!("{HEADER}\n{req}\n{piece}\n{STATUS}\n"),
            1 => format!("{HEADER}\n{req}\n{piece}{STATUS}\n"),
            _ => format!("{HEADER}\n{req}\n{piece}"),
        };
        prop_assert_eq!(seen(&read(file.as_bytes(), true)), seen(&read(file.as_bytes(), false)));
    }
}
