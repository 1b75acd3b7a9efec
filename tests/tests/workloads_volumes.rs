//! PersistentVolumes end to end, on a real agent with the real kubectl: a `local-path` claim
//! is provisioned on the node the scheduler picks for its first pod, the pod writes into it, a
//! second pod on the same claim reads what the first wrote, the data sits under the agent's
//! local-path dir, and deleting the claim removes the volume and its directory.

use berth_tests::Cluster;
use berth_tests::pod_specs::{SLEEP_FOREVER, sh_container};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::Duration;

const START: Duration = Duration::from_secs(90);
const REACT: Duration = Duration::from_secs(60);

fn claim() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "www"},
        "spec": {
            "storageClassName": "local-path",
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "16Mi"}},
        },
    })
}

/// A pod (scheduled, not bound by hand) mounting the claim at /data and running `script`.
fn pod(name: &str, script: &str) -> Value {
    let mut c = sh_container("main", script);
    c["volumeMounts"] = json!([{"name": "www", "mountPath": "/data"}]);
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [c],
            "volumes": [{"name": "www", "persistentVolumeClaim": {"claimName": "www"}}],
            "terminationGracePeriodSeconds": 2,
        },
    })
}

#[test]
fn a_local_path_claim_keeps_its_data_across_pods_and_goes_with_the_claim() {
    let c = Cluster::start(1);
    let kubectl = c.kubectl();
    let storage = c.agent(0).root_dir().join("storage");

    // The agent publishes its local-path dir on its Node.
    let node = c
        .get(&format!("/api/v1/nodes/{}", c.node_name(0)))
        .unwrap_or(Value::Null);
    assert_eq!(
        node["metadata"]["annotations"]["storage.berth.io/local-path-dir"],
        storage.display().to_string()
    );

    c.apply(&claim());
    c.apply(&pod(
        "writer",
        &format!("echo hello > /data/greeting && {SLEEP_FOREVER}"),
    ));
    c.wait_for_pod_phase("default", "writer", "Running", START);
    let bound = c.wait_for(REACT, "the claim bound", || {
        let pvc = c
            .get("/api/v1/namespaces/default/persistentvolumeclaims/www")
            .unwrap_or(Value::Null);
        match (
            pvc["status"]["phase"].as_str(),
            pvc["spec"]["volumeName"].as_str(),
        ) {
            (Some("Bound"), Some(v)) => Ok((v.to_string(), berth_tests::objects::uid(&pvc))),
            _ => Err(pvc["status"].clone()),
        }
    });
    let (volume, claim_uid) = bound;
    let dir: PathBuf = storage.join(format!("pvc-{claim_uid}_default_www"));
    let pv = c
        .get(&format!("/api/v1/persistentvolumes/{volume}"))
        .unwrap_or(Value::Null);
    assert_eq!(pv["spec"]["hostPath"]["path"], dir.display().to_string());
    c.wait_for(REACT, "the file written on the host", || {
        std::fs::read_to_string(dir.join("greeting")).map_err(|e| e.to_string())
    });

    // A second pod on the same claim sees what the first wrote.
    kubectl.ok(&["delete", "pod", "writer", "--wait=true", "--timeout=60s"]);
    c.apply(&pod("reader", SLEEP_FOREVER));
    c.wait_for_pod_phase("default", "reader", "Running", START);
    let read = c.exec_ok("default", "reader", None, &["cat", "/data/greeting"]);
    assert_eq!(read.trim(), "hello");

    // Pod and claim gone: the volume is deleted and the agent removes its directory.
    kubectl.ok(&["delete", "pod", "reader", "--wait=true", "--timeout=60s"]);
    kubectl.ok(&["delete", "pvc", "www", "--wait=false"]);
    c.wait_for(REACT, "the volume deleted", || {
        match c.get(&format!("/api/v1/persistentvolumes/{volume}")) {
            None => Ok(()),
            Some(pv) => Err(json!({"metadata": pv["metadata"], "status": pv["status"]})),
        }
    });
    assert!(!dir.exists(), "{} is removed", dir.display());
    assert!(storage.is_dir(), "the local-path dir itself stays");
}
