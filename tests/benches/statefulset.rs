//! StatefulSet benchmark on one real agent (issue 13; prints figures, never fails on them): how
//! long an OrderedReady StatefulSet of N replicas (busybox fixture, Ready as soon as its
//! readiness probe first runs), each with one local-path claim, takes from creation to all N
//! Ready; next to the baseline measured in the same run: N bare pods with an emptyDir bound
//! straight to the node, created back to back, to all Ready. `BERTH_BENCH_REPLICAS` sets N
//! (default 10); `BERTH_AGENT_BIN` / `BERTH_CONTROLLER_BIN` pick the binaries.

use std::time::{Duration, Instant};

use berth_tests::pod_reading::is_ready;
use berth_tests::pod_specs::ready_data_container;
use berth_tests::{Cluster, secs};
use serde_json::{Value, json};

const DEADLINE: Duration = secs(600);

fn main_container() -> Value {
    ready_data_container("")
}

fn stateful_set(replicas: usize) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "bench", "namespace": "default"},
        "spec": {"replicas": replicas, "serviceName": "bench",
            "selector": {"matchLabels": {"app": "bench"}},
            "template": {"metadata": {"labels": {"app": "bench"}},
                "spec": {"terminationGracePeriodSeconds": 1, "containers": [main_container()]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local-path",
                    "resources": {"requests": {"storage": "16Mi"}}}}]}})
}

fn bare_pod(name: &str, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "bare"}},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1,
            "containers": [main_container()],
            "volumes": [{"name": "data", "emptyDir": {}}]}})
}

/// Waits until `n` pods labelled `app` are Ready; returns the time taken since `started`.
fn wait_all_ready(c: &Cluster, app: &str, n: usize, started: Instant) -> Duration {
    c.wait_for(DEADLINE, &format!("{n} {app} pods ready"), || {
        let ready = c
            .get(&format!(
                "/api/v1/namespaces/default/pods?labelSelector=app%3D{app}"
            ))
            .and_then(|l| l["items"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter(|p| is_ready(p))
            .count();
        if ready == n {
            Ok(started.elapsed())
        } else {
            Err(format!("{ready} ready"))
        }
    })
}

fn main() {
    let replicas = berth_tests::bench::env_usize("BERTH_BENCH_REPLICAS", 10);
    berth_tests::bench::announce_cluster("statefulset", &format!("replicas={replicas}"));
    let c = Cluster::start(1);
    let node = c.node_name(0).to_string();
    // Warm the image on the node.
    c.apply(&bare_pod("warm", &node));
    c.wait_for_pod_ready("default", "warm", secs(120));
    c.kubectl()
        .ok(&["delete", "pod", "warm", "--wait=true", "--timeout=120s"]);

    let started = Instant::now();
    for i in 0..replicas {
        c.apply(&bare_pod(&format!("bare-{i}"), &node));
    }
    let bare = wait_all_ready(&c, "bare", replicas, started);

    let started = Instant::now();
    c.apply(&stateful_set(replicas));
    let ordered = wait_all_ready(&c, "bench", replicas, started);

    println!(
        "  {replicas} bare pods with an emptyDir, bound to the node, to all Ready: {:.1} s \
         (baseline)",
        bare.as_secs_f64()
    );
    println!(
        "  OrderedReady StatefulSet of {replicas}, one local-path claim each, to all Ready: \
         {:.1} s ({:.2} s per ordinal)",
        ordered.as_secs_f64(),
        ordered.as_secs_f64() / replicas as f64
    );
}
