//! What the run index pays to read run files: a rebuild over many small runs allocates one read
//! buffer per reader thread, the size of the largest run it reads, not one per file.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use session_jsonl::{Durability, RunWriter, WriterOptions, read_buffer_bytes_on_this_thread};
use session_schema::{Header, Record, RunStatus, RunStatusKind, Timestamp};
use session_state::StateStore;

fn write_run(root: &Path, n: u32) -> u64 {
    let run_id = format!("00000000-0000-4000-8000-{n:012}");
    let header = Header {
        schema_version: 1,
        run_id: run_id.clone(),
        session_id: Some(format!("s-{}", n % 3)),
        started_at: Timestamp::from_raw("2026-11-02T10:00:00.000Z"),
        ..Default::default()
    };
    let w = RunWriter::create(
        root,
        &header,
        WriterOptions::with_durability(Durability::Buffered),
    )
    .unwrap();
    for i in 0..10 {
        w.append(&Record::RunStatus(RunStatus {
            run_id: run_id.clone(),
            ts: Timestamp::from_raw("2026-11-02T10:00:01.000Z"),
            status: RunStatusKind::Running,
            message: Some(format!("step {i}")),
            ..Default::default()
        }))
        .unwrap();
    }
    let path = w.path().to_owned();
    w.close().unwrap();
    std::fs::metadata(path).unwrap().len()
}

#[test]
fn reindex_allocates_one_read_buffer_per_reader_thread_not_per_file() {
    let dir = tempfile::tempdir().unwrap();
    let sizes: Vec<u64> = (0..60).map(|n| write_run(dir.path(), n)).collect();
    let largest = *sizes.iter().max().unwrap();
    let content: u64 = sizes.iter().sum();
    let store = StateStore::open(dir.path()).unwrap();
    let before = read_buffer_bytes_on_this_thread();
    let report = store.reindex().unwrap();
    let allocated = read_buffer_bytes_on_this_thread() - before;
    assert_eq!(
        store.list_runs(&Default::default()).unwrap().runs.len(),
        60,
        "{report:?}"
    );
    // The read pool's workers (counted here: their tallies come back to this thread) each
    // grow one buffer to the largest file they read, plus one byte (before: one buffer the
    // size of each file, `content + 60`; before that 60 × 4 MiB).
    let workers = session_state::read_pool::max_threads(60) as u64;
    assert!(allocated > 0);
    assert!(
        allocated <= workers * (largest + 1),
        "{allocated} bytes of read buffer for {workers} reader(s), largest file {largest}"
    );
    assert!(allocated < content / 10, "{allocated} of {content}");
}
