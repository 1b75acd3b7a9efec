//! NetworkPolicy benchmark on the multi-host test bed (prints figures, never fails on them):
//! a server pod on host 0 and a client pod on host 1, and 1,000 pods bound to hollow nodes
//! (`berth-hollow-nodes`: Running with addresses, no containers) as peers in the same
//! namespace. Measured with none and with 100 policies selecting both real pods (each allowing
//! ten of the peers in and out, the last one also the client → server traffic, so each real
//! pod's chains name 1,001 addresses, in 100 peer sets, and a new connection passes a lookup
//! in each of them), in turns, in the same run:
//! * pod-to-pod TCP throughput (`iperf3`, Debian's package, in the pods' network namespaces);
//! * connection rate: sequential TCP connections (connect, one byte back, closed by the
//!   server), from a thread of this process in the client pod's network namespace to one in
//!   the server pod's;
//! * policy change → enforced: the last policy's client peer removed or put back (a merge
//!   PATCH), timed from the PATCH's answer to the start of the first probe connection from
//!   the client (one every 5 ms, each given 50 ms) that meets the new verdict on host 0; with
//!   the 100 policies and 1,000 peers, and in the same run with that one policy alone as the
//!   baseline.
//!
//! `BERTH_BENCH_SECONDS` (each iperf3 run, default 5), `BERTH_BENCH_CONNECTIONS` (per rate
//! run, default 5,000), `BERTH_BENCH_POLICIES` (100), `BERTH_BENCH_PODS` (1,000),
//! `BERTH_BENCH_CHANGES` (40), `BERTH_BENCH_ROUNDS` (turns of none and with, 3);
//! `BERTH_AGENT_BIN` / `BERTH_CONTROLLER_BIN` pick the binaries (`berth-hollow-nodes` comes
//! from the controller's directory).

use std::fs::File;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::{Duration, Instant};

use berth_tests::bench::{HollowNodes, announce_cluster, env_usize};
use berth_tests::client::Req;
use berth_tests::host::require_tool;
use berth_tests::pod_netns::{pod_netns, throughput};
use berth_tests::pod_specs::{SLEEP_FOREVER, script_pod};
use berth_tests::stats::Samples;
use berth_tests::wait::ok_if;
use berth_tests::{Cluster, ClusterConfig, TestBedLayout, secs};
use serde_json::{Value, json};

const NS: &str = "np-bench";
/// The port of the connection-rate server (iperf3 takes 5201).
const RATE_PORT: u16 = 7000;
const HOLLOW_NODES: usize = 10;
/// How long one connection may take before it counts as refused: a refusal is normally an
/// ICMP error at once, but the kernel rate-limits those (about one a second per destination
/// after a small burst), so a refused probe mostly times out. On the bed's veths an allowed
/// connection takes well under a millisecond.
const PROBE_TIMEOUT: Duration = Duration::from_millis(50);

/// Runs `f` on a thread of its own inside the network namespace `netns`.
fn in_netns<T: Send + 'static>(
    netns: &Path,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let file = File::open(netns).unwrap_or_else(|e| panic!("{}: {e}", netns.display()));
    std::thread::spawn(move || {
        nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET)
            .unwrap_or_else(|e| panic!("setns: {e}"));
        f()
    })
}

/// The connection-rate server: each connection gets one byte and is closed (by the server,
/// so TIME_WAIT stays on its side and the client's ports do not run out).
fn serve(listener: TcpListener) {
    // A failed accept (the client gave up) is just skipped.
    for mut c in listener.incoming().flatten() {
        let _ = c.write_all(b"k");
    }
}

/// One connection: connected, its byte read, closed; whether it worked.
fn connect_once(to: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&to, PROBE_TIMEOUT) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(PROBE_TIMEOUT));
    let mut b = [0u8; 1];
    matches!(s.read(&mut b), Ok(1))
}

/// What the client thread is asked to do.
enum Job {
    /// `n` connections one after another; answers how long they took.
    Rate(usize),
    /// Probe every 5 ms until a connection's outcome is `.0`; answers the time from `.1` to
    /// the start of that connection (when its SYN met the rules).
    Verdict(bool, Instant),
}

/// A thread in the client pod's network namespace doing [`Job`]s.
struct ClientThread {
    jobs: Sender<Job>,
    answers: Receiver<Duration>,
}

impl ClientThread {
    fn start(netns: &Path, to: SocketAddr) -> ClientThread {
        let (jobs, job_rx) = channel::<Job>();
        let (answer_tx, answers) = channel();
        in_netns(netns, move || {
            for job in job_rx {
                let took = match job {
                    Job::Rate(n) => {
                        let started = Instant::now();
                        for _ in 0..n {
                            connect_once(to);
                        }
                        started.elapsed()
                    }
                    Job::Verdict(want, since) => loop {
                        // The verdict is the rules' when the SYN left, at the probe's start.
                        let sent = since.elapsed();
                        if connect_once(to) == want {
                            break sent;
                        }
                        if since.elapsed() > Duration::from_secs(60) {
                            break Duration::MAX;
                        }
                        // not ordering: the probe's pace
                        std::thread::sleep(Duration::from_millis(5));
                    },
                };
                if answer_tx.send(took).is_err() {
                    return;
                }
            }
        });
        ClientThread { jobs, answers }
    }

    fn run(&self, job: Job) -> Duration {
        self.jobs.send(job).expect("the client thread runs");
        self.answers.recv().expect("the client thread answers")
    }
}

/// A real pod (busybox, running until stopped) in the bench's namespace.
fn real_pod(name: &str, node: &str, labels: Value) -> Value {
    script_pod(NS, name, node, labels, "busybox:1.28", SLEEP_FOREVER)
}

/// Policy `i` of `n`: selects both real pods, allows ten peers (group `i`) in and out; the
/// last also the client in (when `client_in`) and the server out.
fn policy(i: usize, n: usize, groups: usize, client_in: bool) -> Value {
    let group = json!({"podSelector": {"matchLabels": {"group": format!("g-{}", i % groups)}}});
    let mut from = vec![group.clone()];
    let mut to = vec![group];
    if i + 1 == n {
        if client_in {
            from.push(json!({"podSelector": {"matchLabels": {"role": "client"}}}));
        }
        to.push(json!({"podSelector": {"matchLabels": {"role": "server"}}}));
    }
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"namespace": NS, "name": format!("p-{i:03}")},
        "spec": {"podSelector": {"matchLabels": {"bench": "real"}},
                 "policyTypes": ["Ingress", "Egress"],
                 "ingress": [{"from": from}], "egress": [{"to": to}]}})
}

const POLICIES: &str = "/apis/networking.k8s.io/v1/namespaces/np-bench/networkpolicies";

/// Creates policies `range` of `n` (the last allowing the client).
fn create_policies(c: &Cluster, range: std::ops::Range<usize>, n: usize, groups: usize) {
    for i in range {
        c.api()
            .expect(Req::post(POLICIES, &policy(i, n, groups, true)), 201);
    }
}

fn delete_policies(c: &Cluster, range: std::ops::Range<usize>) {
    for i in range {
        c.api()
            .expect(Req::delete(format!("{POLICIES}/p-{i:03}")), 200);
    }
}

/// The policy rules in host `h`'s filter table.
fn policy_rules(c: &Cluster, h: usize) -> usize {
    policy_lines(c, h, |_| true)
}

/// The members of the peer sets in host `h`: each policy of the bench adds its ten peers to
/// each of a real pod's two chains' sets.
fn set_members(c: &Cluster, h: usize) -> usize {
    let listing = c.test_bed().host_exec_ok(h, &["ipset", "list"]);
    let mut ours = false;
    let mut count = 0;
    for line in listing.lines() {
        if let Some(name) = line.strip_prefix("Name: ") {
            ours = name.starts_with("BERTH-NP-");
        } else if let Some(n) = line.strip_prefix("Number of entries: ")
            && ours
        {
            count += n.trim().parse::<usize>().unwrap_or(0);
        }
    }
    count
}

fn policy_lines(c: &Cluster, h: usize, keep: impl Fn(&str) -> bool) -> usize {
    c.test_bed()
        .host_exec_ok(h, &["iptables-save", "-t", "filter"])
        .lines()
        .filter(|l| l.starts_with("-A BERTH-NP") && keep(l))
        .count()
}

/// Throughput (Gbit/s) and connection rate (per second), one run each.
fn measure(
    c: &Cluster,
    client: &ClientThread,
    (client_ns, server_ns, server_ip): (&Path, &Path, &str),
    seconds: usize,
    connections: usize,
) -> (f64, f64) {
    let gbits = throughput(c, client_ns, server_ns, server_ip, seconds);
    let took = client.run(Job::Rate(connections));
    (gbits, connections as f64 / took.as_secs_f64().max(1e-9))
}

/// Toggles the last policy's client peer `changes` times, timing each from the PATCH's
/// answer to the first probe connection that meets the new verdict (refused or let through on
/// host 0, where the server's ingress chain changes).
fn changes_enforced(
    c: &Cluster,
    client: &ClientThread,
    (last, n, groups): (usize, usize, usize),
    changes: usize,
) -> Samples {
    let mut probes = Samples::new();
    let path = format!("{POLICIES}/p-{last:03}");
    for k in 0..changes {
        let allow = k % 2 == 1;
        let spec = policy(last, n, groups, allow)["spec"].clone();
        c.api().expect(
            Req::patch(
                &path,
                "application/merge-patch+json",
                &json!({"spec": spec}),
            ),
            200,
        );
        let took = client.run(Job::Verdict(allow, Instant::now()));
        assert!(
            took < Duration::MAX,
            "the change was not enforced within a minute"
        );
        probes.push(took);
    }
    probes
}

fn main() {
    require_tool("iperf3");
    let seconds = env_usize("BERTH_BENCH_SECONDS", 5);
    let connections = env_usize("BERTH_BENCH_CONNECTIONS", 5_000);
    let n = env_usize("BERTH_BENCH_POLICIES", 100).max(1);
    let peers = env_usize("BERTH_BENCH_PODS", 1_000);
    let changes = env_usize("BERTH_BENCH_CHANGES", 40);
    let rounds = env_usize("BERTH_BENCH_ROUNDS", 3).max(1);
    announce_cluster(
        "network policy",
        &format!(
            "{n} policies, {peers} peer pods on {HOLLOW_NODES} hollow nodes, {seconds} s per iperf3 run, {connections} connections per rate run, {changes} changes"
        ),
    );
    let c = Cluster::start_with(ClusterConfig::on_test_bed(TestBedLayout::new(2, 0)));
    c.kubectl().ok(&["create", "namespace", NS]);
    let server_node = c.node_name(0).to_string();
    let client_node = c.node_name(1).to_string();
    c.apply(&real_pod(
        "server",
        &server_node,
        json!({"bench": "real", "role": "server"}),
    ));
    c.apply(&real_pod(
        "client",
        &client_node,
        json!({"bench": "real", "role": "client"}),
    ));
    let server = c.wait_for_pod_ready(NS, "server", secs(120));
    let client = c.wait_for_pod_ready(NS, "client", secs(120));
    let ip_of = |p: &Value| {
        p["status"]["podIP"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let server_ip = ip_of(&server);
    let (server_ns, client_ns) = (pod_netns(&server), pod_netns(&client));

    // The 1,000 peers: pods bound to hollow nodes, in groups of ten by label.
    let _hollow = HollowNodes::start(c.controller(), HOLLOW_NODES, &["--prefix", "np-hollow-"]);
    let groups = peers.div_ceil(10).max(1);
    for i in 0..peers {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"namespace": NS, "name": format!("peer-{i:04}"),
                         "labels": {"group": format!("g-{}", i % groups)}},
            "spec": {"nodeName": format!("np-hollow-{}", i % HOLLOW_NODES),
                     "containers": [{"name": "main", "image": "busybox:1.28"}]}});
        c.api().expect(
            Req::post(format!("/api/v1/namespaces/{NS}/pods"), &pod),
            201,
        );
    }
    c.wait_for(secs(300), "every peer Running with an address", || {
        let list = c.api().get_ok(&format!("/api/v1/namespaces/{NS}/pods"));
        let running = list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["status"]["podIP"].is_string())
            .count();
        ok_if(running >= peers + 2, running)
    });

    let server_ip_addr: Ipv4Addr = server_ip.parse().expect("the server's address");
    let to = SocketAddr::from((server_ip_addr, RATE_PORT));
    in_netns(&server_ns, || {
        let listener = TcpListener::bind(("0.0.0.0", RATE_PORT))
            .unwrap_or_else(|e| panic!("bind {RATE_PORT}: {e}"));
        serve(listener);
    });
    let prober = ClientThread::start(&client_ns, to);
    prober.run(Job::Verdict(true, Instant::now()));
    let paths = (client_ns.as_path(), server_ns.as_path(), server_ip.as_str());

    // Every policy written on both hosts: each real pod's two chains' sets hold every peer (or,
    // for `false`, at most the last policy's).
    let written = |present: bool| {
        c.wait_for(secs(120), "the policies in both hosts' chains", || {
            let seen = [set_members(&c, 0), set_members(&c, 1)];
            let holds = |r: usize| {
                if present {
                    r >= 2 * peers
                } else {
                    r < 2 * peers / 4
                }
            };
            ok_if(seen.iter().all(|&r| holds(r)), seen)
        });
    };

    let mut none = Vec::new();
    let mut with = Vec::new();
    for _round in 0..rounds {
        none.push(measure(&c, &prober, paths, seconds, connections));
        create_policies(&c, 0..n, n, groups);
        written(true);
        with.push(measure(&c, &prober, paths, seconds, connections));
        delete_policies(&c, 0..n);
        written(false);
    }

    // Change → enforced: the last policy alone (baseline), then with the other 99.
    create_policies(&c, n - 1..n, n, groups);
    prober.run(Job::Verdict(true, Instant::now()));
    let mut alone = changes_enforced(&c, &prober, (n - 1, n, groups), changes);
    create_policies(&c, 0..n - 1, n, groups);
    written(true);
    let chain_rules = (policy_rules(&c, 0), policy_rules(&c, 1));
    let mut full = changes_enforced(&c, &prober, (n - 1, n, groups), changes);

    let avg =
        |v: &[(f64, f64)], f: fn(&(f64, f64)) -> f64| v.iter().map(f).sum::<f64>() / v.len() as f64;
    let cost = |base: f64, with: f64| 100.0 * (base - with) / base.max(1e-9);
    let (t0, t1) = (avg(&none, |m| m.0), avg(&with, |m| m.0));
    let (r0, r1) = (avg(&none, |m| m.1), avg(&with, |m| m.1));
    let runs = |v: &[(f64, f64)], f: fn(&(f64, f64)) -> f64| {
        v.iter()
            .map(|m| format!("{:.2}", f(m)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!();
    println!("| figure | with {n} policies | none (same run) | cost | goal |");
    println!("|---|---|---|---|---|");
    println!(
        "| pod → pod TCP throughput, host-gw, Gbit/s (runs) | {t1:.2} ({}) | {t0:.2} ({}) | {:.1} % | ≤ 5 % |",
        runs(&with, |m| m.0),
        runs(&none, |m| m.0),
        cost(t0, t1)
    );
    println!(
        "| sequential TCP connections per second (runs) | {r1:.0} ({}) | {r0:.0} ({}) | {:.1} % | ≤ 5 % |",
        runs(&with, |m| m.1),
        runs(&none, |m| m.1),
        cost(r0, r1)
    );
    println!(
        "| policy change → a client's probe sees the verdict, ms, {} pods, {n} policies ({} policy rules on the server's host, {} on the client's) | {} | one policy: {} | | p99 < 1 s |",
        peers + 2,
        chain_rules.0,
        chain_rules.1,
        full.p50_p99_ms(),
        alone.p50_p99_ms()
    );
}
