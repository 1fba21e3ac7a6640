//! The conformance suite of the storage seam (feature `conformance`): every case a backend of
//! [`RunCatalogue`](crate::RunCatalogue) and [`SessionStore`](crate::SessionStore) must pass,
//! generic over both traits, so that any backend runs it unchanged.
//!
//! A backend crate implements [`Harness`] — at least [`Harness::fresh`], which makes a new,
//! empty store — and runs the suite from a test with [`run`], asserting [`Report::passed`]
//! (a compiled example is in the crate documentation, "The conformance suite").
//!
//! Cases are grouped: `runs` (byte-exact append and read, offsets, the tolerant reader's damage
//! kinds, incomplete lines, length conflicts, retries, concurrent appenders, stat, listing
//! filters, summaries, paging under concurrent inserts), `sessions` (round trip,
//! compare-and-swap on save and delete, racing savers, listing, paging under concurrent
//! inserts), `leases` (exclusivity with holder info, release, a dead holder's lease) and `ids`
//! (unsafe ids refused everywhere). [`cases`] lists them; [`run_matching`] runs a subset by
//! name. Optional abilities of a harness (a second client, a holder that can die) widen the
//! cases; a case that needs one the harness lacks is reported as skipped, never as passed.

mod check;
mod data;
mod leases;
mod runs;
mod sessions;

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

pub(crate) use check::{Check, Fail, ensure, ensure_eq};
pub use check::{Harness, MortalHolder};

/// The result of one case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaseOutcome {
    /// Every check held.
    Passed,
    /// A check failed (or the backend panicked): what and where.
    Failed(String),
    /// The harness lacks what the case needs: why.
    Skipped(String),
}

/// One case of a [`Report`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseResult {
    /// `group::name`.
    pub name: String,
    /// What happened.
    pub outcome: CaseOutcome,
    /// How long it took.
    pub elapsed: Duration,
}

/// What [`run`] found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Report {
    /// [`Harness::name`].
    pub backend: String,
    /// Every case run, in order.
    pub cases: Vec<CaseResult>,
}

impl Report {
    /// Whether no case failed (skipped cases do not fail a report).
    pub fn passed(&self) -> bool {
        self.failures().next().is_none()
    }

    /// The failed cases.
    pub fn failures(&self) -> impl Iterator<Item = &CaseResult> {
        self.cases
            .iter()
            .filter(|c| matches!(c.outcome, CaseOutcome::Failed(_)))
    }

    fn count(&self, f: impl Fn(&CaseOutcome) -> bool) -> usize {
        self.cases.iter().filter(|c| f(&c.outcome)).count()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "storage conformance of {}: {} passed, {} failed, {} skipped",
            self.backend,
            self.count(|o| *o == CaseOutcome::Passed),
            self.count(|o| matches!(o, CaseOutcome::Failed(_))),
            self.count(|o| matches!(o, CaseOutcome::Skipped(_))),
        )?;
        for c in &self.cases {
            let ms = c.elapsed.as_millis();
            match &c.outcome {
                CaseOutcome::Passed => writeln!(f, "  ok       {} ({ms} ms)", c.name)?,
                CaseOutcome::Failed(why) => writeln!(f, "  FAILED   {} ({ms} ms): {why}", c.name)?,
                CaseOutcome::Skipped(why) => writeln!(f, "  skipped  {}: {why}", c.name)?,
            }
        }
        Ok(())
    }
}

/// One case of the suite.
pub struct Case<H: Harness> {
    /// `group::name`.
    pub name: &'static str,
    /// What it checks, one line.
    pub checks: &'static str,
    run: fn(&H) -> Check,
}

impl<H: Harness> fmt::Debug for Case<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Case")
            .field("name", &self.name)
            .field("checks", &self.checks)
            .finish_non_exhaustive()
    }
}

impl<H: Harness> Case<H> {
    /// Runs the case against `harness`.
    pub fn run(&self, harness: &H) -> CaseResult {
        let started = Instant::now();
        let result = catch_unwind(AssertUnwindSafe(|| (self.run)(harness)));
        let outcome = match result {
            Ok(Ok(())) => CaseOutcome::Passed,
            Ok(Err(Fail::Failed(why))) => CaseOutcome::Failed(why),
            Ok(Err(Fail::Skipped(why))) => CaseOutcome::Skipped(why),
            Err(panic) => {
                let msg = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                CaseOutcome::Failed(format!("panicked: {msg}"))
            }
        };
        CaseResult {
            name: self.name.to_owned(),
            outcome,
            elapsed: started.elapsed(),
        }
    }
}

macro_rules! case {
    ($name:literal, $checks:literal, $f:path) => {
        Case {
            name: $name,
            checks: $checks,
            run: $f,
        }
    };
}

/// Every case, in the order [`run`] runs them.
pub fn cases<H: Harness>() -> Vec<Case<H>> {
    vec![
        case!(
            "runs::append_read_byte_exact",
            "NUL runs, invalid UTF-8, lone surrogate escapes, BOM, CRLF, glued and very long lines come back byte for byte",
            runs::append_read_byte_exact::<H>
        ),
        case!(
            "runs::reads_from_any_offset",
            "reads from every offset give the exact suffix, see a snapshot, and refuse offsets past the end",
            runs::reads_from_any_offset::<H>
        ),
        case!(
            "runs::damage_is_kept_and_flagged",
            "every damage kind is stored as written and read back with the same reports as the local reader",
            runs::damage_is_kept_and_flagged::<H>
        ),
        case!(
            "runs::incomplete_lines_are_refused",
            "bytes without a final newline are refused and nothing is stored; empty appends only check the length",
            runs::incomplete_lines_are_refused::<H>
        ),
        case!(
            "runs::length_conflicts",
            "an append at another length than the committed one is a typed conflict and writes nothing",
            runs::length_conflicts::<H>
        ),
        case!(
            "runs::retries_are_recognised",
            "a retry after a lost acknowledgement is acknowledged, not duplicated; a partly applied one is completed",
            runs::retries_are_recognised::<H>
        ),
        case!(
            "runs::missing_runs",
            "a missing run has length 0: stat none, read not found, append elsewhere than 0 conflicts",
            runs::missing_runs::<H>
        ),
        case!(
            "runs::concurrent_appenders_never_interleave",
            "appenders racing on one run (two clients) each land every line exactly once",
            runs::concurrent_appenders::<H>
        ),
        case!(
            "runs::stat_reports_length_lines_header_and_end",
            "stat gives the committed length, line count, header facts and how the run ended",
            runs::stat_reports_facts::<H>
        ),
        case!(
            "runs::list_filters",
            "session, since/until, outcome and workspace filters, order and paging of the run listing",
            runs::list_filters::<H>
        ),
        case!(
            "runs::list_summaries",
            "listed runs carry the columns of the runs command, damage counted",
            runs::list_summaries::<H>
        ),
        case!(
            "runs::list_paging_is_stable_under_inserts",
            "paging while runs are created skips and repeats nothing",
            runs::list_paging_under_inserts::<H>
        ),
        case!(
            "sessions::save_load_round_trip",
            "a saved session loads back equal, with a version that changes on every save",
            sessions::save_load_round_trip::<H>
        ),
        case!(
            "sessions::appending_saves",
            "a save of a list the caller only appended to stores that list, with the versions and compare-and-swap of any save",
            sessions::appending_saves::<H>
        ),
        case!(
            "sessions::compare_and_swap_on_save",
            "saves with a stale or absent expectation are typed conflicts and change nothing",
            sessions::compare_and_swap_on_save::<H>
        ),
        case!(
            "sessions::racing_savers",
            "of savers racing from one version exactly one wins; load-modify-save loops lose no update",
            sessions::racing_savers::<H>
        ),
        case!(
            "sessions::delete_with_compare_and_swap",
            "delete honours the expected version, then the session is gone from load and list",
            sessions::delete_with_compare_and_swap::<H>
        ),
        case!(
            "sessions::list_filters_and_paging",
            "workspace filter, order and keyset paging of the session listing",
            sessions::list_filters_and_paging::<H>
        ),
        case!(
            "sessions::list_paging_is_stable_under_inserts",
            "paging while sessions are created skips and repeats nothing",
            sessions::list_paging_under_inserts::<H>
        ),
        case!(
            "leases::exclusive_with_holder_info",
            "a second acquire, from any client, is busy and names the holder",
            leases::exclusive_with_holder_info::<H>
        ),
        case!(
            "leases::release_and_drop_end_the_lease",
            "release or drop of the guard frees the lease; leases of other sessions are independent",
            leases::release_and_drop::<H>
        ),
        case!(
            "leases::a_dead_holders_lease_is_reclaimable",
            "a lease whose holder died without releasing it can be taken",
            leases::dead_holder::<H>
        ),
        case!(
            "ids::unsafe_ids_are_refused",
            "ids that could leave their directory are refused by every operation",
            leases::unsafe_ids::<H>
        ),
    ]
}

/// Runs every case against `harness`.
pub fn run<H: Harness>(harness: &H) -> Report {
    run_matching(harness, |_| true)
}

/// Runs the cases whose name `filter` accepts.
pub fn run_matching<H: Harness>(harness: &H, filter: impl Fn(&str) -> bool) -> Report {
    let cases = cases::<H>()
        .into_iter()
        .filter(|c| filter(c.name))
        .map(|c| c.run(harness))
        .collect();
    Report {
        backend: harness.name(),
        cases,
    }
}
