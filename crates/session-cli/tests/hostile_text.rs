//! Terminal control sequences and bidirectional overrides planted in every stored text field a
//! command prints never reach the terminal as themselves: every command in human mode writes
//! them escaped (`\u001b`, `\u202e`), on stdout and on stderr; JSON output escapes or carries
//! them as JSON allows; with `--color always` the only escape sequences are the tool's own
//! colours.
//!
//! Planted: a run file name and run id, a session id in a `state.db` row and in a message-log
//! file name, `last_user_message`, `workspace_root` and `meta_json` columns, a legacy snapshot,
//! model and provider names, the working directory and workspace of a run, user input, agent
//! text, tool names, call ids, arguments and results, error names and messages, a status
//! message, an unknown outcome, a final answer, a corrupt line, and an empty file.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::plant::{SessionRow, run_file, session, sessions};
use serde_json::Value;

/// ESC-based OSC (title) and CSI (clear, colour) sequences, BEL, the one-byte C1 CSI and OSC
/// (an OSC 8 hyperlink), RIGHT-TO-LEFT OVERRIDE and LEFT-TO-RIGHT ISOLATE, CR, backspace, NUL,
/// DEL.
const H: &str = "\u{1b}]0;pwned\u{7}\u{1b}[2J\u{1b}[31mred\u{9b}1m\u{9d}8;;http://x\u{7}\u{202e}RLO\u{2066}\r\u{8}\u{0}\u{7f}end";

/// What of `H` a file name can hold (no NUL, no `/`).
const HF: &str = "\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}1m\u{202e}RLO\r\u{8}\u{7f}";

const RUN: &str = "run-hostile-a";
const SESSION: &str = "sess-hostile";
/// A run id (and file name) that no writer of this tool would accept, but a file can have.
const EVIL_RUN: &str = "evil\u{1b}[2J\u{202e}name";

/// `H` as a JSON string literal (serde_json escapes C0; DEL, C1 and bidi stay raw).
fn j(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

fn plant(root: &Path) {
    let h = j(H);
    let run_a = vec![
        format!(
            r#"{{"type":"header","schema_version":1,"run_id":"{RUN}","session_id":"{SESSION}","started_at":"2026-02-03T12:00:00.000Z","client":{{"name":{h},"version":{h}}},"model":{{"provider":{h},"name":{h}}},"runtime":{{"cwd":{h},"os":{h}}}}}"#
        ),
        format!(
            r#"{{"type":"run.start","run_id":"{RUN}","session_id":"{SESSION}","ts":"2026-02-03T12:00:00.100Z","input":{{"type":"text","text":{h}}},"ui_context":{{"cwd":{h},"workspace_root":{h}}}}}"#
        ),
        format!(
            r#"{{"type":"run.status","run_id":"{RUN}","ts":"2026-02-03T12:00:00.200Z","status":"running","message":{h}}}"#
        ),
        format!(
            r#"{{"type":"agent.event","run_id":"{RUN}","ts":"2026-02-03T12:00:00.300Z","seq":0,"event":{{"type":"text","content":{h}}}}}"#
        ),
        format!(
            r#"{{"type":"llm.request","run_id":"{RUN}","ts":"2026-02-03T12:00:01.000Z","seq":1,"model":{{"provider":{h},"name":{h}}},"input":{{"messages":[{{"role":"system","content":{h}}},{{"role":"user","content":{h}}}],"tools":[{{"name":{h},"description":{h},"parameters":{{}},"strict":false}}],"tool_choice":{h},"model":{h}}}}}"#
        ),
        format!(
            r#"{{"type":"llm.response","run_id":"{RUN}","ts":"2026-02-03T12:00:02.000Z","seq":1,"output":{{"messages":[{{"role":"assistant","content":{h},"tool_calls":[{{"id":{h},"type":"function","function":{{"name":{h},"arguments":{h}}}}}]}}],"usage":{{"input_tokens":10,"output_tokens":5,"total_tokens":15,"model":{h}}},"stop_reason":{h},"provider_meta":null}}}}"#
        ),
        format!(
            r#"{{"type":"agent.event","run_id":"{RUN}","ts":"2026-02-03T12:00:02.100Z","seq":1,"event":{{"type":"step_start","step_id":{h},"title":{h}}}}}"#
        ),
        format!(
            r#"{{"type":"agent.event","run_id":"{RUN}","ts":"2026-02-03T12:00:02.200Z","seq":2,"event":{{"type":"tool_call","tool":{h},"args":{{"path":{h}}},"tool_call_id":{h},"display_name":{h}}}}}"#
        ),
        format!(
            r#"{{"type":"tool.output","run_id":"{RUN}","ts":"2026-02-03T12:00:02.300Z","tool":{h},"tool_call_id":{h},"result_raw":{h},"is_error":true}}"#
        ),
        format!(
            r#"{{"type":"agent.event","run_id":"{RUN}","ts":"2026-02-03T12:00:02.400Z","seq":3,"event":{{"type":"tool_result","tool":{h},"result":{h},"tool_call_id":{h},"is_error":true}}}}"#
        ),
        format!(
            r#"{{"type":"agent.event","run_id":"{RUN}","ts":"2026-02-03T12:00:02.500Z","seq":4,"event":{{"type":"final","content":{h}}}}}"#
        ),
        format!(
            r#"{{"type":"run.error","run_id":"{RUN}","ts":"2026-02-03T12:00:02.600Z","error":{{"name":{h},"message":{h},"stack":{h},"provider":{h}}}}}"#
        ),
        format!(
            r#"{{"type":"run.end","run_id":"{RUN}","ts":"2026-02-03T12:00:03.000Z","outcome":{h},"final":{h}}}"#
        ),
    ];
    run_file(root, "2026/02/03", &format!("{RUN}.jsonl"), &run_a);

    // A run whose id and file name are hostile, with a corrupt line holding raw control
    // bytes, and a torn tail (for `repair` and `verify`).
    let evil = j(EVIL_RUN);
    let path = run_file(
        root,
        "2026/02/04",
        &format!("{EVIL_RUN}.jsonl"),
        &[
            format!(
                r#"{{"type":"header","schema_version":1,"run_id":{evil},"session_id":{h},"started_at":"2026-02-04T12:00:00.000Z","model":{{"provider":{h},"name":{h}}}}}"#
            ),
            format!("\u{1b}]0;garbage\u{7} {H} not json"),
        ],
    );
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(format!(r#"{{"type":"run.end","run_id":{evil},"ts":"#).as_bytes());
    std::fs::write(&path, bytes).unwrap();
    // An empty file with a hostile name.
    std::fs::write(root.join(format!("2026/02/04/{HF}.jsonl")), b"").unwrap();

    // Saved sessions: the reference's row with hostile columns, a row whose id is hostile, a
    // message log without a row, and a legacy snapshot.
    session(
        root,
        &SessionRow {
            session_id: SESSION,
            updated_at: "2026-02-03T12:00:03.000Z",
            run_id: Some(RUN),
            last_user_message: Some(H),
            workspace_root: Some(H),
            meta_json: Some(&format!(r#"{{"codelia_workspace_root":{h},"note":{h}}}"#)),
            messages: Some(&[
                &format!(r#"{{"role":"user","content":{h}}}"#),
                &format!(
                    r#"{{"role":"assistant","content":{h},"tool_calls":[{{"id":{h},"type":"function","function":{{"name":{h},"arguments":{h}}}}}]}}"#
                ),
                &format!(
                    r#"{{"role":"tool","tool_call_id":{h},"tool_name":{h},"content":{h},"is_error":true}}"#
                ),
            ]),
        },
    );
    session(
        root,
        &SessionRow {
            session_id: &format!("sess{H}"),
            updated_at: H,
            run_id: Some(H),
            last_user_message: Some(H),
            workspace_root: Some(H),
            meta_json: Some(H),
            messages: None,
        },
    );
    std::fs::write(
        root.join("messages").join(format!("orphan{HF}.jsonl")),
        format!("{{\"role\":\"user\",\"content\":{h}}}\n"),
    )
    .unwrap();
    std::fs::create_dir_all(root.join("state")).unwrap();
    std::fs::write(
        root.join("state/sess-legacy.json"),
        format!(
            r#"{{"schema_version":1,"session_id":"sess-legacy","updated_at":"2026-02-05T00:00:00.000Z","run_id":{h},"messages":[{{"role":"user","content":{h}}}],"meta":{{"codelia_workspace_root":{h}}}}}"#
        ),
    )
    .unwrap();
}

/// Every character of `text` a terminal would act on: controls other than `\n` and `\t`,
/// and explicit bidi formatting characters.
fn unsafe_chars(text: &str) -> Vec<char> {
    text.chars()
        .filter(|&c| {
            (c.is_control() && c != '\n' && c != '\t')
                || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        })
        .collect()
}

struct Outcome {
    code: i32,
    out: String,
    err: String,
}

fn run(root: &Path, args: &[&str]) -> Outcome {
    let o = sessions(root, args);
    let r = Outcome {
        code: o.status.code().unwrap_or(-1),
        out: String::from_utf8_lossy(&o.stdout).into_owned(),
        err: String::from_utf8_lossy(&o.stderr).into_owned(),
    };
    assert!(!r.err.contains("panicked"), "{args:?}: {}", r.err);
    r
}

/// Runs a human-mode command and checks both streams; returns everything written.
fn human(root: &Path, args: &[&str]) -> String {
    let r = run(root, args);
    assert!(
        unsafe_chars(&r.out).is_empty(),
        "{args:?} (exit {}) wrote {:?} on stdout:\n{}",
        r.code,
        unsafe_chars(&r.out),
        r.out
    );
    assert!(
        unsafe_chars(&r.err).is_empty(),
        "{args:?} (exit {}) wrote {:?} on stderr:\n{}",
        r.code,
        unsafe_chars(&r.err),
        r.err
    );
    format!("{}{}", r.out, r.err)
}

/// Runs a JSON-mode command: stderr is escaped, stdout is JSON lines (no raw C0 control).
fn json(root: &Path, args: &[&str]) {
    let r = run(root, args);
    assert!(unsafe_chars(&r.err).is_empty(), "{args:?}: {}", r.err);
    assert!(!r.out.is_empty(), "{args:?} printed nothing: {}", r.err);
    for line in r.out.lines() {
        serde_json::from_str::<Value>(line)
            .unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {line}"));
        assert!(
            !line.chars().any(|c| c < ' '),
            "{args:?}: raw C0 control in {line:?}"
        );
    }
}

#[test]
fn no_stored_control_sequence_reaches_the_terminal_from_any_command() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    plant(&root);
    let r = root.to_str().unwrap();
    let mut seen = String::new();
    // A title holding the hostile text, written into our table the way another tool could.
    seen.push_str(&human(&root, &["pin", SESSION]));
    rusqlite::Connection::open(root.join("state.db"))
        .unwrap()
        .execute(
            "UPDATE session_labels SET title = ?1 WHERE session_id = ?2",
            rusqlite::params![H, SESSION],
        )
        .unwrap();
    // Reading commands, in human mode.
    for args in [
        &["where"][..],
        &["runs"],
        &["runs", "--session", SESSION],
        &["runs", "--outcome", "crashed"],
        &["sessions", "--all"],
        &["sessions", "--workspace", r],
        &["show", RUN],
        &["show", SESSION],
        &["history", SESSION],
        &["tail", RUN],
        &["verify"],
        &["verify", RUN],
        &["stats"],
        &["stats", "--by", "model"],
        &["stats", "--by", "session"],
        &["export", RUN, "--format", "md"],
        &["export", SESSION, "--format", "md"],
        &["export", "sess-legacy", "--format", "md"],
        &["repair", "--dry-run"],
        &["gc", "--older-than", "30d", "--dry-run"],
        &["archive", "--older-than", "30d", "--dry-run"],
        &["show", "sess-legacy"],
        &["storage"],
        &["delete", "sess-legacy", "--dry-run"],
        &["gc", "--keep-last", "0", "--max-size", "1", "--dry-run"],
        &["search", "pwned"],
    ] {
        seen.push_str(&human(&root, args));
    }
    // The same data in JSON: parses, no raw C0 control.
    for args in [
        &["where", "--json"][..],
        &["runs", "--json"],
        &["sessions", "--all", "--json"],
        &["history", SESSION, "--json"],
        &["verify", "--json"],
        &["stats", "--json"],
        &["repair", "--dry-run", "--json"],
        &["replay", RUN],
        &["export", RUN, "--format", "json"],
        &["export", SESSION, "--format", "json"],
        &["storage", "--json"],
        &["delete", "sess-legacy", "--dry-run", "--json"],
        &["search", "pwned", "--json"],
    ] {
        json(&root, args);
    }
    // With colour forced, the only escape sequences are the tool's own colours.
    for args in [
        &["--color", "always", "runs"][..],
        &["--color", "always", "show", RUN],
        &["--color", "always", "verify"],
        &["--color", "always", "search", "pwned"],
    ] {
        let out = run(&root, args).out;
        let stripped = ["1", "2", "0", "31", "32", "33", "35", "36"]
            .iter()
            .fold(out.clone(), |t, code| {
                t.replace(&format!("\u{1b}[{code}m"), "")
            });
        assert!(
            unsafe_chars(&stripped).is_empty(),
            "{args:?} let {:?} through:\n{out}",
            unsafe_chars(&stripped)
        );
        assert!(out.contains("\u{1b}["), "{args:?} is not coloured");
    }
    // Commands that change the store, then the listings again.
    for args in [
        &["repair", "--force"][..],
        &["reindex"],
        &["archive", "--older-than", "300d"],
        &["gc", "--older-than", "30d"],
        &["runs"],
        &["sessions", "--all"],
        &["verify"],
        &["unpin", SESSION],
        &["delete", SESSION],
        &["restore", SESSION],
        &["delete", SESSION],
        &["gc", "--empty-trash"],
    ] {
        seen.push_str(&human(&root, args));
    }
    // The stored text was shown, escaped: the planted sequences are visible, not acted on.
    for visible in [
        r"\u001b]0;pwned\u0007\u001b[2J",
        r"\u009b1m\u009d8;;http://x",
        r"\u202eRLO\u2066",
        r"evil\u001b[2J\u202ename",
    ] {
        assert!(seen.contains(visible), "{visible:?} never shown:\n{seen}");
    }
}
