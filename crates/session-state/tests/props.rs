//! Invariants under random operation sequences: whatever mix of appends, rewrites,
//! truncations and metadata changes is saved, `load` returns exactly the last saved state and
//! the messages file holds exactly its lines; typed and raw summaries agree.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use session_schema::{BaseMessage, RawJson, SessionState, Timestamp, parse_message};
use session_state::{StateStore, summarize, summarize_lines};

#[derive(Debug, Clone)]
enum Op {
    Append(Vec<String>),
    ChangeFirst(String),
    Truncate(usize),
    Meta(String),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => proptest::collection::vec("[a-z \\n\"\\\\é😀]{0,12}", 0..4).prop_map(Op::Append),
        1 => "[a-z]{0,8}".prop_map(Op::ChangeFirst),
        1 => (0usize..6).prop_map(Op::Truncate),
        1 => "[a-z/ ]{0,10}".prop_map(Op::Meta),
    ]
}

fn message(i: usize, text: &str) -> BaseMessage {
    let v = if i.is_multiple_of(3) {
        serde_json::json!({"role": "user", "content": [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": "x"}}]})
    } else {
        serde_json::json!({"role": "assistant", "content": text})
    };
    parse_message(v.to_string().as_bytes()).unwrap().value
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn load_returns_the_last_saved_state(ops in proptest::collection::vec(op(), 1..12)) {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(dir.path()).unwrap();
        let mut state = SessionState {
            session_id: "p".into(),
            updated_at: Timestamp::from_raw("2026-11-30T00:00:00.000Z"),
            ..Default::default()
        };
        let mut generation = None;
        for (k, op) in ops.into_iter().enumerate() {
            match op {
                Op::Append(texts) => {
                    for t in texts {
                        let i = state.messages.len();
                        state.messages.push(message(i, &t));
                    }
                }
                Op::ChangeFirst(t) => {
                    if !state.messages.is_empty() {
                        state.messages[0] = message(1, &t);
                    }
                }
                Op::Truncate(n) => state.messages.truncate(n),
                Op::Meta(root) => {
                    state.meta = Some(RawJson::from_value(&serde_json::json!({"codelia_workspace_root": root})).unwrap());
                }
            }
            state.invoke_seq = Some(k as i64);
            let report = store.save_expecting(&state, generation).unwrap();
            generation = Some(report.generation);
            let loaded = store.load("p").unwrap().unwrap();
            prop_assert_eq!(&loaded.state.messages, &state.messages);
            prop_assert_eq!(&loaded.state.meta, &state.meta);
            prop_assert_eq!(loaded.state.invoke_seq, state.invoke_seq);
            prop_assert!(loaded.damage.is_empty());
            prop_assert_eq!(loaded.generation, generation);
            let file = std::fs::read(dir.path().join("messages/p.jsonl")).unwrap();
            let want: Vec<u8> = state.messages.iter().flat_map(|m| session_schema::to_line(m).unwrap()).collect();
            prop_assert_eq!(file, want);
            let lines: Vec<Vec<u8>> = state.messages.iter().map(|m| serde_json::to_vec(m).unwrap()).collect();
            prop_assert_eq!(
                summarize(&state.messages, state.meta.as_ref()),
                summarize_lines(&lines, state.meta.as_ref().map(RawJson::get))
            );
        }
    }
}
