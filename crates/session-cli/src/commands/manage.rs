//! Managing history: session titles (`sessions name`, `@title` as an id), pins (`sessions pin`
//! / `unpin`: never expired by `gc`), and where the bytes are (`sessions storage`).
//!
//! Titles and pins live in our table `session_labels` of `state.db` (session-state's
//! `StateStore::labels`); the reference runtime ignores it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use session_state::{SessionLabel, StateStore};

use super::housekeeping::TRASH_DIR;
use super::state::{open_store, open_store_read_only, state_err};
use crate::Ctx;
use crate::cli::{NameArgs, PinArgs, StorageArgs};
use crate::error::{CliError, EXIT_OK};
use crate::json_rows::{
    Row, StorageBatchRow, StorageDayRow, StorageSessionRow, StorageSummary, SummaryRow, write_row,
};
use crate::style::{Paint, bytes as fmt_bytes, pad};
use crate::table::{Cell, Column, Step, Table};

/// The labels of the store, or none when there is no `state.db` yet.
fn labels_of(store: &StateStore) -> Result<Vec<SessionLabel>, CliError> {
    store.labels().map_err(state_err)
}

/// The pinned session ids of `store`.
///
/// # Errors
/// Data (4) when the labels cannot be read.
pub(crate) fn pinned_sessions(store: &StateStore) -> Result<BTreeSet<String>, CliError> {
    Ok(labels_of(store)?
        .into_iter()
        .filter(|l| l.pinned)
        .map(|l| l.session_id)
        .collect())
}

/// The session titles of `store` by session id.
///
/// # Errors
/// Data (4) when the labels cannot be read.
pub(crate) fn titles(store: &StateStore) -> Result<BTreeMap<String, SessionLabel>, CliError> {
    Ok(labels_of(store)?
        .into_iter()
        .map(|l| (l.session_id.clone(), l))
        .collect())
}

/// `raw` as a session id: `@title` is the session with that title (exactly; when none has
/// it exactly, the one whose title matches ignoring case), anything else is returned as it
/// is.
///
/// # Errors
/// Not found (3) when no session has the title; usage (2) when several have it, listing them.
pub(crate) fn resolve_title(store: &StateStore, raw: &str) -> Result<String, CliError> {
    let Some(title) = raw.strip_prefix('@') else {
        return Ok(raw.to_owned());
    };
    let labels = labels_of(store)?;
    let with = |exact: bool| -> Vec<&SessionLabel> {
        labels
            .iter()
            .filter(|l| {
                l.title.as_deref().is_some_and(|t| {
                    if exact {
                        t == title
                    } else {
                        t.to_lowercase() == title.to_lowercase()
                    }
                })
            })
            .collect()
    };
    let mut found = with(true);
    if found.is_empty() {
        found = with(false);
    }
    match found.as_slice() {
        [one] => Ok(one.session_id.clone()),
        [] => Err(CliError::NotFound(format!(
            "no session titled \"{title}\" (`sessions name ID TITLE` gives one)"
        ))),
        many => Err(CliError::Usage(format!(
            "the title \"{title}\" names {} sessions; use one of their ids: {}",
            many.len(),
            many.iter()
                .map(|l| format!("{} ({})", l.session_id, l.title.as_deref().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// `raw` as a session id for a reading command (`@title` looked up read-only; any other text
/// returned as is, without opening the store).
///
/// # Errors
/// As [`resolve_title`]; not found (3) when `@title` is asked of a store without `state.db`.
pub(crate) fn resolve_id(ctx: &mut Ctx<'_>, raw: &str) -> Result<String, CliError> {
    if !raw.starts_with('@') {
        return Ok(raw.to_owned());
    }
    if !ctx.root.path.join("state.db").is_file() {
        return Err(CliError::NotFound(format!(
            "no session titled \"{}\": {} has no state.db",
            &raw[1..],
            ctx.root.path.display()
        )));
    }
    let store = open_store_read_only(ctx)?;
    resolve_title(&store, raw)
}

/// The store for a label change: writable, refusing `--read-only`.
fn open_for_labels(ctx: &mut Ctx<'_>) -> Result<StateStore, CliError> {
    if ctx.read_only {
        return Err(CliError::Usage(
            "--read-only: this command changes the store".into(),
        ));
    }
    open_store(ctx)
}

/// A session id that exists (a `state.db` row, a legacy snapshot, or runs in the run index).
fn existing_session(ctx: &mut Ctx<'_>, store: &StateStore, raw: &str) -> Result<String, CliError> {
    // `@title`, `-` and unique prefixes as every command takes them.
    let id = crate::ids::session_arg(ctx, raw)?;
    let listed = store
        .list(&session_state::ListQuery::all())
        .map_err(state_err)?
        .entries
        .iter()
        .any(|e| e.summary.session_id == id);
    if listed || !crate::store::session_runs(ctx, store, &id)?.is_empty() {
        return Ok(id);
    }
    Err(CliError::NotFound(format!(
        "no session {id} under {}",
        ctx.root.path.display()
    )))
}

fn now_text(ctx: &Ctx<'_>) -> String {
    session_schema::Timestamp::from_datetime(ctx.now)
        .as_str()
        .to_owned()
}

/// `sessions name ID TITLE` / `sessions name ID --clear`.
pub(crate) fn name(ctx: &mut Ctx<'_>, args: &NameArgs) -> Result<i32, CliError> {
    let store = open_for_labels(ctx)?;
    let id = existing_session(ctx, &store, &args.id)?;
    let title = if args.clear {
        None
    } else {
        let t = args.title.as_deref().unwrap_or_default().trim();
        if t.is_empty() {
            return Err(CliError::Usage(
                "a title must not be empty (`--clear` removes one)".into(),
            ));
        }
        if t.starts_with('@') || t.chars().any(char::is_control) {
            return Err(CliError::Usage(
                "a title must not start with @ or hold control characters".into(),
            ));
        }
        Some(t.to_owned())
    };
    store
        .set_title(&id, title.as_deref(), &now_text(ctx))
        .map_err(state_err)?;
    match &title {
        Some(t) => writeln!(ctx.out, "session {id} is titled \"{t}\" (use it as @{t})")?,
        None => writeln!(ctx.out, "session {id} has no title")?,
    }
    Ok(EXIT_OK)
}

/// `sessions pin ID…` (`pin = true`) and `sessions unpin ID…`.
pub(crate) fn pin(ctx: &mut Ctx<'_>, args: &PinArgs, pin: bool) -> Result<i32, CliError> {
    let store = open_for_labels(ctx)?;
    let mut ids = Vec::new();
    for raw in &args.ids {
        ids.push(existing_session(ctx, &store, raw)?);
    }
    let now = now_text(ctx);
    for id in &ids {
        store.set_pinned(id, pin, &now).map_err(state_err)?;
        if pin {
            writeln!(ctx.out, "pinned {id}: gc never moves it or its runs")?;
        } else {
            writeln!(ctx.out, "unpinned {id}")?;
        }
    }
    Ok(EXIT_OK)
}

/// Parses a size: a number (decimals allowed) and an optional binary unit `K`, `M`, `G`, `T`
/// (also `KB`/`KiB`…, any case; 1K = 1024 bytes); no unit means bytes.
///
/// # Errors
/// Usage (2) for anything else, or a size above 2^63 bytes.
pub(crate) fn parse_size(text: &str) -> Result<u64, CliError> {
    let bad = || {
        CliError::Usage(format!(
            "`{text}` is not a size (e.g. 500M, 5G, 1.5T; units are powers of 1024)"
        ))
    };
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim().to_ascii_lowercase();
    let unit = unit
        .strip_suffix("ib")
        .or_else(|| unit.strip_suffix('b'))
        .unwrap_or(&unit);
    let scale: u64 = match unit {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        "t" => 1 << 40,
        _ => return Err(bad()),
    };
    if num.is_empty() || num.matches('.').count() > 1 {
        return Err(bad());
    }
    let value: f64 = num.parse().map_err(|_| bad())?;
    #[allow(clippy::cast_precision_loss)]
    let bytes = value * scale as f64;
    if !bytes.is_finite() || bytes >= 9.2e18 {
        return Err(bad());
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    Ok(bytes.round() as u64)
}

/// Size of a file (0 when it is not there).
fn size_of(path: &Path) -> u64 {
    fs::symlink_metadata(path).map_or(0, |m| m.len())
}

/// Files and bytes under `dir` (links counted by their own size, never followed).
fn tree_size(dir: &Path) -> (u64, u64) {
    let (mut files, mut bytes) = (0, 0);
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(m) = fs::symlink_metadata(e.path()) else {
                continue;
            };
            if m.is_dir() {
                stack.push(e.path());
            } else {
                files += 1;
                bytes += m.len();
            }
        }
    }
    (files, bytes)
}

/// Bytes of one session in the store.
#[derive(Debug, Default, Clone)]
struct SessionBytes {
    runs: u64,
    run_bytes: u64,
    messages_bytes: u64,
    legacy_bytes: u64,
}

impl SessionBytes {
    fn total(&self) -> u64 {
        self.run_bytes + self.messages_bytes + self.legacy_bytes
    }
}

/// Per-day bytes of run files.
#[derive(Debug, Default, Clone)]
struct DayBytes {
    runs: u64,
    bytes: u64,
    archived: u64,
    archived_bytes: u64,
}

/// `sessions storage`: bytes by area (runs, archives, messages, legacy snapshots,
/// `state.db`, trash), by day, by session (largest first) and by trash batch. With `--json`
/// (docs/cli-json.md): a `storage_day` row per day (oldest first), a `storage_session` row
/// per session (largest first; every one, `--limit` cuts only the text tables), a
/// `storage_batch` row per trash batch, then the `summary` (`command: "storage"`).
pub(crate) fn storage(ctx: &mut Ctx<'_>, args: &StorageArgs) -> Result<i32, CliError> {
    super::state::check_root(ctx)?;
    let root = ctx.root.path.clone();
    let has_db = root.join("state.db").is_file();
    let store = if has_db {
        Some(open_store_read_only(ctx)?)
    } else {
        None
    };
    let listing = session_jsonl::list_run_files(&root).map_err(crate::store::jsonl_err)?;
    // Which session each run file belongs to: the run index first, the header otherwise.
    let mut index: BTreeMap<PathBuf, Option<String>> = BTreeMap::new();
    if let Some(store) = &store {
        // The default query: every run, no filter, no limit.
        if let Ok(page) = store
            .run_index()
            .list_runs(&session_state::RunQuery::default())
        {
            for r in page.runs {
                for p in std::iter::once(&r.path).chain(r.other_files.iter()) {
                    index.insert(p.clone(), r.session_id.clone());
                }
            }
        }
    }
    let mut days: BTreeMap<String, DayBytes> = BTreeMap::new();
    let mut sessions: BTreeMap<String, SessionBytes> = BTreeMap::new();
    let (mut run_files, mut run_bytes, mut archived, mut archived_bytes) = (0u64, 0u64, 0u64, 0u64);
    let mut no_session = SessionBytes::default();
    for f in &listing.files {
        let size = size_of(&f.path);
        let d = f.date;
        let day = days
            .entry(format!("{:04}-{:02}-{:02}", d.year, d.month, d.day))
            .or_default();
        day.runs += 1;
        day.bytes += size;
        run_files += 1;
        run_bytes += size;
        if f.compressed {
            day.archived += 1;
            day.archived_bytes += size;
            archived += 1;
            archived_bytes += size;
        }
        let session = match index.get(&f.path) {
            Some(s) => s.clone(),
            None => session_jsonl::read_header(&f.path)
                .ok()
                .and_then(|h| h.facts.session_id),
        };
        let entry = match session {
            Some(s) => sessions.entry(s).or_default(),
            None => &mut no_session,
        };
        entry.runs += 1;
        entry.run_bytes += size;
    }
    let (mut messages_files, mut messages_bytes) = (0u64, 0u64);
    for (id, path) in super::state::messages_files(&root) {
        let size = size_of(&path);
        messages_files += 1;
        messages_bytes += size;
        sessions.entry(id).or_default().messages_bytes += size;
    }
    let (mut legacy_files, mut legacy_bytes) = (0u64, 0u64);
    if let Ok(entries) = fs::read_dir(root.join("state")) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(id) = name.strip_suffix(".json")
                && session_schema::is_safe_id(id)
            {
                let size = size_of(&e.path());
                legacy_files += 1;
                legacy_bytes += size;
                sessions.entry(id.to_owned()).or_default().legacy_bytes += size;
            }
        }
    }
    let db_bytes: u64 = ["state.db", "state.db-wal", "state.db-shm"]
        .iter()
        .map(|n| size_of(&root.join(n)))
        .sum();
    let mut batches: Vec<(String, u64, u64)> = Vec::new();
    if let Ok(entries) = fs::read_dir(root.join(TRASH_DIR)) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                let (files, bytes) = tree_size(&e.path());
                batches.push((e.file_name().to_string_lossy().into_owned(), files, bytes));
            }
        }
    }
    batches.sort();
    let trash_bytes: u64 = batches.iter().map(|b| b.2).sum();
    let trash_files: u64 = batches.iter().map(|b| b.1).sum();
    let total = run_bytes + messages_bytes + legacy_bytes + db_bytes + trash_bytes;
    let titles = match &store {
        Some(s) => titles(s)?,
        None => BTreeMap::new(),
    };
    let mut by_size: Vec<(&String, &SessionBytes)> = sessions.iter().collect();
    by_size.sort_by(|a, b| b.1.total().cmp(&a.1.total()).then(a.0.cmp(b.0)));
    if args.json {
        for (day, d) in &days {
            let row = StorageDayRow {
                day: day.clone(),
                runs: d.runs,
                bytes: d.bytes,
                archived_runs: d.archived,
                archived_bytes: d.archived_bytes,
            };
            write_row(ctx.out, &Row::StorageDay(row))?;
        }
        let rows = by_size.iter().map(|(id, b)| (Some(id.as_str()), *b));
        let rows = rows.chain((no_session.runs > 0).then_some((None, &no_session)));
        for (id, b) in rows {
            let row = StorageSessionRow {
                session_id: id.map(str::to_owned),
                title: id.and_then(|i| titles.get(i)).and_then(|l| l.title.clone()),
                bytes: b.total(),
                runs: b.runs,
                run_bytes: b.run_bytes,
                messages_bytes: b.messages_bytes,
                legacy_bytes: b.legacy_bytes,
            };
            write_row(ctx.out, &Row::StorageSession(row))?;
        }
        for (name, files, bytes) in &batches {
            let row = StorageBatchRow {
                batch: name.clone(),
                files: *files,
                bytes: *bytes,
            };
            write_row(ctx.out, &Row::StorageBatch(row))?;
        }
        let summary = StorageSummary {
            root: root.to_string_lossy().into_owned(),
            bytes: total,
            run_files,
            run_bytes,
            archived_files: archived,
            archived_bytes,
            messages_files,
            messages_bytes,
            legacy_files,
            legacy_bytes,
            state_db_bytes: db_bytes,
            trash_files,
            trash_bytes,
        };
        write_row(ctx.out, &Row::Summary(SummaryRow::Storage(summary)))?;
        return Ok(EXIT_OK);
    }
    let s = ctx.style;
    writeln!(
        ctx.out,
        "{} {}",
        s.paint(Paint::Bold, &format!("{} in", fmt_bytes(total))),
        root.display()
    )?;
    let area = |name: &str, count: String, bytes: u64| {
        format!(
            "  {} {} {:>10}",
            pad(name, 10),
            pad(&count, 18),
            fmt_bytes(bytes)
        )
    };
    writeln!(
        ctx.out,
        "{}",
        area("runs", format!("{run_files} file(s)"), run_bytes)
    )?;
    writeln!(
        ctx.out,
        "{}",
        area("  archived", format!("{archived} file(s)"), archived_bytes)
    )?;
    writeln!(
        ctx.out,
        "{}",
        area(
            "messages",
            format!("{messages_files} file(s)"),
            messages_bytes
        )
    )?;
    writeln!(
        ctx.out,
        "{}",
        area("legacy", format!("{legacy_files} file(s)"), legacy_bytes)
    )?;
    writeln!(ctx.out, "{}", area("state.db", String::new(), db_bytes))?;
    writeln!(
        ctx.out,
        "{}",
        area("trash", format!("{} batch(es)", batches.len()), trash_bytes)
    )?;
    // The tables fit the terminal like every listing (piped: tab-separated rows).
    writeln!(ctx.out)?;
    let mut by_day = Table::new(
        vec![
            Column::text("DAY"),
            Column::number("RUNS"),
            Column::number("BYTES"),
            Column::number("ARCHIVED"),
        ],
        Vec::new(),
    );
    for (day, d) in days.iter().rev().take(args.limit) {
        by_day.row(vec![
            Cell::text(day.as_str()),
            Cell::text(d.runs.to_string()),
            Cell::text(fmt_bytes(d.bytes)),
            Cell::text(fmt_bytes(d.archived_bytes)),
        ]);
    }
    ctx.table(&by_day)?;
    if days.len() > args.limit {
        ctx.hint(&format!(
            "… {} more day(s) (--limit, --json)",
            days.len() - args.limit
        ))?;
    }
    writeln!(ctx.out)?;
    // Sessions, largest first: on a narrow terminal the title is clipped first, then the id
    // becomes its 8-character prefix, then the messages column goes.
    const SESSION: usize = 0;
    const MESSAGES: usize = 3;
    const TITLE: usize = 4;
    let mut by_session = Table::new(
        vec![
            Column::id("SESSION"),
            Column::number("RUNS"),
            Column::number("BYTES"),
            Column::number("MESSAGES"),
            Column::text("TITLE"),
        ],
        vec![
            Step::Shrink(TITLE, 20),
            Step::Shrink(SESSION, 8),
            Step::Drop(MESSAGES),
            Step::Shrink(TITLE, 8),
        ],
    );
    for (id, b) in by_size.iter().take(args.limit) {
        let title = titles
            .get(*id)
            .and_then(|l| l.title.as_deref())
            .unwrap_or("");
        by_session.row(vec![
            Cell::text(*id),
            Cell::text(b.runs.to_string()),
            Cell::text(fmt_bytes(b.total())),
            Cell::text(fmt_bytes(b.messages_bytes)),
            Cell::text(title),
        ]);
    }
    if no_session.runs > 0 {
        by_session.row(vec![
            Cell::text("-"),
            Cell::text(no_session.runs.to_string()),
            Cell::text(fmt_bytes(no_session.run_bytes)),
            Cell::text(""),
            Cell::text("(runs without a session)"),
        ]);
    }
    ctx.table(&by_session)?;
    if by_size.len() > args.limit {
        ctx.hint(&format!(
            "… {} more session(s), largest first (--limit, --json)",
            by_size.len() - args.limit
        ))?;
    }
    if !batches.is_empty() {
        writeln!(ctx.out)?;
        let mut by_batch = Table::new(
            vec![
                Column::text("TRASH BATCH"),
                Column::number("FILES"),
                Column::number("BYTES"),
            ],
            Vec::new(),
        );
        for (name, files, bytes) in &batches {
            by_batch.row(vec![
                Cell::text(name.as_str()),
                Cell::text(files.to_string()),
                Cell::text(fmt_bytes(*bytes)),
            ]);
        }
        ctx.table(&by_batch)?;
    }
    Ok(EXIT_OK)
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_in_binary_units() {
        assert_eq!(parse_size("5G").unwrap(), 5 << 30);
        assert_eq!(parse_size("500m").unwrap(), 500 << 20);
        assert_eq!(parse_size("1.5KiB").unwrap(), 1536);
        assert_eq!(parse_size("2kb").unwrap(), 2048);
        assert_eq!(parse_size("123").unwrap(), 123);
        assert_eq!(parse_size(" 1 T ").unwrap(), 1 << 40);
        for bad in ["", "G", "5X", "1.2.3G", "-5G", "9999999T", "5 GB extra"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
