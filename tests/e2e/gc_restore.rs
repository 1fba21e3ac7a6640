//! Retention across layers: `sessions gc` moves an old session and its runs to the trash; every
//! layer stops seeing them, the rest of the store is untouched; moving the trash batch back
//! (the documented restore) brings back the same conversation through legacy migration, the
//! same run index rows and the same history.

use std::fs;
use std::path::{Path, PathBuf};

use session_jsonl::{Durability, RunWriter, WriterOptions};
use session_replay::HistoryOptions;
use session_schema::{Record, SessionState, Timestamp};
use session_state::{ListQuery, LoadSource, RunRow, StateStore};

use crate::support::*;

const OLD: &str = "01d5e551-0000-4000-8000-000000000001";
const NEW: &str = "0e75e551-0000-4000-8000-000000000002";
const OLD_RUNS: [&str; 2] = [
    "01d00001-0000-4000-8000-000000000001",
    "01d00002-0000-4000-8000-000000000002",
];
const NEW_RUN: &str = "0e700001-0000-4000-8000-000000000003";
const NOW: &str = "2026-06-01T00:00:00.000Z";

fn run(root: &Path, id: &str, session: &str, started: &str, seq: i64, ask: &str) -> Vec<Record> {
    let mut s = RunScript::new(id, session, started);
    let user = user_msg(ask);
    let records = vec![
        s.header("anthropic", "claude-haiku-4-5"),
        s.run_start(ask),
        s.status("running"),
        s.request(seq, "anthropic", "claude-haiku-4-5", &msgs(&[&user])),
        s.response(
            seq,
            "claude-haiku-4-5",
            &msgs(&[&assistant_msg("ok")]),
            Tok {
                input: 50 * seq as u64,
                cached: 0,
                output: 5,
            },
            "end_turn",
        ),
        s.event(0, &ev_final("ok")),
        s.status("completed"),
        s.end("completed", Some("ok")),
    ];
    let w = RunWriter::create(
        root,
        header_of(&records[0]),
        WriterOptions::with_durability(Durability::Flush),
    )
    .expect("create");
    for r in &records[1..] {
        w.append(r).expect("append");
    }
    w.close().expect("close");
    records
}

fn state(id: &str, run_id: &str, seq: i64, updated: &str, asks: &[&str]) -> SessionState {
    let mut messages = Vec::new();
    for a in asks {
        messages.push(msg(&user_msg(a)));
        messages.push(msg(&assistant_msg("ok")));
    }
    SessionState {
        schema_version: Some(1u64.into()),
        session_id: id.into(),
        updated_at: Timestamp::from_raw(updated),
        run_id: Some(run_id.into()),
        invoke_seq: Some(seq),
        messages,
        meta: Some(
            session_schema::RawJson::from_json(
                r#"{"codelia_workspace_root":"/home/dev/app","x_note":"größer"}"#,
            )
            .expect("meta"),
        ),
        ..Default::default()
    }
}

fn moved_back(from: &Path, to: &Path) {
    for entry in fs::read_dir(from).expect("list") {
        let entry = entry.expect("entry");
        let src = entry.path();
        let dst = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            fs::create_dir_all(&dst).expect("mkdir");
            moved_back(&src, &dst);
        } else {
            assert!(!dst.exists(), "{} would be overwritten", dst.display());
            fs::rename(&src, &dst).expect("move back");
        }
    }
}

fn rows(store: &StateStore, session: &str) -> Vec<RunRow> {
    store.index_runs().expect("index");
    store.runs_for_session(session).expect("rows")
}

#[test]
fn gc_moves_an_old_session_out_of_every_view_and_its_batch_restores_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("sessions");
    let asks = ["Wie spät ist es?", "And in Tokyo? 東京"];
    run(
        &root,
        OLD_RUNS[0],
        OLD,
        "2026-01-03T10:00:00.000Z",
        1,
        asks[0],
    );
    run(
        &root,
        OLD_RUNS[1],
        OLD,
        "2026-01-04T10:00:00.000Z",
        2,
        asks[1],
    );
    run(
        &root,
        NEW_RUN,
        NEW,
        "2026-05-30T10:00:00.000Z",
        1,
        "Fresh work",
    );
    let store = StateStore::open(&root).expect("store");
    let old_state = state(OLD, OLD_RUNS[1], 2, "2026-01-04T10:00:01.000Z", &asks);
    store.save(&old_state).expect("save old");
    store
        .save(&state(
            NEW,
            NEW_RUN,
            1,
            "2026-05-30T10:00:01.000Z",
            &["Fresh work"],
        ))
        .expect("save new");
    let old_rows = rows(&store, OLD);
    assert_eq!(old_rows.len(), 2);
    let (old_history, _) =
        session_replay::io::session_history(&store, OLD, HistoryOptions::default())
            .expect("history");
    assert_eq!(old_history.events.len(), 4);
    drop(store);
    let new_run_bytes = fs::read(root.join(format!("2026/05/30/{NEW_RUN}.jsonl"))).expect("new");
    let runs_before = sessions(&root, NOW, &["runs", "--json"]).stdout;
    assert_eq!(sessions(&root, NOW, &["verify", "--json"]).code, 0);

    let dry = sessions(
        &root,
        NOW,
        &["gc", "--older-than", "30d", "--dry-run", "--json"],
    );
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert!(!root.join("trash").exists(), "a dry run moves nothing");
    let gc = sessions(&root, NOW, &["gc", "--older-than", "30d", "--json"]);
    assert_eq!(gc.code, 0, "{}", gc.stderr);
    let strip = |v: &serde_json::Value| {
        (
            v["action"].as_str().unwrap_or("").to_owned(),
            v["id"].as_str().unwrap_or("").to_owned(),
        )
    };
    let mut done: Vec<(String, String)> = gc.json_lines().iter().map(strip).collect();
    done.sort();
    assert_eq!(
        done,
        [
            ("move_run".to_owned(), OLD_RUNS[0].to_owned()),
            ("move_run".to_owned(), OLD_RUNS[1].to_owned()),
            ("move_session".to_owned(), OLD.to_owned()),
        ]
    );
    let planned: Vec<(String, String)> = {
        let mut p: Vec<_> = dry.json_lines().iter().map(strip).collect();
        p.sort();
        p
    };
    assert_eq!(planned, done, "the dry run planned exactly what gc did");

    // Gone from every view; the young session is untouched.
    let store = StateStore::open(&root).expect("store");
    assert!(store.load(OLD).expect("load").is_none());
    assert!(rows(&store, OLD).is_empty());
    assert_eq!(rows(&store, NEW).len(), 1);
    let listed: Vec<String> = store
        .list(&ListQuery::all())
        .expect("list")
        .entries
        .into_iter()
        .map(|e| e.summary.session_id)
        .collect();
    assert_eq!(listed, [NEW]);
    drop(store);
    assert_eq!(
        fs::read(root.join(format!("2026/05/30/{NEW_RUN}.jsonl"))).expect("new"),
        new_run_bytes
    );
    let runs = sessions(&root, NOW, &["runs", "--json"]).json_lines();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["run_id"], NEW_RUN);
    let verify = sessions(&root, NOW, &["verify", "--json"]);
    assert_eq!(
        verify.code, 0,
        "the trash is not part of the store: {}",
        verify.stdout
    );
    assert_eq!(verify.json_lines().last().expect("summary")["run_files"], 1);

    // Restore: move the batch back under the root.
    let trash = root.join("trash");
    let batches: Vec<PathBuf> = fs::read_dir(&trash)
        .expect("trash")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(batches.len(), 1);
    let batch = &batches[0];
    assert!(batch.join("manifest.jsonl").is_file());
    fs::create_dir_all(root.join("state")).expect("state dir");
    for sub in ["2026", "state"] {
        moved_back(&batch.join(sub), &root.join(sub));
    }
    let store = StateStore::open(&root).expect("store");
    let loaded = store.load(OLD).expect("load").expect("restored");
    assert!(
        matches!(loaded.source, LoadSource::Legacy { .. }),
        "{:?}",
        loaded.source
    );
    assert_eq!(loaded.state.messages, old_state.messages);
    assert_eq!(loaded.state.invoke_seq, Some(2));
    assert_eq!(loaded.state.run_id.as_deref(), Some(OLD_RUNS[1]));
    assert_eq!(loaded.state.updated_at, old_state.updated_at);
    assert_eq!(
        loaded.state.meta.as_ref().map(|m| m.get().to_owned()),
        old_state.meta.as_ref().map(|m| m.get().to_owned())
    );
    let restored_rows = rows(&store, OLD);
    let key = |r: &RunRow| {
        (
            r.run_id.clone(),
            r.path.clone(),
            r.record_count,
            r.total_tokens,
            r.outcome.clone(),
        )
    };
    assert_eq!(
        restored_rows.iter().map(key).collect::<Vec<_>>(),
        old_rows.iter().map(key).collect::<Vec<_>>()
    );
    let (history, _) = session_replay::io::session_history(&store, OLD, HistoryOptions::default())
        .expect("history");
    assert_eq!(history, old_history);
    drop(store);
    assert_eq!(
        sessions(&root, NOW, &["runs", "--json"]).stdout,
        runs_before
    );

    let empty = sessions(&root, NOW, &["gc", "--empty-trash", "--json"]);
    assert_eq!(empty.code, 0, "{}", empty.stderr);
    assert!(!batch.exists());
    assert_eq!(
        sessions(&root, NOW, &["runs", "--json"]).stdout,
        runs_before
    );
}
