//! [`StateStore`]'s run-index methods: each hands over to the store's [`RunIndex`]
//! ([`StateStore::run_index`]), which owns refresh, listing, lookup and totals (spec §2).
//! They stay for the many callers that hold a store; new code calls the index.

use std::path::PathBuf;

use session_jsonl::RunFile;

use crate::error::Result;
use crate::memindex::{FilesIndexed, RowRead};
use crate::row::RunRow;
use crate::runs::{IndexReport, ReindexReport, RunFileDiagnostic, RunPage, RunQuery};
use crate::store::StateStore;
use crate::totals::{GroupedRunTotals, RunGrouping};

impl StateStore {
    /// [`RunIndex::index_runs`](crate::RunIndex::index_runs) on [`StateStore::run_index`].
    ///
    /// # Errors
    /// As [`RunIndex::index_runs`](crate::RunIndex::index_runs); [`crate::StateError::ReadOnly`]
    /// on a store opened read-only.
    pub fn index_runs(&self) -> Result<IndexReport> {
        self.index.index_runs()
    }

    /// [`RunIndex::index_runs_with_progress`](crate::RunIndex::index_runs_with_progress) on
    /// [`StateStore::run_index`].
    ///
    /// # Errors
    /// As [`StateStore::index_runs`].
    pub fn index_runs_with_progress(
        &self,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<IndexReport> {
        self.index.index_runs_with_progress(progress)
    }

    /// [`RunIndex::reindex`](crate::RunIndex::reindex) on [`StateStore::run_index`].
    ///
    /// # Errors
    /// As [`RunIndex::reindex`](crate::RunIndex::reindex).
    pub fn reindex(&self) -> Result<ReindexReport> {
        self.index.reindex()
    }

    /// [`RunIndex::reindex_with_progress`](crate::RunIndex::reindex_with_progress) on
    /// [`StateStore::run_index`].
    ///
    /// # Errors
    /// As [`StateStore::reindex`].
    pub fn reindex_with_progress(
        &self,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<ReindexReport> {
        self.index.reindex_with_progress(progress)
    }

    /// [`RunIndex::runs_for_session`](crate::RunIndex::runs_for_session) on
    /// [`StateStore::run_index`].
    ///
    /// # Errors
    /// As [`RunIndex::runs_for_session`](crate::RunIndex::runs_for_session).
    pub fn runs_for_session(&self, session_id: &str) -> Result<Vec<RunRow>> {
        self.index.runs_for_session(session_id)
    }

    /// [`RunIndex::run_files_of`](crate::RunIndex::run_files_of) on [`StateStore::run_index`].
    ///
    /// # Errors
    /// As [`RunIndex::run_files_of`](crate::RunIndex::run_files_of).
    pub fn run_files_of(&self, run_id: &str) -> Result<Vec<PathBuf>> {
        self.index.run_files_of(run_id)
    }

    /// [`RunIndex::run_file_diagnostics`](crate::RunIndex::run_file_diagnostics) on
    /// [`StateStore::run_index`].
    ///
    /// # Errors
    /// As [`RunIndex::run_file_diagnostics`](crate::RunIndex::run_file_diagnostics).
    pub fn run_file_diagnostics(&self) -> Result<Vec<RunFileDiagnostic>> {
        self.index.run_file_diagnostics()
    }

    /// [`RunIndex::list_runs`](crate::RunIndex::list_runs) on [`StateStore::run_index`].
    ///
    /// # Errors
    /// As [`RunIndex::list_runs`](crate::RunIndex::list_runs).
    pub fn list_runs(&self, query: &RunQuery) -> Result<RunPage> {
        self.index.list_runs(query)
    }

    /// [`RunIndex::run_totals`](crate::RunIndex::run_totals) on [`StateStore::run_index`].
    ///
    /// # Errors
    /// As [`RunIndex::run_totals`](crate::RunIndex::run_totals).
    pub fn run_totals(&self, query: &RunQuery, by: RunGrouping) -> Result<GroupedRunTotals> {
        self.index.run_totals(query, by)
    }

    /// [`RunIndex::index_files`](crate::RunIndex::index_files) on [`StateStore::run_index`].
    ///
    /// # Errors
    /// As [`RunIndex::index_files`](crate::RunIndex::index_files):
    /// [`crate::StateError::ReadOnly`] unless the store is a run index in memory.
    pub fn index_files(&self, files: &[RunFile], read: RowRead) -> Result<FilesIndexed> {
        self.index.index_files(files, read)
    }
}
