//! The names of run files: `<run_id>.jsonl`, archived `<run_id>.jsonl.zst` (spec §2). The one
//! place the rule lives: session-jsonl's layout, reader and duplicate ranking use it (and
//! re-export it from `session_jsonl::layout`), and session-replay names a run by its file when
//! no record does.

/// File-name suffix of a plain run file.
pub const RUN_EXT: &str = ".jsonl";
/// File-name suffix of an archived (zstd) run file.
pub const ARCHIVED_EXT: &str = ".jsonl.zst";

/// The run id named by a run file's name (`<id>.jsonl` or `<id>.jsonl.zst`) and whether it is
/// archived; `None` for any other name.
pub fn parse_run_file_name(name: &str) -> Option<(&str, bool)> {
    if let Some(id) = name.strip_suffix(ARCHIVED_EXT) {
        return (!id.is_empty()).then_some((id, true));
    }
    let id = name.strip_suffix(RUN_EXT)?;
    (!id.is_empty()).then_some((id, false))
}
