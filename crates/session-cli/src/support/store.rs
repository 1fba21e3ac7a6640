//! Glue between the commands and the library layers: finding runs and sessions, reading run
//! files whole (session-schema's `RunRead`, which session-replay takes as it is), and turning
//! library errors into exit codes.

use std::path::{Path, PathBuf};

use session_replay::{RunMeta, RunRead};
use session_state::RunRow;

use crate::Ctx;
use crate::error::{CliError, one_line};
use crate::support::lib_errors::jsonl_err;
use crate::support::paths::rel;

/// The file of run `id`. When several files hold the run (another date directory, a copy,
/// a plain file beside its archive), the most complete one ([`session_jsonl::rank_files`]),
/// and one warning says which file is used and names every other one.
///
/// The run index is asked first (read-only, one look-up by run id): only the date
/// directories of the files it names, and the days beside them, are looked at
/// ([`session_jsonl::find_run_in_dirs_of`]), so the cost does not grow with the store.
/// When the index has no row for the id, names only files that are gone, or cannot be read
/// (no `state.db`, an older or damaged one), every date directory is probed by name
/// ([`session_jsonl::find_run`]).
///
/// `-` is the newest run of the current directory's workspace, and an id that names no run
/// is expanded as a unique prefix of one ([`crate::support::ids`]); [`locate_run_exact`] does
/// neither.
///
/// # Errors
/// Not found (3) when no file has that id (or prefix); usage (2) for an id that is not a safe
/// file name or a prefix of several run ids.
pub(crate) fn locate_run(ctx: &mut crate::Ctx<'_>, id: &str) -> Result<PathBuf, CliError> {
    use crate::support::ids::{self, Want};
    ids::check(id, Want::Run)?;
    if id == ids::NEWEST {
        let (_, full) = ids::newest(ctx, Want::Run)?;
        return locate_run_exact(ctx, &full);
    }
    if let Some((_, full)) = ids::lookup_indexed(ctx, id, Want::Run)? {
        return locate_run_exact(ctx, &full);
    }
    match locate_run_exact(ctx, id) {
        Err(CliError::NotFound(_)) => match ids::expand(ctx, id, Want::Run)? {
            Some((_, full)) => locate_run_exact(ctx, &full),
            None => Err(ids::not_found(ctx, id, Want::Run)),
        },
        other => other,
    }
}

/// [`locate_run`] for a whole run id (no `-`, no prefix).
///
/// # Errors
/// Not found (3) when no file has that id; usage (2) for an id that is not a safe file name.
pub(crate) fn locate_run_exact(ctx: &mut crate::Ctx<'_>, id: &str) -> Result<PathBuf, CliError> {
    let root = ctx.root.path.clone();
    let indexed = indexed_run_files(&root, id);
    let found = match session_jsonl::find_run_in_dirs_of(&root, id, &indexed).map_err(jsonl_err)? {
        Some(found) => found,
        None => session_jsonl::find_run(&root, id, None).map_err(jsonl_err)?,
    };
    if !found.duplicates.is_empty() {
        ctx.warn(&duplicate_warning(&root, id, &found.ranking));
    }
    Ok(found.path)
}

/// The files the run index names for run `id`; none when there is no `state.db` or it cannot
/// be read (the index only speeds the search up; the caller falls back to probing the tree).
fn indexed_run_files(root: &Path, id: &str) -> Vec<PathBuf> {
    if !root.join("state.db").is_file() {
        return Vec::new();
    }
    session_state::StateStore::open_read_only(root)
        .and_then(|store| store.run_index().run_files_of(id))
        .unwrap_or_default()
}

/// `run ID is in N files; using A (…) over B (…), C (…); `sessions verify` names the others
/// as duplicates`, from files ranked most complete first.
pub(crate) fn duplicate_warning(
    root: &Path,
    id: &str,
    ranked: &[session_jsonl::Completeness],
) -> String {
    let describe =
        |c: &session_jsonl::Completeness| format!("{} ({})", rel(root, &c.path), c.describe());
    let others: Vec<String> = ranked.iter().skip(1).map(describe).collect();
    format!(
        "run {id} is in {} files; using the most complete, {}, over {}; `sessions verify` names \
         the others as duplicates",
        ranked.len(),
        ranked.first().map(describe).unwrap_or_default(),
        others.join(", ")
    )
}

/// [`locate_run_exact`] for an argument that may name a run: `None` for unsafe ids and
/// unknown runs.
///
/// # Errors
/// Data (4) when the store cannot be searched.
pub(crate) fn try_locate_run(
    ctx: &mut crate::Ctx<'_>,
    id: &str,
) -> Result<Option<PathBuf>, CliError> {
    match locate_run_exact(ctx, id) {
        Ok(p) => Ok(Some(p)),
        Err(CliError::NotFound(_) | CliError::Usage(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// A run read whole (from a file or a storage backend) with its identity. `verify` does not
/// read runs whole: it streams them through session-replay's `RunChecker`.
pub(crate) struct LoadedRun {
    /// The run as read: records with their positions, the reader's damage reports in file
    /// order, and the bytes of content read (the file's size, decompressed for an archive).
    pub(crate) read: RunRead,
    /// The run's identity ([`RunMeta::of`]).
    pub(crate) meta: RunMeta,
}

impl LoadedRun {
    /// The run and its identity.
    fn from_read(read: RunRead) -> LoadedRun {
        LoadedRun {
            meta: RunMeta::of(&read),
            read,
        }
    }

    /// `line N, byte offset M` of record `index`, when known.
    pub(crate) fn position(&self, index: usize) -> Option<(u64, u64)> {
        self.read.records.get(index).map(|r| (r.line, r.offset))
    }
}

/// Reads the run file at `path` (`.jsonl` or `.jsonl.zst`) whole. Commands that only copy
/// records or need one pass stream instead (`commands::stream`).
///
/// # Errors
/// Data/IO (4) naming the file, line and byte offset when a read fails.
pub(crate) fn load_run_file(path: &Path) -> Result<LoadedRun, CliError> {
    let read = session_jsonl::read_run_with(path, session_jsonl::ReaderOptions::default())
        .map_err(jsonl_err)?;
    Ok(LoadedRun::from_read(read))
}

/// [`load_run_file`] for a run of either kind of store: a file, or a run of a catalogue read
/// whole through the same tolerant reader.
///
/// # Errors
/// As [`load_run_file`]; not found (3) for a stored run that is gone.
pub(crate) fn load_run(src: &crate::backend::RunRef) -> Result<LoadedRun, CliError> {
    let (catalogue, run_id, location) = match src {
        crate::backend::RunRef::File(path) => return load_run_file(path),
        crate::backend::RunRef::Stored {
            catalogue,
            run_id,
            location,
        } => (catalogue, run_id, location),
    };
    let mut reader = catalogue
        .read_items(
            run_id,
            session_storage::LinePosition::START,
            session_jsonl::ReaderOptions::default(),
        )
        .map_err(|e| crate::support::lib_errors::stored_err(location, e))?;
    let read =
        session_jsonl::RunRead::from_reader(src.display_path(), &mut reader).map_err(|e| {
            CliError::Data(format!(
                "{location}: line {}, byte offset {}: {}",
                reader.next_line(),
                reader.complete_offset(),
                one_line(&e)
            ))
        })?;
    Ok(LoadedRun::from_read(read))
}

/// The runs of a session in `started_at` order (then path), one file per run (the most
/// complete; a warning names the others): from the run index, brought up to date first; on a
/// read-only store, whose index may be stale or missing, from the headers of the run files
/// themselves.
///
/// # Errors
/// Data (4) when the index or the tree cannot be read.
pub(crate) fn session_runs(
    ctx: &mut crate::Ctx<'_>,
    store: &session_state::StateStore,
    session_id: &str,
) -> Result<Vec<PathBuf>, CliError> {
    if store.is_read_only() {
        return session_runs_from_headers(ctx, session_id);
    }
    crate::support::open::refresh_index(ctx, store)?;
    let rows = store
        .run_index()
        .runs_for_session(session_id)
        .map_err(crate::support::open::state_err)?;
    warn_other_files(ctx, &rows);
    Ok(rows.into_iter().map(|r| r.path).collect())
}

/// [`session_runs`] without the index: reads the header (at most 64 KiB) of every run file.
/// Several files of one run (a plain file and its archive, another date directory, a copy)
/// count once: the most complete ([`session_jsonl::rank_files`]), with a warning.
fn session_runs_from_headers(
    ctx: &mut crate::Ctx<'_>,
    session_id: &str,
) -> Result<Vec<PathBuf>, CliError> {
    let root = ctx.root.path.clone();
    let listing = session_jsonl::list_run_files(&root).map_err(jsonl_err)?;
    let bar = crate::progress::Progress::new(
        ctx.progress,
        listing.files.len() as u64,
        "reading run headers",
    );
    let mut found: Vec<(Option<String>, PathBuf)> = Vec::new();
    let mut by_id: std::collections::BTreeMap<String, Vec<PathBuf>> = Default::default();
    for f in &listing.files {
        bar.inc();
        let head = match session_jsonl::read_header(&f.path) {
            Ok(h) => h,
            Err(e) => {
                let msg = format!("{}: header not read: {}", rel(&root, &f.path), one_line(&e));
                ctx.warn(&msg);
                continue;
            }
        };
        if head.facts.session_id.as_deref() != Some(session_id) {
            continue;
        }
        let id = head
            .facts
            .run_id
            .clone()
            .unwrap_or_else(|| f.run_id.clone());
        by_id.entry(id).or_default().push(f.path.clone());
        let started = head.facts.started_at.map(|t| t.as_str().to_owned());
        found.push((started, f.path.clone()));
    }
    bar.finish();
    let mut left_out: std::collections::BTreeSet<PathBuf> = Default::default();
    for (id, paths) in by_id.into_iter().filter(|(_, p)| p.len() > 1) {
        let mut ranked: Vec<session_jsonl::Completeness> = paths
            .iter()
            .map(|p| session_jsonl::Completeness::of_file(p, &id))
            .collect();
        session_jsonl::rank_files(&mut ranked);
        ctx.warn(&duplicate_warning(&root, &id, &ranked));
        left_out.extend(ranked.into_iter().skip(1).map(|c| c.path));
    }
    found.retain(|(_, p)| !left_out.contains(p));
    found.sort();
    Ok(found.into_iter().map(|(_, p)| p).collect())
}

/// One warning per file the listing left out because another file of the same run id is
/// more complete (the index lists one row per run: [`RunRow::other_files`]), naming both.
pub(crate) fn warn_other_files<'a>(ctx: &mut Ctx<'_>, rows: impl IntoIterator<Item = &'a RunRow>) {
    let root = ctx.root.path.clone();
    for row in rows {
        for other in &row.other_files {
            ctx.warn(&format!(
                "{} holds run {} again ({} is counted: it is the more complete file; the run is \
                 counted once; `sessions verify` reports the duplicate)",
                rel(&root, other),
                row.run_id,
                rel(&root, &row.path)
            ));
        }
    }
}
