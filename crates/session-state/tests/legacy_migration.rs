//! A session without a `session_state` row: its messages file is never replaced or cut by a
//! legacy snapshot's migration (the row is rebuilt from it), and a snapshot's odd messages and
//! fields are reported, not dropped silently, with counts that match what is written.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::copy_dir;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use session_schema::{BaseMessage, parse_message};
use session_state::{
    ListQuery, LoadNote, LoadSource, MessageDamageKind, MigrationOutcome, StateStore,
};

const L2: &str = "9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d";
const L1: &str = "5d0c6f1e-2a7b-4c3d-8e9f-0a1b2c3d4e5f";
const LEGACY_ONLY: &str = "c0ffee00-1234-4abc-8def-00112233aabb";

fn fixture_sessions() -> PathBuf {
    session_test_support::codelia_sessions_dir()
}

/// A scratch copy of the fixture's sessions, with or without its `state.db`.
fn scratch(with_db: bool) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    copy_dir(&fixture_sessions(), &root);
    if !with_db {
        for suffix in ["", "-wal", "-shm"] {
            let _ = fs::remove_file(root.join(format!("state.db{suffix}")));
        }
    }
    (dir, root)
}

fn message_ids(root: &Path) -> Vec<String> {
    let mut ids: Vec<String> = fs::read_dir(root.join("messages"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|n| n.strip_suffix(".jsonl").map(str::to_owned))
        .collect();
    ids.sort();
    ids
}

fn set_mtime(path: &Path, unix_secs: u64) {
    let f = fs::OpenOptions::new().write(true).open(path).unwrap();
    f.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(unix_secs))
        .unwrap();
}

fn rebuilt(notes: &[LoadNote]) -> Option<(u64, Option<u64>)> {
    notes.iter().find_map(|n| match n {
        LoadNote::RebuiltFromMessages {
            messages,
            legacy_messages,
            ..
        } => Some((*messages, *legacy_messages)),
        _ => None,
    })
}

#[test]
fn without_state_db_no_session_loses_its_messages_file() {
    let (_with, with_root) = scratch(true);
    let (_dir, root) = scratch(false);
    // L2's file is newer than its snapshot; L1's file is older (its snapshot's time wins).
    set_mtime(&root.join(format!("messages/{L2}.jsonl")), 1_791_223_200); // 2026-10-05T18:00:00Z
    set_mtime(&root.join(format!("messages/{L1}.jsonl")), 1_577_836_800); // 2020-01-01
    let reference = StateStore::open(&with_root).unwrap();
    let store = StateStore::open(&root).unwrap();
    let ids = message_ids(&root);
    assert_eq!(ids.len(), 11);
    let mut rebuilt_ids = Vec::new();
    for id in &ids {
        let path = root.join(format!("messages/{id}.jsonl"));
        let before = fs::read(&path).unwrap();
        let expected = reference.load(id).unwrap().unwrap();
        if !root.join(format!("state/{id}.json")).exists() {
            // Neither row nor snapshot: not loaded (what a first save that crashed before its
            // commit leaves looks the same), and never touched.
            assert!(store.load(id).unwrap().is_none(), "{id}");
            assert_eq!(
                fs::read(&path).unwrap(),
                before,
                "{id}: messages file changed"
            );
            continue;
        }
        rebuilt_ids.push(id.clone());
        let loaded = store.load(id).unwrap().unwrap();
        assert_eq!(loaded.state.messages, expected.state.messages, "{id}");
        assert_eq!(loaded.source, LoadSource::Legacy { migrated: true }, "{id}");
        let (count, _) = rebuilt(&loaded.notes).unwrap();
        assert_eq!(count, expected.state.messages.len() as u64, "{id}");
        assert!(loaded.generation.is_some());
        assert_eq!(
            fs::read(&path).unwrap(),
            before,
            "{id}: messages file changed"
        );
        // Stored now: the next load is a plain row load with the same messages.
        let again = store.load(id).unwrap().unwrap();
        assert_eq!(again.source, LoadSource::Db);
        assert_eq!(again.state.messages, expected.state.messages);
        assert!(rebuilt(&again.notes).is_none());
        assert!(
            !again
                .damage
                .iter()
                .any(|d| matches!(d.kind, MessageDamageKind::CountMismatch { .. })),
            "{id}: {:?}",
            again.damage
        );
    }
    assert_eq!(rebuilt_ids, vec![L1.to_owned(), L2.to_owned()]);
    // L2: the 6 messages of the file (its stale snapshot has 4), fields from the snapshot,
    // updated_at from the newer file.
    let l2 = store.load(L2).unwrap().unwrap();
    assert_eq!(l2.state.messages.len(), 6);
    assert_eq!(l2.state.invoke_seq, Some(7));
    assert_eq!(
        l2.state.run_id.as_deref(),
        Some("0b1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e")
    );
    assert_eq!(l2.state.updated_at.as_str(), "2026-10-05T18:00:00.000Z");
    let l1 = store.load(L1).unwrap().unwrap();
    assert_eq!(l1.state.updated_at.as_str(), "2026-10-02T08:15:30.120Z");
    assert_eq!(l1.state.invoke_seq, Some(2));
    // The legacy-only session is migrated from its snapshot as before.
    let only = store.load(LEGACY_ONLY).unwrap().unwrap();
    assert_eq!(only.source, LoadSource::Legacy { migrated: true });
    assert!(rebuilt(&only.notes).is_none());
    assert!(root.join(format!("messages/{LEGACY_ONLY}.jsonl")).exists());
    // Saving on top of a rebuilt row appends to the file the reference wrote.
    let path = root.join(format!("messages/{L2}.jsonl"));
    let before = fs::read(&path).unwrap();
    let mut state = l2.state.clone();
    state.messages.push(
        parse_message(br#"{"role":"user","content":"one more"}"#)
            .unwrap()
            .value,
    );
    store.save(&state).unwrap();
    let after = fs::read(&path).unwrap();
    assert!(after.starts_with(&before));
    assert_eq!(store.load(L2).unwrap().unwrap().state.messages.len(), 7);
}

#[test]
fn the_first_load_of_the_first_snapshot_session_reports_the_rebuild() {
    let (_dir, root) = scratch(false);
    let store = StateStore::open(&root).unwrap();
    let loaded = store.load(L2).unwrap().unwrap();
    assert_eq!(loaded.source, LoadSource::Legacy { migrated: true });
    assert_eq!(rebuilt(&loaded.notes), Some((6, Some(4))));
    // A read-only store rebuilds the same state without writing anything.
    let (_dir2, root2) = scratch(false);
    let ro = StateStore::open_read_only(&root2).unwrap();
    let loaded = ro.load(L2).unwrap().unwrap();
    assert_eq!(loaded.source, LoadSource::Legacy { migrated: false });
    assert_eq!(loaded.state.messages.len(), 6);
    assert!(!root2.join("state.db").exists());
}

#[test]
fn migrate_legacy_rebuilds_rows_from_messages_files_instead_of_overwriting_them() {
    let (_dir, root) = scratch(false);
    let path = root.join(format!("messages/{L2}.jsonl"));
    let before = fs::read(&path).unwrap();
    let store = StateStore::open(&root).unwrap();
    // The listing shows what load and the migration keep: the file's 6 messages.
    let page = store.list(&ListQuery::default()).unwrap();
    let entry = page
        .entries
        .iter()
        .find(|e| e.summary.session_id == L2)
        .unwrap();
    assert_eq!(entry.summary.message_count, Some(6));
    let dry = store.migrate_legacy(true).unwrap();
    let e = dry.entries.iter().find(|e| e.session_id == L2).unwrap();
    match &e.outcome {
        MigrationOutcome::WouldMigrate(s) => assert_eq!(s.message_count, Some(6)),
        other => panic!("{other:?}"),
    }
    assert_eq!(rebuilt(&e.notes), Some((6, Some(4))));
    let report = store.migrate_legacy(false).unwrap();
    let mut migrated = 0;
    for e in &report.entries {
        match &e.outcome {
            MigrationOutcome::Migrated(s) => {
                migrated += 1;
                let loaded = store.load(&e.session_id).unwrap().unwrap();
                assert_eq!(loaded.source, LoadSource::Db);
                assert_eq!(s.message_count, Some(loaded.state.messages.len() as u64));
            }
            other => panic!("{}: {other:?}", e.session_id),
        }
    }
    assert_eq!(migrated, 3);
    assert_eq!(fs::read(&path).unwrap(), before);
    assert_eq!(store.load(L2).unwrap().unwrap().state.messages.len(), 6);
    // Nothing left to do.
    assert!(
        store
            .migrate_legacy(false)
            .unwrap()
            .entries
            .iter()
            .all(|e| e.outcome == MigrationOutcome::AlreadyIndexed)
    );
}

#[test]
fn odd_legacy_messages_and_fields_are_reported_and_the_count_is_what_was_written() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    fs::create_dir_all(root.join("state")).unwrap();
    let elements = [
        r#"{"role":"user","content":"keep me"}"#,
        r#"{"role":7}"#,
        r#"{"role":"user","content":5}"#,
        r#"{"role":"developer","content":"dev"}"#,
        r#""str""#,
        "null",
        r#"{"role":"assistant","content":"last"}"#,
    ];
    let snapshot = format!(
        r#"{{"session_id":"odd","updated_at":"2026-11-30T10:00:00.000Z","run_id":5,"invoke_seq":"7","messages":[{}]}}"#,
        elements.join(",")
    );
    fs::write(root.join("state/odd.json"), snapshot).unwrap();
    let store = StateStore::open(&root).unwrap();
    let report = store.migrate_legacy(false).unwrap();
    let entry = &report.entries[0];
    let MigrationOutcome::Migrated(summary) = &entry.outcome else {
        panic!("{:?}", entry.outcome)
    };
    // Every object with a string role is written verbatim, one line each.
    let file = fs::read_to_string(root.join("messages/odd.jsonl")).unwrap();
    let lines: Vec<&str> = file.lines().collect();
    assert_eq!(
        lines,
        vec![elements[0], elements[2], elements[3], elements[6]]
    );
    assert_eq!(summary.message_count, Some(lines.len() as u64));
    // The others are reported with their 1-based index in `messages`.
    let damage: Vec<(Option<u64>, MessageDamageKind, bool)> = entry
        .damage
        .iter()
        .map(|d| (d.line, d.kind.clone(), d.kept))
        .collect();
    assert!(damage.contains(&(Some(2), MessageDamageKind::MissingRole, false)));
    assert!(damage.contains(&(Some(3), MessageDamageKind::Shape, true)));
    assert!(damage.contains(&(Some(5), MessageDamageKind::NotObject, false)));
    assert!(damage.contains(&(Some(6), MessageDamageKind::NotObject, false)));
    assert_eq!(damage.iter().filter(|d| !d.2).count(), 3);
    // Wrong-typed fields are left out and reported.
    let columns: Vec<(&str, &str)> = entry
        .notes
        .iter()
        .filter_map(|n| match n {
            LoadNote::ColumnType { column, found } => Some((*column, found.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(columns, vec![("run_id", "5"), ("invoke_seq", "\"7\"")]);
    // The row agrees with the file: no count mismatch on load.
    let loaded = store.load("odd").unwrap().unwrap();
    assert_eq!(loaded.state.messages.len(), 4);
    assert_eq!(loaded.state.invoke_seq, None);
    assert!(
        !loaded
            .damage
            .iter()
            .any(|d| matches!(d.kind, MessageDamageKind::CountMismatch { .. }))
    );
    let listed = store.list(&ListQuery::default()).unwrap();
    assert_eq!(listed.entries[0].summary.message_count, Some(4));
    assert!(matches!(loaded.state.messages[1], BaseMessage::Unknown(_)));
}

#[test]
fn an_unreadable_snapshot_is_one_invalid_entry_and_the_others_still_migrate() {
    let (_dir, root) = scratch(true);
    // A directory with a snapshot's name cannot be read as a file.
    fs::create_dir(root.join("state/dir-named-like-a-snapshot.json")).unwrap();
    let store = StateStore::open(&root).unwrap();
    for dry_run in [true, false] {
        let report = store.migrate_legacy(dry_run).unwrap();
        let bad = report
            .entries
            .iter()
            .find(|e| e.session_id == "dir-named-like-a-snapshot")
            .unwrap();
        assert!(
            matches!(&bad.outcome, MigrationOutcome::Invalid { detail } if detail.contains("dir-named-like-a-snapshot.json")),
            "{:?}",
            bad.outcome
        );
        // L3, never loaded by the reference, is still (or would still be) migrated.
        let l3 = report
            .entries
            .iter()
            .find(|e| e.session_id == "c0ffee00-1234-4abc-8def-00112233aabb")
            .unwrap();
        let expected_migrated = !dry_run;
        assert_eq!(
            matches!(l3.outcome, MigrationOutcome::Migrated(_)),
            expected_migrated,
            "{:?}",
            l3.outcome
        );
    }
}
