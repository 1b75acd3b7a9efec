//! The service proxy's nat table, computed whole from the Services and EndpointSlices: the
//! chains kube-proxy's iptables mode builds, under names of this agent's own (`BERTH-…-<h>`,
//! `h` from the network name, so two agents in one network namespace never share a chain).
//!
//! * `BERTH-SERVICES-<h>` (from PREROUTING and OUTPUT): one rule per ClusterIP port, jumping
//!   to the port's service chain; a last rule sends traffic to a local address on to
//!   `BERTH-NODEPORTS-<h>` (`127.0.0.0/8` included only with localhost NodePorts, kube-proxy's
//!   `--iptables-localhost-nodeports`; see [`localnet_firewall`] for the filter rule they
//!   need).
//! * `BERTH-SVC-…`: `ClientIP` affinity checks (`-m recent`), then one endpoint chosen at
//!   random (`-m statistic --probability 1/n, 1/(n-1) … 1`); traffic from outside the cluster
//!   CIDR is marked for masquerade. `BERTH-SVL-…` is the same over this node's endpoints only
//!   (`internalTrafficPolicy`/`externalTrafficPolicy: Local`).
//! * `BERTH-EXT-…` (NodePorts): mark for masquerade and go to the service chain, or, with
//!   `externalTrafficPolicy: Local`, to the local-endpoint chain unmasqueraded — except traffic
//!   from this node's pods (to the service chain) and from the node itself (masqueraded, to the
//!   service chain: its source, maybe 127.0.0.1, is no address a pod can answer).
//! * `BERTH-SEP-…`: one endpoint: mark hairpin traffic (a pod reaching itself), DNAT.
//! * `BERTH-SVCPOST-<h>` (from POSTROUTING): masquerade what was marked.
//!
//! Endpoints are the ready ones; terminating-but-serving ones only when no ready one is left
//! (upstream's fallback).
//!
//! Planner: pure, no I/O.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use k8s_openapi::api::core::v1::{Service, ServicePort};
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::network::Ipv4Cidr;
use crate::network::chain_names::hash;
use crate::network::service_state::named_spec;

/// The mark kube-proxy uses for "masquerade this" (`0x4000`).
pub const MASQ_MARK: &str = "0x4000/0x4000";
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// Where the ruleset is for.
#[derive(Debug, Clone)]
pub struct ProxyScope<'a> {
    /// The agent's network name (`berth-<node>`): it names the chains.
    pub network: &'a str,
    pub node: &'a str,
    pub cluster_cidr: Ipv4Cidr,
    /// Whether NodePorts answer on `127.0.0.0/8` (kube-proxy's `--iptables-localhost-nodeports`).
    pub localhost_node_ports: bool,
}

/// The agent's top-level chains, which built-in chains jump to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopChains {
    pub services: String,
    pub nodeports: String,
    pub postrouting: String,
    pub mark_masq: String,
    /// Marks a packet for the filter table's drop rule ([`proxy_firewall`]).
    pub mark_drop: String,
}

impl TopChains {
    pub fn of(network: &str) -> TopChains {
        let h = hash(&[network], 8);
        TopChains {
            services: format!("BERTH-SERVICES-{h}"),
            nodeports: format!("BERTH-NODEPORTS-{h}"),
            postrouting: format!("BERTH-SVCPOST-{h}"),
            mark_masq: format!("BERTH-MARK-MASQ-{h}"),
            mark_drop: format!("BERTH-MARK-DROP-{h}"),
        }
    }
}

/// Whether a chain of the nat table is one of this agent's proxy chains.
pub fn is_proxy_chain(network: &str, chain: &str) -> bool {
    let top = TopChains::of(network);
    let tag = &top.services["BERTH-SERVICES-".len()..];
    [
        &top.services,
        &top.nodeports,
        &top.postrouting,
        &top.mark_masq,
        &top.mark_drop,
    ]
    .contains(&&chain.to_string())
        || ([
            "BERTH-SVC-",
            "BERTH-SVL-",
            "BERTH-EXT-",
            "BERTH-FW-",
            "BERTH-SEP-",
        ]
        .iter()
        .any(|p| chain.starts_with(p))
            && chain.ends_with(tag))
}

/// The filter chain localhost NodePorts need (upstream's `KUBE-FIREWALL` rule, from INPUT and
/// OUTPUT): with `route_localnet` on, the host would otherwise accept packets for 127.0.0.0/8
/// from its neighbours (CVE-2020-8558); only connections DNATed there (a NodePort's replies)
/// or already established may have a loopback destination and another source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalnetFirewall {
    pub chain: String,
    /// The `iptables-restore --noflush` input writing the chain whole.
    pub restore: String,
}

/// The localnet firewall chain of `network`.
pub fn localnet_firewall(network: &str) -> LocalnetFirewall {
    let chain = format!("BERTH-FIREWALL-{}", hash(&[network], 8));
    let restore = format!(
        "*filter\n:{chain} - [0:0]\n-A {chain} {} -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP\nCOMMIT\n",
        tagged_comment(network, "block incoming localnet connections")
    );
    LocalnetFirewall { chain, restore }
}

/// The mark kube-proxy uses for "drop this" (`0x8000`): the nat table cannot drop, so its
/// firewall chains mark and the filter table drops ([`proxy_firewall`]).
pub const DROP_MARK: &str = "0x8000/0x8000";

/// The proxy's filter chain (kube-proxy's `KUBE-FIREWALL` drop of marked packets), jumped to
/// from INPUT and FORWARD: what a load balancer's source ranges refuse is dropped here.
pub fn proxy_firewall(network: &str) -> LocalnetFirewall {
    let chain = format!("BERTH-PROXY-FW-{}", hash(&[network], 8));
    let restore = format!(
        "*filter\n:{chain} - [0:0]\n-A {chain} {} -m mark --mark {DROP_MARK} -j DROP\nCOMMIT\n",
        tagged_comment(network, "drop packets marked by the service proxy")
    );
    LocalnetFirewall { chain, restore }
}

/// The addresses outside the cluster a Service port answers on besides NodePorts: its
/// load-balancer ingress (`ipMode: VIP` or unset, as kube-proxy: `Proxy` means the balancer
/// delivers to the node's address itself) and `spec.externalIPs`, and who may use the former.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExternalAddresses {
    pub lb_ips: Vec<String>,
    pub ips: Vec<String>,
    pub source_ranges: Vec<String>,
    /// `loadBalancerSourceRanges` is set (even if no range in it is IPv4: then none may in).
    pub firewalled: bool,
}

impl ExternalAddresses {
    pub fn of(svc: &Service, spec: &k8s_openapi::api::core::v1::ServiceSpec) -> Self {
        let ipv4 = |s: &&String| s.parse::<core::net::Ipv4Addr>().is_ok();
        let is_lb = spec.type_.as_deref() == Some("LoadBalancer");
        let lb_ips: Vec<String> = svc
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|lb| lb.ingress.as_ref())
            .into_iter()
            .flatten()
            .filter(|i| is_lb && i.ip_mode.as_deref().is_none_or(|m| m == "VIP"))
            .filter_map(|i| i.ip.as_ref())
            .filter(ipv4)
            .cloned()
            .collect();
        let ips = spec
            .external_ips
            .iter()
            .flatten()
            .filter(ipv4)
            .cloned()
            .collect();
        let source_ranges = spec
            .load_balancer_source_ranges
            .iter()
            .flatten()
            .map(|r| r.trim().to_string())
            .filter(|r| r.parse::<Ipv4Cidr>().is_ok())
            .collect();
        ExternalAddresses {
            lb_ips,
            ips,
            source_ranges,
            firewalled: spec
                .load_balancer_source_ranges
                .as_ref()
                .is_some_and(|r| !r.is_empty()),
        }
    }
}

/// One endpoint address:port of a service port.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Backend {
    ip: String,
    port: i32,
    local: bool,
}

/// The backends of one service port: ready ones, else serving terminating ones.
fn backends(slices: &[&EndpointSlice], port: &ServicePort, node: &str) -> Vec<Backend> {
    let mut ready = BTreeSet::new();
    let mut terminating = BTreeSet::new();
    let wanted_name = port.name.as_deref().unwrap_or("");
    let protocol = port.protocol.as_deref().unwrap_or("TCP");
    for slice in slices {
        if slice.address_type != "IPv4" {
            continue;
        }
        let Some(target) = slice.ports.iter().flatten().find(|p| {
            p.name.as_deref().unwrap_or("") == wanted_name
                && p.protocol.as_deref().unwrap_or("TCP") == protocol
        }) else {
            continue;
        };
        let Some(number) = target.port else {
            continue;
        };
        for ep in &slice.endpoints {
            let c = ep.conditions.as_ref();
            let ready_now = c.and_then(|c| c.ready).unwrap_or(true);
            let serving = c.and_then(|c| c.serving).unwrap_or(ready_now);
            let term = c.and_then(|c| c.terminating).unwrap_or(false);
            let local = ep.node_name.as_deref() == Some(node);
            for ip in &ep.addresses {
                let b = Backend {
                    ip: ip.clone(),
                    port: number,
                    local,
                };
                if ready_now && !term {
                    ready.insert(b);
                } else if serving && term {
                    terminating.insert(b);
                }
            }
        }
    }
    let chosen = if ready.is_empty() { terminating } else { ready };
    chosen.into_iter().collect()
}

/// The nat ruleset: `iptables-restore` lines for every chain, and the chains' names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ruleset {
    /// Chain name → its rules (`-A CHAIN …` lines), in chain-creation order.
    pub chains: BTreeMap<String, Vec<String>>,
}

impl Ruleset {
    /// The `iptables-restore --noflush` input: every chain of ours declared (which flushes it)
    /// and filled, and the chains of ours that exist but are no longer wanted flushed and
    /// deleted.
    pub fn restore_input(&self, existing: &[String], network: &str) -> String {
        let mut out = String::from("*nat\n");
        let stale: Vec<&String> = existing
            .iter()
            .filter(|c| is_proxy_chain(network, c) && !self.chains.contains_key(*c))
            .collect();
        for chain in self.chains.keys().chain(stale.iter().copied()) {
            let _ = writeln!(out, ":{chain} - [0:0]");
        }
        for rules in self.chains.values() {
            for r in rules {
                out.push_str(r);
                out.push('\n');
            }
        }
        for chain in stale {
            let _ = writeln!(out, "-X {chain}");
        }
        out.push_str("COMMIT\n");
        out
    }

    /// The `iptables-restore --noflush` input that turns `applied` (what the table holds, as
    /// this agent wrote it) into this set: only the chains whose rules changed are rewritten,
    /// new ones created, dropped ones flushed and deleted; unchanged chains are not mentioned
    /// (with 10,000 endpoints, one endpoint's change rewrites two chains, not 20,000).
    /// `None` when nothing changed.
    pub fn changes_from(&self, applied: &Ruleset) -> Option<String> {
        let changed: Vec<(&String, &Vec<String>)> = self
            .chains
            .iter()
            .filter(|(c, rules)| applied.chains.get(*c) != Some(*rules))
            .collect();
        let dropped: Vec<&String> = applied
            .chains
            .keys()
            .filter(|c| !self.chains.contains_key(*c))
            .collect();
        if changed.is_empty() && dropped.is_empty() {
            return None;
        }
        let mut out = String::from("*nat\n");
        for chain in changed
            .iter()
            .map(|(c, _)| *c)
            .chain(dropped.iter().copied())
        {
            let _ = writeln!(out, ":{chain} - [0:0]");
        }
        for (_, rules) in &changed {
            for r in *rules {
                out.push_str(r);
                out.push('\n');
            }
        }
        for chain in dropped {
            let _ = writeln!(out, "-X {chain}");
        }
        out.push_str("COMMIT\n");
        Some(out)
    }

    /// How many rules the set has.
    pub fn rule_count(&self) -> usize {
        self.chains.values().map(Vec::len).sum()
    }
}

/// A rule's comment: `berth:<network> <what>` (the network tag finds every rule of an agent).
fn tagged_comment(network: &str, s: &str) -> String {
    format!(
        "-m comment --comment \"berth:{network} {}\"",
        s.replace(['"', '\\'], "")
    )
}

/// The whole nat ruleset for `services` and their `slices`.
pub fn ruleset(scope: &ProxyScope<'_>, services: &[Service], slices: &[EndpointSlice]) -> Ruleset {
    let top = TopChains::of(scope.network);
    let tag = &top.services["BERTH-SERVICES-".len()..];
    let comment = |s: &str| tagged_comment(scope.network, s);
    let mut rs = Ruleset::default();
    let mut by_service: BTreeMap<(&str, &str), Vec<&EndpointSlice>> = BTreeMap::new();
    for s in slices {
        let ns = s.metadata.namespace.as_deref().unwrap_or("");
        if let Some(name) = s
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(SERVICE_NAME_LABEL))
        {
            by_service.entry((ns, name.as_str())).or_default().push(s);
        }
    }
    let mut services_rules = Vec::new();
    let mut nodeport_rules = Vec::new();
    let mut sorted: Vec<&Service> = services.iter().collect();
    sorted.sort_by_key(|s| (s.metadata.namespace.clone(), s.metadata.name.clone()));
    for svc in sorted {
        let Some((ns, name, spec)) = named_spec(svc) else {
            continue;
        };
        if spec.type_.as_deref() == Some("ExternalName") {
            continue;
        }
        let cluster_ip = spec.cluster_ip.as_deref().filter(|ip| {
            !ip.is_empty() && *ip != "None" && ip.parse::<core::net::Ipv4Addr>().is_ok()
        });
        let Some(cluster_ip) = cluster_ip else {
            continue;
        };
        let svc_slices = by_service.get(&(ns, name)).cloned().unwrap_or_default();
        let affinity = (spec.session_affinity.as_deref() == Some("ClientIP")).then(|| {
            spec.session_affinity_config
                .as_ref()
                .and_then(|c| c.client_ip.as_ref())
                .and_then(|c| c.timeout_seconds)
                .unwrap_or(10800)
        });
        let external = ExternalAddresses::of(svc, spec);
        let internal_local = spec.internal_traffic_policy.as_deref() == Some("Local");
        let external_local = spec.external_traffic_policy.as_deref() == Some("Local");
        for port in spec.ports.iter().flatten() {
            let port_name = port.name.as_deref().unwrap_or("");
            let proto = port
                .protocol
                .as_deref()
                .unwrap_or("TCP")
                .to_ascii_lowercase();
            let what = if port_name.is_empty() {
                format!("{ns}/{name}")
            } else {
                format!("{ns}/{name}:{port_name}")
            };
            let key = [ns, name, port_name, proto.as_str()];
            let h = hash(&key, 9);
            let svc_chain = format!("BERTH-SVC-{h}-{tag}");
            let svl_chain = format!("BERTH-SVL-{h}-{tag}");
            let ext_chain = format!("BERTH-EXT-{h}-{tag}");
            let all = backends(&svc_slices, port, scope.node);
            let local: Vec<Backend> = all.iter().filter(|b| b.local).cloned().collect();
            // Endpoint chains, shared by the cluster-wide and local choices.
            let mut sep_of = BTreeMap::new();
            for b in &all {
                let ep = format!("{}:{}", b.ip, b.port);
                let sep = format!(
                    "BERTH-SEP-{}-{tag}",
                    hash(&[ns, name, port_name, &proto, &ep], 9)
                );
                let mut rules = vec![format!(
                    "-A {sep} {} -s {}/32 -j {}",
                    comment(&what),
                    b.ip,
                    top.mark_masq
                )];
                let recent = match affinity {
                    Some(_) => format!(" -m recent --name {sep} --set"),
                    None => String::new(),
                };
                rules.push(format!(
                    "-A {sep} {} -p {proto} -m {proto}{recent} -j DNAT --to-destination {ep}",
                    comment(&what)
                ));
                rs.chains.insert(sep.clone(), rules);
                sep_of.insert(b.clone(), sep);
            }
            let choose = |chain: &str, chosen: &[Backend], masq_outside: bool| -> Vec<String> {
                let mut rules = Vec::new();
                if masq_outside {
                    rules.push(format!(
                        "-A {chain} {} ! -s {} -j {}",
                        comment(&format!("{what} cluster IP")),
                        scope.cluster_cidr,
                        top.mark_masq
                    ));
                }
                if let Some(seconds) = affinity {
                    for b in chosen {
                        let sep = &sep_of[b];
                        rules.push(format!(
                            "-A {chain} {} -m recent --name {sep} --rcheck --seconds {seconds} --reap -j {sep}",
                            comment(&format!("{what} -> {}:{}", b.ip, b.port))
                        ));
                    }
                }
                let n = chosen.len();
                for (i, b) in chosen.iter().enumerate() {
                    let sep = &sep_of[b];
                    let left = n - i;
                    let statistic = if left > 1 {
                        format!(
                            " -m statistic --mode random --probability {:.10}",
                            1.0 / left as f64
                        )
                    } else {
                        String::new()
                    };
                    rules.push(format!(
                        "-A {chain} {}{statistic} -j {sep}",
                        comment(&format!("{what} -> {}:{}", b.ip, b.port))
                    ));
                }
                rules
            };
            let cluster_chain = if internal_local {
                &svl_chain
            } else {
                &svc_chain
            };
            rs.chains
                .insert(svc_chain.clone(), choose(&svc_chain, &all, true));
            if internal_local || external_local {
                rs.chains
                    .insert(svl_chain.clone(), choose(&svl_chain, &local, false));
            }
            if !all.is_empty() || internal_local {
                services_rules.push(format!(
                    "-A {} {} -d {cluster_ip}/32 -p {proto} -m {proto} --dport {} -j {cluster_chain}",
                    top.services,
                    comment(&format!("{what} cluster IP")),
                    port.port
                ));
            }
            let node_port = port.node_port.filter(|p| *p > 0);
            let fw_chain = format!("BERTH-FW-{h}-{tag}");
            let has_external =
                node_port.is_some() || !external.lb_ips.is_empty() || !external.ips.is_empty();
            if has_external && !all.is_empty() {
                for ip in &external.ips {
                    services_rules.push(format!(
                        "-A {} {} -d {ip}/32 -p {proto} -m {proto} --dport {} -j {ext_chain}",
                        top.services,
                        comment(&format!("{what} external IP")),
                        port.port
                    ));
                }
                let firewalled = external.firewalled;
                for ip in &external.lb_ips {
                    let to = if firewalled { &fw_chain } else { &ext_chain };
                    services_rules.push(format!(
                        "-A {} {} -d {ip}/32 -p {proto} -m {proto} --dport {} -j {to}",
                        top.services,
                        comment(&format!("{what} loadbalancer IP")),
                        port.port
                    ));
                }
                if firewalled && !external.lb_ips.is_empty() {
                    // kube-proxy's KUBE-FW-: the allowed sources (and the balancer's own
                    // addresses, for traffic it proxies) go on, anything else is dropped.
                    let mut fw = Vec::new();
                    for src in external.source_ranges.iter().chain(&external.lb_ips) {
                        fw.push(format!(
                            "-A {fw_chain} {} -s {src} -j {ext_chain}",
                            comment(&format!("{what} loadbalancer IP"))
                        ));
                    }
                    fw.push(format!(
                        "-A {fw_chain} {} -j {}",
                        comment(&format!("{what} other traffic to loadbalancer IP")),
                        top.mark_drop
                    ));
                    rs.chains.insert(fw_chain.clone(), fw);
                }
            }
            if has_external {
                let mut ext = Vec::new();
                if external_local {
                    ext.push(format!(
                        "-A {ext_chain} {} -s {} -j {svc_chain}",
                        comment(&format!("pod traffic for {what} external destinations")),
                        scope.cluster_cidr
                    ));
                    ext.push(format!(
                        "-A {ext_chain} {} -m addrtype --src-type LOCAL -j {}",
                        comment(&format!(
                            "masquerade LOCAL traffic for {what} external destinations"
                        )),
                        top.mark_masq
                    ));
                    ext.push(format!(
                        "-A {ext_chain} {} -m addrtype --src-type LOCAL -j {svc_chain}",
                        comment(&format!(
                            "route LOCAL traffic for {what} external destinations"
                        ))
                    ));
                    ext.push(format!("-A {ext_chain} {} -j {svl_chain}", comment(&what)));
                } else {
                    ext.push(format!(
                        "-A {ext_chain} {} -j {}",
                        comment(&format!(
                            "{what} masquerade traffic for external destinations"
                        )),
                        top.mark_masq
                    ));
                    ext.push(format!("-A {ext_chain} {} -j {svc_chain}", comment(&what)));
                }
                rs.chains.insert(ext_chain.clone(), ext);
            }
            if let Some(node_port) = node_port {
                nodeport_rules.push(format!(
                    "-A {} {} -p {proto} -m {proto} --dport {node_port} -j {ext_chain}",
                    top.nodeports,
                    comment(&what)
                ));
            }
        }
    }
    // Without localhost NodePorts, 127.0.0.0/8 is left alone: with `route_localnet` off a
    // DNATed packet from there could not leave the host anyway.
    let loopback = if scope.localhost_node_ports {
        ""
    } else {
        " ! -d 127.0.0.0/8"
    };
    services_rules.push(format!(
        "-A {} {} -m addrtype --dst-type LOCAL{loopback} -j {}",
        top.services,
        comment("service nodeports; NOTE: this must be the last rule in this chain"),
        top.nodeports
    ));
    rs.chains.insert(top.services.clone(), services_rules);
    rs.chains.insert(top.nodeports.clone(), nodeport_rules);
    rs.chains.insert(
        top.mark_drop.clone(),
        vec![format!(
            "-A {} {} -j MARK --or-mark 0x8000",
            top.mark_drop,
            comment("mark for drop")
        )],
    );
    rs.chains.insert(
        top.mark_masq.clone(),
        vec![format!(
            "-A {} {} -j MARK --or-mark 0x4000",
            top.mark_masq,
            comment("mark for masquerade")
        )],
    );
    rs.chains.insert(
        top.postrouting.clone(),
        vec![
            format!(
                "-A {} {} -m mark ! --mark {MASQ_MARK} -j RETURN",
                top.postrouting,
                comment("not marked")
            ),
            format!(
                "-A {} {} -j MARK --xor-mark 0x4000",
                top.postrouting,
                comment("unmark")
            ),
            format!(
                "-A {} {} -j MASQUERADE",
                top.postrouting,
                comment("service traffic requiring SNAT")
            ),
        ],
    );
    rs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NET: &str = "berth-n1";

    fn scope() -> ProxyScope<'static> {
        ProxyScope {
            network: NET,
            node: "n1",
            cluster_cidr: "10.42.0.0/16".parse().unwrap(),
            localhost_node_ports: true,
        }
    }

    fn svc(spec: serde_json::Value) -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": spec
        }))
        .unwrap()
    }

    fn slice(name: &str, ports: serde_json::Value, endpoints: serde_json::Value) -> EndpointSlice {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "shop",
                         "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "ports": ports,
            "endpoints": endpoints
        }))
        .unwrap()
    }

    fn ep(ip: &str, node: &str, ready: bool, terminating: bool) -> serde_json::Value {
        json!({"addresses": [ip], "nodeName": node,
               "conditions": {"ready": ready, "serving": ready || terminating, "terminating": terminating}})
    }

    fn rules_of<'a>(rs: &'a Ruleset, prefix: &str) -> Vec<&'a String> {
        rs.chains
            .iter()
            .filter(|(c, _)| c.starts_with(prefix))
            .flat_map(|(_, r)| r)
            .collect()
    }

    fn jumps(rules: &[&String]) -> Vec<String> {
        rules
            .iter()
            .filter_map(|r| r.split(" -j ").nth(1).map(str::to_string))
            .collect()
    }

    #[test]
    fn a_cluster_ip_balances_at_random_over_the_ready_endpoints() {
        let s = svc(
            json!({"clusterIP": "10.43.0.10", "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}]}),
        );
        let sl = slice(
            "web-1",
            json!([{"port": 8080, "protocol": "TCP"}]),
            json!([
                ep("10.42.1.5", "n1", true, false),
                ep("10.42.2.5", "n2", true, false),
                ep("10.42.3.5", "n3", true, false),
                ep("10.42.3.6", "n3", false, false)
            ]),
        );
        let rs = ruleset(&scope(), &[s], &[sl]);
        let top = TopChains::of(NET);
        let services = &rs.chains[&top.services];
        assert_eq!(services.len(), 2, "{services:#?}");
        assert!(
            services[0].contains("-d 10.43.0.10/32 -p tcp -m tcp --dport 80 -j BERTH-SVC-"),
            "{}",
            services[0]
        );
        assert!(services[1].ends_with(&format!("--dst-type LOCAL -j {}", top.nodeports)));
        let svc_rules = rules_of(&rs, "BERTH-SVC-");
        assert!(
            svc_rules[0].contains("! -s 10.42.0.0/16 -j BERTH-MARK-MASQ-"),
            "{}",
            svc_rules[0]
        );
        assert!(
            svc_rules[1].contains("--probability 0.3333333333"),
            "{}",
            svc_rules[1]
        );
        assert!(
            svc_rules[2].contains("--probability 0.5000000000"),
            "{}",
            svc_rules[2]
        );
        assert!(!svc_rules[3].contains("statistic"), "{}", svc_rules[3]);
        let seps = rules_of(&rs, "BERTH-SEP-");
        let dnat: Vec<&str> = seps
            .iter()
            .filter_map(|r| r.split("--to-destination ").nth(1))
            .collect();
        let mut sorted = dnat.clone();
        sorted.sort();
        assert_eq!(
            sorted,
            vec!["10.42.1.5:8080", "10.42.2.5:8080", "10.42.3.5:8080"]
        );
        // Hairpin: a pod that reaches itself through the service is masqueraded.
        assert!(
            seps.iter()
                .any(|r| r.contains("-s 10.42.1.5/32 -j BERTH-MARK-MASQ-"))
        );
        for chain in rs.chains.keys() {
            assert!(chain.len() <= 28, "{chain}");
            assert!(is_proxy_chain(NET, chain), "{chain}");
            assert!(!is_proxy_chain("berth-n2", chain), "{chain}");
        }
    }

    #[test]
    fn terminating_endpoints_serve_only_when_no_ready_one_is_left() {
        let s = svc(json!({"clusterIP": "10.43.0.10", "ports": [{"port": 80, "protocol": "TCP"}]}));
        let ports = json!([{"port": 80, "protocol": "TCP"}]);
        let both = slice(
            "a",
            ports.clone(),
            json!([
                ep("10.42.1.5", "n1", true, false),
                ep("10.42.1.6", "n1", false, true)
            ]),
        );
        let rs = ruleset(&scope(), std::slice::from_ref(&s), &[both]);
        assert_eq!(
            rules_of(&rs, "BERTH-SEP-").len(),
            2,
            "one endpoint, two rules"
        );
        let only_terminating = slice(
            "a",
            ports.clone(),
            json!([ep("10.42.1.6", "n1", false, true)]),
        );
        let rs = ruleset(&scope(), std::slice::from_ref(&s), &[only_terminating]);
        assert!(
            rules_of(&rs, "BERTH-SEP-")
                .iter()
                .any(|r| r.contains("10.42.1.6:80"))
        );
        // No endpoint at all: no cluster IP rule (the connection is refused by nobody
        // answering, not sent to a stale pod).
        let none = slice("a", ports, json!([]));
        let rs = ruleset(&scope(), &[s], &[none]);
        assert_eq!(rs.chains[&TopChains::of(NET).services].len(), 1);
    }

    #[test]
    fn named_ports_pick_the_slice_port_of_the_same_name() {
        let s = svc(json!({"clusterIP": "10.43.0.10", "ports": [
            {"name": "http", "port": 80, "protocol": "TCP"},
            {"name": "metrics", "port": 9090, "protocol": "TCP"}]}));
        let sl = slice(
            "a",
            json!([{"name": "http", "port": 8080, "protocol": "TCP"}, {"name": "metrics", "port": 9100, "protocol": "TCP"}]),
            json!([ep("10.42.1.5", "n1", true, false)]),
        );
        let rs = ruleset(&scope(), &[s], &[sl]);
        let dnat: BTreeSet<&str> = rules_of(&rs, "BERTH-SEP-")
            .into_iter()
            .filter_map(|r| r.split("--to-destination ").nth(1))
            .collect();
        assert_eq!(dnat, BTreeSet::from(["10.42.1.5:8080", "10.42.1.5:9100"]));
        let services = &rs.chains[&TopChains::of(NET).services];
        assert!(
            services[0].contains("shop/web:http cluster IP"),
            "{}",
            services[0]
        );
    }

    #[test]
    fn node_ports_masquerade_unless_external_traffic_is_local() {
        let ports = json!([{"port": 80, "protocol": "TCP"}]);
        let eps = json!([
            ep("10.42.1.5", "n1", true, false),
            ep("10.42.2.5", "n2", true, false)
        ]);
        let cluster = svc(json!({"type": "NodePort", "clusterIP": "10.43.0.10",
            "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080}]}));
        let rs = ruleset(
            &scope(),
            &[cluster],
            &[slice("a", ports.clone(), eps.clone())],
        );
        let np = &rs.chains[&TopChains::of(NET).nodeports];
        assert_eq!(np.len(), 1);
        assert!(np[0].contains("--dport 30080 -j BERTH-EXT-"), "{}", np[0]);
        let ext = rules_of(&rs, "BERTH-EXT-");
        assert!(jumps(&ext)[0].starts_with("BERTH-MARK-MASQ-"));
        assert!(jumps(&ext)[1].starts_with("BERTH-SVC-"));

        let local = svc(
            json!({"type": "NodePort", "clusterIP": "10.43.0.10", "externalTrafficPolicy": "Local",
            "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080}]}),
        );
        let rs = ruleset(&scope(), &[local], &[slice("a", ports, eps)]);
        let ext = rules_of(&rs, "BERTH-EXT-");
        // Pods and the node itself go to every endpoint (the node masqueraded: its source may
        // be 127.0.0.1); the rest stays on this node's endpoints, its source kept.
        let to = jumps(&ext);
        assert_eq!(to.len(), 4, "{ext:#?}");
        assert!(ext[0].contains("-s 10.42.0.0/16") && to[0].starts_with("BERTH-SVC-"));
        assert!(ext[1].contains("--src-type LOCAL") && to[1].starts_with("BERTH-MARK-MASQ-"));
        assert!(ext[2].contains("--src-type LOCAL") && to[2].starts_with("BERTH-SVC-"));
        assert!(to[3].starts_with("BERTH-SVL-"));
        let svl = rules_of(&rs, "BERTH-SVL-");
        assert_eq!(svl.len(), 1, "only n1's endpoint: {svl:#?}");
        assert!(!svl[0].contains("statistic"));
    }

    fn lb_service(extra: serde_json::Value, ingress: serde_json::Value) -> Service {
        let mut spec = json!({"type": "LoadBalancer", "clusterIP": "10.43.0.10",
            "ports": [{"port": 80, "protocol": "TCP"}]});
        for (k, v) in extra.as_object().unwrap() {
            spec[k] = v.clone();
        }
        let mut s = svc(spec);
        s.status = serde_json::from_value(json!({"loadBalancer": {"ingress": ingress}})).unwrap();
        s
    }

    fn web_slice() -> EndpointSlice {
        slice(
            "a",
            json!([{"port": 8080, "protocol": "TCP"}]),
            json!([
                ep("10.42.1.5", "n1", true, false),
                ep("10.42.2.5", "n2", true, false)
            ]),
        )
    }

    #[test]
    fn load_balancer_and_external_ips_go_to_the_external_chain_without_node_ports() {
        let s = lb_service(
            json!({"externalIPs": ["203.0.113.7"], "allocateLoadBalancerNodePorts": false}),
            json!([{"ip": "192.0.2.10", "ipMode": "VIP"}, {"ip": "192.0.2.11", "ipMode": "Proxy"}]),
        );
        let rs = ruleset(&scope(), &[s], &[web_slice()]);
        let services = &rs.chains[&TopChains::of(NET).services];
        let to_ext: Vec<&String> = services
            .iter()
            .filter(|r| r.contains("-j BERTH-EXT-"))
            .collect();
        assert_eq!(to_ext.len(), 2, "{services:#?}");
        assert!(to_ext[0].contains("-d 203.0.113.7/32 -p tcp -m tcp --dport 80"));
        assert!(to_ext[1].contains("-d 192.0.2.10/32 -p tcp -m tcp --dport 80"));
        assert!(
            !services.iter().any(|r| r.contains("192.0.2.11")),
            "Proxy mode is the balancer's"
        );
        assert!(rs.chains[&TopChains::of(NET).nodeports].is_empty());
        let ext = rules_of(&rs, "BERTH-EXT-");
        assert!(jumps(&ext)[0].starts_with("BERTH-MARK-MASQ-"));
        assert!(jumps(&ext)[1].starts_with("BERTH-SVC-"));
        // The last rule of the services chain is still the node ports' catch-all.
        assert!(services.last().unwrap().contains("BERTH-NODEPORTS-"));
    }

    #[test]
    fn source_ranges_let_in_the_ranges_and_the_balancer_and_mark_the_rest_for_drop() {
        let s = lb_service(
            json!({"loadBalancerSourceRanges": ["198.51.100.0/24"]}),
            json!([{"ip": "192.0.2.10", "ipMode": "VIP"}]),
        );
        let rs = ruleset(&scope(), &[s], &[web_slice()]);
        let services = &rs.chains[&TopChains::of(NET).services];
        assert!(
            services
                .iter()
                .any(|r| r.contains("-d 192.0.2.10/32") && r.contains("-j BERTH-FW-"))
        );
        let fw = rules_of(&rs, "BERTH-FW-");
        assert_eq!(fw.len(), 3, "{fw:#?}");
        assert!(fw[0].contains("-s 198.51.100.0/24 -j BERTH-EXT-"));
        assert!(fw[1].contains("-s 192.0.2.10 -j BERTH-EXT-"));
        assert!(jumps(&fw)[2].starts_with("BERTH-MARK-DROP-"));
        assert!(is_proxy_chain(NET, &TopChains::of(NET).mark_drop));
        assert!(
            proxy_firewall(NET)
                .restore
                .contains("--mark 0x8000/0x8000 -j DROP")
        );
        // Only IPv6 ranges: nobody from IPv4 gets in, rather than everybody.
        let v6 = lb_service(
            json!({"loadBalancerSourceRanges": ["2001:db8::/32"]}),
            json!([{"ip": "192.0.2.10"}]),
        );
        let rs = ruleset(&scope(), &[v6], &[web_slice()]);
        assert!(jumps(&rules_of(&rs, "BERTH-FW-"))[1].starts_with("BERTH-MARK-DROP-"));
    }

    #[test]
    fn a_load_balancer_ingress_of_a_service_of_another_type_or_without_endpoints_gets_no_rules() {
        let mut s = lb_service(json!({}), json!([{"ip": "192.0.2.10"}]));
        s.spec.as_mut().unwrap().type_ = Some("ClusterIP".into());
        let rs = ruleset(&scope(), &[s], &[web_slice()]);
        assert!(
            rules_of(&rs, "BERTH-SERVICES-")
                .iter()
                .all(|r| !r.contains("192.0.2.10"))
        );
        let s = lb_service(json!({}), json!([{"ip": "192.0.2.10"}]));
        let rs = ruleset(&scope(), &[s], &[]);
        assert!(
            rules_of(&rs, "BERTH-SERVICES-")
                .iter()
                .all(|r| !r.contains("192.0.2.10"))
        );
    }

    #[test]
    fn external_traffic_policy_local_keeps_load_balancer_traffic_on_local_endpoints() {
        let s = lb_service(
            json!({"externalTrafficPolicy": "Local"}),
            json!([{"ip": "192.0.2.10", "ipMode": "VIP"}]),
        );
        let rs = ruleset(&scope(), &[s], &[web_slice()]);
        let ext = rules_of(&rs, "BERTH-EXT-");
        let to = jumps(&ext);
        assert!(to.last().unwrap().starts_with("BERTH-SVL-"), "{ext:#?}");
        assert!(!to.last().unwrap().starts_with("BERTH-MARK-MASQ-"));
        assert_eq!(rules_of(&rs, "BERTH-SVL-").len(), 1);
    }

    #[test]
    fn node_ports_take_loopback_destinations_only_with_localhost_node_ports() {
        let top = TopChains::of(NET);
        let last = |localhost: bool| {
            let scope = ProxyScope {
                localhost_node_ports: localhost,
                ..scope()
            };
            let rs = ruleset(&scope, &[], &[]);
            rs.chains[&top.services].last().cloned().unwrap_or_default()
        };
        let on = last(true);
        assert!(on.contains("-m addrtype --dst-type LOCAL -j"), "{on}");
        assert!(!on.contains("127.0.0.0/8"), "{on}");
        let off = last(false);
        assert!(
            off.contains(&format!(
                "-m addrtype --dst-type LOCAL ! -d 127.0.0.0/8 -j {}",
                top.nodeports
            )),
            "{off}"
        );
    }

    #[test]
    fn the_localnet_firewall_drops_foreign_sources_to_loopback_unless_dnated() {
        let fw = localnet_firewall(NET);
        assert!(fw.chain.starts_with("BERTH-FIREWALL-") && fw.chain.len() <= 28);
        assert_ne!(fw.chain, localnet_firewall("berth-n2").chain);
        let lines: Vec<&str> = fw.restore.lines().collect();
        assert_eq!(lines[0], "*filter");
        assert_eq!(lines[1], format!(":{} - [0:0]", fw.chain));
        assert!(lines[2].contains("berth:berth-n1 block incoming localnet connections"));
        assert!(lines[2].ends_with(
            "-d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP"
        ));
        assert_eq!(lines[3], "COMMIT");
    }

    #[test]
    fn internal_traffic_policy_local_keeps_cluster_ip_traffic_on_the_node() {
        let s = svc(
            json!({"clusterIP": "10.43.0.10", "internalTrafficPolicy": "Local",
            "ports": [{"port": 80, "protocol": "TCP"}]}),
        );
        let sl = slice(
            "a",
            json!([{"port": 80, "protocol": "TCP"}]),
            json!([ep("10.42.2.5", "n2", true, false)]),
        );
        let rs = ruleset(&scope(), &[s], &[sl]);
        let services = &rs.chains[&TopChains::of(NET).services];
        assert!(jumps(&services.iter().collect::<Vec<_>>())[0].starts_with("BERTH-SVL-"));
        assert!(
            rules_of(&rs, "BERTH-SVL-").is_empty(),
            "no local endpoint: nothing to choose"
        );
    }

    #[test]
    fn client_ip_affinity_checks_recent_clients_before_choosing() {
        let s = svc(
            json!({"clusterIP": "10.43.0.10", "sessionAffinity": "ClientIP",
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}},
            "ports": [{"port": 80, "protocol": "TCP"}]}),
        );
        let sl = slice(
            "a",
            json!([{"port": 80, "protocol": "TCP"}]),
            json!([
                ep("10.42.1.5", "n1", true, false),
                ep("10.42.2.5", "n2", true, false)
            ]),
        );
        let rs = ruleset(&scope(), &[s], &[sl]);
        let svc_rules = rules_of(&rs, "BERTH-SVC-");
        assert_eq!(
            svc_rules
                .iter()
                .filter(|r| r.contains("--rcheck --seconds 60 --reap"))
                .count(),
            2
        );
        assert_eq!(
            rules_of(&rs, "BERTH-SEP-")
                .iter()
                .filter(|r| r.contains("-m recent --name BERTH-SEP-") && r.contains("--set"))
                .count(),
            2
        );
    }

    #[test]
    fn headless_external_name_and_other_families_get_no_rules() {
        let headless = svc(json!({"clusterIP": "None", "ports": [{"port": 80}]}));
        let external = svc(json!({"type": "ExternalName", "externalName": "example.com"}));
        let rs = ruleset(&scope(), &[headless, external], &[]);
        assert_eq!(rs.chains[&TopChains::of(NET).services].len(), 1);
        // The node ports' catch-all, mark-masq, mark-drop and postrouting's three.
        assert_eq!(rs.rule_count(), 1 + 1 + 1 + 3);
    }

    #[test]
    fn an_endpoint_change_rewrites_only_the_chains_it_touches() {
        let s = svc(json!({"clusterIP": "10.43.0.10", "ports": [{"port": 80, "protocol": "TCP"}]}));
        let ports = json!([{"port": 80, "protocol": "TCP"}]);
        let before = ruleset(
            &scope(),
            std::slice::from_ref(&s),
            &[slice(
                "a",
                ports.clone(),
                json!([
                    ep("10.42.1.5", "n1", true, false),
                    ep("10.42.1.6", "n1", true, false)
                ]),
            )],
        );
        assert_eq!(before.changes_from(&before), None);
        let after = ruleset(
            &scope(),
            &[s],
            &[slice(
                "a",
                ports,
                json!([
                    ep("10.42.1.5", "n1", true, false),
                    ep("10.42.1.7", "n1", true, false)
                ]),
            )],
        );
        let input = after.changes_from(&before).expect("a change");
        let declared: Vec<&str> = input
            .lines()
            .filter_map(|l| l.strip_prefix(':'))
            .map(|l| l.split(' ').next().unwrap_or(""))
            .collect();
        // The service chain, the new endpoint's chain, the old endpoint's chain (deleted).
        assert_eq!(declared.len(), 3, "{input}");
        assert!(declared.iter().any(|c| c.starts_with("BERTH-SVC-")));
        assert_eq!(input.matches("-X BERTH-SEP-").count(), 1, "{input}");
        assert!(input.contains("--to-destination 10.42.1.7:80"));
        assert!(
            !input.contains("--to-destination 10.42.1.5:80"),
            "unchanged chain rewritten"
        );
        assert!(
            !input.contains("BERTH-SERVICES-"),
            "unchanged chain rewritten"
        );
    }

    #[test]
    fn the_restore_input_rewrites_our_chains_and_deletes_our_stale_ones_only() {
        let s = svc(json!({"clusterIP": "10.43.0.10", "ports": [{"port": 80, "protocol": "TCP"}]}));
        let sl = slice(
            "a",
            json!([{"port": 80, "protocol": "TCP"}]),
            json!([ep("10.42.1.5", "n1", true, false)]),
        );
        let rs = ruleset(&scope(), &[s], &[sl]);
        let top = TopChains::of(NET);
        let tag = &top.services["BERTH-SERVICES-".len()..];
        let stale = format!("BERTH-SEP-012345678-{tag}");
        let existing = vec![
            stale.clone(),
            "BERTH-SEP-012345678-ffffffff".to_string(),
            "KUBE-SERVICES".to_string(),
            top.services.clone(),
        ];
        let input = rs.restore_input(&existing, NET);
        assert!(input.starts_with("*nat\n"));
        assert!(input.ends_with("COMMIT\n"));
        assert!(input.contains(&format!(":{stale} - [0:0]\n")));
        assert!(input.contains(&format!("-X {stale}\n")));
        assert!(!input.contains("ffffffff"), "another agent's chain");
        assert!(!input.contains("KUBE-SERVICES"));
        assert_eq!(
            input.matches(&format!(":{} - [0:0]", top.services)).count(),
            1
        );
    }
}
