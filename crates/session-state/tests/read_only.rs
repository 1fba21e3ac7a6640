//! `StateStore::open_read_only`: listing, loading and run queries work; nothing under the
//! root is created or changed; every write is a typed `ReadOnly` error.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::msg;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use session_schema::{RawJson, SessionState, Timestamp};
use session_state::{ListQuery, LoadSource, RunQuery, StateError, StateStore};

fn state(id: &str, n: usize, ws: &str) -> SessionState {
    SessionState {
        schema_version: Some(1i64.into()),
        session_id: id.to_owned(),
        updated_at: Timestamp::from_raw(format!("2026-11-30T10:00:{:02}.000Z", n % 60)),
        messages: (0..n)
            .map(|i| {
                msg(
                    if i % 2 == 0 { "user" } else { "assistant" },
                    &format!("m{i}"),
                )
            })
            .collect(),
        meta: Some(RawJson::from_json(format!(r#"{{"codelia_workspace_root":"{ws}"}}"#)).unwrap()),
        ..Default::default()
    }
}

const LEGACY: &[u8] = br#"{"session_id":"legacy-x","updated_at":"2026-11-29T10:00:04.500Z","messages":[{"role":"user","content":"old"}]}"#;

/// Every path under `root` with its length, mtime and bytes.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, (u64, std::time::SystemTime, Vec<u8>)> {
    let mut out = BTreeMap::new();
    fn visit(dir: &Path, out: &mut BTreeMap<PathBuf, (u64, std::time::SystemTime, Vec<u8>)>) {
        for e in fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let md = e.metadata().unwrap();
            if md.is_dir() {
                visit(&e.path(), out);
                out.insert(e.path(), (0, md.modified().unwrap(), Vec::new()));
            } else {
                let bytes = fs::read(e.path()).unwrap();
                out.insert(e.path(), (md.len(), md.modified().unwrap(), bytes));
            }
        }
    }
    visit(root, &mut out);
    out
}

fn fixture_runs() -> PathBuf {
    session_test_support::codelia_runs_dir()
}

fn populated() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let day = root.join("2026/11/30");
    fs::create_dir_all(&day).unwrap();
    for e in fs::read_dir(fixture_runs()).unwrap() {
        let e = e.unwrap();
        fs::copy(e.path(), day.join(e.file_name())).unwrap();
    }
    let store = StateStore::open(&root).unwrap();
    store.save(&state("s-one", 3, "/repo/a")).unwrap();
    store.save(&state("s-two", 4, "/repo/b")).unwrap();
    store.index_runs().unwrap();
    fs::write(root.join("state/legacy-x.json"), LEGACY).unwrap();
    (dir, root)
}

fn assert_read_only(r: Result<impl std::fmt::Debug, StateError>, op: &str) {
    match r {
        Err(e @ StateError::ReadOnly { .. }) => {
            assert!(e.is_read_only());
            assert!(e.to_string().contains(op), "{e}");
        }
        other => panic!("expected ReadOnly for {op}, got {other:?}"),
    }
}

#[test]
fn a_closed_store_is_read_without_creating_or_changing_any_file() {
    let (_dir, root) = populated();
    let before = snapshot(&root);
    assert!(!root.join("state.db-wal").exists());
    let store = StateStore::open_read_only(&root).unwrap();
    assert!(store.is_read_only());
    let page = store.list(&ListQuery::all()).unwrap();
    let ids: Vec<&str> = page
        .entries
        .iter()
        .map(|e| e.summary.session_id.as_str())
        .collect();
    assert_eq!(ids, ["s-two", "s-one", "legacy-x"]);
    let ws = store.list(&ListQuery::all().workspace("/repo/b/")).unwrap();
    assert_eq!(ws.entries.len(), 1);
    let loaded = store.load("s-two").unwrap().unwrap();
    assert_eq!(loaded.state.messages.len(), 4);
    assert_eq!(loaded.source, LoadSource::Db);
    // A legacy-only session is returned, not migrated.
    let legacy = store.load("legacy-x").unwrap().unwrap();
    assert_eq!(legacy.source, LoadSource::Legacy { migrated: false });
    assert_eq!(legacy.state.messages.len(), 1);
    assert!(store.load("absent").unwrap().is_none());
    // Run queries answer from the index as the last writer left it.
    assert_eq!(
        store
            .runs_for_session("8cde78e5-83d1-486e-9235-92043137d532")
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        store.list_runs(&RunQuery::default()).unwrap().runs.len(),
        20
    );
    assert_eq!(store.migrate_legacy(true).unwrap().entries.len(), 1);
    // Every write is refused before anything is touched.
    assert_read_only(store.save(&state("s-three", 1, "/repo/c")), "save");
    assert_read_only(
        store.save_expecting(&loaded.state, loaded.generation),
        "save",
    );
    assert_read_only(store.delete("s-one"), "delete");
    assert_read_only(store.index_runs(), "index runs");
    assert_read_only(store.reindex(), "reindex runs");
    assert_read_only(store.migrate_legacy(false), "migrate");
    drop(store);
    assert_eq!(
        snapshot(&root),
        before,
        "a read-only store changed the tree"
    );
}

#[test]
fn a_store_open_for_writing_elsewhere_is_read_with_its_latest_commits() {
    let (_dir, root) = populated();
    let writer = StateStore::open(&root).unwrap();
    writer.save(&state("s-one", 7, "/repo/a")).unwrap();
    assert!(root.join("state.db-wal").exists());
    let reader = StateStore::open_read_only(&root).unwrap();
    assert_eq!(
        reader.load("s-one").unwrap().unwrap().state.messages.len(),
        7
    );
    writer.save(&state("s-one", 9, "/repo/a")).unwrap();
    assert_eq!(
        reader.load("s-one").unwrap().unwrap().state.messages.len(),
        9
    );
    assert_read_only(reader.delete("s-one"), "delete");
    assert_eq!(
        writer.load("s-one").unwrap().unwrap().state.messages.len(),
        9
    );
}

#[test]
fn a_reference_database_is_read_as_the_migration_would_show_it_without_migrating() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    {
        let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
        conn.execute_batch(
            "CREATE TABLE session_state (session_id TEXT PRIMARY KEY, updated_at TEXT NOT NULL, run_id TEXT, invoke_seq INTEGER, schema_version INTEGER NOT NULL, meta_json TEXT, message_count INTEGER, last_user_message TEXT);
             INSERT INTO session_state VALUES ('old', '2026-01-01T00:00:00.000Z', 'r', 4, 1, '{\"codelia_workspace_root\":\"  /repo/main \"}', 0, NULL);",
        )
        .unwrap();
    }
    fs::create_dir(root.join("messages")).unwrap();
    fs::write(root.join("messages/old.jsonl"), b"").unwrap();
    let before = snapshot(root);
    let store = StateStore::open_read_only(root).unwrap();
    let page = store
        .list(&ListQuery::all().workspace("/repo/main"))
        .unwrap();
    assert_eq!(page.entries.len(), 1);
    assert_eq!(
        page.entries[0].summary.workspace_root.as_deref(),
        Some("/repo/main")
    );
    let loaded = store.load("old").unwrap().unwrap();
    assert_eq!(loaded.state.invoke_seq, Some(4));
    assert!(
        store
            .list_runs(&RunQuery::default())
            .unwrap()
            .runs
            .is_empty()
    );
    drop(store);
    assert_eq!(snapshot(root), before);
    // The file was not migrated: still no workspace_root column, no tables of ours.
    let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
    let n: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 2, "session_state and its primary-key index only");
}

#[test]
fn a_root_without_state_db_lists_legacy_snapshots_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::create_dir(root.join("state")).unwrap();
    fs::write(root.join("state/legacy-x.json"), LEGACY).unwrap();
    let before = snapshot(root);
    let store = StateStore::open_read_only(root).unwrap();
    let page = store.list(&ListQuery::all()).unwrap();
    assert_eq!(page.entries.len(), 1);
    let legacy = store.load("legacy-x").unwrap().unwrap();
    assert_eq!(legacy.source, LoadSource::Legacy { migrated: false });
    assert!(store.runs_for_session("x").unwrap().is_empty());
    assert_read_only(store.save(&state("s", 1, "/r")), "save");
    drop(store);
    assert_eq!(snapshot(root), before);
    assert!(!root.join("state.db").exists());
}

#[test]
fn a_missing_root_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = StateStore::open_read_only(dir.path().join("absent")).unwrap_err();
    assert!(matches!(err, StateError::Io { .. }), "{err:?}");
    assert!(!dir.path().join("absent").exists());
}
