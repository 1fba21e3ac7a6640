//! The values that cross the storage seam: what an append did, a run's bytes and facts, listing
//! queries and pages, session versions, stored sessions and lease holders.
//!
//! Every struct has public fields so that a backend in another crate can build it; structs
//! that may grow implement `Default` (build them with `..Default::default()`).

use std::fmt;
use std::io::{self, Read};

use serde::{Deserialize, Serialize};
use session_jsonl::{HeaderFacts, RunEndState};
use session_schema::{SessionState, SessionStateSummary, Timestamp};

/// What [`RunCatalogue::append_lines`](crate::RunCatalogue::append_lines) did.
///
/// `offset..end` is where the caller's lines are in the run; `already_present` of those bytes
/// were found stored by an earlier attempt (a retry after a lost acknowledgement) and only the
/// rest was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Appended {
    /// Byte offset of the first appended line: the expected length given.
    pub offset: u64,
    /// Byte offset just after the last appended line (`offset + lines.len()`).
    pub end: u64,
    /// The run's committed length after the call (greater than `end` when other lines were
    /// appended after an earlier attempt of this one).
    pub committed_len: u64,
    /// Bytes that were already stored at `offset` (0: a fresh append; `end - offset`: a pure
    /// retry, nothing written).
    pub already_present: u64,
}

impl Appended {
    /// Whether every byte was already stored (a retry of an append that had succeeded).
    pub fn was_retry(&self) -> bool {
        self.already_present > 0 && self.already_present == self.end - self.offset
    }
}

/// Which bytes of a run a read returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Extent {
    /// Complete lines only: up to and including the last `\n` (the committed length). What
    /// a copy to another store ships.
    #[default]
    Committed,
    /// Also the bytes after the last `\n` (a torn tail left by a writer that died, or a
    /// line being written right now), so that a tolerant reader reports it as
    /// [`DamageKind::TornTail`](session_jsonl::DamageKind::TornTail) exactly as when reading
    /// the local file. Backends that never store a torn tail return the same bytes as
    /// [`Extent::Committed`].
    WithTornTail,
}

/// A position in a run where a read of lines starts: byte offset and 1-based line number
/// (so that damage reports of a partial read name the same lines as a whole read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinePosition {
    /// Byte offset (must be the start of a line for parsed reads).
    pub offset: u64,
    /// 1-based number of the line starting there.
    pub line: u64,
}

impl LinePosition {
    /// The start of the run: offset 0, line 1.
    pub const START: LinePosition = LinePosition { offset: 0, line: 1 };
}

impl Default for LinePosition {
    fn default() -> Self {
        LinePosition::START
    }
}

/// A snapshot of a run's stored bytes `[start, end)`, streamed: memory does not grow with the
/// run. Bytes appended after the read was opened are not part of it.
///
/// `Read` returns exactly `end - start` bytes, then end of input; a source that ends earlier
/// (the run was cut under the reader) is an [`io::ErrorKind::UnexpectedEof`] error.
pub struct RunBytes {
    src: Box<dyn Read + Send>,
    start: u64,
    end: u64,
    pos: u64,
}

impl RunBytes {
    /// A snapshot of `[start, end)` read from `src`, which must yield those bytes (anything it
    /// yields beyond `end` is ignored). For backend implementations.
    pub fn new(src: Box<dyn Read + Send>, start: u64, end: u64) -> RunBytes {
        RunBytes {
            src,
            start,
            end: end.max(start),
            pos: start,
        }
    }

    /// An empty snapshot at `at`.
    pub fn empty(at: u64) -> RunBytes {
        RunBytes::new(Box::new(io::empty()), at, at)
    }

    /// Byte offset of the first byte.
    pub fn start(&self) -> u64 {
        self.start
    }

    /// Byte offset just after the last byte (the run's length in the requested [`Extent`]
    /// when the read was opened).
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Byte offset of the next byte `read` returns.
    pub fn position(&self) -> u64 {
        self.pos
    }
}

impl fmt::Debug for RunBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunBytes")
            .field("start", &self.start)
            .field("end", &self.end)
            .field("pos", &self.pos)
            .finish_non_exhaustive()
    }
}

impl Read for RunBytes {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.end - self.pos;
        if left == 0 || buf.is_empty() {
            return Ok(0);
        }
        let max = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
        let n = loop {
            match self.src.read(&mut buf[..max]) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                other => break other?,
            }
        };
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "stored bytes end at byte offset {} before the end of the snapshot ({})",
                    self.pos, self.end
                ),
            ));
        }
        self.pos += n as u64;
        Ok(n)
    }
}

/// Facts about one run ([`RunCatalogue::stat_run`](crate::RunCatalogue::stat_run)).
#[derive(Debug, Clone, PartialEq)]
pub struct RunStat {
    /// The run id.
    pub run_id: String,
    /// Committed length in bytes: every complete line, up to and including the last `\n`.
    /// The `expected_len` of the next append.
    pub len: u64,
    /// Complete lines (number of `\n` bytes in the first `len` bytes).
    pub lines: u64,
    /// Bytes after the last `\n` (a torn tail of a writer that died, or a line being
    /// written); 0 when there are none, always 0 in a backend that stores complete lines only.
    /// Never part of [`Extent::Committed`] reads.
    pub torn_tail: u64,
    /// Small fields of the first line (`type`, `schema_version`, `run_id`, `session_id`,
    /// `started_at`), as far as they could be read.
    pub header: HeaderFacts,
    /// How the run ended, from its last records.
    pub end: RunEndState,
    /// `type` of the last record that could be read.
    pub last_type: Option<String>,
    /// `ts` of the last record that could be read.
    pub last_ts: Option<Timestamp>,
    /// Whether the run can no longer be appended to (the local backend: archived to
    /// `.jsonl.zst`).
    pub archived: bool,
}

/// How a listed run ended, in the spelling of the run index (`completed`, `error`,
/// `cancelled`, `open`, or an unknown `run.end` outcome kept verbatim).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum Outcome {
    /// `run.end{outcome:"completed"}`.
    Completed,
    /// `run.end{outcome:"error"}`, or a `run.error` with no `run.end` after it.
    Error,
    /// `run.end{outcome:"cancelled"}`.
    Cancelled,
    /// No `run.end` yet: still being written, or its writer died.
    #[default]
    Open,
    /// A `run.end` outcome this version does not know; the run has ended.
    Other(String),
}

impl Outcome {
    /// `completed`, `error`, `cancelled`, `open`, or the unknown value.
    pub fn as_str(&self) -> &str {
        match self {
            Outcome::Completed => "completed",
            Outcome::Error => "error",
            Outcome::Cancelled => "cancelled",
            Outcome::Open => "open",
            Outcome::Other(s) => s,
        }
    }

    /// Parses [`Outcome::as_str`] output (anything else is [`Outcome::Other`]).
    pub fn parse(s: &str) -> Outcome {
        match s {
            "completed" => Outcome::Completed,
            "error" => Outcome::Error,
            "cancelled" => Outcome::Cancelled,
            "open" => Outcome::Open,
            other => Outcome::Other(other.to_owned()),
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Token sums over a run's `llm.response` records (each saturates at `i64::MAX`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TokenTotals {
    /// `usage.input_tokens`.
    pub input: u64,
    /// `usage.input_cached_tokens`.
    pub cached_input: u64,
    /// `usage.input_cache_creation_tokens`.
    pub cache_creation: u64,
    /// `usage.output_tokens`.
    pub output: u64,
    /// `usage.total_tokens`.
    pub total: u64,
}

/// One run in a listing, with the columns the `runs` command shows. Derived by the
/// workspace's tolerant reader from the stored lines: damaged lines are counted in
/// `damage_count`, never a reason to leave the run out.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunSummary {
    /// The run id (the key of [`RunCatalogue`](crate::RunCatalogue) calls).
    pub run_id: String,
    /// `run_id` of the header when it differs from the key (a file copied under another
    /// name); `None` when they agree or the header has none.
    pub header_run_id: Option<String>,
    /// Session id from the header (else from `run.start`).
    pub session_id: Option<String>,
    /// Header `started_at` as written.
    pub started_at: Option<String>,
    /// `started_at` in UTC, `YYYY-MM-DDTHH:MM:SS.mmmZ`; `None` when missing or not RFC 3339.
    /// The listing order and the `since`/`until` filters use it.
    pub started_at_utc: Option<String>,
    /// Header `model.provider` (else the first `llm.request`'s).
    pub model_provider: Option<String>,
    /// Header `model.name` (else the first `llm.request`'s).
    pub model_name: Option<String>,
    /// How the run ended.
    pub outcome: Outcome,
    /// Status of the last `run.status` record.
    pub last_status: Option<String>,
    /// Records recovered.
    pub record_count: u64,
    /// `llm.request` records.
    pub invocation_count: u64,
    /// Token sums.
    pub tokens: TokenTotals,
    /// First line of the `run.start` input, at most 200 characters.
    pub first_input: Option<String>,
    /// `run.start.ui_context.workspace_root`, else header `runtime.cwd`.
    pub workspace_root: Option<String>,
    /// Damage reports of the tolerant reader over the run that lost bytes (those whose
    /// record was not recovered: [`DamageKind::record_recovered`](session_jsonl::DamageKind::record_recovered)
    /// is false), plus one per `llm.response` whose usage made a token sum saturate.
    pub damage_count: u64,
    /// `ts` of the last record that has one.
    pub last_ts: Option<String>,
    /// Bytes the backend uses to hold the run (the local backend: file size, compressed
    /// for archives).
    pub stored_bytes: u64,
    /// Last write to the run, nanoseconds since the Unix epoch (the local backend: file
    /// modification time).
    pub last_write_unix_ns: i64,
    /// Whether the run is archived (read-only).
    pub archived: bool,
    /// Where the backend keeps it, for messages (the local backend: the file's path relative
    /// to the store root).
    pub location: String,
    /// The host the run came from, when the backend records it (a shared store: the host of
    /// the client that created the run); `None` for local files.
    pub origin_host: Option<String>,
}

/// An opaque keyset position of a listing, from a page's `next_cursor`. Only the backend
/// (and listing kind) that made it can use it; [`PageCursor::as_str`] /
/// [`PageCursor::new`] carry it through command lines and RPC.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PageCursor(String);

impl PageCursor {
    /// A cursor from its token.
    pub fn new(token: impl Into<String>) -> Self {
        PageCursor(token.into())
    }

    /// The token.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for PageCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Query of [`RunCatalogue::list_runs`](crate::RunCatalogue::list_runs): the filters of the
/// `runs` command, all combined with AND.
///
/// Order: newest `started_at_utc` first, then a backend-defined unique key descending; runs
/// without a usable `started_at` come last. Keyset paging: a run present for the whole paging
/// is returned exactly once, whatever is inserted meanwhile.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunListQuery {
    /// Only runs of this session.
    pub session: Option<String>,
    /// Only runs started at or after this instant (RFC 3339, any offset; millisecond
    /// precision). Runs without a usable `started_at` never match a time bound.
    pub since: Option<String>,
    /// Only runs started before this instant (same rules as `since`).
    pub until: Option<String>,
    /// Only runs with this outcome.
    pub outcome: Option<Outcome>,
    /// Only runs whose own workspace root (see [`RunSummary::workspace_root`]) equals this one
    /// after normalisation (trailing separators, `.` and `..` segments).
    pub workspace: Option<String>,
    /// Most runs per page (`None`: all).
    pub limit: Option<usize>,
    /// Continue after this position (a previous page's `next_cursor`).
    pub after: Option<PageCursor>,
}

/// A page of [`RunCatalogue::list_runs`](crate::RunCatalogue::list_runs).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunListPage {
    /// Runs in listing order.
    pub runs: Vec<RunSummary>,
    /// Cursor of the next page; `None` when no further run matches.
    pub next_cursor: Option<PageCursor>,
}

/// The former name of [`RunRead`](session_jsonl::RunRead), the one type for a run read whole
/// ([`RunCatalogue::read_run`](crate::RunCatalogue::read_run) returns it). Kept for one
/// release so that code naming `session_storage::ParsedRun` still builds; its fields
/// `records` and `damage` are unchanged, and it gains `path` and `bytes`.
#[deprecated(
    note = "the run read whole is `session_jsonl::RunRead` (re-exported as `session_storage::RunRead`)"
)]
pub type ParsedRun = session_jsonl::RunRead;

/// The version of a stored session, for compare-and-swap. An opaque token that changes on
/// every save; compare tokens for equality only.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Version(String);

impl Version {
    /// A version from its token (for backends, and for tokens carried through RPC).
    pub fn new(token: impl Into<String>) -> Self {
        Version(token.into())
    }

    /// The token.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a session save or delete expects to find stored.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Expected {
    /// No session with this id (a save creates it).
    Absent,
    /// Exactly this version (from a load or the previous save).
    Version(Version),
    /// Anything: last writer wins (no compare-and-swap).
    Any,
}

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expected::Absent => f.write_str("no session"),
            Expected::Version(v) => write!(f, "version {v}"),
            Expected::Any => f.write_str("any version"),
        }
    }
}

/// One problem found while loading a session's messages (the session still loads with every
/// message that could be kept).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionDamage {
    /// 1-based line of the message (`None` for damage of the whole message list).
    pub line: Option<u64>,
    /// Byte offset of the line in the stored messages.
    pub offset: u64,
    /// Snake-case kind: `torn_tail`, `corrupt`, `not_object`, `missing_role`, `shape`,
    /// `count_mismatch`, `file_changed` (the local backend's kinds), or a backend's own.
    pub kind: String,
    /// Whether the message was still kept (verbatim, so the next save writes it back).
    pub kept: bool,
    /// Human-readable detail.
    pub detail: String,
}

/// A session as loaded by [`SessionStore::load_session`](crate::SessionStore::load_session).
#[derive(Debug, Clone)]
pub struct StoredSession {
    /// The state.
    pub state: SessionState,
    /// Its version: pass it back as [`Expected::Version`] to save with compare-and-swap.
    pub version: Version,
    /// Damaged message lines (skipped or kept raw). Empty for a healthy session.
    pub damage: Vec<SessionDamage>,
    /// Other observations worth telling a user (a migrated legacy snapshot, a repaired lone
    /// surrogate, …), human-readable. Empty for a healthy session.
    pub notes: Vec<String>,
}

/// Query of [`SessionStore::list_sessions`](crate::SessionStore::list_sessions).
///
/// Order: `updated_at` descending, then session id descending. Keyset paging: a session not
/// saved during the paging is returned exactly once; one saved meanwhile moves to the front
/// and is not repeated.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionListQuery {
    /// Only sessions whose workspace root equals this one after normalisation (sessions
    /// without one are left out); `None`: every session.
    pub workspace: Option<String>,
    /// Most sessions per page (`None`: all).
    pub limit: Option<usize>,
    /// Continue after this position (a previous page's `next_cursor`).
    pub after: Option<PageCursor>,
}

/// A page of [`SessionStore::list_sessions`](crate::SessionStore::list_sessions).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SessionListPage {
    /// Sessions in listing order, in the reference's summary shape.
    pub sessions: Vec<SessionStateSummary>,
    /// Cursor of the next page; `None` on the last page.
    pub next_cursor: Option<PageCursor>,
    /// Problems that did not stop the listing (an unreadable legacy snapshot, …),
    /// human-readable.
    pub notes: Vec<String>,
}

/// Who holds (or asks for) a session lease. Shown to the next one who asks while it is held.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct HolderInfo {
    /// The holder's own name (a worker id, `sessions resume`, …).
    pub name: String,
    /// Host name of the holder's machine.
    pub host: String,
    /// Process id of the holder on that host.
    pub pid: u32,
}

impl HolderInfo {
    /// `name` in this process on this host.
    pub fn this_process(name: impl Into<String>) -> HolderInfo {
        HolderInfo {
            name: name.into(),
            host: host_name(),
            pid: std::process::id(),
        }
    }
}

impl fmt::Display for HolderInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (pid {} on {})", self.name, self.pid, self.host)
    }
}

/// This machine's host name (`/proc/sys/kernel/hostname`, else `$HOSTNAME`, else
/// `localhost`).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "localhost".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_bytes_yield_exactly_their_extent() {
        let data = b"0123456789".to_vec();
        let mut r = RunBytes::new(Box::new(io::Cursor::new(data)), 3, 8);
        let mut out = Vec::new();
        r.read_to_end(&mut out).unwrap();
        assert_eq!(out, b"01234");
        assert_eq!((r.start(), r.end(), r.position()), (3, 8, 8));

        let mut short = RunBytes::new(Box::new(io::Cursor::new(b"ab".to_vec())), 0, 5);
        let err = short.read_to_end(&mut Vec::new()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        assert!(err.to_string().contains("byte offset 2"), "{err}");
    }

    #[test]
    fn outcome_spellings_round_trip() {
        for o in [
            Outcome::Completed,
            Outcome::Error,
            Outcome::Cancelled,
            Outcome::Open,
            Outcome::Other("timeout".into()),
        ] {
            assert_eq!(Outcome::parse(o.as_str()), o);
        }
    }

    #[test]
    fn appended_tells_a_pure_retry() {
        let fresh = Appended {
            offset: 10,
            end: 20,
            committed_len: 20,
            already_present: 0,
        };
        assert!(!fresh.was_retry());
        let retry = Appended {
            already_present: 10,
            ..fresh
        };
        assert!(retry.was_retry());
        let partial = Appended {
            already_present: 4,
            ..fresh
        };
        assert!(!partial.was_retry());
    }

    #[test]
    fn holder_of_this_process() {
        let h = HolderInfo::this_process("w");
        assert_eq!(h.pid, std::process::id());
        assert!(!h.host.is_empty());
    }
}
