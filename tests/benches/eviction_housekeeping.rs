//! Eviction housekeeping benchmark (issue 31; prints figures, never fails on them): one real
//! agent runs `BERTH_BENCH_PODS` pods (default 100); the figure is the agent's CPU spent by the
//! eviction manager's housekeeping at the kubelet's default `--housekeeping-interval 10s`
//! (each pass: the signals from `/proc` and `statfs`, the `kubepods` cgroup, then every pod's
//! usage — cgroups, the snapshotter's usage of each writable layer, logs and emptyDirs walked —
//! to judge local storage limits), as a share of one core.
//!
//! Baseline, in the same run and on the same pods: the agent restarted with
//! `--housekeeping-interval 1h` (no pass in the window). The garbage collector's own loops
//! (image checks and log rotation every 10 s, log-dir sweeps every minute) have fixed periods
//! and run in both. Each phase restarts the agent, waits for the Node to be Ready and lets
//! start-up settle (`BERTH_BENCH_SETTLE` seconds, default 30) before measuring its CPU and
//! containerd's (which computes the snapshot usages) over `BERTH_BENCH_WINDOW` seconds
//! (default 60), from `/proc/PID/stat`.
//!
//! A pass reads the pods' usage only for pods with local storage limits, unless a threshold
//! is met: `BERTH_BENCH_LIMITED=1` gives every pod an emptyDir `sizeLimit` (the worst case).
//! The thresholds are set where no shared host reaches them, so nothing is evicted.
//!
//! `BERTH_AGENT_BIN` / `BERTH_CONTROLLER_BIN` pick the binaries (release builds give the
//! meaningful figures).

use berth_tests::stats::process_cpu;
use std::time::{Duration, Instant};

use berth_tests::bench::{announce_cluster, env_usize, wait_deployment_ready};
use berth_tests::pod_specs::{SLEEP_FOREVER, sh_container};
use berth_tests::{Cluster, ClusterConfig};
use serde_json::{Value, json};

const GOAL: &str = "aim < 0.5 % of a core";

/// Thresholds no shared test host reaches (the kubelet's defaults may: a host with its disk
/// 85 % full would evict the pods): every signal is still observed each pass.
const EVICTION_HARD: &str =
    "memory.available<100Mi,nodefs.available<1%,nodefs.inodesFree<1%,imagefs.available<1%";

/// `limited`: each pod's emptyDir has a `sizeLimit`, so every pass reads every pod's usage.
fn deployment(replicas: usize, limited: bool) -> Value {
    let scratch = if limited {
        json!({"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}})
    } else {
        json!({"name": "scratch", "emptyDir": {}})
    };
    let spec = json!({
        "terminationGracePeriodSeconds": 1,
        "containers": [sh_container("main", SLEEP_FOREVER)],
        "volumes": [scratch],
    });
    berth_tests::objects::deployment("idle", replicas, spec)
}

/// CPU of the agent and of containerd over `window`, as % of a core, with the agent restarted
/// with `--housekeeping-interval interval` and settled for `settle`.
fn phase(c: &mut Cluster, interval: &str, settle: Duration, window: Duration) -> (f64, f64) {
    c.restart_agent_with(
        0,
        &[
            "--housekeeping-interval",
            interval,
            "--eviction-hard",
            EVICTION_HARD,
        ],
    );
    c.wait_node_ready(0);
    std::thread::sleep(settle); // not ordering: start-up's CPU is left out of the window
    let agent = c.agent(0).pid().expect("the agent runs");
    let containerd = c.containerd().pid().expect("containerd runs");
    let (a0, d0, t0) = (process_cpu(agent), process_cpu(containerd), Instant::now());
    std::thread::sleep(window); // not ordering: a stretch of wall time
    let wall = t0.elapsed().as_secs_f64();
    let share = |d: Duration| 100.0 * d.as_secs_f64() / wall;
    (
        share(process_cpu(agent) - a0),
        share(process_cpu(containerd) - d0),
    )
}

/// The eviction messages of the pods evicted so far.
fn evicted(c: &Cluster) -> Vec<String> {
    c.list("/api/v1/namespaces/default/pods")
        .iter()
        .filter(|p| p["status"]["reason"] == "Evicted")
        .map(|p| {
            p["status"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

fn main() {
    let pods = env_usize("BERTH_BENCH_PODS", 100).clamp(1, 110);
    let window = Duration::from_secs(env_usize("BERTH_BENCH_WINDOW", 60).max(10) as u64);
    let settle = Duration::from_secs(env_usize("BERTH_BENCH_SETTLE", 30) as u64);
    let limited = env_usize("BERTH_BENCH_LIMITED", 0) == 1;
    announce_cluster(
        "eviction_housekeeping",
        &format!("pods={pods}, local storage limits: {limited}"),
    );
    let mut c = Cluster::start_with(ClusterConfig::agents(1));
    c.apply(&deployment(pods, limited));
    wait_deployment_ready(&c, "idle", pods);
    let (base_agent, base_containerd) = phase(&mut c, "1h", settle, window);
    let base_evicted = evicted(&c);
    let (agent_cpu, containerd_cpu) = phase(&mut c, "10s", settle, window);
    // An eviction would make the figures the cost of killing and replacing pods.
    let evicted = evicted(&c);
    if !base_evicted.is_empty() || !evicted.is_empty() {
        println!(
            "WARNING: pods were evicted ({} in the baseline, {} in all): {:?}",
            base_evicted.len(),
            evicted.len(),
            evicted.first()
        );
    }
    let secs = window.as_secs();

    println!("| figure | result | baseline (same run) | goal |");
    println!("|---|---|---|---|");
    println!(
        "| agent CPU, {pods} pods, `--housekeeping-interval 10s` (default) | {agent_cpu:.2} % of a core over {secs} s | `--housekeeping-interval 1h`: {base_agent:.2} % | |"
    );
    println!(
        "| eviction housekeeping's share (difference) | {:.2} % of a core | | {GOAL} |",
        agent_cpu - base_agent
    );
    println!(
        "| containerd CPU (snapshot usage per writable layer) | {containerd_cpu:.2} % of a core | {base_containerd:.2} % | |"
    );
}
