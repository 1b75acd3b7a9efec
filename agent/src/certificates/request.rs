//! What the agent asks the signers for, and what their answer means: a fresh key and a PKCS#10
//! request per renewal (subject `system:node:<name>` / `system:nodes`, a serving certificate's
//! SANs the node's name and addresses), the `certificates.k8s.io/v1` CertificateSigningRequest
//! carrying it, as the kubelet's certificate manager writes it, and the request's outcome read
//! from its conditions and `status.certificate`.

use super::Kind;
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, SanType};
use std::net::IpAddr;

/// A new key and the request for its certificate.
pub struct KeyAndRequest {
    pub key_pem: String,
    pub csr_pem: String,
}

/// The subject and names a certificate of `kind` for `node` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pub kind: Kind,
    pub node: String,
    /// DNS names (the node's name) — serving certificates only.
    pub dns_names: Vec<String>,
    /// The node's addresses — serving certificates only.
    pub ips: Vec<IpAddr>,
}

impl Template {
    /// A client certificate's: `system:node:<node>` in `system:nodes`, no names.
    pub fn client(node: &str) -> Template {
        Template {
            kind: Kind::Client,
            node: node.to_string(),
            dns_names: Vec::new(),
            ips: Vec::new(),
        }
    }

    /// A serving certificate's: the same subject, with the node's name and addresses as SANs
    /// (the names the controller dials the agent by), sorted and without duplicates.
    pub fn serving(node: &str, addresses: &[IpAddr]) -> Template {
        let mut ips = addresses.to_vec();
        ips.sort();
        ips.dedup();
        Template {
            kind: Kind::Serving,
            node: node.to_string(),
            dns_names: vec![node.to_string()],
            ips,
        }
    }

    pub fn common_name(&self) -> String {
        format!("system:node:{}", self.node)
    }

    /// A new key (ECDSA P-256, as the kubelet's) and the request for it.
    pub fn generate(&self) -> Result<KeyAndRequest, rcgen::Error> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, self.common_name());
        dn.push(DnType::OrganizationName, "system:nodes");
        params.distinguished_name = dn;
        let mut sans = Vec::new();
        for name in &self.dns_names {
            sans.push(SanType::DnsName(name.clone().try_into()?));
        }
        sans.extend(self.ips.iter().map(|ip| SanType::IpAddress(*ip)));
        params.subject_alt_names = sans;
        let csr_pem = params.serialize_request(&key)?.pem()?;
        Ok(KeyAndRequest {
            key_pem: key.serialize_pem(),
            csr_pem,
        })
    }

    /// The CertificateSigningRequest object for `csr_pem`: a generated name (`csr-xxxxx`, as
    /// the kubelet's), the kind's signer and usages, and no requested duration (the signer's
    /// own maximum applies, as for the kubelet).
    pub fn object(&self, csr_pem: &str) -> CertificateSigningRequest {
        CertificateSigningRequest {
            metadata: ObjectMeta {
                generate_name: Some("csr-".to_string()),
                ..Default::default()
            },
            spec: CertificateSigningRequestSpec {
                request: ByteString(csr_pem.as_bytes().to_vec()),
                signer_name: self.kind.signer().to_string(),
                usages: Some(self.kind.usages().iter().map(|u| u.to_string()).collect()),
                ..Default::default()
            },
            status: None,
        }
    }
}

/// Where a request stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Not yet approved, or approved and not yet signed.
    Pending,
    /// Signed: the certificate (PEM).
    Issued(String),
    /// Denied by an approver (reason: message).
    Denied(String),
    /// The signer refused it (reason: message).
    Failed(String),
}

/// The outcome the request's status says, as client-go's `WaitForCertificate` reads it: a
/// Denied or Failed condition ends it; a certificate counts once it is there.
pub fn outcome(csr: &CertificateSigningRequest) -> Outcome {
    let Some(status) = &csr.status else {
        return Outcome::Pending;
    };
    for c in status.conditions.iter().flatten() {
        let says = || {
            format!(
                "{}: {}",
                c.reason.as_deref().unwrap_or(""),
                c.message.as_deref().unwrap_or("")
            )
        };
        match c.type_.as_str() {
            "Denied" if c.status != "False" => return Outcome::Denied(says()),
            "Failed" if c.status != "False" => return Outcome::Failed(says()),
            _ => {}
        }
    }
    match &status.certificate {
        Some(cert) if !cert.0.is_empty() => {
            Outcome::Issued(String::from_utf8_lossy(&cert.0).into_owned())
        }
        _ => Outcome::Pending,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::certificates::v1::{
        CertificateSigningRequestCondition, CertificateSigningRequestStatus,
    };

    fn with_status(
        conditions: &[(&str, &str, &str)],
        cert: Option<&str>,
    ) -> CertificateSigningRequest {
        CertificateSigningRequest {
            status: Some(CertificateSigningRequestStatus {
                certificate: cert.map(|c| ByteString(c.as_bytes().to_vec())),
                conditions: Some(
                    conditions
                        .iter()
                        .map(|(t, s, r)| CertificateSigningRequestCondition {
                            type_: t.to_string(),
                            status: s.to_string(),
                            reason: Some(r.to_string()),
                            message: Some("m".to_string()),
                            ..Default::default()
                        })
                        .collect(),
                ),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_outcome_is_read_from_conditions_and_certificate() {
        let cases = [
            (
                "new",
                CertificateSigningRequest::default(),
                Outcome::Pending,
            ),
            (
                "approved, not signed",
                with_status(&[("Approved", "True", "AutoApproved")], None),
                Outcome::Pending,
            ),
            (
                "approved and signed",
                with_status(&[("Approved", "True", "AutoApproved")], Some("PEM")),
                Outcome::Issued("PEM".to_string()),
            ),
            (
                "denied",
                with_status(&[("Denied", "True", "NotMine")], None),
                Outcome::Denied("NotMine: m".to_string()),
            ),
            (
                "failed by the signer",
                with_status(
                    &[
                        ("Approved", "True", "AutoApproved"),
                        ("Failed", "True", "SignerValidationFailure"),
                    ],
                    None,
                ),
                Outcome::Failed("SignerValidationFailure: m".to_string()),
            ),
            (
                "an empty certificate is not one",
                with_status(&[("Approved", "True", "AutoApproved")], Some("")),
                Outcome::Pending,
            ),
        ];
        for (name, csr, want) in cases {
            assert_eq!(outcome(&csr), want, "{name}");
        }
    }

    #[test]
    fn requests_carry_the_node_identity_and_the_kinds_signer() {
        let client = Template::client("n1");
        let kr = client.generate().unwrap();
        let parsed = rcgen::CertificateSigningRequestParams::from_pem(&kr.csr_pem).unwrap();
        let dn = &parsed.params.distinguished_name;
        assert_eq!(
            dn.get(&DnType::CommonName),
            Some(&rcgen::DnValue::Utf8String("system:node:n1".to_string()))
        );
        assert!(parsed.params.subject_alt_names.is_empty());
        let obj = client.object(&kr.csr_pem);
        assert_eq!(
            obj.spec.signer_name,
            "kubernetes.io/kube-apiserver-client-kubelet"
        );
        assert_eq!(
            obj.spec.usages.as_deref(),
            Some(&["digital signature".to_string(), "client auth".to_string()][..])
        );
        assert_eq!(obj.metadata.generate_name.as_deref(), Some("csr-"));

        let ips: Vec<IpAddr> = vec!["10.0.0.2".parse().unwrap(), "10.0.0.1".parse().unwrap()];
        let serving = Template::serving("n1", &[ips[0], ips[1], ips[0]]);
        assert_eq!(serving.ips, vec![ips[1], ips[0]]);
        let kr = serving.generate().unwrap();
        let parsed = rcgen::CertificateSigningRequestParams::from_pem(&kr.csr_pem).unwrap();
        assert_eq!(parsed.params.subject_alt_names.len(), 3);
        let obj = serving.object(&kr.csr_pem);
        assert_eq!(obj.spec.signer_name, "kubernetes.io/kubelet-serving");
        assert!(
            obj.spec
                .usages
                .unwrap()
                .contains(&"server auth".to_string())
        );
        // Each renewal has its own key.
        assert_ne!(serving.generate().unwrap().key_pem, kr.key_pem);
    }
}
