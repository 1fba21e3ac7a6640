//! The names of run files: `<run_id>.jsonl`, archived `<run_id>.jsonl.zst` (spec §2). The rule
//! lives in session-schema (`file_name`), below session-replay, which names a run by its file
//! when no record does; used here by the layout, the reader and the duplicate ranking, and
//! re-exported from [`layout`](crate::layout).

pub use session_schema::{ARCHIVED_EXT, RUN_EXT, parse_run_file_name};
