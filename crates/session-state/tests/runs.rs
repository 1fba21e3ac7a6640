//! The run index follows the run tree incrementally: new, grown, compressed and deleted files,
//! runs written by session-jsonl's writer, keyset pagination and filters, deterministic
//! rebuilds.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::{Path, PathBuf};

use session_jsonl::{Durability, RunWriter, WriterOptions};
use session_schema::{Header, ModelInfo, Record, RunEnd, RunOutcome as EndOutcome, Timestamp};
use session_state::{IndexedRunOutcome, RunChange, RunCursor, RunQuery, StateStore};

fn fixture_runs() -> PathBuf {
    session_test_support::codelia_runs_dir()
}

fn setup() -> (tempfile::TempDir, PathBuf, StateStore) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let day = root.join("2026/11/30");
    fs::create_dir_all(&day).unwrap();
    for e in fs::read_dir(fixture_runs()).unwrap() {
        let e = e.unwrap();
        fs::copy(e.path(), day.join(e.file_name())).unwrap();
    }
    let store = StateStore::open(&root).unwrap();
    (dir, root, store)
}

fn counts(r: &session_state::IndexReport) -> (u64, u64, u64, u64) {
    (r.added, r.updated, r.removed, r.unchanged)
}

#[test]
fn index_follows_changes_incrementally() {
    let (_dir, root, store) = setup();
    assert_eq!(counts(&store.index_runs().unwrap()), (20, 0, 0, 0));
    let s9 = root.join("2026/11/30/2a11c3a2-3276-4762-88f9-5f8918cb8042.jsonl");
    // The crashed run gets a torn tail appended by a dying writer.
    let mut bytes = fs::read(&s9).unwrap();
    bytes.extend_from_slice(b"{\"type\":\"run.status\",\"run_id\":\"2a11c3a2");
    fs::write(&s9, &bytes).unwrap();
    let r = store.index_runs().unwrap();
    assert_eq!(counts(&r), (0, 1, 0, 19));
    assert_eq!(r.damaged, vec![(s9.clone(), 1)]);
    let row = &store
        .runs_for_session("8cde78e5-83d1-486e-9235-92043137d532")
        .unwrap()[0];
    assert_eq!(row.damage_count, 1);
    assert_eq!(row.file_size, bytes.len() as u64);
    // Archiving replaces the file by a .jsonl.zst: one removed, one added, same facts.
    let zst = session_jsonl::compress_run(
        &root.join("2026/11/30/dd74a9e6-ad97-48cf-9d7e-b0e6b5de066a.jsonl"),
    )
    .unwrap();
    let r = store.index_runs().unwrap();
    assert_eq!(counts(&r), (1, 0, 1, 19));
    let s1 = store
        .runs_for_session("505df585-1046-40f7-a56f-9e890871501c")
        .unwrap();
    assert_eq!(s1[0].path, zst);
    assert!(s1[0].compressed);
    assert_eq!(s1[0].record_count, 10);
    assert_eq!(s1[0].outcome, IndexedRunOutcome::Completed);
    // Deleting a file drops its row.
    fs::remove_file(&s9).unwrap();
    assert_eq!(counts(&store.index_runs().unwrap()), (0, 0, 1, 19));
    assert!(
        store
            .runs_for_session("8cde78e5-83d1-486e-9235-92043137d532")
            .unwrap()
            .is_empty()
    );
}

#[test]
fn runs_of_our_own_writer_are_indexed_and_open_until_run_end() {
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    let header = Header {
        schema_version: 1,
        run_id: "11111111-2222-4333-8444-555555555555".into(),
        session_id: Some("s-own".into()),
        started_at: Timestamp::from_raw("2026-12-01T09:00:00.000Z"),
        model: Some(ModelInfo {
            provider: Some("openai".into()),
            name: Some("gpt-5.6".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let writer = RunWriter::create(
        dir.path(),
        &header,
        WriterOptions::with_durability(Durability::SyncData),
    )
    .unwrap();
    store.index_runs().unwrap();
    let row = store.runs_for_session("s-own").unwrap().remove(0);
    assert_eq!(row.outcome, IndexedRunOutcome::Open);
    assert!(session_jsonl::is_locked(&row.path).unwrap());
    assert_eq!(row.model_name.as_deref(), Some("gpt-5.6"));
    writer
        .append(&Record::RunEnd(RunEnd {
            run_id: header.run_id.clone(),
            ts: Timestamp::from_raw("2026-12-01T09:00:05.000Z"),
            outcome: EndOutcome::Cancelled,
            ..Default::default()
        }))
        .unwrap();
    drop(writer);
    let r = store.index_runs().unwrap();
    assert_eq!(r.updated, 1);
    let row = store.runs_for_session("s-own").unwrap().remove(0);
    assert_eq!(row.outcome, IndexedRunOutcome::Cancelled);
    assert_eq!(row.last_ts.as_deref(), Some("2026-12-01T09:00:05.000Z"));
    assert_eq!(row.record_count, 2);
}

#[test]
fn listing_is_newest_first_filtered_and_paged() {
    let (_dir, _root, store) = setup();
    store.index_runs().unwrap();
    let all = store.list_runs(&RunQuery::default()).unwrap();
    assert_eq!(all.runs.len(), 20);
    assert!(all.next_cursor.is_none());
    let starts: Vec<_> = all
        .runs
        .iter()
        .map(|r| r.started_at.clone().unwrap())
        .collect();
    let mut sorted = starts.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(starts, sorted);
    // Pages of 6 give the same sequence.
    let mut paged = Vec::new();
    let mut after: Option<RunCursor> = None;
    loop {
        let page = store
            .list_runs(&RunQuery {
                limit: Some(6),
                after: after
                    .take()
                    .map(|c| RunCursor::from_token(&c.to_token()).unwrap()),
                ..RunQuery::default()
            })
            .unwrap();
        paged.extend(page.runs.into_iter().map(|r| r.run_id));
        match page.next_cursor {
            Some(c) => after = Some(c),
            None => break,
        }
    }
    let ids: Vec<_> = all.runs.iter().map(|r| r.run_id.clone()).collect();
    assert_eq!(paged, ids);
    let q = |q: RunQuery| store.list_runs(&q).unwrap().runs.len();
    assert_eq!(
        q(RunQuery {
            outcome: Some(IndexedRunOutcome::Error),
            ..Default::default()
        }),
        1
    );
    assert_eq!(
        q(RunQuery {
            outcome: Some(IndexedRunOutcome::Cancelled),
            ..Default::default()
        }),
        2
    );
    assert_eq!(
        q(RunQuery {
            outcome: Some(IndexedRunOutcome::Open),
            ..Default::default()
        }),
        1
    );
    assert_eq!(
        q(RunQuery {
            session: Some("8e66b6d7-b2ff-4b09-8d01-a588020959d5".into()),
            ..Default::default()
        }),
        3
    );
    assert_eq!(
        q(RunQuery {
            workspace: Some("/home/dev/acme-app/".into()),
            ..Default::default()
        }),
        1
    );
    let since = all.runs[4].started_at.clone();
    assert_eq!(
        q(RunQuery {
            since: since.clone(),
            ..Default::default()
        }),
        5
    );
    assert_eq!(
        q(RunQuery {
            until: since,
            ..Default::default()
        }),
        15
    );
}

#[test]
fn reindex_is_deterministic_and_reports_differences() {
    let (_dir, root, store) = setup();
    let first = store.reindex().unwrap();
    assert_eq!(first.total, 20);
    assert_eq!(first.changes.len(), 20);
    assert!(
        first
            .changes
            .iter()
            .all(|c| matches!(c, RunChange::Added(_)))
    );
    let second = store.reindex().unwrap();
    assert!(second.changes.is_empty());
    assert_eq!(second.unchanged, 20);
    // Tamper with the index behind its back: reindex reports and repairs it.
    let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
    conn.execute(
        "UPDATE runs SET total_tokens = 1, outcome = 'completed' WHERE outcome = 'open'",
        [],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO runs (path, run_id, session_id, started_at, model_provider, model_name, outcome, last_status, record_count, invocation_count, input_tokens, cached_input_tokens, cache_creation_tokens, output_tokens, total_tokens, file_size, mtime_ns, first_input, workspace_root, damage_count, last_ts, compressed) SELECT '2026/11/30/gone.jsonl', run_id, session_id, started_at, model_provider, model_name, outcome, last_status, record_count, invocation_count, input_tokens, cached_input_tokens, cache_creation_tokens, output_tokens, total_tokens, file_size, mtime_ns, first_input, workspace_root, damage_count, last_ts, compressed FROM runs LIMIT 1",
        [],
    )
    .unwrap();
    let third = store.reindex().unwrap();
    assert_eq!(third.changes.len(), 2, "{:?}", third.changes);
    assert!(
        third
            .changes
            .contains(&RunChange::Removed(root.join("2026/11/30/gone.jsonl")))
    );
    assert!(third.changes.iter().any(
        |c| matches!(c, RunChange::Changed(_, cols) if cols == &vec!["outcome", "total_tokens"])
    ));
    assert!(store.reindex().unwrap().changes.is_empty());
}

/// A finished run whose header says `started_at` (written as given).
fn write_run(root: &Path, day: &str, run_id: &str, started_at: Option<&str>) -> PathBuf {
    let dir = root.join(day);
    fs::create_dir_all(&dir).unwrap();
    let started = started_at.map_or(String::new(), |s| format!(r#","started_at":"{s}""#));
    let body = format!(
        "{{\"type\":\"header\",\"schema_version\":1,\"run_id\":\"{run_id}\",\"session_id\":\"5e55e55e-0000-4000-8000-000000000001\"{started}}}\n\
         {{\"type\":\"run.end\",\"run_id\":\"{run_id}\",\"ts\":\"2026-03-04T21:00:00.000Z\",\"outcome\":\"completed\"}}\n"
    );
    let path = dir.join(format!("{run_id}.jsonl"));
    fs::write(&path, body).unwrap();
    path
}

const TZ_RUNS: [(&str, &str, Option<&str>); 5] = [
    // 16:00Z on 03-04, written with a +09:00 offset (a later date as a string).
    (
        "2026/03/05",
        "7a000000-0000-4000-8000-00000000000a",
        Some("2026-03-05T01:00:00.000+09:00"),
    ),
    (
        "2026/03/04",
        "7a000000-0000-4000-8000-00000000000b",
        Some("2026-03-04T20:00:00.000Z"),
    ),
    (
        "2026/03/04",
        "7a000000-0000-4000-8000-00000000000c",
        Some("not a time"),
    ),
    (
        "2026/03/04",
        "7a000000-0000-4000-8000-00000000000d",
        Some("2026-03-04T17:30:00Z"),
    ),
    ("2026/03/04", "7a000000-0000-4000-8000-00000000000e", None),
];

/// Run ids of `list_runs(query)`, newest first, by their last letter.
fn listed(store: &StateStore, query: RunQuery) -> String {
    store
        .list_runs(&query)
        .unwrap()
        .runs
        .iter()
        .map(|r| r.run_id.chars().last().unwrap())
        .collect()
}

fn check_time_order(store: &StateStore) {
    // Newest first by the instant; no usable start time: after every dated run, path
    // descending. The file whose header has no `started_at` has no header record at all (it
    // does not parse as one): it is no run, not listed, but reported.
    assert_eq!(listed(store, RunQuery::default()), "bdac");
    let diagnostics = store.run_file_diagnostics().unwrap();
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    assert!(
        diagnostics[0]
            .path
            .ends_with("7a000000-0000-4000-8000-00000000000e.jsonl")
    );
    assert_eq!(
        diagnostics[0].message,
        "no header record: 1 record(s) without one"
    );
    let bound = |s: &str| Some(s.to_owned());
    for since in ["2026-03-04T18:00:00Z", "2026-03-05T03:00:00.000+09:00"] {
        assert_eq!(
            listed(
                store,
                RunQuery {
                    since: bound(since),
                    ..Default::default()
                }
            ),
            "b",
            "{since}"
        );
    }
    assert_eq!(
        listed(
            store,
            RunQuery {
                until: bound("2026-03-04T18:00:00Z"),
                ..Default::default()
            }
        ),
        "da"
    );
    assert_eq!(
        listed(
            store,
            RunQuery {
                since: bound("2026-03-04T16:00:00.000Z"),
                until: bound("2026-03-04T17:30:00.000Z"),
                ..Default::default()
            }
        ),
        "a"
    );
    // Pages of one give the same order, whether the cursor is the one returned or one made
    // from the row's `started_at` as written.
    for raw_cursor in [false, true] {
        let mut seen = String::new();
        let mut after = None;
        loop {
            let page = store
                .list_runs(&RunQuery {
                    limit: Some(1),
                    after: after.take(),
                    ..Default::default()
                })
                .unwrap();
            let Some(row) = page.runs.first() else { break };
            seen.push(row.run_id.chars().last().unwrap());
            after = match page.next_cursor {
                Some(c) if raw_cursor => Some(RunCursor {
                    started_at: row.started_at.clone().unwrap_or_default(),
                    ..c
                }),
                Some(c) => Some(c),
                None => None,
            };
            if after.is_none() {
                break;
            }
        }
        assert_eq!(seen, "bdac", "raw cursor: {raw_cursor}");
    }
    let of_session: String = store
        .runs_for_session("5e55e55e-0000-4000-8000-000000000001")
        .unwrap()
        .iter()
        .map(|r| r.run_id.chars().last().unwrap())
        .collect();
    // (the run without `started_at` has no valid header, so no session either)
    assert_eq!(of_session, "cadb");
}

#[test]
fn runs_are_ordered_and_filtered_by_their_instant_in_utc() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    for (day, id, started) in TZ_RUNS {
        write_run(&root, day, id, started);
    }
    let store = StateStore::open(&root).unwrap();
    store.index_runs().unwrap();
    let utc: Vec<Option<String>> = store
        .list_runs(&RunQuery::default())
        .unwrap()
        .runs
        .into_iter()
        .map(|r| r.started_at_utc)
        .collect();
    assert_eq!(
        utc,
        [
            Some("2026-03-04T20:00:00.000Z"),
            Some("2026-03-04T17:30:00.000Z"),
            Some("2026-03-04T16:00:00.000Z"),
            None,
        ]
        .map(|s| s.map(str::to_owned))
    );
    check_time_order(&store);
    // reindex gives the same column.
    assert!(store.reindex().unwrap().changes.is_empty());
    check_time_order(&store);
}

#[test]
fn an_index_without_the_utc_column_is_read_and_migrated() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    for (day, id, started) in TZ_RUNS {
        write_run(&root, day, id, started);
    }
    StateStore::open(&root).unwrap().index_runs().unwrap();
    // The index as version 2 left it: no started_at_utc, indexes on the raw started_at, no
    // diagnostic column (every file was a run), no running totals (versions 10 and 11).
    let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
    conn.execute_batch(
        "DROP TRIGGER run_totals_replace; DROP TRIGGER run_totals_insert;
         DROP TRIGGER run_totals_insert_run; DROP TRIGGER run_totals_delete;
         DROP TRIGGER run_totals_delete_run; DROP TRIGGER run_totals_update;
         DROP TRIGGER run_totals_update_old; DROP TRIGGER run_totals_update_new;
         DROP TABLE run_totals; DROP TABLE run_dup_ids;
         DROP TRIGGER run_day_totals_replace; DROP TRIGGER run_day_totals_insert;
         DROP TRIGGER run_day_totals_delete; DROP TRIGGER run_day_totals_update_old;
         DROP TRIGGER run_day_totals_update_new; DROP TABLE run_day_totals;
         DROP INDEX runs_by_session_utc; DROP INDEX runs_by_start_utc;
         DROP INDEX runs_by_run_id; DROP INDEX runs_not_runs; DROP INDEX runs_partial;
         ALTER TABLE runs DROP COLUMN started_at_utc;
         ALTER TABLE runs DROP COLUMN diagnostic;
         ALTER TABLE runs DROP COLUMN partial;
         CREATE INDEX runs_by_session ON runs(session_id, started_at, run_id);
         CREATE INDEX runs_by_start ON runs(started_at DESC, run_id DESC);
         PRAGMA user_version = 2;",
    )
    .unwrap();
    drop(conn);
    // Read-only: computed on the fly, nothing migrated; the old index cannot tell files that
    // are no runs, so it lists them as it did.
    let read_only = StateStore::open_read_only(&root).unwrap();
    assert_eq!(listed(&read_only, RunQuery::default()), "bdaec");
    assert!(read_only.run_file_diagnostics().unwrap().is_empty());
    drop(read_only);
    let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
    let v: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, 2);
    drop(conn);
    // Writable: the columns are added and filled, the old indexes replaced, and the rows that
    // may be no runs are read again by the next refresh.
    let store = StateStore::open(&root).unwrap();
    store.index_runs().unwrap();
    check_time_order(&store);
    assert!(store.reindex().unwrap().changes.is_empty());
    let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
    let v: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, 12, "the current version");
    let indexes: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'runs' AND sql IS NOT NULL ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        indexes,
        [
            "runs_by_run_id",
            "runs_by_session_utc",
            "runs_by_start_utc",
            "runs_not_runs",
            "runs_partial"
        ]
    );
}

/// Writes a run file of `lines` (records after the header) under `2026/03/06`.
fn write_run_lines(root: &Path, run_id: &str, lines: &[String]) -> PathBuf {
    let dir = root.join("2026/03/06");
    fs::create_dir_all(&dir).unwrap();
    let mut body = format!(
        "{{\"type\":\"header\",\"schema_version\":1,\"run_id\":\"{run_id}\",\"session_id\":\"5e55e55e-0000-4000-8000-000000000002\",\"started_at\":\"2026-03-06T10:00:00.000Z\"}}\n"
    );
    for l in lines {
        body.push_str(l);
        body.push('\n');
    }
    let path = dir.join(format!("{run_id}.jsonl"));
    fs::write(&path, body).unwrap();
    path
}

fn response(run_id: &str, seq: u64, input: u64, total: u64) -> String {
    format!(
        r#"{{"type":"llm.response","run_id":"{run_id}","ts":"2026-03-06T10:00:0{seq}.000Z","seq":{seq},"output":{{"messages":[{{"role":"assistant","content":"ok"}}],"usage":{{"model":"m","input_tokens":{input},"input_cached_tokens":{input},"output_tokens":1,"total_tokens":{total}}}}}}}"#
    )
}

fn end(run_id: &str, outcome: &str) -> String {
    format!(
        r#"{{"type":"run.end","run_id":"{run_id}","ts":"2026-03-06T10:00:09.000Z","outcome":"{outcome}"}}"#
    )
}

fn run_error(run_id: &str) -> String {
    format!(
        r#"{{"type":"run.error","run_id":"{run_id}","ts":"2026-03-06T10:00:08.000Z","error":{{"name":"ProviderFailureError","message":"request failed"}}}}"#
    )
}

fn row_of(store: &StateStore, run_id: &str) -> session_state::RunRow {
    store
        .runs_for_session("5e55e55e-0000-4000-8000-000000000002")
        .unwrap()
        .into_iter()
        .find(|r| r.run_id == run_id)
        .unwrap()
}

#[test]
fn token_sums_saturate_at_the_largest_storable_value_and_count_as_damage() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let big = "7b000000-0000-4000-8000-00000000000a";
    let wide = "7b000000-0000-4000-8000-00000000000b";
    // Two responses of u64::MAX input tokens: the sum overflows u64.
    let path = write_run_lines(
        &root,
        big,
        &[
            response(big, 1, u64::MAX, 5),
            response(big, 2, u64::MAX, 7),
            end(big, "completed"),
        ],
    );
    // One response just above i64::MAX: fits u64, not an SQLite integer.
    let above = i64::MAX.unsigned_abs() + 1;
    write_run_lines(
        &root,
        wide,
        &[response(wide, 1, above, above), end(wide, "completed")],
    );
    let store = StateStore::open(&root).unwrap();
    let report = store.index_runs().unwrap();
    assert_eq!(report.added, 2);
    assert!(report.damaged.contains(&(path, 2)), "{:?}", report.damaged);
    let max = i64::MAX.unsigned_abs();
    let row = row_of(&store, big);
    assert_eq!(row.input_tokens, max);
    assert_eq!(row.cached_input_tokens, max);
    assert_eq!(row.output_tokens, 2);
    assert_eq!(row.total_tokens, 12);
    assert_eq!(row.damage_count, 2);
    let row = row_of(&store, wide);
    assert_eq!((row.input_tokens, row.total_tokens), (max, max));
    assert_eq!(row.damage_count, 1);
    // Listing and rebuilding agree and never see a negative (wrapped) value.
    let listed = store.list_runs(&RunQuery::default()).unwrap().runs;
    assert!(listed.iter().all(|r| r.input_tokens == max));
    assert!(store.reindex().unwrap().changes.is_empty());
}

#[test]
fn run_error_ends_a_run_and_unknown_outcomes_are_not_open() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let errored = "7c000000-0000-4000-8000-00000000000a";
    let cancelled = "7c000000-0000-4000-8000-00000000000b";
    let exploded = "7c000000-0000-4000-8000-00000000000c";
    let says_open = "7c000000-0000-4000-8000-00000000000d";
    let running = "7c000000-0000-4000-8000-00000000000e";
    write_run_lines(&root, errored, &[run_error(errored)]);
    write_run_lines(
        &root,
        cancelled,
        &[run_error(cancelled), end(cancelled, "cancelled")],
    );
    write_run_lines(&root, exploded, &[end(exploded, "exploded")]);
    write_run_lines(&root, says_open, &[end(says_open, "open")]);
    write_run_lines(&root, running, &[response(running, 1, 3, 4)]);
    let store = StateStore::open(&root).unwrap();
    store.index_runs().unwrap();
    assert_eq!(row_of(&store, errored).outcome, IndexedRunOutcome::Error);
    assert_eq!(
        row_of(&store, cancelled).outcome,
        IndexedRunOutcome::Cancelled
    );
    assert_eq!(
        row_of(&store, exploded).outcome,
        IndexedRunOutcome::Other("exploded".to_owned())
    );
    assert_eq!(
        row_of(&store, says_open).outcome,
        IndexedRunOutcome::Other("other:open".to_owned())
    );
    assert_eq!(row_of(&store, running).outcome, IndexedRunOutcome::Open);
    let ids = |outcome: IndexedRunOutcome| -> Vec<String> {
        store
            .list_runs(&RunQuery {
                outcome: Some(outcome),
                ..RunQuery::default()
            })
            .unwrap()
            .runs
            .into_iter()
            .map(|r| r.run_id)
            .collect()
    };
    assert_eq!(ids(IndexedRunOutcome::Error), vec![errored.to_owned()]);
    assert_eq!(ids(IndexedRunOutcome::Open), vec![running.to_owned()]);
    assert_eq!(
        ids(IndexedRunOutcome::Other("exploded".to_owned())),
        vec![exploded.to_owned()]
    );
    // A refresh and a rebuild agree on every outcome.
    assert!(store.reindex().unwrap().changes.is_empty());
}

#[test]
fn a_run_end_after_run_error_is_picked_up_while_the_file_is_racy() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let id = "7d000000-0000-4000-8000-00000000000a";
    let path = write_run_lines(&root, id, &[run_error(id)]);
    // Times set explicitly, so that what is racy does not depend on how fast the test runs:
    // the day directory settled long ago (not racy, so it is listed only while it changes),
    // the file's time is one no index can have looked at after the window (a clock ahead of
    // ours, or a write in the very tick of the look): racy.
    let day = path.parent().unwrap().to_owned();
    let settled = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
    set_mtime(&day, settled);
    set_mtime(
        &path,
        std::time::SystemTime::now() + std::time::Duration::from_secs(3600),
    );
    let store = StateStore::open(&root).unwrap();
    store.index_runs().unwrap();
    assert_eq!(row_of(&store, id).outcome, IndexedRunOutcome::Error);
    // The writer appends its run.end right after run.error: the directory does not change,
    // the file was racy when looked at, so it is still watched.
    let mut bytes = fs::read(&path).unwrap();
    bytes.extend_from_slice(end(id, "cancelled").as_bytes());
    bytes.push(b'\n');
    fs::write(&path, &bytes).unwrap();
    set_mtime(&day, settled);
    let r = store.index_runs().unwrap();
    // Found through the watch alone: the directory was not listed again.
    assert_eq!(
        (r.dirs_listed, r.files_checked, r.updated),
        (0, 1, 1),
        "{r:?}"
    );
    let row = row_of(&store, id);
    assert_eq!(row.outcome, IndexedRunOutcome::Cancelled);
    assert_eq!(row.file_size, bytes.len() as u64);
    assert!(store.reindex().unwrap().changes.is_empty());
}

/// Sets the modification time of a file or directory.
fn set_mtime(path: &Path, t: std::time::SystemTime) {
    fs::File::open(path).unwrap().set_modified(t).unwrap();
}
