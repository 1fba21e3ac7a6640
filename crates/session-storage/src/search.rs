//! Full-text search over a store's run logs and saved session messages, as a trait every
//! backend can implement ([`RunSearch`]), with the query and hit types both backends share
//! (`sessions search`, docs/format.md "search.db").
//!
//! What is searchable is decided by one pure function for every backend
//! (`session_replay::search`: user input, assistant and reasoning text, tool-call arguments,
//! tool output capped at 64 KiB, final answers, and the saved messages of sessions that no
//! run log holds; never `llm.request` snapshots). A backend keeps its own index of those
//! documents: the local one `search.db` (SQLite FTS5, word and trigram tables), the
//! PostgreSQL one a `tsvector` and a `pg_trgm` index. A backend that keeps none says so with
//! [`StorageError::SearchUnavailable`].

use crate::error::{Result, StorageError};

/// Marks the start of a matched part in [`RunSearchHit::snippet`] (U+E000, a private-use
/// character that indexed text never holds: backends replace it by U+FFFD when indexing).
pub const HIGHLIGHT_START: char = '\u{E000}';

/// Marks the end of a matched part in [`RunSearchHit::snippet`] (U+E001).
pub const HIGHLIGHT_END: char = '\u{E001}';

/// Every document kind, as [`RunSearchQuery::kinds`] takes them and hits report them.
pub const DOC_KINDS: [&str; 6] = [
    "user",
    "assistant",
    "reasoning",
    "tool-call",
    "tool-output",
    "final",
];

/// A search request for [`RunSearch::search`]; build with [`RunSearchQuery::new`] and set
/// the filters.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct RunSearchQuery {
    /// What to look for. Plain text: each whitespace-separated word is quoted into a phrase
    /// (so `ux-capac` or `"` never is a syntax error) and all of them must match, as words
    /// or, when every word has three characters or more, as substrings.
    pub text: String,
    /// Pass [`RunSearchQuery::text`] to the backend's own query syntax as written (FTS5 for
    /// the local store, `to_tsquery('simple', …)` for PostgreSQL); a syntax error is
    /// [`StorageError::InvalidSearchQuery`].
    pub native_syntax: bool,
    /// Only documents of this session.
    pub session_id: Option<String>,
    /// Only documents of runs (or saved sessions) with this normalised workspace root.
    pub workspace: Option<String>,
    /// Only documents at or after this time, milliseconds since the Unix epoch (documents
    /// without a time are left out when set).
    pub since_ms: Option<i64>,
    /// Only documents before this time, milliseconds since the Unix epoch.
    pub until_ms: Option<i64>,
    /// Only documents of these kinds ([`DOC_KINDS`]; empty: all).
    pub kinds: Vec<String>,
    /// Most hits returned.
    pub limit: u64,
}

impl RunSearchQuery {
    /// A query for plain `text` with no filter and a limit of 20 hits.
    pub fn new(text: impl Into<String>) -> Self {
        RunSearchQuery {
            text: text.into(),
            limit: 20,
            ..Default::default()
        }
    }

    /// The words of plain [`RunSearchQuery::text`] (split at white space), each a phrase.
    pub fn words(&self) -> Vec<&str> {
        self.text.split_whitespace().collect()
    }

    /// Whether the substring index is asked too: every word has at least three characters
    /// (shorter ones are left to the word index), or the query is in native syntax.
    pub fn wants_substrings(&self) -> bool {
        self.native_syntax || self.words().iter().all(|w| w.chars().count() >= 3)
    }
}

/// How a hit was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum SearchMatch {
    /// The word index, ranked by relevance.
    Words,
    /// The substring index only (the text occurs inside a longer word, or in a script
    /// without spaces). Such hits come after the word hits, most recently indexed first.
    Substring,
}

impl SearchMatch {
    /// `words` or `substring`.
    pub fn as_str(self) -> &'static str {
        match self {
            SearchMatch::Words => "words",
            SearchMatch::Substring => "substring",
        }
    }
}

/// One hit of [`RunSearch::search`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RunSearchHit {
    /// The run id; empty for a saved message of a session that no run log holds.
    pub run_id: String,
    /// The run's (or saved message's) session id.
    pub session_id: Option<String>,
    /// The normalised workspace root of the run or session.
    pub workspace: Option<String>,
    /// Where the record is, for people: the run file relative to the sessions root
    /// (local), `host:run_id` (PostgreSQL), `messages/<session_id>.jsonl` for saved messages.
    pub location: String,
    /// Byte offset of the record in the run log (`show RUN --at OFFSET`), or of the saved
    /// message's line in the session's messages file.
    pub byte_offset: u64,
    /// The document's kind ([`DOC_KINDS`]).
    pub kind: String,
    /// The record's time, milliseconds since the Unix epoch.
    pub time_ms: Option<i64>,
    /// A short excerpt around the match (`…` where text was left out), each matched part
    /// between [`HIGHLIGHT_START`] and [`HIGHLIGHT_END`].
    pub snippet: String,
    /// Which index found it.
    pub matched_by: SearchMatch,
    /// Relevance, higher is better; comparable only between hits of one search found by the
    /// same index (substring hits carry 0).
    pub score: f64,
}

impl RunSearchHit {
    /// A hit found by `matched_by` with every other field empty, for a backend to fill in
    /// (the struct is non-exhaustive).
    pub fn new(matched_by: SearchMatch) -> Self {
        RunSearchHit {
            run_id: String::new(),
            session_id: None,
            workspace: None,
            location: String::new(),
            byte_offset: 0,
            kind: String::new(),
            time_ms: None,
            snippet: String::new(),
            matched_by,
            score: 0.0,
        }
    }
}

/// Full-text search over a store. Implemented by the local backend (over `search.db`) and
/// by session-pg.
pub trait RunSearch {
    /// Ranked hits for `query`: first those of the word index by relevance, then those only
    /// the substring index finds, newest first; at most [`RunSearchQuery::limit`] in all. A
    /// ranked first page does not rank every match of a common word (each backend documents
    /// how it bounds the work).
    ///
    /// # Errors
    /// [`StorageError::InvalidSearchQuery`] for a native-syntax query the backend cannot
    /// parse; [`StorageError::SearchUnavailable`] when the backend keeps no search index;
    /// [`StorageError::Backend`].
    fn search(&self, query: &RunSearchQuery) -> Result<Vec<RunSearchHit>>;
}

/// Plain words as phrases of a query syntax that quotes with `"` and escapes a `"` by
/// doubling it (FTS5): `ux-capac "x` gives `"ux-capac" """x"`. `None` when there is no word.
pub fn quote_phrases(text: &str) -> Option<String> {
    let words: Vec<String> = text
        .split_whitespace()
        .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
        .collect();
    (!words.is_empty()).then(|| words.join(" "))
}

/// The [`StorageError::SearchUnavailable`] of a backend named `backend`.
pub fn search_unavailable(backend: &'static str, reason: impl Into<String>) -> StorageError {
    StorageError::SearchUnavailable {
        backend,
        reason: reason.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phrases_are_quoted_and_substrings_need_three_characters() {
        assert_eq!(
            quote_phrases("ux-capac  \"x"),
            Some("\"ux-capac\" \"\"\"x\"".to_owned())
        );
        assert_eq!(quote_phrases("  "), None);
        let q = RunSearchQuery::new("日本語 abc");
        assert_eq!(q.words(), vec!["日本語", "abc"]);
        assert!(q.wants_substrings());
        assert!(!RunSearchQuery::new("abc ls").wants_substrings());
        let mut q = RunSearchQuery::new("ls");
        q.native_syntax = true;
        assert!(q.wants_substrings());
        assert_eq!(RunSearchQuery::new("x").limit, 20);
    }

    #[test]
    fn unavailable_search_names_the_backend() {
        let e = search_unavailable("test", "no index");
        assert_eq!(e.to_string(), "the test store cannot search: no index");
    }
}
