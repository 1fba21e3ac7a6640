//! Archiving across layers: runs compressed to `.jsonl.zst` (by the library and by
//! `sessions archive`) read back the same in the reader, the run index, replay and every CLI
//! command, and a rebuilt index finds no difference.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use session_jsonl::{Durability, RunWriter, WriterOptions, compress_run, find_run, read_run};
use session_replay::HistoryOptions;
use session_schema::{Record, SessionState, Timestamp};
use session_state::{RunRow, StateStore};

use crate::support::*;

const SX: &str = "11111111-2222-4333-8444-555555555555";
const SY: &str = "66666666-7777-4888-8999-aaaaaaaaaaaa";
const R1: &str = "01010101-0000-4000-8000-000000000001";
const R2: &str = "02020202-0000-4000-8000-000000000002";
const R3: &str = "03030303-0000-4000-8000-000000000003";
const NOW: &str = "2026-06-01T00:00:00.000Z";
/// What a crash left of R2's next record.
const FRAG: &[u8] = br#"{"type":"llm.response","run_id":"02020202-0000-4000-8000-0000"#;

fn write(root: &Path, records: &[Record], torn: Option<&[u8]>) -> PathBuf {
    let w = RunWriter::create(
        root,
        header_of(&records[0]),
        WriterOptions::with_durability(Durability::Flush),
    )
    .expect("create");
    for r in &records[1..] {
        w.append(r).expect("append");
    }
    let path = w.path().to_owned();
    w.close().expect("close");
    if let Some(bytes) = torn {
        let mut all = fs::read(&path).expect("read");
        all.extend_from_slice(bytes);
        fs::write(&path, all).expect("tear");
    }
    path
}

fn build_store(root: &Path) -> [PathBuf; 3] {
    let ask1 = "Summarise CHANGELOG.md — in Deutsch, bitte.";
    let call = assistant_call("call_1", "read", r#"{"file_path":"CHANGELOG.md"}"#);
    let out = "## 0.3.1\n- Begrüßung verbessert 🎉\n";
    let mut a = RunScript::new(R1, SX, "2026-01-10T08:00:00.000Z");
    let r1 = vec![
        a.header("anthropic", "claude-sonnet-4-5"),
        a.run_start(ask1),
        a.status("running"),
        a.request(
            1,
            "anthropic",
            "claude-sonnet-4-5",
            &msgs(&[&user_msg(ask1)]),
        ),
        a.response(
            1,
            "claude-sonnet-4-5",
            &msgs(&[&call]),
            Tok {
                input: 900,
                cached: 0,
                output: 30,
            },
            "tool_use",
        ),
        a.event(
            0,
            &ev_tool_call("read", "call_1", r#"{"file_path":"CHANGELOG.md"}"#),
        ),
        a.tool_output("read", "call_1", out, false),
        a.event(1, &ev_tool_result("read", "call_1", out)),
        a.request(
            2,
            "anthropic",
            "claude-sonnet-4-5",
            &msgs(&[&user_msg(ask1), &call, &tool_msg("call_1", "read", out)]),
        ),
        a.response(
            2,
            "claude-sonnet-4-5",
            &msgs(&[&assistant_msg("Version 0.3.1 verbessert die Begrüßung.")]),
            Tok {
                input: 1000,
                cached: 900,
                output: 15,
            },
            "end_turn",
        ),
        a.event(2, &ev_final("Version 0.3.1 verbessert die Begrüßung.")),
        a.status("completed"),
        a.end("completed", Some("Version 0.3.1 verbessert die Begrüßung.")),
    ];
    let mut b = RunScript::new(R2, SX, "2026-01-11T09:30:00.000Z");
    let r2 = vec![
        b.header("anthropic", "claude-sonnet-4-5"),
        b.run_start("And the one before?"),
        b.status("running"),
        b.request(
            3,
            "anthropic",
            "claude-sonnet-4-5",
            &msgs(&[&user_msg("x")]),
        ),
    ];
    let mut c = RunScript::new(R3, SY, "2026-02-01T12:00:00.000Z");
    let r3 = vec![
        c.header("openai", "gpt-5.6"),
        c.run_start("Deploy to staging"),
        c.status("running"),
        c.request(
            1,
            "openai",
            "gpt-5.6",
            &msgs(&[&user_msg("Deploy to staging")]),
        ),
        c.status("error"),
        c.end("error", None),
    ];
    let p1 = write(root, &r1, None);
    let p2 = write(root, &r2, Some(FRAG));
    let p3 = write(root, &r3, None);

    let store = StateStore::open(root).expect("store");
    for (id, run, seq, texts) in [
        (
            SX,
            R2,
            3,
            vec![
                user_msg(ask1),
                assistant_msg("Version 0.3.1 verbessert die Begrüßung."),
                user_msg("And the one before?"),
            ],
        ),
        (SY, R3, 1, vec![user_msg("Deploy to staging")]),
    ] {
        let state = SessionState {
            session_id: id.into(),
            updated_at: Timestamp::from_raw("2026-02-01T12:00:05.000Z"),
            run_id: Some(run.into()),
            invoke_seq: Some(seq),
            messages: texts.iter().map(|m| msg(m)).collect(),
            ..Default::default()
        };
        store.save(&state).expect("save");
    }
    [p1, p2, p3]
}

/// Everything the layers above the files say about the store.
#[derive(Debug, PartialEq)]
struct Views {
    rows: Vec<RunRow>,
    runs_json: Vec<serde_json::Value>,
    show: Vec<String>,
    history: String,
    /// Exit code and output of each export (an export holding a torn line exits 4).
    export_jsonl: Vec<(i32, String)>,
    export_md: (i32, String),
    verify: Vec<serde_json::Value>,
    verify_code: i32,
    stats: String,
    history_lib: Vec<(String, i64, String)>,
}

fn views(root: &Path) -> Views {
    let store = StateStore::open(root).expect("store");
    store.index_runs().expect("index");
    let mut rows = store.runs_for_session(SX).expect("rows X");
    rows.extend(store.runs_for_session(SY).expect("rows Y"));
    let (hist, _) =
        session_replay::io::session_history(&store, SX, HistoryOptions::default()).expect("hist");
    let history_lib = hist
        .events
        .iter()
        .map(|e| (e.run_id.clone(), e.seq, e.event.tag().to_owned()))
        .collect();
    drop(store);
    let ok = |args: &[&str]| {
        let out = sessions(root, NOW, args);
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
        out
    };
    let verify = sessions(root, NOW, &["verify", "--json"]);
    Views {
        rows,
        runs_json: ok(&["runs", "--json"]).json_lines(),
        show: [R1, R2, R3, SX]
            .iter()
            .map(|id| ok(&["show", id, "--utc"]).stdout)
            .collect(),
        history: ok(&["history", SX, "--json"]).stdout,
        export_jsonl: [R1, R2, R3]
            .iter()
            .map(|id| {
                let out = sessions(root, NOW, &["export", id, "--format", "jsonl"]);
                (out.code, out.stdout)
            })
            .collect(),
        export_md: {
            let out = sessions(root, NOW, &["export", SX, "--format", "md"]);
            (out.code, out.stdout)
        },
        verify: verify.json_lines(),
        verify_code: verify.code,
        stats: ok(&["stats", "--by", "session", "--json"]).stdout,
        history_lib,
    }
}

/// `views` with the facts that archiving is meant to change (file name, size, flag) taken out.
fn without_file_facts(mut v: Views) -> Views {
    for r in &mut v.rows {
        r.path = PathBuf::from(r.path.to_string_lossy().trim_end_matches(".zst"));
        r.file_size = 0;
        r.modified_unix_ns = 0;
        r.compressed = false;
    }
    for j in v.runs_json.iter_mut().chain(v.verify.iter_mut()) {
        if let Some(o) = j.as_object_mut() {
            if let Some(f) = o.get("file").and_then(|f| f.as_str()) {
                let f = f.trim_end_matches(".zst").to_owned();
                o.insert("file".into(), f.into());
            }
            for k in ["file_size", "compressed", "bytes"] {
                o.remove(k);
            }
        }
    }
    v
}

#[test]
fn archived_runs_read_the_same_in_every_layer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("sessions");
    let [p1, p2, p3] = build_store(&root);
    let originals: Vec<Vec<u8>> = [&p1, &p2, &p3]
        .iter()
        .map(|p| fs::read(p).expect("read"))
        .collect();
    let before = views(&root);
    assert_eq!(before.rows.len(), 3);
    assert!(before.rows.iter().all(|r| !r.compressed));
    assert_eq!(before.verify_code, 1, "the torn tail of R2 is a problem");
    assert!(
        before.show[0].contains("Begrüßung verbessert 🎉"),
        "{}",
        before.show[0]
    );
    assert!(
        before.show[2].contains("Deploy to staging"),
        "{}",
        before.show[2]
    );
    assert!(
        before.export_md.1.contains("And the one before?"),
        "{}",
        before.export_md.1
    );
    // Exports that contain R2's torn line say they are incomplete (exit 4); the others are 0.
    let codes: Vec<i32> = before.export_jsonl.iter().map(|(code, _)| *code).collect();
    assert_eq!(codes, [0, 4, 0]);
    assert_eq!(before.export_md.0, 4);
    assert_eq!(before.export_jsonl[0].1.as_bytes(), originals[0]);
    assert_eq!(before.history_lib.len(), 5, "{:?}", before.history_lib);
    assert_eq!(before.runs_json.len(), 3);

    // The library archives R1: verified, original removed, bytes intact.
    let z1 = compress_run(&p1).expect("compress R1");
    assert_eq!(z1, p1.with_extension("jsonl.zst"));
    assert!(!p1.exists() && z1.exists());
    let mut unpacked = Vec::new();
    session_jsonl::open_run_file(&z1)
        .expect("open archive")
        .read_to_end(&mut unpacked)
        .expect("decompress");
    assert_eq!(unpacked, originals[0]);
    assert!(
        compress_run(&z1).is_err(),
        "an archive is not archived again"
    );
    let found = find_run(
        &root,
        R1,
        Some(&Timestamp::from_raw("2026-01-10T08:00:00.000Z")),
    )
    .expect("find archived run");
    assert_eq!(found.path, z1);
    let plain = read_run(&z1).expect("read archive");
    assert_eq!(plain.records.len(), 13);
    assert!(plain.damage.is_empty());

    let store = StateStore::open(&root).expect("store");
    let report = store.index_runs().expect("index after archive");
    assert_eq!(report.failed, vec![]);
    let row = store
        .runs_for_session(SX)
        .expect("rows")
        .into_iter()
        .find(|r| r.run_id == R1)
        .expect("R1 indexed");
    assert!(row.compressed);
    assert_eq!(row.path, z1);
    assert_eq!(row.file_size, fs::metadata(&z1).expect("stat").len());
    let re = store.reindex().expect("reindex");
    assert_eq!((re.total, re.unchanged), (3, 3));
    assert!(re.changes.is_empty(), "{:?}", re.changes);
    drop(store);

    // The CLI archives the rest (R2 with its torn tail, R3); R1 is already archived.
    let archived = sessions(&root, NOW, &["archive", "--older-than", "30d", "--json"]);
    assert_eq!(archived.code, 0, "{}", archived.stderr);
    let mut done: Vec<String> = archived
        .json_lines()
        .iter()
        .filter(|a| a["status"] == "done")
        .map(|a| a["file"].as_str().unwrap_or("").to_owned())
        .collect();
    done.sort();
    assert_eq!(
        done,
        [
            format!("2026/01/11/{R2}.jsonl"),
            format!("2026/02/01/{R3}.jsonl")
        ]
    );
    for (p, bytes) in [&p2, &p3].iter().zip(&originals[1..]) {
        let z = p.with_extension("jsonl.zst");
        assert!(!p.exists() && z.exists(), "{}", z.display());
        let mut unpacked = Vec::new();
        session_jsonl::open_run_file(&z)
            .expect("open")
            .read_to_end(&mut unpacked)
            .expect("decompress");
        assert_eq!(&unpacked, bytes);
    }
    let reindex = sessions(&root, NOW, &["reindex", "--json"]);
    assert_eq!(reindex.code, 0, "{}", reindex.stderr);
    let summary = reindex.json_lines().pop().expect("summary");
    assert_eq!(summary["command"], "reindex", "{summary}");
    assert_eq!(summary["total"], 3, "{summary}");
    assert_eq!(summary["unchanged"], 3, "{}", reindex.stdout);
    assert_eq!(
        (&summary["added"], &summary["removed"], &summary["changed"]),
        (&0.into(), &0.into(), &0.into()),
        "{}",
        reindex.stdout
    );

    // Every view is the same, except the file names, sizes and the archived flag.
    let after = views(&root);
    assert!(after.rows.iter().all(|r| r.compressed));
    assert!(after.runs_json.iter().all(|r| {
        r["compressed"] == true
            && r["file"]
                .as_str()
                .is_some_and(|f| f.ends_with(".jsonl.zst"))
    }));
    let torn: Vec<&serde_json::Value> = after
        .verify
        .iter()
        .filter(|f| f["kind"] == "torn_tail")
        .collect();
    assert_eq!(torn.len(), 1, "{:?}", after.verify);
    assert_eq!(torn[0]["file"], format!("2026/01/11/{R2}.jsonl.zst"));
    assert_eq!(torn[0]["offset"], originals[1].len() - FRAG.len());
    let (log, _) = session_replay::io::find_and_read_run(&root, R2, None).expect("find R2");
    assert!(log.has_torn_tail() && !log.has_run_end());
    assert_eq!(without_file_facts(after), without_file_facts(before));
}
