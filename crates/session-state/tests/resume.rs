//! Open runs are indexed incrementally: a refresh after a run file grew reads the new bytes
//! (and two small guards), not the file again, and gives the row a full re-read gives.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};

use session_jsonl::count_file_reads;
use session_state::{IndexedRunOutcome, RunQuery, RunRow, StateStore};

const RUN: &str = "0b9f3f4e-6a53-4f5e-8f57-8c2f5e0d1a11";

fn header() -> String {
    format!(
        r#"{{"type":"header","schema_version":1,"run_id":"{RUN}","session_id":"s1","started_at":"2026-11-30T10:00:00.000Z","model":{{"provider":"p","name":"m"}}}}"#
    )
}

fn response(i: usize, pad: usize) -> String {
    format!(
        r#"{{"type":"llm.response","run_id":"{RUN}","ts":"2026-11-30T10:{:02}:00.000Z","seq":{i},"output":{{"messages":[{{"role":"assistant","content":"{}"}}],"usage":{{"model":"m","input_tokens":{},"output_tokens":2,"total_tokens":{}}}}}}}"#,
        i % 60,
        "a".repeat(pad),
        i + 1,
        i + 3
    )
}

fn status(status: &str) -> String {
    format!(
        r#"{{"type":"run.status","run_id":"{RUN}","ts":"2026-11-30T11:00:00.000Z","status":"{status}"}}"#
    )
}

fn append(path: &Path, bytes: &str) {
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap()
        .write_all(bytes.as_bytes())
        .unwrap();
}

fn the_row(store: &StateStore) -> RunRow {
    let page = store.list_runs(&RunQuery::default()).unwrap();
    assert_eq!(page.runs.len(), 1);
    page.runs.into_iter().next().unwrap()
}

/// Refreshes; returns the row, whether the file was read on from its checkpoint and the
/// bytes read. Then checks that a rebuild from scratch finds nothing different.
fn refresh(store: &StateStore) -> (RunRow, u64, u64) {
    let counter = count_file_reads();
    let report = store.index_runs().unwrap();
    let bytes = counter.total_bytes();
    drop(counter);
    assert_eq!(report.files_read, 1, "{report:?}");
    let row = the_row(store);
    let rebuilt = store.reindex().unwrap();
    assert!(
        rebuilt.changes.is_empty(),
        "incremental and full read differ: {:?}",
        rebuilt.changes
    );
    assert_eq!(the_row(store), row);
    (row, report.files_resumed, bytes)
}

fn checkpoints(root: &Path) -> i64 {
    let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
    conn.query_row("SELECT count(*) FROM run_resume", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn one_line_appended_to_a_large_open_run_costs_that_line_and_two_guards() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let day = root.join("2026/11/30");
    std::fs::create_dir_all(&day).unwrap();
    let path: PathBuf = day.join(format!("{RUN}.jsonl"));
    // About 24 MB of complete lines.
    let mut body = header();
    body.push('\n');
    for i in 0..96 {
        body.push_str(&response(i, 250_000));
        body.push('\n');
    }
    std::fs::write(&path, &body).unwrap();
    let big = body.len() as u64;
    assert!(big > 24_000_000);
    let store = StateStore::open(root).unwrap();
    let counter = count_file_reads();
    store.index_runs().unwrap();
    // No `run.start` in its head block: the refresh cannot read it bounded, and reads it
    // whole after that block.
    assert_eq!(
        counter.total_bytes(),
        big + session_jsonl::scan::HEAD_LIMIT as u64,
        "the first read reads the head block, then the file once"
    );
    drop(counter);
    let first = the_row(&store);
    assert_eq!(
        (first.record_count, first.outcome),
        (97, IndexedRunOutcome::Open)
    );
    assert_eq!(checkpoints(root), 1);

    let line = format!("{}\n", response(96, 10));
    append(&path, &line);
    let (row, resumed, bytes) = refresh(&store);
    assert_eq!(resumed, 1);
    assert!(bytes <= 1 << 20, "{bytes} bytes read");
    assert_eq!(bytes, 8192 + line.len() as u64);
    assert_eq!(
        (row.record_count, row.input_tokens),
        (98, first.input_tokens + 97)
    );
}

#[test]
fn a_grown_open_run_is_read_on_from_its_checkpoint_and_gives_the_full_read_row() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let day = root.join("2026/11/30");
    std::fs::create_dir_all(&day).unwrap();
    let path: PathBuf = day.join(format!("{RUN}.jsonl"));
    // Lines longer than the guards, so that the guards and the new bytes are told apart.
    let mut body = header();
    body.push('\n');
    for i in 0..40 {
        body.push_str(&response(i, 3000));
        body.push('\n');
    }
    std::fs::write(&path, &body).unwrap();
    let store = StateStore::open(root).unwrap();
    store.index_runs().unwrap();
    // The rebuild agrees, and keeps the checkpoint.
    assert!(store.reindex().unwrap().changes.is_empty());
    assert_eq!(checkpoints(root), 1);

    // One appended line.
    let line = format!("{}\n", response(40, 10));
    append(&path, &line);
    let (row, resumed, bytes) = refresh(&store);
    assert_eq!((resumed, bytes), (1, 8192 + line.len() as u64));
    assert_eq!(row.record_count, 42);

    // A torn tail: folded into the row, not into the checkpoint.
    let torn = status("running");
    let (cut_a, cut_b) = torn.split_at(30);
    append(&path, cut_a);
    let (row, resumed, bytes) = refresh(&store);
    assert_eq!((resumed, row.record_count, row.damage_count), (1, 42, 1));
    assert_eq!(bytes, 8192 + cut_a.len() as u64);
    // ... completes later, with a damaged line after it.
    append(&path, &format!("{cut_b}\nnot json\n"));
    let (row, resumed, _) = refresh(&store);
    assert_eq!((resumed, row.record_count, row.damage_count), (1, 43, 1));
    assert_eq!(row.last_status.as_deref(), Some("running"));
    // A last line without newline that parses is a record already.
    append(&path, &status("waiting"));
    let (row, resumed, _) = refresh(&store);
    assert_eq!((resumed, row.record_count), (1, 44));
    assert_eq!(row.last_status.as_deref(), Some("waiting"));
    append(&path, &format!("\n{}\n", status("running")));
    let (row, resumed, _) = refresh(&store);
    assert_eq!((resumed, row.record_count), (1, 45));

    // Truncated: the size shrank below the checkpoint, read from the start.
    let len = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len - 40)
        .unwrap();
    let (row, resumed, bytes) = refresh(&store);
    assert_eq!((resumed, bytes), (0, len - 40));
    assert_eq!((row.record_count, row.damage_count), (44, 2));

    // Replaced by a longer file of another session under the same name: the head digest
    // differs, read from the start.
    let other = body.replace("\"session_id\":\"s1\"", "\"session_id\":\"s2\"");
    std::fs::write(&path, format!("{other}{}\n", status("running"))).unwrap();
    let (row, resumed, _) = refresh(&store);
    assert_eq!(resumed, 0);
    assert_eq!(
        (row.session_id.as_deref(), row.record_count),
        (Some("s2"), 42)
    );

    // A line before the checkpoint rewritten in place (same length), then a line appended:
    // the guard digest differs, read from the start.
    let now = std::fs::read_to_string(&path).unwrap();
    let at = now.rfind("\"status\":\"running\"").unwrap();
    let mut edited = now.clone();
    edited.replace_range(at..at + 18, "\"status\":\"stopped\"");
    std::fs::write(&path, format!("{edited}{}\n", status("running"))).unwrap();
    let (row, resumed, _) = refresh(&store);
    assert_eq!((resumed, row.record_count), (0, 43));

    // The run ends: its checkpoint goes.
    append(
        &path,
        &format!(
            r#"{{"type":"run.end","run_id":"{RUN}","ts":"2026-11-30T12:00:00.000Z","outcome":"completed"}}"#
        ),
    );
    append(&path, "\n");
    let (row, resumed, _) = refresh(&store);
    assert_eq!(resumed, 1);
    assert_eq!(row.outcome, IndexedRunOutcome::Completed);
    assert_eq!(checkpoints(root), 0);
}

#[test]
fn a_damaged_or_foreign_checkpoint_means_a_read_from_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let day = root.join("2026/11/30");
    std::fs::create_dir_all(&day).unwrap();
    let path = day.join(format!("{RUN}.jsonl"));
    std::fs::write(&path, format!("{}\n{}\n", header(), response(0, 10))).unwrap();
    let store = StateStore::open(root).unwrap();
    store.index_runs().unwrap();
    {
        let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
        conn.execute("UPDATE run_resume SET checkpoint = '{\"not\":1}'", [])
            .unwrap();
    }
    append(&path, &format!("{}\n", response(1, 10)));
    let (row, resumed, _) = refresh(&store);
    assert_eq!((resumed, row.record_count), (0, 3));
    assert_eq!(checkpoints(root), 1, "a fresh checkpoint replaces it");
}

#[test]
fn version_7_stores_get_run_resume_on_the_first_writable_open() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let day = root.join("2026/11/30");
    std::fs::create_dir_all(&day).unwrap();
    let path = day.join(format!("{RUN}.jsonl"));
    std::fs::write(&path, format!("{}\n", header())).unwrap();
    drop(StateStore::open(root).unwrap());
    let version = |c: &rusqlite::Connection| -> i64 {
        c.query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap()
    };
    let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
    assert_eq!(version(&conn), 12);
    conn.execute_batch("DROP TABLE run_resume; PRAGMA user_version = 7;")
        .unwrap();
    drop(conn);
    // Read-only: lists through a stand-in, changes nothing.
    let ro = StateStore::open_read_only(root).unwrap();
    assert!(ro.list_runs(&RunQuery::default()).unwrap().runs.is_empty());
    drop(ro);
    let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
    assert_eq!(version(&conn), 7);
    drop(conn);
    let store = StateStore::open(root).unwrap();
    store.index_runs().unwrap();
    assert_eq!(the_row(&store).record_count, 1);
    assert_eq!(checkpoints(root), 1);
    let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
    assert_eq!(version(&conn), 12);
}

fn request(seq: usize) -> String {
    format!(
        r#"{{"type":"llm.request","run_id":"{RUN}","ts":"2026-11-30T10:00:{:02}.000Z","seq":{seq},"model":{{"provider":"p","name":"m"}},"input":{{"messages":[{{"role":"user","content":"{}"}}],"tools":null,"tool_choice":"auto"}}}}"#,
        seq % 60,
        "q".repeat(2000)
    )
}

#[test]
fn the_index_pass_skims_llm_requests_and_a_full_read_decodes_them() {
    use session_jsonl::{
        llm_requests_deserialized_on_this_thread as decoded,
        llm_requests_skimmed_on_this_thread as skimmed,
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let day = root.join("2026/11/30");
    std::fs::create_dir_all(&day).unwrap();
    let path = day.join(format!("{RUN}.jsonl"));
    let mut body = format!("{}\n", header());
    for i in 0..12 {
        body.push_str(&request(i));
        body.push('\n');
        body.push_str(&response(i, 10));
        body.push('\n');
    }
    // A request cut short and sealed: damage either way.
    body.push_str(&request(12)[..900]);
    body.push('\n');
    std::fs::write(&path, &body).unwrap();
    let store = StateStore::open(root).unwrap();
    let (d0, s0) = (decoded(), skimmed());
    store.index_runs().unwrap();
    assert_eq!((decoded() - d0, skimmed() - s0), (0, 12));
    let row = the_row(&store);
    assert_eq!((row.invocation_count, row.damage_count), (12, 1));
    assert_eq!(row.last_ts.as_deref(), Some("2026-11-30T10:11:00.000Z"));
    // The rebuild skims too.
    let (d0, s0) = (decoded(), skimmed());
    assert!(store.reindex().unwrap().changes.is_empty());
    assert_eq!((decoded() - d0, skimmed() - s0), (0, 12));
    // The reader `verify` uses decodes every request.
    let d0 = decoded();
    let run = session_jsonl::read_run(&path).unwrap();
    assert_eq!(decoded() - d0, 12);
    assert_eq!(run.damage.len(), 1);
}
