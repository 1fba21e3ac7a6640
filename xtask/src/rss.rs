//! `cargo xtask rss`: peak memory of the reading commands on one large run log.
//!
//! Generates a run log of about 135 MB made of ~33 KB lines (the records of a recorded
//! reference run, its body repeated) in a temporary store, builds the `sessions` binary, and
//! runs each reading command on it as a child process, with stdout to `/dev/null`. Each
//! child's peak resident set (the kernel's `VmHWM`, sampled from `/proc/<pid>/status`) is
//! compared with that of `sessions --version`; the growth must stay within 64 MiB for every
//! command: memory follows the longest line, not the file. Prints a table; fails when a
//! command is above the limit.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::Result;

/// Most peak-RSS growth allowed over `sessions --version`: 64 MiB.
const LIMIT_KIB: u64 = 64 << 10;
/// Size of the generated run log: at least this many bytes.
const LOG_BYTES: u64 = 135_000_000;
const RUN_ID: &str = "0b5c1f7e-5a55-4d1e-9a7e-000000000135";

/// The recorded run whose records are repeated (the longest `.jsonl` of the reference data).
fn source_run() -> Result<PathBuf> {
    let dir = crate::project_root().join("testdata/codelia-runtime/sessions");
    let mut files = Vec::new();
    crate::tidy::walk(&dir, &mut files)?;
    files
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .filter(|p| p.components().any(|c| c.as_os_str() == "2026"))
        .max_by_key(|p| fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .ok_or_else(|| "no recorded run under testdata/codelia-runtime/sessions".into())
}

/// Writes `<root>/2026/11/30/<RUN_ID>.jsonl`: the source's header and `run.start`, its other
/// records repeated until the file holds [`LOG_BYTES`], then its last record (`run.end`).
fn generate(root: &Path) -> Result<(PathBuf, u64, usize)> {
    let text = fs::read_to_string(source_run()?)?;
    let lines: Vec<&str> = text.lines().collect();
    let (Some(first), Some(last)) = (lines.first(), lines.last()) else {
        return Err("the recorded run is empty".into());
    };
    let old_id = serde_json::from_str::<serde_json::Value>(first)?["run_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let fix = |l: &str| l.replace(&old_id, RUN_ID);
    let body: Vec<String> = lines[1..lines.len() - 1].iter().map(|l| fix(l)).collect();
    if body.is_empty() {
        return Err("the recorded run has no records between its first and last".into());
    }
    let longest = lines.iter().map(|l| l.len()).max().unwrap_or(0);
    let dir = root.join("2026/11/30");
    fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{RUN_ID}.jsonl"));
    let mut out = std::io::BufWriter::new(fs::File::create(&path)?);
    let mut written = 0u64;
    let put = |out: &mut std::io::BufWriter<fs::File>, l: &str, written: &mut u64| -> Result<()> {
        out.write_all(l.as_bytes())?;
        out.write_all(b"\n")?;
        *written += l.len() as u64 + 1;
        Ok(())
    };
    put(&mut out, &fix(first), &mut written)?;
    while written < LOG_BYTES {
        for l in &body {
            put(&mut out, l, &mut written)?;
        }
    }
    put(&mut out, &fix(last), &mut written)?;
    out.flush()?;
    drop(out);
    let len = fs::metadata(&path)?.len();
    Ok((path, len, longest))
}

/// `VmHWM` of process `pid` in KiB, while it is alive.
fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Runs `bin args` with stdout and stderr to `/dev/null` and returns its exit code and peak
/// resident set in KiB: the kernel's high-water mark (`VmHWM` of `/proc/<pid>/status`,
/// which never goes down), read every millisecond until the child exits, so only growth in
/// its last millisecond could go unseen. (The workspace forbids `unsafe`, which `wait4`'s
/// `rusage` would need.)
fn peak_kib(bin: &Path, args: &[&str]) -> Result<(i32, u64)> {
    let mut child = Command::new(bin)
        .args(args)
        .env("TZ", "UTC")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let pid = child.id();
    let mut peak = 0;
    let status = loop {
        if let Some(kib) = vm_hwm_kib(pid) {
            peak = peak.max(kib);
        }
        if let Some(status) = child.try_wait()? {
            break status;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    };
    Ok((status.code().unwrap_or(-1), peak))
}

/// `cargo xtask rss [--release]`.
pub(crate) fn run(rest: &[String]) -> Result<()> {
    let release = match rest {
        [] => false,
        [flag] if flag == "--release" => true,
        _ => return Err("usage: cargo xtask rss [--release]".into()),
    };
    let mut build = crate::cargo();
    build.args(["build", "-q", "-p", "session-cli", "--bin", "sessions"]);
    if release {
        build.arg("--release");
    }
    crate::status(build)?;
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::project_root().join("target"));
    let bin = target
        .join(if release { "release" } else { "debug" })
        .join("sessions");

    let tmp = std::env::temp_dir().join(format!("session-rss-{}", std::process::id()));
    let root = tmp.join("sessions");
    fs::create_dir_all(&root)?;
    let result = measure(&bin, &root, &tmp);
    let _ = fs::remove_dir_all(&tmp);
    result
}

fn measure(bin: &Path, root: &Path, tmp: &Path) -> Result<()> {
    let (path, len, longest) = generate(root)?;
    let root_s = root.to_str().ok_or("temporary directory is not UTF-8")?;
    let out_file = tmp.join("export.out");
    let out_s = out_file
        .to_str()
        .ok_or("temporary directory is not UTF-8")?;
    println!(
        "run log: {} ({:.1} MB, longest line {:.1} KB)",
        path.display(),
        len as f64 / 1e6,
        longest as f64 / 1e3
    );
    let (_, base) = peak_kib(bin, &["--version"])?;
    println!(
        "baseline (`sessions --version`): {:.1} MiB",
        base as f64 / 1024.0
    );
    let commands: Vec<(&str, Vec<&str>)> = vec![
        ("show", vec!["show", RUN_ID]),
        ("show --raw", vec!["show", "--raw", RUN_ID]),
        ("verify RUN", vec!["verify", RUN_ID]),
        ("tail", vec!["tail", RUN_ID]),
        ("tail --raw", vec!["tail", "--raw", RUN_ID]),
        ("export md", vec!["export", RUN_ID, "--format", "md"]),
        ("export json", vec!["export", RUN_ID, "--format", "json"]),
        ("export jsonl", vec!["export", RUN_ID, "--format", "jsonl"]),
        ("export html", vec!["export", RUN_ID, "--format", "html"]),
        (
            "export md -o",
            vec!["export", RUN_ID, "--format", "md", "-o", out_s, "--force"],
        ),
        ("stats", vec!["stats"]),
        ("runs", vec!["runs"]),
    ];
    println!(
        "{:<14} {:>5} {:>12} {:>12}  verdict (limit +{} MiB)",
        "command",
        "exit",
        "peak MiB",
        "growth MiB",
        LIMIT_KIB >> 10
    );
    let mut over = Vec::new();
    for (name, args) in &commands {
        let mut full = vec!["--root", root_s];
        full.extend(args.iter().copied());
        let (code, peak) = peak_kib(bin, &full)?;
        let growth = peak.saturating_sub(base);
        let ok = growth <= LIMIT_KIB;
        println!(
            "{:<14} {:>5} {:>12.1} {:>12.1}  {}",
            name,
            code,
            peak as f64 / 1024.0,
            growth as f64 / 1024.0,
            if ok { "ok" } else { "OVER" }
        );
        if !ok {
            over.push(*name);
        }
        // Exit 4 (damage found) is an answer too; anything else above it is a failure.
        if !matches!(code, 0 | 1 | 4) {
            over.push(*name);
        }
    }
    if over.is_empty() {
        Ok(())
    } else {
        Err(format!("over the limit or failed: {}", over.join(", ")).into())
    }
}
