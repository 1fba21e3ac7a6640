//! The trash of `sessions gc`: private directories (0700) and files (0600) as documented for
//! session data; copies that never stay behind half-written; run files moved while their
//! writer lock is held; emptying that never deletes a file a writer holds.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::error::CliError;
use crate::hooks::Hooks;

/// `mkdir -p` with mode 0700 for every directory it creates (existing ones keep their mode).
pub(crate) fn create_private_dir(path: &Path) -> Result<(), CliError> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(path).map_err(|e| CliError::io(path, e))
}

/// Options that never follow a symbolic link at the last component and never wait on a FIFO.
fn no_follow(opts: &mut OpenOptions) -> &mut OpenOptions {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC);
    }
    opts
}

/// Opens (creating, mode 0600, never following a link) a file to append one line to.
pub(crate) fn open_private_append(path: &Path) -> io::Result<File> {
    let mut opts = OpenOptions::new();
    opts.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    no_follow(&mut opts).open(path)
}

/// Writes `bytes` to the new file `path` (mode 0600, in a 0700 directory created on demand)
/// and fsyncs it. Never leaves a partial file: on any failure (a full disk: `write` fails part
/// way, or `fsync` does) the file is removed again and the error, with its OS cause, is
/// returned. `point` names the write for [`Hooks::write`].
pub(crate) fn write_private_new(
    path: &Path,
    bytes: &[u8],
    hooks: &Hooks,
    point: &str,
) -> Result<(), CliError> {
    if let Some(parent) = path.parent() {
        create_private_dir(parent)?;
    }
    let mut opts = OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut file = no_follow(&mut opts)
        .open(path)
        .map_err(|e| CliError::io(path, e))?;
    let written = hooks
        .write(point, bytes, |b| file.write_all(b))
        .and_then(|()| file.sync_all());
    if let Err(e) = written {
        drop(file);
        let _ = fs::remove_file(path);
        return Err(CliError::io(path, e));
    }
    Ok(())
}

/// Removes files written by [`write_private_new`] (best effort: they are copies), and then
/// the directories that held them when they are left empty.
pub(crate) fn remove_copies(paths: &[PathBuf]) {
    for p in paths {
        let _ = fs::remove_file(p);
        if let Some(parent) = p.parent() {
            let _ = fs::remove_dir(parent);
        }
    }
}

/// What [`lock_run_for_move`] found.
pub(crate) enum RunLock {
    /// The run's exclusive lock, held by this process until dropped.
    Held(File),
    /// A writer holds the file (its pid when the kernel says).
    Locked(Option<u32>),
    /// The file is not the one that was read (gone, replaced, or written since: a writer
    /// appended and closed it meanwhile).
    Changed(String),
}

/// Takes the exclusive writer lock of the run file `path` (without waiting) and checks that it
/// is still the file that was read: same size as `size`, and still at `path`. Holding it
/// across the move means a writer that reopens the run meanwhile waits for the lock and then
/// finds the file gone, instead of appending to the copy in the trash.
pub(crate) fn lock_run_for_move(path: &Path, size: u64) -> Result<RunLock, CliError> {
    let mut opts = OpenOptions::new();
    opts.read(true);
    let file = match no_follow(&mut opts).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(RunLock::Changed("the file is gone".into()));
        }
        Err(e) => return Err(CliError::io(path, e)),
    };
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            return Ok(RunLock::Locked(session_jsonl::exclusive_holder_pid(&file)));
        }
        Err(TryLockError::Error(e)) => return Err(CliError::io(path, e)),
    }
    let open = file.metadata().map_err(|e| CliError::io(path, e))?;
    if !open.is_file() {
        return Ok(RunLock::Changed("not a regular file".into()));
    }
    let at_path = fs::symlink_metadata(path).map_err(|e| CliError::io(path, e))?;
    if !same_inode(&open, &at_path) {
        return Ok(RunLock::Changed("the file was replaced".into()));
    }
    if open.len() != size {
        return Ok(RunLock::Changed(format!(
            "written since it was read ({size} → {} bytes)",
            open.len()
        )));
    }
    Ok(RunLock::Held(file))
}

fn same_inode(a: &fs::Metadata, b: &fs::Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        (a.dev(), a.ino()) == (b.dev(), b.ino())
    }
    #[cfg(not(unix))]
    {
        let _ = (a, b);
        true
    }
}

/// What emptying (or planning to empty) a tree of the trash did.
#[derive(Debug, Default)]
pub(crate) struct Emptied {
    /// Files (anything but a directory, a link counting as one) deleted or to delete.
    pub(crate) files: u64,
    /// Their bytes (a link's own size).
    pub(crate) bytes: u64,
    /// Regular files kept because a writer holds their lock (path, holder pid when known).
    pub(crate) kept: Vec<(PathBuf, Option<u32>)>,
}

/// Deletes `path` and everything under it (with `dry_run`, only counts), never following a
/// symbolic link (a link is removed itself) and never deleting a regular file whose writer
/// lock is held: such a file, and the directories above it, stay. Each file is removed while
/// this process holds its lock, so no writer can take it in between.
pub(crate) fn empty_tree(path: &Path, dry_run: bool) -> Result<Emptied, CliError> {
    let mut done = Emptied::default();
    empty_into(path, dry_run, &mut done)?;
    Ok(done)
}

fn empty_into(path: &Path, dry_run: bool, done: &mut Emptied) -> Result<(), CliError> {
    let meta = fs::symlink_metadata(path).map_err(|e| CliError::io(path, e))?;
    if meta.is_dir() {
        let mut entries: Vec<PathBuf> = fs::read_dir(path)
            .map_err(|e| CliError::io(path, e))?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()
            .map_err(|e| CliError::io(path, e))?;
        entries.sort();
        let kept_before = done.kept.len();
        for e in &entries {
            empty_into(e, dry_run, done)?;
        }
        if !dry_run && done.kept.len() == kept_before {
            fs::remove_dir(path).map_err(|e| CliError::io(path, e))?;
        }
        return Ok(());
    }
    if meta.is_file() {
        let mut opts = OpenOptions::new();
        opts.read(true);
        let file = no_follow(&mut opts)
            .open(path)
            .map_err(|e| CliError::io(path, e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                done.kept
                    .push((path.to_owned(), session_jsonl::exclusive_holder_pid(&file)));
                return Ok(());
            }
            Err(TryLockError::Error(e)) => return Err(CliError::io(path, e)),
        }
        if !dry_run {
            fs::remove_file(path).map_err(|e| CliError::io(path, e))?;
        }
        drop(file);
    } else if !dry_run {
        // A link, FIFO or socket: removed itself, never opened.
        fs::remove_file(path).map_err(|e| CliError::io(path, e))?;
    }
    done.files += 1;
    done.bytes += meta.len();
    Ok(())
}

/// The bytes of a small file of the store or its trash (a manifest, a session snapshot): never
/// through a link, at most [`session_state::MAX_SESSION_FILE_BYTES`].
///
/// # Errors
/// I/O (4) naming the file.
pub(crate) fn trash_read(path: &std::path::Path) -> Result<Vec<u8>, CliError> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| CliError::io(path, e))?;
    if !meta.is_file() {
        return Err(CliError::Data(format!(
            "{}: not a regular file",
            path.display()
        )));
    }
    if meta.len() > session_state::MAX_SESSION_FILE_BYTES {
        return Err(CliError::Data(format!(
            "{}: {} bytes, more than a session file may hold",
            path.display(),
            meta.len()
        )));
    }
    std::fs::read(path).map_err(|e| CliError::io(path, e))
}
