//! Crash soak: `soak --seconds N [--seed S]` repeats the SIGKILL crash rounds of
//! `tests/crash.rs` for N seconds (default 60) and prints a summary; exit code 1 on the first
//! acknowledged record that is missing. Called by `cargo xtask soak`.

// A command-line tool: printing the summary is its job.
#![allow(clippy::print_stdout, clippy::print_stderr)]

#[path = "../tests/support/crash.rs"]
mod crash;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn main() {
    crash::run_child_if_requested();
    let mut seconds = 60u64;
    let mut seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let value = args.next();
        let parsed = value.as_deref().and_then(|v| v.parse().ok());
        match (a.as_str(), parsed) {
            ("--seconds", Some(n)) => seconds = n,
            ("--seed", Some(n)) => seed = n,
            _ => {
                eprintln!("usage: soak [--seconds N] [--seed S]");
                std::process::exit(2);
            }
        }
    }
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("soak: cannot create a temp dir: {e}");
            std::process::exit(1);
        }
    };
    let started = Instant::now();
    if let Err(e) = crash::two_process_lock(dir.path()) {
        eprintln!("soak: two-process lock: {e}");
        std::process::exit(1);
    }
    let deadline = started + Duration::from_secs(seconds);
    match crash::crash_series(dir.path(), u64::MAX, Some(deadline), seed) {
        Ok(s) => println!(
            "soak: {} crash rounds in {:.1} s, {} acknowledged appends all read back, {} torn writes (seed {seed})",
            s.rounds,
            started.elapsed().as_secs_f64(),
            s.acknowledged,
            s.torn_total()
        ),
        Err(e) => {
            eprintln!("soak failed (seed {seed}): {e}");
            std::process::exit(1);
        }
    }
}
