//! Helpers shared by the integration tests of the `sessions` binary.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

pub(crate) mod plant;

/// Copies the directory tree `src` to `dst` (created), files byte for byte.
#[allow(dead_code)] // Not every test binary copies trees.
pub(crate) fn copy_tree(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dst.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), &to).unwrap();
        }
    }
}

/// A private copy of the sample store (`root`), removed when dropped.
#[allow(dead_code)] // Not every test binary uses the sample store.
pub(crate) struct Store {
    _dir: tempfile::TempDir,
    pub(crate) root: PathBuf,
}

/// Copies the bundled sample store into a fresh temp directory.
#[allow(dead_code)]
pub(crate) fn sample_store() -> Store {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    copy_tree(&session_test_support::sample_sessions_dir(), &root);
    Store { _dir: dir, root }
}

/// What one run of the binary gave.
#[allow(dead_code)]
pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) out: String,
    pub(crate) err: String,
}

/// Runs `sessions --root ROOT ARGS…` in a clean environment (UTC, no home, "now" fixed at
/// `now`); a panic on stderr fails the test.
#[allow(dead_code)]
pub(crate) fn run_at(root: &Path, now: &str, args: &[&str]) -> Run {
    let o = Command::new(env!("CARGO_BIN_EXE_sessions"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", "/nonexistent-home")
        .env("TZ", "UTC")
        .env("SESSIONS_NOW", now)
        .arg("--root")
        .arg(root)
        .args(args)
        .output()
        .unwrap();
    let r = Run {
        code: o.status.code().unwrap_or(-1),
        out: String::from_utf8(o.stdout).unwrap(),
        err: String::from_utf8(o.stderr).unwrap(),
    };
    assert!(!r.err.contains("panicked"), "panic: {}", r.err);
    r
}

/// Runs `sessions --root ROOT ARGS…` in-process (`session_cli::run_with`, UTC, no home):
/// exit code, stdout, stderr.
#[allow(dead_code)]
pub(crate) fn in_process(root: &Path, args: &[&str]) -> (i32, String, String) {
    use session_cli::{Env, Terminal, run_with};
    let env = Env::from_pairs([
        ("HOME".to_owned(), "/nonexistent-home".to_owned()),
        ("TZ".to_owned(), "UTC".to_owned()),
    ]);
    let mut argv: Vec<std::ffi::OsString> = vec!["sessions".into(), "--root".into(), root.into()];
    argv.extend(args.iter().map(Into::into));
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = run_with(argv, &mut out, &mut err, &env, Terminal::default());
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}
