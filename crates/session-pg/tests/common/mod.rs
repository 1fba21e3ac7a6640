//! A throwaway PostgreSQL cluster for the tests: `initdb` + `pg_ctl` in a temporary directory,
//! listening on a unix socket only (no TCP port, so parallel runs never clash).
//!
//! * The server binaries are those of `SESSION_PG_BINDIR` when it is set, else found on `PATH`,
//!   through `pg_config --bindir`, or in `/usr/lib/postgresql/<major>/bin` (the newest).
//! * `initdb` refuses to run as root: as root, the cluster is made and run as `nobody`
//!   (`runuser`), in a directory `nobody` owns under a traversable (0755) temporary directory.
//! * One cluster per test binary ([`shared`], started on first use), a fresh database per test
//!   ([`Cluster::fresh_db`]). A watchdog process started with the cluster stops it and removes
//!   its directory as soon as the test binary exits, however it exits (passing, failing,
//!   killed): no postgres process outlives `cargo test`.
//! * Without PostgreSQL the tests print one line saying they were skipped and why, and pass;
//!   with `SESSION_PG_REQUIRED=1` (CI) they fail instead.

#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use session_pg::{PgBackend, PgConfig, PgOptions};

/// Set to `1` to make a cluster that cannot start fail the tests instead of skipping them.
pub const REQUIRED_ENV: &str = "SESSION_PG_REQUIRED";

/// The directory of the server binaries to test against (else they are looked for).
pub const BINDIR_ENV: &str = "SESSION_PG_BINDIR";

/// A running cluster.
#[derive(Debug)]
pub struct Cluster {
    pub dir: PathBuf,
    pub socket_dir: PathBuf,
    pub data: PathBuf,
    pub bin: PathBuf,
    /// `Some(user)` when the server runs as another user (tests run as root).
    pub run_as: Option<String>,
    pub version: String,
    /// The port: of the unix socket's name, and on 127.0.0.1 when [`Extra::tcp`] is set.
    pub port: u16,
    /// Server settings added by [`Cluster::start_with`] (`-c …` arguments).
    extra_opts: String,
    databases: AtomicU32,
}

/// What [`Cluster::start_with`] adds to a default cluster.
#[derive(Debug, Default, Clone)]
pub struct Extra {
    /// Files written into the cluster's directory before it starts, `(name, contents)`,
    /// readable only by the server's user (mode 0600, as PostgreSQL wants a key file).
    pub files: Vec<(String, Vec<u8>)>,
    /// Server settings `(name, value)`, after (so overriding) the defaults; `{dir}` in a
    /// value is the cluster's directory (where [`Extra::files`] are).
    pub settings: Vec<(String, String)>,
    /// Also listen on TCP at 127.0.0.1, on a free port ([`Cluster::port`]).
    pub tcp: bool,
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The directory holding `initdb`, `pg_ctl` and `postgres`.
pub fn find_bindir() -> Result<PathBuf, String> {
    let has_all = |d: &Path| {
        ["initdb", "pg_ctl", "postgres"]
            .iter()
            .all(|b| d.join(b).is_file())
    };
    // A chosen server version: that directory and nothing else.
    if let Some(d) = std::env::var_os(BINDIR_ENV) {
        let d = PathBuf::from(d);
        return if has_all(&d) {
            Ok(d)
        } else {
            Err(format!(
                "{BINDIR_ENV}={} holds no initdb, pg_ctl and postgres",
                d.display()
            ))
        };
    }
    if let Some(initdb) = which("initdb") {
        let real = std::fs::canonicalize(&initdb).unwrap_or(initdb);
        if let Some(d) = real.parent()
            && has_all(d)
        {
            return Ok(d.to_owned());
        }
    }
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output()
        && out.status.success()
    {
        let d = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if has_all(&d) {
            return Ok(d);
        }
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let major: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            has_all(&bin).then_some((major, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, d)| d).ok_or_else(|| {
        "no PostgreSQL server binaries (initdb, pg_ctl, postgres) on PATH, via pg_config --bindir, or in /usr/lib/postgresql/*/bin".to_owned()
    })
}

fn is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

fn id_of(user: &str) -> Result<(u32, u32), String> {
    let get = |flag: &str| -> Result<u32, String> {
        let out = Command::new("id")
            .args([flag, user])
            .output()
            .map_err(|e| format!("id {flag} {user}: {e}"))?;
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .map_err(|_| format!("no user {user}"))
    };
    Ok((get("-u")?, get("-g")?))
}

/// Single-quotes `s` for `sh`.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

impl Cluster {
    /// A command running `bin/<tool> args` as the cluster's user.
    fn tool(&self, tool: &str, args: &[&str]) -> Command {
        let exe = self.bin.join(tool);
        match &self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(exe).args(args);
                c
            }
            None => {
                let mut c = Command::new(exe);
                c.args(args);
                c
            }
        }
    }

    fn run(&self, tool: &str, args: &[&str]) -> Result<(), String> {
        let out = self
            .tool(tool, args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("{tool}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            let log = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
            Err(format!(
                "{tool} {args:?} failed: {}{}\n{}",
                String::from_utf8_lossy(&out.stderr),
                String::from_utf8_lossy(&out.stdout),
                log.lines().rev().take(20).collect::<Vec<_>>().join("\n")
            ))
        }
    }

    /// Makes and starts a cluster in a new temporary directory, with a watchdog that stops it
    /// when this process ends.
    pub fn start() -> Result<Cluster, String> {
        Cluster::start_with(&Extra::default())
    }

    /// [`Cluster::start`] with `extra` files and settings (TLS, durability, TCP). A TCP port
    /// found free may be taken by another process before the server binds it: tried three
    /// times.
    pub fn start_with(extra: &Extra) -> Result<Cluster, String> {
        let mut last = String::new();
        for _ in 0..3 {
            match Cluster::start_once(extra) {
                Ok(c) => return Ok(c),
                Err(e) if extra.tcp => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    fn start_once(extra: &Extra) -> Result<Cluster, String> {
        let bin = find_bindir()?;
        let run_as = is_root().then(|| "nobody".to_owned());
        let base = tempfile::Builder::new()
            .prefix("session-pg-test-")
            .tempdir()
            .map_err(|e| format!("temporary directory: {e}"))?
            .keep();
        // Every parent must be traversable by the server's user.
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| format!("chmod {}: {e}", base.display()))?;
        let dir = base.join("pg");
        std::fs::create_dir(&dir).map_err(|e| format!("mkdir: {e}"))?;
        let socket_dir = dir.join("sock");
        std::fs::create_dir(&socket_dir).map_err(|e| format!("mkdir: {e}"))?;
        let owner = match &run_as {
            Some(user) => Some(id_of(user)?),
            None => None,
        };
        for (name, contents) in &extra.files {
            let p = dir.join(name);
            std::fs::write(&p, contents).map_err(|e| format!("write {}: {e}", p.display()))?;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| format!("chmod {}: {e}", p.display()))?;
        }
        if let Some((uid, gid)) = owner {
            let files = extra.files.iter().map(|(n, _)| dir.join(n));
            for d in [dir.clone(), socket_dir.clone()].into_iter().chain(files) {
                std::os::unix::fs::chown(&d, Some(uid), Some(gid))
                    .map_err(|e| format!("chown {}: {e}", d.display()))?;
            }
        }
        let port = if extra.tcp {
            std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map_err(|e| format!("a free TCP port: {e}"))?
                .port()
        } else {
            5432
        };
        let mut extra_opts = format!(" -p {port}");
        if extra.tcp {
            extra_opts.push_str(" -c listen_addresses=127.0.0.1");
        }
        for (k, v) in &extra.settings {
            let v = v.replace("{dir}", &dir.to_string_lossy());
            extra_opts.push_str(&format!(" -c {k}={}", sh_quote(&v)));
        }
        let cluster = Cluster {
            data: dir.join("data"),
            socket_dir,
            bin,
            run_as,
            version: String::new(),
            port,
            extra_opts,
            databases: AtomicU32::new(0),
            dir,
        };
        cluster.watchdog(&base)?;
        let data = cluster.data.to_string_lossy().into_owned();
        cluster.run(
            "initdb",
            &[
                "-D",
                &data,
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
                "-N",
            ],
        )?;
        cluster.pg_ctl_start()?;
        let version = cluster
            .admin()
            .map_err(|e| format!("connect: {e}"))?
            .query_one("SHOW server_version", &[])
            .map_err(|e| format!("server_version: {e}"))?
            .get(0);
        Ok(Cluster { version, ..cluster })
    }

    fn pg_ctl_start(&self) -> Result<(), String> {
        let opts = format!(
            "-c listen_addresses='' -k {} -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300 -c shared_buffers=32MB{}",
            self.socket_dir.display(),
            self.extra_opts
        );
        let log = self.dir.join("server.log").to_string_lossy().into_owned();
        let data = self.data.to_string_lossy().into_owned();
        self.run(
            "pg_ctl",
            &[
                "-D", &data, "-l", &log, "-w", "-t", "30", "-o", &opts, "start",
            ],
        )
    }

    /// Stops the server (fast shutdown: connections are cut).
    pub fn stop(&self) -> Result<(), String> {
        let data = self.data.to_string_lossy().into_owned();
        self.run("pg_ctl", &["-D", &data, "-m", "fast", "-w", "stop"])
    }

    /// Starts the server again after [`Cluster::stop`].
    pub fn restart(&self) -> Result<(), String> {
        self.pg_ctl_start()
    }

    /// A process that waits for this one to end, then stops the server and removes `base`.
    fn watchdog(&self, base: &Path) -> Result<(), String> {
        let pg_ctl = self.bin.join("pg_ctl").to_string_lossy().into_owned();
        let data = self.data.to_string_lossy().into_owned();
        let stop = match &self.run_as {
            Some(u) => format!(
                "runuser -u {} -- {} -D {} -m immediate -w stop",
                sh_quote(u),
                sh_quote(&pg_ctl),
                sh_quote(&data)
            ),
            None => format!(
                "{} -D {} -m immediate -w stop",
                sh_quote(&pg_ctl),
                sh_quote(&data)
            ),
        };
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 0.1; done; \
             [ -f {pidfile} ] && {stop} >/dev/null 2>&1; rm -rf {base}",
            pid = std::process::id(),
            pidfile = sh_quote(&format!("{data}/postmaster.pid")),
            base = sh_quote(&base.to_string_lossy()),
        );
        Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own process group: a Ctrl-C to the tests does not stop the cleanup.
            .process_group(0)
            .spawn()
            .map_err(|e| format!("watchdog: {e}"))?;
        Ok(())
    }

    /// `key=value` connection string of database `db`.
    pub fn conn_str(&self, db: &str) -> String {
        format!(
            "host={} port={} user=postgres dbname={db} sslmode=disable",
            self.socket_dir.display(),
            self.port
        )
    }

    /// A plain client on database `postgres` (for the tests' own setup only).
    pub fn admin(&self) -> Result<postgres::Client, postgres::Error> {
        postgres::Client::connect(&self.conn_str("postgres"), postgres::NoTls)
    }

    /// A new, empty database; returns its connection string.
    pub fn fresh_db(&self) -> String {
        let name = self.fresh_db_name();
        self.conn_str(&name)
    }

    /// A new, empty database; returns its name.
    pub fn fresh_db_name(&self) -> String {
        let n = self.databases.fetch_add(1, Ordering::SeqCst);
        let name = format!("t{}_{n}", std::process::id());
        let mut admin = self.admin().expect("admin connection");
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .expect("create database");
        name
    }

    /// A backend on a new, empty database.
    pub fn fresh_backend(&self) -> PgBackend {
        let conn = self.fresh_db();
        PgBackend::open_with(PgConfig::parse(&conn).unwrap(), small_options()).unwrap()
    }

    /// Number of server processes of this cluster (postmaster included), from `ps`.
    pub fn server_processes(&self) -> usize {
        let out = Command::new("ps")
            .args(["-eo", "args"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let data = self.data.to_string_lossy();
        out.lines().filter(|l| l.contains(&*data)).count()
    }
}

/// Options for tests: a small pool.
pub fn small_options() -> PgOptions {
    PgOptions {
        max_connections: 4,
        origin_host: "test-host".to_owned(),
        ..PgOptions::default()
    }
}

static SHARED: OnceLock<Result<Cluster, String>> = OnceLock::new();
static SKIP_SAID: OnceLock<()> = OnceLock::new();

/// The binary's cluster, started on first use; `None` (after one line on stderr) when
/// PostgreSQL is not available and [`REQUIRED_ENV`] is not set. Panics when it is set.
pub fn shared() -> Option<&'static Cluster> {
    available(SHARED.get_or_init(Cluster::start))
}

/// The cluster of `started`, or `None` (after one line on stderr) when it could not start
/// and [`REQUIRED_ENV`] is not set. Panics when it is set.
pub fn available(started: &'static Result<Cluster, String>) -> Option<&'static Cluster> {
    match started {
        Ok(c) => Some(c),
        Err(why) => {
            if std::env::var(REQUIRED_ENV).is_ok_and(|v| v == "1") {
                panic!(
                    "PostgreSQL is required ({REQUIRED_ENV}=1) but no cluster could be started: {why}"
                );
            }
            SKIP_SAID.get_or_init(|| {
                // Straight to the stream: the test harness's capture would hide an eprintln!.
                let line = format!(
                    "session-pg: PostgreSQL tests skipped: {} (set {REQUIRED_ENV}=1 to fail instead)\n",
                    why.lines().next().unwrap_or_default()
                );
                let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
            });
            None
        }
    }
}

/// Waits up to `secs` for `f` to hold.
pub fn eventually(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if f() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
