//! `RunCatalogue::read_run` gives session-jsonl's `RunRead`, the one type for a run read whole;
//! the former name `ParsedRun` still names it for one release.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use session_jsonl::DamageKind;
use session_storage::local::LocalBackend;
use session_storage::{RunCatalogue, RunRead};

const RUN_ID: &str = "r-read";

#[test]
fn read_run_is_the_run_read_with_its_bytes_and_no_path() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let b = LocalBackend::open(&root).unwrap();
    let header = format!(
        "{{\"type\":\"header\",\"schema_version\":1,\"run_id\":\"{RUN_ID}\",\"started_at\":\"2026-02-03T12:00:00.000Z\"}}\n"
    );
    let garbage = "not json\n";
    b.append_lines(RUN_ID, 0, format!("{header}{garbage}").as_bytes())
        .unwrap();

    let read: RunRead = b.read_run(RUN_ID).unwrap();
    assert_eq!(read.path, PathBuf::new());
    assert_eq!(read.bytes, (header.len() + garbage.len()) as u64);
    let records: Vec<(&str, u64, u64)> = read
        .records
        .iter()
        .map(|r| (r.record().kind(), r.line, r.offset))
        .collect();
    assert_eq!(records, [("header", 1, 0)]);
    let damage: Vec<(DamageKind, u64, u64, u64)> = read
        .damage
        .iter()
        .map(|d| (d.kind, d.line, d.offset, d.len))
        .collect();
    assert_eq!(
        damage,
        [(DamageKind::CorruptLine, 2, header.len() as u64, 8)]
    );

    // Code written against the former name still builds and sees the same value.
    #[allow(deprecated)]
    let old: session_storage::ParsedRun = b.read_run(RUN_ID).unwrap();
    assert_eq!(old.damage, read.damage);
    assert_eq!(old.records.len(), read.records.len());
}
