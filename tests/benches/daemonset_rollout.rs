//! DaemonSet rollout benchmark (issue 10; prints figures, never fails on them): a DaemonSet on
//! N hollow nodes (`berth-hollow-nodes`, kubemark-style; default 1,000, `BERTH_BENCH_NODES`)
//! rolled to a new template with `maxUnavailable: 10%`: total time to complete (as `kubectl
//! rollout status` judges it) and the controller's CPU time over it. Baselines measured in the
//! same run: the controller's CPU at rest with the same nodes and daemon pods over a stretch as
//! long as the rollout, and the same rollout with `maxUnavailable: 1` (given
//! `BERTH_BENCH_BASELINE_SECONDS`, default 300, after which its progress so far is reported and
//! the total extrapolated). `BERTH_CONTROLLER_BIN` picks the controller (a release build gives
//! the meaningful figures; `berth-hollow-nodes` is taken from the same directory).

use std::time::{Duration, Instant};

use berth_tests::Controller;
use berth_tests::bench::{Span, SpanTimer, env_usize, start_hollow};
use berth_tests::client::Req;
use berth_tests::objects::daemon_set;
use serde_json::{Value, json};

const DS: &str = "/apis/apps/v1/namespaces/default/daemonsets/hollow-daemon";
/// How long the first rollout (and the creation) may take before the benchmark gives up.
const DEADLINE: Duration = Duration::from_secs(30 * 60);

fn daemonset() -> Value {
    let mut ds = daemon_set(
        "hollow-daemon",
        "default",
        json!({"containers": [{
            "name": "agent", "image": "nginx:1.14.2",
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
        }]}),
    );
    ds["spec"]["updateStrategy"] =
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}});
    ds["spec"]["template"]["metadata"]["annotations"] = json!({"bench/revision": "1"});
    ds
}

/// Where the DaemonSet's rollout stands: `(updated and available, desired)` once the status
/// describes the latest generation.
fn progress(ds: &Value) -> (u64, u64) {
    let s = &ds["status"];
    let n = |f: &str| s[f].as_u64().unwrap_or(0);
    if s["observedGeneration"] != ds["metadata"]["generation"] {
        return (0, n("desiredNumberScheduled"));
    }
    (
        n("updatedNumberScheduled").min(n("numberAvailable")),
        n("desiredNumberScheduled"),
    )
}

/// Complete as `kubectl rollout status ds` judges it: the latest generation observed, every
/// desired pod updated and available.
fn complete(ds: &Value, nodes: usize) -> bool {
    let s = &ds["status"];
    let n = |f: &str| s[f].as_u64().unwrap_or(0);
    s["observedGeneration"] == ds["metadata"]["generation"]
        && n("desiredNumberScheduled") == nodes as u64
        && n("updatedNumberScheduled") >= nodes as u64
        && n("numberAvailable") >= nodes as u64
}

/// Changes the template (and the update strategy's maxUnavailable) to start a rollout.
fn roll(c: &Controller, revision: u32, max_unavailable: Value) {
    let patch = json!({"spec": {
        "updateStrategy": {"rollingUpdate": {"maxUnavailable": max_unavailable}},
        "template": {"metadata": {"annotations": {"bench/revision": revision.to_string()}}},
    }});
    c.admin_api()
        .expect(Req::patch(DS, "application/merge-patch+json", &patch), 200);
}

/// Waits until the rollout completes or `budget` passes; returns the span and the progress.
fn wait_rollout(c: &Controller, nodes: usize, budget: Duration) -> (Span, (u64, u64), bool) {
    let api = c.admin_api();
    let timer = SpanTimer::start(c);
    let mut last_print = Instant::now();
    let mut last = (0, nodes as u64);
    loop {
        let ds = api.get_ok(DS);
        last = progress(&ds).max(last);
        if complete(&ds, nodes) {
            return (timer.stop(), last, true);
        }
        let span = timer.stop();
        if span.wall >= budget {
            return (span, last, false);
        }
        if last_print.elapsed() >= Duration::from_secs(15) {
            println!(
                "  {:>5.0} s: {} of {} updated and available",
                span.wall.as_secs_f64(),
                last.0,
                last.1
            );
            last_print = Instant::now();
        }
        // not ordering: the poll interval of a benchmark that reads the status until done.
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn main() {
    let nodes = env_usize("BERTH_BENCH_NODES", 1_000);
    let budget = Duration::from_secs(env_usize("BERTH_BENCH_BASELINE_SECONDS", 300) as u64);
    let (c, _hollow) = start_hollow("daemonset_rollout", &format!("nodes={nodes}"), nodes, &[]);

    let api = c.admin_api();
    api.expect(
        Req::post("/apis/apps/v1/namespaces/default/daemonsets", &daemonset()),
        201,
    );
    let (created, _, done) = wait_rollout(&c, nodes, DEADLINE);
    assert!(
        done,
        "the DaemonSet's {nodes} pods were not available in time"
    );

    let (rolled, _, done) = {
        roll(&c, 2, json!("10%"));
        wait_rollout(&c, nodes, DEADLINE)
    };
    assert!(done, "the 10% rollout did not complete in time");

    // Baseline: the controller at rest with the same nodes and pods, as long as the rollout.
    let idle = SpanTimer::start(&c);
    // not ordering: measuring the controller's CPU over an idle stretch of this length.
    std::thread::sleep(rolled.wall);
    let idle = idle.stop();

    roll(&c, 3, json!(1));
    let (one, (updated, desired), one_done) = wait_rollout(&c, nodes, budget);
    let one_result = if one_done {
        one.describe()
    } else {
        let rate = updated as f64 / one.wall.as_secs_f64().max(1e-9);
        format!(
            "{updated} of {desired} nodes in {} → about {:.0} s in all at that rate",
            one.describe(),
            desired as f64 / rate.max(1e-9)
        )
    };

    println!();
    println!("| figure | result | baseline (same run) |");
    println!("|---|---|---|");
    println!(
        "| DaemonSet created → {nodes} daemon pods available on {nodes} hollow nodes | {} | |",
        created.describe()
    );
    println!(
        "| rollout with maxUnavailable 10% → complete: time, controller CPU | {} | controller at rest with {nodes} nodes and pods for as long: {:.1} s CPU ({:.0} % of a core) |",
        rolled.describe(),
        idle.cpu.as_secs_f64(),
        idle.cpu_percent()
    );
    println!("| | | the same rollout with maxUnavailable 1: {one_result} |");
}
