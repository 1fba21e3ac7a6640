//! Run-log reader and writer benchmarks, printed as ratios against baselines of the same run.
//!
//! A realistic run log is generated in a temporary directory: 50-turn cycles whose
//! `llm.request` repeats the growing history, tool outputs of 1–50 KB with non-ASCII text.
//! Size: `SESSION_BENCH_MB` (default 200); `SESSION_BENCH_KEEP=1` keeps the directory;
//! `SESSION_BENCH_REPEATS` (default 5) sets the number of interleaved rounds. Every figure is
//! printed as min/median/max over the rounds, ratios per round (both sides measured in the same
//! round), and the machine's load average before and after. Run with
//! `cargo bench -p session-jsonl --bench jsonl`.
//!
//! Appending is compared against two baselines: a Rust imitation of the reference's pattern
//! (open `O_APPEND`, write, close per record; labelled as an imitation, it is far faster than the
//! real thing), and the reference's real pattern, Node's `fs.promises.appendFile` per record on
//! a promise chain after `JSON.stringify`, measured when `node` is on the `PATH`.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs
)]

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::de::IgnoredAny;
use session_jsonl::{
    Durability, Item, Reader, ReaderOptions, RunWriter, WriterOptions, terminal_state,
};
use session_schema::{Header, Record, RunStatus, RunStatusKind, Timestamp, parse_record_str};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo)
    }
}

/// Mostly ASCII (code, paths, compiler output) with Japanese, emoji and accented words mixed in.
const WORDS: &[&str] = &[
    "src/lib.rs",
    "fn",
    "main()",
    "ビルド",
    "テスト",
    "成功しました",
    "😀",
    "🚀",
    "naïve",
    "café",
    "Straße",
    "error:",
    "warning:",
    "→",
    "λ",
    "{",
    "}",
    "let",
    "x",
    "=",
    "42;",
    "\n",
    "\t",
    "\"quoted\"",
    "ok",
    "検索",
    "結果",
    "über",
    "ñandú",
    "—",
    "Compiling",
    "session-store",
    "v0.1.0",
    "(/work/main/crates/session-jsonl)",
    "Finished",
    "`dev`",
    "profile",
    "[unoptimized",
    "+",
    "debuginfo]",
    "target(s)",
    "in",
    "2.31s",
    "Running",
    "unittests",
    "test",
    "result:",
    "passed;",
    "0",
    "failed;",
    "ignored;",
    "measured;",
    "filtered",
    "out;",
    "finished",
    "0.04s",
    "pub",
    "struct",
    "Reader<R>",
    "impl",
    "Iterator",
    "for",
    "Item",
    "type",
    "Option<Self::Item>",
    "match",
    "self.next_item()",
    "=>",
    "return",
    "Some(Ok(item))",
    "None",
    "//",
    "the",
    "a",
    "of",
];

fn text(rng: &mut Rng, bytes: usize) -> String {
    let mut s = String::with_capacity(bytes + 16);
    while s.len() < bytes {
        s.push_str(WORDS[(rng.next() % WORDS.len() as u64) as usize]);
        s.push(' ');
    }
    s
}

/// A JSON object with keys in the given order (the reference writes `type` first; serde_json's
/// own maps would sort the keys).
fn obj(pairs: &[(&str, String)]) -> String {
    let mut s = String::from("{");
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&js(k));
        s.push(':');
        s.push_str(v);
    }
    s.push('}');
    s
}

/// A JSON string literal.
fn js(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

fn arr(items: &[String]) -> String {
    format!("[{}]", items.join(","))
}

fn tool_defs() -> String {
    let defs: Vec<String> = (0..20)
        .map(|i| {
            obj(&[
                ("name", js(&format!("tool_{i}"))),
                ("description", js("Runs something useful in the workspace and returns its output.")),
                ("parameters", r#"{"type":"object","properties":{"cmd":{"type":"string"},"timeout_ms":{"type":"number"}},"required":["cmd"]}"#.to_owned()),
                ("strict", "false".to_owned()),
            ])
        })
        .collect();
    arr(&defs)
}

/// Writes the realistic log; returns its size in bytes.
fn generate(path: &Path, target: u64) -> u64 {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut out = std::io::BufWriter::with_capacity(1 << 20, File::create(path).unwrap());
    let run = js("8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a");
    let ts = js("2026-02-03T12:00:01.000Z");
    let tools = tool_defs();
    let system = text(&mut rng, 16_000);
    let mut written = 0u64;
    let put = |line: String, out: &mut std::io::BufWriter<File>| {
        out.write_all(line.as_bytes()).unwrap();
        out.write_all(b"\n").unwrap();
        line.len() as u64 + 1
    };
    written += put(
        obj(&[
            ("type", js("header")),
            ("schema_version", "1".into()),
            ("run_id", run.clone()),
            ("session_id", js("s1")),
            ("started_at", js("2026-02-03T12:00:00.123Z")),
            ("client", r#"{"name":"codelia-tui","version":"0.1.0"}"#.into()),
            ("server", r#"{"name":"runtime","version":"0.1.80"}"#.into()),
            ("model", r#"{"provider":"anthropic","name":"claude-sonnet-4-5","reasoning":"medium","source":"config"}"#.into()),
            ("prompts", obj(&[("system", js(&system))])),
            ("tools", obj(&[("definitions", tools.clone()), ("source", js("runtime"))])),
        ]),
        &mut out,
    );
    let mut seq = 0u64;
    let mut ev = 0u64;
    while written < target {
        let mut history = vec![obj(&[("role", js("system")), ("content", js(&system))])];
        for _turn in 0..50 {
            if written >= target {
                break;
            }
            seq += 1;
            history.push(obj(&[
                ("role", js("user")),
                ("content", js(&text(&mut rng, 200))),
            ]));
            written += put(
                obj(&[
                    ("type", js("llm.request")),
                    ("run_id", run.clone()),
                    ("ts", ts.clone()),
                    ("seq", seq.to_string()),
                    (
                        "model",
                        r#"{"provider":"anthropic","name":"claude-sonnet-4-5"}"#.into(),
                    ),
                    (
                        "input",
                        obj(&[
                            ("messages", arr(&history)),
                            ("tools", tools.clone()),
                            ("tool_choice", "null".into()),
                            ("session_key", js("s1")),
                        ]),
                    ),
                ]),
                &mut out,
            );
            let call = js(&format!("toolu_{seq:012}"));
            let assistant = obj(&[
                ("role", js("assistant")),
                ("content", "null".into()),
                (
                    "tool_calls",
                    arr(&[obj(&[
                        ("id", call.clone()),
                        ("type", js("function")),
                        (
                            "function",
                            obj(&[
                                ("name", js("tool_1")),
                                ("arguments", js(r#"{"cmd":"cargo test"}"#)),
                            ]),
                        ),
                    ])]),
                ),
            ]);
            written += put(
                obj(&[
                    ("type", js("llm.response")),
                    ("run_id", run.clone()),
                    ("ts", ts.clone()),
                    ("seq", seq.to_string()),
                    (
                        "output",
                        obj(&[
                            ("messages", arr(std::slice::from_ref(&assistant))),
                            ("usage", r#"{"model":"claude-sonnet-4-5","input_tokens":12000,"output_tokens":300,"total_tokens":12300}"#.into()),
                            ("stop_reason", js("tool_use")),
                            ("provider_meta", "null".into()),
                        ]),
                    ),
                ]),
                &mut out,
            );
            for kind in ["step_start", "tool_call"] {
                written += put(
                    obj(&[
                        ("type", js("agent.event")),
                        ("run_id", run.clone()),
                        ("ts", ts.clone()),
                        ("seq", ev.to_string()),
                        (
                            "event",
                            obj(&[
                                ("type", js(kind)),
                                ("tool", js("tool_1")),
                                ("args", r#"{"cmd":"cargo test"}"#.into()),
                                ("tool_call_id", call.clone()),
                            ]),
                        ),
                    ]),
                    &mut out,
                );
                ev += 1;
            }
            let len = rng.range(1_000, 50_000) as usize;
            let output = js(&text(&mut rng, len));
            written += put(
                obj(&[
                    ("type", js("tool.output")),
                    ("run_id", run.clone()),
                    ("ts", ts.clone()),
                    ("tool", js("tool_1")),
                    ("tool_call_id", call.clone()),
                    ("result_raw", output.clone()),
                ]),
                &mut out,
            );
            written += put(
                obj(&[
                    ("type", js("agent.event")),
                    ("run_id", run.clone()),
                    ("ts", ts.clone()),
                    ("seq", ev.to_string()),
                    (
                        "event",
                        obj(&[
                            ("type", js("tool_result")),
                            ("tool", js("tool_1")),
                            ("result", output.clone()),
                            ("tool_call_id", call.clone()),
                        ]),
                    ),
                ]),
                &mut out,
            );
            ev += 1;
            history.push(assistant);
            history.push(obj(&[
                ("role", js("tool")),
                ("tool_call_id", call.clone()),
                ("tool_name", js("tool_1")),
                ("content", output),
            ]));
        }
    }
    written += put(
        format!(r#"{{"type":"run.status","run_id":{run},"ts":{ts},"status":"completed"}}"#),
        &mut out,
    );
    written += put(
        format!(
            r#"{{"type":"run.end","run_id":{run},"ts":{ts},"outcome":"completed","final":"done"}}"#
        ),
        &mut out,
    );
    out.flush().unwrap();
    written
}

fn lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut start = 0;
    memchr::memchr_iter(b'\n', bytes).map(move |i| {
        let line = &bytes[start..i];
        start = i + 1;
        line
    })
}

/// Streams the file like the reader does and validates each line with `IgnoredAny`.
/// With `utf8`, each line is also checked to be UTF-8 (serde_json's `IgnoredAny` over a byte
/// slice does not check the text inside strings).
fn validate_file(path: &Path, utf8: bool) -> usize {
    let mut f = File::open(path).unwrap();
    let mut buf = vec![0u8; 4 << 20];
    let (mut start, mut end, mut ok) = (0, 0, 0);
    loop {
        if let Some(i) = memchr::memchr(b'\n', &buf[start..end]) {
            let line = &buf[start..start + i];
            if (!utf8 || simdutf8::basic::from_utf8(line).is_ok())
                && serde_json::from_slice::<IgnoredAny>(line).is_ok()
            {
                ok += 1;
            }
            start += i + 1;
            continue;
        }
        if end == buf.len() {
            buf.copy_within(start..end, 0);
            end -= start;
            start = 0;
            if end == buf.len() {
                buf.resize(buf.len() * 2, 0);
            }
        }
        let n = f.read(&mut buf[end..]).unwrap();
        if n == 0 {
            return ok;
        }
        end += n;
    }
}

fn status(i: usize) -> Record {
    Record::RunStatus(RunStatus {
        run_id: "r".into(),
        ts: Timestamp::from_raw("2026-02-03T12:00:00.000Z"),
        status: RunStatusKind::Running,
        message: Some(format!(
            "record {i} with some text in it, as long as a small event"
        )),
        ..Default::default()
    })
}

fn header() -> Header {
    Header {
        schema_version: 1,
        run_id: "r".into(),
        started_at: Timestamp::from_raw("2026-02-03T12:00:00.000Z"),
        ..Default::default()
    }
}

fn fresh(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    let _ = std::fs::remove_file(&p);
    p
}

/// Appends per second through a writer shared by `threads` threads.
fn writer_rate(dir: &Path, name: &str, durability: Durability, threads: usize, n: usize) -> f64 {
    let path = fresh(dir, name);
    let w = Arc::new(
        RunWriter::create_file(&path, &header(), WriterOptions::with_durability(durability))
            .unwrap(),
    );
    let t = Instant::now();
    let hs: Vec<_> = (0..threads)
        .map(|k| {
            let w = Arc::clone(&w);
            std::thread::spawn(move || {
                for i in 0..n / threads {
                    w.append(&status(k * n + i)).unwrap();
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    w.flush().unwrap();
    let rate = n as f64 / t.elapsed().as_secs_f64();
    if std::env::var_os("SESSION_BENCH_VERBOSE").is_some() {
        eprintln!("{name}: {n} records, {} fdatasync calls", w.sync_count());
    }
    rate
}

fn main() {
    // `cargo test --benches` runs this binary with `--test`-like flags: keep it quick there.
    let quick = std::env::args().any(|a| a == "--test");
    let mb: u64 = std::env::var("SESSION_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { 2 } else { 200 });
    let reps: usize = std::env::var("SESSION_BENCH_REPEATS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|r| *r > 0)
        .unwrap_or(if quick { 1 } else { 5 });
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let load_before = loadavg();

    let log = dir
        .path()
        .join("8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a.jsonl");
    let t = Instant::now();
    let size = generate(&log, mb << 20);
    let bytes = std::fs::read(&log).unwrap();
    println!(
        "generated {:.1} MB ({} lines) in {:.1} s under {}; {reps} interleaved rounds",
        size as f64 / 1e6,
        lines(&bytes).count(),
        t.elapsed().as_secs_f64(),
        dir.path().display()
    );
    let gbps = |secs: f64| size as f64 / secs / 1e9;

    // 1. Reading. Every reader runs once per round, rounds interleaved, so that drift in the
    // shared machine's load hits all of them alike; ratios are taken within a round.
    let time = |f: &mut dyn FnMut() -> usize| {
        let t = Instant::now();
        let n = f();
        (t.elapsed().as_secs_f64(), n)
    };
    let mut r = Rounds::default();
    let (mut n_valid, mut n_typed, mut n_read, mut n_damage) = (0, 0, 0, 0);
    for _ in 0..reps.max(3) {
        let (t_raw, _) = time(&mut || {
            let mut f = File::open(&log).unwrap();
            let mut buf = vec![0u8; 1 << 20];
            let mut n = 0;
            while let Ok(k) = f.read(&mut buf) {
                if k == 0 {
                    break;
                }
                n += k;
            }
            n
        });
        // The same streaming from the file (4 MiB reads, memchr line split), each line validated
        // by serde_json into `IgnoredAny`; with `true`, each line's UTF-8 is checked as well,
        // which the typed reader does and serde_json over bytes does not.
        let (t_validate, n) = time(&mut || validate_file(&log, false));
        n_valid = n;
        let (t_validate_utf8, _) = time(&mut || validate_file(&log, true));
        let (t_reader, n) = time(&mut || {
            let mut recs = 0;
            for item in Reader::open_with(&log, ReaderOptions::default()).unwrap() {
                match item.unwrap() {
                    Item::Record(_) => recs += 1,
                    Item::Damage(_) => n_damage += 1,
                }
            }
            recs
        });
        n_read = n;
        let (t_validate_mem, _) = time(&mut || {
            lines(&bytes)
                .filter(|l| serde_json::from_slice::<IgnoredAny>(l).is_ok())
                .count()
        });
        let (t_typed_mem, n) = time(&mut || {
            lines(&bytes)
                .filter(|l| {
                    simdutf8::basic::from_utf8(l).is_ok_and(|t| parse_record_str(t).is_ok())
                })
                .count()
        });
        n_typed = n;
        let (t_tail, state) = time(&mut || {
            let state = terminal_state(&log).unwrap();
            assert!(state.has_end());
            usize::try_from(state.bytes_read).unwrap()
        });
        r.add("raw read(2) 1 MiB blocks, GB/s", gbps(t_raw));
        r.add("IgnoredAny per line, from file, GB/s", gbps(t_validate));
        r.add(
            "IgnoredAny + UTF-8 check per line, from file, GB/s",
            gbps(t_validate_utf8),
        );
        r.add("typed Reader, from file, GB/s", gbps(t_reader));
        r.add("IgnoredAny per line, in memory, GB/s", gbps(t_validate_mem));
        r.add(
            "simdutf8 + parse_record_str, in memory, GB/s",
            gbps(t_typed_mem),
        );
        r.add("terminal_state, ms", t_tail * 1e3);
        r.add("terminal_state, bytes read", state as f64);
        r.add(
            "typed Reader / (IgnoredAny + UTF-8 check)  (goal >= 0.95)",
            t_validate_utf8 / t_reader,
        );
        r.add(
            "typed Reader / IgnoredAny without UTF-8 check  (earlier goal >= 0.85)",
            t_validate / t_reader,
        );
        r.add(
            "parse_record_str / IgnoredAny, both in memory",
            t_validate_mem / t_typed_mem,
        );
        r.add(
            "terminal_state / full typed read  (goal <= 0.01)",
            t_tail / t_reader,
        );
    }
    assert_eq!(
        (n_valid, n_typed, n_read, n_damage),
        (n_typed, n_read, n_valid, 0)
    );
    println!();
    println!(
        "reading ({:.0} MB, page cache warm), min / median / max",
        size as f64 / 1e6
    );
    r.print();

    // 2. Appending.
    let n_sync = if quick { 50 } else { 2_000 };
    let sample = session_schema::to_line(&status(0)).unwrap();
    let n_buf = if quick { 1_000 } else { 200_000 };
    let n_ref = if quick { 1_000 } else { 50_000 };
    let node = NodeAppend::find(dir.path());
    let mut a = Rounds::default();
    for _ in 0..reps {
        // fdatasync latency on a shared machine drifts a lot: the raw loop and the writer
        // alternate in chunks of 50 records on two files, and the times are summed per side.
        let (raw_sync, sync1) = {
            let raw_path = fresh(dir.path(), "raw.jsonl");
            let mut raw = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&raw_path)
                .unwrap();
            let w_path = fresh(dir.path(), "sync1.jsonl");
            let w = RunWriter::create_file(
                &w_path,
                &header(),
                WriterOptions::with_durability(Durability::SyncData),
            )
            .unwrap();
            let rec = status(0);
            let (mut t_raw, mut t_w) = (0f64, 0f64);
            for _ in 0..n_sync / 50 {
                let t = Instant::now();
                for _ in 0..50 {
                    raw.write_all(&sample).unwrap();
                    raw.sync_data().unwrap();
                }
                t_raw += t.elapsed().as_secs_f64();
                let t = Instant::now();
                for _ in 0..50 {
                    w.append(&rec).unwrap();
                }
                t_w += t.elapsed().as_secs_f64();
            }
            let n = (n_sync / 50 * 50) as f64;
            (n / t_raw, n / t_w)
        };
        let sync8 = writer_rate(dir.path(), "sync8.jsonl", Durability::SyncData, 8, n_sync);
        let group8 = writer_rate(
            dir.path(),
            "group8.jsonl",
            Durability::group_commit(),
            8,
            n_sync * 4,
        );
        let group8_delay = writer_rate(
            dir.path(),
            "group8d.jsonl",
            Durability::GroupCommit {
                max_delay: Duration::from_micros(500),
                max_batch: 64,
            },
            8,
            n_sync * 4,
        );
        let buffered = writer_rate(dir.path(), "buf.jsonl", Durability::Buffered, 1, n_buf);
        let flush = writer_rate(dir.path(), "flush.jsonl", Durability::Flush, 1, n_buf);
        let imitation = {
            let path = fresh(dir.path(), "ref.jsonl");
            let t = Instant::now();
            for i in 0..n_ref {
                // The reference's pattern imitated in Rust: serialize, then what
                // `fs.appendFile` does (open O_APPEND, write, close).
                let line = session_schema::to_line(&status(i)).unwrap();
                let mut f = OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .unwrap();
                f.write_all(&line).unwrap();
            }
            n_ref as f64 / t.elapsed().as_secs_f64()
        };
        a.add("raw write+fdatasync loop, records/s  (baseline)", raw_sync);
        a.add("SyncData, 1 thread, records/s", sync1);
        a.add(
            "SyncData 1 thread / raw write+fdatasync  (goal >= 0.85)",
            sync1 / raw_sync,
        );
        a.add("SyncData, 8 threads, records/s", sync8);
        a.add("GroupCommit, 8 threads, records/s", group8);
        a.add(
            "GroupCommit / SyncData, 8 threads  (goal >= 5)",
            group8 / sync8,
        );
        a.add("GroupCommit 0.5 ms/64, 8 threads, records/s", group8_delay);
        a.add(
            "GroupCommit 0.5 ms/64 / SyncData, 8 threads",
            group8_delay / sync8,
        );
        a.add("Buffered, records/s", buffered);
        a.add("Flush (write per record), records/s", flush);
        a.add(
            "Rust imitation of open-append-close, records/s  (not the reference)",
            imitation,
        );
        a.add("Buffered / Rust imitation", buffered / imitation);
        a.add("Flush / Rust imitation", flush / imitation);
        if let Some(node) = &node {
            let real = node.rate(&sample, n_ref);
            a.add(
                "reference's real pattern: Node fs.appendFile per record, records/s",
                real,
            );
            a.add("Buffered / Node appendFile", buffered / real);
            a.add("Flush / Node appendFile", flush / real);
            a.add(
                "SyncData 1 thread / Node appendFile (durable vs not)",
                sync1 / real,
            );
        }
    }
    println!();
    println!("appending ({} B records), min / median / max", sample.len());
    a.print();
    if node.is_none() {
        println!(
            "  (node is not on the PATH: the reference's real appendFile pattern is not measured)"
        );
    }
    println!();
    println!(
        "machine load average (1 min) before {} / after {}",
        load_before,
        loadavg()
    );
    if std::env::var_os("SESSION_BENCH_KEEP").is_some() {
        println!("kept {}", dir.keep().display());
    }
}

/// Samples of named figures, one per round, printed as min / median / max in insertion order.
#[derive(Default)]
struct Rounds(Vec<(&'static str, Vec<f64>)>);

impl Rounds {
    fn add(&mut self, name: &'static str, value: f64) {
        match self.0.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => v.push(value),
            None => self.0.push((name, vec![value])),
        }
    }

    fn print(&self) {
        for (name, values) in &self.0 {
            let mut v = values.clone();
            v.sort_by(f64::total_cmp);
            let med = v[v.len() / 2];
            println!(
                "  {name:<72} {} / {} / {}",
                fmt(v[0]),
                fmt(med),
                fmt(v[v.len() - 1])
            );
        }
    }
}

fn fmt(x: f64) -> String {
    if x.abs() >= 1000.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.3}")
    }
}

/// The 1-minute load average from `/proc/loadavg`, or `?` where there is none.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

/// The reference runtime's real append pattern, run by Node: each record goes through
/// `JSON.stringify` and one `fs.promises.appendFile` (open `O_APPEND`, write, close), chained
/// one after another on a promise as the reference's writer does. No fsync.
struct NodeAppend {
    script: PathBuf,
    dir: PathBuf,
}

const NODE_APPEND_JS: &str = r#"
const fs = require("fs");
const [path, n, sample] = process.argv.slice(2);
const record = JSON.parse(sample);
let chain = Promise.resolve();
const t0 = process.hrtime.bigint();
for (let i = 0; i < Number(n); i++) {
  chain = chain.then(() => {
    record.message = `record ${i} with some text in it, as long as a small event`;
    return fs.promises.appendFile(path, JSON.stringify(record) + "\n", "utf8");
  });
}
chain.then(() => {
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  console.log(Number(n) / secs);
});
"#;

impl NodeAppend {
    fn find(dir: &Path) -> Option<Self> {
        let ok = std::process::Command::new("node")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            return None;
        }
        let script = dir.join("append.js");
        std::fs::write(&script, NODE_APPEND_JS).unwrap();
        Some(Self {
            script,
            dir: dir.to_path_buf(),
        })
    }

    /// Records per second of the real pattern, timed inside Node (start-up excluded).
    fn rate(&self, sample: &[u8], n: usize) -> f64 {
        let path = fresh(&self.dir, "node.jsonl");
        let out = std::process::Command::new("node")
            .arg(&self.script)
            .arg(&path)
            .arg(n.to_string())
            .arg(String::from_utf8_lossy(sample).trim_end())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let written = std::fs::read(&path).unwrap();
        assert_eq!(lines(&written).count(), n);
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    }
}
