//! `run_totals` (summed by SQLite) equals the row-by-row sum `sessions stats` used to compute,
//! on the bundled sample store and on the reference runtime's recorded runs, reading no row
//! one by one.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;

use session_state::{IndexedRunOutcome, RunGrouping, RunQuery, RunTotals, StateStore};

/// Totals the old way: every listed row, summed in Rust.
fn by_rows(store: &StateStore, by: RunGrouping) -> (BTreeMap<String, RunTotals>, RunTotals) {
    let mut groups: BTreeMap<String, RunTotals> = BTreeMap::new();
    let mut all = RunTotals::default();
    for r in store.list_runs(&RunQuery::default()).unwrap().runs {
        let date = r.started_at_utc.clone();
        let key = match by {
            RunGrouping::Day => date.map_or("(unknown date)".into(), |d| d[..10].to_owned()),
            RunGrouping::Minute => date.map_or("(unknown date)".into(), |d| d[..16].to_owned()),
            RunGrouping::Model => match (&r.model_provider, &r.model_name) {
                (Some(p), Some(n)) => format!("{p}/{n}"),
                (None, Some(n)) => n.clone(),
                _ => "(unknown model)".into(),
            },
            RunGrouping::Session => r.session_id.clone().unwrap_or("(no session)".into()),
            other => panic!("{other:?}"),
        };
        let mut t = RunTotals::default();
        t.runs = 1;
        match r.outcome {
            IndexedRunOutcome::Completed => t.completed = 1,
            IndexedRunOutcome::Error => t.errors = 1,
            IndexedRunOutcome::Cancelled => t.cancelled = 1,
            _ => t.open = 1,
        }
        t.invocations = r.invocation_count;
        t.input_tokens = r.input_tokens;
        t.cached_input_tokens = r.cached_input_tokens;
        t.output_tokens = r.output_tokens;
        t.total_tokens = r.total_tokens;
        groups.entry(key).or_default().add(&t);
        all.add(&t);
    }
    (groups, all)
}

fn check(src: &Path, runs: u64) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    session_test_support::copy_tree(src, &root).unwrap();
    let store = StateStore::open(&root).unwrap();
    store.reindex().unwrap();
    // The large recorded runs were read bounded; a listing completes (and stores) them.
    store.list_runs(&RunQuery::default()).unwrap();
    for by in [
        RunGrouping::Day,
        RunGrouping::Minute,
        RunGrouping::Model,
        RunGrouping::Session,
    ] {
        let t = store.run_totals(&RunQuery::default(), by).unwrap();
        let (groups, all) = by_rows(&store, by);
        assert_eq!(t.groups, groups, "{by:?}");
        assert_eq!(t.all, all, "{by:?}");
        assert_eq!(t.all.runs, runs);
        assert_eq!(t.rows_read, 0, "summed inside SQLite");
    }
}

#[test]
fn totals_of_the_sample_store_and_the_recorded_runs_match_the_row_by_row_sum() {
    check(&session_test_support::sample_sessions_dir(), 10);
    check(&session_test_support::codelia_sessions_dir(), 20);
}
