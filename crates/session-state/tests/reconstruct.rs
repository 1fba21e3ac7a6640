//! A lost `state.db` does not hide sessions for good: `reconstruct_orphans` rebuilds a row per
//! messages file without one, from the file and the session's run logs, and the rebuilt rows
//! equal the ones the reference recorded (`expected.json`) wherever the files hold the facts.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::copy_dir;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use rusqlite::Connection;
use rusqlite::types::Value as Sql;
use serde_json::Value;
use session_state::{LoadSource, MessageDamageKind, ReconstructionOutcome, StateStore};

fn expected() -> Value {
    let path = session_test_support::codelia_runtime_dir().join("expected.json");
    serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap()
}

/// A copy of the recorded store without its `state.db`.
fn without_state_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    copy_dir(&session_test_support::codelia_sessions_dir(), &root);
    fs::remove_file(root.join("state.db")).unwrap();
    (dir, root)
}

/// Every file under `root` with its bytes.
fn tree(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_owned()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(p.clone(), fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// The `session_state` rows as the reference reads them (plain SQL, nothing of ours).
fn rows(root: &Path) -> BTreeMap<String, BTreeMap<String, Sql>> {
    let conn = Connection::open(root.join("state.db")).unwrap();
    let mut stmt = conn
        .prepare("SELECT session_id, updated_at, run_id, invoke_seq, schema_version, meta_json, message_count, last_user_message, workspace_root FROM session_state")
        .unwrap();
    let names = [
        "session_id",
        "updated_at",
        "run_id",
        "invoke_seq",
        "schema_version",
        "meta_json",
        "message_count",
        "last_user_message",
        "workspace_root",
    ];
    stmt.query_map([], |r| {
        let mut row = BTreeMap::new();
        for (i, n) in names.iter().enumerate() {
            row.insert((*n).to_owned(), r.get::<_, Sql>(i)?);
        }
        Ok(row)
    })
    .unwrap()
    .map(|r| {
        let r = r.unwrap();
        let Sql::Text(id) = r["session_id"].clone() else {
            panic!()
        };
        (id, r)
    })
    .collect()
}

fn sql_of(v: &Value) -> Sql {
    match v {
        Value::Null => Sql::Null,
        Value::String(s) => Sql::Text(s.clone()),
        Value::Number(n) => Sql::Integer(n.as_i64().unwrap()),
        other => panic!("{other}"),
    }
}

fn millis(t: &Sql) -> i64 {
    let Sql::Text(t) = t else { panic!("{t:?}") };
    session_schema::Timestamp::from_raw(t.clone())
        .unix_millis()
        .unwrap()
}

#[test]
fn rows_rebuilt_from_messages_files_and_run_logs_equal_the_recorded_ones() {
    let facts = expected();
    let recorded = facts["state_db"]["rows_by_updated_at_desc"]
        .as_array()
        .unwrap();
    let (_dir, root) = without_state_db();

    // The plan changes nothing (read-only store: not even a state.db is created).
    let before = tree(&root);
    let plan = StateStore::open_read_only(&root)
        .unwrap()
        .reconstruct_orphans(true)
        .unwrap();
    assert_eq!(tree(&root), before);
    assert_eq!(plan.entries.len(), recorded.len());
    assert!(
        plan.entries
            .iter()
            .all(|e| e.outcome == ReconstructionOutcome::WouldRebuild)
    );

    let store = StateStore::open(&root).unwrap();
    let report = store.reconstruct_orphans(false).unwrap();
    assert_eq!(report.entries.len(), recorded.len());
    for (planned, done) in plan.entries.iter().zip(&report.entries) {
        assert_eq!(done.outcome, ReconstructionOutcome::Rebuilt);
        assert_eq!(planned.summary, done.summary, "the plan is what was done");
        assert!(done.damage.is_empty(), "{:?}", done.damage);
    }
    // No file was written but state.db.
    let mut after = tree(&root);
    after.retain(|p, _| {
        !p.starts_with(root.join("state.db")) && !p.to_string_lossy().contains("state.db-")
    });
    let mut files_before = before.clone();
    files_before.retain(|p, _| !p.to_string_lossy().contains("state.db"));
    assert_eq!(after, files_before);

    let got = rows(&root);
    assert_eq!(got.len(), recorded.len());
    for want in recorded {
        let id = want["session_id"].as_str().unwrap();
        let name = want["name"].as_str().unwrap();
        let row = &got[id];
        for column in [
            "run_id",
            "invoke_seq",
            "schema_version",
            "message_count",
            "last_user_message",
        ] {
            assert_eq!(row[column], sql_of(&want[column]), "{name} {column}");
        }
        // The reference stamps its last save within a millisecond after the run's last
        // record (S2: 1 ms; the others: the same millisecond).
        let (rebuilt, saved) = (
            millis(&row["updated_at"]),
            millis(&sql_of(&want["updated_at"])),
        );
        assert!(
            (0..=1).contains(&(saved - rebuilt)),
            "{name}: {rebuilt} vs {saved}"
        );
        // S7 ran outside any repository: its workspace root came from a project marker on
        // the recording machine that no file of the store names; its run logs say the
        // sandbox root.
        if name == "S7" {
            assert_eq!(row["workspace_root"], Sql::Text("/home/dev/notes".into()));
        } else {
            assert_eq!(
                row["workspace_root"],
                sql_of(&want["workspace_root"]),
                "{name}"
            );
        }
        // meta_json lived only in the lost row: kept from a legacy snapshot (L1's is the
        // recorded one), NULL otherwise.
        match name {
            "L1" => assert_eq!(row["meta_json"], sql_of(&want["meta_json"])),
            "L2" => assert_eq!(
                row["meta_json"],
                Sql::Text(r#"{"codelia_workspace_root":"/home/dev/acme-app"}"#.into())
            ),
            _ => assert_eq!(row["meta_json"], Sql::Null, "{name}"),
        }
    }
    let exact = recorded
        .iter()
        .filter(|w| {
            got[w["session_id"].as_str().unwrap()]["updated_at"] == sql_of(&w["updated_at"])
        })
        .count();
    assert_eq!(exact, recorded.len() - 1, "only S2 is a millisecond off");

    // Loadable again, complete, without a count mismatch; marked as reconstructed.
    for want in recorded {
        let id = want["session_id"].as_str().unwrap();
        let loaded = store.load(id).unwrap().unwrap();
        assert_eq!(loaded.source, LoadSource::Db);
        assert_eq!(
            loaded.state.messages.len() as i64,
            want["message_count"].as_i64().unwrap()
        );
        assert!(
            !loaded
                .damage
                .iter()
                .any(|d| matches!(d.kind, MessageDamageKind::CountMismatch { .. })),
            "{id}"
        );
    }
    let marked = store.reconstructed_sessions().unwrap();
    assert_eq!(marked.len(), recorded.len());
    let l2 = marked
        .iter()
        .find(|m| m.session_id == "9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d")
        .unwrap();
    assert!(l2.legacy_snapshot);
    assert_eq!((l2.messages, l2.run_files), (6, 1));
    // The listing is the recorded one again (plus the never-loaded legacy snapshot).
    let page = store.list(&session_state::ListQuery::all()).unwrap();
    let order: Vec<&str> = page
        .entries
        .iter()
        .map(|e| e.summary.session_id.as_str())
        .collect();
    let want_order: Vec<&str> = facts["expected_list_emulated"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["session_id"].as_str().unwrap())
        .collect();
    assert_eq!(order, want_order);

    // A save ends the mark; a second repair finds nothing to do.
    let s1 = "505df585-1046-40f7-a56f-9e890871501c";
    let mut state = store.load(s1).unwrap().unwrap().state;
    state.messages.push(
        session_schema::parse_message(br#"{"role":"user","content":"more"}"#)
            .unwrap()
            .value,
    );
    store.save(&state).unwrap();
    let marked = store.reconstructed_sessions().unwrap();
    assert_eq!(marked.len(), recorded.len() - 1);
    assert!(marked.iter().all(|m| m.session_id != s1));
    assert!(store.reconstruct_orphans(false).unwrap().entries.is_empty());
}

#[test]
fn a_rebuild_never_replaces_a_row_written_meanwhile() {
    let (_dir, root) = without_state_db();
    let store = StateStore::open(&root).unwrap();
    let plan = store.reconstruct_orphans(true).unwrap();
    assert_eq!(plan.entries.len(), 11);
    // A runtime saves S2 before the repair runs: its list extends the file, so the save
    // appends (the file is never cut), and its row is the one that stays.
    let s2 = "8e66b6d7-b2ff-4b09-8d01-a588020959d5";
    let file = root.join(format!("messages/{s2}.jsonl"));
    let before = fs::read(&file).unwrap();
    let mut messages: Vec<_> = before
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| session_schema::parse_message(l).unwrap().value)
        .collect();
    messages.push(
        session_schema::parse_message(br#"{"role":"user","content":"still here"}"#)
            .unwrap()
            .value,
    );
    let state = session_schema::SessionState {
        schema_version: Some(1i64.into()),
        session_id: s2.to_owned(),
        updated_at: session_schema::Timestamp::from_raw("2026-12-01T00:00:00.000Z"),
        messages,
        ..Default::default()
    };
    StateStore::open(&root).unwrap().save(&state).unwrap();
    assert!(fs::read(&file).unwrap().starts_with(&before));
    let report = store.reconstruct_orphans(false).unwrap();
    assert_eq!(report.entries.len(), 10);
    assert!(report.entries.iter().all(|e| e.session_id != s2));
    let row = &rows(&root)[s2];
    assert_eq!(row["message_count"], Sql::Integer(27));
    assert_eq!(
        row["updated_at"],
        Sql::Text("2026-12-01T00:00:00.000Z".into())
    );
    assert!(
        store
            .reconstructed_sessions()
            .unwrap()
            .iter()
            .all(|m| m.session_id != s2)
    );
}
