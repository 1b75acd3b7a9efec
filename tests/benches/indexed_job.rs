//! Indexed Job benchmark (issue 11; prints figures, never fails on them): an Indexed Job of
//! 1,000 completions with parallelism 100 (`BERTH_BENCH_COMPLETIONS`, `BERTH_BENCH_PARALLELISM`)
//! on 100 hollow nodes whose pods exit 0 one second after they run (`berth-hollow-nodes
//! --run-to-completion-after 1s`): time from creation to the `Complete` condition, and the
//! controller's CPU over it. Baseline measured in the same run: a NonIndexed Job of the same size
//! (run first, then deleted with its pods so both start from the same store), next to the floor
//! of both (completions / parallelism × the pods' 1 s). `BERTH_CONTROLLER_BIN` picks the
//! controller (`berth-hollow-nodes` from the same directory).

use std::time::Duration;

use berth_tests::Controller;
use berth_tests::bench::{Span, SpanTimer, env_usize, start_hollow};
use berth_tests::client::Req;
use serde_json::{Value, json};

const NODES: usize = 100;
/// How long one Job may take to complete before the benchmark gives up.
const DEADLINE: Duration = Duration::from_secs(30 * 60);

fn job(name: &str, mode: &str, completions: usize, parallelism: usize) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"completions": completions, "parallelism": parallelism,
            "completionMode": mode, "backoffLimit": 6,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{
                "name": "work", "image": "busybox:1.28", "command": ["true"],
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}})
}

fn condition_true(job: &Value, kind: &str) -> bool {
    job["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == kind && c["status"] == "True")
    })
}

/// Creates the Job and waits for `Complete`; returns the span and the final status.
fn run(
    c: &Controller,
    name: &str,
    mode: &str,
    completions: usize,
    parallelism: usize,
) -> (Span, Value) {
    let api = c.admin_api();
    let timer = SpanTimer::start(c);
    api.expect(
        Req::post(
            "/apis/batch/v1/namespaces/default/jobs",
            &job(name, mode, completions, parallelism),
        ),
        201,
    );
    let path = format!("/apis/batch/v1/namespaces/default/jobs/{name}");
    let status = c.wait_for(DEADLINE, &format!("Job {name} Complete"), || {
        let j = api.get_ok(&path);
        if condition_true(&j, "Failed") {
            panic!("Job {name} failed: {:#}", j["status"]);
        }
        if condition_true(&j, "Complete") {
            Ok(j["status"].clone())
        } else {
            Err(format!(
                "succeeded {}, active {}",
                j["status"]["succeeded"], j["status"]["active"]
            ))
        }
    });
    (timer.stop(), status)
}

fn pods_of(c: &Controller, name: &str) -> usize {
    c.admin_api().get_ok(&format!(
        "/api/v1/namespaces/default/pods?labelSelector=batch.kubernetes.io%2Fjob-name%3D{name}"
    ))["items"]
        .as_array()
        .map_or(0, Vec::len)
}

fn main() {
    let completions = env_usize("BERTH_BENCH_COMPLETIONS", 1_000);
    let parallelism = env_usize("BERTH_BENCH_PARALLELISM", 100).max(1);
    let (c, _hollow) = start_hollow(
        "indexed_job",
        &format!("completions={completions}, parallelism={parallelism}, {NODES} hollow nodes"),
        NODES,
        &["--run-to-completion-after", "1s"],
    );

    let (plain, plain_status) = run(&c, "plain", "NonIndexed", completions, parallelism);
    let plain_pods = pods_of(&c, "plain");
    c.admin_api().expect(
        Req::delete("/apis/batch/v1/namespaces/default/jobs/plain?propagationPolicy=Background"),
        200,
    );
    c.wait_for(
        Duration::from_secs(600),
        "the NonIndexed Job's pods gone",
        || match pods_of(&c, "plain") {
            0 => Ok(()),
            n => Err(n),
        },
    );

    let (indexed, indexed_status) = run(&c, "indexed", "Indexed", completions, parallelism);
    let indexed_pods = pods_of(&c, "indexed");
    let floor = completions.div_ceil(parallelism);

    println!();
    println!("| figure | result | baseline (same run) |");
    println!("|---|---|---|");
    println!(
        "| Indexed Job, {completions} completions, parallelism {parallelism}, pods of 1 s on {NODES} hollow nodes: creation → Complete | {} (succeeded {}, {indexed_pods} pods, completedIndexes {}) | NonIndexed Job of the same size: {} (succeeded {}, {plain_pods} pods); floor for both: {floor} s |",
        indexed.describe(),
        indexed_status["succeeded"],
        indexed_status["completedIndexes"],
        plain.describe(),
        plain_status["succeeded"]
    );
}
