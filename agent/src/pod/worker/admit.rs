//! Admission of a pod on this node: the kubelet's sysctl and AppArmor admit handlers. A pod
//! they refuse is failed at once as the kubelet's `rejectPod` does (phase `Failed`, the
//! handler's reason, "Pod was rejected: …", a warning event), and nothing of it starts.

use super::{PodWorker, WorkerError};
use crate::pod::model::Observed;
use crate::pod::security_profiles::plan_admission;
use crate::pod::status::{FAILED, is_terminal, pod_status};
use berth_api::k8s_openapi::api::core::v1::Pod;

impl PodWorker {
    /// Whether the pass may go on with `pod`; `false` when it was just rejected.
    pub(super) async fn admit(&self, pod: &Pod, observed: &Observed) -> Result<bool, WorkerError> {
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if phase.is_some_and(is_terminal) || pod.metadata.deletion_timestamp.is_some() {
            return Ok(true);
        }
        // Only a pod that never ran a container here is judged: a restarted agent (or one
        // whose flags changed) does not reject what it already runs.
        if observed.containers.values().any(|c| !c.attempts.is_empty()) {
            return Ok(true);
        }
        let Some(rejection) = plan_admission(pod, &self.cx.node.security) else {
            return Ok(true);
        };
        // One event per rejection, however many passes see the pod before its new phase.
        if !self.local().rejected {
            self.cx
                .events
                .record(pod, true, rejection.reason, &rejection.message, None)
                .await;
            self.local_mut(|l| l.rejected = true);
        }
        let mut status = pod_status(pod, observed, self.now());
        status.phase = Some(FAILED.to_string());
        status.reason = Some(rejection.reason.to_string());
        status.message = Some(format!("Pod was rejected: {}", rejection.message));
        let mut updated = pod.clone();
        updated.status = Some(status);
        match self.cx.api.write_status(&updated).await {
            Ok(_) => Ok(false),
            Err(e) if e.is_conflict() || e.is_not_found() => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}
