//! The thin, fallible edge: reading runs through session-jsonl (and, for sessions, finding
//! them through session-state's run index) and handing them to the pure functions.
//!
//! Runs come back as they were read, session-schema's [`RunRead`] (the one type for a run read
//! whole), which the pure functions take as it is. Damage inside a file is not an error here
//! either: it stays in [`RunRead::damage`] and becomes [`Diagnostic`]s beside the run
//! ([`verify_run`]). Only failures to read at all are [`Error`]s.

use std::path::{Path, PathBuf};

use session_schema::{RunRead, Timestamp};

use crate::diagnostic::{Diagnostic, DiagnosticKind};
use crate::history::{HistoryOptions, SessionHistory};
use crate::run::{RunMeta, verify_run};

pub mod search;

/// Why a run or session could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A run file could not be opened or read.
    #[error("cannot read run log {}", path.display())]
    ReadRun {
        /// The run file.
        path: PathBuf,
        /// The underlying failure (with the line and byte offset where reading stopped).
        #[source]
        source: session_jsonl::JsonlError,
    },
    /// A run could not be found under the sessions root (unsafe id, no such file, or the tree
    /// could not be listed).
    #[error("cannot find run {run_id} under {}", root.display())]
    FindRun {
        /// The run id.
        run_id: String,
        /// The sessions root searched.
        root: PathBuf,
        /// The underlying failure.
        #[source]
        source: session_jsonl::JsonlError,
    },
    /// The session-state run index could not be queried.
    #[error("cannot look up the runs of session {session_id}")]
    RunIndex {
        /// The session id.
        session_id: String,
        /// The underlying failure (carries the database path; boxed, it is large).
        #[source]
        source: Box<session_state::StateError>,
    },
    /// The search index (`search.db`) or the run index it is compared with failed.
    #[error("cannot bring the search index up to date")]
    SearchIndex {
        /// The underlying failure (carries the database path; boxed, it is large).
        #[source]
        source: Box<session_state::StateError>,
    },
}

impl Error {
    fn search(e: session_state::StateError) -> Error {
        Error::SearchIndex {
            source: Box::new(e),
        }
    }
}

/// Reads one run file (`.jsonl` or `.jsonl.zst`) whole, with the diagnostics of
/// [`verify_run`] (structure, skipped lines, the reader's repairs).
///
/// # Errors
/// [`Error::ReadRun`] when the file cannot be opened or read.
pub fn read_run(path: &Path) -> Result<(RunRead, Vec<Diagnostic>), Error> {
    let read = session_jsonl::read_run(path).map_err(|source| Error::ReadRun {
        path: path.to_owned(),
        source,
    })?;
    let diags = verify_run(&read);
    Ok((read, diags))
}

/// Finds run `run_id` under `sessions_root` (using `started_at` as the date hint when known)
/// and reads it. Further files with the same id are reported as
/// [`DiagnosticKind::HeaderProblem`] diagnostics naming them.
///
/// # Errors
/// [`Error::FindRun`] (unsafe id, not found) or [`Error::ReadRun`].
pub fn find_and_read_run(
    sessions_root: &Path,
    run_id: &str,
    started_at: Option<&Timestamp>,
) -> Result<(RunRead, Vec<Diagnostic>), Error> {
    let found = session_jsonl::find_run(sessions_root, run_id, started_at).map_err(|source| {
        Error::FindRun {
            run_id: run_id.to_owned(),
            root: sessions_root.to_owned(),
            source,
        }
    })?;
    let read = session_jsonl::read_run(&found.path).map_err(|source| Error::ReadRun {
        path: found.path.clone(),
        source,
    })?;
    let mut diags = verify_run(&read);
    for dup in &found.duplicates {
        diags.push(
            Diagnostic::warning(
                DiagnosticKind::HeaderProblem,
                format!("another file has the same run id: {}", dup.display()),
            )
            .in_run(Some(run_id)),
        );
    }
    Ok((read, diags))
}

/// Reads the runs named by `metas` (from a run index) under `sessions_root`, skipping none: a
/// run that cannot be found or read is returned in the error list with its id, and the others
/// are still read. Each run names itself ([`RunMeta::of`]: its header, its `run.start`, its
/// file name), as the index took its row from the same records.
pub fn read_runs(
    sessions_root: &Path,
    metas: &[RunMeta],
) -> (Vec<RunRead>, Vec<Diagnostic>, Vec<Error>) {
    let mut runs = Vec::with_capacity(metas.len());
    let mut diags = Vec::new();
    let mut errors = Vec::new();
    for meta in metas {
        match find_and_read_run(sessions_root, &meta.run_id, Some(&meta.started_at)) {
            Ok((run, d)) => {
                runs.push(run);
                diags.extend(d);
            }
            Err(e) => errors.push(e),
        }
    }
    (runs, diags, errors)
}

/// The conventional path of a run named by `meta` (`<root>/YYYY/MM/DD/<run_id>.jsonl`), for
/// messages about a run not read (a run read keeps its own, [`RunRead::path`]).
///
/// # Errors
/// [`Error::FindRun`] when the run id is not safe as a file name.
pub fn conventional_path(sessions_root: &Path, meta: &RunMeta) -> Result<PathBuf, Error> {
    session_jsonl::run_path(sessions_root, &meta.run_id, &meta.started_at).map_err(|source| {
        Error::FindRun {
            run_id: meta.run_id.clone(),
            root: sessions_root.to_owned(),
            source,
        }
    })
}

/// The meta of an indexed run (`started_at` missing in the index reads as the epoch, which
/// orders it first, as the reference's string sort puts an empty `started_at` first).
pub fn run_meta_from_row(row: &session_state::RunRow) -> RunMeta {
    RunMeta {
        run_id: row.run_id.clone(),
        session_id: row.session_id.clone(),
        started_at: row
            .started_at
            .as_deref()
            .map(Timestamp::from_raw)
            .unwrap_or_else(|| Timestamp::from_raw("")),
    }
}

/// The newest `max_runs` runs of a session, oldest first, found through session-state's run
/// index ([`session_state::RunIndex::runs_for_session`]) and read from the paths it records;
/// no other file of the tree is opened. Each run names itself ([`RunMeta::of`]), as the
/// index took its row from the same records. The index is not refreshed here: call
/// [`session_state::RunIndex::index_runs`] first to pick up runs written since it was last
/// brought up to date.
///
/// A run that is indexed but can no longer be read is left out and reported as a
/// [`DiagnosticKind::UnreadableRun`] warning (the reference skips unreadable files silently).
///
/// # Errors
/// [`Error::RunIndex`] when the index cannot be queried.
pub fn session_runs(
    store: &session_state::StateStore,
    session_id: &str,
    max_runs: usize,
) -> Result<(Vec<RunRead>, Vec<Diagnostic>), Error> {
    let rows = store
        .run_index()
        .runs_for_session(session_id)
        .map_err(|source| Error::RunIndex {
            session_id: session_id.to_owned(),
            source: Box::new(source),
        })?;
    let skip = rows.len().saturating_sub(max_runs);
    let mut runs = Vec::with_capacity(rows.len() - skip);
    let mut diags = Vec::new();
    for row in &rows[skip..] {
        match read_run(&row.path) {
            Ok((run, d)) => {
                runs.push(run);
                diags.extend(d);
            }
            Err(e) => diags.push(
                Diagnostic::warning(DiagnosticKind::UnreadableRun, error_chain(&e))
                    .in_run(Some(&row.run_id)),
            ),
        }
    }
    Ok((runs, diags))
}

/// `session.history` for a session of `store` (see [`crate::session_history`]): the runs come
/// from the run index ([`session_runs`]), at most `options.max_runs` of them.
///
/// # Errors
/// [`Error::RunIndex`] when the index cannot be queried.
pub fn session_history(
    store: &session_state::StateStore,
    session_id: &str,
    options: HistoryOptions,
) -> Result<(SessionHistory, Vec<Diagnostic>), Error> {
    let (runs, diags) = session_runs(store, session_id, options.max_runs)?;
    Ok((crate::history::session_history(&runs, options), diags))
}

/// An error and its sources as one line (`a: b: c`).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}
