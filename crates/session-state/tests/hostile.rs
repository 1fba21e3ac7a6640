//! Files the store did not commit and files that are not what they seem: a messages file
//! without a row is never cut by a first save; a symbolic link is never followed; a FIFO never
//! makes a reader wait; no read of a session file grows past the documented limit.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::{copy_dir, msg};

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use rusqlite::Connection;
use session_schema::{SessionState, Timestamp};
use session_state::{
    ListQuery, MAX_SESSION_FILE_BYTES, MessageDamageKind, MigrationOutcome, ReconstructionOutcome,
    SaveMode, StateError, StateStore,
};

const ID: &str = "0dd0f11e-0000-4000-8000-000000000001";

fn state(id: &str, texts: &[&str]) -> SessionState {
    SessionState {
        schema_version: Some(1i64.into()),
        session_id: id.to_owned(),
        updated_at: Timestamp::from_raw("2026-11-30T10:00:00.000Z"),
        messages: texts
            .iter()
            .enumerate()
            .map(|(i, t)| msg(if i % 2 == 0 { "user" } else { "assistant" }, t))
            .collect(),
        ..Default::default()
    }
}

fn lines(texts: &[&str]) -> Vec<u8> {
    state(ID, texts)
        .messages
        .iter()
        .flat_map(|m| session_schema::to_line(m).unwrap())
        .collect()
}

fn messages_file(root: &Path, id: &str) -> PathBuf {
    root.join("messages").join(format!("{id}.jsonl"))
}

/// Runs `f` on another thread and fails (instead of hanging the suite) when it does not
/// return within 10 s.
fn within_10s<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|_| panic!("{what} did not return: it waits on the FIFO"))
}

/// A row as the reference writes it (no bookkeeping of ours).
fn reference_row(root: &Path, id: &str, count: i64) {
    let conn = Connection::open(root.join("state.db")).unwrap();
    conn.execute(
        "INSERT INTO session_state (session_id, updated_at, schema_version, message_count) VALUES (?1, '2026-11-30T00:00:00.000Z', 1, ?2)",
        rusqlite::params![id, count],
    )
    .unwrap();
}

#[test]
fn a_first_save_never_cuts_a_messages_file_it_did_not_commit() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let store = StateStore::open(root).unwrap();
    let file = messages_file(root, ID);
    let history: Vec<String> = (0..22).map(|i| format!("turn {i}")).collect();
    let history: Vec<&str> = history.iter().map(String::as_str).collect();
    fs::write(&file, lines(&history)).unwrap();
    let before = fs::read(&file).unwrap();
    // A fresh list that does not start with the file's messages: refused, file intact.
    let err = store.save(&state(ID, &["new", "list"])).unwrap_err();
    match &err {
        StateError::OrphanMessages {
            session_id,
            path,
            bytes,
            lines,
        } => {
            assert_eq!(session_id, ID);
            assert_eq!(path, &file);
            assert_eq!((*bytes, *lines), (before.len() as u64, 22));
        }
        other => panic!("{other}"),
    }
    assert!(err.to_string().contains("sessions repair"), "{err}");
    assert_eq!(fs::read(&file).unwrap(), before);
    assert!(store.load(ID).unwrap().is_none());
    // A list that extends the file's messages keeps every byte and appends.
    let mut longer = history.clone();
    longer.push("turn 22");
    let report = store.save(&state(ID, &longer)).unwrap();
    assert_eq!(report.mode, SaveMode::Appended { messages: 1 });
    let after = fs::read(&file).unwrap();
    assert!(after.starts_with(&before));
    assert_eq!(store.load(ID).unwrap().unwrap().state.messages.len(), 23);

    // A torn line at the end is not the start of any list: refused as well.
    let torn = "0dd0f11e-0000-4000-8000-000000000002";
    let mut body = lines(&["a", "b"]);
    body.extend_from_slice(b"{\"role\":\"user\",\"cont");
    fs::write(messages_file(root, torn), &body).unwrap();
    assert!(matches!(
        store.save(&state(torn, &["a", "b", "c"])),
        Err(StateError::OrphanMessages { .. })
    ));
    assert_eq!(fs::read(messages_file(root, torn)).unwrap(), body);
    // An empty file holds nothing to lose.
    let empty = "0dd0f11e-0000-4000-8000-000000000003";
    fs::write(messages_file(root, empty), b"").unwrap();
    store.save(&state(empty, &["x"])).unwrap();
    assert_eq!(fs::read(messages_file(root, empty)).unwrap(), lines(&["x"]));
}

#[test]
fn moving_a_damaged_state_db_aside_loses_no_session() {
    // The advice for a damaged state.db is to move it aside; a runtime that then starts a
    // session under an existing id must not truncate that session's history.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    copy_dir(&session_test_support::codelia_sessions_dir(), &root);
    fs::rename(root.join("state.db"), dir.path().join("state.db.damaged")).unwrap();
    let store = StateStore::open(&root).unwrap();
    let s2 = "8e66b6d7-b2ff-4b09-8d01-a588020959d5";
    let before = fs::read(messages_file(&root, s2)).unwrap();
    assert!(store.load(s2).unwrap().is_none());
    let err = store.save(&state(s2, &["hello", "hi"])).unwrap_err();
    assert!(
        matches!(err, StateError::OrphanMessages { lines: 26, .. }),
        "{err}"
    );
    assert_eq!(fs::read(messages_file(&root, s2)).unwrap(), before);
    // What repair rebuilds is then loadable with all 26 messages.
    store.reconstruct_orphans(false).unwrap();
    assert_eq!(store.load(s2).unwrap().unwrap().state.messages.len(), 26);
}

#[test]
#[cfg(unix)]
fn a_symbolic_link_is_never_followed() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let store = StateStore::open(&root).unwrap();
    let outside = dir.path().join("outside.txt");
    fs::write(&outside, b"not the store's\n").unwrap();
    // A first save through a link named messages/<id>.jsonl.
    symlink(&outside, messages_file(&root, ID)).unwrap();
    let err = store.save(&state(ID, &["a"])).unwrap_err();
    assert!(
        matches!(&err, StateError::NotRegularFile { kind: "symbolic link", path } if path == &messages_file(&root, ID)),
        "{err}"
    );
    assert_eq!(fs::read(&outside).unwrap(), b"not the store's\n");
    // A session with a row whose file was replaced by a link: load reports it, save refuses.
    let other = "0dd0f11e-0000-4000-8000-000000000004";
    store.save(&state(other, &["a", "b"])).unwrap();
    fs::remove_file(messages_file(&root, other)).unwrap();
    symlink(&outside, messages_file(&root, other)).unwrap();
    let loaded = store.load(other).unwrap().unwrap();
    assert!(loaded.state.messages.is_empty());
    assert!(
        loaded.damage.iter().any(|d| d.kind
            == MessageDamageKind::NotRegularFile {
                kind: "symbolic link"
            }
            && !d.kept),
        "{:?}",
        loaded.damage
    );
    let err = store.save(&state(other, &["a", "b", "c"])).unwrap_err();
    assert!(matches!(err, StateError::NotRegularFile { .. }), "{err}");
    let fresh = StateStore::open(&root).unwrap();
    assert!(matches!(
        fresh.save(&state(other, &["z"])),
        Err(StateError::NotRegularFile { .. })
    ));
    assert_eq!(fs::read(&outside).unwrap(), b"not the store's\n");
    // A link to /dev/zero reads nothing (it would grow memory without bound).
    fs::remove_file(messages_file(&root, other)).unwrap();
    symlink("/dev/zero", messages_file(&root, other)).unwrap();
    let loaded = within_10s("load", {
        let root = root.clone();
        move || {
            StateStore::open(&root)
                .unwrap()
                .load(other)
                .unwrap()
                .unwrap()
        }
    });
    assert!(loaded.state.messages.is_empty());
    // A legacy snapshot that is a link: a diagnostic for the listing, an error for load.
    let legacy = "0dd0f11e-0000-4000-8000-000000000005";
    symlink("/dev/zero", root.join(format!("state/{legacy}.json"))).unwrap();
    let page = within_10s("list", {
        let root = root.clone();
        move || {
            StateStore::open(&root)
                .unwrap()
                .list(&ListQuery::all())
                .unwrap()
        }
    });
    assert_eq!(page.diagnostics.len(), 1);
    assert!(
        page.diagnostics[0].detail.contains("symbolic link"),
        "{:?}",
        page.diagnostics
    );
    assert!(matches!(
        store.load(legacy),
        Err(StateError::NotRegularFile { .. })
    ));
    // Delete removes the link, never its target.
    store.delete(other).unwrap();
    assert!(fs::symlink_metadata(messages_file(&root, other)).is_err());
    assert!(Path::new("/dev/zero").exists());
}

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo (coreutils) is needed for this test");
    assert!(status.success());
}

#[test]
#[cfg(unix)]
fn a_fifo_never_makes_a_reader_wait() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let store = StateStore::open(&root).unwrap();
    // A FIFO in place of a committed session's messages file.
    store.save(&state(ID, &["a", "b"])).unwrap();
    fs::remove_file(messages_file(&root, ID)).unwrap();
    mkfifo(&messages_file(&root, ID));
    // A FIFO as an orphan messages file and as a legacy snapshot.
    let orphan = "0dd0f11e-0000-4000-8000-000000000006";
    mkfifo(&messages_file(&root, orphan));
    let legacy = "0dd0f11e-0000-4000-8000-000000000007";
    mkfifo(&root.join(format!("state/{legacy}.json")));
    let (loaded, page, migration, rebuilt, snapshot, legacy_load, save) =
        within_10s("the readers", {
            let root = root.clone();
            move || {
                let store = StateStore::open(&root).unwrap();
                (
                    store.load(ID).unwrap().unwrap(),
                    store.list(&ListQuery::all()).unwrap(),
                    store.migrate_legacy(false).unwrap(),
                    store.reconstruct_orphans(false).unwrap(),
                    store.snapshot(ID),
                    store.load(legacy),
                    store.save(&state(orphan, &["x"])),
                )
            }
        });
    assert!(
        loaded
            .damage
            .iter()
            .any(|d| d.kind == MessageDamageKind::NotRegularFile { kind: "FIFO" }),
        "{:?}",
        loaded.damage
    );
    assert!(page.diagnostics.iter().any(|d| d.detail.contains("FIFO")));
    assert!(matches!(
        &migration.entries[0].outcome,
        MigrationOutcome::Invalid { detail } if detail.contains("FIFO")
    ));
    let skipped: Vec<_> = rebuilt
        .entries
        .iter()
        .map(|e| (e.session_id.as_str(), &e.outcome))
        .collect();
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].0, orphan);
    assert!(
        matches!(skipped[0].1, ReconstructionOutcome::Skipped { reason } if reason.contains("FIFO"))
    );
    assert!(matches!(
        snapshot,
        Err(StateError::NotRegularFile { kind: "FIFO", .. })
    ));
    assert!(matches!(
        legacy_load,
        Err(StateError::NotRegularFile { kind: "FIFO", .. })
    ));
    assert!(matches!(
        save,
        Err(StateError::NotRegularFile { kind: "FIFO", .. })
    ));
}

#[test]
fn no_read_of_a_session_file_grows_past_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let store = StateStore::open(root).unwrap();
    // A sparse file one byte over the limit: `stat` says how large it is; nothing is read.
    fs::write(messages_file(root, ID), b"").unwrap();
    let f = fs::OpenOptions::new()
        .write(true)
        .open(messages_file(root, ID))
        .unwrap();
    f.set_len(MAX_SESSION_FILE_BYTES + 1).unwrap();
    drop(f);
    reference_row(root, ID, 3);
    let loaded = store.load(ID).unwrap().unwrap();
    assert!(loaded.state.messages.is_empty());
    assert!(
        loaded.damage.iter().any(|d| d.kind
            == MessageDamageKind::TooLarge {
                size: MAX_SESSION_FILE_BYTES + 1,
                limit: MAX_SESSION_FILE_BYTES
            }),
        "{:?}",
        loaded.damage
    );
    let err = store.save(&state(ID, &["a"])).unwrap_err();
    assert!(
        matches!(err, StateError::FileTooLarge { size, limit, .. } if size == MAX_SESSION_FILE_BYTES + 1 && limit == MAX_SESSION_FILE_BYTES),
        "{err}"
    );
    assert_eq!(
        fs::metadata(messages_file(root, ID)).unwrap().len(),
        MAX_SESSION_FILE_BYTES + 1
    );
    // The same for a legacy snapshot.
    let legacy = "0dd0f11e-0000-4000-8000-000000000008";
    let f = fs::File::create(root.join(format!("state/{legacy}.json"))).unwrap();
    f.set_len(MAX_SESSION_FILE_BYTES + 1).unwrap();
    drop(f);
    assert!(matches!(
        store.load(legacy),
        Err(StateError::FileTooLarge { .. })
    ));
    let page = store.list(&ListQuery::all()).unwrap();
    assert!(
        page.diagnostics
            .iter()
            .any(|d| d.detail.contains("more than the")),
        "{:?}",
        page.diagnostics
    );
}
