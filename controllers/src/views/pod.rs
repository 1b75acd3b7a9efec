//! The pod as the workload controllers, the disruption and node-lifecycle controllers and the
//! eviction registry read it: the few fields their decisions depend on, parsed once per
//! stored version (the informer's [`View`]) and shared by every pass that reads it.
//!
//! Planner: pure, no I/O.

use super::{ControllerRef, controller_of, i32_at, str_at, string_map, time_at};
use berth_runtime::informer::{LabelSet, Object, View, intern_labels};
use jiff::Timestamp;
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

fn max_restarts<'a>(statuses: impl Iterator<Item = &'a Value>) -> i32 {
    statuses
        .map(|c| i32_at(c, "/restartCount"))
        .max()
        .unwrap_or(0)
        .max(0)
}

impl Pod {
    /// Reads a stored pod.
    pub fn from_value(obj: &Value) -> Pod {
        Pod::read(
            obj,
            intern_labels(string_map(obj.pointer("/metadata/labels"))),
        )
    }

    /// Reads a stored pod whose labels are already known (an informer object's shared set).
    fn read(obj: &Value, labels: LabelSet) -> Pod {
        let ready_cond = obj
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().find(|c| str_at(c, "/type") == "Ready"));
        let ready = ready_cond.is_some_and(|c| str_at(c, "/status") == "True");
        let array = |ptr: &str| {
            obj.pointer(ptr)
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default()
        };
        let sidecars: Vec<&str> = array("/spec/initContainers")
            .iter()
            .filter(|c| str_at(c, "/restartPolicy") == "Always")
            .map(|c| str_at(c, "/name"))
            .collect();
        Pod {
            name: str_at(obj, "/metadata/name").to_string(),
            uid: str_at(obj, "/metadata/uid").to_string(),
            labels,
            controller: controller_of(obj),
            deleting: obj.pointer("/metadata/deletionTimestamp").is_some(),
            phase: str_at(obj, "/status/phase").to_string(),
            node_name: str_at(obj, "/spec/nodeName").to_string(),
            ready,
            ready_since: ready_cond
                .filter(|_| ready)
                .and_then(|c| time_at(c, "/lastTransitionTime")),
            deletion_cost: obj
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(DELETION_COST))
                .and_then(Value::as_str)
                .map(parse_deletion_cost)
                .unwrap_or(0),
            restarts: max_restarts(array("/status/containerStatuses").iter()),
            sidecar_restarts: max_restarts(
                array("/status/initContainerStatuses")
                    .iter()
                    .filter(|s| sidecars.contains(&str_at(s, "/name"))),
            ),
            created: time_at(obj, "/metadata/creationTimestamp"),
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
        obj.value()
            .map(|v| Pod::read(&v, obj.label_set().clone()))
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
