//! The StatefulSet controller in process over a real store (no agent: the test writes pod
//! status as the agent would): `web-0` and its claim come first, `web-1` only once `web-0` is
//! Running and Ready; a revision is recorded and named in the status; scaling down removes the
//! highest ordinal and keeps its claim.

use berth_registry::{Part, RegistryError, WriteOptions};
use berth_runtime::testing::ControlPlane;
use berth_runtime::testing::edit_status;
use berth_shared::resource::{CONTROLLER_REVISIONS, PERSISTENT_VOLUME_CLAIMS, PODS, STATEFUL_SETS};
use serde_json::{Value, json};

fn names(cp: &ControlPlane, rt: &'static berth_shared::resource::ResourceType) -> Vec<String> {
    let mut n: Vec<String> = cp
        .list(rt)
        .iter()
        .filter(|o| o["metadata"]["deletionTimestamp"].is_null())
        .filter_map(|o| o["metadata"]["name"].as_str().map(String::from))
        .collect();
    n.sort();
    n
}

fn mark_ready(cp: &ControlPlane, name: &str) {
    edit_status(cp.registry(), PODS, name, |p| {
        p["status"] = json!({"phase": "Running",
            "conditions": [{"type": "Ready", "status": "True",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
    });
}

fn set(cp: &ControlPlane) -> Value {
    cp.registry()
        .get(STATEFUL_SETS, Some("default"), "web")
        .expect("set")
        .value()
        .expect("json")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_and_claims_come_in_order_and_scale_down_keeps_the_claims() {
    let cp = ControlPlane::start();
    let handle = tokio::spawn(super::run(cp.ctx.clone(), cp.stop.clone()));
    cp.registry()
        .create(
            STATEFUL_SETS,
            Some("default"),
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"selector": {"matchLabels": {"app": "nginx"}}, "serviceName": "nginx",
                    "replicas": 2,
                    "template": {"metadata": {"labels": {"app": "nginx"}},
                        "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}},
                    "volumeClaimTemplates": [{"metadata": {"name": "www"},
                        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                            "resources": {"requests": {"storage": "1Gi"}}}}]}}),
            &WriteOptions::default(),
        )
        .expect("create");
    let dump = || {
        format!(
            "{:#?}\n{:#?}",
            cp.list(PODS),
            cp.list(PERSISTENT_VOLUME_CLAIMS)
        )
    };
    cp.wait_until(
        "web-0 and its claim",
        || names(&cp, PODS) == ["web-0"] && names(&cp, PERSISTENT_VOLUME_CLAIMS) == ["www-web-0"],
        dump,
    )
    .await;
    let pod = cp
        .registry()
        .get(PODS, Some("default"), "web-0")
        .expect("web-0")
        .value()
        .expect("json");
    assert_eq!(pod["spec"]["hostname"], "web-0");
    assert_eq!(pod["spec"]["subdomain"], "nginx");
    assert_eq!(
        pod["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"],
        "web-0"
    );
    assert_eq!(
        pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"],
        "www-web-0"
    );
    let revision = pod["metadata"]["labels"]["controller-revision-hash"]
        .as_str()
        .expect("revision label")
        .to_string();
    assert_eq!(
        names(&cp, CONTROLLER_REVISIONS),
        std::slice::from_ref(&revision)
    );
    mark_ready(&cp, "web-0");
    cp.wait_until(
        "web-1 once web-0 is ready",
        || names(&cp, PODS) == ["web-0", "web-1"],
        dump,
    )
    .await;
    mark_ready(&cp, "web-1");
    cp.wait_until(
        "the status counts both ready at the revision",
        || {
            let s = set(&cp)["status"].clone();
            s["readyReplicas"] == 2
                && s["currentRevision"] == revision.as_str()
                && s["updateRevision"] == revision.as_str()
                && s["currentReplicas"] == 2
                && s["observedGeneration"] == 1
        },
        || format!("{:#?}", set(&cp)),
    )
    .await;
    cp.registry()
        .update_with(
            STATEFUL_SETS,
            Some("default"),
            "web",
            Part::Main,
            &WriteOptions::default(),
            |mut s| {
                s["spec"]["replicas"] = json!(1);
                Ok::<_, RegistryError>(s)
            },
        )
        .expect("scale");
    // Pods without a node are deleted at once: no agent needs to finish them.
    cp.wait_until(
        "web-1 gone, both claims kept",
        || {
            names(&cp, PODS) == ["web-0"]
                && names(&cp, PERSISTENT_VOLUME_CLAIMS) == ["www-web-0", "www-web-1"]
        },
        dump,
    )
    .await;
    cp.stop.cancel();
    let _ = handle.await;
}
