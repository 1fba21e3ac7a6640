//! `sessions sessions`: saved sessions like the reference's session list.

use std::collections::BTreeMap;

use session_state::{EntrySource, LeaseHolder, ListQuery};

use crate::Ctx;
use crate::cli::SessionsArgs;
use crate::error::{CliError, EXIT_OK};
use crate::json_rows::{LeaseHolderRow, Row, SessionRow, SessionSource, write_row};
use crate::support::open::{open_store_read_only, state_err};
use crate::support::paths::workspace_of;
use crate::support::table::{Cell, Column, Step, Table};

/// Warns about message logs without a `state.db` row (a zero-byte or replaced `state.db`, a
/// row deleted by hand): those sessions are in no listing, and saying nothing would present
/// them as gone. `listed` are the ids of a listing of every session (unscoped, not cut by
/// `--limit`), so the check costs what the answer costs: one listing of `messages/`. A
/// paged or workspace-scoped listing does not check (it would list every session and every
/// message log on every call); `sessions verify` reports each orphan (`orphan_messages`) and
/// `sessions repair` rebuilds its row.
fn warn_orphans<'a>(ctx: &mut Ctx<'_>, listed: impl Iterator<Item = &'a str>) {
    let db_ids = listed.map(str::to_owned).collect();
    let orphans = crate::support::open::orphan_messages(&ctx.root.path, &db_ids);
    if !orphans.is_empty() {
        let first = orphans
            .iter()
            .take(3)
            .map(|(id, _)| id.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        ctx.warn(&format!(
            "{} message log(s) in messages/ have no state.db row and are not listed ({first}{}); \
             `sessions repair` rebuilds their rows",
            orphans.len(),
            if orphans.len() > 3 { ", …" } else { "" }
        ));
    }
}

/// `sessions sessions`: saved sessions, newest first, on the local store.
///
/// # Errors
/// Usage (2), not found (3) or data (4), as the command's help describes.
pub(crate) fn run(ctx: &mut Ctx<'_>, args: &SessionsArgs) -> Result<i32, CliError> {
    // Listing needs no index: the store is only read.
    let store = open_store_read_only(ctx)?;
    let mut query = ListQuery::all();
    let scope = if args.all {
        None
    } else {
        let ws = match &args.workspace {
            Some(w) => crate::support::listing::workspace_arg(ctx, w)?,
            None => workspace_of(&ctx.cwd()?).to_string_lossy().into_owned(),
        };
        query = query.workspace(ws.clone());
        Some(ws)
    };
    if args.limit > 0 {
        query = query.limit(args.limit);
    }
    let page = store.list(&query).map_err(state_err)?;
    for d in &page.diagnostics {
        let msg = format!("{}: {}", d.path.display(), d.detail);
        ctx.warn(&msg);
    }
    if scope.is_none() && page.next_cursor.is_none() {
        warn_orphans(
            ctx,
            page.entries.iter().map(|e| e.summary.session_id.as_str()),
        );
    }
    // Sessions a runtime has open (their lease is held): probed, never waited for.
    let open: BTreeMap<String, LeaseHolder> = match store.open_sessions() {
        Ok(list) => list.into_iter().map(|o| (o.session_id, o.holder)).collect(),
        Err(e) => {
            ctx.warn(&format!(
                "cannot tell which sessions are open: {}",
                crate::error::one_line(&e)
            ));
            BTreeMap::new()
        }
    };
    // Titles and pins (our table; none in a store without it).
    let labels = crate::support::labels::titles(&store)?;
    let rows: Vec<(&session_schema::SessionStateSummary, bool)> = page
        .entries
        .iter()
        .map(|e| (&e.summary, e.source == EntrySource::Legacy))
        .collect();
    let more = page.next_cursor.is_some();
    write_sessions(ctx, args, scope.as_deref(), &rows, &labels, &open, more)
}

/// `sessions sessions` on a shared store: its sessions through
/// [`SessionStore::list_sessions`](session_storage::SessionStore::list_sessions), shown as
/// on a local store (a shared store keeps no titles or pins, and tells no lease holders).
pub(crate) fn sessions_shared(
    ctx: &mut Ctx<'_>,
    shared: &crate::backend::Shared,
    args: &SessionsArgs,
) -> Result<i32, CliError> {
    use session_storage::SessionStore;
    let pg = shared.backend()?;
    let scope = if args.all {
        None
    } else {
        Some(match &args.workspace {
            Some(w) => crate::support::listing::workspace_arg(ctx, w)?,
            None => workspace_of(&ctx.cwd()?).to_string_lossy().into_owned(),
        })
    };
    let page = pg
        .list_sessions(&session_storage::SessionListQuery {
            workspace: scope.clone(),
            limit: (args.limit > 0).then_some(args.limit),
            after: None,
        })
        .map_err(|e| crate::backend::storage_err(shared, e))?;
    for n in &page.notes {
        ctx.warn(n);
    }
    let rows: Vec<(&session_schema::SessionStateSummary, bool)> =
        page.sessions.iter().map(|s| (s, false)).collect();
    let more = page.next_cursor.is_some();
    write_sessions(
        ctx,
        args,
        scope.as_deref(),
        &rows,
        &BTreeMap::new(),
        &BTreeMap::new(),
        more,
    )
}

/// The sessions listing of either kind of store: `--json` rows or the table. `rows` are the
/// summaries with whether each is a legacy snapshot; `more`: the listing was cut by
/// `--limit`.
fn write_sessions(
    ctx: &mut Ctx<'_>,
    args: &SessionsArgs,
    scope: Option<&str>,
    rows: &[(&session_schema::SessionStateSummary, bool)],
    labels: &BTreeMap<String, session_state::SessionLabel>,
    open: &BTreeMap<String, LeaseHolder>,
    more: bool,
) -> Result<i32, CliError> {
    if args.json {
        for (s, legacy) in rows {
            let label = labels.get(&s.session_id);
            let row = SessionRow {
                session_id: s.session_id.clone(),
                title: label.and_then(|l| l.title.clone()),
                pinned: label.is_some_and(|l| l.pinned),
                updated_at: s.updated_at.as_str().to_owned(),
                run_id: s.run_id.clone(),
                message_count: s.message_count,
                last_user_message: s.last_user_message.clone(),
                workspace_root: s.workspace_root.clone(),
                source: if *legacy {
                    SessionSource::Legacy
                } else {
                    SessionSource::Db
                },
                open: open.get(&s.session_id).map(|h| LeaseHolderRow {
                    pid: h.pid,
                    host: h.host.clone(),
                    since: h.since.as_ref().map(|t| t.as_str().to_owned()),
                    purpose: h.purpose.as_str().to_owned(),
                    program: h.program.clone(),
                }),
            };
            write_row(ctx.out, &Row::Session(row))?;
        }
        return Ok(EXIT_OK);
    }
    let times = ctx.times(args.utc);
    match scope {
        Some(ws) => ctx.hint(&format!("workspace {ws} (--all for every workspace)"))?,
        None => ctx.hint("all workspaces")?,
    }
    // On a terminal: the message clipped first (to 20 columns), then the workspace (from the
    // left, keeping its last components), then the session id to its 8-character prefix,
    // then the OPEN column goes and the message is clipped further.
    const SESSION: usize = 1;
    const OPEN: usize = 3;
    const LAST: usize = 4;
    const WORKSPACE: usize = 5;
    let mut table = Table::new(
        vec![
            Column::text("UPDATED"),
            Column::id("SESSION"),
            Column::number("MSGS"),
            Column::text("OPEN"),
            Column::text("LAST USER MESSAGE"),
            Column::path("WORKSPACE"),
        ],
        vec![
            Step::Shrink(LAST, 20),
            Step::Shrink(WORKSPACE, 12),
            Step::Shrink(SESSION, 8),
            Step::Drop(OPEN),
            Step::Shrink(LAST, 10),
            Step::Shrink(WORKSPACE, 8),
        ],
    );
    for (s, legacy) in rows {
        let msgs = s.message_count.map_or("-".to_owned(), |n| n.to_string());
        let last = s.last_user_message.as_deref().unwrap_or("");
        let last = if *legacy {
            format!("(legacy) {last}")
        } else {
            last.to_owned()
        };
        // A title goes first (`@title` names the session), a pin is marked.
        let last = match labels.get(&s.session_id) {
            Some(l) => {
                let title = l
                    .title
                    .as_deref()
                    .map(|t| format!("\"{t}\" "))
                    .unwrap_or_default();
                let pin = if l.pinned { "[pinned] " } else { "" };
                format!("{pin}{title}{last}")
            }
            None => last,
        };
        // Who has it open: `pid N` (its lease holder), `yes` when the pid is not known.
        let held = match open.get(&s.session_id) {
            Some(h) => h
                .pid
                .map_or_else(|| "yes".to_owned(), |p| format!("pid {p}")),
            None => "-".to_owned(),
        };
        table.row(vec![
            Cell::text(times.show(s.updated_at.as_str())),
            Cell::text(s.session_id.clone()),
            Cell::text(msgs),
            Cell::text(held),
            Cell::text(last),
            Cell::text(s.workspace_root.as_deref().unwrap_or("-")),
        ]);
    }
    if rows.is_empty() {
        ctx.hint("(no sessions)")?;
    } else {
        ctx.table(&table)?;
    }
    if more {
        ctx.hint(&format!(
            "showing the newest {}; --limit 0 shows all",
            args.limit
        ))?;
    }
    Ok(EXIT_OK)
}
