//! Id look-ups for command lines: the runs and sessions whose id starts with a prefix (the
//! way people type ids, as git takes a short hash). Range scans on the `COLLATE "C"` primary
//! keys, so the cost does not grow with the store.

use session_storage::{StorageError, Target, checked_id};

use crate::backend::PgBackend;
use crate::derive::RunFold;
use crate::error::{PgError, RowExt, query, storage};

/// One run or session id that starts with a prefix ([`PgBackend::ids_with_prefix`]), with
/// what tells it apart from the others.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PrefixMatch {
    /// The whole id.
    pub id: String,
    /// A run's start (`YYYY-MM-DDTHH:MM:SS.mmmZ`, UTC); a session's `updated_at` as saved.
    pub time: Option<String>,
    /// A run's first input; a session's last user message.
    pub text: Option<String>,
}

/// The runs and sessions whose id starts with a prefix, each in id order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PrefixMatches {
    /// Runs (only stored runs whose first record is a header, as listings show them).
    pub runs: Vec<PrefixMatch>,
    /// Saved sessions.
    pub sessions: Vec<PrefixMatch>,
}

/// The exclusive upper bound of the ids starting with `prefix` (safe ids are printable
/// ASCII, all below DEL).
fn upper_bound(prefix: &str) -> String {
    format!("{prefix}\u{7f}")
}

impl PgBackend {
    /// Up to `limit` runs and up to `limit` sessions whose id starts with `prefix` (an id
    /// itself matches too). `prefix` must be a safe id (`session_schema::check_id`).
    ///
    /// # Errors
    /// [`StorageError::UnsafeId`], [`StorageError::Backend`].
    pub fn ids_with_prefix(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<PrefixMatches, StorageError> {
        checked_id(prefix)?;
        let (lo, hi) = (prefix.to_owned(), upper_bound(prefix));
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.pool
            .run(true, move |s| {
                let client = s.client()?;
                let rows = client
                    .query(
                        "SELECT run_id, started_at_utc, summary FROM runs \
                         WHERE is_run AND run_id >= $1 AND run_id < $2 ORDER BY run_id LIMIT $3",
                        &[&lo, &hi, &limit],
                    )
                    .map_err(query("look up run ids"))?;
                let mut out = PrefixMatches::default();
                for r in &rows {
                    let id: String = r.col(0)?;
                    let started: String = r.col(1)?;
                    let summary: &[u8] = r.col(2)?;
                    let fold: RunFold =
                        serde_json::from_slice(summary).map_err(|e| PgError::Inconsistent {
                            detail: format!("summary of run {id}: {e}"),
                        })?;
                    let text = fold.summary(&id).first_input;
                    out.runs.push(PrefixMatch {
                        id,
                        time: (!started.is_empty()).then_some(started),
                        text,
                    });
                }
                let rows = client
                    .query(
                        "SELECT session_id, updated_at, last_user_message FROM sessions \
                         WHERE session_id >= $1 AND session_id < $2 ORDER BY session_id LIMIT $3",
                        &[&lo, &hi, &limit],
                    )
                    .map_err(query("look up session ids"))?;
                for r in &rows {
                    out.sessions.push(PrefixMatch {
                        id: r.col(0)?,
                        time: r.col(1)?,
                        text: r.col(2)?,
                    });
                }
                Ok(out)
            })
            .map_err(|e| storage("look up ids in", Target::Store, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upper_bound_follows_every_id_with_the_prefix() {
        let hi = upper_bound("7a1e");
        for id in ["7a1e", "7a1e0001-0000", "7a1e~", "7a1eZZ"] {
            assert!(id < hi.as_str(), "{id}");
        }
        assert!("7a1f" > hi.as_str());
    }
}
