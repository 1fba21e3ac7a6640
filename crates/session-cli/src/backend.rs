//! Which store a command works on: the local directory (`--root`, `$SESSIONS_ROOT`, the
//! reference's layouts; [`crate::root`]) or a shared PostgreSQL store (`--store`,
//! `$SESSIONS_STORE`), and [`RunRef`], a run to read from either.
//!
//! Precedence, first match wins: `--store STORE`, `--root DIR` (the two flags exclude each
//! other), `$SESSIONS_STORE`, `$SESSIONS_ROOT`, the layouts. A `STORE` that is a
//! `postgres://`/`postgresql://` URL or libpq `key=value` pairs
//! ([`session_pg::looks_like_connection_string`]) names a shared store; anything else is a
//! local directory, exactly as `--root` (resp. `$SESSIONS_ROOT`) would name it.
//!
//! The connection string is only ever shown redacted ([`PgConfig`]'s `Display`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use session_pg::{PgBackend, PgConfig, PgOptions};
use session_storage::{RunCatalogue, StorageError};

use crate::env::Env;
use crate::error::{CliError, one_line};
use crate::root::{self, Root, RootSource};

/// The environment variable naming the store (a connection string or a directory).
pub(crate) const STORE_VAR: &str = session_pg::STORE_ENV;

/// How the shared store was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoreSource {
    /// `--store` on the command line.
    Flag,
    /// [`STORE_VAR`].
    EnvVar,
}

impl StoreSource {
    /// `--store` or `$SESSIONS_STORE`, for messages.
    pub(crate) fn how(self) -> &'static str {
        match self {
            StoreSource::Flag => "--store",
            StoreSource::EnvVar => "$SESSIONS_STORE",
        }
    }
}

/// A shared PostgreSQL store, connected on first use.
pub(crate) struct Shared {
    /// The connection string (shown redacted only).
    pub(crate) config: PgConfig,
    /// How it was chosen.
    pub(crate) source: StoreSource,
    backend: OnceLock<Arc<PgBackend>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("config", &self.config.redacted())
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// Reads `text` with `env`'s libpq variables (`PGHOST`, `PGUSER`, …) for what it leaves out.
    fn new(text: &str, source: StoreSource, env: &Env) -> Result<Shared, CliError> {
        let config =
            PgConfig::parse_with_env(text, |k| env.get(k).map(str::to_owned)).map_err(|e| {
                CliError::Usage(format!("{} is no store: {}", source.how(), one_line(&e)))
            })?;
        Ok(Shared {
            config,
            source,
            backend: OnceLock::new(),
        })
    }

    /// The redacted connection string and how it was chosen (`postgresql://u:***@h/db
    /// (from --store)`), for messages.
    pub(crate) fn describe(&self) -> String {
        format!("{} (from {})", self.config.redacted(), self.source.how())
    }

    /// The backend, connected on first use. Reading commands never change the schema: a
    /// database without one is reported, not migrated (`sessions sync --to` creates it).
    ///
    /// # Errors
    /// Data (4) naming the store (password redacted) when it cannot be reached or holds no
    /// session store.
    pub(crate) fn backend(&self) -> Result<Arc<PgBackend>, CliError> {
        if let Some(b) = self.backend.get() {
            return Ok(Arc::clone(b));
        }
        let options = PgOptions {
            max_connections: 2,
            migrate: false,
            ..PgOptions::default()
        };
        let opened = PgBackend::open_with(self.config.clone(), options).map_err(|e| {
            let hint = match &e {
                session_pg::PgError::Query { .. } => {
                    " (no session store in this database? `sessions sync --to STORE` creates it)"
                }
                _ => "",
            };
            CliError::Data(format!(
                "shared store {}: {}{hint}",
                self.describe(),
                one_line(&e)
            ))
        })?;
        let b = self.backend.get_or_init(|| Arc::new(opened));
        Ok(Arc::clone(b))
    }
}

/// The store a command works on: the local root (always resolved when it can be: `sync`
/// reads it even when a shared store is named by the environment), and the shared store when
/// one is named.
pub(crate) struct Choice {
    /// The local store.
    pub(crate) root: Root,
    /// The shared store, when `--store`/`$SESSIONS_STORE` names one.
    pub(crate) shared: Option<Shared>,
}

/// Resolves the store from `--store`, `--root` and the environment (see the module docs for
/// the precedence).
///
/// # Errors
/// Usage (2) for a connection string that cannot be read, or when nothing names a store and
/// `HOME` is unset.
pub(crate) fn resolve(
    store_flag: Option<&str>,
    root_flag: Option<PathBuf>,
    env: &Env,
) -> Result<Choice, CliError> {
    let shared = |text: &str, source: StoreSource| -> Result<Choice, CliError> {
        let shared = Shared::new(text, source, env)?;
        // The local root is not what the command works on; it stays known for `where` and
        // `sync` when it can be resolved.
        let root = root::resolve(None, env).unwrap_or(Root {
            path: PathBuf::new(),
            source: RootSource::Home,
        });
        Ok(Choice {
            root,
            shared: Some(shared),
        })
    };
    if let Some(text) = store_flag.filter(|t| !t.is_empty()) {
        if session_pg::looks_like_connection_string(text) {
            return shared(text, StoreSource::Flag);
        }
        return Ok(Choice {
            root: root::resolve(Some(PathBuf::from(text)), env)?,
            shared: None,
        });
    }
    if root_flag.is_some() {
        return Ok(Choice {
            root: root::resolve(root_flag, env)?,
            shared: None,
        });
    }
    if let Some(text) = env.get(STORE_VAR) {
        if session_pg::looks_like_connection_string(text) {
            return shared(text, StoreSource::EnvVar);
        }
        return Ok(Choice {
            root: Root {
                path: PathBuf::from(text),
                source: RootSource::EnvVar,
            },
            shared: None,
        });
    }
    Ok(Choice {
        root: root::resolve(None, env)?,
        shared: None,
    })
}

/// The refusal of a command that works on a local store only.
pub(crate) fn local_only(command: &str, shared: &Shared) -> CliError {
    CliError::Usage(format!(
        "`sessions {command}` works on a local store only, and the store is the shared store \
         {}; name a local one with --root DIR",
        shared.describe()
    ))
}

/// A storage error as a command error: unknown run or session → not found (3), unsafe id or
/// bad cursor → usage (2), anything else data (4), with the store named.
pub(crate) fn storage_err(shared: &Shared, e: StorageError) -> CliError {
    match &e {
        StorageError::RunNotFound { .. } => CliError::NotFound(format!(
            "{} in the shared store {}",
            one_line(&e),
            shared.describe()
        )),
        StorageError::UnsafeId { .. } | StorageError::InvalidCursor { .. } => {
            CliError::Usage(one_line(&e))
        }
        _ => CliError::Data(format!(
            "shared store {}: {}",
            shared.describe(),
            one_line(&e)
        )),
    }
}

/// A run to read: a local file, or a run of a catalogue. The one input of the streamed
/// renderers ([`crate::support::stream`]), so both kinds of store render through the same code.
#[derive(Clone)]
pub(crate) enum RunRef {
    /// A run file (`.jsonl` or `.jsonl.zst`).
    File(PathBuf),
    /// Run `run_id` of `catalogue`, shown in messages as `location`.
    Stored {
        /// The catalogue holding it.
        catalogue: Arc<dyn RunCatalogue>,
        /// The run id.
        run_id: String,
        /// Where it is, for messages and `file` fields (a shared store: `host:run_id`).
        location: String,
    },
}

impl RunRef {
    /// A run of `pg` as listed.
    pub(crate) fn stored(pg: &Arc<PgBackend>, summary: &session_storage::RunSummary) -> RunRef {
        let catalogue: Arc<dyn RunCatalogue> = Arc::clone(pg) as Arc<dyn RunCatalogue>;
        RunRef::Stored {
            catalogue,
            run_id: summary.run_id.clone(),
            location: summary.location.clone(),
        }
    }

    /// The file's path, or the stored run's location as a path (what messages and `file`
    /// fields show: [`crate::support::paths::rel`] leaves it as it is).
    pub(crate) fn display_path(&self) -> PathBuf {
        match self {
            RunRef::File(p) => p.clone(),
            RunRef::Stored { location, .. } => PathBuf::from(location),
        }
    }

    /// The run id the file name gives, or the stored run's id.
    pub(crate) fn run_id(&self) -> Option<String> {
        match self {
            RunRef::File(p) => crate::support::paths::run_id_of_path(p),
            RunRef::Stored { run_id, .. } => Some(run_id.clone()),
        }
    }
}

impl From<&Path> for RunRef {
    fn from(p: &Path) -> RunRef {
        RunRef::File(p.to_owned())
    }
}

impl From<&PathBuf> for RunRef {
    fn from(p: &PathBuf) -> RunRef {
        RunRef::File(p.clone())
    }
}

impl From<&RunRef> for RunRef {
    fn from(r: &RunRef) -> RunRef {
        r.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Env {
        Env::from_pairs(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }

    #[test]
    fn the_store_flag_wins_then_root_then_the_store_variable() {
        let e = env(&[
            ("HOME", "/h"),
            ("USER", "dev"),
            ("SESSIONS_ROOT", "/env/root"),
            ("SESSIONS_STORE", "postgresql://u:pw@db/s"),
        ]);
        // The variable names a shared store over $SESSIONS_ROOT.
        let c = resolve(None, None, &e).unwrap();
        let s = c.shared.unwrap();
        assert_eq!(s.source, StoreSource::EnvVar);
        assert_eq!(
            s.describe(),
            "postgresql://u:***@db/s (from $SESSIONS_STORE)"
        );
        assert_eq!(c.root.path, PathBuf::from("/env/root"));
        // --root wins over the variable.
        let c = resolve(None, Some("/flag".into()), &e).unwrap();
        assert!(c.shared.is_none());
        assert_eq!(c.root.path, PathBuf::from("/flag"));
        // --store wins over everything; key=value strings are stores too.
        let c = resolve(Some("host=/run/pg dbname=s"), None, &e).unwrap();
        assert_eq!(c.shared.unwrap().source, StoreSource::Flag);
        // A directory given to --store (or the variable) is a local store.
        let c = resolve(Some("/some/dir"), None, &e).unwrap();
        assert!(c.shared.is_none());
        assert_eq!(c.root.path, PathBuf::from("/some/dir"));
        assert_eq!(c.root.source, RootSource::Flag);
        let c = resolve(None, None, &env(&[("SESSIONS_STORE", "/var/s")])).unwrap();
        assert!(c.shared.is_none());
        assert_eq!(c.root.path, PathBuf::from("/var/s"));
        assert_eq!(c.root.source, RootSource::EnvVar);
    }

    #[test]
    fn a_bad_connection_string_is_a_usage_error_without_its_password() {
        let e = env(&[("HOME", "/h"), ("USER", "dev")]);
        let err = resolve(Some("postgresql://u:s3cret@db:notaport/x"), None, &e)
            .err()
            .unwrap();
        assert_eq!(err.exit_code(), crate::EXIT_USAGE);
        let msg = err.to_string();
        assert!(msg.starts_with("--store is no store: "), "{msg}");
        assert!(!msg.contains("s3cret"), "{msg}");
    }
}
