//! Paths to the test data checked into the repository and small helpers shared by every crate's
//! tests, so that no test reads anything outside the checkout.
//!
//! The tests of the published crates that use these paths are left out of their packages (see
//! each crate's `exclude`): a crate downloaded from the registry has no workspace around it.
//!
//! The recorded reference data lives in `testdata/codelia-runtime/` at the workspace root (see
//! `testdata/README.md`). It is never modified: copy it with [`copy_tree`] before SQLite opens a
//! database in it (a WAL database needs its `-shm` file beside it).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// The workspace root (the directory holding the top-level `Cargo.toml`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `testdata/` at the workspace root.
pub fn testdata_dir() -> PathBuf {
    workspace_root().join("testdata")
}

/// `testdata/codelia-runtime/`: the reference runtime's recorded run logs, `state.db`, message
/// logs, legacy snapshots, tool-output cache and `expected.json`.
pub fn codelia_runtime_dir() -> PathBuf {
    testdata_dir().join("codelia-runtime")
}

/// `testdata/codelia-runtime/sessions/`: the recorded store root.
pub fn codelia_sessions_dir() -> PathBuf {
    codelia_runtime_dir().join("sessions")
}

/// `testdata/codelia-runtime/sessions/2026/11/30/`: the day directory holding all 20 run logs.
pub fn codelia_runs_dir() -> PathBuf {
    codelia_sessions_dir().join("2026/11/30")
}

/// `sample/sessions/` at the workspace root: the bundled sample store written by our own writers
/// (`cargo xtask sample`). Never modified: copy it with [`copy_tree`] before running commands that
/// write (refreshing the run index writes to its `state.db`).
pub fn sample_sessions_dir() -> PathBuf {
    workspace_root().join("sample").join("sessions")
}

/// Copies the tree under `src` to `dst` (created), files byte for byte, symbolic links skipped.
///
/// # Errors
/// The first I/O error met, with the path it concerns.
pub fn copy_tree(src: &Path, dst: &Path) -> io::Result<()> {
    fs::create_dir_all(dst).map_err(|e| with_path(e, dst))?;
    for entry in fs::read_dir(src).map_err(|e| with_path(e, src))? {
        let entry = entry.map_err(|e| with_path(e, src))?;
        let from = entry.path();
        let to = dst.join(entry.file_name());
        let kind = entry.file_type().map_err(|e| with_path(e, &from))?;
        if kind.is_dir() {
            copy_tree(&from, &to)?;
        } else if kind.is_file() {
            fs::copy(&from, &to).map_err(|e| with_path(e, &from))?;
            // The checkout may be read-only (a CI copy without write bits); copies must be writable.
            let mut perms = fs::metadata(&to)
                .map_err(|e| with_path(e, &to))?
                .permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            perms.set_readonly(false);
            fs::set_permissions(&to, perms).map_err(|e| with_path(e, &to))?;
        }
    }
    Ok(())
}

fn with_path(e: io::Error, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recorded_data_is_inside_the_checkout() {
        let dir = codelia_runtime_dir();
        assert!(dir.join("expected.json").is_file(), "{}", dir.display());
        assert!(codelia_sessions_dir().join("state.db").is_file());
        assert_eq!(
            fs::read_dir(codelia_runs_dir()).map(Iterator::count).ok(),
            Some(20)
        );
        let root = workspace_root().canonicalize().ok();
        let data = dir.canonicalize().ok();
        assert!(root.is_some_and(|r| data.is_some_and(|d| d.starts_with(r))));
    }

    #[test]
    fn the_sample_store_is_inside_the_checkout() {
        let dir = sample_sessions_dir();
        assert!(dir.join("state.db").is_file(), "{}", dir.display());
        let root = workspace_root().canonicalize().ok();
        let data = dir.canonicalize().ok();
        assert!(root.is_some_and(|r| data.is_some_and(|d| d.starts_with(r))));
    }
}
