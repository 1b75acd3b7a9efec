//! Issue 13, StatefulSets on a real agent driven with the real kubectl (pods without claims
//! here; claims need the agent's PersistentVolume mounts): `web-N` are made one at a time,
//! each only once its predecessor is Running and Ready, with hostname `web-N`, subdomain
//! `nginx` and the pod-name label; `kubectl rollout status sts` completes; `kubectl scale sts`
//! removes the highest ordinals; `kubectl rollout restart sts` replaces the pods from the
//! highest ordinal down, each after the previous is Ready; `rollout history` lists both
//! revisions and `rollout undo` brings the first template back as the update revision.

use berth_tests::pod_reading::is_ready;
use berth_tests::pod_specs::sh_container;
use berth_tests::{Cluster, secs};
use serde_json::{Value, json};

const STS: &str = "/apis/apps/v1/namespaces/default/statefulsets/web";

fn web(replicas: u32) -> Value {
    let mut main = sh_container(
        "main",
        "sleep 1; touch /tmp/ready; trap 'exit 0' TERM; while true; do sleep 1; done",
    );
    main["readinessProbe"] = json!({"exec": {"command": ["test", "-f", "/tmp/ready"]},
                                     "periodSeconds": 1, "failureThreshold": 1});
    json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": replicas, "serviceName": "nginx",
                 "selector": {"matchLabels": {"app": "nginx"}},
                 "template": {"metadata": {"labels": {"app": "nginx"}},
                              "spec": {"terminationGracePeriodSeconds": 1,
                                       "containers": [main]}}}})
}

/// The live pods of the set, by name.
fn live(c: &Cluster) -> Vec<Value> {
    let mut pods: Vec<Value> = c
        .get("/api/v1/namespaces/default/pods?labelSelector=app%3Dnginx")
        .and_then(|l| l["items"].as_array().cloned())
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .collect();
    pods.sort_by_key(|p| {
        p["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    });
    pods
}

fn names(pods: &[Value]) -> Vec<String> {
    pods.iter()
        .map(|p| {
            p["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// Waits until exactly `want` are live, all Ready, all labelled with `revision` (any when
/// empty).
fn wait_ready(c: &Cluster, want: &[&str], revision: &str) -> Vec<Value> {
    c.wait_for(secs(90), &format!("{want:?} ready at {revision:?}"), || {
        let pods = live(c);
        let ok = names(&pods) == want
            && pods.iter().all(|p| {
                is_ready(p)
                    && (revision.is_empty()
                        || p["metadata"]["labels"]["controller-revision-hash"] == revision)
            });
        if ok {
            Ok(pods)
        } else {
            Err(format!("{:?}", names(&pods)))
        }
    })
}

fn time(v: &Value) -> jiff::Timestamp {
    v.as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("not a time: {v}"))
}

fn created(p: &Value) -> jiff::Timestamp {
    time(&p["metadata"]["creationTimestamp"])
}

fn ready_since(p: &Value) -> jiff::Timestamp {
    let cond = p["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .cloned()
        .unwrap_or_default();
    time(&cond["lastTransitionTime"])
}

fn status(c: &Cluster) -> Value {
    c.get(STS).map(|s| s["status"].clone()).unwrap_or_default()
}

#[test]
fn ordered_creation_identity_scaling_rolling_update_and_undo() {
    let c = Cluster::start(1);
    c.apply(&web(3));
    let pods = wait_ready(&c, &["web-0", "web-1", "web-2"], "");
    for w in pods.windows(2) {
        assert!(
            created(&w[1]) >= ready_since(&w[0]),
            "{} was made before {} was ready",
            w[1]["metadata"]["name"],
            w[0]["metadata"]["name"]
        );
    }
    for (i, p) in pods.iter().enumerate() {
        let name = format!("web-{i}");
        assert_eq!(p["spec"]["hostname"], name.as_str());
        assert_eq!(p["spec"]["subdomain"], "nginx");
        assert_eq!(
            p["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"],
            name.as_str()
        );
        assert_eq!(
            p["metadata"]["labels"]["apps.kubernetes.io/pod-index"],
            i.to_string().as_str()
        );
    }
    let host = c.kubectl().ok(&["exec", "web-1", "--", "hostname"]);
    assert_eq!(host.trim(), "web-1");
    let done =
        c.kubectl()
            .with_deadline(secs(70))
            .ok(&["rollout", "status", "sts/web", "--timeout=60s"]);
    // As against upstream: the defaulted partition 0 makes kubectl report a partitioned rollout.
    assert!(done.contains("roll out complete: 3 new pods"), "{done}");
    let first = status(&c)["currentRevision"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(!first.is_empty());
    assert_eq!(status(&c)["updateRevision"], first.as_str());

    c.kubectl().ok(&["scale", "sts/web", "--replicas=1"]);
    wait_ready(&c, &["web-0"], &first);
    c.kubectl().ok(&["scale", "sts/web", "--replicas=3"]);
    wait_ready(&c, &["web-0", "web-1", "web-2"], &first);

    c.kubectl().ok(&["rollout", "restart", "sts/web"]);
    let second = c.wait_for(
        secs(30),
        "a new update revision",
        || match status(&c)["updateRevision"].as_str() {
            Some(r) if r != first => Ok(r.to_string()),
            other => Err(format!("{other:?}")),
        },
    );
    let pods = wait_ready(&c, &["web-0", "web-1", "web-2"], &second);
    // Replaced from the highest ordinal down, each once the previous one was Ready.
    assert!(
        created(&pods[1]) >= ready_since(&pods[2]),
        "web-1 before web-2 was ready"
    );
    assert!(
        created(&pods[0]) >= ready_since(&pods[1]),
        "web-0 before web-1 was ready"
    );
    c.wait_for(secs(30), "the update revision current", || {
        let s = status(&c);
        if s["currentRevision"] == second.as_str() && s["updatedReplicas"] == 3 {
            Ok(())
        } else {
            Err(format!("{s}"))
        }
    });
    let history = c.kubectl().ok(&["rollout", "history", "sts/web"]);
    assert!(history.contains('1') && history.contains('2'), "{history}");

    c.kubectl().ok(&["rollout", "undo", "sts/web"]);
    wait_ready(&c, &["web-0", "web-1", "web-2"], &first);
    c.wait_for(secs(30), "the first revision current again", || {
        let s = status(&c);
        if s["currentRevision"] == first.as_str() && s["updateRevision"] == first.as_str() {
            Ok(())
        } else {
            Err(format!("{s}"))
        }
    });
}
