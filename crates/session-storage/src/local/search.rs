//! [`RunSearch`] over the local store's `search.db` (session-state's [`SearchIndex`]).
//!
//! The index is searched as it was last brought up to date: the one who writes run files
//! refreshes it (session-replay's `io::search::refresh_search`, which `sessions search`
//! calls after the run index refresh); this backend never reads run files to answer.

use session_state::{MatchedBy, SearchIndex, SearchQuery, StateError};

use super::{LocalBackend, state_err};
use crate::error::{Result, StorageError, Target};
use crate::search::{RunSearch, RunSearchHit, RunSearchQuery, SearchMatch, search_unavailable};

impl RunSearch for LocalBackend {
    /// Searches `<root>/search.db` (see the module documentation); BM25 ranks the word
    /// hits (its score negated, so higher is better).
    ///
    /// # Errors
    /// [`StorageError::SearchUnavailable`] when there is no `search.db` (or one of another
    /// layout version) yet; [`StorageError::InvalidSearchQuery`] for bad FTS5 syntax with
    /// [`RunSearchQuery::native_syntax`]; [`StorageError::Backend`].
    fn search(&self, query: &RunSearchQuery) -> Result<Vec<RunSearchHit>> {
        let index = SearchIndex::open_read_only(self.root())
            .map_err(|e| state_err("search", Target::Store, e))?
            .ok_or_else(|| {
                search_unavailable(
                    "local",
                    format!(
                        "no search index at {} yet (`sessions search` builds it)",
                        self.root().join(session_state::SEARCH_DB).display()
                    ),
                )
            })?;
        let mut q = SearchQuery::new(query.text.clone());
        q.fts = query.native_syntax;
        q.session_id.clone_from(&query.session_id);
        q.workspace.clone_from(&query.workspace);
        q.since_ms = query.since_ms;
        q.until_ms = query.until_ms;
        q.kinds.clone_from(&query.kinds);
        q.limit = query.limit;
        let hits = index.search(&q).map_err(|e| match e {
            StateError::SearchQuery { query, message } => {
                StorageError::InvalidSearchQuery { query, message }
            }
            e => state_err("search", Target::Store, e),
        })?;
        Ok(hits
            .into_iter()
            .map(|h| RunSearchHit {
                run_id: h.run_id,
                session_id: h.session_id,
                workspace: h.workspace,
                location: h.rel_path,
                byte_offset: h.byte_offset,
                kind: h.kind,
                time_ms: h.time_ms,
                snippet: h.snippet,
                matched_by: match h.matched_by {
                    MatchedBy::Words => SearchMatch::Words,
                    _ => SearchMatch::Substring,
                },
                score: match h.matched_by {
                    MatchedBy::Words => -h.score,
                    _ => 0.0,
                },
            })
            .collect())
    }
}
