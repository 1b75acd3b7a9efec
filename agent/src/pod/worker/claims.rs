//! Setting up a pod's volumes before anything of it starts: its typed `hostPath` volumes
//! checked or made ([`crate::pod::volumes::set_up_host_paths`]), then each
//! `persistentVolumeClaim` volume's claim and bound volume read from the API and resolved
//! ([`crate::pod::claims`]) to where its data is on this host, then its config volumes written
//! (`worker/config_volumes.rs`); the first that is not ready yields the kubelet's `FailedMount`
//! message.

use super::{PodWorker, ns_of};
use crate::pod::claims::{self, ClaimError, HostVolume};
use berth_api::k8s_openapi::api::core::v1::Pod;
use std::collections::BTreeMap;

/// How often a pod waiting for its claims looks again.
pub(super) const CLAIM_RETRY: std::time::Duration = std::time::Duration::from_secs(1);
/// A `FailedMount` event with an unchanged message is repeated at most this often.
pub(super) const FAILED_MOUNT_EVERY: jiff::SignedDuration = jiff::SignedDuration::from_secs(30);
/// How long a pod waits for its claims before `FailedMount` says so: the kubelet's
/// `WaitForAttachAndMount` times out after 2m3s (a claim being provisioned is no failure).
pub(super) const CLAIM_WAIT: jiff::SignedDuration = jiff::SignedDuration::from_secs(123);

/// Why a pod's volumes are not set up yet, with the kubelet's `FailedMount` message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum VolumesNotReady {
    /// A volume failed to set up (a host path of the wrong type): reported at once, as the
    /// kubelet's `MountVolume.SetUp failed` is.
    SetUpFailed(String),
    /// A claim is not found, not bound, or its volume not ready: reported once the pod has
    /// waited [`CLAIM_WAIT`] for it.
    WaitingForClaims(String),
}

impl PodWorker {
    /// Sets up the pod's host paths and resolves its claims; `Err` says which volume is not
    /// ready, and why.
    pub(super) async fn set_up_volumes(&self, pod: &Pod) -> Result<(), VolumesNotReady> {
        crate::pod::volumes::set_up_host_paths(pod).map_err(VolumesNotReady::SetUpFailed)?;
        if !claims::claims_of(pod).is_empty() {
            self.observe_claims(pod)
                .await
                .map_err(VolumesNotReady::WaitingForClaims)?;
        }
        self.set_up_config_volumes(pod)
            .await
            .map_err(VolumesNotReady::SetUpFailed)
    }

    /// The pod's claim volumes by volume name, or the `FailedMount` message.
    pub(super) async fn observe_claims(
        &self,
        pod: &Pod,
    ) -> Result<BTreeMap<String, HostVolume>, String> {
        let ns = ns_of(pod);
        let refs = claims::claims_of(pod);
        let mut out = BTreeMap::new();
        let mut failed: Option<ClaimError> = None;
        let mut unmounted = Vec::new();
        for r in &refs {
            match self.observe_claim(&ns, &r.claim).await {
                Ok(h) => {
                    out.insert(r.volume.clone(), h);
                }
                Err(e) => {
                    unmounted.push(r.volume.clone());
                    failed.get_or_insert(e);
                }
            }
        }
        match failed {
            None => Ok(out),
            Some(e) => Err(claims::failed_mount_message(&unmounted, &e)),
        }
    }

    async fn observe_claim(&self, ns: &str, name: &str) -> Result<HostVolume, ClaimError> {
        let lookup = |what: String| {
            move |e: berth_api::client::ClientError| ClaimError::Lookup {
                what,
                message: e.to_string(),
            }
        };
        let claim = self
            .cx
            .api
            .claim(ns, name)
            .await
            .map_err(lookup(format!("persistentvolumeclaim \"{name}\"")))?;
        let volume = claims::bound_volume(name, claim.as_ref())?;
        let pv = self
            .cx
            .api
            .persistent_volume(&volume)
            .await
            .map_err(lookup(format!("persistentvolume \"{volume}\"")))?;
        match claim {
            Some(c) => claims::host_volume(&c, &volume, pv.as_ref()),
            None => Err(ClaimError::ClaimNotFound {
                claim: name.to_string(),
            }),
        }
    }

    /// Records `FailedMount` for why the volumes are not ready, unless the same message was
    /// recorded less than [`FAILED_MOUNT_EVERY`] ago, or the pod has waited for its claims
    /// less than [`CLAIM_WAIT`] (the pod retries every [`CLAIM_RETRY`]).
    pub(super) async fn failed_mount(&self, pod: &Pod, why: &VolumesNotReady) {
        let now = self.now();
        let since = match self.local().volumes_waiting_since {
            Some(t) => t,
            None => {
                self.local_mut(|l| l.volumes_waiting_since = Some(now));
                now
            }
        };
        let message = match why {
            VolumesNotReady::SetUpFailed(m) => m.as_str(),
            VolumesNotReady::WaitingForClaims(m) => {
                if now.duration_since(since) < CLAIM_WAIT {
                    tracing::debug!(pod = %super::name_of(pod), message = %m, "waiting for claims");
                    return;
                }
                m.as_str()
            }
        };
        let due =
            self.local().failed_mount.as_ref().is_none_or(|(m, at)| {
                m != message || now.duration_since(*at) >= FAILED_MOUNT_EVERY
            });
        if !due {
            return;
        }
        tracing::info!(pod = %super::name_of(pod), %message, "waiting for volumes");
        self.cx
            .events
            .record(pod, true, "FailedMount", message, None)
            .await;
        self.local_mut(|l| l.failed_mount = Some((message.to_string(), now)));
    }
}
