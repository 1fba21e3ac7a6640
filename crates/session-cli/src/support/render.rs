//! The terminal rendering of transcripts (`sessions show`, the session views of `export` and
//! the web viewer): run heads, entries, saved messages, unknown records.

use std::io::Write;

use session_replay::{Entry, EntryKind, IncompleteReason, Transcript};
use session_schema::{AgentEvent, Record, RunInput};

use crate::Ctx;
use crate::cli::ShowArgs;
use crate::error::{CliError, EXIT_OK};
use crate::style::{Paint, Style, escape_controls as v, one_line};
use crate::timefmt::TimeDisplay;

/// Tool outputs longer than this many lines are clipped in `show` (`export --format md` and
/// `show --raw` give everything).
const TOOL_OUTPUT_LINES: usize = 40;

/// The compact JSON of a record of an unknown type is clipped to this many columns in `show`
/// and `tail` (`export` gives it whole).
pub(crate) const UNKNOWN_RECORD_JSON_WIDTH: usize = 200;

/// `show` of a resolved argument, on either kind of store: the session's heading (and its
/// saved messages when it has no runs), then each run's transcript (`--raw`: its bytes as
/// stored; `--at`: one run from a record on).
pub(crate) fn show_target(
    ctx: &mut Ctx<'_>,
    args: &ShowArgs,
    session: Option<&str>,
    state: Option<&session_schema::SessionState>,
    runs: &[crate::backend::RunRef],
) -> Result<i32, CliError> {
    let times = ctx.times(args.utc);
    if let Some(offset) = args.at {
        let id = crate::cli::id_or_newest(args.id.as_ref());
        let (None, [path]) = (session, runs) else {
            return Err(CliError::Usage(format!(
                "--at OFFSET opens one run at a record; {id} is a session id (use one of its run ids)"
            )));
        };
        show_at(ctx.out, ctx.style, times, path, offset, id)?;
        return Ok(EXIT_OK);
    }
    if let (Some(id), Some(state)) = (session, state)
        && !args.raw
    {
        session_heading(ctx.out, ctx.style, times, id, state, runs.len())?;
        if runs.is_empty() {
            render_messages(ctx.out, ctx.style, state)?;
        }
    }
    for (i, path) in runs.iter().enumerate() {
        if args.raw {
            // Copied as stored, never parsed or held whole.
            write_raw(ctx.out, path)?;
            continue;
        }
        if i > 0 {
            writeln!(ctx.out)?;
        }
        show_streamed(ctx.out, ctx.style, times, path)?;
    }
    Ok(EXIT_OK)
}

/// `show --at OFFSET`: the transcript of the run file at `path` from the record that starts at
/// byte `offset` on (the head first; entries of earlier records left out), streamed like
/// [`show_streamed`] after a first pass that checks a record starts there.
///
/// # Errors
/// Not found (3) when no record starts at `offset`, naming the start of the one before it.
pub(crate) fn show_at(
    out: &mut dyn Write,
    s: Style,
    times: TimeDisplay,
    path: impl Into<crate::backend::RunRef>,
    offset: u64,
    id: &str,
) -> Result<(), CliError> {
    let path: crate::backend::RunRef = path.into();
    let (mut found, mut before) = (false, None);
    crate::support::stream::for_each_item(&path, false, |item| {
        if let session_jsonl::Item::Record(r) = item {
            if r.offset == offset {
                found = true;
            } else if r.offset < offset {
                before = Some(r.offset);
            }
        }
        Ok(())
    })?;
    if !found {
        return Err(CliError::NotFound(format!(
            "no record of run {id} starts at byte offset {offset}{}",
            before
                .map(|b| format!(" (the record before it starts at {b})"))
                .unwrap_or_default()
        )));
    }
    let mut summary = crate::support::stream::summarize(&path)?;
    render_head(out, s, times, summary.transcript.head())?;
    let mut started = false;
    crate::support::stream::for_each_entry(&path, &mut summary.transcript, |e, _, pos| {
        started |= pos.is_some_and(|(_, o)| o >= offset);
        if started {
            render_entry(out, s, times, e)
        } else {
            Ok(())
        }
    })
}

/// Renders the transcript of the run file at `path` in two streamed passes (the head and the
/// call ids with a full `tool.output`, then each record's entries as it is read), so memory
/// follows the longest line, not the file. The output is [`render`]'s of the whole transcript.
pub(crate) fn show_streamed(
    out: &mut dyn Write,
    s: Style,
    times: TimeDisplay,
    path: impl Into<crate::backend::RunRef>,
) -> Result<(), CliError> {
    let path: crate::backend::RunRef = path.into();
    let mut summary = crate::support::stream::summarize(&path)?;
    render_head(out, s, times, summary.transcript.head())?;
    crate::support::stream::for_each_entry(&path, &mut summary.transcript, |e, _, _| {
        render_entry(out, s, times, e)
    })?;
    Ok(())
}

/// Copies a run's bytes as stored (a file decompressed for archives; a stored run with its
/// torn tail, as the file would have it) to `out`, streamed.
pub(crate) fn write_raw(
    out: &mut dyn Write,
    path: impl Into<crate::backend::RunRef>,
) -> Result<(), CliError> {
    let copied = match path.into() {
        crate::backend::RunRef::File(path) => {
            let mut src = session_jsonl::open_run_file(&path)
                .map_err(crate::support::lib_errors::jsonl_err)?;
            std::io::copy(&mut src, out).map_err(|e| (path.display().to_string(), e))
        }
        crate::backend::RunRef::Stored {
            catalogue,
            run_id,
            location,
        } => {
            let mut src = catalogue
                .read_bytes(&run_id, 0, session_storage::Extent::WithTornTail)
                .map_err(|e| crate::support::lib_errors::stored_err(&location, e))?;
            std::io::copy(&mut src, out).map_err(|e| (location, e))
        }
    };
    copied.map_err(|(name, e)| match e.kind() {
        std::io::ErrorKind::BrokenPipe => CliError::Output(e),
        _ => CliError::io(name, e),
    })?;
    Ok(())
}

fn clock(times: TimeDisplay, ts: Option<&session_schema::Timestamp>) -> String {
    match ts {
        Some(ts) => {
            let full = times.show(ts.as_str());
            // `YYYY-MM-DD HH:MM:SS…` → `HH:MM:SS`.
            full.get(11..19).map_or(full.clone(), str::to_owned)
        }
        None => "        ".to_owned(),
    }
}

/// A tool result for the terminal, indented under its heading (each block clipped to
/// [`TOOL_OUTPUT_LINES`]): a shell result as `$ command`, its stdout, its stderr after a
/// `stderr:` line and a dim status line (`exit code 1 · 14 ms`); an edit result as its summary
/// and diff; other JSON indented; text as stored (`session_replay::view_tool_output`).
fn tool_output_text(s: Style, output: &str) -> String {
    use session_replay::ToolOutputView;
    let clip = Some(TOOL_OUTPUT_LINES);
    match session_replay::view_tool_output(output) {
        ToolOutputView::Shell(sh) => {
            let mut text = String::new();
            if let Some(c) = &sh.command {
                text.push_str(&indent(&format!("$ {c}"), clip));
            }
            if !sh.stdout.is_empty() {
                text.push_str(&indent(&sh.stdout, clip));
            }
            if !sh.stderr.is_empty() {
                text.push_str(&format!("           {}\n", s.paint(Paint::Red, "stderr:")));
                text.push_str(&indent(&sh.stderr, clip));
            }
            let status = sh.status_line();
            if !status.is_empty() {
                text.push_str(&format!(
                    "           {}\n",
                    s.paint(Paint::Dim, &v(&status))
                ));
            }
            text
        }
        ToolOutputView::Edit(e) => {
            let mut text = String::new();
            if let Some(summary) = &e.summary {
                text.push_str(&indent(summary, None));
            }
            text.push_str(&indent(&e.diff, clip));
            text
        }
        ToolOutputView::Json { pretty } => indent(&pretty, clip),
        _ => indent(output, clip),
    }
}

fn indent(text: &str, max_lines: Option<usize>) -> String {
    let text = v(text);
    let mut out = String::new();
    let total = text.lines().count();
    for (n, line) in text.lines().enumerate() {
        if max_lines.is_some_and(|m| n >= m) {
            out.push_str(&format!(
                "           … {} more lines (see `sessions export` or `show --raw`)\n",
                total - n
            ));
            break;
        }
        out.push_str("           ");
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The head of a transcript for a terminal or a pager (run, session, start, model), printed
/// before its entries ([`render_entry`], one block per entry with its time); only the head
/// fields of `t` are read. Every text taken from the log goes through [`v`]
/// (`escape_controls`): control characters other than `\n` and `\t` are shown as
/// `\u001b`-style escapes, never sent to the terminal.
fn render_head(
    out: &mut dyn Write,
    s: Style,
    times: TimeDisplay,
    t: &Transcript,
) -> Result<(), CliError> {
    let run = v(t.run_id.as_deref().unwrap_or("(unknown run)"));
    writeln!(
        out,
        "{} {}",
        s.paint(Paint::Bold, "Run"),
        s.paint(Paint::Bold, &run)
    )?;
    if let Some(sess) = &t.session_id {
        writeln!(out, "  session  {}", v(sess))?;
    }
    if let Some(ts) = &t.started_at {
        writeln!(out, "  started  {}", v(&times.show(ts.as_str())))?;
    }
    if let Some(m) = &t.model {
        writeln!(out, "  model    {}", v(m))?;
    }
    writeln!(out)?;
    Ok(())
}

/// One transcript entry as [`render`] shows it. A record of an unknown type shows as
/// `HH:MM:SS unknown record <type>` and its compact JSON clipped to
/// [`UNKNOWN_RECORD_JSON_WIDTH`] columns on the next line.
#[deny(clippy::wildcard_enum_match_arm)]
fn render_entry(
    out: &mut dyn Write,
    s: Style,
    times: TimeDisplay,
    e: &Entry,
) -> Result<(), CliError> {
    {
        let at = s.paint(Paint::Dim, &v(&clock(times, e.ts.as_ref())));
        match &e.kind {
            EntryKind::UserInput { text, .. } => {
                writeln!(out, "{at} {}", s.paint(Paint::Cyan, "user"))?;
                out.write_all(indent(text, None).as_bytes())?;
            }
            EntryKind::ModelRequest { seq, model } => {
                let m = model
                    .as_deref()
                    .map(|m| format!(" ({})", v(m)))
                    .unwrap_or_default();
                writeln!(
                    out,
                    "{at} {}",
                    s.paint(Paint::Dim, &format!("→ llm #{seq}{m}"))
                )?;
            }
            EntryKind::ModelResponse {
                seq,
                usage,
                stop_reason,
            } => {
                let mut line = format!("← llm #{seq}");
                if let Some(u) = usage {
                    line.push_str(&format!(
                        " · {} in / {} out tokens",
                        u.input_tokens, u.output_tokens
                    ));
                }
                if let Some(r) = stop_reason {
                    line.push_str(&format!(" · {r}"));
                }
                writeln!(out, "{at} {}", s.paint(Paint::Dim, &v(&line)))?;
            }
            EntryKind::Retry {
                failure_kind,
                status,
                next_attempt,
                max_attempts,
                delay_ms,
            } => {
                let mut line = "retry".to_owned();
                if let Some(k) = failure_kind {
                    line.push_str(&format!(" · {k}"));
                }
                if let Some(st) = status {
                    line.push_str(&format!(" · HTTP {st}"));
                }
                if let (Some(n), Some(m)) = (next_attempt, max_attempts) {
                    line.push_str(&format!(" · attempt {n}/{m}"));
                }
                if let Some(d) = delay_ms {
                    line.push_str(&format!(" · after {d} ms"));
                }
                writeln!(out, "{at} {}", s.paint(Paint::Yellow, &v(&line)))?;
            }
            EntryKind::Reasoning { text } => {
                writeln!(out, "{at} {}", s.paint(Paint::Dim, "reasoning"))?;
                out.write_all(s.paint(Paint::Dim, &indent(text, None)).as_bytes())?;
            }
            EntryKind::AssistantText { text } => {
                writeln!(out, "{at} {}", s.paint(Paint::Green, "assistant"))?;
                out.write_all(indent(text, None).as_bytes())?;
            }
            EntryKind::ToolCall {
                call_id,
                tool,
                args,
            } => {
                writeln!(
                    out,
                    "{at} {} {} {}",
                    s.paint(Paint::Magenta, "tool call"),
                    s.paint(Paint::Bold, &v(tool)),
                    s.paint(Paint::Dim, &v(call_id))
                )?;
                out.write_all(indent(args, Some(TOOL_OUTPUT_LINES)).as_bytes())?;
            }
            EntryKind::ToolResult {
                call_id,
                tool,
                output,
                is_error,
            } => {
                let label = if *is_error {
                    s.paint(Paint::Red, "tool error")
                } else {
                    s.paint(Paint::Magenta, "tool result")
                };
                writeln!(
                    out,
                    "{at} {label} {} {}",
                    s.paint(Paint::Bold, &v(tool)),
                    s.paint(Paint::Dim, &v(call_id))
                )?;
                out.write_all(tool_output_text(s, output).as_bytes())?;
            }
            EntryKind::CompactionStarted => {
                writeln!(out, "{at} {}", s.paint(Paint::Yellow, "compaction started"))?;
            }
            EntryKind::CompactionFinished { compacted } => {
                let what = if *compacted {
                    "compaction finished: history compacted"
                } else {
                    "compaction finished: nothing compacted"
                };
                writeln!(out, "{at} {}", s.paint(Paint::Yellow, what))?;
            }
            EntryKind::Status { status, message } => {
                let m = message
                    .as_deref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default();
                writeln!(
                    out,
                    "{at} {}",
                    s.paint(Paint::Yellow, &v(&format!("status {status}{m}")))
                )?;
            }
            EntryKind::Error { name, message } => {
                writeln!(
                    out,
                    "{at} {}",
                    s.paint(Paint::Red, &v(&format!("error {name}: {message}")))
                )?;
            }
            EntryKind::Final { text } => {
                writeln!(out, "{at} {}", s.paint(Paint::Green, "final"))?;
                out.write_all(indent(text, None).as_bytes())?;
            }
            EntryKind::Outcome { outcome } => {
                let paint = match outcome.as_str() {
                    "completed" => Paint::Green,
                    "cancelled" => Paint::Yellow,
                    _ => Paint::Red,
                };
                writeln!(
                    out,
                    "{at} {}",
                    s.paint(paint, &v(&format!("run {outcome}")))
                )?;
            }
            EntryKind::Skipped { line, kind } => {
                writeln!(
                    out,
                    "{at} {}",
                    s.paint(
                        Paint::Red,
                        &format!("line {line} skipped ({})", kind.as_str())
                    )
                )?;
            }
            EntryKind::Incomplete { reason } => {
                let why = match reason {
                    IncompleteReason::NoRunEnd => {
                        "no run.end: the run is still being written or its process died".to_owned()
                    }
                    IncompleteReason::TornTail { line } => {
                        format!("the log ends in a torn line (line {line})")
                    }
                    // `IncompleteReason` is `#[non_exhaustive]` in session-replay; the lint
                    // denied on this function fails the build while a known reason lands here.
                    _ => "the log stops before the run ended".to_owned(),
                };
                writeln!(
                    out,
                    "{at} {}",
                    s.paint(Paint::Red, &format!("incomplete: {why}"))
                )?;
            }
            EntryKind::UnknownRecord { kind, json } => {
                writeln!(
                    out,
                    "{at} {}",
                    s.paint(Paint::Yellow, &v(&format!("unknown record {kind}")))
                )?;
                writeln!(
                    out,
                    "           {}",
                    crate::style::one_line(json, UNKNOWN_RECORD_JSON_WIDTH)
                )?;
            }
            // `EntryKind` is `#[non_exhaustive]` in session-replay: an entry kind added there
            // lands here until it is listed above, and the lint denied on this function fails
            // the build (`cargo clippy -- -D warnings`) while one does.
            _ => {
                writeln!(
                    out,
                    "{at} {}",
                    s.paint(Paint::Yellow, "(an entry this version cannot show)")
                )?;
            }
        }
    }
    Ok(())
}

/// One block about a session's saved state, printed before its runs.
pub(crate) fn session_heading(
    out: &mut dyn Write,
    s: Style,
    times: TimeDisplay,
    id: &str,
    state: &session_schema::SessionState,
    runs: usize,
) -> Result<(), CliError> {
    writeln!(
        out,
        "{} {}",
        s.paint(Paint::Bold, "Session"),
        s.paint(Paint::Bold, id)
    )?;
    writeln!(
        out,
        "  updated  {}",
        v(&times.show(state.updated_at.as_str()))
    )?;
    writeln!(
        out,
        "  saved    {} message(s), {runs} run file(s)",
        state.messages.len()
    )?;
    writeln!(out)?;
    Ok(())
}

/// The saved conversation of a session without run files (a legacy snapshot, for example).
pub(crate) fn render_messages(
    out: &mut dyn Write,
    s: Style,
    state: &session_schema::SessionState,
) -> Result<(), CliError> {
    for m in &state.messages {
        let (label, paint) = match m.role() {
            "user" => ("user", Paint::Cyan),
            "assistant" => ("assistant", Paint::Green),
            "tool" => ("tool result", Paint::Magenta),
            "system" => ("system", Paint::Dim),
            "reasoning" => ("reasoning", Paint::Dim),
            other => (other, Paint::Yellow),
        };
        writeln!(out, "{}", s.paint(paint, &v(label)))?;
        for c in m.tool_calls() {
            writeln!(
                out,
                "           tool call {} {}",
                v(&c.function.name),
                v(&c.function.arguments)
            )?;
        }
        let text = match m {
            session_schema::BaseMessage::Reasoning(r) => r.content.clone().unwrap_or_default(),
            _ => m.content().map(|c| c.display_string()).unwrap_or_default(),
        };
        if m.role() == "tool" && !text.is_empty() {
            out.write_all(tool_output_text(s, &text).as_bytes())?;
        } else if !text.is_empty() {
            out.write_all(indent(&text, Some(TOOL_OUTPUT_LINES)).as_bytes())?;
        }
    }
    Ok(())
}

/// The saved conversation as Markdown (for `export --format md` of a session without runs).
/// Control characters are left as they are: the caller escapes the whole document.
pub(crate) fn messages_markdown(state: &session_schema::SessionState) -> String {
    let mut out = String::new();
    for m in &state.messages {
        out.push_str(&format!("## {}\n\n", m.role()));
        for c in m.tool_calls() {
            out.push_str(&format!(
                "Tool call `{}`: `{}`\n\n",
                c.function.name, c.function.arguments
            ));
        }
        let text = match m {
            session_schema::BaseMessage::Reasoning(r) => r.content.clone().unwrap_or_default(),
            _ => m.content().map(|c| c.display_string()).unwrap_or_default(),
        };
        if m.role() == "tool" && !text.is_empty() {
            out.push_str(&session_replay::tool_output_markdown(&text));
            out.push('\n');
        } else if !text.is_empty() {
            out.push_str(&text);
            out.push_str("\n\n");
        }
    }
    out
}

/// One line saying what a record holds; for a record of an unknown type its compact JSON
/// (the caller clips it).
#[deny(clippy::wildcard_enum_match_arm)]
pub(crate) fn describe(rec: &Record) -> String {
    match rec {
        Record::Header(h) => {
            let model = h.model.as_ref().map(|m| {
                format!(
                    "{}/{}",
                    m.provider.as_deref().unwrap_or("?"),
                    m.name.as_deref().unwrap_or("?")
                )
            });
            format!(
                "run {} session {}{}",
                h.run_id,
                h.session_id.as_deref().unwrap_or("-"),
                model.map(|m| format!(" model {m}")).unwrap_or_default()
            )
        }
        Record::RunStart(r) => {
            let text = match &r.input {
                RunInput::Text(t) => t.text.clone(),
                RunInput::Parts(_) | RunInput::Unknown(_) => r.input.display_text(),
                // An input shape a newer session-schema adds.
                _ => r.input.display_text(),
            };
            one_line(&text, 100)
        }
        Record::RunContext(r) => format!("context left {}%", r.context_left_percent),
        Record::AgentEvent(e) => {
            let detail = match &e.event {
                AgentEvent::Text(t) | AgentEvent::Reasoning(t) => {
                    one_line(t.content.as_deref().unwrap_or(""), 80)
                }
                AgentEvent::ToolCall(t) => format!(
                    "{} {}",
                    t.tool.as_deref().unwrap_or("?"),
                    t.tool_call_id.as_deref().unwrap_or("")
                ),
                AgentEvent::ToolResult(t) => format!(
                    "{} {}{}",
                    t.tool.as_deref().unwrap_or("?"),
                    t.tool_call_id.as_deref().unwrap_or(""),
                    if t.is_error == Some(true) {
                        " (error)"
                    } else {
                        ""
                    }
                ),
                AgentEvent::Final(c) => one_line(c.content.as_deref().unwrap_or(""), 80),
                AgentEvent::LlmRetry(r) => format!(
                    "{} attempt {}",
                    r.failure_kind
                        .as_ref()
                        .map(|k| k.as_str().to_owned())
                        .unwrap_or_default(),
                    r.next_attempt
                        .as_ref()
                        .map(|n| n.to_string())
                        .unwrap_or_default()
                ),
                AgentEvent::StepStart(_)
                | AgentEvent::StepComplete(_)
                | AgentEvent::PermissionPreview(_)
                | AgentEvent::PermissionReady(_)
                | AgentEvent::CompactionStart(_)
                | AgentEvent::CompactionComplete(_)
                | AgentEvent::HiddenUserMessage(_)
                | AgentEvent::Unknown(_) => String::new(),
                // `AgentEvent` is `#[non_exhaustive]` in session-schema; the lint denied on
                // this function fails the build while a known event type lands here.
                _ => String::new(),
            };
            format!("#{} {} {}", e.seq, event_type(&e.event), detail)
                .trim_end()
                .to_owned()
        }
        Record::ToolOutput(t) => format!(
            "{} {} ({} bytes){}",
            t.tool,
            t.tool_call_id,
            t.result_raw.len(),
            if t.is_error == Some(true) {
                " error"
            } else {
                ""
            }
        ),
        Record::LlmRequest(r) => format!(
            "#{} {}",
            r.seq,
            r.model
                .as_ref()
                .and_then(|m| m.name.clone())
                .unwrap_or_default()
        )
        .trim_end()
        .to_owned(),
        Record::LlmResponse(r) => {
            let usage = match &r.output.usage {
                Some(Some(u)) => format!(" {} in / {} out tokens", u.input_tokens, u.output_tokens),
                _ => String::new(),
            };
            let stop = match &r.output.stop_reason {
                Some(Some(s)) => format!(" · {s}"),
                _ => String::new(),
            };
            format!("#{}{usage}{stop}", r.seq)
        }
        Record::RunStatus(r) => match &r.message {
            Some(m) => format!("{}: {}", r.status.as_str(), one_line(m, 80)),
            None => r.status.as_str().to_owned(),
        },
        Record::RunError(r) => format!("{}: {}", r.error.name, one_line(&r.error.message, 80)),
        Record::RunEnd(r) => r.outcome.as_str().to_owned(),
        Record::Unknown(_) => serde_json::to_string(rec).unwrap_or_default(),
        // `Record` is `#[non_exhaustive]` in session-schema; the lint denied on this function
        // fails the build while a known record type lands here.
        _ => serde_json::to_string(rec).unwrap_or_default(),
    }
}

/// The `type` of an agent event as written.
pub(crate) fn event_type(e: &AgentEvent) -> &str {
    e.tag()
}
