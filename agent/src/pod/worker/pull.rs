//! Pulling a container's image per its `imagePullPolicy`, with the kubelet's events and the
//! image-pull back-off kept in the worker's local state. The pod's `imagePullSecrets` are read
//! from the API for each pull (a ServiceAccount's were copied into the pod at admission), and a
//! present image is checked against them before it is used.

use super::{PodWorker, all_containers, ns_of};
use crate::image::keyring::{self, Keyring};
use crate::image::{PullError, PullPolicy, default_pull_policy};
use crate::pod::model::{ImagePull, PullFailure};
use crate::pod::restart::image_pull_failed;
use berth_api::k8s_openapi::api::core::v1::Pod;
use jiff::Timestamp;

impl PodWorker {
    /// Makes the image of container `name` present; a failure starts or advances its back-off.
    pub(super) async fn pull(&self, pod: &Pod, name: &str, now: Timestamp) {
        let Some(c) = all_containers(pod).into_iter().find(|c| c.name == name) else {
            return;
        };
        let image = c.image.clone().unwrap_or_default();
        let policy = c
            .image_pull_policy
            .as_deref()
            .and_then(PullPolicy::parse)
            .unwrap_or_else(|| default_pull_policy(&image));
        let present = matches!(self.cx.images.get(&image).await, Ok(Some(_)));
        if policy == PullPolicy::Never && !present {
            let message =
                format!("Container image \"{image}\" is not present with pull policy of Never");
            self.never_pull(pod, name, message, now).await;
            return;
        }
        let keyring = match self.pull_keyring(pod).await {
            Ok(k) => k,
            Err(e) => {
                self.pull_failed(pod, name, &image, &e.into(), now).await;
                return;
            }
        };
        if present && policy != PullPolicy::Always {
            if let Err(e) = self.cx.images.check_present(&image, policy, &keyring).await {
                self.pull_failed(pod, name, &image, &e, now).await;
                return;
            }
            let message = format!("Container image \"{image}\" already present on machine");
            self.pulled(pod, name, &message).await;
            return;
        }
        let message = format!("Pulling image \"{image}\"");
        self.image_event(pod, name, false, "Pulling", &message)
            .await;
        let started = std::time::Instant::now();
        let pulled = self.cx.images.pull_with(&image, policy, &keyring).await;
        let took = started.elapsed();
        let m = &self.cx.metrics;
        m.image_pull.observe(&[], took.as_secs_f64());
        m.image_pulls
            .inc(&[if pulled.is_ok() { "success" } else { "failure" }]);
        // The pod's start latency leaves image pulls out.
        self.local_mut(|l| l.pulling += took);
        match pulled {
            Ok(p) => {
                let msg = format!(
                    "Successfully pulled image \"{image}\" in {:.3}s. Image size: {} bytes.",
                    p.duration.as_secs_f64(),
                    p.size_bytes
                );
                self.pulled(pod, name, &msg).await;
            }
            Err(e) => self.pull_failed(pod, name, &image, &e, now).await,
        }
    }

    /// An event about container `name`'s image (a warning for the failures).
    async fn image_event(&self, pod: &Pod, name: &str, warning: bool, reason: &str, message: &str) {
        let field = super::field_path(pod, name);
        let events = &self.cx.events;
        events
            .record(pod, warning, reason, message, Some(&field))
            .await;
    }

    /// Container `name`'s image is there: the `Pulled` event, and no pull is owed.
    async fn pulled(&self, pod: &Pod, name: &str, message: &str) {
        self.image_event(pod, name, false, "Pulled", message).await;
        self.local_mut(|l| {
            l.pulls.insert(name.to_string(), ImagePull::Pulled);
        });
    }

    /// `ErrImageNeverPull` for container `name`: its warning event and waiting state.
    async fn never_pull(&self, pod: &Pod, name: &str, message: String, now: Timestamp) {
        self.image_event(pod, name, true, "ErrImageNeverPull", &message)
            .await;
        self.note_pull_failed(name, PullFailure::ErrImageNeverPull, message, now);
    }

    /// The kubelet's events and state for a failed pull of container `name`'s image.
    async fn pull_failed(&self, pod: &Pod, name: &str, image: &str, e: &PullError, now: Timestamp) {
        if let PullError::NeverPullUnverified { .. } = e {
            self.never_pull(pod, name, e.to_string(), now).await;
            return;
        }
        let message = format!("Failed to pull image \"{image}\": {e}");
        self.image_event(pod, name, true, "Failed", &message).await;
        self.image_event(pod, name, true, "Failed", "Error: ErrImagePull")
            .await;
        self.note_pull_failed(name, PullFailure::ErrImagePull, message, now);
        self.local_mut(|l| {
            l.fresh_pull_failures.insert(name.to_string());
        });
    }

    /// The credentials of the pod's `imagePullSecrets`, in their order. A secret that cannot be
    /// read is left out with the kubelet's warning event; a malformed one fails the pull.
    async fn pull_keyring(&self, pod: &Pod) -> Result<Keyring, keyring::KeyringError> {
        let names: Vec<String> = pod
            .spec
            .as_ref()
            .and_then(|s| s.image_pull_secrets.as_ref())
            .into_iter()
            .flatten()
            .map(|r| r.name.clone())
            .filter(|n| !n.is_empty())
            .collect();
        if names.is_empty() {
            return Ok(Keyring::default());
        }
        let ns = ns_of(pod);
        let mut pairs = Vec::new();
        let mut missing = Vec::new();
        for name in names {
            let secret = match self.cx.api.secret(&ns, &name).await {
                Ok(Some(s)) => s,
                Ok(None) => {
                    missing.push(format!("{ns}/{name}"));
                    continue;
                }
                Err(e) => {
                    tracing::warn!(namespace = %ns, secret = %name, error = %e,
                        "reading an image pull secret failed");
                    missing.push(format!("{ns}/{name}"));
                    continue;
                }
            };
            let mut data: std::collections::BTreeMap<String, Vec<u8>> = secret
                .data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.0))
                .collect();
            for (k, v) in secret.string_data.unwrap_or_default() {
                data.insert(k, v.into_bytes());
            }
            let kind = secret.type_.unwrap_or_default();
            pairs.extend(keyring::parse_secret(&name, &kind, &data)?);
        }
        if !missing.is_empty() {
            let message = format!(
                "Unable to retrieve some image pull secrets ({}); attempting to pull the image may not succeed.",
                missing.join(", ")
            );
            self.cx
                .events
                .record(pod, true, "FailedToRetrieveImagePullSecret", &message, None)
                .await;
        }
        Ok(Keyring::new(pairs))
    }

    /// Records a failed pull of container `name`'s image, starting or advancing its back-off.
    fn note_pull_failed(&self, name: &str, reason: PullFailure, message: String, now: Timestamp) {
        self.local_mut(|l| {
            let prev = match l.pulls.get(name) {
                Some(ImagePull::Failed { backoff, .. }) => Some(*backoff),
                _ => None,
            };
            l.pulls.insert(
                name.to_string(),
                ImagePull::Failed {
                    reason,
                    message,
                    backoff: image_pull_failed(prev, now),
                },
            );
        });
    }
}
