//! Replaying a crashed run as the reference runtime wrote it: its invocations, the exact prompt
//! of the last one (corrected, because the reference serialized it too late), a transcript that
//! says the run is incomplete, and a conversation rebuilt from the log and made ready for
//! resuming. The crate README shows this same code.
//!
//! ```text
//! cargo run -p session-replay --example replay_and_resume
//! ```

// A command-line program: printing is its interface.
#![allow(clippy::print_stdout)]

use session_replay::{
    EntryKind, ResumeOptions, history_from_run, invocations, io, prepare_resume, prompt_at,
    render_markdown, transcript,
};
use session_schema::BaseMessage;

/// A run the process was killed in: no `run.end`, a torn last line, and a second request whose
/// snapshot already holds its own response (serialized after the answer arrived).
const RUN: &str = r#"{"type":"header","schema_version":1,"run_id":"8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a","session_id":"f6d2c6d5-4a12-4cc4-bbc9-9a0c0d2b5af1","started_at":"2026-02-03T12:00:00.123Z"}
{"type":"run.start","run_id":"8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a","session_id":"f6d2c6d5-4a12-4cc4-bbc9-9a0c0d2b5af1","ts":"2026-02-03T12:00:00.456Z","input":{"type":"text","text":"list files"}}
{"type":"llm.request","run_id":"8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a","ts":"2026-02-03T12:00:01.000Z","seq":1,"input":{"messages":[{"role":"system","content":"You are a coding assistant."},{"role":"user","content":"list files"}],"tools":null,"tool_choice":null}}
{"type":"llm.response","run_id":"8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a","ts":"2026-02-03T12:00:02.000Z","seq":1,"output":{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"shell","arguments":"{\"command\":\"ls\"}"}}]}],"usage":null,"stop_reason":"tool_use","provider_meta":null}}
{"type":"tool.output","run_id":"8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a","ts":"2026-02-03T12:00:02.500Z","tool":"shell","tool_call_id":"call_1","result_raw":"Cargo.toml\nsrc\n"}
{"type":"llm.request","run_id":"8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a","ts":"2026-02-03T12:00:03.000Z","seq":2,"input":{"messages":[{"role":"system","content":"You are a coding assistant."},{"role":"user","content":"list files"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"shell","arguments":"{\"command\":\"ls\"}"}}]},{"role":"tool","tool_call_id":"call_1","tool_name":"shell","content":"Cargo.toml\nsrc\n"},{"role":"assistant","content":"Cargo.toml and src."}],"tools":null,"tool_choice":null}}
{"type":"llm.response","run_id":"8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a","ts":"2026-02-03T12:00:04.000Z","seq":2,"output":{"messages":[{"role":"assistant","content":"Cargo.toml and src."}],"usage":null,"stop_reason":"end_turn","provider_meta":null}}
{"type":"agent.event","run_id":"8f1d7b7a-7e8f-4e0f-9a7c-1c5d"#;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir
        .path()
        .join("8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a.jsonl");
    std::fs::write(&path, RUN)?;

    // The only fallible step is reading; damage becomes skipped lines and diagnostics.
    let (log, diagnostics) = io::read_run(&path)?;
    assert!(log.has_torn_tail() && !log.has_run_end());
    for d in &diagnostics {
        println!("{:?}: {}", d.severity, d.message);
    }

    // Invocations are numbered per session (`seq` continues across runs).
    let (calls, _) = invocations(&log.records);
    let seqs: Vec<i64> = calls.iter().map(|c| c.seq).collect();
    assert_eq!(seqs, [1, 2]);

    // The last prompt as it was sent. Its snapshot ends with its own response, so the prompt
    // really sent is the corrected one, without it.
    let (prompt, _) = prompt_at(&log.records, None);
    let prompt = prompt.ok_or("the run has no request")?;
    assert_eq!(prompt.seq, 2);
    assert_eq!(prompt.messages.len(), 5);
    assert!(prompt.over_inclusive.is_some());
    assert_eq!(prompt.corrected_messages().len(), 4);

    // A transcript that does not pretend the run finished.
    let account = transcript(&log.records);
    let last = account.entries.last().ok_or("empty transcript")?;
    assert!(matches!(last.kind, EntryKind::Incomplete { .. }));
    println!("{}", render_markdown(&account));

    // The conversation at the end of the run, rebuilt from the log (when the saved state is
    // lost or damaged), then prepared for resuming under today's system prompt: the saved
    // startup prompt goes, tool calls stay paired.
    let (rebuilt, _) = history_from_run(&log.records);
    let (resumed, changes) = prepare_resume(
        &rebuilt,
        "You are a careful coding assistant.",
        ResumeOptions::default(),
    );
    assert!(matches!(&resumed[0], BaseMessage::System(_)));
    assert_eq!(resumed.len(), rebuilt.len());
    for change in &changes {
        println!("resume: {}", change.describe());
    }
    Ok(())
}
