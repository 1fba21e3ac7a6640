//! Every line the reference wrote under `testdata/` parses and re-serializes to the
//! identical bytes; every message inside decodes as typed `BaseMessage`s that round-trip too.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use session_schema::{BaseMessage, Record, parse_message, parse_record, parse_session_state};

fn fixtures_root() -> PathBuf {
    session_test_support::testdata_dir()
}

fn files_with_ext(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_with_ext(&path, ext, out);
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
}

fn jsonl_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    files_with_ext(&fixtures_root(), "jsonl", &mut files);
    files.sort();
    assert!(
        files.len() >= 31,
        "expected the fixture run and message logs, found {}",
        files.len()
    );
    files
}

fn check_messages_roundtrip(raw: &str, what: &str) -> usize {
    let messages: Vec<BaseMessage> =
        serde_json::from_str(raw).unwrap_or_else(|e| panic!("{what}: {e}"));
    let back = serde_json::to_string(&messages).unwrap();
    assert_eq!(back, raw, "{what}: typed messages did not round-trip");
    for m in &messages {
        assert!(
            !matches!(m, BaseMessage::Unknown(_)),
            "{what}: unknown role {}",
            m.role()
        );
    }
    messages.len()
}

#[test]
fn every_fixture_line_round_trips_byte_for_byte() {
    let mut lines = 0;
    let mut messages = 0;
    for path in jsonl_files() {
        let text = std::fs::read(&path).unwrap();
        let is_messages_log = path.parent().is_some_and(|p| p.ends_with("messages"));
        for (i, line) in text.split(|&b| b == b'\n').enumerate() {
            if line.is_empty() {
                continue;
            }
            let what = format!("{}:{}", path.display(), i + 1);
            lines += 1;
            if is_messages_log {
                let parsed = parse_message(line).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert!(!matches!(parsed.value, BaseMessage::Unknown(_)), "{what}");
                assert_eq!(parsed.to_json().unwrap(), line, "{what}");
                continue;
            }
            let parsed = parse_record(line).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(
                !matches!(parsed.value, Record::Unknown(_)),
                "{what}: unknown type"
            );
            assert_eq!(
                String::from_utf8_lossy(&parsed.to_json().unwrap()),
                String::from_utf8_lossy(line),
                "{what}"
            );
            match &parsed.value {
                Record::LlmRequest(r) => {
                    messages += check_messages_roundtrip(r.input.messages.get(), &what);
                    if let Some(tools) = &r.input.tools {
                        let typed = tools.parse().unwrap();
                        assert_eq!(
                            serde_json::to_string(&typed).unwrap(),
                            tools.get(),
                            "{what}"
                        );
                    }
                }
                Record::LlmResponse(r) => {
                    messages += check_messages_roundtrip(r.output.messages.get(), &what);
                }
                Record::Header(h) => {
                    let defs = h
                        .tools
                        .as_ref()
                        .and_then(|t| t.definitions.as_ref())
                        .unwrap();
                    let typed = defs.parse().unwrap();
                    assert!(!typed.is_empty());
                    assert_eq!(serde_json::to_string(&typed).unwrap(), defs.get(), "{what}");
                }
                _ => {}
            }
        }
    }
    assert!(lines >= 349, "{lines}");
    assert!(messages >= 276, "{messages}");
}

#[test]
fn legacy_snapshots_parse_as_session_state() {
    let mut files = Vec::new();
    files_with_ext(&fixtures_root(), "json", &mut files);
    files.retain(|p| p.parent().is_some_and(|d| d.ends_with("state")));
    assert_eq!(files.len(), 3);
    for path in files {
        let text = std::fs::read(&path).unwrap();
        let state =
            parse_session_state(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(!state.value.messages.is_empty());
        assert!(path.to_string_lossy().contains(&state.value.session_id));
    }
}
