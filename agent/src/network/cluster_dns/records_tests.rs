//! Table tests of the cluster DNS records (records.rs).

use core::net::Ipv4Addr;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::records::{Data, Lookup, QueryType, Rcode, Records, Zone, plan_records};
use crate::network::service_state::ServiceState;

fn meta(ns: &str, name: &str) -> ObjectMeta {
    ObjectMeta {
        namespace: Some(ns.into()),
        name: Some(name.into()),
        ..Default::default()
    }
}

fn service(ns: &str, name: &str, spec: ServiceSpec) -> Service {
    Service {
        metadata: meta(ns, name),
        spec: Some(spec),
        ..Default::default()
    }
}

fn ports(list: &[(&str, &str, i32)]) -> Option<Vec<ServicePort>> {
    Some(
        list.iter()
            .map(|(name, proto, port)| ServicePort {
                name: (!name.is_empty()).then(|| name.to_string()),
                protocol: Some(proto.to_string()),
                port: *port,
                ..Default::default()
            })
            .collect(),
    )
}

pub(super) fn cluster_ip(ns: &str, name: &str, ip: &str, p: &[(&str, &str, i32)]) -> Service {
    service(
        ns,
        name,
        ServiceSpec {
            cluster_ip: Some(ip.into()),
            cluster_ips: Some(vec![ip.into()]),
            ports: ports(p),
            ..Default::default()
        },
    )
}

pub(super) fn headless(ns: &str, name: &str, publish_not_ready: bool) -> Service {
    service(
        ns,
        name,
        ServiceSpec {
            cluster_ip: Some("None".into()),
            ports: ports(&[("web", "TCP", 80)]),
            publish_not_ready_addresses: publish_not_ready.then_some(true),
            ..Default::default()
        },
    )
}

pub(super) fn external(ns: &str, name: &str, target: &str) -> Service {
    service(
        ns,
        name,
        ServiceSpec {
            type_: Some("ExternalName".into()),
            external_name: Some(target.into()),
            ..Default::default()
        },
    )
}

/// An endpoint: address, hostname, `ready` condition.
pub(super) type Ep<'a> = (&'a str, Option<&'a str>, Option<bool>);

pub(super) fn slice(
    ns: &str,
    svc: &str,
    name: &str,
    port: (&str, i32),
    endpoints: &[Ep],
) -> EndpointSlice {
    let mut m = meta(ns, name);
    m.labels = Some(BTreeMap::from([(
        "kubernetes.io/service-name".to_string(),
        svc.to_string(),
    )]));
    EndpointSlice {
        metadata: m,
        address_type: "IPv4".into(),
        ports: Some(vec![EndpointPort {
            name: Some(port.0.into()),
            port: Some(port.1),
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        endpoints: endpoints
            .iter()
            .map(|(ip, host, ready)| Endpoint {
                addresses: vec![ip.to_string()],
                hostname: host.map(str::to_string),
                conditions: Some(EndpointConditions {
                    ready: *ready,
                    ..Default::default()
                }),
                ..Default::default()
            })
            .collect(),
    }
}

pub(super) fn state(services: Vec<Service>, slices: Vec<EndpointSlice>) -> ServiceState {
    let key = |m: &ObjectMeta| {
        format!(
            "{}/{}",
            m.namespace.as_deref().unwrap_or_default(),
            m.name.as_deref().unwrap_or_default()
        )
    };
    ServiceState {
        services: services
            .into_iter()
            .map(|s| (key(&s.metadata), s))
            .collect(),
        slices: slices.into_iter().map(|s| (key(&s.metadata), s)).collect(),
        synced: true,
    }
}

fn zone() -> Zone {
    Zone {
        domain: "cluster.local".into(),
        serial: 1_700_000_000,
        nameserver: Some(Ipv4Addr::new(10, 42, 0, 1)),
    }
}

/// The cluster of the tables: a ClusterIP Service `web` (ports `http`/TCP 80 and an unnamed
/// 9090), the StatefulSet page's headless `nginx` with `web-0` ready, `web-1` not ready and an
/// endpoint without hostname; a headless `peers` publishing not-ready addresses; an
/// ExternalName `db` (outside the domain) and `alias` (inside it); a headless `empty` with no
/// endpoints; a slice for a Service that does not exist.
fn records() -> Records {
    let services = vec![
        cluster_ip(
            "default",
            "web",
            "10.43.0.20",
            &[("http", "TCP", 80), ("", "TCP", 9090)],
        ),
        headless("default", "nginx", false),
        headless("shop", "peers", true),
        headless("default", "empty", false),
        external("default", "db", "DB.Example.com."),
        external("default", "alias", "web.default.svc.cluster.local"),
    ];
    let slices = vec![
        slice(
            "default",
            "web",
            "web-abc",
            ("http", 8080),
            &[("10.42.0.7", None, Some(true))],
        ),
        slice(
            "default",
            "nginx",
            "nginx-abc",
            ("web", 80),
            &[
                ("10.42.0.5", Some("web-0"), Some(true)),
                ("10.42.0.6", Some("web-1"), Some(false)),
                ("10.42.0.9", None, None),
            ],
        ),
        slice(
            "shop",
            "peers",
            "peers-abc",
            ("web", 80),
            &[("10.42.1.5", Some("p-0"), Some(false))],
        ),
        slice(
            "default",
            "gone",
            "gone-abc",
            ("web", 80),
            &[("10.42.0.8", None, Some(true))],
        ),
    ];
    plan_records(&state(services, slices), zone())
}

/// A reply in one line: `NXDOMAIN`, `NODATA`, `FORWARD`, or the answers (`; +` additionals),
/// with `(soa)` when the authority section holds the SOA and `-> name` for a chase.
fn show(l: &Lookup) -> String {
    let r = match l {
        Lookup::Forward => return "FORWARD".into(),
        Lookup::Unavailable => return "UNAVAILABLE".into(),
        Lookup::Answer(r) => r,
    };
    let data = |d: &Data| match d {
        Data::A(ip) => format!("A {ip}"),
        Data::Cname(t) => format!("CNAME {t}"),
        Data::Srv {
            priority,
            weight,
            port,
            target,
        } => format!("SRV {priority} {weight} {port} {target}"),
        Data::Ptr(t) => format!("PTR {t}"),
        Data::Ns(t) => format!("NS {t}"),
        Data::Soa(s) => format!("SOA {} {}", s.mname, s.rname),
    };
    let mut out = match (r.rcode, r.answers.is_empty()) {
        (Rcode::NxDomain, _) => "NXDOMAIN".to_string(),
        (Rcode::NoError, true) => "NODATA".to_string(),
        (Rcode::NoError, false) => r
            .answers
            .iter()
            .map(|a| data(&a.data))
            .collect::<Vec<_>>()
            .join(", "),
    };
    if !r.additionals.is_empty() {
        let extra: Vec<String> = r
            .additionals
            .iter()
            .map(|a| format!("{} {}", a.name, data(&a.data)))
            .collect();
        out.push_str(&format!("; + {}", extra.join(", ")));
    }
    if !r.authority.is_empty() {
        out.push_str(" (soa)");
    }
    if let Some(c) = &r.chase {
        out.push_str(&format!(" -> {c}"));
    }
    out
}

fn check(records: &Records, table: &[(&str, QueryType, &str)]) {
    for (name, qtype, want) in table {
        assert_eq!(
            show(&records.lookup(name, *qtype)),
            *want,
            "{name} {qtype:?}"
        );
    }
}

use QueryType::*;

#[test]
fn a_cluster_ip_service_answers_with_its_cluster_ip() {
    check(
        &records(),
        &[
            ("web.default.svc.cluster.local", A, "A 10.43.0.20"),
            ("web.default.svc.cluster.local.", A, "A 10.43.0.20"),
            ("WEB.Default.SVC.cluster.local", A, "A 10.43.0.20"),
            ("web.default.svc.cluster.local", Aaaa, "NODATA (soa)"),
            ("web.default.svc.cluster.local", Other, "NODATA (soa)"),
            // Its endpoint has a name too (the dashed address), as CoreDNS gives it.
            ("10-42-0-7.web.default.svc.cluster.local", A, "A 10.42.0.7"),
        ],
    );
}

#[test]
fn a_headless_service_answers_with_its_served_endpoints() {
    check(
        &records(),
        &[
            // web-1 is not ready; the endpoint without a condition counts as ready.
            (
                "nginx.default.svc.cluster.local",
                A,
                "A 10.42.0.5, A 10.42.0.9",
            ),
            ("web-0.nginx.default.svc.cluster.local", A, "A 10.42.0.5"),
            ("web-1.nginx.default.svc.cluster.local", A, "NXDOMAIN (soa)"),
            (
                "10-42-0-9.nginx.default.svc.cluster.local",
                A,
                "A 10.42.0.9",
            ),
            (
                "web-0.nginx.default.svc.cluster.local",
                Aaaa,
                "NODATA (soa)",
            ),
            // publishNotReadyAddresses: the not-ready endpoint is published.
            ("peers.shop.svc.cluster.local", A, "A 10.42.1.5"),
            ("p-0.peers.shop.svc.cluster.local", A, "A 10.42.1.5"),
            // No served endpoint: the name does not exist (CoreDNS's answer).
            ("empty.default.svc.cluster.local", A, "NXDOMAIN (soa)"),
        ],
    );
}

#[test]
fn srv_records_name_the_service_or_each_endpoint() {
    check(
        &records(),
        &[
            (
                "_http._tcp.web.default.svc.cluster.local",
                Srv,
                "SRV 0 100 80 web.default.svc.cluster.local; \
                 + web.default.svc.cluster.local A 10.43.0.20",
            ),
            (
                "web.default.svc.cluster.local",
                Srv,
                "SRV 0 50 80 web.default.svc.cluster.local, \
                 SRV 0 50 9090 web.default.svc.cluster.local; \
                 + web.default.svc.cluster.local A 10.43.0.20",
            ),
            (
                "_web._tcp.nginx.default.svc.cluster.local",
                Srv,
                "SRV 0 50 80 web-0.nginx.default.svc.cluster.local, \
                 SRV 0 50 80 10-42-0-9.nginx.default.svc.cluster.local; \
                 + web-0.nginx.default.svc.cluster.local A 10.42.0.5, \
                 10-42-0-9.nginx.default.svc.cluster.local A 10.42.0.9",
            ),
            (
                "web-0.nginx.default.svc.cluster.local",
                Srv,
                "SRV 0 100 80 web-0.nginx.default.svc.cluster.local; \
                 + web-0.nginx.default.svc.cluster.local A 10.42.0.5",
            ),
            (
                "_http._udp.web.default.svc.cluster.local",
                Srv,
                "NXDOMAIN (soa)",
            ),
            (
                "_nope._tcp.web.default.svc.cluster.local",
                Srv,
                "NXDOMAIN (soa)",
            ),
            // The name between exists (it has names below it).
            ("_tcp.web.default.svc.cluster.local", Srv, "NODATA (soa)"),
            (
                "_http._tcp.web.default.svc.cluster.local",
                A,
                "NODATA (soa)",
            ),
        ],
    );
}

#[test]
fn external_names_are_cnames_chased_outside_the_domain_and_followed_inside_it() {
    check(
        &records(),
        &[
            (
                "db.default.svc.cluster.local",
                A,
                "CNAME db.example.com -> db.example.com",
            ),
            (
                "db.default.svc.cluster.local",
                Aaaa,
                "CNAME db.example.com -> db.example.com",
            ),
            (
                "db.default.svc.cluster.local",
                Cname,
                "CNAME db.example.com",
            ),
            (
                "alias.default.svc.cluster.local",
                A,
                "CNAME web.default.svc.cluster.local, A 10.43.0.20",
            ),
        ],
    );
}

#[test]
fn reverse_names_of_cluster_ips_and_endpoints_are_answered_others_forwarded() {
    check(
        &records(),
        &[
            (
                "20.0.43.10.in-addr.arpa",
                Ptr,
                "PTR web.default.svc.cluster.local",
            ),
            (
                "5.0.42.10.in-addr.arpa.",
                Ptr,
                "PTR web-0.nginx.default.svc.cluster.local",
            ),
            (
                "9.0.42.10.in-addr.arpa",
                Ptr,
                "PTR 10-42-0-9.nginx.default.svc.cluster.local",
            ),
            // Not ready, not published; a slice of a missing Service publishes nothing.
            ("6.0.42.10.in-addr.arpa", Ptr, "FORWARD"),
            ("8.0.42.10.in-addr.arpa", Ptr, "FORWARD"),
            ("20.0.43.10.in-addr.arpa", A, "FORWARD"),
            ("1.1.168.192.in-addr.arpa", Ptr, "FORWARD"),
        ],
    );
}

#[test]
fn unknown_cluster_names_are_nxdomain_and_names_between_are_nodata() {
    check(
        &records(),
        &[
            ("nope.default.svc.cluster.local", A, "NXDOMAIN (soa)"),
            ("gone.default.svc.cluster.local", A, "NXDOMAIN (soa)"),
            ("a.b.c.web.default.svc.cluster.local", A, "NXDOMAIN (soa)"),
            // The search path's expansions of an outside name end here, quickly.
            ("example.com.default.svc.cluster.local", A, "NXDOMAIN (soa)"),
            ("nope.cluster.local", A, "NXDOMAIN (soa)"),
            ("default.svc.cluster.local", A, "NODATA (soa)"),
            ("empty-namespace.svc.cluster.local", A, "NODATA (soa)"),
            ("svc.cluster.local", A, "NODATA (soa)"),
            ("cluster.local", A, "NODATA (soa)"),
            (
                "cluster.local",
                Soa,
                "SOA ns.dns.cluster.local hostmaster.cluster.local",
            ),
            (
                "cluster.local",
                Ns,
                "NS ns.dns.cluster.local; + ns.dns.cluster.local A 10.42.0.1",
            ),
            ("ns.dns.cluster.local", A, "A 10.42.0.1"),
        ],
    );
}

#[test]
fn pod_names_carry_their_address() {
    check(
        &records(),
        &[
            ("10-42-0-99.default.pod.cluster.local", A, "A 10.42.0.99"),
            ("10-42-0-99.default.pod.cluster.local", Aaaa, "NODATA (soa)"),
            ("not-an-ip.default.pod.cluster.local", A, "NXDOMAIN (soa)"),
            ("default.pod.cluster.local", A, "NODATA (soa)"),
        ],
    );
}

#[test]
fn names_outside_the_domain_are_forwarded() {
    check(
        &records(),
        &[
            ("example.com", A, "FORWARD"),
            ("cluster.local.example.com", A, "FORWARD"),
            ("xcluster.local", A, "FORWARD"),
            ("", A, "FORWARD"),
        ],
    );
}

#[test]
fn the_negative_answers_carry_coredns_soa() {
    let r = records();
    let Lookup::Answer(reply) = r.lookup("nope.default.svc.cluster.local", A) else {
        panic!("not an answer");
    };
    assert_eq!(reply.authority.len(), 1);
    let soa = &reply.authority[0];
    assert_eq!(soa.name, "cluster.local");
    assert_eq!(soa.ttl, 5);
    let Data::Soa(s) = &soa.data else {
        panic!("{soa:?}");
    };
    assert_eq!(
        (s.serial, s.refresh, s.retry, s.expire, s.minimum),
        (1_700_000_000, 7200, 1800, 86400, 5)
    );
}

#[test]
fn answers_keep_the_case_asked_and_every_record_lives_five_seconds() {
    let Lookup::Answer(reply) = records().lookup("Web-0.NGINX.default.svc.cluster.local.", A)
    else {
        panic!("not an answer");
    };
    assert_eq!(
        reply.answers[0].name,
        "Web-0.NGINX.default.svc.cluster.local"
    );
    assert_eq!(reply.answers[0].ttl, 5);
}

#[test]
fn another_domain_is_served_instead() {
    let r = plan_records(
        &state(
            vec![cluster_ip("a", "b", "10.43.1.1", &[("p", "UDP", 53)])],
            Vec::new(),
        ),
        Zone {
            domain: "corp.internal".into(),
            serial: 1,
            nameserver: None,
        },
    );
    check(
        &r,
        &[
            ("b.a.svc.corp.internal", A, "A 10.43.1.1"),
            (
                "_p._udp.b.a.svc.corp.internal",
                Srv,
                "SRV 0 100 53 b.a.svc.corp.internal; + b.a.svc.corp.internal A 10.43.1.1",
            ),
            ("b.a.svc.cluster.local", A, "FORWARD"),
            ("corp.internal", Ns, "NS ns.dns.corp.internal"),
        ],
    );
}

#[test]
fn before_the_first_listing_cluster_names_are_unavailable_and_others_forwarded() {
    let mut unsynced = state(vec![cluster_ip("a", "b", "10.43.1.1", &[])], Vec::new());
    unsynced.synced = false;
    let r = plan_records(&unsynced, zone());
    check(
        &r,
        &[
            ("b.a.svc.cluster.local", A, "UNAVAILABLE"),
            ("cluster.local", Soa, "UNAVAILABLE"),
            ("1.1.43.10.in-addr.arpa", Ptr, "FORWARD"),
            ("example.com", A, "FORWARD"),
        ],
    );
}
