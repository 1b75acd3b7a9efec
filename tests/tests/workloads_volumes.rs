//! PersistentVolumes end to end, on a real agent with the real kubectl: a `local-path` claim
//! is provisioned on the node the scheduler picks for its first pod, the pod writes into it, a
//! second pod on the same claim reads what the first wrote, the data sits under the agent's
//! local-path dir, and deleting the claim removes the volume and its directory. A static
//! hostPath volume binds a claim a pod was already waiting on (no `FailedMount` meanwhile),
//! with `subPath` and `readOnly` mounts, and keeps its data when released (Retain).

use berth_tests::Cluster;
use berth_tests::pod_specs::{SLEEP_FOREVER, sh_container};
use berth_tests::wait::ok_if;
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

/// A static hostPath PersistentVolume (no StorageClass): a pod bound straight to the node with
/// a claim that is not bound yet waits, without a spurious `FailedMount`; once the volume exists the claim
/// binds to it and the pod starts; `subPath` mounts a directory made inside the volume, a
/// `readOnly` mount refuses writes; the volume is Retain, so deleting the claim leaves it
/// Released with its data.
#[test]
fn a_static_host_path_volume_binds_a_waiting_claim_with_sub_path_and_read_only_mounts() {
    let (c, node) = Cluster::start_one();
    let dir = tempfile::tempdir().expect("volume dir");
    c.apply(&json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "static"},
        "spec": {"storageClassName": "", "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "1Gi"}}}}));
    let mut writer = sh_container(
        "writer",
        &format!("echo hello > /sub/file && {SLEEP_FOREVER}"),
    );
    writer["volumeMounts"] = json!([{"name": "v", "mountPath": "/sub", "subPath": "part"}]);
    let mut reader = sh_container(
        "reader",
        &format!("if touch /ro/x 2>/dev/null; then echo writable; fi; {SLEEP_FOREVER}"),
    );
    reader["volumeMounts"] = json!([{"name": "v", "mountPath": "/ro", "readOnly": true}]);
    c.apply(&json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "user"},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1,
                 "containers": [writer, reader],
                 "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "static"}}]}}));
    // A claim not bound yet is no failure: the pod waits, Pending, without `FailedMount` (the
    // kubelet reports one only after its 2m3s wait for attach and mount; the pod worker's
    // table tests cover that).
    let quiet_until = std::time::Instant::now() + Duration::from_secs(5);
    while std::time::Instant::now() < quiet_until {
        let events = c
            .get("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Duser")
            .and_then(|l| l["items"].as_array().cloned())
            .unwrap_or_default();
        let failed: Vec<_> = events
            .iter()
            .filter(|e| e["reason"] == "FailedMount")
            .collect();
        assert!(failed.is_empty(), "a spurious FailedMount: {failed:?}");
        std::thread::sleep(Duration::from_millis(500)); // not ordering: sampling for an absence
    }
    let phase = c
        .get("/api/v1/namespaces/default/pods/user")
        .map(|p| p["status"]["phase"].clone())
        .unwrap_or_default();
    assert_eq!(phase, "Pending", "no container starts without its volume");

    c.apply(&json!({"apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": "static-pv"},
        "spec": {"capacity": {"storage": "2Gi"}, "accessModes": ["ReadWriteOnce"],
                 "hostPath": {"path": dir.path().display().to_string(), "type": "Directory"}}}));
    c.wait_for_pod_ready("default", "user", START);
    let claim = c
        .get("/api/v1/namespaces/default/persistentvolumeclaims/static")
        .unwrap_or_default();
    assert_eq!(claim["spec"]["volumeName"], "static-pv");
    assert_eq!(claim["status"]["capacity"]["storage"], "2Gi");
    let on_host = std::fs::read_to_string(dir.path().join("part").join("file"))
        .expect("the subPath file on the host");
    assert_eq!(on_host.trim(), "hello");
    let seen = c.exec_ok("default", "user", Some("reader"), &["cat", "/ro/part/file"]);
    assert_eq!(seen.trim(), "hello");
    let logs = c.kubectl().ok(&["logs", "user", "-c", "reader"]);
    assert!(
        !logs.contains("writable"),
        "a readOnly mount took a write: {logs}"
    );

    c.kubectl()
        .ok(&["delete", "pod", "user", "--wait=true", "--timeout=60s"]);
    c.kubectl()
        .ok(&["delete", "pvc", "static", "--wait=true", "--timeout=60s"]);
    c.wait_for(REACT, "the volume Released, its data kept", || {
        let pv = c.get("/api/v1/persistentvolumes/static-pv").ok_or("gone")?;
        ok_if(
            pv["status"]["phase"] == "Released",
            format!("{}", pv["status"]),
        )
    });
    assert!(
        dir.path().join("part").join("file").exists(),
        "Retain keeps the data"
    );
}
