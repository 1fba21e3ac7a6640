//! The local backend: [`LocalBackend`] implements [`RunCatalogue`](crate::RunCatalogue) and
//! [`SessionStore`](crate::SessionStore) over one sessions root, by way of session-jsonl (run
//! files, layout, reader, scans) and session-state (`state.db`, message logs, the run index).
//!
//! ```text
//! <root>/YYYY/MM/DD/<run_id>.jsonl[.zst]   runs (session-jsonl layout)
//! <root>/state.db, messages/, state/       sessions and the run index (session-state)
//! <root>/leases/<session_id>.lease         session leases (session-state's flock + holder note)
//! ```
//!
//! * **Appends** take the run file's writer lock — the same advisory lock a
//!   [`session_jsonl::RunWriter`] holds, so an append never interleaves with a writer, and an
//!   archiving or `gc` never removes a file under an append — then compare the file's
//!   committed length with the expected one, recognise retries, write the lines in one
//!   `write` and `fdatasync` (see [`LocalOptions::sync_appends`]). A torn tail left by a
//!   writer that died is sealed with `\n` first, as `RunWriter::open_append` does: it becomes a
//!   complete (damaged) line, which moves the committed length, so the append that found it
//!   gets a [`LengthConflict`](crate::StorageError::LengthConflict) and re-reads.
//! * **Session versions** are session-state's generations; saves use
//!   `StateStore::save_expecting`, whose compare-and-swap happens inside the SQLite write
//!   transaction. Deletes with an expected version are `StateStore::snapshot` then
//!   `StateStore::delete_snapshotted`, which deletes only if the row, the messages file and
//!   the legacy snapshot are still exactly what was snapshotted (checked under the session's
//!   lease and the database write lock).
//! * **Leases** are session-state's session leases (`src/local/lease.rs`, a wrapper around
//!   `StateStore::lease_shared`): one per session in a store, whoever takes it, exclusive,
//!   ended by the kernel when the holder's process dies.

mod lease;
mod runs;
mod search;
mod sessions;
mod state_errors;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, MutexGuard};
use session_state::{StateStore, StoreOptions};

use crate::error::{Result, StorageError, Target};
pub(crate) use state_errors::state_err;

/// Options of [`LocalBackend::open_with`]; build with
/// `LocalOptions { sync_appends: false, ..LocalOptions::default() }`.
#[derive(Debug, Clone)]
pub struct LocalOptions {
    /// Options of the underlying [`StateStore`] (busy timeouts, save durability).
    pub store: StoreOptions,
    /// `fdatasync` every append (and the directory of a new run file) before acknowledging
    /// it, so an acknowledged line survives a power loss (default `true`). `false`: one
    /// `write`, which survives a crash of the process only.
    pub sync_appends: bool,
    /// Unix permission bits of new run files before the umask; `None` (default) is `0o666`
    /// like [`session_jsonl::RunWriter`] and the reference.
    pub run_file_mode: Option<u32>,
    /// How long an append waits for a run's writer lock before [`StorageError::Busy`]
    /// (default 10 s). A [`session_jsonl::RunWriter`] keeps its run locked for the whole
    /// run. (Saves and deletes wait for another client's save up to
    /// [`StoreOptions::max_busy_wait`].)
    pub lock_wait: Duration,
    /// Bring the run index up to date before each
    /// [`list_runs`](crate::RunCatalogue::list_runs) (default `true`; incremental, cheap
    /// when little changed). Read-only backends list the index as it is.
    pub refresh_index: bool,
}

impl Default for LocalOptions {
    fn default() -> Self {
        LocalOptions {
            store: StoreOptions::default(),
            sync_appends: true,
            run_file_mode: None,
            lock_wait: Duration::from_secs(10),
            refresh_index: true,
        }
    }
}

/// Cached run-file paths and session generations kept at most (then forgotten at once).
const CACHE_MAX: usize = 4096;

/// The local files + SQLite store behind the storage traits. `Send + Sync`: share it between
/// threads; several processes may open the same root at once.
#[derive(Debug)]
pub struct LocalBackend {
    /// Shared with the leases this backend hands out.
    store: Arc<StateStore>,
    options: LocalOptions,
    /// Run id → its file, for appends and reads that follow the first.
    paths: Mutex<BTreeMap<String, PathBuf>>,
    /// Session id → the last generation seen, with its version token.
    generations: Mutex<BTreeMap<String, (String, session_state::Generation)>>,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock()
}

impl LocalBackend {
    /// Opens (creating when missing) the store under `root` with default options.
    ///
    /// # Errors
    /// [`StorageError::Backend`] when `state.db` or the directories cannot be opened or
    /// created; [`StorageError::Busy`].
    pub fn open(root: impl AsRef<Path>) -> Result<LocalBackend> {
        LocalBackend::open_with(root, LocalOptions::default())
    }

    /// [`LocalBackend::open`] with explicit options.
    ///
    /// # Errors
    /// As [`LocalBackend::open`].
    pub fn open_with(root: impl AsRef<Path>, options: LocalOptions) -> Result<LocalBackend> {
        let store = StateStore::open_with(root, options.store.clone())
            .map_err(|e| state_err("open", Target::Store, e))?;
        Ok(LocalBackend::from_store(store, options))
    }

    /// Opens the store under `root` without writing anything: loads, reads, stats and
    /// listings work; appends, saves and deletes fail with [`StorageError::ReadOnly`]; run
    /// listings use the run index as it is.
    ///
    /// # Errors
    /// As [`LocalBackend::open`].
    pub fn open_read_only(root: impl AsRef<Path>) -> Result<LocalBackend> {
        let options = LocalOptions::default();
        let store = StateStore::open_read_only_with(root, options.store.clone())
            .map_err(|e| state_err("open", Target::Store, e))?;
        Ok(LocalBackend::from_store(store, options))
    }

    /// A backend over an open [`StateStore`].
    pub fn from_store(store: StateStore, options: LocalOptions) -> LocalBackend {
        LocalBackend {
            store: Arc::new(store),
            options,
            paths: Mutex::new(BTreeMap::new()),
            generations: Mutex::new(BTreeMap::new()),
        }
    }

    /// The sessions root.
    pub fn root(&self) -> &Path {
        self.store.root()
    }

    /// The underlying session-state store (for what the traits do not cover yet).
    pub fn state_store(&self) -> &StateStore {
        &self.store
    }

    /// The options in use.
    pub fn options(&self) -> &LocalOptions {
        &self.options
    }

    /// Whether the backend was opened with [`LocalBackend::open_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.store.is_read_only()
    }

    fn check_writable(&self, op: &'static str) -> Result<()> {
        if self.is_read_only() {
            Err(StorageError::ReadOnly { op })
        } else {
            Ok(())
        }
    }

    fn remember_path(&self, run_id: &str, path: &Path) {
        let mut paths = locked(&self.paths);
        if paths.len() >= CACHE_MAX {
            paths.clear();
        }
        paths.insert(run_id.to_owned(), path.to_owned());
    }

    fn forget_path(&self, run_id: &str) {
        locked(&self.paths).remove(run_id);
    }

    fn cached_path(&self, run_id: &str) -> Option<PathBuf> {
        locked(&self.paths).get(run_id).cloned()
    }
}
