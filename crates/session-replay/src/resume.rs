//! Resume preparation: turning a saved session's messages into the history a runtime resumes
//! with (spec §6, compat notes §3).
//!
//! Steps, in the reference's order:
//! 1. remove every system message holding a resume-diff reminder
//!    (`<system-reminder type="session.resume.diff">`, in string content or a text part);
//! 2. remove the leading block of system messages (the saved startup context);
//! 3. repair tool-call pairing: an assistant tool call without a tool result anywhere in the
//!    history, and a tool result without a call, are dropped (`normalizeToolCallHistory`; an
//!    assistant left without calls keeps its content, possibly `null`, and loses its
//!    `tool_calls` key); or, with [`UnansweredCalls::SynthesizeError`], an error result
//!    "no result was recorded" is added for each unanswered call instead. A second result for
//!    the same call id in one round (a run of consecutive tool messages) is dropped;
//! 4. put the current system prompt first (when non-empty).
//!
//! Every change is returned as a [`ResumeChange`] so a caller can show it.

use std::collections::BTreeSet;

use session_schema::{
    AssistantMessage, BaseMessage, ContentPart, MessageContent, SessionState, SystemMessage,
    ToolMessage,
};

/// The tag that marks a resume-diff reminder system message.
pub const RESUME_DIFF_TAG: &str = "<system-reminder type=\"session.resume.diff\">";

/// The content of a synthesized tool result for an unanswered call.
pub const NO_RESULT_TEXT: &str = "no result was recorded";

/// What to do with an assistant tool call that has no tool result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UnansweredCalls {
    /// Drop the call (the reference's behaviour).
    #[default]
    Drop,
    /// Keep the call and add a tool result with `is_error: true` and content
    /// [`NO_RESULT_TEXT`] after the round it belongs to.
    SynthesizeError,
}

/// Options of [`prepare_resume`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResumeOptions {
    /// Policy for unanswered tool calls.
    pub unanswered_calls: UnansweredCalls,
}

/// One change made by [`prepare_resume`]. Indices refer to the input messages.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResumeChange {
    /// A resume-diff reminder system message was removed.
    RemovedResumeReminder {
        /// Input index.
        index: usize,
    },
    /// A leading system message (saved startup context) was removed.
    RemovedLeadingSystem {
        /// Input index.
        index: usize,
    },
    /// An assistant tool call without a result was dropped.
    DroppedUnansweredCall {
        /// Input index of the assistant message.
        index: usize,
        /// The call id.
        call_id: String,
        /// The tool name.
        tool: String,
        /// Whether the message has no tool calls left (it keeps its content).
        no_calls_left: bool,
    },
    /// A tool result without a matching call was dropped.
    DroppedOrphanResult {
        /// Input index.
        index: usize,
        /// The call id it claimed to answer.
        call_id: String,
    },
    /// A second result for the same call id in the same round was dropped.
    DroppedDuplicateResult {
        /// Input index of the dropped result.
        index: usize,
        /// Input index of the result kept.
        kept: usize,
        /// The call id.
        call_id: String,
    },
    /// An error result was added for an unanswered call.
    SynthesizedResult {
        /// Input index of the assistant message holding the call.
        call_index: usize,
        /// The call id.
        call_id: String,
        /// The tool name.
        tool: String,
    },
    /// The current system prompt was put first.
    PrependedSystemPrompt {
        /// Its length in bytes.
        bytes: usize,
    },
}

impl ResumeChange {
    /// A one-line lower-case description.
    pub fn describe(&self) -> String {
        match self {
            ResumeChange::RemovedResumeReminder { index } => {
                format!("removed resume-diff reminder at message {index}")
            }
            ResumeChange::RemovedLeadingSystem { index } => {
                format!("removed saved startup system message {index}")
            }
            ResumeChange::DroppedUnansweredCall {
                index,
                call_id,
                tool,
                no_calls_left,
            } => {
                let left = if *no_calls_left {
                    " (no calls left; content kept)"
                } else {
                    ""
                };
                format!("dropped unanswered call {call_id} ({tool}) from message {index}{left}")
            }
            ResumeChange::DroppedOrphanResult { index, call_id } => {
                format!("dropped tool result {index} for unknown call {call_id}")
            }
            ResumeChange::DroppedDuplicateResult {
                index,
                kept,
                call_id,
            } => format!("dropped second result {index} for call {call_id} (kept message {kept})"),
            ResumeChange::SynthesizedResult {
                call_index,
                call_id,
                tool,
            } => format!(
                "added error result for unanswered call {call_id} ({tool}) of message {call_index}"
            ),
            ResumeChange::PrependedSystemPrompt { bytes } => {
                format!("put the current system prompt first ({bytes} bytes)")
            }
        }
    }
}

/// Whether a message is a resume-diff reminder: a system message whose string content, or one
/// of whose text parts, contains [`RESUME_DIFF_TAG`].
pub fn is_resume_diff_reminder(message: &BaseMessage) -> bool {
    let BaseMessage::System(s) = message else {
        return false;
    };
    match &s.content {
        MessageContent::Text(t) => t.contains(RESUME_DIFF_TAG),
        MessageContent::Parts(parts) => parts.iter().any(|p| match p {
            ContentPart::Text(t) => t
                .text
                .as_deref()
                .is_some_and(|x| x.contains(RESUME_DIFF_TAG)),
            _ => false,
        }),
    }
}

/// Prepares a saved session's messages for resuming (see the module docs).
///
/// # Examples
///
/// ```
/// use session_replay::{ResumeChange, ResumeOptions, UnansweredCalls, prepare_resume};
/// use session_schema::{BaseMessage, MessageContent, parse_message};
///
/// let saved = [
///     r#"{"role":"system","content":"You are a coding assistant (old prompt)."}"#,
///     r#"{"role":"system","content":"<system-reminder type=\"session.resume.diff\">…</system-reminder>"}"#,
///     r#"{"role":"user","content":"list files"}"#,
///     r#"{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"shell","arguments":"{}"}}]}"#,
/// ]
/// .iter()
/// .map(|m| parse_message(m.as_bytes()).map(|p| p.value))
/// .collect::<Result<Vec<_>, _>>()?;
///
/// // The reference's behaviour: the unanswered call is dropped.
/// let (messages, changes) = prepare_resume(&saved, "You are a coding assistant.", ResumeOptions::default());
/// assert_eq!(messages.len(), 3); // new prompt, user, assistant without its call
/// assert!(matches!(&messages[0], BaseMessage::System(s)
///     if s.content == MessageContent::Text("You are a coding assistant.".into())));
/// assert!(messages[2].tool_calls().is_empty());
/// assert!(changes.contains(&ResumeChange::RemovedResumeReminder { index: 1 }));
///
/// // Or keep the call and answer it with an error result.
/// let options = ResumeOptions { unanswered_calls: UnansweredCalls::SynthesizeError };
/// let (messages, _) = prepare_resume(&saved, "You are a coding assistant.", options);
/// assert!(matches!(&messages[3], BaseMessage::Tool(t) if t.tool_call_id == "call_1" && t.is_error == Some(true)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn prepare_resume(
    messages: &[BaseMessage],
    current_system_prompt: &str,
    options: ResumeOptions,
) -> (Vec<BaseMessage>, Vec<ResumeChange>) {
    let mut changes = Vec::new();
    // Steps 1 and 2, keeping input indices.
    let mut kept: Vec<(usize, &BaseMessage)> = Vec::with_capacity(messages.len());
    for (i, m) in messages.iter().enumerate() {
        if is_resume_diff_reminder(m) {
            changes.push(ResumeChange::RemovedResumeReminder { index: i });
        } else {
            kept.push((i, m));
        }
    }
    let leading = kept
        .iter()
        .take_while(|(_, m)| matches!(m, BaseMessage::System(_)))
        .count();
    for (i, _) in kept.drain(..leading) {
        changes.push(ResumeChange::RemovedLeadingSystem { index: i });
    }

    let mut out = repair_tool_calls(&kept, options.unanswered_calls, &mut changes);

    if !current_system_prompt.is_empty() {
        out.insert(
            0,
            BaseMessage::System(SystemMessage {
                content: MessageContent::Text(current_system_prompt.to_owned()),
                ..Default::default()
            }),
        );
        changes.push(ResumeChange::PrependedSystemPrompt {
            bytes: current_system_prompt.len(),
        });
    }
    (out, changes)
}

/// [`prepare_resume`] over a saved [`SessionState`]'s messages.
pub fn prepare_state_for_resume(
    state: &SessionState,
    current_system_prompt: &str,
    options: ResumeOptions,
) -> (Vec<BaseMessage>, Vec<ResumeChange>) {
    prepare_resume(&state.messages, current_system_prompt, options)
}

fn repair_tool_calls(
    kept: &[(usize, &BaseMessage)],
    policy: UnansweredCalls,
    changes: &mut Vec<ResumeChange>,
) -> Vec<BaseMessage> {
    let call_ids: BTreeSet<&str> = kept
        .iter()
        .flat_map(|(_, m)| m.tool_calls().iter().map(|c| c.id.as_str()))
        .collect();
    let result_ids: BTreeSet<&str> = kept
        .iter()
        .filter_map(|(_, m)| match m {
            BaseMessage::Tool(t) => Some(t.tool_call_id.as_str()),
            _ => None,
        })
        .collect();

    // Duplicate results within one round (a run of consecutive tool messages).
    let mut duplicate: BTreeSet<usize> = BTreeSet::new();
    let mut round: Vec<(&str, usize)> = Vec::new();
    for (i, m) in kept {
        match m {
            BaseMessage::Tool(t) => {
                if let Some((_, first)) = round.iter().find(|(id, _)| *id == t.tool_call_id) {
                    duplicate.insert(*i);
                    changes.push(ResumeChange::DroppedDuplicateResult {
                        index: *i,
                        kept: *first,
                        call_id: t.tool_call_id.clone(),
                    });
                } else {
                    round.push((&t.tool_call_id, *i));
                }
            }
            _ => round.clear(),
        }
    }

    let mut out: Vec<BaseMessage> = Vec::with_capacity(kept.len());
    // Synthesized results wait until the round after their call ends.
    let mut pending: Vec<BaseMessage> = Vec::new();
    let mut synthesized: BTreeSet<&str> = BTreeSet::new();
    let mut in_results = false;
    for (i, m) in kept {
        let is_tool = matches!(m, BaseMessage::Tool(_));
        // A round ends at the first message that is neither a tool result nor part of the
        // same provider response (assistant call messages and reasoning before the results).
        if !pending.is_empty() && !is_tool && (in_results || !continues_response(m)) {
            out.append(&mut pending);
        }
        in_results = is_tool;
        match m {
            BaseMessage::Assistant(a) if a.tool_calls.as_ref().is_some_and(|c| !c.is_empty()) => {
                let calls = a.tool_calls.as_deref().unwrap_or(&[]);
                let unanswered: Vec<_> = calls
                    .iter()
                    .filter(|c| !result_ids.contains(c.id.as_str()))
                    .collect();
                if unanswered.is_empty() {
                    out.push((*m).clone());
                    continue;
                }
                match policy {
                    UnansweredCalls::Drop => {
                        let left: Vec<_> = calls
                            .iter()
                            .filter(|c| result_ids.contains(c.id.as_str()))
                            .cloned()
                            .collect();
                        for c in &unanswered {
                            changes.push(ResumeChange::DroppedUnansweredCall {
                                index: *i,
                                call_id: c.id.clone(),
                                tool: c.function.name.clone(),
                                no_calls_left: left.is_empty(),
                            });
                        }
                        out.push(BaseMessage::Assistant(AssistantMessage {
                            tool_calls: (!left.is_empty()).then_some(left),
                            ..a.clone()
                        }));
                    }
                    UnansweredCalls::SynthesizeError => {
                        // One result per call id, even when a call id is repeated.
                        for c in unanswered
                            .iter()
                            .filter(|c| synthesized.insert(c.id.as_str()))
                        {
                            changes.push(ResumeChange::SynthesizedResult {
                                call_index: *i,
                                call_id: c.id.clone(),
                                tool: c.function.name.clone(),
                            });
                            pending.push(BaseMessage::Tool(ToolMessage {
                                tool_call_id: c.id.clone(),
                                tool_name: c.function.name.clone(),
                                content: MessageContent::Text(NO_RESULT_TEXT.to_owned()),
                                is_error: Some(true),
                                ..Default::default()
                            }));
                        }
                        out.push((*m).clone());
                    }
                }
            }
            BaseMessage::Tool(t) => {
                if duplicate.contains(i) {
                    continue;
                }
                if !call_ids.contains(t.tool_call_id.as_str()) {
                    changes.push(ResumeChange::DroppedOrphanResult {
                        index: *i,
                        call_id: t.tool_call_id.clone(),
                    });
                    continue;
                }
                out.push((*m).clone());
            }
            _ => out.push((*m).clone()),
        }
    }
    out.append(&mut pending);
    out
}

/// Whether a message can sit between a response's tool-call messages and its results
/// (providers' output items are split one per message: reasoning, text, one call each).
fn continues_response(m: &BaseMessage) -> bool {
    match m {
        BaseMessage::Reasoning(_) => true,
        BaseMessage::Assistant(a) => a.tool_calls.as_ref().is_some_and(|c| !c.is_empty()),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use session_schema::parse_message;

    fn msgs(lines: &[&str]) -> Vec<BaseMessage> {
        lines
            .iter()
            .map(|l| parse_message(l.as_bytes()).unwrap().value)
            .collect()
    }

    fn json(messages: &[BaseMessage]) -> String {
        serde_json::to_string(messages).unwrap()
    }

    /// resume-context.test.ts 1: `[system base, system resume-diff, user hello]` → `[user]`,
    /// then the current prompt first.
    #[test]
    fn strips_reminder_and_leading_system_then_prepends_current_prompt() {
        let input = msgs(&[
            r#"{"role":"system","content":"base"}"#,
            r#"{"role":"system","content":"<system-reminder type=\"session.resume.diff\">\nchanged\n</system-reminder>"}"#,
            r#"{"role":"user","content":"hello"}"#,
        ]);
        let (out, changes) = prepare_resume(&input, "", ResumeOptions::default());
        assert_eq!(json(&out), r#"[{"role":"user","content":"hello"}]"#);
        assert_eq!(changes.len(), 2);
        let (out, _) = prepare_resume(&input, "current system", ResumeOptions::default());
        assert_eq!(
            json(&out),
            r#"[{"role":"system","content":"current system"},{"role":"user","content":"hello"}]"#
        );
    }

    /// The crashed S9 session: an unanswered call is dropped and the assistant message keeps
    /// `content: null` without a `tool_calls` key, as `normalizeToolCallHistory` leaves it.
    #[test]
    fn dangling_call_leaves_assistant_with_null_content() {
        let input = msgs(&[
            r#"{"role":"user","content":"Run the long build"}"#,
            r#"{"role":"assistant","content":"Starting the long build."}"#,
            r#"{"role":"assistant","content":null,"tool_calls":[{"id":"t1","type":"function","function":{"name":"shell","arguments":"{}"}}]}"#,
        ]);
        let (out, changes) = prepare_resume(&input, "", ResumeOptions::default());
        assert_eq!(
            serde_json::to_string(&out[2]).unwrap(),
            r#"{"role":"assistant","content":null}"#
        );
        assert!(matches!(
            &changes[..],
            [ResumeChange::DroppedUnansweredCall {
                index: 2,
                no_calls_left: true,
                ..
            }]
        ));
    }

    #[test]
    fn reminder_in_a_text_part_is_detected_but_not_in_a_user_message() {
        let m = msgs(&[
            r#"{"role":"system","content":[{"type":"text","text":"<system-reminder type=\"session.resume.diff\">"}]}"#,
            r#"{"role":"user","content":"<system-reminder type=\"session.resume.diff\">"}"#,
        ]);
        assert!(is_resume_diff_reminder(&m[0]));
        assert!(!is_resume_diff_reminder(&m[1]));
    }
}
