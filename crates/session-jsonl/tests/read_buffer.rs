//! The read buffer follows the input, not the configured read size: reading many small run
//! files costs buffer bytes proportional to their content (a 3 KB file does not zero-fill a
//! 4 MiB buffer), and a large input still grows the buffer to the read size and reads right.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use session_jsonl::{
    Durability, INITIAL_READ_BUFFER, Item, Reader, ReaderOptions, RunWriter, WriterOptions,
    read_buffer_bytes_on_this_thread, read_run,
};
use session_schema::{Header, Record, RunStatus, RunStatusKind, Timestamp};

fn small_run(root: &Path, n: usize) -> PathBuf {
    let id = format!("run-{n:04}");
    let h = Header {
        schema_version: 1,
        run_id: id.clone(),
        session_id: Some("s".into()),
        started_at: Timestamp::from_raw("2026-02-03T12:00:00.000Z"),
        ..Default::default()
    };
    let w = RunWriter::create(
        root,
        &h,
        WriterOptions::with_durability(Durability::Buffered),
    )
    .unwrap();
    for i in 0..20 {
        w.append(&Record::RunStatus(RunStatus {
            run_id: id.clone(),
            ts: Timestamp::from_raw("2026-02-03T12:00:01.000Z"),
            status: RunStatusKind::Running,
            message: Some(format!("step {i} of a small run")),
            ..Default::default()
        }))
        .unwrap();
    }
    let p = w.path().to_owned();
    w.close().unwrap();
    p
}

#[test]
fn reading_small_run_files_allocates_buffers_the_size_of_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let paths: Vec<PathBuf> = (0..100).map(|n| small_run(dir.path(), n)).collect();
    let content: u64 = paths
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    assert!(content > 100 * 1000, "{content}");
    let before = read_buffer_bytes_on_this_thread();
    let mut records = 0;
    for p in &paths {
        let read = read_run(p).unwrap();
        assert!(read.damage.is_empty(), "{:?}", read.damage);
        records += read.records.len();
    }
    let allocated = read_buffer_bytes_on_this_thread() - before;
    assert_eq!(records, 100 * 21);
    // One byte more than each file: exactly the content, nothing of the 4 MiB read size.
    assert_eq!(allocated, content + 100);
}

#[test]
fn a_source_of_unknown_length_starts_small_and_grows_to_the_read_size() {
    let line = b"{\"type\":\"header\",\"schema_version\":1,\"run_id\":\"r\",\"started_at\":\"2026-02-03T12:00:00.000Z\"}\n";
    let small: Vec<u8> = line.to_vec();
    let before = read_buffer_bytes_on_this_thread();
    let mut reader = Reader::new(&small[..], ReaderOptions::default());
    let items: Vec<Item> = reader.by_ref().collect::<Result<_, _>>().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(reader.buffer_capacity(), INITIAL_READ_BUFFER);
    assert_eq!(
        read_buffer_bytes_on_this_thread() - before,
        INITIAL_READ_BUFFER as u64
    );

    // 1 MiB of records, a 256 KiB read size: the buffer doubles up to the read size and
    // stops there.
    let read_size = 256 << 10;
    let mut big = line.to_vec();
    let status = b"{\"type\":\"run.status\",\"run_id\":\"r\",\"ts\":\"2026-02-03T12:00:01.000Z\",\"status\":\"running\"}\n";
    let count = (1 << 20) / status.len();
    for _ in 0..count {
        big.extend_from_slice(status);
    }
    let before = read_buffer_bytes_on_this_thread();
    let opts = ReaderOptions {
        read_size,
        ..ReaderOptions::default()
    };
    let mut reader = Reader::new(&big[..], opts);
    let mut n = 0;
    for item in reader.by_ref() {
        assert!(item.unwrap().as_record().is_some());
        n += 1;
    }
    assert_eq!(n, count + 1);
    assert_eq!(reader.buffer_capacity(), read_size);
    assert_eq!(
        read_buffer_bytes_on_this_thread() - before,
        read_size as u64
    );
}
