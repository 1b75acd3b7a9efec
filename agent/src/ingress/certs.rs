//! Certificates for TLS termination: `kubernetes.io/tls` Secrets parsed into rustls keys, and
//! the resolver that picks one by the client's SNI name through the current route table's TLS
//! entries ([`super::routes::tls_route`]). A client without SNI, or with a name no entry (or no
//! parsable Secret) covers, gets the default certificate: self-signed, made at start, as
//! ingress-nginx's "Kubernetes Ingress Controller Fake Certificate".

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::sync::watch;

use super::Snapshot;
use super::routes::{SecretRef, tls_route};

/// The Secret type whose `tls.crt` and `tls.key` are served.
pub const TLS_SECRET_TYPE: &str = "kubernetes.io/tls";

#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("the Secret is of type {0:?}, not kubernetes.io/tls")]
    NotTls(String),
    #[error("the Secret lacks {0}")]
    Missing(&'static str),
    #[error("tls.crt holds no certificate")]
    NoCertificate,
    #[error("tls.key: {0}")]
    Key(String),
    #[error("the default certificate: {0}")]
    Generate(String),
}

/// The key and chain of a `kubernetes.io/tls` Secret.
pub fn parse_secret(secret: &Secret) -> Result<Arc<CertifiedKey>, CertError> {
    let kind = secret.type_.clone().unwrap_or_default();
    if kind != TLS_SECRET_TYPE {
        return Err(CertError::NotTls(kind));
    }
    let data = secret.data.as_ref();
    let field = |k: &'static str| {
        data.and_then(|d| d.get(k))
            .map(|b| b.0.clone())
            .ok_or(CertError::Missing(k))
    };
    certified_key(&field("tls.crt")?, &field("tls.key")?)
}

/// A rustls key from a PEM chain and a PEM private key.
pub fn certified_key(cert_pem: &[u8], key_pem: &[u8]) -> Result<Arc<CertifiedKey>, CertError> {
    let certs: Vec<_> = rustls_pemfile::certs(&mut &cert_pem[..])
        .filter_map(Result::ok)
        .collect();
    if certs.is_empty() {
        return Err(CertError::NoCertificate);
    }
    let key = rustls_pemfile::private_key(&mut &key_pem[..])
        .map_err(|e| CertError::Key(e.to_string()))?
        .ok_or_else(|| CertError::Key("no private key".into()))?;
    let signing = rustls::crypto::ring::sign::any_supported_type(&key)
        .map_err(|e| CertError::Key(e.to_string()))?;
    Ok(Arc::new(CertifiedKey::new(certs, signing)))
}

/// The self-signed certificate served when no Secret covers the name asked for.
pub fn default_certificate() -> Result<Arc<CertifiedKey>, CertError> {
    let key = rcgen::KeyPair::generate().map_err(|e| CertError::Generate(e.to_string()))?;
    let mut params = rcgen::CertificateParams::new(vec!["ingress.local".to_string()])
        .map_err(|e| CertError::Generate(e.to_string()))?;
    params.distinguished_name.push(
        rcgen::DnType::CommonName,
        "Berth Ingress Default Certificate",
    );
    let cert = params
        .self_signed(&key)
        .map_err(|e| CertError::Generate(e.to_string()))?;
    certified_key(cert.pem().as_bytes(), key.serialize_pem().as_bytes())
}

/// Parsed TLS Secrets by reference; a Secret that does not parse is absent (logged when read).
pub type Certificates = BTreeMap<SecretRef, Arc<CertifiedKey>>;

/// Picks the certificate for each handshake from the latest snapshot.
pub struct SniResolver {
    pub snapshot: watch::Receiver<Arc<Snapshot>>,
    pub fallback: Arc<CertifiedKey>,
}

impl std::fmt::Debug for SniResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SniResolver")
    }
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let snapshot = self.snapshot.borrow().clone();
        let chosen = hello
            .server_name()
            .and_then(|name| tls_route(&snapshot.routes.tls, name))
            .and_then(|t| t.secret.as_ref())
            .and_then(|s| snapshot.certificates.get(s).cloned());
        Some(chosen.unwrap_or_else(|| self.fallback.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn tls_secret(kind: &str, cert: &str, key: &str) -> Secret {
        Secret {
            type_: Some(kind.to_string()),
            data: Some(
                [
                    ("tls.crt".to_string(), ByteString(cert.as_bytes().to_vec())),
                    ("tls.key".to_string(), ByteString(key.as_bytes().to_vec())),
                ]
                .into(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn a_tls_secret_parses_and_other_secrets_do_not() {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["a.example".into()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let (cert_pem, key_pem) = (cert.pem(), key.serialize_pem());
        let parsed = parse_secret(&tls_secret(TLS_SECRET_TYPE, &cert_pem, &key_pem)).unwrap();
        assert_eq!(parsed.cert.len(), 1);
        assert!(matches!(
            parse_secret(&tls_secret("Opaque", &cert_pem, &key_pem)),
            Err(CertError::NotTls(_))
        ));
        assert!(matches!(
            parse_secret(&tls_secret(TLS_SECRET_TYPE, "junk", &key_pem)),
            Err(CertError::NoCertificate)
        ));
        assert!(matches!(
            parse_secret(&tls_secret(TLS_SECRET_TYPE, &cert_pem, "junk")),
            Err(CertError::Key(_))
        ));
        assert!(default_certificate().is_ok());
    }
}
