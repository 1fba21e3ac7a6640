//! Who holds an advisory lock: the processes holding a `flock(2)` lock on a file, read from the
//! kernel's lock table (`/proc/locks`, Linux), so that a lock error can name the holder.
//!
//! A `flock` lock cannot be asked for its owner (unlike POSIX record locks), but Linux lists
//! every lock in `/proc/locks` as `<n>: FLOCK ADVISORY WRITE <pid> <major>:<minor>:<inode> 0 EOF`
//! (major and minor in hex, the inode in decimal; `->` marks a waiter, not a holder). The pid
//! is the process that took the lock, as seen from the reader's pid namespace. On other systems
//! (and when `/proc` is not mounted) nothing is known and the answers are empty.

use std::fs::File;
use std::io::Read;

/// The most of `/proc/locks` that is read (a machine with tens of thousands of locks lists
/// about 50 bytes per lock).
const MAX_LOCK_TABLE: usize = 8 << 20;

/// Bytes asked for by the first `read` of `/proc/locks`: the whole table of a machine with
/// up to ~1,300 locks in one call.
const LOCK_TABLE_FIRST_READ: usize = 64 << 10;

/// Readings of `/proc/locks` before a file is said to have no holder. The kernel produces the
/// table anew for each `read`, from the position of the line it stopped at: when other
/// processes take or let go of locks between two reads (or between the pages of one), the
/// lines after shift and one can be missed or seen twice. The callers ask about a lock they
/// were just refused, so a table without it was torn: it is read again.
const LOCK_TABLE_READINGS: usize = 3;

/// One `flock` lock on a file, as the kernel lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockHolder {
    /// The process that took the lock (in this process's pid namespace).
    pub pid: u32,
    /// An exclusive (`WRITE`) lock; `false` for a shared one (a probe such as
    /// [`is_locked`](crate::is_locked)).
    pub exclusive: bool,
}

/// Every `flock` lock currently held on the file behind `file` (waiters are not holders).
/// Empty when nothing holds one, and always on systems without `/proc/locks`.
pub fn lock_holders(file: &File) -> Vec<LockHolder> {
    let Some((major, minor, ino)) = file_key(file) else {
        return Vec::new();
    };
    holders_read(read_lock_table, major, minor, ino)
}

/// The holders of `(major, minor, ino)` in the tables `read` gives: read again, up to
/// [`LOCK_TABLE_READINGS`] times in all, while a table names none (`None`: no table).
fn holders_read(
    mut read: impl FnMut() -> Option<String>,
    major: u64,
    minor: u64,
    ino: u64,
) -> Vec<LockHolder> {
    for _ in 0..LOCK_TABLE_READINGS {
        let Some(text) = read() else {
            return Vec::new();
        };
        let holders = holders_in(&text, major, minor, ino);
        if !holders.is_empty() {
            return holders;
        }
    }
    Vec::new()
}

/// The text of `/proc/locks` (at most [`MAX_LOCK_TABLE`] bytes), asked for in reads of at
/// least [`LOCK_TABLE_FIRST_READ`] bytes, so that a table of that size comes in one `read`
/// (a `read_to_string` starts with a 32-byte probe, and each further call is a new pass
/// over a table that may have changed). `None` when it cannot be read.
fn read_lock_table() -> Option<String> {
    let mut table = File::open("/proc/locks").ok()?;
    let mut buf = vec![0u8; LOCK_TABLE_FIRST_READ];
    let mut len = 0;
    loop {
        if len == buf.len() {
            if len >= MAX_LOCK_TABLE {
                break;
            }
            buf.resize(len.saturating_mul(2).min(MAX_LOCK_TABLE), 0);
        }
        match table.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    buf.truncate(len);
    String::from_utf8(buf).ok()
}

/// The pid of the process holding an exclusive `flock` lock on `file`, when the kernel says
/// (see [`lock_holders`]).
pub fn exclusive_holder_pid(file: &File) -> Option<u32> {
    lock_holders(file)
        .into_iter()
        .find(|h| h.exclusive)
        .map(|h| h.pid)
}

#[cfg(unix)]
fn file_key(file: &File) -> Option<(u64, u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = file.metadata().ok()?;
    let dev = meta.dev();
    // glibc's `major()`/`minor()` of a `dev_t`.
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    Some((major, minor, meta.ino()))
}

#[cfg(not(unix))]
fn file_key(_file: &File) -> Option<(u64, u64, u64)> {
    None
}

/// The `FLOCK` holders of `(major, minor, ino)` in a `/proc/locks` text. When no line names the
/// device exactly (a file system that reports another device number through `stat`, such as
/// overlayfs or a btrfs subvolume) the inode alone is used, provided that one device holds it.
fn holders_in(text: &str, major: u64, minor: u64, ino: u64) -> Vec<LockHolder> {
    let mut exact = Vec::new();
    let mut by_inode: Vec<((u64, u64), LockHolder)> = Vec::new();
    for line in text.lines() {
        let mut fields = line.split_whitespace().skip(1).peekable();
        if fields.peek() == Some(&"->") {
            continue;
        }
        let (Some("FLOCK"), Some(_advisory), Some(mode), Some(pid), Some(key)) = (
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
        ) else {
            continue;
        };
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        let mut parts = key.split(':');
        let (Some(maj), Some(min), Some(i)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let (Ok(maj), Ok(min), Ok(i)) = (
            u64::from_str_radix(maj, 16),
            u64::from_str_radix(min, 16),
            i.parse::<u64>(),
        ) else {
            continue;
        };
        if i != ino {
            continue;
        }
        let holder = LockHolder {
            pid,
            exclusive: mode == "WRITE",
        };
        if (maj, min) == (major, minor) {
            exact.push(holder);
        } else {
            by_inode.push(((maj, min), holder));
        }
    }
    if !exact.is_empty() {
        return exact;
    }
    let one_device = by_inode.windows(2).all(|w| w[0].0 == w[1].0);
    if one_device {
        by_inode.into_iter().map(|(_, h)| h).collect()
    } else {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "1: FLOCK  ADVISORY  WRITE 8028 fe:00:5374954 0 EOF\n\
        2: FLOCK  ADVISORY  READ 8134 fe:00:10133507 0 EOF\n\
        2: -> FLOCK  ADVISORY  WRITE 9999 fe:00:10133507 0 EOF\n\
        3: POSIX  ADVISORY  WRITE 7000 fe:00:10133507 0 EOF\n\
        4: FLOCK  ADVISORY  WRITE 4242 103:02:77 0 EOF\n";

    /// A table read while other locks came and went may lack the line of the lock asked
    /// about: it is read again, a bounded number of times.
    #[test]
    fn a_table_without_the_lock_is_read_again() {
        let torn = "1: FLOCK  ADVISORY  WRITE 4242 103:02:77 0 EOF\n".to_owned();
        let mut tables = vec![TABLE.to_owned(), torn.clone()];
        let mut reads = 0;
        let found = holders_read(
            || {
                reads += 1;
                tables.pop()
            },
            0xfe,
            0,
            5374954,
        );
        assert_eq!(
            found,
            [LockHolder {
                pid: 8028,
                exclusive: true
            }]
        );
        assert_eq!(reads, 2);
        // No holder in any reading: given up after LOCK_TABLE_READINGS readings.
        let mut reads = 0;
        let none = holders_read(
            || {
                reads += 1;
                Some(torn.clone())
            },
            0xfe,
            0,
            5374954,
        );
        assert!(none.is_empty());
        assert_eq!(reads, LOCK_TABLE_READINGS);
        // No table at all: one attempt.
        let mut reads = 0;
        let no_table = holders_read(
            || {
                reads += 1;
                None
            },
            0xfe,
            0,
            5374954,
        );
        assert!(no_table.is_empty());
        assert_eq!(reads, 1);
    }

    #[test]
    fn holders_are_found_by_device_and_inode_and_waiters_are_not_holders() {
        assert_eq!(
            holders_in(TABLE, 0xfe, 0, 5374954),
            [LockHolder {
                pid: 8028,
                exclusive: true
            }]
        );
        assert_eq!(
            holders_in(TABLE, 0xfe, 0, 10133507),
            [LockHolder {
                pid: 8134,
                exclusive: false
            }]
        );
        assert_eq!(holders_in(TABLE, 0xfe, 0, 1), []);
        // Another device number through `stat` (overlayfs): the inode alone decides.
        assert_eq!(holders_in(TABLE, 0x2d, 0, 77)[0].pid, 4242);
        assert_eq!(holders_in("garbage\n\n1: FLOCK\n", 0xfe, 0, 1), []);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn the_pid_of_this_process_is_named_for_its_own_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let held = File::create(&path).unwrap();
        held.lock().unwrap();
        let other = File::open(&path).unwrap();
        if std::path::Path::new("/proc/locks").exists() {
            assert_eq!(exclusive_holder_pid(&other), Some(std::process::id()));
        }
        held.unlock().unwrap();
        assert_eq!(exclusive_holder_pid(&other), None);
    }
}
