//! `RunIndex` on its own: kept in a SQLite file that is not `<root>/state.db`, or in memory,
//! refreshed from the same run tree, lists the same runs as the index a `StateStore` hands out.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use session_state::{RowRead, RunGrouping, RunIndex, RunQuery, RunRow, StateError, StateStore};

/// A sessions root holding only the recorded reference runs (no `state.db`).
fn run_tree(dir: &Path) -> std::path::PathBuf {
    let root = dir.join("sessions");
    session_test_support::copy_tree(
        &session_test_support::codelia_sessions_dir().join("2026"),
        &root.join("2026"),
    )
    .unwrap();
    root
}

/// Every row of the listing, walking all its pages.
fn all_runs(index: &RunIndex) -> Vec<RunRow> {
    let mut out = Vec::new();
    let mut after = None;
    loop {
        let page = index
            .list_runs(&RunQuery {
                limit: Some(7),
                after: after.take(),
                ..RunQuery::default()
            })
            .unwrap();
        out.extend(page.runs);
        match page.next_cursor {
            Some(c) => after = Some(c),
            None => return out,
        }
    }
}

#[test]
fn an_index_at_another_path_and_one_in_memory_list_the_same_runs() {
    let dir = tempfile::tempdir().unwrap();
    let root = run_tree(dir.path());
    let files = session_jsonl::list_run_files(&root).unwrap().files;
    assert_eq!(files.len(), 20);

    // Kept outside the root: nothing is created under it.
    let cache = dir.path().join("cache");
    std::fs::create_dir(&cache).unwrap();
    let at = RunIndex::open_at(&root, cache.join("runs.db")).unwrap();
    assert_eq!(at.db_path(), cache.join("runs.db"));
    assert_eq!(at.root(), root);
    assert!(!at.is_memory_index() && !at.is_read_only());
    let report = at.index_runs().unwrap();
    assert_eq!((report.added, report.updated, report.removed), (20, 0, 0));
    assert!(!root.join("state.db").exists());
    assert!(cache.join("runs.db").is_file());

    let memory = RunIndex::open_in_memory(&root).unwrap();
    assert!(memory.is_memory_index());
    let filled = memory.index_files(&files, RowRead::Whole).unwrap();
    assert_eq!(filled.indexed, 20);
    assert!(filled.partial.is_empty() && filled.failed.is_empty());
    // A refresh from the tree is for indexes kept in a database file.
    assert!(matches!(
        memory.index_runs(),
        Err(StateError::ReadOnly { .. })
    ));

    let store = StateStore::open(&root).unwrap();
    store.run_index().index_runs().unwrap();

    let listed = all_runs(&at);
    assert_eq!(listed.len(), 20);
    assert!(listed.iter().all(|r| r.path.starts_with(&root)));
    let mut ids: Vec<&str> = listed.iter().map(|r| r.run_id.as_str()).collect();
    ids.sort_unstable();
    let mut stems: Vec<String> = files
        .iter()
        .map(|f| {
            f.path
                .file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .trim_end_matches(".jsonl")
                .to_owned()
        })
        .collect();
    stems.sort_unstable();
    assert_eq!(ids, stems);
    assert_eq!(all_runs(&memory), listed);
    assert_eq!(all_runs(store.run_index()), listed);

    // Lookup and totals agree too.
    let session = listed[0].session_id.clone().unwrap();
    let of_session = at.runs_for_session(&session).unwrap();
    assert!(!of_session.is_empty());
    assert_eq!(memory.runs_for_session(&session).unwrap(), of_session);
    assert_eq!(
        at.run_files_of(&listed[0].run_id).unwrap(),
        vec![listed[0].path.clone()]
    );
    let totals = at
        .run_totals(&RunQuery::default(), RunGrouping::Day)
        .unwrap();
    assert_eq!(totals.all.runs, 20);
    // The same sums; the file keeps running totals, the index in memory sums its rows.
    let in_memory = memory
        .run_totals(&RunQuery::default(), RunGrouping::Day)
        .unwrap();
    assert_eq!(
        (&in_memory.groups, &in_memory.all),
        (&totals.groups, &totals.all)
    );
    assert!(totals.from_running_totals && !in_memory.from_running_totals);

    // The rows stay in their file: reopened, the index lists them without a refresh.
    drop(at);
    let reopened = RunIndex::open_at(&root, cache.join("runs.db")).unwrap();
    assert_eq!(all_runs(&reopened), listed);
    let again = reopened.index_runs().unwrap();
    assert_eq!(
        (again.added, again.updated, again.removed, again.unchanged),
        (0, 0, 0, 20)
    );
}

#[test]
fn a_store_hands_out_its_own_index_and_a_read_only_store_refuses_a_refresh() {
    let dir = tempfile::tempdir().unwrap();
    let root = run_tree(dir.path());
    let store = StateStore::open(&root).unwrap();
    let index = store.run_index();
    assert_eq!(index.db_path(), root.join("state.db"));
    assert_eq!(index.index_runs().unwrap().added, 20);
    // The store's delegations read the same rows.
    assert_eq!(
        store.list_runs(&RunQuery::default()).unwrap().runs.len(),
        20
    );
    drop(store);

    let read_only = StateStore::open_read_only(&root).unwrap();
    assert!(read_only.run_index().is_read_only());
    assert_eq!(all_runs(read_only.run_index()).len(), 20);
    assert!(matches!(
        read_only.run_index().index_runs(),
        Err(StateError::ReadOnly { .. })
    ));

    // A root that is no directory is refused before any database is created.
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    assert!(matches!(
        RunIndex::open_at(&file, dir.path().join("x.db")),
        Err(StateError::Io { .. })
    ));
    assert!(!dir.path().join("x.db").exists());
}
