//! Several processes on one sessions root: 8 processes × 50 saves of distinct sessions never
//! see "database is locked"; 2 processes saving one session with compare-and-swap give exactly
//! one conflict and no lost update; a session lease held by another process refuses this one
//! (naming it) until that process is killed with SIGKILL, which releases it at once.
//!
//! `harness = false`: the binary is both the test (no arguments) and the worker processes it
//! spawns (`--worker …`).

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used
)]

mod common;
use common::msg;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use session_schema::{SessionState, Timestamp};
use session_state::{ListQuery, StateStore};

/// Bound for a refusal "at once": far below the store's `max_busy_wait` (120 s), so that a
/// refusal that waited for the holder fails, and far above anything a loaded machine adds, so
/// that a slow run does not.
const AT_ONCE: Duration = Duration::from_secs(30);

const PROCESSES: usize = 8;
const SAVES: usize = 50;
const SHARED: &str = "5d0c6f1e-2a7b-4c3d-8e9f-000000000001";

fn session(id: &str, texts: &[String]) -> SessionState {
    SessionState {
        schema_version: Some(1i64.into()),
        session_id: id.to_owned(),
        updated_at: Timestamp::now(),
        messages: texts
            .iter()
            .enumerate()
            .map(|(i, t)| msg(if i % 2 == 0 { "user" } else { "assistant" }, t))
            .collect(),
        ..Default::default()
    }
}

fn texts_for(worker: usize, save: usize) -> Vec<String> {
    (0..=save % 7)
        .map(|k| format!("w{worker} s{save} m{k} {}", "x".repeat(300)))
        .collect()
}

fn worker_distinct(root: &Path, worker: usize) -> Result<(), String> {
    let store = StateStore::open(root).map_err(|e| format!("open: {e}"))?;
    for save in 0..SAVES {
        let id = format!("w{worker}-s{save}");
        store
            .save(&session(&id, &texts_for(worker, save)))
            .map_err(|e| format!("save {id}: {e}"))?;
    }
    Ok(())
}

fn worker_cas(root: &Path, name: &str, barrier: &Path) -> Result<String, String> {
    let store = StateStore::open(root).map_err(|e| format!("open: {e}"))?;
    let loaded = store
        .load(SHARED)
        .map_err(|e| e.to_string())?
        .ok_or("missing")?;
    let mut state = loaded.state.clone();
    state.messages.push(msg("user", &format!("from {name}")));
    std::fs::write(barrier.join(name), b"").map_err(|e| e.to_string())?;
    let start = Instant::now();
    while std::fs::read_dir(barrier)
        .map_err(|e| e.to_string())?
        .count()
        < 2
    {
        if start.elapsed() > Duration::from_secs(30) {
            return Err("barrier timeout".into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    match store.save_expecting(&state, loaded.generation) {
        Ok(_) => Ok("ok".into()),
        Err(e) if e.is_conflict() => Ok("conflict".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// Takes the lease of `id`, saves through it, says `held <pid>` and keeps the lease until its
/// stdin closes (or it is killed).
fn worker_hold(root: &Path, id: &str) -> Result<String, String> {
    use std::io::{BufRead, Write};
    let store = StateStore::open(root).map_err(|e| format!("open: {e}"))?;
    let lease = store.lease(id).map_err(|e| format!("lease: {e}"))?;
    lease
        .save(&session(id, &["held".into()]))
        .map_err(|e| format!("save: {e}"))?;
    let mut out = std::io::stdout();
    writeln!(out, "held {}", std::process::id()).map_err(|e| e.to_string())?;
    out.flush().map_err(|e| e.to_string())?;
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
    drop(lease);
    Ok(String::new())
}

fn spawn(args: &[String]) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .arg("--worker")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn distinct_sessions_never_see_lock_errors() {
    let dir = tempfile::tempdir().unwrap();
    // No database yet: the eight processes also race to create and initialise it.
    let root = dir.path().join("sessions");
    let children: Vec<_> = (0..PROCESSES)
        .map(|w| spawn(&["distinct".into(), root.display().to_string(), w.to_string()]))
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "worker failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let store = StateStore::open(&root).unwrap();
    let page = store.list(&ListQuery::all()).unwrap();
    assert_eq!(page.entries.len(), PROCESSES * SAVES);
    for w in 0..PROCESSES {
        for s in 0..SAVES {
            let id = format!("w{w}-s{s}");
            let loaded = store.load(&id).unwrap().unwrap();
            assert!(loaded.damage.is_empty(), "{id}: {:?}", loaded.damage);
            assert_eq!(
                loaded.state.messages,
                session(&id, &texts_for(w, s)).messages,
                "{id}"
            );
        }
    }
    // One log per session (beside them only the append intent, `.append-intent`).
    let files = std::fs::read_dir(root.join("messages"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".jsonl")
        })
        .count();
    assert_eq!(files, PROCESSES * SAVES);
    println!("distinct_sessions_never_see_lock_errors ... ok");
}

fn same_session_gives_exactly_one_conflict() {
    for trial in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("sessions");
        let barrier = dir.path().join("barrier");
        std::fs::create_dir(&barrier).unwrap();
        let store = StateStore::open(&root).unwrap();
        store
            .save(&session(SHARED, &["hello".into(), "hi".into()]))
            .unwrap();
        let children: Vec<_> = ["a", "b"]
            .iter()
            .map(|n| {
                spawn(&[
                    "cas".into(),
                    root.display().to_string(),
                    (*n).into(),
                    barrier.display().to_string(),
                ])
            })
            .collect();
        let mut results = Vec::new();
        for (child, name) in children.into_iter().zip(["a", "b"]) {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            results.push((
                String::from_utf8(out.stdout).unwrap().trim().to_owned(),
                name,
            ));
        }
        let winners: Vec<_> = results.iter().filter(|(r, _)| r == "ok").collect();
        let losers: Vec<_> = results.iter().filter(|(r, _)| r == "conflict").collect();
        assert_eq!(
            (winners.len(), losers.len()),
            (1, 1),
            "trial {trial}: {results:?}"
        );
        let loaded = store.load(SHARED).unwrap().unwrap();
        let texts: Vec<String> = loaded
            .state
            .messages
            .iter()
            .map(|m| {
                serde_json::to_value(m).unwrap()["content"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(
            texts,
            vec![
                "hello".to_owned(),
                "hi".into(),
                format!("from {}", winners[0].1)
            ]
        );
    }
    println!("same_session_gives_exactly_one_conflict ... ok");
}

fn a_lease_held_by_another_process_refuses_this_one_until_it_is_killed() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let id = "1ea5e000-0000-4000-8000-000000000001";
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--worker", "hold", &root.display().to_string(), id])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert_eq!(first.trim(), format!("held {}", child.id()), "{first:?}");
    let store = StateStore::open(&root).unwrap();
    let started = Instant::now();
    let err = store.lease(id).unwrap_err();
    assert!(started.elapsed() < AT_ONCE, "{:?}", started.elapsed());
    let session_state::StateError::SessionBusy { holder, .. } = &err else {
        panic!("{err}");
    };
    assert_eq!(holder.pid, Some(child.id()));
    assert_eq!(holder.purpose, session_state::LeasePurpose::Open);
    assert!(holder.host.is_some());
    let since = holder.since.as_ref().unwrap().parse().unwrap();
    assert!(since <= time::OffsetDateTime::now_utc());
    assert!(
        err.to_string().contains(&format!("pid {}", child.id())),
        "{err}"
    );
    // Its saves are refused too; reading is not blocked.
    assert!(
        store
            .save(&session(id, &["intruder".into()]))
            .unwrap_err()
            .is_session_busy()
    );
    let loaded = store.load(id).unwrap().unwrap();
    assert_eq!(loaded.state.messages.len(), 1);
    let open = store.open_sessions().unwrap();
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].holder.pid, Some(child.id()));
    // SIGKILL: the lock dies with the process; nothing is left stuck.
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(store.open_sessions().unwrap().is_empty());
    let started = Instant::now();
    let lease = store.lease(id).unwrap();
    assert!(started.elapsed() < AT_ONCE, "{:?}", started.elapsed());
    lease
        .save(&session(id, &["held".into(), "after the kill".into()]))
        .unwrap();
    assert_eq!(lease.holder().pid, Some(std::process::id()));
    println!("a_lease_held_by_another_process_refuses_this_one_until_it_is_killed ... ok");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--worker") {
        let root = PathBuf::from(&args[3]);
        let result = match args[2].as_str() {
            "distinct" => worker_distinct(&root, args[4].parse().unwrap()).map(|()| String::new()),
            "cas" => worker_cas(&root, &args[4], Path::new(&args[5])),
            "hold" => worker_hold(&root, &args[4]),
            other => Err(format!("unknown worker {other}")),
        };
        match result {
            Ok(out) => println!("{out}"),
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        }
        return;
    }
    // `cargo test -- --list` and filters: this file has exactly these tests.
    if args.iter().any(|a| a == "--list") {
        println!("distinct_sessions_never_see_lock_errors: test");
        println!("same_session_gives_exactly_one_conflict: test");
        println!("a_lease_held_by_another_process_refuses_this_one_until_it_is_killed: test");
        return;
    }
    distinct_sessions_never_see_lock_errors();
    same_session_gives_exactly_one_conflict();
    a_lease_held_by_another_process_refuses_this_one_until_it_is_killed();
}
