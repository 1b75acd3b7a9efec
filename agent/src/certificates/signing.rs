//! Getting a certificate signed through the `certificates.k8s.io/v1` API, as client-go's
//! certificate manager does: create a CertificateSigningRequest, then watch it (by name)
//! until it carries a certificate or a Denied/Failed condition, or the wait times out.

use super::identity::{Identity, IdentityError};
use super::request::{Outcome, Template, outcome};
use berth_api::client::{Client, ClientError, ListParams, WatchEvent};
use berth_api::resource::CERTIFICATE_SIGNING_REQUESTS;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum SigningError {
    #[error("making the key and request: {0}")]
    Request(#[from] rcgen::Error),
    #[error("certificate signing request: {0}")]
    Api(#[from] ClientError),
    #[error("certificate signing request {name} was denied ({reason})")]
    Denied { name: String, reason: String },
    #[error("certificate signing request {name} failed ({reason})")]
    Failed { name: String, reason: String },
    #[error("timed out after {waited:?} waiting for certificate signing request {name}")]
    TimedOut { name: String, waited: Duration },
    #[error("the issued certificate is unusable: {0}")]
    Issued(#[from] IdentityError),
    #[error("the issued certificate does not name what was asked for")]
    WrongCertificate,
}

impl SigningError {
    /// Whether asking again may help (every failure of a renewal is retried with back-off;
    /// this only tells the log how worried to be).
    pub fn is_transient(&self) -> bool {
        match self {
            SigningError::Api(e) => e.is_transient(),
            SigningError::TimedOut { .. } => true,
            _ => false,
        }
    }
}

/// Asks for a certificate per `template` and waits up to `wait` for it; returns the new key
/// with its certificate, checked against the template.
pub async fn request(
    client: &Client,
    template: &Template,
    wait: Duration,
) -> Result<(String, Identity), SigningError> {
    let kr = template.generate()?;
    let created: CertificateSigningRequest = client
        .create(
            CERTIFICATE_SIGNING_REQUESTS,
            None,
            &template.object(&kr.csr_pem),
        )
        .await?;
    let name = created.metadata.name.clone().unwrap_or_default();
    tracing::info!(csr = %name, signer = template.kind.signer(), "certificate signing request created");
    let pem = match tokio::time::timeout(wait, wait_for_certificate(client, &name, created)).await {
        Ok(r) => r?,
        Err(_) => {
            return Err(SigningError::TimedOut { name, waited: wait });
        }
    };
    let id = Identity::parse(&pem, &kr.key_pem)?;
    if !id.matches(template) {
        return Err(SigningError::WrongCertificate);
    }
    Ok((name, id))
}

/// Follows the request named `name` (created as `created`) until it is decided.
async fn wait_for_certificate(
    client: &Client,
    name: &str,
    created: CertificateSigningRequest,
) -> Result<String, SigningError> {
    let params = ListParams {
        field_selector: Some(format!("metadata.name={name}")),
        ..Default::default()
    };
    let mut last = created;
    loop {
        if let Some(pem) = decided(name, &last)? {
            return Ok(pem);
        }
        let rv = last.metadata.resource_version.clone().unwrap_or_default();
        let mut stream = client
            .watch::<CertificateSigningRequest>(CERTIFICATE_SIGNING_REQUESTS, None, &params, &rv)
            .await?;
        loop {
            match stream.next().await {
                Some(Ok(WatchEvent::Added(csr) | WatchEvent::Modified(csr))) => {
                    if let Some(pem) = decided(name, &csr)? {
                        return Ok(pem);
                    }
                }
                Some(Ok(WatchEvent::Deleted(_))) => {
                    return Err(SigningError::Failed {
                        name: name.to_string(),
                        reason: "deleted before it was signed".to_string(),
                    });
                }
                Some(Ok(WatchEvent::Bookmark(_))) => {}
                Some(Err(e)) if !e.is_transient() && !e.is_gone() => return Err(e.into()),
                // The stream ended or broke: read the request again and watch from there.
                Some(Err(_)) | None => break,
            }
        }
        match client
            .get::<CertificateSigningRequest>(CERTIFICATE_SIGNING_REQUESTS, None, name)
            .await?
        {
            Some(csr) => last = csr,
            None => {
                return Err(SigningError::Failed {
                    name: name.to_string(),
                    reason: "deleted before it was signed".to_string(),
                });
            }
        }
    }
}

/// The certificate, once `csr` has one; an error once it was denied or failed.
fn decided(name: &str, csr: &CertificateSigningRequest) -> Result<Option<String>, SigningError> {
    match outcome(csr) {
        Outcome::Pending => Ok(None),
        Outcome::Issued(pem) => Ok(Some(pem)),
        Outcome::Denied(reason) => Err(SigningError::Denied {
            name: name.to_string(),
            reason,
        }),
        Outcome::Failed(reason) => Err(SigningError::Failed {
            name: name.to_string(),
            reason,
        }),
    }
}
