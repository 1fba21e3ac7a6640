//! Benchmarks of the `sessions` command on generated stores (~30 runs per session), printed as
//! a table of times and ratios measured in the same process run:
//!
//! * `runs --limit 50` with a warm index: time at the large store ÷ time at the small one
//!   (goal ≤ 2: listing cost must not grow with the store), with and without the incremental
//!   index refresh that precedes a listing;
//! * a cold `reindex` (empty index) at both sizes;
//! * `verify` bytes/s ÷ the session-jsonl reader's bytes/s over the same files (goal ≥ 0.8).
//!
//! Sizes: 1 000 and 100 000 runs; `SESSION_BENCH_SCALE=0.05` shrinks both (minimum 60 runs)
//! for a quick run. `cargo bench -p session-cli --bench cli`.

// A benchmark program: printing the table is its interface.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used
)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use session_cli::{Env, Terminal};
use session_jsonl::{Durability, RunWriter, WriterOptions};
use session_schema::{
    AgentEvent, AgentEventRecord, AssistantMessage, BaseMessage, ContentEvent, Header, Lazy,
    LlmRequest, LlmRequestInput, LlmResponse, LlmResponseOutput, MessageContent, ModelInfo,
    Prompts, Record, RunEnd, RunInput, RunOutcome, RunStart, RunStatus, RunStatusKind, TextInput,
    Timestamp, Usage, UserMessage,
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

/// Writes `n` runs (sessions of 30 runs, one run a minute) under `root`; returns total bytes.
fn generate(root: &Path, n: usize) -> u64 {
    let opts = WriterOptions::with_durability(Durability::Buffered);
    let system = "You are a coding assistant. Follow the repository's AGENTS.md. ".repeat(8);
    let mut bytes = 0;
    for i in 0..n {
        let session = format!(
            "5e55{:04x}-0000-4000-8000-{:012x}",
            i / RUNS_PER_SESSION % 0xffff,
            i / RUNS_PER_SESSION
        );
        let run = format!("0bench{:02x}-0000-4000-8000-{i:012x}", i % 251);
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
        let answer = format!("Module {} parses the input, validates it and writes a report; its tests cover the error paths. ", i % 97).repeat(3);
        let history: Vec<BaseMessage> = (0..(i % RUNS_PER_SESSION).min(6))
            .flat_map(|k| {
                [
                    user(format!("earlier question {k}")),
                    assistant(format!("earlier answer {k} with some detail")),
                ]
            })
            .chain([user(question.clone())])
            .collect();
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
                seq: (i % RUNS_PER_SESSION) as i64 + 1,
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
                seq: (i % RUNS_PER_SESSION) as i64 + 1,
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
                final_text: Some(answer),
                ..Default::default()
            }),
        ];
        for r in &recs {
            w.append(r).unwrap();
        }
        let path = w.path().to_owned();
        w.close().unwrap();
        bytes += std::fs::metadata(path).unwrap().len();
    }
    bytes
}

/// Runs the tool in-process with output discarded; returns the exit code and the time taken.
fn sessions(root: &Path, args: &[&str]) -> (i32, Duration) {
    let mut argv: Vec<OsString> = vec![
        "sessions".into(),
        "--root".into(),
        root.as_os_str().to_owned(),
    ];
    argv.extend(args.iter().map(OsString::from));
    let mut out = Vec::new();
    let mut err = Vec::new();
    let start = Instant::now();
    let code = session_cli::run_with(
        argv,
        &mut out,
        &mut err,
        &Env::from_pairs([("TZ".to_owned(), "UTC".to_owned())]),
        Terminal::default(),
    );
    let took = start.elapsed();
    assert!(
        code <= 1,
        "sessions {args:?} failed: {}",
        String::from_utf8_lossy(&err)
    );
    (code, took)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Reads every run file with the session-jsonl reader (the baseline of `verify`).
fn read_all(root: &Path) -> (u64, Duration) {
    let start = Instant::now();
    let listing = session_jsonl::list_run_files(root).unwrap();
    let mut bytes = 0;
    let mut records = 0;
    for f in &listing.files {
        let run = session_jsonl::read_run(&f.path).unwrap();
        records += run.records.len();
        bytes += run.records.iter().map(|r| r.len + 1).sum::<u64>();
    }
    assert!(records > 0);
    (bytes, start.elapsed())
}

struct Sized {
    runs: usize,
    root: PathBuf,
    bytes: u64,
    generate: Duration,
    reindex: Duration,
    list: Duration,
    list_no_refresh: Duration,
}

fn build(dir: &Path, runs: usize) -> Sized {
    let root = dir.join(format!("store-{runs}"));
    let t = Instant::now();
    let bytes = generate(&root, runs);
    let generate = t.elapsed();
    // The run index lives in state.db; `reindex` on a fresh store is the cold build.
    session_state::StateStore::open(&root).unwrap();
    let (_, reindex) = sessions(&root, &["reindex"]);
    let list = median(
        (0..7)
            .map(|_| sessions(&root, &["runs", "--limit", "50", "--json"]).1)
            .collect(),
    );
    let list_no_refresh = median(
        (0..7)
            .map(|_| sessions(&root, &["runs", "--limit", "50", "--json", "--no-refresh"]).1)
            .collect(),
    );
    Sized {
        runs,
        root,
        bytes,
        generate,
        reindex,
        list,
        list_no_refresh,
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    let scale: f64 = std::env::var("SESSION_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let small_n = ((1_000.0 * scale) as usize).max(60);
    let large_n = ((100_000.0 * scale) as usize).max(small_n * 10);
    let dir = tempfile::tempdir().unwrap();
    eprintln!(
        "generating stores of {small_n} and {large_n} runs under {}",
        dir.path().display()
    );
    let small = build(dir.path(), small_n);
    let large = build(dir.path(), large_n);

    // verify vs the reader over the same (large) store.
    let (read_bytes, read_time) = read_all(&large.root);
    let (_, verify_time) = sessions(&large.root, &["verify", "--json"]);
    let reader_bps = read_bytes as f64 / read_time.as_secs_f64();
    let verify_bps = read_bytes as f64 / verify_time.as_secs_f64();

    println!(
        "| store | runs | size | generate | cold reindex | runs --limit 50 (refresh + list) | runs --limit 50 --no-refresh |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for s in [&small, &large] {
        println!(
            "| {} | {} | {:.1} MiB | {} | {} ({:.0} runs/s) | {} | {} |",
            if s.runs == small.runs {
                "small"
            } else {
                "large"
            },
            s.runs,
            s.bytes as f64 / (1 << 20) as f64,
            ms(s.generate),
            ms(s.reindex),
            s.runs as f64 / s.reindex.as_secs_f64(),
            ms(s.list),
            ms(s.list_no_refresh)
        );
    }
    println!();
    println!("| ratio | value | goal |");
    println!("|---|---:|---|");
    println!(
        "| runs --limit 50, large ÷ small (with refresh) | {:.2} | ≤ 2 |",
        large.list.as_secs_f64() / small.list.as_secs_f64()
    );
    println!(
        "| runs --limit 50 --no-refresh, large ÷ small | {:.2} | ≤ 2 |",
        large.list_no_refresh.as_secs_f64() / small.list_no_refresh.as_secs_f64()
    );
    println!(
        "| cold reindex per run, large ÷ small | {:.2} | (linear = 1) |",
        (large.reindex.as_secs_f64() / large.runs as f64)
            / (small.reindex.as_secs_f64() / small.runs as f64)
    );
    println!(
        "| verify bytes/s ÷ reader bytes/s ({:.0} MB/s ÷ {:.0} MB/s, {:.1} MiB) | {:.2} | ≥ 0.8 |",
        verify_bps / 1e6,
        reader_bps / 1e6,
        read_bytes as f64 / (1 << 20) as f64,
        verify_bps / reader_bps
    );
}
