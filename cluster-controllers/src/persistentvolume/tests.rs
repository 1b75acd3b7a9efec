//! The controller in process over a real store: a claim of the default (local-path) class
//! whose first consumer was placed on a node gets a volume provisioned there, and both end
//! Bound; deleting the claim waits for the pod using it, then releases the volume, which is
//! deleted and left to the node's cleanup finalizer.

use berth_registry::{DeleteOptions, RegistryError, WriteOptions};
use berth_runtime::testing::ControlPlane;
use berth_shared::resource::{
    NODES, PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, PODS, ResourceType,
};
use serde_json::{Value, json};

fn create(cp: &ControlPlane, rt: &'static ResourceType, ns: Option<&str>, obj: Value) -> Value {
    cp.registry()
        .create(rt, ns, obj, &WriteOptions::default())
        .expect("created")
}

fn volumes(cp: &ControlPlane) -> Vec<Value> {
    cp.registry()
        .list_values(PERSISTENT_VOLUMES, None)
        .expect("list volumes")
}

fn claim(cp: &ControlPlane) -> Option<Value> {
    match cp
        .registry()
        .get(PERSISTENT_VOLUME_CLAIMS, Some("default"), "data")
    {
        Ok(o) => Some(o.value().expect("json")),
        Err(RegistryError::NotFound { .. }) => None,
        Err(e) => panic!("reading the claim: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_with_a_selected_node_gets_a_local_path_volume_that_is_deleted_after_the_claim() {
    let cp = ControlPlane::start();
    berth_registry::local_path_class::ensure(cp.registry()).expect("local-path class");
    let handle = tokio::spawn(super::run(cp.ctx.clone(), cp.stop.clone()));
    create(
        &cp,
        NODES,
        None,
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1",
            "labels": {"kubernetes.io/hostname": "n1"},
            "annotations": {"storage.berth.io/local-path-dir": "/srv/berth"}}}),
    );
    let stored = create(
        &cp,
        PERSISTENT_VOLUME_CLAIMS,
        Some("default"),
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data",
                "annotations": {"volume.kubernetes.io/selected-node": "n1"}},
            "spec": {"accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}}}),
    );
    let uid = stored["metadata"]["uid"].as_str().expect("uid").to_string();
    let pv_name = format!("pvc-{uid}");
    create(
        &cp,
        PODS,
        Some("default"),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "user"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}],
                "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}}),
    );
    let dump = || format!("{:#?}\n{:#?}", claim(&cp), volumes(&cp));
    cp.wait_until(
        "the claim and its provisioned volume bound",
        || {
            let c = claim(&cp).unwrap_or_default();
            let bound = volumes(&cp).iter().any(|v| {
                v["metadata"]["name"] == pv_name.as_str() && v["status"]["phase"] == "Bound"
            });
            bound && c["status"]["phase"] == "Bound" && c["spec"]["volumeName"] == pv_name.as_str()
        },
        dump,
    )
    .await;
    let pv = volumes(&cp)
        .into_iter()
        .find(|v| v["metadata"]["name"] == pv_name.as_str())
        .expect("the volume");
    assert_eq!(
        pv["spec"]["hostPath"]["path"],
        format!("/srv/berth/{pv_name}_default_data")
    );
    assert_eq!(pv["spec"]["claimRef"]["uid"], uid.as_str());
    let c = claim(&cp).expect("the claim");
    assert_eq!(c["spec"]["storageClassName"], "local-path");
    assert_eq!(c["status"]["capacity"]["storage"], "1Gi");
    assert_eq!(
        c["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"],
        "yes"
    );
    assert_eq!(
        c["metadata"]["annotations"]["volume.kubernetes.io/storage-provisioner"],
        "berth.io/local-path"
    );

    cp.registry()
        .delete(
            PERSISTENT_VOLUME_CLAIMS,
            Some("default"),
            "data",
            &DeleteOptions::default(),
        )
        .expect("claim deleted");
    cp.caught_up().await;
    assert!(
        claim(&cp).is_some_and(|c| c["metadata"]["deletionTimestamp"].is_string()),
        "the pod keeps the claim: {}",
        dump()
    );
    // Forced: no agent runs here to finish a graceful deletion.
    let force = DeleteOptions {
        grace_period_seconds: Some(0),
        ..DeleteOptions::default()
    };
    cp.registry()
        .delete(PODS, Some("default"), "user", &force)
        .expect("pod deleted");
    cp.wait_until(
        "the volume deleted, waiting for its node's cleanup",
        || {
            claim(&cp).is_none()
                && volumes(&cp).iter().any(|v| {
                    v["metadata"]["name"] == pv_name.as_str()
                        && v["metadata"]["deletionTimestamp"].is_string()
                        && v["metadata"]["finalizers"]
                            == json!(["storage.berth.io/local-path-cleanup"])
                })
        },
        dump,
    )
    .await;
    cp.stop.cancel();
    let _ = handle.await;
}
