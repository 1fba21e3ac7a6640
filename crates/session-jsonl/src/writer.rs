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
//!
//! What a successful `append` promises in each [`Durability`] mode is in the crate README,
//! "Durability guarantees".

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use session_schema::{Header, Record, to_line};

use crate::error::{JsonlError, Result};
use crate::layout::{RUN_EXT, run_path};
use crate::reader::is_archived;

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
    /// Unix permission bits for a new run file (before the umask), e.g. `0o600` to keep prompts
    /// and tool output private. `None` (default): `0o666` before the umask, like the reference
    /// (usually `0o644`, compat notes §5 item 16).
    pub file_mode: Option<u32>,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            durability: Durability::SyncData,
            buffer_size: 64 << 10,
            lock_wait: Duration::from_millis(200),
            file_mode: None,
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

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[derive(Debug)]
struct Failure {
    offset: u64,
    kind: io::ErrorKind,
    message: String,
}

impl Failure {
    fn to_error(&self, path: &Path) -> JsonlError {
        JsonlError::WriterFailed {
            path: path.to_owned(),
            offset: self.offset,
            source: io::Error::new(self.kind, self.message.clone()),
        }
    }
}

#[derive(Debug)]
struct WriteState {
    file: File,
    header_written: bool,
    /// File length as far as this writer knows (bytes written, buffered not included).
    len: u64,
    buf: Vec<u8>,
    records: u64,
    syncs: u64,
    failed: Option<Failure>,
}

#[derive(Debug, Default)]
struct GroupState {
    written: u64,
    synced: u64,
    /// `fdatasync` calls made by the group commit thread.
    syncs: u64,
    /// Pending records the sync thread waits for before syncing (0: idle, any record wakes it).
    want: u64,
    /// `max_batch` of the mode.
    batch_cap: u64,
    error: Option<(io::ErrorKind, String)>,
    stop: bool,
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

    /// The line is written: count it and stop being in flight. Returns the group state, still
    /// locked, and the record's sequence number.
    fn written(mut self) -> Option<(MutexGuard<'a, GroupState>, u64)> {
        let sh = self.shared.take()?;
        let mut g = lock(&sh.state);
        sh.in_flight.fetch_sub(1, Ordering::SeqCst);
        g.written += 1;
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

fn fsync_dir(dir: &Path) -> Result<()> {
    let d = File::open(dir).map_err(|e| JsonlError::io("open directory", dir, e))?;
    d.sync_all()
        .map_err(|e| JsonlError::io("fsync directory", dir, e))
}

/// Creates `dir` and its missing ancestors; with `durable`, fsyncs each new directory's parent
/// so the new entries survive a crash.
pub(crate) fn create_dirs(dir: &Path, durable: bool) -> Result<()> {
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
    fs::create_dir_all(dir).map_err(|e| JsonlError::io("create directory", dir, e))?;
    if durable {
        for d in missing.iter().rev() {
            if let Some(parent) = d.parent().filter(|p| !p.as_os_str().is_empty()) {
                fsync_dir(parent)?;
            }
        }
    }
    Ok(())
}

fn take_lock(file: &File, path: &Path, wait: Duration) -> Result<()> {
    let deadline = Instant::now() + wait;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(TryLockError::WouldBlock) => {
                if Instant::now() >= deadline {
                    return Err(JsonlError::Locked {
                        path: path.to_owned(),
                    });
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(TryLockError::Error(e)) => return Err(JsonlError::io("lock", path, e)),
        }
    }
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

impl RunWriter {
    /// Creates the run file `<sessions_root>/YYYY/MM/DD/<run_id>.jsonl` for `header` (see
    /// [`run_path`]), creating directories on demand, takes the writer lock and writes the
    /// header. In durable modes the file, and every directory created, is fsynced together with
    /// its parent so the file itself survives a crash.
    ///
    /// # Errors
    /// [`JsonlError::UnsafeRunId`] (before touching anything), [`JsonlError::AlreadyExists`],
    /// [`JsonlError::Locked`], [`JsonlError::Serialize`], [`JsonlError::Io`].
    pub fn create(sessions_root: &Path, header: &Header, opts: WriterOptions) -> Result<Self> {
        let path = run_path(sessions_root, &header.run_id, &header.started_at)?;
        RunWriter::create_file(&path, header, opts)
    }

    /// Like [`create`](Self::create) at an explicit path (must end in `.jsonl`; the layout is
    /// not checked).
    ///
    /// # Errors
    /// As [`create`](Self::create), plus [`JsonlError::NotARunFile`].
    pub fn create_file(path: &Path, header: &Header, opts: WriterOptions) -> Result<Self> {
        check_plain(path)?;
        let durable = opts.durability.is_durable();
        let dir = path.parent().unwrap_or(Path::new(""));
        create_dirs(dir, durable)?;
        let mut open = OpenOptions::new();
        open.read(true).append(true).create_new(true);
        #[cfg(unix)]
        if let Some(mode) = opts.file_mode {
            std::os::unix::fs::OpenOptionsExt::mode(&mut open, mode);
        }
        let file = open.open(path).map_err(|e| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                JsonlError::AlreadyExists {
                    path: path.to_owned(),
                }
            } else {
                JsonlError::io("create", path, e)
            }
        })?;
        take_lock(&file, path, opts.lock_wait)?;
        let writer = RunWriter::from_file(path, file, 0, false, opts)?;
        // The header goes out at once in every mode, and a new file's directory entry is made
        // durable before the first append returns.
        writer.append_inner(&Record::Header(header.clone()), true)?;
        if durable {
            let dir_to_sync = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            fsync_dir(dir_to_sync)?;
        }
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
    /// assert_eq!(run.damage[0].kind, DamageKind::CorruptLine); // the sealed fragment
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
        if last.is_some_and(|b| b != b'\n') {
            file.write_all(b"\n")
                .map_err(|e| JsonlError::io("write", path, e))?;
            len += 1;
            if opts.durability.is_durable() {
                file.sync_data()
                    .map_err(|e| JsonlError::io("fdatasync", path, e))?;
            }
        }
        let header_written = if len == 0 {
            false
        } else {
            let head = crate::scan::read_header(path)?;
            head.first_line_is_record
        };
        RunWriter::from_file(path, file, len, header_written, opts)
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
                let sync_file = file
                    .try_clone()
                    .map_err(|e| JsonlError::io("duplicate handle of", path, e))?;
                let shared = Arc::new(GroupShared::default());
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
                file,
                header_written,
                len,
                buf: Vec::new(),
                records: 0,
                syncs: 0,
                failed: None,
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

    /// Records appended through this writer (including the header it wrote).
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
    /// (nothing written), [`JsonlError::Io`] for a failed write or sync, after which the writer
    /// refuses further appends with [`JsonlError::WriterFailed`].
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
        let result = match self.opts.durability {
            Durability::Buffered if !immediate => {
                st.buf.extend_from_slice(&line);
                if st.buf.len() >= self.opts.buffer_size {
                    write_buffer(&mut st).map_err(|e| ("write", e))
                } else {
                    Ok(())
                }
            }
            Durability::Buffered | Durability::Flush => {
                write_line(&mut st, &line).map_err(|e| ("write", e))
            }
            Durability::SyncData => write_line(&mut st, &line)
                .map_err(|e| ("write", e))
                .and_then(|()| st.file.sync_data().map_err(|e| ("fdatasync", e)))
                .map(|()| {
                    if !immediate {
                        st.syncs += 1;
                    }
                }),
            Durability::GroupCommit { .. } => {
                if let Err(e) = write_line(&mut st, &line) {
                    Err(("write", e))
                } else {
                    st.header_written = true;
                    st.records += 1;
                    return self.wait_group(st, in_flight);
                }
            }
        };
        match result {
            Ok(()) => {
                st.header_written = true;
                st.records += 1;
                Ok(())
            }
            Err((op, e)) => Err(self.fail(&mut st, op, e)),
        }
    }

    fn fail(&self, st: &mut WriteState, op: &'static str, e: io::Error) -> JsonlError {
        st.failed = Some(Failure {
            offset: st.len,
            kind: e.kind(),
            message: format!("{op} failed: {e}"),
        });
        JsonlError::io(op, &self.path, e)
    }

    fn wait_group(&self, st: MutexGuard<'_, WriteState>, in_flight: InFlight<'_>) -> Result<()> {
        let (Some(group), Some((mut g, seq))) = (&self.group, in_flight.written()) else {
            return Ok(());
        };
        // Let other appenders write while this one waits for its sync.
        drop(st);
        while g.synced < seq && g.error.is_none() {
            g = group
                .shared
                .done
                .wait(g)
                .unwrap_or_else(PoisonError::into_inner);
        }
        if g.synced >= seq {
            return Ok(());
        }
        let (kind, message) = g
            .error
            .clone()
            .unwrap_or((io::ErrorKind::Other, String::new()));
        drop(g);
        let mut st = lock(&self.state);
        let err = io::Error::new(kind, message);
        Err(self.fail(&mut st, "fdatasync", err))
    }

    /// Writes out buffered lines ([`Durability::Buffered`]); a no-op in other modes.
    ///
    /// # Errors
    /// [`JsonlError::Io`] / [`JsonlError::WriterFailed`].
    pub fn flush(&self) -> Result<()> {
        let mut st = lock(&self.state);
        if let Some(f) = &st.failed {
            return Err(f.to_error(&self.path));
        }
        write_buffer(&mut st).map_err(|e| self.fail(&mut st, "write", e))
    }

    /// Writes out buffered lines and `fdatasync`s the file, in any mode: everything appended so
    /// far is on stable storage when this returns.
    ///
    /// # Errors
    /// [`JsonlError::Io`] / [`JsonlError::WriterFailed`].
    pub fn sync(&self) -> Result<()> {
        let mut st = lock(&self.state);
        if let Some(f) = &st.failed {
            return Err(f.to_error(&self.path));
        }
        write_buffer(&mut st).map_err(|e| self.fail(&mut st, "write", e))?;
        st.file
            .sync_data()
            .map_err(|e| self.fail(&mut st, "fdatasync", e))
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

fn write_line(st: &mut WriteState, line: &[u8]) -> io::Result<()> {
    // Lines buffered earlier must precede this one.
    write_buffer(st)?;
    st.file.write_all(line)?;
    st.len += line.len() as u64;
    Ok(())
}

fn write_buffer(st: &mut WriteState) -> io::Result<()> {
    if st.buf.is_empty() {
        return Ok(());
    }
    let buf = std::mem::take(&mut st.buf);
    st.file.write_all(&buf)?;
    st.len += buf.len() as u64;
    st.buf = buf;
    st.buf.clear();
    Ok(())
}

fn group_commit_loop(shared: &GroupShared, file: &File, max_delay: Duration, max_batch: usize) {
    let max_batch = max_batch.max(1) as u64;
    let mut last_batch = 1u64;
    let mut g = lock(&shared.state);
    g.batch_cap = max_batch;
    g.want = max_batch;
    loop {
        while g.written == g.synced && !g.stop {
            g = shared.work.wait(g).unwrap_or_else(PoisonError::into_inner);
        }
        if g.written == g.synced {
            // Stopping and nothing pending.
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
                g = shared
                    .work
                    .wait_timeout(g, deadline - now)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
        }
        let target = g.written;
        last_batch = target - g.synced;
        g.want = max_batch;
        drop(g);
        let result = file.sync_data();
        g = lock(&shared.state);
        match result {
            Ok(()) => {
                g.synced = g.synced.max(target);
                g.syncs += 1;
            }
            Err(e) => {
                g.error = Some((e.kind(), e.to_string()));
                shared.done.notify_all();
                return;
            }
        }
        shared.done.notify_all();
    }
}

impl Drop for RunWriter {
    fn drop(&mut self) {
        {
            let mut st = lock(&self.state);
            if st.failed.is_none() {
                // Best effort: `close` reports this error; drop cannot.
                let _ = write_buffer(&mut st);
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
