//! The errors of the library layers as the commands report them: the exit code each kind
//! maps to (not found 3, usage 2, data 4), with the message on one line.

use session_jsonl::JsonlError;

use crate::error::{CliError, one_line};

/// Maps a session-jsonl error: unknown run → not found (3), unsafe id → usage (2), else data (4).
pub(crate) fn jsonl_err(e: JsonlError) -> CliError {
    match &e {
        JsonlError::NotFound { run_id, root } => {
            CliError::NotFound(format!("no run {run_id} under {}", root.display()))
        }
        JsonlError::UnsafeRunId { .. } => CliError::Usage(one_line(&e)),
        _ => CliError::data(&e),
    }
}

/// A catalogue's error on the stored run at `location`: gone → not found (3), else data (4).
pub(crate) fn stored_err(location: &str, e: session_storage::StorageError) -> CliError {
    match e {
        session_storage::StorageError::RunNotFound { .. } => {
            CliError::NotFound(format!("{location}: {}", crate::error::one_line(&e)))
        }
        _ => CliError::Data(format!("{location}: {}", crate::error::one_line(&e))),
    }
}
