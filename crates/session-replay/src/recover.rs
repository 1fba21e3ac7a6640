//! Rebuilding a session's conversation from its run log when the saved state is missing or
//! damaged (compat notes §3: "history from last `llm.request` + `llm.response`"; §5 item 1: an
//! empty messages file after power loss).
//!
//! The last request snapshot holds the whole history sent at that point (spec §5); its response
//! and the tool results that followed complete it. Tool results are rebuilt from `tool.output`
//! records, whose `result_raw` is the display rendering (images as `[image]`, compat notes §1.2),
//! so they can differ from what the runtime kept; that is reported.

use session_schema::{BaseMessage, MessageContent, Record, ToolMessage};

use crate::diagnostic::{Diagnostic, DiagnosticKind};
use crate::invocation::prompt_at;

/// The conversation as it stood at the end of a run's records (see the module docs): the last
/// request's messages (corrected when over-inclusive), its response's messages, then a tool
/// message for each `tool.output` answering one of the response's calls. Returns an empty list
/// (with a [`DiagnosticKind::NoSuchInvocation`] diagnostic) when the run made no LLM call.
///
/// The result still begins with the startup system prompt of that run; pass it through
/// [`prepare_resume`](crate::prepare_resume) to resume from it.
pub fn history_from_run<R: AsRef<Record>>(records: &[R]) -> (Vec<BaseMessage>, Vec<Diagnostic>) {
    let (prompt, mut diags) = prompt_at(records, None);
    let Some(prompt) = prompt else {
        return (Vec::new(), diags);
    };
    let mut messages = prompt.corrected_messages().to_vec();
    let response = records[prompt.record + 1..]
        .iter()
        .enumerate()
        .find_map(|(k, r)| match r.as_ref() {
            Record::LlmResponse(resp) if resp.seq == prompt.seq => {
                Some((prompt.record + 1 + k, resp))
            }
            _ => None,
        });
    let Some((resp_index, resp)) = response else {
        diags.push(
            Diagnostic::note(
                DiagnosticKind::MissingResponse,
                format!(
                    "the last llm.request (seq {}) got no response; the history ends with its prompt",
                    prompt.seq
                ),
            )
            .at(prompt.record)
            .in_run(Some(&prompt.run_id)),
        );
        return (messages, diags);
    };
    let answer: Vec<BaseMessage> = match resp.output.messages.parse() {
        Ok(m) => m,
        Err(e) => {
            diags.push(
                Diagnostic::warning(
                    DiagnosticKind::Undecodable,
                    format!(
                        "messages of llm.response seq {} do not decode: {e}",
                        resp.seq
                    ),
                )
                .at(resp_index)
                .in_run(Some(&resp.run_id)),
            );
            return (messages, diags);
        }
    };
    let calls: Vec<String> = answer
        .iter()
        .flat_map(|m| m.tool_calls().iter().map(|c| c.id.clone()))
        .collect();
    messages.extend(answer);
    let mut rebuilt = 0usize;
    for r in records[resp_index + 1..].iter().map(AsRef::as_ref) {
        if let Record::ToolOutput(o) = r
            && calls.contains(&o.tool_call_id)
        {
            rebuilt += 1;
            messages.push(BaseMessage::Tool(ToolMessage {
                tool_call_id: o.tool_call_id.clone(),
                tool_name: o.tool.clone(),
                content: MessageContent::Text(o.result_raw.clone()),
                is_error: o.is_error,
                output_ref: o.output_ref.clone(),
                ..Default::default()
            }));
        }
    }
    if rebuilt > 0 {
        diags.push(
            Diagnostic::note(
                DiagnosticKind::RebuiltToolResult,
                format!(
                    "{rebuilt} tool result(s) rebuilt from tool.output (display rendering: \
                     images and documents appear as placeholders)"
                ),
            )
            .in_run(Some(&resp.run_id)),
        );
    }
    (messages, diags)
}
