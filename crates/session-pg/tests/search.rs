//! Full-text search on PostgreSQL against a live cluster: the same hits as the local
//! `search.db` over the same files (the recorded reference data plus a run with Japanese
//! text, NUL runs and invalid UTF-8), filters, quoting, native syntax errors, documents
//! removed with their run or message, and reindexing a store from before the search
//! migration.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use session_pg::PgBackend;
use session_schema::parse_session_state;
use session_storage::local::LocalBackend;
use session_storage::{
    Expected, Extent, HIGHLIGHT_END, HIGHLIGHT_START, RunCatalogue, RunListQuery, RunSearch,
    RunSearchHit, RunSearchQuery, SearchMatch, SessionListQuery, SessionStore, StorageError,
};

macro_rules! cluster {
    () => {
        match common::shared() {
            Some(c) => c,
            None => return,
        }
    };
}

/// The extra run: Japanese text inside a longer word, NUL runs, invalid UTF-8, a lone
/// surrogate, an `llm.request` holding a word nothing else has, hyphenated words.
const EXTRA_RUN: &str = "0f0e0d0c-1111-4222-8333-944455556666";
const EXTRA_SESSION: &str = "5e551011-aaaa-4bbb-8ccc-ddddeeeeffff";

fn extra_run_bytes() -> Vec<u8> {
    let r = EXTRA_RUN;
    let s = EXTRA_SESSION;
    let mut b = Vec::new();
    let mut line = |l: &[u8]| {
        b.extend_from_slice(l);
        b.push(b'\n');
    };
    line(format!(r#"{{"type":"header","schema_version":1,"run_id":"{r}","session_id":"{s}","started_at":"2026-11-30T12:00:00.000Z","runtime":{{"cwd":"/work/extra"}}}}"#).as_bytes());
    line(format!(r#"{{"type":"run.start","run_id":"{r}","session_id":"{s}","ts":"2026-11-30T12:00:01.000Z","input":{{"type":"text","text":"fix the ux-capac limit in the planner"}}}}"#).as_bytes());
    line(format!(r#"{{"type":"llm.request","run_id":"{r}","ts":"2026-11-30T12:00:01.500Z","seq":1,"input":{{"messages":[{{"role":"user","content":"snapshotonlyword"}}]}}}}"#).as_bytes());
    line(format!(r#"{{"type":"agent.event","run_id":"{r}","ts":"2026-11-30T12:00:02.000Z","seq":1,"event":{{"type":"text","content":"これは日本語のテキストです"}}}}"#).as_bytes());
    // Invalid UTF-8 inside a string.
    let mut bad = format!(r#"{{"type":"agent.event","run_id":"{r}","ts":"2026-11-30T12:00:03.000Z","seq":2,"event":{{"type":"reasoning","content":"brokenbyte X here"}}}}"#).into_bytes();
    let i = bad.iter().position(|&c| c == b'X').unwrap();
    bad[i] = 0xff;
    line(&bad);
    // A NUL run before a record.
    let mut nul = vec![0u8; 48];
    nul.extend_from_slice(format!(r#"{{"type":"tool.output","run_id":"{r}","ts":"2026-11-30T12:00:04.000Z","tool":"shell","tool_call_id":"c1","result_raw":"afternuls output"}}"#).as_bytes());
    line(&nul);
    line(format!(r#"{{"type":"agent.event","run_id":"{r}","ts":"2026-11-30T12:00:05.000Z","seq":3,"event":{{"type":"text","content":"lonely \ud83c surrogate"}}}}"#).as_bytes());
    line(b"{not json at all");
    line(format!(r#"{{"type":"run.end","run_id":"{r}","ts":"2026-11-30T12:00:06.000Z","outcome":"completed","final":"the planner limit is fixed"}}"#).as_bytes());
    b
}

/// A copy of the recorded reference store plus the extra run, its run index and search
/// index brought up to date.
fn local_store(dir: &Path) -> LocalBackend {
    let root = dir.join("sessions");
    session_test_support::copy_tree(&session_test_support::codelia_sessions_dir(), &root).unwrap();
    let day = root.join("2026/11/30");
    std::fs::create_dir_all(&day).unwrap();
    std::fs::write(day.join(format!("{EXTRA_RUN}.jsonl")), extra_run_bytes()).unwrap();
    let local = LocalBackend::open(&root).unwrap();
    local.state_store().index_runs().unwrap();
    let index = session_state::SearchIndex::open(&root).unwrap();
    let report = session_replay::io::search::refresh_search(local.state_store(), &index).unwrap();
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    local
}

/// Every run of `local` appended to `pg` whole, and every session saved.
fn copy_to(local: &LocalBackend, pg: &PgBackend) {
    let runs = local.list_runs(&RunListQuery::default()).unwrap().runs;
    assert!(runs.len() >= 5, "reference runs: {}", runs.len());
    for r in &runs {
        let bytes = local.read_all(&r.run_id, Extent::Committed).unwrap();
        pg.append_lines(&r.run_id, 0, &bytes).unwrap();
    }
    let sessions = local.list_sessions(&SessionListQuery::default()).unwrap();
    for s in &sessions.sessions {
        let loaded = local.load_session(&s.session_id).unwrap().unwrap();
        pg.save_session(&loaded.state, &Expected::Absent).unwrap();
    }
}

type Key = (String, u64, String);

/// Hits as `(run_id, byte_offset, kind)`; a saved message's as
/// `(messages/<session_id>.jsonl, byte_offset, kind)`.
fn keys(hits: &[RunSearchHit]) -> BTreeSet<Key> {
    hits.iter()
        .map(|h| {
            let id = if h.run_id.is_empty() {
                format!(
                    "messages/{}.jsonl",
                    h.session_id.as_deref().unwrap_or_default()
                )
            } else {
                h.run_id.clone()
            };
            (id, h.byte_offset, h.kind.clone())
        })
        .collect()
}

fn query(text: &str) -> RunSearchQuery {
    let mut q = RunSearchQuery::new(text);
    q.limit = 1000;
    q
}

fn shown(s: &str) -> String {
    s.replace(HIGHLIGHT_START, "[").replace(HIGHLIGHT_END, "]")
}

#[test]
fn postgres_finds_what_the_local_index_finds() {
    let c = cluster!();
    let tmp = tempfile::tempdir().unwrap();
    let local = local_store(tmp.path());
    let pg = c.fresh_backend();
    copy_to(&local, &pg);

    let mut queries: Vec<RunSearchQuery> = [
        "planner",
        "ux-capac",
        "日本語",
        "テキスト",
        "brokenbyte",
        "afternuls",
        "surrogate",
        "slugify",
        "npm scripts",
        "version",
        "the",
        "greeting",
        "package",
        "snapshotonlyword",
        "\"",
        "((",
    ]
    .iter()
    .map(|t| query(t))
    .collect();
    let mut q = query("the");
    q.kinds = vec!["user".into(), "final".into()];
    queries.push(q);
    let mut q = query("planner");
    q.session_id = Some(EXTRA_SESSION.into());
    queries.push(q);
    let mut q = query("version");
    q.session_id = Some("9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d".into());
    queries.push(q);
    let mut q = query("planner");
    q.workspace = Some("/work/extra".into());
    queries.push(q);
    let mut q = query("the");
    q.since_ms = Some(1_796_040_002_000); // 2026-11-30T12:00:02Z
    q.until_ms = Some(1_796_040_006_000);
    queries.push(q);

    let mut found_somewhere = 0;
    let mut message_hits = BTreeSet::new();
    for q in &queries {
        let l = local.search(q).unwrap();
        let p = pg.search(q).unwrap();
        assert_eq!(keys(&p), keys(&l), "hits of {q:?}");
        if !p.is_empty() {
            found_somewhere += 1;
        }
        message_hits.extend(
            keys(&p)
                .into_iter()
                .filter(|(id, ..)| id.starts_with("messages/")),
        );
    }
    // The reference store's legacy-only session is found through its saved messages.
    assert!(
        message_hits.contains(&(
            "messages/5d0c6f1e-2a7b-4c3d-8e9f-0a1b2c3d4e5f.jsonl".to_owned(),
            0,
            "user".to_owned()
        )),
        "{message_hits:?}"
    );
    assert!(
        found_somewhere >= 14,
        "{found_somewhere} queries found something"
    );

    // Exact expectations on the extra run.
    let kinds_at = |hits: &[RunSearchHit]| -> Vec<(String, SearchMatch)> {
        hits.iter()
            .filter(|h| h.run_id == EXTRA_RUN)
            .map(|h| (h.kind.clone(), h.matched_by))
            .collect()
    };
    let p = pg.search(&query("日本語")).unwrap();
    assert_eq!(
        kinds_at(&p),
        vec![("assistant".to_owned(), SearchMatch::Substring)]
    );
    let hit = p.iter().find(|h| h.run_id == EXTRA_RUN).unwrap();
    assert_eq!(shown(&hit.snippet), "これは[日本語]のテキストです");
    assert_eq!(hit.session_id.as_deref(), Some(EXTRA_SESSION));
    assert_eq!(hit.workspace.as_deref(), Some("/work/extra"));
    assert_eq!(hit.location, format!("test-host:{EXTRA_RUN}"));
    assert_eq!(hit.time_ms, Some(1_796_040_002_000));
    let bytes = extra_run_bytes();
    let line_start = |needle: &str| -> u64 {
        let at = bytes
            .windows(needle.len())
            .position(|w| w == needle.as_bytes())
            .unwrap();
        bytes[..at]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i as u64 + 1)
    };
    assert_eq!(hit.byte_offset, line_start("これは"));
    // Words: ranked word hits first, from the user input and the final answer.
    let p = pg.search(&query("planner")).unwrap();
    let kinds: BTreeSet<(String, SearchMatch)> = kinds_at(&p).into_iter().collect();
    assert_eq!(
        kinds,
        BTreeSet::from([
            ("final".to_owned(), SearchMatch::Words),
            ("user".to_owned(), SearchMatch::Words)
        ])
    );
    assert_eq!(p.len(), 2);
    assert!(
        p.iter()
            .all(|h| h.matched_by == SearchMatch::Words && h.score > 0.0)
    );
    // Damaged lines are indexed as far as they decode.
    let p = pg.search(&query("brokenbyte")).unwrap();
    assert_eq!(p.len(), 1);
    assert_eq!(shown(&p[0].snippet), "[brokenbyte] \u{fffd} here");
    let p = pg.search(&query("afternuls")).unwrap();
    assert_eq!(
        (p.len(), p[0].kind.as_str(), p[0].byte_offset),
        (1, "tool-output", line_start("afternuls") + 48)
    );
    // A word only an llm.request holds is never found.
    assert!(pg.search(&query("snapshotonlyword")).unwrap().is_empty());
    // Raw user text never raises a syntax error, and the limit holds.
    assert_eq!(pg.search(&query("ux-capac")).unwrap().len(), 1);
    let mut q = query("the");
    q.limit = 3;
    assert_eq!(pg.search(&q).unwrap().len(), 3);
}

#[test]
fn native_syntax_errors_are_typed_and_plain_text_never_fails() {
    let c = cluster!();
    let pg = c.fresh_backend();
    let mut q = RunSearchQuery::new("planner & (");
    q.native_syntax = true;
    match pg.search(&q) {
        Err(StorageError::InvalidSearchQuery { query, message }) => {
            assert_eq!(query, "planner & (");
            assert!(message.contains("tsquery"), "{message}");
        }
        other => panic!("expected a query error, got {other:?}"),
    }
    for text in ["planner & (", "a:b", "!", "'", "\\", "%_"] {
        assert!(pg.search(&RunSearchQuery::new(text)).unwrap().is_empty());
    }
}

fn doc_count(pg: &PgBackend) -> i64 {
    pg.with_client(|c| {
        Ok(c.query_one("SELECT count(*) FROM search_docs", &[])
            .unwrap()
            .get(0))
    })
    .unwrap()
}

#[test]
fn documents_go_with_their_run_and_their_messages() {
    let c = cluster!();
    let pg = c.fresh_backend();
    let bytes = extra_run_bytes();
    pg.append_lines(EXTRA_RUN, 0, &bytes).unwrap();
    // user, assistant, reasoning, tool output, assistant (surrogate), final.
    assert_eq!(pg.search_document_count(EXTRA_RUN).unwrap(), 6);
    // A saved session with no run of its own: its messages are searchable.
    let saved = |text: &str| {
        parse_session_state(
            format!(
                r#"{{"schema_version":1,"session_id":"11111111-2222-4333-8444-555555555555","updated_at":"2026-02-03T12:00:02.900Z","messages":[{{"role":"user","content":"{text}"}}]}}"#
            )
            .as_bytes(),
        )
        .unwrap()
        .value
    };
    let v1 = pg
        .save_session(&saved("zebracrossing please"), &Expected::Absent)
        .unwrap();
    let p = pg.search(&query("zebracrossing")).unwrap();
    assert_eq!(
        (
            p.len(),
            p[0].run_id.as_str(),
            p[0].byte_offset,
            p[0].kind.as_str()
        ),
        (1, "", 0, "user")
    );
    assert_eq!(
        p[0].location,
        "messages/11111111-2222-4333-8444-555555555555.jsonl"
    );
    // Rewritten: the old message's document goes, the new one comes.
    pg.save_session(&saved("giraffeneck"), &Expected::Version(v1))
        .unwrap();
    assert!(pg.search(&query("zebracrossing")).unwrap().is_empty());
    assert_eq!(pg.search(&query("giraffeneck")).unwrap().len(), 1);
    assert_eq!(doc_count(&pg), 7);
    // gc removes the run and the session, and every document with them.
    let report = pg.gc(4_102_444_800_000, false).unwrap(); // 2100-01-01
    assert_eq!(report.removed.len(), 2);
    assert_eq!(pg.search_document_count(EXTRA_RUN).unwrap(), 0);
    assert_eq!(doc_count(&pg), 0);
    assert!(pg.search(&query("planner")).unwrap().is_empty());
}

#[test]
fn reindexing_indexes_runs_stored_before_the_search_migration() {
    let c = cluster!();
    let tmp = tempfile::tempdir().unwrap();
    let local = local_store(tmp.path());
    let pg = c.fresh_backend();
    copy_to(&local, &pg);
    let before: Vec<_> = ["planner", "日本語", "the", "version"]
        .iter()
        .map(|t| keys(&pg.search(&query(t)).unwrap()))
        .collect();
    let docs = doc_count(&pg);
    assert!(docs > 20, "{docs} documents");
    // A store whose runs came before migration 3 has none of their documents.
    pg.with_client(|c| {
        c.batch_execute("DELETE FROM search_docs").unwrap();
        Ok(())
    })
    .unwrap();
    assert!(pg.search(&query("planner")).unwrap().is_empty());
    let report = pg.reindex_search().unwrap();
    let runs = local
        .list_runs(&RunListQuery::default())
        .unwrap()
        .runs
        .len() as u64;
    assert_eq!(report.runs, runs);
    assert_eq!(i64::try_from(report.documents).unwrap(), docs);
    let after: Vec<_> = ["planner", "日本語", "the", "version"]
        .iter()
        .map(|t| keys(&pg.search(&query(t)).unwrap()))
        .collect();
    assert_eq!(after, before);
    // Idempotent.
    assert_eq!(pg.reindex_search().unwrap().documents, report.documents);
    assert_eq!(doc_count(&pg), docs);
}

#[test]
fn appends_in_pieces_and_retries_index_each_line_once() {
    let c = cluster!();
    let whole = c.fresh_backend();
    let pieces = c.fresh_backend();
    let bytes = extra_run_bytes();
    whole.append_lines(EXTRA_RUN, 0, &bytes).unwrap();
    // One append per line, each sent twice (a retry after a lost acknowledgement), and the
    // whole run once more at 0 (already present).
    let mut at = 0u64;
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        let a = pieces.append_lines(EXTRA_RUN, at, line).unwrap();
        let again = pieces.append_lines(EXTRA_RUN, at, line).unwrap();
        assert!(again.was_retry());
        at = a.end;
    }
    pieces.append_lines(EXTRA_RUN, 0, &bytes).unwrap();
    assert_eq!(doc_count(&pieces), 6);
    for text in [
        "planner",
        "日本語",
        "brokenbyte",
        "afternuls",
        "surrogate",
        "the",
    ] {
        assert_eq!(
            keys(&pieces.search(&query(text)).unwrap()),
            keys(&whole.search(&query(text)).unwrap()),
            "{text}"
        );
    }
}

#[test]
fn word_hits_are_ranked_among_the_newest_matches_only() {
    let c = cluster!();
    let pg = c.fresh_backend();
    let run = "7a7a7a7a-1111-4222-8333-944455556666";
    let line = |seq: usize, text: &str| {
        format!(
            "{{\"type\":\"agent.event\",\"run_id\":\"{run}\",\"ts\":\"2026-11-30T12:00:02.000Z\",\"seq\":{seq},\"event\":{{\"type\":\"text\",\"content\":\"{text}\"}}}}\n"
        )
    };
    let mut bytes = format!(
        "{{\"type\":\"header\",\"schema_version\":1,\"run_id\":\"{run}\",\"started_at\":\"2026-11-30T12:00:00.000Z\"}}\n"
    );
    // The oldest document would rank first, but lies outside the window of the newest
    // RANK_WINDOW matches.
    bytes.push_str(&line(0, &"common ".repeat(50)));
    let window = usize::try_from(session_pg::RANK_WINDOW).unwrap();
    for i in 1..=window {
        let text = if i == 10 {
            "common common common best".to_owned()
        } else {
            format!("common word {i}")
        };
        bytes.push_str(&line(i, &text));
    }
    pg.append_lines(run, 0, bytes.as_bytes()).unwrap();
    let mut q = RunSearchQuery::new("common");
    q.limit = 3;
    let hits = pg.search(&q).unwrap();
    assert_eq!(hits.len(), 3);
    assert!(hits.iter().all(|h| h.matched_by == SearchMatch::Words));
    assert!(
        shown(&hits[0].snippet).ends_with("best"),
        "{}",
        hits[0].snippet
    );
    assert!(hits[0].score > hits[1].score);
    assert!(
        hits.iter()
            .all(|h| !shown(&h.snippet).contains("[common] [common] [common] [common]"))
    );
    // Asked for more than the window, the window grows to the limit: every match is a
    // ranked word hit, the oldest one first.
    q.limit = 2000;
    let all = pg.search(&q).unwrap();
    assert_eq!(all.len(), window + 1);
    assert!(all.iter().all(|h| h.matched_by == SearchMatch::Words));
    assert!(shown(&all[0].snippet).starts_with("[common] [common] [common] [common]"));
}

/// Distinct transactions that wrote the tip rows of `pg`'s runs (each row's `xmin`).
fn creating_transactions(pg: &PgBackend) -> i64 {
    pg.with_client(|c| {
        Ok(
            c.query_one("SELECT count(DISTINCT xmin::text) FROM run_tips", &[])
                .unwrap()
                .get(0),
        )
    })
    .unwrap()
}

#[test]
fn runs_created_together_read_list_and_search_as_runs_appended_one_by_one() {
    let c = cluster!();
    let tmp = tempfile::tempdir().unwrap();
    let local = local_store(tmp.path());
    let runs = local.list_runs(&RunListQuery::default()).unwrap().runs;
    let bytes: Vec<(String, Vec<u8>)> = runs
        .iter()
        .map(|r| {
            let b = local.read_all(&r.run_id, Extent::Committed).unwrap();
            (r.run_id.clone(), b)
        })
        .collect();
    let one_by_one = c.fresh_backend();
    for (id, b) in &bytes {
        one_by_one.append_lines(id, 0, b).unwrap();
    }
    let together = c.fresh_backend();
    // One run exists already (its first line), one id comes twice, one run has no line yet.
    let (first_id, first_bytes) = &bytes[0];
    let first_line_end = first_bytes.iter().position(|&b| b == b'\n').unwrap() + 1;
    together
        .append_lines(first_id, 0, &first_bytes[..first_line_end])
        .unwrap();
    let tips_before = creating_transactions(&together);
    let mut asked: Vec<(&str, &[u8])> = bytes
        .iter()
        .map(|(id, b)| (id.as_str(), b.as_slice()))
        .collect();
    asked.push((bytes[1].0.as_str(), bytes[1].1.as_slice()));
    asked.push(("empty-run", b"".as_slice()));
    let made = together.create_runs(&asked).unwrap();
    assert_eq!(made.len(), asked.len());
    assert!(made[0].is_none(), "the run that exists is left alone");
    assert!(made[bytes.len()].is_none(), "a repeated id is created once");
    assert!(made[bytes.len() + 1].is_none(), "no lines, no run");
    for (m, (_, b)) in made.iter().zip(&bytes).skip(1) {
        let m = m.as_ref().unwrap();
        assert_eq!((m.offset, m.end, m.already_present), (0, b.len() as u64, 0));
    }
    // Every new run in one transaction.
    assert_eq!(creating_transactions(&together), tips_before + 1);
    assert_eq!(
        together
            .read_all(first_id, Extent::Committed)
            .unwrap()
            .len(),
        first_line_end,
        "nothing was written to the run that existed"
    );
    // The run that existed takes its other lines by an append, which knows them.
    together.append_lines(first_id, 0, first_bytes).unwrap();
    for (id, _) in &bytes {
        assert_eq!(
            together.read_all(id, Extent::Committed).unwrap(),
            one_by_one.read_all(id, Extent::Committed).unwrap(),
            "{id}"
        );
        assert_eq!(
            format!("{:?}", together.stat_run(id).unwrap()),
            format!("{:?}", one_by_one.stat_run(id).unwrap()),
            "{id}"
        );
        assert_eq!(
            format!("{:?}", together.run_fingerprint(id).unwrap()),
            format!("{:?}", one_by_one.run_fingerprint(id).unwrap()),
            "{id}"
        );
        assert_eq!(
            together.search_document_count(id).unwrap(),
            one_by_one.search_document_count(id).unwrap(),
            "{id}"
        );
    }
    let listed = |pg: &PgBackend| -> Vec<String> {
        pg.list_runs(&RunListQuery::default())
            .unwrap()
            .runs
            .into_iter()
            .map(|mut r| {
                // When each store wrote it.
                r.last_write_unix_ns = 0;
                format!("{r:?}")
            })
            .collect()
    };
    assert_eq!(listed(&together), listed(&one_by_one));
    for text in ["planner", "日本語", "brokenbyte", "the", "version"] {
        assert_eq!(
            keys(&together.search(&query(text)).unwrap()),
            keys(&one_by_one.search(&query(text)).unwrap()),
            "{text}"
        );
    }
    // Asked again (a retry after a lost acknowledgement): nothing is created twice.
    let again = together.create_runs(&asked).unwrap();
    assert!(again.iter().all(Option::is_none));
    assert_eq!(doc_count(&together), doc_count(&one_by_one));
    // An unsafe id or an incomplete line refuses the whole batch before anything is sent.
    let fresh = c.fresh_backend();
    let bad_id = fresh.create_runs(&[("ok-run", b"{}\n".as_slice()), ("../x", b"{}\n".as_slice())]);
    assert!(
        matches!(bad_id, Err(StorageError::UnsafeId { .. })),
        "{bad_id:?}"
    );
    let torn = fresh.create_runs(&[("ok-run", b"{}\n{".as_slice())]);
    assert!(
        matches!(torn, Err(StorageError::IncompleteLine { .. })),
        "{torn:?}"
    );
    assert!(fresh.stat_run("ok-run").unwrap().is_none());
}
