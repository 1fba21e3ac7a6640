//! What the run index pays to read run files: a rebuild over many small runs allocates read
//! buffers the size of the runs, not one `read_size` (4 MiB) buffer per file.

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
fn reindex_allocates_read_buffers_proportional_to_the_runs() {
    let dir = tempfile::tempdir().unwrap();
    let content: u64 = (0..60).map(|n| write_run(dir.path(), n)).sum();
    let store = StateStore::open(dir.path()).unwrap();
    let before = read_buffer_bytes_on_this_thread();
    let report = store.reindex().unwrap();
    let allocated = read_buffer_bytes_on_this_thread() - before;
    assert_eq!(
        store.list_runs(&Default::default()).unwrap().runs.len(),
        60,
        "{report:?}"
    );
    // Each file is read once, with a buffer one byte longer than the file (before the fix:
    // 60 × 4 MiB).
    assert_eq!(allocated, content + 60);
}
