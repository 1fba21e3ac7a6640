//! The conformance suite fails backends that break the contract: each fault below is planted
//! in a wrapper around the local backend, and the cases that must catch it are run against it.
//! (That the suite passes the correct backend is `tests/conformance.rs`.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::sync::Mutex;

use session_schema::SessionState;
use session_storage::conformance::{self, CaseOutcome, Harness};
use session_storage::local::{LocalBackend, LocalOptions};
use session_storage::{
    Appended, BoxError, Expected, Extent, HolderInfo, LeaseGuard, RunBytes, RunCatalogue,
    RunListPage, RunListQuery, RunStat, SessionListPage, SessionListQuery, SessionStore,
    StorageError, StoredSession, Version,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Appends at the end whatever length was expected (no compare-and-swap, retries
    /// duplicated).
    AppendIgnoresExpectedLength,
    /// Reads drop NUL bytes.
    ReadDropsNul,
    /// Reads start at 0 whatever offset was asked for.
    ReadIgnoresOffset,
    /// Saves with an expected version save unconditionally.
    SaveIgnoresVersion,
    /// Deletes with an expected version delete unconditionally.
    DeleteIgnoresVersion,
    /// Every acquire gets the lease.
    LeaseNotExclusive,
    /// A busy lease does not say who holds it.
    LeaseHidesHolder,
    /// Run pages after the first leave out their first run.
    RunPagingSkips,
    /// The session filter of the run listing is ignored.
    RunListIgnoresSession,
    /// Session pages after the first start over.
    SessionPagingRepeats,
}

struct Broken {
    inner: LocalBackend,
    fault: Fault,
}

struct FakeLease {
    session_id: String,
    holder: HolderInfo,
}

impl std::fmt::Debug for FakeLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FakeLease")
    }
}

impl LeaseGuard for FakeLease {
    fn session_id(&self) -> &str {
        &self.session_id
    }
    fn holder(&self) -> &HolderInfo {
        &self.holder
    }
    fn renew(&self) -> session_storage::Result<()> {
        Ok(())
    }
    fn release(self: Box<Self>) -> session_storage::Result<()> {
        Ok(())
    }
}

struct NoNul<R>(R);

impl<R: Read> Read for NoNul<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.0.read(buf)?;
        let mut k = 0;
        for i in 0..n {
            if buf[i] != 0 {
                buf[k] = buf[i];
                k += 1;
            }
        }
        if n > 0 && k == 0 {
            buf[0] = b' ';
            k = 1;
        }
        Ok(k)
    }
}

impl RunCatalogue for Broken {
    fn append_lines(
        &self,
        run_id: &str,
        expected_len: u64,
        lines: &[u8],
    ) -> session_storage::Result<Appended> {
        if self.fault == Fault::AppendIgnoresExpectedLength {
            let len = self.inner.stat_run(run_id)?.map_or(0, |s| s.len);
            return self.inner.append_lines(run_id, len, lines);
        }
        self.inner.append_lines(run_id, expected_len, lines)
    }

    fn read_bytes(
        &self,
        run_id: &str,
        from: u64,
        extent: Extent,
    ) -> session_storage::Result<RunBytes> {
        match self.fault {
            Fault::ReadDropsNul => {
                let r = self.inner.read_bytes(run_id, from, extent)?;
                let (start, end) = (r.start(), r.end());
                Ok(RunBytes::new(Box::new(NoNul(r)), start, end))
            }
            Fault::ReadIgnoresOffset => {
                let r = self.inner.read_bytes(run_id, 0, extent)?;
                let end = r.end();
                Ok(RunBytes::new(Box::new(r), from, end))
            }
            _ => self.inner.read_bytes(run_id, from, extent),
        }
    }

    fn stat_run(&self, run_id: &str) -> session_storage::Result<Option<RunStat>> {
        self.inner.stat_run(run_id)
    }

    fn list_runs(&self, query: &RunListQuery) -> session_storage::Result<RunListPage> {
        match self.fault {
            Fault::RunListIgnoresSession => self.inner.list_runs(&RunListQuery {
                session: None,
                ..query.clone()
            }),
            Fault::RunPagingSkips if query.after.is_some() => {
                let mut page = self.inner.list_runs(query)?;
                if !page.runs.is_empty() {
                    page.runs.remove(0);
                }
                Ok(page)
            }
            _ => self.inner.list_runs(query),
        }
    }
}

impl SessionStore for Broken {
    fn load_session(&self, session_id: &str) -> session_storage::Result<Option<StoredSession>> {
        self.inner.load_session(session_id)
    }

    fn save_session(
        &self,
        state: &SessionState,
        expected: &Expected,
    ) -> session_storage::Result<Version> {
        if self.fault == Fault::SaveIgnoresVersion && matches!(expected, Expected::Version(_)) {
            return self.inner.save_session(state, &Expected::Any);
        }
        self.inner.save_session(state, expected)
    }

    fn list_sessions(&self, query: &SessionListQuery) -> session_storage::Result<SessionListPage> {
        if self.fault == Fault::SessionPagingRepeats {
            return self.inner.list_sessions(&SessionListQuery {
                after: None,
                ..query.clone()
            });
        }
        self.inner.list_sessions(query)
    }

    fn delete_session(
        &self,
        session_id: &str,
        expected: &Expected,
    ) -> session_storage::Result<bool> {
        if self.fault == Fault::DeleteIgnoresVersion && matches!(expected, Expected::Version(_)) {
            return self.inner.delete_session(session_id, &Expected::Any);
        }
        self.inner.delete_session(session_id, expected)
    }

    fn acquire_lease(
        &self,
        session_id: &str,
        holder: &HolderInfo,
    ) -> session_storage::Result<Box<dyn LeaseGuard>> {
        match self.fault {
            Fault::LeaseNotExclusive => Ok(Box::new(FakeLease {
                session_id: session_id.to_owned(),
                holder: holder.clone(),
            })),
            Fault::LeaseHidesHolder => match self.inner.acquire_lease(session_id, holder) {
                Err(StorageError::LeaseBusy {
                    session_id, since, ..
                }) => Err(StorageError::LeaseBusy {
                    session_id,
                    holder: None,
                    since,
                }),
                other => other,
            },
            _ => self.inner.acquire_lease(session_id, holder),
        }
    }
}

struct BrokenHarness {
    fault: Fault,
    dirs: Mutex<Vec<tempfile::TempDir>>,
}

fn fast() -> LocalOptions {
    LocalOptions {
        sync_appends: false,
        store: session_state::StoreOptions {
            durability: session_state::SaveDurability::NoSync,
            ..session_state::StoreOptions::default()
        },
        ..LocalOptions::default()
    }
}

impl Harness for BrokenHarness {
    type Backend = Broken;

    fn name(&self) -> String {
        format!("local with {:?}", self.fault)
    }

    fn fresh(&self) -> Result<Broken, BoxError> {
        let dir = tempfile::tempdir()?;
        let inner = LocalBackend::open_with(dir.path(), fast())?;
        self.dirs.lock().unwrap().push(dir);
        Ok(Broken {
            inner,
            fault: self.fault,
        })
    }

    fn second_client(&self, backend: &Broken) -> Result<Option<Broken>, BoxError> {
        Ok(Some(Broken {
            inner: LocalBackend::open_with(backend.inner.root(), fast())?,
            fault: self.fault,
        }))
    }
}

/// Runs `cases` against a backend with `fault`; each must fail.
fn caught(fault: Fault, cases: &[&str]) {
    let harness = BrokenHarness {
        fault,
        dirs: Mutex::new(Vec::new()),
    };
    let report = conformance::run_matching(&harness, |name| cases.contains(&name));
    assert_eq!(
        report.cases.len(),
        cases.len(),
        "unknown case names in {cases:?}"
    );
    for c in &report.cases {
        assert!(
            matches!(c.outcome, CaseOutcome::Failed(_)),
            "{fault:?} not caught by {}:\n{report}",
            c.name
        );
    }
}

#[test]
fn ignoring_the_expected_length_is_caught() {
    caught(
        Fault::AppendIgnoresExpectedLength,
        &["runs::length_conflicts", "runs::retries_are_recognised"],
    );
}

#[test]
fn lossy_or_misplaced_reads_are_caught() {
    caught(
        Fault::ReadDropsNul,
        &[
            "runs::append_read_byte_exact",
            "runs::damage_is_kept_and_flagged",
        ],
    );
    caught(Fault::ReadIgnoresOffset, &["runs::reads_from_any_offset"]);
}

#[test]
fn saves_and_deletes_without_compare_and_swap_are_caught() {
    caught(
        Fault::SaveIgnoresVersion,
        &[
            "sessions::compare_and_swap_on_save",
            "sessions::racing_savers",
        ],
    );
    caught(
        Fault::DeleteIgnoresVersion,
        &["sessions::delete_with_compare_and_swap"],
    );
}

#[test]
fn broken_leases_are_caught() {
    caught(
        Fault::LeaseNotExclusive,
        &[
            "leases::exclusive_with_holder_info",
            "leases::release_and_drop_end_the_lease",
        ],
    );
    caught(
        Fault::LeaseHidesHolder,
        &["leases::exclusive_with_holder_info"],
    );
}

#[test]
fn broken_listings_are_caught() {
    caught(
        Fault::RunPagingSkips,
        &[
            "runs::list_filters",
            "runs::list_paging_is_stable_under_inserts",
        ],
    );
    caught(Fault::RunListIgnoresSession, &["runs::list_filters"]);
    caught(
        Fault::SessionPagingRepeats,
        &[
            "sessions::list_filters_and_paging",
            "sessions::list_paging_is_stable_under_inserts",
        ],
    );
}

#[test]
fn a_harness_without_a_mortal_holder_skips_that_case_only() {
    let harness = BrokenHarness {
        fault: Fault::RunListIgnoresSession,
        dirs: Mutex::new(Vec::new()),
    };
    let report = conformance::run_matching(&harness, |n| n.starts_with("leases::"));
    let outcomes: Vec<(&str, bool, bool)> = report
        .cases
        .iter()
        .map(|c| {
            (
                c.name.as_str(),
                c.outcome == CaseOutcome::Passed,
                matches!(c.outcome, CaseOutcome::Skipped(_)),
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            ("leases::exclusive_with_holder_info", true, false),
            ("leases::release_and_drop_end_the_lease", true, false),
            ("leases::a_dead_holders_lease_is_reclaimable", false, true),
        ]
    );
    assert!(report.passed(), "{report}");
}
