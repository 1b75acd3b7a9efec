//! Which node announces each load-balancer address on the segment (L2 mode, as MetalLB's):
//! every agent computes the same answer from the same Nodes and Services, without talking to
//! the others. For each address the candidates are the Ready nodes (less those labelled
//! [`EXCLUDE_LABEL`]; with `externalTrafficPolicy: Local`, only those with a ready endpoint
//! of the Service, so the client's address can be kept); the elected one is the candidate
//! whose `sha256(node "#" address)` is smallest. Hashing per address spreads addresses over
//! the nodes, and a node going away moves only the addresses it held.
//!
//! Announced are the `status.loadBalancer.ingress` addresses (`ipMode: VIP` or unset) of
//! LoadBalancers of Berth's class (or none), except any node's own address (without pools
//! the ingress is the nodes' addresses, which need no announcing).
//!
//! Planner: pure, no I/O.

use core::net::Ipv4Addr;
use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use sha2::Digest as _;

/// Berth's `loadBalancerClass` (the controller's `loadbalancer::plan::CLASS`).
pub const CLASS: &str = "berth.dev/load-balancer";
/// Nodes with this label never announce (upstream's label for external load balancers).
pub const EXCLUDE_LABEL: &str = "node.kubernetes.io/exclude-from-external-load-balancers";

/// What the election reads of a Node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeView {
    pub name: String,
    /// Ready, and not excluded.
    pub candidate: bool,
    pub addresses: Vec<Ipv4Addr>,
}

/// The view of `node`.
pub fn node_view(node: &Node) -> NodeView {
    let status = node.status.as_ref();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    let excluded = node
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(EXCLUDE_LABEL));
    let addresses = status
        .and_then(|s| s.addresses.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|a| a.address.parse().ok())
        .collect();
    NodeView {
        name: node.metadata.name.clone().unwrap_or_default(),
        candidate: ready && !excluded,
        addresses,
    }
}

fn rank(node: &str, address: Ipv4Addr) -> [u8; 32] {
    let mut h = sha2::Sha256::new();
    h.update(node.as_bytes());
    h.update(b"#");
    h.update(address.to_string().as_bytes());
    h.finalize().into()
}

/// The elected node for `address` among `candidates`.
pub fn elect<'a>(address: Ipv4Addr, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .min_by_key(|n| (rank(n, address), **n))
        .copied()
}

fn is_ours(svc: &Service) -> bool {
    svc.spec.as_ref().is_some_and(|s| {
        s.type_.as_deref() == Some("LoadBalancer")
            && s.load_balancer_class.as_deref().is_none_or(|c| c == CLASS)
    })
}

/// The nodes with a ready endpoint of `svc`.
fn nodes_with_endpoints<'a>(svc: &Service, slices: &'a [EndpointSlice]) -> BTreeSet<&'a str> {
    let ns = svc.metadata.namespace.as_deref();
    let name = svc.metadata.name.as_deref();
    slices
        .iter()
        .filter(|s| s.metadata.namespace.as_deref() == ns)
        .filter(|s| {
            s.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("kubernetes.io/service-name"))
                .map(String::as_str)
                == name
        })
        .flat_map(|s| &s.endpoints)
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true))
        .filter_map(|e| e.node_name.as_deref())
        .collect()
}

/// Every address to announce, and the node elected for it.
pub fn announcements(
    nodes: &[NodeView],
    services: &[Service],
    slices: &[EndpointSlice],
) -> BTreeMap<Ipv4Addr, String> {
    let node_addresses: BTreeSet<Ipv4Addr> =
        nodes.iter().flat_map(|n| n.addresses.clone()).collect();
    let ready: Vec<&str> = nodes
        .iter()
        .filter(|n| n.candidate)
        .map(|n| n.name.as_str())
        .collect();
    let mut out = BTreeMap::new();
    for svc in services.iter().filter(|s| is_ours(s)) {
        let local_only = svc
            .spec
            .as_ref()
            .and_then(|s| s.external_traffic_policy.as_deref())
            == Some("Local");
        let with_endpoints = nodes_with_endpoints(svc, slices);
        let candidates: Vec<&str> = ready
            .iter()
            .copied()
            .filter(|n| !local_only || with_endpoints.contains(n))
            .collect();
        let ips = svc
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|lb| lb.ingress.as_ref())
            .into_iter()
            .flatten()
            .filter(|i| i.ip_mode.as_deref().is_none_or(|m| m == "VIP"))
            .filter_map(|i| i.ip.as_deref()?.parse::<Ipv4Addr>().ok())
            .filter(|ip| !node_addresses.contains(ip));
        for ip in ips {
            if let Some(node) = elect(ip, &candidates) {
                out.entry(ip).or_insert_with(|| node.to_string());
            }
        }
    }
    out
}

/// An address of ours on this host, as observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Held {
    pub ip: Ipv4Addr,
    /// Whether it is on the interface facing the segment (the node address's).
    pub on_node_link: bool,
}

/// What to change on this host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Addresses to add to the node's interface (and announce with gratuitous ARP).
    pub add: Vec<Ipv4Addr>,
    /// Addresses of ours to remove.
    pub remove: Vec<Held>,
}

/// The changes that make this node (`me`) hold exactly the addresses it is elected for.
pub fn plan(me: &str, elected: &BTreeMap<Ipv4Addr, String>, held: &[Held]) -> Plan {
    let wanted: BTreeSet<Ipv4Addr> = elected
        .iter()
        .filter(|(_, n)| n.as_str() == me)
        .map(|(ip, _)| *ip)
        .collect();
    let mut plan = Plan::default();
    for h in held {
        if !h.on_node_link || !wanted.contains(&h.ip) {
            plan.remove.push(*h);
        }
    }
    for ip in &wanted {
        if !held.iter().any(|h| h.on_node_link && h.ip == *ip) {
            plan.add.push(*ip);
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn node(name: &str, ready: bool, ip: &str) -> NodeView {
        node_view(
            &serde_json::from_value(json!({
                "metadata": {"name": name},
                "status": {"conditions": [{"type": "Ready", "status": if ready {"True"} else {"Unknown"}}],
                           "addresses": [{"type": "InternalIP", "address": ip}]}
            }))
            .unwrap(),
        )
    }

    fn lb(name: &str, spec: Value, ips: &[&str]) -> Service {
        let ingress: Vec<Value> = ips
            .iter()
            .map(|ip| json!({"ip": ip, "ipMode": "VIP"}))
            .collect();
        let mut full = json!({"type": "LoadBalancer", "ports": [{"port": 80}]});
        for (k, v) in spec.as_object().unwrap() {
            full[k] = v.clone();
        }
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "shop"},
            "spec": full,
            "status": {"loadBalancer": {"ingress": ingress}}
        }))
        .unwrap()
    }

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    fn nodes() -> Vec<NodeView> {
        vec![
            node("a", true, "10.0.0.1"),
            node("b", true, "10.0.0.2"),
            node("c", true, "10.0.0.3"),
        ]
    }

    #[test]
    fn the_election_is_the_same_whatever_order_the_nodes_come_in() {
        let addr = ip("192.0.2.10");
        let one = elect(addr, &["a", "b", "c"]);
        assert_eq!(one, elect(addr, &["c", "a", "b"]));
        assert!(one.is_some());
        assert_eq!(elect(addr, &[]), None);
    }

    #[test]
    fn addresses_spread_over_the_nodes() {
        let held: BTreeSet<&str> = (1..=40)
            .filter_map(|i| elect(Ipv4Addr::new(192, 0, 2, i), &["a", "b", "c"]))
            .collect();
        assert_eq!(held.len(), 3, "{held:?}");
    }

    #[test]
    fn a_node_going_not_ready_hands_its_addresses_to_another_and_only_those() {
        let services: Vec<Service> = (1..=20)
            .map(|i| lb(&format!("s{i}"), json!({}), &[&format!("192.0.2.{i}")]))
            .collect();
        let before = announcements(&nodes(), &services, &[]);
        assert_eq!(before.len(), 20);
        let mut down = nodes();
        down[0] = node("a", false, "10.0.0.1");
        let after = announcements(&down, &services, &[]);
        for (addr, was) in &before {
            if was == "a" {
                assert_ne!(after[addr], "a");
            } else {
                assert_eq!(&after[addr], was, "{addr} moved needlessly");
            }
        }
    }

    #[test]
    fn node_addresses_other_classes_and_proxy_mode_are_not_announced() {
        let mut proxy = lb("p", json!({}), &[]);
        proxy.status = serde_json::from_value(
            json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.3", "ipMode": "Proxy"}]}}),
        )
        .unwrap();
        let services = [
            lb("nodes", json!({}), &["10.0.0.1", "10.0.0.2"]),
            lb(
                "other",
                json!({"loadBalancerClass": "example.com/x"}),
                &["192.0.2.1"],
            ),
            lb("ours", json!({"loadBalancerClass": CLASS}), &["192.0.2.2"]),
            proxy,
        ];
        let a = announcements(&nodes(), &services, &[]);
        assert_eq!(a.keys().copied().collect::<Vec<_>>(), [ip("192.0.2.2")]);
    }

    #[test]
    fn local_traffic_policy_elects_among_nodes_with_endpoints_only() {
        let slice: EndpointSlice = serde_json::from_value(json!({
            "metadata": {"name": "w", "namespace": "shop",
                         "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.42.2.5"], "nodeName": "b", "conditions": {"ready": true}}]
        }))
        .unwrap();
        let services: Vec<Service> = (1..=10)
            .map(|i| {
                let mut s = lb(
                    "web",
                    json!({"externalTrafficPolicy": "Local"}),
                    &[&format!("192.0.2.{i}")],
                );
                s.metadata.name = Some("web".into());
                s
            })
            .collect();
        let a = announcements(&nodes(), &services, std::slice::from_ref(&slice));
        assert!(a.values().all(|n| n == "b"), "{a:?}");
        assert!(announcements(&nodes(), &services, &[]).is_empty());
    }

    #[test]
    fn an_excluded_node_is_never_elected() {
        let mut ns = nodes();
        for n in &mut ns[1..] {
            n.candidate = false;
        }
        let services = [lb("s", json!({}), &["192.0.2.1", "192.0.2.2"])];
        let a = announcements(&ns, &services, &[]);
        assert!(a.values().all(|n| n == "a"));
        let labelled = node_view(
            &serde_json::from_value(json!({
                "metadata": {"name": "x", "labels": {EXCLUDE_LABEL: ""}},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}
            }))
            .unwrap(),
        );
        assert!(!labelled.candidate);
    }

    #[test]
    fn the_plan_adds_what_this_node_is_elected_for_and_removes_the_rest() {
        let elected: BTreeMap<Ipv4Addr, String> = [
            (ip("192.0.2.1"), "me".to_string()),
            (ip("192.0.2.2"), "me".to_string()),
            (ip("192.0.2.3"), "other".to_string()),
        ]
        .into_iter()
        .collect();
        let held = [
            Held {
                ip: ip("192.0.2.1"),
                on_node_link: true,
            },
            Held {
                ip: ip("192.0.2.2"),
                on_node_link: false,
            },
            Held {
                ip: ip("192.0.2.3"),
                on_node_link: true,
            },
            Held {
                ip: ip("192.0.2.9"),
                on_node_link: true,
            },
        ];
        let p = plan("me", &elected, &held);
        assert_eq!(p.add, [ip("192.0.2.2")]);
        assert_eq!(p.remove, [held[1], held[2], held[3]]);
        assert_eq!(
            plan(
                "me",
                &elected,
                &[
                    held[0],
                    Held {
                        ip: ip("192.0.2.2"),
                        on_node_link: true
                    }
                ]
            ),
            Plan::default()
        );
    }
}
