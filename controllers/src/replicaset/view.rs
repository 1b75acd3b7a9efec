//! What the ReplicaSet controller reads from a ReplicaSet or ReplicationController (one shape
//! for both, as upstream's adapter converts an RC into a ReplicaSet): the few fields its
//! decisions depend on, parsed once from the stored JSON. Pods are read through the shared
//! [`crate::views::Pod`].
//!
//! Planner: pure, no I/O.

pub use crate::views::{ControllerRef, Pod};
use crate::views::{controller_of, i32_at, int_at, str_at, string_map};
pub use crate::workload::parsed::ViewError;
use crate::workload::{Stored, Workload};
use berth_shared::k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;
use berth_shared::selector::LabelSelector;
use serde_json::Value;
use std::collections::BTreeMap;

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
    /// The API resource of sets of this kind.
    pub fn resource(self) -> &'static berth_shared::resource::ResourceType {
        match self {
            Kind::ReplicaSet => berth_shared::resource::REPLICA_SETS,
            Kind::ReplicationController => berth_shared::resource::REPLICATION_CONTROLLERS,
        }
    }

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

impl Stored for Set {
    type Error = ViewError;
    /// Reads a set of either kind, told by its `apiVersion` and `kind`.
    fn from_value(v: &Value) -> Result<Set, ViewError> {
        let (api_version, kind) = (str_at(v, "/apiVersion"), str_at(v, "/kind"));
        let Some(k) = Kind::of_owner(api_version, kind) else {
            return Err(ViewError::Kind(format!("{api_version} {kind}")));
        };
        Set::from_value(k, v)
    }
}

impl Workload for Set {
    fn selector(&self) -> &LabelSelector {
        &self.selector
    }
    fn deleting(&self) -> bool {
        self.deleting
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
}
