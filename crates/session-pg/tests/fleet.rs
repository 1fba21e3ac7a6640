//! A fleet writer killed at random points: a child process (this binary, re-run) appends
//! numbered lines to one run and prints each acknowledged end offset; the parent kills it after
//! a pseudo-random time, starts the next one (which resumes from the committed length, as a
//! worker taking over a run does), and at the end checks that every acknowledged line is
//! stored exactly once, in order, byte for byte.
//!
//! Rounds: `SESSION_PG_ROUNDS` (default 6; `cargo xtask soak pg` runs 50).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use session_pg::PgBackend;
use session_storage::{Extent, RunCatalogue, StorageError};

const CHILD_CONN: &str = "SESSION_PG_TEST_FLEET_CONN";
const RUN: &str = "fleet-run";

fn line(n: u64) -> Vec<u8> {
    if n == 0 {
        return format!(
            "{{\"type\":\"header\",\"schema_version\":1,\"run_id\":\"{RUN}\",\"started_at\":\"2026-02-03T12:00:00.000Z\"}}\n"
        )
        .into_bytes();
    }
    format!(
        "{{\"type\":\"run.status\",\"run_id\":\"{RUN}\",\"ts\":\"2026-02-03T12:00:01.000Z\",\"status\":\"running\",\"message\":\"line {n}\"}}\n"
    )
    .into_bytes()
}

/// The writer: resumes at the committed length and appends until killed.
fn run_child_if_requested() {
    let Ok(conn) = std::env::var(CHILD_CONN) else {
        return;
    };
    let b = PgBackend::open(&conn).expect("open the store");
    let stat = b.stat_run(RUN).expect("stat");
    let (mut len, mut n) = stat.map_or((0, 0), |s| (s.len, s.lines));
    let out = std::io::stdout();
    {
        let mut o = out.lock();
        writeln!(o, "ready").unwrap();
        o.flush().unwrap();
    }
    loop {
        let l = line(n);
        match b.append_lines(RUN, len, &l) {
            Ok(done) => {
                len = done.end;
                n += 1;
                let mut o = out.lock();
                writeln!(o, "ack {len}").unwrap();
                o.flush().unwrap();
            }
            Err(StorageError::Backend { .. }) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => panic!("{e}"),
        }
    }
}

fn main() {
    run_child_if_requested();
    if std::env::args().any(|a| a == "--list") {
        println!("fleet_writer_killed_at_random_points: test");
        return;
    }
    let Some(c) = common::shared() else {
        println!("0 passed, 0 failed, 1 skipped");
        return;
    };
    let rounds: u32 = std::env::var("SESSION_PG_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(6);
    let conn = c.fresh_db();
    let started = Instant::now();
    let mut acked = 0u64;
    let mut seed = 0x9e37_79b9_u64;
    for _ in 0..rounds {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let mut child = Command::new(std::env::current_exe().unwrap())
            .env(CHILD_CONN, &conn)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines().map_while(Result::ok) {
                if l == "ready" {
                    let _ = ready_tx.send(());
                }
                if let Some(end) = l.strip_prefix("ack ").and_then(|e| e.parse::<u64>().ok()) {
                    let _ = tx.send(end);
                }
            }
        });
        // Once it is connected (however loaded the machine), let it write a little, then
        // kill it wherever it is.
        ready_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the writer started");
        std::thread::sleep(Duration::from_millis(10 + seed % 100));
        child.kill().unwrap();
        child.wait().unwrap();
        reader.join().unwrap();
        for end in rx.try_iter() {
            assert!(
                end > acked,
                "acknowledgements go backwards: {end} after {acked}"
            );
            acked = end;
        }
    }
    let b = PgBackend::open(&conn).unwrap();
    let stored = b.read_all(RUN, Extent::Committed).unwrap();
    assert!(
        stored.len() as u64 >= acked,
        "acknowledged {acked} bytes, {} stored",
        stored.len()
    );
    // Every stored line is the next number: nothing lost, nothing twice, byte for byte.
    let mut want = Vec::new();
    let mut n = 0;
    while want.len() < stored.len() {
        want.extend_from_slice(&line(n));
        n += 1;
    }
    assert_eq!(stored, want, "the stored run is not lines 0..{n} once each");
    assert!(acked > 0, "no append was acknowledged in {rounds} rounds");
    println!(
        "fleet writer killed {rounds} times: {n} lines, {acked} bytes acknowledged, all present once ({:.1} s)",
        started.elapsed().as_secs_f64()
    );
    println!("1 passed, 0 failed");
}
