//! The API server's side of CSR admission: the `approve` check on `signers` for writes to
//! `/approval` (upstream's CertificateApproval plugin), which needs
//! the authorizer and so cannot sit in the registry.

use super::approver::string_at;
use crate::api::authn::Identity;
use crate::rbac::Authorizer;
use crate::rbac::rules::{Attributes, User};
use berth_registry::{RegistryError, WriteGuard};
use serde_json::Value;

fn forbidden(name: &str, reason: &str) -> RegistryError {
    RegistryError::Forbidden(format!(
        "certificatesigningrequests.certificates.k8s.io \"{name}\" is forbidden: {reason}"
    ))
}

/// The `approve` check on `signers` for writes to `/approval`.
pub fn approval_guard(authorizer: &Authorizer, id: &Identity) -> WriteGuard {
    let (authorizer, user) = (authorizer.clone(), User::from(id));
    WriteGuard(std::sync::Arc::new(move |_, obj: &Value| {
        let signer = string_at(obj, "/spec/signerName");
        let wildcard = signer
            .split_once('/')
            .map(|(domain, _)| format!("{domain}/*"))
            .unwrap_or_default();
        let may = |name: &str| {
            let attrs = Attributes::Resource {
                verb: "approve".into(),
                group: "certificates.k8s.io".into(),
                resource: "signers".into(),
                subresource: String::new(),
                namespace: String::new(),
                name: name.to_string(),
            };
            authorizer.allowed(&user, &attrs).is_some()
        };
        if may(signer) || may(&wildcard) {
            return Ok(());
        }
        let name = string_at(obj, "/metadata/name");
        Err(forbidden(
            name,
            &format!("user not permitted to approve requests with signerName \"{signer}\""),
        ))
    }))
}
