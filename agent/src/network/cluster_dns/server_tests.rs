//! The real server in-process: hickory's client asks it over UDP and TCP on 127.0.0.1, and
//! forwarded names reach a fake upstream (hickory's in-memory zone behind its own server).

use std::net::{Ipv4Addr, SocketAddr};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use hickory_resolver::net::client::{Client, ClientHandle};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::net::tcp::TcpClientStream;
use hickory_resolver::net::udp::UdpClientStream;
use hickory_server::Server;
use hickory_server::proto::op::{DnsResponse, ResponseCode};
use hickory_server::proto::rr::rdata::{A, SOA};
use hickory_server::proto::rr::{DNSClass, LowerName, Name, RData, Record, RecordType};
use hickory_server::store::in_memory::InMemoryZoneHandler;
use hickory_server::zone_handler::{AxfrPolicy, Catalog, ZoneType};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::follow;
use super::records::{Zone, plan_records};
use super::records_tests::{cluster_ip, external, headless, slice, state};
use super::server::{Forwarder, Handler, Listeners, serve, upstreams};
use crate::network::service_state::ServiceState;

fn n(s: &str) -> Name {
    Name::from_str(s).expect("a valid name")
}

/// A server for `example.test.` (one A record) on 127.0.0.1, as the host's resolver would be.
async fn fake_upstream(shutdown: &CancellationToken) -> SocketAddr {
    let origin = n("example.test.");
    let mut zone = InMemoryZoneHandler::<TokioRuntimeProvider>::empty(
        origin.clone(),
        ZoneType::Primary,
        AxfrPolicy::Deny,
    );
    let soa = SOA::new(
        n("ns.example.test."),
        n("admin.example.test."),
        7,
        60,
        60,
        600,
        30,
    );
    zone.upsert_mut(Record::from_rdata(origin.clone(), 30, RData::SOA(soa)), 7);
    for (name, ip) in [
        ("www.example.test.", [192, 0, 2, 7]),
        ("db.example.test.", [192, 0, 2, 8]),
    ] {
        let a = RData::A(A(Ipv4Addr::from(ip)));
        zone.upsert_mut(Record::from_rdata(n(name), 30, a), 7);
    }
    let mut catalog = Catalog::new();
    catalog.upsert(LowerName::new(&origin), vec![Arc::new(zone)]);
    let udp = tokio::net::UdpSocket::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = udp.local_addr().expect("address");
    let mut server = Server::new(catalog);
    server.register_socket(udp);
    let stop = shutdown.clone();
    tokio::spawn(async move {
        stop.cancelled().await;
        let _ = server.shutdown_gracefully().await;
    });
    addr
}

/// The cluster of the record tables, served on 127.0.0.1 with `upstream` behind it; returns
/// the server's address and the sender of Service snapshots.
async fn cluster_dns(
    upstream: SocketAddr,
    shutdown: &CancellationToken,
) -> (SocketAddr, watch::Sender<Arc<ServiceState>>) {
    let services = vec![
        cluster_ip("default", "web", "10.43.0.20", &[("http", "TCP", 80)]),
        headless("default", "nginx", false),
        external("default", "db", "db.example.test"),
    ];
    let slices = vec![slice(
        "default",
        "nginx",
        "nginx-abc",
        ("web", 80),
        &[("10.42.0.5", Some("web-0"), Some(true))],
    )];
    let (state_tx, state_rx) = watch::channel(Arc::new(state(services, slices)));
    let zone = Zone {
        domain: "cluster.local".into(),
        serial: 0,
        nameserver: None,
    };
    let (tx, rx) = watch::channel(Arc::new(plan_records(
        &ServiceState::default(),
        zone.clone(),
    )));
    tokio::spawn(follow(state_rx, tx, zone, shutdown.clone()));
    let listeners = Listeners::bind("127.0.0.1:0".parse().expect("address"))
        .await
        .expect("bind");
    let addr = listeners.local_addr().expect("address");
    let handler = Handler::new(rx, Forwarder::new(&[upstream]));
    tokio::spawn(serve(listeners, handler, shutdown.clone()));
    (addr, state_tx)
}

/// A cluster DNS in front of a fake upstream, and a UDP client of it: the token that stops
/// both, the server's address, the sender of Service snapshots.
async fn served() -> (
    CancellationToken,
    SocketAddr,
    watch::Sender<Arc<ServiceState>>,
    Client<TokioRuntimeProvider>,
) {
    let shutdown = CancellationToken::new();
    let upstream = fake_upstream(&shutdown).await;
    let (addr, state_tx) = cluster_dns(upstream, &shutdown).await;
    let client = udp_client(addr).await;
    (shutdown, addr, state_tx, client)
}

async fn udp_client(addr: SocketAddr) -> Client<TokioRuntimeProvider> {
    let stream = UdpClientStream::builder(addr, TokioRuntimeProvider::default()).build();
    let (client, bg) = Client::<TokioRuntimeProvider>::from_sender(stream);
    tokio::spawn(bg);
    client
}

async fn ask(client: &mut Client<TokioRuntimeProvider>, name: &str, t: RecordType) -> DnsResponse {
    client
        .query(n(name), DNSClass::IN, t)
        .await
        .unwrap_or_else(|e| panic!("{name} {t}: {e}"))
}

fn answers(r: &DnsResponse) -> Vec<String> {
    r.answers
        .iter()
        .map(|a| format!("{} {}", a.record_type(), a.data))
        .collect()
}

#[tokio::test]
async fn the_server_answers_cluster_names_and_forwards_the_rest() {
    let (shutdown, addr, _state, mut c) = served().await;

    let r = ask(&mut c, "web.default.svc.cluster.local.", RecordType::A).await;
    assert_eq!(r.metadata.response_code, ResponseCode::NoError);
    assert!(r.metadata.authoritative);
    assert_eq!(answers(&r), ["A 10.43.0.20"]);
    assert_eq!(r.answers[0].ttl, 5);

    let r = ask(&mut c, "nginx.default.svc.cluster.local.", RecordType::A).await;
    assert_eq!(answers(&r), ["A 10.42.0.5"]);
    let pod = "web-0.nginx.default.svc.cluster.local.";
    let r = ask(&mut c, pod, RecordType::A).await;
    assert_eq!(answers(&r), ["A 10.42.0.5"]);

    let srv = "_http._tcp.web.default.svc.cluster.local.";
    let r = ask(&mut c, srv, RecordType::SRV).await;
    assert_eq!(answers(&r), ["SRV 0 100 80 web.default.svc.cluster.local."]);
    let extra: Vec<String> = r
        .additionals
        .iter()
        .map(|a| format!("{} {}", a.name, a.data))
        .collect();
    assert_eq!(extra, ["web.default.svc.cluster.local. 10.43.0.20"]);

    let r = ask(&mut c, "20.0.43.10.in-addr.arpa.", RecordType::PTR).await;
    assert_eq!(answers(&r), ["PTR web.default.svc.cluster.local."]);

    let r = ask(&mut c, "web.default.svc.cluster.local.", RecordType::AAAA).await;
    assert_eq!(r.metadata.response_code, ResponseCode::NoError);
    assert!(r.answers.is_empty());

    let r = ask(&mut c, "nope.default.svc.cluster.local.", RecordType::A).await;
    assert_eq!(r.metadata.response_code, ResponseCode::NXDomain);
    assert!(r.answers.is_empty());
    let soa: Vec<String> = r
        .authorities
        .iter()
        .map(|a| format!("{} {} {}", a.name, a.ttl, a.data))
        .collect();
    assert_eq!(soa.len(), 1, "{soa:?}");
    assert!(
        soa[0].starts_with("cluster.local. 5 ns.dns.cluster.local. hostmaster.cluster.local. "),
        "{soa:?}"
    );
    assert!(soa[0].ends_with(" 7200 1800 86400 5"), "{soa:?}");

    // Forwarded: an upstream name, its NXDOMAIN, and an ExternalName's target.
    let r = ask(&mut c, "www.example.test.", RecordType::A).await;
    assert_eq!(r.metadata.response_code, ResponseCode::NoError);
    assert!(!r.metadata.authoritative);
    assert_eq!(answers(&r), ["A 192.0.2.7"]);
    let r = ask(&mut c, "nope.example.test.", RecordType::A).await;
    assert_eq!(r.metadata.response_code, ResponseCode::NXDomain);
    let r = ask(&mut c, "db.default.svc.cluster.local.", RecordType::A).await;
    assert_eq!(answers(&r), ["CNAME db.example.test.", "A 192.0.2.8"]);

    // TCP answers the same.
    let (connect, sender) = TcpClientStream::new(addr, None, None, TokioRuntimeProvider::default());
    let (mut tcp, bg) =
        Client::<TokioRuntimeProvider>::new(connect.await.expect("connect"), sender);
    tokio::spawn(bg);
    let r = ask(&mut tcp, "web.default.svc.cluster.local.", RecordType::A).await;
    assert_eq!(answers(&r), ["A 10.43.0.20"]);
    shutdown.cancel();
}

#[tokio::test]
async fn answers_follow_a_new_snapshot_within_a_second() {
    let (shutdown, _addr, state_tx, mut c) = served().await;
    let r = ask(&mut c, "web.default.svc.cluster.local.", RecordType::A).await;
    assert_eq!(answers(&r), ["A 10.43.0.20"]);

    state_tx.send_replace(Arc::new(state(
        vec![cluster_ip(
            "default",
            "api",
            "10.43.0.30",
            &[("http", "TCP", 80)],
        )],
        Vec::new(),
    )));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
    loop {
        let gone = ask(&mut c, "web.default.svc.cluster.local.", RecordType::A).await;
        let new = ask(&mut c, "api.default.svc.cluster.local.", RecordType::A).await;
        if gone.metadata.response_code == ResponseCode::NXDomain
            && answers(&new) == ["A 10.43.0.30"]
        {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{gone:?} {new:?}");
        tokio::task::yield_now().await;
    }
    shutdown.cancel();
}

#[tokio::test]
async fn before_the_first_listing_cluster_names_fail_and_others_are_forwarded() {
    let (shutdown, _addr, state_tx, mut c) = served().await;
    state_tx.send_replace(Arc::new(ServiceState::default()));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
    loop {
        let r = ask(&mut c, "web.default.svc.cluster.local.", RecordType::A).await;
        if r.metadata.response_code == ResponseCode::ServFail {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{r:?}");
        tokio::task::yield_now().await;
    }
    let r = ask(&mut c, "www.example.test.", RecordType::A).await;
    assert_eq!(answers(&r), ["A 192.0.2.7"]);
    shutdown.cancel();
}

#[test]
fn upstreams_are_the_hosts_name_servers_without_the_cluster_dns_itself() {
    let got = upstreams(
        "nameserver 10.42.0.1\nnameserver 10.255.255.53\nnameserver 0.0.0.0\nnameserver ::1\nnameserver bogus\n",
        "10.42.0.1".parse().expect("ip"),
    );
    let want: Vec<SocketAddr> = vec![
        "10.255.255.53:53".parse().expect("address"),
        "[::1]:53".parse().expect("address"),
    ];
    assert_eq!(got, want);
}
