//! Pulls from registries with oci-client: endpoints (mirrors, then the registry) are tried in
//! order; the first that resolves the reference provides every blob. At an endpoint that is the
//! image's own registry the pod's credentials are tried first, in keyring order, then the
//! endpoint's own (anonymous or the registries file's); a mirror only gets its own, so a pod's
//! secret never goes to a host it was not written for.
//!
//! oci-client keeps one login per registry in a client, so each (endpoint, credentials) pair
//! has a client of its own: a token one pod's credentials earned never serves another pod.

use std::io;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use super::attempt::{Asked, Attempt, attempts};
use super::keyring::Credential;
use super::manifest::{self, Descriptor};
use super::reference::ImageReference;
use super::registries::{Credentials, Endpoint};
use super::store::{self, BlobSource, StoredImage};
use super::{ImageService, PULL_CREDENTIALS_LABEL, PullError};

/// Clients kept before the cache starts over (each pod credential makes one per endpoint).
const MAX_CLIENTS: usize = 64;

/// How long a pull may leave its lease behind if the agent dies mid-way.
const LEASE_EXPIRY: Duration = Duration::from_secs(3600);

/// What went wrong at one endpoint.
enum Failure {
    /// The registry answered: no such manifest, or no access.
    Definitive(PullError),
    /// Could not talk to it, or it failed.
    Transient(PullError),
    /// Not the registry's fault (containerd, bad image): stop trying endpoints.
    Fatal(PullError),
}

/// Maps oci-client's errors to ours.
fn classify(reference: &str, err: OciDistributionError, asked: Asked) -> Failure {
    let Asked {
        method,
        with_credentials,
    } = asked;
    let not_found = || {
        Failure::Definitive(PullError::NotFound {
            reference: reference.to_string(),
        })
    };
    let denied = |message: String| {
        let message = if with_credentials {
            message
        } else {
            format!(
                "pull access denied, repository does not exist or may require authorization: {message}"
            )
        };
        Failure::Definitive(PullError::Unauthorized {
            reference: reference.to_string(),
            message,
        })
    };
    let network = |message: String| {
        Failure::Transient(PullError::Network {
            reference: reference.to_string(),
            message,
        })
    };
    match err {
        OciDistributionError::RegistryError { envelope, url } => {
            let codes: Vec<&OciErrorCode> = envelope.errors.iter().map(|e| &e.code).collect();
            let message = format!("{url}: {envelope}");
            if codes.iter().any(|c| {
                matches!(
                    c,
                    OciErrorCode::ManifestUnknown
                        | OciErrorCode::NameUnknown
                        | OciErrorCode::NotFound
                        | OciErrorCode::BlobUnknown
                )
            }) {
                not_found()
            } else if codes
                .iter()
                .any(|c| matches!(c, OciErrorCode::Unauthorized | OciErrorCode::Denied))
            {
                denied(message)
            } else {
                network(message)
            }
        }
        OciDistributionError::ImageManifestNotFoundError(_) => not_found(),
        OciDistributionError::UnauthorizedError { url } => denied(format!(
            "unexpected status from {method} request to {url}: 401 Unauthorized"
        )),
        OciDistributionError::AuthenticationFailure(m) => denied(m),
        OciDistributionError::ServerError { code: 404, .. } => not_found(),
        OciDistributionError::ServerError {
            code: code @ (401 | 403),
            url,
            message,
        } => {
            let status = if code == 401 {
                "401 Unauthorized"
            } else {
                "403 Forbidden"
            };
            denied(format!(
                "unexpected status from {method} request to {url}: {status}: {}",
                message.trim()
            ))
        }
        e @ (OciDistributionError::ServerError { .. }
        | OciDistributionError::RequestError(_)
        | OciDistributionError::IoError(_)) => network(e.to_string()),
        e => Failure::Fatal(PullError::Invalid {
            reference: reference.to_string(),
            message: e.to_string(),
        }),
    }
}

fn client_config(ep: &Endpoint) -> Result<ClientConfig, String> {
    let mut extra_root_certificates = Vec::new();
    if let Some(ca) = &ep.ca_file {
        let data = std::fs::read(ca).map_err(|e| format!("reading {}: {e}", ca.display()))?;
        extra_root_certificates.push(Certificate {
            encoding: CertificateEncoding::Pem,
            data,
        });
    }
    Ok(ClientConfig {
        protocol: if ep.plain_http {
            ClientProtocol::HttpsExcept(vec![ep.host.clone()])
        } else {
            ClientProtocol::Https
        },
        accept_invalid_certificates: ep.insecure_skip_verify,
        extra_root_certificates,
        platform_resolver: Some(Box::new(oci_client::client::linux_amd64_resolver)),
        connect_timeout: Some(Duration::from_secs(10)),
        read_timeout: Some(Duration::from_secs(60)),
        ..Default::default()
    })
}

fn auth(ep: &Endpoint) -> RegistryAuth {
    match &ep.credentials {
        Credentials::Anonymous => RegistryAuth::Anonymous,
        Credentials::Basic { username, password } => {
            RegistryAuth::Basic(username.clone(), password.clone())
        }
        Credentials::Bearer(token) => RegistryAuth::Bearer(token.clone()),
    }
}

fn pod_auth(cred: &Credential) -> RegistryAuth {
    match cred {
        Credential::Basic { username, password } => {
            RegistryAuth::Basic(username.clone(), password.clone())
        }
        Credential::Token(t) => RegistryAuth::Bearer(t.clone()),
    }
}

/// The oci-client login of `attempt` at `ep`.
fn attempt_auth(attempt: &Attempt<'_>, ep: &Endpoint) -> RegistryAuth {
    attempt.pod.map_or_else(|| auth(ep), pod_auth)
}

/// Blobs of one image at one endpoint.
struct RegistrySource {
    client: Client,
    reference: Reference,
    auth: RegistryAuth,
    name: String,
    origin: (String, String),
}

impl RegistrySource {
    fn error(&self, err: OciDistributionError) -> PullError {
        let asked = Asked {
            method: "GET",
            with_credentials: true,
        };
        match classify(&self.name, err, asked) {
            Failure::Definitive(e) | Failure::Transient(e) | Failure::Fatal(e) => e,
        }
    }
}

impl BlobSource for RegistrySource {
    async fn bytes(&self, desc: &Descriptor) -> Result<Vec<u8>, PullError> {
        let mut out = Vec::with_capacity(desc.size.max(0) as usize);
        self.client
            .pull_blob(&self.reference, desc.digest.as_str(), &mut out)
            .await
            .map_err(|e| self.error(e))?;
        Ok(out)
    }

    async fn manifest(&self, desc: &Descriptor) -> Result<Vec<u8>, PullError> {
        let reference = self.reference.clone_with_digest(desc.digest.clone());
        let (bytes, _) = self
            .client
            .pull_manifest_raw(&reference, &self.auth, &manifest::ACCEPTED)
            .await
            .map_err(|e| self.error(e))?;
        Ok(bytes.to_vec())
    }

    async fn stream(
        &self,
        desc: &Descriptor,
    ) -> Result<BoxStream<'static, Result<Bytes, io::Error>>, PullError> {
        let sized = self
            .client
            .pull_blob_stream(&self.reference, desc.digest.as_str())
            .await
            .map_err(|e| self.error(e))?;
        Ok(sized.stream.boxed())
    }

    fn origin(&self) -> Option<(String, String)> {
        Some(self.origin.clone())
    }
}

impl ImageService {
    fn client_for(&self, ep: &Endpoint, attempt: &Attempt<'_>) -> Result<Client, String> {
        let key = format!(
            "{}|{}|{}|{:?}|{}",
            ep.host,
            ep.plain_http,
            ep.insecure_skip_verify,
            ep.ca_file,
            attempt.key()
        );
        let mut clients = self
            .inner
            .clients
            .lock()
            .map_err(|_| "client cache poisoned".to_string())?;
        if let Some(c) = clients.get(&key) {
            return Ok(c.clone());
        }
        if clients.len() >= MAX_CLIENTS {
            clients.clear();
        }
        let client = Client::try_from(client_config(ep)?).map_err(|e| e.to_string())?;
        clients.insert(key, client.clone());
        Ok(client)
    }

    fn connect(
        &self,
        image: &ImageReference,
        ep: &Endpoint,
        attempt: &Attempt<'_>,
    ) -> Result<(Client, Reference), Failure> {
        let client = self.client_for(ep, attempt).map_err(|message| {
            Failure::Transient(PullError::Network {
                reference: image.to_string(),
                message,
            })
        })?;
        let reference = match (&image.digest, &image.tag) {
            (Some(d), _) => {
                Reference::with_digest(ep.host.clone(), image.repository.clone(), d.clone())
            }
            (None, Some(t)) => {
                Reference::with_tag(ep.host.clone(), image.repository.clone(), t.clone())
            }
            (None, None) => Reference::with_tag(
                ep.host.clone(),
                image.repository.clone(),
                super::reference::DEFAULT_TAG.to_string(),
            ),
        };
        Ok((client, reference))
    }

    /// Whether the registry lets `attempt` read the image's manifest now (a HEAD request).
    async fn check_at(
        &self,
        image: &ImageReference,
        ep: &Endpoint,
        attempt: &Attempt<'_>,
    ) -> Result<(), Failure> {
        let (client, reference) = self.connect(image, ep, attempt)?;
        client
            .fetch_manifest_digest(&reference, &attempt_auth(attempt, ep))
            .await
            .map(drop)
            .map_err(|e| classify(&image.to_string(), e, attempt.asked("HEAD", ep)))
    }

    async fn pull_from(
        &self,
        image: &ImageReference,
        ep: &Endpoint,
        attempt: &Attempt<'_>,
    ) -> Result<StoredImage, Failure> {
        let name = image.to_string();
        let (client, reference) = self.connect(image, ep, attempt)?;
        let auth = attempt_auth(attempt, ep);
        let (bytes, digest) = client
            .pull_manifest_raw(&reference, &auth, &manifest::ACCEPTED)
            .await
            .map_err(|e| classify(&name, e, attempt.asked("GET", ep)))?;
        let doc = manifest::parse_document(&bytes, "").map_err(|e| {
            Failure::Fatal(PullError::Invalid {
                reference: name.clone(),
                message: e.to_string(),
            })
        })?;
        let top = Descriptor {
            media_type: manifest::document_media_type(&doc).to_string(),
            digest,
            size: bytes.len() as i64,
            ..Default::default()
        };
        let source = RegistrySource {
            client,
            reference,
            auth,
            name: name.clone(),
            origin: (image.registry.clone(), image.repository.clone()),
        };
        let rt = &self.inner.runtime;
        let lease = rt
            .lease_create(LEASE_EXPIRY)
            .await
            .map_err(|e| Failure::Fatal(e.into()))?;
        // The pod credential that worked is recorded; the endpoint's own access is everyone's.
        let labels = std::collections::BTreeMap::from([(
            PULL_CREDENTIALS_LABEL.to_string(),
            attempt.pod.map(Credential::fingerprint).unwrap_or_default(),
        )]);
        let stored =
            store::store_image(rt, &lease, &source, &name, &top, bytes.to_vec(), &labels).await;
        if let Err(e) = rt.lease_delete(&lease, false).await {
            tracing::debug!(error = %e, "deleting the pull lease failed; it expires by itself");
        }
        stored.map_err(|e| match e {
            e @ (PullError::Network { .. } | PullError::NotFound { .. }) => Failure::Transient(e),
            e => Failure::Fatal(e),
        })
    }
}

/// Tries each endpoint in turn, and at each the attempts of [`attempts`]. The error reported is
/// the first definitive answer (not found, access denied) if any attempt gave one, else the
/// first failure (on an air-gapped host the upstream registry always fails; the mirror's error
/// is the useful one).
pub(super) async fn pull(
    service: &ImageService,
    image: &ImageReference,
    creds: &[Credential],
) -> Result<StoredImage, PullError> {
    let mut definitive = None;
    let mut first = None;
    for ep in service.inner.registries.endpoints(&image.registry) {
        for attempt in attempts(&image.registry, &ep, creds) {
            match service.pull_from(image, &ep, &attempt).await {
                Ok(stored) => return Ok(stored),
                Err(Failure::Fatal(e)) => return Err(e),
                Err(Failure::Definitive(e)) => {
                    tracing::debug!(endpoint = %ep.host, error = %e, "endpoint does not give the image");
                    definitive.get_or_insert(e);
                }
                Err(Failure::Transient(e)) => {
                    tracing::debug!(endpoint = %ep.host, error = %e, "endpoint failed");
                    first.get_or_insert(e);
                }
            }
        }
    }
    Err(definitive.or(first).unwrap_or_else(|| PullError::NotFound {
        reference: image.to_string(),
    }))
}

/// Checks that `creds` (or the endpoints' own access) may read the image at its registry now,
/// in the order of [`pull`]; returns the pod credential that worked, `None` when no pod
/// credential was needed.
pub(super) async fn verify<'a>(
    service: &ImageService,
    image: &ImageReference,
    creds: &'a [Credential],
) -> Result<Option<&'a Credential>, PullError> {
    let mut definitive = None;
    let mut first = None;
    for ep in service.inner.registries.endpoints(&image.registry) {
        for attempt in attempts(&image.registry, &ep, creds) {
            match service.check_at(image, &ep, &attempt).await {
                Ok(()) => return Ok(attempt.pod),
                Err(Failure::Definitive(e)) => {
                    definitive.get_or_insert(e);
                }
                Err(Failure::Transient(e) | Failure::Fatal(e)) => {
                    first.get_or_insert(e);
                }
            }
        }
    }
    Err(definitive.or(first).unwrap_or_else(|| PullError::NotFound {
        reference: image.to_string(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(err: OciDistributionError, method: &'static str, with_credentials: bool) -> String {
        let asked = Asked {
            method,
            with_credentials,
        };
        match classify("r.example/app:1", err, asked) {
            Failure::Definitive(e) | Failure::Transient(e) | Failure::Fatal(e) => e.to_string(),
        }
    }

    #[test]
    fn a_refusal_reads_as_containerds_with_the_registrys_status() {
        let url = "https://r.example/v2/app/manifests/1".to_string();
        let unauthorized = || OciDistributionError::UnauthorizedError { url: url.clone() };
        let anonymous = message(unauthorized(), "GET", false);
        assert!(
            anonymous.ends_with(
                "failed to resolve reference \"r.example/app:1\": pull access denied, repository does not exist or may require authorization: unexpected status from GET request to https://r.example/v2/app/manifests/1: 401 Unauthorized"
            ),
            "{anonymous}"
        );
        let refused = message(unauthorized(), "HEAD", true);
        assert!(
            refused.ends_with(
                "failed to resolve reference \"r.example/app:1\": unexpected status from HEAD request to https://r.example/v2/app/manifests/1: 401 Unauthorized"
            ),
            "{refused}"
        );
        let forbidden = message(
            OciDistributionError::ServerError {
                code: 403,
                url: url.clone(),
                message: "denied\n".into(),
            },
            "GET",
            true,
        );
        assert!(forbidden.ends_with("403 Forbidden: denied"), "{forbidden}");
    }

    #[test]
    fn a_refusal_is_definitive_so_the_next_login_is_tried() {
        let asked = Asked {
            method: "GET",
            with_credentials: true,
        };
        let err = OciDistributionError::UnauthorizedError { url: "u".into() };
        assert!(matches!(
            classify("r/app:1", err, asked),
            Failure::Definitive(PullError::Unauthorized { .. })
        ));
    }
}
