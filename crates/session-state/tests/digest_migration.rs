//! `user_version` 6: `session_files.file_digest` recomputed from the messages files for a
//! database written by version 5 (old multiply–rotate digest), by the migration of a writable
//! open and by the read-only view, with rows whose file no longer verifies kept "changed by
//! another writer".

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use rusqlite::Connection;
use session_schema::{BaseMessage, SessionState, Timestamp, parse_message};
use session_state::{LoadSource, SaveMode, StateStore};

/// The line digest of version 5 and earlier, as that version computed it.
fn legacy_line(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h: u64 = 0xCBF2_9CE4_8422_2325 ^ (bytes.len() as u64).wrapping_mul(K);
    for c in bytes.chunks(8) {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(K).rotate_left(29);
    }
    legacy_fmix(h)
}

fn legacy_fmix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    h ^= h >> 33;
    h = h.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    h ^= h >> 33;
    h
}

/// The digest chain of version 5 and earlier: `(digest, lines)`.
fn legacy_digest(bytes: &[u8]) -> (u64, u64) {
    let (mut chain, mut n) = (0u64, 0u64);
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        chain = legacy_fmix(
            chain.rotate_left(17) ^ legacy_line(line).wrapping_mul(0xC2B2_AE3D_27D4_EB4F),
        );
        n += 1;
    }
    (chain, n)
}

/// The chain of `docs/format.md`, computed from its definition.
fn xxh3_digest(bytes: &[u8]) -> (u64, u64) {
    let (mut chain, mut n) = (0u64, 0u64);
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        let mut step = chain.to_le_bytes().to_vec();
        step.extend_from_slice(&xxhash_rust::xxh3::xxh3_64(line).to_le_bytes());
        chain = xxhash_rust::xxh3::xxh3_64(&step);
        n += 1;
    }
    (chain, n)
}

fn message(json: &str) -> BaseMessage {
    parse_message(json.as_bytes()).unwrap().value
}

fn state(id: &str, messages: Vec<BaseMessage>) -> SessionState {
    SessionState {
        session_id: id.into(),
        updated_at: Timestamp::from_raw("2026-02-03T12:00:02.900Z"),
        messages,
        ..Default::default()
    }
}

const KEPT: &str = "0b7f3c1e-1111-4c4c-9a9a-000000000001";
const REPLACED: &str = "0b7f3c1e-2222-4c4c-9a9a-000000000002";
const PENDING: &str = "0b7f3c1e-3333-4c4c-9a9a-000000000003";

/// `(file_len, file_lines, file_digest, pending_base)` of `id`'s row.
fn files_row(root: &Path, id: &str) -> (i64, i64, i64, Option<String>) {
    let conn = Connection::open(root.join("state.db")).unwrap();
    conn.query_row(
        "SELECT file_len, file_lines, file_digest, pending_base FROM session_files WHERE session_id = ?1",
        [id],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )
    .unwrap()
}

/// A store as version 5 left it: three sessions saved, their digests rewritten with the old
/// algorithm, `user_version` 5; then the file of `REPLACED` rewritten by another writer.
fn version_5_store(root: &Path) {
    let store = StateStore::open(root).unwrap();
    let user = message(r#"{"role":"user","content":"hi"}"#);
    let answer = message(r#"{"role":"assistant","content":"hello"}"#);
    store
        .save(&state(KEPT, vec![user.clone(), answer.clone()]))
        .unwrap();
    store.save(&state(REPLACED, vec![user.clone()])).unwrap();
    store
        .save(&state(PENDING, vec![user.clone(), answer]))
        .unwrap();
    drop(store);
    let conn = Connection::open(root.join("state.db")).unwrap();
    for id in [KEPT, REPLACED, PENDING] {
        let bytes = std::fs::read(root.join(format!("messages/{id}.jsonl"))).unwrap();
        let (digest, lines) = legacy_digest(&bytes);
        conn.execute(
            "UPDATE session_files SET file_digest = ?2, file_lines = ?3 WHERE session_id = ?1",
            rusqlite::params![id, digest.cast_signed(), lines as i64],
        )
        .unwrap();
        if id == PENDING {
            // A rewrite committed over this file whose rename was interrupted: its base.
            let g: i64 = conn
                .query_row(
                    "SELECT generation FROM session_files WHERE session_id = ?1",
                    [id],
                    |r| r.get(0),
                )
                .unwrap();
            conn.execute(
                "UPDATE session_files SET pending_base = ?2 WHERE session_id = ?1",
                rusqlite::params![id, format!("g{g} {} {lines} {digest:016x}", bytes.len())],
            )
            .unwrap();
        }
    }
    conn.execute_batch("PRAGMA user_version = 5").unwrap();
    drop(conn);
    std::fs::write(
        root.join(format!("messages/{REPLACED}.jsonl")),
        "{\"role\":\"user\",\"content\":\"other writer\"}\n{\"role\":\"assistant\",\"content\":\"x\"}\n",
    )
    .unwrap();
}

#[test]
fn migration_recomputes_digests_of_a_version_5_database() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    version_5_store(root);
    let kept_bytes = std::fs::read(root.join(format!("messages/{KEPT}.jsonl"))).unwrap();
    let pending_bytes = std::fs::read(root.join(format!("messages/{PENDING}.jsonl"))).unwrap();
    let (_, _, replaced_old_digest, _) = files_row(root, REPLACED);

    let store = StateStore::open(root).unwrap();
    let conn = Connection::open(root.join("state.db")).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 12, "the current version");

    // A file that verified under the old digest: recomputed with the new one.
    let (len, lines, digest, _) = files_row(root, KEPT);
    let (want, want_lines) = xxh3_digest(&kept_bytes);
    assert_eq!(
        (len, lines, digest),
        (kept_bytes.len() as i64, 2, want.cast_signed())
    );
    assert_eq!(want_lines, 2);
    // ... and the store relies on it: the next save appends instead of rewriting.
    let mut grown = store.load(KEPT).unwrap().unwrap();
    assert_eq!(grown.source, LoadSource::Db);
    assert!(
        grown.notes.is_empty() && grown.damage.is_empty(),
        "{grown:?}"
    );
    grown
        .state
        .messages
        .push(message(r#"{"role":"user","content":"more"}"#));
    let report = store.save(&grown.state).unwrap();
    assert_eq!(report.mode, SaveMode::Appended { messages: 1 });

    // The pending rewrite's base, re-encoded with the new digest.
    let (_, _, _, base) = files_row(root, PENDING);
    let g: i64 = conn
        .query_row(
            "SELECT generation FROM session_files WHERE session_id = ?1",
            [PENDING],
            |r| r.get(0),
        )
        .unwrap();
    let (pd, pl) = xxh3_digest(&pending_bytes);
    assert_eq!(
        base,
        Some(format!("g{g} {} {pl} {pd:016x}", pending_bytes.len()))
    );

    // A file another writer replaced: the marker `file_lines = file_len + 1`, digest kept.
    let (len, lines, digest, _) = files_row(root, REPLACED);
    assert_eq!((lines, digest), (len + 1, replaced_old_digest));
}

#[test]
fn a_replaced_file_loads_as_it_does_without_migration() {
    // The migrated store ...
    let dir = tempfile::tempdir().unwrap();
    version_5_store(dir.path());
    let migrated = StateStore::open(dir.path())
        .unwrap()
        .load(REPLACED)
        .unwrap()
        .unwrap();
    // ... and a version 6 store whose file was replaced the same way.
    let control_dir = tempfile::tempdir().unwrap();
    let control = StateStore::open(control_dir.path()).unwrap();
    control
        .save(&state(
            REPLACED,
            vec![message(r#"{"role":"user","content":"hi"}"#)],
        ))
        .unwrap();
    std::fs::copy(
        dir.path().join(format!("messages/{REPLACED}.jsonl")),
        control_dir
            .path()
            .join(format!("messages/{REPLACED}.jsonl")),
    )
    .unwrap();
    let expected = control.load(REPLACED).unwrap().unwrap();
    let shown = |l: &session_state::LoadedSession, root: &Path| {
        format!("{:?}", (&l.state.messages, &l.source, &l.notes, &l.damage))
            .replace(&root.display().to_string(), "ROOT")
    };
    assert_eq!(
        shown(&migrated, dir.path()),
        shown(&expected, control_dir.path())
    );
    assert_eq!(migrated.state.messages.len(), 2);
}

#[test]
fn read_only_open_of_a_version_5_database_verifies_with_the_new_digest() {
    let dir = tempfile::tempdir().unwrap();
    version_5_store(dir.path());
    let store = StateStore::open_read_only(dir.path()).unwrap();
    let kept = store.load(KEPT).unwrap().unwrap();
    assert_eq!(kept.state.messages.len(), 2);
    assert!(kept.notes.is_empty() && kept.damage.is_empty(), "{kept:?}");
    drop(store);
    // Nothing was migrated or written.
    let conn = Connection::open(dir.path().join("state.db")).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 5);
}

/// A messages file that became a FIFO (or a link) is not opened by the migration or the
/// read-only view: opening a FIFO for reading would wait for a writer forever. The row gets the
/// marker like any file that does not verify.
#[cfg(unix)]
#[test]
fn a_fifo_in_place_of_a_messages_file_never_makes_the_migration_wait() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    version_5_store(&root);
    for id in [KEPT, PENDING] {
        let file = root.join(format!("messages/{id}.jsonl"));
        std::fs::remove_file(&file).unwrap();
        let status = std::process::Command::new("mkfifo")
            .arg(&file)
            .status()
            .expect("mkfifo (coreutils) is needed for this test");
        assert!(status.success());
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = root.clone();
    std::thread::spawn(move || {
        let read_only = StateStore::open_read_only(&worker).unwrap();
        let shown = read_only
            .load(KEPT)
            .map(|l| l.map(|l| l.state.messages.len()));
        drop(read_only);
        drop(StateStore::open(&worker).unwrap());
        let _ = tx.send(format!("{shown:?}"));
    });
    let shown = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the migration or the read-only view waits on the FIFO");
    assert!(shown.starts_with("Ok("), "{shown}");
    let (len, lines, _, _) = files_row(&root, KEPT);
    assert_eq!(lines, len + 1);
    let (_, _, _, base) = files_row(&root, PENDING);
    let base = base.unwrap();
    let mut parts = base.split(' ').skip(1);
    let (blen, blines) = (parts.next().unwrap(), parts.next().unwrap());
    assert_eq!(
        blines.parse::<u64>().unwrap(),
        blen.parse::<u64>().unwrap() + 1,
        "{base}"
    );
}
