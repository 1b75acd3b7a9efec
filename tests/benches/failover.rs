//! Leader failover on etcd (prints figures, never fails on them): three controllers on a
//! three-member etcd; the leader is SIGKILLed and a ReplicaSet created through a survivor at
//! the same moment. Prints, per run, the time until another controller holds the Lease and
//! until the new leader's first action (the ReplicaSet's first pod exists), next to the
//! baseline: the same ReplicaSet's first pod with a live leader, measured in the same run.
//! `BERTH_BENCH_RUNS` (default 3); `BERTH_CONTROLLER_BIN` picks the binary.

use std::time::{Duration, Instant};

use berth_tests::bench::{built, env_usize};
use berth_tests::controller::controller_binary;
use berth_tests::etcd::EtcdCluster;
use berth_tests::stats::Samples;
use berth_tests::{Api, Controller};
use serde_json::json;

fn replica_set(name: &str) -> serde_json::Value {
    json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
          "template": {"metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})
}

/// Creates a ReplicaSet through `api` and returns how long until its first pod exists.
fn first_action(api: &Api, name: &str, deadline: Duration) -> Duration {
    let start = Instant::now();
    api.create(
        "/apis/apps/v1/namespaces/default/replicasets",
        &replica_set(name),
    );
    loop {
        let pods = api.get_ok(&format!(
            "/api/v1/namespaces/default/pods?labelSelector=app%3D{name}"
        ));
        if pods["items"].as_array().is_some_and(|i| !i.is_empty()) {
            return start.elapsed();
        }
        assert!(start.elapsed() < deadline, "no pod for {name}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn main() {
    let runs = env_usize("BERTH_BENCH_RUNS", 3);
    let bin = controller_binary();
    let build = built(&bin);
    println!("failover bench: {build}, runs={runs}");
    let (mut lease, mut action, mut baseline) = (Samples::new(), Samples::new(), Samples::new());
    for run in 0..runs {
        let etcd = EtcdCluster::start(3);
        let endpoints = etcd.endpoints();
        let args = ["--datastore-endpoint", endpoints.as_str()];
        let first = Controller::start_with(&args);
        let mut cs = vec![first];
        cs.push(Controller::start_joining(&cs[0], &args));
        cs.push(Controller::start_joining(&cs[0], &args));
        let deadline = Instant::now() + Duration::from_secs(30);
        let leader = loop {
            if let Some(i) = (0..3).find(|&i| cs[i].leads()) {
                break i;
            }
            assert!(Instant::now() < deadline, "no leader");
            std::thread::sleep(Duration::from_millis(50));
        };
        let survivor = (leader + 1) % 3;
        let api = cs[survivor].admin_api();
        baseline.push(first_action(
            &api,
            &format!("before-{run}"),
            Duration::from_secs(30),
        ));
        let killed = Instant::now();
        cs[leader].kill9();
        let waiter = std::thread::scope(|s| {
            let others: Vec<&Controller> =
                (0..3).filter(|&i| i != leader).map(|i| &cs[i]).collect();
            let t = s.spawn(move || {
                loop {
                    if others.iter().any(|c| c.leads()) {
                        return killed.elapsed();
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            });
            action.push(first_action(
                &api,
                &format!("after-{run}"),
                Duration::from_secs(60),
            ));
            t.join().unwrap_or_else(|_| panic!("lease watcher"))
        });
        lease.push(waiter);
        drop(cs);
        drop(etcd);
    }
    let secs = |s: &mut Samples, p: f64| s.percentile(p).map_or(f64::NAN, |d| d.as_secs_f64());
    println!(
        "failover_lease_taken_s p50={:.2} max={:.2} (n={runs}; lease 15 s, retry 2 s)",
        secs(&mut lease, 50.0),
        secs(&mut lease, 100.0)
    );
    println!(
        "failover_first_action_s p50={:.2} max={:.2} (n={runs}; leader killed → the ReplicaSet created at that moment has a pod)",
        secs(&mut action, 50.0),
        secs(&mut action, 100.0)
    );
    println!(
        "baseline_first_action_ms {} (the same with a live leader)",
        baseline.p50_p99_ms()
    );
}
