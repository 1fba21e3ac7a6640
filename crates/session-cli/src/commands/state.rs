//! Commands and helpers backed by session-state: the store handle, the run index, session
//! listings, state checks for `verify`, and `reindex`.

use session_state::{
    EntrySource, LoadSource, MessageDamageKind, RunChange, StateError, StateStore,
};

use super::verify::Finding;
use crate::Ctx;
use crate::cli::ReindexArgs;
use crate::error::{CliError, EXIT_OK, one_line};
use crate::json_rows::{IndexChange, IndexChangeRow, ReindexSummary, Row, SummaryRow, write_row};
use crate::progress::Progress;
use crate::store::rel;

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
    if store
        .run_index()
        .list_runs(&probe)
        .is_ok_and(|p| !p.runs.is_empty())
    {
        stale(ctx, why);
        return Ok(RunSource::Index(store));
    }
    let root = ctx.root.path.clone();
    let has_days = session_jsonl::day_dirs_newest_first(&root)
        .map_err(crate::store::jsonl_err)?
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
    let listing = session_jsonl::list_run_files(&root).map_err(crate::store::jsonl_err)?;
    let report = memory
        .run_index()
        .index_files(&listing.files, session_state::RowRead::Whole)
        .map_err(state_err)?;
    warn_not_indexed(ctx, &report);
    Ok(memory)
}

/// One warning per run file an in-memory index could not read.
pub(crate) fn warn_not_indexed(ctx: &mut Ctx<'_>, report: &session_state::FilesIndexed) {
    let root = ctx.root.path.clone();
    for (path, err) in &report.failed {
        let shown = crate::store::rel(&root, path).into_owned();
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
    let result = store
        .run_index()
        .index_runs_with_progress(&mut |done, total| bar.update(done, total));
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
    super::search::refresh_search_index(ctx, store, false);
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

/// The findings for message logs without a `state.db` row: one `orphan_messages` problem per
/// file, and when `state.db` has no session row at all while `messages/` holds logs, one
/// `state_empty_with_messages` problem (a zero-byte or replaced `state.db`).
fn orphan_findings(
    root: &std::path::Path,
    listed: &std::collections::BTreeSet<String>,
    has_rows: bool,
    findings: &mut Vec<Finding>,
) {
    let orphans = orphan_messages(root, listed);
    let logs = messages_files(root).len();
    if !has_rows && logs > 0 {
        findings.push(Finding {
            file: root.join("state.db"),
            id: None,
            kind: "state_empty_with_messages".into(),
            problem: true,
            line: None,
            offset: None,
            message: format!(
                "state.db has no session rows but messages/ holds {logs} session log(s): the \
                 sessions are missing from the listings (a zero-byte or replaced state.db?)"
            ),
        });
    }
    for (id, path) in orphans {
        findings.push(Finding {
            file: path,
            id: Some(id),
            kind: "orphan_messages".into(),
            problem: true,
            line: None,
            offset: None,
            message: "message log without a state.db row: the session is not listed or \
                      loadable; `sessions repair` rebuilds its row"
                .into(),
        });
    }
    // What is not a regular file is never read (a FIFO would make every reader wait, a link
    // could point anywhere); those of listed sessions are reported by their load.
    // (Legacy snapshots that are not regular files are the listing's `unlistable_snapshot`.)
    for (id, path, kind) in irregular_messages(root) {
        if listed.contains(&id) {
            continue;
        }
        findings.push(Finding {
            file: path,
            id: Some(id),
            kind: "not_regular_file".into(),
            problem: true,
            line: None,
            offset: None,
            message: format!(
                "a {kind} where a message log belongs: never followed or read; move it away"
            ),
        });
    }
}

/// `messages/<id>.jsonl` entries (safe ids) that are not regular files, with what they are;
/// symbolic links are not followed.
fn irregular_messages(root: &std::path::Path) -> Vec<(String, std::path::PathBuf, &'static str)> {
    let Ok(rd) = std::fs::read_dir(root.join("messages")) else {
        return Vec::new();
    };
    let mut out: Vec<_> = rd
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let id = name.strip_suffix(".jsonl")?;
            let kind = irregular_kind(e.file_type().ok()?)?;
            session_schema::is_safe_id(id).then(|| (id.to_owned(), e.path(), kind))
        })
        .collect();
    out.sort();
    out
}

/// What a directory entry is when it is not a regular file.
fn irregular_kind(t: std::fs::FileType) -> Option<&'static str> {
    if t.is_file() {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return Some("FIFO");
        }
        if t.is_socket() {
            return Some("socket");
        }
        if t.is_char_device() || t.is_block_device() {
            return Some("device");
        }
    }
    Some(if t.is_symlink() {
        "symbolic link"
    } else if t.is_dir() {
        "directory"
    } else {
        "special file"
    })
}

/// Checks every listed session: damage in its messages file, a row whose `message_count`
/// disagrees with the file, legacy snapshots not migrated yet. Legacy-only sessions are not
/// loaded (that would migrate them; `repair` does). Returns the number of sessions checked.
///
/// # Errors
/// Data (4) when the store cannot be opened or listed.
pub(crate) fn verify_state(
    ctx: &mut Ctx<'_>,
    findings: &mut Vec<Finding>,
) -> Result<usize, CliError> {
    // The run files were checked already; a state.db that cannot be opened or listed is one
    // more finding, not the end of the report.
    let db = ctx.root.path.join("state.db");
    let logs = messages_files(&ctx.root.path).len();
    let unavailable = |e: CliError| Finding {
        file: db.clone(),
        id: None,
        kind: "state_unavailable".into(),
        problem: true,
        line: None,
        offset: None,
        message: if logs > 0 {
            format!(
                "{e}; the {logs} session(s) of messages/ cannot be listed or loaded until it \
                 is readable"
            )
        } else {
            e.to_string()
        },
    };
    let store = match open_store_read_only(ctx) {
        Ok(s) => s,
        Err(e) => {
            findings.push(unavailable(e));
            return Ok(0);
        }
    };
    let page = match store.list(&session_state::ListQuery::all()) {
        Ok(p) => p,
        Err(e) => {
            findings.push(unavailable(state_err(e)));
            return Ok(0);
        }
    };
    let listed: std::collections::BTreeSet<String> = page
        .entries
        .iter()
        .map(|e| e.summary.session_id.clone())
        .collect();
    let has_rows = page.entries.iter().any(|e| e.source == EntrySource::Db);
    orphan_findings(&ctx.root.path, &listed, has_rows, findings);
    // Rows `repair` rebuilt after state.db was lost, not saved since: a note, not a problem.
    // A damaged mark of ours is a problem: one finding per damaged column.
    for r in store.reconstructed_sessions().unwrap_or_default() {
        for c in &r.column_damage {
            findings.push(column_finding(&db, c));
        }
        if !r.row_unchanged {
            continue;
        }
        let file = store
            .messages_path(&r.session_id)
            .unwrap_or_else(|_| ctx.root.path.join("messages"));
        findings.push(Finding {
            file,
            id: Some(r.session_id.clone()),
            kind: "reconstructed_row".into(),
            problem: false,
            line: None,
            offset: None,
            message: format!(
                "state.db row rebuilt by `sessions repair` at {} from the message log ({} \
                 message(s)) and {} run log(s){}; the row's meta ({}) could not be recovered \
                 and is written again by the runtime's next save",
                r.reconstructed_at.as_str(),
                r.messages,
                r.run_files,
                if r.legacy_snapshot {
                    " and the legacy snapshot"
                } else {
                    ""
                },
                if r.legacy_snapshot {
                    "beyond the snapshot's"
                } else {
                    "resume context, to-dos, model override"
                },
            ),
        });
    }
    // Index rows of files that are not runs: nothing lists them, so their damage is found
    // here (the damage of listed run rows is `sessions runs`' and `reindex`'s business).
    for d in store.run_index().run_file_diagnostics().unwrap_or_default() {
        for c in &d.column_damage {
            findings.push(column_finding(&db, c));
        }
    }
    // Values of state.db rows: one finding per session and column, whether the listing or
    // a load found it.
    let mut column_seen: std::collections::BTreeSet<(String, &'static str, &'static str)> =
        std::collections::BTreeSet::new();
    for d in &page.diagnostics {
        match &d.column {
            Some(c) => {
                column_seen.insert((c.row.clone(), c.table, c.column));
                findings.push(column_finding(&d.path, c));
            }
            None => findings.push(Finding {
                file: d.path.clone(),
                id: None,
                kind: "unlistable_snapshot".into(),
                problem: true,
                line: None,
                offset: None,
                message: d.detail.clone(),
            }),
        }
    }
    let bar = Progress::new(
        ctx.progress,
        page.entries.len() as u64,
        "verifying sessions",
    );
    for entry in &page.entries {
        bar.inc();
        let id = entry.summary.session_id.clone();
        if entry.source == EntrySource::Legacy {
            let file = store
                .legacy_path(&id)
                .unwrap_or_else(|_| ctx.root.path.join("state"));
            findings.push(Finding {
                file,
                id: Some(id),
                kind: "legacy_not_migrated".into(),
                problem: false,
                line: None,
                offset: None,
                message: "legacy snapshot without a state.db row; `sessions repair` migrates it"
                    .into(),
            });
            continue;
        }
        // A row whose id is not a safe file name (not UTF-8, decoded with U+FFFD) has no
        // messages file to load; its column finding says so.
        if !session_schema::is_safe_id(&id) {
            continue;
        }
        let messages = store
            .messages_path(&id)
            .unwrap_or_else(|_| ctx.root.path.join("messages"));
        let loaded = match store.load(&id) {
            Ok(Some(l)) => l,
            Ok(None) => continue,
            Err(e) => {
                findings.push(Finding {
                    file: messages,
                    id: Some(id),
                    kind: "unloadable_session".into(),
                    problem: true,
                    line: None,
                    offset: None,
                    message: one_line(&e),
                });
                continue;
            }
        };
        if matches!(loaded.source, LoadSource::Legacy { .. }) {
            continue;
        }
        for d in &loaded.damage {
            if let MessageDamageKind::Column(c) = &d.kind {
                if column_seen.insert((c.row.clone(), c.table, c.column)) {
                    findings.push(column_finding(&d.path, c));
                }
                continue;
            }
            let (kind, problem) = match &d.kind {
                MessageDamageKind::TornTail => ("torn_tail", true),
                MessageDamageKind::Corrupt => ("corrupt_line", true),
                MessageDamageKind::NotObject => ("not_object", true),
                MessageDamageKind::MissingRole => ("missing_role", true),
                MessageDamageKind::Shape => ("schema_mismatch", true),
                MessageDamageKind::CountMismatch { .. } => ("message_count_mismatch", true),
                MessageDamageKind::FileChanged => ("messages_file_changed", true),
                MessageDamageKind::NotRegularFile { .. } => ("not_regular_file", true),
                MessageDamageKind::TooLarge { .. } => ("too_large", true),
                _ => ("message_damage", true),
            };
            findings.push(Finding {
                file: d.path.clone(),
                id: Some(id.clone()),
                kind: kind.into(),
                problem,
                line: d.line,
                offset: Some(d.byte_offset),
                message: d.detail.clone(),
            });
        }
    }
    bar.finish();
    Ok(page.entries.len())
}

/// The `verify` finding for a value of a `state.db` row that is not what its column should
/// hold.
fn column_finding(db: &std::path::Path, c: &session_state::ColumnDamage) -> Finding {
    Finding {
        file: db.to_path_buf(),
        id: matches!(
            c.table,
            "session_state" | "session_files" | "session_reconstructed"
        )
        .then(|| c.row.clone()),
        kind: "column_damage".into(),
        problem: true,
        line: None,
        offset: None,
        message: c.to_string(),
    }
}

/// `sessions reindex`: rebuild the run index from scratch and report the difference.
pub(crate) fn reindex(ctx: &mut Ctx<'_>, args: &ReindexArgs) -> Result<i32, CliError> {
    let store = open_store(ctx)?;
    let bar = Progress::lazy(ctx.progress, "reindexing runs");
    let report = store
        .run_index()
        .reindex_with_progress(&mut |done, total| bar.update(done, total))
        .map_err(state_err)?;
    bar.finish();
    let root = ctx.root.path.clone();
    let mut added = 0u64;
    let mut removed = 0u64;
    let mut changed = 0u64;
    for c in &report.changes {
        let (what, path, cols) = match c {
            RunChange::Added(p) => {
                added += 1;
                ("added", p, Vec::new())
            }
            RunChange::Removed(p) => {
                removed += 1;
                ("removed", p, Vec::new())
            }
            RunChange::Changed(p, cols) => {
                changed += 1;
                ("changed", p, cols.clone())
            }
            _ => continue,
        };
        if args.json {
            let row = IndexChangeRow {
                change: match what {
                    "added" => IndexChange::Added,
                    "removed" => IndexChange::Removed,
                    _ => IndexChange::Changed,
                },
                file: rel(&root, path).into_owned(),
                columns: cols.iter().map(|c| c.to_string()).collect(),
            };
            write_row(ctx.out, &Row::IndexChange(row))?;
        } else if cols.is_empty() {
            writeln!(ctx.out, "{what:<8} {}", rel(&root, path))?;
        } else {
            writeln!(
                ctx.out,
                "{what:<8} {} ({})",
                rel(&root, path),
                cols.join(", ")
            )?;
        }
    }
    for (path, err) in &report.failed {
        let msg = format!("{}: not indexed: {err}", rel(&root, path));
        ctx.warn(&msg);
    }
    let search = if args.search {
        Some(rebuild_search(ctx, &store)?)
    } else {
        None
    };
    if args.json {
        let summary = ReindexSummary {
            total: report.total,
            unchanged: report.unchanged,
            added,
            removed,
            changed,
            failed: report.failed.len() as u64,
            search_files: search.map(|(files, _)| files),
            search_documents: search.map(|(_, docs)| docs),
        };
        write_row(ctx.out, &Row::Summary(SummaryRow::Reindex(summary)))?;
    } else {
        writeln!(
            ctx.out,
            "reindexed {} run(s): {} unchanged, {added} added, {removed} removed, {changed} changed, {} unreadable",
            report.total,
            report.unchanged,
            report.failed.len()
        )?;
        if let Some((files, docs)) = search {
            writeln!(
                ctx.out,
                "rebuilt the search index: {docs} document(s) from {files} run file(s)"
            )?;
        }
    }
    Ok(EXIT_OK)
}

/// `reindex --search`: empties `search.db` and indexes every run file of the (rebuilt) run
/// index again. Returns the numbers of run files and documents indexed.
fn rebuild_search(ctx: &mut Ctx<'_>, store: &StateStore) -> Result<(u64, u64), CliError> {
    let index = session_state::SearchIndex::open(store.root()).map_err(state_err)?;
    index.clear().map_err(state_err)?;
    let bar = Progress::lazy(ctx.progress, "indexing text");
    let report = session_replay::io::search::refresh_search(store, &index)
        .map_err(|e| CliError::data(&e))?;
    bar.finish();
    for (path, err) in &report.failed {
        let msg = format!("{}: not searchable: {err}", rel(&ctx.root.path, path));
        ctx.warn(&msg);
    }
    let counts = index.counts().map_err(state_err)?;
    Ok((counts.files, counts.docs))
}
