//! The reference's recorded state.db, messages and legacy files load, list and summarise to
//! exactly the facts in the fixtures' `expected.json`; the run index matches its run facts.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::copy_dir;

use std::fs;
use std::path::PathBuf;

use serde_json::{Value, json};
use session_state::{
    EntrySource, IndexedRunOutcome, ListQuery, LoadSource, StateStore, summarize_lines,
};

fn fixture_dir() -> PathBuf {
    session_test_support::codelia_runtime_dir()
}

fn expected() -> Value {
    let text = fs::read_to_string(fixture_dir().join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// A scratch copy of the fixture's `sessions/` (SQLite must never open the read-only original).
fn scratch() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    copy_dir(&fixture_dir().join("sessions"), &root);
    (dir, root)
}

fn summary_json(s: &session_schema::SessionStateSummary) -> Value {
    serde_json::from_slice(&session_schema::to_line(s).unwrap()).unwrap()
}

#[test]
fn list_matches_the_reference_list_output() {
    let (_dir, root) = scratch();
    let store = StateStore::open(&root).unwrap();
    let page = store.list(&ListQuery::all()).unwrap();
    assert!(page.diagnostics.is_empty(), "{:?}", page.diagnostics);
    assert_eq!(page.next_cursor, None);
    let got: Vec<Value> = page
        .entries
        .iter()
        .map(|e| summary_json(&e.summary))
        .collect();
    let exp = expected();
    assert_eq!(
        Value::Array(got.clone()),
        exp["codelia_storage_api"]["list"]
    );
    assert_eq!(Value::Array(got), exp["expected_list_emulated"]);
    let sources: Vec<EntrySource> = page.entries.iter().map(|e| e.source).collect();
    assert_eq!(
        sources
            .iter()
            .filter(|s| **s == EntrySource::Legacy)
            .count(),
        1
    );
    assert_eq!(sources.last(), Some(&EntrySource::Legacy));
}

#[test]
fn workspace_filters_match_the_runtime_session_list() {
    let (_dir, root) = scratch();
    let store = StateStore::open(&root).unwrap();
    let exp = expected();
    let rpc = &exp["codelia_runtime_rpc_outputs"];
    for (query, key) in [
        (
            ListQuery::all().workspace("/home/dev/acme-app"),
            "session.list default scope (cwd /home/dev/acme-app)",
        ),
        (
            ListQuery::all().workspace("/home/dev/acme-app/"),
            "session.list default scope (cwd /home/dev/acme-app)",
        ),
        (ListQuery::all(), "session.list scope=all"),
        (
            ListQuery::all().workspace("/home/dev"),
            "session.list workspace_root=/home/dev",
        ),
    ] {
        let page = store.list(&query.limit(50)).unwrap();
        let got: Vec<Value> = page
            .entries
            .iter()
            .map(|e| summary_json(&e.summary))
            .collect();
        assert_eq!(Value::Array(got), rpc[key]["sessions"], "{key}");
    }
}

#[test]
fn every_session_loads_like_the_reference_load() {
    let (_dir, root) = scratch();
    let store = StateStore::open(&root).unwrap();
    let exp = expected();
    let loads = exp["codelia_storage_api"]["load"].as_object().unwrap();
    assert_eq!(loads.len(), 12);
    for (id, want) in loads {
        let loaded = store
            .load(id)
            .unwrap()
            .unwrap_or_else(|| panic!("{id} not found"));
        assert!(loaded.damage.is_empty(), "{id}: {:?}", loaded.damage);
        assert!(loaded.notes.is_empty(), "{id}: {:?}", loaded.notes);
        let state: Value =
            serde_json::from_slice(&session_schema::to_line(&loaded.state).unwrap()).unwrap();
        let obj = state.as_object().unwrap();
        let keys: Vec<&str> = {
            // Key order as serialized (serde_json::Value sorts keys, so read it from the bytes).
            let line = session_schema::to_line(&loaded.state).unwrap();
            let text = String::from_utf8(line).unwrap();
            want["keys_in_order"]
                .as_array()
                .unwrap()
                .iter()
                .map(|k| k.as_str().unwrap())
                .filter(|k| text.contains(&format!("\"{k}\":")))
                .collect()
        };
        assert_eq!(
            keys.len(),
            obj.len(),
            "{id}: unexpected keys {:?}",
            obj.keys()
        );
        let line = String::from_utf8(session_schema::to_line(&loaded.state).unwrap()).unwrap();
        let mut last = 0;
        for k in &keys {
            let pos = line.find(&format!("\"{k}\":")).unwrap();
            assert!(pos >= last, "{id}: key {k} out of order");
            last = pos;
        }
        assert_eq!(state["schema_version"], want["schema_version"], "{id}");
        assert_eq!(state["updated_at"], want["updated_at"], "{id}");
        assert_eq!(
            obj.get("run_id").cloned().unwrap_or(Value::Null),
            want["run_id"],
            "{id}"
        );
        assert_eq!(
            obj.get("invoke_seq").cloned().unwrap_or(Value::Null),
            want["invoke_seq"],
            "{id}"
        );
        assert_eq!(
            obj.get("meta").cloned().unwrap_or(Value::Null),
            want["meta"],
            "{id}"
        );
        assert_eq!(
            state["messages"].as_array().unwrap().len() as u64,
            want["message_count"].as_u64().unwrap(),
            "{id}"
        );
        let legacy_only = want["name"] == "L3";
        assert_eq!(
            loaded.source,
            if legacy_only {
                LoadSource::Legacy { migrated: true }
            } else {
                LoadSource::Db
            },
            "{id}"
        );
        if want["messages_equal_messages_file"] == json!(true) {
            // Messages re-serialize to the file's bytes exactly.
            let file = fs::read(root.join("messages").join(format!("{id}.jsonl"))).unwrap();
            let mut ours = Vec::new();
            for m in &loaded.state.messages {
                ours.extend(session_schema::to_line(m).unwrap());
            }
            assert_eq!(ours, file, "{id}");
        }
    }
    // L3 was migrated under its own id, with the summary the reference lists for it; the
    // legacy file stays.
    let l3 = "c0ffee00-1234-4abc-8def-00112233aabb";
    assert!(root.join("state").join(format!("{l3}.json")).exists());
    let page = store.list(&ListQuery::all()).unwrap();
    let entry = page
        .entries
        .iter()
        .find(|e| e.summary.session_id == l3)
        .unwrap();
    assert_eq!(entry.source, EntrySource::Db);
    let list = &exp["codelia_storage_api"]["list"];
    assert_eq!(summary_json(&entry.summary), list[11]);
    // Loading again reads the row (no re-migration): same generation.
    let g1 = store.load(l3).unwrap().unwrap().generation;
    let g2 = store.load(l3).unwrap().unwrap().generation;
    assert_eq!(g1, g2);
}

#[test]
fn summaries_of_every_messages_file_match_the_db_rows() {
    let exp = expected();
    let rows = exp["state_db"]["rows_by_updated_at_desc"]
        .as_array()
        .unwrap();
    for (id, facts) in exp["messages_files"].as_object().unwrap() {
        let bytes = fs::read(fixture_dir().join(facts["file"].as_str().unwrap())).unwrap();
        let lines: Vec<&[u8]> = bytes
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        let row = rows
            .iter()
            .find(|r| r["session_id"] == id.as_str())
            .unwrap();
        let summary = summarize_lines(&lines, row["meta_json"].as_str());
        assert_eq!(
            summary.message_count,
            facts["message_count"].as_u64().unwrap(),
            "{id}"
        );
        assert_eq!(
            summary.last_user_message.as_deref(),
            facts["computed_last_user_message"].as_str(),
            "{id}"
        );
        assert_eq!(
            summary.last_user_message.as_deref(),
            row["last_user_message"].as_str()
        );
        assert_eq!(
            summary.workspace_root.as_deref(),
            row["workspace_root"].as_str(),
            "{id}"
        );
    }
    for (id, facts) in exp["legacy_state_files"].as_object().unwrap() {
        let text = fs::read_to_string(fixture_dir().join(facts["file"].as_str().unwrap())).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        let lines: Vec<String> = v["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m.to_string())
            .collect();
        let summary = summarize_lines(&lines, None);
        assert_eq!(
            summary.message_count,
            facts["legacy_message_count"].as_u64().unwrap(),
            "{id}"
        );
        assert_eq!(
            summary.last_user_message.as_deref(),
            facts["legacy_last_user_message"].as_str(),
            "{id}"
        );
    }
}

#[test]
fn saving_a_loaded_session_reproduces_the_reference_row_and_file() {
    let (_dir, root) = scratch();
    let store = StateStore::open(&root).unwrap();
    let exp = expected();
    let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
    for row in exp["state_db"]["rows_by_updated_at_desc"]
        .as_array()
        .unwrap()
    {
        let id = row["session_id"].as_str().unwrap();
        let before = fs::read(root.join("messages").join(format!("{id}.jsonl"))).unwrap();
        let loaded = store.load(id).unwrap().unwrap();
        store.save(&loaded.state).unwrap();
        let after = fs::read(root.join("messages").join(format!("{id}.jsonl"))).unwrap();
        assert_eq!(before, after, "{id}");
        let got: Vec<Value> = conn
            .query_row(
                "SELECT session_id, updated_at, run_id, invoke_seq, schema_version, meta_json, message_count, last_user_message, workspace_root FROM session_state WHERE session_id = ?1",
                [id],
                |r| {
                    (0..9)
                        .map(|i| {
                            Ok(match r.get::<_, rusqlite::types::Value>(i)? {
                                rusqlite::types::Value::Null => Value::Null,
                                rusqlite::types::Value::Integer(n) => json!(n),
                                rusqlite::types::Value::Text(t) => json!(t),
                                other => panic!("{other:?}"),
                            })
                        })
                        .collect()
                },
            )
            .unwrap();
        let cols = exp["state_db"]["columns"].as_array().unwrap();
        for (i, c) in cols.iter().enumerate() {
            assert_eq!(got[i], row[c.as_str().unwrap()], "{id} column {c}");
        }
    }
}

#[test]
fn run_index_matches_the_run_facts() {
    let (_dir, root) = scratch();
    let store = StateStore::open(&root).unwrap();
    let mut calls = Vec::new();
    let report = store
        .index_runs_with_progress(&mut |done, total| calls.push((done, total)))
        .unwrap();
    assert_eq!(
        (
            report.added,
            report.updated,
            report.removed,
            report.unchanged
        ),
        (20, 0, 0, 0)
    );
    assert!(
        report.failed.is_empty() && report.damaged.is_empty(),
        "{report:?}"
    );
    assert_eq!(calls.last(), Some(&(20, 20)));
    let exp = expected();
    for (session, facts) in exp["sessions_from_run_logs"].as_object().unwrap() {
        let runs = store.runs_for_session(session).unwrap();
        let ids: Vec<&str> = runs.iter().map(|r| r.run_id.as_str()).collect();
        let want: Vec<&str> = facts["runs_in_started_at_order"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(ids, want, "{session}");
        for run in &runs {
            let f = &exp["runs"][&run.run_id];
            assert_eq!(
                run.record_count,
                f["lines"].as_u64().unwrap(),
                "{}",
                run.run_id
            );
            assert_eq!(run.file_size, f["bytes"].as_u64().unwrap());
            assert_eq!(run.started_at.as_deref(), f["started_at"].as_str());
            assert_eq!(
                run.invocation_count,
                f["llm_request_seqs"].as_array().unwrap().len() as u64
            );
            let outcome = match f["run_end"]["outcome"].as_str() {
                Some("completed") => IndexedRunOutcome::Completed,
                Some("error") => IndexedRunOutcome::Error,
                Some("cancelled") => IndexedRunOutcome::Cancelled,
                None => IndexedRunOutcome::Open,
                Some(o) => panic!("{o}"),
            };
            assert_eq!(run.outcome, outcome, "{}", run.run_id);
            let mut sums = [0u64; 5];
            for r in f["llm_responses"].as_array().unwrap() {
                let u = &r["usage"];
                for (i, k) in [
                    "input_tokens",
                    "input_cached_tokens",
                    "input_cache_creation_tokens",
                    "output_tokens",
                    "total_tokens",
                ]
                .iter()
                .enumerate()
                {
                    sums[i] += u[k].as_u64().unwrap_or(0);
                }
            }
            assert_eq!(
                [
                    run.input_tokens,
                    run.cached_input_tokens,
                    run.cache_creation_tokens,
                    run.output_tokens,
                    run.total_tokens
                ],
                sums,
                "{}",
                run.run_id
            );
            assert_eq!(
                run.model_provider.as_deref(),
                f["header"]["model"]["provider"].as_str()
            );
            assert_eq!(
                run.model_name.as_deref(),
                f["header"]["model"]["name"].as_str()
            );
            assert_eq!(run.damage_count, 0);
        }
    }
    // S6 sent a ui_context: its workspace root comes from there.
    let s6 = store
        .runs_for_session("ff7fa989-11c1-4cb8-a10e-c1188b8bcdbe")
        .unwrap();
    assert_eq!(s6[0].workspace_root.as_deref(), Some("/home/dev/acme-app"));
    let s9 = store
        .runs_for_session("8cde78e5-83d1-486e-9235-92043137d532")
        .unwrap();
    assert_eq!(s9[0].outcome, IndexedRunOutcome::Open);
    assert_eq!(s9[0].last_status.as_deref(), Some("running"));
    assert_eq!(
        s9[0].first_input.as_deref(),
        Some("Run the long build (sleep 20) and tell me when it is done.")
    );

    // Nothing changed: nothing is re-read.
    let again = store.index_runs().unwrap();
    assert_eq!(
        (again.added, again.updated, again.removed, again.unchanged),
        (0, 0, 0, 20)
    );
    let rebuilt = store.reindex().unwrap();
    assert!(rebuilt.changes.is_empty(), "{:?}", rebuilt.changes);
    assert_eq!((rebuilt.total, rebuilt.unchanged), (20, 20));
}
