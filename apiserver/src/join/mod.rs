//! Joining nodes: join tokens (`K10<sha256 of the CA PEM>::node:<secret>`, k3s's shape, so an
//! agent can pin the CA before trusting it: the cluster's, and per-node ones, see [`tokens`])
//! and the signing of node client certificates (CN=system:node:<name>, O=system:nodes) for
//! agents that present a token's secret.
//!
//! Endpoints (see `api::join`): `GET /cacerts` (the CA PEM, unauthenticated) and
//! `POST /v1-berth/node-certificate` with `Authorization: Bearer <secret>` and a JSON body
//! `{"nodeName": "...", "nodeSecret": "...", "csr": "<PEM certificate request>",
//! "addresses": ["10.0.0.5"]}`, answering `{"certificate": "<PEM>", "ca": "<PEM>"}`. Who gets a
//! certificate for which name and addresses: [`tokens`], [`node_name`], [`passwords`],
//! [`addresses`]; how often one may fail: [`limiter`].

pub mod addresses;
pub mod limiter;
pub mod node_name;
pub mod passwords;
pub mod records;
pub mod tokens;

use crate::pki::{Pki, PkiError};
use node_name::NodeName;
use rcgen::{
    CertificateParams, CertificateSigningRequestParams, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, Issuer, KeyPair, KeyUsagePurpose,
};
use sha2::Digest;
use std::net::IpAddr;

#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    #[error(transparent)]
    Pki(#[from] PkiError),
    #[error("reading the CA: {0}")]
    Ca(#[from] rcgen::Error),
    #[error(transparent)]
    Token(#[from] tokens::TokenError),
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("invalid certificate request: {0}")]
    BadRequest(String),
    #[error(transparent)]
    Sign(#[from] crate::certificates::signer::SignError),
}

impl JoinError {
    pub fn is_transient(&self) -> bool {
        false
    }
}

/// Hex SHA-256 of the CA certificate PEM, as pinned in join tokens.
pub fn ca_hash(ca_pem: &str) -> String {
    sha2::Sha256::digest(ca_pem.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Signs node client certificates with the cluster CA.
pub struct NodeSigner {
    issuer: Issuer<'static, KeyPair>,
    pub ca_pem: String,
    /// How long a node certificate is valid (`--certificate-validity`).
    pub validity: std::time::Duration,
}

impl NodeSigner {
    pub fn new(pki: &Pki) -> Result<NodeSigner, JoinError> {
        let key_path = pki.dir.join("ca.key");
        let key_pem = std::fs::read_to_string(&key_path).map_err(|source| JoinError::Io {
            path: key_path.display().to_string(),
            source,
        })?;
        let issuer = Issuer::from_ca_cert_pem(&pki.ca_cert, KeyPair::from_pem(&key_pem)?)?;
        Ok(NodeSigner {
            issuer,
            ca_pem: pki.ca_cert.clone(),
            validity: crate::certificates::serving::DEFAULT_VALIDITY,
        })
    }

    /// Signs the CSR's public key into a node certificate; the subject is ours, not the CSR's.
    /// The certificate also serves the agent's HTTPS endpoint (logs, exec), so it carries the
    /// node's name and `addresses` (vetted by the caller: [`addresses::AddressRule`]) as SANs
    /// and both client and server usages.
    pub fn sign(
        &self,
        node_name: &NodeName,
        csr_pem: &str,
        addresses: &[IpAddr],
    ) -> Result<String, JoinError> {
        let csr = CertificateSigningRequestParams::from_pem(csr_pem)
            .map_err(|e| JoinError::BadRequest(e.to_string()))?;
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, format!("system:node:{node_name}"));
        dn.push(DnType::OrganizationName, "system:nodes");
        params.distinguished_name = dn;
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ClientAuth,
            ExtendedKeyUsagePurpose::ServerAuth,
        ];
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let mut sans = vec![rcgen::SanType::DnsName(
            node_name
                .as_str()
                .try_into()
                .map_err(|_| JoinError::BadRequest(format!("invalid node name {node_name}")))?,
        )];
        sans.extend(addresses.iter().map(|ip| rcgen::SanType::IpAddress(*ip)));
        params.subject_alt_names = sans;
        crate::certificates::signer::set_lifetime(
            &mut params,
            jiff::Timestamp::now(),
            self.validity,
            crate::certificates::signer::not_after(&self.ca_pem),
        )?;
        let cert = params.signed_by(&csr.public_key, &self.issuer)?;
        Ok(cert.pem())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_certificates_carry_the_node_identity_not_the_requested_one() {
        let dir = tempfile::tempdir().unwrap();
        let pki = crate::pki::load_or_create(&dir.path().join("pki"), &[]).unwrap();
        let signer = NodeSigner::new(&pki).unwrap();
        let key = KeyPair::generate().unwrap();
        let mut req = CertificateParams::default();
        req.distinguished_name.push(DnType::CommonName, "admin");
        req.distinguished_name
            .push(DnType::OrganizationName, "system:masters");
        let csr = req.serialize_request(&key).unwrap().pem().unwrap();
        let node = NodeName::parse("node-a").unwrap();
        let cert = signer
            .sign(&node, &csr, &["127.0.0.1".parse().unwrap()])
            .unwrap();
        let id = crate::api::authn::identity_from_pem(&cert).unwrap();
        assert_eq!(id.user, "system:node:node-a");
        assert_eq!(id.groups, vec!["system:nodes".to_string()]);
        assert!(signer.sign(&node, "not a CSR", &[]).is_err());
    }
}
