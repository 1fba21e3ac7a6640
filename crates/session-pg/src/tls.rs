//! TLS with rustls (feature `tls`): the ring provider; the certificate authorities of the
//! connection string's `sslrootcert` file when it names one, else the operating system's root
//! certificates (`SSL_CERT_FILE` / `SSL_CERT_DIR` are honoured). Server certificates are always
//! verified, host name included (libpq's `verify-full`).

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::config::PgConfig;
use crate::error::PgError;

/// The TLS connector for `config`'s connections.
///
/// # Errors
/// [`PgError::TlsRootCert`] when the `sslrootcert` file cannot be read; [`PgError::Tls`] when
/// it holds no usable certificate, when the system has none, or when rustls refuses the
/// configuration.
pub(crate) fn connector(
    config: &PgConfig,
) -> Result<tokio_postgres_rustls::MakeRustlsConnect, PgError> {
    let roots = match config.ssl_root_cert() {
        Some(path) => file_roots(path)?,
        None => system_roots()?,
    };
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| PgError::Tls {
        detail: e.to_string(),
    })?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

/// The operating system's root certificates.
fn system_roots() -> Result<rustls::RootCertStore, PgError> {
    let mut roots = rustls::RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    for cert in found.certs {
        // A certificate the store cannot use is skipped, as browsers do.
        let _ = roots.add(cert);
    }
    if roots.is_empty() {
        return Err(PgError::Tls {
            detail: "no root certificates found (install ca-certificates or set SSL_CERT_FILE)"
                .to_owned(),
        });
    }
    Ok(roots)
}

/// Every certificate of the PEM file `path` (libpq's `sslrootcert`); all must be usable.
fn file_roots(path: &Path) -> Result<rustls::RootCertStore, PgError> {
    let pem = std::fs::read(path).map_err(|source| PgError::TlsRootCert {
        path: path.to_owned(),
        source,
    })?;
    let bad = |detail: String| PgError::Tls {
        detail: format!("root certificates {}: {detail}", path.display()),
    };
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| bad(e.to_string()))?;
        roots.add(cert).map_err(|e| bad(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(bad("no PEM certificate in the file".to_owned()));
    }
    Ok(roots)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_certificate_file_that_is_missing_or_empty_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let c = PgConfig::parse(&format!(
            "host=db user=u sslmode=verify-full sslrootcert={}",
            missing.display()
        ))
        .unwrap();
        match connector(&c) {
            Err(PgError::TlsRootCert { path, source }) => {
                assert_eq!(path, missing);
                assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
            }
            Err(other) => panic!("unexpected error: {other}"),
            Ok(_) => panic!("a missing root certificate file was accepted"),
        }
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let c = PgConfig::parse(&format!(
            "host=db user=u sslmode=verify-full sslrootcert={}",
            empty.display()
        ))
        .unwrap();
        match connector(&c) {
            Err(PgError::Tls { detail }) => assert_eq!(
                detail,
                format!(
                    "root certificates {}: no PEM certificate in the file",
                    empty.display()
                )
            ),
            Err(other) => panic!("unexpected error: {other}"),
            Ok(_) => panic!("a file without certificates was accepted"),
        }
    }
}
