//! Retention: `gc` by age, with a dry run and an audit table of what was removed.

use std::collections::BTreeSet;

use crate::backend::PgBackend;
use crate::error::RowExt;
use crate::error::{PgError, query};

/// What [`PgBackend::gc`] removes (or would remove).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GcKind {
    /// A run and all its lines.
    Run,
    /// A session and all its messages.
    Session,
}

impl GcKind {
    /// `run` or `session` (the audit table's `kind`).
    pub fn as_str(self) -> &'static str {
        match self {
            GcKind::Run => "run",
            GcKind::Session => "session",
        }
    }
}

/// One removed (or, in a dry run, removable) item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcItem {
    /// Run or session.
    pub kind: GcKind,
    /// Its id.
    pub id: String,
    /// The session of a run (a session's own id for a session).
    pub session_id: Option<String>,
    /// The host that created it.
    pub origin_host: Option<String>,
    /// Stored bytes: a run's committed length, a session's message bytes.
    pub bytes: u64,
    /// A run's lines, a session's messages.
    pub lines: u64,
    /// Its age: a run's latest of `started_at` and last record `ts`, a session's
    /// `updated_at`, as Unix milliseconds.
    pub activity_ms: Option<i64>,
}

/// What [`PgBackend::gc`] did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GcReport {
    /// The cutoff: items older than this were removed (Unix milliseconds).
    pub cutoff_ms: i64,
    /// Whether nothing was removed (a dry run).
    pub dry_run: bool,
    /// Runs, then sessions, removed (or removable), oldest first.
    pub removed: Vec<GcItem>,
    /// Old runs kept because their session was saved at or after the cutoff.
    pub kept_active_session: u64,
    /// Old runs kept because lines were appended to them at or after the cutoff (a writer
    /// still at work with old timestamps).
    pub kept_recent_write: u64,
    /// Runs kept because they have no usable time at all.
    pub kept_undated: u64,
}

/// One row of the `gc_audit` table ([`PgBackend::gc_audit`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcAuditRow {
    /// When, RFC 3339 in UTC.
    pub removed_at: String,
    /// `run` or `session`.
    pub kind: String,
    /// The run or session id.
    pub id: String,
    /// Bytes removed.
    pub bytes: u64,
    /// The `origin_host` of the client that ran `gc`.
    pub removed_by: String,
}

fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

impl PgBackend {
    /// Removes runs whose latest activity (`started_at`, last record `ts`) is older than
    /// `cutoff_ms` (Unix milliseconds), as the local `gc --older-than` does: runs of a session
    /// saved since the cutoff stay, runs without a usable time stay, and runs written to since
    /// the cutoff (server time) stay. Sessions last saved before the cutoff go too, unless a
    /// run of theirs stays. Everything removed is recorded in `gc_audit` (kind, id, session,
    /// origin host, bytes, lines, age, cutoff, and this client's
    /// [`origin_host`](crate::PgOptions::origin_host)) in the same transaction.
    ///
    /// With `dry_run`, reports the same items and changes nothing (no audit rows either).
    ///
    /// # Errors
    /// [`PgError::Query`] (nothing removed), [`PgError::Connect`].
    pub fn gc(&self, cutoff_ms: i64, dry_run: bool) -> Result<GcReport, PgError> {
        let by = self.options.origin_host.clone();
        self.pool.run(false, move |s| {
            let client = s.client()?;
            let mut tx = client.transaction().map_err(query("begin gc"))?;
            let mut report = GcReport {
                cutoff_ms,
                dry_run,
                ..GcReport::default()
            };
            report.kept_undated = to_u64(
                tx.query_one("SELECT count(*) FROM run_tips WHERE activity_ms IS NULL", &[])
                    .map_err(query("count undated runs"))?
                    .col(0)?,
            );
            let old = tx
                .query(
                    "SELECT r.run_id, r.session_id, r.origin_host, t.committed_len, t.line_count, \
                     t.activity_ms, t.last_write_at >= to_timestamp($2), \
                     (s.session_id IS NOT NULL AND (s.updated_ms IS NULL OR s.updated_ms >= $1)) \
                     FROM run_tips t JOIN runs r ON r.run_key = t.run_key \
                     LEFT JOIN sessions s ON s.session_id = r.session_id \
                     WHERE t.activity_ms < $1 ORDER BY t.activity_ms, r.run_id FOR UPDATE OF t",
                    &[&cutoff_ms, &(cutoff_ms as f64 / 1000.0)],
                )
                .map_err(query("find old runs"))?;
            let mut gone = Vec::new();
            for r in &old {
                let recent_write: bool = r.col(6)?;
                let active: bool = r.col(7)?;
                if recent_write {
                    report.kept_recent_write += 1;
                } else if active {
                    report.kept_active_session += 1;
                } else {
                    gone.push(GcItem {
                        kind: GcKind::Run,
                        id: r.col(0)?,
                        session_id: r.col(1)?,
                        origin_host: r.col(2)?,
                        bytes: to_u64(r.col(3)?),
                        lines: to_u64(r.col(4)?),
                        activity_ms: r.col(5)?,
                    });
                }
            }
            let gone_ids: Vec<String> = gone.iter().map(|g| g.id.clone()).collect();
            let sessions = tx
                .query(
                    "SELECT s.session_id, s.origin_host, \
                     coalesce((SELECT sum(length(m.data)) FROM session_messages m WHERE m.session_id = s.session_id), 0)::bigint, \
                     s.message_count, s.updated_ms \
                     FROM sessions s WHERE s.updated_ms < $1 AND NOT EXISTS ( \
                       SELECT 1 FROM runs r WHERE r.session_id = s.session_id \
                       AND NOT (r.run_id = ANY($2))) \
                     ORDER BY s.updated_ms, s.session_id FOR UPDATE OF s",
                    &[&cutoff_ms, &gone_ids],
                )
                .map_err(query("find old sessions"))?;
            let mut kept = BTreeSet::new();
            for r in &sessions {
                let id: String = r.col(0)?;
                kept.insert(id.clone());
                gone.push(GcItem {
                    kind: GcKind::Session,
                    session_id: Some(id.clone()),
                    id,
                    origin_host: r.col(1)?,
                    bytes: to_u64(r.col(2)?),
                    lines: to_u64(r.col(3)?),
                    activity_ms: r.col(4)?,
                });
            }
            if dry_run {
                tx.rollback().map_err(query("end a gc dry run"))?;
                report.removed = gone;
                return Ok(report);
            }
            for g in &gone {
                tx.execute(
                    "INSERT INTO gc_audit (kind, item_id, session_id, origin_host, bytes, lines, \
                     activity_ms, cutoff_ms, removed_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                    &[
                        &g.kind.as_str(),
                        &g.id,
                        &g.session_id,
                        &g.origin_host,
                        &i64::try_from(g.bytes).unwrap_or(i64::MAX),
                        &i64::try_from(g.lines).unwrap_or(i64::MAX),
                        &g.activity_ms,
                        &cutoff_ms,
                        &by,
                    ],
                )
                .map_err(query("record a gc removal"))?;
            }
            tx.execute(
                "DELETE FROM run_lines WHERE run_key IN (SELECT run_key FROM runs WHERE run_id = ANY($1))",
                &[&gone_ids],
            )
            .map_err(query("remove old run lines"))?;
            tx.execute("DELETE FROM runs WHERE run_id = ANY($1)", &[&gone_ids])
                .map_err(query("remove old runs"))?;
            let gone_sessions: Vec<String> = kept.into_iter().collect();
            tx.execute(
                "DELETE FROM session_messages WHERE session_id = ANY($1)",
                &[&gone_sessions],
            )
            .map_err(query("remove old session messages"))?;
            tx.execute(
                "DELETE FROM sessions WHERE session_id = ANY($1)",
                &[&gone_sessions],
            )
            .map_err(query("remove old sessions"))?;
            tx.commit().map_err(query("commit gc"))?;
            report.removed = gone;
            Ok(report)
        })
    }

    /// The audit rows of past `gc` runs, newest first, at most `limit`.
    ///
    /// # Errors
    /// [`PgError::Query`], [`PgError::Connect`].
    pub fn gc_audit(&self, limit: i64) -> Result<Vec<GcAuditRow>, PgError> {
        self.pool.run(true, move |s| {
            let rows = s
                .client()?
                .query(
                    "SELECT to_char(removed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), \
                     kind, item_id, bytes, removed_by FROM gc_audit ORDER BY id DESC LIMIT $1",
                    &[&limit],
                )
                .map_err(query("read the gc audit"))?;
            rows.iter()
                .map(|r| {
                    Ok(GcAuditRow {
                        removed_at: r.col(0)?,
                        kind: r.col(1)?,
                        id: r.col(2)?,
                        bytes: to_u64(r.col(3)?),
                        removed_by: r.col(4)?,
                    })
                })
                .collect()
        })
    }
}
