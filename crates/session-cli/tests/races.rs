//! Housekeeping races and hostile files, made deterministic with the test hooks
//! (`SESSIONS_TEST_PAUSE` holds `gc` at a named point while the test acts, `SESSIONS_TEST_FAIL`
//! makes a write fail as on a full disk): a save acknowledged while `gc` works is never lost,
//! a run writer never appends to a file in the trash, the trash never deletes a file a writer
//! holds, a full disk leaves no half copy, a session a runtime has open stays, and a FIFO
//! never makes a command wait.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::copy_tree;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use session_cli::{Env, Terminal, run_with};
use session_schema::SessionState;
use session_state::StateStore;

const NOW: &str = "2026-11-30T12:00:00Z";
/// The sample's old session (a row): `gc --older-than 30d` moves it.
const OLD: &str = "5a1e0007-0000-4000-8000-000000000007";
/// The sample's old legacy-only session.
const OLD_LEGACY: &str = "5a1e00a1-0000-4000-8000-0000000000a1";
/// The sample's old run.
const OLD_RUN: &str = "2026/10/20/7a1e0007-0000-4000-8000-000000000701.jsonl";

struct Store {
    _dir: tempfile::TempDir,
    root: PathBuf,
    hooks: PathBuf,
}

fn sample_store() -> Store {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    copy_tree(&session_test_support::sample_sessions_dir(), &root);
    let hooks = dir.path().join("hooks");
    std::fs::create_dir(&hooks).unwrap();
    Store {
        _dir: dir,
        root,
        hooks,
    }
}

struct Run {
    code: i32,
    out: String,
    err: String,
}

/// Runs `sessions --root <root> <args>` in-process with `extra` environment variables.
fn run(root: &Path, args: &[&str], extra: &[(&str, String)]) -> Run {
    let mut pairs = vec![
        ("HOME".to_owned(), "/nonexistent-home".to_owned()),
        ("SESSIONS_NOW".to_owned(), NOW.to_owned()),
    ];
    pairs.extend(extra.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
    let env = Env::from_pairs(pairs);
    let mut argv: Vec<std::ffi::OsString> = vec!["sessions".into(), "--root".into(), root.into()];
    argv.extend(args.iter().map(Into::into));
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = run_with(argv, &mut out, &mut err, &env, Terminal::default());
    Run {
        code,
        out: String::from_utf8(out).unwrap(),
        err: String::from_utf8(err).unwrap(),
    }
}

/// Runs it on another thread; the handle gives the result.
fn spawn_run(
    root: &Path,
    args: &[&str],
    extra: Vec<(&'static str, String)>,
) -> std::thread::JoinHandle<Run> {
    let root = root.to_owned();
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    std::thread::spawn(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(&root, &args, &extra)
    })
}

/// Waits until the command reached the pause `point`.
fn wait_reached(hooks: &Path, point: &str) {
    let start = Instant::now();
    while !hooks.join(format!("{point}.reached")).exists() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{point} never reached"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn go(hooks: &Path, point: &str) {
    std::fs::write(hooks.join(format!("{point}.go")), b"").unwrap();
}

fn pause_at(s: &Store, point: &str) -> Vec<(&'static str, String)> {
    vec![(
        "SESSIONS_TEST_PAUSE",
        format!("{point}@{}", s.hooks.display()),
    )]
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn action<'a>(lines: &'a [Value], action: &str, id: &str) -> &'a Value {
    lines
        .iter()
        .find(|a| a["action"] == action && a["id"] == id)
        .unwrap_or_else(|| panic!("no {action} of {id} in {lines:?}"))
}

fn batch(root: &Path) -> PathBuf {
    root.join("trash/20261130T120000Z")
}

fn with_message(mut state: SessionState, text: &str) -> SessionState {
    let line = serde_json::json!({"role": "user", "content": text}).to_string();
    state.messages.push(
        session_schema::parse_message(line.as_bytes())
            .unwrap()
            .value,
    );
    state
}

#[test]
fn gc_keeps_a_session_saved_between_its_snapshot_and_its_delete() {
    let s = sample_store();
    let point = "gc-session-copied";
    let gc = spawn_run(
        &s.root,
        &["gc", "--older-than", "30d", "--json"],
        pause_at(&s, point),
    );
    wait_reached(&s.hooks, point);
    // The session's copies are in the trash; the reference (which takes no lock) saves it
    // now: its file first, then its row.
    let copy = batch(&s.root).join(format!("state/{OLD}.json"));
    assert!(copy.is_file());
    let file = s.root.join(format!("messages/{OLD}.jsonl"));
    let mut body = std::fs::read(&file).unwrap();
    body.extend_from_slice(b"{\"role\":\"user\",\"content\":\"one more thing\"}\n");
    std::fs::write(&file, &body).unwrap();
    let conn = rusqlite::Connection::open(s.root.join("state.db")).unwrap();
    conn.execute(
        "UPDATE session_state SET message_count = 3, updated_at = '2026-11-30T11:59:59.000Z' WHERE session_id = ?1",
        [OLD],
    )
    .unwrap();
    drop(conn);
    go(&s.hooks, point);
    let r = gc.join().unwrap();
    assert_eq!(r.code, 0, "{}", r.err);
    let lines = json_lines(&r.out);
    let kept = action(&lines, "move_session", OLD);
    assert_eq!(kept["status"], "skipped");
    assert!(
        kept["detail"]
            .as_str()
            .unwrap()
            .contains("saved since it was snapshotted"),
        "{kept}"
    );
    assert_eq!(action(&lines, "move_session", OLD_LEGACY)["status"], "done");
    // Nothing of the saved session was lost, and the trash holds no stale copy of it.
    let loaded = StateStore::open(&s.root)
        .unwrap()
        .load(OLD)
        .unwrap()
        .unwrap();
    assert_eq!(loaded.state.messages.len(), 3);
    assert_eq!(std::fs::read(&file).unwrap(), body);
    assert!(!copy.exists());
    assert!(
        !batch(&s.root)
            .join(format!("messages/{OLD}.jsonl"))
            .exists()
    );
    let manifest = std::fs::read_to_string(batch(&s.root).join("manifest.jsonl")).unwrap();
    let ops: Vec<String> = json_lines(&manifest)
        .iter()
        .map(|m| format!("{} {}", m["op"], m["session_id"]))
        .collect();
    assert!(
        ops.contains(&format!("\"keep_session\" \"{OLD}\"")),
        "{ops:?}"
    );
}

#[test]
fn a_save_that_waits_for_gc_is_acknowledged_after_it_and_kept() {
    let s = sample_store();
    let point = "gc-session-copied";
    let gc = spawn_run(&s.root, &["gc", "--older-than", "30d"], pause_at(&s, point));
    wait_reached(&s.hooks, point);
    let store = StateStore::open(&s.root).unwrap();
    let state = with_message(store.load(OLD).unwrap().unwrap().state, "while gc works");
    let saved = Arc::new(AtomicBool::new(false));
    let saver = {
        let (root, saved) = (s.root.clone(), saved.clone());
        std::thread::spawn(move || {
            let r = StateStore::open(&root).unwrap().save(&state);
            saved.store(true, Ordering::SeqCst);
            r
        })
    };
    // gc holds the session's lease: the save waits for it instead of slipping in between.
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !saved.load(Ordering::SeqCst),
        "the save did not wait for gc"
    );
    go(&s.hooks, point);
    assert_eq!(gc.join().unwrap().code, 0);
    saver.join().unwrap().unwrap();
    // gc moved the session as snapshotted; the save that came after it is the session now.
    let loaded = store.load(OLD).unwrap().unwrap();
    assert_eq!(loaded.state.messages.len(), 3);
}

#[test]
fn gc_holds_a_runs_lock_across_the_move_and_the_trash_keeps_locked_files() {
    let s = sample_store();
    let point = "gc-run-locked";
    let gc = spawn_run(&s.root, &["gc", "--older-than", "30d"], pause_at(&s, point));
    wait_reached(&s.hooks, point);
    let path = s.root.join(OLD_RUN);
    let original = std::fs::read(&path).unwrap();
    assert!(
        session_jsonl::is_locked(&path).unwrap(),
        "gc holds the lock"
    );
    // A writer reopens the run now: it waits for the lock gc holds...
    let writer = {
        let path = path.clone();
        std::thread::spawn(move || {
            let opts = session_jsonl::WriterOptions {
                lock_wait: Duration::from_secs(30),
                ..session_jsonl::WriterOptions::default()
            };
            session_jsonl::RunWriter::open_append(&path, opts)
        })
    };
    std::thread::sleep(Duration::from_millis(100));
    go(&s.hooks, point);
    assert_eq!(gc.join().unwrap().code, 0);
    // ...and then finds the file moved away: it never appends to the copy in the trash.
    let err = writer.join().unwrap().unwrap_err();
    assert!(err.to_string().contains("moved or replaced"), "{err}");
    let trashed = batch(&s.root).join(OLD_RUN);
    assert_eq!(std::fs::read(&trashed).unwrap(), original);
    assert!(!path.exists());

    // A writer that does hold a file in the trash: emptying the trash keeps it.
    let held =
        session_jsonl::RunWriter::open_append(&trashed, session_jsonl::WriterOptions::default())
            .unwrap();
    let r = run(&s.root, &["gc", "--empty-trash", "--json"], &[]);
    assert_eq!(r.code, 0, "{}", r.err);
    let lines = json_lines(&r.out);
    let keep = lines.iter().find(|a| a["action"] == "keep_locked").unwrap();
    assert_eq!(keep["file"], format!("trash/20261130T120000Z/{OLD_RUN}"));
    assert!(trashed.is_file());
    let human = run(&s.root, &["gc", "--empty-trash"], &[]);
    assert!(
        human.out.contains("kept 1 file(s) a writer has open"),
        "{}",
        human.out
    );
    drop(held);
    let r = run(&s.root, &["gc", "--empty-trash"], &[]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(!s.root.join("trash").exists(), "{}", r.out);
}

#[test]
fn gc_on_a_full_disk_leaves_no_partial_copy_and_keeps_the_sessions() {
    let s = sample_store();
    let r = run(
        &s.root,
        &["gc", "--older-than", "30d", "--json"],
        &[("SESSIONS_TEST_FAIL", "gc-session-copy".to_owned())],
    );
    assert_eq!(r.code, 4, "{}", r.out);
    assert!(r.err.contains("could not be moved"), "{}", r.err);
    let lines = json_lines(&r.out);
    for id in [OLD, OLD_LEGACY] {
        let a = action(&lines, "move_session", id);
        assert_eq!(a["status"], "failed");
        assert!(
            a["detail"]
                .as_str()
                .unwrap()
                .contains("No space left on device"),
            "the OS cause is kept: {a}"
        );
    }
    // The run moved; no copy of a session, whole or partial, stayed in the trash.
    let mut files = Vec::new();
    let mut stack = vec![batch(&s.root)];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                files.push(p.strip_prefix(batch(&s.root)).unwrap().to_owned());
            }
        }
    }
    files.sort();
    assert_eq!(
        files,
        [PathBuf::from(OLD_RUN), PathBuf::from("manifest.jsonl")]
    );
    let store = StateStore::open(&s.root).unwrap();
    assert_eq!(store.load(OLD).unwrap().unwrap().state.messages.len(), 2);
    assert!(store.load(OLD_LEGACY).unwrap().is_some());
}

#[test]
#[cfg(unix)]
fn what_gc_writes_into_the_trash_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let s = sample_store();
    let r = run(&s.root, &["gc", "--older-than", "30d"], &[]);
    assert_eq!(r.code, 0, "{}", r.err);
    let b = batch(&s.root);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    for dir in [
        s.root.join("trash"),
        b.clone(),
        b.join("state"),
        b.join("messages"),
        b.join("state-legacy"),
        b.join("2026/10/20"),
    ] {
        assert_eq!(mode(&dir), 0o700, "{}", dir.display());
    }
    for file in [
        b.join("manifest.jsonl"),
        b.join(format!("state/{OLD}.json")),
        b.join(format!("state/{OLD_LEGACY}.json")),
        b.join(format!("messages/{OLD}.jsonl")),
        b.join(format!("state-legacy/{OLD_LEGACY}.json")),
    ] {
        assert_eq!(mode(&file), 0o600, "{}", file.display());
    }
}

#[test]
fn a_session_a_runtime_has_open_is_shown_and_kept_by_gc() {
    let s = sample_store();
    let store = StateStore::open(&s.root).unwrap();
    let lease = store.lease(OLD).unwrap();
    let me = std::process::id();
    let listed = json_lines(&run(&s.root, &["sessions", "--all", "--json"], &[]).out);
    for l in &listed {
        if l["session_id"] == OLD {
            assert_eq!(l["open"]["pid"], me);
            assert_eq!(l["open"]["purpose"], "open");
            assert_eq!(
                l["open"]["since"],
                lease.holder().since.as_ref().unwrap().as_str()
            );
        } else {
            assert_eq!(l["open"], Value::Null, "{l}");
        }
    }
    let human = run(&s.root, &["sessions", "--all"], &[]).out;
    let line = human.lines().find(|l| l.contains(OLD)).unwrap();
    assert!(line.contains(&format!("pid {me}")), "{line}");
    let plan = json_lines(
        &run(
            &s.root,
            &["gc", "--older-than", "30d", "--dry-run", "--json"],
            &[],
        )
        .out,
    );
    assert_eq!(action(&plan, "move_session", OLD)["status"], "skipped");
    let r = run(&s.root, &["gc", "--older-than", "30d", "--json"], &[]);
    assert_eq!(r.code, 0, "{}", r.err);
    let kept = action(&json_lines(&r.out), "move_session", OLD).clone();
    assert_eq!(kept["status"], "skipped");
    assert!(
        kept["detail"]
            .as_str()
            .unwrap()
            .contains(&format!("the session is open (pid {me}")),
        "{kept}"
    );
    assert_eq!(store.load(OLD).unwrap().unwrap().state.messages.len(), 2);
    drop(lease);
}

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo (coreutils) is needed for this test");
    assert!(status.success());
}

#[test]
#[cfg(unix)]
fn a_fifo_in_the_store_never_makes_a_command_wait() {
    let s = sample_store();
    let orphan = "f1f0f1f0-0000-4000-8000-000000000001";
    mkfifo(&s.root.join(format!("messages/{orphan}.jsonl")));
    let legacy = "f1f0f1f0-0000-4000-8000-000000000002";
    mkfifo(&s.root.join(format!("state/{legacy}.json")));
    // A session with a row whose messages file became a FIFO.
    let held = "5a1e0001-0000-4000-8000-000000000001";
    let file = s.root.join(format!("messages/{held}.jsonl"));
    std::fs::remove_file(&file).unwrap();
    mkfifo(&file);
    let commands: Vec<Vec<&str>> = vec![
        vec!["sessions", "--all"],
        vec!["verify", "--json"],
        vec!["repair", "--dry-run", "--json"],
        vec!["repair", "--json"],
        vec!["show", held],
        vec!["export", held, "--format", "json"],
        vec!["gc", "--older-than", "30d", "--dry-run"],
        vec!["gc", "--older-than", "30d"],
    ];
    let mut results = Vec::new();
    for args in &commands {
        let handle = spawn_run(&s.root, args, Vec::new());
        let start = Instant::now();
        while !handle.is_finished() {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "{args:?} waits on the FIFO"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        results.push(handle.join().unwrap());
    }
    let verify = json_lines(&results[1].out);
    let kinds: Vec<(String, String)> = verify
        .iter()
        .filter(|f| f["severity"] == "problem")
        .map(|f| {
            (
                f["kind"].as_str().unwrap_or("").to_owned(),
                f["file"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    for want in [
        ("not_regular_file", format!("messages/{orphan}.jsonl")),
        ("not_regular_file", format!("messages/{held}.jsonl")),
        ("unlistable_snapshot", format!("state/{legacy}.json")),
    ] {
        assert!(
            kinds
                .iter()
                .any(|(k, f)| *k == want.0 && f.ends_with(&want.1)),
            "{want:?} not in {kinds:?}"
        );
    }
    let repair = json_lines(&results[3].out);
    let skipped = action(&repair, "rebuild_row", orphan);
    assert_eq!(skipped["status"], "skipped");
    assert!(
        skipped["detail"].as_str().unwrap().contains("FIFO"),
        "{skipped}"
    );
}
