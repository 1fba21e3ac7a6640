//! Replay cost against the cost of reading the log.
//!
//! Generates one run log shaped like the reference's (every `llm.request` embeds the whole
//! history, so the file grows with invocations × history; compat notes §5 item 3), about
//! `SESSION_BENCH_MB` MiB (default 200), then measures in the same process:
//!
//! * `read`: reading the file through the session-jsonl reader (the baseline);
//! * `read + invocations`: `io::read_run` (reader, conversion, structure checks) and then
//!   `invocations` over the records;
//! * `prompt_at(last)`: the prompt of the last invocation from the records already read;
//! * `check_snapshots`: the continuity check over every request.
//!
//! Prints a table of best-of-N times and ratios against the baseline. Goal:
//! `read + invocations` / `read` ≤ 1.3.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// Writes a run log of about `target` bytes; returns (bytes, invocations).
fn generate(path: &Path, target: u64) -> (u64, u64) {
    let run = "8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a";
    let session = "f6d2c6d5-4a12-4cc4-bbc9-9a0c0d2b5af1";
    let mut f = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path).unwrap());
    let mut written = 0u64;
    let put = |f: &mut std::io::BufWriter<std::fs::File>, line: &str| {
        f.write_all(line.as_bytes()).unwrap();
        f.write_all(b"\n").unwrap();
        line.len() as u64 + 1
    };
    let system = "You are a coding assistant. ".repeat(200);
    written += put(
        &mut f,
        &format!(
            r#"{{"type":"header","schema_version":1,"run_id":"{run}","session_id":"{session}","started_at":"2026-02-03T12:00:00.123Z","model":{{"provider":"anthropic","name":"claude-sonnet-4-5"}},"prompts":{{"system":{}}}}}"#,
            json_str(&system)
        ),
    );
    written += put(
        &mut f,
        &format!(
            r#"{{"type":"run.start","run_id":"{run}","session_id":"{session}","ts":"2026-02-03T12:00:00.456Z","input":{{"type":"text","text":"refactor the parser"}}}}"#
        ),
    );
    let tools = r#"[{"name":"shell","description":"Runs a command.","parameters":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]},"strict":false}]"#;
    let mut history: Vec<String> = vec![
        format!(r#"{{"role":"system","content":{}}}"#, json_str(&system)),
        r#"{"role":"user","content":"refactor the parser"}"#.to_owned(),
    ];
    let output_body = "fn parse(input: &str) -> Result<Ast, Error> { /* … */ }\n".repeat(30);
    let mut seq = 0u64;
    let mut ev = 0u64;
    while written < target {
        seq += 1;
        let ms = seq * 1000;
        let ts = |off: u64| {
            let t = ms + off;
            format!(
                "2026-02-03T{:02}:{:02}:{:02}.{:03}Z",
                12 + t / 3_600_000,
                (t / 60_000) % 60,
                (t / 1000) % 60,
                t % 1000
            )
        };
        let mut msgs = String::from("[");
        msgs.push_str(&history.join(","));
        msgs.push(']');
        written += put(
            &mut f,
            &format!(
                r#"{{"type":"llm.request","run_id":"{run}","ts":"{}","seq":{seq},"model":{{"provider":"anthropic","name":"claude-sonnet-4-5"}},"input":{{"messages":{msgs},"tools":{tools},"tool_choice":null,"session_key":"{session}"}}}}"#,
                ts(0)
            ),
        );
        let call_id = format!("toolu_{seq:08}");
        let args = json_str(&format!(r#"{{"command":"cat src/parser_{seq}.rs"}}"#));
        let call = format!(
            r#"{{"role":"assistant","content":null,"tool_calls":[{{"id":"{call_id}","type":"function","function":{{"name":"shell","arguments":{args}}}}}]}}"#
        );
        let text = format!(r#"{{"role":"assistant","content":"Looking at part {seq}."}}"#);
        written += put(
            &mut f,
            &format!(
                r#"{{"type":"llm.response","run_id":"{run}","ts":"{}","seq":{seq},"output":{{"messages":[{text},{call}],"usage":{{"model":"claude-sonnet-4-5","input_tokens":{},"input_cached_tokens":0,"input_cache_creation_tokens":0,"output_tokens":40,"total_tokens":{}}},"stop_reason":"tool_use","provider_meta":null}}}}"#,
                ts(400),
                seq * 900,
                seq * 900 + 40
            ),
        );
        let mut line = String::new();
        let _ = write!(
            line,
            r#"{{"type":"agent.event","run_id":"{run}","ts":"{}","seq":{ev},"event":{{"type":"tool_call","tool":"shell","args":{{"command":"cat"}},"tool_call_id":"{call_id}"}}}}"#,
            ts(401)
        );
        ev += 1;
        written += put(&mut f, &line);
        let output = json_str(&output_body);
        written += put(
            &mut f,
            &format!(
                r#"{{"type":"tool.output","run_id":"{run}","ts":"{}","tool":"shell","tool_call_id":"{call_id}","result_raw":{output}}}"#,
                ts(600)
            ),
        );
        history.push(text);
        history.push(call);
        history.push(format!(
            r#"{{"role":"tool","tool_call_id":"{call_id}","tool_name":"shell","content":{output}}}"#
        ));
    }
    written += put(
        &mut f,
        &format!(
            r#"{{"type":"run.end","run_id":"{run}","ts":"2026-02-03T23:00:00.000Z","outcome":"completed","final":"done"}}"#
        ),
    );
    f.flush().unwrap();
    (written, seq)
}

fn best<T>(n: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut best = Duration::MAX;
    let mut last = None;
    for _ in 0..n {
        let start = Instant::now();
        let out = f();
        best = best.min(start.elapsed());
        last = Some(out);
    }
    (best, last.unwrap())
}

fn main() {
    let mb: u64 = std::env::var("SESSION_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let iters: usize = std::env::var("SESSION_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    let (bytes, invocations) = generate(&path, mb << 20);
    println!(
        "run log: {:.1} MiB, {invocations} invocations, best of {iters}",
        bytes as f64 / (1 << 20) as f64
    );

    // Warm the page cache, then alternate baseline and replay so both see the same conditions.
    let n = session_jsonl::read_run(&path).unwrap().records.len();
    let mut read = Duration::MAX;
    let mut replay = Duration::MAX;
    let mut log = None;
    for _ in 0..iters {
        // Both sides return what they read, so neither pays for dropping it inside the timing.
        let (d, read_back) = best(1, || session_jsonl::read_run(&path).unwrap());
        assert_eq!(read_back.records.len(), n);
        drop(read_back);
        read = read.min(d);
        let (d, (l, count)) = best(1, || {
            let (log, _) = session_replay::io::read_run(&path).unwrap();
            let count = session_replay::invocations(&log.records).0.len();
            (log, count)
        });
        assert_eq!(count as u64, invocations);
        replay = replay.min(d);
        log = Some(l);
    }
    let log = log.unwrap();
    assert_eq!(log.records.len(), n);
    let (invs_only, _) = best(iters, || session_replay::invocations(&log.records).0.len());
    let (prompt, p) = best(iters, || {
        session_replay::prompt_at(&log.records, None).0.unwrap()
    });
    assert_eq!(p.seq as u64, invocations);
    let (snap, report) = best(iters, || session_replay::check_snapshots(&log.records).0);
    assert!(report.is_continuous());

    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let ratio = |d: Duration| d.as_secs_f64() / read.as_secs_f64();
    println!("{:<34} {:>10} {:>8}", "step", "ms", "ratio");
    println!(
        "{:<34} {:>10.1} {:>8.3}",
        "read (session-jsonl, baseline)",
        ms(read),
        1.0
    );
    println!(
        "{:<34} {:>10.1} {:>8.3}   goal <= 1.3",
        "read + invocations",
        ms(replay),
        ratio(replay)
    );
    println!(
        "{:<34} {:>10.3} {:>8.4}",
        "invocations alone",
        ms(invs_only),
        ratio(invs_only)
    );
    println!(
        "{:<34} {:>10.3} {:>8.4}   ({} messages)",
        "prompt_at(last)",
        ms(prompt),
        ratio(prompt),
        p.messages.len()
    );
    println!(
        "{:<34} {:>10.1} {:>8.3}",
        "check_snapshots",
        ms(snap),
        ratio(snap)
    );
}
