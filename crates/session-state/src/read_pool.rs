//! Reading many run files on a few threads, results taken in the order of the files: the
//! store-sized passes (the run index's first build and large refreshes,
//! [`RunIndex::index_runs`](crate::RunIndex::index_runs); its rebuild,
//! [`RunIndex::reindex`](crate::RunIndex::reindex); `sessions verify` of the whole store)
//! read and parse each file on a worker while the one thread that writes SQLite takes the
//! results in the walk's order, so what it writes (rows, reports, their order) is what a pass
//! on one thread writes.
//!
//! [`InOrder`] is the pool: jobs are claimed in order by up to [`max_threads`] workers
//! (scoped to the pass: started by [`InOrder::start`], joined when the pool is dropped);
//! each worker keeps its own scratch (the run index's: one read buffer, reused for every
//! file, [`session_jsonl::Reader::open_reusing`]).
//!
//! Jobs are handed over a block at a time, so the cost of passing work between threads
//! (taking the lock, waking a thread) is paid per block, not per file: a worker claims a
//! run of [`block_len`] consecutive jobs under the lock, runs them, and hands their results
//! to the taker together, under the same lock taking as it claims its next block. The taker
//! takes the lock only when it moves to another block, and a thread is woken only when it
//! waits: the taker for the block holding the job it takes, a worker for the window to move
//! ([`InOrder::hand_offs`] counts the blocks and notifications). Blocks start at multiples
//! of [`block_len`] from the first job, so a pass of `n` jobs hands over `⌈n / block_len⌉`
//! blocks (more only when a job panics).
//!
//! Memory stays bounded: a worker claims a block only when its last job is fewer than
//! [`WINDOW`] jobs ahead of the job the taker waits for (or, while the taker takes from a
//! block it holds, the first job it took from it), so at most [`WINDOW`] results wait to be
//! taken, whatever the sizes of the files (each read bounded as it is on one thread). A pool
//! started with [`InOrder::start_windowed`] has its own window: the run index's rebuild, whose
//! reads are rows and whose taker reads every stored row before it takes the first, lets its
//! workers read much further ahead meanwhile (`REINDEX_WINDOW` in `runs.rs`).
//! A panic in a worker (a bug: reading stored data never panics) is resumed on the taking
//! thread when its job is taken, as if the job had run there; that worker stops (its
//! scratch may be half-updated) and gives the jobs of its block after the panicking one back
//! to the others, which claim them before any new block. Dropping the pool stops the workers
//! (each after the job it is running).
//!
//! `RefreshReads` is the run index's use of it: one job per file to read, each read with
//! `partial::read_for_refresh` and counted with a [`session_jsonl::TallyScope`]
//! whose tally is added to the taking thread when the result is taken, so the per-thread
//! counts tests hold (files opened, bytes read, read-buffer bytes, `llm.request` lines
//! deserialized) are those of a pass on one thread.

use std::collections::BTreeMap;
use std::ops::Range;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use session_jsonl::{Tally, TallyScope};

use crate::error::Result;
use crate::resume::RowRead;
use crate::row::IndexedRunOutcome;

/// Most jobs a worker may be ahead of the job being taken: the bound on results waiting.
pub const WINDOW: usize = 256;

/// Most worker threads of one pool (the reads are bound by parsing and the page cache; more
/// threads than cores only contend).
pub const MAX_THREADS: usize = 4;

/// Fewest jobs worth starting workers for: below this a pass reads on its own thread.
pub const MIN_PARALLEL_JOBS: usize = 8;

/// Most jobs of one block (a worker's claim, one message to the taker); well under
/// [`WINDOW`], so several blocks are read ahead.
pub const MAX_BLOCK: usize = 32;

/// Blocks each worker gets at least, when there are jobs enough: a small pass is still
/// spread over every worker.
pub const BLOCKS_PER_WORKER: usize = 8;

#[cfg(test)]
thread_local! {
    /// Thread count forced by a test (`Some(1)`: the pass on one thread).
    static FORCED_THREADS: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` with every pool started on this thread using `threads` workers (1: none, the
/// jobs run on this thread).
#[cfg(test)]
pub(crate) fn with_threads<T>(threads: usize, f: impl FnOnce() -> T) -> T {
    let before = FORCED_THREADS.with(|c| c.replace(Some(threads)));
    let out = f();
    FORCED_THREADS.with(|c| c.set(before));
    out
}

/// Workers for `jobs` jobs: none (1, the calling thread) below [`MIN_PARALLEL_JOBS`], else
/// the machine's available parallelism, at most [`MAX_THREADS`].
pub fn max_threads(jobs: usize) -> usize {
    #[cfg(test)]
    if let Some(n) = FORCED_THREADS.with(std::cell::Cell::get) {
        return n;
    }
    if jobs < MIN_PARALLEL_JOBS {
        return 1;
    }
    std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .clamp(1, MAX_THREADS)
}

/// Jobs per block of a pass of `jobs` jobs on `workers` workers: `jobs / (workers ×`
/// [`BLOCKS_PER_WORKER`]`)`, at least 1 and at most [`MAX_BLOCK`] (1,000 jobs on 2
/// workers: 32; 100 jobs on 2 workers: 6).
pub fn block_len(jobs: usize, workers: usize) -> usize {
    (jobs / workers.max(1).saturating_mul(BLOCKS_PER_WORKER)).clamp(1, MAX_BLOCK)
}

/// Hand-offs between the workers and the taker of one pool so far ([`InOrder::hand_offs`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HandOffs {
    /// Blocks of results the workers handed to the taker.
    pub sent: u64,
    /// Condition-variable notifications: of the taker, waiting for the block it takes from,
    /// and of workers, waiting for the window to move (or for jobs given back, or for the
    /// pass's end); not counting the pool's drop.
    pub woken: u64,
}

/// What the workers and the taker share.
struct Shared<R> {
    state: Mutex<State<R>>,
    /// Workers waiting for the window to move, for jobs given back or for the pass's end.
    wake: Condvar,
    /// The taker waiting for the block holding the job it takes.
    ready: Condvar,
    /// Set when the pool is dropped: workers stop claiming and running jobs.
    stop: AtomicBool,
    /// Number of jobs.
    len: usize,
    /// Jobs per block ([`block_len`]).
    block: usize,
    /// Most jobs a worker may be ahead of the job being taken ([`WINDOW`] by default).
    window: usize,
    sent: AtomicU64,
    woken: AtomicU64,
}

struct State<R> {
    /// First job of the ones no worker claimed yet.
    next: usize,
    /// Jobs claimed by a worker that stopped (at a panic) before running them: claimed
    /// again before any new block.
    returned: Vec<Range<usize>>,
    /// Workers running a block they claimed (one may yet give jobs back).
    busy: usize,
    /// Job the taker waits for, or the first it took from the block in its hands (every
    /// job before it is taken or skipped).
    taking: usize,
    /// Workers waiting on `wake` that were not notified since they began to wait.
    waiting: usize,
    /// Blocks run and not yet taken: the results of the jobs from the key on.
    done: BTreeMap<usize, Vec<Outcome<R>>>,
    /// Workers that have not stopped.
    alive: usize,
    /// Whether the taker waits on `ready`.
    taker_waits: bool,
}

impl<R> Shared<R> {
    fn lock(&self) -> MutexGuard<'_, State<R>> {
        // No code panics while holding the lock; a poisoned one holds consistent numbers.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a worker must wait in state `st`: no job was given back, and either the next
    /// block's last job is not within the pool's window ([`WINDOW`] unless it was started
    /// with another) of the job being taken, or every job is claimed but a worker still runs
    /// a block (it may give jobs back).
    fn must_wait(&self, st: &State<R>) -> bool {
        st.returned.is_empty()
            && if st.next < self.len {
                st.next.saturating_add(self.block).min(self.len)
                    > st.taking.saturating_add(self.window)
            } else {
                st.busy > 0
            }
    }

    /// Whether to wake the waiting workers: there are some and `st` lets them go on (then
    /// they count as notified). The notification is made with the lock released
    /// ([`Shared::notify`]), so the woken thread does not wait for the lock at once.
    fn wake_workers(&self, st: &mut State<R>) -> bool {
        let wake = st.waiting > 0 && !self.must_wait(st);
        if wake {
            st.waiting = 0;
        }
        wake
    }

    /// Whether to wake the taker: it waits (then it counts as notified).
    fn wake_taker(st: &mut State<R>) -> bool {
        std::mem::take(&mut st.taker_waits)
    }

    /// Notifies the waiting workers and the taker as decided under the lock.
    fn notify(&self, wake: Wake) {
        if wake.workers {
            self.woken.fetch_add(1, Ordering::Relaxed);
            self.wake.notify_all();
        }
        if wake.taker {
            self.woken.fetch_add(1, Ordering::Relaxed);
            self.ready.notify_one();
        }
    }

    /// The next jobs for a worker to run (jobs given back first, else the next block),
    /// waiting for the window to move if it must; `None` when the pool is dropped or every
    /// job is claimed and no block is running.
    fn claim<'a>(
        &'a self,
        mut st: MutexGuard<'a, State<R>>,
    ) -> (MutexGuard<'a, State<R>>, Option<Range<usize>>) {
        loop {
            if self.stop.load(Ordering::SeqCst) {
                return (st, None);
            }
            if !self.must_wait(&st) {
                break;
            }
            st.waiting += 1;
            st = self.wake.wait(st).unwrap_or_else(PoisonError::into_inner);
        }
        let jobs = if let Some(jobs) = st.returned.pop() {
            jobs
        } else if st.next < self.len {
            let jobs = st.next..st.next.saturating_add(self.block).min(self.len);
            st.next = jobs.end;
            jobs
        } else {
            return (st, None);
        };
        st.busy += 1;
        (st, Some(jobs))
    }

    /// The block holding job `i` (its first job and results), waiting for it to be run;
    /// `None` when no worker is left to run it. Tells the workers `i` is the job taken and
    /// drops the blocks before it.
    fn block_holding(&self, i: usize) -> Option<(usize, Vec<Outcome<R>>)> {
        let mut passed = Vec::new();
        let mut st = self.lock();
        st.taking = i;
        let mut wake = Wake {
            workers: self.wake_workers(&mut st),
            taker: false,
        };
        let found = loop {
            let mut found = None;
            while let Some(entry) = st.done.first_entry() {
                let first = *entry.key();
                if first > i {
                    break;
                }
                let results = entry.remove();
                if i < first + results.len() {
                    found = Some((first, results));
                    break;
                }
                passed.push(results);
            }
            if found.is_some() || st.alive == 0 {
                break found;
            }
            if wake.workers {
                // Wake them before waiting, with the lock released.
                drop(st);
                self.notify(std::mem::take(&mut wake));
                st = self.lock();
                continue;
            }
            st.taker_waits = true;
            st = self.ready.wait(st).unwrap_or_else(PoisonError::into_inner);
        };
        drop(st);
        self.notify(wake);
        drop(passed);
        found
    }
}

/// Threads to wake once the lock is released.
#[derive(Default)]
struct Wake {
    workers: bool,
    taker: bool,
}

/// Counts a worker as stopped when it ends, however it ends.
struct Alive<'a, R>(&'a Shared<R>);

impl<R> Drop for Alive<'_, R> {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.alive -= 1;
        let taker = st.alive == 0 && Shared::wake_taker(&mut st);
        drop(st);
        self.0.notify(Wake {
            workers: false,
            taker,
        });
    }
}

/// The outcome of one job on a worker: its result, or the panic to resume on the taker.
type Outcome<R> = std::thread::Result<R>;

type Inline<R> = Box<dyn FnMut(usize) -> R>;

/// A pool that runs one function over a list of jobs on worker threads and hands the
/// results out in job order ([`InOrder::take`]). See the module documentation.
pub struct InOrder<R: Send + 'static> {
    shared: Arc<Shared<R>>,
    /// The block in the taker's hands: the job of its next result, and the results left.
    current: Option<(usize, std::vec::IntoIter<Outcome<R>>)>,
    /// First job neither taken nor passed.
    passed: usize,
    workers: Vec<JoinHandle<()>>,
    /// Without workers: the jobs run on the taking thread.
    inline: Option<Inline<R>>,
    len: usize,
}

impl<R: Send + 'static> InOrder<R> {
    /// Starts `threads` workers over `jobs` (none when `threads` ≤ 1 or there is at most one
    /// job, or when no thread can be started: then each job runs on the taking thread when
    /// taken). Each worker makes its scratch with `scratch` once and runs `work(job,
    /// &mut scratch)` for each job it claims, in blocks of [`block_len`]`(jobs.len(),
    /// threads)` consecutive jobs.
    pub fn start<J, S>(
        jobs: Vec<J>,
        threads: usize,
        scratch: impl Fn() -> S + Send + Sync + 'static,
        work: impl Fn(&J, &mut S) -> R + Send + Sync + 'static,
    ) -> InOrder<R>
    where
        J: Send + Sync + 'static,
        S: 'static,
    {
        Self::start_windowed(jobs, threads, WINDOW, scratch, work)
    }

    /// [`InOrder::start`] with the workers allowed `window` jobs ahead of the job being
    /// taken instead of [`WINDOW`] (at least one block): for a pass whose results are
    /// small and whose taker has other work before it takes the first one, so that the
    /// workers read on meanwhile. At most `window` results wait to be taken.
    pub fn start_windowed<J, S>(
        jobs: Vec<J>,
        threads: usize,
        window: usize,
        scratch: impl Fn() -> S + Send + Sync + 'static,
        work: impl Fn(&J, &mut S) -> R + Send + Sync + 'static,
    ) -> InOrder<R>
    where
        J: Send + Sync + 'static,
        S: 'static,
    {
        let len = jobs.len();
        let threads = if threads > 1 { threads.min(len) } else { 0 };
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                next: 0,
                returned: Vec::new(),
                busy: 0,
                taking: 0,
                waiting: 0,
                done: BTreeMap::new(),
                alive: threads,
                taker_waits: false,
            }),
            wake: Condvar::new(),
            ready: Condvar::new(),
            stop: AtomicBool::new(false),
            len,
            block: block_len(len, threads),
            window: window.max(block_len(len, threads)),
            sent: AtomicU64::new(0),
            woken: AtomicU64::new(0),
        });
        let jobs = Arc::new(jobs);
        let scratch = Arc::new(scratch);
        let work = Arc::new(work);
        let mut workers = Vec::new();
        for n in 0..threads {
            let (pool, jobs, scratch, work) = (
                Arc::clone(&shared),
                Arc::clone(&jobs),
                Arc::clone(&scratch),
                Arc::clone(&work),
            );
            let spawned = std::thread::Builder::new()
                .name(format!("session-read-{n}"))
                .spawn(move || worker(&pool, &jobs, &*scratch, &*work));
            match spawned {
                Ok(handle) => workers.push(handle),
                // A thread that cannot be started leaves the jobs to the others.
                Err(_) => shared.lock().alive -= 1,
            }
        }
        let inline: Option<Inline<R>> = workers.is_empty().then(|| {
            let mut s = scratch();
            Box::new(move |i: usize| work(&jobs[i], &mut s)) as Inline<R>
        });
        InOrder {
            shared,
            current: None,
            passed: 0,
            workers,
            inline,
            len,
        }
    }

    /// Number of worker threads (0: the jobs run on the taking thread).
    pub fn workers(&self) -> usize {
        self.workers.len()
    }

    /// Blocks handed over and notifications between the workers and the taker so far (none
    /// without workers).
    pub fn hand_offs(&self) -> HandOffs {
        HandOffs {
            sent: self.shared.sent.load(Ordering::Relaxed),
            woken: self.shared.woken.load(Ordering::Relaxed),
        }
    }

    /// The result of job `i`. Take jobs in increasing order: the results of jobs before `i`
    /// that were not taken are dropped. `None` when `i` is out of range, was passed already,
    /// or no worker is left to run it. A panic of the job is resumed here.
    pub fn take(&mut self, i: usize) -> Option<R> {
        if i >= self.len || i < self.passed {
            return None;
        }
        self.passed = i + 1;
        if let Some(run) = self.inline.as_mut() {
            return Some(run(i));
        }
        let in_hand = self
            .current
            .as_ref()
            .is_some_and(|(first, results)| (*first..*first + results.len()).contains(&i));
        if !in_hand {
            // The workers learn of the job taken when the taker moves to another block (the
            // results of the one in hand came together).
            self.current = None;
            let (first, results) = self.shared.block_holding(i)?;
            self.current = Some((first, results.into_iter()));
        }
        let (first, results) = self.current.as_mut()?;
        let skipped = i - *first;
        *first = i + 1;
        results.nth(skipped).map(resume)
    }
}

fn resume<R>(outcome: Outcome<R>) -> R {
    match outcome {
        Ok(r) => r,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

fn worker<J, S, R>(
    shared: &Shared<R>,
    jobs: &[J],
    scratch: &dyn Fn() -> S,
    work: &dyn Fn(&J, &mut S) -> R,
) {
    let _alive = Alive(shared);
    let mut s = scratch();
    let mut st = shared.lock();
    // Threads to wake for the block handed over last.
    let mut wake = Wake::default();
    loop {
        if (wake.workers || wake.taker) && shared.must_wait(&st) {
            // Wake them before waiting, with the lock released.
            drop(st);
            shared.notify(std::mem::take(&mut wake));
            st = shared.lock();
        }
        let claimed;
        (st, claimed) = shared.claim(st);
        drop(st);
        shared.notify(std::mem::take(&mut wake));
        let Some(claimed) = claimed else {
            return;
        };
        let mut results = Vec::with_capacity(claimed.len());
        let mut left = claimed.clone();
        let mut panicked = false;
        for j in left.by_ref() {
            if shared.stop.load(Ordering::Relaxed) {
                return;
            }
            let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| work(&jobs[j], &mut s)));
            panicked = outcome.is_err();
            results.push(outcome);
            if panicked {
                break;
            }
        }
        st = shared.lock();
        st.busy -= 1;
        shared.sent.fetch_add(1, Ordering::Relaxed);
        wake.taker = (claimed.start..claimed.start + results.len()).contains(&st.taking)
            && Shared::wake_taker(&mut st);
        st.done.insert(claimed.start, results);
        if panicked && !left.is_empty() {
            // The scratch may be half-updated: this worker stops, the others run the rest
            // of its block.
            st.returned.push(left);
        }
        // Jobs given back, or the pass's last block ended: the waiting workers go on.
        wake.workers = shared.wake_workers(&mut st);
        if panicked {
            drop(st);
            shared.notify(wake);
            return;
        }
    }
}

impl<R: Send + 'static> Drop for InOrder<R> {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // A worker checks `stop` under the lock before it waits: taking the lock here
        // means it either saw `stop` or is waiting when notified.
        let done = std::mem::take(&mut self.shared.lock().done);
        self.shared.wake.notify_all();
        drop(done);
        self.current = None;
        for handle in self.workers.drain(..) {
            // A worker's panic was handed to the taker (or its job was never taken).
            let _ = handle.join();
        }
    }
}

/// One run file the index reads: where it is, what its listing said, and the checkpoint to go
/// on from (an open run that grew).
#[derive(Debug, Clone)]
pub(crate) struct FileJob {
    pub(crate) path: PathBuf,
    pub(crate) size: u64,
    pub(crate) mtime_ns: i64,
    pub(crate) compressed: bool,
    pub(crate) stored: Option<String>,
    /// Listed by name only: size and mtime come from the `fstat` of the file once opened
    /// ([`crate::tree::open_in_dir`]), not from `size`/`mtime_ns`.
    pub(crate) stat_at_open: bool,
}

impl FileJob {
    /// The job of reading the listed file `f`, going on from `stored` when given.
    pub(crate) fn of(f: &crate::tree::Listed, stored: Option<&str>) -> FileJob {
        FileJob {
            path: f.path.clone(),
            size: f.size,
            mtime_ns: f.mtime_ns,
            compressed: f.compressed,
            stored: stored.map(str::to_owned),
            stat_at_open: f.stat_at_open,
        }
    }
}

/// A run file read by a worker.
pub(crate) struct FileRead {
    pub(crate) read: Result<RowRead>,
    /// For a run that has ended: whether the file's size or mtime changed while it was read
    /// (looked at again after the read, on the worker). `false` for open runs and failures.
    pub(crate) changed: bool,
    /// For a job listed by name only ([`FileJob::stat_at_open`]) and opened: the file as its
    /// `fstat` showed it before the read (the size and mtime its row holds).
    pub(crate) seen: Option<crate::tree::Seen>,
    tally: Tally,
}

/// What a worker keeps from one file to the next: its read buffer, and the directory its
/// last file was opened in.
#[derive(Default)]
pub(crate) struct Scratch {
    buf: Vec<u8>,
    dir: crate::tree::DirHandle,
}

/// Reads `job` with the worker's scratch (read buffer, open directory), counting what it
/// reads in a tally for the taking thread (openings only when `count_reads`). A job listed
/// by name only is opened relative to its directory and looked at with `fstat` first; its
/// size and mtime are the ones that `fstat` gave.
fn read_file(job: &FileJob, scratch: &mut Scratch, count_reads: bool) -> FileRead {
    let scope = TallyScope::start(count_reads);
    let (read, seen) = if job.stat_at_open {
        match crate::tree::open_in_dir(&mut scratch.dir, &job.path) {
            Ok((file, seen)) => (
                crate::partial::read_opened_for_refresh(
                    file,
                    &job.path,
                    (seen.size, seen.mtime_ns, job.compressed),
                    &mut scratch.buf,
                ),
                Some(seen),
            ),
            Err(e) => (
                Err(crate::error::StateError::Run {
                    path: job.path.clone(),
                    source: Box::new(e),
                }),
                None,
            ),
        }
    } else {
        let read = crate::partial::read_for_refresh(
            &job.path,
            job.size,
            job.mtime_ns,
            job.compressed,
            job.stored.as_deref(),
            &mut scratch.buf,
        );
        (read, None)
    };
    let (size, mtime_ns) = seen.map_or((job.size, job.mtime_ns), |s| (s.size, s.mtime_ns));
    let changed = match &read {
        Ok(r) if r.row.outcome != IndexedRunOutcome::Open => match &r.after {
            Some(after) => after.changed_since(size, mtime_ns),
            None => changed_since(&job.path, size, mtime_ns),
        },
        _ => false,
    };
    FileRead {
        read,
        changed,
        seen,
        tally: scope.finish(),
    }
}

/// Whether the file at `path` no longer has size `size` and mtime `mtime_ns` (or is gone):
/// for reads that did not keep the file open to its end (bounded reads of large files).
fn changed_since(path: &Path, size: u64, mtime_ns: i64) -> bool {
    match std::fs::symlink_metadata(path) {
        Ok(md) => md.len() != size || crate::tree::mtime_ns(&md) != mtime_ns,
        Err(_) => true,
    }
}

/// The reads of one refresh or rebuild: the files to read, keyed by their position in the
/// pass's list of files, read ahead by an [`InOrder`] pool and taken in that order
/// ([`RefreshReads::take`]).
pub(crate) struct RefreshReads {
    /// Position in the pass of each job, increasing.
    keys: Vec<usize>,
    /// Next entry of `keys` not taken yet.
    cursor: usize,
    pool: InOrder<FileRead>,
    /// Whether the taking thread counts file reads (then so do the workers).
    count_reads: bool,
    /// Scratch of the reads the taker makes itself (a file the pool was not given).
    spare: Scratch,
}

impl RefreshReads {
    /// Starts reading `jobs` (`(position, job)`, positions increasing) on
    /// [`max_threads`] workers.
    pub(crate) fn start(jobs: Vec<(usize, FileJob)>) -> RefreshReads {
        Self::start_windowed(jobs, WINDOW)
    }

    /// [`RefreshReads::start`] with the workers allowed `window` reads ahead
    /// ([`InOrder::start_windowed`]).
    pub(crate) fn start_windowed(jobs: Vec<(usize, FileJob)>, window: usize) -> RefreshReads {
        let count_reads = session_jsonl::counting_file_reads();
        let (keys, jobs): (Vec<usize>, Vec<FileJob>) = jobs.into_iter().unzip();
        let threads = max_threads(jobs.len());
        let pool = InOrder::start_windowed(
            jobs,
            threads,
            window,
            Scratch::default,
            move |job, scratch| read_file(job, scratch, count_reads),
        );
        RefreshReads {
            keys,
            cursor: 0,
            pool,
            count_reads,
            spare: Scratch::default(),
        }
    }

    /// The read of the listed file `f` at position `at` of the pass, going on from `stored`
    /// (as given to [`RefreshReads::start`] for `at`; a file it was not given is read here,
    /// on the calling thread). Take positions in increasing order. The read's tally is added
    /// to the calling thread's counts. Returns the read, for a run that has ended whether
    /// the file changed while it was read, and the file as its reader looked at it when `f`
    /// was listed by name only ([`crate::tree::Listed::stat_at_open`]; `None` otherwise or
    /// when it could not be opened): see [`crate::tree::Listed::seen_as`].
    pub(crate) fn take(
        &mut self,
        at: usize,
        f: &crate::tree::Listed,
        stored: Option<&str>,
    ) -> (Result<RowRead>, bool, Option<crate::tree::Seen>) {
        while self.keys.get(self.cursor).is_some_and(|&k| k < at) {
            self.cursor += 1;
        }
        let pooled = if self.keys.get(self.cursor) == Some(&at) {
            self.cursor += 1;
            self.pool.take(self.cursor - 1)
        } else {
            None
        };
        let done = match pooled {
            Some(done) => done,
            None => read_file(&FileJob::of(f, stored), &mut self.spare, self.count_reads),
        };
        done.tally.add_to_this_thread();
        (done.read, done.changed, done.seen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn results_come_in_job_order_whatever_order_the_workers_finish_in() {
        let jobs: Vec<u64> = (0..2_000).collect();
        let mut pool = InOrder::start(
            jobs,
            4,
            || 0u64,
            |&j, seen: &mut u64| {
                // Uneven work: later jobs often finish first.
                if j % 7 == 0 {
                    std::thread::sleep(std::time::Duration::from_micros(50));
                }
                *seen += 1;
                j * 2
            },
        );
        assert!(pool.workers() > 1);
        for i in 0..2_000 {
            assert_eq!(pool.take(i as usize), Some(i * 2));
        }
        assert_eq!(pool.take(2_000), None);
    }

    #[test]
    fn each_worker_makes_its_scratch_once() {
        let made = Arc::new(AtomicUsize::new(0));
        let m = Arc::clone(&made);
        let mut pool = InOrder::start(
            (0..500usize).collect(),
            3,
            move || {
                m.fetch_add(1, Ordering::SeqCst);
                Vec::<u8>::new()
            },
            |&j, s: &mut Vec<u8>| {
                s.push(0);
                j
            },
        );
        let workers = pool.workers();
        for i in 0..500 {
            assert_eq!(pool.take(i), Some(i));
        }
        drop(pool);
        assert_eq!(made.load(Ordering::SeqCst), workers);
    }

    #[test]
    fn workers_stay_within_the_window_of_the_job_taken() {
        let ran = Arc::new(AtomicUsize::new(0));
        let r = Arc::clone(&ran);
        let mut pool = InOrder::start(
            (0..10 * WINDOW).collect(),
            2,
            || (),
            move |&j, ()| {
                r.fetch_add(1, Ordering::SeqCst);
                j
            },
        );
        assert_eq!(pool.take(0), Some(0));
        std::thread::sleep(std::time::Duration::from_millis(50));
        // Nothing past job 0 + WINDOW was claimed while job 0 was the one taken.
        assert!(
            ran.load(Ordering::SeqCst) <= WINDOW,
            "{}",
            ran.load(Ordering::SeqCst)
        );
        // Skipping ahead drops the results in between.
        assert_eq!(pool.take(5 * WINDOW), Some(5 * WINDOW));
        assert_eq!(pool.take(3), None);
        assert_eq!(pool.take(5 * WINDOW + 1), Some(5 * WINDOW + 1));
    }

    /// A pool started with a wider window reads that far ahead before anything is taken
    /// (a rebuild's workers read on while the stored rows are read), and no further.
    #[test]
    fn a_wider_window_lets_the_workers_read_that_far_ahead() {
        let window = 4 * WINDOW;
        let ran = Arc::new(AtomicUsize::new(0));
        let r = Arc::clone(&ran);
        let mut pool = InOrder::start_windowed(
            (0..10 * WINDOW).collect(),
            2,
            window,
            || (),
            move |&j, ()| {
                r.fetch_add(1, Ordering::SeqCst);
                j
            },
        );
        // Past the usual window with nothing taken (waited for, at most 10 s).
        let start = std::time::Instant::now();
        while ran.load(Ordering::SeqCst) < 3 * WINDOW {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(10),
                "the workers stopped after {} jobs",
                ran.load(Ordering::SeqCst)
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            ran.load(Ordering::SeqCst) <= window,
            "{}",
            ran.load(Ordering::SeqCst)
        );
        for j in 0..10 * WINDOW {
            assert_eq!(pool.take(j), Some(j));
        }
        assert_eq!(ran.load(Ordering::SeqCst), 10 * WINDOW);
    }

    #[test]
    fn a_panic_of_a_job_is_resumed_on_the_taker() {
        let mut pool = InOrder::start(
            (0..100usize).collect(),
            2,
            || (),
            |&j, ()| {
                if j == 40 {
                    panic!("job {j}");
                }
                j
            },
        );
        for i in 0..40 {
            assert_eq!(pool.take(i), Some(i));
        }
        let caught = std::panic::catch_unwind(AssertUnwindSafe(|| pool.take(40)));
        let panic = caught.unwrap_err();
        assert_eq!(
            panic.downcast_ref::<String>().map(String::as_str),
            Some("job 40")
        );
        // Job 40 was in the middle of a block (36..42): its worker stopped and the rest of
        // the block was run by the other one.
        assert_eq!(block_len(100, 2), 6);
        for i in 41..100 {
            assert_eq!(pool.take(i), Some(i));
        }
        // 17 blocks, job 40's cut short, and the two jobs it gave back.
        assert_eq!(pool.hand_offs().sent, 18);
    }

    #[test]
    fn every_other_job_is_run_whichever_job_panics() {
        for threads in [2, 3] {
            for bad in 0..60 {
                let mut pool = InOrder::start(
                    (0..60usize).collect(),
                    threads,
                    || (),
                    move |&j, ()| {
                        assert_ne!(j, bad, "job {j}");
                        j
                    },
                );
                for i in 0..60 {
                    let taken = std::panic::catch_unwind(AssertUnwindSafe(|| pool.take(i)));
                    match taken {
                        Ok(got) => assert_eq!(got, Some(i), "{threads} threads, {bad} panics"),
                        Err(_) => assert_eq!(i, bad),
                    }
                }
            }
        }
    }

    #[test]
    fn a_pass_hands_results_over_a_block_at_a_time() {
        assert_eq!(block_len(1_000, 2), 32);
        assert_eq!(block_len(10, 2), 1);
        assert_eq!(block_len(1_000_000, 4), MAX_BLOCK);
        for (jobs, blocks) in [(1_000usize, 32u64), (10_000, 313)] {
            let mut pool = InOrder::start((0..jobs).collect(), 2, || (), |&j, ()| j);
            assert_eq!(pool.workers(), 2);
            for i in 0..jobs {
                assert_eq!(pool.take(i), Some(i));
            }
            // One hand-over per block of 32 jobs (one message per job before), and a
            // notification only to a thread that waits: the taker for a block, a worker for
            // the window to move (one per job taken before).
            let h = pool.hand_offs();
            assert_eq!(h.sent, blocks, "{jobs} jobs: {h:?}");
            assert!(h.woken <= 2 * blocks + 2, "{jobs} jobs: {h:?}");
            assert_eq!(pool.take(jobs), None);
        }
    }

    #[test]
    fn a_job_taken_or_passed_is_not_given_again() {
        for threads in [1, 2] {
            let mut pool = InOrder::start((0..100usize).collect(), threads, || (), |&j, ()| j);
            assert_eq!(pool.take(10), Some(10));
            assert_eq!(pool.take(10), None);
            assert_eq!(pool.take(5), None);
            assert_eq!(pool.take(50), Some(50));
            assert_eq!(pool.take(99), Some(99));
        }
    }

    /// A store of 45 files over three days with every kind of damage the reader reports, a
    /// run too large to be read whole by a refresh, open runs and a run id held twice.
    fn damaged_store(root: &Path) {
        let header = |run: &str, at: &str| {
            format!(
                r#"{{"type":"header","schema_version":1,"run_id":"{run}","session_id":"s-{}","started_at":"{at}","model":{{"provider":"p","name":"m"}}}}"#,
                &run[..2]
            )
        };
        let body = |run: &str, pad: &str, ended: bool| {
            let mut b = format!(
                r#"{{"type":"run.start","run_id":"{run}","ts":"2026-11-30T10:00:00.000Z","input":{{"type":"text","text":"do {run}"}}}}"#
            );
            b.push('\n');
            b.push_str(&format!(
                r#"{{"type":"llm.request","run_id":"{run}","ts":"2026-11-30T10:01:00.000Z","seq":1,"input":{{"messages":[{{"role":"user","content":"{pad}"}}]}}}}"#
            ));
            b.push('\n');
            b.push_str(&format!(
                r#"{{"type":"llm.response","run_id":"{run}","ts":"2026-11-30T10:02:00.000Z","seq":1,"output":{{"messages":[],"usage":{{"model":"m","input_tokens":5,"output_tokens":2,"total_tokens":7}}}}}}"#
            ));
            b.push('\n');
            if ended {
                b.push_str(&format!(
                    r#"{{"type":"run.end","run_id":"{run}","ts":"2026-11-30T10:04:00.000Z","outcome":"completed"}}"#
                ));
                b.push('\n');
            }
            b
        };
        for day in 1..=3u32 {
            let dir = root.join(format!("2026/11/{day:02}"));
            std::fs::create_dir_all(&dir).unwrap();
            let at = format!("2026-11-{day:02}T10:00:00.000Z");
            for k in 0..15u32 {
                let run = format!("{day}{k:02}00000-0000-4000-8000-000000000000");
                let h = header(&run, &at);
                let bytes: Vec<u8> = match k % 10 {
                    0 => format!("{h}\n{}", body(&run, "hi", true)).into_bytes(),
                    1 => format!("{h}\n{}", body(&run, "hi", false)).into_bytes(),
                    2 => format!("{h}\n{}{{\"type\":\"run.e", body(&run, "hi", false)).into_bytes(),
                    3 => {
                        let mut b = format!("{h}\n").into_bytes();
                        b.extend_from_slice(&[0; 300]);
                        b.extend_from_slice(body(&run, "hi", true).as_bytes());
                        b
                    }
                    4 => format!("{h}\nnot json at all\n{}", body(&run, "hi", true)).into_bytes(),
                    5 => Vec::new(),
                    6 => body(&run, "hi", true).into_bytes(),
                    7 => format!("{h}\n{}", body(&run, &"x".repeat(300 << 10), true)).into_bytes(),
                    8 => {
                        let mut b = format!("{h}\n").into_bytes();
                        b.extend_from_slice(b"{\"type\":\"run.status\",\"run_id\":\"r\xff\"}\n");
                        b.extend_from_slice(body(&run, "hi", true).as_bytes());
                        b
                    }
                    // A run id held by two files (days 1 and 2).
                    _ => {
                        let twin = format!("9{k:02}00000-0000-4000-8000-000000000000");
                        format!("{}\n{}", header(&twin, &at), body(&twin, "hi", day == 2))
                            .into_bytes()
                    }
                };
                let name = if k % 10 == 9 {
                    format!("9{k:02}00000-0000-4000-8000-000000000000.jsonl")
                } else {
                    format!("{run}.jsonl")
                };
                if day == 3 && k % 10 == 9 {
                    continue;
                }
                std::fs::write(dir.join(name), bytes).unwrap();
            }
        }
    }

    /// What a refresh and the listings answer: the report, every listed row, every file
    /// that is no run.
    fn index_and_list(
        root: &Path,
    ) -> (
        crate::IndexReport,
        Vec<crate::RunRow>,
        Vec<crate::RunFileDiagnostic>,
    ) {
        let store = crate::StateStore::open(root).unwrap();
        let report = store.index_runs().unwrap();
        let rows = store.list_runs(&crate::RunQuery::default()).unwrap().runs;
        let diagnostics = store.run_file_diagnostics().unwrap();
        (report, rows, diagnostics)
    }

    fn without_state_db(root: &Path) {
        for name in ["state.db", "state.db-wal", "state.db-shm"] {
            let _ = std::fs::remove_file(root.join(name));
        }
    }

    #[test]
    fn a_refresh_on_workers_indexes_a_damaged_store_as_one_thread_does() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        damaged_store(root);
        let one = with_threads(1, || index_and_list(root));
        without_state_db(root);
        let many = with_threads(3, || index_and_list(root));
        assert_eq!(one, many);
        // Everything was read, the damage reported, in path order.
        let (report, rows, diagnostics) = many;
        assert_eq!(report.files_read, 44, "{report:?}");
        assert!(report.damaged.len() >= 9, "{report:?}");
        assert!(report.damaged.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(rows.iter().any(|r| r.damage_count > 0));
        assert_eq!(diagnostics.len(), 6, "{diagnostics:?}");

        // A rebuild, and a refresh after open runs grew (read on from their checkpoints).
        let rebuild = |threads| {
            with_threads(threads, || {
                crate::StateStore::open(root).unwrap().reindex().unwrap()
            })
        };
        assert_eq!(rebuild(1), rebuild(3));
        // One line more in each open run of the store at `at`.
        let grow = |at: &Path| {
            for day in 1..=3u32 {
                let run = format!("{day}0100000-0000-4000-8000-000000000000");
                let path = at.join(format!("2026/11/{day:02}/{run}.jsonl"));
                let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
                std::io::Write::write_all(
                    &mut f,
                    format!(
                        "{{\"type\":\"run.status\",\"run_id\":\"{run}\",\"ts\":\"2026-11-30T10:05:00.000Z\",\"status\":\"running\"}}\n"
                    )
                    .as_bytes(),
                )
                .unwrap();
            }
        };
        let copy = tempfile::tempdir().unwrap();
        copy_tree(root, copy.path());
        grow(root);
        let one = with_threads(1, || index_and_list(root));
        // The same change on the copy, refreshed on workers.
        grow(copy.path());
        let many = with_threads(3, || index_and_list(copy.path()));
        assert!(one.0.files_resumed >= 3, "{:?}", one.0);
        assert_eq!(strip(one, root), strip(many, copy.path()));
    }

    /// Copies the store (run files and `state.db`) keeping modification times.
    fn copy_tree(from: &Path, to: &Path) {
        for entry in walk(from) {
            let rel = entry.strip_prefix(from).unwrap();
            let dest = to.join(rel);
            std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
            std::fs::copy(&entry, &dest).unwrap();
            let mtime = std::fs::metadata(&entry).unwrap().modified().unwrap();
            std::fs::File::options()
                .write(true)
                .open(&dest)
                .unwrap()
                .set_modified(mtime)
                .unwrap();
        }
    }

    fn walk(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
        out
    }

    /// An answer with paths relative to `root` and the times of the files left out (the
    /// copies were appended to at other instants).
    fn strip(
        (report, rows, diagnostics): (
            crate::IndexReport,
            Vec<crate::RunRow>,
            Vec<crate::RunFileDiagnostic>,
        ),
        root: &Path,
    ) -> String {
        let rel = |p: &Path| p.strip_prefix(root).unwrap().display().to_string();
        let mut out = format!(
            "added {} updated {} removed {} read {} resumed {}\n",
            report.added, report.updated, report.removed, report.files_read, report.files_resumed
        );
        for (p, n) in &report.damaged {
            out.push_str(&format!("damaged {} {n}\n", rel(p)));
        }
        for r in rows {
            out.push_str(&format!(
                "{} {} {:?} {} {} {} {:?}\n",
                rel(&r.path),
                r.run_id,
                r.outcome,
                r.record_count,
                r.total_tokens,
                r.damage_count,
                r.other_files.iter().map(|p| rel(p)).collect::<Vec<_>>()
            ));
        }
        for d in diagnostics {
            out.push_str(&format!("not a run {} {}\n", rel(&d.path), d.message));
        }
        out
    }

    #[test]
    fn a_refresh_opens_each_file_once_and_allocates_a_buffer_per_reader() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        damaged_store(root);
        let buffers_before = session_jsonl::read_buffer_bytes_on_this_thread();
        let counter = session_jsonl::count_file_reads();
        let report = with_threads(3, || {
            crate::StateStore::open(root).unwrap().index_runs().unwrap()
        });
        let reads = counter.reads();
        drop(counter);
        let buffers = session_jsonl::read_buffer_bytes_on_this_thread() - buffers_before;
        assert_eq!(report.files_read, 44);
        // The workers' openings, counted here, in path order: one per file (the three large
        // runs: the head block and the tail probe).
        let paths: Vec<&Path> = reads.iter().map(|r| r.path.as_path()).collect();
        let mut sorted = paths.clone();
        sorted.sort();
        assert_eq!(paths, sorted);
        assert_eq!(reads.len(), 44 + 3, "{paths:?}");
        // Three readers, each one buffer no larger than the largest file read whole; the
        // three large runs are read bounded (their head block parsed with a buffer of its
        // size).
        let small: u64 = walk(root)
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .map(|p| std::fs::metadata(p).unwrap().len())
            .filter(|&n| n < 100 << 10)
            .max()
            .unwrap();
        let bounded = 3 * (session_jsonl::scan::HEAD_LIMIT as u64 + 1);
        assert!(
            buffers <= 3 * (small + 1) + bounded,
            "{buffers} bytes, largest small file {small}"
        );
    }

    /// Every value of the tables a pass writes that do not depend on when it looked (the rows
    /// of `runs` and `run_resume`, in key order) and the indexes of `runs` as declared.
    fn index_dump(root: &Path) -> String {
        let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
        let mut out = String::new();
        for sql in [
            "SELECT * FROM runs ORDER BY path",
            "SELECT * FROM run_resume ORDER BY path",
            "SELECT name, sql FROM sqlite_master WHERE tbl_name = 'runs' ORDER BY name",
        ] {
            let mut stmt = conn.prepare(sql).unwrap();
            let n = stmt.column_count();
            let mut rows = stmt.query([]).unwrap();
            while let Some(r) = rows.next().unwrap() {
                for i in 0..n {
                    out.push_str(&format!("{:?}|", r.get_ref(i).unwrap()));
                }
                out.push('\n');
            }
        }
        out
    }

    /// The secondary indexes of `runs`, by name.
    fn run_indexes(root: &Path) -> Vec<String> {
        let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
        let mut stmt = conn
            .prepare(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'runs' \
                 AND sql IS NOT NULL ORDER BY name",
            )
            .unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    #[test]
    fn a_rebuild_on_workers_leaves_the_index_a_first_build_on_one_thread_leaves() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        damaged_store(root);
        with_threads(1, || {
            crate::StateStore::open(root).unwrap().index_runs().unwrap();
        });
        let built = index_dump(root);
        assert!(run_indexes(root).len() >= 4, "{:?}", run_indexes(root));
        // Damage the index behind its back: a row changed, a row of no file.
        let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
        conn.execute_batch(
            "UPDATE runs SET total_tokens = total_tokens + 1 WHERE partial = 0 AND diagnostic IS NULL; \
             INSERT INTO runs SELECT '2026/11/01/gone.jsonl', run_id, session_id, started_at, \
             model_provider, model_name, outcome, last_status, record_count, invocation_count, \
             input_tokens, cached_input_tokens, cache_creation_tokens, output_tokens, total_tokens, \
             file_size, mtime_ns, first_input, workspace_root, damage_count, last_ts, compressed, \
             started_at_utc, diagnostic, partial FROM runs LIMIT 1;",
        )
        .unwrap();
        drop(conn);
        let report = with_threads(3, || {
            crate::StateStore::open(root).unwrap().reindex().unwrap()
        });
        assert_eq!(index_dump(root), built);
        assert_eq!(report.total, 44);
        let removed: Vec<&crate::RunChange> = report
            .changes
            .iter()
            .filter(|c| matches!(c, crate::RunChange::Removed(_)))
            .collect();
        assert_eq!(
            removed,
            [&crate::RunChange::Removed(
                root.join("2026/11/01/gone.jsonl")
            )]
        );
        let changed = report
            .changes
            .iter()
            .filter(
                |c| matches!(c, crate::RunChange::Changed(_, cols) if cols == &["total_tokens"]),
            )
            .count();
        assert!(changed >= 10, "{report:?}");
        assert_eq!(changed + 1, report.changes.len(), "{report:?}");
        assert_eq!(report.unchanged + changed as u64, 44);
        // The differences come in path order, as a pass on one thread reports them.
        let paths: Vec<&Path> = report
            .changes
            .iter()
            .map(|c| match c {
                crate::RunChange::Added(p)
                | crate::RunChange::Removed(p)
                | crate::RunChange::Changed(p, _) => p.as_path(),
            })
            .collect();
        assert!(paths.windows(2).all(|w| w[0] < w[1]), "{paths:?}");
        // And the listings answer as after the first build.
        let one = with_threads(1, || index_and_list(root));
        assert_eq!(one.0.files_read, 0);
    }

    /// VM steps of the statement of [`crate::runs::RunWriter`] storing one row of the index
    /// at `root` under a new key, with the secondary indexes of `runs` in place and without
    /// those a large write builds after its rows (the partial ones stay); and, without them,
    /// the steps of storing again every row of the index under a new key (a row that is no
    /// run goes into the partial index `runs_not_runs`). No triggers; rolled back.
    fn insert_steps(root: &Path) -> (u64, u64, u64) {
        let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
        conn.execute_batch("BEGIN").unwrap();
        let names = |kind: &str| -> Vec<String> {
            let mut stmt = conn
                .prepare(
                    "SELECT name FROM sqlite_master WHERE type = ?1 AND tbl_name = 'runs' \
                     AND sql IS NOT NULL",
                )
                .unwrap();
            stmt.query_map([kind], |r| r.get(0))
                .unwrap()
                .map(Result::unwrap)
                .collect()
        };
        for t in names("trigger") {
            conn.execute_batch(&format!("DROP TRIGGER \"{t}\""))
                .unwrap();
        }
        let rows: Vec<Vec<rusqlite::types::Value>> = {
            let mut stmt = conn.prepare("SELECT * FROM runs ORDER BY path").unwrap();
            stmt.query_map([], |r| (0..25).map(|i| r.get(i)).collect())
                .unwrap()
                .map(Result::unwrap)
                .collect()
        };
        let run = conn
            .query_row(
                "SELECT * FROM runs WHERE diagnostic IS NULL LIMIT 1",
                [],
                |r| {
                    (0..25)
                        .map(|i| r.get(i))
                        .collect::<rusqlite::Result<Vec<_>>>()
                },
            )
            .unwrap();
        let steps = |key: &str, of: &[rusqlite::types::Value]| {
            let mut values = of.to_vec();
            values[0] = rusqlite::types::Value::Text(key.to_owned());
            let mut stmt = conn.prepare(&crate::runs::UPSERT_RUN).unwrap();
            stmt.execute(rusqlite::params_from_iter(values.iter()))
                .unwrap();
            stmt.get_status(rusqlite::StatementStatus::VmStep) as u64
        };
        let indexed = steps("2026/11/09/a.jsonl", &run);
        let partial: Vec<String> = {
            let mut stmt = conn
                .prepare("SELECT name FROM pragma_index_list('runs') WHERE partial")
                .unwrap();
            stmt.query_map([], |r| r.get(0))
                .unwrap()
                .map(Result::unwrap)
                .collect()
        };
        assert_eq!(partial.len(), 2, "{partial:?}");
        for i in names("index").into_iter().filter(|i| !partial.contains(i)) {
            conn.execute_batch(&format!("DROP INDEX \"{i}\"")).unwrap();
        }
        let bare = steps("2026/11/09/b.jsonl", &run);
        let all_bare = rows
            .iter()
            .enumerate()
            .map(|(i, row)| steps(&format!("2026/11/09/c{i}.jsonl"), row))
            .sum();
        conn.execute_batch("ROLLBACK").unwrap();
        (indexed, bare, all_bare)
    }

    #[test]
    fn a_rebuild_writes_only_the_rows_that_differ_with_one_statement() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        damaged_store(root);
        crate::StateStore::open(root).unwrap().index_runs().unwrap();
        let indexes = run_indexes(root);
        assert!(indexes.len() >= 4, "{indexes:?}");
        let (indexed, bare, bare_rows) = insert_steps(root);
        assert!(bare < indexed, "{bare} {indexed}");
        // A first build: one statement for every row, each stored without the indexes and
        // without the running totals' triggers (summed once after the rows).
        let first = crate::runs::take_write_cost();
        assert_eq!((first.statements, first.rows), (1, 44), "{first:?}");
        assert_eq!(first.vm_steps, bare_rows, "{first:?}, {bare} a row");
        let rebuild = |threads| {
            with_threads(threads, || {
                let report = crate::StateStore::open(root).unwrap().reindex().unwrap();
                (report, crate::runs::take_write_cost())
            })
        };
        // Nothing changed: every file read, no row written.
        let (report, cost) = rebuild(3);
        assert_eq!((report.total, report.unchanged), (44, 44), "{report:?}");
        assert_eq!((cost.statements, cost.rows), (1, 0), "{cost:?}");
        let unchanged = index_dump(root);
        // Three rows damaged behind the index's back: those three are written again, with the
        // indexes in place.
        let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
        conn.execute_batch(
            "UPDATE runs SET total_tokens = total_tokens + 1 \
             WHERE path IN (SELECT path FROM runs ORDER BY path LIMIT 3)",
        )
        .unwrap();
        let (report, cost) = rebuild(3);
        assert_eq!(report.changes.len(), 3, "{report:?}");
        assert_eq!((cost.statements, cost.rows), (1, 3), "{cost:?}");
        assert!(cost.vm_steps >= 3 * indexed, "{cost:?}, {indexed} a row");
        assert_eq!(index_dump(root), unchanged);
        // Every row gone: all written without the indexes, which are built after them.
        conn.execute_batch("DELETE FROM runs").unwrap();
        let (report, cost) = rebuild(1);
        assert_eq!(report.changes.len(), 44, "{report:?}");
        assert_eq!((cost.statements, cost.rows), (1, 44), "{cost:?}");
        assert_eq!(cost.vm_steps, bare_rows, "{cost:?}, {bare} a row");
        assert_eq!(run_indexes(root), indexes);
        assert_eq!(index_dump(root), unchanged);
    }

    /// Whether another connection to the store's `state.db` can take its write lock now
    /// (without waiting).
    fn write_lock_free(root: &Path) -> bool {
        let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
        conn.busy_timeout(std::time::Duration::ZERO).unwrap();
        let free = conn.execute_batch("BEGIN IMMEDIATE").is_ok();
        if free {
            conn.execute_batch("ROLLBACK").unwrap();
        }
        free
    }

    #[test]
    fn a_first_build_writes_each_row_as_its_read_is_taken() {
        for threads in [1, 3] {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path();
            damaged_store(root);
            let store = crate::StateStore::open(root).unwrap();
            crate::runs::take_write_cost();
            // At each file taken: the rows written so far, and whether the write lock was free.
            let mut seen: Vec<(u64, u64, bool)> = Vec::new();
            let mut written = 0;
            let report = with_threads(threads, || {
                store
                    .index_runs_with_progress(&mut |done, _| {
                        written += crate::runs::take_write_cost().rows;
                        seen.push((done, written, write_lock_free(root)));
                    })
                    .unwrap()
            });
            assert_eq!(report.files_read, 44, "{report:?}");
            assert!(report.failed.is_empty(), "{report:?}");
            // Every file is new: its row is written when it is taken, not after the last one,
            // under the write transaction taken before the first.
            let want: Vec<(u64, u64, bool)> = (1..=44).map(|k| (k, k, false)).collect();
            assert_eq!(seen, want, "{threads} thread(s)");
            assert!(write_lock_free(root));

            // A refresh reading a few files reads them without the lock, and writes after.
            let day = root.join("2026/11/04");
            std::fs::create_dir_all(&day).unwrap();
            let src = root.join("2026/11/01/10000000-0000-4000-8000-000000000000.jsonl");
            for k in 0..3 {
                let name = format!("4{k:02}00000-0000-4000-8000-000000000000.jsonl");
                std::fs::copy(&src, day.join(name)).unwrap();
            }
            let mut seen = Vec::new();
            let report = store
                .index_runs_with_progress(&mut |done, _| {
                    seen.push((
                        done,
                        crate::runs::take_write_cost().rows,
                        write_lock_free(root),
                    ));
                })
                .unwrap();
            assert_eq!(report.added, 3, "{report:?}");
            assert!(seen.len() >= 3, "{seen:?}");
            assert!(
                seen.iter().all(|&(_, rows, free)| rows == 0 && free),
                "{seen:?}"
            );
            assert_eq!(crate::runs::take_write_cost().rows, 3);
        }
    }

    /// The running totals of the index at `root`, every row in key order.
    fn totals_dump(root: &Path) -> String {
        let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
        let mut out = String::new();
        for (table, key) in [
            ("run_totals", "kind, key"),
            ("run_day_totals", "day"),
            ("run_dup_ids", "run_id"),
        ] {
            let mut stmt = conn
                .prepare(&format!("SELECT * FROM {table} ORDER BY {key}"))
                .unwrap();
            let n = stmt.column_count();
            let mut rows = stmt.query([]).unwrap();
            while let Some(r) = rows.next().unwrap() {
                out.push_str(table);
                for i in 0..n {
                    out.push_str(&format!("|{:?}", r.get_ref(i).unwrap()));
                }
                out.push('\n');
            }
        }
        out
    }

    #[test]
    fn a_first_build_sums_its_running_totals_as_it_writes_its_rows() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        damaged_store(root);
        // Keys of other shapes: no model, a model without provider, no session, a start in
        // another zone, a start that is no time (stored as no start).
        let day = root.join("2026/11/04");
        std::fs::create_dir_all(&day).unwrap();
        let headers = [
            r#""session_id":"s-a","started_at":"2026-11-04T23:50:00.000+05:30""#,
            r#""started_at":"2026-11-04T10:44:59.999Z","model":{"name":"m"}"#,
            r#""session_id":"s-b","started_at":"not a time","model":{"provider":"q","name":"n"}"#,
            r#""session_id":"s-c""#,
        ];
        for (i, fields) in headers.iter().enumerate() {
            let run = format!("4{i:02}00000-0000-4000-8000-000000000000");
            std::fs::write(
                day.join(format!("{run}.jsonl")),
                format!(
                    "{{\"type\":\"header\",\"schema_version\":1,\"run_id\":\"{run}\",{fields}}}\n\
                     {{\"type\":\"run.end\",\"run_id\":\"{run}\",\"ts\":\"2026-11-04T10:00:00.000Z\",\"outcome\":\"{}\"}}\n",
                    ["completed", "error", "cancelled", "completed"][i]
                ),
            )
            .unwrap();
        }
        let store = crate::StateStore::open(root).unwrap();
        let mut report = None;
        let seen = crate::pass_cost::tests::statements_of(&store, || {
            report = Some(store.index_runs().unwrap());
        });
        let report = report.unwrap();
        assert_eq!(report.files_read, 48, "{report:?}");
        assert!(
            seen.iter().any(|sql| sql.contains("DROP TRIGGER")),
            "a bulk write: {seen:#?}"
        );
        // No statement read the rows back to sum them.
        assert!(
            !seen
                .iter()
                .any(|sql| sql.contains("FROM runs WHERE diagnostic IS NULL")),
            "{seen:#?}"
        );
        let folded = totals_dump(root);
        let keys = crate::column::query_texts(
            &store.lock(),
            "SELECT key FROM run_totals UNION ALL SELECT day FROM run_day_totals",
            [],
            0,
        )
        .unwrap();
        for key in [
            "(unknown model)",
            "m",
            "(no session)",
            "(unknown date)",
            "2026-11-04T18:15",
            "2026-11-04T10:30",
            "2026-11-04",
        ] {
            assert!(keys.iter().any(|k| k == key), "{key} in {keys:?}");
        }
        // The totals a sum of the stored rows gives.
        {
            let conn = store.lock();
            conn.execute_batch("BEGIN IMMEDIATE").unwrap();
            crate::running_totals::migrate(&conn).unwrap();
            conn.execute_batch("COMMIT").unwrap();
        }
        assert_eq!(totals_dump(root), folded);
    }

    #[test]
    fn a_first_build_interrupted_half_way_leaves_an_index_the_next_refresh_completes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        damaged_store(root);
        // The index as a first build in one go leaves it, on a copy of the store.
        let whole = tempfile::tempdir().unwrap();
        copy_tree(root, whole.path());
        crate::StateStore::open(whole.path())
            .unwrap()
            .index_runs()
            .unwrap();
        let empty = {
            crate::StateStore::open(root).unwrap();
            (index_dump(root), totals_dump(root))
        };
        // Stopped at the 20th of 44 files, rows written: nothing of the pass is kept, the
        // indexes and triggers it dropped included.
        let stopped = std::panic::catch_unwind(AssertUnwindSafe(|| {
            with_threads(3, || {
                crate::StateStore::open(root)
                    .unwrap()
                    .index_runs_with_progress(&mut |done, _| {
                        assert!(done < 20, "stopped at file {done}");
                    })
            })
        }));
        assert!(stopped.is_err());
        assert_eq!((index_dump(root), totals_dump(root)), empty);
        // The next refresh builds all of it.
        let report = crate::StateStore::open(root).unwrap().index_runs().unwrap();
        assert_eq!(report.files_read, 44, "{report:?}");
        assert_eq!(index_dump(root), index_dump(whole.path()));
        assert_eq!(totals_dump(root), totals_dump(whole.path()));
        assert!(!totals_dump(root).is_empty());
        let again = crate::StateStore::open(root).unwrap().reindex().unwrap();
        assert_eq!((again.unchanged, again.changes.len()), (44, 0), "{again:?}");
    }

    #[test]
    fn one_thread_runs_the_jobs_on_the_taker() {
        let taker = std::thread::current().id();
        let mut pool = InOrder::start(
            (0..10usize).collect(),
            1,
            || (),
            move |&j, ()| {
                assert_eq!(std::thread::current().id(), taker);
                j
            },
        );
        assert_eq!(pool.workers(), 0);
        for i in 0..10 {
            assert_eq!(pool.take(i), Some(i));
        }
    }
}
