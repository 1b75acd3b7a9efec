//! Credentials the controller did not issue (a client certificate from a CA of our own, made
//! with rcgen) and kubeconfig files: reading the admin kubeconfig's fields, and writing variants
//! (no client credentials, other credentials) for the authentication tests; the serial of the
//! certificate a TLS server presents (renewal tests and benchmarks).

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;

/// The parameters and key of a brand-new CA named `common_name` (unconstrained, no usages set):
/// a test's own CA, to self-sign or to issue from.
pub fn new_ca(common_name: &str) -> (CertificateParams, KeyPair) {
    let fail = |e: rcgen::Error| -> ! { panic!("rcgen: {e}") };
    let key = KeyPair::generate().unwrap_or_else(|e| fail(e));
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap_or_else(|e| fail(e));
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    (params, key)
}

/// A CA's certificate, and a serving certificate it signed with that certificate's key (PEM).
#[derive(Debug, Clone)]
pub struct ServingCertificate {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

impl ServingCertificate {
    /// The CA as a `caBundle` (base64 of its PEM).
    pub fn ca_bundle(&self) -> String {
        B64.encode(&self.ca_pem)
    }
}

/// A brand-new CA named `ca_name` and a serving certificate from it for `dns_names` (a
/// webhook's or an APIService's `<service>.<namespace>.svc`).
pub fn serving_certificate(ca_name: &str, dns_names: &[&str]) -> ServingCertificate {
    let fail = |e: rcgen::Error| -> ! { panic!("rcgen: {e}") };
    let (mut ca_params, ca_key) = new_ca(ca_name);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let ca_cert = ca_params.self_signed(&ca_key).unwrap_or_else(|e| fail(e));
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap_or_else(|e| fail(e));
    let names: Vec<String> = dns_names.iter().map(|n| n.to_string()).collect();
    let mut params = CertificateParams::new(names).unwrap_or_else(|e| fail(e));
    params.distinguished_name.push(
        DnType::CommonName,
        dns_names.first().copied().unwrap_or("server"),
    );
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    let cert = params.signed_by(&key, &issuer).unwrap_or_else(|e| fail(e));
    ServingCertificate {
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    }
}

/// A certificate file followed by its key file (PEM), as a client identity.
pub fn identity_from_files(cert: &Path, key: &Path) -> Vec<u8> {
    let mut pem = Vec::new();
    for path in [cert, key] {
        let bytes =
            std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        pem.extend_from_slice(&bytes);
        pem.push(b'\n');
    }
    pem
}

/// A client certificate (CN `common_name`, O `organization`) signed by a brand-new CA that the
/// controller has never seen, followed by its key: PEM, usable as a client identity. A server
/// that checks client certificates against its own CA must refuse it.
pub fn foreign_client_identity(common_name: &str, organization: &str) -> Vec<u8> {
    let fail = |e: rcgen::Error| -> ! { panic!("rcgen: {e}") };
    let (mut ca_params, ca_key) = new_ca("not-the-berth-ca");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let issuer = Issuer::new(ca_params, ca_key);

    let key = KeyPair::generate().unwrap_or_else(|e| fail(e));
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap_or_else(|e| fail(e));
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params
        .distinguished_name
        .push(DnType::OrganizationName, organization);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let cert = params.signed_by(&key, &issuer).unwrap_or_else(|e| fail(e));
    format!("{}{}", cert.pem(), key.serialize_pem()).into_bytes()
}

/// The parts of a kubeconfig the tests look at, for its current context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentContext {
    pub context: String,
    pub server: String,
    pub ca_pem: Vec<u8>,
    pub client_cert_pem: Vec<u8>,
    pub client_key_pem: Vec<u8>,
}

/// Parses a kubeconfig's text (YAML or JSON) into a JSON value.
pub fn parse_kubeconfig(text: &str) -> Result<Value, String> {
    serde_saphyr::from_str(text).map_err(|e| format!("kubeconfig is not YAML: {e}"))
}

/// Follows `current-context` to its cluster and user, decoding the embedded `*-data` fields.
pub fn current_context(config: &Value) -> Result<CurrentContext, String> {
    let context = config["current-context"]
        .as_str()
        .filter(|s| !s.is_empty())
        .ok_or("no current-context")?
        .to_string();
    let named = |list: &str, name: &str| -> Result<Value, String> {
        config[list]
            .as_array()
            .and_then(|items| items.iter().find(|i| i["name"] == name))
            .cloned()
            .ok_or_else(|| format!("no {list} entry named {name:?}"))
    };
    let ctx = named("contexts", &context)?;
    let cluster_name = ctx["context"]["cluster"]
        .as_str()
        .ok_or("context has no cluster")?;
    let user_name = ctx["context"]["user"]
        .as_str()
        .ok_or("context has no user")?;
    let cluster = named("clusters", cluster_name)?;
    let user = named("users", user_name)?;
    let data = |v: &Value, what: &str| -> Result<Vec<u8>, String> {
        let text = v.as_str().ok_or_else(|| format!("no {what}"))?;
        B64.decode(text.trim())
            .map_err(|e| format!("{what} is not base64: {e}"))
    };
    Ok(CurrentContext {
        context,
        server: cluster["cluster"]["server"]
            .as_str()
            .ok_or("cluster has no server")?
            .to_string(),
        ca_pem: data(
            &cluster["cluster"]["certificate-authority-data"],
            "certificate-authority-data",
        )?,
        client_cert_pem: data(
            &user["user"]["client-certificate-data"],
            "client-certificate-data",
        )?,
        client_key_pem: data(&user["user"]["client-key-data"], "client-key-data")?,
    })
}

/// Writes a kubeconfig (as JSON, which kubectl reads too) for `server` trusting `ca_pem`, whose
/// user carries `user` (e.g. `{}` for none, or `{"token": "..."}`, or client cert data).
pub fn write_kubeconfig(path: &Path, server: &str, ca_pem: &[u8], user: Value) {
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "test",
        "clusters": [{"name": "test", "cluster": {
            "server": server,
            "certificate-authority-data": B64.encode(ca_pem),
        }}],
        "users": [{"name": "test", "user": user}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
    });
    std::fs::write(path, config.to_string())
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
}

/// Client-certificate user fields for [`write_kubeconfig`], from an identity (cert + key PEM).
pub fn client_cert_user(identity_pem: &[u8]) -> Value {
    let text = String::from_utf8_lossy(identity_pem);
    // The key may be PKCS#8 (`BEGIN PRIVATE KEY`), SEC1 (`BEGIN EC PRIVATE KEY`) or PKCS#1.
    let split = text
        .find("PRIVATE KEY-----")
        .and_then(|end| text[..end].rfind("-----BEGIN"))
        .unwrap_or(text.len());
    let (cert, key) = text.split_at(split);
    serde_json::json!({
        "client-certificate-data": B64.encode(cert.trim()),
        "client-key-data": B64.encode(key.trim()),
    })
}

/// The serial of the certificate a new TLS connection to `127.0.0.1:port` is given, verified
/// against `ca_pem`.
pub fn presented_serial(port: u16, ca_pem: &[u8]) -> Result<String, String> {
    crate::client::install_crypto_provider();
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem) {
        roots
            .add(c.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from("127.0.0.1").map_err(|e| e.to_string())?;
    let mut conn =
        rustls::ClientConnection::new(Arc::new(config), name).map_err(|e| e.to_string())?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut tcp = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| format!("connect {addr}: {e}"))?;
    tcp.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    while conn.is_handshaking() {
        conn.complete_io(&mut tcp)
            .map_err(|e| format!("handshake: {e}"))?;
    }
    let leaf = conn
        .peer_certificates()
        .and_then(|c| c.first())
        .ok_or("no certificate presented")?;
    let (_, cert) = x509_parser::parse_x509_certificate(leaf).map_err(|e| e.to_string())?;
    Ok(cert.raw_serial_as_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_foreign_identity_holds_a_certificate_and_a_key() {
        let pem = String::from_utf8(foreign_client_identity("admin", "system:masters")).unwrap();
        assert_eq!(pem.matches("-----BEGIN CERTIFICATE-----").count(), 1);
        assert!(pem.contains("-----BEGIN PRIVATE KEY-----"));
    }

    #[test]
    fn current_context_follows_the_names_and_decodes_the_data() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kc");
        let identity = foreign_client_identity("u", "o");
        write_kubeconfig(
            &path,
            "https://127.0.0.1:1",
            b"CA",
            client_cert_user(&identity),
        );
        let config = parse_kubeconfig(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let ctx = current_context(&config).unwrap();
        assert_eq!(ctx.server, "https://127.0.0.1:1");
        assert_eq!(ctx.ca_pem, b"CA");
        assert!(
            String::from_utf8_lossy(&ctx.client_cert_pem).starts_with("-----BEGIN CERTIFICATE")
        );
        assert!(String::from_utf8_lossy(&ctx.client_key_pem).starts_with("-----BEGIN PRIVATE KEY"));
    }

    #[test]
    fn a_kubeconfig_without_client_data_is_reported() {
        let config = serde_json::json!({"current-context": "c",
            "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
            "clusters": [{"name": "k", "cluster": {"server": "https://x",
                "certificate-authority-data": "Q0E="}}],
            "users": [{"name": "u", "user": {}}]});
        assert_eq!(
            current_context(&config).unwrap_err(),
            "no client-certificate-data"
        );
    }
}
