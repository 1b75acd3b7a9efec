//! Which Jobs and pods a change concerns (judged by the views of [`super::view`], each derived
//! once per object version and shared). A Job's own change and its pods' (through their controller
//! reference) are wired by the runtime, and so are live orphans (`.adopts` with the kit's
//! `Parsed::selector`: upstream `addPod`/`updatePod`); here: a pod that still
//! carries the tracking finalizer while no unfinished Job controls it (an orphan, a pod of a
//! deleted or finished Job) concerns the finalizer cleaner (upstream's orphan queue).

use super::conditions;
use super::template;
use super::view::{Job, TRACKING_FINALIZER};
use crate::workload::Parsed;
use berth_runtime::informer::{Delta, DeltaType, Informer, Object, ObjectKey};

/// Whether a pod carries the tracking finalizer.
pub fn tracked(pod: &Object) -> bool {
    pod.finalizers().iter().any(|f| f == TRACKING_FINALIZER)
}

/// Whether a Job has finished (a `Complete` or `Failed` condition).
pub fn finished(job: &Object) -> bool {
    job.view::<Parsed<Job>>()
        .0
        .as_ref()
        .is_ok_and(|j| conditions::finished(j.conditions()).is_some())
}

/// Upstream `syncOrphanPod`'s test: the pod carries the tracking finalizer and no unfinished
/// Job controls it (a pod controlled by something else than a Job is left alone).
pub fn untrackable(jobs: &Informer, pod: &Object) -> bool {
    if !tracked(pod) {
        return false;
    }
    let Some(c) = pod.controller() else {
        return true;
    };
    if c.kind != template::KIND || c.api_version != template::API_VERSION {
        return false;
    }
    match jobs.get(pod.namespace(), &c.name) {
        Some(j) if j.uid() == c.uid => finished(&j),
        _ => true,
    }
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
/// `cleanupPodFinalizers`, a backup: a Job finishes only once its pods are untracked).
pub fn job_gone_or_finished(pods: &Informer, d: &Delta) -> Vec<ObjectKey> {
    if d.kind != DeltaType::Deleted && !finished(&d.object) {
        return Vec::new();
    }
    pods.controlled_by(d.object.uid())
        .into_iter()
        .filter(|p| tracked(p))
        .map(|p| p.key().clone())
        .collect()
}
