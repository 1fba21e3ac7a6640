//! Helpers every task and check of xtask shares: the error type, the workspace root, and
//! running `cargo`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The result of a task: any error, shown to the user as is.
pub(crate) type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// The workspace root (the parent of this crate's directory).
pub(crate) fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// `cargo` (the one running this task, from `$CARGO`, else the one on `PATH`) run from the
/// workspace root.
pub(crate) fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()));
    cmd.current_dir(project_root());
    cmd
}

/// Runs `cmd` with inherited stdio.
///
/// # Errors
/// When it cannot be started, or exits unsuccessfully (the command and its exit status).
pub(crate) fn status(mut cmd: Command) -> Result<()> {
    let shown = format!("{cmd:?}");
    let st = cmd.status()?;
    if st.success() {
        Ok(())
    } else {
        Err(format!("{shown} failed with {st}").into())
    }
}
