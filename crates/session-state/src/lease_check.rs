//! The lease check of a save that holds no lease (crate README, "One writer per session").
//!
//! Such a save takes no lease of its own: the write lock of `state.db` (`BEGIN IMMEDIATE`),
//! which every save holds from its plan to its `COMMIT`, already keeps two saves apart. What
//! remains is to respect a lease someone else holds, and that is checked under that lock: the
//! session's lease file is probed (`open` read-only; when there is one, a shared `flock` let go
//! at once), which costs one failing `open` when nobody holds the lease, where taking a lease
//! creates, locks, writes and removes a file (directory changes that the file system writes
//! out with the next sync).
//!
//! Exclusion holds both ways:
//!
//! * a save that finds the lease held is refused ([`StateError::SessionBusy`]) or waits,
//!   without keeping the write lock while it waits, as if it had tried to take the lease;
//! * whoever takes a lease takes the write lock of `state.db` once after locking the lease file
//!   and before returning (see [`StateStore::wait_for_unleased_saves`]): a save that found the
//!   lease free has then committed or given up, and every later save finds it held.

use std::fs::TryLockError;
use std::io;
use std::time::{Duration, Instant};

use crate::db::WriteTx;
use crate::error::{Result, StateError};
use crate::holder::{LeaseHolder, LeasePurpose};
use crate::lease::{
    UNKNOWN_HOLDER_GRACE, check_regular, lease_path, open_error, open_lease_file, read_holder,
    same_file,
};
use crate::store::StateStore;

/// What the check of one session's lease found, under the write lock.
#[derive(Debug)]
pub(crate) enum LeaseCheck {
    /// Nobody holds the lease (or this store does): the save goes ahead.
    Free,
    /// A save or housekeeping step of another holder, or a holder that cannot be identified
    /// yet: let go of the write lock, wait and check again.
    Wait,
    /// Another holder has the session open, or the wait is over: the save is refused.
    Busy(StateError),
}

/// The longest pause between two checks of a held lease.
pub(crate) const MAX_PAUSE: Duration = Duration::from_millis(20);

impl StateStore {
    /// Checks the lease of `id` for a save that holds none, under the caller's write
    /// transaction; `since`: when the save first found it held (`None`: not yet), for the
    /// waits of [`crate::StoreOptions::max_busy_wait`] and [`UNKNOWN_HOLDER_GRACE`].
    ///
    /// # Errors
    /// [`StateError::NotRegularFile`] when the lease path is a link, a FIFO or other odd
    /// file (as taking the lease would); [`StateError::Io`] when it cannot be opened, stat'ed
    /// or locked.
    pub(crate) fn check_lease_for_save(
        &self,
        id: &str,
        since: Option<Instant>,
    ) -> Result<LeaseCheck> {
        if self.leases.holds(id) {
            return Ok(LeaseCheck::Free);
        }
        let path = lease_path(&self.root, id);
        let file = match open_lease_file(&path, false) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(LeaseCheck::Free),
            Err(e) => return Err(open_error(&path, e)),
        };
        check_regular(&file, &path)?;
        match file.try_lock_shared() {
            // Closing the descriptor lets go of the shared lock.
            Ok(()) => Ok(LeaseCheck::Free),
            Err(TryLockError::WouldBlock) => {
                // Removed by a holder that is releasing it: nobody holds it any more (a holder
                // that takes it again waits for this save, see the module docs).
                if !same_file(&file, &path)? {
                    return Ok(LeaseCheck::Free);
                }
                let (holder, confirmed) = read_holder(&file);
                let waited = since.map_or(Duration::ZERO, |s| s.elapsed());
                let give_up = match (confirmed, holder.purpose) {
                    (true, LeasePurpose::Write | LeasePurpose::Housekeeping) => {
                        waited >= self.options.max_busy_wait
                    }
                    (true, _) => true,
                    (false, _) => waited >= UNKNOWN_HOLDER_GRACE,
                };
                Ok(if give_up {
                    LeaseCheck::Busy(busy(id, holder))
                } else {
                    LeaseCheck::Wait
                })
            }
            Err(TryLockError::Error(e)) => Err(StateError::io("probe lock of", &path, e)),
        }
    }

    /// Takes the write lock of `state.db` once and lets go of it (`BEGIN IMMEDIATE`,
    /// `ROLLBACK`; nothing is written): returns once every save that checked the lease before
    /// the caller locked the lease file has committed or given up. Called by whoever takes a
    /// lease, after locking its file.
    ///
    /// # Errors
    /// [`StateError::Busy`] after [`crate::StoreOptions::max_busy_wait`]; [`StateError::Db`].
    pub(crate) fn wait_for_unleased_saves(&self) -> Result<()> {
        let conn = self.lock();
        let tx = WriteTx::begin(&conn, &self.db_path, self.options.max_busy_wait)?;
        drop(tx);
        Ok(())
    }
}

fn busy(id: &str, holder: LeaseHolder) -> StateError {
    StateError::SessionBusy {
        session_id: id.to_owned(),
        holder: Box::new(holder),
    }
}
