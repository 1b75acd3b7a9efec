//! Live pods per controller and node, the node named by its index in the cache, kept up to
//! date by the cache as pods and nodes come and go. The default spreading's hostname term
//! reads one controller's counts once per decision and then one small map per node, instead
//! of a hash lookup in every feasible node's own per-controller map (with 5,000 nodes, 500
//! feasible nodes a pod, those scattered lookups were most of the scheduler's score time in
//! the 50,000-pod scale run). Only nodes where the controller has pods have an entry, so the
//! counts take as much room as the pods do.
//!
//! Planner: pure, no I/O.

use super::cache::NodeInfo;
use super::facts::PodInfo;
use std::collections::HashMap;
use std::sync::Arc;

/// One controller's live pods per node index.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct NodeCounts(HashMap<u32, i64>);

impl NodeCounts {
    /// The controller's live pods on the node at index `i`.
    pub fn get(&self, i: usize) -> i64 {
        u32::try_from(i)
            .ok()
            .and_then(|i| self.0.get(&i))
            .copied()
            .unwrap_or(0)
    }
}

/// Live pods per controller uid, then per node index.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct HostCounts {
    by_controller: HashMap<Arc<str>, NodeCounts>,
}

impl HostCounts {
    /// The counts of controller `uid` (none while it has no live pod on a node).
    pub fn of(&self, uid: &str) -> Option<&NodeCounts> {
        self.by_controller.get(uid)
    }

    /// Counts `pod` (if it is a live pod of a controller) `delta` times on node `i`.
    pub fn add_pod(&mut self, i: usize, pod: &PodInfo, delta: i64) {
        if let (Some(uid), false) = (&pod.controller, pod.terminating) {
            self.add(uid, i, delta);
        }
    }

    /// Counts every pod of `node` `delta` times at index `i` (a node that appears or leaves,
    /// or moves to another index when another node leaves).
    pub fn add_node(&mut self, i: usize, node: &NodeInfo, delta: i64) {
        for (uid, n) in &node.by_controller {
            self.add(uid, i, delta * n);
        }
    }

    fn add(&mut self, uid: &Arc<str>, i: usize, delta: i64) {
        let Ok(i) = u32::try_from(i) else {
            return;
        };
        let nodes = self.by_controller.entry(uid.clone()).or_default();
        let n = nodes.0.entry(i).or_insert(0);
        *n += delta;
        if *n <= 0 {
            nodes.0.remove(&i);
            if nodes.0.is_empty() {
                self.by_controller.remove(uid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::{ClusterFixture, node, pod};
    use serde_json::json;

    fn of(name: &str, rs: &str) -> crate::facts::PodInfo {
        pod(
            name,
            json!({"metadata": {"ownerReferences": [
                {"kind": "ReplicaSet", "uid": rs, "controller": true}]}}),
        )
    }

    /// The counts as the nodes' own maps say, by node index.
    fn recount(f: &ClusterFixture, rs: &str) -> Vec<i64> {
        let view = f.view();
        view.nodes
            .iter()
            .map(|n| n.by_controller.get(rs).copied().unwrap_or(0))
            .collect()
    }

    fn counted(f: &ClusterFixture, rs: &str) -> Vec<i64> {
        let view = f.view();
        (0..view.nodes.len())
            .map(|i| view.hosts.of(rs).map_or(0, |c| c.get(i)))
            .collect()
    }

    #[test]
    fn the_counts_follow_pods_and_nodes_as_indexes_move() {
        let mut f = ClusterFixture::default();
        for n in ["a", "b", "c"] {
            f.add_node(node(n, json!({})));
        }
        f.place(of("p1", "rs1"), "a");
        f.place(of("p2", "rs1"), "c");
        f.place(of("p3", "rs1"), "c");
        f.place(of("q1", "rs2"), "b");
        assert_eq!(counted(&f, "rs1"), [1, 0, 2]);
        assert_eq!(counted(&f, "rs2"), [0, 1, 0]);
        // "a" leaves: "c" takes its index; its pods' counts move with it.
        f.cache.remove_node("a");
        assert_eq!(counted(&f, "rs1"), recount(&f, "rs1"));
        assert_eq!(counted(&f, "rs1"), [2, 0]);
        assert_eq!(counted(&f, "rs2"), [0, 1]);
        // "a" comes back with its pod (an orphan until then) at the end.
        f.add_node(node("a", json!({})));
        assert_eq!(counted(&f, "rs1"), [2, 0, 1]);
        f.cache.unplace("default/p2");
        f.cache.unplace("default/q1");
        assert_eq!(counted(&f, "rs1"), [1, 0, 1]);
        assert!(f.view().hosts.of("rs2").is_none(), "no live pod: no entry");
        for rs in ["rs1", "rs2"] {
            assert_eq!(counted(&f, rs), recount(&f, rs), "{rs}");
        }
    }
}
