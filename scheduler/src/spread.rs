//! Topology spread constraints: the `DoNotSchedule` filter (matching pods per domain, skew
//! against the global minimum, `minDomains`, node inclusion policies) and the
//! `ScheduleAnyway` score, with upstream's arithmetic.
//!
//! Worked example of the filter (seed T-TSC-01): zone A has 2 matching pods, zone B 1; a new
//! matching pod with maxSkew 1 may go to B (1 + 1 − 1 = 1 ≤ 1) but not to A (2 + 1 − 1 = 2).
//!
//! Planner: pure, no I/O.

use super::cache::{Cluster, NodeInfo};
use super::facts::PodInfo;
use super::host_counts::NodeCounts;
use super::message::{Reason, Rejection};
use super::terms::{HOSTNAME_LABEL, PodSelector, SpreadConstraint, ZONE_LABEL};
use berth_shared::scheduling::taints::{DO_NOT_SCHEDULE, first_untolerated};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Matching pods of `sel` on a node (live pods of the pod's namespace).
fn count_on(node: &NodeInfo, sel: &PodSelector, ns: &str) -> i64 {
    match sel {
        PodSelector::Controller(uid) => node.by_controller.get(uid).copied().unwrap_or(0),
        PodSelector::Labels(sel) => node
            .pods
            .iter()
            .filter(|p| !p.terminating && &*p.namespace == ns && sel.matches(&p.labels))
            .count() as i64,
    }
}

/// Whether the incoming pod counts as one of the constraint's pods.
fn counts_itself(c: &SpreadConstraint, pod: &PodInfo) -> bool {
    match &c.selector {
        PodSelector::Labels(sel) => sel.matches(&pod.labels),
        PodSelector::Controller(uid) => pod.controller.as_ref() == Some(uid),
    }
}

/// The node inclusion policies: which nodes' pods count toward the spread.
fn included(c: &SpreadConstraint, pod: &PodInfo, node: &NodeInfo) -> bool {
    (!c.honor_node_affinity || pod.required_node.matches(node.name(), node.labels()))
        && (!c.honor_taints
            || first_untolerated(&node.node.taints, &pod.tolerations, DO_NOT_SCHEDULE).is_none())
}

/// The controller whose per-zone counts stand for this constraint's, when it is a zone
/// constraint over a controller's pods that every node is included in (the system defaults of
/// a pod without node affinity).
fn by_zone<'c>(c: &'c SpreadConstraint, pod: &PodInfo, require_all: bool) -> Option<&'c Arc<str>> {
    match &c.selector {
        PodSelector::Controller(uid)
            if c.topology_key == ZONE_LABEL
                && !require_all
                && !c.honor_taints
                && (!c.honor_node_affinity || pod.required_node.is_empty()) =>
        {
            Some(uid)
        }
        _ => None,
    }
}

fn has_all_keys<'c>(node: &NodeInfo, mut cs: impl Iterator<Item = &'c SpreadConstraint>) -> bool {
    cs.all(|c| node.topology(&c.topology_key).is_some())
}

/// The filter's state for one pod: matching pods per domain and the global minimum of each
/// `DoNotSchedule` constraint.
pub struct SpreadFilter<'a> {
    constraints: Vec<(&'a SpreadConstraint, HashMap<&'a str, i64>, i64)>,
}

impl<'a> SpreadFilter<'a> {
    pub fn new(pod: &'a PodInfo, cluster: &Cluster<'a>) -> SpreadFilter<'a> {
        let hard: Vec<&SpreadConstraint> = pod.spread.iter().filter(|c| c.hard).collect();
        if hard.is_empty() {
            return SpreadFilter {
                constraints: Vec::new(),
            };
        }
        let mut counts: Vec<HashMap<&'a str, i64>> = vec![HashMap::new(); hard.len()];
        for node in cluster.nodes {
            if !has_all_keys(node, hard.iter().copied()) {
                continue;
            }
            for (i, c) in hard.iter().enumerate() {
                if !included(c, pod, node) {
                    continue;
                }
                let Some(domain) = node.labels().get(&c.topology_key) else {
                    continue;
                };
                *counts[i].entry(domain.as_str()).or_insert(0) +=
                    count_on(node, &c.selector, &pod.namespace);
            }
        }
        let constraints = hard
            .into_iter()
            .zip(counts)
            .map(|(c, counts)| {
                // Fewer eligible domains than minDomains: the global minimum counts as 0.
                let min = if (counts.len() as i64) < c.min_domains {
                    0
                } else {
                    counts.values().copied().min().unwrap_or(i64::MAX)
                };
                (c, counts, min)
            })
            .collect();
        SpreadFilter { constraints }
    }

    /// `matching pods in the node's domain + 1 (if the pod counts itself) − global minimum ≤
    /// maxSkew` for every constraint; a node without the topology key is refused for good.
    pub fn check(&self, pod: &PodInfo, node: &NodeInfo) -> Result<(), Rejection<'a>> {
        for (c, counts, min) in &self.constraints {
            let Some(domain) = node.labels().get(&c.topology_key) else {
                return Err(Rejection::unresolvable(Reason::SpreadMissingLabel));
            };
            let matching = counts.get(domain.as_str()).copied().unwrap_or(0);
            let own = i64::from(counts_itself(c, pod));
            if matching + own - min > c.max_skew {
                return Err(Rejection::resolvable(Reason::Spread));
            }
        }
        Ok(())
    }
}

/// The score's state for one pod: matching pods per domain of each `ScheduleAnyway`
/// constraint (over the domains of the feasible nodes), and each constraint's weight.
pub struct SpreadScore<'a> {
    constraints: Vec<&'a SpreadConstraint>,
    pairs: Vec<HashMap<&'a str, i64>>,
    weights: Vec<f64>,
    ignored: HashSet<usize>,
    /// Per constraint: for a hostname term over a controller's pods, that controller's
    /// per-node counts (`Some(None)`: it has no live pod anywhere); `None` for the others.
    hosts: Vec<Option<Option<&'a NodeCounts>>>,
}

impl<'a> SpreadScore<'a> {
    /// `None` when the pod has no soft constraints.
    pub fn new(
        pod: &'a PodInfo,
        cluster: &Cluster<'a>,
        feasible: &[usize],
    ) -> Option<SpreadScore<'a>> {
        let soft: Vec<&SpreadConstraint> = pod.spread.iter().filter(|c| !c.hard).collect();
        if soft.is_empty() || feasible.is_empty() {
            return None;
        }
        // The system defaults score nodes missing a key too; a pod's own constraints do not.
        let require_all = !pod.spread_defaulted;
        let mut ignored = HashSet::new();
        let mut pairs: Vec<HashMap<&'a str, i64>> = vec![HashMap::new(); soft.len()];
        for &i in feasible {
            let node = &cluster.nodes[i];
            if require_all && !has_all_keys(node, soft.iter().copied()) {
                ignored.insert(i);
                continue;
            }
            for (k, c) in soft.iter().enumerate() {
                if c.topology_key != HOSTNAME_LABEL {
                    let v = node.topology(&c.topology_key).unwrap_or("");
                    pairs[k].entry(v).or_insert(0);
                }
            }
        }
        let weights = soft
            .iter()
            .enumerate()
            .map(|(k, c)| {
                let size = if c.topology_key == HOSTNAME_LABEL {
                    feasible.len() - ignored.len()
                } else {
                    pairs[k].len()
                };
                ((size + 2) as f64).ln()
            })
            .collect();
        // A zone constraint over a controller's pods that every node is included in reads the
        // cache's per-zone counts; the rest count pods node by node.
        let mut per_node = false;
        for (k, c) in soft.iter().enumerate() {
            match by_zone(c, pod, require_all) {
                Some(uid) => {
                    for (zone, n) in pairs[k].iter_mut() {
                        *n += cluster.zones.get(uid, zone);
                    }
                }
                None => per_node |= c.topology_key != HOSTNAME_LABEL,
            }
        }
        for node in cluster.nodes.iter().filter(|_| per_node) {
            if require_all && !has_all_keys(node, soft.iter().copied()) {
                continue;
            }
            for (k, c) in soft.iter().enumerate() {
                if c.topology_key == HOSTNAME_LABEL
                    || by_zone(c, pod, require_all).is_some()
                    || !included(c, pod, node)
                {
                    continue;
                }
                let v = node.topology(&c.topology_key).unwrap_or("");
                if let Some(n) = pairs[k].get_mut(v) {
                    *n += count_on(node, &c.selector, &pod.namespace);
                }
            }
        }
        // A hostname constraint over a controller's pods reads the cache's per-node counts.
        let hosts = soft
            .iter()
            .map(|c| match &c.selector {
                PodSelector::Controller(uid) if c.topology_key == HOSTNAME_LABEL => {
                    Some(cluster.hosts.of(uid))
                }
                _ => None,
            })
            .collect();
        Some(SpreadScore {
            constraints: soft,
            pairs,
            weights,
            ignored,
            hosts,
        })
    }

    /// The raw score of node `i` (more matching pods around: higher; normalized inverted).
    /// `None` for a node ignored for lacking a topology key.
    pub fn raw(&self, pod: &PodInfo, i: usize, node: &NodeInfo) -> Option<i64> {
        if self.ignored.contains(&i) {
            return None;
        }
        let mut score = 0.0;
        for (k, c) in self.constraints.iter().enumerate() {
            let Some(v) = node.topology(&c.topology_key) else {
                continue;
            };
            let count = match self.hosts[k] {
                // The controller has no live pod on any node.
                Some(None) => 0,
                Some(Some(counts)) => counts.get(i),
                None if c.topology_key == HOSTNAME_LABEL => {
                    count_on(node, &c.selector, &pod.namespace)
                }
                None => self.pairs[k].get(v).copied().unwrap_or(0),
            };
            score += count as f64 * self.weights[k] + (c.max_skew - 1) as f64;
        }
        Some(score.round() as i64)
    }
}

/// Normalizes raw spread scores to 0–100, fewer matching pods scoring higher; ignored nodes
/// (`None`) score 0.
pub fn normalize(raw: &[Option<i64>]) -> Vec<i64> {
    let present = raw.iter().flatten();
    let min = present.clone().copied().min().unwrap_or(0);
    let max = present.copied().max().unwrap_or(0).max(0);
    raw.iter()
        .map(|s| match s {
            None => 0,
            Some(_) if max == 0 => 100,
            Some(s) => 100 * (max + min - s) / max,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{ClusterFixture, node, nodes_passing, pod};
    use serde_json::json;

    /// The nodes the spread filter lets `p` onto.
    fn allowed(f: &ClusterFixture, p: &PodInfo) -> Vec<String> {
        let view = f.view();
        let filter = SpreadFilter::new(p, &view);
        nodes_passing(&view, |n| filter.check(p, n).is_ok())
    }

    fn constrained(skew: i32, key: &str, when: &str) -> PodInfo {
        pod(
            "new",
            json!({"metadata": {"labels": {"foo": "bar"}}, "spec": {
            "topologySpreadConstraints": [{"maxSkew": skew, "topologyKey": key,
                "whenUnsatisfiable": when, "labelSelector": {"matchLabels": {"foo": "bar"}}}]}}),
        )
    }

    /// Seed T-TSC-01: node1, node2 in zoneA; node3, node4 in zoneB; foo=bar pods on node1..3.
    fn seed_cluster() -> ClusterFixture {
        let mut f = ClusterFixture::default();
        for (n, zone) in [
            ("node1", "zoneA"),
            ("node2", "zoneA"),
            ("node3", "zoneB"),
            ("node4", "zoneB"),
        ] {
            f.add_node(node(
                n,
                json!({"metadata": {"labels": {"zone": zone, "node": n}}}),
            ));
        }
        for (i, n) in ["node1", "node2", "node3"].into_iter().enumerate() {
            f.place(
                pod(
                    &format!("p{i}"),
                    json!({"metadata": {"labels": {"foo": "bar"}}}),
                ),
                n,
            );
        }
        f
    }

    #[test]
    fn max_skew_one_by_zone_allows_only_the_emptier_zone() {
        let f = seed_cluster();
        assert_eq!(
            allowed(&f, &constrained(1, "zone", "DoNotSchedule")),
            ["node3", "node4"]
        );
    }

    #[test]
    fn max_skew_two_by_zone_allows_both_zones() {
        let f = seed_cluster();
        assert_eq!(
            allowed(&f, &constrained(2, "zone", "DoNotSchedule")).len(),
            4
        );
    }

    #[test]
    fn max_skew_one_by_node_allows_only_the_empty_node() {
        let f = seed_cluster();
        assert_eq!(
            allowed(&f, &constrained(1, "node", "DoNotSchedule")),
            ["node4"]
        );
    }

    #[test]
    fn a_node_without_the_topology_key_is_refused_for_good() {
        let mut f = seed_cluster();
        f.add_node(node("bare", json!({})));
        let p = constrained(1, "zone", "DoNotSchedule");
        let view = f.view();
        let filter = SpreadFilter::new(&p, &view);
        assert_eq!(
            filter.check(&p, &view.nodes[4]),
            Err(Rejection::unresolvable(Reason::SpreadMissingLabel))
        );
    }

    #[test]
    fn fewer_domains_than_min_domains_make_the_minimum_zero() {
        let f = seed_cluster();
        let mut p = constrained(1, "zone", "DoNotSchedule");
        // zone counts A=2, B=1; with minDomains 3 the minimum is 0, so B gives 1 + 1 − 0 = 2 > 1.
        Arc::make_mut(&mut p.spread)[0].min_domains = 3;
        assert!(allowed(&f, &p).is_empty());
    }

    #[test]
    fn nodes_outside_the_pods_node_affinity_do_not_count_unless_the_policy_ignores_it() {
        // T-TSC-03: an empty zoneC the pod's affinity excludes does not pull the minimum to 0.
        let mut f = seed_cluster();
        f.add_node(node(
            "node5",
            json!({"metadata": {"labels": {"zone": "zoneC", "node": "node5"}}}),
        ));
        let mut p = pod(
            "new",
            json!({"metadata": {"labels": {"foo": "bar"}}, "spec": {
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "zone", "operator": "NotIn", "values": ["zoneC"]}]}]}}},
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"foo": "bar"}}}]}}),
        );
        let placeable = |p: &PodInfo| -> Vec<String> {
            allowed(&f, p)
                .into_iter()
                .filter(|n| {
                    let view = f.view();
                    let node = &view.nodes[view.index[n.as_str()]];
                    p.required_node.matches(n, node.labels())
                })
                .collect()
        };
        assert_eq!(placeable(&p), ["node3", "node4"]);
        Arc::make_mut(&mut p.spread)[0].honor_node_affinity = false;
        assert!(
            placeable(&p).is_empty(),
            "zoneC's 0 is the minimum: zoneB would be at skew 2"
        );
    }

    #[test]
    fn soft_spread_prefers_the_domain_with_fewer_matching_pods() {
        let f = seed_cluster();
        let p = constrained(1, "zone", "ScheduleAnyway");
        let view = f.view();
        let feasible: Vec<usize> = (0..4).collect();
        let s = SpreadScore::new(&p, &view, &feasible).unwrap();
        let raw: Vec<Option<i64>> = feasible
            .iter()
            .map(|&i| s.raw(&p, i, &view.nodes[i]))
            .collect();
        let scores = normalize(&raw);
        assert!(scores[2] > scores[0], "zoneB over zoneA: {scores:?}");
        assert_eq!(scores[2], scores[3]);
    }

    #[test]
    fn the_default_zone_spread_read_from_the_zone_counts_scores_as_counting_node_by_node() {
        use crate::terms::ZONE_LABEL;
        let mut f = ClusterFixture::default();
        for (n, zone) in [
            ("a1", "a"),
            ("a2", "a"),
            ("b1", "b"),
            ("c1", "c"),
            ("x", ""),
        ] {
            let mut labels = json!({"pool": "x"});
            if !zone.is_empty() {
                labels[ZONE_LABEL] = json!(zone);
            }
            f.add_node(node(n, json!({"metadata": {"labels": labels}})));
        }
        let of = |name: &str, rs: &str, patch: serde_json::Value| {
            let mut v = json!({"metadata": {"ownerReferences": [
                {"kind": "ReplicaSet", "uid": rs, "controller": true}]}});
            json_patch::merge(&mut v, &patch);
            pod(name, v)
        };
        for (i, n) in ["a1", "a1", "a2", "b1", "x"].into_iter().enumerate() {
            f.place(of(&format!("p{i}"), "rs1", json!({})), n);
        }
        f.place(of("other", "rs2", json!({})), "c1");
        let view = f.view();
        let feasible: Vec<usize> = (0..view.nodes.len()).collect();
        let raw_of = |p: &PodInfo| -> Vec<Option<i64>> {
            let s = SpreadScore::new(p, &view, &feasible).expect("soft defaults");
            feasible
                .iter()
                .map(|&i| s.raw(p, i, &view.nodes[i]))
                .collect()
        };
        // The same pod with a node selector every node matches takes the node-by-node path.
        let fast = of("new", "rs1", json!({}));
        let slow = of(
            "new",
            "rs1",
            json!({"spec": {"nodeSelector": {"pool": "x"}}}),
        );
        assert!(by_zone(&fast.spread[1], &fast, false).is_some());
        assert!(by_zone(&slow.spread[1], &slow, false).is_none());
        assert_eq!(raw_of(&fast), raw_of(&slow));
    }

    #[test]
    fn normalizing_inverts_and_scales_and_zeroes_ignored_nodes() {
        assert_eq!(normalize(&[Some(0), Some(0)]), [100, 100]);
        assert_eq!(normalize(&[Some(2), Some(4), None]), [100, 50, 0]);
    }
}
