//! The README example of session-pg: a fleet worker appends to a run, resumes a session under
//! its lease and prunes old history. Needs a PostgreSQL server (see the README for the URL).

#![allow(clippy::print_stdout)]

use session_pg::{PgBackend, PgConfig, PgOptions};
use session_schema::parse_session_state;
use session_storage::{Expected, Extent, HolderInfo, RunCatalogue, SessionStore, StorageError};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A URL (a unix socket directory as `?host=`) or libpq key=value pairs; the password is never
    // shown: `Display`, `Debug` and every error print `***` instead.
    let config = PgConfig::parse("postgresql://worker:secret@/sessions?host=/run/postgresql")?;
    assert_eq!(
        config.to_string(),
        "postgresql://worker:***@/sessions?host=/run/postgresql"
    );
    let store = PgBackend::open_with(config, PgOptions::default())?; // migrates when needed

    // A worker appends a run's lines with the length it expects; after a lost acknowledgement it
    // sends the same lines again and is told they are already there.
    let run_id = "8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a";
    let header = concat!(
        r#"{"type":"header","schema_version":1,"run_id":"8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a","started_at":"2026-02-03T12:00:00.123Z"}"#,
        "\n"
    )
    .as_bytes();
    let first = store.append_lines(run_id, 0, header)?;
    assert!(store.append_lines(run_id, 0, header)?.was_retry());
    assert_eq!(store.read_all(run_id, Extent::Committed)?, header);
    assert_eq!(
        store.run_origin(run_id)?,
        Some(store.options().origin_host.clone())
    );

    // Any worker resumes a session: take its lease, load, save with compare-and-swap.
    let session_id = "f6d2c6d5-4a12-4cc4-bbc9-9a0c0d2b5af1";
    let lease = store.acquire_lease(session_id, &HolderInfo::this_process("worker-7"))?;
    let state = parse_session_state(
        br#"{"schema_version":1,"session_id":"f6d2c6d5-4a12-4cc4-bbc9-9a0c0d2b5af1","updated_at":"2026-02-03T12:00:02.900Z","messages":[]}"#,
    )?
    .value;
    let version = match store.load_session(session_id)? {
        Some(current) => store.save_session(&state, &Expected::Version(current.version))?,
        None => store.save_session(&state, &Expected::Absent)?,
    };
    lease.renew()?; // still ours? (LeaseLost if the connection holding it died)
    lease.release()?;
    let _ = (first, version);

    // Retention: what is older than 90 days, first as a dry run.
    let cutoff = session_schema::Timestamp::now().unix_millis().unwrap_or(0) - 90 * 86_400_000;
    let report = store.gc(cutoff, true)?;
    println!("would remove {} items", report.removed.len());
    let _: Option<StorageError> = None;
    Ok(())
}
