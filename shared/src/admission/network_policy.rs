//! NetworkPolicy admission (networking.k8s.io/v1): upstream's `SetDefaults_NetworkPolicy`
//! (`policyTypes` Ingress, plus Egress when egress rules exist; an empty pod selector) and
//! `SetDefaults_NetworkPolicyPort` (protocol TCP), and `ValidateNetworkPolicy(Update)`:
//! selectors, ports (`port`/`endPort`), peers (one of the selectors, or an `ipBlock` alone) and
//! CIDRs with `except` strictly inside `cidr`. An update may keep a CIDR the stored policy
//! already had, as upstream's legacy-field rule allows.
//!
//! Planner: pure, no I/O.

use k8s_openapi::api::networking::v1::{
    IPBlock, NetworkPolicy, NetworkPolicyPeer, NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::field::{FieldError, Path};
use super::names::{each_invalid, port_name, port_num};
use super::selector::validate_label_selector;
use crate::cidr::Cidr;

const PROTOCOLS: &[&str] = &["TCP", "UDP", "SCTP"];
const POLICY_TYPES: &[&str] = &["Ingress", "Egress"];
const INVALID_CIDR: &str = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)";

/// Upstream's NetworkPolicy defaults.
pub(crate) fn default_network_policy(np: &mut NetworkPolicy) {
    let spec = np.spec.get_or_insert_with(NetworkPolicySpec::default);
    spec.pod_selector.get_or_insert_with(LabelSelector::default);
    if spec.policy_types.as_ref().is_none_or(Vec::is_empty) {
        let mut types = vec!["Ingress".to_string()];
        if spec.egress.as_ref().is_some_and(|e| !e.is_empty()) {
            types.push("Egress".into());
        }
        spec.policy_types = Some(types);
    }
    let ingress_ports = spec
        .ingress
        .iter_mut()
        .flatten()
        .flat_map(|r| r.ports.iter_mut().flatten());
    let egress_ports = spec
        .egress
        .iter_mut()
        .flatten()
        .flat_map(|r| r.ports.iter_mut().flatten());
    for port in ingress_ports.chain(egress_ports) {
        port.protocol.get_or_insert_with(|| "TCP".into());
    }
}

/// Upstream `ValidateNetworkPolicy` / `ValidateNetworkPolicyUpdate`.
pub(crate) fn validate_network_policy(
    np: &NetworkPolicy,
    old: Option<&NetworkPolicy>,
) -> Vec<FieldError> {
    let known_cidrs = old.map(stored_cidrs).unwrap_or_default();
    let sp = Path::new("spec");
    let spec = np.spec.clone().unwrap_or_default();
    let mut errs = validate_label_selector(
        &spec.pod_selector.clone().unwrap_or_default(),
        &sp.child("podSelector"),
    );
    for (i, rule) in spec.ingress.iter().flatten().enumerate() {
        let rp = sp.child("ingress").index(i);
        for (j, port) in rule.ports.iter().flatten().enumerate() {
            errs.extend(validate_port(port, &rp.child("ports").index(j)));
        }
        for (j, peer) in rule.from.iter().flatten().enumerate() {
            errs.extend(validate_peer(
                peer,
                &rp.child("from").index(j),
                &known_cidrs,
            ));
        }
    }
    for (i, rule) in spec.egress.iter().flatten().enumerate() {
        let rp = sp.child("egress").index(i);
        for (j, port) in rule.ports.iter().flatten().enumerate() {
            errs.extend(validate_port(port, &rp.child("ports").index(j)));
        }
        for (j, peer) in rule.to.iter().flatten().enumerate() {
            errs.extend(validate_peer(peer, &rp.child("to").index(j), &known_cidrs));
        }
    }
    let types = spec.policy_types.unwrap_or_default();
    let tp = sp.child("policyTypes");
    if types.len() > POLICY_TYPES.len() {
        errs.push(FieldError::invalid(
            &tp,
            types,
            "may not specify more than two policyTypes",
        ));
        return errs;
    }
    for (i, t) in types.iter().enumerate() {
        if !POLICY_TYPES.contains(&t.as_str()) {
            errs.push(FieldError::not_supported(
                &tp.index(i),
                t.as_str(),
                POLICY_TYPES,
            ));
        }
    }
    errs
}

/// Every CIDR and exception the stored policy names: an update may keep them unchecked.
fn stored_cidrs(np: &NetworkPolicy) -> Vec<String> {
    let spec = np.spec.clone().unwrap_or_default();
    let from = spec
        .ingress
        .into_iter()
        .flatten()
        .flat_map(|r| r.from.unwrap_or_default());
    let to = spec
        .egress
        .into_iter()
        .flatten()
        .flat_map(|r| r.to.unwrap_or_default());
    from.chain(to)
        .filter_map(|p| p.ip_block)
        .flat_map(|b| std::iter::once(b.cidr).chain(b.except.unwrap_or_default()))
        .collect()
}

/// Upstream `ValidateNetworkPolicyPort`.
fn validate_port(port: &NetworkPolicyPort, pp: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(p) = port.protocol.as_deref()
        && !PROTOCOLS.contains(&p)
    {
        errs.push(FieldError::not_supported(
            &pp.child("protocol"),
            p,
            PROTOCOLS,
        ));
    }
    let end = pp.child("endPort");
    match (&port.port, port.end_port) {
        (Some(IntOrString::Int(n)), end_port) => {
            let n = *n;
            errs.extend(
                port_num(i64::from(n))
                    .into_iter()
                    .map(|m| FieldError::invalid(&pp.child("port"), n, m)),
            );
            if let Some(e) = end_port {
                if e < n {
                    errs.push(FieldError::invalid(
                        &end,
                        e,
                        "must be greater than or equal to `port`",
                    ));
                }
                errs.extend(
                    port_num(i64::from(e))
                        .into_iter()
                        .map(|m| FieldError::invalid(&end, e, m)),
                );
            }
        }
        (Some(IntOrString::String(name)), end_port) => {
            if let Some(e) = end_port {
                errs.push(FieldError::invalid(
                    &end,
                    e,
                    "may not be specified when `port` is non-numeric",
                ));
            }
            errs.extend(each_invalid(&pp.child("port"), name, port_name(name)));
        }
        (None, Some(e)) => errs.push(FieldError::invalid(
            &end,
            e,
            "may not be specified when `port` is not specified",
        )),
        (None, None) => {}
    }
    errs
}

/// Upstream `ValidateNetworkPolicyPeer`.
fn validate_peer(peer: &NetworkPolicyPeer, pp: &Path, known: &[String]) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(s) = &peer.pod_selector {
        errs.extend(validate_label_selector(s, &pp.child("podSelector")));
    }
    if let Some(s) = &peer.namespace_selector {
        errs.extend(validate_label_selector(s, &pp.child("namespaceSelector")));
    }
    if let Some(b) = &peer.ip_block {
        errs.extend(validate_ip_block(b, &pp.child("ipBlock"), known));
    }
    let peers = [
        peer.pod_selector.is_some(),
        peer.namespace_selector.is_some(),
        peer.ip_block.is_some(),
    ];
    match peers.iter().filter(|p| **p).count() {
        0 => errs.push(FieldError::required(pp, "must specify a peer")),
        1 => {}
        _ if peer.ip_block.is_some() => errs.push(FieldError::forbidden(
            pp,
            "may not specify both ipBlock and another peer",
        )),
        _ => {}
    }
    errs
}

/// Upstream `ValidateIPBlock`: a CIDR, and exceptions that are CIDRs strictly inside it.
fn validate_ip_block(b: &IPBlock, bp: &Path, known: &[String]) -> Vec<FieldError> {
    let cp = bp.child("cidr");
    if b.cidr.is_empty() {
        return vec![FieldError::required(&cp, "")];
    }
    let mut errs = Vec::new();
    let Some(cidr) = Cidr::parse(&b.cidr) else {
        if !known.contains(&b.cidr) {
            errs.push(FieldError::invalid(&cp, b.cidr.as_str(), INVALID_CIDR));
        }
        return errs;
    };
    for (i, except) in b.except.iter().flatten().enumerate() {
        let ep = bp.child("except").index(i);
        let Some(inner) = Cidr::parse(except) else {
            if !known.contains(except) {
                errs.push(FieldError::invalid(&ep, except.as_str(), INVALID_CIDR));
            }
            continue;
        };
        if !cidr.contains(inner.addr) || cidr.len >= inner.len {
            errs.push(FieldError::invalid(
                &ep,
                except.as_str(),
                "must be a strict subset of `cidr`",
            ));
        }
    }
    errs
}

#[cfg(test)]
#[path = "network_policy_tests.rs"]
mod tests;
