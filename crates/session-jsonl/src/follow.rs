//! Follow mode: read a run that is still being written (`tail -f`).

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use session_schema::Record;

use crate::error::{JsonlError, Result};
use crate::reader::{Item, Reader, ReaderOptions, is_archived};
use crate::writer::is_locked;

/// Follow-mode settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowOptions {
    /// Line handling, as for [`Reader`].
    pub reader: ReaderOptions,
    /// Pause between looks at the file when nothing new is there (default 100 ms).
    pub poll_interval: Duration,
    /// Stop (treating a partial last line as final) when no writer holds the file's lock and
    /// nothing new arrived. Off by default: runs written by the reference are never locked.
    pub stop_when_unlocked: bool,
}

impl Default for FollowOptions {
    fn default() -> Self {
        FollowOptions {
            reader: ReaderOptions::default(),
            poll_interval: Duration::from_millis(100),
            stop_when_unlocked: false,
        }
    }
}

/// Reads a plain run file and keeps reading as records land.
///
/// A last line without `\n` is held back (a writer may be in the middle of it) until its
/// newline arrives or [`finish`](Self::finish) declares the input complete; it is never
/// reported as damage while following. As an [`Iterator`] it blocks, polling every
/// [`FollowOptions::poll_interval`], and ends after the run's `run.end` record (or, with
/// [`FollowOptions::stop_when_unlocked`], once the writer is gone).
#[derive(Debug)]
pub struct Follower {
    path: PathBuf,
    reader: Reader<File>,
    opts: FollowOptions,
    ended: bool,
    finished: bool,
}

impl Follower {
    /// Follows `path` from its start.
    ///
    /// # Errors
    /// [`JsonlError::Compressed`] for archives (they never grow), [`JsonlError::Io`].
    pub fn open(path: &Path, opts: FollowOptions) -> Result<Self> {
        if is_archived(path) {
            return Err(JsonlError::Compressed {
                path: path.to_owned(),
            });
        }
        let file = File::open(path).map_err(|e| JsonlError::io("open", path, e))?;
        let mut reader = Reader::new(file, opts.reader.clone());
        reader.set_follow(true);
        Ok(Follower {
            path: path.to_owned(),
            reader,
            opts,
            ended: false,
            finished: false,
        })
    }

    /// The file followed.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether a `run.end` record has been yielded.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// Byte offset after the last complete line read.
    pub fn offset(&self) -> u64 {
        self.reader.complete_offset()
    }

    fn read_error(&self, source: io::Error) -> JsonlError {
        JsonlError::Read {
            path: self.path.clone(),
            line: self.reader.next_line(),
            offset: self.reader.complete_offset(),
            source,
        }
    }

    /// The next item already in the file, without waiting; `Ok(None)` when nothing new is
    /// there yet.
    ///
    /// # Errors
    /// [`JsonlError::Read`] for a read failure or when the file shrank (it was truncated or
    /// replaced; run files only grow).
    pub fn poll(&mut self) -> Result<Option<Item>> {
        match self.reader.next_item() {
            Some(Ok(item)) => {
                if let Item::Record(r) = &item
                    && matches!(r.parsed.value, Record::RunEnd(_))
                {
                    self.ended = true;
                }
                Ok(Some(item))
            }
            Some(Err(e)) => Err(self.read_error(e)),
            None => {
                if self.finished {
                    return Ok(None);
                }
                let seen = self.reader.complete_offset() + self.reader.buffered_partial() as u64;
                let len = self
                    .reader
                    .source_mut()
                    .metadata()
                    .map_err(|e| JsonlError::io("stat", &self.path, e))?
                    .len();
                if len < seen {
                    return Err(self.read_error(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("file shrank from {seen} to {len} bytes while being followed"),
                    )));
                }
                Ok(None)
            }
        }
    }

    /// Waits up to `timeout` for the next item, polling every
    /// [`FollowOptions::poll_interval`]; `Ok(None)` on timeout.
    ///
    /// # Errors
    /// As [`poll`](Self::poll).
    pub fn wait(&mut self, timeout: Duration) -> Result<Option<Item>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(item) = self.poll()? {
                return Ok(Some(item));
            }
            let now = Instant::now();
            if now >= deadline || self.finished {
                return Ok(None);
            }
            std::thread::sleep(self.opts.poll_interval.min(deadline - now));
        }
    }

    /// Declares the input complete: a held-back partial last line is now read as final (a
    /// torn tail when it does not parse). Returns the remaining items.
    ///
    /// # Errors
    /// As [`poll`](Self::poll).
    pub fn finish(&mut self) -> Result<Vec<Item>> {
        self.end_input();
        let mut out = Vec::new();
        while let Some(item) = self.poll()? {
            out.push(item);
        }
        Ok(out)
    }

    /// Stops waiting for more input: the next polls read what is in the file now, the partial
    /// last line as final, and then return `None`.
    pub fn end_input(&mut self) {
        self.reader.set_follow(false);
        self.finished = true;
    }

    /// Whether a writer holds the file's lock (see [`is_locked`]).
    ///
    /// # Errors
    /// As [`is_locked`].
    pub fn writer_alive(&self) -> Result<bool> {
        is_locked(&self.path)
    }
}

impl Iterator for Follower {
    type Item = Result<Item>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            match self.poll() {
                Ok(Some(item)) => return Some(Ok(item)),
                Ok(None) => {}
                Err(e) => return Some(Err(e)),
            }
            if self.finished || self.ended {
                return None;
            }
            if self.opts.stop_when_unlocked {
                match self.writer_alive() {
                    Ok(true) => {}
                    Ok(false) => {
                        // The writer is gone: what is in the file now is all there is.
                        self.end_input();
                        continue;
                    }
                    Err(e) => return Some(Err(e)),
                }
            }
            std::thread::sleep(self.opts.poll_interval);
        }
    }
}
