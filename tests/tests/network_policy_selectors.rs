//! Issue 35, NetworkPolicy's remaining classic scenarios on the multi-host test bed (two hosts
//! on segment A; real agents, containerd and kubectl), run one after another on one bed: a
//! server pod on host 0 answering TCP and UDP on ports 8080 and 9001–9003 (9002 named
//! `np-tcp`/`np-udp`), behind a Service; client pods on host 1 in three namespaces, each
//! probing every target of a state in one `kubectl exec` (a connected UDP socket, so a
//! refusal is an ICMP error at once, not a timeout):
//! * `podSelector` AND `namespaceSelector` in one peer (only pods matching both), directly and
//!   through the Service's ClusterIP (judged after DNAT, on the pod's address and port);
//! * an established TCP and UDP flow of an allowed client survives a policy change that still
//!   allows it while the server may start nothing itself (replies pass), and stops once a
//!   tightened policy refuses it (established connections are judged again);
//! * `ipBlock` with `except` (the client host's pod CIDR less one client's /32);
//! * a named port (through the Service too, whose own port differs);
//! * an `endPort` range;
//! * default deny egress with DNS allowed: a Service name still resolves while the client's
//!   other egress, direct or through the ClusterIP, is refused;
//! * `berth-agent uninstall` removes every policy chain and jump it made.
//!
//! Each change is waited for and the time it took printed (the goal is within 1 s).

use std::time::{Duration, Instant};

use berth_tests::fixtures::python::push_stdlib_image;
use berth_tests::pod_specs::{SLEEP_FOREVER, script_pod};
use berth_tests::process::LineChild;
use berth_tests::wait::ok_if;
use berth_tests::{Cluster, ClusterConfig, TestBedLayout, secs};
use serde_json::{Value, json};

const IMAGE: &str = "python:3.11-netpol-sel";
const SERVER_NS: &str = "nps-server";
const BLUE_NS: &str = "nps-blue";
const RED_NS: &str = "nps-red";

/// TCP and UDP echo servers on each port: a TCP connection answers every line, UDP every
/// datagram, with `ok`.
const SERVER: &str = "import socket, threading
def tcp(port):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(('0.0.0.0', port)); s.listen(64)
    while True:
        c, _ = s.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()
def serve(c):
    try:
        while c.recv(64):
            c.sendall(b'ok\\n')
    except OSError:
        pass
    c.close()
def udp(port):
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(('0.0.0.0', port))
    while True:
        d, a = u.recvfrom(64); u.sendto(b'ok', a)
for p in (8080, 9001, 9002, 9003):
    threading.Thread(target=tcp, args=(p,), daemon=True).start()
    threading.Thread(target=udp, args=(p,), daemon=True).start()
threading.Event().wait()
";

/// One round trip to each `proto:ip:port` argument, printing `TARGET ok` or `TARGET no ERROR`.
const PROBE: &str = "import socket, sys
for t in sys.argv[1:]:
    proto, ip, port = t.split(':')
    try:
        kind = socket.SOCK_STREAM if proto == 'tcp' else socket.SOCK_DGRAM
        s = socket.socket(socket.AF_INET, kind); s.settimeout(2)
        s.connect((ip, int(port))); s.send(b'ping\\n')
        print(t, 'ok' if s.recv(64).startswith(b'ok') else 'no wrong-answer')
        s.close()
    except OSError as e:
        print(t, 'no', e)
";

/// A flow: one connection (`proto`, `ip`, `port`) kept open, a round trip every 200 ms, a line
/// `ok N` each; `broken ERROR` and exit at the first that fails (an error, or 1 s without an
/// answer).
const FLOW: &str = "import socket, sys, time
proto, ip, port = sys.argv[1:4]
kind = socket.SOCK_STREAM if proto == 'tcp' else socket.SOCK_DGRAM
s = socket.socket(socket.AF_INET, kind); s.settimeout(1)
s.connect((ip, int(port)))
n = 0
while True:
    try:
        s.send(b'ping\\n')
        if not s.recv(64).startswith(b'ok'):
            raise OSError('closed')
    except OSError as e:
        print('broken', e, flush=True); break
    n += 1; print('ok', n, flush=True)
    time.sleep(0.2)  # not ordering: the flow's pace
";

/// A pod in the test's image (stdlib-only Python, busybox beneath it, for the server and the
/// clients alike) running `command`, with the server's script at hand in `$SERVER`.
fn pod(ns: &str, name: &str, node: &str, labels: Value, command: &str, ports: Value) -> Value {
    let mut pod = script_pod(ns, name, node, labels, IMAGE, command);
    let main = &mut pod["spec"]["containers"][0];
    main["env"] = json!([{"name": "SERVER", "value": SERVER}]);
    main["ports"] = ports;
    pod
}

/// The clients, all on host 1: (namespace, name, role label).
const A: (&str, &str) = (BLUE_NS, "a");
const B: (&str, &str) = (BLUE_NS, "b");
const C: (&str, &str) = (SERVER_NS, "c");
const D: (&str, &str) = (RED_NS, "d");
const CLIENTS: [((&str, &str), &str); 4] =
    [(A, "client"), (B, "other"), (C, "client"), (D, "client")];

/// Where the server answers: its pod address and its Service's ClusterIP.
struct Server {
    pod: String,
    service: String,
}

/// `tcp:IP:PORT` and `udp:IP:PORT`.
fn both(ip: &str, port: u16) -> [String; 2] {
    [format!("tcp:{ip}:{port}"), format!("udp:{ip}:{port}")]
}

/// Each client's targets with whether it must reach them.
type Expectation = Vec<((&'static str, &'static str), Vec<(String, bool)>)>;

/// Targets in both protocols on `ip` at `ports`, each allowed or not.
fn targets(ip: &str, ports: &[(u16, bool)]) -> Vec<(String, bool)> {
    ports
        .iter()
        .flat_map(|&(port, ok)| both(ip, port).map(|t| (t, ok)))
        .collect()
}

/// Waits until each client reaches exactly the targets it must; prints how long that took.
fn expect(c: &Cluster, what: &str, expectation: &Expectation) -> Duration {
    let started = Instant::now();
    for ((ns, client), wanted) in expectation {
        let mut args = vec!["python3", "-c", PROBE];
        args.extend(wanted.iter().map(|(t, _)| t.as_str()));
        c.wait_for(secs(20), &format!("{what}: {ns}/{client}"), || {
            let r = c.exec(ns, client, None, &args);
            let wrong: Vec<String> = wanted
                .iter()
                .filter(|(t, ok)| {
                    let seen = r
                        .stdout
                        .lines()
                        .find(|l| l.starts_with(&format!("{t} ")))
                        .map(|l| l.ends_with(" ok"));
                    seen != Some(*ok)
                })
                .map(|(t, ok)| format!("{t} should {}", if *ok { "pass" } else { "fail" }))
                .collect();
            ok_if(r.success() && wrong.is_empty(), (wrong, r.describe()))
        });
    }
    let took = started.elapsed();
    println!("{what}: enforced and checked in {took:?}");
    took
}

fn policy(ns: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
           "metadata": {"namespace": ns, "name": name}, "spec": spec})
}

/// A flow from `client` to the server, started and seen working.
fn start_flow(c: &Cluster, client: (&str, &str), proto: &str, ip: &str) -> LineChild {
    let (ns, name) = client;
    let mut flow = c.kubectl().spawn(&[
        "exec", "-n", ns, name, "--", "python3", "-u", "-c", FLOW, proto, ip, "8080",
    ]);
    flow.expect_line(
        secs(30),
        &format!("{proto} flow from {ns}/{name} works"),
        |l| l == "ok 3",
    );
    flow
}

/// Reads the flow for `period`: it must keep answering.
fn flow_keeps_going(flow: &mut LineChild, period: Duration, what: &str) {
    let until = Instant::now() + period;
    let mut answers = 0;
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        match flow.next_line(left) {
            Some(l) if l.starts_with("ok") => answers += 1,
            Some(l) => panic!("{what}: the flow broke: {l}\n{}", flow.describe()),
            None if Instant::now() < until => panic!("{what}: the flow ended\n{}", flow.describe()),
            None => {}
        }
    }
    assert!(answers > 0, "{what}: no answer\n{}", flow.describe());
}

/// The node's pod CIDR.
fn pod_cidr(c: &Cluster, node: &str) -> String {
    let n = c
        .get(&format!("/api/v1/nodes/{node}"))
        .unwrap_or_else(|| panic!("no node {node}"));
    n["spec"]["podCIDR"]
        .as_str()
        .unwrap_or_else(|| panic!("{node} has no podCIDR"))
        .to_string()
}

#[test]
fn network_policy_selectors_ports_egress_and_established_flows_across_hosts() {
    let mut c = Cluster::start_with(ClusterConfig::on_test_bed(TestBedLayout::new(2, 0)));
    push_stdlib_image(c.registry(), c.scratch(), IMAGE, &["socket", "threading"]);
    let (server_node, client_node) = (c.node_name(0).to_string(), c.node_name(1).to_string());
    for (ns, team) in [(SERVER_NS, "server"), (BLUE_NS, "blue"), (RED_NS, "red")] {
        c.apply(&json!({"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": ns, "labels": {"team": team}}}));
    }
    let named = json!([
        {"name": "np-tcp", "containerPort": 9002, "protocol": "TCP"},
        {"name": "np-udp", "containerPort": 9002, "protocol": "UDP"}]);
    c.apply(&pod(
        SERVER_NS,
        "web",
        &server_node,
        json!({"app": "web"}),
        "exec python3 -c \"$SERVER\"",
        named,
    ));
    // Service port 80 → 8080, 90 → the named port (9002), each in TCP and UDP.
    c.apply(&json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"namespace": SERVER_NS, "name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [
            {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"},
            {"name": "http-udp", "port": 80, "targetPort": 8080, "protocol": "UDP"},
            {"name": "named", "port": 90, "targetPort": "np-tcp", "protocol": "TCP"},
            {"name": "named-udp", "port": 90, "targetPort": "np-udp", "protocol": "UDP"}]}}));
    for ((ns, name), role) in CLIENTS {
        c.apply(&pod(
            ns,
            name,
            &client_node,
            json!({"role": role}),
            SLEEP_FOREVER,
            json!([]),
        ));
    }
    let web = c.wait_for_pod_ready(SERVER_NS, "web", secs(120));
    let svc = c
        .get(&format!("/api/v1/namespaces/{SERVER_NS}/services/web"))
        .expect("the web Service");
    let server = Server {
        pod: web["status"]["podIP"]
            .as_str()
            .expect("web has an IP")
            .to_string(),
        service: svc["spec"]["clusterIP"]
            .as_str()
            .expect("web has a ClusterIP")
            .to_string(),
    };
    let mut client_ip = std::collections::BTreeMap::new();
    for ((ns, name), _) in CLIENTS {
        let p = c.wait_for_pod_ready(ns, name, secs(120));
        client_ip.insert(
            name,
            p["status"]["podIP"].as_str().unwrap_or("").to_string(),
        );
    }
    let (pod_ip, svc_ip) = (server.pod.as_str(), server.service.as_str());
    let direct = |ok: bool| targets(pod_ip, &[(8080, ok)]);
    let via_service = |ok: bool| targets(svc_ip, &[(80, ok)]);
    let with_service = |ok: bool| [direct(ok), via_service(ok)].concat();

    expect(
        &c,
        "no policy",
        &CLIENTS.map(|(who, _)| (who, with_service(true))).to_vec(),
    );

    // podSelector AND namespaceSelector in one peer: role=client pods of team=blue
    // namespaces only (c has the role in another namespace; b is in the namespace without it).
    c.apply(&policy(
        SERVER_NS,
        "web-ingress",
        json!({"podSelector": {"matchLabels": {"app": "web"}},
               "ingress": [{"from": [{
                   "namespaceSelector": {"matchLabels": {"team": "blue"}},
                   "podSelector": {"matchLabels": {"role": "client"}}}]}]}),
    ));
    expect(
        &c,
        "podSelector AND namespaceSelector, direct and through the ClusterIP",
        &vec![
            (A, with_service(true)),
            (B, with_service(false)),
            (C, with_service(false)),
            (D, with_service(false)),
        ],
    );
    // The peer is one ipset on the server's host, holding a's address.
    let sets = policy_sets(&c, 0);
    assert_eq!(sets.len(), 1, "{sets:?}");
    let members = c.test_bed().host_exec_ok(0, &["ipset", "list", &sets[0]]);
    assert!(members.contains(&client_ip[A.1]), "{members}");

    // Established flows of the allowed client, in both protocols.
    let mut tcp_flow = start_flow(&c, A, "tcp", pod_ip);
    let mut udp_flow = start_flow(&c, A, "udp", pod_ip);
    // A change that still allows them (the server may now start nothing itself): once it is
    // written, every established connection is judged again, and these pass; their replies,
    // from a server whose egress is denied, pass too.
    c.apply(&policy(
        SERVER_NS,
        "web-no-egress",
        json!({"podSelector": {"matchLabels": {"app": "web"}}, "policyTypes": ["Egress"]}),
    ));
    let started = Instant::now();
    c.wait_for(secs(20), "web's egress chain on host 0", || {
        let rules = c
            .test_bed()
            .host_exec_ok(0, &["iptables-save", "-t", "filter"]);
        ok_if(
            rules.contains(&format!("egress {SERVER_NS}/web")),
            "not yet",
        )
    });
    println!(
        "a server's egress denied: written in {:?}",
        started.elapsed()
    );
    flow_keeps_going(&mut tcp_flow, secs(2), "tcp flow, rules rewritten");
    flow_keeps_going(&mut udp_flow, secs(2), "udp flow, rules rewritten");

    // ipBlock with except: the client host's pod CIDR less a's address. a's flows stop.
    let cidr = pod_cidr(&c, &client_node);
    c.apply(&policy(
        SERVER_NS,
        "web-ingress",
        json!({"podSelector": {"matchLabels": {"app": "web"}},
               "ingress": [{"from": [{"ipBlock": {
                   "cidr": cidr, "except": [format!("{}/32", client_ip["a"])]}}]}]}),
    ));
    let started = Instant::now();
    // UDP learns at once (the ICMP error of its next datagram); TCP at its read timeout (the
    // error is soft for an established socket, which retransmits into the refusal).
    for (flow, proto) in [(&mut udp_flow, "udp"), (&mut tcp_flow, "tcp")] {
        flow.expect_line(secs(20), &format!("a's {proto} flow refused"), |l| {
            l.starts_with("broken")
        });
        println!(
            "a policy tightened: a's established {proto} flow seen stopped after {:?}",
            started.elapsed()
        );
    }
    expect(
        &c,
        "ipBlock with except",
        &vec![
            (A, with_service(false)),
            (B, with_service(true)),
            (C, direct(true)),
            (D, direct(true)),
        ],
    );

    // A named port: 9002 (np-tcp/np-udp) only, also through the Service's port 90, while
    // port 80 of the Service (8080 on the pod) is refused: judged on the pod's port.
    c.apply(&policy(
        SERVER_NS,
        "web-ingress",
        json!({"podSelector": {"matchLabels": {"app": "web"}},
               "ingress": [{"ports": [{"port": "np-tcp", "protocol": "TCP"},
                                      {"port": "np-udp", "protocol": "UDP"}]}]}),
    ));
    let named_ports = [
        targets(pod_ip, &[(9002, true), (9001, false), (8080, false)]),
        targets(svc_ip, &[(90, true), (80, false)]),
    ]
    .concat();
    expect(
        &c,
        "a named port",
        &vec![(A, named_ports.clone()), (D, named_ports)],
    );

    // An endPort range: 9001–9002.
    c.apply(&policy(
        SERVER_NS,
        "web-ingress",
        json!({"podSelector": {"matchLabels": {"app": "web"}},
               "ingress": [{"ports": [{"port": 9001, "endPort": 9002, "protocol": "TCP"},
                                      {"port": 9001, "endPort": 9002, "protocol": "UDP"}]}]}),
    ));
    let range = targets(
        pod_ip,
        &[(9001, true), (9002, true), (9003, false), (8080, false)],
    );
    expect(
        &c,
        "an endPort range",
        &vec![(B, range.clone()), (C, range)],
    );

    // The ingress policy removed: everyone reaches the server again.
    c.kubectl()
        .ok(&["delete", "networkpolicy", "-n", SERVER_NS, "web-ingress"]);
    expect(
        &c,
        "the ingress policy removed",
        &vec![(A, direct(true)), (C, direct(true))],
    );

    // Default deny egress for the blue clients, DNS allowed: a still resolves the Service's
    // name, but reaches the server neither directly nor through the ClusterIP; b is not
    // selected and still does.
    c.apply(&policy(
        BLUE_NS,
        "egress-dns-only",
        json!({"podSelector": {"matchLabels": {"role": "client"}},
               "policyTypes": ["Egress"],
               "egress": [{"ports": [{"port": 53, "protocol": "UDP"},
                                     {"port": 53, "protocol": "TCP"}]}]}),
    ));
    expect(
        &c,
        "default deny egress with DNS allowed",
        &vec![(A, with_service(false)), (B, with_service(true))],
    );
    let name = format!("web.{SERVER_NS}.svc.cluster.local");
    c.wait_for(secs(20), "a resolves the Service's name", || {
        let r = c.exec(A.0, A.1, None, &["timeout", "5", "nslookup", &name]);
        ok_if(r.success() && r.stdout.contains(svc_ip), r.describe())
    });

    // A pod peer again, so both hosts hold a peer set when the agents are uninstalled: the
    // server's ingress from the blue clients, the blue clients' egress to the server.
    c.apply(&policy(
        SERVER_NS,
        "web-ingress",
        json!({"podSelector": {"matchLabels": {"app": "web"}},
               "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"team": "blue"}}}]}]}),
    ));
    c.apply(&policy(
        BLUE_NS,
        "egress-to-web",
        json!({"podSelector": {"matchLabels": {"role": "client"}},
               "policyTypes": ["Egress"],
               "egress": [{"to": [{"namespaceSelector": {"matchLabels": {"team": "server"}}}]}]}),
    ));
    for i in [0, 1] {
        c.wait_for(secs(20), &format!("a peer set on host {i}"), || {
            let sets = policy_sets(&c, i);
            ok_if(!sets.is_empty(), format!("{sets:?}"))
        });
    }

    // Uninstall on both hosts: no policy chain, jump or set is left.
    for i in [0, 1] {
        c.agent_mut(i).terminate();
        let r = c.agent(i).uninstall();
        assert!(r.success(), "{}", r.describe());
        let left = c.test_bed().host_exec_ok(i, &["iptables-save"]);
        assert!(
            !left.contains("BERTH-NP") && !left.contains("network policy"),
            "left by uninstall on host {i}:\n{left}"
        );
        let sets = policy_sets(&c, i);
        assert!(
            sets.is_empty(),
            "sets left by uninstall on host {i}: {sets:?}"
        );
    }
}

/// The agents' peer sets (`BERTH-NP-…`) in host `i`'s network namespace (each bed host is
/// one, with one agent).
fn policy_sets(c: &Cluster, i: usize) -> Vec<String> {
    c.test_bed()
        .host_exec_ok(i, &["ipset", "list", "-n"])
        .lines()
        .filter(|l| l.starts_with("BERTH-NP-"))
        .map(str::to_string)
        .collect()
}
