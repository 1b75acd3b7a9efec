//! The pod's config volumes (`configMap`, `secret`, `downwardAPI`, `projected`): set up before
//! anything of the pod starts (a missing ConfigMap or Secret that is not optional keeps it
//! waiting, with the kubelet's `FailedMount`), then refreshed at every pass from the watched
//! objects, so a change reaches the running containers within a second; a renewed
//! ServiceAccount token is written the same way.

use super::PodWorker;
use crate::pod::volumes;
use berth_api::k8s_openapi::api::core::v1::Pod;

impl PodWorker {
    /// Writes the pod's config volumes; `Err` is the `FailedMount` message.
    pub(super) async fn set_up_config_volumes(&self, pod: &Pod) -> Result<(), String> {
        if volumes::config_volume_names(pod).is_empty() {
            return Ok(());
        }
        let (sources, _) = self.config_sources(pod).await;
        volumes::set_up_config_volumes(&self.cx.node.root_dir, pod, &sources)
    }

    /// Rewrites the config volumes already set up whose content changed.
    pub(super) async fn refresh_config_volumes(&self, pod: &Pod) {
        if pod.metadata.deletion_timestamp.is_some()
            || !volumes::config_volumes_set_up(&self.cx.node.root_dir, pod)
        {
            return;
        }
        let (sources, complete) = self.config_sources(pod).await;
        if !complete {
            // An object could not be read: what the volumes hold stays until it can.
            return;
        }
        let (changed, failed) =
            volumes::refresh_config_volumes(&self.cx.node.root_dir, pod, &sources);
        if !changed.is_empty() {
            tracing::debug!(pod = %super::name_of(pod), volumes = ?changed, "config volumes updated");
        }
        for (volume, error) in failed {
            tracing::warn!(pod = %super::name_of(pod), %volume, %error, "config volume not updated");
        }
    }
}
