//! Joining from the test, as an agent (or an attacker holding the join token) would: requests
//! to the join endpoint with a fresh key, a node name, a node secret and the addresses asked
//! for; node identities (certificate + key) from the answers; and what a signed certificate
//! says about itself (its subject and SANs).

use std::net::IpAddr;

use rcgen::{CertificateParams, DnType, KeyPair};
use serde_json::{Value, json};

use crate::api::Api;
use crate::client::{Reply, Req};
use crate::controller::Controller;
use crate::objects::failure_status;

/// The endpoint that signs node certificates.
pub const NODE_CERTIFICATE: &str = "/v1-berth/node-certificate";

/// The secret part of a join token (`K10<ca-hash>::node:<secret>`; a per-node token's is
/// `<id>.<secret>`), what an agent sends as its bearer token; panics on another shape.
pub fn token_secret(token: &str) -> String {
    match token.trim().split_once("::node:") {
        Some((_, secret)) if !secret.is_empty() => secret.to_string(),
        _ => panic!("not a join token: {token:?}"),
    }
}

/// Asserts that a join attempt got a Status failure with `code` and `reason`; returns its message.
pub fn refused(c: &Controller, a: &Attempt, code: u16, reason: &str) -> String {
    assert_eq!(
        a.reply.status,
        code,
        "{}\n{}",
        a.reply.describe(),
        c.log_tail()
    );
    failure_status(&a.reply.json(), code, reason)
        .unwrap_or_else(|e| panic!("{e}: {}", a.reply.describe()))
}

/// One join request and the key its CSR was made with.
pub struct Attempt {
    pub reply: Reply,
    pub key_pem: String,
}

impl Attempt {
    /// The signed certificate followed by the key (a client identity); panics unless the reply
    /// is a 200 with a certificate.
    pub fn identity(&self) -> Vec<u8> {
        assert_eq!(self.reply.status, 200, "{}", self.reply.describe());
        let body = self.reply.json();
        let cert = body["certificate"]
            .as_str()
            .unwrap_or_else(|| panic!("no certificate: {}", self.reply.describe()));
        format!("{cert}\n{}", self.key_pem).into_bytes()
    }

    /// The certificate's DNS and IP SANs, as strings; panics unless the reply is a 200.
    pub fn sans(&self) -> Vec<String> {
        let identity = self.identity();
        let text = String::from_utf8_lossy(&identity);
        certificate_sans(&text)
    }
}

/// The DNS names and IP addresses of the first certificate in `pem`.
pub fn certificate_sans(pem: &str) -> Vec<String> {
    let der = pem_certificate(pem);
    let (_, cert) = x509_parser::parse_x509_certificate(&der)
        .unwrap_or_else(|e| panic!("not a certificate: {e}"));
    let mut out = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            match name {
                x509_parser::extensions::GeneralName::DNSName(d) => out.push(d.to_string()),
                x509_parser::extensions::GeneralName::IPAddress(bytes) => {
                    let ip = match bytes.len() {
                        4 => <[u8; 4]>::try_from(*bytes).ok().map(IpAddr::from),
                        16 => <[u8; 16]>::try_from(*bytes).ok().map(IpAddr::from),
                        _ => None,
                    };
                    out.push(ip.map_or_else(|| format!("{bytes:?}"), |ip| ip.to_string()));
                }
                other => out.push(format!("{other:?}")),
            }
        }
    }
    out
}

fn pem_certificate(pem: &str) -> Vec<u8> {
    use base64::Engine as _;
    let begin = "-----BEGIN CERTIFICATE-----";
    let end = "-----END CERTIFICATE-----";
    let start = pem
        .find(begin)
        .unwrap_or_else(|| panic!("no certificate in {pem:?}"))
        + begin.len();
    let stop = pem[start..]
        .find(end)
        .unwrap_or_else(|| panic!("unterminated certificate in {pem:?}"))
        + start;
    let b64: String = pem[start..stop].split_whitespace().collect();
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap_or_else(|e| panic!("certificate is not base64: {e}"))
}

/// A join of node `name` with the controller's cluster token and `node_secret`, asking only for
/// 127.0.0.1: the plain join most tests need.
pub fn join_locally(c: &Controller, name: &str, node_secret: &str) -> Attempt {
    request(
        &c.anonymous_api(),
        &token_secret(&c.join_token()),
        name,
        Some(node_secret),
        &["127.0.0.1"],
    )
}

/// A join request: `token_secret` as the bearer token, a CSR made with a fresh key for
/// `system:node:<name>`, `node_secret` (omitted when `None`) and the addresses asked for.
pub fn request(
    api: &Api,
    token_secret: &str,
    name: &str,
    node_secret: Option<&str>,
    addresses: &[&str],
) -> Attempt {
    let fail = |e: rcgen::Error| -> ! { panic!("rcgen: {e}") };
    let key = KeyPair::generate().unwrap_or_else(|e| fail(e));
    let mut params = CertificateParams::default();
    params
        .distinguished_name
        .push(DnType::CommonName, format!("system:node:{name}"));
    let csr = params
        .serialize_request(&key)
        .and_then(|r| r.pem())
        .unwrap_or_else(|e| fail(e));
    let mut body = json!({"nodeName": name, "csr": csr, "addresses": addresses});
    if let Some(secret) = node_secret {
        body["nodeSecret"] = Value::String(secret.to_string());
    }
    let reply = api.send(
        Req::post(NODE_CERTIFICATE, &body)
            .header("Authorization", &format!("Bearer {token_secret}")),
    );
    Attempt {
        reply,
        key_pem: key.serialize_pem(),
    }
}
