//! What finding one run by id costs: once the run index knows the run, `show`, `export`,
//! `replay`, `tail` and `verify RUN` look only in the run's own date directory and the days
//! before and after it (six names looked up), however many date directories the store has. A run the index does not know
//! yet, or whose indexed file is gone, is still found (by probing the tree, or beside the
//! indexed file).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use session_cli::{Env, Terminal, run_with};
use session_jsonl::{Durability, RunWriter, WriterOptions, run_lookups_on_this_thread};
use session_schema::{Header, Record, RunEnd, RunOutcome, Timestamp};

/// Day directories of the generated store (2026-01-01 onwards, one run each).
const DAYS: u32 = 40;

fn run_id(n: u32) -> String {
    format!("00000000-0000-4000-8000-{n:012}")
}

fn write_run(root: &Path, n: u32, started_at: &str) {
    write_run_id(root, &run_id(n), n, started_at);
}

fn write_run_id(root: &Path, id: &str, n: u32, started_at: &str) {
    let id = id.to_owned();
    let header = Header {
        schema_version: 1,
        run_id: id.clone(),
        session_id: Some(format!("s-{n}")),
        started_at: Timestamp::from_raw(started_at),
        ..Default::default()
    };
    let w = RunWriter::create(
        root,
        &header,
        WriterOptions::with_durability(Durability::Buffered),
    )
    .unwrap();
    w.append(&Record::RunEnd(RunEnd {
        run_id: id,
        ts: Timestamp::from_raw(started_at),
        outcome: RunOutcome::Completed,
        ..Default::default()
    }))
    .unwrap();
    w.close().unwrap();
}

fn store() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for n in 0..DAYS {
        let day = 1 + n % 28;
        let month = 1 + n / 28;
        write_run(
            dir.path(),
            n,
            &format!("2026-{month:02}-{day:02}T10:00:00.000Z"),
        );
    }
    dir
}

/// Runs `sessions --root <root> <args>` in-process; (exit code, stdout, stderr, run lookups).
fn sessions(root: &Path, args: &[&str]) -> (i32, String, String, u64) {
    let env = Env::from_pairs([
        ("HOME".to_owned(), "/nonexistent-home".to_owned()),
        ("TZ".to_owned(), "UTC".to_owned()),
    ]);
    let mut argv: Vec<std::ffi::OsString> = vec!["sessions".into(), "--root".into(), root.into()];
    argv.extend(args.iter().map(Into::into));
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let before = run_lookups_on_this_thread();
    let code = run_with(argv, &mut out, &mut err, &env, Terminal::default());
    let lookups = run_lookups_on_this_thread() - before;
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
        lookups,
    )
}

#[test]
fn an_indexed_run_is_found_without_probing_the_tree() {
    let dir = store();
    let root = dir.path();
    // Without an index every date directory is probed: root, year and two months listed, two
    // names per day directory.
    let target = run_id(33);
    let (code, _, err, lookups) = sessions(root, &["show", &target]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(lookups, 4 + 2 * u64::from(DAYS));

    let (code, _, err, _) = sessions(root, &["runs", "--limit", "1"]);
    assert_eq!(code, 0, "{err}");
    for args in [
        vec!["show", target.as_str()],
        vec!["export", target.as_str(), "--format", "md"],
        vec!["export", target.as_str(), "--format", "jsonl"],
        vec!["tail", target.as_str()],
        vec!["verify", target.as_str()],
        vec!["replay", target.as_str()],
    ] {
        let (code, out, err, lookups) = sessions(root, &args);
        if args[0] == "replay" {
            // A run without model calls: found, then "no invocation" (not found, 3).
            assert!(err.contains("no llm.request records"), "{err}");
        } else {
            assert_eq!(code, 0, "{args:?}: {out}{err}");
        }
        assert_eq!(lookups, 6, "{args:?}");
    }
    // A unique prefix costs the same: a range of the run-id index, then the run's own days.
    let target = "cafe0000-0000-4000-8000-000000000001";
    write_run_id(root, target, 500, "2026-01-20T12:00:00.000Z");
    let (code, _, err, _) = sessions(root, &["runs", "--limit", "1"]);
    assert_eq!(code, 0, "{err}");
    let prefix = "cafe0000";
    for args in [
        vec!["show", prefix],
        vec!["tail", prefix],
        vec!["verify", prefix],
        vec!["export", prefix, "--format", "jsonl"],
    ] {
        let (code, out, err, lookups) = sessions(root, &args);
        assert_eq!(code, 0, "{args:?}: {out}{err}");
        assert_eq!(lookups, 6, "{args:?}");
    }
    // A session the index knows is shown without looking for a run file of its id.
    let (code, out, err, lookups) = sessions(root, &["show", "s-33"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("00000000-0000-4000-8000-000000000033"),
        "{out}"
    );
    assert_eq!(lookups, 0);
    let (_, whole, _, _) = sessions(root, &["export", target, "--format", "jsonl"]);
    let (_, short, _, _) = sessions(root, &["export", prefix, "--format", "jsonl"]);
    assert_eq!(short, whole);
    // An ambiguous one is refused from the index alone: no date directory looked at.
    let (code, _, err, lookups) = sessions(root, &["show", "00000000-0000-4000-8000-00000000003"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is ambiguous: 10 runs match"), "{err}");
    assert_eq!(lookups, 0);
}

#[test]
fn a_run_the_index_does_not_know_or_whose_file_moved_is_still_found() {
    let dir = store();
    let root = dir.path();
    let (code, _, err, _) = sessions(root, &["runs", "--limit", "1"]);
    assert_eq!(code, 0, "{err}");

    // Written after the index was built: no row, so the tree is probed.
    write_run(root, 100, "2026-02-20T11:00:00.000Z");
    let (code, out, err, lookups) = sessions(root, &["export", &run_id(100), "--format", "jsonl"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 2);
    assert_eq!(lookups, 4 + 2 * (u64::from(DAYS) + 1));

    // Archived after indexing: the index names the plain file, the archive beside it is used.
    let target = run_id(5);
    let plain = root.join("2026/01/06").join(format!("{target}.jsonl"));
    session_jsonl::compress_run(&plain).unwrap();
    assert!(!plain.exists());
    let (code, out, err, lookups) = sessions(root, &["export", &target, "--format", "jsonl"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 2);
    assert_eq!(lookups, 6);

    // Unknown ids are still "not found", unsafe ones a usage error.
    assert_eq!(sessions(root, &["tail", &run_id(999)]).0, 3);
    assert_eq!(sessions(root, &["tail", "../x"]).0, 2);
}
