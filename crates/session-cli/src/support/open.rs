//! Opening the store: the `state.db` handle (writable, read-only, or an in-memory index of a
//! read-only store), where a listing's runs come from, bringing the run index and
//! `search.db` up to date, and the message logs beside `state.db`.

use session_state::{SearchIndex, StateError, StateStore};

use crate::Ctx;
use crate::error::{CliError, one_line};
use crate::progress::Progress;
use crate::support::paths::rel;

/// Maps a session-state error: unsafe id → usage (2), bad cursor → usage (2), else data (4).
pub(crate) fn state_err(e: StateError) -> CliError {
    match &e {
        StateError::UnsafeId { .. } | StateError::InvalidCursor { .. } => {
            CliError::Usage(one_line(&e))
        }
        _ => CliError::data(&e),
    }
}

/// [`state_err`] for a failure to open `state.db`, with one actionable hint when the file is
/// damaged beyond SQLite's reading ("file is not a database", "malformed"): what to move
/// aside and what `sessions repair` then rebuilds.
pub(crate) fn open_err(root: &std::path::Path, e: StateError) -> CliError {
    let text = one_line(&e);
    let lower = text.to_ascii_lowercase();
    if lower.contains("not a database") || lower.contains("malformed") {
        let db = root.join("state.db");
        return CliError::Data(format!(
            "{text}; hint: state.db is damaged: move it aside (mv {db} {db}.damaged) and run \
             `sessions repair`, which rebuilds the run index from the run files; the \
             messages/ files and the run files are kept",
            db = db.display()
        ));
    }
    state_err(e)
}

/// Whether the directory `root` holds a session store: a `state.db`, a `messages/` or `state/`
/// folder, or `YYYY/MM/DD` date directories with run files in them. An existing directory
/// without any of these (a home directory, `/`) is not taken for an empty store: opening it
/// would create `state.db`, `messages/` and `state/` there.
pub(crate) fn looks_like_store(root: &std::path::Path) -> bool {
    if ["state.db", "messages", "state"]
        .iter()
        .any(|name| std::fs::symlink_metadata(root.join(name)).is_ok())
    {
        return true;
    }
    session_jsonl::list_run_files(root)
        .is_ok_and(|l| !l.files.is_empty() || !l.nonstandard_dirs.is_empty())
}

/// Not found (3) when the root is not a directory or holds no session store (see
/// [`looks_like_store`]): commands never create a store where there was none.
pub(crate) fn check_root(ctx: &Ctx<'_>) -> Result<(), CliError> {
    let root = &ctx.root.path;
    if root.is_dir() && looks_like_store(root) {
        return Ok(());
    }
    let why = if root.is_dir() {
        "the directory has no state.db, messages/, state/ or YYYY/MM/DD run folders"
    } else {
        "no such directory"
    };
    Err(CliError::NotFound(format!(
        "no session store at {} ({why}; {}); pass --root DIR or see `sessions where`",
        root.display(),
        ctx.root.source
    )))
}

/// Opens the store at the root for a command that changes it (`repair`, `gc`, `archive`,
/// `reindex` without `--dry-run`). Opening migrates `state.db` to the current layout.
///
/// # Errors
/// Not found (3); usage (2) under `--read-only`; data (4) when `state.db` cannot be opened.
pub(crate) fn open_store(ctx: &mut Ctx<'_>) -> Result<StateStore, CliError> {
    check_root(ctx)?;
    if ctx.read_only {
        return Err(CliError::Usage(
            "--read-only: this command changes the store (use --dry-run to see the plan)".into(),
        ));
    }
    let store = StateStore::open(&ctx.root.path).map_err(|e| open_err(&ctx.root.path, e))?;
    warn_recovery(ctx, &store);
    Ok(store)
}

/// One warning per thing `open` found left behind by an interrupted save and settled (an
/// interrupted rename completed, a stale temp file kept aside, uncommitted bytes cut).
fn warn_recovery(ctx: &mut Ctx<'_>, store: &StateStore) {
    for r in store.recovery() {
        let msg = format!("state store recovery: {r}");
        ctx.warn(&msg);
    }
}

/// Opens the store read-only, for commands and dry runs that change nothing: no file under
/// the root is created, migrated or written (not even `state.db`'s bookkeeping tables).
///
/// # Errors
/// Not found (3), or data (4) when `state.db` exists but cannot be read.
pub(crate) fn open_store_read_only(ctx: &Ctx<'_>) -> Result<StateStore, CliError> {
    check_root(ctx)?;
    check_db_is_file(ctx)?;
    StateStore::open_read_only(&ctx.root.path).map_err(|e| open_err(&ctx.root.path, e))
}

/// How a reading command uses the run index, for [`open_store_for_reading`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IndexUse {
    /// The index only finds a session's runs; on a read-only store they are found from the
    /// run files' headers instead (`show`, `history`, `export` of a session).
    FindsRuns,
}

/// What `runs` and `stats` say about an index they cannot bring up to date.
const STALE: &str =
    "the run index may be stale (runs written since it was last updated are missing)";

/// Opens the store for a reading command that keeps the run index up to date: writable when
/// possible (the refresh writes the index in `state.db`); read-only under `--read-only`, or
/// when the store cannot be written (another user's store, a read-only mount, a full disk,
/// an I/O error: [`StateStore::open_for_reading`]). Returns the store and, when it was opened
/// read-only, why (`--read-only`, or the write failure with its typed reason), for the
/// caller's one warning line.
///
/// # Errors
/// As [`open_store_read_only`]; data (4) when a writable open fails for another reason.
pub(crate) fn open_reading(ctx: &mut Ctx<'_>) -> Result<(StateStore, Option<String>), CliError> {
    check_root(ctx)?;
    if ctx.read_only {
        return Ok((open_store_read_only(ctx)?, Some("--read-only".into())));
    }
    check_db_is_file(ctx)?;
    match StateStore::open_for_reading(&ctx.root.path) {
        Ok((store, fallback)) => {
            warn_recovery(ctx, &store);
            Ok((store, fallback.map(|f| f.to_string())))
        }
        Err(e) => Err(open_err(&ctx.root.path, e)),
    }
}

/// Data (4) when `state.db` is there but is no file (a directory, a socket): it cannot be the
/// database, and a read-only open would take it for a store without one.
fn check_db_is_file(ctx: &Ctx<'_>) -> Result<(), CliError> {
    let db = ctx.root.path.join("state.db");
    if let Ok(m) = std::fs::metadata(&db)
        && !m.is_file()
    {
        return Err(CliError::Data(format!(
            "{}: not a regular file, cannot be read as the state database",
            db.display()
        )));
    }
    Ok(())
}

/// [`open_reading`] for a command whose index use is `index`, warning (one line) when the
/// store cannot be written; `--read-only` is asked for and needs no warning.
///
/// # Errors
/// As [`open_reading`].
pub(crate) fn open_store_for_reading(
    ctx: &mut Ctx<'_>,
    index: IndexUse,
) -> Result<StateStore, CliError> {
    let IndexUse::FindsRuns = index;
    let (store, why) = open_reading(ctx)?;
    if let Some(why) = why
        && !ctx.read_only
    {
        ctx.warn(&why);
    }
    Ok(store)
}

/// Where `runs`, `stats` and the viewer's listings find runs.
pub(crate) enum RunSource {
    /// The store's own run index.
    Index(StateStore),
    /// An empty run index in memory ([`StateStore::open_memory_index`]) for the caller to fill
    /// from the run files: the store is read-only and its index is missing or empty while day
    /// directories exist.
    Files(StateStore),
}

/// Decides where runs come from for a store opened by [`open_reading`]: the store's index
/// when it is writable (brought up to date by [`refresh_index`]) or read-only with rows (one
/// warning: it may be stale, and why it was opened read-only); otherwise, when the run tree
/// has day directories, an empty run index in memory, with one warning line saying the
/// answer comes from the run files themselves. Nothing is written anywhere: no temporary
/// directory, no link or copy of a run file.
///
/// # Errors
/// Data (4) when the run tree cannot be looked at or the in-memory index cannot be set up.
// RunQuery is non_exhaustive, so it cannot be built with a struct literal outside its crate.
#[allow(clippy::field_reassign_with_default)]
pub(crate) fn run_source(
    ctx: &mut Ctx<'_>,
    store: StateStore,
    why: Option<String>,
) -> Result<RunSource, CliError> {
    let stale = |ctx: &mut Ctx<'_>, why: Option<String>| {
        if let Some(why) = why {
            ctx.warn(&format!("{why}: {STALE}"));
        }
    };
    if !store.is_read_only() {
        return Ok(RunSource::Index(store));
    }
    let mut probe = session_state::RunQuery::default();
    probe.limit = Some(1);
    if store.list_runs(&probe).is_ok_and(|p| !p.runs.is_empty()) {
        stale(ctx, why);
        return Ok(RunSource::Index(store));
    }
    let root = ctx.root.path.clone();
    let has_days = session_jsonl::day_dirs_newest_first(&root)
        .map_err(crate::support::lib_errors::jsonl_err)?
        .next()
        .is_some();
    if !has_days {
        stale(ctx, why);
        return Ok(RunSource::Index(store));
    }
    ctx.warn(&format!(
        "{}the run index is missing or empty; answering from the run files themselves",
        why.map(|w| format!("{w}: ")).unwrap_or_default(),
    ));
    let memory = StateStore::open_memory_index(&root).map_err(|e| open_err(&root, e))?;
    Ok(RunSource::Files(memory))
}

/// The store `stats` and the viewer answer from: `store` itself, or, when [`run_source`]
/// says the run files must answer, a run index in memory holding every run file read whole
/// (the sums need every record; nothing is written anywhere).
///
/// # Errors
/// As [`run_source`]; data (4) when the run files cannot be listed.
pub(crate) fn answering_store(
    ctx: &mut Ctx<'_>,
    store: StateStore,
    why: Option<String>,
) -> Result<StateStore, CliError> {
    let memory = match run_source(ctx, store, why)? {
        RunSource::Index(store) => return Ok(store),
        RunSource::Files(memory) => memory,
    };
    let root = ctx.root.path.clone();
    let listing =
        session_jsonl::list_run_files(&root).map_err(crate::support::lib_errors::jsonl_err)?;
    let report = memory
        .index_files(&listing.files, session_state::RowRead::Whole)
        .map_err(state_err)?;
    warn_not_indexed(ctx, &report);
    Ok(memory)
}

/// One warning per run file an in-memory index could not read.
pub(crate) fn warn_not_indexed(ctx: &mut Ctx<'_>, report: &session_state::FilesIndexed) {
    let root = ctx.root.path.clone();
    for (path, err) in &report.failed {
        let shown = crate::support::paths::rel(&root, path).into_owned();
        ctx.warn(&format!("{shown}: not indexed: {}", one_line(err)));
    }
}

/// The file under the store `root` that a row of `store`'s index names: the row's own path
/// (an index in memory names the files under `root` too); a row of an index whose root is
/// another directory is mapped to the same relative path under `root`.
pub(crate) fn real_path(
    store: &StateStore,
    root: &std::path::Path,
    path: &std::path::Path,
) -> std::path::PathBuf {
    match path.strip_prefix(store.root()) {
        Ok(relative) if store.root() != root => root.join(relative),
        _ => path.to_owned(),
    }
}

/// Brings the run index up to date (new, changed and removed files), with a progress bar
/// when stderr is a terminal; files that cannot be read and damaged index rows are warned
/// about. Nothing happens on a read-only store (its index is what the last writer left).
/// When the index cannot be written because of the storage (a full disk, an I/O error, a
/// read-only file system), one warning says so and the command answers from the index as it
/// is.
///
/// # Errors
/// Data (4) when the tree cannot be listed or the database fails otherwise.
pub(crate) fn refresh_index(ctx: &mut Ctx<'_>, store: &StateStore) -> Result<(), CliError> {
    if store.is_read_only() {
        return Ok(());
    }
    let bar = Progress::lazy(ctx.progress, "indexing runs");
    let result = store.index_runs_with_progress(&mut |done, total| bar.update(done, total));
    bar.finish();
    let report = match result {
        Ok(r) => r,
        Err(e) => match e.write_unavailable() {
            Some(reason) => {
                ctx.warn(&format!(
                    "run index not brought up to date ({reason}: {}): {STALE}",
                    one_line(&e)
                ));
                return Ok(());
            }
            None => return Err(state_err(e)),
        },
    };
    for (path, err) in &report.failed {
        let msg = format!("{}: not indexed: {err}", rel(&ctx.root.path, path));
        ctx.warn(&msg);
    }
    for d in &report.column_damage {
        ctx.warn(&format!(
            "run index: {d}; the row was dropped and its file is indexed again"
        ));
    }
    // The search index, once `sessions search` made it, follows in the same refresh.
    crate::support::open::refresh_search_index(ctx, store, false);
    Ok(())
}

/// The session ids of the `messages/<id>.jsonl` files under `root` with each file's path,
/// sorted (an unreadable or missing `messages/` gives none; files with other names are not
/// message logs).
pub(crate) fn messages_files(root: &std::path::Path) -> Vec<(String, std::path::PathBuf)> {
    let Ok(rd) = std::fs::read_dir(root.join("messages")) else {
        return Vec::new();
    };
    let mut out: Vec<(String, std::path::PathBuf)> = rd
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_owned();
            let id = name.strip_suffix(".jsonl")?;
            session_schema::is_safe_id(id).then(|| (id.to_owned(), e.path()))
        })
        .collect();
    out.sort();
    out
}

/// The message logs of sessions the listing does not show (`db_ids`: the listed sessions, a
/// `state.db` row or a legacy snapshot, which migration rebuilds from the log): no listing
/// shows them and no load finds them.
pub(crate) fn orphan_messages(
    root: &std::path::Path,
    db_ids: &std::collections::BTreeSet<String>,
) -> Vec<(String, std::path::PathBuf)> {
    messages_files(root)
        .into_iter()
        .filter(|(id, _)| !db_ids.contains(id))
        .collect()
}

/// Brings `search.db` up to date with the run index (refresh that first). With `create`
/// false, only a search index that already exists is kept current (`runs`, `stats`, … keep
/// it fresh at the cost of what changed; the first `sessions search` builds it). Failures are
/// warned about, never fatal: the search index is derived.
pub(crate) fn refresh_search_index(
    ctx: &mut Ctx<'_>,
    store: &StateStore,
    create: bool,
) -> Option<SearchIndex> {
    if store.is_read_only() {
        return None;
    }
    if !create && !store.root().join(session_state::SEARCH_DB).exists() {
        return None;
    }
    let index = match SearchIndex::open(store.root()) {
        Ok(i) => i,
        Err(e) => {
            ctx.warn(&format!(
                "search index not opened: {}",
                crate::error::one_line(&e)
            ));
            return None;
        }
    };
    match session_replay::io::search::refresh_search(store, &index) {
        Ok(report) => {
            for (path, err) in &report.failed {
                let shown = path
                    .strip_prefix(store.root())
                    .unwrap_or(path)
                    .to_string_lossy()
                    .into_owned();
                ctx.warn(&format!("{shown}: not searchable yet: {err}"));
            }
        }
        Err(e) => ctx.warn(&format!(
            "search index not brought up to date: {}",
            crate::error::one_line(&e)
        )),
    }
    Some(index)
}
