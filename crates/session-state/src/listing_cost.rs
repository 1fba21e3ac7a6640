//! What a warm `sessions runs --limit 50` costs `state.db`, counted rather than timed: the
//! SQL statements run, the SQLite virtual-machine steps they take (which grow with every row
//! or index entry SQLite visits, returned or not) and the rows they return, for the work
//! after the connection is set up: the recovery's look-up of pending rewrites, the refresh of
//! an unchanged run tree, one page of 51 rows and the files that are no runs. A store ten
//! times larger may cost a little more per day directory (one `run_dirs` row and one
//! primary-key look-up each), never per run or per session: a look-up that visits every row
//! of a table fails here before it shows up in the scale benchmark (`benches/scale.rs` of
//! session-cli, "runs --limit 50").

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::Path;
    use std::sync::Arc;
    use std::time::{Duration, SystemTime};

    use parking_lot::Mutex;
    use rusqlite::StatementStatus;
    use rusqlite::trace::{TraceEvent, TraceEventCodes};
    use session_schema::{SessionState, Timestamp, parse_message};

    use crate::runs::RunQuery;
    use crate::store::StateStore;
    use crate::types::{SaveDurability, StoreOptions};

    /// Runs per session, as the scale benchmark writes them.
    const PER_SESSION: usize = 30;
    /// 2026-05-28T00:00:00Z in milliseconds.
    const BASE_MS: i64 = 1_779_926_400_000;

    fn session_id(i: usize) -> String {
        format!("5e550000-0000-4000-8000-{:012x}", i / PER_SESSION)
    }

    /// Run `i`, started `i` minutes after [`BASE_MS`] (1,440 runs per day directory), in the
    /// day directory of its start.
    fn plant(root: &Path, i: usize) {
        let at = Timestamp::from_unix_millis(BASE_MS + i as i64 * 60_000);
        let at = at.as_str();
        let dir = root.join(at[..10].replace('-', "/"));
        std::fs::create_dir_all(&dir).unwrap();
        let run = format!("0bench{:02x}-0000-4000-8000-{i:012x}", i % 251);
        let session = session_id(i);
        let text = format!(
            "{{\"type\":\"header\",\"schema_version\":1,\"run_id\":\"{run}\",\"session_id\":\"{session}\",\"started_at\":\"{at}\"}}\n\
             {{\"type\":\"run.end\",\"run_id\":\"{run}\",\"ts\":\"{at}\",\"outcome\":\"completed\"}}\n"
        );
        std::fs::write(dir.join(format!("{run}.jsonl")), text).unwrap();
    }

    /// Sets the modification time of every file and directory under `dir` (files first).
    fn age(dir: &Path, at: SystemTime) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                age(&p, at);
            } else {
                std::fs::File::options()
                    .write(true)
                    .open(&p)
                    .unwrap()
                    .set_modified(at)
                    .unwrap();
            }
        }
        std::fs::File::open(dir).unwrap().set_modified(at).unwrap();
    }

    #[derive(Debug, Default, Clone, Copy)]
    struct Cost {
        statements: u64,
        steps: u64,
        rows: u64,
    }

    /// A store of `n` runs and one saved session per 30 runs, indexed; then, opened again,
    /// what a warm `runs --limit 50` costs its connection.
    fn warm_listing(n: usize) -> Cost {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for i in 0..n {
            plant(root, i);
        }
        // Written an hour ago: a directory changed within the racy window of the first build
        // would be listed again by the warm refresh, whatever the listing costs.
        age(root, SystemTime::now() - Duration::from_secs(3600));
        let options = StoreOptions {
            durability: SaveDurability::NoSync,
            ..StoreOptions::default()
        };
        {
            let store = StateStore::open_with(root, options.clone()).unwrap();
            for i in (0..n).step_by(PER_SESSION) {
                let state = SessionState {
                    schema_version: Some(1i64.into()),
                    session_id: session_id(i),
                    updated_at: Timestamp::from_raw("2026-12-01T10:00:00.000Z"),
                    messages: vec![
                        parse_message(br#"{"role":"user","content":"question"}"#)
                            .unwrap()
                            .value,
                    ],
                    ..Default::default()
                };
                store.save(&state).unwrap();
            }
            let first = store.index_runs().unwrap();
            assert_eq!(first.added, n as u64);
        }
        let store = StateStore::open_with(root, options).unwrap();
        let cost: Arc<Mutex<(Cost, BTreeMap<String, i32>)>> = Arc::default();
        let sink = Arc::clone(&cost);
        store
            .lock()
            .trace_v2(
                TraceEventCodes::SQLITE_TRACE_STMT
                    | TraceEventCodes::SQLITE_TRACE_PROFILE
                    | TraceEventCodes::SQLITE_TRACE_ROW,
                Some(move |e: TraceEvent<'_>| {
                    let mut guard = sink.lock();
                    let (c, before) = &mut *guard;
                    match e {
                        // A cached statement's counter runs on from its earlier runs.
                        TraceEvent::Stmt(s, sql) => {
                            c.statements += 1;
                            before.insert(sql.to_owned(), s.get_status(StatementStatus::VmStep));
                        }
                        TraceEvent::Profile(s, _) => {
                            let now = s.get_status(StatementStatus::VmStep);
                            let was = before.remove(s.sql().as_ref()).unwrap_or(0);
                            c.steps += u64::try_from(now - was).unwrap_or(0);
                        }
                        TraceEvent::Row(_) => c.rows += 1,
                        _ => {}
                    }
                }),
            )
            .unwrap();
        assert!(store.recover_at_open().unwrap().is_empty());
        let refresh = store.index_runs().unwrap();
        assert_eq!((refresh.files_read, refresh.dirs_listed), (0, 0));
        let query = RunQuery {
            limit: Some(51),
            ..RunQuery::default()
        };
        let page = store.list_runs(&query).unwrap();
        assert_eq!(page.runs.len(), 51);
        assert!(store.run_file_diagnostics().unwrap().is_empty());
        store
            .lock()
            .trace_v2(TraceEventCodes::empty(), None::<fn(TraceEvent<'_>)>)
            .unwrap();
        cost.lock().0
    }

    /// The query plan of the recovery's look-up of pending rewrites.
    fn pending_plan(conn: &rusqlite::Connection) -> String {
        let mut stmt = conn
            .prepare(
                "EXPLAIN QUERY PLAN SELECT session_id, pending_file FROM session_files \
                 WHERE pending_file IS NOT NULL",
            )
            .unwrap();
        let rows = stmt.query_map([], |r| r.get::<_, String>(3)).unwrap();
        rows.map(Result::unwrap).collect::<Vec<_>>().join("; ")
    }

    /// User version 12 adds the partial index of pending rewrites: a `state.db` of version 11
    /// is read as it is by a read-only open (a scan of `session_files`) and gets the index on
    /// the first writable open, its rows kept.
    #[test]
    fn a_store_of_version_11_gets_the_index_of_pending_rewrites() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        plant(root, 0);
        {
            let store = StateStore::open(root).unwrap();
            store.index_runs().unwrap();
        }
        let db = root.join("state.db");
        let version = |c: &rusqlite::Connection| -> i64 {
            c.query_row("PRAGMA user_version", [], |r| r.get(0))
                .unwrap()
        };
        {
            let conn = rusqlite::Connection::open(&db).unwrap();
            assert_eq!(version(&conn), 12);
            assert!(pending_plan(&conn).contains("session_files_pending"));
            conn.execute_batch("DROP INDEX session_files_pending; PRAGMA user_version = 11;")
                .unwrap();
            assert!(pending_plan(&conn).starts_with("SCAN session_files"));
        }
        let ro = StateStore::open_read_only(root).unwrap();
        assert_eq!(ro.list_runs(&RunQuery::default()).unwrap().runs.len(), 1);
        drop(ro);
        assert_eq!(version(&rusqlite::Connection::open(&db).unwrap()), 11);
        let store = StateStore::open(root).unwrap();
        assert_eq!(store.list_runs(&RunQuery::default()).unwrap().runs.len(), 1);
        drop(store);
        let conn = rusqlite::Connection::open(&db).unwrap();
        assert_eq!(version(&conn), 12);
        assert!(pending_plan(&conn).contains("session_files_pending"));
    }

    #[test]
    fn a_warm_listing_of_ten_thousand_runs_costs_what_one_of_a_thousand_does() {
        let small = warm_listing(1_000);
        let large = warm_listing(10_000);
        // 1,000 runs fill one day directory, 10,000 seven: one `run_dirs` row and one
        // primary-key look-up more for each of the six others.
        let days = 6;
        assert!(
            large.statements <= small.statements + days,
            "{small:?} → {large:?}"
        );
        // Rows: the day's `run_dirs` row and its look-up's row, and the month directory
        // the larger store reaches into.
        assert!(
            large.rows <= small.rows + 2 * days + 2,
            "{small:?} → {large:?}"
        );
        assert!(
            large.steps * 10 <= small.steps * 12 + 40 * days * 10,
            "{small:?} → {large:?}"
        );
    }
}
