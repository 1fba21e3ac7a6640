//! Run files on disk: the layout, a durable append writer and a crash-tolerant streaming reader
//! (spec §2–4, §8–9; compat notes §2.1–2.4, §2.12, §5).
//!
//! Layer: depends only on session-schema (records, ids, timestamps). Never prints, never panics
//! on bad input; every failure is a [`JsonlError`]; damage inside files is data ([`Damage`]).
//!
//! * [`layout`] — `<sessions_root>/YYYY/MM/DD/<run_id>.jsonl`: [`run_path`], [`find_run`],
//!   [`list_run_files`] (newest first, tolerating non-padded directories).
//! * [`scan`] — cheap look-ups: [`read_header`] (first 64 KiB at most) and [`terminal_state`]
//!   (backward scan of the tail).
//! * [`Reader`] — streaming iterator of [`Item`]s (records with offset and line, or [`Damage`]
//!   reports); [`read_run`] reads a whole file. `.jsonl.zst` archives are read transparently.
//! * [`resume`] — [`ReaderCheckpoint`]: go on reading a growing run file from its last
//!   complete line ([`Reader::resume_run_file`]), checked against head and guard digests.
//! * [`skim`] — `llm.request` lines checked for structure without decoding their messages
//!   ([`ReaderOptions::skim_llm_requests`]), for indexes.
//! * [`Follower`] — follow a run that is still being written (`tail -f`).
//! * [`RunWriter`] — one writer per file (advisory lock), header first, one `write` per line,
//!   explicit [`Durability`] including group commit; [`seal_torn_tail`], [`needs_seal`] and
//!   [`is_locked`] for repair and housekeeping tools; [`lock_holders`] names the process
//!   holding a lock (Linux).
//! * [`archive`] — [`compress_run`] into `<run_id>.jsonl.zst`, verified before the original
//!   goes, and back ([`archive::decompress_run`]).
//! * [`duplicates`] — which of several files of one run id is the run ([`rank_files`]).
//! * [`fault`] — the writer's fault-injection seam for tests ([`FaultPlan`]).
//! * [`tally`] — a per-thread count of run files opened and bytes read ([`count_file_reads`]),
//!   for tests that hold a read cost.
//! * [`text`] — lossy decoding of tool output bytes and code-point-safe truncation.
//!
//! ```
//! use session_jsonl::{read_run, Durability, RunWriter, WriterOptions};
//! use session_schema::{Header, Record, RunEnd, Timestamp, RunOutcome};
//!
//! let root = tempfile::tempdir().unwrap();
//! let header = Header {
//!     schema_version: 1,
//!     run_id: "8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a".into(),
//!     started_at: Timestamp::from_raw("2026-02-03T12:00:00.123Z"),
//!     ..Default::default()
//! };
//! let writer = RunWriter::create(root.path(), &header, WriterOptions::with_durability(Durability::SyncData)).unwrap();
//! writer.append(&Record::RunEnd(RunEnd {
//!     run_id: header.run_id.clone(),
//!     ts: Timestamp::now(),
//!     outcome: RunOutcome::Completed,
//!     ..Default::default()
//! })).unwrap();
//! assert!(writer.path().ends_with("2026/02/03/8f1d7b7a-7e8f-4e0f-9a7c-1c5d0e6b2b7a.jsonl"));
//! let path = writer.path().to_owned();
//! drop(writer);
//! let run = read_run(&path).unwrap();
//! assert_eq!(run.records.len(), 2);
//! assert!(run.damage.is_empty());
//! ```

// Stored numbers are never truncated or reinterpreted by an `as` cast: conversions are
// checked (`try_from`) or say what they do (`cast_signed`, `cast_unsigned`); xtask tidy
// checks that these lints stay on in every library crate (test code may cast freely).
#![cfg_attr(
    not(test),
    warn(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_possible_wrap
    )
)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod archive;
mod checkpoint;
pub mod duplicates;
mod error;
pub mod fault;
mod follow;
mod holder;
pub mod layout;
mod names;
mod reader;
pub mod resume;
pub mod scan;
pub mod skim;
pub mod tally;
pub mod text;
#[cfg(all(test, not(feature = "archive")))]
mod without_archive;
mod writer;

#[cfg(feature = "archive")]
#[cfg_attr(docsrs, doc(cfg(feature = "archive")))]
pub use archive::{compress_run, decompress_run};
pub use duplicates::{Completeness, rank_files};
pub use error::{JsonlError, Result};
pub use fault::{Fault, FaultPlan, FileOp};
pub use follow::{FollowOptions, Follower};
pub use holder::{LockHolder, exclusive_holder_pid, lock_holders};
pub use layout::{
    DayDir, DayDirs, FoundRun, RunDate, RunFile, RunIdProbe, RunListing, day_dirs_newest_first,
    find_all_runs, find_run, find_run_in_dirs_of, list_day, list_days_on_threads, list_run_files,
    probe_run_id, run_lookups_on_this_thread, run_path,
};
pub use reader::{
    DEFAULT_MAX_LINE_LEN, DEFAULT_READ_SIZE, Damage, DamageKind, EXCERPT_LEN, INITIAL_READ_BUFFER,
    Item, Reader, ReaderOptions, RecordLine, RunFileReader, RunRead, is_archived, open_run_file,
    read_run, read_run_with,
};
pub use resume::{GUARD_LEN, HeaderProgress, ReaderCheckpoint};
pub use scan::{
    HeadScan, HeaderFacts, RunEndState, TAIL_PROBE, TerminalState, read_head_block, read_header,
    terminal_state, terminal_state_exact, terminal_state_probe,
};
pub use skim::{llm_requests_deserialized_on_this_thread, llm_requests_skimmed_on_this_thread};
pub use tally::{
    FileRead, FileReadCounter, Tally, TallyScope, count_file_reads, counting_file_reads,
    read_buffer_bytes_on_this_thread,
};
pub use writer::{
    DEFAULT_DIR_MODE, DEFAULT_FILE_MODE, Durability, RunWriter, WriterOptions, is_locked,
    needs_seal, seal_torn_tail,
};
