//! What this client knows of the runs it appended to last: the run row as its own append left
//! it (run key, committed length, line count, the parser's running state). With it, the next
//! append at that run's end needs nothing from the server before writing, and goes out as one
//! statement that compares and swaps the committed length and inserts the lines
//! (`runs::SQL_APPEND_AT`): one round trip and one commit instead of a transaction of five.
//!
//! The knowledge is only ever a guess: the statement writes nothing unless the run row still
//! has that run key (the run was not removed and made again) and that committed length (nobody
//! appended since: lengths only grow), and the full transaction takes over when it does not.
//! So a stale entry (another process appended, `gc` removed the run) costs one round trip,
//! never a wrong byte.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::derive::RunFold;

/// Most runs remembered; past that, the first by run id is forgotten per new one (a fleet worker
/// appends to a few runs at a time; `sync` goes through runs one after the other).
const CAPACITY: usize = 1024;

/// A run row as this client's last append to it left it.
#[derive(Debug, Clone)]
pub(crate) struct KnownRun {
    /// `runs.run_key`.
    pub(crate) key: i64,
    /// `runs.committed_len`, bytes.
    pub(crate) committed: u64,
    /// `runs.line_count`.
    pub(crate) lines: u64,
    /// `runs.summary`, deserialized.
    pub(crate) fold: RunFold,
}

/// The runs this client appended to last, by run id (shared by the connections of a
/// backend).
#[derive(Debug, Default)]
pub(crate) struct KnownRuns {
    runs: Mutex<BTreeMap<String, KnownRun>>,
}

impl KnownRuns {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, KnownRun>> {
        self.runs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What is known of `run_id` when its committed length is `len`.
    pub(crate) fn at(&self, run_id: &str, len: u64) -> Option<KnownRun> {
        self.lock()
            .get(run_id)
            .filter(|k| k.committed == len)
            .cloned()
    }

    /// Remembers `run` as run `run_id`'s state.
    pub(crate) fn remember(&self, run_id: &str, run: KnownRun) {
        let mut runs = self.lock();
        if runs.len() >= CAPACITY
            && !runs.contains_key(run_id)
            && let Some(old) = runs.keys().next().cloned()
        {
            runs.remove(&old);
        }
        runs.insert(run_id.to_owned(), run);
    }

    /// Forgets run `run_id` (an append found it other than known, or failed).
    pub(crate) fn forget(&self, run_id: &str) {
        self.lock().remove(run_id);
    }

    /// Runs remembered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(committed: u64) -> KnownRun {
        KnownRun {
            key: 7,
            committed,
            lines: 1,
            fold: RunFold::new(),
        }
    }

    #[test]
    fn a_run_is_known_only_at_the_length_it_was_left_at() {
        let k = KnownRuns::default();
        assert!(k.at("r", 0).is_none());
        k.remember("r", run(120));
        assert_eq!(k.at("r", 120).map(|r| (r.key, r.lines)), Some((7, 1)));
        assert!(k.at("r", 0).is_none());
        assert!(k.at("r", 121).is_none());
        k.forget("r");
        assert!(k.at("r", 120).is_none());
    }

    #[test]
    fn at_most_capacity_runs_are_remembered() {
        let k = KnownRuns::default();
        for i in 0..CAPACITY + 10 {
            k.remember(&format!("run-{i}"), run(10));
        }
        assert_eq!(k.len(), CAPACITY);
        // The newest is always kept; one already known is updated in place.
        assert!(k.at(&format!("run-{}", CAPACITY + 9), 10).is_some());
        k.remember(&format!("run-{}", CAPACITY + 9), run(20));
        assert_eq!(k.len(), CAPACITY);
        assert!(k.at(&format!("run-{}", CAPACITY + 9), 20).is_some());
    }
}
