//! The running totals of the run index (`run_totals`, kept by triggers on `runs`) give the
//! same answer as summing the rows, after every kind of change a store sees: runs written
//! across offsets, days and months, a run held by several files, files that are no runs,
//! an open run completing, files removed; and reading them costs the answer, not the store:
//! one row per quarter-hour, model or session, one per day for a UTC calendar.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use session_jsonl::{Durability, RunWriter, WriterOptions};
use session_schema::{
    Header, LlmResponse, LlmResponseOutput, ModelInfo, Record, RunEnd, RunOutcome, Timestamp, Usage,
};
use session_state::{GroupedRunTotals, RunGrouping, RunQuery, StateStore};

/// 2026-10-20T00:00:00Z in milliseconds.
const BASE_MS: i64 = 1_792_454_400_000;

/// One run of the generated stores.
#[derive(Debug, Clone)]
struct Run {
    n: u32,
    /// Minutes after [`BASE_MS`].
    minute: i64,
    /// 0 completed, 1 error, 2 cancelled, 3 open.
    outcome: u8,
    tokens: u64,
}

fn run_id(n: u32) -> String {
    format!("00000000-0000-4000-8000-{n:012}")
}

/// The bytes of run `r` (written by the project's writer into `scratch`), without its
/// `run.end` when `open`.
fn run_bytes(scratch: &Path, r: &Run, open: bool) -> Vec<u8> {
    let dir = tempfile::tempdir_in(scratch).unwrap();
    let dir = dir.path();
    let started = Timestamp::from_unix_millis(BASE_MS + r.minute * 60_000 + 7_123);
    let header = Header {
        schema_version: 1,
        run_id: run_id(r.n),
        session_id: (!r.n.is_multiple_of(4)).then(|| format!("s-{}", r.n % 3)),
        started_at: started.clone(),
        model: (!r.n.is_multiple_of(5)).then(|| ModelInfo {
            provider: r.n.is_multiple_of(2).then(|| "anthropic".to_owned()),
            name: Some(format!("model-{}", r.n % 3)),
            ..Default::default()
        }),
        ..Default::default()
    };
    let w = RunWriter::create(
        dir,
        &header,
        WriterOptions::with_durability(Durability::Buffered),
    )
    .unwrap();
    w.append(&Record::LlmResponse(LlmResponse {
        run_id: run_id(r.n),
        ts: started.clone(),
        seq: 1,
        output: LlmResponseOutput {
            usage: Some(Some(Usage {
                model: "m".into(),
                input_tokens: r.tokens,
                input_cached_tokens: Some(Some(r.tokens / 3)),
                output_tokens: r.tokens / 2,
                total_tokens: r.tokens + r.tokens / 2,
                ..Default::default()
            })),
            ..Default::default()
        },
        ..Default::default()
    }))
    .unwrap();
    let outcome = match r.outcome {
        0 => Some(RunOutcome::Completed),
        1 => Some(RunOutcome::Error),
        2 => Some(RunOutcome::Cancelled),
        _ => None,
    };
    if let (false, Some(outcome)) = (open, outcome) {
        w.append(&Record::RunEnd(RunEnd {
            run_id: run_id(r.n),
            ts: started,
            outcome,
            ..Default::default()
        }))
        .unwrap();
    }
    let path = w.path().to_owned();
    w.close().unwrap();
    std::fs::read(path).unwrap()
}

/// Where run `n` lives in the tree under `day` (`DD` of 2026-11).
fn place(root: &Path, n: u32, day: u32) -> PathBuf {
    let dir = root.join(format!("2026/11/{day:02}"));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(format!("{}.jsonl", run_id(n)))
}

/// Every grouping `stats` uses that the running totals serve, and two they do not.
const GROUPINGS: [RunGrouping; 9] = [
    RunGrouping::Day,
    RunGrouping::DayAtOffset(330),
    RunGrouping::DayAtOffset(-300),
    RunGrouping::DayAtOffset(345),
    RunGrouping::DayAtOffset(-1440),
    RunGrouping::QuarterHour,
    RunGrouping::Model,
    RunGrouping::Session,
    RunGrouping::Minute,
];

// RunQuery is non_exhaustive: built by assignment.
#[allow(clippy::field_reassign_with_default)]
fn query(since: Option<&str>, until: Option<&str>) -> RunQuery {
    let mut q = RunQuery::default();
    q.since = since.map(str::to_owned);
    q.until = until.map(str::to_owned);
    q
}

/// The windows compared: none, bounds cutting quarter-hours, bounds on quarter-hours.
fn windows() -> Vec<RunQuery> {
    vec![
        query(None, None),
        query(Some("2026-10-27T10:07:30.001Z"), None),
        query(None, Some("2026-11-14T23:52:00+05:30")),
        query(Some("2026-10-25T00:00:00Z"), Some("2026-11-30T00:15:00Z")),
        query(
            Some("2026-11-02T01:44:00.000Z"),
            Some("2026-11-02T01:44:00.000Z"),
        ),
    ]
}

/// Asserts that the running totals and the scan agree on every grouping and window; returns
/// how many answers came from the running totals.
fn assert_totals_match_scan(store: &StateStore) -> usize {
    let index = store.run_index();
    let mut served = 0;
    for by in GROUPINGS {
        for q in windows() {
            let fast = index.run_totals(&q, by).unwrap();
            let scan = index.run_totals_by_scan(&q, by).unwrap();
            assert!(!scan.from_running_totals);
            assert_eq!(fast.groups, scan.groups, "{by:?} {q:?}");
            assert_eq!(fast.all, scan.all, "{by:?} {q:?}");
            let paths = |t: &GroupedRunTotals| {
                let mut v: Vec<(PathBuf, Vec<PathBuf>)> = t
                    .duplicated
                    .iter()
                    .map(|r| (r.path.clone(), r.other_files.clone()))
                    .collect();
                v.sort();
                v
            };
            assert_eq!(paths(&fast), paths(&scan), "{by:?} {q:?}");
            served += usize::from(fast.from_running_totals);
        }
    }
    served
}

/// A change to the store.
#[derive(Debug, Clone)]
enum Op {
    /// Writes a run (open runs without `run.end`).
    Write(Run),
    /// A second file of run `n` in another day directory (its first line only when `short`).
    Copy { n: u32, day: u32, short: bool },
    /// An empty file named after run `n` (no run: a diagnostic row).
    NotARun { n: u32, day: u32 },
    /// The open run `n` gets its `run.end` (appended, as its writer would).
    Complete { n: u32 },
    /// Run `n`'s file (and its copies) removed, as `gc` or `archive` would.
    Remove { n: u32 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u32..10, 0i64..60 * 24 * 45, 0u8..4, 0u64..5_000).prop_map(
            |(n, minute, outcome, tokens)| Op::Write(Run { n, minute, outcome, tokens })
        ),
        1 => (0u32..10, 1u32..28, any::<bool>()).prop_map(|(n, day, short)| Op::Copy { n, day, short }),
        1 => (0u32..10, 1u32..28).prop_map(|(n, day)| Op::NotARun { n, day }),
        1 => (0u32..10).prop_map(|n| Op::Complete { n }),
        1 => (0u32..10).prop_map(|n| Op::Remove { n }),
    ]
}

/// The store a sequence of [`Op`]s builds, index refreshed after each step.
struct Sim {
    root: tempfile::TempDir,
    scratch: tempfile::TempDir,
    /// Run `n` as last written, its file, whether it is still open, and its copies.
    runs: BTreeMap<u32, (Run, PathBuf, bool, Vec<PathBuf>)>,
}

impl Sim {
    fn new() -> Sim {
        Sim {
            root: tempfile::tempdir().unwrap(),
            scratch: tempfile::tempdir().unwrap(),
            runs: BTreeMap::new(),
        }
    }

    fn apply(&mut self, op: &Op) {
        let root = self.root.path().to_owned();
        match op {
            Op::Write(r) => {
                self.remove(r.n);
                let path = place(&root, r.n, 1 + (r.minute / 1440 % 27) as u32);
                let open = r.outcome == 3;
                std::fs::write(&path, run_bytes(self.scratch.path(), r, open)).unwrap();
                self.runs.insert(r.n, (r.clone(), path, open, Vec::new()));
            }
            Op::Copy { n, day, short } => {
                if let Some((_, path, _, copies)) = self.runs.get_mut(n) {
                    let to = place(&root, *n, *day);
                    if to != *path && !copies.contains(&to) {
                        let bytes = std::fs::read(&*path).unwrap();
                        let end = bytes.iter().position(|b| *b == b'\n').unwrap() + 1;
                        let keep = if *short { &bytes[..end] } else { &bytes[..] };
                        std::fs::write(&to, keep).unwrap();
                        copies.push(to);
                    }
                }
            }
            Op::NotARun { n, day } => {
                let to = place(&root, *n, *day);
                let taken = self
                    .runs
                    .get(n)
                    .is_some_and(|(_, p, _, c)| *p == to || c.contains(&to));
                if !taken {
                    std::fs::write(&to, b"").unwrap();
                    if let Some((_, _, _, copies)) = self.runs.get_mut(n) {
                        copies.push(to);
                    }
                }
            }
            Op::Complete { n } => {
                if let Some((r, path, open, _)) = self.runs.get_mut(n)
                    && *open
                {
                    let mut done = r.clone();
                    done.outcome = 0;
                    std::fs::write(&*path, run_bytes(self.scratch.path(), &done, false)).unwrap();
                    *r = done;
                    *open = false;
                }
            }
            Op::Remove { n } => self.remove(*n),
        }
    }

    fn remove(&mut self, n: u32) {
        if let Some((_, path, _, copies)) = self.runs.remove(&n) {
            for p in std::iter::once(path).chain(copies) {
                std::fs::remove_file(p).unwrap();
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    #[test]
    fn running_totals_equal_the_scan_after_every_change(ops in prop::collection::vec(op(), 1..14)) {
        let mut sim = Sim::new();
        let store = StateStore::open(sim.root.path()).unwrap();
        let mut served = 0;
        for (i, op) in ops.iter().enumerate() {
            sim.apply(op);
            // Refresh after every other change: some refreshes see two changes at once.
            if i % 2 == 1 || i + 1 == ops.len() {
                store.index_runs().unwrap();
                served += assert_totals_match_scan(&store);
            }
        }
        prop_assert!(served > 0, "the running totals answered nothing");
    }
}

/// A fixed store with every kind of row: the exact figures, from the running totals.
#[test]
fn running_totals_hold_exact_values_with_duplicates_and_non_runs() {
    let mut sim = Sim::new();
    let store = StateStore::open(sim.root.path()).unwrap();
    for (n, minute, outcome, tokens) in [
        (1, 0, 0, 100),       // 2026-10-20T00:00Z
        (2, 14, 1, 200),      // same quarter-hour
        (3, 15, 3, 300),      // the next one, open
        (4, 1439, 2, 400),    // 2026-10-20T23:59Z: 2026-10-21 at +05:30
        (5, 1440 * 15, 0, 1), // 2026-11-04
    ] {
        sim.apply(&Op::Write(Run {
            n,
            minute,
            outcome,
            tokens,
        }));
    }
    sim.apply(&Op::Copy {
        n: 1,
        day: 9,
        short: true,
    });
    sim.apply(&Op::NotARun { n: 2, day: 10 });
    store.index_runs().unwrap();
    let index = store.run_index();
    let t = index
        .run_totals(&RunQuery::default(), RunGrouping::QuarterHour)
        .unwrap();
    assert!(t.from_running_totals);
    let runs: BTreeMap<&str, u64> = t.groups.iter().map(|(k, v)| (k.as_str(), v.runs)).collect();
    assert_eq!(
        runs,
        BTreeMap::from([
            ("2026-10-20T00:00", 2),
            ("2026-10-20T00:15", 1),
            ("2026-10-20T23:45", 1),
            ("2026-11-04T00:00", 1),
        ])
    );
    assert_eq!(
        t.all.runs, 5,
        "the copy of run 1 and the empty file count no run"
    );
    assert_eq!(
        (t.all.completed, t.all.errors, t.all.cancelled, t.all.open),
        (2, 1, 1, 1)
    );
    assert_eq!(t.all.input_tokens, 1001);
    assert_eq!(t.all.output_tokens, 50 + 100 + 150 + 200);
    assert_eq!(t.duplicated.len(), 2, "runs 1 and 2");
    assert_eq!(
        t.rows_read, 3,
        "both files of run 1 and the one run file of run 2"
    );
    let t = index
        .run_totals(&RunQuery::default(), RunGrouping::DayAtOffset(330))
        .unwrap();
    let days: BTreeMap<&str, u64> = t.groups.iter().map(|(k, v)| (k.as_str(), v.runs)).collect();
    assert_eq!(
        days,
        BTreeMap::from([("2026-10-20", 3), ("2026-10-21", 1), ("2026-11-04", 1)])
    );
    // The open run completes; run 4 is removed.
    sim.apply(&Op::Complete { n: 3 });
    sim.apply(&Op::Remove { n: 4 });
    store.index_runs().unwrap();
    let t = index
        .run_totals(&RunQuery::default(), RunGrouping::Day)
        .unwrap();
    assert!(t.from_running_totals);
    assert_eq!(t.all.runs, 4);
    assert_eq!((t.all.completed, t.all.open), (3, 0));
    assert_eq!(t.groups["2026-10-20"].runs, 3);
    assert_totals_match_scan(&store);
}

/// Writes `per_quarter` runs into each of the first `quarters` quarter-hours after
/// [`BASE_MS`]; returns the store.
fn store_with(root: &Path, scratch: &Path, quarters: i64, per_quarter: i64) -> StateStore {
    let mut n = 0;
    for q in 0..quarters {
        for i in 0..per_quarter {
            let r = Run {
                n,
                minute: q * 15 + i % 15,
                outcome: 0,
                tokens: 10,
            };
            std::fs::write(place(root, n, 1), run_bytes(scratch, &r, false)).unwrap();
            n += 1;
        }
    }
    let store = StateStore::open(root).unwrap();
    store.index_runs().unwrap();
    store
}

/// `stats` reads one row per quarter-hour: six times the runs in the same quarter-hours cost
/// the same SQLite steps, where summing the rows costs several times more.
#[test]
fn running_totals_cost_the_quarter_hours_not_the_runs() {
    let (small, large, scratch) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let small = store_with(small.path(), scratch.path(), 4, 5);
    let large = store_with(large.path(), scratch.path(), 4, 30);
    for by in [RunGrouping::DayAtOffset(60), RunGrouping::Model] {
        let q = RunQuery::default();
        let (s, l) = (
            small.run_index().run_totals(&q, by).unwrap(),
            large.run_index().run_totals(&q, by).unwrap(),
        );
        assert!(s.from_running_totals && l.from_running_totals);
        assert_eq!((s.all.runs, l.all.runs), (20, 120));
        assert_eq!(s.groups_summed, l.groups_summed, "{by:?}");
        assert_eq!(s.sql_steps, l.sql_steps, "{by:?}: steps grow with the runs");
        assert_eq!(l.rows_read, 0);
        let (s, l) = (
            small.run_index().run_totals_by_scan(&q, by).unwrap(),
            large.run_index().run_totals_by_scan(&q, by).unwrap(),
        );
        assert!(
            l.sql_steps > 3 * s.sql_steps,
            "{} vs {}",
            l.sql_steps,
            s.sql_steps
        );
    }
    // A window cutting two quarter-hours sums only their rows.
    let q = query(Some("2026-10-20T00:05:00Z"), Some("2026-10-20T00:50:00Z"));
    let t = large.run_index().run_totals(&q, RunGrouping::Day).unwrap();
    assert!(t.from_running_totals);
    let scan = large
        .run_index()
        .run_totals_by_scan(&q, RunGrouping::Day)
        .unwrap();
    assert_eq!(t.all, scan.all);
    // The day's row (the window cuts it), its quarter-hours 00:00 to 00:45 read (00:15 and
    // 00:30 whole), and the rows of the two cut ones (00:05–00:14, 00:45–00:49) summed: one
    // group each.
    assert_eq!(t.groups_summed, 1 + 4 + 2);
    assert_eq!(t.all.runs, 2 * 30 + (10 + 5) * 2);
}

/// A `state.db` of user version 8 (before the running totals): opening it for writing fills
/// them from the rows it has; the answers do not change.
#[test]
fn the_migration_fills_the_running_totals_from_existing_rows() {
    let mut sim = Sim::new();
    for n in 0..6 {
        sim.apply(&Op::Write(Run {
            n,
            minute: i64::from(n) * 700,
            outcome: (n % 4) as u8,
            tokens: u64::from(n) * 11,
        }));
    }
    sim.apply(&Op::Copy {
        n: 2,
        day: 20,
        short: false,
    });
    let root = sim.root.path().to_owned();
    let want = {
        let store = StateStore::open(&root).unwrap();
        store.index_runs().unwrap();
        store
            .run_index()
            .run_totals_by_scan(&RunQuery::default(), RunGrouping::DayAtOffset(-300))
            .unwrap()
    };
    {
        let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
        conn.execute_batch(
            "DROP TRIGGER run_totals_replace; DROP TRIGGER run_totals_insert; \
             DROP TRIGGER run_totals_insert_run; DROP TRIGGER run_totals_delete; \
             DROP TRIGGER run_totals_delete_run; DROP TRIGGER run_totals_update; \
             DROP TRIGGER run_totals_update_old; DROP TRIGGER run_totals_update_new; \
             DROP TABLE run_totals; DROP TABLE run_dup_ids; \
             DROP TRIGGER run_day_totals_replace; DROP TRIGGER run_day_totals_insert; \
             DROP TRIGGER run_day_totals_delete; DROP TRIGGER run_day_totals_update_old; \
             DROP TRIGGER run_day_totals_update_new; DROP TABLE run_day_totals; \
             PRAGMA user_version = 8;",
        )
        .unwrap();
    }
    // Read-only, the old database cannot take the tables: the rows are summed.
    let ro = StateStore::open_read_only(&root).unwrap();
    let t = ro
        .run_index()
        .run_totals(&RunQuery::default(), RunGrouping::DayAtOffset(-300))
        .unwrap();
    assert!(!t.from_running_totals);
    assert_eq!((t.groups.clone(), t.all), (want.groups.clone(), want.all));
    drop(ro);
    let store = StateStore::open(&root).unwrap();
    let t = store
        .run_totals(&RunQuery::default(), RunGrouping::DayAtOffset(-300))
        .unwrap();
    assert!(t.from_running_totals);
    assert_eq!(t.groups, want.groups);
    assert_eq!(t.all, want.all);
    assert_eq!(t.all.runs, 6);
    assert_eq!(t.duplicated.len(), 1);
    let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
    let v: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, 12);
}

/// A UTC calendar reads one row per day: three days of one run a quarter-hour cost three
/// rows where the quarter-hours are 288, and a window cutting two of the days reads only
/// those two days' quarter-hours inside it.
#[test]
fn utc_days_cost_one_row_per_day_not_per_quarter_hour() {
    let (root, scratch) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = store_with(root.path(), scratch.path(), 3 * 96, 1);
    let index = store.run_index();
    for by in [RunGrouping::Day, RunGrouping::DayAtOffset(0)] {
        let t = index.run_totals(&RunQuery::default(), by).unwrap();
        assert!(t.from_running_totals);
        assert_eq!(t.all.runs, 288);
        assert_eq!(t.groups.len(), 3);
        assert_eq!(t.groups_summed, 3, "{by:?}: one row per day");
        let scan = index.run_totals_by_scan(&RunQuery::default(), by).unwrap();
        assert_eq!((t.groups, t.all), (scan.groups, scan.all));
    }
    // Another offset still reads the quarter-hours.
    let t = index
        .run_totals(&RunQuery::default(), RunGrouping::DayAtOffset(60))
        .unwrap();
    assert!(t.from_running_totals);
    assert_eq!(t.groups_summed, 288);
    // 2026-10-20 cut at 10:07 (quarter-hours 10:00 to 23:45 read: 56), 2026-10-21 whole (its
    // day row), 2026-10-22 cut at 05:00 (00:00 to 05:00 read: 21); the cut quarter-hour
    // 10:00 holds no run inside the window (its run starts at 10:00:07), so no group.
    let q = query(Some("2026-10-20T10:07:00Z"), Some("2026-10-22T05:00:00Z"));
    let t = index.run_totals(&q, RunGrouping::Day).unwrap();
    let scan = index.run_totals_by_scan(&q, RunGrouping::Day).unwrap();
    assert!(t.from_running_totals);
    assert_eq!((&t.groups, t.all), (&scan.groups, scan.all));
    assert_eq!(t.all.runs, 55 + 96 + 20);
    assert_eq!(t.groups_summed, 3 + 56 + 21);
}

/// A `state.db` of user version 10 (quarter-hour totals, no day totals): read-only it is
/// answered from the quarter-hours; opened for writing it is upgraded to the current version
/// (12) keeping its rows, and the day totals are filled from them.
#[test]
fn an_index_of_version_10_is_upgraded_keeping_its_rows() {
    let (root, scratch) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let want = {
        let store = store_with(root.path(), scratch.path(), 2 * 96, 1);
        store
            .run_index()
            .run_totals_by_scan(&RunQuery::default(), RunGrouping::Day)
            .unwrap()
    };
    let version = |conn: &rusqlite::Connection| -> i64 {
        conn.query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap()
    };
    {
        let conn = rusqlite::Connection::open(root.path().join("state.db")).unwrap();
        assert_eq!(version(&conn), 12);
        conn.execute_batch(
            "DROP TRIGGER run_day_totals_replace; DROP TRIGGER run_day_totals_insert; \
             DROP TRIGGER run_day_totals_delete; DROP TRIGGER run_day_totals_update_old; \
             DROP TRIGGER run_day_totals_update_new; DROP TABLE run_day_totals; \
             PRAGMA user_version = 10;",
        )
        .unwrap();
    }
    let ro = StateStore::open_read_only(root.path()).unwrap();
    let t = ro
        .run_index()
        .run_totals(&RunQuery::default(), RunGrouping::Day)
        .unwrap();
    assert!(t.from_running_totals);
    assert_eq!(t.groups_summed, 192, "the quarter-hours of version 10");
    assert_eq!((&t.groups, t.all), (&want.groups, want.all));
    drop(ro);
    let store = StateStore::open(root.path()).unwrap();
    let t = store
        .run_index()
        .run_totals(&RunQuery::default(), RunGrouping::Day)
        .unwrap();
    assert!(t.from_running_totals);
    assert_eq!(t.groups_summed, 2);
    assert_eq!((&t.groups, t.all), (&want.groups, want.all));
    assert_eq!(t.all.runs, 192);
    let conn = rusqlite::Connection::open(root.path().join("state.db")).unwrap();
    assert_eq!(version(&conn), 12);
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 192, "the rows are kept");
}
