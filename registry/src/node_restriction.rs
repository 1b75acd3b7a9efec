//! NodeRestriction for Node objects, as upstream's admission plugin applies it to a kubelet's
//! writes: a node may set (on create) or change (on update) only the labels a kubelet may set
//! on itself, and may not change its taints once its Node exists. Which Node a node may write
//! at all is the authorizer's business (`api::authz::policy`). Pure: the objects in, the
//! upstream message out.

use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// Labels a kubelet may set on its own Node (upstream `kubeletapis.KubeletLabels`).
const KUBELET_LABELS: &[&str] = &[
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
];

/// Label namespaces (and their subdomains) a kubelet may use (`KubeletLabelNamespaces`).
const KUBELET_LABEL_NAMESPACES: &[&str] = &["kubelet.kubernetes.io", "node.kubernetes.io"];

/// Never settable by a node: what workloads are steered by when nodes must not choose.
const NODE_RESTRICTION_NAMESPACE: &str = "node-restriction.kubernetes.io";

/// The `prefix` of a `prefix/name` label key ("" for none).
fn namespace(key: &str) -> &str {
    key.split_once('/').map_or("", |(ns, _)| ns)
}

fn in_namespace(ns: &str, domain: &str) -> bool {
    ns == domain
        || ns
            .strip_suffix(domain)
            .is_some_and(|rest| rest.ends_with('.'))
}

/// Upstream `IsKubeletLabel`.
pub fn is_kubelet_label(key: &str) -> bool {
    KUBELET_LABELS.contains(&key)
        || KUBELET_LABEL_NAMESPACES
            .iter()
            .any(|d| in_namespace(namespace(key), d))
}

fn is_kubernetes_label(key: &str) -> bool {
    let ns = namespace(key);
    in_namespace(ns, "kubernetes.io") || in_namespace(ns, "k8s.io")
}

/// The keys among `modified` a node may not add, change or remove, sorted.
pub fn forbidden_labels<'a>(modified: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let forbidden: BTreeSet<&str> = modified
        .into_iter()
        .filter(|k| {
            in_namespace(namespace(k), NODE_RESTRICTION_NAMESPACE)
                || (is_kubernetes_label(k) && !is_kubelet_label(k))
        })
        .collect();
    forbidden.into_iter().map(String::from).collect()
}

fn labels(obj: &Value) -> Map<String, Value> {
    obj.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

/// Keys whose value differs between `a` and `b` (present in one only, or changed).
fn modified_labels(a: &Map<String, Value>, b: &Map<String, Value>) -> BTreeSet<String> {
    a.iter()
        .filter(|(k, v)| b.get(*k) != Some(v))
        .chain(b.iter().filter(|(k, v)| a.get(*k) != Some(v)))
        .map(|(k, _)| k.clone())
        .collect()
}

/// `spec.taints`, with a missing list and an empty one the same (as upstream's semantic
/// equality has it).
fn taints(obj: &Value) -> &[Value] {
    obj.pointer("/spec/taints")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// Checks a node's write of its own Node: `old` is `None` for a create. `Err` is the reason
/// (upstream's words, to follow `nodes "<name>" is forbidden: `).
pub fn admit_node(node: &str, new: &Value, old: Option<&Value>) -> Result<(), String> {
    match old {
        None => {
            let new_labels = labels(new);
            let forbidden = forbidden_labels(new_labels.keys().map(String::as_str));
            if !forbidden.is_empty() {
                return Err(format!(
                    "node \"{node}\" is not allowed to set the following labels: {}",
                    forbidden.join(", ")
                ));
            }
        }
        Some(old) => {
            if taints(new) != taints(old) {
                return Err(format!("node \"{node}\" is not allowed to modify taints"));
            }
            let modified = modified_labels(&labels(new), &labels(old));
            let forbidden = forbidden_labels(modified.iter().map(String::as_str));
            if !forbidden.is_empty() {
                return Err(format!(
                    "is not allowed to modify labels: {}",
                    forbidden.join(", ")
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(labels: Value, taints: Value) -> Value {
        json!({"metadata": {"name": "a", "labels": labels}, "spec": {"taints": taints}})
    }

    #[test]
    fn kubelet_labels_and_other_domains_are_allowed() {
        let allowed = [
            "kubernetes.io/hostname",
            "kubernetes.io/arch",
            "kubernetes.io/os",
            "beta.kubernetes.io/arch",
            "beta.kubernetes.io/os",
            "beta.kubernetes.io/instance-type",
            "topology.kubernetes.io/zone",
            "topology.kubernetes.io/region",
            "failure-domain.beta.kubernetes.io/zone",
            "node.kubernetes.io/instance-type",
            "node.kubernetes.io/anything",
            "sub.node.kubernetes.io/anything",
            "kubelet.kubernetes.io/anything",
            "disk",
            "tier",
            "berth.test/role",
            "example.com/gpu",
            "notkubernetes.io/x",
        ];
        assert_eq!(forbidden_labels(allowed), Vec::<String>::new());
    }

    #[test]
    fn roles_restriction_labels_and_other_kubernetes_labels_are_forbidden() {
        let keys = [
            "node-role.kubernetes.io/control-plane",
            "node-role.kubernetes.io/worker",
            "node-restriction.kubernetes.io/pool",
            "sub.node-restriction.kubernetes.io/pool",
            "kubernetes.io/other",
            "beta.kubernetes.io/fluentd-ds-ready",
            "k8s.io/x",
            "example.k8s.io/x",
            "topology.kubernetes.io/rack",
        ];
        assert_eq!(forbidden_labels(keys).len(), keys.len());
    }

    #[test]
    fn a_node_registering_with_a_role_label_gets_upstreams_message() {
        let new = node(
            json!({"node-role.kubernetes.io/control-plane": "", "disk": "ssd"}),
            json!([]),
        );
        assert_eq!(
            admit_node("a", &new, None),
            Err("node \"a\" is not allowed to set the following labels: \
                 node-role.kubernetes.io/control-plane"
                .into())
        );
        let ok = node(json!({"topology.kubernetes.io/zone": "z1"}), json!([]));
        assert_eq!(admit_node("a", &ok, None), Ok(()));
    }

    #[test]
    fn on_update_only_changed_labels_count() {
        // An administrator's role label is left alone by the node: allowed.
        let old = node(
            json!({"node-role.kubernetes.io/control-plane": ""}),
            json!(null),
        );
        let mut new = old.clone();
        new["metadata"]["labels"]["topology.kubernetes.io/zone"] = json!("z1");
        assert_eq!(admit_node("a", &new, Some(&old)), Ok(()));
        // Removing it, adding another, or changing one is not.
        let removed = node(json!({}), json!(null));
        let added = node(
            json!({"node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/x": ""}),
            json!(null),
        );
        for new in [removed, added] {
            let err = admit_node("a", &new, Some(&old)).unwrap_err();
            assert!(
                err.starts_with("is not allowed to modify labels: node-role.kubernetes.io/"),
                "{err}"
            );
        }
    }

    #[test]
    fn taints_are_fixed_once_the_node_exists() {
        let tainted = node(
            json!({}),
            json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
        );
        assert_eq!(
            admit_node("a", &tainted, None),
            Ok(()),
            "set at registration"
        );
        let untainted = node(json!({}), json!(null));
        assert_eq!(
            admit_node("a", &untainted, Some(&tainted)),
            Err("node \"a\" is not allowed to modify taints".into())
        );
        assert_eq!(
            admit_node("a", &tainted, Some(&untainted)),
            Err("node \"a\" is not allowed to modify taints".into())
        );
        // A missing list and an empty one are the same.
        let empty = node(json!({}), json!([]));
        assert_eq!(admit_node("a", &empty, Some(&untainted)), Ok(()));
    }
}
