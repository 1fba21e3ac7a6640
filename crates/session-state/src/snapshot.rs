//! Snapshot-then-delete with compare-and-swap, for housekeeping (`sessions gc`): a session is
//! deleted only if it is still exactly what was snapshotted (its row's generation, its
//! messages file and its legacy snapshot byte for byte); otherwise nothing is deleted.

use std::fs;
use std::path::Path;

use crate::db::{WriteTx, db_err};
use crate::error::{Result, StateError};
use crate::fsutil::{self, FileIdentity};
use crate::store::{StateStore, checked};
use crate::types::{DeleteReport, Generation, LoadedSession};

/// A session as it was at one moment: what `load` returned plus the bytes of its files, so a
/// copy of them can be kept (the trash of `sessions gc`) and a later
/// [`StateStore::delete_snapshotted`] removes the session only if it did not change since.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SessionSnapshot {
    /// The session id.
    pub session_id: String,
    /// The session as loaded (a legacy-only session is migrated by that load, as always).
    pub loaded: LoadedSession,
    /// The bytes of `messages/<id>.jsonl` (`None`: no file), whole, including any uncommitted
    /// tail. At most [`crate::MAX_SESSION_FILE_BYTES`].
    pub messages_file: Option<Vec<u8>>,
    /// The bytes of the legacy snapshot `state/<id>.json` (`None`: no file).
    pub legacy_file: Option<Vec<u8>>,
}

impl StateStore {
    /// Takes a [`SessionSnapshot`] of `session_id`: loads it and reads its messages file and
    /// legacy snapshot, retrying (three times) until the row's generation is the same before
    /// and after, so that the load and the bytes belong to one state. `Ok(None)` when the
    /// session does not exist.
    ///
    /// # Errors
    /// As [`StateStore::load`]; [`StateError::NotRegularFile`] /
    /// [`StateError::FileTooLarge`] when one of its files cannot be read.
    pub fn snapshot(&self, session_id: &str) -> Result<Option<SessionSnapshot>> {
        checked(session_id)?;
        let messages = self.messages_path(session_id)?;
        let legacy = self.legacy_path(session_id)?;
        let mut last = None;
        for _ in 0..3 {
            let before = self.current_generation(session_id)?;
            let Some(loaded) = self.load(session_id)? else {
                return Ok(None);
            };
            let snapshot = SessionSnapshot {
                session_id: session_id.to_owned(),
                messages_file: fsutil::read_if_exists(&messages)?,
                legacy_file: fsutil::read_if_exists(&legacy)?,
                loaded,
            };
            let after = self.current_generation(session_id)?;
            let steady = before == after && snapshot.loaded.generation == after;
            last = Some(snapshot);
            if steady {
                break;
            }
        }
        Ok(last)
    }

    /// Deletes the session of `snapshot` only if it is still exactly that: the row has the
    /// generation the snapshot loaded (or still none), and `messages/<id>.jsonl` and
    /// `state/<id>.json` hold the snapshot's bytes (or are still absent). Checked under the
    /// session's lease and the database write lock, so no save of this crate can slip in; a
    /// save of the reference (which takes no lock) is caught by the same comparison up to the
    /// last moment: the messages file is removed only if its `stat` identity is the one
    /// checked. Removal order as in [`StateStore::delete`].
    ///
    /// # Errors
    /// [`StateError::Conflict`] when anything changed (nothing was deleted);
    /// [`StateError::SessionBusy`] when another holder has the session open;
    /// [`StateError::ReadOnly`]; [`StateError::Io`]; [`StateError::Db`];
    /// [`StateError::Busy`].
    pub fn delete_snapshotted(&self, snapshot: &SessionSnapshot) -> Result<DeleteReport> {
        let id = snapshot.session_id.as_str();
        checked(id)?;
        self.check_writable("delete")?;
        let _guard = self.write_guard(id)?;
        let messages = self.messages_path(id)?;
        let legacy = self.legacy_path(id)?;
        let conflict = |found: String| StateError::Conflict {
            session_id: id.to_owned(),
            expected: describe(snapshot.loaded.generation, &snapshot.messages_file),
            found,
        };
        let conn = self.lock();
        let tx = WriteTx::begin(&conn, &self.db_path, self.options.max_busy_wait)?;
        let current = self.stored_generation(&conn, id)?;
        let messages_now = fsutil::read_if_exists(&messages)?;
        if current != snapshot.loaded.generation || messages_now != snapshot.messages_file {
            return Err(conflict(describe(current, &messages_now)));
        }
        if fsutil::read_if_exists(&legacy)? != snapshot.legacy_file {
            return Err(conflict("a changed legacy snapshot".to_owned()));
        }
        let identity = identity_of(&messages)?;
        let mut report = DeleteReport {
            legacy_file: fsutil::remove_if_exists(&legacy)?,
            ..DeleteReport::default()
        };
        if report.legacy_file && self.sync() {
            fsutil::sync_dir(&self.root.join("state"))?;
        }
        // 0 without a row (or with a generation that is not an integer): the temp files of
        // generations 0 and 1 are looked for then.
        let counter = crate::column::query_int(
            &conn,
            "SELECT generation FROM session_files WHERE session_id = ?1",
            [id],
        )
        .map_err(db_err(&self.db_path, "read session bookkeeping"))?;
        let removed = conn
            .execute("DELETE FROM session_state WHERE session_id = ?1", [id])
            .map_err(db_err(&self.db_path, "delete session"))?;
        conn.execute("DELETE FROM session_files WHERE session_id = ?1", [id])
            .map_err(db_err(&self.db_path, "delete session bookkeeping"))?;
        crate::adopt::forget_reconstruction(&conn, &self.db_path, id)?;
        tx.commit()?;
        drop(conn);
        self.forget(id);
        report.row = removed > 0;
        // The reference writes its file before its row and takes no lock: remove the file
        // only if it is still the one compared above.
        if identity.is_some() && identity_of(&messages)? == identity {
            report.messages_file = fsutil::remove_if_exists(&messages)?;
        }
        let counter = counter.cast_unsigned();
        for g in [counter, counter.wrapping_add(1)] {
            fsutil::remove_if_exists(&self.temp_path(id, g))?;
        }
        if self.sync() {
            fsutil::sync_dir(&self.messages_dir())?;
        }
        Ok(report)
    }

    /// The generation of the row of `id` now (`None`: no row), in a read transaction.
    fn current_generation(&self, id: &str) -> Result<Option<Generation>> {
        let conn = self.lock();
        let _rtx = crate::db::ReadTx::begin(&conn, &self.db_path, self.options.max_busy_wait)?;
        self.stored_generation(&conn, id)
    }
}

fn describe(generation: Option<Generation>, file: &Option<Vec<u8>>) -> String {
    let row = generation.map_or_else(|| "no row".to_owned(), |g| format!("generation {g}"));
    let file = match file {
        None => "no messages file".to_owned(),
        Some(b) => format!(
            "a messages file of {} bytes, digest {:016x}",
            b.len(),
            fsutil::digest_lines(b).0
        ),
    };
    format!("{row} and {file}")
}

fn identity_of(path: &Path) -> Result<Option<FileIdentity>> {
    match fs::symlink_metadata(path) {
        Ok(m) => Ok(Some(FileIdentity::of(&m))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StateError::io("stat", path, e)),
    }
}
