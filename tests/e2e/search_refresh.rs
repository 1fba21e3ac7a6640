//! The search index end to end on a temporary store: extraction, incremental refresh by byte
//! offset, ranking, snippets, filters, substring search in Japanese, damaged lines, removal
//! and archiving; reading on workers against one thread. It lives here, not in session-replay,
//! because it reads `search.db` with rusqlite, which session-replay must not depend on.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use session_replay::io::search::{SearchRefreshReport, refresh_search, refresh_search_on};
use session_state::{
    HIGHLIGHT_END, HIGHLIGHT_START, MatchedBy, SearchIndex, SearchQuery, StateStore,
};

const DAY: &str = "2026/03/04";

fn run_path(root: &Path, run: &str) -> PathBuf {
    root.join(DAY).join(format!("{run}.jsonl"))
}

fn header(run: &str, session: &str) -> String {
    format!(
        r#"{{"type":"header","schema_version":1,"run_id":"{run}","session_id":"{session}","started_at":"2026-03-04T10:00:00.000Z"}}"#
    )
}

fn start(run: &str, text: &str, ts: &str) -> String {
    format!(
        r#"{{"type":"run.start","run_id":"{run}","ts":"{ts}","input":{{"type":"text","text":{}}}}}"#,
        serde_json::to_string(text).unwrap()
    )
}

fn event(run: &str, kind: &str, text: &str) -> String {
    format!(
        r#"{{"type":"agent.event","run_id":"{run}","ts":"2026-03-04T10:00:02.000Z","seq":1,"event":{{"type":"{kind}","content":{}}}}}"#,
        serde_json::to_string(text).unwrap()
    )
}

fn output(run: &str, text: &str) -> String {
    format!(
        r#"{{"type":"tool.output","run_id":"{run}","ts":"2026-03-04T10:00:03.000Z","tool":"shell","tool_call_id":"c1","result_raw":{}}}"#,
        serde_json::to_string(text).unwrap()
    )
}

fn write(path: &Path, lines: &[String]) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut f = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    for l in lines {
        f.write_all(l.as_bytes()).unwrap();
        f.write_all(b"\n").unwrap();
    }
}

fn refresh(store: &StateStore, index: &SearchIndex) -> SearchRefreshReport {
    store.index_runs().unwrap();
    refresh_search(store, index).unwrap()
}

/// A hit as run id, byte offset, kind and snippet (matches between `[` and `]`).
type HitRow = (String, u64, String, String);

fn hits(index: &SearchIndex, q: SearchQuery) -> Vec<HitRow> {
    index
        .search(&q)
        .unwrap()
        .into_iter()
        .map(|h| {
            let snippet = h
                .snippet
                .replace(HIGHLIGHT_START, "[")
                .replace(HIGHLIGHT_END, "]");
            (h.run_id, h.byte_offset, h.kind, snippet)
        })
        .collect()
}

fn store() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    fs::create_dir_all(&root).unwrap();
    (dir, root)
}

#[test]
fn ranked_hits_with_snippets_kinds_and_filters() {
    let (_d, root) = store();
    let a = vec![
        header("ra", "s1"),
        start(
            "ra",
            "the build fails with a linker error",
            "2026-03-04T10:00:01.000Z",
        ),
        event("ra", "reasoning", "maybe the linker is missing"),
        output("ra", "error: linker `cc` not found"),
        event("ra", "final", "Installed the linker; the build works."),
    ];
    let b = vec![
        header("rb", "s2"),
        start(
            "rb",
            "rename the linker script linker linker",
            "2026-03-05T10:00:01.000Z",
        ),
    ];
    write(&run_path(&root, "ra"), &a);
    write(&run_path(&root, "rb"), &b);
    let store = StateStore::open(&root).unwrap();
    let index = SearchIndex::open(&root).unwrap();
    let r = refresh(&store, &index);
    assert_eq!((r.files_read, r.docs_added, r.removed), (2, 5, 0));

    let off =
        |lines: &[String], i: usize| lines[..i].iter().map(|l| l.len() as u64 + 1).sum::<u64>();
    // BM25: the short document that says "linker" three times ranks first.
    let got = hits(&index, SearchQuery::new("linker"));
    assert_eq!(got.len(), 5);
    assert_eq!(
        got[0],
        (
            "rb".to_owned(),
            off(&b, 1),
            "user".to_owned(),
            "rename the [linker] script [linker] [linker]".to_owned()
        )
    );
    let mut rest: Vec<_> = got[1..].iter().map(|h| (h.1, h.2.as_str())).collect();
    rest.sort();
    assert_eq!(
        rest,
        vec![
            (off(&a, 1), "user"),
            (off(&a, 2), "reasoning"),
            (off(&a, 3), "tool-output"),
            (off(&a, 4), "final")
        ]
    );

    let mut q = SearchQuery::new("linker");
    q.kinds = vec!["tool-output".into(), "final".into()];
    let mut got = hits(&index, q);
    got.sort();
    assert_eq!(
        got,
        vec![
            (
                "ra".to_owned(),
                off(&a, 3),
                "tool-output".to_owned(),
                "error: [linker] `cc` not found".to_owned()
            ),
            (
                "ra".to_owned(),
                off(&a, 4),
                "final".to_owned(),
                "Installed the [linker]; the build works.".to_owned()
            ),
        ]
    );

    let mut q = SearchQuery::new("linker");
    q.session_id = Some("s2".into());
    assert_eq!(hits(&index, q).len(), 1);
    let mut q = SearchQuery::new("linker");
    q.since_ms = Some(1_772_668_800_000); // 2026-03-05T00:00:00Z
    assert_eq!(
        hits(&index, q)
            .iter()
            .map(|h| h.0.as_str())
            .collect::<Vec<_>>(),
        ["rb"]
    );
    let mut q = SearchQuery::new("linker");
    q.limit = 2;
    assert_eq!(hits(&index, q).len(), 2);
    // Two words: both must occur, in any order.
    assert_eq!(hits(&index, SearchQuery::new("build linker")).len(), 2);
}

#[test]
fn quoted_phrases_and_expert_syntax() {
    let (_d, root) = store();
    let lines = vec![
        header("rq", "s"),
        start(
            "rq",
            "raise ux-capacity to 5 (see \"notes\")",
            "2026-03-04T10:00:01.000Z",
        ),
    ];
    write(&run_path(&root, "rq"), &lines);
    let store = StateStore::open(&root).unwrap();
    let index = SearchIndex::open(&root).unwrap();
    refresh(&store, &index);
    // Raw text with FTS5 operators is a phrase, never a syntax error; the prefix is found
    // inside the longer word by the substring index.
    let got = index.search(&SearchQuery::new("ux-capac")).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].matched_by, MatchedBy::Substring);
    assert_eq!(hits(&index, SearchQuery::new("\"notes\")")).len(), 1);
    assert_eq!(hits(&index, SearchQuery::new("AND OR NOT")).len(), 0);
    let mut q = SearchQuery::new("capac*");
    q.fts = true;
    assert_eq!(
        hits(&index, q)[0].3,
        "raise ux-[capacity] to 5 (see \"notes\")"
    );
    let mut q = SearchQuery::new("\"unbalanced");
    q.fts = true;
    let err = index.search(&q).unwrap_err();
    assert!(
        matches!(err, session_state::StateError::SearchQuery { .. }),
        "{err}"
    );
}

#[test]
fn japanese_phrase_inside_a_longer_word() {
    let (_d, root) = store();
    let lines = vec![
        header("rj", "s"),
        start(
            "rj",
            "全文検索機能を追加してください",
            "2026-03-04T10:00:01.000Z",
        ),
    ];
    write(&run_path(&root, "rj"), &lines);
    let store = StateStore::open(&root).unwrap();
    let index = SearchIndex::open(&root).unwrap();
    refresh(&store, &index);
    let got = index.search(&SearchQuery::new("検索機能")).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].matched_by, MatchedBy::Substring);
    assert_eq!(
        got[0]
            .snippet
            .replace(HIGHLIGHT_START, "[")
            .replace(HIGHLIGHT_END, "]"),
        "全文[検索機能]を追加してください"
    );
}

#[test]
fn incremental_by_byte_offset_and_no_change_refresh_reads_nothing() {
    let (_d, root) = store();
    let path = run_path(&root, "ri");
    let first = vec![
        header("ri", "s"),
        start("ri", "alpha question", "2026-03-04T10:00:01.000Z"),
    ];
    write(&path, &first);
    let store = StateStore::open(&root).unwrap();
    let index = SearchIndex::open(&root).unwrap();
    let size1 = fs::metadata(&path).unwrap().len();
    let r = refresh(&store, &index);
    assert_eq!((r.files_read, r.bytes_read, r.docs_added), (1, size1, 1));

    let r = refresh(&store, &index);
    assert_eq!((r.files_read, r.bytes_read, r.docs_added), (0, 0, 0));

    // An appended record and a partial line: only the new bytes are read, only the complete
    // line is indexed.
    let more = event("ri", "text", "beta answer");
    let partial = event("ri", "text", "gamma pending");
    let mut f = fs::OpenOptions::new().append(true).open(&path).unwrap();
    write!(f, "{more}\n{}", &partial[..20]).unwrap();
    drop(f);
    let size2 = fs::metadata(&path).unwrap().len();
    let r = refresh(&store, &index);
    assert_eq!(
        (r.files_read, r.bytes_read, r.docs_added),
        (1, size2 - size1, 1)
    );
    assert_eq!(hits(&index, SearchQuery::new("beta"))[0].1, size1);
    // The line is completed: read from its start.
    let mut f = fs::OpenOptions::new().append(true).open(&path).unwrap();
    writeln!(f, "{}", &partial[20..]).unwrap();
    drop(f);
    let size3 = fs::metadata(&path).unwrap().len();
    let r = refresh(&store, &index);
    assert_eq!(
        (r.files_read, r.bytes_read, r.docs_added),
        (1, size3 - size1 - more.len() as u64 - 1, 1)
    );
    assert_eq!(
        hits(&index, SearchQuery::new("gamma"))[0].1,
        size1 + more.len() as u64 + 1
    );
    assert_eq!(index.counts().unwrap().docs, 3);
}

#[test]
fn damaged_lines_are_indexed_as_far_as_they_decode() {
    let (_d, root) = store();
    let path = run_path(&root, "rd");
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut bytes = Vec::new();
    bytes.extend_from_slice(header("rd", "s").as_bytes());
    bytes.push(b'\n');
    // Invalid UTF-8 inside the text.
    let bad = start("rd", "invalid XX byte", "2026-03-04T10:00:01.000Z").replace("XX", "\u{1}");
    let mut bad = bad.into_bytes();
    let i = bad.iter().position(|&b| b == 1).unwrap();
    bad[i] = 0xff;
    bytes.extend_from_slice(&bad);
    bytes.push(b'\n');
    // A NUL run before a record.
    bytes.extend_from_slice(&[0u8; 64]);
    bytes.extend_from_slice(event("rd", "text", "after nulls").as_bytes());
    bytes.push(b'\n');
    // A lone surrogate escape.
    bytes.extend_from_slice(
        event("rd", "text", "lonely")
            .replace("lonely", "lonely \\ud83c surrogate")
            .as_bytes(),
    );
    bytes.push(b'\n');
    // Garbage that is not JSON.
    bytes.extend_from_slice(b"{not json at all\n");
    bytes.extend_from_slice(event("rd", "final", "still indexed").as_bytes());
    bytes.push(b'\n');
    fs::write(&path, &bytes).unwrap();
    let store = StateStore::open(&root).unwrap();
    let index = SearchIndex::open(&root).unwrap();
    let r = refresh(&store, &index);
    assert_eq!((r.files_read, r.docs_added, r.failed.len()), (1, 4, 0));
    assert_eq!(
        hits(&index, SearchQuery::new("invalid"))[0].3,
        "[invalid] \u{fffd} byte"
    );
    assert_eq!(
        hits(&index, SearchQuery::new("nulls"))[0].3,
        "after [nulls]"
    );
    assert_eq!(
        hits(&index, SearchQuery::new("surrogate"))[0].3,
        "lonely \u{fffd} [surrogate]"
    );
    assert_eq!(hits(&index, SearchQuery::new("still")).len(), 1);
}

#[test]
fn removed_runs_lose_their_documents_and_archives_are_not_read_again() {
    let (_d, root) = store();
    let keep = run_path(&root, "rk");
    let gone = run_path(&root, "rg");
    write(&keep, &[header("rk", "s"), start("rk", "zebra kept", "2026-03-04T10:00:01.000Z"), r#"{"type":"run.end","run_id":"rk","ts":"2026-03-04T10:00:09.000Z","outcome":"completed"}"#.to_owned()]);
    write(
        &gone,
        &[
            header("rg", "s"),
            start("rg", "zebra gone", "2026-03-04T10:00:01.000Z"),
        ],
    );
    let store = StateStore::open(&root).unwrap();
    let index = SearchIndex::open(&root).unwrap();
    refresh(&store, &index);
    assert_eq!(hits(&index, SearchQuery::new("zebra")).len(), 2);

    fs::remove_file(&gone).unwrap();
    let archived = session_jsonl::archive::compress_run(&keep).unwrap();
    assert!(archived.to_string_lossy().ends_with(".jsonl.zst"));
    let r = refresh(&store, &index);
    assert_eq!(
        (r.removed, r.renamed, r.files_read, r.bytes_read),
        (1, 1, 0, 0)
    );
    let got = index.search(&SearchQuery::new("zebra")).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].rel_path, format!("{DAY}/rk.jsonl.zst"));
    assert_eq!(index.counts().unwrap().files, 1);

    // gc's explicit removal.
    assert_eq!(
        index
            .remove_files(&[format!("{DAY}/rk.jsonl.zst")])
            .unwrap(),
        1
    );
    assert_eq!(index.counts().unwrap().docs, 0);
}

#[test]
fn search_db_is_private_and_rebuilt_when_deleted() {
    let (_d, root) = store();
    write(
        &run_path(&root, "rp"),
        &[
            header("rp", "s"),
            start("rp", "private words", "2026-03-04T10:00:01.000Z"),
        ],
    );
    let store = StateStore::open(&root).unwrap();
    let index = SearchIndex::open(&root).unwrap();
    refresh(&store, &index);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(root.join("search.db"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    drop(index);
    for f in ["search.db", "search.db-wal", "search.db-shm"] {
        let _ = fs::remove_file(root.join(f));
    }
    let index = SearchIndex::open(&root).unwrap();
    let r = refresh(&store, &index);
    assert_eq!((r.files_read, r.docs_added), (1, 1));
    assert_eq!(hits(&index, SearchQuery::new("private")).len(), 1);
    // A file that is not a database is replaced.
    drop(index);
    fs::write(root.join("search.db"), b"garbage, not sqlite at all........................................................................................").unwrap();
    for f in ["search.db-wal", "search.db-shm"] {
        let _ = fs::remove_file(root.join(f));
    }
    let index = SearchIndex::open(&root).unwrap();
    assert_eq!(refresh(&store, &index).docs_added, 1);
}

fn request(run: &str, text: &str) -> String {
    format!(
        r#"{{"type":"llm.request","run_id":"{run}","ts":"2026-03-04T10:00:02.500Z","seq":1,"input":{{"messages":[{{"role":"user","content":{}}}]}}}}"#,
        serde_json::to_string(text).unwrap()
    )
}

#[test]
fn llm_request_snapshots_and_headers_are_passed_over_unparsed() {
    let (_d, root) = store();
    let path = run_path(&root, "rq");
    let history = "snapshotted history ".repeat(200);
    let lines = vec![
        header("rq", "s"),
        start("rq", "first question", "2026-03-04T10:00:01.000Z"),
        request("rq", &history),
        output("rq", "tool said hello"),
        request("rq", &history),
        event("rq", "final", "final answer"),
    ];
    write(&path, &lines);
    let store = StateStore::open(&root).unwrap();
    let index = SearchIndex::open(&root).unwrap();
    let r = refresh(&store, &index);
    // The header and both snapshots are never deserialized; the other lines give documents.
    assert_eq!((r.lines_passed_over, r.docs_added), (3, 3));
    assert_eq!(hits(&index, SearchQuery::new("snapshotted")), vec![]);
    let offset = |n: usize| -> u64 { lines[..n].iter().map(|l| l.len() as u64 + 1).sum() };
    assert_eq!(
        hits(&index, SearchQuery::new("hello"))
            .into_iter()
            .map(|h| (h.1, h.2))
            .collect::<Vec<_>>(),
        vec![(offset(3), "tool-output".to_owned())]
    );
    // Appended: a snapshot and an answer, read from where indexing stopped.
    let more = vec![request("rq", &history), event("rq", "text", "later words")];
    write(&path, &more);
    let r = refresh(&store, &index);
    assert_eq!((r.lines_passed_over, r.docs_added), (1, 1));
    let at = offset(lines.len()) + more[0].len() as u64 + 1;
    assert_eq!(hits(&index, SearchQuery::new("later"))[0].1, at);
}

#[test]
fn legacy_snapshots_are_indexed_once_until_they_change_or_a_run_names_them() {
    let (_dir, root) = store();
    let session = "5e550000-0000-4000-8000-00000000000a";
    let snapshot = root.join(format!("state/{session}.json"));
    fs::create_dir_all(snapshot.parent().unwrap()).unwrap();
    let body = |text: &str| {
        format!(
            r#"{{"session_id":"{session}","updated_at":"2026-03-01T00:00:00.000Z","messages":[{{"role":"user","content":"hello"}},{{"role":"assistant","content":"{text}"}}]}}"#
        )
    };
    fs::write(&snapshot, body("quokka habitat")).unwrap();
    // A snapshot the store cannot load (no `updated_at`) gives nothing and fails nothing.
    let broken = root.join("state/5e550000-0000-4000-8000-00000000000b.json");
    fs::write(
        &broken,
        r#"{"session_id":"x","messages":[{"role":"user","content":"quokka"}]}"#,
    )
    .unwrap();
    let (store, index) = (
        StateStore::open(&root).unwrap(),
        SearchIndex::open(&root).unwrap(),
    );
    let r = refresh(&store, &index);
    assert_eq!((r.files_read, r.docs_added, r.failed.len()), (2, 2, 0));
    // The assistant's message: the second line of the messages file the migration writes
    // (`{"role":"user","content":"hello"}` and its newline before it).
    let key = session_state::legacy_snapshot_key(session);
    let found = index.search(&SearchQuery::new("quokka")).unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(
        (
            found[0].rel_path.as_str(),
            found[0].byte_offset,
            found[0].kind.as_str()
        ),
        (key.as_str(), 34, "assistant")
    );
    assert_eq!(found[0].session_id.as_deref(), Some(session));
    assert_eq!(found[0].run_id, "");
    // Nothing changed: no file read.
    let r = refresh(&store, &index);
    assert_eq!((r.files_read, r.bytes_read, r.removed), (0, 0, 0));
    // Rewritten (another size): read again, whole; the old text is gone.
    fs::write(&snapshot, body("wombat burrow, longer")).unwrap();
    let r = refresh(&store, &index);
    assert_eq!((r.files_read, r.docs_added), (1, 2));
    assert!(
        index
            .search(&SearchQuery::new("quokka"))
            .unwrap()
            .is_empty()
    );
    assert_eq!(index.search(&SearchQuery::new("wombat")).unwrap().len(), 1);
    // A run log naming the session holds its history now: the snapshot leaves the index.
    let run = "0a000000-0000-4000-8000-00000000000a";
    write(
        &run_path(&root, run),
        &[
            header(run, session),
            start(run, "platypus", "2026-03-04T10:00:01.000Z"),
        ],
    );
    let r = refresh(&store, &index);
    assert_eq!((r.files_read, r.removed), (1, 1));
    assert!(
        index
            .search(&SearchQuery::new("wombat"))
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        index.search(&SearchQuery::new("platypus")).unwrap().len(),
        1
    );
}

/// Where run `k` of [`damaged_store`] is: one of three days.
fn day_path(root: &Path, k: u32, run: &str) -> PathBuf {
    root.join(format!("2026/03/0{}/{run}.jsonl", 1 + k % 3))
}

/// A store of 40 run files with every kind of damage a line can have (invalid UTF-8, NUL
/// runs, lone surrogates, lines that are not JSON, torn last lines, an empty file, text past
/// the caps, the highlight markers), open and ended runs, an archive and a legacy snapshot.
fn damaged_store(root: &Path) {
    for k in 0..40u32 {
        let run = format!("{k:02}000000-0000-4000-8000-000000000000");
        let path = day_path(root, k, &run);
        let session = format!("s{}", k % 4);
        let mut b: Vec<u8> = Vec::new();
        let line = |b: &mut Vec<u8>, l: &str| {
            b.extend_from_slice(l.as_bytes());
            b.push(b'\n');
        };
        if k % 10 != 5 {
            line(&mut b, &header(&run, &session));
            line(
                &mut b,
                &start(
                    &run,
                    &format!("question {k} about the linker 全文検索"),
                    "2026-03-04T10:00:01.000Z",
                ),
            );
        }
        match k % 10 {
            0 => {
                let mut bad = event(&run, "text", "invalid XX byte").into_bytes();
                let i = bad.windows(2).position(|w| w == b"XX").unwrap();
                bad[i] = 0xff;
                b.extend_from_slice(&bad);
                b.push(b'\n');
            }
            1 => {
                b.extend_from_slice(&[0u8; 100]);
                line(&mut b, &event(&run, "reasoning", "after the nulls"));
            }
            2 => line(
                &mut b,
                &event(&run, "text", "lonely").replace("lonely", "lonely \\ud83c surrogate"),
            ),
            3 => line(&mut b, "{not json at all"),
            6 => line(&mut b, &output(&run, &"capacity ".repeat(10_000))),
            7 => line(
                &mut b,
                &event(&run, "text", "marks \u{E000}inside\u{E001} the text"),
            ),
            _ => {}
        }
        if k % 10 != 5 {
            line(
                &mut b,
                &output(&run, &format!("src/module_{k}.rs: ux-capacity")),
            );
            line(&mut b, &event(&run, "final", &format!("done with {k}")));
        }
        if k % 10 == 4 {
            // A torn last line: a record being written.
            b.extend_from_slice(&output(&run, "torn tail").as_bytes()[..30]);
        }
        if k % 2 == 0 && k % 10 != 4 {
            line(
                &mut b,
                &format!(
                    r#"{{"type":"run.end","run_id":"{run}","ts":"2026-03-04T10:00:09.000Z","outcome":"completed"}}"#
                ),
            );
        }
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, &b).unwrap();
        if k == 8 {
            session_jsonl::archive::compress_run(&path).unwrap();
        }
    }
    let session = "5e550000-0000-4000-8000-00000000000a";
    fs::create_dir_all(root.join("state")).unwrap();
    fs::write(
        root.join(format!("state/{session}.json")),
        format!(
            r#"{{"session_id":"{session}","updated_at":"2026-03-01T00:00:00.000Z","messages":[{{"role":"user","content":"hello"}},{{"role":"assistant","content":"quokka"}}]}}"#
        ),
    )
    .unwrap();
}

/// Everything `search.db` holds that does not depend on when the files were written: the
/// documents with their ids, in id order, and the files with how far they were indexed.
fn dump(root: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(root.join("search.db")).unwrap();
    let mut out = Vec::new();
    let mut docs = conn
        .prepare("SELECT id, file, byte_offset, kind, time_ms, text FROM docs ORDER BY id")
        .unwrap();
    let mut rows = docs.query([]).unwrap();
    while let Some(r) = rows.next().unwrap() {
        out.push(format!(
            "doc {} {} {} {} {:?} {:?}",
            r.get::<_, i64>(0).unwrap(),
            r.get::<_, String>(1).unwrap(),
            r.get::<_, i64>(2).unwrap(),
            r.get::<_, String>(3).unwrap(),
            r.get::<_, Option<i64>>(4).unwrap(),
            r.get::<_, String>(5).unwrap()
        ));
    }
    let mut files = conn
        .prepare(
            "SELECT path, run_id, session_id, workspace, indexed_to, next_line, file_size \
             FROM search_files ORDER BY path",
        )
        .unwrap();
    let mut rows = files.query([]).unwrap();
    while let Some(r) = rows.next().unwrap() {
        out.push(format!(
            "file {} {} {:?} {:?} {} {} {}",
            r.get::<_, String>(0).unwrap(),
            r.get::<_, String>(1).unwrap(),
            r.get::<_, Option<String>>(2).unwrap(),
            r.get::<_, Option<String>>(3).unwrap(),
            r.get::<_, i64>(4).unwrap(),
            r.get::<_, i64>(5).unwrap(),
            r.get::<_, i64>(6).unwrap()
        ));
    }
    out
}

/// A refresh on `threads` threads: its report (threads left out) and what it answers.
fn refresh_on(
    store: &StateStore,
    index: &SearchIndex,
    threads: usize,
) -> (SearchRefreshReport, Vec<Vec<HitRow>>) {
    store.index_runs().unwrap();
    let mut report = refresh_search_on(store, index, Some(threads)).unwrap();
    assert_eq!(report.reading_threads, threads, "{report:?}");
    report.reading_threads = 0;
    // The copies are in two directories: the failed files by name.
    for (p, _) in &mut report.failed {
        *p = p.file_name().unwrap().into();
    }
    let answers = [
        "linker",
        "nulls",
        "surrogate",
        "invalid",
        "ux-capacity",
        "検索",
        "quokka",
        "inside",
        "torn",
    ]
    .into_iter()
    .map(|w| {
        let mut q = SearchQuery::new(w);
        q.limit = 100;
        hits(index, q)
    })
    .collect();
    (report, answers)
}

#[test]
fn reading_on_workers_indexes_a_damaged_store_as_one_thread_does() {
    let (_a, one_root) = store();
    let (_b, many_root) = store();
    damaged_store(&one_root);
    damaged_store(&many_root);
    let one = (
        StateStore::open(&one_root).unwrap(),
        SearchIndex::open(&one_root).unwrap(),
    );
    let many = (
        StateStore::open(&many_root).unwrap(),
        SearchIndex::open(&many_root).unwrap(),
    );
    let first = refresh_on(&one.0, &one.1, 1);
    assert_eq!(first, refresh_on(&many.0, &many.1, 3));
    assert_eq!(first.0.files_read, 37, "{:?}", first.0);
    assert!(first.0.failed.is_empty(), "{:?}", first.0);
    // Every word is found but that of the torn last lines, which wait for their newline.
    let found = |answers: &[Vec<_>]| answers.iter().map(|a| !a.is_empty()).collect::<Vec<_>>();
    let mut all = vec![true; 9];
    all[8] = false;
    assert_eq!(found(&first.1), all);
    let docs = dump(&one_root);
    assert!(docs.len() > 150, "{}", docs.len());
    assert_eq!(docs, dump(&many_root));

    // The same lines appended to both copies (torn tails completed, open runs grown): read on
    // from where each file's indexing stopped, the same documents with the same ids.
    for root in [&one_root, &many_root] {
        for k in (0..40u32).filter(|k| k % 10 == 4 || (k % 2 == 1 && k % 10 != 5)) {
            let run = format!("{k:02}000000-0000-4000-8000-000000000000");
            let path = day_path(root, k, &run);
            let mut f = fs::OpenOptions::new().append(true).open(&path).unwrap();
            if k % 10 == 4 {
                f.write_all(&output(&run, "torn tail").as_bytes()[30..])
                    .unwrap();
                f.write_all(b"\n").unwrap();
            }
            writeln!(f, "{}", event(&run, "text", &format!("later words {k}"))).unwrap();
        }
    }
    let second = refresh_on(&one.0, &one.1, 1);
    assert_eq!(second, refresh_on(&many.0, &many.1, 3));
    assert_eq!(second.0.files_read, 20, "{:?}", second.0);
    assert_eq!(found(&second.1), vec![true; 9]);
    assert_eq!(dump(&one_root), dump(&many_root));
}
