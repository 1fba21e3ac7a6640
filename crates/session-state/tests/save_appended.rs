//! `save_appended`: a save whose caller names how many messages it kept since its last save,
//! and the row written in place (its fingerprint from the bound values) on the reference's
//! schema and on a table declared otherwise.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use session_schema::{BaseMessage, SessionState, Timestamp};
use session_state::{SaveMode, StateStore};

const ID: &str = "5a7e0a11-0000-4000-8000-000000000001";

/// Message `i` of a conversation: a user message when `i` is even, else an assistant's.
fn message(i: usize, text: &str) -> BaseMessage {
    let role = if i.is_multiple_of(2) {
        "user"
    } else {
        "assistant"
    };
    common::msg(role, &format!("{text} {i}"))
}

fn state(n: usize) -> SessionState {
    SessionState {
        schema_version: Some(1i64.into()),
        session_id: ID.to_owned(),
        updated_at: Timestamp::from_raw("2026-12-03T10:00:00.000Z"),
        invoke_seq: Some(n.try_into().unwrap()),
        messages: (0..n).map(|i| message(i, "message")).collect(),
        ..Default::default()
    }
}

fn line_len(m: &BaseMessage) -> u64 {
    serde_json::to_vec(m).unwrap().len() as u64 + 1
}

/// `(message_count, last_user_message)` of the stored row.
fn summary(root: &Path) -> (i64, Option<String>) {
    let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
    conn.query_row(
        "SELECT message_count, last_user_message FROM session_state WHERE session_id = ?1",
        [ID],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .unwrap()
}

fn stored(root: &Path) -> Vec<BaseMessage> {
    StateStore::open(root)
        .unwrap()
        .load(ID)
        .unwrap()
        .unwrap()
        .state
        .messages
}

#[test]
fn the_new_messages_are_appended_and_the_generation_is_the_stored_ones() {
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    let mut s = state(3);
    store.save(&s).unwrap();
    for n in 4..=6 {
        let kept = s.messages.len();
        s.messages.push(message(n - 1, "message"));
        s.invoke_seq = Some(n.try_into().unwrap());
        let report = store.save_appended(&s, kept).unwrap();
        assert_eq!(report.mode, SaveMode::Appended { messages: 1 });
        assert_eq!(report.bytes_written, line_len(&s.messages[n - 1]));
        // The generation the save reports is the one a reader finds: the row's fingerprint
        // taken from the bound values equals the stored row's.
        let loaded = store.load(ID).unwrap().unwrap();
        assert_eq!(loaded.generation, Some(report.generation));
        assert_eq!(loaded.state.messages, s.messages);
    }
    assert_eq!(stored(dir.path()), s.messages);
}

#[test]
fn with_an_expected_generation_it_appends_or_is_a_conflict_writing_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    let mut s = state(3);
    let first = store
        .save_appended_expecting(&s, None, 0)
        .unwrap()
        .generation;
    let kept = s.messages.len();
    s.messages.push(message(3, "message"));
    let second = store
        .save_appended_expecting(&s, Some(first), kept)
        .unwrap();
    assert_eq!(second.mode, SaveMode::Appended { messages: 1 });
    assert_eq!(second.bytes_written, line_len(&s.messages[3]));
    let file = dir.path().join(format!("messages/{ID}.jsonl"));
    let len = std::fs::metadata(&file).unwrap().len();
    // A stale generation, or expecting no session: a conflict, nothing written.
    let mut more = s.clone();
    more.messages.push(message(4, "message"));
    for expected in [Some(first), None] {
        let err = store
            .save_appended_expecting(&more, expected, 4)
            .unwrap_err();
        assert!(
            matches!(err, session_state::StateError::Conflict { .. }),
            "{err}"
        );
    }
    assert_eq!(std::fs::metadata(&file).unwrap().len(), len);
    let loaded = store.load(ID).unwrap().unwrap();
    assert_eq!(loaded.generation, Some(second.generation));
    assert_eq!(loaded.state.messages, s.messages);
    // Through a lease, from the generation the last save reported.
    let lease = store.lease(ID).unwrap();
    let third = lease
        .save_appended_expecting(&more, Some(second.generation), 4)
        .unwrap();
    assert_eq!(third.mode, SaveMode::Appended { messages: 1 });
    drop(lease);
    assert_eq!(stored(dir.path()), more.messages);
}

#[test]
fn a_count_that_is_not_the_last_saves_falls_back_to_comparing_every_message() {
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    let mut s = state(4);
    store.save(&s).unwrap();

    // Compacted to two messages, the caller still saying four were kept.
    s.messages.truncate(2);
    s.messages.push(message(2, "summary"));
    let report = store.save_appended(&s, 4).unwrap();
    assert_eq!(report.mode, SaveMode::Rewritten);
    assert_eq!(stored(dir.path()), s.messages);

    // Too few: the list is still a prefix extension, found by comparing.
    s.messages.push(message(3, "message"));
    let report = store.save_appended(&s, 1).unwrap();
    assert_eq!(report.mode, SaveMode::Appended { messages: 1 });
    assert_eq!(stored(dir.path()), s.messages);
}

#[test]
fn the_last_kept_message_changed_in_place_is_seen() {
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    let mut s = state(4);
    store.save(&s).unwrap();
    s.messages[3] = message(3, "edited");
    s.messages.push(message(4, "message"));
    let report = store.save_appended(&s, 4).unwrap();
    assert_eq!(report.mode, SaveMode::Rewritten);
    assert_eq!(stored(dir.path()), s.messages);
}

#[test]
fn another_store_saving_in_between_makes_it_compare() {
    let dir = tempfile::tempdir().unwrap();
    let ours = StateStore::open(dir.path()).unwrap();
    let theirs = StateStore::open(dir.path()).unwrap();
    let mut s = state(2);
    ours.save(&s).unwrap();
    // Another writer replaced the first message; our cache still says two kept messages.
    let mut other = s.clone();
    other.messages[0] = message(0, "theirs");
    theirs.save(&other).unwrap();
    s.messages.push(message(2, "message"));
    let report = ours.save_appended(&s, 2).unwrap();
    assert_eq!(report.mode, SaveMode::Rewritten);
    assert_eq!(stored(dir.path()), s.messages);
}

#[test]
fn an_earlier_message_changed_in_place_is_not_compared() {
    // The contract's other side: the kept messages before the last are taken as the caller
    // says. Saved with `save`, the same list is rewritten.
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    let mut s = state(4);
    store.save(&s).unwrap();
    let saved = s.messages.clone();
    s.messages[0] = message(0, "edited");
    s.messages.push(message(4, "message"));
    let report = store.save_appended(&s, 4).unwrap();
    assert_eq!(report.mode, SaveMode::Appended { messages: 1 });
    let mut expected = saved;
    expected.push(message(4, "message"));
    assert_eq!(stored(dir.path()), expected);

    let report = store.save(&s).unwrap();
    assert_eq!(report.mode, SaveMode::Rewritten);
    assert_eq!(stored(dir.path()), s.messages);
}

#[test]
fn a_row_whose_columns_convert_values_gets_the_fingerprint_of_what_is_stored() {
    // A `session_state` declared by another tool with other column types: `schema_version`
    // as TEXT stores the bound integer as text, `invoke_seq` as REAL stores it as a float.
    // The generation a save reports must still be the one `load` computes from the row.
    let dir = tempfile::tempdir().unwrap();
    {
        let conn = rusqlite::Connection::open(dir.path().join("state.db")).unwrap();
        conn.execute_batch(
            "CREATE TABLE session_state (session_id TEXT PRIMARY KEY, updated_at TEXT NOT NULL, \
             run_id TEXT, invoke_seq REAL, schema_version TEXT NOT NULL, meta_json TEXT, \
             message_count INTEGER, last_user_message TEXT, workspace_root TEXT)",
        )
        .unwrap();
    }
    let store = StateStore::open(dir.path()).unwrap();
    let mut s = state(2);
    for n in 2..5 {
        let kept = s.messages.len();
        s.messages.push(message(n, "message"));
        s.invoke_seq = Some(n.try_into().unwrap());
        let report = if n == 2 {
            store.save(&s).unwrap()
        } else {
            store.save_appended(&s, kept).unwrap()
        };
        let loaded = store.load(ID).unwrap().unwrap();
        assert_eq!(loaded.generation, Some(report.generation), "save {n}");
        assert_eq!(loaded.state.messages, s.messages);
    }
    // Still appending: the bookkeeping matched the row each time.
    let kept = s.messages.len();
    s.messages.push(message(5, "message"));
    let report = store.save_appended(&s, kept).unwrap();
    assert_eq!(report.mode, SaveMode::Appended { messages: 1 });
}

#[test]
fn the_summary_names_the_last_user_message_whether_new_or_kept() {
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    let lease = store.lease(ID).unwrap();
    let mut s = state(1); // one user message
    lease.save(&s).unwrap();
    assert_eq!(summary(dir.path()), (1, Some("message 0".to_owned())));
    // Assistant messages only: the last user message is the kept one.
    for i in 1..4 {
        let kept = s.messages.len();
        s.messages.push(message(1, &format!("reply{i}")));
        lease.save_appended(&s, kept).unwrap();
        assert_eq!(
            summary(dir.path()),
            (kept as i64 + 1, Some("message 0".to_owned()))
        );
    }
    // A new user message among the new ones.
    let kept = s.messages.len();
    s.messages.push(message(0, "question"));
    s.messages.push(message(1, "answer"));
    lease.save_appended(&s, kept).unwrap();
    assert_eq!(summary(dir.path()), (6, Some("question 0".to_owned())));
    // Through `save` (the prefix found by comparing), the same.
    s.messages.push(message(1, "more"));
    lease.save(&s).unwrap();
    assert_eq!(summary(dir.path()), (7, Some("question 0".to_owned())));
}

#[test]
fn a_kept_prefix_out_of_date_is_summarized_from_the_callers_list() {
    // The caller edits its last user message in place (breaking `save_appended`'s contract)
    // while another store saves in between: the save compares every message, and the summary
    // is the caller's list's, not the remembered one.
    let dir = tempfile::tempdir().unwrap();
    let ours = StateStore::open(dir.path()).unwrap();
    let theirs = StateStore::open(dir.path()).unwrap();
    let mut s = state(2); // user, assistant
    ours.save(&s).unwrap();
    theirs.save(&s).unwrap(); // a commit of its own, same list
    s.messages[0] = message(0, "edited");
    s.messages.push(message(1, "reply"));
    ours.save_appended(&s, 2).unwrap();
    assert_eq!(stored(dir.path()), s.messages);
    assert_eq!(summary(dir.path()), (3, Some("edited 0".to_owned())));
}
