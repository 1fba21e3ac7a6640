//! Resuming a reader from a checkpoint gives what a reader from offset 0 gives after it, and a
//! file that is no longer the one checkpointed is not resumed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::Path;

use session_jsonl::{Item, Reader, ReaderCheckpoint, ReaderOptions, count_file_reads};

const HEADER: &str =
    r#"{"type":"header","schema_version":1,"run_id":"r1","started_at":"2026-02-03T12:00:00.000Z"}"#;

fn status(i: usize) -> String {
    format!(
        r#"{{"type":"run.status","run_id":"r1","ts":"2026-02-03T12:00:{:02}.000Z","status":"running","pad":"{}"}}"#,
        i % 60,
        "x".repeat(i % 700)
    )
}

/// Items as comparable text: kind, offset, line and the record or damage message.
fn shown(items: &[Item]) -> Vec<String> {
    items
        .iter()
        .map(|i| match i {
            Item::Record(r) => format!("record {} {} {:?}", r.offset, r.line, r.parsed.value),
            Item::Damage(d) => format!("damage {} {} {} {}", d.kind, d.offset, d.line, d.message),
        })
        .collect()
}

/// Reads `path` holding its last line: the items of complete lines and the checkpoint.
fn held(reader: &mut Reader<session_jsonl::RunFileReader>) -> (Vec<Item>, ReaderCheckpoint) {
    reader.hold_last_line(true);
    let items: Vec<Item> = reader.by_ref().collect::<Result<_, _>>().unwrap();
    let cp = reader
        .checkpoint()
        .expect("a checkpoint at the last complete line");
    (items, cp)
}

fn full(path: &Path) -> Vec<Item> {
    Reader::open(path)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn append(path: &Path, bytes: &[u8]) {
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
}

#[test]
fn a_resumed_reader_continues_exactly_where_a_full_read_would() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r1.jsonl");
    let mut body = format!("{HEADER}\n");
    for i in 0..3000 {
        body.push_str(&status(i));
        body.push('\n');
    }
    // A torn tail: the checkpoint stays before it.
    body.push_str(r#"{"type":"run.status","run_id":"r1","#);
    std::fs::write(&path, &body).unwrap();
    // A small read size so that the buffer moves on many times.
    let opts = ReaderOptions {
        read_size: 64 << 10,
        ..ReaderOptions::default()
    };
    let mut reader = Reader::open_with(&path, opts.clone()).unwrap();
    reader.track_checkpoints();
    let (before, cp) = held(&mut reader);
    let torn_at = body.rfind('\n').unwrap() as u64 + 1;
    assert_eq!(cp.offset, torn_at);
    assert_eq!(cp.line, 3002);
    assert_eq!(cp.header, session_jsonl::HeaderProgress::Seen);
    assert_eq!((cp.head_len, cp.guard_len), (4096, 4096));
    // Releasing the held line decides it as a reader that never held would.
    reader.hold_last_line(false);
    let tail: Vec<Item> = reader.by_ref().collect::<Result<_, _>>().unwrap();
    let mut all = before.clone();
    all.extend(tail);
    assert_eq!(shown(&all), shown(&full(&path)));

    // The torn line completes, then a damaged line, a second header and more records.
    let mut more = String::from("\"ts\":\"2026-02-03T12:01:00.000Z\",\"status\":\"running\"}\n");
    more.push_str("garbage\n");
    more.push_str(HEADER);
    more.push('\n');
    for i in 0..5 {
        more.push_str(&status(i));
        more.push('\n');
    }
    append(&path, more.as_bytes());
    let counter = count_file_reads();
    let mut resumed = Reader::resume_run_file(&path, opts.clone(), &cp)
        .unwrap()
        .expect("same file, grown");
    let (after, cp2) = held(&mut resumed);
    resumed.hold_last_line(false);
    let rest: Vec<Item> = resumed.by_ref().collect::<Result<_, _>>().unwrap();
    assert!(rest.is_empty());
    assert_eq!(
        counter.total_bytes(),
        4096 + 4096 + std::fs::metadata(&path).unwrap().len() - torn_at,
        "guards plus the bytes after the checkpoint"
    );
    drop(counter);
    let whole = full(&path);
    let expected: Vec<Item> = whole
        .iter()
        .filter(|i| match i {
            Item::Record(r) => r.offset >= cp.offset,
            Item::Damage(d) => d.offset >= cp.offset,
        })
        .cloned()
        .collect();
    assert_eq!(shown(&after), shown(&expected));
    assert!(
        shown(&after)
            .iter()
            .any(|s| s.starts_with("damage duplicate_header"))
    );
    assert_eq!(cp2.offset, std::fs::metadata(&path).unwrap().len());

    // Nothing new: resuming from the new checkpoint yields nothing.
    let mut idle = Reader::resume_run_file(&path, opts.clone(), &cp2)
        .unwrap()
        .unwrap();
    let (none, cp3) = held(&mut idle);
    assert!(none.is_empty());
    assert_eq!(cp3, cp2);
}

#[test]
fn a_replaced_truncated_or_rewritten_file_is_not_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r1.jsonl");
    let mut body = format!("{HEADER}\n");
    for i in 0..200 {
        body.push_str(&status(i));
        body.push('\n');
    }
    std::fs::write(&path, &body).unwrap();
    let mut reader = Reader::open(&path).unwrap();
    reader.track_checkpoints();
    let (_, cp) = held(&mut reader);
    assert_eq!(cp.offset, body.len() as u64);
    let resumable = |bytes: &str| {
        std::fs::write(&path, bytes).unwrap();
        Reader::resume_run_file(&path, ReaderOptions::default(), &cp)
            .unwrap()
            .is_some()
    };
    assert!(resumable(&format!("{body}{}\n", status(1))));
    // Truncated.
    assert!(!resumable(&body[..body.len() - 10]));
    // Another header of the same length.
    assert!(!resumable(&body.replacen("\"r1\"", "\"r2\"", 1)));
    // A line just before the checkpoint rewritten.
    let cut = body.len() - 20;
    assert!(!resumable(&format!("{}{}", &body[..cut], "y".repeat(20))));
    // An archive is never resumed.
    let zst = dir.path().join("r1.jsonl.zst");
    std::fs::write(&zst, b"not read").unwrap();
    assert!(
        Reader::resume_run_file(&zst, ReaderOptions::default(), &cp)
            .unwrap()
            .is_none()
    );
}

#[test]
fn no_checkpoint_without_tracking_or_inside_an_oversized_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r1.jsonl");
    std::fs::write(&path, format!("{HEADER}\n{}", "z".repeat(300))).unwrap();
    let mut plain = Reader::open(&path).unwrap();
    plain.hold_last_line(true);
    assert_eq!(plain.by_ref().count(), 1);
    assert!(plain.checkpoint().is_none(), "not tracking");
    let mut small = Reader::open_with(
        &path,
        ReaderOptions {
            max_line_len: 100,
            ..ReaderOptions::default()
        },
    )
    .unwrap();
    small.track_checkpoints();
    small.hold_last_line(true);
    assert_eq!(small.by_ref().count(), 1);
    assert!(small.checkpoint().is_none(), "skipping an oversized line");
}
