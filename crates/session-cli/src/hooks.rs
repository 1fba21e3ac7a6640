//! Fault-injection hooks for tests: widen a race window (`SESSIONS_TEST_PAUSE`) or make a write
//! fail (`SESSIONS_TEST_FAIL`) at a named point of a housekeeping command, so that races and
//! failures that last milliseconds in real use are tested deterministically. Unset (the normal
//! case), they cost one `Option` check.
//!
//! * `SESSIONS_TEST_PAUSE=<point>@<dir>`: on reaching `<point>` the command creates
//!   `<dir>/<point>.reached` and waits (at most 60 s) until `<dir>/<point>.go` exists.
//! * `SESSIONS_TEST_FAIL=<point>`: the write at `<point>` writes half its bytes and then fails
//!   with "no storage space" (what a full disk does to a `write`).
//!
//! Points: `gc-run-locked` (a run's lock is held, the move not done yet), `gc-session-copied`
//! (a session's copies are in the trash, the delete not done yet), `gc-session-copy` (the
//! write of a session's copy into the trash).

use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::Env;

/// The hooks in effect (none unless the environment asks).
#[derive(Debug, Clone, Default)]
pub(crate) struct Hooks {
    pause: Option<(String, PathBuf)>,
    fail: Option<String>,
}

impl Hooks {
    /// The hooks `env` asks for.
    pub(crate) fn from_env(env: &Env) -> Hooks {
        Hooks {
            pause: env
                .get("SESSIONS_TEST_PAUSE")
                .and_then(|v| v.split_once('@'))
                .map(|(point, dir)| (point.to_owned(), PathBuf::from(dir))),
            fail: env.get("SESSIONS_TEST_FAIL").map(str::to_owned),
        }
    }

    /// Waits at `point` when a pause there was asked for.
    pub(crate) fn pause(&self, point: &str) {
        let Some((at, dir)) = &self.pause else {
            return;
        };
        if at != point {
            return;
        }
        let _ = std::fs::write(dir.join(format!("{point}.reached")), b"");
        let go = dir.join(format!("{point}.go"));
        let start = Instant::now();
        while !go.exists() && start.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Writes `bytes` with `write`, or, when a failure at `point` was asked for, half of them
    /// and then fails as a full disk does.
    pub(crate) fn write(
        &self,
        point: &str,
        bytes: &[u8],
        mut write: impl FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        if self.fail.as_deref() == Some(point) {
            write(&bytes[..bytes.len() / 2])?;
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                "No space left on device (injected)",
            ));
        }
        write(bytes)
    }
}
