//! A session of three runs written like the runtime does, with a crash in the middle of a
//! record: the writer seals the torn fragment on reopen, and every layer above (reader, state
//! store, run index, replay, CLI) sees the complete records, one damage report at the right
//! place, and the same facts.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use session_jsonl::{DamageKind, Durability, RunWriter, WriterOptions, needs_seal, read_run};
use session_replay::{EntryKind, HistoryOptions, RunRead, skipped_lines};
use session_schema::{AgentEvent, Record, SessionState, Timestamp};
use session_state::{IndexedRunOutcome, ListQuery, RunQuery, SaveMode, StateStore};

use crate::support::*;

const SESSION: &str = "5e551011-7a2b-4c3d-8e9f-00000000c0de";
const RUN_A: &str = "a1111111-0000-4000-8000-00000000000a";
const RUN_B: &str = "b2222222-0000-4000-8000-00000000000b";
const RUN_C: &str = "c3333333-0000-4000-8000-00000000000c";
const PROVIDER: &str = "anthropic";
const MODEL: &str = "claude-sonnet-4-5";
const NOW: &str = "2026-03-06T12:00:00.000Z";

const ASK_A: &str = "Fix the failing test in parser.rs — ünïcode 日本語 🦀";
const ASK_B: &str = "Now add a regression test for it.";
const ASK_C: &str = "Run the whole suite\nand report failures.";
const FILE_TEXT: &str = "fn parse(s: &str) -> Ast {\n    todo!(\"ü\")\n}\n// 日本語のコメント\n";
const FINAL_A: &str = "Fixed: the parser now accepts ü and 日本語.";
const FINAL_B: &str = "Added tests/parser_unicode.rs.";

/// What the test wrote, for the checks.
struct Written {
    root: PathBuf,
    path_a: PathBuf,
    path_b: PathBuf,
    path_c: PathBuf,
    /// Records of run A in order (the torn fragment is not one of them).
    records_a: Vec<Record>,
    records_b: Vec<Record>,
    records_c: Vec<Record>,
    /// Byte offset and length of the torn fragment in run A, and its 1-based line.
    frag_a: (u64, u64, u64),
    /// Same for the torn tail of run C.
    frag_c: (u64, u64, u64),
    /// The exact bytes run A must hold.
    bytes_a: Vec<u8>,
}

fn append_all(w: &RunWriter, records: &[Record]) {
    for r in records {
        w.append(r).expect("append");
    }
}

/// Appends `bytes` to `path` by hand, as a process killed in the middle of a `write` leaves it.
fn tear(path: &Path, bytes: &[u8]) -> (u64, u64) {
    let offset = fs::metadata(path).expect("stat").len();
    let mut f = OpenOptions::new()
        .append(true)
        .open(path)
        .expect("open to tear");
    f.write_all(bytes).expect("write fragment");
    (offset, bytes.len() as u64)
}

fn lines_of(records: &[Record]) -> Vec<u8> {
    records.iter().flat_map(line_of).collect()
}

fn write_session(root: &Path) -> Written {
    let opts = |d| WriterOptions::with_durability(d);
    let sys = system_msg("You are a coding agent.");
    let u1 = user_msg(ASK_A);
    let call = assistant_call("toolu_01", "read", r#"{"file_path":"src/parser.rs"}"#);
    let tool = tool_msg("toolu_01", "read", FILE_TEXT);
    let a1 = assistant_msg(FINAL_A);

    // Run A: durable writer; the process dies while writing the second response.
    let mut a = RunScript::new(RUN_A, SESSION, "2026-03-04T10:00:00.000Z");
    let before_crash = vec![
        a.header(PROVIDER, MODEL),
        a.run_start(ASK_A),
        a.status("running"),
        a.request(5, PROVIDER, MODEL, &msgs(&[&sys, &u1])),
        a.response(
            5,
            MODEL,
            &msgs(&[&call]),
            Tok {
                input: 1200,
                cached: 1000,
                output: 40,
            },
            "tool_use",
        ),
        a.event(
            0,
            &ev_tool_call("read", "toolu_01", r#"{"file_path":"src/parser.rs"}"#),
        ),
        a.context(93),
        a.tool_output("read", "toolu_01", FILE_TEXT, false),
        a.event(1, &ev_tool_result("read", "toolu_01", FILE_TEXT)),
        a.request(6, PROVIDER, MODEL, &msgs(&[&sys, &u1, &call, &tool])),
    ];
    let response_6 = a.response(
        6,
        MODEL,
        &msgs(&[&a1]),
        Tok {
            input: 1300,
            cached: 1200,
            output: 25,
        },
        "end_turn",
    );
    let w = RunWriter::create(
        root,
        header_of(&before_crash[0]),
        opts(Durability::SyncData),
    )
    .expect("create A");
    append_all(&w, &before_crash[1..]);
    let path_a = w.path().to_owned();
    drop(w);
    // Cut inside the first multi-byte character of the response (after its lead byte): the
    // fragment ends in an incomplete UTF-8 sequence, as a crash mid-write leaves it.
    let full = line_of(&response_6);
    let lead = full
        .iter()
        .position(|&b| b >= 0xC0)
        .expect("non-ASCII text");
    let cut = lead + 1;
    assert!(std::str::from_utf8(&full[..cut]).is_err_and(|e| e.error_len().is_none()));
    let (off, len) = tear(&path_a, &full[..cut]);

    // Before the restart the reader sees a torn tail at exactly that place.
    let torn = read_run(&path_a).expect("read torn A");
    assert_eq!(torn.records.len(), before_crash.len());
    assert_eq!(torn.damage.len(), 1, "{:?}", torn.damage);
    assert_eq!(torn.damage[0].kind, DamageKind::TornTail);
    assert_eq!(torn.damage[0].offset, off);
    assert_eq!(torn.damage[0].line, before_crash.len() as u64 + 1);
    assert!(needs_seal(&path_a).expect("needs_seal"));

    // The restarted process resumes the file: sealed with one `\n`, nothing glued on.
    let w = RunWriter::open_append(
        &path_a,
        opts(Durability::GroupCommit {
            max_delay: std::time::Duration::from_millis(2),
            max_batch: 8,
        }),
    )
    .expect("reopen A");
    assert!(!needs_seal(&path_a).expect("needs_seal after reopen"));
    assert!(
        w.append(&a.header(PROVIDER, MODEL)).is_err(),
        "a second header is refused on a resumed file"
    );
    let after_crash = vec![
        response_6,
        a.event(2, &ev_final(FINAL_A)),
        a.status("completed"),
        a.end("completed", Some(FINAL_A)),
    ];
    append_all(&w, &after_crash);
    w.close().expect("close A");
    let mut bytes_a = lines_of(&before_crash);
    bytes_a.extend_from_slice(&full[..cut]);
    bytes_a.push(b'\n');
    bytes_a.extend(lines_of(&after_crash));
    let records_a: Vec<Record> = before_crash.into_iter().chain(after_crash).collect();

    // Run B: a clean follow-up the next day, group commit.
    let u2 = user_msg(ASK_B);
    let a2 = assistant_msg(FINAL_B);
    let mut b = RunScript::new(RUN_B, SESSION, "2026-03-05T08:00:00.000Z");
    let records_b = vec![
        b.header(PROVIDER, MODEL),
        b.run_start(ASK_B),
        b.status("running"),
        b.request(
            7,
            PROVIDER,
            MODEL,
            &msgs(&[&sys, &u1, &call, &tool, &a1, &u2]),
        ),
        b.response(
            7,
            MODEL,
            &msgs(&[&a2]),
            Tok {
                input: 1500,
                cached: 1300,
                output: 30,
            },
            "end_turn",
        ),
        b.event(0, &ev_final(FINAL_B)),
        b.status("completed"),
        b.end("completed", Some(FINAL_B)),
    ];
    let w = RunWriter::create(
        root,
        header_of(&records_b[0]),
        opts(Durability::group_commit()),
    )
    .expect("B");
    append_all(&w, &records_b[1..]);
    let path_b = w.path().to_owned();
    w.close().expect("close B");

    // Run C: killed while the response was being written, never resumed.
    let u3 = user_msg(ASK_C);
    let mut c = RunScript::new(RUN_C, SESSION, "2026-03-05T09:00:00.000Z");
    let records_c = vec![
        c.header(PROVIDER, MODEL),
        c.run_start(ASK_C),
        c.status("running"),
        c.request(
            8,
            PROVIDER,
            MODEL,
            &msgs(&[&sys, &u1, &call, &tool, &a1, &u2, &a2, &u3]),
        ),
        c.event(0, &ev_text("Running the suite…")),
    ];
    let w = RunWriter::create(root, header_of(&records_c[0]), opts(Durability::Flush)).expect("C");
    append_all(&w, &records_c[1..]);
    let path_c = w.path().to_owned();
    drop(w);
    let lost = c.response(
        8,
        MODEL,
        &msgs(&[&assistant_msg("All green.")]),
        Tok::default(),
        "end_turn",
    );
    let lost = line_of(&lost);
    let (off_c, len_c) = tear(&path_c, &lost[..lost.len() - 9]);

    Written {
        root: root.to_owned(),
        path_a,
        path_b,
        path_c,
        frag_a: (off, len, records_a.len() as u64 - 3),
        frag_c: (off_c, len_c, records_c.len() as u64 + 1),
        records_a,
        records_b,
        records_c,
        bytes_a,
    }
}

fn message_lists() -> [Vec<String>; 3] {
    let u1 = user_msg(ASK_A);
    let call = assistant_call("toolu_01", "read", r#"{"file_path":"src/parser.rs"}"#);
    let tool = tool_msg("toolu_01", "read", FILE_TEXT);
    let a1 = assistant_msg(FINAL_A);
    let after_a = vec![u1, call, tool, a1];
    let mut after_b = after_a.clone();
    after_b.extend([user_msg(ASK_B), assistant_msg(FINAL_B)]);
    let mut after_c = after_b.clone();
    after_c.push(user_msg(ASK_C));
    [after_a, after_b, after_c]
}

fn state(messages: &[String], run_id: &str, invoke_seq: i64, updated_at: &str) -> SessionState {
    SessionState {
        schema_version: Some(1u64.into()),
        session_id: SESSION.into(),
        updated_at: Timestamp::from_raw(updated_at),
        run_id: Some(run_id.into()),
        invoke_seq: Some(invoke_seq),
        messages: messages.iter().map(|m| msg(m)).collect(),
        meta: Some(
            session_schema::RawJson::from_json(
                r#"{"codelia_workspace_root":"/home/dev/acme-app"}"#,
            )
            .expect("meta JSON"),
        ),
        ..Default::default()
    }
}

fn assert_records(path: &Path, expected: &[Record]) -> session_jsonl::RunRead {
    let read = read_run(path).expect("read run");
    let got: Vec<Vec<u8>> = read
        .records
        .iter()
        .map(|r| r.parsed.to_json().expect("to_json"))
        .collect();
    let want: Vec<Vec<u8>> = expected
        .iter()
        .map(|r| {
            let mut l = line_of(r);
            l.pop();
            l
        })
        .collect();
    assert_eq!(got.len(), want.len(), "record count of {}", path.display());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(
            String::from_utf8_lossy(g),
            String::from_utf8_lossy(w),
            "record {i} of {}",
            path.display()
        );
    }
    read
}

#[test]
fn a_torn_write_is_sealed_on_resume_and_every_layer_agrees() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("sessions");
    let w = write_session(&root);

    // Layout: the UTC date of started_at names the directory.
    assert_eq!(w.path_a, root.join(format!("2026/03/04/{RUN_A}.jsonl")));
    assert_eq!(w.path_b, root.join(format!("2026/03/05/{RUN_B}.jsonl")));
    assert_eq!(w.path_c, root.join(format!("2026/03/05/{RUN_C}.jsonl")));

    // --- session-jsonl: the file holds exactly what was written, the fragment on its own line.
    assert_eq!(fs::read(&w.path_a).expect("read A"), w.bytes_a);
    let read_a = assert_records(&w.path_a, &w.records_a);
    assert_eq!(read_a.damage.len(), 1, "{:?}", read_a.damage);
    let d = &read_a.damage[0];
    assert_eq!(
        d.kind,
        DamageKind::SealedFragment,
        "a fragment sealed by the reopening writer"
    );
    assert_eq!((d.offset, d.len, d.line), w.frag_a);
    // The record after the fragment starts right after the sealing newline.
    let resumed = &read_a.records[w.frag_a.2 as usize - 1];
    assert_eq!(resumed.offset, w.frag_a.0 + w.frag_a.1 + 1);
    assert_eq!(resumed.line, w.frag_a.2 + 1);
    let read_b = assert_records(&w.path_b, &w.records_b);
    assert!(read_b.damage.is_empty(), "{:?}", read_b.damage);
    let read_c = assert_records(&w.path_c, &w.records_c);
    assert_eq!(read_c.damage.len(), 1, "{:?}", read_c.damage);
    assert_eq!(read_c.damage[0].kind, DamageKind::TornTail);
    assert_eq!(
        (
            read_c.damage[0].offset,
            read_c.damage[0].len,
            read_c.damage[0].line
        ),
        w.frag_c
    );

    // --- session-state: three saves of the growing conversation, appended each time.
    let store = StateStore::open(&root).expect("open store");
    let [after_a, after_b, after_c] = message_lists();
    let s1 = store
        .save(&state(&after_a, RUN_A, 6, "2026-03-04T10:00:01.000Z"))
        .expect("save after A");
    let s2 = store
        .save_expecting(
            &state(&after_b, RUN_B, 7, "2026-03-05T08:00:01.000Z"),
            Some(s1.generation),
        )
        .expect("save after B");
    assert_eq!(s2.mode, SaveMode::Appended { messages: 2 });
    let last = state(&after_c, RUN_C, 8, "2026-03-05T09:00:00.100Z");
    let s3 = store
        .save_expecting(&last, Some(s2.generation))
        .expect("save after C started");
    assert_eq!(s3.mode, SaveMode::Appended { messages: 1 });
    // A save that did not see the last one is refused, not merged.
    assert!(
        store
            .save_expecting(
                &state(&after_b, RUN_B, 7, "2026-03-05T08:00:02.000Z"),
                Some(s2.generation)
            )
            .is_err(),
        "a stale compare-and-swap save must be refused"
    );
    let loaded = store.load(SESSION).expect("load").expect("session exists");
    assert_eq!(loaded.state.messages, last.messages);
    assert_eq!(loaded.state.invoke_seq, Some(8));
    assert_eq!(loaded.state.run_id.as_deref(), Some(RUN_C));
    assert!(loaded.damage.is_empty());
    let mut want_file = Vec::new();
    for m in &after_c {
        want_file.extend_from_slice(m.as_bytes());
        want_file.push(b'\n');
    }
    assert_eq!(
        fs::read(store.messages_path(SESSION).expect("path")).expect("messages file"),
        want_file,
        "messages/<id>.jsonl is one compact message per line"
    );
    let page = store.list(&ListQuery::all()).expect("list");
    assert_eq!(page.entries.len(), 1);
    let summary = &page.entries[0].summary;
    assert_eq!(summary.message_count, Some(7));
    assert_eq!(summary.last_user_message.as_deref(), Some(ASK_C));
    assert_eq!(
        summary.workspace_root.as_deref(),
        Some("/home/dev/acme-app")
    );

    // --- run index.
    let report = store.index_runs().expect("index");
    assert_eq!((report.added, report.updated, report.removed), (3, 0, 0));
    let mut damaged: Vec<_> = report.damaged.clone();
    damaged.sort();
    assert_eq!(damaged, vec![(w.path_a.clone(), 1), (w.path_c.clone(), 1)]);
    let rows = store.runs_for_session(SESSION).expect("runs_for_session");
    let ids: Vec<&str> = rows.iter().map(|r| r.run_id.as_str()).collect();
    assert_eq!(ids, [RUN_A, RUN_B, RUN_C], "oldest started_at first");
    let a = &rows[0];
    assert_eq!(a.outcome, IndexedRunOutcome::Completed);
    assert_eq!(a.last_status.as_deref(), Some("completed"));
    assert_eq!(a.record_count, w.records_a.len() as u64);
    assert_eq!(a.invocation_count, 2);
    assert_eq!(
        (
            a.input_tokens,
            a.cached_input_tokens,
            a.output_tokens,
            a.total_tokens
        ),
        (2500, 2200, 65, 2565)
    );
    assert_eq!(a.damage_count, 1);
    assert_eq!(a.model_provider.as_deref(), Some(PROVIDER));
    assert_eq!(a.model_name.as_deref(), Some(MODEL));
    assert_eq!(a.first_input.as_deref(), Some(ASK_A));
    assert_eq!(a.started_at.as_deref(), Some("2026-03-04T10:00:00.000Z"));
    assert_eq!(a.path, w.path_a);
    assert_eq!(a.file_size, w.bytes_a.len() as u64);
    assert!(!a.compressed);
    let b = &rows[1];
    assert_eq!(
        (b.outcome.clone(), b.damage_count, b.total_tokens),
        (IndexedRunOutcome::Completed, 0, 1530)
    );
    let c = &rows[2];
    assert_eq!(
        c.outcome,
        IndexedRunOutcome::Open,
        "no run.end: still running or crashed"
    );
    assert_eq!(c.last_status.as_deref(), Some("running"));
    assert_eq!(
        (
            c.record_count,
            c.invocation_count,
            c.total_tokens,
            c.damage_count
        ),
        (w.records_c.len() as u64, 1, 0, 1)
    );
    assert_eq!(
        c.first_input.as_deref(),
        Some("Run the whole suite"),
        "first line of the input only"
    );
    let open = store
        .list_runs(&RunQuery {
            outcome: Some(IndexedRunOutcome::Open),
            ..Default::default()
        })
        .expect("list open runs");
    assert_eq!(open.runs.len(), 1);
    assert_eq!(open.runs[0].run_id, RUN_C);
    // Unchanged files are not re-read.
    let again = store.index_runs().expect("index again");
    assert_eq!((again.added, again.updated, again.unchanged), (0, 0, 3));

    // --- session-replay.
    let (log_a, diags_a) = session_replay::io::read_run(&w.path_a).expect("replay read A");
    let (log_b, _) = session_replay::io::read_run(&w.path_b).expect("replay read B");
    let (log_c, diags_c) = session_replay::io::read_run(&w.path_c).expect("replay read C");
    assert_eq!(log_a.records.len(), w.records_a.len());
    assert!(log_a.has_run_end() && !log_a.has_torn_tail());
    let skipped_a = skipped_lines(&log_a);
    assert_eq!(skipped_a.len(), 1);
    assert_eq!(
        (skipped_a[0].line, skipped_a[0].byte_offset),
        (w.frag_a.2, w.frag_a.0)
    );
    assert!(
        diags_a
            .iter()
            .any(|d| d.message.contains(&format!("byte offset {}", w.frag_a.0))),
        "{diags_a:?}"
    );
    assert!(log_c.has_torn_tail() && !log_c.has_run_end());
    assert!(
        diags_c
            .iter()
            .any(|d| d.kind == session_replay::DiagnosticKind::NoRunEnd),
        "{diags_c:?}"
    );
    let logs: Vec<RunRead> = vec![log_a.clone(), log_b.clone(), log_c.clone()];
    let (invs, _) = session_replay::session_invocations(&logs);
    let seqs: Vec<(i64, bool)> = invs.iter().map(|i| (i.seq, i.missing_response())).collect();
    assert_eq!(seqs, [(5, false), (6, false), (7, false), (8, true)]);
    assert_eq!(invs[1].run_id(), RUN_A);
    assert_eq!(invs[1].usage().map(|u| u.total_tokens), Some(1325));
    // The prompt of invocation 6 is exactly the four messages that were sent.
    let (prompt, _) = session_replay::prompt_at(&log_a.records, Some(6));
    let prompt = prompt.expect("prompt 6");
    let [after_a, ..] = message_lists();
    let mut sent: Vec<_> = vec![msg(&system_msg("You are a coding agent."))];
    sent.extend(after_a[..3].iter().map(|m| msg(m)));
    assert_eq!(prompt.messages, sent);

    let t = session_replay::transcript_with(&log_a.records, &skipped_a);
    let kinds: Vec<&EntryKind> = t.entries.iter().map(|e| &e.kind).collect();
    assert!(matches!(kinds[0], EntryKind::UserInput { text, images: 0 } if text == ASK_A));
    assert!(kinds.iter().any(|k| matches!(k,
        EntryKind::ToolCall { call_id, tool, .. } if call_id == "toolu_01" && tool == "read")));
    assert!(kinds.iter().any(|k| matches!(k,
        EntryKind::ToolResult { output, is_error: false, .. } if output == FILE_TEXT)));
    assert!(kinds.iter().any(|k| matches!(k,
        EntryKind::Skipped { line, kind: session_replay::SkipKind::Corrupt } if *line == w.frag_a.2)));
    assert!(
        kinds
            .iter()
            .any(|k| matches!(k, EntryKind::Final { text } if text == FINAL_A))
    );
    assert!(matches!(kinds.last(), Some(EntryKind::Outcome { outcome }) if outcome == "completed"));
    assert!(
        !kinds
            .iter()
            .any(|k| matches!(k, EntryKind::Incomplete { .. }))
    );
    let tc = session_replay::transcript_with(&log_c.records, &skipped_lines(&log_c));
    assert!(
        matches!(
            tc.entries.last().map(|e| &e.kind),
            Some(EntryKind::Incomplete { .. })
        ),
        "a crashed run's transcript ends incomplete: {:?}",
        tc.entries.last()
    );
    let md = session_replay::render_markdown(&t);
    assert!(md.contains(ASK_A) && md.contains(FINAL_A), "{md}");

    let (history, _) =
        session_replay::io::session_history(&store, SESSION, HistoryOptions::default())
            .expect("history");
    assert_eq!((history.runs, history.truncated), (3, false));
    let got: Vec<(String, i64, String)> = history
        .events
        .iter()
        .map(|e| {
            let text = match &e.event {
                AgentEvent::HiddenUserMessage(c) => c.content.clone().unwrap_or_default(),
                other => other.tag().to_owned(),
            };
            (e.run_id.clone(), e.seq, text)
        })
        .collect();
    let want: Vec<(String, i64, String)> = [
        (RUN_A, -1, ASK_A),
        (RUN_A, 0, "tool_call"),
        (RUN_A, 1, "tool_result"),
        (RUN_A, 2, "final"),
        (RUN_B, -1, ASK_B),
        (RUN_B, 0, "final"),
        (RUN_C, -1, ASK_C),
        (RUN_C, 0, "text"),
    ]
    .into_iter()
    .map(|(r, s, t)| (r.to_owned(), s, t.to_owned()))
    .collect();
    assert_eq!(got, want);
    assert_eq!(history.events_sent, want.len());
    let (short, _) = session_replay::io::session_history(
        &store,
        SESSION,
        HistoryOptions {
            max_runs: 2,
            max_events: 3,
        },
    )
    .expect("short history");
    assert_eq!(
        (short.runs, short.truncated, short.events_sent),
        (2, true, 3)
    );
    assert_eq!(short.events[0].run_id, RUN_B);
    drop(store);

    // --- the CLI, in-process, agrees with the libraries.
    let out = sessions(&w.root, NOW, &["runs", "--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines = out.json_lines();
    let ids: Vec<&str> = lines
        .iter()
        .map(|l| l["run_id"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(ids, [RUN_C, RUN_B, RUN_A], "newest first");
    assert_eq!(
        lines[0]["outcome"], "crashed",
        "unlocked, last record a day old"
    );
    assert_eq!(lines[1]["outcome"], "completed");
    let la = &lines[2];
    assert_eq!(la["session_id"], SESSION);
    assert_eq!(la["outcome"], "completed");
    assert_eq!(la["invocations"], 2);
    assert_eq!(la["total_tokens"], 2565);
    assert_eq!(la["cached_input_tokens"], 2200);
    assert_eq!(la["records"], w.records_a.len());
    assert_eq!(la["damage_count"], 1);
    assert_eq!(la["model"], MODEL);
    assert_eq!(la["file"], format!("2026/03/04/{RUN_A}.jsonl"));
    let crashed = sessions(&w.root, NOW, &["runs", "--json", "--outcome", "crashed"]);
    assert_eq!(crashed.json_lines().len(), 1);
    let page = sessions(&w.root, NOW, &["runs", "--json", "--limit", "2"]);
    let page_lines = page.json_lines();
    assert_eq!(page_lines.len(), 3, "two runs and a cursor");
    assert_eq!(page_lines[2]["type"], "cursor");
    let cursor = page_lines[2]["next_cursor"]
        .as_str()
        .expect("cursor")
        .to_owned();
    let rest = sessions(
        &w.root,
        NOW,
        &["runs", "--json", "--limit", "2", "--cursor", &cursor],
    );
    assert_eq!(rest.json_lines().len(), 1);
    assert_eq!(rest.json_lines()[0]["run_id"], RUN_A);

    let show = sessions(&w.root, NOW, &["show", RUN_A, "--utc"]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    for needle in [ASK_A, FINAL_A, "日本語のコメント", "toolu_01"] {
        assert!(
            show.stdout.contains(needle),
            "show lacks {needle:?}:\n{}",
            show.stdout
        );
    }
    let show_c = sessions(&w.root, NOW, &["show", RUN_C]);
    assert_eq!(show_c.code, 0, "{}", show_c.stderr);
    assert!(
        show_c.stdout.to_lowercase().contains("incomplete"),
        "{}",
        show_c.stdout
    );

    let verify = sessions(&w.root, NOW, &["verify", "--json"]);
    assert_eq!(
        verify.code, 1,
        "the torn tail is a problem: {}",
        verify.stdout
    );
    let findings = verify.json_lines();
    let summary = findings.last().expect("summary line");
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["command"], "verify");
    assert_eq!(summary["run_files"], 3);
    assert_eq!(summary["sessions"], 1);
    let mut damage: Vec<(String, String, u64, u64)> = findings
        .iter()
        .filter(|f| {
            ["corrupt_line", "torn_tail", "sealed_fragment"]
                .contains(&f["kind"].as_str().unwrap_or(""))
        })
        .map(|f| {
            (
                f["file"].as_str().unwrap_or("").to_owned(),
                format!(
                    "{} {}",
                    f["severity"].as_str().unwrap_or(""),
                    f["kind"].as_str().unwrap_or("")
                ),
                f["line"].as_u64().unwrap_or(0),
                f["offset"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    damage.sort();
    assert_eq!(
        damage,
        [
            (
                format!("2026/03/04/{RUN_A}.jsonl"),
                "note sealed_fragment".to_owned(),
                w.frag_a.2,
                w.frag_a.0
            ),
            (
                format!("2026/03/05/{RUN_C}.jsonl"),
                "problem torn_tail".to_owned(),
                w.frag_c.2,
                w.frag_c.0
            ),
        ]
    );
    assert!(
        !findings
            .iter()
            .any(|f| f["file"] == format!("2026/03/05/{RUN_B}.jsonl")),
        "the clean run has no finding: {}",
        verify.stdout
    );
    let verify_b = sessions(&w.root, NOW, &["verify", "--json", RUN_B]);
    assert_eq!(verify_b.code, 0, "{}", verify_b.stdout);

    let replay = sessions(&w.root, NOW, &["replay", RUN_C]);
    assert_eq!(replay.code, 0, "{}", replay.stderr);
    let prompt: serde_json::Value = serde_json::from_str(&replay.stdout).expect("replay JSON");
    assert_eq!(prompt["seq"], 8, "{prompt}");
    assert_eq!(
        prompt["messages"].as_array().map(Vec::len),
        Some(8),
        "{prompt}"
    );

    let hist = sessions(&w.root, NOW, &["history", SESSION, "--json"]);
    assert_eq!(hist.code, 0, "{}", hist.stderr);
    let hl = hist.json_lines();
    let last = hl.last().expect("summary");
    assert_eq!(last["runs"], 3, "{last}");
    assert_eq!(last["events_sent"], want.len(), "{last}");

    let listed = sessions(&w.root, NOW, &["sessions", "--all", "--json"]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let sl = listed.json_lines();
    assert_eq!(sl.len(), 1);
    assert_eq!(sl[0]["message_count"], 7);
    assert_eq!(sl[0]["last_user_message"], ASK_C);
}
