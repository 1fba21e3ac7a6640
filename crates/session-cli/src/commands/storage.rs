//! Managing history: session titles (`sessions name`, `@title` as an id), pins (`sessions pin`
//! / `unpin`: never expired by `gc`), and where the bytes are (`sessions storage`).
//!
//! Titles and pins live in our table `session_labels` of `state.db` (session-state's
//! `StateStore::labels`); the reference runtime ignores it.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::Ctx;
use crate::cli::StorageArgs;
use crate::error::{CliError, EXIT_OK};
use crate::json_rows::{
    Row, StorageBatchRow, StorageDayRow, StorageSessionRow, StorageSummary, SummaryRow, write_row,
};
use crate::style::{Paint, bytes as fmt_bytes, pad};
use crate::support::housekeeping::TRASH_DIR;
use crate::support::labels::titles;
use crate::support::open::open_store_read_only;
use crate::support::table::{Cell, Column, Step, Table};

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
pub(crate) fn run(ctx: &mut Ctx<'_>, args: &StorageArgs) -> Result<i32, CliError> {
    crate::support::open::check_root(ctx)?;
    let root = ctx.root.path.clone();
    let has_db = root.join("state.db").is_file();
    let store = if has_db {
        Some(open_store_read_only(ctx)?)
    } else {
        None
    };
    let listing =
        session_jsonl::list_run_files(&root).map_err(crate::support::lib_errors::jsonl_err)?;
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
    for (id, path) in crate::support::open::messages_files(&root) {
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
