//! Saves that fail or stop half-way never cost anyone a message:
//!
//! * the roll-forward of a rewrite whose rename a crash interrupted never overwrites a newer
//!   save (the reference resuming the session, a replaced messages file, a changed temp
//!   file): the temp file is kept aside in `messages/stale/` and reported;
//! * bytes a crashed append left past the committed end are cut by the next `open` (or the
//!   next save of any session), so a reader of the whole file never takes them for history;
//! * a save that fails at any I/O step (`ENOSPC`, `EIO`, a short write; injected through the
//!   `io_fault` hook) leaves the messages file byte-identical, no temp file behind, and an
//!   error whose `source()` is the OS error.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::msg;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rusqlite::Connection;
use session_schema::{BaseMessage, SessionState, Timestamp};
use session_state::{
    FaultPoint, IoFault, IoStep, MessageDamageKind, Recovery, StaleReason, StateError, StateStore,
    StoreOptions, WriteUnavailable,
};

const ID: &str = "f6d2c6d5-4a12-4cc4-bbc9-9a0c0d2b5af1";
const OTHER: &str = "0a1b2c3d-0000-4000-8000-000000000002";

/// `ENOSPC` and `EIO` on Linux.
const ENOSPC: i32 = 28;
const EIO: i32 = 5;

fn state(id: &str, n: usize, tag: &str) -> SessionState {
    SessionState {
        schema_version: Some(1i64.into()),
        session_id: id.to_owned(),
        updated_at: Timestamp::from_raw(format!("2026-11-30T10:00:{:02}.000Z", n % 60)),
        run_id: Some(format!("run-{tag}")),
        messages: (0..n)
            .map(|i| {
                msg(
                    if i % 2 == 0 { "user" } else { "assistant" },
                    &format!("{tag} {i}"),
                )
            })
            .collect(),
        ..Default::default()
    }
}

fn lines_of(messages: &[BaseMessage]) -> Vec<u8> {
    messages
        .iter()
        .flat_map(|m| session_schema::to_line(m).unwrap())
        .collect()
}

fn main_file(root: &Path, id: &str) -> PathBuf {
    root.join("messages").join(format!("{id}.jsonl"))
}

/// Names of the files in `messages/` (not the append intent, not directories).
fn message_files(root: &Path) -> BTreeSet<String> {
    fs::read_dir(root.join("messages"))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != ".append-intent")
        .collect()
}

/// Options whose crash hook stops a save at `point` while `armed`.
fn crash_at(point: FaultPoint) -> (StoreOptions, Arc<AtomicBool>) {
    let armed = Arc::new(AtomicBool::new(false));
    let a = armed.clone();
    let options = StoreOptions {
        fault_hook: Some(Arc::new(move |p| p == point && a.load(Ordering::SeqCst))),
        ..StoreOptions::default()
    };
    (options, armed)
}

/// The reference's `save` done by hand (compat §2.6): the whole file through a temp name,
/// then its upsert of the row.
fn reference_save(root: &Path, s: &SessionState) {
    let tmp = root
        .join("messages")
        .join(format!("{}.jsonl.4242.1764.beef.tmp", s.session_id));
    fs::write(&tmp, lines_of(&s.messages)).unwrap();
    fs::rename(&tmp, main_file(root, &s.session_id)).unwrap();
    let summary = session_state::summarize(&s.messages, s.meta.as_ref());
    Connection::open(root.join("state.db"))
        .unwrap()
        .execute(
            "INSERT INTO session_state (session_id, updated_at, run_id, invoke_seq, schema_version, meta_json, message_count, last_user_message, workspace_root) VALUES (?, ?, ?, ?, 1, NULL, ?, ?, ?) ON CONFLICT(session_id) DO UPDATE SET updated_at = excluded.updated_at, run_id = excluded.run_id, invoke_seq = excluded.invoke_seq, schema_version = excluded.schema_version, meta_json = excluded.meta_json, message_count = excluded.message_count, last_user_message = excluded.last_user_message, workspace_root = excluded.workspace_root",
            rusqlite::params![
                s.session_id,
                s.updated_at.as_str(),
                s.run_id,
                s.invoke_seq,
                summary.message_count as i64,
                summary.last_user_message,
                summary.workspace_root
            ],
        )
        .unwrap();
}

/// A rewrite of session `ID` (2 messages, the first one then replaced) stopped right after
/// its commit: the row says "ours", the temp file holds it, the messages file the old list.
fn rewrite_stopped_after_commit(root: &Path) -> (SessionState, SessionState) {
    let (options, armed) = crash_at(FaultPoint::Committed);
    let store = StateStore::open_with(root, options).unwrap();
    let old = state(ID, 2, "old");
    store.save(&old).unwrap();
    let mut ours = old.clone();
    ours.messages[0] = msg("user", "[summary of earlier turns]");
    ours.updated_at = Timestamp::from_raw("2026-11-30T11:00:00.000Z");
    armed.store(true, Ordering::SeqCst);
    match store.save(&ours) {
        Err(StateError::InjectedFault { point }) => assert_eq!(point, FaultPoint::Committed),
        other => panic!("{other:?}"),
    }
    (old, ours)
}

fn temp_name() -> String {
    format!("{ID}.jsonl.g2.tmp")
}

/// The one recovery step `open` took: a temp file kept aside for `reason`.
fn kept_aside(store: &StateStore, root: &Path, reason: StaleReason) -> PathBuf {
    match store.recovery() {
        [
            Recovery::StaleTempKept {
                session_id,
                temp,
                kept,
                reason: r,
            },
        ] => {
            assert_eq!(session_id, ID);
            assert_eq!(temp, &root.join("messages").join(temp_name()));
            assert_eq!(kept, &root.join("messages/stale").join(temp_name()));
            assert_eq!(*r, reason);
            assert!(!temp.exists());
            kept.clone()
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_stale_rewrite_never_overwrites_a_newer_save_of_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let (old, ours) = rewrite_stopped_after_commit(root);
    // The reference resumes the session from its messages file (still the old list: the
    // rename never happened), continues to 10 messages and saves.
    let mut theirs = old.clone();
    for i in 2..10 {
        theirs.messages.push(msg(
            if i % 2 == 0 { "user" } else { "assistant" },
            &format!("reference {i}"),
        ));
    }
    theirs.updated_at = Timestamp::from_raw("2026-11-30T12:00:00.000Z");
    reference_save(root, &theirs);

    let store = StateStore::open(root).unwrap();
    let kept = kept_aside(&store, root, StaleReason::RowChanged);
    let loaded = store.load(ID).unwrap().unwrap();
    assert_eq!(loaded.state.messages.len(), 10);
    assert_eq!(loaded.state.messages, theirs.messages);
    assert!(loaded.damage.is_empty(), "{:?}", loaded.damage);
    assert_eq!(
        fs::read(main_file(root, ID)).unwrap(),
        lines_of(&theirs.messages)
    );
    // Our stale rewrite is kept for forensics, byte for byte.
    assert_eq!(fs::read(&kept).unwrap(), lines_of(&ours.messages));
    assert_eq!(message_files(root), BTreeSet::from([format!("{ID}.jsonl")]));
    // Nothing is left to do for the next open, and the session goes on from the
    // reference's state.
    drop(store);
    let store = StateStore::open(root).unwrap();
    assert!(store.recovery().is_empty(), "{:?}", store.recovery());
    let mut next = loaded.state.clone();
    next.messages.push(msg("assistant", "ours again"));
    store.save_expecting(&next, loaded.generation).unwrap();
    assert_eq!(
        fs::read(main_file(root, ID)).unwrap(),
        lines_of(&next.messages)
    );
}

#[test]
fn a_pending_rewrite_is_not_renamed_over_a_replaced_messages_file() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let (old, _ours) = rewrite_stopped_after_commit(root);
    // Another writer replaced the messages file without updating the row (the reference
    // when its upsert fails after its rename, compat §5 item 2).
    let mut theirs = old.clone();
    theirs
        .messages
        .push(msg("user", "written, row not updated"));
    let body = lines_of(&theirs.messages);
    let tmp = root.join("messages").join("replacement.tmp");
    fs::write(&tmp, &body).unwrap();
    fs::rename(&tmp, main_file(root, ID)).unwrap();

    let store = StateStore::open(root).unwrap();
    kept_aside(&store, root, StaleReason::MessagesFileChanged);
    assert_eq!(fs::read(main_file(root, ID)).unwrap(), body);
    // The row (ours) and the file disagree: the whole file is read and the mismatch reported.
    let loaded = store.load(ID).unwrap().unwrap();
    assert_eq!(loaded.state.messages, theirs.messages);
    let kinds: Vec<&MessageDamageKind> = loaded.damage.iter().map(|d| &d.kind).collect();
    assert!(
        kinds.contains(&&MessageDamageKind::FileChanged),
        "{:?}",
        loaded.damage
    );
}

#[test]
fn a_pending_temp_file_that_changed_is_kept_aside() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let (old, _ours) = rewrite_stopped_after_commit(root);
    let temp = root.join("messages").join(temp_name());
    fs::write(
        &temp,
        b"{\"role\":\"user\",\"content\":\"not what was committed\"}\n",
    )
    .unwrap();
    let store = StateStore::open(root).unwrap();
    kept_aside(&store, root, StaleReason::TempChanged);
    assert_eq!(
        fs::read(main_file(root, ID)).unwrap(),
        lines_of(&old.messages)
    );
}

#[test]
fn an_interrupted_rename_is_completed_when_nothing_changed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let (_old, ours) = rewrite_stopped_after_commit(root);
    let store = StateStore::open(root).unwrap();
    assert_eq!(
        store.recovery(),
        [Recovery::RolledForward {
            session_id: ID.to_owned(),
            temp: root.join("messages").join(temp_name()),
        }]
    );
    assert_eq!(
        fs::read(main_file(root, ID)).unwrap(),
        lines_of(&ours.messages)
    );
    let loaded = store.load(ID).unwrap().unwrap();
    assert_eq!(loaded.state.messages, ours.messages);
    assert!(loaded.damage.is_empty());
    assert_eq!(message_files(root), BTreeSet::from([format!("{ID}.jsonl")]));
}

#[test]
fn lines_of_a_crashed_append_are_cut_by_the_next_open() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let (options, armed) = crash_at(FaultPoint::AppendSynced);
    let store = StateStore::open_with(root, options).unwrap();
    let old = state(ID, 3, "a");
    store.save(&old).unwrap();
    let mut new = old.clone();
    new.messages.push(msg("assistant", "never committed"));
    armed.store(true, Ordering::SeqCst);
    assert!(store.save(&new).is_err());
    drop(store);
    // What a reader of the whole file (the reference) would see now: an extra message.
    let tail = session_schema::to_line(&new.messages[3]).unwrap();
    let mut longer = lines_of(&old.messages);
    longer.extend_from_slice(&tail);
    assert_eq!(fs::read(main_file(root, ID)).unwrap(), longer);

    let store = StateStore::open(root).unwrap();
    assert_eq!(
        store.recovery(),
        [Recovery::TailCut {
            session_id: ID.to_owned(),
            path: main_file(root, ID),
            bytes: tail.len() as u64,
        }]
    );
    assert_eq!(
        fs::read(main_file(root, ID)).unwrap(),
        lines_of(&old.messages)
    );
    let loaded = store.load(ID).unwrap().unwrap();
    assert_eq!(loaded.state.messages, old.messages);
    assert!(loaded.notes.is_empty(), "{:?}", loaded.notes);
}

#[test]
fn the_next_save_of_another_session_cuts_a_crashed_append() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let (options, armed) = crash_at(FaultPoint::AppendWritten);
    let crashing = StateStore::open_with(root, options).unwrap();
    // A process that was running before the crash: its `open` had nothing to cut.
    let other = StateStore::open(root).unwrap();
    let old = state(ID, 2, "a");
    crashing.save(&old).unwrap();
    let mut new = old.clone();
    new.messages.push(msg("assistant", "never committed"));
    armed.store(true, Ordering::SeqCst);
    assert!(crashing.save(&new).is_err());
    drop(crashing);
    let tail = session_schema::to_line(&new.messages[2]).unwrap();

    let report = other.save(&state(OTHER, 1, "b")).unwrap();
    assert_eq!(
        report.recovery,
        [Recovery::TailCut {
            session_id: ID.to_owned(),
            path: main_file(root, ID),
            bytes: tail.len() as u64,
        }]
    );
    assert_eq!(
        fs::read(main_file(root, ID)).unwrap(),
        lines_of(&old.messages)
    );
}

/// What a save starts from in [`a_failed_save_leaves_the_files_as_they_were`].
#[derive(Debug, Clone, Copy, PartialEq)]
enum Case {
    /// Two messages appended to three.
    Append,
    /// The first message replaced (a rewrite through a temp file).
    Rewrite,
    /// The first save of a session (the messages file is created).
    First,
    /// An append to a file that holds bytes past its committed end (cut first).
    AfterTail,
}

impl Case {
    /// The I/O steps a save of this case goes through.
    fn steps(self) -> &'static [IoStep] {
        match self {
            // The intent already names the session (its first save wrote it).
            Case::Append => &[IoStep::AppendWrite, IoStep::AppendFsync, IoStep::Commit],
            Case::Rewrite => &[
                IoStep::TempCreate,
                IoStep::TempWrite,
                IoStep::TempFsync,
                IoStep::TempDirFsync,
                IoStep::Commit,
                IoStep::Rename,
                IoStep::RenameDirFsync,
            ],
            Case::First => &[
                IoStep::IntentWrite,
                IoStep::AppendWrite,
                IoStep::AppendFsync,
                IoStep::AppendDirFsync,
                IoStep::Commit,
            ],
            Case::AfterTail => &[
                IoStep::TailTruncate,
                IoStep::AppendWrite,
                IoStep::AppendFsync,
                IoStep::Commit,
            ],
        }
    }
}

/// The OS error number at the end of `err`'s `source()` chain, if any.
fn os_error(err: &StateError) -> Option<i32> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return io.raw_os_error();
        }
        cur = e.source();
    }
    None
}

/// Runs one save of `case` with `fault` injected at `step` and checks what is left.
fn fail_once(case: Case, step: IoStep, fault: IoFault) {
    let what = format!("{case:?} at {step:?} with {fault:?}");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let inject = Arc::new(Mutex::new(None::<(IoStep, IoFault)>));
    let hook = inject.clone();
    let options = StoreOptions {
        io_fault: Some(Arc::new(move |s| match *hook.lock().unwrap() {
            Some((at, f)) if at == s => Some(f),
            _ => None,
        })),
        ..StoreOptions::default()
    };
    let store = StateStore::open_with(root, options).unwrap();
    let old = state(ID, 3, "a");
    let new = match case {
        Case::Append | Case::AfterTail => {
            let mut n = old.clone();
            n.messages.push(msg("assistant", "b 3"));
            n.messages.push(msg("user", "b 4"));
            n
        }
        Case::Rewrite => {
            let mut n = old.clone();
            n.messages[0] = msg("user", "[summary]");
            n
        }
        Case::First => state(ID, 2, "first"),
    };
    if case != Case::First {
        store.save(&old).unwrap();
    }
    if case == Case::AfterTail {
        let mut f = fs::OpenOptions::new()
            .append(true)
            .open(main_file(root, ID))
            .unwrap();
        std::io::Write::write_all(&mut f, b"{\"role\":\"user\",\"con").unwrap();
    }
    let before = fs::read(main_file(root, ID)).ok();
    let committed = (case != Case::First).then(|| lines_of(&old.messages));
    *inject.lock().unwrap() = Some((step, fault));
    let result = store.save(&new);
    *inject.lock().unwrap() = None;
    let after = fs::read(main_file(root, ID)).ok();
    let errno = match fault {
        IoFault::Fail(e) | IoFault::Short { errno: e, .. } => e,
        _ => unreachable!(),
    };
    let after_commit = step >= IoStep::Rename;
    match result {
        Err(err) => {
            assert!(!after_commit, "{what}: {err}");
            // The cause is kept: the OS error, or SQLite's for the commit.
            if step == IoStep::Commit {
                assert!(
                    matches!(
                        err,
                        StateError::Db {
                            context: "commit",
                            ..
                        }
                    ),
                    "{what}: {err:?}"
                );
                let text = session_error_text(&err);
                let want = if errno == ENOSPC {
                    "database or disk is full"
                } else {
                    "disk I/O error"
                };
                assert!(text.contains(want), "{what}: {text}");
            } else {
                assert_eq!(os_error(&err), Some(errno), "{what}: {err:?}");
            }
            // The messages file is as it was (or, after a cut tail, as committed); no temp.
            assert!(
                after == before || after == committed,
                "{what}: {:?}",
                after.map(|b| String::from_utf8_lossy(&b).into_owned())
            );
            let want_files: BTreeSet<String> = if case == Case::First {
                BTreeSet::new()
            } else {
                BTreeSet::from([format!("{ID}.jsonl")])
            };
            assert_eq!(message_files(root), want_files, "{what}");
            match store.load(ID).unwrap() {
                Some(l) => {
                    assert_eq!(l.state.messages, old.messages, "{what}");
                    assert!(l.damage.is_empty(), "{what}: {:?}", l.damage);
                }
                None => assert_eq!(case, Case::First, "{what}"),
            }
        }
        Ok(report) => {
            // Only the steps after the commit fail without failing the save.
            assert!(after_commit, "{what}: the save did not fail");
            let deferred = report.rename_deferred.expect("deferred rename");
            assert_eq!(os_error(&deferred.error), Some(errno), "{what}");
            assert_eq!(
                store.load(ID).unwrap().unwrap().state.messages,
                new.messages,
                "{what}"
            );
            drop(store);
            let reopened = StateStore::open(root).unwrap();
            if step == IoStep::Rename {
                assert_eq!(
                    reopened.recovery(),
                    [Recovery::RolledForward {
                        session_id: ID.to_owned(),
                        temp: deferred.temp.clone(),
                    }],
                    "{what}"
                );
            }
            assert!(after.is_some());
            assert_eq!(
                fs::read(main_file(root, ID)).unwrap(),
                lines_of(&new.messages),
                "{what}"
            );
            return;
        }
    }
    // Once the disk works again, the same save goes through.
    let store = StateStore::open(root).unwrap();
    store.save(&new).unwrap();
    assert_eq!(
        fs::read(main_file(root, ID)).unwrap(),
        lines_of(&new.messages),
        "{what}"
    );
    assert_eq!(
        store.load(ID).unwrap().unwrap().state.messages,
        new.messages
    );
    assert_eq!(message_files(root), BTreeSet::from([format!("{ID}.jsonl")]));
}

fn session_error_text(err: &StateError) -> String {
    let mut out = err.to_string();
    let mut cur = std::error::Error::source(err);
    while let Some(e) = cur {
        out.push_str(": ");
        out.push_str(&e.to_string());
        cur = e.source();
    }
    out
}

#[test]
fn a_failed_save_leaves_the_files_as_they_were() {
    let mut covered = BTreeSet::new();
    for case in [Case::Append, Case::Rewrite, Case::First, Case::AfterTail] {
        for &step in case.steps() {
            let faults: &[IoFault] = match step {
                IoStep::IntentWrite | IoStep::AppendWrite | IoStep::TempWrite => &[
                    IoFault::Fail(ENOSPC),
                    IoFault::Short {
                        written: 7,
                        errno: ENOSPC,
                    },
                ],
                _ => &[IoFault::Fail(ENOSPC), IoFault::Fail(EIO)],
            };
            for &fault in faults {
                fail_once(case, step, fault);
            }
            covered.insert(step);
        }
    }
    // `DbSetup` is an `open` step: see the next test.
    covered.insert(IoStep::DbSetup);
    assert_eq!(covered, IoStep::ALL.into_iter().collect());
}

#[test]
fn a_store_that_cannot_be_written_is_opened_for_reading_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let s = state(ID, 2, "a");
    StateStore::open(root).unwrap().save(&s).unwrap();
    for (errno, reason) in [
        (ENOSPC, WriteUnavailable::StorageFull),
        (EIO, WriteUnavailable::IoError),
    ] {
        let options = StoreOptions {
            io_fault: Some(Arc::new(move |step| {
                (step == IoStep::DbSetup).then_some(IoFault::Fail(errno))
            })),
            ..StoreOptions::default()
        };
        let err = StateStore::open_with(root, options.clone()).unwrap_err();
        assert_eq!(err.write_unavailable(), Some(reason));
        let (store, fallback) = StateStore::open_for_reading_with(root, options).unwrap();
        let fallback = fallback.expect("opened read-only");
        assert_eq!(fallback.reason, reason);
        assert!(store.is_read_only());
        assert!(
            fallback.to_string().ends_with("; reading it read-only"),
            "{fallback}"
        );
        assert_eq!(store.load(ID).unwrap().unwrap().state.messages, s.messages);
        assert!(store.save(&s).unwrap_err().is_read_only());
    }
    // A store that can be written is opened for writing.
    let (store, fallback) = StateStore::open_for_reading(root).unwrap();
    assert!(fallback.is_none() && !store.is_read_only());
}
