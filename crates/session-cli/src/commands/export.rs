//! `sessions export <run-id|session-id> --format md|json|jsonl [-o FILE]`.

use std::io::Write;
use std::path::Path;

use crate::Ctx;
use crate::cli::{ExportArgs, ExportFormat};
use crate::error::{CliError, EXIT_OK};
use crate::jsonw::{JsonObj, raw_array};
use crate::store::{LoadedRun, load_run_file, rel};

pub(crate) fn export(ctx: &mut Ctx<'_>, args: &ExportArgs) -> Result<i32, CliError> {
    let target = super::resolve_target(ctx, &args.id)?;
    let mut runs = Vec::with_capacity(target.paths.len());
    for p in &target.paths {
        runs.push(load_run_file(p, true)?);
    }
    for run in &runs {
        let lost = run
            .damage
            .iter()
            .filter(|d| !d.kind.record_recovered())
            .count();
        if lost > 0 {
            let first = run.damage.iter().find(|d| !d.kind.record_recovered());
            let at = first.map(|d| format!(" (first: {d})")).unwrap_or_default();
            let msg = format!(
                "{}: {lost} damaged line(s) not exported{at}",
                rel(&ctx.root.path, &run.path)
            );
            ctx.warn(&msg);
        }
    }
    let body = match args.format {
        ExportFormat::Md => markdown(&target, &runs),
        ExportFormat::Json => json(ctx, &target, &runs)?,
        ExportFormat::Jsonl => jsonl(&runs)?,
    };
    match &args.output {
        Some(path) => write_file(path, body.as_bytes())?,
        None => ctx.out.write_all(body.as_bytes())?,
    }
    Ok(EXIT_OK)
}

/// Writes `bytes` to `path` through a temporary file in the same directory and a rename, so a
/// failed export never leaves a half-written file behind.
fn write_file(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => std::path::PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "export".into());
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let res = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    res.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        CliError::io(path, e)
    })
}

fn markdown(target: &super::Target, runs: &[LoadedRun]) -> String {
    let session = target.session.as_deref();
    let mut out = String::new();
    if let Some(s) = session {
        out.push_str(&format!("# Session {s}\n\n"));
        if runs.is_empty() {
            out.push_str("No run files; the saved conversation follows.\n\n");
            if let Some(state) = &target.state {
                out.push_str(&super::show::messages_markdown(state));
            }
        } else {
            out.push_str(&format!("{} run(s), oldest first.\n\n", runs.len()));
        }
    }
    for run in runs {
        let t = session_replay::transcript_with(&run.log.records, &run.log.skipped);
        let md = session_replay::render_markdown(&t);
        if session.is_some() {
            // Runs become second-level sections under the session heading.
            for line in md.lines() {
                if line.starts_with('#') {
                    out.push('#');
                }
                out.push_str(line);
                out.push('\n');
            }
        } else {
            out.push_str(&md);
        }
        if !md.ends_with('\n') {
            out.push('\n');
        }
        out.push('\n');
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

/// One run as a JSON object: identity, outcome, damage and the records byte-exact.
pub(crate) fn run_json(root: &Path, run: &LoadedRun) -> Result<String, CliError> {
    let records: Vec<std::borrow::Cow<'_, str>> = run
        .json
        .iter()
        .map(|b| String::from_utf8_lossy(b))
        .collect();
    let outcome = run.log.records.iter().rev().find_map(|r| match r {
        session_schema::Record::RunEnd(e) => Some(e.outcome.as_str().to_owned()),
        _ => None,
    });
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
    o.str("run_id", &run.log.meta.run_id);
    o.opt_str("session_id", run.log.meta.session_id.as_deref());
    o.str("started_at", run.log.meta.started_at.as_str());
    o.opt_str("outcome", outcome.as_deref());
    o.str("file", &rel(root, &run.path));
    o.raw("damage", &raw_array(damage.iter().map(String::as_str)));
    o.raw("records", &raw_array(records.iter().map(|c| c.as_ref())));
    Ok(o.finish())
}

fn json(ctx: &Ctx<'_>, target: &super::Target, runs: &[LoadedRun]) -> Result<String, CliError> {
    let session = target.session.as_deref();
    let root = &ctx.root.path;
    let mut run_objs = Vec::with_capacity(runs.len());
    for run in runs {
        run_objs.push(run_json(root, run)?);
    }
    let mut text = match session {
        None => run_objs.pop().unwrap_or_else(|| "null".into()),
        Some(s) => {
            let mut o = JsonObj::new();
            o.str("session_id", s);
            match &target.state {
                Some(state) => o.ser("state", state),
                None => o.raw("state", "null"),
            };
            o.raw("runs", &raw_array(run_objs.iter().map(String::as_str)));
            o.finish()
        }
    };
    text.push('\n');
    Ok(text)
}

fn jsonl(runs: &[LoadedRun]) -> Result<String, CliError> {
    let mut out = String::new();
    for run in runs {
        for bytes in &run.json {
            out.push_str(&String::from_utf8_lossy(bytes));
            out.push('\n');
        }
    }
    Ok(out)
}
