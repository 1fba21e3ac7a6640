//! Benchmarks of session-state against the reference implementation's approaches, measured in
//! the same run and printed as ratios (ours ÷ reference).
//!
//! 1. A session growing from 0 to 500 messages (~2 KB each), saved after every message:
//!    our incremental append vs the reference's full rewrite (temp file + rename of the whole
//!    messages file, then the row upsert). Bytes are counted two ways: message-file bytes, and
//!    every byte the process handed to `write` (`/proc/self/io` `wchar`, SQLite's WAL included).
//!    Two comparisons at equal durability: ours with `SaveDurability::Sync` ÷ the reference's
//!    approach made as durable (fsync of the temp file, rename, fsync of the directory,
//!    `synchronous=FULL`), and ours with `SaveDurability::NoSync` ÷ the reference as it is (no
//!    fsync, `synchronous=NORMAL`).
//! 2. `list` at 100k sessions: the first page of 50 and the full list, vs the reference's
//!    `list()` (all rows ordered by `updated_at`, then the page taken in memory).
//! 3. `runs_for_session` at 100k runs vs the reference's approach (walk the date directories,
//!    stat every file, read the first line of each and keep headers with the session id).
//!    Also the run index's own costs: the first `index_runs`, the one right after it (day
//!    directories written within the racy window are listed again) and a settled warm
//!    `index_runs` (no day directory listed, no run file looked at).
//!
//! 4. A durable save against its physical floor: two `write` + `fdatasync` of the same bytes
//!    per save (the messages file and the WAL are two files). Each round grows four sessions
//!    in lockstep, interleaved save by save (ours without a lease, ours through a held lease,
//!    ours through a held lease with `save_appended` naming the kept messages, the floor), over `SESSION_BENCH_REPEATS` rounds (default 3), printed as min/median/max
//!    of floor ÷ ours, with the CPU time of each (this thread's, from
//!    `/proc/thread-self/schedstat`: what a save costs beside waiting for its syncs).
//!
//!    With the load average before and after.
//! 5. Batched saves: `save_batch` of N sessions (N = 4, 16, 64; one new ~2 KB message each)
//!    against N single `save`s of the same sessions, `SaveDurability::Sync`, interleaved over
//!    `SESSION_BENCH_REPEATS` rounds, printed as min/median/max of batched ÷ single per session
//!    save, with the load average before and after.
//!
//! `SESSION_BENCH_SCALE=0.1` shrinks every size for a quick run; `SESSION_BENCH_ONLY=growth`
//! (or `floor`, `batch`, `list`, `runs`; comma-separated) runs those sections. Runs as
//! `cargo bench -p session-state --bench state`.

#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs
)]

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::{Connection, params};
use session_schema::{BaseMessage, RawJson, SessionState, Timestamp, parse_message};
use session_state::{
    BatchPolicy, BatchSave, ListQuery, SaveDurability, StateStore, StoreOptions, summarize,
};

fn scale() -> f64 {
    std::env::var("SESSION_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|s: &f64| *s > 0.0)
        .unwrap_or(1.0)
}

fn scaled(n: usize) -> usize {
    ((n as f64 * scale()).round() as usize).max(1)
}

/// Bytes this process has passed to `write`-family calls so far (Linux), if known.
fn wchar() -> Option<u64> {
    let text = fs::read_to_string("/proc/self/io").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("wchar:"))
        .and_then(|v| v.trim().parse().ok())
}

fn message(i: usize) -> BaseMessage {
    let role = if i.is_multiple_of(2) {
        "user"
    } else {
        "assistant"
    };
    let body: String = format!("message {i}: ")
        .chars()
        .chain(std::iter::repeat_n('x', 2000))
        .collect();
    let v = serde_json::json!({"role": role, "content": body});
    parse_message(v.to_string().as_bytes()).unwrap().value
}

fn meta() -> RawJson {
    RawJson::from_json(r#"{"codelia_workspace_root":"/home/dev/acme-app","codelia_resume_context":{"schema_version":1,"workspace_root":"/home/dev/acme-app"}}"#).unwrap()
}

const REF_SCHEMA: &str = "CREATE TABLE IF NOT EXISTS session_state (session_id TEXT PRIMARY KEY, updated_at TEXT NOT NULL, run_id TEXT, invoke_seq INTEGER, schema_version INTEGER NOT NULL, meta_json TEXT, message_count INTEGER, last_user_message TEXT, workspace_root TEXT); CREATE INDEX IF NOT EXISTS idx_session_state_updated_at ON session_state(updated_at DESC);";

/// The reference's `save` (compat §2.6): whole file to a temp name, rename, then the upsert.
/// As it is: no fsync anywhere, better-sqlite3's defaults (WAL, synchronous=NORMAL, busy 5 s).
/// With `durable`: the same approach at our durability: fsync of the temp file before the
/// rename, fsync of the directory after it, and `synchronous=FULL` (sync of the WAL at every
/// commit).
struct ReferenceStore {
    root: PathBuf,
    conn: Connection,
    durable: bool,
}

impl ReferenceStore {
    fn open(root: &Path, durable: bool) -> ReferenceStore {
        fs::create_dir_all(root.join("messages")).unwrap();
        fs::create_dir_all(root.join("state")).unwrap();
        let conn = Connection::open(root.join("state.db")).unwrap();
        conn.busy_timeout(Duration::from_secs(5)).unwrap();
        conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))
            .unwrap();
        conn.execute_batch(if durable {
            "PRAGMA synchronous = FULL"
        } else {
            "PRAGMA synchronous = NORMAL"
        })
        .unwrap();
        conn.execute_batch(REF_SCHEMA).unwrap();
        ReferenceStore {
            root: root.to_path_buf(),
            conn,
            durable,
        }
    }

    fn save(&self, state: &SessionState) -> u64 {
        let mut body = Vec::new();
        for (i, m) in state.messages.iter().enumerate() {
            if i > 0 {
                body.push(b'\n');
            }
            body.extend(serde_json::to_vec(m).unwrap());
        }
        body.push(b'\n');
        if state.messages.is_empty() {
            body.clear();
        }
        let file = self
            .root
            .join("messages")
            .join(format!("{}.jsonl", state.session_id));
        let tmp = self.root.join("messages").join(format!(
            "{}.jsonl.{}.{}.abcdef.tmp",
            state.session_id,
            std::process::id(),
            Instant::now().elapsed().as_nanos()
        ));
        let mut f = fs::File::create(&tmp).unwrap();
        f.write_all(&body).unwrap();
        if self.durable {
            f.sync_all().unwrap();
        }
        drop(f);
        fs::rename(&tmp, &file).unwrap();
        if self.durable {
            fs::File::open(self.root.join("messages"))
                .unwrap()
                .sync_all()
                .unwrap();
        }
        let s = summarize(&state.messages, state.meta.as_ref());
        self.conn
            .execute(
                "INSERT INTO session_state (session_id, updated_at, run_id, invoke_seq, schema_version, meta_json, message_count, last_user_message, workspace_root) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT(session_id) DO UPDATE SET updated_at = excluded.updated_at, run_id = excluded.run_id, invoke_seq = excluded.invoke_seq, schema_version = excluded.schema_version, meta_json = excluded.meta_json, message_count = excluded.message_count, last_user_message = excluded.last_user_message, workspace_root = excluded.workspace_root",
                params![
                    state.session_id,
                    state.updated_at.as_str(),
                    state.run_id,
                    state.invoke_seq,
                    1,
                    state.meta.as_ref().map(|m| m.get().to_owned()),
                    s.message_count as i64,
                    s.last_user_message,
                    s.workspace_root
                ],
            )
            .unwrap();
        body.len() as u64
    }
}

struct Measured {
    time: Duration,
    file_bytes: u64,
    io_bytes: Option<u64>,
}

/// Whose save [`growth`] measures.
#[derive(Clone, Copy)]
enum Saver {
    /// `StateStore::save` (no lease held: each save checks the session's lease).
    Ours(SaveDurability),
    /// The reference's approach; `true` = made as durable as `SaveDurability::Sync`.
    Reference(bool),
}

fn growth(n: usize, saver: Saver) -> Measured {
    let dir = tempfile::tempdir().unwrap();
    let mut state = SessionState {
        schema_version: Some(1i64.into()),
        session_id: "f6d2c6d5-4a12-4cc4-bbc9-9a0c0d2b5af1".into(),
        updated_at: Timestamp::now(),
        run_id: Some("8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a".into()),
        meta: Some(meta()),
        ..Default::default()
    };
    let messages: Vec<BaseMessage> = (0..n).map(message).collect();
    let (store, reference) = match saver {
        Saver::Ours(durability) => (
            Some(
                StateStore::open_with(
                    dir.path(),
                    StoreOptions {
                        durability,
                        ..StoreOptions::default()
                    },
                )
                .unwrap(),
            ),
            None,
        ),
        Saver::Reference(durable) => (None, Some(ReferenceStore::open(dir.path(), durable))),
    };
    let io0 = wchar();
    let start = Instant::now();
    let mut file_bytes = 0;
    for (i, m) in messages.into_iter().enumerate() {
        state.messages.push(m);
        state.invoke_seq = Some(i as i64);
        state.updated_at = Timestamp::now();
        file_bytes += match (&store, &reference) {
            (Some(s), _) => s.save(&state).unwrap().bytes_written,
            (_, Some(r)) => r.save(&state),
            _ => unreachable!(),
        };
    }
    let time = start.elapsed();
    let io_bytes = match (io0, wchar()) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    Measured {
        time,
        file_bytes,
        io_bytes,
    }
}

fn repeats() -> usize {
    std::env::var("SESSION_BENCH_REPEATS")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|r: &usize| *r > 0)
        .unwrap_or(3)
}

/// min / median / max of `values`.
fn spread(values: &mut [f64]) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    (
        values[0],
        values[values.len() / 2],
        values[values.len() - 1],
    )
}

fn populate_sessions(root: &Path, n: usize) {
    StateStore::open(root).unwrap();
    let mut conn = Connection::open(root.join("state.db")).unwrap();
    let tx = conn.transaction().unwrap();
    {
        let mut stmt = tx
            .prepare("INSERT INTO session_state (session_id, updated_at, run_id, invoke_seq, schema_version, meta_json, message_count, last_user_message, workspace_root) VALUES (?1, ?2, ?3, 3, 1, ?4, 12, ?5, ?6)")
            .unwrap();
        for i in 0..n {
            let ws = if i % 4 == 0 {
                "/home/dev/other"
            } else {
                "/home/dev/acme-app"
            };
            stmt.execute(params![
                format!("{:08x}-0000-4000-8000-{:012x}", i, i),
                Timestamp::from_unix_millis(1_790_000_000_000 + (i as i64) * 7919 % 100_000_000)
                    .as_str(),
                format!("run-{i}"),
                format!(r#"{{"codelia_workspace_root":"{ws}"}}"#),
                format!("question number {i}"),
                ws,
            ])
            .unwrap();
        }
    }
    tx.commit().unwrap();
}

/// One row of the reference's `list()`.
type SummaryRow = (
    String,
    String,
    Option<String>,
    Option<i64>,
    Option<String>,
    Option<String>,
);

/// The reference's `list()`: every row by `updated_at` DESC, then the page in memory.
fn reference_list(conn: &Connection, limit: Option<usize>) -> usize {
    let mut stmt = conn
        .prepare("SELECT session_id, updated_at, run_id, message_count, last_user_message, workspace_root FROM session_state ORDER BY updated_at DESC")
        .unwrap();
    let rows: Vec<SummaryRow> = stmt
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    rows.into_iter().take(limit.unwrap_or(usize::MAX)).count()
}

fn best_of<T>(runs: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut best = Duration::MAX;
    let mut out = None;
    for _ in 0..runs {
        let start = Instant::now();
        let v = f();
        best = best.min(start.elapsed());
        out = Some(v);
    }
    (best, out.unwrap())
}

fn populate_runs(root: &Path, n: usize, sessions: usize) {
    let days = (n / 1000).max(1);
    for i in 0..n {
        let day = i % days;
        let dir = root.join(format!(
            "2026/{:02}/{:02}",
            1 + (day / 28) % 12,
            1 + day % 28
        ));
        if i < days {
            fs::create_dir_all(&dir).unwrap();
        }
        let run_id = format!("{:08x}-1111-4111-8111-{:012x}", i, i);
        let session = format!("sess-{}", i % sessions);
        let started = format!(
            "2026-{:02}-{:02}T10:{:02}:{:02}.000Z",
            1 + (day / 28) % 12,
            1 + day % 28,
            (i / 60) % 60,
            i % 60
        );
        let body = format!(
            "{{\"type\":\"header\",\"schema_version\":1,\"run_id\":\"{run_id}\",\"session_id\":\"{session}\",\"started_at\":\"{started}\",\"model\":{{\"provider\":\"anthropic\",\"name\":\"claude-sonnet-4-5\"}}}}\n\
             {{\"type\":\"run.start\",\"run_id\":\"{run_id}\",\"session_id\":\"{session}\",\"ts\":\"{started}\",\"input\":{{\"type\":\"text\",\"text\":\"do thing {i}\"}}}}\n\
             {{\"type\":\"llm.request\",\"run_id\":\"{run_id}\",\"ts\":\"{started}\",\"seq\":1,\"input\":{{\"messages\":[{{\"role\":\"user\",\"content\":\"do thing {i}\"}}],\"tools\":null,\"tool_choice\":null}}}}\n\
             {{\"type\":\"llm.response\",\"run_id\":\"{run_id}\",\"ts\":\"{started}\",\"seq\":1,\"output\":{{\"messages\":[{{\"role\":\"assistant\",\"content\":\"done\"}}],\"usage\":{{\"model\":\"m\",\"input_tokens\":100,\"output_tokens\":5,\"total_tokens\":105}},\"stop_reason\":\"end_turn\",\"provider_meta\":null}}}}\n\
             {{\"type\":\"run.end\",\"run_id\":\"{run_id}\",\"ts\":\"{started}\",\"outcome\":\"completed\",\"final\":\"done\"}}\n"
        );
        fs::write(dir.join(format!("{run_id}.jsonl")), body).unwrap();
    }
}

/// The reference's `session.history` candidate search: walk, stat, read every first line.
fn reference_runs_for_session(root: &Path, session: &str) -> usize {
    let digits = |name: &str, n: usize| name.len() == n && name.bytes().all(|b| b.is_ascii_digit());
    let mut files = Vec::new();
    for y in fs::read_dir(root).unwrap().flatten() {
        if !digits(&y.file_name().to_string_lossy(), 4) || !y.path().is_dir() {
            continue;
        }
        for m in fs::read_dir(y.path()).unwrap().flatten() {
            if !digits(&m.file_name().to_string_lossy(), 2) {
                continue;
            }
            for d in fs::read_dir(m.path()).unwrap().flatten() {
                if !digits(&d.file_name().to_string_lossy(), 2) {
                    continue;
                }
                for f in fs::read_dir(d.path()).unwrap().flatten() {
                    if f.file_name().to_string_lossy().ends_with(".jsonl") {
                        let mtime = f.metadata().unwrap().modified().unwrap();
                        files.push((mtime, f.path()));
                    }
                }
            }
        }
    }
    files.sort_by_key(|f| std::cmp::Reverse(f.0));
    let mut found = 0;
    for (_, path) in files {
        let mut first = String::new();
        BufReader::new(fs::File::open(&path).unwrap())
            .read_line(&mut first)
            .unwrap();
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&first)
            && v["type"] == "header"
            && v["session_id"] == session
        {
            found += 1;
        }
    }
    found
}

fn enabled(section: &str) -> bool {
    std::env::var("SESSION_BENCH_ONLY").map_or(true, |only| only.split(',').any(|s| s == section))
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    println!("session-state benchmarks (SESSION_BENCH_SCALE={})", scale());

    if enabled("growth") {
        bench_growth();
    }
    if enabled("growth") || enabled("floor") {
        bench_floor();
    }
    if enabled("batch") {
        bench_batch();
    }
    if enabled("list") {
        bench_list();
    }
    if enabled("runs") {
        bench_runs();
    }
}

fn bench_growth() {
    let n = scaled(500);
    let reference = growth(n, Saver::Reference(false));
    let reference_durable = growth(n, Saver::Reference(true));
    let synced = growth(n, Saver::Ours(SaveDurability::Sync));
    let nosync = growth(n, Saver::Ours(SaveDurability::NoSync));
    println!("\n## session growing to {n} messages (~2 KB each), saved after every message");
    println!("| | time | message-file bytes | all bytes written (incl. SQLite WAL) |");
    println!("|---|---:|---:|---:|");
    let io = |m: &Measured| m.io_bytes.map_or("n/a".to_owned(), |b| b.to_string());
    for (name, m) in [
        (
            "ours, SaveDurability::Sync (fdatasync + WAL sync per save)",
            &synced,
        ),
        (
            "reference approach + fsync (temp fsync, rename, dir fsync, synchronous=FULL)",
            &reference_durable,
        ),
        ("ours, SaveDurability::NoSync (no fsync)", &nosync),
        (
            "reference as it is (no fsync, synchronous=NORMAL)",
            &reference,
        ),
    ] {
        println!("| {name} | {} | {} | {} |", ms(m.time), m.file_bytes, io(m));
    }
    let ratio = |ours: f64, reference: f64| {
        if ours <= reference {
            format!("1/{:.1}", reference / ours)
        } else {
            format!("{:.2}", ours / reference)
        }
    };
    let io_ratio = |a: &Measured, b: &Measured| match (a.io_bytes, b.io_bytes) {
        (Some(x), Some(y)) => ratio(x as f64, y as f64),
        _ => "n/a".to_owned(),
    };
    println!();
    println!("| ratio at equal durability | time | message-file bytes | all bytes written |");
    println!("|---|---:|---:|---:|");
    for (name, ours, base) in [
        (
            "ours Sync ÷ reference approach + fsync (both durable on power loss)",
            &synced,
            &reference_durable,
        ),
        (
            "ours NoSync ÷ reference as it is (neither fsyncs)",
            &nosync,
            &reference,
        ),
    ] {
        println!(
            "| {name} | {} | {} | {} |",
            ratio(ours.time.as_secs_f64(), base.time.as_secs_f64()),
            ratio(ours.file_bytes as f64, base.file_bytes as f64),
            io_ratio(ours, base)
        );
    }
    println!(
        "(for comparison only, mixed durability: ours Sync ÷ reference as it is, time {})",
        ratio(synced.time.as_secs_f64(), reference.time.as_secs_f64())
    );
}

/// CPU time (user + system) the calling thread has used, from the first field of
/// `/proc/thread-self/schedstat` (nanoseconds on a CPU; Linux), kept open and re-read in
/// place. Waiting for a sync is not CPU time: the difference over a save is the save's own
/// work, which the machine's load does not stretch the way it stretches wall time. Reads zero
/// where the file is missing.
struct ThreadCpu(Option<fs::File>);

impl ThreadCpu {
    fn open() -> ThreadCpu {
        ThreadCpu(fs::File::open("/proc/thread-self/schedstat").ok())
    }

    fn now(&self) -> Duration {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 96];
        let Some(file) = &self.0 else {
            return Duration::ZERO;
        };
        let n = file.read_at(&mut buf, 0).unwrap_or(0);
        std::str::from_utf8(&buf[..n])
            .ok()
            .and_then(|t| t.split_whitespace().next())
            .and_then(|ns| ns.parse().ok())
            .map_or(Duration::ZERO, Duration::from_nanos)
    }
}

/// One round of the floor section: the same 500-message growth saved four ways in lockstep,
/// message by message, each timed per save (the order rotates every message, so that none
/// always runs first after the others' syncs): ours without a held lease (`save` checks the
/// lease), ours through a held lease (`save`, which compares the list with the stored one),
/// ours through a held lease with `save_appended` (the caller names the kept messages), and
/// the floor (the message's line written and `fdatasync`ed on two plain files). Returns the
/// four total times in that order, then the four total CPU times ([`ThreadCpu`]).
fn floor_round(n: usize) -> [[Duration; 4]; 2] {
    let dirs = [(); 4].map(|()| tempfile::tempdir().unwrap());
    let open = |dir: &Path| {
        StateStore::open_with(
            dir,
            StoreOptions {
                durability: SaveDurability::Sync,
                ..StoreOptions::default()
            },
        )
        .unwrap()
    };
    let unleased = open(dirs[0].path());
    let held = open(dirs[1].path());
    let appending = open(dirs[2].path());
    let new_state = || SessionState {
        schema_version: Some(1i64.into()),
        session_id: "f6d2c6d5-4a12-4cc4-bbc9-9a0c0d2b5af1".into(),
        updated_at: Timestamp::now(),
        run_id: Some("8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a".into()),
        meta: Some(meta()),
        ..Default::default()
    };
    let mut states = [new_state(), new_state(), new_state()];
    let lease = held.lease(&states[1].session_id).unwrap();
    let append_lease = appending.lease(&states[2].session_id).unwrap();
    let plain = |name: &str| {
        fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dirs[3].path().join(name))
            .unwrap()
    };
    let (mut a, mut b) = (plain("a.jsonl"), plain("b.wal"));
    let mut times = [Duration::ZERO; 4];
    let mut cpu = [Duration::ZERO; 4];
    let clock = ThreadCpu::open();
    for i in 0..n {
        let m = message(i);
        let mut line = serde_json::to_vec(&m).unwrap();
        line.push(b'\n');
        for s in &mut states {
            s.messages.push(m.clone());
            s.invoke_seq = Some(i as i64);
            s.updated_at = Timestamp::now();
        }
        for k in 0..4 {
            let which = (i + k) % 4;
            let start = Instant::now();
            let cpu_start = clock.now();
            match which {
                0 => {
                    unleased.save(&states[0]).unwrap();
                }
                1 => {
                    lease.save(&states[1]).unwrap();
                }
                2 => {
                    append_lease.save_appended(&states[2], i).unwrap();
                }
                _ => {
                    for f in [&mut a, &mut b] {
                        f.write_all(&line).unwrap();
                        f.sync_data().unwrap();
                    }
                }
            }
            times[which] += start.elapsed();
            cpu[which] += clock.now().saturating_sub(cpu_start);
        }
    }
    [times, cpu]
}

/// The durable save against its physical floor: in each round the four are interleaved save
/// by save (fsync latency drifts within seconds on a shared machine, see [`floor_round`]);
/// floor time ÷ ours per round, so 1.0 means a save costs no more than its two syncs.
fn bench_floor() {
    let n = scaled(500);
    let rounds = repeats();
    let load_before = load_average();
    // Per save: [unleased, leased, leased appending, floor].
    let mut ms: [Vec<f64>; 4] = Default::default();
    let mut cpu_ms: [Vec<f64>; 4] = Default::default();
    let mut ratios: [Vec<f64>; 3] = Default::default();
    for _ in 0..rounds {
        let [times, cpu] = floor_round(n);
        for (all, t) in cpu_ms.iter_mut().zip(cpu) {
            all.push(t.as_secs_f64() * 1e3 / n as f64);
        }
        let secs = times.map(|t| t.as_secs_f64());
        for (all, t) in ms.iter_mut().zip(secs) {
            all.push(t * 1e3 / n as f64);
        }
        for (all, t) in ratios.iter_mut().zip(secs) {
            all.push(secs[3] / t);
        }
    }
    let ms = ms.map(|mut v| spread(&mut v));
    let cpu = cpu_ms.map(|mut v| spread(&mut v));
    let ratios = ratios.map(|mut v| spread(&mut v));
    println!();
    println!(
        "## durable save against its floor ({rounds} rounds of {n} saves, interleaved save by save, min / median / max)"
    );
    println!(
        "| | per save | floor ÷ this (goal >= 0.8) | CPU per save (user + system, this thread) |"
    );
    println!("|---|---:|---:|---:|");
    let names = [
        "ours, SaveDurability::Sync, `save` without a lease (the lease checked per save)",
        "ours, SaveDurability::Sync, `save` through a held lease",
        "ours, SaveDurability::Sync, `save_appended` through a held lease",
        "floor: 2 × (write + fdatasync) of the message's bytes",
    ];
    for (k, name) in names.iter().enumerate() {
        let (a, b, c) = ms[k];
        let (q, r, t) = cpu[k];
        let ratio = ratios
            .get(k)
            .map_or_else(String::new, |(g, h, i)| format!("{g:.2} / {h:.2} / {i:.2}"));
        println!(
            "| {name} | {a:.3} / {b:.3} / {c:.3} ms | {ratio} | {q:.3} / {r:.3} / {t:.3} ms |"
        );
    }
    println!(
        "(load average before / after: {load_before} / {})",
        load_average()
    );
}

/// The 1-minute load average (`/proc/loadavg`), or `n/a`.
fn load_average() -> String {
    fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|t| t.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "n/a".to_owned())
}

/// `sessions` sessions, each saved `rounds` times with one new message (~2 KB) per save:
/// one `save_batch` of every session per round (`batched`) or one `save` per session.
/// Returns the time of the timed rounds (the first save of every session is not timed).
fn batch_rounds(sessions: usize, rounds: usize, batched: bool) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    let mut states: Vec<SessionState> = (0..sessions)
        .map(|i| SessionState {
            schema_version: Some(1i64.into()),
            session_id: format!("{i:08x}-4a12-4cc4-bbc9-9a0c0d2b5af1"),
            updated_at: Timestamp::now(),
            meta: Some(meta()),
            messages: vec![message(0)],
            ..Default::default()
        })
        .collect();
    let save_all = |states: &[SessionState]| {
        if batched {
            let saves: Vec<BatchSave<'_>> = states.iter().map(BatchSave::new).collect();
            let report = store.save_batch(&saves, BatchPolicy::PerSession).unwrap();
            assert_eq!(report.saved(), states.len());
        } else {
            for s in states {
                store.save(s).unwrap();
            }
        }
    };
    save_all(&states);
    let start = Instant::now();
    for r in 1..=rounds {
        for s in &mut states {
            s.messages.push(message(r));
            s.updated_at = Timestamp::now();
        }
        save_all(&states);
    }
    start.elapsed()
}

/// Batched saves against single saves of the same sessions and messages, interleaved.
fn bench_batch() {
    let rounds = scaled(20);
    let repeats = repeats();
    let load_before = load_average();
    println!(
        "\n## save_batch of N sessions ÷ N single saves (SaveDurability::Sync, {rounds} saves of \
         each session, {repeats} interleaved repeats, min / median / max)"
    );
    println!("| N | single, per session save | batched, per session save | batched ÷ single |");
    println!("|---:|---:|---:|---:|");
    for sessions in [4, 16, 64] {
        let (mut single, mut batched, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..repeats {
            let one = batch_rounds(sessions, rounds, false).as_secs_f64();
            let many = batch_rounds(sessions, rounds, true).as_secs_f64();
            let per = (sessions * rounds) as f64;
            single.push(one * 1e3 / per);
            batched.push(many * 1e3 / per);
            ratios.push(many / one);
        }
        let (a, b, c) = spread(&mut single);
        let (d, e, f) = spread(&mut batched);
        let (g, h, i) = spread(&mut ratios);
        println!(
            "| {sessions} | {a:.3} / {b:.3} / {c:.3} ms | {d:.3} / {e:.3} / {f:.3} ms | {g:.2} / {h:.2} / {i:.2} |"
        );
    }
    println!(
        "(load average before / after: {load_before} / {})",
        load_average()
    );
}

fn bench_list() {
    let sessions = scaled(100_000);
    let dir = tempfile::tempdir().unwrap();
    populate_sessions(dir.path(), sessions);
    let store = StateStore::open(dir.path()).unwrap();
    let conn = Connection::open(dir.path().join("state.db")).unwrap();
    let (t_first, got) = best_of(5, || {
        store
            .list(&ListQuery::all().limit(50))
            .unwrap()
            .entries
            .len()
    });
    assert_eq!(got, 50.min(sessions));
    let (t_first_ws, _) = best_of(5, || {
        store
            .list(&ListQuery::all().workspace("/home/dev/acme-app").limit(50))
            .unwrap()
            .entries
            .len()
    });
    let (t_full, got) = best_of(3, || store.list(&ListQuery::all()).unwrap().entries.len());
    assert_eq!(got, sessions);
    let (r_first, _) = best_of(3, || reference_list(&conn, Some(50)));
    let (r_full, _) = best_of(3, || reference_list(&conn, None));
    println!("\n## list at {sessions} sessions");
    println!("| | ours | reference list() | ours / reference |");
    println!("|---|---|---|---|");
    println!(
        "| first page of 50 | {} | {} | 1/{:.0} |",
        ms(t_first),
        ms(r_first),
        r_first.as_secs_f64() / t_first.as_secs_f64()
    );
    println!(
        "| first page of 50, workspace filter | {} | {} | 1/{:.0} |",
        ms(t_first_ws),
        ms(r_first),
        r_first.as_secs_f64() / t_first_ws.as_secs_f64()
    );
    println!(
        "| full list | {} | {} | {:.2} |",
        ms(t_full),
        ms(r_full),
        t_full.as_secs_f64() / r_full.as_secs_f64()
    );
}

fn bench_runs() {
    let runs = scaled(100_000);
    let per_session = 10;
    let dir = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    populate_runs(dir.path(), runs, (runs / per_session).max(1));
    let t_populate = t0.elapsed();
    let store = StateStore::open(dir.path()).unwrap();
    let t0 = Instant::now();
    let report = store.index_runs().unwrap();
    let t_index = t0.elapsed();
    assert_eq!(report.added as usize, runs);
    // Right after the first pass: day directories changed within 2 s of being looked at are
    // racy and listed again (their files are stat'ed, none is read).
    let t0 = Instant::now();
    let again = store.index_runs().unwrap();
    let t_racy = t0.elapsed();
    assert_eq!(again.unchanged as usize, runs);
    assert_eq!(again.files_read, 0);
    // Settled: nothing is listed below the month level, no run file is looked at.
    let (t_warm, warm) = best_of(5, || store.index_runs().unwrap());
    assert_eq!(warm.unchanged as usize, runs);
    assert_eq!((warm.dirs_listed, warm.files_checked), (0, 0));
    let target = "sess-7";
    let (t_ours, found) = best_of(5, || store.runs_for_session(target).unwrap().len());
    let (t_ref, found_ref) = best_of(2, || reference_runs_for_session(dir.path(), target));
    assert_eq!(found, found_ref);
    println!("\n## runs_for_session at {runs} runs ({found} runs in the session)");
    println!("| | ours | reference (first line of every file) | ours / reference |");
    println!("|---|---|---|---|");
    println!(
        "| runs_for_session | {} | {} | 1/{:.0} |",
        ms(t_ours),
        ms(t_ref),
        t_ref.as_secs_f64() / t_ours.as_secs_f64()
    );
    println!(
        "| index_runs, nothing changed ({} day dirs unchanged, {} files looked at) | {} | | |",
        warm.dirs_unchanged,
        warm.files_checked,
        ms(t_warm)
    );
    println!(
        "(one-off costs: writing the files {}, first index_runs {}, index_runs right after it \
         ({} racy day dirs listed again, {} files stat'ed) {})",
        ms(t_populate),
        ms(t_index),
        again.dirs_listed,
        again.files_checked,
        ms(t_racy)
    );
}
