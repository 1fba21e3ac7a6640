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
use session_pg::{PgBackend, PgConfig, PgError, PgOptions};
use session_storage::local::LocalBackend;
use session_storage::{Extent, RunCatalogue, RunListQuery, RunSummary, StorageError};

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

/// Calls of statements starting with each of `prefixes`, in this database, since the last
/// reset.
fn calls(b: &PgBackend, prefixes: &'static [&'static str]) -> Vec<i64> {
    b.with_client(move |c| {
        prefixes
            .iter()
            .map(|p| {
                c.query_one(
                    "SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements \
                     WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) \
                     AND starts_with(query, $1)",
                    &[p],
                )
                .map(|r| r.get(0))
                .map_err(q)
            })
            .collect()
    })
    .unwrap()
}

fn reset(b: &PgBackend) {
    b.with_client(|c| {
        c.batch_execute("SELECT pg_stat_statements_reset()")
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

const STATEMENTS: &[&str] = &[
    "WITH new AS (INSERT INTO runs",
    "WITH cas AS (UPDATE runs",
    "SELECT committed_len, line_count, summary, run_key FROM runs WHERE run_id = $1 FOR UPDATE",
    "UPDATE runs SET committed_len",
];

#[test]
fn appends_at_the_end_of_a_known_run_are_one_statement_each() {
    let Some(c) = cluster() else { return };
    let conn = c.fresh_db();
    let b = backend(&conn, "writer");
    b.with_client(|c| {
        c.batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            .map_err(q)
    })
    .unwrap();
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
    assert_eq!(calls(&b, STATEMENTS), vec![1, 20, 0, 0]);
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
    assert_eq!(calls(&b, STATEMENTS), vec![1, 21, 1, 0]);
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
