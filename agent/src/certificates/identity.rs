//! A key and its certificate, checked once: the PEM pair parsed, the key matching the
//! certificate, and what the certificate says (validity, serial, subject, SANs) read out for
//! the planner, the metrics and the TLS configurations.

use super::plan::Validity;
use super::request::Template;
use jiff::Timestamp;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::net::IpAddr;
use std::sync::Arc;

/// Why a key and certificate cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("no certificate in the PEM")]
    NoCertificate,
    #[error("no private key in the PEM")]
    NoKey,
    #[error("PEM: {0}")]
    Pem(String),
    #[error("certificate: {0}")]
    X509(String),
    #[error("the key does not belong to the certificate: {0}")]
    KeyMismatch(String),
}

/// A usable key and certificate.
#[derive(Debug, Clone)]
pub struct Identity {
    pub cert_pem: String,
    pub key_pem: String,
    pub validity: Validity,
    /// The serial number, hex.
    pub serial: String,
    pub common_name: Option<String>,
    pub dns_names: Vec<String>,
    pub ips: Vec<IpAddr>,
    /// The pair for rustls (serving).
    pub certified: Arc<rustls::sign::CertifiedKey>,
}

impl Identity {
    /// Parses `cert_pem` (leaf first; a chain may follow) and `key_pem`, and checks that they
    /// belong together.
    pub fn parse(cert_pem: &str, key_pem: &str) -> Result<Identity, IdentityError> {
        let chain: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|e| IdentityError::Pem(e.to_string()))?;
        let leaf = chain.first().ok_or(IdentityError::NoCertificate)?;
        let key: PrivateKeyDer<'static> = rustls_pemfile::private_key(&mut key_pem.as_bytes())
            .map_err(|e| IdentityError::Pem(e.to_string()))?
            .ok_or(IdentityError::NoKey)?;
        let provider = rustls::crypto::ring::default_provider();
        let signing = provider
            .key_provider
            .load_private_key(key)
            .map_err(|e| IdentityError::Pem(e.to_string()))?;
        let certified = rustls::sign::CertifiedKey::new(chain.clone(), signing);
        certified
            .keys_match()
            .map_err(|e| IdentityError::KeyMismatch(e.to_string()))?;
        let (_, cert) = x509_parser::parse_x509_certificate(leaf)
            .map_err(|e| IdentityError::X509(e.to_string()))?;
        let ts = |t: x509_parser::time::ASN1Time| {
            Timestamp::from_second(t.timestamp()).map_err(|e| IdentityError::X509(e.to_string()))
        };
        let validity = Validity {
            not_before: ts(cert.validity().not_before)?,
            not_after: ts(cert.validity().not_after)?,
        };
        let common_name = cert
            .subject()
            .iter_common_name()
            .next()
            .and_then(|c| c.as_str().ok().map(String::from));
        let (mut dns_names, mut ips) = (Vec::new(), Vec::new());
        if let Ok(Some(san)) = cert.subject_alternative_name() {
            for name in &san.value.general_names {
                match name {
                    x509_parser::extensions::GeneralName::DNSName(d) => {
                        dns_names.push(d.to_string())
                    }
                    x509_parser::extensions::GeneralName::IPAddress(b) => {
                        if let Ok(v4) = <[u8; 4]>::try_from(*b) {
                            ips.push(IpAddr::from(v4));
                        } else if let Ok(v6) = <[u8; 16]>::try_from(*b) {
                            ips.push(IpAddr::from(v6));
                        }
                    }
                    _ => {}
                }
            }
        }
        dns_names.sort();
        ips.sort();
        Ok(Identity {
            cert_pem: cert_pem.to_string(),
            key_pem: key_pem.to_string(),
            validity,
            serial: cert.raw_serial_as_string().replace(':', ""),
            common_name,
            dns_names,
            ips,
            certified: Arc::new(certified),
        })
    }

    /// Whether it says what `template` asks for: the node's identity and, for a serving
    /// certificate, exactly the wanted names and addresses.
    pub fn matches(&self, template: &Template) -> bool {
        let mut dns = template.dns_names.clone();
        dns.sort();
        self.common_name.as_deref() == Some(template.common_name().as_str())
            && (template.kind == super::Kind::Client
                || (self.dns_names == dns && self.ips == template.ips))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use rcgen::{CertificateParams, DnType, KeyPair, SanType};

    /// A self-signed certificate for `cn` with SANs, valid `secs` from now, and its key.
    pub(crate) fn self_signed(cn: &str, sans: &[&str], secs: i64) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::default();
        p.distinguished_name.push(DnType::CommonName, cn);
        p.subject_alt_names = sans
            .iter()
            .map(|s| match s.parse::<IpAddr>() {
                Ok(ip) => SanType::IpAddress(ip),
                Err(_) => SanType::DnsName(s.to_string().try_into().unwrap()),
            })
            .collect();
        let now = time::OffsetDateTime::now_utc();
        p.not_before = now - time::Duration::seconds(1);
        p.not_after = now + time::Duration::seconds(secs);
        let cert = p.self_signed(&key).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    #[test]
    fn a_pair_is_read_and_checked() {
        let (cert, key) = self_signed("system:node:n1", &["n1", "10.0.0.1"], 120);
        let id = Identity::parse(&cert, &key).unwrap();
        assert_eq!(id.common_name.as_deref(), Some("system:node:n1"));
        assert_eq!(id.dns_names, vec!["n1".to_string()]);
        assert_eq!(id.ips, vec!["10.0.0.1".parse::<IpAddr>().unwrap()]);
        let life = id.validity.not_after.duration_since(id.validity.not_before);
        assert_eq!(life.as_secs(), 121);
        assert!(!id.serial.is_empty());

        let (_, other_key) = self_signed("x", &[], 120);
        assert!(matches!(
            Identity::parse(&cert, &other_key),
            Err(IdentityError::KeyMismatch(_))
        ));
        assert!(matches!(
            Identity::parse("", &key),
            Err(IdentityError::NoCertificate)
        ));
    }

    #[test]
    fn a_certificate_matches_the_template_it_was_asked_with() {
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let (cert, key) = self_signed("system:node:n1", &["n1", "10.0.0.1"], 120);
        let id = Identity::parse(&cert, &key).unwrap();
        assert!(id.matches(&Template::serving("n1", &[ip])));
        assert!(id.matches(&Template::client("n1")));
        assert!(!id.matches(&Template::client("n2")));
        let moved: IpAddr = "10.0.0.9".parse().unwrap();
        assert!(!id.matches(&Template::serving("n1", &[moved])));
        assert!(!id.matches(&Template::serving("n1", &[ip, moved])));
    }
}
