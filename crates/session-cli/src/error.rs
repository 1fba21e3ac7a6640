//! Errors of the `sessions` tool and their exit codes.
//!
//! The same codes in every command:
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success (for `verify`: no problems found) |
//! | 1 | findings: `verify` found problems (files were readable; the report says what is wrong), `sync` left something unshipped (a conflict, a divergent line) |
//! | 2 | usage error: bad arguments, unknown flag, invalid value, an id that is no safe file name, an ambiguous id prefix |
//! | 3 | not found: no run or session with that id (or prefix), no such invocation, no store at the root, `-`/`--last` in a workspace without runs or sessions |
//! | 4 | data or I/O error: a file could not be read, written or understood; actions that failed; an incomplete `export` |

use std::io;
use std::path::PathBuf;

/// Exit code: success.
pub const EXIT_OK: i32 = 0;
/// Exit code: findings (`verify` found problems, `sync` left something unshipped).
pub const EXIT_PROBLEMS: i32 = 1;
/// Exit code: usage error.
pub const EXIT_USAGE: i32 = 2;
/// Exit code: run, session or store not found.
pub const EXIT_NOT_FOUND: i32 = 3;
/// Exit code: data or I/O error.
pub const EXIT_DATA: i32 = 4;

/// Why a command failed. Rendered as one line on stderr, prefixed `sessions: `.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CliError {
    /// Bad arguments (exit 2).
    #[error("{0}")]
    Usage(String),
    /// Nothing with that id, or no store (exit 3).
    #[error("{0}")]
    NotFound(String),
    /// An I/O failure on a named file (exit 4).
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The failure.
        #[source]
        source: io::Error,
    },
    /// Data that could not be understood, or a failure reported by a library layer (exit 4).
    #[error("{0}")]
    Data(String),
    /// Writing to stdout failed (a closed pipe ends the command quietly with exit 0).
    #[error("writing output: {0}")]
    Output(#[source] io::Error),
}

impl CliError {
    /// The documented exit code for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Usage(_) => EXIT_USAGE,
            CliError::NotFound(_) => EXIT_NOT_FOUND,
            CliError::Io { .. } | CliError::Data(_) => EXIT_DATA,
            CliError::Output(e) if e.kind() == io::ErrorKind::BrokenPipe => EXIT_OK,
            CliError::Output(_) => EXIT_DATA,
        }
    }

    /// An I/O error on `path`.
    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        CliError::Io {
            path: path.into(),
            source,
        }
    }

    /// A library error rendered with its chain of causes on one line.
    pub(crate) fn data(err: &dyn std::error::Error) -> Self {
        CliError::Data(one_line(err))
    }
}

impl From<io::Error> for CliError {
    fn from(e: io::Error) -> Self {
        CliError::Output(e)
    }
}

/// `err: cause: cause`, without repeating a cause the message already contains.
pub(crate) fn one_line(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut cur = err.source();
    while let Some(src) = cur {
        let s = src.to_string();
        if !out.contains(&s) {
            out.push_str(": ");
            out.push_str(&s);
        }
        cur = src.source();
    }
    out.replace('\n', " ")
}
