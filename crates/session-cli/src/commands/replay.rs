//! `sessions replay <run-id> [--seq N]`: the prompt of one invocation as JSON.

use crate::Ctx;
use crate::cli::ReplayArgs;
use crate::error::{CliError, EXIT_OK};
use crate::json_rows::{self, OverInclusive, PromptRow, Row, write_row};
use crate::support::store::{load_run_file, locate_run};

/// `sessions replay ID`: the exact prompt sent at an invocation of the run, as JSON.
///
/// # Errors
/// Usage (2), not found (3) or data (4), as the command's help describes.
pub(crate) fn run(ctx: &mut Ctx<'_>, args: &ReplayArgs) -> Result<i32, CliError> {
    let id = crate::cli::id_or_newest(args.run.as_ref());
    let (path, run) = match ctx.shared.clone() {
        Some(shared) => {
            let found = crate::support::shared::resolve_target(
                ctx,
                &shared,
                id,
                crate::support::ids::Want::Run,
            )?;
            let [src] = found.runs.as_slice() else {
                return Err(CliError::Usage(format!("{id} is not a run id")));
            };
            (src.display_path(), crate::support::store::load_run(src)?)
        }
        None => {
            let path = locate_run(ctx, id)?;
            let run = load_run_file(&path)?;
            (path, run)
        }
    };
    let (prompt, diags) = session_replay::prompt_at(&run.read.records, args.seq);
    for d in &diags {
        if d.kind != session_replay::DiagnosticKind::NoSuchInvocation {
            ctx.warn(&format!("{}: {d}", path.display()));
        }
    }
    let Some(p) = prompt else {
        let which = args
            .seq
            .map_or("any invocation".to_owned(), |s| format!("invocation {s}"));
        let seqs: Vec<String> = session_replay::invocations(&run.read.records)
            .0
            .iter()
            .filter(|i| i.request.is_some())
            .map(|i| i.seq.to_string())
            .collect();
        let have = if seqs.is_empty() {
            "it has no llm.request records".to_owned()
        } else {
            format!("its invocations are {}", seqs.join(", "))
        };
        return Err(CliError::NotFound(format!(
            "run {} has no {which}: {have}",
            crate::support::paths::run_id_of_path(&path).unwrap_or_else(|| id.to_owned())
        )));
    };
    let messages = match (&p.over_inclusive, args.corrected) {
        (Some(_), true) => json_rows::raw(&p.corrected_messages())?,
        _ => json_rows::raw_text(&p.raw_messages)?,
    };
    let row = PromptRow {
        run_id: p.run_id.clone(),
        seq: p.seq,
        ts: p.ts.as_str().to_owned(),
        line: run.read.line_of(p.record),
        model: json_rows::raw(&p.model)?,
        input_model: json_rows::raw(&p.input_model)?,
        session_key: json_rows::raw(&p.session_key)?,
        tool_choice: json_rows::raw(&p.tool_choice)?,
        tools: json_rows::raw(&p.tools)?,
        over_inclusive: p.over_inclusive.as_ref().map(|over| OverInclusive {
            own_response_at: over.own_response_at as u64,
            appended: over.appended as u64,
        }),
        messages,
    };
    if p.over_inclusive.is_some() && !args.corrected {
        ctx.warn(&format!(
            "the request snapshot of invocation {} already holds its own response (serialized late); --corrected drops it",
            p.seq
        ));
    }
    write_row(ctx.out, &Row::Prompt(row))?;
    Ok(EXIT_OK)
}
