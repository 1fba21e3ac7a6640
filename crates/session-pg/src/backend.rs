//! [`PgBackend`]: the store on one PostgreSQL database — opening, options, migrations.

use std::fmt;
use std::sync::Arc;

use session_storage::HolderInfo;

use crate::config::PgConfig;
use crate::error::PgError;
use crate::error::RowExt;
use crate::known::KnownRuns;
use crate::pool::Pool;
use crate::schema::{self, MigrationReport};

/// Options of [`PgBackend::open_with`]; build with
/// `PgOptions { max_connections: 4, ..PgOptions::default() }`.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// Most pooled connections (default 8). Each held lease uses one more, outside the pool,
    /// on a thread of its own.
    pub max_connections: usize,
    /// Recorded with every run this client creates and every session it saves, and shown in
    /// listings as where a run came from (default: this machine's host name).
    pub origin_host: String,
    /// Apply missing migrations when opening (default `true`). `false`: the schema must be at
    /// this build's version already ([`PgError::SchemaTooNew`] / a query error otherwise).
    pub migrate: bool,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            max_connections: 8,
            origin_host: HolderInfo::this_process("").host,
            migrate: true,
        }
    }
}

/// The session store on PostgreSQL: implements [`RunCatalogue`](session_storage::RunCatalogue)
/// and [`SessionStore`](session_storage::SessionStore). `Send + Sync`; share one per process.
/// Any number of processes on any number of hosts may use one database at once.
pub struct PgBackend {
    pub(crate) pool: Arc<Pool>,
    pub(crate) options: PgOptions,
    pub(crate) migration: MigrationReport,
    pub(crate) store_id: String,
    /// The runs this client appended to last, as it left them (see `known.rs`).
    pub(crate) known: Arc<KnownRuns>,
}

impl fmt::Debug for PgBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgBackend")
            .field("config", self.pool.config())
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl PgBackend {
    /// Opens the store at connection string `conn` (see [`PgConfig`]) with default options,
    /// applying missing migrations.
    ///
    /// # Errors
    /// [`PgError::InvalidConfig`], [`PgError::Connect`], [`PgError::SchemaTooNew`],
    /// [`PgError::Migration`], [`PgError::Query`].
    pub fn open(conn: &str) -> Result<PgBackend, PgError> {
        PgBackend::open_with(PgConfig::parse(conn)?, PgOptions::default())
    }

    /// Opens the store at `config` with `options`. Connects once (so a wrong address or
    /// password fails here) and migrates when [`PgOptions::migrate`] is on.
    ///
    /// # Errors
    /// As [`PgBackend::open`].
    pub fn open_with(config: PgConfig, options: PgOptions) -> Result<PgBackend, PgError> {
        let pool = Arc::new(Pool::new(config, options.max_connections));
        let migrate = options.migrate;
        let migration = pool.run(true, move |s| {
            let client = s.client()?;
            if migrate {
                schema::migrate(client)
            } else {
                let version: i32 = client
                    .query_one(
                        "SELECT coalesce(max(version), 0) FROM schema_migrations",
                        &[],
                    )
                    .map_err(crate::error::query("read the schema version"))?
                    .col(0)?;
                let known = schema::latest_version();
                if version > known {
                    return Err(PgError::SchemaTooNew {
                        found: version,
                        known,
                    });
                }
                Ok(MigrationReport {
                    applied: Vec::new(),
                    version,
                })
            }
        })?;
        let store_id = pool.run(true, |s| {
            s.client()?
                .query_one("SELECT store_id FROM store_info LIMIT 1", &[])
                .map_err(crate::error::query("read the store id"))?
                .col(0)
        })?;
        Ok(PgBackend {
            pool,
            options,
            migration,
            store_id,
            known: Arc::default(),
        })
    }

    /// The connection string, password redacted.
    pub fn config(&self) -> &PgConfig {
        self.pool.config()
    }

    /// The options in use.
    pub fn options(&self) -> &PgOptions {
        &self.options
    }

    /// This store's identity (a UUID made when the database was first migrated): the same
    /// for every connection string that reaches this database.
    pub fn store_id(&self) -> &str {
        &self.store_id
    }

    /// What opening did to the schema.
    pub fn migration(&self) -> &MigrationReport {
        &self.migration
    }

    /// Runs `f` with a connection of the pool, on the caller's thread or, when the caller is
    /// in a tokio runtime's context, on a thread of the pool (see the crate documentation on
    /// threads), for queries the traits do not cover.
    ///
    /// # Errors
    /// What `f` returns; [`PgError::Connect`], [`PgError::ConnectionThread`].
    pub fn with_client<T, F>(&self, f: F) -> Result<T, PgError>
    where
        T: Send + 'static,
        F: Fn(&mut postgres::Client) -> Result<T, PgError> + Send + Sync + 'static,
    {
        self.pool.run(false, move |s| f(s.client()?))
    }
}
