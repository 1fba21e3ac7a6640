//! The crash-tolerant streaming reader (spec §3–4, §8–9; compat notes §2.12).
//!
//! A [`Reader`] turns any byte stream into [`Item`]s: every record that can be recovered, and a
//! [`Damage`] report for everything that cannot be taken at face value. Only I/O failures are
//! `Err`. Memory stays bounded by the longest line ([`ReaderOptions::max_line_len`]); a longer
//! line is skipped without being buffered and reported as [`DamageKind::OversizedLine`].
//!
//! How lines are classified:
//!
//! | line | items |
//! |---|---|
//! | parses as a record | [`Item::Record`] |
//! | last line, no `\n`, parses | [`Item::Record`] (the bytes are exactly what the writer wrote; a later writer seals it with `\n`) |
//! | last line, no `\n`, does not parse | [`DamageKind::TornTail`] |
//! | the start of a record cut short, then sealed with `\n` (an incomplete JSON object) | [`DamageKind::SealedFragment`] |
//! | not JSON (garbage, a record glued to a fragment) | [`DamageKind::CorruptLine`] |
//! | JSON of the wrong shape | [`DamageKind::SchemaMismatch`] (raw JSON in [`Damage::raw`]) |
//! | NUL bytes | one [`DamageKind::NulRun`] per run of NULs; the pieces between them are read as lines of their own, so a record written after NUL padding is recovered |
//! | invalid UTF-8, parses once decoded lossily (U+FFFD) | [`DamageKind::InvalidUtf8`], then the record |
//! | invalid UTF-8, does not parse even decoded lossily | one report as for any line that does not parse ([`DamageKind::TornTail`], [`DamageKind::CorruptLine`] or [`DamageKind::SchemaMismatch`]); its message names the encoding error |
//! | lone surrogate escape | [`DamageKind::LoneSurrogate`], then the record (repaired, see [`session_schema::surrogate`]) |
//! | longer than `max_line_len` | [`DamageKind::OversizedLine`] |
//! | blank (whitespace only) | nothing |
//!
//! File-level reports: [`DamageKind::EmptyFile`] (no content at all),
//! [`DamageKind::MissingHeader`] (the first record is not a `header`),
//! [`DamageKind::NewerSchemaVersion`] / [`DamageKind::UnknownSchemaVersion`] (the header's
//! `schema_version` is not 1; the rest is read best-effort, spec §8) and
//! [`DamageKind::DuplicateHeader`]. A UTF-8 BOM and CRLF line endings are accepted silently.

use std::collections::VecDeque;
use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use session_schema::{ParseError, Parsed, Record, SCHEMA_VERSION, parse_record, parse_record_str};

// The run read whole and its parts are session-schema's (below session-replay's pure core,
// which takes them as they are); re-exported here at their old paths.
pub use session_schema::{Damage, DamageKind, Item, RecordLine, RunRead};

use crate::error::{JsonlError, Result};
use crate::layout::ARCHIVED_EXT;
use crate::tally::count_buffer_bytes;

/// Default [`ReaderOptions::max_line_len`]: 256 MiB.
pub const DEFAULT_MAX_LINE_LEN: usize = 256 << 20;
/// Default [`ReaderOptions::read_size`]: 4 MiB (large reads keep the copy of a partial last
/// line to the buffer front rare).
pub const DEFAULT_READ_SIZE: usize = 4 << 20;
/// First size of a [`Reader`]'s buffer when the input's length is not known: 16 KiB. The
/// buffer doubles up to [`ReaderOptions::read_size`] while the input keeps coming, so a small
/// run file (a few KB) never pays for zero-filling a `read_size` buffer.
pub const INITIAL_READ_BUFFER: usize = 16 << 10;

/// Longest excerpt of a damaged line kept in [`Damage::excerpt`], in bytes.
pub const EXCERPT_LEN: usize = 160;

/// Reader settings. Build with `ReaderOptions { max_line_len: 1 << 20, ..Default::default() }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReaderOptions {
    /// Longest line (bytes, without its `\n`) that is parsed; longer lines are skipped without
    /// buffering them and reported as [`DamageKind::OversizedLine`]. Memory use is about this
    /// plus [`read_size`](Self::read_size).
    pub max_line_len: usize,
    /// Most bytes requested from the source per `read`. The buffer starts small (the file's
    /// length when [`Reader::open_with`] knows it, else [`INITIAL_READ_BUFFER`]) and doubles up
    /// to this size while the input keeps coming (further only for a longer line).
    pub read_size: usize,
    /// Keep each record's line bytes in [`RecordLine::raw`] (costs one copy per line).
    pub keep_raw: bool,
    /// Report [`DamageKind::MissingHeader`] / [`DamageKind::EmptyFile`] (run files); turn off to
    /// read a stream that starts mid-file.
    pub expect_header: bool,
    /// Skim `llm.request` lines written as the writers write them (`{"type":"llm.request",`
    /// first, `"input":{"messages":[` the first key of `input`): their messages array is
    /// checked for structure (strings closed, brackets balanced) but not decoded, and the
    /// record comes with an empty `input.messages`; every other field is parsed as usual.
    /// For an index, which needs counts, models and times, not conversations. Grammar faults
    /// inside the messages that keep brackets balanced go unreported (see [`crate::skim`]);
    /// off by default.
    pub skim_llm_requests: bool,
}

impl Default for ReaderOptions {
    fn default() -> Self {
        ReaderOptions {
            max_line_len: DEFAULT_MAX_LINE_LEN,
            read_size: DEFAULT_READ_SIZE,
            keep_raw: false,
            expect_header: true,
            skim_llm_requests: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HeaderState {
    Pending,
    Seen,
    Missing,
}

fn excerpt(bytes: &[u8]) -> String {
    let cut = bytes.len().min(EXCERPT_LEN);
    let s = String::from_utf8_lossy(&bytes[..cut]);
    // A cut inside a multi-byte sequence shows as one U+FFFD at the end; drop it.
    if cut < bytes.len() {
        s.trim_end_matches('\u{fffd}').to_owned()
    } else {
        s.into_owned()
    }
}

/// How a lossy decoding changed `bytes`: `N byte(s) replaced by M U+FFFD` (one U+FFFD per
/// maximal invalid sequence, as `String::from_utf8_lossy` does).
fn replaced_bytes(bytes: &[u8]) -> String {
    let (mut invalid, mut replacements) = (0usize, 0usize);
    for chunk in bytes.utf8_chunks() {
        if !chunk.invalid().is_empty() {
            invalid += chunk.invalid().len();
            replacements += 1;
        }
    }
    format!("{invalid} byte(s) replaced by {replacements} U+FFFD")
}

/// Parses one line: one SIMD UTF-8 check, std's check only for lines that fail it (for the
/// exact error position). With `skim`, an `llm.request` line is skimmed when it can be
/// ([`crate::skim`]).
fn parse_line(bytes: &[u8], skim: bool) -> Result<Parsed<Record>, ParseError> {
    if skim && let Some(parsed) = crate::skim::skim(bytes) {
        return Ok(parsed);
    }
    let result = match simdutf8::basic::from_utf8(bytes) {
        Ok(text) => parse_record_str(text),
        Err(_) => parse_record(bytes),
    };
    if let Ok(parsed) = &result {
        crate::skim::count_full(&parsed.value);
    }
    result
}

/// The message of a [`DamageKind::LoneSurrogate`] report for a line that needed the repair
/// (`None` otherwise): how many escapes, in decoded fields or raw parts alike, and where the
/// first is, as a byte offset from the start of `line` (a BOM and leading whitespace counted).
fn lone_surrogate_note(parsed: &Parsed<Record>, line: &[u8]) -> Option<String> {
    let first = parsed.lone_surrogates.first()?;
    // The offsets count from where `parse_record` starts: after a BOM and leading whitespace.
    let rest = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    let lead = line.len() - rest.trim_ascii_start().len();
    Some(format!(
        "{} lone surrogate escape(s) repaired as U+FFFD, first {} at byte {} of the line",
        parsed.lone_surrogates.len(),
        first.escape_str(),
        lead + first.offset
    ))
}

/// Turns lines into items; shared by [`Reader`] and [`Follower`](crate::Follower).
#[derive(Debug)]
pub(crate) struct Decoder {
    keep_raw: bool,
    skim: bool,
    expect_header: bool,
    header: HeaderState,
    content_seen: bool,
    /// Whether the piece being decoded ends at a `\n` (false for a piece cut by NUL bytes or
    /// a last line without one): only such a piece can be a sealed fragment.
    at_newline: bool,
}

impl Decoder {
    pub(crate) fn new(opts: &ReaderOptions) -> Self {
        Decoder {
            keep_raw: opts.keep_raw,
            skim: opts.skim_llm_requests,
            expect_header: opts.expect_header,
            header: if opts.expect_header {
                HeaderState::Pending
            } else {
                HeaderState::Seen
            },
            content_seen: false,
            at_newline: false,
        }
    }

    /// The header decision and whether content was seen, for a checkpoint.
    pub(crate) fn decisions(&self) -> (crate::checkpoint::HeaderProgress, bool) {
        use crate::checkpoint::HeaderProgress as P;
        let header = match self.header {
            HeaderState::Pending => P::Pending,
            HeaderState::Seen => P::Seen,
            HeaderState::Missing => P::Missing,
        };
        (header, self.content_seen)
    }

    /// Restores the decisions of a checkpoint (for a run file: `expect_header` stays as set).
    pub(crate) fn resume(&mut self, header: crate::checkpoint::HeaderProgress, content_seen: bool) {
        use crate::checkpoint::HeaderProgress as P;
        self.header = match header {
            P::Pending if self.expect_header => HeaderState::Pending,
            P::Pending | P::Seen => HeaderState::Seen,
            P::Missing => HeaderState::Missing,
        };
        self.content_seen = content_seen;
    }

    /// One physical line without its `\n`; `terminated` is false for a final line without one.
    pub(crate) fn line(
        &mut self,
        bytes: &[u8],
        offset: u64,
        line: u64,
        terminated: bool,
        out: &mut VecDeque<Item>,
    ) {
        if !self.content_seen && !bytes.trim_ascii().is_empty() {
            self.content_seen = true;
        }
        // A line that parses holds no NUL (NUL is invalid anywhere in JSON text), so the NUL
        // scan is needed only for lines that fail.
        let result = parse_line(bytes, self.skim);
        if result.is_ok() || memchr::memchr(0, bytes).is_none() {
            self.at_newline = terminated;
            self.piece_result(result, bytes, offset, line, terminated, out);
            return;
        }
        // NUL runs: report each, read the pieces between them as lines of their own.
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == 0 {
                let start = i;
                while i < bytes.len() && bytes[i] == 0 {
                    i += 1;
                }
                out.push_back(Item::Damage(Damage {
                    kind: DamageKind::NulRun,
                    offset: offset + start as u64,
                    line,
                    len: (i - start) as u64,
                    message: format!("{} NUL bytes", i - start),
                    raw: None,
                    excerpt: None,
                }));
            } else {
                let start = i;
                i = memchr::memchr(0, &bytes[i..]).map_or(bytes.len(), |n| i + n);
                let last = i == bytes.len();
                self.at_newline = last && terminated;
                self.piece(
                    &bytes[start..i],
                    offset + start as u64,
                    line,
                    !last || terminated,
                    out,
                );
            }
        }
    }

    fn piece(
        &mut self,
        bytes: &[u8],
        offset: u64,
        line: u64,
        terminated: bool,
        out: &mut VecDeque<Item>,
    ) {
        let result = parse_line(bytes, self.skim);
        self.piece_result(result, bytes, offset, line, terminated, out);
    }

    fn piece_result(
        &mut self,
        result: Result<Parsed<Record>, ParseError>,
        bytes: &[u8],
        offset: u64,
        line: u64,
        terminated: bool,
        out: &mut VecDeque<Item>,
    ) {
        match result {
            Ok(parsed) => {
                if let Some(message) = lone_surrogate_note(&parsed, bytes) {
                    out.push_back(Item::Damage(Damage {
                        kind: DamageKind::LoneSurrogate,
                        offset,
                        line,
                        len: bytes.len() as u64,
                        message,
                        raw: None,
                        excerpt: None,
                    }));
                }
                self.record(parsed, bytes, offset, line, out);
            }
            Err(ParseError::Empty) => {}
            Err(ParseError::InvalidUtf8 { .. })
                if !terminated
                    && std::str::from_utf8(bytes).is_err_and(|e| e.error_len().is_none()) =>
            {
                // A cut inside a multi-byte character at the end of a torn tail is part of the
                // torn write, not an encoding error.
                let lossy = String::from_utf8_lossy(bytes);
                self.failed_torn(lossy.as_bytes(), bytes.len(), offset, line, out);
            }
            Err(ParseError::InvalidUtf8 { offset: bad }) => {
                // A line that parses once decoded lossily is a record with an encoding error:
                // one `InvalidUtf8` report, then the record. A line that does not parse even
                // then is one damage report (corrupt line, torn tail or schema mismatch) whose
                // message names the encoding error too.
                let lossy = String::from_utf8_lossy(bytes);
                match parse_record(lossy.as_bytes()) {
                    Ok(parsed) => {
                        crate::skim::count_full(&parsed.value);
                        out.push_back(Item::Damage(Damage {
                            kind: DamageKind::InvalidUtf8,
                            offset,
                            line,
                            len: bytes.len() as u64,
                            message: format!(
                                "invalid UTF-8 at byte {bad} of the line; {}{}",
                                replaced_bytes(bytes),
                                lone_surrogate_note(&parsed, lossy.as_bytes())
                                    .map(|n| format!("; {n}"))
                                    .unwrap_or_default()
                            ),
                            raw: None,
                            excerpt: Some(excerpt(lossy.as_bytes())),
                        }));
                        self.record(parsed, bytes, offset, line, out);
                    }
                    Err(e) => {
                        // `from_utf8` reports the first error: an incomplete sequence is
                        // then the only one, at the very end.
                        let cut_char =
                            std::str::from_utf8(bytes).is_err_and(|u| u.error_len().is_none());
                        let note = if cut_char {
                            format!(
                                "the line ends inside a multi-byte character ({})",
                                replaced_bytes(bytes)
                            )
                        } else {
                            format!(
                                "invalid UTF-8 at byte {bad} of the line ({})",
                                replaced_bytes(bytes)
                            )
                        };
                        self.failed_with(
                            &e,
                            lossy.as_bytes(),
                            bytes.len(),
                            (offset, line),
                            terminated,
                            Some(&note),
                            out,
                        );
                    }
                }
            }
            Err(e) => self.failed(&e, bytes, bytes.len(), offset, line, terminated, out),
        }
    }

    fn failed_torn(
        &mut self,
        text: &[u8],
        len: usize,
        offset: u64,
        line: u64,
        out: &mut VecDeque<Item>,
    ) {
        out.push_back(Item::Damage(Damage {
            kind: DamageKind::TornTail,
            offset,
            line,
            len: len as u64,
            message: "last line has no newline and ends inside a character".to_owned(),
            raw: None,
            excerpt: Some(excerpt(text)),
        }));
    }

    #[allow(clippy::too_many_arguments)]
    fn failed(
        &mut self,
        err: &ParseError,
        text: &[u8],
        len: usize,
        offset: u64,
        line: u64,
        terminated: bool,
        out: &mut VecDeque<Item>,
    ) {
        self.failed_with(err, text, len, (offset, line), terminated, None, out);
    }

    /// The one damage report of a line that does not parse; `utf8` describes an encoding
    /// error of the line (then `text` is its lossy decoding), appended to the message.
    #[allow(clippy::too_many_arguments)]
    fn failed_with(
        &mut self,
        err: &ParseError,
        text: &[u8],
        len: usize,
        (offset, line): (u64, u64),
        terminated: bool,
        utf8: Option<&str>,
        out: &mut VecDeque<Item>,
    ) {
        let (kind, raw) = if err.is_shape() {
            (
                DamageKind::SchemaMismatch,
                Some(String::from_utf8_lossy(session_schema::trim_line(text).0).into_owned()),
            )
        } else if !terminated {
            (DamageKind::TornTail, None)
        } else if self.at_newline && err.is_eof() && text.trim_ascii_start().starts_with(b"{") {
            (DamageKind::SealedFragment, None)
        } else {
            (DamageKind::CorruptLine, None)
        };
        let message = match kind {
            DamageKind::TornTail => format!("last line has no newline and is incomplete: {err}"),
            DamageKind::SealedFragment => format!(
                "a write cut short, then sealed with a newline (by `sessions repair` or a writer \
                 reopening the run): the record being written was lost, {len} byte(s) of it are \
                 kept: {err}"
            ),
            DamageKind::CorruptLine if err.is_eof() => {
                format!("line ends in the middle of a value (a torn write sealed later): {err}")
            }
            _ => err.to_string(),
        };
        let message = match utf8 {
            Some(note) => format!("{message}; {note}"),
            None => message,
        };
        out.push_back(Item::Damage(Damage {
            kind,
            offset,
            line,
            len: len as u64,
            message,
            raw,
            excerpt: Some(excerpt(text)),
        }));
    }

    fn record(
        &mut self,
        parsed: Parsed<Record>,
        bytes: &[u8],
        offset: u64,
        line: u64,
        out: &mut VecDeque<Item>,
    ) {
        match (&parsed.value, self.header) {
            (Record::Header(h), HeaderState::Pending) => {
                self.header = HeaderState::Seen;
                if h.schema_version != SCHEMA_VERSION {
                    let newer = h.schema_version > SCHEMA_VERSION;
                    out.push_back(Item::Damage(Damage {
                        kind: if newer {
                            DamageKind::NewerSchemaVersion
                        } else {
                            DamageKind::UnknownSchemaVersion
                        },
                        offset,
                        line,
                        len: 0,
                        message: format!(
                            "header has schema_version {}, this reader implements {}; reading best-effort",
                            h.schema_version, SCHEMA_VERSION
                        ),
                        raw: None,
                        excerpt: None,
                    }));
                }
            }
            (_, HeaderState::Pending) => {
                self.header = HeaderState::Missing;
                out.push_back(Item::Damage(Damage {
                    kind: DamageKind::MissingHeader,
                    offset,
                    line,
                    len: 0,
                    message: format!(
                        "first record is a `{}` record, not a `header`",
                        parsed.value.kind()
                    ),
                    raw: None,
                    excerpt: None,
                }));
            }
            (Record::Header(_), _) if self.expect_header => {
                out.push_back(Item::Damage(Damage {
                    kind: DamageKind::DuplicateHeader,
                    offset,
                    line,
                    len: bytes.len() as u64,
                    message: "a second `header` record".to_owned(),
                    raw: None,
                    excerpt: None,
                }));
            }
            _ => {}
        }
        out.push_back(Item::Record(RecordLine {
            parsed,
            offset,
            line,
            len: bytes.len() as u64,
            raw: self.keep_raw.then(|| bytes.to_vec()),
        }));
    }

    /// End of input at `offset` (file length), `line` = number of the line after the last.
    pub(crate) fn finish(&mut self, offset: u64, line: u64, out: &mut VecDeque<Item>) {
        if !self.expect_header || self.header != HeaderState::Pending {
            return;
        }
        let (kind, message, offset, line) = if self.content_seen {
            (
                DamageKind::MissingHeader,
                "no record in the file is a `header`",
                offset,
                line,
            )
        } else {
            (DamageKind::EmptyFile, "file has no content", 0, 1)
        };
        self.header = HeaderState::Missing;
        out.push_back(Item::Damage(Damage {
            kind,
            offset,
            line,
            len: 0,
            message: message.to_owned(),
            raw: None,
            excerpt: None,
        }));
    }

    pub(crate) fn oversized(&mut self, skip: Skip, terminated: bool, out: &mut VecDeque<Item>) {
        self.content_seen = true;
        out.push_back(Item::Damage(Damage {
            kind: DamageKind::OversizedLine,
            offset: skip.offset,
            line: skip.line,
            len: skip.len,
            message: format!(
                "line of {} bytes{} is longer than the limit; skipped",
                skip.len,
                if terminated { "" } else { " (no newline)" }
            ),
            raw: None,
            excerpt: None,
        }));
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Skip {
    offset: u64,
    line: u64,
    len: u64,
}

/// Streaming reader over any [`Read`]: an iterator of `io::Result<Item>`.
///
/// Reads blocks of [`ReaderOptions::read_size`], finds newlines with `memchr` and parses each
/// line straight from the buffer. Errors of the source are returned as `Err` items; the reader
/// can be polled again after one (the bytes read so far are kept).
///
/// ```
/// use session_jsonl::{Item, Reader, ReaderOptions};
/// let data = b"{\"type\":\"header\",\"schema_version\":1,\"run_id\":\"r\",\"started_at\":\"2026-02-03T12:00:00.000Z\"}\n{\"type\":\"run.e";
/// let items: Vec<Item> = Reader::new(&data[..], ReaderOptions::default())
///     .collect::<Result<_, _>>()
///     .unwrap();
/// assert!(items[0].as_record().is_some());
/// assert_eq!(items[1].as_damage().unwrap().kind, session_jsonl::DamageKind::TornTail);
/// ```
#[derive(Debug)]
pub struct Reader<R> {
    src: R,
    opts: ReaderOptions,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    /// Bytes from `pos` already searched for `\n`.
    scanned: usize,
    /// Offset in the stream of `buf[0]`.
    base: u64,
    /// Number of the line starting at `pos`.
    line: u64,
    eof: bool,
    done: bool,
    follow: bool,
    skip: Option<Skip>,
    dec: Decoder,
    pending: VecDeque<Item>,
    /// Where this reader's bytes are counted ([`crate::tally`]), when opened from a path
    /// while counting.
    pub(crate) tally: Option<crate::tally::Slot>,
    /// What checkpoints need ([`Reader::track_checkpoints`]); `None` when not tracking.
    pub(crate) track: Option<Box<crate::checkpoint::Track>>,
    /// [`Reader::parse_only`]: the record types to parse (`None`: every line).
    only_types: Option<&'static [&'static str]>,
    /// Lines passed over unparsed by [`Reader::parse_only`].
    passed_over: u64,
    /// Length of the input (from offset 0) as its opener looked at it: the listing's size or
    /// the `fstat` of the open file (`None`: unknown, or a source that is not a plain file).
    known_len: Option<u64>,
    /// Whether the last read returned fewer bytes than asked for and ended exactly at
    /// `known_len`: the end of a regular file at the moment of that read (see
    /// [`Reader::fill`]); the next fill reports the end without another `read`.
    at_known_end: bool,
    /// Length of the file when it was opened (`fstat` of the open file, plain and archived
    /// files alike), from [`Reader::open_with`]; `None` otherwise.
    opened_len: Option<u64>,
}

/// The record type a line names in its first bytes, `{"type":"<type>"`, exactly as the
/// writers put it (the reference and ours write `type` first, without spaces); `None` for any
/// other start (another key first, spaces, a BOM, damage).
fn leading_type(line: &[u8]) -> Option<&[u8]> {
    let rest = line.strip_prefix(b"{\"type\":\"")?;
    // Record type names are short: look no further than 64 bytes.
    let head = rest.get(..rest.len().min(64)).unwrap_or(rest);
    let end = memchr::memchr2(b'"', b'\\', head)?;
    // A backslash means an escape inside the name: not a plain name, parse the line.
    (rest.get(end) == Some(&b'"'))
        .then(|| rest.get(..end))
        .flatten()
}

impl<R: Read> Reader<R> {
    /// A reader over `src` starting at byte offset 0, line 1.
    pub fn new(src: R, opts: ReaderOptions) -> Self {
        Reader::with_position(src, opts, 0, 1)
    }

    /// A reader over `src` whose first byte is at `offset` on line `line` of the file (for
    /// resuming; use with `expect_header: false` unless `offset` is 0).
    pub fn with_position(src: R, opts: ReaderOptions, offset: u64, line: u64) -> Self {
        Reader::with_position_and_hint(src, opts, offset, line, None)
    }

    /// As [`with_position`](Self::with_position), with the number of bytes the source is
    /// expected to hold (`None`: unknown): the buffer starts just large enough for them (at
    /// most [`ReaderOptions::read_size`]), so a 3 KB file costs a 3 KB buffer. A wrong hint
    /// costs only speed: the buffer grows on demand.
    pub fn with_position_and_hint(
        src: R,
        opts: ReaderOptions,
        offset: u64,
        line: u64,
        expected_len: Option<u64>,
    ) -> Self {
        let cap = opts.read_size.max(1);
        let size = match expected_len {
            // One byte more than the content so the read that finds the end needs no growth.
            Some(n) => usize::try_from(n.saturating_add(1)).unwrap_or(cap).min(cap),
            None => INITIAL_READ_BUFFER.min(cap),
        };
        count_buffer_bytes(size);
        Reader::from_parts(src, opts, offset, line, vec![0; size])
    }

    /// A reader over `src` whose first byte is at `offset` on line `line`, reading into `buf`
    /// (at least one byte long).
    fn from_parts(src: R, opts: ReaderOptions, offset: u64, line: u64, buf: Vec<u8>) -> Self {
        Reader {
            src,
            dec: Decoder::new(&opts),
            buf,
            opts,
            pos: 0,
            end: 0,
            scanned: 0,
            base: offset,
            line,
            eof: false,
            done: false,
            follow: false,
            skip: None,
            pending: VecDeque::new(),
            tally: None,
            track: None,
            only_types: None,
            passed_over: 0,
            known_len: None,
            at_known_end: false,
            opened_len: None,
        }
    }

    /// A reader over `src` from offset 0 reading into `buf` (see
    /// [`Reader::open_reusing`]): the buffer keeps its length when that is enough for
    /// `expected_len` bytes (at most [`ReaderOptions::read_size`]), else grows to it; only
    /// the growth is allocated and counted.
    fn with_buffer(
        src: R,
        opts: ReaderOptions,
        expected_len: Option<u64>,
        mut buf: Vec<u8>,
    ) -> Self {
        let cap = opts.read_size.max(1);
        let size = match expected_len {
            Some(n) => usize::try_from(n.saturating_add(1)).unwrap_or(cap).min(cap),
            None => INITIAL_READ_BUFFER.min(cap),
        };
        if buf.len() > cap {
            // Grown for a long line: back to the read size, so a worker keeps no more.
            buf.truncate(cap);
            buf.shrink_to(cap);
        }
        if buf.len() < size {
            count_buffer_bytes(size - buf.len());
            buf.resize(size, 0);
        }
        Reader::from_parts(src, opts, 0, 1, buf)
    }

    /// The read buffer, for the next [`Reader::open_reusing`]: its length is what this
    /// reader grew it to, its content is of no use.
    pub fn into_buffer(self) -> Vec<u8> {
        self.buf
    }

    /// Parses only the lines whose record type is one of `types`: a line that starts with
    /// `{"type":"<type>"` naming another type is passed over without being parsed or
    /// decoded (no item, no damage report for it), which makes a reader that needs a few
    /// small record types fast on files whose bytes are mostly other records (`llm.request`
    /// snapshots repeat the whole history each time). A line whose type cannot be read from
    /// its first bytes (another key first, spaces, a BOM, NUL bytes, a torn fragment) is
    /// parsed and reported as usual. Lines passed over are invisible to the file-level
    /// checks too: use it with [`ReaderOptions::expect_header`] off unless `types` holds
    /// `header`. Line numbers and offsets stay those of the file.
    #[must_use]
    pub fn parse_only(mut self, types: &'static [&'static str]) -> Self {
        self.only_types = Some(types);
        self
    }

    /// Number of lines [`Reader::parse_only`] passed over unparsed so far.
    pub fn lines_passed_over(&self) -> u64 {
        self.passed_over
    }

    /// Whether [`Reader::parse_only`] passes over this line.
    fn passes_over(&self, bytes: &[u8]) -> bool {
        match (self.only_types, leading_type(bytes)) {
            (Some(types), Some(t)) => !types.iter().any(|k| k.as_bytes() == t),
            _ => false,
        }
    }

    /// Makes [`Reader::checkpoint`] available: the reader keeps the first 4 KiB of the input
    /// and the 4 KiB before its buffer (copied when the buffer moves on, not re-read). Call
    /// before the first item of a reader that starts at offset 0.
    pub fn track_checkpoints(&mut self) {
        if self.track.is_none() {
            self.track = Some(Box::default());
        }
    }

    /// With `hold` set, the end of the input is not the end of the file: the reader stops
    /// (its iterator returns `None`) with a last line that has no `\n` yet still undecided,
    /// so that [`Reader::checkpoint`] can be taken after every complete line. Clearing it
    /// again lets the next call decide that line (record or torn tail) and report what ends
    /// the file, as a reader that never held would have.
    pub fn hold_last_line(&mut self, hold: bool) {
        self.follow = hold;
    }

    /// Where a reader started at offset 0 stands after its last complete line, for
    /// [`Reader::resume_run_file`]. Take it while holding the last line
    /// ([`Reader::hold_last_line`]) once the iterator returned `None`. `None` when the
    /// reader does not track checkpoints, has decided a last line without `\n` already, or is
    /// in the middle of skipping an oversized line.
    pub fn checkpoint(&self) -> Option<crate::checkpoint::ReaderCheckpoint> {
        let track = self.track.as_deref()?;
        if self.done || self.skip.is_some() || !self.pending.is_empty() {
            return None;
        }
        let offset = self.base + self.pos as u64;
        let (head_len, head_digest, guard_len, guard_digest) =
            track.digests(offset, &self.buf[..self.pos]);
        let (header, content_seen) = self.dec.decisions();
        Some(crate::checkpoint::ReaderCheckpoint {
            offset,
            line: self.line,
            header,
            content_seen,
            head_len,
            head_digest,
            guard_len,
            guard_digest,
        })
    }

    /// Restores the decoder's decisions of a checkpoint.
    pub(crate) fn resume_decisions(
        &mut self,
        header: crate::checkpoint::HeaderProgress,
        content_seen: bool,
    ) {
        self.dec.resume(header, content_seen);
    }

    pub(crate) fn set_follow(&mut self, follow: bool) {
        self.follow = follow;
        // A followed file grows: only a read says where it ends now.
        self.known_len = None;
        self.at_known_end = false;
    }

    /// Length of the file when [`Reader::open_with`] opened it (`fstat` on the open file:
    /// the compressed size for an archive); `None` for a reader made another way.
    pub fn opened_len(&self) -> Option<u64> {
        self.opened_len
    }

    /// Bytes read from the source so far (decompressed bytes for an archive): at the end of
    /// a plain file, the length of the file as read.
    pub fn bytes_read(&self) -> u64 {
        self.base + self.end as u64
    }

    pub(crate) fn source_mut(&mut self) -> &mut R {
        &mut self.src
    }

    /// Byte offset just after the last complete (`\n`-terminated) line consumed so far: where
    /// a clean record would start.
    pub fn complete_offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// 1-based number of the next line to be read.
    pub fn next_line(&self) -> u64 {
        self.line
    }

    /// Bytes buffered past [`complete_offset`](Self::complete_offset) (a partial last line).
    pub fn buffered_partial(&self) -> usize {
        self.end - self.pos
    }

    /// Size of the read buffer in bytes: at most about [`ReaderOptions::max_line_len`] plus
    /// [`ReaderOptions::read_size`], however long the lines in the input are.
    pub fn buffer_capacity(&self) -> usize {
        self.buf.len()
    }

    /// Reads more bytes; returns how many (0 at end of input).
    ///
    /// A read that returns fewer bytes than asked for and ends exactly at the length the
    /// opener looked at (`known_len`) is taken as the end of the input, without the further
    /// `read` that would return 0: a read of a regular file returns less than asked only at
    /// its end, and the file ended there when that read returned. A file that grew after the
    /// opener looked at it fills the buffer (its length plus one byte) and is read on to its
    /// real end; one that grows after the short read is as one that grows after the read
    /// returning 0: its new bytes are for the next pass (the callers look at the file again
    /// after reading, see `session_state`'s read pool).
    fn fill(&mut self) -> io::Result<usize> {
        if self.at_known_end {
            return Ok(0);
        }
        let read_size = self.opts.read_size.max(1);
        if self.end == self.buf.len() && self.buf.len() < read_size {
            // Still below the read size: the input is larger than it first looked; double
            // (keeping reads large rather than compacting a small buffer over and over).
            let grown = self
                .buf
                .len()
                .saturating_mul(2)
                .clamp(self.buf.len() + 1, read_size);
            count_buffer_bytes(grown - self.buf.len());
            self.buf.resize(grown, 0);
        }
        if self.end == self.buf.len() {
            if self.pos > 0 {
                if let Some(track) = self.track.as_deref_mut() {
                    track.dropping(&self.buf[..self.pos]);
                }
                self.buf.copy_within(self.pos..self.end, 0);
                self.base += self.pos as u64;
                self.end -= self.pos;
                self.pos = 0;
            }
            if self.end == self.buf.len() {
                // A line longer than the buffer: grow, but not beyond what the longest
                // acceptable line needs (a longer one switches to skipping).
                let cap = self
                    .opts
                    .max_line_len
                    .saturating_add(self.opts.read_size.max(1))
                    .saturating_add(1);
                let grown = (self.buf.len().saturating_mul(2))
                    .min(cap)
                    .max(self.buf.len() + 1);
                count_buffer_bytes(grown - self.buf.len());
                self.buf.resize(grown, 0);
            }
        }
        let want = (self.buf.len() - self.end).min(read_size);
        loop {
            match self.src.read(&mut self.buf[self.end..self.end + want]) {
                Ok(n) => {
                    self.end += n;
                    crate::tally::read(self.tally, n);
                    self.at_known_end =
                        n > 0 && n < want && self.known_len == Some(self.bytes_read());
                    if self.base == 0
                        && let Some(track) = self.track.as_deref_mut()
                        && track.head_carried.is_none()
                        && track.head.len() < crate::checkpoint::GUARD_LEN
                    {
                        let n = self.end.min(crate::checkpoint::GUARD_LEN);
                        track.head.clear();
                        track.head.extend_from_slice(&self.buf[..n]);
                    }
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn consume_line(&mut self, nl: usize) {
        let line_len = nl - self.pos;
        let offset = self.base + self.pos as u64;
        if line_len > self.opts.max_line_len {
            let skip = Skip {
                offset,
                line: self.line,
                len: line_len as u64,
            };
            self.dec.oversized(skip, true, &mut self.pending);
        } else {
            let bytes = &self.buf[self.pos..nl];
            if self.passes_over(bytes) {
                self.passed_over += 1;
            } else {
                self.dec
                    .line(bytes, offset, self.line, true, &mut self.pending);
            }
        }
        self.pos = nl + 1;
        self.scanned = 0;
        self.line += 1;
    }

    /// Finishes the input: the partial last line (if any) is final.
    pub(crate) fn finish_input(&mut self) {
        if self.done {
            return;
        }
        if let Some(skip) = self.skip.take() {
            self.dec.oversized(skip, false, &mut self.pending);
            self.line += 1;
        } else if self.pos < self.end {
            let offset = self.base + self.pos as u64;
            let bytes = &self.buf[self.pos..self.end];
            if self.passes_over(bytes) {
                self.passed_over += 1;
            } else {
                self.dec
                    .line(bytes, offset, self.line, false, &mut self.pending);
            }
            self.line += 1;
        }
        let end = self.base + self.end as u64;
        self.pos = self.end;
        self.scanned = 0;
        self.dec.finish(end, self.line, &mut self.pending);
        self.done = true;
    }

    /// The next item; `None` at the end (in follow mode: nothing new yet).
    pub(crate) fn next_item(&mut self) -> Option<io::Result<Item>> {
        loop {
            if let Some(item) = self.pending.pop_front() {
                return Some(Ok(item));
            }
            if self.done {
                return None;
            }
            if let Some(mut skip) = self.skip {
                match memchr::memchr(b'\n', &self.buf[self.pos..self.end]) {
                    Some(i) => {
                        skip.len += i as u64;
                        self.pos += i + 1;
                        self.skip = None;
                        self.dec.oversized(skip, true, &mut self.pending);
                        self.line += 1;
                        continue;
                    }
                    None => {
                        skip.len += (self.end - self.pos) as u64;
                        self.pos = self.end;
                        self.skip = Some(skip);
                    }
                }
            } else {
                let from = self.pos + self.scanned;
                if let Some(i) = memchr::memchr(b'\n', &self.buf[from..self.end]) {
                    self.consume_line(from + i);
                    continue;
                }
                self.scanned = self.end - self.pos;
                if self.end - self.pos > self.opts.max_line_len {
                    self.skip = Some(Skip {
                        offset: self.base + self.pos as u64,
                        line: self.line,
                        len: (self.end - self.pos) as u64,
                    });
                    self.pos = self.end;
                    self.scanned = 0;
                    continue;
                }
            }
            if self.eof {
                self.finish_input();
                continue;
            }
            match self.fill() {
                Ok(0) => {
                    if self.follow {
                        return None;
                    }
                    self.eof = true;
                }
                Ok(_) => {}
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

impl<R: Read> Iterator for Reader<R> {
    type Item = io::Result<Item>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_item()
    }
}

/// A run file opened for reading: plain, or decompressed on the fly for `.jsonl.zst`.
pub enum RunFileReader {
    /// A plain `.jsonl` file.
    Plain(File),
    /// An archived `.jsonl.zst` file, decompressed while reading.
    #[cfg(feature = "archive")]
    #[cfg_attr(docsrs, doc(cfg(feature = "archive")))]
    Zstd(Box<zstd::stream::read::Decoder<'static, std::io::BufReader<File>>>),
}

impl fmt::Debug for RunFileReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunFileReader::Plain(file) => f.debug_tuple("Plain").field(file).finish(),
            #[cfg(feature = "archive")]
            RunFileReader::Zstd(_) => f.write_str("Zstd(..)"),
        }
    }
}

impl Read for RunFileReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            RunFileReader::Plain(f) => f.read(buf),
            #[cfg(feature = "archive")]
            RunFileReader::Zstd(d) => d.read(buf),
        }
    }
}

/// Whether `path` names an archived run file (`.jsonl.zst`).
pub fn is_archived(path: &Path) -> bool {
    path.to_string_lossy().ends_with(ARCHIVED_EXT)
}

/// Opens a run file for reading, decompressing `.jsonl.zst` transparently. Never locks.
///
/// # Errors
/// [`JsonlError::Io`] when the file cannot be opened or the zstd stream cannot be set up;
/// [`JsonlError::ArchiveUnsupported`] for a `.jsonl.zst` when the crate was built without its
/// `archive` feature.
pub fn open_run_file(path: &Path) -> Result<RunFileReader> {
    let file = File::open(path).map_err(|e| JsonlError::io("open", path, e))?;
    if is_archived(path) {
        open_archived(file, path)
    } else {
        Ok(RunFileReader::Plain(file))
    }
}

#[cfg(feature = "archive")]
fn open_archived(file: File, path: &Path) -> Result<RunFileReader> {
    let dec = zstd::stream::read::Decoder::new(file)
        .map_err(|e| JsonlError::io("start decompressing", path, e))?;
    Ok(RunFileReader::Zstd(Box::new(dec)))
}

#[cfg(not(feature = "archive"))]
fn open_archived(file: File, path: &Path) -> Result<RunFileReader> {
    drop(file);
    Err(JsonlError::ArchiveUnsupported {
        path: path.to_path_buf(),
    })
}

impl Reader<RunFileReader> {
    /// Opens a run file (`.jsonl` or `.jsonl.zst`) with default options.
    ///
    /// # Errors
    /// See [`open_run_file`].
    pub fn open(path: &Path) -> Result<Self> {
        Reader::open_with(path, ReaderOptions::default())
    }

    /// Opens a run file (`.jsonl` or `.jsonl.zst`) with `opts`.
    ///
    /// # Errors
    /// See [`open_run_file`].
    ///
    /// The read buffer starts at the file's length (plain files; at most
    /// [`ReaderOptions::read_size`]), not at `read_size`.
    pub fn open_with(path: &Path, opts: ReaderOptions) -> Result<Self> {
        let file = File::open(path).map_err(|e| JsonlError::io("open", path, e))?;
        // One `fstat` on the open file: the buffer's size, and the file's length for the
        // caller ([`Reader::opened_len`]), which needs no path-based `stat` of its own.
        let opened_len = file.metadata().ok().map(|m| m.len());
        let archived = is_archived(path);
        let src = if archived {
            open_archived(file, path)?
        } else {
            RunFileReader::Plain(file)
        };
        let hint = if archived { None } else { opened_len };
        let mut reader = Reader::with_position_and_hint(src, opts, 0, 1, hint);
        reader.known_len = hint;
        reader.opened_len = opened_len;
        reader.tally = crate::tally::opened(path);
        Ok(reader)
    }

    /// The metadata of the open file (`fstat` on its descriptor, no path lookup; for an
    /// archive, of the compressed file): what a caller that read the file looks at to tell
    /// whether it changed while it was read (its length and modification time, and
    /// `nlink() == 0` on Unix for a file removed or replaced at its path meanwhile).
    ///
    /// # Errors
    /// The I/O error of `fstat`.
    pub fn file_metadata(&self) -> io::Result<std::fs::Metadata> {
        match &self.src {
            RunFileReader::Plain(f) => f.metadata(),
            #[cfg(feature = "archive")]
            RunFileReader::Zstd(d) => d.get_ref().get_ref().metadata(),
        }
    }

    /// As [`open_with`](Self::open_with) for a caller that reads many files in turn: the
    /// file's length comes from the caller (`expected_len`, from its listing: no `fstat`),
    /// and the read buffer is `buf`, the buffer an earlier reader gave back
    /// ([`into_buffer`](Reader::into_buffer)), grown only when this file needs more of it. A
    /// worker that reads 100,000 small files allocates (and zero-fills) its buffer once, not
    /// once per file ([`read_buffer_bytes_on_this_thread`](crate::read_buffer_bytes_on_this_thread) counts only the growth). A wrong
    /// `expected_len` costs only speed.
    ///
    /// # Errors
    /// See [`open_run_file`].
    pub fn open_reusing(
        path: &Path,
        opts: ReaderOptions,
        expected_len: Option<u64>,
        buf: Vec<u8>,
    ) -> Result<Self> {
        let file = File::open(path).map_err(|e| JsonlError::io("open", path, e))?;
        Reader::open_file_reusing(file, path, opts, expected_len, buf)
    }

    /// As [`open_reusing`](Self::open_reusing) for a run file the caller has already opened
    /// (`file`, e.g. relative to its directory's descriptor with `openat`, and looked at with
    /// `fstat`): `path` names it in errors and tells an archive (`.jsonl.zst`) by its name.
    ///
    /// # Errors
    /// [`JsonlError::Io`] when the zstd stream of an archive cannot be set up;
    /// [`JsonlError::ArchiveUnsupported`] for an archive without the `archive` feature.
    pub fn open_file_reusing(
        file: File,
        path: &Path,
        opts: ReaderOptions,
        expected_len: Option<u64>,
        buf: Vec<u8>,
    ) -> Result<Self> {
        let src = if is_archived(path) {
            open_archived(file, path)?
        } else {
            RunFileReader::Plain(file)
        };
        let hint = match &src {
            RunFileReader::Plain(_) => expected_len,
            #[cfg(feature = "archive")]
            RunFileReader::Zstd(_) => None,
        };
        let mut reader = Reader::with_buffer(src, opts, hint, buf);
        reader.known_len = hint;
        reader.tally = crate::tally::opened(path);
        Ok(reader)
    }
}

impl<R: Read> session_schema::ItemSource for Reader<R> {
    fn complete_offset(&self) -> u64 {
        Reader::complete_offset(self)
    }
}

/// Reads a whole run file (`.jsonl` or `.jsonl.zst`) into records and damage reports.
///
/// # Errors
/// [`JsonlError::Io`] (open) or [`JsonlError::Read`] (a read failed, with its line and offset).
///
/// # Examples
///
/// A file with a line of garbage in the middle and a torn last line: the complete records come
/// back, and each damaged line is reported with its line number and byte offset.
///
/// ```
/// use session_jsonl::{DamageKind, read_run};
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a.jsonl");
/// let header = r#"{"type":"header","schema_version":1,"run_id":"8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a","started_at":"2026-02-03T12:00:00.000Z"}"#;
/// let end = r#"{"type":"run.end","run_id":"8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a","ts":"2026-02-03T12:00:01.000Z","outcome":"completed"}"#;
/// std::fs::write(&path, format!("{header}\nnot json\n{end}\n{{\"type\":\"run.st"))?;
///
/// let run = read_run(&path)?;
/// let kinds: Vec<&str> = run.records.iter().map(|r| r.record().kind()).collect();
/// assert_eq!(kinds, ["header", "run.end"]);
/// let damage: Vec<(DamageKind, u64, u64)> =
///     run.damage.iter().map(|d| (d.kind, d.line, d.offset)).collect();
/// let torn_at = (header.len() + "\nnot json\n".len() + end.len() + 1) as u64;
/// assert_eq!(
///     damage,
///     [
///         (DamageKind::CorruptLine, 2, header.len() as u64 + 1),
///         (DamageKind::TornTail, 4, torn_at),
///     ]
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_run(path: &Path) -> Result<RunRead> {
    read_run_with(path, ReaderOptions::default())
}

/// [`read_run`] with explicit options.
///
/// # Errors
/// As [`read_run`].
pub fn read_run_with(path: &Path, opts: ReaderOptions) -> Result<RunRead> {
    let mut reader = Reader::open_with(path, opts)?;
    RunRead::from_reader(path.to_owned(), &mut reader).map_err(|source| JsonlError::Read {
        path: path.to_owned(),
        line: reader.next_line(),
        offset: reader.complete_offset(),
        source,
    })
}
