//! Session labels: the title people give a session and whether it is pinned, in our own
//! table `session_labels` of `state.db` (added by `user_version` 7; the reference ignores
//! tables it does not know, docs/format.md "Our tables").
//!
//! A label is about a session id, not about its row: it stays while the session is in the
//! trash (a restored session gets its title and pin back) and is removed only when cleared.
//! Housekeeping (`sessions gc`) never moves a pinned session or its runs.

use rusqlite::params;

use crate::column::Cols;
use crate::db::{WriteTx, db_err};
use crate::error::Result;
use crate::store::StateStore;
use crate::store::checked;

/// The columns of `session_labels`, in table order.
const LABEL_COLUMNS: &[&str] = &["session_id", "title", "pinned", "updated_at"];

/// One row of `session_labels`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionLabel {
    /// The session id (the key; need not have a `session_state` row).
    pub session_id: String,
    /// The title, when one was given (never empty: clearing removes it).
    pub title: Option<String>,
    /// Whether the session is pinned (never expires under any `gc` rule).
    pub pinned: bool,
    /// When the label last changed (RFC 3339, UTC, milliseconds), as written.
    pub updated_at: String,
    /// Values of the row that are not what their column should hold (the row is still
    /// returned: a title decoded with U+FFFD, a pin that is not an integer read as unpinned).
    pub damage: Vec<crate::ColumnDamage>,
}

impl StateStore {
    /// Every session label, by session id. A store without the table (opened read-only
    /// before the migration) has none.
    ///
    /// # Errors
    /// [`crate::StateError::Db`] when the table cannot be read.
    pub fn labels(&self) -> Result<Vec<SessionLabel>> {
        let conn = self.lock();
        let err = db_err(&self.db_path, "read session labels");
        let mut stmt = conn
            .prepare(
                "SELECT session_id, title, pinned, updated_at FROM session_labels \
                 ORDER BY session_id",
            )
            .map_err(err)?;
        let err = db_err(&self.db_path, "read session labels");
        let mut rows = stmt.query([]).map_err(err)?;
        let mut out = Vec::new();
        loop {
            let row = match rows.next() {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(e) => return Err(db_err(&self.db_path, "read session labels")(e)),
            };
            let label = (|| -> rusqlite::Result<SessionLabel> {
                let mut c = Cols::new(row, "session_labels", LABEL_COLUMNS)?;
                let session_id = c.text_or_empty(0)?;
                let title = c.text(1)?.filter(|t| !t.is_empty());
                let pinned = c.int_required(2)?.is_some_and(|n| n != 0);
                let updated_at = c.text(3)?.unwrap_or_default();
                Ok(SessionLabel {
                    session_id,
                    title,
                    pinned,
                    updated_at,
                    damage: c.finish(),
                })
            })()
            .map_err(db_err(&self.db_path, "read session labels"))?;
            out.push(label);
        }
        Ok(out)
    }

    /// Gives session `session_id` the title `title` (`None` or an empty text clears it).
    /// Titles need not be unique; the caller decides what an ambiguous title means.
    ///
    /// # Errors
    /// [`crate::StateError::UnsafeId`], [`crate::StateError::ReadOnly`],
    /// [`crate::StateError::Db`], [`crate::StateError::Busy`].
    pub fn set_title(&self, session_id: &str, title: Option<&str>, now: &str) -> Result<()> {
        let title = title.filter(|t| !t.is_empty());
        self.write_label(
            session_id,
            "INSERT INTO session_labels (session_id, title, pinned, updated_at) \
             VALUES (?1, ?2, 0, ?3) \
             ON CONFLICT(session_id) DO UPDATE SET title = excluded.title, \
             updated_at = excluded.updated_at",
            params![session_id, title, now],
        )
    }

    /// Pins (`true`) or unpins session `session_id`.
    ///
    /// # Errors
    /// As [`StateStore::set_title`].
    pub fn set_pinned(&self, session_id: &str, pinned: bool, now: &str) -> Result<()> {
        self.write_label(
            session_id,
            "INSERT INTO session_labels (session_id, title, pinned, updated_at) \
             VALUES (?1, NULL, ?2, ?3) \
             ON CONFLICT(session_id) DO UPDATE SET pinned = excluded.pinned, \
             updated_at = excluded.updated_at",
            params![session_id, i64::from(pinned), now],
        )
    }

    /// Runs one upsert of a label, then drops the row if it says nothing any more (no title,
    /// not pinned), in one transaction.
    fn write_label(
        &self,
        session_id: &str,
        sql: &str,
        args: &[&dyn rusqlite::ToSql],
    ) -> Result<()> {
        checked(session_id)?;
        self.check_writable("label a session")?;
        let conn = self.lock();
        let tx = WriteTx::begin(&conn, &self.db_path, self.options.max_busy_wait)?;
        let err = || db_err(&self.db_path, "write session label");
        conn.execute(sql, args).map_err(err())?;
        conn.execute(
            "DELETE FROM session_labels WHERE session_id = ?1 AND title IS NULL AND pinned = 0",
            [session_id],
        )
        .map_err(err())?;
        tx.commit()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_and_pins_are_kept_apart_and_cleared_rows_go() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::open(dir.path()).unwrap();
        let t = "2026-12-01T10:00:00.000Z";
        store.set_title("s1", Some("release notes"), t).unwrap();
        store.set_pinned("s1", true, t).unwrap();
        store.set_pinned("s2", true, t).unwrap();
        let labels = store.labels().unwrap();
        assert_eq!(labels.len(), 2);
        assert_eq!(labels[0].session_id, "s1");
        assert_eq!(labels[0].title.as_deref(), Some("release notes"));
        assert!(labels[0].pinned);
        assert_eq!(labels[1].title, None);
        store.set_title("s1", None, t).unwrap();
        store.set_pinned("s2", false, t).unwrap();
        let labels = store.labels().unwrap();
        assert_eq!(labels.len(), 1);
        assert_eq!(labels[0].session_id, "s1");
        assert_eq!(labels[0].title, None);
        assert!(labels[0].pinned);
        assert!(matches!(
            store.set_title("../x", Some("t"), t),
            Err(crate::StateError::UnsafeId { .. })
        ));
    }

    #[test]
    fn a_read_only_store_refuses_labels_and_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        StateStore::open(dir.path())
            .unwrap()
            .set_pinned("s1", true, "2026-12-01T10:00:00.000Z")
            .unwrap();
        let ro = StateStore::open_read_only(dir.path()).unwrap();
        assert!(ro.labels().unwrap()[0].pinned);
        assert!(matches!(
            ro.set_pinned("s1", false, "x"),
            Err(crate::StateError::ReadOnly { .. })
        ));
    }

    /// `user_version` 6 (before the labels): a read-only open reads no labels and changes
    /// nothing; a writable open adds the table and sets the current version (9).
    #[test]
    fn version_6_stores_get_the_table_on_the_first_writable_open() {
        let dir = tempfile::tempdir().unwrap();
        drop(StateStore::open(dir.path()).unwrap());
        let db = dir.path().join("state.db");
        let version = |c: &rusqlite::Connection| -> i64 {
            c.query_row("PRAGMA user_version", [], |r| r.get(0))
                .unwrap()
        };
        let conn = rusqlite::Connection::open(&db).unwrap();
        assert_eq!(version(&conn), 12);
        conn.execute_batch("DROP TABLE session_labels; PRAGMA user_version = 6;")
            .unwrap();
        drop(conn);
        let ro = StateStore::open_read_only(dir.path()).unwrap();
        assert!(ro.labels().unwrap().is_empty());
        drop(ro);
        let conn = rusqlite::Connection::open(&db).unwrap();
        assert_eq!(version(&conn), 6);
        drop(conn);
        let store = StateStore::open(dir.path()).unwrap();
        store
            .set_title("s1", Some("t"), "2026-12-01T10:00:00.000Z")
            .unwrap();
        drop(store);
        let conn = rusqlite::Connection::open(&db).unwrap();
        assert_eq!(version(&conn), 12);
        let title: String = conn
            .query_row(
                "SELECT title FROM session_labels WHERE session_id = 's1'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(title, "t");
    }
}
