//! Reading run-log lines the reference runtime wrote, looking at them through the typed records
//! and writing them back byte for byte; then building a record of our own. The crate README
//! shows this same code.
//!
//! ```text
//! cargo run -p session-schema --example round_trip
//! ```

// A command-line program: printing is its interface.
#![allow(clippy::print_stdout)]

use session_schema::{Record, RunEnd, RunOutcome, Timestamp, check_id, parse_record, to_line};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A `run.end` as the reference writes it, plus a member this version does not know.
    let line = br#"{"type":"run.end","run_id":"8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a","ts":"2026-02-03T12:00:02.800Z","outcome":"completed","final":"Three files.","x_added_later":{"n":1}}"#;
    let parsed = parse_record(line)?;
    let Record::RunEnd(end) = &parsed.value else {
        return Err("expected a run.end record".into());
    };
    assert_eq!(end.outcome, RunOutcome::Completed);
    assert_eq!(end.final_text.as_deref(), Some("Three files."));
    // The unknown member is kept in its place: writing the record back gives the same bytes.
    assert_eq!(parsed.to_json()?, line);

    // A record type from a newer or foreign writer is kept whole, not dropped.
    let custom = br#"{"type":"x.acme.note","run_id":"8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a","ts":"2026-02-03T12:00:03.000Z","text":"hi"}"#;
    let unknown = parse_record(custom)?;
    assert!(matches!(unknown.value, Record::Unknown(_)));
    assert_eq!(unknown.to_json()?, custom);

    // Writing: ids become file names, so check them before use. `to_line` gives the
    // reference's `JSON.stringify(record) + "\n"`.
    let run_id = "8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a";
    check_id(run_id)?;
    let record = Record::RunEnd(RunEnd {
        run_id: run_id.into(),
        ts: Timestamp::from_raw("2026-02-03T12:00:04.000Z"),
        outcome: RunOutcome::Cancelled,
        ..Default::default()
    });
    let written = to_line(&record)?;
    assert_eq!(
        written,
        b"{\"type\":\"run.end\",\"run_id\":\"8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a\",\"ts\":\"2026-02-03T12:00:04.000Z\",\"outcome\":\"cancelled\"}\n"
    );
    print!("{}", String::from_utf8_lossy(&written));
    Ok(())
}
