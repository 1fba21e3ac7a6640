//! Managing history on copies of the sample store: `delete` and `restore` through the trash,
//! retention by count (`gc --keep-last`) and size (`gc --max-size`), pins, session titles
//! (`sessions name`, `@title` as an id) and `sessions storage`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::{Run, sample_store};

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

const NOW: &str = "2026-11-30T12:00:00Z";
const BATCH: &str = "20261130T120000Z";
/// S1: two runs on 2026-11-24.
const S1: &str = "5a1e0001-0000-4000-8000-000000000001";
const S2: &str = "5a1e0002-0000-4000-8000-000000000002";
/// S4: two runs on 2026-11-27.
const S4: &str = "5a1e0004-0000-4000-8000-000000000004";
const S4_RUNS: [&str; 2] = [
    "2026/11/27/7a1e0004-0000-4000-8000-000000000401.jsonl",
    "2026/11/27/7a1e0004-0000-4000-8000-000000000402.jsonl",
];
/// S7: the old session of another workspace, one run on 2026-10-20.
const S7: &str = "5a1e0007-0000-4000-8000-000000000007";
const S7_RUN: &str = "7a1e0007-0000-4000-8000-000000000701";
/// L1: the legacy snapshot (no runs), saved 2026-10-02.
const L1: &str = "5a1e00a1-0000-4000-8000-0000000000a1";

fn run_in(root: &Path, args: &[&str]) -> Run {
    common::run_at(root, NOW, args)
}

fn ok(root: &Path, args: &[&str]) -> String {
    let r = run_in(root, args);
    assert_eq!(r.code, 0, "{args:?} failed: {}", r.err);
    r.out
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Every file under `dir` with its bytes (`state.db` and its `-wal`/`-shm` files, which reading
/// commands may update, and the saves' bookkeeping `messages/.append-intent` excluded).
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if !p.to_string_lossy().contains("state.db")
                && !p.ends_with("messages/.append-intent")
            {
                out.insert(
                    p.strip_prefix(dir).unwrap().to_owned(),
                    std::fs::read(&p).unwrap(),
                );
            }
        }
    }
    out
}

/// Asserts that two [`files`] snapshots are equal, naming the paths that differ.
#[track_caller]
fn assert_same(now: &BTreeMap<PathBuf, Vec<u8>>, then: &BTreeMap<PathBuf, Vec<u8>>, what: &str) {
    let differ: Vec<&PathBuf> = now
        .keys()
        .chain(then.keys())
        .filter(|p| now.get(*p) != then.get(*p))
        .collect();
    assert!(differ.is_empty(), "{what}: {differ:?}");
}

fn session_ids(root: &Path) -> BTreeSet<String> {
    json_lines(&ok(root, &["sessions", "--all", "--json"]))
        .iter()
        .map(|s| s["session_id"].as_str().unwrap().to_owned())
        .collect()
}

/// (action, id) of every line of a housekeeping command's `--json` output.
fn actions(out: &str) -> BTreeSet<(String, String)> {
    json_lines(out)
        .iter()
        .filter(|a| a["status"] == "planned" || a["status"] == "done")
        .map(|a| {
            (
                a["action"].as_str().unwrap().to_owned(),
                a["id"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn set(items: &[(&str, &str)]) -> BTreeSet<(String, String)> {
    items
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

#[test]
fn delete_moves_a_session_with_its_runs_and_restore_puts_everything_back() {
    let s = sample_store();
    let before = files(&s.root);
    let r = run_in(&s.root, &["delete", S4, "--dry-run"]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert_same(&files(&s.root), &before, "--dry-run changed the store");

    let out = ok(&s.root, &["delete", S4]);
    let bytes: u64 = S4_RUNS
        .iter()
        .map(|p| before[Path::new(p)].len() as u64)
        .sum();
    let last = out.lines().last().unwrap();
    assert!(
        last.starts_with("moved 2 run(s) (")
            && last.ends_with(&format!(
                ") and 1 session(s) to trash/{BATCH} (`sessions restore {BATCH}` puts them back)"
            )),
        "{out}"
    );
    assert!(
        last.contains(&format!("({:.1} KiB)", bytes as f64 / 1024.0)),
        "{last}"
    );
    for p in S4_RUNS {
        assert!(!s.root.join(p).exists(), "{p} still in the store");
        assert_eq!(
            std::fs::read(s.root.join("trash").join(BATCH).join(p)).unwrap(),
            before[Path::new(p)]
        );
    }
    assert!(!session_ids(&s.root).contains(S4));
    let manifest =
        std::fs::read_to_string(s.root.join(format!("trash/{BATCH}/manifest.jsonl"))).unwrap();
    let ops: Vec<String> = json_lines(&manifest)
        .iter()
        .map(|l| l["op"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ops, ["delete", "move_run", "move_run", "move_session"]);
    assert_eq!(json_lines(&manifest)[0]["ids"], serde_json::json!([S4]));

    let out = ok(&s.root, &["restore", BATCH, "--json"]);
    assert_eq!(
        actions(&out),
        set(&[
            ("restore_run", "7a1e0004-0000-4000-8000-000000000401"),
            ("restore_run", "7a1e0004-0000-4000-8000-000000000402"),
            ("restore_session", S4),
        ])
    );
    assert_eq!(
        json_lines(&out).last().unwrap(),
        &serde_json::json!({
            "type": "summary", "command": "restore", "batch": BATCH, "dry_run": false,
            "runs": 2, "sessions": 1, "batch_removed": true
        })
    );
    // Everything is back byte for byte, and the emptied batch is gone.
    assert_same(&files(&s.root), &before, "restored");
    assert!(!s.root.join("trash").exists());
    assert!(session_ids(&s.root).contains(S4));
    let runs = json_lines(&ok(&s.root, &["runs", "--session", S4, "--json"]));
    assert_eq!(runs.iter().filter(|r| r["run_id"].is_string()).count(), 2);
}

/// `delete --json` ends with a summary naming the trash batch (the name `restore` takes),
/// the same in the plan as in the move; restoring one run of it leaves the batch in place.
#[test]
fn delete_json_ends_with_a_summary_naming_the_batch() {
    let s = sample_store();
    let bytes: u64 = S4_RUNS
        .iter()
        .map(|p| std::fs::metadata(s.root.join(p)).unwrap().len())
        .sum();
    let want = |dry_run: bool| {
        serde_json::json!({
            "type": "summary", "command": "delete", "batch": BATCH, "dry_run": dry_run,
            "runs": 2, "bytes": bytes, "sessions": 1, "kept_locked": 0, "kept_open": 0,
            "kept_changed": 0, "failed": 0
        })
    };
    let plan = json_lines(&ok(&s.root, &["delete", S4, "--dry-run", "--json"]));
    assert_eq!(plan.len(), 4, "{plan:?}");
    assert_eq!(plan[3], want(true));
    let moved = json_lines(&ok(&s.root, &["delete", S4, "--json"]));
    assert_eq!(moved.len(), 4, "{moved:?}");
    assert!(
        moved[..3].iter().all(|a| a["status"] == "done"),
        "{moved:?}"
    );
    assert_eq!(moved[3], want(false));
    // Nothing left to delete: no batch.
    let out = run_in(&s.root, &["delete", S4, "--json"]);
    assert_eq!(out.code, 3, "{}", out.err);
    assert_eq!(out.out, "");

    let back = json_lines(&ok(
        &s.root,
        &["restore", "7a1e0004-0000-4000-8000-000000000401", "--json"],
    ));
    assert_eq!(
        back.last().unwrap(),
        &serde_json::json!({
            "type": "summary", "command": "restore", "batch": BATCH, "dry_run": false,
            "runs": 1, "sessions": 0, "batch_removed": false
        })
    );
    assert!(s.root.join("trash").join(BATCH).is_dir());
}

#[test]
fn restore_of_one_run_leaves_the_rest_of_the_batch() {
    let s = sample_store();
    ok(&s.root, &["name", S4, "slow check"]);
    ok(&s.root, &["delete", "@slow check"]);
    let before = files(&s.root);
    let out = ok(&s.root, &["restore", BATCH, "--dry-run", "--json"]);
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 4, "{out}");
    assert!(lines[..3].iter().all(|a| a["status"] == "planned"), "{out}");
    assert_eq!(
        lines[3],
        serde_json::json!({
            "type": "summary", "command": "restore", "batch": BATCH, "dry_run": true,
            "runs": 2, "sessions": 1, "batch_removed": false
        })
    );
    assert_same(&files(&s.root), &before, "restore --dry-run");
    let out = ok(
        &s.root,
        &["restore", "7a1e0004-0000-4000-8000-000000000401"],
    );
    assert_eq!(
        out,
        format!(
            "done     restore-run {} (from trash/{BATCH}/{})\nrestored 1 run(s) and 0 session(s) from trash/{BATCH}\n",
            S4_RUNS[0], S4_RUNS[0]
        )
    );
    assert!(s.root.join(S4_RUNS[0]).is_file());
    assert!(s.root.join("trash").join(BATCH).join(S4_RUNS[1]).is_file());
    // The session, by the title it had, brings back what is left of it.
    let out = ok(&s.root, &["restore", "@slow check", "--json"]);
    assert_eq!(
        actions(&out),
        set(&[
            ("restore_run", "7a1e0004-0000-4000-8000-000000000402"),
            ("restore_session", S4),
        ])
    );
    assert!(!s.root.join("trash").exists());
    assert!(ok(&s.root, &["sessions", "--all"]).contains("\"slow check\""));
}

#[test]
fn restore_never_overwrites_and_changes_nothing_when_it_refuses() {
    let s = sample_store();
    ok(&s.root, &["delete", S4]);
    // A newer file now holds the run's path, and the session exists again (its snapshot
    // put back as a legacy file).
    std::fs::write(s.root.join(S4_RUNS[0]), b"{\"type\":\"header\"}\n").unwrap();
    std::fs::copy(
        s.root.join(format!("trash/{BATCH}/state/{S4}.json")),
        s.root.join(format!("state/{S4}.json")),
    )
    .unwrap();
    let before = files(&s.root);
    let r = run_in(&s.root, &["restore", BATCH]);
    assert_eq!(r.code, 4, "{}", r.out);
    assert!(
        r.err.starts_with("sessions: nothing restored: "),
        "{}",
        r.err
    );
    assert!(
        r.err.contains(&format!(
            "run 7a1e0004-0000-4000-8000-000000000401: {} exists in the store; not overwriting it",
            S4_RUNS[0]
        )),
        "{}",
        r.err
    );
    assert!(
        r.err.contains(&format!(
            "session {S4}: the store holds it (updated 2026-11-27T17:46:"
        )),
        "{}",
        r.err
    );
    assert_same(&files(&s.root), &before, "a refused restore changed files");
    // A message log of the session without a state.db row is not overwritten either.
    let s2 = sample_store();
    ok(&s2.root, &["delete", S2]);
    std::fs::write(
        s2.root.join(format!("messages/{S2}.jsonl")),
        b"{\"role\":\"user\",\"content\":\"other\"}\n",
    )
    .unwrap();
    let r = run_in(&s2.root, &["restore", S2]);
    assert_eq!(r.code, 4, "{}", r.out);
    assert_eq!(
        r.err,
        format!(
            "sessions: nothing restored: session {S2}: messages/{S2}.jsonl exists in the store; not overwriting it\n"
        )
    );
    assert!(
        s2.root
            .join(format!("trash/{BATCH}/state/{S2}.json"))
            .is_file()
    );
    // An unknown batch or id is not found.
    let r = run_in(&s.root, &["restore", "20990101T000000Z"]);
    assert_eq!(r.code, 3, "{}", r.err);
}

#[test]
fn delete_refuses_unknown_ids_and_pinned_sessions_before_moving_anything() {
    let s = sample_store();
    let before = files(&s.root);
    let r = run_in(
        &s.root,
        &["delete", S4, "0000dead-0000-4000-8000-000000000000"],
    );
    assert_eq!(r.code, 3, "{}", r.err);
    assert_same(&files(&s.root), &before, "unknown id");
    assert_eq!(run_in(&s.root, &["--read-only", "delete", S4]).code, 2);
    assert_eq!(run_in(&s.root, &["--read-only", "restore", BATCH]).code, 2);
    ok(&s.root, &["--read-only", "delete", S4, "--dry-run"]);
    assert_same(&files(&s.root), &before, "--read-only");
    let r = run_in(&s.root, &["delete", "../x"]);
    assert_eq!(r.code, 2, "{}", r.err);

    assert_eq!(
        ok(&s.root, &["pin", S7]),
        format!("pinned {S7}: gc never moves it or its runs\n")
    );
    let r = run_in(&s.root, &["delete", S4, S7_RUN]);
    assert_eq!(r.code, 2);
    assert_eq!(
        r.err,
        format!("sessions: {S7_RUN}: session {S7} is pinned; `sessions unpin {S7}` first\n")
    );
    assert_same(&files(&s.root), &before, "pinned");
}

#[test]
fn pinned_sessions_and_their_runs_never_expire() {
    let s = sample_store();
    ok(&s.root, &["pin", S7]);
    let listed = json_lines(&ok(&s.root, &["sessions", "--all", "--json"]));
    let s7 = listed.iter().find(|x| x["session_id"] == S7).unwrap();
    assert_eq!(s7["pinned"], true);
    // Without the pin, --older-than 30d moves S7, its run and L1.
    let out = ok(
        &s.root,
        &["gc", "--older-than", "30d", "--dry-run", "--json"],
    );
    assert_eq!(actions(&out), set(&[("move_session", L1)]));
    let out = ok(&s.root, &["gc", "--keep-last", "6", "--dry-run"]);
    assert!(
        out.contains("kept 0 locked, 0 undated, 1 of pinned sessions"),
        "{out}"
    );
    let out = ok(&s.root, &["gc", "--keep-last", "1", "--dry-run", "--json"]);
    assert!(!actions(&out).iter().any(|(_, id)| id == S7 || id == S7_RUN));
    ok(&s.root, &["unpin", S7]);
    let out = ok(
        &s.root,
        &["gc", "--older-than", "30d", "--dry-run", "--json"],
    );
    assert_eq!(
        actions(&out),
        set(&[
            ("move_run", S7_RUN),
            ("move_session", S7),
            ("move_session", L1)
        ])
    );
}

#[test]
fn keep_last_keeps_the_newest_sessions_and_moves_the_rest() {
    let s = sample_store();
    let out = ok(&s.root, &["gc", "--keep-last", "6", "--dry-run", "--json"]);
    assert_eq!(
        actions(&out),
        set(&[
            ("move_run", S7_RUN),
            ("move_session", S7),
            ("move_session", L1)
        ])
    );
    // With an age: only sessions beyond the newest N that are also old (S1 is 6 days old).
    let out = ok(
        &s.root,
        &[
            "gc",
            "--keep-last",
            "4",
            "--older-than",
            "5d",
            "--dry-run",
            "--json",
        ],
    );
    assert_eq!(
        actions(&out),
        set(&[
            ("move_run", "7a1e0001-0000-4000-8000-000000000101"),
            ("move_run", "7a1e0001-0000-4000-8000-000000000102"),
            ("move_run", S7_RUN),
            ("move_session", S1),
            ("move_session", S7),
            ("move_session", L1),
        ])
    );
    let r = run_in(&s.root, &["gc", "--keep-last", "2", "--empty-trash"]);
    assert_eq!(r.code, 2);
    let r = run_in(&s.root, &["gc"]);
    assert_eq!(r.code, 2);
}

#[test]
fn max_size_moves_the_oldest_until_the_store_fits() {
    let s = sample_store();
    let lines = json_lines(&ok(&s.root, &["storage", "--json"]));
    let total = lines.last().unwrap();
    let kept_bytes = total["run_bytes"].as_u64().unwrap()
        + total["messages_bytes"].as_u64().unwrap()
        + total["legacy_bytes"].as_u64().unwrap();
    let session_bytes = |id: &str| {
        lines
            .iter()
            .find(|l| l["type"] == "storage_session" && l["session_id"] == id)
            .unwrap()["bytes"]
            .as_u64()
            .unwrap()
    };
    // Exactly the two oldest sessions' bytes over: L1 (2026-10-02) and S7 (2026-10-20) go.
    let max = kept_bytes - session_bytes(L1) - session_bytes(S7);
    let out = ok(
        &s.root,
        &["gc", "--max-size", &max.to_string(), "--dry-run", "--json"],
    );
    assert_eq!(
        actions(&out),
        set(&[
            ("move_run", S7_RUN),
            ("move_session", S7),
            ("move_session", L1)
        ])
    );
    // One byte less and the next oldest, S1, goes too.
    let out = ok(
        &s.root,
        &[
            "gc",
            "--max-size",
            &(max - 1).to_string(),
            "--dry-run",
            "--json",
        ],
    );
    assert!(actions(&out).contains(&("move_session".to_owned(), S1.to_owned())));
    // Pinned and the newest kept: the store cannot get that small, and gc says so.
    ok(&s.root, &["pin", S1]);
    let out = ok(&s.root, &["gc", "--max-size", "1K", "--keep-last", "5"]);
    assert!(out.contains("over --max-size 1.0 KiB"), "{out}");
    assert!(session_ids(&s.root).contains(S1));
    assert_eq!(session_ids(&s.root).len(), 6, "{out}");
    let r = run_in(&s.root, &["gc", "--max-size", "5X"]);
    assert_eq!(r.code, 2);
}

#[test]
fn storage_reports_bytes_by_area_day_session_and_trash_batch() {
    let s = sample_store();
    let all = files(&s.root);
    let size = |pred: &dyn Fn(&str) -> bool| -> u64 {
        all.iter()
            .filter(|(p, _)| pred(&p.to_string_lossy()))
            .map(|(_, b)| b.len() as u64)
            .sum()
    };
    let lines = json_lines(&ok(&s.root, &["storage", "--json"]));
    let total = lines.last().unwrap();
    assert_eq!(total["type"], "summary");
    assert_eq!(total["command"], "storage");
    assert_eq!(total["root"], s.root.to_string_lossy().as_ref());
    assert_eq!(total["run_files"], 10);
    assert_eq!(total["run_bytes"], size(&|p| p.starts_with("2026/")));
    assert_eq!(total["messages_files"], 7);
    assert_eq!(
        total["messages_bytes"],
        size(&|p| p.starts_with("messages/") && p.ends_with(".jsonl"))
    );
    assert_eq!(total["legacy_files"], 1);
    assert_eq!(total["legacy_bytes"], size(&|p| p.starts_with("state/")));
    assert_eq!(total["trash_bytes"], 0);
    let day = lines
        .iter()
        .find(|l| l["type"] == "storage_day" && l["day"] == "2026-11-27")
        .unwrap();
    assert_eq!(day["runs"], 2);
    assert_eq!(day["bytes"], size(&|p| p.starts_with("2026/11/27/")));
    let s4 = lines
        .iter()
        .find(|l| l["type"] == "storage_session" && l["session_id"] == S4)
        .unwrap();
    assert_eq!(s4["runs"], 2);
    assert_eq!(s4["run_bytes"], size(&|p| p.starts_with("2026/11/27/")));
    assert_eq!(
        s4["messages_bytes"],
        size(&|p| p == format!("messages/{S4}.jsonl"))
    );
    // Sessions come largest first.
    let sizes: Vec<u64> = lines
        .iter()
        .filter(|l| l["type"] == "storage_session")
        .map(|l| l["bytes"].as_u64().unwrap())
        .collect();
    assert!(sizes.windows(2).all(|w| w[0] >= w[1]), "{sizes:?}");

    ok(&s.root, &["delete", S4]);
    let lines = json_lines(&ok(&s.root, &["storage", "--json"]));
    let batch = lines.iter().find(|l| l["type"] == "storage_batch").unwrap();
    assert_eq!(batch["batch"], BATCH);
    assert_eq!(
        batch["files"], 5,
        "2 runs, the manifest, the snapshot and the messages copy"
    );
    assert_eq!(lines.last().unwrap()["run_files"], 8);
    // Piped, the tables are tab-separated rows.
    let text = ok(&s.root, &["storage"]);
    assert!(text.contains(&format!("\n{BATCH}\t5\t")), "{text}");
    assert!(text.contains("  runs       8 file(s)"), "{text}");
}

#[test]
fn name_pin_and_delete_take_unique_prefixes_like_every_command() {
    let s = sample_store();
    assert_eq!(
        ok(&s.root, &["name", "5a1e0002", "prefix title"]),
        format!("session {S2} is titled \"prefix title\" (use it as @prefix title)\n")
    );
    ok(&s.root, &["pin", "5a1e0002"]);
    let listed = json_lines(&ok(&s.root, &["sessions", "--all", "--json"]));
    let s2 = listed.iter().find(|x| x["session_id"] == S2).unwrap();
    assert_eq!(
        (&s2["title"], &s2["pinned"]),
        (&Value::from("prefix title"), &Value::from(true))
    );
    ok(&s.root, &["unpin", "5a1e0002"]);
    // A run prefix and a session prefix name what their whole ids name.
    let plan = json_lines(&ok(
        &s.root,
        &["delete", "7a1e0007", "5a1e0004", "--dry-run", "--json"],
    ));
    let summary = plan.last().unwrap();
    assert_eq!(
        (&summary["runs"], &summary["sessions"]),
        (&Value::from(3), &Value::from(1))
    );
    // A prefix of several ids is a usage error listing them.
    let r = run_in(&s.root, &["name", "5a1e000", "x"]);
    assert_eq!(r.code, 2, "{}", r.err);
    assert!(
        r.err.contains("ambiguous") && r.err.contains(S2),
        "{}",
        r.err
    );
}

#[test]
fn titles_name_sessions_in_listings_and_as_ids() {
    let s = sample_store();
    assert_eq!(
        ok(&s.root, &["name", S1, "release notes"]),
        format!("session {S1} is titled \"release notes\" (use it as @release notes)\n")
    );
    let listed = json_lines(&ok(&s.root, &["sessions", "--all", "--json"]));
    let s1 = listed.iter().find(|x| x["session_id"] == S1).unwrap();
    assert_eq!(s1["title"], "release notes");
    assert_eq!(s1["pinned"], false);
    assert!(
        listed
            .iter()
            .filter(|x| x["session_id"] != S1)
            .all(|x| x["title"].is_null())
    );
    assert!(ok(&s.root, &["sessions", "--all"]).contains("\"release notes\" List the files"));
    // `@title` works wherever a session id does.
    assert_eq!(
        ok(&s.root, &["show", "@release notes"]),
        ok(&s.root, &["show", S1])
    );
    assert_eq!(
        ok(&s.root, &["export", "@Release Notes", "--format", "md"]),
        ok(&s.root, &["export", S1, "--format", "md"])
    );
    assert_eq!(
        ok(&s.root, &["history", "@release notes", "--json"]),
        ok(&s.root, &["history", S1, "--json"])
    );
    assert_eq!(
        json_lines(&ok(
            &s.root,
            &["runs", "--session", "@release notes", "--json"]
        ))
        .iter()
        .filter(|r| r["run_id"].is_string())
        .count(),
        2
    );
    let r = run_in(&s.root, &["show", "@nothing like it"]);
    assert_eq!(r.code, 3, "{}", r.err);
    // An ambiguous title is a usage error listing the candidates.
    ok(&s.root, &["name", S2, "release notes"]);
    let r = run_in(&s.root, &["show", "@release notes"]);
    assert_eq!(r.code, 2);
    assert_eq!(
        r.err,
        format!(
            "sessions: the title \"release notes\" names 2 sessions; use one of their ids: {S1} (release notes), {S2} (release notes)\n"
        )
    );
    assert_eq!(
        ok(&s.root, &["name", S2, "--clear"]),
        format!("session {S2} has no title\n")
    );
    ok(&s.root, &["show", "@release notes"]);
    // Bad titles and unknown sessions are refused.
    assert_eq!(run_in(&s.root, &["name", S1, "  "]).code, 2);
    assert_eq!(run_in(&s.root, &["name", S1, "@x"]).code, 2);
    assert_eq!(
        run_in(
            &s.root,
            &["name", "0000dead-0000-4000-8000-000000000000", "t"]
        )
        .code,
        3
    );
    assert_eq!(run_in(&s.root, &["--read-only", "name", S1, "t"]).code, 2);
}

#[test]
fn delete_keeps_a_run_a_writer_holds_and_its_session() {
    let s = sample_store();
    let held = s.root.join(S4_RUNS[1]);
    let writer =
        session_jsonl::RunWriter::open_append(&held, session_jsonl::WriterOptions::default())
            .unwrap();
    let out = ok(&s.root, &["delete", S4]);
    assert!(held.is_file(), "a locked run was moved");
    assert!(!s.root.join(S4_RUNS[0]).exists());
    assert!(
        session_ids(&s.root).contains(S4),
        "the session of a held run was moved"
    );
    assert!(
        out.contains("skipped  move-session state.db (a writer has one of its runs open; kept)\n"),
        "{out}"
    );
    assert!(
        out.ends_with("; kept 1 locked run(s), 1 open session(s)\n"),
        "{out}"
    );
    drop(writer);
}
