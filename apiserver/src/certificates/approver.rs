//! Planner: pure, no I/O.
//!
//! Auto-approval of nodes' own requests (upstream's csrapproving `sarApprover`, plus Berth's
//! rule for serving certificates):
//! - a `kube-apiserver-client-kubelet` request that meets the kubelet client rules, asked by
//!   the identity it names (`spec.username` = the subject CN), is approved when that user may
//!   `create certificatesigningrequests/selfnodeclient` (a SubjectAccessReview; the default
//!   policy grants it to `system:nodes`), with upstream's reason and message; one for another
//!   identity needs `…/nodeclient` instead;
//! - a `kubelet-serving` request that meets the serving rules, asked by node N for
//!   `system:node:N`, is approved when its DNS names are only N (or the Node's hostname and DNS
//!   addresses) and its IP addresses are all among the Node's `status.addresses` (Berth's
//!   choice, as k3s approves them; upstream leaves them to an external approver);
//! - everything else is left pending, for an administrator (`kubectl certificate approve`).

use super::request::Request;
use super::signer::{self, Verdict};
use super::{KUBELET_CLIENT, KUBELET_SERVING, NODE_USER_PREFIX, NODES_GROUP};
use core::net::IpAddr;
use serde_json::Value;

pub const SELF_CLIENT_MESSAGE: &str =
    "Auto approving self kubelet client certificate after SubjectAccessReview.";
pub const CLIENT_MESSAGE: &str =
    "Auto approving kubelet client certificate after SubjectAccessReview.";
pub const SELF_SERVING_MESSAGE: &str =
    "Auto approving self kubelet serving certificate: its names and addresses are the node's own.";
pub const REASON: &str = "AutoApproved";

/// What the approver does with a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    /// Append `Approved` (reason `AutoApproved`) with this message.
    Approve(&'static str),
    /// Not for the approver (or already decided): nothing.
    Leave,
    /// A serving request of node N while N's Node object is not there (yet): look again later.
    WaitForNode(String),
}

/// The names and addresses a Node has (`status.addresses`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeNames {
    pub names: Vec<String>,
    pub addresses: Vec<IpAddr>,
}

impl NodeNames {
    /// From a Node object: its name, its Hostname/InternalDNS/ExternalDNS and IP addresses.
    pub fn of(node: &Value) -> NodeNames {
        let mut out = NodeNames::default();
        if let Some(n) = node.pointer("/metadata/name").and_then(Value::as_str) {
            out.names.push(n.to_string());
        }
        let addresses = node
            .pointer("/status/addresses")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for a in addresses {
            let Some(address) = a.get("address").and_then(Value::as_str) else {
                continue;
            };
            match a.get("type").and_then(Value::as_str) {
                Some("InternalIP" | "ExternalIP") => {
                    if let Ok(ip) = address.parse() {
                        out.addresses.push(ip);
                    }
                }
                Some("Hostname" | "InternalDNS" | "ExternalDNS") => {
                    out.names.push(address.to_string())
                }
                _ => {}
            }
        }
        out
    }
}

fn has_condition(csr: &Value, types: &[&str]) -> bool {
    csr.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type")
                    .and_then(Value::as_str)
                    .is_some_and(|t| types.contains(&t))
            })
        })
}

/// The string at `pointer` in `csr`; empty when absent or not a string.
pub(super) fn string_at<'a>(csr: &'a Value, pointer: &str) -> &'a str {
    csr.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The strings of the array at `pointer` in `csr` (none when absent).
pub(super) fn strings(csr: &Value, pointer: &str) -> Vec<String> {
    csr.pointer(pointer)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// Decides on `csr` (its parsed request `r`). `may(subresource)` answers the
/// SubjectAccessReview for the requestor on `certificatesigningrequests/<subresource>`;
/// `node(name)` looks a Node's names up.
pub fn decide(
    csr: &Value,
    r: &Request,
    may: impl Fn(&str) -> bool,
    node: impl Fn(&str) -> Option<NodeNames>,
) -> Approval {
    let certificate = csr
        .pointer("/status/certificate")
        .and_then(Value::as_str)
        .is_some_and(|c| !c.is_empty());
    if certificate || has_condition(csr, &["Approved", "Denied"]) {
        return Approval::Leave;
    }
    let signer_name = string_at(csr, "/spec/signerName");
    let username = string_at(csr, "/spec/username");
    let usages = strings(csr, "/spec/usages");
    if signer::check(signer_name, r, &usages) != Verdict::Sign {
        return Approval::Leave;
    }
    match signer_name {
        KUBELET_CLIENT if username == r.common_name => {
            if may("selfnodeclient") {
                Approval::Approve(SELF_CLIENT_MESSAGE)
            } else {
                Approval::Leave
            }
        }
        KUBELET_CLIENT if may("nodeclient") => Approval::Approve(CLIENT_MESSAGE),
        KUBELET_SERVING => {
            let groups = strings(csr, "/spec/groups");
            let Some(name) = username.strip_prefix(NODE_USER_PREFIX) else {
                return Approval::Leave;
            };
            if username != r.common_name || !groups.iter().any(|g| g == NODES_GROUP) {
                return Approval::Leave;
            }
            let Some(own) = node(name) else {
                return Approval::WaitForNode(name.to_string());
            };
            let names_own = r.dns_names.iter().all(|d| own.names.contains(d));
            let addresses_own = r.ip_addresses.iter().all(|ip| own.addresses.contains(ip));
            if names_own && addresses_own {
                Approval::Approve(SELF_SERVING_MESSAGE)
            } else {
                Approval::Leave
            }
        }
        _ => Approval::Leave,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certificates::request::{make, parse};
    use serde_json::json;

    fn csr(signer: &str, username: &str, usages: &[&str], status: Value) -> Value {
        json!({"spec": {"signerName": signer, "username": username,
                        "groups": ["system:nodes", "system:authenticated"], "usages": usages},
               "status": status})
    }

    fn request(cn: &str, sans: &[&str]) -> Request {
        parse(make(cn, &["system:nodes"], sans).0.as_bytes()).unwrap()
    }

    fn node_a(name: &str) -> Option<NodeNames> {
        (name == "a").then(|| NodeNames {
            names: vec!["a".into()],
            addresses: vec!["10.0.0.5".parse().unwrap()],
        })
    }

    const CLIENT: &[&str] = &["digital signature", "client auth"];
    const SERVING: &[&str] = &["digital signature", "key encipherment", "server auth"];

    /// The decision on a client certificate request for node a sent by `requestor`, whose
    /// access review grants `granted` only (or nothing).
    fn client_request_by(requestor: &str, granted: Option<&str>) -> Approval {
        let c = csr(KUBELET_CLIENT, "system:node:a", CLIENT, json!({}));
        decide(&c, &request(requestor, &[]), |s| Some(s) == granted, node_a)
    }

    #[test]
    fn a_node_renewing_its_own_client_certificate_is_approved_after_the_access_review() {
        assert_eq!(
            client_request_by("system:node:a", Some("selfnodeclient")),
            Approval::Approve(SELF_CLIENT_MESSAGE)
        );
        assert_eq!(client_request_by("system:node:a", None), Approval::Leave);
    }

    #[test]
    fn another_identity_needs_the_nodeclient_permission_and_decided_requests_are_left() {
        assert_eq!(
            client_request_by("system:node:b", Some("selfnodeclient")),
            Approval::Leave
        );
        assert_eq!(
            client_request_by("system:node:b", Some("nodeclient")),
            Approval::Approve(CLIENT_MESSAGE)
        );
        let denied = csr(
            KUBELET_CLIENT,
            "system:node:a",
            CLIENT,
            json!({"conditions": [{"type": "Denied", "status": "True"}]}),
        );
        assert_eq!(
            decide(&denied, &request("system:node:a", &[]), |_| true, node_a),
            Approval::Leave
        );
        let bad_usage = csr(KUBELET_CLIENT, "system:node:a", &["server auth"], json!({}));
        assert_eq!(
            decide(&bad_usage, &request("system:node:a", &[]), |_| true, node_a),
            Approval::Leave
        );
    }

    #[test]
    fn a_serving_request_is_approved_only_for_the_node_s_own_names_and_addresses() {
        let c = csr(KUBELET_SERVING, "system:node:a", SERVING, json!({}));
        let own = request("system:node:a", &["a", "10.0.0.5"]);
        assert_eq!(
            decide(&c, &own, |_| false, node_a),
            Approval::Approve(SELF_SERVING_MESSAGE)
        );
        let foreign_ip = request("system:node:a", &["a", "10.0.0.6"]);
        assert_eq!(decide(&c, &foreign_ip, |_| false, node_a), Approval::Leave);
        let foreign_name = request("system:node:a", &["example.com"]);
        assert_eq!(
            decide(&c, &foreign_name, |_| false, node_a),
            Approval::Leave
        );
        let other_cn = request("system:node:b", &["b"]);
        assert_eq!(decide(&c, &other_cn, |_| true, node_a), Approval::Leave);
        let c = csr(KUBELET_SERVING, "system:node:z", SERVING, json!({}));
        assert_eq!(
            decide(&c, &request("system:node:z", &["z"]), |_| true, node_a),
            Approval::WaitForNode("z".into())
        );
    }

    #[test]
    fn node_names_come_from_the_node_s_addresses() {
        let node = json!({"metadata": {"name": "a"}, "status": {"addresses": [
            {"type": "InternalIP", "address": "10.0.0.5"}, {"type": "Hostname", "address": "host-a"}]}});
        let n = NodeNames::of(&node);
        assert_eq!(n.names, vec!["a", "host-a"]);
        assert_eq!(n.addresses, vec!["10.0.0.5".parse::<IpAddr>().unwrap()]);
    }
}
