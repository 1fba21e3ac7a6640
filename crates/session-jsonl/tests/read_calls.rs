//! `read` calls per run file: a reader that knows the file's length (the listing's size, or
//! the `fstat` of [`Reader::open_with`]) reads a small file with one `read`, not a second one
//! that returns 0, and still reads a file that grew since it was looked at to its real end.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};

use session_jsonl::{Item, Reader, ReaderOptions, count_file_reads};

const HEADER: &str =
    r#"{"type":"header","schema_version":1,"run_id":"r1","started_at":"2026-02-03T12:00:00.000Z"}"#;
const STATUS: &str =
    r#"{"type":"run.status","run_id":"r1","ts":"2026-02-03T12:00:01.000Z","status":"running"}"#;

fn run_file(dir: &Path, lines: usize, torn: bool) -> PathBuf {
    let path = dir.join("r1.jsonl");
    let mut text = format!("{HEADER}\n");
    for _ in 0..lines {
        text.push_str(STATUS);
        text.push('\n');
    }
    if torn {
        text.push_str(r#"{"type":"run.st"#);
    }
    std::fs::write(&path, text).unwrap();
    path
}

/// `(records, damage kinds)` of a reader's items.
fn summary(items: impl Iterator<Item = std::io::Result<Item>>) -> (usize, Vec<String>) {
    let mut records = 0;
    let mut damage = Vec::new();
    for item in items {
        match item.unwrap() {
            Item::Record(_) => records += 1,
            Item::Damage(d) => damage.push(d.kind.as_str().to_owned()),
        }
    }
    (records, damage)
}

#[test]
fn a_small_file_opened_by_path_costs_one_read_call() {
    let dir = tempfile::tempdir().unwrap();
    let path = run_file(dir.path(), 20, false);
    let len = std::fs::metadata(&path).unwrap().len();
    let counter = count_file_reads();
    let reader = Reader::open_with(&path, ReaderOptions::default()).unwrap();
    assert_eq!(reader.opened_len(), Some(len));
    let (records, damage) = summary(reader);
    assert_eq!((records, damage.len()), (21, 0));
    let reads = counter.reads();
    assert_eq!(reads.len(), 1);
    assert_eq!(reads[0].bytes, len);
    assert_eq!(reads[0].read_calls, 1, "no second read to find the end");
}

#[test]
fn a_file_read_with_its_listed_size_and_a_held_last_line_costs_one_read_call() {
    let dir = tempfile::tempdir().unwrap();
    let path = run_file(dir.path(), 20, true);
    let len = std::fs::metadata(&path).unwrap().len();
    let counter = count_file_reads();
    let mut reader =
        Reader::open_reusing(&path, ReaderOptions::default(), Some(len), Vec::new()).unwrap();
    reader.hold_last_line(true);
    let (held, none) = summary(reader.by_ref());
    assert_eq!((held, none.len()), (21, 0));
    reader.hold_last_line(false);
    let (rest, damage) = summary(reader.by_ref());
    assert_eq!(rest, 0);
    assert_eq!(damage, ["torn_tail"]);
    assert_eq!(reader.bytes_read(), len);
    assert_eq!(counter.reads()[0].read_calls, 1);
}

#[test]
fn a_file_that_grew_after_its_listing_is_read_to_its_real_end() {
    let dir = tempfile::tempdir().unwrap();
    let path = run_file(dir.path(), 20, false);
    let listed = std::fs::metadata(&path).unwrap().len();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    for _ in 0..5 {
        writeln!(f, "{STATUS}").unwrap();
    }
    drop(f);
    let len = std::fs::metadata(&path).unwrap().len();
    let counter = count_file_reads();
    let reader =
        Reader::open_reusing(&path, ReaderOptions::default(), Some(listed), Vec::new()).unwrap();
    let (records, damage) = summary(reader);
    assert_eq!((records, damage.len()), (26, 0));
    assert_eq!(counter.total_bytes(), len);
    // A file that shrank: read to its end too.
    let short = run_file(dir.path(), 3, false);
    let reader =
        Reader::open_reusing(&short, ReaderOptions::default(), Some(listed), Vec::new()).unwrap();
    assert_eq!(summary(reader), (4, Vec::new()));
}

#[test]
fn a_file_longer_than_the_read_size_ends_with_its_last_short_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = run_file(dir.path(), 200, false);
    let len = std::fs::metadata(&path).unwrap().len();
    let opts = ReaderOptions {
        read_size: 4096,
        ..ReaderOptions::default()
    };
    assert!(!len.is_multiple_of(4096) && len > 4 * 4096, "{len}");
    let counter = count_file_reads();
    let reader = Reader::open_with(&path, opts).unwrap();
    assert_eq!(summary(reader), (201, Vec::new()));
    assert_eq!(counter.total_bytes(), len);
    // Full reads of the buffer, then the short one that reaches the fstat's length.
    let calls = counter.reads()[0].read_calls;
    assert!(
        calls <= len.div_ceil(4096) + 1,
        "{calls} read calls for {len} bytes"
    );
}
