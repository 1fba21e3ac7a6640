//! `sessions export <run-id|session-id> [--format md|json|jsonl|html] [-o FILE [--force]]
//! [--redact [--redact-pattern REGEX]… [--redact-patterns FILE]…]`.
//!
//! The format is `--format`, else the one `-o FILE`'s extension names, else Markdown
//! ([`ExportArgs::effective_format`]). `--format json` writes one `run_export` or
//! `session_export` document of the JSON contract ([`crate::json_rows`]), streamed record by
//! record.
//!
//! With `--redact` the secrets in the exported text are replaced (see [`crate::redact`]); a
//! JSON or JSONL export keeps every byte outside the changed string literals, but its records
//! are then no longer byte-exact copies of the stored lines, which stderr says.
//!
//! An export is complete or says it is not: every run line that could not be read and every
//! message the saved state lost (a damaged line of `messages/<id>.jsonl`, a file shorter than
//! the row's `message_count`) is named on stderr and in the JSON document, and the command
//! then exits 4 after writing what it could read.

use std::path::{Path, PathBuf};

use session_state::{MessageDamage, MessageDamageKind};

use crate::Ctx;
use crate::cli::{ExportArgs, ExportFormat};
use crate::error::{CliError, EXIT_DATA, EXIT_OK};
use crate::json_rows;
use crate::jsonw::{JsonObj, raw_array};
use crate::redact::Redactor;
use crate::style::escape_controls;
use crate::support::damage::{damage_kind, describe_damage, message_lost, note_parts};
use crate::support::paths::rel;

/// `sessions export ID`: a run or a session in the chosen format, streamed.
///
/// # Errors
/// Usage (2), not found (3) or data (4), as the command's help describes.
pub(crate) fn run(ctx: &mut Ctx<'_>, args: &ExportArgs) -> Result<i32, CliError> {
    if let Some(path) = &args.output {
        check_output(&ctx.root.path, path, args.force)?;
    }
    let redactor = if args.redact.on() {
        Some(Redactor::new(
            &args.redact.redact_pattern,
            &args.redact.redact_patterns,
        )?)
    } else {
        None
    };
    let id = crate::cli::id_or_newest(args.id.as_ref());
    if let Some(shared) = ctx.shared.clone() {
        let found = crate::support::shared::resolve_target(
            ctx,
            &shared,
            id,
            crate::support::ids::Want::Either,
        )?;
        let target = crate::support::target::Target {
            session: found.session,
            state: found.state,
            paths: Vec::new(),
            damage: Vec::new(),
            notes: Vec::new(),
            state_error: None,
        };
        return export_streaming(ctx, args, &target, &found.runs, redactor);
    }
    let target = crate::support::target::resolve_target(ctx, id)?;
    let runs: Vec<crate::backend::RunRef> = target.paths.iter().map(Into::into).collect();
    export_streaming(ctx, args, &target, &runs, redactor)
}

/// The warnings about a session's saved state (damaged message lines, a state that cannot be
/// loaded, notes); whether nothing of it is missing from the export.
fn warn_saved_state(ctx: &mut Ctx<'_>, target: &crate::support::target::Target) -> bool {
    let root = ctx.root.path.clone();
    let mut complete = true;
    for d in &target.damage {
        let lost = message_lost(d);
        complete &= !lost;
        let what = if lost { "export incomplete" } else { "warning" };
        let msg = format!("{what}: {}", describe_damage(&root, d));
        say(ctx, &msg);
    }
    if let (Some(id), Some(why)) = (&target.session, &target.state_error) {
        complete = false;
        say(
            ctx,
            &format!("export incomplete: saved state of session {id} not exported: {why}"),
        );
    }
    for n in &target.notes {
        let (kind, detail, _) = note_parts(&root, n);
        ctx.warn(&format!("saved state: {kind}: {detail}"));
    }
    complete
}

/// `export` in every format, streamed: a first pass over each run file finds its identity,
/// outcome, damage and transcript head (for the warnings and what comes before the records),
/// a second pass writes its records (or transcript entries) one at a time, so memory follows
/// the longest line, not the file.
fn export_streaming(
    ctx: &mut Ctx<'_>,
    args: &ExportArgs,
    target: &crate::support::target::Target,
    runs: &[crate::backend::RunRef],
    mut redactor: Option<Redactor>,
) -> Result<i32, CliError> {
    let root = ctx.root.path.clone();
    let mut summaries = Vec::with_capacity(runs.len());
    for p in runs {
        summaries.push(crate::support::stream::summarize(p)?);
    }
    let mut complete = true;
    for run in &summaries {
        let lost = run.lost_lines();
        if lost > 0 {
            complete = false;
            let first = run.damage.iter().find(|d| !d.kind.record_recovered());
            let at = first.map(|d| format!(" (first: {d})")).unwrap_or_default();
            let msg = format!(
                "export incomplete: {}: {lost} damaged line(s) not exported{at}",
                rel(&root, &run.path)
            );
            say(ctx, &msg);
        }
    }
    complete &= warn_saved_state(ctx, target);
    let mut sink = crate::support::stream::Sink::new(args.output.as_deref(), ctx.out)?;
    let written = match args.effective_format() {
        ExportFormat::Jsonl => stream_jsonl(&mut sink, &summaries, redactor.as_mut()),
        ExportFormat::Md => stream_markdown(&mut sink, target, &mut summaries, redactor.as_mut()),
        ExportFormat::Html => {
            let notes: Vec<String> = target
                .damage
                .iter()
                .map(|d| describe_damage(&root, d))
                .chain(
                    target
                        .state_error
                        .iter()
                        .map(|why| format!("saved state not exported: {why}")),
                )
                .collect();
            crate::support::html::export_page(
                &mut sink,
                target.session.as_deref(),
                target.state.as_ref(),
                &mut summaries,
                &notes,
                redactor.as_mut(),
            )
        }
        _ => stream_json(
            &mut sink,
            &root,
            target,
            &summaries,
            complete,
            redactor.as_mut(),
        ),
    };
    match written {
        Ok(()) => sink.commit()?,
        Err(e) => {
            sink.abandon();
            return Err(e);
        }
    }
    if let Some(r) = &redactor {
        let n = r.replaced();
        let mut msg = format!("--redact: {n} secret(s) replaced");
        if n > 0
            && matches!(
                args.effective_format(),
                ExportFormat::Json | ExportFormat::Jsonl
            )
        {
            msg.push_str("; the records are no longer byte-exact copies of the stored lines");
        }
        say(ctx, &msg);
    }
    Ok(if complete { EXIT_OK } else { EXIT_DATA })
}

/// Markdown written piece by piece as the whole-file export wrote it at once: stored text's
/// control characters escaped, then `--redact` applied (per transcript entry, the unit a
/// secret lives in); under a session's heading, run headings go one level down; trailing
/// blank lines of the document are dropped.
struct MdWriter<'s, 'o, 'r> {
    sink: &'s mut crate::support::stream::Sink<'o>,
    redactor: Option<&'r mut Redactor>,
    /// Newlines at the end of what was given, not yet written (the document's last ones are
    /// collapsed to one).
    pending: usize,
}

impl MdWriter<'_, '_, '_> {
    fn put(&mut self, text: &str) -> Result<(), CliError> {
        let text = escape_controls(text);
        let text = match self.redactor.as_mut() {
            Some(r) => std::borrow::Cow::Owned(r.redact(&text).into_owned()),
            None => text,
        };
        let body = text.trim_end_matches('\n');
        let trailing = text.len() - body.len();
        if body.is_empty() {
            self.pending += trailing;
            return Ok(());
        }
        for _ in 0..self.pending {
            self.sink.write(b"\n")?;
        }
        self.sink.write(body.as_bytes())?;
        self.pending = trailing;
        Ok(())
    }

    /// Markdown of a run: under a session, every heading line gets one more `#`.
    fn put_run(&mut self, md: &str, in_session: bool) -> Result<(), CliError> {
        if !in_session {
            return self.put(md);
        }
        let mut shifted = String::with_capacity(md.len() + 8);
        for line in md.lines() {
            if line.starts_with('#') {
                shifted.push('#');
            }
            shifted.push_str(line);
            shifted.push('\n');
        }
        self.put(&shifted)
    }

    fn finish(self) -> Result<(), CliError> {
        if self.pending > 0 {
            self.sink.write(b"\n")?;
        }
        Ok(())
    }
}

/// `export --format md`, streamed (see [`MdWriter`]): the session heading, then each run's
/// transcript entry by entry.
fn stream_markdown(
    sink: &mut crate::support::stream::Sink<'_>,
    target: &crate::support::target::Target,
    runs: &mut [crate::support::stream::RunSummary],
    redactor: Option<&mut Redactor>,
) -> Result<(), CliError> {
    let session = target.session.as_deref();
    let mut md = MdWriter {
        sink,
        redactor,
        pending: 0,
    };
    if let Some(s) = session {
        md.put(&format!("# Session {s}\n\n"))?;
        if runs.is_empty() {
            md.put("No run files; the saved conversation follows.\n\n")?;
            if let Some(state) = &target.state {
                md.put(&crate::support::render::messages_markdown(state))?;
            }
        } else {
            md.put(&format!("{} run(s), oldest first.\n\n", runs.len()))?;
        }
    }
    for run in runs.iter_mut() {
        let head = session_replay::render_markdown_head(run.transcript.head());
        md.put_run(&head, session.is_some())?;
        let mut ends_in_newline = head.ends_with('\n');
        crate::support::stream::for_each_entry(&run.src, &mut run.transcript, |e, _, _| {
            let text = session_replay::render_markdown_entry(e);
            if !text.is_empty() {
                ends_in_newline = text.ends_with('\n');
            }
            md.put_run(&text, session.is_some())
        })?;
        if !ends_in_newline {
            md.put("\n")?;
        }
        md.put("\n")?;
    }
    md.finish()
}

/// Writes JSON text through the redactor when there is one (string literals are redacted
/// one by one, so a fragment redacts as it would inside the whole document).
fn put_json(
    sink: &mut crate::support::stream::Sink<'_>,
    redactor: &mut Option<&mut Redactor>,
    text: &str,
) -> Result<(), CliError> {
    match redactor {
        Some(r) => sink.write(r.redact_json(text).as_bytes()),
        None => sink.write(text.as_bytes()),
    }
}

/// Every record line exactly as stored, each ended by `\n` (redacted: decoded lossily, its
/// string literals redacted).
fn stream_jsonl(
    sink: &mut crate::support::stream::Sink<'_>,
    runs: &[crate::support::stream::RunSummary],
    mut redactor: Option<&mut Redactor>,
) -> Result<(), CliError> {
    for run in runs {
        crate::support::stream::for_each_record_line(&run.src, |line| {
            match redactor.as_mut() {
                Some(r) => {
                    let text = String::from_utf8_lossy(line);
                    sink.write(r.redact_json(&text).as_bytes())?;
                }
                None => sink.write(line)?,
            }
            sink.write(b"\n")
        })?;
    }
    Ok(())
}

/// An object's text without its closing `}`, to append more keys to.
fn open_object(mut o: JsonObj) -> String {
    let mut text = o.finish();
    text.pop();
    text
}

/// One run as a JSON object ([`run_json`]'s shape), streamed: its fields, then its records
/// byte-exact one at a time.
fn stream_run_json(
    sink: &mut crate::support::stream::Sink<'_>,
    root: &Path,
    run: &crate::support::stream::RunSummary,
    top_level: bool,
    redactor: &mut Option<&mut Redactor>,
) -> Result<(), CliError> {
    let damage: Vec<String> = run
        .damage
        .iter()
        .map(|d| {
            let mut o = JsonObj::new();
            o.str("kind", d.kind.as_str());
            o.unum("line", d.line);
            o.unum("offset", d.offset);
            o.str("message", &d.message);
            o.finish()
        })
        .collect();
    let mut o = JsonObj::new();
    if top_level {
        // The contract's `run_export` (a run inside a `session_export` carries no type).
        o.str("type", "run_export");
    }
    o.str("run_id", &run.meta.run_id);
    o.opt_str("session_id", run.meta.session_id.as_deref());
    o.str("started_at", run.meta.started_at.as_str());
    o.opt_str("outcome", run.outcome.as_deref());
    o.str("file", &rel(root, &run.path));
    o.bool("complete", run.lost_lines() == 0);
    o.raw("damage", &raw_array(damage.iter().map(String::as_str)));
    put_json(sink, redactor, &open_object(o))?;
    sink.write(b",\"records\":[")?;
    let mut first = true;
    crate::support::stream::for_each_record_line(&run.src, |line| {
        if !first {
            sink.write(b",")?;
        }
        first = false;
        put_json(sink, redactor, &crate::jsonw::splice(&record_text(line)))
    })?;
    sink.write(b"]}")
}

/// The JSON document, streamed: one run object, or a session object whose `runs` come last.
fn stream_json(
    sink: &mut crate::support::stream::Sink<'_>,
    root: &Path,
    target: &crate::support::target::Target,
    runs: &[crate::support::stream::RunSummary],
    complete: bool,
    mut redactor: Option<&mut Redactor>,
) -> Result<(), CliError> {
    let Some(s) = target.session.as_deref() else {
        match runs.last() {
            Some(run) => stream_run_json(sink, root, run, true, &mut redactor)?,
            None => sink.write(b"null")?,
        }
        return sink.write(b"\n");
    };
    let mut damage = message_damage(root, &target.damage);
    if let Some(why) = &target.state_error {
        // `verify`'s kind for a session whose saved state cannot be loaded.
        damage.push(json_rows::MessageDamage {
            file: None,
            line: None,
            offset: None,
            kind: "unloadable_session".into(),
            kept: false,
            expected: None,
            found: None,
            message: why.clone(),
        });
    }
    let notes: Vec<json_rows::LoadNote> = target
        .notes
        .iter()
        .map(|n| {
            let (kind, detail, at) = note_parts(root, n);
            let (file, line, offset) = match at {
                Some((file, line, offset)) => (Some(file), Some(line), Some(offset)),
                None => (None, None, None),
            };
            json_rows::LoadNote {
                kind: kind.to_owned(),
                file,
                line,
                offset,
                message: detail,
            }
        })
        .collect();
    // The contract's rows, serialized by serde and spliced through `JsonObj::raw` (which
    // repairs lone surrogates).
    let to_text = |e: serde_json::Error| CliError::Output(e.into());
    let damage: Vec<String> = damage
        .iter()
        .map(|d| serde_json::to_string(d).map_err(to_text))
        .collect::<Result<_, _>>()?;
    let notes: Vec<String> = notes
        .iter()
        .map(|n| serde_json::to_string(n).map_err(to_text))
        .collect::<Result<_, _>>()?;
    let mut o = JsonObj::new();
    o.str("type", "session_export");
    o.str("session_id", s);
    o.bool("complete", complete);
    match &target.state {
        Some(state) => o.ser("state", state),
        None => o.raw("state", "null"),
    };
    o.raw("damage", &raw_array(damage.iter().map(String::as_str)));
    o.raw("notes", &raw_array(notes.iter().map(String::as_str)));
    put_json(sink, &mut redactor, &open_object(o))?;
    sink.write(b",\"runs\":[")?;
    for (i, run) in runs.iter().enumerate() {
        if i > 0 {
            sink.write(b",")?;
        }
        stream_run_json(sink, root, run, false, &mut redactor)?;
    }
    sink.write(b"]}\n")
}

/// One line on stderr, `sessions: <msg>` (the export still goes on).
fn say(ctx: &mut Ctx<'_>, msg: &str) {
    let _ = writeln!(
        ctx.err,
        "sessions: {}",
        escape_controls(msg).replace('\n', " ")
    );
}

/// Refuses (usage, exit 2) an output path inside the store root, whatever spelling or
/// symbolic link leads there, and an existing file unless `force`.
fn check_output(root: &Path, path: &Path, force: bool) -> Result<(), CliError> {
    let show = path.display();
    let Some(name) = path.file_name() else {
        return Err(CliError::Usage(format!(
            "-o {show}: not a file name to write"
        )));
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    let dir = std::fs::canonicalize(&dir).map_err(|e| CliError::io(&dir, e))?;
    let mut dest = dir.join(name);
    if let Ok(real) = std::fs::canonicalize(&dest) {
        // An existing file, or a symbolic link whose target the rename would leave alone but
        // which a reader of the export would follow.
        dest = real;
    }
    let root_real = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_owned());
    // No local root (a shared store, and no HOME to find one): nothing to protect, and the
    // empty path would be a prefix of every path.
    let inside = !root.as_os_str().is_empty()
        && (dest.starts_with(&root_real) || dir.starts_with(&root_real));
    if inside {
        return Err(CliError::Usage(format!(
            "-o {show}: refusing to write inside the store root {} (it could replace a \
             store file); choose a path outside it",
            root.display()
        )));
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => Err(CliError::Usage(format!("-o {show}: is a directory"))),
        Ok(_) if !force => Err(CliError::Usage(format!(
            "-o {show}: file exists; --force replaces it"
        ))),
        _ => Ok(()),
    }
}

/// A stored line as JSON text to splice into a document: the bytes as read, without a BOM or
/// trailing whitespace (a CR), so escapes such as `\/` or `\u00e9` stay as written.
fn record_text(line: &[u8]) -> std::borrow::Cow<'_, str> {
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    let end = line
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(0, |i| i + 1);
    String::from_utf8_lossy(&line[..end])
}

/// The message-log damage of a session (`file`, `line`, `offset`, `kind`, `kept`, `message`;
/// `expected`/`found` for a count mismatch).
fn message_damage(root: &Path, damage: &[MessageDamage]) -> Vec<json_rows::MessageDamage> {
    damage
        .iter()
        .map(|d| {
            let (expected, found) = match &d.kind {
                MessageDamageKind::CountMismatch { expected, found } => {
                    (Some(*expected), Some(*found))
                }
                _ => (None, None),
            };
            json_rows::MessageDamage {
                file: Some(rel(root, &d.path).into_owned()),
                line: d.line,
                offset: Some(d.byte_offset),
                kind: damage_kind(&d.kind).to_owned(),
                kept: !message_lost(d),
                expected,
                found,
                message: d.detail.clone(),
            }
        })
        .collect()
}
