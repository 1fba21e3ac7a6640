//! The `sessions` binary in a real pseudo-terminal, through `script(1)` (util-linux; on a
//! system without it the checks say so and pass): the terminal's own size (80×24, no
//! `COLUMNS`) lays tables out, and long output goes to the pager (a fake one that records what
//! it gets) while listings do not.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// The one line saying that the checks were skipped.
#![allow(clippy::print_stderr)]
#![cfg(unix)]

mod common;
use common::copy_tree;

use std::path::Path;
use std::process::Command;

use unicode_width::UnicodeWidthStr;

/// Whether `script` from util-linux can be run.
fn have_script() -> bool {
    let ok = Command::new("script")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("script(1) is not installed: the pseudo-terminal checks are skipped");
    }
    ok
}

/// Single-quoted for `sh`.
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// Runs `sessions --root ROOT ARGS` in an 80×24 pseudo-terminal with `vars` set and returns
/// what the terminal showed (CR LF as LF, colours removed).
fn in_pty(root: &Path, args: &[&str], vars: &[(&str, &str)]) -> String {
    let mut line = String::from("stty cols 80 rows 24; exec ");
    line.push_str(&quote(env!("CARGO_BIN_EXE_sessions")));
    line.push_str(" --root ");
    line.push_str(&quote(&root.display().to_string()));
    for a in args {
        line.push(' ');
        line.push_str(&quote(a));
    }
    let out = Command::new("script")
        .args(["-q", "-e", "-c", &line, "/dev/null"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", "/nonexistent-home")
        .env("TERM", "xterm-256color")
        .env("TZ", "UTC")
        .env("SESSIONS_NOW", "2026-11-30T12:00:00Z")
        .envs(vars.iter().copied())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{line}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap().replace("\r\n", "\n");
    strip_colours(&text)
}

fn strip_colours(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("\u{1b}[") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let end = after.find('m').map_or(after.len(), |i| i + 1);
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

#[test]
fn tables_fit_an_80_column_terminal_and_long_output_is_paged() {
    if !have_script() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    copy_tree(&session_test_support::sample_sessions_dir(), &root);
    let got = dir.path().join("paged.txt");
    let pager = format!("cat > {}", quote(&got.display().to_string()));
    let vars = [("SESSIONS_PAGER", pager.as_str())];

    // The listing is laid out for the terminal's 80 columns, in colour, and not paged.
    let shown = in_pty(&root, &["runs"], &vars);
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(lines.len(), 11, "{shown}");
    assert!(lines[0].starts_with("STARTED"), "{shown}");
    for l in &lines {
        assert!(l.width() <= 80, "{l:?} is {} columns wide", l.width());
    }
    assert!(
        shown.contains('…'),
        "nothing was clipped at 80 columns: {shown}"
    );
    assert!(!got.exists(), "a listing was paged");

    // A transcript goes to the pager, coloured; the terminal itself shows nothing of it.
    let shown = in_pty(
        &root,
        &["show", "7a1e0001-0000-4000-8000-000000000101"],
        &vars,
    );
    let paged = std::fs::read_to_string(&got).unwrap();
    assert!(paged.contains("What does this project do?"), "{paged}");
    assert!(paged.contains('\u{1b}'), "no colour reached the pager");
    assert!(!shown.contains("What does this project do?"), "{shown}");

    // Ctrl-C while the pager runs is the pager's: `sessions` keeps writing until the reader
    // is done (here the pager itself sends SIGINT to `sessions` before reading).
    std::fs::remove_file(&got).unwrap();
    let interrupting = format!("kill -INT $PPID; sleep 0.2; {pager}");
    in_pty(
        &root,
        &["show", "5a1e0001-0000-4000-8000-000000000001"],
        &[("SESSIONS_PAGER", &interrupting)],
    );
    let paged = std::fs::read_to_string(&got).unwrap();
    assert!(paged.contains("Japanese release notes"), "{paged}");

    // --no-pager: straight to the terminal.
    std::fs::remove_file(&got).unwrap();
    let shown = in_pty(
        &root,
        &["show", "7a1e0001-0000-4000-8000-000000000101", "--no-pager"],
        &vars,
    );
    assert!(shown.contains("What does this project do?"), "{shown}");
    assert!(!got.exists());

    // Help is wrapped to the terminal and paged.
    in_pty(&root, &["runs", "--help"], &vars);
    let help = std::fs::read_to_string(&got).unwrap();
    let help = strip_colours(&help);
    assert!(help.contains("Global options:"), "{help}");
    for l in help.lines() {
        assert!(l.width() <= 80, "{l:?}");
    }
}
