//! One writer per session: the session lease (a second holder is refused naming the first,
//! saves and deletes of others wait or are refused, reading is never blocked, a lease left by
//! a dead holder is no lease), and compare-and-swap deletion of what was snapshotted.
//! The cross-process cases (a lease held by another process, `kill -9`) are in
//! `multiprocess.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::msg;

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use session_schema::{SessionState, Timestamp};
use session_state::{LeasePurpose, StateError, StateStore, StoreOptions, UNKNOWN_HOLDER_GRACE};

/// Bound for a refusal "at once": far below the store's `max_busy_wait` (120 s), so that a
/// refusal that waited for the holder fails, and far above anything a loaded machine adds, so
/// that a slow run does not.
const AT_ONCE: Duration = Duration::from_secs(30);

const ID: &str = "5e55104e-0000-4000-8000-00000000a11e";

fn state(texts: &[&str]) -> SessionState {
    SessionState {
        schema_version: Some(1i64.into()),
        session_id: ID.to_owned(),
        updated_at: Timestamp::from_raw("2026-11-30T10:00:00.000Z"),
        messages: texts
            .iter()
            .enumerate()
            .map(|(i, t)| msg(if i % 2 == 0 { "user" } else { "assistant" }, t))
            .collect(),
        ..Default::default()
    }
}

fn busy_holder(e: StateError) -> session_state::LeaseHolder {
    match e {
        StateError::SessionBusy { session_id, holder } => {
            assert_eq!(session_id, ID);
            *holder
        }
        other => panic!("expected SessionBusy, got {other}"),
    }
}

#[test]
fn a_second_holder_is_refused_at_once_with_the_first_named() {
    let dir = tempfile::tempdir().unwrap();
    let a = StateStore::open(dir.path()).unwrap();
    let b = StateStore::open(dir.path()).unwrap();
    let lease = a.lease(ID).unwrap();
    assert_eq!(lease.holder().purpose, LeasePurpose::Open);
    let started = Instant::now();
    let err = b.lease(ID).unwrap_err();
    assert!(started.elapsed() < AT_ONCE, "{:?}", started.elapsed());
    let text = err.to_string();
    let holder = busy_holder(err);
    assert_eq!(holder.pid, Some(std::process::id()));
    assert_eq!(holder.purpose, LeasePurpose::Open);
    assert_eq!(holder.since, lease.holder().since);
    assert_eq!(holder.host, lease.holder().host);
    assert!(holder.since.as_ref().unwrap().parse().is_some());
    assert!(
        text.contains(&format!("pid {}", std::process::id())) && text.contains("since "),
        "{text}"
    );
    // The same store cannot take it twice either: one holder per session.
    assert!(a.lease(ID).unwrap_err().is_session_busy());
    // Reading is never blocked, and the listing says who has it open.
    a.save(&state(&["hi"])).unwrap();
    assert_eq!(b.load(ID).unwrap().unwrap().state.messages.len(), 1);
    let open = b.open_sessions().unwrap();
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].session_id, ID);
    assert_eq!(open[0].holder, *lease.holder());
    assert_eq!(b.lease_holder(ID).unwrap().as_ref(), Some(lease.holder()));
    // Released: the lease file goes, and the next holder gets it at once.
    let path = lease.path().to_owned();
    assert!(path.is_file());
    drop(lease);
    assert!(!path.exists());
    assert!(b.open_sessions().unwrap().is_empty());
    let again = b.lease(ID).unwrap();
    assert_eq!(again.holder().purpose, LeasePurpose::Open);
}

#[test]
fn saves_and_deletes_of_others_are_refused_while_the_session_is_open() {
    let dir = tempfile::tempdir().unwrap();
    let holder = StateStore::open(dir.path()).unwrap();
    let other = StateStore::open(dir.path()).unwrap();
    let lease = holder.lease(ID).unwrap();
    lease.save(&state(&["one"])).unwrap();
    // The holder's store saves without a further lock.
    holder.save(&state(&["one", "two"])).unwrap();
    let file = dir.path().join(format!("messages/{ID}.jsonl"));
    let before = fs::read(&file).unwrap();
    let started = Instant::now();
    let err = other.save(&state(&["other"])).unwrap_err();
    assert!(started.elapsed() < AT_ONCE, "{:?}", started.elapsed());
    assert_eq!(busy_holder(err).pid, Some(std::process::id()));
    let loaded = other.load(ID).unwrap().unwrap();
    let err = other
        .save_expecting(&state(&["x"]), loaded.generation)
        .unwrap_err();
    assert!(err.is_session_busy(), "{err}");
    assert!(other.delete(ID).unwrap_err().is_session_busy());
    assert_eq!(
        fs::read(&file).unwrap(),
        before,
        "nothing written by others"
    );
    assert_eq!(other.load(ID).unwrap().unwrap().state.messages.len(), 2);
    drop(lease);
    other.save(&state(&["one", "two", "three"])).unwrap();
    assert_eq!(holder.load(ID).unwrap().unwrap().state.messages.len(), 3);
}

#[test]
fn a_save_waits_for_a_housekeeping_step_instead_of_failing() {
    let dir = tempfile::tempdir().unwrap();
    let gc = StateStore::open(dir.path()).unwrap();
    let writer = StateStore::open(dir.path()).unwrap();
    writer.save(&state(&["one"])).unwrap();
    let released = Arc::new(AtomicBool::new(false));
    let step = gc.lease_for_housekeeping(ID).unwrap();
    assert_eq!(step.holder().purpose, LeasePurpose::Housekeeping);
    std::thread::scope(|s| {
        let flag = released.clone();
        let saver = s.spawn(move || {
            let r = writer.save(&state(&["one", "two"]));
            // Read when the save returns: set only just before the step ends.
            (r, flag.load(Ordering::SeqCst))
        });
        // Whether the saver is waiting by now or starts later, it cannot get through before
        // the step ends: the outcome does not depend on this pause.
        std::thread::sleep(Duration::from_millis(150));
        released.store(true, Ordering::SeqCst);
        drop(step);
        let (result, after_the_step) = saver.join().unwrap();
        result.unwrap();
        assert!(after_the_step, "the save went through only after the step");
    });
    assert_eq!(gc.load(ID).unwrap().unwrap().state.messages.len(), 2);
    // A holder that outlasts the wait is reported, not waited for forever.
    let patient_not = StoreOptions {
        max_busy_wait: Duration::from_millis(50),
        ..StoreOptions::default()
    };
    let short = StateStore::open_with(dir.path(), patient_not).unwrap();
    let _step = gc.lease_for_housekeeping(ID).unwrap();
    let holder = busy_holder(short.save(&state(&["x"])).unwrap_err());
    assert_eq!(holder.purpose, LeasePurpose::Housekeeping);
}

#[test]
fn a_lease_left_by_a_dead_holder_is_no_lease() {
    // A lease file whose holder is gone (its lock died with it) holds a stale note.
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    fs::create_dir_all(dir.path().join("leases")).unwrap();
    let path = dir.path().join(format!("leases/{ID}.lease"));
    fs::write(
        &path,
        format!(
            r#"{{"session_id":"{ID}","pid":999999,"host":"gone","since":"2020-01-01T00:00:00.000Z","purpose":"open","program":"x"}}"#
        ),
    )
    .unwrap();
    assert_eq!(store.lease_holder(ID).unwrap(), None);
    assert!(store.open_sessions().unwrap().is_empty());
    store.save(&state(&["one"])).unwrap();
    let lease = store.lease(ID).unwrap();
    let note = fs::read_to_string(&path).unwrap();
    assert!(
        note.contains(&format!("\"pid\":{}", std::process::id())),
        "{note}"
    );
    assert!(!note.contains("gone"), "{note}");
    drop(lease);
}

#[test]
#[cfg(target_os = "linux")]
fn a_holder_that_cannot_be_identified_is_reported_after_the_grace() {
    // The lock is held but its note is missing (or not yet written): after a short grace
    // the lease is refused naming the pid the kernel lists.
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    fs::create_dir_all(dir.path().join("leases")).unwrap();
    let path = dir.path().join(format!("leases/{ID}.lease"));
    let raw = fs::File::create(&path).unwrap();
    raw.lock().unwrap();
    let started = Instant::now();
    let holder = busy_holder(store.lease(ID).unwrap_err());
    let took = started.elapsed();
    assert!(took >= UNKNOWN_HOLDER_GRACE, "{took:?}");
    // Given up after the grace, not after `max_busy_wait`.
    assert!(took < UNKNOWN_HOLDER_GRACE + AT_ONCE, "{took:?}");
    assert_eq!(holder.purpose, LeasePurpose::Unknown);
    if Path::new("/proc/locks").exists() {
        assert_eq!(holder.pid, Some(std::process::id()));
    }
    raw.unlock().unwrap();
    drop(store.lease(ID).unwrap());
}

#[test]
fn leases_refuse_links_and_read_only_stores() {
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    store.save(&state(&["one"])).unwrap();
    let ro = StateStore::open_read_only(dir.path()).unwrap();
    assert!(ro.lease(ID).unwrap_err().is_read_only());
    assert_eq!(ro.lease_holder(ID).unwrap(), None);
    let lease = store.lease(ID).unwrap();
    assert_eq!(ro.lease_holder(ID).unwrap().as_ref(), Some(lease.holder()));
    drop(lease);
    #[cfg(unix)]
    {
        let elsewhere = dir.path().join("elsewhere");
        fs::write(&elsewhere, b"keep").unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.path().join(format!("leases/{ID}.lease")))
            .unwrap();
        let err = store.lease(ID).unwrap_err();
        assert!(
            matches!(
                err,
                StateError::NotRegularFile {
                    kind: "symbolic link",
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(fs::read(&elsewhere).unwrap(), b"keep");
        // A listing skips it rather than failing.
        assert!(store.open_sessions().unwrap().is_empty());
    }
}

#[test]
fn delete_snapshotted_removes_only_what_was_snapshotted() {
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    let other = StateStore::open(dir.path()).unwrap();
    store.save(&state(&["one", "two"])).unwrap();
    let file = dir.path().join(format!("messages/{ID}.jsonl"));

    // A save acknowledged between the snapshot and the delete: nothing is deleted.
    let snap = store.snapshot(ID).unwrap().unwrap();
    assert_eq!(
        snap.messages_file.as_deref(),
        Some(&fs::read(&file).unwrap()[..])
    );
    assert_eq!(snap.loaded.state.messages.len(), 2);
    other.save(&state(&["one", "two", "three"])).unwrap();
    let err = store.delete_snapshotted(&snap).unwrap_err();
    assert!(err.is_conflict(), "{err}");
    assert_eq!(store.load(ID).unwrap().unwrap().state.messages.len(), 3);

    // The reference (no lock, file first, then its row) rewrites the file in between: the
    // file comparison catches it even before its row is written.
    let snap = store.snapshot(ID).unwrap().unwrap();
    let mut body = fs::read(&file).unwrap();
    body.extend_from_slice(b"{\"role\":\"assistant\",\"content\":\"four\"}\n");
    fs::write(&file, &body).unwrap();
    assert!(store.delete_snapshotted(&snap).unwrap_err().is_conflict());
    assert_eq!(fs::read(&file).unwrap(), body);

    // Unchanged since the snapshot: deleted, row and file.
    let snap = store.snapshot(ID).unwrap().unwrap();
    let report = store.delete_snapshotted(&snap).unwrap();
    assert!(report.row && report.messages_file);
    assert!(store.load(ID).unwrap().is_none());
    assert!(!file.exists());

    // Under the lease of someone who has the session open: refused.
    store.save(&state(&["again"])).unwrap();
    let snap = store.snapshot(ID).unwrap().unwrap();
    let lease = other.lease(ID).unwrap();
    assert!(
        store
            .delete_snapshotted(&snap)
            .unwrap_err()
            .is_session_busy()
    );
    drop(lease);
    // Through a housekeeping lease of its own.
    let step = store.lease_for_housekeeping(ID).unwrap();
    let snap = step.snapshot().unwrap().unwrap();
    assert!(step.delete_snapshotted(&snap).unwrap().row);
}

#[test]
fn a_labelled_lease_names_its_label_and_a_shared_one_outlives_the_borrow() {
    let dir = tempfile::tempdir().unwrap();
    let a = std::sync::Arc::new(StateStore::open(dir.path()).unwrap());
    let b = StateStore::open(dir.path()).unwrap();
    // Shared: the lease keeps the store, and can be kept on its own.
    let lease = {
        let store = std::sync::Arc::clone(&a);
        std::thread::spawn(move || store.lease_shared(ID, Some("worker 7")).unwrap())
            .join()
            .unwrap()
    };
    assert_eq!(lease.holder().label.as_deref(), Some("worker 7"));
    let err = b.lease_labelled(ID, "worker 8").unwrap_err();
    let text = err.to_string();
    let holder = busy_holder(err);
    assert_eq!(holder.label.as_deref(), Some("worker 7"));
    assert_eq!(holder.purpose, LeasePurpose::Open);
    assert!(text.contains("as \"worker 7\""), "{text}");
    // The holder's store saves without a further lock; the other store is refused.
    a.save(&state(&["one"])).unwrap();
    assert!(b.save(&state(&["two"])).unwrap_err().is_session_busy());
    drop(lease);
    let lease = b.lease_labelled(ID, "worker 8").unwrap();
    assert_eq!(
        a.lease_holder(ID).unwrap().unwrap().label.as_deref(),
        Some("worker 8")
    );
    drop(lease);
    // Labels are bounded; nothing is taken for a longer one.
    let long = "x".repeat(session_state::MAX_LABEL + 1);
    assert!(matches!(
        b.lease_labelled(ID, &long),
        Err(StateError::LabelTooLong { len, .. }) if len == session_state::MAX_LABEL + 1
    ));
    assert_eq!(b.lease_holder(ID).unwrap(), None);
    // An unlabelled lease has none.
    assert_eq!(b.lease(ID).unwrap().holder().label, None);
}

#[test]
fn a_save_without_a_lease_creates_nothing_in_leases() {
    // The save checks the lease under the write lock of state.db instead of taking one: no
    // lease file is created, written or removed (and no `leases/` directory appears).
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    store.save(&state(&["one"])).unwrap();
    store.save(&state(&["one", "two"])).unwrap();
    let loaded = store.load(ID).unwrap().unwrap();
    store
        .save_expecting(&state(&["one", "two", "three"]), loaded.generation)
        .unwrap();
    let other = SessionState {
        session_id: "5e55104e-0000-4000-8000-00000000b0b0".to_owned(),
        ..state(&["x"])
    };
    let report = store
        .save_batch(
            &[
                session_state::BatchSave::new(&state(&["one", "two", "three", "four"])),
                session_state::BatchSave::new(&other),
            ],
            session_state::BatchPolicy::AllOrNothing,
        )
        .unwrap();
    assert_eq!(report.saved(), 2);
    assert!(!dir.path().join("leases").exists());
    assert_eq!(store.load(ID).unwrap().unwrap().state.messages.len(), 4);
}

#[test]
fn a_lease_taken_while_a_save_without_one_runs_starts_after_its_commit() {
    // Another store takes the lease while a save without one is between its write and its
    // commit: the lease is granted only once that save committed, so the holder's first load
    // sees it.
    let dir = tempfile::tempdir().unwrap();
    let taker = Arc::new(StateStore::open(dir.path()).unwrap());
    let result: Arc<std::sync::Mutex<Option<std::thread::JoinHandle<Option<usize>>>>> =
        Arc::default();
    let loaded_early = Arc::new(AtomicBool::new(false));
    let fired = AtomicBool::new(false);
    let hook: session_state::FaultHook = {
        let (taker, result, loaded_early) = (taker.clone(), result.clone(), loaded_early.clone());
        Arc::new(move |point| {
            if point != session_state::FaultPoint::AppendWritten
                || fired.swap(true, Ordering::SeqCst)
            {
                return false;
            }
            let (t, flag) = (taker.clone(), loaded_early.clone());
            let handle = std::thread::spawn(move || {
                let lease = t.lease(ID).unwrap();
                let n = lease.load().unwrap().map(|l| l.state.messages.len());
                flag.store(true, Ordering::SeqCst);
                n
            });
            *result.lock().unwrap() = Some(handle);
            // The taker holds the lease file's lock (its note names it) ...
            let deadline = Instant::now() + AT_ONCE;
            while taker.lease_holder(ID).unwrap().is_none() {
                assert!(Instant::now() < deadline, "the lease was never taken");
                std::thread::sleep(Duration::from_millis(1));
            }
            // ... and does not get through while this save has not committed.
            std::thread::sleep(Duration::from_millis(200));
            assert!(
                !loaded_early.load(Ordering::SeqCst),
                "lease granted before the commit"
            );
            false
        })
    };
    let saver = StateStore::open_with(
        dir.path(),
        StoreOptions {
            fault_hook: Some(hook),
            ..StoreOptions::default()
        },
    )
    .unwrap();
    saver.save(&state(&["one"])).unwrap();
    let handle = result.lock().unwrap().take().expect("the hook ran");
    assert_eq!(handle.join().unwrap(), Some(1));
    // The lease is released with its thread's end; saves go through again.
    saver.save(&state(&["one", "two"])).unwrap();
}

#[test]
#[cfg(target_os = "linux")]
fn a_save_waits_out_the_grace_for_a_holder_that_cannot_be_identified() {
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(dir.path()).unwrap();
    store.save(&state(&["one"])).unwrap();
    fs::create_dir_all(dir.path().join("leases")).unwrap();
    let path = dir.path().join(format!("leases/{ID}.lease"));
    let raw = fs::File::create(&path).unwrap();
    raw.lock().unwrap();
    let file = dir.path().join(format!("messages/{ID}.jsonl"));
    let before = fs::read(&file).unwrap();
    let started = Instant::now();
    let holder = busy_holder(store.save(&state(&["one", "two"])).unwrap_err());
    let took = started.elapsed();
    assert!(took >= UNKNOWN_HOLDER_GRACE, "{took:?}");
    assert!(took < UNKNOWN_HOLDER_GRACE + AT_ONCE, "{took:?}");
    assert_eq!(holder.purpose, LeasePurpose::Unknown);
    assert_eq!(fs::read(&file).unwrap(), before, "nothing written");
    // A lock without a note that goes away: the save goes through.
    raw.unlock().unwrap();
    store.save(&state(&["one", "two"])).unwrap();
    assert_eq!(store.load(ID).unwrap().unwrap().state.messages.len(), 2);
}
