//! End-to-end tests of the `sessions` binary against copies of the committed sample store and
//! of the recorded reference fixtures (`testdata/codelia-runtime`, never modified).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::copy_tree;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// Fixed "now" for commands that compare against the current time (gc, archive, --since).
const NOW: &str = "2026-11-30T12:00:00Z";

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fixtures() -> PathBuf {
    session_test_support::codelia_runtime_dir()
}

fn sample() -> PathBuf {
    session_test_support::sample_sessions_dir()
}

fn expected() -> Value {
    let text = std::fs::read_to_string(fixtures().join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// A private copy of a store, removed at the end of the test.
struct Store {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

fn copy_of(src: &Path) -> Store {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    copy_tree(src, &root);
    Store { _dir: dir, root }
}

fn fixture_store() -> Store {
    copy_of(&fixtures().join("sessions"))
}

fn sample_store() -> Store {
    copy_of(&sample())
}

/// Every file under `dir` with its bytes (SQLite's transient `-wal`/`-shm` files excluded).
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
            } else {
                let name = p.to_string_lossy().into_owned();
                if name.ends_with("-wal") || name.ends_with("-shm") {
                    continue;
                }
                out.insert(
                    p.strip_prefix(dir).unwrap().to_owned(),
                    std::fs::read(&p).unwrap(),
                );
            }
        }
    }
    out
}

fn sessions_cmd() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sessions"));
    c.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", "/nonexistent-home")
        .env("TZ", "UTC")
        .env("SESSIONS_NOW", NOW);
    c
}

struct Run {
    code: i32,
    out: String,
    err: String,
}

fn run_in(root: &Path, args: &[&str]) -> Run {
    let mut c = sessions_cmd();
    c.arg("--root").arg(root).args(args);
    finish(c.output().unwrap())
}

fn finish(o: Output) -> Run {
    let r = Run {
        code: o.status.code().unwrap_or(-1),
        out: String::from_utf8(o.stdout).unwrap(),
        err: String::from_utf8(o.stderr).unwrap(),
    };
    assert!(!r.err.contains("panicked"), "panic: {}", r.err);
    r
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

// ---------------------------------------------------------------------------------------------
// Root resolution, help and exit codes.

#[test]
fn where_follows_flag_then_layout_variables() {
    let r = finish(sessions_cmd().args(["where", "--json"]).output().unwrap());
    let v: Value = serde_json::from_str(r.out.trim()).unwrap();
    assert_eq!(v["root"], "/nonexistent-home/.codelia/sessions");
    assert_eq!(v["source"], "home");

    let r = finish(
        sessions_cmd()
            .env("CODELIA_LAYOUT", "XDG")
            .env("XDG_STATE_HOME", "")
            .args(["where", "--json"])
            .output()
            .unwrap(),
    );
    let v: Value = serde_json::from_str(r.out.trim()).unwrap();
    assert_eq!(
        v["root"], "/nonexistent-home/.local/state/codelia/sessions",
        "empty XDG_STATE_HOME counts as unset"
    );
    assert_eq!(v["source"], "xdg_default");

    let r = finish(
        sessions_cmd()
            .env("CODELIA_LAYOUT", "xdg")
            .env("XDG_STATE_HOME", "/s")
            .args(["where"])
            .output()
            .unwrap(),
    );
    assert!(r.out.starts_with("/s/codelia/sessions\n"), "{}", r.out);
    assert!(r.out.contains("XDG_STATE_HOME"));

    let r = finish(
        sessions_cmd()
            .env("CODELIA_LAYOUT", "xdg")
            .args(["--root", "/x/y", "where", "--json"])
            .output()
            .unwrap(),
    );
    let v: Value = serde_json::from_str(r.out.trim()).unwrap();
    assert_eq!(v["root"], "/x/y");
    assert_eq!(v["source"], "flag");
    assert_eq!(v["exists"], false);
}

#[test]
fn help_documents_exit_codes_and_bad_usage_exits_2() {
    let r = finish(sessions_cmd().arg("--help").output().unwrap());
    assert_eq!(r.code, 0);
    for line in [
        "0  success",
        "1  findings (not failures): verify found problems",
        "2  usage error",
        "3  not found",
        "4  data or I/O error",
    ] {
        assert!(r.out.contains(line), "help lacks {line:?}");
    }
    for cmd in [
        "where", "runs", "sessions", "show", "replay", "history", "tail", "verify", "repair",
        "stats", "export", "gc", "archive", "reindex",
    ] {
        assert!(r.out.contains(&format!("  {cmd}")), "help lacks {cmd}");
    }
    let r = finish(sessions_cmd().args(["runs", "--bogus"]).output().unwrap());
    assert_eq!(r.code, 2);
    assert!(r.err.contains("--bogus"));
    let r = finish(sessions_cmd().args(["gc"]).output().unwrap());
    assert_eq!(r.code, 2, "gc needs --older-than or --empty-trash");
    let s = sample_store();
    assert_eq!(
        run_in(&s.root, &["runs", "--since", "the day before"]).code,
        2
    );
    assert_eq!(run_in(&s.root, &["gc", "--older-than", "3 eons"]).code, 2);
    assert_eq!(run_in(&s.root, &["runs", "--cursor", "garbage"]).code, 2);
}

#[test]
fn unknown_ids_and_missing_stores_exit_3() {
    let s = sample_store();
    for args in [
        &["show", "00000000-0000-4000-8000-000000000000"][..],
        &["replay", "00000000-0000-4000-8000-000000000000"],
        &[
            "replay",
            "7a1e0001-0000-4000-8000-000000000101",
            "--seq",
            "99",
        ],
        &["history", "00000000-0000-4000-8000-000000000000"],
        &["export", "nope", "--format", "md"],
        &["tail", "nope"],
    ] {
        let r = run_in(&s.root, args);
        assert_eq!(r.code, 3, "{args:?}: {}", r.err);
        assert_eq!(r.err.lines().count(), 1, "one line on stderr: {}", r.err);
        assert!(r.err.starts_with("sessions: "));
    }
    // An id that is no safe file name is a usage error (2), in `show` as in `tail`.
    for args in [
        &["show", "../../etc/passwd"][..],
        &["tail", "../../etc/passwd"],
    ] {
        let r = run_in(&s.root, args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.err);
        assert_eq!(r.err.lines().count(), 1, "one line on stderr: {}", r.err);
    }
    let missing = s.root.join("does-not-exist");
    for args in [
        &["runs"][..],
        &["sessions", "--all"],
        &["verify"],
        &["stats"],
        &["reindex"],
    ] {
        let r = run_in(&missing, args);
        assert_eq!(r.code, 3, "{args:?}: {}", r.err);
        assert!(r.err.contains("no session store"), "{}", r.err);
    }
    assert!(!missing.exists(), "commands never create a store");
}

// ---------------------------------------------------------------------------------------------
// Listings against the fixtures' expected facts.

fn expected_outcome(run: &Value) -> &str {
    match run["run_end"]["outcome"].as_str() {
        Some(o) => o,
        None => "crashed",
    }
}

#[test]
fn runs_match_the_fixture_facts() {
    let s = fixture_store();
    let exp = expected();
    let runs = json_lines(&ok(&s.root, &["runs", "--json", "--limit", "1000"]));
    assert_eq!(runs.len(), exp["runs"].as_object().unwrap().len());
    let mut prev = String::from("~");
    for r in &runs {
        let id = r["run_id"].as_str().unwrap();
        let e = &exp["runs"][id];
        assert!(e.is_object(), "unexpected run {id}");
        assert_eq!(r["session_id"], e["session_id"], "{id}");
        assert_eq!(r["started_at"], e["started_at"], "{id}");
        assert_eq!(r["outcome"].as_str().unwrap(), expected_outcome(e), "{id}");
        assert_eq!(
            r["invocations"].as_u64().unwrap(),
            e["llm_request_seqs"].as_array().unwrap().len() as u64,
            "{id}"
        );
        assert_eq!(
            r["records"].as_u64().unwrap(),
            e["lines"].as_u64().unwrap(),
            "{id}"
        );
        let total: u64 = e["llm_responses"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|x| x["usage"]["total_tokens"].as_u64())
            .sum();
        assert_eq!(r["type"], "run", "{id}");
        assert_eq!(r["total_tokens"].as_u64().unwrap(), total, "{id}");
        let started = r["started_at"].as_str().unwrap().to_owned();
        assert!(started <= prev, "newest first");
        prev = started;
    }
    // Filters.
    let crashed = json_lines(&ok(&s.root, &["runs", "--json", "--outcome", "crashed"]));
    let ids: Vec<&str> = crashed
        .iter()
        .map(|r| r["run_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        exp["runs_without_run_end"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect::<Vec<_>>()
    );
    let s3 = exp["scenario_sessions"]["S3"].as_str().unwrap();
    let of_s3 = json_lines(&ok(&s.root, &["runs", "--json", "--session", s3]));
    let mut want: Vec<&str> = exp["sessions_from_run_logs"][s3]["runs_in_started_at_order"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    want.reverse();
    assert_eq!(
        of_s3
            .iter()
            .map(|r| r["run_id"].as_str().unwrap())
            .collect::<Vec<_>>(),
        want
    );
    let errors = json_lines(&ok(&s.root, &["runs", "--json", "--outcome", "error"]));
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0]["run_id"], "266dc185-7156-4261-9a75-809bfb833342");
    let none = ok(
        &s.root,
        &[
            "runs",
            "--json",
            "--until",
            "2026-11-30T11:38:24Z",
            "--since",
            "2026-11-30T11:38:23Z",
        ],
    );
    assert_eq!(
        json_lines(&none).len(),
        1,
        "only S1 run 1 started in that second"
    );
    let home = json_lines(&ok(
        &s.root,
        &["runs", "--json", "--workspace", "/home/dev"],
    ));
    assert_eq!(
        home.len(),
        1,
        "S7 is the only run of the /home/dev workspace"
    );
    assert_eq!(home[0]["session_id"], exp["scenario_sessions"]["S7"]);
}

#[test]
fn runs_pages_cover_everything_once() {
    let s = fixture_store();
    let all: Vec<String> = json_lines(&ok(&s.root, &["runs", "--json", "--limit", "1000"]))
        .iter()
        .map(|r| r["run_id"].as_str().unwrap().to_owned())
        .collect();
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut args = vec!["runs", "--json", "--limit", "6"];
        if let Some(c) = &cursor {
            args.push("--cursor");
            args.push(c);
        }
        let lines = json_lines(&ok(&s.root, &args));
        cursor = None;
        for l in lines {
            if let Some(c) = l["next_cursor"].as_str() {
                cursor = Some(c.to_owned());
            } else {
                seen.push(l["run_id"].as_str().unwrap().to_owned());
            }
        }
        if cursor.is_none() {
            break;
        }
    }
    assert_eq!(seen, all);
    // The human listing tells how to get the next page: on stderr when piped, in the listing
    // on a terminal.
    let r = run_in(&s.root, &["runs", "--limit", "3"]);
    assert!(r.err.contains("more: sessions runs --cursor"), "{}", r.err);
    assert!(!r.out.contains("more:"), "{}", r.out);
    let mut c = sessions_cmd();
    c.env("SESSIONS_FORCE_TTY", "100")
        .arg("--root")
        .arg(&s.root)
        .args(["runs", "--limit", "3"]);
    let r = finish(c.output().unwrap());
    assert!(r.out.contains("more: sessions runs --cursor"), "{}", r.out);
}

#[test]
fn sessions_match_the_reference_list() {
    let s = fixture_store();
    let exp = expected();
    let got = json_lines(&ok(&s.root, &["sessions", "--all", "--json"]));
    let want = exp["codelia_storage_api"]["list"].as_array().unwrap();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        for key in [
            "session_id",
            "updated_at",
            "run_id",
            "message_count",
            "last_user_message",
            "workspace_root",
        ] {
            assert_eq!(
                g[key],
                w.get(key).cloned().unwrap_or(Value::Null),
                "{key} of {}",
                w["session_id"]
            );
        }
    }
    let scoped = json_lines(&ok(
        &s.root,
        &["sessions", "--workspace", "/home/dev/acme-app", "--json"],
    ));
    let want: Vec<&Value> = exp["codelia_runtime_rpc_outputs"]["session.list default scope (cwd /home/dev/acme-app)"]["sessions"].as_array().unwrap().iter().map(|s| &s["session_id"]).collect();
    assert_eq!(
        scoped.iter().map(|s| &s["session_id"]).collect::<Vec<_>>(),
        want
    );
    let home = json_lines(&ok(
        &s.root,
        &["sessions", "--workspace", "/home/dev", "--json"],
    ));
    assert_eq!(home.len(), 1);
    assert_eq!(home[0]["session_id"], exp["scenario_sessions"]["S7"]);
    // Human output: one line per session, newest first, non-ASCII kept whole.
    let text = ok(&s.root, &["sessions", "--all"]);
    assert!(text.contains("この画像は何ですか？"));
    assert!(text.contains("(legacy) Check this screenshot[image]"));
}

#[test]
fn history_matches_session_history_answers() {
    let s = fixture_store();
    let exp = expected();
    let answers = &exp["codelia_runtime_rpc_outputs"]["session.history"];
    for (name, answer) in answers.as_object().unwrap() {
        let sid = exp["scenario_sessions"]
            .get(name)
            .or_else(|| exp["legacy_sessions"].get(name))
            .unwrap()
            .as_str()
            .unwrap();
        let r = run_in(&s.root, &["history", sid, "--json"]);
        assert_eq!(r.code, 0, "{name}: {}", r.err);
        let lines = json_lines(&r.out);
        let (summary, events) = lines.split_last().unwrap();
        assert_eq!(summary["runs"], answer["result"]["runs"], "{name}");
        assert_eq!(
            summary["events_sent"], answer["result"]["events_sent"],
            "{name}"
        );
        assert_eq!(
            summary["truncated"].as_bool(),
            Some(answer["result"]["truncated"].as_bool().unwrap_or(false)),
            "{name}"
        );
        assert!(events.iter().all(|e| e["type"] == "event"), "{name}");
        let got: Vec<(Value, Value, Value)> = events
            .iter()
            .map(|e| {
                (
                    e["run_id"].clone(),
                    e["seq"].clone(),
                    e["event_type"].clone(),
                )
            })
            .collect();
        let want: Vec<(Value, Value, Value)> = answer["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["run_id"].clone(), e["seq"].clone(), e["type"].clone()))
            .collect();
        assert_eq!(got, want, "{name}");
    }
    let s2 = exp["scenario_sessions"]["S2"].as_str().unwrap();
    let lines = json_lines(&ok(
        &s.root,
        &["history", s2, "--json", "--max-events", "5"],
    ));
    let summary = lines.last().unwrap();
    let want = &exp["codelia_runtime_rpc_outputs"]["session.history S2 max_events=5"];
    assert_eq!(summary["runs"], want["runs"]);
    assert_eq!(summary["events_sent"], want["events_sent"]);
    assert_eq!(summary["truncated"], want["truncated"]);
}

#[test]
fn stats_add_up_to_the_run_index() {
    let s = fixture_store();
    let exp = expected();
    let lines = json_lines(&ok(&s.root, &["stats", "--by", "model", "--json"]));
    let (total, groups) = lines.split_last().unwrap();
    assert_eq!(total["type"], "summary");
    assert_eq!(total["command"], "stats");
    assert_eq!(total["by"], "model");
    assert_eq!(total["runs"].as_u64().unwrap(), 20);
    let invocations: u64 = exp["runs"]
        .as_object()
        .unwrap()
        .values()
        .map(|r| r["llm_request_seqs"].as_array().unwrap().len() as u64)
        .sum();
    assert_eq!(total["invocations"].as_u64().unwrap(), invocations);
    assert_eq!(
        groups
            .iter()
            .map(|g| g["runs"].as_u64().unwrap())
            .sum::<u64>(),
        20
    );
    let models: BTreeSet<&str> = groups
        .iter()
        .map(|g| {
            assert_eq!(
                (&g["type"], &g["by"]),
                (&"stats_group".into(), &"model".into())
            );
            g["key"].as_str().unwrap()
        })
        .collect();
    assert_eq!(
        models,
        BTreeSet::from([
            "anthropic/claude-haiku-4-5",
            "anthropic/claude-sonnet-4-5",
            "openai/gpt-5.6"
        ])
    );
    // One vocabulary with `runs`: the run without a terminal record and without a writer is
    // `crashed`, as `runs --outcome crashed` lists it.
    assert_eq!(
        total["outcomes"],
        serde_json::json!({"completed": 16, "error": 1, "cancelled": 2, "running": 0, "crashed": 1, "other": 0})
    );
    let crashed = json_lines(&ok(&s.root, &["runs", "--json", "--outcome", "crashed"]));
    assert_eq!(crashed.len(), 1, "{crashed:?}");
    let per_group: u64 = groups
        .iter()
        .map(|g| g["outcomes"]["crashed"].as_u64().unwrap())
        .sum();
    assert_eq!(per_group, 1);
    // The human table has a bar chart whose longest bar belongs to the biggest group.
    let mut c = sessions_cmd();
    c.env("SESSIONS_FORCE_TTY", "200")
        .arg("--root")
        .arg(&s.root)
        .args(["stats", "--by", "model"]);
    let text = finish(c.output().unwrap()).out;
    let sonnet = text
        .lines()
        .find(|l| l.starts_with("anthropic/claude-sonnet-4-5"))
        .unwrap();
    assert!(sonnet.ends_with(&"█".repeat(30)), "{sonnet}");
    let by_day = json_lines(&ok(&s.root, &["stats", "--json"]));
    assert_eq!(
        (&by_day[0]["by"], &by_day[0]["key"]),
        (&"day".into(), &"2026-11-30".into())
    );
}

// ---------------------------------------------------------------------------------------------
// Transcripts, prompts, exports.

#[test]
fn show_renders_a_transcript_with_facts() {
    let s = fixture_store();
    let text = ok(
        &s.root,
        &["show", "a16b9591-0eba-4e91-bacf-06435f8b70a3", "--utc"],
    );
    assert!(text.starts_with("Run a16b9591-0eba-4e91-bacf-06435f8b70a3\n"));
    assert!(text.contains("Hanako 花子"));
    assert!(
        text.contains("tool error read toolu_01Fake00000000000004"),
        "the sandbox error is shown as a tool error"
    );
    assert_eq!(text.matches("→ llm #").count(), 5);
    assert!(
        !text.contains('\x1b'),
        "no colour when stdout is not a terminal"
    );
    let crashed = ok(&s.root, &["show", "2a11c3a2-3276-4762-88f9-5f8918cb8042"]);
    assert!(
        crashed.trim_end().ends_with(
            "incomplete: no run.end: the run is still being written or its process died"
        ),
        "{crashed}"
    );
    // A session id shows every run of the session, oldest first.
    let s1 = ok(&s.root, &["show", "505df585-1046-40f7-a56f-9e890871501c"]);
    let heads: Vec<&str> = s1.lines().filter(|l| l.starts_with("Run ")).collect();
    assert_eq!(
        heads,
        [
            "Run dd74a9e6-ad97-48cf-9d7e-b0e6b5de066a",
            "Run a615ec01-892d-4372-9f64-75de155ed2ab",
            "Run 9ec95fe8-ae59-449a-ab53-6e1fcc61a3b0"
        ]
    );
    // --color always colours; NO_COLOR does not stop an explicit request.
    let coloured = ok(
        &s.root,
        &[
            "--color",
            "always",
            "show",
            "dd74a9e6-ad97-48cf-9d7e-b0e6b5de066a",
        ],
    );
    assert!(coloured.contains("\x1b[1m"));
    // --raw gives the stored bytes.
    let raw = ok(
        &s.root,
        &["show", "--raw", "dd74a9e6-ad97-48cf-9d7e-b0e6b5de066a"],
    );
    assert_eq!(
        raw.as_bytes(),
        std::fs::read(
            s.root
                .join("2026/11/30/dd74a9e6-ad97-48cf-9d7e-b0e6b5de066a.jsonl")
        )
        .unwrap()
    );
}

#[test]
fn replay_prints_the_exact_prompt() {
    let s = fixture_store();
    let exp = expected();
    let run = "a16b9591-0eba-4e91-bacf-06435f8b70a3";
    let file = std::fs::read_to_string(s.root.join(format!("2026/11/30/{run}.jsonl"))).unwrap();
    for seq in exp["runs"][run]["llm_request_seqs"].as_array().unwrap() {
        let seq = seq.as_i64().unwrap();
        let out = ok(&s.root, &["replay", run, "--seq", &seq.to_string()]);
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["seq"].as_i64(), Some(seq));
        // The messages array comes out byte-for-byte as stored in the request record.
        let start = out.find("\"messages\":").unwrap() + "\"messages\":".len();
        let messages = &out[start..out.len() - 2];
        let line = file
            .lines()
            .find(|l| {
                l.contains("\"type\":\"llm.request\"") && l.contains(&format!("\"seq\":{seq},"))
            })
            .unwrap();
        assert!(
            line.contains(messages),
            "seq {seq}: messages are not byte-identical"
        );
        let want_roles = &exp["runs"][run]["llm_requests"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["seq"].as_i64() == Some(seq))
            .unwrap()["roles"];
        let roles: Vec<Value> = v["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].clone())
            .collect();
        assert_eq!(&Value::Array(roles), want_roles);
    }
    // Default: the last invocation.
    let last: Value = serde_json::from_str(&ok(&s.root, &["replay", run])).unwrap();
    assert_eq!(last["seq"], 5);
    // Q1: the over-inclusive snapshot is reported and can be corrected.
    let r = run_in(
        &s.root,
        &[
            "replay",
            "ea0c20dd-f08f-4655-bda0-56e6e5e6d6f9",
            "--seq",
            "1",
        ],
    );
    assert_eq!(r.code, 0);
    assert!(
        r.err.contains("already holds its own response"),
        "{}",
        r.err
    );
    let v: Value = serde_json::from_str(&r.out).unwrap();
    assert_eq!(v["messages"].as_array().unwrap().len(), 3);
    let fixed: Value = serde_json::from_str(&ok(
        &s.root,
        &[
            "replay",
            "ea0c20dd-f08f-4655-bda0-56e6e5e6d6f9",
            "--seq",
            "1",
            "--corrected",
        ],
    ))
    .unwrap();
    assert_eq!(fixed["messages"].as_array().unwrap().len(), 2);
}

#[test]
fn exports_round_trip_the_stored_bytes() {
    let s = fixture_store();
    let exp = expected();
    for (id, run) in exp["runs"].as_object().unwrap() {
        let out = ok(&s.root, &["export", id, "--format", "jsonl"]);
        let file = std::fs::read(
            s.root.join(
                run["file"]
                    .as_str()
                    .unwrap()
                    .trim_start_matches("sessions/"),
            ),
        )
        .unwrap();
        assert_eq!(
            out.as_bytes(),
            &file[..],
            "{id}: export --format jsonl is the file itself"
        );
    }
    let s2 = exp["scenario_sessions"]["S2"].as_str().unwrap();
    let doc: Value =
        serde_json::from_str(&ok(&s.root, &["export", s2, "--format", "json"])).unwrap();
    assert_eq!(doc["session_id"], s2);
    assert_eq!(doc["state"]["messages"].as_array().unwrap().len(), 26);
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    for r in runs {
        let e = &exp["runs"][r["run_id"].as_str().unwrap()];
        assert_eq!(
            r["records"].as_array().unwrap().len() as u64,
            e["lines"].as_u64().unwrap()
        );
        assert_eq!(r["outcome"].as_str().unwrap(), expected_outcome(e));
    }
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("s2.md");
    ok(
        &s.root,
        &["export", s2, "--format", "md", "-o", md.to_str().unwrap()],
    );
    let text = std::fs::read_to_string(&md).unwrap();
    assert!(text.starts_with(&format!("# Session {s2}\n")));
    assert_eq!(text.matches("\n## Run ").count(), 3);
    assert!(text.contains("この画像は何ですか？"));
}

#[test]
fn tail_prints_and_follows_a_growing_run() {
    use session_jsonl::{Durability, RunWriter, WriterOptions};
    use session_schema::{Header, Record, RunEnd, RunOutcome, RunStatus, RunStatusKind, Timestamp};
    let s = fixture_store();
    let lines = ok(&s.root, &["tail", "266dc185-7156-4261-9a75-809bfb833342"]);
    assert_eq!(lines.lines().count(), 10);
    assert!(lines.lines().last().unwrap().contains("run.end error"));

    let root = s.root.clone();
    let run_id = "0f0f0f0f-0000-4000-8000-00000000f0f0";
    let header = Header {
        schema_version: 1,
        run_id: run_id.into(),
        session_id: Some("s".into()),
        started_at: Timestamp::from_raw("2026-11-30T11:59:00.000Z"),
        ..Default::default()
    };
    let w = RunWriter::create(
        &root,
        &header,
        WriterOptions::with_durability(Durability::Flush),
    )
    .unwrap();
    let mut child = sessions_cmd()
        .arg("--root")
        .arg(&root)
        .args(["tail", "-f", run_id, "--timeout", "20"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Each record is appended only once the previous one was printed, so the later ones are
    // certainly found by following the file (however slow the machine), not by the first read.
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut next_line = || {
        let mut line = String::new();
        std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
        line
    };
    let mut printed = vec![next_line()];
    w.append(&Record::RunStatus(RunStatus {
        run_id: run_id.into(),
        ts: Timestamp::from_raw("2026-11-30T11:59:01.000Z"),
        status: RunStatusKind::Running,
        ..Default::default()
    }))
    .unwrap();
    printed.push(next_line());
    w.append(&Record::RunEnd(RunEnd {
        run_id: run_id.into(),
        ts: Timestamp::from_raw("2026-11-30T11:59:02.000Z"),
        outcome: RunOutcome::Completed,
        ..Default::default()
    }))
    .unwrap();
    printed.push(next_line());
    // Nothing after the run.end: tail -f stops there.
    assert_eq!(next_line(), "");
    assert!(child.wait().unwrap().success());
    let kinds: Vec<&str> = printed
        .iter()
        .map(|l| l.split_whitespace().nth(1).unwrap_or_default())
        .collect();
    assert_eq!(kinds, ["header", "run.status", "run.end"], "{printed:?}");
}

// ---------------------------------------------------------------------------------------------
// verify and repair.

/// The torn tail planted in the sample store: the crashed run's last line.
fn planted_damage(root: &Path) -> (String, u64) {
    let file = "2026/11/29/7a1e0006-0000-4000-8000-000000000601.jsonl";
    let bytes = std::fs::read(root.join(file)).unwrap();
    assert_ne!(bytes.last(), Some(&b'\n'));
    let offset = bytes.iter().rposition(|b| *b == b'\n').unwrap() as u64 + 1;
    (file.to_owned(), offset)
}

#[test]
fn verify_finds_exactly_the_planted_damage() {
    let s = sample_store();
    let r = run_in(&s.root, &["verify", "--json"]);
    assert_eq!(r.code, 1, "{}", r.err);
    let lines = json_lines(&r.out);
    let (summary, findings) = lines.split_last().unwrap();
    let problems: Vec<&Value> = findings
        .iter()
        .filter(|f| f["severity"] == "problem")
        .collect();
    let (file, offset) = planted_damage(&s.root);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0]["kind"], "torn_tail");
    assert_eq!(problems[0]["file"], file.as_str());
    assert_eq!(problems[0]["offset"].as_u64(), Some(offset));
    assert_eq!(problems[0]["line"].as_u64(), Some(9));
    assert_eq!(summary["problems"], 1);
    assert_eq!(summary["run_files"], 10);
    // Human output names file and offset.
    let text = run_in(&s.root, &["verify"]).out;
    assert!(
        text.contains(&format!(
            "{file}:9 (byte offset {offset}): problem [torn_tail]"
        )),
        "{text}"
    );
    // Checking only healthy runs exits 0.
    let r = run_in(
        &s.root,
        &[
            "verify",
            "7a1e0001-0000-4000-8000-000000000101",
            "7a1e0002-0000-4000-8000-000000000201",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.out);
}

#[test]
fn verify_on_the_fixtures_reports_the_known_quirks() {
    let s = fixture_store();
    let r = run_in(&s.root, &["verify", "--json"]);
    let lines = json_lines(&r.out);
    let problems: Vec<(&str, &str)> = lines
        .iter()
        .filter(|f| f["severity"] == "problem")
        .map(|f| (f["id"].as_str().unwrap(), f["kind"].as_str().unwrap()))
        .collect();
    // The pristine reference store has no problem: S7's first request snapshot holding its own
    // response (Q1, compat notes §5 item 9) is a known quirk of the reference, a note.
    assert_eq!(problems, Vec::<(&str, &str)>::new(), "{}", r.out);
    assert_eq!(r.code, 0);
    let quirk: Vec<&Value> = lines
        .iter()
        .filter(|f| f["kind"] == "over_inclusive_snapshot")
        .collect();
    assert_eq!(quirk.len(), 1, "{}", r.out);
    assert_eq!(quirk[0]["id"], "ea0c20dd-f08f-4655-bda0-56e6e5e6d6f9");
    assert_eq!(quirk[0]["severity"], "note");
    let hint = quirk[0]["message"].as_str().unwrap();
    assert!(
        hint.contains("sessions replay ea0c20dd-f08f-4655-bda0-56e6e5e6d6f9 --seq N --corrected"),
        "{hint}"
    );
    let notes: BTreeSet<(&str, &str)> = lines
        .iter()
        .filter(|f| f["severity"] == "note")
        .map(|f| (f["id"].as_str().unwrap_or(""), f["kind"].as_str().unwrap()))
        .collect();
    assert!(
        notes.contains(&("2a11c3a2-3276-4762-88f9-5f8918cb8042", "no_run_end")),
        "S9 crashed"
    );
    assert!(
        notes.contains(&("266dc185-7156-4261-9a75-809bfb833342", "missing_response")),
        "S3 failed call"
    );
    assert!(
        notes.contains(&(
            "c0ffee00-1234-4abc-8def-00112233aabb",
            "legacy_not_migrated"
        )),
        "L3"
    );
}

/// Sets the modification time of every run file under `root` to an hour ago: the copy was
/// just written, and `repair` leaves a torn tail modified in the last two minutes alone.
fn settle(root: &Path) {
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    let mut stack = vec![root.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().contains(".jsonl") {
                let f = std::fs::File::options().write(true).open(&p).unwrap();
                f.set_modified(hour_ago).unwrap();
            }
        }
    }
}

#[test]
fn repair_dry_run_changes_nothing_and_repair_fixes() {
    let s = sample_store();
    settle(&s.root);
    let before = snapshot(&s.root);
    let r = run_in(&s.root, &["repair", "--dry-run", "--json"]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert_eq!(
        snapshot(&s.root),
        before,
        "repair --dry-run changed the store"
    );
    let actions = json_lines(&r.out);
    let planned: Vec<(&str, &str)> = actions
        .iter()
        .map(|a| (a["action"].as_str().unwrap(), a["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        planned,
        [
            ("seal_torn_tail", "planned"),
            ("migrate_legacy", "planned"),
            ("rebuild_index", "planned")
        ]
    );

    let (file, offset) = planted_damage(&s.root);
    let len_before = std::fs::metadata(s.root.join(&file)).unwrap().len();
    let r = run_in(&s.root, &["repair"]);
    assert_eq!(r.code, 0, "{}{}", r.out, r.err);
    let after = std::fs::read(s.root.join(&file)).unwrap();
    assert_eq!(
        after.len() as u64,
        len_before + 1,
        "only a newline was appended"
    );
    assert_eq!(
        &after[..len_before as usize],
        &before[Path::new(&file)][..],
        "no byte of history rewritten"
    );
    // The fragment is now a sealed line, kept and shown as a note, not a problem: `repair &&
    // verify` succeeds. The legacy session is migrated.
    let v = run_in(&s.root, &["verify", "--json"]);
    assert_eq!(v.code, 0, "{}", v.out);
    let lines = json_lines(&v.out);
    let kinds: Vec<(&str, &str)> = lines
        .iter()
        .filter(|f| f.get("kind").is_some())
        .map(|f| (f["severity"].as_str().unwrap(), f["kind"].as_str().unwrap()))
        .collect();
    assert!(kinds.contains(&("note", "sealed_fragment")), "{kinds:?}");
    assert!(!kinds.iter().any(|k| k.0 == "problem"), "{kinds:?}");
    assert!(!kinds.iter().any(|k| k.1 == "legacy_not_migrated"));
    let damage = lines
        .iter()
        .find(|f| f["kind"] == "sealed_fragment")
        .unwrap();
    assert_eq!(damage["offset"].as_u64(), Some(offset));
    assert_eq!(damage["file"].as_str(), Some(file.as_str()));
    // And stays so: a later verify of the same store says the same.
    assert_eq!(run_in(&s.root, &["verify"]).code, 0);
    // Repairing again has nothing left to seal or migrate.
    let again = json_lines(&ok(&s.root, &["repair", "--json"]));
    assert_eq!(again.len(), 1);
    assert_eq!(again[0]["action"], "rebuild_index");
}

// ---------------------------------------------------------------------------------------------
// gc and archive.

#[test]
fn gc_moves_old_runs_to_the_trash_and_back() {
    let s = sample_store();
    let before = snapshot(&s.root);
    let r = run_in(
        &s.root,
        &["gc", "--older-than", "30d", "--dry-run", "--json"],
    );
    assert_eq!(r.code, 0, "{}", r.err);
    assert_eq!(snapshot(&s.root), before, "gc --dry-run changed the store");
    let plan = json_lines(&r.out);
    let planned: BTreeSet<(&str, &str)> = plan
        .iter()
        .map(|a| (a["action"].as_str().unwrap(), a["id"].as_str().unwrap()))
        .collect();
    assert_eq!(
        planned,
        BTreeSet::from([
            ("move_run", "7a1e0007-0000-4000-8000-000000000701"),
            ("move_session", "5a1e0007-0000-4000-8000-000000000007"),
            ("move_session", "5a1e00a1-0000-4000-8000-0000000000a1"),
        ])
    );

    let r = run_in(&s.root, &["gc", "--older-than", "30d"]);
    assert_eq!(r.code, 0, "{}", r.err);
    let batch = s.root.join("trash/20261130T120000Z");
    assert!(
        batch
            .join("2026/10/20/7a1e0007-0000-4000-8000-000000000701.jsonl")
            .is_file()
    );
    assert!(
        !s.root
            .join("2026/10/20/7a1e0007-0000-4000-8000-000000000701.jsonl")
            .exists()
    );
    let manifest = json_lines(&std::fs::read_to_string(batch.join("manifest.jsonl")).unwrap());
    let ops: Vec<&str> = manifest.iter().map(|m| m["op"].as_str().unwrap()).collect();
    assert_eq!(ops, ["gc", "move_run", "move_session", "move_session"]);
    let runs = json_lines(&ok(&s.root, &["runs", "--json", "--limit", "100"]));
    assert_eq!(runs.len(), 9);
    let sessions = json_lines(&ok(&s.root, &["sessions", "--all", "--json"]));
    assert_eq!(sessions.len(), 6);
    // The snapshot in the trash restores the session when put back as a legacy file.
    let snap = batch.join("state/5a1e0007-0000-4000-8000-000000000007.json");
    let state: Value = serde_json::from_str(&std::fs::read_to_string(&snap).unwrap()).unwrap();
    assert_eq!(state["messages"].as_array().unwrap().len(), 2);
    std::fs::copy(
        &snap,
        s.root
            .join("state/5a1e0007-0000-4000-8000-000000000007.json"),
    )
    .unwrap();
    let sessions = json_lines(&ok(&s.root, &["sessions", "--all", "--json"]));
    assert!(sessions.iter().any(
        |x| x["session_id"] == "5a1e0007-0000-4000-8000-000000000007" && x["message_count"] == 2
    ));
    // Nothing newer moves; the trash empties for real.
    let r = run_in(&s.root, &["gc", "--older-than", "30d", "--json"]);
    assert!(json_lines(&r.out).iter().all(|a| a["action"] != "move_run"));
    ok(&s.root, &["gc", "--empty-trash"]);
    assert!(!s.root.join("trash").exists());
}

#[test]
fn gc_never_touches_locked_runs_or_recent_sessions() {
    let s = sample_store();
    // A writer holds the old S7 run open (a resumed run being written).
    let path = s
        .root
        .join("2026/10/20/7a1e0007-0000-4000-8000-000000000701.jsonl");
    let writer =
        session_jsonl::RunWriter::open_append(&path, session_jsonl::WriterOptions::default())
            .unwrap();
    let r = run_in(&s.root, &["gc", "--older-than", "30d", "--json"]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(path.is_file(), "a locked run was moved");
    let actions = json_lines(&r.out);
    assert!(
        actions
            .iter()
            .all(|a| a["id"] != "5a1e0007-0000-4000-8000-000000000007"),
        "the session of a kept run stays"
    );
    drop(writer);
    // S1's first run is old at 09:15:30 with a 2-minute window, but its session was saved at
    // 09:14:44, within the window: nothing of S1 moves.
    let mut c = sessions_cmd();
    c.env("SESSIONS_NOW", "2026-11-24T09:15:30Z")
        .arg("--root")
        .arg(&s.root)
        .args(["gc", "--older-than", "2m", "--json"]);
    let r = finish(c.output().unwrap());
    let moved: Vec<String> = json_lines(&r.out)
        .iter()
        .filter(|a| a["action"] == "move_run")
        .map(|a| a["id"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        !moved
            .iter()
            .any(|m| m == "7a1e0001-0000-4000-8000-000000000101"),
        "{moved:?}"
    );
    assert!(
        s.root
            .join("2026/11/24/7a1e0001-0000-4000-8000-000000000101.jsonl")
            .is_file()
    );
}

#[test]
fn archive_compresses_old_runs_and_every_command_still_reads_them() {
    let s = sample_store();
    let original = std::fs::read(
        s.root
            .join("2026/11/24/7a1e0001-0000-4000-8000-000000000102.jsonl"),
    )
    .unwrap();
    let r = run_in(&s.root, &["archive", "--older-than", "3d", "--json"]);
    assert_eq!(r.code, 0, "{}", r.err);
    let mut done: Vec<Value> = json_lines(&r.out);
    // The last line says what archiving means for the reference runtime.
    let note = done.pop().unwrap();
    assert_eq!(note["type"], "note");
    assert!(
        note["message"]
            .as_str()
            .unwrap()
            .contains("6 archived run(s)")
    );
    assert_eq!(done.len(), 6, "runs before 2026-11-27T12:00Z: {done:?}");
    assert!(done.iter().all(|a| a["status"] == "done"));
    assert!(
        s.root
            .join("2026/11/24/7a1e0001-0000-4000-8000-000000000102.jsonl.zst")
            .is_file()
    );
    assert!(
        !s.root
            .join("2026/11/24/7a1e0001-0000-4000-8000-000000000102.jsonl")
            .exists()
    );
    let runs = json_lines(&ok(&s.root, &["runs", "--json", "--limit", "100"]));
    assert_eq!(runs.len(), 10);
    assert_eq!(runs.iter().filter(|r| r["compressed"] == true).count(), 6);
    let exported = ok(
        &s.root,
        &[
            "export",
            "7a1e0001-0000-4000-8000-000000000102",
            "--format",
            "jsonl",
        ],
    );
    assert_eq!(exported.as_bytes(), &original[..]);
    assert!(
        ok(&s.root, &["show", "7a1e0001-0000-4000-8000-000000000102"]).contains("リリースノート")
    );
    ok(
        &s.root,
        &[
            "replay",
            "7a1e0001-0000-4000-8000-000000000102",
            "--seq",
            "3",
        ],
    );
    assert_eq!(
        json_lines(&ok(
            &s.root,
            &["history", "5a1e0001-0000-4000-8000-000000000001", "--json"]
        ))
        .last()
        .unwrap()["runs"],
        2
    );
    ok(&s.root, &["tail", "7a1e0001-0000-4000-8000-000000000102"]);
    let v = run_in(&s.root, &["verify", "--json"]);
    let problems: Vec<Value> = json_lines(&v.out)
        .into_iter()
        .filter(|f| f["severity"] == "problem")
        .collect();
    assert_eq!(problems.len(), 1, "archiving added no damage: {problems:?}");
    // Archiving again has nothing to do.
    assert!(ok(&s.root, &["archive", "--older-than", "3d"]).contains("archived 0 run file(s)"));
}

#[test]
fn reindex_reports_the_difference() {
    let s = sample_store();
    let first = json_lines(&ok(&s.root, &["reindex", "--json"]));
    let summary = first.last().unwrap();
    assert_eq!(summary["total"], 10);
    assert_eq!(
        summary["added"], 10,
        "the committed sample has no run index yet"
    );
    let again = json_lines(&ok(&s.root, &["reindex", "--json"]));
    assert_eq!(
        again.len(),
        1,
        "a rebuild of an unchanged tree changes nothing: {again:?}"
    );
    std::fs::remove_file(
        s.root
            .join("2026/10/20/7a1e0007-0000-4000-8000-000000000701.jsonl"),
    )
    .unwrap();
    let third = json_lines(&ok(&s.root, &["reindex", "--json"]));
    assert_eq!(third[0]["change"], "removed");
    assert_eq!(
        third[0]["file"],
        "2026/10/20/7a1e0007-0000-4000-8000-000000000701.jsonl"
    );
}

// ---------------------------------------------------------------------------------------------
// Hostile input.

#[test]
fn garbage_never_panics() {
    let s = sample_store();
    let day = s.root.join("2026/11/30");
    std::fs::create_dir_all(&day).unwrap();
    std::fs::write(
        day.join("11111111-0000-4000-8000-000000000001.jsonl"),
        b"\x00\x00garbage\xff\xfe\n{\"type\":\"header\"\n[1,2,3]\n",
    )
    .unwrap();
    std::fs::write(day.join("11111111-0000-4000-8000-000000000002.jsonl"), b"").unwrap();
    std::fs::write(
        day.join("11111111-0000-4000-8000-000000000003.jsonl.zst"),
        b"not zstd at all",
    )
    .unwrap();
    std::fs::write(s.root.join("state/broken.json"), b"{\"session_id\":").unwrap();
    std::fs::write(
        s.root
            .join("messages/5a1e0001-0000-4000-8000-000000000001.jsonl"),
        b"{\"role\":\"user\",\"content\":\"hi\"}\n{\"role\":",
    )
    .unwrap();
    for args in [
        &["runs", "--json"][..],
        &["sessions", "--all"],
        &["verify"],
        &["stats"],
        &["show", "11111111-0000-4000-8000-000000000001"],
        &["show", "11111111-0000-4000-8000-000000000002"],
        &["show", "11111111-0000-4000-8000-000000000003"],
        &["replay", "11111111-0000-4000-8000-000000000001"],
        &[
            "export",
            "11111111-0000-4000-8000-000000000001",
            "--format",
            "json",
        ],
        &["history", "5a1e0001-0000-4000-8000-000000000001"],
        &["tail", "11111111-0000-4000-8000-000000000003"],
        &["repair", "--dry-run"],
        &["reindex"],
        &["gc", "--older-than", "1d", "--dry-run"],
        &["archive", "--older-than", "1d", "--dry-run"],
    ] {
        let r = run_in(&s.root, args);
        assert!(
            [0, 1, 3, 4].contains(&r.code),
            "{args:?}: exit {} {}",
            r.code,
            r.err
        );
        if r.code >= 3 {
            assert_eq!(r.err.lines().count(), 1, "{args:?}: {}", r.err);
        }
    }
    let v = run_in(&s.root, &["verify", "--json"]);
    let kinds: BTreeSet<String> = json_lines(&v.out)
        .iter()
        .filter_map(|f| f["kind"].as_str().map(str::to_owned))
        .collect();
    for k in ["nul_run", "empty_file", "unreadable", "torn_tail"] {
        assert!(kinds.contains(k), "{k} not reported: {kinds:?}");
    }
}

#[test]
fn sessions_default_to_the_current_directory_workspace() {
    let s = sample_store();
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join(".git")).unwrap();
    let sub = ws.path().join("src/deep");
    std::fs::create_dir_all(&sub).unwrap();
    let mut c = sessions_cmd();
    c.current_dir(&sub)
        .arg("--root")
        .arg(&s.root)
        .arg("sessions");
    let r = finish(c.output().unwrap());
    assert_eq!(r.code, 0, "{}", r.err);
    // Piped: the hints are on stderr and stdout holds only rows (none here).
    assert_eq!(
        r.err,
        format!(
            "workspace {} (--all for every workspace)\n(no sessions)\n",
            ws.path().display()
        )
    );
    assert_eq!(r.out, "");
    let mut c = sessions_cmd();
    c.current_dir(&sub).arg("--root").arg(&s.root).args([
        "sessions",
        "--json",
        "--workspace",
        "/home/dev/acme-app",
    ]);
    assert_eq!(json_lines(&finish(c.output().unwrap()).out).len(), 6);
}

#[test]
fn verify_reports_an_unusable_state_db_and_still_checks_runs() {
    let s = sample_store();
    std::fs::remove_file(s.root.join("state.db")).unwrap();
    std::fs::create_dir(s.root.join("state.db")).unwrap();
    let r = run_in(&s.root, &["verify", "--json"]);
    assert_eq!(r.code, 1, "{}", r.err);
    let lines = json_lines(&r.out);
    let kinds: BTreeSet<&str> = lines.iter().filter_map(|f| f["kind"].as_str()).collect();
    assert!(kinds.contains("state_unavailable"), "{kinds:?}");
    assert!(
        kinds.contains("torn_tail"),
        "run files are still checked: {kinds:?}"
    );
    assert_eq!(lines.last().unwrap()["run_files"], 10);
    // Commands that need state.db say so in one line and exit 4.
    let r = run_in(&s.root, &["sessions", "--all"]);
    assert_eq!(r.code, 4);
    assert_eq!(r.err.lines().count(), 1, "{}", r.err);
    assert!(r.err.contains("state.db"), "{}", r.err);
}

// ---------------------------------------------------------------------------------------------
// Read-only access: dry runs and reading commands change nothing; a store that cannot be
// written is still read.

/// Every file and directory under `dir` with its bytes (files only) and modification time.
/// SQLite's `-wal` counts like any file; of a `-shm` file (the WAL's shared-memory index,
/// which every reader of a database in WAL mode maps and updates, SQLite's own business) only
/// the presence counts.
fn tree_state(dir: &Path) -> BTreeMap<PathBuf, (Option<Vec<u8>>, Option<std::time::SystemTime>)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let meta = std::fs::metadata(&d).unwrap();
        out.insert(
            d.strip_prefix(dir).unwrap().to_owned(),
            (None, Some(meta.modified().unwrap())),
        );
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
            } else {
                let key = p.strip_prefix(dir).unwrap().to_owned();
                if p.to_string_lossy().ends_with("-shm") {
                    out.insert(key, (None, None));
                    continue;
                }
                let mtime = e.metadata().unwrap().modified().unwrap();
                let bytes = std::fs::read(&p).unwrap();
                out.insert(key, (Some(bytes), Some(mtime)));
            }
        }
    }
    out
}

/// A run and a session of the recorded fixtures (S1's first run).
const FIXTURE_RUN: &str = "a16b9591-0eba-4e91-bacf-06435f8b70a3";

fn fixture_session(name: &str) -> String {
    let exp = expected();
    exp["scenario_sessions"][name].as_str().unwrap().to_owned()
}

#[test]
fn dry_runs_and_reading_commands_change_no_byte_and_no_mtime() {
    // The fixture copy was never opened by this tool (state.db as the reference left it:
    // no bookkeeping tables, old user_version); the sample store was written by our writer.
    for (store, run, s1) in [
        (fixture_store(), FIXTURE_RUN, fixture_session("S1")),
        (
            sample_store(),
            "7a1e0001-0000-4000-8000-000000000101",
            "5a1e0001-0000-4000-8000-000000000001".to_owned(),
        ),
    ] {
        let root = &store.root;
        let before = tree_state(root);
        let commands: Vec<Vec<&str>> = vec![
            vec!["repair", "--dry-run"],
            vec!["repair", "--dry-run", "--json"],
            vec!["gc", "--older-than", "1d", "--dry-run"],
            vec!["gc", "--older-than", "30d", "--dry-run", "--json"],
            vec!["gc", "--empty-trash", "--dry-run"],
            vec!["archive", "--older-than", "1d", "--dry-run"],
            vec!["verify", "--json"],
            vec!["sessions", "--all", "--json"],
            vec!["runs", "--no-refresh", "--json"],
            vec!["show", run],
            vec!["tail", run],
            vec!["export", run, "--format", "jsonl"],
            vec!["--read-only", "runs", "--json"],
            vec!["--read-only", "stats"],
            vec!["--read-only", "show", &s1],
            vec!["--read-only", "history", &s1, "--json"],
            vec!["--read-only", "export", &s1, "--format", "md"],
            vec!["--read-only", "repair", "--dry-run"],
        ];
        for args in &commands {
            let r = run_in(root, args);
            assert!(r.code == 0 || r.code == 1, "{args:?}: {}{}", r.out, r.err);
            let after = tree_state(root);
            assert!(
                after == before,
                "{args:?} changed {:?}",
                after
                    .iter()
                    .filter(|(k, v)| before.get(*k) != Some(v))
                    .map(|(k, _)| k)
                    .chain(before.keys().filter(|k| !after.contains_key(*k)))
                    .collect::<Vec<_>>()
            );
        }
        // Commands that change the store refuse --read-only before touching anything.
        for args in [
            &["--read-only", "repair"][..],
            &["--read-only", "gc", "--older-than", "1d"],
            &["--read-only", "gc", "--empty-trash"],
            &["--read-only", "archive", "--older-than", "1d"],
            &["--read-only", "reindex"],
        ] {
            let r = run_in(root, args);
            assert_eq!(r.code, 2, "{args:?}: {}", r.err);
            assert!(r.err.contains("--read-only"), "{}", r.err);
            assert_eq!(tree_state(root), before, "{args:?}");
        }
    }
}

/// The answers of the reading commands that do not depend on the run index.
fn reading_answers(root: &Path, read_only: bool) -> Vec<(String, String)> {
    let exp = expected();
    let mut asks: Vec<Vec<String>> = vec![vec!["sessions".into(), "--all".into(), "--json".into()]];
    for sid in exp["scenario_sessions"].as_object().unwrap().values() {
        let sid = sid.as_str().unwrap().to_owned();
        asks.push(vec!["history".into(), sid.clone(), "--json".into()]);
        asks.push(vec!["show".into(), sid.clone(), "--utc".into()]);
        asks.push(vec![
            "export".into(),
            sid,
            "--format".into(),
            "jsonl".into(),
        ]);
    }
    asks.into_iter()
        .map(|mut args| {
            if read_only {
                args.insert(0, "--read-only".into());
            }
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            let r = run_in(root, &refs);
            assert_eq!(r.code, 0, "{args:?}: {}", r.err);
            (args.join(" ").replace("--read-only ", ""), r.out)
        })
        .collect()
}

#[test]
fn read_only_sessions_show_and_history_answer_as_on_a_writable_store() {
    let writable = fixture_store();
    let want = reading_answers(&writable.root, false);
    // The store is opened read-only and never indexed: a session's runs come from the run
    // files' headers.
    let ro = fixture_store();
    let got = reading_answers(&ro.root, true);
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w);
    }
    // The reference wrote no run index: `runs` and `stats` answer from the run files
    // themselves, and say so in one line.
    let before = tree_state(&ro.root);
    let r = run_in(
        &ro.root,
        &["--read-only", "runs", "--json", "--limit", "100"],
    );
    assert_eq!(r.code, 0, "{}", r.err);
    assert_eq!(r.err.lines().count(), 1, "{}", r.err);
    assert!(
        r.err
            .contains("run index is missing or empty; answering from the run files themselves"),
        "{}",
        r.err
    );
    let from_files = r.out;
    assert_eq!(json_lines(&from_files).len(), 20);
    let stats = run_in(&ro.root, &["--read-only", "stats", "--json"]);
    assert_eq!(stats.code, 0, "{}", stats.err);
    assert_eq!(json_lines(&stats.out).last().unwrap()["runs"], 20);
    assert_eq!(
        tree_state(&ro.root),
        before,
        "a read-only answer changed the store"
    );
    // Once a writable run has indexed the store, the answers are the same, and a read-only
    // listing answers from that index (with the staleness warning).
    let indexed = ok(&ro.root, &["runs", "--json", "--limit", "100"]);
    assert_listed_as_indexed(&json_lines(&from_files), &json_lines(&indexed));
    let r = run_in(
        &ro.root,
        &["--read-only", "runs", "--json", "--limit", "100"],
    );
    assert_eq!(r.out, indexed);
    assert!(r.err.contains("run index may be stale"), "{}", r.err);
    // No state.db at all: the same 20 runs.
    let bare = fixture_store();
    std::fs::remove_file(bare.root.join("state.db")).unwrap();
    let r = run_in(
        &bare.root,
        &["--read-only", "runs", "--json", "--limit", "100"],
    );
    assert_eq!(r.code, 0, "{}", r.err);
    assert_eq!(r.out, from_files);
    assert!(!bare.root.join("state.db").exists());
}

/// A listing from the run files (no usable index) against the same store's indexed listing:
/// rows read whole are equal; rows read bounded (`"partial": true`, files over 64 KiB) agree
/// on everything the head block and the tail tell and have `null` for the counts.
fn assert_listed_as_indexed(from_files: &[serde_json::Value], indexed: &[serde_json::Value]) {
    assert_eq!(from_files.len(), indexed.len());
    let mut partial = 0;
    for (f, i) in from_files.iter().zip(indexed) {
        assert_eq!(i["partial"], false, "{i}");
        if f["partial"] == false {
            assert_eq!(f, i);
            continue;
        }
        partial += 1;
        assert_eq!(f["partial"], true);
        assert!(i["file_size"].as_u64().unwrap() > 64 << 10, "{f}");
        for key in [
            "last_status",
            "invocations",
            "input_tokens",
            "cached_input_tokens",
            "cache_creation_tokens",
            "output_tokens",
            "total_tokens",
            "records",
            "damage_count",
        ] {
            assert!(f[key].is_null(), "{key}: {f}");
        }
        for key in [
            "run_id",
            "session_id",
            "started_at",
            "outcome",
            "model_provider",
            "model",
            "first_input",
            "workspace_root",
            "last_ts",
            "file",
            "file_size",
            "compressed",
        ] {
            assert_eq!(f[key], i[key], "{key}: {f}");
        }
    }
    // The recorded store has runs on both sides of the head block's size.
    assert!(partial > 0 && partial < from_files.len(), "{partial}");
}

/// Makes every file and directory under a root unwritable: `chattr +i` (which also stops
/// root, as the tests may run), removed again on drop.
struct Immutable(PathBuf);

impl Immutable {
    fn apply(root: &Path) -> Option<Immutable> {
        let ok = Command::new("chattr")
            .args(["-R", "+i"])
            .arg(root)
            .output()
            .is_ok_and(|o| o.status.success());
        let guard = Immutable(root.to_owned());
        // Only a store that really refuses writes tests the fallback.
        let probe = root.join("probe");
        if ok && std::fs::write(&probe, b"x").is_err() {
            Some(guard)
        } else {
            let _ = std::fs::remove_file(&probe);
            None
        }
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = Command::new("chattr")
            .args(["-R", "-i"])
            .arg(&self.0)
            .output();
    }
}

#[test]
fn a_store_that_cannot_be_written_is_read_read_only_with_a_warning() {
    let writable = fixture_store();
    let want = reading_answers(&writable.root, false);
    let want_runs = json_lines(&ok(&writable.root, &["runs", "--json", "--limit", "100"]));
    let locked = fixture_store();
    // Without `chattr` (or without the right to use it) fall back to file modes, which stop
    // everyone but root.
    let guard = Immutable::apply(&locked.root);
    if guard.is_none() {
        let mut stack = vec![locked.root.clone()];
        let mut all = Vec::new();
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                if e.path().is_dir() {
                    stack.push(e.path());
                } else {
                    all.push(e.path());
                }
            }
            all.push(d);
        }
        use std::os::unix::fs::PermissionsExt;
        for p in &all {
            let mode = if p.is_dir() { 0o555 } else { 0o444 };
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        if std::fs::write(locked.root.join("probe"), b"x").is_ok() {
            eprintln!("skipped: neither chattr nor file modes stop writes here");
            return;
        }
    }
    let before = tree_state(&locked.root);
    let got = reading_answers(&locked.root, false);
    assert_eq!(got, want);
    let r = run_in(&locked.root, &["runs", "--json", "--limit", "100"]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert_eq!(r.err.lines().count(), 1, "one warning line: {}", r.err);
    assert!(r.err.contains("cannot write the store"), "{}", r.err);
    // Never indexed: the runs come from the run files, the same as the writable store lists.
    assert!(
        r.err
            .contains("run index is missing or empty; answering from the run files themselves"),
        "{}",
        r.err
    );
    assert_eq!(want_runs.len(), 20);
    assert_listed_as_indexed(&json_lines(&r.out), &want_runs);
    assert_eq!(tree_state(&locked.root), before);
    drop(guard);
}

/// The crashed run of the sample store (torn tail; last record 2026-11-29T21:05:01.757Z).
const SAMPLE_TORN: &str = "2026/11/29/7a1e0006-0000-4000-8000-000000000601.jsonl";

fn seal_actions(out: &str) -> Vec<(String, String)> {
    json_lines(out)
        .iter()
        .filter(|a| a["action"] == "seal_torn_tail")
        .map(|a| {
            (
                a["status"].as_str().unwrap().to_owned(),
                a["detail"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn repair_leaves_a_torn_tail_written_in_the_last_two_minutes_alone_unless_forced() {
    // Just modified (the copy was made now): possibly a run being written by a runtime that
    // takes no lock.
    let s = sample_store();
    let len = std::fs::metadata(s.root.join(SAMPLE_TORN)).unwrap().len();
    for args in [
        &["repair", "--json"][..],
        &["repair", "--dry-run", "--json"],
    ] {
        let r = run_in(&s.root, args);
        assert_eq!(r.code, 0, "{}", r.err);
        let seals = seal_actions(&r.out);
        assert_eq!(seals.len(), 1, "{seals:?}");
        assert_eq!(seals[0].0, "skipped");
        assert!(
            seals[0].1.contains("the file was modified"),
            "{}",
            seals[0].1
        );
        assert!(seals[0].1.contains("--force"), "{}", seals[0].1);
    }
    assert_eq!(
        std::fs::metadata(s.root.join(SAMPLE_TORN)).unwrap().len(),
        len
    );
    // Modified an hour ago, but its last record is 30 s old at "now": still left alone.
    settle(&s.root);
    let mut c = sessions_cmd();
    c.env("SESSIONS_NOW", "2026-11-29T21:05:31.757Z")
        .arg("--root")
        .arg(&s.root)
        .args(["repair", "--json"]);
    let r = finish(c.output().unwrap());
    assert_eq!(r.code, 0, "{}", r.err);
    let seals = seal_actions(&r.out);
    assert_eq!(seals[0].0, "skipped");
    assert!(
        seals[0].1.contains("its last record is 30 s old"),
        "{}",
        seals[0].1
    );
    assert_eq!(
        std::fs::metadata(s.root.join(SAMPLE_TORN)).unwrap().len(),
        len
    );
    // Two minutes after the last record and an hour after the last write: sealed.
    let mut c = sessions_cmd();
    c.env("SESSIONS_NOW", "2026-11-29T21:07:02Z")
        .arg("--root")
        .arg(&s.root)
        .args(["repair", "--dry-run", "--json"]);
    let r = finish(c.output().unwrap());
    assert_eq!(seal_actions(&r.out)[0].0, "planned", "{}", r.out);
    // --force seals a recent one; nothing but one newline is added.
    let fresh = sample_store();
    let r = run_in(&fresh.root, &["repair", "--force", "--json"]);
    assert_eq!(r.code, 0, "{}", r.err);
    let seals = seal_actions(&r.out);
    assert_eq!(seals[0].0, "done", "{seals:?}");
    let after = std::fs::read(fresh.root.join(SAMPLE_TORN)).unwrap();
    assert_eq!(after.len() as u64, len + 1);
    assert_eq!(after.last(), Some(&b'\n'));
}

/// The kinds the crate README documents for `verify` (the backquoted snake_case words of the
/// "`verify` finding kinds" item).
fn documented_verify_kinds() -> BTreeSet<String> {
    let readme = std::fs::read_to_string(manifest_dir().join("README.md")).unwrap();
    let start = readme.find("* `verify` finding kinds").unwrap();
    let end = start + readme[start..].find("\n* ").unwrap();
    readme[start..end]
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|w| w.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
        .map(str::to_owned)
        .collect()
}

#[test]
fn verify_kinds_are_snake_case_and_documented() {
    let documented = documented_verify_kinds();
    assert!(documented.len() > 30, "{documented:?}");
    let mut seen = BTreeSet::new();
    let fixture = fixture_store();
    let sample = sample_store();
    let broken = sample_store();
    // A state.db that cannot be opened and a run file that is not one.
    std::fs::remove_file(broken.root.join("state.db")).unwrap();
    std::fs::create_dir(broken.root.join("state.db")).unwrap();
    std::fs::write(
        broken.root.join("2026/11/24/junk.jsonl"),
        b"\x00\x00garbage\xff\n",
    )
    .unwrap();
    // A copy of a run under another name, and a message log no session owns.
    let fixture_copy = fixture_store();
    let original = run_file(&fixture_copy.root, FIXTURE_RUN);
    std::fs::copy(&original, original.with_file_name("backup.jsonl")).unwrap();
    std::fs::write(
        fixture_copy
            .root
            .join("messages/0e0e0e0e-0000-4000-8000-000000000000.jsonl"),
        b"",
    )
    .unwrap();
    let emptied = fixture_store();
    std::fs::write(emptied.root.join("state.db"), b"").unwrap();
    for root in [
        &fixture.root,
        &sample.root,
        &broken.root,
        &fixture_copy.root,
        &emptied.root,
    ] {
        for line in json_lines(&run_in(root, &["verify", "--json"]).out) {
            if let Some(kind) = line["kind"].as_str() {
                seen.insert(kind.to_owned());
            }
        }
    }
    for kind in &seen {
        assert!(
            kind.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
            "not snake_case: {kind}"
        );
        assert!(documented.contains(kind), "not in the README: {kind}");
    }
    for kind in [
        "over_inclusive_snapshot",
        "no_run_end",
        "missing_response",
        "torn_tail",
        "legacy_not_migrated",
        "state_unavailable",
        "nul_run",
        "corrupt_line",
        "missing_header",
        "empty_run",
        "run_id_mismatch",
        "duplicate_run_id",
        "orphan_messages",
        "state_empty_with_messages",
    ] {
        assert!(seen.contains(kind), "{kind} not seen: {seen:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Adversarial inputs: extreme numbers, symbolic links, directories that are no store, copies of
// run files, message logs without a row, items repair cannot handle.

/// The sample store's session of an old run, for `history`.
const SAMPLE_SESSION: &str = "5a1e0007-0000-4000-8000-000000000007";
/// The sample store's crashed run, for `tail` and `replay`.
const SAMPLE_RUN: &str = "7a1e0006-0000-4000-8000-000000000601";

#[test]
fn extreme_numeric_arguments_are_usage_errors_never_panics() {
    let s = sample_store();
    let huge = [
        "18446744073709551615",
        "18446744073709551616",
        "9223372036854775807",
        "1000001",
        "99999999999999999999999999",
    ];
    let ages = [
        "1000000000000d",
        "99999999999d",
        "18446744073709551615s",
        "2562047788015215w",
        "366001d",
    ];
    let mut usage: Vec<Vec<String>> = Vec::new();
    let v = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    for n in huge {
        usage.push(v(&["runs", "--limit", n]));
        usage.push(v(&["runs", "--json", "--outcome", "crashed", "--limit", n]));
        usage.push(v(&["sessions", "--all", "--limit", n]));
        usage.push(v(&["history", SAMPLE_SESSION, "--max-runs", n]));
        usage.push(v(&["history", SAMPLE_SESSION, "--max-events", n]));
        // `--timeout` accepts up to a year of seconds.
        if n != "1000001" {
            usage.push(v(&["tail", SAMPLE_RUN, "--timeout", n]));
        }
    }
    usage.push(v(&["tail", SAMPLE_RUN, "--timeout", "31622401"]));
    for a in ages {
        for cmd in ["runs", "stats"] {
            usage.push(v(&[cmd, "--since", a]));
            usage.push(v(&[cmd, "--until", a]));
        }
        usage.push(v(&["gc", "--older-than", a, "--dry-run"]));
        usage.push(v(&["gc", "--older-than", a]));
        usage.push(v(&["archive", "--older-than", a, "--dry-run"]));
        usage.push(v(&["archive", "--older-than", a]));
    }
    for args in &usage {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = run_in(&s.root, &refs);
        assert_eq!(r.code, 2, "{args:?}: {}{}", r.out, r.err);
        assert!(
            r.err.contains("too large")
                || r.err.contains("out of range")
                || r.err.contains("invalid value"),
            "{args:?}: {}",
            r.err
        );
    }
    // Numbers that are not counts: any answer but a crash.
    for n in ["9223372036854775807", "-9223372036854775808"] {
        let r = run_in(&s.root, &["replay", SAMPLE_RUN, "--seq", n]);
        assert!([2, 3, 4].contains(&r.code), "replay --seq {n}: {}", r.code);
    }
    // The largest accepted values work.
    for args in [
        &["runs", "--json", "--limit", "1000000"][..],
        &["sessions", "--all", "--limit", "1000000"],
        &["runs", "--since", "366000d", "--until", "0d"],
        &["stats", "--since", "366000d"],
        &["gc", "--older-than", "366000d", "--dry-run"],
        &["archive", "--older-than", "366000d", "--dry-run"],
    ] {
        ok(&s.root, args);
    }
    // A current time near the start of the calendar: the subtraction fails cleanly.
    let mut c = sessions_cmd();
    c.env("SESSIONS_NOW", "0001-01-01T00:00:00Z")
        .arg("--root")
        .arg(&s.root)
        .args(["gc", "--older-than", "366000d", "--dry-run"]);
    let r = finish(c.output().unwrap());
    assert!([0, 2].contains(&r.code), "{}", r.err);
}

#[test]
fn token_counts_at_the_limit_saturate_instead_of_overflowing() {
    // Three runs whose usage counts are u64::MAX (what the index stores for them is its
    // business; the totals must not overflow).
    let dir = tempfile::tempdir().unwrap();
    let day = dir.path().join("2026/11/30");
    std::fs::create_dir_all(&day).unwrap();
    let original = run_file(&fixtures().join("sessions"), FIXTURE_RUN);
    let text = std::fs::read_to_string(&original).unwrap();
    for i in 1..=3 {
        let id = format!("7a1e0000-0000-4000-8000-00000000000{i}");
        let mut out = String::new();
        for line in text.lines() {
            let mut v: Value = serde_json::from_str(line).unwrap();
            max_out_usage(&mut v);
            out.push_str(&serde_json::to_string(&v).unwrap().replace(FIXTURE_RUN, &id));
            out.push('\n');
        }
        std::fs::write(day.join(format!("{id}.jsonl")), out).unwrap();
    }
    for args in [
        &["stats", "--json"][..],
        &["stats", "--by", "model"],
        &["stats", "--by", "session", "--json"],
        &["runs", "--json"],
    ] {
        let r = run_in(dir.path(), args);
        assert_eq!(r.code, 0, "{args:?}: {}", r.err);
    }
    let total = json_lines(&ok(dir.path(), &["stats", "--json"]));
    let total = total.last().unwrap();
    assert_eq!(total["runs"], 3);
    let sum = total["total_tokens"].as_u64().unwrap();
    assert!(sum >= u64::MAX / 2, "{total}");
}

/// Sets every token count of `v` to `u64::MAX`.
fn max_out_usage(v: &mut Value) {
    match v {
        Value::Object(o) => {
            for (k, x) in o.iter_mut() {
                if k.ends_with("_tokens") && x.is_u64() {
                    *x = Value::from(u64::MAX);
                } else {
                    max_out_usage(x);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(max_out_usage),
        _ => {}
    }
}

#[test]
fn empty_trash_never_follows_symbolic_links() {
    let s = sample_store();
    let outside = tempfile::tempdir().unwrap();
    let precious = outside.path().join("p");
    std::fs::write(&precious, b"precious").unwrap();
    std::fs::create_dir(outside.path().join("sub")).unwrap();
    std::fs::write(outside.path().join("sub/q"), b"q").unwrap();
    let trash = s.root.join("trash");
    // A symlinked trash folder is refused.
    std::os::unix::fs::symlink(outside.path(), &trash).unwrap();
    for args in [
        &["gc", "--empty-trash"][..],
        &["gc", "--empty-trash", "--dry-run"],
    ] {
        let r = run_in(&s.root, args);
        assert_eq!(r.code, 4, "{args:?}: {}", r.out);
        assert!(r.err.contains("is a symbolic link; refusing"), "{}", r.err);
    }
    // Nor are old runs moved into it, out of the store.
    let runs_dir = s.root.join("2026");
    let before = snapshot(&runs_dir);
    for args in [
        &["gc", "--older-than", "30d"][..],
        &["gc", "--older-than", "30d", "--dry-run"],
    ] {
        let r = run_in(&s.root, args);
        assert_eq!(r.code, 4, "{args:?}: {}", r.out);
        assert!(
            r.err.contains("is a symbolic link; refusing to move runs"),
            "{}",
            r.err
        );
    }
    assert_eq!(snapshot(&runs_dir), before);
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 2);
    assert_eq!(std::fs::read(&precious).unwrap(), b"precious");
    assert!(outside.path().join("sub/q").exists());
    assert!(
        std::fs::symlink_metadata(&trash)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    // Links inside a real trash folder are deleted themselves, never what they point to, and
    // count as one file each.
    std::fs::remove_file(&trash).unwrap();
    let batch = trash.join("20261101T000000Z");
    std::fs::create_dir_all(batch.join("2026/10/01")).unwrap();
    std::fs::write(batch.join("2026/10/01/r.jsonl"), b"abc").unwrap();
    std::os::unix::fs::symlink(outside.path(), batch.join("dirlink")).unwrap();
    std::os::unix::fs::symlink(&precious, batch.join("filelink")).unwrap();
    std::os::unix::fs::symlink(outside.path(), trash.join("looselink")).unwrap();
    let plan = json_lines(&ok(
        &s.root,
        &["gc", "--empty-trash", "--dry-run", "--json"],
    ));
    let details: BTreeMap<&str, &str> = plan
        .iter()
        .map(|a| (a["file"].as_str().unwrap(), a["detail"].as_str().unwrap()))
        .collect();
    assert!(
        details["trash/20261101T000000Z"].starts_with("3 file(s)"),
        "{details:?}"
    );
    assert!(
        details["trash/looselink"].starts_with("1 file(s)"),
        "{details:?}"
    );
    let out = ok(&s.root, &["gc", "--empty-trash"]);
    assert!(out.contains("deleted 4 file(s)"), "{out}");
    assert!(
        std::fs::symlink_metadata(&trash).is_err(),
        "trash left behind"
    );
    assert_eq!(std::fs::read(&precious).unwrap(), b"precious");
    assert_eq!(std::fs::read(outside.path().join("sub/q")).unwrap(), b"q");
}

#[test]
fn commands_on_a_directory_that_is_no_store_exit_3_and_create_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), b"x").unwrap();
    // An empty year directory holds no runs: still no store.
    std::fs::create_dir(dir.path().join("2026")).unwrap();
    // Nor is a folder that happens to be called `trash` a store's trash.
    std::fs::create_dir_all(dir.path().join("trash/20261101T000000Z")).unwrap();
    std::fs::write(dir.path().join("trash/20261101T000000Z/keep"), b"k").unwrap();
    let before = tree_state(dir.path());
    for args in [
        &["runs"][..],
        &["runs", "--no-refresh"],
        &["--read-only", "runs"],
        &["stats"],
        &["sessions", "--all"],
        &["history", SAMPLE_SESSION],
        &["show", SAMPLE_SESSION],
        &["verify"],
        &["repair"],
        &["repair", "--dry-run"],
        &["reindex"],
        &["gc", "--older-than", "30d"],
        &["archive", "--older-than", "30d"],
        &["gc", "--empty-trash"],
        &["gc", "--empty-trash", "--dry-run"],
    ] {
        let r = run_in(dir.path(), args);
        assert_eq!(r.code, 3, "{args:?}: {}{}", r.out, r.err);
        assert!(r.err.contains("no session store at"), "{args:?}: {}", r.err);
    }
    assert_eq!(tree_state(dir.path()), before, "a file was created");
    // Run files alone make a store (the reference writes them before any session is saved).
    let fixture_run = std::fs::read_dir(fixtures().join("sessions/2026/11/30"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".jsonl"))
        .unwrap();
    let day = dir.path().join("2026/11/30");
    std::fs::create_dir_all(&day).unwrap();
    std::fs::copy(&fixture_run, day.join(fixture_run.file_name().unwrap())).unwrap();
    let listed = json_lines(&ok(dir.path(), &["runs", "--json"]));
    assert_eq!(listed.len(), 1);
}

/// The path of a fixture run's file under `root`.
fn run_file(root: &Path, run_id: &str) -> PathBuf {
    let mut stack = vec![root.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().unwrap() == format!("{run_id}.jsonl").as_str() {
                return p;
            }
        }
    }
    panic!("no file of run {run_id}")
}

#[test]
fn copies_and_misnamed_run_files_are_reported_and_counted_once() {
    let s = fixture_store();
    let want_runs = ok(&s.root, &["runs", "--json", "--limit", "100"]);
    let want_stats = ok(&s.root, &["stats", "--json"]);
    assert_eq!(json_lines(&want_runs).len(), 20);
    let original = run_file(&s.root, FIXTURE_RUN);
    let copies = ["backup.jsonl", "日本.jsonl", "bad name.jsonl", "..jsonl"];
    for name in copies {
        std::fs::copy(&original, original.with_file_name(name)).unwrap();
    }
    let r = run_in(&s.root, &["verify", "--json"]);
    assert_eq!(r.code, 1, "{}", r.out);
    let found: BTreeSet<(String, String, String)> = json_lines(&r.out)
        .iter()
        .filter(|f| f["severity"] == "problem")
        .map(|f| {
            let file = f["file"].as_str().unwrap();
            let name = Path::new(file)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (
                name,
                f["kind"].as_str().unwrap().to_owned(),
                f["id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let mut want = BTreeSet::new();
    for name in copies {
        for kind in ["run_id_mismatch", "duplicate_run_id"] {
            want.insert((name.to_owned(), kind.to_owned(), FIXTURE_RUN.to_owned()));
        }
    }
    assert_eq!(found, want, "{}", r.out);
    // Listings and totals count the run once, from the file named after it, and say so.
    let r = run_in(&s.root, &["runs", "--json", "--limit", "100"]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert_eq!(r.out, want_runs);
    assert_eq!(
        r.err
            .matches(&format!("holds run {FIXTURE_RUN} again"))
            .count(),
        copies.len(),
        "{}",
        r.err
    );
    let r = run_in(&s.root, &["stats", "--json"]);
    assert_eq!(r.out, want_stats);
    assert!(r.err.contains("counted once"), "{}", r.err);
    // Without the original, one of the copies stands for the run.
    std::fs::remove_file(&original).unwrap();
    let lines = json_lines(&ok(&s.root, &["runs", "--json", "--limit", "100"]));
    assert_eq!(lines.len(), 20);
    assert_eq!(
        lines.iter().filter(|l| l["run_id"] == FIXTURE_RUN).count(),
        1
    );
}

/// The message logs of a store and the ids of its legacy snapshots.
fn logs_and_legacy(root: &Path) -> (BTreeSet<String>, BTreeSet<String>) {
    let stems = |dir: &str, ext: &str| -> BTreeSet<String> {
        std::fs::read_dir(root.join(dir))
            .unwrap()
            .flatten()
            .filter_map(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.strip_suffix(ext).map(str::to_owned)
            })
            .collect()
    };
    (stems("messages", ".jsonl"), stems("state", ".json"))
}

#[test]
fn only_a_complete_unscoped_session_listing_looks_for_message_logs_without_a_row() {
    // A paged first page answers from its rows alone: looking for orphans would list every
    // session and every message log on every call. The complete listing and verify do look.
    let s = fixture_store();
    let (logs, _) = logs_and_legacy(&s.root);
    let some = logs.iter().next().unwrap();
    let stray = "0e0e0e0e-0000-4000-8000-000000000000";
    std::fs::copy(
        s.root.join(format!("messages/{some}.jsonl")),
        s.root.join(format!("messages/{stray}.jsonl")),
    )
    .unwrap();
    let warning = "1 message log(s) in messages/ have no state.db row";
    let paged = run_in(&s.root, &["sessions", "--all", "--limit", "2"]);
    assert_eq!(paged.code, 0, "{}", paged.err);
    assert!(paged.err.contains("showing the newest 2"), "{}", paged.err);
    assert!(!paged.err.contains("message log"), "{}", paged.err);
    let whole = run_in(&s.root, &["sessions", "--all", "--limit", "0"]);
    assert!(whole.err.contains(warning), "{}", whole.err);
    let r = run_in(&s.root, &["verify", "--json"]);
    assert!(r.out.contains("orphan_messages"), "{}", r.out);
}

#[test]
fn message_logs_without_a_row_and_an_emptied_state_db_are_reported() {
    // One log copied in under a new id: an orphan of an otherwise sound store.
    let s = fixture_store();
    let (logs, legacy) = logs_and_legacy(&s.root);
    let some = logs.iter().next().unwrap();
    let stray = "0e0e0e0e-0000-4000-8000-000000000000";
    std::fs::copy(
        s.root.join(format!("messages/{some}.jsonl")),
        s.root.join(format!("messages/{stray}.jsonl")),
    )
    .unwrap();
    let r = run_in(&s.root, &["verify", "--json"]);
    assert_eq!(r.code, 1);
    let problems: Vec<(String, String)> = json_lines(&r.out)
        .iter()
        .filter(|f| f["severity"] == "problem")
        .map(|f| {
            (
                f["kind"].as_str().unwrap().into(),
                f["id"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(problems, [("orphan_messages".to_owned(), stray.to_owned())]);
    let r = run_in(&s.root, &["sessions", "--all"]);
    assert!(
        r.err
            .contains("1 message log(s) in messages/ have no state.db row"),
        "{}",
        r.err
    );
    // A zero-byte state.db: every log without a legacy snapshot is an orphan.
    let z = fixture_store();
    std::fs::write(z.root.join("state.db"), b"").unwrap();
    let before = tree_state(&z.root);
    let r = run_in(&z.root, &["verify", "--json"]);
    assert_eq!(r.code, 1);
    let lines = json_lines(&r.out);
    let kinds = |kind: &str| -> BTreeSet<String> {
        lines
            .iter()
            .filter(|f| f["kind"] == kind && f["severity"] == "problem")
            .map(|f| f["id"].as_str().unwrap_or("").to_owned())
            .collect()
    };
    let want: BTreeSet<String> = logs.difference(&legacy).cloned().collect();
    assert!(want.len() > 5, "{want:?}");
    assert_eq!(kinds("orphan_messages"), want);
    assert_eq!(
        kinds("state_empty_with_messages"),
        BTreeSet::from([String::new()])
    );
    let r = run_in(&z.root, &["sessions", "--all"]);
    assert!(
        r.err.contains(&format!(
            "{} message log(s) in messages/ have no state.db row",
            want.len()
        )),
        "{}",
        r.err
    );
    // repair's plan rebuilds a row for every log (those with a legacy snapshot too: their
    // rows come from the logs, which are newer) and changes nothing.
    let plan = json_lines(&ok(&z.root, &["repair", "--dry-run", "--json"]));
    let planned = |action: &str| -> BTreeSet<String> {
        plan.iter()
            .filter(|a| a["action"] == action && a["status"] == "planned")
            .map(|a| a["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(planned("rebuild_row"), logs);
    assert_eq!(
        planned("migrate_legacy"),
        legacy.difference(&logs).cloned().collect()
    );
    assert_eq!(tree_state(&z.root), before);
    // repair does it; the sessions are listed and loadable again, and verify notes the
    // rebuilt rows (not a problem).
    let done = json_lines(&ok(&z.root, &["repair", "--json"]));
    let rebuilt: BTreeSet<String> = done
        .iter()
        .filter(|a| a["action"] == "rebuild_row" && a["status"] == "done")
        .map(|a| a["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(rebuilt, logs);
    let r = run_in(&z.root, &["verify", "--json"]);
    let lines = json_lines(&r.out);
    let kinds = |kind: &str, severity: &str| -> BTreeSet<String> {
        lines
            .iter()
            .filter(|f| f["kind"] == kind && f["severity"] == severity)
            .map(|f| f["id"].as_str().unwrap_or("").to_owned())
            .collect()
    };
    assert_eq!(kinds("reconstructed_row", "note"), logs);
    assert!(kinds("orphan_messages", "problem").is_empty());
    assert!(kinds("state_empty_with_messages", "problem").is_empty());
    let listed = json_lines(&ok(&z.root, &["sessions", "--all", "--json"]));
    assert_eq!(listed.len(), logs.union(&legacy).count());
    // A state.db that is not a database at all: one finding that says what to do.
    let g = fixture_store();
    std::fs::write(g.root.join("state.db"), b"garbage, not SQLite").unwrap();
    let r = run_in(&g.root, &["verify", "--json"]);
    let unavailable: Vec<Value> = json_lines(&r.out)
        .into_iter()
        .filter(|f| f["kind"] == "state_unavailable")
        .collect();
    assert_eq!(unavailable.len(), 1, "{}", r.out);
    let msg = unavailable[0]["message"].as_str().unwrap();
    assert!(
        msg.contains("hint: state.db is damaged: move it aside"),
        "{msg}"
    );
    assert!(
        msg.contains(&format!("the {} session(s) of messages/", logs.len())),
        "{msg}"
    );
}

#[test]
fn repair_after_state_db_is_deleted_lists_the_recorded_sessions_again() {
    let s = fixture_store();
    let exp = expected();
    std::fs::remove_file(s.root.join("state.db")).unwrap();
    let messages_before = snapshot(&s.root.join("messages"));
    let r = run_in(&s.root, &["repair", "--json"]);
    assert_eq!(r.code, 0, "{}", r.err);
    // No message log was written; the never-loaded legacy snapshot got its own by migration.
    let mut messages_after = snapshot(&s.root.join("messages"));
    let legacy_only = PathBuf::from(format!(
        "{}.jsonl",
        exp["legacy_sessions"]["L3"].as_str().unwrap()
    ));
    assert!(messages_after.remove(&legacy_only).is_some());
    // The append-intent note of that migration's save is bookkeeping, not a message log.
    messages_after.remove(&PathBuf::from(".append-intent"));
    assert!(
        messages_after == messages_before,
        "repair wrote a message log"
    );
    let got = json_lines(&ok(&s.root, &["sessions", "--all", "--json"]));
    let want = exp["codelia_storage_api"]["list"].as_array().unwrap();
    let s7 = exp["scenario_sessions"]["S7"].as_str().unwrap();
    let s2 = exp["scenario_sessions"]["S2"].as_str().unwrap();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        let id = w["session_id"].as_str().unwrap();
        for key in ["session_id", "run_id", "message_count", "last_user_message"] {
            assert_eq!(
                g[key],
                w.get(key).cloned().unwrap_or(Value::Null),
                "{key} of {id}"
            );
        }
        // Not in any file of the store: S7's workspace root came from a project marker on
        // the recording machine (its runs name the sandbox root); S2 was saved a millisecond
        // after its last run record.
        if id != s7 {
            assert_eq!(
                g["workspace_root"],
                w.get("workspace_root").cloned().unwrap_or(Value::Null),
                "{id}"
            );
        }
        if id == s2 {
            assert_eq!(g["updated_at"], "2026-11-30T11:38:34.054Z");
        } else {
            assert_eq!(g["updated_at"], w["updated_at"], "{id}");
        }
    }
}

#[test]
fn repair_goes_on_past_a_failed_item_and_a_damaged_state_db_gets_one_hint() {
    let s = sample_store();
    settle(&s.root);
    std::fs::create_dir_all(s.root.join("state/dir.json")).unwrap();
    let r = run_in(&s.root, &["repair", "--json"]);
    assert_eq!(r.code, 4, "{}", r.out);
    assert!(r.err.contains("1 repair action(s) failed"), "{}", r.err);
    let actions: Vec<(String, String, String)> = json_lines(&r.out)
        .iter()
        .map(|a| {
            (
                a["action"].as_str().unwrap().into(),
                a["file"].as_str().unwrap().into(),
                a["status"].as_str().unwrap().into(),
            )
        })
        .collect();
    let has = |action: &str, file: &str, status: &str| {
        actions
            .iter()
            .any(|(a, f, s)| a == action && f == file && s == status)
    };
    assert!(
        has("migrate_legacy", "state/dir.json", "failed"),
        "{actions:?}"
    );
    assert!(has("seal_torn_tail", SAMPLE_TORN, "done"), "{actions:?}");
    assert!(has("rebuild_index", "state.db", "done"), "{actions:?}");
    // The index was rebuilt although an item failed.
    let indexed = json_lines(&ok(
        &s.root,
        &["runs", "--json", "--no-refresh", "--limit", "100"],
    ));
    assert!(indexed.len() > 5);
    // A state.db SQLite cannot read: one line with the way out, whatever the command.
    let c = sample_store();
    std::fs::write(
        c.root.join("state.db"),
        b"this is not a database file at all",
    )
    .unwrap();
    for args in [
        &["runs"][..],
        &["stats"],
        &["repair"],
        &["sessions", "--all"],
        &["reindex"],
    ] {
        let r = run_in(&c.root, args);
        assert_eq!(r.code, 4, "{args:?}");
        assert_eq!(r.err.lines().count(), 1, "{args:?}: {}", r.err);
        assert!(
            r.err.contains("hint: state.db is damaged: move it aside"),
            "{}",
            r.err
        );
        assert!(r.err.contains("`sessions repair`"), "{}", r.err);
    }
}

#[test]
fn repair_reports_what_a_legacy_migration_left_out() {
    let s = sample_store();
    settle(&s.root);
    std::fs::write(
        s.root.join("state/bbbb0001.json"),
        r#"{"schema_version":1,"session_id":"bbbb0001","updated_at":"2026-10-01T00:00:00.000Z","invoke_seq":"7","messages":[{"role":"user","content":"keep me"},"str",null,{"role":"assistant","content":"last"}]}"#,
    )
    .unwrap();
    for dry_run in [true, false] {
        let mut args = vec!["repair", "--json"];
        if dry_run {
            args.push("--dry-run");
        }
        let r = run_in(&s.root, &args);
        let entry = json_lines(&r.out)
            .into_iter()
            .find(|a| a["action"] == "migrate_legacy" && a["id"] == "bbbb0001")
            .unwrap_or_else(|| panic!("no migration entry: {}", r.out));
        let detail = entry["detail"].as_str().unwrap();
        // Two messages are stored; the two non-object elements (2 and 3) and the wrong-typed
        // invoke_seq are named, so nothing is dropped silently.
        assert!(detail.contains("2 message(s)"), "{detail}");
        assert!(
            detail.contains("line 2") && detail.contains("line 3"),
            "{detail}"
        );
        assert!(detail.contains("invoke_seq"), "{detail}");
    }
}
