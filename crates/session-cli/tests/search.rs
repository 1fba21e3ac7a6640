//! `sessions search` and `show --at` on a copy of the sample store: exact hits (ranking,
//! grouping, snippets, kinds, Japanese substrings), quoting of raw text, expert syntax, the
//! search index kept up to date by appends, rebuilt by `reindex --search`, emptied by `gc`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::sample_store;

use std::io::Write as _;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

const RUN_102: &str = "7a1e0001-0000-4000-8000-000000000102";
const FILE_102: &str = "2026/11/24/7a1e0001-0000-4000-8000-000000000102.jsonl";
const OPEN_RUN: &str = "7a1e0006-0000-4000-8000-000000000601";
const OPEN_FILE: &str = "2026/11/29/7a1e0006-0000-4000-8000-000000000601.jsonl";

fn sessions(root: &Path, args: &[&str]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_sessions"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", "/nonexistent-home")
        .env("TZ", "UTC")
        .arg("--root")
        .arg(root)
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8(o.stdout).unwrap(),
        String::from_utf8(o.stderr).unwrap(),
    )
}

fn json_hits(root: &Path, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["search"];
    all.extend_from_slice(args);
    all.push("--json");
    let (code, out, err) = sessions(root, &all);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `(run_id, byte_offset, kind)` of each hit.
fn keys(hits: &[Value]) -> Vec<(String, u64, String)> {
    hits.iter()
        .map(|h| {
            (
                h["run_id"].as_str().unwrap().to_owned(),
                h["byte_offset"].as_u64().unwrap(),
                h["kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn ranked_hits_grouped_per_run_with_highlighted_snippets() {
    let s = sample_store();
    let (code, out, err) = sessions(&s.root, &["search", "package", "--limit", "3", "--utc"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "\
7a1e0003-0000-4000-8000-000000000301  session 5a1e0003-0000-4000-8000-000000000003  2026/11/26/7a1e0003-0000-4000-8000-000000000301.jsonl
  @1279     user        2026-11-26 08:30:00Z
    Summarize [package].json.

7a1e0003-0000-4000-8000-000000000302  session 5a1e0003-0000-4000-8000-000000000003  2026/11/26/7a1e0003-0000-4000-8000-000000000302.jsonl
  @3240     final       2026-11-26 08:31:16Z
    [package].json declares acme-app 0.3.1 with a `start` script (`node src/index.js…

7a1e0001-0000-4000-8000-000000000102  session 5a1e0001-0000-4000-8000-000000000001  2026/11/24/7a1e0001-0000-4000-8000-000000000102.jsonl
  @4460     tool-output 2026-11-24 09:14:42Z
    ls; cat CHANGELOG.md⏎AGENTS.md⏎README.md⏎docs⏎[package].json⏎src⏎⏎cat: CHANGELOG.md: No…

3 hit(s) in 3 run(s); `sessions show RUN --at OFFSET` opens a transcript at a hit
"
    );
    // Four hits in all; the fourth is in run 102 again and is listed under it.
    let hits = json_hits(&s.root, &["package"]);
    assert_eq!(
        keys(&hits),
        vec![
            (
                "7a1e0003-0000-4000-8000-000000000301".into(),
                1279,
                "user".into()
            ),
            (
                "7a1e0003-0000-4000-8000-000000000302".into(),
                3240,
                "final".into()
            ),
            (RUN_102.into(), 4460, "tool_output".into()),
            (RUN_102.into(), 10046, "final".into()),
        ]
    );
    assert_eq!(hits[0]["snippet"], "Summarize package.json.");
    assert_eq!(hits[0]["highlights"], serde_json::json!([[10, 17]]));
    assert_eq!(hits[0]["time"], "2026-11-26T08:30:00.300Z");
    assert_eq!(
        hits[0]["session_id"],
        "5a1e0003-0000-4000-8000-000000000003"
    );
    assert_eq!(hits[0]["matched_by"], "words");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(s.root.join("search.db"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}

#[test]
fn kinds_sessions_and_times_filter() {
    let s = sample_store();
    assert_eq!(
        keys(&json_hits(&s.root, &["package", "--kind", "final"])),
        vec![
            (
                "7a1e0003-0000-4000-8000-000000000302".into(),
                3240,
                "final".into()
            ),
            (RUN_102.into(), 10046, "final".into()),
        ]
    );
    assert_eq!(
        keys(&json_hits(
            &s.root,
            &["package", "--kind", "user", "--kind", "tool-output"]
        )),
        vec![
            (
                "7a1e0003-0000-4000-8000-000000000301".into(),
                1279,
                "user".into()
            ),
            (RUN_102.into(), 4460, "tool_output".into()),
        ]
    );
    assert_eq!(
        keys(&json_hits(
            &s.root,
            &[
                "package",
                "--session",
                "5a1e0001-0000-4000-8000-000000000001"
            ]
        )),
        vec![
            (RUN_102.into(), 4460, "tool_output".into()),
            (RUN_102.into(), 10046, "final".into())
        ]
    );
    assert_eq!(
        keys(&json_hits(
            &s.root,
            &["package", "--since", "2026-11-26T08:31:00Z"]
        )),
        vec![(
            "7a1e0003-0000-4000-8000-000000000302".into(),
            3240,
            "final".into()
        )]
    );
    assert_eq!(
        keys(&json_hits(
            &s.root,
            &["package", "--until", "2026-11-24T09:14:43Z"]
        )),
        vec![(RUN_102.into(), 4460, "tool_output".into())]
    );
}

#[test]
fn a_japanese_phrase_inside_a_longer_word_is_found_and_opened() {
    let s = sample_store();
    let hits = json_hits(&s.root, &["メッセージ"]);
    assert_eq!(
        keys(&hits),
        vec![(RUN_102.into(), 5997, "tool_output".into())]
    );
    assert_eq!(hits[0]["file"], FILE_102);
    // Cut around the match, 32 characters on each side.
    assert_eq!(
        hits[0]["snippet"],
        "…リースノート 0.3.1\n    2  \n    3  - 挨拶メッセージを改善しました 🎉\n    4  - `slugify` を追加…"
    );
    assert_eq!(hits[0]["highlights"], serde_json::json!([[33, 38]]));
    assert_eq!(hits[0]["matched_by"], "substring");
    // The record at that offset is the start of `show --at`.
    let (code, out, err) = sessions(&s.root, &["show", RUN_102, "--at", "5997", "--utc"]);
    assert_eq!(code, 0, "{err}");
    let body: Vec<&str> = out.lines().skip_while(|l| !l.is_empty()).skip(1).collect();
    assert!(body[0].starts_with("09:14:42 tool result"), "{out}");
    assert!(out.contains("挨拶メッセージを改善しました"), "{out}");
    assert!(!out.contains("Summarize"), "{out}");
    // Two characters, too short for trigrams, inside the same longer word: found by the scan.
    let hits = json_hits(&s.root, &["挨拶"]);
    assert_eq!(
        keys(&hits),
        vec![(RUN_102.into(), 5997, "tool_output".into())]
    );
    assert_eq!(hits[0]["matched_by"], "substring");
    let snippet = hits[0]["snippet"].as_str().unwrap();
    let at = snippet.find("挨拶メッセージ").unwrap();
    let start = snippet[..at].chars().count();
    assert_eq!(
        hits[0]["highlights"],
        serde_json::json!([[start, start + 2]])
    );
}

#[test]
fn show_at_an_offset_where_no_record_starts_is_not_found() {
    let s = sample_store();
    let (code, _, err) = sessions(&s.root, &["show", RUN_102, "--at", "5998"]);
    assert_eq!(code, 3);
    assert_eq!(
        err,
        format!(
            "sessions: no record of run {RUN_102} starts at byte offset 5998 (the record before it starts at 5997)\n"
        )
    );
    let (code, _, err) = sessions(
        &s.root,
        &["show", "5a1e0001-0000-4000-8000-000000000001", "--at", "0"],
    );
    assert_eq!(code, 2, "{err}");
}

#[test]
fn raw_text_is_quoted_and_fts_syntax_is_opt_in() {
    let s = sample_store();
    // Operators and punctuation in plain text are text: no syntax error, exit 0.
    for q in ["ux-capac", "\"unbalanced", "qqq NOT", "a:b", "(x", "*"] {
        let (code, out, err) = sessions(&s.root, &["search", q]);
        assert_eq!((code, out.as_str()), (0, "no matches\n"), "{q}: {err}");
    }
    // Expert syntax: prefix and OR.
    assert_eq!(
        keys(&json_hits(&s.root, &["--fts", "summar* OR acme"])).len(),
        keys(&json_hits(&s.root, &["--fts", "summar*"])).len()
            + keys(&json_hits(&s.root, &["acme"])).len()
    );
    let (code, _, err) = sessions(&s.root, &["search", "--fts", "\"unbalanced"]);
    assert_eq!(code, 2);
    assert_eq!(
        err,
        "sessions: search query \"\\\"unbalanced\" is not valid FTS5 syntax: unterminated string\n"
    );
}

#[test]
fn appended_records_are_found_by_the_next_search_and_reindex_rebuilds() {
    let s = sample_store();
    assert_eq!(json_hits(&s.root, &["zanzibar"]).len(), 0);
    // A run without run.end yet: the run index watches it for appends.
    let path = s.root.join(OPEN_FILE);
    let size = std::fs::metadata(&path).unwrap().len();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    writeln!(
        f,
        r#"{{"type":"x.acme.note","run_id":"{OPEN_RUN}","ts":"2026-11-24T09:14:45.000Z"}}"#
    )
    .unwrap();
    let offset = std::fs::metadata(&path).unwrap().len();
    writeln!(
        f,
        r#"{{"type":"agent.event","run_id":"{OPEN_RUN}","ts":"2026-11-24T09:14:46.000Z","seq":9,"event":{{"type":"text","content":"zanzibar appended"}}}}"#
    )
    .unwrap();
    drop(f);
    assert!(offset > size);
    let hits = json_hits(&s.root, &["zanzibar"]);
    assert_eq!(
        keys(&hits),
        vec![(OPEN_RUN.into(), offset, "assistant".into())]
    );

    let (code, out, err) = sessions(&s.root, &["reindex", "--search"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.ends_with("rebuilt the search index: 31 document(s) from 11 run file(s)\n"),
        "{out}"
    );
    assert_eq!(keys(&json_hits(&s.root, &["zanzibar"])), keys(&hits));
    // Deleting search.db loses nothing: the next search builds it again.
    std::fs::remove_file(s.root.join("search.db")).unwrap();
    let _ = std::fs::remove_file(s.root.join("search.db-wal"));
    let _ = std::fs::remove_file(s.root.join("search.db-shm"));
    assert_eq!(keys(&json_hits(&s.root, &["zanzibar"])), keys(&hits));
}

#[test]
fn gc_removes_the_documents_of_the_runs_it_moves() {
    let s = sample_store();
    assert_eq!(json_hits(&s.root, &["package"]).len(), 4);
    let (code, _, err) = sessions(&s.root, &["gc", "--older-than", "1d"]);
    assert_eq!(code, 0, "{err}");
    // Read-only: the index as gc left it, no refresh in between.
    let (code, out, err) = sessions(&s.root, &["--read-only", "search", "package", "--json"]);
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
}

#[test]
fn a_read_only_store_without_a_search_index_says_so() {
    let s = sample_store();
    let (code, _, err) = sessions(&s.root, &["--read-only", "search", "package"]);
    assert_eq!(code, 3);
    assert!(err.contains("no search index at "), "{err}");
    assert!(!s.root.join("search.db").exists());
}

#[test]
fn saved_messages_of_a_session_no_run_log_holds_are_searched() {
    let s = sample_store();
    const SESSION_7: &str = "5a1e0007-0000-4000-8000-000000000007";
    // With its run, the session's text is found in the run log only.
    let hits = json_hits(&s.root, &["domain"]);
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0]["run_id"], "7a1e0007-0000-4000-8000-000000000701");
    // Without it, in the saved messages: the assistant's line, keyed by its byte offset.
    std::fs::remove_file(
        s.root
            .join("2026/10/20/7a1e0007-0000-4000-8000-000000000701.jsonl"),
    )
    .unwrap();
    let messages =
        std::fs::read_to_string(s.root.join(format!("messages/{SESSION_7}.jsonl"))).unwrap();
    let second = messages.find('\n').unwrap() as u64 + 1;
    let hits = json_hits(&s.root, &["domain"]);
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0]["run_id"], Value::Null);
    assert_eq!(hits[0]["session_id"], SESSION_7);
    assert_eq!(hits[0]["file"], format!("messages/{SESSION_7}.jsonl"));
    assert_eq!(hits[0]["byte_offset"], second);
    assert_eq!(hits[0]["kind"], "assistant");
    assert_eq!(hits[0]["time"], Value::Null);
    assert_eq!(json_hits(&s.root, &["todo", "--kind", "user"]).len(), 1);
    let (code, out, err) = sessions(&s.root, &["search", "domain"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with(&format!(
            "saved messages  session {SESSION_7}  messages/{SESSION_7}.jsonl\n"
        )),
        "{out}"
    );
}

#[test]
fn session_titles_are_searched_too() {
    let s = sample_store();
    let sid = "5a1e0003-0000-4000-8000-000000000003";
    let (code, _, err) = sessions(&s.root, &["name", sid, "Release Notes draft"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = sessions(&s.root, &["search", "notes", "release"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with(&format!("session {sid}  titled \"Release Notes draft\"\n")),
        "{out}"
    );
    // Every word must be in the title; filters on records leave titles out.
    let (_, out, _) = sessions(&s.root, &["search", "notes", "final", "--json"]);
    assert!(!out.contains("title_hit"), "{out}");
    let (_, out, _) = sessions(&s.root, &["search", "release", "--kind", "user", "--json"]);
    assert!(!out.contains("title_hit"), "{out}");
    let (_, out, _) = sessions(&s.root, &["search", "RELEASE", "--json"]);
    let first: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(first["type"], "title_hit");
    assert_eq!(first["session_id"], sid);
    assert_eq!(first["pinned"], false);
}

#[test]
fn saved_messages_of_the_reference_data_are_found_and_go_with_a_deleted_session() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    common::copy_tree(&session_test_support::codelia_sessions_dir(), &root);
    // The reference runtime's one session with saved messages and no run log.
    const LEGACY: &str = "5d0c6f1e-2a7b-4c3d-8e9f-0a1b2c3d4e5f";
    let file = format!("messages/{LEGACY}.jsonl");
    let first_line = std::fs::read_to_string(root.join(&file))
        .unwrap()
        .find('\n')
        .unwrap() as u64;
    let hits = json_hits(&root, &["node --test", "repository"]);
    let row = |h: &Value| {
        (
            h["run_id"].clone(),
            h["session_id"].as_str().unwrap().to_owned(),
            h["file"].as_str().unwrap().to_owned(),
            h["byte_offset"].as_u64().unwrap(),
            h["kind"].as_str().unwrap().to_owned(),
        )
    };
    assert_eq!(
        hits.iter().map(row).collect::<Vec<_>>(),
        vec![(
            Value::Null,
            LEGACY.to_owned(),
            file.clone(),
            first_line + 1,
            "assistant".to_owned()
        )]
    );
    let hits = json_hits(&root, &["run", "the", "tests", "--kind", "user"]);
    assert!(
        hits.iter().any(|h| row(h)
            == (
                Value::Null,
                LEGACY.to_owned(),
                file.clone(),
                0,
                "user".to_owned()
            )),
        "{hits:?}"
    );
    // Deleted: its documents leave the search index with it (a read-only search, which
    // does not refresh the index, no longer finds them).
    let (code, _, err) = sessions(&root, &["delete", LEGACY]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = sessions(
        &root,
        &[
            "--read-only",
            "search",
            "node --test",
            "repository",
            "--json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "");
}

#[test]
fn legacy_snapshots_of_the_reference_data_are_found_until_migrated_or_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    common::copy_tree(&session_test_support::codelia_sessions_dir(), &root);
    // The reference runtime's session that only has a legacy snapshot: no state.db row, no
    // messages file, no run log.
    const SNAPSHOT: &str = "c0ffee00-1234-4abc-8def-00112233aabb";
    let file = format!("state/{SNAPSHOT}.json");
    let messages = format!("messages/{SNAPSHOT}.jsonl");
    let text = std::fs::read_to_string(root.join(&file)).unwrap();
    let row = |h: &Value| {
        (
            h["run_id"].clone(),
            h["session_id"].as_str().unwrap().to_owned(),
            h["file"].as_str().unwrap().to_owned(),
            h["byte_offset"].as_u64().unwrap(),
            h["kind"].as_str().unwrap().to_owned(),
        )
    };
    let found = |args: &[&str]| -> Vec<_> { json_hits(&root, args).iter().map(row).collect() };
    let hit = |file: &str, offset: u64, kind: &str| {
        (
            Value::Null,
            SNAPSHOT.to_owned(),
            file.to_owned(),
            offset,
            kind.to_owned(),
        )
    };
    let blue = found(&["blue", "square"]);
    assert_eq!(blue.len(), 1, "{blue:?}");
    assert_eq!(blue[0].2, file);
    assert_eq!(blue[0].4, "assistant");
    let user = found(&["screenshot", "--kind", "user"]);
    // After the system prompt's line (58 bytes, not indexed).
    assert_eq!(user, vec![hit(&file, 58, "user")]);
    // A substring (the trigram index) finds it too; the system prompt is not indexed.
    assert_eq!(found(&["creensho"]), user);
    assert_eq!(found(&["coding", "assistant"]), vec![]);
    // Changed in place: indexed again, whole.
    std::fs::write(root.join(&file), text.replace("blue square", "teal square")).unwrap();
    assert_eq!(found(&["blue", "square"]), vec![]);
    let teal = found(&["teal", "square"]);
    assert_eq!(teal, vec![hit(&file, blue[0].3, "assistant")]);
    // Migrated by `repair`: the snapshot stays on disk, but its session now has a row and a
    // messages file, which is what is indexed; each message keeps its byte offset (that of
    // its line in the messages file).
    let (code, _, err) = sessions(&root, &["repair"]);
    assert_eq!(code, 0, "{err}");
    assert!(root.join(&file).exists());
    let lines = std::fs::read_to_string(root.join(&messages)).unwrap();
    let at = lines.find("teal square").unwrap();
    let line_start = lines[..at].rfind('\n').map_or(0, |i| i + 1) as u64;
    assert_eq!(line_start, blue[0].3);
    assert_eq!(
        found(&["teal", "square"]),
        vec![hit(&messages, line_start, "assistant")]
    );
    assert_eq!(lines.find('\n'), Some(57));
    assert_eq!(
        found(&["screenshot", "--kind", "user"]),
        vec![hit(&messages, 58, "user")]
    );
    // Deleted: nothing of it is found.
    let (code, _, err) = sessions(&root, &["delete", SNAPSHOT]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(found(&["teal", "square"]), vec![]);
}

#[test]
fn a_deleted_legacy_only_session_leaves_the_search_index() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    common::copy_tree(&session_test_support::codelia_sessions_dir(), &root);
    const SNAPSHOT: &str = "c0ffee00-1234-4abc-8def-00112233aabb";
    assert_eq!(json_hits(&root, &["blue", "square"]).len(), 1);
    let (code, _, err) = sessions(&root, &["delete", SNAPSHOT]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json_hits(&root, &["blue", "square"]).len(), 0);
    // A snapshot removed by hand goes too.
    std::fs::write(
        root.join(format!("state/{SNAPSHOT}.json")),
        r#"{"session_id":"c0ffee00-1234-4abc-8def-00112233aabb","updated_at":"2026-09-28T11:00:00.000Z","messages":[{"role":"user","content":"violet hexagon"}]}"#,
    )
    .unwrap();
    let hits = json_hits(&root, &["violet"]);
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0]["byte_offset"], 0);
    assert_eq!(hits[0]["file"], format!("state/{SNAPSHOT}.json"));
    std::fs::remove_file(root.join(format!("state/{SNAPSHOT}.json"))).unwrap();
    assert_eq!(json_hits(&root, &["violet"]).len(), 0);
}

#[test]
fn help_states_the_ranking_window_and_the_short_word_scan() {
    let s = sample_store();
    let (code, out, _) = sessions(&s.root, &["search", "--help"]);
    assert_eq!(code, 0);
    let thousands = |n: i64| {
        let d = n.to_string();
        let mut out = String::new();
        for (i, c) in d.chars().enumerate() {
            if i > 0 && (d.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        out
    };
    let flat = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains(&format!(
            "the {} newest matches",
            thousands(session_state::RANK_WINDOW)
        )),
        "{out}"
    );
    assert!(
        flat.contains(&format!(
            "newest {} documents",
            thousands(session_state::SHORT_SCAN_WINDOW)
        )),
        "{out}"
    );
}
