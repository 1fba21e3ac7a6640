//! The file operations of `save`, each named by its [`IoStep`] so that tests can make it fail
//! the way a full or failing disk does ([`crate::StoreOptions::io_fault`]): `ENOSPC` or `EIO`
//! before the step, or a short write. Without a hook every function is the plain operation.
//! Errors keep the OS error as their `source()`.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

use crate::error::{Result, StateError};
use crate::types::{IoFault, IoFaultHook, IoStep};

/// The I/O-error injection hook of a store (or none).
#[derive(Clone, Copy)]
pub(crate) struct Io<'a>(pub(crate) Option<&'a IoFaultHook>);

impl Io<'_> {
    fn fault(&self, step: IoStep) -> Option<IoFault> {
        self.0.and_then(|hook| hook(step))
    }

    /// `Err` with the injected OS error when the hook makes `step` fail.
    pub(crate) fn check(&self, step: IoStep, op: &'static str, path: &Path) -> Result<()> {
        match self.fault(step) {
            None => Ok(()),
            Some(IoFault::Fail(errno) | IoFault::Short { errno, .. }) => Err(StateError::io(
                op,
                path,
                io::Error::from_raw_os_error(errno),
            )),
        }
    }

    /// `write_all` of `bytes` to `file` (at its position); a short-write fault stores the
    /// first bytes and then fails.
    pub(crate) fn write_all(
        &self,
        step: IoStep,
        file: &mut File,
        bytes: &[u8],
        path: &Path,
    ) -> Result<()> {
        self.write_with(step, bytes, path, |part| file.write_all(part))
    }

    /// [`Io::write_all`] at `offset` (`pwrite`, the file position unused), so that an append
    /// needs no `lseek` before it.
    pub(crate) fn write_all_at(
        &self,
        step: IoStep,
        file: &File,
        bytes: &[u8],
        offset: u64,
        path: &Path,
    ) -> Result<()> {
        use std::os::unix::fs::FileExt;
        self.write_with(step, bytes, path, |part| file.write_all_at(part, offset))
    }

    /// Writes `bytes` with `write` unless step `step` has a fault: a failure writes nothing,
    /// a short write writes the first bytes with `write` and then fails.
    fn write_with(
        &self,
        step: IoStep,
        bytes: &[u8],
        path: &Path,
        mut write: impl FnMut(&[u8]) -> io::Result<()>,
    ) -> Result<()> {
        let failed = |errno| StateError::io("write", path, io::Error::from_raw_os_error(errno));
        match self.fault(step) {
            None => write(bytes).map_err(|e| StateError::io("write", path, e)),
            Some(IoFault::Fail(errno)) => Err(failed(errno)),
            Some(IoFault::Short { written, errno }) => {
                write(bytes.get(..written).unwrap_or(bytes))
                    .map_err(|e| StateError::io("write", path, e))?;
                Err(failed(errno))
            }
        }
    }

    /// `fdatasync` of a file.
    pub(crate) fn sync_data(&self, step: IoStep, file: &File, path: &Path) -> Result<()> {
        self.check(step, "fsync", path)?;
        file.sync_data()
            .map_err(|e| StateError::io("fsync", path, e))
    }

    /// `fsync` of a file (data and metadata).
    pub(crate) fn sync_all(&self, step: IoStep, file: &File, path: &Path) -> Result<()> {
        self.check(step, "fsync", path)?;
        file.sync_all()
            .map_err(|e| StateError::io("fsync", path, e))
    }

    /// `fsync` of a directory.
    pub(crate) fn sync_dir(&self, step: IoStep, dir: &Path) -> Result<()> {
        self.check(step, "fsync directory", dir)?;
        crate::fsutil::sync_dir(dir)
    }

    /// `ftruncate` of a file to `len` bytes.
    pub(crate) fn set_len(&self, step: IoStep, file: &File, len: u64, path: &Path) -> Result<()> {
        self.check(step, "truncate", path)?;
        file.set_len(len)
            .map_err(|e| StateError::io("truncate", path, e))
    }

    /// `rename(from, to)`.
    pub(crate) fn rename(&self, step: IoStep, from: &Path, to: &Path) -> Result<()> {
        self.check(step, "rename", from)?;
        std::fs::rename(from, to).map_err(|e| StateError::io("rename", from, e))
    }
}

/// The SQLite error an injected failure of a database step stands for: `SQLITE_FULL` for
/// `ENOSPC`, `SQLITE_IOERR` otherwise, as SQLite reports a full or failing disk.
pub(crate) fn sqlite_failure(
    db_path: &Path,
    context: &'static str,
    injected: &StateError,
) -> StateError {
    let full =
        matches!(injected, StateError::Io { source, .. } if source.raw_os_error() == Some(28));
    let code = if full {
        rusqlite::ffi::SQLITE_FULL
    } else {
        rusqlite::ffi::SQLITE_IOERR
    };
    StateError::Db {
        path: db_path.to_path_buf(),
        context,
        source: rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_short_write_stores_the_first_bytes_and_keeps_the_os_error() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("f");
        let mut file = File::create(&path).unwrap_or_else(|e| panic!("{e}"));
        let hook: IoFaultHook = Arc::new(|step| {
            (step == IoStep::AppendWrite).then_some(IoFault::Short {
                written: 3,
                errno: 28,
            })
        });
        let io = Io(Some(&hook));
        let err = io
            .write_all(IoStep::AppendWrite, &mut file, b"abcdef", &path)
            .err()
            .unwrap_or_else(|| panic!("no error"));
        let source = std::error::Error::source(&err).map(ToString::to_string);
        assert_eq!(
            source.as_deref(),
            Some("No space left on device (os error 28)")
        );
        assert_eq!(std::fs::read(&path).unwrap_or_default(), b"abc");
        // Other steps are untouched.
        io.write_all(IoStep::TempWrite, &mut file, b"g", &path)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(std::fs::read(&path).unwrap_or_default(), b"abcg");
    }
}
