//! Embedding the store in an agent runtime: one durable run log per run, the session's
//! resumable state saved after it, then both read back. The README shows this same code.
//!
//! ```text
//! cargo run -p session-cli --example embed_writer
//! ```

// A command-line program: printing is its interface.
#![allow(clippy::print_stdout)]

use session_jsonl::{Durability, RunWriter, WriterOptions, read_run};
use session_schema::{
    BaseMessage, Header, Lazy, LlmRequest, LlmRequestInput, MessageContent, Record, RunEnd,
    RunInput, RunOutcome, RunStart, SessionState, TextInput, Timestamp, UserMessage, check_id,
};
use session_state::StateStore;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("sessions"); // normally ~/.codelia/sessions
    let store = StateStore::open(&root)?;

    let session_id = "f6d2c6d5-4a12-4cc4-bbc9-9a0c0d2b5af1";
    let run_id = "8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a";
    check_id(run_id)?; // ids become file names: refuse anything that could leave the directory

    // One writer per session: held from resume to the last save. A second runtime resuming
    // the session gets `StateError::SessionBusy` naming this process; the lock dies with it.
    let lease = store.lease(session_id)?;

    // One writer per run file (it holds an advisory lock). Group commit: `append` returns once
    // the record is on disk, and concurrent appends share one fdatasync.
    let header = Header {
        schema_version: 1,
        run_id: run_id.into(),
        session_id: Some(session_id.into()),
        started_at: Timestamp::now(),
        ..Default::default()
    };
    let opts = WriterOptions::with_durability(Durability::group_commit());
    let writer = RunWriter::create(&root, &header, opts)?;

    let question = BaseMessage::User(UserMessage {
        content: MessageContent::Text("list files".into()),
        ..Default::default()
    });
    writer.append(&Record::RunStart(RunStart {
        run_id: run_id.into(),
        session_id: Some(session_id.into()),
        ts: Timestamp::now(),
        input: RunInput::Text(TextInput {
            text: "list files".into(),
            ..Default::default()
        }),
        ..Default::default()
    }))?;
    // The request is serialized now, at `append`: later changes to the history cannot leak
    // into this snapshot.
    writer.append(&Record::LlmRequest(LlmRequest {
        run_id: run_id.into(),
        ts: Timestamp::now(),
        seq: 1,
        input: LlmRequestInput {
            messages: Lazy::new(&vec![question.clone()])?,
            tools: Some(Lazy::new(&None)?),
            tool_choice: Some(None),
            ..Default::default()
        },
        ..Default::default()
    }))?;
    writer.append(&Record::RunEnd(RunEnd {
        run_id: run_id.into(),
        ts: Timestamp::now(),
        outcome: RunOutcome::Completed,
        ..Default::default()
    }))?;
    let path = writer.path().to_owned();
    writer.close()?;

    // Resumable state: state.db row + messages/<session_id>.jsonl, crash-consistent.
    lease.save(&SessionState {
        session_id: session_id.into(),
        updated_at: Timestamp::now(),
        run_id: Some(run_id.into()),
        invoke_seq: Some(1),
        messages: vec![question],
        ..Default::default()
    })?;

    // Reading back: complete records plus damage reports (none here).
    drop(lease);
    let run = read_run(&path)?;
    let loaded = store.load(session_id)?.ok_or("session not saved")?;
    println!(
        "{}: {} records, {} damage report(s); session has {} message(s)",
        path.display(),
        run.records.len(),
        run.damage.len(),
        loaded.state.messages.len()
    );
    Ok(())
}
