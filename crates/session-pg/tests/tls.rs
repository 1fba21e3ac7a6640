//! TLS (feature `tls`): a throwaway cluster with `ssl=on` and a certificate signed by a
//! certificate authority made here (rcgen; no network, no `openssl` command), reached over TCP
//! on 127.0.0.1 (unix sockets never use TLS).
//!
//! * `sslmode=require` and `verify-full` with that CA as `sslrootcert` connect, and the server
//!   reports the connection encrypted (`pg_stat_ssl`); a run appended over it reads back.
//! * Another CA, or the system's roots, are refused: the certificate is always verified.
//! * A host name the certificate does not name is refused (`verify-full` checks it).
//!
//! `cargo test -p session-pg --features tls --test tls` (`.ci/run` runs it).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::{Cluster, Extra};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};
use session_pg::{PgBackend, PgConfig, PgError, PgOptions};
use session_storage::{Extent, RunCatalogue};

/// A certificate authority: its certificate (PEM) and what signs with it.
fn authority(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

/// The TLS cluster and the files the clients use.
struct Tls {
    cluster: Cluster,
    /// Holds `ca.pem` (the server's CA) and `other-ca.pem` (a CA that signed nothing here).
    dir: tempfile::TempDir,
}

impl Tls {
    fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    fn other_ca(&self) -> PathBuf {
        self.dir.path().join("other-ca.pem")
    }
}

fn start() -> Result<Tls, String> {
    let ca = authority("session-pg test CA");
    let other = authority("session-pg unrelated CA");
    // The server's certificate names `localhost` only (not 127.0.0.1).
    let server_key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    let server_cert = params.signed_by(&server_key, &ca).unwrap();
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    std::fs::write(dir.path().join("ca.pem"), ca.pem()).map_err(|e| e.to_string())?;
    std::fs::write(dir.path().join("other-ca.pem"), other.pem()).map_err(|e| e.to_string())?;
    let setting = |k: &str, v: &str| (k.to_owned(), v.to_owned());
    let cluster = Cluster::start_with(&Extra {
        files: vec![
            ("server.crt".to_owned(), server_cert.pem().into_bytes()),
            (
                "server.key".to_owned(),
                server_key.serialize_pem().into_bytes(),
            ),
        ],
        settings: vec![
            setting("ssl", "on"),
            setting("ssl_cert_file", "{dir}/server.crt"),
            setting("ssl_key_file", "{dir}/server.key"),
        ],
        tcp: true,
    })?;
    Ok(Tls { cluster, dir })
}

fn tls() -> Option<&'static Tls> {
    static TLS: OnceLock<Result<Tls, String>> = OnceLock::new();
    static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();
    match TLS.get_or_init(start) {
        Ok(t) => Some(t),
        Err(why) => {
            // The harness's one line (or its failure when PostgreSQL is required).
            let _ = common::available(CLUSTER.get_or_init(|| Err(why.clone())));
            None
        }
    }
}

/// A TCP connection string to a new database of the TLS cluster.
fn conn(t: &Tls, host: &str, params: &str) -> String {
    let db = t.cluster.fresh_db_name();
    format!(
        "host={host} port={} user=postgres dbname={db} {params}",
        t.cluster.port
    )
}

fn open(conn: &str) -> Result<PgBackend, PgError> {
    PgBackend::open_with(
        PgConfig::parse(conn).unwrap(),
        PgOptions {
            max_connections: 2,
            origin_host: "tls-test".to_owned(),
            ..PgOptions::default()
        },
    )
}

/// Whether the server sees the backend's connection as TLS-encrypted.
fn encrypted(b: &PgBackend) -> bool {
    b.with_client(|c| {
        let row = c
            .query_one(
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                &[],
            )
            .map_err(|source| PgError::Query {
                op: "read pg_stat_ssl",
                source,
            })?;
        Ok(row.get::<_, bool>(0))
    })
    .unwrap()
}

fn quoted(p: &Path) -> String {
    format!("'{}'", p.display())
}

/// The whole error chain as one line (the TLS reason sits in a source).
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

#[test]
fn require_and_verify_full_connect_encrypted_with_the_private_ca() {
    let Some(t) = tls() else { return };
    let ca = quoted(&t.ca());
    for params in [
        format!("sslmode=require sslrootcert={ca}"),
        format!("sslmode=verify-full sslrootcert={ca}"),
    ] {
        let b = open(&conn(t, "localhost", &params)).unwrap();
        assert!(encrypted(&b), "{params}: the connection is not encrypted");
        let line = b"{\"type\":\"header\",\"schema_version\":1,\"run_id\":\"tls-run\",\"started_at\":\"2026-02-03T12:00:00.000Z\"}\n";
        let done = b.append_lines("tls-run", 0, line).unwrap();
        assert_eq!((done.offset, done.end), (0, line.len() as u64));
        assert_eq!(b.read_all("tls-run", Extent::Committed).unwrap(), line);
    }
    // The same as a URL (the CA's path percent-encoded).
    let db = t.cluster.fresh_db_name();
    let url = format!(
        "postgresql://postgres@localhost:{}/{db}?sslmode=verify-full&sslrootcert={}",
        t.cluster.port,
        t.ca().to_string_lossy().replace('/', "%2F")
    );
    assert!(encrypted(&open(&url).unwrap()));
    // Without TLS over the same port, for contrast: the server allows it, and says so.
    let plain = open(&conn(t, "localhost", "sslmode=disable")).unwrap();
    assert!(!encrypted(&plain));
}

#[test]
fn a_certificate_from_another_ca_is_refused() {
    let Some(t) = tls() else { return };
    for params in [
        format!("sslmode=verify-full sslrootcert={}", quoted(&t.other_ca())),
        format!("sslmode=require sslrootcert={}", quoted(&t.other_ca())),
    ] {
        match open(&conn(t, "localhost", &params)) {
            Err(e @ PgError::Connect { .. }) => {
                let text = chain(&e);
                assert!(text.contains("UnknownIssuer"), "{params}: {text}");
            }
            Err(e) => panic!("{params}: unexpected error {}", chain(&e)),
            Ok(_) => panic!("{params}: a server certificate from another CA was accepted"),
        }
    }
    // The operating system's roots do not know the test CA either (or there are none).
    match open(&conn(t, "localhost", "sslmode=verify-full")) {
        Err(e @ PgError::Connect { .. }) => {
            assert!(chain(&e).contains("UnknownIssuer"), "{}", chain(&e));
        }
        Err(PgError::Tls { detail }) => assert!(detail.contains("no root certificates")),
        Err(e) => panic!("unexpected error {}", chain(&e)),
        Ok(_) => panic!("a certificate of a private CA was accepted with the system's roots"),
    }
}

#[test]
fn a_host_name_the_certificate_does_not_name_is_refused() {
    let Some(t) = tls() else { return };
    // The certificate names `localhost`; 127.0.0.1 is the same server under another name.
    let params = format!("sslmode=verify-full sslrootcert={}", quoted(&t.ca()));
    match open(&conn(t, "127.0.0.1", &params)) {
        Err(e @ PgError::Connect { .. }) => {
            let text = chain(&e);
            assert!(
                text.contains(r#"certificate not valid for name "127.0.0.1""#),
                "{text}"
            );
        }
        Err(e) => panic!("unexpected error {}", chain(&e)),
        Ok(_) => panic!("a certificate for another host name was accepted"),
    }
}
