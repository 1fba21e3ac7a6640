//! The example run log and saved session of `docs/spec.md` §7 are data this workspace reads:
//! every line is a known record type that serializes back to the same bytes, and the saved
//! state holds only known message types. Run by `cargo test`.

use session_schema::{BaseMessage, Record, parse_record, parse_session_state};

/// The contents of the fenced blocks with info string `info` in `text`.
fn blocks<'a>(text: &'a str, info: &str) -> Vec<&'a str> {
    let open = format!("```{info}\n");
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(&open) {
        let body = &rest[start + open.len()..];
        let end = body.find("```").unwrap_or(body.len());
        out.push(&body[..end]);
        rest = &body[end..];
    }
    out
}

#[test]
fn the_spec_example_is_what_we_read_and_write() {
    let text = std::fs::read_to_string(crate::project_root().join("docs/spec.md")).unwrap();
    let runs = blocks(&text, "jsonl");
    assert_eq!(runs.len(), 1, "one jsonl example");
    let mut kinds = Vec::new();
    let mut run_ids = std::collections::BTreeSet::new();
    for (i, line) in runs[0].lines().enumerate() {
        let parsed = parse_record(line.as_bytes())
            .unwrap_or_else(|e| panic!("docs/spec.md example line {}: {e}", i + 1));
        assert!(
            !matches!(parsed.value, Record::Unknown(_)),
            "line {}: unknown record type",
            i + 1
        );
        assert_eq!(
            parsed.to_json().unwrap(),
            line.as_bytes(),
            "line {} does not round-trip",
            i + 1
        );
        kinds.push(parsed.value.kind().to_owned());
        run_ids.extend(parsed.value.run_id().map(str::to_owned));
    }
    assert_eq!(kinds.first().map(String::as_str), Some("header"));
    assert_eq!(kinds.last().map(String::as_str), Some("run.end"));
    assert_eq!(run_ids.len(), 1, "{run_ids:?}");
    assert!(
        !runs[0].contains("message_ts"),
        "no reference writes message_ts"
    );

    let states = blocks(&text, "json");
    assert_eq!(states.len(), 1, "one saved-session example");
    let compact: serde_json::Value = serde_json::from_str(states[0]).unwrap();
    let state = parse_session_state(compact.to_string().as_bytes())
        .unwrap()
        .value;
    assert!(run_ids.contains(state.run_id.as_deref().unwrap_or_default()));
    assert!(!state.messages.is_empty());
    assert!(
        state
            .messages
            .iter()
            .all(|m| !matches!(m, BaseMessage::Unknown(_) | BaseMessage::System(_))),
        "saved messages are known types and hold no system prompt: {:?}",
        state.messages
    );
}

#[test]
fn blocks_are_found_by_info_string() {
    let text = "a\n```jsonl\n{}\n{}\n```\n```json\n{\"a\":1}\n```\n";
    assert_eq!(blocks(text, "jsonl"), ["{}\n{}\n"]);
    assert_eq!(blocks(text, "json"), ["{\"a\":1}\n"]);
    assert!(blocks(text, "rust").is_empty());
}
