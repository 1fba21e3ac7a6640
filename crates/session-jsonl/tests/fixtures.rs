//! The real run logs recorded from the reference runtime (`testdata/codelia-runtime`)
//! read with zero damage, and the cheap look-ups agree with `expected.json`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::fs;
use std::path::PathBuf;

use serde_json::Value;
use session_jsonl::{
    FollowOptions, Follower, Item, ReaderOptions, RunEndState, compress_run, find_run,
    list_run_files, read_header, read_run, read_run_with, terminal_state,
};
use session_schema::Timestamp;

fn fixture_root() -> PathBuf {
    session_test_support::codelia_runtime_dir()
}

fn expected_runs() -> Vec<(PathBuf, Value)> {
    let text = fs::read_to_string(fixture_root().join("expected.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    let runs = v["runs"].as_object().unwrap();
    assert_eq!(runs.len(), 20);
    runs.values()
        .map(|r| (fixture_root().join(r["file"].as_str().unwrap()), r.clone()))
        .collect()
}

#[test]
fn every_fixture_run_reads_without_damage_and_byte_exact() {
    for (path, exp) in expected_runs() {
        let opts = ReaderOptions {
            keep_raw: true,
            ..ReaderOptions::default()
        };
        let run = read_run_with(&path, opts).unwrap();
        assert!(
            run.damage.is_empty(),
            "{}: {:?}",
            path.display(),
            run.damage
        );
        assert_eq!(run.records.len() as u64, exp["lines"].as_u64().unwrap());
        let types: Vec<&str> = run.records.iter().map(|r| r.parsed.value.kind()).collect();
        let want: Vec<&str> = exp["types_in_order"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        assert_eq!(types, want, "{}", path.display());
        let bytes = fs::read(&path).unwrap();
        let mut offset = 0u64;
        for (i, r) in run.records.iter().enumerate() {
            assert_eq!(r.line, i as u64 + 1);
            assert_eq!(r.offset, offset);
            let raw = r.raw.as_deref().unwrap();
            assert_eq!(raw, &bytes[offset as usize..(offset + r.len) as usize]);
            assert_eq!(
                r.parsed.to_json().unwrap(),
                raw,
                "line {} of {}",
                r.line,
                path.display()
            );
            offset += r.len + 1;
        }
        assert_eq!(offset, exp["bytes"].as_u64().unwrap());
    }
}

#[test]
fn headers_and_terminal_states_match_expected() {
    for (path, exp) in expected_runs() {
        let head = read_header(&path).unwrap();
        assert!(
            head.is_header() && head.damage.is_empty(),
            "{}",
            path.display()
        );
        assert_eq!(head.facts.session_id.as_deref(), exp["session_id"].as_str());
        assert_eq!(
            head.facts.started_at.as_ref().map(Timestamp::as_str),
            exp["started_at"].as_str()
        );
        assert_eq!(head.facts.schema_version, Some(1));

        let tail = terminal_state(&path).unwrap();
        assert_eq!(tail.has_end(), exp["has_run_end"].as_bool().unwrap());
        assert_eq!(tail.last_type.as_deref(), exp["last_record_type"].as_str());
        assert!(!tail.torn_tail);
        match &tail.end {
            RunEndState::Ended { outcome, error, .. } => {
                assert_eq!(Some(outcome.as_str()), exp["run_end"]["outcome"].as_str());
                assert_eq!(
                    error.as_ref().map(|e| e.name.as_str()),
                    exp["run_error"]["name"].as_str(),
                    "{}",
                    path.display()
                );
            }
            RunEndState::Open => assert!(exp["run_end"].is_null()),
            RunEndState::Errored { .. } => panic!("no fixture ends in run.error"),
        }
        // The tail scan reads a small part of the file (the header alone is ~38 KB).
        assert!(
            tail.bytes_read <= 64 * 1024,
            "{}: {}",
            path.display(),
            tail.bytes_read
        );
    }
}

#[test]
fn layout_lists_and_finds_every_fixture_run() {
    let root = fixture_root().join("sessions");
    let listing = list_run_files(&root).unwrap();
    assert_eq!(listing.files.len(), 20);
    assert!(listing.nonstandard_dirs.is_empty() && listing.skipped.is_empty());
    for (path, exp) in expected_runs() {
        let run_id = path.file_stem().unwrap().to_str().unwrap();
        assert!(
            listing
                .files
                .iter()
                .any(|f| f.path == path && f.run_id == run_id)
        );
        let ts = Timestamp::from_raw(exp["started_at"].as_str().unwrap());
        let found = find_run(&root, run_id, Some(&ts)).unwrap();
        assert_eq!(found.path, path);
        assert!(found.duplicates.is_empty() && !found.by_scan);
        let found = find_run(&root, run_id, None).unwrap();
        assert_eq!(found.path, path);
    }
}

fn items_text(items: impl IntoIterator<Item = Item>) -> Vec<String> {
    items
        .into_iter()
        .map(|i| match i {
            Item::Record(r) => format!("{} {} {}", r.line, r.offset, r.parsed.value.kind()),
            Item::Damage(d) => format!("damage {d}"),
        })
        .collect()
}

#[test]
fn archived_and_followed_fixture_runs_read_the_same() {
    let tmp = tempfile::tempdir().unwrap();
    for (path, _) in expected_runs().into_iter().take(4) {
        let copy = tmp.path().join(path.file_name().unwrap());
        fs::copy(&path, &copy).unwrap();
        let plain = read_run(&copy).unwrap();
        let want = items_text(plain.records.iter().cloned().map(Item::Record));

        // Nobody holds the lock of a copied file: the follower stops at its end even for the
        // crashed run without `run.end`.
        let opts = FollowOptions {
            stop_when_unlocked: true,
            ..FollowOptions::default()
        };
        let mut follower = Follower::open(&copy, opts).unwrap();
        let followed: Vec<Item> = follower.by_ref().map(Result::unwrap).collect();
        assert_eq!(items_text(followed), want);

        let archived = compress_run(&copy).unwrap();
        assert!(!copy.exists());
        assert!(archived.to_string_lossy().ends_with(".jsonl.zst"));
        let back = read_run(&archived).unwrap();
        assert!(back.damage.is_empty());
        assert_eq!(items_text(back.records.into_iter().map(Item::Record)), want);
        let head = read_header(&archived).unwrap();
        assert!(head.header.is_some());
        let (a, b) = (
            terminal_state(&archived).unwrap(),
            terminal_state(&path).unwrap(),
        );
        assert_eq!(
            (a.end, a.last_type, a.last_ts),
            (b.end, b.last_type, b.last_ts)
        );
    }
}
