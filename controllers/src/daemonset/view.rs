//! What the DaemonSet controller reads from a DaemonSet, its ControllerRevisions, its pods and
//! the nodes: the fields its decisions depend on, parsed once per object version from the
//! stored JSON. Pods are the ReplicaSet controller's view (shared with it through the pod
//! informer) plus the node a daemon pod is meant for.
//!
//! Planner: pure, no I/O.

use super::eligibility::Placement;
pub use crate::history::Revision;
pub use crate::views::Pod;
use crate::views::string_map;
pub use crate::workload::parsed::ViewError;
use crate::workload::parsed::{or_default, owner_view, required_uid, stored_template};
use berth_runtime::informer::{Object, View};
use berth_shared::k8s_openapi::api::apps::v1 as apps;
use berth_shared::k8s_openapi::api::core::v1 as core;
use berth_shared::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use berth_shared::scheduling::Taint;
use berth_shared::scheduling::node_affinity::NODE_NAME_FIELD;
use berth_shared::selector::LabelSelector;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

pub use berth_shared::admission::TEMPLATE_GENERATION;

/// The label naming the ControllerRevision a daemon pod was made from (upstream's
/// `controller-revision-hash`, `apps.DefaultDaemonSetUniqueLabelKey`).
pub const HASH_LABEL: &str = "controller-revision-hash";
/// The label carrying the template generation a daemon pod was made from.
pub const GENERATION_LABEL: &str = "pod-template-generation";

/// How old pods make way for new ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Strategy {
    /// New pods only where the old ones were deleted by someone else.
    OnDelete,
    RollingUpdate {
        max_unavailable: IntOrString,
        max_surge: IntOrString,
    },
}

/// The status fields the controller writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    pub desired_number_scheduled: i32,
    pub current_number_scheduled: i32,
    pub number_misscheduled: i32,
    pub number_ready: i32,
    pub updated_number_scheduled: i32,
    pub number_available: i32,
    pub number_unavailable: i32,
    pub observed_generation: i64,
}

/// A DaemonSet, normalised.
#[derive(Debug, Clone)]
pub struct DaemonSet {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub generation: i64,
    pub selector: LabelSelector,
    /// `spec.template` as stored (admission defaulted it).
    pub template: Value,
    /// The same, typed, for hashing and for making pods.
    pub pod_template: core::PodTemplateSpec,
    /// The template generation annotation, if it parses.
    pub template_generation: Option<i64>,
    /// Which nodes the template's pods may run on.
    pub placement: Placement,
    pub strategy: Strategy,
    pub min_ready_seconds: i32,
    pub revision_history_limit: i32,
    pub annotations: BTreeMap<String, String>,
    pub deleting: bool,
    pub status: Status,
    pub collision_count: Option<i32>,
}

impl DaemonSet {
    /// Reads a stored DaemonSet.
    pub fn from_value(obj: &Value) -> Result<DaemonSet, ViewError> {
        let typed: apps::DaemonSet = serde_json::from_value(obj.clone())?;
        let meta = &typed.metadata;
        let uid = required_uid(meta.uid.as_ref())?;
        let spec = typed.spec.unwrap_or_default();
        let strategy = match &spec.update_strategy {
            Some(s) if s.type_.as_deref() == Some("OnDelete") => Strategy::OnDelete,
            other => {
                let ru = other.as_ref().and_then(|s| s.rolling_update.as_ref());
                Strategy::RollingUpdate {
                    max_unavailable: ru
                        .and_then(|r| r.max_unavailable.clone())
                        .unwrap_or(IntOrString::Int(1)),
                    max_surge: ru
                        .and_then(|r| r.max_surge.clone())
                        .unwrap_or(IntOrString::Int(0)),
                }
            }
        };
        let status = typed.status.unwrap_or_default();
        let annotations = meta.annotations.clone().unwrap_or_default();
        Ok(DaemonSet {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            generation: meta.generation.unwrap_or(0),
            selector: LabelSelector::from_k8s(&spec.selector)?,
            template: stored_template(obj),
            placement: Placement::of_template(spec.template.spec.as_ref()),
            pod_template: spec.template,
            template_generation: annotations
                .get(TEMPLATE_GENERATION)
                .and_then(|g| g.parse().ok()),
            strategy,
            min_ready_seconds: spec.min_ready_seconds.unwrap_or(0),
            revision_history_limit: spec.revision_history_limit.unwrap_or(10),
            annotations,
            deleting: meta.deletion_timestamp.is_some(),
            status: Status {
                desired_number_scheduled: status.desired_number_scheduled,
                current_number_scheduled: status.current_number_scheduled,
                number_misscheduled: status.number_misscheduled,
                number_ready: status.number_ready,
                updated_number_scheduled: status.updated_number_scheduled.unwrap_or(0),
                number_available: status.number_available.unwrap_or(0),
                number_unavailable: status.number_unavailable.unwrap_or(0),
                observed_generation: status.observed_generation.unwrap_or(0),
            },
            collision_count: status.collision_count,
            uid,
        })
    }

    /// The labels of the pod template.
    pub fn template_labels(&self) -> BTreeMap<String, String> {
        self.pod_template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.clone())
            .unwrap_or_default()
    }

    /// Upstream `IsPodUpdated`: the pod carries the current revision's hash, or the current
    /// template generation (how pods made before revisions existed are recognised).
    pub fn is_updated(&self, pod: &Pod, hash: &str) -> bool {
        let by_hash =
            !hash.is_empty() && pod.labels.get(HASH_LABEL).map(String::as_str) == Some(hash);
        let by_generation = self.template_generation.is_some_and(|g| {
            pod.labels.get(GENERATION_LABEL).map(String::as_str) == Some(g.to_string().as_str())
        });
        by_hash || by_generation
    }
}

owner_view!(DaemonSet);

/// A claimed daemon pod and the node it is meant for.
#[derive(Debug, Clone)]
pub struct DaemonPod {
    pub pod: Arc<Pod>,
    /// Upstream `GetTargetNodeName`: `spec.nodeName`, or for a pod not bound yet the node its
    /// `metadata.name In [node]` affinity names; `None` for neither (such a pod is ignored).
    pub node: Option<String>,
}

/// The node an unbound pod's `matchFields metadata.name In [one node]` names (upstream
/// `GetTargetNodeName` for pods without `spec.nodeName`).
pub fn pinned_node(spec: Option<&Value>) -> Option<String> {
    let terms = spec?
        .pointer("/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms")?
        .as_array()?;
    terms.iter().find_map(|term| {
        term.get("matchFields")?.as_array()?.iter().find_map(|r| {
            let key = r.get("key")?.as_str()?;
            let op = r.get("operator")?.as_str()?;
            match r.get("values")?.as_array()?.as_slice() {
                [v] if key == NODE_NAME_FIELD && op == "In" => v.as_str().map(String::from),
                _ => None,
            }
        })
    })
}

/// A node as eligibility sees it: its name, labels and the taints it carries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Node {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
}

impl Node {
    /// Reads a stored node; taints of effects this version does not know are dropped, as the
    /// scheduler drops them.
    pub fn from_value(obj: &Value) -> Node {
        let taints: Vec<core::Taint> = obj
            .pointer("/spec/taints")
            .and_then(|t| serde_json::from_value(t.clone()).ok())
            .unwrap_or_default();
        Node {
            name: obj
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            labels: string_map(obj.pointer("/metadata/labels")),
            taints: taints.iter().filter_map(Taint::from_k8s).collect(),
        }
    }
}

impl View for Node {
    fn derive(obj: &Object) -> Self {
        or_default(obj, Node::from_value)
    }
}

/// The node a daemon pod is meant for (see [`DaemonPod::node`]).
pub struct TargetNode(pub Option<String>);

impl View for TargetNode {
    fn derive(obj: &Object) -> Self {
        if let Some(n) = obj.field("spec.nodeName").filter(|n| !n.is_empty()) {
            return TargetNode(Some(n.to_string()));
        }
        TargetNode(obj.value().ok().and_then(|v| pinned_node(v.get("spec"))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_daemon_set_is_read_with_its_strategy_generation_and_status() {
        let ds = DaemonSet::from_value(&json!({
            "metadata": {"name": "agent", "namespace": "ops", "uid": "u", "generation": 3,
                "annotations": {TEMPLATE_GENERATION: "2"}},
            "spec": {"selector": {"matchLabels": {"app": "agent"}},
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%"}},
                "template": {"metadata": {"labels": {"app": "agent"}},
                    "spec": {"containers": [{"name": "c", "image": "x"}]}}},
            "status": {"desiredNumberScheduled": 3, "numberReady": 2, "observedGeneration": 2,
                "collisionCount": 1}}))
        .unwrap();
        assert_eq!(ds.template_generation, Some(2));
        assert_eq!(
            ds.strategy,
            Strategy::RollingUpdate {
                max_unavailable: IntOrString::String("25%".into()),
                max_surge: IntOrString::Int(0)
            }
        );
        assert_eq!(ds.revision_history_limit, 10);
        assert_eq!(ds.status.desired_number_scheduled, 3);
        assert_eq!(ds.status.observed_generation, 2);
        assert_eq!(ds.collision_count, Some(1));
        assert_eq!(
            ds.template_labels().get("app").map(String::as_str),
            Some("agent")
        );
    }

    #[test]
    fn on_delete_is_read_as_such() {
        let ds = DaemonSet::from_value(&json!({
            "metadata": {"name": "agent", "uid": "u"},
            "spec": {"selector": {"matchLabels": {"app": "agent"}},
                "updateStrategy": {"type": "OnDelete"},
                "template": {"metadata": {"labels": {"app": "agent"}}}}}))
        .unwrap();
        assert_eq!(ds.strategy, Strategy::OnDelete);
    }

    #[test]
    fn a_pod_is_updated_by_its_hash_or_its_template_generation() {
        let ds = DaemonSet::from_value(&json!({
            "metadata": {"name": "agent", "uid": "u", "annotations": {TEMPLATE_GENERATION: "4"}},
            "spec": {"selector": {"matchLabels": {"app": "agent"}},
                "template": {"metadata": {"labels": {"app": "agent"}}}}}))
        .unwrap();
        let pod = |labels: &[(&str, &str)]| Pod {
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>()
                .into(),
            ..Pod::default()
        };
        assert!(ds.is_updated(&pod(&[(HASH_LABEL, "abc")]), "abc"));
        assert!(ds.is_updated(&pod(&[(GENERATION_LABEL, "4")]), "abc"));
        assert!(!ds.is_updated(&pod(&[(HASH_LABEL, "old"), (GENERATION_LABEL, "3")]), "abc"));
        assert!(!ds.is_updated(&pod(&[]), ""));
    }

    #[test]
    fn an_unbound_pod_is_meant_for_the_node_its_match_fields_name() {
        let spec = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Exists"}]},
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]}}}});
        assert_eq!(pinned_node(Some(&spec)), Some("n2".into()));
        let two = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]}]}}}});
        assert_eq!(pinned_node(Some(&two)), None);
        assert_eq!(pinned_node(Some(&json!({}))), None);
    }

    #[test]
    fn a_node_keeps_its_taints_of_known_effects() {
        let n = Node::from_value(
            &json!({"metadata": {"name": "n1", "labels": {"disk": "ssd"}},
            "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "Sometimes"}]}}),
        );
        assert_eq!(n.name, "n1");
        assert_eq!(n.taints.len(), 1);
        assert_eq!(n.labels.get("disk").map(String::as_str), Some("ssd"));
    }
}
