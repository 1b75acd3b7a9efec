//! What the scheduler knows about a pod or a node, parsed once from the stored JSON into
//! compact, compiled forms (integer requests, compiled selectors and terms), so that no
//! scheduling decision re-reads JSON.
//!
//! Planner: pure, no I/O.

use super::terms::{HOSTNAME_LABEL, PodAffinity, PodSelector, SpreadConstraint, ZONE_LABEL};
use berth_runtime::informer::{LabelSet, intern_labels};
use berth_shared::interner::Interner;
use berth_shared::k8s_openapi::api::core::v1 as core;
use berth_shared::scheduling::resources::{
    self, ContainerRequests, DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST, ResourceList,
};
use berth_shared::scheduling::{
    HostPort, PreferredNodeAffinity, RequiredNodeAffinity, Resources, Taint, Toleration, ports,
};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

pub type Labels = BTreeMap<String, String>;

/// A pod's queue and cache key: `namespace/name`.
pub type PodKey = Arc<str>;

/// The scheduler this one answers for.
pub const SCHEDULER_NAME: &str = "default-scheduler";

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct OwnerDoc {
    kind: String,
    uid: String,
    controller: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct MetaDoc {
    name: String,
    namespace: String,
    uid: String,
    resource_version: String,
    labels: Option<Labels>,
    deletion_timestamp: Option<String>,
    owner_references: Option<Vec<OwnerDoc>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RequirementsDoc {
    requests: Option<ResourceList>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct ContainerDoc {
    resources: Option<RequirementsDoc>,
    ports: Option<Vec<core::ContainerPort>>,
    restart_policy: Option<String>,
}

impl ContainerDoc {
    fn requests(&self) -> ContainerRequests<'_> {
        ContainerRequests {
            requests: self.resources.as_ref().and_then(|r| r.requests.as_ref()),
            sidecar: self.restart_policy.as_deref() == Some("Always"),
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct PodSpecDoc {
    node_name: Option<String>,
    scheduler_name: Option<String>,
    node_selector: Option<BTreeMap<String, String>>,
    affinity: Option<core::Affinity>,
    tolerations: Option<Vec<core::Toleration>>,
    topology_spread_constraints: Option<Vec<core::TopologySpreadConstraint>>,
    containers: Option<Vec<ContainerDoc>>,
    init_containers: Option<Vec<ContainerDoc>>,
    overhead: Option<ResourceList>,
    priority: Option<i32>,
    preemption_policy: Option<String>,
    scheduling_gates: Option<Vec<serde::de::IgnoredAny>>,
    volumes: Option<Vec<VolumeDoc>>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct ClaimSourceDoc {
    claim_name: String,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct VolumeDoc {
    persistent_volume_claim: Option<ClaimSourceDoc>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct PodStatusDoc {
    phase: Option<String>,
    nominated_node_name: Option<String>,
    start_time: Option<String>,
    conditions: Option<Vec<ConditionDoc>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ConditionDoc {
    #[serde(rename = "type")]
    kind: String,
    status: String,
    reason: Option<String>,
    message: Option<String>,
}

/// The fingerprint of an unschedulable message, kept instead of the message (one per pending
/// pod) to tell whether writing the condition again would change anything.
pub fn message_fingerprint(message: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    message.hash(&mut h);
    h.finish()
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct PodDoc {
    metadata: MetaDoc,
    spec: PodSpecDoc,
    status: PodStatusDoc,
}

/// Everything the scheduler uses about one pod.
#[derive(Debug, Clone, PartialEq)]
pub struct PodInfo {
    pub key: PodKey,
    pub namespace: Arc<str>,
    pub name: Arc<str>,
    pub uid: Arc<str>,
    pub resource_version: String,
    /// Shared with every pod (and stored object) that has the same labels.
    pub labels: LabelSet,
    /// The uid of the controller owning the pod, when it is a ReplicaSet, ReplicationController
    /// or StatefulSet (the owners the default spreading counts).
    pub controller: Option<Arc<str>>,
    pub scheduler_name: String,
    pub node_name: Option<Arc<str>>,
    pub terminating: bool,
    /// Succeeded or Failed: holds no resources any more.
    pub terminal: bool,
    /// Has scheduling gates: not to be scheduled yet.
    pub gated: bool,
    pub priority: i32,
    /// `preemptionPolicy: Never`: waits instead of preempting.
    pub preempt_never: bool,
    /// `status.nominatedNodeName`: where its preemption made room.
    pub nominated_node: Option<Arc<str>>,
    /// `status.startTime`, for choosing victims (the most recently started go first).
    pub start_time: Option<jiff::Timestamp>,
    /// The [`message_fingerprint`] of its `PodScheduled=False` condition with reason
    /// `Unschedulable`, when it has one: as upstream compares with its cached pod, the same
    /// condition is not written again.
    pub unschedulable: Option<u64>,
    pub requests: Resources,
    /// cpu (millicores) and memory with the scoring defaults for containers requesting none.
    pub non_zero_cpu: i64,
    pub non_zero_memory: i64,
    pub host_ports: Vec<HostPort>,
    pub required_node: RequiredNodeAffinity,
    pub preferred_node: PreferredNodeAffinity,
    /// Shared with every pod that has the same ones (the pods of one template).
    pub tolerations: Arc<Vec<Toleration>>,
    pub affinity: PodAffinity,
    /// Shared likewise: the system defaults are one value per controller.
    pub spread: Arc<Vec<SpreadConstraint>>,
    /// `spread` holds the system defaults (the pod has no constraints of its own).
    pub spread_defaulted: bool,
    /// The PersistentVolumeClaims its volumes name.
    pub claims: Vec<String>,
    /// What its claims' volumes demand of a node (filled in at decision time, see
    /// [`super::volumes`]).
    pub volumes: Arc<super::volumes::PodVolumes>,
}

/// Tolerations and spread constraints shared between the pods that have equal ones: every pod
/// carries the two default NoExecute tolerations, and the pods of one controller the same
/// default spread constraints (about 440 bytes a pod otherwise).
static TOLERATIONS: Interner<Vec<Toleration>> = Interner::new();
static SPREAD: Interner<Vec<SpreadConstraint>> = Interner::new();

/// A hash equal spread constraints share (their selectors have no `Hash`; equality decides).
fn spread_hash(constraints: &[SpreadConstraint]) -> u64 {
    let mut h = DefaultHasher::new();
    for c in constraints {
        (&c.topology_key, c.max_skew, c.hard).hash(&mut h);
        if let PodSelector::Controller(uid) = &c.selector {
            uid.hash(&mut h);
        }
    }
    h.finish()
}

impl PodInfo {
    /// Parses a stored pod.
    pub fn parse(data: &[u8]) -> Result<PodInfo, serde_json::Error> {
        let doc: PodDoc = serde_json::from_slice(data)?;
        Ok(PodInfo::from_doc(doc))
    }

    fn from_doc(doc: PodDoc) -> PodInfo {
        let PodDoc {
            metadata: m,
            spec: s,
            status,
        } = doc;
        let labels = intern_labels(m.labels.unwrap_or_default());
        let containers = s.containers.unwrap_or_default();
        let init = s.init_containers.unwrap_or_default();
        let requests_with = |defaults| {
            resources::effective_requests(
                containers.iter().map(ContainerDoc::requests),
                init.iter().map(ContainerDoc::requests),
                s.overhead.as_ref(),
                defaults,
            )
        };
        let requests = requests_with(None);
        let non_zero = requests_with(Some((DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST)));
        let host_ports =
            ports::host_ports(containers.iter().flat_map(|c| c.ports.iter().flatten()));
        let controller = m
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .filter(|o| {
                matches!(
                    o.kind.as_str(),
                    "ReplicaSet" | "ReplicationController" | "StatefulSet"
                )
            })
            .map(|o| Arc::<str>::from(o.uid.as_str()));
        let node_affinity = s.affinity.as_ref().and_then(|a| a.node_affinity.as_ref());
        let own_constraints = s.topology_spread_constraints.unwrap_or_default();
        let (spread, spread_defaulted) = match (&controller, own_constraints.is_empty()) {
            (Some(c), true) => (SpreadConstraint::system_defaults(c), true),
            _ => (
                own_constraints
                    .iter()
                    .map(|c| SpreadConstraint::compile(c, &labels))
                    .collect(),
                false,
            ),
        };
        let hash = spread_hash(&spread);
        let spread = SPREAD.intern_hashed(spread, hash);
        let affinity = PodAffinity::compile(s.affinity.as_ref(), &m.namespace, &labels);
        let phase = status.phase.unwrap_or_default();
        let start_time = status.start_time.as_deref().and_then(|t| t.parse().ok());
        let unschedulable = status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.kind == "PodScheduled")
            .filter(|c| c.status == "False" && c.reason.as_deref() == Some("Unschedulable"))
            .map(|c| message_fingerprint(c.message.as_deref().unwrap_or_default()));
        PodInfo {
            key: Arc::from(format!("{}/{}", m.namespace, m.name)),
            namespace: Arc::from(m.namespace),
            name: Arc::from(m.name),
            uid: Arc::from(m.uid),
            resource_version: m.resource_version,
            controller,
            scheduler_name: s
                .scheduler_name
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| SCHEDULER_NAME.to_string()),
            node_name: s.node_name.filter(|n| !n.is_empty()).map(Arc::from),
            terminating: m.deletion_timestamp.is_some(),
            terminal: matches!(phase.as_str(), "Succeeded" | "Failed"),
            gated: s.scheduling_gates.is_some_and(|g| !g.is_empty()),
            priority: s.priority.unwrap_or(0),
            preempt_never: s.preemption_policy.as_deref() == Some("Never"),
            nominated_node: status
                .nominated_node_name
                .filter(|n| !n.is_empty())
                .map(Arc::from),
            start_time,
            unschedulable,
            requests,
            non_zero_cpu: non_zero.milli_cpu,
            non_zero_memory: non_zero.memory,
            host_ports,
            required_node: RequiredNodeAffinity::new(s.node_selector.as_ref(), node_affinity),
            preferred_node: PreferredNodeAffinity::new(node_affinity),
            tolerations: TOLERATIONS.intern(
                s.tolerations
                    .iter()
                    .flatten()
                    .map(Toleration::from_k8s)
                    .collect(),
            ),
            affinity,
            spread,
            spread_defaulted,
            labels,
            claims: s
                .volumes
                .iter()
                .flatten()
                .filter_map(|v| v.persistent_volume_claim.as_ref())
                .map(|c| c.claim_name.clone())
                .collect(),
            volumes: Arc::default(),
        }
    }

    /// Whether this pod is one the scheduler should place now.
    pub fn wants_scheduling(&self) -> bool {
        self.node_name.is_none()
            && self.scheduler_name == SCHEDULER_NAME
            && !self.terminating
            && !self.terminal
            && !self.gated
    }

    /// Whether anything the scheduler decides on differs (status writes, for instance, do not
    /// count: they must not send an unschedulable pod round the queue again).
    pub fn same_placement_facts(&self, other: &PodInfo) -> bool {
        self.labels == other.labels
            && self.controller == other.controller
            && self.requests == other.requests
            && self.host_ports == other.host_ports
            && self.required_node == other.required_node
            && self.preferred_node == other.preferred_node
            && self.tolerations == other.tolerations
            && self.affinity == other.affinity
            && self.spread == other.spread
            && self.gated == other.gated
            && self.claims == other.claims
            && self.priority == other.priority
            && self.preempt_never == other.preempt_never
            && self.terminating == other.terminating
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct NodeMetaDoc {
    name: String,
    labels: Option<Labels>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct NodeSpecDoc {
    unschedulable: Option<bool>,
    taints: Option<Vec<core::Taint>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct NodeStatusDoc {
    allocatable: Option<ResourceList>,
    capacity: Option<ResourceList>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct NodeDoc {
    metadata: NodeMetaDoc,
    spec: NodeSpecDoc,
    status: NodeStatusDoc,
}

/// Everything the scheduler uses about one node.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeFacts {
    pub name: Arc<str>,
    pub labels: Labels,
    /// The zone and hostname labels' values, read once from `labels`: the spread score asks
    /// for them on every feasible node of every pod.
    pub zone: Option<String>,
    pub hostname: Option<String>,
    /// The taints the node carries (the node lifecycle controller writes those of its
    /// conditions, upstream's TaintNodesByCondition; the scheduler reads no conditions).
    pub taints: Vec<Taint>,
    pub unschedulable: bool,
    pub allocatable: Resources,
    pub allowed_pods: i64,
}

impl NodeFacts {
    /// Parses a stored node.
    pub fn parse(data: &[u8]) -> Result<NodeFacts, serde_json::Error> {
        let doc: NodeDoc = serde_json::from_slice(data)?;
        let taints: Vec<Taint> = doc
            .spec
            .taints
            .iter()
            .flatten()
            .filter_map(Taint::from_k8s)
            .collect();
        let status = core::NodeStatus {
            allocatable: doc.status.allocatable,
            capacity: doc.status.capacity,
            ..Default::default()
        };
        let (allocatable, allowed_pods) = resources::node_allocatable(Some(&status));
        let labels = doc.metadata.labels.unwrap_or_default();
        Ok(NodeFacts {
            name: Arc::from(doc.metadata.name),
            zone: labels.get(ZONE_LABEL).cloned(),
            hostname: labels.get(HOSTNAME_LABEL).cloned(),
            labels,
            taints,
            unschedulable: doc.spec.unschedulable.unwrap_or(false),
            allocatable,
            allowed_pods,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> PodInfo {
        PodInfo::parse(&serde_json::to_vec(&v).unwrap()).unwrap()
    }

    #[test]
    fn only_an_unschedulable_podscheduled_condition_is_fingerprinted() {
        let with = |condition: serde_json::Value| {
            pod(
                json!({"metadata": {"name": "p", "namespace": "d"}, "spec": {},
                "status": {"conditions": [{"type": "Ready", "status": "False",
                    "reason": "Unschedulable", "message": "other"}, condition]}}),
            )
            .unschedulable
        };
        let msg = "0/2 nodes are available: 2 Insufficient cpu.";
        assert_eq!(
            with(json!({"type": "PodScheduled", "status": "False",
                "reason": "Unschedulable", "message": msg})),
            Some(message_fingerprint(msg))
        );
        assert_ne!(message_fingerprint(msg), message_fingerprint("0/3 nodes"));
        for other in [
            json!({"type": "PodScheduled", "status": "True"}),
            json!({"type": "PodScheduled", "status": "False", "reason": "SchedulerError",
                "message": msg}),
            json!({"type": "Initialized", "status": "True"}),
        ] {
            assert_eq!(with(other.clone()), None, "{other}");
        }
    }

    #[test]
    fn a_pod_is_read_into_requests_ports_and_rules() {
        let p = pod(json!({
            "metadata": {"name": "web", "namespace": "default", "uid": "u1",
                "labels": {"app": "web"},
                "ownerReferences": [{"kind": "ReplicaSet", "uid": "rs1", "controller": true}]},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}},
                "ports": [{"containerPort": 80, "hostPort": 8080}]}],
                "nodeSelector": {"disk": "ssd"}, "priority": 7},
        }));
        assert_eq!(&*p.key, "default/web");
        assert_eq!((p.requests.milli_cpu, p.requests.memory), (250, 64 << 20));
        assert_eq!((p.non_zero_cpu, p.non_zero_memory), (250, 64 << 20));
        assert_eq!(p.host_ports, vec![HostPort::new("", "", 8080)]);
        assert_eq!(p.priority, 7);
        assert_eq!(p.controller.as_deref(), Some("rs1"));
        assert!(p.spread_defaulted && p.spread.len() == 2);
        assert!(p.wants_scheduling());
    }

    #[test]
    fn the_pods_of_one_template_share_their_tolerations_and_spread() {
        let of = |name: &str, rs: &str| {
            pod(json!({
                "metadata": {"name": name, "namespace": "default",
                    "ownerReferences": [{"kind": "ReplicaSet", "uid": rs, "controller": true}]},
                "spec": {"containers": [{"name": "c"}], "tolerations": [
                    {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                        "effect": "NoExecute", "tolerationSeconds": 300}]},
            }))
        };
        let (a, b, other) = (of("a", "rs1"), of("b", "rs1"), of("c", "rs2"));
        assert!(Arc::ptr_eq(&a.tolerations, &b.tolerations));
        assert!(Arc::ptr_eq(&a.tolerations, &other.tolerations));
        assert!(Arc::ptr_eq(&a.spread, &b.spread));
        assert!(
            !Arc::ptr_eq(&a.spread, &other.spread),
            "another controller's pods"
        );
        assert_ne!(a.spread, other.spread);
    }

    #[test]
    fn only_unbound_live_ungated_pods_of_this_scheduler_want_scheduling() {
        let base = json!({"metadata": {"name": "p", "namespace": "d"}, "spec": {"containers": []}});
        let cases = [
            ("bound", json!({"spec": {"nodeName": "n1"}}), false),
            (
                "another scheduler",
                json!({"spec": {"schedulerName": "other"}}),
                false,
            ),
            (
                "terminating",
                json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}}),
                false,
            ),
            ("finished", json!({"status": {"phase": "Succeeded"}}), false),
            (
                "gated",
                json!({"spec": {"schedulingGates": [{"name": "g"}]}}),
                false,
            ),
            ("plain", json!({}), true),
        ];
        for (name, patch, want) in cases {
            let mut v = base.clone();
            json_patch::merge(&mut v, &patch);
            assert_eq!(pod(v).wants_scheduling(), want, "{name}");
        }
    }

    #[test]
    fn a_node_is_read_with_allocatable_and_its_own_taints() {
        let n = NodeFacts::parse(
            &serde_json::to_vec(&json!({
                "metadata": {"name": "n1", "labels": {"zone": "a"}},
                "spec": {"unschedulable": true, "taints": [
                    {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
                    {"key": "dedicated", "value": "db", "effect": "NoExecute"}]},
                "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "False"}]},
            }))
            .unwrap(),
        )
        .unwrap();
        assert!(n.unschedulable);
        assert_eq!((n.allocatable.milli_cpu, n.allowed_pods), (4000, 110));
        assert_eq!(n.taints.len(), 2, "conditions imply no taints");
        assert_eq!(n.labels.get("zone").map(String::as_str), Some("a"));
    }
}
