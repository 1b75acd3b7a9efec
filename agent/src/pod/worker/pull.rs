//! Pulling a container's image per its `imagePullPolicy`, with the kubelet's events and the
//! image-pull back-off kept in the worker's local state.

use super::{PodWorker, all_containers};
use crate::image::{PullPolicy, default_pull_policy};
use crate::pod::model::{ImagePull, PullFailure};
use crate::pod::restart::image_pull_failed;
use berth_shared::k8s_openapi::api::core::v1::Pod;
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
        let field = super::field_path(pod, name);
        let present = matches!(self.cx.images.get(&image).await, Ok(Some(_)));
        if policy == PullPolicy::Never && !present {
            let message =
                format!("Container image \"{image}\" is not present with pull policy of Never");
            self.cx
                .events
                .record(pod, true, "ErrImageNeverPull", &message, Some(&field))
                .await;
            self.note_pull_failed(name, PullFailure::ErrImageNeverPull, message, now);
            return;
        }
        if present && policy != PullPolicy::Always {
            self.cx
                .events
                .record(
                    pod,
                    false,
                    "Pulled",
                    &format!("Container image \"{image}\" already present on machine"),
                    Some(&field),
                )
                .await;
            self.local_mut(|l| {
                l.pulls.insert(name.to_string(), ImagePull::Pulled);
            });
            return;
        }
        self.cx
            .events
            .record(
                pod,
                false,
                "Pulling",
                &format!("Pulling image \"{image}\""),
                Some(&field),
            )
            .await;
        let started = std::time::Instant::now();
        let pulled = self.cx.images.pull(&image, policy).await;
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
                self.cx
                    .events
                    .record(pod, false, "Pulled", &msg, Some(&field))
                    .await;
                self.local_mut(|l| {
                    l.pulls.insert(name.to_string(), ImagePull::Pulled);
                });
            }
            Err(e) => {
                let message = format!("Failed to pull image \"{image}\": {e}");
                self.cx
                    .events
                    .record(pod, true, "Failed", &message, Some(&field))
                    .await;
                self.cx
                    .events
                    .record(pod, true, "Failed", "Error: ErrImagePull", Some(&field))
                    .await;
                self.note_pull_failed(name, PullFailure::ErrImagePull, message, now);
                self.local_mut(|l| {
                    l.fresh_pull_failures.insert(name.to_string());
                });
            }
        }
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
