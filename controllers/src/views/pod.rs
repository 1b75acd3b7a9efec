//! The pod as the workload controllers, the disruption and node-lifecycle controllers and the
//! eviction registry read it: the few fields their decisions depend on, parsed once per
//! stored version (the informer's [`View`]) and shared by every pass that reads it.
//!
//! Planner: pure, no I/O.

use super::{ControllerRef, string_map};
use berth_runtime::informer::{LabelSet, Object, View, intern_labels};
use jiff::Timestamp;
use serde::Deserialize;
use serde_json::Value;

/// The pod annotation that orders pods on scale-down (lower first).
pub const DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// A pod, as the controller sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pod {
    pub name: String,
    pub uid: String,
    /// Shared with every pod that has the same labels (the store's interned set).
    pub labels: LabelSet,
    pub controller: Option<ControllerRef>,
    pub deleting: bool,
    /// `status.phase`; empty when unset.
    pub phase: String,
    /// `spec.nodeName`; empty while unscheduled.
    pub node_name: String,
    /// The Ready condition is True.
    pub ready: bool,
    /// `lastTransitionTime` of the True Ready condition.
    pub ready_since: Option<Timestamp>,
    /// The pod-deletion-cost annotation; 0 when unset or invalid.
    pub deletion_cost: i32,
    /// Highest restart count of the regular containers.
    pub restarts: i32,
    /// Highest restart count of the sidecars (init containers with restartPolicy Always).
    pub sidecar_restarts: i32,
    pub created: Option<Timestamp>,
}

/// Upstream's `GetDeletionCostFromPodAnnotations`: a decimal int32 without a `+` sign or
/// leading zeros; anything else counts as 0.
pub fn parse_deletion_cost(value: &str) -> i32 {
    let first_ok = match value.as_bytes() {
        [] => false,
        [b'-', ..] => true,
        [b'0'] => true,
        [b'1'..=b'9', ..] => true,
        _ => false,
    };
    if !first_ok {
        return 0;
    }
    value.parse().unwrap_or(0)
}

/// The fields of a stored pod the view reads, decoded without the rest (a pod's spec and
/// managedFields are skipped, not built into a JSON value). The types are the API's, which
/// admission checked before the pod was stored.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct PodDoc {
    metadata: MetaDoc,
    spec: SpecDoc,
    status: StatusDoc,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct MetaDoc {
    name: Option<String>,
    uid: Option<String>,
    creation_timestamp: Option<String>,
    deletion_timestamp: Option<String>,
    annotations: Option<AnnotationsDoc>,
    owner_references: Option<Vec<OwnerDoc>>,
}

/// Only the annotation the view reads; the others are skipped.
#[derive(Debug, Default, Deserialize)]
struct AnnotationsDoc {
    #[serde(rename = "controller.kubernetes.io/pod-deletion-cost")]
    deletion_cost: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct OwnerDoc {
    api_version: Option<String>,
    kind: Option<String>,
    name: Option<String>,
    uid: Option<String>,
    controller: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct SpecDoc {
    node_name: Option<String>,
    init_containers: Option<Vec<InitContainerDoc>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct InitContainerDoc {
    name: Option<String>,
    restart_policy: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct StatusDoc {
    phase: Option<String>,
    conditions: Option<Vec<ConditionDoc>>,
    container_statuses: Option<Vec<ContainerStatusDoc>>,
    init_container_statuses: Option<Vec<ContainerStatusDoc>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct ConditionDoc {
    #[serde(rename = "type")]
    type_: Option<String>,
    status: Option<String>,
    last_transition_time: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct ContainerStatusDoc {
    name: Option<String>,
    restart_count: Option<i64>,
}

fn max_restarts<'a>(statuses: impl Iterator<Item = &'a ContainerStatusDoc>) -> i32 {
    statuses
        .map(|c| {
            c.restart_count
                .and_then(|n| i32::try_from(n).ok())
                .unwrap_or(0)
        })
        .max()
        .unwrap_or(0)
        .max(0)
}

fn time_of(t: &Option<String>) -> Option<Timestamp> {
    t.as_deref()?.parse().ok()
}

impl Pod {
    /// Reads a stored pod.
    pub fn from_value(obj: &Value) -> Pod {
        let doc = PodDoc::deserialize(obj).unwrap_or_default();
        let labels = intern_labels(string_map(obj.pointer("/metadata/labels")));
        Pod::read(doc, labels)
    }

    /// Reads a stored pod's fields whose labels are already known (an informer object's
    /// shared set).
    fn read(doc: PodDoc, labels: LabelSet) -> Pod {
        let PodDoc {
            metadata: meta,
            spec,
            status,
        } = doc;
        let conditions = status.conditions.unwrap_or_default();
        let ready_cond = conditions
            .iter()
            .find(|c| c.type_.as_deref() == Some("Ready"));
        let ready = ready_cond.is_some_and(|c| c.status.as_deref() == Some("True"));
        let sidecars: Vec<String> = spec
            .init_containers
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c.restart_policy.as_deref() == Some("Always"))
            .filter_map(|c| c.name)
            .collect();
        let controller = meta
            .owner_references
            .unwrap_or_default()
            .into_iter()
            .find(|r| r.controller == Some(true))
            .map(|r| ControllerRef {
                api_version: r.api_version.unwrap_or_default(),
                kind: r.kind.unwrap_or_default(),
                name: r.name.unwrap_or_default(),
                uid: r.uid.unwrap_or_default(),
            });
        Pod {
            name: meta.name.unwrap_or_default(),
            uid: meta.uid.unwrap_or_default(),
            labels,
            controller,
            deleting: meta.deletion_timestamp.is_some(),
            phase: status.phase.unwrap_or_default(),
            node_name: spec.node_name.unwrap_or_default(),
            ready,
            ready_since: ready_cond
                .filter(|_| ready)
                .and_then(|c| time_of(&c.last_transition_time)),
            deletion_cost: meta
                .annotations
                .and_then(|a| a.deletion_cost)
                .map(|c| parse_deletion_cost(&c))
                .unwrap_or(0),
            restarts: max_restarts(status.container_statuses.iter().flatten()),
            sidecar_restarts: max_restarts(
                status
                    .init_container_statuses
                    .iter()
                    .flatten()
                    .filter(|s| s.name.as_ref().is_some_and(|n| sidecars.contains(n))),
            ),
            created: time_of(&meta.creation_timestamp),
        }
    }

    /// Upstream's `IsPodActive`: not Succeeded, not Failed, not terminating.
    pub fn is_active(&self) -> bool {
        self.phase != "Succeeded" && self.phase != "Failed" && !self.deleting
    }
}

/// A pod parsed once per version, shared by every pass that reads it.
impl View for Pod {
    fn derive(obj: &Object) -> Self {
        obj.decode::<PodDoc>()
            .map(|doc| Pod::read(doc, obj.label_set().clone()))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_derived_pod_holds_the_stored_objects_label_set() {
        let obj = Object::from_value(&json!({"metadata": {"name": "p", "namespace": "d",
            "labels": {"app": "web"}}}));
        let pod = obj.view::<Pod>();
        assert!(std::sync::Arc::ptr_eq(&pod.labels, obj.label_set()));
        assert_eq!(pod.labels.get("app").map(String::as_str), Some("web"));
    }

    #[test]
    fn deletion_cost_accepts_only_canonical_int32_decimals() {
        for (raw, want) in [
            ("0", 0),
            ("10", 10),
            ("-5", -5),
            ("2147483647", i32::MAX),
            ("-2147483648", i32::MIN),
            ("+10", 0),
            ("008", 0),
            ("2147483648", 0),
            ("abc", 0),
            ("", 0),
        ] {
            assert_eq!(parse_deletion_cost(raw), want, "{raw:?}");
        }
    }

    #[test]
    fn pod_facts_come_from_conditions_statuses_and_annotations() {
        let pod = json!({"metadata": {"name": "p", "uid": "u",
                "annotations": {DELETION_COST: "-3"},
                "creationTimestamp": "2024-01-01T00:00:00Z",
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Other", "name": "x", "uid": "x"},
                    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "r", "controller": true}]},
            "spec": {"nodeName": "n1", "initContainers": [
                {"name": "side", "restartPolicy": "Always"}, {"name": "init"}]},
            "status": {"phase": "Running",
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2024-01-01T00:01:00Z"}],
                "containerStatuses": [{"name": "a", "restartCount": 2}, {"name": "b", "restartCount": 5}],
                "initContainerStatuses": [{"name": "side", "restartCount": 7}, {"name": "init", "restartCount": 9}]}});
        let p = Pod::from_value(&pod);
        assert!(p.ready);
        assert_eq!(p.ready_since, Some("2024-01-01T00:01:00Z".parse().unwrap()));
        assert_eq!((p.restarts, p.sidecar_restarts), (5, 7));
        assert_eq!(p.deletion_cost, -3);
        assert_eq!(p.controller.as_ref().unwrap().uid, "r");
        assert_eq!(p.node_name, "n1");
        assert!(p.is_active());
        // The informer's view decodes the same fields from the stored bytes.
        let viewed = Object::from_value(&pod).view::<Pod>();
        assert_eq!(*viewed, p);
    }

    #[test]
    fn a_pod_without_the_fields_read_is_an_empty_view_of_its_name() {
        let obj = Object::from_value(&json!({"metadata": {"name": "p", "namespace": "d",
            "annotations": {"other": "x"}, "deletionTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "c", "image": "i"}]}}));
        let p = obj.view::<Pod>();
        assert_eq!(p.name, "p");
        assert!(p.deleting && !p.ready && p.controller.is_none());
        assert_eq!((p.deletion_cost, p.restarts, p.sidecar_restarts), (0, 0, 0));
    }

    #[test]
    fn finished_and_terminating_pods_are_not_active() {
        for (phase, deleting) in [("Succeeded", false), ("Failed", false), ("Running", true)] {
            let p = Pod {
                phase: phase.into(),
                deleting,
                ..Pod::default()
            };
            assert!(!p.is_active(), "{phase} deleting={deleting}");
        }
    }
}
