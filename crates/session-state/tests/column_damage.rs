//! Values in `state.db` that are not what their column should hold — the reference's lone
//! surrogates written as invalid UTF-8, BLOBs, NULLs, numbers of the wrong kind — in the
//! reference's table and in ours: listing, loading, saving and the run index keep going and
//! report each one as a `ColumnDamage` naming table, column and row.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::msg;

use std::fs;
use std::path::Path;

use rusqlite::Connection;
use session_schema::{SessionState, Timestamp};
use session_state::{
    ColumnDamage, ColumnDamageKind, ListQuery, MessageDamageKind, RunQuery, SaveMode, StateStore,
};

const ID: &str = "f6d2c6d5-4a12-4cc4-bbc9-9a0c0d2b5af1";

fn state(n: usize) -> SessionState {
    SessionState {
        schema_version: Some(1i64.into()),
        session_id: ID.to_owned(),
        updated_at: Timestamp::from_raw("2026-11-30T10:00:00.000Z"),
        run_id: Some("run-a".to_owned()),
        invoke_seq: Some(3),
        messages: (0..n)
            .map(|i| {
                msg(
                    if i % 2 == 0 { "user" } else { "assistant" },
                    &format!("m{i}"),
                )
            })
            .collect(),
        ..Default::default()
    }
}

/// A store holding one session saved by us, then `sql` run on its database.
fn store_with(sql: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    StateStore::open(dir.path())
        .unwrap()
        .save(&state(2))
        .unwrap();
    Connection::open(dir.path().join("state.db"))
        .unwrap()
        .execute_batch(sql)
        .unwrap();
    dir
}

/// A `ColumnDamage` as `(table, column, row, kind)`.
type Found = (&'static str, &'static str, String, ColumnDamageKind);

fn damage(table: &'static str, column: &'static str, row: &str, kind: ColumnDamageKind) -> Found {
    (table, column, row.to_owned(), kind)
}

fn found(d: &ColumnDamage) -> Found {
    (d.table, d.column, d.row.clone(), d.kind.clone())
}

fn utf8(bytes: u64) -> ColumnDamageKind {
    ColumnDamageKind::InvalidUtf8 { bytes }
}

fn column_damage(loaded: &session_state::LoadedSession) -> Vec<Found> {
    loaded
        .damage
        .iter()
        .filter_map(|d| match &d.kind {
            MessageDamageKind::Column(c) => Some(found(c)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_lone_surrogate_in_last_user_message_lists_with_u_fffd_and_is_reported() {
    // `hi ` + ED A0 BC: the reference's `last_user_message` of a cut emoji.
    let dir = store_with(&format!(
        "UPDATE session_state SET last_user_message = CAST(X'686920EDA0BC' AS TEXT), \
         run_id = CAST(X'72756E2DEDA0BC' AS TEXT) WHERE session_id = '{ID}'"
    ));
    let store = StateStore::open(dir.path()).unwrap();
    let page = store.list(&ListQuery::all()).unwrap();
    assert_eq!(page.entries.len(), 1);
    let summary = &page.entries[0].summary;
    assert_eq!(
        summary.last_user_message.as_deref(),
        Some("hi \u{FFFD}\u{FFFD}\u{FFFD}")
    );
    assert_eq!(
        summary.run_id.as_deref(),
        Some("run-\u{FFFD}\u{FFFD}\u{FFFD}")
    );
    assert_eq!(summary.message_count, Some(2));
    let listed: Vec<Found> = page
        .diagnostics
        .iter()
        .map(|d| found(d.column.as_ref().unwrap()))
        .collect();
    assert_eq!(
        listed,
        vec![
            damage("session_state", "run_id", ID, utf8(3)),
            damage("session_state", "last_user_message", ID, utf8(3)),
        ]
    );
    assert_eq!(page.diagnostics[1].path, dir.path().join("state.db"));
    assert_eq!(
        page.diagnostics[1].detail,
        format!(
            "session_state.last_user_message of session \"{ID}\": text is not UTF-8 (3 invalid byte(s) replaced with U+FFFD)"
        )
    );

    // load: the messages and the decoded run id, with the same two reports.
    let loaded = store.load(ID).unwrap().unwrap();
    assert_eq!(loaded.state.messages, state(2).messages);
    assert_eq!(
        loaded.state.run_id.as_deref(),
        Some("run-\u{FFFD}\u{FFFD}\u{FFFD}")
    );
    assert_eq!(column_damage(&loaded), listed);
    assert!(loaded.damage.iter().all(|d| d.kept && d.line.is_none()));

    // save: appends after the stored lines; the row is written back as valid text.
    let mut next = loaded.state.clone();
    next.messages.push(msg("user", "more"));
    let report = store.save_expecting(&next, loaded.generation).unwrap();
    assert_eq!(report.mode, SaveMode::Appended { messages: 1 });
    let again = store.load(ID).unwrap().unwrap();
    assert_eq!(again.state.messages, next.messages);
    assert!(again.damage.is_empty(), "{:?}", again.damage);
    let page = store.list(&ListQuery::all()).unwrap();
    assert!(page.diagnostics.is_empty());
    assert_eq!(
        page.entries[0].summary.last_user_message.as_deref(),
        Some("more")
    );
}

#[test]
fn blobs_nulls_and_numbers_of_the_wrong_kind_in_the_session_row_are_reported() {
    let dir = store_with(&format!(
        "UPDATE session_state SET updated_at = X'32303236', invoke_seq = 'seven', \
         schema_version = 1.5, message_count = 9223372036854775808, meta_json = X'7B7D', \
         workspace_root = X'2F72' WHERE session_id = '{ID}'"
    ));
    let store = StateStore::open(dir.path()).unwrap();
    let page = store.list(&ListQuery::all()).unwrap();
    let s = &page.entries[0].summary;
    assert_eq!(s.updated_at.as_str(), "2026");
    assert_eq!(s.message_count, None);
    assert_eq!(s.workspace_root.as_deref(), Some("/r"));
    let wrong = |found: &str| ColumnDamageKind::WrongType {
        found: found.to_owned(),
    };
    let loaded = store.load(ID).unwrap().unwrap();
    assert_eq!(loaded.state.messages, state(2).messages);
    assert_eq!(loaded.state.updated_at.as_str(), "2026");
    assert_eq!(loaded.state.invoke_seq, None);
    assert_eq!(loaded.state.meta, None);
    assert_eq!(
        column_damage(&loaded),
        vec![
            damage("session_state", "updated_at", ID, wrong("BLOB of 4 bytes")),
            damage("session_state", "invoke_seq", ID, wrong("TEXT \"seven\"")),
            damage("session_state", "schema_version", ID, wrong("REAL 1.5")),
            damage("session_state", "meta_json", ID, wrong("BLOB of 2 bytes")),
            damage(
                "session_state",
                "message_count",
                ID,
                wrong("REAL 9223372036854776000")
            ),
            damage(
                "session_state",
                "workspace_root",
                ID,
                wrong("BLOB of 2 bytes")
            ),
        ]
    );
    // The listing reports the columns it shows.
    let listed: Vec<&str> = page
        .diagnostics
        .iter()
        .map(|d| d.column.as_ref().unwrap().column)
        .collect();
    assert_eq!(listed, ["updated_at", "message_count", "workspace_root"]);
    // And a save repairs the row.
    let mut next = loaded.state.clone();
    next.messages.push(msg("assistant", "ok"));
    store.save(&next).unwrap();
    assert!(store.load(ID).unwrap().unwrap().damage.is_empty());
}

#[test]
fn unreadable_bookkeeping_is_reported_and_rewritten_by_the_next_save() {
    let dir = store_with(&format!(
        "UPDATE session_files SET file_len = 'x', pending_file = X'00FF' WHERE session_id = '{ID}'"
    ));
    let store = StateStore::open(dir.path()).unwrap();
    // `open` found the bookkeeping of a pending rewrite unreadable and said so.
    assert_eq!(
        store
            .recovery()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        [
            format!("session_files.file_len of session \"{ID}\": unexpected value TEXT \"x\""),
            format!(
                "session_files.pending_file of session \"{ID}\": unexpected value BLOB of 2 bytes"
            ),
        ]
    );
    let loaded = store.load(ID).unwrap().unwrap();
    // The messages file is read whole, as for a row the reference wrote.
    assert_eq!(loaded.state.messages, state(2).messages);
    let reported: Vec<(&str, &str)> = column_damage(&loaded).iter().map(|d| (d.0, d.1)).collect();
    assert_eq!(
        reported,
        [
            ("session_files", "file_len"),
            ("session_files", "pending_file")
        ]
    );
    let mut next = loaded.state.clone();
    next.messages.push(msg("user", "third"));
    assert_eq!(
        store.save_expecting(&next, loaded.generation).unwrap().mode,
        SaveMode::Appended { messages: 1 }
    );
    let again = store.load(ID).unwrap().unwrap();
    assert_eq!(again.state.messages, next.messages);
    assert!(again.damage.is_empty(), "{:?}", again.damage);
}

#[test]
fn a_session_id_that_is_not_utf8_is_listed_decoded_and_reported() {
    let dir = store_with(
        "INSERT INTO session_state (session_id, updated_at, schema_version, message_count) \
         VALUES (CAST(X'61EDA0BC' AS TEXT), '2026-12-01T00:00:00.000Z', 1, 0);",
    );
    let store = StateStore::open(dir.path()).unwrap();
    let page = store.list(&ListQuery::all()).unwrap();
    let ids: Vec<&str> = page
        .entries
        .iter()
        .map(|e| e.summary.session_id.as_str())
        .collect();
    assert_eq!(ids, ["a\u{FFFD}\u{FFFD}\u{FFFD}", ID]);
    assert_eq!(
        page.diagnostics
            .iter()
            .map(|d| found(d.column.as_ref().unwrap()))
            .collect::<Vec<_>>(),
        vec![damage(
            "session_state",
            "session_id",
            "a\u{FFFD}\u{FFFD}\u{FFFD}",
            utf8(3)
        )]
    );
    // The other session is untouched.
    assert_eq!(
        store.load(ID).unwrap().unwrap().state.messages,
        state(2).messages
    );
}

/// A completed run of session `ID` in `day`, its file and directory dated an hour back (so
/// that no refresh takes them for files that may still change).
fn write_run(root: &Path, day: &str, run_id: &str) {
    let dir = root.join(day);
    fs::create_dir_all(&dir).unwrap();
    let date = day.replace('/', "-");
    let body = format!(
        "{{\"type\":\"header\",\"schema_version\":1,\"run_id\":\"{run_id}\",\"session_id\":\"{ID}\",\"started_at\":\"{date}T10:00:00.000Z\"}}\n\
         {{\"type\":\"run.end\",\"run_id\":\"{run_id}\",\"ts\":\"{date}T10:01:00.000Z\",\"outcome\":\"completed\"}}\n"
    );
    let file = dir.join(format!("{run_id}.jsonl"));
    fs::write(&file, body).unwrap();
    let past = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    for p in [&file, &dir] {
        fs::File::open(p).unwrap().set_modified(past).unwrap();
    }
}

const RUN_A: &str = "7a000000-0000-4000-8000-00000000000a";
const RUN_B: &str = "7a000000-0000-4000-8000-00000000000b";

fn tables_and_columns(damage: &[ColumnDamage]) -> Vec<(&str, &str)> {
    let mut out: Vec<(&str, &str)> = damage.iter().map(|d| (d.table, d.column)).collect();
    out.sort();
    out
}

#[test]
fn damaged_rows_of_the_run_index_are_reported_dropped_and_indexed_again() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_run(root, "2026/03/04", RUN_A);
    write_run(root, "2026/03/05", RUN_B);
    let store = StateStore::open(root).unwrap();
    store.index_runs().unwrap();
    let clean = store.list_runs(&RunQuery::default()).unwrap().runs;
    assert_eq!(clean.len(), 2);
    drop(store);
    // Run A: a BLOB outcome and a lone surrogate in its input; run B: a REAL size; a copy of
    // B's row under a path that is not UTF-8 and a row whose path is a BLOB; a REAL mtime of
    // B's directory; a BLOB in the watch list.
    let conn = Connection::open(root.join("state.db")).unwrap();
    conn.execute_batch(&format!(
        "UPDATE runs SET outcome = X'FF', first_input = CAST(X'68EDA0BC' AS TEXT) WHERE run_id = '{RUN_A}';
         UPDATE runs SET file_size = 1.5 WHERE run_id = '{RUN_B}';
         INSERT INTO runs SELECT CAST(X'323032362F30332F30342FEDA0BC2E6A736F6E6C' AS TEXT), run_id,
             session_id, started_at, model_provider, model_name, outcome, last_status,
             record_count, invocation_count, input_tokens, cached_input_tokens,
             cache_creation_tokens, output_tokens, total_tokens, file_size, mtime_ns,
             first_input, workspace_root, damage_count, last_ts, compressed, started_at_utc, diagnostic, partial
             FROM runs WHERE run_id = '{RUN_B}';
         INSERT INTO runs (path, run_id, outcome, record_count, invocation_count, input_tokens,
             cached_input_tokens, cache_creation_tokens, output_tokens, total_tokens, file_size,
             mtime_ns, damage_count, compressed)
             VALUES (X'0102', 'blob', 'open', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
         UPDATE run_dirs SET mtime_ns = 2.5 WHERE path = '2026/03/05/';
         INSERT INTO run_watch (path) VALUES (X'FF');"
    ))
    .unwrap();
    drop(conn);
    let store = StateStore::open(root).unwrap();
    // The index as it is: every row listed, each with its damage.
    let runs = store.list_runs(&RunQuery::default()).unwrap().runs;
    // One row per run id: the planted copy of B is one of its files, not a row of its own.
    assert_eq!(runs.len(), 3);
    let a_path = root.join("2026/03/04").join(format!("{RUN_A}.jsonl"));
    let a = runs.iter().find(|r| r.path == a_path).unwrap();
    assert_eq!(a.first_input.as_deref(), Some("h\u{FFFD}\u{FFFD}\u{FFFD}"));
    assert_eq!(
        a.column_damage.iter().map(found).collect::<Vec<_>>(),
        vec![
            damage(
                "runs",
                "outcome",
                &format!("2026/03/04/{RUN_A}.jsonl"),
                ColumnDamageKind::WrongType {
                    found: "BLOB of 1 bytes".into()
                }
            ),
            damage(
                "runs",
                "first_input",
                &format!("2026/03/04/{RUN_A}.jsonl"),
                utf8(3)
            ),
        ]
    );
    // A refresh drops every damaged row it reads: the directory record, the watch entry,
    // B's row (its directory is listed again and B read again) and the BLOB path.
    let report = store.index_runs().unwrap();
    assert_eq!(
        tables_and_columns(&report.column_damage),
        [
            ("run_dirs", "mtime_ns"),
            ("run_watch", "path"),
            ("runs", "file_size"),
            ("runs", "path"),
        ]
    );
    assert_eq!(report.added, 1);
    // Rows under a directory that did not change are not read by a refresh (that is what
    // keeps it cheap): they are listed with their damage until `reindex` rebuilds them.
    let runs = store.list_runs(&RunQuery::default()).unwrap().runs;
    let damaged: Vec<Vec<(&str, &str)>> = runs
        .iter()
        .map(|r| tables_and_columns(&r.column_damage))
        .filter(|d| !d.is_empty())
        .collect();
    assert_eq!(
        damaged,
        [
            // The copy of B's row (with B's REAL size) under a path that is not UTF-8.
            vec![("runs", "file_size"), ("runs", "path")],
            vec![("runs", "first_input"), ("runs", "outcome")]
        ]
    );
    let report = store.reindex().unwrap();
    let changes: Vec<String> = report.changes.iter().map(|c| format!("{c:?}")).collect();
    assert_eq!(changes.len(), 2, "{changes:?}");
    assert_eq!(store.list_runs(&RunQuery::default()).unwrap().runs, clean);
    assert!(store.index_runs().unwrap().column_damage.is_empty());
    assert!(store.reindex().unwrap().changes.is_empty());
}
