//! What an append costs, counted by the server (`pg_stat_statements` on a cluster of this
//! binary's own), and that the one-statement append to a run this client knows keeps every
//! guarantee of the full transaction:
//!
//! * the first append of a new run is one statement, and so is each append at its end: no
//!   `SELECT … FOR UPDATE`, no separate `UPDATE` (and no `BEGIN` / `COMMIT`, which
//!   `pg_stat_statements` does not count);
//! * a stale guess (another writer appended; the run was removed and made again) writes
//!   nothing and the transaction decides: a length conflict, or the append at the true end;
//! * a retry after a lost acknowledgement is recognised, not stored twice;
//! * the recorded reference runs appended line by line this way list, stat and read exactly
//!   as when appended whole.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::OnceLock;

use common::{Cluster, Extra};
use session_pg::{PgBackend, PgConfig, PgError, PgOptions, schema};
use session_storage::local::LocalBackend;
use session_storage::{
    Extent, RunCatalogue, RunListQuery, RunSearchQuery, RunSummary, StorageError,
};

fn cluster() -> Option<&'static Cluster> {
    static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();
    common::available(CLUSTER.get_or_init(|| {
        Cluster::start_with(&Extra {
            settings: vec![
                (
                    "shared_preload_libraries".to_owned(),
                    "pg_stat_statements".to_owned(),
                ),
                ("pg_stat_statements.track".to_owned(), "all".to_owned()),
            ],
            ..Extra::default()
        })
    }))
}

fn backend(conn: &str, host: &str) -> PgBackend {
    PgBackend::open_with(
        PgConfig::parse(conn).unwrap(),
        PgOptions {
            max_connections: 2,
            origin_host: host.to_owned(),
            ..PgOptions::default()
        },
    )
    .unwrap()
}

fn q(source: postgres::Error) -> PgError {
    PgError::Query { op: "test", source }
}

/// Calls of statements containing each of `parts`, in this database, since the last
/// reset.
fn calls(b: &PgBackend, parts: &'static [&'static str]) -> Vec<i64> {
    b.with_client(move |c| {
        parts
            .iter()
            .map(|p| {
                c.query_one(
                    "SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements \
                     WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) \
                     AND strpos(query, $1) > 0",
                    &[p],
                )
                .map(|r| r.get(0))
                .map_err(q)
            })
            .collect()
    })
    .unwrap()
}

/// A fresh database with `pg_stat_statements` in it, and a backend on it writing as `host`.
fn counted(c: &Cluster, host: &str) -> PgBackend {
    let conn = c.fresh_db();
    let b = backend(&conn, host);
    b.with_client(|c| {
        c.batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            .map_err(q)
    })
    .unwrap();
    b
}

fn reset(b: &PgBackend) {
    b.with_client(|c| {
        // This database's counts only: tests of other databases run meanwhile.
        c.batch_execute(
            "SELECT pg_stat_statements_reset(0, \
             (SELECT oid FROM pg_database WHERE datname = current_database()), 0)",
        )
        .map_err(q)
    })
    .unwrap();
}

fn line(run: &str, i: u32) -> Vec<u8> {
    format!(
        "{{\"type\":\"run.status\",\"run_id\":\"{run}\",\"ts\":\"2026-02-03T12:00:{:02}.000Z\",\"status\":\"running\",\"message\":\"step {i}\"}}\n",
        i % 60
    )
    .into_bytes()
}

fn header(run: &str) -> Vec<u8> {
    format!(
        "{{\"type\":\"header\",\"schema_version\":1,\"run_id\":\"{run}\",\"session_id\":\"s-1\",\"started_at\":\"2026-02-03T12:00:00.000Z\"}}\n"
    )
    .into_bytes()
}

/// What each statement of an append contains (and no other statement does): the one-statement
/// create, the one-statement append at a known end, the lock of the append's transaction,
/// its update of the run's tip row, its update of the run row.
const STATEMENTS: &[&str] = &[
    "ins AS (INSERT INTO run_lines",
    "WITH cas AS (UPDATE run_tips",
    "SELECT t.committed_len, t.line_count, t.run_key, t.tally FROM runs r",
    "UPDATE run_tips SET committed_len = $2",
    "UPDATE runs SET session_id = $2",
];

/// The rows of a new run inserted whole by the append's transaction (many lines).
const CREATE_WHOLE: &[&str] = &["SELECT new.run_key FROM new"];

#[test]
fn appends_at_the_end_of_a_known_run_are_one_statement_each() {
    let Some(c) = cluster() else { return };
    let b = counted(c, "writer");
    reset(&b);
    let mut expected = header("r1");
    let mut len = b.append_lines("r1", 0, &header("r1")).unwrap().end;
    for i in 0..20 {
        let l = line("r1", i);
        let done = b.append_lines("r1", len, &l).unwrap();
        assert_eq!(
            (
                done.offset,
                done.end,
                done.committed_len,
                done.already_present
            ),
            (len, len + l.len() as u64, len + l.len() as u64, 0)
        );
        len = done.end;
        expected.extend_from_slice(&l);
    }
    // One statement creates the run with its header, one per append after it; no locked
    // transaction.
    assert_eq!(calls(&b, STATEMENTS), vec![1, 20, 0, 0, 0]);
    assert_eq!(b.read_all("r1", Extent::Committed).unwrap(), expected);
    let fp = b.run_fingerprint("r1").unwrap().unwrap();
    assert_eq!((fp.len, fp.lines), (len, 21));

    // A retry after a lost acknowledgement (the same lines at the same length again): the
    // full transaction recognises them; nothing is stored twice.
    let l = line("r1", 20);
    let first = b.append_lines("r1", len, &l).unwrap();
    let again = b.append_lines("r1", len, &l).unwrap();
    assert!(!first.was_retry());
    assert!(again.was_retry());
    assert_eq!(again.already_present, l.len() as u64);
    // The retry went to the locked transaction, which wrote nothing.
    assert_eq!(calls(&b, STATEMENTS), vec![1, 21, 1, 0, 0]);
    expected.extend_from_slice(&l);
    assert_eq!(b.read_all("r1", Extent::Committed).unwrap(), expected);
    assert_eq!(b.run_fingerprint("r1").unwrap().unwrap().lines, 22);
}

#[test]
fn a_stale_guess_writes_nothing_and_the_transaction_decides() {
    let Some(c) = cluster() else { return };
    let conn = c.fresh_db();
    let (a, other) = (backend(&conn, "a"), backend(&conn, "b"));
    let h = header("r2");
    let len = a.append_lines("r2", 0, &h).unwrap().end;
    // Creating a run that exists: the same first line is a retry; another is a conflict.
    assert!(other.append_lines("r2", 0, &h).unwrap().was_retry());
    match other.append_lines("r2", 0, &header("another")) {
        Err(StorageError::LengthConflict {
            expected,
            committed,
            ..
        }) => assert_eq!((expected, committed), (0, len)),
        other => panic!("a second first line was not refused: {other:?}"),
    }
    // Another writer appends: `a`'s knowledge of the run is stale.
    let l1 = line("r2", 1);
    let end = other.append_lines("r2", len, &l1).unwrap().end;
    let l2 = line("r2", 2);
    match a.append_lines("r2", len, &l2) {
        Err(StorageError::LengthConflict {
            expected,
            committed,
            ..
        }) => assert_eq!((expected, committed), (len, end)),
        other => panic!("a stale compare-and-swap was not refused: {other:?}"),
    }
    // At the true end it goes in.
    let done = a.append_lines("r2", end, &l2).unwrap();
    assert_eq!((done.offset, done.end), (end, end + l2.len() as u64));
    assert_eq!(
        a.read_all("r2", Extent::Committed).unwrap(),
        [h.clone(), l1, l2].concat()
    );

    // The run removed and made again to the same length: another run key, so the guess
    // misses and the lines go to the new run, after its own bytes only.
    let key_of = |b: &PgBackend| {
        b.with_client(|c| {
            c.query_one("SELECT run_key FROM runs WHERE run_id = 'r3'", &[])
                .map(|r| r.get::<_, i64>(0))
                .map_err(q)
        })
        .unwrap()
    };
    let h3 = header("r3");
    let len3 = a.append_lines("r3", 0, &h3).unwrap().end;
    let old_key = key_of(&a);
    other
        .with_client(|c| {
            c.batch_execute(
                "DELETE FROM run_lines WHERE run_key = (SELECT run_key FROM runs WHERE run_id = 'r3'); \
                 DELETE FROM runs WHERE run_id = 'r3'",
            )
            .map_err(q)
        })
        .unwrap();
    assert_eq!(other.append_lines("r3", 0, &h3).unwrap().end, len3);
    assert_ne!(key_of(&other), old_key);
    let l = line("r3", 1);
    let done = a.append_lines("r3", len3, &l).unwrap();
    assert_eq!((done.offset, done.already_present), (len3, 0));
    assert_eq!(
        a.read_all("r3", Extent::Committed).unwrap(),
        [h3, l].concat()
    );
    assert_eq!(a.run_fingerprint("r3").unwrap().unwrap().lines, 2);
}

/// A summary without what only says where and when a backend stored the run.
fn comparable(mut s: RunSummary) -> RunSummary {
    s.stored_bytes = 0;
    s.last_write_unix_ns = 0;
    s.location = String::new();
    s.archived = false;
    s.origin_host = None;
    s
}

#[test]
fn reference_runs_appended_line_by_line_read_as_appended_whole() {
    let Some(c) = cluster() else { return };
    let (by_line, whole) = (
        backend(&c.fresh_db(), "lines"),
        backend(&c.fresh_db(), "whole"),
    );
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("sessions");
    session_test_support::copy_tree(&session_test_support::codelia_sessions_dir(), &root).unwrap();
    let local = LocalBackend::open(&root).unwrap();
    let runs = local.list_runs(&RunListQuery::default()).unwrap().runs;
    assert!(runs.len() >= 5, "reference runs: {}", runs.len());
    for r in &runs {
        let bytes = local.read_all(&r.run_id, Extent::Committed).unwrap();
        whole.append_lines(&r.run_id, 0, &bytes).unwrap();
        let mut len = 0;
        for l in bytes.split_inclusive(|b| *b == b'\n') {
            len = by_line.append_lines(&r.run_id, len, l).unwrap().end;
        }
        assert_eq!(len, bytes.len() as u64);
        assert_eq!(
            by_line.read_all(&r.run_id, Extent::Committed).unwrap(),
            bytes
        );
        let (a, b) = (
            by_line.stat_run(&r.run_id).unwrap().unwrap(),
            whole.stat_run(&r.run_id).unwrap().unwrap(),
        );
        assert_eq!(
            (a.len, a.lines, &a.header, &a.end, &a.last_type, &a.last_ts),
            (b.len, b.lines, &b.header, &b.end, &b.last_type, &b.last_ts),
            "{}",
            r.run_id
        );
        assert_eq!(
            by_line.line_hashes(&r.run_id, 1).unwrap(),
            whole.line_hashes(&r.run_id, 1).unwrap()
        );
    }
    let list = |b: &PgBackend| -> Vec<RunSummary> {
        b.list_runs(&RunListQuery::default())
            .unwrap()
            .runs
            .into_iter()
            .map(comparable)
            .collect()
    };
    assert_eq!(list(&by_line), list(&whole));
    let local: Vec<RunSummary> = runs.into_iter().map(comparable).collect();
    assert_eq!(list(&by_line), local);
}

/// Calls, in this database since the last reset, of statements whose text contains `part`.
fn calls_containing(b: &PgBackend, part: &'static str) -> i64 {
    b.with_client(move |c| {
        c.query_one(
            "SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements \
             WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) \
             AND strpos(query, $1) > 0",
            &[&part],
        )
        .map(|r| r.get(0))
        .map_err(q)
    })
    .unwrap()
}

fn text_event(run: &str, word: &str) -> Vec<u8> {
    format!(
        "{{\"type\":\"agent.event\",\"run_id\":\"{run}\",\"ts\":\"2026-02-03T12:01:00.000Z\",\"seq\":1,\"event\":{{\"type\":\"text\",\"content\":\"the {word} is here\"}}}}\n"
    )
    .into_bytes()
}

#[test]
fn appends_without_search_documents_never_touch_search_docs() {
    let Some(c) = cluster() else { return };
    let b = counted(c, "writer");
    reset(&b);
    // A header and five status lines, one per append: no search document, so none of these
    // statements has a search_docs part (nor an array: one line goes as plain values).
    let mut all = header("r4");
    let mut len = b.append_lines("r4", 0, &header("r4")).unwrap().end;
    for i in 0..5 {
        let l = line("r4", i);
        len = b.append_lines("r4", len, &l).unwrap().end;
        all.extend_from_slice(&l);
    }
    assert_eq!(calls(&b, STATEMENTS), vec![1, 5, 0, 0, 0]);
    assert_eq!(calls_containing(&b, "search_docs"), 0);
    assert_eq!(calls_containing(&b, "unnest("), 0);
    // A text event: its one-line append writes its document, and search finds it at once.
    let t = text_event("r4", "zanzibarword");
    let at_text = len;
    len = b.append_lines("r4", len, &t).unwrap().end;
    all.extend_from_slice(&t);
    assert_eq!(calls_containing(&b, "search_docs"), 1);
    assert_eq!(calls_containing(&b, "unnest("), 1, "the documents' arrays");
    // Two lines at once (a status and a text event): the arrays form, with documents.
    let two = [line("r4", 9), text_event("r4", "quokkaword")].concat();
    let at_two = len + line("r4", 9).len() as u64;
    len = b.append_lines("r4", len, &two).unwrap().end;
    all.extend_from_slice(&two);
    assert_eq!(calls(&b, STATEMENTS), vec![1, 7, 0, 0, 0]);
    assert_eq!(calls_containing(&b, "search_docs"), 2);
    assert_eq!(b.read_all("r4", Extent::Committed).unwrap(), all);
    assert_eq!(len, all.len() as u64);
    let found = |word: &str| -> Vec<(String, u64, String)> {
        let mut q = RunSearchQuery::new(word);
        q.limit = 10;
        b.search(&q)
            .unwrap()
            .into_iter()
            .map(|h| (h.run_id, h.byte_offset, h.kind))
            .collect()
    };
    assert_eq!(
        found("zanzibarword"),
        vec![("r4".to_owned(), at_text, "assistant".to_owned())]
    );
    assert_eq!(
        found("quokkaword"),
        vec![("r4".to_owned(), at_two, "assistant".to_owned())]
    );
    // A run whose first line alone gives a document (the one-line form of the create, with
    // its search_docs part): found at once, and not listed (no header).
    let before = calls_containing(&b, "search_docs");
    let start = text_event("r5", "wombatword");
    b.append_lines("r5", 0, &start).unwrap();
    assert_eq!(calls_containing(&b, "search_docs"), before + 1);
    assert_eq!(
        found("wombatword"),
        vec![("r5".to_owned(), 0, "assistant".to_owned())]
    );
    // The run row says it is a run (its first record is a header), and so it is listed.
    let listed = b.list_runs(&RunListQuery::default()).unwrap().runs;
    assert_eq!(
        listed.iter().map(|r| r.run_id.as_str()).collect::<Vec<_>>(),
        vec!["r4"]
    );
}

#[test]
fn a_run_without_a_header_is_stored_but_not_listed() {
    let Some(c) = cluster() else { return };
    let b = backend(&c.fresh_db(), "writer");
    // No header first: kept byte for byte, never listed, whichever form wrote it.
    let status = line("nh", 0);
    let mut len = b.append_lines("nh", 0, &status).unwrap().end;
    len = b.append_lines("nh", len, &header("nh")).unwrap().end;
    len = b
        .append_lines("nh", len, &[line("nh", 1), line("nh", 2)].concat())
        .unwrap()
        .end;
    assert_eq!(b.run_fingerprint("nh").unwrap().map(|f| f.len), Some(len));
    let h = header("ok");
    b.append_lines("ok", 0, &h).unwrap();
    let listed = b.list_runs(&RunListQuery::default()).unwrap().runs;
    assert_eq!(
        listed.iter().map(|r| r.run_id.as_str()).collect::<Vec<_>>(),
        vec!["ok"]
    );
    let is_run = b
        .with_client(|c| {
            c.query("SELECT run_id, is_run FROM runs ORDER BY run_id", &[])
                .map_err(q)
        })
        .unwrap()
        .into_iter()
        .map(|r| (r.get::<_, String>(0), r.get::<_, Option<bool>>(1)))
        .collect::<Vec<_>>();
    assert_eq!(
        is_run,
        vec![
            ("nh".to_owned(), Some(false)),
            ("ok".to_owned(), Some(true))
        ]
    );
}

#[test]
fn migration_4_keeps_every_run_row_listed_as_before_and_leaves_no_per_statement_checks() {
    let Some(c) = cluster() else { return };
    let conn = c.fresh_db();
    // A store at schema version 3, whose is_run was computed by PostgreSQL.
    let mut old = postgres::Client::connect(&conn, postgres::NoTls).unwrap();
    old.batch_execute(
        "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, \
         applied_at timestamptz NOT NULL DEFAULT now())",
    )
    .unwrap();
    for m in schema::MIGRATIONS.iter().filter(|m| m.version <= 3) {
        old.batch_execute(m.sql).unwrap();
        old.execute(
            "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
            &[&m.version, &m.name],
        )
        .unwrap();
    }
    old.batch_execute(
        "INSERT INTO runs (run_id, committed_len, line_count, origin_host, summary) VALUES \
         ('a', 0, 0, 'h', convert_to('{\"header_state\":\"seen\"}', 'UTF8')), \
         ('b', 0, 0, 'h', convert_to('{\"header_state\":\"missing\"}', 'UTF8'))",
    )
    .unwrap();
    drop(old);
    let b = backend(&conn, "writer");
    assert_eq!(b.migration().applied, vec![4, 5]);
    let rows = b
        .with_client(|c| {
            c.query(
                "SELECT run_id, is_run, \
                 (SELECT attgenerated::text FROM pg_attribute \
                  WHERE attrelid = 'runs'::regclass AND attname = 'is_run') \
                 FROM runs ORDER BY run_id",
                &[],
            )
            .map_err(q)
        })
        .unwrap()
        .into_iter()
        .map(|r| {
            (
                r.get::<_, String>(0),
                r.get::<_, Option<bool>>(1),
                r.get::<_, String>(2),
            )
        })
        .collect::<Vec<_>>();
    assert_eq!(
        rows,
        vec![
            ("a".to_owned(), Some(true), String::new()),
            ("b".to_owned(), Some(false), String::new())
        ]
    );
    // No CHECK constraint left on the tables every append writes.
    let checks: i64 = b
        .with_client(|c| {
            c.query_one(
                "SELECT count(*) FROM pg_constraint WHERE contype = 'c' \
                 AND conrelid IN ('runs'::regclass, 'run_lines'::regclass)",
                &[],
            )
            .map(|r| r.get(0))
            .map_err(q)
        })
        .unwrap();
    assert_eq!(checks, 0);
}

#[test]
fn appends_of_many_lines_go_as_binary_copy_and_a_few_as_one_statement() {
    let Some(c) = cluster() else { return };
    let b = counted(c, "sync");
    reset(&b);
    // (The COPY itself is not counted here: pg_stat_statements does not count every
    // execution of a prepared utility statement. The lines of the transaction go either as
    // an INSERT from arrays, up to 16 lines, or by COPY: no `unnest(` and the transaction's
    // statements counted say which.)
    // A new run shipped whole (what `sync` sends: hundreds of lines in one chunk): the
    // append's transaction with a COPY, not the one statement's arrays; the run row is
    // inserted whole with its listing columns, never locked nor rewritten after the lines.
    let mut all = header("big");
    for i in 0..200 {
        all.extend_from_slice(&line("big", i));
    }
    let mut len = b.append_lines("big", 0, &all).unwrap().end;
    assert_eq!(len, all.len() as u64);
    assert_eq!(calls(&b, STATEMENTS), vec![0, 0, 0, 0, 0]);
    assert_eq!(calls(&b, CREATE_WHOLE), vec![1]);
    assert_eq!(calls_containing(&b, "unnest("), 0);
    let listed = b.list_runs(&RunListQuery::default()).unwrap().runs;
    assert_eq!(
        listed
            .iter()
            .map(|r| (r.run_id.as_str(), r.record_count, r.stored_bytes))
            .collect::<Vec<_>>(),
        vec![("big", 201, len)]
    );
    // The same lines again (a retry after a lost acknowledgement): the row exists, so the
    // locked transaction recognises them; nothing is stored twice.
    let again = b.append_lines("big", 0, &all).unwrap();
    assert!(again.was_retry());
    assert_eq!(again.already_present, len);
    assert_eq!(calls(&b, STATEMENTS), vec![0, 0, 1, 0, 0]);
    assert_eq!(calls(&b, CREATE_WHOLE), vec![2]);
    // Many more lines at the end of the run this client knows: a COPY again, and the run's
    // tip row updated; statuses change no column of the run row, which is left alone.
    let more: Vec<u8> = (200..300).flat_map(|i| line("big", i)).collect();
    len = b.append_lines("big", len, &more).unwrap().end;
    all.extend_from_slice(&more);
    assert_eq!(calls(&b, STATEMENTS), vec![0, 0, 2, 1, 0]);
    assert_eq!(calls_containing(&b, "unnest("), 0);
    // Sixteen lines (a runtime's batch) at the known end: one statement.
    let few: Vec<u8> = (300..316).flat_map(|i| line("big", i)).collect();
    len = b.append_lines("big", len, &few).unwrap().end;
    all.extend_from_slice(&few);
    assert_eq!(calls(&b, STATEMENTS), vec![0, 1, 2, 1, 0]);
    assert_eq!(calls_containing(&b, "unnest("), 1);
    // A new run of sixteen lines: one statement.
    let small: Vec<u8> = [header("small")]
        .into_iter()
        .chain((0..15).map(|i| line("small", i)))
        .flatten()
        .collect();
    b.append_lines("small", 0, &small).unwrap();
    assert_eq!(calls(&b, STATEMENTS), vec![1, 1, 2, 1, 0]);
    assert_eq!(calls(&b, CREATE_WHOLE), vec![2]);
    assert_eq!(calls_containing(&b, "unnest("), 2);
    // Whichever form stored them, the bytes and line numbers are the ones appended.
    assert_eq!(b.read_all("big", Extent::Committed).unwrap(), all);
    assert_eq!(b.read_all("small", Extent::Committed).unwrap(), small);
    let fp = b.run_fingerprint("big").unwrap().unwrap();
    assert_eq!((fp.len, fp.lines), (len, 317));
    let numbers = b
        .with_client(|c| {
            c.query_one(
                "SELECT count(*), min(line_no), max(line_no), count(DISTINCT line_no) \
                 FROM run_lines l JOIN runs r USING (run_key) WHERE r.run_id = 'big'",
                &[],
            )
            .map(|r| {
                (
                    r.get::<_, i64>(0),
                    r.get::<_, i64>(1),
                    r.get::<_, i64>(2),
                    r.get::<_, i64>(3),
                )
            })
            .map_err(q)
        })
        .unwrap();
    assert_eq!(numbers, (317, 1, 317, 317));
}

fn run_start(run: &str, text: &str) -> Vec<u8> {
    format!(
        "{{\"type\":\"run.start\",\"run_id\":\"{run}\",\"ts\":\"2026-02-03T12:00:30.000Z\",\"input\":{{\"type\":\"text\",\"text\":\"{text}\"}},\"ui_context\":{{\"workspace_root\":\"/w/ui\"}}}}\n"
    )
    .into_bytes()
}

fn run_end(run: &str) -> Vec<u8> {
    format!(
        "{{\"type\":\"run.end\",\"run_id\":\"{run}\",\"ts\":\"2026-02-03T12:00:59.000Z\",\"outcome\":\"completed\"}}\n"
    )
    .into_bytes()
}

/// The transaction ids that wrote the current versions of run `run`'s row and of its tip row.
fn row_versions(b: &PgBackend, run: &'static str) -> (String, String) {
    b.with_client(move |c| {
        c.query_one(
            "SELECT r.xmin::text, t.xmin::text FROM runs r \
             JOIN run_tips t ON t.run_key = r.run_key WHERE r.run_id = $1",
            &[&run],
        )
        .map(|r| (r.get(0), r.get(1)))
        .map_err(q)
    })
    .unwrap()
}

#[test]
fn the_run_row_is_rewritten_only_when_an_append_changes_one_of_its_columns() {
    let Some(c) = cluster() else { return };
    let b = counted(c, "writer");
    reset(&b);
    let mut all = header("rw");
    let mut len = b.append_lines("rw", 0, &all).unwrap().end;
    let (run0, tip0) = row_versions(&b, "rw");
    // Statuses, one per append (the one statement) and twenty at once (the transaction with
    // a COPY): they change counts, the last status and time, all in the tip row.
    for i in 0..10 {
        let l = line("rw", i);
        len = b.append_lines("rw", len, &l).unwrap().end;
        all.extend_from_slice(&l);
    }
    let (run1, tip1) = row_versions(&b, "rw");
    assert_eq!(run1, run0, "a status rewrote the run row");
    assert_ne!(tip1, tip0);
    let many: Vec<u8> = (10..30).flat_map(|i| line("rw", i)).collect();
    len = b.append_lines("rw", len, &many).unwrap().end;
    all.extend_from_slice(&many);
    let (run2, tip2) = row_versions(&b, "rw");
    assert_eq!(run2, run0, "twenty statuses rewrote the run row");
    assert_ne!(tip2, tip1);
    assert_eq!(calls(&b, STATEMENTS), vec![1, 10, 1, 1, 0]);
    let listed = b.list_runs(&RunListQuery::default()).unwrap().runs;
    assert_eq!(
        listed
            .iter()
            .map(|r| (
                r.record_count,
                r.last_status.as_deref(),
                r.last_ts.as_deref(),
                r.stored_bytes
            ))
            .collect::<Vec<_>>(),
        vec![(31, Some("running"), Some("2026-02-03T12:00:29.000Z"), len)]
    );
    // The first input and the workspace are listing columns: the run row is rewritten, in
    // the same one statement.
    let start = run_start("rw", "find the bug");
    len = b.append_lines("rw", len, &start).unwrap().end;
    all.extend_from_slice(&start);
    let (run3, _) = row_versions(&b, "rw");
    assert_ne!(run3, run0, "the first input did not reach the run row");
    assert_eq!(calls(&b, STATEMENTS), vec![1, 11, 1, 1, 0]);
    let l = line("rw", 30);
    len = b.append_lines("rw", len, &l).unwrap().end;
    all.extend_from_slice(&l);
    assert_eq!(row_versions(&b, "rw").0, run3);
    // The end: the outcome, in the one statement too.
    let end = run_end("rw");
    len = b.append_lines("rw", len, &end).unwrap().end;
    all.extend_from_slice(&end);
    assert_ne!(
        row_versions(&b, "rw").0,
        run3,
        "the outcome did not reach the run row"
    );
    assert_eq!(calls(&b, STATEMENTS), vec![1, 13, 1, 1, 0]);
    // The outcome is a listing column: filtering by it finds the run.
    let q = RunListQuery {
        outcome: Some(session_storage::Outcome::Completed),
        ..RunListQuery::default()
    };
    assert_eq!(b.list_runs(&q).unwrap().runs.len(), 1);
    // Listed exactly as the same bytes appended whole, and as the local store lists them.
    let whole = backend(&c.fresh_db(), "whole");
    assert_eq!(whole.append_lines("rw", 0, &all).unwrap().end, len);
    let list = |b: &PgBackend| -> Vec<RunSummary> {
        b.list_runs(&RunListQuery::default())
            .unwrap()
            .runs
            .into_iter()
            .map(comparable)
            .collect()
    };
    let by_append = list(&b);
    assert_eq!(by_append, list(&whole));
    assert_eq!(by_append[0].first_input.as_deref(), Some("find the bug"));
    assert_eq!(by_append[0].record_count, 34);
    assert_eq!(b.read_all("rw", Extent::Committed).unwrap(), all);
}

#[test]
fn migration_5_moves_what_appends_change_to_run_tips_and_lists_as_before() {
    let Some(c) = cluster() else { return };
    // What a build before migration 5 stored: the run row with every column, its summary
    // whole. Taken from a store of this build (the run row's summary and the tip's tally
    // joined back into one object).
    let reference = backend(&c.fresh_db(), "old");
    let mut all = header("m");
    all.extend(run_start("m", "migrate me"));
    for i in 0..5 {
        all.extend(line("m", i));
    }
    let len = reference.append_lines("m", 0, &all).unwrap().end;
    let old_row = reference
        .with_client(|c| {
            c.query_one(
                "SELECT r.session_id, r.started_at_utc, r.outcome, r.workspace_norm, \
                 t.activity_ms, r.summary, t.tally, r.first_line_sha, t.last_line_sha, r.is_run, \
                 t.committed_len, t.line_count FROM runs r JOIN run_tips t ON t.run_key = r.run_key \
                 WHERE r.run_id = 'm'",
                &[],
            )
            .map_err(q)
        })
        .unwrap();
    let mut summary: serde_json::Value =
        serde_json::from_slice(old_row.get::<_, &[u8]>(5)).unwrap();
    let tally: serde_json::Value = serde_json::from_slice(old_row.get::<_, &[u8]>(6)).unwrap();
    for (k, v) in tally.as_object().unwrap() {
        summary
            .as_object_mut()
            .unwrap()
            .insert(k.clone(), v.clone());
    }
    assert!(summary.get("record_count").is_some(), "{summary}");
    let summary = serde_json::to_vec(&summary).unwrap();
    let conn = c.fresh_db();
    let mut old = postgres::Client::connect(&conn, postgres::NoTls).unwrap();
    old.batch_execute(
        "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, \
         applied_at timestamptz NOT NULL DEFAULT now())",
    )
    .unwrap();
    for m in schema::MIGRATIONS.iter().filter(|m| m.version <= 4) {
        old.batch_execute(m.sql).unwrap();
        old.execute(
            "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
            &[&m.version, &m.name],
        )
        .unwrap();
    }
    let key: i64 = old
        .query_one(
            "INSERT INTO runs (run_id, committed_len, line_count, origin_host, session_id, \
             started_at_utc, outcome, workspace_norm, activity_ms, summary, first_line_sha, \
             last_line_sha, is_run) VALUES ('m', $1, $2, 'old', $3, $4, $5, $6, $7, $8, $9, $10, $11) \
             RETURNING run_key",
            &[
                &old_row.get::<_, i64>(10),
                &old_row.get::<_, i64>(11),
                &old_row.get::<_, Option<String>>(0),
                &old_row.get::<_, String>(1),
                &old_row.get::<_, String>(2),
                &old_row.get::<_, Option<String>>(3),
                &old_row.get::<_, Option<i64>>(4),
                &summary,
                &old_row.get::<_, Option<Vec<u8>>>(7),
                &old_row.get::<_, Option<Vec<u8>>>(8),
                &old_row.get::<_, bool>(9),
            ],
        )
        .unwrap()
        .get(0);
    let mut offset = 0i64;
    for (i, l) in all.split_inclusive(|b| *b == b'\n').enumerate() {
        old.execute(
            "INSERT INTO run_lines (run_key, byte_offset, line_no, data) VALUES ($1, $2, $3, $4)",
            &[&key, &offset, &(i as i64 + 1), &l],
        )
        .unwrap();
        offset += l.len() as i64;
    }
    drop(old);
    let b = backend(&conn, "writer");
    assert_eq!(b.migration().applied, vec![5]);
    let gone: i64 = b
        .with_client(|c| {
            c.query_one(
                "SELECT count(*) FROM information_schema.columns WHERE table_name = 'runs' \
                 AND column_name IN ('committed_len', 'line_count', 'last_write_at', \
                 'activity_ms', 'last_line_sha')",
                &[],
            )
            .map(|r| r.get(0))
            .map_err(q)
        })
        .unwrap();
    assert_eq!(gone, 0, "the run row keeps none of what appends change");
    let list = |b: &PgBackend| -> Vec<RunSummary> {
        b.list_runs(&RunListQuery::default())
            .unwrap()
            .runs
            .into_iter()
            .map(comparable)
            .collect()
    };
    assert_eq!(list(&b), list(&reference));
    assert_eq!(
        b.run_fingerprint("m").unwrap(),
        reference.run_fingerprint("m").unwrap()
    );
    // Appends go on from the migrated length, counted on from the migrated summary, and the
    // run still lists as the same bytes appended by this build.
    let mut end = len;
    for i in 5..8 {
        let l = line("m", i);
        let done = b.append_lines("m", end, &l).unwrap();
        assert_eq!(reference.append_lines("m", end, &l).unwrap().end, done.end);
        end = done.end;
    }
    assert_eq!(list(&b), list(&reference));
    assert_eq!(list(&b)[0].record_count, 10);
    assert_eq!(
        b.run_fingerprint("m").unwrap(),
        reference.run_fingerprint("m").unwrap()
    );
    // A stale length is still refused.
    match b.append_lines("m", len, &line("m", 99)) {
        Err(StorageError::LengthConflict { committed, .. }) => assert_eq!(committed, end),
        other => panic!("a stale compare-and-swap was not refused: {other:?}"),
    }
    // Removing the run removes its tip with it.
    b.with_client(|c| {
        c.batch_execute(
            "DELETE FROM run_lines WHERE run_key = (SELECT run_key FROM runs WHERE run_id = 'm'); \
             DELETE FROM runs WHERE run_id = 'm'",
        )
        .map_err(q)
    })
    .unwrap();
    let tips: i64 = b
        .with_client(|c| {
            c.query_one("SELECT count(*) FROM run_tips", &[])
                .map(|r| r.get(0))
                .map_err(q)
        })
        .unwrap();
    assert_eq!(tips, 0);
}

#[test]
fn fingerprints_of_many_runs_are_a_statement_per_batch_and_equal_to_one_by_one() {
    let Some(c) = cluster() else { return };
    let b = counted(c, "copier");
    // Three stored runs of different shapes, among ids that name no run.
    let mut one = header("fa");
    one.extend(line("fa", 1));
    b.append_lines("fa", 0, &one).unwrap();
    b.append_lines("fb", 0, &header("fb")).unwrap();
    let mut many = header("fc");
    for i in 0..40 {
        many.extend(line("fc", i));
    }
    b.append_lines("fc", 0, &many).unwrap();
    let mut ids: Vec<String> = (0..2 * session_pg::FINGERPRINT_BATCH + 10)
        .map(|i| format!("absent-{i}"))
        .collect();
    ids[5] = "fa".to_owned();
    ids[session_pg::FINGERPRINT_BATCH + 1] = "fb".to_owned();
    ids[2 * session_pg::FINGERPRINT_BATCH + 9] = "fc".to_owned();
    ids.push("fa".to_owned());
    let asked: Vec<&str> = ids.iter().map(String::as_str).collect();
    reset(&b);
    let got = b.run_fingerprints(&asked).unwrap();
    // Three batches of ids, one statement each: not one round trip per run.
    assert_eq!(calls(&b, &["WHERE r.run_id = ANY($1)"]), vec![3]);
    assert_eq!(got.len(), asked.len());
    for (id, fp) in asked.iter().zip(&got) {
        assert_eq!(fp, &b.run_fingerprint(id).unwrap(), "{id}");
    }
    let present: Vec<&str> = asked
        .iter()
        .zip(&got)
        .filter(|(_, fp)| fp.is_some())
        .map(|(id, _)| *id)
        .collect();
    assert_eq!(present, ["fa", "fb", "fc", "fa"]);
    assert_eq!(
        got[5].as_ref().map(|f| (f.len, f.lines)),
        Some((one.len() as u64, 2))
    );
    assert!(b.run_fingerprints(&[]).unwrap().is_empty());
    // An id that cannot name a stored run is refused before anything is asked.
    reset(&b);
    assert!(matches!(
        b.run_fingerprints(&["fa", "../x"]),
        Err(StorageError::UnsafeId { .. })
    ));
    assert_eq!(calls(&b, &["WHERE r.run_id = ANY($1)"]), vec![0]);
}
