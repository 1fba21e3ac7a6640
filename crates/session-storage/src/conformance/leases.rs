//! Cases of session leases (exclusive, holder info, release, a dead holder) and of unsafe ids
//! across both traits.

use std::time::{Duration, Instant};

use super::data::{RunSpec, session};
use super::{Check, Fail, Harness, ensure, ensure_eq};
use crate::error::StorageError;
use crate::types::{Expected, Extent, HolderInfo};
use crate::{LeaseGuard, RunCatalogue, SessionStore};

fn holder(name: &str, pid: u32) -> HolderInfo {
    HolderInfo {
        name: name.to_owned(),
        host: "host-a.example".to_owned(),
        pid,
    }
}

/// Expects `result` to be busy naming `want` as the holder.
fn expect_busy(
    result: Result<Box<dyn LeaseGuard>, StorageError>,
    session_id: &str,
    want: &HolderInfo,
    what: &str,
) -> Check {
    match result {
        Err(e @ StorageError::LeaseBusy { .. }) => {
            ensure!(e.is_busy(), "{what}: a busy lease is busy");
            ensure_eq!(
                e.session_id(),
                Some(session_id),
                "{what}: session of the error"
            );
            if let StorageError::LeaseBusy { holder, .. } = e {
                ensure_eq!(holder.as_ref(), Some(want), "{what}: holder named");
            }
            Ok(())
        }
        Err(e) => Err(Fail::Failed(format!(
            "{what}: got {e}, want the lease busy"
        ))),
        Ok(g) => Err(Fail::Failed(format!(
            "{what}: a second holder got the lease: {g:?}"
        ))),
    }
}

pub(crate) fn exclusive_with_holder_info<H: Harness>(h: &H) -> Check {
    let b = h.fresh()?;
    let first = holder("worker-1", 101);
    let second = holder("worker-2", 202);
    let g = b.acquire_lease("leased", &first)?;
    ensure_eq!(g.session_id(), "leased", "session of the guard");
    ensure_eq!(g.holder(), &first, "holder of the guard");
    expect_busy(
        b.acquire_lease("leased", &second),
        "leased",
        &first,
        "second acquire",
    )?;
    expect_busy(
        b.acquire_lease("leased", &first),
        "leased",
        &first,
        "the same holder acquiring again",
    )?;
    if let Some(other) = h.second_client(&b)? {
        expect_busy(
            other.acquire_lease("leased", &second),
            "leased",
            &first,
            "acquire through a second client",
        )?;
    }
    g.renew()?;
    // A lease does not stop saves (compare-and-swap protects the data).
    b.save_session(
        &session("leased", "2026-02-03T12:00:00.000Z", 1, None)?,
        &Expected::Absent,
    )?;
    g.renew()?;
    g.release()?;
    Ok(())
}

pub(crate) fn release_and_drop<H: Harness>(h: &H) -> Check {
    let b = h.fresh()?;
    let one = holder("worker-1", 101);
    let two = holder("worker-2", 202);
    let g1 = b.acquire_lease("s-lease", &one)?;
    let other_session = b.acquire_lease("s-other", &two)?;
    g1.release()?;
    let g2 = b.acquire_lease("s-lease", &two)?;
    ensure_eq!(g2.holder(), &two, "holder after a release");
    expect_busy(
        b.acquire_lease("s-lease", &one),
        "s-lease",
        &two,
        "after a release",
    )?;
    drop(g2);
    let g3 = b.acquire_lease("s-lease", &one)?;
    ensure_eq!(g3.holder(), &one, "holder after a drop");
    expect_busy(
        b.acquire_lease("s-other", &one),
        "s-other",
        &two,
        "other session",
    )?;
    drop(other_session);
    if let Some(c) = h.second_client(&b)? {
        let g4 = c.acquire_lease("s-other", &one)?;
        expect_busy(
            b.acquire_lease("s-other", &two),
            "s-other",
            &one,
            "lease of a second client",
        )?;
        drop(g4);
        drop(c);
    }
    let g5 = b.acquire_lease("s-other", &two)?;
    drop(g5);
    drop(g3);
    Ok(())
}

pub(crate) fn dead_holder<H: Harness>(h: &H) -> Check {
    let b = h.fresh()?;
    let doomed = HolderInfo::this_process("doomed-worker");
    let Some(mortal) = h.mortal_holder(&b, "orphaned", &doomed)? else {
        return Err(Fail::Skipped(
            "the harness cannot start a lease holder that can die (Harness::mortal_holder)".into(),
        ));
    };
    let heir = holder("heir", 303);
    match b.acquire_lease("orphaned", &heir) {
        Err(StorageError::LeaseBusy { holder, .. }) => {
            let named = holder.map(|h| h.name);
            ensure_eq!(
                named.as_deref(),
                Some("doomed-worker"),
                "holder named while alive"
            );
        }
        Err(e) => return Err(Fail::Failed(format!("acquire while held: {e}"))),
        Ok(_) => return Err(Fail::Failed("a live holder's lease was taken".into())),
    }
    mortal.kill()?;
    let deadline = Instant::now() + h.lease_expiry();
    loop {
        match b.acquire_lease("orphaned", &heir) {
            Ok(g) => {
                ensure_eq!(g.holder(), &heir, "holder of the reclaimed lease");
                g.release()?;
                return Ok(());
            }
            Err(StorageError::LeaseBusy { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => {
                return Err(Fail::Failed(format!(
                    "lease of a dead holder not free after {:?}: {e}",
                    h.lease_expiry()
                )));
            }
        }
    }
}

pub(crate) fn unsafe_ids<H: Harness>(h: &H) -> Check {
    let b = h.fresh()?;
    let who = holder("w", 1);
    for id in ["../escape", "a/b", "", "..", "a\\b", "nul\0byte"] {
        let mut results: Vec<(&str, Result<(), StorageError>)> = vec![
            ("append", b.append_lines(id, 0, b"{}\n").map(drop)),
            ("read", b.read_bytes(id, 0, Extent::Committed).map(drop)),
            ("stat", b.stat_run(id).map(drop)),
            ("load", b.load_session(id).map(drop)),
            ("delete", b.delete_session(id, &Expected::Any).map(drop)),
            ("lease", b.acquire_lease(id, &who).map(drop)),
        ];
        let mut st = session("placeholder", "2026-02-03T12:00:00.000Z", 1, None)?;
        st.session_id = id.to_owned();
        results.push(("save", b.save_session(&st, &Expected::Any).map(drop)));
        for (op, r) in results {
            match r {
                Err(StorageError::UnsafeId { id: got, .. }) => {
                    ensure_eq!(got.as_str(), id, "{op} of {id:?}: id in the error")
                }
                other => ensure!(false, "{op} of {id:?} gave {other:?}"),
            }
        }
    }
    // Nothing was created by the refused calls.
    ensure!(
        b.list_runs(&crate::types::RunListQuery::default())?
            .runs
            .is_empty(),
        "a refused append created a run"
    );
    let listed = b.list_sessions(&crate::types::SessionListQuery::default())?;
    ensure!(
        listed.sessions.is_empty(),
        "a refused save created a session"
    );
    // A safe id works after all that.
    let spec = RunSpec::new("safe-id", "2026-02-03T12:00:00.000Z");
    b.append_lines("safe-id", 0, &spec.lines())?;
    Ok(())
}
