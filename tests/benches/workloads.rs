//! Workload benchmark on one real agent (prints figures, never fails on them): how long a
//! Deployment of N replicas (`nginx:1.14.2` fixture, image already on the node) takes from
//! creation to N available, and how long `kubectl set image` to `nginx:1.16.1` takes to roll
//! out completely; next to the baseline measured in the same run: N bare pods bound straight to
//! the node (no scheduler, no controllers) from creation to all Running; and the raw container
//! start time beside the rollout: N `ctr run -d` of `nginx:1.16.1` (its own command, a
//! containerd namespace of its own, no pod network) one after another, and [`RAW_PARALLEL`] at
//! once. `BERTH_BENCH_REPLICAS` sets N (default 100); `BERTH_AGENT_BIN` /
//! `BERTH_CONTROLLER_BIN` pick the binaries.

use std::time::{Duration, Instant};

use berth_tests::bench::warm_raw_namespace_of;
use berth_tests::fixtures::NGINX_1_16_1;
use berth_tests::pod_reading::phase;
use berth_tests::pod_specs::nginx_pod;
use berth_tests::stats::megabytes;
use berth_tests::wait::ok_if;
use berth_tests::{AgentOptions, Cluster, ClusterConfig, secs};
use serde_json::{Value, json};

const DEADLINE: Duration = secs(900);
/// `ctr run -d`s at once in the parallel raw baseline (as many as the agent's pod passes at
/// once).
const RAW_PARALLEL: usize = 8;

fn deployment(replicas: usize) -> Value {
    let spec = json!({
        "terminationGracePeriodSeconds": 5,
        "containers": [{"name": "nginx", "image": "nginx:1.14.2",
            "ports": [{"containerPort": 80}]}],
    });
    berth_tests::objects::deployment("web", replicas, spec)
}

/// Waits until the Deployment's rollout is complete at `replicas` as `kubectl rollout status`
/// judges it, and every old pod is gone.
fn wait_rolled_out(c: &Cluster, replicas: usize) {
    c.wait_for(DEADLINE, "the rollout to complete", || {
        let d = c
            .get("/apis/apps/v1/namespaces/default/deployments/web")
            .ok_or("no deployment")?;
        let s = &d["status"];
        let n = |f: &str| s[f].as_u64().unwrap_or(0) as usize;
        let done = s["observedGeneration"] == d["metadata"]["generation"]
            && n("updatedReplicas") == replicas
            && n("replicas") == replicas
            && n("availableReplicas") == replicas;
        let pods = c
            .get("/api/v1/namespaces/default/pods?labelSelector=app%3Dweb")
            .map_or(0, |l| l["items"].as_array().map_or(0, Vec::len));
        ok_if(done && pods == replicas, format!("{s} pods={pods}"))
    });
}

fn main() {
    let replicas = berth_tests::bench::env_usize("BERTH_BENCH_REPLICAS", 100);
    berth_tests::bench::announce_cluster("workloads", &format!("replicas={replicas}"));
    // Room for the rollout's surge on the one node.
    let c = Cluster::start_with(ClusterConfig {
        agents: vec![AgentOptions {
            max_pods: u32::try_from(replicas * 2 + 10).unwrap_or(u32::MAX),
            ..AgentOptions::default()
        }],
        ..ClusterConfig::default()
    });
    let node = c.node_name(0).to_string();

    // Warm both images on the node.
    for (name, image) in [("warm-a", "nginx:1.14.2"), ("warm-b", "nginx:1.16.1")] {
        c.apply(&nginx_pod(name, &node, image));
    }
    for name in ["warm-a", "warm-b"] {
        c.wait_for_pod_ready("default", name, secs(120));
    }
    c.kubectl().ok(&[
        "delete",
        "pod",
        "warm-a",
        "warm-b",
        "--wait=true",
        "--timeout=120s",
    ]);

    // Baseline: bare pods bound to the node, created back to back.
    let started = Instant::now();
    for i in 0..replicas {
        let mut pod = nginx_pod(&format!("bare-{i}"), &node, "nginx:1.14.2");
        pod["metadata"]["labels"] = json!({"bench": "bare"});
        pod["spec"]["terminationGracePeriodSeconds"] = json!(5);
        c.api().expect(
            berth_tests::Req::post("/api/v1/namespaces/default/pods", &pod),
            201,
        );
    }
    c.wait_for(DEADLINE, "every bare pod Running", || {
        let list = c
            .get("/api/v1/namespaces/default/pods?labelSelector=bench%3Dbare")
            .ok_or_else(|| "no list".to_string())?;
        let running = list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| phase(p) == "Running")
            .count();
        ok_if(running == replicas, format!("{running} running"))
    });
    let bare = started.elapsed();
    c.kubectl().ok(&[
        "delete",
        "pods",
        "-l",
        "bench=bare",
        "--wait=true",
        "--timeout=300s",
    ]);

    let started = Instant::now();
    c.apply(&deployment(replicas));
    wait_rolled_out(&c, replicas);
    let available = started.elapsed();

    let started = Instant::now();
    c.kubectl()
        .ok(&["set", "image", "deployment/web", "nginx=nginx:1.16.1"]);
    wait_rolled_out(&c, replicas);
    let rolled = started.elapsed();
    let agent_rss = c.agent(0).rss_kib();
    let controller_rss = c.controller().rss_kib();
    let (raw_serial, raw_parallel) = raw_starts(&c, replicas);

    println!();
    println!("| figure | result | baseline (same run) |");
    println!("|---|---|---|");
    println!(
        "| Deployment of {replicas} replicas, creation → all available | {:.1} s | {replicas} bare pods bound to the node, creation → all Running: {:.1} s |",
        available.as_secs_f64(),
        bare.as_secs_f64()
    );
    println!(
        "| rolling update of it (`set image`, 25% surge / 25% unavailable) → complete | {:.1} s | raw start of {replicas} containers of the new image (`ctr run -d`): {:.1} s one after another, {:.1} s {RAW_PARALLEL} at once |",
        rolled.as_secs_f64(),
        raw_serial.as_secs_f64(),
        raw_parallel.as_secs_f64()
    );
    println!(
        "| RSS after the rollout: agent / controller (MB) | {} / {} | |",
        megabytes(agent_rss),
        megabytes(controller_rss)
    );
}

/// The raw container start time for `n` containers of the rollout's new image: `n` `ctr run -d`
/// one after another, then `n` more [`RAW_PARALLEL`] at once (wall time of each batch of `n`,
/// ctr's own process start included). The cluster's teardown removes the namespace.
fn raw_starts(c: &Cluster, n: usize) -> (Duration, Duration) {
    let ctd = c.containerd();
    let (ns, image) = warm_raw_namespace_of(c, "berth-bench-rollout-raw", &NGINX_1_16_1);
    let run = |id: String| {
        ctd.ctr_ok(&ns, &["run", "-d", "--null-io", &image, &id]);
    };
    let started = Instant::now();
    (0..n).for_each(|i| run(format!("serial-{i:03}")));
    let serial = started.elapsed();
    let started = Instant::now();
    std::thread::scope(|s| {
        for lane in 0..RAW_PARALLEL {
            let run = &run;
            s.spawn(move || {
                (lane..n)
                    .step_by(RAW_PARALLEL)
                    .for_each(|i| run(format!("parallel-{i:03}")));
            });
        }
    });
    (serial, started.elapsed())
}
