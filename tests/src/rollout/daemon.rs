//! A DaemonSet's pods per node, kept from a pod watch, one sample per event: what a DaemonSet
//! rollout is bounded by (`maxUnavailable` counts nodes without an available daemon pod,
//! `maxSurge` nodes running two). Pure.
//!
//! Counting rules, as upstream's DaemonSet controller counts: a pod is meant for its
//! `spec.nodeName`, or before it is bound for the node its `matchFields metadata.name In
//! [node]` affinity names; it is **counted** while it has no `deletionTimestamp` and is neither
//! `Succeeded` nor `Failed`, and **available** while counted and Ready (minReadySeconds 0, the
//! only setting the suites use with this tally). A node is **unavailable** when none of its
//! pods is available.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::Value;

use super::tally::{Line, Stamp, Tally, Timeline, apply_event, uid};

/// The label the DaemonSet controller puts on every pod it makes.
pub const HASH_LABEL: &str = "controller-revision-hash";

/// What the tally keeps of one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonPod {
    pub name: String,
    pub node: String,
    pub hash: String,
    pub image: String,
    pub counted: bool,
    pub available: bool,
}

/// The node a daemon pod is meant for.
pub fn target_node(pod: &Value) -> String {
    if let Some(n) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
        return n.to_string();
    }
    pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"][0]["matchFields"][0]["values"][0]
        .as_str()
        .unwrap_or("?")
        .to_string()
}

impl DaemonPod {
    pub fn of(pod: &Value) -> DaemonPod {
        let meta = &pod["metadata"];
        let phase = pod["status"]["phase"].as_str().unwrap_or("");
        let counted =
            meta["deletionTimestamp"].is_null() && !matches!(phase, "Succeeded" | "Failed");
        let ready = crate::pod_reading::is_ready(pod);
        DaemonPod {
            name: meta["name"].as_str().unwrap_or("?").to_string(),
            node: target_node(pod),
            hash: meta["labels"][HASH_LABEL]
                .as_str()
                .unwrap_or("")
                .to_string(),
            image: pod["spec"]["containers"][0]["image"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            counted,
            available: counted && ready,
        }
    }
}

/// The daemon pods the watch has seen and not yet seen deleted, by uid.
#[derive(Debug, Clone, Default)]
pub struct DaemonPods {
    pods: BTreeMap<String, DaemonPod>,
}

/// One node's pods in a sample.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OnNode {
    pub counted: usize,
    pub available: usize,
}

impl DaemonPods {
    pub fn pods(&self) -> impl Iterator<Item = &DaemonPod> {
        self.pods.values()
    }

    /// Counted and available pods per node.
    pub fn per_node(&self) -> BTreeMap<String, OnNode> {
        let mut m: BTreeMap<String, OnNode> = BTreeMap::new();
        for p in self.pods.values() {
            let e = m.entry(p.node.clone()).or_default();
            e.counted += usize::from(p.counted);
            e.available += usize::from(p.available);
        }
        m
    }

    /// Whether exactly the `nodes` have one available pod each, all of `hash`, and nothing else
    /// is counted.
    pub fn settled_on(&self, nodes: &[String], hash: &str) -> Result<(), String> {
        let counted: Vec<&DaemonPod> = self.pods.values().filter(|p| p.counted).collect();
        let mut on: Vec<&str> = counted
            .iter()
            .filter(|p| p.available && p.hash == hash)
            .map(|p| p.node.as_str())
            .collect();
        on.sort_unstable();
        let mut want: Vec<&str> = nodes.iter().map(String::as_str).collect();
        want.sort_unstable();
        if counted.len() == nodes.len() && on == want {
            Ok(())
        } else {
            Err(format!(
                "want one available pod of {hash} on each of {want:?}"
            ))
        }
    }
}

impl Tally for DaemonPods {
    type Sample = NodeSample;

    fn insert(&mut self, obj: &Value) {
        self.pods.insert(uid(obj), DaemonPod::of(obj));
    }

    fn apply(&mut self, event: &Value) -> bool {
        apply_event(&mut self.pods, event, DaemonPod::of)
    }

    fn sample(&self, stamp: Stamp) -> NodeSample {
        NodeSample {
            stamp,
            per_node: self.per_node(),
        }
    }

    fn summary(&self) -> String {
        let mut s = String::new();
        for p in self.pods.values() {
            let _ = write!(
                s,
                " [{} {} {}{}{}]",
                p.node,
                p.name,
                p.hash,
                if p.counted { "" } else { " gone" },
                if p.available { " available" } else { "" }
            );
        }
        s
    }
}

/// The pods per node after one event.
#[derive(Debug, Clone)]
pub struct NodeSample {
    pub stamp: Stamp,
    pub per_node: BTreeMap<String, OnNode>,
}

impl NodeSample {
    /// Of `nodes`, how many have no available pod.
    pub fn unavailable(&self, nodes: &[String]) -> usize {
        nodes
            .iter()
            .filter(|n| self.per_node.get(*n).is_none_or(|c| c.available == 0))
            .count()
    }

    /// The most pods counted on one node.
    pub fn most_on_a_node(&self) -> usize {
        self.per_node.values().map(|c| c.counted).max().unwrap_or(0)
    }
}

impl Line for NodeSample {
    const LEGEND: &'static str = "per node: counted/available";

    fn line(&self) -> String {
        let mut s = self.stamp.line();
        for (n, c) in &self.per_node {
            let _ = write!(s, " [{n}: {}/{}]", c.counted, c.available);
        }
        s
    }
}

impl Timeline<NodeSample> {
    /// The first sample with the most of `nodes` lacking an available pod.
    pub fn most_unavailable(&self, nodes: &[String]) -> Option<&NodeSample> {
        self.samples
            .iter()
            .rev()
            .max_by_key(|s| s.unavailable(nodes))
    }

    /// The first sample with the most pods counted on one node.
    pub fn most_on_a_node(&self) -> Option<&NodeSample> {
        self.samples.iter().rev().max_by_key(|s| s.most_on_a_node())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(
        kind: &str,
        uid: &str,
        node: Option<&str>,
        pinned: &str,
        hash: &str,
        ready: bool,
    ) -> Value {
        let mut pod = json!({"metadata": {"uid": uid, "name": uid, "labels": {HASH_LABEL: hash}},
            "spec": {"containers": [{"image": "x"}], "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [pinned]}]}]}}}},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}});
        if let Some(n) = node {
            pod["spec"]["nodeName"] = json!(n);
        }
        json!({"type": kind, "object": pod})
    }

    #[test]
    fn nodes_without_an_available_pod_are_counted_per_sample() {
        let nodes: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let mut t = DaemonPods::default();
        t.apply(&event("ADDED", "1", Some("a"), "a", "h1", true));
        t.apply(&event("ADDED", "2", None, "b", "h1", false));
        let stamp = Stamp {
            at: std::time::Duration::ZERO,
            rv: 1,
            event: "x".into(),
        };
        let s = t.sample(stamp.clone());
        assert_eq!(s.unavailable(&nodes), 2, "b's pod is not ready, c has none");
        t.apply(&event("ADDED", "3", Some("a"), "a", "h2", false));
        assert_eq!(t.sample(stamp.clone()).most_on_a_node(), 2);
        t.apply(&event("DELETED", "1", Some("a"), "a", "h1", true));
        assert_eq!(t.sample(stamp).unavailable(&nodes), 3);
        assert!(t.settled_on(&nodes, "h2").is_err());
    }
}
