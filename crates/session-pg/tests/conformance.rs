//! The storage conformance suite of session-storage, unchanged, against session-pg: a fresh
//! database per case on the binary's throwaway cluster (own harness: the binary re-runs itself
//! as the lease holder that gets killed).
//!
//! `cargo test -p session-pg --test conformance [-- FILTER…]`; `-- --list` lists the cases.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use session_pg::{PgBackend, PgConfig};
use session_storage::conformance::{self, CaseOutcome, Harness, MortalHolder};
use session_storage::{BoxError, HolderInfo, SessionStore};

const CHILD_CONN: &str = "SESSION_PG_TEST_LEASE_CONN";
const CHILD_SESSION: &str = "SESSION_PG_TEST_LEASE_SESSION";
const CHILD_NAME: &str = "SESSION_PG_TEST_LEASE_NAME";

struct Pg {
    cluster: &'static common::Cluster,
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

impl Harness for Pg {
    type Backend = PgBackend;

    fn name(&self) -> String {
        format!("postgres {}", self.cluster.version)
    }

    fn fresh(&self) -> Result<PgBackend, BoxError> {
        let conn = self.cluster.fresh_db();
        Ok(PgBackend::open_with(
            PgConfig::parse(&conn)?,
            common::small_options(),
        )?)
    }

    fn second_client(&self, backend: &PgBackend) -> Result<Option<PgBackend>, BoxError> {
        Ok(Some(PgBackend::open_with(
            backend.config().clone(),
            common::small_options(),
        )?))
    }

    fn mortal_holder(
        &self,
        backend: &PgBackend,
        session_id: &str,
        holder: &HolderInfo,
    ) -> Result<Option<Box<dyn MortalHolder>>, BoxError> {
        let db = backend.config().dbname().ok_or("no database name")?;
        let mut child = Command::new(std::env::current_exe()?)
            .env(CHILD_CONN, self.cluster.conn_str(db))
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
        // The server ends the killed holder's session, and its lock, as its socket closes.
        Duration::from_secs(5)
    }
}

/// The holder process: takes the lease, says so, and waits to be killed (at most a minute).
fn run_child_if_requested() {
    let (Ok(conn), Ok(session), Ok(name)) = (
        std::env::var(CHILD_CONN),
        std::env::var(CHILD_SESSION),
        std::env::var(CHILD_NAME),
    ) else {
        return;
    };
    let backend = PgBackend::open(&conn).expect("open the store");
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
    if args.iter().any(|a| a == "--list") {
        for case in conformance::cases::<Pg>() {
            println!("{}: test", case.name);
        }
        return;
    }
    let Some(cluster) = common::shared() else {
        // The reason was printed; nothing ran.
        println!("0 passed, 0 failed, 22 skipped");
        return;
    };
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let harness = Pg { cluster };
    let report = conformance::run_matching(&harness, |name| {
        filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str()))
    });
    print!("{report}");
    let skipped: Vec<_> = report
        .cases
        .iter()
        .filter(|c| matches!(c.outcome, CaseOutcome::Skipped(_)))
        .map(|c| c.name.as_str())
        .collect();
    if !report.passed() {
        std::process::exit(1);
    }
    if !skipped.is_empty() {
        eprintln!("cases skipped against a harness that has every ability: {skipped:?}");
        std::process::exit(1);
    }
}
