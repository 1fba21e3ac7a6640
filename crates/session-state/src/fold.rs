//! The fold of a run file's items into its index row ([`RunFold`]): what a whole read, a
//! bounded read and a resumed read of an open run (`resume.rs`) all accumulate.

use std::path::Path;

use session_jsonl::{Item, Reader};
use session_schema::Record;

use crate::error::{Result, StateError};
use crate::index_read::index_reader_options;
use crate::row::{FIRST_INPUT_CHARS, IndexedRunOutcome, RunRow};
use crate::utc::utc_key;

/// The running fold of a run file's items into its index row: everything the row needs from
/// the items read so far, serializable so that an open run's fold can be kept beside its
/// reader checkpoint (`run_resume`) and continued when the file grows.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct RunFold {
    run_id: String,
    session_id: Option<String>,
    started_at: Option<String>,
    model_provider: Option<String>,
    model_name: Option<String>,
    /// [`IndexedRunOutcome::as_str`].
    outcome: String,
    last_status: Option<String>,
    record_count: u64,
    invocation_count: u64,
    input_tokens: u64,
    cached_input_tokens: u64,
    cache_creation_tokens: u64,
    output_tokens: u64,
    total_tokens: u64,
    first_input: Option<String>,
    damage_count: u64,
    last_ts: Option<String>,
    header_seen: bool,
    damage: DamageTally,
    header_cwd: Option<String>,
    ui_root: Option<String>,
    request_model: (Option<String>, Option<String>),
}

impl RunFold {
    /// An empty fold for the file at `path` (run id from the file name until a header comes).
    pub(crate) fn new(path: &Path) -> RunFold {
        RunFold {
            run_id: path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(session_jsonl::layout::parse_run_file_name)
                .map(|(id, _)| id.to_owned())
                .unwrap_or_default(),
            outcome: IndexedRunOutcome::Open.as_str().to_owned(),
            ..RunFold::default()
        }
    }

    /// Whether no `run.end` or `run.error` came so far.
    pub(crate) fn is_open(&self) -> bool {
        self.outcome == IndexedRunOutcome::Open.as_str()
    }

    /// Folds one item in.
    pub(crate) fn add(&mut self, item: &Item) {
        let rec = match item {
            Item::Damage(d) => {
                self.damage.add(d);
                if !d.kind.record_recovered() || d.kind == session_jsonl::DamageKind::MissingHeader
                {
                    self.damage_count = self.damage_count.saturating_add(1);
                }
                return;
            }
            Item::Record(r) => r,
        };
        self.record_count = self.record_count.saturating_add(1);
        let record = rec.record();
        if !matches!(record, Record::Header(_))
            && let Some(ts) = record.ts()
        {
            self.last_ts = Some(ts.as_str().to_owned());
        }
        match record {
            Record::Header(h) if !self.header_seen => {
                self.header_seen = true;
                self.run_id = h.run_id.clone();
                self.session_id = h.session_id.clone();
                self.started_at = Some(h.started_at.as_str().to_owned());
                if let Some(m) = &h.model {
                    self.model_provider = m.provider.clone();
                    self.model_name = m.name.clone();
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
                        self.damage_count = self.damage_count.saturating_add(1);
                    }
                }
            }
            Record::RunStatus(s) => self.last_status = Some(s.status.as_str().to_owned()),
            // `run.error` is terminal: a run that stops after it failed, whether or
            // not its `run.end` follows. A later `run.end` has the last word.
            Record::RunError(_) => self.outcome = IndexedRunOutcome::Error.as_str().to_owned(),
            Record::RunEnd(e) => {
                self.outcome = outcome_of_end(e.outcome.as_str()).as_str().to_owned()
            }
            _ => {}
        }
    }

    /// The row of the items folded so far (file facts as given), and why the file is not a
    /// run when no `header` came.
    pub(crate) fn finish(
        self,
        path: &Path,
        size: u64,
        mtime: i64,
        compressed: bool,
    ) -> (RunRow, Option<String>) {
        let (model_provider, model_name) =
            if self.model_provider.is_none() && self.model_name.is_none() {
                self.request_model
            } else {
                (self.model_provider, self.model_name)
            };
        let diagnostic =
            (!self.header_seen).then(|| self.damage.not_a_run(size, self.record_count));
        let row = RunRow {
            run_id: self.run_id,
            session_id: self.session_id,
            path: path.to_path_buf(),
            started_at_utc: self.started_at.as_deref().and_then(utc_key),
            started_at: self.started_at,
            model_provider,
            model_name,
            outcome: IndexedRunOutcome::from_stored(&self.outcome),
            last_status: self.last_status,
            record_count: self.record_count,
            invocation_count: self.invocation_count,
            input_tokens: self.input_tokens,
            cached_input_tokens: self.cached_input_tokens,
            cache_creation_tokens: self.cache_creation_tokens,
            output_tokens: self.output_tokens,
            total_tokens: self.total_tokens,
            file_size: size,
            modified_unix_ns: mtime,
            first_input: self.first_input,
            workspace_root: self.ui_root.or(self.header_cwd),
            damage_count: self.damage_count,
            last_ts: self.last_ts,
            compressed,
            partial: false,
            complete_on_read: false,
            other_files: Vec::new(),
            column_damage: Vec::new(),
        };
        (row, diagnostic)
    }
}

/// What the reader found wrong in a file, for saying why a file without a header is no run.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct DamageTally {
    nul_bytes: u64,
    /// Damaged lines other than NUL runs and file-level reports.
    lines: u64,
    /// [`session_jsonl::DamageKind::as_str`] of the first such line.
    first: Option<String>,
}

impl DamageTally {
    fn add(&mut self, d: &session_jsonl::Damage) {
        use session_jsonl::DamageKind as K;
        match d.kind {
            K::NulRun => self.nul_bytes = self.nul_bytes.saturating_add(d.len),
            K::EmptyFile | K::MissingHeader => {}
            k if k.record_recovered() => {}
            k => {
                self.lines += 1;
                self.first.get_or_insert_with(|| k.as_str().to_owned());
            }
        }
    }

    /// The [`RunFileDiagnostic::message`] of a file of `size` bytes without a header.
    fn not_a_run(&self, size: u64, records: u64) -> String {
        if size == 0 {
            "empty file (0 bytes)".to_owned()
        } else if records > 0 {
            format!("no header record: {records} record(s) without one")
        } else if self.lines > 0 {
            format!(
                "no header record: {} damaged line(s), first {}",
                self.lines,
                self.first.as_deref().unwrap_or("damaged")
            )
        } else if self.nul_bytes > 0 {
            format!("only NUL bytes ({} of {size} bytes)", self.nul_bytes)
        } else {
            format!("no content but whitespace ({size} bytes)")
        }
    }
}

/// Adds `add` to the token sum `sum`, saturating at the largest value the index can store
/// (`i64::MAX`: SQLite integers are signed 64-bit). Returns whether the result was clamped.
fn add_tokens(sum: &mut u64, add: u64) -> bool {
    let max = i64::MAX.unsigned_abs();
    let exact = sum.checked_add(add).filter(|&v| v <= max);
    *sum = exact.unwrap_or(max);
    exact.is_none()
}

/// The outcome of a `run.end` record. A value this version does not know is kept verbatim as
/// [`IndexedRunOutcome::Other`]; the two spellings that would read back from the index as
/// [`IndexedRunOutcome::Open`] or as nothing (`open`, the empty string) are stored as `other:open` and
/// `other:`, so a run with a `run.end` is never listed as open.
pub(crate) fn outcome_of_end(outcome: &str) -> IndexedRunOutcome {
    match outcome {
        "completed" => IndexedRunOutcome::Completed,
        "error" => IndexedRunOutcome::Error,
        "cancelled" => IndexedRunOutcome::Cancelled,
        "open" | "" => IndexedRunOutcome::Other(format!("other:{outcome}")),
        other => IndexedRunOutcome::Other(other.to_owned()),
    }
}

/// Reads one run file into a row, and says why the file is not a run when it has no `header`
/// record. `size`/`mtime` are taken before reading, so a file that grows meanwhile is re-read
/// by the next pass.
pub(crate) fn read_run_row(
    path: &Path,
    size: u64,
    mtime: i64,
    compressed: bool,
) -> Result<(RunRow, Option<String>)> {
    let run_err = |e: session_jsonl::JsonlError| StateError::Run {
        path: path.to_path_buf(),
        source: Box::new(e),
    };
    let reader = Reader::open_with(path, index_reader_options()).map_err(run_err)?;
    row_from_items(path, reader, size, mtime, compressed)
}

/// Folds the items of a run file (all of them, or those of its head block) into a row, and
/// says why the file is not a run when no `header` record came.
pub(crate) fn row_from_items(
    path: &Path,
    items: impl Iterator<Item = std::io::Result<Item>>,
    size: u64,
    mtime: i64,
    compressed: bool,
) -> Result<(RunRow, Option<String>)> {
    let mut fold = RunFold::new(path);
    for item in items {
        let item = item.map_err(|e| StateError::Run {
            path: path.to_path_buf(),
            source: Box::new(e),
        })?;
        fold.add(&item);
    }
    Ok(fold.finish(path, size, mtime, compressed))
}
