//! Behaviour of `StateStore`: schema equality with the reference, migration of a
//! reference-created database, crash consistency under fault injection, tolerance, security,
//! compare-and-swap, incremental saves and pagination.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::msg;

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rusqlite::Connection;
use session_schema::{BaseMessage, RawJson, SessionState, Timestamp};
use session_state::{
    FaultPoint, ListQuery, MessageDamageKind, SaveMode, StateError, StateStore, StoreOptions,
};

fn state(id: &str, n: usize, tag: &str) -> SessionState {
    SessionState {
        schema_version: Some(1i64.into()),
        session_id: id.to_owned(),
        updated_at: Timestamp::from_raw(format!("2026-11-30T10:00:{:02}.000Z", n % 60)),
        run_id: Some(format!("run-{tag}")),
        invoke_seq: Some(n as i64),
        messages: (0..n)
            .map(|i| {
                msg(
                    if i % 2 == 0 { "user" } else { "assistant" },
                    &format!("{tag} {i}"),
                )
            })
            .collect(),
        meta: Some(
            RawJson::from_json(format!(r#"{{"codelia_workspace_root":"/repo/{tag}"}}"#)).unwrap(),
        ),
        ..Default::default()
    }
}

const ID: &str = "f6d2c6d5-4a12-4cc4-bbc9-9a0c0d2b5af1";

fn fixture_db() -> std::path::PathBuf {
    session_test_support::codelia_sessions_dir().join("state.db")
}

fn schema_facts(conn: &Connection) -> (Vec<Vec<String>>, Vec<Vec<String>>, Vec<String>) {
    let mut info = conn.prepare("PRAGMA table_info(session_state)").unwrap();
    let cols = info
        .query_map([], |r| {
            Ok(vec![
                r.get::<_, i64>(0)?.to_string(),
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, i64>(3)?.to_string(),
                format!("{:?}", r.get::<_, Option<String>>(4)?),
                r.get::<_, i64>(5)?.to_string(),
            ])
        })
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let mut il = conn.prepare("PRAGMA index_list(session_state)").unwrap();
    let idx = il
        .query_map([], |r| {
            Ok(vec![
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?.to_string(),
                r.get::<_, String>(3)?,
                r.get::<_, i64>(4)?.to_string(),
            ])
        })
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let mut idx = idx;
    idx.sort();
    let mut sql = conn
        .prepare("SELECT sql FROM sqlite_master WHERE tbl_name = 'session_state' AND sql IS NOT NULL ORDER BY name")
        .unwrap();
    let sqls = sql
        .query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    (cols, idx, sqls)
}

#[test]
fn fresh_database_has_exactly_the_reference_schema_and_passes_integrity_check() {
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    store.save(&state(ID, 3, "a")).unwrap();
    drop(store);
    let ours = Connection::open(dir.path().join("state.db")).unwrap();
    let copy = tempfile::tempdir().unwrap();
    fs::copy(fixture_db(), copy.path().join("state.db")).unwrap();
    let reference = Connection::open(copy.path().join("state.db")).unwrap();
    assert_eq!(schema_facts(&ours), schema_facts(&reference));
    let check: String = ours
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    let mode: String = ours
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    // The reference's own queries work on our file.
    let n: i64 = ours
        .query_row(
            "SELECT COUNT(*) FROM session_state ORDER BY updated_at DESC",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(n, 1);
}

#[test]
fn a_reference_created_database_is_migrated_and_backfilled() {
    let dir = tempfile::tempdir().unwrap();
    {
        let conn = Connection::open(dir.path().join("state.db")).unwrap();
        conn.execute_batch(
            "CREATE TABLE session_state (session_id TEXT PRIMARY KEY, updated_at TEXT NOT NULL, run_id TEXT, invoke_seq INTEGER, schema_version INTEGER NOT NULL, meta_json TEXT, message_count INTEGER, last_user_message TEXT, extra_col TEXT);
             INSERT INTO session_state VALUES ('old', '2026-01-01T00:00:00.000Z', 'r', 4, 1, '{\"codelia_workspace_root\":\"  /repo/main \"}', 0, NULL, 'x');
             INSERT INTO session_state VALUES ('nometa', '2026-01-02T00:00:00.000Z', NULL, NULL, 1, NULL, 0, NULL, NULL);",
        )
        .unwrap();
    }
    let store = StateStore::open(dir.path()).unwrap();
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
    assert!(loaded.state.messages.is_empty());
    store.save(&state("old", 2, "b")).unwrap();
    drop(store);
    let conn = Connection::open(dir.path().join("state.db")).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let extra: String = conn
        .query_row(
            "SELECT extra_col FROM session_state WHERE session_id='old'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(extra, "x");
}

#[test]
fn files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let store = StateStore::open(&root).unwrap();
    store.save(&state(ID, 2, "a")).unwrap();
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&root), 0o700);
    assert_eq!(mode(&root.join("messages")), 0o700);
    assert_eq!(mode(&root.join("state")), 0o700);
    assert_eq!(mode(&root.join("state.db")), 0o600);
    assert_eq!(
        mode(&root.join("messages").join(format!("{ID}.jsonl"))),
        0o600
    );
    let mut changed = state(ID, 2, "b");
    changed.messages[0] = msg("user", "rewritten");
    assert_eq!(store.save(&changed).unwrap().mode, SaveMode::Rewritten);
    assert_eq!(
        mode(&root.join("messages").join(format!("{ID}.jsonl"))),
        0o600
    );
}

#[test]
fn unsafe_ids_are_refused_before_any_path_is_built() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let store = StateStore::open(&root).unwrap();
    fs::write(
        dir.path().join("x.json"),
        br#"{"session_id":"x","updated_at":"t","messages":[]}"#,
    )
    .unwrap();
    for id in ["../x", "../../x", "a/b", "..", "", "a\0b", ".hidden"] {
        assert!(
            matches!(store.load(id), Err(StateError::UnsafeId { .. })),
            "{id:?}"
        );
        assert!(matches!(
            store.save(&state(id, 1, "a")),
            Err(StateError::UnsafeId { .. })
        ));
        assert!(matches!(store.delete(id), Err(StateError::UnsafeId { .. })));
    }
    assert!(!dir.path().join("x.jsonl").exists());
    assert!(dir.path().join("x.json").exists());
    assert_eq!(fs::read_dir(root.join("messages")).unwrap().count(), 0);
}

#[test]
fn appends_only_new_lines_and_rewrites_when_history_changes() {
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    let mut s = state(ID, 0, "a");
    let mut last = None;
    for i in 0..40 {
        s.messages
            .push(msg("user", &format!("message {i} {}", "x".repeat(100))));
        let report = store.save_expecting(&s, last).unwrap();
        let line_len = session_schema::to_line(s.messages.last().unwrap())
            .unwrap()
            .len() as u64;
        assert_eq!(report.mode, SaveMode::Appended { messages: 1 });
        assert_eq!(report.bytes_written, line_len);
        last = Some(report.generation);
    }
    // Metadata-only save: nothing written to the file.
    s.invoke_seq = Some(99);
    let r = store.save(&s).unwrap();
    assert_eq!(
        (r.mode, r.bytes_written),
        (SaveMode::Appended { messages: 0 }, 0)
    );
    // Compaction: earlier messages change.
    s.messages.drain(..30);
    let r = store.save(&s).unwrap();
    assert_eq!(r.mode, SaveMode::Rewritten);
    let loaded = store.load(ID).unwrap().unwrap();
    assert_eq!(loaded.state.messages, s.messages);
    assert_eq!(loaded.state.invoke_seq, Some(99));
    let file = fs::read(dir.path().join("messages").join(format!("{ID}.jsonl"))).unwrap();
    let want: Vec<u8> = s
        .messages
        .iter()
        .flat_map(|m| session_schema::to_line(m).unwrap())
        .collect();
    assert_eq!(file, want);
    // An empty list is an empty file.
    s.messages.clear();
    store.save(&s).unwrap();
    assert_eq!(
        fs::read(dir.path().join("messages").join(format!("{ID}.jsonl"))).unwrap(),
        b""
    );
    assert!(store.load(ID).unwrap().unwrap().state.messages.is_empty());
}

#[test]
fn stale_generation_and_foreign_writes_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    let g1 = store
        .save_expecting(&state(ID, 2, "a"), None)
        .unwrap()
        .generation;
    assert!(
        store
            .save_expecting(&state(ID, 2, "a"), None)
            .unwrap_err()
            .is_conflict()
    );
    let g2 = store
        .save_expecting(&state(ID, 3, "a"), Some(g1))
        .unwrap()
        .generation;
    assert!(
        store
            .save_expecting(&state(ID, 4, "a"), Some(g1))
            .unwrap_err()
            .is_conflict()
    );
    // The reference writes the row (it does not know our bookkeeping table).
    let conn = Connection::open(dir.path().join("state.db")).unwrap();
    conn.execute(
        "UPDATE session_state SET updated_at = '2026-12-01T00:00:00.000Z' WHERE session_id = ?1",
        [ID],
    )
    .unwrap();
    let err = store
        .save_expecting(&state(ID, 4, "a"), Some(g2))
        .unwrap_err();
    assert!(err.is_conflict(), "{err}");
    let g3 = store.load(ID).unwrap().unwrap().generation;
    assert_ne!(g3, Some(g2));
    store.save_expecting(&state(ID, 4, "a"), g3).unwrap();
}

#[test]
fn torn_and_corrupt_message_lines_are_reported_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    store.save(&state(ID, 4, "a")).unwrap();
    // Another tool rewrites the file with a corrupt middle line and a torn tail.
    let path = dir.path().join("messages").join(format!("{ID}.jsonl"));
    let mut bytes = fs::read(&path).unwrap();
    bytes.extend_from_slice(b"garbage\n{\"role\":\"user\",\"content\":\"cut");
    fs::write(&path, &bytes).unwrap();
    // A reference-written row (no bookkeeping) reads the whole file.
    let conn = Connection::open(dir.path().join("state.db")).unwrap();
    conn.execute("DELETE FROM session_files", []).unwrap();
    let loaded = store.load(ID).unwrap().unwrap();
    assert_eq!(loaded.state.messages, state(ID, 4, "a").messages);
    let kinds: Vec<_> = loaded
        .damage
        .iter()
        .map(|d| (d.kind.clone(), d.line))
        .collect();
    assert_eq!(
        kinds,
        vec![
            (MessageDamageKind::Corrupt, Some(5)),
            (MessageDamageKind::TornTail, Some(6))
        ]
    );
    // Saving repairs the file.
    store.save(&loaded.state).unwrap();
    assert!(store.load(ID).unwrap().unwrap().damage.is_empty());
}

#[test]
fn a_file_changed_behind_our_back_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    store.save(&state(ID, 4, "a")).unwrap();
    let path = dir.path().join("messages").join(format!("{ID}.jsonl"));
    // Same length, different bytes.
    let bytes = fs::read(&path).unwrap();
    let changed: Vec<u8> = String::from_utf8(bytes)
        .unwrap()
        .replace("a 1", "b 1")
        .into_bytes();
    fs::write(&path, changed).unwrap();
    let loaded = store.load(ID).unwrap().unwrap();
    assert!(
        loaded
            .damage
            .iter()
            .any(|d| d.kind == MessageDamageKind::FileChanged)
    );
    assert_eq!(loaded.state.messages.len(), 4);
}

#[test]
fn legacy_snapshot_cut_mid_write_is_a_clear_error_and_listing_continues() {
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    store.save(&state(ID, 2, "a")).unwrap();
    let legacy = dir
        .path()
        .join("state")
        .join("c0ffee00-1234-4abc-8def-00112233aabb.json");
    let cut = br#"{"session_id":"c0ffee00-1234-4abc-8def-00112233aabb","updated_at":"2026-09-28T11:00:00.000Z","messages":[{"role":"user","con"#;
    fs::write(&legacy, cut).unwrap();
    let err = store
        .load("c0ffee00-1234-4abc-8def-00112233aabb")
        .unwrap_err();
    match &err {
        StateError::LegacyInvalid {
            path,
            line,
            byte_offset,
            reason,
            ..
        } => {
            assert_eq!(path, &legacy);
            assert_eq!(*line, 1);
            assert_eq!(*byte_offset, cut.len() as u64);
            assert!(reason.contains("cut mid-write"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let page = store.list(&ListQuery::all()).unwrap();
    assert_eq!(page.entries.len(), 1);
    assert_eq!(page.diagnostics.len(), 1);
    assert_eq!(page.diagnostics[0].path, legacy);
    assert_eq!(fs::read(&legacy).unwrap(), cut);
    let report = store.migrate_legacy(false).unwrap();
    assert!(matches!(
        report.entries[0].outcome,
        session_state::MigrationOutcome::Invalid { .. }
    ));
    assert_eq!(fs::read(&legacy).unwrap(), cut);
}

#[test]
fn legacy_quirks_are_fixed() {
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    let legacy = dir.path().join("state").join("outer-id.json");
    fs::write(
        &legacy,
        br#"{"schema_version":9,"session_id":"inner-id","updated_at":"2026-01-01T00:00:00.000Z","invoke_seq":"x","messages":[{"role":"user","content":"hi"}],"meta":{"codelia_workspace_root":"/w"}}"#,
    )
    .unwrap();
    // dry run lists without writing
    let dry = store.migrate_legacy(true).unwrap();
    assert!(matches!(
        dry.entries[0].outcome,
        session_state::MigrationOutcome::WouldMigrate(_)
    ));
    assert!(
        store.list(&ListQuery::all()).unwrap().entries[0].source
            == session_state::EntrySource::Legacy
    );
    let loaded = store.load("outer-id").unwrap().unwrap();
    assert_eq!(loaded.state.session_id, "outer-id");
    assert_eq!(loaded.state.invoke_seq, None);
    assert_eq!(
        loaded.source,
        session_state::LoadSource::Legacy { migrated: true }
    );
    assert_eq!(loaded.notes.len(), 3, "{:?}", loaded.notes);
    // Stored under the requested id, never re-migrated, legacy file kept.
    assert!(store.load("inner-id").unwrap().is_none());
    let again = store.load("outer-id").unwrap().unwrap();
    assert_eq!(again.source, session_state::LoadSource::Db);
    assert_eq!(again.generation, loaded.generation);
    assert!(legacy.exists());
    assert_eq!(
        store.migrate_legacy(false).unwrap().entries[0].outcome,
        session_state::MigrationOutcome::AlreadyIndexed
    );
    // delete removes row, messages file and legacy file.
    let d = store.delete("outer-id").unwrap();
    assert!(d.row && d.messages_file && d.legacy_file);
    assert!(store.load("outer-id").unwrap().is_none());
    assert!(store.list(&ListQuery::all()).unwrap().entries.is_empty());
}

#[test]
fn pagination_is_stable_while_sessions_are_saved() {
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    for i in 0..30 {
        let mut s = state(&format!("s{i:02}"), 1, "a");
        s.updated_at = Timestamp::from_raw(format!("2026-11-30T10:00:{:02}.000Z", i / 3));
        store.save(&s).unwrap();
    }
    fs::write(
        dir.path().join("state").join("legacy-x.json"),
        br#"{"session_id":"legacy-x","updated_at":"2026-11-30T10:00:04.500Z","messages":[]}"#,
    )
    .unwrap();
    let mut seen = Vec::new();
    let mut cursor = None;
    let mut round = 0;
    loop {
        let mut q = ListQuery::all().limit(7);
        if let Some(c) = cursor.take() {
            q = q.after(
                session_state::ListCursor::from_token(&session_state::ListCursor::to_token(&c))
                    .unwrap(),
            );
        }
        let page = store.list(&q).unwrap();
        seen.extend(page.entries.iter().map(|e| e.summary.session_id.clone()));
        // Meanwhile an already listed session and a not yet listed one are saved: both move
        // to the front, so neither is repeated (the second is not seen in this listing).
        for id in ["s29", "s00"] {
            let mut s = state(id, 2, "b");
            s.updated_at = Timestamp::from_raw(format!("2026-11-30T11:00:{round:02}.000Z"));
            store.save(&s).unwrap();
        }
        round += 1;
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    let mut sorted = seen.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), seen.len(), "duplicates in {seen:?}");
    assert_eq!(seen.len(), 30);
    assert_eq!(seen[0], "s29");
    assert!(!seen.contains(&"s00".to_owned()));
    assert!(seen.contains(&"legacy-x".to_owned()));
}

/// Stops a save at `point` and checks that a fresh store loads the complete old or the
/// complete new state; then checks a later save works.
fn crash_at(point: FaultPoint, old: Option<&SessionState>, new: &SessionState) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let armed = Arc::new(AtomicBool::new(false));
    let hook_armed = armed.clone();
    let options = StoreOptions {
        fault_hook: Some(Arc::new(move |p| {
            p == point && hook_armed.load(Ordering::SeqCst)
        })),
        ..StoreOptions::default()
    };
    let store = StateStore::open_with(dir.path(), options).unwrap();
    if let Some(old) = old {
        store.save(old).unwrap();
    }
    armed.store(true, Ordering::SeqCst);
    let hit = match store.save(new) {
        Err(StateError::InjectedFault { point: p }) => {
            assert_eq!(p, point);
            true
        }
        Ok(_) => false,
        Err(e) => panic!("{e}"),
    };
    drop(store);
    let store = StateStore::open(dir.path()).unwrap();
    let id = new.session_id.clone();
    let Some(loaded) = store.load(&id).unwrap() else {
        // Only a crash before the first commit of a new session leaves no session.
        assert!(
            old.is_none() && hit && point < FaultPoint::Committed,
            "{point:?}"
        );
        store.save(new).unwrap();
        assert_eq!(
            store.load(&id).unwrap().unwrap().state.messages,
            new.messages
        );
        return hit;
    };
    assert!(loaded.damage.is_empty(), "{point:?}: {:?}", loaded.damage);
    let got = &loaded.state;
    let is = |s: &SessionState| {
        got.messages == s.messages
            && got.meta == s.meta
            && got.run_id == s.run_id
            && got.updated_at == s.updated_at
    };
    let after_commit = point >= FaultPoint::Committed;
    if hit {
        assert!(
            if after_commit {
                is(new)
            } else {
                old.is_some_and(is)
            },
            "{point:?}: loaded neither the expected old nor new state"
        );
    } else {
        assert!(is(new));
    }
    // The reference's view (the main file) is also complete after `open` rolled forward.
    let file = fs::read(dir.path().join("messages").join(format!("{id}.jsonl"))).unwrap();
    let want: Vec<u8> = got
        .messages
        .iter()
        .flat_map(|m| session_schema::to_line(m).unwrap())
        .collect();
    if !hit || after_commit || point < FaultPoint::TempWritten {
        assert!(file.starts_with(&want), "{point:?}");
    }
    // Life goes on: a further save and load work.
    let mut next = new.clone();
    next.messages.push(msg("user", "after the crash"));
    store.save(&next).unwrap();
    let reloaded = store.load(&id).unwrap().unwrap();
    assert_eq!(reloaded.state.messages, next.messages);
    assert!(reloaded.damage.is_empty());
    let file = fs::read(dir.path().join("messages").join(format!("{id}.jsonl"))).unwrap();
    let want: Vec<u8> = next
        .messages
        .iter()
        .flat_map(|m| session_schema::to_line(m).unwrap())
        .collect();
    assert_eq!(file, want, "{point:?}");
    hit
}

#[test]
fn a_crash_at_any_step_of_save_loads_the_complete_old_or_new_state() {
    let old = state(ID, 6, "old");
    // Append: the new list extends the old one, with new metadata.
    let mut appended = old.clone();
    appended.messages.push(msg("assistant", "new reply"));
    appended.messages.push(msg("user", "new question"));
    appended.meta = Some(RawJson::from_json(r#"{"codelia_workspace_root":"/repo/new"}"#).unwrap());
    appended.run_id = Some("run-new".to_owned());
    appended.updated_at = Timestamp::from_raw("2026-11-30T12:00:00.000Z");
    // Rewrite: an earlier message changed (compaction).
    let mut rewritten = appended.clone();
    rewritten.messages[0] = msg("user", "[summary of earlier turns]");
    rewritten.messages.remove(1);
    // First save of a session (create).
    let empty = SessionState {
        messages: Vec::new(),
        ..old.clone()
    };
    let mut hits = std::collections::BTreeSet::new();
    for point in FaultPoint::ALL {
        for (from, to) in [
            (Some(&old), &appended),
            (Some(&old), &rewritten),
            (Some(&empty), &old),
            (None, &old),
        ] {
            if crash_at(point, from, to) {
                hits.insert(point);
            }
        }
    }
    // Every fault point except the tail truncation (only after a crash) was exercised.
    for p in FaultPoint::ALL {
        if p != FaultPoint::TailTruncated {
            assert!(hits.contains(&p), "{p:?} never reached");
        }
    }
}

#[test]
fn an_uncommitted_tail_is_ignored_then_cut() {
    let dir = tempfile::tempdir().unwrap();
    let hook_on = Arc::new(AtomicBool::new(false));
    let h = hook_on.clone();
    let options = StoreOptions {
        fault_hook: Some(Arc::new(move |p| {
            h.load(Ordering::SeqCst) && p == FaultPoint::AppendSynced
        })),
        ..StoreOptions::default()
    };
    let store = StateStore::open_with(dir.path(), options).unwrap();
    let old = state(ID, 3, "a");
    store.save(&old).unwrap();
    hook_on.store(true, Ordering::SeqCst);
    let mut new = old.clone();
    new.messages.push(msg("assistant", "uncommitted"));
    assert!(store.save(&new).is_err());
    hook_on.store(false, Ordering::SeqCst);
    let loaded = store.load(ID).unwrap().unwrap();
    assert_eq!(loaded.state.messages, old.messages);
    assert!(
        loaded
            .notes
            .iter()
            .any(|n| matches!(n, session_state::LoadNote::UncommittedTail { .. }))
    );
    // The next save cuts the tail before appending: no glued lines.
    let mut other = old.clone();
    other.messages.push(msg("assistant", "committed"));
    store.save(&other).unwrap();
    assert_eq!(
        store.load(ID).unwrap().unwrap().state.messages,
        other.messages
    );
}

#[test]
fn two_stores_on_one_root_never_trust_a_stale_cache() {
    let dir = tempfile::tempdir().unwrap();
    let a = StateStore::open(dir.path()).unwrap();
    let b = StateStore::open(dir.path()).unwrap();
    let mut s = state(ID, 3, "a");
    a.save(&s).unwrap();
    s.messages.push(msg("assistant", "from b"));
    assert_eq!(b.save(&s).unwrap().mode, SaveMode::Appended { messages: 1 });
    s.messages.push(msg("user", "from a again"));
    // a's cache knows 3 messages at an older generation: it must not append after them.
    assert_eq!(a.save(&s).unwrap().mode, SaveMode::Appended { messages: 1 });
    // b rewrites history, a then saves its own (diverged) view.
    let mut other = s.clone();
    other.messages[0] = msg("user", "changed by b");
    b.save(&other).unwrap();
    s.messages.push(msg("assistant", "a continues"));
    assert_eq!(a.save(&s).unwrap().mode, SaveMode::Rewritten);
    for store in [&a, &b] {
        let loaded = store.load(ID).unwrap().unwrap();
        assert_eq!(loaded.state.messages, s.messages);
        assert!(loaded.damage.is_empty());
    }
    let file = fs::read(dir.path().join("messages").join(format!("{ID}.jsonl"))).unwrap();
    let want: Vec<u8> = s
        .messages
        .iter()
        .flat_map(|m| session_schema::to_line(m).unwrap())
        .collect();
    assert_eq!(file, want);
}

#[test]
fn an_unusable_database_is_a_clear_error() {
    // Reference test: `state.db` is a directory → the store is unavailable (with or without a
    // legacy snapshot).
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("state.db")).unwrap();
    fs::create_dir_all(dir.path().join("state")).unwrap();
    fs::write(
        dir.path().join("state").join("legacy_1.json"),
        br#"{"session_id":"legacy_1","updated_at":"2026-01-01T00:00:00.000Z","messages":[]}"#,
    )
    .unwrap();
    let err = StateStore::open(dir.path()).unwrap_err();
    assert!(matches!(err, StateError::Db { .. }), "{err:?}");
    assert!(err.to_string().starts_with("state database"), "{err}");
}

#[test]
fn the_store_can_be_shared_between_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<StateStore>();
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(StateStore::open(dir.path()).unwrap());
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                for i in 0..10 {
                    store
                        .save(&state(&format!("t{t}-{i}"), i + 1, "x"))
                        .unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(store.list(&ListQuery::all()).unwrap().entries.len(), 40);
}

/// The reference's `save` (compat §2.6) done by hand: whole file through a temp name, then its
/// upsert statement.
fn reference_save(root: &Path, s: &SessionState) {
    let mut body = Vec::new();
    for m in &s.messages {
        body.extend(session_schema::to_line(m).unwrap());
    }
    let tmp = root
        .join("messages")
        .join(format!("{}.jsonl.123.456.abcd.tmp", s.session_id));
    fs::write(&tmp, &body).unwrap();
    fs::rename(
        &tmp,
        root.join("messages")
            .join(format!("{}.jsonl", s.session_id)),
    )
    .unwrap();
    let summary = session_state::summarize(&s.messages, s.meta.as_ref());
    let conn = Connection::open(root.join("state.db")).unwrap();
    conn.execute(
        "INSERT INTO session_state (session_id, updated_at, run_id, invoke_seq, schema_version, meta_json, message_count, last_user_message, workspace_root) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(session_id) DO UPDATE SET updated_at = excluded.updated_at, run_id = excluded.run_id, invoke_seq = excluded.invoke_seq, schema_version = excluded.schema_version, meta_json = excluded.meta_json, message_count = excluded.message_count, last_user_message = excluded.last_user_message, workspace_root = excluded.workspace_root",
        rusqlite::params![
            s.session_id,
            s.updated_at.as_str(),
            s.run_id,
            s.invoke_seq,
            1,
            s.meta.as_ref().map(|m| m.get().to_owned()),
            summary.message_count as i64,
            summary.last_user_message,
            summary.workspace_root
        ],
    )
    .unwrap();
}

#[test]
fn the_reference_and_this_crate_take_turns_on_one_session() {
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    let mut s = state(ID, 4, "ours");
    let ours = store.save(&s).unwrap().generation;
    // The reference appends two messages by rewriting the file and upserting the row.
    s.messages
        .push(msg("assistant", "written by the reference"));
    s.messages.push(msg("user", "and another"));
    s.run_id = Some("run-reference".into());
    reference_save(dir.path(), &s);
    let loaded = store.load(ID).unwrap().unwrap();
    assert_eq!(loaded.state.messages, s.messages);
    assert_eq!(loaded.state.run_id.as_deref(), Some("run-reference"));
    assert!(loaded.damage.is_empty(), "{:?}", loaded.damage);
    assert_ne!(loaded.generation, Some(ours));
    // Our next save works from the reference's state, and the reference reads our result.
    s.messages.push(msg("assistant", "ours again"));
    store.save_expecting(&s, loaded.generation).unwrap();
    let file = fs::read(dir.path().join("messages").join(format!("{ID}.jsonl"))).unwrap();
    let want: Vec<u8> = s
        .messages
        .iter()
        .flat_map(|m| session_schema::to_line(m).unwrap())
        .collect();
    assert_eq!(file, want);
    let conn = Connection::open(dir.path().join("state.db")).unwrap();
    let (count, last): (i64, String) = conn
        .query_row(
            "SELECT message_count, last_user_message FROM session_state WHERE session_id = ?1",
            [ID],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((count, last.as_str()), (7, "and another"));
}

#[test]
fn a_crash_while_cutting_an_uncommitted_tail_still_loads_the_old_state() {
    let dir = tempfile::tempdir().unwrap();
    let stop_at = Arc::new(std::sync::Mutex::new(None::<FaultPoint>));
    let hook_stop = stop_at.clone();
    let options = StoreOptions {
        fault_hook: Some(Arc::new(move |p| *hook_stop.lock().unwrap() == Some(p))),
        ..StoreOptions::default()
    };
    let store = StateStore::open_with(dir.path(), options.clone()).unwrap();
    let old = state(ID, 3, "a");
    store.save(&old).unwrap();
    // Another process, running since before the crash (so its `open` found no tail to cut).
    let other = StateStore::open_with(dir.path(), options).unwrap();
    let mut first = old.clone();
    first.messages.push(msg("assistant", "never committed"));
    *stop_at.lock().unwrap() = Some(FaultPoint::AppendWritten);
    assert!(store.save(&first).is_err());
    drop(store);
    // Its save cuts the tail first, and crashes right after.
    let store = other;
    let mut second = old.clone();
    second.messages.push(msg("assistant", "second try"));
    *stop_at.lock().unwrap() = Some(FaultPoint::TailTruncated);
    match store.save(&second) {
        Err(StateError::InjectedFault { point }) => assert_eq!(point, FaultPoint::TailTruncated),
        other => panic!("{other:?}"),
    }
    *stop_at.lock().unwrap() = None;
    let loaded = StateStore::open(dir.path())
        .unwrap()
        .load(ID)
        .unwrap()
        .unwrap();
    assert_eq!(loaded.state.messages, old.messages);
    assert!(loaded.damage.is_empty());
    store.save(&second).unwrap();
    assert_eq!(
        store.load(ID).unwrap().unwrap().state.messages,
        second.messages
    );
}

/// Replaces `messages/<ID>.jsonl` the way the reference does (temp file + rename), leaving the
/// row alone, as when its upsert fails after the rename (compat §5 item 2) or after a hand edit.
fn replace_messages_file(root: &Path, body: &[u8]) {
    let main = root.join("messages").join(format!("{ID}.jsonl"));
    let tmp = root.join("messages").join(format!("{ID}.jsonl.1.2.x.tmp"));
    fs::write(&tmp, body).unwrap();
    fs::rename(&tmp, &main).unwrap();
}

fn lines_of(messages: &[BaseMessage]) -> Vec<u8> {
    messages
        .iter()
        .flat_map(|m| session_schema::to_line(m).unwrap())
        .collect()
}

#[test]
fn a_messages_file_that_no_longer_holds_our_commit_is_rewritten_not_appended_to() {
    let two = vec![msg("user", "one"), msg("assistant", "two")];
    let mut three = two.clone();
    three.push(msg("user", "three"));
    let other: Vec<BaseMessage> = (0..3)
        .map(|i| {
            msg(
                "user",
                &format!("a much longer line written by someone else {i}"),
            )
        })
        .collect();
    let same_len_other = vec![msg("user", "uno"), msg("assistant", "two")];
    let shorter = vec![msg("user", "one")];
    // Every way the file can differ from what we committed for [one, two].
    let cases: Vec<(&str, Option<Vec<u8>>, bool)> = vec![
        // (case, replacement content or None = file removed, replaced through a new inode)
        ("replaced, longer", Some(lines_of(&other)), true),
        (
            "replaced, same length",
            Some(lines_of(&same_len_other)),
            true,
        ),
        ("replaced, shorter", Some(lines_of(&shorter)), true),
        ("replaced, same bytes", Some(lines_of(&two)), true),
        (
            "edited in place, same length",
            Some(lines_of(&same_len_other)),
            false,
        ),
        ("edited in place, longer", Some(lines_of(&other)), false),
        ("removed", None, true),
    ];
    for (case, content, new_inode) in cases {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(dir.path()).unwrap();
        let mut s = state(ID, 0, "a");
        s.messages = two.clone();
        store.save(&s).unwrap();
        let main = dir.path().join("messages").join(format!("{ID}.jsonl"));
        match (&content, new_inode) {
            (Some(body), true) => replace_messages_file(dir.path(), body),
            (Some(body), false) => {
                let mut f = fs::OpenOptions::new().write(true).open(&main).unwrap();
                std::io::Write::write_all(&mut f, body).unwrap();
            }
            (None, _) => fs::remove_file(&main).unwrap(),
        }
        s.messages = three.clone();
        let report = store.save(&s).unwrap();
        let unchanged = content.as_deref() == Some(&lines_of(&two)[..]);
        if unchanged {
            // Same bytes in a new file: still ours, an append is right.
            assert_eq!(report.mode, SaveMode::Appended { messages: 1 }, "{case}");
        } else {
            assert_eq!(report.mode, SaveMode::Rewritten, "{case}");
        }
        assert_eq!(fs::read(&main).unwrap(), lines_of(&three), "{case}");
        for store in [store, StateStore::open(dir.path()).unwrap()] {
            let loaded = store.load(ID).unwrap().unwrap();
            assert_eq!(loaded.state.messages, three, "{case}");
            assert!(loaded.damage.is_empty(), "{case}: {:?}", loaded.damage);
        }
    }
}

#[test]
fn a_messages_file_replaced_between_saves_of_another_store_is_rewritten() {
    // A second store on the same root has no cached list; its save compares the serialized
    // prefix with the bookkeeping, which still matches, so only the file check can see it.
    let dir = tempfile::tempdir().unwrap();
    let mut s = state(ID, 2, "a");
    StateStore::open(dir.path()).unwrap().save(&s).unwrap();
    let garbage: Vec<BaseMessage> = (0..3)
        .map(|i| {
            msg(
                "assistant",
                &format!("replacement line number {i} that is longer"),
            )
        })
        .collect();
    replace_messages_file(dir.path(), &lines_of(&garbage));
    s.messages.push(msg("user", "three"));
    let store = StateStore::open(dir.path()).unwrap();
    assert_eq!(store.save(&s).unwrap().mode, SaveMode::Rewritten);
    let loaded = store.load(ID).unwrap().unwrap();
    assert_eq!(loaded.state.messages, s.messages);
    assert!(loaded.damage.is_empty(), "{:?}", loaded.damage);
    // And appending works again afterwards, the identity being recorded anew.
    s.messages.push(msg("assistant", "four"));
    assert_eq!(
        store.save(&s).unwrap().mode,
        SaveMode::Appended { messages: 1 }
    );
    assert_eq!(
        fs::read(dir.path().join("messages").join(format!("{ID}.jsonl"))).unwrap(),
        lines_of(&s.messages)
    );
}

/// A session as the reference leaves it: its row (no bookkeeping of ours) and `body` as the
/// messages file.
fn reference_session(root: &Path, body: &[u8], count: i64) {
    fs::write(root.join("messages").join(format!("{ID}.jsonl")), body).unwrap();
    let conn = Connection::open(root.join("state.db")).unwrap();
    conn.execute(
        "INSERT INTO session_state (session_id, updated_at, schema_version, message_count) VALUES (?1, '2026-11-30T00:00:00.000Z', 1, ?2)",
        rusqlite::params![ID, count],
    )
    .unwrap();
}

const CUT_EMOJI: &[u8] = b"{\"role\":\"user\",\"content\":\"emoji cut \\ud83c here\"}\n";

#[test]
fn a_lone_surrogate_is_reported_on_load_and_its_bytes_survive_the_next_saves() {
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    let second = b"{\"role\":\"assistant\",\"content\":\"ok\"}\n";
    let body = [CUT_EMOJI, second].concat();
    reference_session(dir.path(), &body, 2);
    let loaded = store.load(ID).unwrap().unwrap();
    assert!(loaded.damage.is_empty(), "{:?}", loaded.damage);
    let path = dir.path().join("messages").join(format!("{ID}.jsonl"));
    assert_eq!(
        loaded.notes,
        vec![session_state::LoadNote::LoneSurrogate {
            path: path.clone(),
            line: 1,
            byte_offset: 36,
            escape: "\\ud83c".to_owned(),
        }]
    );
    assert_eq!(&body[36..42], b"\\ud83c");
    // Saving the loaded list plus a message appends: the reference's line is kept exactly.
    let mut s = loaded.state.clone();
    s.messages.push(msg("user", "three"));
    let report = store.save_expecting(&s, loaded.generation).unwrap();
    assert_eq!(report.mode, SaveMode::Appended { messages: 1 });
    let mut want = body.clone();
    want.extend(session_schema::to_line(&s.messages[2]).unwrap());
    assert_eq!(fs::read(&path).unwrap(), want);
    // Another store (no cached list) appends too, after comparing the lines as parsed.
    let other = StateStore::open(dir.path()).unwrap();
    let again = other.load(ID).unwrap().unwrap();
    assert_eq!(again.notes.len(), 1);
    s.messages.push(msg("assistant", "four"));
    assert_eq!(
        other.save_expecting(&s, again.generation).unwrap().mode,
        SaveMode::Appended { messages: 1 }
    );
    want.extend(session_schema::to_line(&s.messages[3]).unwrap());
    assert_eq!(fs::read(&path).unwrap(), want);
    // A rewrite (an earlier message changed) still writes the unchanged line as it was.
    s.messages[1] = msg("assistant", "edited");
    assert_eq!(other.save(&s).unwrap().mode, SaveMode::Rewritten);
    let file = fs::read(&path).unwrap();
    assert!(
        file.starts_with(CUT_EMOJI),
        "{}",
        String::from_utf8_lossy(&file)
    );
    let reloaded = StateStore::open(dir.path())
        .unwrap()
        .load(ID)
        .unwrap()
        .unwrap();
    assert_eq!(reloaded.state.messages, s.messages);
    assert_eq!(reloaded.notes.len(), 1);
    // Changing the message itself writes the new value.
    s.messages[0] = msg("user", "emoji fixed");
    other.save(&s).unwrap();
    assert!(!fs::read(&path).unwrap().windows(6).any(|w| w == b"\\ud83c"));
}

#[test]
fn a_reference_file_that_is_not_one_clean_message_per_line_is_rewritten() {
    // Appending is only right when the reference's file is exactly one complete message per
    // line; anything else is rewritten (the content is what `load` returned).
    let one = b"{\"role\":\"user\",\"content\":\"a\"}\n";
    let cases: [(&str, Vec<u8>, SaveMode); 5] = [
        ("clean", one.to_vec(), SaveMode::Appended { messages: 1 }),
        (
            "blank line",
            [one, b"\n".as_slice()].concat(),
            SaveMode::Rewritten,
        ),
        (
            "no final newline",
            one[..one.len() - 1].to_vec(),
            SaveMode::Rewritten,
        ),
        (
            "torn tail",
            [one, b"{\"role\":\"us".as_slice()].concat(),
            SaveMode::Rewritten,
        ),
        (
            "corrupt line",
            [b"nope\n".as_slice(), one].concat(),
            SaveMode::Rewritten,
        ),
    ];
    for (case, body, mode) in cases {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(dir.path()).unwrap();
        reference_session(dir.path(), &body, 1);
        let mut s = store.load(ID).unwrap().unwrap().state;
        assert_eq!(s.messages.len(), 1, "{case}");
        s.messages.push(msg("assistant", "b"));
        assert_eq!(store.save(&s).unwrap().mode, mode, "{case}");
        let file = fs::read(dir.path().join("messages").join(format!("{ID}.jsonl"))).unwrap();
        assert_eq!(file, lines_of(&s.messages), "{case}");
        let loaded = store.load(ID).unwrap().unwrap();
        assert_eq!(loaded.state.messages, s.messages, "{case}");
        assert!(loaded.damage.is_empty(), "{case}: {:?}", loaded.damage);
    }
}

#[test]
fn a_lone_surrogate_in_a_legacy_snapshot_is_reported_and_migrated_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    fs::write(
        dir.path().join("state").join(format!("{ID}.json")),
        format!(
            r#"{{"schema_version":1,"session_id":"{ID}","updated_at":"2026-01-01T00:00:00.000Z","messages":[{{"role":"assistant","content":"ok"}},{{"role":"user","content":"emoji cut \ud83c here"}}]}}"#
        ),
    )
    .unwrap();
    let legacy = dir.path().join("state").join(format!("{ID}.json"));
    let loaded = store.load(ID).unwrap().unwrap();
    assert_eq!(
        loaded.source,
        session_state::LoadSource::Legacy { migrated: true }
    );
    assert!(loaded.damage.is_empty(), "{:?}", loaded.damage);
    assert_eq!(
        loaded.notes,
        vec![session_state::LoadNote::LoneSurrogate {
            path: legacy,
            line: 2,
            byte_offset: 36,
            escape: "\\ud83c".to_owned(),
        }]
    );
    // The migrated messages file holds the line as the reference would write it.
    let main = dir.path().join("messages").join(format!("{ID}.jsonl"));
    let mut want = b"{\"role\":\"assistant\",\"content\":\"ok\"}\n".to_vec();
    want.extend_from_slice(CUT_EMOJI);
    assert_eq!(fs::read(&main).unwrap(), want);
    // And loads from there with the same note, the same messages, and appends after it.
    let again = store.load(ID).unwrap().unwrap();
    assert_eq!(again.source, session_state::LoadSource::Db);
    assert_eq!(again.state.messages, loaded.state.messages);
    assert_eq!(again.notes.len(), 1);
    let mut s = again.state.clone();
    s.messages.push(msg("assistant", "more"));
    assert_eq!(
        store.save_expecting(&s, again.generation).unwrap().mode,
        SaveMode::Appended { messages: 1 }
    );
    want.extend(session_schema::to_line(&s.messages[2]).unwrap());
    assert_eq!(fs::read(&main).unwrap(), want);
}

#[test]
fn out_of_range_numbers_in_the_database_are_reported_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    let s = state(ID, 2, "a");
    store.save(&s).unwrap();
    drop(store);
    // Another tool wrote a generation counter of u64::MAX (-1 as SQLite integer) and a
    // negative message_count.
    let conn = Connection::open(dir.path().join("state.db")).unwrap();
    conn.execute("UPDATE session_files SET generation = -1", [])
        .unwrap();
    drop(conn);
    let store = StateStore::open(dir.path()).unwrap();
    let mut next = s.clone();
    next.messages.push(msg("assistant", "after the wrap"));
    store.save(&next).unwrap();
    assert_eq!(
        store.load(ID).unwrap().unwrap().state.messages,
        next.messages
    );
    drop(store);
    let conn = Connection::open(dir.path().join("state.db")).unwrap();
    conn.execute("UPDATE session_state SET message_count = -3", [])
        .unwrap();
    drop(conn);
    let store = StateStore::open(dir.path()).unwrap();
    let loaded = store.load(ID).unwrap().unwrap();
    assert_eq!(loaded.state.messages, next.messages);
    let mismatch: Vec<_> = loaded
        .damage
        .iter()
        .filter(|d| matches!(d.kind, MessageDamageKind::CountMismatch { .. }))
        .collect();
    assert_eq!(mismatch.len(), 1);
    assert_eq!(
        mismatch[0].kind,
        MessageDamageKind::CountMismatch {
            expected: 0,
            found: 3
        }
    );
    assert!(
        mismatch[0].detail.contains("(-3)"),
        "{}",
        mismatch[0].detail
    );
}
