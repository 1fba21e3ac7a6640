//! Running `sessions verify` and `sessions show` in-process on a store whose last run crashed
//! mid-write, as a test suite or another tool would: output in buffers, the exit status as a
//! number. The crate README shows this same code.
//!
//! ```text
//! cargo run -p session-cli --example verify_in_process
//! ```

// A command-line program: printing is its interface.
#![allow(clippy::print_stdout)]

use std::io::Write;

use session_cli::{EXIT_OK, EXIT_PROBLEMS, Env, Terminal, run_with};
use session_jsonl::{Durability, RunWriter, WriterOptions};
use session_schema::{Header, Record, RunInput, RunStart, TextInput, Timestamp};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("sessions");
    let run_id = "8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a";
    let header = Header {
        schema_version: 1,
        run_id: run_id.into(),
        session_id: Some("f6d2c6d5-4a12-4cc4-bbc9-9a0c0d2b5af1".into()),
        started_at: Timestamp::from_raw("2026-02-03T12:00:00.123Z"),
        ..Default::default()
    };
    let writer = RunWriter::create(
        &root,
        &header,
        WriterOptions::with_durability(Durability::Flush),
    )?;
    writer.append(&Record::RunStart(RunStart {
        run_id: run_id.into(),
        ts: Timestamp::from_raw("2026-02-03T12:00:00.456Z"),
        input: RunInput::Text(TextInput {
            text: "list files".into(),
            ..Default::default()
        }),
        ..Default::default()
    }))?;
    let path = writer.path().to_owned();
    drop(writer);
    // The process dies in the middle of its next line.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)?
        .write_all(br#"{"type":"llm.request","run_id":"8f1d"#)?;

    // `sessions --root <root> verify --json`: one JSON object per finding, exit status 1.
    let env = Env::from_pairs([("HOME".to_owned(), "/nonexistent".to_owned())]);
    let sessions = |args: &[&str]| {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let mut argv = vec![
            "sessions".into(),
            "--root".into(),
            root.clone().into_os_string(),
        ];
        argv.extend(args.iter().map(Into::into));
        let code = run_with(argv, &mut out, &mut err, &env, Terminal::default());
        (code, String::from_utf8_lossy(&out).into_owned())
    };
    let (code, report) = sessions(&["verify", "--json"]);
    assert_eq!(code, EXIT_PROBLEMS);
    assert!(report.contains(r#""kind":"torn_tail""#), "{report}");
    print!("{report}");

    // `sessions show <run>`: the transcript ends by saying the run is incomplete.
    let (code, shown) = sessions(&["show", run_id]);
    assert_eq!(code, EXIT_OK);
    assert!(shown.contains("list files"));
    print!("{shown}");
    Ok(())
}
