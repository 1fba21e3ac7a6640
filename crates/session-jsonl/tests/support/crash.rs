//! Crash rounds shared by `tests/crash.rs` (a few seconds in `cargo test`) and
//! `examples/soak.rs` (as long as asked, for `cargo xtask soak`).
//!
//! The current executable is re-run as a child with [`CHILD_ENV`] set; the child appends records
//! from several threads and prints an acknowledgement line after each `append` returned. The
//! parent kills it with SIGKILL at a random moment and checks that every acknowledged record is
//! in the file, in per-thread order, without duplicates, and that the file reads with no damage
//! other than torn writes.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use session_jsonl::{DamageKind, Durability, JsonlError, RunWriter, WriterOptions, read_run};
use session_schema::{Header, Record, RunStatus, RunStatusKind, Timestamp};

/// Environment variable that turns the executable into a crash child:
/// `append|<mode>|<threads>|<round>|<path>` or `lock|<path>`.
pub const CHILD_ENV: &str = "SESSION_JSONL_CRASH_CHILD";

/// Exit code of a `lock` child that found the file locked.
pub const EXIT_LOCKED: i32 = 3;

/// Small deterministic random numbers (xorshift64*).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

pub fn mode_name(d: Durability) -> &'static str {
    match d {
        Durability::SyncData => "sync",
        Durability::Flush => "flush",
        Durability::Buffered => "buffered",
        _ => "group",
    }
}

fn mode_from(name: &str) -> Durability {
    match name {
        "sync" => Durability::SyncData,
        "flush" => Durability::Flush,
        _ => Durability::group_commit(),
    }
}

pub fn header() -> Header {
    Header {
        schema_version: 1,
        run_id: "crash".into(),
        started_at: Timestamp::now(),
        ..Default::default()
    }
}

fn status(msg: String) -> Record {
    Record::RunStatus(RunStatus {
        run_id: "crash".into(),
        ts: Timestamp::now(),
        status: RunStatusKind::Running,
        message: Some(msg),
        ..Default::default()
    })
}

/// Runs the child role when [`CHILD_ENV`] is set (never returns then); otherwise returns.
pub fn run_child_if_requested() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let parts: Vec<&str> = spec.splitn(5, '|').collect();
    match parts.as_slice() {
        ["lock", path] => {
            let opts = WriterOptions {
                lock_wait: Duration::ZERO,
                ..WriterOptions::default()
            };
            let code = match RunWriter::open_append(Path::new(path), opts) {
                Ok(_) => 0,
                Err(JsonlError::Locked { .. }) => EXIT_LOCKED,
                Err(_) => 4,
            };
            std::process::exit(code);
        }
        ["append", mode, threads, round, path] => {
            let opts = WriterOptions::with_durability(mode_from(mode));
            let w = match RunWriter::open_append(Path::new(path), opts) {
                Ok(w) => Arc::new(w),
                Err(_) => std::process::exit(5),
            };
            let threads: usize = threads.parse().unwrap_or(1);
            let out = Arc::new(Mutex::new(std::io::stdout()));
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let w = Arc::clone(&w);
                    let out = Arc::clone(&out);
                    let round = round.to_string();
                    std::thread::spawn(move || {
                        for i in 0u64.. {
                            if w.append(&status(format!("{round}:{t}:{i}"))).is_err() {
                                std::process::exit(6);
                            }
                            let mut o = out.lock().unwrap_or_else(|e| e.into_inner());
                            let _ = writeln!(o, "{round}:{t}:{i}");
                            let _ = o.flush();
                        }
                    })
                })
                .collect();
            for h in handles {
                let _ = h.join();
            }
            std::process::exit(0);
        }
        _ => std::process::exit(2),
    }
}

/// What a series of crash rounds did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stats {
    pub rounds: u64,
    pub acknowledged: u64,
    pub records: u64,
    /// Torn writes (damaged lines) in files finished so far.
    pub torn: u64,
    /// Damaged lines in the current file.
    pub torn_current: u64,
}

impl Stats {
    /// Torn writes seen in all files.
    pub fn torn_total(&self) -> u64 {
        self.torn + self.torn_current
    }
}

/// One crash round: start a child appending to `path`, kill it, check the file.
pub fn crash_round(
    path: &Path,
    mode: Durability,
    threads: usize,
    round: u64,
    rng: &mut Rng,
    stats: &mut Stats,
) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let spec = format!(
        "append|{}|{threads}|{round}|{}",
        mode_name(mode),
        path.display()
    );
    let mut child = Command::new(exe)
        .env(CHILD_ENV, spec)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("spawn: {e}"))?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut acks = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if acks.is_empty() {
                let _ = tx.send(());
            }
            acks.push(line);
        }
        acks
    });
    // Kill at a random moment after the child acknowledged its first record.
    let _ = rx.recv_timeout(Duration::from_secs(30));
    std::thread::sleep(Duration::from_micros(rng.below(30_000)));
    child.kill().map_err(|e| format!("kill: {e}"))?;
    let _ = child.wait();
    let acks = reader.join().map_err(|_| "ack reader panicked")?;
    if acks.is_empty() {
        return Err(format!("round {round}: the child acknowledged nothing"));
    }

    let run = read_run(path).map_err(|e| e.to_string())?;
    stats.torn_current = 0;
    for d in &run.damage {
        match d.kind {
            DamageKind::TornTail | DamageKind::CorruptLine | DamageKind::SealedFragment => {
                stats.torn_current += 1
            }
            other => return Err(format!("round {round}: unexpected damage {other}: {d}")),
        }
    }
    // Every message once, per (round, thread) in increasing order.
    let mut last: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    let mut present = std::collections::BTreeSet::new();
    for r in &run.records {
        let Record::RunStatus(s) = &r.parsed.value else {
            continue;
        };
        let Some(m) = &s.message else { continue };
        let nums: Vec<u64> = m.split(':').filter_map(|n| n.parse().ok()).collect();
        let [rd, t, i] = nums[..] else {
            return Err(format!("bad message {m}"));
        };
        if let Some(prev) = last.insert((rd, t), i)
            && i <= prev
        {
            return Err(format!("round {rd} thread {t}: {i} after {prev}"));
        }
        present.insert(m.clone());
    }
    for a in &acks {
        if !present.contains(a) {
            return Err(format!(
                "round {round} ({}): acknowledged record {a} is missing",
                mode_name(mode)
            ));
        }
    }
    stats.rounds += 1;
    stats.acknowledged += acks.len() as u64;
    stats.records = run.records.len() as u64;
    Ok(())
}

/// Creates a run file in `dir` and runs crash rounds until `rounds` are done or `deadline`
/// passes, alternating modes and thread counts.
pub fn crash_series(
    dir: &Path,
    rounds: u64,
    deadline: Option<Instant>,
    seed: u64,
) -> Result<Stats, String> {
    let mut rng = Rng(seed | 1);
    let configs = [
        (Durability::SyncData, 1),
        (Durability::group_commit(), 4),
        (Durability::Flush, 2),
        (
            Durability::GroupCommit {
                max_delay: Duration::from_millis(1),
                max_batch: 16,
            },
            8,
        ),
    ];
    let mut stats = Stats::default();
    let mut round = 0;
    let mut file_no = 0;
    let mut path = dir.join("crash-0.jsonl");
    RunWriter::create_file(&path, &header(), WriterOptions::default())
        .map_err(|e| e.to_string())?;
    while round < rounds && deadline.is_none_or(|d| Instant::now() < d) {
        let (mode, threads) = configs[(round % configs.len() as u64) as usize];
        crash_round(&path, mode, threads, round, &mut rng, &mut stats)?;
        round += 1;
        // Start a fresh file now and then so reads stay fast in long soaks.
        if stats.records > 20_000 {
            stats.torn += stats.torn_current;
            stats.torn_current = 0;
            stats.records = 0;
            file_no += 1;
            path = dir.join(format!("crash-{file_no}.jsonl"));
            RunWriter::create_file(&path, &header(), WriterOptions::default())
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(stats)
}

/// Two processes opening one run for writing: the second fails cleanly, the file is unchanged.
pub fn two_process_lock(dir: &Path) -> Result<(), String> {
    let path = dir.join("locked.jsonl");
    let w = RunWriter::create_file(&path, &header(), WriterOptions::default())
        .map_err(|e| e.to_string())?;
    let before = std::fs::read(&path).map_err(|e| e.to_string())?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let run_child = || {
        Command::new(&exe)
            .env(CHILD_ENV, format!("lock|{}", path.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| e.to_string())
    };
    let status = run_child()?;
    if status.code() != Some(EXIT_LOCKED) {
        return Err(format!("second writer was not refused: {status}"));
    }
    if std::fs::read(&path).map_err(|e| e.to_string())? != before {
        return Err("the refused writer changed the file".into());
    }
    drop(w);
    let status = run_child()?;
    if status.code() != Some(0) {
        return Err(format!("writer after release failed: {status}"));
    }
    Ok(())
}
