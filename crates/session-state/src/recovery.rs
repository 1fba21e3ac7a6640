//! Settling what an interrupted or failed save leaves behind (crate README, "Crash
//! consistency"), without ever overwriting someone else's newer save:
//!
//! * **Roll-forward with proof.** A rewrite commits with its temp file recorded as
//!   `session_files.pending_file` and renames it afterwards. When a crash falls between the two,
//!   the rename is completed later (`open`, the next save of the session) only when the row
//!   still has the fingerprint of that commit, the temp file still holds the committed bytes
//!   and `messages/<id>.jsonl` is still the file the commit replaced
//!   (`session_files.pending_base`). Otherwise another writer (the reference, resuming the
//!   session) saved since: the temp file is moved to `messages/stale/` for forensics and
//!   reported ([`Recovery::StaleTempKept`]).
//! * **Uncommitted tails.** Before a save appends to a messages file it names the session in
//!   `messages/.append-intent` (one line per session; a batch names all of its appending
//!   sessions; written, not fsynced: it only matters after a crash of the process). A save that fails cuts its own bytes off again ([`Uncommitted`]); after a
//!   crash, the next `open` (or the next save, of any session) cuts bytes past the committed
//!   length of the named session, so the reference, which reads the whole file, never takes
//!   them for history.

use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};

use rusqlite::Connection;

use crate::db::{ReadTx, WriteTx, db_err};
use crate::error::{Result, StateError};
use crate::fsutil;
use crate::pending_base::Base;
use crate::store::StateStore;
use crate::stored::{FilesRow, Stored, read_bookkeeping, read_stored};
use crate::types::{IoStep, Recovery, SaveDurability, StaleReason};

/// Name of the append-intent file inside `messages/`.
pub(crate) const INTENT_FILE: &str = ".append-intent";

/// Directory inside `messages/` where stale temp files are kept.
pub(crate) const STALE_DIR: &str = "stale";

/// Longest intent file read: one line per appending session of a batch, at most
/// [`crate::MAX_BATCH_SESSIONS`] lines of at most 129 bytes (an id and its `\n`).
const INTENT_MAX: u64 = 1 << 16;

/// The first read of the append intent: room for 31 session ids of 128 bytes, so that the
/// usual intent (one session, or a few) comes in one `read`.
const INTENT_READ: usize = 4096;

/// What a save has written that only its commit makes visible: taken back when the save fails
/// before or at its commit (not after an injected crash, which must leave everything as a
/// crash would).
pub(crate) enum Uncommitted {
    /// Nothing written yet.
    Nothing,
    /// Lines appended to the messages file (open as `file`) after `committed_len` bytes; the
    /// file was created by this save when `created`.
    Appended {
        file: File,
        path: PathBuf,
        committed_len: u64,
        created: bool,
    },
    /// A temp file written for a rewrite.
    Temp(PathBuf),
}

impl Uncommitted {
    /// Takes the written bytes back, best effort (a failure here leaves bytes that `load`
    /// ignores and that the next `open` or save cuts): the appended bytes are cut off through
    /// the handle they were written with (so a file another writer renamed into place
    /// meanwhile is never touched), a file this save created is removed when it is still the
    /// one created, a temp file is removed.
    pub(crate) fn take_back(self) {
        match self {
            Uncommitted::Nothing => {}
            Uncommitted::Appended {
                file,
                path,
                committed_len,
                created,
            } => {
                if created && committed_len == 0 && same_file(&file, &path) {
                    let _ = fs::remove_file(&path);
                } else {
                    let _ = file.set_len(committed_len);
                }
            }
            Uncommitted::Temp(path) => {
                let _ = fs::remove_file(path);
            }
        }
    }
}

/// Whether `path` names the file open as `file` (same device and inode).
fn same_file(file: &File, path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (file.metadata(), fs::symlink_metadata(path)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (file, path);
        false
    }
}

impl StateStore {
    /// What [`StateStore::open`] found left behind by interrupted saves and settled: renames
    /// completed, stale temp files kept aside, uncommitted tails cut, bookkeeping that could
    /// not be read (see [`Recovery`]). Empty for a store opened read-only (it changes
    /// nothing) and for a store that needed nothing.
    pub fn recovery(&self) -> &[Recovery] {
        &self.recovered
    }

    fn sync_enabled(&self) -> bool {
        self.options.durability == SaveDurability::Sync
    }

    /// Called by `open`: completes or sets aside every pending rewrite, then cuts the
    /// uncommitted tail the append intent may point at. A failure for one session is reported
    /// ([`Recovery::Failed`]) and does not stop the others; only a database that cannot be
    /// read or locked is an error.
    pub(crate) fn recover_at_open(&self) -> Result<Vec<Recovery>> {
        let mut out = Vec::new();
        let pending = self.pending_sessions(&mut out)?;
        if !pending.is_empty() {
            let conn = self.lock();
            let tx = WriteTx::begin(&conn, &self.db_path, self.options.max_busy_wait)?;
            for id in &pending {
                let stored = read_stored(&conn, &self.db_path, id)?;
                if let Some(s) = &stored {
                    out.extend(s.damage.iter().cloned().map(Recovery::Damage));
                }
                let recorded = match stored.as_ref().and_then(|s| s.recorded.clone()) {
                    Some(r) => Some(r),
                    None => read_bookkeeping(&conn, &self.db_path, id)?,
                };
                let Some(recorded) = recorded else { continue };
                match self.roll_forward(id, stored.as_ref(), &recorded) {
                    Ok(Some(r)) => out.push(r),
                    Ok(None) => {}
                    Err(e) => out.push(failed(id, &e)),
                }
            }
            tx.commit()?;
        }
        self.settle_intent_at_open(&mut out)?;
        Ok(out)
    }

    /// Sessions whose bookkeeping names a pending temp file (ids that are not safe file names
    /// are reported and skipped).
    fn pending_sessions(&self, out: &mut Vec<Recovery>) -> Result<Vec<String>> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare(
                "SELECT session_id, pending_file FROM session_files WHERE pending_file IS NOT NULL",
            )
            .map_err(db_err(&self.db_path, "read pending renames"))?;
        let mut rows = stmt
            .query([])
            .map_err(db_err(&self.db_path, "read pending renames"))?;
        let mut ids = Vec::new();
        while let Some(r) = rows
            .next()
            .map_err(db_err(&self.db_path, "read pending renames"))?
        {
            let mut c = crate::column::Cols::new(r, "session_files", &["session_id"])
                .map_err(db_err(&self.db_path, "read pending renames"))?;
            let id = c
                .text_or_empty(0)
                .map_err(db_err(&self.db_path, "read pending renames"))?;
            out.extend(c.finish().into_iter().map(Recovery::Damage));
            if session_schema::is_safe_id(&id) {
                ids.push(id);
            }
        }
        Ok(ids)
    }

    /// Completes the committed rewrite of session `id` whose rename was interrupted, once it
    /// is proven that nothing changed since its commit; otherwise keeps the temp file aside.
    /// `stored` is the session's row as read now (`None`: no row any more), `recorded` our
    /// bookkeeping for it (whether or not the row still matches). `Ok(None)` when there is
    /// nothing to do (no pending temp file, or it is gone: renamed already).
    pub(crate) fn roll_forward(
        &self,
        id: &str,
        stored: Option<&Stored>,
        recorded: &FilesRow,
    ) -> Result<Option<Recovery>> {
        let Some(name) = recorded.pending_file.as_deref() else {
            return Ok(None);
        };
        let dir = self.messages_dir();
        let temp = dir.join(name);
        match fs::symlink_metadata(&temp) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StateError::io("stat", &temp, e)),
        }
        let main = self.messages_path(id)?;
        let committed = Base::File {
            len: recorded.file_len,
            lines: recorded.file_lines,
            digest: recorded.file_digest,
        };
        let reason = if stored.and_then(|s| s.files.as_ref()).is_none() {
            Some(StaleReason::RowChanged)
        } else if !committed.matches(&temp)? {
            Some(StaleReason::TempChanged)
        } else if let Some(base) = recorded.pending_base
            && !base.matches(&main)?
        {
            Some(StaleReason::MessagesFileChanged)
        } else {
            None
        };
        match reason {
            None => {
                fs::rename(&temp, &main).map_err(|e| StateError::io("rename", &temp, e))?;
                if self.sync_enabled() {
                    fsutil::sync_dir(&dir)?;
                }
                Ok(Some(Recovery::RolledForward {
                    session_id: id.to_owned(),
                    temp,
                }))
            }
            Some(reason) => {
                let kept = self.keep_aside(&temp)?;
                Ok(Some(Recovery::StaleTempKept {
                    session_id: id.to_owned(),
                    temp,
                    kept,
                    reason,
                }))
            }
        }
    }

    /// Moves `temp` into `messages/stale/` under its own name (`.1`, `.2`, … appended when
    /// that name is taken) and returns the new path.
    fn keep_aside(&self, temp: &Path) -> Result<PathBuf> {
        let dir = self.messages_dir().join(STALE_DIR);
        fsutil::create_dir_private(&dir)?;
        let name = temp
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut target = dir.join(&name);
        let mut n = 0u32;
        while fs::symlink_metadata(&target).is_ok() {
            n += 1;
            if n > 10_000 {
                return Err(StateError::io(
                    "keep stale temp file",
                    &dir,
                    std::io::Error::new(
                        std::io::ErrorKind::AlreadyExists,
                        "no free name in messages/stale/",
                    ),
                ));
            }
            target = dir.join(format!("{name}.{n}"));
        }
        fs::rename(temp, &target).map_err(|e| StateError::io("rename", temp, e))?;
        if self.sync_enabled() {
            fsutil::sync_dir(&self.messages_dir())?;
            fsutil::sync_dir(&dir)?;
        }
        Ok(target)
    }

    fn intent_path(&self) -> PathBuf {
        self.messages_dir().join(INTENT_FILE)
    }

    /// The sessions the append intent names, one per line (a missing or unreadable file
    /// names none; lines that are not safe ids are skipped).
    fn read_intent(&self) -> Vec<String> {
        match File::open(self.intent_path()) {
            Ok(file) => intent_names(&file),
            Err(_) => Vec::new(),
        }
    }

    /// The append intent open read-write (created when missing), through the descriptor this
    /// store kept from its last save while the file still has a name (`fstat`: its link
    /// count), so that a save reads it with one `pread` instead of `open`, `read` and `close`.
    /// A descriptor whose file was removed (or replaced) is dropped and the path opened again.
    fn intent_file(&self) -> Result<parking_lot::MappedMutexGuard<'_, File>> {
        use std::os::unix::fs::MetadataExt;
        let mut kept = self.intent.lock();
        if kept
            .as_ref()
            .is_some_and(|f| f.metadata().map_or(true, |m| m.nlink() == 0))
        {
            *kept = None;
        }
        if kept.is_none() {
            let (file, _) = fsutil::open_private_rw(&self.intent_path())?;
            *kept = Some(file);
        }
        parking_lot::MutexGuard::try_map(kept, Option::as_mut).map_err(|_| {
            StateError::io(
                "open",
                self.intent_path(),
                std::io::Error::other("append intent not open"),
            )
        })
    }

    /// Records, under the write lock and before the first byte is appended to the messages
    /// file of any of `ids`, that those sessions may have bytes past their committed length
    /// until the commit (one line each). Nothing is written when the intent names every one of
    /// them already. Otherwise the sessions it names that are not in `ids` (a save that
    /// crashed) are settled first: their uncommitted tails are cut.
    pub(crate) fn record_append_intent(
        &self,
        conn: &Connection,
        ids: &[&str],
        out: &mut Vec<Recovery>,
    ) -> Result<()> {
        let file = self.intent_file()?;
        let previous = intent_names(&file);
        let named: std::collections::BTreeSet<&str> = previous.iter().map(String::as_str).collect();
        if ids.iter().all(|id| named.contains(id)) {
            return Ok(());
        }
        let wanted: std::collections::BTreeSet<&str> = ids.iter().copied().collect();
        for other in named.iter().filter(|p| !wanted.contains(*p)) {
            if let Err(e) = self.cut_uncommitted_tail(conn, other, out) {
                out.push(failed(other, &e));
            }
        }
        let path = self.intent_path();
        let mut text = String::with_capacity(ids.iter().map(|id| id.len() + 1).sum());
        for id in ids {
            text.push_str(id);
            text.push('\n');
        }
        self.io()
            .write_all_at(IoStep::IntentWrite, &file, text.as_bytes(), 0, &path)?;
        file.set_len(text.len() as u64)
            .map_err(|e| StateError::io("truncate", &path, e))
    }

    /// Cuts the bytes past the committed length of session `id`'s messages file (inside the
    /// caller's write transaction), when the file is the one we committed: our bookkeeping
    /// matches the row, no rewrite is pending, and the committed prefix is intact.
    pub(crate) fn cut_uncommitted_tail(
        &self,
        conn: &Connection,
        id: &str,
        out: &mut Vec<Recovery>,
    ) -> Result<()> {
        let Some(stored) = read_stored(conn, &self.db_path, id)? else {
            return Ok(());
        };
        let Some(f) = stored.files else {
            return Ok(());
        };
        let dir = self.messages_dir();
        if let Some(p) = &f.pending_file
            && fs::symlink_metadata(dir.join(p)).is_ok()
        {
            return Ok(());
        }
        let main = self.messages_path(id)?;
        let Some((file, meta)) = fsutil::open_rw_if_exists(&main)? else {
            return Ok(());
        };
        let size = meta.len();
        if size <= f.file_len {
            return Ok(());
        }
        let mut committed = Vec::new();
        (&file)
            .take(f.file_len)
            .read_to_end(&mut committed)
            .map_err(|e| StateError::io("read", &main, e))?;
        if committed.len() as u64 != f.file_len
            || fsutil::digest_lines(&committed) != (f.file_digest, f.file_lines)
        {
            return Ok(());
        }
        file.set_len(f.file_len)
            .map_err(|e| StateError::io("truncate", &main, e))?;
        if self.sync_enabled() {
            file.sync_data()
                .map_err(|e| StateError::io("fsync", &main, e))?;
        }
        out.push(Recovery::TailCut {
            session_id: id.to_owned(),
            path: main,
            bytes: size - f.file_len,
        });
        Ok(())
    }

    /// `open`'s part of the intent: a cheap look first (the rows and one `stat` per named
    /// session), the write lock only when a named session's file is longer than its commit.
    fn settle_intent_at_open(&self, out: &mut Vec<Recovery>) -> Result<()> {
        let ids = self.read_intent();
        if ids.is_empty() {
            return Ok(());
        }
        let committed = {
            let conn = self.lock();
            let _rtx = ReadTx::begin(&conn, &self.db_path, self.options.max_busy_wait)?;
            let mut committed = Vec::with_capacity(ids.len());
            for id in &ids {
                if let Some(len) =
                    read_stored(&conn, &self.db_path, id)?.and_then(|s| s.files.map(|f| f.file_len))
                {
                    committed.push((id, len));
                }
            }
            committed
        };
        let mut longer = Vec::new();
        for (id, len) in committed {
            if fs::metadata(self.messages_path(id)?).is_ok_and(|m| m.len() > len) {
                longer.push(id);
            }
        }
        if longer.is_empty() {
            return Ok(());
        }
        let conn = self.lock();
        let tx = WriteTx::begin(&conn, &self.db_path, self.options.max_busy_wait)?;
        for id in longer {
            if let Err(e) = self.cut_uncommitted_tail(&conn, id, out) {
                out.push(failed(id, &e));
            }
        }
        tx.commit()
    }
}

fn failed(id: &str, e: &StateError) -> Recovery {
    let mut detail = e.to_string();
    let mut cur = std::error::Error::source(e);
    while let Some(s) = cur {
        detail.push_str(": ");
        detail.push_str(&s.to_string());
        cur = s.source();
    }
    Recovery::Failed {
        session_id: id.to_owned(),
        detail,
    }
}

/// The sessions an append intent names (see [`StateStore::record_append_intent`]), read from
/// offset 0 with `pread` until a short read: on a regular file that is its end, which saves
/// the read that would return 0. A read cut short otherwise names fewer sessions, which only
/// makes a save write the intent again. Lines that are not safe ids are skipped; a read error
/// names none.
fn intent_names(file: &File) -> Vec<String> {
    use std::os::unix::fs::FileExt;
    let mut bytes = vec![0u8; INTENT_READ];
    let mut filled = 0;
    while let Some(room) = bytes.get_mut(filled..) {
        match file.read_at(room, filled as u64) {
            Ok(n) => {
                filled += n;
                if filled < bytes.len() || filled as u64 >= INTENT_MAX {
                    break;
                }
                bytes.resize(bytes.len() * 2, 0);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Vec::new(),
        }
    }
    bytes.truncate(filled.min(usize::try_from(INTENT_MAX).unwrap_or(usize::MAX)));
    bytes
        .split(|&b| b == b'\n')
        .filter_map(|line| std::str::from_utf8(line).ok())
        .filter(|id| session_schema::is_safe_id(id))
        .map(str::to_owned)
        .collect()
}
