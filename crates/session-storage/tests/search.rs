//! The local backend's `RunSearch`: over `search.db` as last refreshed, a typed
//! `SearchUnavailable` before there is one, typed syntax errors, hits mapped with their run,
//! offset, kind, snippet and score.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use session_state::{IndexedFile, SearchDoc, SearchIndex};
use session_storage::local::LocalBackend;
use session_storage::{
    HIGHLIGHT_END, HIGHLIGHT_START, RunCatalogue, RunSearch, RunSearchQuery, SearchMatch,
    StorageError,
};

const RUN: &str = "8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a";

#[test]
fn local_search_is_unavailable_until_indexed_then_maps_hits() {
    let dir = tempfile::tempdir().unwrap();
    let backend = LocalBackend::open(dir.path()).unwrap();
    let header = format!(
        "{{\"type\":\"header\",\"schema_version\":1,\"run_id\":\"{RUN}\",\"session_id\":\"s1\",\"started_at\":\"2026-02-03T12:00:00.123Z\"}}\n"
    );
    backend.append_lines(RUN, 0, header.as_bytes()).unwrap();
    match backend.search(&RunSearchQuery::new("planner")) {
        Err(StorageError::SearchUnavailable { backend, reason }) => {
            assert_eq!(backend, "local");
            assert!(reason.contains("search.db"), "{reason}");
        }
        other => panic!("expected SearchUnavailable, got {other:?}"),
    }

    backend.state_store().index_runs().unwrap();
    let index = SearchIndex::open(dir.path()).unwrap();
    let plan = index.plan(backend.state_store()).unwrap();
    assert_eq!(plan.work.len(), 1);
    let docs = [
        SearchDoc {
            byte_offset: 0,
            kind: "user",
            text: "fix the planner limit".into(),
            time_ms: Some(1_770_120_000_123),
        },
        SearchDoc {
            byte_offset: 0,
            kind: "final",
            text: "the splannerx is fixed".into(),
            time_ms: Some(1_770_120_000_123),
        },
    ];
    index
        .apply_many(&[IndexedFile {
            work: &plan.work[0],
            docs: &docs,
            indexed_to: header.len() as u64,
            next_line: 2,
        }])
        .unwrap();

    let hits = backend.search(&RunSearchQuery::new("planner")).unwrap();
    let got: Vec<(&str, u64, &str, SearchMatch, String)> = hits
        .iter()
        .map(|h| {
            (
                h.run_id.as_str(),
                h.byte_offset,
                h.kind.as_str(),
                h.matched_by,
                h.snippet
                    .replace(HIGHLIGHT_START, "[")
                    .replace(HIGHLIGHT_END, "]"),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (
                RUN,
                0,
                "user",
                SearchMatch::Words,
                "fix the [planner] limit".to_owned()
            ),
            (
                RUN,
                0,
                "final",
                SearchMatch::Substring,
                "the s[planner]x is fixed".to_owned()
            ),
        ]
    );
    assert!(hits[0].score > 0.0, "BM25 negated: higher is better");
    assert_eq!(hits[1].score, 0.0);
    assert_eq!(hits[0].session_id.as_deref(), Some("s1"));
    assert_eq!(hits[0].location, format!("2026/02/03/{RUN}.jsonl"));

    let mut q = RunSearchQuery::new("planner AND (");
    q.native_syntax = true;
    assert!(matches!(
        backend.search(&q),
        Err(StorageError::InvalidSearchQuery { .. })
    ));
    // Plain text is quoted: no syntax error.
    assert!(backend.search(&RunSearchQuery::new("ux-capac (")).is_ok());
}
