//! `cargo xtask bench search`: the cost of full-text search (`search.db`).
//!
//! # The generated store
//! `n` runs written as plain JSONL (one run a minute from 2026-05-28, 30 runs per session),
//! shaped like the reference runtime's logs (testdata/codelia-runtime: the `header` and each
//! `llm.request` carry the system prompt and tool schemas, tens of KB, and are most of a log's
//! bytes): `header`, `run.start` (a question from a small vocabulary plus Japanese text), then
//! three turns of `llm.request` (system prompt, tools, the history so far: never indexed),
//! `llm.response`, a `reasoning` event, a `tool_call` event and its `tool.output` (about 1.2 KB
//! of shell output), then a `final` event and `run.end`. The system prompt is
//! `SESSION_SEARCH_PROMPT_BYTES` (default 16,000) in the throughput store and 200 bytes in the
//! query store (the indexed text is the same; the 100k-run store stays a few GB smaller).
//!
//! # What is measured
//! - Indexing throughput (bytes of run files per second into `search.db`: reading and
//!   extraction on the refresh's reading threads, the FTS5 word table on `search.db`'s writer
//!   and the trigram table on `search-trigram.db`'s, at once) ÷ the plain session-jsonl `Reader`'s throughput over the same files (one thread), on a store of `SESSION_SEARCH_INDEX_RUNS` runs (default 5,000), interleaved:
//!   each round reads every file with the `Reader`, then empties and rebuilds the index; goal
//!   ≥ 0.3. Min / median / max over `SESSION_SEARCH_REPEATS` rounds (default 5).
//! - On a store of `SESSION_SEARCH_RUNS` runs (default 100,000): the first build, the
//!   no-change refresh (run files opened: must be 0), index size ÷ log size, and the p50 / p95
//!   latency of a first page (20 hits) for rare and common words, substrings and short
//!   Japanese substrings, and a common word with each filter (`--kind`, `--session` of the
//!   oldest and of the newest session, `--workspace` keeping a 20th of the runs, `--since` the
//!   last day, `--since`/`--until` one day in the middle), interleaved:
//!   `SESSION_SEARCH_REPEATS` blocks of 20 rounds; p50 / p95 over all rounds, and min / median
//!   / max of the blocks' p95; goal p95 ≤ 100 ms. The load average is printed before and
//!   after (the machine may be shared).
//!
//! `SESSION_SEARCH_ONLY=throughput` or `=queries` runs one half.
//! `SESSION_SEARCH_DIR` is the parent of the temporary stores (default: the system temp
//! directory). The stores are removed at the end, except the query store when
//! `SESSION_SEARCH_STORE` names a directory: it is generated there once, kept, and used again
//! by a later run with the same `SESSION_SEARCH_RUNS` (its `search.db` is built anew each time).

// A benchmark program: printing the table is its interface.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used
)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use session_replay::io::search::refresh_search;
use session_state::{SearchIndex, SearchQuery, StateStore};

const RUNS_PER_SESSION: usize = 30;
const BASE_MS: i64 = 1_780_000_000_000; // 2026-05-28
const WORDS: [&str; 16] = [
    "parser",
    "linker",
    "capacity",
    "timeout",
    "retry",
    "cache",
    "socket",
    "schema",
    "index",
    "migration",
    "lease",
    "archive",
    "snapshot",
    "compaction",
    "token",
    "digest",
];

/// Workspaces: a session's runs share one, [`WORKSPACES`] in all (a `--workspace` filter
/// keeps a 20th of the store).
const WORKSPACES: usize = 20;

fn workspace(run: usize) -> String {
    format!(
        "/home/dev/project-{}",
        (run / RUNS_PER_SESSION) % WORKSPACES
    )
}

/// The session id of run `run`.
fn session(run: usize) -> String {
    let s = run / RUNS_PER_SESSION;
    format!("5e55{:04x}-0000-4000-8000-{s:012x}", s % 0xffff)
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn ts(ms: i64) -> String {
    session_schema::Timestamp::from_unix_millis(ms)
        .as_str()
        .to_owned()
}

/// Writes `n` runs under `root`, their `header` and `llm.request` records carrying a system
/// prompt of `prompt_bytes`; returns the run files and their total size.
fn generate(root: &Path, n: usize, prompt_bytes: usize) -> (Vec<PathBuf>, u64) {
    let mut files = Vec::with_capacity(n);
    let mut bytes = 0u64;
    let sentence = "You are a coding agent. Read files before changing them, run the tests, keep diffs small. ";
    let prompt: String = sentence.chars().cycle().take(prompt_bytes.max(1)).collect();
    let tools = serde_json::json!([
        {"name": "shell", "description": "Run a shell command in the sandbox and return its output.",
         "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}},
        {"name": "read", "description": "Read a file of the workspace.",
         "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
        {"name": "edit", "description": "Replace a string in a file of the workspace.",
         "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "old": {"type": "string"}, "new": {"type": "string"}}}}
    ]);
    let output: String = (0..24)
        .map(|k| {
            format!(
                "-rw-r--r-- 1 dev dev {:>6} May 28 10:{k:02} src/module_{k}.rs\n",
                1000 + k * 37
            )
        })
        .collect();
    for i in 0..n {
        let run = format!("0search{:x}-0000-4000-8000-{i:012x}", i % 16);
        let session = session(i);
        let t0 = BASE_MS + i as i64 * 60_000;
        let day = &ts(t0)[..10];
        let dir = root.join(day.replace('-', "/"));
        std::fs::create_dir_all(&dir).unwrap();
        let w = |k: usize| WORDS[(i * 7 + k * 3) % WORDS.len()];
        let question = format!(
            "Question {i}: why does the {} fail after the {} change in module {}? 全文検索の説明も日本語でお願いします",
            w(0),
            w(1),
            i % 97
        );
        let tool_output = format!(
            "{output}src/module_{}.rs:12: {} = ux-capacity({i})\n",
            i % 97,
            w(3)
        );
        let mut lines = vec![
            serde_json::json!({"type": "header", "schema_version": 1, "run_id": run, "session_id": session, "started_at": ts(t0),
                "model": {"provider": "anthropic", "name": "claude-sonnet-4-5"},
                "runtime": {"cwd": workspace(i)},
                "prompts": {"system": prompt}, "tools": {"definitions": tools, "source": "runtime"}}),
            serde_json::json!({"type": "run.start", "run_id": run, "session_id": session, "ts": ts(t0 + 5),
                "input": {"type": "text", "text": question}}),
        ];
        let mut history = vec![
            serde_json::json!({"role": "system", "content": prompt}),
            serde_json::json!({"role": "user", "content": question}),
        ];
        let mut seq = 0;
        for turn in 0..3i64 {
            let t = t0 + 100 + turn * 1000;
            let call = format!("c{i}-{turn}");
            let command = format!("ls -l src && grep -rn {} src", w(3 + turn as usize));
            lines.push(serde_json::json!({"type": "llm.request", "run_id": run, "ts": ts(t), "seq": turn + 1,
                "model": {"provider": "anthropic", "name": "claude-sonnet-4-5"},
                "input": {"messages": history, "tools": tools}}));
            lines.push(serde_json::json!({"type": "llm.response", "run_id": run, "ts": ts(t + 300), "seq": turn + 1,
                "output": {"messages": [{"role": "assistant", "content": null,
                    "tool_calls": [{"id": call, "type": "function", "function": {"name": "shell", "arguments": serde_json::json!({"command": command}).to_string()}}]}],
                    "usage": {"model": "claude-sonnet-4-5", "input_tokens": 9000 + turn * 500, "output_tokens": 120}}}));
            seq += 1;
            lines.push(serde_json::json!({"type": "agent.event", "run_id": run, "ts": ts(t + 310), "seq": seq,
                "event": {"type": "reasoning", "content": format!("The {} probably breaks because the {} was not rebuilt.", w(turn as usize), w(2))}}));
            seq += 1;
            lines.push(serde_json::json!({"type": "agent.event", "run_id": run, "ts": ts(t + 320), "seq": seq,
                "event": {"type": "tool_call", "tool": "shell", "tool_call_id": call, "args": {"command": command}}}));
            lines.push(serde_json::json!({"type": "tool.output", "run_id": run, "ts": ts(t + 600), "tool": "shell", "tool_call_id": call,
                "result_raw": tool_output}));
            history.push(serde_json::json!({"role": "assistant", "content": null,
                "tool_calls": [{"id": call, "type": "function", "function": {"name": "shell", "arguments": serde_json::json!({"command": command}).to_string()}}]}));
            history.push(
                serde_json::json!({"role": "tool", "tool_call_id": call, "content": tool_output}),
            );
        }
        seq += 1;
        lines.push(serde_json::json!({"type": "agent.event", "run_id": run, "ts": ts(t0 + 3900), "seq": seq,
            "event": {"type": "final", "content": format!("Module {} fails because the {} is stale; rebuilding the {} fixes it.", i % 97, w(0), w(2))}}));
        lines.push(serde_json::json!({"type": "run.end", "run_id": run, "ts": ts(t0 + 3901), "outcome": "completed"}));
        let path = dir.join(format!("{run}.jsonl"));
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        for l in &lines {
            let s = serde_json::to_string(l).unwrap();
            bytes += s.len() as u64 + 1;
            f.write_all(s.as_bytes()).unwrap();
            f.write_all(b"\n").unwrap();
        }
        f.flush().unwrap();
        files.push(path);
    }
    (files, bytes)
}

fn read_all(files: &[PathBuf]) -> u64 {
    let mut items = 0u64;
    for p in files {
        let r = session_jsonl::Reader::open(p).unwrap();
        for item in r {
            item.unwrap();
            items += 1;
        }
    }
    items
}

fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2], v[v.len() - 1])
}

fn percentile(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i]
}

fn store_dir(tag: &str) -> tempfile::TempDir {
    let parent = std::env::var_os("SESSION_SEARCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    tempfile::Builder::new()
        .prefix(&format!("search-bench-{tag}-"))
        .tempdir_in(parent)
        .unwrap()
}

fn db_size(root: &Path) -> u64 {
    [
        "search.db",
        "search.db-wal",
        "search-trigram.db",
        "search-trigram.db-wal",
    ]
    .iter()
    .filter_map(|f| std::fs::metadata(root.join(f)).ok())
    .map(|m| m.len())
    .sum()
}

/// [`generate`] for the query store, timed.
fn generate_timed(root: &Path, n: usize) -> u64 {
    let t = Instant::now();
    let (_files, bytes) = generate(root, n, 200);
    println!(
        "\nstore of {n} runs, {:.1} MB of run files (generated in {:.1} s)",
        bytes as f64 / 1e6,
        t.elapsed().as_secs_f64()
    );
    bytes
}

fn throughput() {
    let n = env_usize("SESSION_SEARCH_INDEX_RUNS", 5_000);
    let repeats = env_usize("SESSION_SEARCH_REPEATS", 5).max(1);
    let dir = store_dir("throughput");
    let root = dir.path().join("sessions");
    let prompt_bytes = env_usize("SESSION_SEARCH_PROMPT_BYTES", 16_000);
    let (files, bytes) = generate(&root, n, prompt_bytes);
    let store = StateStore::open(&root).unwrap();
    store.index_runs().unwrap();
    let index = SearchIndex::open(&root).unwrap();
    println!(
        "indexing throughput: {n} runs, {:.1} MB of run files, {repeats} interleaved rounds; load average {}",
        bytes as f64 / 1e6,
        load_average()
    );
    let (mut reader, mut indexing, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..repeats {
        let t = Instant::now();
        read_all(&files);
        let r = bytes as f64 / t.elapsed().as_secs_f64() / 1e6;
        index.clear().unwrap();
        let t = Instant::now();
        let report = refresh_search(&store, &index).unwrap();
        let x = bytes as f64 / t.elapsed().as_secs_f64() / 1e6;
        assert_eq!(report.files_read, n as u64);
        reader.push(r);
        indexing.push(x);
        ratio.push(x / r);
    }
    for (name, v) in [
        ("reader MB/s", reader),
        ("indexing MB/s", indexing),
        ("indexing ÷ reader", ratio),
    ] {
        let (min, med, max) = stats(v);
        println!("  {name:<20} min {min:>8.3}  median {med:>8.3}  max {max:>8.3}");
    }
}

fn queries() {
    let n = env_usize("SESSION_SEARCH_RUNS", 100_000);
    // A kept store (`SESSION_SEARCH_STORE`) is generated once and used again while it holds
    // the same number of runs; its `search.db` is rebuilt from scratch every time.
    let (_dir, root, bytes) = match std::env::var_os("SESSION_SEARCH_STORE") {
        Some(kept) => {
            let kept = PathBuf::from(kept);
            let root = kept.join("sessions");
            let marker = kept.join("generated");
            let known = std::fs::read_to_string(&marker).ok().and_then(|s| {
                let (runs, bytes) = s.trim().split_once(' ')?;
                (runs.parse::<usize>().ok()? == n).then(|| bytes.parse::<u64>().ok())?
            });
            let bytes = match known {
                Some(bytes) => {
                    println!("\nstore of {n} runs kept in {}", kept.display());
                    for f in [
                        "search.db",
                        "search.db-wal",
                        "search.db-shm",
                        "search-trigram.db",
                        "search-trigram.db-wal",
                        "search-trigram.db-shm",
                    ] {
                        let _ = std::fs::remove_file(root.join(f));
                    }
                    bytes
                }
                None => {
                    let _ = std::fs::remove_dir_all(&root);
                    let bytes = generate_timed(&root, n);
                    std::fs::write(&marker, format!("{n} {bytes}\n")).unwrap();
                    bytes
                }
            };
            (None, root, bytes)
        }
        None => {
            let dir = store_dir("queries");
            let root = dir.path().join("sessions");
            let bytes = generate_timed(&root, n);
            (Some(dir), root, bytes)
        }
    };
    let store = StateStore::open(&root).unwrap();
    let t = Instant::now();
    store.index_runs().unwrap();
    println!("  run index built in {:.1} s", t.elapsed().as_secs_f64());
    let index = SearchIndex::open(&root).unwrap();
    let t = Instant::now();
    let report = refresh_search(&store, &index).unwrap();
    let build = t.elapsed();
    let counts = index.counts().unwrap();
    println!(
        "  search index built in {:.1} s: {} documents from {} run files ({:.1} MB/s)",
        build.as_secs_f64(),
        counts.docs,
        report.files_read,
        bytes as f64 / build.as_secs_f64() / 1e6
    );
    drop(index);
    let index = SearchIndex::open(&root).unwrap();
    let size = db_size(&root);
    println!(
        "  index size {:.1} MB ÷ log size {:.1} MB = {:.2}",
        size as f64 / 1e6,
        bytes as f64 / 1e6,
        size as f64 / bytes as f64
    );
    let mut nochange = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        store.index_runs().unwrap();
        let r = refresh_search(&store, &index).unwrap();
        nochange.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!((r.files_read, r.bytes_read), (0, 0));
    }
    let (min, med, max) = stats(nochange);
    println!(
        "  no-change refresh (run index + search index, 0 run files opened): min {min:.1} ms  median {med:.1} ms  max {max:.1} ms"
    );
    let cases: Vec<(&str, SearchQuery)> = vec![
        ("common word", SearchQuery::new("module")),
        ("common, 2 words", SearchQuery::new("linker stale")),
        ("rare word", SearchQuery::new(format!("{}", n / 2 + 1))),
        (
            "rare phrase",
            SearchQuery::new(format!("Question {}:", n / 2)),
        ),
        ("substring", SearchQuery::new("ux-capac")),
        ("japanese", SearchQuery::new("検索の説明")),
        ("japanese 2 chars", SearchQuery::new("検索")),
        ("japanese 1 char", SearchQuery::new("説")),
        ("kind filter", {
            let mut q = SearchQuery::new("capacity");
            q.kinds = vec!["tool-output".into()];
            q
        }),
        ("session filter", {
            let mut q = SearchQuery::new("module");
            q.session_id = Some(session(7 * RUNS_PER_SESSION));
            q
        }),
        ("session, newest", {
            let mut q = SearchQuery::new("module");
            q.session_id = Some(session(n.saturating_sub(1)));
            q
        }),
        ("workspace filter", {
            let mut q = SearchQuery::new("module");
            q.workspace = Some(workspace(3 * RUNS_PER_SESSION));
            q
        }),
        ("since last day", {
            let mut q = SearchQuery::new("module");
            q.since_ms = Some(BASE_MS + n.saturating_sub(1440) as i64 * 60_000);
            q
        }),
        ("one day, middle", {
            let mut q = SearchQuery::new("module");
            let from = BASE_MS + (n / 2) as i64 * 60_000;
            q.since_ms = Some(from);
            q.until_ms = Some(from + 86_400_000);
            q
        }),
    ];
    let repeats = env_usize("SESSION_SEARCH_REPEATS", 5).max(1);
    const ROUNDS: usize = 20;
    println!(
        "  first page (limit 20): {repeats} blocks of {ROUNDS} interleaved rounds; load average {}",
        load_average()
    );
    let mut all: Vec<Vec<Duration>> = vec![Vec::new(); cases.len()];
    let mut block_p95: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    let mut found = vec![0usize; cases.len()];
    // Every query's time with its case, block, round and the 1-minute load average then.
    let mut slowest: Vec<(Duration, usize, usize, usize, String)> = Vec::new();
    for b in 0..repeats {
        let mut block: Vec<Vec<Duration>> = vec![Vec::new(); cases.len()];
        for round in 0..ROUNDS {
            let load = load_average();
            for (i, (_, q)) in cases.iter().enumerate() {
                let t = Instant::now();
                let hits = index.search(q).unwrap();
                let took = t.elapsed();
                block[i].push(took);
                found[i] = hits.len();
                slowest.push((took, i, b, round, load.clone()));
            }
        }
        for (i, mut b) in block.into_iter().enumerate() {
            block_p95[i].push(percentile(&mut b, 0.95).as_secs_f64() * 1e3);
            all[i].extend(b);
        }
    }
    for (i, (name, _)) in cases.iter().enumerate() {
        let p50 = percentile(&mut all[i], 0.5);
        let p95 = percentile(&mut all[i], 0.95);
        let (min, med, max) = stats(block_p95[i].clone());
        println!(
            "    {name:<17} hits {:>3}  p50 {:>8.2} ms  p95 {:>8.2} ms  (p95 per block: min {min:.2}  median {med:.2}  max {max:.2})",
            found[i],
            p50.as_secs_f64() * 1e3,
            p95.as_secs_f64() * 1e3
        );
    }
    // The queries that make the p95s: the slowest 5 % of all, slowest first.
    slowest.sort_by_key(|(d, ..)| std::cmp::Reverse(*d));
    let tail = (slowest.len() / 20).max(1);
    println!("  the slowest {tail} queries (the p95 tail):");
    for (d, i, b, round, load) in slowest.iter().take(tail) {
        println!(
            "    {:>8.2} ms  {:<17} block {b} round {round}  load average {load}",
            d.as_secs_f64() * 1e3,
            cases[*i].0
        );
    }
    println!("  load average after: {}", load_average());
}

/// `/proc/loadavg`'s three averages, or `unknown`.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "unknown".to_owned())
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is accepted. `SESSION_SEARCH_ONLY`
    // (`throughput` or `queries`) runs one half.
    let only = std::env::var("SESSION_SEARCH_ONLY").unwrap_or_default();
    if only != "queries" {
        throughput();
    }
    if only != "throughput" {
        queries();
    }
}
