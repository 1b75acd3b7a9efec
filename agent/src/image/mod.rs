//! Images from OCI registries (or files) into containerd: the agent's image service.
//!
//! containerd 1.6 has no Transfer service, so the agent pulls itself: oci-client resolves the
//! reference through the configured mirrors (k3s `registries.yaml`), fetches the manifest
//! (an index resolves to linux/amd64), config and layers, and `store` writes them into
//! containerd's content store with GC labels, unpacks the layers into snapshots named by chain
//! id and creates the image record — all under a lease removed at the end. Imports of OCI
//! layouts and `docker save` tarballs go through the same `store`.
//!
//! Pull secrets: a pod's credentials ([`Keyring`]) are tried in order before the endpoint's own
//! (anonymous, or the registries file's). An image pulled with a pod's credentials carries
//! their fingerprints in the [`PULL_CREDENTIALS_LABEL`] of its containerd record, so the cache
//! is not handed to a pod that cannot show the same credentials or pass a manifest check at
//! the registry with its own (upstream's `KubeletEnsureSecretPulledImages`); images pulled
//! anonymously or imported are everyone's.

mod attempt;
mod import;
pub mod keyring;
pub mod manifest;
mod pull;
pub mod reference;
pub mod registries;
mod store;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use keyring::{Credential, Keyring, KeyringError};
pub use reference::{ImageReference, PullPolicy, ReferenceError, default_pull_policy};
pub use registries::{RegistriesConfig, RegistriesError};

use crate::runtime::{ContainerImage, ImageConfig, Runtime, RuntimeError};

/// Label on an image record: comma-separated fingerprints of the pod credentials it was pulled
/// or verified with; empty or absent when no credentials were needed.
pub const PULL_CREDENTIALS_LABEL: &str = "io.berth.image.pull-credentials";
/// How many fingerprints the label keeps (the oldest go first); containerd caps a label at 4 KiB.
const MAX_FINGERPRINTS: usize = 32;

/// An image present in containerd.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PulledImage {
    /// The normalised name it is stored under, e.g. `docker.io/library/busybox:1.28`.
    pub name: String,
    /// Digest of the manifest or index the name points at.
    pub digest: String,
    /// Sum of the sizes of manifest(s), config and (compressed) layers.
    pub size_bytes: u64,
    pub config: ImageConfig,
    /// Chain id of the top layer: the snapshot containers are prepared on.
    pub chain_id: String,
    /// How long the pull took (zero when the image was already there).
    pub duration: Duration,
    /// The pull found the image present and fetched nothing (IfNotPresent / Never).
    pub already_present: bool,
}

impl PulledImage {
    /// `name` as the content store holds it, after `duration` of pulling (zero when it was
    /// already there).
    pub(crate) fn stored(
        name: String,
        stored: store::StoredImage,
        duration: Duration,
        already_present: bool,
    ) -> PulledImage {
        PulledImage {
            name,
            digest: stored.digest,
            size_bytes: stored.size_bytes,
            config: stored.config,
            chain_id: stored.chain_id,
            duration,
            already_present,
        }
    }

    /// What the runtime needs to create a container from this image.
    pub fn container_image(&self) -> ContainerImage {
        ContainerImage {
            name: self.name.clone(),
            chain_id: self.chain_id.clone(),
            config: self.config.clone(),
        }
    }

    /// `repository@digest`, the pod status's `imageID`.
    pub fn image_id(&self) -> String {
        match ImageReference::parse(&self.name) {
            Ok(r) => r.with_digest(&self.digest),
            Err(_) => self.digest.clone(),
        }
    }
}

/// Why an image could not be pulled or imported. The messages follow containerd's CRI
/// (the kubelet prefixes `Failed to pull image "<image>": `).
#[derive(Debug, thiserror::Error)]
pub enum PullError {
    #[error(transparent)]
    InvalidReference(#[from] ReferenceError),
    #[error(
        "rpc error: code = NotFound desc = failed to pull and unpack image \"{reference}\": failed to resolve reference \"{reference}\": {reference}: not found"
    )]
    NotFound { reference: String },
    /// The registry refused the credentials offered (or their absence); `message` says which
    /// (e.g. `pull access denied, …: unexpected status from GET request to URL: 401
    /// Unauthorized`).
    #[error(
        "rpc error: code = Unknown desc = failed to pull and unpack image \"{reference}\": failed to resolve reference \"{reference}\": {message}"
    )]
    Unauthorized { reference: String, message: String },
    #[error(
        "rpc error: code = Unknown desc = failed to pull and unpack image \"{reference}\": failed to resolve reference \"{reference}\": {message}"
    )]
    Network { reference: String, message: String },
    #[error("Container image \"{reference}\" is not present with pull policy of Never")]
    NeverPull { reference: String },
    /// Upstream's wording when a cached image needs credentials the pod does not have.
    #[error(
        "Container image \"{reference}\" is present with pull policy of Never but does not have the proper auth credentials to access the image"
    )]
    NeverPullUnverified { reference: String },
    #[error(transparent)]
    PullSecret(#[from] KeyringError),
    #[error(
        "rpc error: code = Unknown desc = failed to pull and unpack image \"{reference}\": {message}"
    )]
    Invalid { reference: String, message: String },
    #[error("cannot import {path}: {message}")]
    Import { path: String, message: String },
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

impl PullError {
    /// Whether trying again later may succeed without anything else changing. (A missing
    /// image may still appear later; the pod worker retries with back-off regardless.)
    pub fn is_transient(&self) -> bool {
        match self {
            PullError::Network { .. } => true,
            PullError::Runtime(e) => e.is_transient(),
            PullError::InvalidReference(_)
            | PullError::NotFound { .. }
            | PullError::Unauthorized { .. }
            | PullError::NeverPull { .. }
            | PullError::NeverPullUnverified { .. }
            | PullError::PullSecret(_)
            | PullError::Invalid { .. }
            | PullError::Import { .. } => false,
        }
    }
}

struct Inner {
    runtime: Runtime,
    registries: RegistriesConfig,
    clients: Mutex<HashMap<String, oci_client::Client>>,
    /// One pull per image name at a time; the second finds the first one's work done.
    pulls: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// The fingerprints recorded on an image record.
fn fingerprints(labels: &std::collections::BTreeMap<String, String>) -> Vec<String> {
    labels
        .get(PULL_CREDENTIALS_LABEL)
        .map(|v| {
            v.split(',')
                .filter(|f| !f.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Pulls, finds, lists and imports images. Cheap to clone.
#[derive(Clone)]
pub struct ImageService {
    inner: Arc<Inner>,
}

impl ImageService {
    pub fn new(runtime: Runtime, registries: RegistriesConfig) -> ImageService {
        // oci-client is built without a default TLS provider (no aws-lc); ring it is.
        let _ = rustls::crypto::ring::default_provider().install_default();
        ImageService {
            inner: Arc::new(Inner {
                runtime,
                registries,
                clients: Mutex::new(HashMap::new()),
                pulls: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Reads a registries file; a missing file is an empty configuration.
    pub fn load_registries(path: &Path) -> Result<RegistriesConfig, RegistriesError> {
        match std::fs::read_to_string(path) {
            Ok(text) => RegistriesConfig::parse(&text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(RegistriesConfig::default()),
            Err(e) => Err(RegistriesError(format!("{}: {e}", path.display()))),
        }
    }

    pub fn runtime(&self) -> &Runtime {
        &self.inner.runtime
    }

    /// Makes `reference` present according to `policy` and returns it (no pod credentials).
    pub async fn pull(
        &self,
        reference: &str,
        policy: PullPolicy,
    ) -> Result<PulledImage, PullError> {
        self.pull_with(reference, policy, &Keyring::default()).await
    }

    /// Makes `reference` present according to `policy` for a pod whose pull secrets are
    /// `keyring`: a present image pulled with credentials is only returned once the pod's
    /// credentials are verified (see the module doc).
    pub async fn pull_with(
        &self,
        reference: &str,
        policy: PullPolicy,
        keyring: &Keyring,
    ) -> Result<PulledImage, PullError> {
        let parsed = ImageReference::parse(reference)?;
        let name = parsed.to_string();
        let creds = keyring.lookup(&format!("{}/{}", parsed.registry, parsed.repository));
        if policy != PullPolicy::Always
            && let Some(mut image) = self.get_by_name(&name).await?
        {
            image.already_present = true;
            self.verify_present(&parsed, reference, policy, &creds)
                .await?;
            return Ok(image);
        }
        if policy == PullPolicy::Never {
            return Err(PullError::NeverPull {
                reference: reference.to_string(),
            });
        }
        let lock = self.pull_lock(&name)?;
        let _guard = lock.lock().await;
        let started = std::time::Instant::now();
        let stored = pull::pull(self, &parsed, &creds).await?;
        Ok(PulledImage::stored(name, stored, started.elapsed(), false))
    }

    fn pull_lock(&self, name: &str) -> Result<Arc<tokio::sync::Mutex<()>>, PullError> {
        let mut pulls = self.inner.pulls.lock().map_err(|_| PullError::Invalid {
            reference: name.to_string(),
            message: "pull lock poisoned".to_string(),
        })?;
        Ok(pulls.entry(name.to_string()).or_default().clone())
    }

    /// Whether a pod offering `creds` may use the present image `image`: yes when it was
    /// pulled without credentials or with one of these; else (unless `Never`) when the
    /// registry accepts the pod's credentials (or none) for its manifest now, which is then
    /// recorded.
    async fn verify_present(
        &self,
        image: &ImageReference,
        reference: &str,
        policy: PullPolicy,
        creds: &[Credential],
    ) -> Result<(), PullError> {
        let name = image.to_string();
        let Some(record) = self.inner.runtime.image_get(&name).await? else {
            return Ok(());
        };
        let recorded = fingerprints(&record.labels);
        if recorded.is_empty() || creds.iter().any(|c| recorded.contains(&c.fingerprint())) {
            return Ok(());
        }
        if policy == PullPolicy::Never {
            return Err(PullError::NeverPullUnverified {
                reference: reference.to_string(),
            });
        }
        let lock = self.pull_lock(&name)?;
        let _guard = lock.lock().await;
        let used = pull::verify(self, image, creds).await?;
        if let Some(cred) = used {
            let mut list = recorded;
            list.push(cred.fingerprint());
            let skip = list.len().saturating_sub(MAX_FINGERPRINTS);
            let value = list[skip..].join(",");
            let rt = &self.inner.runtime;
            let lease = rt.lease_create(Duration::from_secs(60)).await?;
            let labels =
                std::collections::BTreeMap::from([(PULL_CREDENTIALS_LABEL.to_string(), value)]);
            let put = rt.image_put(&lease, &name, &record.target, &labels).await;
            if let Err(e) = rt.lease_delete(&lease, false).await {
                tracing::debug!(error = %e, "deleting the lease failed; it expires by itself");
            }
            put?;
        }
        Ok(())
    }

    /// The image if it is present (record, content and snapshots).
    pub async fn get(&self, reference: &str) -> Result<Option<PulledImage>, PullError> {
        let name = ImageReference::parse(reference)?.to_string();
        self.get_by_name(&name).await
    }

    async fn get_by_name(&self, name: &str) -> Result<Option<PulledImage>, PullError> {
        let stored = store::load_image(&self.inner.runtime, name).await?;
        Ok(stored.map(|s| PulledImage::stored(name.to_string(), s, Duration::ZERO, true)))
    }

    /// Every complete image in the namespace, by name.
    pub async fn list(&self) -> Result<Vec<PulledImage>, PullError> {
        let mut out = Vec::new();
        for record in self.inner.runtime.image_list().await? {
            if let Some(image) = self.get_by_name(&record.name).await? {
                out.push(image);
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Imports an OCI image layout (directory or tar) or a `docker save` tarball.
    pub async fn import(&self, path: &Path) -> Result<Vec<PulledImage>, PullError> {
        import::import(&self.inner.runtime, path).await
    }

    /// Deletes the image record (GC then frees content and snapshots nobody uses).
    pub async fn remove(&self, reference: &str) -> Result<(), PullError> {
        let name = ImageReference::parse(reference)?.to_string();
        self.inner.runtime.image_delete(&name, true).await?;
        Ok(())
    }
}
