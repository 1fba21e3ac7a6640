//! `sessions verify` reads each run as a stream (session-replay's `RunChecker`); its output is
//! the one it gave when it read runs whole. Every run of the sample store, of the recorded
//! reference store (`testdata/codelia-runtime`) and of a store of damaged logs (the damaged
//! run logs of session-jsonl's and session-replay's test data) is verified alone, in text and
//! in `--json`, and every store whole; the transcript (exit codes, stdout, stderr) is compared
//! with `test_data/verify/output.expected`, written by the whole-run implementation.
//! `UPDATE_EXPECT=1` rewrites it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

mod common;

use common::in_process as sessions;

/// The run logs under `dir` (any depth, `messages/` left out), sorted.
fn logs(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.is_dir() {
            if path.file_name().unwrap() != "messages" {
                logs(&path, out);
            }
        } else if path.to_string_lossy().ends_with(".jsonl")
            || path.to_string_lossy().ends_with(".jsonl.zst")
        {
            out.push(path);
        }
    }
    out.sort();
}

/// Appends to `transcript` the verification of store `root` whole and of each of its runs
/// alone (by path), in text and `--json`; `root`'s own path reads `<root>`.
fn verify_store(name: &str, root: &Path, transcript: &mut String) {
    let root_text = root.to_str().unwrap();
    let mut record = |what: &str, args: &[&str]| {
        let (code, out, err) = sessions(root, args);
        writeln!(
            transcript,
            "$ [{name}] sessions verify{what} -> exit {code}"
        )
        .unwrap();
        transcript.push_str(&out.replace(root_text, "<root>"));
        for line in err.lines() {
            writeln!(transcript, "stderr: {}", line.replace(root_text, "<root>")).unwrap();
        }
    };
    record("", &["verify"]);
    record(" --json", &["verify", "--json"]);
    let mut runs = Vec::new();
    logs(root, &mut runs);
    for run in &runs {
        let rel = run.strip_prefix(root).unwrap().to_str().unwrap().to_owned();
        let path = run.to_str().unwrap();
        record(&format!(" {rel}"), &["verify", path]);
        record(&format!(" --json {rel}"), &["verify", "--json", path]);
    }
}

#[test]
fn verify_output_of_every_run_is_what_reading_runs_whole_gave() {
    let ws = session_test_support::workspace_root();
    let tmp = tempfile::tempdir().unwrap();
    let mut transcript = String::new();

    let sample = tmp.path().join("sample");
    session_test_support::copy_tree(&session_test_support::sample_sessions_dir(), &sample).unwrap();
    verify_store("sample", &sample, &mut transcript);

    let reference = tmp.path().join("reference");
    session_test_support::copy_tree(&session_test_support::codelia_sessions_dir(), &reference)
        .unwrap();
    verify_store("reference", &reference, &mut transcript);

    // Damaged logs, each in a day directory of its own under its test-data name.
    let damaged = tmp.path().join("damaged");
    let mut sources = Vec::new();
    logs(&ws.join("crates/session-jsonl/test_data"), &mut sources);
    logs(&ws.join("crates/session-replay/test_data"), &mut sources);
    assert!(sources.len() > 30, "{sources:?}");
    for (k, src) in sources.iter().enumerate() {
        let dir = damaged.join(format!("2026/01/{:02}", k % 28 + 1));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(src, dir.join(src.file_name().unwrap())).unwrap();
    }
    verify_store("damaged", &damaged, &mut transcript);

    // The transcript covers problems, notes and every exit code verify gives.
    for needle in [
        "[torn_tail]",
        "[corrupt_line]",
        "[missing_response]",
        "[over_inclusive_snapshot]",
        "[snapshot_divergence]",
        "[run_id_mismatch]",
        "[no_run_end]",
        "-> exit 0",
        "-> exit 1",
    ] {
        assert!(transcript.contains(needle), "no {needle}");
    }
    let expected = Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data/verify/output.expected");
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::create_dir_all(expected.parent().unwrap()).unwrap();
        std::fs::write(&expected, &transcript).unwrap();
    }
    let want = std::fs::read_to_string(&expected).unwrap();
    if transcript != want {
        let first = transcript
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(transcript.lines().count().min(want.lines().count()));
        panic!(
            "verify's output changed from line {} on:\n  got:  {:?}\n  want: {:?}\n\
             (UPDATE_EXPECT=1 rewrites {})",
            first + 1,
            transcript.lines().nth(first),
            want.lines().nth(first),
            expected.display()
        );
    }
}
