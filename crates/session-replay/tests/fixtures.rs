//! The reference's recorded runs and sessions (`testdata/codelia-runtime`) replay with
//! the facts in its `expected.json`: invocation seqs, missing responses, over-inclusive
//! snapshots, snapshot continuity, `session.history` answers, and the crashed run S9.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use session_replay::{
    DiagnosticKind, EntryKind, HistoryOptions, IncompleteReason, RunMeta, RunRead, check_snapshots,
    invocations, prompt_at, render_markdown, session_history, session_invocations, transcript,
};
use session_schema::{AgentEvent, parse_record};

fn fixture_dir() -> PathBuf {
    session_test_support::codelia_runtime_dir()
}

fn expected() -> Value {
    let text = std::fs::read_to_string(fixture_dir().join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Every run log of the fixture, parsed line by line (the files are clean: any unreadable line
/// fails the test).
fn runs() -> BTreeMap<String, RunRead> {
    let dir = fixture_dir().join("sessions/2026/11/30");
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let records: Vec<_> = bytes
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| parse_record(l).unwrap().value)
            .collect();
        let run = RunRead::from_records(records);
        out.insert(RunMeta::of(&run).run_id, run);
    }
    out
}

fn i64s(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

#[test]
fn invocation_seqs_missing_responses_and_own_response_tails_match() {
    let expected = expected();
    let runs = runs();
    let exp_runs = expected["runs"].as_object().unwrap();
    assert_eq!(runs.len(), exp_runs.len());
    let mut over_inclusive_seen = 0;
    for (run_id, exp) in exp_runs {
        let run = &runs[run_id];
        let (invs, diags) = invocations(&run.records);
        let seqs: Vec<i64> = invs.iter().map(|i| i.seq).collect();
        assert_eq!(seqs, i64s(&exp["llm_request_seqs"]), "{run_id}");
        let missing: Vec<i64> = invs
            .iter()
            .filter(|i| i.missing_response())
            .map(|i| i.seq)
            .collect();
        assert_eq!(
            missing,
            i64s(&exp["llm_requests_without_response"]),
            "{run_id}"
        );
        let missing_diags = diags
            .iter()
            .filter(|d| d.kind == DiagnosticKind::MissingResponse)
            .count();
        assert_eq!(missing_diags, missing.len(), "{run_id}: {diags:?}");
        assert!(
            diags
                .iter()
                .all(|d| d.kind == DiagnosticKind::MissingResponse),
            "{run_id}: {diags:?}"
        );

        for req in exp["llm_requests"].as_array().unwrap() {
            let seq = req["seq"].as_i64().unwrap();
            let inv = invs.iter().find(|i| i.seq == seq).unwrap();
            assert_eq!(
                inv.session_key(),
                req["session_key"].as_str(),
                "{run_id} seq {seq}"
            );
            let (prompt, pdiags) = prompt_at(&run.records, Some(seq));
            let prompt = prompt.unwrap();
            let roles: Vec<&str> = prompt.messages.iter().map(|m| m.role()).collect();
            let exp_roles: Vec<&str> = req["roles"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r.as_str().unwrap())
                .collect();
            assert_eq!(roles, exp_roles, "{run_id} seq {seq}");
            assert_eq!(
                prompt.tools.as_ref().map_or(0, Vec::len),
                req["tools_count"].as_u64().unwrap() as usize
            );
            let tail = req["tail_equals_own_response"].as_bool().unwrap_or(false);
            assert_eq!(prompt.over_inclusive.is_some(), tail, "{run_id} seq {seq}");
            assert_eq!(
                pdiags
                    .iter()
                    .any(|d| d.kind == DiagnosticKind::OverInclusiveSnapshot),
                tail
            );
            if let Some(o) = prompt.over_inclusive {
                over_inclusive_seen += 1;
                let resp = inv.response_messages().unwrap().unwrap();
                assert_eq!(o.appended, resp.len());
                assert_eq!(
                    prompt.corrected_messages().len() + resp.len(),
                    prompt.messages.len()
                );
                assert_eq!(&prompt.messages[o.own_response_at..], resp.as_slice());
            }
        }
    }
    // The fixture has one over-inclusive snapshot (S7, quirk Q1); make sure it was exercised.
    let expected_count = exp_runs
        .values()
        .flat_map(|r| r["llm_requests"].as_array().unwrap())
        .filter(|r| r["tail_equals_own_response"].as_bool() == Some(true))
        .count();
    assert_eq!(over_inclusive_seen, expected_count);
    assert!(expected_count >= 1);
}

#[test]
fn every_snapshot_extends_its_predecessor_or_is_explained() {
    let runs = runs();
    let mut compared = 0;
    for (run_id, run) in &runs {
        let (report, diags) = check_snapshots(&run.records);
        compared += report.compared;
        assert!(report.is_continuous(), "{run_id}: {report:?}");
        // Over-inclusive snapshots and resets are always explained by a diagnostic.
        let explained = diags
            .iter()
            .filter(|d| {
                matches!(
                    d.kind,
                    DiagnosticKind::OverInclusiveSnapshot | DiagnosticKind::SnapshotReset
                )
            })
            .count();
        assert_eq!(
            explained,
            report.over_inclusive.len() + report.resets_after_compaction.len()
        );
    }
    assert!(compared > 5, "too few request pairs compared: {compared}");
}

#[test]
fn seq_continues_across_the_runs_of_a_session() {
    let expected = expected();
    let runs = runs();
    for (session_id, exp) in expected["sessions_from_run_logs"].as_object().unwrap() {
        let logs: Vec<RunRead> = exp["runs_in_started_at_order"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| runs[r.as_str().unwrap()].clone())
            .collect();
        let (invs, diags) = session_invocations(&logs);
        let seqs: Vec<i64> = invs.iter().map(|i| i.seq).collect();
        assert_eq!(
            seqs,
            i64s(&exp["llm_request_seqs_across_runs"]),
            "{session_id}"
        );
        assert!(
            diags
                .iter()
                .all(|d| d.kind == DiagnosticKind::MissingResponse),
            "{session_id}: {diags:?}"
        );
    }
}

fn history_matches(answer: &Value, runs: &[RunRead], options: HistoryOptions, label: &str) {
    let h = session_history(runs, options);
    let result = if answer.get("result").is_some() {
        &answer["result"]
    } else {
        answer
    };
    assert_eq!(h.runs as u64, result["runs"].as_u64().unwrap(), "{label}");
    assert_eq!(
        h.events_sent as u64,
        result["events_sent"].as_u64().unwrap(),
        "{label}"
    );
    assert_eq!(
        h.truncated,
        result["truncated"].as_bool().unwrap_or(false),
        "{label}"
    );
    if let Some(events) = answer.get("events") {
        let got: Vec<(String, i64, String)> = h
            .events
            .iter()
            .map(|e| (e.run_id.clone(), e.seq, e.event.tag().to_owned()))
            .collect();
        let want: Vec<(String, i64, String)> = events
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["run_id"].as_str().unwrap().to_owned(),
                    e["seq"].as_i64().unwrap(),
                    e["type"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        assert_eq!(got, want, "{label}");
    }
}

fn session_runs(runs: &BTreeMap<String, RunRead>, session_id: &str) -> Vec<RunRead> {
    runs.values()
        .filter(|r| RunMeta::of(r).session_id.as_deref() == Some(session_id))
        .cloned()
        .collect()
}

#[test]
fn session_history_matches_the_reference_answers() {
    let expected = expected();
    let runs = runs();
    let mut ids: BTreeMap<String, String> = BTreeMap::new();
    for group in ["scenario_sessions", "legacy_sessions"] {
        for (name, id) in expected[group].as_object().unwrap() {
            ids.insert(name.clone(), id.as_str().unwrap().to_owned());
        }
    }
    let answers = &expected["codelia_runtime_rpc_outputs"]["session.history"];
    let answers = answers.as_object().unwrap();
    assert!(answers.len() >= 10);
    for (name, answer) in answers {
        let logs = session_runs(&runs, &ids[name]);
        history_matches(answer, &logs, HistoryOptions::default(), name);
    }
    let s2 = session_runs(&runs, &ids["S2"]);
    let small = &expected["codelia_runtime_rpc_outputs"]["session.history S2 max_events=5"];
    history_matches(
        small,
        &s2,
        HistoryOptions {
            max_events: 5,
            ..HistoryOptions::default()
        },
        "S2 max_events=5",
    );
}

#[test]
fn hidden_user_messages_carry_the_reference_replay_text() {
    let expected = expected();
    let runs = runs();
    for (run_id, exp) in expected["runs"].as_object().unwrap() {
        let h = session_history(
            std::slice::from_ref(&runs[run_id]),
            HistoryOptions::default(),
        );
        let hidden: Vec<&str> = h
            .events
            .iter()
            .filter_map(|e| match &e.event {
                AgentEvent::HiddenUserMessage(c) => c.content.as_deref(),
                _ => None,
            })
            .collect();
        let want = exp["run_start"]["hidden_user_message_replay"].as_str();
        match want {
            Some(text) if !text.is_empty() => assert_eq!(hidden, vec![text], "{run_id}"),
            _ => assert!(hidden.is_empty(), "{run_id}"),
        }
    }
}

#[test]
fn crashed_run_keeps_its_invocations_and_ends_incomplete() {
    let expected = expected();
    let runs = runs();
    let crashed: Vec<&str> = expected["runs_without_run_end"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(!crashed.is_empty());
    for run_id in crashed {
        let run = &runs[run_id];
        let (invs, _) = invocations(&run.records);
        assert_eq!(
            invs.iter().filter(|i| !i.missing_response()).count(),
            invs.len()
        );
        assert_eq!(
            invs.len(),
            expected["runs"][run_id]["llm_request_seqs"]
                .as_array()
                .unwrap()
                .len()
        );
        let t = transcript(&run.records);
        assert_eq!(
            t.entries.last().map(|e| &e.kind),
            Some(&EntryKind::Incomplete {
                reason: IncompleteReason::NoRunEnd
            })
        );
        let md = render_markdown(&t);
        assert!(md.trim_end().ends_with("(no run.end record)**"), "{md}");
        // The unanswered tool call is in the transcript.
        assert!(
            t.entries
                .iter()
                .any(|e| matches!(e.kind, EntryKind::ToolCall { .. }))
        );
    }
    // Every finished run ends with its outcome, not with the incomplete marker.
    for (run_id, exp) in expected["runs"].as_object().unwrap() {
        if exp["has_run_end"].as_bool() == Some(true) {
            let t = transcript(&runs[run_id].records);
            assert!(
                matches!(t.entries.last().map(|e| &e.kind), Some(EntryKind::Outcome { outcome }) if Some(outcome.as_str()) == exp["run_end"]["outcome"].as_str()),
                "{run_id}"
            );
        }
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The same answers through the thin reader: runs found via session-state's run index in a
/// copy of the fixture tree (the fixture is read-only; SQLite needs to write beside state.db).
#[test]
fn session_history_through_the_run_index_matches_the_reference_answers() {
    let expected = expected();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("sessions");
    copy_tree(&fixture_dir().join("sessions"), &root);
    let store = session_state::StateStore::open(&root).unwrap();
    store.index_runs().unwrap();
    let mut ids: BTreeMap<String, String> = BTreeMap::new();
    for group in ["scenario_sessions", "legacy_sessions"] {
        for (name, id) in expected[group].as_object().unwrap() {
            ids.insert(name.clone(), id.as_str().unwrap().to_owned());
        }
    }
    let answers = expected["codelia_runtime_rpc_outputs"]["session.history"]
        .as_object()
        .unwrap();
    for (name, answer) in answers {
        let (h, diags) =
            session_replay::io::session_history(&store, &ids[name], HistoryOptions::default())
                .unwrap();
        let result = &answer["result"];
        assert_eq!(h.runs as u64, result["runs"].as_u64().unwrap(), "{name}");
        assert_eq!(
            h.events_sent as u64,
            result["events_sent"].as_u64().unwrap(),
            "{name}"
        );
        let got: Vec<(String, i64, String)> = h
            .events
            .iter()
            .map(|e| (e.run_id.clone(), e.seq, e.event.tag().to_owned()))
            .collect();
        let want: Vec<(String, i64, String)> = answer["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["run_id"].as_str().unwrap().to_owned(),
                    e["seq"].as_i64().unwrap(),
                    e["type"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        assert_eq!(got, want, "{name}");
        // Only the crashed run has something to say (no run.end).
        for d in &diags {
            assert_eq!(d.kind, DiagnosticKind::NoRunEnd, "{name}: {d}");
        }
    }
    // max_runs keeps the newest runs.
    let (h, _) = session_replay::io::session_history(
        &store,
        &ids["S2"],
        HistoryOptions {
            max_runs: 1,
            ..HistoryOptions::default()
        },
    )
    .unwrap();
    assert_eq!(h.runs, 1);
    assert!(
        h.events
            .iter()
            .all(|e| e.run_id == "812276ce-7f41-4280-92eb-e61a9c795043")
    );
}

/// Token totals per run equal the sum of the recorded usages; tool error counts equal the
/// `tool.output` records flagged `is_error`; each run's outcome is its `run.end.outcome`.
#[test]
fn stats_agree_with_the_recorded_usage_and_tool_outputs() {
    let expected = expected();
    let runs = runs();
    let logs: Vec<RunRead> = runs.values().cloned().collect();
    let s = session_replay::stats(&logs);
    let mut grand = 0u64;
    for r in &s.runs {
        let exp = &expected["runs"][&r.run_id];
        let sum = |key: &str| -> u64 {
            exp["llm_responses"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x["usage"][key].as_u64().unwrap_or(0))
                .sum()
        };
        assert_eq!(r.tokens.input, sum("input_tokens"), "{}", r.run_id);
        assert_eq!(r.tokens.cached, sum("input_cached_tokens"), "{}", r.run_id);
        assert_eq!(r.tokens.cache_creation, sum("input_cache_creation_tokens"));
        assert_eq!(r.tokens.output, sum("output_tokens"), "{}", r.run_id);
        assert_eq!(r.tokens.total, sum("total_tokens"), "{}", r.run_id);
        grand += sum("total_tokens");
        let errors = exp["tool_outputs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["is_error"].as_bool() == Some(true))
            .count() as u64;
        assert_eq!(r.tool_errors, errors, "{}", r.run_id);
        assert_eq!(
            r.outcome.as_deref(),
            exp["run_end"]["outcome"].as_str(),
            "{}",
            r.run_id
        );
        assert_eq!(r.started_at, exp["started_at"].as_str().unwrap());
        assert!(r.duration_ms.is_some_and(|d| d >= 0), "{}", r.run_id);
    }
    assert_eq!(s.total.total, grand);
    assert!(
        s.by_tool["read"].errors >= 1,
        "S2 reads ../.profile and fails"
    );
    let by_session: u64 = s.by_session.values().map(|t| t.total).sum();
    assert_eq!(by_session, grand);
    let by_day: u64 = s.by_day.values().map(|t| t.total).sum();
    assert_eq!(by_day, grand);
}

/// The history rebuilt from a session's last run, prepared for resume without a system prompt,
/// equals the messages the runtime saved for that session (`messages/<id>.jsonl`), including
/// the crashed S9 whose dangling call the runtime normalised away.
#[test]
fn history_rebuilt_from_the_last_run_equals_the_saved_messages() {
    let expected = expected();
    let runs = runs();
    let mut checked = 0;
    for (session_id, exp) in expected["sessions_from_run_logs"].as_object().unwrap() {
        let order = exp["runs_in_started_at_order"].as_array().unwrap();
        let Some(last) = order
            .iter()
            .rev()
            .map(|r| &runs[r.as_str().unwrap()])
            .find(|r| !session_replay::invocations(&r.records).0.is_empty())
        else {
            continue;
        };
        let saved_path = fixture_dir().join(format!("sessions/messages/{session_id}.jsonl"));
        let saved: Vec<session_schema::BaseMessage> = std::fs::read(&saved_path)
            .unwrap()
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| session_schema::parse_message(l).unwrap().value)
            .collect();
        let (rebuilt, _) = session_replay::history_from_run(&last.records);
        let (prepared, _) =
            session_replay::prepare_resume(&rebuilt, "", session_replay::ResumeOptions::default());
        assert_eq!(
            serde_json::to_string(&prepared).unwrap(),
            serde_json::to_string(&saved).unwrap(),
            "{session_id}"
        );
        checked += 1;
    }
    assert!(checked >= 8, "{checked}");
}
