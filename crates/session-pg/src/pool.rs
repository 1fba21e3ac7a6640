//! Connections, each owned by a thread of its own.
//!
//! The synchronous `postgres` client runs a small tokio runtime inside every call, and tokio
//! panics ("Cannot start a runtime from within a runtime") when that happens on a thread that
//! is already driving a runtime — a tokio worker thread. A library cannot know which threads
//! its callers use, so no client is ever touched on a caller's thread: each connection lives
//! on a dedicated thread ([`ConnThread`]) that runs the jobs sent to it, and the caller waits
//! for the answer on a channel. Calling the backend from an `async fn` therefore blocks that
//! worker for the call (use `spawn_blocking` to keep it free) but never panics. The cost is
//! two thread switches per call, small next to a round trip to the server.
//!
//! [`Pool`] keeps up to `max` such connections; a connection found closed (server restart,
//! network cut) is dropped and the next job connects again.

use std::collections::BTreeMap;
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
        self.client = None;
        self.statements.clear();
    }

    /// Whether a connection is open.
    pub(crate) fn is_connected(&self) -> bool {
        self.client.as_ref().is_some_and(|c| !c.is_closed())
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

#[derive(Default)]
struct PoolState {
    idle: Vec<ConnThread>,
    open: usize,
}

/// Up to `max` connection threads shared by the calls of one backend.
pub(crate) struct Pool {
    config: Arc<PgConfig>,
    state: Mutex<PoolState>,
    freed: Condvar,
    max: usize,
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

    fn checkout(&self) -> Result<ConnThread, PgError> {
        let mut st = self.state();
        loop {
            if let Some(c) = st.idle.pop() {
                return Ok(c);
            }
            if st.open < self.max {
                st.open += 1;
                drop(st);
                return ConnThread::spawn(self.config.clone()).inspect_err(|_| {
                    self.state().open -= 1;
                    self.freed.notify_one();
                });
            }
            st = self.freed.wait(st).unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn checkin(&self, conn: Option<ConnThread>) {
        let mut st = self.state();
        match conn {
            Some(c) => st.idle.push(c),
            None => st.open -= 1,
        }
        drop(st);
        self.freed.notify_one();
    }

    /// Runs `f` on a pooled connection. A connection lost before or during `f` is dropped;
    /// `f` is run once more on a new connection only when `retry_on_lost` (for reads and for
    /// writes that recognise their own retries).
    ///
    /// # Errors
    /// What `f` returns, or [`PgError::ConnectionThread`].
    pub(crate) fn run<T, F>(&self, retry_on_lost: bool, f: F) -> Result<T, PgError>
    where
        T: Send + 'static,
        F: Fn(&mut Session) -> Result<T, PgError> + Send + Sync + 'static,
    {
        let f = Arc::new(f);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let conn = self.checkout()?;
            let job = f.clone();
            let result = conn.call(move |s| job(s));
            let alive = !matches!(result, Err(PgError::ConnectionThread));
            self.checkin(alive.then_some(conn));
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
