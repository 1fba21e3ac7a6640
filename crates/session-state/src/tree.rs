//! The date directories of the run tree (spec §1: `<root>/YYYY/MM/DD/<run_id>.jsonl`) in the
//! run index's terms (times in nanoseconds, the racy-timestamp rule, key ranges), walked by
//! [`session_jsonl::layout::stat_date_tree`], which holds the date-directory rule, with the
//! modification time of every directory, so that the run index can skip days whose listing
//! cannot have changed.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use session_jsonl::layout::{list_day_files, list_day_names, stat_date_tree};

/// Window of "racy" timestamps with coarse granularity, in nanoseconds: a directory or file
/// whose modification time is a whole second (file systems with 1 s or 2 s timestamps: ext3,
/// ext4 with small inodes, HFS+, FAT) and within this distance of (or after) the moment it was
/// looked at may change again without its timestamp changing, so it is looked at again on the
/// next refresh.
pub(crate) const COARSE_RACY_NS: i64 = 2_000_000_000;

/// Smallest window for timestamps with a sub-second part: covers the kernel's coarse clock
/// (file times lag the wall clock by up to one tick, 1–10 ms) with a wide margin.
pub(crate) const FINE_RACY_NS: i64 = 100_000_000;

/// The racy window for one timestamp: [`COARSE_RACY_NS`] for a whole second, otherwise twice
/// the granularity its trailing decimal zeros suggest (10 ms for exFAT's `…0000000`), at least
/// [`FINE_RACY_NS`]. A fine timestamp that is a whole second by chance (one in 10⁹) only gets
/// the wider window.
pub(crate) fn racy_window(mtime_ns: i64) -> i64 {
    let sub = mtime_ns.rem_euclid(1_000_000_000);
    if sub == 0 {
        return COARSE_RACY_NS;
    }
    let mut granularity = 1i64;
    while sub % (granularity * 10) == 0 {
        granularity *= 10;
    }
    (2 * granularity).max(FINE_RACY_NS)
}

/// Nanoseconds since the Unix epoch now (0 before the epoch, saturating far after it).
pub(crate) fn now_ns() -> i64 {
    to_ns(SystemTime::now())
}

/// A `SystemTime` in nanoseconds since the Unix epoch (0 before the epoch).
pub(crate) fn to_ns(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// Whether a modification time seen at `looked_ns` (wall clock) is too recent to prove that
/// a later change would give a different time (see [`racy_window`]). Assumes the clock that
/// stamps the files (a file server's, for network file systems) is not behind ours by more
/// than the window.
pub(crate) fn racy(mtime_ns: i64, looked_ns: i64) -> bool {
    mtime_ns >= looked_ns.saturating_sub(racy_window(mtime_ns))
}

/// Modification time of `md` in nanoseconds since the epoch (0 when unavailable).
pub(crate) fn mtime_ns(md: &fs::Metadata) -> i64 {
    md.modified().ok().map_or(0, to_ns)
}

/// A run file as its open descriptor showed it after it was read (`fstat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LookedAfter {
    /// Length in bytes.
    pub(crate) size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub(crate) mtime_ns: i64,
    /// Whether the file has no name left (removed, or replaced by a rename over it).
    pub(crate) unlinked: bool,
}

impl LookedAfter {
    /// The state `md` (the `fstat` of an open file) shows.
    pub(crate) fn of(md: &std::fs::Metadata) -> LookedAfter {
        #[cfg(unix)]
        let unlinked = std::os::unix::fs::MetadataExt::nlink(md) == 0;
        #[cfg(not(unix))]
        let unlinked = false;
        LookedAfter {
            size: md.len(),
            mtime_ns: mtime_ns(md),
            unlinked,
        }
    }

    /// Whether the file read is no longer the one listed with size `size` and mtime
    /// `mtime_ns`: written to while read (its length or mtime moved), or removed or replaced
    /// at its path (no name left). The check is made on the open file, not its path: a file
    /// replaced by a rename over it is seen through the old file's link count (on Unix; the
    /// rename changes its directory's mtime too, so the next refresh lists that directory
    /// again), a file written in place through its length and mtime, as a path-based `lstat`
    /// saw them, without the path lookup.
    pub(crate) fn changed_since(&self, size: u64, mtime_ns: i64) -> bool {
        self.unlinked || self.size != size || self.mtime_ns != mtime_ns
    }
}

/// One date directory.
#[derive(Debug, Clone)]
pub(crate) struct DateDir {
    /// Path relative to the root with a trailing `/` (`2026/`, `2026/11/`, `2026/11/30/`).
    pub(crate) rel: String,
    /// Absolute path.
    pub(crate) path: PathBuf,
    /// 1 = year, 2 = month, 3 = day.
    pub(crate) depth: u8,
    /// Modification time, nanoseconds since the epoch, taken before any listing of it.
    pub(crate) mtime_ns: i64,
    /// When the modification time was taken (wall clock, ns since the epoch).
    pub(crate) looked_ns: i64,
}

/// The date directories under a root.
#[derive(Debug, Default)]
pub(crate) struct Walk {
    /// Every year, month and day directory found, in `rel` order.
    pub(crate) dirs: Vec<DateDir>,
    /// Directories that could not be listed or looked at: `(path, rel with '/', error)`.
    /// Rows under them are kept as they are.
    pub(crate) unlisted: Vec<(PathBuf, String, io::Error)>,
}

/// Walks the root, its year directories and their month directories (always listed: there
/// are few of them) and looks at (`stat`) every day directory without listing it, with
/// [`session_jsonl::layout::stat_date_tree`] (the one place the date-directory rule lives). A
/// missing root is an empty walk.
///
/// # Errors
/// The I/O error when the root exists but cannot be listed.
pub(crate) fn walk(root: &Path) -> io::Result<Walk> {
    let tree = stat_date_tree(root)?;
    Ok(Walk {
        dirs: tree
            .dirs
            .into_iter()
            .map(|d| DateDir {
                depth: d.level.depth(),
                mtime_ns: d.modified.map_or(0, to_ns),
                looked_ns: to_ns(d.looked_at),
                rel: d.rel,
                path: d.path,
            })
            .collect(),
        unlisted: tree
            .unlisted
            .into_iter()
            .map(|u| (u.path, u.rel, u.error))
            .collect(),
    })
}

/// One run file of a day directory, with its `lstat`, or only its name when its reader
/// looks at it ([`Listed::stat_at_open`]).
#[derive(Debug, Clone)]
pub(crate) struct Listed {
    pub(crate) path: PathBuf,
    /// Relative to the root (`2026/11/30/<run_id>.jsonl`).
    pub(crate) rel: String,
    /// Length in bytes (0 until looked at when [`Listed::stat_at_open`]).
    pub(crate) size: u64,
    /// Modification time, ns since the epoch (0 until looked at when
    /// [`Listed::stat_at_open`]).
    pub(crate) mtime_ns: i64,
    pub(crate) compressed: bool,
    /// When the file was looked at (before its `lstat`).
    pub(crate) looked_ns: i64,
    /// Listed by name only ([`list_day_names`]): size, mtime and `looked_ns` are those of
    /// the `fstat` of the file once opened by its reader ([`open_in_dir`]), see
    /// [`Listed::seen_as`].
    pub(crate) stat_at_open: bool,
}

impl Listed {
    /// This file as its reader looked at it (the `fstat` of the open file, taken at
    /// `seen.looked_ns`): what its row holds and what the next incremental refresh compares
    /// its listing's `lstat` with.
    pub(crate) fn seen_as(&self, seen: Seen) -> Listed {
        Listed {
            size: seen.size,
            mtime_ns: seen.mtime_ns,
            looked_ns: seen.looked_ns,
            stat_at_open: false,
            ..self.clone()
        }
    }
}

/// A run file as its reader looked at it once opened (`fstat` of the descriptor, before any
/// read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seen {
    /// Length in bytes.
    pub(crate) size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub(crate) mtime_ns: i64,
    /// When it was looked at (wall clock, taken before the file was opened).
    pub(crate) looked_ns: i64,
}

/// The directory a worker opened its last run file in, kept open so that the next file of
/// the same day directory is opened relative to it (`openat`: the kernel looks up one name,
/// not every component of the path).
#[derive(Debug, Default)]
pub(crate) struct DirHandle {
    open: Option<(PathBuf, fs::File)>,
}

/// Opens the run file `path` for reading relative to its directory (kept open in `dir`
/// for the next file of the same directory) and looks at it with `fstat` before any read.
///
/// A symbolic link at the name is not followed (`O_NOFOLLOW`: `ELOOP`) and an entry that is
/// no regular file is refused (`InvalidInput`), as a listing's `lstat` would have left them
/// out; a FIFO put at the name does not block the open (`O_NONBLOCK`, which plain reads of a
/// regular file ignore). A directory replaced or renamed while a pass runs: the handle is the
/// directory as it was when this worker opened it, so a file is read from the directory that
/// was listed (or from its replacement when the replacement came first) and never from a
/// mixture of paths; a replaced day directory has a new modification time, so the next
/// refresh lists it again. `looked_ns` is taken before the open, as a listing takes it
/// before its `lstat`.
///
/// # Errors
/// The I/O error of opening the directory or the file, or of `fstat`.
pub(crate) fn open_in_dir(dir: &mut DirHandle, path: &Path) -> io::Result<(fs::File, Seen)> {
    let looked_ns = now_ns();
    let file = open_relative(dir, path)?;
    let md = file.metadata()?;
    if !md.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok((
        file,
        Seen {
            size: md.len(),
            mtime_ns: mtime_ns(&md),
            looked_ns,
        },
    ))
}

#[cfg(unix)]
fn open_relative(dir: &mut DirHandle, path: &Path) -> io::Result<fs::File> {
    use rustix::fs::{Mode, OFlags};

    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return fs::File::open(path);
    };
    if dir.open.as_ref().is_none_or(|(p, _)| p != parent) {
        dir.open = None;
        let handle = rustix::fs::open(
            parent,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        dir.open = Some((parent.to_owned(), fs::File::from(handle)));
    }
    let Some((_, handle)) = &dir.open else {
        return fs::File::open(path);
    };
    let fd = rustix::fs::openat(
        handle,
        name,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK,
        Mode::empty(),
    )?;
    Ok(fs::File::from(fd))
}

#[cfg(not(unix))]
fn open_relative(_dir: &mut DirHandle, path: &Path) -> io::Result<fs::File> {
    fs::File::open(path)
}

/// The run files of one day directory.
#[derive(Debug, Default)]
pub(crate) struct DayListing {
    /// Regular files named `<run_id>.jsonl` or `<run_id>.jsonl.zst`, in name order.
    pub(crate) files: Vec<Listed>,
    /// Files whose `lstat` failed (other than vanishing), with the message.
    pub(crate) failed: Vec<(PathBuf, String)>,
}

/// Lists one day directory with [`session_jsonl::layout::list_day_files`]: one `readdir` pass
/// and one `lstat` per run file (symbolic links and other non-regular entries are ignored).
///
/// # Errors
/// The I/O error of `readdir` (the directory cannot be listed; `NotFound` when it vanished).
pub(crate) fn list_day(dir: &DateDir) -> io::Result<DayListing> {
    let day = list_day_files(&dir.path, &dir.rel)?;
    Ok(DayListing {
        files: day
            .files
            .into_iter()
            .map(|f| Listed {
                path: f.path,
                rel: f.rel,
                size: f.size,
                mtime_ns: f.modified.map_or(0, to_ns),
                compressed: f.compressed,
                looked_ns: to_ns(f.looked_at),
                stat_at_open: false,
            })
            .collect(),
        failed: day
            .failed
            .into_iter()
            .map(|(p, e)| (p, format!("cannot stat: {e}")))
            .collect(),
    })
}

/// Lists one day directory by name only, with [`session_jsonl::layout::list_day_names`]:
/// one `readdir` pass, no `lstat` (the entry's type tells regular files), for a pass that
/// opens every file anyway; each file's size and mtime come from its reader's `fstat`
/// ([`Listed::stat_at_open`]).
///
/// # Errors
/// As [`list_day`].
pub(crate) fn list_day_unstatted(dir: &DateDir) -> io::Result<DayListing> {
    let day = list_day_names(&dir.path, &dir.rel)?;
    Ok(DayListing {
        files: day
            .files
            .into_iter()
            .map(|f| Listed {
                path: f.path,
                rel: f.rel,
                size: 0,
                mtime_ns: 0,
                compressed: f.compressed,
                looked_ns: 0,
                stat_at_open: true,
            })
            .collect(),
        failed: day
            .failed
            .into_iter()
            .map(|(p, e)| (p, format!("cannot stat: {e}")))
            .collect(),
    })
}

/// The exclusive upper bound of the keys starting with `prefix` (its last character
/// incremented): `2026/11/30/` → `2026/11/300`.
pub(crate) fn prefix_end(prefix: &str) -> String {
    let mut out = prefix.to_owned();
    match out.pop() {
        Some(c) => {
            let next = char::from_u32(u32::from(c) + 1)
                .or_else(|| char::from_u32(u32::from(c) + 0x801))
                .unwrap_or(char::MAX);
            out.push(next);
        }
        None => out.push(char::MAX),
    }
    out
}

/// The directory part of a relative run path, with its trailing `/` (the whole path when it
/// has no `/`).
pub(crate) fn parent_rel(rel: &str) -> &str {
    match rel.rfind('/') {
        Some(i) => &rel[..=i],
        None => rel,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_listed_on_threads_come_back_in_order_as_one_thread_lists_them() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for day in 1..=20u32 {
            let d = root.join(format!("2026/11/{day:02}"));
            std::fs::create_dir_all(&d).unwrap();
            for k in 0..day {
                let name = format!("{day:02}{k:06}-0000-4000-8000-000000000000.jsonl");
                std::fs::write(d.join(name), b"{}\n").unwrap();
            }
        }
        let walk = walk(root).unwrap();
        // A day that vanished after the walk: its error, in its place.
        std::fs::remove_dir_all(root.join("2026/11/07")).unwrap();
        let days: Vec<&DateDir> = walk.dirs.iter().filter(|d| d.depth == 3).collect();
        assert_eq!(days.len(), 20);
        let shape =
            |listings: Vec<io::Result<DayListing>>| -> Vec<Result<Vec<String>, io::ErrorKind>> {
                listings
                    .into_iter()
                    .map(|l| {
                        l.map(|l| l.files.into_iter().map(|f| f.rel).collect())
                            .map_err(|e| e.kind())
                    })
                    .collect()
            };
        let one = shape(session_jsonl::list_days_on_threads(&days, 1, |d| {
            list_day_unstatted(d)
        }));
        assert_eq!(one[6], Err(io::ErrorKind::NotFound));
        assert_eq!(one[19].as_ref().unwrap().len(), 20);
        for threads in [2, 3, 4, 32] {
            let on = shape(session_jsonl::list_days_on_threads(&days, threads, |d| {
                list_day_unstatted(d)
            }));
            assert_eq!(on, one, "{threads} threads");
        }
    }

    #[test]
    fn prefix_end_bounds_exactly_the_keys_with_the_prefix() {
        let end = prefix_end("2026/11/3/");
        assert_eq!(end, "2026/11/30");
        assert!("2026/11/3/x.jsonl" < end.as_str());
        assert!("2026/11/30/x.jsonl" >= end.as_str());
        assert!("2026/11/3/" >= "2026/11/3/");
        assert_eq!(parent_rel("2026/11/30/r.jsonl"), "2026/11/30/");
        assert_eq!(parent_rel("stray"), "stray");
        // A key without '/' is bounded by itself and its extensions only.
        assert!(prefix_end("stray").as_str() > "stray.jsonl");
    }

    #[test]
    fn racy_means_within_the_timestamp_granularity_of_the_look_or_after_it() {
        let look = 10_000_000_000 + 123_456_789;
        // Whole seconds: 2 s.
        let whole = 8_000_000_000;
        assert!(racy(whole, look - 123_456_789));
        assert!(racy(whole, whole + COARSE_RACY_NS));
        assert!(!racy(whole, whole + COARSE_RACY_NS + 1));
        assert!(
            racy(whole + 5_000_000_000, look),
            "a time after the look is racy"
        );
        // Nanoseconds: 100 ms.
        let fine = look - 50_000_001;
        assert!(racy(fine, look));
        assert!(!racy(fine, fine + FINE_RACY_NS + 1));
        // exFAT-like 10 ms steps: still 100 ms; tenths of a second: 200 ms.
        assert_eq!(racy_window(3_010_000_000), FINE_RACY_NS);
        assert_eq!(racy_window(3_500_000_000), 200_000_000);
        assert_eq!(racy_window(3_000_000_007), FINE_RACY_NS);
        assert_eq!(racy_window(-1_000_000_000), COARSE_RACY_NS);
    }

    #[test]
    fn walk_finds_the_directories_session_jsonl_lists() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for d in [
            "2026/11/30",
            "2026/2/3",
            "2026/02/03",
            "0000/01/01",
            "2026/13/01",
            "2026/11/32",
            "12345/01/01",
            "2026/11/x1",
            "2026/00/01",
            "2026/11/00",
            "02026/11/30",
            "2026/011/30",
            "2026/11/030",
            "messages",
            "state",
        ] {
            fs::create_dir_all(root.join(d)).unwrap();
        }
        for f in [
            "2026/11/30/a.jsonl",
            "2026/11/30/b.jsonl.zst",
            "2026/11/30/notes.txt",
            "2026/2/3/c.jsonl",
            "2026/02/03/d.jsonl",
            "2026/11/32/e.jsonl",
            "2026/00/01/f.jsonl",
            "2026/11/00/g.jsonl",
            "02026/11/30/h.jsonl",
            "2026/011/30/i.jsonl",
            "2026/11/030/j.jsonl",
            // Digit names that are files, not directories.
            "2027",
            "2026/12",
        ] {
            fs::write(root.join(f), b"{}\n").unwrap();
        }
        let w = walk(root).unwrap();
        let days: Vec<&str> = w
            .dirs
            .iter()
            .filter(|d| d.depth == 3)
            .map(|d| d.rel.as_str())
            .collect();
        assert_eq!(days, ["2026/02/03/", "2026/11/30/", "2026/2/3/"]);
        let mut ours: Vec<PathBuf> = w
            .dirs
            .iter()
            .filter(|d| d.depth == 3)
            .flat_map(|d| list_day(d).unwrap().files.into_iter().map(|f| f.path))
            .collect();
        ours.sort();
        let mut theirs: Vec<PathBuf> = session_jsonl::list_run_files(root)
            .unwrap()
            .files
            .into_iter()
            .map(|f| f.path)
            .collect();
        theirs.sort();
        assert_eq!(ours, theirs);
        assert_eq!(ours.len(), 4);
    }
}
