//! Where run files live: `<sessions_root>/YYYY/MM/DD/<run_id>.jsonl` (spec §2, compat notes §2.1–2.2).
//!
//! The date is the UTC date of the header's `started_at`; an unparseable `started_at` falls back
//! to the current UTC date, as the reference does. Archived runs are `<run_id>.jsonl.zst` in the
//! same directory. Ids are checked with [`session_schema::check_id`] before any path is built.

use std::cmp::Reverse;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use session_schema::{Timestamp, check_id};
use time::{Date, OffsetDateTime};

use crate::duplicates::{Completeness, rank_files};
use crate::error::{JsonlError, Result};
pub use crate::names::{ARCHIVED_EXT, RUN_EXT, parse_run_file_name};

mod date_tree;

pub use date_tree::{
    DateLevel, DateTree, DateTreeDir, DayFiles, DayNames, DayRunFile, DayRunName, UnlistedDir,
    list_day_files, list_day_names, stat_date_tree,
};

/// A UTC calendar date naming a `YYYY/MM/DD` directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RunDate {
    /// Year (the directory has 4 digits for years 1000–9999).
    pub year: u16,
    /// Month, 1–12.
    pub month: u8,
    /// Day of month, 1–31.
    pub day: u8,
}

impl RunDate {
    /// The UTC date of `ts`, or of the current time when `ts` does not parse as RFC 3339
    /// (compat notes §2.2: the reference falls back to "now").
    pub fn of_started_at(ts: &Timestamp) -> RunDate {
        let dt = ts.parse().unwrap_or_else(OffsetDateTime::now_utc);
        RunDate::from_date(dt.to_offset(time::UtcOffset::UTC).date())
    }

    fn from_date(d: Date) -> RunDate {
        RunDate {
            year: u16::try_from(d.year()).unwrap_or(0),
            month: u8::from(d.month()),
            day: d.day(),
        }
    }

    fn to_date(self) -> Option<Date> {
        let month = time::Month::try_from(self.month).ok()?;
        Date::from_calendar_date(i32::from(self.year), month, self.day).ok()
    }

    /// The day before and the day after (for looking beside the computed directory).
    pub fn neighbours(self) -> Vec<RunDate> {
        let Some(d) = self.to_date() else {
            return Vec::new();
        };
        [d.previous_day(), d.next_day()]
            .into_iter()
            .flatten()
            .map(RunDate::from_date)
            .collect()
    }

    /// `<root>/YYYY/MM/DD` (zero-padded: 4-digit year, 2-digit month and day).
    pub fn dir(self, sessions_root: &Path) -> PathBuf {
        sessions_root
            .join(format!("{:04}", self.year))
            .join(format!("{:02}", self.month))
            .join(format!("{:02}", self.day))
    }
}

fn checked(run_id: &str) -> Result<()> {
    check_id(run_id).map_err(|source| JsonlError::UnsafeRunId {
        run_id: run_id.to_owned(),
        source,
    })
}

/// The path of a new run file: `<sessions_root>/YYYY/MM/DD/<run_id>.jsonl`, date = UTC date of
/// `started_at` (current UTC date when it does not parse). Pure: touches no file.
///
/// # Errors
/// [`JsonlError::UnsafeRunId`] when `run_id` fails [`check_id`].
pub fn run_path(sessions_root: &Path, run_id: &str, started_at: &Timestamp) -> Result<PathBuf> {
    checked(run_id)?;
    Ok(RunDate::of_started_at(started_at)
        .dir(sessions_root)
        .join(format!("{run_id}{RUN_EXT}")))
}

/// The result of [`find_run`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundRun {
    /// The file to use. When several files hold the run, the most complete one
    /// ([`rank_files`]): a terminal record (`run.end` / `run.error`), then most records, then
    /// size; ties go to a plain `.jsonl` over an archive, then to the newest date directory.
    pub path: PathBuf,
    /// Every other file with the same run id that was seen (another date directory, or both a
    /// `.jsonl` and a `.jsonl.zst`), most complete first. Not empty means the tree needs
    /// attention: callers say which file they use and name these.
    pub duplicates: Vec<PathBuf>,
    /// Whether the file was found only by scanning every date directory (its directory
    /// disagrees with the header's `started_at`, or no date hint was given).
    pub by_scan: bool,
    /// How complete each file is, in the order `path`, then `duplicates`; empty when only one
    /// file was found (nothing was read to choose).
    pub ranking: Vec<Completeness>,
}

thread_local! {
    static LOOKUPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// File-system calls made on the calling thread since it started by [`find_run`],
/// [`find_run_in_dirs_of`] and [`probe_run_id`]: directories listed plus names looked up
/// (`lstat`). The cost of finding a run by id, for tests that hold it (`after - before`).
pub fn run_lookups_on_this_thread() -> u64 {
    LOOKUPS.with(|c| c.get())
}

fn count_lookup() {
    LOOKUPS.with(|c| c.set(c.get().saturating_add(1)));
}

fn candidates_in(dir: &Path, run_id: &str, out: &mut Vec<PathBuf>) {
    for name in [
        format!("{run_id}{RUN_EXT}"),
        format!("{run_id}{ARCHIVED_EXT}"),
    ] {
        count_lookup();
        let p = dir.join(name);
        if fs::symlink_metadata(&p).is_ok_and(|m| m.is_file()) {
            out.push(p);
        }
    }
}

/// Chooses among the files of one run: with one file nothing is read; with several, each is
/// read whole ([`Completeness::of_file`]) and they are ranked ([`rank_files`]), the order of
/// `found` breaking ties.
fn choose(found: Vec<PathBuf>, run_id: &str, by_scan: bool) -> FoundRun {
    let mut found = found;
    if found.len() < 2 {
        return FoundRun {
            path: found.remove(0),
            duplicates: Vec::new(),
            by_scan,
            ranking: Vec::new(),
        };
    }
    let mut ranked: Vec<Completeness> = found
        .iter()
        .map(|p| Completeness::of_file(p, run_id))
        .collect();
    rank_files(&mut ranked);
    let mut paths = ranked.iter().map(|c| c.path.clone());
    let path = paths.next().unwrap_or_default();
    FoundRun {
        path,
        duplicates: paths.collect(),
        by_scan,
        ranking: ranked,
    }
}

/// Finds the file of run `run_id` under `sessions_root`.
///
/// With a `started_at` hint it looks in the computed date directory, then the day before and
/// after (clock or timezone trouble); files found there are returned with any same-id files in
/// those three directories as duplicates. Without a hint, or when none is there, it looks in
/// every date directory by name ([`probe_run_id`]) and reports every further match as a
/// duplicate. Archived `.jsonl.zst` files count. When several files hold the run, the most
/// complete one is chosen (see [`FoundRun::path`]); only then are the files read.
///
/// # Errors
/// [`JsonlError::UnsafeRunId`] (before any file access), [`JsonlError::NotFound`], or
/// [`JsonlError::Io`] when the root cannot be listed.
pub fn find_run(
    sessions_root: &Path,
    run_id: &str,
    started_at: Option<&Timestamp>,
) -> Result<FoundRun> {
    checked(run_id)?;
    if let Some(ts) = started_at {
        let date = RunDate::of_started_at(ts);
        let mut found = Vec::new();
        candidates_in(&date.dir(sessions_root), run_id, &mut found);
        for n in date.neighbours() {
            candidates_in(&n.dir(sessions_root), run_id, &mut found);
        }
        if !found.is_empty() {
            found.sort_by_key(|p| p.to_string_lossy().ends_with(ARCHIVED_EXT));
            return Ok(choose(found, run_id, false));
        }
    }
    let mut found = find_all_runs(sessions_root, run_id)?;
    if found.is_empty() {
        return Err(JsonlError::NotFound {
            run_id: run_id.to_owned(),
            root: sessions_root.to_owned(),
        });
    }
    // Plain files before archives, keeping the newest-first date order otherwise.
    found.sort_by_key(|p| p.to_string_lossy().ends_with(ARCHIVED_EXT));
    Ok(choose(found, run_id, true))
}

/// Finds the file of run `run_id` in the date directories of `known`: files that an index (the
/// run index of session-state) says hold the run. In each such directory under
/// `sessions_root`, and in the day directories before and after it (as [`find_run`] looks
/// beside the date of `started_at`), `<run_id>.jsonl` and `<run_id>.jsonl.zst` are looked up
/// (`lstat`, six per known file; nothing is listed), so the cost follows the number of files
/// of the run, not the size of the store. The index may lag the tree: a file it names that is gone does not
/// count, and the archive or plain file beside it does. Several files are ranked as by
/// [`find_run`] (newest directory first breaking ties); [`FoundRun::by_scan`] is false.
///
/// Returns `Ok(None)` when none of those directories holds a file of the run (call
/// [`find_run`], which probes every date directory). A copy the index does not know yet in a
/// directory further away is not seen (`sessions verify` names every duplicate).
///
/// # Errors
/// [`JsonlError::UnsafeRunId`] (before any file access).
pub fn find_run_in_dirs_of(
    sessions_root: &Path,
    run_id: &str,
    known: &[PathBuf],
) -> Result<Option<FoundRun>> {
    checked(run_id)?;
    let mut dirs: Vec<PathBuf> = Vec::new();
    for dir in known.iter().filter_map(|p| p.parent()) {
        let Ok(rel) = dir.strip_prefix(sessions_root) else {
            continue;
        };
        dirs.push(dir.to_owned());
        // The day before and after too, as `find_run` does with a date: a retried start
        // or a clock off by a day leaves its copy there, before any index has seen it.
        if let Some(date) = date_of_rel(rel) {
            dirs.extend(date.neighbours().into_iter().map(|n| n.dir(sessions_root)));
        }
    }
    // Newest date directory first, as `find_run` lists them.
    dirs.sort_by(|a, b| b.cmp(a));
    dirs.dedup();
    let mut found = Vec::new();
    for dir in &dirs {
        candidates_in(dir, run_id, &mut found);
    }
    if found.is_empty() {
        return Ok(None);
    }
    found.sort_by_key(|p| p.to_string_lossy().ends_with(ARCHIVED_EXT));
    Ok(Some(choose(found, run_id, false)))
}

/// The date a zero-padded `YYYY/MM/DD` path (relative to the root) names.
fn date_of_rel(rel: &Path) -> Option<RunDate> {
    let parts: Vec<&str> = rel.iter().filter_map(|c| c.to_str()).collect();
    let [y, m, d] = parts.as_slice() else {
        return None;
    };
    if y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return None;
    }
    let date = RunDate {
        year: y.parse().ok()?,
        month: m.parse().ok()?,
        day: d.parse().ok()?,
    };
    date.to_date().map(|_| date)
}

/// Every file of run `run_id` in any date directory, newest date first (exhaustive, by name:
/// see [`probe_run_id`] for the cost).
///
/// # Errors
/// As [`find_run`].
pub fn find_all_runs(sessions_root: &Path, run_id: &str) -> Result<Vec<PathBuf>> {
    Ok(probe_run_id(sessions_root, run_id)?
        .files
        .into_iter()
        .map(|(p, _)| p)
        .collect())
}

/// The result of [`probe_run_id`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunIdProbe {
    /// Regular files named `<run_id>.jsonl` or `<run_id>.jsonl.zst`, with their sizes in
    /// bytes, newest date directory first (a plain file before its archive).
    pub files: Vec<(PathBuf, u64)>,
    /// Directories listed: the root and every year and month directory (never a day
    /// directory).
    pub dirs_listed: u64,
    /// Names looked up with `lstat`: two per day directory.
    pub names_probed: u64,
}

/// Looks for run `run_id` in every date directory by name, without listing any day directory
/// or opening any file: the root and the year and month directories are listed (the same
/// tolerant rule as [`list_run_files`]: all-digit names, padded or not), and in each day
/// directory `<run_id>.jsonl` and `<run_id>.jsonl.zst` are looked up (`lstat`; symbolic links
/// and other non-regular entries do not count, as in the listing).
///
/// **Cost:** O(year + month directories) directory listings plus two `lstat` calls per day
/// directory, whatever the number of runs per day: a store used daily for 10 years costs
/// ~130 listings and ~7,300 lookups of (mostly absent) names. Compare [`list_run_files`],
/// which reads every entry of every day directory and `stat`s every run file. Directories
/// that cannot be listed are skipped.
///
/// # Errors
/// [`JsonlError::UnsafeRunId`] (before any file access); [`JsonlError::Io`] when the root
/// exists but cannot be listed.
pub fn probe_run_id(sessions_root: &Path, run_id: &str) -> Result<RunIdProbe> {
    checked(run_id)?;
    let mut probe = RunIdProbe::default();
    match fs::metadata(sessions_root) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(probe),
        Err(e) => return Err(JsonlError::io("stat", sessions_root, e)),
        Ok(_) => {}
    }
    if let Err(e) = fs::read_dir(sessions_root) {
        return Err(JsonlError::io("list", sessions_root, e));
    }
    let names = [
        format!("{run_id}{RUN_EXT}"),
        format!("{run_id}{ARCHIVED_EXT}"),
    ];
    let mut skipped = Vec::new();
    probe.dirs_listed += 1;
    count_lookup();
    for (_, _, y_dir) in numeric_subdirs(sessions_root, DateLevel::Year, &mut skipped) {
        probe.dirs_listed += 1;
        count_lookup();
        for (_, _, m_dir) in numeric_subdirs(&y_dir, DateLevel::Month, &mut skipped) {
            probe.dirs_listed += 1;
            count_lookup();
            for (_, _, d_dir) in numeric_subdirs(&m_dir, DateLevel::Day, &mut skipped) {
                for name in &names {
                    probe.names_probed += 1;
                    count_lookup();
                    let p = d_dir.join(name);
                    if let Ok(md) = fs::symlink_metadata(&p)
                        && md.is_file()
                    {
                        probe.files.push((p, md.len()));
                    }
                }
            }
        }
    }
    Ok(probe)
}

/// One run file found by [`list_run_files`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFile {
    /// Full path.
    pub path: PathBuf,
    /// Run id from the file name (not checked against the header; use
    /// [`read_header`](crate::read_header) for that).
    pub run_id: String,
    /// Whether this is an archived `.jsonl.zst`.
    pub compressed: bool,
    /// The date of the directory it lives in.
    pub date: RunDate,
    /// Whether a directory on the way is not zero-padded (`2026/2/11`): the reference's reader
    /// (`^\d{4}$/^\d{2}$/^\d{2}$`) would not see this run.
    pub nonstandard_dir: bool,
    /// Modification time, used to order runs of one day (newest first).
    pub modified: Option<SystemTime>,
}

/// A directory under the sessions root that could not be listed.
#[derive(Debug)]
pub struct SkippedDir {
    /// The directory.
    pub path: PathBuf,
    /// Why.
    pub error: io::Error,
}

/// The result of [`list_run_files`].
#[derive(Debug, Default)]
pub struct RunListing {
    /// Run files, newest first: descending year, month, day directories, and within one day by
    /// modification time (newest first), then by name.
    pub files: Vec<RunFile>,
    /// Date directories that are all digits but not zero-padded (`2026/2/11`); their runs are
    /// listed (with [`RunFile::nonstandard_dir`]) although the reference would miss them.
    pub nonstandard_dirs: Vec<PathBuf>,
    /// Directories that could not be read; their runs are missing from `files`.
    pub skipped: Vec<SkippedDir>,
}

/// Date directories of `dir` at `level` ([`DateLevel::accepts`]) with their numeric value
/// and whether they are padded to the level's width.
fn numeric_subdirs(
    dir: &Path,
    level: DateLevel,
    skipped: &mut Vec<SkippedDir>,
) -> Vec<(u32, bool, PathBuf)> {
    let children = match date_tree::date_children(dir, level) {
        Ok(c) => c,
        Err(error) => {
            skipped.push(SkippedDir {
                path: dir.to_owned(),
                error,
            });
            return Vec::new();
        }
    };
    let mut out: Vec<(u32, bool, PathBuf)> = children
        .into_iter()
        .map(|(n, name, path)| (n, name.len() == level.width(), path))
        .collect();
    // Descending value; padded before unpadded for equal values.
    out.sort_by_key(|(n, padded, _)| (Reverse(*n), Reverse(*padded)));
    out
}

/// One day directory of the run tree (`YYYY/MM/DD`, padded or not), from [`day_dirs_newest_first`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DayDir {
    /// The date its path names.
    pub date: RunDate,
    /// Full path.
    pub path: PathBuf,
    /// Whether a directory on the way is not zero-padded (`2026/2/11`).
    pub nonstandard: bool,
}

/// The day directories under a sessions root, newest first, listed lazily: a year directory's
/// months and a month directory's days are listed only when the walk reaches them, so taking
/// the newest two days lists the root, one year and one month. From
/// [`day_dirs_newest_first`]; the one place where the date-directory rule lives (all-digit
/// names of at most 4/2/2 digits with values in `1..=9999` / `1..=12` / `1..=31`, padded ones
/// before unpadded ones of the same value).
#[derive(Debug)]
pub struct DayDirs {
    /// Year directories not yet entered, newest last (popped first).
    years: Vec<(u32, bool, PathBuf)>,
    /// Months of the current year not yet entered, newest last.
    months: Vec<(u32, bool, PathBuf)>,
    /// Days of the current month not yet returned, newest last.
    days: Vec<(u32, bool, PathBuf)>,
    /// The current year and month: value and whether padded.
    year: (u32, bool),
    month: (u32, bool),
    /// Directories that could not be listed so far.
    skipped: Vec<SkippedDir>,
    /// Directories listed so far (the root included).
    listed: u64,
}

impl DayDirs {
    /// Directories that could not be listed so far; the runs under them are not walked.
    pub fn skipped(&self) -> &[SkippedDir] {
        &self.skipped
    }

    /// Takes the directories that could not be listed so far.
    pub fn take_skipped(&mut self) -> Vec<SkippedDir> {
        std::mem::take(&mut self.skipped)
    }

    /// Directories listed so far, the sessions root included (a cost a test can hold).
    pub fn dirs_listed(&self) -> u64 {
        self.listed
    }

    fn subdirs(&mut self, dir: &Path, level: DateLevel) -> Vec<(u32, bool, PathBuf)> {
        self.listed += 1;
        let mut v = numeric_subdirs(dir, level, &mut self.skipped);
        // Popped from the end: oldest first in the vector.
        v.reverse();
        v
    }
}

impl Iterator for DayDirs {
    type Item = DayDir;

    fn next(&mut self) -> Option<DayDir> {
        loop {
            if let Some((day, d_pad, path)) = self.days.pop() {
                let date = RunDate {
                    year: u16::try_from(self.year.0).unwrap_or(0),
                    month: u8::try_from(self.month.0).unwrap_or(0),
                    day: u8::try_from(day).unwrap_or(0),
                };
                return Some(DayDir {
                    date,
                    path,
                    nonstandard: !(self.year.1 && self.month.1 && d_pad),
                });
            }
            if let Some((month, m_pad, path)) = self.months.pop() {
                self.month = (month, m_pad);
                self.days = self.subdirs(&path, DateLevel::Day);
                continue;
            }
            let (year, y_pad, path) = self.years.pop()?;
            self.year = (year, y_pad);
            self.months = self.subdirs(&path, DateLevel::Month);
        }
    }
}

/// Starts a walk of the day directories under `sessions_root`, newest first ([`DayDirs`]); a
/// missing root has none.
///
/// # Errors
/// [`JsonlError::Io`] when the root exists but cannot be looked at or listed; subdirectories
/// that cannot be listed are reported in [`DayDirs::skipped`].
pub fn day_dirs_newest_first(sessions_root: &Path) -> Result<DayDirs> {
    let mut walk = DayDirs {
        years: Vec::new(),
        months: Vec::new(),
        days: Vec::new(),
        year: (0, true),
        month: (0, true),
        skipped: Vec::new(),
        listed: 0,
    };
    match fs::metadata(sessions_root) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(walk),
        Err(e) => return Err(JsonlError::io("stat", sessions_root, e)),
        Ok(_) => {}
    }
    if let Err(e) = fs::read_dir(sessions_root) {
        return Err(JsonlError::io("list", sessions_root, e));
    }
    walk.years = walk.subdirs(sessions_root, DateLevel::Year);
    Ok(walk)
}

/// The run files of one day directory without opening any of them, newest first (by
/// modification time, then by name): `<run_id>.jsonl` and `<run_id>.jsonl.zst` regular files;
/// anything else is ignored.
///
/// # Errors
/// The I/O error when the directory cannot be listed.
pub fn list_day(day: &DayDir) -> io::Result<Vec<RunFile>> {
    let mut day_files = Vec::new();
    for entry in fs::read_dir(&day.path)?.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some((run_id, compressed)) = parse_run_file_name(name) else {
            continue;
        };
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        day_files.push(RunFile {
            path: entry.path(),
            run_id: run_id.to_owned(),
            compressed,
            date: day.date,
            nonstandard_dir: day.nonstandard,
            modified: meta.modified().ok(),
        });
    }
    day_files.sort_by(|a, b| {
        b.modified
            .cmp(&a.modified)
            .then_with(|| a.path.cmp(&b.path))
    });
    Ok(day_files)
}

/// Fewest day directories [`list_run_files`] lists on more than one thread.
const PARALLEL_LIST_DAYS: usize = 8;

/// Most threads [`list_run_files`] lists on.
const LIST_THREADS: usize = 4;

/// `list(day)` of every day directory of `days`, in their order. With `threads` > 1 the days
/// are split into that many contiguous runs listed at once (the kernel's `readdir` of a day of
/// ~1,440 files, and a `stat` per file where the listing takes one, is CPU work, and a
/// store-sized pass lists every day before it reads a file); a thread that cannot be started
/// leaves its days to the calling thread, and a panic of `list` is resumed on it.
pub fn list_days_on_threads<D, T, L>(days: &[D], threads: usize, list: L) -> Vec<T>
where
    D: Sync,
    T: Send,
    L: Fn(&D) -> T + Sync,
{
    let threads = threads.min(days.len()).max(1);
    if threads == 1 {
        return days.iter().map(&list).collect();
    }
    let per = days.len().div_ceil(threads);
    let list = &list;
    std::thread::scope(|scope| {
        let mut chunks = days.chunks(per);
        let first = chunks.next().unwrap_or_default();
        let spawned: Vec<_> = chunks
            .map(|chunk| {
                let handle = std::thread::Builder::new()
                    .name("session-list".into())
                    .spawn_scoped(scope, move || chunk.iter().map(list).collect::<Vec<_>>());
                (chunk, handle.ok())
            })
            .collect();
        let mut out: Vec<T> = first.iter().map(list).collect();
        for (chunk, handle) in spawned {
            match handle.map(std::thread::ScopedJoinHandle::join) {
                Some(Ok(listed)) => out.extend(listed),
                Some(Err(panic)) => std::panic::resume_unwind(panic),
                None => out.extend(chunk.iter().map(list)),
            }
        }
        out
    })
}

/// Every day directory (`YYYY/MM/DD`, padded or not) under `sessions_root`, newest first; a
/// missing root has none, directories that cannot be listed are skipped.
///
/// # Errors
/// [`JsonlError::Io`] when the root exists but cannot be listed.
pub(crate) fn day_dirs(sessions_root: &Path) -> Result<Vec<PathBuf>> {
    Ok(day_dirs_newest_first(sessions_root)?
        .map(|d| d.path)
        .collect())
}

/// Lists every run file under `sessions_root` newest first without opening any of them.
///
/// Walks `YYYY/MM/DD` directories in descending order ([`day_dirs_newest_first`], listing
/// each with [`list_day`]; with eight days or more, several days at once on up to four
/// threads, the order kept). Directories whose names are all digits but not zero-padded are
/// included and reported in [`RunListing::nonstandard_dirs`]; anything else (`messages/`,
/// `state/`, `state.db`, stray files) is ignored. A missing root gives an empty listing.
///
/// # Errors
/// [`JsonlError::Io`] only when the root exists but cannot be listed; unreadable
/// subdirectories are reported in [`RunListing::skipped`].
pub fn list_run_files(sessions_root: &Path) -> Result<RunListing> {
    let mut listing = RunListing::default();
    let mut walk = day_dirs_newest_first(sessions_root)?;
    let days: Vec<DayDir> = walk.by_ref().collect();
    let mut skipped = Vec::new();
    // A listing costs a `stat` per file (for the order within a day): most of its time on a
    // store of 100k runs.
    let threads = if days.len() >= PARALLEL_LIST_DAYS {
        std::thread::available_parallelism()
            .map_or(1, usize::from)
            .min(LIST_THREADS)
    } else {
        1
    };
    for (day, listed) in days
        .iter()
        .zip(list_days_on_threads(&days, threads, list_day))
    {
        if day.nonstandard {
            listing.nonstandard_dirs.push(day.path.clone());
        }
        match listed {
            Ok(files) => listing.files.extend(files),
            Err(error) => skipped.push(SkippedDir {
                path: day.path.clone(),
                error,
            }),
        }
    }
    // Year and month directories that could not be listed come first, as the walk met them.
    let mut all = walk.take_skipped();
    all.extend(skipped);
    listing.skipped = all;
    Ok(listing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_uses_utc_date_of_started_at() {
        let root = Path::new("/s");
        let p = run_path(
            root,
            "r1",
            &Timestamp::from_raw("2026-02-03T23:59:59.999+09:00"),
        )
        .unwrap();
        assert_eq!(p, Path::new("/s/2026/02/03/r1.jsonl"));
        let p = run_path(
            root,
            "r1",
            &Timestamp::from_raw("2026-02-03T20:00:00.000-05:00"),
        )
        .unwrap();
        assert_eq!(p, Path::new("/s/2026/02/04/r1.jsonl"));
    }

    #[test]
    fn unparseable_started_at_uses_today() {
        let today = RunDate::from_date(OffsetDateTime::now_utc().date());
        let p = run_path(Path::new("/s"), "r1", &Timestamp::from_raw("not a date")).unwrap();
        assert_eq!(p, today.dir(Path::new("/s")).join("r1.jsonl"));
    }

    /// Listed on several threads (twelve days), the listing is the one a walk of the days
    /// in order gives: newest day first, within a day newest file first, then by name.
    #[test]
    fn days_listed_on_several_threads_keep_the_walk_order() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let base = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_780_000_000);
        for day in 1..=12u32 {
            let d = root.join(format!("2026/03/{day:02}"));
            fs::create_dir_all(&d).unwrap();
            for (n, age) in [(1u64, 30u64), (2, 10), (3, 20), (4, 10)] {
                let f = d.join(format!("run-{day}-{n}.jsonl"));
                fs::write(&f, b"{}\n").unwrap();
                let file = fs::File::options().write(true).open(&f).unwrap();
                file.set_modified(base - std::time::Duration::from_secs(age))
                    .unwrap();
            }
        }
        let listing = list_run_files(root).unwrap();
        let mut walk = day_dirs_newest_first(root).unwrap();
        let mut want: Vec<PathBuf> = Vec::new();
        for day in walk.by_ref() {
            want.extend(
                list_day(&day)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|f| f.path),
            );
        }
        let got: Vec<PathBuf> = listing.files.iter().map(|f| f.path.clone()).collect();
        assert_eq!(got.len(), 48);
        assert_eq!(got, want);
        assert_eq!(
            got.first().unwrap(),
            &root.join("2026/03/12/run-12-2.jsonl")
        );
        assert_eq!(got.last().unwrap(), &root.join("2026/03/01/run-1-1.jsonl"));
    }

    #[test]
    fn unsafe_ids_are_refused() {
        for id in ["../x", "a/b", "", ".."] {
            let err = run_path(Path::new("/s"), id, &Timestamp::now()).unwrap_err();
            assert!(matches!(err, JsonlError::UnsafeRunId { .. }), "{id}");
            assert!(matches!(
                find_run(Path::new("/nonexistent"), id, None),
                Err(JsonlError::UnsafeRunId { .. })
            ));
        }
    }

    #[test]
    fn file_names() {
        assert_eq!(parse_run_file_name("a.jsonl"), Some(("a", false)));
        assert_eq!(parse_run_file_name("a.jsonl.zst"), Some(("a", true)));
        assert_eq!(parse_run_file_name(".jsonl"), None);
        assert_eq!(parse_run_file_name("a.json"), None);
    }

    #[test]
    fn listing_is_newest_first_and_reports_unpadded_dirs() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        for (dir, name) in [
            ("2026/11/30", "a.jsonl"),
            ("2026/11/29", "b.jsonl.zst"),
            ("2025/12/01", "c.jsonl"),
            ("2026/2/11", "d.jsonl"),
            ("messages", "e.jsonl"),
            ("2026/11/xx", "f.jsonl"),
        ] {
            fs::create_dir_all(root.join(dir)).unwrap();
            fs::write(root.join(dir).join(name), b"").unwrap();
        }
        let listing = list_run_files(root).unwrap();
        let ids: Vec<_> = listing.files.iter().map(|f| f.run_id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "d", "c"]);
        assert!(listing.files[1].compressed);
        assert!(listing.files[2].nonstandard_dir);
        assert_eq!(listing.nonstandard_dirs, [root.join("2026/2/11")]);
        assert!(
            list_run_files(&root.join("missing"))
                .unwrap()
                .files
                .is_empty()
        );
    }

    #[test]
    fn find_chooses_the_most_complete_of_several_files() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let h = r#"{"type":"header","schema_version":1,"run_id":"r","started_at":"2026-02-03T10:00:00.000Z"}"#;
        let end = r#"{"type":"run.end","run_id":"r","ts":"2026-02-03T10:01:00.000Z","outcome":"completed"}"#;
        for (dir, body) in [
            // Newest directory: only the header (a retried start).
            ("2026/02/05", format!("{h}\n")),
            ("2026/02/03", format!("{h}\n{end}\n")),
        ] {
            fs::create_dir_all(root.join(dir)).unwrap();
            fs::write(root.join(dir).join("r.jsonl"), body).unwrap();
        }
        for hint in [None, Some(Timestamp::from_raw("2026-02-04T10:00:00.000Z"))] {
            let found = find_run(root, "r", hint.as_ref()).unwrap();
            assert_eq!(found.path, root.join("2026/02/03/r.jsonl"), "{hint:?}");
            assert_eq!(found.duplicates, [root.join("2026/02/05/r.jsonl")]);
            let facts: Vec<(bool, u64)> = found
                .ranking
                .iter()
                .map(|c| (c.terminal, c.records))
                .collect();
            assert_eq!(facts, [(true, 2), (false, 1)]);
        }
        // One file: nothing read, nothing ranked.
        fs::remove_file(root.join("2026/02/05/r.jsonl")).unwrap();
        assert!(find_run(root, "r", None).unwrap().ranking.is_empty());
    }

    #[test]
    fn find_looks_beside_the_computed_dir_then_scans() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        for dir in ["2026/02/04", "2025/01/01"] {
            fs::create_dir_all(root.join(dir)).unwrap();
        }
        fs::write(root.join("2026/02/04/r.jsonl"), b"").unwrap();
        let ts = Timestamp::from_raw("2026-02-03T10:00:00.000Z");
        let found = find_run(root, "r", Some(&ts)).unwrap();
        assert_eq!(found.path, root.join("2026/02/04/r.jsonl"));
        assert!(!found.by_scan && found.duplicates.is_empty());

        fs::write(root.join("2025/01/01/r.jsonl.zst"), b"").unwrap();
        let found = find_run(root, "r", None).unwrap();
        assert_eq!(found.path, root.join("2026/02/04/r.jsonl"));
        assert_eq!(found.duplicates, [root.join("2025/01/01/r.jsonl.zst")]);
        assert!(found.by_scan);

        let far = Timestamp::from_raw("2020-01-01T00:00:00.000Z");
        let found = find_run(root, "r", Some(&far)).unwrap();
        assert!(found.by_scan);
        assert!(matches!(
            find_run(root, "nope", None),
            Err(JsonlError::NotFound { .. })
        ));
    }
}
