//! PostgreSQL backend of the session store: [`PgBackend`] implements
//! [`RunCatalogue`](session_storage::RunCatalogue) and
//! [`SessionStore`](session_storage::SessionStore) (with session leases) on PostgreSQL 14 or
//! newer, so that a team or a fleet of workers shares one durable store.
//!
//! * **Byte-exact.** Run lines are `bytea` rows keyed by `(run_id, byte_offset)` (the run
//!   id as its 8-byte `run_key`); session
//!   messages are `bytea` rows. Nothing is ever stored as `jsonb` or `text` (which refuse NUL
//!   and invalid UTF-8, reorder keys and drop duplicates). Derived columns (record type, ts,
//!   session, outcome, model, tokens, workspace, origin host) come from the workspace's own
//!   tolerant parser, so a damaged line is stored and flagged, never refused.
//! * **Threads.** The synchronous `postgres` client panics on a tokio worker thread, so a call
//!   made on a thread in a runtime's context is handed to a thread of the pool; any other
//!   call uses its pooled connection on the caller's thread (no thread switch). The backend
//!   may be called from any thread, `async` code included (it blocks the calling thread for
//!   the call).
//! * **Migrations** ([`schema`]) are numbered and applied in one transaction under
//!   `pg_advisory_xact_lock`, safe when many processes start at once.
//! * **Leases** are session-level advisory locks held by a connection of their own: a dead
//!   holder's lease ends with its connection.
//! * **Search** ([`PgBackend::search`], [`session_storage::RunSearch`]): the documents of
//!   session-replay's extraction, written with the lines and messages they come from, in a
//!   `tsvector` (words) and a `pg_trgm` (substrings) index; [`PgBackend::reindex_search`]
//!   indexes a store from before migration 3.
//! * **Retention**: [`PgBackend::gc`] by age, with a dry run and an audit table.
//!
//! Layer: beside session-storage's local backend, above session-jsonl, session-schema and
//! session-replay's pure core (search extraction, without its `io` feature);
//! never links SQLite. Never prints, never panics on stored data.
//!
//! A worker appending to a run, resuming a session under its lease and pruning old history
//! (`examples/shared_store.rs`, the crate README's example; it needs a server at the URL it
//! names, so it is compiled here, not run):
//!
//! ```no_run
#![doc = include_str!("../examples/shared_store.rs")]
//! ```

mod backend;
mod config;
mod derive;
mod error;
mod gc;
mod known;
mod lease;
mod lookup;
mod pool;
mod runs;
pub mod schema;
mod search;
mod sessions;
mod text;
#[cfg(feature = "tls")]
mod tls;

pub use backend::{PgBackend, PgOptions};
pub use config::{PgConfig, SslMode, looks_like_connection_string};
pub use error::PgError;
pub use gc::{GcAuditRow, GcItem, GcKind, GcReport};
pub use lookup::{PrefixMatch, PrefixMatches};
pub use runs::{FINGERPRINT_BATCH, RunFingerprint};
pub use search::{RANK_WINDOW, SearchReindexReport, WORDS_PREFIX_CHARS};
pub use text::normalize_workspace_root;

/// The environment variable that names the shared store for the `sessions` command line
/// (`SESSIONS_STORE=postgresql:///sessions?host=/run/postgresql`).
pub const STORE_ENV: &str = "SESSIONS_STORE";
