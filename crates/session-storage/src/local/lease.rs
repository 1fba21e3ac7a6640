//! The local backend's session lease: session-state's own lease
//! ([`StateStore::lease_shared`], an exclusive `flock` on `<root>/leases/<session_id>.lease`),
//! so that a store has one lease per session whoever takes it — this backend, a runtime using
//! session-state directly, `sessions gc` — and each excludes the others.
//!
//! * Exclusive across processes and within one (each acquire opens its own file description).
//! * Ends when the guard is released or dropped, and when the holder's process dies: the
//!   kernel drops the lock with the process's files, so a crashed worker never blocks a
//!   session.
//! * The caller's [`HolderInfo`] is the lease's label (one JSON object,
//!   `{"holder":{"name","host","pid"}}`) in session-state's holder note; a busy acquire reads
//!   it back. A holder that took the lease through session-state without a label is named by
//!   what its note says (program, host, pid).
//! * While this backend holds a session's lease its own saves and deletes of that session go
//!   through; those of every other client wait for it or are refused
//!   ([`StorageError::LeaseBusy`]).

use std::sync::Arc;

use session_state::{SessionLease, StateStore};

use super::state_errors::{Label, state_err};
use crate::error::{Result, StorageError, Target};
use crate::session_store::LeaseGuard;
use crate::types::HolderInfo;

/// A held lease.
#[derive(Debug)]
pub(crate) struct StateLease {
    lease: Option<SessionLease<'static>>,
    session_id: String,
    holder: HolderInfo,
}

/// Takes the lease of `session_id` (an id already checked) for `holder`, without waiting for
/// an open holder (a save or housekeeping step of another client is waited for, up to
/// `StoreOptions::max_busy_wait`).
///
/// # Errors
/// [`StorageError::LeaseBusy`] with the holder; [`StorageError::ReadOnly`];
/// [`StorageError::Backend`] when the lease file cannot be created, locked or written.
pub(crate) fn acquire(
    store: &Arc<StateStore>,
    session_id: &str,
    holder: &HolderInfo,
) -> Result<StateLease> {
    let target = || Target::session(session_id);
    let label = serde_json::to_string(&Label {
        holder: holder.clone(),
    })
    .map_err(|e| StorageError::backend("record the holder of the lease of", target(), e))?;
    let lease = store
        .lease_shared(session_id, Some(&label))
        .map_err(|e| state_err("take the lease of", target(), e))?;
    Ok(StateLease {
        lease: Some(lease),
        session_id: session_id.to_owned(),
        holder: holder.clone(),
    })
}

impl LeaseGuard for StateLease {
    fn session_id(&self) -> &str {
        &self.session_id
    }

    fn holder(&self) -> &HolderInfo {
        &self.holder
    }

    fn renew(&self) -> Result<()> {
        // A flock does not expire: held as long as the guard (and its process) lives.
        if self.lease.is_some() {
            Ok(())
        } else {
            Err(StorageError::LeaseLost {
                session_id: self.session_id.clone(),
            })
        }
    }

    fn release(mut self: Box<Self>) -> Result<()> {
        // session-state removes the lease file while still holding the lock, then closes it.
        drop(self.lease.take());
        Ok(())
    }
}
