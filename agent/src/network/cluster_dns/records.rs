//! The cluster's DNS records, computed whole from a snapshot of Services and EndpointSlices,
//! and the answer to one question, as CoreDNS's `kubernetes` plugin gives them (with `pods
//! insecure` and `fallthrough in-addr.arpa`, the stock Corefile):
//!
//! * `<svc>.<ns>.svc.<domain>`: A = the ClusterIP; for a headless Service (`clusterIP: None`)
//!   every served endpoint's address (no served endpoint: the name does not exist); an
//!   ExternalName Service is a CNAME to its `externalName`.
//! * `<host>.<svc>.<ns>.svc.<domain>`: A = that endpoint's address, where `host` is the
//!   endpoint's `hostname` (set for pods whose `subdomain` is the Service) or its address with
//!   dashes (`10-42-0-5`).
//! * SRV `_<port>._<proto>.<svc>.<ns>.svc.<domain>` for named ports, and SRV on the Service's
//!   own name for all of them: the target is the Service's name (ClusterIP) or each endpoint's
//!   name (headless, with the endpoint's port); priority 0, weight `100 / n` (CoreDNS's), the
//!   targets' addresses in the additional section.
//! * PTR `d.c.b.a.in-addr.arpa` for ClusterIPs and served endpoint addresses; other reverse
//!   names are forwarded.
//! * `<a-b-c-d>.<ns>.pod.<domain>`: A = `a.b.c.d`, unverified.
//!
//! An endpoint is served when it is ready (`ready` unset counts as ready, as the API says) or
//! its Service has `publishNotReadyAddresses`. Every record's TTL is [`TTL`]. How a question
//! is answered from the table (NODATA, NXDOMAIN, forwarding) is in [`super::answers`].
//!
//! Planner: pure, no I/O.

use core::net::Ipv4Addr;
use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::network::service_state::{ServiceState, named_spec};

/// The TTL of every record and of negative answers (CoreDNS's default `ttl`).
pub const TTL: u32 = 5;
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// The question's type, as far as the answers differ by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryType {
    A,
    Aaaa,
    Cname,
    Srv,
    Ptr,
    Ns,
    Soa,
    Any,
    /// Any other type: names that exist have no data of it.
    Other,
}

/// The zone's SOA (CoreDNS's shape: refresh 7200, retry 1800, expire 86400, minimum = TTL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Soa {
    pub mname: String,
    pub rname: String,
    pub serial: u32,
    pub refresh: i32,
    pub retry: i32,
    pub expire: i32,
    pub minimum: u32,
}

/// A record's data. Names are absolute, written without the final dot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Data {
    A(Ipv4Addr),
    Cname(String),
    Srv {
        priority: u16,
        weight: u16,
        port: u16,
        target: String,
    },
    Ptr(String),
    Ns(String),
    Soa(Soa),
}

/// One resource record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub name: String,
    pub ttl: u32,
    pub data: Data,
}

/// The response code of an authoritative answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rcode {
    NoError,
    NxDomain,
}

/// An authoritative answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub rcode: Rcode,
    pub answers: Vec<Record>,
    pub additionals: Vec<Record>,
    /// The SOA of a negative answer (NXDOMAIN or NODATA); empty otherwise.
    pub authority: Vec<Record>,
    /// The last CNAME points outside the domain: the caller resolves this name (for the
    /// question's type) upstream and appends the answers, as CoreDNS does for ExternalName.
    pub chase: Option<String>,
}

/// What to do with a question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// Not a cluster name: ask the host's resolvers.
    Forward,
    /// A cluster name, but the Services have not been listed yet: SERVFAIL (the client tries
    /// again), not a false NXDOMAIN that it would cache.
    Unavailable,
    Answer(Reply),
}

/// Where the records are published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Zone {
    /// The cluster domain (`cluster.local`), lower case, without the final dot.
    pub domain: String,
    /// The SOA serial: CoreDNS uses the time (Unix seconds) of the last change it saw.
    pub serial: u32,
    /// The server's own address: the A record of `ns.dns.<domain>`, the NS of the apex.
    pub nameserver: Option<Ipv4Addr>,
}

/// What one name holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Node {
    pub(super) a: BTreeSet<Ipv4Addr>,
    pub(super) cname: Option<String>,
    /// `(port, target)`, in order, without duplicates.
    pub(super) srv: Vec<(u16, String)>,
}

impl Node {
    fn add_srv(&mut self, port: u16, target: &str) {
        if !self.srv.iter().any(|(p, t)| *p == port && t == target) {
            self.srv.push((port, target.to_string()));
        }
    }
}

/// Every cluster name, ready to answer questions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Records {
    pub(super) zone: Zone,
    /// Made from a listed snapshot (see [`ServiceState::synced`]).
    pub(super) synced: bool,
    pub(super) names: BTreeMap<String, Node>,
    /// Names with nothing of their own but names below them (`<ns>.svc.<domain>`,
    /// `_tcp.<svc>…`): NODATA, not NXDOMAIN.
    pub(super) interior: BTreeSet<String>,
    pub(super) reverse: BTreeMap<Ipv4Addr, BTreeSet<String>>,
}

/// A port as SRV names it: `(name, protocol, number)`, both lower case.
struct NamedPort {
    name: String,
    protocol: String,
    port: u16,
}

/// An endpoint address that DNS publishes, with its name under the Service.
struct Served {
    ip: Ipv4Addr,
    host: String,
    ports: Vec<NamedPort>,
}

fn protocol(p: Option<&str>) -> String {
    p.unwrap_or("TCP").to_ascii_lowercase()
}

fn is_ready(e: &k8s_openapi::api::discovery::v1::Endpoint) -> bool {
    e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true)
}

/// The served endpoint addresses of every Service, by `namespace/name`.
fn served_endpoints(
    services: &BTreeMap<String, Service>,
    slices: &BTreeMap<String, EndpointSlice>,
) -> BTreeMap<String, Vec<Served>> {
    let mut out: BTreeMap<String, Vec<Served>> = BTreeMap::new();
    for slice in slices.values() {
        if slice.address_type != "IPv4" {
            continue;
        }
        let ns = slice.metadata.namespace.as_deref().unwrap_or_default();
        let Some(svc) = slice
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(SERVICE_NAME_LABEL))
        else {
            continue;
        };
        let key = format!("{ns}/{svc}");
        let Some(service) = services.get(&key) else {
            continue;
        };
        let publish_not_ready = service
            .spec
            .as_ref()
            .and_then(|s| s.publish_not_ready_addresses)
            .unwrap_or(false);
        let ports = || -> Vec<NamedPort> {
            slice
                .ports
                .iter()
                .flatten()
                .filter_map(|p| {
                    Some(NamedPort {
                        name: p.name.as_deref().unwrap_or_default().to_ascii_lowercase(),
                        protocol: protocol(p.protocol.as_deref()),
                        port: u16::try_from(p.port?).ok()?,
                    })
                })
                .collect()
        };
        let list = out.entry(key).or_default();
        for e in &slice.endpoints {
            if !(publish_not_ready || is_ready(e)) {
                continue;
            }
            for ip in e
                .addresses
                .iter()
                .filter_map(|a| a.parse::<Ipv4Addr>().ok())
            {
                if list.iter().any(|s| s.ip == ip) {
                    continue;
                }
                let host = match e.hostname.as_deref() {
                    Some(h) if !h.is_empty() => h.to_ascii_lowercase(),
                    _ => ip.to_string().replace('.', "-"),
                };
                list.push(Served {
                    ip,
                    host,
                    ports: ports(),
                });
            }
        }
    }
    out
}

/// The records of a snapshot.
pub fn plan_records(state: &ServiceState, zone: Zone) -> Records {
    let mut names: BTreeMap<String, Node> = BTreeMap::new();
    let mut reverse: BTreeMap<Ipv4Addr, BTreeSet<String>> = BTreeMap::new();
    let mut endpoints = served_endpoints(&state.services, &state.slices);
    for (key, svc) in &state.services {
        let Some((ns, name, spec)) = named_spec(svc) else {
            continue;
        };
        let fqdn = format!("{name}.{ns}.svc.{}", zone.domain).to_ascii_lowercase();
        if spec.type_.as_deref() == Some("ExternalName") {
            let target = spec
                .external_name
                .as_deref()
                .unwrap_or_default()
                .trim_end_matches('.')
                .to_ascii_lowercase();
            // An IP address is no alias; CoreDNS leaves such a Service out.
            if !target.is_empty() && target.parse::<core::net::IpAddr>().is_err() {
                names.entry(fqdn).or_default().cname = Some(target);
            }
            continue;
        }
        let served = endpoints.remove(key).unwrap_or_default();
        let headless = spec.cluster_ip.as_deref() == Some("None");
        for e in &served {
            let host = format!("{}.{fqdn}", e.host);
            let node = names.entry(host.clone()).or_default();
            node.a.insert(e.ip);
            for p in &e.ports {
                node.add_srv(p.port, &host);
            }
            reverse.entry(e.ip).or_default().insert(host);
        }
        if headless {
            for e in &served {
                let host = format!("{}.{fqdn}", e.host);
                names.entry(fqdn.clone()).or_default().a.insert(e.ip);
                for p in &e.ports {
                    names
                        .entry(fqdn.clone())
                        .or_default()
                        .add_srv(p.port, &host);
                    if !p.name.is_empty() {
                        let srv = format!("_{}._{}.{fqdn}", p.name, p.protocol);
                        names.entry(srv).or_default().add_srv(p.port, &host);
                    }
                }
            }
            continue;
        }
        let ips: Vec<Ipv4Addr> = match &spec.cluster_ips {
            Some(list) if !list.is_empty() => list.iter().filter_map(|i| i.parse().ok()).collect(),
            _ => spec
                .cluster_ip
                .iter()
                .filter_map(|i| i.parse().ok())
                .collect(),
        };
        if ips.is_empty() {
            // Not allocated yet (or IPv6 only): nothing to say in IPv4.
            continue;
        }
        let node = names.entry(fqdn.clone()).or_default();
        node.a.extend(ips.iter().copied());
        let mut named = Vec::new();
        for p in spec.ports.iter().flatten() {
            let Ok(port) = u16::try_from(p.port) else {
                continue;
            };
            node.add_srv(port, &fqdn);
            if let Some(pname) = p.name.as_deref().filter(|n| !n.is_empty()) {
                let proto = protocol(p.protocol.as_deref());
                named.push((
                    format!("_{pname}._{proto}.{fqdn}").to_ascii_lowercase(),
                    port,
                ));
            }
        }
        for (srv, port) in named {
            names.entry(srv).or_default().add_srv(port, &fqdn);
        }
        for ip in ips {
            reverse.entry(ip).or_default().insert(fqdn.clone());
        }
    }
    if let Some(ip) = zone.nameserver {
        names
            .entry(format!("ns.dns.{}", zone.domain))
            .or_default()
            .a
            .insert(ip);
    }
    let mut interior = BTreeSet::new();
    let suffix = format!(".{}", zone.domain);
    for name in names.keys() {
        let mut rest = name.as_str();
        while let Some((_, parent)) = rest.split_once('.') {
            if !parent.ends_with(&suffix) {
                break;
            }
            interior.insert(parent.to_string());
            rest = parent;
        }
    }
    Records {
        zone,
        synced: state.synced,
        names,
        interior,
        reverse,
    }
}
