//! [`PgConfig`]: a connection string as a user gives it (`--store`, `SESSIONS_STORE`), read by
//! libpq's rules, and shown only with its password redacted.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use crate::error::PgError;

/// Server-side keepalive settings of each connection (unless the string sets `options`): a
/// client host that vanishes is noticed after about 30 + 3 × 10 seconds.
const SERVER_KEEPALIVES: &str =
    "-c tcp_keepalives_idle=30 -c tcp_keepalives_interval=10 -c tcp_keepalives_count=3";

/// How the connection string is protected by TLS (`sslmode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SslMode {
    /// `sslmode=disable`: never TLS.
    Disable,
    /// `sslmode=prefer` (libpq's default): TLS when the server offers it and the crate has the
    /// `tls` feature; plain otherwise. Unix sockets are always plain.
    Prefer,
    /// `sslmode=require` (and `verify-ca`, `verify-full`): TLS or no connection. The server's
    /// certificate is always verified, host name included, as libpq's `verify-full` — against
    /// the certificates of `sslrootcert` when the string names a file
    /// ([`PgConfig::ssl_root_cert`]), else the operating system's roots; this crate never
    /// connects unverified.
    Require,
}

/// A PostgreSQL connection string: a `postgres://` or `postgresql://` URL
/// (`postgresql://user:secret@db.example:5432/sessions?sslmode=require`,
/// `postgresql:///sessions?host=/run/postgresql` for a unix socket directory) or libpq
/// `key=value` pairs (`host=/run/postgresql dbname=sessions user=worker`).
///
/// What the string leaves out comes from the environment as with libpq: `PGHOST` (else the
/// unix socket directory `/var/run/postgresql` when it exists, else `localhost`), `PGPORT`,
/// `PGUSER` (else `USER`), `PGDATABASE`, `PGPASSWORD`, `PGSSLMODE`, `PGSSLROOTCERT`. A connect
/// timeout of 10 s applies unless `connect_timeout` says otherwise.
///
/// TLS (the `tls` feature): `sslmode` as [`SslMode`] says; `sslrootcert=<PEM file>` names the
/// certificate authorities that sign the server's certificate (a private CA), and
/// `sslrootcert=system` (the default) means the operating system's roots.
///
/// `Display` and `Debug` show the string with every password replaced by `***`
/// ([`PgConfig::redacted`]); so does every error of this crate.
#[derive(Clone)]
pub struct PgConfig {
    redacted: String,
    config: postgres::Config,
    ssl: SslMode,
    ssl_root_cert: Option<PathBuf>,
}

impl PgConfig {
    /// Reads `s` with the process environment for the defaults.
    ///
    /// # Errors
    /// [`PgError::InvalidConfig`] naming the redacted string and what is wrong.
    pub fn parse(s: &str) -> Result<PgConfig, PgError> {
        PgConfig::parse_with_env(s, |k| std::env::var(k).ok())
    }

    /// Reads `s` with `env` for the libpq environment variables (for tests).
    ///
    /// # Errors
    /// As [`PgConfig::parse`].
    pub fn parse_with_env(
        s: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<PgConfig, PgError> {
        let redacted = redact(s);
        let invalid = |detail: String| PgError::InvalidConfig {
            redacted: redacted.clone(),
            detail,
        };
        let trimmed = s.trim();
        if trimmed.is_empty() {
            return Err(invalid("the connection string is empty".to_owned()));
        }
        let is_url = trimmed.starts_with("postgres://") || trimmed.starts_with("postgresql://");
        if !is_url && trimmed.contains("://") {
            return Err(invalid(
                "only postgres:// and postgresql:// URLs are PostgreSQL connection strings"
                    .to_owned(),
            ));
        }
        if !is_url && !trimmed.contains('=') {
            return Err(invalid(
                "neither a postgres:// URL nor key=value pairs".to_owned(),
            ));
        }
        let ssl = ssl_mode_of(trimmed, &env).map_err(&invalid)?;
        let ssl_root_cert = ssl_root_cert_of(trimmed, &env);
        // tokio-postgres does not know `verify-ca` / `verify-full` (both are `require` here:
        // this crate always verifies) nor `sslrootcert` (read by this crate's TLS set-up).
        let for_client = strip_ssl_mode(trimmed);
        let mut config =
            postgres::Config::from_str(&for_client).map_err(|e| invalid(e.to_string()))?;
        if config.get_hosts().is_empty() {
            match env("PGHOST").filter(|h| !h.is_empty()) {
                Some(hosts) => {
                    for h in hosts.split(',') {
                        add_host(&mut config, h);
                    }
                }
                None if std::path::Path::new("/var/run/postgresql").is_dir() => {
                    config.host_path("/var/run/postgresql");
                }
                None => {
                    config.host("localhost");
                }
            }
        }
        if config.get_ports().is_empty()
            && let Some(p) = env("PGPORT").filter(|p| !p.is_empty())
        {
            let port: u16 = p
                .parse()
                .map_err(|_| invalid(format!("PGPORT {p:?} is not a port number")))?;
            config.port(port);
        }
        if config.get_user().is_none() {
            match env("PGUSER")
                .or_else(|| env("USER"))
                .filter(|u| !u.is_empty())
            {
                Some(u) => {
                    config.user(&u);
                }
                None => return Err(invalid("no user name (set PGUSER or user=)".to_owned())),
            }
        }
        if config.get_dbname().is_none()
            && let Some(d) = env("PGDATABASE").filter(|d| !d.is_empty())
        {
            config.dbname(&d);
        }
        if config.get_password().is_none()
            && let Some(p) = env("PGPASSWORD")
        {
            config.password(p);
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        if config.get_application_name().is_none() {
            config.application_name("session-pg");
        }
        // Keepalives on both ends: the client notices a vanished server, and the server
        // (settings of this connection's server process) notices a vanished client host
        // within about a minute and ends its session, releasing its lease locks.
        config.keepalives(true);
        config.keepalives_idle(Duration::from_secs(30));
        if config.get_options().is_none() {
            config.options(SERVER_KEEPALIVES);
        }
        config.ssl_mode(match ssl {
            SslMode::Disable => postgres::config::SslMode::Disable,
            SslMode::Prefer => postgres::config::SslMode::Prefer,
            SslMode::Require => postgres::config::SslMode::Require,
        });
        Ok(PgConfig {
            redacted,
            config,
            ssl,
            ssl_root_cert,
        })
    }

    /// The connection string with every password replaced by `***`, for messages.
    pub fn redacted(&self) -> &str {
        &self.redacted
    }

    /// The TLS mode asked for.
    pub fn ssl_mode(&self) -> SslMode {
        self.ssl
    }

    /// The PEM file of certificate authorities that the server's certificate must chain to
    /// (`sslrootcert=<file>` or `PGSSLROOTCERT`); `None`: the operating system's roots
    /// (`sslrootcert=system`, or nothing said). Read when a TLS connection is made.
    pub fn ssl_root_cert(&self) -> Option<&Path> {
        self.ssl_root_cert.as_deref()
    }

    /// The client configuration (the password is in there: never print it).
    pub fn client_config(&self) -> &postgres::Config {
        &self.config
    }

    /// The database name, when one is set.
    pub fn dbname(&self) -> Option<&str> {
        self.config.get_dbname()
    }

    /// The same server with another database (for tools and tests that create databases).
    pub fn with_dbname(&self, dbname: &str) -> PgConfig {
        let mut c = self.clone();
        c.config.dbname(dbname);
        c.redacted = format!("{} (database {dbname})", self.redacted);
        c
    }
}

impl FromStr for PgConfig {
    type Err = PgError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PgConfig::parse(s)
    }
}

impl fmt::Display for PgConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted)
    }
}

impl fmt::Debug for PgConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgConfig")
            .field("redacted", &self.redacted)
            .field("ssl", &self.ssl)
            .field("ssl_root_cert", &self.ssl_root_cert)
            .finish_non_exhaustive()
    }
}

fn add_host(config: &mut postgres::Config, h: &str) {
    if h.starts_with('/') {
        config.host_path(h);
    } else {
        config.host(h);
    }
}

/// Whether `s` is a connection string this crate reads (`postgres://`, `postgresql://`, or
/// `key=value` pairs starting with a libpq key): for callers that accept a store as a path
/// or a connection string.
pub fn looks_like_connection_string(s: &str) -> bool {
    let s = s.trim_start();
    if s.starts_with("postgres://") || s.starts_with("postgresql://") {
        return true;
    }
    const KEYS: [&str; 9] = [
        "host",
        "hostaddr",
        "port",
        "dbname",
        "user",
        "password",
        "sslmode",
        "sslrootcert",
        "application_name",
    ];
    match s.split_once('=') {
        Some((k, _)) => KEYS.contains(&k.trim()),
        None => false,
    }
}

// --- sslmode --------------------------------------------------------------------------------

fn parse_ssl(v: &str) -> Result<SslMode, String> {
    match v {
        "disable" => Ok(SslMode::Disable),
        "allow" | "prefer" => Ok(SslMode::Prefer),
        "require" | "verify-ca" | "verify-full" => Ok(SslMode::Require),
        other => Err(format!("unknown sslmode {other:?}")),
    }
}

fn ssl_mode_of(s: &str, env: &impl Fn(&str) -> Option<String>) -> Result<SslMode, String> {
    let given = params(s)
        .into_iter()
        .rev()
        .find(|(k, _)| k == "sslmode")
        .map(|(_, v)| v);
    match given.or_else(|| env("PGSSLMODE").filter(|v| !v.is_empty())) {
        Some(v) => parse_ssl(&v),
        None => Ok(SslMode::Prefer),
    }
}

/// `sslrootcert` (else `PGSSLROOTCERT`) as a file; `None` for `system` or nothing.
fn ssl_root_cert_of(s: &str, env: &impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let given = params(s)
        .into_iter()
        .rev()
        .find(|(k, _)| k == "sslrootcert")
        .map(|(_, v)| v);
    given
        .or_else(|| env("PGSSLROOTCERT"))
        .filter(|v| !v.is_empty() && v != "system")
        .map(PathBuf::from)
}

/// Parameters handled by this crate, not by the client (which does not know them all).
const OWN_KEYS: [&str; 2] = ["sslmode", "sslrootcert"];

/// `s` without its `sslmode` and `sslrootcert` parameters (handled here, since the client
/// does not know every libpq value).
fn strip_ssl_mode(s: &str) -> String {
    let own = |k: &str| OWN_KEYS.contains(&k);
    if let Some((head, query)) = url_query(s) {
        let kept: Vec<&str> = query
            .split('&')
            .filter(|kv| !own(&percent_decode(kv.split('=').next().unwrap_or(""))))
            .collect();
        if kept.is_empty() {
            head.to_owned()
        } else {
            format!("{head}?{}", kept.join("&"))
        }
    } else {
        match kv_tokens(s) {
            Some(tokens) => tokens
                .iter()
                .filter(|t| !own(&t.key))
                .map(|t| t.text.as_str())
                .collect::<Vec<_>>()
                .join(" "),
            None => s.to_owned(),
        }
    }
}

/// `(key, value)` pairs of a URL's query or of key=value pairs (values as written, URL
/// values percent-decoded).
fn params(s: &str) -> Vec<(String, String)> {
    if s.starts_with("postgres://") || s.starts_with("postgresql://") {
        return url_query(s)
            .map(|(_, q)| {
                q.split('&')
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(k, v)| (percent_decode(k), percent_decode(v)))
                    .collect()
            })
            .unwrap_or_default();
    }
    kv_tokens(s)
        .unwrap_or_default()
        .into_iter()
        .map(|t| (t.key, t.value))
        .collect()
}

fn url_query(s: &str) -> Option<(&str, &str)> {
    if !(s.starts_with("postgres://") || s.starts_with("postgresql://")) {
        return None;
    }
    s.split_once('?')
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && let (Some(h), Some(l)) = (
                b.get(i + 1).and_then(|c| hex(*c)),
                b.get(i + 2).and_then(|c| hex(*c)),
            )
        {
            out.push(h * 16 + l);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

// --- redaction ------------------------------------------------------------------------------

/// One `key=value` pair of a libpq string: its text as written, the key, the unquoted value.
struct KvToken {
    text: String,
    key: String,
    value: String,
}

/// Splits libpq `key=value` pairs (`key = 'quoted \' value'` allowed); `None` when the text is
/// not well-formed.
fn kv_tokens(s: &str) -> Option<Vec<KvToken>> {
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    let mut out = Vec::new();
    loop {
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        if i == chars.len() {
            return Some(out);
        }
        let start = i;
        while i < chars.len() && chars[i] != '=' && !chars[i].is_whitespace() {
            i += 1;
        }
        let key: String = chars[start..i].iter().collect();
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        if i == chars.len() || chars[i] != '=' || key.is_empty() {
            return None;
        }
        i += 1;
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        let mut value = String::new();
        if i < chars.len() && chars[i] == '\'' {
            i += 1;
            loop {
                match chars.get(i) {
                    None => return None,
                    Some('\'') => {
                        i += 1;
                        break;
                    }
                    Some('\\') => {
                        value.push(*chars.get(i + 1)?);
                        i += 2;
                    }
                    Some(c) => {
                        value.push(*c);
                        i += 1;
                    }
                }
            }
        } else {
            while i < chars.len() && !chars[i].is_whitespace() {
                if chars[i] == '\\' {
                    value.push(*chars.get(i + 1)?);
                    i += 2;
                } else {
                    value.push(chars[i]);
                    i += 1;
                }
            }
        }
        out.push(KvToken {
            text: chars[start..i].iter().collect(),
            key,
            value,
        });
    }
}

/// `s` with every password replaced by `***`: the user-info password of a URL, `password=`
/// query parameters, and `password=` pairs. A string that cannot be taken apart is not shown
/// at all.
pub(crate) fn redact(s: &str) -> String {
    let t = s.trim();
    if let Some(rest) = t
        .strip_prefix("postgresql://")
        .map(|r| ("postgresql://", r))
        .or_else(|| t.strip_prefix("postgres://").map(|r| ("postgres://", r)))
    {
        let (scheme, rest) = rest;
        let (before_query, query) = match rest.split_once('?') {
            Some((a, q)) => (a, Some(q)),
            None => (rest, None),
        };
        let mut out = String::from(scheme);
        match before_query.rfind('@') {
            Some(at) => {
                let userinfo = &before_query[..at];
                match userinfo.split_once(':') {
                    Some((user, _)) => {
                        out.push_str(user);
                        out.push_str(":***");
                    }
                    None => out.push_str(userinfo),
                }
                out.push_str(&before_query[at..]);
            }
            None => out.push_str(before_query),
        }
        if let Some(q) = query {
            out.push('?');
            let parts: Vec<String> = q
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    Some((k, _)) if percent_decode(k) == "password" => format!("{k}=***"),
                    _ => kv.to_owned(),
                })
                .collect();
            out.push_str(&parts.join("&"));
        }
        return out;
    }
    match kv_tokens(t) {
        Some(tokens) => tokens
            .iter()
            .map(|tok| {
                if tok.key == "password" {
                    "password=***".to_owned()
                } else {
                    tok.text.clone()
                }
            })
            .collect::<Vec<_>>()
            .join(" "),
        None if t.contains("password") || t.contains('@') => {
            "<connection string not shown: it could not be read and may hold a password>".to_owned()
        }
        None => t.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn passwords_are_redacted_in_every_form() {
        for (input, want) in [
            (
                "postgresql://worker:s3cr%40t@db.example:5432/sessions?sslmode=require",
                "postgresql://worker:***@db.example:5432/sessions?sslmode=require",
            ),
            ("postgres://worker:p@ss@db/x", "postgres://worker:***@db/x"),
            (
                "postgresql:///sessions?host=/run/pg&password=hunter2&user=w",
                "postgresql:///sessions?host=/run/pg&password=***&user=w",
            ),
            ("postgresql://w@db/sessions", "postgresql://w@db/sessions"),
            (
                "host=/run/pg dbname=s password='two words \\' quote' user=w",
                "host=/run/pg dbname=s password=*** user=w",
            ),
            ("host=db password = hunter2", "host=db password=***"),
            (
                "host=db password='unterminated",
                "<connection string not shown: it could not be read and may hold a password>",
            ),
        ] {
            assert_eq!(redact(input), want, "{input}");
        }
    }

    #[test]
    fn display_debug_and_errors_never_show_the_password() {
        let c = PgConfig::parse_with_env(
            "postgresql://worker:hunter2@db.example/sessions?application_name=x",
            no_env,
        )
        .unwrap();
        for shown in [c.to_string(), format!("{c:?}"), format!("{c:#?}")] {
            assert!(!shown.contains("hunter2"), "{shown}");
            assert!(shown.contains("worker:***@db.example"), "{shown}");
        }
        assert_eq!(c.client_config().get_password(), Some(&b"hunter2"[..]));
        for bad in [
            "postgresql://worker:hunter2@db.example:notaport/sessions",
            "host=db password=hunter2 nonsense_option=1",
            "host=db password=hunter2 sslmode=sometimes",
        ] {
            let e = PgConfig::parse_with_env(bad, no_env).unwrap_err();
            let shown = format!("{e} {e:?}");
            assert!(!shown.contains("hunter2"), "{shown}");
            assert!(matches!(e, PgError::InvalidConfig { .. }), "{e:?}");
        }
    }

    #[test]
    fn urls_and_key_value_pairs_with_unix_socket_hosts() {
        let c =
            PgConfig::parse_with_env("postgresql:///sessions?host=/tmp/pg%20sock&user=w", no_env)
                .unwrap();
        assert_eq!(c.dbname(), Some("sessions"));
        assert_eq!(
            c.client_config().get_hosts(),
            &[postgres::config::Host::Unix("/tmp/pg sock".into())]
        );
        let c = PgConfig::parse_with_env("host=/tmp/sock dbname=d user=u", no_env).unwrap();
        assert_eq!(
            c.client_config().get_hosts(),
            &[postgres::config::Host::Unix("/tmp/sock".into())]
        );
        assert_eq!(c.client_config().get_user(), Some("u"));
        let c = PgConfig::parse_with_env("postgres://u@db.example:6543/d", no_env).unwrap();
        assert_eq!(
            c.client_config().get_hosts(),
            &[postgres::config::Host::Tcp("db.example".into())]
        );
        assert_eq!(c.client_config().get_ports(), &[6543]);
        assert_eq!(c.ssl_mode(), SslMode::Prefer);
        let c = PgConfig::parse_with_env("postgres://u@db/d?sslmode=verify-full", no_env).unwrap();
        assert_eq!(c.ssl_mode(), SslMode::Require);
        for bad in [
            "",
            "   ",
            "mysql://u@db/d",
            "just words",
            "/var/lib/sessions",
        ] {
            assert!(
                PgConfig::parse_with_env(bad, no_env).is_err(),
                "{bad:?} was accepted"
            );
        }
    }

    #[test]
    fn the_environment_fills_what_the_string_leaves_out() {
        let env = |k: &str| match k {
            "PGHOST" => Some("/run/a,db.example".to_owned()),
            "PGPORT" => Some("5433".to_owned()),
            "PGUSER" => Some("envuser".to_owned()),
            "PGDATABASE" => Some("envdb".to_owned()),
            "PGPASSWORD" => Some("envpass".to_owned()),
            "PGSSLMODE" => Some("disable".to_owned()),
            _ => None,
        };
        let c = PgConfig::parse_with_env("application_name=t", env).unwrap();
        assert_eq!(
            c.client_config().get_hosts(),
            &[
                postgres::config::Host::Unix("/run/a".into()),
                postgres::config::Host::Tcp("db.example".into())
            ]
        );
        assert_eq!(c.client_config().get_ports(), &[5433]);
        assert_eq!(c.client_config().get_user(), Some("envuser"));
        assert_eq!(c.dbname(), Some("envdb"));
        assert_eq!(c.client_config().get_password(), Some(&b"envpass"[..]));
        assert_eq!(c.ssl_mode(), SslMode::Disable);
        assert!(!format!("{c} {c:?}").contains("envpass"));
        // The string wins over the environment.
        let c =
            PgConfig::parse_with_env("host=/x user=me dbname=mine sslmode=require", env).unwrap();
        assert_eq!(c.client_config().get_user(), Some("me"));
        assert_eq!(c.dbname(), Some("mine"));
        assert_eq!(c.ssl_mode(), SslMode::Require);
    }

    #[test]
    fn sslrootcert_is_read_here_and_kept_from_the_client() {
        // A URL (percent-encoded path) and key=value pairs; the client never sees the key
        // (it would refuse it as unknown).
        for s in [
            "postgresql://u@db.example/d?sslmode=verify-full&sslrootcert=%2Fetc%2Fca%20dir%2Fca.pem",
            "host=db.example user=u dbname=d sslrootcert='/etc/ca dir/ca.pem' sslmode=verify-full",
        ] {
            let c = PgConfig::parse_with_env(s, no_env).unwrap();
            assert_eq!(
                c.ssl_root_cert(),
                Some(Path::new("/etc/ca dir/ca.pem")),
                "{s}"
            );
            assert_eq!(c.ssl_mode(), SslMode::Require);
            assert_eq!(c.dbname(), Some("d"));
        }
        // `system`, or nothing: the operating system's roots.
        let c = PgConfig::parse_with_env("host=db user=u sslrootcert=system", no_env).unwrap();
        assert_eq!(c.ssl_root_cert(), None);
        assert_eq!(
            PgConfig::parse_with_env("host=db user=u", no_env)
                .unwrap()
                .ssl_root_cert(),
            None
        );
        // The environment fills it in; the string wins.
        let env = |k: &str| (k == "PGSSLROOTCERT").then(|| "/env/ca.pem".to_owned());
        let c = PgConfig::parse_with_env("host=db user=u", env).unwrap();
        assert_eq!(c.ssl_root_cert(), Some(Path::new("/env/ca.pem")));
        let c = PgConfig::parse_with_env("host=db user=u sslrootcert=/s.pem", env).unwrap();
        assert_eq!(c.ssl_root_cert(), Some(Path::new("/s.pem")));
        assert!(looks_like_connection_string("sslrootcert=/ca.pem host=db"));
    }

    #[test]
    fn connection_strings_are_told_from_paths() {
        assert!(looks_like_connection_string("postgres://h/d"));
        assert!(looks_like_connection_string("postgresql:///d?host=/s"));
        assert!(looks_like_connection_string("host=/s dbname=d"));
        assert!(!looks_like_connection_string("/home/me/.codelia/sessions"));
        assert!(!looks_like_connection_string("./store=old"));
    }
}
