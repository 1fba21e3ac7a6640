//! The thin reader: errors carry the path or run id, damage is data, runs are found by id.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::error::Error as _;

use session_replay::DiagnosticKind;
use session_replay::io::{Error, find_and_read_run, read_run};
use session_schema::Timestamp;

#[test]
fn a_missing_file_is_an_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nope.jsonl");
    let err = read_run(&path).unwrap_err();
    assert!(matches!(&err, Error::ReadRun { path: p, .. } if p == &path));
    let text = err.to_string();
    assert!(text.starts_with("cannot read run log "), "{text}");
    assert!(err.source().is_some());
}

#[test]
fn unsafe_or_unknown_run_ids_are_find_errors() {
    let dir = tempfile::tempdir().unwrap();
    for id in ["../../etc/passwd", "8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a"] {
        let err = find_and_read_run(dir.path(), id, None).unwrap_err();
        assert!(
            matches!(&err, Error::FindRun { run_id, .. } if run_id == id),
            "{err}"
        );
    }
}

#[test]
fn finds_a_fixture_run_by_id_and_reports_its_crash() {
    let root = session_test_support::codelia_sessions_dir();
    let id = "2a11c3a2-3276-4762-88f9-5f8918cb8042";
    let started = Timestamp::from_raw("2026-11-30T11:39:08.452Z");
    let (log, diags) = find_and_read_run(&root, id, Some(&started)).unwrap();
    assert_eq!(session_replay::RunMeta::of(&log).run_id, id);
    assert_eq!(log.line_of(0), Some(1));
    let kinds: Vec<DiagnosticKind> = diags.iter().map(|d| d.kind).collect();
    assert_eq!(kinds, vec![DiagnosticKind::NoRunEnd]);
}
