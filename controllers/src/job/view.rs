//! What the Job controller reads from a Job and from its pods, parsed once per object version:
//! the Job typed (`k8s-openapi`, spec and status as stored, admission defaulted them) with the
//! few derived settings its decisions use; a pod reduced to what tracking, back-off and the
//! failure policy look at (phase, finalizer, index, container ends, conditions).
//!
//! Planner: pure, no I/O.

use crate::views::{ControllerRef, Pod, str_at, string_map, time_at};
pub use crate::workload::parsed::ViewError;
use crate::workload::parsed::{self, owner_view, required_uid};
use berth_runtime::informer::{Object, View};
use berth_shared::k8s_openapi::api::batch::v1 as batch;
use berth_shared::selector::LabelSelector;
use jiff::Timestamp;
use serde_json::Value;
use std::collections::BTreeMap;

/// The pod finalizer that keeps a finished pod until the Job status counts it.
pub const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
/// A pod's completion index: annotation and label.
pub const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";
/// Failures of the pod's index before it (with `backoffLimitPerIndex`).
pub const INDEX_FAILURE_COUNT: &str = "batch.kubernetes.io/job-index-failure-count";
/// Failures of the pod's index an `Ignore` rule did not count.
pub const INDEX_IGNORED_FAILURE_COUNT: &str = "batch.kubernetes.io/job-index-ignored-failure-count";
/// The value of `spec.managedBy` that means this controller.
pub const MANAGED_BY_US: &str = "kubernetes.io/job-controller";

/// A Job, as stored, with what its decisions derive from the spec.
#[derive(Debug, Clone)]
pub struct Job {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub deleting: bool,
    pub selector: LabelSelector,
    pub spec: batch::JobSpec,
    pub status: batch::JobStatus,
}

owner_view!(Job);

impl Job {
    /// Reads a stored Job.
    pub fn from_value(obj: &Value) -> Result<Job, ViewError> {
        let typed: batch::Job = serde_json::from_value(obj.clone())?;
        let meta = typed.metadata;
        let uid = required_uid(meta.uid.as_ref())?;
        let spec = typed.spec.unwrap_or_default();
        let selector = match &spec.selector {
            Some(s) => LabelSelector::from_k8s(s)?,
            None => LabelSelector::nothing(),
        };
        Ok(Job {
            namespace: meta.namespace.unwrap_or_default(),
            name: meta.name.unwrap_or_default(),
            uid,
            deleting: meta.deletion_timestamp.is_some(),
            selector,
            spec,
            status: typed.status.unwrap_or_default(),
        })
    }

    pub fn parallelism(&self) -> i32 {
        self.spec.parallelism.unwrap_or(1).max(0)
    }

    pub fn completions(&self) -> Option<i32> {
        self.spec.completions
    }

    pub fn indexed(&self) -> bool {
        self.spec.completion_mode.as_deref() == Some("Indexed")
    }

    /// Indexed completions (0 for a Job that is not indexed).
    pub fn index_count(&self) -> i32 {
        if self.indexed() {
            self.spec.completions.unwrap_or(0)
        } else {
            0
        }
    }

    pub fn backoff_limit(&self) -> i32 {
        self.spec.backoff_limit.unwrap_or(6)
    }

    /// `backoffLimitPerIndex`, for Indexed Jobs.
    pub fn per_index_limit(&self) -> Option<i32> {
        self.spec.backoff_limit_per_index.filter(|_| self.indexed())
    }

    pub fn suspended(&self) -> bool {
        self.spec.suspend == Some(true)
    }

    /// Upstream `onlyReplaceFailedPods`: `podReplacementPolicy: Failed`, which a pod failure
    /// policy implies.
    pub fn only_replace_failed(&self) -> bool {
        self.spec.pod_replacement_policy.as_deref() == Some("Failed")
            || self.spec.pod_failure_policy.is_some()
    }

    pub fn restart_on_failure(&self) -> bool {
        self.spec
            .template
            .spec
            .as_ref()
            .and_then(|s| s.restart_policy.as_deref())
            == Some("OnFailure")
    }

    /// Another controller reconciles this Job (`spec.managedBy`).
    pub fn managed_elsewhere(&self) -> bool {
        self.spec
            .managed_by
            .as_deref()
            .is_some_and(|m| m != MANAGED_BY_US)
    }

    pub fn conditions(&self) -> &[batch::JobCondition] {
        self.status.conditions.as_deref().unwrap_or_default()
    }
}

/// How a container ended, if it did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerEnd {
    pub name: String,
    /// `state.terminated`: exit code and `finishedAt`.
    pub terminated: Option<(i32, Option<Timestamp>)>,
}

/// A pod, as the Job controller sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobPod {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub labels: berth_runtime::informer::LabelSet,
    pub controller: Option<ControllerRef>,
    pub created: Option<Timestamp>,
    /// `deletionTimestamp` and `deletionGracePeriodSeconds`.
    pub deletion: Option<(Timestamp, i64)>,
    pub deleting: bool,
    /// Carries the tracking finalizer.
    pub finalizer: bool,
    /// `status.phase`; empty when unset.
    pub phase: String,
    pub node_name: String,
    pub ready: bool,
    pub ready_since: Option<Timestamp>,
    /// `lastTransitionTime` of a Ready condition that is False.
    pub unready_since: Option<Timestamp>,
    /// The completion index annotation, when it is a non-negative integer.
    pub index: Option<i32>,
    pub index_failures: i32,
    pub index_ignored_failures: i32,
    pub containers: Vec<ContainerEnd>,
    pub init_containers: Vec<ContainerEnd>,
    /// Names of the sidecars (init containers with `restartPolicy: Always`).
    pub sidecars: Vec<String>,
    /// `(type, status)` of each pod condition.
    pub conditions: Vec<(String, String)>,
    /// Restarts of every container, init containers included (`OnFailure` counts them).
    pub total_restarts: i32,
    /// The highest restart count of a regular container (for the removal order).
    pub max_restarts: i32,
}

/// Upstream `parseInt32` of an annotation: a non-negative int32, else 0.
fn count_annotation(annotations: &BTreeMap<String, String>, key: &str) -> i32 {
    annotations
        .get(key)
        .and_then(|v| v.parse::<i32>().ok())
        .filter(|n| *n >= 0)
        .unwrap_or(0)
}

fn ends(statuses: &[Value]) -> Vec<ContainerEnd> {
    statuses
        .iter()
        .map(|s| ContainerEnd {
            name: str_at(s, "/name").to_string(),
            terminated: s.pointer("/state/terminated").map(|t| {
                let code = t.get("exitCode").and_then(Value::as_i64).unwrap_or(0);
                (
                    i32::try_from(code).unwrap_or(i32::MAX),
                    time_at(t, "/finishedAt"),
                )
            }),
        })
        .collect()
}

fn restarts(statuses: &[Value]) -> impl Iterator<Item = i32> + '_ {
    statuses.iter().map(|s| {
        s.get("restartCount")
            .and_then(Value::as_i64)
            .and_then(|n| i32::try_from(n).ok())
            .unwrap_or(0)
    })
}

impl JobPod {
    /// Reads a stored pod.
    pub fn from_value(obj: &Value) -> JobPod {
        let array = |ptr: &str| {
            obj.pointer(ptr)
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default()
        };
        let annotations = string_map(obj.pointer("/metadata/annotations"));
        let conditions = array("/status/conditions");
        let ready_cond = conditions.iter().find(|c| str_at(c, "/type") == "Ready");
        let ready = ready_cond.is_some_and(|c| str_at(c, "/status") == "True");
        let unready = ready_cond.is_some_and(|c| str_at(c, "/status") == "False");
        let deletion = time_at(obj, "/metadata/deletionTimestamp").map(|t| {
            let grace = obj
                .pointer("/metadata/deletionGracePeriodSeconds")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            (t, grace)
        });
        let app = array("/status/containerStatuses");
        let init = array("/status/initContainerStatuses");
        // What every controller reads of a pod, as the shared view reads it.
        let pod = Pod::from_value(obj);
        JobPod {
            name: pod.name,
            namespace: str_at(obj, "/metadata/namespace").to_string(),
            uid: pod.uid,
            labels: pod.labels,
            controller: pod.controller,
            created: pod.created,
            deleting: pod.deleting,
            deletion,
            finalizer: array("/metadata/finalizers")
                .iter()
                .any(|f| f.as_str() == Some(TRACKING_FINALIZER)),
            phase: pod.phase,
            node_name: pod.node_name,
            ready,
            ready_since: pod.ready_since,
            unready_since: ready_cond
                .filter(|_| unready)
                .and_then(|c| time_at(c, "/lastTransitionTime")),
            index: annotations
                .get(COMPLETION_INDEX)
                .and_then(|v| v.parse::<i32>().ok())
                .filter(|i| *i >= 0),
            index_failures: count_annotation(&annotations, INDEX_FAILURE_COUNT),
            index_ignored_failures: count_annotation(&annotations, INDEX_IGNORED_FAILURE_COUNT),
            containers: ends(app),
            init_containers: ends(init),
            sidecars: array("/spec/initContainers")
                .iter()
                .filter(|c| str_at(c, "/restartPolicy") == "Always")
                .map(|c| str_at(c, "/name").to_string())
                .collect(),
            conditions: conditions
                .iter()
                .map(|c| {
                    (
                        str_at(c, "/type").to_string(),
                        str_at(c, "/status").to_string(),
                    )
                })
                .collect(),
            total_restarts: restarts(app).chain(restarts(init)).sum(),
            max_restarts: restarts(app).max().unwrap_or(0),
        }
    }

    pub fn succeeded(&self) -> bool {
        self.phase == "Succeeded"
    }

    pub fn failed_phase(&self) -> bool {
        self.phase == "Failed"
    }

    pub fn terminal(&self) -> bool {
        self.succeeded() || self.failed_phase()
    }

    /// Upstream `IsPodActive`: not finished and not being deleted.
    pub fn active(&self) -> bool {
        !self.terminal() && !self.deleting
    }

    /// Being deleted but not finished yet (upstream `IsPodTerminating`).
    pub fn terminating(&self) -> bool {
        self.deleting && !self.terminal()
    }

    /// The index, when it is within `completions`.
    pub fn valid_index(&self, completions: i32) -> Option<i32> {
        self.index.filter(|i| *i < completions)
    }
}

/// Upstream `isPodFailed`: Failed, or (unless only failed pods are replaced) being deleted
/// without having succeeded, as an orphan may never reach a phase.
pub fn is_failed(pod: &JobPod, job: &Job) -> bool {
    if pod.failed_phase() {
        return true;
    }
    !job.only_replace_failed() && pod.deleting && !pod.succeeded()
}

impl View for JobPod {
    fn derive(obj: &Object) -> Self {
        parsed::or_else(obj, JobPod::from_value, || JobPod {
            name: obj.name().to_string(),
            uid: obj.uid().to_string(),
            ..JobPod::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_pod_is_read_with_its_index_ends_and_finalizer() {
        let p = JobPod::from_value(&json!({
            "metadata": {"name": "pi-0-abc", "namespace": "d", "uid": "u",
                "finalizers": [TRACKING_FINALIZER],
                "annotations": {COMPLETION_INDEX: "3", INDEX_FAILURE_COUNT: "2",
                    INDEX_IGNORED_FAILURE_COUNT: "-1"},
                "deletionTimestamp": "2024-06-01T12:00:30Z", "deletionGracePeriodSeconds": 30},
            "spec": {"initContainers": [{"name": "side", "restartPolicy": "Always"}]},
            "status": {"phase": "Failed",
                "conditions": [{"type": "Ready", "status": "False",
                    "lastTransitionTime": "2024-06-01T12:00:05Z"},
                    {"type": "DisruptionTarget", "status": "True"}],
                "containerStatuses": [{"name": "main", "restartCount": 2,
                    "state": {"terminated": {"exitCode": 42,
                        "finishedAt": "2024-06-01T12:00:04Z"}}}],
                "initContainerStatuses": [{"name": "side", "restartCount": 1,
                    "state": {"running": {}}}]}}));
        assert!(p.finalizer && p.deleting && p.failed_phase() && !p.active());
        assert_eq!(p.index, Some(3));
        assert_eq!((p.index_failures, p.index_ignored_failures), (2, 0));
        assert_eq!(p.containers[0].terminated.map(|t| t.0), Some(42));
        assert_eq!(p.init_containers[0].terminated, None);
        assert_eq!(p.sidecars, ["side"]);
        assert_eq!((p.total_restarts, p.max_restarts), (3, 2));
        assert!(p.unready_since.is_some() && p.ready_since.is_none());
        assert_eq!(p.deletion.map(|d| d.1), Some(30));
        assert!(
            p.conditions
                .contains(&("DisruptionTarget".into(), "True".into()))
        );
    }

    #[test]
    fn a_job_derives_its_settings_from_the_defaulted_spec() {
        let j = Job::from_value(&json!({
            "metadata": {"name": "pi", "namespace": "d", "uid": "u"},
            "spec": {"parallelism": 3, "completions": 5, "completionMode": "Indexed",
                "backoffLimitPerIndex": 1, "podReplacementPolicy": "TerminatingOrFailed",
                "selector": {"matchLabels": {"a": "b"}},
                "template": {"spec": {"restartPolicy": "OnFailure", "containers": []}}}}))
        .unwrap();
        assert_eq!(
            (j.parallelism(), j.completions(), j.index_count()),
            (3, Some(5), 5)
        );
        assert_eq!(j.per_index_limit(), Some(1));
        assert!(j.restart_on_failure() && !j.only_replace_failed() && !j.suspended());
        assert_eq!(j.backoff_limit(), 6);
        assert!(!j.managed_elsewhere());
    }
}
