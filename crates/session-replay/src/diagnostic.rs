//! Diagnostics: what the pure functions of this crate found wrong or noteworthy in the records
//! they were given, returned beside the result instead of as an error (records in, results plus
//! diagnostics out).

use std::fmt;

/// How much a diagnostic matters to someone reading a replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Expected in real logs (a request that never got a response after a failure, a crashed
    /// run); reported so a reader can explain the result.
    Note,
    /// The data contradicts the format's invariants (spec §4) or the reference's habits; the
    /// result is a best effort.
    Warning,
}

impl Severity {
    /// `note` or `warning`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Note => "note",
            Severity::Warning => "warning",
        }
    }
}

/// What kind of finding a [`Diagnostic`] is. Callers match on it; the message is for people.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum DiagnosticKind {
    /// An `llm.request` has no `llm.response` with the same `seq` (a failed or cancelled call,
    /// or a crash; spec §4, compat notes §2.3).
    MissingResponse,
    /// An `llm.response` whose `seq` matches no earlier `llm.request`.
    OrphanResponse,
    /// A second `llm.request` or `llm.response` with a `seq` already seen (compat notes §5
    /// item 10: a failed save makes the next run reuse seq numbers).
    DuplicateSeq,
    /// A `seq` lower than or equal to the previous invocation's.
    SeqNotIncreasing,
    /// A request snapshot whose tail already holds its own response's messages (compat notes
    /// §5 item 9, fixture quirk Q1); the corrected prompt leaves them out.
    OverInclusiveSnapshot,
    /// A request's messages do not extend the previous request's messages in the same run and
    /// no compaction happened in between (spec §5).
    SnapshotDivergence,
    /// A request's messages start over after a compaction (`compaction_complete` with
    /// `compacted: true`): expected, reported as a note.
    SnapshotReset,
    /// A field that should hold messages, tools or a tool choice could not be decoded.
    Undecodable,
    /// The run has no `run.end` (a crash, or a file still being written).
    NoRunEnd,
    /// The run log ends in a torn (cut) line.
    TornTail,
    /// A line in the middle of the run log could not be read and was skipped.
    SkippedLine,
    /// The run log does not start with a `header`, or the header disagrees with later records.
    HeaderProblem,
    /// A record belongs to another run (`run_id` differs from the header's).
    ForeignRecord,
    /// The requested invocation does not exist in the records.
    NoSuchInvocation,
    /// A run could not be replayed at all (no records).
    EmptyRun,
    /// A line was read after a repair (invalid UTF-8 decoded lossily, a lone surrogate escape,
    /// an unknown `schema_version` read best-effort).
    RepairedLine,
    /// An indexed run file could not be read (vanished, or an I/O error); it is left out.
    UnreadableRun,
    /// A tool message was rebuilt from a `tool.output` record (its content is the display
    /// rendering, compat notes §1.2).
    RebuiltToolResult,
}

impl DiagnosticKind {
    /// A stable kebab-case name (`missing-response`, `over-inclusive-snapshot`, …) for output and
    /// expectation files.
    pub fn as_str(self) -> &'static str {
        match self {
            DiagnosticKind::MissingResponse => "missing-response",
            DiagnosticKind::OrphanResponse => "orphan-response",
            DiagnosticKind::DuplicateSeq => "duplicate-seq",
            DiagnosticKind::SeqNotIncreasing => "seq-not-increasing",
            DiagnosticKind::OverInclusiveSnapshot => "over-inclusive-snapshot",
            DiagnosticKind::SnapshotDivergence => "snapshot-divergence",
            DiagnosticKind::SnapshotReset => "snapshot-reset",
            DiagnosticKind::Undecodable => "undecodable",
            DiagnosticKind::NoRunEnd => "no-run-end",
            DiagnosticKind::TornTail => "torn-tail",
            DiagnosticKind::SkippedLine => "skipped-line",
            DiagnosticKind::HeaderProblem => "header-problem",
            DiagnosticKind::ForeignRecord => "foreign-record",
            DiagnosticKind::NoSuchInvocation => "no-such-invocation",
            DiagnosticKind::EmptyRun => "empty-run",
            DiagnosticKind::RepairedLine => "repaired-line",
            DiagnosticKind::UnreadableRun => "unreadable-run",
            DiagnosticKind::RebuiltToolResult => "rebuilt-tool-result",
        }
    }
}

/// One finding about the records given to a pure function of this crate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// What was found.
    pub kind: DiagnosticKind,
    /// How much it matters.
    pub severity: Severity,
    /// The run the finding is about, when known.
    pub run_id: Option<String>,
    /// 0-based index of the record concerned in the slice that was passed in (map it to a line
    /// with [`RunRead::line_of`](crate::RunRead::line_of)).
    pub record: Option<usize>,
    /// A lower-case sentence fragment without a full stop.
    pub message: String,
}

impl Diagnostic {
    pub(crate) fn new(
        kind: DiagnosticKind,
        severity: Severity,
        message: impl Into<String>,
    ) -> Self {
        Diagnostic {
            kind,
            severity,
            run_id: None,
            record: None,
            message: message.into(),
        }
    }

    pub(crate) fn warning(kind: DiagnosticKind, message: impl Into<String>) -> Self {
        Diagnostic::new(kind, Severity::Warning, message)
    }

    pub(crate) fn note(kind: DiagnosticKind, message: impl Into<String>) -> Self {
        Diagnostic::new(kind, Severity::Note, message)
    }

    pub(crate) fn at(mut self, record: usize) -> Self {
        self.record = Some(record);
        self
    }

    pub(crate) fn in_run(mut self, run_id: Option<&str>) -> Self {
        self.run_id = run_id.map(str::to_owned);
        self
    }
}

impl fmt::Display for Diagnostic {
    /// `warning[snapshot-divergence] record 7: …` (record index 0-based, as passed in).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[{}]", self.severity.as_str(), self.kind.as_str())?;
        if let Some(run) = &self.run_id {
            write!(f, " run {run}")?;
        }
        if let Some(record) = self.record {
            write!(f, " record {record}")?;
        }
        write!(f, ": {}", self.message)
    }
}
