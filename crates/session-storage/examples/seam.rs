//! Appending to a run with compare-and-swap on its length, and saving a session with
//! compare-and-swap on its version, through the storage traits of the local backend. The crate
//! README shows this same code.
//!
//! ```text
//! cargo run -p session-storage --example seam
//! ```

use session_schema::parse_session_state;
use session_storage::local::LocalBackend;
use session_storage::{Expected, Extent, RunCatalogue, SessionStore, StorageError};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let backend = LocalBackend::open(dir.path())?;

    // Append complete lines to a run, with compare-and-swap on the run's committed length.
    let runs: &dyn RunCatalogue = &backend;
    let run_id = "8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a";
    let header = concat!(
        r#"{"type":"header","schema_version":1,"run_id":"8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a","started_at":"2026-02-03T12:00:00.123Z"}"#,
        "\n"
    )
    .as_bytes();
    let first = runs.append_lines(run_id, 0, header)?;
    // The acknowledgement got lost and the writer sends the same lines again: recognised, not
    // duplicated.
    let retry = runs.append_lines(run_id, 0, header)?;
    assert!(retry.was_retry() && retry.committed_len == first.end);
    let end = concat!(
        r#"{"type":"run.end","run_id":"8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a","ts":"2026-02-03T12:00:02.800Z","outcome":"completed"}"#,
        "\n"
    )
    .as_bytes();
    runs.append_lines(run_id, first.end, end)?;
    // Another writer's lines at an old length are a typed conflict; nothing is written.
    let stale = runs.append_lines(run_id, first.end, b"{\"type\":\"run.status\"}\n");
    assert!(
        matches!(stale, Err(StorageError::LengthConflict { committed, .. }) if committed == first.end + end.len() as u64)
    );
    assert_eq!(
        runs.read_all(run_id, Extent::Committed)?,
        [header, end].concat()
    );
    assert_eq!(runs.read_run(run_id)?.records.len(), 2);

    // Save a session with compare-and-swap on its version.
    let sessions: &dyn SessionStore = &backend;
    let mut state = parse_session_state(
        br#"{"schema_version":1,"session_id":"f6d2c6d5-4a12-4cc4-bbc9-9a0c0d2b5af1","updated_at":"2026-02-03T12:00:02.900Z","messages":[{"role":"user","content":"list files"}]}"#,
    )?
    .value;
    let v1 = sessions.save_session(&state, &Expected::Absent)?;
    let loaded = sessions
        .load_session(&state.session_id)?
        .ok_or("not saved")?;
    assert_eq!(loaded.version, v1);
    state.run_id = Some(run_id.to_owned());
    let v2 = sessions.save_session(&state, &Expected::Version(v1.clone()))?;
    // A writer still holding the old version loses, and learns the current one.
    match sessions.save_session(&state, &Expected::Version(v1)) {
        Err(StorageError::VersionConflict { found, .. }) => assert_eq!(found, Some(v2)),
        other => return Err(format!("expected a version conflict, got {other:?}").into()),
    }
    Ok(())
}
