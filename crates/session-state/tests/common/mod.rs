//! Helpers shared by the integration tests of session-state.

#![allow(clippy::unwrap_used)]

use std::fs;
use std::path::Path;
use std::process::Command;

use session_schema::{BaseMessage, parse_message};

#[allow(dead_code)] // Not every test binary copies trees.
/// Copies the directory tree `from` to `to` (created), files byte for byte.
pub(crate) fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A message `{"role": role, "content": text}`.
#[allow(dead_code)] // Not every test binary builds messages.
pub(crate) fn msg(role: &str, text: &str) -> BaseMessage {
    let line = serde_json::json!({"role": role, "content": text}).to_string();
    parse_message(line.as_bytes()).unwrap().value
}

#[allow(dead_code, clippy::print_stderr)] // Only the strace tests trace a child; a skip says why.
/// Runs test `test` of this test binary again, as a child under `strace -f -qq -e
/// trace=<calls>` writing to `out`, with the environment variable `child_var` set to `root`
/// (the child does the traced work when it sees it), and returns the trace. The child prints
/// its phase marks as `strace-mark-…` calls. `None` (with one line on stderr saying why) when
/// strace is not installed or cannot trace here; when it is not installed and
/// `SESSION_STRACE_REQUIRED` is set (`.ci/run` sets it), the test fails instead. Panics when
/// the traced child fails.
pub(crate) fn traced_child(
    test: &str,
    calls: &str,
    child_var: &str,
    root: &Path,
    out: &Path,
) -> Option<String> {
    if Command::new("strace").arg("-V").output().is_err() {
        assert!(
            std::env::var_os("SESSION_STRACE_REQUIRED").is_none(),
            "strace is not installed and SESSION_STRACE_REQUIRED is set"
        );
        eprintln!("skipped: strace is not installed");
        return None;
    }
    let status = Command::new("strace")
        .arg("-f")
        .arg("-qq")
        .arg("-o")
        .arg(out)
        .arg("-e")
        .arg(format!("trace={calls}"))
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", test, "--test-threads=1"])
        .env(child_var, root)
        .output()
        .unwrap();
    let trace = fs::read_to_string(out).unwrap_or_default();
    if !status.status.success() && !trace.contains("strace-mark-") {
        eprintln!(
            "skipped: strace cannot trace here: {}",
            String::from_utf8_lossy(&status.stderr).trim()
        );
        return None;
    }
    assert!(
        status.status.success(),
        "child failed: {}",
        String::from_utf8_lossy(&status.stdout)
    );
    Some(trace)
}
