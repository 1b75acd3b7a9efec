//! One scheduling decision, pure: given a pod and the cluster as the cache sees it, choose a
//! node or explain why none fits. Pre-filters (pinned node names, spread and inter-pod state),
//! filters nodes round-robin from a rotating start until enough feasible ones are found
//! (upstream's adaptive `percentageOfNodesToScore`), scores those with the default profile's
//! plugins and weights, and picks the best, breaking ties with the given seed.
//!
//! Planner: pure, no I/O.

use super::cache::Cluster;
use super::facts::PodInfo;
use super::filter::{self, Filters};
use super::interpod::{self, InterPodFilter, InterPodScore};
use super::message::{self, Diagnosis, Reason, Rejection};
use super::preempt::{self, Preemption};
use super::score::{self, MAX_SCORE};
use super::spread::{self, SpreadFilter, SpreadScore};
use berth_shared::k8s_openapi::api::policy::v1::PodDisruptionBudget;
use berth_shared::scheduling::PinnedNodes;
use std::sync::Arc;

/// Below this many nodes every node is considered.
pub const MIN_FEASIBLE_NODES: usize = 100;
/// The adaptive percentage never goes below this.
pub const MIN_FEASIBLE_PERCENTAGE: usize = 5;

/// How many feasible nodes to find before scoring, out of `nodes` (upstream
/// `numFeasibleNodesToFind` with the adaptive default). Worked example: 5,000 nodes give
/// 50 − 5000/125 = 10 % = 500 nodes; 1,000 nodes give 42 % = 420; 20,000 nodes 5 % = 1,000.
pub fn nodes_to_find(nodes: usize) -> usize {
    if nodes < MIN_FEASIBLE_NODES {
        return nodes;
    }
    let percentage = 50usize
        .saturating_sub(nodes / 125)
        .max(MIN_FEASIBLE_PERCENTAGE);
    (nodes * percentage / 100).max(MIN_FEASIBLE_NODES)
}

/// The outcome of one decision.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Bind {
        node: Arc<str>,
    },
    Unschedulable {
        message: String,
    },
    /// Fits nowhere, but will on `node` once `victims` are gone: the pod is nominated there.
    Preempt {
        node: Arc<str>,
        victims: Vec<Arc<PodInfo>>,
        message: String,
    },
}

/// A decision and where the next one should start looking.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    pub decision: Decision,
    pub next_start: usize,
}

/// Decides where `pod` goes, with no disruption budgets to respect.
pub fn plan(pod: &PodInfo, cluster: &Cluster<'_>, start: usize, seed: u64) -> Planned {
    plan_with(pod, cluster, start, seed, &[])
}

/// Decides where `pod` goes. `start` is where the previous decision stopped; `seed` breaks ties
/// among equally good nodes; a pod that fits nowhere may preempt pods of lower priority,
/// sparing those `budgets` protect where it can ([`preempt`]).
pub fn plan_with(
    pod: &PodInfo,
    cluster: &Cluster<'_>,
    start: usize,
    seed: u64,
    budgets: &[PodDisruptionBudget],
) -> Planned {
    let total = cluster.nodes.len();
    let unschedulable = |message: String, next_start| Planned {
        decision: Decision::Unschedulable { message },
        next_start,
    };
    if total == 0 {
        return unschedulable(message::NO_NODES.to_string(), 0);
    }
    let mut diagnosis = Diagnosis::default();
    // The nodes to filter: all of them, round from `start`, or only the pinned ones.
    let pinned: Option<Vec<usize>> = match pod.required_node.pinned_nodes() {
        PinnedNodes::Conflict => {
            let d = Diagnosis::prefilter("pod affinity terms conflict");
            return unschedulable(message::fit_error(total, &d), start);
        }
        PinnedNodes::Only(names) => {
            let found: Vec<usize> = names
                .iter()
                .filter_map(|n| cluster.index.get(n.as_str()).copied())
                .collect();
            diagnosis.record_many(
                Rejection::unresolvable(Reason::PrefilterResult),
                total - found.len(),
            );
            Some(found)
        }
        PinnedNodes::Any => None,
    };
    let candidates = pinned.as_ref().map_or(total, Vec::len);
    let nth = |k: usize| match &pinned {
        Some(found) => found[k],
        None => (start + k) % total,
    };
    let filters = Filters {
        spread: SpreadFilter::new(pod, cluster),
        interpod: InterPodFilter::new(pod, cluster),
    };
    let wanted = nodes_to_find(candidates);
    let mut feasible = Vec::with_capacity(wanted);
    let mut resolvable = Vec::new();
    let mut processed = 0;
    for k in 0..candidates {
        let i = nth(k);
        processed += 1;
        match filter::check(pod, &cluster.nodes[i], &filters) {
            Ok(()) => feasible.push(i),
            Err(r) => {
                if r.resolvable {
                    resolvable.push(i);
                }
                diagnosis.record(r)
            }
        }
        if feasible.len() >= wanted {
            break;
        }
    }
    let next_start = if pinned.is_some() {
        start
    } else {
        (start + processed) % total
    };
    if feasible.is_empty() {
        let decision = match preempt::preempt(pod, cluster, &resolvable, &filters, budgets) {
            Preemption::Preempt(v) => Decision::Preempt {
                node: cluster.nodes[v.node].node.name.clone(),
                victims: v.pods,
                message: message::fit_error_with(total, &diagnosis, ""),
            },
            Preemption::NotEligible(why) => Decision::Unschedulable {
                message: message::fit_error_with(total, &diagnosis, &format!("preemption: {why}")),
            },
            Preemption::NoCandidates(reasons) => Decision::Unschedulable {
                message: message::fit_error_with(
                    total,
                    &diagnosis,
                    &message::preemption_failed(total, reasons),
                ),
            },
        };
        return Planned {
            decision,
            next_start,
        };
    }
    let best = select(&feasible, &total_scores(pod, cluster, &feasible), seed);
    Planned {
        decision: Decision::Bind {
            node: cluster.nodes[best].node.name.clone(),
        },
        next_start,
    }
}

/// The weighted sum of every score plugin for each feasible node.
pub fn total_scores(pod: &PodInfo, cluster: &Cluster<'_>, feasible: &[usize]) -> Vec<i64> {
    let nodes = |f: &dyn Fn(usize) -> i64| feasible.iter().map(|&i| f(i)).collect::<Vec<_>>();
    let mut total = nodes(&|i| {
        let n = &cluster.nodes[i];
        score::WEIGHT_RESOURCES_FIT * score::least_allocated(pod, n)
            + score::WEIGHT_BALANCED_ALLOCATION * score::balanced_allocation(pod, n).unwrap_or(0)
    });
    let mut add = |weight: i64, scores: Vec<i64>| {
        for (t, s) in total.iter_mut().zip(scores) {
            *t += weight * s;
        }
    };
    if !pod.preferred_node.is_empty() {
        let mut raw = nodes(&|i| score::node_affinity(pod, &cluster.nodes[i]));
        score::default_normalize(&mut raw, false);
        add(score::WEIGHT_NODE_AFFINITY, raw);
    }
    let mut taints = nodes(&|i| score::taint_toleration(pod, &cluster.nodes[i]));
    score::default_normalize(&mut taints, true);
    add(score::WEIGHT_TAINT_TOLERATION, taints);
    if let Some(s) = SpreadScore::new(pod, cluster, feasible) {
        let raw: Vec<Option<i64>> = feasible
            .iter()
            .map(|&i| s.raw(pod, i, &cluster.nodes[i]))
            .collect();
        add(score::WEIGHT_TOPOLOGY_SPREAD, spread::normalize(&raw));
    }
    if let Some(s) = InterPodScore::new(pod, cluster) {
        let raw = nodes(&|i| s.raw(&cluster.nodes[i]));
        add(score::WEIGHT_INTER_POD_AFFINITY, interpod::normalize(&raw));
    }
    debug_assert!(total.iter().all(|s| *s <= 11 * MAX_SCORE));
    total
}

/// The feasible node with the highest score; among equals, the one `seed` picks.
fn select(feasible: &[usize], scores: &[i64], seed: u64) -> usize {
    let best = scores.iter().copied().max().unwrap_or(0);
    let ties: Vec<usize> = feasible
        .iter()
        .zip(scores)
        .filter(|(_, s)| **s == best)
        .map(|(i, _)| *i)
        .collect();
    ties[(seed % ties.len() as u64) as usize]
}

/// A stable seed from a pod's uid (FNV-1a), so ties break the same way for the same pod.
pub fn seed_of(uid: &str) -> u64 {
    uid.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{ClusterFixture, node, pod, tainted};
    use serde_json::json;

    fn decide(f: &ClusterFixture, p: &PodInfo) -> Decision {
        plan(p, &f.view(), 0, 0).decision
    }

    fn bound_to(name: &str) -> Decision {
        Decision::Bind {
            node: Arc::from(name),
        }
    }

    /// Whatever seed breaks the ties, `p` goes to `name`.
    fn assert_every_seed_binds(f: &ClusterFixture, p: &PodInfo, name: &str) {
        for seed in 0..4 {
            assert_eq!(
                plan(p, &f.view(), 0, seed).decision,
                bound_to(name),
                "seed {seed}"
            );
        }
    }

    #[test]
    fn the_number_of_nodes_to_find_adapts_to_cluster_size() {
        let cases = [
            (0, 0),
            (50, 50),
            (100, 100),
            (150, 100),
            (1000, 420),
            (5000, 500),
            (20000, 1000),
        ];
        for (nodes, want) in cases {
            assert_eq!(nodes_to_find(nodes), want, "{nodes} nodes");
        }
    }

    #[test]
    fn no_nodes_at_all_says_so() {
        let f = ClusterFixture::default();
        assert_eq!(
            decide(&f, &pod("p", json!({}))),
            Decision::Unschedulable {
                message: "no nodes available to schedule pods".into()
            }
        );
    }

    #[test]
    fn the_upstream_example_message_is_produced() {
        let mut f = ClusterFixture::default();
        f.add_node(tainted(
            "cp",
            "node-role.kubernetes.io/control-plane",
            "NoSchedule",
        ));
        f.add_node(node("w1", json!({})));
        f.add_node(node("w2", json!({})));
        let p = pod(
            "p",
            json!({"spec": {"containers": [{"name": "c",
            "resources": {"requests": {"cpu": "5"}}}]}}),
        );
        assert_eq!(
            decide(&f, &p),
            Decision::Unschedulable {
                message: "0/3 nodes are available: 1 node(s) had untolerated taint \
                    {node-role.kubernetes.io/control-plane: }, 2 Insufficient cpu. preemption: \
                    0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No \
                    preemption victims found for incoming pod.."
                    .into()
            }
        );
    }

    #[test]
    fn the_emptier_node_wins_on_least_allocated() {
        let mut f = ClusterFixture::with_nodes(&["busy", "idle"]);
        f.place(
            pod(
                "x",
                json!({"spec": {"containers": [{"name": "c",
            "resources": {"requests": {"cpu": "2", "memory": "8Gi"}}}]}}),
            ),
            "busy",
        );
        assert_every_seed_binds(&f, &pod("p", json!({})), "idle");
    }

    #[test]
    fn preferred_node_affinity_outweighs_a_small_resource_difference() {
        let mut f = ClusterFixture::default();
        f.add_node(node("plain", json!({})));
        f.add_node(node(
            "ssd",
            json!({"metadata": {"labels": {"disk": "ssd"}}}),
        ));
        f.place(
            pod(
                "x",
                json!({"spec": {"containers": [{"name": "c",
            "resources": {"requests": {"cpu": "500m"}}}]}}),
            ),
            "ssd",
        );
        let p = pod(
            "p",
            json!({"spec": {"affinity": {"nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {
                "matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}}}}),
        );
        assert_eq!(decide(&f, &p), bound_to("ssd"));
    }

    #[test]
    fn an_untolerated_prefer_no_schedule_taint_steers_pods_away() {
        let mut f = ClusterFixture::default();
        f.add_node(tainted("soft", "k", "PreferNoSchedule"));
        f.add_node(node("clean", json!({})));
        assert_every_seed_binds(&f, &pod("p", json!({})), "clean");
    }

    #[test]
    fn soft_spread_of_a_replica_set_prefers_the_node_without_its_siblings() {
        let owned = |name: &str| {
            pod(
                name,
                json!({"metadata": {"labels": {"app": "web"}, "ownerReferences": [
                {"kind": "ReplicaSet", "uid": "rs1", "controller": true, "name": "web", "apiVersion": "apps/v1"}]}}),
            )
        };
        let mut f = ClusterFixture::with_nodes(&["a", "b"]);
        f.place(owned("w0"), "a");
        // Placing a sibling leaves a with a bit less room, but spreading decides clearly.
        assert_every_seed_binds(&f, &owned("w1"), "b");
    }

    #[test]
    fn pinned_node_names_skip_every_other_node_and_say_so() {
        let mut f = ClusterFixture::with_nodes(&["a", "b", "c"]);
        f.add_node(tainted("tainted", "k", "NoSchedule"));
        let daemon = pod(
            "ds",
            json!({"spec": {"affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["tainted"]}]}]}}}}}),
        );
        assert_eq!(
            decide(&f, &daemon),
            Decision::Unschedulable {
                message: "0/4 nodes are available: 1 node(s) had untolerated taint {k: }, 3 node \
                    is filtered out by the prefilter result. preemption: 0/4 nodes are \
                    available: 4 Preemption is not helpful for scheduling.."
                    .into()
            }
        );
        let to_b = pod(
            "ds",
            json!({"spec": {"affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["b", "gone"]}]}]}}}}}),
        );
        assert_eq!(decide(&f, &to_b), bound_to("b"));
    }

    #[test]
    fn sampling_stops_after_enough_feasible_nodes_and_rotates_the_start() {
        let names: Vec<String> = (0..200).map(|i| format!("n{i:03}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let f = ClusterFixture::with_nodes(&refs);
        let p = pod("p", json!({}));
        let first = plan(&p, &f.view(), 0, 0);
        assert_eq!(first.next_start, 100, "100 of 200 nodes are enough");
        let second = plan(&p, &f.view(), first.next_start, 0);
        assert_eq!(second.next_start, 0);
        let Decision::Bind { node } = second.decision else {
            panic!("expected a node")
        };
        assert!(
            &*node >= "n100",
            "the second decision looked at the second half: {node}"
        );
    }

    #[test]
    fn an_unschedulable_pod_is_checked_against_every_node() {
        let names: Vec<String> = (0..300).map(|i| format!("n{i}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let f = ClusterFixture::with_nodes(&refs);
        let p = pod("p", json!({"spec": {"nodeSelector": {"disk": "ssd"}}}));
        let Decision::Unschedulable { message } = decide(&f, &p) else {
            panic!("expected unschedulable")
        };
        assert!(
            message.starts_with(
                "0/300 nodes are available: 300 node(s) didn't match Pod's node affinity/selector."
            ),
            "{message}"
        );
    }

    #[test]
    fn ties_are_broken_by_the_seed_and_the_same_seed_gives_the_same_node() {
        let f = ClusterFixture::with_nodes(&["a", "b", "c"]);
        let p = pod("p", json!({}));
        let picks: Vec<Decision> = (0..3).map(|s| plan(&p, &f.view(), 0, s).decision).collect();
        assert_eq!(picks, [bound_to("a"), bound_to("b"), bound_to("c")]);
        assert_eq!(
            plan(&p, &f.view(), 0, 7).decision,
            plan(&p, &f.view(), 0, 7).decision
        );
        assert_ne!(seed_of("uid-1"), seed_of("uid-2"));
    }
}
