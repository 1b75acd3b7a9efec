//! A pod's quality-of-service class and what follows from it on the node: the OOM score
//! adjustment of its containers (upstream's `pkg/kubelet/qos/policy.go`) and the tier of the
//! `kubepods` cgroup it runs in.
//!
//! OOM score adjustments: node-critical pods and Guaranteed pods −997, BestEffort 1000,
//! Burstable `1000 − 1000 × memory request / memory capacity`, kept within [3, 999] so a
//! Burstable container always ranks between the two (upstream's code clamps at `1000 − 997`,
//! although its documentation says 2). A sidecar (a restartable init container) gets no more
//! than the regular container with the smallest request. Worked example: 1 GiB requested on a
//! 16 GiB node is 1000 − 62 = 938. The kubelet itself runs at −999 (`KubeletOOMScoreAdj`);
//! Berth leaves the agent's and containerd's own scores to their systemd units.
//!
//! Planner: pure, no I/O.

use berth_api::k8s_openapi::api::core::v1::{Container, Pod};
use berth_api::scheduling::resources::value;

/// Upstream's `guaranteedOOMScoreAdj`.
pub const GUARANTEED_OOM_SCORE_ADJ: i32 = -997;
/// Upstream's `besteffortOOMScoreAdj`.
pub const BEST_EFFORT_OOM_SCORE_ADJ: i32 = 1000;
/// Upstream's `KubeletOOMScoreAdj` (documented; the agent does not set its own).
pub const KUBELET_OOM_SCORE_ADJ: i32 = -999;
/// Pods at or above this priority are critical (upstream's `SystemCriticalPriority`).
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// A pod's QoS class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QosClass {
    Guaranteed,
    Burstable,
    BestEffort,
}

impl QosClass {
    fn parse(s: &str) -> Option<QosClass> {
        match s {
            "Guaranteed" => Some(QosClass::Guaranteed),
            "Burstable" => Some(QosClass::Burstable),
            "BestEffort" => Some(QosClass::BestEffort),
            _ => None,
        }
    }
}

/// The pod's class: `status.qosClass` as the API server set it at creation, else computed from
/// the spec as the API server does.
pub fn class(pod: &Pod) -> QosClass {
    pod.status
        .as_ref()
        .and_then(|s| s.qos_class.as_deref())
        .and_then(QosClass::parse)
        .or_else(|| {
            pod.spec
                .as_ref()
                .and_then(|s| QosClass::parse(berth_api::qos::qos_class(s)))
        })
        .unwrap_or(QosClass::BestEffort)
}

/// Upstream's `IsCriticalPod`: a static or mirror pod, or one with system critical priority.
/// The kubelet never evicts one.
pub fn is_critical(pod: &Pod) -> bool {
    let annotations = pod.metadata.annotations.as_ref();
    let mirror = annotations.is_some_and(|a| a.contains_key("kubernetes.io/config.mirror"));
    let static_pod = annotations
        .and_then(|a| a.get("kubernetes.io/config.source"))
        .is_some_and(|s| s != "api");
    let priority = pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
    mirror || static_pod || priority >= SYSTEM_CRITICAL_PRIORITY
}

/// Upstream's `IsNodeCriticalPod`: a critical pod of the `system-node-critical` class.
pub fn is_node_critical(pod: &Pod) -> bool {
    let class = pod
        .spec
        .as_ref()
        .and_then(|s| s.priority_class_name.as_deref());
    is_critical(pod) && class == Some("system-node-critical")
}

fn memory_request(c: &Container) -> i64 {
    c.resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|m| m.get("memory"))
        .and_then(|q| value(&q.0))
        .unwrap_or(0)
}

/// Whether `c` is one of the pod's init containers with `restartPolicy: Always`.
fn is_sidecar(pod: &Pod, c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
        && pod
            .spec
            .as_ref()
            .and_then(|s| s.init_containers.as_ref())
            .is_some_and(|l| l.iter().any(|i| i.name == c.name))
}

/// The OOM score adjustment of container `c` of `pod` on a node with `memory_capacity` bytes.
pub fn oom_score_adj(pod: &Pod, c: &Container, memory_capacity: i64) -> i32 {
    if is_node_critical(pod) {
        return GUARANTEED_OOM_SCORE_ADJ;
    }
    match class(pod) {
        QosClass::Guaranteed => return GUARANTEED_OOM_SCORE_ADJ,
        QosClass::BestEffort => return BEST_EFFORT_OOM_SCORE_ADJ,
        QosClass::Burstable => {}
    }
    if memory_capacity <= 0 {
        return BEST_EFFORT_OOM_SCORE_ADJ - 1;
    }
    let adj = |request: i64| {
        1000 - ((1000_i128 * i128::from(request)) / i128::from(memory_capacity)) as i64
    };
    let mut score = adj(memory_request(c));
    if is_sidecar(pod, c) {
        let smallest = pod
            .spec
            .as_ref()
            .and_then(|s| s.containers.iter().map(memory_request).min())
            .unwrap_or(0);
        score = score.min(adj(smallest));
    }
    let floor = i64::from(1000 + GUARANTEED_OOM_SCORE_ADJ);
    if score < floor {
        floor as i32
    } else if score >= i64::from(BEST_EFFORT_OOM_SCORE_ADJ) {
        BEST_EFFORT_OOM_SCORE_ADJ - 1
    } else {
        score as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const GI: i64 = 1 << 30;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    fn burstable(memory: &str) -> Pod {
        pod(json!({"metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i",
                "resources": {"requests": {"memory": memory}}}]},
            "status": {"qosClass": "Burstable"}}))
    }

    #[test]
    fn the_class_is_the_status_one_or_computed_from_the_spec() {
        let cases = [
            (
                json!({"status": {"qosClass": "Guaranteed"}}),
                QosClass::Guaranteed,
            ),
            (
                json!({"spec": {"containers": [{"name": "c", "image": "i",
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                        "limits": {"cpu": "1", "memory": "1Gi"}}}]}}),
                QosClass::Guaranteed,
            ),
            (
                json!({"spec": {"containers": [{"name": "c", "image": "i",
                    "resources": {"requests": {"cpu": "100m"}}}]}}),
                QosClass::Burstable,
            ),
            (
                json!({"spec": {"containers": [{"name": "c", "image": "i"}]}}),
                QosClass::BestEffort,
            ),
            (json!({}), QosClass::BestEffort),
        ];
        for (v, want) in cases {
            assert_eq!(class(&pod(v.clone())), want, "{v}");
        }
    }

    #[test]
    fn oom_score_adjustments_follow_the_kubelets_policy() {
        let guaranteed = pod(
            json!({"spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"qosClass": "Guaranteed"}}),
        );
        let best_effort = pod(
            json!({"spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"qosClass": "BestEffort"}}),
        );
        let node_critical = pod(json!({"spec": {"containers": [{"name": "c", "image": "i"}],
            "priority": 2_000_001_000, "priorityClassName": "system-node-critical"},
            "status": {"qosClass": "BestEffort"}}));
        let cluster_critical = pod(json!({"spec": {"containers": [{"name": "c", "image": "i"}],
            "priority": 2_000_000_000, "priorityClassName": "system-cluster-critical"},
            "status": {"qosClass": "BestEffort"}}));
        let cases: [(&str, Pod, i64, i32); 9] = [
            ("guaranteed", guaranteed, 16 * GI, -997),
            ("best effort", best_effort, 16 * GI, 1000),
            (
                "node critical, whatever its class",
                node_critical,
                16 * GI,
                -997,
            ),
            (
                "cluster critical is not node critical",
                cluster_critical,
                16 * GI,
                1000,
            ),
            ("burstable: 1Gi of 16Gi", burstable("1Gi"), 16 * GI, 938),
            ("burstable: half the node", burstable("8Gi"), 16 * GI, 500),
            (
                "burstable: no memory request ranks below best effort",
                burstable("0"),
                16 * GI,
                999,
            ),
            (
                "burstable: the whole node ranks above guaranteed",
                burstable("16Gi"),
                16 * GI,
                3,
            ),
            (
                "burstable: more than the node",
                burstable("64Gi"),
                16 * GI,
                3,
            ),
        ];
        for (what, p, capacity, want) in cases {
            let c = p.spec.as_ref().unwrap().containers[0].clone();
            assert_eq!(oom_score_adj(&p, &c, capacity), want, "{what}");
        }
    }

    #[test]
    fn a_sidecar_scores_no_higher_than_the_smallest_regular_container() {
        let p = pod(json!({"spec": {
            "initContainers": [{"name": "side", "image": "i", "restartPolicy": "Always"}],
            "containers": [
                {"name": "a", "image": "i", "resources": {"requests": {"memory": "4Gi"}}},
                {"name": "b", "image": "i", "resources": {"requests": {"memory": "2Gi"}}}]},
            "status": {"qosClass": "Burstable"}}));
        let spec = p.spec.as_ref().unwrap();
        let side = spec.init_containers.as_ref().unwrap()[0].clone();
        assert_eq!(oom_score_adj(&p, &side, 16 * GI), 875);
        assert_eq!(oom_score_adj(&p, &spec.containers[0], 16 * GI), 750);
    }
}
