//! The reading commands on a shared PostgreSQL store (`--store`, `$SESSIONS_STORE`) against a
//! throwaway cluster (session-pg's test harness): the recorded reference data and the sample
//! store are shipped with `sessions sync`, then every reading command is run on the local
//! store and on the shared one and their output compared. The documented differences: a run
//! row's `file` (a shared store's `host:run_id`), `file_size`/`compressed` (stored bytes),
//! `origin_host` (only a shared store knows it; a HOST column in the table), and a session's
//! `source` (`sync` ships a legacy snapshot as a row: `db`, no `(legacy)` mark).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

#[path = "../../session-pg/tests/common/mod.rs"]
mod pg;

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

macro_rules! cluster {
    () => {
        match pg::shared() {
            Some(c) => c,
            None => return,
        }
    };
}

const NOW: &str = "2026-12-01T12:00:00Z";

struct Out {
    code: i32,
    out: String,
    err: String,
}

/// `sessions ARGS…` in a clean environment (UTC, fixed now) with `store_args` naming the store.
fn sessions(store_args: &[&str], envs: &[(&str, &str)], args: &[&str]) -> Out {
    let o = Command::new(env!("CARGO_BIN_EXE_sessions"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", "/nonexistent-home")
        .env("TZ", "UTC")
        .env("SESSIONS_NOW", NOW)
        .envs(envs.iter().copied())
        .args(store_args)
        .args(args)
        .output()
        .unwrap();
    let r = Out {
        code: o.status.code().unwrap_or(-1),
        out: String::from_utf8_lossy(&o.stdout).into_owned(),
        err: String::from_utf8_lossy(&o.stderr).into_owned(),
    };
    assert!(!r.err.contains("panicked"), "panic: {}", r.err);
    r
}

/// A local store copied from `src` and shipped to a fresh database; (tempdir, root, conn).
/// `sync` ships complete lines only (a torn tail waits for its end), so torn tails are cut
/// from the copy first: both stores then hold the same bytes.
fn shipped(cluster: &pg::Cluster, src: &Path) -> (tempfile::TempDir, PathBuf, String) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("sessions");
    common::copy_tree(src, &root);
    for f in session_jsonl::list_run_files(&root).unwrap().files {
        if f.path.extension().is_some_and(|e| e == "jsonl") {
            let bytes = std::fs::read(&f.path).unwrap();
            let end = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
            std::fs::write(&f.path, &bytes[..end]).unwrap();
        }
    }
    let conn = cluster.fresh_db();
    let root_s = root.to_str().unwrap().to_owned();
    let r = sessions(&["--root", &root_s], &[], &["sync", "--to", &conn]);
    assert_eq!(r.code, 0, "sync: {}", r.err);
    (tmp, root, conn)
}

fn this_host() -> String {
    session_storage::HolderInfo::this_process("").host
}

/// A `--json` line with the fields that differ by design between the stores taken out; the
/// shared store's `origin_host` is checked here.
fn comparable(line: &str, shared: bool) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
    // A shared store keeps every session as rows: `sync` ships a legacy snapshot as one.
    if let Some(o) = v.as_object_mut()
        && o.get("type").and_then(|t| t.as_str()) == Some("session")
    {
        let source = o.remove("source");
        if shared {
            assert_eq!(source, Some(serde_json::Value::from("db")), "{line}");
        }
    }
    if let Some(o) = v.as_object_mut()
        && o.get("type").and_then(|t| t.as_str()) == Some("run")
    {
        let host = o.remove("origin_host");
        if shared {
            assert_eq!(host, Some(serde_json::Value::String(this_host())), "{line}");
        } else {
            assert_eq!(host, Some(serde_json::Value::Null), "{line}");
        }
        for k in ["file", "file_size", "compressed"] {
            o.remove(k);
        }
    }
    v
}

fn json_lines(text: &str, shared: bool) -> Vec<serde_json::Value> {
    text.lines().map(|l| comparable(l, shared)).collect()
}

/// `runs --json` ids of the local store.
fn run_ids(local: &[&str]) -> Vec<String> {
    let r = sessions(local, &[], &["runs", "--json", "--limit", "1000"]);
    assert_eq!(r.code, 0, "{}", r.err);
    r.out
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (v["type"] == "run").then(|| v["run_id"].as_str().unwrap().to_owned())
        })
        .collect()
}

fn session_ids(local: &[&str]) -> Vec<String> {
    let r = sessions(local, &[], &["runs", "--json", "--limit", "1000"]);
    let mut ids: Vec<String> = r
        .out
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["session_id"].as_str().map(str::to_owned)
        })
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

/// Stdout and exit code of `args` are the same on both stores.
fn same(local: &[&str], shared: &[&str], args: &[&str]) {
    let a = sessions(local, &[], args);
    let b = sessions(shared, &[], args);
    assert_eq!(
        (a.code, &a.out),
        (b.code, &b.out),
        "{args:?}\nlocal stderr: {}\nshared stderr: {}",
        a.err,
        b.err
    );
}

/// The same `--json` lines, but for the documented differences.
fn same_json(local: &[&str], shared: &[&str], args: &[&str]) {
    let a = sessions(local, &[], args);
    let b = sessions(shared, &[], args);
    assert_eq!(a.code, b.code, "{args:?}: {} / {}", a.err, b.err);
    let (x, y) = (json_lines(&a.out, false), json_lines(&b.out, true));
    assert_eq!(x.len(), y.len(), "{args:?}");
    for (x, y) in x.iter().zip(&y) {
        if let (Some(xo), Some(yo)) = (x.as_object(), y.as_object()) {
            let differ: Vec<String> = xo
                .keys()
                .chain(yo.keys())
                .filter(|k| xo.get(*k) != yo.get(*k))
                .map(|k| format!("{k}: {:?} / {:?}", xo.get(k), yo.get(k)))
                .collect();
            assert!(differ.is_empty(), "{args:?}: {differ:?}");
        }
        assert_eq!(x, y, "{args:?}");
    }
}

/// The number of sessions `sessions --all --json` lists.
fn session_count(store: &[&str]) -> usize {
    sessions(store, &[], &["sessions", "--all", "--json"])
        .out
        .lines()
        .count()
}

/// Export in `format` to stdout (`verify`: `verify ID --json`), with the `file` names of the
/// stores taken out.
fn same_export(local: &[&str], shared: &[&str], id: &str, format: &str) {
    let export = ["export", id, "--format", format];
    let verify = ["verify", id, "--json"];
    let args: &[&str] = if format == "verify" { &verify } else { &export };
    let a = sessions(local, &[], args);
    let b = sessions(shared, &[], args);
    assert_eq!(a.code, b.code, "{args:?}: {} / {}", a.err, b.err);
    let file = regex_lite_file(&a.out);
    let b_file = regex_lite_file(&b.out);
    assert_eq!(file, b_file, "{args:?}");
}

/// Output with every `"file":"…"` value blanked (the one field naming where a run is kept).
fn regex_lite_file(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("\"file\":\"") {
        out.push_str(&rest[..i + 8]);
        rest = &rest[i + 8..];
        let end = rest.find('"').unwrap_or(rest.len());
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

fn compare_stores(src: &Path) {
    let cluster = cluster!();
    let (_tmp, root, conn) = shipped(cluster, src);
    let root_s = root.to_str().unwrap().to_owned();
    let local = ["--root", root_s.as_str()];
    let shared = ["--store", conn.as_str()];
    let runs = run_ids(&local);
    assert!(!runs.is_empty());

    // The listing: the same rows, each naming the host it came from on the shared store.
    same_json(&local, &shared, &["runs", "--json", "--limit", "1000"]);
    same_json(
        &local,
        &shared,
        &["runs", "--json", "--outcome", "completed"],
    );
    same_json(&local, &shared, &["runs", "--json", "--outcome", "crashed"]);
    same_json(
        &local,
        &shared,
        &["runs", "--json", "--since", "2026-01-01"],
    );
    // Piped tables: the shared store's rows end with the HOST column.
    let a = sessions(&local, &[], &["runs", "--limit", "1000"]);
    let b = sessions(&shared, &[], &["runs", "--limit", "1000"]);
    let strip_host: Vec<String> = b
        .out
        .lines()
        .map(|l| {
            let (rest, host) = l.rsplit_once('\t').unwrap();
            assert_eq!(host, this_host());
            rest.to_owned()
        })
        .collect();
    assert_eq!(a.out.lines().collect::<Vec<_>>(), strip_host);

    // Keyset paging through the catalogue's cursor lists every run once, in order.
    let mut paged = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut args = vec!["runs", "--json", "--limit", "2"];
        if let Some(c) = &cursor {
            args.extend(["--cursor", c.as_str()]);
        }
        let r = sessions(&shared, &[], &args);
        assert_eq!(r.code, 0, "{}", r.err);
        cursor = None;
        for l in r.out.lines() {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            match v["type"].as_str() {
                Some("run") => paged.push(v["run_id"].as_str().unwrap().to_owned()),
                Some("cursor") => cursor = Some(v["next_cursor"].as_str().unwrap().to_owned()),
                other => panic!("{other:?}"),
            }
        }
        if cursor.is_none() {
            break;
        }
    }
    assert_eq!(paged, runs);

    same_json(&local, &shared, &["sessions", "--all", "--json"]);
    for by in ["day", "week", "month", "model", "session"] {
        same(&local, &shared, &["stats", "--by", by, "--json"]);
    }
    same(&local, &shared, &["stats", "--by", "model"]);
    same(
        &local,
        &shared,
        &["stats", "--since", "2026-11-25", "--json"],
    );
    let a = sessions(&local, &[], &["sessions", "--all"]);
    let b = sessions(&shared, &[], &["sessions", "--all"]);
    assert_eq!(a.out.replace("(legacy) ", ""), b.out);
    // The shared store checks every run and every session; a run checks the same locally.
    let r = sessions(&shared, &[], &["verify", "--json"]);
    assert!(r.code == 0 || r.code == 1, "{}", r.err);
    let summary: serde_json::Value = serde_json::from_str(r.out.lines().last().unwrap()).unwrap();
    assert_eq!(summary["run_files"], runs.len());
    assert_eq!(summary["sessions"], session_count(&local));
    // A unique prefix, and a transcript from a record on.
    same(&local, &shared, &["show", &runs[0][..8]]);
    same(&local, &shared, &["show", &runs[0], "--at", "0"]);
    // Every run is shown, copied as stored and verified on both stores; the other renderers
    // (the same code over the same reader) on every third run, so that the test stays short.
    // Three at a time: each comparison is two processes and a few round trips.
    let indexed: Vec<(usize, &String)> = runs.iter().enumerate().collect();
    std::thread::scope(|scope| {
        for chunk in indexed.chunks(indexed.len().div_ceil(3)) {
            scope.spawn(move || {
                for (i, id) in chunk {
                    same(&local, &shared, &["show", id]);
                    same(&local, &shared, &["show", id, "--raw"]);
                    same_export(&local, &shared, id, "verify");
                    if i % 3 == 0 {
                        same(&local, &shared, &["tail", id]);
                        same(&local, &shared, &["replay", id]);
                        for format in ["md", "jsonl"] {
                            same_export(&local, &shared, id, format);
                        }
                    }
                }
            });
        }
    });
    for (i, id) in session_ids(&local).iter().enumerate() {
        same(&local, &shared, &["history", id, "--json"]);
        same(&local, &shared, &["show", id]);
        same_export(&local, &shared, id, "md");
        if i % 3 == 0 {
            same(&local, &shared, &["history", id]);
            for format in ["json", "html"] {
                same_export(&local, &shared, id, format);
            }
        }
    }
}

#[test]
fn the_reference_data_reads_the_same_from_the_shared_store() {
    compare_stores(&session_test_support::codelia_sessions_dir());
}

#[test]
fn the_sample_store_reads_the_same_from_the_shared_store() {
    compare_stores(&session_test_support::sample_sessions_dir());
}

#[test]
fn the_store_variable_names_the_shared_store_and_where_redacts_its_password() {
    let cluster = cluster!();
    let (_tmp, _root, conn) = shipped(cluster, &session_test_support::sample_sessions_dir());
    // A password the server does not need still never shows.
    let with_password = format!("{conn} password=s3cret-pw");
    let r = sessions(&[], &[("SESSIONS_STORE", &with_password)], &["where"]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(!r.out.contains("s3cret-pw"), "{}", r.out);
    assert!(r.out.contains("password=***"), "{}", r.out);
    assert!(
        r.out
            .contains("chosen: a shared PostgreSQL store, from $SESSIONS_STORE"),
        "{}",
        r.out
    );
    let r = sessions(&["--store", &with_password], &[], &["where", "--json"]);
    let v: serde_json::Value = serde_json::from_str(r.out.trim()).unwrap();
    assert_eq!(v["store"]["source"], "flag");
    assert!(!r.out.contains("s3cret-pw"));
    // The variable is used by the reading commands; --root wins over it.
    let a = sessions(&[], &[("SESSIONS_STORE", &conn)], &["runs", "--json"]);
    assert_eq!(a.code, 0, "{}", a.err);
    assert!(
        a.out
            .contains(&format!("\"origin_host\":\"{}\"", this_host())),
        "{}",
        a.out
    );
    let sample = session_test_support::sample_sessions_dir();
    let b = sessions(
        &["--root", sample.to_str().unwrap(), "--read-only"],
        &[("SESSIONS_STORE", &conn)],
        &["runs", "--json"],
    );
    assert_eq!(b.code, 0, "{}", b.err);
    assert!(b.out.contains("\"origin_host\":null"), "{}", b.out);
}

#[test]
fn export_to_a_file_from_the_shared_store_needs_no_local_store() {
    let cluster = cluster!();
    let (_tmp, _root, conn) = shipped(cluster, &session_test_support::sample_sessions_dir());
    let out_dir = tempfile::tempdir().unwrap();
    let file = out_dir.path().join("run.md");
    // No HOME: no local root can be resolved, and none is needed.
    let o = Command::new(env!("CARGO_BIN_EXE_sessions"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("TZ", "UTC")
        .env("SESSIONS_STORE", &conn)
        .args([
            "export",
            "7a1e0001-0000-4000-8000-000000000101",
            "--format",
            "md",
            "-o",
        ])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let md = std::fs::read_to_string(&file).unwrap();
    assert!(
        md.contains("What does this project do? One sentence, please."),
        "{md}"
    );
}

#[test]
fn commands_that_need_a_local_store_refuse_in_one_line() {
    let cluster = cluster!();
    let conn = cluster.fresh_db();
    for args in [
        vec!["repair", "--dry-run"],
        vec!["archive", "--older-than", "90d"],
        vec!["pin", "abcd1234"],
        vec!["reindex"],
        vec!["unpin", "abcd1234"],
        vec!["sync", "--to", "postgresql:///x"],
    ] {
        let r = sessions(&["--store", &conn], &[], &args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.err);
        assert_eq!(r.err.lines().count(), 1, "{}", r.err);
        let expected = if args[0] == "sync" {
            "sessions: `sessions sync` ships a local store to a shared one".to_owned()
        } else {
            format!(
                "sessions: `sessions {}` works on a local store only, and the store is the shared store host=",
                args[0]
            )
        };
        assert!(r.err.starts_with(&expected), "{}", r.err);
    }
    // A database without a session store is reported, not created.
    let r = sessions(&["--store", &conn], &[], &["runs"]);
    assert_eq!(r.code, 4, "{}", r.err);
    assert!(r.err.contains("sessions sync --to STORE"), "{}", r.err);
}

#[test]
fn ids_resolve_on_the_shared_store_as_locally() {
    let cluster = cluster!();
    let (_tmp, _root, conn) = shipped(cluster, &session_test_support::sample_sessions_dir());
    let shared = ["--store", conn.as_str()];
    // An unknown id, a too-short prefix and a title.
    let r = sessions(&shared, &[], &["show", "ffff0000-nothing"]);
    assert_eq!(r.code, 3, "{}", r.err);
    let r = sessions(&shared, &[], &["show", "7a1"]);
    assert_eq!(r.code, 3, "{}", r.err);
    assert!(r.err.contains("at least 4 characters"), "{}", r.err);
    let r = sessions(&shared, &[], &["show", "@my title"]);
    assert_eq!(r.code, 2, "{}", r.err);
    assert!(r.err.contains("titles"), "{}", r.err);
    // A prefix of several runs lists them.
    let r = sessions(&shared, &[], &["show", "7a1e"]);
    assert_eq!(r.code, 2, "{}", r.err);
    assert!(r.err.contains("id prefix `7a1e` is ambiguous"), "{}", r.err);
    assert!(r.err.contains("\n  run     7a1e0001-"), "{}", r.err);
}

#[test]
fn tail_follow_on_the_shared_store_sees_a_line_appended_through_the_catalogue() {
    use session_storage::RunCatalogue;
    use std::io::BufRead;
    let cluster = cluster!();
    let (_tmp, _root, conn) = shipped(cluster, &session_test_support::sample_sessions_dir());
    let run = "7a1e0006-0000-4000-8000-000000000601";
    let mut child = Command::new(env!("CARGO_BIN_EXE_sessions"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", "/nonexistent-home")
        .env("TZ", "UTC")
        .args([
            "--store",
            &conn,
            "tail",
            "-f",
            "-n",
            "2",
            run,
            "--timeout",
            "60",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    // The last two records as stored now.
    let first: Vec<String> = (0..2).map(|_| lines.next().unwrap().unwrap()).collect();
    assert!(first[1].contains("tool_call shell"), "{first:?}");
    // A writer elsewhere appends a line and then the run's end.
    let pg = session_pg::PgBackend::open(&conn).unwrap();
    let len = pg.stat_run(run).unwrap().unwrap().len;
    let more = format!(
        "{{\"type\":\"run.status\",\"run_id\":\"{run}\",\"ts\":\"2026-11-29T21:06:00.000Z\",\"status\":\"completed\"}}\n\
         {{\"type\":\"run.end\",\"run_id\":\"{run}\",\"ts\":\"2026-11-29T21:06:00.100Z\",\"outcome\":\"completed\"}}\n"
    );
    pg.append_lines(run, len, more.as_bytes()).unwrap();
    let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert_eq!(rest.len(), 2, "{rest:?}");
    assert!(rest[0].contains("run.status"), "{rest:?}");
    assert!(
        rest[1].contains("run.end") && rest[1].contains("completed"),
        "{rest:?}"
    );
}

#[test]
fn gc_on_the_shared_store_plans_what_the_local_gc_plans_then_removes_and_audits() {
    let cluster = cluster!();
    let (_tmp, root, conn) = shipped(cluster, &session_test_support::sample_sessions_dir());
    let root_s = root.to_str().unwrap().to_owned();
    let later = [("SESSIONS_NOW", "2027-06-01T00:00:00Z")];
    let ids = |out: &str, action: &str| -> Vec<String> {
        let mut v: Vec<String> = out
            .lines()
            .filter_map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                (v["action"] == action).then(|| v["id"].as_str().unwrap().to_owned())
            })
            .collect();
        v.sort();
        v
    };
    let args = ["gc", "--older-than", "30d", "--dry-run", "--json"];
    let local = sessions(&["--root", &root_s], &later, &args);
    assert_eq!(local.code, 0, "{}", local.err);
    let shared = sessions(&["--store", &conn], &later, &args);
    assert_eq!(shared.code, 0, "{}", shared.err);
    let planned = ids(&shared.out, "remove_run");
    assert_eq!(planned, ids(&local.out, "move_run"));
    assert_eq!(planned.len(), run_ids(&["--root", &root_s]).len());
    assert!(shared.out.contains("\"status\":\"planned\""));
    // The dry run removed nothing.
    let before = sessions(&["--store", &conn], &[], &["runs", "--json"]);
    assert_eq!(before.out.lines().count(), planned.len());
    // Human output: one line per item, then the summary.
    let human = sessions(
        &["--store", &conn],
        &later,
        &["gc", "--older-than", "30d", "--dry-run"],
    );
    assert!(
        human
            .out
            .lines()
            .last()
            .unwrap()
            .starts_with(&format!("would remove {} run(s) (", planned.len())),
        "{}",
        human.out
    );
    // For real: gone from the listing, recorded in gc_audit.
    let done = sessions(&["--store", &conn], &later, &["gc", "--older-than", "30d"]);
    assert_eq!(done.code, 0, "{}", done.err);
    assert!(
        done.out.contains("recorded in the store's gc_audit table"),
        "{}",
        done.out
    );
    let after = sessions(&["--store", &conn], &[], &["runs", "--json"]);
    assert_eq!(after.out, "");
    let pg = session_pg::PgBackend::open(&conn).unwrap();
    let audit = pg.gc_audit(1000).unwrap();
    let mut audited: Vec<String> = audit
        .iter()
        .filter(|a| a.kind == "run")
        .map(|a| a.id.clone())
        .collect();
    audited.sort();
    assert_eq!(audited, planned);
    // Options a shared store has no use for are refused.
    let r = sessions(&["--store", &conn], &[], &["gc", "--empty-trash"]);
    assert_eq!(r.code, 2, "{}", r.err);
}

/// `(run id, session id, byte offset, kind)` of each `search_hit` row, sorted.
fn search_hits(store: &[&str], args: &[&str]) -> Vec<(String, String, u64, String)> {
    let mut all = vec!["search", "--json", "--limit", "1000"];
    all.extend_from_slice(args);
    let r = sessions(store, &[], &all);
    assert_eq!(r.code, 0, "{all:?}: {}", r.err);
    let mut hits: Vec<_> = r
        .out
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["type"] == "search_hit")
        .map(|v| {
            let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
            (
                s("run_id"),
                s("session_id"),
                v["byte_offset"].as_u64().unwrap(),
                s("kind"),
            )
        })
        .collect();
    hits.sort();
    hits
}

#[test]
fn search_on_the_shared_store_finds_what_the_local_index_finds() {
    let cluster = cluster!();
    let (_tmp, root, conn) = shipped(cluster, &session_test_support::codelia_sessions_dir());
    let root_s = root.to_str().unwrap().to_owned();
    let local = ["--root", root_s.as_str()];
    let shared = ["--store", conn.as_str()];
    for args in [
        vec!["the"],
        vec!["file"],
        vec!["hello"],
        vec!["README"],
        vec!["version"],
        vec!["package"],
        vec!["the", "--kind", "user"],
        vec!["the", "--kind", "tool-output"],
        vec!["the", "--since", "2026-01-01"],
        vec!["ux-capac"],
        // The reference store's session that had only a legacy snapshot: `sync` loads it
        // (which migrates it) and ships its messages; both stores find them.
        vec!["blue", "square"],
        vec!["screenshot"],
    ] {
        let l = search_hits(&local, &args);
        let p = search_hits(&shared, &args);
        assert_eq!(l, p, "search {args:?}");
    }
    assert_eq!(search_hits(&local, &["the"]).len(), 25);
    assert_eq!(search_hits(&local, &["file"]).len(), 14);
    assert_eq!(search_hits(&local, &["blue", "square"]).len(), 1);
    // Human output: the hits under their run headings.
    let r = sessions(&shared, &[], &["search", "hello"]);
    assert_eq!(r.code, 0, "{}", r.err);
    assert!(r.out.contains("hit(s) in"), "{}", r.out);
    // Native syntax errors are usage errors on both stores.
    let r = sessions(&shared, &[], &["search", "--fts", "a & (("]);
    assert_eq!(r.code, 2, "{}", r.err);
}
