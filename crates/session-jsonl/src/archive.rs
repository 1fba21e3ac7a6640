//! Archiving finished runs as `<run_id>.jsonl.zst` (read back transparently by
//! [`Reader::open`](crate::Reader::open) and every other reading function).

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use crate::error::{JsonlError, Result};
use crate::layout::{ARCHIVED_EXT, RUN_EXT};
use crate::reader::is_archived;

/// zstd level used by [`compress_run`].
pub const DEFAULT_LEVEL: i32 = 9;

fn fsync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| JsonlError::io("fsync directory", dir, e))
}

/// Compresses a plain run file into `<run_id>.jsonl.zst` beside it and removes the original.
///
/// Steps: take the writer lock on the original (so no writer can start meanwhile; refused when
/// a writer holds it), write a temporary file in the same directory, fsync it, link it to the
/// final name (never replacing an existing archive), fsync the directory, verify that the
/// archive decompresses to exactly the original bytes, and only then remove the original and
/// fsync the directory again. On any failure the original stays and the partial archive is
/// removed.
///
/// # Errors
/// [`JsonlError::Locked`], [`JsonlError::Compressed`] / [`JsonlError::NotARunFile`] for a
/// wrong name, [`JsonlError::AlreadyExists`] when the archive exists,
/// [`JsonlError::ArchiveMismatch`], [`JsonlError::Io`].
pub fn compress_run(path: &Path) -> Result<PathBuf> {
    compress_run_with_level(path, DEFAULT_LEVEL)
}

/// [`compress_run`] with an explicit zstd level (1–22).
///
/// # Errors
/// As [`compress_run`].
pub fn compress_run_with_level(path: &Path, level: i32) -> Result<PathBuf> {
    if is_archived(path) {
        return Err(JsonlError::Compressed {
            path: path.to_owned(),
        });
    }
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| n.ends_with(RUN_EXT) && n.len() > RUN_EXT.len())
        .ok_or_else(|| JsonlError::NotARunFile {
            path: path.to_owned(),
        })?
        .to_owned();
    let dir = path.parent().unwrap_or(Path::new("."));
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let original = File::open(path).map_err(|e| JsonlError::io("open", path, e))?;
    match original.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            return Err(JsonlError::Locked {
                path: path.to_owned(),
                holder_pid: crate::holder::exclusive_holder_pid(&original),
            });
        }
        Err(TryLockError::Error(e)) => return Err(JsonlError::io("lock", path, e)),
    }
    let target = dir.join(format!(
        "{}{ARCHIVED_EXT}",
        &name[..name.len() - RUN_EXT.len()]
    ));
    if target.exists() {
        return Err(JsonlError::AlreadyExists { path: target });
    }
    let tmp = dir.join(format!(".{name}.zst.tmp-{}", std::process::id()));
    let result = write_archive(path, &original, &tmp, level).and_then(|()| {
        fs::hard_link(&tmp, &target).map_err(|e| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                JsonlError::AlreadyExists {
                    path: target.clone(),
                }
            } else {
                JsonlError::io("link", &target, e)
            }
        })
    });
    // The temporary name goes away whatever happened.
    let _ = fs::remove_file(&tmp);
    result?;
    let verified = fsync_dir(dir).and_then(|()| verify(path, &target));
    if let Err(e) = verified {
        let _ = fs::remove_file(&target);
        return Err(e);
    }
    fs::remove_file(path).map_err(|e| JsonlError::io("remove", path, e))?;
    fsync_dir(dir)?;
    Ok(target)
}

fn write_archive(path: &Path, original: &File, tmp: &Path, level: i32) -> Result<()> {
    let out = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(tmp)
        .map_err(|e| JsonlError::io("create", tmp, e))?;
    let mut enc = zstd::stream::write::Encoder::new(out, level)
        .map_err(|e| JsonlError::io("compress", tmp, e))?;
    let mut src = original;
    io::copy(&mut src, &mut enc).map_err(|e| JsonlError::io("compress", path, e))?;
    let mut out = enc
        .finish()
        .map_err(|e| JsonlError::io("compress", tmp, e))?;
    out.flush().map_err(|e| JsonlError::io("write", tmp, e))?;
    out.sync_all().map_err(|e| JsonlError::io("fsync", tmp, e))
}

fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Checks that `archive` decompresses to exactly the bytes of `original`.
fn verify(original: &Path, archive: &Path) -> Result<()> {
    let mut a = File::open(original).map_err(|e| JsonlError::io("open", original, e))?;
    let z = File::open(archive).map_err(|e| JsonlError::io("open", archive, e))?;
    let mut b = zstd::stream::read::Decoder::with_buffer(BufReader::new(z))
        .map_err(|e| JsonlError::io("decompress", archive, e))?;
    let mut ba = vec![0u8; 1 << 16];
    let mut bb = vec![0u8; 1 << 16];
    let mut offset = 0u64;
    loop {
        let na = read_full(&mut a, &mut ba).map_err(|e| JsonlError::io("read", original, e))?;
        let nb =
            read_full(&mut b, &mut bb).map_err(|e| JsonlError::io("decompress", archive, e))?;
        let common = na.min(nb);
        if let Some(i) = (0..common).find(|&i| ba[i] != bb[i]) {
            return Err(JsonlError::ArchiveMismatch {
                path: archive.to_owned(),
                offset: offset + i as u64,
            });
        }
        if na != nb {
            return Err(JsonlError::ArchiveMismatch {
                path: archive.to_owned(),
                offset: offset + common as u64,
            });
        }
        if na == 0 {
            return Ok(());
        }
        offset += na as u64;
    }
}
