//! What the passes of the run index that read every run file (its first build, a rebuild with
//! `reindex`) ask of the kernel per file, counted with `strace` in a child process (this test
//! binary again): no path-based `stat` of any run file
//! (the listing tells regular files by their directory entries' type, the size and mtime come
//! from the `fstat` of the open file), and one open per file, relative to its day directory
//! (`openat` with the bare file name, not the whole path). The rows it writes hold that
//! `fstat`, so the next incremental refresh reads no file. Skipped with a message when `strace`
//! is not installed or cannot trace here.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use session_jsonl::{Durability, RunWriter, WriterOptions};
use session_schema::{Header, Record, RunStatus, RunStatusKind, Timestamp};
use session_state::StateStore;

/// Set in the child: the sessions root to index.
const CHILD: &str = "SESSION_STATE_INDEX_SYSCALL_CHILD";

/// Run files planted, over two day directories.
const RUNS: u32 = 40;

fn run_name(n: u32) -> String {
    format!("00000000-0000-4000-8000-{n:012}.jsonl")
}

fn write_run(root: &Path, n: u32) -> PathBuf {
    let run_id = format!("00000000-0000-4000-8000-{n:012}");
    let day = if n.is_multiple_of(2) { "02" } else { "03" };
    let header = Header {
        schema_version: 1,
        run_id: run_id.clone(),
        session_id: Some(format!("s-{}", n % 3)),
        started_at: Timestamp::from_raw(format!("2026-11-{day}T10:00:00.000Z")),
        ..Default::default()
    };
    let w = RunWriter::create(
        root,
        &header,
        WriterOptions::with_durability(Durability::Buffered),
    )
    .unwrap();
    w.append(&Record::RunStatus(RunStatus {
        run_id,
        ts: Timestamp::from_raw(format!("2026-11-{day}T10:00:01.000Z")),
        status: RunStatusKind::Running,
        message: Some(format!("step {n}")),
        ..Default::default()
    }))
    .unwrap();
    let path = w.path().to_owned();
    w.close().unwrap();
    path
}

/// Plants the runs and dates every file and directory an hour back (no racy timestamps).
fn plant(root: &Path) {
    let back = SystemTime::now() - Duration::from_secs(3600);
    let paths: Vec<PathBuf> = (0..RUNS).map(|n| write_run(root, n)).collect();
    for p in &paths {
        fs::File::options()
            .write(true)
            .open(p)
            .unwrap()
            .set_modified(back)
            .unwrap();
    }
    for d in ["2026/11/02", "2026/11/03", "2026/11", "2026"] {
        fs::File::open(root.join(d))
            .unwrap()
            .set_modified(back)
            .unwrap();
    }
}

/// A system call the trace shows where the counted phase begins or ends: an `open` of a
/// file that does not exist.
fn mark(root: &Path, name: &str) {
    let _ = fs::File::open(root.join(format!("strace-mark-{name}")));
}

/// The child: a first build and a rebuild, each between two marks, each followed by an
/// incremental refresh that must read no file.
fn child(root: &Path) {
    let store = StateStore::open(root).unwrap();
    mark(root, "build-begin");
    let report = store.index_runs().unwrap();
    mark(root, "build-end");
    assert!(report.failed.is_empty(), "{report:?}");
    assert_eq!(report.files_read, u64::from(RUNS), "{report:?}");
    let refresh = store.index_runs().unwrap();
    assert_eq!(refresh.files_read, 0, "{refresh:?}");
    mark(root, "reindex-begin");
    let report = store.reindex().unwrap();
    mark(root, "reindex-end");
    assert!(report.failed.is_empty(), "{report:?}");
    assert_eq!(
        store.list_runs(&Default::default()).unwrap().runs.len(),
        RUNS as usize
    );
    // The rows hold the size and mtime the listing of the refresh sees.
    let refresh = store.index_runs().unwrap();
    assert_eq!(refresh.files_read, 0, "{refresh:?}");
}

/// The traced lines between the marks of `phase`, without the pid `-f` prefixes.
fn traced_pass(trace: &str, phase: &str) -> Vec<String> {
    let mut calls = Vec::new();
    let mut inside = false;
    for raw in trace.lines() {
        let line = raw
            .trim_start_matches(|c: char| c.is_ascii_digit())
            .trim_start();
        if line.starts_with("<...") {
            continue;
        }
        if line.contains(&format!("strace-mark-{phase}-begin")) {
            inside = true;
            continue;
        }
        if line.contains(&format!("strace-mark-{phase}-end")) {
            break;
        }
        if inside {
            calls.push(line.to_owned());
        }
    }
    calls
}

#[test]
fn full_passes_stat_no_run_file_by_path_and_open_each_by_its_name_in_its_directory() {
    if let Some(root) = std::env::var_os(CHILD) {
        child(Path::new(&root));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    fs::create_dir_all(&root).unwrap();
    plant(&root);
    // Every call that takes a path: opens and the `stat` family.
    let Some(trace) = common::traced_child(
        "full_passes_stat_no_run_file_by_path_and_open_each_by_its_name_in_its_directory",
        "%file",
        CHILD,
        &root,
        &dir.path().join("trace.txt"),
    ) else {
        return;
    };
    for phase in ["build", "reindex"] {
        check_pass(&traced_pass(&trace, phase), phase);
    }
}

/// The calls of one full pass: no `stat` naming a run file, one open of each by its name.
fn check_pass(calls: &[String], phase: &str) {
    assert!(!calls.is_empty(), "{phase}");
    let is_open = |c: &str| c.starts_with("open");
    // No `stat`, `lstat` or `statx` names a run file (before: one `statx` per file at
    // listing time).
    let stats: Vec<&String> = calls
        .iter()
        .filter(|c| !is_open(c) && c.contains(".jsonl\""))
        .collect();
    assert!(stats.is_empty(), "{phase}: {stats:#?}");
    for n in 0..RUNS {
        let name = run_name(n);
        // Opened once, by its name relative to its open day directory (before: by the
        // whole path, which the kernel walks component by component).
        let by_name = calls
            .iter()
            .filter(|c| is_open(c) && c.contains(&format!("\"{name}\"")))
            .count();
        let by_path = calls
            .iter()
            .filter(|c| is_open(c) && c.contains(&format!("/{name}\"")))
            .count();
        assert_eq!((by_name, by_path), (1, 0), "{phase}, {name}: {calls:#?}");
    }
}
