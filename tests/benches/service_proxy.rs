//! Service proxy benchmark (prints figures, never fails on them): how long an endpoint change
//! takes to reach the node's nat table, with S Services of E endpoints each (selector-less
//! Services with their own EndpointSlices, so no pods are needed), measured from the slice's
//! PUT returning to `iptables-save -t nat` showing the new endpoint's DNAT rule. The same
//! measurement with 10 Services in the same run is the baseline; the time one `iptables-save`
//! takes at full size is printed too (it bounds the measurement's resolution).
//! `BERTH_BENCH_SERVICES` (default 1000), `BERTH_BENCH_ENDPOINTS` (default 10),
//! `BERTH_BENCH_CHANGES` (default 40); `BERTH_AGENT_BIN` / `BERTH_CONTROLLER_BIN` pick the
//! binaries.

use std::time::{Duration, Instant};

use berth_tests::agent::agent_binary;
use berth_tests::bench::{built, env_usize};
use berth_tests::client::Req;
use berth_tests::host::tool_ok;
use berth_tests::stats::Samples;
use berth_tests::wait::ok_if;
use berth_tests::{Cluster, secs};
use serde_json::{Value, json};

const NS: &str = "bench";

fn service(i: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": format!("svc-{i:04}"), "namespace": NS},
        "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}})
}

/// Endpoint `j` of service `i` in generation `g`: generation 0 in 10.200.0.0/14, each later
/// generation (one change) an address of its own in 10.210.0.0/15, so a rule naming it is the
/// change's and nothing else's.
fn address(i: usize, j: usize, g: usize) -> String {
    if g == 0 {
        let n = u32::try_from(i * 64 + j).unwrap_or(0) % (1 << 18);
        let base = u32::from(std::net::Ipv4Addr::new(10, 200, 0, 0));
        std::net::Ipv4Addr::from(base + n).to_string()
    } else {
        format!("10.{}.{}.{}", 210 + g / 256, g % 256, i % 250 + 1)
    }
}

fn slice(i: usize, endpoints: usize, first: &str) -> Value {
    let eps: Vec<Value> = (0..endpoints)
        .map(|j| {
            let ip = if j == 0 {
                first.to_string()
            } else {
                address(i, j, 0)
            };
            json!({"addresses": [ip], "conditions": {"ready": true}})
        })
        .collect();
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("svc-{i:04}-1"), "namespace": NS,
                     "labels": {"kubernetes.io/service-name": format!("svc-{i:04}")}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": eps})
}

fn nat_table() -> String {
    tool_ok("iptables-save", &["-t", "nat"])
}

/// Creates `services` Services with their slices (names offset by `offset`), waits until the
/// nat table holds every endpoint, then changes one endpoint `changes` times, timing each
/// change from the PUT's answer to the rule's appearance.
fn measure(
    c: &Cluster,
    offset: usize,
    services: usize,
    endpoints: usize,
    changes: usize,
) -> Samples {
    let api = c.api();
    for i in offset..offset + services {
        api.expect(
            Req::post(format!("/api/v1/namespaces/{NS}/services"), &service(i)),
            201,
        );
        api.expect(
            Req::post(
                format!("/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices"),
                &slice(i, endpoints, &address(i, 0, 0)),
            ),
            201,
        );
    }
    let last = address(offset + services - 1, endpoints - 1, 0);
    c.wait_for(secs(300), "every endpoint in the nat table", || {
        if nat_table().contains(&format!("--to-destination {last}:8080")) {
            Ok(())
        } else {
            Err("not yet")
        }
    });
    let mut samples = Samples::new();
    for g in 1..=changes {
        let i = offset + (g * 7919) % services;
        let ip = address(i, 0, g);
        let path = format!("/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices/svc-{i:04}-1");
        api.expect(Req::put(path, &slice(i, endpoints, &ip)), 200);
        let start = Instant::now();
        let rule = format!("--to-destination {ip}:8080");
        c.wait_for(secs(60), "the changed endpoint in the nat table", || {
            ok_if(nat_table().contains(&rule), "not yet")
        });
        samples.push(start.elapsed());
    }
    samples
}

fn main() {
    let services = env_usize("BERTH_BENCH_SERVICES", 1000);
    let endpoints = env_usize("BERTH_BENCH_ENDPOINTS", 10).max(1);
    let changes = env_usize("BERTH_BENCH_CHANGES", 40);
    let bin = agent_binary();
    let build = built(&bin);
    println!(
        "service proxy bench: {build}, {services} services x {endpoints} endpoints, {changes} changes"
    );
    let c = Cluster::start(1);
    c.kubectl().ok(&["create", "namespace", NS]);
    let mut small = measure(&c, 0, 10, endpoints, changes);
    let mut large = measure(&c, 10, services, endpoints, changes);
    let save = Instant::now();
    let table = nat_table();
    let save_time: Duration = save.elapsed();
    let rules = table.lines().filter(|l| l.starts_with("-A")).count();
    println!();
    println!("| figure | result | baseline (same run) | goal |");
    println!("|---|---|---|---|");
    println!(
        "| endpoint change → nat rule present, {} Services x {endpoints} endpoints ({rules} nat rules), ms | {} | 10 Services: {} | p99 < 1 s |",
        services + 10,
        large.p50_p99_ms(),
        small.p50_p99_ms()
    );
    println!(
        "| one `iptables-save -t nat` at that size (the measurement's resolution) | {:.0} ms | | |",
        save_time.as_secs_f64() * 1000.0
    );
}
