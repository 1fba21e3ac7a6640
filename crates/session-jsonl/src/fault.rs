//! The run writer's fault-injection seam: a [`FaultPlan`] set in
//! [`WriterOptions::faults`](crate::WriterOptions::faults) makes chosen file operations of a
//! [`RunWriter`](crate::RunWriter) fail the way a full disk or a failing device does (`ENOSPC`,
//! `EIO`, short writes), so the writer's recovery can be tested without such a disk.
//!
//! Production code leaves `faults` at `None`; the writer then calls the file system directly.
//!
//! ```
//! use std::sync::Arc;
//! use session_jsonl::{Fault, FaultPlan, FileOp, RunWriter, WriterOptions};
//! use session_schema::{Header, Timestamp};
//!
//! const ENOSPC: i32 = 28; // Linux
//! let root = tempfile::tempdir().unwrap();
//! let plan = Arc::new(FaultPlan::new());
//! // The header's write stores 10 bytes, then the disk is full.
//! plan.fail_nth(FileOp::Write, 1, Fault::PartialThen { bytes: 10, errno: ENOSPC });
//! let opts = WriterOptions { faults: Some(Arc::clone(&plan)), ..WriterOptions::default() };
//! let header = Header {
//!     schema_version: 1,
//!     run_id: "r1".into(),
//!     started_at: Timestamp::from_raw("2026-02-03T12:00:00.000Z"),
//!     ..Default::default()
//! };
//! let err = RunWriter::create(root.path(), &header, opts.clone()).unwrap_err();
//! assert!(err.to_string().contains("os error 28"), "{err}");
//! // Nothing is left behind, so the retry works once space returns.
//! assert!(!root.path().join("2026/02/03/r1.jsonl").exists());
//! RunWriter::create(root.path(), &header, opts).unwrap();
//! ```

use std::collections::BTreeMap;

use parking_lot::Mutex;

/// A file operation of the writer that a [`FaultPlan`] can make fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum FileOp {
    /// Creating the run file (`open` with `O_CREAT | O_EXCL`).
    Create,
    /// One `write(2)` call: of a line, of the `Buffered` buffer, or of the `\n` that seals a
    /// torn tail.
    Write,
    /// `fdatasync(2)` of the run file (per record, per group-commit batch, or `sync()`).
    SyncData,
    /// `ftruncate(2)` of the run file: cutting a failed write back to the last complete line.
    Truncate,
    /// `fsync(2)` of a directory (a new run file's directory, a new directory's parent).
    SyncDir,
}

/// What an injected fault does to one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The call fails with this OS error number (28 `ENOSPC`, 5 `EIO` on Linux) and has no
    /// effect.
    Errno(i32),
    /// [`FileOp::Write`] only (like [`Fault::Errno`] for other operations): the first `bytes`
    /// bytes of the call reach the file, then the call fails with `errno` — a write cut short
    /// by a full disk.
    PartialThen {
        /// Bytes written before the failure (at most the call's length).
        bytes: usize,
        /// The OS error number of the failure.
        errno: i32,
    },
    /// [`FileOp::Write`] only (no effect on other operations): a short write that succeeds —
    /// at most `bytes` bytes (at least 1) reach the file and the call reports that count, so the
    /// writer must write the rest itself.
    Short {
        /// Bytes written by the call.
        bytes: usize,
    },
}

#[derive(Debug, Default)]
struct PlanState {
    /// Calls seen per operation (every call, faulty or not).
    calls: BTreeMap<FileOp, u64>,
    /// `(op, nth call, fault)`: one-shot faults.
    nth: Vec<(FileOp, u64, Fault)>,
    /// Faults for every call of an operation until [`FaultPlan::heal`].
    always: BTreeMap<FileOp, Fault>,
}

/// A script of faults for the file operations of the writers that share it (through
/// [`WriterOptions::faults`](crate::WriterOptions::faults)). Calls are counted per
/// [`FileOp`] from the plan's creation, 1-based. Thread-safe.
///
/// Two plans are equal only when they are the same object (so that
/// [`WriterOptions`](crate::WriterOptions) stays comparable).
#[derive(Debug, Default)]
pub struct FaultPlan {
    state: Mutex<PlanState>,
}

impl PartialEq for FaultPlan {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for FaultPlan {}

impl FaultPlan {
    /// A plan without faults (it only counts calls).
    pub fn new() -> Self {
        FaultPlan::default()
    }

    fn with<T>(&self, f: impl FnOnce(&mut PlanState) -> T) -> T {
        let mut st = self.state.lock();
        f(&mut st)
    }

    /// Makes the `nth` call of `op` (1-based, counted from the plan's creation) fail with
    /// `fault`.
    pub fn fail_nth(&self, op: FileOp, nth: u64, fault: Fault) -> &Self {
        self.with(|st| st.nth.push((op, nth, fault)));
        self
    }

    /// Makes every later call of `op` fail with `fault` until [`heal`](Self::heal) (a disk
    /// that stays full).
    pub fn fail_always(&self, op: FileOp, fault: Fault) -> &Self {
        self.with(|st| st.always.insert(op, fault));
        self
    }

    /// Removes every fault not yet triggered: space has returned, the device works again.
    pub fn heal(&self) {
        self.with(|st| {
            st.nth.clear();
            st.always.clear();
        });
    }

    /// Calls of `op` seen so far (faulty or not).
    pub fn calls(&self, op: FileOp) -> u64 {
        self.with(|st| st.calls.get(&op).copied().unwrap_or(0))
    }

    /// Counts a call of `op` and returns the fault to inject into it, if any.
    pub(crate) fn on_call(&self, op: FileOp) -> Option<Fault> {
        self.with(|st| {
            let n = st.calls.entry(op).or_insert(0);
            *n += 1;
            let n = *n;
            if let Some(i) = st.nth.iter().position(|(o, k, _)| *o == op && *k == n) {
                return Some(st.nth.remove(i).2);
            }
            st.always.get(&op).copied()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_count_calls_and_fire_once_or_until_healed() {
        let plan = FaultPlan::new();
        plan.fail_nth(FileOp::Write, 2, Fault::Errno(5));
        assert_eq!(plan.on_call(FileOp::Write), None);
        assert_eq!(plan.on_call(FileOp::Write), Some(Fault::Errno(5)));
        assert_eq!(plan.on_call(FileOp::Write), None);
        plan.fail_always(FileOp::SyncData, Fault::Errno(28));
        assert_eq!(plan.on_call(FileOp::SyncData), Some(Fault::Errno(28)));
        assert_eq!(plan.on_call(FileOp::SyncData), Some(Fault::Errno(28)));
        plan.heal();
        assert_eq!(plan.on_call(FileOp::SyncData), None);
        assert_eq!(plan.calls(FileOp::Write), 3);
        assert_eq!(plan.calls(FileOp::SyncData), 3);
        assert_eq!(plan.calls(FileOp::Create), 0);
        let other = FaultPlan::new();
        assert_ne!(plan, other);
        assert_eq!(plan, plan);
    }
}
