//! What the ReplicaSet controller reads from a ReplicaSet or ReplicationController (one shape
//! for both, as upstream's adapter converts an RC into a ReplicaSet) and from pods: the few
//! fields its decisions depend on, parsed once from the stored JSON. Pure: no I/O.
//!
//! Planner: pure, no I/O.

use berth_shared::k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;
use berth_shared::selector::{LabelSelector, SelectorError};
use jiff::Timestamp;
use serde_json::Value;
use std::collections::BTreeMap;

/// The pod annotation that orders pods on scale-down (lower first).
pub const DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// Which API the set comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// `apps/v1` ReplicaSet (set-based selector).
    ReplicaSet,
    /// `v1` ReplicationController (map selector).
    ReplicationController,
}

impl Kind {
    pub fn api_version(self) -> &'static str {
        match self {
            Kind::ReplicaSet => "apps/v1",
            Kind::ReplicationController => "v1",
        }
    }

    pub fn kind(self) -> &'static str {
        match self {
            Kind::ReplicaSet => "ReplicaSet",
            Kind::ReplicationController => "ReplicationController",
        }
    }

    pub fn group(self) -> &'static str {
        match self {
            Kind::ReplicaSet => "apps",
            Kind::ReplicationController => "",
        }
    }

    pub fn plural(self) -> &'static str {
        match self {
            Kind::ReplicaSet => "replicasets",
            Kind::ReplicationController => "replicationcontrollers",
        }
    }

    /// The event source, as upstream names the two controllers.
    pub fn component(self) -> &'static str {
        match self {
            Kind::ReplicaSet => "replicaset-controller",
            Kind::ReplicationController => "replication-controller",
        }
    }

    /// The kind an ownerReference points at, when it is one of ours.
    pub fn of_owner(api_version: &str, kind: &str) -> Option<Kind> {
        [Kind::ReplicaSet, Kind::ReplicationController]
            .into_iter()
            .find(|k| k.api_version() == api_version && k.kind() == kind)
    }
}

/// Why a set could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    #[error("object has no metadata.uid")]
    NoUid,
    #[error("invalid selector: {0}")]
    Selector(#[from] SelectorError),
    #[error("decoding selector: {0}")]
    Decode(#[from] serde_json::Error),
}

impl ViewError {
    /// Retrying cannot help: the object itself must change.
    pub fn is_transient(&self) -> bool {
        false
    }
}

/// One `ReplicaFailure`-style condition of the set's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub message: String,
    pub last_transition_time: Option<String>,
}

/// The status fields the controller owns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    pub replicas: i32,
    pub fully_labeled_replicas: i32,
    pub ready_replicas: i32,
    pub available_replicas: i32,
    pub observed_generation: i64,
    pub conditions: Vec<Condition>,
}

/// A ReplicaSet or ReplicationController, normalised.
#[derive(Debug, Clone)]
pub struct Set {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub generation: i64,
    /// `spec.replicas` (defaulted to 1 by admission).
    pub replicas: i32,
    pub min_ready_seconds: i32,
    pub selector: LabelSelector,
    /// The pod template (`spec.template`), as stored.
    pub template: Value,
    pub template_labels: BTreeMap<String, String>,
    pub deleting: bool,
    /// The uid of the set's own controller (a Deployment), for ranking pods on nodes.
    pub controller_uid: Option<String>,
    pub status: Status,
}

/// A controller ownerReference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
}

/// A pod, as the controller sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pod {
    pub name: String,
    pub uid: String,
    pub labels: BTreeMap<String, String>,
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

fn str_at<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

fn int_at(v: &Value, ptr: &str) -> Option<i64> {
    v.pointer(ptr).and_then(Value::as_i64)
}

fn time_at(v: &Value, ptr: &str) -> Option<Timestamp> {
    v.pointer(ptr)?.as_str()?.parse().ok()
}

pub fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// The ownerReference with `controller: true`, if any.
pub fn controller_of(obj: &Value) -> Option<ControllerRef> {
    obj.pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        .map(|r| ControllerRef {
            api_version: str_at(r, "/apiVersion").to_string(),
            kind: str_at(r, "/kind").to_string(),
            name: str_at(r, "/name").to_string(),
            uid: str_at(r, "/uid").to_string(),
        })
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

fn conditions(status: Option<&Value>) -> Vec<Condition> {
    status
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|c| Condition {
                    type_: str_at(c, "/type").to_string(),
                    status: str_at(c, "/status").to_string(),
                    reason: str_at(c, "/reason").to_string(),
                    message: str_at(c, "/message").to_string(),
                    last_transition_time: c
                        .get("lastTransitionTime")
                        .and_then(Value::as_str)
                        .map(String::from),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn i32_at(v: &Value, ptr: &str) -> i32 {
    int_at(v, ptr)
        .and_then(|n| i32::try_from(n).ok())
        .unwrap_or_default()
}

impl Set {
    /// Reads a stored ReplicaSet or ReplicationController.
    pub fn from_value(kind: Kind, obj: &Value) -> Result<Set, ViewError> {
        let uid = str_at(obj, "/metadata/uid");
        if uid.is_empty() {
            return Err(ViewError::NoUid);
        }
        let selector = match (kind, obj.pointer("/spec/selector")) {
            (_, None | Some(Value::Null)) => LabelSelector::nothing(),
            (Kind::ReplicaSet, Some(sel)) => {
                let sel: metav1::LabelSelector = serde_json::from_value(sel.clone())?;
                LabelSelector::from_k8s(&sel)?
            }
            (Kind::ReplicationController, Some(sel)) => {
                LabelSelector::from_set(&string_map(Some(sel)))
            }
        };
        let template = obj
            .pointer("/spec/template")
            .cloned()
            .unwrap_or(Value::Null);
        let status = obj.get("status");
        Ok(Set {
            kind,
            namespace: str_at(obj, "/metadata/namespace").to_string(),
            name: str_at(obj, "/metadata/name").to_string(),
            uid: uid.to_string(),
            generation: int_at(obj, "/metadata/generation").unwrap_or_default(),
            replicas: int_at(obj, "/spec/replicas")
                .and_then(|n| i32::try_from(n).ok())
                .unwrap_or(1),
            min_ready_seconds: i32_at(obj, "/spec/minReadySeconds"),
            selector,
            template_labels: string_map(template.pointer("/metadata/labels")),
            template,
            deleting: obj.pointer("/metadata/deletionTimestamp").is_some(),
            controller_uid: controller_of(obj).map(|c| c.uid),
            status: Status {
                replicas: i32_at(obj, "/status/replicas"),
                fully_labeled_replicas: i32_at(obj, "/status/fullyLabeledReplicas"),
                ready_replicas: i32_at(obj, "/status/readyReplicas"),
                available_replicas: i32_at(obj, "/status/availableReplicas"),
                observed_generation: int_at(obj, "/status/observedGeneration").unwrap_or(0),
                conditions: conditions(status),
            },
        })
    }
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
            labels: string_map(obj.pointer("/metadata/labels")),
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
    fn a_replication_controller_selector_is_a_map_of_equalities() {
        let rc = json!({"metadata": {"name": "nginx", "namespace": "d", "uid": "u"},
            "spec": {"replicas": 3, "selector": {"app": "nginx"},
                     "template": {"metadata": {"labels": {"app": "nginx"}}}}});
        let set = Set::from_value(Kind::ReplicationController, &rc).unwrap();
        let labels = |v: &str| BTreeMap::from([("app".to_string(), v.to_string())]);
        assert!(set.selector.matches(&labels("nginx")));
        assert!(!set.selector.matches(&labels("other")));
        assert_eq!(set.replicas, 3);
    }

    #[test]
    fn a_replica_set_selector_may_use_expressions() {
        let rs = json!({"metadata": {"name": "f", "namespace": "d", "uid": "u", "generation": 2},
            "spec": {"selector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["frontend"]}]}},
            "status": {"replicas": 2, "observedGeneration": 1,
                       "conditions": [{"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": "m"}]}});
        let set = Set::from_value(Kind::ReplicaSet, &rs).unwrap();
        let labels = BTreeMap::from([("tier".to_string(), "frontend".to_string())]);
        assert!(set.selector.matches(&labels));
        assert_eq!(
            set.replicas, 1,
            "admission defaults replicas; absent reads as 1"
        );
        assert_eq!(set.generation, 2);
        assert_eq!(set.status.replicas, 2);
        assert_eq!(set.status.conditions[0].reason, "FailedCreate");
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
