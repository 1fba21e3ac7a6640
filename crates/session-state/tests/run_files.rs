//! The run index lists runs, one row per run id: files that are no runs (0 bytes, NUL bytes,
//! whitespace, garbage, no header) are remembered and reported, never listed; of several
//! files with one run id the most complete is listed and names the others.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::{Path, PathBuf};

use session_state::{IndexedRunOutcome, RunQuery, StateStore};

const SESSION: &str = "5e55e55e-0000-4000-8000-0000000000f1";

fn header(run_id: &str, started_at: &str) -> String {
    format!(
        "{{\"type\":\"header\",\"schema_version\":1,\"run_id\":\"{run_id}\",\"session_id\":\"{SESSION}\",\"started_at\":\"{started_at}\"}}\n"
    )
}

fn status(run_id: &str, ts: &str) -> String {
    format!(
        "{{\"type\":\"run.status\",\"run_id\":\"{run_id}\",\"ts\":\"{ts}\",\"status\":\"running\"}}\n"
    )
}

fn end(run_id: &str, ts: &str) -> String {
    format!(
        "{{\"type\":\"run.end\",\"run_id\":\"{run_id}\",\"ts\":\"{ts}\",\"outcome\":\"completed\"}}\n"
    )
}

fn write(root: &Path, rel: &str, bytes: &[u8]) -> PathBuf {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(&p, bytes).unwrap();
    p
}

fn ids(store: &StateStore, q: &RunQuery) -> Vec<(String, PathBuf)> {
    store
        .list_runs(q)
        .unwrap()
        .runs
        .into_iter()
        .map(|r| (r.run_id, r.path))
        .collect()
}

#[test]
fn files_that_are_no_runs_are_remembered_and_reported_never_listed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let good = "7a000000-0000-4000-8000-0000000000a1";
    let good_path = write(
        &root,
        &format!("2026/03/04/{good}.jsonl"),
        format!(
            "{}{}",
            header(good, "2026-03-04T10:00:00.000Z"),
            end(good, "2026-03-04T10:01:00.000Z")
        )
        .as_bytes(),
    );
    let bad: [(&str, Vec<u8>, &str); 5] = [
        ("2026/03/04/empty.jsonl", Vec::new(), "empty file (0 bytes)"),
        (
            "2026/03/04/nul.jsonl",
            vec![0; 4096],
            "only NUL bytes (4096 of 4096 bytes)",
        ),
        (
            "2026/03/05/blank.jsonl",
            b" \n\n\t\n".to_vec(),
            "no content but whitespace (5 bytes)",
        ),
        (
            "2026/03/05/garbage.jsonl",
            b"hello\n{\"not\":\"a record\"}\n".to_vec(),
            "no header record: 2 damaged line(s), first corrupt_line",
        ),
        (
            "2026/03/05/headless.jsonl",
            status("headless", "2026-03-05T10:00:00.000Z").into_bytes(),
            "no header record: 1 record(s) without one",
        ),
    ];
    for (rel, bytes, _) in &bad {
        write(&root, rel, bytes);
    }
    let store = StateStore::open(&root).unwrap();
    let first = store.index_runs().unwrap();
    assert_eq!(first.files_read, 6);
    // Listed: the run only, in every listing.
    assert_eq!(
        ids(&store, &RunQuery::default()),
        [(good.to_owned(), good_path.clone())]
    );
    for outcome in [IndexedRunOutcome::Open, IndexedRunOutcome::Completed] {
        let q = RunQuery {
            outcome: Some(outcome.clone()),
            ..RunQuery::default()
        };
        let want = if outcome == IndexedRunOutcome::Completed {
            vec![(good.to_owned(), good_path.clone())]
        } else {
            Vec::new()
        };
        assert_eq!(ids(&store, &q), want, "{outcome:?}");
    }
    assert_eq!(store.runs_for_session(SESSION).unwrap().len(), 1);
    // Reported, each once, with why.
    let diags: Vec<(PathBuf, String)> = store
        .run_file_diagnostics()
        .unwrap()
        .into_iter()
        .map(|d| (d.path, d.message))
        .collect();
    let mut want: Vec<(PathBuf, String)> = bad
        .iter()
        .map(|(rel, _, msg)| (root.join(rel), (*msg).to_owned()))
        .collect();
    want.sort();
    assert_eq!(diags, want);
    // Remembered: an unchanged tree reads no file again.
    let second = store.index_runs().unwrap();
    assert_eq!(second.files_read, 0, "{second:?}");
    assert_eq!(store.run_file_diagnostics().unwrap().len(), 5);
    // A file that becomes a run is listed; a removed one is no longer reported.
    let empty = root.join("2026/03/04/empty.jsonl");
    fs::write(
        &empty,
        format!(
            "{}{}",
            header("empty", "2026-03-04T09:00:00.000Z"),
            status("empty", "2026-03-04T09:00:01.000Z")
        ),
    )
    .unwrap();
    fs::remove_file(root.join("2026/03/05/garbage.jsonl")).unwrap();
    store.index_runs().unwrap();
    assert_eq!(ids(&store, &RunQuery::default()).len(), 2);
    assert_eq!(store.run_file_diagnostics().unwrap().len(), 3);
    // A rebuild agrees.
    assert!(store.reindex().unwrap().changes.is_empty());
    assert_eq!(store.run_file_diagnostics().unwrap().len(), 3);
}

#[test]
fn one_row_per_run_id_the_most_complete_file_naming_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let id = "7a000000-0000-4000-8000-0000000000b1";
    let other = "7a000000-0000-4000-8000-0000000000b2";
    // The complete run, and a header-only twin a day later (a retried start, a clock jump):
    // the twin is newer and comes first in listing order.
    let complete = write(
        &root,
        &format!("2026/03/04/{id}.jsonl"),
        format!(
            "{}{}{}",
            header(id, "2026-03-04T10:00:00.000Z"),
            status(id, "2026-03-04T10:00:01.000Z"),
            end(id, "2026-03-04T10:01:00.000Z")
        )
        .as_bytes(),
    );
    let twin = write(
        &root,
        &format!("2026/03/05/{id}.jsonl"),
        header(id, "2026-03-05T10:00:00.000Z").as_bytes(),
    );
    // An identical copy under another name in the complete file's directory.
    let copy = root.join("2026/03/04/backup.jsonl");
    fs::copy(&complete, &copy).unwrap();
    write(
        &root,
        &format!("2026/03/06/{other}.jsonl"),
        format!(
            "{}{}",
            header(other, "2026-03-06T10:00:00.000Z"),
            end(other, "2026-03-06T10:01:00.000Z")
        )
        .as_bytes(),
    );
    let store = StateStore::open(&root).unwrap();
    store.index_runs().unwrap();
    let page = store.list_runs(&RunQuery::default()).unwrap();
    let rows: Vec<(String, PathBuf, Vec<PathBuf>)> = page
        .runs
        .into_iter()
        .map(|r| (r.run_id, r.path, r.other_files))
        .collect();
    assert_eq!(
        rows,
        [
            (
                other.to_owned(),
                root.join(format!("2026/03/06/{other}.jsonl")),
                Vec::new()
            ),
            (
                id.to_owned(),
                complete.clone(),
                vec![copy.clone(), twin.clone()]
            ),
        ]
    );
    // Pages of one: each run once, whatever page the twin's row falls on.
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .list_runs(&RunQuery {
                limit: Some(1),
                after: after.take(),
                ..RunQuery::default()
            })
            .unwrap();
        seen.extend(page.runs.into_iter().map(|r| r.path));
        match page.next_cursor {
            Some(c) => after = Some(c),
            None => break,
        }
    }
    assert_eq!(
        seen,
        [
            root.join(format!("2026/03/06/{other}.jsonl")),
            complete.clone()
        ]
    );
    // The run is completed: the open twin does not make it show up as open.
    let open = RunQuery {
        outcome: Some(IndexedRunOutcome::Open),
        ..RunQuery::default()
    };
    assert!(ids(&store, &open).is_empty());
    let of_session: Vec<PathBuf> = store
        .runs_for_session(SESSION)
        .unwrap()
        .into_iter()
        .map(|r| r.path)
        .collect();
    assert_eq!(
        of_session,
        [
            complete.clone(),
            root.join(format!("2026/03/06/{other}.jsonl"))
        ]
    );
    // Once the twin grows past the first file, it is the run.
    fs::write(
        &twin,
        format!(
            "{}{}{}{}",
            header(id, "2026-03-05T10:00:00.000Z"),
            status(id, "2026-03-05T10:00:01.000Z"),
            status(id, "2026-03-05T10:00:02.000Z"),
            end(id, "2026-03-05T10:01:00.000Z")
        ),
    )
    .unwrap();
    store.index_runs().unwrap();
    let rows: Vec<(PathBuf, Vec<PathBuf>)> = store
        .list_runs(&RunQuery::default())
        .unwrap()
        .runs
        .into_iter()
        .filter(|r| r.run_id == id)
        .map(|r| (r.path, r.other_files))
        .collect();
    assert_eq!(rows, [(twin, vec![complete, copy])]);
}
