//! The storage seam of the session store: the two repositories the product has, as traits,
//! so that a second backend (PostgreSQL) plugs in without touching the commands.
//!
//! * [`RunCatalogue`] — run logs: append complete lines with compare-and-swap on the run's
//!   length (retries recognised, never duplicated), read stored bytes exactly or through the
//!   tolerant reader, stat, list with keyset paging and the filters of `sessions runs`.
//! * [`SessionStore`] — resumable sessions: load, save and delete with compare-and-swap on a
//!   [`Version`], list with keyset paging, and an exclusive lease per session
//!   ([`LeaseGuard`]) that ends when its holder dies.
//! * [`RunSearch`] — full-text search over run logs and saved messages, with the query and
//!   hit types every backend shares.
//! * [`local::LocalBackend`] (feature `local`, default) — both, over the local files and
//!   `state.db`, by way of session-jsonl and session-state.
//! * `conformance` (feature `conformance`) — the suite every backend must pass, generic over
//!   the traits.
//!
//! Layer: above session-state and session-jsonl, below session-cli. Never prints, never
//! panics on stored data; every failure is a [`StorageError`] carrying the run or session id,
//! the byte offset where there is one, and the backend's error as `source()`.
#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod catalogue;
mod error;
mod search;
mod session_store;
mod types;

#[cfg(feature = "conformance")]
pub mod conformance;
#[cfg(feature = "local")]
pub mod local;

pub use catalogue::{RunCatalogue, already_present, check_complete_lines};
pub use error::{BoxError, Result, StorageError, Target, checked_id};
pub use search::{
    DOC_KINDS, HIGHLIGHT_END, HIGHLIGHT_START, RunSearch, RunSearchHit, RunSearchQuery,
    SearchMatch, quote_phrases, search_unavailable,
};
/// A run read whole ([`RunCatalogue::read_run`]): session-jsonl's type, the one the whole
/// workspace uses.
pub use session_jsonl::RunRead;
pub use session_store::{LeaseGuard, SessionStore};
#[allow(deprecated)]
pub use types::ParsedRun;
pub use types::{
    Appended, Expected, Extent, HolderInfo, LinePosition, Outcome, PageCursor, RunBytes,
    RunListPage, RunListQuery, RunStat, RunSummary, SessionDamage, SessionListPage,
    SessionListQuery, StoredSession, TokenTotals, Version,
};
