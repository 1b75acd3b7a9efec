//! A certificate request as the rules read it: the PEM of `spec.request` parsed and its
//! signature checked (as upstream's `ParseCSR` + `CheckSignature`), reduced to the subject's
//! common name and organizations and the subject alternative names by kind.

use std::net::IpAddr;
use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::FromDer;

/// Why `spec.request` is not a usable request (upstream's wording where it has one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("PEM block type must be CERTIFICATE REQUEST")]
    NotPem,
    #[error("x509: malformed certificate request: {0}")]
    Malformed(String),
    #[error("x509: certificate request signature verification failed")]
    Signature,
}

impl RequestError {
    pub fn is_transient(&self) -> bool {
        false
    }
}

/// What a request asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    pub common_name: String,
    pub organizations: Vec<String>,
    pub dns_names: Vec<String>,
    pub ip_addresses: Vec<IpAddr>,
    pub emails: Vec<String>,
    pub uris: Vec<String>,
}

/// Parses a PEM `CERTIFICATE REQUEST` and verifies its self-signature.
pub fn parse(pem: &[u8]) -> Result<Request, RequestError> {
    let (_, block) = x509_parser::pem::parse_x509_pem(pem).map_err(|_| RequestError::NotPem)?;
    if block.label != "CERTIFICATE REQUEST" {
        return Err(RequestError::NotPem);
    }
    let (_, csr) = X509CertificationRequest::from_der(&block.contents)
        .map_err(|e| RequestError::Malformed(e.to_string()))?;
    csr.verify_signature()
        .map_err(|_| RequestError::Signature)?;
    let subject = &csr.certification_request_info.subject;
    let text = |a: &x509_parser::x509::AttributeTypeAndValue<'_>| {
        a.as_str()
            .map(String::from)
            .map_err(|e| RequestError::Malformed(e.to_string()))
    };
    let mut out = Request {
        common_name: subject
            .iter_common_name()
            .next()
            .map(text)
            .transpose()?
            .unwrap_or_default(),
        organizations: subject
            .iter_organization()
            .map(text)
            .collect::<Result<_, _>>()?,
        ..Request::default()
    };
    for ext in csr.requested_extensions().into_iter().flatten() {
        let ParsedExtension::SubjectAlternativeName(san) = ext else {
            continue;
        };
        for name in &san.general_names {
            match name {
                GeneralName::DNSName(d) => out.dns_names.push(d.to_string()),
                GeneralName::RFC822Name(e) => out.emails.push(e.to_string()),
                GeneralName::URI(u) => out.uris.push(u.to_string()),
                GeneralName::IPAddress(bytes) => {
                    let ip = match bytes.len() {
                        4 => <[u8; 4]>::try_from(*bytes).map(IpAddr::from).ok(),
                        16 => <[u8; 16]>::try_from(*bytes).map(IpAddr::from).ok(),
                        _ => None,
                    };
                    let ip = ip.ok_or_else(|| {
                        RequestError::Malformed("an IP address SAN of bad length".into())
                    })?;
                    out.ip_addresses.push(ip);
                }
                _ => {}
            }
        }
    }
    Ok(out)
}

/// A request for tests: a new key, the subject and SANs given; returns (PEM, key PEM).
#[cfg(any(test, feature = "testing"))]
pub fn make(cn: &str, orgs: &[&str], sans: &[&str]) -> (String, String) {
    use rcgen::{CertificateParams, DnType, KeyPair, SanType};
    let key = KeyPair::generate().expect("key");
    let mut params = CertificateParams::default();
    params.distinguished_name.push(DnType::CommonName, cn);
    for o in orgs {
        params.distinguished_name.push(DnType::OrganizationName, *o);
    }
    params.subject_alt_names = sans
        .iter()
        .map(|s| match s.parse::<IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName((*s).try_into().expect("DNS name")),
        })
        .collect();
    let request = params.serialize_request(&key).expect("request");
    let pem = request.pem().expect("PEM");
    (pem, key.serialize_pem())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_reads_as_its_subject_and_names() {
        let (pem, _) = make("system:node:n1", &["system:nodes"], &["n1", "10.0.0.5"]);
        let r = parse(pem.as_bytes()).unwrap();
        assert_eq!(r.common_name, "system:node:n1");
        assert_eq!(r.organizations, vec!["system:nodes"]);
        assert_eq!(r.dns_names, vec!["n1"]);
        assert_eq!(r.ip_addresses, vec!["10.0.0.5".parse::<IpAddr>().unwrap()]);
    }

    #[test]
    fn anything_but_a_signed_request_is_refused() {
        assert_eq!(parse(b"hello"), Err(RequestError::NotPem));
        let cert = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert_eq!(parse(cert.as_bytes()), Err(RequestError::NotPem));
        let (pem, _) = make("x", &[], &[]);
        // Flip a byte of the signature (the end of the DER) and re-armour it.
        let (_, block) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
        let mut der = block.contents.clone();
        let last = der.len() - 1;
        der[last] ^= 0xff;
        let tampered = format!(
            "-----BEGIN CERTIFICATE REQUEST-----\n{}\n-----END CERTIFICATE REQUEST-----\n",
            base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &der)
        );
        assert!(parse(tampered.as_bytes()).is_err());
    }
}
