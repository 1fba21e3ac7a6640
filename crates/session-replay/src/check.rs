//! One run checked as a reader yields it ([`RunChecker`]): the structural check
//! ([`verify_run`](crate::verify_run)), the pairing of requests and responses
//! ([`invocations`](crate::invocations)) and the snapshot checks
//! ([`check_snapshots`](crate::check_snapshots)) fed one record or damage report at a time,
//! so a run is checked without being held whole (spec §3–5). Each check is the one those
//! functions wrap: the findings are theirs, in their order.

use std::collections::BTreeMap;
use std::path::PathBuf;

use session_schema::{Damage, Item, Record, RecordLine};

use crate::diagnostic::Diagnostic;
use crate::invocation::{InvocationPairing, SnapshotCheck, SnapshotReport};
use crate::run::{RunMeta, RunStructureCheck};

/// The checks of one run fed item by item (records and damage reports in file order, as
/// session-jsonl's `Reader` yields them); [`finish`](Self::finish) gives a [`RunCheckReport`].
///
/// Memory follows the run's structure and its longest line, not its bytes: the checks keep a
/// few words per invocation, the previous request's messages text, the findings, and the line
/// and byte offset of every `llm.request` record and of every record a finding names (what
/// [`RunCheckReport::position`] answers). One exception ([`SnapshotCheck`]): a request whose
/// seq has had no response yet keeps its messages text until that response comes, or to the
/// end when none does (a failed call); a run a runtime writes has at most a few such
/// requests, a log of many unanswered requests holds all of their texts.
#[derive(Debug, Clone)]
pub struct RunChecker {
    structure: RunStructureCheck,
    pairing: InvocationPairing,
    snapshots: SnapshotCheck,
    /// Index of the next record.
    next: usize,
    /// Findings so far, to see whether a record added one.
    found: usize,
    /// `(line, byte offset)` of the records findings may name.
    positions: BTreeMap<usize, (u64, u64)>,
}

impl RunChecker {
    /// Checks of the run read from `path` (its file name names the run when no record does;
    /// empty for a run of a storage backend).
    pub fn new(path: PathBuf) -> RunChecker {
        RunChecker {
            structure: RunStructureCheck::new(path),
            pairing: InvocationPairing::default(),
            snapshots: SnapshotCheck::default(),
            next: 0,
            found: 0,
            positions: BTreeMap::new(),
        }
    }

    /// Takes the reader's next item.
    pub fn push(&mut self, item: &Item) {
        match item {
            Item::Record(r) => self.push_record(r),
            Item::Damage(d) => self.push_damage(d),
        }
    }

    /// Takes the run's next record; its index is the number of records pushed before it.
    pub fn push_record(&mut self, line: &RecordLine) {
        let index = self.next;
        self.next += 1;
        let record = line.record();
        self.structure.push_record(index, record);
        self.pairing.push(index, record);
        self.snapshots.push(index, record);
        let found = self.structure.found() + self.pairing.found() + self.snapshots.found();
        // A request can be named later (a missing response, an over-inclusive snapshot), the
        // first record at the end (a run that does not start with a header).
        if found != self.found || index == 0 || matches!(record, Record::LlmRequest(_)) {
            self.positions.insert(index, (line.line, line.offset));
        }
        self.found = found;
    }

    /// Takes the reader's next damage report.
    pub fn push_damage(&mut self, damage: &Damage) {
        self.structure.push_damage(damage);
    }

    /// The findings of the three checks.
    pub fn finish(self) -> RunCheckReport {
        let (meta, structure) = self.structure.finish();
        let (snapshot_report, snapshots) = self.snapshots.finish();
        RunCheckReport {
            meta,
            structure,
            invocations: self.pairing.finish(),
            snapshots,
            snapshot_report,
            records: self.next,
            positions: self.positions,
        }
    }
}

/// What [`RunChecker`] found in one run.
#[derive(Debug, Clone)]
pub struct RunCheckReport {
    /// The run's identity ([`RunMeta::of`]).
    pub meta: RunMeta,
    /// [`verify_run`](crate::verify_run)'s diagnostics.
    pub structure: Vec<Diagnostic>,
    /// The diagnostics of [`invocations`](crate::invocations).
    pub invocations: Vec<Diagnostic>,
    /// The diagnostics of [`check_snapshots`](crate::check_snapshots).
    pub snapshots: Vec<Diagnostic>,
    /// The report of [`check_snapshots`](crate::check_snapshots).
    pub snapshot_report: SnapshotReport,
    /// Records pushed.
    pub records: usize,
    positions: BTreeMap<usize, (u64, u64)>,
}

impl RunCheckReport {
    /// `(line, byte offset)` of record `index` when a finding names it (or it is the first
    /// record or an `llm.request`).
    pub fn position(&self, index: usize) -> Option<(u64, u64)> {
        self.positions.get(&index).copied()
    }
}
