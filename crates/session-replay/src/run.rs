//! A run as the pure functions see it: session-schema's [`RunRead`] (the one type for a run
//! read whole: its records with their positions, and the reader's damage reports), the run's
//! identity derived from it ([`RunMeta`]), and which lines could not be read ([`SkippedLine`]).

use std::path::{Path, PathBuf};

use session_schema::{Damage, DamageKind, Record, RunRead, Timestamp, parse_run_file_name};

use crate::diagnostic::{Diagnostic, DiagnosticKind};

/// Identity of one run (one `sessions/YYYY/MM/DD/<run_id>.jsonl` file, spec §2), taken from its
/// records ([`RunMeta::of`]) or from the session-state run index.
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
    /// record with a `run_id` (with its `ts` as `started_at`). The session is the header's
    /// `session_id`, else that of the first `run.start` naming one, as the run index's fold
    /// takes it. `None` when no record names a run. [`RunMetaFold`] fed every record.
    pub fn from_records<R: AsRef<Record>>(records: &[R]) -> Option<RunMeta> {
        let mut fold = RunMetaFold::default();
        for r in records {
            fold.push(r.as_ref());
        }
        fold.finish()
    }

    /// The meta of a run read whole: [`RunMeta::from_records`], else the run id its file name
    /// gives (`<run_id>.jsonl[.zst]`, spec §2; a run read through a storage backend has no
    /// path), else empty.
    pub fn of(run: &RunRead) -> RunMeta {
        RunMeta::from_records(&run.records).unwrap_or_else(|| RunMeta::of_path(&run.path))
    }

    /// The meta of a run no record names: the run id of its file name, else empty.
    fn of_path(path: &Path) -> RunMeta {
        RunMeta {
            run_id: path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(parse_run_file_name)
                .map(|(id, _)| id.to_owned())
                .unwrap_or_default(),
            ..RunMeta::default()
        }
    }
}

/// [`RunMeta::from_records`] fed one record at a time, keeping only the few fields it needs:
/// the first record if it is a `header`, the first record naming a run, the first `run.start`
/// naming a session.
#[derive(Debug, Clone, Default)]
pub struct RunMetaFold {
    /// Whether a record was pushed.
    started: bool,
    /// The meta of the header, when the first record is one (its session as written).
    header: Option<RunMeta>,
    /// Run id and time of the first record naming a run.
    first_named: Option<(String, Timestamp)>,
    /// The session of the first `run.start` naming one.
    start_session: Option<String>,
}

impl RunMetaFold {
    /// Takes the next record of the run (in file order).
    pub fn push(&mut self, record: &Record) {
        if !self.started
            && let Record::Header(h) = record
        {
            self.header = Some(RunMeta {
                run_id: h.run_id.clone(),
                session_id: h.session_id.clone(),
                started_at: h.started_at.clone(),
            });
        }
        self.started = true;
        if self.first_named.is_none()
            && let Some(id) = record.run_id()
        {
            self.first_named = Some((id.to_owned(), record.ts().cloned().unwrap_or_default()));
        }
        if self.start_session.is_none()
            && let Record::RunStart(s) = record
        {
            self.start_session.clone_from(&s.session_id);
        }
    }

    /// The run id the meta has, once a record decided it (the header's, else the first record
    /// naming a run; later records never change it); `None` while no record did.
    pub fn run_id(&self) -> Option<&str> {
        match &self.header {
            Some(h) => Some(&h.run_id),
            None => self.first_named.as_ref().map(|(id, _)| id.as_str()),
        }
    }

    /// The meta ([`RunMeta::from_records`]); `None` when no record names a run.
    pub fn finish(self) -> Option<RunMeta> {
        if let Some(mut h) = self.header {
            if h.session_id.is_none() {
                h.session_id = self.start_session;
            }
            return Some(h);
        }
        let (run_id, started_at) = self.first_named?;
        Some(RunMeta {
            run_id,
            session_id: self.start_session,
            started_at,
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
    /// How a damaged line shows in a run: a torn tail, a line of the wrong shape, a corrupt
    /// line; `None` for damage whose record was recovered (a repaired line, a header note).
    pub fn of_damage(kind: DamageKind) -> Option<SkipKind> {
        match kind {
            DamageKind::TornTail => Some(SkipKind::TornTail),
            DamageKind::SchemaMismatch => Some(SkipKind::Shape),
            k if k.record_recovered() => None,
            _ => Some(SkipKind::Corrupt),
        }
    }

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

/// The lines of `run` that were not turned into records, in file order: its damage reports
/// that lost a line ([`SkipKind::of_damage`]), with their positions.
pub fn skipped_lines(run: &RunRead) -> Vec<SkippedLine> {
    run.damage
        .iter()
        .filter_map(|d| {
            SkipKind::of_damage(d.kind).map(|kind| SkippedLine {
                line: d.line,
                byte_offset: d.offset,
                kind,
            })
        })
        .collect()
}

/// Checks a run's structure (spec §3–4): a `header` first, every record of the same run,
/// skipped lines (a torn tail is a note: it is what a crash leaves), and a `run.end` at the
/// end (a note when missing: a crash or a run still going); then the reader's repairs (invalid
/// UTF-8, a lone surrogate, a header of another schema version) as
/// [`DiagnosticKind::RepairedLine`](crate::DiagnosticKind::RepairedLine) notes. Diagnostics
/// name the run by [`RunMeta::of`]. [`RunStructureCheck`] fed the run's records and damage.
pub fn verify_run(run: &RunRead) -> Vec<Diagnostic> {
    let mut check = RunStructureCheck::new(run.path.clone());
    for (i, r) in run.record_values().enumerate() {
        check.push_record(i, r);
    }
    for d in &run.damage {
        check.push_damage(d);
    }
    check.finish().1
}

/// [`verify_run`] fed one record or damage report at a time, for a run that is never held
/// whole. It keeps the run's meta fold ([`RunMetaFold`]) and the diagnostics; records are
/// looked at once and not kept. Records and damage reports may come interleaved as a reader
/// yields them: the order of the diagnostics is [`verify_run`]'s.
#[derive(Debug, Clone)]
pub struct RunStructureCheck {
    /// Where the run was read from: its file name names the run when no record does.
    path: PathBuf,
    meta: RunMetaFold,
    /// Records pushed.
    records: usize,
    /// Whether the first record is a `header`.
    header_first: bool,
    /// Whether a `run.end` was seen.
    run_end: bool,
    /// Second headers and foreign records, in record order.
    per_record: Vec<Diagnostic>,
    /// Lines lost, in file order.
    skipped: Vec<Diagnostic>,
    /// Repaired lines, in file order.
    repaired: Vec<Diagnostic>,
}

impl RunStructureCheck {
    /// A check of the run read from `path` (empty for a run of a storage backend).
    pub fn new(path: PathBuf) -> RunStructureCheck {
        RunStructureCheck {
            path,
            meta: RunMetaFold::default(),
            records: 0,
            header_first: false,
            run_end: false,
            per_record: Vec::new(),
            skipped: Vec::new(),
            repaired: Vec::new(),
        }
    }

    /// Takes record `index` (0-based; every record of the run, in file order).
    pub fn push_record(&mut self, index: usize, record: &Record) {
        if self.records == 0 {
            self.header_first = matches!(record, Record::Header(_));
        }
        self.records += 1;
        self.meta.push(record);
        if matches!(record, Record::RunEnd(_)) {
            self.run_end = true;
        }
        if index > 0 && matches!(record, Record::Header(_)) {
            self.per_record.push(
                Diagnostic::warning(DiagnosticKind::HeaderProblem, "a second header record")
                    .at(index),
            );
        }
        // The run's own id is decided by the first record naming one (or the header), so
        // it is known whenever a record names a run.
        if let (Some(own), Some(other)) = (
            self.meta.run_id().filter(|s| !s.is_empty()),
            record.run_id(),
        ) && own != other
        {
            self.per_record.push(
                Diagnostic::warning(
                    DiagnosticKind::ForeignRecord,
                    format!("{} record belongs to run {other}", record.kind()),
                )
                .at(index),
            );
        }
    }

    /// Findings of records so far (second headers, foreign records).
    pub(crate) fn found(&self) -> usize {
        self.per_record.len()
    }

    /// Takes the reader's next damage report (in file order).
    pub fn push_damage(&mut self, d: &Damage) {
        if let Some(kind) = SkipKind::of_damage(d.kind) {
            self.skipped.push(match kind {
                SkipKind::TornTail => Diagnostic::note(
                    DiagnosticKind::TornTail,
                    format!("line {} (byte offset {}) is cut short", d.line, d.offset),
                ),
                kind => Diagnostic::warning(
                    DiagnosticKind::SkippedLine,
                    format!(
                        "line {} (byte offset {}) was skipped ({})",
                        d.line,
                        d.offset,
                        kind.as_str()
                    ),
                ),
            });
        }
        if matches!(
            d.kind,
            DamageKind::InvalidUtf8
                | DamageKind::LoneSurrogate
                | DamageKind::NewerSchemaVersion
                | DamageKind::UnknownSchemaVersion
        ) {
            self.repaired.push(Diagnostic::note(
                DiagnosticKind::RepairedLine,
                format!("line {} (byte offset {}): {}", d.line, d.offset, d.message),
            ));
        }
    }

    /// The run's meta ([`RunMeta::of`]) and the diagnostics, in [`verify_run`]'s order:
    /// an empty run or a first record that is no header, second headers and foreign records,
    /// lost lines, a missing `run.end`, repaired lines.
    pub fn finish(self) -> (RunMeta, Vec<Diagnostic>) {
        let meta = self
            .meta
            .finish()
            .unwrap_or_else(|| RunMeta::of_path(&self.path));
        let run_id = (!meta.run_id.is_empty()).then_some(meta.run_id.as_str());
        let mut diags = Vec::new();
        if self.records == 0 {
            diags.push(Diagnostic::warning(
                DiagnosticKind::EmptyRun,
                "the run log holds no record",
            ));
        } else if !self.header_first {
            diags.push(
                Diagnostic::warning(
                    DiagnosticKind::HeaderProblem,
                    "the first record is not a header; the reference's readers do not see this run",
                )
                .at(0),
            );
        }
        diags.extend(self.per_record);
        diags.extend(self.skipped);
        if self.records > 0 && !self.run_end {
            diags.push(Diagnostic::note(
                DiagnosticKind::NoRunEnd,
                "the run has no run.end record (crashed or still running)",
            ));
        }
        let mut diags: Vec<Diagnostic> = diags.into_iter().map(|d| d.in_run(run_id)).collect();
        // Repairs name the run even by an empty id, as they always have.
        diags.extend(
            self.repaired
                .into_iter()
                .map(|d| d.in_run(Some(meta.run_id.as_str()))),
        );
        (meta, diags)
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use session_schema::{Damage, DamageKind, RunRead, parse_record};

    use super::*;
    use crate::DiagnosticKind;

    fn record(line: &str) -> Record {
        parse_record(line.as_bytes()).unwrap().value
    }

    fn damage(kind: DamageKind, line: u64, offset: u64) -> Damage {
        Damage {
            kind,
            offset,
            line,
            len: 3,
            message: kind.as_str().to_owned(),
            raw: None,
            excerpt: None,
        }
    }

    #[test]
    fn a_run_is_named_by_its_header_its_run_start_or_its_file() {
        let header = r#"{"type":"header","schema_version":1,"run_id":"r1","started_at":"2026-02-03T12:00:00.000Z"}"#;
        let start = r#"{"type":"run.start","run_id":"r1","session_id":"s1","ts":"2026-02-03T12:00:00.100Z","input":{"type":"text","text":"hi"}}"#;
        // A header without a session: the session of the run.start, as the run index takes it.
        let run = RunRead::from_records([record(header), record(start)]);
        let meta = RunMeta::of(&run);
        assert_eq!(
            (meta.run_id.as_str(), meta.session_id.as_deref()),
            ("r1", Some("s1"))
        );
        assert_eq!(meta.started_at.as_str(), "2026-02-03T12:00:00.000Z");
        // No header: the first record naming a run, with its time.
        let meta = RunMeta::of(&RunRead::from_records([record(start)]));
        assert_eq!(meta.started_at.as_str(), "2026-02-03T12:00:00.100Z");
        assert_eq!(meta.session_id.as_deref(), Some("s1"));
        // No record names a run: the file's name does.
        for (path, id) in [
            ("/s/2026/02/03/r9.jsonl", "r9"),
            ("/s/2026/02/03/r9.jsonl.zst", "r9"),
            ("/s/notes.txt", ""),
            ("", ""),
        ] {
            let run = RunRead {
                path: PathBuf::from(path),
                ..RunRead::default()
            };
            assert_eq!(RunMeta::of(&run).run_id, id, "{path}");
        }
    }

    #[test]
    fn lost_lines_are_skipped_and_repairs_are_notes() {
        let header = r#"{"type":"header","schema_version":1,"run_id":"r1","started_at":"2026-02-03T12:00:00.000Z"}"#;
        let mut run = RunRead::from_records([record(header)]);
        run.damage = vec![
            damage(DamageKind::CorruptLine, 2, 100),
            damage(DamageKind::InvalidUtf8, 3, 110),
            damage(DamageKind::SchemaMismatch, 4, 120),
            damage(DamageKind::NulRun, 5, 130),
            damage(DamageKind::DuplicateHeader, 6, 140),
            damage(DamageKind::TornTail, 7, 150),
        ];
        let skipped: Vec<(u64, u64, SkipKind)> = skipped_lines(&run)
            .iter()
            .map(|s| (s.line, s.byte_offset, s.kind))
            .collect();
        assert_eq!(
            skipped,
            [
                (2, 100, SkipKind::Corrupt),
                (4, 120, SkipKind::Shape),
                (5, 130, SkipKind::Corrupt),
                (7, 150, SkipKind::TornTail),
            ]
        );
        let found = verify_run(&run);
        let kinds: Vec<(DiagnosticKind, Option<&str>)> = found
            .iter()
            .map(|d| (d.kind, d.run_id.as_deref()))
            .collect();
        assert_eq!(
            kinds,
            [
                (DiagnosticKind::SkippedLine, Some("r1")),
                (DiagnosticKind::SkippedLine, Some("r1")),
                (DiagnosticKind::SkippedLine, Some("r1")),
                (DiagnosticKind::TornTail, Some("r1")),
                (DiagnosticKind::NoRunEnd, Some("r1")),
                (DiagnosticKind::RepairedLine, Some("r1")),
            ]
        );
        assert_eq!(found[5].message, "line 3 (byte offset 110): invalid_utf8");
    }
}
