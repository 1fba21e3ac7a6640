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

thread_local! {
    static READ_BUFFER_BYTES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Bytes of read buffer allocated (and zero-filled) by every [`Reader`](crate::Reader) created or grown on the
/// calling thread since the thread started: the cost a reader pays before it reads anything.
/// Counted per thread so a test can assert what one operation allocated
/// (`after - before`) while other tests run.
pub fn read_buffer_bytes_on_this_thread() -> u64 {
    READ_BUFFER_BYTES.with(|c| c.get())
}

pub(crate) fn count_buffer_bytes(n: usize) {
    READ_BUFFER_BYTES.with(|c| c.set(c.get().saturating_add(n as u64)));
}

/// Sets the calling thread's read-buffer count back to `to` (a value read earlier on this
/// thread) and returns what was counted since: the count moves to the thread a
/// [`Tally`] is handed to.
pub(crate) fn take_buffer_bytes_since(to: u64) -> u64 {
    READ_BUFFER_BYTES.with(|c| c.replace(to)).saturating_sub(to)
}

/// Adds read-buffer bytes counted on another thread to the calling thread's count.
pub(crate) fn add_buffer_bytes(n: u64) {
    READ_BUFFER_BYTES.with(|c| c.set(c.get().saturating_add(n)));
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
    /// `read` calls made through this opening, the one that found the end included (for
    /// `.jsonl.zst`: reads of the decompressor).
    pub read_calls: u64,
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

    /// `read` calls through all openings so far.
    pub fn read_calls(&self) -> u64 {
        TALLY.with(|t| {
            t.borrow()
                .as_ref()
                .map_or(0, |(_, v)| v.iter().map(|r| r.read_calls).sum())
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
            read_calls: 0,
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
            r.read_calls = r.read_calls.saturating_add(1);
        }
    });
}

/// Whether a [`FileReadCounter`] is alive on the calling thread.
pub fn counting_file_reads() -> bool {
    TALLY.with(|t| t.borrow().is_some())
}

/// What one piece of work counted on one thread, moved out of it by [`TallyScope::finish`]
/// to be added to another thread's counts ([`Tally::add_to_this_thread`]): the run files
/// opened and the bytes read from each (when counting), the read-buffer bytes allocated
/// ([`crate::read_buffer_bytes_on_this_thread`]) and the `llm.request` lines deserialized and
/// skimmed ([`crate::llm_requests_deserialized_on_this_thread`],
/// [`crate::llm_requests_skimmed_on_this_thread`]). A caller that hands reads to other
/// threads adds their tallies back in its own order, so its counts are those of reading on
/// its own thread.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[must_use]
pub struct Tally {
    /// Openings and bytes read, when the work counted them.
    pub reads: Option<Vec<FileRead>>,
    /// Read-buffer bytes allocated.
    pub read_buffer_bytes: u64,
    /// `llm.request` records deserialized (messages included).
    pub llm_requests_deserialized: u64,
    /// `llm.request` records skimmed.
    pub llm_requests_skimmed: u64,
}

/// Counts one piece of work on the calling thread (from [`TallyScope::start`]) until
/// [`TallyScope::finish`] moves the counts into a [`Tally`].
#[derive(Debug)]
pub struct TallyScope {
    counter: Option<FileReadCounter>,
    buffer_bytes: u64,
    requests: (u64, u64),
}

impl TallyScope {
    /// Starts counting on the calling thread; with `count_reads` the run files opened are
    /// counted too (pass [`counting_file_reads`] of the thread the tally goes to).
    pub fn start(count_reads: bool) -> TallyScope {
        TallyScope {
            counter: count_reads.then(count_file_reads),
            buffer_bytes: read_buffer_bytes_on_this_thread(),
            requests: crate::skim::counts(),
        }
    }

    /// What was counted since [`TallyScope::start`], taken off the calling thread's counts
    /// (which are as they were at the start again, so that adding the tally back on the same
    /// thread counts nothing twice).
    pub fn finish(self) -> Tally {
        let reads = self.counter.as_ref().map(FileReadCounter::reads);
        drop(self.counter);
        let read_buffer_bytes = take_buffer_bytes_since(self.buffer_bytes);
        let (deserialized, skimmed) = crate::skim::take_since(self.requests);
        Tally {
            reads,
            read_buffer_bytes,
            llm_requests_deserialized: deserialized,
            llm_requests_skimmed: skimmed,
        }
    }
}

impl Tally {
    /// Adds the counts to the calling thread's: the openings to its live
    /// [`FileReadCounter`] (after those it holds; nothing when none is alive), the other
    /// counts to its per-thread totals.
    pub fn add_to_this_thread(self) {
        if let Some(reads) = self.reads {
            TALLY.with(|t| {
                if let Some((_, v)) = t.borrow_mut().as_mut() {
                    v.extend(reads);
                }
            });
        }
        add_buffer_bytes(self.read_buffer_bytes);
        crate::skim::add((self.llm_requests_deserialized, self.llm_requests_skimmed));
    }
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
                bytes: 15,
                read_calls: 2
            }]
        );
        drop(outer);
        assert_eq!(opened(Path::new("/c")), None);
    }

    #[test]
    fn a_tally_moves_counts_between_threads_without_counting_twice() {
        let outer = count_file_reads();
        let a = opened(Path::new("/a"));
        read(a, 1);
        // Counted on another thread, added here.
        let tally = std::thread::scope(|s| {
            s.spawn(|| {
                let scope = TallyScope::start(true);
                let b = opened(Path::new("/b"));
                read(b, 7);
                add_buffer_bytes(100);
                scope.finish()
            })
            .join()
            .unwrap()
        });
        assert_eq!(tally.read_buffer_bytes, 100);
        let before = read_buffer_bytes_on_this_thread();
        tally.add_to_this_thread();
        assert_eq!(read_buffer_bytes_on_this_thread(), before + 100);
        assert_eq!(
            outer.reads(),
            vec![
                FileRead {
                    path: "/a".into(),
                    bytes: 1,
                    read_calls: 1
                },
                FileRead {
                    path: "/b".into(),
                    bytes: 7,
                    read_calls: 1
                }
            ]
        );
        // Counted and added on the same thread: once.
        let before = read_buffer_bytes_on_this_thread();
        let scope = TallyScope::start(true);
        add_buffer_bytes(5);
        let c = opened(Path::new("/c"));
        read(c, 3);
        let tally = scope.finish();
        assert_eq!(read_buffer_bytes_on_this_thread(), before);
        assert_eq!(outer.files_opened(), 2);
        tally.add_to_this_thread();
        assert_eq!(read_buffer_bytes_on_this_thread(), before + 5);
        assert_eq!(outer.files_opened(), 3);
        assert_eq!(outer.total_bytes(), 11);
    }
}
