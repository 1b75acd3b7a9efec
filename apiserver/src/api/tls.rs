//! The server's TLS configuration: a rustls acceptor that asks for (but does not require) a
//! client certificate from the cluster CA, offering HTTP/2 and HTTP/1.1. Connections are
//! accepted in `listener` and served in `conn`.

use crate::pki::Pki;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading PEM: {0}")]
    Pem(String),
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
    #[error("client verifier: {0}")]
    Verifier(String),
}

fn certs(pem: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    rustls_pemfile::certs(&mut pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem(e.to_string()))
}

/// Accepts any client certificate during the handshake (proving possession of its key), so a
/// certificate from another CA gets an HTTP 401 like kube-apiserver answers, not a TLS alert.
/// The chain is verified against the cluster CA per connection in `conn::serve`.
#[derive(Debug)]
struct DeferredClientVerifier {
    inner: Arc<dyn ClientCertVerifier>,
}

impl ClientCertVerifier for DeferredClientVerifier {
    fn offer_client_auth(&self) -> bool {
        true
    }
    fn client_auth_mandatory(&self) -> bool {
        false
    }
    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        self.inner.root_hint_subjects()
    }
    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// The server's TLS configuration, and the verifier that checks client chains against the CA.
/// Each handshake gets the certificate `serving` holds then (it is renewed in place).
pub fn server_config(
    pki: &Pki,
    serving: Arc<crate::certificates::serving::ServingCertificate>,
) -> Result<(Arc<rustls::ServerConfig>, Arc<dyn ClientCertVerifier>), TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in certs(&pki.ca_cert)? {
        roots.add(c)?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()
        .map_err(|e| TlsError::Verifier(e.to_string()))?;
    let deferred = Arc::new(DeferredClientVerifier {
        inner: verifier.clone(),
    });
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(deferred)
        .with_cert_resolver(serving);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok((Arc::new(config), verifier))
}

/// The TCP address a request came from (for the join endpoint's rate limit, SAN rule and audit
/// log).
#[derive(Debug, Clone, Copy)]
pub struct PeerAddr(pub std::net::SocketAddr);
