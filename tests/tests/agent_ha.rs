//! Issue 16, acceptance 1: three controllers on a three-member etcd and two agents given all
//! three as `--server`. The seed's `nginx-deployment` rolls out; the leader (which is also the
//! server the agents use) is SIGKILLed in the middle of a `set image` rollout. Another
//! controller takes the Lease within the lease duration, the rollout completes with the right
//! ReplicaSet sizes and never more than replicas + maxSurge pods (asserted from watches
//! through a surviving controller), and the agents switch servers with their containers
//! untouched (same container, same task, no restart).

use std::time::{Duration, Instant};

use berth_tests::etcd::EtcdCluster;
use berth_tests::pod_reading::container_identity;
use berth_tests::pod_specs::{SLEEP_FOREVER, sh_pod};
use berth_tests::rollout::bounds::surge_violations;
use berth_tests::rollout::{
    PodWatch, SizeWatch, hash, replica_sets, spec_replicas, wait_rolled_out,
};
use berth_tests::secs;
use berth_tests::seeds::seed;
use berth_tests::wait::ok_if;

const NS: &str = "default";
const DEPLOY: &str = "nginx-deployment";

#[test]
fn a_rollout_completes_across_a_leader_kill_while_agents_switch_servers_without_restarts() {
    // Declared first: dropped last, after the cluster's teardown no longer needs the store.
    let etcd = EtcdCluster::start(3);
    let (mut c, second, third) = berth_tests::ha::three_controllers(&etcd, &[], 2);

    let path = seed("nginx-deployment.deployment").path;
    c.kubectl().ok(&["apply", "-f", &path.to_string_lossy()]);
    let d = wait_rolled_out(&c, NS, DEPLOY, "nginx:1.14.2", secs(120));
    let first_hash = hash(&replica_sets(&c, &d)[0]).to_string();
    // A pod on each agent that must live through everything untouched.
    let mut steady = Vec::new();
    for i in 0..2 {
        let name = format!("steady-{i}");
        c.apply(&sh_pod(&name, c.node_name(i), SLEEP_FOREVER));
        let pod = c.wait_for_pod_ready(NS, &name, secs(90));
        steady.push((name, container_identity(&pod, "main"), c.running_tasks(i)));
    }

    // Watches through a controller that survives, started before the rollout.
    let sizes = SizeWatch::start_via(
        &c,
        &second,
        &format!("/apis/apps/v1/namespaces/{NS}/replicasets"),
        "app=nginx",
    );
    let pods = PodWatch::start_via(
        &c,
        &second,
        &format!("/api/v1/namespaces/{NS}/pods"),
        "app=nginx",
    );
    c.kubectl().ok(&[
        "set",
        "image",
        &format!("deployment/{DEPLOY}"),
        "nginx=nginx:1.16.1",
    ]);
    // The rollout has begun (the new ReplicaSet exists); kill the leader in its middle.
    sizes.wait_until(&c, secs(30), "a second ReplicaSet with a pod", |s| {
        let by_hash = s.by_hash();
        ok_if(
            by_hash.iter().any(|(h, n)| *h != first_hash && *n > 0),
            format!("{by_hash:?}"),
        )
    });
    let mut old = c.replace_controller(second);
    let killed = Instant::now();
    old.kill9();
    let leader = c.wait_for(secs(30), "another controller to take the Lease", || match (
        c.controller().leads(),
        third.leads(),
    ) {
        (true, false) => Ok("second"),
        (false, true) => Ok("third"),
        other => Err(format!("{other:?}")),
    });
    let failover = killed.elapsed();
    eprintln!("{leader} controller leads {failover:?} after the leader was killed");
    assert!(
        failover <= Duration::from_secs(15 + 2 + 3),
        "failover took {failover:?}"
    );

    let d = wait_rolled_out(&c, NS, DEPLOY, "nginx:1.16.1", secs(180));
    let rss = replica_sets(&c, &d);
    let sizes_now: Vec<(String, i64)> = rss
        .iter()
        .map(|rs| (hash(rs).to_string(), spec_replicas(rs)))
        .collect();
    let new_hash = hash(rss.last().unwrap_or_else(|| panic!("no ReplicaSet"))).to_string();
    assert_ne!(new_hash, first_hash);
    assert_eq!(
        sizes_now,
        vec![(first_hash.clone(), 0), (new_hash.clone(), 3)],
        "the ReplicaSets' sizes after the rollout"
    );
    pods.wait_until(&c, secs(90), "only the 3 new pods", |census| {
        let (total, mine) = (census.total(), census.of_hash(&new_hash));
        ok_if(
            total.counted == 3 && mine.counted == 3 && mine.available == 3,
            "not yet".into(),
        )
    });
    let pods = pods.finish();
    let sizes = sizes.finish();
    let max = sizes.max_total().expect("samples");
    assert!(
        max.total <= 4,
        "the ReplicaSets were sized to {} pods at {}\n{}",
        max.total,
        max.stamp.event,
        sizes.describe()
    );
    let excess = surge_violations(&pods, &sizes, 4);
    assert!(
        excess.is_empty(),
        "more than 3 + 1 pods counted toward the surge:\n{}\n{}",
        excess.join("\n"),
        pods.describe()
    );

    // Both agents moved off the dead server, and their pods ran through it untouched.
    for (i, (name, before, pids_before)) in steady.iter().enumerate() {
        let log = std::fs::read_to_string(c.agent(i).stderr_log()).unwrap_or_default();
        assert!(
            log.contains("switching API server"),
            "agent {i} never switched servers:\n{log}"
        );
        c.assert_pod_untouched(i, (NS, name), secs(30), before, pids_before);
        c.wait_node_ready(i);
    }
    drop(old);
    drop(third);
}
