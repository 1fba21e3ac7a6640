//! File-system primitives: private modes, fsync of files and directories, digests, and the
//! one way store files are opened (no symbolic link followed, regular files only, bounded
//! reads).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::path::Path;

use crate::error::{Result, StateError};

/// The largest messages file or legacy snapshot this crate reads into memory: 512 MiB, the
/// size of the longest string the reference's JavaScript engine can hold (V8: 2^29 − 24
/// UTF-16 units), so the reference cannot load a larger session either. A larger file is
/// [`StateError::FileTooLarge`] (a `MessageDamageKind::TooLarge` report for `load`), never read.
pub const MAX_SESSION_FILE_BYTES: u64 = 512 << 20;

/// Open options for every file of the store under `messages/` and `state/`: symbolic links
/// are not followed (`O_NOFOLLOW`: a link named `messages/<id>.jsonl` must not make a save
/// write outside the store) and opening does not wait (`O_NONBLOCK`: opening a FIFO for
/// reading would wait for a writer forever; the flag means nothing for regular files).
fn store_options() -> OpenOptions {
    let mut opts = OpenOptions::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC);
    }
    opts
}

/// What a path holds when it is not a regular file, in words (`None` for a regular file).
pub(crate) fn irregular_kind(file_type: fs::FileType) -> Option<&'static str> {
    if file_type.is_file() {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return Some("FIFO");
        }
        if file_type.is_socket() {
            return Some("socket");
        }
        if file_type.is_char_device() {
            return Some("character device");
        }
        if file_type.is_block_device() {
            return Some("block device");
        }
    }
    Some(if file_type.is_symlink() {
        "symbolic link"
    } else if file_type.is_dir() {
        "directory"
    } else {
        "special file"
    })
}

/// Opens a store file with `opts` (plus [`store_options`]' flags) and checks, on the open
/// descriptor, that it is a regular file: a symbolic link, FIFO, socket, device or directory
/// is [`StateError::NotRegularFile`] and nothing is read from or written to it.
///
/// The outer error is the OS error of `open` itself (the caller names the operation); the
/// inner one the refusal.
fn open_store_file(
    path: &Path,
    configure: impl FnOnce(&mut OpenOptions),
) -> io::Result<std::result::Result<(File, fs::Metadata), StateError>> {
    let mut opts = store_options();
    configure(&mut opts);
    let refused = |kind| {
        Ok(Err(StateError::NotRegularFile {
            path: path.to_path_buf(),
            kind,
        }))
    };
    let file = match opts.open(path) {
        Ok(f) => f,
        Err(e) if refused_link(&e) => {
            let kind = fs::symlink_metadata(path)
                .ok()
                .and_then(|m| irregular_kind(m.file_type()))
                .unwrap_or("symbolic link");
            return refused(kind);
        }
        Err(e)
            if !matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::AlreadyExists
            ) =>
        {
            // Opening a FIFO without a reader for writing (ENXIO), a directory for writing
            // (EISDIR): name what is there rather than the errno.
            match fs::symlink_metadata(path).map(|m| irregular_kind(m.file_type())) {
                Ok(Some(kind)) => return refused(kind),
                _ => return Err(e),
            }
        }
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if let Some(kind) = irregular_kind(meta.file_type()) {
        return refused(kind);
    }
    Ok(Ok((file, meta)))
}

/// Whether `open` failed because the last component is a symbolic link and `O_NOFOLLOW` was
/// given (`ELOOP`; FreeBSD says `EMLINK`).
fn refused_link(e: &io::Error) -> bool {
    #[cfg(unix)]
    {
        matches!(e.raw_os_error(), Some(libc::ELOOP | libc::EMLINK))
    }
    #[cfg(not(unix))]
    {
        let _ = e;
        false
    }
}

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
/// Returns the file and whether it was created. A symbolic link or any other file that is
/// not a regular file is [`StateError::NotRegularFile`], untouched.
pub(crate) fn open_private_rw(path: &Path) -> Result<(File, bool)> {
    let private = |o: &mut OpenOptions| {
        o.read(true).write(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            o.mode(FILE_MODE);
        }
    };
    match open_store_file(path, |o| {
        private(o);
        o.create_new(true);
    }) {
        Ok(opened) => opened.map(|(f, _)| (f, true)),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => open_store_file(path, private)
            .map_err(|e| StateError::io("open", path, e))?
            .map(|(f, _)| (f, false)),
        Err(e) => Err(StateError::io("create", path, e)),
    }
}

/// Creates or truncates `path` (mode 0600 when created) for writing. A symbolic link or any
/// other file that is not a regular file is [`StateError::NotRegularFile`], untouched.
pub(crate) fn create_private_truncate(path: &Path) -> Result<File> {
    let opened = open_store_file(path, |o| {
        o.write(true).create(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            o.mode(FILE_MODE);
        }
    })
    .map_err(|e| StateError::io("create", path, e))?;
    let (file, _) = opened?;
    // Truncated only once it is known to be a regular file (`O_TRUNC` would act on a FIFO
    // or device before the check).
    file.set_len(0)
        .map_err(|e| StateError::io("truncate", path, e))?;
    Ok(file)
}

/// Starts the writeback of bytes `offset..offset + len` of `file` without waiting for it
/// (Linux `sync_file_range(SYNC_FILE_RANGE_WRITE)`; nothing elsewhere), so that the disk
/// writes them while the save does its row statements, and the `fdatasync` that follows waits
/// for less. A hint: its result is not needed, because the `fdatasync` after it is what makes
/// the bytes durable and reports any error of their writeback (a writeback error is kept on
/// the file until a sync reports it; `SYNC_FILE_RANGE_WRITE` alone does not consume it).
#[allow(unsafe_code)] // One system call that `rustix` does not offer; see the SAFETY note.
pub(crate) fn start_writeback(file: &File, offset: u64, len: u64) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        if let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) {
            // SAFETY: `file` is an open descriptor for the duration of the call; the call
            // reads no memory of ours.
            let _ = unsafe {
                libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE)
            };
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (file, offset, len);
    }
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

/// Opens an existing regular file for reading and writing, with its `stat` taken through the
/// open descriptor; `None` when it does not exist. A symbolic link or any other file that is
/// not a regular file is [`StateError::NotRegularFile`].
pub(crate) fn open_rw_if_exists(path: &Path) -> Result<Option<(File, fs::Metadata)>> {
    match open_store_file(path, |o| {
        o.read(true).write(true);
    }) {
        Ok(opened) => opened.map(Some),
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
/// The default (all zero) stands for "not taken yet".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
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

/// Reads a whole store file (a messages file, a legacy snapshot); `None` when it does not
/// exist. Never follows a symbolic link, never waits on a FIFO and never reads more than
/// [`MAX_SESSION_FILE_BYTES`].
///
/// # Errors
/// [`StateError::NotRegularFile`] (a link, FIFO, socket, device or directory: nothing is
/// read), [`StateError::FileTooLarge`], [`StateError::Io`].
pub(crate) fn read_if_exists(path: &Path) -> Result<Option<Vec<u8>>> {
    read_bounded(path, MAX_SESSION_FILE_BYTES)
}

/// The first `len` bytes of a regular file (fewer when it is shorter); `None` when it does not
/// exist. Opened like every store file (no links followed, never waits on a FIFO).
///
/// # Errors
/// [`StateError::NotRegularFile`] (nothing is read), [`StateError::Io`].
pub(crate) fn read_prefix_if_exists(path: &Path, len: u64) -> Result<Option<Vec<u8>>> {
    let (file, _) = match open_store_file(path, |o| {
        o.read(true);
    }) {
        Ok(opened) => opened?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StateError::io("open", path, e)),
    };
    let mut bytes = Vec::new();
    file.take(len)
        .read_to_end(&mut bytes)
        .map_err(|e| StateError::io("read", path, e))?;
    Ok(Some(bytes))
}

/// [`read_if_exists`] with an explicit size limit.
pub(crate) fn read_bounded(path: &Path, limit: u64) -> Result<Option<Vec<u8>>> {
    let (file, meta) = match open_store_file(path, |o| {
        o.read(true);
    }) {
        Ok(opened) => opened?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StateError::io("open", path, e)),
    };
    let too_large = |size| StateError::FileTooLarge {
        path: path.to_path_buf(),
        size,
        limit,
    };
    if meta.len() > limit {
        return Err(too_large(meta.len()));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| StateError::io("read", path, e))?;
    if bytes.len() as u64 > limit {
        // It grew while being read.
        return Err(too_large(bytes.len() as u64));
    }
    Ok(Some(bytes))
}

/// [`read_if_exists`] for `load`: a file that must not be read (a link, FIFO, socket or
/// device, or a file larger than [`MAX_SESSION_FILE_BYTES`]) is reported in `damage`
/// (`kept: false`) and reads as empty; the flag says so. Other failures are errors, a
/// directory in the file's place included (as an unreadable file is).
pub(crate) fn read_for_load(
    path: &Path,
    damage: &mut Vec<crate::types::MessageDamage>,
) -> Result<(Vec<u8>, bool)> {
    use crate::types::{MessageDamage, MessageDamageKind};
    let kind = match read_if_exists(path) {
        Ok(bytes) => return Ok((bytes.unwrap_or_default(), false)),
        Err(StateError::NotRegularFile { kind, .. }) if kind != "directory" => {
            MessageDamageKind::NotRegularFile { kind }
        }
        Err(StateError::FileTooLarge { size, limit, .. }) => {
            MessageDamageKind::TooLarge { size, limit }
        }
        Err(e) => return Err(e),
    };
    let detail = match &kind {
        MessageDamageKind::NotRegularFile { kind } => {
            format!("the messages file is a {kind}, not a regular file: it was not read")
        }
        MessageDamageKind::TooLarge { size, limit } => format!(
            "the messages file holds {size} bytes, more than the {limit} a session may have: \
             it was not read"
        ),
        _ => String::new(),
    };
    damage.push(MessageDamage {
        path: path.to_path_buf(),
        line: None,
        byte_offset: 0,
        kind,
        kept: false,
        detail,
    });
    Ok((Vec::new(), true))
}

/// The digest of one line: XXH3-64 (seed 0) of its bytes including the `\n` (a final
/// fragment without `\n` is hashed as it is).
///
/// Detects accidental change (a file rewritten by another writer, a stale file after a crash),
/// not tampering. The definition is part of the on-disk bookkeeping in
/// `session_files.file_digest` (`docs/format.md`, "Our tables"); it changed with `user_version`
/// 6, whose migration recomputes older rows (see [`legacy_digest_lines`]).
pub(crate) fn line_digest(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

/// Extends a digest chain by one line digest: XXH3-64 (seed 0) of the 16 bytes
/// `chain` (little-endian) followed by `line` (little-endian). The chain of zero lines is
/// [`EMPTY_DIGEST`].
pub(crate) fn chain_digest(chain: u64, line: u64) -> u64 {
    let mut buf = [0u8; 16];
    buf[..8].copy_from_slice(&chain.to_le_bytes());
    buf[8..].copy_from_slice(&line.to_le_bytes());
    xxhash_rust::xxh3::xxh3_64(&buf)
}

/// Digest chain of an empty file.
pub(crate) const EMPTY_DIGEST: u64 = 0;

/// Digest chain over the `\n`-terminated lines of `bytes` (a trailing fragment without `\n`
/// counts as a line too): `(digest, line count)`.
pub(crate) fn digest_lines(bytes: &[u8]) -> (u64, u64) {
    chain_lines(bytes, line_digest, chain_digest)
}

fn chain_lines(
    bytes: &[u8],
    line: impl Fn(&[u8]) -> u64,
    chain: impl Fn(u64, u64) -> u64,
) -> (u64, u64) {
    let mut acc = EMPTY_DIGEST;
    let mut count = 0;
    let mut start = 0;
    while let Some(rest) = bytes.get(start..).filter(|r| !r.is_empty()) {
        let len = memchr_newline(rest).map_or(rest.len(), |p| p + 1);
        acc = chain(acc, line(&rest[..len]));
        count += 1;
        start += len;
    }
    (acc, count)
}

fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}

/// The word-at-a-time multiply–rotate digest of one value's bytes: the line digest of
/// `user_version` 5 and earlier, still the building block of `session_files.row_fingerprint`
/// (a value only this implementation reads back; see `docs/format.md`).
pub(crate) fn mix_digest(bytes: &[u8]) -> u64 {
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

/// Extends a chain of [`mix_digest`]s (the chain step of `user_version` 5 and earlier).
pub(crate) fn mix_chain(chain: u64, item: u64) -> u64 {
    fmix(chain.rotate_left(17) ^ item.wrapping_mul(0xC2B2_AE3D_27D4_EB4F))
}

fn fmix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    h ^= h >> 33;
    h = h.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    h ^= h >> 33;
    h
}

/// [`digest_lines`] as `user_version` 5 and earlier computed it (multiply–rotate line
/// digests, chained by [`mix_chain`]): what the migration to 6 verifies older rows against.
pub(crate) fn legacy_digest_lines(bytes: &[u8]) -> (u64, u64) {
    chain_lines(bytes, mix_digest, mix_chain)
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

    /// The worked example of `docs/format.md` ("Our tables", `file_digest`): the same file,
    /// digest and intermediate values, computed independently of the chain helpers.
    #[test]
    fn digest_matches_the_documented_example() {
        let file = b"{\"role\":\"user\",\"content\":\"hi\"}\n{\"role\":\"assistant\",\"content\":\"hello\"}\n";
        let l1 = xxhash_rust::xxh3::xxh3_64(b"{\"role\":\"user\",\"content\":\"hi\"}\n");
        let l2 = xxhash_rust::xxh3::xxh3_64(b"{\"role\":\"assistant\",\"content\":\"hello\"}\n");
        let mut step = [0u8; 16];
        step[8..].copy_from_slice(&l1.to_le_bytes());
        let c1 = xxhash_rust::xxh3::xxh3_64(&step);
        step[..8].copy_from_slice(&c1.to_le_bytes());
        step[8..].copy_from_slice(&l2.to_le_bytes());
        let c2 = xxhash_rust::xxh3::xxh3_64(&step);
        assert_eq!(digest_lines(file), (c2, 2));
        let doc = format!(
            "{l1:016x} {l2:016x} {c1:016x} {c2:016x} {}",
            c2.cast_signed()
        );
        assert_eq!(doc, EXAMPLE, "update docs/format.md with: {doc}");
        assert_eq!(
            digest_lines(b"ab"),
            (chain_digest(0, line_digest(b"ab")), 1)
        );
    }

    /// Values documented in docs/format.md: line 1, line 2, chain after 1, chain after 2
    /// (hex), chain after 2 as stored (signed decimal).
    const EXAMPLE: &str =
        "5b2d1a37d5a00493 3eaf74a69f956807 660e9d6a47a6cde9 6ca12ec9dd474c94 7827589071882374292";

    #[test]
    fn legacy_digest_is_unchanged() {
        // A value computed by user_version 5: the migration verifies old rows against it.
        assert_eq!(
            legacy_digest_lines(b"{\"role\":\"user\",\"content\":\"hi\"}\n").1,
            1
        );
        assert_eq!(legacy_digest_lines(b"").0, EMPTY_DIGEST);
        assert_eq!(legacy_digest_lines(b"x\n").0, LEGACY_X);
    }

    const LEGACY_X: u64 = 0xb087_4b02_fe60_72ba;
}
