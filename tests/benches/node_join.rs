//! Node join benchmark (issue 10; prints figures, never fails on them): a real agent joins a
//! cluster running a DaemonSet, its images already imported (warm, as on a provisioned host);
//! the figure is the time from the agent's start to its daemon pod Running, as a watch delivers
//! it. Baselines measured in the same run, on the same just-joined node: the agent's start to
//! its Node Ready, and a plain pod bound to the node from creation to Running. Repeated for
//! `BERTH_BENCH_JOINS` agents (default 3); `BERTH_AGENT_BIN` / `BERTH_CONTROLLER_BIN` pick the
//! binaries (release builds give the meaningful figures).

use std::time::{Duration, Instant};

use berth_tests::bench::{announce_cluster, env_usize};
use berth_tests::fixtures::BUSYBOX;
use berth_tests::objects::daemon_set;
use berth_tests::pod_specs::{SLEEP_FOREVER, sh_container, sh_pod};
use berth_tests::stamped::{Stamped, StampedWatch};
use berth_tests::stats::Samples;
use berth_tests::{AgentOptions, Cluster, Req, secs};
use serde_json::{Value, json};

const GOAL: &str = "aim < 2 s, image warm";
/// How long one join may take to a Running daemon pod before the benchmark gives up.
const JOIN_DEADLINE: Duration = secs(120);

fn daemonset() -> Value {
    daemon_set(
        "node-agent",
        "default",
        json!({
            "terminationGracePeriodSeconds": 1,
            "containers": [sh_container("main", SLEEP_FOREVER)],
        }),
    )
}

/// The pod's name if the event shows it Running on `node` and `want` accepts its labels.
fn running_on(e: &Stamped, node: &str, want: impl Fn(&Value) -> bool) -> Option<String> {
    let o = &e.object;
    (e.kind != "DELETED"
        && o["spec"]["nodeName"] == node
        && o["status"]["phase"] == "Running"
        && want(&o["metadata"]["labels"]))
    .then(|| o["metadata"]["name"].as_str().unwrap_or("").to_string())
}

fn node_ready(e: &Stamped, node: &str) -> Option<()> {
    let ready = e.object["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .is_some_and(|c| c["status"] == "True");
    (e.object["metadata"]["name"] == node && ready).then_some(())
}

fn ms(d: Duration) -> String {
    format!("{:.0}", d.as_secs_f64() * 1e3)
}

fn main() {
    let joins = env_usize("BERTH_BENCH_JOINS", 3).clamp(1, 25);
    announce_cluster("node_join", &format!("joins={joins}"));
    let mut c = Cluster::start(1);
    let endpoint = c.controller().admin_endpoint();
    let pods = StampedWatch::start(endpoint.clone(), "/api/v1/pods");
    let nodes = StampedWatch::start(endpoint, "/api/v1/nodes");
    c.api().expect(
        Req::post("/apis/apps/v1/namespaces/default/daemonsets", &daemonset()),
        201,
    );
    let first = c.node_name(0).to_string();
    pods.wait_first(JOIN_DEADLINE, "the daemon pod on the first node", |e| {
        running_on(e, &first, |l| l["app"] == "node-agent")
    });

    let (mut to_ready, mut to_daemon, mut plain) = (Samples::new(), Samples::new(), Samples::new());
    let mut rows = Vec::new();
    for _ in 0..joins {
        let i = c.agents().len();
        let node = c.node_name_of(i);
        c.preload_images(i, &[BUSYBOX]);
        let started = Instant::now();
        c.add_agent(&AgentOptions::default());
        let (ready_at, ()) =
            nodes.wait_first(JOIN_DEADLINE, "the Node Ready", |e| node_ready(e, &node));
        let (daemon_at, _) = pods.wait_first(JOIN_DEADLINE, "the daemon pod Running", |e| {
            running_on(e, &node, |l| l["app"] == "node-agent")
        });

        // Baseline: a plain pod bound to the same node, creation → Running.
        let name = format!("plain-{i}");
        let mut pod = sh_pod(&name, &node, SLEEP_FOREVER);
        pod["spec"]["terminationGracePeriodSeconds"] = json!(1);
        let created = Instant::now();
        c.api()
            .expect(Req::post("/api/v1/namespaces/default/pods", &pod), 201);
        let (plain_at, _) = pods.wait_first(JOIN_DEADLINE, "the plain pod Running", |e| {
            running_on(e, &node, |l| l["test"] == name.as_str())
        });
        let row = (
            ready_at.duration_since(started),
            daemon_at.duration_since(started),
            plain_at.duration_since(created),
        );
        println!(
            "  {node}: start → Node Ready {} ms, → daemon pod Running {} ms; plain pod {} ms",
            ms(row.0),
            ms(row.1),
            ms(row.2)
        );
        to_ready.push(row.0);
        to_daemon.push(row.1);
        plain.push(row.2);
        rows.push(row);
    }

    println!();
    println!("| figure | result | baseline (same run) | goal |");
    println!("|---|---|---|---|");
    println!(
        "| agent start → its daemon pod Running via watch, image warm ({joins} joins, ms) | {} | agent start → Node Ready: {}; a plain pod bound to the just-joined node, creation → Running: {} | {GOAL} |",
        to_daemon.p50_p99_ms(),
        to_ready.p50_p99_ms(),
        plain.p50_p99_ms()
    );
    let after_ready: Vec<String> = rows
        .iter()
        .map(|(r, d, _)| ms(d.saturating_sub(*r)))
        .collect();
    println!(
        "| of which Node Ready → daemon pod Running (ms, each join) | {} | | |",
        after_ready.join(", ")
    );
}
