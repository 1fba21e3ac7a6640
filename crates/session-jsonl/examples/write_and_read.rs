//! Writing a run log with group commit, surviving a torn write, and reading back every
//! complete record plus a report of the damage. The crate README shows this same code.
//!
//! ```text
//! cargo run -p session-jsonl --example write_and_read
//! ```

// A command-line program: printing is its interface.
#![allow(clippy::print_stdout)]

use std::io::Write;

use session_jsonl::{DamageKind, Durability, RunWriter, WriterOptions, read_run};
use session_schema::{Header, Record, RunEnd, RunOutcome, RunStatus, RunStatusKind, Timestamp};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let root = dir.path(); // normally ~/.codelia/sessions
    let run_id = "8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a";
    let header = Header {
        schema_version: 1,
        run_id: run_id.into(),
        session_id: Some("f6d2c6d5-4a12-4cc4-bbc9-9a0c0d2b5af1".into()),
        started_at: Timestamp::from_raw("2026-02-03T12:00:00.123Z"),
        ..Default::default()
    };
    let status = |status| {
        Record::RunStatus(RunStatus {
            run_id: run_id.into(),
            ts: Timestamp::now(),
            status,
            ..Default::default()
        })
    };

    // `create` writes the header and makes the file and its directories durable. With group
    // commit, `append` returns once the record is on stable storage; appends from several
    // threads share one fdatasync.
    let opts = WriterOptions::with_durability(Durability::group_commit());
    let writer = RunWriter::create(root, &header, opts.clone())?;
    assert!(
        writer
            .path()
            .ends_with(format!("2026/02/03/{run_id}.jsonl"))
    );
    writer.append(&status(RunStatusKind::Running))?;
    let path = writer.path().to_owned();
    writer.close()?;

    // A crash in the middle of a write leaves half a line behind.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)?
        .write_all(br#"{"type":"run.status","run_id":"8f1d"#)?;

    // Reopening seals the fragment with a newline; nothing written is changed or truncated.
    let writer = RunWriter::open_append(&path, opts)?;
    writer.append(&Record::RunEnd(RunEnd {
        run_id: run_id.into(),
        ts: Timestamp::now(),
        outcome: RunOutcome::Completed,
        ..Default::default()
    }))?;
    writer.close()?;

    // Reading never fails on bad data: every complete record, and a report for each damaged
    // line with its line number and byte offset.
    let run = read_run(&path)?;
    let kinds: Vec<&str> = run.records.iter().map(|r| r.record().kind()).collect();
    assert_eq!(kinds, ["header", "run.status", "run.end"]);
    assert_eq!(run.damage.len(), 1);
    assert_eq!(run.damage[0].kind, DamageKind::CorruptLine);
    assert_eq!(run.damage[0].line, 3);
    println!("{}: {kinds:?}", path.display());
    println!("damage: {}", run.damage[0]);
    Ok(())
}
