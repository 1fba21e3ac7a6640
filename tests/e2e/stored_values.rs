//! Whatever another program leaves in `state.db` — text that is not UTF-8 (the reference's
//! lone surrogates), BLOBs, NULLs, huge integers, reals — in any column of the reference's
//! `session_state` or of our own tables, the library (open, list, load, save, the run index
//! refresh, reindex) and every reading command of the CLI keep going: a result, an error or a
//! damage report naming the table and column, never a panic.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use proptest::prelude::*;
use rusqlite::types::{ToSql, ToSqlOutput, ValueRef};
use session_schema::{SessionState, Timestamp};
use session_state::{FaultPoint, ListQuery, MessageDamageKind, RunQuery, StateStore, StoreOptions};

use crate::support::{copy_tree, msg, sessions, user_msg};

const NOW: &str = "2026-11-30T12:00:00Z";
const S1: &str = "5e55e55e-0000-4000-8000-000000000001";
const S2: &str = "5e55e55e-0000-4000-8000-000000000002";
/// A session whose last save is a rewrite stopped between its commit and its rename.
const S3: &str = "5e55e55e-0000-4000-8000-000000000003";
/// A session whose row was rebuilt by `reconstruct_orphans` from an orphan messages file.
const S4: &str = "5e55e55e-0000-4000-8000-000000000004";
/// An empty file in a day directory: not a run, indexed with its `diagnostic`.
const NOT_A_RUN: &str = "2026/03/05/7a000000-0000-4000-8000-0000000000ff.jsonl";
const RUN_A: &str = "7a000000-0000-4000-8000-00000000000a";
const RUN_B: &str = "7a000000-0000-4000-8000-00000000000b";

/// A value of one of SQLite's storage classes, bound as that class.
#[derive(Debug, Clone)]
enum Val {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    /// TEXT holding bytes that are not UTF-8.
    BadText(Vec<u8>),
    Blob(Vec<u8>),
}

impl ToSql for Val {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self {
            Val::Null => ValueRef::Null,
            Val::Int(i) => ValueRef::Integer(*i),
            Val::Real(f) => ValueRef::Real(*f),
            Val::Text(t) => ValueRef::Text(t.as_bytes()),
            Val::BadText(b) => ValueRef::Text(b),
            Val::Blob(b) => ValueRef::Blob(b),
        }))
    }
}

fn val() -> impl Strategy<Value = Val> {
    prop_oneof![
        Just(Val::Null),
        prop_oneof![
            Just(i64::MAX),
            Just(i64::MIN),
            Just(-1i64),
            Just(0i64),
            any::<i64>()
        ]
        .prop_map(Val::Int),
        prop_oneof![
            Just(1.5f64),
            Just(1e300),
            Just(-0.0),
            Just(9.3e18),
            any::<f64>()
        ]
        .prop_map(Val::Real),
        "[a-z0-9 ./:-]{0,16}".prop_map(Val::Text),
        ("[a-z ]{0,6}", "[a-z ]{0,6}").prop_map(|(a, b)| {
            let mut bytes = a.into_bytes();
            bytes.extend_from_slice(b"\xED\xA0\xBC");
            bytes.extend_from_slice(b.as_bytes());
            Val::BadText(bytes)
        }),
        proptest::collection::vec(any::<u8>(), 0..12).prop_map(Val::Blob),
    ]
}

/// Every column of every table, as `(table, column)`.
const COLUMNS: [(&str, &str); 53] = [
    ("session_state", "session_id"),
    ("session_state", "updated_at"),
    ("session_state", "run_id"),
    ("session_state", "invoke_seq"),
    ("session_state", "schema_version"),
    ("session_state", "meta_json"),
    ("session_state", "message_count"),
    ("session_state", "last_user_message"),
    ("session_state", "workspace_root"),
    ("session_files", "session_id"),
    ("session_files", "generation"),
    ("session_files", "row_fingerprint"),
    ("session_files", "file_len"),
    ("session_files", "file_lines"),
    ("session_files", "file_digest"),
    ("session_files", "pending_file"),
    ("session_files", "pending_base"),
    ("runs", "path"),
    ("runs", "run_id"),
    ("runs", "session_id"),
    ("runs", "started_at"),
    ("runs", "model_provider"),
    ("runs", "model_name"),
    ("runs", "outcome"),
    ("runs", "last_status"),
    ("runs", "record_count"),
    ("runs", "invocation_count"),
    ("runs", "input_tokens"),
    ("runs", "cached_input_tokens"),
    ("runs", "cache_creation_tokens"),
    ("runs", "output_tokens"),
    ("runs", "total_tokens"),
    ("runs", "file_size"),
    ("runs", "mtime_ns"),
    ("runs", "first_input"),
    ("runs", "workspace_root"),
    ("runs", "damage_count"),
    ("runs", "last_ts"),
    ("runs", "compressed"),
    ("runs", "started_at_utc"),
    ("runs", "diagnostic"),
    ("runs", "partial"),
    ("run_dirs", "path"),
    ("run_dirs", "depth"),
    ("run_dirs", "mtime_ns"),
    ("run_dirs", "scanned_ns"),
    ("run_dirs", "run_count"),
    ("session_reconstructed", "session_id"),
    ("session_reconstructed", "reconstructed_at"),
    ("session_reconstructed", "row_fingerprint"),
    ("session_reconstructed", "messages"),
    ("session_reconstructed", "run_files"),
    ("session_reconstructed", "legacy_snapshot"),
];

#[test]
fn every_column_of_every_table_is_listed() {
    // On a copy: a connection to the template would add `-wal`/`-shm` files beside it while
    // other tests copy it.
    let dir = tempfile::tempdir().unwrap();
    copy_tree(template(), dir.path());
    let conn = rusqlite::Connection::open(dir.path().join("state.db")).unwrap();
    let mut found: Vec<(String, String)> = Vec::new();
    for table in [
        "session_state",
        "session_files",
        "runs",
        "run_dirs",
        "run_watch",
        "session_reconstructed",
    ] {
        let mut stmt = conn
            .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))
            .unwrap();
        let names: Vec<String> = stmt
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        found.extend(names.into_iter().map(|n| (table.to_owned(), n)));
    }
    let mut listed: Vec<(String, String)> = COLUMNS
        .iter()
        .chain(&[("run_watch", "path")])
        .map(|(t, c)| ((*t).to_owned(), (*c).to_owned()))
        .collect();
    listed.sort();
    found.sort();
    assert_eq!(found, listed);
}

/// Columns including `run_watch.path`.
fn all_columns() -> Vec<(&'static str, &'static str)> {
    let mut v = COLUMNS.to_vec();
    v.push(("run_watch", "path"));
    v
}

/// A store with two sessions, one pending rewrite, a session whose row was rebuilt from its
/// orphan messages file, two indexed runs (watched: no `run.end`) and an indexed file that is
/// not a run, so that every table and column has a row; built once (tests copy it).
fn template() -> &'static Path {
    static DIR: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, root) = DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("sessions");
        build_template(&root);
        (dir, root)
    });
    root
}

fn session(id: &str, n: usize) -> SessionState {
    SessionState {
        schema_version: Some(1i64.into()),
        session_id: id.to_owned(),
        updated_at: Timestamp::from_raw("2026-03-04T10:05:00.000Z"),
        run_id: Some(RUN_A.to_owned()),
        invoke_seq: Some(2),
        messages: (0..n)
            .map(|i| msg(&user_msg(&format!("question {i} 😀"))))
            .collect(),
        meta: Some(
            session_schema::RawJson::from_json(r#"{"codelia_workspace_root":"/repo"}"#).unwrap(),
        ),
        ..Default::default()
    }
}

fn build_template(root: &Path) {
    for (day, run) in [("2026/03/04", RUN_A), ("2026/03/05", RUN_B)] {
        let dir = root.join(day);
        fs::create_dir_all(&dir).unwrap();
        let date = day.replace('/', "-");
        let body = format!(
            "{{\"type\":\"header\",\"schema_version\":1,\"run_id\":\"{run}\",\"session_id\":\"{S1}\",\"started_at\":\"{date}T10:00:00.000Z\"}}\n\
             {{\"type\":\"run.start\",\"run_id\":\"{run}\",\"ts\":\"{date}T10:00:01.000Z\",\"session_id\":\"{S1}\",\"input\":{{\"type\":\"text\",\"text\":\"hello\"}}}}\n"
        );
        fs::write(dir.join(format!("{run}.jsonl")), body).unwrap();
    }
    let armed = Arc::new(AtomicBool::new(false));
    let a = armed.clone();
    let options = StoreOptions {
        fault_hook: Some(Arc::new(move |p| {
            p == FaultPoint::Committed && a.load(Ordering::SeqCst)
        })),
        ..StoreOptions::default()
    };
    let store = StateStore::open_with(root, options).unwrap();
    store.save(&session(S1, 3)).unwrap();
    store.save(&session(S2, 1)).unwrap();
    let s3 = session(S3, 2);
    store.save(&s3).unwrap();
    let mut rewritten = s3.clone();
    rewritten.messages[0] = msg(&user_msg("[summary]"));
    armed.store(true, Ordering::SeqCst);
    assert!(store.save(&rewritten).is_err());
    // A messages file without a row: its row is rebuilt and marked in
    // `session_reconstructed`.
    fs::write(
        root.join("messages").join(format!("{S4}.jsonl")),
        "{\"role\":\"user\",\"content\":\"orphan question\"}\n",
    )
    .unwrap();
    let rebuilt = store.reconstruct_orphans(false).unwrap();
    assert_eq!(rebuilt.entries.len(), 1, "{rebuilt:?}");
    assert_eq!(rebuilt.entries[0].session_id, S4);
    assert_eq!(store.reconstructed_sessions().unwrap().len(), 1);
    // A file that is not a run: indexed with its `diagnostic`, never listed.
    fs::write(root.join(NOT_A_RUN), b"").unwrap();
    // Both runs have no `run.end`: they are watched.
    store.index_runs().unwrap();
    let not_runs = store.run_file_diagnostics().unwrap();
    assert_eq!(not_runs.len(), 1, "{not_runs:?}");
    assert_eq!(not_runs[0].path, root.join(NOT_A_RUN));
}

/// How a stored value fits its column: `None` when it is what the column holds, else why not.
fn misfit(table: &str, column: &str, class: &str, bytes: &[u8]) -> Option<&'static str> {
    let required = matches!(
        (table, column),
        (
            "session_state",
            "session_id" | "updated_at" | "schema_version"
        ) | ("session_files", _)
            | (
                "runs",
                "path" | "run_id" | "started_at" | "outcome" | "started_at_utc"
            )
            | ("run_dirs", _)
            | ("run_watch", _)
            | ("session_reconstructed", _)
    ) && !matches!(
        (table, column),
        ("session_files", "pending_file" | "pending_base")
    );
    let integer = matches!(
        (table, column),
        (
            "session_state",
            "invoke_seq" | "schema_version" | "message_count"
        ) | (
            "session_files",
            "generation" | "row_fingerprint" | "file_len" | "file_lines" | "file_digest"
        ) | (
            "run_dirs",
            "depth" | "mtime_ns" | "scanned_ns" | "run_count"
        ) | (
            "session_reconstructed",
            "row_fingerprint" | "messages" | "run_files" | "legacy_snapshot"
        )
    ) || (table == "runs"
        && !matches!(
            column,
            "path"
                | "run_id"
                | "session_id"
                | "started_at"
                | "model_provider"
                | "model_name"
                | "outcome"
                | "last_status"
                | "first_input"
                | "workspace_root"
                | "last_ts"
                | "started_at_utc"
                | "diagnostic"
        ));
    match class {
        "null" => required.then_some("null"),
        "blob" => Some("blob"),
        "text" if std::str::from_utf8(bytes).is_err() => Some("not utf-8"),
        "text" if integer => Some("text in an integer column"),
        "real" if integer => {
            // An integral REAL is taken as the integer for `invoke_seq`.
            let f: f64 = std::str::from_utf8(bytes).unwrap().parse().unwrap();
            let lenient = (table, column) == ("session_state", "invoke_seq")
                && f.fract() == 0.0
                && f.abs() < 9.0e15;
            (!lenient).then_some("real in an integer column")
        }
        "integer" if !integer => Some("integer in a text column"),
        _ => {
            // Negative counts and lengths are out of range.
            let unsigned =
                matches!(
                    (table, column),
                    ("session_files", "file_len" | "file_lines")
                        | ("session_state", "message_count")
                        | ("session_reconstructed", "messages" | "run_files")
                ) || (table == "runs" && integer && !matches!(column, "mtime_ns" | "compressed"));
            let negative = class == "integer"
                && std::str::from_utf8(bytes)
                    .ok()
                    .and_then(|s| s.parse::<i64>().ok())
                    .is_some_and(|n| n < 0);
            (unsigned && negative).then_some("negative")
        }
    }
}

/// Writes `value` into `table.column` of the first row; `false` when a constraint refuses it.
fn write_value(conn: &rusqlite::Connection, table: &str, column: &str, value: &Val) -> bool {
    conn.execute(
        &format!("UPDATE {table} SET {column} = ?1 WHERE rowid = (SELECT min(rowid) FROM {table})"),
        [value],
    )
    .is_ok()
}

/// `(typeof, bytes as text or blob)` of the value now stored in the first row.
fn stored(conn: &rusqlite::Connection, table: &str, column: &str) -> (String, Vec<u8>) {
    conn.query_row(
        &format!(
            "SELECT typeof({column}), CAST({column} AS BLOB), {column} FROM {table} \
             WHERE rowid = (SELECT min(rowid) FROM {table})"
        ),
        [],
        |r| {
            let class: String = r.get(0)?;
            let bytes = match r.get_ref(2)? {
                ValueRef::Real(f) => f.to_string().into_bytes(),
                _ => r.get::<_, Option<Vec<u8>>>(1)?.unwrap_or_default(),
            };
            Ok((class, bytes))
        },
    )
    .unwrap()
}

/// One written value that does not fit its column.
#[derive(Debug, Clone)]
struct Misfit {
    table: &'static str,
    column: &'static str,
}

/// What was written into a copy of the template.
struct Damaged {
    _dir: tempfile::TempDir,
    root: PathBuf,
    /// Written values that do not fit their column.
    misfits: Vec<Misfit>,
    /// Whether `session_state.session_id` of the first session was changed (to anything):
    /// its other columns are then read only by a listing.
    key_changed: bool,
    /// Whether `session_files.session_id` of the first session was changed: that row then
    /// belongs to no session and nothing reads it.
    files_key_changed: bool,
}

/// A copy of the template with `writes` applied.
fn damaged_copy(writes: &[(usize, Val)]) -> Damaged {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    copy_tree(template(), &root);
    let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
    let columns = all_columns();
    let mut misfits = Vec::new();
    let mut key_changed = false;
    let mut files_key_changed = false;
    for (i, value) in writes {
        let (table, column) = columns[i % columns.len()];
        if !write_value(&conn, table, column, value) {
            continue;
        }
        key_changed |= (table, column) == ("session_state", "session_id");
        files_key_changed |= (table, column) == ("session_files", "session_id");
        let (class, bytes) = stored(&conn, table, column);
        // Only the last write to a column counts.
        misfits.retain(|m: &Misfit| (m.table, m.column) != (table, column));
        if misfit(table, column, &class, &bytes).is_some() {
            misfits.push(Misfit { table, column });
        }
    }
    drop(conn);
    Damaged {
        _dir: dir,
        root,
        misfits,
        key_changed,
        files_key_changed,
    }
}

/// Everything the library reports about `state.db` values, as `(table, column)`.
#[derive(Default, Debug)]
struct Reports {
    found: Vec<(&'static str, &'static str)>,
}

impl Reports {
    fn add(&mut self, d: &session_state::ColumnDamage) {
        self.found.push((d.table, d.column));
    }

    fn has(&self, table: &str, column: &str) -> bool {
        self.found.iter().any(|(t, c)| *t == table && *c == column)
    }
}

/// The library on a damaged copy: every operation returns, and every misfit it reads is
/// reported.
fn library_checks(d: &Damaged) {
    let (root, misfits) = (&d.root, &d.misfits);
    // No fsync: the checks are about reading, and they run many times.
    let options = StoreOptions {
        durability: session_state::SaveDurability::NoSync,
        ..StoreOptions::default()
    };
    let store = StateStore::open_with(root, options).unwrap_or_else(|e| panic!("open: {e}"));
    let mut reports = Reports::default();
    for r in store.recovery() {
        if let session_state::Recovery::Damage(d) = r {
            reports.add(d);
        }
    }
    let page = store.list(&ListQuery::all()).unwrap();
    for d in &page.diagnostics {
        if let Some(c) = &d.column {
            reports.add(c);
        }
    }
    // Our marks of rebuilt rows and the index rows of files that are not runs are read by
    // nothing else.
    for r in store.reconstructed_sessions().unwrap() {
        for c in &r.column_damage {
            reports.add(c);
        }
    }
    for d in store.run_file_diagnostics().unwrap() {
        for c in &d.column_damage {
            reports.add(c);
        }
    }
    for id in [S1, S2, S3] {
        if let Some(loaded) = store.load(id).unwrap() {
            for d in &loaded.damage {
                if let MessageDamageKind::Column(c) = &d.kind {
                    reports.add(c);
                }
            }
            let mut next = loaded.state.clone();
            next.messages.push(msg(&user_msg("after the damage")));
            store
                .save(&next)
                .unwrap_or_else(|e| panic!("save {id}: {e}"));
            let again = store.load(id).unwrap().unwrap();
            assert_eq!(again.state.messages, next.messages, "{id}");
        }
    }
    for row in store.list_runs(&RunQuery::default()).unwrap().runs {
        for d in &row.column_damage {
            reports.add(d);
        }
    }
    for d in &store.runs_for_session(S1).unwrap() {
        for c in &d.column_damage {
            reports.add(c);
        }
    }
    let report = store.index_runs().unwrap();
    for d in &report.column_damage {
        reports.add(d);
    }
    store.reindex().unwrap();
    for m in misfits {
        // A session_files row whose key no longer names a session is read by nothing.
        if m.table == "session_files" && d.files_key_changed {
            continue;
        }
        // Bookkeeping of a session whose row key was changed is not looked up either, nor
        // are the columns of its row that a listing does not show.
        if d.key_changed
            && (m.table == "session_files"
                || (m.table == "session_state"
                    && matches!(m.column, "invoke_seq" | "schema_version" | "meta_json")))
        {
            continue;
        }
        assert!(
            reports.has(m.table, m.column),
            "{m:?} not reported; reports: {:?}",
            reports.found
        );
    }
    // After the saves and the rebuild, nothing is left to report for our sessions and runs.
    for id in [S1, S2, S3] {
        if let Some(l) = store.load(id).unwrap() {
            assert!(
                !l.damage
                    .iter()
                    .any(|d| matches!(d.kind, MessageDamageKind::Column(_))),
                "{id}: {:?}",
                l.damage
            );
        }
    }
    for row in store.list_runs(&RunQuery::default()).unwrap().runs {
        assert!(row.column_damage.is_empty(), "{row:?}");
    }
}

/// The CLI's commands on a damaged copy: each exits with a documented code, never a panic.
fn cli_checks(d: &Damaged) {
    let (root, misfits): (&Path, &[Misfit]) = (&d.root, &d.misfits);
    let allowed: &[(&[&str], &[i32])] = &[
        (&["sessions", "--all"], &[0]),
        (&["sessions", "--all", "--json"], &[0]),
        (&["runs"], &[0]),
        (&["runs", "--json"], &[0]),
        (&["show", S1], &[0, 3]),
        (&["history", S1], &[0, 3]),
        (&["export", S1, "--format", "json"], &[0, 4]),
        (&["export", S2, "--format", "md"], &[0, 3, 4]),
        (&["stats"], &[0]),
        (&["repair", "--dry-run"], &[0, 1]),
        (&["gc", "--older-than", "30d", "--dry-run"], &[0]),
    ];
    let verify = sessions(root, NOW, &["verify"]);
    assert!(
        [0, 1].contains(&verify.code),
        "verify: {}\n{}",
        verify.code,
        verify.stderr
    );
    if !d.key_changed
        && misfits
            .iter()
            .any(|m| m.table == "session_state" || m.table == "session_reconstructed")
    {
        assert_eq!(verify.code, 1, "{}\n{}", verify.stdout, verify.stderr);
        assert!(verify.stdout.contains("column_damage"), "{}", verify.stdout);
    }
    for (args, codes) in allowed {
        let out = sessions(root, NOW, args);
        assert!(
            codes.contains(&out.code),
            "sessions {args:?} exited {}\nstdout: {}\nstderr: {}",
            out.code,
            out.stdout,
            out.stderr
        );
    }
    let gc = sessions(root, NOW, &["gc", "--older-than", "30d"]);
    assert!([0, 4].contains(&gc.code), "gc: {}\n{}", gc.code, gc.stderr);
}

/// One value of each storage class that does not fit (and a misfit NULL where the schema
/// lets one in), written into every column of every table at once, then into every row key:
/// each is reported by the operation that reads it.
#[test]
fn every_misfit_class_in_every_column_is_reported() {
    let classes = [
        Val::BadText(b"cut \xED\xA0\xBC emoji".to_vec()),
        Val::Blob(vec![0, 0xFF, 7]),
        Val::Real(1.5),
        Val::Int(i64::MIN),
        Val::Null,
        Val::Text("not a number".into()),
    ];
    let columns = all_columns();
    let is_key = |(t, c): (&str, &str)| {
        c == "path"
            || (c == "session_id"
                && matches!(
                    t,
                    "session_state" | "session_files" | "session_reconstructed"
                ))
    };
    for value in &classes {
        for keys in [false, true] {
            let writes: Vec<(usize, Val)> = columns
                .iter()
                .enumerate()
                .filter(|(_, tc)| is_key(**tc) == keys)
                .map(|(i, _)| (i, value.clone()))
                .collect();
            let damaged = damaged_copy(&writes);
            // BLOBs and bad text misfit every column they were written into (the six keys,
            // or the forty-eight others); a REAL each of the twenty-eight integer columns.
            let want = match (value, keys) {
                (Val::BadText(_) | Val::Blob(_), true) => Some(6),
                (Val::BadText(_) | Val::Blob(_), false) => Some(48),
                (Val::Real(_), false) => Some(28),
                _ => None,
            };
            if let Some(n) = want {
                assert_eq!(damaged.misfits.len(), n, "{value:?}: {:?}", damaged.misfits);
            }
            library_checks(&damaged);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_values_in_any_column_never_stop_the_library_or_the_cli(
        writes in proptest::collection::vec((0usize..53, val()), 1..5)
    ) {
        cli_checks(&damaged_copy(&writes));
        library_checks(&damaged_copy(&writes));
    }
}

/// A copy of the template whose first session's `last_user_message` is `hi ` + `ED A0 BC`
/// (the reference's cut emoji).
fn with_lone_surrogate() -> Damaged {
    let columns = all_columns();
    let i = columns
        .iter()
        .position(|c| *c == ("session_state", "last_user_message"))
        .unwrap();
    damaged_copy(&[(i, Val::BadText(b"hi \xED\xA0\xBC".to_vec()))])
}

#[test]
fn a_lone_surrogate_in_a_row_is_listed_shown_exported_and_verified() {
    let d = with_lone_surrogate();
    let root = &d.root;
    let want = format!(
        "session_state.last_user_message of session \"{S1}\": text is not UTF-8 (3 invalid byte(s) replaced with U+FFFD)"
    );
    // The listing shows the decoded text and says what was replaced.
    let list = sessions(root, NOW, &["sessions", "--all", "--json"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    let rows = list.json_lines();
    let s1 = rows.iter().find(|r| r["session_id"] == S1).unwrap();
    assert_eq!(s1["last_user_message"], "hi \u{FFFD}\u{FFFD}\u{FFFD}");
    assert!(list.stderr.contains(&want), "{}", list.stderr);
    // verify reports it as a problem of that session, and checks everything else.
    let verify = sessions(root, NOW, &["verify", "--json"]);
    assert_eq!(verify.code, 1, "{}\n{}", verify.stdout, verify.stderr);
    let findings = verify.json_lines();
    let column: Vec<&serde_json::Value> = findings
        .iter()
        .filter(|f| f["kind"] == "column_damage")
        .collect();
    assert_eq!(column.len(), 1, "{findings:?}");
    assert_eq!(column[0]["id"], S1);
    assert_eq!(column[0]["file"], "state.db");
    assert_eq!(column[0]["message"], want.as_str());
    let summary = findings.last().unwrap();
    // S1–S3 and the rebuilt S4.
    assert_eq!(summary["sessions"], 4);
    // The damaged value, and the template's empty file under the run tree (two findings).
    let mut problems: Vec<&str> = findings
        .iter()
        .filter(|f| f["severity"] == "problem")
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    problems.sort_unstable();
    assert_eq!(problems, ["column_damage", "empty_file", "empty_run"]);
    assert_eq!(summary["problems"], 3);
    // show and export work, with a warning.
    let show = sessions(root, NOW, &["show", S1]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    assert!(show.stderr.contains(&want), "{}", show.stderr);
    let export = sessions(root, NOW, &["export", S1, "--format", "json"]);
    assert_eq!(export.code, 0, "{}", export.stderr);
    // gc plans around it.
    let gc = sessions(root, NOW, &["gc", "--older-than", "30d", "--dry-run"]);
    assert_eq!(gc.code, 0, "{}", gc.stderr);
}

#[test]
fn reading_commands_work_when_the_store_cannot_be_opened_for_writing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    copy_tree(template(), &root);
    // SQLite cannot create the WAL it needs to write (`unable to open database file`), as
    // when a file it needs cannot be created; the database file itself is readable.
    fs::create_dir(root.join("state.db-wal")).unwrap();
    for args in [&["show", S1][..], &["runs"], &["stats"], &["history", S1]] {
        let out = sessions(&root, NOW, args);
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
        assert!(
            out.stderr
                .contains("cannot write the store (cannot open the database files for writing: ")
                && out.stderr.contains("); reading it read-only"),
            "{args:?}: {}",
            out.stderr
        );
    }
    let runs = sessions(&root, NOW, &["runs", "--json"]);
    let lines = runs.json_lines();
    let listed: Vec<&serde_json::Value> = lines.iter().filter(|l| l["type"] == "run").collect();
    assert_eq!(listed.len(), 2, "{}", runs.stdout);
    // The file that is not a run is reported, not listed.
    let not_runs: Vec<&serde_json::Value> =
        lines.iter().filter(|l| l["kind"] == "not_a_run").collect();
    assert_eq!(not_runs.len(), 1, "{}", runs.stdout);
    assert_eq!(not_runs[0]["file"], NOT_A_RUN);
    assert_eq!(lines.len(), 3, "{}", runs.stdout);
}

/// Values that do not fit their column in the rows nothing lists — a mark of a rebuilt row in
/// `session_reconstructed`, the index row of a file that is not a run — are reported by the
/// library calls that read them and by `sessions verify`, with the rest of the row used.
#[test]
fn misfits_in_rebuilt_row_marks_and_in_rows_of_files_that_are_no_runs_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    copy_tree(template(), &root);
    let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
    conn.execute(
        "UPDATE session_reconstructed SET messages = ?1 WHERE session_id = ?2",
        rusqlite::params![Val::Blob(vec![0, 0xFF]), S4],
    )
    .unwrap();
    conn.execute(
        "UPDATE runs SET model_name = ?1, file_size = -3 WHERE diagnostic IS NOT NULL",
        [Val::BadText(b"m \xED\xA0\xBC".to_vec())],
    )
    .unwrap();
    drop(conn);
    let mark_damage = format!(
        "session_reconstructed.messages of session \"{S4}\": unexpected value BLOB of 2 bytes"
    );
    let row_damage = [
        format!(
            "runs.model_name of run file \"{NOT_A_RUN}\": text is not UTF-8 (3 invalid byte(s) replaced with U+FFFD)"
        ),
        format!("runs.file_size of run file \"{NOT_A_RUN}\": -3 is out of range"),
    ];

    let store = StateStore::open(&root).unwrap();
    let marks = store.reconstructed_sessions().unwrap();
    assert_eq!(marks.len(), 1, "{marks:?}");
    assert_eq!(marks[0].session_id, S4);
    // The rest of the mark is read, and the session's row is still the rebuilt one.
    assert!(marks[0].row_unchanged);
    assert_eq!(marks[0].run_files, 0);
    assert_eq!(marks[0].messages, 0);
    let found: Vec<String> = marks[0]
        .column_damage
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(found, std::slice::from_ref(&mark_damage));
    let not_runs = store.run_file_diagnostics().unwrap();
    assert_eq!(not_runs.len(), 1, "{not_runs:?}");
    assert_eq!(not_runs[0].path, root.join(NOT_A_RUN));
    assert_eq!(not_runs[0].message, "empty file (0 bytes)");
    assert_eq!(not_runs[0].file_size, 0);
    let found: Vec<String> = not_runs[0]
        .column_damage
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(found, row_damage);
    drop(store);

    let verify = sessions(&root, NOW, &["verify", "--json"]);
    assert_eq!(verify.code, 1, "{}\n{}", verify.stdout, verify.stderr);
    let findings = verify.json_lines();
    let column: Vec<(String, String)> = findings
        .iter()
        .filter(|f| f["kind"] == "column_damage")
        .map(|f| {
            assert_eq!(f["file"], "state.db", "{f}");
            (
                f["id"].as_str().unwrap_or("-").to_owned(),
                f["message"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        column,
        [
            (S4.to_owned(), mark_damage),
            ("-".to_owned(), row_damage[0].clone()),
            ("-".to_owned(), row_damage[1].clone()),
        ]
    );
    // The mark still says the row was rebuilt.
    assert!(
        findings
            .iter()
            .any(|f| f["kind"] == "reconstructed_row" && f["id"] == S4),
        "{findings:?}"
    );
}

/// A mark whose fingerprint cannot be read is reported for its damage, and not taken for a
/// rebuilt row that nobody saved since.
#[test]
fn a_mark_with_an_unreadable_fingerprint_is_damage_not_a_rebuilt_row() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    copy_tree(template(), &root);
    rusqlite::Connection::open(root.join("state.db"))
        .unwrap()
        .execute(
            "UPDATE session_reconstructed SET row_fingerprint = 'x' WHERE session_id = ?1",
            [S4],
        )
        .unwrap();
    let store = StateStore::open(&root).unwrap();
    let marks = store.reconstructed_sessions().unwrap();
    assert_eq!(marks.len(), 1, "{marks:?}");
    assert!(!marks[0].row_unchanged);
    let found: Vec<String> = marks[0]
        .column_damage
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        found,
        [format!(
            "session_reconstructed.row_fingerprint of session \"{S4}\": unexpected value TEXT \"x\""
        )]
    );
    drop(store);
    let verify = sessions(&root, NOW, &["verify", "--json"]);
    assert_eq!(verify.code, 1, "{}\n{}", verify.stdout, verify.stderr);
    let findings = verify.json_lines();
    assert_eq!(
        findings
            .iter()
            .filter(|f| f["kind"] == "column_damage" && f["id"] == S4)
            .count(),
        1,
        "{findings:?}"
    );
    assert!(
        !findings.iter().any(|f| f["kind"] == "reconstructed_row"),
        "{findings:?}"
    );
}

#[test]
fn the_cli_says_what_opening_the_store_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    copy_tree(template(), &root);
    // S3's rewrite stopped after its commit; then another writer saved S3 (its row changed).
    rusqlite::Connection::open(root.join("state.db"))
        .unwrap()
        .execute(
            "UPDATE session_state SET updated_at = '2026-03-04T11:00:00.000Z' WHERE session_id = ?1",
            [S3],
        )
        .unwrap();
    let out = sessions(&root, NOW, &["runs"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let kept = root
        .join("messages/stale")
        .join(format!("{S3}.jsonl.g2.tmp"));
    assert!(
        out.stderr.contains(&format!(
            "sessions: warning: state store recovery: session {S3}: {} not renamed (the session's row changed since the commit); kept as {}",
            root.join("messages").join(format!("{S3}.jsonl.g2.tmp")).display(),
            kept.display()
        )),
        "{}",
        out.stderr
    );
    assert!(kept.is_file());
    // Said once: the next command has nothing to recover.
    let again = sessions(&root, NOW, &["runs"]);
    assert!(!again.stderr.contains("recovery"), "{}", again.stderr);
}
