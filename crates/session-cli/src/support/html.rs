//! HTML rendering of transcripts: `export --format html` and the pages of `serve`.
//!
//! Built on session-replay's transcript model, like the Markdown export. A page is one
//! self-contained document: inline CSS, images only as `data:` URLs taken from the records, no
//! script, no external request (the exported file carries its own Content-Security-Policy in a
//! `<meta>` tag, so even a mail client or browser that opened it could not load anything).
//!
//! Every piece of stored text goes through [`Html::text`]: redacted when asked, control
//! characters and bidi overrides written visibly (as the terminal output does), then
//! HTML-escaped (`& < > " '`). Nothing read from a store is ever written unescaped.

use std::fmt::Write as _;

use session_replay::{
    Entry, EntryKind, IncompleteReason, Transcript, skipped_lines, transcript_with,
};
use session_schema::{ContentPart, Record, RunInput};

use crate::error::CliError;
use crate::redact::Redactor;
use crate::style::escape_controls;
use crate::support::store::LoadedRun;
use crate::support::stream::{RunSummary, Sink};

/// Text longer than this many lines, or [`LONG_CHARS`] characters, is collapsed in `<details>`.
const LONG_LINES: usize = 12;
/// See [`LONG_LINES`].
const LONG_CHARS: usize = 1500;

/// The inline style sheet of every page.
pub(crate) const STYLE: &str = "\
:root{color-scheme:light dark;--fg:#1d1f21;--bg:#fff;--muted:#6a737d;--line:#d0d7de;\
--user:#eef6ff;--asst:#f6f8fa;--tool:#fbf7ee;--err:#b3261e;--warn:#fff4e5}\
@media (prefers-color-scheme:dark){:root{--fg:#e6e6e6;--bg:#16181c;--muted:#9aa4ae;\
--line:#3a3f46;--user:#1b2a3a;--asst:#20242a;--tool:#2a2619;--err:#ff8a80;--warn:#3a2e17}}\
body{font:15px/1.5 system-ui,-apple-system,'Segoe UI','Noto Sans','Noto Sans CJK JP',\
'Noto Color Emoji',sans-serif;color:var(--fg);background:var(--bg);margin:0 auto;\
max-width:80rem;padding:1rem}\
h1{font-size:1.4rem}h2{font-size:1.2rem;margin-top:2rem}\
pre,code{font:13px/1.4 ui-monospace,'Noto Sans Mono',monospace}\
pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:.3rem 0;padding:.5rem;\
background:var(--asst);border-radius:4px}\
.entry{border-left:3px solid var(--line);padding:.2rem .8rem;margin:.6rem 0}\
.entry>.who{font-weight:600;font-size:.85rem}.entry .ts,.entry .ln{color:var(--muted);\
font-weight:400;margin-left:.5rem}.entry .ln{text-decoration:none}\
.user{background:var(--user);border-color:#3b82f6}.assistant,.final{background:var(--asst)}\
.final{border-color:#16a34a}.reasoning{border-color:#a855f7;color:var(--muted)}\
.tool{background:var(--tool);border-color:#d97706}.error,.damage{border-color:var(--err)}\
.damage,.incomplete{background:var(--warn)}.meta{color:var(--muted);font-size:.85rem;\
border-left-color:transparent;padding-top:0;padding-bottom:0}\
.text{white-space:pre-wrap;overflow-wrap:anywhere}.stderr{border-left:3px solid var(--err)}\
img.input{max-width:100%;max-height:24rem;border:1px solid var(--line);display:block;margin:.3rem 0}\
summary{cursor:pointer;color:var(--muted)}table{border-collapse:collapse}\
td:first-child,td:nth-child(2){white-space:nowrap}\
td,th{padding:.2rem .6rem;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}\
nav a{margin-right:1rem}.muted{color:var(--muted)}";

/// The Content-Security-Policy of an exported file (in a `<meta>` tag): nothing may load
/// except the inline style and `data:` images.
pub(crate) const FILE_CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:";

/// HTML-escapes `s` after writing control characters and bidi overrides visibly.
pub(crate) fn escape(s: &str) -> String {
    let s = escape_controls(s);
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A renderer: escapes (and, with a [`Redactor`], redacts) every stored string it writes.
pub(crate) struct Html<'r> {
    redactor: Option<&'r mut Redactor>,
}

impl<'r> Html<'r> {
    /// A renderer that redacts with `redactor` when given.
    pub(crate) fn new(redactor: Option<&'r mut Redactor>) -> Self {
        Html { redactor }
    }

    /// Stored text made safe to place in HTML (element content or a quoted attribute).
    pub(crate) fn text(&mut self, s: &str) -> String {
        match self.redactor.as_deref_mut() {
            Some(r) => escape(&r.redact(s)),
            None => escape(s),
        }
    }

    /// A block of stored text: `<div class="text">` for prose, `<pre>` for output; collapsed in
    /// `<details>` with `summary` when it is long.
    fn block(&mut self, out: &mut String, text: &str, pre: bool, summary: &str) {
        let body = if text.is_empty() {
            "<span class=\"muted\">(empty)</span>".to_owned()
        } else {
            self.text(text)
        };
        let (open, close) = if pre {
            ("<pre>", "</pre>")
        } else {
            ("<div class=\"text\">", "</div>")
        };
        let lines = text.lines().count();
        if lines > LONG_LINES || text.chars().count() > LONG_CHARS {
            let _ = write!(
                out,
                "<details><summary>{summary} ({lines} lines, {} characters)</summary>{open}{body}{close}</details>",
                text.chars().count()
            );
        } else {
            let _ = write!(out, "{open}{body}{close}");
        }
    }

    /// An `<img>` for a `data:image/…;base64,` URL whose payload is plain base64; any other
    /// URL is shown as text and never loaded.
    fn image(&mut self, out: &mut String, url: &str) {
        if safe_data_image(url) {
            let _ = write!(
                out,
                "<img class=\"input\" alt=\"image from the input\" src=\"{url}\">"
            );
        } else {
            let shown: String = url.chars().take(200).collect();
            let _ = write!(
                out,
                "<div class=\"muted\">[image not embedded: {}]</div>",
                self.text(&shown)
            );
        }
    }

    /// One run's transcript as a `<section>`: a heading (`h`: 1 for a run export, 2 inside a
    /// session), the run's identity, then one `<div class="entry">` per entry. The first entry
    /// of each record has `id="{anchor}L{line}"` and a link to itself; damage the reader
    /// reported is shown where it happened.
    pub(crate) fn run(&mut self, out: &mut String, run: &LoadedRun, h: u8, anchor: &str) {
        let t = transcript_with(&run.read.records, &skipped_lines(&run.read));
        let run_id = t.run_id.clone().unwrap_or_else(|| run.meta.run_id.clone());
        self.run_head(out, &run_id, &t, h, anchor);
        let mut marks = EntryMarks::default();
        for e in &t.entries {
            let pos = e.record.and_then(|i| run.position(i));
            let record = e.record.and_then(|i| run.read.record(i));
            self.entry(out, e, record, pos, &run.read.damage, anchor, &mut marks);
        }
        self.run_end(out);
    }

    /// The start of a run's `<section>` ([`Html::run`]): its heading and identity (only the
    /// head fields of `t` are read).
    pub(crate) fn run_head(
        &mut self,
        out: &mut String,
        run_id: &str,
        t: &Transcript,
        h: u8,
        anchor: &str,
    ) {
        let _ = write!(
            out,
            "<section class=\"run\" id=\"{anchor}run\"><h{h}>Run {}</h{h}><ul class=\"muted\">",
            self.text(run_id)
        );
        if let Some(s) = &t.session_id {
            let _ = write!(out, "<li>Session {}</li>", self.text(s));
        }
        if let Some(s) = &t.started_at {
            let _ = write!(out, "<li>Started {}</li>", self.text(s.as_str()));
        }
        if let Some(m) = &t.model {
            let _ = write!(out, "<li>Model {}</li>", self.text(m));
        }
        out.push_str("</ul>");
    }

    /// The end of a run's `<section>`.
    pub(crate) fn run_end(&mut self, out: &mut String) {
        out.push_str("</section>");
    }

    /// One entry of a run's transcript ([`Html::run`]): `record` is the record it comes from
    /// (its images are shown) and `pos` that record's (line, byte offset), `damage` the run's
    /// damage reports, `marks` what the entries before it anchored and showed.
    #[allow(clippy::too_many_arguments)]
    #[deny(clippy::wildcard_enum_match_arm)]
    pub(crate) fn entry(
        &mut self,
        out: &mut String,
        e: &Entry,
        record: Option<&Record>,
        pos: Option<(u64, u64)>,
        damage: &[session_jsonl::Damage],
        anchor: &str,
        marks: &mut EntryMarks,
    ) {
        let EntryMarks {
            anchored,
            damage_shown,
        } = marks;
        {
            let mut id_attr = String::new();
            let mut link = String::new();
            if let Some((line, _)) = pos {
                if anchored.insert(line) {
                    let _ = write!(id_attr, " id=\"{anchor}L{line}\"");
                }
                let _ = write!(
                    link,
                    "<a class=\"ln\" href=\"#{anchor}L{line}\">line {line}</a>"
                );
            }
            let ts =
                e.ts.as_ref()
                    .map(|t| format!("<span class=\"ts\">{}</span>", self.text(t.as_str())))
                    .unwrap_or_default();
            // Damage the reader repaired on this record's line comes first.
            if let Some((line, _)) = pos {
                for d in damage.iter().filter(|d| d.line == line) {
                    if damage_shown.insert(d.line) {
                        let _ = write!(
                            out,
                            "<div class=\"entry damage\"><div class=\"who\">Damage</div>line {line}: {}: {}; kept as repaired and shown below</div>",
                            self.text(d.kind.as_str()),
                            self.text(&d.message)
                        );
                    }
                }
            }
            let head = |out: &mut String, class: &str, who: &str| {
                let _ = write!(
                    out,
                    "<div class=\"entry {class}\"{id_attr}><div class=\"who\">{who}{ts}{link}</div>"
                );
            };
            match &e.kind {
                EntryKind::UserInput { text, .. } => {
                    head(out, "user", "User");
                    self.block(out, text, false, "User input");
                    if let Some(Record::RunStart(s)) = record
                        && let RunInput::Parts(p) = &s.input
                    {
                        for part in &p.parts {
                            if let ContentPart::ImageUrl(img) = part {
                                self.image(out, &img.image_url.url);
                            }
                        }
                    }
                }
                EntryKind::ModelRequest { seq, model } => {
                    head(out, "meta", "");
                    let m = model
                        .as_deref()
                        .map(|m| format!(" to {}", self.text(m)))
                        .unwrap_or_default();
                    let _ = write!(out, "LLM call {seq}{m}");
                }
                EntryKind::ModelResponse {
                    seq,
                    usage,
                    stop_reason,
                } => {
                    head(out, "meta", "");
                    let _ = write!(out, "LLM answer {seq}");
                    if let Some(r) = stop_reason {
                        let _ = write!(out, " ({})", self.text(r));
                    }
                    if let Some(u) = usage {
                        let _ = write!(
                            out,
                            ": {} in ({} cached), {} out",
                            u.input_tokens,
                            u.input_cached_tokens.flatten().unwrap_or(0),
                            u.output_tokens
                        );
                    }
                }
                EntryKind::Retry {
                    failure_kind,
                    status,
                    next_attempt,
                    max_attempts,
                    delay_ms,
                } => {
                    head(out, "meta", "");
                    let s = session_replay::describe_retry(
                        failure_kind.as_deref(),
                        status.as_deref(),
                        next_attempt.as_deref(),
                        max_attempts.as_deref(),
                        delay_ms.as_deref(),
                    );
                    out.push_str(&self.text(&s));
                }
                EntryKind::Reasoning { text } => {
                    head(out, "reasoning", "Reasoning");
                    self.block(out, text, false, "Reasoning");
                }
                EntryKind::AssistantText { text } => {
                    head(out, "assistant", "Assistant");
                    self.block(out, text, false, "Assistant");
                }
                EntryKind::ToolCall {
                    call_id,
                    tool,
                    args,
                } => {
                    let who = format!(
                        "Tool call <code>{}</code> <span class=\"muted\">{}</span>",
                        self.text(tool),
                        self.text(call_id)
                    );
                    head(out, "tool", &who);
                    let pretty = serde_json::from_str::<serde_json::Value>(args)
                        .ok()
                        .and_then(|v| serde_json::to_string_pretty(&v).ok())
                        .unwrap_or_else(|| args.clone());
                    self.block(out, &pretty, true, "Arguments");
                }
                EntryKind::ToolResult {
                    call_id,
                    tool,
                    output,
                    is_error,
                } => {
                    let err = if *is_error { " — error" } else { "" };
                    let who = format!(
                        "Tool result <code>{}</code> <span class=\"muted\">{}</span>{err}",
                        self.text(tool),
                        self.text(call_id)
                    );
                    head(out, if *is_error { "tool error" } else { "tool" }, &who);
                    self.tool_output(out, output);
                }
                EntryKind::CompactionStarted => {
                    head(out, "meta", "");
                    out.push_str("Compaction started");
                }
                EntryKind::CompactionFinished { compacted } => {
                    head(out, "meta", "");
                    out.push_str(if *compacted {
                        "Compaction finished: history compacted"
                    } else {
                        "Compaction finished: nothing compacted"
                    });
                }
                EntryKind::Status { status, message } => {
                    head(out, "meta", "");
                    let _ = write!(out, "Status {}", self.text(status));
                    if let Some(m) = message {
                        let _ = write!(out, ": {}", self.text(m));
                    }
                }
                EntryKind::Error { name, message } => {
                    head(out, "error", "Error");
                    let _ = write!(out, "<strong>{}</strong>", self.text(name));
                    self.block(out, message, true, "Message");
                }
                EntryKind::Final { text } => {
                    head(out, "final", "Final answer");
                    self.block(out, text, false, "Final answer");
                }
                EntryKind::Outcome { outcome } => {
                    head(out, "meta", "");
                    let _ = write!(out, "<strong>Outcome: {}</strong>", self.text(outcome));
                }
                EntryKind::UnknownRecord { kind, json } => {
                    head(out, "meta", "");
                    let _ = write!(
                        out,
                        "Record of unknown type <code>{}</code>",
                        self.text(kind)
                    );
                    self.block(out, json, true, "Record");
                }
                EntryKind::Skipped { line, kind } => {
                    let _ = write!(
                        out,
                        "<div class=\"entry damage\" id=\"{anchor}L{line}\"><div class=\"who\">Damage</div>"
                    );
                    let d = damage.iter().find(|d| d.line == *line);
                    let _ = write!(
                        out,
                        "line {line}: unreadable record ({}), kept as stored in the file and not shown",
                        self.text(kind.as_str())
                    );
                    if let Some(d) = d {
                        let _ = write!(out, ": {}", self.text(&d.message));
                        if let Some(x) = &d.excerpt {
                            out.push_str("<br>its first bytes:");
                            self.block(out, x, true, "First bytes");
                        }
                    }
                }
                EntryKind::Incomplete { reason } => {
                    head(out, "incomplete", "Incomplete");
                    match reason {
                        IncompleteReason::NoRunEnd => out.push_str(
                            "The log stops before the run ended (no run.end record: the run crashed or is still going).",
                        ),
                        IncompleteReason::TornTail { line } => {
                            let _ = write!(
                                out,
                                "The log stops before the run ended: line {line} is torn (kept as stored in the file and not shown)."
                            );
                        }
                        // `IncompleteReason` is `#[non_exhaustive]` in session-replay; the
                        // lint denied on this function fails the build while a known reason
                        // lands here.
                        _ => out.push_str("The log stops before the run ended."),
                    }
                }
                // `EntryKind` is `#[non_exhaustive]` in session-replay: an entry kind added
                // there lands here until it is listed above, and the lint denied on this
                // function fails the build (`cargo clippy -- -D warnings`) while one does.
                _ => {
                    head(out, "meta", "");
                    out.push_str("(an entry this version cannot show)");
                }
            }
            out.push_str("</div>");
        }
    }

    /// A tool's output: a shell result (a JSON object with `stdout`/`stderr`, as the
    /// reference's shell tool returns) as its command, exit code and the two streams as text;
    /// anything else as preformatted text.
    fn tool_output(&mut self, out: &mut String, output: &str) {
        use session_replay::ToolOutputView;
        match session_replay::view_tool_output(output) {
            ToolOutputView::Shell(sh) => {
                let mut facts = Vec::new();
                if let Some(c) = &sh.command {
                    facts.push(format!("<code>$ {}</code>", self.text(c)));
                }
                let status = sh.status_line();
                if !status.is_empty() {
                    facts.push(self.text(&status));
                }
                if !facts.is_empty() {
                    let _ = write!(out, "<div>{}</div>", facts.join(" · "));
                }
                if !sh.stdout.is_empty() || sh.stderr.is_empty() {
                    self.block(out, &sh.stdout, true, "stdout");
                }
                if !sh.stderr.is_empty() {
                    out.push_str("<div class=\"stderr\">");
                    self.block(out, &sh.stderr, true, "stderr");
                    out.push_str("</div>");
                }
            }
            ToolOutputView::Edit(e) => {
                if let Some(summary) = &e.summary {
                    let _ = write!(out, "<div>{}</div>", self.text(summary));
                }
                self.block(out, &e.diff, true, "Diff");
            }
            ToolOutputView::Json { pretty } => self.block(out, &pretty, true, "Output"),
            _ => self.block(out, output, true, "Output"),
        }
    }

    /// A session's saved messages (for a session that has no run files): one entry per
    /// message with its role, tool calls, text and `data:` images.
    pub(crate) fn messages(&mut self, out: &mut String, state: &session_schema::SessionState) {
        for (n, m) in state.messages.iter().enumerate() {
            let role = m.role().to_owned();
            let class = match role.as_str() {
                "user" => "user",
                "tool" => "tool",
                "reasoning" => "reasoning",
                _ => "assistant",
            };
            let _ = write!(
                out,
                "<div class=\"entry {class}\" id=\"m{}\"><div class=\"who\">{}</div>",
                n + 1,
                self.text(&role)
            );
            for c in m.tool_calls() {
                let _ = write!(
                    out,
                    "<div>Tool call <code>{}</code></div>",
                    self.text(&c.function.name)
                );
                self.block(out, &c.function.arguments, true, "Arguments");
            }
            let text = match m {
                session_schema::BaseMessage::Reasoning(r) => r.content.clone().unwrap_or_default(),
                _ => m.content().map(|c| c.display_string()).unwrap_or_default(),
            };
            if !text.is_empty() {
                if class == "tool" {
                    self.tool_output(out, &text);
                } else {
                    self.block(out, &text, false, "Message");
                }
            }
            if let Some(session_schema::MessageContent::Parts(parts)) = m.content() {
                for p in parts {
                    if let ContentPart::ImageUrl(img) = p {
                        self.image(out, &img.image_url.url);
                    }
                }
            }
            out.push_str("</div>");
        }
    }
}

/// Whether `url` is `data:image/<png|jpeg|gif|webp>;base64,<base64>`: the only image source a
/// page embeds (an `svg` could carry script; any other URL would be a request).
pub(crate) fn safe_data_image(url: &str) -> bool {
    let Some(rest) = url.strip_prefix("data:image/") else {
        return false;
    };
    let Some((kind, data)) = rest.split_once(";base64,") else {
        return false;
    };
    matches!(kind, "png" | "jpeg" | "jpg" | "gif" | "webp")
        && !data.is_empty()
        && data
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
}

/// A whole HTML document: `title` (stored text, escaped here), the page's own CSP in a
/// `<meta>` tag when `csp_meta` is given, the inline style sheet and `body` (already HTML).
/// What the entries of one run shown so far anchored (one `id` per line) and which lines'
/// damage reports they showed, for [`Html::entry`].
#[derive(Debug, Default)]
pub(crate) struct EntryMarks {
    anchored: std::collections::BTreeSet<u64>,
    damage_shown: std::collections::BTreeSet<u64>,
}

pub(crate) fn document(
    title: &str,
    csp_meta: Option<&str>,
    head_extra: &str,
    body: &str,
) -> String {
    let mut out = document_start(title, csp_meta, head_extra, body.len());
    out.push_str(body);
    out.push_str(DOCUMENT_END);
    out
}

/// What follows a page's body ([`document`]).
const DOCUMENT_END: &str = "</body></html>\n";

/// A page up to its `<body>` ([`document`]), with room for `body_len` more bytes.
fn document_start(
    title: &str,
    csp_meta: Option<&str>,
    head_extra: &str,
    body_len: usize,
) -> String {
    let mut out = String::with_capacity(body_len + STYLE.len() + 512);
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    if let Some(csp) = csp_meta {
        let _ = write!(
            out,
            "<meta http-equiv=\"Content-Security-Policy\" content=\"{csp}\">"
        );
    }
    out.push_str("<meta name=\"referrer\" content=\"no-referrer\">");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">");
    let _ = write!(
        out,
        "<title>{}</title><style>{STYLE}</style>{head_extra}</head><body>",
        escape(title)
    );
    out
}

/// The page `export --format html` writes: one run, or a session (its runs oldest first; its
/// saved messages when it has no run files). `notes` are problems found while loading the
/// saved state (already one line each), shown at the top.
pub(crate) fn export_page(
    sink: &mut Sink<'_>,
    session: Option<&str>,
    state: Option<&session_schema::SessionState>,
    runs: &mut [RunSummary],
    notes: &[String],
    redactor: Option<&mut Redactor>,
) -> Result<(), CliError> {
    let mut h = Html::new(redactor);
    let mut body = String::new();
    let title = match session {
        Some(s) => {
            let _ = write!(body, "<h1>Session {}</h1>", h.text(s));
            if runs.is_empty() {
                body.push_str("<p>No run files; the saved conversation follows.</p>");
            } else {
                let _ = write!(body, "<p>{} run(s), oldest first.</p>", runs.len());
            }
            format!("Session {s}")
        }
        None => format!(
            "Run {}",
            runs.first().map(|r| r.meta.run_id.as_str()).unwrap_or("")
        ),
    };
    sink.write(document_start(&title, Some(FILE_CSP), "", 0).as_bytes())?;
    for n in notes {
        let _ = write!(
            body,
            "<div class=\"entry damage\"><div class=\"who\">Damage</div>{}</div>",
            h.text(n)
        );
    }
    if let (Some(state), true) = (state, runs.is_empty()) {
        h.messages(&mut body, state);
    }
    sink.write(body.as_bytes())?;
    for (k, run) in runs.iter_mut().enumerate() {
        let (level, anchor) = if session.is_some() {
            (2, format!("r{}-", k + 1))
        } else {
            (1, String::new())
        };
        // One entry in memory at a time: written out as soon as it is rendered.
        let mut piece = String::new();
        let run_id = run
            .transcript
            .head()
            .run_id
            .clone()
            .unwrap_or_else(|| run.meta.run_id.clone());
        h.run_head(&mut piece, &run_id, run.transcript.head(), level, &anchor);
        sink.write(piece.as_bytes())?;
        let mut marks = EntryMarks::default();
        let damage = std::mem::take(&mut run.damage);
        let path = run.src.clone();
        crate::support::stream::for_each_entry(&path, &mut run.transcript, |e, record, pos| {
            piece.clear();
            h.entry(&mut piece, e, record, pos, &damage, &anchor, &mut marks);
            sink.write(piece.as_bytes())
        })?;
        run.damage = damage;
        piece.clear();
        h.run_end(&mut piece);
        sink.write(piece.as_bytes())?;
    }
    sink.write(DOCUMENT_END.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_covers_markup_quotes_and_controls() {
        assert_eq!(
            escape("<a href='x'>\"&\u{1b}[2J\u{202e}</a>"),
            "&lt;a href=&#39;x&#39;&gt;&quot;&amp;\\u001b[2J\\u202e&lt;/a&gt;"
        );
        assert_eq!(escape("plain 日本語 🤔\n\tok"), "plain 日本語 🤔\n\tok");
    }

    #[test]
    fn only_raster_base64_data_urls_are_embedded() {
        for ok in [
            "data:image/png;base64,iVBORw0KGgo=",
            "data:image/jpeg;base64,/9j/4AAQ",
            "data:image/webp;base64,UklGR+/=",
        ] {
            assert!(safe_data_image(ok), "{ok}");
        }
        for bad in [
            "https://example.com/a.png",
            "http://127.0.0.1/a.png",
            "data:image/svg+xml;base64,PHN2Zz4=",
            "data:text/html;base64,PHNjcmlwdD4=",
            "data:image/png,rawbytes",
            "data:image/png;base64,",
            "data:image/png;base64,AAAA\" onerror=\"alert(1)",
            "data:image/png;base64,AA AA",
            "javascript:alert(1)",
        ] {
            assert!(!safe_data_image(bad), "{bad}");
        }
    }
}
