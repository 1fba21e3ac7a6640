//! Built without the `archive` feature: an archived run is still listed and found, and every
//! reading function refuses it with [`JsonlError::ArchiveUnsupported`] instead of reading
//! compressed bytes as text. Run by `cargo test -p session-jsonl --no-default-features --lib`.

// Declared under `cfg(all(test, not(feature = "archive")))` in lib.rs; the inner
// `cfg(test)` module says so to readers of this file alone.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::fs;

    use crate::{
        JsonlError, Reader, find_run, list_run_files, open_run_file, read_header, read_run,
        terminal_state,
    };

    fn unsupported(r: Result<impl std::fmt::Debug, JsonlError>, path: &std::path::Path) {
        match r {
            Err(JsonlError::ArchiveUnsupported { path: p }) => assert_eq!(p, path),
            other => panic!(
                "expected ArchiveUnsupported for {}, got {other:?}",
                path.display()
            ),
        }
    }

    #[test]
    fn an_archived_run_is_listed_and_refused_with_a_typed_error() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("2026/02/03");
        fs::create_dir_all(&dir).unwrap();
        let zst = dir.join("8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a.jsonl.zst");
        // A zstd frame header and some bytes: never decoded without the feature.
        fs::write(&zst, [0x28, 0xB5, 0x2F, 0xFD, 0x24, 0x05, 0x29, 0x00]).unwrap();

        let listing = list_run_files(root.path()).unwrap();
        assert_eq!(listing.files.len(), 1);
        assert_eq!(listing.files[0].path, zst);
        assert!(listing.files[0].compressed);
        let found = find_run(root.path(), "8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a", None).unwrap();
        assert_eq!(found.path, zst);

        unsupported(open_run_file(&zst), &zst);
        unsupported(Reader::open(&zst), &zst);
        unsupported(read_run(&zst), &zst);
        unsupported(read_header(&zst), &zst);
        unsupported(terminal_state(&zst), &zst);
        let err = open_run_file(&zst).unwrap_err();
        assert_eq!(err.path(), Some(zst.as_path()));
        assert!(err.to_string().contains("`archive` feature"), "{err}");
        // A missing archive is still the OS error, with its path.
        let missing = dir.join("other.jsonl.zst");
        assert!(matches!(
            open_run_file(&missing),
            Err(JsonlError::Io { .. })
        ));
    }
}
