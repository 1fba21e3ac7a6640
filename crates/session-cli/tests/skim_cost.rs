//! Listing runs builds the run index without decoding the conversation each `llm.request`
//! repeats (most bytes of a real log); `verify` still decodes and checks every one.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use session_cli::{Env, Terminal, run_with};
use session_jsonl::{
    llm_requests_deserialized_on_this_thread as decoded,
    llm_requests_skimmed_on_this_thread as skimmed,
};

const RUN: &str = "00000000-0000-4000-8000-000000000001";

/// Runs `sessions --root <root> <args>` in-process; (exit code, llm.request records decoded,
/// skimmed).
fn sessions(root: &Path, args: &[&str]) -> (i32, u64, u64) {
    let env = Env::from_pairs([
        ("HOME".to_owned(), "/nonexistent-home".to_owned()),
        ("TZ".to_owned(), "UTC".to_owned()),
    ]);
    let mut argv: Vec<std::ffi::OsString> = vec!["sessions".into(), "--root".into(), root.into()];
    argv.extend(args.iter().map(Into::into));
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let (d0, s0) = (decoded(), skimmed());
    let code = run_with(argv, &mut out, &mut err, &env, Terminal::default());
    (code, decoded() - d0, skimmed() - s0)
}

#[test]
fn listing_skims_requests_and_verify_decodes_them() {
    let dir = tempfile::tempdir().unwrap();
    let day = dir.path().join("2026/11/30");
    std::fs::create_dir_all(&day).unwrap();
    let mut body = format!(
        r#"{{"type":"header","schema_version":1,"run_id":"{RUN}","session_id":"s1","started_at":"2026-11-30T10:00:00.000Z","model":{{"provider":"p","name":"m"}}}}"#
    );
    body.push('\n');
    for seq in 1..=5 {
        body.push_str(&format!(
            r#"{{"type":"llm.request","run_id":"{RUN}","ts":"2026-11-30T10:00:0{seq}.000Z","seq":{seq},"model":{{"provider":"p","name":"m"}},"input":{{"messages":[{{"role":"user","content":"hello {seq}"}}],"tools":null,"tool_choice":"auto"}}}}"#
        ));
        body.push('\n');
    }
    body.push_str(&format!(
        r#"{{"type":"run.end","run_id":"{RUN}","ts":"2026-11-30T10:01:00.000Z","outcome":"completed"}}"#
    ));
    body.push('\n');
    std::fs::write(day.join(format!("{RUN}.jsonl")), body).unwrap();

    assert_eq!(sessions(dir.path(), &["runs"]), (0, 0, 5));
    assert_eq!(sessions(dir.path(), &["reindex"]), (0, 0, 5));
    // Requests without responses are findings (exit 1), not errors.
    assert_eq!(sessions(dir.path(), &["verify"]), (1, 5, 0));
}
