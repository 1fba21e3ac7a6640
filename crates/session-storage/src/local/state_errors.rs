//! session-state's errors as [`StorageError`]s, among them the holder of a busy session lease,
//! read back from the label this backend writes into session-state's holder note
//! (`src/local/lease.rs` writes it).

use serde::{Deserialize, Serialize};
use session_state::{LeaseHolder, StateError};

use crate::error::{StorageError, Target};
use crate::types::HolderInfo;

/// The label this backend gives session-state's lease: one JSON object,
/// `{"holder":{"name","host","pid"}}`.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Label {
    pub(super) holder: HolderInfo,
}

/// A [`StateError`] as a [`StorageError`] about `target`.
pub(crate) fn state_err(op: &'static str, target: Target, e: StateError) -> StorageError {
    match e {
        StateError::UnsafeId { id, source } => StorageError::UnsafeId { id, source },
        StateError::ReadOnly { op, .. } => StorageError::ReadOnly { op },
        StateError::InvalidCursor { token } => StorageError::InvalidCursor { token },
        StateError::Busy { waited_ms, .. } => StorageError::Busy { target, waited_ms },
        StateError::SessionBusy { session_id, holder } => busy(session_id, *holder),
        other => StorageError::backend(op, target, other),
    }
}

/// [`StorageError::LeaseBusy`] for session-state's `SessionBusy`: the holder from the
/// label this backend wrote, else from the note's pid, host and program (or purpose); `None`
/// when the pid is not known.
fn busy(session_id: String, holder: LeaseHolder) -> StorageError {
    let from_label = holder
        .label
        .as_deref()
        .and_then(|l| serde_json::from_str::<Label>(l).ok())
        .map(|l| l.holder);
    let named = from_label.or_else(|| {
        holder.pid.map(|pid| HolderInfo {
            name: holder
                .program
                .clone()
                .unwrap_or_else(|| holder.purpose.as_str().to_owned()),
            host: holder.host.clone().unwrap_or_default(),
            pid,
        })
    });
    StorageError::LeaseBusy {
        session_id,
        holder: named,
        since: holder.since,
    }
}
