//! Answering one question from the record table ([`Records`]), as CoreDNS does: a name that
//! exists without the asked type (AAAA of an IPv4 Service, any type of an empty non-terminal
//! such as `<ns>.svc.<domain>`) is NODATA; an unknown name under the domain is NXDOMAIN; both
//! carry the zone's SOA (`ns.dns.<domain>. hostmaster.<domain>.`) in the authority section.
//! CNAMEs inside the domain are followed, one outside it is left for the caller to chase.
//! Names outside the domain, and reverse names of addresses the table does not know, are
//! forwarded. The apex answers SOA and NS.
//!
//! Planner: pure, no I/O.

use core::net::Ipv4Addr;

use super::records::{
    Data, Lookup, Node, QueryType, Rcode, Record, Records, Reply, Soa, TTL, Zone,
};

/// CNAMEs followed inside the domain before giving up (CoreDNS stops at 8 records).
const MAX_CHAIN: usize = 8;

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
