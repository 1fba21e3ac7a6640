//! Upgrades of run index rows written by earlier versions, run by the schema setup in
//! `db.rs` (below the index's queries in `runs.rs`).

use rusqlite::Connection;

use crate::tree;

/// Drops rows that may be files without a header from an index built by a version that
/// listed them as runs (before `runs.diagnostic`), with their watch entries and their day
/// directory's record, so that the next refresh reads them again.
pub(crate) fn forget_possible_non_runs(conn: &Connection) -> rusqlite::Result<()> {
    // The paths as stored (whatever their storage class), so the deletes match them exactly.
    let paths: Vec<crate::column::OwnedValue> = {
        let mut stmt =
            conn.prepare("SELECT path FROM runs WHERE started_at = '' OR record_count = 0")?;
        let rows = stmt.query_map([], |r| crate::column::owned_row(r, 1))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()?
            .into_iter()
            .flatten()
            .collect()
    };
    for path in &paths {
        conn.execute("DELETE FROM runs WHERE path = ?1", [path])?;
        conn.execute("DELETE FROM run_watch WHERE path = ?1", [path])?;
        // A path that is not text names no day directory we could have recorded.
        if let crate::column::OwnedValue::Text(bytes) = path {
            let text = String::from_utf8_lossy(bytes);
            conn.execute(
                "DELETE FROM run_dirs WHERE path = ?1",
                [tree::parent_rel(&text)],
            )?;
        }
    }
    Ok(())
}
