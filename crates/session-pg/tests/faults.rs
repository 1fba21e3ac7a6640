//! Faults: two workers fighting over one session lease, a stale compare-and-swap, a lease
//! whose connection is cut, and PostgreSQL restarted in the middle of an append loop.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use session_pg::{PgBackend, PgConfig, PgError};
use session_schema::{SessionState, parse_message, parse_session_state};
use session_storage::{Expected, Extent, HolderInfo, RunCatalogue, SessionStore, StorageError};

macro_rules! cluster {
    () => {
        match common::shared() {
            Some(c) => c,
            None => return,
        }
    };
}

fn state(id: &str, n: usize) -> SessionState {
    let messages: Vec<String> = (0..n)
        .map(|i| format!(r#"{{"role":"user","content":"message {i}"}}"#))
        .collect();
    parse_session_state(
        format!(
            r#"{{"schema_version":1,"session_id":"{id}","updated_at":"2026-02-03T12:00:00.000Z","messages":[{}]}}"#,
            messages.join(",")
        )
        .as_bytes(),
    )
    .unwrap()
    .value
}

fn second(b: &PgBackend) -> PgBackend {
    PgBackend::open_with(b.config().clone(), common::small_options()).unwrap()
}

#[test]
fn two_workers_fighting_over_one_lease_never_hold_it_together() {
    let c = cluster!();
    let a = c.fresh_backend();
    let b = second(&a);
    a.save_session(&state("contested", 0), &Expected::Absent)
        .unwrap();
    let inside = AtomicBool::new(false);
    let overlaps = AtomicU32::new(0);
    let wins: Vec<u32> = std::thread::scope(|s| {
        let workers: Vec<_> = [&a, &b]
            .into_iter()
            .enumerate()
            .map(|(w, backend)| {
                let (inside, overlaps) = (&inside, &overlaps);
                s.spawn(move || {
                    let me = HolderInfo {
                        name: format!("worker-{w}"),
                        host: "fleet".into(),
                        pid: w as u32,
                    };
                    let mut won = 0;
                    for _ in 0..25 {
                        let guard = match backend.acquire_lease("contested", &me) {
                            Ok(g) => g,
                            Err(StorageError::LeaseBusy { holder, .. }) => {
                                // The other worker, named.
                                let h = holder.expect("the holder is named");
                                assert_ne!(h.name, me.name);
                                std::thread::yield_now();
                                continue;
                            }
                            Err(e) => panic!("{e}"),
                        };
                        if inside.swap(true, Ordering::SeqCst) {
                            overlaps.fetch_add(1, Ordering::SeqCst);
                        }
                        // The work: one message, saved with compare-and-swap.
                        let cur = backend.load_session("contested").unwrap().unwrap();
                        let mut st = cur.state;
                        let text = format!(r#"{{"role":"user","content":"w{w} #{won}"}}"#);
                        st.messages
                            .push(parse_message(text.as_bytes()).unwrap().value);
                        backend
                            .save_session(&st, &Expected::Version(cur.version))
                            .expect("the lease holder's save is never a conflict");
                        guard.renew().unwrap();
                        inside.store(false, Ordering::SeqCst);
                        guard.release().unwrap();
                        won += 1;
                    }
                    won
                })
            })
            .collect();
        workers.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(overlaps.load(Ordering::SeqCst), 0, "two holders at once");
    let total: u32 = wins.iter().sum();
    assert!(
        wins.iter().all(|w| *w > 0),
        "both workers got the lease: {wins:?}"
    );
    let loaded = a.load_session("contested").unwrap().unwrap();
    assert_eq!(
        loaded.state.messages.len(),
        total as usize,
        "every holder's save landed once"
    );
}

#[test]
fn a_stale_compare_and_swap_is_refused_and_changes_nothing() {
    let c = cluster!();
    let a = c.fresh_backend();
    let b = second(&a);
    let v1 = a.save_session(&state("cas", 1), &Expected::Absent).unwrap();
    let seen_by_a = a.load_session("cas").unwrap().unwrap();
    assert_eq!(seen_by_a.version, v1);
    let v2 = b
        .save_session(&state("cas", 2), &Expected::Version(v1.clone()))
        .unwrap();
    match a.save_session(&state("cas", 3), &Expected::Version(v1.clone())) {
        Err(StorageError::VersionConflict {
            found, expected, ..
        }) => {
            assert_eq!(found, Some(v2.clone()));
            assert_eq!(expected, Expected::Version(v1));
        }
        other => panic!("a stale save gave {other:?}"),
    }
    let now = b.load_session("cas").unwrap().unwrap();
    assert_eq!((now.version, now.state.messages.len()), (v2, 2));
    // Stale appends to a run are refused the same way.
    let h = b"{\"type\":\"header\",\"schema_version\":1,\"run_id\":\"r\",\"started_at\":\"2026-02-03T12:00:00.000Z\"}\n";
    a.append_lines("r", 0, h).unwrap();
    let l1 = b"{\"type\":\"run.status\",\"run_id\":\"r\",\"ts\":\"2026-02-03T12:00:01.000Z\",\"status\":\"running\"}\n";
    b.append_lines("r", h.len() as u64, l1).unwrap();
    let l2 = b"{\"type\":\"run.status\",\"run_id\":\"r\",\"ts\":\"2026-02-03T12:00:02.000Z\",\"status\":\"running\"}\n";
    match a.append_lines("r", h.len() as u64, l2) {
        Err(StorageError::LengthConflict { committed, .. }) => {
            assert_eq!(committed, (h.len() + l1.len()) as u64)
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_lease_whose_connection_is_cut_is_lost_and_free() {
    let c = cluster!();
    let a = c.fresh_backend();
    let b = second(&a);
    let g = a
        .acquire_lease("cut", &HolderInfo::this_process("worker-a"))
        .unwrap();
    g.renew().unwrap();
    // The server ends the holder's session (as when its host vanishes and keepalives fail).
    let killed: i64 = a
        .with_client(|c| {
            Ok(c.query_one(
                "SELECT count(pg_terminate_backend(backend_pid)) FROM session_leases WHERE session_id = 'cut'",
                &[],
            )
            .map_err(|e| PgError::Query { op: "test", source: e })?
            .get(0))
        })
        .unwrap();
    assert_eq!(killed, 1);
    assert!(common::eventually(5, || matches!(
        g.renew(),
        Err(StorageError::LeaseLost { .. })
    )));
    let taken = b
        .acquire_lease("cut", &HolderInfo::this_process("worker-b"))
        .expect("the lost lease is free");
    taken.release().unwrap();
    drop(g);
}

#[test]
fn postgres_restarted_in_the_middle_of_an_append_loop() {
    // A cluster of its own: restarting the shared one would cut every other test.
    if common::shared().is_none() {
        return;
    }
    let c = common::Cluster::start().expect("a private cluster");
    let conn = c.fresh_db();
    let b = Arc::new(
        PgBackend::open_with(PgConfig::parse(&conn).unwrap(), common::small_options()).unwrap(),
    );
    let lease = b
        .acquire_lease("writer", &HolderInfo::this_process("writer"))
        .unwrap();
    const LINES: usize = 120;
    let acked = Arc::new(AtomicU32::new(0));
    let writer = {
        let (b, acked) = (b.clone(), acked.clone());
        std::thread::spawn(move || {
            let mut expected = 0u64;
            let mut all = Vec::new();
            let mut errors = 0u32;
            for i in 0..LINES {
                let line = if i == 0 {
                    b"{\"type\":\"header\",\"schema_version\":1,\"run_id\":\"loop\",\"started_at\":\"2026-02-03T12:00:00.000Z\"}\n".to_vec()
                } else {
                    format!("{{\"type\":\"run.status\",\"run_id\":\"loop\",\"ts\":\"2026-02-03T12:00:01.000Z\",\"status\":\"running\",\"message\":\"line {i}\"}}\n").into_bytes()
                };
                loop {
                    match b.append_lines("loop", expected, &line) {
                        Ok(done) => {
                            expected = done.end;
                            all.extend_from_slice(&line);
                            acked.fetch_add(1, Ordering::SeqCst);
                            break;
                        }
                        Err(StorageError::Backend { .. }) => {
                            // The server is away: retry the very same append.
                            errors += 1;
                            assert!(errors < 400, "the client never recovered");
                            std::thread::sleep(Duration::from_millis(25));
                        }
                        Err(e) => panic!("line {i}: {e}"),
                    }
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            (all, errors)
        })
    };
    assert!(common::eventually(20, || acked.load(Ordering::SeqCst) >= 30));
    c.stop().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    c.restart().unwrap();
    let (all, errors) = writer.join().unwrap();
    assert!(errors > 0, "the restart was not noticed by the writer");
    // Every acknowledged line is there exactly once, byte for byte.
    assert_eq!(b.read_all("loop", Extent::Committed).unwrap(), all);
    let stat = b.stat_run("loop").unwrap().unwrap();
    assert_eq!(stat.lines, LINES as u64);
    // The lease died with its connection, and says so.
    assert!(matches!(lease.renew(), Err(StorageError::LeaseLost { .. })));
    drop(lease);
    c.stop().unwrap();
}
