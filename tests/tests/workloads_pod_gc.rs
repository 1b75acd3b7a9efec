//! The pod garbage collector's finished-pod threshold on a real agent: with
//! `--terminated-pod-gc-threshold 10`, 25 pods that run to completion leave the 10 newest
//! (upstream's `gcTerminated`), and a running pod is never collected.

use std::collections::BTreeSet;
use std::time::Duration;

use berth_tests::{Cluster, ClusterConfig, secs};
use serde_json::{Value, json};

const NS: &str = "default";

/// Pods `first..first+count` that print a line and exit 0.
fn finishing_pods(first: usize, count: usize) -> Value {
    let items: Vec<Value> = (first..first + count)
        .map(|i| {
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("done-{i:02}"), "namespace": NS,
                    "labels": {"app": "finishing"}},
                "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "main", "image": "busybox:1.28",
                        "command": ["sh", "-c", "echo done"]}]}})
        })
        .collect();
    json!({"apiVersion": "v1", "kind": "List", "items": items})
}

/// The names of the pods labelled `app=finishing`.
fn finishing_names(c: &Cluster) -> BTreeSet<String> {
    let list = c
        .kubectl()
        .ok(&["get", "pods", "-n", NS, "-l", "app=finishing", "-o", "json"]);
    let list: Value = serde_json::from_str(&list).unwrap_or(Value::Null);
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["metadata"]["name"].as_str().map(String::from))
        .collect()
}

#[test]
fn finished_pods_beyond_the_threshold_are_deleted_oldest_first() {
    let c = Cluster::start_with(ClusterConfig {
        controller_args: vec!["--terminated-pod-gc-threshold".into(), "10".into()],
        ..ClusterConfig::agents(1)
    });
    c.kubectl().ok(&[
        "run",
        "runner",
        "-n",
        NS,
        "--image",
        "busybox:1.28",
        "--restart",
        "Never",
        "--",
        "sleep",
        "3600",
    ]);
    // Three batches a second apart (creation timestamps have second precision): the newest
    // batch holds the 10 pods that must stay.
    c.apply(&finishing_pods(0, 10));
    std::thread::sleep(Duration::from_millis(1100)); // not ordering: a new creation second
    c.apply(&finishing_pods(10, 5));
    std::thread::sleep(Duration::from_millis(1100)); // not ordering: a new creation second
    c.apply(&finishing_pods(15, 10));
    let newest: BTreeSet<String> = (15..25).map(|i| format!("done-{i:02}")).collect();
    c.wait_for(secs(120), "only the 10 newest finished pods left", || {
        let names = finishing_names(&c);
        if names == newest { Ok(()) } else { Err(names) }
    });
    c.ensure_for(secs(3), "the 10 newest stay", || {
        let names = finishing_names(&c);
        if names == newest { Ok(()) } else { Err(names) }
    });
    let runner = c
        .kubectl()
        .ok(&["get", "pod", "runner", "-n", NS, "-o", "name"]);
    assert_eq!(
        runner.trim(),
        "pod/runner",
        "a running pod is never collected"
    );
}
