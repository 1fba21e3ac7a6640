//! How the run index reads a run file: the reader options every index read uses (the whole
//! read of a refresh, a resumed read of an open run), shared by `runs.rs` and `resume.rs`.

use session_jsonl::ReaderOptions;

/// Longest line the index parses (64 MiB); a longer one is an oversized-line damage report.
pub(crate) const INDEX_MAX_LINE: usize = 64 << 20;

/// The reader options of every index read: lines up to [`INDEX_MAX_LINE`], and `llm.request`
/// lines skimmed (their messages, most bytes of a real log, are checked for structure but not
/// decoded: the row needs counts, models and times; `sessions verify` decodes them).
pub(crate) fn index_reader_options() -> ReaderOptions {
    ReaderOptions {
        max_line_len: INDEX_MAX_LINE,
        skim_llm_requests: true,
        ..ReaderOptions::default()
    }
}
