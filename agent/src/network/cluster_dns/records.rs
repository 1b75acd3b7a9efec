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
//! * A name that exists without the asked type (AAAA of an IPv4 Service, any type of an empty
//!   non-terminal such as `<ns>.svc.<domain>`) is NODATA; an unknown name under the domain is
//!   NXDOMAIN; both carry the zone's SOA (`ns.dns.<domain>. hostmaster.<domain>.`) in the
//!   authority section. Names outside the domain are forwarded.
//!
//! An endpoint is served when it is ready (`ready` unset counts as ready, as the API says) or
//! its Service has `publishNotReadyAddresses`. Every record's TTL is [`TTL`].
//!
//! Planner: pure, no I/O.

use core::net::Ipv4Addr;
use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::network::service_state::ServiceState;

/// The TTL of every record and of negative answers (CoreDNS's default `ttl`).
pub const TTL: u32 = 5;
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// CNAMEs followed inside the domain before giving up (CoreDNS stops at 8 records).
const MAX_CHAIN: usize = 8;

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
struct Node {
    a: BTreeSet<Ipv4Addr>,
    cname: Option<String>,
    /// `(port, target)`, in order, without duplicates.
    srv: Vec<(u16, String)>,
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
    zone: Zone,
    /// Made from a listed snapshot (see [`ServiceState::synced`]).
    synced: bool,
    names: BTreeMap<String, Node>,
    /// Names with nothing of their own but names below them (`<ns>.svc.<domain>`,
    /// `_tcp.<svc>…`): NODATA, not NXDOMAIN.
    interior: BTreeSet<String>,
    reverse: BTreeMap<Ipv4Addr, BTreeSet<String>>,
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
        let (Some(ns), Some(name), Some(spec)) = (
            svc.metadata.namespace.as_deref(),
            svc.metadata.name.as_deref(),
            svc.spec.as_ref(),
        ) else {
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

/// `d.c.b.a.in-addr.arpa` → `a.b.c.d`.
fn reverse_ip(name: &str) -> Option<Ipv4Addr> {
    let labels = name.strip_suffix(".in-addr.arpa")?;
    let octets: Vec<u8> = labels
        .split('.')
        .map(|l| l.parse::<u8>().ok())
        .collect::<Option<_>>()?;
    match octets.as_slice() {
        [d, c, b, a] => Some(Ipv4Addr::new(*a, *b, *c, *d)),
        _ => None,
    }
}

/// `10-42-0-5` → `10.42.0.5`.
fn dashed_ip(label: &str) -> Option<Ipv4Addr> {
    if label.matches('-').count() != 3 {
        return None;
    }
    label.replace('-', ".").parse().ok()
}

fn record(name: &str, data: Data) -> Record {
    Record {
        name: name.to_string(),
        ttl: TTL,
        data,
    }
}

impl Records {
    pub fn zone(&self) -> &Zone {
        &self.zone
    }

    /// The zone's SOA record.
    pub fn soa(&self) -> Record {
        let d = &self.zone.domain;
        record(
            d,
            Data::Soa(Soa {
                mname: format!("ns.dns.{d}"),
                rname: format!("hostmaster.{d}"),
                serial: self.zone.serial,
                refresh: 7200,
                retry: 1800,
                expire: 86400,
                minimum: TTL,
            }),
        )
    }

    fn negative(&self, rcode: Rcode) -> Lookup {
        Lookup::Answer(Reply {
            rcode,
            answers: Vec::new(),
            additionals: Vec::new(),
            authority: vec![self.soa()],
            chase: None,
        })
    }

    fn positive(&self, answers: Vec<Record>, additionals: Vec<Record>) -> Lookup {
        if answers.is_empty() {
            return self.negative(Rcode::NoError);
        }
        Lookup::Answer(Reply {
            rcode: Rcode::NoError,
            answers,
            additionals,
            authority: Vec::new(),
            chase: None,
        })
    }

    /// The answer to `qname`/`qtype`. `qname` is taken as absolute, with or without the
    /// final dot, in any case; answers are owned by `qname` as asked.
    pub fn lookup(&self, qname: &str, qtype: QueryType) -> Lookup {
        let asked = qname.trim_end_matches('.');
        let name = asked.to_ascii_lowercase();
        if let Some(ip) = reverse_ip(&name) {
            return match (self.reverse.get(&ip), qtype) {
                _ if !self.synced => Lookup::Forward,
                (Some(targets), QueryType::Ptr | QueryType::Any) => self.positive(
                    targets
                        .iter()
                        .map(|t| record(asked, Data::Ptr(t.clone())))
                        .collect(),
                    Vec::new(),
                ),
                _ => Lookup::Forward,
            };
        }
        let domain = &self.zone.domain;
        if name == *domain {
            return if self.synced {
                self.apex(asked, qtype)
            } else {
                Lookup::Unavailable
            };
        }
        let Some(relative) = name.strip_suffix(&format!(".{domain}")) else {
            return Lookup::Forward;
        };
        if !self.synced {
            return Lookup::Unavailable;
        }
        let labels: Vec<&str> = relative.split('.').collect();
        match labels.as_slice() {
            ["svc"] | [_, "svc"] | ["pod"] | [_, "pod"] => return self.negative(Rcode::NoError),
            [ip, _, "pod"] => {
                return match dashed_ip(ip) {
                    Some(ip) if matches!(qtype, QueryType::A | QueryType::Any) => {
                        self.positive(vec![record(asked, Data::A(ip))], Vec::new())
                    }
                    Some(_) => self.negative(Rcode::NoError),
                    None => self.negative(Rcode::NxDomain),
                };
            }
            _ => {}
        }
        let mut answers = Vec::new();
        let mut additionals = Vec::new();
        let mut owner = asked.to_string();
        let mut current = name;
        for _ in 0..MAX_CHAIN {
            let Some(node) = self.names.get(&current) else {
                if answers.is_empty() && !self.interior.contains(&current) {
                    return self.negative(Rcode::NxDomain);
                }
                break;
            };
            if let Some(target) = &node.cname {
                answers.push(record(&owner, Data::Cname(target.clone())));
                if qtype == QueryType::Cname {
                    break;
                }
                if !target.ends_with(&format!(".{domain}")) {
                    return Lookup::Answer(Reply {
                        rcode: Rcode::NoError,
                        answers,
                        additionals,
                        authority: Vec::new(),
                        chase: Some(target.clone()),
                    });
                }
                owner = target.clone();
                current = target.clone();
                continue;
            }
            let (a, extra) = self.node_answers(&owner, node, qtype);
            answers.extend(a);
            additionals.extend(extra);
            break;
        }
        self.positive(answers, additionals)
    }

    /// Answers (and additional records) of one node for a type other than CNAME.
    fn node_answers(
        &self,
        owner: &str,
        node: &Node,
        qtype: QueryType,
    ) -> (Vec<Record>, Vec<Record>) {
        let a = || node.a.iter().map(|ip| record(owner, Data::A(*ip)));
        match qtype {
            QueryType::A => (a().collect(), Vec::new()),
            QueryType::Srv => self.srv_answers(owner, node),
            QueryType::Any => {
                let (srv, extra) = self.srv_answers(owner, node);
                (a().chain(srv).collect(), extra)
            }
            _ => (Vec::new(), Vec::new()),
        }
    }

    /// SRV records with CoreDNS's weights (`100 / n`, at least 1) and the targets' addresses.
    fn srv_answers(&self, owner: &str, node: &Node) -> (Vec<Record>, Vec<Record>) {
        let n = node.srv.len().max(1);
        let weight = u16::try_from(100 / n).unwrap_or(1).max(1);
        let mut answers = Vec::new();
        let mut extra: Vec<Record> = Vec::new();
        for (port, target) in &node.srv {
            answers.push(record(
                owner,
                Data::Srv {
                    priority: 0,
                    weight,
                    port: *port,
                    target: target.clone(),
                },
            ));
            for ip in self.names.get(target).map(|n| &n.a).into_iter().flatten() {
                let r = record(target, Data::A(*ip));
                if !extra.contains(&r) {
                    extra.push(r);
                }
            }
        }
        (answers, extra)
    }

    /// The zone's own name: SOA and NS; nothing else.
    fn apex(&self, asked: &str, qtype: QueryType) -> Lookup {
        let ns = format!("ns.dns.{}", self.zone.domain);
        let glue = || match self.zone.nameserver {
            Some(ip) => vec![record(&ns, Data::A(ip))],
            None => Vec::new(),
        };
        match qtype {
            QueryType::Soa => {
                let mut soa = self.soa();
                soa.name = asked.to_string();
                self.positive(vec![soa], Vec::new())
            }
            QueryType::Ns => self.positive(vec![record(asked, Data::Ns(ns.clone()))], glue()),
            _ => self.negative(Rcode::NoError),
        }
    }
}
