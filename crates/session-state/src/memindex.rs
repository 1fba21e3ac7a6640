//! A run index in memory, for a store whose own index cannot be used (opened read-only with
//! no `state.db`, an empty `runs` table, or one that cannot be written): filled from the run
//! files themselves without writing anything anywhere, and queried like the index in
//! `state.db` ([`RunIndex::list_runs`], [`RunIndex::run_totals`], …).
//!
//! Rows can be read whole ([`RowRead::Whole`]: the same row a refresh of `state.db` stores)
//! or bounded ([`RowRead::Bounded`]: the head block and a tail probe, for a listing that must
//! not read whole files).

use std::path::{Path, PathBuf};

use session_jsonl::RunFile;

use crate::db::{WriteTx, db_err};
use crate::error::{Result, StateError};
use crate::fold::read_run_row;
use crate::index::RunIndex;
use crate::row::RunRow;
use crate::runs::{rel_path, to_values, upsert};
use crate::store::StateStore;

/// How [`RunIndex::index_files`] reads each file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RowRead {
    /// The whole file (decompressed for `.jsonl.zst`): exact counts and token sums.
    Whole,
    /// At most the head block ([`HEAD_LIMIT`](session_jsonl::scan::HEAD_LIMIT), 64 KiB) and one 64 KiB block of the tail
    /// ([`session_jsonl::terminal_state_probe`]) of a plain file, 128 KiB in all: a file no longer than the
    /// head block is read whole; a longer one gives a row whose header fields, first input,
    /// workspace and model come from the head block, whose outcome and last time come from
    /// the tail, and whose counts (records, invocations, tokens, damage) cover only the head
    /// block ([`FilesIndexed::partial`] names it). Archived `.jsonl.zst` runs cannot be read
    /// backwards and are read whole.
    Bounded,
}

/// What [`RunIndex::index_files`] did.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct FilesIndexed {
    /// Files indexed (runs and files that are no runs).
    pub indexed: u64,
    /// Files whose row was read bounded and whose counts cover only their head block.
    pub partial: Vec<PathBuf>,
    /// Files that could not be read, with the error; they have no row.
    pub failed: Vec<(PathBuf, StateError)>,
}

impl StateStore {
    /// An empty run index in memory over the run tree of `sessions_root`: nothing is created,
    /// opened for writing or written under the root or anywhere else (no temporary files:
    /// SQLite keeps the database and its temporary tables in memory). The store refuses every
    /// write to session files ([`StateError::ReadOnly`], like
    /// [`StateStore::open_read_only`]), holds no sessions, and its `runs` table is filled by
    /// [`RunIndex::index_files`]; its rows name the files under `sessions_root`.
    ///
    /// # Errors
    /// [`StateError::Db`] when SQLite cannot set up the in-memory database.
    pub fn open_memory_index(sessions_root: impl AsRef<Path>) -> Result<StateStore> {
        Ok(StateStore::memory_index_over(RunIndex::open_in_memory(
            sessions_root,
        )?))
    }

    /// Whether this store is a run index in memory ([`StateStore::open_memory_index`]).
    pub fn is_memory_index(&self) -> bool {
        self.memory_index
    }
}

impl RunIndex {
    /// Adds (or replaces) the rows of `files` in this in-memory index, reading each file as
    /// `read` says, in one transaction. Files that cannot be read are reported in
    /// [`FilesIndexed::failed`], not as errors.
    ///
    /// # Errors
    /// [`StateError::ReadOnly`] on a store that is not a run index in memory (the index in
    /// `state.db` is brought up to date by [`RunIndex::index_runs`]); [`StateError::Db`]
    /// when the rows cannot be stored.
    pub fn index_files(&self, files: &[RunFile], read: RowRead) -> Result<FilesIndexed> {
        if !self.memory_index {
            return Err(StateError::ReadOnly {
                root: self.root.clone(),
                op: "index files into a run index in memory",
            });
        }
        let mut report = FilesIndexed::default();
        let mut rows = Vec::with_capacity(files.len());
        for f in files {
            let (size, mtime) = match std::fs::symlink_metadata(&f.path) {
                Ok(m) => (m.len(), m.modified().ok().map_or(0, crate::tree::to_ns)),
                Err(e) => {
                    report
                        .failed
                        .push((f.path.clone(), StateError::io("stat", &f.path, e)));
                    continue;
                }
            };
            let result = match read {
                RowRead::Bounded => read_run_row_bounded(&f.path, size, mtime, f.compressed),
                RowRead::Whole => {
                    read_run_row(&f.path, size, mtime, f.compressed).map(|(r, d)| (r, d, false))
                }
            };
            match result {
                Ok((row, diagnostic, partial)) => {
                    if partial {
                        report.partial.push(f.path.clone());
                    }
                    let rel = rel_path(&self.root, &f.path);
                    rows.push(to_values(&rel, &row, diagnostic.as_deref()));
                }
                Err(e) => report.failed.push((f.path.clone(), e)),
            }
        }
        let conn = self.lock();
        let tx = WriteTx::begin(&conn, &self.db_path, self.options.max_busy_wait)?;
        for values in &rows {
            upsert(tx.conn, values).map_err(db_err(&self.db_path, "store run rows"))?;
        }
        tx.commit()?;
        report.indexed = u64::try_from(rows.len()).unwrap_or(u64::MAX);
        Ok(report)
    }
}

/// Bytes of the tail a bounded row reads: one block, so that head and tail stay within
/// 128 KiB per file.
const TAIL_BLOCK: u64 = 64 << 10;

/// A row from at most the head block and the tail probe ([`RowRead::Bounded`]); the flag says
/// whether its counts cover only the head block (the row is then marked
/// [`RunRow::partial`], listed as read).
fn read_run_row_bounded(
    path: &Path,
    size: u64,
    mtime: i64,
    compressed: bool,
) -> Result<(RunRow, Option<String>, bool)> {
    let b = crate::partial::read_bounded(path, size, mtime, compressed, TAIL_BLOCK, false)?;
    Ok((b.row, b.diagnostic, !b.whole))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::row::IndexedRunOutcome;

    const AT: &str = "2026-02-03T12:00:00.000Z";

    fn files(root: &Path) -> Vec<RunFile> {
        session_jsonl::list_run_files(root).unwrap().files
    }

    #[test]
    fn bounded_rows_of_long_files_and_a_header_longer_than_the_head_block() {
        let dir = tempfile::tempdir().unwrap();
        let day = dir.path().join("2026/02/03");
        std::fs::create_dir_all(&day).unwrap();
        let prompt = "p".repeat(100 << 10);
        let header = format!(
            r#"{{"type":"header","schema_version":1,"run_id":"r1","session_id":"s","started_at":"{AT}","prompts":{{"system":"{prompt}"}}}}"#
        );
        let end =
            format!(r#"{{"type":"run.end","run_id":"r1","ts":"{AT}","outcome":"cancelled"}}"#);
        std::fs::write(day.join("r1.jsonl"), format!("{header}\n{end}\n")).unwrap();
        let before: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();

        let memory = StateStore::open_memory_index(dir.path()).unwrap();
        assert!(memory.is_memory_index());
        let counter = session_jsonl::count_file_reads();
        let report = memory
            .index_files(&files(dir.path()), RowRead::Bounded)
            .unwrap();
        assert_eq!(report.indexed, 1);
        assert_eq!(report.partial, vec![day.join("r1.jsonl")]);
        assert!(
            counter.total_bytes() <= 128 << 10,
            "{}",
            counter.total_bytes()
        );
        drop(counter);
        let page = memory.list_runs(&crate::RunQuery::default()).unwrap();
        assert_eq!(page.runs.len(), 1);
        let row = &page.runs[0];
        assert_eq!(row.run_id, "r1");
        assert_eq!(row.session_id.as_deref(), Some("s"));
        assert_eq!(row.started_at_utc.as_deref(), Some(AT));
        assert_eq!(row.outcome, IndexedRunOutcome::Cancelled);
        assert_eq!(row.path, day.join("r1.jsonl"));
        assert!(memory.run_file_diagnostics().unwrap().is_empty());

        // Read whole, the same file gives the row a refresh of `state.db` stores.
        let whole = StateStore::open_memory_index(dir.path()).unwrap();
        let report = whole
            .index_files(&files(dir.path()), RowRead::Whole)
            .unwrap();
        assert!(report.partial.is_empty());
        let row = &whole.list_runs(&crate::RunQuery::default()).unwrap().runs[0];
        assert_eq!(
            (row.record_count, row.outcome.clone()),
            (2, IndexedRunOutcome::Cancelled)
        );

        // Nothing was created under the root; sessions cannot be written through it.
        let after: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        assert_eq!(after, before);
        assert!(matches!(
            memory.delete("s"),
            Err(StateError::ReadOnly { .. })
        ));
    }

    #[test]
    fn only_a_memory_index_takes_files() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(dir.path()).unwrap();
        assert!(!store.is_memory_index());
        assert!(matches!(
            store.index_files(&[], RowRead::Whole),
            Err(StateError::ReadOnly { .. })
        ));
    }
}
