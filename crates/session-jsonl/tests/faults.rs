//! The writer on a full disk or a failing device, through its fault-injection seam
//! ([`FaultPlan`]): every write, sync and cut of a run file is made to fail in turn (`ENOSPC`,
//! `EIO`, writes cut short), and after each failure the file must end on a line boundary, hold
//! exactly the acknowledged records, and take new records once the fault is gone. Also: a
//! create that fails leaves no file behind, run ids are unique in the whole store, and files
//! and directories get their modes whatever the umask.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::fs;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use session_jsonl::{
    Durability, Fault, FaultPlan, FileOp, JsonlError, RunWriter, WriterOptions, compress_run,
    probe_run_id, read_run,
};
use session_schema::{Header, Record, RunStatus, RunStatusKind, Timestamp};

const ENOSPC: i32 = 28;
const EIO: i32 = 5;

fn header(run_id: &str, started_at: &str) -> Header {
    Header {
        schema_version: 1,
        run_id: run_id.into(),
        session_id: Some("s".into()),
        started_at: Timestamp::from_raw(started_at),
        ..Default::default()
    }
}

fn status(msg: &str) -> Record {
    Record::RunStatus(RunStatus {
        run_id: "r".into(),
        ts: Timestamp::from_raw("2026-02-03T12:00:01.000Z"),
        status: RunStatusKind::Running,
        message: Some(msg.into()),
        ..Default::default()
    })
}

fn opts(durability: Durability, plan: &Arc<FaultPlan>) -> WriterOptions {
    WriterOptions {
        durability,
        buffer_size: 150,
        faults: Some(Arc::clone(plan)),
        ..WriterOptions::with_durability(durability)
    }
}

/// The status messages of the file, and whether it reads without damage and ends in `\n`.
fn contents(path: &Path) -> (Vec<String>, bool) {
    let bytes = fs::read(path).unwrap();
    let run = read_run(path).unwrap();
    let msgs = run
        .records
        .iter()
        .filter_map(|r| match &r.parsed.value {
            Record::RunStatus(s) => s.message.clone(),
            _ => None,
        })
        .collect();
    let clean = run.damage.is_empty() && bytes.last() == Some(&b'\n');
    (msgs, clean)
}

const MODES: [Durability; 4] = [
    Durability::Buffered,
    Durability::Flush,
    Durability::SyncData,
    Durability::GroupCommit {
        max_delay: Duration::from_millis(1),
        max_batch: 16,
    },
];

const FAULTS: [Fault; 4] = [
    Fault::Errno(ENOSPC),
    Fault::PartialThen {
        bytes: 1,
        errno: ENOSPC,
    },
    Fault::PartialThen {
        bytes: 40,
        errno: EIO,
    },
    Fault::Short { bytes: 7 },
];

/// Appends 6 records to a new run with the `step`-th call of `op` failing with `fault`; every
/// failure must leave the file clean with exactly the acknowledged records, and the writer
/// must go on (the fault is one-shot: "space returns").
fn one_fault(mode: Durability, op: FileOp, step: u64, fault: Fault) {
    let dir = tempfile::tempdir().unwrap();
    let plan = Arc::new(FaultPlan::new());
    // The header's own write and sync come first: count from after the create.
    let w = RunWriter::create(
        dir.path(),
        &header("r", "2026-02-03T12:00:00.000Z"),
        opts(mode, &plan),
    )
    .unwrap();
    let path = w.path().to_owned();
    let target = plan.calls(op) + step;
    plan.fail_nth(op, target, fault);
    let mut acked: Vec<String> = Vec::new();
    let mut failures = 0;
    let ctx = format!("{mode:?} {op:?} step {step} {fault:?}");
    for i in 0..6 {
        let msg = format!("m{i}");
        match w.append(&status(&msg)) {
            Ok(()) => acked.push(msg),
            Err(e) => {
                failures += 1;
                let JsonlError::AppendFailed {
                    source,
                    cut_error,
                    offset,
                    ..
                } = &e
                else {
                    panic!("{ctx}: {e}")
                };
                let want = match fault {
                    Fault::Errno(n) | Fault::PartialThen { errno: n, .. } => n,
                    Fault::Short { .. } => panic!("{ctx}: a short write is no error: {e}"),
                };
                assert_eq!(source.raw_os_error(), Some(want), "{ctx}: {e}");
                assert!(cut_error.is_none(), "{ctx}: {e}");
                let text = e.to_string();
                let cause = if want == ENOSPC {
                    "No space left on device"
                } else {
                    "Input/output error"
                };
                assert!(text.contains(cause), "{ctx}: {text}");
                // The file ends on a line boundary at `offset`, without the failed record.
                if mode != Durability::Buffered {
                    assert_eq!(fs::metadata(&path).unwrap().len(), *offset, "{ctx}");
                    let (msgs, clean) = contents(&path);
                    assert!(clean, "{ctx}");
                    assert_eq!(msgs, acked, "{ctx}");
                }
            }
        }
    }
    w.close().unwrap();
    let (msgs, clean) = contents(&path);
    assert!(clean, "{ctx}");
    assert_eq!(msgs, acked, "{ctx}");
    // The fault fired (unless the writer made fewer calls) and failed exactly one record.
    let fired = plan.calls(op) >= target && !matches!(fault, Fault::Short { .. });
    assert_eq!(failures, usize::from(fired), "{ctx}");
    assert_eq!(acked.len(), 6 - failures, "{ctx}");
}

#[test]
fn a_failed_write_is_cut_back_at_every_step_in_every_mode_and_the_writer_goes_on() {
    for mode in MODES {
        for fault in FAULTS {
            // Buffered mode writes only when its 150-byte buffer fills (every second record):
            // step 3 is its last write. The first, a middle and the last record fail in turn.
            for step in 1..=3 {
                one_fault(mode, FileOp::Write, step, fault);
            }
        }
    }
}

#[test]
fn a_failed_fdatasync_fails_exactly_the_unacknowledged_records_and_cuts_them_back() {
    for mode in [MODES[2], MODES[3]] {
        for errno in [ENOSPC, EIO] {
            for step in [1, 3, 6] {
                one_fault(mode, FileOp::SyncData, step, Fault::Errno(errno));
            }
        }
    }
}

#[test]
fn a_cut_back_that_fails_is_retried_before_the_next_record() {
    for mode in [MODES[1], MODES[2], MODES[3]] {
        let dir = tempfile::tempdir().unwrap();
        let plan = Arc::new(FaultPlan::new());
        let w = RunWriter::create(
            dir.path(),
            &header("r", "2026-02-03T12:00:00.000Z"),
            opts(mode, &plan),
        )
        .unwrap();
        w.append(&status("a")).unwrap();
        plan.fail_nth(
            FileOp::Write,
            plan.calls(FileOp::Write) + 1,
            Fault::PartialThen {
                bytes: 20,
                errno: ENOSPC,
            },
        );
        plan.fail_nth(
            FileOp::Truncate,
            plan.calls(FileOp::Truncate) + 1,
            Fault::Errno(EIO),
        );
        let err = w.append(&status("b")).unwrap_err();
        let JsonlError::AppendFailed { cut_error, .. } = &err else {
            panic!("{err}")
        };
        assert_eq!(
            cut_error.as_ref().and_then(|e| e.raw_os_error()),
            Some(EIO),
            "{err}"
        );
        assert!(err.to_string().contains("tries again"), "{err}");
        // The partial write is still there until the next append cuts it.
        assert!(!contents(w.path()).1, "{mode:?}");
        // The cut fails once more: nothing is written.
        plan.fail_nth(
            FileOp::Truncate,
            plan.calls(FileOp::Truncate) + 1,
            Fault::Errno(EIO),
        );
        let err = w.append(&status("c")).unwrap_err();
        assert!(matches!(err, JsonlError::CutBackFailed { .. }), "{err}");
        w.append(&status("d")).unwrap();
        let (msgs, clean) = contents(w.path());
        assert!(clean, "{mode:?}");
        assert_eq!(msgs, ["a", "d"], "{mode:?}");
        assert_eq!(w.records_written(), 3);
    }
}

#[test]
fn buffered_records_survive_a_failed_flush_and_go_out_once_space_returns() {
    let dir = tempfile::tempdir().unwrap();
    let plan = Arc::new(FaultPlan::new());
    let mut o = opts(Durability::Buffered, &plan);
    o.buffer_size = 1 << 20;
    let w = RunWriter::create(dir.path(), &header("r", "2026-02-03T12:00:00.000Z"), o).unwrap();
    for m in ["a", "b", "c"] {
        w.append(&status(m)).unwrap();
    }
    plan.fail_always(
        FileOp::Write,
        Fault::PartialThen {
            bytes: 30,
            errno: ENOSPC,
        },
    );
    let err = w.flush().unwrap_err();
    assert!(
        err.to_string()
            .contains("3 earlier record(s) stay in the writer's buffer"),
        "{err}"
    );
    let (msgs, clean) = contents(w.path());
    assert!(clean && msgs.is_empty(), "{msgs:?}");
    plan.heal();
    w.append(&status("d")).unwrap();
    w.close().unwrap();
    let path = dir.path().join("2026/02/03/r.jsonl");
    let (msgs, clean) = contents(&path);
    assert!(clean);
    assert_eq!(msgs, ["a", "b", "c", "d"]);
}

#[test]
fn group_commit_with_a_failing_sync_acknowledges_exactly_what_is_in_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let plan = Arc::new(FaultPlan::new());
    let w = Arc::new(
        RunWriter::create(
            dir.path(),
            &header("r", "2026-02-03T12:00:00.000Z"),
            opts(MODES[3], &plan),
        )
        .unwrap(),
    );
    let first = plan.calls(FileOp::SyncData);
    for k in [2, 5, 6, 11] {
        plan.fail_nth(FileOp::SyncData, first + k, Fault::Errno(EIO));
    }
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let w = Arc::clone(&w);
            std::thread::spawn(move || {
                let mut acked = Vec::new();
                for i in 0..40 {
                    let msg = format!("t{t}-{i}");
                    match w.append(&status(&msg)) {
                        Ok(()) => acked.push(msg),
                        Err(JsonlError::AppendFailed { source, .. }) => {
                            assert_eq!(source.raw_os_error(), Some(EIO));
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
                acked
            })
        })
        .collect();
    let mut acked: Vec<Vec<String>> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let total: usize = acked.iter().map(Vec::len).sum();
    assert!(total < 160, "some appends failed");
    let path = w.path().to_owned();
    drop(w);
    let (msgs, clean) = contents(&path);
    assert!(clean);
    assert_eq!(msgs.len(), total);
    // Each thread's acknowledged records, in its order, and nothing else.
    for (t, mine) in acked.iter_mut().enumerate() {
        let in_file: Vec<&String> = msgs
            .iter()
            .filter(|m| m.starts_with(&format!("t{t}-")))
            .collect();
        assert_eq!(in_file, mine.iter().collect::<Vec<_>>());
    }
}

#[test]
fn a_failed_sync_in_flush_mode_keeps_acknowledged_records_and_stops_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let plan = Arc::new(FaultPlan::new());
    let w = RunWriter::create(
        dir.path(),
        &header("r", "2026-02-03T12:00:00.000Z"),
        opts(Durability::Flush, &plan),
    )
    .unwrap();
    w.append(&status("a")).unwrap();
    plan.fail_nth(
        FileOp::SyncData,
        plan.calls(FileOp::SyncData) + 1,
        Fault::Errno(EIO),
    );
    let err = w.sync().unwrap_err();
    assert!(err.to_string().contains("Input/output error"), "{err}");
    let err = w.append(&status("b")).unwrap_err();
    assert!(matches!(err, JsonlError::WriterFailed { .. }), "{err}");
    assert_eq!(contents(w.path()).0, ["a"]);
    let path = w.path().to_owned();
    drop(w);
    let w = RunWriter::open_append(&path, WriterOptions::default()).unwrap();
    w.append(&status("b")).unwrap();
    assert_eq!(contents(&path).0, ["a", "b"]);
}

#[test]
fn a_create_that_fails_leaves_no_file_and_the_retry_succeeds() {
    let cases: [(FileOp, Fault); 6] = [
        (FileOp::Create, Fault::Errno(ENOSPC)),
        (FileOp::Write, Fault::Errno(ENOSPC)),
        (
            FileOp::Write,
            Fault::PartialThen {
                bytes: 12,
                errno: ENOSPC,
            },
        ),
        (FileOp::SyncData, Fault::Errno(EIO)),
        (FileOp::SyncDir, Fault::Errno(EIO)),
        (FileOp::Write, Fault::Errno(EIO)),
    ];
    for mode in MODES {
        for (op, fault) in cases {
            if op == FileOp::SyncDir && !mode.is_durable() {
                continue;
            }
            if op == FileOp::SyncData && !mode.is_durable() {
                continue;
            }
            let dir = tempfile::tempdir().unwrap();
            let plan = Arc::new(FaultPlan::new());
            // The directories exist already (the SyncDir fault hits the file's directory).
            fs::create_dir_all(dir.path().join("2026/02/03")).unwrap();
            plan.fail_nth(op, 1, fault);
            let h = header("r", "2026-02-03T12:00:00.000Z");
            let err = RunWriter::create(dir.path(), &h, opts(mode, &plan)).unwrap_err();
            let want = match fault {
                Fault::Errno(n) | Fault::PartialThen { errno: n, .. } => n,
                Fault::Short { .. } => unreachable!(),
            };
            let source = std::error::Error::source(&err)
                .and_then(|s| s.downcast_ref::<std::io::Error>())
                .and_then(std::io::Error::raw_os_error);
            assert_eq!(source, Some(want), "{mode:?} {op:?}: {err}");
            let path = dir.path().join("2026/02/03/r.jsonl");
            assert!(!path.exists(), "{mode:?} {op:?}: {err}");
            let w = RunWriter::create(dir.path(), &h, opts(mode, &plan)).unwrap();
            w.append(&status("a")).unwrap();
            w.close().unwrap();
            assert_eq!(contents(&path), (vec!["a".to_owned()], true));
        }
    }
}

#[test]
fn an_empty_leftover_file_is_taken_over_but_nothing_else_is() {
    let dir = tempfile::tempdir().unwrap();
    let h = header("r", "2026-02-03T12:00:00.000Z");
    let path = dir.path().join("2026/02/03/r.jsonl");
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    // A create killed before its header: 0 bytes.
    fs::write(&path, b"").unwrap();
    let w = RunWriter::create(dir.path(), &h, WriterOptions::default()).unwrap();
    w.append(&status("a")).unwrap();
    drop(w);
    assert_eq!(contents(&path), (vec!["a".to_owned()], true));
    // A file with content is never taken over.
    let err = RunWriter::create(dir.path(), &h, WriterOptions::default()).unwrap_err();
    assert!(matches!(err, JsonlError::AlreadyExists { .. }), "{err}");
    // Nor an empty file a writer holds.
    let held = dir.path().join("2026/02/03/q.jsonl");
    let holder = fs::File::create(&held).unwrap();
    holder.lock().unwrap();
    let err = RunWriter::create(
        dir.path(),
        &header("q", "2026-02-03T12:00:00.000Z"),
        WriterOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(err, JsonlError::AlreadyExists { .. }), "{err}");
    drop(holder);
    // Nor a link to an empty file elsewhere (the writer would write outside the store).
    #[cfg(unix)]
    {
        let outside = dir.path().join("outside.jsonl");
        fs::write(&outside, b"").unwrap();
        std::os::unix::fs::symlink(&outside, dir.path().join("2026/02/03/l.jsonl")).unwrap();
        let err = RunWriter::create(
            dir.path(),
            &header("l", "2026-02-03T12:00:00.000Z"),
            WriterOptions::default(),
        )
        .unwrap_err();
        assert!(matches!(err, JsonlError::AlreadyExists { .. }), "{err}");
        assert_eq!(fs::read(&outside).unwrap(), b"");
    }
}

#[test]
fn a_run_id_is_refused_when_any_date_directory_or_archive_holds_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let w = RunWriter::create(
        root,
        &header("r", "2026-02-03T12:00:00.000Z"),
        WriterOptions::default(),
    )
    .unwrap();
    let first = w.path().to_owned();
    drop(w);
    // A clock jump, a retried start: another day, another year.
    for started in ["2026-02-04T00:00:01.000Z", "2031-07-01T00:00:00.000Z"] {
        let err =
            RunWriter::create(root, &header("r", started), WriterOptions::default()).unwrap_err();
        let JsonlError::RunIdTaken { run_id, existing } = &err else {
            panic!("{err}")
        };
        assert_eq!(
            (run_id.as_str(), existing.as_path()),
            ("r", first.as_path())
        );
        assert!(err.to_string().contains("already used by"), "{err}");
    }
    // An archive holds it just as well.
    let archived = compress_run(&first).unwrap();
    let err = RunWriter::create(
        root,
        &header("r", "2030-01-01T00:00:00.000Z"),
        WriterOptions::default(),
    )
    .unwrap_err();
    assert!(
        matches!(&err, JsonlError::RunIdTaken { existing, .. } if *existing == archived),
        "{err}"
    );
    // An empty leftover elsewhere is no run: it does not block the id.
    fs::remove_file(&archived).unwrap();
    fs::create_dir_all(root.join("2026/01/01")).unwrap();
    fs::write(root.join("2026/01/01/r.jsonl"), b"").unwrap();
    RunWriter::create(
        root,
        &header("r", "2026-03-01T00:00:00.000Z"),
        WriterOptions::default(),
    )
    .unwrap();
    assert!(nothing_left_in_tempdirs(root));
}

/// No hidden temporary files anywhere under `root`.
fn nothing_left_in_tempdirs(root: &Path) -> bool {
    let mut stack = vec![root.to_owned()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if e.file_name().to_string_lossy().contains(".tmp") {
                return false;
            }
        }
    }
    true
}

#[test]
fn the_run_id_probe_lists_no_day_directory_and_looks_up_two_names_per_day() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mut days = 0;
    for year in ["2024", "2025", "2026"] {
        for month in ["01", "06", "12"] {
            for day in ["01", "15", "28", "31"] {
                let d = root.join(year).join(month).join(day);
                fs::create_dir_all(&d).unwrap();
                // Many runs per day cost nothing more.
                for i in 0..30 {
                    fs::write(d.join(format!("x{i}.jsonl")), b"{}\n").unwrap();
                }
                days += 1;
            }
        }
    }
    fs::write(root.join("2025/06/15/r.jsonl.zst"), b"z").unwrap();
    fs::write(root.join("2024/01/01/r.jsonl"), b"{}\n").unwrap();
    let probe = probe_run_id(root, "r").unwrap();
    assert_eq!(probe.dirs_listed, 1 + 3 + 9);
    assert_eq!(probe.names_probed, 2 * days);
    let found: Vec<_> = probe.files.iter().map(|(p, n)| (p.clone(), *n)).collect();
    assert_eq!(
        found,
        [
            (root.join("2025/06/15/r.jsonl.zst"), 1),
            (root.join("2024/01/01/r.jsonl"), 3)
        ]
    );
}

#[cfg(unix)]
#[test]
fn files_and_directories_get_their_modes_set_explicitly_not_through_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    let w = RunWriter::create(
        &root,
        &header("r", "2026-02-03T12:00:00.000Z"),
        WriterOptions::default(),
    )
    .unwrap();
    assert_eq!(mode(w.path()), 0o600);
    for d in ["", "2026", "2026/02", "2026/02/03"] {
        assert_eq!(mode(&root.join(d)), 0o700, "{d}");
    }
    drop(w);
    // Modes the umask (at least 022 on any sane system) would narrow come out exactly as
    // asked: they are set after creating, not passed through the umask.
    let wide = WriterOptions {
        file_mode: Some(0o666),
        dir_mode: Some(0o777),
        ..WriterOptions::default()
    };
    let w = RunWriter::create(&root, &header("q", "2027-05-06T12:00:00.000Z"), wide).unwrap();
    assert_eq!(mode(w.path()), 0o666);
    assert_eq!(mode(&root.join("2027/05/06")), 0o777);
    assert_eq!(mode(&root.join("2027")), 0o777);
    // Existing directories are left as they are.
    assert_eq!(mode(&root), 0o700);
    drop(w);
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(root.join("2027/05/06/q.jsonl"))
        .unwrap();
    f.write_all(b"").unwrap();
}
