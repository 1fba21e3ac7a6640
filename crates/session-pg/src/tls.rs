//! TLS with rustls (feature `tls`): the ring provider and the operating system's root
//! certificates (`SSL_CERT_FILE` / `SSL_CERT_DIR` are honoured). Server certificates are always
//! verified, host name included.

use std::sync::Arc;

use crate::error::PgError;

pub(crate) fn connector() -> Result<tokio_postgres_rustls::MakeRustlsConnect, PgError> {
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
