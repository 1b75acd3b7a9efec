//! The controller over a real registry, store and informers (no agent, no ReplicaSet
//! controller): the test plays the ReplicaSet controller by writing each ReplicaSet's status as
//! if all its pods were up, and checks a rollout from one image to another end to end.

use super::*;
use berth_registry::{Part, WriteOptions};
use berth_runtime::testing::ControlPlane;
use berth_shared::resource::{EVENTS, ResourceType};
use serde_json::{Value, json};

fn nginx(image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "nginx-deployment", "namespace": "default",
            "labels": {"app": "nginx"}},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {
                "metadata": {"labels": {"app": "nginx"}},
                "spec": {"containers": [{"name": "nginx", "image": image,
                    "ports": [{"containerPort": 80}]}]}
            }
        }
    })
}

fn list(registry: &Registry, rt: &ResourceType) -> Vec<Value> {
    registry.list_values(rt, Some("default")).unwrap()
}

fn image_of(rs: &Value) -> &str {
    rs.pointer("/spec/template/spec/containers/0/image")
        .and_then(Value::as_str)
        .unwrap()
}

fn replicas_of(rs: &Value) -> i64 {
    rs.pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap()
}

/// The ReplicaSet controller and kubelets in one: every ReplicaSet reports all its pods
/// created, ready and available. True when some status changed.
fn pods_up(registry: &Registry) -> bool {
    let rt = REPLICA_SETS;
    let mut changed = false;
    for rs in list(registry, rt) {
        let n = replicas_of(&rs);
        let status = json!({
            "replicas": n, "fullyLabeledReplicas": n, "readyReplicas": n,
            "availableReplicas": n,
            "observedGeneration": rs.pointer("/metadata/generation").cloned().unwrap_or(json!(1)),
        });
        let current = rs.get("status").cloned().unwrap_or(json!({}));
        if current == status {
            continue;
        }
        let name = rs
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap();
        registry
            .update_with(
                rt,
                Some("default"),
                name,
                Part::Status,
                &WriteOptions::default(),
                |mut obj| {
                    obj["status"] = status.clone();
                    Ok::<_, RegistryError>(obj)
                },
            )
            .unwrap();
        changed = true;
    }
    changed
}

fn deployment(registry: &Registry) -> Value {
    registry
        .get(DEPLOYMENTS, Some("default"), "nginx-deployment")
        .unwrap()
        .value()
        .unwrap()
}

/// Passes of the controller, each followed by the pods catching up, until nothing moves;
/// checks after every pass that at most `max_total` pods are wanted and at least
/// `min_available` are available.
async fn converge(cp: &ControlPlane, c: &Controller, min_available: i64, max_total: i64) {
    let registry = cp.registry();
    for _ in 0..40 {
        let before = registry.revision();
        // A pass reads the informers: they first catch up with the last pass's writes.
        cp.caught_up().await;
        c.reconcile(&ObjectKey::new(Some("default"), "nginx-deployment"))
            .unwrap();
        let rss = list(registry, REPLICA_SETS);
        let total: i64 = rss.iter().map(replicas_of).sum();
        assert!(total <= max_total, "{total} pods wanted");
        pods_up(registry);
        let available: i64 = list(registry, REPLICA_SETS)
            .iter()
            .map(|rs| {
                rs.pointer("/status/availableReplicas")
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
            })
            .sum();
        assert!(available >= min_available, "{available} available");
        if registry.revision() == before {
            return;
        }
    }
    panic!("no convergence");
}

#[tokio::test]
async fn a_rollout_from_one_image_to_another_ends_with_one_replica_set_at_three() {
    let cp = ControlPlane::start();
    let registry = cp.registry().clone();
    let c = Controller::new(&cp.ctx);
    let drt = DEPLOYMENTS;
    registry
        .create(
            drt,
            Some("default"),
            nginx("nginx:1.14.2"),
            &WriteOptions::default(),
        )
        .unwrap();
    converge(&cp, &c, 0, 4).await;
    let rss = list(&registry, REPLICA_SETS);
    assert_eq!(rss.len(), 1);
    assert_eq!(replicas_of(&rss[0]), 3);
    let d = deployment(&registry);
    assert_eq!(
        d["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "1"
    );
    assert_eq!(d["status"]["availableReplicas"], 3);

    // `kubectl set image deployment/nginx-deployment nginx=nginx:1.16.1`
    registry
        .update_with(
            drt,
            Some("default"),
            "nginx-deployment",
            Part::Main,
            &WriteOptions::default(),
            |mut obj| {
                obj["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.16.1");
                Ok::<_, RegistryError>(obj)
            },
        )
        .unwrap();
    converge(&cp, &c, 3, 4).await;

    let rss = list(&registry, REPLICA_SETS);
    let mut sizes: Vec<(String, i64)> = rss
        .iter()
        .map(|rs| (image_of(rs).to_string(), replicas_of(rs)))
        .collect();
    sizes.sort();
    assert_eq!(
        sizes,
        vec![("nginx:1.14.2".into(), 0), ("nginx:1.16.1".into(), 3)]
    );
    let new = rss
        .iter()
        .find(|rs| image_of(rs) == "nginx:1.16.1")
        .unwrap();
    let hash = new["metadata"]["labels"]["pod-template-hash"]
        .as_str()
        .unwrap();
    assert_eq!(
        new["metadata"]["name"],
        json!(format!("nginx-deployment-{hash}"))
    );
    assert_eq!(
        new["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "2"
    );
    assert_eq!(new["metadata"]["ownerReferences"][0]["controller"], true);

    // What `kubectl rollout status` waits for.
    let d = deployment(&registry);
    assert_eq!(
        d["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "2"
    );
    let s = &d["status"];
    assert_eq!(s["observedGeneration"], d["metadata"]["generation"]);
    assert_eq!(
        (
            &s["replicas"],
            &s["updatedReplicas"],
            &s["availableReplicas"]
        ),
        (&json!(3), &json!(3), &json!(3))
    );
    let progressing = s["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Progressing")
        .unwrap();
    assert_eq!(progressing["reason"], "NewReplicaSetAvailable");

    let events = list(&registry, EVENTS);
    let scaling: Vec<&str> = events
        .iter()
        .filter(|e| e["reason"] == "ScalingReplicaSet")
        .map(|e| {
            assert_eq!(e["source"]["component"], COMPONENT);
            e["message"].as_str().unwrap()
        })
        .collect();
    assert_eq!(scaling.len(), 7, "{scaling:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_running_controller_follows_watch_events() {
    let cp = ControlPlane::start();
    let registry = cp.registry().clone();
    let task = tokio::spawn(run(cp.ctx.clone(), cp.stop.clone()));
    registry
        .create(
            DEPLOYMENTS,
            Some("default"),
            nginx("nginx:1.14.2"),
            &WriteOptions::default(),
        )
        .unwrap();
    // Each check plays the ReplicaSet controller once; its writes wake the next check.
    cp.wait_until(
        "the Deployment to be available",
        || {
            pods_up(&registry);
            let d = deployment(&registry);
            d["status"]["availableReplicas"] == 3
                && d["status"]["conditions"]
                    .as_array()
                    .is_some_and(|cs| cs.iter().any(|c| c["reason"] == "NewReplicaSetAvailable"))
        },
        || deployment(&registry)["status"].to_string(),
    )
    .await;
    cp.stop.cancel();
    task.await.unwrap();
}

/// A ReplicaSet without a controller that the Deployment's selector matches.
fn orphan_replica_set() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "stray", "namespace": "default", "labels": {"app": "nginx"}},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {
                "metadata": {"labels": {"app": "nginx"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.14.2"}]}
            }
        }
    })
}

#[tokio::test]
async fn a_deployment_deleted_or_replaced_since_the_informer_read_adopts_nothing() {
    for replaced in [false, true] {
        let cp = ControlPlane::start();
        let c = Controller::new(&cp.ctx);
        let opts = WriteOptions::default();
        let reg = cp.registry();
        reg.create(DEPLOYMENTS, Some("default"), nginx("nginx:1.14.2"), &opts)
            .unwrap();
        reg.create(REPLICA_SETS, Some("default"), orphan_replica_set(), &opts)
            .unwrap();
        cp.caught_up().await;
        // Between the informers' read and the adoption (no await: they still hold the old
        // Deployment), it goes, or another of the same name takes its place.
        reg.delete(
            DEPLOYMENTS,
            Some("default"),
            "nginx-deployment",
            &Default::default(),
        )
        .unwrap();
        if replaced {
            reg.create(DEPLOYMENTS, Some("default"), nginx("nginx:1.16.1"), &opts)
                .unwrap();
        }
        let r = c.reconcile(&ObjectKey::new(Some("default"), "nginx-deployment"));
        assert!(
            matches!(r, Err(SyncError::OwnerGone(_))),
            "replaced: {replaced}: {r:?}"
        );
        let rs = reg.get(REPLICA_SETS, Some("default"), "stray").unwrap();
        let rs = rs.value().unwrap();
        assert!(
            rs.pointer("/metadata/ownerReferences").is_none(),
            "replaced: {replaced}: adopted by a Deployment that is not there: {rs:#}"
        );
    }
}
