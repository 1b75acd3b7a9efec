//! Scale benchmark (prints figures, never fails on them): the controller with N hollow nodes
//! (`berth-hollow-nodes`, kubemark-style: Ready nodes, Leases renewed every 10 s, bound pods
//! marked Running/Ready without containers) and M pods from 10 Deployments. Prints how long the
//! pods take to become available end to end (ReplicaSet creates → scheduler binds → hollow
//! node reports Running), and the controller's RSS empty, with the nodes only, and with every
//! pod — the baselines measured in the same run. Beside the end-to-end rate it prints, from the
//! controller's `/metrics` over the same ramp, the scheduler's and the store's own ceilings
//! (pods placed per second of decision time; writes made durable per second of commit time),
//! the busy time of the ReplicaSet and Deployment controllers and the controller's CPU per
//! pod. `BERTH_BENCH_NODES` (default 5,000) and
//! `BERTH_BENCH_PODS` (default 50,000) set N and M; `BERTH_CONTROLLER_BIN` picks the controller
//! (a release build gives the meaningful figures; `berth-hollow-nodes` is taken from the same
//! directory).

use std::time::{Duration, Instant};

use berth_tests::Controller;
use berth_tests::bench::{HollowNodes, env_usize, hollow_binary};
use berth_tests::client::Req;
use berth_tests::controller::controller_binary;
use berth_tests::stats::{megabytes, metric_sum, vm_hwm_kib};
use serde_json::{Value, json};

const DEPLOYMENTS: usize = 10;
/// How long the pods may take to become available before the benchmark gives up (with what it
/// reached in the message).
const DEADLINE: Duration = Duration::from_secs(40 * 60);

/// `VmHWM` (peak RSS) of the controller, in KiB.
fn peak_kib(c: &Controller) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{}/status", c.pid()?)).ok()?;
    vm_hwm_kib(&status)
}

/// The controller's CPU time and the counters of its stages, read before and after the ramp.
#[derive(Debug, Default, Clone, Copy)]
struct Stages {
    cpu: Duration,
    /// Pods the scheduler placed, and the seconds its decisions for them took.
    scheduled: f64,
    scheduling_seconds: f64,
    /// Commits, the writes they made durable, and the seconds they took.
    commits: f64,
    committed: f64,
    commit_seconds: f64,
    /// Seconds the ReplicaSet and Deployment controllers spent in passes.
    replicaset_busy: f64,
    deployment_busy: f64,
}

impl Stages {
    fn read(c: &Controller) -> Stages {
        let page = c.admin_api().send(Req::get("/metrics")).body;
        let m = |name: &str, labels: &[&str]| metric_sum(&page, name, labels);
        let scheduled = ["result=\"scheduled\""];
        let busy = |queue: &str| {
            let label = format!("name=\"{queue}\"");
            m("workqueue_work_duration_seconds_sum", &[label.as_str()])
        };
        Stages {
            cpu: c.cpu_time().unwrap_or_default(),
            scheduled: m("scheduler_schedule_attempts_total", &scheduled),
            scheduling_seconds: m(
                "scheduler_scheduling_attempt_duration_seconds_sum",
                &scheduled,
            ),
            commits: m("berth_store_commit_duration_seconds_count", &[]),
            committed: m("berth_store_committed_writes_total", &[]),
            commit_seconds: m("berth_store_commit_duration_seconds_sum", &[]),
            replicaset_busy: busy("replicaset"),
            deployment_busy: busy("deployment"),
        }
    }

    /// What happened between `self` and the later reading `after`.
    fn until(self, after: Stages) -> Stages {
        Stages {
            cpu: after.cpu.saturating_sub(self.cpu),
            scheduled: after.scheduled - self.scheduled,
            scheduling_seconds: after.scheduling_seconds - self.scheduling_seconds,
            commits: after.commits - self.commits,
            committed: after.committed - self.committed,
            commit_seconds: after.commit_seconds - self.commit_seconds,
            replicaset_busy: after.replicaset_busy - self.replicaset_busy,
            deployment_busy: after.deployment_busy - self.deployment_busy,
        }
    }
}

fn per_second(n: f64, seconds: f64) -> f64 {
    if seconds > 0.0 { n / seconds } else { 0.0 }
}

fn deployment(name: &str, replicas: usize) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{
                    "name": "app",
                    "image": "nginx:1.14.2",
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                }]},
            },
        },
    })
}

fn main() {
    let nodes = env_usize("BERTH_BENCH_NODES", 5_000);
    let pods = env_usize("BERTH_BENCH_PODS", 50_000);
    let bin = controller_binary();
    let hollow_bin = hollow_binary();
    println!(
        "scale bench: {} and {}, nodes={nodes}, pods={pods}",
        bin.display(),
        hollow_bin.display()
    );
    let c = Controller::start();
    let api = c.admin_api();
    let rss_empty = c.rss_kib();

    let started = Instant::now();
    let _hollow = HollowNodes::start(&c, nodes, &[]);
    let registered = started.elapsed();
    let rss_nodes = c.rss_at_rest_kib();

    let per = pods / DEPLOYMENTS;
    let before = Stages::read(&c);
    let started = Instant::now();
    for i in 0..DEPLOYMENTS {
        let d = deployment(&format!("scale-{i}"), per);
        api.expect(
            Req::post("/apis/apps/v1/namespaces/default/deployments", &d),
            201,
        );
    }
    let total = per * DEPLOYMENTS;
    let mut last_print = Instant::now();
    let available = c.wait_for(DEADLINE, &format!("{total} pods available"), || {
        let list = api.get_ok("/apis/apps/v1/namespaces/default/deployments");
        let available: usize = list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|d| d["status"]["availableReplicas"].as_u64().unwrap_or(0) as usize)
            .sum();
        if available >= total {
            return Ok(available);
        }
        if last_print.elapsed() >= Duration::from_secs(15) {
            println!(
                "  {:>5.0} s: {available} of {total} available, controller RSS {} MB",
                started.elapsed().as_secs_f64(),
                megabytes(c.rss_kib())
            );
            last_print = Instant::now();
        }
        Err(available)
    });
    let elapsed = started.elapsed();
    let stages = before.until(Stages::read(&c));
    let rss_full = c.rss_at_rest_kib();
    let peak = peak_kib(&c);
    // The list's time is its body's arrival (the controller's part) and then the client's parse
    // of it into a value, timed apart: on a machine the hollow nodes keep busy, the parse of a
    // 150 MB body is seconds of the client's own.
    let list_started = Instant::now();
    let reply = api.send(Req::get("/api/v1/pods"));
    let received = list_started.elapsed();
    assert_eq!(reply.status, 200, "{}", reply.describe());
    let listed = reply.json()["items"].as_array().map_or(0, Vec::len);
    let list_time = list_started.elapsed();

    println!();
    println!("| figure | result | baseline (same run) |");
    println!("|---|---|---|");
    println!(
        "| {nodes} hollow nodes registered | {:.1} s | |",
        registered.as_secs_f64()
    );
    println!(
        "| {total} pods from {DEPLOYMENTS} Deployments available on {nodes} hollow nodes | {available} in {:.1} s ({:.0} pods/s) | |",
        elapsed.as_secs_f64(),
        available as f64 / elapsed.as_secs_f64().max(0.001)
    );
    let secs = elapsed.as_secs_f64();
    println!(
        "| controller CPU over the ramp | {:.0} core-s ({:.2} ms per pod, {:.0} % of a core) | |",
        stages.cpu.as_secs_f64(),
        stages.cpu.as_secs_f64() * 1000.0 / total.max(1) as f64,
        stages.cpu.as_secs_f64() * 100.0 / secs.max(0.001)
    );
    println!(
        "| scheduler's own ceiling: pods placed per second of decision time | {:.0} pods/s ({:.0} placed in {:.1} s) | |",
        per_second(stages.scheduled, stages.scheduling_seconds),
        stages.scheduled,
        stages.scheduling_seconds
    );
    println!(
        "| store's own ceiling: writes made durable per second of commit time | {:.0} writes/s ({:.0} writes in {:.0} commits, {:.1} s) | |",
        per_second(stages.committed, stages.commit_seconds),
        stages.committed,
        stages.commits,
        stages.commit_seconds
    );
    println!(
        "| ReplicaSet / Deployment controllers busy | {:.1} s / {:.1} s of {secs:.1} s | |",
        stages.replicaset_busy, stages.deployment_busy
    );
    println!(
        "| controller RSS with {nodes} nodes and {listed} pods (MB) | {} (peak {}) | empty: {}; nodes only: {} |",
        megabytes(rss_full),
        megabytes(peak),
        megabytes(rss_empty),
        megabytes(rss_nodes)
    );
    println!(
        "| list all {listed} pods, JSON | {:.0} ms ({:.0} ms until the whole body arrived, the rest the client's parse) | |",
        list_time.as_secs_f64() * 1000.0,
        received.as_secs_f64() * 1000.0
    );
}
