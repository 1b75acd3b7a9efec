//! Agent benchmark (prints figures, never fails on them): pod start latency from creation to
//! Running as a watch delivers it, over N pods with a warm image, next to raw containerd
//! create+start of the same image measured in the same run (`ctr run -d` wall time, ctr's own
//! process start included); and the agent's RSS idle and with N pods. B pods are started first
//! and stay (so the measured pods start on a node that already has them; pod network setup
//! used to slow down with every pod on the node). `BERTH_BENCH_AGENT_PODS` sets N (default
//! 50), `BERTH_BENCH_AGENT_BACKGROUND` B (default 100); `BERTH_AGENT_BIN` /
//! `BERTH_CONTROLLER_BIN` pick the binaries (release builds give the meaningful figures).

use std::collections::HashSet;
use std::time::Instant;

use berth_tests::agent::agent_binary;
use berth_tests::bench::{built, env_usize, time_to_running, warm_raw_namespace};
use berth_tests::client::Req;
use berth_tests::pod_specs::{SLEEP_FOREVER, sh_pod};
use berth_tests::stats::{Samples, megabytes};
use berth_tests::wait::ok_if;
use berth_tests::{Cluster, secs};

const GOAL_LATENCY: &str = "goal: p99 < 1 s, within 3x of raw containerd";
const GOAL_RSS: &str = "goal: < 30 MB";

fn main() {
    let pods = env_usize("BERTH_BENCH_AGENT_PODS", 50);
    let background = env_usize("BERTH_BENCH_AGENT_BACKGROUND", 100);
    let bin = agent_binary();
    println!(
        "agent bench: {}, pods={pods}, background pods={background}",
        built(&bin)
    );
    let c = Cluster::start_with(berth_tests::ClusterConfig {
        agents: vec![berth_tests::cluster::AgentOptions {
            max_pods: u32::try_from(pods + background + 10).unwrap_or(u32::MAX),
            ..Default::default()
        }],
        ..Default::default()
    });
    let node = c.node_name(0).to_string();
    let rss_idle = c.agent(0).rss_kib();

    // Warm the image on the node, then measure.
    c.apply(&sh_pod("warm-up", &node, SLEEP_FOREVER));
    c.wait_for_pod_ready("default", "warm-up", secs(120));
    c.kubectl()
        .ok(&["delete", "pod", "warm-up", "--wait=true", "--timeout=60s"]);

    start_background(&c, &node, background);
    let mut pod_start = measure_pods(&c, &node, pods);
    let rss_busy = c.agent(0).rss_kib();
    let mut raw = measure_raw(&c, pods);

    let ratio = match (pod_start.percentile(99.0), raw.percentile(99.0)) {
        (Some(p), Some(r)) if !r.is_zero() => format!("{:.1}x", p.as_secs_f64() / r.as_secs_f64()),
        _ => "n/a".into(),
    };
    println!();
    println!("| figure | result | baseline (same run) | goal |");
    println!("|---|---|---|---|");
    println!(
        "| pod start, creation → Running via watch ({} pods, ms) | {} | raw `ctr run -d`: {} (p99 ratio {ratio}) | {GOAL_LATENCY} |",
        pod_start.len(),
        pod_start.p50_p99_ms(),
        raw.p50_p99_ms()
    );
    println!(
        "| agent RSS idle / with {pods} pods (MB) | {} / {} | | {GOAL_RSS} |",
        megabytes(rss_idle),
        megabytes(rss_busy)
    );
}

/// Creates `n` pods at once and waits until all are Running.
fn start_background(c: &Cluster, node: &str, n: usize) {
    if n == 0 {
        return;
    }
    let api = c.api();
    for i in 0..n {
        let pod = sh_pod(&format!("background-{i:03}"), node, SLEEP_FOREVER);
        api.expect(Req::post("/api/v1/namespaces/default/pods", &pod), 201);
    }
    c.wait_for(secs(300), &format!("{n} background pods Running"), || {
        let list = api.get_ok("/api/v1/namespaces/default/pods");
        let running = list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["status"]["phase"] == "Running")
            .count();
        ok_if(running >= n, format!("{running} Running"))
    });
}

/// Creates `n` pods one after another, each once the previous is Running, and times each from
/// just before its POST to the watch event that shows it Running.
fn measure_pods(c: &Cluster, node: &str, n: usize) -> Samples {
    let api = c.api();
    let mut watch = api.watch_from_now("/api/v1/namespaces/default/pods");
    let mut samples = Samples::new();
    let mut running: HashSet<String> = HashSet::new();
    for i in 0..n {
        let name = format!("bench-{i:03}");
        let pod = sh_pod(&name, node, SLEEP_FOREVER);
        samples.push(time_to_running(c, &mut watch, &mut running, &name, &pod));
    }
    samples
}

/// `ctr run -d` of the same image in a namespace of its own (pulled there first, so warm), `n`
/// times; each sample is the wall time of one `ctr run -d`.
fn measure_raw(c: &Cluster, n: usize) -> Samples {
    let ctd = c.containerd();
    let (ns, image) = warm_raw_namespace(c, "berth-bench-raw");
    let mut samples = Samples::new();
    for i in 0..n {
        let id = format!("raw-{i:03}");
        let start = Instant::now();
        ctd.ctr_ok(
            &ns,
            &[
                "run",
                "-d",
                "--null-io",
                &image,
                &id,
                "sh",
                "-c",
                SLEEP_FOREVER,
            ],
        );
        samples.push(start.elapsed());
    }
    // The cluster's teardown removes every namespace of its containerd, this one included.
    samples
}
