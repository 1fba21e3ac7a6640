//! Project task runner, reached as `cargo xtask <task>` (alias in `.cargo/config.toml`).
//!
//! Tasks:
//! * `schema [--check]` — write the JSON Schema of the record union to
//!   `schema/session-record.schema.json`; with `--check`, compare the committed schema with the
//!   one the code produces and fail on a breaking change without a `schema_version` bump.
//! * `schema cli [--check]` — write the JSON Schema of the `--json` lines of `sessions`
//!   (generated from `crates/session-cli/src/json_rows.rs`) to `docs/cli-json.schema.json`;
//!   with `--check`, fail when the committed file differs. session-cli's `json_contract` test
//!   holds the same.
//! * `bench [jsonl|state|replay|cli|all|pg]` — run the benchmarks (they print ratios); `pg`
//!   starts a throwaway PostgreSQL cluster (see crates/session-cli/benches/pg.rs).
//! * `bench scale` — generate stores of 1k and 100k runs (`SESSION_SCALE_SIZES`, e.g.
//!   `1000,10000,100000`) in a temporary directory and time every command of the scaling
//!   table as a process, interleaved, with min/median/max, growth ratios and throughputs
//!   against the reader (`crates/session-cli/benches/scale.rs`; not part of `all`).
//! * `bench search` — indexing throughput of `search.db` ÷ the plain reader's, query p50/p95 at
//!   100k runs, index size ÷ log size (`crates/session-cli/benches/search.rs`; not part of `all`).
//! * `soak [--seconds N]` — long crash/durability soak of the run-log writer.
//! * `soak pg [--rounds N]` — kill a fleet writer and `sessions sync` at random points N times
//!   each (default 50) against a throwaway PostgreSQL cluster, and rerun: every acknowledged
//!   line present exactly once.
//! * `sample [--check]` — regenerate the bundled sample store in `sample/sessions` with the
//!   project's own writers; `--check` verifies the committed copy is what the code writes.
//! * `man [DIR]` — write the man pages of `sessions` (one per command, generated from the clap
//!   definitions by `clap_mangen`) into DIR (default `target/man`), through session-cli's
//!   `man` example (xtask itself depends on no workspace crate).
//! * `fullfs [--size SIZE]` — the full-disk check: mounts a small tmpfs (default 8m), fills
//!   it and checks that saves fail cleanly (messages files byte-identical, no temp files, the
//!   OS error in the cause) and reading commands keep working
//!   (`crates/session-cli/examples/fullfs.rs`). Needs root to mount; skipped otherwise.
//!
//! The `#[test]`s in `tidy.rs`, `cycles.rs`, `deps.rs`, `publish.rs`, `readme.rs`, `refs.rs`,
//! `spec_example.rs`, `schema.rs` and `vocabulary.rs` are part of `cargo test --workspace`.
#![allow(clippy::print_stdout, clippy::print_stderr)]

#[cfg(test)]
mod cycles;
#[cfg(test)]
mod deps;
#[cfg(test)]
mod publish;
#[cfg(test)]
mod readme;
#[cfg(test)]
mod refs;
mod rss;
mod schema;
#[cfg(test)]
mod spec_example;
mod support;
mod tidy;
#[cfg(test)]
mod vocabulary;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use support::{Result, cargo, project_root, status};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

const USAGE: &str = "usage: cargo xtask <schema [cli] [--check] | bench [jsonl|state|replay|cli|scale|search|all|pg] | soak [--seconds N] | soak pg [--rounds N] | sample [--check] | man [DIR] | fullfs [--size SIZE] | rss [--release]>";

fn run(args: &[String]) -> Result<()> {
    let task = args.first().map(String::as_str);
    let rest = args.get(1..).unwrap_or(&[]);
    match task {
        Some("schema") if rest.first().is_some_and(|a| a == "cli") => {
            schema::run_cli(rest.iter().any(|a| a == "--check"))
        }
        Some("schema") => schema::run(rest.iter().any(|a| a == "--check")),
        Some("bench") => bench(rest.first().map(String::as_str).unwrap_or("all")),
        Some("soak") => soak(rest),
        Some("sample") => sample(rest.iter().any(|a| a == "--check")),
        Some("fullfs") => fullfs(rest),
        Some("rss") => rss::run(rest),
        Some("man") => man(rest),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            Ok(())
        }
        _ => Err(USAGE.into()),
    }
}

fn bench(which: &str) -> Result<()> {
    if which == "scale" || which == "search" {
        println!("== bench {which}");
        let mut cmd = cargo();
        cmd.args(["bench", "-p", "session-cli", "--bench", which]);
        return status(cmd);
    }
    let all = ["jsonl", "state", "replay", "cli"];
    let selected: Vec<&str> = if which == "all" {
        all.to_vec()
    } else if all.contains(&which) || which == "pg" {
        vec![which]
    } else {
        return Err(
            format!("unknown benchmark `{which}`; one of {all:?}, scale, search or all").into(),
        );
    };
    if which == "pg" {
        // Needs PostgreSQL server binaries (it starts its own cluster); not part of `all`.
        println!("== bench pg");
        let mut cmd = cargo();
        cmd.args(["bench", "-p", "session-cli", "--bench", "pg"]);
        return status(cmd);
    }
    for name in selected {
        println!("== bench {name}");
        let mut cmd = cargo();
        cmd.args(["bench", "-p", &format!("session-{name}"), "--bench", name]);
        status(cmd)?;
    }
    Ok(())
}

fn soak(rest: &[String]) -> Result<()> {
    if rest.first().map(String::as_str) == Some("pg") {
        let rounds = match rest.get(1..) {
            Some([flag, n]) if flag == "--rounds" => n.clone(),
            Some([]) | None => "50".to_owned(),
            _ => return Err(USAGE.into()),
        };
        for (package, test, filter) in [
            ("session-pg", "fleet", None),
            ("session-cli", "sync", Some("killed_at_random_points")),
        ] {
            let mut cmd = cargo();
            cmd.args(["test", "--release", "-p", package, "--test", test]);
            cmd.env("SESSION_PG_ROUNDS", &rounds)
                .env("SESSION_PG_REQUIRED", "1");
            if let Some(f) = filter {
                cmd.args(["--", f, "--nocapture"]);
            }
            status(cmd)?;
        }
        return Ok(());
    }
    let mut cmd = cargo();
    cmd.args([
        "run",
        "--release",
        "-q",
        "-p",
        "session-jsonl",
        "--example",
        "soak",
        "--",
    ]);
    cmd.args(rest);
    status(cmd)
}

fn man(rest: &[String]) -> Result<()> {
    let dir = match rest {
        [] => project_root().join("target").join("man"),
        // Relative to where xtask was started (cargo runs the example from the project root).
        [dir] => std::env::current_dir()?.join(dir),
        _ => return Err(USAGE.into()),
    };
    let mut cmd = cargo();
    cmd.args(["run", "-q", "-p", "session-cli", "--example", "man", "--"]);
    cmd.arg(&dir);
    status(cmd)
}

fn sample(check: bool) -> Result<()> {
    let root = project_root();
    let target = root.join("sample").join("sessions");
    let out = if check {
        let dir = std::env::temp_dir().join(format!("session-sample-check-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    } else {
        let _ = std::fs::remove_dir_all(&target);
        target.clone()
    };
    let mut cmd = cargo();
    cmd.args([
        "run",
        "-q",
        "-p",
        "session-cli",
        "--example",
        "make_sample",
        "--",
    ]);
    cmd.arg(&out);
    status(cmd)?;
    if check {
        let diffs = diff_trees(&target, &out)?;
        let _ = std::fs::remove_dir_all(&out);
        if !diffs.is_empty() {
            return Err(format!(
                "sample/sessions differs from what the code writes (run `cargo xtask sample`):\n  {}",
                diffs.join("\n  ")
            )
            .into());
        }
        println!("sample/sessions is up to date");
    } else {
        println!("wrote {}", target.display());
    }
    Ok(())
}

/// `cargo xtask fullfs`: the full-disk check on a real size-limited tmpfs. Mounting needs
/// root (or `CAP_SYS_ADMIN`); without it the check is skipped with a message, not failed.
fn fullfs(rest: &[String]) -> Result<()> {
    let size = match rest {
        [] => "8m".to_owned(),
        [flag, size] if flag == "--size" => size.clone(),
        _ => return Err("usage: cargo xtask fullfs [--size SIZE]".into()),
    };
    let uid = Command::new("id").arg("-u").output()?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        println!("fullfs: skipped: mounting a tmpfs needs root (run `cargo xtask fullfs` as root)");
        return Ok(());
    }
    // Build first, so that the build does not run on (or fill) the small file system.
    let mut build = cargo();
    build.args(["build", "-q", "-p", "session-cli", "--example", "fullfs"]);
    status(build)?;
    let dir = std::env::temp_dir().join(format!("session-fullfs-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mount = Command::new("mount")
        .args([
            "-t",
            "tmpfs",
            "-o",
            &format!("size={size},mode=0700"),
            "tmpfs",
        ])
        .arg(&dir)
        .output()?;
    if !mount.status.success() {
        let _ = std::fs::remove_dir(&dir);
        println!(
            "fullfs: skipped: cannot mount a tmpfs here ({})",
            String::from_utf8_lossy(&mount.stderr).trim()
        );
        return Ok(());
    }
    let mut check = cargo();
    check.args([
        "run",
        "-q",
        "-p",
        "session-cli",
        "--example",
        "fullfs",
        "--",
    ]);
    check.arg(&dir);
    let result = status(check);
    let unmount = Command::new("umount").arg(&dir).status();
    let _ = std::fs::remove_dir(&dir);
    match unmount {
        Ok(s) if s.success() => {}
        _ => eprintln!("fullfs: warning: could not unmount {}", dir.display()),
    }
    result
}

/// Relative paths whose contents differ between two trees (missing on either side included).
fn diff_trees(a: &Path, b: &Path) -> Result<Vec<String>> {
    let mut files_a = Vec::new();
    let mut files_b = Vec::new();
    tidy::walk(a, &mut files_a)?;
    tidy::walk(b, &mut files_b)?;
    let rel = |root: &Path, files: &[PathBuf]| -> std::collections::BTreeSet<PathBuf> {
        files
            .iter()
            .filter_map(|f| f.strip_prefix(root).ok().map(Path::to_path_buf))
            .collect()
    };
    let set_a = rel(a, &files_a);
    let set_b = rel(b, &files_b);
    let mut diffs = Vec::new();
    for path in set_a.union(&set_b) {
        let left = std::fs::read(a.join(path)).ok();
        let right = std::fs::read(b.join(path)).ok();
        if left != right {
            diffs.push(path.display().to_string());
        }
    }
    Ok(diffs)
}
