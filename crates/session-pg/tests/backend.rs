//! session-pg against a live cluster: connection strings and redaction, threads (tokio),
//! migrations racing, byte-exact storage with the parser's flags, parity with the local
//! store on the recorded reference data, retention.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Barrier};

use session_pg::{PgBackend, PgConfig, PgError, PgOptions, schema};
use session_storage::local::LocalBackend;
use session_storage::{
    Expected, Extent, RunCatalogue, RunListQuery, RunSummary, SessionListQuery, SessionStore,
};

macro_rules! cluster {
    () => {
        match common::shared() {
            Some(c) => c,
            None => return,
        }
    };
}

#[test]
fn url_with_a_socket_host_connects_and_errors_never_show_the_password() {
    let c = cluster!();
    let db = c.fresh_db();
    let dbname = db
        .split("dbname=")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap();
    let url = format!(
        "postgresql://postgres:hunter2@/{dbname}?host={}&sslmode=disable",
        c.socket_dir.display()
    );
    let b = PgBackend::open(&url).expect("a URL with ?host=<socket dir> connects");
    assert!(!format!("{b:?}").contains("hunter2"));
    assert_eq!(b.migration().version, schema::latest_version());
    // libpq's default sslmode (prefer) over a unix socket: plain, with or without `tls`.
    PgBackend::open(&db.replace(" sslmode=disable", "")).expect("sslmode=prefer connects");
    // A server that is not there: the error names the store without its password.
    let missing = format!(
        "postgresql://postgres:hunter2@/{dbname}?host={}/nowhere&sslmode=disable",
        c.socket_dir.display()
    );
    let e = PgBackend::open(&missing).unwrap_err();
    let shown = format!("{e} / {e:?}");
    assert!(matches!(e, PgError::Connect { .. }), "{shown}");
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(shown.contains("postgres:***@"), "{shown}");
    // key=value form with a password, to a database that does not exist.
    let kv = format!(
        "host={} user=postgres password='hunter2' dbname=no_such_db sslmode=disable",
        c.socket_dir.display()
    );
    let e = PgBackend::open(&kv).unwrap_err();
    let shown = format!("{e} / {e:?}");
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(shown.contains("password=***"), "{shown}");
}

#[test]
fn tls_required_without_the_feature_is_a_clear_error() {
    if cfg!(feature = "tls") {
        return;
    }
    let c = cluster!();
    let conn = c
        .conn_str("postgres")
        .replace("sslmode=disable", "sslmode=require");
    let e = PgBackend::open(&conn).unwrap_err();
    assert!(matches!(e, PgError::Tls { .. }), "{e}");
    assert!(e.to_string().contains("`tls` feature"), "{e}");
}

#[test]
fn the_backend_works_on_tokio_threads_where_the_bare_client_panics() {
    let c = cluster!();
    let b = Arc::new(c.fresh_backend());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let header = b"{\"type\":\"header\",\"schema_version\":1,\"run_id\":\"t\",\"started_at\":\"2026-02-03T12:00:00.000Z\"}\n";
    // On a worker thread (inside a task) and inside block_on.
    let b2 = b.clone();
    let appended = rt
        .block_on(async move {
            tokio::spawn(async move { b2.append_lines("t", 0, header) })
                .await
                .unwrap()
        })
        .unwrap();
    assert_eq!(appended.end, header.len() as u64);
    let b3 = b.clone();
    let stat = rt
        .block_on(async move { b3.stat_run("t") })
        .unwrap()
        .unwrap();
    assert_eq!(stat.len, header.len() as u64);
    // And through spawn_blocking, the recommended way (it keeps the worker free).
    let b4 = b.clone();
    let listed = rt
        .block_on(async move {
            tokio::task::spawn_blocking(move || b4.list_runs(&RunListQuery::default()))
                .await
                .unwrap()
        })
        .unwrap();
    assert_eq!(listed.runs.len(), 1);
    // The rule this design works around: the bare synchronous client panics there.
    let conn = c.conn_str("postgres");
    let bare = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(async { postgres::Client::connect(&conn, postgres::NoTls).map(drop) })
    }));
    assert!(
        bare.is_err(),
        "the bare client did not panic inside a runtime"
    );
}

#[test]
fn a_synchronous_caller_uses_its_connection_on_its_own_thread_and_a_runtime_thread_never() {
    let c = cluster!();
    let b = Arc::new(c.fresh_backend());
    let thread_of_call = |b: &PgBackend| {
        b.with_client(|client| {
            client
                .query_one("SELECT 1", &[])
                .map_err(|source| PgError::Query { op: "test", source })?;
            Ok(std::thread::current().id())
        })
        .unwrap()
    };
    // A synchronous caller: its pooled connection is used right here (no thread switch per
    // call), from two threads in turn with the same pool.
    let me = std::thread::current().id();
    assert_eq!(thread_of_call(&b), me);
    let b2 = b.clone();
    let (other, on) =
        std::thread::spawn(move || (std::thread::current().id(), thread_of_call(&b2)))
            .join()
            .unwrap();
    assert_eq!(on, other);
    // In a runtime's context (inside block_on, inside a task): handed to a thread of the
    // pool, never run where the bare client would panic.
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let b3 = b.clone();
    let in_block_on = rt.block_on(async move { thread_of_call(&b3) });
    assert_ne!(in_block_on, me);
    let mt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .unwrap();
    let b4 = b.clone();
    let (worker, on) = mt
        .block_on(async move {
            tokio::spawn(async move { (std::thread::current().id(), thread_of_call(&b4)) }).await
        })
        .unwrap();
    assert_ne!(on, worker);
    // And the caller's thread is usable again afterwards.
    assert_eq!(thread_of_call(&b), me);
    // The last handle of a backend whose connections were used on this thread, dropped
    // inside a task: its connections are closed without a panic (closing runs the client's
    // runtime, which tokio refuses there).
    assert_eq!(Arc::strong_count(&b), 1);
    let dropped = mt.block_on(async move { tokio::spawn(async move { drop(b) }).await });
    assert!(dropped.is_ok(), "dropping the backend in a task panicked");
}

#[test]
fn eight_processes_migrating_one_fresh_database_at_once() {
    let c = cluster!();
    let conn = c.fresh_db();
    let start = Arc::new(Barrier::new(8));
    let reports: Vec<_> = (0..8)
        .map(|_| {
            let (conn, start) = (conn.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                PgBackend::open_with(PgConfig::parse(&conn).unwrap(), common::small_options())
                    .map(|b| b.migration().clone())
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap().expect("every opener succeeds"))
        .collect();
    let appliers: Vec<_> = reports.iter().filter(|r| !r.applied.is_empty()).collect();
    assert_eq!(
        appliers.len(),
        1,
        "exactly one opener migrates: {reports:?}"
    );
    assert_eq!(
        appliers[0].applied,
        schema::MIGRATIONS
            .iter()
            .map(|m| m.version)
            .collect::<Vec<_>>()
    );
    assert!(
        reports
            .iter()
            .all(|r| r.version == schema::latest_version())
    );
    let mut admin = postgres::Client::connect(&conn, postgres::NoTls).unwrap();
    let rows = admin
        .query(
            "SELECT version FROM schema_migrations ORDER BY version",
            &[],
        )
        .unwrap();
    let versions: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(
        versions,
        schema::MIGRATIONS
            .iter()
            .map(|m| m.version)
            .collect::<Vec<_>>()
    );
    // A database migrated by a newer build is refused, and left alone.
    admin
        .execute(
            "INSERT INTO schema_migrations (version, name) VALUES (999, 'from the future')",
            &[],
        )
        .unwrap();
    match PgBackend::open(&conn) {
        Err(PgError::SchemaTooNew { found, known }) => {
            assert_eq!((found, known), (999, schema::latest_version()))
        }
        other => panic!("{other:?}"),
    }
    let no_migrate = PgOptions {
        migrate: false,
        ..common::small_options()
    };
    assert!(matches!(
        PgBackend::open_with(PgConfig::parse(&conn).unwrap(), no_migrate),
        Err(PgError::SchemaTooNew { .. })
    ));
}

/// Every damage kind the reader knows, one append each: stored byte for byte, and flagged per
/// line by the parser.
#[test]
fn damaged_lines_are_stored_exactly_and_flagged() {
    let c = cluster!();
    let b = c.fresh_backend();
    let mut nul = vec![0u8; 9];
    nul.extend_from_slice(b"{\"type\":\"run.status\",\"run_id\":\"d\",\"ts\":\"2026-02-03T12:00:00.100Z\",\"status\":\"running\"}\n");
    let chunks: Vec<(&str, Vec<u8>)> = vec![
        (
            "",
            b"\xef\xbb\xbf{\"type\":\"header\",\"schema_version\":1,\"run_id\":\"d\",\"session_id\":\"s\\u0000nul\",\"started_at\":\"2026-02-03T12:00:00.000Z\"}\r\n".to_vec(),
        ),
        ("nul_run", nul),
        ("invalid_utf8", b"{\"type\":\"run.status\",\"run_id\":\"d\",\"ts\":\"2026-02-03T12:00:00.200Z\",\"status\":\"running\",\"message\":\"\xff\xfe\"}\n".to_vec()),
        ("lone_surrogate", b"{\"type\":\"run.status\",\"run_id\":\"d\",\"ts\":\"2026-02-03T12:00:00.300Z\",\"status\":\"running\",\"message\":\"\\ud83d\"}\n".to_vec()),
        ("corrupt_line", b"{\"type\":\"run.status\",\"run_id\":\"d\",\"ts\":\"2026-02-03T12:00:00.400Z\",\"status\":\"running\"}{\"type\":\"run.status\",\"run_id\":\"d\",\"ts\":\"2026-02-03T12:00:00.401Z\",\"status\":\"running\"}\n".to_vec()),
        ("sealed_fragment", b"{\"type\":\"run.end\",\"run_id\":\"d\",\"ts\":\"2026-02\n".to_vec()),
        ("schema_mismatch", b"{\"type\":\"run.status\",\"run_id\":\"d\",\"status\":17}\n".to_vec()),
        ("duplicate_header", b"{\"type\":\"header\",\"schema_version\":1,\"run_id\":\"d\",\"started_at\":\"2026-02-03T12:00:00.500Z\"}\n".to_vec()),
        ("", b"\r\n".to_vec()),
    ];
    let mut all = Vec::new();
    for (_, chunk) in &chunks {
        b.append_lines("d", all.len() as u64, chunk).unwrap();
        all.extend_from_slice(chunk);
    }
    assert_eq!(b.read_all("d", Extent::Committed).unwrap(), all);
    // A torn tail is never stored: it waits until its line is complete.
    let torn = b"{\"type\":\"run.end\",\"run_id\":\"d\"";
    assert!(b.append_lines("d", all.len() as u64, torn).is_err());
    assert_eq!(b.read_all("d", Extent::WithTornTail).unwrap(), all);
    let conn = b.config().clone();
    let flags = b
        .with_client(|c| {
            Ok(c.query(
                "SELECT coalesce(damage, '') FROM run_lines l JOIN runs r USING (run_key) WHERE r.run_id = 'd' ORDER BY byte_offset",
                &[],
            )
            .map_err(|e| PgError::Query { op: "test", source: e })?
            .iter()
            .map(|r| r.get::<_, String>(0))
            .collect::<Vec<_>>())
        })
        .unwrap();
    let want: Vec<&str> = chunks.iter().map(|(k, _)| *k).collect();
    assert_eq!(flags, want, "per-line damage flags");
    // The same lines in one large append (written with COPY rather than INSERT).
    let mut big = all.clone();
    for i in 0..20 {
        big.extend_from_slice(format!("{{\"type\":\"run.status\",\"run_id\":\"d\",\"ts\":\"2026-02-03T12:00:01.000Z\",\"status\":\"running\",\"message\":\"{i}\"}}\n").as_bytes());
    }
    b.append_lines("d-copy", 0, &big).unwrap();
    assert_eq!(b.read_all("d-copy", Extent::Committed).unwrap(), big);
    let flags = b
        .with_client(|c| {
            Ok(c.query(
                "SELECT coalesce(damage, '') FROM run_lines l JOIN runs r USING (run_key) WHERE r.run_id = 'd-copy' ORDER BY byte_offset",
                &[],
            )
            .map_err(|e| PgError::Query { op: "test", source: e })?
            .iter()
            .map(|r| r.get::<_, String>(0))
            .collect::<Vec<_>>())
        })
        .unwrap();
    assert_eq!(
        flags[..want.len()],
        want[..],
        "per-line damage flags of a COPY"
    );
    assert!(flags[want.len()..].iter().all(String::is_empty));
    // The session id with a NUL escape was not refused by the text column.
    let page = b.list_runs(&RunListQuery::default()).unwrap();
    assert_eq!(page.runs[0].session_id.as_deref(), Some("s\0nul"));
    drop(conn);
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

/// The recorded reference runs and sessions, stored in PostgreSQL and locally: listings,
/// stats, parsed reads and session loads agree.
#[test]
fn the_recorded_reference_store_reads_the_same_as_locally() {
    let c = cluster!();
    let pg = c.fresh_backend();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("sessions");
    session_test_support::copy_tree(&session_test_support::codelia_sessions_dir(), &root).unwrap();
    let local = LocalBackend::open(&root).unwrap();
    let local_runs = local.list_runs(&RunListQuery::default()).unwrap().runs;
    assert!(
        local_runs.len() >= 5,
        "reference runs: {}",
        local_runs.len()
    );
    for r in &local_runs {
        let bytes = local.read_all(&r.run_id, Extent::Committed).unwrap();
        pg.append_lines(&r.run_id, 0, &bytes).unwrap();
    }
    let pg_runs = pg.list_runs(&RunListQuery::default()).unwrap().runs;
    let l: Vec<RunSummary> = local_runs.iter().cloned().map(comparable).collect();
    let p: Vec<RunSummary> = pg_runs.iter().cloned().map(comparable).collect();
    assert_eq!(p, l, "run listings differ");
    assert!(
        pg_runs
            .iter()
            .all(|r| r.origin_host.as_deref() == Some("test-host"))
    );
    for r in &local_runs {
        let (ls, ps) = (
            local.stat_run(&r.run_id).unwrap().unwrap(),
            pg.stat_run(&r.run_id).unwrap().unwrap(),
        );
        assert_eq!(
            (
                ls.len,
                ls.lines,
                &ls.header,
                &ls.end,
                &ls.last_type,
                &ls.last_ts
            ),
            (
                ps.len,
                ps.lines,
                &ps.header,
                &ps.end,
                &ps.last_type,
                &ps.last_ts
            ),
            "stat of {}",
            r.run_id
        );
        let (lr, pr) = (
            local.read_run(&r.run_id).unwrap(),
            pg.read_run(&r.run_id).unwrap(),
        );
        assert_eq!(
            lr.records.len(),
            pr.records.len(),
            "records of {}",
            r.run_id
        );
        assert_eq!(
            format!("{:?}", lr.damage),
            format!("{:?}", pr.damage),
            "damage of {}",
            r.run_id
        );
    }
    // Filters agree too.
    let mut by_session: BTreeMap<String, usize> = BTreeMap::new();
    for r in &local_runs {
        if let Some(s) = &r.session_id {
            *by_session.entry(s.clone()).or_default() += 1;
        }
    }
    for (s, n) in by_session {
        let q = RunListQuery {
            session: Some(s.clone()),
            ..RunListQuery::default()
        };
        assert_eq!(
            pg.list_runs(&q).unwrap().runs.len(),
            n,
            "runs of session {s}"
        );
    }
    // Sessions: saved in PostgreSQL from the local loads, listed the same.
    let sessions = local.list_sessions(&SessionListQuery::default()).unwrap();
    assert!(!sessions.sessions.is_empty());
    for s in &sessions.sessions {
        let loaded = local.load_session(&s.session_id).unwrap().unwrap();
        pg.save_session(&loaded.state, &Expected::Absent).unwrap();
        let back = pg.load_session(&s.session_id).unwrap().unwrap();
        assert_eq!(back.state.messages, loaded.state.messages);
        assert!(back.damage.is_empty());
    }
    let pg_sessions = pg.list_sessions(&SessionListQuery::default()).unwrap();
    assert_eq!(
        pg_sessions.sessions, sessions.sessions,
        "session listings differ"
    );
}

#[test]
fn gc_removes_old_runs_and_sessions_with_a_dry_run_and_an_audit() {
    let c = cluster!();
    let b = c.fresh_backend();
    let run = |id: &str, session: &str, at: &str| {
        format!(
            "{{\"type\":\"header\",\"schema_version\":1,\"run_id\":\"{id}\",\"session_id\":\"{session}\",\"started_at\":\"{at}\"}}\n"
        )
        .into_bytes()
    };
    b.append_lines(
        "old-1",
        0,
        &run("old-1", "s-old", "2020-01-01T00:00:00.000Z"),
    )
    .unwrap();
    b.append_lines(
        "old-2",
        0,
        &run("old-2", "s-live", "2020-01-01T00:00:00.000Z"),
    )
    .unwrap();
    b.append_lines(
        "new-1",
        0,
        &run("new-1", "s-new", "2030-01-01T00:00:00.000Z"),
    )
    .unwrap();
    b.append_lines("undated", 0, &run("undated", "s-x", "whenever"))
        .unwrap();
    let state = |id: &str, at: &str| {
        session_schema::parse_session_state(
            format!(r#"{{"schema_version":1,"session_id":"{id}","updated_at":"{at}","messages":[{{"role":"user","content":"hi"}}]}}"#).as_bytes(),
        )
        .unwrap()
        .value
    };
    b.save_session(
        &state("s-old", "2020-01-02T00:00:00.000Z"),
        &Expected::Absent,
    )
    .unwrap();
    b.save_session(
        &state("s-live", "2029-01-01T00:00:00.000Z"),
        &Expected::Absent,
    )
    .unwrap();
    b.save_session(
        &state("s-lonely", "2020-01-02T00:00:00.000Z"),
        &Expected::Absent,
    )
    .unwrap();
    // In the past (2020) but written now: the write is after the cutoff.
    let cutoff = 1_700_000_000_000; // 2023-11-14
    let dry = b.gc(cutoff, true).unwrap();
    assert_eq!(
        dry.kept_recent_write, 2,
        "runs written since the cutoff stay"
    );
    assert_eq!(
        dry.removed
            .iter()
            .map(|g| g.id.as_str())
            .collect::<Vec<_>>(),
        vec!["s-lonely"],
        "only the old session without runs would go"
    );
    // Make the old runs' last write old too.
    b.with_client(|c| {
        c.execute(
            "UPDATE run_tips SET last_write_at = '2020-01-03' \
             WHERE run_key IN (SELECT run_key FROM runs WHERE run_id LIKE 'old-%')",
            &[],
        )
        .map(drop)
        .map_err(|e| PgError::Query {
            op: "test",
            source: e,
        })
    })
    .unwrap();
    let dry = b.gc(cutoff, true).unwrap();
    let ids = |r: &session_pg::GcReport| {
        r.removed
            .iter()
            .map(|g| format!("{}:{}", g.kind.as_str(), g.id))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ids(&dry),
        vec!["run:old-1", "session:s-lonely", "session:s-old"]
    );
    assert_eq!((dry.kept_active_session, dry.kept_undated), (1, 1));
    assert!(
        b.stat_run("old-1").unwrap().is_some(),
        "a dry run removed a run"
    );
    assert!(
        b.gc_audit(10).unwrap().is_empty(),
        "a dry run wrote the audit"
    );
    let done = b.gc(cutoff, false).unwrap();
    assert_eq!(ids(&done), ids(&dry));
    assert!(b.stat_run("old-1").unwrap().is_none());
    assert!(b.load_session("s-old").unwrap().is_none());
    assert!(b.stat_run("old-2").unwrap().is_some());
    assert!(b.load_session("s-live").unwrap().is_some());
    let audit = b.gc_audit(10).unwrap();
    let mut audited: Vec<String> = audit
        .iter()
        .map(|a| format!("{}:{}", a.kind, a.id))
        .collect();
    audited.sort();
    assert_eq!(
        audited,
        vec!["run:old-1", "session:s-lonely", "session:s-old"]
    );
    assert!(audit.iter().all(|a| a.removed_by == "test-host"));
    let lines_left: i64 = b
        .with_client(|c| {
            Ok(
                c.query_one(
                "SELECT count(*) FROM run_lines l WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.run_key = l.run_key)",
                &[],
            )
                    .map_err(|e| PgError::Query {
                        op: "test",
                        source: e,
                    })?
                    .get(0),
            )
        })
        .unwrap();
    assert_eq!(lines_left, 0, "the run's lines went with it");
}

/// A save rewrites only the messages after the common prefix (counted by the rows' xmin: a
/// row that was not rewritten keeps the transaction id that wrote it).
#[test]
fn a_grown_conversation_costs_only_its_new_messages() {
    let c = cluster!();
    let b = c.fresh_backend();
    let state = |n: usize, skip: Option<usize>| {
        let messages: Vec<String> = (0..n)
            .filter(|i| Some(*i) != skip)
            .map(|i| format!(r#"{{"role":"user","content":"message {i}"}}"#))
            .collect();
        session_schema::parse_session_state(
            format!(
                r#"{{"schema_version":1,"session_id":"grow","updated_at":"2026-02-03T12:00:00.000Z","messages":[{}]}}"#,
                messages.join(",")
            )
            .as_bytes(),
        )
        .unwrap()
        .value
    };
    let writers =
        |b: &PgBackend| -> Vec<String> {
            b.with_client(|c| {
                Ok(c.query(
                "SELECT xmin::text FROM session_messages WHERE session_id = 'grow' ORDER BY idx",
                &[],
            )
            .map_err(|e| PgError::Query { op: "test", source: e })?
            .iter()
            .map(|r| r.get(0))
            .collect())
            })
            .unwrap()
        };
    let v1 = b.save_session(&state(5, None), &Expected::Absent).unwrap();
    let first = writers(&b);
    let v2 = b
        .save_session(&state(7, None), &Expected::Version(v1))
        .unwrap();
    let second = writers(&b);
    assert_eq!(second.len(), 7);
    assert_eq!(
        second[..5],
        first[..],
        "the first five messages were rewritten"
    );
    assert!(second[5] != first[0] && second[5] == second[6]);
    // A compaction (message 1 dropped) rewrites from there on.
    b.save_session(&state(7, Some(1)), &Expected::Version(v2))
        .unwrap();
    let third = writers(&b);
    assert_eq!(third.len(), 6);
    assert_eq!(third[0], first[0]);
    assert!(third[1..].iter().all(|x| *x != first[0] && *x != second[5]));
    let loaded = b.load_session("grow").unwrap().unwrap();
    assert_eq!(loaded.state.messages, state(7, Some(1)).messages);
}
