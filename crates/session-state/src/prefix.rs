//! Short ids: the run and session ids that start with a prefix, found by a range query on an
//! index (`id >= prefix AND id < prefix'`, where `prefix'` is the prefix with its last byte
//! raised by one), and the newest run of a workspace. The cost is one index range per
//! query, whatever the size of the store; nothing walks the run tree.

use rusqlite::Connection;
use rusqlite::types::Value;

use crate::column::{owned_row, text_of};
use crate::db::{NORM_FN, db_err};
use crate::error::Result;
use crate::store::StateStore;
use crate::workspace::normalize_workspace_root;

/// What a short id matched: a run or a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum IdKind {
    /// A run id (the `runs` index).
    Run,
    /// A session id (`session_state`, or the session of an indexed run).
    Session,
}

impl IdKind {
    /// `run` or `session`.
    pub fn as_str(self) -> &'static str {
        match self {
            IdKind::Run => "run",
            IdKind::Session => "session",
        }
    }
}

/// One id that starts with a prefix, with what tells it apart from the others.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct IdMatch {
    /// Run or session.
    pub kind: IdKind,
    /// The whole id.
    pub id: String,
    /// A run's start (the run index's UTC key, `YYYY-MM-DDTHH:MM:SS.sssZ`); a session's
    /// `updated_at` as stored, or the start of its newest run when it has no saved state.
    pub time: Option<String>,
    /// A run's first input; a session's last user message, or its newest run's first input.
    pub text: Option<String>,
}

/// The exclusive upper bound of the ids starting with `prefix`: `prefix` with its last byte
/// raised by one. `None` for an empty prefix, or one whose last character is not ASCII below
/// DEL (no safe id has such a character: callers check ids with `session_schema::check_id`).
pub fn prefix_upper_bound(prefix: &str) -> Option<String> {
    let cut = prefix.len().checked_sub(1)?;
    let head = prefix.get(..cut)?;
    let b = *prefix.as_bytes().get(cut)?;
    if !(0x20..0x7e).contains(&b) {
        return None;
    }
    Some(format!("{head}{}", char::from(b + 1)))
}

impl StateStore {
    /// Run ids of the run index that start with `prefix` (files that are not runs left out),
    /// at most `limit`, in id order, each with its newest start and first input. One range
    /// over the run-id index (`runs_by_run_id`). The index is as fresh as the last
    /// [`StateStore::index_runs`].
    ///
    /// # Errors
    /// [`StateError::Db`](crate::StateError::Db).
    pub fn run_ids_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<IdMatch>> {
        let Some(upper) = prefix_upper_bound(prefix) else {
            return Ok(Vec::new());
        };
        let conn = self.lock();
        self.id_matches(
            &conn,
            IdKind::Run,
            "SELECT run_id, max(started_at_utc), first_input FROM runs \
             WHERE run_id >= ?1 AND run_id < ?2 AND diagnostic IS NULL \
             GROUP BY run_id ORDER BY run_id LIMIT ?3",
            prefix,
            &upper,
            limit,
        )
    }

    /// Session ids that start with `prefix`, at most `limit`, in id order: those with a
    /// `session_state` row (its `updated_at` and last user message) and those only the run
    /// index knows (their newest run's start and first input). Two index ranges (the
    /// primary key of `session_state`, `runs_by_session_utc`).
    ///
    /// # Errors
    /// [`StateError::Db`](crate::StateError::Db).
    pub fn session_ids_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<IdMatch>> {
        let Some(upper) = prefix_upper_bound(prefix) else {
            return Ok(Vec::new());
        };
        let conn = self.lock();
        let mut saved = self.id_matches(
            &conn,
            IdKind::Session,
            "SELECT session_id, updated_at, last_user_message FROM session_state \
             WHERE session_id >= ?1 AND session_id < ?2 ORDER BY session_id LIMIT ?3",
            prefix,
            &upper,
            limit,
        )?;
        let of_runs = self.id_matches(
            &conn,
            IdKind::Session,
            "SELECT session_id, max(started_at_utc), first_input FROM runs \
             WHERE session_id >= ?1 AND session_id < ?2 AND diagnostic IS NULL \
             GROUP BY session_id ORDER BY session_id LIMIT ?3",
            prefix,
            &upper,
            limit,
        )?;
        for m in of_runs {
            if !saved.iter().any(|s| s.id == m.id) {
                saved.push(m);
            }
        }
        saved.sort_by(|a, b| a.id.cmp(&b.id));
        saved.truncate(limit);
        Ok(saved)
    }

    /// The newest run (by start) of the workspace `root`: a run whose own workspace root
    /// (`run.start.ui_context` or the header's cwd) is `root`, or whose session's saved
    /// `workspace_root` is (both compared normalised, as the listings do). Walks the
    /// start-time index newest first and stops at the first match.
    ///
    /// # Errors
    /// [`StateError::Db`](crate::StateError::Db).
    pub fn newest_run_of_workspace(&self, root: &str) -> Result<Option<IdMatch>> {
        let conn = self.lock();
        let sql = format!(
            "SELECT run_id, started_at_utc, first_input FROM runs \
             WHERE diagnostic IS NULL AND ({NORM_FN}(workspace_root) = ?1 OR session_id IN \
             (SELECT session_id FROM session_state WHERE {NORM_FN}(workspace_root) = ?1)) \
             ORDER BY started_at_utc DESC, path DESC LIMIT 1"
        );
        let root = normalize_workspace_root(root);
        let mut stmt = conn
            .prepare(&sql)
            .map_err(db_err(&self.db_path, "query runs"))?;
        let rows = stmt
            .query_map([Value::Text(root)], |r| match_of(IdKind::Run, r))
            .map_err(db_err(&self.db_path, "query runs"))?;
        let found = rows
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(db_err(&self.db_path, "read run row"))?;
        Ok(found.into_iter().flatten().next())
    }

    fn id_matches(
        &self,
        conn: &Connection,
        kind: IdKind,
        sql: &str,
        prefix: &str,
        upper: &str,
        limit: usize,
    ) -> Result<Vec<IdMatch>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut stmt = conn
            .prepare_cached(sql)
            .map_err(db_err(&self.db_path, "query ids"))?;
        let rows = stmt
            .query_map(
                [
                    Value::Text(prefix.to_owned()),
                    Value::Text(upper.to_owned()),
                    Value::Integer(limit),
                ],
                |r| match_of(kind, r),
            )
            .map_err(db_err(&self.db_path, "query ids"))?;
        let found = rows
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(db_err(&self.db_path, "read id"))?;
        Ok(found.into_iter().flatten().collect())
    }
}

/// `(id, time, text)` of a row as an [`IdMatch`]; `None` when the id is not text.
fn match_of(kind: IdKind, r: &rusqlite::Row<'_>) -> rusqlite::Result<Option<IdMatch>> {
    let v = owned_row(r, 3)?;
    let text = |i: usize| v.get(i).and_then(|v| text_of(v.as_ref()).0);
    Ok(text(0).map(|id| IdMatch {
        kind,
        id,
        time: text(1).filter(|t| !t.is_empty()),
        text: text(2),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upper_bounds() {
        assert_eq!(prefix_upper_bound("7a1e").as_deref(), Some("7a1f"));
        assert_eq!(prefix_upper_bound("abc-").as_deref(), Some("abc."));
        assert_eq!(prefix_upper_bound("z").as_deref(), Some("{"));
        assert_eq!(prefix_upper_bound("a=").as_deref(), Some("a>"));
        assert_eq!(prefix_upper_bound(""), None);
        assert_eq!(prefix_upper_bound("a~"), None);
        assert_eq!(prefix_upper_bound("aé"), None);
    }
}
