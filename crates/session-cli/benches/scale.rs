//! `cargo xtask bench scale`: how the `sessions` commands scale with the store, measured end
//! to end as processes (the release binary, warm page cache) on generated stores.
//!
//! # The generated stores
//! [`generate`] writes `n` runs with the project's own writer (`Durability::Buffered`): 30 runs
//! per session, one run a minute from 2026-05-28 (so ~1,440 runs per day directory), each run
//! a realistic small turn of about 3.4 KB: `header` (model, a 500-byte system prompt),
//! `run.start`, `run.status`, one `llm.request` carrying up to six earlier turns, its
//! `llm.response` with usage, an `agent.event` final, `run.status`, `run.end` (every 17th an
//! error). Each session also gets a saved state (`state.db` row + message log, two messages)
//! so `sessions --all` has one session per 30 runs. Disk: about 4.2 KB per run on a 4 KiB-block
//! file system plus ~0.4 KB per run of `state.db`: 1k runs ≈ 5 MB, 10k ≈ 46 MB, 100k ≈ 460 MB,
//! 1M ≈ 4.6 GB (not run by default).
//!
//! # What is measured
//! For each size: the cold first index build (`reindex` on a store without `state.db`), then
//! the store-sized commands of the scaling table, interleaved round by round (`REPEATS`
//! rounds; each round runs each command once, in order), printing min / median / max per
//! command and the load average (`/proc/loadavg`) before and after. Answer-sized commands (one
//! run, one session, the first page) should not grow: once every store is generated, they are
//! timed on all of them interleaved (each round runs each command on every store back to back,
//! the order of the sizes alternating), so that a machine slowing down during the run (page
//! cache reclaimed, other load) moves both sides of a ratio alike; the growth table prints
//! time at the largest size ÷ time at the smallest, as the ratio of the medians and as the
//! min / median / max of the per-round ratios (the goal, ≤ 1.5, is held to the median of the
//! per-round ratios). Store-sized commands (`verify`, `reindex`) print their
//! throughput over the store's bytes and that ÷ the session-jsonl reader's throughput over one
//! file holding the same bytes (goal ≥ 0.3, and ≥ 200 MB/s absolute).
//!
//! The first index build is measured the same way, once per round: the generator's
//! `state.db` (sessions, no run rows) is put back before each timed `runs --limit 50`, which
//! then indexes the whole store (the cold listing).
//!
//! Open runs: after the answer-sized rounds, an open run of `SESSION_SCALE_OPEN_MB` MB (default 211, the
//! issue's case; 0 leaves it out) is written into the store (`llm.request` lines of ~100 KB,
//! no `run.end`) and indexed once; then, interleaved, `runs --limit 50` after appending one line
//! to it and `runs --limit 50` with nothing new. Both should cost the same: the refresh reads
//! the appended line and two 4 KiB guards, not the run (`tests/resume.rs` in session-state
//! counts the bytes).
//!
//! The closing "targets" table checks the goals at the largest size: answer-sized growth
//! ≤ 1.5, store-sized ≥ 0.3 × the reader and ≥ 200 MB/s, `stats` ≤ 20 ms (by UTC day and by
//! day of Europe/Berlin, whose days the running totals answer from UTC days and the
//! quarter-hours at their ends), and the open-run refresh after an append ≤ 1.5 × the idle
//! refresh.
//!
//! A 1M-run store (`SESSION_SCALE_SIZES=1000,1000000`) needs about 4.6 GB of disk under
//! `SESSION_SCALE_DIR` and ~10 minutes of generation at ~2,000 runs/s; it is not run by default.
//!
//! Environment: `SESSION_SCALE_SIZES` (default `1000,100000`), `SESSION_SCALE_REPEATS`
//! (default 7), `SESSION_SCALE_DIR` (parent of the temporary stores; default the system temp
//! directory), `SESSION_SCALE_OPEN_MB` (default 211), `SESSION_SCALE_KEEP` (set: keep the
//! generated stores and print where, for profiling one command by hand). Otherwise the stores
//! are removed at the end. `SESSION_SCALE_BASELINE` (the path of another `sessions` binary,
//! e.g. one built from an earlier commit and copied aside): the first index build is also
//! timed with it, right after this binary's in every round, and the ratio of the two printed.

// A benchmark program: printing the table is its interface.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use session_jsonl::{Durability, RunWriter, WriterOptions};
use session_schema::{
    AgentEvent, AgentEventRecord, AssistantMessage, BaseMessage, ContentEvent, Header, Lazy,
    LlmRequest, LlmRequestInput, LlmResponse, LlmResponseOutput, MessageContent, ModelInfo,
    Prompts, Record, RunEnd, RunInput, RunOutcome, RunStart, RunStatus, RunStatusKind,
    SessionState, TextInput, Timestamp, Usage, UserMessage,
};

const RUNS_PER_SESSION: usize = 30;
const BASE_MS: i64 = 1_780_000_000_000; // 2026-05-28

fn user(t: String) -> BaseMessage {
    BaseMessage::User(UserMessage {
        content: MessageContent::Text(t),
        ..Default::default()
    })
}

fn assistant(t: String) -> BaseMessage {
    BaseMessage::Assistant(AssistantMessage {
        content: Some(MessageContent::Text(t)),
        ..Default::default()
    })
}

fn session_id(i: usize) -> String {
    let s = i / RUNS_PER_SESSION;
    format!("5e55{:04x}-0000-4000-8000-{s:012x}", s % 0xffff)
}

fn run_id(i: usize) -> String {
    format!("0bench{:02x}-0000-4000-8000-{i:012x}", i % 251)
}

/// Writes `n` runs and one saved session per 30 runs under `root` (see the module docs);
/// returns the bytes of run files written.
fn generate(root: &Path, n: usize) -> u64 {
    let opts = WriterOptions::with_durability(Durability::Buffered);
    let system = "You are a coding assistant. Follow the repository's AGENTS.md. ".repeat(8);
    let store = session_state::StateStore::open_with(
        root,
        session_state::StoreOptions {
            durability: session_state::SaveDurability::NoSync,
            ..Default::default()
        },
    )
    .unwrap();
    let mut bytes = 0;
    for i in 0..n {
        let session = session_id(i);
        let run = run_id(i);
        let t0 = BASE_MS + i as i64 * 60_000;
        let ts = |d: i64| Timestamp::from_unix_millis(t0 + d);
        let header = Header {
            schema_version: 1,
            run_id: run.clone(),
            session_id: Some(session.clone()),
            started_at: ts(0),
            model: Some(ModelInfo {
                provider: Some("anthropic".into()),
                name: Some(["claude-sonnet-4-5", "claude-haiku-4-5", "gpt-5.1"][i % 3].into()),
                ..Default::default()
            }),
            prompts: Some(Prompts {
                system: Some(system.clone()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let w = RunWriter::create(root, &header, opts.clone()).unwrap();
        let question = format!(
            "Question {i}: explain module {} and its tests (日本語の説明も).",
            i % 97
        );
        let answer = format!(
            "Module {} parses the input, validates it and writes a report; its tests cover the \
             error paths. ",
            i % 97
        )
        .repeat(3);
        let history: Vec<BaseMessage> = (0..(i % RUNS_PER_SESSION).min(6))
            .flat_map(|k| {
                [
                    user(format!("earlier question {k}")),
                    assistant(format!("earlier answer {k} with some detail")),
                ]
            })
            .chain([user(question.clone())])
            .collect();
        let seq = (i % RUNS_PER_SESSION) as i64 + 1;
        let recs = vec![
            Record::RunStart(RunStart {
                run_id: run.clone(),
                session_id: Some(session.clone()),
                ts: ts(5),
                input: RunInput::Text(TextInput {
                    text: question.clone(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            Record::RunStatus(RunStatus {
                run_id: run.clone(),
                ts: ts(6),
                status: RunStatusKind::Running,
                ..Default::default()
            }),
            Record::LlmRequest(LlmRequest {
                run_id: run.clone(),
                ts: ts(10),
                seq,
                input: LlmRequestInput {
                    messages: Lazy::new(&history).unwrap(),
                    tools: Some(Lazy::new(&None).unwrap()),
                    tool_choice: Some(None),
                    ..Default::default()
                },
                ..Default::default()
            }),
            Record::LlmResponse(LlmResponse {
                run_id: run.clone(),
                ts: ts(900),
                seq,
                output: LlmResponseOutput {
                    messages: Lazy::new(&vec![assistant(answer.clone())]).unwrap(),
                    usage: Some(Some(Usage {
                        model: "m".into(),
                        input_tokens: 2000 + i as u64 % 500,
                        output_tokens: 120,
                        total_tokens: 2120 + i as u64 % 500,
                        ..Default::default()
                    })),
                    stop_reason: Some(Some("end_turn".into())),
                    ..Default::default()
                },
                ..Default::default()
            }),
            Record::AgentEvent(AgentEventRecord {
                run_id: run.clone(),
                ts: ts(905),
                seq: 0,
                event: AgentEvent::Final(ContentEvent {
                    content: Some(answer.clone()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            Record::RunStatus(RunStatus {
                run_id: run.clone(),
                ts: ts(906),
                status: RunStatusKind::Completed,
                ..Default::default()
            }),
            Record::RunEnd(RunEnd {
                run_id: run.clone(),
                ts: ts(907),
                outcome: if i % 17 == 0 {
                    RunOutcome::Error
                } else {
                    RunOutcome::Completed
                },
                final_text: Some(answer.clone()),
                ..Default::default()
            }),
        ];
        for r in &recs {
            w.append(r).unwrap();
        }
        let path = w.path().to_owned();
        w.close().unwrap();
        bytes += std::fs::metadata(path).unwrap().len();
        if i % RUNS_PER_SESSION == RUNS_PER_SESSION - 1 || i + 1 == n {
            let state = SessionState {
                session_id: session.clone(),
                updated_at: ts(908),
                run_id: Some(run.clone()),
                messages: vec![user(question), assistant(answer)],
                ..Default::default()
            };
            store.save(&state).unwrap();
        }
    }
    bytes
}

/// The `sessions` binary built with this benchmark's profile.
const BIN: &str = env!("CARGO_BIN_EXE_sessions");

/// Another `sessions` binary to time the first index build with, round by round beside this
/// one's (`SESSION_SCALE_BASELINE`: e.g. one built from the main branch, copied aside).
fn baseline() -> Option<PathBuf> {
    std::env::var_os("SESSION_SCALE_BASELINE").map(PathBuf::from)
}

/// Runs `sessions --root <root> <args>` as a process, output discarded; its wall time.
fn sessions(root: &Path, args: &[String]) -> Duration {
    sessions_of(Path::new(BIN), root, args)
}

/// [`sessions`] with the binary `bin`.
fn sessions_of(bin: &Path, root: &Path, args: &[String]) -> Duration {
    let start = Instant::now();
    let out = Command::new(bin)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", "/nonexistent-home")
        .env("TZ", "UTC")
        .arg("--root")
        .arg(root)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let took = start.elapsed();
    let code = out.status.code().unwrap_or(-1);
    assert!(
        code <= 1,
        "sessions {args:?} exited {code}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    took
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Min / median / max of repeated measurements (times, or per-round ratios).
#[derive(Debug, Clone, Copy)]
struct Spread<T = Duration> {
    min: T,
    median: T,
    max: T,
}

fn spread(v: Vec<Duration>) -> Spread {
    spread_by(v, Ord::cmp)
}

/// [`spread`] of values ordered by `cmp`.
fn spread_by<T: Copy>(mut v: Vec<T>, cmp: impl Fn(&T, &T) -> std::cmp::Ordering) -> Spread<T> {
    v.sort_by(cmp);
    Spread {
        min: v[0],
        median: v[v.len() / 2],
        max: v[v.len() - 1],
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

/// How a command of the table scales.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Its answer is one run, one session or one page: should not grow with the store.
    Answer,
    /// Reads the whole store: should be bytes-bound.
    Store,
    /// Reads the whole store after the generator's `state.db` (no run rows) is put back.
    Cold,
}

/// The label of `stats` by day of a zone with daylight-saving changes (its days are not
/// UTC days: summed from the running totals' days and the quarter-hours at their ends).
const STATS_ZONE: &str = "stats --tz Europe/Berlin";

/// The label of the cold listing (the first index build).
const COLD: &str = "first index build (runs --limit 50, no run rows)";

/// The label of the cold listing by the baseline binary ([`baseline`]).
const COLD_BASELINE: &str = "first index build, baseline binary";

/// The commands of the scaling table, by label: answer-sized first, then store-sized.
fn commands(n: usize) -> Vec<(&'static str, Vec<String>, Kind)> {
    let run = run_id(n / 2);
    let session = session_id(n / 2);
    let s = |v: &[&str]| v.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
    let cold_baseline = baseline().map(|_| {
        (
            COLD_BASELINE,
            s(&["runs", "--limit", "50", "--json"]),
            Kind::Cold,
        )
    });
    let mut cmds = vec![(COLD, s(&["runs", "--limit", "50", "--json"]), Kind::Cold)];
    cmds.extend(cold_baseline);
    cmds.extend([
        (
            "runs --limit 50",
            s(&["runs", "--limit", "50", "--json"]),
            Kind::Answer,
        ),
        ("show RUN", s(&["show", &run]), Kind::Answer),
        (
            "export RUN --format md",
            s(&["export", &run, "--format", "md"]),
            Kind::Answer,
        ),
        ("replay RUN", s(&["replay", &run]), Kind::Answer),
        ("tail RUN", s(&["tail", &run]), Kind::Answer),
        ("verify RUN", s(&["verify", &run]), Kind::Answer),
        (
            "sessions --all (first page)",
            s(&["sessions", "--all"]),
            Kind::Answer,
        ),
        ("history SESSION", s(&["history", &session]), Kind::Answer),
        ("stats", s(&["stats", "--json"]), Kind::Answer),
        (
            STATS_ZONE,
            s(&["stats", "--json", "--tz", "Europe/Berlin"]),
            Kind::Answer,
        ),
        (
            "verify (whole store)",
            s(&["verify", "--json"]),
            Kind::Store,
        ),
        ("reindex", s(&["reindex"]), Kind::Store),
    ]);
    cmds
}

/// The files of `state.db` (with its WAL, when there is one), as `(path in the store, copy)`.
fn save_state_db(root: &Path, scratch: &Path) -> Vec<(PathBuf, PathBuf)> {
    let mut saved = Vec::new();
    for name in ["state.db", "state.db-wal"] {
        let from = root.join(name);
        if from.exists() {
            let to = scratch.join(format!("pristine-{name}"));
            std::fs::copy(&from, &to).unwrap();
            saved.push((from, to));
        }
    }
    saved
}

/// Puts the saved `state.db` back (the run index empty again).
fn restore_state_db(root: &Path, saved: &[(PathBuf, PathBuf)]) {
    for name in ["state.db-wal", "state.db-shm"] {
        let _ = std::fs::remove_file(root.join(name));
    }
    for (at, copy) in saved {
        std::fs::copy(copy, at).unwrap();
    }
}

/// Writes an open run of about `mb` MB (header, `llm.request` lines of ~100 KB, no
/// `run.end`) into the store; its path.
fn write_open_run(root: &Path, mb: u64) -> PathBuf {
    let run = "0pen0000-0000-4000-8000-000000000001";
    let started = Timestamp::from_unix_millis(BASE_MS - 86_400_000);
    let header = Header {
        schema_version: 1,
        run_id: run.into(),
        session_id: Some(session_id(0)),
        started_at: started,
        ..Default::default()
    };
    let w = RunWriter::create(
        root,
        &header,
        WriterOptions::with_durability(Durability::Buffered),
    )
    .unwrap();
    let chunk = "The file under review has these lines; explain each. ".repeat(1900);
    let target = mb * 1_000_000;
    let mut seq = 0;
    while std::fs::metadata(w.path()).unwrap().len() < target {
        seq += 1;
        let history: Vec<BaseMessage> = vec![user(format!("{seq}: {chunk}"))];
        w.append(&Record::LlmRequest(LlmRequest {
            run_id: run.into(),
            ts: Timestamp::from_unix_millis(BASE_MS - 86_400_000 + seq),
            seq,
            input: LlmRequestInput {
                messages: Lazy::new(&history).unwrap(),
                ..Default::default()
            },
            ..Default::default()
        }))
        .unwrap();
    }
    let path = w.path().to_owned();
    w.close().unwrap();
    path
}

/// One `run.status` line for the open run, as its writer would append it.
fn status_line(i: usize) -> String {
    format!(
        "{{\"type\":\"run.status\",\"run_id\":\"0pen0000-0000-4000-8000-000000000001\",\
         \"ts\":\"2026-05-27T00:00:{:02}.000Z\",\"status\":\"running\"}}\n",
        i % 60
    )
}

/// The open-run measurement: (size, first index, refresh after one appended line, refresh
/// with nothing new).
struct OpenRun {
    bytes: u64,
    first: Duration,
    after_append: Spread,
    idle: Spread,
}

fn measure_open_run(root: &Path, mb: u64, repeats: usize) -> OpenRun {
    let path = write_open_run(root, mb);
    let bytes = std::fs::metadata(&path).unwrap().len();
    let list = ["runs", "--limit", "50", "--json"].map(str::to_owned);
    let first = sessions(root, &list);
    let (mut after, mut idle) = (Vec::new(), Vec::new());
    for i in 0..repeats.max(3) {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut f, status_line(i).as_bytes()).unwrap();
        drop(f);
        after.push(sessions(root, &list));
        idle.push(sessions(root, &list));
    }
    std::fs::remove_file(&path).unwrap();
    OpenRun {
        bytes,
        first,
        after_append: spread(after),
        idle: spread(idle),
    }
}

struct Measured {
    /// The generated store (removed when this is dropped, unless `SESSION_SCALE_KEEP`).
    dir: tempfile::TempDir,
    root: PathBuf,
    runs: usize,
    bytes: u64,
    generate: Duration,
    cold_index: Duration,
    reader_bps: f64,
    times: BTreeMap<&'static str, Spread>,
    order: Vec<&'static str>,
    kinds: BTreeMap<&'static str, Kind>,
    open_run: Option<OpenRun>,
    load_before: String,
    load_after: String,
}

/// The session-jsonl reader's bytes/s over one file holding every run file's bytes
/// (concatenated; read three times, the fastest kept, page cache warm).
fn reader_throughput(root: &Path, scratch: &Path) -> f64 {
    let listing = session_jsonl::list_run_files(root).unwrap();
    let one = scratch.join("all-runs.jsonl");
    {
        let mut out = std::io::BufWriter::new(std::fs::File::create(&one).unwrap());
        for f in &listing.files {
            let bytes = std::fs::read(&f.path).unwrap();
            std::io::Write::write_all(&mut out, &bytes).unwrap();
        }
    }
    let size = std::fs::metadata(&one).unwrap().len();
    let mut best = Duration::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        let read = session_jsonl::read_run(&one).unwrap();
        assert!(!read.records.is_empty());
        best = best.min(t.elapsed());
    }
    std::fs::remove_file(&one).unwrap();
    size as f64 / best.as_secs_f64()
}

fn measure(parent: &Path, n: usize, repeats: usize) -> Measured {
    let dir = tempfile::Builder::new()
        .prefix("sessions-scale-")
        .tempdir_in(parent)
        .unwrap();
    let root = dir.path().join("sessions");
    let t = Instant::now();
    let bytes = generate(&root, n);
    let generate = t.elapsed();
    // The cold first index build: the generator's `state.db` holds sessions but no run rows.
    let pristine = save_state_db(&root, dir.path());
    let cold_index = sessions(&root, &["reindex".to_owned()]);
    let reader_bps = reader_throughput(&root, dir.path());
    let cmds = commands(n);
    let load_before = loadavg();
    let mut all: BTreeMap<&'static str, Vec<Duration>> = BTreeMap::new();
    // One warm-up round, then interleaved rounds.
    let bin = |label: &str| match baseline() {
        Some(b) if label == COLD_BASELINE => b,
        _ => PathBuf::from(BIN),
    };
    // Answer-sized commands are timed later, across the sizes ([`measure_answers`]).
    let store_sized = || cmds.iter().filter(|c| c.2 != Kind::Answer);
    for (label, args, kind) in store_sized() {
        if *kind == Kind::Cold {
            restore_state_db(&root, &pristine);
        }
        sessions_of(&bin(label), &root, args);
    }
    for _ in 0..repeats {
        for (label, args, kind) in store_sized() {
            if *kind == Kind::Cold {
                restore_state_db(&root, &pristine);
            }
            all.entry(label)
                .or_default()
                .push(sessions_of(&bin(label), &root, args));
        }
    }
    let load_after = loadavg();
    let times = all.into_iter().map(|(k, v)| (k, spread(v))).collect();
    Measured {
        dir,
        root,
        runs: n,
        bytes,
        generate,
        cold_index,
        reader_bps,
        times,
        order: cmds.iter().map(|c| c.0).collect(),
        kinds: cmds.iter().map(|c| (c.0, c.2)).collect(),
        open_run: None,
        load_before,
        load_after,
    }
}

/// Per-round ratios of an answer-sized command's time at the largest size ÷ at the smallest.
type Growth = Spread<f64>;

/// Times the answer-sized commands on every store, interleaved across the sizes so that a
/// change of the machine's speed during the run moves both sides of a growth ratio: one
/// warm-up call of each command on each store, then `repeats` rounds, each timing every
/// command on every store back to back (the sizes in turn smallest first, then largest first,
/// so neither side always runs first). Fills each size's `times`; returns each command's
/// per-round growth (largest ÷ smallest), when there are two sizes or more.
fn measure_answers(sized: &mut [Measured], repeats: usize) -> BTreeMap<&'static str, Growth> {
    let per_size: Vec<Vec<(&'static str, Vec<String>)>> = sized
        .iter()
        .map(|m| {
            commands(m.runs)
                .into_iter()
                .filter(|c| c.2 == Kind::Answer)
                .map(|(label, args, _)| (label, args))
                .collect()
        })
        .collect();
    for (m, cmds) in sized.iter().zip(&per_size) {
        for (_, args) in cmds {
            sessions(&m.root, args);
        }
    }
    let mut all: Vec<BTreeMap<&'static str, Vec<Duration>>> = vec![BTreeMap::new(); sized.len()];
    let mut ratios: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
    let labels: Vec<&'static str> = per_size
        .first()
        .map(|cmds| cmds.iter().map(|c| c.0).collect())
        .unwrap_or_default();
    for round in 0..repeats {
        for (c, label) in labels.iter().enumerate() {
            let mut order: Vec<usize> = (0..sized.len()).collect();
            if round % 2 == 1 {
                order.reverse();
            }
            let mut took = vec![Duration::ZERO; sized.len()];
            for i in order {
                let args = &per_size[i][c].1;
                took[i] = sessions(&sized[i].root, args);
                all[i].entry(label).or_default().push(took[i]);
            }
            if let (Some(first), Some(last)) = (took.first(), took.last())
                && sized.len() >= 2
            {
                ratios
                    .entry(label)
                    .or_default()
                    .push(last.as_secs_f64() / first.as_secs_f64());
            }
        }
    }
    for (m, times) in sized.iter_mut().zip(all) {
        m.times
            .extend(times.into_iter().map(|(label, v)| (label, spread(v))));
    }
    ratios
        .into_iter()
        .map(|(label, r)| (label, spread_by(r, f64::total_cmp)))
        .collect()
}

fn main() {
    let sizes: Vec<usize> = std::env::var("SESSION_SCALE_SIZES")
        .unwrap_or_else(|_| "1000,100000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .filter(|n| *n >= RUNS_PER_SESSION)
        .collect();
    let repeats: usize = std::env::var("SESSION_SCALE_REPEATS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(7)
        .max(1);
    let parent = std::env::var_os("SESSION_SCALE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    assert!(!sizes.is_empty(), "SESSION_SCALE_SIZES names no size ≥ 30");
    let mut results = Vec::new();
    for &n in &sizes {
        eprintln!("scale: {n} runs under {}", parent.display());
        results.push(measure(&parent, n, repeats));
    }
    eprintln!("scale: answer-sized commands, interleaved across the sizes");
    let growth = measure_answers(&mut results, repeats);
    let open_mb: u64 = std::env::var("SESSION_SCALE_OPEN_MB")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(211);
    for m in &mut results {
        if open_mb > 0 {
            m.open_run = Some(measure_open_run(&m.root, open_mb, repeats));
        }
        m.load_after = loadavg();
    }
    for m in &results {
        println!(
            "\n### {} runs: {:.1} MiB of run files, generated in {:.1} s; load average {} → {}",
            m.runs,
            m.bytes as f64 / (1 << 20) as f64,
            m.generate.as_secs_f64(),
            m.load_before,
            m.load_after
        );
        println!(
            "cold first index build (reindex, no run rows): {} ms = {:.0} MB/s; reader over one \
             file of the same bytes: {:.0} MB/s",
            ms(m.cold_index),
            m.bytes as f64 / m.cold_index.as_secs_f64() / 1e6,
            m.reader_bps / 1e6
        );
        println!("\n| command | min ms | median ms | max ms | store MB/s | ÷ reader |");
        println!("|---|---:|---:|---:|---:|---:|");
        for label in &m.order {
            let s = m.times[label];
            let (bps, ratio) = if m.kinds[label] == Kind::Answer {
                (String::new(), String::new())
            } else {
                let bps = m.bytes as f64 / s.median.as_secs_f64();
                (
                    format!("{:.0}", bps / 1e6),
                    format!("{:.2}", bps / m.reader_bps),
                )
            };
            println!(
                "| `{label}` | {} | {} | {} | {bps} | {ratio} |",
                ms(s.min),
                ms(s.median),
                ms(s.max)
            );
        }
        if let (Some(new), Some(old)) = (m.times.get(COLD), m.times.get(COLD_BASELINE)) {
            println!(
                "\nfirst index build, this binary ÷ baseline binary ({}), medians: {:.2} \
                 (min {:.2}, max {:.2})",
                baseline().unwrap_or_default().display(),
                new.median.as_secs_f64() / old.median.as_secs_f64(),
                new.min.as_secs_f64() / old.min.as_secs_f64(),
                new.max.as_secs_f64() / old.max.as_secs_f64()
            );
        }
        if let Some(o) = &m.open_run {
            println!(
                "\nopen run of {:.0} MB: first index {} ms; `runs --limit 50` after one appended \
                 line min/median/max {}/{}/{} ms, with nothing new {}/{}/{} ms",
                o.bytes as f64 / 1e6,
                ms(o.first),
                ms(o.after_append.min),
                ms(o.after_append.median),
                ms(o.after_append.max),
                ms(o.idle.min),
                ms(o.idle.median),
                ms(o.idle.max)
            );
        }
    }
    if let Some(large) = results.last() {
        targets(&results[0], large, &growth);
    }
    if results.len() >= 2 {
        let (small, large) = (&results[0], &results[results.len() - 1]);
        println!(
            "\n### growth: {} runs ÷ {} runs (answer-sized goal ≤ 1.5, store-sized linear = \
             {:.0}; answer-sized commands timed on both stores back to back, round by round)",
            large.runs,
            small.runs,
            large.runs as f64 / small.runs as f64
        );
        println!(
            "\n| command | small ms (median) | large ms (median) | ratio of medians | \
             per-round ratio min / median / max |"
        );
        println!("|---|---:|---:|---:|---:|");
        for label in &small.order {
            let (a, b) = (small.times[label].median, large.times[label].median);
            let paired = growth.get(label).map_or_else(String::new, |g| {
                format!("{:.2} / {:.2} / {:.2}", g.min, g.median, g.max)
            });
            println!(
                "| `{label}` | {} | {} | {:.2} | {paired} |",
                ms(a),
                ms(b),
                b.as_secs_f64() / a.as_secs_f64()
            );
        }
    }
    if std::env::var_os("SESSION_SCALE_KEEP").is_some() {
        for m in results {
            eprintln!(
                "scale: kept the store of {} runs at {}",
                m.runs,
                m.root.display()
            );
            std::mem::forget(m.dir);
        }
    }
}

/// The closing table: each goal of the scaling issue at the largest size, met or not.
fn targets(small: &Measured, large: &Measured, growth: &BTreeMap<&'static str, Growth>) {
    println!(
        "\n### targets at {} runs (load average {} → {})",
        large.runs, large.load_before, large.load_after
    );
    println!("\n| target | measured | goal | met |");
    println!("|---|---:|---:|---|");
    let row = |what: String, value: String, goal: &str, met: bool| {
        println!(
            "| {what} | {value} | {goal} | {} |",
            if met { "yes" } else { "no" }
        );
    };
    if small.runs != large.runs {
        for label in &large.order {
            if let Some(g) = growth.get(label) {
                row(
                    format!(
                        "`{label}` {}k ÷ {}k (median of the per-round ratios)",
                        large.runs / 1000,
                        small.runs / 1000
                    ),
                    format!("{:.2}", g.median),
                    "≤ 1.5",
                    g.median <= 1.5,
                );
            }
        }
    }
    for label in &large.order {
        if large.kinds[label] != Kind::Answer && *label != COLD_BASELINE {
            let bps = large.bytes as f64 / large.times[label].median.as_secs_f64();
            let r = bps / large.reader_bps;
            row(
                format!("`{label}` ÷ reader over one file"),
                format!("{r:.2}"),
                "≥ 0.3",
                r >= 0.3,
            );
            row(
                format!("`{label}` MB/s"),
                format!("{:.0}", bps / 1e6),
                "≥ 200",
                bps >= 200e6,
            );
        }
    }
    for label in ["stats", STATS_ZONE] {
        let stats = large.times[label].median;
        row(
            format!("`{label}` median ms"),
            ms(stats),
            "≤ 20",
            stats <= Duration::from_millis(20),
        );
    }
    if let Some(o) = &large.open_run {
        let r = o.after_append.median.as_secs_f64() / o.idle.median.as_secs_f64();
        row(
            format!(
                "open run of {:.0} MB: refresh after an append ÷ idle refresh",
                o.bytes as f64 / 1e6
            ),
            format!("{r:.2}"),
            "≤ 1.5",
            r <= 1.5,
        );
    }
}
