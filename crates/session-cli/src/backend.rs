//! Which store a command works on: the local directory (`--root`, `$SESSIONS_ROOT`, the
//! reference's layouts; [`crate::root`]) or a shared PostgreSQL store (`--store`,
//! `$SESSIONS_STORE`), and the look-ups every reading command needs on a shared store (ids,
//! runs, sessions) through the storage traits ([`RunCatalogue`], [`SessionStore`]).
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
use session_storage::{RunCatalogue, RunListQuery, SessionListQuery, SessionStore, StorageError};

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

/// What an id argument names on a shared store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Named {
    /// A run.
    Run,
    /// A session (saved, or known by its runs only).
    Session,
}

/// Most candidates an ambiguous prefix lists per kind.
const MAX_CANDIDATES: usize = 10;

/// `id` as a whole run or session id of the shared store, the way the local store resolves
/// it ([`crate::ids`]): `-` is the newest of the current directory's workspace (its newest
/// saved session, else its newest run, as `want` allows), a whole id is itself, anything
/// else a unique prefix of at least [`crate::ids::MIN_PREFIX`] characters. `@title` is a
/// usage error: titles are kept in a local store's `state.db` only.
///
/// # Errors
/// Usage (2) for an unsafe id, `@title` or an ambiguous prefix (listing the candidates);
/// not found (3) when nothing has that id or prefix; data (4) when the store fails.
pub(crate) fn resolve_id(
    ctx: &crate::Ctx<'_>,
    shared: &Shared,
    id: &str,
    want: crate::ids::Want,
) -> Result<(Named, String), CliError> {
    use crate::ids::{MIN_PREFIX, NEWEST, Want};
    if id.starts_with('@') && want != Want::Run {
        return Err(CliError::Usage(format!(
            "{id}: session titles are kept in a local store's state.db; the shared store {} \
             has none (give the session id or a prefix of it)",
            shared.describe()
        )));
    }
    crate::ids::check(id, want)?;
    let pg = shared.backend()?;
    let err = |e| storage_err(shared, e);
    let runs_ok = matches!(want, Want::Run | Want::Either);
    let sessions_ok = matches!(want, Want::Session | Want::Either);
    if id == NEWEST {
        let ws = crate::commands::workspace_of(&ctx.cwd()?)
            .to_string_lossy()
            .into_owned();
        if sessions_ok {
            let page = pg
                .list_sessions(&SessionListQuery {
                    workspace: Some(ws.clone()),
                    limit: Some(1),
                    after: None,
                })
                .map_err(err)?;
            if let Some(s) = page.sessions.into_iter().next() {
                return Ok((Named::Session, s.session_id));
            }
        }
        if runs_ok {
            let page = pg
                .list_runs(&RunListQuery {
                    workspace: Some(ws.clone()),
                    limit: Some(1),
                    ..RunListQuery::default()
                })
                .map_err(err)?;
            if let Some(r) = page.runs.into_iter().next() {
                return Ok((Named::Run, r.run_id));
            }
        }
        return Err(CliError::NotFound(format!(
            "no {} in workspace {ws} in the shared store {} (`-` and --last mean the newest of \
             the current directory's workspace)",
            noun(want),
            shared.describe()
        )));
    }
    let found = pg.ids_with_prefix(id, MAX_CANDIDATES + 1).map_err(err)?;
    let runs: Vec<_> = if runs_ok { found.runs } else { Vec::new() };
    let sessions: Vec<_> = if sessions_ok {
        found.sessions
    } else {
        Vec::new()
    };
    if runs.iter().any(|m| m.id == id) {
        return Ok((Named::Run, id.to_owned()));
    }
    if sessions.iter().any(|m| m.id == id) {
        return Ok((Named::Session, id.to_owned()));
    }
    // A session with runs but no saved state is known by its runs.
    if sessions_ok && sessions.is_empty() && has_runs_of_session(shared, &*pg, id)? {
        return Ok((Named::Session, id.to_owned()));
    }
    if id.len() < MIN_PREFIX {
        return Err(not_found(shared, id, want));
    }
    match (runs.as_slice(), sessions.as_slice()) {
        ([], []) => Err(not_found(shared, id, want)),
        ([one], []) => Ok((Named::Run, one.id.clone())),
        ([], [one]) => Ok((Named::Session, one.id.clone())),
        _ => {
            let mut list: Vec<(&str, &session_pg::PrefixMatch)> = Vec::new();
            list.extend(runs.iter().take(MAX_CANDIDATES).map(|m| ("run", m)));
            list.extend(sessions.iter().take(MAX_CANDIDATES).map(|m| ("session", m)));
            Err(crate::ids::ambiguous_list(
                ctx,
                id,
                (runs.len(), sessions.len()),
                list.iter()
                    .map(|(kind, m)| (*kind, m.id.as_str(), m.time.as_deref(), m.text.as_deref())),
            ))
        }
    }
}

fn noun(want: crate::ids::Want) -> &'static str {
    match want {
        crate::ids::Want::Run => "run",
        crate::ids::Want::Session => "session",
        crate::ids::Want::Either => "run or session",
    }
}

fn not_found(shared: &Shared, id: &str, want: crate::ids::Want) -> CliError {
    let short = if id.len() < crate::ids::MIN_PREFIX {
        format!(
            " (an id prefix needs at least {} characters)",
            crate::ids::MIN_PREFIX
        )
    } else {
        String::new()
    };
    CliError::NotFound(format!(
        "no {} {id} in the shared store {}{short}",
        noun(want),
        shared.describe()
    ))
}

fn has_runs_of_session(
    shared: &Shared,
    pg: &dyn RunCatalogue,
    session_id: &str,
) -> Result<bool, CliError> {
    let page = pg
        .list_runs(&RunListQuery {
            session: Some(session_id.to_owned()),
            limit: Some(1),
            ..RunListQuery::default()
        })
        .map_err(|e| storage_err(shared, e))?;
    Ok(!page.runs.is_empty())
}

/// The runs of session `session_id` in the shared store, oldest `started_at` first (then run
/// id), as the local store orders a session's runs.
///
/// # Errors
/// Data (4) when the store fails.
pub(crate) fn session_runs(
    shared: &Shared,
    pg: &dyn RunCatalogue,
    session_id: &str,
) -> Result<Vec<session_storage::RunSummary>, CliError> {
    let mut out = Vec::new();
    let mut query = RunListQuery {
        session: Some(session_id.to_owned()),
        limit: Some(500),
        ..RunListQuery::default()
    };
    loop {
        let page = pg.list_runs(&query).map_err(|e| storage_err(shared, e))?;
        out.extend(page.runs);
        match page.next_cursor {
            Some(c) => query.after = Some(c),
            None => break,
        }
    }
    out.reverse();
    Ok(out)
}

/// A run to read: a local file, or a run of a catalogue. The one input of the streamed
/// renderers ([`crate::stream`]), so both kinds of store render through the same code.
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
    /// fields show: [`crate::store::rel`] leaves it as it is).
    pub(crate) fn display_path(&self) -> PathBuf {
        match self {
            RunRef::File(p) => p.clone(),
            RunRef::Stored { location, .. } => PathBuf::from(location),
        }
    }

    /// The run id the file name gives, or the stored run's id.
    pub(crate) fn run_id(&self) -> Option<String> {
        match self {
            RunRef::File(p) => crate::store::run_id_of_path(p),
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
