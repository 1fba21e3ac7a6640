//! The warm refresh of the run index lists only day directories whose modification time
//! changed (or was racy) and looks only at runs that may still grow, yet misses no change: new
//! runs in old and new day directories, archiving, gc moves, growth of an open run, a change
//! inside a racy directory or file. Every case ends with a full rebuild that finds nothing
//! the refresh missed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use session_jsonl::{Durability, RunWriter, WriterOptions};
use session_schema::{Header, Record, RunEnd, RunOutcome as EndOutcome, RunStatus, Timestamp};
use session_state::{IndexReport, IndexedRunOutcome, RunQuery, StateStore};

/// Writes a run started at `started_at` (`2026-11-DDTHH:MM:SS.000Z`), ended with `run.end`
/// when `ended`; returns its path.
fn write_run(root: &Path, n: u32, started_at: &str, ended: bool) -> PathBuf {
    let run_id = format!("00000000-0000-4000-8000-{n:012}");
    let header = Header {
        schema_version: 1,
        run_id: run_id.clone(),
        session_id: Some(format!("s-{}", n % 3)),
        started_at: Timestamp::from_raw(started_at),
        ..Default::default()
    };
    let w = RunWriter::create(
        root,
        &header,
        WriterOptions::with_durability(Durability::Buffered),
    )
    .unwrap();
    if ended {
        w.append(&Record::RunEnd(RunEnd {
            run_id,
            ts: Timestamp::from_raw(started_at),
            outcome: EndOutcome::Completed,
            ..Default::default()
        }))
        .unwrap();
    }
    let path = w.path().to_owned();
    w.close().unwrap();
    path
}

fn status_line(n: u32) -> Vec<u8> {
    let rec = Record::RunStatus(RunStatus {
        run_id: format!("00000000-0000-4000-8000-{n:012}"),
        ts: Timestamp::from_raw("2026-11-01T00:00:01.000Z"),
        status: session_schema::RunStatusKind::Running,
        ..Default::default()
    });
    session_schema::to_line(&rec).unwrap()
}

fn set_mtime(path: &Path, t: SystemTime) {
    fs::File::open(path).unwrap().set_modified(t).unwrap();
}

fn mtime(path: &Path) -> SystemTime {
    fs::metadata(path).unwrap().modified().unwrap()
}

/// A whole second ahead of now: a timestamp as a file system with one-second granularity
/// gives it, racy for an index that looks at it now. An hour ahead (a file server's clock
/// ahead of ours) rather than the current second, so that it is still racy however long the
/// machine takes to get to the look: a time after the look is racy whatever the window.
fn coarse_now() -> SystemTime {
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs + 3600)
}

/// A fixed moment long ago (2023-11-14).
fn long_ago() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)
}

/// Sets every file and directory under `root` (not `root` itself, not `state.db*`) to
/// [`long_ago`], as if the tree had been written long before the index looks at it. Entries
/// aged before keep their time; only what changed since gets a new one.
fn age(root: &Path) {
    let old = long_ago();
    fn visit(dir: &Path, old: SystemTime) {
        for e in fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let name = e.file_name();
            if name.to_string_lossy().starts_with("state.db") {
                continue;
            }
            if e.file_type().unwrap().is_dir() {
                visit(&e.path(), old);
            }
            set_mtime(&e.path(), old);
        }
    }
    visit(root, old);
}

/// A store over 3 day directories of 10 ended runs each plus 2 open runs on the first day,
/// aged and indexed once.
fn aged_store() -> (tempfile::TempDir, PathBuf, StateStore, Vec<PathBuf>) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let mut n = 0;
    for day in ["01", "02", "03"] {
        for i in 0..10 {
            n += 1;
            write_run(&root, n, &format!("2026-11-{day}T10:{i:02}:00.000Z"), true);
        }
    }
    let open = vec![
        write_run(&root, 901, "2026-11-01T11:00:00.000Z", false),
        write_run(&root, 902, "2026-11-01T11:01:00.000Z", false),
    ];
    let store = StateStore::open(&root).unwrap();
    age(&root);
    let cold = store.index_runs().unwrap();
    assert_eq!((cold.added, cold.dirs_listed, cold.files_read), (32, 3, 32));
    (dir, root, store, open)
}

fn counts(r: &IndexReport) -> (u64, u64, u64) {
    (r.added, r.updated, r.removed)
}

/// A full rebuild finds nothing the incremental refreshes missed.
fn assert_in_sync(store: &StateStore) {
    let r = store.reindex().unwrap();
    assert!(r.changes.is_empty(), "refresh missed: {:?}", r.changes);
}

#[test]
fn a_warm_refresh_of_an_unchanged_tree_looks_only_at_directories_and_open_runs() {
    let (_dir, _root, store, _open) = aged_store();
    for _ in 0..2 {
        let warm = store.index_runs().unwrap();
        assert_eq!(counts(&warm), (0, 0, 0));
        assert_eq!(warm.dirs_listed, 0, "{warm:?}");
        assert_eq!(warm.dirs_unchanged, 3);
        // Only the two runs without run.end are looked at; nothing is read.
        assert_eq!(warm.files_checked, 2, "{warm:?}");
        assert_eq!(warm.files_read, 0);
        assert_eq!(warm.unchanged, 32);
    }
    // After a rebuild the refresh is just as cheap.
    store.reindex().unwrap();
    let warm = store.index_runs().unwrap();
    assert_eq!(
        (warm.dirs_listed, warm.files_checked, warm.files_read),
        (0, 2, 0)
    );
    assert_in_sync(&store);
}

#[test]
fn a_new_run_in_an_existing_day_directory_is_found() {
    let (_dir, _root, store, _open) = aged_store();
    let p = write_run(store.root(), 100, "2026-11-02T12:00:00.000Z", true);
    let r = store.index_runs().unwrap();
    assert_eq!(counts(&r), (1, 0, 0));
    assert_eq!(r.dirs_listed, 1);
    assert_eq!(r.files_read, 1);
    assert_eq!(r.unchanged, 32);
    let rows = store.list_runs(&RunQuery::default()).unwrap().runs;
    assert!(rows.iter().any(|row| row.path == p));
    assert_in_sync(&store);
}

#[test]
fn a_new_day_directory_is_found() {
    let (_dir, root, store, _open) = aged_store();
    let p = write_run(&root, 200, "2026-12-24T08:00:00.000Z", true);
    let r = store.index_runs().unwrap();
    assert_eq!(counts(&r), (1, 0, 0));
    assert_eq!(r.dirs_listed, 1);
    assert_eq!(
        store.list_runs(&RunQuery::default()).unwrap().runs[0].path,
        p
    );
    assert_in_sync(&store);
}

#[test]
fn archiving_a_run_replaces_its_row() {
    let (_dir, root, store, _open) = aged_store();
    let plain = root.join("2026/11/03/00000000-0000-4000-8000-000000000025.jsonl");
    let zst = session_jsonl::compress_run(&plain).unwrap();
    let r = store.index_runs().unwrap();
    assert_eq!(counts(&r), (1, 0, 1));
    assert_eq!(r.dirs_listed, 1);
    let rows = store.list_runs(&RunQuery::default()).unwrap().runs;
    let row = rows.iter().find(|row| row.path == zst).unwrap();
    assert!(row.compressed);
    assert_eq!(row.outcome, IndexedRunOutcome::Completed);
    assert!(!rows.iter().any(|row| row.path == plain));
    assert_in_sync(&store);
}

#[test]
fn gc_moving_runs_away_drops_their_rows() {
    let (_dir, root, store, open) = aged_store();
    let trash = root.join("trash/2026/11/02");
    fs::create_dir_all(&trash).unwrap();
    let moved = root.join("2026/11/02/00000000-0000-4000-8000-000000000015.jsonl");
    fs::rename(&moved, trash.join(moved.file_name().unwrap())).unwrap();
    let r = store.index_runs().unwrap();
    assert_eq!(counts(&r), (0, 0, 1));
    assert_eq!(r.dirs_listed, 1);
    // A whole day directory moved away, with an open (watched) run in it.
    fs::rename(root.join("2026/11/01"), root.join("trash/2026/11/01")).unwrap();
    let r = store.index_runs().unwrap();
    assert_eq!(counts(&r), (0, 0, 12));
    assert!(!open[0].exists());
    assert_eq!(
        store.list_runs(&RunQuery::default()).unwrap().runs.len(),
        19
    );
    // Day 02 changed just now (racy or not): listed once more after it settles, then
    // skipped.
    age(&root);
    assert_eq!(store.index_runs().unwrap().dirs_listed, 1);
    let warm = store.index_runs().unwrap();
    assert_eq!((warm.files_checked, warm.dirs_listed), (0, 0));
    // The month directory goes too.
    fs::rename(root.join("2026/11"), root.join("trash/2026/nov")).unwrap();
    let r = store.index_runs().unwrap();
    assert_eq!(counts(&r), (0, 0, 19));
    assert_in_sync(&store);
}

#[test]
fn an_open_run_that_grows_is_read_again_without_its_directory_changing() {
    let (_dir, root, store, open) = aged_store();
    let day = root.join("2026/11/01");
    let day_mtime = mtime(&day);
    fs::OpenOptions::new()
        .append(true)
        .open(&open[0])
        .unwrap()
        .write_all(&status_line(901))
        .unwrap();
    assert_eq!(
        mtime(&day),
        day_mtime,
        "appending leaves the directory alone"
    );
    let r = store.index_runs().unwrap();
    assert_eq!(counts(&r), (0, 1, 0));
    assert_eq!((r.dirs_listed, r.files_checked, r.files_read), (0, 2, 1));
    let row = store
        .list_runs(&RunQuery::default())
        .unwrap()
        .runs
        .into_iter()
        .find(|row| row.path == open[0])
        .unwrap();
    assert_eq!(row.record_count, 2);
    assert_eq!(row.last_status.as_deref(), Some("running"));
    // Its run.end arrives: read once more, then no longer watched once its time is old.
    let mut f = fs::OpenOptions::new().append(true).open(&open[0]).unwrap();
    let end = Record::RunEnd(RunEnd {
        run_id: "00000000-0000-4000-8000-000000000901".into(),
        ts: Timestamp::from_raw("2026-11-01T11:00:09.000Z"),
        outcome: EndOutcome::Error,
        ..Default::default()
    });
    f.write_all(&session_schema::to_line(&end).unwrap())
        .unwrap();
    drop(f);
    // Its timestamp is racy when indexed (one-second granularity, this very second).
    set_mtime(&open[0], coarse_now());
    let r = store.index_runs().unwrap();
    assert_eq!(counts(&r), (0, 1, 0));
    // Ended but racy: still looked at next time.
    let r = store.index_runs().unwrap();
    assert_eq!((r.files_checked, r.files_read), (2, 0));
    age(&root);
    // Aging changed the file's mtime: read once more (not racy any more), then dropped.
    let r = store.index_runs().unwrap();
    assert_eq!(r.updated, 1);
    let r = store.index_runs().unwrap();
    assert_eq!((r.files_checked, r.files_read), (1, 0), "{r:?}");
    assert_in_sync(&store);
}

#[test]
fn a_change_in_a_racy_directory_is_found_although_its_time_did_not_change() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let first = write_run(&root, 1, "2026-11-05T10:00:00.000Z", true);
    let store = StateStore::open(&root).unwrap();
    let day = first.parent().unwrap().to_owned();
    // Indexed in the second the directory changed (one-second timestamps): racy.
    set_mtime(&day, coarse_now());
    assert_eq!(store.index_runs().unwrap().added, 1);
    let before = mtime(&day);
    // A second run in the same timestamp tick (a file system with coarse timestamps): the
    // directory's time stays what was recorded.
    let second = write_run(&root, 2, "2026-11-05T10:05:00.000Z", true);
    set_mtime(&day, before);
    let r = store.index_runs().unwrap();
    assert_eq!(r.added, 1, "{r:?}");
    assert_eq!(r.dirs_listed, 1);
    assert!(
        store
            .list_runs(&RunQuery::default())
            .unwrap()
            .runs
            .iter()
            .any(|row| row.path == second)
    );
    // Once the directory's time is well before the moment it was recorded, it is skipped.
    age(&root);
    assert_eq!(store.index_runs().unwrap().dirs_listed, 1);
    let warm = store.index_runs().unwrap();
    assert_eq!((warm.dirs_listed, warm.files_checked), (0, 0));
    assert_in_sync(&store);
}

#[test]
fn a_change_to_a_racy_file_is_found_although_its_time_did_not_change() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let p = write_run(&root, 1, "2026-11-05T10:00:00.000Z", true);
    let day = p.parent().unwrap().to_owned();
    let old = long_ago();
    set_mtime(&day, old);
    let store = StateStore::open(&root).unwrap();
    // The run has its run.end, but its own time is racy when indexed.
    set_mtime(&p, coarse_now());
    store.index_runs().unwrap();
    let before = mtime(&p);
    let mut bytes = fs::read(&p).unwrap();
    bytes.extend_from_slice(&status_line(1));
    fs::write(&p, &bytes).unwrap();
    set_mtime(&p, before);
    set_mtime(&day, old);
    let r = store.index_runs().unwrap();
    assert_eq!((r.dirs_listed, r.updated), (0, 1), "{r:?}");
    assert_in_sync(&store);
}

#[test]
fn a_run_appended_to_after_its_run_end_waits_for_reindex_or_a_directory_change() {
    // The documented assumption: ended, settled runs are not looked at by the refresh.
    let (_dir, root, store, _open) = aged_store();
    let p = root.join("2026/11/02/00000000-0000-4000-8000-000000000012.jsonl");
    fs::OpenOptions::new()
        .append(true)
        .open(&p)
        .unwrap()
        .write_all(&status_line(12))
        .unwrap();
    let r = store.index_runs().unwrap();
    assert_eq!(counts(&r), (0, 0, 0));
    // Anything created in its directory makes the refresh list it and notice.
    write_run(&root, 300, "2026-11-02T23:00:00.000Z", true);
    let r = store.index_runs().unwrap();
    assert_eq!(counts(&r), (1, 1, 0));
    // reindex always notices.
    fs::OpenOptions::new()
        .append(true)
        .open(&p)
        .unwrap()
        .write_all(&status_line(12))
        .unwrap();
    age(&root);
    let r = store.reindex().unwrap();
    assert!(r.changes.iter().any(|c| matches!(
        c,
        session_state::RunChange::Changed(path, cols) if path == &p && cols.contains(&"record_count")
    )));
}

#[test]
fn a_database_of_the_previous_version_is_brought_up_to_date() {
    let (_dir, root, store, _open) = aged_store();
    drop(store);
    // The previous version had neither run_dirs nor run_watch, and user_version 1.
    let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
    conn.execute_batch("DROP TABLE run_dirs; DROP TABLE run_watch; PRAGMA user_version = 1;")
        .unwrap();
    drop(conn);
    write_run(&root, 400, "2026-11-03T20:00:00.000Z", false);
    let store = StateStore::open(&root).unwrap();
    let r = store.index_runs().unwrap();
    assert_eq!(counts(&r), (1, 0, 0));
    assert_eq!(r.dirs_listed, 3);
    assert_eq!(r.files_read, 1);
    age(&root);
    store.index_runs().unwrap();
    let warm = store.index_runs().unwrap();
    assert_eq!((warm.dirs_listed, warm.files_checked), (0, 3), "{warm:?}");
    assert_in_sync(&store);
}
