//! The `sessions` binary over run trees that hold more or less than one file per run: two
//! files with one run id, files that are no runs, archives the reference cannot read and
//! their restoring, temporary files of a killed archive, and verify's byte count.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::{Run, sample_store};

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

const NOW: &str = "2026-11-30T12:00:00Z";
/// A completed run of the sample store (10 lines).
const RUN: &str = "7a1e0001-0000-4000-8000-000000000101";
const RUN_FILE: &str = "2026/11/24/7a1e0001-0000-4000-8000-000000000101.jsonl";
/// Its session.
const SESSION: &str = "5a1e0001-0000-4000-8000-000000000001";
/// The sample store's one run older than 30 days, and its session.
const OLD_RUN: &str = "7a1e0007-0000-4000-8000-000000000701";
const OLD_FILE: &str = "2026/10/20/7a1e0007-0000-4000-8000-000000000701.jsonl";
const OLD_SESSION: &str = "5a1e0007-0000-4000-8000-000000000007";

fn run_in(root: &Path, args: &[&str]) -> Run {
    common::run_at(root, NOW, args)
}

fn ok(root: &Path, args: &[&str]) -> Run {
    let r = run_in(root, args);
    assert_eq!(r.code, 0, "{args:?}: {}{}", r.out, r.err);
    r
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Every run file under `root` (plain and archived) with its bytes.
fn run_tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for f in session_jsonl::list_run_files(root).unwrap().files {
        let rel = f
            .path
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        out.insert(rel, std::fs::read(&f.path).unwrap());
    }
    out
}

#[test]
fn with_two_files_for_one_run_every_command_uses_the_most_complete_and_says_so() {
    let s = sample_store();
    let root = &s.root;
    let want_show = ok(root, &["show", RUN]).out;
    let want_export = ok(root, &["export", RUN, "--format", "jsonl"]).out;
    let want_replay = ok(root, &["replay", RUN]).out;
    let want_runs = ok(root, &["runs", "--json", "--limit", "100"]).out;
    let want_stats = ok(root, &["stats", "--json"]).out;
    let want_session = ok(root, &["show", SESSION]).out;
    let want_history = ok(root, &["history", SESSION, "--json"]).out;
    // A retried start a day later holds only a header: it is newer, found first by date.
    let complete = std::fs::read(root.join(RUN_FILE)).unwrap();
    let header_end = complete.iter().position(|b| *b == b'\n').unwrap() + 1;
    let twin_rel = format!("2026/11/25/{RUN}.jsonl");
    std::fs::write(root.join(&twin_rel), &complete[..header_end]).unwrap();

    for (args, want) in [
        (&["show", RUN][..], &want_show),
        (&["export", RUN, "--format", "jsonl"], &want_export),
        (&["replay", RUN], &want_replay),
    ] {
        let r = ok(root, args);
        assert_eq!(&r.out, want, "{args:?} used the other file");
        assert_eq!(r.err.lines().count(), 1, "{args:?}: {}", r.err);
        assert!(
            r.err.contains(&format!(
                "run {RUN} is in 2 files; using the most complete, {RUN_FILE} (has its \
                 run.end/run.error, 10 record(s)"
            )),
            "{args:?}: {}",
            r.err
        );
        assert!(
            r.err
                .contains(&format!("over {twin_rel} (no run.end, 1 record(s)")),
            "{}",
            r.err
        );
    }
    // A session's runs: the run once, from the complete file, on a writable store (the run
    // index) and a read-only one (the run files' headers).
    for ro in [false, true] {
        let mut args = vec!["show", SESSION];
        if ro {
            args.insert(0, "--read-only");
        }
        let r = ok(root, &args);
        assert_eq!(r.out, want_session, "read-only: {ro}");
        assert!(r.err.contains(&twin_rel), "read-only: {ro}: {}", r.err);
    }
    assert_eq!(ok(root, &["history", SESSION, "--json"]).out, want_history);
    // Listings: one row, from the complete file, and a warning naming both files.
    let r = ok(root, &["runs", "--json", "--limit", "100"]);
    assert_eq!(r.out, want_runs);
    assert_eq!(
        r.err.trim(),
        format!(
            "sessions: warning: {twin_rel} holds run {RUN} again ({RUN_FILE} is counted: it is \
             the more complete file; the run is counted once; `sessions verify` reports the \
             duplicate)"
        )
    );
    let r = ok(root, &["stats", "--json"]);
    assert_eq!(r.out, want_stats);
    assert!(r.err.contains(&format!("{twin_rel} holds run {RUN} again")));
    // verify names the header-only file as the duplicate, never the conversation.
    let v = run_in(root, &["verify", "--json"]);
    let dups: Vec<(String, String)> = json_lines(&v.out)
        .iter()
        .filter(|f| f["kind"] == "duplicate_run_id")
        .map(|f| {
            (
                f["file"].as_str().unwrap().to_owned(),
                f["message"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(dups.len(), 1, "{}", v.out);
    assert_eq!(dups[0].0, twin_rel);
    assert!(
        dups[0]
            .1
            .contains(&format!("{RUN_FILE} holds it too and is the one counted")),
        "{}",
        dups[0].1
    );
}

#[test]
fn files_that_are_no_runs_are_reported_once_and_never_listed() {
    let s = sample_store();
    let root = &s.root;
    let want_runs = ok(root, &["runs", "--json", "--limit", "100"]).out;
    let want_human = ok(root, &["runs", "--limit", "100"]).out;
    let bad = [
        ("2026/11/29/empty.jsonl", Vec::new(), "empty file (0 bytes)"),
        (
            "2026/11/29/zeros.jsonl",
            vec![0u8; 512],
            "only NUL bytes (512 of 512 bytes)",
        ),
        (
            "2026/11/30/headless.jsonl",
            b"{\"type\":\"run.status\",\"run_id\":\"headless\",\"ts\":\"2026-11-30T10:00:00.000Z\",\"status\":\"running\"}\n".to_vec(),
            "no header record: 1 record(s) without one",
        ),
    ];
    for (rel, bytes, _) in &bad {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }
    // --json: the same rows, then one typed line per file.
    let r = ok(root, &["runs", "--json", "--limit", "100"]);
    assert!(r.out.starts_with(&want_runs), "{}", r.out);
    let extra = json_lines(&r.out[want_runs.len()..]);
    let mut got: Vec<(String, String, String, u64)> = extra
        .iter()
        .map(|d| {
            (
                d["type"].as_str().unwrap().to_owned(),
                d["file"].as_str().unwrap().to_owned(),
                d["message"].as_str().unwrap().to_owned(),
                d["bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    got.sort();
    let mut want: Vec<(String, String, String, u64)> = bad
        .iter()
        .map(|(rel, bytes, msg)| {
            (
                "diagnostic".to_owned(),
                (*rel).to_owned(),
                (*msg).to_owned(),
                bytes.len() as u64,
            )
        })
        .collect();
    want.sort();
    assert_eq!(got, want);
    assert!(extra.iter().all(|d| d["kind"] == "not_a_run"));
    // Text: the same table, one warning per file on stderr, no phantom "crashed" rows.
    let r = ok(root, &["runs", "--limit", "100"]);
    assert_eq!(r.out, want_human);
    for (rel, _, msg) in &bad {
        assert_eq!(
            r.err
                .matches(&format!("{rel}: not a run, not listed: {msg}"))
                .count(),
            1,
            "{}",
            r.err
        );
    }
    assert_eq!(r.err.lines().count(), bad.len(), "{}", r.err);
    // A later page does not report them again.
    let first = json_lines(&ok(root, &["runs", "--json", "--limit", "2"]).out);
    let cursor = first
        .iter()
        .find_map(|l| l["next_cursor"].as_str())
        .unwrap()
        .to_owned();
    let r = ok(
        root,
        &["runs", "--json", "--limit", "2", "--cursor", &cursor],
    );
    assert!(!r.out.contains("\"diagnostic\""), "{}", r.out);
    // stats counts runs only and warns.
    let stats = ok(root, &["stats", "--json"]);
    assert_eq!(stats.err.lines().count(), bad.len(), "{}", stats.err);
}

#[test]
fn verify_counts_every_byte_once_and_archives_by_their_size_on_disk() {
    let s = sample_store();
    let root = &s.root;
    let path = root.join(RUN_FILE);
    // A repaired line (invalid UTF-8 that still parses), a lone surrogate, blank lines and a
    // sealed fragment: each byte counts once.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(b"\n  \n");
    bytes.extend_from_slice(
        b"{\"type\":\"run.status\",\"run_id\":\"7a1e0001-0000-4000-8000-000000000101\",\"ts\":\"2026-11-24T09:13:00.000Z\",\"status\":\"running\",\"message\":\"a\xe2\x82b\"}\n",
    );
    bytes.extend_from_slice(
        b"{\"type\":\"run.status\",\"run_id\":\"7a1e0001-0000-4000-8000-000000000101\",\"ts\":\"2026-11-24T09:13:01.000Z\",\"status\":\"running\",\"message\":\"\\ud83d\"}\n",
    );
    bytes.extend_from_slice(b"{\"type\":\"run.status\",\"run_id\":\"7a1e\n");
    std::fs::write(&path, &bytes).unwrap();
    let sizes = |root: &Path| -> u64 {
        session_jsonl::list_run_files(root)
            .unwrap()
            .files
            .iter()
            .map(|f| std::fs::metadata(&f.path).unwrap().len())
            .sum()
    };
    let v = run_in(root, &["verify", "--json"]);
    let lines = json_lines(&v.out);
    let summary = lines.last().unwrap();
    assert_eq!(summary["bytes"].as_u64(), Some(sizes(root)));
    assert_eq!(summary["content_bytes"], summary["bytes"]);
    let utf8 = lines.iter().find(|f| f["kind"] == "invalid_utf8").unwrap();
    assert!(
        utf8["message"]
            .as_str()
            .unwrap()
            .ends_with("2 byte(s) replaced by 1 U+FFFD"),
        "{utf8}"
    );
    let plain_total = sizes(root);
    // An archive counts its size on disk; what was read decompressed is beside it.
    ok(root, &["archive", "--older-than", "30d"]);
    let v = json_lines(&run_in(root, &["verify", "--json"]).out);
    let summary = v.last().unwrap();
    let on_disk = sizes(root);
    assert!(on_disk < plain_total);
    assert_eq!(summary["bytes"].as_u64(), Some(on_disk));
    assert_eq!(summary["content_bytes"].as_u64(), Some(plain_total));
}

#[cfg(unix)]
fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

#[test]
fn archive_says_what_the_reference_misses_and_unarchive_brings_the_runs_back() {
    let s = sample_store();
    let root = &s.root;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(root.join(OLD_FILE), std::fs::Permissions::from_mode(0o600))
            .unwrap();
    }
    let before = run_tree(root);
    let want_runs = ok(root, &["runs", "--json", "--limit", "100"]).out;
    let want_history = ok(root, &["history", OLD_SESSION, "--json"]).out;

    let r = ok(root, &["archive", "--older-than", "30d"]);
    assert!(
        r.out.contains(
            "note: the reference runtime reads only .jsonl files: 1 archived run(s) are missing \
             from its session history"
        ),
        "{}",
        r.out
    );
    assert!(
        r.out.contains("`sessions unarchive` restores them"),
        "{}",
        r.out
    );
    let zst = root.join(format!("{OLD_FILE}.zst"));
    #[cfg(unix)]
    assert_eq!(mode(&zst), 0o600, "a private run stays private");
    assert!(!root.join(OLD_FILE).exists());

    // Nothing is restored without saying which runs.
    let r = run_in(root, &["unarchive"]);
    assert_eq!(r.code, 2, "{}", r.err);
    let r = run_in(root, &["unarchive", "7a1e9999-0000-4000-8000-000000000000"]);
    assert_eq!(r.code, 3, "{}", r.err);
    // Filters that do not match restore nothing.
    for args in [
        &[
            "unarchive",
            "--session",
            "5a1e0001-0000-4000-8000-000000000001",
        ][..],
        &["unarchive", "--since", "2026-11-01"],
        &["unarchive", "--all", "--until", "2026-10-01"],
    ] {
        let r = ok(root, args);
        assert!(
            r.out.contains("restored 0 run file(s)"),
            "{args:?}: {}",
            r.out
        );
    }
    // A plain run is skipped; a dry run plans and changes nothing.
    let r = ok(root, &["unarchive", RUN, "--json"]);
    let lines = json_lines(&r.out);
    assert_eq!(lines[0]["status"], "skipped");
    assert_eq!(lines[0]["detail"], "not archived");
    let archived = run_tree(root);
    let r = ok(
        root,
        &["unarchive", "--session", OLD_SESSION, "--dry-run", "--json"],
    );
    let lines = json_lines(&r.out);
    assert_eq!(lines[0]["status"], "planned");
    assert_eq!(lines[0]["id"], OLD_RUN);
    assert_eq!(lines.last().unwrap()["type"], "note");
    assert_eq!(run_tree(root), archived);

    // Restored: the same bytes and mode as before archiving, and the reference sees it again.
    let r = ok(
        root,
        &[
            "unarchive",
            "--session",
            OLD_SESSION,
            "--since",
            "2026-10-20",
        ],
    );
    assert!(r.out.contains("restored 1 run file(s)"), "{}", r.out);
    assert!(
        r.out
            .contains("note: the reference runtime reads the 1 restored run(s) again"),
        "{}",
        r.out
    );
    assert_eq!(run_tree(root), before);
    #[cfg(unix)]
    assert_eq!(mode(&root.join(OLD_FILE)), 0o600);
    assert!(!zst.exists());
    assert_eq!(
        ok(root, &["runs", "--json", "--limit", "100"]).out,
        want_runs
    );
    assert_eq!(
        ok(root, &["history", OLD_SESSION, "--json"]).out,
        want_history
    );

    // By id, and --all.
    ok(root, &["archive", "--older-than", "30d"]);
    let r = ok(root, &["unarchive", OLD_RUN, "--json"]);
    assert_eq!(json_lines(&r.out)[0]["status"], "done");
    assert_eq!(run_tree(root), before);
    ok(root, &["archive", "--older-than", "1d"]);
    let archived = run_tree(root)
        .keys()
        .filter(|k| k.ends_with(".zst"))
        .count();
    assert!(archived > 1, "{archived}");
    let r = ok(root, &["unarchive", "--all"]);
    assert!(
        r.out.contains(&format!("restored {archived} run file(s)")),
        "{}",
        r.out
    );
    assert_eq!(run_tree(root), before);
}

#[test]
fn repair_removes_the_temporary_file_of_a_killed_archive_once_nobody_holds_the_run() {
    let s = sample_store();
    let root = &s.root;
    let temp_rel = format!("2026/11/24/.{RUN}.jsonl.zst.tmp-4194000");
    let temp = root.join(&temp_rel);
    std::fs::write(&temp, b"half an archive").unwrap();
    let planned = json_lines(&ok(root, &["repair", "--dry-run", "--json"]).out);
    let action = planned
        .iter()
        .find(|a| a["action"] == "remove_stale_temp")
        .unwrap();
    assert_eq!(action["status"], "planned");
    assert_eq!(action["file"], temp_rel.as_str());
    assert!(temp.exists());
    // A writer holds the run (an archive would hold the same lock): the file may be in use.
    let w = session_jsonl::RunWriter::open_append(
        &root.join(RUN_FILE),
        session_jsonl::WriterOptions::default(),
    )
    .unwrap();
    let r = json_lines(&ok(root, &["repair", "--json"]).out);
    let action = r
        .iter()
        .find(|a| a["action"] == "remove_stale_temp")
        .unwrap();
    assert_eq!(action["status"], "skipped");
    assert!(temp.exists());
    drop(w);
    let r = json_lines(&ok(root, &["repair", "--json"]).out);
    let action = r
        .iter()
        .find(|a| a["action"] == "remove_stale_temp")
        .unwrap();
    assert_eq!(action["status"], "done");
    assert!(!temp.exists());
}
