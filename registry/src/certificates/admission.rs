//! CertificateSigningRequest admission in the registry's write path, for what needs X.509 or
//! the requester (the rest is shared's `admission::certificates`):
//! - on create, `spec.username`, `uid`, `groups` and `extra` come from the requester, whatever
//!   the body says (upstream's `PrepareForCreate`);
//! - `spec.request` must be a PEM certificate request whose signature verifies;
//! - `kubernetes.io/kube-apiserver-client` may not ask for `system:masters` (upstream's
//!   CertificateSubjectRestriction);
//! - a node may request certificates only for its own identity: a node credential
//!   (`system:node:A`) asking for any subject CN but `system:node:A` is refused with 403 here
//!   (Berth's choice: upstream leaves such a request pending for an administrator);
//! - on updates, an issued `status.certificate` must be PEM `CERTIFICATE` blocks;
//! - writes to `/approval` need `approve` on `signers` for the request's signer name (or its
//!   domain's `*`), as upstream's CertificateApproval plugin (the API server's
//!   `certificates::approval`, which has the authorizer).

use super::APISERVER_CLIENT;
use super::request::{self, Request};
use crate::RegistryError;
use crate::identity::Identity;
use base64::Engine;
use berth_shared::admission::{FieldError, FieldErrorType};
use berth_shared::resource::CERTIFICATE_SIGNING_REQUESTS;
use serde_json::{Value, json};

fn forbidden(name: &str, reason: &str) -> RegistryError {
    RegistryError::Forbidden(format!(
        "certificatesigningrequests.certificates.k8s.io \"{name}\" is forbidden: {reason}"
    ))
}

fn invalid(name: &str, field: &str, detail: String) -> RegistryError {
    RegistryError::invalid(
        CERTIFICATE_SIGNING_REQUESTS,
        name,
        vec![FieldError {
            error_type: FieldErrorType::Invalid,
            field: field.to_string(),
            bad_value: None,
            detail,
        }],
    )
}

/// The bytes of a base64 field (`spec.request`, `status.certificate`).
pub fn bytes_at(obj: &Value, pointer: &str) -> Vec<u8> {
    obj.pointer(pointer)
        .and_then(Value::as_str)
        .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
        .unwrap_or_default()
}

/// The parsed `spec.request` of a stored or incoming CSR.
pub fn request_of(obj: &Value) -> Result<Request, request::RequestError> {
    request::parse(&bytes_at(obj, "/spec/request"))
}

/// The node-identity rule: `Err(reason)` when a node asks for someone else's identity.
pub fn node_may_request(requestor: &Identity, r: &Request) -> Result<(), String> {
    match requestor.node() {
        Some(node) if r.common_name != requestor.user => Err(format!(
            "node \"{node}\" may only request certificates for its own identity \"{}\", not \"{}\"",
            requestor.user, r.common_name
        )),
        _ => Ok(()),
    }
}

/// The superusers' group (RBAC's `system:masters`; the registry sits below RBAC).
const MASTERS: &str = "system:masters";

/// Create: the requester's identity, the request's X.509 checks and the subject rules.
pub fn admit_create(
    name: &str,
    obj: &mut Value,
    requestor: Option<&Identity>,
) -> Result<(), RegistryError> {
    let who = requestor.cloned().unwrap_or_default();
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        for key in ["username", "uid", "groups", "extra"] {
            spec.remove(key);
        }
        if !who.user.is_empty() {
            spec.insert("username".into(), json!(who.user));
        }
        if !who.uid.is_empty() {
            spec.insert("uid".into(), json!(who.uid));
        }
        if !who.groups.is_empty() {
            spec.insert("groups".into(), json!(who.groups));
        }
        if !who.extra.is_empty() {
            spec.insert("extra".into(), json!(who.extra));
        }
    }
    let r = request_of(obj).map_err(|e| invalid(name, "spec.request", e.to_string()))?;
    let signer = obj
        .pointer("/spec/signerName")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if signer == APISERVER_CLIENT && r.organizations.iter().any(|o| o == MASTERS) {
        return Err(forbidden(
            name,
            "use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed",
        ));
    }
    node_may_request(&who, &r).map_err(|reason| forbidden(name, &reason))
}

/// Upstream's `validateCertificate`: empty, or PEM blocks that are all certificates.
fn check_certificate(pem: &[u8]) -> Result<(), String> {
    if pem.is_empty() {
        return Ok(());
    }
    let mut rest = pem;
    let mut blocks = 0;
    while let Ok((left, block)) = x509_parser::pem::parse_x509_pem(rest) {
        if block.label != "CERTIFICATE" {
            return Err(format!(
                "only CERTIFICATE PEM blocks are allowed, found \"{}\"",
                block.label
            ));
        }
        block.parse_x509().map_err(|e| e.to_string())?;
        blocks += 1;
        rest = left;
    }
    if blocks == 0 {
        return Err("must contain at least one CERTIFICATE PEM block".into());
    }
    Ok(())
}

/// Update: what is issued must be a certificate.
pub fn admit_update(name: &str, obj: &Value, _old: &Value) -> Result<(), RegistryError> {
    check_certificate(&bytes_at(obj, "/status/certificate"))
        .map_err(|detail| invalid(name, "status.certificate", detail))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certificates::request::make;

    fn csr(pem: &str, signer: &str) -> Value {
        json!({"metadata": {"name": "c"}, "spec": {
            "request": base64::engine::general_purpose::STANDARD.encode(pem),
            "signerName": signer, "usages": ["client auth"],
            "username": "forged", "groups": ["system:masters"]}})
    }

    fn node(name: &str) -> Identity {
        Identity {
            user: format!("system:node:{name}"),
            groups: vec!["system:nodes".into(), "system:authenticated".into()],
            ..Identity::default()
        }
    }

    #[test]
    fn the_requestor_is_recorded_whatever_the_body_says() {
        let (pem, _) = make("system:node:a", &["system:nodes"], &[]);
        let mut obj = csr(&pem, super::super::KUBELET_CLIENT);
        admit_create("c", &mut obj, Some(&node("a"))).unwrap();
        assert_eq!(obj["spec"]["username"], "system:node:a");
        assert_eq!(
            obj["spec"]["groups"],
            json!(["system:nodes", "system:authenticated"])
        );
    }

    #[test]
    fn a_node_may_not_ask_for_another_node_s_identity() {
        let (pem, _) = make("system:node:b", &["system:nodes"], &[]);
        let mut obj = csr(&pem, super::super::KUBELET_CLIENT);
        let err = admit_create("c", &mut obj, Some(&node("a"))).unwrap_err();
        assert!(
            matches!(&err, RegistryError::Forbidden(m) if m.contains("node \"a\" may only request certificates for its own identity \"system:node:a\", not \"system:node:b\"")),
            "{err}"
        );
        // An administrator may ask for it (and approve it by hand).
        let admin = Identity {
            user: "admin".into(),
            groups: vec!["system:masters".into()],
            ..Identity::default()
        };
        let mut obj = csr(&pem, super::super::KUBELET_CLIENT);
        admit_create("c", &mut obj, Some(&admin)).unwrap();
    }

    #[test]
    fn a_broken_request_or_a_masters_client_is_refused() {
        let mut obj = csr("not pem", APISERVER_CLIENT);
        let err = admit_create("c", &mut obj, None).unwrap_err();
        assert!(
            err.to_string().contains(
                "spec.request: Invalid value: PEM block type must be CERTIFICATE REQUEST"
            ),
            "{err}"
        );
        let (pem, _) = make("root", &["system:masters"], &[]);
        let mut obj = csr(&pem, APISERVER_CLIENT);
        let err = admit_create("c", &mut obj, None).unwrap_err();
        assert!(err.to_string().contains("use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed"), "{err}");
    }

    #[test]
    fn an_issued_certificate_must_be_certificate_blocks() {
        assert!(check_certificate(b"").is_ok());
        let ca = rcgen::generate_simple_self_signed(vec!["ca".into()]).unwrap();
        assert!(check_certificate(ca.cert.pem().as_bytes()).is_ok());
        assert_eq!(
            check_certificate(b"junk"),
            Err("must contain at least one CERTIFICATE PEM block".into())
        );
        let (req, _) = make("x", &[], &[]);
        assert!(
            check_certificate(req.as_bytes())
                .unwrap_err()
                .contains("only CERTIFICATE PEM blocks")
        );
    }
}
