//! The scheduler's picture of the cluster: per node, its facts and what the pods placed on it
//! use (requests, ports, labels for affinity and spreading), kept up to date from store events
//! and from the scheduler's own decisions ("assumed" pods, counted before their binding is
//! observed, so the next decision sees them at once). Pure data; the loop feeds it.
//!
//! Planner: pure, no I/O.

use super::facts::{Labels, NodeFacts, PodInfo, PodKey};
use super::host_counts::HostCounts;
use super::terms::{HOSTNAME_LABEL, NamespaceLabels, ZONE_LABEL};
use super::zones::{ZoneCounts, zone_of};
use berth_shared::scheduling::{HostPort, Resources};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// One node and the pods placed on it.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    pub node: Arc<NodeFacts>,
    pub pods: Vec<Arc<PodInfo>>,
    pub requested: Resources,
    pub non_zero_cpu: i64,
    pub non_zero_memory: i64,
    pub ports: Vec<HostPort>,
    /// Live pods per controller uid (the default spreading's count).
    pub by_controller: HashMap<Arc<str>, i64>,
    /// Pods with any inter-pod affinity or anti-affinity term.
    pub with_affinity: usize,
    /// Pods with required anti-affinity terms.
    pub with_required_anti: usize,
}

impl NodeInfo {
    pub fn new(node: NodeFacts) -> NodeInfo {
        NodeInfo {
            node: Arc::new(node),
            pods: Vec::new(),
            requested: Resources::default(),
            non_zero_cpu: 0,
            non_zero_memory: 0,
            ports: Vec::new(),
            by_controller: HashMap::new(),
            with_affinity: 0,
            with_required_anti: 0,
        }
    }

    pub fn name(&self) -> &str {
        &self.node.name
    }

    pub fn labels(&self) -> &Labels {
        &self.node.labels
    }

    /// The value of the topology label `key`; the zone and hostname labels come from the
    /// node's facts without a search of its labels.
    pub fn topology(&self, key: &str) -> Option<&str> {
        match key {
            ZONE_LABEL => self.node.zone.as_deref(),
            HOSTNAME_LABEL => self.node.hostname.as_deref(),
            _ => self.node.labels.get(key).map(String::as_str),
        }
    }

    pub fn add_pod(&mut self, pod: Arc<PodInfo>) {
        self.requested.add(&pod.requests);
        self.non_zero_cpu += pod.non_zero_cpu;
        self.non_zero_memory += pod.non_zero_memory;
        self.ports.extend(pod.host_ports.iter().cloned());
        if let (Some(c), false) = (&pod.controller, pod.terminating) {
            *self.by_controller.entry(c.clone()).or_insert(0) += 1;
        }
        self.with_affinity += usize::from(!pod.affinity.is_empty());
        self.with_required_anti += usize::from(!pod.affinity.required_anti.is_empty());
        self.pods.push(pod);
    }

    pub fn remove_pod(&mut self, key: &str) -> Option<Arc<PodInfo>> {
        let at = self.pods.iter().position(|p| &*p.key == key)?;
        let pod = self.pods.swap_remove(at);
        self.requested.subtract(&pod.requests);
        self.non_zero_cpu -= pod.non_zero_cpu;
        self.non_zero_memory -= pod.non_zero_memory;
        for hp in &pod.host_ports {
            if let Some(i) = self.ports.iter().position(|p| p == hp) {
                self.ports.swap_remove(i);
            }
        }
        if let (Some(c), false) = (&pod.controller, pod.terminating)
            && let Some(n) = self.by_controller.get_mut(c)
        {
            *n -= 1;
            if *n <= 0 {
                self.by_controller.remove(c);
            }
        }
        self.with_affinity -= usize::from(!pod.affinity.is_empty());
        self.with_required_anti -= usize::from(!pod.affinity.required_anti.is_empty());
        Some(pod)
    }
}

/// A read-only view for one decision.
#[derive(Clone, Copy)]
pub struct Cluster<'a> {
    pub nodes: &'a [NodeInfo],
    pub index: &'a HashMap<Arc<str>, usize>,
    pub namespaces: &'a NamespaceLabels,
    /// Pods with any inter-pod term, cluster-wide (0: inter-pod scoring has nothing to do).
    pub pods_with_affinity: usize,
    /// Pods with required anti-affinity, cluster-wide.
    pub pods_with_required_anti: usize,
    /// Live pods per controller and zone, over `nodes`.
    pub zones: &'a ZoneCounts,
    /// Live pods per controller and index in `nodes`.
    pub hosts: &'a HostCounts,
}

/// The cache of node infos.
#[derive(Default)]
pub struct Cache {
    nodes: Vec<NodeInfo>,
    index: HashMap<Arc<str>, usize>,
    /// Pods bound to nodes the scheduler has not seen (yet, or any more), by node name.
    orphans: HashMap<Arc<str>, Vec<Arc<PodInfo>>>,
    /// Where each counted pod is.
    placed: HashMap<PodKey, Arc<str>>,
    /// Pods placed by a decision whose binding is not observed yet.
    assumed: HashSet<PodKey>,
    namespaces: NamespaceLabels,
    pods_with_affinity: usize,
    pods_with_required_anti: usize,
    /// Live pods of `nodes` (not orphans) per controller and zone, and per controller and
    /// node index.
    zones: ZoneCounts,
    hosts: HostCounts,
}

impl Cache {
    pub fn view(&self) -> Cluster<'_> {
        Cluster {
            nodes: &self.nodes,
            index: &self.index,
            namespaces: &self.namespaces,
            pods_with_affinity: self.pods_with_affinity,
            pods_with_required_anti: self.pods_with_required_anti,
            zones: &self.zones,
            hosts: &self.hosts,
        }
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Adds or replaces a node; true when something placement depends on changed.
    pub fn upsert_node(&mut self, facts: NodeFacts) -> bool {
        if let Some(&i) = self.index.get(&facts.name) {
            let changed = *self.nodes[i].node != facts;
            if changed {
                self.zones.add_node(&self.nodes[i], -1);
                self.nodes[i].node = Arc::new(facts);
                self.zones.add_node(&self.nodes[i], 1);
            }
            return changed;
        }
        let name = facts.name.clone();
        let mut info = NodeInfo::new(facts);
        for pod in self.orphans.remove(&name).unwrap_or_default() {
            info.add_pod(pod);
        }
        self.zones.add_node(&info, 1);
        self.hosts.add_node(self.nodes.len(), &info, 1);
        self.index.insert(name, self.nodes.len());
        self.nodes.push(info);
        true
    }

    /// Removes a node; its pods stay counted (as orphans) until they go.
    pub fn remove_node(&mut self, name: &str) {
        let Some(i) = self.index.remove(name) else {
            return;
        };
        let last = self.nodes.len() - 1;
        self.hosts.add_node(i, &self.nodes[i], -1);
        if i != last {
            self.hosts.add_node(last, &self.nodes[last], -1);
        }
        let info = self.nodes.swap_remove(i);
        self.zones.add_node(&info, -1);
        if let Some(moved) = self.nodes.get(i) {
            self.index.insert(moved.node.name.clone(), i);
            self.hosts.add_node(i, moved, 1);
        }
        if !info.pods.is_empty() {
            self.orphans.insert(info.node.name.clone(), info.pods);
        }
    }

    /// Counts `pod` on `node` (moving it if it was counted elsewhere).
    pub fn place(&mut self, pod: Arc<PodInfo>, node: &Arc<str>) {
        self.unplace(&pod.key);
        self.pods_with_affinity += usize::from(!pod.affinity.is_empty());
        self.pods_with_required_anti += usize::from(!pod.affinity.required_anti.is_empty());
        self.placed.insert(pod.key.clone(), node.clone());
        match self.index.get(node) {
            Some(&i) => {
                self.zones.add_pod(zone_of(&self.nodes[i]), &pod, 1);
                self.hosts.add_pod(i, &pod, 1);
                self.nodes[i].add_pod(pod);
            }
            None => self.orphans.entry(node.clone()).or_default().push(pod),
        }
    }

    /// Stops counting a pod; returns it and the node it was on.
    pub fn unplace(&mut self, key: &str) -> Option<(Arc<PodInfo>, Arc<str>)> {
        let node = self.placed.remove(key)?;
        self.assumed.remove(key);
        let pod = match self.index.get(&node) {
            Some(&i) => {
                let pod = self.nodes[i].remove_pod(key);
                if let Some(p) = &pod {
                    self.zones.add_pod(zone_of(&self.nodes[i]), p, -1);
                    self.hosts.add_pod(i, p, -1);
                }
                pod
            }
            None => {
                let list = self.orphans.get_mut(&node)?;
                let at = list.iter().position(|p| &*p.key == key)?;
                let pod = list.swap_remove(at);
                if list.is_empty() {
                    self.orphans.remove(&node);
                }
                Some(pod)
            }
        }?;
        self.pods_with_affinity -= usize::from(!pod.affinity.is_empty());
        self.pods_with_required_anti -= usize::from(!pod.affinity.required_anti.is_empty());
        Some((pod, node))
    }

    /// Counts a pod on the node a decision chose, before its binding is observed.
    pub fn assume(&mut self, pod: Arc<PodInfo>, node: &Arc<str>) {
        let key = pod.key.clone();
        self.place(pod, node);
        self.assumed.insert(key);
    }

    /// The binding was observed: the pod is counted from the store from now on.
    pub fn confirm(&mut self, key: &str) {
        self.assumed.remove(key);
    }

    /// A binding failed: stop counting the assumed pod.
    pub fn forget(&mut self, key: &str) {
        if self.assumed.contains(key) {
            self.unplace(key);
        }
    }

    pub fn is_assumed(&self, key: &str) -> bool {
        self.assumed.contains(key)
    }

    pub fn assumed(&self) -> impl Iterator<Item = &PodKey> {
        self.assumed.iter()
    }

    /// The node a pod is counted on.
    pub fn node_of(&self, key: &str) -> Option<&Arc<str>> {
        self.placed.get(key)
    }

    /// The counted pod itself.
    pub fn pod(&self, key: &str) -> Option<&Arc<PodInfo>> {
        let node = self.placed.get(key)?;
        let list = match self.index.get(node) {
            Some(&i) => &self.nodes[i].pods,
            None => self.orphans.get(node)?,
        };
        list.iter().find(|p| &*p.key == key)
    }

    pub fn set_namespace(&mut self, name: &str, labels: Labels) {
        self.namespaces.insert(name.to_string(), labels);
    }

    pub fn remove_namespace(&mut self, name: &str) {
        self.namespaces.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str) -> NodeFacts {
        NodeFacts::parse(
            &serde_json::to_vec(&json!({"metadata": {"name": name},
                "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"},
                    "conditions": [{"type": "Ready", "status": "True"}]}}))
            .unwrap(),
        )
        .unwrap()
    }

    fn pod(name: &str, cpu: &str) -> Arc<PodInfo> {
        Arc::new(
            PodInfo::parse(
                &serde_json::to_vec(&json!({"metadata": {"name": name, "namespace": "d"},
                    "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 80}],
                        "resources": {"requests": {"cpu": cpu}}}]}}))
                .unwrap(),
            )
            .unwrap(),
        )
    }

    /// A cache holding one node, and the node's name.
    fn one_node(name: &str) -> (Cache, Arc<str>) {
        let mut c = Cache::default();
        c.upsert_node(node(name));
        (c, Arc::from(name))
    }

    #[test]
    fn placed_pods_add_up_on_their_node_and_removal_gives_back() {
        let (mut c, n1) = one_node("n1");
        c.place(pod("a", "500m"), &n1);
        c.place(pod("b", "250m"), &n1);
        let info = &c.view().nodes[0];
        assert_eq!(info.requested.milli_cpu, 750);
        assert_eq!(info.pods.len(), 2);
        assert_eq!(info.ports.len(), 2);
        c.unplace("d/a");
        let info = &c.view().nodes[0];
        assert_eq!((info.requested.milli_cpu, info.ports.len()), (250, 1));
    }

    #[test]
    fn pods_on_an_unknown_node_count_once_it_appears() {
        let mut c = Cache::default();
        c.place(pod("a", "1"), &Arc::from("late"));
        assert_eq!(c.node_count(), 0);
        c.upsert_node(node("late"));
        assert_eq!(c.view().nodes[0].requested.milli_cpu, 1000);
        c.remove_node("late");
        c.upsert_node(node("late"));
        assert_eq!(
            c.view().nodes[0].pods.len(),
            1,
            "kept across the node's absence"
        );
    }

    #[test]
    fn a_forgotten_assumption_releases_the_node_but_a_confirmed_one_stays() {
        let (mut c, n1) = one_node("n1");
        c.assume(pod("a", "1"), &n1);
        c.assume(pod("b", "1"), &n1);
        c.confirm("d/b");
        c.forget("d/a");
        c.forget("d/b");
        assert_eq!(c.view().nodes[0].requested.milli_cpu, 1000);
        assert!(!c.is_assumed("d/b"));
    }

    #[test]
    fn removing_a_node_keeps_the_index_of_the_others_right() {
        let mut c = Cache::default();
        for n in ["a", "b", "c"] {
            c.upsert_node(node(n));
        }
        c.remove_node("a");
        let v = c.view();
        for (name, &i) in v.index {
            assert_eq!(v.nodes[i].name(), &**name);
        }
        assert!(!c.upsert_node(node("b")), "an identical node is no change");
    }
}
