//! Whether one node can take the pod, checked in upstream's filter order (NodeUnschedulable,
//! TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit, VolumeBinding, PodTopologySpread,
//! InterPodAffinity); the first filter that refuses gives the node's reasons.
//!
//! Only the taints a node carries count, as upstream: the node lifecycle controller turns its
//! conditions into taints (TaintNodesByCondition), so a node that is not ready is refused by its
//! `node.kubernetes.io/not-ready` taint.
//!
//! Planner: pure, no I/O.

use super::cache::NodeInfo;
use super::facts::PodInfo;
use super::interpod::InterPodFilter;
use super::message::{Reason, Rejection};
use super::spread::SpreadFilter;
use berth_shared::scheduling::ports::any_conflict;
use berth_shared::scheduling::taints::{DO_NOT_SCHEDULE, first_untolerated, tolerated};
use berth_shared::scheduling::{Taint, TaintEffect};
use std::sync::LazyLock;

/// The taint a cordoned node stands for; a pod tolerating it may still go there.
static UNSCHEDULABLE_TAINT: LazyLock<Taint> = LazyLock::new(|| {
    Taint::new(
        "node.kubernetes.io/unschedulable",
        "",
        TaintEffect::NoSchedule,
    )
});

/// The per-pod state filters share across nodes.
pub struct Filters<'a> {
    pub spread: SpreadFilter<'a>,
    pub interpod: InterPodFilter<'a>,
}

/// Requests beyond what the node has left, and the pod count (upstream `fitsRequest`).
fn resource_fit<'a>(pod: &'a PodInfo, node: &NodeInfo) -> Vec<Reason<'a>> {
    let mut out = Vec::new();
    if node.pods.len() as i64 + 1 > node.node.allowed_pods {
        out.push(Reason::TooManyPods);
    }
    let want = &pod.requests;
    if want.is_zero() {
        return out;
    }
    let alloc = &node.node.allocatable;
    let used = &node.requested;
    let short = |want: i64, alloc: i64, used: i64| want > 0 && want > alloc - used;
    if short(want.milli_cpu, alloc.milli_cpu, used.milli_cpu) {
        out.push(Reason::Insufficient("cpu"));
    }
    if short(want.memory, alloc.memory, used.memory) {
        out.push(Reason::Insufficient("memory"));
    }
    if short(
        want.ephemeral_storage,
        alloc.ephemeral_storage,
        used.ephemeral_storage,
    ) {
        out.push(Reason::Insufficient("ephemeral-storage"));
    }
    for (name, amount) in &want.scalar {
        let have = alloc.scalar.get(name).copied().unwrap_or(0);
        let taken = used.scalar.get(name).copied().unwrap_or(0);
        if short(*amount, have, taken) {
            out.push(Reason::Insufficient(name));
        }
    }
    out
}

/// Runs the filters on one node.
pub fn check<'a>(
    pod: &'a PodInfo,
    node: &'a NodeInfo,
    filters: &Filters<'a>,
) -> Result<(), Rejection<'a>> {
    let facts = &node.node;
    if facts.unschedulable && !tolerated(&pod.tolerations, &UNSCHEDULABLE_TAINT) {
        return Err(Rejection::unresolvable(Reason::Unschedulable));
    }
    if let Some(t) = first_untolerated(&facts.taints, &pod.tolerations, DO_NOT_SCHEDULE) {
        return Err(Rejection::unresolvable(Reason::Taint(t)));
    }
    if !pod.required_node.is_empty() && !pod.required_node.matches(&facts.name, &facts.labels) {
        return Err(Rejection::unresolvable(Reason::NodeAffinity));
    }
    if !pod.host_ports.is_empty() && any_conflict(&node.ports, &pod.host_ports) {
        return Err(Rejection::resolvable(Reason::Ports));
    }
    let short = resource_fit(pod, node);
    if !short.is_empty() {
        return Err(Rejection {
            reasons: short,
            resolvable: true,
        });
    }
    if !pod.volumes.admit(&facts.name, &facts.labels) {
        return Err(Rejection::unresolvable(Reason::VolumeNodeAffinity));
    }
    filters.spread.check(pod, node)?;
    filters.interpod.check(pod, node)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{ClusterFixture, node, pod};
    use serde_json::{Value, json};

    /// Checks `pod` against a single node `n` (with `node_patch`) already holding `placed`.
    fn verdict(node_patch: Value, placed: &[Value], p: Value) -> Result<(), Vec<String>> {
        let mut f = ClusterFixture::default();
        f.add_node(node("n", node_patch));
        for (i, q) in placed.iter().enumerate() {
            f.place(pod(&format!("placed{i}"), q.clone()), "n");
        }
        let p = pod("new", p);
        let view = f.view();
        let filters = Filters {
            spread: SpreadFilter::new(&p, &view),
            interpod: InterPodFilter::new(&p, &view),
        };
        check(&p, &view.nodes[0], &filters)
            .map_err(|r| r.reasons.iter().map(Reason::text).collect())
    }

    fn cpu(q: &str) -> Value {
        json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": q}}}]}})
    }

    #[test]
    fn each_filter_refuses_with_upstreams_reason() {
        type Case = (
            &'static str,
            Value,
            Vec<Value>,
            Value,
            Result<(), Vec<&'static str>>,
        );
        let cases: Vec<Case> = vec![
            (
                "a plain pod fits an empty ready node",
                json!({}),
                vec![],
                json!({}),
                Ok(()),
            ),
            (
                "a cordoned node is refused",
                json!({"spec": {"unschedulable": true}}),
                vec![],
                json!({}),
                Err(vec!["node(s) were unschedulable"]),
            ),
            (
                "a pod tolerating the unschedulable taint may use a cordoned node",
                json!({"spec": {"unschedulable": true}}),
                vec![],
                json!({"spec": {"tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]}}),
                Ok(()),
            ),
            (
                "a NoSchedule taint is refused",
                json!({"spec": {"taints": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]}}),
                vec![],
                json!({}),
                Err(vec![
                    "node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }",
                ]),
            ),
            (
                "a NoExecute taint is refused",
                json!({"spec": {"taints": [{"key": "k", "value": "v", "effect": "NoExecute"}]}}),
                vec![],
                json!({}),
                Err(vec!["node(s) had untolerated taint {k: v}"]),
            ),
            (
                "a tolerated taint is fine",
                json!({"spec": {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}}),
                vec![],
                json!({"spec": {"tolerations": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}}),
                Ok(()),
            ),
            (
                "a PreferNoSchedule taint does not refuse",
                json!({"spec": {"taints": [{"key": "k", "effect": "PreferNoSchedule"}]}}),
                vec![],
                json!({}),
                Ok(()),
            ),
            (
                "a node's conditions alone refuse nothing",
                json!({"status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "DiskPressure", "status": "True"}]}}),
                vec![],
                json!({}),
                Ok(()),
            ),
            (
                "a not-ready taint refuses a pod tolerating only its NoExecute form",
                json!({"spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]},
                    "status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
                vec![],
                json!({"spec": {"tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}]}}),
                Err(vec![
                    "node(s) had untolerated taint {node.kubernetes.io/not-ready: }",
                ]),
            ),
            (
                "an unreachable NoExecute taint is tolerated by its toleration",
                json!({"spec": {"taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]}}),
                vec![],
                json!({"spec": {"tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]}}),
                Ok(()),
            ),
            (
                "a node selector mismatch is refused",
                json!({}),
                vec![],
                json!({"spec": {"nodeSelector": {"disk": "ssd"}}}),
                Err(vec!["node(s) didn't match Pod's node affinity/selector"]),
            ),
            (
                "a matching node selector fits",
                json!({"metadata": {"labels": {"disk": "ssd"}}}),
                vec![],
                json!({"spec": {"nodeSelector": {"disk": "ssd"}}}),
                Ok(()),
            ),
            (
                "a taken host port is refused",
                json!({}),
                vec![
                    json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 80}]}]}}),
                ],
                json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 8080, "hostPort": 80}]}]}}),
                Err(vec![
                    "node(s) didn't have free ports for the requested pod ports",
                ]),
            ),
            (
                "the same host port over UDP is free",
                json!({}),
                vec![
                    json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 80}]}]}}),
                ],
                json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 80, "protocol": "UDP"}]}]}}),
                Ok(()),
            ),
            (
                "more cpu than is left is refused",
                json!({}),
                vec![cpu("3")],
                cpu("1500m"),
                Err(vec!["Insufficient cpu"]),
            ),
            (
                "exactly what is left fits",
                json!({}),
                vec![cpu("3")],
                cpu("1"),
                Ok(()),
            ),
            (
                "memory and cpu short give both reasons",
                json!({}),
                vec![],
                json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "5", "memory": "17Gi"}}}]}}),
                Err(vec!["Insufficient cpu", "Insufficient memory"]),
            ),
            (
                "ephemeral storage is fitted",
                json!({"status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "1Gi"}}}),
                vec![],
                json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"ephemeral-storage": "2Gi"}}}]}}),
                Err(vec!["Insufficient ephemeral-storage"]),
            ),
            (
                "an extended resource the node lacks is refused",
                json!({}),
                vec![],
                json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"example.com/gpu": "1"}}}]}}),
                Err(vec!["Insufficient example.com/gpu"]),
            ),
            (
                "the init container rule decides the fit",
                json!({}),
                vec![cpu("3")],
                json!({"spec": {"initContainers": [{"name": "i", "resources": {"requests": {"cpu": "2"}}}],
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]}}),
                Err(vec!["Insufficient cpu"]),
            ),
            (
                "a full node is refused even for a pod asking nothing",
                json!({"status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "1"}}}),
                vec![json!({})],
                json!({}),
                Err(vec!["Too many pods"]),
            ),
        ];
        for (name, node_patch, placed, p, want) in cases {
            let want = want.map_err(|v| v.into_iter().map(String::from).collect::<Vec<_>>());
            assert_eq!(verdict(node_patch, &placed, p), want, "{name}");
        }
    }

    #[test]
    fn a_refusal_by_an_earlier_filter_hides_later_ones() {
        // Tainted and too small: only the taint is reported, as upstream stops at the first.
        let got = verdict(
            json!({"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}),
            &[],
            cpu("8"),
        );
        assert_eq!(
            got,
            Err(vec!["node(s) had untolerated taint {k: }".to_string()])
        );
    }
}
