//! Test data of the suite: run lines (healthy and damaged in every way the reader knows),
//! session states, and small helpers shared by the cases.

use std::io::Read;

use session_jsonl::{Item, Reader, ReaderOptions};
use session_schema::{SessionState, parse_session_state};

use super::{Check, Fail, ensure_eq};
use crate::RunCatalogue;
use crate::types::{Extent, LinePosition};

/// A JSON string literal of `s`.
pub(crate) fn js(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

/// One record line with its `\n`.
pub(crate) fn line(json: &str) -> Vec<u8> {
    let mut v = json.as_bytes().to_vec();
    v.push(b'\n');
    v
}

/// What a test run consists of; [`RunSpec::lines`] writes it.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunSpec {
    pub(crate) run_id: String,
    pub(crate) session_id: Option<String>,
    pub(crate) started_at: String,
    /// Header `model`: provider and name.
    pub(crate) model: Option<(String, String)>,
    /// Header `runtime.cwd`.
    pub(crate) cwd: Option<String>,
    /// `run.start.ui_context.workspace_root`.
    pub(crate) ui_root: Option<String>,
    /// `run.start` input text.
    pub(crate) input: String,
    /// `run.end.outcome` (`None`: the run has not ended).
    pub(crate) outcome: Option<String>,
    /// A `run.error` before the end.
    pub(crate) error: bool,
    /// Usage of the one `llm.response`: input, cached input, output, total.
    pub(crate) usage: (u64, u64, u64, u64),
}

impl RunSpec {
    pub(crate) fn new(run_id: &str, started_at: &str) -> RunSpec {
        RunSpec {
            run_id: run_id.to_owned(),
            started_at: started_at.to_owned(),
            input: format!("task of {run_id}\nsecond line"),
            outcome: Some("completed".to_owned()),
            usage: (100, 40, 20, 120),
            ..RunSpec::default()
        }
    }

    pub(crate) fn session(mut self, session_id: &str) -> Self {
        self.session_id = Some(session_id.to_owned());
        self
    }

    /// `ts` of the n-th record after the header: `started_at` when it is a canonical time,
    /// else a fixed time.
    fn ts(&self, n: u32) -> String {
        let base = session_schema::Timestamp::from_raw(self.started_at.clone())
            .unix_millis()
            .unwrap_or(1_767_225_600_000);
        session_schema::Timestamp::from_unix_millis(base + i64::from(n) * 10)
            .as_str()
            .to_owned()
    }

    /// The header line.
    pub(crate) fn header(&self) -> Vec<u8> {
        let mut h = format!(
            r#"{{"type":"header","schema_version":1,"run_id":{},"#,
            js(&self.run_id)
        );
        if let Some(s) = &self.session_id {
            h.push_str(&format!(r#""session_id":{},"#, js(s)));
        }
        h.push_str(&format!(r#""started_at":{}"#, js(&self.started_at)));
        if let Some((p, n)) = &self.model {
            h.push_str(&format!(
                r#","model":{{"provider":{},"name":{}}}"#,
                js(p),
                js(n)
            ));
        }
        if let Some(c) = &self.cwd {
            h.push_str(&format!(r#","runtime":{{"cwd":{}}}"#, js(c)));
        }
        h.push('}');
        line(&h)
    }

    /// Every line after the header, in order.
    pub(crate) fn body(&self) -> Vec<Vec<u8>> {
        let r = js(&self.run_id);
        let mut out = Vec::new();
        let mut start = format!(
            r#"{{"type":"run.start","run_id":{r},"ts":{},"input":{{"type":"text","text":{}}}"#,
            js(&self.ts(1)),
            js(&self.input)
        );
        if let Some(w) = &self.ui_root {
            start.push_str(&format!(r#","ui_context":{{"workspace_root":{}}}"#, js(w)));
        }
        start.push('}');
        out.push(line(&start));
        out.push(line(&format!(
            r#"{{"type":"run.status","run_id":{r},"ts":{},"status":"running"}}"#,
            js(&self.ts(2))
        )));
        out.push(line(&format!(
            r#"{{"type":"llm.request","run_id":{r},"ts":{},"seq":1,"model":{{"provider":"acme","name":"acme-large"}},"input":{{"messages":[{{"role":"user","content":{}}}]}}}}"#,
            js(&self.ts(3)),
            js(&self.input)
        )));
        let (i, c, o, t) = self.usage;
        out.push(line(&format!(
            r#"{{"type":"llm.response","run_id":{r},"ts":{},"seq":1,"output":{{"messages":[{{"role":"assistant","content":"done"}}],"usage":{{"model":"acme-large","input_tokens":{i},"input_cached_tokens":{c},"output_tokens":{o},"total_tokens":{t}}}}}}}"#,
            js(&self.ts(4))
        )));
        if self.error {
            out.push(line(&format!(
                r#"{{"type":"run.error","run_id":{r},"ts":{},"error":{{"name":"ProviderError","message":"overloaded"}}}}"#,
                js(&self.ts(5))
            )));
        }
        if let Some(outcome) = &self.outcome {
            out.push(line(&format!(
                r#"{{"type":"run.status","run_id":{r},"ts":{},"status":{}}}"#,
                js(&self.ts(6)),
                js(outcome)
            )));
            out.push(line(&format!(
                r#"{{"type":"run.end","run_id":{r},"ts":{},"outcome":{}}}"#,
                js(&self.ts(7)),
                js(outcome)
            )));
        }
        out
    }

    /// Header and body as one byte string.
    pub(crate) fn lines(&self) -> Vec<u8> {
        let mut all = self.header();
        for l in self.body() {
            all.extend_from_slice(&l);
        }
        all
    }

    /// `ts` of the last record written.
    pub(crate) fn last_ts(&self) -> String {
        self.ts(if self.outcome.is_some() {
            7
        } else if self.error {
            5
        } else {
            4
        })
    }
}

/// Appends `spec`'s lines to a new run in one append.
pub(crate) fn put_run<B: RunCatalogue + ?Sized>(backend: &B, spec: &RunSpec) -> Check {
    let bytes = spec.lines();
    let done = backend.append_lines(&spec.run_id, 0, &bytes)?;
    ensure_eq!(
        done.end,
        bytes.len() as u64,
        "append of run {}",
        spec.run_id
    );
    Ok(())
}

/// Lines of a run holding every kind of damage the tolerant reader knows that can be stored
/// as complete lines, with what each one is. The first line is a healthy header.
pub(crate) fn damaged_lines(run_id: &str) -> Vec<(&'static str, Vec<u8>)> {
    let r = js(run_id);
    let status = |ts: &str, extra: &str| {
        format!(r#"{{"type":"run.status","run_id":{r},"ts":"{ts}","status":"running"{extra}}}"#)
    };
    let mut nul = vec![0u8; 7];
    nul.extend_from_slice(status("2026-02-03T12:00:00.100Z", "").as_bytes());
    nul.push(b'\n');
    let mut bad_utf8 = status("2026-02-03T12:00:00.200Z", r#","message":"cut "#).into_bytes();
    bad_utf8.truncate(bad_utf8.len() - 1);
    bad_utf8.extend_from_slice(b"\xff\xfe\xc3 here\"}\n");
    let mut crlf = status("2026-02-03T12:00:00.500Z", "").into_bytes();
    crlf.extend_from_slice(b"\r\n");
    let mut garbage_utf8 = b"not json \xff at all".to_vec();
    garbage_utf8.push(b'\n');
    let mut nul_only = vec![0u8; 300];
    nul_only.push(b'\n');
    vec![
        (
            "header",
            line(&format!(
                r#"{{"type":"header","schema_version":1,"run_id":{r},"session_id":"s-damage","started_at":"2026-02-03T12:00:00.000Z"}}"#
            )),
        ),
        (
            "corrupt line",
            line(r#"{"type":"run.status","run_id": ,,, }"#),
        ),
        (
            "schema mismatch",
            line(&format!(
                r#"{{"type":"run.status","run_id":{r},"status":17}}"#
            )),
        ),
        ("NUL run before a record", nul),
        ("NUL bytes only", nul_only),
        ("invalid UTF-8 inside a string", bad_utf8),
        ("invalid UTF-8 garbage", garbage_utf8),
        (
            "lone surrogate escape",
            line(&status(
                "2026-02-03T12:00:00.300Z",
                r#","message":"cut emoji \ud83d here""#,
            )),
        ),
        (
            "two records glued on one line",
            line(&format!(
                "{}{}",
                status("2026-02-03T12:00:00.400Z", ""),
                status("2026-02-03T12:00:00.401Z", "")
            )),
        ),
        ("CRLF line end", crlf),
        ("blank line", b"   \n".to_vec()),
        (
            "unknown record type",
            line(&format!(
                r#"{{"type":"x.acme.note","run_id":{r},"ts":"2026-02-03T12:00:00.600Z","note":"kept"}}"#
            )),
        ),
        (
            "second header",
            line(&format!(
                r#"{{"type":"header","schema_version":1,"run_id":{r},"started_at":"2026-02-03T12:00:00.700Z"}}"#
            )),
        ),
        (
            "sealed torn fragment",
            line(r#"{"type":"run.end","run_id":"x","ts":"2026-02"#),
        ),
    ]
}

/// Whole runs whose damage is about the file as a whole: a BOM with CRLF endings, no header,
/// a newer schema version, a header that is not JSON. `(what, run suffix, bytes)`.
pub(crate) fn file_level_runs() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let mut bom = b"\xef\xbb\xbf".to_vec();
    bom.extend_from_slice(
        br#"{"type":"header","schema_version":1,"run_id":"bom","started_at":"2026-02-03T12:00:00.000Z"}"#,
    );
    bom.extend_from_slice(b"\r\n");
    bom.extend_from_slice(
        br#"{"type":"run.end","run_id":"bom","ts":"2026-02-03T12:00:01.000Z","outcome":"completed"}"#,
    );
    bom.extend_from_slice(b"\r\n");
    vec![
        ("BOM and CRLF", "bom", bom),
        (
            "missing header",
            "noheader",
            line(
                r#"{"type":"run.status","run_id":"noheader","ts":"2026-02-03T12:00:00.000Z","status":"running"}"#,
            ),
        ),
        (
            "newer schema version",
            "newer",
            line(
                r#"{"type":"header","schema_version":2,"run_id":"newer","started_at":"2026-02-03T12:00:00.000Z","future":true}"#,
            ),
        ),
        ("header not JSON", "garbage", line("\u{1}garbage header")),
    ]
}

/// A short projection of an item that two reads must agree on exactly.
pub(crate) fn project(item: &Item) -> String {
    match item {
        Item::Record(r) => format!(
            "record {} at {} line {} len {} raw {:?} surrogates {}",
            r.record().kind(),
            r.offset,
            r.line,
            r.len,
            r.raw,
            r.parsed.lone_surrogates.len()
        ),
        Item::Damage(d) => format!("damage {d:?}"),
    }
}

/// Items of the workspace's reader over `bytes` held in memory: what reading the same bytes
/// from a local file gives.
pub(crate) fn reference_items(bytes: &[u8], from: LinePosition) -> Result<Vec<String>, Fail> {
    let mut opts = options();
    if from.offset != 0 {
        opts.expect_header = false;
    }
    let start = usize::try_from(from.offset)
        .unwrap_or(usize::MAX)
        .min(bytes.len());
    Reader::with_position(&bytes[start..], opts, from.offset, from.line)
        .map(|i| i.map(|i| project(&i)).map_err(Fail::from))
        .collect()
}

/// Items of `backend`'s parsed read of `run_id` from `from`.
pub(crate) fn backend_items<B: RunCatalogue + ?Sized>(
    backend: &B,
    run_id: &str,
    from: LinePosition,
) -> Result<Vec<String>, Fail> {
    backend
        .read_items(run_id, from, options())
        .map_err(Fail::from)?
        .map(|i| i.map(|i| project(&i)).map_err(Fail::from))
        .collect()
}

/// Reader options of the suite: raw bytes kept, small reads (lines span many reads).
pub(crate) fn options() -> ReaderOptions {
    ReaderOptions {
        keep_raw: true,
        read_size: 4096,
        ..ReaderOptions::default()
    }
}

/// Everything from `from` in `extent`.
pub(crate) fn read_from<B: RunCatalogue + ?Sized>(
    backend: &B,
    run_id: &str,
    from: u64,
    extent: Extent,
) -> Result<Vec<u8>, Fail> {
    let mut r = backend.read_bytes(run_id, from, extent)?;
    let mut out = Vec::new();
    r.read_to_end(&mut out)?;
    Ok(out)
}

/// A session state from its JSON document.
pub(crate) fn state(json: &str) -> Result<SessionState, Fail> {
    parse_session_state(json.as_bytes())
        .map(|p| p.value)
        .map_err(|e| Fail::Failed(format!("test session does not parse: {e}")))
}

/// A session with `n` user/assistant message pairs, updated at `updated_at`, in workspace
/// `workspace` (meta `codelia_workspace_root`).
pub(crate) fn session(
    session_id: &str,
    updated_at: &str,
    n: usize,
    workspace: Option<&str>,
) -> Result<SessionState, Fail> {
    let mut messages = Vec::new();
    for i in 0..n {
        messages.push(format!(
            r#"{{"role":"user","content":{}}}"#,
            js(&format!("question {i} of {session_id}"))
        ));
        messages.push(format!(
            r#"{{"role":"assistant","content":{}}}"#,
            js(&format!("answer {i}"))
        ));
    }
    let meta = workspace.map_or_else(String::new, |w| {
        format!(r#","meta":{{"codelia_workspace_root":{}}}"#, js(w))
    });
    state(&format!(
        r#"{{"schema_version":1,"session_id":{},"updated_at":{},"messages":[{}]{meta}}}"#,
        js(session_id),
        js(updated_at),
        messages.join(",")
    ))
}
