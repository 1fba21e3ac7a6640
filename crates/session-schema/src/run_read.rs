//! A run log read whole ([`RunRead`]) and its parts: the records a tolerant reader recovered
//! ([`RecordLine`], with their positions) and its reports on everything else ([`Damage`],
//! [`DamageKind`]); [`Item`] is one of either, as a reader yields them (spec §3–4, §8–9).
//!
//! They describe parsed stored bytes, so they live here, below every crate that reads or
//! replays a run: session-jsonl's `Reader` produces them (and re-exports them at their old
//! paths), storage backends return them, and session-replay's pure core takes a [`RunRead`]
//! as it is, with no second type holding a run's records. Reading itself (files, archives,
//! buffers) stays in session-jsonl; [`RunRead::from_reader`] collects any [`ItemSource`].

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::{Parsed, Record};

/// What is wrong with a part of a run file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DamageKind {
    /// The last line has no `\n` and does not parse: a write cut short by a crash.
    TornTail,
    /// A line that is not JSON (garbage, a record glued to a torn fragment).
    CorruptLine,
    /// The start of a record cut short by a crash and later sealed with `\n` (by
    /// session-jsonl's `seal_torn_tail`, `sessions repair`, or
    /// session-jsonl's `RunWriter::open_append`): a `\n`-terminated line whose
    /// text is an incomplete JSON object (the parser reaches the end of the line inside it).
    /// Writers never produce such a line otherwise: they write whole lines and cut a failed
    /// write back, and a writer that does not seal (the reference) glues its next record to
    /// the fragment, which is a [`DamageKind::CorruptLine`]. The fragment is kept; the record it
    /// began is lost. Reported as a note, not a problem, by `sessions verify`.
    SealedFragment,
    /// Valid JSON that does not fit the record schema; [`Damage::raw`] holds it.
    SchemaMismatch,
    /// A run of NUL bytes (unwritten blocks after a crash); text around it is still read.
    NulRun,
    /// Bytes that are not UTF-8 in a line that parses once decoded lossily (U+FFFD); its
    /// record follows this report. A line that does not parse even then gets one report of
    /// the parse failure's kind instead, never two for one line.
    InvalidUtf8,
    /// A lone UTF-16 surrogate escape (`"\ud83c"`), repaired; the record follows this report.
    LoneSurrogate,
    /// A line longer than the reader's `max_line_len`, skipped unread.
    OversizedLine,
    /// The file holds no content at all (zero bytes or only whitespace).
    EmptyFile,
    /// The first record is not a `header` (or there is no record at all): the reference's
    /// readers would not see this run.
    MissingHeader,
    /// The header's `schema_version` is newer than this crate's; records are read best-effort.
    NewerSchemaVersion,
    /// The header's `schema_version` is older than 1 (never written by any known version).
    UnknownSchemaVersion,
    /// A second `header` record after the first one (the record is still yielded).
    DuplicateHeader,
}

impl DamageKind {
    /// Stable snake_case name (used in test expectations and CLI output).
    pub fn as_str(self) -> &'static str {
        match self {
            DamageKind::TornTail => "torn_tail",
            DamageKind::CorruptLine => "corrupt_line",
            DamageKind::SealedFragment => "sealed_fragment",
            DamageKind::SchemaMismatch => "schema_mismatch",
            DamageKind::NulRun => "nul_run",
            DamageKind::InvalidUtf8 => "invalid_utf8",
            DamageKind::LoneSurrogate => "lone_surrogate",
            DamageKind::OversizedLine => "oversized_line",
            DamageKind::EmptyFile => "empty_file",
            DamageKind::MissingHeader => "missing_header",
            DamageKind::NewerSchemaVersion => "newer_schema_version",
            DamageKind::UnknownSchemaVersion => "unknown_schema_version",
            DamageKind::DuplicateHeader => "duplicate_header",
        }
    }

    /// Whether the record the report is about is still yielded (right after the report):
    /// repaired encodings, a header with another schema version, a duplicate header.
    pub fn record_recovered(self) -> bool {
        matches!(
            self,
            DamageKind::InvalidUtf8
                | DamageKind::LoneSurrogate
                | DamageKind::NewerSchemaVersion
                | DamageKind::UnknownSchemaVersion
                | DamageKind::DuplicateHeader
        )
    }
}

impl fmt::Display for DamageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One damage report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// What is wrong.
    pub kind: DamageKind,
    /// Byte offset of the damaged bytes in the (decompressed) file.
    pub offset: u64,
    /// 1-based physical line number.
    pub line: u64,
    /// Number of damaged bytes (without the `\n`); 0 for file-level reports.
    pub len: u64,
    /// Lower-case explanation.
    pub message: String,
    /// The JSON text, for [`DamageKind::SchemaMismatch`] (lossy for invalid UTF-8).
    pub raw: Option<String>,
    /// The first bytes of a damaged line (lossy UTF-8, at most session-jsonl's `EXCERPT_LEN` bytes).
    pub excerpt: Option<String>,
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at line {}, byte offset {}: {}",
            self.kind, self.line, self.offset, self.message
        )
    }
}

/// One recovered record with its position.
#[derive(Debug, Clone)]
pub struct RecordLine {
    /// The record and what was repaired in it.
    pub parsed: Parsed<Record>,
    /// Byte offset of the line (of the piece after a NUL run) in the (decompressed) file.
    pub offset: u64,
    /// 1-based physical line number.
    pub line: u64,
    /// Length of the line in bytes, without the `\n`.
    pub len: u64,
    /// The line's bytes (without `\n`) when the reader keeps raw lines (session-jsonl's `ReaderOptions::keep_raw`).
    /// [`Parsed::to_json`] gives the same bytes back for any line without BOM or CR.
    pub raw: Option<Vec<u8>>,
}

impl RecordLine {
    /// The record.
    pub fn record(&self) -> &Record {
        &self.parsed.value
    }
}

/// What a run-log reader (session-jsonl's `Reader`) yields.
// Records are the common case; boxing them would cost an allocation per line.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Item {
    /// A recovered record.
    Record(RecordLine),
    /// A damage report.
    Damage(Damage),
}

impl Item {
    /// The record, if this is one.
    pub fn as_record(&self) -> Option<&RecordLine> {
        match self {
            Item::Record(r) => Some(r),
            Item::Damage(_) => None,
        }
    }

    /// The damage report, if this is one.
    pub fn as_damage(&self) -> Option<&Damage> {
        match self {
            Item::Damage(d) => Some(d),
            Item::Record(_) => None,
        }
    }
}

/// A run log read whole: every recovered record with its position, every damage report, and
/// how many bytes were read. The one type for "a run read whole" in the workspace: built by
/// session-jsonl's `read_run` / `read_run_with` for a run file, by session-storage's
/// `RunCatalogue::read_run` for a run of any storage backend, by any caller streaming a
/// reader ([`RunRead::from_reader`]), or from records alone ([`RunRead::from_records`]);
/// session-replay's pure functions take it as it is (spec §3–4, §8–9).
///
/// Byte-exact: each [`RecordLine`] keeps its offset, line, length and (with session-jsonl's
/// `ReaderOptions::keep_raw`) its bytes; damage keeps its kind, offset, line and length.
/// Memory grows with the run; stream with session-jsonl's `Reader` instead for large runs.
#[derive(Debug, Clone, Default)]
pub struct RunRead {
    /// Where the run was read from: the file for session-jsonl's `read_run`; for a run read through a
    /// storage backend, the name its caller gave (session-storage's `RunCatalogue::read_run`
    /// leaves it empty: a backend names runs by id, not by path).
    pub path: PathBuf,
    /// Recovered records in file order.
    pub records: Vec<RecordLine>,
    /// Damage reports in file order.
    pub damage: Vec<Damage>,
    /// Bytes read: the length of the file (of its decompressed content for `.jsonl.zst`),
    /// every byte counted once whether it belonged to a record, damage or a blank line. For a
    /// reader started at a later offset, the offset where reading ended.
    pub bytes: u64,
}

impl RunRead {
    /// Reads every item `reader` still yields into a [`RunRead`] named `path`: records and
    /// damage in file order, [`bytes`](RunRead::bytes) the reader's
    /// [`complete_offset`](ItemSource::complete_offset) at the end. The loop every "read a run
    /// whole" shares (a file, a storage backend's byte stream); session-jsonl's `Reader` is an
    /// [`ItemSource`].
    ///
    /// # Errors
    /// The first read failure; `reader` is left where it stopped, so the caller can name the
    /// line and byte offset in its error (session-jsonl's `Reader::next_line` and
    /// `Reader::complete_offset`).
    pub fn from_reader<S: ItemSource + ?Sized>(
        path: PathBuf,
        reader: &mut S,
    ) -> io::Result<RunRead> {
        let mut out = RunRead {
            path,
            ..RunRead::default()
        };
        for item in &mut *reader {
            match item? {
                Item::Record(r) => out.records.push(r),
                Item::Damage(d) => out.damage.push(d),
            }
        }
        out.bytes = reader.complete_offset();
        Ok(out)
    }

    /// A run from records alone, as if they were written one per line in this order by a
    /// writer (spec §3): record `i` is on line `i + 1`, its offset and length those of its
    /// compact JSON ([`Parsed::to_json`]) followed by `\n`; no damage, no raw bytes, `path`
    /// empty. For records parsed any other way (tests, an embedder's own store).
    pub fn from_records(records: impl IntoIterator<Item = Record>) -> RunRead {
        let mut out = RunRead::default();
        for (line, record) in (1u64..).zip(records) {
            let parsed = Parsed::clean(record);
            // Serializing a record fails only for raw JSON built by hand that is not JSON;
            // such a record still counts as one line, of unknown length.
            let len = parsed.to_json().map_or(0, |j| j.len() as u64);
            out.records.push(RecordLine {
                parsed,
                offset: out.bytes,
                line,
                len,
                raw: None,
            });
            out.bytes += len + 1;
        }
        out
    }

    /// The record at `index` (in file order).
    pub fn record(&self, index: usize) -> Option<&Record> {
        self.records.get(index).map(RecordLine::record)
    }

    /// The records in file order, without their positions.
    pub fn record_values(&self) -> impl DoubleEndedIterator<Item = &Record> + ExactSizeIterator {
        self.records.iter().map(RecordLine::record)
    }

    /// The 1-based line of record `index`.
    pub fn line_of(&self, index: usize) -> Option<u64> {
        self.records.get(index).map(|r| r.line)
    }

    /// Whether the log ends in a torn line ([`DamageKind::TornTail`]).
    pub fn has_torn_tail(&self) -> bool {
        self.damage.iter().any(|d| d.kind == DamageKind::TornTail)
    }

    /// Whether the run has a `run.end` record.
    pub fn has_run_end(&self) -> bool {
        self.record_values().any(|r| matches!(r, Record::RunEnd(_)))
    }
}

/// A source of reader [`Item`]s that knows where its last complete line ends: what
/// [`RunRead::from_reader`] collects. session-jsonl's `Reader` implements it.
pub trait ItemSource: Iterator<Item = io::Result<Item>> {
    /// Byte offset just past the last complete line yielded so far (for a reader started at
    /// an offset, counted from the start of the file).
    fn complete_offset(&self) -> u64;
}

impl AsRef<Record> for RecordLine {
    fn as_ref(&self) -> &Record {
        &self.parsed.value
    }
}

impl AsRef<Record> for Record {
    fn as_ref(&self) -> &Record {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_record;

    const HEADER: &str = r#"{"type":"header","schema_version":1,"run_id":"r1","started_at":"2026-02-03T12:00:00.000Z"}"#;
    const END: &str =
        r#"{"type":"run.end","run_id":"r1","ts":"2026-02-03T12:00:01.000Z","outcome":"completed"}"#;

    fn record(line: &str) -> Record {
        parse_record(line.as_bytes()).unwrap().value
    }

    #[test]
    fn records_alone_sit_where_a_writer_would_put_them() {
        let run = RunRead::from_records([record(HEADER), record(END)]);
        let positions: Vec<(u64, u64, u64)> = run
            .records
            .iter()
            .map(|r| (r.line, r.offset, r.len))
            .collect();
        let (h, e) = (HEADER.len() as u64, END.len() as u64);
        assert_eq!(positions, [(1, 0, h), (2, h + 1, e)]);
        assert_eq!(run.bytes, h + 1 + e + 1);
        assert!(run.damage.is_empty() && run.path.as_os_str().is_empty());
        assert!(run.has_run_end() && !run.has_torn_tail());
        assert_eq!(run.line_of(1), Some(2));
        assert_eq!(run.line_of(2), None);
        assert_eq!(run.record(0).map(Record::kind), Some("header"));
    }

    /// A source that yields given items, then fails once, and says where its last line ended.
    struct Items {
        items: std::vec::IntoIter<io::Result<Item>>,
        offset: u64,
    }

    impl Iterator for Items {
        type Item = io::Result<Item>;
        fn next(&mut self) -> Option<Self::Item> {
            let item = self.items.next()?;
            if let Ok(Item::Record(r)) = &item {
                self.offset = r.offset + r.len + 1;
            }
            Some(item)
        }
    }

    impl ItemSource for Items {
        fn complete_offset(&self) -> u64 {
            self.offset
        }
    }

    #[test]
    fn from_reader_collects_in_order_and_stops_at_the_first_failure() {
        let whole = RunRead::from_records([record(HEADER), record(END)]);
        let torn = Damage {
            kind: DamageKind::TornTail,
            offset: whole.bytes,
            line: 3,
            len: 4,
            message: "cut".into(),
            raw: None,
            excerpt: None,
        };
        let mut items = Items {
            items: vec![
                Ok(Item::Record(whole.records[0].clone())),
                Ok(Item::Record(whole.records[1].clone())),
                Ok(Item::Damage(torn.clone())),
            ]
            .into_iter(),
            offset: 0,
        };
        let read = RunRead::from_reader(PathBuf::from("r1.jsonl"), &mut items).unwrap();
        assert_eq!(read.records.len(), 2);
        assert_eq!(read.damage, [torn]);
        assert_eq!(read.bytes, whole.bytes);
        assert!(read.has_torn_tail());

        let mut failing = Items {
            items: vec![
                Ok(Item::Record(whole.records[0].clone())),
                Err(io::Error::other("disk")),
                Ok(Item::Record(whole.records[1].clone())),
            ]
            .into_iter(),
            offset: 0,
        };
        let err = RunRead::from_reader(PathBuf::new(), &mut failing).unwrap_err();
        assert_eq!(err.to_string(), "disk");
        // Left where it stopped: the line after the failure is still to come.
        assert_eq!(failing.complete_offset(), HEADER.len() as u64 + 1);
        assert!(failing.next().is_some());
    }

    #[test]
    fn a_run_read_lends_its_records_to_slices_of_either_kind() {
        fn kinds<R: AsRef<Record>>(records: &[R]) -> Vec<&str> {
            records.iter().map(|r| r.as_ref().kind()).collect()
        }
        let run = RunRead::from_records([record(HEADER), record(END)]);
        let plain: Vec<Record> = run.record_values().cloned().collect();
        assert_eq!(kinds(&run.records), ["header", "run.end"]);
        assert_eq!(kinds(&plain), kinds(&run.records));
    }

    #[test]
    fn run_file_names() {
        use crate::parse_run_file_name;
        assert_eq!(parse_run_file_name("r1.jsonl"), Some(("r1", false)));
        assert_eq!(parse_run_file_name("r1.jsonl.zst"), Some(("r1", true)));
        assert_eq!(parse_run_file_name(".jsonl"), None);
        assert_eq!(parse_run_file_name("r1.json"), None);
    }
}
