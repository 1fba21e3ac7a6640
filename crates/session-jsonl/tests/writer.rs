//! Writer behaviour: header rules, durability modes, reopening after a torn tail, one writer
//! per file, sealing, escaping, archiving and following a run being written.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use session_jsonl::{
    DamageKind, Durability, FollowOptions, Follower, Item, JsonlError, RunEndState, RunWriter,
    WriterOptions, compress_run, is_locked, needs_seal, read_header, read_run, seal_torn_tail,
    terminal_state,
};
use session_schema::{
    Header, Prompts, Record, RunEnd, RunOutcome, RunStatus, RunStatusKind, Timestamp, ToolOutput,
};

fn header(run_id: &str) -> Header {
    Header {
        schema_version: 1,
        run_id: run_id.into(),
        session_id: Some("s".into()),
        started_at: Timestamp::from_raw("2026-02-03T12:00:00.123Z"),
        ..Default::default()
    }
}

fn status(msg: &str) -> Record {
    Record::RunStatus(RunStatus {
        run_id: "r".into(),
        ts: Timestamp::now(),
        status: RunStatusKind::Running,
        message: Some(msg.into()),
        ..Default::default()
    })
}

fn end() -> Record {
    Record::RunEnd(RunEnd {
        run_id: "r".into(),
        ts: Timestamp::now(),
        outcome: RunOutcome::Completed,
        final_text: Some("done".into()),
        ..Default::default()
    })
}

fn messages(path: &Path) -> Vec<String> {
    read_run(path)
        .unwrap()
        .records
        .iter()
        .filter_map(|r| match &r.parsed.value {
            Record::RunStatus(s) => s.message.clone(),
            _ => None,
        })
        .collect()
}

#[test]
fn header_first_and_only_once() {
    let dir = tempfile::tempdir().unwrap();
    let w = RunWriter::create(dir.path(), &header("r"), WriterOptions::default()).unwrap();
    assert_eq!(w.path(), dir.path().join("2026/02/03/r.jsonl"));
    let err = w.append(&Record::Header(header("r"))).unwrap_err();
    assert!(matches!(err, JsonlError::SecondHeader { .. }), "{err}");
    w.append(&status("a")).unwrap();
    let path = w.path().to_owned();
    drop(w);

    // A file whose only line is a torn header fragment takes a header again after sealing.
    let torn = dir.path().join("t.jsonl");
    fs::write(&torn, br#"{"type":"header","schema_ver"#).unwrap();
    let w = RunWriter::open_append(&torn, WriterOptions::default()).unwrap();
    let err = w.append(&status("x")).unwrap_err();
    assert!(matches!(err, JsonlError::HeaderFirst { .. }), "{err}");
    w.append(&Record::Header(header("t"))).unwrap();
    drop(w);
    let run = read_run(&torn).unwrap();
    assert_eq!(run.records.len(), 1);
    assert_eq!(run.damage.len(), 1);
    assert_eq!(run.damage[0].kind, DamageKind::SealedFragment);

    assert!(matches!(
        RunWriter::create(dir.path(), &header("r"), WriterOptions::default()),
        Err(JsonlError::AlreadyExists { .. })
    ));
    assert_eq!(messages(&path), ["a"]);
}

#[cfg(unix)]
#[test]
fn private_file_mode() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let opts = WriterOptions {
        file_mode: Some(0o600),
        ..WriterOptions::default()
    };
    let w = RunWriter::create(dir.path(), &header("r"), opts).unwrap();
    let mode = fs::metadata(w.path()).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn unsafe_run_ids_touch_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    for id in ["../evil", "a/b", ".hidden", ""] {
        let err = RunWriter::create(&root, &header(id), WriterOptions::default()).unwrap_err();
        assert!(matches!(err, JsonlError::UnsafeRunId { .. }), "{err}");
    }
    assert!(!root.exists());
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn every_durability_mode_reads_back_in_order() {
    for durability in [
        Durability::Buffered,
        Durability::Flush,
        Durability::SyncData,
        Durability::group_commit(),
        Durability::GroupCommit {
            max_delay: Duration::from_millis(2),
            max_batch: 4,
        },
        Durability::GroupCommit {
            max_delay: Duration::ZERO,
            max_batch: 1,
        },
    ] {
        let dir = tempfile::tempdir().unwrap();
        let opts = WriterOptions {
            durability,
            buffer_size: 256,
            ..WriterOptions::default()
        };
        let w = RunWriter::create(dir.path(), &header("r"), opts).unwrap();
        let want: Vec<String> = (0..20).map(|i| format!("m{i}")).collect();
        for m in &want {
            w.append(&status(m)).unwrap();
        }
        let path = w.path().to_owned();
        if durability == Durability::Buffered {
            // Whole lines only: what is on disk before the flush reads without damage.
            let run = read_run(&path).unwrap();
            assert!(run.damage.is_empty());
            assert!(run.records.len() < 21);
        }
        w.close().unwrap();
        assert_eq!(messages(&path), want, "{durability:?}");
        assert!(read_run(&path).unwrap().damage.is_empty());
    }
}

#[test]
fn group_commit_from_eight_threads() {
    let dir = tempfile::tempdir().unwrap();
    let opts = WriterOptions::with_durability(Durability::group_commit());
    let w = Arc::new(RunWriter::create(dir.path(), &header("r"), opts).unwrap());
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let w = Arc::clone(&w);
            std::thread::spawn(move || {
                for i in 0..40 {
                    w.append(&status(&format!("{t}:{i}"))).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(w.records_written(), 1 + 8 * 40);
    let path = w.path().to_owned();
    drop(w);
    let got = messages(&path);
    assert_eq!(got.len(), 320);
    for t in 0..8 {
        let seq: Vec<u32> = got
            .iter()
            .filter_map(|m| m.strip_prefix(&format!("{t}:")))
            .map(|n| n.parse().unwrap())
            .collect();
        assert_eq!(seq, (0..40).collect::<Vec<_>>(), "thread {t} order");
    }
}

/// Torn fragments a crash can leave: cut between ASCII bytes, inside a multi-byte character
/// (the runtime writes non-ASCII text), and after a byte that is not UTF-8 at all.
const TORN_FRAGMENTS: [&[u8]; 4] = [
    br#"{"type":"run.status","run_id":"r","ts":"2026-02-03T12:0"#,
    b"{\"type\":\"run.start\",\"run_id\":\"r\",\"session_id\":\"s\",\"ts\":\"2026-02-03T12:00:00.456Z\",\"input\":{\"type\":\"text\",\"text\":\"\xE6\x97",
    b"{\"type\":\"run.status\",\"run_id\":\"r\",\"message\":\"\xF0\x9F\x98",
    b"{\"type\":\"run.status\",\"run_id\":\"r\",\"message\":\"caf\xE9 au",
];

#[test]
fn reopen_after_torn_tail_seals_and_appends_cleanly() {
    for fragment in TORN_FRAGMENTS {
        let shown = String::from_utf8_lossy(fragment);
        let dir = tempfile::tempdir().unwrap();
        let w = RunWriter::create(dir.path(), &header("r"), WriterOptions::default()).unwrap();
        w.append(&status("before")).unwrap();
        let path = w.path().to_owned();
        drop(w);
        OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(fragment)
            .unwrap();
        let before = fs::read(&path).unwrap();
        let fragment_at = (before.len() - fragment.len()) as u64;
        assert!(needs_seal(&path).unwrap());
        let torn: Vec<_> = read_run(&path)
            .unwrap()
            .damage
            .iter()
            .map(|d| (d.kind, d.offset))
            .collect();
        assert_eq!(torn, [(DamageKind::TornTail, fragment_at)], "{shown}");

        let w = RunWriter::open_append(&path, WriterOptions::default()).unwrap();
        w.append(&status("after")).unwrap();
        w.append(&end()).unwrap();
        drop(w);

        let after = fs::read(&path).unwrap();
        assert!(after.starts_with(&before), "history is never rewritten");
        assert_eq!(after[before.len()], b'\n');
        let run = read_run(&path).unwrap();
        assert_eq!(messages(&path), ["before", "after"], "{shown}");
        // The sealed fragment is one damage report, whatever its bytes.
        let damage: Vec<_> = run.damage.iter().map(|d| (d.kind, d.offset)).collect();
        assert_eq!(
            damage,
            [(DamageKind::SealedFragment, fragment_at)],
            "{shown}"
        );
        assert_eq!(run.damage[0].len as usize, fragment.len());
        if std::str::from_utf8(fragment).is_err() {
            assert!(
                run.damage[0].message.contains("U+FFFD"),
                "{}",
                run.damage[0].message
            );
        }
        assert!(!needs_seal(&path).unwrap());
        assert!(terminal_state(&path).unwrap().has_end());
    }
}

#[test]
fn nul_padding_is_sealed_and_followed_records_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let w = RunWriter::create(dir.path(), &header("r"), WriterOptions::default()).unwrap();
    w.append(&status("a")).unwrap();
    let path = w.path().to_owned();
    drop(w);
    OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(&[0u8; 100])
        .unwrap();
    assert!(seal_torn_tail(&path).unwrap());
    assert!(!seal_torn_tail(&path).unwrap());
    let w = RunWriter::open_append(&path, WriterOptions::default()).unwrap();
    w.append(&status("b")).unwrap();
    drop(w);
    let run = read_run(&path).unwrap();
    assert_eq!(messages(&path), ["a", "b"]);
    let kinds: Vec<_> = run.damage.iter().map(|d| d.kind).collect();
    assert_eq!(kinds, [DamageKind::NulRun]);
}

#[test]
fn one_writer_per_file() {
    let dir = tempfile::tempdir().unwrap();
    let w = RunWriter::create(dir.path(), &header("r"), WriterOptions::default()).unwrap();
    let path = w.path().to_owned();
    let before = fs::read(&path).unwrap();
    let quick = WriterOptions {
        lock_wait: Duration::ZERO,
        ..WriterOptions::default()
    };
    let err = RunWriter::open_append(&path, quick.clone()).unwrap_err();
    assert!(err.is_locked());
    assert!(err.to_string().contains(&*path.to_string_lossy()), "{err}");
    assert!(matches!(
        seal_torn_tail(&path),
        Err(JsonlError::Locked { .. })
    ));
    assert!(matches!(
        compress_run(&path),
        Err(JsonlError::Locked { .. })
    ));
    assert!(is_locked(&path).unwrap());
    assert_eq!(
        fs::read(&path).unwrap(),
        before,
        "the refused writer changed nothing"
    );
    // Readers never lock and never block the writer.
    let head = read_header(&path).unwrap();
    assert!(head.header.is_some());
    w.append(&status("still writing")).unwrap();
    drop(w);
    assert!(!is_locked(&path).unwrap());
    let w2 = RunWriter::open_append(&path, quick).unwrap();
    w2.append(&end()).unwrap();
    assert_eq!(messages(&path), ["still writing"]);
}

#[test]
fn a_lock_error_names_the_holder_pid() {
    let dir = tempfile::tempdir().unwrap();
    let w = RunWriter::create(dir.path(), &header("r"), WriterOptions::default()).unwrap();
    let quick = WriterOptions {
        lock_wait: Duration::ZERO,
        ..WriterOptions::default()
    };
    let err = RunWriter::open_append(w.path(), quick).unwrap_err();
    let JsonlError::Locked { holder_pid, .. } = &err else {
        panic!("{err}");
    };
    let sealed = seal_torn_tail(w.path()).unwrap_err();
    let archived = compress_run(w.path()).unwrap_err();
    if Path::new("/proc/locks").exists() {
        let me = std::process::id();
        assert_eq!(*holder_pid, Some(me));
        assert!(err.to_string().ends_with(&format!("(pid {me})")), "{err}");
        for e in [sealed, archived] {
            assert!(
                matches!(e, JsonlError::Locked { holder_pid: Some(p), .. } if p == me),
                "{e}"
            );
        }
    }
}

/// Waits until this process has `path` open through a descriptor other than those listed in
/// `before` (Linux: `/proc/self/fd`).
fn wait_until_opened(path: &Path, before: &[std::path::PathBuf]) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let open: Vec<_> = fs::read_dir("/proc/self/fd")
            .unwrap()
            .flatten()
            .filter(|e| fs::read_link(e.path()).is_ok_and(|t| t == path))
            .map(|e| e.path())
            .collect();
        if open.iter().any(|fd| !before.contains(fd)) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "never opened");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
#[cfg(target_os = "linux")]
fn a_writer_waiting_for_the_lock_of_a_file_moved_away_refuses_it() {
    // gc moves a run into the trash while holding its lock; a writer that opened the run just
    // before and waits for the lock must not append to the moved file.
    let dir = tempfile::tempdir().unwrap();
    let holder = RunWriter::create(dir.path(), &header("r"), WriterOptions::default()).unwrap();
    let path = holder.path().to_owned();
    let fds: Vec<_> = fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter(|e| fs::read_link(e.path()).is_ok_and(|t| t == path))
        .map(|e| e.path())
        .collect();
    let waiting = {
        let path = path.clone();
        std::thread::spawn(move || {
            let patient = WriterOptions {
                lock_wait: Duration::from_secs(30),
                ..WriterOptions::default()
            };
            RunWriter::open_append(&path, patient).map(|w| w.append(&status("lost?")))
        })
    };
    wait_until_opened(&path, &fds);
    let moved = dir.path().join("trash.jsonl");
    fs::rename(&path, &moved).unwrap();
    let before = fs::read(&moved).unwrap();
    drop(holder);
    let err = waiting.join().unwrap().unwrap_err();
    assert!(
        matches!(&err, JsonlError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound),
        "{err}"
    );
    assert!(err.to_string().contains("moved or replaced"), "{err}");
    assert_eq!(
        fs::read(&moved).unwrap(),
        before,
        "nothing written to the moved file"
    );
    assert!(!is_locked(&moved).unwrap());
}

#[test]
fn archived_files_are_not_appended_to() {
    let dir = tempfile::tempdir().unwrap();
    let w = RunWriter::create(dir.path(), &header("r"), WriterOptions::default()).unwrap();
    w.append(&end()).unwrap();
    let path = w.path().to_owned();
    drop(w);
    let zst = compress_run(&path).unwrap();
    assert!(!path.exists());
    assert!(matches!(
        RunWriter::open_append(&zst, WriterOptions::default()),
        Err(JsonlError::Compressed { .. })
    ));
    assert!(matches!(
        compress_run(&zst),
        Err(JsonlError::Compressed { .. })
    ));
    assert!(matches!(
        terminal_state(&zst).unwrap().end,
        RunEndState::Ended { .. }
    ));
}

#[test]
fn control_characters_and_nul_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let w = RunWriter::create(dir.path(), &header("r"), WriterOptions::default()).unwrap();
    let raw_output = b"ok\0\x01\x1b[31mred\xff\xfe\n\r\t\xe2\x80\xa8";
    let text = session_jsonl::text::lossy_text(raw_output).into_owned();
    w.append(&Record::ToolOutput(ToolOutput {
        run_id: "r".into(),
        ts: Timestamp::now(),
        tool: "shell".into(),
        tool_call_id: "c".into(),
        result_raw: text.clone(),
        ..Default::default()
    }))
    .unwrap();
    let path = w.path().to_owned();
    drop(w);
    let bytes = fs::read(&path).unwrap();
    assert!(std::str::from_utf8(&bytes).is_ok());
    assert!(!bytes.contains(&0) && !bytes.contains(&0x1b));
    assert_eq!(bytes.iter().filter(|&&b| b == b'\n').count(), 2);
    let run = read_run(&path).unwrap();
    assert!(run.damage.is_empty());
    let Record::ToolOutput(out) = &run.records[1].parsed.value else {
        panic!("not a tool.output")
    };
    assert_eq!(out.result_raw, text);
}

#[test]
fn long_header_is_found_from_its_first_64_kib() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = header("long");
    h.prompts = Some(Prompts {
        system: Some("あ".repeat(40_000)),
        ..Default::default()
    });
    let w = RunWriter::create(dir.path(), &h, WriterOptions::default()).unwrap();
    w.append(&end()).unwrap();
    let path = w.path().to_owned();
    drop(w);
    let head = read_header(&path).unwrap();
    assert!(!head.complete && head.header.is_none());
    assert!(head.is_header() && head.damage.is_empty());
    assert_eq!(head.facts.run_id.as_deref(), Some("long"));
    assert_eq!(head.facts.session_id.as_deref(), Some("s"));
    assert_eq!(head.facts.started_at, Some(h.started_at.clone()));
    let run = read_run(&path).unwrap();
    assert!(run.damage.is_empty() && run.records.len() == 2);
}

#[test]
fn follower_waits_for_half_written_lines() {
    let dir = tempfile::tempdir().unwrap();
    let w = RunWriter::create(dir.path(), &header("r"), WriterOptions::default()).unwrap();
    let path = w.path().to_owned();
    let mut f = Follower::open(&path, FollowOptions::default()).unwrap();
    assert!(matches!(f.poll().unwrap(), Some(Item::Record(_))));
    assert!(f.poll().unwrap().is_none());
    drop(w);

    // A line arriving in two writes is not damage in between.
    let line = session_schema::to_line(&status("split")).unwrap();
    let mut raw = OpenOptions::new().append(true).open(&path).unwrap();
    raw.write_all(&line[..20]).unwrap();
    assert!(f.poll().unwrap().is_none());
    raw.write_all(&line[20..]).unwrap();
    let item = f.wait(Duration::from_secs(5)).unwrap().unwrap();
    assert_eq!(
        item.as_record().unwrap().parsed.value,
        status_with_ts(&line)
    );

    // A writer on another thread; the follower sees every record and stops after run.end.
    let writer = std::thread::spawn({
        let path = path.clone();
        move || {
            let w = RunWriter::open_append(&path, WriterOptions::default()).unwrap();
            for i in 0..5 {
                w.append(&status(&format!("t{i}"))).unwrap();
                std::thread::sleep(Duration::from_millis(5));
            }
            w.append(&end()).unwrap();
        }
    });
    let rest: Vec<Item> = f.by_ref().map(Result::unwrap).collect();
    writer.join().unwrap();
    assert_eq!(rest.len(), 6);
    assert!(rest.iter().all(|i| i.as_record().is_some()));
    assert!(f.ended());

    // A torn tail is damage only once the input is declared complete.
    raw.write_all(b"{\"type\":\"run.st").unwrap();
    assert!(f.poll().unwrap().is_none());
    let tail = f.finish().unwrap();
    assert_eq!(tail.len(), 1);
    assert_eq!(tail[0].as_damage().unwrap().kind, DamageKind::TornTail);
}

#[test]
fn follower_reports_a_file_that_shrank() {
    let dir = tempfile::tempdir().unwrap();
    let w = RunWriter::create(dir.path(), &header("r"), WriterOptions::default()).unwrap();
    w.append(&status("a")).unwrap();
    let path = w.path().to_owned();
    drop(w);
    let mut f = Follower::open(&path, FollowOptions::default()).unwrap();
    while f.poll().unwrap().is_some() {}
    OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(10)
        .unwrap();
    let err = f.poll().unwrap_err();
    assert!(matches!(err, JsonlError::Read { .. }), "{err}");
    assert!(err.to_string().contains("shrank"), "{err}");
}

fn status_with_ts(line: &[u8]) -> Record {
    session_schema::parse_record(line).unwrap().value
}
