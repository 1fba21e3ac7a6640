//! The durable append writer (spec §1 "append-only", §4; compat notes §2.2, §5 items 1, 5, 9).
//!
//! * One [`RunWriter`] per run file across processes: an exclusive advisory lock
//!   ([`File::try_lock`]) is taken on open; a second writer gets [`JsonlError::Locked`] naming
//!   the file. Readers never lock.
//! * Each record is serialized when [`RunWriter::append`] is called and goes out as one `write`
//!   of a complete line ending in `\n` on a file opened with `O_APPEND` (in
//!   [`Durability::Buffered`] several whole lines may share one `write`).
//! * The header comes first and only once.
//! * Reopening ([`RunWriter::open_append`]) seals a torn tail with `\n` first; written history is
//!   never rewritten or truncated.
//! * A failed append (full disk, I/O error, short write) is cut back: the writer owns the file
//!   under its lock, so it truncates its own partial write to the last complete line and stays
//!   usable ([`JsonlError::AppendFailed`]). Bytes another writer wrote are never cut.
//! * New run files are `0600` and new directories `0700` by default, set explicitly (not left
//!   to the umask).
//! * All file operations go through one seam ([`FileSeam`]) that a
//!   [`FaultPlan`](crate::FaultPlan) can make fail, for tests.
//!
//! What a successful `append` promises in each [`Durability`] mode is in the crate README,
//! "Durability guarantees".

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Read, Seek, SeekFrom, Write};
#[cfg(unix)]
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};

use session_schema::{Header, Record, to_line};

use crate::error::{JsonlError, Result};
use crate::fault::{Fault, FaultPlan, FileOp};
use crate::layout::{RUN_EXT, probe_run_id, run_path};
use crate::reader::is_archived;

/// Default [`WriterOptions::file_mode`]: `0600`, run logs hold prompts and tool output.
pub const DEFAULT_FILE_MODE: u32 = 0o600;
/// Default [`WriterOptions::dir_mode`]: `0700`.
pub const DEFAULT_DIR_MODE: u32 = 0o700;

/// How far a successful [`RunWriter::append`] has pushed the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Whole lines collect in the writer's own buffer ([`WriterOptions::buffer_size`]) and go
    /// out in one `write` when it fills, on [`RunWriter::flush`], [`RunWriter::sync`] or drop.
    /// A crash of the process loses what is buffered. The fastest mode; for bulk import.
    Buffered,
    /// One `write(2)` per record: the record is in the OS page cache when `append` returns and
    /// survives the process being killed, but not a power loss or kernel crash.
    Flush,
    /// `write(2)` + `fdatasync(2)` per record: the record is on stable storage when `append`
    /// returns (as far as the device honours flushes).
    SyncData,
    /// `write(2)` per record, then a background thread batches the `fdatasync(2)` of all
    /// records appended meanwhile (from any thread); `append` returns once a sync covering its
    /// record has completed, so the promise equals [`Durability::SyncData`].
    GroupCommit {
        /// After the first pending record, wait at most this long for appenders that are already
        /// inside `append` to write theirs before syncing (no wait when none is; zero: never
        /// wait). Records arriving during a sync form the next batch.
        max_delay: Duration,
        /// Sync without waiting further once this many records are pending.
        max_batch: usize,
    },
}

impl Durability {
    /// Group commit waiting at most 1 ms for appenders already inside `append`, batches of
    /// up to 1024 records.
    pub const fn group_commit() -> Self {
        Durability::GroupCommit {
            max_delay: Duration::from_millis(1),
            max_batch: 1024,
        }
    }

    /// Whether a successful append means the record is on stable storage.
    pub fn is_durable(self) -> bool {
        matches!(self, Durability::SyncData | Durability::GroupCommit { .. })
    }
}

/// Writer settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriterOptions {
    /// The durability mode (default [`Durability::SyncData`]).
    pub durability: Durability,
    /// Buffer size for [`Durability::Buffered`], bytes (default 64 KiB).
    pub buffer_size: usize,
    /// How long to retry taking the file lock before reporting [`JsonlError::Locked`] (a
    /// [`is_locked`] probe holds a shared lock for a moment); default 200 ms.
    pub lock_wait: Duration,
    /// Unix permission bits of a new run file, set explicitly after creating it (whatever the
    /// umask). Default `Some(0o600)` ([`DEFAULT_FILE_MODE`]): prompts and tool output stay
    /// private (docs/format.md, deviation "Private files"). `None`: `0o666` less the umask,
    /// like the reference (usually `0o644`, compat notes §5 item 16).
    pub file_mode: Option<u32>,
    /// Unix permission bits of each directory [`RunWriter::create`] creates, set explicitly.
    /// Default `Some(0o700)` ([`DEFAULT_DIR_MODE`]); `None`: `0o777` less the umask. Existing
    /// directories are never changed.
    pub dir_mode: Option<u32>,
    /// Fault injection for tests ([`FaultPlan`]): file operations of this writer consult the
    /// plan first. `None` (default) in production.
    pub faults: Option<Arc<FaultPlan>>,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            durability: Durability::SyncData,
            buffer_size: 64 << 10,
            lock_wait: Duration::from_millis(200),
            file_mode: Some(DEFAULT_FILE_MODE),
            dir_mode: Some(DEFAULT_DIR_MODE),
            faults: None,
        }
    }
}

impl WriterOptions {
    /// Default options with `durability`.
    pub fn with_durability(durability: Durability) -> Self {
        WriterOptions {
            durability,
            ..WriterOptions::default()
        }
    }
}

/// Locks `m`. parking_lot's locks do not poison: an appender that panicked while holding the
/// lock leaves the state as it was at the panic, which every path here keeps consistent.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock()
}

/// An I/O error kept to be reported again (io::Error is not `Clone`): the OS error number
/// when there is one, so `raw_os_error()` and the message ("No space left on device") survive.
#[derive(Debug, Clone)]
struct SavedError {
    kind: io::ErrorKind,
    raw: Option<i32>,
    message: String,
}

impl SavedError {
    fn of(e: &io::Error) -> Self {
        SavedError {
            kind: e.kind(),
            raw: e.raw_os_error(),
            message: e.to_string(),
        }
    }

    fn to_io(&self) -> io::Error {
        match self.raw {
            Some(code) => io::Error::from_raw_os_error(code),
            None => io::Error::new(self.kind, self.message.clone()),
        }
    }
}

#[derive(Debug)]
struct Failure {
    offset: u64,
    op: &'static str,
    error: SavedError,
}

impl Failure {
    fn to_error(&self, path: &Path) -> JsonlError {
        JsonlError::WriterFailed {
            path: path.to_owned(),
            offset: self.offset,
            source: io::Error::new(
                self.error.kind,
                format!("{} failed: {}", self.op, self.error.message),
            ),
        }
    }
}

/// The run file behind the writer's fault-injection seam: every write, sync and truncation of
/// the writer goes through here, and a [`FaultPlan`] (tests only) can make it fail.
#[derive(Debug)]
pub(crate) struct FileSeam {
    file: File,
    faults: Option<Arc<FaultPlan>>,
}

fn os_error(errno: i32) -> io::Error {
    io::Error::from_raw_os_error(errno)
}

impl FileSeam {
    fn new(file: File, faults: Option<Arc<FaultPlan>>) -> Self {
        FileSeam { file, faults }
    }

    fn fault(&self, op: FileOp) -> Option<Fault> {
        self.faults.as_ref().and_then(|p| p.on_call(op))
    }

    /// Writes all of `buf` (one `write` call normally; short writes are continued).
    fn write_all(&mut self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            let result = match self.fault(FileOp::Write) {
                None => self.file.write(buf),
                Some(Fault::Errno(e)) => Err(os_error(e)),
                Some(Fault::PartialThen { bytes, errno }) => {
                    let n = bytes.min(buf.len());
                    self.file.write_all(&buf[..n])?;
                    Err(os_error(errno))
                }
                Some(Fault::Short { bytes }) => {
                    let n = bytes.clamp(1, buf.len());
                    self.file.write(&buf[..n])
                }
            };
            match result {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => buf = &buf[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn simple(&self, op: FileOp) -> io::Result<()> {
        match self.fault(op) {
            Some(Fault::Errno(e) | Fault::PartialThen { errno: e, .. }) => Err(os_error(e)),
            Some(Fault::Short { .. }) | None => Ok(()),
        }
    }

    fn sync_data(&self) -> io::Result<()> {
        self.simple(FileOp::SyncData)?;
        self.file.sync_data()
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.simple(FileOp::Truncate)?;
        self.file.set_len(len)
    }
}

#[derive(Debug)]
struct WriteState {
    file: FileSeam,
    header_written: bool,
    /// Length of the complete lines in the file as far as this writer knows (buffered lines
    /// not included): where the next line goes, and what a failed write is cut back to.
    len: u64,
    /// Length covered by the last successful `fdatasync` (or present when the file was
    /// opened): what a failed sync cuts unacknowledged records back to.
    synced_len: u64,
    buf: Vec<u8>,
    /// Records in `buf`.
    buf_records: u64,
    records: u64,
    syncs: u64,
    /// Set when acknowledged records may have been lost (a failed `sync()` in a non-durable
    /// mode): further appends are refused.
    failed: Option<Failure>,
    /// A failed write whose cut back failed too: the length to cut back to before anything
    /// else is written.
    cut_pending: Option<u64>,
}

/// Records `lo..=hi` (sequence numbers) whose batch `fdatasync` failed; they were cut back.
#[derive(Debug)]
struct FailedBatch {
    lo: u64,
    hi: u64,
    /// File length after the cut.
    offset: u64,
    error: SavedError,
}

#[derive(Debug, Default)]
struct GroupState {
    /// Records written (sequence number of the last one).
    written: u64,
    /// File length after the last written record.
    written_len: u64,
    /// Records resolved: covered by a successful sync, or failed (in `failed`).
    synced: u64,
    /// File length covered by the last successful sync.
    synced_len: u64,
    /// `fdatasync` calls made by the group commit thread.
    syncs: u64,
    /// Pending records the sync thread waits for before syncing (0: idle, any record wakes it).
    want: u64,
    /// `max_batch` of the mode.
    batch_cap: u64,
    /// A failed batch sync not yet handled: `(error, last record of the batch)`. The sync
    /// thread syncs nothing more until an appender has cut the file back
    /// (`RunWriter::recover_group`): a later sync could succeed without the lost pages.
    error: Option<SavedError>,
    /// Batches that failed and were cut back.
    failed: Vec<FailedBatch>,
    stop: bool,
}

impl GroupState {
    fn failed_batch(&self, seq: u64) -> Option<&FailedBatch> {
        self.failed.iter().find(|b| (b.lo..=b.hi).contains(&seq))
    }
}

#[derive(Debug, Default)]
struct GroupShared {
    state: Mutex<GroupState>,
    /// Appenders inside `append` that have not written their line yet (no lock needed: the
    /// sync thread only uses it to decide whether waiting could grow the batch).
    in_flight: AtomicU64,
    work: Condvar,
    done: Condvar,
}

#[derive(Debug)]
struct Group {
    shared: Arc<GroupShared>,
    thread: Option<JoinHandle<()>>,
}

/// Counts an appender as in flight until its line is written (or it gives up), so the sync
/// thread can wait for it to join the batch.
struct InFlight<'a> {
    shared: Option<&'a GroupShared>,
}

impl<'a> InFlight<'a> {
    fn enter(group: Option<&'a Group>) -> Self {
        let shared = group.map(|g| &*g.shared);
        if let Some(sh) = shared {
            sh.in_flight.fetch_add(1, Ordering::SeqCst);
        }
        InFlight { shared }
    }

    /// The line is written and the file is `len` bytes long: count it and stop being in
    /// flight. Returns the group state, still locked, and the record's sequence number.
    fn written(mut self, len: u64) -> Option<(MutexGuard<'a, GroupState>, u64)> {
        let sh = self.shared.take()?;
        let mut g = lock(&sh.state);
        sh.in_flight.fetch_sub(1, Ordering::SeqCst);
        g.written += 1;
        g.written_len = len;
        // Wake the sync thread only when it can act: its first pending record, or the batch
        // it waits for is complete (fewer context switches on busy machines).
        let pending = g.written - g.synced;
        if pending == 1
            || pending >= g.batch_cap
            || (pending >= g.want && sh.in_flight.load(Ordering::SeqCst) == 0)
        {
            sh.work.notify_all();
        }
        let seq = g.written;
        Some((g, seq))
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Some(sh) = self.shared.take() {
            sh.in_flight.fetch_sub(1, Ordering::SeqCst);
            let _g = lock(&sh.state);
            sh.work.notify_all();
        }
    }
}

/// The single writer of one run file. `Send + Sync`: share it (`Arc`) to append from several
/// threads; appends are serialized in call order.
///
/// # Examples
///
/// One writer shared by four threads with group commit: each `append` returns once its record is
/// on stable storage, and concurrent appends share one `fdatasync`. A second writer for the same
/// file is refused while the first holds the lock.
///
/// ```
/// use std::sync::Arc;
///
/// use session_jsonl::{Durability, JsonlError, RunWriter, WriterOptions, read_run};
/// use session_schema::{Header, Record, RunStatus, RunStatusKind, Timestamp};
///
/// let root = tempfile::tempdir()?;
/// let header = Header {
///     schema_version: 1,
///     run_id: "8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a".into(),
///     started_at: Timestamp::now(),
///     ..Default::default()
/// };
/// let opts = WriterOptions::with_durability(Durability::group_commit());
/// let writer = Arc::new(RunWriter::create(root.path(), &header, opts)?);
/// let running = Record::RunStatus(RunStatus {
///     run_id: header.run_id.clone(),
///     ts: Timestamp::now(),
///     status: RunStatusKind::Running,
///     ..Default::default()
/// });
/// std::thread::scope(|s| {
///     let appends: Vec<_> = (0..4).map(|_| s.spawn(|| writer.append(&running))).collect();
///     appends.into_iter().try_for_each(|a| a.join().unwrap())
/// })?;
///
/// let second = RunWriter::open_append(writer.path(), WriterOptions::default());
/// assert!(matches!(second, Err(JsonlError::Locked { .. })));
///
/// let path = writer.path().to_owned();
/// Arc::into_inner(writer).ok_or("writer still shared")?.close()?;
/// assert_eq!(read_run(&path)?.records.len(), 5);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct RunWriter {
    path: PathBuf,
    opts: WriterOptions,
    state: Mutex<WriteState>,
    group: Option<Group>,
}

fn fsync_dir(dir: &Path, faults: Option<&FaultPlan>) -> Result<()> {
    if let Some(Fault::Errno(e) | Fault::PartialThen { errno: e, .. }) =
        faults.and_then(|p| p.on_call(FileOp::SyncDir))
    {
        return Err(JsonlError::io("fsync directory", dir, os_error(e)));
    }
    let d = File::open(dir).map_err(|e| JsonlError::io("open directory", dir, e))?;
    d.sync_all()
        .map_err(|e| JsonlError::io("fsync directory", dir, e))
}

/// Creates `dir` and its missing ancestors, each with `mode` set explicitly (not left to the
/// umask) when given; with `durable`, fsyncs each new directory's parent so the new entries
/// survive a crash. Existing directories are not changed.
fn create_dirs(
    dir: &Path,
    durable: bool,
    mode: Option<u32>,
    faults: Option<&FaultPlan>,
) -> Result<()> {
    let mut missing = Vec::new();
    let mut cur = Some(dir);
    while let Some(d) = cur {
        if d.as_os_str().is_empty() || d.is_dir() {
            break;
        }
        missing.push(d.to_owned());
        cur = d.parent();
    }
    if missing.is_empty() {
        return Ok(());
    }
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    if let Some(mode) = mode {
        builder.mode(mode);
    }
    builder
        .create(dir)
        .map_err(|e| JsonlError::io("create directory", dir, e))?;
    #[cfg(unix)]
    if let Some(mode) = mode {
        for d in &missing {
            fs::set_permissions(d, fs::Permissions::from_mode(mode))
                .map_err(|e| JsonlError::io("set the permissions of", d, e))?;
        }
    }
    #[cfg(not(unix))]
    let _ = mode;
    if durable {
        for d in missing.iter().rev() {
            if let Some(parent) = d.parent().filter(|p| !p.as_os_str().is_empty()) {
                fsync_dir(parent, faults)?;
            }
        }
    }
    Ok(())
}

/// Takes the exclusive lock, retrying for `wait`. A lock obtained on a file that is no longer
/// at `path` (moved to the trash or replaced while this writer waited) is refused: writing
/// there would put acknowledged records where no reader looks.
fn take_lock(file: &File, path: &Path, wait: Duration) -> Result<()> {
    let deadline = Instant::now() + wait;
    loop {
        match file.try_lock() {
            Ok(()) => return still_at(file, path),
            Err(TryLockError::WouldBlock) => {
                if Instant::now() >= deadline {
                    return Err(JsonlError::Locked {
                        path: path.to_owned(),
                        holder_pid: crate::holder::exclusive_holder_pid(file),
                    });
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(TryLockError::Error(e)) => return Err(JsonlError::io("lock", path, e)),
        }
    }
}

/// Whether the open `file` is still the file at `path` (same device and inode).
fn still_at(file: &File, path: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let open = file
            .metadata()
            .map_err(|e| JsonlError::io("stat", path, e))?;
        let moved = match fs::symlink_metadata(path) {
            Ok(now) => (now.dev(), now.ino()) != (open.dev(), open.ino()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => true,
            Err(e) => return Err(JsonlError::io("stat", path, e)),
        };
        if moved {
            let _ = file.unlock();
            return Err(JsonlError::io(
                "lock",
                path,
                io::Error::new(
                    io::ErrorKind::NotFound,
                    "the file was moved or replaced while waiting for its lock",
                ),
            ));
        }
    }
    #[cfg(not(unix))]
    let _ = (file, path);
    Ok(())
}

fn last_byte(file: &mut File, len: u64) -> io::Result<Option<u8>> {
    if len == 0 {
        return Ok(None);
    }
    let mut b = [0u8; 1];
    file.seek(SeekFrom::Start(len - 1))?;
    file.read_exact(&mut b)?;
    Ok(Some(b[0]))
}

fn check_plain(path: &Path) -> Result<()> {
    if is_archived(path) {
        return Err(JsonlError::Compressed {
            path: path.to_owned(),
        });
    }
    if !path.to_string_lossy().ends_with(RUN_EXT) {
        return Err(JsonlError::NotARunFile {
            path: path.to_owned(),
        });
    }
    Ok(())
}

/// Opens a new run file `path` with `create_new` and the writer's mode. An empty regular file
/// of that name (never a symbolic link) that no writer holds, left by a create that failed or
/// was killed before its header was written, is taken over: it holds nothing, and refusing it
/// would make every retry fail. Returns the file, locked.
fn open_new(path: &Path, opts: &WriterOptions) -> Result<File> {
    if let Some(Fault::Errno(e) | Fault::PartialThen { errno: e, .. }) =
        opts.faults.as_ref().and_then(|p| p.on_call(FileOp::Create))
    {
        return Err(JsonlError::io("create", path, os_error(e)));
    }
    let mut open = OpenOptions::new();
    open.read(true).append(true).create_new(true);
    #[cfg(unix)]
    if let Some(mode) = opts.file_mode {
        open.mode(mode);
    }
    match open.open(path) {
        Ok(file) => {
            take_lock(&file, path, opts.lock_wait)?;
            Ok(file)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let exists = || JsonlError::AlreadyExists {
                path: path.to_owned(),
            };
            let Ok(file) = OpenOptions::new().read(true).append(true).open(path) else {
                return Err(exists());
            };
            match file.try_lock() {
                Ok(()) => {}
                Err(_) => return Err(exists()),
            }
            let md = file
                .metadata()
                .map_err(|e| JsonlError::io("stat", path, e))?;
            // The name itself must be that regular file, not a link to one elsewhere.
            let named = fs::symlink_metadata(path)
                .is_ok_and(|l| l.file_type().is_file() && same_file(&l, &md));
            if named && md.len() == 0 {
                Ok(file)
            } else {
                Err(exists())
            }
        }
        Err(e) => Err(JsonlError::io("create", path, e)),
    }
}

/// Whether two metadata describe the same file (device and inode; always true off Unix, where
/// the caller's other checks must do).
fn same_file(a: &fs::Metadata, b: &fs::Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        a.dev() == b.dev() && a.ino() == b.ino()
    }
    #[cfg(not(unix))]
    {
        let _ = (a, b);
        true
    }
}

impl RunWriter {
    /// Creates the run file `<sessions_root>/YYYY/MM/DD/<run_id>.jsonl` for `header` (see
    /// [`run_path`]), creating directories on demand, takes the writer lock and writes the
    /// header. In durable modes the file, and every directory created, is fsynced together with
    /// its parent so the file itself survives a crash.
    ///
    /// The run id must be unused in the whole store, not only in the header's date directory
    /// (a retried start, a clock jump or a copy would otherwise leave two files for one run):
    /// every date directory is probed for `<run_id>.jsonl` and `<run_id>.jsonl.zst` by name
    /// ([`probe_run_id`]). **Cost:** the root, year and month directories are listed (a few
    /// hundred entries for decades of runs) and each day directory costs two `stat` calls of
    /// names that usually do not exist; no day directory is listed and no run file is opened,
    /// so it does not grow with the number of runs per day (a store with 10 years of daily
    /// use: ~7,300 `stat`s, a few milliseconds). Empty files (a create that was interrupted)
    /// do not count; at the file's own path one is taken over. The check and the create are
    /// not atomic across directories: two writers creating one id at the same moment in two
    /// date directories are not caught (run ids are meant to be unique; this catches retries
    /// and copies).
    ///
    /// A failure after the file was created (a full disk while writing the header, a failed
    /// sync) removes the file again, so a retry finds the name free.
    ///
    /// # Errors
    /// [`JsonlError::UnsafeRunId`] (before touching anything), [`JsonlError::RunIdTaken`] (the
    /// id exists in another directory or as an archive), [`JsonlError::AlreadyExists`],
    /// [`JsonlError::Locked`], [`JsonlError::Serialize`], [`JsonlError::Io`] /
    /// [`JsonlError::AppendFailed`] with the OS cause.
    pub fn create(sessions_root: &Path, header: &Header, opts: WriterOptions) -> Result<Self> {
        let path = run_path(sessions_root, &header.run_id, &header.started_at)?;
        let probe = probe_run_id(sessions_root, &header.run_id)?;
        if let Some(existing) = probe
            .files
            .into_iter()
            .find(|(p, len)| *p != path && *len > 0)
        {
            return Err(JsonlError::RunIdTaken {
                run_id: header.run_id.clone(),
                existing: existing.0,
            });
        }
        RunWriter::create_file(&path, header, opts)
    }

    /// Like [`create`](Self::create) at an explicit path (must end in `.jsonl`; the layout is
    /// not checked, and neither are other directories for the same run id).
    ///
    /// # Errors
    /// As [`create`](Self::create) (but never [`JsonlError::RunIdTaken`]), plus
    /// [`JsonlError::NotARunFile`].
    pub fn create_file(path: &Path, header: &Header, opts: WriterOptions) -> Result<Self> {
        check_plain(path)?;
        let durable = opts.durability.is_durable();
        let dir = path.parent().unwrap_or(Path::new(""));
        create_dirs(dir, durable, opts.dir_mode, opts.faults.as_deref())?;
        let file = open_new(path, &opts)?;
        // From here on the file is ours (created or taken over, and locked): any failure
        // removes it, while it is still locked, so that a retry finds the name free.
        let dir_to_sync = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        let remove = || {
            let _ = fs::remove_file(path);
            if durable {
                let _ = fsync_dir(dir_to_sync, None);
            }
        };
        #[cfg(unix)]
        if let Some(mode) = opts.file_mode
            && let Err(e) = file.set_permissions(fs::Permissions::from_mode(mode))
        {
            remove();
            return Err(JsonlError::io("set the permissions of", path, e));
        }
        let faults = opts.faults.clone();
        let writer = match RunWriter::from_file(
            path,
            file.try_clone().map_err(|e| {
                remove();
                JsonlError::io("duplicate handle of", path, e)
            })?,
            0,
            false,
            opts,
        ) {
            Ok(w) => w,
            Err(e) => {
                remove();
                return Err(e);
            }
        };
        // The header goes out at once in every mode, and a new file's directory entry is made
        // durable before the first append returns.
        let written = writer
            .append_inner(&Record::Header(header.clone()), true)
            .and_then(|()| {
                if durable {
                    fsync_dir(dir_to_sync, faults.as_deref())
                } else {
                    Ok(())
                }
            });
        if let Err(e) = written {
            remove();
            drop(writer);
            return Err(e);
        }
        // `file` (the original handle) holds the lock with the writer's duplicate; the lock
        // belongs to the open file description, so dropping it releases nothing.
        drop(file);
        Ok(writer)
    }

    /// Opens an existing run file for appending (a resumed run, a restart after a crash).
    ///
    /// Takes the writer lock, then checks the tail: when the last byte is not `\n` (a torn
    /// write, NUL padding) it appends `\n` so the fragment stays a separate damaged line and the
    /// next record starts clean. Nothing already written is changed.
    ///
    /// A header is expected next only when the first line is not a record (an empty file, or a
    /// torn fragment of the header itself); otherwise a header is refused.
    ///
    /// # Errors
    /// [`JsonlError::Compressed`] for `.jsonl.zst`, [`JsonlError::NotARunFile`],
    /// [`JsonlError::Locked`], [`JsonlError::Io`] (including a missing file).
    ///
    /// # Examples
    ///
    /// The process died in the middle of a line; the restarted writer seals it and goes on.
    ///
    /// ```
    /// use std::io::Write;
    ///
    /// use session_jsonl::{DamageKind, RunWriter, WriterOptions, read_run};
    /// use session_schema::{Header, Record, RunEnd, RunOutcome, Timestamp};
    ///
    /// let root = tempfile::tempdir()?;
    /// let header = Header {
    ///     schema_version: 1,
    ///     run_id: "8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a".into(),
    ///     started_at: Timestamp::now(),
    ///     ..Default::default()
    /// };
    /// let path = RunWriter::create(root.path(), &header, WriterOptions::default())?
    ///     .path()
    ///     .to_owned();
    /// std::fs::OpenOptions::new()
    ///     .append(true)
    ///     .open(&path)?
    ///     .write_all(br#"{"type":"run.status","run_"#)?;
    ///
    /// let writer = RunWriter::open_append(&path, WriterOptions::default())?;
    /// writer.append(&Record::RunEnd(RunEnd {
    ///     run_id: header.run_id.clone(),
    ///     ts: Timestamp::now(),
    ///     outcome: RunOutcome::Completed,
    ///     ..Default::default()
    /// }))?;
    /// writer.close()?;
    ///
    /// let run = read_run(&path)?;
    /// assert_eq!(run.records.len(), 2); // the header and the run.end
    /// assert_eq!(run.damage[0].kind, DamageKind::SealedFragment); // a note, not a problem
    /// assert_eq!(run.damage[0].line, 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_append(path: &Path, opts: WriterOptions) -> Result<Self> {
        check_plain(path)?;
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(path)
            .map_err(|e| JsonlError::io("open", path, e))?;
        take_lock(&file, path, opts.lock_wait)?;
        let mut len = file
            .metadata()
            .map_err(|e| JsonlError::io("stat", path, e))?
            .len();
        let last = last_byte(&mut file, len).map_err(|e| JsonlError::io("read", path, e))?;
        let mut seam = FileSeam::new(file, opts.faults.clone());
        if last.is_some_and(|b| b != b'\n') {
            seam.write_all(b"\n")
                .map_err(|e| JsonlError::io("write", path, e))?;
            len += 1;
            if opts.durability.is_durable() {
                seam.sync_data()
                    .map_err(|e| JsonlError::io("fdatasync", path, e))?;
            }
        }
        let header_written = if len == 0 {
            false
        } else {
            let head = crate::scan::read_header(path)?;
            head.first_line_is_record
        };
        RunWriter::from_file(path, seam.file, len, header_written, opts)
    }

    fn from_file(
        path: &Path,
        file: File,
        len: u64,
        header_written: bool,
        opts: WriterOptions,
    ) -> Result<Self> {
        let group = match opts.durability {
            Durability::GroupCommit {
                max_delay,
                max_batch,
            } => {
                let sync_file = FileSeam::new(
                    file.try_clone()
                        .map_err(|e| JsonlError::io("duplicate handle of", path, e))?,
                    opts.faults.clone(),
                );
                let shared = Arc::new(GroupShared::default());
                {
                    let mut g = lock(&shared.state);
                    g.written_len = len;
                    g.synced_len = len;
                }
                let thread_shared = Arc::clone(&shared);
                let thread = std::thread::Builder::new()
                    .name("run-group-commit".to_owned())
                    .spawn(move || {
                        group_commit_loop(&thread_shared, &sync_file, max_delay, max_batch)
                    })
                    .map_err(|e| JsonlError::io("start group commit thread for", path, e))?;
                Some(Group {
                    shared,
                    thread: Some(thread),
                })
            }
            _ => None,
        };
        Ok(RunWriter {
            path: path.to_owned(),
            state: Mutex::new(WriteState {
                file: FileSeam::new(file, opts.faults.clone()),
                header_written,
                len,
                synced_len: len,
                buf: Vec::new(),
                buf_records: 0,
                records: 0,
                syncs: 0,
                failed: None,
                cut_pending: None,
            }),
            opts,
            group,
        })
    }

    /// The run file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The options in use.
    pub fn options(&self) -> &WriterOptions {
        &self.opts
    }

    /// Records appended through this writer (including the header it wrote); appends that
    /// failed and were cut back are not counted.
    pub fn records_written(&self) -> u64 {
        lock(&self.state).records
    }

    /// `fdatasync` calls made so far for appended records: one per record with
    /// [`Durability::SyncData`] (the header's not counted), one per batch with
    /// [`Durability::GroupCommit`] (the header's batch counted), none otherwise; explicit
    /// [`sync`](Self::sync) calls are not counted.
    pub fn sync_count(&self) -> u64 {
        match &self.group {
            Some(g) => lock(&g.shared.state).syncs,
            None => lock(&self.state).syncs,
        }
    }

    /// Appends one record as one line.
    ///
    /// The record is serialized now (later changes to the caller's data cannot leak into it,
    /// compat notes §5 item 9). The first record of a new file must be the header and a header
    /// is accepted only there. When this returns `Ok`, the record is as durable as the
    /// [`Durability`] mode promises.
    ///
    /// # Errors
    /// [`JsonlError::HeaderFirst`], [`JsonlError::SecondHeader`], [`JsonlError::Serialize`]
    /// (nothing written). [`JsonlError::AppendFailed`] when the `write` or the `fdatasync`
    /// that was to make the record durable failed: the writer cut its partial write back to
    /// the last complete line, the record is not in the file, and the writer can be used again
    /// (appending once space returns succeeds). [`JsonlError::CutBackFailed`] when an earlier
    /// cut back is still pending and fails again. [`JsonlError::WriterFailed`] after a failed
    /// [`sync`](Self::sync) in a non-durable mode (see there).
    pub fn append(&self, record: &Record) -> Result<()> {
        self.append_inner(record, false)
    }

    fn append_inner(&self, record: &Record, immediate: bool) -> Result<()> {
        let line = to_line(record).map_err(|source| JsonlError::Serialize {
            path: self.path.clone(),
            kind: record.kind().to_owned(),
            source,
        })?;
        let in_flight = InFlight::enter(self.group.as_ref());
        let mut st = lock(&self.state);
        if let Some(f) = &st.failed {
            return Err(f.to_error(&self.path));
        }
        self.settle(&mut st)?;
        let is_header = matches!(record, Record::Header(_));
        if is_header && st.header_written {
            return Err(JsonlError::SecondHeader {
                path: self.path.clone(),
            });
        }
        if !is_header && !st.header_written {
            return Err(JsonlError::HeaderFirst {
                path: self.path.clone(),
                kind: record.kind().to_owned(),
            });
        }
        match self.opts.durability {
            Durability::Buffered if !immediate => {
                st.buf.extend_from_slice(&line);
                st.buf_records += 1;
                if st.buf.len() >= self.opts.buffer_size
                    && let Err(e) = write_buffer(&mut st)
                {
                    // This record is not appended; the earlier ones stay buffered.
                    let keep = st.buf.len() - line.len();
                    st.buf.truncate(keep);
                    st.buf_records -= 1;
                    return Err(self.write_failed(&mut st, e));
                }
            }
            Durability::Buffered | Durability::Flush => {
                if let Err(e) = write_line(&mut st, &line) {
                    return Err(self.write_failed(&mut st, e));
                }
            }
            Durability::SyncData => {
                if let Err(e) = write_line(&mut st, &line) {
                    return Err(self.write_failed(&mut st, e));
                }
                if let Err(e) = st.file.sync_data() {
                    return Err(self.sync_failed(&mut st, e));
                }
                st.synced_len = st.len;
                if !immediate {
                    st.syncs += 1;
                }
            }
            Durability::GroupCommit { .. } => {
                if let Err(e) = write_line(&mut st, &line) {
                    return Err(self.write_failed(&mut st, e));
                }
                st.header_written = true;
                st.records += 1;
                return self.wait_group(st, in_flight);
            }
        }
        st.header_written = true;
        st.records += 1;
        Ok(())
    }

    /// Before writing: handles a failed group-commit batch and retries a pending cut back.
    fn settle(&self, st: &mut WriteState) -> Result<()> {
        if let Some(group) = &self.group {
            let mut g = lock(&group.shared.state);
            self.recover_group(st, &mut g, &group.shared);
        }
        if let Some(len) = st.cut_pending {
            st.file
                .set_len(len)
                .map_err(|source| JsonlError::CutBackFailed {
                    path: self.path.clone(),
                    offset: len,
                    source,
                })?;
            st.len = len;
            st.cut_pending = None;
        }
        Ok(())
    }

    /// Cuts the file back to `len` (the writer's own partial write); returns the error of the
    /// cut when it failed (the cut is then retried before the next write).
    fn cut_back(st: &mut WriteState, len: u64) -> Option<io::Error> {
        match st.file.set_len(len) {
            Ok(()) => {
                st.len = len;
                st.synced_len = st.synced_len.min(len);
                st.cut_pending = None;
                None
            }
            Err(e) => {
                st.cut_pending = Some(len);
                Some(e)
            }
        }
    }

    /// A `write` failed: cut back to the last complete line (`st.len`).
    fn write_failed(&self, st: &mut WriteState, e: io::Error) -> JsonlError {
        let offset = st.len;
        let cut_error = Self::cut_back(st, offset);
        JsonlError::AppendFailed {
            path: self.path.clone(),
            op: "write",
            offset,
            buffered: st.buf_records,
            cut_error,
            source: e,
        }
    }

    /// The per-record `fdatasync` of [`Durability::SyncData`] failed: the record is not
    /// acknowledged, so it is cut back (everything before it was synced).
    fn sync_failed(&self, st: &mut WriteState, e: io::Error) -> JsonlError {
        let offset = st.synced_len;
        let cut_error = Self::cut_back(st, offset);
        JsonlError::AppendFailed {
            path: self.path.clone(),
            op: "fdatasync",
            offset,
            buffered: 0,
            cut_error,
            source: e,
        }
    }

    /// Handles a failed group-commit batch (called with the write state and then the group
    /// state locked): every record written since the last successful sync was not
    /// acknowledged (its appender is still waiting), so all of them are failed and cut back.
    fn recover_group(&self, st: &mut WriteState, g: &mut GroupState, shared: &GroupShared) {
        let Some(error) = g.error.take() else {
            return;
        };
        let (lo, hi) = (g.synced + 1, g.written);
        let offset = g.synced_len;
        if hi >= lo {
            g.failed.push(FailedBatch {
                lo,
                hi,
                offset,
                error,
            });
            st.records = st.records.saturating_sub(hi - lo + 1);
        }
        g.synced = g.written;
        g.written_len = offset;
        let _ = Self::cut_back(st, offset);
        shared.done.notify_all();
        shared.work.notify_all();
    }

    fn wait_group(&self, st: MutexGuard<'_, WriteState>, in_flight: InFlight<'_>) -> Result<()> {
        let len = st.len;
        let (Some(group), Some((g, seq))) = (&self.group, in_flight.written(len)) else {
            return Ok(());
        };
        // Let other appenders write while this one waits for its sync.
        drop(st);
        self.wait_for(group, g, seq)
    }

    /// Waits until record `seq` is covered by a successful sync or its batch failed.
    fn wait_for<'g>(
        &self,
        group: &'g Group,
        mut g: MutexGuard<'g, GroupState>,
        seq: u64,
    ) -> Result<()> {
        loop {
            if let Some(b) = g.failed_batch(seq) {
                return Err(JsonlError::AppendFailed {
                    path: self.path.clone(),
                    op: "fdatasync",
                    offset: b.offset,
                    buffered: 0,
                    cut_error: None,
                    source: b.error.to_io(),
                });
            }
            if g.synced >= seq {
                return Ok(());
            }
            if g.error.is_some() {
                // Cut the failed batch back (lock order: write state, then group state).
                drop(g);
                {
                    let mut st = lock(&self.state);
                    let mut g = lock(&group.shared.state);
                    self.recover_group(&mut st, &mut g, &group.shared);
                }
                g = lock(&group.shared.state);
                continue;
            }
            group.shared.done.wait(&mut g);
        }
    }

    /// Writes out buffered lines ([`Durability::Buffered`]); a no-op in other modes.
    ///
    /// # Errors
    /// [`JsonlError::AppendFailed`] (the lines stay buffered for the next attempt; the file
    /// was cut back), [`JsonlError::CutBackFailed`], [`JsonlError::WriterFailed`].
    pub fn flush(&self) -> Result<()> {
        let mut st = lock(&self.state);
        if let Some(f) = &st.failed {
            return Err(f.to_error(&self.path));
        }
        self.settle(&mut st)?;
        write_buffer(&mut st).map_err(|e| self.write_failed(&mut st, e))
    }

    /// Writes out buffered lines and `fdatasync`s the file, in any mode: everything appended so
    /// far is on stable storage when this returns.
    ///
    /// # Errors
    /// As [`flush`](Self::flush), and the `fdatasync` error: in [`Durability::GroupCommit`]
    /// the records waiting for it fail and are cut back as in `append`; in
    /// [`Durability::Buffered`] and [`Durability::Flush`] records appended since the last
    /// successful sync were acknowledged already, so they are kept, but after a failed
    /// `fdatasync` the kernel may have dropped their pages and a later sync could report
    /// success for data that is gone: the writer refuses further appends with
    /// [`JsonlError::WriterFailed`] (reopen it with [`open_append`](Self::open_append)).
    /// In [`Durability::SyncData`] every record was synced already; the error is returned and
    /// the writer stays usable.
    pub fn sync(&self) -> Result<()> {
        let mut st = lock(&self.state);
        if let Some(f) = &st.failed {
            return Err(f.to_error(&self.path));
        }
        self.settle(&mut st)?;
        write_buffer(&mut st).map_err(|e| self.write_failed(&mut st, e))?;
        if let Some(group) = &self.group {
            let g = lock(&group.shared.state);
            if g.written > g.synced {
                let seq = g.written;
                drop(st);
                return self.wait_for(group, g, seq);
            }
        }
        match st.file.sync_data() {
            Ok(()) => {
                st.synced_len = st.len;
                Ok(())
            }
            Err(e) => {
                if st.synced_len < st.len && !self.opts.durability.is_durable() {
                    st.failed = Some(Failure {
                        offset: st.len,
                        op: "fdatasync",
                        error: SavedError::of(&e),
                    });
                }
                Err(JsonlError::io("fdatasync", &self.path, e))
            }
        }
    }

    /// Flushes buffered lines and closes the file (releasing the lock), reporting any error
    /// that dropping would swallow.
    ///
    /// # Errors
    /// As [`flush`](Self::flush).
    pub fn close(self) -> Result<()> {
        self.flush()
    }
}

/// Writes `line` after any buffered lines, in one `write`; on success the buffer is empty and
/// `len` counts both. On failure nothing is counted and the buffer is kept as it was.
fn write_line(st: &mut WriteState, line: &[u8]) -> io::Result<()> {
    if st.buf.is_empty() {
        st.file.write_all(line)?;
        st.len += line.len() as u64;
        return Ok(());
    }
    // Lines buffered earlier must precede this one.
    let keep = st.buf.len();
    st.buf.extend_from_slice(line);
    let buf = std::mem::take(&mut st.buf);
    let result = st.file.write_all(&buf);
    st.buf = buf;
    match result {
        Ok(()) => {
            st.len += st.buf.len() as u64;
            st.buf.clear();
            st.buf_records = 0;
            Ok(())
        }
        Err(e) => {
            st.buf.truncate(keep);
            Err(e)
        }
    }
}

/// Writes out the buffer; on failure the buffer is kept (the caller cuts the file back).
fn write_buffer(st: &mut WriteState) -> io::Result<()> {
    if st.buf.is_empty() {
        return Ok(());
    }
    let buf = std::mem::take(&mut st.buf);
    let result = st.file.write_all(&buf);
    st.buf = buf;
    result?;
    st.len += st.buf.len() as u64;
    st.buf.clear();
    st.buf_records = 0;
    Ok(())
}

fn group_commit_loop(shared: &GroupShared, file: &FileSeam, max_delay: Duration, max_batch: usize) {
    let max_batch = max_batch.max(1) as u64;
    let mut last_batch = 1u64;
    let mut g = lock(&shared.state);
    g.batch_cap = max_batch;
    g.want = max_batch;
    loop {
        // After a failed sync nothing is synced until the failed records were cut back: a
        // later `fdatasync` could succeed although the failed batch's pages were dropped.
        while (g.written == g.synced || g.error.is_some()) && !g.stop {
            shared.work.wait(&mut g);
        }
        if g.written == g.synced || g.error.is_some() {
            // Stopping and nothing (that may be synced) pending.
            return;
        }
        if !max_delay.is_zero() {
            // Wait, at most `max_delay`, while appenders are inside `append` or fewer records
            // are pending than the last batch had (the appenders it released are coming back).
            // A lone appender's batches have one record, so it is synced at once.
            let want = last_batch.clamp(1, max_batch);
            g.want = want;
            let deadline = Instant::now() + max_delay;
            while !g.stop {
                let pending = g.written - g.synced;
                if pending >= max_batch
                    || (pending >= want && shared.in_flight.load(Ordering::SeqCst) == 0)
                {
                    break;
                }
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                shared.work.wait_for(&mut g, deadline - now);
            }
        }
        let target = g.written;
        let target_len = g.written_len;
        last_batch = target - g.synced;
        g.want = max_batch;
        drop(g);
        let result = file.sync_data();
        g = lock(&shared.state);
        match result {
            Ok(()) => {
                // A failed batch handled meanwhile resolved these records already.
                if g.synced < target {
                    g.synced = target;
                    g.synced_len = target_len;
                }
                g.syncs += 1;
            }
            Err(e) => g.error = Some(SavedError::of(&e)),
        }
        shared.done.notify_all();
    }
}

impl Drop for RunWriter {
    fn drop(&mut self) {
        {
            let mut st = lock(&self.state);
            if st.failed.is_none() && st.cut_pending.is_none() {
                // Best effort: `close` reports this error; drop cannot. A failed write is cut
                // back so the file still ends on a line boundary.
                let len = st.len;
                if write_buffer(&mut st).is_err() {
                    let _ = Self::cut_back(&mut st, len);
                }
            } else if let Some(len) = st.cut_pending {
                let _ = Self::cut_back(&mut st, len);
            }
        }
        if let Some(group) = &mut self.group {
            lock(&group.shared.state).stop = true;
            group.shared.work.notify_all();
            if let Some(t) = group.thread.take() {
                let _ = t.join();
            }
        }
    }
}

/// Whether the file's last byte is not `\n` (a torn tail or NUL padding that
/// [`seal_torn_tail`] would seal). Empty files need no seal. Reads one byte; never locks.
///
/// # Errors
/// [`JsonlError::Io`]; [`JsonlError::Compressed`] for archives (they are never appended to).
pub fn needs_seal(path: &Path) -> Result<bool> {
    if is_archived(path) {
        return Err(JsonlError::Compressed {
            path: path.to_owned(),
        });
    }
    let mut file = File::open(path).map_err(|e| JsonlError::io("open", path, e))?;
    let len = file
        .metadata()
        .map_err(|e| JsonlError::io("stat", path, e))?
        .len();
    let last = last_byte(&mut file, len).map_err(|e| JsonlError::io("read", path, e))?;
    Ok(last.is_some_and(|b| b != b'\n'))
}

/// Appends `\n` when the file's last byte is not `\n`, so a torn fragment becomes a separate
/// (damaged) line; returns whether it did. Never truncates or rewrites. Takes the writer lock
/// for the moment of the check and fsyncs the appended byte.
///
/// # Errors
/// [`JsonlError::Locked`] when a writer has the file open, [`JsonlError::Compressed`],
/// [`JsonlError::NotARunFile`], [`JsonlError::Io`].
pub fn seal_torn_tail(path: &Path) -> Result<bool> {
    check_plain(path)?;
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .open(path)
        .map_err(|e| JsonlError::io("open", path, e))?;
    take_lock(&file, path, WriterOptions::default().lock_wait)?;
    let len = file
        .metadata()
        .map_err(|e| JsonlError::io("stat", path, e))?
        .len();
    let last = last_byte(&mut file, len).map_err(|e| JsonlError::io("read", path, e))?;
    if last.is_none_or(|b| b == b'\n') {
        return Ok(false);
    }
    file.write_all(b"\n")
        .map_err(|e| JsonlError::io("write", path, e))?;
    file.sync_data()
        .map_err(|e| JsonlError::io("fdatasync", path, e))?;
    Ok(true)
}

/// Whether a writer currently holds the file's lock (a run being written). Probes with a
/// non-blocking shared lock that is released at once; writers retry for
/// [`WriterOptions::lock_wait`], so the probe does not make them fail.
///
/// Runs written by the reference implementation are never locked.
///
/// # Errors
/// [`JsonlError::Io`] when the file cannot be opened or the lock call fails otherwise.
pub fn is_locked(path: &Path) -> Result<bool> {
    let file = File::open(path).map_err(|e| JsonlError::io("open", path, e))?;
    match file.try_lock_shared() {
        Ok(()) => {
            let _ = file.unlock();
            Ok(false)
        }
        Err(TryLockError::WouldBlock) => Ok(true),
        Err(TryLockError::Error(e)) => Err(JsonlError::io("probe lock of", path, e)),
    }
}
