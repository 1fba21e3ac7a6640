//! [`PgError`]: what PostgreSQL itself, the connection or the schema did wrong. It is the
//! `source()` of [`StorageError::Backend`](session_storage::StorageError::Backend) for the
//! trait methods, and the error of this crate's own functions (opening, migrations, `gc`).

use session_storage::{StorageError, Target};

/// A failure of the PostgreSQL backend. Never contains a password: connection strings are
/// shown redacted ([`PgConfig::redacted`](crate::PgConfig::redacted)).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PgError {
    /// The connection string could not be read.
    #[error("invalid connection string {redacted}: {detail}")]
    InvalidConfig {
        /// The connection string with its password replaced by `***`.
        redacted: String,
        /// What is wrong with it.
        detail: String,
    },
    /// No connection could be made.
    #[error("cannot connect to {redacted}: {source}")]
    Connect {
        /// The connection string with its password replaced by `***`.
        redacted: String,
        /// The client's error (refused, authentication, TLS, …).
        #[source]
        source: postgres::Error,
    },
    /// A statement failed (or the connection broke during it).
    #[error("{op}: {source}")]
    Query {
        /// What was being done (`"append lines"`, `"list runs"`, …).
        op: &'static str,
        /// The client's error; for a server error its SQLSTATE is in
        /// `source.code()`.
        #[source]
        source: postgres::Error,
    },
    /// A migration failed; the transaction was rolled back and the schema is unchanged.
    #[error("migration {version} ({name}) failed: {source}")]
    Migration {
        /// Number of the migration.
        version: i32,
        /// Its name.
        name: &'static str,
        /// The client's error.
        #[source]
        source: postgres::Error,
    },
    /// The database was migrated by a newer build; this one does not know its schema and
    /// refuses to use it.
    #[error(
        "the database schema is at migration {found}, newer than the {known} this build knows; upgrade session-pg"
    )]
    SchemaTooNew {
        /// Highest migration applied to the database.
        found: i32,
        /// Highest migration this build has.
        known: i32,
    },
    /// The thread that owns a connection ended before answering (it panicked or was shut
    /// down with the backend).
    #[error("the connection thread ended before answering")]
    ConnectionThread,
    /// TLS was asked for but could not be set up (or the crate was built without the `tls`
    /// feature).
    #[error("TLS: {detail}")]
    Tls {
        /// What went wrong.
        detail: String,
    },
    /// The certificate authorities file named by `sslrootcert` / `PGSSLROOTCERT` could not be
    /// read (the OS error is the `source()`).
    #[error("TLS: cannot read the root certificates {}: {source}", path.display())]
    TlsRootCert {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Stored data that this crate wrote itself is not what it wrote (a row out of place, a
    /// gap in a run's byte offsets).
    #[error("inconsistent stored data: {detail}")]
    Inconsistent {
        /// What was found.
        detail: String,
    },
}

impl PgError {
    /// Whether the error means the connection is gone (server restart, network cut): the
    /// operation may be retried on a new connection.
    pub fn is_connection_lost(&self) -> bool {
        match self {
            PgError::Connect { .. } | PgError::ConnectionThread => true,
            PgError::Query { source, .. } | PgError::Migration { source, .. } => {
                is_connection_error(source)
            }
            _ => false,
        }
    }

    /// The SQLSTATE of a server error, when there is one.
    pub fn sql_state(&self) -> Option<&str> {
        match self {
            PgError::Query { source, .. }
            | PgError::Migration { source, .. }
            | PgError::Connect { source, .. } => source.code().map(|c| c.code()),
            _ => None,
        }
    }
}

/// Whether a client error means the connection is unusable.
pub(crate) fn is_connection_error(e: &postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    if let Some(c) = e.code() {
        // admin_shutdown, crash_shutdown, cannot_connect_now, connection exceptions: the
        // server is going away or the connection broke.
        return matches!(
            c.code(),
            "57P01" | "57P02" | "57P03" | "08000" | "08003" | "08006"
        );
    }
    // An I/O failure of the socket somewhere in the chain (not a conversion error).
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        if c.is::<std::io::Error>() {
            return true;
        }
        cause = c.source();
    }
    false
}

/// `PgError` as the `StorageError` of a trait method.
pub(crate) fn storage(op: &'static str, target: Target, e: PgError) -> StorageError {
    StorageError::backend(op, target, e)
}

/// `PgError::Query` from a client error.
pub(crate) fn query(op: &'static str) -> impl FnOnce(postgres::Error) -> PgError {
    move |source| PgError::Query { op, source }
}

/// Typed column access that fails instead of panicking (`Row::get` panics on a NULL or a type
/// it cannot convert, which only a schema changed by hand could produce).
pub(crate) trait RowExt {
    /// Column `i` as `T`.
    fn col<'a, T: postgres::types::FromSql<'a>>(&'a self, i: usize) -> Result<T, PgError>;
}

impl RowExt for postgres::Row {
    fn col<'a, T: postgres::types::FromSql<'a>>(&'a self, i: usize) -> Result<T, PgError> {
        self.try_get(i).map_err(|source| PgError::Query {
            op: "read a column",
            source,
        })
    }
}
