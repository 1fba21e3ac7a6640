//! [`RunIndex`]: the run index as its own component (spec §2: the run tree): one SQLite database
//! holding our `runs`, `run_dirs`, `run_watch` and `run_resume` tables over the run tree of a
//! sessions root, refreshed from the files and queried without scanning them.
//!
//! The refresh lives in `runs.rs` (with list, lookup by run or session id and the file
//! diagnostics), the totals in `totals.rs`, the in-memory fill in `memindex.rs`; each is an
//! `impl RunIndex` over the fields defined here.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};
use rusqlite::Connection;

use crate::db;
use crate::error::{Result, StateError};
use crate::types::StoreOptions;

/// The run index of one sessions root: rows of the run files under
/// `<root>/YYYY/MM/DD/<run_id>.jsonl[.zst]` (spec §2) in a SQLite database of its own or
/// shared with a [`crate::StateStore`].
///
/// Opened three ways:
///
/// * [`RunIndex::open`]: `<root>/state.db`, the default (the tables are ours, additive to the
///   reference's `session_state`, which the reference never reads); the same database a
///   [`crate::StateStore`] over that root uses, whose [`crate::StateStore::run_index`] hands out
///   an index sharing its connection;
/// * [`RunIndex::open_at`]: any SQLite file (created with mode 0600 when missing, WAL), for an
///   index kept apart from the sessions root (a cache directory, a root the user cannot write);
/// * [`RunIndex::open_in_memory`]: an empty database in memory, filled by
///   [`RunIndex::index_files`], for a read-only listing of a store whose own index cannot be
///   used; nothing is written anywhere.
///
/// Owns refresh ([`RunIndex::index_runs`], [`RunIndex::reindex`]), listing
/// ([`RunIndex::list_runs`], keyset-paged), lookup ([`RunIndex::runs_for_session`],
/// [`RunIndex::run_files_of`]), totals ([`RunIndex::run_totals`]) and the files under the run
/// tree that are no runs ([`RunIndex::run_file_diagnostics`]). Rows name files under
/// [`RunIndex::root`]; the database path only says where the rows are kept, so indexes of one
/// root at two paths list the same runs.
///
/// Cloning is cheap and shares the connection (the database is locked per operation).
#[derive(Clone)]
pub struct RunIndex {
    /// The sessions root: the run tree is `<root>/YYYY/MM/DD/`.
    pub(crate) root: PathBuf,
    /// Where the rows are kept (a label under the root for an index in memory), named in errors.
    pub(crate) db_path: PathBuf,
    /// The connection, shared with the [`crate::StateStore`] that handed this index out.
    pub(crate) conn: Arc<Mutex<Connection>>,
    /// Busy timeouts and fault hooks.
    pub(crate) options: StoreOptions,
    /// Refresh refused ([`StateError::ReadOnly`]): the database was opened read-only.
    pub(crate) read_only: bool,
    /// An index in memory ([`RunIndex::open_in_memory`]): filled by [`RunIndex::index_files`],
    /// not by a refresh of the run tree.
    pub(crate) memory_index: bool,
}

impl std::fmt::Debug for RunIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunIndex")
            .field("root", &self.root)
            .field("db_path", &self.db_path)
            .field("read_only", &self.read_only)
            .field("memory_index", &self.memory_index)
            .finish_non_exhaustive()
    }
}

impl RunIndex {
    /// Opens (creating when missing) the run index of `sessions_root` in `<root>/state.db`,
    /// with default options. Creates `sessions_root` (0700) and `state.db` (0600, WAL) with the
    /// store's schema, migrated as [`crate::StateStore::open`] migrates it; no session file is
    /// touched.
    ///
    /// # Errors
    /// [`StateError::Io`] when the root cannot be created; [`StateError::Db`] /
    /// [`StateError::Busy`] when the database cannot be opened or initialised.
    ///
    /// # Examples
    ///
    /// ```
    /// use session_state::{RunIndex, RunQuery};
    ///
    /// let root = tempfile::tempdir()?;
    /// let index = RunIndex::open(root.path())?;
    /// assert_eq!(index.db_path(), root.path().join("state.db"));
    /// let report = index.index_runs()?;
    /// assert_eq!(report.added, 0);
    /// assert!(index.list_runs(&RunQuery::default())?.runs.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open(sessions_root: impl AsRef<Path>) -> Result<RunIndex> {
        let root = sessions_root.as_ref().to_path_buf();
        crate::fsutil::create_dir_private(&root)?;
        let db_path = db::db_path(&root);
        RunIndex::open_at_with(root, db_path, StoreOptions::default())
    }

    /// Opens (creating when missing) a run index of the run tree of `sessions_root` kept in
    /// the SQLite file `db_path`, with default options. Nothing is created under the root;
    /// the root need not be writable (only `db_path` and its directory are written).
    ///
    /// # Errors
    /// As [`RunIndex::open_at_with`].
    pub fn open_at(sessions_root: impl AsRef<Path>, db_path: impl AsRef<Path>) -> Result<RunIndex> {
        RunIndex::open_at_with(sessions_root, db_path, StoreOptions::default())
    }

    /// [`RunIndex::open_at`] with explicit options (busy timeouts, `synchronous`).
    ///
    /// # Errors
    /// [`StateError::Io`] when `sessions_root` is not a directory or `db_path` cannot be
    /// created; [`StateError::Db`] / [`StateError::Busy`] when it cannot be opened or
    /// initialised (for example when it is a directory or not a database).
    pub fn open_at_with(
        sessions_root: impl AsRef<Path>,
        db_path: impl AsRef<Path>,
        options: StoreOptions,
    ) -> Result<RunIndex> {
        let root = sessions_root.as_ref().to_path_buf();
        check_dir(&root)?;
        let db_path = db_path.as_ref().to_path_buf();
        let conn = db::open_db(&db_path, &options)?;
        Ok(RunIndex::over(
            root,
            db_path,
            Arc::new(Mutex::new(conn)),
            options,
            false,
            false,
        ))
    }

    /// An empty run index in memory over the run tree of `sessions_root`: nothing is created,
    /// opened for writing or written under the root or anywhere else (SQLite keeps the database
    /// and its temporary tables in memory). Rows come from [`RunIndex::index_files`]; a refresh
    /// ([`RunIndex::index_runs`]) is refused. The index lives as long as its last clone.
    ///
    /// # Errors
    /// [`StateError::Db`] when SQLite cannot set up the in-memory database.
    pub fn open_in_memory(sessions_root: impl AsRef<Path>) -> Result<RunIndex> {
        let root = sessions_root.as_ref().to_path_buf();
        let label = root.join("(run index in memory)");
        let options = StoreOptions::default();
        let conn = db::open_db_in_memory(&label, &options)?;
        Ok(RunIndex::over(
            root,
            label,
            Arc::new(Mutex::new(conn)),
            options,
            true,
            true,
        ))
    }

    /// An index over an open connection (the one a [`crate::StateStore`] shares).
    pub(crate) fn over(
        root: PathBuf,
        db_path: PathBuf,
        conn: Arc<Mutex<Connection>>,
        options: StoreOptions,
        read_only: bool,
        memory_index: bool,
    ) -> RunIndex {
        RunIndex {
            root,
            db_path,
            conn,
            options,
            read_only,
            memory_index,
        }
    }

    /// The sessions root whose run tree this index covers.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Path of the database the rows are kept in (for an index in memory, a label under the
    /// root that names it in errors).
    pub fn db_path(&self) -> &Path {
        &self.db_path
    }

    /// Whether a refresh is refused because the database was opened read-only (a read-only
    /// store's index, or one in memory).
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Whether this index lives in memory ([`RunIndex::open_in_memory`]).
    pub fn is_memory_index(&self) -> bool {
        self.memory_index
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock()
    }

    /// [`StateError::ReadOnly`] when the index cannot be written.
    pub(crate) fn check_writable(&self, op: &'static str) -> Result<()> {
        if self.read_only {
            Err(StateError::ReadOnly {
                root: self.root.clone(),
                op,
            })
        } else {
            Ok(())
        }
    }
}

/// [`StateError::Io`] unless `path` is a directory.
fn check_dir(path: &Path) -> Result<()> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(StateError::io(
            "open",
            path,
            std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory"),
        )),
        Err(e) => Err(StateError::io("open", path, e)),
    }
}
