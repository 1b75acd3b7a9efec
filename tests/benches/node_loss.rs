//! Node loss benchmark (issue 10; prints figures, never fails on them): three real agents, a
//! Deployment whose pods prefer the third node and tolerate `unreachable`/`not-ready` NoExecute
//! for `tolerationSeconds`; the third agent is SIGKILLed (its containers keep running). The
//! figure is the time from the kill to every lost pod's replacement Running on another node, as
//! a watch delivers it, printed next to its floor measured in the same run: the node's last
//! heartbeat (its Lease's renewTime) + `--node-monitor-grace-period` + `tolerationSeconds`,
//! counted from the kill. Grace period and tolerationSeconds are short (15 s — the agent renews
//! its Lease every 10 s — and 10 s) so the run takes a minute; `BERTH_BENCH_LOSS_PODS` sets the
//! replicas (default 6); `BERTH_AGENT_BIN` / `BERTH_CONTROLLER_BIN` pick the binaries.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use berth_tests::bench::{announce_cluster, env_usize};
use berth_tests::pod_reading::time;
use berth_tests::pod_specs::{SLEEP_FOREVER, sh_container, sh_pod};
use berth_tests::stamped::{Stamped, StampedWatch};
use berth_tests::{Cluster, ClusterConfig, Req, secs};
use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

const GRACE_SECONDS: i64 = 15;
const TOLERATION_SECONDS: i64 = 10;
/// How long after the kill the replacements may take before the benchmark gives up.
const DEADLINE: Duration = secs(180);

fn deployment(replicas: usize, node: &str) -> Value {
    let tolerate = |key: &str| {
        json!({"key": key, "operator": "Exists", "effect": "NoExecute",
            "tolerationSeconds": TOLERATION_SECONDS})
    };
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "lossy", "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "lossy"}},
            "template": {"metadata": {"labels": {"app": "lossy"}},
                "spec": {"terminationGracePeriodSeconds": 1,
                    "tolerations": [tolerate("node.kubernetes.io/unreachable"),
                        tolerate("node.kubernetes.io/not-ready")],
                    "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 100, "preference": {"matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}}]}},
                    "containers": [sh_container("main", SLEEP_FOREVER)]}}}})
}

fn live_pods(c: &Cluster) -> Vec<Value> {
    c.live_pods("default", "app%3Dlossy")
}

fn uid(o: &Value) -> String {
    o["metadata"]["uid"].as_str().unwrap_or("").to_string()
}

/// Seconds from `from` to `to`, signed, one decimal.
fn secs_between(from: Timestamp, to: Timestamp) -> String {
    format!("{:.1}", to.duration_since(from).as_secs_f64())
}

fn main() {
    let replicas = env_usize("BERTH_BENCH_LOSS_PODS", 6).max(1);
    announce_cluster(
        "node_loss",
        &format!(
            "replicas={replicas}, grace {GRACE_SECONDS} s, tolerationSeconds {TOLERATION_SECONDS}"
        ),
    );
    let mut c = Cluster::start_with(ClusterConfig {
        controller_args: vec![
            "--node-monitor-grace-period".into(),
            format!("{GRACE_SECONDS}s"),
        ],
        ..ClusterConfig::agents(3)
    });
    let lost = c.node_name(2).to_string();
    // The image warm on the nodes that take the replacements.
    for i in 0..2 {
        let node = c.node_name(i).to_string();
        c.apply(&sh_pod(&format!("warm-{i}"), &node, SLEEP_FOREVER));
        c.wait_for_pod_ready("default", &format!("warm-{i}"), secs(120));
    }
    c.api().expect(
        Req::post(
            "/apis/apps/v1/namespaces/default/deployments",
            &deployment(replicas, &lost),
        ),
        201,
    );
    let before = c.wait_for(secs(120), "every replica Running", || {
        let pods = live_pods(&c);
        let running = pods
            .iter()
            .filter(|p| p["status"]["phase"] == "Running")
            .count();
        if running == replicas {
            Ok(pods)
        } else {
            Err(format!("{running} of {replicas} Running"))
        }
    });
    let on_lost: HashSet<String> = before
        .iter()
        .filter(|p| p["spec"]["nodeName"] == lost.as_str())
        .map(uid)
        .collect();
    if on_lost.is_empty() {
        panic!("no replica was scheduled on {lost}: nothing to lose");
    }
    let known: HashSet<String> = before.iter().map(uid).collect();
    let endpoint = c.controller().admin_endpoint();
    let pods = StampedWatch::start(endpoint.clone(), "/api/v1/namespaces/default/pods");
    let nodes = StampedWatch::start(endpoint, "/api/v1/nodes");

    c.kill9_agent(2);
    let (killed, killed_wall) = (Instant::now(), Timestamp::now());
    let lease = c
        .get(&format!(
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{lost}"
        ))
        .unwrap_or_else(|| panic!("no Lease for {lost}"));
    let heartbeat = time(&lease["spec"]["renewTime"])
        .unwrap_or_else(|| panic!("the Lease has no renewTime: {lease}"));
    let floor = heartbeat + SignedDuration::from_secs(GRACE_SECONDS + TOLERATION_SECONDS);

    let (unknown_at, ()) = nodes.wait_first(DEADLINE, "the lost node Unknown", |e| {
        let unknown = e.object["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
            .is_some_and(|c| c["status"] == "Unknown");
        (e.object["metadata"]["name"] == lost.as_str() && unknown).then_some(())
    });
    let (evicted_at, _) = pods.wait_first(DEADLINE, "the first lost pod evicted", |e| {
        (on_lost.contains(&uid(&e.object)) && !e.object["metadata"]["deletionTimestamp"].is_null())
            .then_some(())
    });
    let replacement = |e: &Stamped| {
        let o = &e.object;
        (e.kind != "DELETED"
            && !known.contains(&uid(o))
            && o["status"]["phase"] == "Running"
            && o["spec"]["nodeName"] != lost.as_str())
        .then(|| uid(o))
    };
    let arrivals = c.wait_for(DEADLINE, "every lost pod replaced and Running", || {
        let mut seen: HashSet<String> = HashSet::new();
        let mut times = Vec::new();
        for e in pods.events() {
            if let Some(u) = replacement(&e)
                && seen.insert(u)
            {
                times.push(e.at);
            }
        }
        if times.len() >= on_lost.len() {
            Ok(times)
        } else {
            Err(format!("{} of {} replaced", times.len(), on_lost.len()))
        }
    });
    let since_kill = |t: Instant| format!("{:.1}", t.duration_since(killed).as_secs_f64());
    let first = arrivals.iter().min().copied().unwrap_or(killed);
    let last = arrivals.iter().max().copied().unwrap_or(killed);

    println!();
    println!("| figure (seconds after the SIGKILL) | result | baseline: the floor, same run |");
    println!("|---|---|---|");
    println!(
        "| {} pods of the lost node replaced and Running elsewhere, via watch | first {}, all {} | {} (last heartbeat {} + grace {GRACE_SECONDS} + tolerationSeconds {TOLERATION_SECONDS}) |",
        on_lost.len(),
        since_kill(first),
        since_kill(last),
        secs_between(killed_wall, floor),
        secs_between(killed_wall, heartbeat)
    );
    println!(
        "| of which: node Ready=Unknown seen | {} | {} (last heartbeat + grace) |",
        since_kill(unknown_at),
        secs_between(
            killed_wall,
            heartbeat + SignedDuration::from_secs(GRACE_SECONDS)
        )
    );
    println!(
        "| of which: first lost pod marked for deletion (taint eviction) seen | {} | {} |",
        since_kill(evicted_at),
        secs_between(killed_wall, floor)
    );
}
