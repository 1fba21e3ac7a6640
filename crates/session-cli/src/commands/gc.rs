//! `sessions gc`: retention of runs and sessions into a trash folder (and `--empty-trash`).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use session_state::ListQuery;
use time::OffsetDateTime;

use crate::Ctx;
use crate::backend::Shared;
use crate::cli::GcArgs;
use crate::error::{CliError, EXIT_OK};
use crate::json_rows::{ActionKind, ActionRow, ActionStatus, Row, write_row};
use crate::jsonw::JsonObj;
use crate::style::bytes as fmt_bytes;
use crate::support::housekeeping::{
    Action, RunFacts, TRASH_DIR, emit, fsync_dir, open_for, scan_runs, trash_batch, trash_meta,
};
use crate::support::open::state_err;
use crate::support::paths::rel;
use crate::timefmt::older_than;

// ---------------------------------------------------------------------------------------------
// repair

// ---------------------------------------------------------------------------------------------
// gc

fn empty_trash(ctx: &mut Ctx<'_>, args: &GcArgs) -> Result<i32, CliError> {
    if ctx.read_only && !args.dry_run {
        return Err(CliError::Usage(
            "--read-only: this command changes the store (use --dry-run to see the plan)".into(),
        ));
    }
    // Only a store's own trash: `--root ~` must never empty `~/trash`.
    crate::support::open::check_root(ctx)?;
    let trash = ctx.root.path.join(TRASH_DIR);
    let meta = trash_meta(&trash, "empty it")?;
    if meta.is_none() {
        if args.json {
            let row = ActionRow {
                action: ActionKind::EmptyTrash,
                file: String::new(),
                id: None,
                status: ActionStatus::Skipped,
                detail: "no trash folder".into(),
            };
            write_row(ctx.out, &Row::Action(row))?;
        } else {
            writeln!(ctx.out, "the trash is empty")?;
        }
        return Ok(EXIT_OK);
    }
    let mut batches: Vec<PathBuf> = fs::read_dir(&trash)
        .map_err(|e| CliError::io(&trash, e))?
        .flatten()
        .map(|e| e.path())
        .collect();
    batches.sort();
    let mut total_files = 0;
    let mut total_bytes = 0;
    let mut kept = 0;
    let root = ctx.root.path.clone();
    for b in &batches {
        // A file a writer still holds (a run reopened just before gc moved it) is never
        // deleted: it and its directories stay.
        let emptied = crate::support::trash::empty_tree(b, args.dry_run)?;
        total_files += emptied.files;
        total_bytes += emptied.bytes;
        kept += emptied.kept.len();
        for (path, pid) in &emptied.kept {
            let a = Action {
                action: ActionKind::KeepLocked,
                file: rel(&root, path).into_owned(),
                id: None,
                status: ActionStatus::Skipped,
                detail: format!(
                    "a writer has the file open{}; not deleted",
                    pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
                ),
            };
            emit(ctx, args.json, &a)?;
        }
        let status = if args.dry_run {
            ActionStatus::Planned
        } else {
            ActionStatus::Done
        };
        let a = Action {
            action: ActionKind::Delete,
            file: rel(&root, b).into_owned(),
            id: None,
            status,
            detail: format!("{} file(s), {}", emptied.files, fmt_bytes(emptied.bytes)),
        };
        emit(ctx, args.json, &a)?;
    }
    if !args.dry_run {
        let _ = fs::remove_dir(&trash);
        fsync_dir(&ctx.root.path);
    }
    if !args.json {
        let verb = if args.dry_run {
            "would delete"
        } else {
            "deleted"
        };
        let kept = if kept > 0 {
            format!("; kept {kept} file(s) a writer has open")
        } else {
            String::new()
        };
        writeln!(
            ctx.out,
            "{verb} {total_files} file(s), {} from the trash{kept}",
            fmt_bytes(total_bytes)
        )?;
    }
    Ok(EXIT_OK)
}

/// `sessions gc`: moves expired runs and sessions into a trash batch (or empties the trash).
///
/// # Errors
/// Usage (2), not found (3) or data (4), as the command's help describes.
pub(crate) fn run(ctx: &mut Ctx<'_>, args: &GcArgs) -> Result<i32, CliError> {
    if args.empty_trash {
        return empty_trash(ctx, args);
    }
    let cutoff = match args.older_than.as_deref() {
        Some(age) => Some(older_than(age, ctx.now, &ctx.zone)?),
        None => None,
    };
    let max_size = args.max_size.as_deref().map(parse_size).transpose()?;
    let store = open_for(ctx, args.dry_run)?;
    let root = ctx.root.path.clone();
    let runs = scan_runs(ctx)?;
    let sessions = store.list(&ListQuery::all()).map_err(state_err)?;
    let plan = plan_gc(
        &store,
        &runs,
        &sessions.entries,
        cutoff,
        args.keep_last,
        max_size,
    )?;
    let GcPlan {
        moving,
        moving_sessions,
        kept_locked,
        kept_active,
        kept_undated,
        kept_pinned,
        kept_recent,
        over_size,
    } = plan;
    let mut header = JsonObj::new();
    header.str("op", "gc");
    header.str(
        "created_at",
        session_schema::Timestamp::from_datetime(ctx.now).as_str(),
    );
    if let (Some(age), Some(cutoff)) = (args.older_than.as_deref(), cutoff) {
        header.str("older_than", age);
        header.str(
            "cutoff",
            session_schema::Timestamp::from_datetime(cutoff).as_str(),
        );
    }
    if let Some(n) = args.keep_last {
        header.unum("keep_last", n as u64);
    }
    if let Some(m) = max_size {
        header.unum("max_size", m);
    }
    header.str("root", &root.to_string_lossy());
    let moved = trash_batch(
        ctx,
        &store,
        &moving,
        &moving_sessions,
        &header.finish(),
        args.dry_run,
        args.json,
    )?;
    let kept_locked = kept_locked + moved.kept_locked;
    if !args.json {
        let verb = if args.dry_run { "would move" } else { "moved" };
        let whereto = if moved.runs == 0 && moved.sessions == 0 {
            String::new()
        } else {
            format!(" to {}", rel(&root, &moved.batch))
        };
        let mut kept_more = String::new();
        if moved.kept_open > 0 {
            kept_more.push_str(&format!(", {} open session(s)", moved.kept_open));
        }
        if moved.kept_changed > 0 {
            kept_more.push_str(&format!(
                ", {} changed since they were read",
                moved.kept_changed
            ));
        }
        if kept_pinned > 0 {
            kept_more.push_str(&format!(", {kept_pinned} of pinned sessions"));
        }
        if kept_recent > 0 {
            kept_more.push_str(&format!(
                ", {kept_recent} of the newest {} sessions",
                args.keep_last.unwrap_or_default()
            ));
        }
        let window = match args.older_than.as_deref() {
            Some(age) => format!(", {kept_active} of sessions saved within {age}"),
            None => String::new(),
        };
        writeln!(
            ctx.out,
            "{verb} {} run(s) ({}) and {} session(s){whereto}; kept {kept_locked} locked{window}, {kept_undated} undated{kept_more}",
            moved.runs,
            fmt_bytes(moved.bytes),
            moved.sessions,
        )?;
        if let (Some(max), Some(over)) = (max_size, over_size) {
            writeln!(
                ctx.out,
                "the store stays {} over --max-size {}: what is left is pinned, among the newest kept, open, locked or undated",
                fmt_bytes(over),
                fmt_bytes(max)
            )?;
        }
    }
    moved.result()
}

/// What `gc`'s rules select.
struct GcPlan<'a> {
    moving: Vec<&'a RunFacts>,
    moving_sessions: Vec<&'a session_state::ListEntry>,
    kept_locked: usize,
    kept_active: usize,
    kept_undated: usize,
    /// Runs kept because their session is pinned.
    kept_pinned: usize,
    /// Runs kept because their session is among the newest `--keep-last`.
    kept_recent: usize,
    /// With `--max-size`: by how much the store stays over it after the move.
    over_size: Option<u64>,
}

/// `gc`'s selection. Pinned sessions and their runs never move. `keep_last`: the newest N
/// sessions (by `updated_at`; undated ones count as new) and their runs are kept; alone, every
/// other dated session moves with its runs. `cutoff` (`--older-than`): runs whose last
/// activity is before it move unless locked, undated, or of a session saved since; sessions
/// saved before it move when none of their runs is kept. `max_size`: then, while the runs,
/// messages logs and legacy snapshots of the store take more, the oldest remaining session
/// (with its runs, none locked) or run without a session moves.
fn plan_gc<'a>(
    store: &session_state::StateStore,
    runs: &'a [RunFacts],
    sessions: &'a [session_state::ListEntry],
    cutoff: Option<OffsetDateTime>,
    keep_last: Option<usize>,
    max_size: Option<u64>,
) -> Result<GcPlan<'a>, CliError> {
    let pinned = crate::support::labels::pinned_sessions(store)?;
    let updated: BTreeMap<&str, Option<OffsetDateTime>> = sessions
        .iter()
        .map(|e| (e.summary.session_id.as_str(), e.summary.updated_at.parse()))
        .collect();
    // Newest first; undated sessions first of all (never taken for old).
    let mut by_age: Vec<(&str, Option<OffsetDateTime>)> =
        updated.iter().map(|(k, v)| (*k, *v)).collect();
    by_age.sort_by(|a, b| match (a.1, b.1) {
        (None, None) => a.0.cmp(b.0),
        (None, Some(_)) => std::cmp::Ordering::Less,
        (Some(_), None) => std::cmp::Ordering::Greater,
        (Some(x), Some(y)) => y.cmp(&x).then(a.0.cmp(b.0)),
    });
    let recent: BTreeSet<&str> = match keep_last {
        Some(n) => by_age.iter().take(n).map(|(id, _)| *id).collect(),
        None => BTreeSet::new(),
    };
    // Sessions the count rule alone expires (`beyond`, less the pinned ones).
    let beyond: BTreeSet<&str> = match (keep_last, cutoff) {
        (Some(n), None) => by_age
            .iter()
            .skip(n)
            .filter(|(_, t)| t.is_some())
            .map(|(id, _)| *id)
            .collect(),
        _ => BTreeSet::new(),
    };
    let expired: BTreeSet<&str> = beyond
        .iter()
        .copied()
        .filter(|id| !pinned.contains(*id))
        .collect();
    let active = |sid: &str, cutoff: OffsetDateTime| -> bool {
        updated
            .get(sid)
            .is_some_and(|u| u.is_none_or(|t| t >= cutoff))
    };
    let mut plan = GcPlan {
        moving: Vec::new(),
        moving_sessions: Vec::new(),
        kept_locked: 0,
        kept_active: 0,
        kept_undated: 0,
        kept_pinned: 0,
        kept_recent: 0,
        over_size: None,
    };
    let mut kept_sessions: BTreeSet<&str> = BTreeSet::new();
    for r in runs {
        let sid = r.session_id.as_deref();
        let old = cutoff.is_some_and(|c| r.activity.is_some_and(|a| a < c));
        let chosen = sid.is_some_and(|s| expired.contains(s));
        if sid.is_some_and(|s| pinned.contains(s)) {
            plan.kept_pinned += usize::from(old || sid.is_some_and(|s| beyond.contains(s)));
        } else if sid.is_some_and(|s| recent.contains(s)) {
            plan.kept_recent += usize::from(old);
        } else if (old || chosen) && r.locked {
            plan.kept_locked += 1;
        } else if chosen {
            plan.moving.push(r);
            continue;
        } else if old && sid.zip(cutoff).is_some_and(|(s, c)| active(s, c)) {
            plan.kept_active += 1;
        } else if r.activity.is_none() {
            plan.kept_undated += 1;
        } else if old {
            plan.moving.push(r);
            continue;
        }
        if let Some(s) = sid {
            kept_sessions.insert(s);
        }
    }
    let movable = |e: &session_state::ListEntry| {
        let id = e.summary.session_id.as_str();
        !pinned.contains(id) && !recent.contains(id) && !kept_sessions.contains(id)
    };
    plan.moving_sessions = sessions
        .iter()
        .filter(|e| {
            let id = e.summary.session_id.as_str();
            let old = cutoff.is_some_and(|c| e.summary.updated_at.parse().is_some_and(|t| t < c));
            (old || expired.contains(id)) && movable(e)
        })
        .collect();
    if let Some(max) = max_size {
        shrink_to(store, runs, sessions, &pinned, &recent, max, &mut plan)?;
    }
    Ok(plan)
}

/// `--max-size`: adds the oldest sessions (with all their runs; skipped when one is locked)
/// and runs without a saved session to `plan` until the store's runs, messages logs and
/// legacy snapshots take at most `max` bytes; notes in [`GcPlan::over_size`] what remains
/// over.
fn shrink_to<'a>(
    store: &session_state::StateStore,
    runs: &'a [RunFacts],
    sessions: &'a [session_state::ListEntry],
    pinned: &BTreeSet<String>,
    recent: &BTreeSet<&str>,
    max: u64,
    plan: &mut GcPlan<'a>,
) -> Result<(), CliError> {
    let file_size = |p: Result<PathBuf, session_state::StateError>| {
        p.ok()
            .and_then(|p| fs::symlink_metadata(p).ok())
            .filter(fs::Metadata::is_file)
            .map_or(0, |m| m.len())
    };
    let session_bytes =
        |id: &str| file_size(store.messages_path(id)) + file_size(store.legacy_path(id));
    let listed: BTreeSet<&str> = sessions
        .iter()
        .map(|e| e.summary.session_id.as_str())
        .collect();
    let moving_paths: BTreeSet<&Path> = plan.moving.iter().map(|r| r.path.as_path()).collect();
    let moving_ids: BTreeSet<&str> = plan
        .moving_sessions
        .iter()
        .map(|e| e.summary.session_id.as_str())
        .collect();
    let mut total: u64 = runs
        .iter()
        .filter(|r| !moving_paths.contains(r.path.as_path()))
        .map(|r| r.size)
        .sum();
    for id in listed.iter().filter(|id| !moving_ids.contains(*id)) {
        total += session_bytes(id);
    }
    // Candidates, oldest first: sessions by their last save, runs without a saved session
    // by their last activity.
    enum Unit<'a> {
        Session(&'a session_state::ListEntry),
        Run(&'a RunFacts),
    }
    let mut units: Vec<(OffsetDateTime, Unit<'a>)> = Vec::new();
    for e in sessions {
        let id = e.summary.session_id.as_str();
        if pinned.contains(id) || recent.contains(id) || moving_ids.contains(id) {
            continue;
        }
        if let Some(t) = e.summary.updated_at.parse() {
            units.push((t, Unit::Session(e)));
        }
    }
    for r in runs {
        let orphan = r.session_id.as_deref().is_none_or(|s| !listed.contains(s));
        let held = r.session_id.as_deref().is_some_and(|s| pinned.contains(s));
        if orphan
            && !held
            && !r.locked
            && !moving_paths.contains(r.path.as_path())
            && let Some(t) = r.activity
        {
            units.push((t, Unit::Run(r)));
        }
    }
    units.sort_by_key(|(t, _)| *t);
    for (_, unit) in units {
        if total <= max {
            break;
        }
        match unit {
            Unit::Run(r) => {
                total = total.saturating_sub(r.size);
                plan.moving.push(r);
            }
            Unit::Session(e) => {
                let id = e.summary.session_id.as_str();
                let of: Vec<&RunFacts> = runs
                    .iter()
                    .filter(|r| r.session_id.as_deref() == Some(id))
                    .filter(|r| !moving_paths.contains(r.path.as_path()))
                    .collect();
                if of.iter().any(|r| r.locked) {
                    continue;
                }
                for r in of {
                    total = total.saturating_sub(r.size);
                    plan.moving.push(r);
                }
                total = total.saturating_sub(session_bytes(id));
                plan.moving_sessions.push(e);
            }
        }
    }
    plan.over_size = (total > max).then(|| total - max);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// archive

/// Parses a size: a number (decimals allowed) and an optional binary unit `K`, `M`, `G`, `T`
/// (also `KB`/`KiB`…, any case; 1K = 1024 bytes); no unit means bytes.
///
/// # Errors
/// Usage (2) for anything else, or a size above 2^63 bytes.
fn parse_size(text: &str) -> Result<u64, CliError> {
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

/// `sessions gc --older-than AGE [--dry-run]` on the shared store
/// ([`session_pg::PgBackend::gc`]): the same rules as on a local store (runs of a session saved within
/// the window stay, undated runs stay; also runs written to since the cutoff), one action
/// line (or `--json` row) per run and session, then the summary line. Removed items are
/// deleted, not moved to a trash; the store's `gc_audit` table records each of them.
pub(crate) fn gc_shared(
    ctx: &mut Ctx<'_>,
    shared: &Shared,
    args: &GcArgs,
) -> Result<i32, CliError> {
    use crate::json_rows::{ActionKind, ActionStatus};
    use crate::support::housekeeping::{Action, emit};
    if args.empty_trash || args.keep_last.is_some() || args.max_size.is_some() {
        return Err(CliError::Usage(format!(
            "on the shared store {} `sessions gc` takes --older-than (and --dry-run) only: \
             a shared store has no trash, and --keep-last and --max-size work on a local store",
            shared.describe()
        )));
    }
    let Some(age) = args.older_than.as_deref() else {
        return Err(CliError::Usage(
            "on a shared store `sessions gc` needs --older-than AGE".into(),
        ));
    };
    if ctx.read_only && !args.dry_run {
        return Err(CliError::Usage(
            "--read-only: `sessions gc` accepts only --dry-run".into(),
        ));
    }
    let cutoff = crate::timefmt::older_than(age, ctx.now, &ctx.zone)?;
    let cutoff_ms = i64::try_from(cutoff.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MIN);
    let pg = shared.backend()?;
    let report = pg.gc(cutoff_ms, args.dry_run).map_err(|e| {
        CliError::Data(format!(
            "shared store {}: gc: {}",
            shared.describe(),
            crate::error::one_line(&e)
        ))
    })?;
    let status = if args.dry_run {
        ActionStatus::Planned
    } else {
        ActionStatus::Done
    };
    let (mut runs, mut sessions, mut bytes) = (0u64, 0u64, 0u64);
    for item in &report.removed {
        let (action, file) = match item.kind {
            session_pg::GcKind::Session => {
                sessions += 1;
                (ActionKind::RemoveSession, item.id.clone())
            }
            _ => {
                runs += 1;
                bytes = bytes.saturating_add(item.bytes);
                let host = item.origin_host.as_deref().unwrap_or("-");
                (ActionKind::RemoveRun, format!("{host}:{}", item.id))
            }
        };
        let action = Action {
            action,
            file,
            id: Some(item.id.clone()),
            status,
            detail: format!("{} line(s), {} bytes", item.lines, item.bytes),
        };
        emit(ctx, args.json, &action)?;
    }
    if !args.json {
        let verb = if args.dry_run {
            "would remove"
        } else {
            "removed"
        };
        let audit = if args.dry_run || report.removed.is_empty() {
            ""
        } else {
            "; recorded in the store's gc_audit table"
        };
        writeln!(
            ctx.out,
            "{verb} {runs} run(s) ({}) and {sessions} session(s){audit}; kept {} of sessions \
             saved within {age}, {} undated, {} written to since the cutoff",
            crate::style::bytes(bytes),
            report.kept_active_session,
            report.kept_undated,
            report.kept_recent_write,
        )?;
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
