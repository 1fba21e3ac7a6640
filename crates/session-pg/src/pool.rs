//! Connections, and the threads they are used on.
//!
//! The synchronous `postgres` client runs a small tokio runtime inside every call, and tokio
//! panics ("Cannot start a runtime from within a runtime") when that happens on a thread that
//! is already in a runtime's context — a tokio worker thread, or inside `block_on`. A library
//! cannot know which threads its callers use, so [`Pool::run`] looks: on a thread in no
//! runtime's context (a fleet worker's, the command line's: the common case), the pooled
//! connection is used right on the caller's thread, with no thread switch; on a thread in a
//! runtime's context (where tokio would panic; a `spawn_blocking` thread is counted in, to be
//! safe), the call is handed to a runner thread of the pool ([`Runner`]) with its connection,
//! and the caller waits for the answer on a channel. Calling the backend from an `async fn`
//! therefore blocks that worker for the call (use `spawn_blocking` to keep it free) but never
//! panics.
//!
//! Handing every call to a thread of its connection, as this module first did, cost a
//! synchronous caller two thread switches per call — the caller's thread woke the
//! connection's and slept, and the other way round — which on a loaded machine was a large
//! share of a one-line append's client CPU time.
//!
//! [`Pool`] keeps up to `max` connections; a connection found closed (server restart,
//! network cut) is dropped and the next job connects again. A session lease holds a
//! connection of its own on a thread of its own ([`ConnThread`]) for its whole life.

use std::collections::BTreeMap;
use std::mem::ManuallyDrop;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread;

use postgres::{Client, Statement};

use crate::config::{PgConfig, SslMode};
use crate::error::PgError;

/// What a connection thread offers a job: the connection, made (again) on demand.
pub(crate) struct Session {
    config: Arc<PgConfig>,
    client: Option<Client>,
    /// Statements prepared on this connection (forgotten with it).
    statements: BTreeMap<&'static str, Statement>,
}

impl Session {
    /// The connection, connecting first when there is none or the last one closed.
    ///
    /// # Errors
    /// [`PgError::Connect`].
    pub(crate) fn client(&mut self) -> Result<&mut Client, PgError> {
        if self.client.as_ref().is_some_and(Client::is_closed) {
            self.discard();
        }
        match &mut self.client {
            Some(c) => Ok(c),
            slot @ None => Ok(slot.insert(connect(&self.config)?)),
        }
    }

    /// `sql` prepared on this connection, once per connection: later uses save the round
    /// trip of preparing it.
    ///
    /// # Errors
    /// [`PgError::Connect`], [`PgError::Query`].
    pub(crate) fn prepared(&mut self, sql: &'static str) -> Result<Statement, PgError> {
        if self.client.as_ref().is_some_and(Client::is_closed) {
            self.discard();
        }
        if let Some(st) = self.statements.get(sql) {
            return Ok(st.clone());
        }
        let st = self
            .client()?
            .prepare(sql)
            .map_err(crate::error::query("prepare a statement"))?;
        self.statements.insert(sql, st.clone());
        Ok(st)
    }

    /// Drops the connection (after an error that left it in an unknown state).
    pub(crate) fn discard(&mut self) {
        if let Some(c) = self.client.take() {
            close(c);
        }
        self.statements.clear();
    }

    /// Whether a connection is open.
    pub(crate) fn is_connected(&self) -> bool {
        self.client.as_ref().is_some_and(|c| !c.is_closed())
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(c) = self.client.take() {
            close(c);
        }
    }
}

/// Closes `client`. Closing runs the client's runtime (it says goodbye to the server) and
/// drops it, both of which tokio refuses with a panic on a thread in a runtime's context
/// (a backend dropped inside an `async fn`, a lost connection discarded after a call handed
/// to a runner): there the client is closed on a thread of its own.
fn close(client: Client) {
    if in_runtime_context() {
        // When no thread can be had, the client is leaked rather than closed here (the
        // server ends the connection when this process ends).
        let client = ManuallyDrop::new(client);
        let _ = thread::Builder::new()
            .name("session-pg close".to_owned())
            .spawn(move || drop(ManuallyDrop::into_inner(client)));
    } else {
        drop(client);
    }
}

/// Opens a connection as `config` says (TLS per its `sslmode`).
fn connect(config: &PgConfig) -> Result<Client, PgError> {
    let err = |source| PgError::Connect {
        redacted: config.redacted().to_owned(),
        source,
    };
    match config.ssl_mode() {
        SslMode::Disable => config.client_config().connect(postgres::NoTls).map_err(err),
        #[cfg(feature = "tls")]
        SslMode::Prefer | SslMode::Require => config
            .client_config()
            .connect(crate::tls::connector(config)?)
            .map_err(err),
        #[cfg(not(feature = "tls"))]
        SslMode::Prefer => config.client_config().connect(postgres::NoTls).map_err(err),
        #[cfg(not(feature = "tls"))]
        SslMode::Require => Err(PgError::Tls {
            detail: format!(
                "{} asks for TLS, but session-pg was built without its `tls` feature",
                config.redacted()
            ),
        }),
    }
}

type Job = Box<dyn FnOnce(&mut Session) + Send>;

/// One connection on its own thread. Dropping it ends the thread, which closes the
/// connection (after the job in progress, if any).
pub(crate) struct ConnThread {
    tx: mpsc::Sender<Job>,
}

impl ConnThread {
    /// Starts the thread; the connection is made by the first job that needs it.
    ///
    /// # Errors
    /// [`PgError::ConnectionThread`] when no thread can be started.
    pub(crate) fn spawn(config: Arc<PgConfig>) -> Result<ConnThread, PgError> {
        let (tx, rx) = mpsc::channel::<Job>();
        thread::Builder::new()
            .name("session-pg connection".to_owned())
            .spawn(move || {
                let mut session = Session {
                    config,
                    client: None,
                    statements: BTreeMap::new(),
                };
                while let Ok(job) = rx.recv() {
                    job(&mut session);
                    if session.client.as_ref().is_some_and(Client::is_closed) {
                        session.discard();
                    }
                }
            })
            .map_err(|_| PgError::ConnectionThread)?;
        Ok(ConnThread { tx })
    }

    /// Runs `f` on the connection's thread and waits for its answer.
    ///
    /// # Errors
    /// [`PgError::ConnectionThread`] when the thread is gone (it panicked); otherwise what
    /// `f` returns.
    pub(crate) fn call<T, F>(&self, f: F) -> Result<T, PgError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Session) -> Result<T, PgError> + Send + 'static,
    {
        let (reply_tx, reply_rx) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |s: &mut Session| {
            let out = f(s);
            if out.as_ref().is_err_and(PgError::is_connection_lost) {
                s.discard();
            }
            let _ = reply_tx.send(out);
        });
        self.tx.send(job).map_err(|_| PgError::ConnectionThread)?;
        reply_rx.recv().map_err(|_| PgError::ConnectionThread)?
    }
}

/// Whether the current thread is in a tokio runtime's context, where the synchronous client
/// would panic (a `spawn_blocking` thread is counted in: it has a runtime handle, and no
/// cheap public test tells it apart).
fn in_runtime_context() -> bool {
    tokio::runtime::Handle::try_current().is_ok()
}

type Task = Box<dyn FnOnce() + Send>;

/// A thread of the pool that runs the calls made on threads in a runtime's context, each
/// with the connection it is given.
struct Runner {
    tx: mpsc::Sender<Task>,
}

impl Runner {
    fn spawn() -> Result<Runner, PgError> {
        let (tx, rx) = mpsc::channel::<Task>();
        thread::Builder::new()
            .name("session-pg runner".to_owned())
            .spawn(move || {
                while let Ok(task) = rx.recv() {
                    task();
                }
            })
            .map_err(|_| PgError::ConnectionThread)?;
        Ok(Runner { tx })
    }
}

#[derive(Default)]
struct PoolState {
    /// Connections not in use (each `Session` holds at most one).
    idle: Vec<Session>,
    /// Sessions in existence: idle or in use.
    open: usize,
    /// Runner threads not in use.
    runners: Vec<Runner>,
}

/// Up to `max` connections shared by the calls of one backend.
pub(crate) struct Pool {
    config: Arc<PgConfig>,
    state: Mutex<PoolState>,
    freed: Condvar,
    max: usize,
}

/// A session checked out of the pool: checked in again when dropped, also when the call
/// using it unwinds (then without its connection, whose state is unknown).
struct CheckedOut<'p> {
    pool: &'p Pool,
    session: Option<Session>,
}

impl Drop for CheckedOut<'_> {
    fn drop(&mut self) {
        let Some(mut s) = self.session.take() else {
            // Lost with a runner thread that died: one session fewer.
            self.pool.state().open -= 1;
            self.pool.freed.notify_one();
            return;
        };
        if thread::panicking() || s.client.as_ref().is_some_and(Client::is_closed) {
            s.discard();
        }
        self.pool.state().idle.push(s);
        self.pool.freed.notify_one();
    }
}

impl Pool {
    pub(crate) fn new(config: PgConfig, max: usize) -> Pool {
        Pool {
            config: Arc::new(config),
            state: Mutex::new(PoolState::default()),
            freed: Condvar::new(),
            max: max.max(1),
        }
    }

    pub(crate) fn config(&self) -> &Arc<PgConfig> {
        &self.config
    }

    fn state(&self) -> MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn checkout(&self) -> CheckedOut<'_> {
        let mut st = self.state();
        loop {
            if let Some(s) = st.idle.pop() {
                return CheckedOut {
                    pool: self,
                    session: Some(s),
                };
            }
            if st.open < self.max {
                st.open += 1;
                return CheckedOut {
                    pool: self,
                    session: Some(Session {
                        config: self.config.clone(),
                        client: None,
                        statements: BTreeMap::new(),
                    }),
                };
            }
            st = self.freed.wait(st).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Runs `f` on `session` on a runner thread (for a caller in a runtime's context) and
    /// waits for it; the session comes back with the answer (`None` when the runner died).
    fn on_runner<T, F>(
        &self,
        mut session: Session,
        f: Arc<F>,
    ) -> (Option<Session>, Result<T, PgError>)
    where
        T: Send + 'static,
        F: Fn(&mut Session) -> Result<T, PgError> + Send + Sync + 'static,
    {
        let runner = match self.state().runners.pop() {
            Some(r) => r,
            None => match Runner::spawn() {
                Ok(r) => r,
                Err(e) => return (Some(session), Err(e)),
            },
        };
        let (reply_tx, reply_rx) = mpsc::sync_channel(1);
        let task: Task = Box::new(move || {
            let out = f(&mut session);
            let _ = reply_tx.send((session, out));
        });
        if runner.tx.send(task).is_err() {
            return (None, Err(PgError::ConnectionThread));
        }
        match reply_rx.recv() {
            Ok((session, out)) => {
                self.state().runners.push(runner);
                (Some(session), out)
            }
            // The runner died with the session (a panic): neither comes back.
            Err(_) => (None, Err(PgError::ConnectionThread)),
        }
    }

    /// Runs `f` on a pooled connection: on the caller's thread, or on a runner thread when
    /// the caller is in a tokio runtime's context (see the module documentation). A
    /// connection lost before or during `f` is dropped; `f` is run once more on a new
    /// connection only when `retry_on_lost` (for reads and for writes that recognise their
    /// own retries).
    ///
    /// # Errors
    /// What `f` returns, or [`PgError::ConnectionThread`].
    pub(crate) fn run<T, F>(&self, retry_on_lost: bool, f: F) -> Result<T, PgError>
    where
        T: Send + 'static,
        F: Fn(&mut Session) -> Result<T, PgError> + Send + Sync + 'static,
    {
        let inline = !in_runtime_context();
        let f = Arc::new(f);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut conn = self.checkout();
            let result = match conn.session.take() {
                Some(mut session) if inline => {
                    let out = f(&mut session);
                    conn.session = Some(session);
                    out
                }
                Some(session) => {
                    let (back, out) = self.on_runner(session, f.clone());
                    conn.session = back;
                    out
                }
                None => Err(PgError::ConnectionThread),
            };
            if result.as_ref().is_err_and(PgError::is_connection_lost)
                && let Some(s) = conn.session.as_mut()
            {
                s.discard();
            }
            drop(conn);
            match result {
                Err(e) if retry_on_lost && attempt < 2 && e.is_connection_lost() => continue,
                other => return other,
            }
        }
    }

    /// A connection thread of its own, outside the pool (a lease holds one for its life).
    ///
    /// # Errors
    /// [`PgError::ConnectionThread`].
    pub(crate) fn dedicated(&self) -> Result<ConnThread, PgError> {
        ConnThread::spawn(self.config.clone())
    }
}
