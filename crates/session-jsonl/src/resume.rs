//! Resuming a read where an earlier one stopped, for indexes that follow a run file while it
//! grows: a [`ReaderCheckpoint`] records where the last complete line ended, what the reader
//! had decided about the file up to there, and digests that tell whether the bytes before it
//! are still the ones that were read. [`Reader::resume_run_file`] checks them and continues
//! from there, so a refresh after one appended line reads that line, not the whole file.
//!
//! What is checked before resuming (spec §3: run files are append-only): the file is at least
//! [`ReaderCheckpoint::offset`] bytes long, its first [`ReaderCheckpoint::head_len`] bytes
//! (at most [`GUARD_LEN`]) and the [`ReaderCheckpoint::guard_len`] bytes just before the
//! offset hash to the recorded XXH3-64 digests. A file replaced, truncated or rewritten in one
//! of those places is not resumed: the caller reads it again from the start.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

use crate::checkpoint::Track;
pub use crate::checkpoint::{GUARD_LEN, HeaderProgress, ReaderCheckpoint};
use crate::error::{JsonlError, Result};
use crate::reader::{Reader, ReaderOptions, RunFileReader, is_archived};

/// Reads exactly `len` bytes at `offset` of `file`, counting them for [`crate::tally`].
fn read_at(
    file: &mut File,
    offset: u64,
    len: u64,
    slot: Option<crate::tally::Slot>,
) -> io::Result<Vec<u8>> {
    file.seek(SeekFrom::Start(offset))?;
    let mut buf = Vec::new();
    file.by_ref().take(len).read_to_end(&mut buf)?;
    crate::tally::read(slot, buf.len());
    Ok(buf)
}

impl Reader<RunFileReader> {
    /// Opens a plain run file to go on reading from `checkpoint` (taken by
    /// [`Reader::checkpoint`] from a reader over the same file with the same `opts`): the
    /// reader yields what a reader started at offset 0 would yield after the checkpoint,
    /// header decisions and line numbers included, and keeps tracking checkpoints.
    ///
    /// Returns `Ok(None)` when the file cannot be resumed and must be read from the start:
    /// it is an archive (`.jsonl.zst`), it is shorter than the checkpoint's offset, or its head
    /// or the bytes before the offset no longer hash to the checkpoint's digests (the file was
    /// replaced, truncated or rewritten). Checking reads at most 2 × [`GUARD_LEN`] bytes.
    ///
    /// # Errors
    /// [`JsonlError::Io`] when the file cannot be opened, looked at or read.
    pub fn resume_run_file(
        path: &Path,
        opts: ReaderOptions,
        checkpoint: &ReaderCheckpoint,
    ) -> Result<Option<Self>> {
        if is_archived(path) {
            return Ok(None);
        }
        let io_err = |op: &'static str| move |e| JsonlError::io(op, path, e);
        let mut file = File::open(path).map_err(io_err("open"))?;
        let slot = crate::tally::opened(path);
        let len = file.metadata().map_err(io_err("stat"))?.len();
        let cp = checkpoint;
        if len < cp.offset || cp.head_len > cp.offset || cp.guard_len > cp.offset {
            return Ok(None);
        }
        let guard_len = u64::try_from(GUARD_LEN).unwrap_or(u64::MAX);
        if cp.head_len > guard_len || cp.guard_len > guard_len {
            return Ok(None);
        }
        let head = read_at(&mut file, 0, cp.head_len, slot).map_err(io_err("read"))?;
        if head.len() as u64 != cp.head_len || xxhash_rust::xxh3::xxh3_64(&head) != cp.head_digest {
            return Ok(None);
        }
        let guard = read_at(&mut file, cp.offset - cp.guard_len, cp.guard_len, slot)
            .map_err(io_err("read"))?;
        if guard.len() as u64 != cp.guard_len
            || xxhash_rust::xxh3::xxh3_64(&guard) != cp.guard_digest
        {
            return Ok(None);
        }
        file.seek(SeekFrom::Start(cp.offset))
            .map_err(io_err("seek"))?;
        let mut reader = Reader::with_position_and_hint(
            RunFileReader::Plain(file),
            opts,
            cp.offset,
            cp.line,
            Some(len - cp.offset),
        );
        reader.tally = slot;
        reader.resume_decisions(cp.header, cp.content_seen);
        reader.track = Some(Box::new(Track {
            head: Vec::new(),
            head_carried: Some((cp.head_len, cp.head_digest)),
            before_buffer: guard,
        }));
        Ok(Some(reader))
    }
}
