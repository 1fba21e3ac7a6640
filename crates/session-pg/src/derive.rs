//! Derived columns of runs and lines, computed by the workspace's own tolerant reader
//! (session-jsonl over session-schema), never by PostgreSQL: a line PostgreSQL could not
//! parse is still stored as bytes and flagged here.
//!
//! [`RunFold`] is the running state of one run's summary. Each append feeds it only the new
//! lines ([`RunFold::absorb`]); the state is stored with the run, so a listing never re-reads
//! lines. Fed a run's lines in any split into appends, it ends in the state one pass over the
//! whole run gives, which is what the local run index (session-state) computes for a file:
//! the same record and damage counts, outcome, model, tokens, workspace and first input.

use serde::{Deserialize, Serialize};
use session_jsonl::{DamageKind, Item, Reader, ReaderOptions};
use session_schema::{Record, SCHEMA_VERSION};
use session_storage::{Outcome, RunSummary, TokenTotals};

use crate::text;

/// Longest first-input excerpt, in characters (as the local run index).
pub(crate) const FIRST_INPUT_CHARS: usize = 200;

/// Longest line parsed (as the local run index; longer ones are one `oversized_line`).
pub(crate) const MAX_LINE_LEN: usize = 64 << 20;

/// Whether the first record of the run has been seen, and was a header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum HeaderState {
    /// No record yet: at the end of the input this is `missing_header` (or `empty_file`).
    #[default]
    Pending,
    /// The first record was a header.
    Seen,
    /// The first record was something else (counted as damage once).
    Missing,
}

/// The running summary of one run: every column of a run listing, plus what the fold needs
/// to go on. Serialized with the run (`runs.summary`) as a JSON object.
///
/// Every field but `outcome` is left out of that object while it holds its type's default
/// (`null`, `0`, `false`, `"pending"`): fewer bytes written (and WAL-logged) per row
/// version. Since migration 5 the fields most appends change are stored apart, as a
/// [`RunTally`] in the run's `run_tips` row, and `runs.summary` holds the rest. Reading is unchanged: a missing field is its
/// type's default (`#[serde(default)]`), so a summary written in full by an older build
/// reads the same, and one written here reads the same to an older build (`outcome`, whose
/// default here is `"open"` rather than the type's `""`, is always written).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct RunFold {
    #[serde(skip_serializing_if = "is_default")]
    pub(crate) header_state: HeaderState,
    /// A header record was seen anywhere (its facts were taken).
    #[serde(skip_serializing_if = "is_default")]
    pub(crate) header_seen: bool,
    #[serde(skip_serializing_if = "is_default")]
    pub(crate) header_run_id: Option<String>,
    #[serde(skip_serializing_if = "is_default")]
    pub(crate) session_id: Option<String>,
    #[serde(skip_serializing_if = "is_default")]
    pub(crate) started_at: Option<String>,
    #[serde(skip_serializing_if = "is_default")]
    pub(crate) started_at_utc: Option<String>,
    #[serde(skip_serializing_if = "is_default")]
    pub(crate) header_model: Option<(Option<String>, Option<String>)>,
    #[serde(skip_serializing_if = "is_default")]
    pub(crate) request_model: (Option<String>, Option<String>),
    #[serde(skip_serializing_if = "is_default")]
    pub(crate) header_cwd: Option<String>,
    #[serde(skip_serializing_if = "is_default")]
    pub(crate) ui_root: Option<String>,
    pub(crate) outcome: String,
    #[serde(skip_serializing_if = "is_default")]
    pub(crate) last_status: Option<String>,
    #[serde(skip_serializing_if = "is_default")]
    pub(crate) record_count: u64,
    #[serde(skip_serializing_if = "is_default")]
    pub(crate) invocation_count: u64,
    #[serde(skip_serializing_if = "is_default")]
    pub(crate) input_tokens: u64,
    #[serde(skip_serializing_if = "is_default")]
    pub(crate) cached_input_tokens: u64,
    #[serde(skip_serializing_if = "is_default")]
    pub(crate) cache_creation_tokens: u64,
    #[serde(skip_serializing_if = "is_default")]
    pub(crate) output_tokens: u64,
    #[serde(skip_serializing_if = "is_default")]
    pub(crate) total_tokens: u64,
    #[serde(skip_serializing_if = "is_default")]
    pub(crate) first_input: Option<String>,
    /// Damage that lost bytes (and token sums that saturated), not counting a header still
    /// missing at the end (see [`RunFold::damage_count`]).
    #[serde(skip_serializing_if = "is_default")]
    pub(crate) damage: u64,
    #[serde(skip_serializing_if = "is_default")]
    pub(crate) last_ts: Option<String>,
}

/// The fields of a [`RunFold`] that nearly every append changes (counts, token sums, the
/// last status and time), kept apart from the run row: an append writes them to the run's
/// narrow `run_tips` row (`tally`, as a JSON object without its default fields), and
/// rewrites the run row (`runs.summary`, the fold without these fields) only when a line
/// changes one of the others (the header, the first input, a model, the workspace, the
/// outcome). The names are the fold's own, so a summary written whole by a build before
/// migration 5 reads as a tally too (its other fields are ignored).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct RunTally {
    #[serde(skip_serializing_if = "is_default")]
    record_count: u64,
    #[serde(skip_serializing_if = "is_default")]
    invocation_count: u64,
    #[serde(skip_serializing_if = "is_default")]
    input_tokens: u64,
    #[serde(skip_serializing_if = "is_default")]
    cached_input_tokens: u64,
    #[serde(skip_serializing_if = "is_default")]
    cache_creation_tokens: u64,
    #[serde(skip_serializing_if = "is_default")]
    output_tokens: u64,
    #[serde(skip_serializing_if = "is_default")]
    total_tokens: u64,
    #[serde(skip_serializing_if = "is_default")]
    damage: u64,
    #[serde(skip_serializing_if = "is_default")]
    last_status: Option<String>,
    #[serde(skip_serializing_if = "is_default")]
    last_ts: Option<String>,
}

impl RunFold {
    /// Moves the [`RunTally`] fields out of this fold (leaving their defaults).
    pub(crate) fn take_tally(&mut self) -> RunTally {
        RunTally {
            record_count: std::mem::take(&mut self.record_count),
            invocation_count: std::mem::take(&mut self.invocation_count),
            input_tokens: std::mem::take(&mut self.input_tokens),
            cached_input_tokens: std::mem::take(&mut self.cached_input_tokens),
            cache_creation_tokens: std::mem::take(&mut self.cache_creation_tokens),
            output_tokens: std::mem::take(&mut self.output_tokens),
            total_tokens: std::mem::take(&mut self.total_tokens),
            damage: std::mem::take(&mut self.damage),
            last_status: self.last_status.take(),
            last_ts: self.last_ts.take(),
        }
    }

    /// Sets the [`RunTally`] fields of this fold to `t`'s.
    pub(crate) fn put_tally(&mut self, t: RunTally) {
        self.record_count = t.record_count;
        self.invocation_count = t.invocation_count;
        self.input_tokens = t.input_tokens;
        self.cached_input_tokens = t.cached_input_tokens;
        self.cache_creation_tokens = t.cache_creation_tokens;
        self.output_tokens = t.output_tokens;
        self.total_tokens = t.total_tokens;
        self.damage = t.damage;
        self.last_status = t.last_status;
        self.last_ts = t.last_ts;
    }

    /// This fold without its [`RunTally`] fields: what `runs.summary` holds.
    pub(crate) fn slow_part(&self) -> RunFold {
        let mut slow = self.clone();
        slow.take_tally();
        slow
    }

    /// The fold stored as `summary` (`runs.summary`) and `tally` (`run_tips.tally`), JSON
    /// both.
    ///
    /// # Errors
    /// [`serde_json::Error`] when either is not such JSON.
    pub(crate) fn from_stored(summary: &[u8], tally: &[u8]) -> Result<RunFold, serde_json::Error> {
        let mut fold: RunFold = serde_json::from_slice(summary)?;
        fold.put_tally(serde_json::from_slice(tally)?);
        Ok(fold)
    }
}

/// Whether `v` is its type's default: the fields of [`RunFold`] left out of its JSON.
fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// What the parser found on one stored line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct LineFacts {
    /// `type` of the (first) record recovered from the line.
    pub(crate) record_type: Option<String>,
    /// Its `ts`.
    pub(crate) ts: Option<String>,
    /// Damage kinds reported for the line, comma-separated (`None`: a healthy line).
    pub(crate) damage: Option<String>,
}

impl RunFold {
    /// A fold at the start of a run.
    pub(crate) fn new() -> RunFold {
        RunFold {
            outcome: "open".to_owned(),
            ..RunFold::default()
        }
    }

    /// Feeds complete lines `lines` starting at byte `offset`, line `first_line` of the run;
    /// returns what was found on each line, in order (one entry per `\n`).
    #[cfg(test)]
    pub(crate) fn absorb(&mut self, lines: &[u8], offset: u64, first_line: u64) -> Vec<LineFacts> {
        self.absorb_with(lines, offset, first_line, &mut |_, _, _| {})
    }

    /// [`RunFold::absorb`], handing every recovered record to `on_record` as it is read, with
    /// its byte offset and the record type of its line (the type of the line's first record:
    /// what `run_lines.record_type` stores), so that whoever needs the parsed records (the
    /// search documents of an append) does not parse the lines again.
    pub(crate) fn absorb_with(
        &mut self,
        lines: &[u8],
        offset: u64,
        first_line: u64,
        on_record: &mut dyn FnMut(&Record, u64, Option<&str>),
    ) -> Vec<LineFacts> {
        let count = memchr::memchr_iter(b'\n', lines).count();
        let mut facts = vec![LineFacts::default(); count];
        let options = ReaderOptions {
            max_line_len: MAX_LINE_LEN,
            // The lines are in memory: a buffer the size of the append (at most 1 MiB; a
            // longer line grows it), not a fixed one per call.
            read_size: lines.len().clamp(1, 1 << 20),
            keep_raw: false,
            // Header rules are applied here, with the state carried across appends.
            expect_header: false,
            skim_llm_requests: false,
        };
        let reader = Reader::with_position(lines, options, offset, first_line);
        for item in reader {
            // Reading from memory cannot fail.
            let Ok(item) = item else { continue };
            match item {
                Item::Damage(d) => {
                    if !d.kind.record_recovered() {
                        self.damage = self.damage.saturating_add(1);
                    }
                    note(&mut facts, first_line, d.line, d.kind.as_str());
                }
                Item::Record(r) => {
                    let rec = r.record();
                    let slot = line_slot(&mut facts, first_line, r.line);
                    if let Some(f) = slot {
                        if f.record_type.is_none() {
                            f.record_type = Some(text::pg_text(rec.kind()));
                            f.ts = rec.ts().map(|t| text::pg_text(t.as_str()));
                        }
                        on_record(rec, r.offset, f.record_type.as_deref());
                    } else {
                        on_record(rec, r.offset, None);
                    }
                    match (rec, self.header_state) {
                        (Record::Header(h), HeaderState::Pending) => {
                            self.header_state = HeaderState::Seen;
                            if h.schema_version != SCHEMA_VERSION {
                                let kind = if h.schema_version > SCHEMA_VERSION {
                                    DamageKind::NewerSchemaVersion
                                } else {
                                    DamageKind::UnknownSchemaVersion
                                };
                                note(&mut facts, first_line, r.line, kind.as_str());
                            }
                        }
                        (_, HeaderState::Pending) => {
                            self.header_state = HeaderState::Missing;
                            self.damage = self.damage.saturating_add(1);
                            note(
                                &mut facts,
                                first_line,
                                r.line,
                                DamageKind::MissingHeader.as_str(),
                            );
                        }
                        (Record::Header(_), _) => {
                            note(
                                &mut facts,
                                first_line,
                                r.line,
                                DamageKind::DuplicateHeader.as_str(),
                            );
                        }
                        _ => {}
                    }
                    self.record(rec);
                }
            }
        }
        facts
    }

    /// One recovered record, as the local run index folds it.
    fn record(&mut self, record: &Record) {
        self.record_count = self.record_count.saturating_add(1);
        if !matches!(record, Record::Header(_))
            && let Some(ts) = record.ts()
        {
            self.last_ts = Some(ts.as_str().to_owned());
        }
        match record {
            Record::Header(h) if !self.header_seen => {
                self.header_seen = true;
                self.header_run_id = Some(h.run_id.clone());
                self.session_id = h.session_id.clone();
                self.started_at = Some(h.started_at.as_str().to_owned());
                self.started_at_utc = text::utc_key(h.started_at.as_str());
                if let Some(m) = &h.model {
                    self.header_model = Some((m.provider.clone(), m.name.clone()));
                }
                self.header_cwd = h.runtime.as_ref().and_then(|r| r.cwd.clone());
            }
            Record::RunStart(s) => {
                if self.session_id.is_none() {
                    self.session_id = s.session_id.clone();
                }
                if self.first_input.is_none() {
                    let text = s.input.display_text();
                    let first = text.lines().next().unwrap_or("");
                    self.first_input = Some(first.chars().take(FIRST_INPUT_CHARS).collect());
                }
                if self.ui_root.is_none() {
                    self.ui_root = s
                        .ui_context
                        .as_ref()
                        .and_then(|u| u.workspace_root.clone())
                        .filter(|w| !w.trim().is_empty());
                }
            }
            Record::LlmRequest(r) => {
                self.invocation_count = self.invocation_count.saturating_add(1);
                if self.request_model.0.is_none()
                    && self.request_model.1.is_none()
                    && let Some(m) = &r.model
                {
                    self.request_model = (m.provider.clone(), m.name.clone());
                }
            }
            Record::LlmResponse(r) => {
                if let Some(Some(u)) = &r.output.usage {
                    let mut clamped = false;
                    for (sum, add) in [
                        (&mut self.input_tokens, u.input_tokens),
                        (
                            &mut self.cached_input_tokens,
                            u.input_cached_tokens.flatten().unwrap_or(0),
                        ),
                        (
                            &mut self.cache_creation_tokens,
                            u.input_cache_creation_tokens.flatten().unwrap_or(0),
                        ),
                        (&mut self.output_tokens, u.output_tokens),
                        (&mut self.total_tokens, u.total_tokens),
                    ] {
                        clamped |= add_tokens(sum, add);
                    }
                    if clamped {
                        self.damage = self.damage.saturating_add(1);
                    }
                }
            }
            Record::RunStatus(s) => self.last_status = Some(s.status.as_str().to_owned()),
            // `run.error` is terminal; a later `run.end` has the last word.
            Record::RunError(_) => self.outcome = "error".to_owned(),
            Record::RunEnd(e) => self.outcome = outcome_of_end(e.outcome.as_str()),
            _ => {}
        }
    }

    /// Damage reports that lost bytes, with the file-level report of a run that has no record
    /// yet (`missing_header` or `empty_file`, as a reader at the end of the stored bytes gives).
    pub(crate) fn damage_count(&self) -> u64 {
        let pending = u64::from(self.header_state == HeaderState::Pending);
        self.damage.saturating_add(pending)
    }

    /// Model provider and name: the header's, else the first `llm.request`'s.
    pub(crate) fn model(&self) -> (Option<String>, Option<String>) {
        match &self.header_model {
            Some((p, n)) if p.is_some() || n.is_some() => (p.clone(), n.clone()),
            _ => self.request_model.clone(),
        }
    }

    /// `run.start.ui_context.workspace_root`, else the header's `runtime.cwd`.
    pub(crate) fn workspace_root(&self) -> Option<String> {
        self.ui_root.clone().or_else(|| self.header_cwd.clone())
    }

    /// The summary of run `run_id` (the key it is stored under).
    pub(crate) fn summary(&self, run_id: &str) -> RunSummary {
        let (model_provider, model_name) = self.model();
        RunSummary {
            run_id: run_id.to_owned(),
            header_run_id: self.header_run_id.clone().filter(|h| h != run_id),
            session_id: self.session_id.clone(),
            started_at: self.started_at.clone(),
            started_at_utc: self.started_at_utc.clone(),
            model_provider,
            model_name,
            outcome: Outcome::parse(&self.outcome),
            last_status: self.last_status.clone(),
            record_count: self.record_count,
            invocation_count: self.invocation_count,
            tokens: TokenTotals {
                input: self.input_tokens,
                cached_input: self.cached_input_tokens,
                cache_creation: self.cache_creation_tokens,
                output: self.output_tokens,
                total: self.total_tokens,
            },
            first_input: self.first_input.clone(),
            workspace_root: self.workspace_root(),
            damage_count: self.damage_count(),
            last_ts: self.last_ts.clone(),
            ..RunSummary::default()
        }
    }
}

fn line_slot(facts: &mut [LineFacts], first_line: u64, line: u64) -> Option<&mut LineFacts> {
    let i = usize::try_from(line.checked_sub(first_line)?).ok()?;
    facts.get_mut(i)
}

fn note(facts: &mut [LineFacts], first_line: u64, line: u64, kind: &str) {
    if let Some(f) = line_slot(facts, first_line, line) {
        match &mut f.damage {
            Some(d) if d.split(',').any(|k| k == kind) => {}
            Some(d) => {
                d.push(',');
                d.push_str(kind);
            }
            None => f.damage = Some(kind.to_owned()),
        }
    }
}

/// Adds `add` to a token sum, saturating at `i64::MAX` (the largest `bigint`, as the local
/// index saturates at SQLite's largest integer). Returns whether it saturated.
fn add_tokens(sum: &mut u64, add: u64) -> bool {
    let max = i64::MAX.unsigned_abs();
    let exact = sum.checked_add(add).filter(|&v| v <= max);
    *sum = exact.unwrap_or(max);
    exact.is_none()
}

/// The listed outcome of a `run.end` (as the local run index: the two spellings that would
/// read back as open or nothing are kept as `other:open` / `other:`).
fn outcome_of_end(outcome: &str) -> String {
    match outcome {
        "open" | "" => format!("other:{outcome}"),
        other => other.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = r#"{"type":"header","schema_version":1,"run_id":"r1","session_id":"s1","started_at":"2026-03-04T10:00:00.000+02:00","model":{"provider":"p","name":"n"},"runtime":{"cwd":"/w/cwd"}}"#;

    fn lines(v: &[&str]) -> Vec<u8> {
        let mut out = Vec::new();
        for l in v {
            out.extend_from_slice(l.as_bytes());
            out.push(b'\n');
        }
        out
    }

    #[test]
    fn folding_in_pieces_equals_folding_at_once() {
        let all = lines(&[
            "   ",
            HEADER,
            r#"{"type":"run.start","run_id":"r1","ts":"2026-03-04T08:00:00.010Z","input":{"type":"text","text":"first line\nsecond"},"ui_context":{"workspace_root":"/w/ui"}}"#,
            "not json",
            r#"{"type":"llm.request","run_id":"r1","ts":"2026-03-04T08:00:00.020Z","seq":1,"model":{"provider":"q","name":"m"},"input":{"messages":[]}}"#,
            r#"{"type":"llm.response","run_id":"r1","ts":"2026-03-04T08:00:00.030Z","seq":1,"output":{"messages":[],"usage":{"model":"m","input_tokens":9223372036854775800,"output_tokens":5,"total_tokens":5}}}"#,
            r#"{"type":"llm.response","run_id":"r1","ts":"2026-03-04T08:00:00.040Z","seq":1,"output":{"messages":[],"usage":{"model":"m","input_tokens":100,"output_tokens":5,"total_tokens":5}}}"#,
            HEADER,
            r#"{"type":"run.status","run_id":"r1","ts":"2026-03-04T08:00:00.050Z","status":"completed"}"#,
            r#"{"type":"run.end","run_id":"r1","ts":"2026-03-04T08:00:00.060Z","outcome":"open"}"#,
        ]);
        let mut whole = RunFold::new();
        let whole_facts = whole.absorb(&all, 0, 1);
        assert_eq!(whole.record_count, 8);
        assert_eq!(whole.damage_count(), 2, "corrupt line and one saturation");
        assert_eq!(whole.input_tokens, i64::MAX.unsigned_abs());
        assert_eq!(whole.outcome, "other:open");
        assert_eq!(whole.first_input.as_deref(), Some("first line"));
        assert_eq!(whole.workspace_root().as_deref(), Some("/w/ui"));
        assert_eq!(whole.model(), (Some("p".into()), Some("n".into())));
        assert_eq!(
            whole.started_at_utc.as_deref(),
            Some("2026-03-04T08:00:00.000Z")
        );
        assert_eq!(whole_facts[3].damage.as_deref(), Some("corrupt_line"));
        assert_eq!(whole_facts[7].damage.as_deref(), Some("duplicate_header"));
        assert_eq!(whole_facts[1].record_type.as_deref(), Some("header"));
        // Every split into appends at line boundaries gives the same state and facts.
        let starts: Vec<usize> = std::iter::once(0)
            .chain(memchr::memchr_iter(b'\n', &all).map(|i| i + 1))
            .collect();
        for (cut, &at) in starts.iter().enumerate().take(starts.len() - 1).skip(1) {
            let mut f = RunFold::new();
            let mut facts = f.absorb(&all[..at], 0, 1);
            facts.extend(f.absorb(&all[at..], at as u64, cut as u64 + 1));
            assert_eq!(f, whole, "split at line {}", cut + 1);
            assert_eq!(facts, whole_facts, "facts split at line {}", cut + 1);
        }
    }

    #[test]
    fn summaries_leave_out_default_fields_and_read_back_whole() {
        // A fresh run and a run of statuses: only what differs from the defaults is written.
        let fresh = serde_json::to_vec(&RunFold::new()).unwrap();
        assert_eq!(fresh, br#"{"outcome":"open"}"#);
        let mut status = RunFold::new();
        status.absorb(
            &lines(&[
                HEADER,
                r#"{"type":"run.status","run_id":"r1","ts":"2026-03-04T08:00:00.050Z","status":"running"}"#,
            ]),
            0,
            1,
        );
        let json = serde_json::to_vec(&status).unwrap();
        let text = String::from_utf8_lossy(&json);
        for absent in [
            "tokens",
            "invocation_count",
            "first_input",
            "damage",
            "ui_root",
        ] {
            assert!(!text.contains(absent), "{absent} in {text}");
        }
        assert!(json.len() <= 330, "{} bytes: {text}", json.len());
        assert_eq!(serde_json::from_slice::<RunFold>(&json).unwrap(), status);
        // Every field set: every field written, and read back the same.
        let mut full = RunFold::new();
        full.absorb(
            &lines(&[
                "not json",
                HEADER,
                r#"{"type":"run.start","run_id":"r1","ts":"2026-03-04T08:00:00.010Z","input":{"type":"text","text":"hi"},"ui_context":{"workspace_root":"/w/ui"}}"#,
                r#"{"type":"llm.request","run_id":"r1","ts":"2026-03-04T08:00:00.020Z","seq":1,"model":{"provider":"q","name":"m"},"input":{"messages":[]}}"#,
                r#"{"type":"llm.response","run_id":"r1","ts":"2026-03-04T08:00:00.030Z","seq":1,"output":{"messages":[],"usage":{"model":"m","input_tokens":7,"input_cached_tokens":1,"input_cache_creation_tokens":2,"output_tokens":5,"total_tokens":12}}}"#,
                r#"{"type":"run.status","run_id":"r1","ts":"2026-03-04T08:00:00.050Z","status":"completed"}"#,
                r#"{"type":"run.end","run_id":"r1","ts":"2026-03-04T08:00:00.060Z","outcome":"completed"}"#,
            ]),
            0,
            1,
        );
        let json = serde_json::to_value(&full).unwrap();
        assert_eq!(json.as_object().unwrap().len(), 22, "every field: {json}");
        assert_eq!(serde_json::from_value::<RunFold>(json).unwrap(), full);
        // A summary written in full (an older build: every default field present) reads as
        // the same fold.
        let mut older = serde_json::to_value(&status).unwrap();
        let o = older.as_object_mut().unwrap();
        for (k, v) in [
            ("request_model", serde_json::json!([null, null])),
            ("ui_root", serde_json::Value::Null),
            ("invocation_count", serde_json::json!(0)),
            ("input_tokens", serde_json::json!(0)),
            ("cached_input_tokens", serde_json::json!(0)),
            ("cache_creation_tokens", serde_json::json!(0)),
            ("output_tokens", serde_json::json!(0)),
            ("total_tokens", serde_json::json!(0)),
            ("first_input", serde_json::Value::Null),
            ("damage", serde_json::json!(0)),
        ] {
            o.insert(k.to_owned(), v);
        }
        assert_eq!(serde_json::from_value::<RunFold>(older).unwrap(), status);
    }

    #[test]
    fn summary_and_tally_join_back_into_the_fold() {
        let mut f = RunFold::new();
        f.absorb(
            &lines(&[
                HEADER,
                r#"{"type":"run.start","run_id":"r1","ts":"2026-03-04T08:00:00.010Z","input":{"type":"text","text":"hi"}}"#,
                r#"{"type":"llm.request","run_id":"r1","ts":"2026-03-04T08:00:00.020Z","seq":1,"model":{"provider":"q","name":"m"},"input":{"messages":[]}}"#,
                r#"{"type":"llm.response","run_id":"r1","ts":"2026-03-04T08:00:00.030Z","seq":1,"output":{"messages":[],"usage":{"model":"m","input_tokens":7,"input_cached_tokens":1,"input_cache_creation_tokens":2,"output_tokens":5,"total_tokens":12}}}"#,
                "not json",
                r#"{"type":"run.status","run_id":"r1","ts":"2026-03-04T08:00:00.050Z","status":"running"}"#,
            ]),
            0,
            1,
        );
        let slow = f.slow_part();
        let tally = f.clone().take_tally();
        let (summary, tally) = (
            serde_json::to_vec(&slow).unwrap(),
            serde_json::to_vec(&tally).unwrap(),
        );
        // The summary holds none of what nearly every append changes.
        let text = String::from_utf8_lossy(&summary);
        for absent in ["record_count", "last_ts", "last_status", "tokens", "damage"] {
            assert!(!text.contains(absent), "{absent} in {text}");
        }
        assert!(text.contains("first_input"), "{text}");
        assert_eq!(RunFold::from_stored(&summary, &tally).unwrap(), f);
        // A summary written whole (before migration 5) is its own tally, and a stale tally
        // in it is overridden by the tip's.
        let whole = serde_json::to_vec(&f).unwrap();
        assert_eq!(RunFold::from_stored(&whole, &whole).unwrap(), f);
        let mut later = f.clone();
        later.absorb(
            &lines(&[r#"{"type":"run.status","run_id":"r1","ts":"2026-03-04T08:00:01.000Z","status":"done"}"#]),
            1000,
            7,
        );
        assert_eq!(later.slow_part(), slow, "a status changes only the tally");
        let newer = serde_json::to_vec(&later.clone().take_tally()).unwrap();
        assert_eq!(RunFold::from_stored(&whole, &newer).unwrap(), later);
    }

    #[test]
    fn header_rules_carry_across_appends() {
        let mut f = RunFold::new();
        f.absorb(b"\n\n", 0, 1);
        assert_eq!(f.damage_count(), 1, "no record yet: empty or headerless");
        let facts = f.absorb(
            &lines(&[
                r#"{"type":"run.status","run_id":"x","ts":"2026-03-04T08:00:00.000Z","status":"running"}"#,
            ]),
            2,
            3,
        );
        assert_eq!(f.header_state, HeaderState::Missing);
        assert_eq!(f.damage_count(), 1, "missing header counted once");
        assert_eq!(facts[0].damage.as_deref(), Some("missing_header"));
        let facts = f.absorb(&lines(&[HEADER]), 100, 4);
        assert_eq!(f.damage_count(), 1);
        assert_eq!(facts[0].damage.as_deref(), Some("duplicate_header"));
        assert_eq!(
            f.session_id.as_deref(),
            Some("s1"),
            "the header's facts taken"
        );
    }
}
