//! Run-log reader and writer benchmarks, printed as ratios against baselines of the same run.
//!
//! A realistic run log is generated in a temporary directory: 50-turn cycles whose
//! `llm.request` repeats the growing history, tool outputs of 1–50 KB with non-ASCII text.
//! Size: `SESSION_BENCH_MB` (default 200); `SESSION_BENCH_KEEP=1` keeps the directory. Run with `cargo bench -p session-jsonl --bench jsonl`.

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

/// Best of `reps` runs of `f`, in seconds.
fn best<T>(reps: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut best = f64::MAX;
    let mut last = None;
    for _ in 0..reps {
        let t = Instant::now();
        let v = f();
        best = best.min(t.elapsed().as_secs_f64());
        last = Some(v);
    }
    (best, last.unwrap())
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
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();

    let log = dir
        .path()
        .join("8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a.jsonl");
    let t = Instant::now();
    let size = generate(&log, mb << 20);
    let bytes = std::fs::read(&log).unwrap();
    println!(
        "generated {:.1} MB ({} lines) in {:.1} s under {}",
        size as f64 / 1e6,
        lines(&bytes).count(),
        t.elapsed().as_secs_f64(),
        dir.path().display()
    );
    let reps = if quick { 1 } else { 5 };
    let gbps = |secs: f64| size as f64 / secs / 1e9;

    // 1. Reading.
    let (t_raw, _) = best(reps, || {
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
    // Baseline: the same streaming from the file (4 MiB reads, memchr line split), each line
    // validated by serde_json into `IgnoredAny`. The machine is shared: the measurements are
    // interleaved round by round and the best round of each is kept.
    let time = |f: &mut dyn FnMut() -> usize| {
        let t = Instant::now();
        let n = f();
        (t.elapsed().as_secs_f64(), n)
    };
    let (mut t_validate, mut t_validate_utf8, mut t_validate_mem, mut t_typed_mem, mut t_reader) =
        (f64::MAX, f64::MAX, f64::MAX, f64::MAX, f64::MAX);
    let (mut n_valid, mut n_typed, mut n_read, mut n_damage) = (0, 0, 0, 0);
    for _ in 0..reps.max(3) {
        let (t, n) = time(&mut || validate_file(&log, false));
        (t_validate, n_valid) = (t_validate.min(t), n);
        let (t, _) = time(&mut || validate_file(&log, true));
        t_validate_utf8 = t_validate_utf8.min(t);
        let (t, n) = time(&mut || {
            let mut recs = 0;
            for item in Reader::open_with(&log, ReaderOptions::default()).unwrap() {
                match item.unwrap() {
                    Item::Record(_) => recs += 1,
                    Item::Damage(_) => n_damage += 1,
                }
            }
            recs
        });
        (t_reader, n_read) = (t_reader.min(t), n);
        let (t, _) = time(&mut || {
            lines(&bytes)
                .filter(|l| serde_json::from_slice::<IgnoredAny>(l).is_ok())
                .count()
        });
        t_validate_mem = t_validate_mem.min(t);
        let (t, n) = time(&mut || {
            lines(&bytes)
                .filter(|l| {
                    simdutf8::basic::from_utf8(l).is_ok_and(|t| parse_record_str(t).is_ok())
                })
                .count()
        });
        (t_typed_mem, n_typed) = (t_typed_mem.min(t), n);
    }
    assert_eq!(
        (n_valid, n_typed, n_read, n_damage),
        (n_typed, n_read, n_valid, 0)
    );
    // 2. Tail look-up.
    let (t_tail, state) = best(reps.max(5), || terminal_state(&log).unwrap());
    assert!(state.has_end());

    println!();
    println!("reading ({:.0} MB, page cache warm)", size as f64 / 1e6);
    println!(
        "  raw read(2) 1 MiB blocks          {:>8.2} GB/s",
        gbps(t_raw)
    );
    println!(
        "  IgnoredAny per line, from file    {:>8.2} GB/s  (baseline)",
        gbps(t_validate)
    );
    println!(
        "  IgnoredAny per line, in memory    {:>8.2} GB/s",
        gbps(t_validate_mem)
    );
    println!(
        "  simdutf8 + parse_record_str       {:>8.2} GB/s  (lines in memory)",
        gbps(t_typed_mem)
    );
    println!(
        "  Reader::open, typed, from file    {:>8.2} GB/s",
        gbps(t_reader)
    );
    println!(
        "  ratio typed Reader / IgnoredAny   {:>8.3}     (goal >= 0.85)",
        t_validate / t_reader
    );
    println!(
        "  ratio typed Reader / (IgnoredAny + SIMD UTF-8 check, {:.2} GB/s) {:.3}",
        gbps(t_validate_utf8),
        t_validate_utf8 / t_reader
    );
    println!(
        "  ratio parse_record_str / IgnoredAny, both in memory {:.3}",
        t_validate_mem / t_typed_mem
    );
    println!(
        "  terminal_state {:.3} ms ({} bytes read) / full read {:.1} ms = {:.5}  (goal <= 0.01)",
        t_tail * 1e3,
        state.bytes_read,
        t_reader * 1e3,
        t_tail / t_reader
    );

    // 3. Appending.
    let n_sync = if quick { 50 } else { 2_000 };
    let sample = session_schema::to_line(&status(0)).unwrap();
    // fdatasync latency on a shared machine drifts a lot: raw loop and writer alternate in
    // chunks of 50 records on two files, and the times are summed per side.
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
    let (mut sync8, mut group8, mut group8_delay) = (0f64, 0f64, 0f64);
    for _ in 0..reps {
        sync8 = sync8.max(writer_rate(
            dir.path(),
            "sync8.jsonl",
            Durability::SyncData,
            8,
            n_sync,
        ));
        group8 = group8.max(writer_rate(
            dir.path(),
            "group8.jsonl",
            Durability::group_commit(),
            8,
            n_sync * 4,
        ));
        group8_delay = group8_delay.max(writer_rate(
            dir.path(),
            "group8d.jsonl",
            Durability::GroupCommit {
                max_delay: Duration::from_micros(500),
                max_batch: 64,
            },
            8,
            n_sync * 4,
        ));
    }
    let n_buf = if quick { 1_000 } else { 200_000 };
    let buffered = writer_rate(dir.path(), "buf.jsonl", Durability::Buffered, 1, n_buf);
    let flush = writer_rate(dir.path(), "flush.jsonl", Durability::Flush, 1, n_buf);
    let n_ref = if quick { 1_000 } else { 50_000 };
    let reference = {
        let path = fresh(dir.path(), "ref.jsonl");
        let t = Instant::now();
        for i in 0..n_ref {
            // The reference: JSON.stringify, then fs.appendFile = open O_APPEND, write, close.
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
    println!();
    println!("appending ({} B records)", sample.len());
    println!(
        "  raw write+fdatasync loop          {:>10.0} /s  (baseline)",
        raw_sync
    );
    println!(
        "  SyncData, 1 thread                {:>10.0} /s  ratio {:.3} (goal >= 0.85)",
        sync1,
        sync1 / raw_sync
    );
    println!("  SyncData, 8 threads               {:>10.0} /s", sync8);
    println!(
        "  GroupCommit, 8 threads            {:>10.0} /s  ratio vs SyncData 8 threads {:.1} (goal >= 5)",
        group8,
        group8 / sync8
    );
    println!(
        "  GroupCommit 0.5 ms/64, 8 threads  {:>10.0} /s  ratio {:.1}",
        group8_delay,
        group8_delay / sync8
    );
    println!(
        "  reference open-append-close       {:>10.0} /s  (baseline)",
        reference
    );
    println!(
        "  Buffered                          {:>10.0} /s  ratio {:.1}",
        buffered,
        buffered / reference
    );
    println!(
        "  Flush (write per record)          {:>10.0} /s  ratio {:.1}",
        flush,
        flush / reference
    );
    if std::env::var_os("SESSION_BENCH_KEEP").is_some() {
        println!("kept {}", dir.keep().display());
    }
}
