//! A run as the pure functions see it: its records, where they came from, and which lines could
//! not be read.

use session_schema::{Record, Timestamp};

/// Identity of one run (one `sessions/YYYY/MM/DD/<run_id>.jsonl` file, spec §2), taken from its
/// `header` or from the session-state run index.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunMeta {
    /// The run id.
    pub run_id: String,
    /// The session the run belongs to (header `session_id`), when known.
    pub session_id: Option<String>,
    /// `header.started_at` as written; runs of a session are ordered by this string, as the
    /// reference's `session.history` does (compat notes §2.12).
    pub started_at: Timestamp,
}

impl RunMeta {
    /// The meta of a run from its records: the `header` when there is one, else the first
    /// record with a `run_id` (with its `ts` as `started_at`). `None` when no record names a run.
    pub fn from_records(records: &[Record]) -> Option<RunMeta> {
        if let Some(Record::Header(h)) = records.first() {
            return Some(RunMeta {
                run_id: h.run_id.clone(),
                session_id: h.session_id.clone(),
                started_at: h.started_at.clone(),
            });
        }
        let first = records.iter().find(|r| r.run_id().is_some())?;
        let session_id = records.iter().find_map(|r| match r {
            Record::RunStart(s) => s.session_id.clone(),
            _ => None,
        });
        Some(RunMeta {
            run_id: first.run_id().unwrap_or_default().to_owned(),
            session_id,
            started_at: first.ts().cloned().unwrap_or_default(),
        })
    }
}

/// Why a line of a run log was not turned into a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SkipKind {
    /// The last line is cut short (a crash mid-write): JSON that ends early, or no final `\n`.
    TornTail,
    /// A line that is not JSON (or not UTF-8) in the middle of the file.
    Corrupt,
    /// Valid JSON that does not fit the schema of its record type.
    Shape,
}

impl SkipKind {
    /// `torn-tail`, `corrupt` or `shape`.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipKind::TornTail => "torn-tail",
            SkipKind::Corrupt => "corrupt",
            SkipKind::Shape => "shape",
        }
    }
}

/// A line of a run log that was skipped, with its position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedLine {
    /// 1-based line number.
    pub line: u64,
    /// Byte offset of the start of the line in the file.
    pub byte_offset: u64,
    /// Why it was skipped.
    pub kind: SkipKind,
}

/// One run's records plus where they came from: the unit most functions of this crate work on.
///
/// Not a second "run read whole": a run is read whole into session-jsonl's `RunRead` (records
/// with byte offsets and raw bytes, damage reports), the one such type of the workspace, which
/// this pure core cannot name (it depends on session-schema only). `RunLog` is the projection
/// the pure functions take: the records, their line numbers and the lines skipped. Build it
/// from records parsed any way you like ([`RunLog::from_records`]); the `io` module makes it
/// from a `RunRead` (`io::run_log_from_read`).
#[derive(Debug, Clone, Default)]
pub struct RunLog {
    /// The run's identity.
    pub meta: RunMeta,
    /// The records that were read, in file order.
    pub records: Vec<Record>,
    /// The 1-based line number of each record (same length as `records`), or empty when unknown.
    pub lines: Vec<u64>,
    /// Lines that could not be read.
    pub skipped: Vec<SkippedLine>,
}

impl RunLog {
    /// A run log from records alone (meta from [`RunMeta::from_records`], empty when no record
    /// names a run; no line numbers, nothing skipped).
    pub fn from_records(records: Vec<Record>) -> RunLog {
        RunLog {
            meta: RunMeta::from_records(&records).unwrap_or_default(),
            records,
            lines: Vec::new(),
            skipped: Vec::new(),
        }
    }

    /// The 1-based line of record `index`, when line numbers are known.
    pub fn line_of(&self, index: usize) -> Option<u64> {
        self.lines.get(index).copied()
    }

    /// Whether the log ends in a torn line.
    pub fn has_torn_tail(&self) -> bool {
        self.skipped.iter().any(|s| s.kind == SkipKind::TornTail)
    }

    /// Whether the run has a `run.end` record.
    pub fn has_run_end(&self) -> bool {
        self.records.iter().any(|r| matches!(r, Record::RunEnd(_)))
    }
}

/// Checks a run's structure (spec §3–4): a `header` first, every record of the same run,
/// skipped lines (a torn tail is a note: it is what a crash leaves), and a `run.end` at the
/// end (a note when missing: a crash or a run still going).
pub fn verify_run(run: &RunLog) -> Vec<crate::Diagnostic> {
    use crate::diagnostic::{Diagnostic, DiagnosticKind};
    let mut diags = Vec::new();
    let run_id = (!run.meta.run_id.is_empty()).then_some(run.meta.run_id.as_str());
    if run.records.is_empty() {
        diags.push(
            Diagnostic::warning(DiagnosticKind::EmptyRun, "the run log holds no record")
                .in_run(run_id),
        );
    } else if !matches!(run.records.first(), Some(Record::Header(_))) {
        diags.push(
            Diagnostic::warning(
                DiagnosticKind::HeaderProblem,
                "the first record is not a header; the reference's readers do not see this run",
            )
            .at(0)
            .in_run(run_id),
        );
    }
    for (i, r) in run.records.iter().enumerate() {
        if i > 0 && matches!(r, Record::Header(_)) {
            diags.push(
                Diagnostic::warning(DiagnosticKind::HeaderProblem, "a second header record")
                    .at(i)
                    .in_run(run_id),
            );
        }
        if let (Some(own), Some(other)) = (run_id, r.run_id())
            && own != other
        {
            diags.push(
                Diagnostic::warning(
                    DiagnosticKind::ForeignRecord,
                    format!("{} record belongs to run {other}", r.kind()),
                )
                .at(i)
                .in_run(run_id),
            );
        }
    }
    for s in &run.skipped {
        let d = match s.kind {
            SkipKind::TornTail => Diagnostic::note(
                DiagnosticKind::TornTail,
                format!(
                    "line {} (byte offset {}) is cut short",
                    s.line, s.byte_offset
                ),
            ),
            kind => Diagnostic::warning(
                DiagnosticKind::SkippedLine,
                format!(
                    "line {} (byte offset {}) was skipped ({})",
                    s.line,
                    s.byte_offset,
                    kind.as_str()
                ),
            ),
        };
        diags.push(d.in_run(run_id));
    }
    if !run.records.is_empty() && !run.has_run_end() {
        diags.push(
            Diagnostic::note(
                DiagnosticKind::NoRunEnd,
                "the run has no run.end record (crashed or still running)",
            )
            .in_run(run_id),
        );
    }
    diags
}
