//! Data-driven tests: every `test_data/messages/NNNN_name.jsonl` is loaded as the messages file
//! of a session the reference wrote; the loaded messages, the damage report and the summary a
//! save would store are rendered and compared with `NNNN_name.expected` beside it, through one
//! helper. `UPDATE_EXPECT=1 cargo test -p session-state --test data` rewrites the expectations.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use session_state::{StateStore, summarize, summarize_lines};

const ID: &str = "0e0e0e0e-0000-4000-8000-000000000001";

fn render(input: &Path) -> String {
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    let conn = rusqlite::Connection::open(dir.path().join("state.db")).unwrap();
    // The row as the reference writes it (no bookkeeping of ours, so the whole file is read).
    conn.execute(
        "INSERT INTO session_state (session_id, updated_at, schema_version) VALUES (?1, '2026-11-30T00:00:00.000Z', 1)",
        [ID],
    )
    .unwrap();
    let bytes = fs::read(input).unwrap();
    fs::write(
        dir.path().join("messages").join(format!("{ID}.jsonl")),
        &bytes,
    )
    .unwrap();
    let loaded = store.load(ID).unwrap().unwrap();
    let mut out = String::new();
    writeln!(out, "messages: {}", loaded.state.messages.len()).unwrap();
    for m in &loaded.state.messages {
        let line = String::from_utf8(session_schema::to_line(m).unwrap()).unwrap();
        let kept = if matches!(m, session_schema::BaseMessage::Unknown(_)) {
            " (raw)"
        } else {
            ""
        };
        write!(out, "  {}{kept}: {line}", m.role()).unwrap();
    }
    writeln!(out, "damage: {}", loaded.damage.len()).unwrap();
    for d in &loaded.damage {
        writeln!(
            out,
            "  line {} offset {} {:?} kept={}: {}",
            d.line.unwrap_or(0),
            d.byte_offset,
            d.kind,
            d.kept,
            d.detail
        )
        .unwrap();
    }
    if !loaded.notes.is_empty() {
        writeln!(out, "notes: {}", loaded.notes.len()).unwrap();
        for n in &loaded.notes {
            if let session_state::LoadNote::LoneSurrogate {
                line,
                byte_offset,
                escape,
                ..
            } = n
            {
                writeln!(
                    out,
                    "  line {line} offset {byte_offset} lone surrogate {escape}"
                )
                .unwrap();
            } else {
                writeln!(out, "  {n:?}").unwrap();
            }
        }
    }
    let summary = summarize(&loaded.state.messages, None);
    writeln!(out, "message_count: {}", summary.message_count).unwrap();
    writeln!(out, "last_user_message: {:?}", summary.last_user_message).unwrap();
    // The summary over the raw lines that parse as JSON (what the reference would store if it
    // could read the file) for comparison.
    let raw: Vec<&[u8]> = bytes
        .split(|&b| b == b'\n')
        .map(|l| l.trim_ascii())
        .filter(|l| !l.is_empty() && serde_json::from_slice::<serde_json::Value>(l).is_ok())
        .collect();
    let raw_summary = summarize_lines(&raw, None);
    writeln!(
        out,
        "raw lines: message_count {} last_user_message {:?}",
        raw_summary.message_count, raw_summary.last_user_message
    )
    .unwrap();
    // A save writes the loaded messages back compactly and loads cleanly.
    store.save(&loaded.state).unwrap();
    let again = store.load(ID).unwrap().unwrap();
    assert_eq!(
        again.state.messages,
        loaded.state.messages,
        "{}",
        input.display()
    );
    // Only messages kept raw are still reported (they still do not fit the typed model).
    let kept = loaded.damage.iter().filter(|d| d.kept).count();
    assert_eq!(
        again.damage.len(),
        kept,
        "{}: {:?}",
        input.display(),
        again.damage
    );
    assert!(again.damage.iter().all(|d| d.kept));
    // Lone surrogate escapes are written back as they were, and reported again.
    let saved = fs::read(dir.path().join("messages").join(format!("{ID}.jsonl"))).unwrap();
    for escape in loaded.notes.iter().filter_map(|n| match n {
        session_state::LoadNote::LoneSurrogate { escape, .. } => Some(escape.as_bytes()),
        _ => None,
    }) {
        assert!(
            saved.windows(escape.len()).any(|w| w == escape),
            "{}: {} lost",
            input.display(),
            String::from_utf8_lossy(escape)
        );
    }
    assert_eq!(again.notes.len(), loaded.notes.len(), "{}", input.display());
    out
}

/// The one helper: compares (or with `UPDATE_EXPECT=1` rewrites) `<case>.expected`.
fn check(input: &Path) {
    let actual = render(input);
    let expected_path = input.with_extension("expected");
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        fs::write(&expected_path, &actual).unwrap();
        return;
    }
    let expected = fs::read_to_string(&expected_path)
        .unwrap_or_else(|_| panic!("missing {}", expected_path.display()));
    assert_eq!(actual, expected, "{}", input.display());
}

#[test]
fn messages_files() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data/messages");
    let mut cases: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    cases.sort();
    assert!(cases.len() >= 10);
    for case in cases {
        check(&case);
    }
}
