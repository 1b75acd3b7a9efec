//! Printers for cluster bookkeeping kinds: Node (status, roles, addresses), Namespace, Lease and
//! RuntimeClass.

use std::collections::BTreeSet;

use jiff::Timestamp;
use serde_json::{Value, json};

use super::lookup::{list_at, map_at, opt_bool, str_at};
use super::{ColumnDefinition, age_col, col, created, name, name_col, wide};

const NODE_ROLE_PREFIX: &str = "node-role.kubernetes.io/";
const NODE_ROLE_LABEL: &str = "kubernetes.io/role";

pub(crate) fn node_columns() -> Vec<ColumnDefinition> {
    vec![
        name_col(),
        col("Status", "string", "The status of the node"),
        col("Roles", "string", "The roles of the node"),
        age_col(),
        col("Version", "string", "Kubelet version reported by the node."),
        wide(
            "Internal-IP",
            "string",
            "The node's first InternalIP address.",
        ),
        wide(
            "External-IP",
            "string",
            "The node's first ExternalIP address.",
        ),
        wide("OS-Image", "string", "OS image reported by the node."),
        wide(
            "Kernel-Version",
            "string",
            "Kernel version reported by the node.",
        ),
        wide(
            "Container-Runtime",
            "string",
            "Container runtime version reported by the node.",
        ),
    ]
}

/// `Ready`, `NotReady` or `Unknown` (no Ready condition), plus `SchedulingDisabled` when cordoned.
fn node_status(node: &Value) -> String {
    // Upstream indexes conditions by type, so the last Ready condition wins.
    let ready = list_at(node, &["status", "conditions"])
        .iter()
        .rev()
        .find(|c| str_at(c, &["type"]) == "Ready");
    let mut parts = vec![match ready {
        Some(c) if str_at(c, &["status"]) == "True" => "Ready",
        Some(_) => "NotReady",
        None => "Unknown",
    }];
    if opt_bool(node, &["spec", "unschedulable"]) == Some(true) {
        parts.push("SchedulingDisabled");
    }
    parts.join(",")
}

/// Roles from `node-role.kubernetes.io/<role>` label keys and the `kubernetes.io/role` value.
fn node_roles(node: &Value) -> String {
    let mut roles = BTreeSet::new();
    if let Some(labels) = map_at(node, &["metadata", "labels"]) {
        for (k, v) in labels {
            if let Some(role) = k.strip_prefix(NODE_ROLE_PREFIX) {
                if !role.is_empty() {
                    roles.insert(role.to_string());
                }
            } else if k == NODE_ROLE_LABEL
                && let Some(v) = v.as_str().filter(|v| !v.is_empty())
            {
                roles.insert(v.to_string());
            }
        }
    }
    if roles.is_empty() {
        "<none>".to_string()
    } else {
        roles.into_iter().collect::<Vec<_>>().join(",")
    }
}

fn node_address(node: &Value, type_: &str) -> String {
    list_at(node, &["status", "addresses"])
        .iter()
        .find(|a| str_at(a, &["type"]) == type_)
        .map_or_else(
            || "<none>".to_string(),
            |a| str_at(a, &["address"]).to_string(),
        )
}

fn node_info(node: &Value, field: &str) -> String {
    match str_at(node, &["status", "nodeInfo", field]) {
        "" => "<unknown>".to_string(),
        v => v.to_string(),
    }
}

pub(crate) fn node_cells(node: &Value, now: Timestamp) -> Vec<Value> {
    vec![
        name(node),
        json!(node_status(node)),
        json!(node_roles(node)),
        created(node, now),
        json!(str_at(node, &["status", "nodeInfo", "kubeletVersion"])),
        json!(node_address(node, "InternalIP")),
        json!(node_address(node, "ExternalIP")),
        json!(node_info(node, "osImage")),
        json!(node_info(node, "kernelVersion")),
        json!(node_info(node, "containerRuntimeVersion")),
    ]
}

pub(crate) fn namespace_columns() -> Vec<ColumnDefinition> {
    vec![
        name_col(),
        col("Status", "string", "The status of the namespace"),
        age_col(),
    ]
}

pub(crate) fn namespace_cells(ns: &Value, now: Timestamp) -> Vec<Value> {
    vec![
        name(ns),
        json!(str_at(ns, &["status", "phase"])),
        created(ns, now),
    ]
}

pub(crate) fn lease_columns() -> Vec<ColumnDefinition> {
    vec![
        name_col(),
        col(
            "Holder",
            "string",
            "Identity of the current holder of the lease.",
        ),
        age_col(),
    ]
}

pub(crate) fn lease_cells(lease: &Value, now: Timestamp) -> Vec<Value> {
    vec![
        name(lease),
        json!(str_at(lease, &["spec", "holderIdentity"])),
        created(lease, now),
    ]
}

pub(crate) fn runtime_class_columns() -> Vec<ColumnDefinition> {
    vec![
        name_col(),
        col(
            "Handler",
            "string",
            "The name of the underlying runtime and configuration that the CRI implementation will use to handle pods of this class.",
        ),
        age_col(),
    ]
}

/// Upstream `printRuntimeClass`.
pub(crate) fn runtime_class_cells(rc: &Value, now: Timestamp) -> Vec<Value> {
    vec![name(rc), json!(str_at(rc, &["handler"])), created(rc, now)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::fixture::now;

    fn node(labels: Value, conditions: Value, unschedulable: Option<bool>) -> Value {
        let mut n = json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "node-1", "labels": labels,
                         "creationTimestamp": "2024-04-28T12:00:00Z"},
            "spec": {},
            "status": {"conditions": conditions,
                "addresses": [{"type": "Hostname", "address": "node-1"},
                              {"type": "InternalIP", "address": "192.168.1.10"}],
                "nodeInfo": {"kubeletVersion": "v1.31.4+berth.0.1.0", "osImage": "Debian GNU/Linux 12 (bookworm)",
                             "kernelVersion": "6.1.0-18-amd64", "containerRuntimeVersion": "containerd://1.7.24"}},
        });
        if let Some(u) = unschedulable {
            n["spec"]["unschedulable"] = json!(u);
        }
        n
    }

    #[test]
    fn node_status_comes_from_the_ready_condition_and_cordoning() {
        let ready = json!([{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}]);
        let not_ready = json!([{"type": "Ready", "status": "Unknown"}]);
        let cases = [
            (ready.clone(), None, "Ready"),
            (ready, Some(true), "Ready,SchedulingDisabled"),
            (not_ready, Some(false), "NotReady"),
            (json!([]), None, "Unknown"),
            (json!([]), Some(true), "Unknown,SchedulingDisabled"),
        ];
        for (conditions, unschedulable, want) in cases {
            let n = node(json!({}), conditions, unschedulable);
            assert_eq!(node_cells(&n, now())[1], json!(want));
        }
    }

    #[test]
    fn node_roles_come_from_role_labels_sorted() {
        let cases = [
            (json!({"kubernetes.io/hostname": "node-1"}), "<none>"),
            (
                json!({"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/control-plane": ""}),
                "control-plane,worker",
            ),
            (
                json!({"kubernetes.io/role": "master", "node-role.kubernetes.io/master": ""}),
                "master",
            ),
            (
                json!({"node-role.kubernetes.io/": "", "kubernetes.io/role": ""}),
                "<none>",
            ),
        ];
        for (labels, want) in cases {
            assert_eq!(
                node_cells(&node(labels, json!([]), None), now())[2],
                json!(want)
            );
        }
    }

    #[test]
    fn node_row_has_version_and_wide_details() {
        let n = node(
            json!({}),
            json!([{"type": "Ready", "status": "True"}]),
            None,
        );
        assert_eq!(
            node_cells(&n, now()),
            vec![
                json!("node-1"),
                json!("Ready"),
                json!("<none>"),
                json!("3d"),
                json!("v1.31.4+berth.0.1.0"),
                json!("192.168.1.10"),
                json!("<none>"),
                json!("Debian GNU/Linux 12 (bookworm)"),
                json!("6.1.0-18-amd64"),
                json!("containerd://1.7.24"),
            ]
        );
        let bare = json!({"metadata": {"name": "n"}});
        assert_eq!(node_cells(&bare, now())[7], json!("<unknown>"));
    }

    #[test]
    fn namespaces_and_leases_show_phase_and_holder() {
        let ns = json!({"metadata": {"name": "dev", "creationTimestamp": "2024-05-01T11:00:00Z"},
                        "status": {"phase": "Active"}});
        assert_eq!(
            namespace_cells(&ns, now()),
            vec![json!("dev"), json!("Active"), json!("60m")]
        );
        let lease = json!({"metadata": {"name": "node-1", "creationTimestamp": "2024-05-01T11:59:30Z"},
                           "spec": {"holderIdentity": "node-1", "leaseDurationSeconds": 40}});
        assert_eq!(
            lease_cells(&lease, now()),
            vec![json!("node-1"), json!("node-1"), json!("30s")]
        );
        assert_eq!(lease_columns().len(), 3);
    }

    #[test]
    fn a_runtime_class_prints_its_handler() {
        let rc = json!({"metadata": {"name": "gvisor", "creationTimestamp": "2024-05-01T11:59:00Z"},
                        "handler": "runsc"});
        assert_eq!(
            runtime_class_cells(&rc, now()),
            [json!("gvisor"), json!("runsc"), json!("60s")]
        );
        assert_eq!(runtime_class_columns().len(), 3);
    }
}
