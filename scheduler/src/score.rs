//! Node scores that need no cluster-wide state: least-allocated and balanced resources, the
//! raw preferred node affinity and `PreferNoSchedule` taint counts, upstream's default
//! normalization, and the weights of the default profile.
//!
//! Worked example (least allocated): a 4-cpu, 16Gi node already asked for 1 cpu and 4Gi, a pod
//! asking 1 cpu and 4Gi: cpu (4000 − 2000) × 100 / 4000 = 50, memory likewise 50; mean 50.

use super::cache::NodeInfo;
use super::facts::PodInfo;
use berth_shared::scheduling::taints::intolerable_prefer_no_schedule;

/// The best score a plugin gives a node.
pub const MAX_SCORE: i64 = 100;

/// Plugin weights of upstream's default profile.
pub const WEIGHT_TAINT_TOLERATION: i64 = 3;
pub const WEIGHT_NODE_AFFINITY: i64 = 2;
pub const WEIGHT_RESOURCES_FIT: i64 = 1;
pub const WEIGHT_BALANCED_ALLOCATION: i64 = 1;
pub const WEIGHT_TOPOLOGY_SPREAD: i64 = 2;
pub const WEIGHT_INTER_POD_AFFINITY: i64 = 2;

fn least_requested(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return 0;
    }
    (capacity - requested) * MAX_SCORE / capacity
}

/// NodeResourcesFit with LeastAllocated (cpu and memory, weight 1 each): the node's free share
/// after placing the pod, counting requests with the non-zero defaults. Resources the node has
/// none of are left out.
pub fn least_allocated(pod: &PodInfo, node: &NodeInfo) -> i64 {
    let alloc = &node.node.allocatable;
    let pairs = [
        (node.non_zero_cpu + pod.non_zero_cpu, alloc.milli_cpu),
        (node.non_zero_memory + pod.non_zero_memory, alloc.memory),
    ];
    let (sum, weights) = pairs
        .iter()
        .filter(|(_, cap)| *cap != 0)
        .fold((0, 0), |(s, w), (req, cap)| {
            (s + least_requested(*req, *cap), w + 1)
        });
    if weights == 0 { 0 } else { sum / weights }
}

/// NodeResourcesBalancedAllocation: 100 × (1 − the standard deviation of the cpu and memory
/// fractions requested after placing the pod), on real requests. `None` for a pod requesting
/// neither (upstream skips best-effort pods, lest they pile onto one node).
pub fn balanced_allocation(pod: &PodInfo, node: &NodeInfo) -> Option<i64> {
    if pod.requests.milli_cpu == 0 && pod.requests.memory == 0 {
        return None;
    }
    let alloc = &node.node.allocatable;
    let fractions: Vec<f64> = [
        (
            node.requested.milli_cpu + pod.requests.milli_cpu,
            alloc.milli_cpu,
        ),
        (node.requested.memory + pod.requests.memory, alloc.memory),
    ]
    .iter()
    .filter(|(_, cap)| *cap != 0)
    .map(|(req, cap)| (*req as f64 / *cap as f64).min(1.0))
    .collect();
    let std = match fractions.as_slice() {
        [a, b] => ((a - b) / 2.0).abs(),
        _ => 0.0,
    };
    Some(((1.0 - std) * MAX_SCORE as f64) as i64)
}

/// The raw preferred node affinity score: the sum of the matching terms' weights.
pub fn node_affinity(pod: &PodInfo, node: &NodeInfo) -> i64 {
    pod.preferred_node.score(node.name(), node.labels())
}

/// The raw taint score: `PreferNoSchedule` taints the pod does not tolerate.
pub fn taint_toleration(pod: &PodInfo, node: &NodeInfo) -> i64 {
    intolerable_prefer_no_schedule(&node.node.taints, &pod.tolerations) as i64
}

/// Upstream's `DefaultNormalizeScore`: scales so the highest raw score becomes 100;
/// `reverse` turns it around (fewer is better). All zero: 0, or 100 when reversed.
pub fn default_normalize(raw: &mut [i64], reverse: bool) {
    let max = raw.iter().copied().max().unwrap_or(0);
    for s in raw.iter_mut() {
        let scaled = if max == 0 { 0 } else { MAX_SCORE * *s / max };
        *s = if reverse { MAX_SCORE - scaled } else { scaled };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{ClusterFixture, node, pod};
    use serde_json::json;

    fn requesting(cpu: &str, memory: &str) -> PodInfo {
        pod(
            "p",
            json!({"spec": {"containers": [{"name": "c",
            "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}}),
        )
    }

    fn node_with(cpu: &str, memory: &str) -> ClusterFixture {
        let mut f = ClusterFixture::default();
        f.add_node(node("n", json!({})));
        f.place(requesting(cpu, memory), "n");
        f
    }

    #[test]
    fn least_allocated_scores_the_free_share_after_placement() {
        // 4 cpu / 16Gi node, 1 cpu + 4Gi already asked, pod 1 cpu + 4Gi: 50.
        let f = node_with("1", "4Gi");
        let view = f.view();
        assert_eq!(least_allocated(&requesting("1", "4Gi"), &view.nodes[0]), 50);
        let empty = ClusterFixture::with_nodes(&["n"]);
        // A pod with no requests counts as 100m and 200Mi: cpu 97, memory 98 → 97.
        assert_eq!(
            least_allocated(&pod("p", json!({})), &empty.view().nodes[0]),
            97
        );
    }

    #[test]
    fn balanced_allocation_prefers_equal_cpu_and_memory_shares() {
        let f = ClusterFixture::with_nodes(&["n"]);
        let view = f.view();
        // cpu 2/4 = 0.5, memory 8/16 = 0.5: perfectly balanced.
        assert_eq!(
            balanced_allocation(&requesting("2", "8Gi"), &view.nodes[0]),
            Some(100)
        );
        // cpu 0.5, memory 0: std 0.25 → 75.
        assert_eq!(
            balanced_allocation(&requesting("2", "0"), &view.nodes[0]),
            Some(75)
        );
        assert_eq!(
            balanced_allocation(&pod("p", json!({})), &view.nodes[0]),
            None
        );
    }

    #[test]
    fn default_normalization_scales_to_the_maximum_and_can_reverse() {
        let mut s = [0, 5, 10];
        default_normalize(&mut s, false);
        assert_eq!(s, [0, 50, 100]);
        let mut s = [0, 1, 2];
        default_normalize(&mut s, true);
        assert_eq!(s, [100, 50, 0]);
        let mut s = [0, 0];
        default_normalize(&mut s, true);
        assert_eq!(s, [100, 100]);
        let mut s = [0, 0];
        default_normalize(&mut s, false);
        assert_eq!(s, [0, 0]);
    }

    #[test]
    fn prefer_no_schedule_taints_and_preferred_affinity_give_raw_counts() {
        let mut f = ClusterFixture::default();
        f.add_node(node(
            "n",
            json!({"metadata": {"labels": {"disk": "ssd"}},
            "spec": {"taints": [{"key": "a", "effect": "PreferNoSchedule"},
                {"key": "b", "effect": "PreferNoSchedule"}]}}),
        ));
        let p = pod(
            "p",
            json!({"spec": {"tolerations": [{"key": "a", "operator": "Exists"}],
            "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 30, "preference": {"matchExpressions": [
                    {"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}}}}),
        );
        let view = f.view();
        assert_eq!(taint_toleration(&p, &view.nodes[0]), 1);
        assert_eq!(node_affinity(&p, &view.nodes[0]), 30);
    }
}
