//! Paths as the commands show and read them: a path relative to the root for short messages,
//! the run id a run file's name gives, the workspace a directory belongs to.

use std::path::{Path, PathBuf};

/// The workspace root of `dir` as the reference's runtime finds it (compat notes Q8): the
/// nearest ancestor holding a project marker (`.codelia`, `.git`, `.jj`), else `dir` itself.
pub(crate) fn workspace_of(dir: &Path) -> PathBuf {
    for d in dir.ancestors() {
        if [".codelia", ".git", ".jj"]
            .iter()
            .any(|m| d.join(m).exists())
        {
            return d.to_owned();
        }
    }
    dir.to_owned()
}

/// The run id a run file's name gives.
pub(crate) fn run_id_of_path(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    session_jsonl::layout::parse_run_file_name(name).map(|(id, _)| id.to_owned())
}

/// `path` relative to `root` when it is inside it (for short messages), else as given.
pub(crate) fn rel<'a>(root: &Path, path: &'a Path) -> std::borrow::Cow<'a, str> {
    match path.strip_prefix(root) {
        Ok(p) => p.to_string_lossy(),
        Err(_) => path.to_string_lossy(),
    }
}
