//! Search hits as `search` and the web viewer show them, from `search.db` or from a shared
//! store: one [`Hit`] view of both, grouped per run, with the matched parts marked.

use session_state::{HIGHLIGHT_END, HIGHLIGHT_START, MatchedBy, SearchHit};
use session_storage::{RunSearchHit, SearchMatch};

/// Hits grouped per run file, runs in the order of their best hit, hits in rank order.
pub(crate) fn group_by_run<H: Hit>(hits: &[H]) -> Vec<(&str, Vec<&H>)> {
    let mut groups: Vec<(&str, Vec<&H>)> = Vec::new();
    for h in hits {
        match groups.iter_mut().find(|(p, _)| *p == h.location()) {
            Some((_, g)) => g.push(h),
            None => groups.push((h.location(), vec![h])),
        }
    }
    groups
}

/// What the output needs of one hit, from `search.db` ([`SearchHit`]) or from a shared store
/// ([`RunSearchHit`]): both mark matches with the same characters.
pub(crate) trait Hit {
    /// The run file relative to the root, or where a shared store keeps the run.
    fn location(&self) -> &str;
    /// The run id; empty for saved messages of a session no run log holds.
    fn run_id(&self) -> &str;
    fn session_id(&self) -> Option<&str>;
    fn workspace(&self) -> Option<&str>;
    fn byte_offset(&self) -> u64;
    fn kind(&self) -> &str;
    fn time_ms(&self) -> Option<i64>;
    fn snippet(&self) -> &str;
    /// Found by the word index (else by substring).
    fn by_words(&self) -> bool;
}

impl Hit for SearchHit {
    fn location(&self) -> &str {
        &self.rel_path
    }
    fn run_id(&self) -> &str {
        &self.run_id
    }
    fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }
    fn workspace(&self) -> Option<&str> {
        self.workspace.as_deref()
    }
    fn byte_offset(&self) -> u64 {
        self.byte_offset
    }
    fn kind(&self) -> &str {
        &self.kind
    }
    fn time_ms(&self) -> Option<i64> {
        self.time_ms
    }
    fn snippet(&self) -> &str {
        &self.snippet
    }
    fn by_words(&self) -> bool {
        self.matched_by == MatchedBy::Words
    }
}

impl Hit for RunSearchHit {
    fn location(&self) -> &str {
        &self.location
    }
    fn run_id(&self) -> &str {
        &self.run_id
    }
    fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }
    fn workspace(&self) -> Option<&str> {
        self.workspace.as_deref()
    }
    fn byte_offset(&self) -> u64 {
        self.byte_offset
    }
    fn kind(&self) -> &str {
        &self.kind
    }
    fn time_ms(&self) -> Option<i64> {
        self.time_ms
    }
    fn snippet(&self) -> &str {
        &self.snippet
    }
    fn by_words(&self) -> bool {
        self.matched_by == SearchMatch::Words
    }
}

/// The snippet without marks, and the matched parts as `[start, end)` character offsets.
pub(crate) fn split_marks(snippet: &str) -> (String, Vec<(usize, usize)>) {
    let mut text = String::new();
    let mut marks = Vec::new();
    let mut n = 0usize;
    let mut open = None;
    for c in snippet.chars() {
        match c {
            HIGHLIGHT_START => open = Some(n),
            HIGHLIGHT_END => {
                if let Some(s) = open.take() {
                    marks.push((s, n));
                }
            }
            c => {
                text.push(c);
                n += 1;
            }
        }
    }
    (text, marks)
}
