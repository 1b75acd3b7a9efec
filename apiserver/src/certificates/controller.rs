//! The CSR controller: per CertificateSigningRequest, one step a pass — auto-approve it
//! ([`approver`], upstream's csrapproving) or, once approved, sign it with the cluster CA
//! ([`signer`], upstream's csrsigning) into `status.certificate`, or mark it `Failed`
//! (`SignerValidationFailure`) when it breaks its signer's rules. Writes go through the
//! `approval` and `status` subresources, so the registry's CSR strategy and validation apply.

use super::admission::{bytes_at, request_of};
use super::approver::{self, Approval, NodeNames, string_at, strings};
use super::signer::{self, CaSigner, Verdict};
use crate::rbac::Authorizer;
use crate::rbac::rules::{Attributes, User};
use berth_registry::{Part, Registry, RegistryError, WriteOptions};
use berth_runtime::informer::{Informer, ObjectKey};
use berth_runtime::{Context, Controller, Reconciler};
use berth_shared::reconcile::{ErrorPolicy, Outcome, Retry};
use berth_shared::resource::{CERTIFICATE_SIGNING_REQUESTS, NODES};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The signers' settings.
#[derive(Clone)]
pub struct Config {
    pub signer: Arc<CaSigner>,
    /// The longest certificate a signer issues (`--certificate-validity`).
    pub max_validity: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum CsrError {
    #[error(transparent)]
    Api(#[from] RegistryError),
    #[error(transparent)]
    Sign(#[from] signer::SignError),
}

impl ErrorPolicy for CsrError {
    fn retry(&self) -> Retry {
        match self {
            CsrError::Api(e) => e.retry(),
            CsrError::Sign(_) => Retry::Never,
        }
    }
}

struct Csrs {
    registry: Registry,
    csrs: Arc<Informer>,
    nodes: Arc<Informer>,
    authorizer: Authorizer,
    config: Config,
}

fn has(csr: &Value, t: &str) -> bool {
    csr.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == t && c["status"] == "True"))
}

impl Csrs {
    /// The SubjectAccessReview of the requestor on `certificatesigningrequests/<sub>`.
    fn may(&self, csr: &Value, sub: &str) -> bool {
        let user = User {
            name: string_at(csr, "/spec/username").to_string(),
            groups: strings(csr, "/spec/groups"),
        };
        let attrs = Attributes::Resource {
            verb: "create".into(),
            group: "certificates.k8s.io".into(),
            resource: "certificatesigningrequests".into(),
            subresource: sub.into(),
            namespace: String::new(),
            name: String::new(),
        };
        self.authorizer.allowed(&user, &attrs).is_some()
    }

    fn node(&self, name: &str) -> Option<NodeNames> {
        let key = ObjectKey::new(None, name);
        let node = self.nodes.get_key(&key)?.value().ok()?;
        Some(NodeNames::of(&node))
    }

    fn add_condition(&self, name: &str, part: Part, condition: Value) -> Result<(), CsrError> {
        let result = self.registry.update_with(
            CERTIFICATE_SIGNING_REQUESTS,
            None,
            name,
            part,
            &WriteOptions::default(),
            |mut cur| {
                let t = condition["type"].clone();
                if !cur.get("status").is_some_and(Value::is_object) {
                    cur["status"] = json!({});
                }
                let conditions = cur["status"]["conditions"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                if conditions.iter().any(|c| c["type"] == t) {
                    return Ok::<_, RegistryError>(cur);
                }
                let mut conditions = conditions;
                conditions.push(condition.clone());
                cur["status"]["conditions"] = Value::Array(conditions);
                Ok(cur)
            },
        );
        match result {
            Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    fn issue(&self, name: &str, certificate: &str) -> Result<(), CsrError> {
        use base64::Engine;
        let encoded = base64::engine::general_purpose::STANDARD.encode(certificate);
        let result = self.registry.update_with(
            CERTIFICATE_SIGNING_REQUESTS,
            None,
            name,
            Part::Status,
            &WriteOptions::default(),
            |mut cur| {
                if !cur.get("status").is_some_and(Value::is_object) {
                    cur["status"] = json!({});
                }
                if bytes_at(&cur, "/status/certificate").is_empty() {
                    cur["status"]["certificate"] = json!(encoded);
                }
                Ok::<_, RegistryError>(cur)
            },
        );
        match result {
            Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

impl Reconciler for Csrs {
    type Key = ObjectKey;
    type Error = CsrError;

    fn reconcile(&self, key: &ObjectKey) -> Result<Outcome, CsrError> {
        self.csrs.reconcile_cached(key, |obj| {
            let csr = obj.value().map_err(RegistryError::from)?;
            // Admission parsed it at create; a stored request that does not parse is no one's.
            let Ok(request) = request_of(&csr) else {
                return Ok(Outcome::Done);
            };
            match approver::decide(&csr, &request, |s| self.may(&csr, s), |n| self.node(n)) {
                Approval::Approve(message) => {
                    tracing::info!(csr = key.name(), "{message}");
                    let condition = json!({"type": "Approved", "status": "True",
                        "reason": approver::REASON, "message": message});
                    self.add_condition(key.name(), Part::Approval, condition)?;
                    // The write brings the request back, approved, for signing.
                    return Ok(Outcome::Done);
                }
                Approval::WaitForNode(_) => {
                    return Ok(Outcome::RequeueAfter(Duration::from_secs(5)));
                }
                Approval::Leave => {}
            }
            if !has(&csr, "Approved")
                || has(&csr, "Failed")
                || !bytes_at(&csr, "/status/certificate").is_empty()
            {
                return Ok(Outcome::Done);
            }
            let signer_name = string_at(&csr, "/spec/signerName");
            let usages = strings(&csr, "/spec/usages");
            match signer::check(signer_name, &request, &usages) {
                Verdict::NotOurs => Ok(Outcome::Done),
                Verdict::Refuse(message) => {
                    tracing::info!(csr = key.name(), signer = signer_name, "refused: {message}");
                    let condition = json!({"type": "Failed", "status": "True",
                        "reason": "SignerValidationFailure", "message": message});
                    self.add_condition(key.name(), Part::Status, condition)?;
                    Ok(Outcome::Done)
                }
                Verdict::Sign => {
                    let lifetime = signer::lifetime(
                        csr.pointer("/spec/expirationSeconds")
                            .and_then(Value::as_i64),
                        self.config.max_validity,
                    );
                    let pem =
                        String::from_utf8_lossy(&bytes_at(&csr, "/spec/request")).into_owned();
                    let cert = self.config.signer.sign(
                        &pem,
                        &request,
                        &usages,
                        lifetime,
                        jiff::Timestamp::now(),
                    )?;
                    tracing::info!(csr = key.name(), signer = signer_name, ?lifetime, "signed");
                    self.issue(key.name(), &cert)?;
                    Ok(Outcome::Done)
                }
            }
        })
    }
}

/// Runs the CSR approver and signers until `shutdown`.
pub async fn run(
    ctx: Context,
    authorizer: Authorizer,
    config: Config,
    shutdown: CancellationToken,
) {
    let csrs = Arc::new(Csrs {
        registry: ctx.registry.clone(),
        csrs: ctx.informer(CERTIFICATE_SIGNING_REQUESTS),
        nodes: ctx.informer(NODES),
        authorizer,
        config,
    });
    Controller::new("csr", &ctx, CERTIFICATE_SIGNING_REQUESTS)
        .workers(2)
        .run(csrs, shutdown)
        .await;
}
