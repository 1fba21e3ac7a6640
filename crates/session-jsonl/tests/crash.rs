//! Crash test (own harness: the binary re-runs itself as the child that gets killed).
//!
//! Children append with fdatasync, group commit and flush-only durability and are killed with
//! SIGKILL at random moments; every record whose `append` returned must be read back. Also: two
//! processes opening one run for writing. The long version is `examples/soak.rs`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

#[path = "support/crash.rs"]
mod crash;

use std::time::{SystemTime, UNIX_EPOCH};

fn main() {
    crash::run_child_if_requested();
    // `cargo test -- --list` and filters: this binary has one test, named `crash`.
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        println!("crash: test");
        return;
    }
    if let Some(filter) = args.iter().find(|a| !a.starts_with('-'))
        && !"crash".contains(filter.as_str())
    {
        return;
    }
    let seed = std::env::var("SESSION_JSONL_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    let dir = tempfile::tempdir().expect("temp dir");
    if let Err(e) = crash::two_process_lock(dir.path()) {
        eprintln!("two-process lock: {e}");
        std::process::exit(1);
    }
    match crash::crash_series(dir.path(), 24, None, seed) {
        Ok(s) => println!(
            "crash: {} rounds, {} acknowledged appends all read back, {} torn writes (seed {seed})",
            s.rounds,
            s.acknowledged,
            s.torn_total()
        ),
        Err(e) => {
            eprintln!("crash test failed (seed {seed}): {e}");
            std::process::exit(1);
        }
    }
}
