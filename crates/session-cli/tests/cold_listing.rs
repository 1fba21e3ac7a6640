//! `sessions runs` on a store without a usable run index reads only what the page needs: the
//! newest day directories, each file's head block and one tail block, and writes nothing
//! anywhere (no temporary store, no link or copy of a run file).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const DAYS: u32 = 365;
const RUNS_PER_DAY: u32 = 14;

/// `YYYY-MM-DD` of day `n` after 2025-01-01.
fn day(n: u32) -> time::Date {
    time::Date::from_calendar_date(2025, time::Month::January, 1).unwrap()
        + time::Duration::days(i64::from(n))
}

fn run_id(d: u32, j: u32) -> String {
    format!("run-{d:03}-{j:02}")
}

fn started_at(d: u32, j: u32) -> String {
    let date = day(d);
    format!(
        "{:04}-{:02}-{:02}T{:02}:00:00.000Z",
        date.year(),
        u8::from(date.month()),
        date.day(),
        j + 1
    )
}

/// 5,110 runs over 365 days, 14 a day; two runs of the newest day carry a 1 MiB line (one in
/// the middle, one at the end).
fn store() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let big = "x".repeat(1 << 20);
    for d in 0..DAYS {
        let date = day(d);
        let dir_path = dir.path().join(format!(
            "{:04}/{:02}/{:02}",
            date.year(),
            u8::from(date.month()),
            date.day()
        ));
        std::fs::create_dir_all(&dir_path).unwrap();
        for j in 0..RUNS_PER_DAY {
            let id = run_id(d, j);
            let at = started_at(d, j);
            let mut text = format!(
                "{{\"type\":\"header\",\"schema_version\":1,\"run_id\":\"{id}\",\"session_id\":\"s{d}\",\"started_at\":\"{at}\"}}\n\
                 {{\"type\":\"run.start\",\"run_id\":\"{id}\",\"ts\":\"{at}\",\"session_id\":\"s{d}\",\"input\":{{\"type\":\"text\",\"text\":\"task {j}\"}}}}\n"
            );
            let output = format!(
                "{{\"type\":\"tool.output\",\"run_id\":\"{id}\",\"ts\":\"{at}\",\"tool\":\"t\",\"tool_call_id\":\"c\",\"result_raw\":\"{big}\"}}\n"
            );
            let end = format!(
                "{{\"type\":\"run.end\",\"run_id\":\"{id}\",\"ts\":\"{at}\",\"outcome\":\"completed\"}}\n"
            );
            match (d == DAYS - 1, j) {
                (true, 3) => {
                    text.push_str(&output);
                    text.push_str(&end);
                }
                (true, 5) => text.push_str(&output),
                _ => text.push_str(&end),
            }
            std::fs::write(dir_path.join(format!("{id}.jsonl")), text).unwrap();
        }
    }
    dir
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Every file under `dir` with its length and modification time.
fn tree(dir: &Path) -> BTreeMap<PathBuf, (u64, std::time::SystemTime)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            if m.is_dir() {
                stack.push(e.path());
            }
            out.insert(e.path(), (m.len(), m.modified().unwrap()));
        }
    }
    out
}

#[test]
fn a_cold_listing_of_5110_runs_reads_the_newest_two_days_bounded_and_writes_nothing() {
    let root = store();
    let before = tree(root.path());

    // In-process, so that the thread's counter sees every run file opened.
    let counter = session_jsonl::count_file_reads();
    let args: Vec<OsString> = [
        "sessions",
        "--read-only",
        "--root",
        root.path().to_str().unwrap(),
        "runs",
        "--json",
        "--limit",
        "20",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = session_cli::run(args, &mut out, &mut err);
    let reads = counter.reads();
    drop(counter);
    let err = String::from_utf8(err).unwrap();
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("the run index is missing or empty; answering from the run files themselves"),
        "{err}"
    );

    // The page: the 20 newest runs, newest first, and a cursor.
    let lines = json_lines(&String::from_utf8(out).unwrap());
    assert_eq!(lines.len(), 21);
    let ids: Vec<&str> = lines[..20]
        .iter()
        .map(|l| l["run_id"].as_str().unwrap())
        .collect();
    let want: Vec<String> = (0..RUNS_PER_DAY)
        .rev()
        .map(|j| run_id(DAYS - 1, j))
        .chain((8..RUNS_PER_DAY).rev().map(|j| run_id(DAYS - 2, j)))
        .collect();
    assert_eq!(ids, want);
    assert!(lines[20]["next_cursor"].is_string());
    // The runs with a 1 MiB line: outcome from the tail, counts not claimed.
    let by_id = |id: &str| lines.iter().find(|l| l["run_id"] == id).unwrap();
    let ended = by_id(&run_id(DAYS - 1, 3));
    assert_eq!(ended["outcome"], "completed");
    assert_eq!(ended["partial"], true);
    assert!(ended["records"].is_null());
    assert_eq!(ended["first_input"], "task 3");
    let undecided = by_id(&run_id(DAYS - 1, 5));
    assert_eq!(undecided["partial"], true);
    assert_eq!(undecided["outcome"], "crashed");
    let small = by_id(&run_id(DAYS - 1, 4));
    assert_eq!(small["partial"], false);
    assert_eq!(small["records"], 3);

    // 28 files opened (the two newest day directories), none read past 128 KiB.
    let mut per_file: BTreeMap<&Path, u64> = BTreeMap::new();
    for r in &reads {
        *per_file.entry(r.path.as_path()).or_default() += r.bytes;
    }
    assert_eq!(per_file.len(), 28, "{per_file:?}");
    for (path, bytes) in &per_file {
        assert!(
            path.starts_with(root.path().join("2025/12")),
            "{}",
            path.display()
        );
        assert!(*bytes <= 128 << 10, "{}: {bytes} bytes", path.display());
    }
    // The two long runs: head block plus one tail block each.
    assert_eq!(
        per_file[root
            .path()
            .join(format!("2025/12/31/{}.jsonl", run_id(DAYS - 1, 3)))
            .as_path()],
        128 << 10
    );

    assert_eq!(tree(root.path()), before, "the listing changed the store");

    // As a child process with its own empty TMPDIR: nothing is written there either (no
    // temporary store of links or copies).
    let tmp = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_sessions"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", "/nonexistent-home")
        .env("TMPDIR", tmp.path())
        .args(["--read-only", "--root"])
        .arg(root.path())
        .args(["runs", "--json", "--limit", "5"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(json_lines(&String::from_utf8(o.stdout).unwrap()).len(), 6);
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    assert_eq!(tree(root.path()), before);
}

/// Runs `sessions --root <root> <args…>` in-process; the exit code, stdout and stderr.
fn sessions(root: &Path, args: &[&str]) -> (i32, String, String) {
    let args: Vec<OsString> = ["sessions", "--root", root.to_str().unwrap()]
        .iter()
        .chain(args)
        .map(OsString::from)
        .collect();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = session_cli::run(args, &mut out, &mut err);
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

/// Two runs of 3 MiB (three 1 MiB `llm.request` lines each; one ended, one open) and a small
/// one, in three day directories.
fn huge_store() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let pad = "x".repeat(1 << 20);
    for (n, (id, ended, pairs)) in [("big-a", true, 3), ("big-b", false, 3), ("small", true, 1)]
        .into_iter()
        .enumerate()
    {
        let at = format!("2026-11-{:02}T09:00:00.000Z", 28 + n);
        let day = dir.path().join(format!("2026/11/{:02}", 28 + n));
        std::fs::create_dir_all(&day).unwrap();
        let mut text = format!(
            "{{\"type\":\"header\",\"schema_version\":1,\"run_id\":\"{id}\",\"session_id\":\"s-{id}\",\"started_at\":\"{at}\",\"model\":{{\"provider\":\"p\",\"name\":\"m\"}}}}\n\
             {{\"type\":\"run.start\",\"run_id\":\"{id}\",\"ts\":\"{at}\",\"session_id\":\"s-{id}\",\"input\":{{\"type\":\"text\",\"text\":\"task {id}\"}}}}\n"
        );
        let big = if id == "small" { "hi" } else { pad.as_str() };
        for seq in 0..pairs {
            text.push_str(&format!(
                "{{\"type\":\"llm.request\",\"run_id\":\"{id}\",\"ts\":\"{at}\",\"seq\":{seq},\"input\":{{\"messages\":[{{\"role\":\"user\",\"content\":\"{big}\"}}],\"tools\":null,\"tool_choice\":\"auto\"}}}}\n\
                 {{\"type\":\"llm.response\",\"run_id\":\"{id}\",\"ts\":\"{at}\",\"seq\":{seq},\"output\":{{\"messages\":[{{\"role\":\"assistant\",\"content\":\"ok\"}}],\"usage\":{{\"model\":\"m\",\"input_tokens\":{},\"output_tokens\":2,\"total_tokens\":{}}}}}}}\n",
                seq + 10,
                seq + 12
            ));
        }
        text.push_str(&format!(
            "{{\"type\":\"run.status\",\"run_id\":\"{id}\",\"ts\":\"{at}\",\"status\":\"waiting\"}}\n"
        ));
        if ended {
            text.push_str(&format!(
                "{{\"type\":\"run.end\",\"run_id\":\"{id}\",\"ts\":\"{at}\",\"outcome\":\"completed\"}}\n"
            ));
        }
        std::fs::write(day.join(format!("{id}.jsonl")), text).unwrap();
    }
    dir
}

#[test]
fn a_first_refresh_over_huge_runs_prints_what_a_whole_read_prints() {
    // `stats` of a read-only store without an index: every file read whole, in memory.
    let reference = huge_store();
    let (code, whole_stats, err) = sessions(reference.path(), &["--read-only", "stats", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(!reference.path().join("state.db").exists());

    // A writable store: the first refresh reads the large runs bounded, at most head block
    // and tail probe each; the page completes them.
    let first = huge_store();
    let counter = session_jsonl::count_file_reads();
    let (code, runs_json, err) = sessions(first.path(), &["runs", "--json"]);
    let reads = counter.reads();
    drop(counter);
    assert_eq!(code, 0, "{err}");
    let rows = json_lines(&runs_json);
    let ids: Vec<&str> = rows.iter().map(|r| r["run_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["small", "big-b", "big-a"]);
    for r in &rows[1..] {
        assert_eq!(r["partial"], false);
        assert_eq!(r["invocations"], 3);
        assert_eq!(r["records"], 9 + u64::from(r["run_id"] == "big-a"));
        assert_eq!(r["input_tokens"], 10 + 11 + 12);
        assert_eq!(r["last_status"], "waiting");
    }
    // Each large file: read bounded by the refresh (at most head block and tail probe),
    // then once whole by the page; nothing else of it.
    for id in ["big-a", "big-b"] {
        let name = format!("{id}.jsonl");
        let of: Vec<&session_jsonl::FileRead> =
            reads.iter().filter(|r| r.path.ends_with(&name)).collect();
        let size = std::fs::metadata(&of[0].path).unwrap().len();
        let whole = of.iter().filter(|r| r.bytes == size).count();
        let bounded: u64 = of.iter().filter(|r| r.bytes < size).map(|r| r.bytes).sum();
        assert_eq!(whole, 1, "{id}: {of:?}");
        assert!(bounded > 0 && bounded <= 192 << 10, "{id}: {of:?}");
    }
    let (code, first_stats, err) = sessions(first.path(), &["stats", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(first_stats, whole_stats);
    let (_, runs_table, _) = sessions(first.path(), &["runs", "--utc"]);

    // The other order: `stats` first completes the rows, then `runs` prints the same.
    let second = huge_store();
    let (code, second_stats, err) = sessions(second.path(), &["stats", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(second_stats, whole_stats);
    let (_, second_json, _) = sessions(second.path(), &["runs", "--json"]);
    let (_, second_table, _) = sessions(second.path(), &["runs", "--utc"]);
    let paths = |text: &str| text.replace(&second.path().display().to_string(), "ROOT");
    assert_eq!(
        paths(&second_json),
        runs_json.replace(&first.path().display().to_string(), "ROOT")
    );
    assert_eq!(second_table, runs_table);
    assert!(runs_table.contains("big-a"), "{runs_table}");
}
