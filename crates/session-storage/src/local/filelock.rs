//! Exclusive advisory locks on small files under `<root>/locks/` (`flock` through
//! [`File::try_lock`]): held by an open file description, so the kernel releases them when the
//! holder's process dies, and two opens in one process exclude each other like two processes.
//!
//! A lock file may be removed while held ([`LockFile::remove`]); whoever opened the old file
//! and gets its lock afterwards notices that the path names another file now and starts over,
//! so two holders can never hold "the" lock through different files.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Mode of lock files and of the `locks/` directory (private to the store's owner).
const FILE_MODE: u32 = 0o600;
const DIR_MODE: u32 = 0o700;

/// A held lock; dropping it releases the lock (closing the file).
#[derive(Debug)]
pub(crate) struct LockFile {
    file: File,
    path: PathBuf,
}

impl LockFile {
    /// The open lock file (to read or write what it records).
    pub(crate) fn file(&self) -> &File {
        &self.file
    }

    /// Removes the lock file while still holding the lock, then releases it.
    pub(crate) fn remove(self) -> io::Result<()> {
        match fs::remove_file(&self.path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

/// Creates `dir` (mode 0700) when missing.
pub(crate) fn ensure_dir(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut b = fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, DIR_MODE);
    b.create(dir)
}

fn open_lock_file(path: &Path) -> io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, FILE_MODE);
    o.open(path)
}

/// Whether `path` still names the file `file` is open on.
fn still_named(path: &Path, file: &File) -> io::Result<bool> {
    let on_disk = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let open = file.metadata()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Ok(on_disk.dev() == open.dev() && on_disk.ino() == open.ino())
    }
    #[cfg(not(unix))]
    {
        Ok(on_disk.len() == open.len())
    }
}

/// Takes the exclusive lock on `path` (creating the file), retrying for at most `wait`;
/// `Ok(None)` when another holder kept it that long (`Duration::ZERO`: one attempt).
pub(crate) fn try_lock_for(path: &Path, wait: Duration) -> io::Result<Option<LockFile>> {
    let deadline = Instant::now() + wait;
    loop {
        let file = open_lock_file(path)?;
        match file.try_lock() {
            Ok(()) => {
                if still_named(path, &file)? {
                    return Ok(Some(LockFile {
                        file,
                        path: path.to_owned(),
                    }));
                }
                // Removed (or replaced) by its last holder: lock the file now named so.
                continue;
            }
            Err(TryLockError::WouldBlock) => {
                if Instant::now() >= deadline {
                    return Ok(None);
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(TryLockError::Error(e)) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_excludes_a_second_open_in_the_same_process_until_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.lock");
        let held = try_lock_for(&p, Duration::ZERO).unwrap().unwrap();
        assert!(
            try_lock_for(&p, Duration::from_millis(20))
                .unwrap()
                .is_none()
        );
        drop(held);
        assert!(try_lock_for(&p, Duration::ZERO).unwrap().is_some());
    }

    #[test]
    fn a_waiter_on_a_removed_lock_file_locks_the_new_one() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.lock");
        let held = try_lock_for(&p, Duration::ZERO).unwrap().unwrap();
        // Another opener got the old file before it was removed.
        let stale = open_lock_file(&p).unwrap();
        held.remove().unwrap();
        assert!(!p.exists());
        stale.try_lock().unwrap();
        assert!(!still_named(&p, &stale).unwrap());
        // The next locker creates and locks a new file even though `stale` holds the old one.
        let fresh = try_lock_for(&p, Duration::ZERO).unwrap().unwrap();
        assert!(still_named(&p, fresh.file()).unwrap());
    }
}
