//! What a reader keeps to be resumed later: the [`ReaderCheckpoint`] it takes, its header
//! decision ([`HeaderProgress`]) and the guarded bytes behind the checkpoint's digests. Used by
//! the reader and by [`resume`](crate::resume), which re-exports the public items.

use serde::{Deserialize, Serialize};

/// What the reader had decided about the header when it stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HeaderProgress {
    /// No record yet: the next record decides whether the file has a header.
    Pending,
    /// The first record was the header.
    Seen,
    /// The first record was not a header ([`DamageKind::MissingHeader`](crate::DamageKind)
    /// was reported).
    Missing,
}

/// Most bytes hashed at each end of a checkpoint's guarded range (the head of the file and the
/// bytes before the offset): 4 KiB, so checking a checkpoint reads at most 8 KiB.
pub const GUARD_LEN: usize = 4 << 10;

/// Where a [`Reader`](crate::Reader) stopped at the end of its last complete (`\n`-terminated) line, and
/// what it needs to go on from there as if it had never stopped ([`Reader::checkpoint`](crate::Reader::checkpoint),
/// [`Reader::resume_run_file`](crate::Reader::resume_run_file)). Serializable, to be kept beside an index row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReaderCheckpoint {
    /// Byte offset just after the last complete line read.
    pub offset: u64,
    /// 1-based number of the line starting at `offset`.
    pub line: u64,
    /// The header decision so far.
    pub header: HeaderProgress,
    /// Whether anything but whitespace came before `offset`.
    pub content_seen: bool,
    /// Bytes at the start of the file covered by `head_digest` (at most [`GUARD_LEN`], at
    /// most `offset`).
    pub head_len: u64,
    /// XXH3-64 of the first `head_len` bytes.
    pub head_digest: u64,
    /// Bytes just before `offset` covered by `guard_digest` (at most [`GUARD_LEN`], at most
    /// `offset`).
    pub guard_len: u64,
    /// XXH3-64 of the `guard_len` bytes ending at `offset`.
    pub guard_digest: u64,
}

/// What a reader keeps to make checkpoints ([`Reader::track_checkpoints`](crate::Reader::track_checkpoints)).
#[derive(Debug, Default)]
pub(crate) struct Track {
    /// The first bytes of the file (at most [`GUARD_LEN`]), when the reader started at 0.
    pub(crate) head: Vec<u8>,
    /// `(len, digest)` of the head carried over from the checkpoint a reader resumed from.
    pub(crate) head_carried: Option<(u64, u64)>,
    /// The last bytes (at most [`GUARD_LEN`]) before the reader's buffer start.
    pub(crate) before_buffer: Vec<u8>,
}

impl Track {
    /// Keeps the last [`GUARD_LEN`] bytes of `before_buffer` followed by `dropped` (bytes the
    /// buffer is about to drop).
    pub(crate) fn dropping(&mut self, dropped: &[u8]) {
        if dropped.len() >= GUARD_LEN {
            self.before_buffer.clear();
            self.before_buffer
                .extend_from_slice(&dropped[dropped.len() - GUARD_LEN..]);
            return;
        }
        self.before_buffer.extend_from_slice(dropped);
        let excess = self.before_buffer.len().saturating_sub(GUARD_LEN);
        self.before_buffer.drain(..excess);
    }

    /// The checkpoint digests for `offset`, given the buffered bytes before it (`buffered`,
    /// which start where `before_buffer` ends).
    pub(crate) fn digests(&self, offset: u64, buffered: &[u8]) -> (u64, u64, u64, u64) {
        let (head_len, head_digest) = match self.head_carried {
            Some(carried) => carried,
            None => {
                let n = self
                    .head
                    .len()
                    .min(usize::try_from(offset).unwrap_or(usize::MAX));
                let head = self.head.get(..n).unwrap_or_default();
                (n as u64, xxhash_rust::xxh3::xxh3_64(head))
            }
        };
        let want = GUARD_LEN.min(usize::try_from(offset).unwrap_or(usize::MAX));
        let guard: Vec<u8> = if buffered.len() >= want {
            buffered[buffered.len() - want..].to_vec()
        } else {
            let from_before = want - buffered.len();
            let start = self.before_buffer.len().saturating_sub(from_before);
            let mut g = self.before_buffer[start..].to_vec();
            g.extend_from_slice(buffered);
            g
        };
        (
            head_len,
            head_digest,
            guard.len() as u64,
            xxhash_rust::xxh3::xxh3_64(&guard),
        )
    }
}
