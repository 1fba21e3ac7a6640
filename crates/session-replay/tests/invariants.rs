//! Invariants checked over generated inputs: resume preparation always yields a well-paired
//! history and is idempotent; a run log cut at any byte offset (a crash mid-write) still
//! replays, keeps every complete invocation, and ends its transcript with the incomplete marker.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::Path;

use proptest::prelude::*;
use session_jsonl::{Item, Reader, ReaderOptions, RunRead};
use session_replay::{
    EntryKind, ResumeChange, ResumeOptions, UnansweredCalls, invocations, is_resume_diff_reminder,
    prepare_resume, render_markdown, transcript_with,
};
use session_schema::{
    AssistantMessage, BaseMessage, FunctionCall, MessageContent, SystemMessage, ToolCall,
    ToolMessage, UserMessage,
};

fn text(s: &str) -> MessageContent {
    MessageContent::Text(s.to_owned())
}

/// A message from a small alphabet: ids come from a set of 4 so calls, results, orphans and
/// duplicates all occur.
fn message() -> impl Strategy<Value = BaseMessage> {
    prop_oneof![
        Just(BaseMessage::System(SystemMessage {
            content: text("saved startup prompt"),
            ..Default::default()
        })),
        Just(BaseMessage::System(SystemMessage {
            content: text("<system-reminder type=\"session.resume.diff\">x</system-reminder>"),
            ..Default::default()
        })),
        Just(BaseMessage::User(UserMessage {
            content: text("question"),
            ..Default::default()
        })),
        Just(BaseMessage::Assistant(AssistantMessage {
            content: Some(text("answer")),
            ..Default::default()
        })),
        (0..4u8, prop::option::of(0..4u8)).prop_map(|(a, b)| {
            let mut calls = vec![call(a)];
            if let Some(b) = b.filter(|b| *b != a) {
                calls.push(call(b));
            }
            BaseMessage::Assistant(AssistantMessage {
                content: None,
                tool_calls: Some(calls),
                ..Default::default()
            })
        }),
        (0..4u8).prop_map(|a| BaseMessage::Tool(ToolMessage {
            tool_call_id: format!("c{a}"),
            tool_name: "shell".into(),
            content: text("out"),
            ..Default::default()
        })),
    ]
}

fn call(n: u8) -> ToolCall {
    ToolCall {
        id: format!("c{n}"),
        call_type: Some("function".into()),
        function: FunctionCall {
            name: "shell".into(),
            arguments: "{}".into(),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn check_paired(messages: &[BaseMessage]) -> Result<(), TestCaseError> {
    let calls: BTreeSet<&str> = messages
        .iter()
        .flat_map(|m| m.tool_calls().iter().map(|c| c.id.as_str()))
        .collect();
    let results: BTreeSet<&str> = messages
        .iter()
        .filter_map(|m| match m {
            BaseMessage::Tool(t) => Some(t.tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    prop_assert_eq!(&calls, &results, "calls and results differ");
    // No duplicate result inside one run of consecutive tool messages.
    let mut round: BTreeSet<&str> = BTreeSet::new();
    for m in messages {
        match m {
            BaseMessage::Tool(t) => prop_assert!(round.insert(&t.tool_call_id), "duplicate"),
            _ => round.clear(),
        }
    }
    // An assistant message never keeps an empty `tool_calls` list.
    for m in messages {
        if let BaseMessage::Assistant(a) = m {
            prop_assert!(a.tool_calls.as_ref().is_none_or(|c| !c.is_empty()));
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn resume_preparation_pairs_calls_and_is_idempotent(
        messages in prop::collection::vec(message(), 0..14),
        synthesize in any::<bool>(),
        prompt in prop_oneof![Just(""), Just("current system")],
    ) {
        let options = ResumeOptions {
            unanswered_calls: if synthesize {
                UnansweredCalls::SynthesizeError
            } else {
                UnansweredCalls::Drop
            },
        };
        let (out, changes) = prepare_resume(&messages, prompt, options);
        check_paired(&out)?;
        prop_assert!(!out.iter().any(is_resume_diff_reminder));
        // The current prompt comes first. (A system message that only becomes leading because
        // the pairing repair removed what was before it stays, as in the reference, which
        // strips the leading block before repairing.)
        if !prompt.is_empty() {
            prop_assert_eq!(
                out.first(),
                Some(&BaseMessage::System(SystemMessage { content: text(prompt), ..Default::default() }))
            );
        }
        // Nothing is removed without being reported: every input message is either kept or
        // named by a change.
        let removed = changes.iter().filter(|c| matches!(c,
            ResumeChange::RemovedResumeReminder { .. }
            | ResumeChange::RemovedLeadingSystem { .. }
            | ResumeChange::DroppedOrphanResult { .. }
            | ResumeChange::DroppedDuplicateResult { .. })).count();
        let added = changes.iter().filter(|c| matches!(c,
            ResumeChange::SynthesizedResult { .. }
            | ResumeChange::PrependedSystemPrompt { .. })).count();
        prop_assert_eq!(out.len(), messages.len() - removed + added);
        // Preparing again repairs nothing more: the pairing is stable.
        let (again, changes2) = prepare_resume(&out, prompt, options);
        check_paired(&again)?;
        prop_assert!(!changes2.iter().any(|c| matches!(c,
            ResumeChange::DroppedUnansweredCall { .. }
            | ResumeChange::DroppedOrphanResult { .. }
            | ResumeChange::DroppedDuplicateResult { .. }
            | ResumeChange::SynthesizedResult { .. })), "{:?}", changes2);
    }
}

fn read_bytes(bytes: &[u8]) -> RunRead {
    let mut read = RunRead::default();
    for item in Reader::new(bytes, ReaderOptions::default()) {
        match item.unwrap() {
            Item::Record(r) => read.records.push(r),
            Item::Damage(d) => read.damage.push(d),
        }
    }
    read
}

#[test]
fn a_run_cut_at_any_offset_replays_its_complete_invocations() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data/0001_tool_call_run/run.jsonl");
    let bytes = std::fs::read(path).unwrap();
    let full = read_bytes(&bytes);
    let (full_invs, _) = invocations(&full.records);
    for cut in 0..bytes.len() {
        let log = read_bytes(&bytes[..cut]);
        // The records read are a prefix of the full file's.
        prop_assert_prefix(&log, &full, cut);
        let (invs, _) = invocations(&log.records);
        for inv in &invs {
            let whole = full_invs.iter().find(|f| f.seq == inv.seq).unwrap();
            if let Some(resp) = inv.response {
                assert_eq!(Some(resp), whole.response, "cut {cut}");
            }
        }
        let t = transcript_with(&log.records, &session_replay::skipped_lines(&log));
        let last = t.entries.last().map(|e| &e.kind);
        if log.has_run_end() && !log.has_torn_tail() {
            assert!(matches!(last, Some(EntryKind::Outcome { .. })), "cut {cut}");
        } else if !log.records.is_empty() || log.has_torn_tail() {
            assert!(
                matches!(last, Some(EntryKind::Incomplete { .. })),
                "cut {cut}"
            );
            assert!(render_markdown(&t).contains("**Incomplete:"), "cut {cut}");
        }
    }
}

fn prop_assert_prefix(part: &RunRead, whole: &RunRead, cut: usize) {
    let part: Vec<_> = part.record_values().collect();
    let whole: Vec<_> = whole.record_values().collect();
    assert!(part.len() <= whole.len(), "cut {cut}");
    assert_eq!(part, &whole[..part.len()], "cut {cut}");
}

/// Every record of the reference fixture, with lines of the data cases, as a pool for
/// shuffled logs.
fn record_pool() -> &'static Vec<session_schema::Record> {
    static POOL: std::sync::OnceLock<Vec<session_schema::Record>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        let dir = session_test_support::codelia_runs_dir();
        let mut pool = Vec::new();
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for f in files {
            let read = read_bytes(&std::fs::read(f).unwrap());
            pool.extend(read.records.into_iter().map(|r| r.parsed.value));
        }
        pool
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Records in any order, from any runs, with any gaps: every pure function returns without
    /// panicking, and the invocation list accounts for every request.
    #[test]
    fn shuffled_records_never_panic(picks in prop::collection::vec(any::<prop::sample::Index>(), 0..60),
                                    seq in prop::option::of(0i64..12)) {
        let pool = record_pool();
        let records: Vec<session_schema::Record> =
            picks.iter().map(|i| pool[i.index(pool.len())].clone()).collect();
        let requests = records
            .iter()
            .filter(|r| matches!(r, session_schema::Record::LlmRequest(_)))
            .count();
        let (invs, _) = invocations(&records);
        prop_assert_eq!(invs.iter().filter(|i| i.request.is_some()).count(), requests);
        let _ = session_replay::prompt_at(&records, seq);
        let _ = session_replay::prompt_at(&records, None);
        let _ = session_replay::check_snapshots(&records);
        let _ = session_replay::history_from_run(&records);
        let t = session_replay::transcript(&records);
        let _ = render_markdown(&t);
        let log = session_replay::RunRead::from_records(records);
        let _ = session_replay::verify_run(&log);
        let logs = vec![log.clone(), log];
        let _ = session_replay::session_history(&logs, session_replay::HistoryOptions { max_runs: 1, max_events: 3 });
        let _ = session_replay::stats(&logs);
        let _ = session_replay::session_invocations(&logs);
    }
}
