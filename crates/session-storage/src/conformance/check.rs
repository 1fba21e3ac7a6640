//! What a case of the conformance suite is written with: the [`Harness`] a backend implements,
//! and a case's result ([`Check`], [`Fail`]) with the `ensure!`/`ensure_eq!` macros that end it.

use std::time::Duration;

use crate::error::{BoxError, StorageError};
use crate::types::HolderInfo;
use crate::{RunCatalogue, SessionStore};

/// How the suite makes and reaches stores of one backend.
pub trait Harness: Sync {
    /// The backend under test.
    type Backend: RunCatalogue + SessionStore + 'static;

    /// A name for the report (`"local"`, `"postgres 16"`).
    fn name(&self) -> String;

    /// A new store holding no run and no session, isolated from every other one the harness
    /// made. Called once or more per case.
    ///
    /// # Errors
    /// Whatever kept the store from being made; the case fails with it.
    fn fresh(&self) -> Result<Self::Backend, BoxError>;

    /// Another client of the same store as `backend` (another connection or handle, as a
    /// second process would have), for the concurrency and lease cases. `Ok(None)` (the
    /// default): the cases share `backend` between threads instead.
    ///
    /// # Errors
    /// Whatever kept the client from being made; the case fails with it.
    fn second_client(&self, backend: &Self::Backend) -> Result<Option<Self::Backend>, BoxError> {
        let _ = backend;
        Ok(None)
    }

    /// Starts a holder of `session_id`'s lease in the store of `backend` that can be made to
    /// die without releasing it (another process that is killed, a connection that is cut, a
    /// holder that stops renewing), holding it as `holder` by the time this returns.
    /// `Ok(None)` (the default): the harness cannot, and the dead-holder case is skipped.
    ///
    /// # Errors
    /// Whatever kept the holder from starting; the case fails with it.
    fn mortal_holder(
        &self,
        backend: &Self::Backend,
        session_id: &str,
        holder: &HolderInfo,
    ) -> Result<Option<Box<dyn MortalHolder>>, BoxError> {
        let _ = (backend, session_id, holder);
        Ok(None)
    }

    /// How long after its holder's death a lease must become free (default 10 s; a lease
    /// with a time to live needs about that time to live).
    fn lease_expiry(&self) -> Duration {
        Duration::from_secs(10)
    }
}

/// A lease holder started by [`Harness::mortal_holder`].
pub trait MortalHolder: Send {
    /// Kills the holder without a release: its process, connection or renewals end as in a
    /// crash. Returns once it is dead.
    ///
    /// # Errors
    /// Whatever kept it from being killed.
    fn kill(self: Box<Self>) -> Result<(), BoxError>;
}

/// Why a case stopped early.
#[derive(Debug)]
pub(crate) enum Fail {
    Failed(String),
    Skipped(String),
}

impl From<StorageError> for Fail {
    fn from(e: StorageError) -> Self {
        Fail::Failed(format!("unexpected error: {}", chain(&e)))
    }
}

impl From<BoxError> for Fail {
    fn from(e: BoxError) -> Self {
        Fail::Failed(format!("harness error: {}", chain(e.as_ref())))
    }
}

impl From<std::io::Error> for Fail {
    fn from(e: std::io::Error) -> Self {
        Fail::Failed(format!("read error: {e}"))
    }
}

/// An error with its sources, `a: b: c`.
pub(crate) fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let text = c.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        cur = c.source();
    }
    s
}

pub(crate) type Check = Result<(), Fail>;

/// Fails the case with a message unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err($crate::conformance::Fail::Failed(format!(
                "{} [{}:{}]",
                format!($($fmt)+),
                file!(),
                line!()
            )));
        }
    };
}

/// Fails the case unless the two values are equal, showing both.
macro_rules! ensure_eq {
    ($left:expr, $right:expr, $($fmt:tt)+) => {{
        let (left, right) = (&$left, &$right);
        if left != right {
            return Err($crate::conformance::Fail::Failed(format!(
                "{}: got {:?}, want {:?} [{}:{}]",
                format!($($fmt)+),
                left,
                right,
                file!(),
                line!()
            )));
        }
    }};
}

pub(crate) use {ensure, ensure_eq};
