//! A run that is still being written (its writer holds the lock) while the other layers look
//! at the store: it is indexed as open, shown as running however old its records are, kept by
//! `archive` and `gc`, never sealed by `repair`; a second writer is refused. Once it ends, every
//! view picks up the rest.

use std::fs;

use session_jsonl::{Durability, RunWriter, WriterOptions, is_locked};
use session_state::{IndexedRunOutcome, StateStore};

use crate::support::*;

const SESSION: &str = "7e57a11e-0000-4000-8000-00000000beef";
const RUN: &str = "1ead1ead-0000-4000-8000-000000000001";
/// Months after the run's records: only the lock can say it is still running.
const NOW: &str = "2026-09-01T00:00:00.000Z";

#[test]
fn a_locked_run_is_running_for_every_layer_until_it_ends() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("sessions");
    let mut s = RunScript::new(RUN, SESSION, "2026-04-02T07:00:00.000Z");
    let user = user_msg("Migrate the database — carefully.");
    let head = [
        s.header("anthropic", "claude-sonnet-4-5"),
        s.run_start("Migrate the database — carefully."),
        s.status("running"),
        s.request(4, "anthropic", "claude-sonnet-4-5", &msgs(&[&user])),
    ];
    let writer = RunWriter::create(
        &root,
        header_of(&head[0]),
        WriterOptions::with_durability(Durability::group_commit()),
    )
    .expect("create");
    for r in &head[1..] {
        writer.append(r).expect("append");
    }
    let path = writer.path().to_owned();
    let rel = format!("2026/04/02/{RUN}.jsonl");
    let written: Vec<u8> = head.iter().flat_map(line_of).collect();
    assert_eq!(fs::read(&path).expect("read"), written);
    assert!(is_locked(&path).expect("probe"));
    assert!(
        RunWriter::open_append(&path, WriterOptions::with_durability(Durability::Flush)).is_err(),
        "a second writer is refused while the first one is open"
    );

    let store = StateStore::open(&root).expect("store");
    store.index_runs().expect("index");
    let row = store.runs_for_session(SESSION).expect("rows").remove(0);
    assert_eq!(row.outcome, IndexedRunOutcome::Open);
    assert_eq!((row.record_count, row.invocation_count), (4, 1));
    drop(store);

    let runs = sessions(&root, NOW, &["runs", "--json"]);
    assert_eq!(runs.code, 0, "{}", runs.stderr);
    assert_eq!(
        runs.json_lines()[0]["outcome"],
        "running",
        "{}",
        runs.stdout
    );
    let running = sessions(&root, NOW, &["runs", "--json", "--outcome", "running"]);
    assert_eq!(running.json_lines().len(), 1);
    let crashed = sessions(&root, NOW, &["runs", "--json", "--outcome", "crashed"]);
    assert!(crashed.json_lines().is_empty(), "{}", crashed.stdout);
    // `stats` counts it under the same word as `runs`.
    let stats = sessions(&root, NOW, &["stats", "--json", "--by", "session"]);
    assert_eq!(stats.code, 0, "{}", stats.stderr);
    let lines = stats.json_lines();
    let want = serde_json::json!({"completed": 0, "error": 0, "cancelled": 0, "running": 1, "crashed": 0, "other": 0});
    assert_eq!(lines[0]["type"], "stats_group", "{}", stats.stdout);
    assert_eq!(lines[0]["key"], SESSION, "{}", stats.stdout);
    assert_eq!(lines[0]["outcomes"], want, "{}", stats.stdout);
    assert_eq!(lines[1]["command"], "stats", "{}", stats.stdout);
    assert_eq!(lines[1]["outcomes"], want, "{}", stats.stdout);

    let archive = sessions(&root, NOW, &["archive", "--older-than", "1d", "--json"]);
    assert_eq!(archive.code, 0, "{}", archive.stderr);
    let actions = archive.json_lines();
    assert_eq!(actions.len(), 1, "{}", archive.stdout);
    assert_eq!(actions[0]["status"], "skipped");
    assert_eq!(actions[0]["file"], rel);
    let gc = sessions(&root, NOW, &["gc", "--older-than", "1d", "--json"]);
    assert_eq!(gc.code, 0, "{}", gc.stderr);
    assert!(
        !gc.json_lines().iter().any(|a| a["file"] == rel.as_str()),
        "gc never moves a run being written: {}",
        gc.stdout
    );
    let repair = sessions(&root, NOW, &["repair", "--json"]);
    assert_eq!(repair.code, 0, "{}", repair.stderr);
    assert!(
        !repair
            .json_lines()
            .iter()
            .any(|a| a["action"] == "seal_torn_tail"),
        "{}",
        repair.stdout
    );
    let verify = sessions(&root, NOW, &["verify", "--json", RUN]);
    assert_eq!(
        verify.code, 0,
        "no run.end yet is a note: {}",
        verify.stdout
    );
    let tail = sessions(&root, NOW, &["tail", "-n", "+1", RUN, "--raw"]);
    assert_eq!(tail.code, 0, "{}", tail.stderr);
    assert_eq!(tail.stdout.as_bytes(), written);
    assert_eq!(
        fs::read(&path).expect("read"),
        written,
        "nothing touched the file"
    );

    // The run ends; the next look picks up the rest.
    let rest = vec![
        s.response(
            4,
            "claude-sonnet-4-5",
            &msgs(&[&assistant_msg("Done: 3 migrations applied.")]),
            Tok {
                input: 700,
                cached: 0,
                output: 12,
            },
            "end_turn",
        ),
        s.event(0, &ev_final("Done: 3 migrations applied.")),
        s.status("completed"),
        s.end("completed", Some("Done: 3 migrations applied.")),
    ];
    for r in &rest {
        writer.append(r).expect("append");
    }
    writer.close().expect("close");
    assert!(!is_locked(&path).expect("probe"));

    let runs = sessions(&root, NOW, &["runs", "--json"]);
    let line = &runs.json_lines()[0];
    assert_eq!(line["outcome"], "completed", "{line}");
    assert_eq!(line["records"], 8);
    assert_eq!(line["total_tokens"], 712);
    let archive = sessions(&root, NOW, &["archive", "--older-than", "1d", "--json"]);
    let actions = archive.json_lines();
    assert_eq!(actions.len(), 2, "{}", archive.stdout);
    assert_eq!(actions[0]["status"], "done", "{}", archive.stdout);
    assert_eq!(actions[1]["type"], "note", "{}", archive.stdout);
    assert!(root.join(format!("{rel}.zst")).exists());
}

#[test]
fn tail_follow_prints_every_record_as_it_lands_and_stops_at_run_end() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("sessions");
    let run_id = "1ead1ead-0000-4000-8000-000000000002";
    let mut s = RunScript::new(run_id, SESSION, "2026-04-03T07:00:00.000Z");
    let writer = RunWriter::create(
        &root,
        header_of(&s.header("openai", "gpt-5.6")),
        WriterOptions::with_durability(Durability::group_commit()),
    )
    .expect("create");
    let path = writer.path().to_owned();
    let follower = {
        let root = root.clone();
        let run_id = run_id.to_owned();
        std::thread::spawn(move || {
            sessions(
                &root,
                NOW,
                &[
                    "tail",
                    "-f",
                    "-n",
                    "+1",
                    "--raw",
                    "--timeout",
                    "30",
                    &run_id,
                ],
            )
        })
    };
    // Large lines (several read buffers' worth) land while the follower reads.
    let big = "出力 line with text\n".repeat(40_000);
    let mut records = vec![s.run_start("Build everything"), s.status("running")];
    for i in 0..6 {
        records.push(s.tool_output(
            "shell",
            &format!("call_{i}"),
            &big[..big.len() / (i + 1)],
            i == 3,
        ));
        records.push(s.event(i as i64, &ev_text(&format!("step {i} ✓"))));
    }
    records.push(s.status("completed"));
    records.push(s.end("completed", Some("built")));
    for r in &records {
        writer.append(r).expect("append");
        std::thread::sleep(std::time::Duration::from_millis(15));
    }
    writer.close().expect("close");
    let out = follower.join().expect("follower thread");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.is_empty(), "{}", out.stderr);
    let file = fs::read(&path).expect("read");
    assert_eq!(out.stdout.len(), file.len());
    assert!(
        out.stdout.as_bytes() == file,
        "tail -f printed the records exactly as stored"
    );
}
