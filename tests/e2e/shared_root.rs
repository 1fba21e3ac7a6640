//! Both implementations on one store: a copy of the reference runtime's recorded sessions is
//! opened by our state store, one of its sessions is continued with our run writer and saved
//! by our store, and everything the reference reads is checked to be intact and in its format.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use rusqlite::types::Value as Sql;
use session_jsonl::{Durability, RunWriter, WriterOptions, read_run};
use session_replay::HistoryOptions;
use session_schema::{AgentEvent, Record, Timestamp, parse_message, to_line};
use session_state::{IndexedRunOutcome, ListQuery, StateStore};

use crate::support::*;

/// S2 of the recording: three runs, tools, an image part, `invoke_seq` 10.
const S2: &str = "8e66b6d7-b2ff-4b09-8d01-a588020959d5";
const S2_LAST_RUN: &str = "812276ce-7f41-4280-92eb-e61a9c795043";
const NEW_RUN: &str = "f00dfeed-1234-4abc-9def-0123456789ab";
const STARTED: &str = "2026-12-01T09:15:00.000Z";
const SAVED: &str = "2026-12-01T09:15:04.250Z";
const ASK: &str = "Bump the patch version — und prüfe die Tests 🧪";
const ANSWER: &str = "Bumped to 0.3.2; all tests pass.";

/// One row of `session_state` as the reference reads it: (column, storage class, value text).
type Row = Vec<(String, String, String)>;

fn sql_text(v: &Sql) -> (String, String) {
    match v {
        Sql::Null => ("null".into(), String::new()),
        Sql::Integer(i) => ("integer".into(), i.to_string()),
        Sql::Real(f) => ("real".into(), f.to_string()),
        Sql::Text(t) => ("text".into(), t.clone()),
        Sql::Blob(b) => ("blob".into(), format!("{b:?}")),
    }
}

/// `session_state` rows through a plain SQLite connection, as the reference opens the file.
fn reference_rows(db: &Path) -> Vec<Row> {
    let conn = rusqlite::Connection::open(db).expect("open state.db");
    let cols = [
        "session_id",
        "updated_at",
        "run_id",
        "invoke_seq",
        "schema_version",
        "meta_json",
        "message_count",
        "last_user_message",
        "workspace_root",
    ];
    let mut stmt = conn
        .prepare(&format!(
            "SELECT {} FROM session_state ORDER BY updated_at DESC",
            cols.join(", ")
        ))
        .expect("the reference's query prepares");
    stmt.query_map([], |r| {
        let mut row = Row::new();
        for (i, c) in cols.iter().enumerate() {
            let (class, text) = sql_text(&r.get::<_, Sql>(i)?);
            row.push(((*c).to_owned(), class, text));
        }
        Ok(row)
    })
    .expect("query rows")
    .collect::<rusqlite::Result<_>>()
    .expect("read rows")
}

/// The rows `expected.json` records for the untouched database, in the same shape.
fn expected_rows(expected: &serde_json::Value) -> Vec<Row> {
    let cols: Vec<String> = expected["state_db"]["columns"]
        .as_array()
        .expect("columns")
        .iter()
        .map(|c| c.as_str().expect("column name").to_owned())
        .collect();
    expected["state_db"]["rows_by_updated_at_desc"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|row| {
            cols.iter()
                .map(|c| {
                    let class = row["column_types"][c].as_str().expect("type").to_owned();
                    let text = match &row[c] {
                        serde_json::Value::Null => String::new(),
                        serde_json::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    (c.clone(), class, text)
                })
                .collect()
        })
        .collect()
}

fn schema_sql(db: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).expect("open state.db");
    let mut stmt = conn
        .prepare(
            "SELECT sql FROM sqlite_master WHERE tbl_name = 'session_state' AND sql IS NOT NULL ORDER BY sql",
        )
        .expect("prepare");
    stmt.query_map([], |r| r.get::<_, String>(0))
        .expect("query")
        .collect::<rusqlite::Result<_>>()
        .expect("read")
}

fn pragma(db: &Path, name: &str) -> String {
    let conn = rusqlite::Connection::open(db).expect("open state.db");
    conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get::<_, String>(0))
        .expect("pragma")
}

fn message_line(m: &session_schema::BaseMessage) -> String {
    let mut l = String::from_utf8(to_line(m).expect("serialize")).expect("UTF-8");
    l.pop();
    l
}

#[test]
fn a_session_continued_by_us_stays_intact_for_the_reference() {
    let expected = codelia_expected();
    let original = codelia_dir().join("sessions");
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("sessions");
    copy_tree(&original, &root);
    let db = root.join("state.db");
    let mut want_schema: Vec<String> = expected["state_db"]["schema_sql"]
        .as_array()
        .expect("schema_sql")
        .iter()
        .map(|s| s.as_str().expect("sql").to_owned())
        .collect();
    want_schema.sort();
    assert_eq!(schema_sql(&db), want_schema, "the copy starts as recorded");

    // Our store opens the reference's database (and migrates its own bookkeeping in).
    let store = StateStore::open(&root).expect("open the reference's store");
    let loaded = store.load(S2).expect("load S2").expect("S2 exists");
    assert!(loaded.damage.is_empty(), "{:?}", loaded.damage);
    assert_eq!(loaded.state.messages.len(), 26);
    assert_eq!(loaded.state.invoke_seq, Some(10));
    assert_eq!(loaded.state.run_id.as_deref(), Some(S2_LAST_RUN));
    let original_messages = fs::read(original.join(format!("messages/{S2}.jsonl"))).expect("S2");
    let reserialized: String = loaded
        .state
        .messages
        .iter()
        .map(|m| message_line(m) + "\n")
        .collect();
    assert_eq!(
        reserialized.as_bytes(),
        original_messages,
        "loaded messages serialize back to the reference's bytes"
    );

    // The runtime resumes S2: a new run written by our writer, seq continuing from invoke_seq.
    let mut history_lines: Vec<String> = loaded.state.messages.iter().map(message_line).collect();
    let sys = system_msg("You are codelia, a coding agent.");
    let user = user_msg(ASK);
    let answer = assistant_msg(ANSWER);
    let mut sent = vec![sys.clone()];
    sent.extend(history_lines.iter().cloned());
    sent.push(user.clone());
    let sent_refs: Vec<&String> = sent.iter().collect();
    let mut run = RunScript::new(NEW_RUN, S2, STARTED);
    let records: Vec<Record> = vec![
        run.header("anthropic", "claude-sonnet-4-5"),
        run.run_start(ASK),
        run.status("running"),
        run.request(11, "anthropic", "claude-sonnet-4-5", &msgs(&sent_refs)),
        run.response(
            11,
            "claude-sonnet-4-5",
            &msgs(&[&answer]),
            Tok {
                input: 21000,
                cached: 20500,
                output: 18,
            },
            "end_turn",
        ),
        run.event(0, &ev_final(ANSWER)),
        run.context(88),
        run.status("completed"),
        run.end("completed", Some(ANSWER)),
    ];
    let writer = RunWriter::create(
        &root,
        header_of(&records[0]),
        WriterOptions::with_durability(Durability::SyncData),
    )
    .expect("create run");
    for r in &records[1..] {
        writer.append(r).expect("append");
    }
    let run_path = writer.path().to_owned();
    writer.close().expect("close");
    assert_eq!(
        run_path,
        root.join(format!("2026/12/01/{NEW_RUN}.jsonl")),
        "the reference's date layout"
    );

    let mut state = loaded.state.clone();
    state.messages.push(msg(&user));
    state.messages.push(msg(&answer));
    state.run_id = Some(NEW_RUN.into());
    state.invoke_seq = Some(11);
    state.updated_at = Timestamp::from_raw(SAVED);
    store
        .save_expecting(&state, loaded.generation)
        .expect("save continued S2");
    history_lines.push(user.clone());
    history_lines.push(answer.clone());

    // Run index and replay see the reference's runs and ours as one session.
    let report = store.index_runs().expect("index");
    assert_eq!(report.added, 21);
    assert!(report.damaged.is_empty(), "{:?}", report.damaged);
    let rows = store.runs_for_session(S2).expect("runs of S2");
    let ids: Vec<&str> = rows.iter().map(|r| r.run_id.as_str()).collect();
    let mut want_ids: Vec<String> =
        expected["sessions_from_run_logs"][S2]["runs_in_started_at_order"]
            .as_array()
            .expect("runs")
            .iter()
            .map(|v| v.as_str().expect("id").to_owned())
            .collect();
    want_ids.push(NEW_RUN.to_owned());
    assert_eq!(ids, want_ids);
    let ours = rows.last().expect("our run");
    assert_eq!(ours.outcome, IndexedRunOutcome::Completed);
    assert_eq!((ours.invocation_count, ours.total_tokens), (1, 21018));
    assert_eq!(ours.record_count, records.len() as u64);
    let (logs, diags) =
        session_replay::io::session_runs(&store, S2, 20).expect("session runs from the index");
    assert!(
        !diags.iter().any(|d| d.run_id.as_deref() == Some(NEW_RUN)),
        "{diags:?}"
    );
    let (invs, _) = session_replay::session_invocations(&logs);
    let seqs: Vec<i64> = invs.iter().map(|i| i.seq).collect();
    assert_eq!(seqs, (1..=11).collect::<Vec<_>>());
    assert!(invs.iter().all(|i| !i.missing_response()));
    let (hist, _) = session_replay::io::session_history(&store, S2, HistoryOptions::default())
        .expect("history");
    let rpc = &expected["codelia_runtime_rpc_outputs"]["session.history"]["S2"]["events"];
    let mut want_events: Vec<(String, i64, String)> = rpc
        .as_array()
        .expect("recorded S2 history")
        .iter()
        .map(|e| {
            (
                e["run_id"].as_str().expect("run_id").to_owned(),
                e["seq"].as_i64().expect("seq"),
                e["type"].as_str().expect("type").to_owned(),
            )
        })
        .collect();
    want_events.push((NEW_RUN.into(), -1, "hidden_user_message".into()));
    want_events.push((NEW_RUN.into(), 0, "final".into()));
    let got_events: Vec<(String, i64, String)> = hist
        .events
        .iter()
        .map(|e| (e.run_id.clone(), e.seq, e.event.tag().to_owned()))
        .collect();
    assert_eq!(got_events, want_events);
    assert!(matches!(&hist.events[want_events.len() - 2].event,
        AgentEvent::HiddenUserMessage(c) if c.content.as_deref() == Some(ASK)));
    let page = store.list(&ListQuery::all()).expect("list");
    let listed: Vec<&str> = page
        .entries
        .iter()
        .map(|e| e.summary.session_id.as_str())
        .collect();
    assert_eq!(listed.len(), 12);
    assert_eq!(listed[0], S2, "the continued session is the newest");
    drop(store);

    // --- What the reference reads.
    // 1. `session_state` keeps the reference's exact schema, and WAL.
    assert_eq!(schema_sql(&db), want_schema);
    assert_eq!(pragma(&db, "journal_mode"), "wal");
    assert_eq!(pragma(&db, "integrity_check"), "ok");
    // 2. Every row but S2 is as recorded; S2's row carries the continued session.
    let rows_now = reference_rows(&db);
    let mut want_rows = expected_rows(&expected);
    let s2_at = want_rows
        .iter()
        .position(|r| r[0].2 == S2)
        .expect("S2 row recorded");
    let mut s2_row = want_rows.remove(s2_at);
    for (col, class, text) in &mut s2_row {
        let (c, t) = match col.as_str() {
            "updated_at" => ("text", SAVED.to_owned()),
            "run_id" => ("text", NEW_RUN.to_owned()),
            "invoke_seq" => ("integer", "11".to_owned()),
            "message_count" => ("integer", "28".to_owned()),
            "last_user_message" => ("text", ASK.to_owned()),
            _ => continue,
        };
        *class = c.to_owned();
        *text = t;
    }
    want_rows.insert(0, s2_row);
    assert_eq!(rows_now, want_rows);
    // 3. messages/<id>.jsonl: the recorded bytes, then one compact message per line.
    let messages_now = fs::read(root.join(format!("messages/{S2}.jsonl"))).expect("messages");
    assert!(messages_now.starts_with(&original_messages));
    assert_eq!(
        &messages_now[original_messages.len()..],
        format!("{user}\n{answer}\n").as_bytes()
    );
    for line in messages_now.split_inclusive(|&b| b == b'\n') {
        assert_eq!(line.last(), Some(&b'\n'));
        let body = &line[..line.len() - 1];
        let parsed = parse_message(body).expect("every line is one message");
        assert_eq!(
            parsed.to_json().expect("to_json"),
            body,
            "compact, byte-exact"
        );
        assert!(!body.contains(&b'\r') && !body.starts_with(b" "));
    }
    // 4. Our run file is in the reference's format: header first with the session, every line
    //    one record ending in `\n`, no damage.
    let run_bytes = fs::read(&run_path).expect("our run");
    let want_bytes: Vec<u8> = records.iter().flat_map(line_of).collect();
    assert_eq!(run_bytes, want_bytes);
    let read = read_run(&run_path).expect("read our run");
    assert!(read.damage.is_empty());
    assert!(
        matches!(read.records[0].record(), Record::Header(h) if h.session_id.as_deref() == Some(S2))
    );
    // 5. Nothing the reference wrote changed, and nothing but our run and S2 was added.
    let runs = expected["runs"].as_object().expect("runs");
    for (id, facts) in runs {
        let rel = facts["file"].as_str().expect("file");
        let rel = rel.strip_prefix("sessions/").expect("under sessions/");
        let now = fs::read(root.join(rel)).unwrap_or_else(|e| panic!("run {id}: {e}"));
        assert_eq!(
            now.len() as u64,
            facts["bytes"].as_u64().expect("bytes"),
            "run {id}"
        );
        assert_eq!(
            now,
            fs::read(original.join(rel)).expect("original"),
            "run {id}"
        );
    }
    let before: BTreeSet<PathBuf> = files_under(&original).into_iter().collect();
    let after: BTreeSet<PathBuf> = files_under(&root).into_iter().collect();
    let added: Vec<&PathBuf> = after.difference(&before).collect();
    let allowed: BTreeSet<PathBuf> = [
        PathBuf::from(format!("2026/12/01/{NEW_RUN}.jsonl")),
        PathBuf::from("state.db-wal"),
        PathBuf::from("state.db-shm"),
        // Our crash bookkeeping: the session an append may be in progress for.
        PathBuf::from("messages/.append-intent"),
    ]
    .into_iter()
    .collect();
    assert!(
        added.iter().all(|p| allowed.contains(*p)),
        "unexpected files: {added:?}"
    );
    let gone: Vec<&PathBuf> = before.difference(&after).collect();
    assert!(gone.is_empty(), "files disappeared: {gone:?}");
    for rel in &before {
        let name = rel.to_string_lossy();
        if name == "state.db" || name == format!("messages/{S2}.jsonl") {
            continue;
        }
        assert_eq!(
            fs::read(root.join(rel)).expect("copy"),
            fs::read(original.join(rel)).expect("original"),
            "{name} changed"
        );
    }

    // The CLI on the shared root: our run and session show up with the same facts.
    let out = sessions(
        &root,
        "2026-12-02T00:00:00.000Z",
        &["runs", "--json", "--session", S2],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines = out.json_lines();
    assert_eq!(lines.len(), 4, "{}", out.stdout);
    assert_eq!(lines[0]["run_id"], NEW_RUN);
    assert_eq!(lines[0]["total_tokens"], 21018);
    assert_eq!(lines[0]["file"], format!("2026/12/01/{NEW_RUN}.jsonl"));
    let verify = sessions(
        &root,
        "2026-12-02T00:00:00.000Z",
        &["verify", "--json", NEW_RUN],
    );
    assert_eq!(verify.code, 0, "{}", verify.stdout);
    let all = sessions(&root, "2026-12-02T00:00:00.000Z", &["verify", "--json"]);
    let findings = all.json_lines();
    assert!(
        !findings.iter().any(|f| f["id"] == S2 || f["id"] == NEW_RUN),
        "{}",
        all.stdout
    );
    let listed = sessions(
        &root,
        "2026-12-02T00:00:00.000Z",
        &["sessions", "--all", "--json"],
    );
    let first = &listed.json_lines()[0];
    assert_eq!(first["session_id"], S2);
    assert_eq!(first["message_count"], 28);
    assert_eq!(first["last_user_message"], ASK);
}
