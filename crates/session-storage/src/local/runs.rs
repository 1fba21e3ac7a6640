//! [`RunCatalogue`] over run files: appends under the run file's writer lock with
//! compare-and-swap on the committed length, exact reads (plain and `.jsonl.zst`), stats and
//! listings from session-state's run index.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use session_jsonl::layout::parse_run_file_name;
use session_jsonl::scan::scan_facts;
use session_jsonl::{
    JsonlError, find_run, is_archived, open_run_file, read_header, run_path, terminal_state_exact,
};
use session_schema::Timestamp;
use session_state::{IndexedRunOutcome, RunCursor, RunQuery, RunRow};

use super::{LocalBackend, state_err};
use crate::catalogue::{RunCatalogue, already_present, check_complete_lines};
use crate::error::{Result, StorageError, Target, checked_id};
use crate::types::{
    Appended, Extent, Outcome, PageCursor, RunBytes, RunListPage, RunListQuery, RunStat,
    RunSummary, TokenTotals,
};

/// Bytes read per step when scanning a run file.
const BLOCK: usize = 64 << 10;

fn io_err(op: &'static str, run_id: &str, offset: Option<u64>, e: io::Error) -> StorageError {
    StorageError::backend(
        op,
        Target::Run {
            run_id: run_id.to_owned(),
            offset,
        },
        e,
    )
}

fn jsonl_err(op: &'static str, run_id: &str, e: JsonlError) -> StorageError {
    match e {
        JsonlError::UnsafeRunId { run_id, source } => StorageError::UnsafeId { id: run_id, source },
        JsonlError::NotFound { .. } => StorageError::RunNotFound {
            run_id: run_id.to_owned(),
        },
        JsonlError::Compressed { .. } => StorageError::RunArchived {
            run_id: run_id.to_owned(),
        },
        other => StorageError::backend(op, Target::run(run_id), other),
    }
}

/// `[at, at + buf.len())` of `file`.
fn read_at(file: &mut File, at: u64, buf: &mut [u8]) -> io::Result<()> {
    file.seek(SeekFrom::Start(at))?;
    file.read_exact(buf)
}

/// The offset just after the last `\n` in the first `len` bytes of `file` (0 when none):
/// reads backwards block by block, so only the torn tail (if any) and one block are read.
fn committed_end(file: &mut File, len: u64) -> io::Result<u64> {
    let mut hi = len;
    let mut buf = vec![0u8; BLOCK];
    while hi > 0 {
        let lo = hi.saturating_sub(BLOCK as u64);
        let n = usize::try_from(hi - lo).unwrap_or(BLOCK).min(BLOCK);
        read_at(file, lo, &mut buf[..n])?;
        if let Some(i) = memchr::memrchr(b'\n', &buf[..n]) {
            return Ok(lo + i as u64 + 1);
        }
        hi = lo;
    }
    Ok(0)
}

/// One pass over a run's (decompressed) bytes: total length, committed end and lines.
#[derive(Debug, Default, Clone, Copy)]
struct Count {
    total: u64,
    committed: u64,
    lines: u64,
}

fn count_lines(src: &mut dyn Read) -> io::Result<Count> {
    let mut c = Count::default();
    let mut buf = vec![0u8; BLOCK];
    loop {
        let n = match src.read(&mut buf) {
            Ok(0) => return Ok(c),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let chunk = &buf[..n];
        let nl = memchr::memchr_iter(b'\n', chunk).count() as u64;
        if let Some(i) = memchr::memrchr(b'\n', chunk) {
            c.committed = c.total + i as u64 + 1;
        }
        c.lines += nl;
        c.total += n as u64;
    }
}

/// Creates `dir` and its missing parents; with `durable`, fsyncs the parent of each new one.
fn create_dirs(dir: &Path, durable: bool) -> io::Result<()> {
    let mut missing = Vec::new();
    let mut cur = Some(dir);
    while let Some(d) = cur {
        if d.as_os_str().is_empty() || d.is_dir() {
            break;
        }
        missing.push(d.to_owned());
        cur = d.parent();
    }
    if missing.is_empty() {
        return Ok(());
    }
    fs::create_dir_all(dir)?;
    if durable {
        for d in missing.iter().rev() {
            if let Some(parent) = d.parent().filter(|p| !p.as_os_str().is_empty()) {
                File::open(parent)?.sync_all()?;
            }
        }
    }
    Ok(())
}

/// Whether `path` still names the file `file` is open on (not removed or replaced by an
/// archiving or `gc` between our open and our lock).
fn still_named(path: &Path, file: &File) -> io::Result<bool> {
    let on_disk = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let open = file.metadata()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Ok(on_disk.dev() == open.dev() && on_disk.ino() == open.ino())
    }
    #[cfg(not(unix))]
    {
        Ok(on_disk.len() == open.len())
    }
}

/// What locating a run's file found.
enum Located {
    File(PathBuf),
    Missing,
}

impl LocalBackend {
    /// The file holding run `run_id` (cached after the first look-up; a full look-up scans
    /// the date directories), or `None` when there is none.
    ///
    /// # Errors
    /// [`StorageError::UnsafeId`], [`StorageError::Backend`] when the root cannot be listed.
    pub fn run_file(&self, run_id: &str) -> Result<Option<PathBuf>> {
        checked_id(run_id)?;
        Ok(match self.locate(run_id)? {
            Located::File(p) => Some(p),
            Located::Missing => None,
        })
    }

    fn locate(&self, run_id: &str) -> Result<Located> {
        if let Some(p) = self.cached_path(run_id) {
            if p.is_file() {
                return Ok(Located::File(p));
            }
            self.forget_path(run_id);
        }
        match find_run(self.root(), run_id, None) {
            Ok(found) => {
                self.remember_path(run_id, &found.path);
                Ok(Located::File(found.path))
            }
            Err(JsonlError::NotFound { .. }) => Ok(Located::Missing),
            Err(e) => Err(jsonl_err("find", run_id, e)),
        }
    }

    /// Creates the empty file of a new run where its first line's `started_at` puts it.
    /// Returns the path and whether this call created it (false: someone else was first).
    fn create_run_file(&self, run_id: &str, lines: &[u8]) -> Result<(PathBuf, bool)> {
        let first = memchr::memchr(b'\n', lines).map_or(lines, |i| &lines[..i]);
        let started_at = scan_facts(first).started_at.unwrap_or_else(Timestamp::now);
        let path = run_path(self.root(), run_id, &started_at)
            .map_err(|e| jsonl_err("create", run_id, e))?;
        let dir = path.parent().unwrap_or(Path::new(""));
        create_dirs(dir, self.options.sync_appends)
            .map_err(|e| io_err("create the directory of", run_id, None, e))?;
        let mut open = OpenOptions::new();
        open.read(true).append(true).create_new(true);
        #[cfg(unix)]
        if let Some(mode) = self.options.run_file_mode {
            std::os::unix::fs::OpenOptionsExt::mode(&mut open, mode);
        }
        match open.open(&path) {
            Ok(_) => Ok((path, true)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok((path, false)),
            Err(e) => Err(io_err("create", run_id, Some(0), e)),
        }
    }

    /// Takes the writer lock of `file` (the lock [`session_jsonl::RunWriter`] holds), waiting
    /// until `deadline`.
    fn lock_run(&self, run_id: &str, file: &File, started: Instant) -> Result<()> {
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(()),
                Err(TryLockError::WouldBlock) => {
                    if started.elapsed() >= self.options.lock_wait {
                        return Err(StorageError::Busy {
                            target: Target::run(run_id),
                            waited_ms: u64::try_from(started.elapsed().as_millis())
                                .unwrap_or(u64::MAX),
                        });
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(TryLockError::Error(e)) => return Err(io_err("lock", run_id, None, e)),
            }
        }
    }

    fn sync(&self, run_id: &str, file: &File, at: u64) -> Result<()> {
        if self.options.sync_appends {
            file.sync_data()
                .map_err(|e| io_err("fdatasync", run_id, Some(at), e))?;
        }
        Ok(())
    }

    /// The compare-and-swap, under the writer lock of `file`.
    fn append_locked(
        &self,
        run_id: &str,
        path: &Path,
        mut file: File,
        created: bool,
        expected: u64,
        lines: &[u8],
    ) -> Result<Appended> {
        let len = file
            .metadata()
            .map_err(|e| io_err("stat", run_id, None, e))?
            .len();
        let mut committed = len;
        if len > 0 {
            let mut last = [0u8; 1];
            read_at(&mut file, len - 1, &mut last)
                .map_err(|e| io_err("read", run_id, Some(len - 1), e))?;
            if last[0] != b'\n' {
                // A torn tail of a writer that died: sealed, never glued to (as
                // `RunWriter::open_append` does). It is now a complete damaged line.
                file.write_all(b"\n")
                    .map_err(|e| io_err("seal the torn tail of", run_id, Some(len), e))?;
                self.sync(run_id, &file, len)?;
                committed = len + 1;
            }
        }
        let n = lines.len() as u64;
        let end = expected + n;
        if committed < expected {
            return Err(StorageError::LengthConflict {
                run_id: run_id.to_owned(),
                expected,
                committed,
            });
        }
        let present = if committed == expected {
            0
        } else {
            let at_line_start = expected == 0 || {
                let mut b = [0u8; 1];
                read_at(&mut file, expected - 1, &mut b)
                    .map_err(|e| io_err("read", run_id, Some(expected - 1), e))?;
                b[0] == b'\n'
            };
            let take = usize::try_from((committed - expected).min(n)).unwrap_or(lines.len());
            let mut stored = vec![0u8; take];
            read_at(&mut file, expected, &mut stored)
                .map_err(|e| io_err("read", run_id, Some(expected), e))?;
            match already_present(&stored, lines, at_line_start) {
                Some(k) => k,
                None => {
                    return Err(StorageError::LengthConflict {
                        run_id: run_id.to_owned(),
                        expected,
                        committed,
                    });
                }
            }
        };
        let rest = &lines[present..];
        if !rest.is_empty() {
            let at = expected + present as u64;
            file.write_all(rest)
                .map_err(|e| io_err("append to", run_id, Some(at), e))?;
            self.sync(run_id, &file, at)?;
        }
        if created && self.options.sync_appends {
            // The new file's directory entry must be as durable as its lines.
            let dir = path.parent().unwrap_or(Path::new("."));
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| io_err("fsync the directory of", run_id, None, e))?;
        }
        Ok(Appended {
            offset: expected,
            end,
            committed_len: committed.max(end),
            already_present: present as u64,
        })
    }

    /// An archive's bytes from `from` to the end of `extent` (two passes: one to find the
    /// committed end, one to stream).
    fn read_archive(
        &self,
        run_id: &str,
        path: &Path,
        from: u64,
        extent: Extent,
    ) -> Result<RunBytes> {
        let mut src = open_run_file(path).map_err(|e| jsonl_err("read", run_id, e))?;
        let count = count_lines(&mut src).map_err(|e| io_err("read", run_id, None, e))?;
        let end = match extent {
            Extent::Committed => count.committed,
            Extent::WithTornTail => count.total,
        };
        if from > end {
            return Err(StorageError::OffsetOutOfRange {
                run_id: run_id.to_owned(),
                offset: from,
                len: end,
            });
        }
        let mut src = open_run_file(path).map_err(|e| jsonl_err("read", run_id, e))?;
        let skipped = io::copy(&mut (&mut src).take(from), &mut io::sink())
            .map_err(|e| io_err("read", run_id, Some(0), e))?;
        if skipped < from {
            return Err(io_err(
                "read",
                run_id,
                Some(skipped),
                io::Error::new(io::ErrorKind::UnexpectedEof, "archive shorter than before"),
            ));
        }
        Ok(RunBytes::new(Box::new(src), from, end))
    }
}

/// The run id a listed file is addressed by: its file name's (`<id>.jsonl[.zst]`).
fn key_of(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    let (id, _) = parse_run_file_name(name)?;
    session_schema::is_safe_id(id).then(|| id.to_owned())
}

fn summary(root: &Path, run_id: String, row: &RunRow) -> RunSummary {
    RunSummary {
        header_run_id: (row.run_id != run_id).then(|| row.run_id.clone()),
        run_id,
        session_id: row.session_id.clone(),
        started_at: row.started_at.clone(),
        started_at_utc: row.started_at_utc.clone(),
        model_provider: row.model_provider.clone(),
        model_name: row.model_name.clone(),
        outcome: Outcome::parse(row.outcome.as_str()),
        last_status: row.last_status.clone(),
        record_count: row.record_count,
        invocation_count: row.invocation_count,
        tokens: TokenTotals {
            input: row.input_tokens,
            cached_input: row.cached_input_tokens,
            cache_creation: row.cache_creation_tokens,
            output: row.output_tokens,
            total: row.total_tokens,
        },
        first_input: row.first_input.clone(),
        workspace_root: row.workspace_root.clone(),
        damage_count: row.damage_count,
        last_ts: row.last_ts.clone(),
        stored_bytes: row.file_size,
        last_write_unix_ns: row.modified_unix_ns,
        archived: row.compressed,
        location: rel_path(root, &row.path),
        origin_host: None,
    }
}

fn rel_path(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

impl RunCatalogue for LocalBackend {
    fn append_lines(&self, run_id: &str, expected_len: u64, lines: &[u8]) -> Result<Appended> {
        checked_id(run_id)?;
        check_complete_lines(run_id, expected_len, lines)?;
        self.check_writable("append")?;
        let started = Instant::now();
        let mut created = false;
        // Each pass either appends, refuses, or finds the file moved (archived, removed,
        // created meanwhile) and looks again.
        for _ in 0..16 {
            let path = match self.locate(run_id)? {
                Located::File(p) => p,
                Located::Missing if expected_len != 0 => {
                    return Err(StorageError::LengthConflict {
                        run_id: run_id.to_owned(),
                        expected: expected_len,
                        committed: 0,
                    });
                }
                Located::Missing if lines.is_empty() => return Ok(Appended::default()),
                Located::Missing => {
                    let (path, ours) = self.create_run_file(run_id, lines)?;
                    created = ours;
                    self.remember_path(run_id, &path);
                    path
                }
            };
            if is_archived(&path) {
                return Err(StorageError::RunArchived {
                    run_id: run_id.to_owned(),
                });
            }
            let file = match OpenOptions::new().read(true).append(true).open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    self.forget_path(run_id);
                    continue;
                }
                Err(e) => return Err(io_err("open", run_id, None, e)),
            };
            self.lock_run(run_id, &file, started)?;
            if !still_named(&path, &file).map_err(|e| io_err("stat", run_id, None, e))? {
                self.forget_path(run_id);
                continue;
            }
            return self.append_locked(run_id, &path, file, created, expected_len, lines);
        }
        Err(io_err(
            "append to",
            run_id,
            Some(expected_len),
            io::Error::other("its file kept moving while being opened"),
        ))
    }

    fn read_bytes(&self, run_id: &str, from: u64, extent: Extent) -> Result<RunBytes> {
        checked_id(run_id)?;
        for _ in 0..2 {
            let Located::File(path) = self.locate(run_id)? else {
                break;
            };
            if is_archived(&path) {
                return self.read_archive(run_id, &path, from, extent);
            }
            let mut file = match File::open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    // Archived or removed since it was found: look again.
                    self.forget_path(run_id);
                    continue;
                }
                Err(e) => return Err(io_err("open", run_id, None, e)),
            };
            let len = file
                .metadata()
                .map_err(|e| io_err("stat", run_id, None, e))?
                .len();
            let end = match extent {
                Extent::WithTornTail => len,
                Extent::Committed => {
                    committed_end(&mut file, len).map_err(|e| io_err("read", run_id, None, e))?
                }
            };
            if from > end {
                return Err(StorageError::OffsetOutOfRange {
                    run_id: run_id.to_owned(),
                    offset: from,
                    len: end,
                });
            }
            file.seek(SeekFrom::Start(from))
                .map_err(|e| io_err("read", run_id, Some(from), e))?;
            return Ok(RunBytes::new(Box::new(file), from, end));
        }
        Err(StorageError::RunNotFound {
            run_id: run_id.to_owned(),
        })
    }

    fn stat_run(&self, run_id: &str) -> Result<Option<RunStat>> {
        checked_id(run_id)?;
        let Located::File(path) = self.locate(run_id)? else {
            return Ok(None);
        };
        let archived = is_archived(&path);
        let count = if archived {
            let mut src = open_run_file(&path).map_err(|e| jsonl_err("stat", run_id, e))?;
            count_lines(&mut src)
        } else {
            File::open(&path).and_then(|mut f| {
                let len = f.metadata()?.len();
                count_lines(&mut (&mut f).take(len))
            })
        };
        let count = match count {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                self.forget_path(run_id);
                return Ok(None);
            }
            Err(e) => return Err(io_err("read", run_id, None, e)),
        };
        let head = read_header(&path).map_err(|e| jsonl_err("read the header of", run_id, e))?;
        // The stat reads the whole file (its line count) anyway: the exact tail scan, never
        // an undecided probe.
        let tail =
            terminal_state_exact(&path).map_err(|e| jsonl_err("read the tail of", run_id, e))?;
        Ok(Some(RunStat {
            run_id: run_id.to_owned(),
            len: count.committed,
            lines: count.lines,
            torn_tail: count.total - count.committed,
            header: head.facts,
            end: tail.end,
            last_type: tail.last_type,
            last_ts: tail.last_ts,
            archived,
        }))
    }

    // RunQuery is filled field by field so that fields added to it later keep their defaults.
    #[allow(clippy::field_reassign_with_default)]
    fn list_runs(&self, query: &RunListQuery) -> Result<RunListPage> {
        if self.options.refresh_index && !self.is_read_only() {
            self.store
                .run_index()
                .index_runs()
                .map_err(|e| state_err("refresh the run index of", Target::Store, e))?;
        }
        let mut q = RunQuery::default();
        q.session = query.session.clone();
        q.since = query.since.clone();
        q.until = query.until.clone();
        q.outcome = query
            .outcome
            .as_ref()
            .map(|o| IndexedRunOutcome::from_stored(o.as_str()));
        q.workspace = query.workspace.clone();
        q.after = match &query.after {
            Some(c) => Some(
                RunCursor::from_token(c.as_str())
                    .map_err(|e| state_err("list runs of", Target::Store, e))?,
            ),
            None => None,
        };
        // One run more than asked for tells whether a next page exists; files that are a
        // second copy of a run (another date directory, a plain file beside its archive)
        // are left out, so keep fetching until enough runs are kept.
        let want = query.limit.map(|l| l.saturating_add(1));
        q.limit = want.map(|w| w.max(32));
        let root = self.root().to_owned();
        let mut kept: Vec<(RunSummary, RunCursor)> = Vec::new();
        loop {
            let page = self
                .store
                .run_index()
                .list_runs(&q)
                .map_err(|e| state_err("list runs of", Target::Store, e))?;
            let fetched = page.runs.len();
            for row in &page.runs {
                if want.is_some_and(|w| kept.len() >= w) {
                    break;
                }
                let Some(id) = key_of(&row.path) else {
                    continue;
                };
                if !self.is_primary_copy(&id, row) {
                    continue;
                }
                let cursor = RunCursor {
                    started_at: row.started_at_utc.clone().unwrap_or_default(),
                    rel_path: rel_path(&root, &row.path),
                };
                kept.push((summary(&root, id, row), cursor));
            }
            if want.is_some_and(|w| kept.len() >= w) {
                break;
            }
            match page.next_cursor {
                Some(c) if fetched > 0 => q.after = Some(c),
                _ => break,
            }
        }
        let mut next_cursor = None;
        if let Some(limit) = query.limit
            && kept.len() > limit
        {
            kept.truncate(limit);
            next_cursor = kept.last().map(|(_, c)| PageCursor::new(c.to_token()));
        }
        Ok(RunListPage {
            runs: kept.into_iter().map(|(s, _)| s).collect(),
            next_cursor,
        })
    }
}

impl LocalBackend {
    /// Whether `row`'s file is the one [`find_run`] picks for `run_id` (a plain file before an
    /// archive, the header's date directory before another). Only files outside their own
    /// date directory, and archives, are looked up.
    fn is_primary_copy(&self, run_id: &str, row: &RunRow) -> bool {
        let started = row.started_at.as_deref().map(Timestamp::from_raw);
        let expected = started
            .as_ref()
            .and_then(|ts| run_path(self.root(), run_id, ts).ok());
        if !row.compressed && expected.as_deref() == Some(row.path.as_path()) {
            return true;
        }
        match find_run(self.root(), run_id, started.as_ref()) {
            Ok(found) => found.path == row.path,
            Err(_) => true,
        }
    }
}
