//! The controller in process over a real store in a temporary directory, with the garbage
//! collector beside it. No scheduler or agent runs here: pods stay Pending and unbound, so
//! deleting them removes them at once.

use super::*;
use berth_registry::{Propagation, WriteOptions};
use berth_runtime::testing::{ControlPlane, edit_object, edit_status};
use berth_shared::resource;
use serde_json::{Value, json};

struct Cluster {
    cp: ControlPlane,
}

impl Cluster {
    fn start() -> Cluster {
        let cp = ControlPlane::start();
        cp.run(run);
        cp.run(berth_cluster_controllers::gc::run);
        Cluster { cp }
    }

    async fn stop(self) {
        self.cp.shut_down().await;
    }

    fn registry(&self) -> &Registry {
        self.cp.registry()
    }

    fn pods(&self) -> Vec<Value> {
        self.cp.list(PODS)
    }

    fn pods_of(&self, uid: &str) -> Vec<Value> {
        self.pods()
            .into_iter()
            .filter(|p| crate::views::controller_of(p).is_some_and(|c| c.uid == uid))
            .collect()
    }

    fn get(&self, kind: Kind, name: &str) -> Option<Value> {
        self.cp.get(kind.resource(), name)
    }

    fn create(&self, plural: &str, obj: Value) -> Value {
        let group = if plural == "replicasets" { "apps" } else { "" };
        let rt = resource::by_plural(group, "v1", plural).unwrap();
        self.registry()
            .create(rt, Some("default"), obj, &WriteOptions::default())
            .unwrap()
    }

    fn edit(&self, plural: &str, name: &str, f: impl Fn(&mut Value)) {
        let group = if plural == "replicasets" { "apps" } else { "" };
        let rt = resource::by_plural(group, "v1", plural).unwrap();
        edit_object(self.registry(), rt, name, f);
    }

    fn delete(&self, plural: &str, name: &str, propagation: Option<Propagation>) {
        let group = if plural == "replicasets" { "apps" } else { "" };
        let rt = resource::by_plural(group, "v1", plural).unwrap();
        self.cp.delete(rt, name, propagation);
    }

    /// Waits until `check` holds, looking again after every store change; panics with `what`
    /// and the pods after the deadline.
    /// A cluster with ReplicaSet `frontend` of three replicas and its pods; the set's uid.
    async fn with_frontend() -> (Cluster, String) {
        let c = Cluster::start();
        let rs_uid = c
            .owner_with_pods("replicasets", frontend("frontend", 3), 3)
            .await;
        (c, rs_uid)
    }

    /// Creates `owner` (a `resource`) and waits for its `n` pods; its uid.
    async fn owner_with_pods(&self, resource: &str, owner: Value, n: usize) -> String {
        let owner_uid = uid(&self.create(resource, owner));
        self.wait(&format!("{n} pods"), |c| c.pods_of(&owner_uid).len() == n)
            .await;
        owner_uid
    }

    /// The `SuccessfulCreate` events, asserted to be three, from `component`.
    fn three_created_by(&self, component: &str) -> Vec<Value> {
        let created = self.cp.events("SuccessfulCreate");
        assert_eq!(created.len(), 3);
        assert_eq!(created[0]["source"]["component"], json!(component));
        created
    }

    async fn wait(&self, what: &str, check: impl Fn(&Cluster) -> bool) {
        self.cp
            .wait_until(what, || check(self), || format!("pods: {:#?}", self.pods()))
            .await;
    }
}

fn frontend(name: &str, replicas: i32) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": name, "labels": {"app": "guestbook", "tier": "frontend"}},
        "spec": {"replicas": replicas,
            "selector": {"matchLabels": {"tier": "frontend"}},
            "template": {"metadata": {"labels": {"tier": "frontend"}},
                "spec": {"containers": [{"name": "php-redis", "image": "gcr.io/google_samples/gb-frontend:v3"}]}}}})
}

fn bare_pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"tier": "frontend"}},
        "spec": {"containers": [{"name": "hello", "image": "gcr.io/google-samples/hello-app:2.0"}]}})
}

fn uid(v: &Value) -> String {
    v["metadata"]["uid"].as_str().unwrap().to_string()
}

fn name(v: &Value) -> String {
    v["metadata"]["name"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_set_keeps_its_replicas_and_orphans_them_on_request() {
    // T-RS-01: three pods named from the set, with the controller reference (RS-21).
    let (c, rs_uid) = Cluster::with_frontend().await;
    for p in c.pods_of(&rs_uid) {
        let n = name(&p);
        assert!(
            n.starts_with("frontend-") && n.len() == "frontend-".len() + 5,
            "{n}"
        );
        assert_eq!(p["metadata"]["generateName"], json!("frontend-"));
        assert_eq!(p["metadata"]["labels"], json!({"tier": "frontend"}));
        assert_eq!(
            p["metadata"]["ownerReferences"],
            json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "frontend",
                    "uid": rs_uid, "controller": true, "blockOwnerDeletion": true}])
        );
    }
    c.wait("status.replicas 3", |c| {
        c.get(Kind::ReplicaSet, "frontend").unwrap()["status"]
            == json!({"replicas": 3, "fullyLabeledReplicas": 3, "observedGeneration": 1})
    })
    .await;
    let created = c.three_created_by("replicaset-controller");
    assert!(
        created[0]["message"]
            .as_str()
            .unwrap()
            .starts_with("Created pod: frontend-")
    );
    assert_eq!(c.pods().len(), 3, "no pod created twice");

    // RS-19: a deleted pod is replaced.
    let victim = name(&c.pods_of(&rs_uid)[0]);
    c.delete("pods", &victim, None);
    c.wait("a replacement", |c| {
        let pods = c.pods_of(&rs_uid);
        pods.len() == 3 && pods.iter().all(|p| name(p) != victim)
    })
    .await;

    // RS-15: scaling to 1 deletes two pods, with events.
    c.edit("replicasets", "frontend", |o| {
        o["spec"]["replicas"] = json!(1)
    });
    c.wait("1 pod", |c| c.pods().len() == 1).await;
    c.wait("2 deletion events", |c| {
        c.cp.events("SuccessfulDelete").len() == 2
    })
    .await;
    c.wait("status of generation 2", |c| {
        let s = &c.get(Kind::ReplicaSet, "frontend").unwrap()["status"];
        s["replicas"] == json!(1) && s["observedGeneration"] == json!(2)
    })
    .await;

    // RS-12: an orphaning delete leaves the pod, without an owner.
    c.delete("replicasets", "frontend", Some(Propagation::Orphan));
    c.wait("the set gone", |c| {
        c.get(Kind::ReplicaSet, "frontend").is_none()
    })
    .await;
    let pods = c.pods();
    assert_eq!(pods.len(), 1);
    assert!(pods[0]["metadata"].get("ownerReferences").is_none());

    // RS-13: a new set with the same selector adopts it and creates only the difference.
    let again = c.create("replicasets", frontend("frontend2", 2));
    c.wait("adoption plus one", |c| c.pods_of(&uid(&again)).len() == 2)
        .await;
    assert_eq!(c.pods().len(), 2);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bare_pods_are_adopted_and_relabelled_pods_released_and_replaced() {
    let c = Cluster::start();
    // T-RS-03: pods first, set second: both adopted, one created.
    c.create("pods", bare_pod("pod1"));
    c.create("pods", bare_pod("pod2"));
    let rs = c.create("replicasets", frontend("frontend", 3));
    let rs_uid = uid(&rs);
    // The event follows the pod's creation: wait for both.
    c.wait("3 owned pods and the creation event", |c| {
        c.pods_of(&rs_uid).len() == 3 && !c.cp.events("SuccessfulCreate").is_empty()
    })
    .await;
    assert_eq!(c.pods().len(), 3);
    assert_eq!(c.cp.events("SuccessfulCreate").len(), 1);

    // T-RS-02: a matching bare pod created after the set is acquired and one pod goes at once
    // (pod3, upstream, being newest; here all were created in the same second, so the
    // creation-time bucket ties and any of them may go).
    c.create("pods", bare_pod("pod3"));
    c.wait("back to 3 pods", |c| {
        c.pods().len() == 3 && c.pods_of(&rs_uid).len() == 3
    })
    .await;

    // T-RS-05 / RS-14: relabelling releases the pod and the set replaces it.
    let isolated = name(&c.pods_of(&rs_uid)[0]);
    c.edit("pods", &isolated, |o| {
        o["metadata"]["labels"]["tier"] = json!("debug");
    });
    c.wait("release and replacement", |c| {
        let pod = c.pods().into_iter().find(|p| name(p) == isolated);
        pod.is_some_and(|p| p["metadata"].get("ownerReferences").is_none())
            && c.pods_of(&rs_uid).len() == 3
    })
    .await;
    assert_eq!(c.pods().len(), 4);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pod_deletion_cost_picks_the_pod_removed_on_scale_down() {
    let (c, rs_uid) = Cluster::with_frontend().await;
    let pods = c.pods_of(&rs_uid);
    // Otherwise equal (same second, all Pending), the costs alone decide (RS-16, RS-17).
    let cheap = name(&pods[0]);
    let costly = name(&pods[1]);
    c.edit("pods", &cheap, |o| {
        o["metadata"]["annotations"] = json!({crate::views::DELETION_COST: "-100"});
    });
    c.edit("pods", &costly, |o| {
        o["metadata"]["annotations"] = json!({crate::views::DELETION_COST: "100"});
    });
    c.edit("replicasets", "frontend", |o| {
        o["spec"]["replicas"] = json!(1)
    });
    c.wait("1 pod", |c| c.pods().len() == 1).await;
    assert_eq!(name(&c.pods()[0]), costly);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replication_controller_creates_pods_it_owns_as_v1() {
    let c = Cluster::start();
    let rc_uid = c.owner_with_pods(
        "replicationcontrollers",
        json!({"apiVersion": "v1", "kind": "ReplicationController",
            "metadata": {"name": "nginx"},
            "spec": {"replicas": 3, "selector": {"app": "nginx"},
                "template": {"metadata": {"name": "nginx", "labels": {"app": "nginx"}},
                    "spec": {"containers": [{"name": "nginx", "image": "nginx", "ports": [{"containerPort": 80}]}]}}}}),
        3,
    ).await;
    let p = &c.pods_of(&rc_uid)[0];
    assert_eq!(
        p["metadata"]["ownerReferences"][0]["apiVersion"],
        json!("v1")
    );
    assert_eq!(
        p["metadata"]["ownerReferences"][0]["kind"],
        json!("ReplicationController")
    );
    c.wait("status", |c| {
        c.get(Kind::ReplicationController, "nginx").unwrap()["status"]["replicas"] == json!(3)
    })
    .await;
    let created = c.three_created_by("replication-controller");
    assert_eq!(
        created[0]["involvedObject"]["kind"],
        json!("ReplicationController")
    );
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_pods_count_as_available_only_after_min_ready_seconds() {
    let c = Cluster::start();
    let mut rs = frontend("slow", 1);
    // Long enough that a loaded CI host writes readyReplicas before the pod's Ready condition
    // is that old (with 2 s, both landed in one pass there, and the first check failed).
    rs["spec"]["minReadySeconds"] = json!(8);
    let rs_uid = c.owner_with_pods("replicasets", rs, 1).await;
    // The agent's part, played here: the pod turns Ready now.
    let pod = name(&c.pods_of(&rs_uid)[0]);
    let since = status::rfc3339(jiff::Timestamp::now());
    edit_status(c.registry(), PODS, &pod, |o| {
        o["status"]["phase"] = json!("Running");
        o["status"]["conditions"] =
            json!([{"type": "Ready", "status": "True", "lastTransitionTime": since}]);
    });
    let status = |c: &Cluster| c.get(Kind::ReplicaSet, "slow").unwrap()["status"].clone();
    c.wait("ready", |c| status(c)["readyReplicas"] == json!(1))
        .await;
    assert!(
        status(&c).get("availableReplicas").is_none(),
        "not available before minReadySeconds: {}",
        status(&c)
    );
    // No event arrives after this point: only the pass's requeue notices availability.
    c.wait("available", |c| status(c)["availableReplicas"] == json!(1))
        .await;
    c.stop().await;
}
