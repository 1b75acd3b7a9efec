//! The controller in process over a real store in a temporary directory, with the garbage
//! collector (and, where said, the scheduler) beside it, on fake nodes. No agent runs: pods
//! stay unbound unless the scheduler binds them, and the tests play the kubelet by writing pod
//! status (Ready, Failed) themselves.

use super::*;
use crate::workload::object_meta::{name, uid};
use berth_registry::{Propagation, WriteOptions};
use berth_runtime::testing::{ControlPlane, edit_object, edit_status};
use serde_json::{Value, json};
use std::time::Duration;

/// How long a negative property is watched for.
const QUIET: Duration = Duration::from_millis(400);

struct Cluster {
    cp: ControlPlane,
}

fn hash(v: &Value) -> String {
    v["metadata"]["labels"][HASH_LABEL]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The node a daemon pod is meant for.
fn target(p: &Value) -> String {
    p["spec"]["nodeName"]
        .as_str()
        .map(String::from)
        .or_else(|| view::pinned_node(p.get("spec")))
        .unwrap_or_default()
}

fn ready(p: &Value) -> bool {
    p["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

/// A DaemonSet `name` of busybox pods labelled `app=<name>`, `spec` merged over its spec.
fn daemon_set(name: &str, spec: Value) -> Value {
    let mut ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "busybox:1.28"}]}}}});
    json_patch::merge(&mut ds["spec"], &spec);
    ds
}

impl Cluster {
    fn start() -> Cluster {
        Cluster::start_with(false)
    }

    /// The controller over plain Ready nodes named `nodes`.
    fn with_nodes(nodes: &[&str]) -> Cluster {
        let c = Cluster::start();
        for n in nodes {
            c.plain_node(n);
        }
        c
    }

    fn start_with(scheduler: bool) -> Cluster {
        let c = Cluster::without_controller();
        c.start_controller();
        if scheduler {
            c.cp.keep(berth_scheduler::start(&c.cp.ctx, c.cp.stop.clone()));
        }
        c
    }

    /// The garbage collector only: the DaemonSet controller starts with
    /// [`Cluster::start_controller`].
    fn without_controller() -> Cluster {
        let cp = ControlPlane::start();
        cp.run(berth_cluster_controllers::gc::run);
        Cluster { cp }
    }

    fn start_controller(&self) {
        self.cp.run(run);
    }

    async fn stop(self) {
        self.cp.shut_down().await;
    }

    fn registry(&self) -> &Registry {
        self.cp.registry()
    }

    /// A Ready node (or not) with labels, taints and `unschedulable`.
    fn node(&self, name: &str, labels: Value, taints: Value, ready: bool, unschedulable: bool) {
        let status = if ready { "True" } else { "False" };
        let node = json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": {"taints": taints, "unschedulable": unschedulable},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": status}]}});
        self.registry()
            .create(NODES, None, node, &WriteOptions::default())
            .unwrap();
    }

    fn plain_node(&self, name: &str) {
        self.node(name, json!({}), json!([]), true, false);
    }

    fn edit_node(&self, name: &str, f: impl Fn(&mut Value)) {
        edit_object(self.registry(), NODES, name, f);
    }

    fn edit_ds(&self, name: &str, f: impl Fn(&mut Value)) {
        edit_object(self.registry(), DAEMON_SETS, name, f);
    }

    fn create_ds(&self, ds: Value) -> Value {
        self.registry()
            .create(DAEMON_SETS, Some("default"), ds, &WriteOptions::default())
            .unwrap()
    }

    fn ds(&self, name: &str) -> Option<Value> {
        self.cp.get(DAEMON_SETS, name)
    }

    /// Every pod of `default`, being deleted or not.
    fn all_pods(&self) -> Vec<Value> {
        self.cp.list(PODS)
    }

    /// The pods not being deleted.
    fn pods(&self) -> Vec<Value> {
        self.all_pods()
            .into_iter()
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
            .collect()
    }

    /// (target node, hash) of every live pod, sorted.
    fn placement(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> =
            self.pods().iter().map(|p| (target(p), hash(p))).collect();
        out.sort();
        out
    }

    fn revisions(&self) -> Vec<Value> {
        let mut out = self.cp.list(CONTROLLER_REVISIONS);
        out.sort_by_key(|r| r["revision"].as_i64());
        out
    }

    /// Plays the kubelet: the pod is Running and Ready (since an hour).
    fn set_ready(&self, pod: &str) {
        self.set_status(
            pod,
            json!({"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"}]}),
        );
    }

    fn set_status(&self, pod: &str, status: Value) {
        edit_status(self.registry(), PODS, pod, |o| o["status"] = status.clone());
    }

    /// Makes every live pod that is not Ready yet Ready.
    fn all_ready(&self) {
        for p in self.pods().iter().filter(|p| !ready(p)) {
            self.set_ready(&name(p));
        }
    }

    /// Waits until `check` holds, looking again after every store change.
    /// Creates DaemonSet `agent` with `spec`, waits for its `n` pods and makes them Ready.
    async fn ready_agent(&self, spec: Value, n: usize) {
        self.create_ds(daemon_set("agent", spec));
        self.wait(&format!("{n} pods"), |c| c.pods().len() == n)
            .await;
        self.all_ready();
    }

    async fn wait(&self, what: &str, check: impl Fn(&Cluster) -> bool) {
        self.cp
            .wait_until(
                what,
                || check(self),
                || format!("pods: {:#?}", self.placement()),
            )
            .await;
    }

    /// Checks that `check` keeps holding for [`QUIET`], after every store change.
    async fn ensure(&self, what: &str, check: impl Fn(&Cluster) -> bool) {
        let broke = tokio::time::timeout(
            QUIET,
            self.cp.wait_until(what, || !check(self), String::new),
        )
        .await;
        assert!(
            broke.is_err(),
            "{what} stopped holding: {:#?}",
            self.placement()
        );
    }

    /// Waits until the DaemonSet's status shows its generation observed and `f` holds.
    async fn wait_status(&self, ds: &str, what: &str, f: impl Fn(&Value) -> bool) {
        self.wait(what, |c| {
            c.ds(ds).is_some_and(|d| {
                d["status"]["observedGeneration"] == d["metadata"]["generation"] && f(&d["status"])
            })
        })
        .await;
    }
}

fn seed_tolerations() -> Value {
    json!([{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"},
           {"key": "node-role.kubernetes.io/master", "operator": "Exists", "effect": "NoSchedule"}])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_eligible_node_gets_one_pinned_pod_with_the_automatic_tolerations() {
    let c = Cluster::with_nodes(&["t1-plain"]);
    c.node(
        "t1-control-plane",
        json!({"node-role.kubernetes.io/control-plane": ""}),
        json!([{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]),
        true,
        false,
    );
    c.node("t1-not-ready", json!({}), json!([]), false, false);
    c.node(
        "t1-cordoned",
        json!({}),
        json!([{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]),
        true,
        true,
    );
    c.node(
        "t1-dedicated",
        json!({}),
        json!([{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]),
        true,
        false,
    );
    let ds = c.create_ds(daemon_set(
        "fluentd",
        json!({"template": {"spec": {"tolerations": seed_tolerations()}}}),
    ));
    c.wait_status("fluentd", "4 of 4 scheduled", |s| {
        s["desiredNumberScheduled"] == 4 && s["currentNumberScheduled"] == 4
    })
    .await;
    let targets: Vec<String> = c.placement().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        targets,
        [
            "t1-control-plane",
            "t1-cordoned",
            "t1-not-ready",
            "t1-plain"
        ],
        "every node but the one with an untolerated taint"
    );

    // One revision, `<ds>-<hash>`, numbered 1; the pods carry its hash and the generation.
    let revisions = c.revisions();
    assert_eq!(revisions.len(), 1);
    let r = &revisions[0];
    let h = hash(r);
    assert_eq!(name(r), format!("fluentd-{h}"));
    assert_eq!(r["revision"], 1);
    assert_eq!(r["metadata"]["ownerReferences"][0]["uid"], json!(uid(&ds)));
    assert_eq!(r["data"]["spec"]["template"]["$patch"], "replace");
    for p in c.pods() {
        assert!(name(&p).starts_with("fluentd-"), "{}", name(&p));
        assert_eq!(hash(&p), h);
        assert_eq!(p["metadata"]["labels"]["pod-template-generation"], "1");
        assert_eq!(p["metadata"]["ownerReferences"][0]["kind"], "DaemonSet");
        let terms = &p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"];
        assert_eq!(
            *terms,
            json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [target(&p)]}]}])
        );
        let tolerations: Vec<(String, String, Option<i64>)> = p["spec"]["tolerations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["key"].as_str().unwrap_or_default().to_string(),
                    t["effect"].as_str().unwrap_or_default().to_string(),
                    t["tolerationSeconds"].as_i64(),
                )
            })
            .collect();
        for (key, effect) in eligibility::DAEMON_TOLERATIONS {
            let effect = effect.as_str();
            assert!(
                tolerations.contains(&(key.to_string(), effect.to_string(), None)),
                "{key}:{effect} in {tolerations:?}"
            );
        }
        assert!(
            !tolerations
                .iter()
                .any(|t| t.0 == "node.kubernetes.io/network-unavailable"),
            "only host-network pods tolerate network-unavailable"
        );
    }
    let created = c.cp.events("SuccessfulCreate");
    assert_eq!(created.len(), 4);
    assert_eq!(created[0]["source"]["component"], "daemonset-controller");
    assert_eq!(created[0]["involvedObject"]["kind"], "DaemonSet");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scheduler_binds_daemon_pods_on_cordoned_and_not_ready_nodes() {
    let c = Cluster::start_with(true);
    c.node("t2-cordoned", json!({}), json!([]), true, true);
    c.node("t2-not-ready", json!({}), json!([]), false, false);
    c.create_ds(daemon_set("agent", json!({})));
    c.wait("both pods bound to their nodes", |c| {
        let pods = c.pods();
        pods.len() == 2
            && pods.iter().all(|p| {
                p["spec"]["nodeName"].as_str() == view::pinned_node(p.get("spec")).as_deref()
            })
    })
    .await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_follow_node_labels_taints_arrivals_and_departures() {
    let c = Cluster::start();
    c.node("t3-x", json!({"role": "logging"}), json!([]), true, false);
    c.plain_node("t3-y");
    c.create_ds(daemon_set(
        "logs",
        json!({"template": {"spec": {"nodeSelector": {"role": "logging"}}}}),
    ));
    let on = |nodes: &[&str]| {
        let want: Vec<String> = nodes.iter().map(|n| n.to_string()).collect();
        move |c: &Cluster| {
            c.placement()
                .into_iter()
                .map(|(n, _)| n)
                .collect::<Vec<_>>()
                == want
        }
    };
    c.wait("a pod on the labelled node only", on(&["t3-x"]))
        .await;

    c.edit_node("t3-y", |n| {
        n["metadata"]["labels"]["role"] = json!("logging")
    });
    c.wait("labelling a node adds its pod", on(&["t3-x", "t3-y"]))
        .await;

    c.edit_node("t3-x", |n| n["metadata"]["labels"] = json!({}));
    c.wait("unlabelling a node removes its pod", on(&["t3-y"]))
        .await;

    c.edit_node("t3-y", |n| {
        n["spec"]["taints"] = json!([{"key": "maintenance", "effect": "NoSchedule"}])
    });
    c.wait_status("logs", "a NoSchedule taint: misscheduled", |s| {
        s["numberMisscheduled"] == 1 && s["desiredNumberScheduled"] == 0
    })
    .await;
    assert_eq!(
        c.placement().len(),
        1,
        "a NoSchedule taint leaves the running pod"
    );

    c.edit_node("t3-y", |n| {
        n["spec"]["taints"] = json!([{"key": "maintenance", "effect": "NoExecute"}])
    });
    c.wait("a NoExecute taint removes it", on(&[])).await;

    c.edit_node("t3-y", |n| n["spec"]["taints"] = json!([]));
    c.wait("untainted, it comes back", on(&["t3-y"])).await;

    c.node("t3-z", json!({"role": "logging"}), json!([]), true, false);
    c.wait("a new node gets one", on(&["t3-y", "t3-z"])).await;

    c.cp.delete(NODES, "t3-z", None);
    c.wait("a removed node's pod goes", on(&["t3-y"])).await;
    c.wait_status("logs", "1 desired, 1 current", |s| {
        s["desiredNumberScheduled"] == 1 && s["currentNumberScheduled"] == 1
    })
    .await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_pod_is_reported_and_replaced() {
    let c = Cluster::with_nodes(&["t4-a"]);
    c.create_ds(daemon_set("agent", json!({})));
    c.wait("a pod", |c| c.pods().len() == 1).await;
    let first = name(&c.pods()[0]);
    c.set_status(&first, json!({"phase": "Failed"}));
    c.wait("a replacement", |c| {
        let pods = c.pods();
        pods.len() == 1 && name(&pods[0]) != first
    })
    .await;
    let failed = c.cp.events("FailedDaemonPod");
    assert_eq!(failed.len(), 1);
    assert_eq!(
        failed[0]["message"],
        format!("Found failed daemon pod default/{first} on node t4-a, will try to kill it")
    );
    assert_eq!(failed[0]["type"], "Warning");
    assert!(!c.cp.events("SuccessfulDelete").is_empty());
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_orphaning_delete_leaves_the_pods_for_a_new_daemon_set_to_adopt() {
    let c = Cluster::with_nodes(&["t5-a", "t5-b"]);
    let first = c.create_ds(daemon_set("agent", json!({})));
    c.wait("2 pods", |c| c.pods().len() == 2).await;
    let names: Vec<String> = c.pods().iter().map(name).collect();
    let h = hash(&c.pods()[0]);

    c.cp.delete(DAEMON_SETS, "agent", Some(Propagation::Orphan));
    c.wait("the DaemonSet gone and its pods orphaned", |c| {
        c.ds("agent").is_none()
            && c.pods()
                .iter()
                .all(|p| p["metadata"]["ownerReferences"].is_null())
            && c.revisions()
                .iter()
                .all(|r| r["metadata"]["ownerReferences"].is_null())
    })
    .await;
    assert_eq!(c.pods().len(), 2);

    let second = c.create_ds(daemon_set("agent", json!({})));
    assert_ne!(uid(&first), uid(&second));
    c.wait("the pods and the revision adopted", |c| {
        c.pods()
            .iter()
            .all(|p| p["metadata"]["ownerReferences"][0]["uid"] == json!(uid(&second)))
            && c.revisions()
                .iter()
                .all(|r| r["metadata"]["ownerReferences"][0]["uid"] == json!(uid(&second)))
    })
    .await;
    c.wait_status("agent", "both nodes up to date", |s| {
        s["updatedNumberScheduled"] == 2
    })
    .await;
    let mut now: Vec<String> = c.pods().iter().map(name).collect();
    now.sort();
    let mut before = names.clone();
    before.sort();
    assert_eq!(now, before, "no pod was replaced");
    assert_eq!(c.revisions().len(), 1);
    assert_eq!(hash(&c.revisions()[0]), h);

    // A pod relabelled out of the selector is released, and its node gets a new one.
    let relabelled = before[0].clone();
    edit_object(c.registry(), PODS, &relabelled, |p| {
        p["metadata"]["labels"]["app"] = json!("debug")
    });
    c.wait("released and replaced", |c| {
        let released = c
            .all_pods()
            .into_iter()
            .find(|p| name(p) == relabelled)
            .is_some_and(|p| p["metadata"]["ownerReferences"].is_null());
        let owned = c
            .pods()
            .iter()
            .filter(|p| p["metadata"]["ownerReferences"][0]["uid"] == json!(uid(&second)))
            .count();
        released && owned == 2
    })
    .await;
    c.stop().await;
}

/// Nodes without an available pod (a node with an old or new Ready pod is fine).
fn unavailable_nodes(c: &Cluster, nodes: &[&str]) -> usize {
    let pods = c.pods();
    nodes
        .iter()
        .filter(|n| !pods.iter().any(|p| target(p) == **n && ready(p)))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_update_replaces_one_node_at_a_time_and_a_rollback_reuses_the_revision() {
    let nodes = ["t6-a", "t6-b", "t6-c"];
    let c = Cluster::with_nodes(&nodes);
    c.ready_agent(json!({}), 3).await;
    c.wait_status("agent", "3 available", |s| s["numberAvailable"] == 3)
        .await;
    let h1 = hash(&c.revisions()[0]);

    c.edit_ds("agent", |d| {
        d["spec"]["template"]["spec"]["containers"][0]["image"] = json!("busybox:1.36")
    });
    c.wait("revision 2", |c| c.revisions().len() == 2).await;
    let h2 = hash(&c.revisions()[1]);
    assert_ne!(h1, h2);
    assert_eq!(c.revisions()[1]["revision"], 2);
    for step in 1..=3 {
        c.wait(&format!("step {step}: {step} new pods"), |c| {
            c.placement().iter().filter(|(_, h)| *h == h2).count() == step
        })
        .await;
        c.ensure("at most one node without an available pod", |c| {
            unavailable_nodes(c, &nodes) <= 1
                && c.placement().iter().filter(|(_, h)| *h == h2).count() == step
        })
        .await;
        c.all_ready();
    }
    c.wait_status("agent", "rolled out", |s| {
        s["updatedNumberScheduled"] == 3 && s["numberAvailable"] == 3
    })
    .await;
    assert!(c.placement().iter().all(|(_, h)| *h == h2));
    assert_eq!(c.cp.events("SuccessfulDelete").len(), 3);

    // A rollback to the first template reuses its revision, renumbered 3.
    c.edit_ds("agent", |d| {
        d["spec"]["template"]["spec"]["containers"][0]["image"] = json!("busybox:1.28")
    });
    c.wait("revision 1 renumbered 3", |c| {
        let rs = c.revisions();
        rs.len() == 2 && hash(&rs[1]) == h1 && rs[1]["revision"] == 3
    })
    .await;
    c.wait("a pod of the first template", |c| {
        c.placement().iter().any(|(_, h)| *h == h1)
    })
    .await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_surge_starts_the_new_pod_before_the_old_one_goes() {
    let c = Cluster::with_nodes(&["t7-a", "t7-b"]);
    let surge = json!({"updateStrategy": {"type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}});
    c.ready_agent(surge, 2).await;
    c.wait_status("agent", "2 available", |s| s["numberAvailable"] == 2)
        .await;
    c.edit_ds("agent", |d| {
        d["spec"]["template"]["metadata"]["annotations"] = json!({"restartedAt": "now"})
    });
    c.wait("a node with an old and a new pod", |c| c.pods().len() == 3)
        .await;
    c.ensure("both old pods stay while the new one is not ready", |c| {
        c.pods().len() == 3 && unavailable_nodes(c, &["t7-a", "t7-b"]) == 0
    })
    .await;
    let h2 = hash(&c.revisions()[1]);
    for p in c.pods().iter().filter(|p| hash(p) == h2) {
        c.set_ready(&name(p));
    }
    c.wait("the old pod beside it goes and the next node surges", |c| {
        c.cp.events("SuccessfulDelete").len() == 1
            && c.pods().iter().filter(|p| hash(p) == h2).count() == 2
    })
    .await;
    c.all_ready();
    c.wait_status("agent", "rolled out", |s| {
        s["updatedNumberScheduled"] == 2 && s["numberAvailable"] == 2
    })
    .await;
    c.wait("only new pods", |c| {
        c.pods().len() == 2 && c.pods().iter().all(|p| hash(p) == h2)
    })
    .await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_delete_changes_a_node_only_when_its_pod_is_deleted() {
    let c = Cluster::with_nodes(&["t8-a", "t8-b"]);
    c.ready_agent(json!({"updateStrategy": {"type": "OnDelete"}}), 2)
        .await;
    let before = c.placement();
    c.edit_ds("agent", |d| {
        d["spec"]["template"]["spec"]["containers"][0]["image"] = json!("busybox:1.36")
    });
    c.wait("revision 2", |c| c.revisions().len() == 2).await;
    c.wait_status("agent", "generation 2 observed, nothing updated", |s| {
        s["updatedNumberScheduled"].as_i64().unwrap_or(0) == 0
    })
    .await;
    c.ensure("the pods stay as they are", |c| c.placement() == before)
        .await;
    let h2 = hash(&c.revisions()[1]);
    let victim = c.pods().into_iter().find(|p| target(p) == "t8-a").unwrap();
    c.cp.delete(PODS, &name(&victim), None);
    c.wait("t8-a gets a pod of revision 2, t8-b keeps its own", |c| {
        let p = c.placement();
        p.len() == 2 && p[0] == ("t8-a".to_string(), h2.clone()) && p[1] == before[1]
    })
    .await;
    c.wait_status("agent", "1 updated", |s| s["updatedNumberScheduled"] == 1)
        .await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_revisions_beyond_the_history_limit_are_deleted() {
    let c = Cluster::start();
    c.create_ds(daemon_set("agent", json!({"revisionHistoryLimit": 1})));
    for (i, image) in ["busybox:1", "busybox:2", "busybox:3"]
        .into_iter()
        .enumerate()
    {
        c.wait(&format!("revision {}", i + 1), |c| {
            c.revisions()
                .last()
                .is_some_and(|r| r["revision"] == json!(i + 1))
        })
        .await;
        c.edit_ds("agent", |d| {
            d["spec"]["template"]["spec"]["containers"][0]["image"] = json!(image)
        });
    }
    c.wait("the current and one old revision", |c| {
        let rs = c.revisions();
        rs.len() == 2 && rs[0]["revision"] == 3 && rs[1]["revision"] == 4
    })
    .await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revision_name_taken_by_another_template_raises_the_collision_count() {
    let c = Cluster::without_controller();
    c.plain_node("t10-a");
    let stored = c.create_ds(daemon_set("agent", json!({})));
    let parsed = DaemonSet::from_value(&stored).unwrap();
    let taken = template::history_owner(&parsed).template_hash();
    // Someone else's revision under the name the template hashes to.
    c.registry()
        .create(
            CONTROLLER_REVISIONS,
            Some("default"),
            json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
                "metadata": {"name": format!("agent-{taken}"), "labels": {"app": "other"}},
                "data": {"spec": {"template": {"$patch": "replace"}}}, "revision": 1}),
            &WriteOptions::default(),
        )
        .unwrap();
    c.start_controller();
    c.wait("collisionCount 1 and a revision under another name", |c| {
        let ours: Vec<Value> = c
            .revisions()
            .into_iter()
            .filter(|r| r["metadata"]["ownerReferences"][0]["uid"] == json!(uid(&stored)))
            .collect();
        c.ds("agent")
            .is_some_and(|d| d["status"]["collisionCount"] == 1)
            && ours.len() == 1
            && hash(&ours[0]) != taken
    })
    .await;
    c.wait("the pod of the renamed revision", |c| {
        c.pods().len() == 1 && hash(&c.pods()[0]) != taken
    })
    .await;
    c.stop().await;
}
