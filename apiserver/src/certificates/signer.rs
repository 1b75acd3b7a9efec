//! The cluster CA's signers (upstream's csrsigning): which requests each
//! `kubernetes.io/*` signer accepts ([`check`]: the subject, names and usages its certificates
//! may carry, as upstream's `ValidateKubeletClientCSR`, `ValidateKubeletServingCSR` and
//! `isKubeAPIServerClient` word their refusals) and the signing itself ([`CaSigner`]: the
//! request's subject and names, the usages asked for, a random serial, backdated a little,
//! valid for min(`expirationSeconds`, `--certificate-validity`) and never past the CA).

use super::request::Request;
use super::{APISERVER_CLIENT, KUBELET_CLIENT, KUBELET_SERVING, NODE_USER_PREFIX, NODES_GROUP};
use rcgen::{
    CertificateParams, CertificateSigningRequestParams, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, Issuer, KeyPair, KeyUsagePurpose, SerialNumber,
};
use std::time::Duration;

/// What a signer makes of an approved request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Not one of ours: left for another signer.
    NotOurs,
    /// Ours and within the signer's rules: sign it.
    Sign,
    /// Ours but outside its rules: a `Failed` condition (`SignerValidationFailure`) with this
    /// message.
    Refuse(String),
}

const KUBELET_CLIENT_USAGES: &[&[&str]] = &[
    &["client auth", "digital signature", "key encipherment"],
    &["client auth", "digital signature"],
];
const KUBELET_SERVING_USAGES: &[&[&str]] = &[
    &["digital signature", "key encipherment", "server auth"],
    &["digital signature", "server auth"],
];
/// Usages a kube-apiserver-client certificate may carry.
const APISERVER_CLIENT_USAGES: &[&str] = &["client auth", "digital signature", "key encipherment"];

fn same_set(usages: &[String], want: &[&str]) -> bool {
    want.iter().all(|w| usages.iter().any(|u| u == w))
        && usages.iter().all(|u| want.contains(&u.as_str()))
}

fn nodes_org(r: &Request) -> Result<(), String> {
    if r.organizations != [NODES_GROUP] {
        return Err("subject organization is not system:nodes".into());
    }
    Ok(())
}

fn node_cn(r: &Request) -> Result<(), String> {
    if !r.common_name.starts_with(NODE_USER_PREFIX) {
        return Err("subject common name does not begin with system:node:".into());
    }
    Ok(())
}

fn usages_in(usages: &[String], sets: &[&[&str]]) -> Result<(), String> {
    if sets.iter().any(|s| same_set(usages, s)) {
        return Ok(());
    }
    Err(format!("usages did not match [{}]", sets[0].join(" ")))
}

/// Upstream `ValidateKubeletClientCSR`.
fn kubelet_client(r: &Request, usages: &[String]) -> Result<(), String> {
    nodes_org(r)?;
    if !r.dns_names.is_empty() {
        return Err("DNS subjectAltNames are not allowed".into());
    }
    if !r.emails.is_empty() {
        return Err("Email subjectAltNames are not allowed".into());
    }
    if !r.ip_addresses.is_empty() {
        return Err("IP subjectAltNames are not allowed".into());
    }
    if !r.uris.is_empty() {
        return Err("URI subjectAltNames are not allowed".into());
    }
    node_cn(r)?;
    usages_in(usages, KUBELET_CLIENT_USAGES)
}

/// Upstream `ValidateKubeletServingCSR`.
fn kubelet_serving(r: &Request, usages: &[String]) -> Result<(), String> {
    nodes_org(r)?;
    if r.dns_names.is_empty() && r.ip_addresses.is_empty() {
        return Err("DNS or IP subjectAltName is required".into());
    }
    if !r.emails.is_empty() {
        return Err("Email subjectAltNames are not allowed".into());
    }
    if !r.uris.is_empty() {
        return Err("URI subjectAltNames are not allowed".into());
    }
    usages_in(usages, KUBELET_SERVING_USAGES)?;
    node_cn(r)
}

/// Upstream `isKubeAPIServerClient`, and what Berth's signing can express: one organization.
fn apiserver_client(r: &Request, usages: &[String]) -> Result<(), String> {
    if let Some(u) = usages
        .iter()
        .find(|u| !APISERVER_CLIENT_USAGES.contains(&u.as_str()))
    {
        return Err(format!("invalid usage for client certificate: {u}"));
    }
    if r.organizations.len() > 1 {
        return Err("Berth's signer issues at most one organization (O) per certificate".into());
    }
    Ok(())
}

/// Which of the built-in signers' rules an approved request for `signer` meets.
pub fn check(signer: &str, r: &Request, usages: &[String]) -> Verdict {
    let rule = match signer {
        KUBELET_CLIENT => kubelet_client,
        KUBELET_SERVING => kubelet_serving,
        APISERVER_CLIENT => apiserver_client,
        _ => return Verdict::NotOurs,
    };
    match rule(r, usages) {
        Ok(()) => Verdict::Sign,
        Err(message) => Verdict::Refuse(message),
    }
}

/// How long a certificate is issued for: what the request asks (`expirationSeconds`), at most
/// the signer's maximum (`--certificate-validity`), as upstream's `duration`.
pub fn lifetime(expiration_seconds: Option<i64>, max: Duration) -> Duration {
    match expiration_seconds {
        Some(s) if s > 0 => Duration::from_secs(s.unsigned_abs()).min(max),
        _ => max,
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SignError {
    #[error("certificate generation: {0}")]
    Cert(#[from] rcgen::Error),
    #[error("{0}")]
    Time(String),
}

impl SignError {
    pub fn is_transient(&self) -> bool {
        false
    }
}

/// rcgen's time from a jiff timestamp.
pub fn rcgen_time(t: jiff::Timestamp) -> Result<time::OffsetDateTime, SignError> {
    time::OffsetDateTime::from_unix_timestamp(t.as_second())
        .map_err(|e| SignError::Time(e.to_string()))
}

/// A random positive 16-byte serial (rcgen's default is a hash of the public key, which a
/// renewal with the same key would repeat).
pub fn random_serial() -> SerialNumber {
    let mut bytes: [u8; 16] = rand::random();
    bytes[0] &= 0x7f;
    bytes[0] |= 0x01;
    SerialNumber::from_slice(&bytes)
}

/// Sets `params`' validity: from a little before `now` (clock skew:
/// [`super::rotation::backdate`]) until `now + lifetime`, cut at `ca_not_after`; and a random
/// serial.
pub fn set_lifetime(
    params: &mut CertificateParams,
    now: jiff::Timestamp,
    lifetime: Duration,
    ca_not_after: Option<jiff::Timestamp>,
) -> Result<(), SignError> {
    let backdate = jiff::SignedDuration::try_from(super::rotation::backdate(lifetime))
        .map_err(|e| SignError::Time(e.to_string()))?;
    let span =
        jiff::SignedDuration::try_from(lifetime).map_err(|e| SignError::Time(e.to_string()))?;
    let mut not_after = now
        .checked_add(span)
        .map_err(|e| SignError::Time(e.to_string()))?;
    if let Some(ca) = ca_not_after {
        not_after = not_after.min(ca);
    }
    params.not_before = rcgen_time(
        now.checked_sub(backdate)
            .map_err(|e| SignError::Time(e.to_string()))?,
    )?;
    params.not_after = rcgen_time(not_after)?;
    params.serial_number = Some(random_serial());
    Ok(())
}

/// Signs requests with the cluster CA.
pub struct CaSigner {
    issuer: Issuer<'static, KeyPair>,
    /// The CA certificate's end of validity (issued certificates never outlive it).
    pub ca_not_after: Option<jiff::Timestamp>,
}

impl CaSigner {
    pub fn new(ca_cert_pem: &str, ca_key_pem: &str) -> Result<CaSigner, SignError> {
        let key = KeyPair::from_pem(ca_key_pem)?;
        let issuer = Issuer::from_ca_cert_pem(ca_cert_pem, key)?;
        Ok(CaSigner {
            issuer,
            ca_not_after: not_after(ca_cert_pem),
        })
    }

    pub fn issuer(&self) -> &Issuer<'static, KeyPair> {
        &self.issuer
    }

    /// Signs the request `pem` (already judged by [`check`]): its subject (CN and the one O)
    /// and names, the usages given; PEM out.
    pub fn sign(
        &self,
        pem: &str,
        request: &Request,
        usages: &[String],
        lifetime: Duration,
        now: jiff::Timestamp,
    ) -> Result<String, SignError> {
        let csr = CertificateSigningRequestParams::from_pem(pem)?;
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        if !request.common_name.is_empty() {
            dn.push(DnType::CommonName, request.common_name.as_str());
        }
        if let Some(o) = request.organizations.first() {
            dn.push(DnType::OrganizationName, o.as_str());
        }
        params.distinguished_name = dn;
        params.subject_alt_names = csr.params.subject_alt_names.clone();
        for u in usages {
            match u.as_str() {
                "digital signature" => params.key_usages.push(KeyUsagePurpose::DigitalSignature),
                "key encipherment" => params.key_usages.push(KeyUsagePurpose::KeyEncipherment),
                "client auth" => params
                    .extended_key_usages
                    .push(ExtendedKeyUsagePurpose::ClientAuth),
                "server auth" => params
                    .extended_key_usages
                    .push(ExtendedKeyUsagePurpose::ServerAuth),
                _ => {}
            }
        }
        set_lifetime(&mut params, now, lifetime, self.ca_not_after)?;
        let cert = params.signed_by(&csr.public_key, &self.issuer)?;
        Ok(cert.pem())
    }
}

/// The end of validity of the first certificate in `pem`.
pub fn not_after(pem: &str) -> Option<jiff::Timestamp> {
    validity(pem).map(|(_, end)| end)
}

/// The (start, end) of validity of the first certificate in `pem`.
pub fn validity(pem: &str) -> Option<(jiff::Timestamp, jiff::Timestamp)> {
    let (_, block) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).ok()?;
    let cert = block.parse_x509().ok()?;
    let v = cert.validity();
    let start = jiff::Timestamp::from_second(v.not_before.timestamp()).ok()?;
    let end = jiff::Timestamp::from_second(v.not_after.timestamp()).ok()?;
    Some((start, end))
}

/// The serial number (hex) of the first certificate in `pem`.
pub fn serial(pem: &str) -> Option<String> {
    let (_, block) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).ok()?;
    let cert = block.parse_x509().ok()?;
    Some(cert.raw_serial_as_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certificates::request::{make, parse};

    fn usages(u: &[&str]) -> Vec<String> {
        u.iter().map(|s| s.to_string()).collect()
    }

    fn verdict(signer: &str, cn: &str, orgs: &[&str], sans: &[&str], u: &[&str]) -> Verdict {
        let (pem, _) = make(cn, orgs, sans);
        check(signer, &parse(pem.as_bytes()).unwrap(), &usages(u))
    }

    #[test]
    fn the_kubelet_client_signer_takes_node_identities_without_names() {
        let ok = ["digital signature", "client auth"];
        type Case<'a> = (
            &'a str,
            &'a [&'a str],
            &'a [&'a str],
            &'a [&'a str],
            Verdict,
        );
        let cases: &[Case] = &[
            ("system:node:a", &["system:nodes"], &[], &ok, Verdict::Sign),
            (
                "system:node:a",
                &["system:nodes"],
                &[],
                &["digital signature", "key encipherment", "client auth"],
                Verdict::Sign,
            ),
            (
                "system:node:a",
                &["system:masters"],
                &[],
                &ok,
                Verdict::Refuse("subject organization is not system:nodes".into()),
            ),
            (
                "system:node:a",
                &["system:nodes"],
                &["a"],
                &ok,
                Verdict::Refuse("DNS subjectAltNames are not allowed".into()),
            ),
            (
                "system:node:a",
                &["system:nodes"],
                &["10.0.0.1"],
                &ok,
                Verdict::Refuse("IP subjectAltNames are not allowed".into()),
            ),
            (
                "admin",
                &["system:nodes"],
                &[],
                &ok,
                Verdict::Refuse("subject common name does not begin with system:node:".into()),
            ),
            (
                "system:node:a",
                &["system:nodes"],
                &[],
                &["client auth", "server auth"],
                Verdict::Refuse(
                    "usages did not match [client auth digital signature key encipherment]".into(),
                ),
            ),
        ];
        for (cn, orgs, sans, u, want) in cases {
            assert_eq!(
                &verdict(KUBELET_CLIENT, cn, orgs, sans, u),
                want,
                "{cn} {orgs:?} {sans:?} {u:?}"
            );
        }
    }

    #[test]
    fn the_kubelet_serving_signer_needs_names_and_server_auth() {
        let ok = ["digital signature", "key encipherment", "server auth"];
        assert_eq!(
            verdict(
                KUBELET_SERVING,
                "system:node:a",
                &["system:nodes"],
                &["a", "10.0.0.1"],
                &ok
            ),
            Verdict::Sign
        );
        assert_eq!(
            verdict(
                KUBELET_SERVING,
                "system:node:a",
                &["system:nodes"],
                &[],
                &ok
            ),
            Verdict::Refuse("DNS or IP subjectAltName is required".into())
        );
        assert_eq!(
            verdict(
                KUBELET_SERVING,
                "system:node:a",
                &["system:nodes"],
                &["a"],
                &["client auth"]
            ),
            Verdict::Refuse(
                "usages did not match [digital signature key encipherment server auth]".into()
            )
        );
        assert_eq!(
            verdict(KUBELET_SERVING, "a", &["system:nodes"], &["a"], &ok),
            Verdict::Refuse("subject common name does not begin with system:node:".into())
        );
    }

    #[test]
    fn the_client_signer_takes_client_usages_and_others_are_not_ours() {
        assert_eq!(
            verdict(APISERVER_CLIENT, "jane", &["dev"], &[], &["client auth"]),
            Verdict::Sign
        );
        assert_eq!(
            verdict(APISERVER_CLIENT, "jane", &[], &[], &["server auth"]),
            Verdict::Refuse("invalid usage for client certificate: server auth".into())
        );
        assert_eq!(
            verdict("example.com/mine", "jane", &[], &[], &["client auth"]),
            Verdict::NotOurs
        );
    }

    #[test]
    fn lifetime_is_the_request_s_capped_at_the_maximum() {
        let year = Duration::from_secs(365 * 86400);
        assert_eq!(lifetime(None, year), year);
        assert_eq!(lifetime(Some(3600), year), Duration::from_secs(3600));
        assert_eq!(
            lifetime(Some(3600), Duration::from_secs(120)),
            Duration::from_secs(120)
        );
    }

    #[test]
    fn a_signed_certificate_carries_the_requested_identity_and_verifies_against_the_ca() {
        let dir = tempfile::tempdir().unwrap();
        let pki = crate::pki::load_or_create(dir.path(), &[]).unwrap();
        let key = std::fs::read_to_string(dir.path().join("ca.key")).unwrap();
        let signer = CaSigner::new(&pki.ca_cert, &key).unwrap();
        let (pem, _) = make("system:node:a", &["system:nodes"], &[]);
        let request = parse(pem.as_bytes()).unwrap();
        let now = jiff::Timestamp::now();
        let cert = signer
            .sign(
                &pem,
                &request,
                &usages(&["digital signature", "client auth"]),
                Duration::from_secs(600),
                now,
            )
            .unwrap();
        let id = crate::api::authn::identity_from_pem(&cert).unwrap();
        assert_eq!(id.user, "system:node:a");
        assert_eq!(id.groups, vec!["system:nodes".to_string()]);
        let (start, end) = validity(&cert).unwrap();
        assert_eq!(end.as_second() - start.as_second(), 606);
        let again = signer
            .sign(
                &pem,
                &request,
                &usages(&["client auth"]),
                Duration::from_secs(600),
                now,
            )
            .unwrap();
        assert_ne!(serial(&cert), serial(&again));
        let (_, block) = x509_parser::pem::parse_x509_pem(cert.as_bytes()).unwrap();
        let parsed = block.parse_x509().unwrap();
        let (_, ca_block) = x509_parser::pem::parse_x509_pem(pki.ca_cert.as_bytes()).unwrap();
        let ca = ca_block.parse_x509().unwrap();
        parsed.verify_signature(Some(ca.public_key())).unwrap();
    }
}
