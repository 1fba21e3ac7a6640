//! File-system primitives: private modes, fsync of files and directories, digests.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::Path;

use crate::error::{Result, StateError};

/// Mode of every data file this crate creates (`state.db`, message logs, temp files).
pub(crate) const FILE_MODE: u32 = 0o600;
/// Mode of every directory this crate creates (`messages/`, `state/`, the sessions root).
pub(crate) const DIR_MODE: u32 = 0o700;

/// `mkdir -p` with mode 0700 for the directories it creates; existing ones keep their mode.
pub(crate) fn create_dir_private(path: &Path) -> Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(DIR_MODE);
    }
    builder
        .create(path)
        .map_err(|e| StateError::io("create directory", path, e))
}

/// Opens `path` for reading and writing, creating it with mode 0600 when missing.
/// Returns the file and whether it was created.
pub(crate) fn open_private_rw(path: &Path) -> Result<(File, bool)> {
    let mut opts = OpenOptions::new();
    opts.read(true).write(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(FILE_MODE);
    }
    match opts.clone().create_new(true).open(path) {
        Ok(f) => Ok((f, true)),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => opts
            .open(path)
            .map(|f| (f, false))
            .map_err(|e| StateError::io("open", path, e)),
        Err(e) => Err(StateError::io("create", path, e)),
    }
}

/// Creates or truncates `path` (mode 0600 when created) for writing.
pub(crate) fn create_private_truncate(path: &Path) -> Result<File> {
    let mut opts = OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(FILE_MODE);
    }
    opts.open(path)
        .map_err(|e| StateError::io("create", path, e))
}

/// fsync of a directory, so that entries created, renamed or removed in it are durable.
pub(crate) fn sync_dir(path: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        let dir = File::open(path).map_err(|e| StateError::io("open directory", path, e))?;
        dir.sync_all()
            .map_err(|e| StateError::io("fsync directory", path, e))
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        Ok(())
    }
}

/// Opens an existing file for reading and writing; `None` when it does not exist.
pub(crate) fn open_rw_if_exists(path: &Path) -> Result<Option<File>> {
    match OpenOptions::new().read(true).write(true).open(path) {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StateError::io("open", path, e)),
    }
}

/// What `stat` says about a messages file right after we wrote it: device, inode, size,
/// mtime and ctime (ns). Remembered by the store with each commit it makes; when its next
/// save of the session (same generation) finds the same values, the file is the one it
/// committed and the committed bytes need not be read again. It is kept in memory, not in
/// `state.db`: it differs on every machine and copy, and a database holding it would not be
/// reproducible. Replacing the file (temp + rename: a new inode), writing to it (size,
/// mtime, ctime) or resetting its mtime afterwards (ctime) all change it. The one change it
/// cannot see is an in-place write of the same size within the timestamp granularity of our
/// own write; every other difference makes the next save read and check the committed bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileIdentity {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) size: u64,
    pub(crate) mtime_ns: i64,
    pub(crate) ctime_ns: i64,
}

impl FileIdentity {
    /// Identity of an open file.
    pub(crate) fn of(meta: &fs::Metadata) -> FileIdentity {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            FileIdentity {
                dev: meta.dev(),
                ino: meta.ino(),
                size: meta.len(),
                mtime_ns: meta.mtime().saturating_mul(1_000_000_000) + meta.mtime_nsec(),
                ctime_ns: meta.ctime().saturating_mul(1_000_000_000) + meta.ctime_nsec(),
            }
        }
        #[cfg(not(unix))]
        {
            let mtime_ns = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
            FileIdentity {
                dev: 0,
                ino: 0,
                size: meta.len(),
                mtime_ns,
                ctime_ns: 0,
            }
        }
    }
}

/// Removes a file; a missing file is not an error. Returns whether it existed.
pub(crate) fn remove_if_exists(path: &Path) -> Result<bool> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(StateError::io("remove", path, e)),
    }
}

/// Reads a whole file; `None` when it does not exist.
pub(crate) fn read_if_exists(path: &Path) -> Result<Option<Vec<u8>>> {
    match fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StateError::io("read", path, e)),
    }
}

/// A 64-bit digest of one line (its bytes including the `\n`).
///
/// Detects accidental change (a file rewritten by another writer, a stale file after a crash),
/// not tampering. Word-at-a-time multiply–rotate mixing; the definition is part of the
/// on-disk bookkeeping in `session_files.file_digest` and must not change.
pub(crate) fn line_digest(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h: u64 = 0xCBF2_9CE4_8422_2325 ^ (bytes.len() as u64).wrapping_mul(K);
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(K).rotate_left(29);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(K).rotate_left(29);
    }
    fmix(h)
}

/// Extends a digest chain by one line digest. The chain of zero lines is [`EMPTY_DIGEST`].
pub(crate) fn chain_digest(chain: u64, line: u64) -> u64 {
    fmix(chain.rotate_left(17) ^ line.wrapping_mul(0xC2B2_AE3D_27D4_EB4F))
}

/// Digest chain of an empty file.
pub(crate) const EMPTY_DIGEST: u64 = 0;

fn fmix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    h ^= h >> 33;
    h = h.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    h ^= h >> 33;
    h
}

/// Digest chain over the `\n`-terminated lines of `bytes` (a trailing fragment without `\n`
/// counts as a line too).
pub(crate) fn digest_lines(bytes: &[u8]) -> (u64, u64) {
    let mut chain = EMPTY_DIGEST;
    let mut count = 0;
    let mut start = 0;
    while start < bytes.len() {
        let end = bytes[start..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(bytes.len(), |p| start + p + 1);
        chain = chain_digest(chain, line_digest(&bytes[start..end]));
        count += 1;
        start = end;
    }
    (chain, count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_chain_is_incremental_by_line() {
        let a = b"{\"role\":\"user\",\"content\":\"hi\"}\n";
        let b = b"{\"role\":\"assistant\",\"content\":\"hello there\"}\n";
        let mut both = a.to_vec();
        both.extend_from_slice(b);
        let step = chain_digest(chain_digest(EMPTY_DIGEST, line_digest(a)), line_digest(b));
        assert_eq!(digest_lines(&both), (step, 2));
        assert_ne!(line_digest(a), line_digest(b));
        assert_eq!(digest_lines(b""), (EMPTY_DIGEST, 0));
    }
}
