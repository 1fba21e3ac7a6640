//! Data-driven cases in `test_data/NNNN_name/`, all checked through [`check`].
//!
//! A case directory holds inputs:
//! * `run*.jsonl` — run logs (one or more), read through [`session_replay::io::read_run`];
//! * `messages.jsonl` — a saved history for resume preparation, with `system-prompt.txt`;
//! * `params.json` — optional `{"prompt_seq": n, "max_runs": n, "max_events": n}`;
//!
//! and one expected file per output: `diagnostics.txt` (reader and structure checks),
//! `invocations.txt`, `prompt.txt`, `snapshots.txt`,
//! `transcript.md` (single-run cases), `recovered.txt` (history rebuilt from the last run),
//! `history.txt`, `stats.txt`, `resume.txt` and
//! `resume-synthesize.txt`. Run with `UPDATE_EXPECT=1` to rewrite the expected files after
//! reviewing the change.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use session_replay::{
    Diagnostic, HistoryOptions, ResumeOptions, RunMeta, RunRead, UnansweredCalls, check_snapshots,
    prepare_resume, prompt_at, render_markdown, session_history, session_invocations,
    skipped_lines, stats, transcript_with,
};
use session_schema::{AgentEvent, BaseMessage, parse_message};

fn test_data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data")
}

fn push_diags(out: &mut String, diags: &[Diagnostic]) {
    if diags.is_empty() {
        return;
    }
    out.push_str("diagnostics:\n");
    for d in diags {
        let _ = writeln!(out, "  {d}");
    }
}

fn render_invocations(runs: &[RunRead]) -> String {
    let mut out = String::new();
    let (invs, diags) = session_invocations(runs);
    for inv in &invs {
        let _ = write!(out, "seq {} run {}:", inv.seq, inv.run_id());
        match inv.request_record {
            Some(r) => {
                let _ = write!(out, " request record {r}");
            }
            None => out.push_str(" no request"),
        }
        match inv.response_record {
            Some(r) => {
                let _ = write!(out, ", response record {r}");
            }
            None => out.push_str(", MISSING RESPONSE"),
        }
        if let Some(ms) = inv.duration_ms() {
            let _ = write!(out, ", {ms} ms");
        }
        if !inv.retries.is_empty() {
            let _ = write!(out, ", {} retries", inv.retries.len());
        }
        if let Some(m) = inv.model_name() {
            let _ = write!(out, ", model {m}");
        }
        if let Some(u) = inv.usage() {
            let _ = write!(
                out,
                ", tokens in {} out {} total {}",
                u.input_tokens, u.output_tokens, u.total_tokens
            );
        }
        if let Some(s) = inv.stop_reason() {
            let _ = write!(out, ", stop {s}");
        }
        out.push('\n');
    }
    push_diags(&mut out, &diags);
    out
}

fn render_prompt(run: &RunRead, seq: Option<i64>) -> String {
    let mut out = String::new();
    let (prompt, diags) = prompt_at(&run.records, seq);
    match prompt {
        None => out.push_str("no prompt\n"),
        Some(p) => {
            let _ = writeln!(
                out,
                "seq {} (run {}, record {}, {})",
                p.seq, p.run_id, p.record, p.ts
            );
            if let Some(m) = &p.model {
                let _ = writeln!(out, "model: {}", serde_json::to_string(m).unwrap());
            }
            let _ = writeln!(
                out,
                "tool_choice: {}",
                p.tool_choice.as_ref().map_or("null", |c| c.as_str())
            );
            let tools: Vec<&str> = p.tools.iter().flatten().map(|t| t.name()).collect();
            let _ = writeln!(out, "tools: [{}]", tools.join(", "));
            let _ = writeln!(out, "messages ({}):", p.messages.len());
            for m in &p.messages {
                let _ = writeln!(out, "  {}", serde_json::to_string(m).unwrap());
            }
            // The typed messages serialize back to the raw snapshot byte for byte.
            assert_eq!(serde_json::to_string(&p.messages).unwrap(), p.raw_messages);
            match p.over_inclusive {
                None => out.push_str("over-inclusive: no\n"),
                Some(o) => {
                    let _ = writeln!(
                        out,
                        "over-inclusive: own response from message {} ({} appended); corrected prompt has {} message(s)",
                        o.own_response_at,
                        o.appended,
                        p.corrected_messages().len()
                    );
                }
            }
        }
    }
    push_diags(&mut out, &diags);
    out
}

fn render_snapshots(runs: &[RunRead]) -> String {
    let mut out = String::new();
    for run in runs {
        let (report, diags) = check_snapshots(&run.records);
        let _ = writeln!(
            out,
            "run {}: {} request(s), {} pair(s) compared, continuous: {}",
            RunMeta::of(run).run_id,
            report.requests,
            report.compared,
            report.is_continuous()
        );
        let _ = writeln!(out, "  over-inclusive: {:?}", report.over_inclusive);
        let _ = writeln!(
            out,
            "  resets after compaction: {:?}",
            report.resets_after_compaction
        );
        for d in &report.divergences {
            let _ = writeln!(out, "  divergence: {d:?}");
        }
        push_diags(&mut out, &diags);
    }
    out
}

fn render_history(runs: &[RunRead], options: HistoryOptions) -> String {
    let h = session_history(runs, options);
    let mut out = format!(
        "runs {}, events_sent {}, truncated {}\n",
        h.runs, h.events_sent, h.truncated
    );
    for e in &h.events {
        let _ = write!(out, "{} {} {}", e.run_id, e.seq, e.event.tag());
        if let AgentEvent::HiddenUserMessage(c) | AgentEvent::Final(c) = &e.event {
            let _ = write!(out, " {:?}", c.content.as_deref().unwrap_or(""));
        }
        out.push('\n');
    }
    out
}

fn render_stats(runs: &[RunRead]) -> String {
    let s = stats(runs);
    let mut out = String::new();
    let _ = writeln!(out, "total: {:?}", s.total);
    for r in &s.runs {
        let _ = writeln!(out, "run: {r:?}");
    }
    for i in &s.invocations {
        let _ = writeln!(out, "invocation: {i:?}");
    }
    for (k, v) in &s.by_session {
        let _ = writeln!(out, "session {k:?}: {v:?}");
    }
    for (k, v) in &s.by_model {
        let _ = writeln!(out, "model {k:?}: {v:?}");
    }
    for (k, v) in &s.by_day {
        let _ = writeln!(out, "day {k}: {v:?}");
    }
    for (k, v) in &s.by_tool {
        let _ = writeln!(out, "tool {k}: {v:?} error rate {:.3}", v.error_rate());
    }
    out
}

fn render_resume(messages: &[BaseMessage], system: &str, policy: UnansweredCalls) -> String {
    let (out_messages, changes) = prepare_resume(
        messages,
        system,
        ResumeOptions {
            unanswered_calls: policy,
        },
    );
    let mut out = String::from("changes:\n");
    for c in &changes {
        let _ = writeln!(out, "  {}", c.describe());
    }
    out.push_str("messages:\n");
    for m in &out_messages {
        let _ = writeln!(out, "  {}", serde_json::to_string(m).unwrap());
    }
    // Preparing the result again changes nothing but the system prompt swap.
    let (again, changes2) = prepare_resume(&out_messages, system, ResumeOptions::default());
    assert_eq!(again, out_messages, "resume preparation is not idempotent");
    assert!(changes2.iter().all(|c| matches!(
        c,
        session_replay::ResumeChange::RemovedLeadingSystem { .. }
            | session_replay::ResumeChange::PrependedSystemPrompt { .. }
    )));
    out
}

/// Computes every output of a case and compares it with the expected files beside the inputs
/// (or rewrites them under `UPDATE_EXPECT=1`). Returns the mismatches.
fn check(case: &Path) -> Vec<String> {
    let params: serde_json::Value = std::fs::read_to_string(case.join("params.json"))
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or(serde_json::Value::Null);
    let mut run_files: Vec<PathBuf> = std::fs::read_dir(case)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("run") && name.ends_with(".jsonl")
        })
        .collect();
    run_files.sort();
    // Read through the real reader (session-jsonl), as the CLI does.
    let mut read_diags = String::new();
    let runs: Vec<RunRead> = run_files
        .iter()
        .map(|p| {
            let (log, diags) = session_replay::io::read_run(p).unwrap();
            let _ = writeln!(read_diags, "{}:", p.file_name().unwrap().to_string_lossy());
            for d in &diags {
                let _ = writeln!(read_diags, "  {d}");
            }
            log
        })
        .collect();

    // session_history gets the runs in file order (it orders them itself); the per-session
    // views get them in started_at order, as their contract asks.
    let mut sorted = runs.clone();
    sorted.sort_by_key(|r| RunMeta::of(r).started_at);
    let mut outputs: BTreeMap<&str, String> = BTreeMap::new();
    if !runs.is_empty() {
        outputs.insert("diagnostics.txt", read_diags);
        outputs.insert("invocations.txt", render_invocations(&sorted));
        outputs.insert("snapshots.txt", render_snapshots(&sorted));
        let options = HistoryOptions {
            max_runs: params["max_runs"].as_u64().map_or(20, |n| n as usize),
            max_events: params["max_events"].as_u64().map_or(1500, |n| n as usize),
        };
        outputs.insert("history.txt", render_history(&runs, options));
        outputs.insert("stats.txt", render_stats(&sorted));
        let last = sorted.last().unwrap();
        outputs.insert(
            "prompt.txt",
            render_prompt(last, params["prompt_seq"].as_i64()),
        );
        let (recovered, diags) = session_replay::history_from_run(&last.records);
        let mut text = format!("messages ({}):\n", recovered.len());
        for m in &recovered {
            let _ = writeln!(text, "  {}", serde_json::to_string(m).unwrap());
        }
        push_diags(&mut text, &diags);
        outputs.insert("recovered.txt", text);
        if runs.len() == 1 {
            let t = transcript_with(&last.records, &skipped_lines(last));
            outputs.insert("transcript.md", render_markdown(&t));
        }
    }
    if let Ok(text) = std::fs::read(case.join("messages.jsonl")) {
        let messages: Vec<BaseMessage> = text
            .split(|b| *b == b'\n')
            .filter(|l| !l.trim_ascii().is_empty())
            .map(|l| parse_message(l).unwrap().value)
            .collect();
        let system = std::fs::read_to_string(case.join("system-prompt.txt")).unwrap_or_default();
        let system = system.trim_end_matches('\n');
        outputs.insert(
            "resume.txt",
            render_resume(&messages, system, UnansweredCalls::Drop),
        );
        outputs.insert(
            "resume-synthesize.txt",
            render_resume(&messages, system, UnansweredCalls::SynthesizeError),
        );
    }
    assert!(!outputs.is_empty(), "{}: no inputs", case.display());

    let update = std::env::var_os("UPDATE_EXPECT").is_some_and(|v| v == "1");
    let mut failures = Vec::new();
    for (name, actual) in outputs {
        let path = case.join(name);
        let expected = std::fs::read_to_string(&path).ok();
        if expected.as_deref() == Some(actual.as_str()) {
            continue;
        }
        if update {
            std::fs::write(&path, &actual).unwrap();
        } else {
            failures.push(format!(
                "{}: {} (UPDATE_EXPECT=1 rewrites it)",
                path.display(),
                first_difference(expected.as_deref(), &actual)
            ));
        }
    }
    failures
}

/// Where an expected file and the actual output first differ, with a few lines of each.
fn first_difference(expected: Option<&str>, actual: &str) -> String {
    let Some(expected) = expected else {
        return format!("missing; actual output:\n{actual}");
    };
    let e: Vec<&str> = expected.lines().collect();
    let a: Vec<&str> = actual.lines().collect();
    let at = e
        .iter()
        .zip(&a)
        .position(|(x, y)| x != y)
        .unwrap_or(e.len().min(a.len()));
    let show = |lines: &[&str]| -> String {
        lines
            .iter()
            .skip(at)
            .take(4)
            .map(|l| format!("    {l}\n"))
            .collect()
    };
    format!(
        "differs at line {}\n  expected:\n{}  actual:\n{}",
        at + 1,
        show(&e),
        show(&a)
    )
}

#[test]
fn test_data_cases() {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(test_data())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    assert!(
        cases.len() >= 10,
        "expected the test_data cases to be present"
    );
    let failures: Vec<String> = cases.iter().flat_map(|c| check(c)).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
