//! What a store-sized pass of the run index (the first build, a reindex) costs per run file
//! and in `state.db`, counted rather than timed: the `read` calls per file (one for a small
//! file whose listed size the read reaches: no second `read` to find its end, none for the
//! held last line) and the WAL frames the pass writes (each page once, at the commit: a page
//! cache too small for the pass spills pages to the WAL in the middle of the transaction and
//! reads them back), with the read and write system calls of the thread that writes
//! (`/proc/thread-self/io`, Linux).

#[cfg(test)]
pub(crate) mod tests {
    use std::path::Path;
    use std::time::{Duration, SystemTime};

    use crate::store::StateStore;
    use crate::types::{SaveDurability, StoreOptions};

    /// Run `i` of a store whose runs all started on 2026-05-28.
    fn plant(root: &Path, i: usize) {
        let dir = root.join("2026/05/28");
        std::fs::create_dir_all(&dir).unwrap();
        let run = format!("0c0s7000-0000-4000-8000-{i:012x}");
        let at = "2026-05-28T10:00:00.000Z";
        let text = format!(
            "{{\"type\":\"header\",\"schema_version\":1,\"run_id\":\"{run}\",\"session_id\":\"s{}\",\"started_at\":\"{at}\"}}\n\
             {{\"type\":\"run.start\",\"run_id\":\"{run}\",\"ts\":\"{at}\",\"input\":\"question {i} of a run of the pass\"}}\n\
             {{\"type\":\"run.end\",\"run_id\":\"{run}\",\"ts\":\"{at}\",\"outcome\":\"completed\"}}\n",
            i / 30
        );
        let path = dir.join(format!("{run}.jsonl"));
        std::fs::write(&path, text).unwrap();
        // Not racy: written an hour ago.
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(SystemTime::now() - Duration::from_secs(3600))
            .unwrap();
    }

    fn store_of(root: &Path, n: usize) -> StateStore {
        for i in 0..n {
            plant(root, i);
        }
        let options = StoreOptions {
            durability: SaveDurability::NoSync,
            ..StoreOptions::default()
        };
        StateStore::open_with(root, options).unwrap()
    }

    #[test]
    fn a_first_build_makes_one_read_call_per_small_run_file() {
        let n = 300;
        let dir = tempfile::tempdir().unwrap();
        let store = store_of(dir.path(), n);
        let counter = session_jsonl::count_file_reads();
        let report = store.index_runs().unwrap();
        assert_eq!(report.added, n as u64);
        let reads = counter.reads();
        assert_eq!(reads.len(), n, "each file opened once");
        let calls: Vec<u64> = reads.iter().map(|r| r.read_calls).collect();
        assert!(
            calls.iter().all(|&c| c == 1),
            "read calls per file: {:?}",
            &calls[..calls.len().min(10)]
        );
        // A rebuild reads each file once more, with one call each.
        let counter = session_jsonl::count_file_reads();
        store.reindex().unwrap();
        assert_eq!(counter.files_opened(), n);
        assert_eq!(counter.read_calls(), n as u64);
    }

    /// WAL frames in `state.db-wal` (a 32-byte header, then 24 bytes and a page per frame).
    fn wal_frames(root: &Path, page_size: u64) -> u64 {
        let len = std::fs::metadata(root.join("state.db-wal")).map_or(0, |m| m.len());
        len.saturating_sub(32) / (24 + page_size)
    }

    /// `(read, write)` system calls made by the calling thread so far (`syscr`, `syscw` of
    /// `/proc/thread-self/io`: `pread64`/`pwrite64` of SQLite included).
    #[cfg(target_os = "linux")]
    fn thread_syscalls() -> (u64, u64) {
        let text = std::fs::read_to_string("/proc/thread-self/io").unwrap();
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap()
        };
        (field("syscr:"), field("syscw:"))
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_first_build_writes_each_page_to_the_wal_once_whatever_the_connection_cache() {
        let n = 2000;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let store = store_of(root, n);
        let page_size = {
            let conn = store.lock();
            conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE); PRAGMA cache_size = -64")
                .unwrap();
            crate::column::query_int(&conn, "PRAGMA page_size", [])
                .unwrap()
                .cast_unsigned()
        };
        assert_eq!(wal_frames(root, page_size), 0);
        let counter = session_jsonl::count_file_reads();
        let (r0, w0) = thread_syscalls();
        let report = store.index_runs().unwrap();
        let (r1, w1) = thread_syscalls();
        assert_eq!(report.added, n as u64);
        let frames = wal_frames(root, page_size);
        let conn = store.lock();
        let pages = crate::column::query_int(&conn, "PRAGMA page_count", [])
            .unwrap()
            .cast_unsigned();
        // The pass's pages go to the WAL once each, at its commit: no more frames than the
        // database has pages (a spilled page is written again when it changes after).
        assert!(
            frames <= pages,
            "{frames} WAL frames for a database of {pages} pages"
        );
        // Reads: the checkpoint after the commit reads each frame once; besides, the run
        // files read on this thread (one call each; all of them when the read pool runs
        // inline, on one core). Measured: 1,157 reads, 3,439 writes for 1,146 frames; with
        // the connection's own 64 KiB cache the pass spilled its pages and read them back:
        // 6,920 reads, 4,599 writes.
        let (reads, writes) = (r1 - r0, w1 - w0);
        assert!(
            reads <= frames + n as u64 + 64,
            "{reads} read calls for {frames} WAL frames (files: {} read calls on all threads)",
            counter.read_calls()
        );
        // Writes: a frame is two (its header and its page), the checkpoint one per page.
        assert!(
            writes <= 3 * frames + 16,
            "{writes} write calls for {frames} WAL frames"
        );
        // The connection's cache is set back after the pass.
        assert_eq!(
            crate::column::query_int(&conn, "PRAGMA cache_size", []).unwrap(),
            -64
        );
    }

    /// The SQL of every statement `op` runs on the store's connection.
    pub(crate) fn statements_of(store: &StateStore, op: impl FnOnce()) -> Vec<String> {
        traced_statements(store, |_, sql| sql.to_owned(), op)
    }

    /// `record(statement, sql)` of every statement `op` runs on the store's connection, in
    /// the order they start (SQLite's statement trace).
    pub(crate) fn traced_statements<T: Send + 'static>(
        store: &StateStore,
        record: impl Fn(&rusqlite::trace::StmtRef<'_>, &str) -> T + Send + 'static,
        op: impl FnOnce(),
    ) -> Vec<T> {
        use rusqlite::trace::{TraceEvent, TraceEventCodes};
        use std::sync::{Arc, Mutex};
        let seen: Arc<Mutex<Vec<T>>> = Arc::default();
        let sink = Arc::clone(&seen);
        store
            .lock()
            .trace_v2(
                TraceEventCodes::SQLITE_TRACE_STMT,
                Some(move |e: TraceEvent<'_>| {
                    if let TraceEvent::Stmt(stmt, sql) = e {
                        sink.lock().unwrap().push(record(&stmt, sql));
                    }
                }),
            )
            .unwrap();
        op();
        store
            .lock()
            .trace_v2(TraceEventCodes::empty(), None::<fn(TraceEvent<'_>)>)
            .unwrap();
        std::mem::take(&mut *seen.lock().unwrap())
    }

    #[test]
    fn a_first_build_and_a_reindex_build_again_only_the_indexes_holding_every_row() {
        let n = 100;
        let dir = tempfile::tempdir().unwrap();
        let store = store_of(dir.path(), n);
        let built = |sqls: &[String]| -> Vec<String> {
            let mut names: Vec<String> = sqls
                .iter()
                .filter_map(|s| s.trim_start().strip_prefix("CREATE INDEX "))
                .filter_map(|rest| rest.split_whitespace().next())
                .map(str::to_owned)
                .collect();
            names.sort();
            names
        };
        let full = ["runs_by_run_id", "runs_by_session_utc", "runs_by_start_utc"];
        // Each full index is built once from the rows; the partial ones (a row of none of
        // them costs its insert the test of their condition) are not dropped, so no build
        // reads every row for them.
        let first = statements_of(&store, || {
            assert_eq!(store.index_runs().unwrap().added, n as u64);
        });
        assert_eq!(built(&first), full);
        store.lock().execute_batch("DELETE FROM runs").unwrap();
        let again = statements_of(&store, || {
            store.reindex().unwrap();
        });
        assert_eq!(built(&again), full);
        let conn = store.lock();
        let indexes = crate::column::query_texts(
            &conn,
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'runs' \
             AND sql IS NOT NULL ORDER BY name",
            [],
            0,
        )
        .unwrap();
        assert_eq!(
            indexes,
            [
                "runs_by_run_id",
                "runs_by_session_utc",
                "runs_by_start_utc",
                "runs_not_runs",
                "runs_partial"
            ]
        );
        assert_eq!(
            crate::column::query_int(
                &conn,
                "SELECT count(*) FROM runs INDEXED BY runs_partial WHERE partial = 1",
                []
            )
            .unwrap(),
            0
        );
    }

    #[test]
    fn a_run_read_for_the_index_is_looked_at_again_on_its_open_file() {
        use std::io::Write;

        use crate::tree::LookedAfter;

        let dir = tempfile::tempdir().unwrap();
        plant(dir.path(), 1);
        let path = std::fs::read_dir(dir.path().join("2026/05/28"))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let md = std::fs::symlink_metadata(&path).unwrap();
        let (size, mtime) = (md.len(), crate::tree::mtime_ns(&md));
        let read =
            crate::partial::read_for_refresh(&path, size, mtime, false, None, &mut Vec::new())
                .unwrap();
        // The `fstat` after the read, on the file read: what the listing saw.
        let after = read.after.expect("looked at on the open file");
        assert!(!after.changed_since(size, mtime));

        let file = std::fs::File::open(&path).unwrap();
        let look = |f: &std::fs::File| LookedAfter::of(&f.metadata().unwrap());
        // Written while read: its length moved.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{}\n")
            .unwrap();
        assert!(look(&file).changed_since(size, mtime));
        let size = look(&file).size;
        let mtime = look(&file).mtime_ns;
        assert!(!look(&file).changed_since(size, mtime));
        // Replaced at its path by a rename over it: the file read has no name left.
        let other = dir.path().join("other.jsonl");
        std::fs::copy(&path, &other).unwrap();
        std::fs::rename(&other, &path).unwrap();
        #[cfg(unix)]
        assert!(look(&file).unlinked && look(&file).changed_since(size, mtime));
        // Removed: the same.
        let file = std::fs::File::open(&path).unwrap();
        let size = look(&file).size;
        let mtime = look(&file).mtime_ns;
        assert!(!look(&file).changed_since(size, mtime));
        std::fs::remove_file(&path).unwrap();
        #[cfg(unix)]
        assert!(look(&file).changed_since(size, mtime));
    }
}
