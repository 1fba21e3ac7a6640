//! Who holds a session's lease ([`LeaseHolder`], [`LeasePurpose`]) and the longest label a
//! holder can give ([`MAX_LABEL`]): the lease's vocabulary, apart from the locking in
//! `lease.rs` so that the error type can name a holder without depending on the store.

use std::fmt;

use session_schema::Timestamp;

/// The longest label a holder can give
/// ([`StateStore::lease_labelled`](crate::StateStore::lease_labelled)), in bytes: the note with
/// it stays well within the 4 KiB of a note that are read.
pub const MAX_LABEL: usize = 1024;

/// Why a lease is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeasePurpose {
    /// A runtime has the session open ([`StateStore::lease`](crate::StateStore::lease)), from
    /// resume to its last save.
    Open,
    /// One delete of a caller without a lease, for its own duration (older versions: also
    /// one save; a save now checks the lease under the write lock instead of taking it).
    Write,
    /// A housekeeping step (`sessions gc` snapshotting and deleting the session),
    /// [`StateStore::lease_for_housekeeping`](crate::StateStore::lease_for_housekeeping).
    Housekeeping,
    /// The holder's note could not be read.
    Unknown,
}

impl LeasePurpose {
    /// The word used in the holder note and in messages (`open`, `write`, `housekeeping`,
    /// `unknown`).
    pub fn as_str(self) -> &'static str {
        match self {
            LeasePurpose::Open => "open",
            LeasePurpose::Write => "write",
            LeasePurpose::Housekeeping => "housekeeping",
            LeasePurpose::Unknown => "unknown",
        }
    }

    pub(crate) fn parse(s: &str) -> LeasePurpose {
        match s {
            "open" => LeasePurpose::Open,
            "write" => LeasePurpose::Write,
            "housekeeping" => LeasePurpose::Housekeeping,
            _ => LeasePurpose::Unknown,
        }
    }
}

/// Who holds a session's lease, as far as known.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseHolder {
    /// The holding process (in this process's pid namespace when it came from the kernel).
    pub pid: Option<u32>,
    /// Its host name.
    pub host: Option<String>,
    /// When it took the lease (UTC, `YYYY-MM-DDTHH:MM:SS.mmmZ`).
    pub since: Option<Timestamp>,
    /// Why it holds it.
    pub purpose: LeasePurpose,
    /// Its program name (the file name of its executable as started).
    pub program: Option<String>,
    /// What the holder says about itself beyond the above, as it gave it to
    /// [`StateStore::lease_labelled`](crate::StateStore::lease_labelled) (a worker's name, a
    /// storage client's holder record); `None` for the other ways of taking a lease. At most
    /// [`MAX_LABEL`] bytes.
    pub label: Option<String>,
}

impl fmt::Display for LeaseHolder {
    /// `pid 4242 (sessions) on host build-1 since 2026-11-30T11:39:01.447Z, open`; unknown
    /// parts are left out (`holder unknown` when nothing is known).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        if let Some(pid) = self.pid {
            parts.push(match &self.program {
                Some(p) => format!("pid {pid} ({p})"),
                None => format!("pid {pid}"),
            });
        }
        if let Some(host) = &self.host {
            parts.push(format!("on host {host}"));
        }
        if let Some(since) = &self.since {
            parts.push(format!("since {}", since.as_str()));
        }
        if let Some(label) = &self.label {
            parts.push(format!("as {label:?}"));
        }
        if parts.is_empty() {
            parts.push("holder unknown".to_owned());
        }
        write!(f, "{}, {}", parts.join(" "), self.purpose.as_str())
    }
}
