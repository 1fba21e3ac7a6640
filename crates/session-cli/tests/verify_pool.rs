//! `sessions verify` of a whole store checks its run files on a few threads: its findings are
//! those of checking each file on its own, in listing order, with the same lines and offsets.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

mod common;

fn sessions(root: &Path, args: &[&str]) -> (i32, String) {
    let (code, out, _) = common::in_process(root, args);
    (code, out)
}

/// 24 run files over two days: clean, torn, with garbage, NUL bytes, requests without
/// responses.
fn store(root: &Path) {
    for day in 1..=2u32 {
        let dir = root.join(format!("2026/11/{day:02}"));
        std::fs::create_dir_all(&dir).unwrap();
        for k in 0..12u32 {
            let run = format!("{day}{k:02}00000-0000-4000-8000-000000000000");
            let mut body = format!(
                r#"{{"type":"header","schema_version":1,"run_id":"{run}","session_id":"s{k}","started_at":"2026-11-{day:02}T10:00:00.000Z"}}"#
            )
            .into_bytes();
            body.push(b'\n');
            if k % 4 == 1 {
                body.extend_from_slice(b"garbage line\n");
            }
            if k % 4 == 2 {
                body.extend_from_slice(&[0; 64]);
            }
            body.extend_from_slice(
                format!(
                    r#"{{"type":"llm.request","run_id":"{run}","ts":"2026-11-{day:02}T10:00:01.000Z","seq":1,"input":{{"messages":[{{"role":"user","content":"q {k}"}}]}}}}"#
                )
                .as_bytes(),
            );
            body.push(b'\n');
            if k % 3 == 0 {
                body.extend_from_slice(
                    format!(
                        r#"{{"type":"run.end","run_id":"{run}","ts":"2026-11-{day:02}T10:00:09.000Z","outcome":"completed"}}"#
                    )
                    .as_bytes(),
                );
                body.push(b'\n');
            }
            if k % 4 == 3 {
                body.extend_from_slice(br#"{"type":"run.st"#);
            }
            let path = dir.join(format!("{run}.jsonl"));
            std::fs::write(&path, body).unwrap();
        }
    }
}

#[test]
fn verify_of_the_whole_store_reports_what_each_file_checked_alone_reports_in_order() {
    let dir = tempfile::tempdir().unwrap();
    store(dir.path());
    // The order `verify` lists the store in.
    let files: Vec<std::path::PathBuf> = session_jsonl::list_run_files(dir.path())
        .unwrap()
        .files
        .into_iter()
        .map(|f| f.path)
        .collect();
    assert_eq!(files.len(), 24);
    let (code, whole) = sessions(dir.path(), &["verify", "--json"]);
    assert_eq!(code, 1, "{whole}");
    let findings = |out: &str| -> Vec<String> {
        out.lines()
            .filter(|l| l.contains(r#""type":"finding""#))
            .map(str::to_owned)
            .collect()
    };
    let mut one_by_one = Vec::new();
    for f in &files {
        let (_, out) = sessions(dir.path(), &["verify", "--json", f.to_str().unwrap()]);
        one_by_one.extend(findings(&out));
    }
    let whole_findings = findings(&whole);
    assert!(whole_findings.len() > 24, "{whole}");
    // Every file's findings (damage with its line and offset, unanswered requests, no
    // run.end), in listing order, as checking it alone gives them.
    assert_eq!(whole_findings, one_by_one);
    assert!(whole.contains(r#""run_files":24"#), "{whole}");
}
