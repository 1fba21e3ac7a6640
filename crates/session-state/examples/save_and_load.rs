//! Saving a session's resumable state, growing it with an incremental save, refusing a save
//! made from an outdated copy, and loading and listing it. The crate README shows this same
//! code.
//!
//! ```text
//! cargo run -p session-state --example save_and_load
//! ```

// A command-line program: printing is its interface.
#![allow(clippy::print_stdout)]

use session_schema::{SessionState, Timestamp, parse_message};
use session_state::{ListQuery, LoadSource, SaveMode, StateStore};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    // state.db (the reference's schema, WAL, synchronous=FULL) plus messages/<id>.jsonl.
    let store = StateStore::open(dir.path())?; // normally ~/.codelia/sessions

    let mut state = SessionState {
        session_id: "f6d2c6d5-4a12-4cc4-bbc9-9a0c0d2b5af1".into(),
        updated_at: Timestamp::from_raw("2026-02-03T12:00:02.900Z"),
        run_id: Some("8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a".into()),
        invoke_seq: Some(1),
        messages: vec![parse_message(br#"{"role":"user","content":"list files"}"#)?.value],
        ..Default::default()
    };
    // The first save writes the messages file, then commits the row in one transaction.
    let first = store.save(&state)?;

    // The history only grew: the next save appends the new line (one write, one fsync)
    // instead of rewriting the file. `save_expecting` is a compare-and-swap on the generation.
    let answer = parse_message(br#"{"role":"assistant","content":"Cargo.toml src"}"#)?.value;
    state.messages.push(answer);
    state.updated_at = Timestamp::from_raw("2026-02-03T12:00:05.000Z");
    let second = store.save_expecting(&state, Some(first.generation))?;
    assert_eq!(second.mode, SaveMode::Appended { messages: 1 });

    // A second process (or window) still holding the first generation cannot overwrite it.
    let stale = store.save_expecting(&state, Some(first.generation));
    assert!(stale.is_err_and(|e| e.is_conflict()));

    // Loading reads only committed bytes: after a crash at any point of a save it returns the
    // complete old or the complete new state. Damaged lines would be in `damage`.
    let loaded = store.load(&state.session_id)?.ok_or("session not saved")?;
    assert_eq!(loaded.state.messages, state.messages);
    assert_eq!(loaded.source, LoadSource::Db);
    assert!(loaded.damage.is_empty());

    // The listing the reference's session picker shows, newest first.
    let page = store.list(&ListQuery::all().limit(50))?;
    let summary = &page.entries[0].summary;
    assert_eq!(summary.message_count, Some(2));
    assert_eq!(summary.last_user_message.as_deref(), Some("list files"));
    println!(
        "{}: {} messages, last user message {:?}",
        summary.session_id,
        loaded.state.messages.len(),
        summary.last_user_message.as_deref().unwrap_or("")
    );
    Ok(())
}
