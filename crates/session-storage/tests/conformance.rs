//! The storage conformance suite against the local backend (own harness: the binary re-runs
//! itself as the lease holder that gets killed).
//!
//! `cargo test -p session-storage --test conformance [-- FILTER…]` runs every case whose name
//! contains one of the filters (all without one); `-- --list` lists them.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use session_storage::conformance::{self, Harness, MortalHolder};
use session_storage::local::LocalBackend;
use session_storage::{BoxError, HolderInfo, SessionStore};

const CHILD_ROOT: &str = "SESSION_STORAGE_TEST_LEASE_ROOT";
const CHILD_SESSION: &str = "SESSION_STORAGE_TEST_LEASE_SESSION";
const CHILD_NAME: &str = "SESSION_STORAGE_TEST_LEASE_NAME";

/// Fresh stores in temporary directories, removed when the harness goes.
struct Local {
    dirs: Mutex<Vec<tempfile::TempDir>>,
}

struct ChildHolder(Child);

impl MortalHolder for ChildHolder {
    fn kill(mut self: Box<Self>) -> Result<(), BoxError> {
        self.0.kill()?;
        self.0.wait()?;
        Ok(())
    }
}

impl Drop for ChildHolder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Harness for Local {
    type Backend = LocalBackend;

    fn name(&self) -> String {
        "local files + state.db".to_owned()
    }

    fn fresh(&self) -> Result<LocalBackend, BoxError> {
        let dir = tempfile::tempdir()?;
        let backend = LocalBackend::open(dir.path().join("sessions"))?;
        self.dirs.lock().unwrap().push(dir);
        Ok(backend)
    }

    fn second_client(&self, backend: &LocalBackend) -> Result<Option<LocalBackend>, BoxError> {
        Ok(Some(LocalBackend::open(backend.root())?))
    }

    fn mortal_holder(
        &self,
        backend: &LocalBackend,
        session_id: &str,
        holder: &HolderInfo,
    ) -> Result<Option<Box<dyn MortalHolder>>, BoxError> {
        let mut child = Command::new(std::env::current_exe()?)
            .env(CHILD_ROOT, backend.root())
            .env(CHILD_SESSION, session_id)
            .env(CHILD_NAME, &holder.name)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let mut line = String::new();
        let stdout = child.stdout.take().ok_or("no stdout of the holder")?;
        BufReader::new(stdout).read_line(&mut line)?;
        let child = ChildHolder(child);
        if line.trim() != "leased" {
            return Err(format!("the holder process did not take the lease: {line:?}").into());
        }
        Ok(Some(Box::new(child)))
    }

    fn lease_expiry(&self) -> Duration {
        // The kernel releases the lock with the dead process's files.
        Duration::from_secs(2)
    }
}

/// The holder process: takes the lease, says so, and waits to be killed (at most a minute,
/// so that a parent that died first leaves nothing behind for long).
fn run_child_if_requested() {
    let (Ok(root), Ok(session), Ok(name)) = (
        std::env::var(CHILD_ROOT),
        std::env::var(CHILD_SESSION),
        std::env::var(CHILD_NAME),
    ) else {
        return;
    };
    let backend = LocalBackend::open(PathBuf::from(root)).expect("open the store");
    let guard = backend
        .acquire_lease(&session, &HolderInfo::this_process(name))
        .expect("take the lease");
    println!("leased");
    std::thread::sleep(Duration::from_secs(60));
    drop(guard);
    std::process::exit(0);
}

fn main() {
    run_child_if_requested();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let harness = Local {
        dirs: Mutex::new(Vec::new()),
    };
    if args.iter().any(|a| a == "--list") {
        for case in conformance::cases::<Local>() {
            println!("{}: test", case.name);
        }
        return;
    }
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let report = conformance::run_matching(&harness, |name| {
        filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str()))
    });
    print!("{report}");
    if !report.passed() {
        std::process::exit(1);
    }
    // Every case ran, and only the dead-holder case may need an ability the harness lacks;
    // this harness has them all, so nothing may be skipped.
    let skipped: Vec<_> = report
        .cases
        .iter()
        .filter(|c| matches!(c.outcome, conformance::CaseOutcome::Skipped(_)))
        .map(|c| c.name.as_str())
        .collect();
    if !skipped.is_empty() {
        eprintln!("cases skipped against a harness that has every ability: {skipped:?}");
        std::process::exit(1);
    }
}
