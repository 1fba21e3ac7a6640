//! Open runs read incrementally: the run index keeps, for every run file without `run.end`,
//! where its reader stopped ([`session_jsonl::ReaderCheckpoint`]: the end of the last complete
//! line, with digests of the file's head and of the bytes before it) and the row's running
//! fold up to there ([`RunFold`]), in our table `run_resume` (`path`, `checkpoint` as JSON).
//! A refresh of a grown open run goes on from there: it reads the guards (at most 8 KiB) and
//! the new bytes, not the file again from the start. A file that shrank or whose guarded bytes
//! changed (replaced, truncated, rewritten) is read whole, as is any file without a usable
//! checkpoint; both ways give the same row.
//!
//! A last line without `\n` (a record being written, a torn tail) is never part of a
//! checkpoint: it is folded into the row, and read again by the next refresh.

use std::collections::BTreeMap;
use std::path::Path;

use rusqlite::Connection;
use serde::{Deserialize, Serialize};
use session_jsonl::{Item, Reader, ReaderCheckpoint, RunFileReader};

use crate::column::Cols;
use crate::error::{Result, StateError};
use crate::fold::RunFold;
use crate::index_read::index_reader_options;
use crate::row::{IndexedRunOutcome, RunRow};

/// What `run_resume.checkpoint` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Saved {
    reader: ReaderCheckpoint,
    fold: RunFold,
}

/// One run file read for the index.
#[derive(Debug)]
pub(crate) struct RowRead {
    pub(crate) row: RunRow,
    /// Why the file is not a run (no `header` record).
    pub(crate) diagnostic: Option<String>,
    /// What to store in `run_resume` for this file: the checkpoint of an open run read
    /// from a plain file, `None` otherwise (and any stored one goes).
    pub(crate) checkpoint: Option<String>,
    /// Whether the read went on from a stored checkpoint instead of the start.
    pub(crate) resumed: bool,
    /// The file as its open descriptor showed it once read (`fstat`, no path lookup), for
    /// the read pool's check that it did not change while read; `None` when the read did not
    /// keep the file open to its end (a bounded read), or `fstat` failed.
    pub(crate) after: Option<crate::tree::LookedAfter>,
}

/// Reads one run file into its row, going on from `stored` (a `run_resume.checkpoint`) when it
/// is usable and the file is still the one it was taken from; otherwise from the start.
/// `size`/`mtime` are taken before reading (a file that grows meanwhile is read again by the
/// next pass).
///
/// # Errors
/// [`StateError::Run`] when the file cannot be opened or read.
pub(crate) fn read_row(
    path: &Path,
    size: u64,
    mtime: i64,
    compressed: bool,
    stored: Option<&str>,
) -> Result<RowRead> {
    read_row_reusing(path, size, mtime, compressed, stored, &mut Vec::new())
}

/// [`read_row`] reading into `buf`, the read buffer of the previous file (empty for the
/// first), which it leaves there for the next: a pass over many files allocates its buffer
/// once ([`session_jsonl::Reader::open_reusing`]). `size` is the file's length as the caller
/// looked at it (the buffer's size; no `fstat`).
///
/// # Errors
/// As [`read_row`].
pub(crate) fn read_row_reusing(
    path: &Path,
    size: u64,
    mtime: i64,
    compressed: bool,
    stored: Option<&str>,
    buf: &mut Vec<u8>,
) -> Result<RowRead> {
    if let Some(read) = resume_row(path, size, mtime, compressed, stored)? {
        return Ok(read);
    }
    let run_err = |e: session_jsonl::JsonlError| StateError::Run {
        path: path.to_path_buf(),
        source: Box::new(e),
    };
    let mut reader = Reader::open_reusing(
        path,
        index_reader_options(),
        Some(size),
        std::mem::take(buf),
    )
    .map_err(run_err)?;
    if !compressed {
        reader.track_checkpoints();
    }
    let (read, reader) = fold_held(
        path,
        reader,
        RunFold::new(path),
        (size, mtime, compressed),
        false,
    )?;
    *buf = reader.into_buffer();
    Ok(read)
}

/// [`read_row_reusing`] of a file its caller opened and looked at already (`file`, whose
/// `fstat` gave `size` and `mtime`), read from the start: no open by path.
///
/// # Errors
/// As [`read_row`].
pub(crate) fn read_opened_row_reusing(
    file: std::fs::File,
    path: &Path,
    (size, mtime, compressed): (u64, i64, bool),
    buf: &mut Vec<u8>,
) -> Result<RowRead> {
    let run_err = |e: session_jsonl::JsonlError| StateError::Run {
        path: path.to_path_buf(),
        source: Box::new(e),
    };
    let mut reader = Reader::open_file_reusing(
        file,
        path,
        index_reader_options(),
        Some(size),
        std::mem::take(buf),
    )
    .map_err(run_err)?;
    if !compressed {
        reader.track_checkpoints();
    }
    let (read, reader) = fold_held(
        path,
        reader,
        RunFold::new(path),
        (size, mtime, compressed),
        false,
    )?;
    *buf = reader.into_buffer();
    Ok(read)
}

/// The row of `path` read on from `stored` (a `run_resume.checkpoint`), or `None` when there
/// is no usable checkpoint or the file is no longer the one it was taken from (then nothing
/// but the checkpoint's guards was read).
///
/// # Errors
/// [`StateError::Run`] when the file cannot be opened or read.
pub(crate) fn resume_row(
    path: &Path,
    size: u64,
    mtime: i64,
    compressed: bool,
    stored: Option<&str>,
) -> Result<Option<RowRead>> {
    let run_err = |e: session_jsonl::JsonlError| StateError::Run {
        path: path.to_path_buf(),
        source: Box::new(e),
    };
    // A checkpoint that does not decode (written by another version, damaged) is no
    // checkpoint: the file is read from the start.
    if let Some(saved) = stored.and_then(|s| serde_json::from_str::<Saved>(s).ok())
        && !compressed
        && let Some(reader) =
            Reader::resume_run_file(path, index_reader_options(), &saved.reader).map_err(run_err)?
    {
        return fold_held(path, reader, saved.fold, (size, mtime, compressed), true)
            .map(|(read, _)| Some(read));
    }
    Ok(None)
}

/// Folds the complete lines, takes the checkpoint, then folds the last line and the file's
/// end reports; gives the reader back (for its buffer).
fn fold_held(
    path: &Path,
    mut reader: Reader<RunFileReader>,
    mut fold: RunFold,
    (size, mtime, compressed): (u64, i64, bool),
    resumed: bool,
) -> Result<(RowRead, Reader<RunFileReader>)> {
    let io_err = |e: std::io::Error| StateError::Run {
        path: path.to_path_buf(),
        source: Box::new(e),
    };
    reader.hold_last_line(true);
    for item in reader.by_ref() {
        fold.add(&item.map_err(io_err)?);
    }
    // Only an open run keeps a checkpoint, and the last line cannot reopen a run that has
    // ended (`run.end` and `run.error` never set the outcome back to open).
    let saved = if fold.is_open() {
        reader.checkpoint().map(|reader| Saved {
            reader,
            fold: fold.clone(),
        })
    } else {
        None
    };
    reader.hold_last_line(false);
    for item in reader.by_ref() {
        let item: Item = item.map_err(io_err)?;
        fold.add(&item);
    }
    let after = reader
        .file_metadata()
        .ok()
        .map(|md| crate::tree::LookedAfter::of(&md));
    let (row, diagnostic) = fold.finish(path, size, mtime, compressed);
    let checkpoint = if row.outcome == IndexedRunOutcome::Open {
        saved.and_then(|s| serde_json::to_string(&s).ok())
    } else {
        None
    };
    Ok((
        RowRead {
            row,
            diagnostic,
            checkpoint,
            resumed,
            after,
        },
        reader,
    ))
}

/// Every stored checkpoint by relative path (few rows: one per open run). Rows whose values
/// are unusable are left out (their files are read from the start).
pub(crate) fn read_checkpoints(conn: &Connection) -> rusqlite::Result<BTreeMap<String, String>> {
    const NAMES: [&str; 2] = ["path", "checkpoint"];
    let mut stmt = conn.prepare_cached("SELECT path, checkpoint FROM run_resume")?;
    let mut rows = stmt.query([])?;
    let mut out = BTreeMap::new();
    while let Some(r) = rows.next()? {
        let mut c = Cols::new(r, "run_resume", &NAMES)?;
        let path = c.text_or_empty(0)?;
        let checkpoint = c.text_or_empty(1)?;
        if !c.is_damaged() {
            out.insert(path, checkpoint);
        }
    }
    Ok(out)
}

/// Stores (or, with `None`, drops) the checkpoint of the file at `rel`.
pub(crate) fn put_checkpoint(
    conn: &Connection,
    rel: &str,
    checkpoint: Option<&str>,
) -> rusqlite::Result<()> {
    match checkpoint {
        Some(c) => conn
            .prepare_cached("INSERT OR REPLACE INTO run_resume (path, checkpoint) VALUES (?1, ?2)")?
            .execute([rel, c])?,
        None => conn
            .prepare_cached("DELETE FROM run_resume WHERE path = ?1")?
            .execute([rel])?,
    };
    Ok(())
}
