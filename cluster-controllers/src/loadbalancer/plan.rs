//! Load-balancer address allocation for one Service (the bare-metal answer to a cloud's
//! service controller, as MetalLB's and k3s ServiceLB's): what `status.loadBalancer.ingress`
//! should say, and the event telling the user.
//!
//! * Only `type: LoadBalancer` Services without a `loadBalancerClass`, or with Berth's
//!   ([`CLASS`]), are ours; any other class is another implementation's and left alone. A
//!   Service of ours that stops being a LoadBalancer has its ingress cleared.
//! * With pools: the Service keeps the pool addresses it holds (the status is the record; the
//!   allocation is rebuilt from every Service's status); else it gets what it asks for —
//!   the [`IPS_ANNOTATION`] (comma-separated) or `spec.loadBalancerIP` — when in a pool and
//!   free, or else the first free address of the first pool with one. Two Services claiming
//!   one address (a restore, a hand edit): the older one keeps it.
//! * Without pools (k3s ServiceLB): the ingress is the InternalIPs of the Ready nodes, where
//!   every agent's proxy answers for them.
//!
//! Every ingress entry has `ipMode: VIP`: the address is delivered to the node as the
//! destination, and the proxy rewrites it.
//!
//! Planner: pure, no I/O.

use core::net::Ipv4Addr;
use std::collections::BTreeMap;

use berth_shared::k8s_openapi::api::core::v1::{LoadBalancerIngress, Service};

use super::pool::Pool;

/// Berth's `spec.loadBalancerClass` (a Service without a class is also ours).
pub const CLASS: &str = "berth.dev/load-balancer";
/// The addresses a Service asks for, comma-separated (MetalLB's `loadBalancerIPs` annotation
/// under Berth's name; `spec.loadBalancerIP`, deprecated upstream, is honoured too).
pub const IPS_ANNOTATION: &str = "loadbalancer.berth.dev/ips";

/// A Service's `namespace/name`.
pub type ServiceKey = String;

fn key(svc: &Service) -> ServiceKey {
    format!(
        "{}/{}",
        svc.metadata.namespace.as_deref().unwrap_or_default(),
        svc.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Whether `svc` is a LoadBalancer this controller serves.
pub fn is_ours(svc: &Service) -> bool {
    let Some(spec) = &svc.spec else {
        return false;
    };
    spec.type_.as_deref() == Some("LoadBalancer")
        && spec
            .load_balancer_class
            .as_deref()
            .is_none_or(|c| c == CLASS)
}

/// Whether a Service's class is another implementation's (then its status is not ours).
fn foreign_class(svc: &Service) -> bool {
    svc.spec
        .as_ref()
        .and_then(|s| s.load_balancer_class.as_deref())
        .is_some_and(|c| c != CLASS)
}

/// The IPv4 addresses of the Service's `status.loadBalancer.ingress`.
pub fn ingress_ips(svc: &Service) -> Vec<Ipv4Addr> {
    svc.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|i| i.ip.as_deref()?.parse().ok())
        .collect()
}

/// Who holds each pool address: the oldest of our Services listing it in its status
/// (creation time, then name, breaks ties).
pub fn holders(services: &[Service], pools: &[Pool]) -> BTreeMap<Ipv4Addr, ServiceKey> {
    let mut ours: Vec<&Service> = services.iter().filter(|s| is_ours(s)).collect();
    ours.sort_by_key(|s| (s.metadata.creation_timestamp.clone().map(|t| t.0), key(s)));
    let mut held = BTreeMap::new();
    for s in ours {
        for ip in ingress_ips(s) {
            if pools.iter().any(|p| p.contains(ip)) {
                held.entry(ip).or_insert_with(|| key(s));
            }
        }
    }
    held
}

/// The addresses `svc` asks for: the annotation's, else `spec.loadBalancerIP`; `Err` with the
/// text when one does not parse as IPv4.
fn requested(svc: &Service) -> Result<Vec<Ipv4Addr>, String> {
    let annotated = svc
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(IPS_ANNOTATION))
        .map(String::as_str);
    let spec_ip = svc
        .spec
        .as_ref()
        .and_then(|s| s.load_balancer_ip.as_deref());
    let text = annotated.or(spec_ip).unwrap_or_default();
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().map_err(|_| s.to_string()))
        .collect()
}

/// What a pass decides for one Service.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    /// The ingress to write, when it differs from what the status says.
    pub ingress: Option<Vec<Ipv4Addr>>,
    pub event: Option<Event>,
}

/// An event on the Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub warning: bool,
    pub reason: &'static str,
    pub message: String,
}

fn event(warning: bool, reason: &'static str, message: String) -> Option<Event> {
    Some(Event {
        warning,
        reason,
        message,
    })
}

fn joined(ips: &[Ipv4Addr]) -> String {
    ips.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The cluster around the Service being planned.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    pub pools: &'a [Pool],
    /// Pool addresses held, by whom ([`holders`] over every Service).
    pub held: &'a BTreeMap<Ipv4Addr, ServiceKey>,
    /// The InternalIPs of the Ready nodes, sorted (used without pools).
    pub ready_nodes: &'a [Ipv4Addr],
}

/// The plan for `svc`.
pub fn plan_service(svc: &Service, inputs: Inputs<'_>) -> Plan {
    let current = ingress_ips(svc);
    let has_entries = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .is_some_and(|i| !i.is_empty());
    if !is_ours(svc) {
        if foreign_class(svc) || !has_entries {
            return Plan::default();
        }
        return Plan {
            ingress: Some(Vec::new()),
            event: event(
                false,
                "IPReleased",
                format!(
                    "released {}: the Service is no longer a LoadBalancer",
                    joined(&current)
                ),
            ),
        };
    }
    let desired = if inputs.pools.is_empty() {
        inputs.ready_nodes.to_vec()
    } else {
        match plan_pool_addresses(svc, &current, inputs) {
            Ok(ips) => ips,
            Err(e) => {
                // What it holds is released (it may be another's now); it waits for an address.
                return Plan {
                    ingress: has_entries.then(Vec::new),
                    event: event(true, "AllocationFailed", e),
                };
            }
        }
    };
    if desired == current && !needs_ip_mode(svc) {
        return Plan::default();
    }
    let message = if inputs.pools.is_empty() {
        format!("Assigned the Ready nodes' addresses [{}]", joined(&desired))
    } else {
        format!("Assigned IP [{}]", joined(&desired))
    };
    Plan {
        ingress: Some(desired.clone()),
        // No Ready node: the ingress empties without a claim that something was assigned.
        event: if desired != current && !desired.is_empty() {
            event(false, "IPAllocated", message)
        } else {
            None
        },
    }
}

/// Whether an entry of the ingress lacks `ipMode: VIP`.
fn needs_ip_mode(svc: &Service) -> bool {
    svc.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .into_iter()
        .flatten()
        .any(|i| i.ip_mode.as_deref() != Some("VIP"))
}

/// The pool addresses `svc` should hold, or why it gets none.
fn plan_pool_addresses(
    svc: &Service,
    current: &[Ipv4Addr],
    inputs: Inputs<'_>,
) -> Result<Vec<Ipv4Addr>, String> {
    let me = key(svc);
    let free_for_me = |ip: &Ipv4Addr| inputs.held.get(ip).is_none_or(|k| *k == me);
    let in_pool = |ip: &Ipv4Addr| inputs.pools.iter().any(|p| p.contains(*ip));
    let asked = requested(svc).map_err(|bad| format!("{bad:?} is not an IPv4 address"))?;
    if !asked.is_empty() {
        if let Some(ip) = asked.iter().find(|ip| !in_pool(ip)) {
            return Err(format!("{ip} is not in any load-balancer pool"));
        }
        if let Some(ip) = asked.iter().find(|ip| !free_for_me(ip)) {
            let holder = inputs.held.get(ip).cloned().unwrap_or_default();
            return Err(format!("{ip} is already allocated to {holder}"));
        }
        return Ok(asked);
    }
    // Keep one address it holds rightfully; any other entry (a node's, another's) goes.
    if let Some(ip) = current.iter().find(|ip| in_pool(ip) && free_for_me(ip)) {
        return Ok(vec![*ip]);
    }
    inputs
        .pools
        .iter()
        .flat_map(Pool::addresses)
        .find(|ip| !inputs.held.contains_key(ip))
        .map(|ip| vec![ip])
        .ok_or_else(|| "no available IPs: every load-balancer pool is full".to_string())
}

/// The ingress entries for `ips`.
pub fn ingress_of(ips: &[Ipv4Addr]) -> Vec<LoadBalancerIngress> {
    ips.iter()
        .map(|ip| LoadBalancerIngress {
            ip: Some(ip.to_string()),
            ip_mode: Some("VIP".to_string()),
            ..Default::default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn svc(name: &str, spec: Value, ingress: &[&str]) -> Service {
        let ingress: Vec<Value> = ingress
            .iter()
            .map(|ip| json!({"ip": ip, "ipMode": "VIP"}))
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "shop",
                         "creationTimestamp": format!("2024-01-01T00:00:0{}Z", name.len() % 10)},
            "spec": spec,
            "status": {"loadBalancer": {"ingress": ingress}}
        }))
        .unwrap()
    }

    fn lb() -> Value {
        json!({"type": "LoadBalancer", "ports": [{"port": 80}]})
    }

    fn pools() -> Vec<Pool> {
        vec![
            Pool::parse("192.0.2.10-192.0.2.11").unwrap(),
            Pool::parse("198.51.100.0/30").unwrap(),
        ]
    }

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    fn plan_with(s: &Service, others: &[Service], nodes: &[Ipv4Addr], pools: &[Pool]) -> Plan {
        let mut all = others.to_vec();
        all.push(s.clone());
        let held = holders(&all, pools);
        plan_service(
            s,
            Inputs {
                pools,
                held: &held,
                ready_nodes: nodes,
            },
        )
    }

    fn plan(s: &Service, others: &[Service]) -> Plan {
        plan_with(s, others, &[], &pools())
    }

    #[test]
    fn a_new_load_balancer_gets_the_first_free_address_of_the_pools() {
        let p = plan(&svc("web", lb(), &[]), &[]);
        assert_eq!(p.ingress, Some(vec![ip("192.0.2.10")]));
        let e = p.event.unwrap();
        assert_eq!((e.reason, e.warning), ("IPAllocated", false));
        assert_eq!(e.message, "Assigned IP [192.0.2.10]");
        let taken = [
            svc("a", lb(), &["192.0.2.10"]),
            svc("bb", lb(), &["192.0.2.11"]),
        ];
        let p = plan(&svc("web", lb(), &[]), &taken);
        assert_eq!(p.ingress, Some(vec![ip("198.51.100.1")]));
    }

    #[test]
    fn an_address_held_is_kept_and_nothing_is_written() {
        let p = plan(&svc("web", lb(), &["192.0.2.11"]), &[]);
        assert_eq!(p, Plan::default());
    }

    #[test]
    fn an_entry_without_ip_mode_is_rewritten_without_an_event() {
        let mut s = svc("web", lb(), &["192.0.2.11"]);
        let ingress = s.status.as_mut().unwrap().load_balancer.as_mut().unwrap();
        ingress.ingress.as_mut().unwrap()[0].ip_mode = None;
        let p = plan(&s, &[]);
        assert_eq!(p.ingress, Some(vec![ip("192.0.2.11")]));
        assert_eq!(p.event, None);
    }

    #[test]
    fn a_requested_address_is_given_when_in_a_pool_and_free() {
        let mut spec = lb();
        spec["loadBalancerIP"] = json!("198.51.100.2");
        let p = plan(&svc("web", spec.clone(), &[]), &[]);
        assert_eq!(p.ingress, Some(vec![ip("198.51.100.2")]));
        let mut annotated = svc("web", lb(), &["192.0.2.10"]);
        annotated.metadata.annotations = Some(
            [(IPS_ANNOTATION.to_string(), "192.0.2.11".to_string())]
                .into_iter()
                .collect(),
        );
        let p = plan(&annotated, &[]);
        assert_eq!(p.ingress, Some(vec![ip("192.0.2.11")]));
    }

    #[test]
    fn a_request_outside_the_pools_or_taken_fails_with_a_warning() {
        let cases = [
            (
                "203.0.113.1",
                "203.0.113.1 is not in any load-balancer pool",
            ),
            (
                "192.0.2.10",
                "192.0.2.10 is already allocated to shop/other",
            ),
            ("nope", "\"nope\" is not an IPv4 address"),
        ];
        let other = svc("other", lb(), &["192.0.2.10"]);
        for (asked, message) in cases {
            let mut spec = lb();
            spec["loadBalancerIP"] = json!(asked);
            let p = plan(&svc("web", spec, &[]), std::slice::from_ref(&other));
            assert_eq!(p.ingress, None, "{asked}");
            let e = p.event.unwrap();
            assert_eq!((e.reason, e.warning), ("AllocationFailed", true));
            assert_eq!(e.message, message);
        }
    }

    #[test]
    fn full_pools_leave_the_service_pending() {
        let one = [Pool::parse("192.0.2.10/32").unwrap()];
        let other = svc("other", lb(), &["192.0.2.10"]);
        let p = plan_with(&svc("web", lb(), &[]), &[other], &[], &one);
        assert_eq!(p.ingress, None);
        assert_eq!(p.event.unwrap().reason, "AllocationFailed");
    }

    #[test]
    fn of_two_services_claiming_one_address_the_older_keeps_it() {
        // "web" (3 letters) was created at :03, "older" (5 letters) at :05, "a" at :01.
        let elder = svc("a", lb(), &["192.0.2.10"]);
        let p = plan(
            &svc("web", lb(), &["192.0.2.10"]),
            std::slice::from_ref(&elder),
        );
        assert_eq!(p.ingress, Some(vec![ip("192.0.2.11")]));
        let p = plan(&elder, &[svc("web", lb(), &["192.0.2.10"])]);
        assert_eq!(p, Plan::default());
    }

    #[test]
    fn another_class_is_left_alone_and_ours_is_served() {
        let mut spec = lb();
        spec["loadBalancerClass"] = json!("example.com/other");
        assert_eq!(
            plan(&svc("web", spec.clone(), &["1.2.3.4"]), &[]),
            Plan::default()
        );
        spec["loadBalancerClass"] = json!(CLASS);
        assert_eq!(
            plan(&svc("web", spec, &[]), &[]).ingress,
            Some(vec![ip("192.0.2.10")])
        );
    }

    #[test]
    fn a_service_no_longer_a_load_balancer_has_its_ingress_cleared() {
        let s = svc("web", json!({"type": "ClusterIP"}), &["192.0.2.10"]);
        let p = plan(&s, &[]);
        assert_eq!(p.ingress, Some(vec![]));
        assert_eq!(p.event.unwrap().reason, "IPReleased");
        assert_eq!(
            plan(&svc("web", json!({"type": "ClusterIP"}), &[]), &[]),
            Plan::default()
        );
        // Its address is free for the next one at once.
        let next = plan(&svc("next", lb(), &[]), &[s]);
        assert_eq!(next.ingress, Some(vec![ip("192.0.2.10")]));
    }

    #[test]
    fn without_pools_the_ingress_is_the_ready_nodes_addresses() {
        let nodes = [ip("10.0.0.1"), ip("10.0.0.2")];
        let p = plan_with(&svc("web", lb(), &[]), &[], &nodes, &[]);
        assert_eq!(p.ingress, Some(nodes.to_vec()));
        assert_eq!(
            p.event.unwrap().message,
            "Assigned the Ready nodes' addresses [10.0.0.1, 10.0.0.2]"
        );
        let p = plan_with(&svc("web", lb(), &["10.0.0.1"]), &[], &nodes[1..], &[]);
        assert_eq!(p.ingress, Some(vec![ip("10.0.0.2")]));
        let p = plan_with(&svc("web", lb(), &["10.0.0.1"]), &[], &[], &[]);
        assert_eq!((p.ingress, p.event), (Some(vec![]), None));
    }

    #[test]
    fn node_addresses_give_way_to_a_pool_address_once_pools_exist() {
        let p = plan(&svc("web", lb(), &["10.0.0.1"]), &[]);
        assert_eq!(p.ingress, Some(vec![ip("192.0.2.10")]));
    }

    #[test]
    fn ingress_entries_carry_ip_mode_vip() {
        let i = ingress_of(&[ip("192.0.2.10")]);
        assert_eq!(i[0].ip.as_deref(), Some("192.0.2.10"));
        assert_eq!(i[0].ip_mode.as_deref(), Some("VIP"));
    }
}
