//! Issue 13, StatefulSets on real agents driven with the real kubectl, asserted from a watch of
//! the pods:
//! - the seed's `web` (headless `nginx` Service, `volumeClaimTemplates` of class
//!   `my-storage-class`, here the local-path provisioner) on two agents: `web-N` made one at a
//!   time, each once its predecessor is Ready; claims `www-web-N` Bound to local-path volumes
//!   pinned to the pod's node; `web-0.nginx.default.svc.cluster.local` resolves to web-0 from
//!   another pod; a file in web-1's volume survives `kubectl delete pod web-1` (same name, new
//!   uid, same node);
//! - scaling 2 → 5 → 2 creates 2, 3, 4 in order and deletes 4, 3, 2 in order, keeping the
//!   claims;
//!   `whenScaled: Delete` removes a scaled-down pod's claim, its volume and its directory;
//! - rolling updates: `rollout restart` replaces 2, 1, 0 each after the previous is Ready,
//!   `partition: 2` updates only web-2, a broken image stalls the rollout and reverting the
//!   template does not un-stall it until the broken pod is deleted (STS-22), OnDelete replaces
//!   only deleted pods, `rollout history` and `undo`;
//! - Parallel creates every pod at once; a claim in use is not removed while its pod runs
//!   (pvc-protection), and a Released local-path volume is deleted with its directory.

use std::collections::BTreeSet;
use std::path::PathBuf;

use berth_tests::fixtures::NGINX_1_14_2;
use berth_tests::objects::merge;
use berth_tests::pod_reading::is_ready;
use berth_tests::pod_specs::{SLEEP_FOREVER, ready_data_container, sh_pod};
use berth_tests::rollout::Watcher;
use berth_tests::rollout::ordinals::{arrivals, departures};
use berth_tests::seeds::seed;
use berth_tests::wait::ok_if;
use berth_tests::{Cluster, secs};
use serde_json::{Value, json};

const PODS: &str = "/api/v1/namespaces/default/pods";
const CLAIMS: &str = "/api/v1/namespaces/default/persistentvolumeclaims";

/// A busybox StatefulSet `name` that is Ready a second after it starts, with `spec` merged in.
fn busybox_set(name: &str, replicas: u32, spec: Value) -> Value {
    let main = ready_data_container("sleep 1; ");
    let mut set = json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "serviceName": name,
                 "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"terminationGracePeriodSeconds": 1,
                                       "containers": [main],
                                       "volumes": [{"name": "data", "emptyDir": {}}]}}}});
    merge(&mut set["spec"], &spec);
    set
}

/// A claim template `data` of the local-path class.
fn data_claims() -> Value {
    json!({"volumeClaimTemplates": [{"metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local-path",
                 "resources": {"requests": {"storage": "16Mi"}}}}]})
}

fn list(c: &Cluster, path: &str) -> Vec<Value> {
    c.get(path)
        .and_then(|l| l["items"].as_array().cloned())
        .unwrap_or_default()
}

/// The live pods of `app`, by name.
fn live(c: &Cluster, app: &str) -> Vec<Value> {
    let mut pods: Vec<Value> = list(c, &format!("{PODS}?labelSelector=app%3D{app}"))
        .into_iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .collect();
    pods.sort_by_key(name);
    pods
}

fn name(v: &Value) -> String {
    v["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn names(pods: &[Value]) -> Vec<String> {
    pods.iter().map(name).collect()
}

fn revision(p: &Value) -> String {
    p["metadata"]["labels"]["controller-revision-hash"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Waits until exactly `want` of `app` are live and Ready, all at `revision` (any when empty).
fn wait_ready(c: &Cluster, app: &str, want: &[&str], revision_: &str) -> Vec<Value> {
    c.wait_for(
        secs(120),
        &format!("{want:?} ready at {revision_:?}"),
        || {
            let pods = live(c, app);
            let ok = names(&pods) == want
                && pods
                    .iter()
                    .all(|p| is_ready(p) && (revision_.is_empty() || revision(p) == revision_));
            if ok {
                Ok(pods)
            } else {
                Err(format!(
                    "{:?}",
                    pods.iter()
                        .map(|p| (name(p), is_ready(p), revision(p)))
                        .collect::<Vec<_>>()
                ))
            }
        },
    )
}

/// Waits until `web` has three Ready pods at `want`'s revisions, web-0 first.
fn wait_web_revisions(c: &Cluster, what: &str, want: [&str; 3]) {
    c.wait_for(secs(60), what, || {
        let pods = live(c, "web");
        let revs: Vec<String> = pods.iter().map(revision).collect();
        ok_if(
            pods.len() == 3 && pods.iter().all(is_ready) && revs == want,
            format!("{revs:?}"),
        )
    });
}

fn set_status(c: &Cluster, set: &str) -> Value {
    c.get(&format!(
        "/apis/apps/v1/namespaces/default/statefulsets/{set}"
    ))
    .map(|s| s["status"].clone())
    .unwrap_or_default()
}

/// The set's status once it has observed its latest generation.
fn observed(c: &Cluster, set: &str) -> Value {
    c.wait_for(secs(30), &format!("{set} observed its generation"), || {
        let s = c
            .get(&format!(
                "/apis/apps/v1/namespaces/default/statefulsets/{set}"
            ))
            .ok_or("no set")?;
        if s["status"]["observedGeneration"] == s["metadata"]["generation"] {
            Ok(s["status"].clone())
        } else {
            Err(format!("{}", s["status"]))
        }
    })
}

fn claim(c: &Cluster, name: &str) -> Option<Value> {
    c.get(&format!("{CLAIMS}/{name}"))
}

fn volume(c: &Cluster, name: &str) -> Option<Value> {
    c.get(&format!("/api/v1/persistentvolumes/{name}"))
}

/// The node a local-path volume is pinned to.
fn pinned_node(pv: &Value) -> String {
    pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
        [0]
    .as_str()
    .unwrap_or_default()
    .to_string()
}

/// Waits until claim `name` is Bound; returns its volume.
fn bound_volume(c: &Cluster, name: &str) -> Value {
    c.wait_for(secs(60), &format!("claim {name} bound"), || {
        let cl = claim(c, name).ok_or("no claim")?;
        if cl["status"]["phase"] != "Bound" {
            return Err(format!("{}", cl["status"]));
        }
        let pv = cl["spec"]["volumeName"].as_str().unwrap_or_default();
        volume(c, pv).ok_or(format!("no volume {pv}"))
    })
}

fn host_path(pv: &Value) -> PathBuf {
    PathBuf::from(pv["spec"]["hostPath"]["path"].as_str().unwrap_or_default())
}

/// Waits until the claim, its volume and the volume's directory are all gone.
fn wait_claim_gone(c: &Cluster, claim_name: &str, pv: &Value) {
    let pv_name = name(pv);
    let dir = host_path(pv);
    c.wait_for(
        secs(60),
        &format!("{claim_name}, {pv_name} and {dir:?} gone"),
        || {
            let left = (
                claim(c, claim_name).is_some(),
                volume(c, &pv_name).is_some(),
                dir.exists(),
            );
            ok_if(
                left == (false, false, false),
                format!("claim, volume, directory left: {left:?}"),
            )
        },
    );
}

fn scale(c: &Cluster, set: &str, n: u32) {
    c.kubectl()
        .ok(&["scale", &format!("sts/{set}"), &format!("--replicas={n}")]);
}

fn patch(c: &Cluster, set: &str, body: Value) {
    c.kubectl().ok(&[
        "patch",
        &format!("sts/{set}"),
        "--type=merge",
        "-p",
        &body.to_string(),
    ]);
}

fn ready_set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn the_seed_web_runs_in_order_with_claims_on_its_nodes_stable_names_and_data() {
    let c = Cluster::start(2);
    c.push_fixture(&NGINX_1_14_2, "nginx-slim", "0.8");
    c.apply(
        &json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "my-storage-class"}, "provisioner": "berth.io/local-path",
        "reclaimPolicy": "Delete", "volumeBindingMode": "WaitForFirstConsumer"}),
    );
    let mut service = seed("nginx.service").object;
    service["metadata"]["namespace"] = json!("default");
    c.apply(&service);
    let watch = Watcher::ordinals(&c, "default", "app=nginx");
    let mut web = seed("web.statefulset").object;
    web["metadata"]["namespace"] = json!("default");
    c.apply(&web);
    let pods = wait_ready(&c, "nginx", &["web-0", "web-1", "web-2"], "");
    let order = arrivals(&watch.finish().samples);
    assert_eq!(
        order,
        [
            ("web-0".to_string(), ready_set(&[])),
            ("web-1".to_string(), ready_set(&["web-0"])),
            ("web-2".to_string(), ready_set(&["web-0", "web-1"])),
        ],
        "each ordinal made once its predecessors are Running and Ready"
    );
    for p in &pods {
        let n = name(p);
        let pv = bound_volume(&c, &format!("www-{n}"));
        assert_eq!(
            pinned_node(&pv),
            p["spec"]["nodeName"].as_str().unwrap_or_default(),
            "{n}'s volume is on its node"
        );
        assert_eq!(pv["spec"]["storageClassName"], "my-storage-class");
        assert!(
            host_path(&pv).is_dir(),
            "{n}'s directory {:?}",
            host_path(&pv)
        );
    }
    let pvcs = c.kubectl().ok(&["get", "pvc"]);
    assert!(
        pvcs.contains("www-web-0") && pvcs.contains("Bound"),
        "{pvcs}"
    );

    // Stable network identity through the headless Service.
    let node = c.node_name(0).to_string();
    c.apply(&sh_pod("client", &node, SLEEP_FOREVER));
    c.wait_for_pod_ready("default", "client", secs(60));
    let web0_ip = pods[0]["status"]["podIP"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    c.wait_for(secs(20), "web-0.nginx resolves to web-0", || {
        let r = c.exec(
            "default",
            "client",
            None,
            &[
                "timeout",
                "5",
                "nslookup",
                "web-0.nginx.default.svc.cluster.local",
            ],
        );
        ok_if(r.stdout.contains(&web0_ip), r.describe())
    });

    // Stable storage: web-1's data outlives web-1.
    c.exec_ok(
        "default",
        "web-1",
        None,
        &["sh", "-c", "echo kept > /usr/share/nginx/html/index.html"],
    );
    let (old_uid, old_node) = (
        pods[1]["metadata"]["uid"].clone(),
        pods[1]["spec"]["nodeName"].clone(),
    );
    c.kubectl().ok(&["delete", "pod", "web-1"]);
    let again = c.wait_for(secs(90), "web-1 back with a new uid", || {
        let p = c.get(&format!("{PODS}/web-1")).ok_or("no web-1")?;
        if p["metadata"]["uid"] != old_uid && is_ready(&p) {
            Ok(p)
        } else {
            Err(format!(
                "uid {}, ready {}",
                p["metadata"]["uid"],
                is_ready(&p)
            ))
        }
    });
    assert_eq!(
        again["spec"]["nodeName"], old_node,
        "back on its volume's node"
    );
    let data = c.exec_ok(
        "default",
        "web-1",
        None,
        &["cat", "/usr/share/nginx/html/index.html"],
    );
    assert_eq!(data.trim(), "kept");
}

/// Each pod `db-N` of `changes` (from [`arrivals`] or [`departures`]) with whether `holds` of
/// its ordinal N and the pods listed with it.
fn judged(
    changes: Vec<(String, BTreeSet<String>)>,
    holds: impl Fn(u32, &BTreeSet<String>) -> bool,
) -> Vec<(String, bool)> {
    changes
        .into_iter()
        .map(|(n, pods)| {
            let ord: u32 = n.trim_start_matches("db-").parse().unwrap_or(0);
            let held = holds(ord, &pods);
            (n, held)
        })
        .collect()
}

#[test]
fn scaling_is_ordered_keeps_claims_and_when_scaled_delete_removes_them() {
    let c = Cluster::start(1);
    c.apply(&busybox_set("db", 2, data_claims()));
    wait_ready(&c, "db", &["db-0", "db-1"], "");
    let watch = Watcher::ordinals(&c, "default", "app=db");
    scale(&c, "db", 5);
    wait_ready(&c, "db", &["db-0", "db-1", "db-2", "db-3", "db-4"], "");
    scale(&c, "db", 2);
    wait_ready(&c, "db", &["db-0", "db-1"], "");
    let samples = watch.finish().samples;
    // Each arrival with whether its predecessors were all Ready.
    let came = judged(arrivals(&samples), |ord, ready| {
        (0..ord).all(|o| ready.contains(&format!("db-{o}")))
    });
    assert_eq!(
        came,
        [
            ("db-2".to_string(), true),
            ("db-3".to_string(), true),
            ("db-4".to_string(), true)
        ]
    );
    // Each departure with whether its successors were all gone.
    let went = judged(departures(&samples), |ord, live| {
        (ord + 1..5).all(|o| !live.contains(&format!("db-{o}")))
    });
    assert_eq!(
        went,
        [
            ("db-4".to_string(), true),
            ("db-3".to_string(), true),
            ("db-2".to_string(), true)
        ],
        "from the highest ordinal down, each once its successors are gone"
    );
    for o in 0..5 {
        assert!(
            claim(&c, &format!("data-db-{o}")).is_some(),
            "data-db-{o} kept (Retain)"
        );
    }

    let pv1 = bound_volume(&c, "data-db-1");
    assert!(host_path(&pv1).is_dir());
    // The policy applies to every condemned pod, terminating ones included (as upstream): let
    // the earlier ones finish first.
    c.wait_for(secs(30), "db-2..4 gone, not only terminating", || {
        let all = names(&list(&c, &format!("{PODS}?labelSelector=app%3Ddb")));
        ok_if(all.len() == 2, format!("{all:?}"))
    });
    patch(
        &c,
        "db",
        json!({"spec": {"persistentVolumeClaimRetentionPolicy": {"whenScaled": "Delete"}}}),
    );
    scale(&c, "db", 1);
    wait_ready(&c, "db", &["db-0"], "");
    wait_claim_gone(&c, "data-db-1", &pv1);
    assert!(claim(&c, "data-db-0").is_some(), "db-0 keeps its claim");
    assert!(
        claim(&c, "data-db-2").is_some(),
        "claims of pods scaled down earlier are not touched"
    );
}

#[test]
fn rolling_updates_partition_forced_rollback_on_delete_history_and_undo() {
    let c = Cluster::start(1);
    c.apply(&busybox_set("web", 3, json!({})));
    wait_ready(&c, "web", &["web-0", "web-1", "web-2"], "");
    let done =
        c.kubectl()
            .with_deadline(secs(70))
            .ok(&["rollout", "status", "sts/web", "--timeout=60s"]);
    // As against upstream: the defaulted partition 0 makes kubectl report a partitioned rollout.
    assert!(done.contains("roll out complete: 3 new pods"), "{done}");
    let first = observed(&c, "web")["currentRevision"]
        .as_str()
        .unwrap_or_default()
        .to_string();

    // RollingUpdate: 2, 1, 0, each after the previous one is Ready.
    let watch = Watcher::ordinals(&c, "default", "app=web");
    c.kubectl().ok(&["rollout", "restart", "sts/web"]);
    let second = observed(&c, "web")["updateRevision"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_ne!(second, first);
    wait_ready(&c, "web", &["web-0", "web-1", "web-2"], &second);
    let samples = watch.finish().samples;
    let went: Vec<String> = departures(&samples).into_iter().map(|(n, _)| n).collect();
    assert_eq!(went, ["web-2", "web-1", "web-0"]);
    for (n, ready) in arrivals(&samples) {
        let others: BTreeSet<String> = ["web-0", "web-1", "web-2"]
            .iter()
            .filter(|o| **o != n)
            .map(|o| o.to_string())
            .collect();
        assert_eq!(
            ready, others,
            "{n} replaced while the others were all Ready"
        );
    }
    c.wait_for(secs(30), "the update revision current", || {
        let s = set_status(&c, "web");
        ok_if(
            s["currentRevision"] == second.as_str() && s["updatedReplicas"] == 3,
            format!("{s}"),
        )
    });

    // partition: 2 updates web-2 only.
    patch(
        &c,
        "web",
        json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 2}},
            "template": {"metadata": {"annotations": {"step": "partition"}}}}}),
    );
    let third = observed(&c, "web")["updateRevision"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    wait_web_revisions(
        &c,
        "web-2 alone at the new revision",
        [&second, &second, &third],
    );
    let s = observed(&c, "web");
    assert_eq!(s["updatedReplicas"], 1);
    assert_eq!(
        s["currentRevision"],
        second.as_str(),
        "a partitioned rollout is not complete"
    );
    patch(
        &c,
        "web",
        json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}}),
    );
    wait_ready(&c, "web", &["web-0", "web-1", "web-2"], &third);

    // STS-22: a broken template stalls the rollout; reverting it is not enough.
    c.kubectl()
        .ok(&["set", "image", "sts/web", "main=busybox:does-not-exist"]);
    let broken = observed(&c, "web")["updateRevision"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    c.wait_for(
        secs(60),
        "web-2 made from the broken template, not starting",
        || {
            let p = c.get(&format!("{PODS}/web-2")).ok_or("no web-2")?;
            let waiting = p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"].clone();
            if revision(&p) == broken
                && (waiting == "ErrImagePull" || waiting == "ImagePullBackOff")
            {
                Ok(())
            } else {
                Err(format!("{} {waiting}", revision(&p)))
            }
        },
    );
    c.kubectl()
        .ok(&["set", "image", "sts/web", "main=busybox:1.28"]);
    let reverted = observed(&c, "web");
    assert_eq!(
        reverted["updateRevision"],
        third.as_str(),
        "the good revision again"
    );
    let pods = live(&c, "web");
    assert_eq!(revision(&pods[2]), broken, "the broken pod is not replaced");
    assert_eq!(revision(&pods[1]), third);
    assert!(!is_ready(&pods[2]));
    c.kubectl().ok(&["delete", "pod", "web-2", "--wait=false"]);
    wait_ready(&c, "web", &["web-0", "web-1", "web-2"], &third);

    // OnDelete: a new template reaches a pod only when it is deleted.
    patch(
        &c,
        "web",
        json!({"spec": {"updateStrategy": {"type": "OnDelete", "rollingUpdate": null},
            "template": {"metadata": {"annotations": {"step": "on-delete"}}}}}),
    );
    let fourth = observed(&c, "web")["updateRevision"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_ne!(fourth, third);
    let before: Vec<String> = live(&c, "web").iter().map(revision).collect();
    assert_eq!(before, [third.as_str(), third.as_str(), third.as_str()]);
    c.kubectl().ok(&["delete", "pod", "web-0", "--wait=false"]);
    wait_web_revisions(
        &c,
        "web-0 alone at the OnDelete revision",
        [&fourth, &third, &third],
    );

    let history = c.kubectl().ok(&["rollout", "history", "sts/web"]);
    assert!(history.contains("REVISION"), "{history}");
    patch(
        &c,
        "web",
        json!({"spec": {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}}}),
    );
    wait_ready(&c, "web", &["web-0", "web-1", "web-2"], &fourth);
    c.kubectl().ok(&["rollout", "undo", "sts/web"]);
    let undone = observed(&c, "web")["updateRevision"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(
        undone, third,
        "undo brings the previous template's revision back"
    );
    wait_ready(&c, "web", &["web-0", "web-1", "web-2"], &third);
}

#[test]
fn parallel_creates_every_pod_at_once_and_a_claim_in_use_is_protected() {
    let c = Cluster::start(1);
    let watch = Watcher::ordinals(&c, "default", "app=par");
    let mut spec = data_claims();
    spec["podManagementPolicy"] = json!("Parallel");
    c.apply(&busybox_set("par", 3, spec));
    wait_ready(&c, "par", &["par-0", "par-1", "par-2"], "");
    let came = arrivals(&watch.finish().samples);
    assert_eq!(came.len(), 3);
    assert!(
        came.iter().all(|(_, ready)| ready.is_empty()),
        "all made before any was Ready: {came:?}"
    );

    let pv = bound_volume(&c, "data-par-0");
    c.kubectl()
        .ok(&["delete", "pvc", "data-par-0", "--wait=false"]);
    let held = c.wait_for(secs(20), "the claim marked for deletion", || {
        let cl = claim(&c, "data-par-0").ok_or("claim gone while its pod runs")?;
        if cl["metadata"]["deletionTimestamp"].is_null() {
            Err("not deleting yet".to_string())
        } else {
            Ok(cl)
        }
    });
    assert_eq!(
        held["metadata"]["finalizers"],
        json!(["kubernetes.io/pvc-protection"]),
        "pvc-protection holds it while par-0 runs"
    );
    assert!(c.get(&format!("{PODS}/par-0")).is_some());
    c.kubectl().ok(&["delete", "sts", "par"]);
    // Its pod gone, the claim goes; the volume is Released and, with reclaim Delete, removed
    // from its node.
    wait_claim_gone(&c, "data-par-0", &pv);
    assert!(
        claim(&c, "data-par-1").is_some(),
        "whenDeleted: Retain keeps the others"
    );
}
