//! The JSON contract (docs/cli-json.md): the committed schema is the one the row types
//! generate, and every line every command writes with `--json` (plus the documents of
//! `replay` and `export --format json`) on the sample store and on the reference's recorded
//! store validates against it, carries a `type`, uses snake_case keys, and every row type
//! of the schema is seen at least once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;
use session_cli::{Env, Terminal, run_with};

const NOW: &str = "2026-12-01T12:00:00.000Z";

fn schema_path() -> PathBuf {
    session_test_support::workspace_root().join("docs/cli-json.schema.json")
}

#[test]
fn committed_schema_is_the_one_the_row_types_generate() {
    let committed: Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path()).unwrap()).unwrap();
    assert!(
        committed == session_cli::json_schema(),
        "docs/cli-json.schema.json is stale: run `cargo xtask schema cli`"
    );
}

/// One command's output: exit code and stdout.
struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn sessions(root: &Path, args: &[&str]) -> Out {
    let env = Env::from_pairs([
        ("HOME".to_owned(), "/nonexistent-home".to_owned()),
        ("SESSIONS_NOW".to_owned(), NOW.to_owned()),
        ("TZ".to_owned(), "UTC".to_owned()),
    ]);
    let mut argv: Vec<std::ffi::OsString> = vec!["sessions".into(), "--root".into()];
    argv.push(root.as_os_str().to_owned());
    argv.extend(args.iter().map(Into::into));
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = run_with(argv, &mut out, &mut err, &env, Terminal::default());
    Out {
        code,
        stdout: String::from_utf8(out).unwrap(),
        stderr: String::from_utf8(err).unwrap(),
    }
}

/// Checks every line of `out` against the schema and the contract's rules; returns the
/// lines and records their types in `seen`.
fn check_lines(
    validator: &jsonschema::Validator,
    what: &str,
    out: &Out,
    seen: &mut BTreeSet<String>,
) -> Vec<Value> {
    assert!(
        !out.stderr.contains("panicked"),
        "{what}: panic: {}",
        out.stderr
    );
    assert_ne!(out.code, session_cli::EXIT_USAGE, "{what}: {}", out.stderr);
    let mut lines = Vec::new();
    for line in out.stdout.lines() {
        let v: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {line}"));
        if let Some(e) = validator.iter_errors(&v).next() {
            panic!(
                "{what}: line does not match the schema: {e} at {}\n{line}",
                e.instance_path()
            );
        }
        let obj = v
            .as_object()
            .unwrap_or_else(|| panic!("{what}: not an object: {line}"));
        let ty = obj["type"]
            .as_str()
            .unwrap_or_else(|| panic!("{what}: no type: {line}"));
        for key in obj.keys() {
            assert!(
                !key.is_empty()
                    && key
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                "{what}: key {key:?} is not snake_case: {line}"
            );
        }
        if ty == "run" {
            assert!(
                obj["run_id"].is_string(),
                "{what}: run without run_id: {line}"
            );
        }
        seen.insert(ty.to_owned());
        lines.push(v);
    }
    lines
}

/// The row types a command writes (the table of docs/cli-json.md).
fn types_of(command: &str) -> &'static [&'static str] {
    match command {
        "where" => &["where"],
        "runs" => &["run", "diagnostic", "cursor"],
        "sessions" => &["session"],
        "history" => &["event", "summary"],
        "verify" => &["finding", "summary"],
        "repair" | "gc" => &["action"],
        "delete" | "restore" => &["action", "summary"],
        "storage" => &["storage_day", "storage_session", "storage_batch", "summary"],
        "archive" | "unarchive" => &["action", "note"],
        "reindex" => &["index_change", "summary"],
        "stats" => &["stats_group", "summary"],
        "replay" => &["prompt"],
        "export" => &["run_export", "session_export"],
        "search" => &["title_hit", "search_hit"],
        other => panic!("no types listed for {other}"),
    }
}

/// Runs every command with `--json` (and the JSON documents) on a copy of `src`, validating
/// every line.
fn every_command(validator: &jsonschema::Validator, src: &Path, seen: &mut BTreeSet<String>) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    session_test_support::copy_tree(src, &root).unwrap();
    // A file under the run tree that is no run: `runs` and `reindex` report it.
    let day = root.join("2026/11/30");
    std::fs::create_dir_all(&day).unwrap();
    std::fs::write(day.join("not-a-run.jsonl"), b"").unwrap();

    let mut run = |args: &[&str]| -> Vec<Value> {
        let out = sessions(&root, args);
        let what = args.join(" ");
        let lines = check_lines(validator, &what, &out, seen);
        // Each command writes the types docs/cli-json.md lists for it, and nothing else.
        let allowed = types_of(args[0]);
        for l in &lines {
            assert!(
                allowed.contains(&l["type"].as_str().unwrap()),
                "{what}: a {} line: {l}",
                l["type"]
            );
        }
        lines
    };
    let reindex = run(&["reindex", "--json", "--search"]);
    assert_eq!(reindex.last().unwrap()["command"], "reindex", "{reindex:?}");
    assert!(
        reindex.last().unwrap()["search_documents"]
            .as_u64()
            .unwrap()
            > 0,
        "{reindex:?}"
    );
    let hits = run(&["search", "--json", "the"]);
    assert!(!hits.is_empty());
    run(&["where", "--json"]);
    let runs = run(&["runs", "--json", "--limit", "1000"]);
    let run_ids: Vec<String> = runs
        .iter()
        .filter(|v| v["type"] == "run")
        .map(|v| v["run_id"].as_str().unwrap().to_owned())
        .collect();
    assert!(run_ids.len() >= 2, "{runs:?}");
    // A titled session is found by its title.
    let sid = runs
        .iter()
        .find_map(|v| v["session_id"].as_str())
        .unwrap()
        .to_owned();
    let named = sessions(&root, &["name", &sid, "Contract Title"]);
    assert_eq!(named.code, 0, "{}", named.stderr);
    let titled = run(&["search", "--json", "contract"]);
    assert_eq!(titled[0]["type"], "title_hit", "{titled:?}");
    assert_eq!(titled[0]["session_id"], sid.as_str());
    assert_eq!(titled[0]["title"], "Contract Title");
    let page = run(&["runs", "--json", "--limit", "1"]);
    assert_eq!(page.last().unwrap()["type"], "cursor", "{page:?}");
    run(&[
        "runs",
        "--json",
        "--outcome",
        "crashed",
        "--outcome",
        "running",
    ]);
    let listed = run(&["sessions", "--all", "--json"]);
    let session_ids: Vec<String> = listed
        .iter()
        .map(|v| v["session_id"].as_str().unwrap().to_owned())
        .collect();
    assert!(!session_ids.is_empty());
    for s in &session_ids {
        let h = run(&["history", s, "--json"]);
        assert_eq!(h.last().unwrap()["command"], "history", "{h:?}");
        run(&["export", s, "--format", "json"]);
    }
    for id in &run_ids {
        run(&["replay", id]);
        run(&["export", id, "--format", "json"]);
        run(&["verify", "--json", id]);
    }
    let verify = run(&["verify", "--json"]);
    assert_eq!(verify.last().unwrap()["command"], "verify");
    for by in ["day", "model", "session"] {
        let stats = run(&["stats", "--json", "--by", by]);
        let summary = stats.last().unwrap();
        assert_eq!(summary["command"], "stats");
        let o = &summary["outcomes"];
        let counted: u64 = [
            "completed",
            "error",
            "cancelled",
            "running",
            "crashed",
            "other",
        ]
        .iter()
        .map(|k| o[k].as_u64().unwrap())
        .sum();
        assert_eq!(counted, summary["runs"].as_u64().unwrap(), "{summary}");
    }
    managing(&root, &mut run, &session_ids[0]);
    run(&["repair", "--dry-run", "--json"]);
    run(&["gc", "--older-than", "1d", "--dry-run", "--json"]);
    run(&["gc", "--keep-last", "1", "--dry-run", "--json"]);
    run(&["gc", "--max-size", "1K", "--dry-run", "--json"]);
    run(&["archive", "--older-than", "1d", "--dry-run", "--json"]);
    run(&["gc", "--empty-trash", "--json"]);
    run(&["repair", "--json"]);
    run(&["archive", "--older-than", "1d", "--json"]);
    run(&["unarchive", "--all", "--dry-run", "--json"]);
    run(&["unarchive", "--all", "--json"]);
    run(&["gc", "--older-than", "1d", "--json"]);
}

/// The commands that manage history, on `session`: a title and a pin show in `sessions` and
/// `storage`; `delete` and `restore` end with a summary naming the trash batch, which
/// `storage` lists while it exists.
fn managing(root: &Path, run: &mut dyn FnMut(&[&str]) -> Vec<Value>, session: &str) {
    // `name`, `pin` and `unpin` write one line of text and have no `--json`.
    for args in [&["name", session, "contract check"][..], &["pin", session]] {
        let out = sessions(root, args);
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
    }
    let listed = run(&["sessions", "--all", "--json"]);
    let row = listed.iter().find(|l| l["session_id"] == session).unwrap();
    assert_eq!(row["title"], "contract check", "{row}");
    assert_eq!(row["pinned"], true, "{row}");
    let out = sessions(root, &["unpin", session]);
    assert_eq!(out.code, 0, "{}", out.stderr);

    let storage = run(&["storage", "--json"]);
    let summary = storage.last().unwrap();
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["command"], "storage");
    assert_eq!(summary["trash_bytes"], 0, "{summary}");
    let row = storage
        .iter()
        .find(|l| l["type"] == "storage_session" && l["session_id"] == session)
        .unwrap();
    assert_eq!(row["title"], "contract check", "{row}");
    let day_runs: u64 = storage
        .iter()
        .filter(|l| l["type"] == "storage_day")
        .map(|l| l["runs"].as_u64().unwrap())
        .sum();
    assert_eq!(
        day_runs,
        summary["run_files"].as_u64().unwrap(),
        "{storage:?}"
    );

    let plan = run(&["delete", session, "--dry-run", "--json"]);
    let planned = plan.last().unwrap();
    assert_eq!(planned["command"], "delete", "{plan:?}");
    assert_eq!(planned["dry_run"], true);
    assert_eq!(planned["sessions"], 1, "{planned}");
    let moved = run(&["delete", session, "--json"]);
    let summary = moved.last().unwrap();
    assert_eq!(summary["command"], "delete", "{moved:?}");
    assert_eq!(summary["dry_run"], false);
    assert_eq!(summary["sessions"], 1, "{summary}");
    assert_eq!(summary["runs"], planned["runs"], "{summary}");
    assert_eq!(
        summary["batch"], planned["batch"],
        "the dry run names the same batch"
    );
    let batch = summary["batch"].as_str().unwrap().to_owned();
    assert!(root.join("trash").join(&batch).is_dir(), "{summary}");
    assert_eq!(
        moved.len() as u64,
        1 + summary["runs"].as_u64().unwrap() + 1
    );

    let storage = run(&["storage", "--json"]);
    let row = storage
        .iter()
        .find(|l| l["type"] == "storage_batch")
        .unwrap();
    assert_eq!(row["batch"], batch.as_str(), "{row}");
    assert_eq!(
        storage.last().unwrap()["trash_bytes"],
        row["bytes"],
        "{storage:?}"
    );

    let plan = run(&["restore", &batch, "--dry-run", "--json"]);
    let planned = plan.last().unwrap();
    assert_eq!(planned["command"], "restore", "{plan:?}");
    assert_eq!(planned["batch_removed"], false, "{planned}");
    let back = run(&["restore", &batch, "--json"]);
    let summary = back.last().unwrap();
    assert_eq!(summary["command"], "restore", "{back:?}");
    assert_eq!(summary["batch"], batch.as_str());
    assert_eq!(summary["sessions"], 1, "{summary}");
    assert_eq!(summary["runs"], planned["runs"], "{summary}");
    assert_eq!(summary["batch_removed"], true, "{summary}");
    assert!(!root.join("trash").join(&batch).exists());
}

#[test]
fn every_json_line_of_every_command_matches_the_schema() {
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path()).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let mut seen = BTreeSet::new();
    every_command(
        &validator,
        &session_test_support::sample_sessions_dir(),
        &mut seen,
    );
    every_command(
        &validator,
        &session_test_support::codelia_sessions_dir(),
        &mut seen,
    );
    // Every row type of the schema was written at least once.
    let types: BTreeSet<String> = schema["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["properties"]["type"]["const"].as_str().map(str::to_owned))
        .collect();
    assert!(types.len() >= 15, "{types:?}");
    let unseen: Vec<&String> = types.difference(&seen).collect();
    assert!(unseen.is_empty(), "row types never written: {unseen:?}");
}

#[test]
fn schema_refuses_lines_outside_the_contract() {
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path()).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let cursor = serde_json::json!({"type": "cursor", "next_cursor": "abc"});
    assert!(validator.is_valid(&cursor));
    let totals = serde_json::json!({
        "type": "summary", "command": "stats", "by": "day", "tz": "UTC", "runs": 1,
        "outcomes": {"completed": 1, "error": 0, "cancelled": 0, "running": 0, "crashed": 0, "other": 0},
        "invocations": 0, "input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 0,
        "total_tokens": 0
    });
    assert!(validator.is_valid(&totals));
    let action = serde_json::json!({
        "type": "action", "action": "move_run", "file": "2026/11/30/r.jsonl", "id": null,
        "status": "done", "detail": ""
    });
    assert!(validator.is_valid(&action));
    let event = serde_json::json!({
        "type": "event", "run_id": "r", "seq": 1, "event_type": "text",
        "event": {"type": "text", "content": "hi", "anyKey": [1, {"x": null}]}
    });
    assert!(validator.is_valid(&event), "stored JSON stays open");

    let mut refused = Vec::new();
    let mut edit = |base: &Value, f: &dyn Fn(&mut serde_json::Map<String, Value>)| {
        let mut v = base.clone();
        f(v.as_object_mut().unwrap());
        refused.push(v);
    };
    edit(&cursor, &|m| {
        m.insert("type".into(), "page".into());
    });
    edit(&cursor, &|m| {
        m.remove("type");
    });
    edit(&cursor, &|m| {
        m.insert("nextCursor".into(), "abc".into());
    });
    edit(&cursor, &|m| {
        m.remove("next_cursor");
    });
    edit(&totals, &|m| {
        m.insert("command".into(), "runs".into());
    });
    edit(&totals, &|m| {
        m["outcomes"]["open"] = 1.into();
    });
    edit(&totals, &|m| {
        m["outcomes"].as_object_mut().unwrap().remove("crashed");
    });
    edit(&totals, &|m| {
        m.insert("total".into(), true.into());
    });
    edit(&action, &|m| {
        m.insert("action".into(), "move-run".into());
    });
    edit(&action, &|m| {
        m.insert("status".into(), "maybe".into());
    });
    // `storage` once wrote its totals as `type: "total"`, and `session` rows of its own.
    let storage = serde_json::json!({
        "type": "summary", "command": "storage", "root": "/s", "bytes": 3, "run_files": 1,
        "run_bytes": 1, "archived_files": 0, "archived_bytes": 0, "messages_files": 1,
        "messages_bytes": 1, "legacy_files": 0, "legacy_bytes": 0, "state_db_bytes": 1,
        "trash_files": 0, "trash_bytes": 0
    });
    assert!(validator.is_valid(&storage));
    edit(&storage, &|m| {
        m.insert("type".into(), "total".into());
        m.remove("command");
    });
    refused.push(serde_json::json!({
        "type": "session", "session_id": "s", "title": null, "bytes": 1, "runs": 0,
        "run_bytes": 0, "messages_bytes": 1, "legacy_bytes": 0
    }));
    for v in &refused {
        assert!(!validator.is_valid(v), "accepted: {v}");
    }
}

/// A `run.end` outcome this version does not know is the same word in `runs` and is counted
/// as `other` by `stats`, so the outcome counts still add up to `runs`.
#[test]
fn an_unknown_run_end_outcome_is_one_word_in_runs_and_other_in_stats() {
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path()).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let day = root.join("2026/11/30");
    std::fs::create_dir_all(&day).unwrap();
    let run = "0e0e0e0e-0000-4000-8000-00000000e0e1";
    std::fs::write(
        day.join(format!("{run}.jsonl")),
        format!(
            "{{\"type\":\"header\",\"schema_version\":1,\"run_id\":\"{run}\",\"started_at\":\"2026-11-30T10:00:00.000Z\"}}\n\
             {{\"type\":\"run.end\",\"run_id\":\"{run}\",\"ts\":\"2026-11-30T10:00:01.000Z\",\"outcome\":\"timed_out\"}}\n"
        ),
    )
    .unwrap();
    let mut seen = BTreeSet::new();
    let runs = check_lines(
        &validator,
        "runs",
        &sessions(&root, &["runs", "--json"]),
        &mut seen,
    );
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["outcome"], "timed_out");
    let stats = check_lines(
        &validator,
        "stats",
        &sessions(&root, &["stats", "--json"]),
        &mut seen,
    );
    let want = serde_json::json!({"completed": 0, "error": 0, "cancelled": 0, "running": 0, "crashed": 0, "other": 1});
    assert_eq!(stats.len(), 2, "{stats:?}");
    for line in &stats {
        assert_eq!(line["runs"], 1, "{line}");
        assert_eq!(line["outcomes"], want, "{line}");
    }
}
