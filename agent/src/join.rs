//! Joining the cluster: the token pins the CA (`K10<sha256 of the CA PEM>::node:<secret>`, the
//! secret being the cluster's or a per-node token's `<id>.<secret>`: the agent treats both
//! alike); the agent fetches the CA, checks its hash, sends a certificate request for
//! `system:node:<name>` with the token's secret and its own node secret, and keeps the signed
//! certificate under its root dir (reused on later starts). The node secret (`pki/node-secret`,
//! 256 random bits made at the first join, or put there by an administrator) binds the node
//! name to this agent: the controller registers it at the first join under the name and signs
//! later certificates for the name only for its holder.

use berth_api::client::any_certificate::AnyServerCertificate;
use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair};
use sha2::Digest;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    #[error("the join token is not of the form K10<ca-hash>::node:<secret>")]
    BadToken,
    #[error("the server's CA does not match the token's hash (expected {expected}, got {got})")]
    CaMismatch { expected: String, got: String },
    #[error("contacting {url}: {message}")]
    Http { url: String, message: String },
    #[error("the server refused the certificate request ({status}): {message}")]
    Refused { status: u16, message: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("certificate request: {0}")]
    Csr(#[from] rcgen::Error),
}

impl JoinError {
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            JoinError::Http { .. } | JoinError::Refused { status: 429, .. }
        )
    }

    /// Whether another server of the cluster may answer where this one failed: it could not
    /// be reached, was throttling, or is unavailable (502–504).
    pub fn another_server_may_answer(&self) -> bool {
        self.is_transient()
            || matches!(
                self,
                JoinError::Refused {
                    status: 502..=504,
                    ..
                }
            )
    }
}

/// A parsed join token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub ca_hash: String,
    pub secret: String,
}

impl Token {
    pub fn parse(s: &str) -> Result<Token, JoinError> {
        let rest = s.trim().strip_prefix("K10").ok_or(JoinError::BadToken)?;
        let (hash, secret) = rest.split_once("::node:").ok_or(JoinError::BadToken)?;
        if hash.len() != 64 || !hash.chars().all(|c| c.is_ascii_hexdigit()) || secret.is_empty() {
            return Err(JoinError::BadToken);
        }
        Ok(Token {
            ca_hash: hash.to_ascii_lowercase(),
            secret: secret.to_string(),
        })
    }
}

/// The agent's credentials.
#[derive(Debug, Clone)]
pub struct NodeCredentials {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

fn sha256_hex(data: &[u8]) -> String {
    sha2::Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> JoinError + '_ {
    move |source| JoinError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn write_private(path: &Path, contents: &str) -> Result<(), JoinError> {
    if let Some(dir) = path.parent() {
        berth_api::private_files::ensure_dir(dir).map_err(io(dir))?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(io(path))?;
    f.write_all(contents.as_bytes()).map_err(io(path))?;
    f.sync_all().map_err(io(path))
}

/// The node secret in `path`, made (and written, before any join can register it) if there is
/// none.
pub fn node_secret(path: &Path) -> Result<String, JoinError> {
    match std::fs::read_to_string(path) {
        Ok(s) if !s.trim().is_empty() => return Ok(s.trim().to_string()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(path)(e)),
    }
    let bytes: [u8; 32] = rand::random();
    let secret: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    write_private(path, &format!("{secret}\n"))?;
    Ok(secret)
}

fn http_err(url: &str) -> impl Fn(reqwest::Error) -> JoinError + '_ {
    move |e| JoinError::Http {
        url: url.to_string(),
        message: e.to_string(),
    }
}

/// How the join's HTTPS client trusts the server: the TLS builder on the agent's crypto
/// provider, to the step that asks for a client certificate (there is none yet).
type Trust = fn(
    rustls::ConfigBuilder<rustls::ClientConfig, rustls::WantsVerifier>,
    Arc<rustls::crypto::CryptoProvider>,
    rustls::RootCertStore,
) -> rustls::ConfigBuilder<rustls::ClientConfig, rustls::client::WantsClientCert>;

/// An HTTPS client for `url` on `server` that trusts the server as `trust` says.
fn https_client(
    server: &str,
    url: &str,
    trust: Trust,
    roots: rustls::RootCertStore,
) -> Result<reqwest::Client, JoinError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| JoinError::Http {
            url: server.to_string(),
            message: e.to_string(),
        })?;
    let config = trust(builder, provider, roots).with_no_client_auth();
    reqwest::Client::builder()
        .use_preconfigured_tls(config)
        .build()
        .map_err(http_err(url))
}

async fn fetch_ca(server: &str, token: &Token) -> Result<String, JoinError> {
    let url = format!("{server}/cacerts");
    // Any certificate: the CA is checked against the token's hash below.
    let any: Trust = |b, provider, _| {
        b.dangerous()
            .with_custom_certificate_verifier(AnyServerCertificate::new(provider))
    };
    let http = https_client(server, &url, any, rustls::RootCertStore::empty())?;
    let pem = http
        .get(&url)
        .send()
        .await
        .map_err(http_err(&url))?
        .text()
        .await
        .map_err(http_err(&url))?;
    let got = sha256_hex(pem.as_bytes());
    if got != token.ca_hash {
        return Err(JoinError::CaMismatch {
            expected: token.ca_hash.clone(),
            got,
        });
    }
    Ok(pem)
}

/// Whether a kept certificate may be used rather than joining again: it names this node and
/// has not expired; with a token at hand it must also have some life left — more than 7
/// days or a tenth of its life, whichever is less (a 2-minute certificate: 12 s) — else
/// joining is the surer way. A certificate within that margin is still used without a
/// token: the certificate manager renews it at once through a CertificateSigningRequest.
fn identity_matches(cert_pem: &str, node: &str, have_token: bool) -> bool {
    let Some(Ok(der)) = rustls_pemfile::certs(&mut cert_pem.as_bytes()).next() else {
        return false;
    };
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(&der) else {
        return false;
    };
    let cn = cert
        .subject()
        .iter_common_name()
        .next()
        .and_then(|c| c.as_str().ok().map(String::from));
    let validity = cert.validity();
    let life = validity.not_after.timestamp() - validity.not_before.timestamp();
    let margin = (life / 10).min(7 * 86_400);
    let usable = match validity.time_to_expiration() {
        Some(left) => !have_token || left.whole_seconds() > margin,
        None => false,
    };
    cn.as_deref() == Some(&format!("system:node:{node}")) && usable
}

/// The client pair the agent renewed last (`kubelet-client-current.pem`), else the one the
/// join wrote (`node.crt`, `node.key`).
fn kept_pair(pki_dir: &Path) -> Option<(String, String)> {
    if let Some(id) = crate::certificates::files::load(pki_dir, crate::certificates::Kind::Client) {
        return Some((id.cert_pem, id.key_pem));
    }
    let cert = std::fs::read_to_string(pki_dir.join("node.crt")).ok()?;
    let key = std::fs::read_to_string(pki_dir.join("node.key")).ok()?;
    Some((cert, key))
}

/// Loads the node's credentials from `pki_dir`, joining (with `token`) when they are missing,
/// for another node, or about to expire. Each of `servers` is asked in turn until one
/// answers: a server that cannot be reached (or is throttling joins) is skipped, a refusal or
/// a CA that does not match the token is final (every server of a cluster has the same CA).
pub async fn credentials(
    servers: &[String],
    token: Option<&str>,
    node: &str,
    addresses: &[String],
    pki_dir: &Path,
) -> Result<NodeCredentials, JoinError> {
    let (ca_path, cert_path, key_path) = (
        pki_dir.join("ca.crt"),
        pki_dir.join("node.crt"),
        pki_dir.join("node.key"),
    );
    if let (Ok(ca), Some((cert, key))) = (std::fs::read_to_string(&ca_path), kept_pair(pki_dir))
        && identity_matches(&cert, node, token.is_some())
        && token
            .is_none_or(|t| Token::parse(t).is_ok_and(|t| sha256_hex(ca.as_bytes()) == t.ca_hash))
    {
        return Ok(NodeCredentials {
            ca_pem: ca,
            cert_pem: cert,
            key_pem: key,
        });
    }
    let token = Token::parse(token.ok_or(JoinError::BadToken)?)?;
    let secret = node_secret(&pki_dir.join("node-secret"))?;
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, format!("system:node:{node}"));
    dn.push(DnType::OrganizationName, "system:nodes");
    params.distinguished_name = dn;
    let csr = params.serialize_request(&key)?.pem()?;
    let request = CertificateRequest {
        token: &token,
        node,
        secret: &secret,
        csr: &csr,
        addresses,
    };
    let mut last = None;
    for server in servers {
        match request_certificate(server, &request).await {
            Ok((ca_pem, cert_pem)) => {
                write_private(&ca_path, &ca_pem)?;
                write_private(&key_path, &key.serialize_pem())?;
                write_private(&cert_path, &cert_pem)?;
                // The renewed pair is read first at the next start: this one replaces it.
                let current = crate::certificates::files::current_path(
                    pki_dir,
                    crate::certificates::Kind::Client,
                );
                let combined = format!("{}\n{cert_pem}", key.serialize_pem().trim_end());
                berth_api::private_files::write_atomic(&current, combined.as_bytes())
                    .map_err(|(path, source)| JoinError::Io { path, source })?;
                return Ok(NodeCredentials {
                    ca_pem,
                    cert_pem,
                    key_pem: key.serialize_pem(),
                });
            }
            Err(e) if e.another_server_may_answer() => {
                tracing::warn!(%server, error = %e, "joining through this server failed; trying the next");
                last = Some(e);
            }
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| JoinError::Http {
        url: String::new(),
        message: "no server given".to_string(),
    }))
}

/// What a certificate request sends.
struct CertificateRequest<'a> {
    token: &'a Token,
    node: &'a str,
    secret: &'a str,
    csr: &'a str,
    addresses: &'a [String],
}

/// Fetches the CA from `server` (checked against the token) and has it sign the request;
/// returns the CA and the certificate.
async fn request_certificate(
    server: &str,
    r: &CertificateRequest<'_>,
) -> Result<(String, String), JoinError> {
    let ca_pem = fetch_ca(server, r.token).await?;
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pemfile::certs(&mut ca_pem.as_bytes()).flatten() {
        let _ = roots.add(c);
    }
    let url = format!("{server}/v1-berth/node-certificate");
    let the_ca: Trust = |b, _, roots| b.with_root_certificates(roots);
    let http = https_client(server, &url, the_ca, roots)?;
    let resp = http
        .post(&url)
        .bearer_auth(&r.token.secret)
        .json(&serde_json::json!({
            "nodeName": r.node,
            "nodeSecret": r.secret,
            "csr": r.csr,
            "addresses": r.addresses,
        }))
        .send()
        .await
        .map_err(http_err(&url))?;
    let status = resp.status();
    let body: serde_json::Value = resp.json().await.map_err(http_err(&url))?;
    if !status.is_success() {
        return Err(JoinError::Refused {
            status: status.as_u16(),
            message: body["message"].as_str().unwrap_or("unknown").to_string(),
        });
    }
    let cert_pem = body["certificate"].as_str().unwrap_or_default().to_string();
    Ok((ca_pem, cert_pem))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_parse_into_hash_and_secret() {
        let hash = "a".repeat(64);
        let t = Token::parse(&format!("K10{hash}::node:s3cret\n")).unwrap();
        assert_eq!(
            (t.ca_hash.as_str(), t.secret.as_str()),
            (hash.as_str(), "s3cret")
        );
        assert!(Token::parse("K10abc::node:x").is_err());
        assert!(Token::parse(&format!("{hash}::node:x")).is_err());
        assert!(Token::parse(&format!("K10{hash}::node:")).is_err());
        // A per-node token (`berth-controller token create --node NAME`) has the same shape;
        // its secret is sent as it is.
        let t = Token::parse(&format!("K10{hash}::node:abc123.0123456789abcdef")).unwrap();
        assert_eq!(t.secret, "abc123.0123456789abcdef");
    }

    /// A certificate for `cn` valid from `from` to `to` seconds from now, and its key.
    fn cert(cn: &str, from: i64, to: i64) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::default();
        p.distinguished_name.push(DnType::CommonName, cn);
        let now = time::OffsetDateTime::now_utc();
        p.not_before = now + time::Duration::seconds(from);
        p.not_after = now + time::Duration::seconds(to);
        (p.self_signed(&key).unwrap().pem(), key.serialize_pem())
    }

    #[test]
    fn a_kept_certificate_is_used_while_it_has_life_left_else_the_token_rejoins() {
        let me = "system:node:n1";
        let cases = [
            // (what, cn, from, to, token at hand, used)
            ("fresh, 2-minute", me, -10, 110, true, true),
            (
                "past its last tenth, with a token",
                me,
                -110,
                10,
                true,
                false,
            ),
            ("past its last tenth, no token", me, -110, 10, false, true),
            ("expired, no token", me, -130, -10, false, false),
            (
                "a year, 8 days left",
                me,
                -357 * 86_400,
                8 * 86_400,
                true,
                true,
            ),
            (
                "a year, 6 days left",
                me,
                -359 * 86_400,
                6 * 86_400,
                true,
                false,
            ),
            ("another node's", "system:node:n2", -10, 110, true, false),
        ];
        for (what, cn, from, to, token, used) in cases {
            let (pem, _) = cert(cn, from, to);
            assert_eq!(identity_matches(&pem, "n1", token), used, "{what}");
        }
    }

    #[test]
    fn the_renewed_pair_is_preferred_to_the_joined_one() {
        let dir = tempfile::tempdir().unwrap();
        assert!(kept_pair(dir.path()).is_none());
        let (joined, joined_key) = cert("system:node:n1", -10, 110);
        std::fs::write(dir.path().join("node.crt"), &joined).unwrap();
        std::fs::write(dir.path().join("node.key"), &joined_key).unwrap();
        assert_eq!(kept_pair(dir.path()).unwrap().0, joined);
        let (renewed, renewed_key) = cert("system:node:n1", -1, 119);
        let id = crate::certificates::identity::Identity::parse(&renewed, &renewed_key).unwrap();
        crate::certificates::files::store(dir.path(), crate::certificates::Kind::Client, &id)
            .unwrap();
        assert_eq!(kept_pair(dir.path()).unwrap(), (renewed, renewed_key));
    }

    #[test]
    fn the_node_secret_is_made_once_kept_private_and_reused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pki").join("node-secret");
        let first = node_secret(&path).unwrap();
        assert_eq!(first.len(), 64);
        assert_eq!(node_secret(&path).unwrap(), first);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&dir.path().join("pki")), 0o700);
        // One an administrator put there is used as it is.
        std::fs::write(&path, "given-secret\n").unwrap();
        assert_eq!(node_secret(&path).unwrap(), "given-secret");
    }
}
