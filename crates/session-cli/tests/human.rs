//! Snapshot tests of the human output on a copy of the sample store: each
//! `test_data/human/<name>.cmd` holds the arguments (one per line; lines `env:NAME=VALUE` set
//! an environment variable first, e.g. `TZ` or `SESSIONS_FORCE_TTY=80` for a table laid out
//! for an 80-column terminal), `<name>.out` the expected stdout and exit status. `UPDATE_EXPECT=1 cargo test -p session-cli --test human` rewrites the
//! `.out` files. The facts behind these snapshots are asserted separately in `tests/cli.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::copy_tree;

use std::path::{Path, PathBuf};
use std::process::Command;

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs one case and compares (or rewrites) its expectation.
fn check(case: &Path, root: &Path) -> Option<String> {
    let lines: Vec<String> = std::fs::read_to_string(case)
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    let (vars, args): (Vec<String>, Vec<String>) =
        lines.into_iter().partition(|l| l.starts_with("env:"));
    let vars = vars
        .iter()
        .filter_map(|v| v["env:".len()..].split_once('='));
    let out = Command::new(env!("CARGO_BIN_EXE_sessions"))
        .env_clear()
        .env("HOME", "/nonexistent-home")
        .env("TZ", "UTC")
        .env("SESSIONS_NOW", "2026-11-30T12:00:00Z")
        .envs(vars)
        .arg("--root")
        .arg(root)
        .args(&args)
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let actual = format!(
        "{stdout}[exit status {}]\n",
        out.status.code().unwrap_or(-1)
    );
    let expected_path = case.with_extension("out");
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(&expected_path, &actual).unwrap();
        return None;
    }
    let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
    (expected != actual).then(|| {
        format!(
            "{}:\n--- expected\n{expected}--- actual\n{actual}",
            case.display()
        )
    })
}

#[test]
fn human_output_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    copy_tree(&session_test_support::sample_sessions_dir(), &root);
    // Stored data is not being written: make the copies' run files as old as they are meant
    // to be (`repair` leaves a torn tail modified in the last two minutes alone).
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    let mut stack = vec![root.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.path().is_dir() {
                stack.push(e.path());
            } else {
                let f = std::fs::File::options().write(true).open(e.path()).unwrap();
                f.set_modified(hour_ago).unwrap();
            }
        }
    }
    let mut cases: Vec<PathBuf> = std::fs::read_dir(manifest_dir().join("test_data/human"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "cmd"))
        .collect();
    cases.sort();
    assert!(!cases.is_empty());
    let failures: Vec<String> = cases.iter().filter_map(|c| check(c, &root)).collect();
    assert!(
        failures.is_empty(),
        "{} snapshot(s) differ (UPDATE_EXPECT=1 rewrites):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The display column at which `needle` starts in `line`.
fn column_of(line: &str, needle: &str) -> Option<usize> {
    use unicode_width::UnicodeWidthStr;
    line.find(needle).map(|i| line[..i].width())
}

#[test]
fn tables_fit_80_columns_and_align_in_every_time_zone() {
    use unicode_width::UnicodeWidthStr;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    copy_tree(&session_test_support::sample_sessions_dir(), &root);
    // POSIX zones, so that no time zone database is needed; offsets of 5 and 6 characters.
    for (tz, offset) in [
        ("UTC", "Z"),
        ("JST-9", "+09:00"),
        ("NPT-5:45", "+05:45"),
        ("PST8", "-08:00"),
    ] {
        for (args, key) in [
            (&["runs"][..], "7a1e00"),
            (&["sessions", "--all"][..], "5a1e00"),
        ] {
            let out = Command::new(env!("CARGO_BIN_EXE_sessions"))
                .env_clear()
                .env("HOME", "/nonexistent-home")
                .env("TZ", tz)
                .env("SESSIONS_FORCE_TTY", "80")
                .arg("--root")
                .arg(&root)
                .args(args)
                .output()
                .unwrap();
            assert!(out.status.success(), "{tz} {args:?}");
            let text = String::from_utf8(out.stdout).unwrap();
            let rows: Vec<&str> = text.lines().filter(|l| l.contains(key)).collect();
            assert!(rows.len() >= 8, "{tz} {args:?}: {text}");
            for l in text.lines() {
                assert!(
                    l.width() <= 80,
                    "{tz} {args:?}: {l:?} is {} wide",
                    l.width()
                );
            }
            // Every time carries the zone's offset, and the column after it starts at one
            // display column in every row.
            let at: Vec<Option<usize>> = rows.iter().map(|l| column_of(l, key)).collect();
            let want = 19 + offset.len() + 1;
            assert!(at.iter().all(|c| *c == Some(want)), "{tz} {args:?}: {text}");
            for row in &rows {
                assert_eq!(row.get(19..19 + offset.len()), Some(offset), "{tz}: {row}");
            }
        }
    }
}
