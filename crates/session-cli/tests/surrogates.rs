//! Lone UTF-16 surrogate escapes (a cut emoji as JavaScript's `JSON.stringify` writes it) in
//! every part of a run and a session: every JSON document and listing the tool emits is strict
//! JSON (no unpaired `\ud800`–`\udfff` escape, parses with serde_json), `replay` keeps every
//! message, byte-exact outputs (`show --raw`, `export --format jsonl`) give the stored bytes, and
//! `verify` names each line.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::plant::{SessionRow, run_file, session, sessions};
use serde_json::Value;
use session_schema::surrogate::find_lone_surrogates;

const RUN: &str = "run-cut-emoji";
const SESSION: &str = "sess-cut-emoji";

fn lines() -> Vec<String> {
    [
        r#"{"type":"header","schema_version":1,"run_id":"run-cut-emoji","session_id":"sess-cut-emoji","started_at":"2026-02-03T12:00:00.000Z","model":{"provider":"openai","name":"gpt-x"}}"#,
        r#"{"type":"run.start","run_id":"run-cut-emoji","session_id":"sess-cut-emoji","ts":"2026-02-03T12:00:00.100Z","input":{"type":"text","text":"typed \ud83c field"}}"#,
        r#"{"type":"llm.request","run_id":"run-cut-emoji","ts":"2026-02-03T12:00:01.000Z","seq":1,"input":{"messages":[{"role":"user","content":"what is \ud83c?"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"echo","arguments":"{\"s\":\"\udc00\"}"},"provider_meta":{"sig":"\uD83D"}}]},{"role":"tool","tool_call_id":"c1","tool_name":"echo","content":"ok"}],"tools":null,"tool_choice":null}}"#,
        r#"{"type":"agent.event","run_id":"run-cut-emoji","ts":"2026-02-03T12:00:01.500Z","seq":0,"event":{"type":"tool_call","tool":"echo","args":{"s":"\udbff"},"tool_call_id":"c1"}}"#,
        r#"{"type":"llm.response","run_id":"run-cut-emoji","ts":"2026-02-03T12:00:02.000Z","seq":1,"output":{"messages":[{"role":"assistant","content":"done \ud83d"}],"usage":null,"stop_reason":"end_turn","provider_meta":{"id":"\ud800"}}}"#,
        r#"{"type":"run.end","run_id":"run-cut-emoji","ts":"2026-02-03T12:00:03.000Z","outcome":"completed"}"#,
    ]
    .map(str::to_owned)
    .to_vec()
}

/// Checks that `text` is strict JSON with no unpaired surrogate escape and returns it parsed.
fn strict(what: &str, text: &str) -> Value {
    let lone = find_lone_surrogates(text.as_bytes());
    assert!(
        lone.is_empty(),
        "{what}: unpaired escapes {:?} in {text}",
        lone.iter().map(|s| s.escape_str()).collect::<Vec<_>>()
    );
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{what}: not strict JSON ({e}): {text}"))
}

fn out(root: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let o = sessions(root, args);
    let stdout = String::from_utf8(o.stdout).unwrap();
    let stderr = String::from_utf8(o.stderr).unwrap();
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    (o.status.code().unwrap_or(-1), stdout, stderr)
}

#[test]
fn every_emitted_json_is_strict_and_byte_exact_outputs_keep_the_stored_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let path = run_file(&root, "2026/02/03", &format!("{RUN}.jsonl"), &lines());
    let stored = std::fs::read(&path).unwrap();
    session(
        &root,
        &SessionRow {
            session_id: SESSION,
            updated_at: "2026-02-03T12:00:03.000Z",
            run_id: Some(RUN),
            last_user_message: Some("what is \u{fffd}?"),
            workspace_root: None,
            meta_json: None,
            messages: Some(&[
                r#"{"role":"user","content":"what is \ud83c?"}"#,
                r#"{"role":"reasoning","content":null,"raw_item":{"enc":"\udc01"}}"#,
                r#"{"role":"assistant","content":"done \ud83d"}"#,
            ]),
        },
    );

    // replay: every message is kept (U+FFFD in place of the cut emoji); the output is strict.
    let (code, text, err) = out(&root, &["replay", RUN]);
    assert_eq!(code, 0, "{err}");
    let v = strict("replay", &text);
    let messages = v["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[0]["content"], "what is \u{fffd}?");
    assert_eq!(
        messages[1]["tool_calls"][0]["function"]["arguments"],
        "{\"s\":\"\u{fffd}\"}"
    );
    assert_eq!(
        messages[1]["tool_calls"][0]["provider_meta"]["sig"],
        "\u{fffd}"
    );
    assert!(!err.contains("undecodable"), "{err}");

    // export --format json (a run and a session): strict, every record exported.
    let (code, text, err) = out(&root, &["export", RUN, "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let v = strict("export run json", &text);
    assert_eq!(v["records"].as_array().unwrap().len(), 6);
    assert_eq!(v["records"][1]["input"]["text"], "typed \u{fffd} field");
    assert_eq!(v["records"][4]["output"]["provider_meta"]["id"], "\u{fffd}");
    let (code, text, err) = out(&root, &["export", SESSION, "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let v = strict("export session json", &text);
    assert_eq!(v["state"]["messages"].as_array().unwrap().len(), 3);
    assert_eq!(v["state"]["messages"][1]["raw_item"]["enc"], "\u{fffd}");

    // Byte-exact outputs give the stored bytes, escapes and all.
    let (code, text, _) = out(&root, &["export", RUN, "--format", "jsonl"]);
    assert_eq!(code, 0);
    assert_eq!(text.as_bytes(), stored.as_slice());
    let (code, text, _) = out(&root, &["show", RUN, "--raw"]);
    assert_eq!(code, 0);
    assert_eq!(text.as_bytes(), stored.as_slice());
    // `tail --raw` too; its damage reports (here: the repairs) go to stderr.
    let (code, text, err) = out(&root, &["tail", "-n", "+1", RUN, "--raw"]);
    assert_eq!(code, 0);
    assert_eq!(text.as_bytes(), stored.as_slice());
    assert_eq!(err.matches("damage: lone_surrogate").count(), 4, "{err}");

    // Listings and histories, one JSON object per line.
    for args in [
        &["runs", "--json"][..],
        &["sessions", "--all", "--json"],
        &["history", SESSION, "--json"],
        &["verify", "--json"],
        &["stats", "--json"],
    ] {
        let (_, text, err) = out(&root, args);
        assert!(!text.is_empty(), "{args:?}: {err}");
        for line in text.lines() {
            strict(&format!("{args:?}"), line);
        }
    }
    let (_, text, _) = out(&root, &["history", SESSION, "--json"]);
    let args: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["type"] == "event" && v["event_type"] == "tool_call")
        .map(|v| v["event"]["args"].clone())
        .collect();
    assert_eq!(args, [serde_json::json!({"s": "\u{fffd}"})]);
}

#[test]
fn verify_names_every_line_with_a_lone_surrogate() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let lines = lines();
    run_file(&root, "2026/02/03", &format!("{RUN}.jsonl"), &lines);
    let (code, text, err) = out(&root, &["verify", "--json"]);
    assert_eq!(code, 0, "notes only: {text}{err}");
    let found: Vec<(u64, u64)> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["kind"] == "lone_surrogate")
        .map(|v| (v["line"].as_u64().unwrap(), v["offset"].as_u64().unwrap()))
        .collect();
    // Line 2 has it in a decoded field; lines 3, 4 and 5 only inside raw parts.
    let offset = |n: usize| lines[..n].iter().map(|l| l.len() as u64 + 1).sum::<u64>();
    assert_eq!(
        found,
        [
            (2, offset(1)),
            (3, offset(2)),
            (4, offset(3)),
            (5, offset(4))
        ]
    );
    let (code, human, _) = out(&root, &["verify"]);
    assert_eq!(code, 0);
    for n in [2, 3, 4, 5] {
        let at = format!(
            "{RUN}.jsonl:{n} (byte offset {}): note [lone_surrogate]",
            offset(n - 1)
        );
        assert!(human.contains(&at), "{at:?} not named:\n{human}");
    }
    let third = format!(
        "3 lone surrogate escape(s) repaired as U+FFFD, first \\ud83c at byte {} of the line",
        lines[2].find("\\ud83c").unwrap()
    );
    assert!(human.contains(&third), "{third:?} not in:\n{human}");
}
