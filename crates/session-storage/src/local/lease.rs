//! The local backend's session lease: an exclusive `flock` on `<root>/locks/<session_id>.lease`
//! that records its holder.
//!
//! Isolated on purpose: [`acquire`] is the only entry point the backend uses, so this file can
//! be replaced by a wrapper around session-state's own OS-lock-based session lease once that
//! exists, without touching anything else.
//!
//! * Exclusive across processes and within one (each acquire opens its own file description).
//! * Ends when the guard is released or dropped, and when the holder's process dies: the
//!   kernel drops the lock with the process's files, so a crashed worker never blocks a
//!   session.
//! * The file holds one JSON line `{"holder":{"name","host","pid"},"since"}` while held and is
//!   emptied on release; a busy acquire reads it to say who holds the lease. Holder records
//!   are not durable (a lease never outlives its process).

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use session_schema::Timestamp;

use super::filelock::{self, LockFile};
use crate::error::{Result, StorageError, Target};
use crate::session_store::LeaseGuard;
use crate::types::HolderInfo;

/// What the lease file records about its holder.
#[derive(Debug, Serialize, Deserialize)]
struct HolderRecord {
    holder: HolderInfo,
    since: String,
}

/// A held lease.
#[derive(Debug)]
pub(crate) struct FlockLease {
    lock: Option<LockFile>,
    session_id: String,
    holder: HolderInfo,
}

/// The lease file of `session_id` in `locks_dir`.
pub(crate) fn lease_path(locks_dir: &Path, session_id: &str) -> std::path::PathBuf {
    locks_dir.join(format!("{session_id}.lease"))
}

/// Takes the lease of `session_id` (an id already checked) for `holder`, without waiting.
///
/// # Errors
/// [`StorageError::LeaseBusy`] with the recorded holder; [`StorageError::Backend`] when the
/// lock file cannot be created, locked or written.
pub(crate) fn acquire(
    locks_dir: &Path,
    session_id: &str,
    holder: &HolderInfo,
) -> Result<FlockLease> {
    let target = || Target::session(session_id);
    filelock::ensure_dir(locks_dir)
        .map_err(|e| StorageError::backend("create the lock directory for", target(), e))?;
    let path = lease_path(locks_dir, session_id);
    let lock = filelock::try_lock_for(&path, Duration::ZERO)
        .map_err(|e| StorageError::backend("lock the lease of", target(), e))?;
    let Some(lock) = lock else {
        let record = read_holder(&path);
        return Err(StorageError::LeaseBusy {
            session_id: session_id.to_owned(),
            since: record
                .as_ref()
                .map(|r| Timestamp::from_raw(r.since.clone())),
            holder: record.map(|r| r.holder),
        });
    };
    let record = HolderRecord {
        holder: holder.clone(),
        since: Timestamp::now().as_str().to_owned(),
    };
    let mut line = serde_json::to_vec(&record)
        .map_err(|e| StorageError::backend("record the holder of the lease of", target(), e))?;
    line.push(b'\n');
    let mut file = lock.file();
    file.set_len(0)
        .and_then(|()| file.seek(SeekFrom::Start(0)))
        .and_then(|_| file.write_all(&line))
        .map_err(|e| StorageError::backend("record the holder of the lease of", target(), e))?;
    Ok(FlockLease {
        lock: Some(lock),
        session_id: session_id.to_owned(),
        holder: holder.clone(),
    })
}

/// The holder recorded in a lease file held by someone else. The holder writes its record
/// right after taking the lock, so an empty or half-written file is read again briefly.
fn read_holder(path: &Path) -> Option<HolderRecord> {
    for _ in 0..20 {
        let mut text = String::new();
        let read = std::fs::File::open(path).and_then(|mut f| f.read_to_string(&mut text));
        if read.is_ok()
            && let Some(line) = text.lines().next()
            && let Ok(record) = serde_json::from_str::<HolderRecord>(line)
        {
            return Some(record);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    None
}

impl FlockLease {
    fn end(&mut self) -> std::io::Result<()> {
        match self.lock.take() {
            // Empty the record before the lock goes, so nobody reads a stale holder.
            Some(lock) => lock.file().set_len(0),
            None => Ok(()),
        }
    }
}

impl LeaseGuard for FlockLease {
    fn session_id(&self) -> &str {
        &self.session_id
    }

    fn holder(&self) -> &HolderInfo {
        &self.holder
    }

    fn renew(&self) -> Result<()> {
        // A flock does not expire: held as long as the guard (and its process) lives.
        if self.lock.is_some() {
            Ok(())
        } else {
            Err(StorageError::LeaseLost {
                session_id: self.session_id.clone(),
            })
        }
    }

    fn release(mut self: Box<Self>) -> Result<()> {
        self.end().map_err(|e| {
            StorageError::backend("release the lease of", Target::session(&self.session_id), e)
        })
    }
}

impl Drop for FlockLease {
    fn drop(&mut self) {
        // Best effort; `release` reports the error.
        let _ = self.end();
    }
}

/// Removes the lease file of a deleted session when nobody holds the lease (a held one is
/// left to its holder).
pub(crate) fn remove_if_free(locks_dir: &Path, session_id: &str) -> std::io::Result<()> {
    let path = lease_path(locks_dir, session_id);
    if !path.exists() {
        return Ok(());
    }
    match filelock::try_lock_for(&path, Duration::ZERO)? {
        Some(lock) => lock.remove(),
        None => Ok(()),
    }
}
