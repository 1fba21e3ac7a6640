//! `sessions history`: the reference's `session.history` replay of a session's runs.

use session_replay::HistoryOptions;
use session_state::ListQuery;

use crate::Ctx;
use crate::cli::HistoryArgs;
use crate::error::{CliError, EXIT_OK};
use crate::json_rows;
use crate::json_rows::{EventRow, HistorySummary, Row, SummaryRow, write_row};
use crate::style::{Paint, one_line};
use crate::support::open::{IndexUse, open_store_for_reading, state_err};

/// `sessions history ID`: the session's history as the reference replays it.
///
/// # Errors
/// Usage (2), not found (3) or data (4), as the command's help describes.
pub(crate) fn run(ctx: &mut Ctx<'_>, args: &HistoryArgs) -> Result<i32, CliError> {
    let id = crate::cli::id_or_newest(args.session.as_ref());
    if let Some(shared) = ctx.shared.clone() {
        // The session's runs (oldest first) and saved state, from the shared store.
        let found = crate::support::shared::resolve_target(
            ctx,
            &shared,
            id,
            crate::support::ids::Want::Session,
        )?;
        let mut logs = Vec::with_capacity(found.runs.len());
        for r in &found.runs {
            logs.push(crate::support::store::load_run(r)?.read);
        }
        return write_history(ctx, args, &logs);
    }
    let session = crate::support::ids::session_arg(ctx, id)?;
    let store = open_store_for_reading(ctx, IndexUse::FindsRuns)?;
    let runs = crate::support::store::session_runs(ctx, &store, &session)?;
    let mut logs = Vec::with_capacity(runs.len());
    for r in &runs {
        logs.push(crate::support::store::load_run_file(r)?.read);
    }
    if logs.is_empty() {
        // A session with saved state but no run files still answers (runs: 0), as the
        // reference does; an id nobody knows is "not found".
        let known = store
            .list(&ListQuery::all())
            .map_err(state_err)?
            .entries
            .iter()
            .any(|e| e.summary.session_id == session);
        if !known {
            return Err(CliError::NotFound(format!(
                "no session {} under {}",
                session,
                ctx.root.path.display()
            )));
        }
    }
    write_history(ctx, args, &logs)
}

/// The history of a session's run logs (oldest first), as `--json` rows or text.
fn write_history(
    ctx: &mut Ctx<'_>,
    args: &HistoryArgs,
    logs: &[session_replay::RunRead],
) -> Result<i32, CliError> {
    let h = session_replay::session_history(
        logs,
        HistoryOptions {
            max_runs: args.max_runs,
            max_events: args.max_events,
        },
    );
    if args.json {
        for e in &h.events {
            let row = EventRow {
                run_id: e.run_id.clone(),
                seq: e.seq,
                event_type: e.event.tag().to_owned(),
                event: json_rows::raw(&e.event)?,
            };
            write_row(ctx.out, &Row::Event(row))?;
        }
        let summary = HistorySummary {
            runs: h.runs as u64,
            events_sent: h.events_sent as u64,
            truncated: h.truncated,
        };
        write_row(ctx.out, &Row::Summary(SummaryRow::History(summary)))?;
        return Ok(EXIT_OK);
    }
    let st = ctx.style;
    let mut current = String::new();
    for e in &h.events {
        if e.run_id != current {
            current = e.run_id.clone();
            writeln!(
                ctx.out,
                "{}",
                st.paint(Paint::Bold, &format!("run {current}"))
            )?;
        }
        let detail = match &e.event {
            session_schema::AgentEvent::HiddenUserMessage(c) => {
                one_line(c.content.as_deref().unwrap_or(""), 100)
            }
            _ => {
                let rec = session_schema::Record::AgentEvent(session_schema::AgentEventRecord {
                    seq: e.seq,
                    event: e.event.clone(),
                    ..Default::default()
                });
                crate::support::render::describe(&rec)
            }
        };
        if e.seq < 0 {
            writeln!(ctx.out, "  {} {}", st.paint(Paint::Cyan, "user"), detail)?;
        } else {
            writeln!(ctx.out, "  {detail}")?;
        }
    }
    writeln!(
        ctx.out,
        "{} run(s), {} event(s){}",
        h.runs,
        h.events_sent,
        if h.truncated {
            " (older events dropped: --max-events)"
        } else {
            ""
        }
    )?;
    Ok(EXIT_OK)
}
