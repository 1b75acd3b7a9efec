//! seccomp benchmark (prints figures, never fails on them): pod start latency, from creation to
//! Running as a watch delivers it, of pods under `RuntimeDefault` next to `Unconfined` pods on
//! the same node in the same run. The two kinds alternate, one pod at a time, so drift of the
//! node (pods piling up, caches warming) touches both alike, and so does which goes first. The baseline beside it is raw
//! containerd: `ctr run -d` with and without `--seccomp` (containerd's own default profile,
//! the same filter) in the same run, which shows what runc and libseccomp themselves cost.
//! `BERTH_BENCH_SECCOMP_PODS` sets the pods of each kind (default 20); `BERTH_AGENT_BIN` /
//! `BERTH_CONTROLLER_BIN` pick the binaries (release builds give the meaningful figures).

use std::collections::HashSet;
use std::time::Instant;

use berth_tests::agent::agent_binary;
use berth_tests::bench::{built, env_usize, time_to_running, warm_raw_namespace};
use berth_tests::pod_specs::{SLEEP_FOREVER, sh_pod};
use berth_tests::stats::Samples;
use berth_tests::{Cluster, secs};
use serde_json::json;

const GOAL: &str = "goal: no measurable difference, < 5 ms p50";

fn main() {
    let pods = env_usize("BERTH_BENCH_SECCOMP_PODS", 20);
    let bin = agent_binary();
    let build = built(&bin);
    println!("seccomp bench: {build}, pods of each kind={pods}");
    let c = Cluster::start_with(berth_tests::ClusterConfig {
        agents: vec![berth_tests::cluster::AgentOptions {
            max_pods: u32::try_from(2 * pods + 10).unwrap_or(u32::MAX),
            ..Default::default()
        }],
        ..Default::default()
    });
    let node = c.node_name(0).to_string();
    c.apply(&sh_pod("warm-up", &node, SLEEP_FOREVER));
    c.wait_for_pod_ready("default", "warm-up", secs(120));

    let api = c.api();
    let mut watch = api.watch_from_now("/api/v1/namespaces/default/pods");
    let mut running = HashSet::new();
    let (mut confined, mut unconfined) = (Samples::new(), Samples::new());
    for i in 0..pods {
        // Which kind goes first alternates too, so neither always follows the other.
        let mut kinds = [
            ("RuntimeDefault", &mut confined),
            ("Unconfined", &mut unconfined),
        ];
        if i % 2 == 1 {
            kinds.reverse();
        }
        for (kind, samples) in kinds {
            let name = format!("{}-{i:03}", kind.to_lowercase());
            let mut pod = sh_pod(&name, &node, SLEEP_FOREVER);
            pod["spec"]["securityContext"] = json!({"seccompProfile": {"type": kind}});
            samples.push(time_to_running(&c, &mut watch, &mut running, &name, &pod));
        }
    }

    let (mut raw_confined, mut raw_unconfined) = measure_raw(&c, pods);

    let delta = p50_delta(&mut confined, &mut unconfined);
    let raw_delta = p50_delta(&mut raw_confined, &mut raw_unconfined);
    println!();
    println!("| figure | result | baseline (same run) | goal |");
    println!("|---|---|---|---|");
    println!(
        "| pod start with `RuntimeDefault` seccomp, creation → Running ({} pods, ms) | {} (p50 difference {delta} ms) | `Unconfined`: {} | {GOAL} |",
        confined.len(),
        confined.p50_p99_ms(),
        unconfined.p50_p99_ms()
    );
    println!(
        "| raw `ctr run -d --seccomp` (containerd's default profile, {} containers, ms) | {} (p50 difference {raw_delta} ms) | without `--seccomp`: {} | |",
        raw_confined.len(),
        raw_confined.p50_p99_ms(),
        raw_unconfined.p50_p99_ms()
    );
}

/// `a`'s p50 less `b`'s, in ms.
fn p50_delta(a: &mut Samples, b: &mut Samples) -> String {
    match (a.percentile(50.0), b.percentile(50.0)) {
        (Some(a), Some(b)) => format!("{:+.1}", (a.as_secs_f64() - b.as_secs_f64()) * 1000.0),
        _ => "n/a".into(),
    }
}

/// `ctr run -d` of the pods' image in a namespace of its own, alternately with and without
/// `--seccomp`, `n` times each; each sample is the wall time of one `ctr run -d`.
fn measure_raw(c: &Cluster, n: usize) -> (Samples, Samples) {
    let ctd = c.containerd();
    let (ns, image) = warm_raw_namespace(c, "berth-bench-seccomp");
    let (mut with, mut without) = (Samples::new(), Samples::new());
    for i in 0..n {
        let mut kinds = [(true, &mut with), (false, &mut without)];
        if i % 2 == 1 {
            kinds.reverse();
        }
        for (flag, samples) in kinds {
            let id = format!("raw-{}-{i:03}", if flag { "seccomp" } else { "none" });
            let mut args = vec!["run", "-d", "--null-io"];
            if flag {
                args.push("--seccomp");
            }
            args.extend([image.as_str(), id.as_str(), "sh", "-c", SLEEP_FOREVER]);
            let start = Instant::now();
            ctd.ctr_ok(&ns, &args);
            samples.push(start.elapsed());
        }
    }
    // The cluster's teardown removes every namespace of its containerd, this one included.
    (with, without)
}
