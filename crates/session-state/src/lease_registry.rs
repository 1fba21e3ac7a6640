//! The sessions whose leases one store holds, below the store and its lease code (the
//! store keeps one, `lease` fills it, saves and deletes consult it).

use std::collections::BTreeSet;

use parking_lot::{Mutex, MutexGuard};

/// The sessions whose leases a [`crate::StateStore`] holds (saves and deletes of those through
/// the same store are the holder's and take no further lock).
#[derive(Debug, Default)]
pub(crate) struct Registry(Mutex<BTreeSet<String>>);

impl Registry {
    fn set(&self) -> MutexGuard<'_, BTreeSet<String>> {
        self.0.lock()
    }

    /// Whether this store holds the lease of session `id`.
    pub(crate) fn holds(&self, id: &str) -> bool {
        self.set().contains(id)
    }

    /// Records that this store now holds the lease of session `id`.
    pub(crate) fn insert(&self, id: &str) {
        self.set().insert(id.to_owned());
    }

    /// Records that this store let go of the lease of session `id`.
    pub(crate) fn remove(&self, id: &str) {
        self.set().remove(id);
    }
}
