//! Short ids: run and session ids that start with a prefix, found by index ranges, and the
//! newest run of a workspace.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use session_jsonl::{Durability, RunWriter, WriterOptions};
use session_schema::{Header, Record, RunEnd, RunOutcome, Timestamp};
use session_state::{IdKind, StateStore};

fn write_run(root: &Path, run_id: &str, session_id: &str, started: &str) {
    let header = Header {
        schema_version: 1,
        run_id: run_id.into(),
        session_id: Some(session_id.into()),
        started_at: Timestamp::from_raw(started),
        ..Default::default()
    };
    let w = RunWriter::create(
        root,
        &header,
        WriterOptions::with_durability(Durability::Buffered),
    )
    .unwrap();
    w.append(&Record::RunEnd(RunEnd {
        run_id: run_id.into(),
        ts: Timestamp::from_raw(started),
        outcome: RunOutcome::Completed,
        ..Default::default()
    }))
    .unwrap();
    w.close().unwrap();
}

fn session_row(root: &Path, id: &str, updated: &str, workspace: &str, last: &str) {
    let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
    conn.execute(
        "INSERT INTO session_state (session_id, updated_at, schema_version, message_count, \
         last_user_message, workspace_root) VALUES (?1, ?2, 1, 0, ?3, ?4)",
        [id, updated, last, workspace],
    )
    .unwrap();
}

#[test]
fn prefixes_and_the_newest_run_of_a_workspace_come_from_the_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_run(
        root,
        "abcd0001-one",
        "s-aaaa-1",
        "2026-11-01T10:00:00.000+02:00",
    );
    write_run(root, "abcd0002-two", "s-aaaa-2", "2026-11-02T10:00:00.000Z");
    write_run(
        root,
        "abce0003-three",
        "s-aaaa-1",
        "2026-11-03T10:00:00.000Z",
    );
    write_run(root, "ffff0004-four", "s-cccc", "2026-11-04T10:00:00.000Z");
    let store = StateStore::open(root).unwrap();
    session_row(
        root,
        "s-aaaa-1",
        "2026-11-05T00:00:00.000Z",
        "/ws/one",
        "hello",
    );
    session_row(root, "s-bbbb", "2026-11-06T00:00:00.000Z", "/ws/one", "bye");
    store.index_runs().unwrap();

    let runs = store.run_ids_with_prefix("abcd", 10).unwrap();
    let ids: Vec<&str> = runs.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["abcd0001-one", "abcd0002-two"]);
    assert!(runs.iter().all(|m| m.kind == IdKind::Run));
    // The start as the run index's UTC key.
    assert_eq!(runs[0].time.as_deref(), Some("2026-11-01T08:00:00.000Z"));
    assert_eq!(store.run_ids_with_prefix("abcd", 1).unwrap().len(), 1);
    assert_eq!(store.run_ids_with_prefix("abc", 10).unwrap().len(), 3);
    assert_eq!(
        store.run_ids_with_prefix("abcd0002-two", 10).unwrap()[0].id,
        "abcd0002-two"
    );
    assert!(
        store
            .run_ids_with_prefix("abcd0003", 10)
            .unwrap()
            .is_empty()
    );
    assert!(store.run_ids_with_prefix("", 10).unwrap().is_empty());

    // Sessions: saved rows (updated_at, last user message) and sessions only runs name.
    let sessions = store.session_ids_with_prefix("s-", 10).unwrap();
    let got: Vec<(&str, Option<&str>, Option<&str>)> = sessions
        .iter()
        .map(|m| (m.id.as_str(), m.time.as_deref(), m.text.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            ("s-aaaa-1", Some("2026-11-05T00:00:00.000Z"), Some("hello")),
            ("s-aaaa-2", Some("2026-11-02T10:00:00.000Z"), None),
            ("s-bbbb", Some("2026-11-06T00:00:00.000Z"), Some("bye")),
            ("s-cccc", Some("2026-11-04T10:00:00.000Z"), None),
        ]
    );
    assert!(sessions.iter().all(|m| m.kind == IdKind::Session));
    assert_eq!(
        store.session_ids_with_prefix("s-aaaa", 10).unwrap().len(),
        2
    );
    assert_eq!(store.session_ids_with_prefix("s-", 2).unwrap().len(), 2);

    // The newest run of a workspace: through its session's saved workspace root.
    let newest = store.newest_run_of_workspace("/ws/one").unwrap().unwrap();
    assert_eq!(newest.id, "abce0003-three");
    assert_eq!(newest.kind, IdKind::Run);
    assert!(
        store
            .newest_run_of_workspace("/ws/other")
            .unwrap()
            .is_none()
    );

    // A read-only store answers the same.
    drop(store);
    let ro = StateStore::open_read_only(root).unwrap();
    assert_eq!(ro.run_ids_with_prefix("abcd", 10).unwrap().len(), 2);
    assert_eq!(
        ro.newest_run_of_workspace("/ws/one").unwrap().unwrap().id,
        "abce0003-three"
    );
}
