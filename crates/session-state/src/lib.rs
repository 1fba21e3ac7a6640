//! Resumable session state and the run index of the session store (spec §2, §3.1;
//! compat notes §2.5–2.11, §5).
//!
//! Layer: depends on session-schema (types) and session-jsonl (run files); the only crate of
//! the workspace that links SQLite. Never prints, never panics on bad input; every failure is a
//! [`StateError`], damage inside files is data ([`MessageDamage`], [`RunRow::damage_count`]).
//!
//! * [`StateStore`] — `state.db` (the reference's `session_state` table, byte-identical schema,
//!   WAL) + `messages/<session_id>.jsonl` + legacy `state/<session_id>.json`:
//!   [`StateStore::load`] (tolerant, legacy migration), [`StateStore::save`] /
//!   [`StateStore::save_expecting`] (incremental append, crash-consistent, compare-and-swap),
//!   [`StateStore::save_batch`] (many sessions, one commit, each session all-or-nothing),
//!   [`StateStore::list`] (workspace filter, legacy merged, keyset pagination),
//!   [`StateStore::delete`], [`StateStore::migrate_legacy`].
//! * [`summarize`] / [`summarize_lines`] — the summary columns exactly as the reference
//!   computes them (`message_count`, display-mode `last_user_message`, `workspace_root`).
//! * Run index — [`RunIndex`], our own `runs` table in `<root>/state.db`
//!   ([`StateStore::run_index`]), in any SQLite file ([`RunIndex::open_at`]) or in memory
//!   ([`RunIndex::open_in_memory`]): [`RunIndex::index_runs`] (incremental: only day
//!   directories whose mtime changed and runs without `run.end` are looked at, so a warm
//!   refresh costs the same at 100k runs as at 1k; any writer, `.jsonl.zst` too),
//!   [`RunIndex::runs_for_session`], [`RunIndex::list_runs`], [`RunIndex::run_totals`],
//!   [`RunIndex::reindex`] (full deterministic rebuild).
//! * [`StateStore::open_read_only`] — list, load and query a store the user cannot write;
//!   writes return [`StateError::ReadOnly`]. [`StateStore::open_for_reading`] opens for
//!   writing when it can and falls back to that on a full disk, an I/O error, a read-only
//!   mount or missing permission, saying why ([`ReadOnlyFallback`]).
//! * Crash recovery — [`StateStore::recovery`]: what `open` settled (an interrupted rename
//!   completed only when nothing changed since its commit, else its temp file kept aside in
//!   `messages/stale/`; uncommitted bytes a crashed append left cut off). A save that fails
//!   takes back what it wrote.
//! * Values in `state.db` that do not fit their column (the reference's lone surrogates as
//!   invalid UTF-8, BLOBs, NULLs, numbers of the wrong kind) are read lossily and reported as
//!   [`ColumnDamage`], never a failure.
//! * One writer per session — [`StateStore::lease`] ([`SessionLease`], an OS lock that dies
//!   with its process; a second holder gets [`StateError::SessionBusy`] naming the first),
//!   [`StateStore::open_sessions`]; [`StateStore::snapshot`] +
//!   [`StateStore::delete_snapshotted`] for housekeeping (compare-and-swap delete).
//! * A lost `state.db` — [`StateStore::reconstruct_orphans`] rebuilds a row per messages file
//!   without one from the file and the session's run logs; a first save never cuts such a
//!   file ([`StateError::OrphanMessages`]). Store files are never opened through a symbolic
//!   link, never read unless regular, never read past [`MAX_SESSION_FILE_BYTES`].
//!
//! Deviations from the reference (all deliberate, see the crate README): files 0600 and
//! directories 0700; fsync of files and directories; `synchronous=FULL`; `workspace_root`
//! backfilled on open; legacy snapshots migrated under the requested id with type checks;
//! legacy entries merged into the listing order.
//!
//! ```
//! use session_schema::{parse_message, SessionState, Timestamp};
//! use session_state::{ListQuery, StateStore};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let store = StateStore::open(dir.path()).unwrap();
//! let mut state = SessionState {
//!     session_id: "f6d2c6d5-4a12-4cc4-bbc9-9a0c0d2b5af1".into(),
//!     updated_at: Timestamp::from_raw("2026-02-03T12:00:02.900Z"),
//!     messages: vec![parse_message(br#"{"role":"user","content":"list files"}"#).unwrap().value],
//!     ..Default::default()
//! };
//! let first = store.save(&state).unwrap();
//! state.messages.push(parse_message(br#"{"role":"assistant","content":"done"}"#).unwrap().value);
//! let second = store.save_expecting(&state, Some(first.generation)).unwrap();
//! assert_eq!(second.mode, session_state::SaveMode::Appended { messages: 1 });
//!
//! let loaded = store.load(&state.session_id).unwrap().unwrap();
//! assert_eq!(loaded.state.messages, state.messages);
//! let page = store.list(&ListQuery::all().limit(50)).unwrap();
//! assert_eq!(page.entries[0].summary.last_user_message.as_deref(), Some("list files"));
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

mod adopt;
mod batch;
mod column;
mod compact;
mod db;
mod error;
mod fallback;
mod fault_point;
mod faults;
mod fold;
mod fsutil;
mod holder;
mod index;
mod index_read;
mod index_upgrade;
mod labels;
mod lease;
mod lease_check;
mod lease_registry;
mod legacy;
mod list;
mod listing_cost;
mod memindex;
mod messages;
mod partial;
mod pass_cost;
mod pending_base;
mod prefix;
pub mod read_pool;
mod recovery;
mod redigest;
mod resume;
mod row;
mod running_totals;
mod runs;
mod save_cost;
mod search;
mod snapshot;
mod span_totals;
mod store;
mod store_index;
mod stored;
mod summary;
mod totals;
mod tree;
mod types;
mod utc;
mod workspace;

pub use adopt::{ReconstructedRow, Reconstruction, ReconstructionOutcome, ReconstructionReport};
pub use batch::{BatchPolicy, BatchReport, BatchSave, MAX_BATCH_SESSIONS};
pub use column::{ColumnDamage, ColumnDamageKind};
pub use fallback::{ReadOnlyFallback, WriteUnavailable};

pub use error::{Result, StateError};
pub use fault_point::FaultPoint;
pub use fsutil::MAX_SESSION_FILE_BYTES;
pub use holder::{LeaseHolder, LeasePurpose, MAX_LABEL};
pub use index::RunIndex;
pub use labels::SessionLabel;
pub use lease::{LEASE_DIR, OpenSession, SessionLease, UNKNOWN_HOLDER_GRACE};
pub use memindex::{FilesIndexed, RowRead};
pub use partial::{REFRESH_TAIL_PROBE, WHOLE_READ_MAX};
pub use prefix::{IdKind, IdMatch, prefix_upper_bound};
pub use row::{FIRST_INPUT_CHARS, IndexedRunOutcome, RunRow};
pub use runs::{
    IndexReport, ReindexReport, RunChange, RunCursor, RunFileDiagnostic, RunPage, RunQuery,
};
pub use search::{
    HIGHLIGHT_END, HIGHLIGHT_START, IndexedFile, MatchedBy, RANK_WINDOW, SEARCH_DB,
    SEARCH_TRIGRAM_DB, SHORT_SCAN_WINDOW, SearchCounts, SearchDoc, SearchHit, SearchIndex,
    SearchPlan, SearchQuery, SearchWork, SubstringSync, SubstringWriter, legacy_snapshot_key,
    legacy_snapshot_lines, quote_phrases, saved_messages_key, substring_snippet,
};
pub use snapshot::SessionSnapshot;
pub use span_totals::TimeSpan;
pub use store::StateStore;
pub use summary::{
    Summary, display_content_json, summarize, summarize_lines, workspace_root_from_meta,
};
pub use totals::{GroupedRunTotals, RunGrouping, RunTotals};
pub use types::{
    DeferredRename, DeleteReport, EntrySource, Generation, ListCursor, ListDiagnostic, ListEntry,
    ListPage, ListQuery, LoadNote, LoadSource, LoadedSession, MessageDamage, MessageDamageKind,
    MigrationEntry, MigrationOutcome, MigrationReport, Recovery, SaveDurability, SaveMode,
    SaveReport, StaleReason, StoreOptions, WorkspaceFilter,
};
#[doc(hidden)]
pub use types::{FaultHook, IoFault, IoFaultHook, IoStep};
pub use workspace::normalize_workspace_root;
