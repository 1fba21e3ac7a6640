//! Cheap look-ups that do not read whole files: the header from the head of a run file, the
//! terminal state from its tail, so that listing runs costs a few reads per file.

use std::collections::VecDeque;
use std::fmt;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use session_schema::{ErrorInfo, Header, Record, RunOutcome, Timestamp, parse_record};

use crate::error::{JsonlError, Result};
use crate::reader::{
    Damage, DamageKind, Decoder, Item, Reader, ReaderOptions, is_archived, open_run_file,
};

/// Most bytes [`read_header`] reads: 64 KiB.
pub const HEAD_LIMIT: usize = 64 << 10;

/// The small header fields, read even when the header line is longer than [`HEAD_LIMIT`]
/// (the reference's header can carry a system prompt over 64 KiB; its small fields come first).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeaderFacts {
    /// The first line's `type` (`"header"` for a good run file).
    pub kind: Option<String>,
    /// `schema_version`.
    pub schema_version: Option<u64>,
    /// `run_id`.
    pub run_id: Option<String>,
    /// `session_id`.
    pub session_id: Option<String>,
    /// `started_at`.
    pub started_at: Option<Timestamp>,
}

/// The result of [`read_header`].
#[derive(Debug, Clone)]
pub struct HeadScan {
    /// The file read.
    pub path: PathBuf,
    /// Small fields of the first line (filled as far as they could be read).
    pub facts: HeaderFacts,
    /// The whole parsed header, when the first line is a header that fits in [`HEAD_LIMIT`].
    pub header: Option<Box<Header>>,
    /// Whether the first line ended within [`HEAD_LIMIT`] (false: only `facts` were read).
    pub complete: bool,
    /// Whether the first line is a record of any type (false for an empty file or a damaged
    /// first line; for a first line longer than [`HEAD_LIMIT`], whether its start has a `type`).
    pub first_line_is_record: bool,
    /// Damage of the first line: [`DamageKind::EmptyFile`], [`DamageKind::MissingHeader`],
    /// a corrupt or torn first line, a schema version other than 1, …
    pub damage: Vec<Damage>,
}

impl HeadScan {
    /// Whether the first line is a `header` record (possibly only partly read).
    pub fn is_header(&self) -> bool {
        self.header.is_some() || (!self.complete && self.facts.kind.as_deref() == Some("header"))
    }
}

struct FactsSeed<'a>(&'a mut HeaderFacts);

impl<'de> DeserializeSeed<'de> for FactsSeed<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for FactsSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "type" => self.0.kind = Some(map.next_value()?),
                "schema_version" => self.0.schema_version = Some(map.next_value()?),
                "run_id" => self.0.run_id = Some(map.next_value()?),
                "session_id" => self.0.session_id = Some(map.next_value()?),
                "started_at" => self.0.started_at = Some(map.next_value()?),
                "ts" if self.0.started_at.is_none() && self.0.kind.as_deref() != Some("header") => {
                    // Non-header records: `ts` stands in for `started_at` in tail scans.
                    self.0.started_at = Some(map.next_value()?);
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// Reads the top-level string fields of a JSON object prefix (which may be cut anywhere) as
/// far as they go.
pub fn scan_facts(prefix: &[u8]) -> HeaderFacts {
    let (text, _) = session_schema::trim_line(prefix);
    let mut facts = HeaderFacts::default();
    let mut de = serde_json::Deserializer::from_slice(text);
    // A cut prefix ends in an EOF error; the fields before it are kept.
    let _ = FactsSeed(&mut facts).deserialize(&mut de);
    facts
}

/// Reads the header of a run file (`.jsonl` or `.jsonl.zst`) from at most its first
/// [`HEAD_LIMIT`] bytes.
///
/// # Errors
/// [`JsonlError::Io`] when the file cannot be opened or read. A bad first line is reported in
/// [`HeadScan::damage`], not as an error.
pub fn read_header(path: &Path) -> Result<HeadScan> {
    read_head_block(path).map(|(head, _)| head)
}

/// [`read_header`], also returning the bytes read (the first [`HEAD_LIMIT`] bytes of the
/// file, decompressed for `.jsonl.zst`; fewer when the file is shorter), so that a caller can
/// read the records of the head block without reading it again.
///
/// # Errors
/// As [`read_header`].
pub fn read_head_block(path: &Path) -> Result<(HeadScan, Vec<u8>)> {
    let mut src = open_run_file(path)?;
    let slot = crate::tally::opened(path);
    let mut buf = vec![0u8; HEAD_LIMIT];
    let mut n = 0;
    while n < buf.len() {
        match src.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => {
                n += k;
                crate::tally::read(slot, k);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(JsonlError::io("read", path, e)),
        }
    }
    buf.truncate(n);
    let head = head_from_bytes(path, &buf, n < HEAD_LIMIT);
    Ok((head, buf))
}

fn head_from_bytes(path: &Path, buf: &[u8], at_eof: bool) -> HeadScan {
    let mut scan = HeadScan {
        path: path.to_owned(),
        facts: HeaderFacts::default(),
        header: None,
        complete: true,
        first_line_is_record: false,
        damage: Vec::new(),
    };
    // Skip blank lines before the first content (the reader does the same).
    let mut start = 0;
    let mut line_no = 1;
    let first = loop {
        match memchr::memchr(b'\n', &buf[start..]) {
            Some(i) if buf[start..start + i].trim_ascii().is_empty() => {
                start += i + 1;
                line_no += 1;
            }
            Some(i) => break Some((start + i, true)),
            None if at_eof => break Some((buf.len(), false)),
            None => break None,
        }
    };
    let Some((end, terminated)) = first else {
        scan.complete = false;
        scan.facts = scan_facts(&buf[start..]);
        scan.first_line_is_record = scan.facts.kind.is_some();
        if scan.facts.kind.as_deref() != Some("header") {
            scan.damage.push(Damage {
                kind: DamageKind::MissingHeader,
                offset: start as u64,
                line: line_no,
                len: 0,
                message: format!(
                    "first line (longer than {HEAD_LIMIT} bytes) is not a `header` record"
                ),
                raw: None,
                excerpt: None,
            });
        }
        return scan;
    };
    let mut dec = Decoder::new(&ReaderOptions::default());
    let mut items = VecDeque::new();
    dec.line(
        &buf[start..end],
        start as u64,
        line_no,
        terminated,
        &mut items,
    );
    if !terminated {
        dec.finish(end as u64, line_no + 1, &mut items);
    }
    for item in items {
        match item {
            Item::Record(r) => {
                scan.first_line_is_record = true;
                if let Record::Header(h) = r.parsed.value {
                    scan.facts = HeaderFacts {
                        kind: Some("header".to_owned()),
                        schema_version: Some(h.schema_version),
                        run_id: Some(h.run_id.clone()),
                        session_id: h.session_id.clone(),
                        started_at: Some(h.started_at.clone()),
                    };
                    scan.header = Some(Box::new(h));
                } else if scan.facts.kind.is_none() {
                    scan.facts.kind = Some(r.parsed.value.kind().to_owned());
                }
            }
            Item::Damage(d) => scan.damage.push(d),
        }
    }
    if scan.header.is_none() && scan.facts.kind.is_none() {
        scan.facts = scan_facts(&buf[start..end]);
    }
    scan
}

/// How a run ended, as far as its tail tells.
#[derive(Debug, Clone, PartialEq)]
pub enum RunEndState {
    /// The last record is `run.end`.
    Ended {
        /// `run.end.outcome` (`completed`, `cancelled`, `error`, or an unknown value).
        outcome: RunOutcome,
        /// `run.end.final`.
        final_text: Option<String>,
        /// The `run.error` just before it, if any.
        error: Option<ErrorInfo>,
    },
    /// The last record is `run.error` (the reference always follows it with `run.end`, so the
    /// process died right after).
    Errored {
        /// The error.
        error: ErrorInfo,
    },
    /// No `run.end`: the run is still being written or its process crashed. Tell the two apart
    /// with [`is_locked`](crate::is_locked).
    Open,
}

/// The result of [`terminal_state`].
#[derive(Debug, Clone, PartialEq)]
pub struct TerminalState {
    /// How the run ended.
    pub end: RunEndState,
    /// `type` of the last record that could be read.
    pub last_type: Option<String>,
    /// `ts` of the last record that could be read.
    pub last_ts: Option<Timestamp>,
    /// Whether the file ends in a line without `\n` that is not a complete record (false when
    /// [`undecided`](Self::undecided) before that line's start was found).
    pub torn_tail: bool,
    /// Bytes read to decide (the whole decompressed size for `.jsonl.zst`).
    pub bytes_read: u64,
    /// Whether the probe ran out before it reached the start of a line that decides: the last
    /// lines (after a torn tail or damaged lines) reach further back than [`TAIL_PROBE`]
    /// bytes from the end. `end` is then [`RunEndState::Open`] and `last_type`/`last_ts` are
    /// `None` because nothing was decided, not because the run is open;
    /// [`terminal_state_exact`] reads back as far as it takes. Never set by
    /// [`terminal_state_exact`].
    pub undecided: bool,
}

impl TerminalState {
    /// Whether the run has a `run.end` record.
    pub fn has_end(&self) -> bool {
        matches!(self.end, RunEndState::Ended { .. })
    }
}

/// Lines longer than this are not read whole by [`terminal_state`]; their type and `ts` come
/// from their first [`TAIL_PREFIX`] bytes.
pub const TAIL_LINE_LIMIT: u64 = 1 << 20;
/// Bytes of a long line's start read by [`terminal_state`].
pub const TAIL_PREFIX: usize = 4096;
const TAIL_BLOCK: u64 = 64 << 10;
/// Most bytes [`terminal_state`] reads from a plain run file: 128 KiB, two blocks of 64 KiB.
/// A run whose deciding line starts further back than this from the end is
/// [`TerminalState::undecided`].
pub const TAIL_PROBE: u64 = 2 * TAIL_BLOCK;
/// Damaged lines skipped at the end of a file before [`terminal_state`] gives up (→ `Open`).
const TAIL_MAX_DAMAGED: usize = 64;

/// Largest backward window [`terminal_state`] keeps in memory.
const TAIL_WINDOW_MAX: usize = 4 << 20;

/// A window over the file's tail that grows backwards block by block; every byte is read from
/// the file at most once while it stays in the window.
struct Tail<'a> {
    file: &'a mut File,
    bytes_read: u64,
    /// File offset of `win[0]`.
    win_lo: u64,
    win: Vec<u8>,
    /// Most bytes the window may cover ([`TAIL_PROBE`], or `u64::MAX` for an exact scan).
    budget: u64,
    /// Set when the window stopped growing because of `budget` (not at the file's start).
    exhausted: bool,
    /// Where the reads are counted ([`crate::tally`]).
    slot: Option<crate::tally::Slot>,
}

impl Tail<'_> {
    fn new(file: &mut File, len: u64, budget: u64, slot: Option<crate::tally::Slot>) -> Tail<'_> {
        Tail {
            file,
            bytes_read: 0,
            win_lo: len,
            win: Vec::new(),
            budget,
            exhausted: false,
            slot,
        }
    }

    fn read_at(&mut self, at: u64, buf: &mut [u8]) -> io::Result<()> {
        self.file.seek(SeekFrom::Start(at))?;
        self.file.read_exact(buf)?;
        self.bytes_read += buf.len() as u64;
        crate::tally::read(self.slot, buf.len());
        Ok(())
    }

    /// Extends the window one block further back; false at the start of the file, or when
    /// the budget is spent (`exhausted` then says so).
    fn extend(&mut self) -> io::Result<bool> {
        if self.win_lo == 0 {
            return Ok(false);
        }
        let lo = self.win_lo.saturating_sub(TAIL_BLOCK);
        if self.bytes_read.saturating_add(self.win_lo - lo) > self.budget {
            self.exhausted = true;
            return Ok(false);
        }
        let mut block = vec![0u8; to_usize(self.win_lo - lo)?];
        self.read_at(lo, &mut block)?;
        // Bytes at the top of an over-long window belong to a line whose start is still being
        // searched; only its prefix is needed later, so they can go.
        let keep = self
            .win
            .len()
            .min(TAIL_WINDOW_MAX.saturating_sub(block.len()));
        self.win.truncate(keep);
        block.extend_from_slice(&self.win);
        self.win = block;
        self.win_lo = lo;
        Ok(true)
    }

    fn win_hi(&self) -> u64 {
        self.win_lo + self.win.len() as u64
    }

    /// Start of the line that ends at `end` (exclusive): just after the previous `\n`, or 0;
    /// `None` when the budget ran out before it was found.
    fn line_start(&mut self, end: u64) -> io::Result<Option<u64>> {
        // Not yet searched: [win_lo, below).
        let mut below = end;
        loop {
            let hi = to_usize(below.min(self.win_hi()).saturating_sub(self.win_lo))?;
            if let Some(i) = memchr::memrchr(b'\n', &self.win[..hi]) {
                return Ok(Some(self.win_lo + i as u64 + 1));
            }
            below = self.win_lo;
            if !self.extend()? {
                return Ok((!self.exhausted).then_some(0));
            }
        }
    }

    /// Bytes `[start, end)`, from the window when it holds them.
    fn bytes(&mut self, start: u64, end: u64) -> io::Result<Vec<u8>> {
        if start >= self.win_lo && end <= self.win_hi() {
            let a = to_usize(start - self.win_lo)?;
            let b = to_usize(end - self.win_lo)?;
            return Ok(self.win[a..b].to_vec());
        }
        let mut buf = vec![0u8; to_usize(end - start)?];
        self.read_at(start, &mut buf)?;
        Ok(buf)
    }
}

/// A span of the file as an in-memory length (never more than a window or a line limit; an
/// error instead of a truncated length on a platform whose `usize` is narrower).
fn to_usize(n: u64) -> io::Result<usize> {
    usize::try_from(n).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("span of {n} bytes does not fit in memory"),
        )
    })
}

enum TailLine {
    Record(Box<Record>),
    Prefix(String, Option<Timestamp>),
    Bad,
}

fn tail_line(tail: &mut Tail<'_>, start: u64, end: u64) -> io::Result<TailLine> {
    let len = end - start;
    if len > TAIL_LINE_LIMIT {
        let buf = tail.bytes(start, start + TAIL_PREFIX as u64)?;
        let facts = scan_facts(&buf);
        return Ok(match facts.kind {
            Some(kind) => TailLine::Prefix(kind, facts.started_at),
            None => TailLine::Bad,
        });
    }
    let buf = tail.bytes(start, end)?;
    // After NUL padding, the piece behind the last NUL is the line's record.
    let piece = match memchr::memrchr(0, &buf) {
        Some(i) => &buf[i + 1..],
        None => &buf[..],
    };
    let parsed = parse_record(piece).or_else(|e| match e {
        session_schema::ParseError::InvalidUtf8 { .. } => {
            parse_record(String::from_utf8_lossy(piece).as_bytes())
        }
        e => Err(e),
    });
    Ok(match parsed {
        Ok(p) => TailLine::Record(Box::new(p.value)),
        Err(_) => TailLine::Bad,
    })
}

/// Finds how a run ended from the tail of its file, reading backwards from the end, at most
/// [`TAIL_PROBE`] (128 KiB) of a plain file.
///
/// Reads the last complete record (skipping a torn tail and damaged lines) and, when it is a
/// `run.end`, the records just before it for a `run.error`. Typically reads one 64 KiB block.
///
/// **When the tail cannot decide.** A line's type is known only from its start, and a line's
/// start only from the `\n` before it. When the line that decides (the last complete record)
/// starts more than [`TAIL_PROBE`] bytes before the end of the file — the run ends in a
/// record longer than that, such as a 32 MiB tool output, or in a torn tail and damaged lines
/// that long — the result is [`TerminalState::undecided`]: `end` [`RunEndState::Open`], no
/// `last_type`/`last_ts`, and at most [`TAIL_PROBE`] bytes read. A `run.end` or `run.error`
/// is that long only with a `final` text or error over 128 KiB; [`terminal_state_exact`]
/// decides those. When a `run.end` is found and the `run.error` before it lies beyond the
/// probe, the state is `Ended` without its error.
///
/// Archived `.jsonl.zst` files cannot be read backwards and are decompressed in full (their
/// decompressed bytes are counted in `bytes_read`).
///
/// # Errors
/// [`JsonlError::Io`] when the file cannot be opened or read.
pub fn terminal_state(path: &Path) -> Result<TerminalState> {
    terminal_state_within(path, TAIL_PROBE)
}

/// [`terminal_state`] without the probe's limit: reads backwards until a line decides (the
/// whole of a long last line's start search, keeping at most 4 MiB of it in memory). Never
/// [`TerminalState::undecided`]; for callers that act on the answer (housekeeping) and
/// accept the cost of a run ending in a very long record.
///
/// # Errors
/// As [`terminal_state`].
pub fn terminal_state_exact(path: &Path) -> Result<TerminalState> {
    terminal_state_within(path, u64::MAX)
}

/// [`terminal_state`] with a probe of at most `max_bytes` (rounded down to whole 64 KiB
/// blocks, at least one block) instead of [`TAIL_PROBE`]: for a caller with a read budget per
/// file (a cold listing reads the head block and one tail block).
///
/// # Errors
/// As [`terminal_state`].
pub fn terminal_state_probe(path: &Path, max_bytes: u64) -> Result<TerminalState> {
    terminal_state_within(path, max_bytes.max(TAIL_BLOCK))
}

fn terminal_state_within(path: &Path, budget: u64) -> Result<TerminalState> {
    if is_archived(path) {
        return terminal_state_streaming(path);
    }
    let mut file = File::open(path).map_err(|e| JsonlError::io("open", path, e))?;
    let slot = crate::tally::opened(path);
    let len = file
        .metadata()
        .map_err(|e| JsonlError::io("stat", path, e))?
        .len();
    let mut tail = Tail::new(&mut file, len, budget, slot);
    scan_tail(&mut tail, len).map_err(|e| JsonlError::io("read", path, e))
}

fn scan_tail(tail: &mut Tail<'_>, len: u64) -> io::Result<TerminalState> {
    let mut state = TerminalState {
        end: RunEndState::Open,
        last_type: None,
        last_ts: None,
        torn_tail: false,
        bytes_read: 0,
        undecided: false,
    };
    if len == 0 {
        return Ok(state);
    }
    tail.extend()?;
    let Some(&last) = tail.win.last() else {
        return Ok(state);
    };
    let mut line_end = if last == b'\n' { len - 1 } else { len };
    let mut unterminated = last != b'\n';
    let mut damaged = 0;
    let mut found_end = false;
    let mut looked_back = 0;
    loop {
        let Some(start) = tail.line_start(line_end)? else {
            // The probe ran out inside a line. Once a `run.end` is found the state stands
            // (only its `run.error` was still looked for); before that nothing is decided.
            if !found_end {
                state.undecided = true;
                state.last_type = None;
                state.last_ts = None;
            }
            break;
        };
        let line = if start == line_end {
            None
        } else {
            Some(tail_line(tail, start, line_end)?)
        };
        match line {
            None => {}
            Some(TailLine::Bad) => {
                if unterminated {
                    state.torn_tail = true;
                }
                damaged += 1;
                if damaged > TAIL_MAX_DAMAGED {
                    break;
                }
            }
            Some(TailLine::Prefix(kind, ts)) => {
                if found_end {
                    break;
                }
                state.last_type = Some(kind);
                state.last_ts = ts;
                break;
            }
            Some(TailLine::Record(rec)) => {
                if found_end {
                    if let Record::RunError(e) = *rec {
                        if let RunEndState::Ended { error, .. } = &mut state.end {
                            *error = Some(e.error);
                        }
                        break;
                    }
                    // Look at most two records back (a `run.status` may sit in between).
                    looked_back += 1;
                    if looked_back >= 2 {
                        break;
                    }
                } else {
                    state.last_type = Some(rec.kind().to_owned());
                    state.last_ts = rec.ts().cloned();
                    match *rec {
                        Record::RunEnd(end) => {
                            state.end = RunEndState::Ended {
                                outcome: end.outcome,
                                final_text: end.final_text,
                                error: None,
                            };
                            found_end = true;
                        }
                        Record::RunError(e) => {
                            state.end = RunEndState::Errored { error: e.error };
                            break;
                        }
                        _ => break,
                    }
                }
            }
        }
        unterminated = false;
        if start == 0 {
            break;
        }
        line_end = start - 1;
    }
    state.bytes_read = tail.bytes_read;
    Ok(state)
}

fn terminal_state_streaming(path: &Path) -> Result<TerminalState> {
    let mut reader = Reader::new(
        open_run_file(path)?,
        ReaderOptions {
            expect_header: false,
            ..ReaderOptions::default()
        },
    );
    reader.tally = crate::tally::opened(path);
    let mut state = TerminalState {
        end: RunEndState::Open,
        last_type: None,
        last_ts: None,
        torn_tail: false,
        bytes_read: 0,
        undecided: false,
    };
    let mut prev_error: Option<ErrorInfo> = None;
    while let Some(item) = reader.next() {
        let item = item.map_err(|source| JsonlError::Read {
            path: path.to_owned(),
            line: reader.next_line(),
            offset: reader.complete_offset(),
            source,
        })?;
        match item {
            Item::Damage(d) => state.torn_tail = d.kind == DamageKind::TornTail,
            Item::Record(r) => {
                state.torn_tail = false;
                state.last_type = Some(r.parsed.value.kind().to_owned());
                state.last_ts = r.parsed.value.ts().cloned();
                match r.parsed.value {
                    Record::RunEnd(end) => {
                        state.end = RunEndState::Ended {
                            outcome: end.outcome,
                            final_text: end.final_text,
                            error: prev_error.take(),
                        };
                    }
                    Record::RunError(e) => {
                        prev_error = Some(e.error.clone());
                        state.end = RunEndState::Errored { error: e.error };
                    }
                    Record::RunStatus(_) => {}
                    _ => {
                        prev_error = None;
                        state.end = RunEndState::Open;
                    }
                }
            }
        }
    }
    state.bytes_read = reader.complete_offset();
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: &str = r#"{"type":"header","schema_version":1,"run_id":"r","session_id":"s","started_at":"2026-02-03T12:00:00.000Z"}"#;
    const ST: &str = r#"{"type":"run.status","run_id":"r","ts":"2026-02-03T12:00:01.000Z","status":"error","message":"boom"}"#;
    const ERR: &str = r#"{"type":"run.error","run_id":"r","ts":"2026-02-03T12:00:02.000Z","error":{"name":"E","message":"boom"}}"#;
    const END: &str =
        r#"{"type":"run.end","run_id":"r","ts":"2026-02-03T12:00:03.000Z","outcome":"error"}"#;

    fn tail_of(content: &[u8]) -> TerminalState {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.jsonl");
        std::fs::write(&p, content).unwrap();
        terminal_state(&p).unwrap()
    }

    #[test]
    fn ended_with_error() {
        let t = tail_of(format!("{H}\n{ST}\n{ERR}\n{END}\n").as_bytes());
        let RunEndState::Ended { outcome, error, .. } = &t.end else {
            panic!("{t:?}")
        };
        assert_eq!(outcome.as_str(), "error");
        assert_eq!(error.as_ref().map(|e| e.message.as_str()), Some("boom"));
        assert_eq!(
            t.last_ts.as_ref().map(Timestamp::as_str),
            Some("2026-02-03T12:00:03.000Z")
        );
    }

    #[test]
    fn error_without_end_torn_tail_and_nul_padding() {
        let t = tail_of(format!("{H}\n{ERR}\n{}", &END[..30]).as_bytes());
        assert!(t.torn_tail);
        assert!(matches!(t.end, RunEndState::Errored { .. }));

        let mut bytes = format!("{H}\n{ST}\n").into_bytes();
        bytes.extend_from_slice(&[0u8; 50]);
        let t = tail_of(&bytes);
        assert_eq!(t.last_type.as_deref(), Some("run.status"));
        assert_eq!(t.end, RunEndState::Open);

        // A record written after NUL padding on the same line is found.
        let mut bytes = format!("{H}\n").into_bytes();
        bytes.extend_from_slice(&[0u8; 50]);
        bytes.extend_from_slice(format!("{END}\n").as_bytes());
        assert!(tail_of(&bytes).has_end());

        assert_eq!(tail_of(b"").end, RunEndState::Open);
    }

    fn exact_tail_of(content: &[u8]) -> TerminalState {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.jsonl");
        std::fs::write(&p, content).unwrap();
        terminal_state_exact(&p).unwrap()
    }

    fn tool_output(len: usize) -> String {
        format!(
            r#"{{"type":"tool.output","run_id":"r","ts":"2026-02-03T12:00:09.000Z","tool":"t","tool_call_id":"c","result_raw":"{}"}}"#,
            "x".repeat(len)
        )
    }

    #[test]
    fn a_32_mib_last_line_is_undecided_within_the_probe() {
        let big = tool_output(32 << 20);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.jsonl");
        std::fs::write(&p, format!("{H}\n{ERR}\n{big}\n")).unwrap();
        let counter = crate::count_file_reads();
        let t = terminal_state(&p).unwrap();
        assert_eq!(
            t,
            TerminalState {
                end: RunEndState::Open,
                last_type: None,
                last_ts: None,
                torn_tail: false,
                bytes_read: TAIL_PROBE,
                undecided: true,
            }
        );
        assert_eq!(counter.files_opened(), 1);
        assert_eq!(counter.max_bytes_per_file(), TAIL_PROBE);
        // The exact scan reads back to the line's start.
        let exact = terminal_state_exact(&p).unwrap();
        assert!(!exact.undecided);
        assert_eq!(exact.last_type.as_deref(), Some("tool.output"));
        assert!(exact.bytes_read > 32 << 20, "{}", exact.bytes_read);

        // A last line that long without its `\n`: undecided too (whether it is a complete
        // record cannot be told without its start).
        std::fs::write(&p, format!("{H}\n{}", &big[..big.len() - 1])).unwrap();
        let t = terminal_state(&p).unwrap();
        assert!(t.undecided && !t.torn_tail, "{t:?}");
        assert_eq!(t.bytes_read, TAIL_PROBE);
    }

    #[test]
    fn short_records_after_a_32_mib_line_decide_within_one_block() {
        let big = tool_output(32 << 20);
        // `run.end` after the long line: decided; the `run.error` search stops at the probe.
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.jsonl");
        std::fs::write(&p, format!("{H}\n{big}\n{ST}\n{END}\n")).unwrap();
        let counter = crate::count_file_reads();
        let t = terminal_state(&p).unwrap();
        assert!(!t.undecided);
        let RunEndState::Ended { outcome, error, .. } = &t.end else {
            panic!("{t:?}")
        };
        assert_eq!((outcome.as_str(), error), ("error", &None));
        assert_eq!(t.last_type.as_deref(), Some("run.end"));
        assert_eq!(t.bytes_read, TAIL_PROBE);
        assert_eq!(counter.max_bytes_per_file(), TAIL_PROBE);

        // `run.error` after it: decided from the first block.
        std::fs::write(&p, format!("{H}\n{big}\n{ERR}\n")).unwrap();
        let t = terminal_state(&p).unwrap();
        assert!(matches!(t.end, RunEndState::Errored { .. }), "{t:?}");
        assert_eq!(t.bytes_read, TAIL_BLOCK);

        // A 100 KiB last line starts within the probe: decided from its prefix.
        let t = tail_of(format!("{H}\n{}\n", tool_output(100 << 10)).as_bytes());
        assert!(!t.undecided);
        assert_eq!(t.last_type.as_deref(), Some("tool.output"));
        assert!(t.bytes_read <= TAIL_PROBE, "{}", t.bytes_read);
    }

    #[test]
    fn long_last_line_is_read_from_its_prefix() {
        let big = tool_output(3 << 20);
        let t = exact_tail_of(format!("{H}\n{big}\n").as_bytes());
        assert_eq!(t.last_type.as_deref(), Some("tool.output"));
        assert_eq!(
            t.last_ts.as_ref().map(Timestamp::as_str),
            Some("2026-02-03T12:00:09.000Z")
        );
        assert_eq!(t.end, RunEndState::Open);
        // The backward search reads the line once; the prefix comes from the window.
        assert!(t.bytes_read < (4 << 20) + TAIL_BLOCK, "{}", t.bytes_read);
    }

    #[test]
    fn header_scan_reports_first_line_damage() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.jsonl");
        for (content, kind) in [
            (String::new(), DamageKind::EmptyFile),
            (format!("{ST}\n{H}\n"), DamageKind::MissingHeader),
            (H[..40].to_owned(), DamageKind::TornTail),
        ] {
            std::fs::write(&p, &content).unwrap();
            let head = read_header(&p).unwrap();
            assert!(head.header.is_none());
            assert!(
                head.damage.iter().any(|d| d.kind == kind),
                "{content:?}: {:?}",
                head.damage
            );
        }
        std::fs::write(&p, format!("\u{feff}{H}\r\n")).unwrap();
        let head = read_header(&p).unwrap();
        assert!(head.header.is_some() && head.damage.is_empty());
        assert_eq!(head.facts.session_id.as_deref(), Some("s"));
    }
}
