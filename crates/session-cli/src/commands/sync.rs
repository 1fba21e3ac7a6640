//! `sessions sync --to <store> [--follow] [--verify]`: ships the local store (ours or the
//! reference's files) to a shared PostgreSQL store, exactly once.
//!
//! * **Runs.** Only complete lines are sent (a torn tail waits for its `\n`). Each chunk is one
//!   `append_lines`, i.e. one transaction with a compare-and-swap on the run's committed length:
//!   a second `sync` racing on the same store gets a length conflict instead of writing a byte
//!   twice, and a retry after a lost acknowledgement is recognised. Before shipping, the stored
//!   run's first-line and last-line SHA-256 (at the stored length) are compared with the local
//!   file's: a different file under the same id is reported and left alone. `.jsonl.zst`
//!   archives are shipped by their decompressed content. Runs the shared store does not hold
//!   yet whose complete lines fit in a chunk are created together, up to a chunk's bytes per
//!   transaction ([`PgBackend::create_runs`]): one transaction per few megabytes instead of
//!   one per run; a run another copier created meanwhile is shipped on its own as above.
//! * **Watermarks.** `<root>/sync-state.json` (beside `state.db`) records, per shared store
//!   (by its `store_id`), each run file's size and modification time when it was last fully
//!   shipped: an unchanged run costs no round trip. The runs without a watermark (new,
//!   changed, or all of them when the file is lost) are looked up together, a statement per
//!   [`session_pg::FINGERPRINT_BATCH`] runs ([`PgBackend::run_fingerprints`]), not one round
//!   trip each. The file only ever records what the shared store already holds, so losing
//!   it, or killing `sync` before it is written, costs a look at every run, never correctness.
//! * **Sessions** are shipped by generation: a session whose listing columns (`updated_at`,
//!   message count) are those of the last pass is skipped; otherwise it is loaded and, when its
//!   version (the local generation) changed, saved with compare-and-swap against the version
//!   the shared store had after the last pass. A session changed in the shared store since
//!   (by a fleet worker) is reported and not overwritten.
//! * **`--verify`** compares every stored line's SHA-256 with the local line's and reports the
//!   first divergence of each run (line and byte offset).
//! * **`--follow`** repeats the pass every `--interval` seconds until interrupted.
//!
//! Exit codes: 0 when everything is shipped (or verified), 1 when a run or session could not
//! be shipped as is (a different file under the same id, a session changed elsewhere, a
//! divergence found by `--verify`), 4 when the store cannot be reached or a file read.

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use session_pg::{PgBackend, PgConfig, PgOptions, RunFingerprint};
use session_storage::local::LocalBackend;
use session_storage::{
    Expected, RunCatalogue, SessionListQuery, SessionStore, StorageError, Version,
};
use sha2::{Digest, Sha256};

use crate::Ctx;
use crate::cli::SyncArgs;
use crate::error::{CliError, EXIT_OK, EXIT_PROBLEMS, one_line};

/// The watermark file, beside `state.db`.
const STATE_FILE: &str = "sync-state.json";

#[derive(Debug, Default, Serialize, Deserialize)]
struct SyncState {
    /// Per shared store (its `store_id`).
    stores: BTreeMap<String, StoreMarks>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct StoreMarks {
    /// Run file (relative path) → what was fully shipped.
    runs: BTreeMap<String, RunMark>,
    /// Session id → what was shipped.
    sessions: BTreeMap<String, SessionMark>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct RunMark {
    size: u64,
    mtime_ns: i128,
    len: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct SessionMark {
    updated_at: String,
    message_count: Option<u64>,
    generation: String,
    remote: String,
}

fn load_state(path: &Path) -> SyncState {
    // A missing or unreadable file only costs round trips.
    fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// Writes the watermarks atomically (temporary file, fsync, rename).
fn save_state(path: &Path, state: &SyncState) -> Result<(), CliError> {
    let tmp = path.with_extension(format!("json.{}.tmp", std::process::id()));
    let bytes = serde_json::to_vec(state).map_err(|e| CliError::Data(e.to_string()))?;
    let write = || -> std::io::Result<()> {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = fs::remove_file(&tmp);
        CliError::io(path, e)
    })
}

/// What one pass did.
#[derive(Debug, Default)]
struct Pass {
    runs_shipped: u64,
    runs_unchanged: u64,
    bytes: u64,
    transactions: u64,
    sessions_saved: u64,
    sessions_unchanged: u64,
    verified: u64,
    problems: Vec<String>,
}

fn sha(bytes: &[u8]) -> Vec<u8> {
    Sha256::digest(bytes).to_vec()
}

fn mtime_ns(md: &fs::Metadata) -> i128 {
    md.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX))
}

/// The run file's (decompressed) bytes.
fn read_run(path: &Path) -> Result<Vec<u8>, CliError> {
    let mut src = session_jsonl::open_run_file(path).map_err(|e| CliError::data(&e))?;
    let mut out = Vec::new();
    src.read_to_end(&mut out)
        .map_err(|e| CliError::io(path, e))?;
    Ok(out)
}

/// The line of `bytes` that ends just before `end` (with its `\n`).
fn line_ending_at(bytes: &[u8], end: usize) -> &[u8] {
    let start = memchr::memrchr(b'\n', &bytes[..end.saturating_sub(1)]).map_or(0, |i| i + 1);
    &bytes[start..end]
}

/// What this side knows of a run file: its complete lines from `base` on (`tail`), its first
/// line, and the line ending at `base`. Read whole for a run the shared store does not have
/// yet, for archives and for `--verify`; otherwise only the first line, the line before
/// `base` and what follows it are read, so following a long run costs what it grew by.
struct Local {
    base: u64,
    first_line: Vec<u8>,
    line_before_base: Vec<u8>,
    tail: Vec<u8>,
}

impl Local {
    /// The whole file's complete lines.
    fn whole(bytes: Vec<u8>) -> Local {
        let mut tail = bytes;
        let committed = memchr::memrchr(b'\n', &tail).map_or(0, |i| i + 1);
        tail.truncate(committed);
        let first_end = memchr::memchr(b'\n', &tail).map_or(tail.len(), |i| i + 1);
        Local {
            base: 0,
            first_line: tail[..first_end].to_vec(),
            line_before_base: Vec::new(),
            tail,
        }
    }

    /// The complete lines of the plain file `path` from `base` (a line end of the stored run)
    /// on; `None` when the file does not look like that (shorter, no line end at `base`): the
    /// caller then reads it whole and says what differs.
    fn from(path: &Path, base: u64) -> std::io::Result<Option<Local>> {
        use std::io::{Seek, SeekFrom};
        const BLOCK: usize = 64 << 10;
        let mut f = fs::File::open(path)?;
        let size = f.metadata()?.len();
        if base == 0 || base > size {
            return Ok(None);
        }
        // The first line.
        let mut first_line = Vec::new();
        let mut buf = vec![0u8; BLOCK];
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                return Ok(None);
            }
            match memchr::memchr(b'\n', &buf[..n]) {
                Some(i) => {
                    first_line.extend_from_slice(&buf[..=i]);
                    break;
                }
                None => first_line.extend_from_slice(&buf[..n]),
            }
        }
        // The line ending at `base`, read backwards.
        let mut line = Vec::new();
        let mut hi = base;
        let mut found_start = false;
        while !found_start && hi > 0 {
            let lo = hi.saturating_sub(BLOCK as u64);
            let mut block = vec![0u8; usize::try_from(hi - lo).unwrap_or(BLOCK)];
            f.seek(SeekFrom::Start(lo))?;
            f.read_exact(&mut block)?;
            if hi == base && block.last() != Some(&b'\n') {
                return Ok(None);
            }
            // The search skips the line's own final newline.
            let search_end = if hi == base {
                block.len() - 1
            } else {
                block.len()
            };
            let start = match memchr::memrchr(b'\n', &block[..search_end]) {
                Some(i) => {
                    found_start = true;
                    i + 1
                }
                None => 0,
            };
            let mut piece = block[start..].to_vec();
            piece.extend_from_slice(&line);
            line = piece;
            hi = lo;
        }
        // Everything after `base`, complete lines only.
        f.seek(SeekFrom::Start(base))?;
        let mut tail = Vec::new();
        f.read_to_end(&mut tail)?;
        let committed = memchr::memrchr(b'\n', &tail).map_or(0, |i| i + 1);
        tail.truncate(committed);
        Ok(Some(Local {
            base,
            first_line,
            line_before_base: line,
            tail,
        }))
    }

    fn committed(&self) -> u64 {
        self.base + self.tail.len() as u64
    }

    /// The line ending at byte offset `end` (a line end), when this side knows it.
    fn line_ending_at(&self, end: u64) -> Option<&[u8]> {
        if end == self.base {
            return (self.base > 0).then_some(&self.line_before_base[..]);
        }
        let rel = usize::try_from(end.checked_sub(self.base)?).ok()?;
        (rel <= self.tail.len() && rel > 0).then(|| line_ending_at(&self.tail, rel))
    }

    /// Whether byte `end - 1` is a `\n` (`end` a line end), when this side knows it.
    fn ends_line_at(&self, end: u64) -> bool {
        if end == self.base {
            return true;
        }
        end.checked_sub(self.base + 1)
            .and_then(|i| usize::try_from(i).ok())
            .and_then(|i| self.tail.get(i))
            == Some(&b'\n')
    }
}

/// Whether the stored run (`len` bytes, first and last line hashes) is a prefix of the local
/// file.
fn same_file(local: &Local, fp: &RunFingerprint) -> Result<(), String> {
    if fp.len == 0 {
        return Ok(());
    }
    if fp.len > local.committed() {
        return Err(format!(
            "the shared store holds {} bytes of it, more than the {} complete bytes here: a different file under the same id",
            fp.len,
            local.committed()
        ));
    }
    if fp.len < local.base || !local.ends_line_at(fp.len) {
        return Err(format!(
            "the shared store's {} bytes end inside a line here: a different file under the same id",
            fp.len
        ));
    }
    if fp.first_line_sha256.as_deref() != Some(&sha(&local.first_line)[..]) {
        return Err(
            "its first line differs from the shared store's: a different file under the same id"
                .to_owned(),
        );
    }
    let last = local.line_ending_at(fp.len).map(sha);
    if fp.last_line_sha256.as_deref() != last.as_deref() {
        return Err(format!(
            "the line ending at byte offset {} differs from the shared store's: a different file under the same id",
            fp.len
        ));
    }
    Ok(())
}

/// What shipping one run did.
#[derive(Debug, Default)]
struct RunDone {
    shipped: bool,
    bytes: u64,
    transactions: u64,
    verified: bool,
}

/// Ships one run file; returns its new watermark, or a problem (left alone). `known`: the
/// shared store's fingerprint of the run when it was asked already (`Some(None)`: no such run
/// then), else it is asked now. A fingerprint that is out of date by now is harmless: the
/// append's compare-and-swap refuses a wrong length and the run is looked at again.
fn sync_run(
    pg: &PgBackend,
    run_id: &str,
    path: &Path,
    args: &SyncArgs,
    known: Option<Option<RunFingerprint>>,
    pass: &mut RunDone,
) -> Result<Result<u64, String>, CliError> {
    if let Err(e) = session_schema::check_id(run_id) {
        return Ok(Err(format!("its id cannot name a stored run: {e}")));
    }
    let backend = |e: StorageError| CliError::Data(format!("run {run_id}: {}", one_line(&e)));
    let remote = match known {
        Some(remote) => remote,
        None => pg.run_fingerprint(run_id).map_err(backend)?,
    };
    let partial = match &remote {
        Some(fp) if !args.verify && !session_jsonl::is_archived(path) => {
            Local::from(path, fp.len).unwrap_or(None)
        }
        _ => None,
    };
    let local = match partial {
        Some(l) => l,
        None => match read_run(path) {
            Ok(b) => Local::whole(b),
            // One unreadable file (a damaged archive) does not stop the others.
            Err(e) => return Ok(Err(format!("cannot be read: {e}"))),
        },
    };
    let committed = local.committed();
    let mut pos = match &remote {
        None => 0,
        Some(fp) => {
            if let Err(why) = same_file(&local, fp) {
                return Ok(Err(why));
            }
            fp.len
        }
    };
    let mut shipped = false;
    while pos < committed {
        let from = usize::try_from(pos - local.base).unwrap_or(usize::MAX);
        let tail = &local.tail;
        let budget = usize::try_from(args.chunk_bytes).unwrap_or(usize::MAX);
        let limit = from.saturating_add(budget).min(tail.len());
        // Complete lines up to the budget, and at least one line.
        let end = match memchr::memrchr(b'\n', &tail[from..limit]) {
            Some(i) => from + i + 1,
            None => memchr::memchr(b'\n', &tail[from..]).map_or(tail.len(), |i| from + i + 1),
        };
        match pg.append_lines(run_id, pos, &tail[from..end]) {
            Ok(done) => {
                let written = done.end - done.offset - done.already_present;
                if written > 0 {
                    pass.bytes += written;
                    pass.transactions += 1;
                    shipped = true;
                }
                pos = done.end;
            }
            Err(StorageError::LengthConflict { .. }) => {
                // Another sync got there first: check what it stored and go on from there.
                let Some(fp) = pg.run_fingerprint(run_id).map_err(backend)? else {
                    return Ok(Err(
                        "the run vanished from the shared store during the sync".to_owned(),
                    ));
                };
                if let Err(why) = same_file(&local, &fp) {
                    return Ok(Err(why));
                }
                pos = fp.len;
            }
            Err(e) => return Err(backend(e)),
        }
    }
    pass.shipped = shipped;
    if args.verify {
        let remote = pg.line_hashes(run_id, 1).map_err(backend)?;
        let mut offset = 0usize;
        let mut line = 0usize;
        // --verify reads the whole file (`local.base` is 0).
        for l in local.tail.split_inclusive(|b| *b == b'\n') {
            match remote.get(line) {
                Some((o, h)) if *o == offset as u64 && *h == sha(l) => {}
                _ => {
                    return Ok(Err(format!(
                        "line {} (byte offset {offset}) differs from the shared store's",
                        line + 1
                    )));
                }
            }
            offset += l.len();
            line += 1;
        }
        if remote.len() > line {
            return Ok(Err(format!(
                "the shared store has {} lines, {line} here",
                remote.len()
            )));
        }
        pass.verified = true;
    }
    Ok(Ok(committed))
}

/// Runs shipped at once (each on its own pooled connection): the server works on one run's
/// transaction while this process reads and parses the next.
const PARALLEL_RUNS: usize = 4;

/// A run file to ship this pass: the file, its path under the root, size and mtime.
type Work = (session_jsonl::RunFile, String, u64, i128);

/// What shipping one run file did: its place in the work list, and how it went.
type Done = (usize, RunDone, Result<Result<u64, String>, CliError>);

/// A run the shared store does not hold yet, read whole, waiting to be created together
/// with other new runs in one transaction ([`PgBackend::create_runs`]).
struct NewRun {
    /// Its place in the work list.
    index: usize,
    run_id: String,
    /// Its complete lines.
    lines: Vec<u8>,
}

/// The complete lines of run file `path` when the run can go out with other new runs: the
/// shared store did not hold it when asked (`known` is `Some(None)`), and it has at least one
/// complete line and at most `budget` bytes of them. `None`: it goes out on its own
/// ([`sync_run`], which also reports an unsafe id or an unreadable file).
fn new_run_lines(
    known: Option<&Option<RunFingerprint>>,
    path: &Path,
    size: u64,
    budget: u64,
) -> Option<Vec<u8>> {
    if size > budget || !matches!(known, Some(None)) {
        return None;
    }
    let bytes = read_run(path).ok()?;
    let lines = Local::whole(bytes).tail;
    (!lines.is_empty() && lines.len() as u64 <= budget).then_some(lines)
}

/// The shared store's fingerprints of the runs of `work`, in its order, asked a batch of ids
/// per statement ([`PgBackend::run_fingerprints`]) instead of a round trip per run: `None`
/// for a run whose id cannot name a stored run (not asked; [`sync_run`] reports it).
fn fingerprints(
    pg: &PgBackend,
    work: &[Work],
) -> Result<Vec<Option<Option<RunFingerprint>>>, CliError> {
    let safe: Vec<&str> = work
        .iter()
        .map(|(f, ..)| f.run_id.as_str())
        .filter(|id| session_schema::check_id(id).is_ok())
        .collect();
    let mut found = pg
        .run_fingerprints(&safe)
        .map_err(|e| CliError::Data(format!("the shared store's runs: {}", one_line(&e))))?
        .into_iter();
    Ok(work
        .iter()
        .map(|(f, ..)| {
            session_schema::check_id(&f.run_id)
                .is_ok()
                .then(|| found.next().flatten())
        })
        .collect())
}

/// Creates the runs of `batch` in one transaction (emptying it); a run that exists by then
/// (another copier created it meanwhile) is shipped on its own. Returns whether to stop (an
/// error, recorded in `out`).
fn ship_new_runs(
    pg: &PgBackend,
    batch: &mut Vec<NewRun>,
    work: &[Work],
    args: &SyncArgs,
    out: &mut Vec<Done>,
) -> bool {
    let Some(first) = batch.first() else {
        return false;
    };
    let runs: Vec<(&str, &[u8])> = batch
        .iter()
        .map(|r| (r.run_id.as_str(), r.lines.as_slice()))
        .collect();
    let created = match pg.create_runs(&runs) {
        Ok(c) => c,
        Err(e) => {
            let why = format!(
                "{} new runs from run {}: {}",
                batch.len(),
                first.run_id,
                one_line(&e)
            );
            out.push((first.index, RunDone::default(), Err(CliError::Data(why))));
            batch.clear();
            return true;
        }
    };
    // The batch is one transaction, counted with the first run it created.
    let mut transactions = 1;
    for (r, made) in batch.drain(..).zip(created) {
        if let Some(done) = made {
            let len = done.end;
            let ran = RunDone {
                shipped: true,
                bytes: len,
                transactions,
                verified: false,
            };
            transactions = 0;
            out.push((r.index, ran, Ok(Ok(len))));
            continue;
        }
        let Some((f, ..)) = work.get(r.index) else {
            continue;
        };
        let mut done = RunDone::default();
        // It exists by now: look at it again.
        let ran = sync_run(pg, &f.run_id, &f.path, args, None, &mut done);
        let stop = ran.is_err();
        out.push((r.index, done, ran));
        if stop {
            return true;
        }
    }
    false
}

fn sync_runs(
    ctx: &mut Ctx<'_>,
    pg: &PgBackend,
    args: &SyncArgs,
    marks: &mut StoreMarks,
    pass: &mut Pass,
) -> Result<(), CliError> {
    let root = ctx.root.path.clone();
    let listing = session_jsonl::list_run_files(&root).map_err(|e| CliError::data(&e))?;
    // Watermarks of files that are gone (removed, or archived under a new name) go too.
    let listed: std::collections::BTreeSet<String> = listing
        .files
        .iter()
        .map(|f| {
            f.path
                .strip_prefix(&root)
                .unwrap_or(&f.path)
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    marks.runs.retain(|rel, _| listed.contains(rel));
    // Unchanged runs are skipped on their watermark, without a round trip.
    let mut work: Vec<Work> = Vec::new();
    for f in listing.files {
        let rel = f
            .path
            .strip_prefix(&root)
            .unwrap_or(&f.path)
            .to_string_lossy()
            .into_owned();
        let md = match fs::metadata(&f.path) {
            Ok(m) => m,
            // Archived or removed since it was listed: the next pass sees it.
            Err(_) => continue,
        };
        let (size, mtime) = (md.len(), mtime_ns(&md));
        if !args.verify
            && marks
                .runs
                .get(&rel)
                .is_some_and(|m| m.size == size && m.mtime_ns == mtime)
        {
            pass.runs_unchanged += 1;
            continue;
        }
        work.push((f, rel, size, mtime));
    }
    // What the shared store holds of these runs: a statement per batch of runs, not a round
    // trip each (a first sync, or one after the watermarks were lost).
    let remote = fingerprints(pg, &work)?;
    let next = std::sync::atomic::AtomicUsize::new(0);
    let budget = args.chunk_bytes;
    let results: Vec<Done> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..PARALLEL_RUNS.min(work.len()))
            .map(|_| {
                s.spawn(|| {
                    let mut out = Vec::new();
                    // New runs read so far, to be created together (at most `budget` bytes
                    // of lines in one transaction, as a run's chunk).
                    let mut batch: Vec<NewRun> = Vec::new();
                    let mut batch_bytes = 0u64;
                    let mut stop = false;
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        let Some((f, _, size, _)) = work.get(i) else {
                            break;
                        };
                        let known = remote.get(i).cloned().flatten();
                        if !args.verify
                            && let Some(lines) =
                                new_run_lines(known.as_ref(), &f.path, *size, budget)
                        {
                            let n = lines.len() as u64;
                            if batch_bytes + n > budget {
                                stop = ship_new_runs(pg, &mut batch, &work, args, &mut out);
                                batch_bytes = 0;
                                if stop {
                                    break;
                                }
                            }
                            batch.push(NewRun {
                                index: i,
                                run_id: f.run_id.clone(),
                                lines,
                            });
                            batch_bytes += n;
                            continue;
                        }
                        let mut done = RunDone::default();
                        let r = sync_run(pg, &f.run_id, &f.path, args, known, &mut done);
                        stop = r.is_err();
                        out.push((i, done, r));
                        if stop {
                            break;
                        }
                    }
                    if !stop {
                        stop = ship_new_runs(pg, &mut batch, &work, args, &mut out);
                    }
                    if stop {
                        // Stop the other workers too; they finish what they hold.
                        next.store(usize::MAX / 2, std::sync::atomic::Ordering::SeqCst);
                    }
                    out
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_default())
            .collect()
    });
    let mut first_error = None;
    let mut results = results;
    results.sort_by_key(|(i, ..)| *i);
    for (i, done, r) in results {
        let Some((f, rel, size, mtime)) = work.get(i) else {
            continue;
        };
        pass.bytes += done.bytes;
        pass.transactions += done.transactions;
        pass.runs_shipped += u64::from(done.shipped);
        pass.verified += u64::from(done.verified);
        match r {
            Ok(Ok(len)) => {
                marks.runs.insert(
                    rel.clone(),
                    RunMark {
                        size: *size,
                        mtime_ns: *mtime,
                        len,
                    },
                );
            }
            Ok(Err(why)) => {
                marks.runs.remove(rel);
                pass.problems
                    .push(format!("run {} ({rel}): {why}", f.run_id));
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn sync_sessions(
    ctx: &mut Ctx<'_>,
    pg: &PgBackend,
    marks: &mut StoreMarks,
    pass: &mut Pass,
) -> Result<(), CliError> {
    let root = ctx.root.path.clone();
    if !root.join("state.db").is_file() {
        return Ok(());
    }
    let local = LocalBackend::open_read_only(&root).map_err(|e| CliError::data(&e))?;
    let listed = local
        .list_sessions(&SessionListQuery::default())
        .map_err(|e| CliError::data(&e))?;
    let present: std::collections::BTreeSet<&str> = listed
        .sessions
        .iter()
        .map(|s| s.session_id.as_str())
        .collect();
    marks.sessions.retain(|id, _| present.contains(id.as_str()));
    for s in listed.sessions {
        let id = s.session_id.clone();
        let updated = s.updated_at.as_str().to_owned();
        if marks
            .sessions
            .get(&id)
            .is_some_and(|m| m.updated_at == updated && m.message_count == s.message_count)
        {
            pass.sessions_unchanged += 1;
            continue;
        }
        let Some(loaded) = local.load_session(&id).map_err(|e| CliError::data(&e))? else {
            continue;
        };
        let generation = loaded.version.as_str().to_owned();
        let mark = marks.sessions.get(&id).cloned();
        if mark.as_ref().is_some_and(|m| m.generation == generation) {
            pass.sessions_unchanged += 1;
            if let Some(m) = marks.sessions.get_mut(&id) {
                m.updated_at = updated;
                m.message_count = s.message_count;
            }
            continue;
        }
        let expected = match &mark {
            Some(m) => Expected::Version(Version::new(m.remote.clone())),
            None => Expected::Absent,
        };
        let remote = match pg.save_session(&loaded.state, &expected) {
            Ok(v) => {
                pass.sessions_saved += 1;
                v
            }
            Err(StorageError::VersionConflict { found, .. }) => {
                // Our own save whose mark was never written, or someone else's.
                let current = pg.load_session(&id).map_err(|e| CliError::data(&e))?;
                match (current, found) {
                    (Some(c), Some(f)) if c.state == loaded.state => f,
                    _ => {
                        pass.problems.push(format!(
                            "session {id}: changed in the shared store since the last sync; not overwritten"
                        ));
                        continue;
                    }
                }
            }
            Err(e) => return Err(CliError::Data(format!("session {id}: {}", one_line(&e)))),
        };
        marks.sessions.insert(
            id,
            SessionMark {
                updated_at: updated,
                message_count: s.message_count,
                generation,
                remote: remote.as_str().to_owned(),
            },
        );
    }
    Ok(())
}

/// `sessions sync`.
pub(crate) fn run(ctx: &mut Ctx<'_>, args: &SyncArgs) -> Result<i32, CliError> {
    let config = PgConfig::parse(&args.to).map_err(|e| CliError::Usage(one_line(&e)))?;
    let root = ctx.root.path.clone();
    if !root.is_dir() {
        return Err(CliError::NotFound(format!(
            "no store at {}",
            root.display()
        )));
    }
    let pg = PgBackend::open_with(config, PgOptions::default())
        .map_err(|e| CliError::Data(one_line(&e)))?;
    let state_path: PathBuf = root.join(STATE_FILE);
    let mut passes = 0u64;
    let mut problems = false;
    loop {
        passes += 1;
        let mut state = load_state(&state_path);
        let mut marks = state.stores.remove(pg.store_id()).unwrap_or_default();
        let mut pass = Pass::default();
        let ran = sync_runs(ctx, &pg, args, &mut marks, &mut pass)
            .and_then(|()| sync_sessions(ctx, &pg, &mut marks, &mut pass));
        // What was shipped before a failure is recorded all the same.
        state.stores.insert(pg.store_id().to_owned(), marks);
        save_state(&state_path, &state)?;
        ran?;
        for p in &pass.problems {
            ctx.warn(p);
        }
        problems |= !pass.problems.is_empty();
        let mut line = format!(
            "{} runs shipped ({} bytes in {} transactions), {} unchanged; {} sessions saved, {} unchanged",
            pass.runs_shipped,
            pass.bytes,
            pass.transactions,
            pass.runs_unchanged,
            pass.sessions_saved,
            pass.sessions_unchanged
        );
        if args.verify {
            line.push_str(&format!("; {} runs verified", pass.verified));
        }
        if !pass.problems.is_empty() {
            line.push_str(&format!("; {} problems", pass.problems.len()));
        }
        writeln!(ctx.out, "{line} -> {}", pg.config())?;
        ctx.out.flush()?;
        if !args.follow || args.passes.is_some_and(|n| passes >= n) {
            break;
        }
        std::thread::sleep(Duration::from_secs(args.interval));
    }
    Ok(if problems { EXIT_PROBLEMS } else { EXIT_OK })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_different_file_under_the_same_id_is_caught() {
        let bytes = b"{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n{\"d\"";
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        fs::write(&path, bytes).unwrap();
        let fp = |len: u64, first: &[u8], last: &[u8]| session_pg::RunFingerprint {
            len,
            lines: 0,
            first_line_sha256: Some(sha(first)),
            last_line_sha256: Some(sha(last)),
        };
        let whole = Local::whole(bytes.to_vec());
        assert_eq!(whole.committed(), 24, "the torn tail is not part of it");
        // Read whole, or only around the stored length: the same answers.
        let from8 = Local::from(&path, 8).unwrap().unwrap();
        let from16 = Local::from(&path, 16).unwrap().unwrap();
        assert_eq!((from8.committed(), from16.committed()), (24, 24));
        assert_eq!(from16.tail, b"{\"c\":3}\n");
        assert_eq!(from16.line_before_base, b"{\"b\":2}\n");
        for local in [&whole, &from8, &from16] {
            assert!(same_file(local, &fp(16, b"{\"a\":1}\n", b"{\"b\":2}\n")).is_ok());
            assert!(same_file(local, &fp(24, b"{\"a\":1}\n", b"{\"c\":3}\n")).is_ok());
            for (bad, what) in [
                (fp(16, b"{\"x\":1}\n", b"{\"b\":2}\n"), "first line"),
                (fp(16, b"{\"a\":1}\n", b"{\"x\":2}\n"), "line ending"),
                (fp(20, b"{\"a\":1}\n", b"{\"b\":2}\n"), "inside a line"),
                (fp(99, b"{\"a\":1}\n", b"{\"b\":2}\n"), "more than"),
            ] {
                let e = same_file(local, &bad).unwrap_err();
                assert!(e.contains(what), "{e}");
            }
        }
        assert!(same_file(&whole, &fp(8, b"{\"a\":1}\n", b"{\"a\":1}\n")).is_ok());
        // Not a line end, or past the end: read whole instead.
        assert!(Local::from(&path, 12).unwrap().is_none());
        assert!(Local::from(&path, 99).unwrap().is_none());
    }
}
