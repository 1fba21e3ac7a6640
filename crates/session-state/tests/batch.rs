//! Batched saves (`StateStore::save_batch`): one commit for many sessions, each session
//! all-or-nothing. The bytes written are those of single saves; compare-and-swap conflicts fail
//! one session or the whole batch as asked; a crash after any write, fsync, rename or commit
//! step leaves every session at its complete old or new state, files included, once the store
//! is opened again; a failing disk at any step takes every write back; a concurrent reader
//! sees complete states only.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::msg;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use session_schema::{BaseMessage, RawJson, SessionState, Timestamp};
use session_state::{
    BatchPolicy, BatchSave, FaultPoint, Generation, IoFault, IoStep, MAX_BATCH_SESSIONS, Recovery,
    SaveMode, StateError, StateStore, StoreOptions,
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

const APPEND: &str = "0a0a0a0a-4a12-4cc4-bbc9-9a0c0d2b5af1";
const REWRITE: &str = "0b0b0b0b-4a12-4cc4-bbc9-9a0c0d2b5af1";
const FRESH: &str = "0c0c0c0c-4a12-4cc4-bbc9-9a0c0d2b5af1";
const GROWN: &str = "0d0d0d0d-4a12-4cc4-bbc9-9a0c0d2b5af1";

fn lines_of(messages: &[BaseMessage]) -> Vec<u8> {
    messages
        .iter()
        .flat_map(|m| session_schema::to_line(m).unwrap())
        .collect()
}

fn main_file(root: &Path, id: &str) -> Vec<u8> {
    fs::read(root.join("messages").join(format!("{id}.jsonl"))).unwrap_or_default()
}

fn message_files(root: &Path) -> BTreeSet<String> {
    fs::read_dir(root.join("messages"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".jsonl") || n.ends_with(".tmp"))
        .collect()
}

/// The old states (saved one by one before the batch) and the new ones the batch saves: an
/// append with new metadata, a rewrite (an earlier message changed), a first save, and an
/// append to a session that started empty.
fn scenario() -> (Vec<SessionState>, Vec<SessionState>) {
    let old_append = state(APPEND, 4, "a");
    let mut new_append = old_append.clone();
    new_append.messages.push(msg("assistant", "a new reply"));
    new_append.messages.push(msg("user", "a new question"));
    new_append.run_id = Some("run-a-new".to_owned());
    new_append.updated_at = Timestamp::from_raw("2026-11-30T12:00:00.000Z");

    let old_rewrite = state(REWRITE, 5, "r");
    let mut new_rewrite = old_rewrite.clone();
    new_rewrite.messages[0] = msg("user", "[summary of earlier turns]");
    new_rewrite.messages.remove(1);
    new_rewrite.meta =
        Some(RawJson::from_json(r#"{"codelia_workspace_root":"/repo/r2"}"#).unwrap());

    let new_fresh = state(FRESH, 3, "f");

    let old_grown = state(GROWN, 0, "g");
    let new_grown = state(GROWN, 2, "g");
    (
        vec![old_append, old_rewrite, old_grown],
        vec![new_append, new_rewrite, new_fresh, new_grown],
    )
}

fn batch_of(states: &[SessionState]) -> Vec<BatchSave<'_>> {
    states.iter().map(BatchSave::new).collect()
}

fn same_state(got: &SessionState, want: &SessionState) -> bool {
    got.messages == want.messages
        && got.meta == want.meta
        && got.run_id == want.run_id
        && got.updated_at == want.updated_at
        && got.invoke_seq == want.invoke_seq
}

#[test]
fn a_batch_writes_the_bytes_and_rows_single_saves_write_with_one_commit() {
    let (olds, news) = scenario();
    let single = tempfile::tempdir().unwrap();
    let batched = tempfile::tempdir().unwrap();
    let commits = Arc::new(Mutex::new(Vec::new()));
    let seen = commits.clone();
    let counting = StoreOptions {
        io_fault: Some(Arc::new(move |step| {
            seen.lock().unwrap().push(step);
            None
        })),
        ..StoreOptions::default()
    };
    let a = StateStore::open(single.path()).unwrap();
    let b = StateStore::open_with(batched.path(), counting).unwrap();
    for s in &olds {
        a.save(s).unwrap();
        b.save(s).unwrap();
    }
    let single_modes: Vec<SaveMode> = news.iter().map(|s| a.save(s).unwrap().mode).collect();
    commits.lock().unwrap().clear();
    let report = b
        .save_batch(&batch_of(&news), BatchPolicy::PerSession)
        .unwrap();
    let batch_modes: Vec<SaveMode> = report
        .saves
        .iter()
        .map(|r| r.as_ref().unwrap().mode)
        .collect();
    assert_eq!(batch_modes, single_modes);
    assert_eq!(
        batch_modes,
        vec![
            SaveMode::Appended { messages: 2 },
            SaveMode::Rewritten,
            SaveMode::Appended { messages: 3 },
            SaveMode::Appended { messages: 2 },
        ]
    );
    assert_eq!(report.saved(), 4);
    // One COMMIT for the four sessions, one fsync per written file, one directory fsync before
    // the commit (a temp file and a created file) and one after the rename.
    let steps = commits.lock().unwrap().clone();
    let count = |s: IoStep| steps.iter().filter(|&&x| x == s).count();
    assert_eq!(count(IoStep::Commit), 1);
    assert_eq!(count(IoStep::AppendFsync), 3);
    assert_eq!(count(IoStep::TempFsync), 1);
    // The directory is synced once (with the temp file's step; the created file's step is
    // checked for failure injection only).
    assert_eq!(count(IoStep::TempDirFsync), 1);
    assert_eq!(count(IoStep::Rename), 1);
    assert_eq!(count(IoStep::RenameDirFsync), 1);
    assert_eq!(count(IoStep::IntentWrite), 1);
    for s in &news {
        let id = &s.session_id;
        let want = lines_of(&s.messages);
        assert_eq!(main_file(single.path(), id), want, "{id}");
        assert_eq!(main_file(batched.path(), id), want, "{id}");
        let loaded = b.load(id).unwrap().unwrap();
        assert!(same_state(&loaded.state, s), "{id}");
        assert!(loaded.damage.is_empty(), "{id}: {:?}", loaded.damage);
    }
    assert_eq!(message_files(batched.path()), message_files(single.path()));
    // The rows are the reference's columns exactly as single saves write them.
    let rows = |root: &Path| -> Vec<Vec<String>> {
        let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
        let mut stmt = conn
            .prepare("SELECT session_id, updated_at, run_id, invoke_seq, schema_version, meta_json, message_count, last_user_message, workspace_root FROM session_state ORDER BY session_id")
            .unwrap();
        stmt.query_map([], |r| {
            (0..9)
                .map(|i| {
                    r.get::<_, rusqlite::types::Value>(i)
                        .map(|v| format!("{v:?}"))
                })
                .collect()
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
    };
    assert_eq!(rows(batched.path()), rows(single.path()));
    // Saved again, each session of the batch appends from the store's cache.
    let mut again = news.clone();
    for s in &mut again {
        s.messages.push(msg("user", "once more"));
    }
    let report = b
        .save_batch(&batch_of(&again), BatchPolicy::PerSession)
        .unwrap();
    for (r, s) in report.saves.iter().zip(&again) {
        assert_eq!(r.as_ref().unwrap().mode, SaveMode::Appended { messages: 1 });
        assert_eq!(
            main_file(batched.path(), &s.session_id),
            lines_of(&s.messages)
        );
    }
}

/// Old and new states of three sessions, stored at their old states; returns the
/// generations.
fn three_stored(store: &StateStore) -> (Vec<SessionState>, Vec<SessionState>, Vec<Generation>) {
    let ids = [APPEND, REWRITE, GROWN];
    let olds: Vec<SessionState> = ids.iter().map(|id| state(id, 3, "old")).collect();
    let generations = olds
        .iter()
        .map(|s| store.save(s).unwrap().generation)
        .collect();
    let news = olds
        .iter()
        .map(|s| {
            let mut n = s.clone();
            n.messages.push(msg("assistant", "new"));
            n
        })
        .collect();
    (olds, news, generations)
}

#[test]
fn a_conflict_fails_only_its_session_under_the_per_session_policy() {
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    let (olds, news, generations) = three_stored(&store);
    // Another window saved the second session since it was loaded.
    let mut elsewhere = olds[1].clone();
    elsewhere.messages.push(msg("user", "from another window"));
    let theirs = store.save(&elsewhere).unwrap().generation;
    let before = main_file(dir.path(), REWRITE);

    let saves: Vec<BatchSave<'_>> = news
        .iter()
        .zip(&generations)
        .map(|(s, g)| BatchSave::expecting(s, Some(*g)))
        .collect();
    let report = store.save_batch(&saves, BatchPolicy::PerSession).unwrap();
    assert_eq!(report.saved(), 2);
    match &report.saves[1] {
        Err(StateError::Conflict {
            session_id,
            expected,
            found,
        }) => {
            assert_eq!(session_id, REWRITE);
            assert_eq!(expected, &generations[1].to_string());
            assert_eq!(found, &theirs.to_string());
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    // The conflicting session is exactly as the other window left it.
    assert_eq!(main_file(dir.path(), REWRITE), before);
    let kept = store.load(REWRITE).unwrap().unwrap();
    assert_eq!(kept.generation, Some(theirs));
    assert_eq!(kept.state.messages, elsewhere.messages);
    // The others are saved, with the generations their reports give.
    for i in [0, 2] {
        let saved = report.saves[i].as_ref().unwrap();
        let loaded = store.load(&news[i].session_id).unwrap().unwrap();
        assert_eq!(loaded.generation, Some(saved.generation));
        assert_eq!(loaded.state.messages, news[i].messages);
        assert_eq!(
            main_file(dir.path(), &news[i].session_id),
            lines_of(&news[i].messages)
        );
    }
}

#[test]
fn a_conflict_fails_the_whole_batch_under_all_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    let (olds, news, generations) = three_stored(&store);
    // The third session was saved elsewhere; the batch also creates a new session.
    let mut elsewhere = olds[2].clone();
    elsewhere.messages.push(msg("user", "from another window"));
    let theirs = store.save(&elsewhere).unwrap().generation;
    let fresh = state(FRESH, 2, "f");
    let files_before: BTreeMap<String, Vec<u8>> = message_files(dir.path())
        .into_iter()
        .map(|n| {
            let bytes = fs::read(dir.path().join("messages").join(&n)).unwrap();
            (n, bytes)
        })
        .collect();

    let mut saves: Vec<BatchSave<'_>> = news
        .iter()
        .zip(&generations)
        .map(|(s, g)| BatchSave::expecting(s, Some(*g)))
        .collect();
    saves.insert(0, BatchSave::expecting(&fresh, None));
    let err = store
        .save_batch(&saves, BatchPolicy::AllOrNothing)
        .unwrap_err();
    match err {
        StateError::Conflict {
            session_id, found, ..
        } => {
            assert_eq!(session_id, GROWN);
            assert_eq!(found, theirs.to_string());
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    // Nothing of any session was written: same files, same bytes, same generations.
    let files_after: BTreeMap<String, Vec<u8>> = message_files(dir.path())
        .into_iter()
        .map(|n| {
            let bytes = fs::read(dir.path().join("messages").join(&n)).unwrap();
            (n, bytes)
        })
        .collect();
    assert_eq!(files_after, files_before);
    assert!(store.load(FRESH).unwrap().is_none());
    for (s, g) in olds.iter().zip(&generations).take(2) {
        let loaded = store.load(&s.session_id).unwrap().unwrap();
        assert_eq!(loaded.generation, Some(*g));
        assert_eq!(loaded.state.messages, s.messages);
    }
    // Without the conflict the same batch commits every session.
    saves[3] = BatchSave::expecting(&news[2], Some(theirs));
    let report = store.save_batch(&saves, BatchPolicy::AllOrNothing).unwrap();
    assert_eq!(report.saved(), 4);
}

#[test]
fn a_batch_is_refused_whole_for_a_repeated_session_and_per_session_for_a_bad_id() {
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    let a = state(APPEND, 2, "a");
    let twice = state(APPEND, 3, "a");
    let err = store
        .save_batch(
            &[BatchSave::new(&a), BatchSave::new(&twice)],
            BatchPolicy::PerSession,
        )
        .unwrap_err();
    assert!(
        matches!(&err, StateError::InvalidBatch { detail } if detail == &format!("session {APPEND} appears twice")),
        "{err:?}"
    );
    assert!(store.load(APPEND).unwrap().is_none());
    assert!(message_files(dir.path()).is_empty());

    let bad = state("../escape", 1, "x");
    let report = store
        .save_batch(
            &[BatchSave::new(&bad), BatchSave::new(&a)],
            BatchPolicy::PerSession,
        )
        .unwrap();
    assert!(matches!(report.saves[0], Err(StateError::UnsafeId { .. })));
    assert_eq!(report.saved(), 1);
    assert_eq!(main_file(dir.path(), APPEND), lines_of(&a.messages));
    assert!(matches!(
        store.save_batch(
            &[BatchSave::new(&bad), BatchSave::new(&twice)],
            BatchPolicy::AllOrNothing
        ),
        Err(StateError::UnsafeId { .. })
    ));
    assert_eq!(main_file(dir.path(), APPEND), lines_of(&a.messages));

    let many: Vec<SessionState> = (0..=MAX_BATCH_SESSIONS)
        .map(|i| SessionState {
            session_id: format!("s{i}"),
            ..Default::default()
        })
        .collect();
    assert!(matches!(
        store.save_batch(&batch_of(&many), BatchPolicy::PerSession),
        Err(StateError::InvalidBatch { .. })
    ));
    assert!(store.load("s0").unwrap().is_none());
}

/// Runs the batch with a crash at the `k`-th fault point it reaches; `None` when the batch
/// reached fewer points (it completed). Then checks what a new `open` sees.
fn crash_batch_at(k: usize) -> Option<FaultPoint> {
    let (olds, news) = scenario();
    let dir = tempfile::tempdir().unwrap();
    let armed = Arc::new(AtomicBool::new(false));
    let reached = Arc::new(AtomicUsize::new(0));
    let stopped_at = Arc::new(Mutex::new(None));
    let (a, r, s) = (armed.clone(), reached.clone(), stopped_at.clone());
    let options = StoreOptions {
        fault_hook: Some(Arc::new(move |point| {
            if !a.load(Ordering::SeqCst) {
                return false;
            }
            let stop = r.fetch_add(1, Ordering::SeqCst) == k;
            if stop {
                *s.lock().unwrap() = Some(point);
            }
            stop
        })),
        ..StoreOptions::default()
    };
    {
        let store = StateStore::open_with(dir.path(), options).unwrap();
        for s in &olds {
            store.save(s).unwrap();
        }
        armed.store(true, Ordering::SeqCst);
        let result = store.save_batch(&batch_of(&news), BatchPolicy::PerSession);
        let point = *stopped_at.lock().unwrap();
        match point {
            Some(p) => assert!(
                matches!(result, Err(StateError::InjectedFault { point }) if point == p),
                "{result:?}"
            ),
            None => assert_eq!(result.unwrap().saved(), news.len()),
        }
        // The process dies here: nothing else runs.
    }
    let point = *stopped_at.lock().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    let committed = point.is_none_or(|p| p >= FaultPoint::Committed);
    for new in &news {
        let id = &new.session_id;
        let old = olds.iter().find(|o| &o.session_id == id);
        let Some(loaded) = store.load(id).unwrap() else {
            // Only a session that had no row before the crash may have none.
            assert!(old.is_none() && !committed, "{point:?}: {id} lost");
            continue;
        };
        assert!(loaded.damage.is_empty(), "{point:?}: {:?}", loaded.damage);
        // The batch is one commit: every session is at its old state before it and at its
        // new state after it.
        let want = if committed { Some(new) } else { old };
        assert!(
            want.is_some_and(|w| same_state(&loaded.state, w)),
            "{point:?}: {id} is neither at the expected old nor new state"
        );
        // The reference reads the whole main file: after `open` it holds exactly the
        // loaded messages (interrupted renames completed, uncommitted tails cut).
        assert_eq!(
            main_file(dir.path(), id),
            lines_of(&loaded.state.messages),
            "{point:?}: {id}"
        );
    }
    // Life goes on: the next batch saves everything, byte for byte.
    let mut next = news.clone();
    for s in &mut next {
        s.messages.push(msg("user", "after the crash"));
    }
    let report = store
        .save_batch(&batch_of(&next), BatchPolicy::PerSession)
        .unwrap();
    assert_eq!(report.saved(), next.len(), "{point:?}");
    for s in &next {
        assert_eq!(
            main_file(dir.path(), &s.session_id),
            lines_of(&s.messages),
            "{point:?}"
        );
        let loaded = store.load(&s.session_id).unwrap().unwrap();
        assert!(same_state(&loaded.state, s));
    }
    assert!(
        !message_files(dir.path())
            .iter()
            .any(|n| n.ends_with(".tmp")),
        "{point:?}"
    );
    point
}

#[test]
fn a_crash_at_any_step_of_a_batch_leaves_every_session_at_its_old_or_new_state() {
    let mut hit = BTreeSet::new();
    let mut k = 0;
    while let Some(point) = crash_batch_at(k) {
        hit.insert(point);
        k += 1;
        assert!(k < 100, "the batch never completes");
    }
    // Every write, fsync, commit and rename step of a batch was crashed at (the tail cut
    // only happens after an earlier crash).
    let want: BTreeSet<FaultPoint> = FaultPoint::ALL
        .into_iter()
        .filter(|p| *p != FaultPoint::TailTruncated)
        .collect();
    assert_eq!(hit, want);
}

#[test]
fn the_next_save_of_another_session_cuts_every_tail_a_crashed_batch_left() {
    let dir = tempfile::tempdir().unwrap();
    let armed = Arc::new(AtomicBool::new(false));
    let a = armed.clone();
    let options = StoreOptions {
        fault_hook: Some(Arc::new(move |p| {
            a.load(Ordering::SeqCst) && p == FaultPoint::AppendSynced
        })),
        ..StoreOptions::default()
    };
    let store = StateStore::open_with(dir.path(), options).unwrap();
    let (olds, news, _) = three_stored(&store);
    armed.store(true, Ordering::SeqCst);
    assert!(matches!(
        store.save_batch(&batch_of(&news), BatchPolicy::PerSession),
        Err(StateError::InjectedFault {
            point: FaultPoint::AppendSynced
        })
    ));
    armed.store(false, Ordering::SeqCst);
    // Every appending session of the batch is named in the append intent.
    let intent = fs::read_to_string(dir.path().join("messages").join(".append-intent")).unwrap();
    assert_eq!(intent, format!("{APPEND}\n{REWRITE}\n{GROWN}\n"));
    for s in &olds {
        assert!(main_file(dir.path(), &s.session_id).len() > lines_of(&s.messages).len());
    }
    let other = state(FRESH, 1, "other");
    let report = store.save(&other).unwrap();
    let mut cut: Vec<(String, u64)> = report
        .recovery
        .iter()
        .filter_map(|r| match r {
            Recovery::TailCut {
                session_id, bytes, ..
            } => Some((session_id.clone(), *bytes)),
            _ => None,
        })
        .collect();
    cut.sort();
    let new_line = session_schema::to_line(&msg("assistant", "new"))
        .unwrap()
        .len() as u64;
    assert_eq!(
        cut,
        vec![
            (APPEND.to_owned(), new_line),
            (REWRITE.to_owned(), new_line),
            (GROWN.to_owned(), new_line),
        ]
    );
    for s in &olds {
        assert_eq!(main_file(dir.path(), &s.session_id), lines_of(&s.messages));
    }
    let intent = fs::read_to_string(dir.path().join("messages").join(".append-intent")).unwrap();
    assert_eq!(intent, format!("{FRESH}\n"));
}

#[test]
fn a_failing_disk_at_any_step_of_a_batch_takes_every_write_back() {
    for step in IoStep::ALL {
        if step == IoStep::DbSetup {
            continue;
        }
        for fault in [
            IoFault::Fail(28),
            IoFault::Short {
                written: 5,
                errno: 5,
            },
        ] {
            let (olds, news) = scenario();
            let dir = tempfile::tempdir().unwrap();
            let armed = Arc::new(AtomicBool::new(false));
            let a = armed.clone();
            let options = StoreOptions {
                io_fault: Some(Arc::new(move |s| {
                    (a.load(Ordering::SeqCst) && s == step).then_some(fault)
                })),
                ..StoreOptions::default()
            };
            let store = StateStore::open_with(dir.path(), options).unwrap();
            for s in &olds {
                store.save(s).unwrap();
            }
            let files_before = message_files(dir.path());
            armed.store(true, Ordering::SeqCst);
            let result = store.save_batch(&batch_of(&news), BatchPolicy::PerSession);
            armed.store(false, Ordering::SeqCst);
            if step == IoStep::TailTruncate {
                // No tail to cut in this batch: nothing failed.
                assert_eq!(result.unwrap().saved(), news.len());
                continue;
            }
            let after_commit = matches!(step, IoStep::Rename | IoStep::RenameDirFsync);
            if after_commit {
                // Committed: the rename is deferred, the new state loads.
                let report = result.unwrap();
                let deferred = report.saves[1].as_ref().unwrap().rename_deferred.as_ref();
                assert!(deferred.is_some(), "{step:?}");
                for s in &news {
                    let loaded = store.load(&s.session_id).unwrap().unwrap();
                    assert!(same_state(&loaded.state, s), "{step:?}");
                }
                continue;
            }
            let err = result.unwrap_err();
            let errno = std::error::Error::source(&err)
                .and_then(|s| s.downcast_ref::<std::io::Error>())
                .and_then(std::io::Error::raw_os_error);
            if step != IoStep::Commit {
                let want = match fault {
                    IoFault::Fail(e) | IoFault::Short { errno: e, .. } => e,
                    _ => unreachable!(),
                };
                assert_eq!(errno, Some(want), "{step:?}: {err}");
            }
            // Every file as before the batch, byte for byte; no temp file, no new file.
            assert_eq!(message_files(dir.path()), files_before, "{step:?}");
            for s in &olds {
                assert_eq!(
                    main_file(dir.path(), &s.session_id),
                    lines_of(&s.messages),
                    "{step:?}"
                );
                let loaded = store.load(&s.session_id).unwrap().unwrap();
                assert!(same_state(&loaded.state, s), "{step:?}");
            }
            assert!(store.load(FRESH).unwrap().is_none(), "{step:?}");
            // And the batch succeeds once the disk does.
            let report = store
                .save_batch(&batch_of(&news), BatchPolicy::PerSession)
                .unwrap();
            assert_eq!(report.saved(), news.len(), "{step:?}");
            for s in &news {
                assert_eq!(main_file(dir.path(), &s.session_id), lines_of(&s.messages));
            }
        }
    }
}

#[test]
fn a_reader_during_batches_sees_every_session_complete_at_one_of_its_versions() {
    let dir = tempfile::tempdir().unwrap();
    let ids = [APPEND, REWRITE, FRESH, GROWN];
    let rounds = 12;
    // Version v of session i: v+1 messages; every third version rewrites the first message.
    let version = |id: &str, v: usize| {
        let mut s = state(id, v + 1, "v");
        if v % 3 == 2 {
            s.messages[0] = msg("user", &format!("compacted at {v}"));
        }
        s
    };
    let writer = StateStore::open(dir.path()).unwrap();
    let first: Vec<SessionState> = ids.iter().map(|id| version(id, 0)).collect();
    writer
        .save_batch(&batch_of(&first), BatchPolicy::PerSession)
        .unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let done = done.clone();
        let root = dir.path().to_path_buf();
        std::thread::spawn(move || {
            let store = StateStore::open(&root).unwrap();
            let mut loads = 0;
            while !done.load(Ordering::SeqCst) || loads == 0 {
                for id in ids {
                    let loaded = store.load(id).unwrap().unwrap();
                    assert!(loaded.damage.is_empty(), "{:?}", loaded.damage);
                    let got = &loaded.state;
                    let v = got.messages.len() - 1;
                    assert!(
                        got.messages == version(id, v).messages
                            && got.invoke_seq == Some(v as i64 + 1),
                        "{id}: an incomplete state"
                    );
                    loads += 1;
                }
            }
            loads
        })
    };
    for v in 1..rounds {
        let states: Vec<SessionState> = ids.iter().map(|id| version(id, v)).collect();
        assert_eq!(
            writer
                .save_batch(&batch_of(&states), BatchPolicy::PerSession)
                .unwrap()
                .saved(),
            ids.len()
        );
    }
    done.store(true, Ordering::SeqCst);
    assert!(reader.join().unwrap() >= ids.len());
    for id in ids {
        assert_eq!(
            main_file(dir.path(), id),
            lines_of(&version(id, rounds - 1).messages)
        );
    }
}

#[test]
fn a_session_another_holder_has_open_fails_alone_and_a_held_lease_is_used() {
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    let elsewhere = StateStore::open(dir.path()).unwrap();
    let a = state(APPEND, 2, "a");
    let b = state(REWRITE, 2, "b");
    let held_elsewhere = elsewhere.lease(REWRITE).unwrap();
    let ours = store.lease(APPEND).unwrap();
    let report = store
        .save_batch(
            &[BatchSave::new(&a), BatchSave::new(&b)],
            BatchPolicy::PerSession,
        )
        .unwrap();
    assert_eq!(report.saved(), 1);
    assert!(report.saves[0].is_ok());
    assert!(
        matches!(&report.saves[1], Err(StateError::SessionBusy { session_id, .. }) if session_id == REWRITE)
    );
    assert!(store.load(REWRITE).unwrap().is_none());
    assert_eq!(main_file(dir.path(), REWRITE), b"");
    drop(held_elsewhere);
    // Our own lease of the first session is still held (the batch did not take another).
    assert!(ours.load().unwrap().is_some());
    assert!(matches!(
        elsewhere.lease(APPEND),
        Err(StateError::SessionBusy { .. })
    ));
}

/// Open descriptors of this process on files under `dir` (Linux).
fn descriptors_under(dir: &Path) -> Option<usize> {
    let entries = fs::read_dir("/proc/self/fd").ok()?;
    Some(
        entries
            .filter_map(|e| fs::read_link(e.ok()?.path()).ok())
            .filter(|target| target.starts_with(dir))
            .count(),
    )
}

#[test]
fn a_batch_holds_one_descriptor_per_session_until_its_commit() {
    let dir = tempfile::tempdir().unwrap();
    let messages = dir.path().join("messages");
    let seen = Arc::new(Mutex::new(None));
    let (s, m) = (seen.clone(), messages.clone());
    let options = StoreOptions {
        io_fault: Some(Arc::new(move |step| {
            if step == IoStep::Commit {
                *s.lock().unwrap() = descriptors_under(&m);
            }
            None
        })),
        ..StoreOptions::default()
    };
    let store = StateStore::open_with(dir.path(), options).unwrap();
    let sessions: Vec<SessionState> = (0..40)
        .map(|i| state(&format!("{i:08x}-4a12-4cc4-bbc9-9a0c0d2b5af1"), 2, "d"))
        .collect();
    let report = store
        .save_batch(&batch_of(&sessions), BatchPolicy::PerSession)
        .unwrap();
    assert_eq!(report.saved(), 40);
    let Some(at_commit) = *seen.lock().unwrap() else {
        return; // No /proc: nothing to count.
    };
    // One per session, and `messages/.append-intent`, which the store keeps open for its
    // next save.
    assert_eq!(at_commit, 40 + 1);
    assert_eq!(descriptors_under(&messages), Some(1));
    drop(store);
    assert_eq!(descriptors_under(&messages), Some(0));
}
