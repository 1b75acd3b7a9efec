//! Pod control over a real registry: slow-start creation stops after a failing batch, deletion
//! spares a pod replaced under the same name, and upstream's events are recorded.

use super::*;
use berth_runtime::testing::ControlPlane;
use berth_shared::resource::EVENTS;
use serde_json::json;

fn pod(name: Option<&str>, valid: bool) -> Value {
    let mut p = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "web-", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    if let Some(n) = name {
        p["metadata"]["name"] = json!(n);
    }
    if !valid {
        p["spec"]["containers"] = json!([]);
    }
    p
}

fn reasons(cp: &ControlPlane) -> Vec<String> {
    let mut r: Vec<String> = cp
        .list(EVENTS)
        .iter()
        .map(|e| e["reason"].as_str().unwrap_or_default().to_string())
        .collect();
    r.sort();
    r
}

fn control(cp: &ControlPlane) -> PodControl {
    PodControl::new(cp.registry().clone(), cp.ctx.recorder("test-controller"))
}

#[test]
fn slow_start_doubles_batches_up_to_the_count() {
    assert_eq!(slow_start_batches(10), [1, 2, 4, 3]);
    assert_eq!(slow_start_batches(0), Vec::<usize>::new());
}

#[tokio::test]
async fn creation_stops_after_the_first_batch_with_a_failure() {
    let cp = ControlPlane::start();
    let owner = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web", "namespace": "default", "uid": "rs-uid"}});
    // Batches 1, 2, 4: the second batch has a failing pod, so the third is never tried.
    let pods = [true, true, false, true, true, true, true].map(|ok| pod(None, ok));
    let created = control(&cp).create(&owner, "default", pods.into_iter());
    assert_eq!(created.pods.len(), 2);
    assert!(created.failure.is_some());
    assert!(
        created
            .pods
            .iter()
            .all(|p| p["metadata"]["resourceVersion"].is_string())
    );
    assert_eq!(cp.list(PODS).len(), 2);
    assert_eq!(
        reasons(&cp),
        ["FailedCreate", "SuccessfulCreate", "SuccessfulCreate"]
    );
}

#[tokio::test]
async fn deletion_spares_a_pod_replaced_under_the_same_name() {
    let cp = ControlPlane::start();
    let owner = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web", "namespace": "default", "uid": "rs-uid"}});
    let pc = control(&cp);
    let first = pc.create(&owner, "default", [pod(Some("p"), true)].into_iter());
    let old_uid = first.pods[0]["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        pc.delete(&owner, "default", "p", &old_uid)
            .expect("delete")
            .is_some()
    );
    pc.create(&owner, "default", [pod(Some("p"), true)].into_iter());
    assert!(
        pc.delete(&owner, "default", "p", &old_uid)
            .expect("delete")
            .is_none()
    );
    assert_eq!(cp.list(PODS).len(), 1, "the replacement stays");
    assert!(reasons(&cp).contains(&"SuccessfulDelete".to_string()));
}
