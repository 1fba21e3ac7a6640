//! [`SessionStore`]: the repository of resumable sessions — load, save with compare-and-swap
//! on a version, list, delete, and an exclusive lease per session ([`LeaseGuard`]).

use std::fmt;

use session_schema::SessionState;

use crate::error::Result;
use crate::types::{
    Expected, HolderInfo, SessionListPage, SessionListQuery, StoredSession, Version,
};

/// The session store: one resumable [`SessionState`] per session id (spec §3.1).
///
/// # Contract (checked by `session_storage::conformance`)
///
/// * **Versions.** Every save gives the session a new [`Version`]; a load returns the current
///   one. A save or delete with [`Expected::Version`] succeeds only while the stored version
///   is that one, with [`Expected::Absent`] only while no session is stored; otherwise it
///   fails with [`StorageError::VersionConflict`](crate::StorageError::VersionConflict) naming
///   the version found, and nothing changes. Of several writers racing from one version,
///   exactly one wins.
/// * **Round trip.** A loaded state equals the saved one (messages, unknown fields and all).
/// * **Leases.** [`acquire_lease`](Self::acquire_lease) is exclusive across every client of
///   the store: while one holder has a session's lease, every other acquire fails with
///   [`StorageError::LeaseBusy`](crate::StorageError::LeaseBusy) naming the holder. Releasing
///   (or dropping) the guard ends it, and so does the holder's death: a crashed worker never
///   blocks a session forever. A lease is about who *works on* a session; it never stops the
///   holder's own saves (compare-and-swap protects the data). A backend may also refuse saves
///   and deletes of *other* clients while the lease is held, with
///   [`StorageError::LeaseBusy`](crate::StorageError::LeaseBusy): the local backend does, its
///   lease being session-state's one writer per session.
/// * **Keyset paging** as described on [`SessionListQuery`].
///
/// Methods are synchronous and the trait is object-safe (`&dyn SessionStore`).
pub trait SessionStore: Send + Sync {
    /// The session, or `None` when none is stored under `session_id`. Damaged message lines
    /// do not fail the load: they are in [`StoredSession::damage`].
    ///
    /// # Errors
    /// [`StorageError::UnsafeId`](crate::StorageError::UnsafeId),
    /// [`StorageError::Backend`](crate::StorageError::Backend).
    fn load_session(&self, session_id: &str) -> Result<Option<StoredSession>>;

    /// Saves `state` under `state.session_id` if the stored session is what `expected` says;
    /// returns the new version.
    ///
    /// # Errors
    /// [`StorageError::UnsafeId`](crate::StorageError::UnsafeId),
    /// [`StorageError::VersionConflict`](crate::StorageError::VersionConflict) (nothing
    /// written), [`StorageError::ReadOnly`](crate::StorageError::ReadOnly),
    /// [`StorageError::Busy`](crate::StorageError::Busy),
    /// [`StorageError::LeaseBusy`](crate::StorageError::LeaseBusy) (another client holds the
    /// session's lease, where the backend enforces it; nothing written),
    /// [`StorageError::Backend`](crate::StorageError::Backend).
    fn save_session(&self, state: &SessionState, expected: &Expected) -> Result<Version>;

    /// [`save_session`](Self::save_session) for a caller that only appended messages since
    /// its last save of the session through this client: `state.messages[..kept]` are the
    /// messages that save stored, unchanged. A backend may take the caller at its word and
    /// store only the new messages without comparing the kept ones (the local backend:
    /// session-state's `save_appended_expecting`, which checks that this client made the
    /// last save, that it held `kept` messages and that the last of them is unchanged, and
    /// otherwise saves as `save_session` does); the default is `save_session`. Whatever
    /// `kept` says, the session stored is `state` when earlier messages are unchanged, and the
    /// version and compare-and-swap are those of `save_session`. A list edited before its
    /// last kept message (compaction) must be saved with `save_session`: a backend that takes
    /// the caller at its word does not see such an edit.
    ///
    /// # Errors
    /// As [`save_session`](Self::save_session).
    fn save_session_appended(
        &self,
        state: &SessionState,
        expected: &Expected,
        kept: usize,
    ) -> Result<Version> {
        let _ = kept;
        self.save_session(state, expected)
    }

    /// Saves several sessions, each as [`save_session`](Self::save_session) would (its
    /// `Expected`, its new version), and returns one result per entry, in order: a version
    /// conflict or any other refusal of one session fails only that entry, with nothing
    /// written for it. A backend that can commit the saves together does so (the local
    /// backend: one `state.db` transaction per 256 sessions, each session still
    /// all-or-nothing, session-state's `StateStore::save_batch`); the default saves them one
    /// by one. A session given twice is saved twice by the default and refused by the local
    /// backend (the whole call fails, nothing written).
    ///
    /// # Errors
    /// Per entry, as [`save_session`](Self::save_session). The call itself, for a backend
    /// that commits together, when the commit fails (nothing of the batch is committed):
    /// [`StorageError::ReadOnly`](crate::StorageError::ReadOnly),
    /// [`StorageError::Busy`](crate::StorageError::Busy),
    /// [`StorageError::Backend`](crate::StorageError::Backend).
    fn save_sessions(&self, saves: &[(&SessionState, Expected)]) -> Result<Vec<Result<Version>>> {
        Ok(saves
            .iter()
            .map(|(state, expected)| self.save_session(state, expected))
            .collect())
    }

    /// Sessions matching `query`, most recently updated first, one page.
    ///
    /// # Errors
    /// [`StorageError::InvalidCursor`](crate::StorageError::InvalidCursor),
    /// [`StorageError::Backend`](crate::StorageError::Backend).
    fn list_sessions(&self, query: &SessionListQuery) -> Result<SessionListPage>;

    /// Deletes the session if the stored one is what `expected` says; returns whether there
    /// was one (`Ok(false)`: nothing stored, which only [`Expected::Absent`] and
    /// [`Expected::Any`] accept).
    ///
    /// # Errors
    /// As [`save_session`](Self::save_session).
    fn delete_session(&self, session_id: &str, expected: &Expected) -> Result<bool>;

    /// Takes the exclusive lease of `session_id` for `holder`; it lasts until the guard is
    /// released or dropped, or the holder dies. Does not wait: a held lease is
    /// [`StorageError::LeaseBusy`](crate::StorageError::LeaseBusy) at once.
    ///
    /// # Errors
    /// [`StorageError::UnsafeId`](crate::StorageError::UnsafeId),
    /// [`StorageError::LeaseBusy`](crate::StorageError::LeaseBusy),
    /// [`StorageError::Backend`](crate::StorageError::Backend).
    fn acquire_lease(&self, session_id: &str, holder: &HolderInfo) -> Result<Box<dyn LeaseGuard>>;
}

/// A held session lease ([`SessionStore::acquire_lease`]). Dropping it releases the lease
/// (errors are then lost; [`release`](Self::release) reports them).
pub trait LeaseGuard: Send + Sync + fmt::Debug {
    /// The leased session.
    fn session_id(&self) -> &str;

    /// Who holds it.
    fn holder(&self) -> &HolderInfo;

    /// Confirms the lease is still held, extending it where leases expire (a lease row with a
    /// time to live). Long-running holders call it periodically, at least as often as the
    /// backend documents.
    ///
    /// # Errors
    /// [`StorageError::LeaseLost`](crate::StorageError::LeaseLost) when it is no longer held;
    /// [`StorageError::Backend`](crate::StorageError::Backend).
    fn renew(&self) -> Result<()>;

    /// Ends the lease now.
    ///
    /// # Errors
    /// [`StorageError::Backend`](crate::StorageError::Backend) (the lease is gone anyway once
    /// the guard is).
    fn release(self: Box<Self>) -> Result<()>;
}
