//! ReplicaSet acceptance 4, on a real agent with the real kubectl: a ReplicaSet adopts a matching
//! bare pod created before it, releases (and replaces) a pod whose labels stop matching, replaces
//! a deleted pod, lets `controller.kubernetes.io/pod-deletion-cost` pick the pod that goes on
//! scale-down, and `kubectl delete rs --cascade=orphan` leaves its pods running, unowned.

use berth_tests::pod_reading::phase;
use berth_tests::pod_specs::{SLEEP_FOREVER, sh_container};
use berth_tests::wait::ok_if;
use berth_tests::{Cluster, secs};
use serde_json::{Value, json};
use std::time::Duration;

const START: Duration = Duration::from_secs(90);
const REACT: Duration = Duration::from_secs(30);

fn pod_spec() -> Value {
    json!({
        "containers": [sh_container("main", SLEEP_FOREVER)],
        "terminationGracePeriodSeconds": 2,
    })
}

fn replicaset(replicas: u32) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "frontend", "labels": {"app": "guestbook", "tier": "frontend"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"tier": "frontend"}},
            "template": {
                "metadata": {"labels": {"tier": "frontend"}},
                "spec": pod_spec(),
            },
        },
    })
}

/// Pods labelled `tier=frontend` that are not being deleted.
fn frontend_pods(c: &Cluster) -> Vec<Value> {
    c.live_pods("default", "tier%3Dfrontend")
}

fn name(p: &Value) -> String {
    berth_tests::rollout::name(p).to_string()
}

/// The uid of the controller owner of `p`, if any.
fn controller_uid(p: &Value) -> Option<String> {
    p["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|o| o["controller"] == true)
        .and_then(|o| o["uid"].as_str())
        .map(str::to_string)
}

/// Waits until exactly `n` non-terminating frontend pods are Running, all owned by `owner`.
fn settle(c: &Cluster, n: usize, owner: &str) -> Vec<String> {
    c.wait_for(
        START,
        &format!("{n} running frontend pods owned by {owner}"),
        || {
            let pods = frontend_pods(c);
            let summary: Vec<String> = pods
                .iter()
                .map(|p| format!("{}:{}:{:?}", name(p), phase(p), controller_uid(p)))
                .collect();
            let good = pods.len() == n
                && pods
                    .iter()
                    .all(|p| phase(p) == "Running" && controller_uid(p).as_deref() == Some(owner));
            if good {
                let mut names: Vec<String> = pods.iter().map(name).collect();
                names.sort();
                Ok(names)
            } else {
                Err(summary)
            }
        },
    )
}

#[test]
fn a_replicaset_adopts_releases_replaces_and_orphans_its_pods() {
    let c = Cluster::start(1);
    let kubectl = c.kubectl();

    // A bare pod matching the selector, running before the ReplicaSet exists.
    c.apply(&json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "pod1", "labels": {"tier": "frontend"}},
        "spec": pod_spec(),
    }));
    c.wait_for_pod_phase("default", "pod1", "Running", START);

    c.apply(&replicaset(3));
    let uid = berth_tests::objects::uid(
        &c.get("/apis/apps/v1/namespaces/default/replicasets/frontend")
            .unwrap(),
    );
    let pods = settle(&c, 3, &uid);
    assert!(pods.contains(&"pod1".to_string()), "pod1 adopted: {pods:?}");
    let pod1 = c.pod("default", "pod1").unwrap();
    let owner = &pod1["metadata"]["ownerReferences"][0];
    assert_eq!(owner["kind"], "ReplicaSet");
    assert_eq!(owner["name"], "frontend");
    assert_eq!(owner["blockOwnerDeletion"], true);
    let created: Vec<&String> = pods.iter().filter(|p| *p != "pod1").collect();
    assert!(
        created.iter().all(|p| p.starts_with("frontend-")),
        "{created:?}"
    );
    // Adoption means only two pods were created.
    let rs_events = c.get("/api/v1/namespaces/default/events").unwrap();
    let creates = rs_events["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["involvedObject"]["name"] == "frontend" && e["reason"] == "SuccessfulCreate")
        .map(|e| e["count"].as_u64().unwrap_or(1))
        .sum::<u64>();
    assert_eq!(creates, 2, "SuccessfulCreate events: {rs_events}");
    // The status counts the pods a pass observed (as upstream's): the pass after the creates
    // reports all three.
    c.wait_for(REACT, "DESIRED and CURRENT 3 in `get rs`", || {
        let table = kubectl.ok(&["get", "rs", "frontend"]);
        let t = berth_tests::Table::parse(&table).unwrap();
        match (t.cell("frontend", "DESIRED"), t.cell("frontend", "CURRENT")) {
            (Some("3"), Some("3")) => Ok(()),
            _ => Err(table),
        }
    });

    // A pod whose labels stop matching is released (no owner) and replaced.
    let released = created[0].clone();
    kubectl.ok(&["label", "pod", &released, "tier=debug", "--overwrite"]);
    let after_release = settle(&c, 3, &uid);
    assert!(!after_release.contains(&released), "{after_release:?}");
    let orphan = c.pod("default", &released).unwrap();
    assert_eq!(phase(&orphan), "Running", "a released pod keeps running");
    assert_eq!(controller_uid(&orphan), None, "{}", orphan["metadata"]);

    // A deleted pod is replaced.
    let victim = after_release.iter().find(|p| *p != "pod1").unwrap().clone();
    kubectl.ok(&["delete", "pod", &victim, "--wait=false"]);
    let after_delete = settle(&c, 3, &uid);
    assert!(!after_delete.contains(&victim), "{after_delete:?}");

    // pod-deletion-cost: pod1 is the oldest (and longest ready) pod, which the default order
    // would keep; its lower cost makes it the one scale-down removes.
    for p in &after_delete {
        let cost = if p == "pod1" { "-100" } else { "100" };
        kubectl.ok(&[
            "annotate",
            "pod",
            p,
            &format!("controller.kubernetes.io/pod-deletion-cost={cost}"),
        ]);
    }
    kubectl.ok(&["scale", "rs", "frontend", "--replicas=2"]);
    let after_scale = settle(&c, 2, &uid);
    assert!(
        !after_scale.contains(&"pod1".to_string()),
        "{after_scale:?}"
    );

    // --cascade=orphan: the ReplicaSet goes, its pods stay and lose their owner reference.
    kubectl.ok(&["delete", "rs", "frontend", "--cascade=orphan"]);
    c.wait_for(REACT, "the ReplicaSet is gone", || {
        match c.get("/apis/apps/v1/namespaces/default/replicasets/frontend") {
            None => Ok(()),
            Some(_) => Err("still there"),
        }
    });
    c.wait_for(REACT, "orphaned pods without owner references", || {
        let pods = frontend_pods(&c);
        let names: Vec<String> = pods.iter().map(name).collect();
        ok_if(
            names.len() == 2 && pods.iter().all(|p| controller_uid(p).is_none()),
            format!("{names:?}"),
        )
    });
    c.ensure_for(secs(3), "the orphaned pods keep running", || {
        let pods = frontend_pods(&c);
        ok_if(
            pods.len() == 2 && pods.iter().all(|p| phase(p) == "Running"),
            pods.iter().map(name).collect::<Vec<_>>(),
        )
    });
}
