//! The collector in process over a real store, with a short quarantine: pods of a deleted
//! node are force-deleted; pods on live nodes and pending pods stay.

use super::*;
use berth_runtime::testing::ControlPlane;
use berth_runtime::testing::edit_status;
use std::time::Duration;

fn create_node(cp: &ControlPlane, name: &str) {
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    cp.registry()
        .create(NODES, None, node, &WriteOptions::default())
        .unwrap();
}

fn create_pod(cp: &ControlPlane, name: &str, node: Option<&str>) {
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.28"}]}});
    if let Some(n) = node {
        pod["spec"]["nodeName"] = json!(n);
    }
    cp.registry()
        .create(PODS, Some("default"), pod, &WriteOptions::default())
        .unwrap();
}

fn exists(cp: &ControlPlane, name: &str) -> bool {
    cp.registry().get(PODS, Some("default"), name).is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_nothing_else_can_finish_are_collected() {
    let cp = ControlPlane::start();
    create_node(&cp, "gone");
    create_node(&cp, "here");
    create_pod(&cp, "orphan", Some("gone"));
    create_pod(&cp, "kept", Some("here"));
    create_pod(&cp, "pending", None);
    let config = Config {
        quarantine: Duration::from_millis(300),
        ..Config::default()
    };
    let handle = tokio::spawn(run(cp.ctx.clone(), config, cp.stop.clone()));
    cp.registry()
        .delete(NODES, None, "gone", &DeleteOptions::default())
        .unwrap();
    cp.wait_until(
        "the orphan collected",
        || !exists(&cp, "orphan"),
        || "still there".to_string(),
    )
    .await;
    assert!(exists(&cp, "kept"), "a pod on a live node stays");
    assert!(exists(&cp, "pending"), "a pending pod stays");
    let events = cp.list(berth_shared::resource::EVENTS);
    assert!(
        events.is_empty(),
        "the collector records no event: {events:#?}"
    );
    cp.stop.cancel();
    let _ = handle.await;
}

fn finish_pod(cp: &ControlPlane, name: &str, phase: &str) {
    edit_status(cp.registry(), PODS, name, |p| {
        p["status"]["phase"] = json!(phase)
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_pods_beyond_the_threshold_are_collected_oldest_first() {
    let cp = ControlPlane::start();
    create_node(&cp, "here");
    create_pod(&cp, "running", Some("here"));
    for i in 0..5 {
        let name = format!("done-{i}");
        create_pod(&cp, &name, Some("here"));
        // Creation timestamps have second precision: the oldest must be older.
        if i == 0 {
            tokio::time::sleep(Duration::from_millis(1100)).await; // not ordering: a new creation second
        }
        finish_pod(&cp, &name, if i % 2 == 0 { "Succeeded" } else { "Failed" });
    }
    let config = Config {
        terminated_threshold: 3,
        ..Config::default()
    };
    let handle = tokio::spawn(run(cp.ctx.clone(), config, cp.stop.clone()));
    let left = || (0..5).filter(|i| exists(&cp, &format!("done-{i}"))).count();
    cp.wait_until(
        "two finished pods collected",
        || left() == 3,
        || format!("{} left", left()),
    )
    .await;
    assert!(!exists(&cp, "done-0"), "the oldest finished pod goes first");
    assert!(exists(&cp, "running"), "a running pod is never collected");
    cp.stop.cancel();
    let _ = handle.await;
}
