//! Lone surrogate escapes in raw parts of saved messages (a tool call's `provider_meta`, a
//! reasoning message's `raw_item`) are reported on load with line and byte offset like those in
//! decoded fields, and the summary columns show a cut emoji as U+FFFD, as the reference's
//! summary does, instead of the JSON fallback.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;

use rusqlite::Connection;
use session_state::{LoadNote, StateStore, display_content_json, summarize_lines};

const ID: &str = "0b7c1c5e-3f2a-4d1e-9c8b-7a6f5e4d3c2b";

#[test]
fn lone_surrogates_in_raw_parts_of_messages_are_notes_with_their_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    let first = "{\"role\":\"user\",\"content\":\"hi\"}\n";
    let call = "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"ls\",\"arguments\":\"{}\"},\"provider_meta\":{\"sig\":\"\\udc9a\"}}]}\n";
    let reasoning =
        "{\"role\":\"reasoning\",\"content\":null,\"raw_item\":{\"enc\":\"a\\uD83Db\"}}\n";
    let body = format!("{first}{call}{reasoning}");
    let path = dir.path().join("messages").join(format!("{ID}.jsonl"));
    fs::write(&path, &body).unwrap();
    Connection::open(dir.path().join("state.db"))
        .unwrap()
        .execute(
            "INSERT INTO session_state (session_id, updated_at, schema_version, message_count) \
             VALUES (?1, '2026-11-30T00:00:00.000Z', 1, 3)",
            [ID],
        )
        .unwrap();
    let loaded = store.load(ID).unwrap().unwrap();
    assert!(loaded.damage.is_empty(), "{:?}", loaded.damage);
    assert_eq!(loaded.state.messages.len(), 3);
    assert_eq!(
        loaded.notes,
        vec![
            LoadNote::LoneSurrogate {
                path: path.clone(),
                line: 2,
                byte_offset: body.find("\\udc9a").unwrap() as u64,
                escape: "\\udc9a".to_owned(),
            },
            LoadNote::LoneSurrogate {
                path: path.clone(),
                line: 3,
                byte_offset: body.find("\\uD83D").unwrap() as u64,
                escape: "\\uD83D".to_owned(),
            },
        ]
    );
    // Saving the loaded state unchanged plus one message keeps the stored lines byte for byte.
    let mut state = loaded.state.clone();
    state.messages.push(
        session_schema::parse_message(br#"{"role":"user","content":"more"}"#)
            .unwrap()
            .value,
    );
    store.save_expecting(&state, loaded.generation).unwrap();
    let after = fs::read_to_string(&path).unwrap();
    assert_eq!(
        after,
        format!("{body}{{\"role\":\"user\",\"content\":\"more\"}}\n")
    );
}

#[test]
fn summary_columns_show_a_cut_emoji_as_a_replacement_character() {
    assert_eq!(display_content_json(r#""see \ud83c""#), "see \u{fffd}");
    assert_eq!(
        display_content_json(
            r#"[{"type":"text","text":"a\udc00"},{"type":"image_url","image_url":{"url":"x"}}]"#
        ),
        "a\u{fffd}[image]"
    );
    let s = summarize_lines(
        &[r#"{"role":"user","content":"last \uD83D"}"#],
        Some(r#"{"codelia_workspace_root":"/repo/\ud800x"}"#),
    );
    assert_eq!(s.last_user_message.as_deref(), Some("last \u{fffd}"));
    assert_eq!(s.workspace_root.as_deref(), Some("/repo/\u{fffd}x"));
}
