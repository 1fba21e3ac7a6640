//! The refresh of the run index reads a bounded number of bytes per file (head block and tail
//! probe), never a whole large file: such a file gets a partial row, which every reader that
//! answers with counts completes. Answers are those of an index that read every file whole.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};

use session_jsonl::count_file_reads;
use session_state::{
    IndexedRunOutcome, REFRESH_TAIL_PROBE, RowRead, RunGrouping, RunQuery, RunRow, StateStore,
};

const BIG_A: &str = "0b9f3f4e-6a53-4f5e-8f57-8c2f5e0d1a11";
const BIG_B: &str = "1c0a4a5f-7b64-4a6f-9a68-9d3a6f1e2b22";
const SMALL: &str = "2d1b5b60-8c75-4b70-8b79-ae4b7a2f3c33";

/// The most a first refresh may read of one file: head block and tail probe, each at most
/// the cap.
const PER_FILE: u64 = 2 * REFRESH_TAIL_PROBE;

fn header(run: &str, session: &str, at: &str) -> String {
    format!(
        r#"{{"type":"header","schema_version":1,"run_id":"{run}","session_id":"{session}","started_at":"{at}","model":{{"provider":"p","name":"m"}}}}"#
    )
}

fn start(run: &str, session: &str) -> String {
    format!(
        r#"{{"type":"run.start","run_id":"{run}","session_id":"{session}","ts":"2026-11-30T10:00:00.000Z","input":{{"type":"text","text":"do {run}"}},"ui_context":{{"workspace_root":"/w/{session}"}}}}"#
    )
}

fn request(run: &str, seq: usize, pad: &str) -> String {
    format!(
        r#"{{"type":"llm.request","run_id":"{run}","ts":"2026-11-30T10:01:00.000Z","seq":{seq},"model":{{"provider":"p","name":"m"}},"input":{{"messages":[{{"role":"user","content":"{pad}"}}],"tools":null,"tool_choice":"auto"}}}}"#
    )
}

fn response(run: &str, seq: usize) -> String {
    format!(
        r#"{{"type":"llm.response","run_id":"{run}","ts":"2026-11-30T10:02:00.000Z","seq":{seq},"output":{{"messages":[{{"role":"assistant","content":"ok"}}],"usage":{{"model":"m","input_tokens":{},"output_tokens":2,"total_tokens":{}}}}}}}"#,
        seq + 1,
        seq + 3
    )
}

fn status(run: &str, status: &str) -> String {
    format!(
        r#"{{"type":"run.status","run_id":"{run}","ts":"2026-11-30T10:03:00.000Z","status":"{status}"}}"#
    )
}

fn end(run: &str) -> String {
    format!(
        r#"{{"type":"run.end","run_id":"{run}","ts":"2026-11-30T10:04:00.000Z","outcome":"completed"}}"#
    )
}

/// Writes a run of `pairs` 1 MiB `llm.request` lines (each with a small `llm.response`),
/// ended or still open (last record a `run.status`). Returns the file.
fn big_run(root: &Path, run: &str, session: &str, at: &str, pairs: usize, ended: bool) -> PathBuf {
    let day = root.join(at[..10].replace('-', "/"));
    std::fs::create_dir_all(&day).unwrap();
    let path = day.join(format!("{run}.jsonl"));
    let pad = "x".repeat(1 << 20);
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    writeln!(f, "{}", header(run, session, at)).unwrap();
    writeln!(f, "{}", start(run, session)).unwrap();
    for i in 0..pairs {
        writeln!(f, "{}", request(run, i, &pad)).unwrap();
        writeln!(f, "{}", response(run, i)).unwrap();
    }
    writeln!(f, "{}", status(run, "running")).unwrap();
    if ended {
        writeln!(f, "{}", end(run)).unwrap();
    }
    f.flush().unwrap();
    path
}

/// A small ended run (read whole by any refresh).
fn small_run(root: &Path, run: &str, session: &str, at: &str, pairs: usize) -> PathBuf {
    let day = root.join(at[..10].replace('-', "/"));
    std::fs::create_dir_all(&day).unwrap();
    let path = day.join(format!("{run}.jsonl"));
    let mut body = format!("{}\n{}\n", header(run, session, at), start(run, session));
    for i in 0..pairs {
        body.push_str(&format!(
            "{}\n{}\n",
            request(run, i, "hi"),
            response(run, i)
        ));
    }
    body.push_str(&format!("{}\n", end(run)));
    std::fs::write(&path, body).unwrap();
    path
}

fn append(path: &Path, line: &str) {
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    writeln!(f, "{line}").unwrap();
}

/// `runs.partial` of every row, by file name, in name order.
fn partial_column(root: &Path) -> Vec<(String, i64)> {
    let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
    let mut stmt = conn
        .prepare("SELECT path, partial FROM runs ORDER BY path")
        .unwrap();
    let mut rows: Vec<(String, i64)> = stmt
        .query_map([], |r| {
            let p: String = r.get(0)?;
            Ok((p.rsplit('/').next().unwrap().to_owned(), r.get(1)?))
        })
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    rows.sort();
    rows
}

fn checkpoints(root: &Path) -> i64 {
    let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
    conn.query_row("SELECT count(*) FROM run_resume", [], |r| r.get(0))
        .unwrap()
}

/// An index in memory holding every run file of `root` read whole: the answers of an index
/// that never reads bounded.
fn whole_index(root: &Path) -> StateStore {
    let memory = StateStore::open_memory_index(root).unwrap();
    let files = session_jsonl::list_run_files(root).unwrap().files;
    let report = memory.index_files(&files, RowRead::Whole).unwrap();
    assert!(report.failed.is_empty() && report.partial.is_empty());
    memory
}

fn all_runs(store: &StateStore) -> Vec<RunRow> {
    store.list_runs(&RunQuery::default()).unwrap().runs
}

fn name(p: &str) -> String {
    format!("{p}.jsonl")
}

#[test]
fn a_first_refresh_reads_large_runs_bounded_and_a_page_completes_only_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let a = big_run(root, BIG_A, "sa", "2026-11-30T09:00:00.000Z", 40, true);
    let b = big_run(root, BIG_B, "sb", "2026-11-29T09:00:00.000Z", 40, false);
    small_run(root, SMALL, "sc", "2026-11-28T09:00:00.000Z", 3);
    let size_a = std::fs::metadata(&a).unwrap().len();
    assert!(size_a > 40 << 20 && std::fs::metadata(&b).unwrap().len() > 40 << 20);

    let store = StateStore::open(root).unwrap();
    let counter = count_file_reads();
    let report = store.index_runs().unwrap();
    let reads = counter.reads();
    drop(counter);
    assert_eq!((report.added, report.files_read), (3, 3), "{report:?}");
    for r in &reads {
        assert!(
            r.bytes <= PER_FILE,
            "{} read {} bytes",
            r.path.display(),
            r.bytes
        );
    }
    let total: u64 = reads.iter().map(|r| r.bytes).sum();
    assert!(total <= 3 * PER_FILE, "{total} bytes read");
    assert_eq!(
        partial_column(root),
        vec![(name(BIG_A), 1), (name(BIG_B), 1), (name(SMALL), 0)]
    );

    // A page holding only run A: its file is read whole, nothing else large.
    let query = RunQuery {
        session: Some("sa".to_owned()),
        ..RunQuery::default()
    };
    let counter = count_file_reads();
    let page = store.list_runs(&query).unwrap();
    let reads = counter.reads();
    drop(counter);
    let whole_a: u64 = reads.iter().filter(|r| r.path == a).map(|r| r.bytes).sum();
    assert_eq!(whole_a, size_a);
    assert!(
        reads.iter().all(|r| r.path == a || r.bytes <= PER_FILE),
        "{reads:?}"
    );
    assert_eq!(page.runs.len(), 1);
    let row = &page.runs[0];
    assert!(!row.partial);
    assert_eq!(
        (row.record_count, row.invocation_count, row.input_tokens),
        (84, 40, (1..=40).sum::<u64>())
    );
    assert_eq!(row.last_status.as_deref(), Some("running"));
    assert_eq!(row.outcome, IndexedRunOutcome::Completed);
    // Stored completed: the next page costs nothing; B stays partial.
    assert_eq!(
        partial_column(root),
        vec![(name(BIG_A), 0), (name(BIG_B), 1), (name(SMALL), 0)]
    );
    let counter = count_file_reads();
    assert_eq!(store.list_runs(&query).unwrap().runs, page.runs);
    assert_eq!(counter.total_bytes(), 0);
    drop(counter);

    // The whole listing equals that of an index that read every file whole.
    let whole = whole_index(root);
    assert_eq!(all_runs(&store), all_runs(&whole));
    // A rebuild reads bounded too and reports no change for what partial rows do not claim.
    let rebuilt = store.reindex().unwrap();
    assert!(rebuilt.changes.is_empty(), "{:?}", rebuilt.changes);
}

#[test]
fn every_reader_of_counts_answers_as_a_whole_read_index_does() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    big_run(root, BIG_A, "sa", "2026-11-30T09:00:00.000Z", 3, true);
    big_run(root, BIG_B, "sa", "2026-11-29T09:00:00.000Z", 3, false);
    small_run(root, SMALL, "sc", "2026-11-28T09:00:00.000Z", 3);
    StateStore::open(root).unwrap().index_runs().unwrap();
    let whole = whole_index(root);

    // A read-only store completes rows for the answer only.
    let read_only = StateStore::open_read_only(root).unwrap();
    let by_session = |s: &StateStore, q: &RunQuery, by: RunGrouping| {
        let t = s.run_totals(q, by).unwrap();
        (t.groups, t.all, t.duplicated)
    };
    let all = RunQuery::default();
    let totals = by_session(&read_only, &all, RunGrouping::Session);
    assert_eq!(totals, by_session(&whole, &all, RunGrouping::Session));
    assert_eq!(totals.1.invocations, 3 + 3 + 3);
    assert_eq!(
        read_only.runs_for_session("sa").unwrap(),
        whole.runs_for_session("sa").unwrap()
    );
    assert_eq!(all_runs(&read_only), all_runs(&whole));
    assert_eq!(
        partial_column(root),
        vec![(name(BIG_A), 1), (name(BIG_B), 1), (name(SMALL), 0)]
    );

    // The writable index stores what its readers completed.
    let store = StateStore::open(root).unwrap();
    let open = RunQuery {
        outcome: Some(IndexedRunOutcome::Open),
        ..RunQuery::default()
    };
    assert_eq!(
        by_session(&store, &open, RunGrouping::Model),
        by_session(&whole, &open, RunGrouping::Model)
    );
    assert_eq!(
        partial_column(root),
        vec![(name(BIG_A), 1), (name(BIG_B), 0), (name(SMALL), 0)]
    );
    assert_eq!(
        store.runs_for_session("sa").unwrap(),
        whole.runs_for_session("sa").unwrap()
    );
    assert_eq!(
        partial_column(root),
        vec![(name(BIG_A), 0), (name(BIG_B), 0), (name(SMALL), 0)]
    );
}

#[test]
fn the_most_complete_file_of_a_run_is_chosen_on_completed_counts() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    // The large file holds 16 records, its head block only 2. A small copy of the run in
    // another day directory holds 13: the large one must still be listed.
    let big = big_run(root, BIG_A, "sa", "2026-11-30T09:00:00.000Z", 6, true);
    let moved = small_run(root, BIG_A, "sa", "2026-11-29T09:00:00.000Z", 5);
    let store = StateStore::open(root).unwrap();
    store.index_runs().unwrap();
    let runs = all_runs(&store);
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].path, big);
    assert_eq!(runs[0].other_files, vec![moved.clone()]);
    assert_eq!(runs[0].record_count, 16);
    assert_eq!(runs, all_runs(&whole_index(root)));
}

#[test]
fn a_partial_open_run_that_grows_is_read_bounded_then_resumed_once_completed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let path = big_run(root, BIG_B, "sb", "2026-11-29T09:00:00.000Z", 2, false);
    let store = StateStore::open(root).unwrap();
    store.index_runs().unwrap();
    assert_eq!(partial_column(root), vec![(name(BIG_B), 1)]);
    assert_eq!(checkpoints(root), 0);

    // Grown while partial: read bounded again, the outcome from the new tail.
    append(&path, &status(BIG_B, "waiting"));
    let counter = count_file_reads();
    let report = store.index_runs().unwrap();
    assert_eq!((report.files_read, report.files_resumed), (1, 0));
    assert!(counter.max_bytes_per_file() <= PER_FILE);
    drop(counter);
    assert_eq!(partial_column(root), vec![(name(BIG_B), 1)]);

    // Completed by a listing: stored with the checkpoint of the open run.
    let row = all_runs(&store).remove(0);
    assert_eq!((row.partial, row.record_count), (false, 8));
    assert_eq!(row.last_status.as_deref(), Some("waiting"));
    assert_eq!(partial_column(root), vec![(name(BIG_B), 0)]);
    assert_eq!(checkpoints(root), 1);

    // Grown again: read on from the checkpoint, not bounded, not whole.
    let line = response(BIG_B, 7);
    append(&path, &line);
    let counter = count_file_reads();
    let report = store.index_runs().unwrap();
    let bytes = counter.total_bytes();
    drop(counter);
    assert_eq!((report.files_read, report.files_resumed), (1, 1));
    assert_eq!(bytes, 8192 + line.len() as u64 + 1);
    let row = all_runs(&store).remove(0);
    assert_eq!((row.partial, row.record_count), (false, 9));

    // Ended: resumed again, the row is the whole read's.
    append(&path, &end(BIG_B));
    let report = store.index_runs().unwrap();
    assert_eq!(report.files_resumed, 1);
    let rows = all_runs(&store);
    assert_eq!(rows[0].outcome, IndexedRunOutcome::Completed);
    assert_eq!(rows, all_runs(&whole_index(root)));
}

#[test]
fn a_version_8_index_gets_the_partial_mark_and_keeps_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    small_run(root, SMALL, "sc", "2026-11-28T09:00:00.000Z", 3);
    let store = StateStore::open(root).unwrap();
    store.index_runs().unwrap();
    let before = all_runs(&store);
    drop(store);
    let version = |c: &rusqlite::Connection| -> i64 {
        c.query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap()
    };
    let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
    assert_eq!(version(&conn), 12);
    conn.execute_batch(
        "DROP INDEX runs_partial; ALTER TABLE runs DROP COLUMN partial; PRAGMA user_version = 8;",
    )
    .unwrap();
    drop(conn);
    // Read-only: every stored row counts as read whole; nothing changes.
    let ro = StateStore::open_read_only(root).unwrap();
    assert_eq!(all_runs(&ro), before);
    drop(ro);
    let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
    assert_eq!(version(&conn), 8);
    drop(conn);
    // Writable: the column is added, the rows are kept as read whole (not read again).
    let store = StateStore::open(root).unwrap();
    assert_eq!(partial_column(root), vec![(name(SMALL), 0)]);
    let counter = count_file_reads();
    assert_eq!(store.index_runs().unwrap().files_read, 0);
    assert_eq!(all_runs(&store), before);
    assert_eq!(counter.total_bytes(), 0);
    drop(counter);
    let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
    assert_eq!(version(&conn), 12);
}

#[test]
fn stats_from_running_totals_count_partial_rows_as_their_whole_files() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    big_run(root, BIG_A, "sa", "2026-11-30T09:00:00.000Z", 3, true);
    big_run(root, BIG_B, "sb", "2026-11-29T09:00:00.000Z", 4, false);
    small_run(root, SMALL, "sc", "2026-11-28T09:00:00.000Z", 3);
    let store = StateStore::open(root).unwrap();
    store.index_runs().unwrap();
    assert_eq!(
        partial_column(root),
        vec![(name(BIG_A), 1), (name(BIG_B), 1), (name(SMALL), 0)]
    );
    let whole = whole_index(root);
    let all = RunQuery::default();
    for by in [
        RunGrouping::Day,
        RunGrouping::DayAtOffset(-300),
        RunGrouping::Model,
        RunGrouping::Session,
    ] {
        let kept = store.run_totals(&all, by).unwrap();
        assert!(kept.from_running_totals, "{by:?}");
        let want = whole.run_index().run_totals_by_scan(&all, by).unwrap();
        assert_eq!(
            (&kept.groups, &kept.all),
            (&want.groups, &want.all),
            "{by:?}"
        );
        assert_eq!(kept.all.invocations, 3 + 4 + 3, "{by:?}");
    }
    // The running totals follow the completed rows stored by the first answer.
    assert_eq!(
        partial_column(root),
        vec![(name(BIG_A), 0), (name(BIG_B), 0), (name(SMALL), 0)]
    );
    // A read-only store cannot store completions: it sums the rows, completing them in memory.
    big_run(
        root,
        "3e2c6c71-9d86-4c81-9c8a-bf5c8b304d44",
        "sd",
        "2026-11-27T09:00:00.000Z",
        2,
        true,
    );
    store.index_runs().unwrap();
    drop(store);
    let read_only = StateStore::open_read_only(root).unwrap();
    let t = read_only.run_totals(&all, RunGrouping::Day).unwrap();
    assert!(!t.from_running_totals);
    assert_eq!(t.all.invocations, 3 + 4 + 3 + 2);
    assert_eq!(t.all.runs, 4);
}
