//! Who a NetworkPolicy is about: the pods it selects, the peers its rules name (pods by
//! `podSelector` in the policy's namespace, by `namespaceSelector`, by both together, or
//! address blocks) and its ports (numbers, ranges with `endPort`, names resolved in a pod's
//! container ports), read from the cluster's Pods and Namespaces as upstream defines them.
//!
//! Planner: pure, no I/O.

use core::net::Ipv4Addr;
use std::collections::BTreeMap;

use berth_api::selector::LabelSelector;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicyPeer, NetworkPolicyPort};
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::blocks;
use crate::network::Ipv4Cidr;

/// The label every namespace carries with its own name (upstream sets it on every write; a
/// namespace not seen yet is known by it alone).
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// A pod that policy can be about: it has an IPv4 pod address of its own (not the host
/// network's) and is not finished (a finished pod's address may be someone else's soon).
#[derive(Debug)]
pub struct PodView<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    /// The uid, or `namespace/name` for a pod without one (names its chains).
    pub key: String,
    pub ip: Ipv4Addr,
    pub node: &'a str,
    pub labels: BTreeMap<String, String>,
    pub pod: &'a Pod,
}

/// The pods that policy can be about, in the order given.
pub fn pod_views<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> Vec<PodView<'a>> {
    pods.into_iter().filter_map(pod_view).collect()
}

fn pod_view(pod: &Pod) -> Option<PodView<'_>> {
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref()?;
    if spec.host_network == Some(true) {
        return None;
    }
    let status = pod.status.as_ref()?;
    if matches!(status.phase.as_deref(), Some("Succeeded" | "Failed")) {
        return None;
    }
    let ip = status
        .pod_ips
        .iter()
        .flatten()
        .map(|p| p.ip.as_str())
        .chain(status.pod_ip.as_deref())
        .find_map(|ip| ip.parse::<Ipv4Addr>().ok())?;
    let namespace = meta.namespace.as_deref()?;
    let name = meta.name.as_deref()?;
    Some(PodView {
        namespace,
        name,
        key: meta
            .uid
            .clone()
            .unwrap_or_else(|| format!("{namespace}/{name}")),
        ip,
        node: spec.node_name.as_deref().unwrap_or(""),
        labels: meta.labels.clone().unwrap_or_default(),
        pod,
    })
}

/// Namespace labels by name, each with its name label.
pub fn namespace_labels<'a>(
    namespaces: impl IntoIterator<Item = &'a Namespace>,
) -> BTreeMap<String, BTreeMap<String, String>> {
    namespaces
        .into_iter()
        .filter_map(|ns| {
            let name = ns.metadata.name.clone()?;
            let mut labels = ns.metadata.labels.clone().unwrap_or_default();
            labels
                .entry(NAMESPACE_NAME_LABEL.to_string())
                .or_insert_with(|| name.clone());
            Some((name, labels))
        })
        .collect()
}

/// A selector as a matcher; one that cannot be read (admission refuses those) matches nothing,
/// which keeps isolation rather than opening it.
pub fn selector(sel: Option<&metav1::LabelSelector>) -> LabelSelector {
    match sel {
        Some(s) => LabelSelector::from_k8s(s).unwrap_or_else(|_| LabelSelector::nothing()),
        None => LabelSelector::everything(),
    }
}

/// The directions a policy isolates: its `policyTypes`, or upstream's default (Ingress, and
/// Egress when it has egress rules).
pub fn policy_types(np: &NetworkPolicy) -> (bool, bool) {
    let Some(spec) = np.spec.as_ref() else {
        return (false, false);
    };
    match spec.policy_types.as_ref().filter(|t| !t.is_empty()) {
        Some(types) => (
            types.iter().any(|t| t == "Ingress"),
            types.iter().any(|t| t == "Egress"),
        ),
        None => (true, spec.egress.as_ref().is_some_and(|e| !e.is_empty())),
    }
}

/// Whether `np` selects `pod` (same namespace, its pod selector matches).
pub fn selects(np: &NetworkPolicy, pod: &PodView<'_>) -> bool {
    np.metadata.namespace.as_deref() == Some(pod.namespace)
        && np
            .spec
            .as_ref()
            .is_some_and(|s| selector(s.pod_selector.as_ref()).matches(&pod.labels))
}

/// The other end of a connection, as a rule names it.
#[derive(Debug, Clone, Copy)]
pub enum Peer<'v, 'a> {
    /// A rule without peers: every address.
    Any,
    Pod(&'v PodView<'a>),
    Block(Ipv4Cidr),
}

/// The peers of one rule of a policy in namespace `policy_ns`: none listed means every
/// address; a peer with selectors is the pods they select (only `podSelector`: in the
/// policy's namespace; only `namespaceSelector`: every pod of the namespaces; both: the pods
/// of those namespaces that match); an `ipBlock` is its CIDR less its `except` blocks.
pub fn peers<'v, 'a>(
    policy_ns: &str,
    listed: Option<&[NetworkPolicyPeer]>,
    pods: &'v [PodView<'a>],
    namespaces: &BTreeMap<String, BTreeMap<String, String>>,
) -> Vec<Peer<'v, 'a>> {
    let listed = match listed {
        None | Some([]) => return vec![Peer::Any],
        Some(l) => l,
    };
    let mut out = Vec::new();
    for peer in listed {
        if let Some(block) = &peer.ip_block {
            let Some(cidr) = blocks::parse(&block.cidr) else {
                continue;
            };
            let except: Vec<Ipv4Cidr> = block
                .except
                .iter()
                .flatten()
                .filter_map(|e| blocks::parse(e))
                .collect();
            out.extend(blocks::subtract(cidr, &except).into_iter().map(Peer::Block));
            continue;
        }
        if peer.pod_selector.is_none() && peer.namespace_selector.is_none() {
            continue;
        }
        let pod_sel = selector(peer.pod_selector.as_ref());
        let ns_sel = peer.namespace_selector.as_ref().map(|s| selector(Some(s)));
        for p in pods {
            let ns_ok = match &ns_sel {
                None => p.namespace == policy_ns,
                Some(sel) => match namespaces.get(p.namespace) {
                    Some(labels) => sel.matches(labels),
                    None => sel.matches(&BTreeMap::from([(
                        NAMESPACE_NAME_LABEL.to_string(),
                        p.namespace.to_string(),
                    )])),
                },
            };
            if ns_ok && pod_sel.matches(&p.labels) {
                out.push(Peer::Pod(p));
            }
        }
    }
    out
}

/// One entry of a rule's `ports`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortMatch {
    /// A rule without ports: every port and protocol.
    Any,
    /// A protocol, every port.
    Protocol(String),
    /// A port or range (`endPort`) of a protocol.
    Range(String, u16, u16),
    /// A named container port of a protocol, resolved in the destination pod.
    Named(String, String),
}

/// A rule's ports (protocols lowercased as iptables spells them); none listed means any.
pub fn ports(listed: Option<&[NetworkPolicyPort]>) -> Vec<PortMatch> {
    let listed = match listed {
        None | Some([]) => return vec![PortMatch::Any],
        Some(l) => l,
    };
    listed
        .iter()
        .filter_map(|p| {
            let proto = p.protocol.as_deref().unwrap_or("TCP").to_ascii_lowercase();
            if !matches!(proto.as_str(), "tcp" | "udp" | "sctp") {
                return None;
            }
            Some(match &p.port {
                None => PortMatch::Protocol(proto),
                Some(IntOrString::Int(n)) => {
                    let from = u16::try_from(*n).ok().filter(|n| *n > 0)?;
                    let to = match p.end_port {
                        Some(e) => u16::try_from(e).ok().filter(|e| *e >= from)?,
                        None => from,
                    };
                    PortMatch::Range(proto, from, to)
                }
                Some(IntOrString::String(name)) => match name.parse::<u16>() {
                    // A number in a string is a number (upstream's intstr reads it so).
                    Ok(n) if n > 0 => PortMatch::Range(proto, n, n),
                    _ => PortMatch::Named(proto, name.clone()),
                },
            })
        })
        .collect()
}

/// The number of `pod`'s container port named `name` of `protocol` (lowercase), if any.
pub fn named_port(pod: &Pod, protocol: &str, name: &str) -> Option<u16> {
    pod.spec
        .as_ref()?
        .containers
        .iter()
        .flat_map(|c| c.ports.iter().flatten())
        .find(|p| {
            p.name.as_deref() == Some(name)
                && p.protocol
                    .as_deref()
                    .unwrap_or("TCP")
                    .eq_ignore_ascii_case(protocol)
        })
        .and_then(|p| u16::try_from(p.container_port).ok())
}
