//! CertificateSigningRequest admission (certificates.k8s.io/v1): upstream's
//! `ValidateCertificateSigningRequestCreate` / `…Update` for what needs no X.509 parsing —
//! signer name syntax, usages, `expirationSeconds`, the Approved/Denied/Failed conditions
//! (True only, each once, Approved and Denied exclusive, never removed) and the issued
//! certificate (never changed once set). The request's PEM and signature are checked by the
//! controller's registry, which parses X.509.

use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition,
};

use super::field::{FieldError, Path};
use super::meta::{validate_object_meta, validate_object_meta_update};
use super::names::{dns1123_label, dns1123_subdomain};

/// Upstream's `allValidUsages`, sorted as `sets.List` prints them.
pub const VALID_USAGES: &[&str] = &[
    "any",
    "cert sign",
    "client auth",
    "code signing",
    "content commitment",
    "crl sign",
    "data encipherment",
    "decipher only",
    "digital signature",
    "email protection",
    "encipher only",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "key agreement",
    "key encipherment",
    "microsoft sgc",
    "netscape sgc",
    "ocsp signing",
    "s/mime",
    "server auth",
    "signing",
    "timestamping",
];

/// The signer name v1 refuses (`kubernetes.io/legacy-unknown`).
const LEGACY_UNKNOWN: &str = "kubernetes.io/legacy-unknown";
const STATUSES: &[&str] = &["False", "True", "Unknown"];

/// Upstream `ValidateSignerName`.
fn validate_signer_name(path: &Path, signer: &str) -> Vec<FieldError> {
    if signer.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    if signer == LEGACY_UNKNOWN {
        return vec![FieldError::invalid(
            path,
            signer,
            "the legacy signerName is not allowed via this API version",
        )];
    }
    let Some((domain, name)) = signer.split_once('/').filter(|(_, n)| !n.contains('/')) else {
        return vec![FieldError::invalid(
            path,
            signer,
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        )];
    };
    let mut errs = Vec::new();
    if domain.len() > 253 {
        errs.push(FieldError::too_long(path, 253));
    }
    errs.extend(first_bad_label(path, domain, dns1123_label));
    if domain.split('.').count() < 2 {
        errs.push(FieldError::invalid(
            path,
            domain,
            "should be a domain with at least two segments separated by dots",
        ));
    }
    errs.extend(first_bad_label(path, name, dns1123_subdomain));
    errs
}

/// The messages `check` gives for the first of `value`'s dot-separated labels it finds fault
/// with, each an `Invalid` error naming that label (upstream stops at the first bad label).
fn first_bad_label(path: &Path, value: &str, check: fn(&str) -> Vec<String>) -> Vec<FieldError> {
    value
        .split('.')
        .map(|label| (label, check(label)))
        .find(|(_, msgs)| !msgs.is_empty())
        .map(|(label, msgs)| {
            msgs.into_iter()
                .map(|m| {
                    FieldError::invalid(path, value, format!("validating label \"{label}\": {m}"))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn validate_conditions(conditions: &[CertificateSigningRequestCondition]) -> Vec<FieldError> {
    let path = Path::new("status").child("conditions");
    let mut errs = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    let (mut approved, mut denied) = (false, false);
    for (i, c) in conditions.iter().enumerate() {
        let at = path.index(i);
        if c.type_.is_empty() {
            errs.push(FieldError::required(&at.child("type"), ""));
        }
        if !STATUSES.contains(&c.status.as_str()) {
            errs.push(FieldError::not_supported(
                &at.child("status"),
                c.status.as_str(),
                STATUSES,
            ));
        }
        let only_true = match c.type_.as_str() {
            "Approved" => {
                approved = true;
                Some("Approved condition may only be set to True")
            }
            "Denied" => {
                denied = true;
                Some("Denied condition may only be set to True")
            }
            "Failed" => Some("Failed condition may only be set to True"),
            _ => None,
        };
        if let Some(detail) = only_true
            && c.status != "True"
        {
            errs.push(FieldError::invalid(
                &at.child("status"),
                c.status.as_str(),
                detail,
            ));
        }
        if seen.contains(&c.type_.as_str()) {
            errs.push(FieldError::duplicate(&at.child("type"), c.type_.as_str()));
        }
        seen.push(&c.type_);
    }
    if approved && denied {
        errs.push(FieldError::invalid(
            &path,
            serde_json::to_value(conditions).unwrap_or_default(),
            "Approved and Denied conditions are mutually exclusive",
        ));
    }
    errs
}

/// Upstream `validateCertificateSigningRequest` less the request's X.509 checks.
fn validate(csr: &CertificateSigningRequest) -> Vec<FieldError> {
    let spec = Path::new("spec");
    let mut errs = Vec::new();
    if csr.spec.request.0.is_empty() {
        errs.push(FieldError::invalid(
            &spec.child("request"),
            "",
            "PEM block type must be CERTIFICATE REQUEST",
        ));
    }
    let usages = csr.spec.usages.as_deref().unwrap_or_default();
    if usages.is_empty() {
        errs.push(FieldError::required(
            &spec.child("usages"),
            "usages must be provided",
        ));
    }
    for (i, usage) in usages.iter().enumerate() {
        if !VALID_USAGES.contains(&usage.as_str()) {
            errs.push(FieldError::not_supported(
                &spec.child("usages").index(i),
                usage.as_str(),
                VALID_USAGES,
            ));
        }
    }
    for (i, usage) in usages.iter().enumerate() {
        if usages[..i].contains(usage) {
            errs.push(FieldError::duplicate(
                &spec.child("usages").index(i),
                usage.as_str(),
            ));
        }
    }
    errs.extend(validate_signer_name(
        &spec.child("signerName"),
        &csr.spec.signer_name,
    ));
    if let Some(seconds) = csr.spec.expiration_seconds
        && seconds < 600
    {
        errs.push(FieldError::invalid(
            &spec.child("expirationSeconds"),
            seconds,
            "may not specify a duration less than 600 seconds (10 minutes)",
        ));
    }
    if let Some(status) = &csr.status {
        errs.extend(validate_conditions(
            status.conditions.as_deref().unwrap_or_default(),
        ));
    }
    errs
}

fn count(csr: &CertificateSigningRequest, type_: &str) -> usize {
    csr.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .map_or(0, |c| c.iter().filter(|c| c.type_ == type_).count())
}

fn certificate(csr: &CertificateSigningRequest) -> &[u8] {
    csr.status
        .as_ref()
        .and_then(|s| s.certificate.as_ref())
        .map_or(&[][..], |c| c.0.as_slice())
}

pub(crate) fn validate_csr(
    csr: &CertificateSigningRequest,
    old: Option<&CertificateSigningRequest>,
) -> Vec<FieldError> {
    let Some(old) = old else {
        let mut errs = validate_object_meta(&csr.metadata, "CertificateSigningRequest", false);
        errs.extend(validate(csr));
        return errs;
    };
    let mut errs = validate(csr);
    for t in ["Approved", "Denied", "Failed"] {
        if count(csr, t) < count(old, t) {
            errs.push(FieldError::forbidden(
                &Path::new("status").child("conditions"),
                format!("updates may not remove a condition of type \"{t}\""),
            ));
        }
    }
    if !certificate(old).is_empty() && certificate(csr) != certificate(old) {
        errs.push(FieldError::invalid(
            &Path::new("status").child("certificate"),
            "<certificate data>",
            "updates may not modify existing certificate content",
        ));
    }
    errs.extend(validate_object_meta_update(&csr.metadata, &old.metadata));
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn csr(spec: serde_json::Value, status: serde_json::Value) -> CertificateSigningRequest {
        serde_json::from_value(json!({"metadata": {"name": "c"}, "spec": spec, "status": status}))
            .unwrap()
    }

    fn messages(errs: Vec<FieldError>) -> Vec<String> {
        errs.iter().map(FieldError::message).collect()
    }

    const REQ: &str = "LS0tLS1CRUdJTg==";

    #[test]
    fn a_request_needs_usages_a_qualified_signer_and_ten_minutes_at_least() {
        let c = csr(
            json!({"request": REQ, "signerName": "example", "usages": ["client auth", "bogus", "client auth"],
                   "expirationSeconds": 60}),
            json!({}),
        );
        let m = messages(validate_csr(&c, None));
        assert!(
            m.iter()
                .any(|m| m.starts_with("spec.usages[1]: Unsupported value: \"bogus\"")),
            "{m:?}"
        );
        assert!(
            m.contains(&"spec.usages[2]: Duplicate value: \"client auth\"".to_string()),
            "{m:?}"
        );
        assert!(m.contains(&"spec.signerName: Invalid value: \"example\": must be a fully qualified domain and path of the form 'example.com/signer-name'".to_string()), "{m:?}");
        assert!(m.contains(&"spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 600 seconds (10 minutes)".to_string()), "{m:?}");
        let none = csr(
            json!({"request": REQ, "signerName": "", "usages": []}),
            json!({}),
        );
        let m = messages(validate_csr(&none, None));
        assert!(
            m.contains(&"spec.usages: Required value: usages must be provided".to_string()),
            "{m:?}"
        );
        assert!(
            m.contains(&"spec.signerName: Required value".to_string()),
            "{m:?}"
        );
        let single = csr(
            json!({"request": REQ, "signerName": "example/x", "usages": ["client auth"]}),
            json!({}),
        );
        let m = messages(validate_csr(&single, None));
        assert_eq!(
            m,
            vec![
                "spec.signerName: Invalid value: \"example\": should be a domain with at least two segments separated by dots"
            ]
        );
        let good = csr(
            json!({"request": REQ, "signerName": "kubernetes.io/kube-apiserver-client", "usages": ["client auth"]}),
            json!({}),
        );
        assert!(validate_csr(&good, None).is_empty());
    }

    #[test]
    fn approval_conditions_are_true_exclusive_and_never_removed() {
        let spec = json!({"request": REQ, "signerName": "kubernetes.io/kube-apiserver-client", "usages": ["client auth"]});
        let both = csr(
            spec.clone(),
            json!({"conditions": [{"type": "Approved", "status": "True"}, {"type": "Denied", "status": "True"}]}),
        );
        let m = messages(validate_csr(&both, None));
        assert!(
            m.iter()
                .any(|m| m.ends_with("Approved and Denied conditions are mutually exclusive")),
            "{m:?}"
        );
        let falsy = csr(
            spec.clone(),
            json!({"conditions": [{"type": "Approved", "status": "False"}]}),
        );
        assert_eq!(
            messages(validate_csr(&falsy, None)),
            vec![
                "status.conditions[0].status: Invalid value: \"False\": Approved condition may only be set to True"
            ]
        );
        let approved = csr(
            spec.clone(),
            json!({"conditions": [{"type": "Approved", "status": "True"}], "certificate": "Y2VydA=="}),
        );
        let removed = csr(spec.clone(), json!({"conditions": []}));
        let m = messages(validate_csr(&removed, Some(&approved)));
        assert!(m.contains(&"status.conditions: Forbidden: updates may not remove a condition of type \"Approved\"".to_string()), "{m:?}");
        assert!(m.contains(&"status.certificate: Invalid value: \"<certificate data>\": updates may not modify existing certificate content".to_string()), "{m:?}");
        assert!(validate_csr(&approved, Some(&approved)).is_empty());
    }
}
