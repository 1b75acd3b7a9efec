//! Test fixtures for the scheduler's planners: nodes and pods from JSON merge patches over
//! ready, roomy defaults, and a cache holding them.

use super::cache::{Cache, Cluster, NodeInfo};
use super::facts::{NodeFacts, PodInfo};
use serde_json::{Value, json};
use std::sync::Arc;

/// A Ready node with 4 cpu, 16Gi and room for 110 pods, labelled with its hostname; `patch`
/// is merged over that.
pub fn node(name: &str, patch: Value) -> NodeFacts {
    let mut v = json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}]},
    });
    json_patch::merge(&mut v, &patch);
    NodeFacts::parse(&serde_json::to_vec(&v).unwrap()).unwrap()
}

/// A default node carrying one taint, `key` with `effect`.
pub fn tainted(name: &str, key: &str, effect: &str) -> NodeFacts {
    node(
        name,
        json!({"spec": {"taints": [{"key": key, "effect": effect}]}}),
    )
}

/// A pod in `default` with one container requesting nothing; `patch` is merged over that.
pub fn pod(name: &str, patch: Value) -> PodInfo {
    let mut v = json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"containers": [{"name": "c"}]},
    });
    json_patch::merge(&mut v, &patch);
    PodInfo::parse(&serde_json::to_vec(&v).unwrap()).unwrap()
}

/// A cache filled by hand.
#[derive(Default)]
pub struct ClusterFixture {
    pub cache: Cache,
}

impl ClusterFixture {
    /// Default nodes with these names.
    pub fn with_nodes(names: &[&str]) -> ClusterFixture {
        let mut f = ClusterFixture::default();
        for n in names {
            f.add_node(node(n, json!({})));
        }
        f
    }

    pub fn add_node(&mut self, n: NodeFacts) {
        self.cache.upsert_node(n);
    }

    pub fn place(&mut self, p: PodInfo, node: &str) {
        self.cache.place(Arc::new(p), &Arc::from(node));
    }

    pub fn view(&self) -> Cluster<'_> {
        self.cache.view()
    }
}

/// The names of the view's nodes that `passes` lets through, in the view's order: what a
/// filter's tests compare.
pub fn nodes_passing(view: &Cluster<'_>, passes: impl Fn(&NodeInfo) -> bool) -> Vec<String> {
    view.nodes
        .iter()
        .filter(|n| passes(n))
        .map(|n| n.name().to_string())
        .collect()
}
