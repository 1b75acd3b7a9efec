//! Agent acceptance 6: deletion. A container that handles SIGTERM exits promptly and its pod is
//! gone soon after; one that ignores SIGTERM is killed at the end of its grace period (5 s,
//! measured: at least 4.5 s and under 15 s); `kubectl delete --grace-period=0 --force` still
//! stops the containers; a preStop hook runs to its end before SIGTERM is sent; and a deleted
//! pod leaves no container and no network namespace behind.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use berth_tests::pod_reading::{container_id, container_status};
use berth_tests::pod_specs::{SLEEP_FOREVER, bound_pod, sh_container, sh_pod};
use berth_tests::{Cluster, secs};
use serde_json::json;

const START: Duration = secs(90);

/// Deletes `pods` at the same moment and returns, per pod, how long its API object lived on.
fn delete_and_time(c: &Cluster, pods: &[&str]) -> BTreeMap<String, Duration> {
    let start = Instant::now();
    let mut args = vec!["delete", "pod", "--wait=false"];
    args.extend(pods);
    c.kubectl().ok(&args);
    let mut gone: BTreeMap<String, Duration> = BTreeMap::new();
    c.wait_for(secs(60), &format!("pods {pods:?} removed"), || {
        for p in pods {
            if !gone.contains_key(*p) && c.pod("default", p).is_none() {
                gone.insert(p.to_string(), start.elapsed());
            }
        }
        if gone.len() == pods.len() {
            Ok(gone.clone())
        } else {
            Err(gone.clone())
        }
    })
}

#[test]
fn sigterm_comes_first_and_sigkill_at_the_end_of_the_grace_period() {
    let (c, node) = Cluster::start_one();
    c.apply(&sh_pod("handles-term", &node, SLEEP_FOREVER));
    let mut ignorer = sh_pod("ignores-term", &node, "trap '' TERM; sleep 3600");
    ignorer["spec"]["terminationGracePeriodSeconds"] = json!(5);
    c.apply(&ignorer);
    c.apply(&sh_pod("forced", &node, SLEEP_FOREVER));
    let mut uids = BTreeMap::new();
    let mut ids = BTreeMap::new();
    for pod in ["handles-term", "ignores-term", "forced"] {
        let p = c.wait_for_pod_ready("default", pod, START);
        uids.insert(pod, p["metadata"]["uid"].as_str().unwrap().to_string());
        let cs = container_status(&p, "main").unwrap();
        ids.insert(pod, container_id(cs).unwrap().to_string());
    }
    assert!(ids.values().all(|id| c.containers(0).contains(id)));

    let lived = delete_and_time(&c, &["handles-term", "ignores-term"]);
    let prompt = lived["handles-term"];
    let killed = lived["ignores-term"];
    // Well inside the default 30 s grace period: the container got SIGTERM, not just SIGKILL.
    assert!(
        prompt < secs(10),
        "a SIGTERM handler's pod took {prompt:.1?} to go"
    );
    assert!(
        killed >= Duration::from_millis(4500) && killed < secs(15),
        "SIGKILL must come at the end of the 5 s grace period; the pod took {killed:.1?}"
    );

    // A forced deletion removes the object at once; the agent still stops the container.
    c.kubectl()
        .ok(&["delete", "pod", "forced", "--grace-period=0", "--force"]);
    assert!(c.pod("default", "forced").is_none());

    c.wait_for(
        secs(45),
        "the deleted pods' containers and netns removed",
        || {
            let containers = c.containers(0);
            let netns = c.netns(0);
            let left: Vec<String> = ids
                .values()
                .filter(|id| containers.contains(id))
                .cloned()
                .chain(
                    uids.values()
                        .filter(|uid| netns.iter().any(|n| n.contains(uid.as_str())))
                        .map(|uid| format!("netns of {uid}")),
                )
                .collect();
            if left.is_empty() { Ok(()) } else { Err(left) }
        },
    );
}

#[test]
fn pre_stop_runs_to_its_end_before_sigterm() {
    let (c, node) = Cluster::start_one();
    let host = c.scratch().join("hooks");
    std::fs::create_dir_all(&host).unwrap();
    let mut main = sh_container(
        "main",
        "trap 'echo term >> /host/log; exit 0' TERM; while true; do sleep 1; done",
    );
    main["volumeMounts"] = json!([{"name": "host", "mountPath": "/host"}]);
    main["lifecycle"] = json!({"preStop": {"exec": {"command":
        ["sh", "-c", "echo prestop-begin >> /host/log; sleep 2; echo prestop-end >> /host/log"]}}});
    c.apply(&bound_pod(
        "hooked",
        &node,
        json!({
            "volumes": [{"name": "host", "hostPath": {"path": host.to_string_lossy()}}],
            "containers": [main],
        }),
    ));
    c.wait_for_pod_ready("default", "hooked", START);
    let lived = delete_and_time(&c, &["hooked"]);
    assert!(
        lived["hooked"] >= secs(2),
        "the preStop hook takes 2 s: {lived:?}"
    );
    let log = std::fs::read_to_string(host.join("log")).unwrap_or_default();
    assert_eq!(log, "prestop-begin\nprestop-end\nterm\n");
}
