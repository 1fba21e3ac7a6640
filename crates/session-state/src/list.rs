//! `list` (compat §2.9, with legacy entries merged into the order and keyset pagination) and
//! `migrate_legacy`.

use std::cmp::Ordering;
use std::fs;
use std::path::Path;

use rusqlite::types::Value;
use session_schema::{SessionState, SessionStateSummary, Timestamp, is_safe_id};

use crate::column::{Cols, ColumnDamage};
use crate::db::{NORM_FN, ReadTx, db_err};
use crate::error::{Result, StateError};
use crate::legacy::{Adoption, parse_legacy, summary_of};
use crate::store::StateStore;
use crate::types::{
    EntrySource, LegacyLoad, ListCursor, ListDiagnostic, ListEntry, ListPage, ListQuery, LoadNote,
    MessageDamage, MigrationEntry, MigrationOutcome, MigrationReport, WorkspaceFilter,
};
use crate::workspace::normalize_workspace_root;

/// Order of entries: `updated_at` descending (byte order), then `session_id` descending.
fn newer_first(a: (&str, &str), b: (&str, &str)) -> Ordering {
    b.0.cmp(a.0).then_with(|| b.1.cmp(a.1))
}

/// Whether `key` comes strictly after the cursor in listing order.
fn after_cursor(key: (&str, &str), cursor: Option<&ListCursor>) -> bool {
    match cursor {
        None => true,
        Some(c) => newer_first((&c.updated_at, &c.session_id), key) == Ordering::Less,
    }
}

impl StateStore {
    /// Lists sessions newest first: `session_state` rows and legacy snapshots that have no row
    /// yet, merged into one order (`updated_at` descending by string comparison, then
    /// `session_id` descending), filtered by workspace root, limited, and paged with a keyset
    /// cursor on `(updated_at, session_id)`.
    ///
    /// A legacy snapshot that cannot be read is skipped and reported in
    /// [`ListPage::diagnostics`]; its file is left untouched. Summaries are the stored columns
    /// (`SessionStateSummary`, compat §1.8), absent values omitted like the reference.
    ///
    /// # Errors
    /// [`StateError::Db`]; [`StateError::Io`] when `state/` cannot be read (the reference
    /// fails there too).
    pub fn list(&self, query: &ListQuery) -> Result<ListPage> {
        let want = query.limit.map(|l| l.saturating_add(1));
        let root_filter = match &query.workspace {
            WorkspaceFilter::All => None,
            WorkspaceFilter::Root(r) => Some(normalize_workspace_root(r)),
        };
        let mut db_entries: Vec<ListEntry> = Vec::new();
        let mut column_damage: Vec<ColumnDamage> = Vec::new();
        let mut legacy_ids: Vec<(String, bool)> = Vec::new();
        let legacy_names = self.legacy_names()?;
        {
            let conn = self.lock();
            let _rtx = ReadTx::begin(&conn, &self.db_path, self.options.max_busy_wait)?;
            // Index order only (`updated_at DESC`): the `session_id` tie-break is applied in
            // memory, which avoids SQLite's temp b-tree over the whole table. With a limit, the
            // rows sharing the last `updated_at` are fetched completely so the tie-break is
            // exact.
            let mut filters = String::new();
            let mut args: Vec<Value> = Vec::new();
            if let Some(c) = &query.after {
                filters.push_str(" AND (updated_at < ? OR (updated_at = ? AND session_id < ?))");
                args.push(Value::Text(c.updated_at.clone()));
                args.push(Value::Text(c.updated_at.clone()));
                args.push(Value::Text(c.session_id.clone()));
            }
            if let Some(root) = &root_filter {
                filters.push_str(&format!(" AND {NORM_FN}(workspace_root) = ?"));
                args.push(Value::Text(root.clone()));
            }
            let select = "SELECT session_id, updated_at, run_id, message_count, last_user_message, workspace_root \
                          FROM session_state WHERE 1";
            let mut sql = format!("{select}{filters} ORDER BY updated_at DESC");
            if let Some(n) = want {
                sql.push_str(&format!(" LIMIT {n}"));
            }
            self.query_summaries(&conn, &sql, &args, &mut db_entries, &mut column_damage)?;
            if let Some(n) = want
                && db_entries.len() == n
                && let Some(last) = db_entries.last()
            {
                let boundary = last.summary.updated_at.as_str().to_owned();
                db_entries.retain(|e| e.summary.updated_at.as_str() != boundary);
                let mut tie_args = args.clone();
                tie_args.push(Value::Text(boundary));
                let tie_sql = format!("{select}{filters} AND updated_at = ?");
                self.query_summaries(
                    &conn,
                    &tie_sql,
                    &tie_args,
                    &mut db_entries,
                    &mut column_damage,
                )?;
            }
            let mut exists = conn
                .prepare("SELECT 1 FROM session_state WHERE session_id = ?1")
                .map_err(db_err(&self.db_path, "look up session"))?;
            for name in legacy_names {
                let has = exists
                    .exists([&name])
                    .map_err(db_err(&self.db_path, "look up session"))?;
                legacy_ids.push((name, has));
            }
        }
        let mut diagnostics = Vec::new();
        // Rows read twice (the tie-break query) report their damage once.
        let mut seen: Vec<&ColumnDamage> = Vec::new();
        for d in &column_damage {
            if !seen.contains(&d) {
                seen.push(d);
                diagnostics.push(ListDiagnostic {
                    path: self.db_path.clone(),
                    detail: d.to_string(),
                    column: Some(d.clone()),
                });
            }
        }
        let mut legacy_entries: Vec<ListEntry> = Vec::new();
        for (id, has_row) in legacy_ids {
            if has_row {
                continue;
            }
            let path = self.root.join("state").join(format!("{id}.json"));
            if !is_safe_id(&id) {
                diagnostics.push(ListDiagnostic {
                    path,
                    detail: "file name is not a safe session id".to_owned(),
                    column: None,
                });
                continue;
            }
            // Never follows a link, never waits on a FIFO, never reads more than a session
            // file may hold.
            let bytes = match crate::fsutil::read_if_exists(&path) {
                Ok(Some(b)) => b,
                Ok(None) => continue,
                Err(StateError::Io { source, .. }) => {
                    diagnostics.push(ListDiagnostic {
                        path,
                        detail: format!("cannot read: {source}"),
                        column: None,
                    });
                    continue;
                }
                Err(e) => {
                    diagnostics.push(ListDiagnostic {
                        path,
                        detail: format!("cannot read: {e}"),
                        column: None,
                    });
                    continue;
                }
            };
            match self.pending_migration(&id, &path, &bytes) {
                Ok(pending) => {
                    let summary = summary_of(pending.state());
                    if !after_cursor(
                        (summary.updated_at.as_str(), &summary.session_id),
                        query.after.as_ref(),
                    ) {
                        continue;
                    }
                    if let Some(root) = &root_filter {
                        match &summary.workspace_root {
                            Some(ws) if &normalize_workspace_root(ws) == root => {}
                            _ => continue,
                        }
                    }
                    legacy_entries.push(ListEntry {
                        summary,
                        source: EntrySource::Legacy,
                    });
                }
                Err(e) => diagnostics.push(ListDiagnostic {
                    path,
                    detail: e.to_string(),
                    column: None,
                }),
            }
        }
        let mut entries = db_entries;
        entries.extend(legacy_entries);
        entries.sort_by(|a, b| {
            newer_first(
                (a.summary.updated_at.as_str(), &a.summary.session_id),
                (b.summary.updated_at.as_str(), &b.summary.session_id),
            )
        });
        let mut next_cursor = None;
        if let Some(limit) = query.limit
            && entries.len() > limit
        {
            entries.truncate(limit);
            next_cursor = entries.last().map(|e| ListCursor {
                updated_at: e.summary.updated_at.as_str().to_owned(),
                session_id: e.summary.session_id.clone(),
            });
        }
        Ok(ListPage {
            entries,
            next_cursor,
            diagnostics,
        })
    }

    /// Runs a listing query over `session_state` and appends its rows. Values that are not
    /// what their column should hold (text that is not UTF-8, a BLOB, a NULL id) are listed
    /// as decoded and reported in `damage`; nothing stops the listing.
    fn query_summaries(
        &self,
        conn: &rusqlite::Connection,
        sql: &str,
        args: &[Value],
        out: &mut Vec<ListEntry>,
        damage: &mut Vec<ColumnDamage>,
    ) -> Result<()> {
        const NAMES: [&str; 6] = [
            "session_id",
            "updated_at",
            "run_id",
            "message_count",
            "last_user_message",
            "workspace_root",
        ];
        let mut stmt = conn
            .prepare_cached(sql)
            .map_err(db_err(&self.db_path, "list sessions"))?;
        let mut rows = stmt
            .query(rusqlite::params_from_iter(args.iter()))
            .map_err(db_err(&self.db_path, "list sessions"))?;
        let err = || db_err(&self.db_path, "read session row");
        while let Some(r) = rows.next().map_err(err())? {
            let mut c = Cols::new(r, "session_state", &NAMES).map_err(err())?;
            let summary = SessionStateSummary {
                session_id: c.text_or_empty(0).map_err(err())?,
                updated_at: Timestamp::from_raw(c.text_or_empty(1).map_err(err())?),
                run_id: c.text(2).map_err(err())?,
                message_count: c.count(3).map_err(err())?,
                last_user_message: c.text(4).map_err(err())?,
                workspace_root: c.text(5).map_err(err())?,
                ..Default::default()
            };
            damage.extend(c.finish());
            out.push(ListEntry {
                summary,
                source: EntrySource::Db,
            });
        }
        Ok(())
    }

    /// What the migration of the legacy snapshot `path` of session `id` (no row) stores: the
    /// snapshot, or, when `messages/<id>.jsonl` exists, the row rebuilt from that file.
    fn pending_migration(&self, id: &str, path: &Path, bytes: &[u8]) -> Result<Pending> {
        let legacy = parse_legacy(path, id, bytes)?;
        let main = self.messages_path(id)?;
        Ok(
            match crate::legacy::adopt_messages_file(&main, id, Some(&legacy), path)? {
                Some(adopted) => Pending::Rebuilt(adopted),
                None => Pending::Snapshot(legacy),
            },
        )
    }

    /// Ids of `state/*.json` files with a safe id, sorted.
    fn legacy_names(&self) -> Result<Vec<String>> {
        let dir = self.root.join("state");
        let read = match fs::read_dir(&dir) {
            Ok(r) => r,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(StateError::io("read directory", &dir, e)),
        };
        let mut names = Vec::new();
        for entry in read {
            let entry = entry.map_err(|e| StateError::io("read directory", &dir, e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(id) = name.strip_suffix(".json") {
                names.push(id.to_owned());
            }
        }
        names.sort();
        Ok(names)
    }

    /// Migrates every legacy snapshot that has no row yet (or, with `dry_run`, reports what
    /// would be migrated without writing anything). Legacy files are never deleted; invalid ones
    /// are reported and left untouched. A session that also has `messages/<id>.jsonl` gets its
    /// row rebuilt from that file instead, which is never replaced by the snapshot's list
    /// ([`LoadNote::RebuiltFromMessages`]). Each entry carries the damage and notes of what was
    /// (or would be) migrated; the summary counts the messages actually stored.
    ///
    /// # Errors
    /// [`StateError::Io`] when `state/` cannot be read; [`StateError::Db`]/[`StateError::Busy`]
    /// from the database. Per-file problems are outcomes, not errors.
    pub fn migrate_legacy(&self, dry_run: bool) -> Result<MigrationReport> {
        if !dry_run {
            self.check_writable("migrate legacy snapshots")?;
        }
        let mut report = MigrationReport::default();
        for id in self.legacy_names()? {
            let path = self.root.join("state").join(format!("{id}.json"));
            if !is_safe_id(&id) {
                report.entries.push(MigrationEntry {
                    session_id: id,
                    path,
                    outcome: MigrationOutcome::UnsafeName,
                    damage: Vec::new(),
                    notes: Vec::new(),
                });
                continue;
            }
            let has_row = {
                let conn = self.lock();
                conn.query_row(
                    "SELECT 1 FROM session_state WHERE session_id = ?1",
                    [&id],
                    |_| Ok(()),
                )
                .map(|()| true)
                .or_else(|e| match e {
                    rusqlite::Error::QueryReturnedNoRows => Ok(false),
                    e => Err(e),
                })
                .map_err(db_err(&self.db_path, "look up session"))?
            };
            let mut damage = Vec::new();
            let mut notes = Vec::new();
            let outcome = if has_row {
                MigrationOutcome::AlreadyIndexed
            } else {
                // A snapshot that cannot be read (a directory with a `.json` name, no
                // permission) is an outcome of its own; the other snapshots still migrate.
                let bytes = match crate::fsutil::read_if_exists(&path) {
                    Ok(Some(b)) => b,
                    Ok(None) => continue,
                    Err(e) => {
                        report.entries.push(MigrationEntry {
                            session_id: id,
                            path,
                            outcome: MigrationOutcome::Invalid {
                                detail: e.to_string(),
                            },
                            damage: Vec::new(),
                            notes: Vec::new(),
                        });
                        continue;
                    }
                };
                match self.pending_migration(&id, &path, &bytes) {
                    Err(e) => MigrationOutcome::Invalid {
                        detail: e.to_string(),
                    },
                    Ok(pending) => {
                        let summary = summary_of(pending.state());
                        let migrated = if dry_run {
                            None
                        } else {
                            Some(match &pending {
                                Pending::Snapshot(legacy) => match self.save_migrated(legacy) {
                                    Ok(_) => true,
                                    Err(e) if e.is_conflict() => false,
                                    Err(e) => return Err(e),
                                },
                                Pending::Rebuilt(adopted) => {
                                    self.insert_adopted_row(&adopted.state)?
                                }
                            })
                        };
                        (damage, notes) = pending.into_reports();
                        match migrated {
                            None => MigrationOutcome::WouldMigrate(summary),
                            Some(true) => MigrationOutcome::Migrated(summary),
                            Some(false) => {
                                damage.clear();
                                notes.clear();
                                MigrationOutcome::AlreadyIndexed
                            }
                        }
                    }
                }
            };
            report.entries.push(MigrationEntry {
                session_id: id,
                path,
                outcome,
                damage,
                notes,
            });
        }
        Ok(report)
    }
}

/// A legacy snapshot's migration, as [`StateStore::migrate_legacy`] and `list` see it.
enum Pending {
    /// The snapshot is the session.
    Snapshot(LegacyLoad),
    /// A messages file exists: the row is rebuilt from it.
    Rebuilt(Adoption),
}

impl Pending {
    fn state(&self) -> &SessionState {
        match self {
            Pending::Snapshot(l) => &l.state,
            Pending::Rebuilt(a) => &a.state,
        }
    }

    fn into_reports(self) -> (Vec<MessageDamage>, Vec<LoadNote>) {
        match self {
            Pending::Snapshot(l) => (l.damage, l.notes),
            Pending::Rebuilt(mut a) => {
                a.legacy_notes.append(&mut a.file_notes);
                (a.damage, a.legacy_notes)
            }
        }
    }
}
