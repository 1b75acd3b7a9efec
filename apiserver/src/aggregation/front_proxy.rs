//! How this process speaks to an aggregated API server as kube-apiserver's front proxy: TLS
//! with the front proxy client certificate (which the server trusts through the
//! `extension-apiserver-authentication` ConfigMap), the server's certificate checked against
//! its APIService's `caBundle` for `<service>.<namespace>.svc` (or not at all with
//! `insecureSkipTLSVerify`), and the caller's identity in upstream's request headers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use berth_registry::identity::Identity;
use berth_shared::client::any_certificate::AnyServerCertificate;

use crate::api::tls::TlsError;

/// Upstream's request header names (`--requestheader-*-headers`).
pub const USER_HEADER: &str = "X-Remote-User";
pub const GROUP_HEADER: &str = "X-Remote-Group";
pub const UID_HEADER: &str = "X-Remote-Uid";
pub const EXTRA_PREFIX: &str = "X-Remote-Extra-";

/// TLS client configurations by how the server is trusted.
pub struct FrontProxy {
    certs: Vec<rustls::pki_types::CertificateDer<'static>>,
    key: rustls::pki_types::PrivateKeyDer<'static>,
    configs: Mutex<HashMap<Option<Vec<u8>>, Arc<rustls::ClientConfig>>>,
}

impl FrontProxy {
    pub fn new(client_cert_pem: &str, client_key_pem: &str) -> Result<FrontProxy, TlsError> {
        let certs = rustls_pemfile::certs(&mut client_cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TlsError::Pem(e.to_string()))?;
        let key = rustls_pemfile::private_key(&mut client_key_pem.as_bytes())
            .map_err(|e| TlsError::Pem(e.to_string()))?
            .ok_or_else(|| TlsError::Pem("no front proxy client key".to_string()))?;
        Ok(FrontProxy {
            certs,
            key,
            configs: Mutex::new(HashMap::new()),
        })
    }

    /// The connector for a server trusted by `ca_bundle` (PEM), or by nothing when `None`
    /// (`insecureSkipTLSVerify`).
    pub fn connector(
        &self,
        ca_bundle: Option<&[u8]>,
    ) -> Result<tokio_rustls::TlsConnector, String> {
        let key = ca_bundle.map(<[u8]>::to_vec);
        let mut configs = self.configs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = configs.get(&key) {
            return Ok(tokio_rustls::TlsConnector::from(c.clone()));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?;
        let builder = match ca_bundle {
            Some(pem) => {
                let mut roots = rustls::RootCertStore::empty();
                for cert in rustls_pemfile::certs(&mut &pem[..]) {
                    let cert =
                        cert.map_err(|e| format!("unable to load root certificates: {e}"))?;
                    roots
                        .add(cert)
                        .map_err(|e| format!("unable to load root certificates: {e}"))?;
                }
                builder.with_root_certificates(roots)
            }
            None => builder
                .dangerous()
                .with_custom_certificate_verifier(AnyServerCertificate::new(provider)),
        };
        let mut config = builder
            .with_client_auth_cert(self.certs.clone(), self.key.clone_key())
            .map_err(|e| e.to_string())?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let config = Arc::new(config);
        configs.insert(key, config.clone());
        Ok(tokio_rustls::TlsConnector::from(config))
    }
}

/// What Go's `url.PathEscape` escapes in an extra key (all but unreserved characters).
const EXTRA_KEY: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Whether a client's header is one of the front proxy's own (never passed on from a client:
/// the aggregated server would take it for the authenticated user).
pub fn is_identity_header(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n == USER_HEADER.to_ascii_lowercase()
        || n == GROUP_HEADER.to_ascii_lowercase()
        || n == UID_HEADER.to_ascii_lowercase()
        || n.starts_with(&EXTRA_PREFIX.to_ascii_lowercase())
}

/// Adds `id` as upstream's front proxy writes it: the user, each group, the uid, and each
/// extra value under `X-Remote-Extra-<key>` (the key percent-encoded).
pub fn add_identity(headers: &mut HeaderMap, id: &Identity) {
    let mut add = |name: &str, value: &str| {
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            headers.append(n, v);
        }
    };
    add(USER_HEADER, &id.user);
    for g in &id.groups {
        add(GROUP_HEADER, g);
    }
    if !id.uid.is_empty() {
        add(UID_HEADER, &id.uid);
    }
    for (k, values) in &id.extra {
        let key = percent_encoding::utf8_percent_encode(k, EXTRA_KEY).to_string();
        for v in values {
            add(&format!("{EXTRA_PREFIX}{key}"), v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_identity_is_written_in_upstreams_headers() {
        let mut id = Identity::new("alice", vec!["dev".into(), "system:authenticated".into()]);
        id.extra
            .insert("scopes.example.com/x".into(), vec!["a".into(), "b".into()]);
        let mut h = HeaderMap::new();
        add_identity(&mut h, &id);
        assert_eq!(h["x-remote-user"], "alice");
        let groups: Vec<&str> = h
            .get_all("x-remote-group")
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect();
        assert_eq!(groups, ["dev", "system:authenticated"]);
        let extra: Vec<&str> = h
            .get_all("x-remote-extra-scopes.example.com%2Fx")
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect();
        assert_eq!(extra, ["a", "b"]);
        assert!(h.get("x-remote-uid").is_none());
        assert!(is_identity_header("X-Remote-Group"));
        assert!(is_identity_header("x-remote-extra-foo"));
        assert!(!is_identity_header("x-forwarded-for"));
    }
}
