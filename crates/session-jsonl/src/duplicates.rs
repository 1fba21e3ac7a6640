//! Choosing among several files of one run (a retried start, a clock jump, a copy, a plain file
//! beside its archive): the most complete file is the run, the others are duplicates.
//!
//! The rule, shared by [`find_run`](crate::find_run), the run index of session-state and
//! `sessions verify` so that every command picks the same file:
//!
//! 1. a file that can be read before one that cannot;
//! 2. a file with a terminal record (`run.end` or `run.error`) before one without;
//! 3. more records first;
//! 4. more bytes first (the size on disk);
//! 5. a plain `.jsonl` before an archived `.jsonl.zst`;
//! 6. a file named after the run (`<run_id>.jsonl[.zst]`) before a copy under another name;
//! 7. the caller's order (newest date directory first for [`find_run`](crate::find_run)).

use std::cmp::Ordering;
use std::path::{Path, PathBuf};

use session_schema::Record;

use crate::layout::parse_run_file_name;
use crate::reader::{Item, Reader};

/// How complete one file of a run is. Build with [`Completeness::new`] from known facts or
/// [`Completeness::of_file`] by reading the file.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Completeness {
    /// The file.
    pub path: PathBuf,
    /// Whether it could be read (an unreadable file ranks last).
    pub readable: bool,
    /// Whether it holds a terminal record (`run.end` or `run.error`).
    pub terminal: bool,
    /// Records recovered from it.
    pub records: u64,
    /// Its size on disk in bytes (compressed size for an archive).
    pub size: u64,
    /// Whether it is an archived `.jsonl.zst`.
    pub archived: bool,
    /// Whether its name is `<run_id>.jsonl` or `<run_id>.jsonl.zst` of the run.
    pub named: bool,
}

impl Completeness {
    /// From known facts (a run index row, a file already read); `archived` and `named` come
    /// from `path` and `run_id`.
    pub fn new(path: &Path, run_id: &str, terminal: bool, records: u64, size: u64) -> Self {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let parsed = parse_run_file_name(name);
        Completeness {
            path: path.to_owned(),
            readable: true,
            terminal,
            records,
            size,
            archived: parsed.is_some_and(|(_, zst)| zst),
            named: parsed.is_some_and(|(id, _)| id == run_id),
        }
    }

    /// Reads `path` whole (decompressing an archive) to count its records and look for a
    /// terminal record. A file that cannot be opened or read is `readable: false`.
    pub fn of_file(path: &Path, run_id: &str) -> Self {
        let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let mut c = Completeness::new(path, run_id, false, 0, size);
        let Ok(reader) = Reader::open(path) else {
            c.readable = false;
            return c;
        };
        for item in reader {
            match item {
                Ok(Item::Record(r)) => {
                    c.records += 1;
                    if matches!(r.record(), Record::RunEnd(_) | Record::RunError(_)) {
                        c.terminal = true;
                    }
                }
                Ok(Item::Damage(_)) => {}
                Err(_) => {
                    c.readable = false;
                    break;
                }
            }
        }
        c
    }

    /// A short description for messages: `run.end, 57 records, 12345 bytes` (or `no terminal
    /// record, …`, or `unreadable`).
    pub fn describe(&self) -> String {
        if !self.readable {
            return "unreadable".to_owned();
        }
        format!(
            "{}, {} record(s), {} bytes{}",
            if self.terminal {
                "has its run.end/run.error"
            } else {
                "no run.end"
            },
            self.records,
            self.size,
            if self.archived { ", archived" } else { "" }
        )
    }
}

/// `Less` when `a` is more complete than `b` (ranks first), by the rule in the module docs
/// (steps 1–6; equal otherwise).
pub fn compare(a: &Completeness, b: &Completeness) -> Ordering {
    b.readable
        .cmp(&a.readable)
        .then(b.terminal.cmp(&a.terminal))
        .then(b.records.cmp(&a.records))
        .then(b.size.cmp(&a.size))
        .then(a.archived.cmp(&b.archived))
        .then(b.named.cmp(&a.named))
}

/// Sorts the files of one run most complete first (stable: ties keep the given order).
pub fn rank_files(files: &mut [Completeness]) {
    files.sort_by(compare);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_then_records_then_size_then_plain_then_named() {
        let c = |name: &str, terminal, records, size| {
            Completeness::new(Path::new(name), "r", terminal, records, size)
        };
        let mut files = vec![
            c("a/r.jsonl", false, 1, 100),
            c("b/r.jsonl", false, 9, 900),
            c("c/r.jsonl", true, 3, 300),
            c("d/r.jsonl", false, 9, 950),
        ];
        rank_files(&mut files);
        let order: Vec<_> = files.iter().map(|f| f.path.to_str().unwrap()).collect();
        assert_eq!(order, ["c/r.jsonl", "d/r.jsonl", "b/r.jsonl", "a/r.jsonl"]);

        // Equal content: plain before archive, named before a copy, then the given order.
        let mut files = vec![
            c("x/backup.jsonl", true, 3, 300),
            c("x/r.jsonl.zst", true, 3, 300),
            c("x/r.jsonl", true, 3, 300),
            c("y/r.jsonl", true, 3, 300),
        ];
        rank_files(&mut files);
        let order: Vec<_> = files.iter().map(|f| f.path.to_str().unwrap()).collect();
        assert_eq!(
            order,
            ["x/r.jsonl", "y/r.jsonl", "x/backup.jsonl", "x/r.jsonl.zst"]
        );
        let mut unreadable = c("z/r.jsonl", true, 9, 999);
        unreadable.readable = false;
        assert_eq!(compare(&files[3], &unreadable), Ordering::Less);
    }
}
