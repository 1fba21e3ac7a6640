//! Archiving and restoring runs: byte-exact both ways, permission bits kept, checksummed,
//! a plain file beside its archive, and the temporary files a killed process leaves behind
//! (removed only when no process holds the lock of their run).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::{Path, PathBuf};

use session_jsonl::archive::{remove_stale_temp, stale_temp_files};
use session_jsonl::{JsonlError, RunWriter, WriterOptions, compress_run, decompress_run, read_run};
use session_schema::{Header, Record, RunStatus, RunStatusKind, Timestamp};

fn run(root: &Path, id: &str) -> PathBuf {
    let h = Header {
        schema_version: 1,
        run_id: id.into(),
        session_id: Some("s".into()),
        started_at: Timestamp::from_raw("2026-02-03T12:00:00.000Z"),
        ..Default::default()
    };
    let w = RunWriter::create(root, &h, WriterOptions::default()).unwrap();
    for i in 0..50 {
        w.append(&Record::RunStatus(RunStatus {
            run_id: id.into(),
            ts: Timestamp::from_raw("2026-02-03T12:00:01.000Z"),
            status: RunStatusKind::Running,
            message: Some(format!("step {i} ü")),
            ..Default::default()
        }))
        .unwrap();
    }
    w.path().to_owned()
}

/// Names of the entries of `dir`.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[cfg(unix)]
fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

#[test]
fn archive_and_restore_are_byte_exact_and_keep_the_permission_bits() {
    let dir = tempfile::tempdir().unwrap();
    let path = run(dir.path(), "r");
    let original = fs::read(&path).unwrap();
    #[cfg(unix)]
    for bits in [0o600, 0o640] {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&path, fs::Permissions::from_mode(bits)).unwrap();
        let zst = compress_run(&path).unwrap();
        assert_eq!(mode(&zst), bits, "archive of a {bits:o} run");
        let back = decompress_run(&zst).unwrap();
        assert_eq!(back, path);
        assert_eq!(mode(&back), bits, "restored {bits:o} run");
        assert_eq!(fs::read(&back).unwrap(), original);
        assert!(!zst.exists());
    }
    let day = path.parent().unwrap();
    assert_eq!(names(day), ["r.jsonl"]);
    assert_eq!(read_run(&path).unwrap().records.len(), 51);
}

#[test]
fn a_corrupt_archive_is_not_restored_and_stays() {
    let dir = tempfile::tempdir().unwrap();
    let path = run(dir.path(), "r");
    let zst = compress_run(&path).unwrap();
    let mut bytes = fs::read(&zst).unwrap();
    // Flip a byte of the last block: the frame's content checksum no longer matches (or
    // the block does not decode).
    let at = bytes.len() - 6;
    bytes[at] ^= 0x55;
    fs::write(&zst, &bytes).unwrap();
    let err = decompress_run(&zst).unwrap_err();
    assert!(err.to_string().contains("decompress"), "{err}");
    let day = zst.parent().unwrap();
    assert_eq!(
        names(day),
        ["r.jsonl.zst"],
        "no temporary file, no half restore"
    );
    assert_eq!(fs::read(&zst).unwrap(), bytes);
}

#[test]
fn a_plain_file_beside_its_archive_is_kept_and_the_redundant_archive_removed() {
    let dir = tempfile::tempdir().unwrap();
    let path = run(dir.path(), "r");
    let original = fs::read(&path).unwrap();
    let zst = compress_run(&path).unwrap();
    // An archive run stopped after linking the archive: both files, same content.
    fs::write(&path, &original).unwrap();
    assert_eq!(decompress_run(&zst).unwrap(), path);
    assert!(!zst.exists());
    assert_eq!(fs::read(&path).unwrap(), original);
    // Different content: nothing is replaced or removed.
    let zst = compress_run(&path).unwrap();
    fs::write(&path, b"{}\n").unwrap();
    let err = decompress_run(&zst).unwrap_err();
    assert!(matches!(err, JsonlError::AlreadyExists { .. }), "{err}");
    assert!(zst.exists());
    assert_eq!(fs::read(&path).unwrap(), b"{}\n");
}

#[test]
fn temporary_files_left_by_a_killed_process_are_removed_only_when_nobody_holds_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let path = run(root, "r");
    let day = path.parent().unwrap().to_owned();
    // What an archive and a restore killed half-way leave behind (another, dead, pid).
    let zst_tmp = day.join(".r.jsonl.zst.tmp-4194000");
    let unzst_tmp = day.join(".q.jsonl.unzst.tmp-4194001");
    fs::write(&zst_tmp, b"partial zstd").unwrap();
    fs::write(&unzst_tmp, b"partial").unwrap();
    // Not temporary files of ours: left alone.
    fs::write(day.join(".r.jsonl.zst.tmp-"), b"x").unwrap();
    fs::write(day.join(".notes.tmp-1"), b"x").unwrap();
    assert_eq!(
        stale_temp_files(root).unwrap(),
        [unzst_tmp.clone(), zst_tmp.clone()]
    );

    // While a writer holds the run, its temporary file may be in use: kept.
    let w = RunWriter::open_append(&path, WriterOptions::default()).unwrap();
    assert!(!remove_stale_temp(&zst_tmp).unwrap());
    assert!(zst_tmp.exists());
    drop(w);
    assert!(remove_stale_temp(&zst_tmp).unwrap());
    assert!(!zst_tmp.exists());
    // The restore's source (q.jsonl.zst) is gone: nothing can be using it.
    assert!(remove_stale_temp(&unzst_tmp).unwrap());
    assert!(matches!(
        remove_stale_temp(&day.join("r.jsonl")),
        Err(JsonlError::NotARunFile { .. })
    ));

    // Archiving a run removes its own stale temporary files first (under its lock).
    fs::write(&zst_tmp, b"partial zstd").unwrap();
    let zst = compress_run(&path).unwrap();
    assert!(!zst_tmp.exists());
    fs::write(day.join(".r.jsonl.unzst.tmp-4194002"), b"partial").unwrap();
    decompress_run(&zst).unwrap();
    assert_eq!(
        names(&day),
        [".notes.tmp-1", ".r.jsonl.zst.tmp-", "r.jsonl"]
    );
}
