//! A counting layer over run-file reads, for tests that hold a cost (files opened, bytes read
//! from each) instead of timing it.
//!
//! Counting happens only on a thread that holds a [`FileReadCounter`] (from
//! [`count_file_reads`]): without one, opening and reading record nothing, so a long-lived
//! process that lists 100,000 files keeps no list of them.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

thread_local! {
    /// `Some((generation, openings))` while a [`FileReadCounter`] is alive on this thread.
    static TALLY: RefCell<Option<(u64, Vec<FileRead>)>> = const { RefCell::new(None) };
    /// Generations handed out on this thread, so that a reader opened under one counter never
    /// counts into another.
    static GENERATION: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Where the reads of one opening are counted (from [`opened`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    generation: u64,
    index: usize,
}

/// One opening of a run file and the bytes read through it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRead {
    /// The file opened.
    pub path: PathBuf,
    /// Bytes read from the file through this opening (compressed bytes are not counted for
    /// `.jsonl.zst`; the decompressed bytes the reader consumed are).
    pub bytes: u64,
}

/// Counts the run files opened and the bytes read from them on the calling thread while it
/// lives (see [`count_file_reads`]). Counted: [`read_header`](crate::read_header),
/// [`terminal_state`](crate::terminal_state) (and its exact variant) and every
/// [`Reader::open`](crate::Reader::open) / [`Reader::open_with`](crate::Reader::open_with)
/// (so [`read_run`](crate::read_run) too).
#[derive(Debug)]
pub struct FileReadCounter {
    /// The counter that was active when this one started, restored on drop.
    outer: Option<(u64, Vec<FileRead>)>,
}

/// Starts counting run-file reads on this thread; the returned counter says what was read
/// since ([`FileReadCounter::reads`]) and stops counting when dropped. A counter started while
/// another is alive counts on its own (files opened before it are not counted by it) and
/// hands back to the other when dropped.
pub fn count_file_reads() -> FileReadCounter {
    let generation = GENERATION.with(|g| {
        g.set(g.get().wrapping_add(1));
        g.get()
    });
    let outer = TALLY.with(|t| t.borrow_mut().replace((generation, Vec::new())));
    FileReadCounter { outer }
}

impl FileReadCounter {
    /// Every opening so far, in order (a file opened twice appears twice).
    pub fn reads(&self) -> Vec<FileRead> {
        TALLY.with(|t| {
            t.borrow()
                .as_ref()
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        })
    }

    /// Number of openings so far.
    pub fn files_opened(&self) -> usize {
        TALLY.with(|t| t.borrow().as_ref().map_or(0, |(_, v)| v.len()))
    }

    /// Most bytes read through one opening so far (0 when nothing was opened).
    pub fn max_bytes_per_file(&self) -> u64 {
        TALLY.with(|t| {
            t.borrow()
                .as_ref()
                .and_then(|(_, v)| v.iter().map(|r| r.bytes).max())
                .unwrap_or(0)
        })
    }

    /// Bytes read through all openings so far.
    pub fn total_bytes(&self) -> u64 {
        TALLY.with(|t| {
            t.borrow()
                .as_ref()
                .map_or(0, |(_, v)| v.iter().map(|r| r.bytes).sum())
        })
    }
}

impl Drop for FileReadCounter {
    fn drop(&mut self) {
        let outer = self.outer.take();
        TALLY.with(|t| *t.borrow_mut() = outer);
    }
}

/// Records an opening of `path`; where to count its reads, when counting.
pub(crate) fn opened(path: &Path) -> Option<Slot> {
    TALLY.with(|t| {
        let mut t = t.borrow_mut();
        let (generation, v) = t.as_mut()?;
        v.push(FileRead {
            path: path.to_owned(),
            bytes: 0,
        });
        Some(Slot {
            generation: *generation,
            index: v.len() - 1,
        })
    })
}

/// Adds `n` bytes read to `slot` (from [`opened`]); nothing once its counter is gone.
pub(crate) fn read(slot: Option<Slot>, n: usize) {
    let Some(slot) = slot else { return };
    TALLY.with(|t| {
        if let Some((generation, v)) = t.borrow_mut().as_mut()
            && *generation == slot.generation
            && let Some(r) = v.get_mut(slot.index)
        {
            r.bytes = r.bytes.saturating_add(n as u64);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_only_while_a_counter_lives_and_nests() {
        assert_eq!(opened(Path::new("/a")), None);
        let outer = count_file_reads();
        let a = opened(Path::new("/a"));
        read(a, 10);
        {
            let inner = count_file_reads();
            let b = opened(Path::new("/b"));
            read(b, 7);
            read(b, 3);
            // A file opened under the outer counter does not count into the inner one.
            read(a, 100);
            assert_eq!(inner.files_opened(), 1);
            assert_eq!(inner.max_bytes_per_file(), 10);
            assert_eq!(inner.total_bytes(), 10);
        }
        read(a, 5);
        assert_eq!(outer.files_opened(), 1);
        assert_eq!(
            outer.reads(),
            vec![FileRead {
                path: "/a".into(),
                bytes: 15
            }]
        );
        drop(outer);
        assert_eq!(opened(Path::new("/c")), None);
    }
}
