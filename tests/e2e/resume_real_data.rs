//! The reference runtime's recorded sessions, read through every layer: the saved state of
//! each session is exactly the conversation rebuilt from its last run log, and the first
//! prompt of each run is the previous run's conversation prepared for resuming (saved startup
//! system messages and resume-diff reminders stripped, unanswered tool calls dropped, the
//! current system prompt first). The legacy snapshot L2 resumes into its next run's prompt too.

use std::fs;

use session_replay::{
    DiagnosticKind, ResumeOptions, history_from_run, invocations, is_resume_diff_reminder,
    prepare_resume, prepare_state_for_resume,
};
use session_schema::{BaseMessage, MessageContent, Record, parse_session_state, to_line};
use session_state::{ListQuery, StateStore};

use crate::support::*;

/// S5: its third run's prompt starts from a compaction summary, which no run log holds.
const COMPACTED: &str = "7800bc01-59f2-4e07-aba9-d1f74c077bfb";
const L2: &str = "9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d";
const L2_RUN: &str = "06a54f59-a2a3-45e5-adec-25a6e6d4100f";

fn lines(messages: &[BaseMessage]) -> Vec<String> {
    messages
        .iter()
        .map(|m| String::from_utf8(to_line(m).expect("serialize")).expect("UTF-8"))
        .collect()
}

fn records(path: &std::path::Path) -> Vec<Record> {
    let read = session_jsonl::read_run(path).expect("read run");
    assert!(
        read.damage.is_empty(),
        "{}: {:?}",
        path.display(),
        read.damage
    );
    read.records.into_iter().map(|r| r.parsed.value).collect()
}

/// The first prompt of a run, and the messages of it that came from the saved conversation:
/// without resume-diff reminders and without the new user message at the end.
fn first_prompt(records: &[Record]) -> Option<(String, Vec<BaseMessage>)> {
    let (invs, _) = invocations(records);
    let sent = invs.first()?.request_messages()?.expect("request decodes");
    let system = match sent.first() {
        Some(BaseMessage::System(s)) => match &s.content {
            MessageContent::Text(t) => t.clone(),
            other => panic!("system prompt is not text: {other:?}"),
        },
        other => panic!("prompt does not start with the system prompt: {other:?}"),
    };
    let mut carried: Vec<BaseMessage> = sent
        .iter()
        .filter(|m| !is_resume_diff_reminder(m))
        .cloned()
        .collect();
    assert!(matches!(carried.pop(), Some(BaseMessage::User(_))));
    Some((system, carried))
}

#[test]
fn recorded_sessions_resume_exactly_as_the_runtime_did() {
    let expected = codelia_expected();
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("sessions");
    copy_tree(&codelia_dir().join("sessions"), &root);
    let store = StateStore::open(&root).expect("store");
    store.index_runs().expect("index");

    let mut sessions_checked = 0;
    let mut pairs_checked = 0;
    for entry in store.list(&ListQuery::all()).expect("list").entries {
        let id = entry.summary.session_id;
        let rows = store.runs_for_session(&id).expect("runs");
        let want: Vec<String> = expected["sessions_from_run_logs"][&id]["runs_in_started_at_order"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|v| v.as_str().expect("id").to_owned())
                    .collect()
            })
            .unwrap_or_default();
        let got: Vec<String> = rows.iter().map(|r| r.run_id.clone()).collect();
        assert_eq!(got, want, "runs of {id} from the index");
        let Some(last) = rows.last() else {
            continue;
        };
        let runs: Vec<Vec<Record>> = rows.iter().map(|r| records(&r.path)).collect();

        // The saved conversation is the one rebuilt from the last run log.
        let (rebuilt, diags) = history_from_run(runs.last().expect("a run"));
        assert!(
            diags.iter().all(|d| d.kind != DiagnosticKind::Undecodable),
            "{id}: {diags:?}"
        );
        let (rebuilt, _) = prepare_resume(&rebuilt, "", ResumeOptions::default());
        let saved = store.load(&id).expect("load").expect("saved").state;
        assert_eq!(saved.run_id.as_deref(), Some(last.run_id.as_str()));
        assert_eq!(lines(&rebuilt), lines(&saved.messages), "session {id}");
        sessions_checked += 1;

        // Each run's first prompt is the previous run's conversation, prepared for resume.
        for pair in runs.windows(2) {
            let Some((system, carried)) = first_prompt(&pair[1]) else {
                continue;
            };
            if id == COMPACTED {
                continue;
            }
            let (previous, _) = history_from_run(&pair[0]);
            let (prepared, changes) = prepare_resume(&previous, &system, ResumeOptions::default());
            assert!(!changes.is_empty());
            assert_eq!(lines(&prepared), lines(&carried), "session {id}");
            pairs_checked += 1;
        }
    }
    assert_eq!(sessions_checked, 10, "every session with a run log");
    assert_eq!(pairs_checked, 8);

    // L2 was resumed from its hand-written legacy snapshot (still on disk, stale).
    let legacy = fs::read(root.join(format!("state/{L2}.json"))).expect("legacy snapshot");
    let snapshot = parse_session_state(&legacy).expect("snapshot parses").value;
    let l2_run = store
        .runs_for_session(L2)
        .expect("runs")
        .into_iter()
        .find(|r| r.run_id == L2_RUN)
        .expect("L2 run indexed");
    let (system, carried) = first_prompt(&records(&l2_run.path)).expect("a prompt");
    let (prepared, _) = prepare_state_for_resume(&snapshot, &system, ResumeOptions::default());
    assert_eq!(lines(&prepared), lines(&carried));
}
