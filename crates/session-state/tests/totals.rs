//! `StateStore::run_totals` sums inside SQLite: the same totals as summing every listed row,
//! with only the rows of runs held by several files read one by one.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use session_jsonl::{Durability, RunWriter, WriterOptions};
use session_schema::{
    Header, LlmResponse, LlmResponseOutput, Record, RunEnd, RunOutcome as EndOutcome, Timestamp,
    Usage,
};
use session_state::{IndexedRunOutcome, RunGrouping, RunQuery, RunRow, RunTotals, StateStore};

fn write_run(root: &Path, n: u32) -> PathBuf {
    let run_id = format!("00000000-0000-4000-8000-{n:012}");
    let day = 1 + n % 5;
    let started = format!("2026-11-{day:02}T1{}:00:00.000+02:00", n % 3);
    let header = Header {
        schema_version: 1,
        run_id: run_id.clone(),
        session_id: (!n.is_multiple_of(4)).then(|| format!("s-{}", n % 3)),
        started_at: Timestamp::from_raw(started.clone()),
        ..Default::default()
    };
    let w = RunWriter::create(
        root,
        &header,
        WriterOptions::with_durability(Durability::Buffered),
    )
    .unwrap();
    let usage = Usage {
        model: format!("model-{}", n % 2),
        input_tokens: u64::from(100 + n),
        input_cached_tokens: Some(Some(u64::from(n))),
        output_tokens: u64::from(10 + n),
        total_tokens: u64::from(110 + 2 * n),
        ..Default::default()
    };
    w.append(&Record::LlmResponse(LlmResponse {
        run_id: run_id.clone(),
        ts: Timestamp::from_raw(started.clone()),
        seq: 1,
        output: LlmResponseOutput {
            usage: Some(Some(usage)),
            ..Default::default()
        },
        ..Default::default()
    }))
    .unwrap();
    let outcome = match n % 4 {
        0 => Some(EndOutcome::Completed),
        1 => Some(EndOutcome::Error),
        2 => Some(EndOutcome::Cancelled),
        _ => None,
    };
    if let Some(outcome) = outcome {
        w.append(&Record::RunEnd(RunEnd {
            run_id,
            ts: Timestamp::from_raw(started),
            outcome,
            ..Default::default()
        }))
        .unwrap();
    }
    let path = w.path().to_owned();
    w.close().unwrap();
    path
}

fn add(t: &mut RunTotals, r: &RunRow) {
    t.runs += 1;
    match r.outcome {
        IndexedRunOutcome::Completed => t.completed += 1,
        IndexedRunOutcome::Error => t.errors += 1,
        IndexedRunOutcome::Cancelled => t.cancelled += 1,
        _ => t.open += 1,
    }
    t.invocations += r.invocation_count;
    t.input_tokens += r.input_tokens;
    t.cached_input_tokens += r.cached_input_tokens;
    t.output_tokens += r.output_tokens;
    t.total_tokens += r.total_tokens;
}

/// Totals the slow way: every listed row, keyed as `sessions stats` always did.
fn by_rows(store: &StateStore, by: RunGrouping) -> (BTreeMap<String, RunTotals>, RunTotals) {
    let rows = store.list_runs(&RunQuery::default()).unwrap().runs;
    let mut groups: BTreeMap<String, RunTotals> = BTreeMap::new();
    let mut all = RunTotals::default();
    for r in &rows {
        let key = match by {
            RunGrouping::Day => r.started_at_utc.clone().unwrap()[..10].to_owned(),
            RunGrouping::Minute => r.started_at_utc.clone().unwrap()[..16].to_owned(),
            RunGrouping::Model => match (&r.model_provider, &r.model_name) {
                (Some(p), Some(n)) => format!("{p}/{n}"),
                (None, Some(n)) => n.clone(),
                _ => "(unknown model)".into(),
            },
            RunGrouping::Session => r.session_id.clone().unwrap_or("(no session)".into()),
            _ => unreachable!(),
        };
        add(groups.entry(key).or_default(), r);
        add(&mut all, r);
    }
    (groups, all)
}

#[test]
fn totals_summed_in_sql_match_the_rows_and_read_only_duplicated_runs() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let paths: Vec<PathBuf> = (0..24).map(|n| write_run(root, n)).collect();
    let store = StateStore::open(root).unwrap();
    store.index_runs().unwrap();
    for by in [
        RunGrouping::Day,
        RunGrouping::Minute,
        RunGrouping::Model,
        RunGrouping::Session,
    ] {
        let t = store.run_totals(&RunQuery::default(), by).unwrap();
        let (groups, all) = by_rows(&store, by);
        assert_eq!(t.groups, groups, "{by:?}");
        assert_eq!(t.all, all);
        assert_eq!(t.all.runs, 24);
        assert_eq!(
            (t.all.completed, t.all.errors, t.all.cancelled, t.all.open),
            (6, 6, 6, 6)
        );
        assert_eq!(t.rows_read, 0, "every run summed inside SQLite");
        assert!(t.duplicated.is_empty());
    }
    // A `+02:00` start before 02:00 UTC counts on the UTC day.
    let t = store
        .run_totals(&RunQuery::default(), RunGrouping::Day)
        .unwrap();
    assert!(t.groups.contains_key("2026-11-01"), "{:?}", t.groups.keys());
    // By minute: the UTC minute, `YYYY-MM-DDTHH:MM` (10:00+02:00 is 08:00Z; runs 0 and 15).
    let t = store
        .run_totals(&RunQuery::default(), RunGrouping::Minute)
        .unwrap();
    assert_eq!(
        t.groups["2026-11-01T08:00"].runs,
        2,
        "{:?}",
        t.groups.keys()
    );
    assert!(
        t.groups.keys().all(|k| k.len() == 16),
        "{:?}",
        t.groups.keys()
    );

    // A copy of one run in another day directory: counted once, from the more complete
    // file; only the two rows of that run are read.
    let src = &paths[0];
    let twin_dir = root.join("2026/12/01");
    std::fs::create_dir_all(&twin_dir).unwrap();
    let bytes = std::fs::read(src).unwrap();
    let header_end = bytes.iter().position(|b| *b == b'\n').unwrap() + 1;
    std::fs::write(
        twin_dir.join(src.file_name().unwrap()),
        &bytes[..header_end],
    )
    .unwrap();
    store.index_runs().unwrap();
    let t = store
        .run_totals(&RunQuery::default(), RunGrouping::Session)
        .unwrap();
    let (groups, all) = by_rows(&store, RunGrouping::Session);
    assert_eq!(t.groups, groups);
    assert_eq!(t.all, all);
    assert_eq!(t.all.runs, 24);
    assert_eq!(t.rows_read, 2);
    assert_eq!(t.duplicated.len(), 1);
    assert_eq!(&t.duplicated[0].path, src);

    // Filters apply as in `list_runs`.
    // RunQuery is non_exhaustive: built by assignment.
    #[allow(clippy::field_reassign_with_default)]
    let q = {
        let mut q = RunQuery::default();
        q.since = Some("2026-11-03T00:00:00Z".into());
        q
    };
    let t = store.run_totals(&q, RunGrouping::Day).unwrap();
    let listed = store.list_runs(&q).unwrap().runs.len() as u64;
    assert_eq!(t.all.runs, listed);
    assert!(listed > 0 && listed < 24);
}

/// The day key of run `n` of [`write_run`] at `minutes` from UTC: its start is
/// `2026-11-(1 + n % 5)T(8 + n % 3):00Z`.
fn day_of_run(n: u32, minutes: i32) -> String {
    let at = i64::from(8 + n % 3) * 60 + i64::from(minutes);
    let day = i64::from(1 + n % 5) + at.div_euclid(1440);
    match day {
        0 => "2026-10-31".to_owned(),
        d => format!("2026-11-{d:02}"),
    }
}

#[test]
fn day_at_offset_sums_one_row_per_day_of_the_offset_not_one_per_minute() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for n in 0..24 {
        write_run(root, n);
    }
    let store = StateStore::open(root).unwrap();
    store.index_runs().unwrap();
    // Starts fall on 5 days × 3 UTC hours: by minute SQLite returns 15 rows.
    let minute = store
        .run_totals(&RunQuery::default(), RunGrouping::Minute)
        .unwrap();
    assert_eq!(minute.groups_summed, 15);
    for minutes in [0, 330, 900, -600, -480] {
        // Summing the rows (the running totals answer from quarter-hours instead).
        let t = store
            .run_index()
            .run_totals_by_scan(&RunQuery::default(), RunGrouping::DayAtOffset(minutes))
            .unwrap();
        let kept = store
            .run_totals(&RunQuery::default(), RunGrouping::DayAtOffset(minutes))
            .unwrap();
        assert_eq!(kept.groups, t.groups);
        let mut want: BTreeMap<String, u64> = BTreeMap::new();
        for n in 0..24 {
            *want.entry(day_of_run(n, minutes)).or_default() += 1;
        }
        let got: BTreeMap<String, u64> =
            t.groups.iter().map(|(k, v)| (k.clone(), v.runs)).collect();
        assert_eq!(got, want, "offset {minutes} minutes");
        assert_eq!(t.groups_summed, want.len() as u64, "one row per day");
        assert_eq!(t.all, minute.all);
        assert_eq!(t.rows_read, 0);
    }
    // Offset 0 is the UTC day.
    assert_eq!(
        store
            .run_totals(&RunQuery::default(), RunGrouping::DayAtOffset(0))
            .unwrap()
            .groups,
        store
            .run_totals(&RunQuery::default(), RunGrouping::Day)
            .unwrap()
            .groups
    );
}

#[test]
fn day_at_offset_of_a_duplicated_run_matches_the_sql_day() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let first = write_run(root, 1);
    // The same run held by a second file: summed row by row, keyed as SQLite keys the rest.
    let twin_dir = root.join("2026/12/01");
    std::fs::create_dir_all(&twin_dir).unwrap();
    std::fs::copy(&first, twin_dir.join(first.file_name().unwrap())).unwrap();
    write_run(root, 2);
    let store = StateStore::open(root).unwrap();
    store.index_runs().unwrap();
    let t = store
        .run_index()
        .run_totals_by_scan(&RunQuery::default(), RunGrouping::DayAtOffset(900))
        .unwrap();
    assert_eq!(t.rows_read, 2, "both files of the duplicated run read");
    assert_eq!(t.groups_summed, 1, "run 2 summed inside SQLite");
    let kept = store
        .run_totals(&RunQuery::default(), RunGrouping::DayAtOffset(900))
        .unwrap();
    assert!(kept.from_running_totals);
    assert_eq!((&kept.groups, kept.rows_read), (&t.groups, 2));
    let got: BTreeMap<String, u64> = t.groups.iter().map(|(k, v)| (k.clone(), v.runs)).collect();
    // Run 1: 2026-11-02T09:00Z + 15 h = 2026-11-03; run 2: 2026-11-03T10:00Z + 15 h = 2026-11-04.
    assert_eq!(
        got,
        BTreeMap::from([("2026-11-03".to_owned(), 1), ("2026-11-04".to_owned(), 1)])
    );
}
