//! Session leases: one writer per session across processes.
//!
//! A lease is an exclusive `flock(2)` lock on `<root>/leases/<session_id>.lease`, held through
//! an open file descriptor. The kernel drops it when the descriptor is closed, whichever way
//! the process ends (`kill -9`, a crash, OOM): a lease can never be left stuck. After taking
//! the lock the holder writes who it is into the file (one JSON line: pid, host, since when,
//! purpose, program), so that a second holder's [`StateError::SessionBusy`] names it; on Linux
//! the pid is checked against the kernel's lock table (`/proc/locks`), which also tells a
//! holder's note from a stale one left by a process that died.
//!
//! Protocol (the file is removed on release, so the directory does not fill up):
//!
//! * *take:* open `leases/<id>.lease` (create, mode 0600, no symbolic link followed), try the
//!   exclusive lock; on success check that the path still names the locked file (a releasing
//!   holder may have removed it between the open and the lock: then start again), truncate
//!   it and write the holder note.
//! * *release:* remove the file while still holding the lock (only when the path still names
//!   it), then close it.
//! * *probe* (listings, `sessions sessions`): open read-only, try a shared lock and let go at
//!   once; never creates or changes a file, so reading is never blocked and never blocks.
//! * *barrier:* after locking (and writing the note), the taker takes the write lock of
//!   `state.db` once and lets go of it, so that a save without a lease that checked the lease
//!   before it was taken has committed when the lease is granted (see `lease_check`).
//!
//! Holders have a purpose ([`LeasePurpose`]): a runtime keeps a session [`LeasePurpose::Open`]
//! from resume to its last save; a delete without a lease holds a [`LeasePurpose::Write`]
//! lease for its own duration, and `sessions gc` a [`LeasePurpose::Housekeeping`] one while it
//! snapshots and deletes. A save without a lease takes none: under the write lock of
//! `state.db`, which keeps saves apart, it checks the lease as someone who wants it would
//! (`lease_check`), so that a save costs no lease file created and removed. Someone who wants the
//! lease gives up at once (after at most [`UNKNOWN_HOLDER_GRACE`] when the holder cannot be
//! identified yet) when the session is open, and waits up to
//! [`crate::StoreOptions::max_busy_wait`] for a delete or housekeeping step to end.

use std::fmt;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use session_schema::{SessionState, Timestamp, check_id};

use crate::error::{Result, StateError};
use crate::fsutil::{self, FILE_MODE};
use crate::holder::{LeaseHolder, LeasePurpose, MAX_LABEL};
use crate::store::{StateStore, checked};
use crate::types::{Generation, LoadedSession, SaveReport};

/// The directory of lease files under the sessions root.
pub const LEASE_DIR: &str = "leases";

/// File name suffix of a lease file (`<session_id>.lease`).
const LEASE_EXT: &str = ".lease";

/// The most of a holder note that is read.
const MAX_NOTE: u64 = 4096;

/// How long a lock whose holder cannot be identified yet (its note not written yet, a note
/// left by a process that died, or a listing's shared probe) is waited for before the lease
/// is refused as busy: 500 ms, so that a refusal always comes within a second.
pub const UNKNOWN_HOLDER_GRACE: Duration = Duration::from_millis(500);

/// A session whose lease is held, from [`StateStore::open_sessions`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OpenSession {
    /// The session.
    pub session_id: String,
    /// Who holds it.
    pub holder: LeaseHolder,
}

/// An exclusive lease on one session, held until dropped (or [`SessionLease::release`]d).
///
/// While it is held no other holder can take the session's lease (a second
/// [`StateStore::lease`] gets [`StateError::SessionBusy`] naming this one), and saves and
/// deletes of the session by any other process or store wait for it or are refused: only
/// this holder writes the session. Saves through the store that took it (or through the lease,
/// which is the same) need no further lock. Reading is never blocked.
///
/// The reference implementation takes no lock: against it, compare-and-swap
/// ([`SessionLease::save_expecting`]) is what detects a concurrent save.
pub struct SessionLease<'s> {
    store: StoreRef<'s>,
    session_id: String,
    path: PathBuf,
    file: Option<File>,
    holder: LeaseHolder,
    registered: bool,
}

/// The store a lease was taken through: borrowed ([`StateStore::lease`]) or shared
/// ([`StateStore::lease_shared`], a lease that lives on its own).
enum StoreRef<'s> {
    Borrowed(&'s StateStore),
    Shared(std::sync::Arc<StateStore>),
}

impl std::ops::Deref for StoreRef<'_> {
    type Target = StateStore;

    fn deref(&self) -> &StateStore {
        match self {
            StoreRef::Borrowed(s) => s,
            StoreRef::Shared(s) => s,
        }
    }
}

impl fmt::Debug for SessionLease<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionLease")
            .field("session_id", &self.session_id)
            .field("path", &self.path)
            .field("holder", &self.holder)
            .finish_non_exhaustive()
    }
}

impl SessionLease<'_> {
    /// The session.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// This holder, as others see it.
    pub fn holder(&self) -> &LeaseHolder {
        &self.holder
    }

    /// The lease file (`<root>/leases/<session_id>.lease`).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// [`StateStore::load`] of the session.
    ///
    /// # Errors
    /// As [`StateStore::load`].
    pub fn load(&self) -> Result<Option<LoadedSession>> {
        self.store.load(&self.session_id)
    }

    /// [`StateStore::save`] of the session, as its lease holder (no further lock is taken).
    ///
    /// # Errors
    /// As [`StateStore::save`]. A state of another session is saved as by
    /// [`StateStore::save`]: it takes that session's lease for the save, or is refused with
    /// [`StateError::SessionBusy`].
    pub fn save(&self, state: &SessionState) -> Result<SaveReport> {
        self.store.save(state)
    }

    /// [`StateStore::save_appended`] of the session, as its lease holder: `state.messages[..kept]`
    /// are the messages of the last save through this lease, unchanged.
    ///
    /// # Errors
    /// As [`StateStore::save_appended`].
    pub fn save_appended(&self, state: &SessionState, kept: usize) -> Result<SaveReport> {
        self.store.save_appended(state, kept)
    }

    /// [`StateStore::save_appended_expecting`] of the session, as its lease holder.
    ///
    /// # Errors
    /// As [`StateStore::save_appended_expecting`].
    pub fn save_appended_expecting(
        &self,
        state: &SessionState,
        expected: Option<Generation>,
        kept: usize,
    ) -> Result<SaveReport> {
        self.store.save_appended_expecting(state, expected, kept)
    }

    /// [`StateStore::save_expecting`] of the session, as its lease holder.
    ///
    /// # Errors
    /// As [`StateStore::save_expecting`].
    pub fn save_expecting(
        &self,
        state: &SessionState,
        expected: Option<Generation>,
    ) -> Result<SaveReport> {
        self.store.save_expecting(state, expected)
    }

    /// [`StateStore::snapshot`] of the session.
    ///
    /// # Errors
    /// As [`StateStore::snapshot`].
    pub fn snapshot(&self) -> Result<Option<crate::snapshot::SessionSnapshot>> {
        self.store.snapshot(&self.session_id)
    }

    /// [`StateStore::delete_snapshotted`] of the session.
    ///
    /// # Errors
    /// As [`StateStore::delete_snapshotted`].
    pub fn delete_snapshotted(
        &self,
        snapshot: &crate::snapshot::SessionSnapshot,
    ) -> Result<crate::types::DeleteReport> {
        self.store.delete_snapshotted(snapshot)
    }

    /// Releases the lease now (dropping it does the same).
    pub fn release(self) {
        drop(self);
    }
}

impl Drop for SessionLease<'_> {
    fn drop(&mut self) {
        if self.registered {
            self.store.leases.remove(&self.session_id);
        }
        if let Some(file) = self.file.take() {
            // Remove the file while the lock is still held, and only if the path still names
            // it; closing the descriptor then releases the lock.
            if same_file(&file, &self.path).unwrap_or(false) {
                let _ = fs::remove_file(&self.path);
            }
            drop(file);
        }
    }
}

impl StateStore {
    /// Takes the exclusive lease of `session_id` for a runtime that resumes it: held until the
    /// returned guard is dropped, typically from resume to the last save. See
    /// [`SessionLease`] for what it excludes; the crate README ("One writer per session")
    /// for the protocol.
    ///
    /// # Errors
    /// [`StateError::UnsafeId`]; [`StateError::ReadOnly`] on a read-only store;
    /// [`StateError::SessionBusy`] naming the holder (pid, host, since when, purpose) when
    /// another process or store has the session open — within one second — or when a save
    /// or housekeeping step of another holder outlasts [`crate::StoreOptions::max_busy_wait`];
    /// [`StateError::NotRegularFile`] when the lease path is a link or other odd file;
    /// [`StateError::Io`].
    pub fn lease(&self, session_id: &str) -> Result<SessionLease<'_>> {
        acquire(
            StoreRef::Borrowed(self),
            session_id,
            LeasePurpose::Open,
            None,
            true,
        )
    }

    /// [`StateStore::lease`] with a `label` recorded in the holder note: others that find the
    /// session busy get it back in [`LeaseHolder::label`] (a worker's name; the storage seam
    /// records its client's holder there). Excludes exactly like [`StateStore::lease`]: one
    /// lease per session, whoever takes it.
    ///
    /// # Errors
    /// As [`StateStore::lease`]; [`StateError::LabelTooLong`] when `label` is longer than
    /// [`MAX_LABEL`] bytes (nothing is taken).
    pub fn lease_labelled(&self, session_id: &str, label: &str) -> Result<SessionLease<'_>> {
        check_label(session_id, label)?;
        acquire(
            StoreRef::Borrowed(self),
            session_id,
            LeasePurpose::Open,
            Some(label),
            true,
        )
    }

    /// [`StateStore::lease_labelled`] through a shared store: the lease keeps the store alive
    /// and can be kept on its own (in a guard object of a storage backend, in another
    /// thread). Saves through this store need no further lock while it is held, as with
    /// [`StateStore::lease`].
    ///
    /// # Errors
    /// As [`StateStore::lease_labelled`].
    pub fn lease_shared(
        self: &std::sync::Arc<Self>,
        session_id: &str,
        label: Option<&str>,
    ) -> Result<SessionLease<'static>> {
        if let Some(label) = label {
            check_label(session_id, label)?;
        }
        acquire(
            StoreRef::Shared(std::sync::Arc::clone(self)),
            session_id,
            LeasePurpose::Open,
            label,
            true,
        )
    }

    /// [`StateStore::lease`] for a short housekeeping step (`sessions gc`): others that want
    /// the lease wait for it instead of being refused. Hold it only for as long as the step
    /// takes.
    ///
    /// # Errors
    /// As [`StateStore::lease`].
    pub fn lease_for_housekeeping(&self, session_id: &str) -> Result<SessionLease<'_>> {
        acquire(
            StoreRef::Borrowed(self),
            session_id,
            LeasePurpose::Housekeeping,
            None,
            true,
        )
    }

    /// Who holds the lease of `session_id` now; `None` when nobody does. Never blocks and
    /// never creates or changes a file (works on a read-only store).
    ///
    /// # Errors
    /// [`StateError::UnsafeId`]; [`StateError::Io`].
    pub fn lease_holder(&self, session_id: &str) -> Result<Option<LeaseHolder>> {
        checked(session_id)?;
        probe(&lease_path(&self.root, session_id))
    }

    /// Every session whose lease is held now, by session id. Never blocks and never creates
    /// or changes a file; costs one directory listing and one probe per lease file.
    ///
    /// # Errors
    /// [`StateError::Io`] when `leases/` exists but cannot be listed.
    pub fn open_sessions(&self) -> Result<Vec<OpenSession>> {
        let dir = self.root.join(LEASE_DIR);
        let entries = match fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(StateError::io("read directory", &dir, e)),
        };
        let mut ids: Vec<String> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let id = name.strip_suffix(LEASE_EXT)?;
                check_id(id).is_ok().then(|| id.to_owned())
            })
            .collect();
        ids.sort();
        let mut open = Vec::new();
        for id in ids {
            // A lease path that is no regular file (a FIFO, a link) holds no lease: taking one
            // there is refused too.
            match probe(&lease_path(&self.root, &id)) {
                Ok(Some(holder)) => open.push(OpenSession {
                    session_id: id,
                    holder,
                }),
                Ok(None) | Err(StateError::NotRegularFile { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(open)
    }

    /// The lease a delete of `session_id` takes when its caller holds none: `None`
    /// when this store holds the session's lease already, or when the operation is going to
    /// be refused anyway (a read-only store, an unsafe id: the caller reports it).
    pub(crate) fn write_guard(&self, session_id: &str) -> Result<Option<SessionLease<'_>>> {
        if self.read_only || check_id(session_id).is_err() || self.leases.holds(session_id) {
            return Ok(None);
        }
        acquire(
            StoreRef::Borrowed(self),
            session_id,
            LeasePurpose::Write,
            None,
            false,
        )
        .map(Some)
    }
}

pub(crate) fn lease_path(root: &Path, id: &str) -> PathBuf {
    root.join(LEASE_DIR).join(format!("{id}{LEASE_EXT}"))
}

/// Opens (creating, mode 0600) a lease file without following a link or waiting on a FIFO.
pub(crate) fn open_lease_file(path: &Path, create: bool) -> io::Result<File> {
    let mut opts = OpenOptions::new();
    opts.read(true);
    if create {
        opts.write(true).create(true);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(FILE_MODE)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC);
    }
    opts.open(path)
}

/// A lease file that is not a regular file (a link, a FIFO) is never used.
pub(crate) fn check_regular(file: &File, path: &Path) -> Result<()> {
    let meta = file
        .metadata()
        .map_err(|e| StateError::io("stat", path, e))?;
    match fsutil::irregular_kind(meta.file_type()) {
        None => Ok(()),
        Some(kind) => Err(StateError::NotRegularFile {
            path: path.to_path_buf(),
            kind,
        }),
    }
}

pub(crate) fn open_error(path: &Path, e: io::Error) -> StateError {
    match fs::symlink_metadata(path).map(|m| fsutil::irregular_kind(m.file_type())) {
        Ok(Some(kind)) => StateError::NotRegularFile {
            path: path.to_path_buf(),
            kind,
        },
        _ => StateError::io("open", path, e),
    }
}

/// [`StateError::LabelTooLong`] for a label over [`MAX_LABEL`] bytes.
fn check_label(id: &str, label: &str) -> Result<()> {
    if label.len() > MAX_LABEL {
        return Err(StateError::LabelTooLong {
            session_id: id.to_owned(),
            len: label.len(),
        });
    }
    Ok(())
}

fn acquire<'s>(
    store: StoreRef<'s>,
    id: &str,
    purpose: LeasePurpose,
    label: Option<&str>,
    register: bool,
) -> Result<SessionLease<'s>> {
    checked(id)?;
    store.check_writable(match purpose {
        LeasePurpose::Write => "save",
        _ => "take a session lease",
    })?;
    let dir = store.root.join(LEASE_DIR);
    let path = lease_path(&store.root, id);
    let start = Instant::now();
    let mut pause = Duration::from_millis(1);
    let mut created_dir = false;
    loop {
        let file = match open_lease_file(&path, true) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound && !created_dir => {
                fsutil::create_dir_private(&dir)?;
                created_dir = true;
                continue;
            }
            Err(e) => return Err(open_error(&path, e)),
        };
        check_regular(&file, &path)?;
        match file.try_lock() {
            Ok(()) => {
                if !same_file(&file, &path)? {
                    // Removed by a releasing holder between our open and our lock.
                    continue;
                }
                let holder = LeaseHolder {
                    pid: Some(std::process::id()),
                    host: host_name(),
                    since: Some(Timestamp::now()),
                    purpose,
                    program: program_name(),
                    label: label.map(str::to_owned),
                };
                write_note(&file, &path, id, &holder)?;
                if register {
                    store.leases.insert(id);
                }
                let lease = SessionLease {
                    store,
                    session_id: id.to_owned(),
                    path,
                    file: Some(file),
                    holder,
                    registered: register,
                };
                // A save without a lease checks the lease under the write lock of `state.db`
                // instead of taking one (`lease_check`): wait for such a save that checked
                // before this lock was taken, so that the lease starts after its commit.
                // Dropping the lease on failure releases it.
                lease.store.wait_for_unleased_saves()?;
                return Ok(lease);
            }
            Err(TryLockError::WouldBlock) => {
                let (holder, confirmed) = read_holder(&file);
                let waited = start.elapsed();
                let give_up = match (confirmed, holder.purpose) {
                    (true, LeasePurpose::Write | LeasePurpose::Housekeeping) => {
                        waited >= store.options.max_busy_wait
                    }
                    (true, _) => true,
                    (false, _) => waited >= UNKNOWN_HOLDER_GRACE,
                };
                if give_up {
                    return Err(StateError::SessionBusy {
                        session_id: id.to_owned(),
                        holder: Box::new(holder),
                    });
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            Err(TryLockError::Error(e)) => return Err(StateError::io("lock", &path, e)),
        }
    }
}

/// Whether the open `file` is still the file at `path` (same device and inode).
pub(crate) fn same_file(file: &File, path: &Path) -> Result<bool> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let open = file
            .metadata()
            .map_err(|e| StateError::io("stat", path, e))?;
        match fs::symlink_metadata(path) {
            Ok(now) => Ok((now.dev(), now.ino()) == (open.dev(), open.ino())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(StateError::io("stat", path, e)),
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (file, path);
        Ok(true)
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Note {
    session_id: String,
    pid: Option<u32>,
    host: Option<String>,
    since: Option<String>,
    purpose: String,
    program: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    label: Option<String>,
}

/// Writes the holder note (one JSON line) into the locked lease file.
fn write_note(file: &File, path: &Path, id: &str, holder: &LeaseHolder) -> Result<()> {
    let note = Note {
        session_id: id.to_owned(),
        pid: holder.pid,
        host: holder.host.clone(),
        since: holder.since.as_ref().map(|t| t.as_str().to_owned()),
        purpose: holder.purpose.as_str().to_owned(),
        program: holder.program.clone(),
        label: holder.label.clone(),
    };
    let mut line = serde_json::to_vec(&note).map_err(|e| StateError::Serialize {
        session_id: id.to_owned(),
        index: usize::MAX,
        source: e,
    })?;
    line.push(b'\n');
    file.set_len(0)
        .map_err(|e| StateError::io("truncate", path, e))?;
    write_at(file, &line).map_err(|e| StateError::io("write", path, e))
}

#[cfg(unix)]
fn write_at(file: &File, bytes: &[u8]) -> io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, bytes, 0)
}

#[cfg(not(unix))]
fn write_at(mut file: &File, bytes: &[u8]) -> io::Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    file.seek(SeekFrom::Start(0))?;
    file.write_all(bytes)
}

/// Reads from the start of `file` into `buf`; the number of bytes read.
#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8]) -> io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, 0)
}

#[cfg(not(unix))]
fn read_at(mut file: &File, buf: &mut [u8]) -> io::Result<usize> {
    use std::io::{Seek, SeekFrom};
    file.seek(SeekFrom::Start(0))?;
    file.read(buf)
}

/// The holder of the lock on `file` as its note says, and whether that is confirmed: the
/// note parses and, where the kernel lists locks, its pid is the one holding the lock
/// exclusively. An unconfirmed note (none yet, one left by a process that died, a listing's
/// shared probe) falls back to what the kernel says.
pub(crate) fn read_holder(file: &File) -> (LeaseHolder, bool) {
    let note = read_note(file);
    let kernel: Vec<u32> = session_jsonl::lock_holders(file)
        .into_iter()
        .filter(|h| h.exclusive)
        .map(|h| h.pid)
        .collect();
    let kernel_knows = cfg!(target_os = "linux") && Path::new("/proc/locks").exists();
    match note {
        Some(h) if !kernel_knows || h.pid.is_some_and(|p| kernel.contains(&p)) => (h, true),
        _ => (
            LeaseHolder {
                pid: kernel.first().copied(),
                host: None,
                since: None,
                purpose: LeasePurpose::Unknown,
                program: None,
                label: None,
            },
            false,
        ),
    }
}

fn read_note(file: &File) -> Option<LeaseHolder> {
    let mut text = vec![0u8; usize::try_from(MAX_NOTE).unwrap_or(4096)];
    let n = read_at(file, &mut text).ok()?;
    text.truncate(n);
    let line = text.split(|&b| b == b'\n').next()?;
    let note: Note = serde_json::from_slice(line).ok()?;
    Some(LeaseHolder {
        pid: note.pid,
        host: note.host,
        since: note.since.map(Timestamp::from_raw),
        purpose: LeasePurpose::parse(&note.purpose),
        program: note.program,
        label: note.label,
    })
}

/// Who holds the lease at `path`, probing with a shared lock that is let go at once.
fn probe(path: &Path) -> Result<Option<LeaseHolder>> {
    let file = match open_lease_file(path, false) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(open_error(path, e)),
    };
    check_regular(&file, path)?;
    match file.try_lock_shared() {
        Ok(()) => {
            let _ = file.unlock();
            Ok(None)
        }
        Err(TryLockError::WouldBlock) => {
            // A holder that has just taken the lock writes its note right after: give it a
            // moment before answering with what the kernel alone says.
            let start = Instant::now();
            loop {
                let (holder, confirmed) = read_holder(&file);
                if confirmed || start.elapsed() >= Duration::from_millis(100) {
                    return Ok(Some(holder));
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        Err(TryLockError::Error(e)) => Err(StateError::io("probe lock of", path, e)),
    }
}

/// This machine's host name (`/proc/sys/kernel/hostname`, `/etc/hostname`, `$HOSTNAME`).
fn host_name() -> Option<String> {
    static HOST: OnceLock<Option<String>> = OnceLock::new();
    HOST.get_or_init(|| {
        let from_file = |p: &str| -> Option<String> {
            let mut s = String::new();
            File::open(p).ok()?.take(256).read_to_string(&mut s).ok()?;
            let s = s.trim();
            (!s.is_empty()).then(|| s.to_owned())
        };
        from_file("/proc/sys/kernel/hostname")
            .or_else(|| from_file("/etc/hostname"))
            .or_else(|| std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()))
    })
    .clone()
}

/// The file name this process was started as.
fn program_name() -> Option<String> {
    let arg0 = std::env::args_os().next()?;
    Some(Path::new(&arg0).file_name()?.to_string_lossy().into_owned())
}
