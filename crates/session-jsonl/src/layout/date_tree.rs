//! The whole date-directory tree of a sessions root with a `stat` of every directory, and the
//! run files of one day directory with a `lstat` of each: what an index that skips unchanged
//! days needs (spec §1: `<root>/YYYY/MM/DD/<run_id>.jsonl`).
//!
//! The rule for which names are date directories is [`DateLevel::accepts`], the same one
//! [`day_dirs_newest_first`](super::day_dirs_newest_first) and
//! [`list_run_files`](super::list_run_files) walk with: all-digit names of at most 4/2/2 digits
//! (not necessarily zero-padded) with values in `1..=9999` / `1..=12` / `1..=31`.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::names::parse_run_file_name;

/// The level of a date directory: `YYYY`, `MM` or `DD`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DateLevel {
    /// A year directory (`2026`): at most 4 digits, `1..=9999`.
    Year,
    /// A month directory (`11`, `2`): at most 2 digits, `1..=12`.
    Month,
    /// A day directory (`30`, `3`): at most 2 digits, `1..=31`.
    Day,
}

impl DateLevel {
    /// Digits of a zero-padded name at this level (4 for years, 2 otherwise).
    pub fn width(self) -> usize {
        match self {
            DateLevel::Year => 4,
            DateLevel::Month | DateLevel::Day => 2,
        }
    }

    /// Largest value at this level (9999, 12, 31).
    pub fn max(self) -> u32 {
        match self {
            DateLevel::Year => 9999,
            DateLevel::Month => 12,
            DateLevel::Day => 31,
        }
    }

    /// Depth below the sessions root: 1 for years, 2 for months, 3 for days.
    pub fn depth(self) -> u8 {
        match self {
            DateLevel::Year => 1,
            DateLevel::Month => 2,
            DateLevel::Day => 3,
        }
    }

    /// The value a directory name stands for at this level, when it is a date directory name:
    /// all ASCII digits, at most [`width`](Self::width) of them, value in `1..=max`
    /// (`"2"` and `"02"` are both month 2; `"002"`, `"00"`, `"13"` and `"x1"` are no months).
    /// The one place the date-directory rule lives.
    pub fn accepts(self, name: &str) -> Option<u32> {
        if name.is_empty() || name.len() > self.width() || !name.bytes().all(|b| b.is_ascii_digit())
        {
            return None;
        }
        let n = name.parse::<u32>().ok()?;
        (1..=self.max()).contains(&n).then_some(n)
    }

    fn child(self) -> Option<DateLevel> {
        match self {
            DateLevel::Year => Some(DateLevel::Month),
            DateLevel::Month => Some(DateLevel::Day),
            DateLevel::Day => None,
        }
    }
}

/// A date-directory child of `dir` at `level`: `(value, name, path)`.
pub(crate) type DateChild = (u32, String, PathBuf);

/// The child directories of `dir` whose names [`DateLevel::accepts`], in no particular order
/// (entries that cannot be read or are not directories, symbolic links included, are skipped).
///
/// # Errors
/// The I/O error when `dir` cannot be listed.
pub(crate) fn date_children(dir: &Path, level: DateLevel) -> io::Result<Vec<DateChild>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)?.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(n) = level.accepts(name) else {
            continue;
        };
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        out.push((n, name.to_owned(), entry.path()));
    }
    Ok(out)
}

/// One date directory of a [`DateTree`], with its modification time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DateTreeDir {
    /// Path relative to the sessions root with a trailing `/`, as named on disk
    /// (`2026/`, `2026/11/`, `2026/2/3/`).
    pub rel: String,
    /// Full path.
    pub path: PathBuf,
    /// Year, month or day.
    pub level: DateLevel,
    /// Modification time (`None` where the platform has none), taken after
    /// [`looked_at`](Self::looked_at) and before any listing of the directory.
    pub modified: Option<SystemTime>,
    /// When the directory was looked at (wall clock, just before its `stat`): a modification
    /// time this close to it may change again without changing its value.
    pub looked_at: SystemTime,
}

/// A directory of the date tree that could not be looked at or listed: the runs under it are
/// unknown (an index keeps what it has for them).
#[derive(Debug)]
pub struct UnlistedDir {
    /// Full path.
    pub path: PathBuf,
    /// Path relative to the sessions root with a trailing `/`.
    pub rel: String,
    /// The OS error.
    pub error: io::Error,
}

/// The result of [`stat_date_tree`].
#[derive(Debug, Default)]
pub struct DateTree {
    /// Every year, month and day directory found, in `rel` order (byte order of the names on
    /// disk, not date order: `2026/11/` before `2026/2/`).
    pub dirs: Vec<DateTreeDir>,
    /// Directories that could not be looked at or listed, in the order met.
    pub unlisted: Vec<UnlistedDir>,
}

/// Looks at (`stat`s) one directory; `None` when it vanished since its parent was listed or
/// could not be looked at (then it is recorded in `tree.unlisted`).
fn look(tree: &mut DateTree, path: PathBuf, rel: String, level: DateLevel) -> Option<DateTreeDir> {
    let looked_at = SystemTime::now();
    match fs::metadata(&path) {
        Ok(md) => Some(DateTreeDir {
            rel,
            path,
            level,
            modified: md.modified().ok(),
            looked_at,
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(error) => {
            tree.unlisted.push(UnlistedDir { path, rel, error });
            None
        }
    }
}

/// Lists `dir` at `level` and looks at each child, recursing into years and months (day
/// directories are looked at, not listed).
fn walk_level(tree: &mut DateTree, dir: &Path, rel: &str, level: DateLevel) {
    let children = match date_children(dir, level) {
        Ok(c) => c,
        // Removed since it was looked at: nothing under it.
        Err(e) if e.kind() == io::ErrorKind::NotFound => return,
        Err(error) => {
            tree.unlisted.push(UnlistedDir {
                path: dir.to_owned(),
                rel: rel.to_owned(),
                error,
            });
            return;
        }
    };
    for (_, name, path) in children {
        let Some(found) = look(tree, path, format!("{rel}{name}/"), level) else {
            continue;
        };
        let next = level
            .child()
            .map(|l| (l, found.path.clone(), found.rel.clone()));
        tree.dirs.push(found);
        if let Some((child, path, rel)) = next {
            walk_level(tree, &path, &rel, child);
        }
    }
}

/// Walks the date tree under `sessions_root`: lists the root, every year and every month
/// directory (there are few of them) and looks at (`stat`s) every day directory without
/// listing it, so that an index can list only the days whose modification time changed
/// ([`list_day_files`]). A missing root is an empty tree; directories below the root that
/// cannot be looked at or listed are reported in [`DateTree::unlisted`].
///
/// # Errors
/// The I/O error when the root exists but cannot be listed.
pub fn stat_date_tree(sessions_root: &Path) -> io::Result<DateTree> {
    let mut tree = DateTree::default();
    let years = match date_children(sessions_root, DateLevel::Year) {
        Ok(y) => y,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(tree),
        Err(e) => return Err(e),
    };
    for (_, name, path) in years {
        let Some(year) = look(&mut tree, path, format!("{name}/"), DateLevel::Year) else {
            continue;
        };
        let (path, rel) = (year.path.clone(), year.rel.clone());
        tree.dirs.push(year);
        walk_level(&mut tree, &path, &rel, DateLevel::Month);
    }
    tree.dirs.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(tree)
}

/// One run file of a day directory with its `lstat`, from [`list_day_files`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DayRunFile {
    /// Full path.
    pub path: PathBuf,
    /// Relative to the sessions root (`2026/11/30/<run_id>.jsonl`): the day's `rel` and the
    /// file name.
    pub rel: String,
    /// Size in bytes (of the compressed file for `.jsonl.zst`).
    pub size: u64,
    /// Modification time (`None` where the platform has none).
    pub modified: Option<SystemTime>,
    /// Whether this is an archived `.jsonl.zst`.
    pub compressed: bool,
    /// When the file was looked at (wall clock, just before its `lstat`).
    pub looked_at: SystemTime,
}

/// The result of [`list_day_files`].
#[derive(Debug, Default)]
pub struct DayFiles {
    /// Regular files named `<run_id>.jsonl` or `<run_id>.jsonl.zst`, in `rel` order.
    pub files: Vec<DayRunFile>,
    /// Run files whose `lstat` failed (other than vanishing), with the OS error.
    pub failed: Vec<(PathBuf, io::Error)>,
}

/// Lists one day directory (`dir`, whose path relative to the sessions root is `rel`, with a
/// trailing `/`): one `readdir` pass and one `lstat` per run file name; symbolic links and other
/// non-regular entries are ignored, as [`list_day`](super::list_day) ignores them.
///
/// # Errors
/// The I/O error of `readdir` (`NotFound` when the directory vanished).
pub fn list_day_files(dir: &Path, rel: &str) -> io::Result<DayFiles> {
    let mut out = DayFiles::default();
    for entry in fs::read_dir(dir)? {
        let Ok(entry) = entry else { continue };
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some((_, compressed)) = parse_run_file_name(name) else {
            continue;
        };
        let looked_at = SystemTime::now();
        match entry.metadata() {
            Ok(md) if md.is_file() => out.files.push(DayRunFile {
                path: entry.path(),
                rel: format!("{rel}{name}"),
                size: md.len(),
                modified: md.modified().ok(),
                compressed,
                looked_at,
            }),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => out.failed.push((entry.path(), e)),
        }
    }
    out.files.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(out)
}

/// One run file of a day directory as its directory entry names it, from [`list_day_names`]:
/// no `lstat`, so no size or time (a reader that opens the file takes them from the `fstat`
/// of the open descriptor).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DayRunName {
    /// Full path.
    pub path: PathBuf,
    /// Relative to the sessions root (`2026/11/30/<run_id>.jsonl`).
    pub rel: String,
    /// Whether this is an archived `.jsonl.zst`.
    pub compressed: bool,
}

/// The result of [`list_day_names`].
#[derive(Debug, Default)]
pub struct DayNames {
    /// Entries named `<run_id>.jsonl` or `<run_id>.jsonl.zst` that are regular files, in
    /// `rel` order.
    pub files: Vec<DayRunName>,
    /// Run file names whose type could not be told (other than vanishing), with the OS error.
    pub failed: Vec<(PathBuf, io::Error)>,
}

/// Lists one day directory as [`list_day_files`] does, for a caller that opens every file
/// anyway (a rebuild of the whole index, a check of every run): one `readdir` pass and no
/// `lstat`. Regular files are told by the entry's type, which `readdir` returns on Linux,
/// the BSDs and macOS for the common file systems (`d_type`); where it is unknown
/// (`DT_UNKNOWN`) the entry is looked at with `lstat`. Symbolic links and other non-regular
/// entries are ignored.
///
/// # Errors
/// The I/O error of `readdir` (`NotFound` when the directory vanished).
pub fn list_day_names(dir: &Path, rel: &str) -> io::Result<DayNames> {
    let mut out = DayNames::default();
    for entry in fs::read_dir(dir)? {
        let Ok(entry) = entry else { continue };
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some((_, compressed)) = parse_run_file_name(name) else {
            continue;
        };
        match entry.file_type() {
            Ok(t) if t.is_file() => out.files.push(DayRunName {
                path: entry.path(),
                rel: format!("{rel}{name}"),
                compressed,
            }),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => out.failed.push((entry.path(), e)),
        }
    }
    out.files.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_date_rule_accepts_unpadded_names_and_refuses_zero_and_overflow() {
        assert_eq!(DateLevel::Year.accepts("2026"), Some(2026));
        assert_eq!(DateLevel::Year.accepts("26"), Some(26));
        assert_eq!(DateLevel::Year.accepts("0000"), None);
        assert_eq!(DateLevel::Year.accepts("12345"), None);
        assert_eq!(DateLevel::Month.accepts("2"), Some(2));
        assert_eq!(DateLevel::Month.accepts("02"), Some(2));
        assert_eq!(DateLevel::Month.accepts("011"), None);
        assert_eq!(DateLevel::Month.accepts("13"), None);
        assert_eq!(DateLevel::Month.accepts("00"), None);
        assert_eq!(DateLevel::Day.accepts("31"), Some(31));
        assert_eq!(DateLevel::Day.accepts("32"), None);
        assert_eq!(DateLevel::Day.accepts("x1"), None);
        assert_eq!(DateLevel::Day.accepts("+1"), None);
        assert_eq!(DateLevel::Day.accepts(""), None);
    }

    #[test]
    fn the_stat_walk_finds_the_days_the_newest_first_walk_finds() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for d in [
            "2026/11/30",
            "2026/2/3",
            "2026/02/03",
            "2025/12/31",
            "0000/01/01",
            "2026/13/01",
            "2026/11/32",
            "2026/011/30",
            "messages",
        ] {
            fs::create_dir_all(root.join(d)).unwrap();
        }
        for f in [
            "2026/11/30/a.jsonl",
            "2026/11/30/b.jsonl.zst",
            "2026/11/30/n.txt",
        ] {
            fs::write(root.join(f), b"{}\n").unwrap();
        }
        fs::write(root.join("2027"), b"not a directory").unwrap();
        let tree = stat_date_tree(root).unwrap();
        assert!(tree.unlisted.is_empty());
        let rels: Vec<(&str, u8)> = tree
            .dirs
            .iter()
            .map(|d| (d.rel.as_str(), d.level.depth()))
            .collect();
        assert_eq!(
            rels,
            [
                ("2025/", 1),
                ("2025/12/", 2),
                ("2025/12/31/", 3),
                ("2026/", 1),
                ("2026/02/", 2),
                ("2026/02/03/", 3),
                ("2026/11/", 2),
                ("2026/11/30/", 3),
                ("2026/2/", 2),
                ("2026/2/3/", 3),
            ]
        );
        let mut ours: Vec<PathBuf> = tree
            .dirs
            .iter()
            .filter(|d| d.level == DateLevel::Day)
            .map(|d| d.path.clone())
            .collect();
        ours.sort();
        let mut theirs: Vec<PathBuf> = super::super::day_dirs_newest_first(root)
            .unwrap()
            .map(|d| d.path)
            .collect();
        theirs.sort();
        assert_eq!(ours, theirs);
        let day = tree.dirs.iter().find(|d| d.rel == "2026/11/30/").unwrap();
        let files = list_day_files(&day.path, &day.rel).unwrap();
        let rels: Vec<(&str, bool, u64)> = files
            .files
            .iter()
            .map(|f| (f.rel.as_str(), f.compressed, f.size))
            .collect();
        assert_eq!(
            rels,
            [
                ("2026/11/30/a.jsonl", false, 3),
                ("2026/11/30/b.jsonl.zst", true, 3)
            ]
        );
        assert!(files.failed.is_empty());
        let names = list_day_names(&day.path, &day.rel).unwrap();
        let named: Vec<(&str, bool)> = names
            .files
            .iter()
            .map(|f| (f.rel.as_str(), f.compressed))
            .collect();
        assert_eq!(
            named,
            [
                ("2026/11/30/a.jsonl", false),
                ("2026/11/30/b.jsonl.zst", true)
            ]
        );
    }

    #[test]
    fn a_missing_root_is_an_empty_tree() {
        let dir = tempfile::tempdir().unwrap();
        let tree = stat_date_tree(&dir.path().join("absent")).unwrap();
        assert!(tree.dirs.is_empty() && tree.unlisted.is_empty());
    }
}
