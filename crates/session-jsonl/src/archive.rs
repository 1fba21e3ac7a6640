//! Archiving finished runs as `<run_id>.jsonl.zst` (read back transparently by
//! [`Reader::open`](crate::Reader::open) and every other reading function), and restoring
//! them ([`decompress_run`]).
//!
//! The reference implementation reads only `*.jsonl`: an archived run is missing from its
//! session history until it is restored.
//!
//! Both directions write a hidden temporary file beside the run
//! (`.<run_id>.jsonl.zst.tmp-<pid>`, `.<run_id>.jsonl.unzst.tmp-<pid>`) while holding the
//! lock of the file they read (the run file's writer lock, the archive's lock). A process
//! killed meanwhile leaves its temporary file behind; it is stale once nobody holds that lock
//! any more, which [`remove_stale_temp`] checks (taking the lock itself) before removing it.
//! Each direction removes the stale temporary files of its own run first;
//! [`stale_temp_files`] finds all of them for `sessions repair`.

use std::fs::{self, File, TryLockError};
use std::io;
#[cfg(all(unix, feature = "archive"))]
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
#[cfg(feature = "archive")]
use std::{
    fs::OpenOptions,
    io::{BufReader, BufWriter, Read, Write},
};

use crate::error::{JsonlError, Result};
use crate::layout::RUN_EXT;
#[cfg(feature = "archive")]
use crate::{layout::ARCHIVED_EXT, reader::is_archived};

/// Infix of an archive being written: `.<run_id>.jsonl` + this + `<pid>`.
const ZST_TMP: &str = ".zst.tmp-";
/// Infix of a restored run being written: `.<run_id>.jsonl` + this + `<pid>`.
const UNZST_TMP: &str = ".unzst.tmp-";

/// zstd level used by [`compress_run`].
#[cfg(feature = "archive")]
#[cfg_attr(docsrs, doc(cfg(feature = "archive")))]
pub const DEFAULT_LEVEL: i32 = 9;

fn fsync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| JsonlError::io("fsync directory", dir, e))
}

/// Compresses a plain run file into `<run_id>.jsonl.zst` beside it and removes the original.
///
/// Steps: take the writer lock on the original (so no writer can start meanwhile; refused when
/// a writer holds it), remove stale temporary files of this run, write a temporary file in
/// the same directory (zstd with its content checksum, the original's permission bits: a
/// `0600` run stays `0600`), fsync it, link it to the final name (never replacing an
/// existing archive), fsync the directory, verify that the archive decompresses to exactly
/// the original bytes, and only then remove the original and fsync the directory again. On
/// any failure the original stays and the partial archive is removed.
///
/// # Errors
/// [`JsonlError::Locked`], [`JsonlError::Compressed`] / [`JsonlError::NotARunFile`] for a
/// wrong name, [`JsonlError::AlreadyExists`] when the archive exists,
/// [`JsonlError::ArchiveMismatch`], [`JsonlError::Io`].
#[cfg(feature = "archive")]
#[cfg_attr(docsrs, doc(cfg(feature = "archive")))]
pub fn compress_run(path: &Path) -> Result<PathBuf> {
    compress_run_with_level(path, DEFAULT_LEVEL)
}

/// [`compress_run`] with an explicit zstd level (1–22).
///
/// # Errors
/// As [`compress_run`].
#[cfg(feature = "archive")]
#[cfg_attr(docsrs, doc(cfg(feature = "archive")))]
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
    // Under the lock of the original: a temporary file of this run is nobody's any more.
    remove_temps_of(dir, &name, ZST_TMP);
    let mode = permission_bits(&original, path)?;
    let tmp = dir.join(format!(".{name}{ZST_TMP}{}", std::process::id()));
    let result = write_archive(path, &original, &tmp, level, mode).and_then(|()| {
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

/// The permission bits of an open file (`None` off Unix).
#[cfg(feature = "archive")]
fn permission_bits(file: &File, path: &Path) -> Result<Option<u32>> {
    let md = file
        .metadata()
        .map_err(|e| JsonlError::io("stat", path, e))?;
    #[cfg(unix)]
    {
        Ok(Some(md.permissions().mode() & 0o7777))
    }
    #[cfg(not(unix))]
    {
        let _ = md;
        Ok(None)
    }
}

/// Creates `tmp` (never replacing anything) with exactly `mode` (set after creating, whatever
/// the umask; `0600` while it is being written).
#[cfg(feature = "archive")]
fn create_temp(tmp: &Path, mode: Option<u32>) -> Result<File> {
    let mut open = OpenOptions::new();
    open.write(true).create_new(true);
    #[cfg(unix)]
    open.mode(0o600);
    let out = open
        .open(tmp)
        .map_err(|e| JsonlError::io("create", tmp, e))?;
    #[cfg(unix)]
    if let Some(mode) = mode
        && let Err(e) = out.set_permissions(fs::Permissions::from_mode(mode))
    {
        let _ = fs::remove_file(tmp);
        return Err(JsonlError::io("set the permissions of", tmp, e));
    }
    #[cfg(not(unix))]
    let _ = mode;
    Ok(out)
}

#[cfg(feature = "archive")]
fn write_archive(
    path: &Path,
    original: &File,
    tmp: &Path,
    level: i32,
    mode: Option<u32>,
) -> Result<()> {
    let out = create_temp(tmp, mode)?;
    let mut enc = zstd::stream::write::Encoder::new(out, level)
        .map_err(|e| JsonlError::io("compress", tmp, e))?;
    enc.include_checksum(true)
        .map_err(|e| JsonlError::io("compress", tmp, e))?;
    let mut src = original;
    io::copy(&mut src, &mut enc).map_err(|e| JsonlError::io("compress", path, e))?;
    let mut out = enc
        .finish()
        .map_err(|e| JsonlError::io("compress", tmp, e))?;
    out.flush().map_err(|e| JsonlError::io("write", tmp, e))?;
    out.sync_all().map_err(|e| JsonlError::io("fsync", tmp, e))
}

#[cfg(feature = "archive")]
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

/// Restores an archived run: decompresses `<run_id>.jsonl.zst` to `<run_id>.jsonl` beside it
/// and removes the archive. Returns the restored file.
///
/// Steps: take the archive's lock (one restore at a time; writers never open archives), remove
/// stale temporary files of this restore, decompress into `.<run_id>.jsonl.unzst.tmp-<pid>`
/// (the archive's permission bits), `fsync` it, verify that it holds exactly what the archive
/// decompresses to (read back and compared byte for byte; the zstd content checksum, when the
/// archive has one, is checked while decompressing), link it to `<run_id>.jsonl` (never
/// replacing a file: the restored file appears whole or not at all), `fsync` the directory,
/// and only then remove the archive and `fsync` the directory again. On any failure the
/// archive stays and the temporary file is removed.
///
/// When `<run_id>.jsonl` exists already (an archive run that was stopped after linking its
/// archive) and holds exactly the archive's content, only the archive is removed.
///
/// # Errors
/// [`JsonlError::NotARunFile`] for a name that is not `<run_id>.jsonl.zst`,
/// [`JsonlError::Locked`] while another restore holds the archive,
/// [`JsonlError::AlreadyExists`] when `<run_id>.jsonl` exists with other content,
/// [`JsonlError::ArchiveMismatch`], [`JsonlError::Io`] (a corrupt archive: `decompress`).
#[cfg(feature = "archive")]
#[cfg_attr(docsrs, doc(cfg(feature = "archive")))]
pub fn decompress_run(archive: &Path) -> Result<PathBuf> {
    let not_run = || JsonlError::NotARunFile {
        path: archive.to_owned(),
    };
    let name = archive
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(not_run)?
        .to_owned();
    let stem = name
        .strip_suffix(ARCHIVED_EXT)
        .filter(|s| !s.is_empty())
        .ok_or_else(not_run)?;
    let plain_name = format!("{stem}{RUN_EXT}");
    let dir = match archive.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let target = dir.join(&plain_name);
    let held = File::open(archive).map_err(|e| JsonlError::io("open", archive, e))?;
    match held.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            return Err(JsonlError::Locked {
                path: archive.to_owned(),
                holder_pid: crate::holder::exclusive_holder_pid(&held),
            });
        }
        Err(TryLockError::Error(e)) => return Err(JsonlError::io("lock", archive, e)),
    }
    remove_temps_of(dir, &plain_name, UNZST_TMP);
    if fs::symlink_metadata(&target).is_ok() {
        // Left by an archive run stopped after its link: the same content twice.
        return match verify(&target, archive) {
            Ok(()) => {
                fs::remove_file(archive).map_err(|e| JsonlError::io("remove", archive, e))?;
                fsync_dir(dir)?;
                Ok(target)
            }
            Err(JsonlError::ArchiveMismatch { .. }) => {
                Err(JsonlError::AlreadyExists { path: target })
            }
            Err(e) => Err(e),
        };
    }
    let mode = permission_bits(&held, archive)?;
    let tmp = dir.join(format!(".{plain_name}{UNZST_TMP}{}", std::process::id()));
    let result = write_restored(archive, &held, &tmp, mode)
        .and_then(|()| verify(&tmp, archive))
        .and_then(|()| {
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
    let _ = fs::remove_file(&tmp);
    result?;
    fsync_dir(dir)?;
    fs::remove_file(archive).map_err(|e| JsonlError::io("remove", archive, e))?;
    fsync_dir(dir)?;
    Ok(target)
}

#[cfg(feature = "archive")]
fn write_restored(archive: &Path, held: &File, tmp: &Path, mode: Option<u32>) -> Result<()> {
    let mut out = BufWriter::new(create_temp(tmp, mode)?);
    let mut dec = zstd::stream::read::Decoder::new(held)
        .map_err(|e| JsonlError::io("decompress", archive, e))?;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = match dec.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(JsonlError::io("decompress", archive, e)),
        };
        out.write_all(&buf[..n])
            .map_err(|e| JsonlError::io("write", tmp, e))?;
    }
    let out = out
        .into_inner()
        .map_err(|e| JsonlError::io("write", tmp, e.into_error()))?;
    out.sync_all().map_err(|e| JsonlError::io("fsync", tmp, e))
}

/// Removes the temporary files of operations on `name` (`.<name><infix><pid>`) in `dir`:
/// called with the lock of the file that operation reads, so none of them is in use.
#[cfg(feature = "archive")]
fn remove_temps_of(dir: &Path, name: &str, infix: &str) {
    let prefix = format!(".{name}{infix}");
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let n = e.file_name();
        let Some(n) = n.to_str() else { continue };
        if n.strip_prefix(&prefix)
            .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
        {
            let _ = fs::remove_file(e.path());
        }
    }
}

/// The file an archive or restore temporary file was made from, when `name` is one:
/// `.<run_id>.jsonl.zst.tmp-<pid>` → `<run_id>.jsonl`, `.<run_id>.jsonl.unzst.tmp-<pid>` →
/// `<run_id>.jsonl.zst`.
fn temp_source(name: &str) -> Option<String> {
    let rest = name.strip_prefix('.')?;
    for (infix, ext) in [(ZST_TMP, ""), (UNZST_TMP, ".zst")] {
        if let Some(i) = rest.rfind(infix) {
            let (base, pid) = (&rest[..i], &rest[i + infix.len()..]);
            if base.len() > RUN_EXT.len()
                && base.ends_with(RUN_EXT)
                && !pid.is_empty()
                && pid.bytes().all(|b| b.is_ascii_digit())
            {
                return Some(format!("{base}{ext}"));
            }
        }
    }
    None
}

/// The temporary files of archive and restore operations under `sessions_root`'s date
/// directories (every day directory is listed), stale or in use.
///
/// # Errors
/// [`JsonlError::Io`] when the root exists but cannot be listed.
pub fn stale_temp_files(sessions_root: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for day in crate::layout::day_dirs(sessions_root)? {
        let Ok(entries) = fs::read_dir(&day) else {
            continue;
        };
        for e in entries.flatten() {
            let n = e.file_name();
            if n.to_str().and_then(temp_source).is_some()
                && e.file_type().is_ok_and(|t| t.is_file())
            {
                out.push(e.path());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Removes an archive or restore temporary file if no process is using it: takes the lock of
/// the file its operation reads (the run file, the archive); while an archive, a restore or a
/// writer holds that lock, nothing happens. A temporary file whose source is gone is removed
/// too (no operation can be using it). Returns whether it was removed.
///
/// # Errors
/// [`JsonlError::NotARunFile`] when `path` is not such a temporary file; [`JsonlError::Io`].
pub fn remove_stale_temp(path: &Path) -> Result<bool> {
    let source = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(temp_source)
        .ok_or_else(|| JsonlError::NotARunFile {
            path: path.to_owned(),
        })?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let source = dir.join(source);
    let _guard = match File::open(&source) {
        Ok(f) => match f.try_lock() {
            Ok(()) => Some(f),
            Err(TryLockError::WouldBlock) => return Ok(false),
            Err(TryLockError::Error(e)) => return Err(JsonlError::io("lock", &source, e)),
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(JsonlError::io("open", &source, e)),
    };
    match fs::remove_file(path) {
        Ok(()) => {
            fsync_dir(dir)?;
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(JsonlError::io("remove", path, e)),
    }
}

/// Checks that `archive` decompresses to exactly the bytes of `original`.
#[cfg(feature = "archive")]
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
