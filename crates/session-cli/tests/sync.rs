//! `sessions sync --to <store>` against a throwaway PostgreSQL cluster (session-pg's test
//! harness): exact shipping, watermarks, torn tails, archives, a different file under the same
//! id, `--verify`, sessions by generation, `--follow`, kills at random points and two syncs
//! racing.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

#[path = "../../session-pg/tests/common/mod.rs"]
mod pg;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use session_pg::{PgBackend, PgError};
use session_storage::{Extent, RunCatalogue, SessionStore};

macro_rules! cluster {
    () => {
        match pg::shared() {
            Some(c) => c,
            None => return,
        }
    };
}

fn sessions(root: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sessions"))
        .arg("--root")
        .arg(root)
        .args(args)
        .env_remove("SESSIONS_STORE")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The recorded reference store, copied.
fn reference_store() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("sessions");
    session_test_support::copy_tree(&session_test_support::codelia_sessions_dir(), &root).unwrap();
    (tmp, root)
}

/// Run files under `root`: (run id, path).
fn run_files(root: &Path) -> Vec<(String, PathBuf)> {
    session_jsonl::list_run_files(root)
        .unwrap()
        .files
        .into_iter()
        .map(|f| (f.run_id, f.path))
        .collect()
}

fn complete(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    &bytes[..end]
}

fn decompressed(path: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut session_jsonl::open_run_file(path).unwrap(), &mut out).unwrap();
    out
}

fn assert_shipped(root: &Path, pg: &PgBackend) {
    for (id, path) in run_files(root) {
        let local = decompressed(&path);
        assert_eq!(
            pg.read_all(&id, Extent::Committed).unwrap(),
            complete(&local),
            "run {id} differs"
        );
    }
}

fn field(out: &str, what: &str) -> u64 {
    // "<n> <what>" in the summary line.
    let words: Vec<&str> = out.split_whitespace().collect();
    words
        .windows(2)
        .find(|w| w[1].trim_start_matches('(') == what || w[1] == what)
        .and_then(|w| w[0].trim_start_matches('(').parse().ok())
        .unwrap_or_else(|| panic!("no {what:?} in {out:?}"))
}

#[test]
fn sync_ships_the_reference_store_exactly_once_and_skips_what_did_not_change() {
    let c = cluster!();
    let (_tmp, root) = reference_store();
    // The cluster trusts local connections; the password is there to be kept out of sight.
    let conn = format!("{} password=hunter2", c.fresh_db());
    let (code, out, err) = sessions(&root, &["sync", "--to", &conn]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!format!("{out}{err}").contains("hunter2"), "{out}{err}");
    assert!(out.contains("password=***"), "{out}");
    let pg = PgBackend::open(&conn).unwrap();
    assert_shipped(&root, &pg);
    let runs = run_files(&root).len() as u64;
    assert_eq!(field(&out, "runs"), runs, "{out}");
    let total: u64 = run_files(&root)
        .iter()
        .map(|(_, p)| complete(&decompressed(p)).len() as u64)
        .sum();
    assert_eq!(field(&out, "bytes"), total, "every byte once: {out}");
    assert!(field(&out, "sessions") > 0, "{out}");
    for s in pg
        .list_sessions(&session_storage::SessionListQuery::default())
        .unwrap()
        .sessions
    {
        assert!(pg.load_session(&s.session_id).unwrap().is_some());
    }
    // Nothing new: nothing shipped, every run skipped on its watermark.
    let (code, out, _) = sessions(&root, &["sync", "--to", &conn]);
    assert_eq!(code, 0);
    assert!(
        out.starts_with("0 runs shipped (0 bytes in 0 transactions)"),
        "{out}"
    );
    assert!(out.contains(&format!("{runs} unchanged")), "{out}");
    assert!(out.contains("0 sessions saved"), "{out}");
    assert!(root.join("sync-state.json").is_file());
    // --verify compares every line and finds nothing.
    let (code, out, err) = sessions(&root, &["sync", "--to", &conn, "--verify"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("{runs} runs verified")), "{out}");
}

const HEADER: &str = r#"{"type":"header","schema_version":1,"run_id":"r-torn","session_id":"s1","started_at":"2026-02-03T12:00:00.000Z"}"#;

fn status(i: u32) -> String {
    format!(
        r#"{{"type":"run.status","run_id":"r-torn","ts":"2026-02-03T12:00:{:02}.000Z","status":"running","message":"step {i}"}}"#,
        i % 60
    )
}

/// A store with one run file (no state.db) whose content is `text`.
fn one_run_store(text: &[u8]) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("sessions");
    let dir = root.join("2026/02/03");
    fs::create_dir_all(&dir).unwrap();
    let file = dir.join("r-torn.jsonl");
    fs::write(&file, text).unwrap();
    (tmp, root, file)
}

#[test]
fn torn_tails_wait_archives_ship_their_content_and_another_file_is_refused() {
    let c = cluster!();
    let conn = c.fresh_db();
    let text = format!("{HEADER}\n{}\n{{\"type\":\"run.st", status(1));
    let (_tmp, root, file) = one_run_store(text.as_bytes());
    let (code, out, err) = sessions(&root, &["sync", "--to", &conn]);
    assert_eq!(code, 0, "{out}{err}");
    let pg = PgBackend::open(&conn).unwrap();
    let stored = pg.read_all("r-torn", Extent::Committed).unwrap();
    assert_eq!(
        stored,
        format!("{HEADER}\n{}\n", status(1)).as_bytes(),
        "the torn tail waited"
    );
    // The writer finishes its line: only it is shipped.
    let mut f = fs::OpenOptions::new().append(true).open(&file).unwrap();
    f.write_all(b"atus\",\"run_id\":\"r-torn\",\"status\":\"running\"}\n")
        .unwrap();
    drop(f);
    let (code, out, _) = sessions(&root, &["sync", "--to", &conn]);
    assert_eq!(code, 0);
    let finished = fs::read(&file).unwrap().len() - stored.len();
    assert_eq!(
        field(&out, "bytes"),
        finished as u64,
        "only the finished line: {out}"
    );
    assert_eq!(
        pg.read_all("r-torn", Extent::Committed).unwrap(),
        fs::read(&file).unwrap()
    );
    // Archived: its decompressed content is what is compared; nothing to ship, no problem.
    let archived = session_jsonl::compress_run(&file).unwrap();
    let (code, out, err) = sessions(&root, &["sync", "--to", &conn, "--verify"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("0 runs shipped"), "{out}");
    // The watermark follows the file to its new name; the old name's is gone.
    let state: serde_json::Value =
        serde_json::from_slice(&fs::read(root.join("sync-state.json")).unwrap()).unwrap();
    let marks: Vec<String> = state["stores"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|s| s["runs"].as_object().unwrap().keys().cloned())
        .collect();
    assert_eq!(marks, vec!["2026/02/03/r-torn.jsonl.zst".to_owned()]);
    // A fresh store gets the archive's decompressed bytes.
    let conn2 = c.fresh_db();
    let (code, _, _) = sessions(&root, &["sync", "--to", &conn2]);
    assert_eq!(code, 0);
    let pg2 = PgBackend::open(&conn2).unwrap();
    assert_eq!(
        pg2.read_all("r-torn", Extent::Committed).unwrap(),
        decompressed(&archived)
    );
    // A damaged archive of another run is reported; the others still ship.
    fs::write(root.join("2026/02/03/broken.jsonl.zst"), b"not zstd at all").unwrap();
    let (code, out, err) = sessions(&root, &["sync", "--to", &conn]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("run broken") && err.contains("cannot be read"),
        "{err}"
    );
    fs::remove_file(root.join("2026/02/03/broken.jsonl.zst")).unwrap();
    // Another file under the same id: reported, exit 1, the shared store untouched.
    let before = pg.read_all("r-torn", Extent::Committed).unwrap();
    fs::remove_file(&archived).unwrap();
    fs::write(
        &file,
        format!(
            "{}\n{}\n{}\n",
            HEADER.replace("s1", "s2"),
            status(7),
            status(8)
        ),
    )
    .unwrap();
    let (code, out, err) = sessions(&root, &["sync", "--to", &conn]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("a different file under the same id"), "{err}");
    assert_eq!(pg.read_all("r-torn", Extent::Committed).unwrap(), before);
}

#[test]
fn verify_reports_the_first_divergence() {
    let c = cluster!();
    let conn = c.fresh_db();
    let text = format!("{HEADER}\n{}\n{}\n{}\n", status(1), status(2), status(3));
    let (_tmp, root, _file) = one_run_store(text.as_bytes());
    assert_eq!(sessions(&root, &["sync", "--to", &conn]).0, 0);
    let pg = PgBackend::open(&conn).unwrap();
    pg.with_client(|c| {
        c.execute(
            "UPDATE run_lines SET data = replace(encode(data, 'escape'), 'step 2', 'step X')::bytea \
             WHERE run_key = (SELECT run_key FROM runs WHERE run_id = 'r-torn') AND line_no = 3",
            &[],
        )
        .map(drop)
        .map_err(|e| PgError::Query { op: "test", source: e })
    })
    .unwrap();
    let offset = HEADER.len() + 1 + status(1).len() + 1;
    let (code, out, err) = sessions(&root, &["sync", "--to", &conn, "--verify"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains(&format!("line 3 (byte offset {offset}) differs")),
        "{err}"
    );
}

#[test]
fn sessions_sync_by_generation_and_a_remote_change_is_not_overwritten() {
    let c = cluster!();
    let conn = c.fresh_db();
    let (_tmp, root) = reference_store();
    assert_eq!(sessions(&root, &["sync", "--to", &conn]).0, 0);
    let pg = PgBackend::open(&conn).unwrap();
    let local = session_storage::local::LocalBackend::open(&root).unwrap();
    let first = local
        .list_sessions(&session_storage::SessionListQuery::default())
        .unwrap()
        .sessions[0]
        .session_id
        .clone();
    // A local save: shipped on the next pass, alone.
    let mut loaded = local.load_session(&first).unwrap().unwrap();
    loaded.state.updated_at = session_schema::Timestamp::from_raw("2026-12-01T00:00:00.000Z");
    let msg = session_schema::parse_message(br#"{"role":"user","content":"one more"}"#).unwrap();
    loaded.state.messages.push(msg.value);
    local
        .save_session(
            &loaded.state,
            &session_storage::Expected::Version(loaded.version),
        )
        .unwrap();
    let (code, out, err) = sessions(&root, &["sync", "--to", &conn]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("; 1 sessions saved"), "{out}");
    assert_eq!(
        pg.load_session(&first).unwrap().unwrap().state.messages,
        loaded.state.messages
    );
    // Someone else saves it in the shared store; then it changes here again.
    let remote = pg.load_session(&first).unwrap().unwrap();
    let mut theirs = remote.state.clone();
    theirs.messages.truncate(1);
    pg.save_session(&theirs, &session_storage::Expected::Version(remote.version))
        .unwrap();
    let mine = local.load_session(&first).unwrap().unwrap();
    let mut again = mine.state.clone();
    again.updated_at = session_schema::Timestamp::from_raw("2026-12-02T00:00:00.000Z");
    local
        .save_session(&again, &session_storage::Expected::Version(mine.version))
        .unwrap();
    let (code, out, err) = sessions(&root, &["sync", "--to", &conn]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("not overwritten"), "{err}");
    assert_eq!(
        pg.load_session(&first)
            .unwrap()
            .unwrap()
            .state
            .messages
            .len(),
        1
    );
}

/// Two `sessions sync --to CONN --chunk-bytes CHUNK` of `root` started together; their outputs.
fn two_syncs_at_once(root: &Path, conn: &str, chunk: &str) -> (Output, Output) {
    let spawn = || {
        Command::new(env!("CARGO_BIN_EXE_sessions"))
            .arg("--root")
            .arg(root)
            .args(["sync", "--to", conn, "--chunk-bytes", chunk])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    (a.wait_with_output().unwrap(), b.wait_with_output().unwrap())
}

/// A store of `runs` runs of `lines` lines each.
fn big_store(runs: u32, lines: u32) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("sessions");
    let dir = root.join("2026/02/03");
    fs::create_dir_all(&dir).unwrap();
    for r in 0..runs {
        let id = format!("run-{r:03}");
        let mut text = HEADER.replace("r-torn", &id);
        text.push('\n');
        for i in 0..lines {
            text.push_str(&status(i).replace("r-torn", &id));
            text.push('\n');
        }
        fs::write(dir.join(format!("{id}.jsonl")), text).unwrap();
    }
    (tmp, root)
}

#[test]
fn killed_at_random_points_and_rerun_it_converges_and_two_syncs_never_write_a_byte_twice() {
    let c = cluster!();
    let (_tmp, root) = big_store(6, 40);
    let total: u64 = run_files(&root)
        .iter()
        .map(|(_, p)| fs::metadata(p).unwrap().len())
        .sum();
    let conn = c.fresh_db();
    // Kill a sync of small transactions at pseudo-random moments, several times.
    let mut seed = 0x2545_f491_u64;
    let rounds: u32 = std::env::var("SESSION_PG_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(8);
    for _ in 0..rounds {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let mut child = Command::new(env!("CARGO_BIN_EXE_sessions"))
            .arg("--root")
            .arg(&root)
            .args(["sync", "--to", &conn, "--chunk-bytes", "700"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(20 + seed % 200));
        let _ = child.kill();
        let _ = child.wait();
    }
    // Two syncs at once finish the job between them.
    let (a, b) = two_syncs_at_once(&root, &conn, "700");
    assert!(a.status.success() && b.status.success(), "{a:?} {b:?}");
    let pg = PgBackend::open(&conn).unwrap();
    assert_shipped(&root, &pg);
    // Whatever the kills left, every byte is stored once: the stored total is the local total.
    let stored: u64 = run_files(&root)
        .iter()
        .map(|(id, _)| pg.stat_run(id).unwrap().unwrap().len)
        .sum();
    assert_eq!(stored, total);
    // The two racing syncs together wrote no byte another had written.
    let (oa, ob) = (
        String::from_utf8_lossy(&a.stdout),
        String::from_utf8_lossy(&b.stdout),
    );
    assert!(
        field(&oa, "bytes") + field(&ob, "bytes") <= total,
        "{oa}{ob}"
    );
    // A rerun finds nothing to do.
    let (code, out, _) = sessions(&root, &["sync", "--to", &conn, "--verify"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("0 runs shipped"), "{out}");
}

/// Distinct transactions that wrote the tip rows of the runs in `conn`'s store.
fn creating_transactions(conn: &str) -> i64 {
    let pg = PgBackend::open(conn).unwrap();
    pg.with_client(|c| {
        c.query_one("SELECT count(DISTINCT xmin::text) FROM run_tips", &[])
            .map(|r| r.get::<_, i64>(0))
            .map_err(|source| PgError::Query {
                op: "count creating transactions",
                source,
            })
    })
    .unwrap()
}

#[test]
fn new_runs_go_out_together_a_chunk_per_transaction_and_racing_syncs_write_each_once() {
    let c = cluster!();
    // 60 runs of about 420 bytes each; chunks of 4 KiB hold about nine of them.
    let (_tmp, root) = big_store(60, 3);
    let total: u64 = run_files(&root)
        .iter()
        .map(|(_, p)| fs::metadata(p).unwrap().len())
        .sum();
    let conn = c.fresh_db();
    let (code, out, err) = sessions(&root, &["sync", "--to", &conn, "--chunk-bytes", "4096"]);
    assert_eq!(code, 0, "{out}{err}");
    let pg = PgBackend::open(&conn).unwrap();
    assert_shipped(&root, &pg);
    assert_eq!(field(&out, "runs"), 60, "{out}");
    assert_eq!(field(&out, "bytes"), total, "{out}");
    // A transaction per chunk of new runs (each of four workers ends with a part-filled
    // one), not one per run.
    let most = total.div_ceil(4096) + 4;
    let created = creating_transactions(&conn);
    assert!(
        u64::try_from(created).unwrap() <= most,
        "{created} transactions created 60 runs of {total} bytes"
    );
    let transactions: u64 = out
        .split(" transactions")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(u64::MAX);
    assert!(transactions <= most, "{out}");
    // The same store shipped by two syncs at once, and once more: every byte once.
    let conn = c.fresh_db();
    fs::remove_file(root.join("sync-state.json")).unwrap();
    let (a, b) = two_syncs_at_once(&root, &conn, "4096");
    assert!(a.status.success() && b.status.success(), "{a:?} {b:?}");
    let (oa, ob) = (
        String::from_utf8_lossy(&a.stdout),
        String::from_utf8_lossy(&b.stdout),
    );
    assert_eq!(field(&oa, "bytes") + field(&ob, "bytes"), total, "{oa}{ob}");
    let pg = PgBackend::open(&conn).unwrap();
    assert_shipped(&root, &pg);
    let (code, out, _) = sessions(&root, &["sync", "--to", &conn, "--verify"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("60 runs verified"), "{out}");
}

#[test]
fn follow_ships_lines_as_they_are_written() {
    let c = cluster!();
    let conn = c.fresh_db();
    let text = format!("{HEADER}\n");
    let (_tmp, root, file) = one_run_store(text.as_bytes());
    let mut child = Command::new(env!("CARGO_BIN_EXE_sessions"))
        .arg("--root")
        .arg(&root)
        .args([
            "sync",
            "--to",
            &conn,
            "--follow",
            "--interval",
            "1",
            "--passes",
            "30",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pg = PgBackend::open(&conn).unwrap();
    assert!(pg::eventually(10, || pg
        .stat_run("r-torn")
        .unwrap()
        .is_some()));
    let mut f = fs::OpenOptions::new().append(true).open(&file).unwrap();
    writeln!(f, "{}", status(5)).unwrap();
    drop(f);
    let want = fs::read(&file).unwrap();
    let shipped = pg::eventually(10, || {
        pg.read_all("r-torn", Extent::Committed).unwrap() == want
    });
    let _ = child.kill();
    let _ = child.wait();
    assert!(shipped, "the new line was not shipped while following");
}

/// Transactions committed in database `db` so far, as the server counts them.
fn commits_now(c: &pg::Cluster, db: &str) -> i64 {
    c.admin()
        .unwrap()
        .query_one(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = $1",
            &[&db],
        )
        .unwrap()
        .get(0)
}

/// [`commits_now`] once it has settled (a server process reports its counts as its
/// connection ends, a moment after the client has gone): the same three times in a row.
fn commits(c: &pg::Cluster, db: &str) -> i64 {
    let mut seen: Vec<i64> = Vec::new();
    for _ in 0..60 {
        seen.push(commits_now(c, db));
        if let [.., a, b, d] = seen[..]
            && a == b
            && b == d
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    seen.last().copied().unwrap_or_default()
}

#[test]
fn a_resync_with_nothing_new_or_without_watermarks_costs_no_round_trip_per_run() {
    let c = cluster!();
    let (_tmp, root) = big_store(40, 3);
    let conn = c.fresh_db();
    let db = conn
        .split("dbname=")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_owned();
    assert_eq!(sessions(&root, &["sync", "--to", &conn]).0, 0);
    let before = commits(c, &db);
    let (code, out, _) = sessions(&root, &["sync", "--to", &conn]);
    assert_eq!(code, 0);
    assert!(out.contains("40 unchanged"), "{out}");
    let after = commits(c, &db);
    // Opening the store is a few transactions; a look at each run would be 40 more.
    assert!(
        after - before < 10,
        "{} transactions for a re-sync of 40 unchanged runs",
        after - before
    );
    // Without the watermarks every run is looked at again (and found complete), all of them
    // in one statement: as few transactions as with the watermarks, not one per run.
    fs::remove_file(root.join("sync-state.json")).unwrap();
    let (code, out, _) = sessions(&root, &["sync", "--to", &conn]);
    assert_eq!(code, 0);
    assert!(out.starts_with("0 runs shipped"), "{out}");
    let looked = commits(c, &db) - after;
    assert!(
        looked < 10,
        "{looked} transactions to look at 40 runs without watermarks"
    );
    // And the watermarks are back: the next pass skips every run.
    let (code, out, _) = sessions(&root, &["sync", "--to", &conn]);
    assert_eq!(code, 0);
    assert!(out.contains("40 unchanged"), "{out}");
}
