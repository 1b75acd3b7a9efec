//! What a registry that requires a login needs: a CA and a serving certificate for its address
//! (rcgen), an htpasswd file with one bcrypt entry, and the `auth`/`http.tls` stanzas of
//! docker-registry's config.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use rcgen::{CertificateParams, DnType, Issuer, KeyPair, SanType};

/// The login a registry requires and the CA its certificate chains to.
#[derive(Debug, Clone)]
pub struct RegistryLogin {
    pub username: String,
    pub password: String,
    /// PEM of the CA that signed the registry's serving certificate.
    pub ca_pem: Vec<u8>,
    /// The CA's file, for a registries file's `tls.ca_file`.
    pub ca_file: PathBuf,
}

/// Writes `ca.pem`, `server.pem`, `server-key.pem` and `htpasswd` into `dir` and returns the
/// config lines docker-registry needs (`auth:` at the top level, `tls:` under `http:`).
pub(super) fn prepare(
    dir: &Path,
    ip: Ipv4Addr,
    username: &str,
    password: &str,
) -> (RegistryLogin, String, String) {
    let fail = |e: rcgen::Error| -> ! { panic!("rcgen: {e}") };
    let (ca_params, ca_key) = crate::pki::new_ca("berth-test-registry-ca");
    let ca_cert = ca_params.self_signed(&ca_key).unwrap_or_else(|e| fail(e));
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap_or_else(|e| fail(e));
    let mut params =
        CertificateParams::new(vec!["localhost".to_string()]).unwrap_or_else(|e| fail(e));
    params
        .subject_alt_names
        .push(SanType::IpAddress(std::net::IpAddr::V4(ip)));
    params
        .distinguished_name
        .push(DnType::CommonName, "berth-test-registry");
    let cert = params.signed_by(&key, &issuer).unwrap_or_else(|e| fail(e));
    let hash = bcrypt::hash(password, 5).unwrap_or_else(|e| panic!("bcrypt: {e}"));
    let write = |name: &str, body: &[u8]| {
        std::fs::write(dir.join(name), body).unwrap_or_else(|e| panic!("cannot write {name}: {e}"));
        dir.join(name)
    };
    let ca_file = write("ca.pem", ca_cert.pem().as_bytes());
    let cert_file = write("server.pem", cert.pem().as_bytes());
    let key_file = write("server-key.pem", key.serialize_pem().as_bytes());
    let htpasswd = write("htpasswd", format!("{username}:{hash}\n").as_bytes());
    let auth = format!(
        "auth:\n  htpasswd:\n    realm: berth-test\n    path: {}\n",
        htpasswd.display()
    );
    let tls = format!(
        "  tls:\n    certificate: {}\n    key: {}\n",
        cert_file.display(),
        key_file.display()
    );
    let login = RegistryLogin {
        username: username.to_string(),
        password: password.to_string(),
        ca_pem: ca_cert.pem().into_bytes(),
        ca_file,
    };
    (login, auth, tls)
}
