//! Which pods the finalizer cleaner ([`super::untrack`]) takes the tracking finalizer off
//! (upstream `syncOrphanPod`'s test and `cleanupPodFinalizers`' trigger), judged from a cached
//! pod and the cached Job its controller reference names (looked up by the caller).
//!
//! Planner: pure, no I/O.

use super::conditions;
use super::template::{API_VERSION, KIND};
use super::view::{Job, TRACKING_FINALIZER};
use crate::workload::Parsed;
use berth_runtime::informer::{Delta, DeltaType, Object};

/// Whether a pod carries the tracking finalizer.
pub fn tracked(pod: &Object) -> bool {
    pod.finalizers().iter().any(|f| f == TRACKING_FINALIZER)
}

/// The values of the pods' index of tracked pods: one (empty) for a pod carrying the
/// finalizer, none for the others.
pub fn tracked_index(pod: &Object) -> Vec<String> {
    tracked(pod).then(String::new).into_iter().collect()
}

/// Whether a Job has finished (a `Complete` or `Failed` condition).
pub fn finished(job: &Object) -> bool {
    job.view::<Parsed<Job>>()
        .0
        .as_ref()
        .is_ok_and(|j| conditions::finished(j.conditions()).is_some())
}

/// Upstream `syncOrphanPod`'s test: the pod carries the tracking finalizer and no unfinished
/// Job controls it (a pod controlled by something else than a Job is left alone). `job` is the
/// cached object of the controller reference's name, if any.
pub fn untrackable(pod: &Object, job: Option<&Object>) -> bool {
    if !tracked(pod) {
        return false;
    }
    let Some(c) = pod.controller() else {
        return true;
    };
    if c.kind != KIND || c.api_version != API_VERSION {
        return false;
    }
    match job {
        Some(j) if j.uid() == c.uid => finished(j),
        _ => true,
    }
}

/// Whether a Job's change hands its tracked pods to the cleaner: it went or finished (a
/// backup: a Job finishes only once its pods are untracked).
pub fn releases_pods(d: &Delta) -> bool {
    d.kind == DeltaType::Deleted || finished(&d.object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use std::sync::Arc;

    fn object(v: Value) -> Object {
        Object::from_value(&v)
    }

    /// A pod in namespace `ns` with `finalizers`, controlled by `controller` (kind, uid).
    fn pod(finalizers: &[&str], controller: Option<(&str, &str)>) -> Object {
        let owners: Vec<Value> = controller
            .iter()
            .map(|(kind, uid)| {
                let api = if *kind == KIND {
                    API_VERSION
                } else {
                    "apps/v1"
                };
                json!({"apiVersion": api, "kind": kind, "name": "j", "uid": uid,
                    "controller": true})
            })
            .collect();
        object(
            json!({"metadata": {"name": "p", "namespace": "ns", "uid": "p1",
            "finalizers": finalizers, "ownerReferences": owners}}),
        )
    }

    /// The Job `j` of uid `uid`, finished or not.
    fn job(uid: &str, finished: bool) -> Object {
        let conditions = if finished {
            json!([{"type": "Complete", "status": "True"}])
        } else {
            json!([])
        };
        object(json!({"apiVersion": API_VERSION, "kind": KIND,
            "metadata": {"name": "j", "namespace": "ns", "uid": uid},
            "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {}},
            "status": {"conditions": conditions}}))
    }

    #[test]
    fn a_tracked_pod_is_untracked_unless_an_unfinished_job_controls_it() {
        let t = [TRACKING_FINALIZER];
        let (running, done, other) = (job("u", false), job("u", true), job("v", false));
        let rows: [(&str, Object, Option<&Object>, bool); 8] = [
            ("no finalizer", pod(&[], None), None, false),
            (
                "another finalizer",
                pod(&["x"], Some((KIND, "u"))),
                None,
                false,
            ),
            ("an orphan", pod(&t, None), None, true),
            (
                "controlled by a ReplicaSet",
                pod(&t, Some(("ReplicaSet", "u"))),
                None,
                false,
            ),
            ("its Job gone", pod(&t, Some((KIND, "u"))), None, true),
            (
                "its Job running",
                pod(&t, Some((KIND, "u"))),
                Some(&running),
                false,
            ),
            (
                "its Job finished",
                pod(&t, Some((KIND, "u"))),
                Some(&done),
                true,
            ),
            (
                "its Job replaced",
                pod(&t, Some((KIND, "u"))),
                Some(&other),
                true,
            ),
        ];
        for (name, pod, job, want) in rows {
            assert_eq!(untrackable(&pod, job), want, "{name}");
            assert_eq!(
                tracked_index(&pod).len(),
                usize::from(tracked(&pod)),
                "{name}"
            );
        }
    }

    #[test]
    fn a_job_hands_its_pods_over_once_it_went_or_finished() {
        let delta = |kind, job| Delta {
            kind,
            object: Arc::new(job),
            old: None,
        };
        let rows = [
            (DeltaType::Modified, job("u", false), false),
            (DeltaType::Modified, job("u", true), true),
            (DeltaType::Deleted, job("u", false), true),
        ];
        for (kind, job, want) in rows {
            assert_eq!(releases_pods(&delta(kind, job)), want, "{kind:?}");
        }
    }
}
