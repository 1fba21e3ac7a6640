//! The everyday terminal: short ids and `-`/`--last`, the store root from `$SESSIONS_ROOT`,
//! the time forms people type, calendar groups of `stats` in a time zone, `export`'s format
//! from the file name, and `tail -n`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::plant::{NOW, run_file};
use serde_json::Value;

struct Out {
    code: i32,
    out: String,
    err: String,
}

/// `sessions <args>` with a clean environment (fixed now, `TZ` as given), from `cwd`.
fn sessions_env(root: Option<&Path>, env: &[(&str, &str)], args: &[&str]) -> Out {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sessions"));
    c.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", "/nonexistent-home")
        .env("TZ", "UTC")
        .env("SESSIONS_NOW", NOW);
    for (k, v) in env {
        c.env(k, v);
    }
    if let Some(root) = root {
        c.arg("--root").arg(root);
    }
    let o = c.args(args).output().unwrap();
    let r = Out {
        code: o.status.code().unwrap_or(-1),
        out: String::from_utf8(o.stdout).unwrap(),
        err: String::from_utf8(o.stderr).unwrap(),
    };
    assert!(!r.err.contains("panicked"), "panic: {}", r.err);
    r
}

fn sessions(root: &Path, args: &[&str]) -> Out {
    sessions_env(Some(root), &[], args)
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// A run file with a header, a `run.start` and a `run.end{completed}`, started at `started`.
fn plant_run(root: &Path, run_id: &str, session_id: &str, started: &str, input: &str) -> PathBuf {
    let day = format!("{}/{}/{}", &started[..4], &started[5..7], &started[8..10]);
    run_file(
        root,
        &day,
        &format!("{run_id}.jsonl"),
        &[
            format!(
                r#"{{"type":"header","schema_version":1,"run_id":"{run_id}","session_id":"{session_id}","started_at":"{started}"}}"#
            ),
            format!(
                r#"{{"type":"run.start","run_id":"{run_id}","session_id":"{session_id}","ts":"{started}","input":{{"type":"text","text":"{input}"}}}}"#
            ),
            format!(
                r#"{{"type":"run.end","run_id":"{run_id}","ts":"{started}","outcome":"completed","final":"done"}}"#
            ),
        ],
    )
}

// ---------------------------------------------------------------------------------------------
// stats --by day|week|month --tz, and the time forms of --since/--until.

/// Four runs on the edges of days, ISO weeks, months and years in Tokyo (UTC+9) and New York.
fn calendar_store() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    // Saturday 2026-10-31 in UTC and New York; Sunday 2026-11-01 in Tokyo (both ISO W44).
    plant_run(&root, "r1-0000", "s-1", "2026-10-31T20:00:00.000Z", "one");
    // Sunday 2026-11-29 (W48) in UTC and New York; Monday 2026-11-30 (W49) in Tokyo.
    plant_run(&root, "r2-0000", "s-1", "2026-11-29T23:30:00.000Z", "two");
    // Monday 2026-11-30 (W49) in UTC and Tokyo; still Sunday 2026-11-29 (W48) in New York.
    plant_run(&root, "r3-0000", "s-1", "2026-11-30T02:00:00.000Z", "three");
    // Thursday 2026-12-31 in UTC; Friday 2027-01-01 in Tokyo, still ISO week 2026-W53.
    plant_run(&root, "r4-0000", "s-1", "2026-12-31T16:00:00.000Z", "four");
    (dir, root)
}

/// `(key, runs)` of each group line of `stats --json` grouped `by`, the summary left out.
fn groups(out: &Out, by: &str) -> Vec<(String, u64)> {
    assert_eq!(out.code, 0, "{}", out.err);
    json_lines(&out.out)
        .iter()
        .filter(|v| v["type"] == "stats_group")
        .map(|v| {
            assert_eq!(v["by"], by);
            (
                v["key"].as_str().unwrap().to_owned(),
                v["runs"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn pairs(p: &[(&str, u64)]) -> Vec<(String, u64)> {
    p.iter().map(|(k, n)| ((*k).to_owned(), *n)).collect()
}

#[test]
fn stats_groups_by_iso_week_and_month_in_the_zone_asked_for() {
    let (_dir, root) = calendar_store();
    let week = |tz: &str| {
        groups(
            &sessions(&root, &["stats", "--by", "week", "--tz", tz, "--json"]),
            "week",
        )
    };
    assert_eq!(
        week("Asia/Tokyo"),
        pairs(&[("2026-W44", 1), ("2026-W49", 2), ("2026-W53", 1)])
    );
    assert_eq!(
        week("UTC"),
        pairs(&[
            ("2026-W44", 1),
            ("2026-W48", 1),
            ("2026-W49", 1),
            ("2026-W53", 1)
        ])
    );
    assert_eq!(
        week("America/New_York"),
        pairs(&[("2026-W44", 1), ("2026-W48", 2), ("2026-W53", 1)])
    );
    let month = |tz: &str| {
        groups(
            &sessions(&root, &["stats", "--by", "month", "--tz", tz, "--json"]),
            "month",
        )
    };
    assert_eq!(
        month("Asia/Tokyo"),
        pairs(&[("2026-11", 3), ("2027-01", 1)])
    );
    assert_eq!(
        month("utc"),
        pairs(&[("2026-10", 1), ("2026-11", 2), ("2026-12", 1)])
    );
    let day = groups(
        &sessions(
            &root,
            &["stats", "--by", "day", "--tz", "Asia/Tokyo", "--json"],
        ),
        "day",
    );
    assert_eq!(
        day,
        pairs(&[("2026-11-01", 1), ("2026-11-30", 2), ("2027-01-01", 1)])
    );
    // `local` is $TZ; the zone is named on every line of a calendar grouping.
    let local = sessions_env(
        Some(&root),
        &[("TZ", "Asia/Tokyo")],
        &["stats", "--by", "week", "--json"],
    );
    assert_eq!(
        groups(&local, "week"),
        pairs(&[("2026-W44", 1), ("2026-W49", 2), ("2026-W53", 1)])
    );
    let lines = json_lines(&local.out);
    assert!(lines.iter().all(|l| l["tz"] == "Asia/Tokyo"), "{lines:?}");
    assert_eq!(lines.last().unwrap()["type"], "summary");
    assert_eq!(lines.last().unwrap()["command"], "stats");
    assert_eq!(lines.last().unwrap()["runs"], 4);
    // The table says the same.
    let text = sessions_env(
        Some(&root),
        &[("SESSIONS_FORCE_TTY", "120")],
        &["stats", "--by", "month", "--tz", "Asia/Tokyo"],
    );
    assert_eq!(text.code, 0, "{}", text.err);
    let rows: Vec<&str> = text.out.lines().collect();
    assert!(rows[0].starts_with("MONTH "), "{}", text.out);
    assert!(rows[1].starts_with("2026-11 ") && rows[1].split_whitespace().nth(1) == Some("3"));
    assert!(rows[2].starts_with("2027-01 ") && rows[2].split_whitespace().nth(1) == Some("1"));
    // An unknown zone is a usage error naming the forms.
    let bad = sessions(&root, &["stats", "--tz", "Mars/Olympus"]);
    assert_eq!(bad.code, 2);
    assert!(
        bad.err.contains("unknown time zone `Mars/Olympus`"),
        "{}",
        bad.err
    );
}

#[test]
fn since_and_until_take_the_forms_people_type() {
    let (_dir, root) = calendar_store();
    let count = |env: &[(&str, &str)], args: &[&str]| -> u64 {
        let mut a = vec!["stats", "--json"];
        a.extend_from_slice(args);
        let r = sessions_env(Some(&root), env, &a);
        assert_eq!(r.code, 0, "{args:?}: {}", r.err);
        json_lines(&r.out).last().unwrap()["runs"].as_u64().unwrap()
    };
    // Now is 2026-11-30T12:00:00Z.
    assert_eq!(count(&[], &["--since", "today"]), 2, "r3 (02:00Z), r4");
    assert_eq!(count(&[], &["--since", "yesterday"]), 3, "r2, r3, r4");
    assert_eq!(count(&[], &["--since", "yesterday", "--until", "today"]), 1);
    assert_eq!(count(&[], &["--since", "2 days ago"]), 3);
    assert_eq!(
        count(&[], &["--since", "1d12h"]),
        3,
        "from 2026-11-29T00:00Z"
    );
    assert_eq!(
        count(&[], &["--since", "600m"]),
        2,
        "from 02:00Z inclusive: r3, r4"
    );
    assert_eq!(count(&[], &["--since", "9h"]), 1, "from 03:00Z: r4");
    assert_eq!(count(&[], &["--since", "1y"]), 4);
    assert_eq!(count(&[], &["--since", "2026-11-30"]), 2, "r3, r4");
    assert_eq!(count(&[], &["--until", "2026-11-01T00:00:00Z"]), 1);
    assert_eq!(count(&[], &["--since", "2026-11-29T23:30:00Z"]), 3);
    // Dates and `today` are midnight where the user is: in Tokyo today began at 15:00Z.
    assert_eq!(count(&[("TZ", "Asia/Tokyo")], &["--since", "today"]), 3);
    assert_eq!(
        count(&[("TZ", "Asia/Tokyo")], &["--since", "2026-11-30"]),
        3
    );
    // `stats --tz` is the zone of its dates too.
    assert_eq!(
        count(&[], &["--tz", "Asia/Tokyo", "--since", "2026-11-30"]),
        3
    );
    // `runs` takes the same forms.
    let r = sessions(&root, &["runs", "--since", "2 days ago", "--json"]);
    assert_eq!(r.code, 0, "{}", r.err);
    let ids: Vec<String> = json_lines(&r.out)
        .iter()
        .filter_map(|v| v["run_id"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(ids, ["r4-0000", "r3-0000", "r2-0000"]);
    // Anything else is a usage error naming the accepted forms.
    let r = sessions(&root, &["runs", "--since", "last tuesday"]);
    assert_eq!(r.code, 2);
    assert!(
        r.err.contains("invalid time `last tuesday`")
            && r.err.contains("RFC 3339")
            && r.err.contains("yesterday")
            && r.err.contains("2 days ago"),
        "{}",
        r.err
    );
    // Ages of gc and archive take the same durations.
    let r = sessions(&root, &["gc", "--older-than", "1y", "--dry-run", "--json"]);
    assert_eq!(r.code, 0, "{}", r.err);
    let r = sessions(&root, &["archive", "--older-than", "yesterday"]);
    assert_eq!(r.code, 2);
    assert!(r.err.contains("invalid age `yesterday`"), "{}", r.err);
}

// ---------------------------------------------------------------------------------------------
// $SESSIONS_ROOT.

#[test]
fn sessions_root_sits_between_the_flag_and_the_layouts_and_where_says_so() {
    let env = [
        ("SESSIONS_ROOT", "/from/env"),
        ("CODELIA_LAYOUT", "xdg"),
        ("XDG_STATE_HOME", "/state"),
    ];
    let r = sessions_env(None, &env, &["where", "--json"]);
    assert_eq!(r.code, 0, "{}", r.err);
    let v: Value = serde_json::from_str(r.out.trim()).unwrap();
    assert_eq!(v["root"], "/from/env");
    assert_eq!(v["source"], "env");
    assert_eq!(
        v["precedence"],
        serde_json::json!(["flag", "env", "xdg_state_home", "xdg_default", "home"])
    );
    let r = sessions_env(None, &env, &["where"]);
    assert_eq!(
        r.out,
        "/from/env\n  chosen: from $SESSIONS_ROOT\n  precedence: --root > $SESSIONS_ROOT > \
         CODELIA_LAYOUT=xdg with $XDG_STATE_HOME > CODELIA_LAYOUT=xdg: ~/.local/state > \
         ~/.codelia/sessions\n  (the directory does not exist yet)\n"
    );
    // --root wins over the variable.
    let r = sessions_env(Some(Path::new("/flag")), &env, &["where", "--json"]);
    let v: Value = serde_json::from_str(r.out.trim()).unwrap();
    assert_eq!(
        (v["root"].as_str(), v["source"].as_str()),
        (Some("/flag"), Some("flag"))
    );
    // An empty variable counts as unset: the layout variables decide.
    let r = sessions_env(
        None,
        &[
            ("SESSIONS_ROOT", ""),
            ("CODELIA_LAYOUT", "xdg"),
            ("XDG_STATE_HOME", "/state"),
        ],
        &["where", "--json"],
    );
    let v: Value = serde_json::from_str(r.out.trim()).unwrap();
    assert_eq!(v["root"], "/state/codelia/sessions");
    assert_eq!(v["source"], "xdg_state_home");
    // Every command reads the store the variable names.
    let (_dir, root) = calendar_store();
    let r = sessions_env(
        None,
        &[("SESSIONS_ROOT", root.to_str().unwrap())],
        &["stats", "--json"],
    );
    assert_eq!(r.code, 0, "{}", r.err);
    assert_eq!(json_lines(&r.out).last().unwrap()["runs"], 4);
}

// ---------------------------------------------------------------------------------------------
// tail -n, tail -f on an ended run, export's format from the file name.

/// A run of `n` records after its header: `run.start`, `run.status` records, and (when
/// `ended`) a last `run.end`.
fn long_run(root: &Path, run_id: &str, n: usize, ended: bool) {
    let mut lines = vec![
        format!(
            r#"{{"type":"header","schema_version":1,"run_id":"{run_id}","session_id":"s-9","started_at":"2026-11-30T10:00:00.000Z"}}"#
        ),
        format!(
            r#"{{"type":"run.start","run_id":"{run_id}","session_id":"s-9","ts":"2026-11-30T10:00:00.000Z","input":{{"type":"text","text":"go"}}}}"#
        ),
    ];
    for i in 0..n {
        lines.push(format!(
            r#"{{"type":"run.status","run_id":"{run_id}","ts":"2026-11-30T10:{:02}:{:02}.000Z","status":"running","message":"step {i}"}}"#,
            i / 60,
            i % 60
        ));
    }
    if ended {
        lines.push(format!(
            r#"{{"type":"run.end","run_id":"{run_id}","ts":"2026-11-30T11:00:00.000Z","outcome":"cancelled"}}"#
        ));
    }
    run_file(root, "2026/11/30", &format!("{run_id}.jsonl"), &lines);
}

#[test]
fn tail_prints_the_last_n_records_like_tail() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    long_run(&root, "run-long", 30, true);
    // 33 lines: header, run.start, 30 statuses, run.end. Default: the last 10.
    let r = sessions(&root, &["tail", "run-long", "--raw"]);
    assert_eq!(r.code, 0, "{}", r.err);
    let stored = std::fs::read_to_string(root.join("2026/11/30/run-long.jsonl")).unwrap();
    let stored: Vec<&str> = stored.lines().collect();
    assert_eq!(r.out.lines().collect::<Vec<_>>(), stored[23..]);
    // -n 3 / --lines 3: the last three, summarised.
    let r = sessions(&root, &["tail", "-n", "3", "run-long"]);
    assert_eq!(r.code, 0, "{}", r.err);
    let kinds: Vec<&str> = r
        .out
        .lines()
        .map(|l| l.split_whitespace().nth(1).unwrap())
        .collect();
    assert_eq!(kinds, ["run.status", "run.status", "run.end"]);
    assert!(
        r.out.lines().next().unwrap().contains("step 28"),
        "{}",
        r.out
    );
    assert_eq!(
        sessions(&root, &["tail", "--lines", "3", "run-long"]).out,
        r.out
    );
    // More than there are: all of them; 0: none.
    let r = sessions(&root, &["tail", "-n", "100", "run-long", "--raw"]);
    assert_eq!(r.out.lines().collect::<Vec<_>>(), stored);
    let r = sessions(&root, &["tail", "-n", "0", "run-long"]);
    assert_eq!((r.code, r.out.as_str()), (0, ""));
    // +K: from the K-th on (+1 and +0: all of them).
    let r = sessions(&root, &["tail", "-n", "+31", "run-long", "--raw"]);
    assert_eq!(r.out.lines().collect::<Vec<_>>(), stored[30..]);
    for all in ["+1", "+0"] {
        let r = sessions(&root, &["tail", "-n", all, "run-long", "--raw"]);
        assert_eq!(r.out.lines().collect::<Vec<_>>(), stored, "{all}");
    }
    // Not a count: usage error.
    for bad in ["-1", "ten", "1000001", "+-1", "++1"] {
        let r = sessions(&root, &["tail", "-n", bad, "run-long"]);
        assert_eq!(r.code, 2, "-n {bad}: {}", r.err);
    }
}

#[test]
fn tail_follow_on_an_ended_run_prints_it_says_so_and_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    long_run(&root, "run-done", 4, true);
    // No --timeout: a follower that did not notice the end would wait forever.
    let r = sessions(&root, &["tail", "-f", "run-done", "-n", "2", "--raw"]);
    assert_eq!(r.code, 0, "{}", r.err);
    let stored = std::fs::read_to_string(root.join("2026/11/30/run-done.jsonl")).unwrap();
    let stored: Vec<&str> = stored.lines().collect();
    assert_eq!(r.out.lines().collect::<Vec<_>>(), stored[5..]);
    assert_eq!(
        r.err,
        "sessions: run run-done has already ended (run.end: cancelled); not following\n"
    );
    // -n 0 still says so, and prints nothing.
    let r = sessions(&root, &["tail", "-f", "-n", "0", "run-done"]);
    assert_eq!((r.code, r.out.as_str()), (0, ""));
    assert!(r.err.contains("has already ended"), "{}", r.err);
    // Without -f nothing is said.
    let r = sessions(&root, &["tail", "run-done"]);
    assert_eq!((r.code, r.err.as_str()), (0, ""));
    // A run without run.end is followed (here until the timeout) and not said to have ended.
    long_run(&root, "run-open", 2, false);
    let r = sessions(&root, &["tail", "-f", "run-open", "--timeout", "1"]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert_eq!(r.out.lines().count(), 4, "{}", r.out);
    assert!(!r.err.contains("has already ended"), "{}", r.err);
    assert!(r.err.contains("stopped following"), "{}", r.err);
}

#[test]
fn export_defaults_to_markdown_and_infers_the_format_from_the_file_name() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    plant_run(
        &root,
        "run-exp",
        "s-exp",
        "2026-11-30T09:00:00.000Z",
        "hello export",
    );
    let out_dir = tempfile::tempdir().unwrap();
    let md_stdout = sessions(&root, &["export", "run-exp"]);
    assert_eq!(md_stdout.code, 0, "{}", md_stdout.err);
    let md = sessions(&root, &["export", "run-exp", "--format", "md"]).out;
    assert_eq!(md_stdout.out, md, "no --format: Markdown");
    assert!(md.contains("hello export"));
    let formats = [
        ("t.md", "md"),
        ("t.MARKDOWN", "md"),
        ("t.json", "json"),
        ("t.jsonl", "jsonl"),
        ("t.ndjson", "jsonl"),
        ("t.html", "html"),
        ("t.HTM", "html"),
        ("t.txt", "md"),
        ("no-extension", "md"),
    ];
    for (name, format) in formats {
        let path = out_dir.path().join(name);
        let r = sessions(&root, &["export", "run-exp", "-o", path.to_str().unwrap()]);
        assert_eq!(r.code, 0, "{name}: {}", r.err);
        let inferred = std::fs::read(&path).unwrap();
        let explicit = sessions(&root, &["export", "run-exp", "--format", format]).out;
        assert_eq!(
            String::from_utf8(inferred).unwrap(),
            explicit,
            "{name} is {format}"
        );
    }
    // An explicit --format wins over the extension.
    let path = out_dir.path().join("forced.html");
    let r = sessions(
        &root,
        &[
            "export",
            "run-exp",
            "--format",
            "jsonl",
            "-o",
            path.to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, 0, "{}", r.err);
    let stored = std::fs::read(root.join("2026/11/30/run-exp.jsonl")).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), stored);
}

// ---------------------------------------------------------------------------------------------
// Short ids, `-` and --last, unsafe ids.

/// A private copy of the sample store (runs `7a1e0001-…-0101` and `…-0102` share their first
/// 34 characters; sessions are `5a1e000N-…`).
fn sample_copy() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    common::copy_tree(&session_test_support::sample_sessions_dir(), &root);
    (dir, root)
}

const RUN_101: &str = "7a1e0001-0000-4000-8000-000000000101";
const RUN_201: &str = "7a1e0002-0000-4000-8000-000000000201";
const SESSION_3: &str = "5a1e0003-0000-4000-8000-000000000003";

#[test]
fn a_unique_prefix_names_its_run_or_session_in_every_command() {
    let (_dir, root) = sample_copy();
    let same = |short: &[&str], long: &[&str]| {
        let a = sessions(&root, short);
        let b = sessions(&root, long);
        assert_eq!(a.code, 0, "{short:?}: {}", a.err);
        assert_eq!((a.code, &a.out), (b.code, &b.out), "{short:?} vs {long:?}");
    };
    // Eight characters, as the tables show them, and shorter ones down to four.
    same(&["show", "7a1e0002"], &["show", RUN_201]);
    same(&["show", "7a1e0002-00"], &["show", RUN_201]);
    same(&["show", "5a1e0003"], &["show", SESSION_3]);
    same(
        &["show", "5a1e0003", "--raw"],
        &["show", SESSION_3, "--raw"],
    );
    same(&["export", "7a1e0002"], &["export", RUN_201]);
    same(
        &["export", "5a1e0003", "--format", "json"],
        &["export", SESSION_3, "--format", "json"],
    );
    same(&["replay", "7a1e0002"], &["replay", RUN_201]);
    same(
        &["tail", "7a1e0002", "-n", "+1"],
        &["tail", RUN_201, "-n", "+1"],
    );
    same(
        &["history", "5a1e0003", "--json"],
        &["history", SESSION_3, "--json"],
    );
    same(
        &["verify", "7a1e0002", "--json"],
        &["verify", RUN_201, "--json"],
    );
    same(
        &["runs", "--session", "5a1e0003", "--json"],
        &["runs", "--session", SESSION_3, "--json"],
    );
    // A whole id that begins another id is that id, not ambiguous.
    same(&["show", RUN_101], &["show", RUN_101]);
    // Four characters are enough when they are unique.
    let r = sessions(&root, &["history", "5a1e", "--json"]);
    assert_eq!(r.code, 2, "5a1e begins seven sessions: {}", r.err);
    // A prefix of nothing, and a prefix shorter than four characters, are not found (3).
    let r = sessions(&root, &["show", "ffff0000"]);
    assert_eq!(r.code, 3, "{}", r.err);
    let r = sessions(&root, &["show", "7a1"]);
    assert_eq!(r.code, 3);
    assert!(
        r.err.contains("an id prefix needs at least 4 characters"),
        "{}",
        r.err
    );
    // Nothing was written to the store by the look-ups but the run index.
    let r = sessions(&root, &["tail", "5a1e0003"]);
    assert_eq!(r.code, 3, "a session prefix names no run: {}", r.err);
}

#[test]
fn an_ambiguous_prefix_is_a_usage_error_listing_the_candidates() {
    let (_dir, root) = sample_copy();
    let want = "sessions: id prefix `7a1e0001` is ambiguous: 2 runs match; give more characters\n  \
         run     7a1e0001-0000-4000-8000-000000000101  2026-11-24 09:12:03Z  What does this \
         project do? One sentence, please.\n  \
         run     7a1e0001-0000-4000-8000-000000000102  2026-11-24 09:14:40Z  List the files \
         and show me the Japanese release notes.\n";
    for args in [
        &["show", "7a1e0001"][..],
        &["export", "7a1e0001", "--format", "md"],
        &["tail", "7a1e0001"],
        &["replay", "7a1e0001"],
        &["verify", "7a1e0001"],
    ] {
        let r = sessions(&root, args);
        assert_eq!(r.code, 2, "{args:?}");
        assert_eq!(r.out, "", "{args:?}");
        assert_eq!(r.err, want, "{args:?}");
    }
    // Sessions are listed with their updated time and last user message.
    let r = sessions(&root, &["history", "5a1e000"]);
    assert_eq!(r.code, 2);
    assert!(
        r.err.starts_with(
            "sessions: id prefix `5a1e000` is ambiguous: 7 sessions match; give more characters\n"
        ),
        "{}",
        r.err
    );
    assert!(
        r.err.contains(
            "\n  session 5a1e0003-0000-4000-8000-000000000003  2026-11-26 08:31:16Z  Try again please.\n"
        ),
        "{}",
        r.err
    );
    // For show, runs and sessions both count; at most ten of each are listed.
    let r = sessions(&root, &["show", "7a1e"]);
    assert_eq!(r.code, 2);
    assert!(r.err.contains("10 runs match"), "{}", r.err);
    assert_eq!(r.err.lines().count(), 11, "{}", r.err);
    let dir = tempfile::tempdir().unwrap();
    let many = dir.path().join("sessions");
    for i in 0..12 {
        plant_run(
            &many,
            &format!("abcd{i:04}"),
            "s-many",
            "2026-11-30T09:00:00.000Z",
            "x",
        );
    }
    // Short ids are looked up in the run index, which `runs` builds.
    assert_eq!(sessions(&many, &["runs"]).code, 0);
    let r = sessions(&many, &["tail", "abcd"]);
    assert_eq!(r.code, 2, "{}", r.err);
    assert!(r.err.contains("more than 10 runs match"), "{}", r.err);
    assert_eq!(r.err.lines().count(), 11, "{}", r.err);
}

#[test]
fn an_unsafe_id_is_a_usage_error_in_every_command() {
    let (_dir, root) = sample_copy();
    for bad in ["../x", "a/b", "é1234"] {
        for args in [
            vec!["show", bad],
            vec!["export", bad],
            vec!["export", bad, "--format", "json"],
            vec!["replay", bad],
            vec!["history", bad],
            vec!["tail", bad],
            vec!["tail", "-f", bad],
            vec!["verify", bad],
            vec!["unarchive", bad],
            vec!["unarchive", "--session", bad, "--dry-run"],
            vec!["runs", "--session", bad],
        ] {
            let r = sessions(&root, &args);
            assert_eq!(r.code, 2, "{args:?}: {}{}", r.out, r.err);
            assert!(r.err.contains("is not a"), "{args:?}: {}", r.err);
        }
    }
    // Whole ids that name nothing are "not found" (3) everywhere.
    let unknown = "0000ffff-0000-4000-8000-000000000000";
    for args in [
        vec!["show", unknown],
        vec!["export", unknown],
        vec!["replay", unknown],
        vec!["history", unknown],
        vec!["tail", unknown],
        vec!["verify", unknown],
        vec!["unarchive", unknown],
    ] {
        let r = sessions(&root, &args);
        assert_eq!(r.code, 3, "{args:?}: {}", r.err);
    }
}

/// A store whose newest session and run belong to a workspace directory (a `.git` inside), and
/// a newer session and run of another workspace.
fn workspace_store() -> (tempfile::TempDir, PathBuf, PathBuf) {
    use common::plant::{SessionRow, session};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let ws = dir.path().join("project");
    std::fs::create_dir_all(ws.join(".git")).unwrap();
    std::fs::create_dir_all(ws.join("src/deep")).unwrap();
    let ws_text = ws.to_str().unwrap().to_owned();
    let row = |id: &'static str, updated: &'static str, w: &str| SessionRow {
        session_id: id,
        updated_at: updated,
        run_id: None,
        last_user_message: Some("hello"),
        workspace_root: Some(w).map(|w| Box::leak(w.to_owned().into_boxed_str()) as &str),
        meta_json: None,
        messages: Some(&[r#"{"role":"user","content":"hello"}"#]),
    };
    session(
        &root,
        &row("sess-old", "2026-11-28T10:00:00.000Z", &ws_text),
    );
    session(
        &root,
        &row("sess-new", "2026-11-29T10:00:00.000Z", &ws_text),
    );
    session(
        &root,
        &row("sess-elsewhere", "2026-11-30T10:00:00.000Z", "/elsewhere"),
    );
    plant_run(
        &root,
        "run-a",
        "sess-old",
        "2026-11-28T09:00:00.000Z",
        "first",
    );
    plant_run(
        &root,
        "run-b",
        "sess-new",
        "2026-11-29T09:00:00.000Z",
        "second",
    );
    plant_run(
        &root,
        "run-c",
        "sess-old",
        "2026-11-29T11:00:00.000Z",
        "third",
    );
    plant_run(
        &root,
        "run-x",
        "sess-elsewhere",
        "2026-11-30T09:00:00.000Z",
        "other",
    );
    (dir, root, ws)
}

fn sessions_in(cwd: &Path, root: &Path, args: &[&str]) -> Out {
    let o = Command::new(env!("CARGO_BIN_EXE_sessions"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", "/nonexistent-home")
        .env("TZ", "UTC")
        .env("SESSIONS_NOW", NOW)
        .current_dir(cwd)
        .arg("--root")
        .arg(root)
        .args(args)
        .output()
        .unwrap();
    Out {
        code: o.status.code().unwrap_or(-1),
        out: String::from_utf8(o.stdout).unwrap(),
        err: String::from_utf8(o.stderr).unwrap(),
    }
}

#[test]
fn dash_and_last_mean_the_newest_of_the_current_workspace() {
    let (_dir, root, ws) = workspace_store();
    let deep = ws.join("src/deep");
    let same = |a: &[&str], b: &[&str]| {
        let x = sessions_in(&deep, &root, a);
        let y = sessions_in(&deep, &root, b);
        assert_eq!(x.code, 0, "{a:?}: {}", x.err);
        assert_eq!((x.code, &x.out), (y.code, &y.out), "{a:?} vs {b:?}");
    };
    // Runs: the newest start of the workspace (run-c of sess-old), not run-x of elsewhere.
    same(&["tail", "-", "-n", "+1"], &["tail", "run-c", "-n", "+1"]);
    same(
        &["tail", "--last", "-n", "+1"],
        &["tail", "run-c", "-n", "+1"],
    );
    let (x, y) = (
        sessions_in(&deep, &root, &["replay", "--last"]),
        sessions_in(&deep, &root, &["replay", "run-c"]),
    );
    assert_eq!(
        (x.code, &x.err),
        (y.code, &y.err),
        "replay --last is replay run-c"
    );
    assert!(x.err.contains("run run-c has no"), "{}", x.err);
    same(&["verify", "-", "--json"], &["verify", "run-c", "--json"]);
    // Sessions: the most recently updated of the workspace (sess-new), as `sessions` lists.
    same(
        &["history", "-", "--json"],
        &["history", "sess-new", "--json"],
    );
    same(
        &["history", "--last", "--json"],
        &["history", "sess-new", "--json"],
    );
    same(&["show", "-"], &["show", "sess-new"]);
    same(&["show", "--last"], &["show", "sess-new"]);
    same(
        &["export", "--last", "--format", "json"],
        &["export", "sess-new", "--format", "json"],
    );
    same(
        &["runs", "--session", "-", "--json"],
        &["runs", "--session", "sess-new", "--json"],
    );
    let listed = sessions_in(&deep, &root, &["sessions", "--json"]);
    let first: Value = serde_json::from_str(listed.out.lines().next().unwrap()).unwrap();
    assert_eq!(
        first["session_id"], "sess-new",
        "the first row of `sessions`"
    );
    // A workspace without runs or sessions: not found (3), saying where it looked.
    let empty = tempfile::tempdir().unwrap();
    let r = sessions_in(empty.path(), &root, &["show", "--last"]);
    assert_eq!(r.code, 3, "{}", r.err);
    assert!(
        r.err.contains("no run or session in workspace"),
        "{}",
        r.err
    );
    // An id and --last together, or neither: usage errors.
    assert_eq!(
        sessions_in(&deep, &root, &["show", "run-a", "--last"]).code,
        2
    );
    assert_eq!(sessions_in(&deep, &root, &["show"]).code, 2);
    assert_eq!(sessions_in(&deep, &root, &["tail"]).code, 2);
}

#[test]
fn help_states_the_exit_codes_every_command_shares() {
    let r = sessions_env(None, &[], &["--help"]);
    assert_eq!(r.code, 0);
    for line in [
        "Exit status (the same in every command):",
        "  1  findings (not failures): verify found problems; sync left runs unshipped",
        "  2  usage error: bad arguments, an unsafe id, an ambiguous id prefix, a bad",
        "  3  not found: no such run, session, invocation or store; `-` in a workspace",
    ] {
        assert!(r.out.contains(line), "help lacks {line:?}:\n{}", r.out);
    }
    // Each kind of usage error, from different commands, is 2; not found is 3.
    let (_dir, root) = sample_copy();
    for (args, code) in [
        (&["stats", "--tz", "Nowhere/Land"][..], 2),
        (&["runs", "--since", "someday"], 2),
        (&["gc", "--older-than", "forever"], 2),
        (&["tail", "-n", "many", RUN_201], 2),
        (&["show", "7a1e0001"], 2),
        (&["history", "../etc"], 2),
        (&["export", "ffffffff"], 3),
        (&["replay", RUN_201, "--seq", "99"], 3),
        (&["tail", "-f", RUN_201, "-n", "0"], 0),
    ] {
        let r = sessions(&root, args);
        assert_eq!(r.code, code, "{args:?}: {}", r.err);
    }
}

/// The running totals answer a zone with daylight-saving changes by UTC quarter-hour; a
/// quarter-hour that holds the start of a day of the zone (Berlin kept local mean time,
/// +00:53:28, until 1893: 1890-01-01 began at 1889-12-31T23:06:32Z) is summed by minute.
#[test]
fn stats_splits_a_quarter_hour_that_holds_two_days_of_the_zone() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    plant_run(&root, "r1-0000", "s-1", "1889-12-31T23:01:00.000Z", "one");
    plant_run(&root, "r2-0000", "s-1", "1889-12-31T23:10:00.000Z", "two");
    plant_run(&root, "r3-0000", "s-1", "2026-03-29T00:59:00.000Z", "three");
    plant_run(&root, "r4-0000", "s-1", "2026-03-29T01:00:00.000Z", "four");
    let day = |tz: &str| {
        groups(
            &sessions(&root, &["stats", "--by", "day", "--tz", tz, "--json"]),
            "day",
        )
    };
    // 2026-03-29 01:00Z is the change to summer time: both runs are on the 29th in Berlin.
    assert_eq!(
        day("Europe/Berlin"),
        pairs(&[("1889-12-31", 1), ("1890-01-01", 1), ("2026-03-29", 2)])
    );
    assert_eq!(day("UTC"), pairs(&[("1889-12-31", 2), ("2026-03-29", 2)]));
}
