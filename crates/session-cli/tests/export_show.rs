//! `export`, `show` and `tail` on damaged, foreign-written and hostile data: an incomplete
//! export says so and exits 4, stored lines come out byte-exact, control characters from a log
//! never reach the terminal, `-o` never writes into the store, and `tail -f` stops when its
//! file goes away.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::copy_tree;

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const SESSION: &str = "5a1e0001-0000-4000-8000-000000000001";
const RUN: &str = "0e0e0e0e-0000-4000-8000-00000000e0e0";

fn sample() -> PathBuf {
    session_test_support::sample_sessions_dir()
}

/// A private copy of the sample store (`root`), removed at the end of the test.
struct Store {
    dir: tempfile::TempDir,
    root: PathBuf,
}

fn sample_store() -> Store {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    copy_tree(&sample(), &root);
    Store { dir, root }
}

fn sessions_cmd(root: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sessions"));
    c.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", "/nonexistent-home")
        .env("TZ", "UTC")
        .arg("--root")
        .arg(root);
    c
}

struct Run {
    code: i32,
    out: Vec<u8>,
    err: String,
}

fn finish(o: Output) -> Run {
    let r = Run {
        code: o.status.code().unwrap_or(-1),
        out: o.stdout,
        err: String::from_utf8(o.stderr).unwrap(),
    };
    assert!(!r.err.contains("panicked"), "panic: {}", r.err);
    r
}

fn run_in(root: &Path, args: &[&str]) -> Run {
    finish(sessions_cmd(root).args(args).output().unwrap())
}

fn text(r: &Run) -> String {
    String::from_utf8(r.out.clone()).unwrap()
}

/// Writes run `RUN` (session `SESSION`) under `root` from the given lines after the header,
/// each as written (ending included), and returns its path.
fn plant_run(root: &Path, lines: &[&str]) -> PathBuf {
    let day = root.join("2026/11/30");
    std::fs::create_dir_all(&day).unwrap();
    let path = day.join(format!("{RUN}.jsonl"));
    let mut bytes = format!(
        "{{\"type\":\"header\",\"schema_version\":1,\"run_id\":\"{RUN}\",\"session_id\":\"{SESSION}\",\"started_at\":\"2026-11-30T10:00:00.000Z\"}}\n"
    );
    for l in lines {
        bytes.push_str(l);
    }
    std::fs::write(&path, bytes).unwrap();
    path
}

fn run_start(text_json: &str) -> String {
    format!(
        "{{\"type\":\"run.start\",\"run_id\":\"{RUN}\",\"session_id\":\"{SESSION}\",\"ts\":\"2026-11-30T10:00:01.000Z\",\"input\":{{\"type\":\"text\",\"text\":\"{text_json}\"}}}}\n"
    )
}

fn run_end() -> String {
    format!(
        "{{\"type\":\"run.end\",\"run_id\":\"{RUN}\",\"ts\":\"2026-11-30T10:00:02.000Z\",\"outcome\":\"completed\"}}\n"
    )
}

fn messages_file(root: &Path) -> PathBuf {
    root.join(format!("messages/{SESSION}.jsonl"))
}

fn export_json(root: &Path) -> (Run, Value) {
    let r = run_in(root, &["export", SESSION, "--format", "json"]);
    let doc = serde_json::from_slice(&r.out).unwrap_or_else(|e| panic!("{e}: {}", r.err));
    (r, doc)
}

/// Kinds in the `damage` array of a session export.
fn damage_kinds(doc: &Value) -> Vec<String> {
    doc["damage"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["kind"].as_str().unwrap().to_owned())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Bug: damaged or missing messages were dropped silently with exit 0.

#[test]
fn a_healthy_session_exports_complete() {
    let s = sample_store();
    let (r, doc) = export_json(&s.root);
    assert_eq!(r.code, 0, "{}", r.err);
    assert_eq!(r.err, "");
    assert_eq!(doc["complete"], true);
    assert_eq!(doc["damage"], Value::Array(vec![]));
    assert_eq!(doc["state"]["messages"].as_array().unwrap().len(), 10);
}

#[test]
fn a_corrupt_message_line_is_reported_and_exits_4() {
    let s = sample_store();
    let path = messages_file(&s.root);
    let original = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = original.lines().collect();
    lines[2] = "{\"role\":\"assistant\",\"content\":";
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();

    let (r, doc) = export_json(&s.root);
    assert_eq!(r.code, 4, "{}", r.err);
    assert_eq!(doc["complete"], false);
    let kinds = damage_kinds(&doc);
    assert!(kinds.contains(&"corrupt_line".to_owned()), "{kinds:?}");
    let bad = doc["damage"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["kind"] == "corrupt_line")
        .unwrap();
    assert_eq!(bad["line"], 3);
    assert_eq!(bad["kept"], false);
    assert_eq!(
        bad["file"],
        format!("messages/{SESSION}.jsonl"),
        "{}",
        r.err
    );
    assert_eq!(doc["state"]["messages"].as_array().unwrap().len(), 9);
    assert!(
        r.err.contains(&format!(
            "sessions: export incomplete: messages/{SESSION}.jsonl: line 3, byte "
        )),
        "{}",
        r.err
    );
    // Every format says so, not only JSON.
    for format in ["md", "jsonl"] {
        let r = run_in(&s.root, &["export", SESSION, "--format", format]);
        assert_eq!(r.code, 4, "{format}: {}", r.err);
        assert!(r.err.contains("corrupt_line"), "{format}: {}", r.err);
    }
}

#[test]
fn an_emptied_or_deleted_messages_file_is_a_count_mismatch() {
    for delete in [false, true] {
        let s = sample_store();
        let path = messages_file(&s.root);
        if delete {
            std::fs::remove_file(&path).unwrap();
        } else {
            std::fs::write(&path, b"").unwrap();
        }
        let (r, doc) = export_json(&s.root);
        assert_eq!(r.code, 4, "delete={delete}: {}", r.err);
        assert_eq!(doc["complete"], false);
        let mismatch = doc["damage"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["kind"] == "message_count_mismatch")
            .unwrap_or_else(|| panic!("delete={delete}: {}", doc["damage"]));
        assert_eq!(mismatch["expected"], 10);
        assert_eq!(mismatch["found"], 0);
        assert!(
            r.err
                .contains("message_count_mismatch: state.db says 10 message(s), 0 found"),
            "{}",
            r.err
        );
    }
}

#[test]
fn a_saved_state_that_cannot_be_loaded_makes_the_export_incomplete() {
    let s = sample_store();
    let path = messages_file(&s.root);
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir(&path).unwrap();
    let (r, doc) = export_json(&s.root);
    assert_eq!(r.code, 4, "{}", r.err);
    assert_eq!(doc["complete"], false);
    assert_eq!(doc["state"], Value::Null);
    assert_eq!(damage_kinds(&doc), ["unloadable_session"]);
    assert!(
        r.err.contains(&format!(
            "sessions: export incomplete: saved state of session {SESSION} not exported: "
        )),
        "{}",
        r.err
    );
    // The runs are still exported.
    assert!(!doc["runs"].as_array().unwrap().is_empty());
}

#[test]
fn damaged_run_lines_make_the_export_incomplete() {
    let s = sample_store();
    plant_run(
        &s.root,
        &[&run_start("hi"), "{\"type\":\"run.status\",\"ru"],
    );
    let r = run_in(&s.root, &["export", RUN, "--format", "json"]);
    assert_eq!(r.code, 4, "{}", r.err);
    let doc: Value = serde_json::from_slice(&r.out).unwrap();
    assert_eq!(doc["complete"], false);
    assert_eq!(doc["records"].as_array().unwrap().len(), 2);
    assert_eq!(doc["damage"][0]["kind"], "torn_tail");
    assert_eq!(r.err.lines().count(), 1, "{}", r.err);
    assert!(
        r.err.contains("1 damaged line(s) not exported"),
        "{}",
        r.err
    );
}

// ---------------------------------------------------------------------------------------------
// Bug: lines with escapes another writer chose were re-serialized.

#[test]
fn exports_keep_the_stored_bytes_of_foreign_escapes() {
    let s = sample_store();
    // As Python's json.dumps writes it: escaped non-ASCII, an escaped slash, a surrogate pair.
    let start = run_start(r"caf\u00e9 \/ \ud83c\udf89");
    let end = run_end().replace('\n', "\r\n");
    let path = plant_run(&s.root, &[&start, &end]);
    let stored = std::fs::read(&path).unwrap();

    let r = run_in(&s.root, &["export", RUN, "--format", "jsonl"]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert_eq!(r.out, stored, "jsonl export is the file itself");

    let r = run_in(&s.root, &["export", RUN, "--format", "json"]);
    assert_eq!(r.code, 0, "{}", r.err);
    let out = text(&r);
    assert!(out.contains(start.trim_end()), "{out}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["complete"], true);
    assert_eq!(doc["records"][1]["input"]["text"], "café / 🎉");
    assert_eq!(doc["records"][2]["outcome"], "completed");
}

// ---------------------------------------------------------------------------------------------
// Bug: terminal control sequences in a log reached the terminal.

const HOSTILE: &str = r"\u001b]0;pwned\u0007\u001b[2J\rEVIL\b\b\u009b31m";
const SHOWN: &str = r"\u001b]0;pwned\u0007\u001b[2J\u000dEVIL\u0008\u0008\u009b31m";

fn assert_no_controls(what: &str, out: &str) {
    let bad: Vec<char> = out
        .chars()
        .filter(|c| c.is_control() && *c != '\n' && *c != '\t')
        .collect();
    assert!(bad.is_empty(), "{what} wrote {bad:?}: {out}");
}

#[test]
fn show_export_md_and_tail_write_control_characters_visibly() {
    let s = sample_store();
    plant_run(&s.root, &[&run_start(HOSTILE), &run_end()]);

    let show = run_in(&s.root, &["show", RUN]);
    assert_eq!(show.code, 0, "{}", show.err);
    let out = text(&show);
    assert_no_controls("show", &out);
    assert!(out.contains(SHOWN), "{out}");

    let md = run_in(&s.root, &["export", RUN, "--format", "md"]);
    assert_eq!(md.code, 0, "{}", md.err);
    let out = text(&md);
    assert_no_controls("export --format md", &out);
    assert!(out.contains(SHOWN), "{out}");

    let tail = run_in(&s.root, &["tail", RUN]);
    assert_eq!(tail.code, 0, "{}", tail.err);
    let out = text(&tail);
    assert_no_controls("tail", &out);
    // One summary line per record, escaped like everything else shown.
    assert!(out.contains(&format!("run.start {SHOWN}")), "{out}");

    // `show --raw` and the JSON formats still give the stored bytes.
    let raw = run_in(&s.root, &["show", "--raw", RUN]);
    assert!(text(&raw).contains(HOSTILE));
}

// ---------------------------------------------------------------------------------------------
// Bug: `export -o` could overwrite store files.

#[test]
fn export_refuses_output_inside_the_store_and_existing_files() {
    let s = sample_store();
    let db = s.root.join("state.db");
    let db_before = std::fs::read(&db).unwrap();
    let msgs = messages_file(&s.root);
    let msgs_before = std::fs::read(&msgs).unwrap();
    let sneaky = s.dir.path().join("link");
    #[cfg(unix)]
    std::os::unix::fs::symlink(&s.root, &sneaky).unwrap();
    let mut inside = vec![
        db.clone(),
        msgs.clone(),
        s.root.join("new-file.json"),
        s.root.join("2026/../state.db"),
    ];
    if cfg!(unix) {
        inside.push(sneaky.join("state.db"));
        inside.push(sneaky.join("messages/other.jsonl"));
    }
    for out in &inside {
        for force in [false, true] {
            let mut args = vec!["export", SESSION, "--format", "json", "-o"];
            args.push(out.to_str().unwrap());
            if force {
                args.push("--force");
            }
            let r = run_in(&s.root, &args);
            assert_eq!(r.code, 2, "{args:?}: {}", r.err);
            assert!(r.err.contains("inside the store root"), "{}", r.err);
            assert_eq!(r.err.lines().count(), 1, "{}", r.err);
        }
    }
    assert_eq!(std::fs::read(&db).unwrap(), db_before);
    assert_eq!(std::fs::read(&msgs).unwrap(), msgs_before);
    assert!(!s.root.join("new-file.json").exists());

    // Outside the store: a new file is written; an existing one only with --force.
    let target = s.dir.path().join("backup.json");
    std::fs::write(&target, b"keep me").unwrap();
    let t = target.to_str().unwrap();
    let r = run_in(&s.root, &["export", SESSION, "--format", "json", "-o", t]);
    assert_eq!(r.code, 2, "{}", r.err);
    assert!(r.err.contains("--force"), "{}", r.err);
    assert_eq!(std::fs::read(&target).unwrap(), b"keep me");
    let r = run_in(
        &s.root,
        &["export", SESSION, "--format", "json", "-o", t, "--force"],
    );
    assert_eq!(r.code, 0, "{}", r.err);
    let doc: Value = serde_json::from_slice(&std::fs::read(&target).unwrap()).unwrap();
    assert_eq!(doc["session_id"], SESSION);
    let fresh = s.dir.path().join("fresh.md");
    let r = run_in(
        &s.root,
        &[
            "export",
            SESSION,
            "--format",
            "md",
            "-o",
            fresh.to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(
        std::fs::read_to_string(&fresh)
            .unwrap()
            .starts_with("# Session ")
    );
}

// ---------------------------------------------------------------------------------------------
// Bug: `tail -f` followed a deleted or replaced run forever.

/// Starts `tail -f` on `RUN`, waits (bounded) for its first line, applies `change` to the run
/// file, and waits (bounded) for the command to end.
fn follow_then(change: impl FnOnce(&Path)) -> Run {
    let s = sample_store();
    let path = plant_run(&s.root, &[&run_start("still running")]);
    let mut child = sessions_cmd(&s.root)
        .args(["tail", "-f", RUN, "--timeout", "60"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in std::io::BufReader::new(stdout).lines() {
            let line = line.unwrap();
            let _ = tx.send(());
            lines.push(line);
        }
        lines
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("tail -f printed nothing");
    change(&path);
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("tail -f still following after the change");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let lines = reader.join().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(lines.len(), 2, "{lines:?}");
    finish(Output {
        status,
        stdout: lines.join("\n").into_bytes(),
        stderr: err.into_bytes(),
    })
}

#[test]
fn tail_follow_stops_when_the_run_file_is_removed() {
    let r = follow_then(|p| std::fs::remove_file(p).unwrap());
    assert_eq!(r.code, 3, "{}", r.err);
    assert!(
        r.err.contains(&format!(
            "2026/11/30/{RUN}.jsonl: run file removed while being followed"
        )),
        "{}",
        r.err
    );
    assert_eq!(r.err.lines().count(), 1, "{}", r.err);
}

#[test]
fn tail_follow_stops_when_the_run_file_is_replaced() {
    let r = follow_then(|p| {
        let tmp = p.with_extension("tmp");
        std::fs::write(&tmp, std::fs::read(p).unwrap()).unwrap();
        std::fs::rename(&tmp, p).unwrap();
    });
    assert_eq!(r.code, 4, "{}", r.err);
    assert!(r.err.contains("replaced by another file"), "{}", r.err);
}

#[test]
fn tail_follow_stops_when_the_run_file_shrinks() {
    let r = follow_then(|p| {
        let f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
        f.set_len(10).unwrap();
    });
    assert_eq!(r.code, 4, "{}", r.err);
    assert!(r.err.contains("stopped following"), "{}", r.err);
    assert!(r.err.contains("shrank"), "{}", r.err);
}

/// The reference's shell tool result (a JSON object) is shown as its command, stdout, stderr
/// and exit code by `show` and `export --format md`, other JSON results indented, plain text
/// as it is; the sample store holds such a result (its S1 second run).
#[test]
fn shell_results_are_shown_as_their_text() {
    let s = sample_store();
    let run = "7a1e0001-0000-4000-8000-000000000102";
    let r = run_in(&s.root, &["show", run]);
    assert_eq!(r.code, 0, "{}", r.err);
    let out = text(&r);
    let block = "09:14:42 tool result shell toolu_sample_0001\n           $ ls; cat CHANGELOG.md\n           AGENTS.md\n           README.md\n           docs\n           package.json\n           src\n           stderr:\n           cat: CHANGELOG.md: No such file or directory\n           exit code 1 · 12 ms\n";
    assert!(out.contains(block), "{out}");
    assert!(!out.contains("\\n"), "escaped newlines in {out}");

    let r = run_in(&s.root, &["export", run, "--format", "md"]);
    assert_eq!(r.code, 0, "{}", r.err);
    let md = text(&r);
    let block = "```sh\n$ ls; cat CHANGELOG.md\n```\n```\nAGENTS.md\nREADME.md\ndocs\npackage.json\nsrc\n```\nstderr:\n\n```\ncat: CHANGELOG.md: No such file or directory\n```\n\n_exit code 1 · 12 ms_\n";
    assert!(md.contains(block), "{md}");
    assert!(!md.contains("\"stdout\""), "{md}");

    // Another JSON result is indented (keys in stored order); text stays as it is.
    plant_run(
        &s.root,
        &[
            &run_start("go"),
            &(r#"{"type":"tool.output","run_id":"0e0e0e0e-0000-4000-8000-00000000e0e0","ts":"2026-11-30T10:00:01.000Z","tool":"ide_open_file","tool_call_id":"c1","result_raw":"{\"opened\":\"src/a.js\",\"editor\":\"demo-ide\"}"}"#.to_owned() + "\n"),
            &(r#"{"type":"tool.output","run_id":"0e0e0e0e-0000-4000-8000-00000000e0e0","ts":"2026-11-30T10:00:02.000Z","tool":"shell","tool_call_id":"c2","result_raw":"12\n"}"#.to_owned() + "\n"),
            &run_end(),
        ],
    );
    let md = text(&run_in(&s.root, &["export", RUN, "--format", "md"]));
    assert!(
        md.contains(
            "```json\n{\n  \"opened\": \"src/a.js\",\n  \"editor\": \"demo-ide\"\n}\n```\n"
        ),
        "{md}"
    );
    assert!(
        md.contains("(c2) · 2026-11-30T10:00:02.000Z\n\n```\n12\n```\n"),
        "{md}"
    );
    let out = text(&run_in(&s.root, &["show", RUN]));
    assert!(
        out.contains("           {\n             \"opened\": \"src/a.js\",\n             \"editor\": \"demo-ide\"\n           }\n"),
        "{out}"
    );
}
