//! Issue 35, NetworkPolicy, on the multi-host test bed (two hosts on segment A; real agents,
//! containerd and kubectl): a server pod on host 0 serving TCP (HTTP on 8080) and UDP (an
//! echo on 5353), client pods on host 1 in the server's namespace and in another, probing
//! with `wget` and a UDP round trip (a connected socket, so a refusal is an ICMP error at
//! once, not a timeout). Upstream's classic scenarios, each reached from clean flows and
//! checked in both protocols:
//! * default deny ingress refuses everyone;
//! * allow from pods with a label (same namespace only), and a pod whose label changes moves
//!   in and out of it;
//! * allow from a namespace by label, and a namespace whose label changes moves out;
//! * a pod with default-deny egress still answers (replies of allowed connections pass);
//! * a policy removed: everything flows again;
//! * what policy refused is counted on the agent's `/metrics`.
//!
//! Each change is waited for (the time it took is printed; the goal is within 1 s).

use std::time::{Duration, Instant};

use berth_tests::fixtures::python::push_stdlib_image;
use berth_tests::pod_specs::{SLEEP_FOREVER, script_pod};
use berth_tests::wait::ok_if;
use berth_tests::{Cluster, ClusterConfig, TestBedLayout, secs};
use serde_json::{Value, json};

const IMAGE: &str = "python:3.11-netpol";
const SERVER_NS: &str = "np-server";
const CLIENT_NS: &str = "np-client";

/// The UDP echo the server runs beside busybox's httpd.
const UDP_SERVER: &str = "import socket
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind(('0.0.0.0', 5353))
while True:
    d, a = u.recvfrom(512)
    u.sendto(b'udp-ok', a)
";

/// One UDP round trip to `sys.argv[1]`:5353; connected, so an ICMP refusal raises at once.
const UDP_CLIENT: &str = "import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
s.connect((sys.argv[1], 5353))
s.send(b'ping')
print(s.recv(512).decode())
";

/// A pod in the test's image (stdlib-only Python, busybox beneath it, for servers and clients
/// alike) running `script`, with the UDP echo at hand in `$UDP_SERVER`.
fn pod(ns: &str, name: &str, node: &str, labels: Value, script: &str) -> Value {
    let mut pod = script_pod(ns, name, node, labels, IMAGE, script);
    pod["spec"]["containers"][0]["env"] = json!([{"name": "UDP_SERVER", "value": UDP_SERVER}]);
    pod
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proto {
    Tcp,
    Udp,
}

/// Whether `client` (in `ns`) reaches the server at `ip` over `proto`.
fn reaches(c: &Cluster, ns: &str, client: &str, ip: &str, proto: Proto) -> Result<(), String> {
    let r = match proto {
        Proto::Tcp => c.exec(
            ns,
            client,
            None,
            &[
                "timeout",
                "3",
                "wget",
                "-qO-",
                &format!("http://{ip}:8080/"),
            ],
        ),
        Proto::Udp => c.exec(ns, client, None, &["python3", "-c", UDP_CLIENT, ip]),
    };
    let want = if proto == Proto::Tcp {
        "tcp-ok"
    } else {
        "udp-ok"
    };
    if r.success() && r.stdout.contains(want) {
        Ok(())
    } else {
        Err(r.describe())
    }
}

/// The clients: (namespace, name).
const CLIENTS: [(&str, &str); 3] = [
    (SERVER_NS, "same-client"),
    (SERVER_NS, "same-other"),
    (CLIENT_NS, "far-client"),
];

/// Waits until each client reaches the server over both protocols exactly when `allowed`
/// says; returns how long that took.
fn expect(c: &Cluster, ip: &str, what: &str, allowed: [bool; 3]) -> Duration {
    let started = Instant::now();
    for ((ns, client), allowed) in CLIENTS.iter().zip(allowed) {
        for proto in [Proto::Tcp, Proto::Udp] {
            let label = format!(
                "{what}: {ns}/{client} {} over {proto:?}",
                if allowed { "reaches" } else { "is refused" }
            );
            c.wait_for(secs(20), &label, || {
                let r = reaches(c, ns, client, ip, proto);
                ok_if(r.is_ok() == allowed, r)
            });
        }
    }
    let took = started.elapsed();
    println!("{what}: enforced and checked in {took:?}");
    took
}

fn policy(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
           "metadata": {"namespace": SERVER_NS, "name": name}, "spec": spec})
}

fn refused_packets(c: &Cluster, node: &str) -> f64 {
    let text = c.kubectl().ok(&[
        "get",
        "--raw",
        &format!("/api/v1/nodes/{node}/proxy/metrics"),
    ]);
    text.lines()
        .filter(|l| l.starts_with("berth_network_policy_refused_packets_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn network_policies_allow_and_refuse_across_hosts_as_upstream_does() {
    let c = Cluster::start_with(ClusterConfig::on_test_bed(TestBedLayout::new(2, 0)));
    push_stdlib_image(c.registry(), c.scratch(), IMAGE, &["socket"]);
    let (server_node, client_node) = (c.node_name(0).to_string(), c.node_name(1).to_string());
    for (ns, team) in [(SERVER_NS, "server"), (CLIENT_NS, "blue")] {
        c.apply(&json!({"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": ns, "labels": {"team": team}}}));
    }
    let serve = "mkdir -p /www && echo tcp-ok > /www/index.html && httpd -p 8080 -h /www \
                 && exec python3 -c \"$UDP_SERVER\"";
    c.apply(&pod(
        SERVER_NS,
        "web",
        &server_node,
        json!({"app": "web"}),
        serve,
    ));
    for ((ns, name), role) in CLIENTS.iter().zip(["client", "other", "client"]) {
        c.apply(&pod(
            ns,
            name,
            &client_node,
            json!({"role": role}),
            SLEEP_FOREVER,
        ));
    }
    let web = c.wait_for_pod_ready(SERVER_NS, "web", secs(120));
    let ip = web["status"]["podIP"]
        .as_str()
        .expect("web has an IP")
        .to_string();
    for (ns, name) in CLIENTS {
        c.wait_for_pod_ready(ns, name, secs(120));
    }

    expect(&c, &ip, "no policy", [true, true, true]);

    c.apply(&policy(
        "default-deny-ingress",
        json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
    ));
    expect(&c, &ip, "default deny ingress", [false, false, false]);

    c.apply(&policy(
        "allow-clients",
        json!({"podSelector": {"matchLabels": {"app": "web"}},
               "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": "client"}}}]}]}),
    ));
    expect(&c, &ip, "allow from pods by label", [true, false, false]);

    let label = |ns: &str, what: &str, value: &str| {
        c.kubectl()
            .ok(&["label", "--overwrite", "-n", ns, what, value]);
    };
    label(SERVER_NS, "pod/same-other", "role=client");
    expect(&c, &ip, "a pod's label moves it in", [true, true, false]);
    label(SERVER_NS, "pod/same-other", "role=other");
    expect(&c, &ip, "and out again", [true, false, false]);

    c.apply(&policy(
        "allow-team-blue",
        json!({"podSelector": {},
               "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"team": "blue"}}}]}]}),
    ));
    expect(
        &c,
        &ip,
        "allow from a namespace by label",
        [true, false, true],
    );
    c.kubectl()
        .ok(&["label", "--overwrite", "namespace", CLIENT_NS, "team=red"]);
    expect(
        &c,
        &ip,
        "a namespace's label moves it out",
        [true, false, false],
    );

    // The server may start no connection (egress denied, only the server: a podSelector of {}
    // would deny its namespace's clients too), but answers those it is allowed to take.
    c.apply(&policy(
        "deny-egress",
        json!({"podSelector": {"matchLabels": {"app": "web"}}, "policyTypes": ["Egress"]}),
    ));
    expect(
        &c,
        &ip,
        "replies of allowed connections pass",
        [true, false, false],
    );
    assert!(
        refused_packets(&c, &server_node) > 0.0,
        "refusals are counted on {server_node}'s /metrics"
    );

    for name in [
        "default-deny-ingress",
        "allow-clients",
        "allow-team-blue",
        "deny-egress",
    ] {
        c.kubectl()
            .ok(&["delete", "networkpolicy", "-n", SERVER_NS, name]);
    }
    expect(&c, &ip, "policies removed: flows again", [true, true, true]);
}
