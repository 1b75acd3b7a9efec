//! The controller in process over a real store: pods bound to a node that gains a `NoExecute`
//! taint leave as their tolerations say.

use super::*;
use berth_registry::{Part, WriteOptions};
use berth_runtime::testing::ControlPlane;
use serde_json::json;
use std::time::Duration;

fn node(cp: &ControlPlane) {
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    cp.registry()
        .create(NODES, None, node, &WriteOptions::default())
        .unwrap();
}

fn pod(cp: &ControlPlane, name: &str, tolerations: serde_json::Value) {
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 30, "tolerations": tolerations,
            "containers": [{"name": "c", "image": "busybox:1.28"}]}});
    cp.registry()
        .create(PODS, Some("default"), pod, &WriteOptions::default())
        .unwrap();
}

fn get(cp: &ControlPlane, name: &str) -> Value {
    cp.registry()
        .get(PODS, Some("default"), name)
        .unwrap()
        .value()
        .unwrap()
}

fn evicted(cp: &ControlPlane, name: &str) -> bool {
    !get(cp, name)["metadata"]["deletionTimestamp"].is_null()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_leave_a_no_execute_node_when_their_tolerations_run_out() {
    let cp = ControlPlane::start();
    node(&cp);
    pod(&cp, "intolerant", json!([]));
    pod(
        &cp,
        "brief",
        json!([{"key": "maintenance", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 1}]),
    );
    pod(
        &cp,
        "forever",
        json!([{"key": "maintenance", "operator": "Exists", "effect": "NoExecute"}]),
    );
    let handle = tokio::spawn(run(cp.ctx.clone(), cp.stop.clone()));
    let tainted = Timestamp::now();
    cp.registry()
        .update_with(
            NODES,
            None,
            "n1",
            Part::Main,
            &WriteOptions::default(),
            |mut n| {
                n["spec"]["taints"] = json!([{"key": "maintenance", "effect": "NoExecute",
                    "timeAdded": berth_registry::meta::now_rfc3339()}]);
                Ok::<_, RegistryError>(n)
            },
        )
        .unwrap();
    cp.wait_until(
        "the intolerant pod evicted at once, the brief one later",
        || evicted(&cp, "intolerant") && evicted(&cp, "brief"),
        || format!("{:#}", get(&cp, "brief")),
    )
    .await;
    let waited = Timestamp::now().duration_since(tainted);
    assert!(
        waited >= jiff::SignedDuration::from_millis(500),
        "the 1 s toleration was honoured (timeAdded is to the second): {waited:?}"
    );
    let p = get(&cp, "intolerant");
    let target = p["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "DisruptionTarget"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(target["reason"], "DeletionByTaintManager", "{p:#}");
    assert_eq!(
        p["metadata"]["deletionGracePeriodSeconds"], 30,
        "deleted gracefully"
    );
    let events = cp.list(berth_shared::resource::EVENTS);
    assert!(
        events.iter().any(|e| e["reason"] == "TaintManagerEviction"
            && e["message"] == "Marking for deletion Pod default/intolerant"),
        "{events:#?}"
    );
    assert!(!evicted(&cp, "forever"), "tolerated for ever");
    let quiet = tokio::time::timeout(Duration::from_millis(300), async {
        cp.wait_until(
            "the forever pod evicted",
            || evicted(&cp, "forever"),
            String::new,
        )
        .await
    })
    .await;
    assert!(quiet.is_err(), "the forever pod stays");
    cp.stop.cancel();
    let _ = handle.await;
}
