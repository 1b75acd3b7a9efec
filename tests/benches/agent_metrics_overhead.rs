//! Agent metrics overhead benchmark (issue 15; prints figures, never fails on them): one real
//! agent runs `BERTH_BENCH_PODS` pods (default 100); the figure is the agent's CPU and memory
//! cost of serving its resource metrics (`/metrics/resource`: every pod's and container's
//! cgroup read and formatted) once per 15 s, as the controller's scraper asks for them.
//! Measured from the agent's own `/proc/PID/stat` and `/proc/PID/status`:
//! - baseline, in the same run: the agent's CPU over `BERTH_BENCH_WINDOW` seconds (default 60)
//!   with nobody scraping (the controller runs with `--metric-resolution 1h`);
//! - the cost of one scrape: CPU over `BERTH_BENCH_SCRAPES` back-to-back scrapes (default 40),
//!   divided by the count, and as a share of a core at one scrape per 15 s;
//! - RSS (VmRSS) before and after the scrapes, and the peak (VmHWM).
//!
//! `BERTH_AGENT_BIN` / `BERTH_CONTROLLER_BIN` pick the binaries (release builds give the
//! meaningful figures).

use berth_tests::stats::process_cpu;
use std::time::{Duration, Instant};

use berth_tests::bench::{announce_cluster, env_usize, wait_deployment_ready};
use berth_tests::pod_specs::{SLEEP_FOREVER, sh_container};
use berth_tests::{Cluster, ClusterConfig};
use serde_json::{Value, json};

const GOAL: &str = "aim < 1 % of a core and < 2 MB at one scrape per 15 s";
const PERIOD: f64 = 15.0;

/// A `/proc/PID/status` size in kB (`VmRSS`, `VmHWM`).
fn kb(pid: u32, field: &str) -> u64 {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the agent's status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim_start_matches(':').split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn deployment(replicas: usize) -> Value {
    let spec = json!({
        "terminationGracePeriodSeconds": 1,
        "containers": [sh_container("main", SLEEP_FOREVER)],
    });
    berth_tests::objects::deployment("idle", replicas, spec)
}

fn main() {
    let pods = env_usize("BERTH_BENCH_PODS", 100).clamp(1, 110);
    let window = env_usize("BERTH_BENCH_WINDOW", 60).max(5) as u64;
    let scrapes = env_usize("BERTH_BENCH_SCRAPES", 40).max(1);
    announce_cluster("agent_metrics_overhead", &format!("pods={pods}"));
    let c = Cluster::start_with(ClusterConfig {
        controller_args: vec!["--metric-resolution".into(), "1h".into()],
        ..ClusterConfig::agents(1)
    });
    c.apply(&deployment(pods));
    wait_deployment_ready(&c, "idle", pods);
    let pid = c.agent(0).pid().expect("the agent runs");
    let node = c.node_name(0).to_string();
    let path = format!("/api/v1/nodes/{node}/proxy/metrics/resource");

    // Baseline: the agent with its pods and nobody scraping.
    let (cpu0, t0) = (process_cpu(pid), Instant::now());
    std::thread::sleep(Duration::from_secs(window)); // not ordering: a stretch of wall time
    let idle_cpu = process_cpu(pid) - cpu0;
    let idle_wall = t0.elapsed();
    let idle_percent = 100.0 * idle_cpu.as_secs_f64() / idle_wall.as_secs_f64();
    let rss_before = kb(pid, "VmRSS");

    // The scrapes, back to back, as the controller's scraper asks for them.
    let kubectl = c.kubectl();
    let mut series = 0;
    let cpu1 = process_cpu(pid);
    for _ in 0..scrapes {
        let text = kubectl.ok(&["get", "--raw", &path]);
        series = text.lines().filter(|l| !l.starts_with('#')).count();
    }
    let scrape_cpu = (process_cpu(pid) - cpu1).as_secs_f64() / scrapes as f64;
    let rss_after = kb(pid, "VmRSS");
    let hwm = kb(pid, "VmHWM");
    let per_period = 100.0 * scrape_cpu / PERIOD;

    println!("| figure | result | baseline (same run) | goal |");
    println!("|---|---|---|---|");
    println!(
        "| agent CPU for one `/metrics/resource` scrape, {pods} pods ({series} series) | {:.1} ms | agent at rest: {:.2} % of a core over {:.0} s | |",
        scrape_cpu * 1e3,
        idle_percent,
        idle_wall.as_secs_f64()
    );
    println!("| agent CPU at one scrape per 15 s | {per_period:.3} % of a core | | {GOAL} |");
    println!(
        "| agent RSS after {scrapes} scrapes | {:+.2} MB ({:.1} → {:.1} MB; peak {:.1} MB) | | < 2 MB |",
        (rss_after as f64 - rss_before as f64) / 1024.0,
        rss_before as f64 / 1024.0,
        rss_after as f64 / 1024.0,
        hwm as f64 / 1024.0
    );
}
