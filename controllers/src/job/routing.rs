//! Which Jobs and pods a change concerns. A Job's own change and its pods' (through their
//! controller reference) are wired by the runtime, and so are live orphans (`.adopts` with the
//! kit's `Parsed::selector`: upstream `addPod`/`updatePod`); here: the pods the finalizer cleaner
//! looks at (upstream's orphan queue), judged by [`super::orphans`] with the Job a pod's
//! controller reference names as cached (each view derived once per object version and shared).

use super::orphans::{self, tracked};
use berth_runtime::informer::{Delta, DeltaType, Informer, Object, ObjectKey};

/// Whether a pod's finalizer should go ([`orphans::untrackable`], its Job as cached).
pub fn untrackable(jobs: &Informer, pod: &Object) -> bool {
    let job = pod
        .controller()
        .and_then(|c| jobs.get(pod.namespace(), &c.name));
    orphans::untrackable(pod, job.as_deref())
}

/// A pod change: the pod, when its finalizer should go.
pub fn pod_to_untrack(jobs: &Informer, d: &Delta) -> Vec<ObjectKey> {
    if d.kind != DeltaType::Deleted && untrackable(jobs, &d.object) {
        vec![d.object.key().clone()]
    } else {
        Vec::new()
    }
}

/// A Job that went or finished: its pods that still carry the finalizer (upstream
/// `cleanupPodFinalizers`).
pub fn job_gone_or_finished(pods: &Informer, d: &Delta) -> Vec<ObjectKey> {
    if !orphans::releases_pods(d) {
        return Vec::new();
    }
    pods.controlled_by(d.object.uid())
        .into_iter()
        .filter(|p| tracked(p))
        .map(|p| p.key().clone())
        .collect()
}
