//! Fixtures for the DaemonSet planners' table tests: a DaemonSet `agent` (selector
//! `app=agent`) with a given update strategy and template patch, nodes, and daemon pods built
//! field by field.

use super::plan::by_node;
use super::view::{DaemonPod, DaemonSet, HASH_LABEL, Node, Pod};
use berth_shared::scheduling::{Taint, TaintEffect};
use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

pub const NEW: &str = "new";
pub const OLD: &str = "old";

pub fn now() -> Timestamp {
    "2024-06-01T12:00:00Z".parse().unwrap()
}

pub fn ago(secs: i64) -> Timestamp {
    now() - SignedDuration::from_secs(secs)
}

/// The DaemonSet with `updateStrategy` and `spec.template.spec` merged with `spec_patch`.
pub fn daemon_set(strategy: Value, spec_patch: Value) -> DaemonSet {
    let mut spec = json!({"containers": [{"name": "c", "image": "agent:1"}]});
    json_patch::merge(&mut spec, &spec_patch);
    DaemonSet::from_value(&json!({
        "metadata": {"name": "agent", "namespace": "ops", "uid": "ds-uid", "generation": 2},
        "spec": {"selector": {"matchLabels": {"app": "agent"}}, "updateStrategy": strategy,
            "template": {"metadata": {"labels": {"app": "agent"}}, "spec": spec}},
        "status": {"observedGeneration": 2}}))
    .unwrap()
}

pub fn unavailable(n: Value) -> Value {
    json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": n, "maxSurge": 0}})
}

pub fn surge(n: Value) -> Value {
    json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": n}})
}

pub fn node(name: &str) -> Arc<Node> {
    node_with(name, &[], &[])
}

pub fn node_with(name: &str, labels: &[(&str, &str)], taints: &[(&str, TaintEffect)]) -> Arc<Node> {
    Arc::new(Node {
        name: name.into(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        taints: taints.iter().map(|(k, e)| Taint::new(k, "", *e)).collect(),
    })
}

pub fn nodes(names: &[&str]) -> Vec<Arc<Node>> {
    names.iter().map(|n| node(n)).collect()
}

/// A pod of `hash` bound to `node`, Running, not ready, created a minute ago.
pub fn pod(name: &str, node: &str, hash: &str) -> Pod {
    Pod {
        name: name.into(),
        uid: format!("uid-{name}"),
        labels: BTreeMap::from([
            ("app".to_string(), "agent".to_string()),
            (HASH_LABEL.to_string(), hash.to_string()),
        ])
        .into(),
        phase: "Running".into(),
        node_name: node.into(),
        created: Some(ago(60)),
        ..Pod::default()
    }
}

/// Ready for `secs` seconds.
pub fn ready(mut p: Pod, secs: i64) -> Pod {
    p.ready = true;
    p.ready_since = Some(ago(secs));
    p
}

/// Pod `name` on `node` of the old revision, Ready (so available) for 100 s.
pub fn old_ready(name: &str, node: &str) -> Pod {
    ready(pod(name, node, OLD), 100)
}

/// Pod `name` on `node` of the new revision, Ready (so available) for 100 s.
pub fn new_ready(name: &str, node: &str) -> Pod {
    ready(pod(name, node, NEW), 100)
}

pub fn phase(mut p: Pod, phase: &str) -> Pod {
    p.phase = phase.into();
    p
}

pub fn deleting(mut p: Pod) -> Pod {
    p.deleting = true;
    p
}

pub fn created(mut p: Pod, secs_ago: i64) -> Pod {
    p.created = Some(ago(secs_ago));
    p
}

/// Not bound yet (still meant for the node it was made for).
pub fn unbound(mut p: Pod) -> (String, Pod) {
    let node = std::mem::take(&mut p.node_name);
    (node, p)
}

/// The pods by the node they are meant for, as the planners get them.
pub fn placed(pods: Vec<Pod>) -> BTreeMap<String, Vec<Arc<Pod>>> {
    placed_with(pods, Vec::new())
}

/// [`placed`], with unbound pods meant for the given nodes.
pub fn placed_with(
    bound: Vec<Pod>,
    unbound: Vec<(String, Pod)>,
) -> BTreeMap<String, Vec<Arc<Pod>>> {
    let daemon: Vec<DaemonPod> = bound
        .into_iter()
        .map(|p| (p.node_name.clone(), p))
        .chain(unbound)
        .map(|(n, p)| DaemonPod {
            pod: Arc::new(p),
            node: Some(n),
        })
        .collect();
    by_node(&daemon)
}
