//! What the local backend adds to the conformance suite: where files go, torn tails in run
//! files, interplay with `RunWriter` and archives, lock files, read-only stores, the recorded
//! reference store, and errors that keep their OS cause.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::error::Error as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use session_jsonl::{DamageKind, Durability, Item, RunWriter, WriterOptions};
use session_schema::{Header, Record, RunEnd, RunOutcome, Timestamp};
use session_storage::local::{LocalBackend, LocalOptions};
use session_storage::{
    Expected, Extent, HolderInfo, LinePosition, RunCatalogue, RunListQuery, SessionListQuery,
    SessionStore, StorageError, Target, Version,
};

fn store() -> (tempfile::TempDir, LocalBackend) {
    let dir = tempfile::tempdir().unwrap();
    let b = LocalBackend::open(dir.path().join("sessions")).unwrap();
    (dir, b)
}

fn header(run_id: &str, started_at: &str) -> Vec<u8> {
    format!(
        "{{\"type\":\"header\",\"schema_version\":1,\"run_id\":\"{run_id}\",\"session_id\":\"s1\",\"started_at\":\"{started_at}\"}}\n"
    )
    .into_bytes()
}

fn status(run_id: &str, n: u32) -> Vec<u8> {
    format!(
        "{{\"type\":\"run.status\",\"run_id\":\"{run_id}\",\"ts\":\"2026-02-03T12:00:{n:02}.000Z\",\"status\":\"running\"}}\n"
    )
    .into_bytes()
}

fn project(items: &[Item]) -> Vec<String> {
    items
        .iter()
        .map(|i| match i {
            Item::Record(r) => format!(
                "record {} {} {} {}",
                r.record().kind(),
                r.offset,
                r.line,
                r.len
            ),
            Item::Damage(d) => format!("damage {d:?}"),
        })
        .collect()
}

fn items_of_file(path: &Path) -> Vec<String> {
    let items: Vec<Item> = session_jsonl::Reader::open(path)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    project(&items)
}

fn items_of_backend(b: &LocalBackend, run_id: &str) -> Vec<String> {
    let items: Vec<Item> = b
        .read_items(run_id, LinePosition::START, Default::default())
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    project(&items)
}

#[test]
fn new_runs_go_to_the_date_directory_of_their_header() {
    let (_d, b) = store();
    let bytes = header("r-date", "2026-02-03T23:30:00.000-05:00");
    b.append_lines("r-date", 0, &bytes).unwrap();
    let path = b.run_file("r-date").unwrap().unwrap();
    assert_eq!(path, b.root().join("2026/02/04/r-date.jsonl"));
    assert_eq!(fs::read(&path).unwrap(), bytes);
    assert_eq!(b.run_file("absent").unwrap(), None);
}

#[test]
fn a_torn_tail_is_not_committed_and_is_sealed_before_an_append() {
    let (_d, b) = store();
    let dir = b.root().join("2026/02/03");
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join("r-torn.jsonl");
    let complete = [
        header("r-torn", "2026-02-03T12:00:00.000Z"),
        status("r-torn", 1),
    ]
    .concat();
    let fragment = b"{\"type\":\"run.end\",\"run_id\":\"r-to".to_vec();
    fs::write(&path, [complete.clone(), fragment.clone()].concat()).unwrap();
    let (c, f) = (complete.len() as u64, fragment.len() as u64);

    let stat = b.stat_run("r-torn").unwrap().unwrap();
    assert_eq!((stat.len, stat.lines, stat.torn_tail), (c, 2, f));
    assert_eq!(b.read_all("r-torn", Extent::Committed).unwrap(), complete);
    assert_eq!(
        b.read_all("r-torn", Extent::WithTornTail).unwrap(),
        [complete.clone(), fragment.clone()].concat()
    );
    match b.read_bytes("r-torn", c + 1, Extent::Committed) {
        Err(StorageError::OffsetOutOfRange { offset, len, .. }) => {
            assert_eq!((offset, len), (c + 1, c))
        }
        other => panic!("{other:?}"),
    }
    // The parsed read reports the torn tail exactly as reading the file does.
    let from_file = items_of_file(&path);
    assert!(
        from_file.iter().any(|i| i.contains("TornTail")),
        "{from_file:#?}"
    );
    assert_eq!(items_of_backend(&b, "r-torn"), from_file);

    // An append seals the fragment first (never glues to it), so the length it expected is
    // no longer the committed one.
    let next = status("r-torn", 2);
    match b.append_lines("r-torn", c, &next) {
        Err(StorageError::LengthConflict {
            expected,
            committed,
            ..
        }) => assert_eq!((expected, committed), (c, c + f + 1)),
        other => panic!("{other:?}"),
    }
    let sealed = [complete.clone(), fragment.clone(), b"\n".to_vec()].concat();
    assert_eq!(fs::read(&path).unwrap(), sealed);
    b.append_lines("r-torn", c + f + 1, &next).unwrap();
    let parsed = b.read_run("r-torn").unwrap();
    let kinds: Vec<DamageKind> = parsed.damage.iter().map(|d| d.kind).collect();
    assert_eq!(kinds, [DamageKind::SealedFragment]);
    assert_eq!(parsed.records.len(), 3);
    assert_eq!(items_of_backend(&b, "r-torn"), items_of_file(&path));
}

#[test]
fn appends_wait_for_a_run_writer_and_follow_its_lines() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let b = LocalBackend::open_with(
        &root,
        LocalOptions {
            lock_wait: Duration::from_millis(50),
            ..LocalOptions::default()
        },
    )
    .unwrap();
    let h = Header {
        schema_version: 1,
        run_id: "r-writer".into(),
        started_at: Timestamp::from_raw("2026-02-03T12:00:00.000Z"),
        ..Default::default()
    };
    let writer =
        RunWriter::create(&root, &h, WriterOptions::with_durability(Durability::Flush)).unwrap();
    let len = fs::metadata(writer.path()).unwrap().len();
    match b.append_lines("r-writer", len, &status("r-writer", 1)) {
        Err(StorageError::Busy { target, waited_ms }) => {
            assert_eq!(target, Target::run("r-writer"));
            assert!(waited_ms >= 50, "{waited_ms}");
        }
        other => panic!("{other:?}"),
    }
    let path = writer.path().to_owned();
    writer
        .append(&Record::RunEnd(RunEnd {
            run_id: "r-writer".into(),
            ts: Timestamp::from_raw("2026-02-03T12:00:05.000Z"),
            outcome: RunOutcome::Completed,
            ..Default::default()
        }))
        .unwrap();
    drop(writer);
    let after_writer = fs::metadata(&path).unwrap().len();
    assert!(matches!(
        b.append_lines("r-writer", len, &status("r-writer", 1)),
        Err(StorageError::LengthConflict { committed, .. }) if committed == after_writer
    ));
    let done = b
        .append_lines("r-writer", after_writer, &status("r-writer", 6))
        .unwrap();
    // A writer reopened after the backend's append continues after its lines.
    let writer = RunWriter::open_append(&path, WriterOptions::default()).unwrap();
    writer
        .append(&Record::RunEnd(RunEnd {
            run_id: "r-writer".into(),
            ts: Timestamp::from_raw("2026-02-03T12:00:07.000Z"),
            outcome: RunOutcome::Cancelled,
            ..Default::default()
        }))
        .unwrap();
    drop(writer);
    let parsed = b.read_run("r-writer").unwrap();
    assert!(parsed.damage.is_empty(), "{:?}", parsed.damage);
    let kinds: Vec<&str> = parsed.records.iter().map(|r| r.record().kind()).collect();
    assert_eq!(kinds, ["header", "run.end", "run.status", "run.end"]);
    assert_eq!(parsed.records[2].offset, done.offset);
}

#[test]
fn archived_runs_read_exactly_and_refuse_appends() {
    let (_d, b) = store();
    let bytes = [
        header("r-zst", "2026-02-03T12:00:00.000Z"),
        status("r-zst", 1),
    ]
    .concat();
    b.append_lines("r-zst", 0, &bytes).unwrap();
    // Read once so the plain file's path is cached, then archive it.
    assert_eq!(b.read_all("r-zst", Extent::Committed).unwrap(), bytes);
    let plain = b.run_file("r-zst").unwrap().unwrap();
    let archive = session_jsonl::compress_run(&plain).unwrap();
    assert!(!plain.exists());
    assert_eq!(b.read_all("r-zst", Extent::Committed).unwrap(), bytes);
    assert_eq!(b.run_file("r-zst").unwrap(), Some(archive));
    let h = header("r-zst", "2026-02-03T12:00:00.000Z").len() as u64;
    let mut tail = Vec::new();
    std::io::Read::read_to_end(
        &mut b.read_bytes("r-zst", h, Extent::Committed).unwrap(),
        &mut tail,
    )
    .unwrap();
    assert_eq!(tail, status("r-zst", 1));
    let stat = b.stat_run("r-zst").unwrap().unwrap();
    assert!(stat.archived);
    assert_eq!(
        (stat.len, stat.lines, stat.torn_tail),
        (bytes.len() as u64, 2, 0)
    );
    match b.append_lines("r-zst", bytes.len() as u64, &status("r-zst", 2)) {
        Err(StorageError::RunArchived { run_id }) => assert_eq!(run_id, "r-zst"),
        other => panic!("{other:?}"),
    }
    let page = b.list_runs(&RunListQuery::default()).unwrap();
    assert_eq!(page.runs.len(), 1);
    assert!(page.runs[0].archived);
    assert_eq!(page.runs[0].location, "2026/02/03/r-zst.jsonl.zst");
}

#[test]
fn copies_of_a_run_are_listed_once() {
    let (_d, b) = store();
    let bytes = [
        header("r-copy", "2026-02-03T12:00:00.000Z"),
        status("r-copy", 1),
    ]
    .concat();
    b.append_lines("r-copy", 0, &bytes).unwrap();
    let original = b.run_file("r-copy").unwrap().unwrap();
    for dir in ["2025/01/01", "2024/06/30"] {
        let d = b.root().join(dir);
        fs::create_dir_all(&d).unwrap();
        fs::copy(&original, d.join("r-copy.jsonl")).unwrap();
    }
    // One copy archived: a plain file still wins over it.
    session_jsonl::compress_run(&b.root().join("2024/06/30/r-copy.jsonl")).unwrap();
    let page = b.list_runs(&RunListQuery::default()).unwrap();
    let rows: Vec<(&str, &str)> = page
        .runs
        .iter()
        .map(|r| (r.run_id.as_str(), r.location.as_str()))
        .collect();
    assert_eq!(rows, [("r-copy", "2026/02/03/r-copy.jsonl")]);
    // Paging sees it once too.
    let first = b
        .list_runs(&RunListQuery {
            limit: Some(1),
            ..RunListQuery::default()
        })
        .unwrap();
    assert_eq!(first.runs.len(), 1);
    assert_eq!(first.next_cursor, None);
}

fn lease_file(b: &LocalBackend, id: &str) -> PathBuf {
    b.root().join("leases").join(format!("{id}.lease"))
}

fn empty_session(id: &str) -> session_schema::SessionState {
    session_schema::parse_session_state(
        format!(
            r#"{{"schema_version":1,"session_id":"{id}","updated_at":"2026-02-03T12:00:00.000Z","messages":[]}}"#
        )
        .as_bytes(),
    )
    .unwrap()
    .value
}

#[test]
fn the_lease_is_session_states_and_names_its_holder_while_held() {
    let (_d, b) = store();
    let who = HolderInfo {
        name: "worker \"7\"".into(),
        host: "h1".into(),
        pid: 4242,
    };
    let g = b.acquire_lease("s-lease", &who).unwrap();
    // session-state's holder note, with the seam's holder as its label.
    let text = fs::read_to_string(lease_file(&b, "s-lease")).unwrap();
    let note: serde_json::Value = serde_json::from_str(text.trim_end()).unwrap();
    assert_eq!(note["pid"], std::process::id());
    assert_eq!(note["purpose"], "open");
    let label: serde_json::Value = serde_json::from_str(note["label"].as_str().unwrap()).unwrap();
    assert_eq!(label["holder"]["name"], "worker \"7\"");
    assert_eq!(label["holder"]["host"], "h1");
    assert_eq!(label["holder"]["pid"], 4242);
    let since = note["since"].as_str().unwrap().to_owned();
    assert!(Timestamp::from_raw(since.as_str()).parse().is_some());
    match b.acquire_lease("s-lease", &HolderInfo::this_process("other")) {
        Err(StorageError::LeaseBusy {
            holder, since: s, ..
        }) => {
            assert_eq!(holder, Some(who.clone()));
            assert_eq!(s.map(|s| s.as_str().to_owned()), Some(since.clone()));
        }
        other => panic!("{other:?}"),
    }
    // A runtime using session-state directly is excluded by it, and sees who holds it.
    let direct = session_state::StateStore::open(b.root()).unwrap();
    match direct.lease("s-lease") {
        Err(session_state::StateError::SessionBusy { holder, .. }) => {
            assert_eq!(holder.pid, Some(std::process::id()));
            assert_eq!(holder.label, note["label"].as_str().map(str::to_owned));
        }
        other => panic!("{other:?}"),
    }
    // The holder saves; another client of the store is refused, naming the holder.
    b.save_session(&empty_session("s-lease"), &Expected::Absent)
        .unwrap();
    let other = LocalBackend::open(b.root()).unwrap();
    match other.save_session(&empty_session("s-lease"), &Expected::Any) {
        Err(e @ StorageError::LeaseBusy { .. }) => {
            assert_eq!(e.session_id(), Some("s-lease"));
            let StorageError::LeaseBusy { holder, .. } = e else {
                unreachable!()
            };
            assert_eq!(holder, Some(who.clone()));
        }
        other => panic!("{other:?}"),
    }
    g.release().unwrap();
    // session-state removes its lease file on release.
    assert!(!lease_file(&b, "s-lease").exists());
    // Nothing of this crate's own lock files is left.
    assert!(!b.root().join("locks").exists());
}

#[test]
fn a_lease_taken_through_session_state_excludes_the_backend() {
    let (_d, b) = store();
    let direct = session_state::StateStore::open(b.root()).unwrap();
    let held = direct.lease("s-rt").unwrap();
    match b.acquire_lease("s-rt", &HolderInfo::this_process("seam")) {
        Err(StorageError::LeaseBusy { holder, since, .. }) => {
            let holder = holder.unwrap();
            // Named by session-state's note: this process, its program.
            assert_eq!(holder.pid, std::process::id());
            assert_eq!(Some(holder.name.as_str()), held.holder().program.as_deref());
            assert_eq!(since.as_ref(), held.holder().since.as_ref());
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        b.save_session(&empty_session("s-rt"), &Expected::Absent),
        Err(StorageError::LeaseBusy { .. })
    ));
    drop(held);
    let g = b
        .acquire_lease("s-rt", &HolderInfo::this_process("seam"))
        .unwrap();
    g.release().unwrap();
}

#[test]
fn deletes_compare_and_swap_and_leave_no_lock_files() {
    let (_d, b) = store();
    let st = empty_session("s-del");
    let v1 = b.save_session(&st, &Expected::Absent).unwrap();
    drop(
        b.acquire_lease("s-del", &HolderInfo::this_process("w"))
            .unwrap(),
    );
    assert!(!lease_file(&b, "s-del").exists());
    // A save that bypasses the backend (a bare StateStore, as a runtime would) moves the
    // session on: a delete expecting the old version is a conflict naming the new one, and
    // nothing is deleted.
    let direct = session_state::StateStore::open(b.root()).unwrap();
    let mut moved = st.clone();
    moved.run_id = Some("r-1".into());
    let g2 = direct.save(&moved).unwrap().generation;
    match b.delete_session("s-del", &Expected::Version(v1.clone())) {
        Err(StorageError::VersionConflict { found, .. }) => {
            assert_eq!(found, Some(Version::new(g2.to_string())));
        }
        other => panic!("{other:?}"),
    }
    assert!(b.load_session("s-del").unwrap().is_some());
    let v2 = b.load_session("s-del").unwrap().unwrap().version;
    assert!(b.delete_session("s-del", &Expected::Version(v2)).unwrap());
    assert!(b.load_session("s-del").unwrap().is_none());
    assert!(!b.root().join("locks").exists());

    // A held lease stays with its holder: its own delete goes through, another client's is
    // refused.
    b.save_session(&st, &Expected::Absent).unwrap();
    let g = b
        .acquire_lease("s-del", &HolderInfo::this_process("w"))
        .unwrap();
    let other = LocalBackend::open(b.root()).unwrap();
    assert!(matches!(
        other.delete_session("s-del", &Expected::Any),
        Err(StorageError::LeaseBusy { .. })
    ));
    assert!(b.delete_session("s-del", &Expected::Any).unwrap());
    assert!(lease_file(&b, "s-del").exists());
    assert!(
        b.acquire_lease("s-del", &HolderInfo::this_process("x"))
            .is_err()
    );
    g.renew().unwrap();
    drop(g);
    assert!(!lease_file(&b, "s-del").exists());
}

#[test]
fn a_read_only_backend_reads_but_refuses_writes() {
    let (_d, b) = store();
    let bytes = header("r-ro", "2026-02-03T12:00:00.000Z");
    b.append_lines("r-ro", 0, &bytes).unwrap();
    let st = session_schema::parse_session_state(
        br#"{"schema_version":1,"session_id":"s-ro","updated_at":"2026-02-03T12:00:00.000Z","messages":[]}"#,
    )
    .unwrap()
    .value;
    let v = b.save_session(&st, &Expected::Absent).unwrap();
    assert_eq!(b.list_runs(&RunListQuery::default()).unwrap().runs.len(), 1);
    let ro = LocalBackend::open_read_only(b.root()).unwrap();
    assert!(ro.is_read_only());
    assert_eq!(ro.read_all("r-ro", Extent::Committed).unwrap(), bytes);
    assert_eq!(ro.load_session("s-ro").unwrap().unwrap().version, v);
    assert_eq!(
        ro.list_runs(&RunListQuery::default()).unwrap().runs.len(),
        1
    );
    assert_eq!(
        ro.list_sessions(&SessionListQuery::default())
            .unwrap()
            .sessions
            .len(),
        1
    );
    for (op, err) in [
        (
            "append",
            ro.append_lines("r-ro", bytes.len() as u64, &status("r-ro", 1))
                .err(),
        ),
        ("save", ro.save_session(&st, &Expected::Any).err()),
        ("delete", ro.delete_session("s-ro", &Expected::Any).err()),
    ] {
        match err {
            Some(StorageError::ReadOnly { op: got }) => assert_eq!(got, op),
            other => panic!("{op}: {other:?}"),
        }
    }
    assert_eq!(b.read_all("r-ro", Extent::Committed).unwrap(), bytes);
}

#[test]
fn the_recorded_reference_store_reads_the_same_through_the_backend() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    session_test_support::copy_tree(&session_test_support::codelia_sessions_dir(), &root).unwrap();
    let b = LocalBackend::open(&root).unwrap();
    let page = b.list_runs(&RunListQuery::default()).unwrap();
    let files: Vec<PathBuf> = fs::read_dir(root.join("2026/11/30"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(page.runs.len(), files.len());
    assert_eq!(files.len(), 20);
    for row in &page.runs {
        let path = root.join(&row.location);
        assert_eq!(
            items_of_backend(&b, &row.run_id),
            items_of_file(&path),
            "{}",
            row.run_id
        );
        let bytes = fs::read(&path).unwrap();
        let stat = b.stat_run(&row.run_id).unwrap().unwrap();
        assert_eq!(stat.len + stat.torn_tail, bytes.len() as u64);
        assert_eq!(
            b.read_all(&row.run_id, Extent::WithTornTail).unwrap(),
            bytes
        );
    }
    let store = session_state::StateStore::open(&root).unwrap();
    let want: Vec<String> = store
        .list(&session_state::ListQuery::all())
        .unwrap()
        .entries
        .into_iter()
        .map(|e| e.summary.session_id)
        .collect();
    let listed = b.list_sessions(&SessionListQuery::default()).unwrap();
    let got: Vec<String> = listed
        .sessions
        .iter()
        .map(|s| s.session_id.clone())
        .collect();
    assert_eq!(got, want);
    assert!(!got.is_empty());
    for id in &got {
        let loaded = b.load_session(id).unwrap().unwrap();
        let direct = store.load(id).unwrap().unwrap();
        assert_eq!(loaded.state.messages, direct.state.messages, "{id}");
        assert_eq!(
            loaded.version.as_str(),
            direct.generation.unwrap().to_string()
        );
    }
}

#[test]
fn a_version_from_another_client_works_for_compare_and_swap() {
    let (_d, a) = store();
    let st = session_schema::parse_session_state(
        br#"{"schema_version":1,"session_id":"s-v","updated_at":"2026-02-03T12:00:00.000Z","messages":[]}"#,
    )
    .unwrap()
    .value;
    let v1 = a.save_session(&st, &Expected::Absent).unwrap();
    // A new client has seen no version yet: the token alone is enough.
    let fresh = LocalBackend::open(a.root()).unwrap();
    let v2 = fresh
        .save_session(&st, &Expected::Version(v1.clone()))
        .unwrap();
    match a.save_session(&st, &Expected::Version(v1.clone())) {
        Err(StorageError::VersionConflict { found, .. }) => assert_eq!(found, Some(v2.clone())),
        other => panic!("{other:?}"),
    }
    let v3 = a.save_session(&st, &Expected::Version(v2)).unwrap();
    assert!(fresh.delete_session("s-v", &Expected::Version(v3)).unwrap());
}

#[test]
fn backend_errors_name_the_run_and_keep_the_os_cause() {
    let (_d, b) = store();
    // A file where the year directory of a new run must go.
    fs::write(b.root().join("2026"), b"not a directory").unwrap();
    let err = b
        .append_lines("r-err", 0, &header("r-err", "2026-02-03T12:00:00.000Z"))
        .unwrap_err();
    assert_eq!(err.run_id(), Some("r-err"));
    assert!(matches!(err, StorageError::Backend { .. }), "{err:?}");
    let cause = err.source().unwrap().to_string();
    assert!(
        cause.contains("Not a directory") || cause.contains("File exists"),
        "{cause}"
    );
    assert!(err.to_string().contains("run r-err"), "{err}");
}

#[test]
fn save_sessions_commits_together_and_fails_a_conflicting_session_alone() {
    let (_d, b) = store();
    let ids = [
        "0a0a0a0a-4a12-4cc4-bbc9-9a0c0d2b5af1",
        "0b0b0b0b-4a12-4cc4-bbc9-9a0c0d2b5af1",
        "0c0c0c0c-4a12-4cc4-bbc9-9a0c0d2b5af1",
    ];
    let first: Vec<session_schema::SessionState> = ids.iter().map(|id| empty_session(id)).collect();
    let created = b
        .save_sessions(
            &first
                .iter()
                .map(|s| (s, Expected::Absent))
                .collect::<Vec<_>>(),
        )
        .unwrap();
    let versions: Vec<Version> = created.into_iter().map(Result::unwrap).collect();
    // The second session was saved elsewhere since.
    let mut elsewhere = first[1].clone();
    elsewhere.updated_at = Timestamp::from_raw("2026-02-03T13:00:00.000Z");
    let theirs = b
        .save_session(&elsewhere, &Expected::Version(versions[1].clone()))
        .unwrap();
    let mut next = first.clone();
    for s in &mut next {
        s.messages.push(
            session_schema::parse_message(br#"{"role":"user","content":"next"}"#)
                .unwrap()
                .value,
        );
    }
    let saves: Vec<(&session_schema::SessionState, Expected)> = next
        .iter()
        .zip(&versions)
        .map(|(s, v)| (s, Expected::Version(v.clone())))
        .collect();
    let results = b.save_sessions(&saves).unwrap();
    match &results[1] {
        Err(StorageError::VersionConflict {
            session_id, found, ..
        }) => {
            assert_eq!(session_id, ids[1]);
            assert_eq!(found.as_ref(), Some(&theirs));
        }
        other => panic!("expected a version conflict, got {other:?}"),
    }
    for i in [0, 2] {
        let version = results[i].as_ref().unwrap();
        let loaded = b.load_session(ids[i]).unwrap().unwrap();
        assert_eq!(&loaded.version, version);
        assert_eq!(loaded.state.messages, next[i].messages);
    }
    let kept = b.load_session(ids[1]).unwrap().unwrap();
    assert_eq!(kept.version, theirs);
    assert!(kept.state.messages.is_empty());
    // A session given twice is refused whole, nothing written.
    let twice = [(&next[0], Expected::Any), (&next[0], Expected::Any)];
    assert!(matches!(
        b.save_sessions(&twice),
        Err(StorageError::Backend { .. })
    ));
}

#[test]
fn a_large_run_is_listed_with_the_counts_of_its_whole_file() {
    let (_d, b) = store();
    // Header, a `run.start`, 300 statuses of 1 KiB and one of 1 MiB, then `run.end`: more than
    // the run index's refresh reads of a file (head block and tail probe).
    let mut bytes = header("r-big", "2026-02-03T12:00:00.000Z");
    bytes.extend_from_slice(
        b"{\"type\":\"run.start\",\"run_id\":\"r-big\",\"session_id\":\"s1\",\"ts\":\"2026-02-03T12:00:00.000Z\",\"input\":{\"type\":\"text\",\"text\":\"go\"}}\n",
    );
    for pad in std::iter::repeat_n(1 << 10, 300).chain([1 << 20]) {
        bytes.extend_from_slice(
            format!(
                "{{\"type\":\"run.status\",\"run_id\":\"r-big\",\"ts\":\"2026-02-03T12:00:01.000Z\",\"status\":\"running\",\"message\":\"{}\"}}\n",
                "x".repeat(pad)
            )
            .as_bytes(),
        );
    }
    bytes.extend_from_slice(
        b"{\"type\":\"run.end\",\"run_id\":\"r-big\",\"ts\":\"2026-02-03T12:00:02.000Z\",\"outcome\":\"completed\"}\n",
    );
    assert!(bytes.len() > 1 << 20);
    b.append_lines("r-big", 0, &bytes).unwrap();
    let page = b.list_runs(&RunListQuery::default()).unwrap();
    assert_eq!(page.runs.len(), 1);
    let run = &page.runs[0];
    assert_eq!(
        (
            run.record_count,
            run.last_status.as_deref(),
            run.damage_count
        ),
        (304, Some("running"), 0)
    );
    assert_eq!(run.outcome.as_str(), "completed");
}

/// The local backend's appending save takes the caller at its word: the kept messages are not
/// compared (session-state's `save_appended_expecting`), so only the new ones are written.
/// An edit before the last kept message is, as documented, not seen there, and is stored by
/// `save_session`, which compares every message.
#[test]
fn appending_saves_write_only_the_new_messages() {
    let (_d, b) = store();
    let msg = |text: &str| {
        session_schema::parse_message(format!(r#"{{"role":"user","content":"{text}"}}"#).as_bytes())
            .unwrap()
            .value
    };
    let mut st = empty_session("s-grow");
    st.messages = vec![msg("one"), msg("two"), msg("three")];
    let v1 = b.save_session(&st, &Expected::Absent).unwrap();
    let file = b.root().join("messages/s-grow.jsonl");
    let before = fs::read(&file).unwrap();

    // Appended, with an earlier message changed in the caller's copy: only the new message
    // is written; the stored list keeps the earlier one as saved.
    let mut grown = st.clone();
    grown.messages[0] = msg("ONE, edited");
    grown.messages.push(msg("four"));
    let v2 = b
        .save_session_appended(&grown, &Expected::Version(v1), 3)
        .unwrap();
    let after = fs::read(&file).unwrap();
    assert_eq!(&after[..before.len()], &before[..]);
    assert_eq!(
        std::str::from_utf8(&after[before.len()..]).unwrap(),
        "{\"role\":\"user\",\"content\":\"four\"}\n"
    );
    let loaded = b.load_session("s-grow").unwrap().unwrap();
    assert_eq!(loaded.version, v2);
    assert_eq!(loaded.state.messages[0], msg("one"));
    assert_eq!(&loaded.state.messages[1..], &grown.messages[1..]);

    // `save_session` compares every message and stores the edit.
    let v3 = b.save_session(&grown, &Expected::Version(v2)).unwrap();
    let loaded = b.load_session("s-grow").unwrap().unwrap();
    assert_eq!(loaded.version, v3);
    assert_eq!(loaded.state.messages, grown.messages);
}
