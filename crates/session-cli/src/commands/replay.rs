//! `sessions replay <run-id> [--seq N]`: the prompt of one invocation as JSON.

use crate::Ctx;
use crate::cli::ReplayArgs;
use crate::error::{CliError, EXIT_OK};
use crate::jsonw::JsonObj;
use crate::store::{load_run_file, locate_run};

pub(crate) fn replay(ctx: &mut Ctx<'_>, args: &ReplayArgs) -> Result<i32, CliError> {
    let path = locate_run(ctx, &args.run)?;
    let run = load_run_file(&path)?;
    let (prompt, diags) = session_replay::prompt_at(&run.log.records, args.seq);
    for d in &diags {
        if d.kind != session_replay::DiagnosticKind::NoSuchInvocation {
            ctx.warn(&format!("{}: {d}", path.display()));
        }
    }
    let Some(p) = prompt else {
        let which = args
            .seq
            .map_or("any invocation".to_owned(), |s| format!("invocation {s}"));
        let seqs: Vec<String> = session_replay::invocations(&run.log.records)
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
            args.run
        )));
    };
    let line = |i: usize| run.log.line_of(i).map_or(String::new(), |l| l.to_string());
    let mut o = JsonObj::new();
    o.str("run_id", &p.run_id);
    o.num("seq", p.seq);
    o.str("ts", p.ts.as_str());
    o.raw("line", &line(p.record));
    o.ser("model", &p.model);
    o.ser("input_model", &p.input_model);
    o.ser("session_key", &p.session_key);
    o.ser("tool_choice", &p.tool_choice);
    o.ser("tools", &p.tools);
    match p.over_inclusive {
        Some(over) => {
            let mut oi = JsonObj::new();
            oi.num("own_response_at", over.own_response_at as i64);
            oi.num("appended", over.appended as i64);
            o.raw("over_inclusive", &oi.finish());
            if args.corrected {
                o.ser("messages", &p.corrected_messages());
            } else {
                o.raw("messages", &p.raw_messages);
            }
        }
        None => {
            o.raw("over_inclusive", "null");
            o.raw("messages", &p.raw_messages);
        }
    }
    if p.over_inclusive.is_some() && !args.corrected {
        ctx.warn(&format!(
            "the request snapshot of invocation {} already holds its own response (serialized late); --corrected drops it",
            p.seq
        ));
    }
    ctx.out.write_all(o.finish().as_bytes())?;
    ctx.out.write_all(b"\n")?;
    Ok(EXIT_OK)
}
