//! Workloads acceptance: DaemonSets on real agents, driven with the real kubectl. The seed's
//! `fluentd-elasticsearch` (its image is the nginx stand-in, pushed under the seed's name and
//! pulled through the agents' `quay.io` mirror) runs on every node, the tainted control-plane
//! one included, with the injected `matchFields` affinity and the automatic tolerations; a
//! DaemonSet with a nodeSelector follows node labels, skips a node with an untolerated
//! NoSchedule taint, keeps and replaces its pod on a cordoned node, and a node joining late
//! gets the seed's pod. Rolling updates are bounded as asserted from a pod watch sampled after
//! every event: maxUnavailable 1 never leaves more than one node without an available pod,
//! maxSurge 1 / maxUnavailable 0 never leaves one and overlaps old and new on a node; OnDelete
//! changes a node only when its pod is deleted; `rollout status|history|undo|restart` work.

use std::path::Path;
use std::time::Duration;

use berth_tests::fixtures::NGINX_1_14_2;
use berth_tests::kinds::kind;
use berth_tests::objects::{merge, nginx_daemon_set};
use berth_tests::pod_reading::is_ready;
use berth_tests::rollout::daemon::{DaemonPods, HASH_LABEL, NodeSample, target_node};
use berth_tests::rollout::output;
use berth_tests::rollout::tally::Timeline;
use berth_tests::rollout::{DaemonPodWatch, Watcher};
use berth_tests::seeds::seed;
use berth_tests::table::{assert_describes, has_normal_event};
use berth_tests::wait::ok_if;
use berth_tests::{AgentOptions, Cluster, Table, secs};
use serde_json::{Value, json};

const SEED_NS: &str = "kube-system";
const FLUENTD: &str = "fluentd-elasticsearch";
const NS: &str = "default";
/// A rollout over three nodes: pulls, starts, three steps.
const ROLLOUT: Duration = secs(90);

/// The pods of `ns` that `selector` picks.
fn pods(c: &Cluster, ns: &str, selector: &str) -> Vec<Value> {
    let query = selector.replace('=', "%3D").replace(',', "%2C");
    c.get(&format!(
        "/api/v1/namespaces/{ns}/pods?labelSelector={query}"
    ))
    .and_then(|l| l["items"].as_array().cloned())
    .unwrap_or_default()
}

/// The live (not terminating) pods of `selector` by node, sorted: `(node, pod)`.
fn live_by_node(c: &Cluster, ns: &str, selector: &str) -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = pods(c, ns, selector)
        .into_iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .map(|p| (target_node(&p), p))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn name(v: &Value) -> String {
    v["metadata"]["name"].as_str().unwrap_or("").to_string()
}

/// Waits until the live pods of `selector` are exactly one Running and Ready pod on each of
/// `nodes`; returns them by node.
fn wait_ready_on(c: &Cluster, ns: &str, selector: &str, nodes: &[&str]) -> Vec<(String, Value)> {
    let mut want: Vec<String> = nodes.iter().map(|n| n.to_string()).collect();
    want.sort();
    c.wait_for(
        secs(60),
        &format!("{selector} ready on exactly {want:?}"),
        || {
            let live = live_by_node(c, ns, selector);
            let on: Vec<String> = live.iter().map(|(n, _)| n.clone()).collect();
            let all_ready = live
                .iter()
                .all(|(_, p)| is_ready(p) && p["spec"]["nodeName"].is_string());
            if on == want && all_ready {
                Ok(live)
            } else {
                Err(format!("on {on:?}, all bound and ready: {all_ready}"))
            }
        },
    )
}

/// The DaemonSet's status once it has observed its generation.
fn observed_status(c: &Cluster, ns: &str, ds: &str) -> Value {
    c.wait_for(secs(30), &format!("{ds} observed its generation"), || {
        let d = c
            .get(&format!("/apis/apps/v1/namespaces/{ns}/daemonsets/{ds}"))
            .ok_or("no DaemonSet")?;
        if d["status"]["observedGeneration"] == d["metadata"]["generation"] {
            Ok(d["status"].clone())
        } else {
            Err(format!("status {}", d["status"]))
        }
    })
}

/// `kubectl rollout status` of `target` in `ns`, which must succeed.
fn rollout_status(c: &Cluster, ns: &str, target: &str) -> String {
    c.kubectl().with_deadline(ROLLOUT + secs(10)).ok(&[
        "rollout",
        "status",
        target,
        "-n",
        ns,
        "--timeout=90s",
    ])
}

fn labels(c: &Cluster, node: &str, args: &[&str]) {
    let mut all = vec!["label", "node", node, "--overwrite"];
    all.extend_from_slice(args);
    c.kubectl().ok(&all);
}

/// A DaemonSet `name` of the nginx stand-in, labelled `app=<name>`, `spec` merged over its spec.
fn web_daemon_set(name: &str, spec: Value) -> Value {
    let mut ds = nginx_daemon_set(name, NS);
    merge(&mut ds["spec"], &spec);
    ds
}

#[test]
fn the_seed_daemon_set_runs_everywhere_and_pods_follow_labels_taints_cordons_and_new_nodes() {
    let mut c = Cluster::start(3);
    let nodes: Vec<String> = (0..3).map(|i| c.node_name(i).to_string()).collect();
    let (a, b, cp) = (nodes[0].as_str(), nodes[1].as_str(), nodes[2].as_str());
    c.push_fixture(&NGINX_1_14_2, "fluentd_elasticsearch/fluentd", "v2.5.2");
    c.kubectl().ok(&[
        "taint",
        "nodes",
        cp,
        "node-role.kubernetes.io/control-plane:NoSchedule",
    ]);

    // T-DS-01: the seed manifest as the documentation applies it; a pod on every node.
    let seed = seed("fluentd-elasticsearch.daemonset");
    let out = c
        .kubectl()
        .ok(&["apply", "-f", &seed.path.to_string_lossy()]);
    assert_eq!(out.trim(), "daemonset.apps/fluentd-elasticsearch created");
    let out = rollout_status(&c, SEED_NS, "daemonset/fluentd-elasticsearch");
    assert!(
        out.contains("daemon set \"fluentd-elasticsearch\" successfully rolled out"),
        "{out}"
    );
    let live = wait_ready_on(&c, SEED_NS, "name=fluentd-elasticsearch", &[a, b, cp]);
    let out = c.kubectl().ok(&["get", "ds", "-n", SEED_NS]);
    let t = Table::parse(&out).unwrap();
    // Upstream's columns, as kinds.rs writes them down.
    assert_eq!(t.headers, kind("DaemonSet").columns, "{out}");
    for col in ["DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE"] {
        assert_eq!(t.cell(FLUENTD, col), Some("3"), "{col}\n{out}");
    }
    assert_eq!(t.cell(FLUENTD, "NODE SELECTOR"), Some("<none>"), "{out}");

    let out = c
        .kubectl()
        .ok(&["describe", "daemonset", FLUENTD, "-n", SEED_NS]);
    assert_describes(
        &out,
        &[
            "Desired Number of Nodes Scheduled: 3",
            "Number of Nodes Scheduled with Available Pods: 3",
            "Number of Nodes Misscheduled: 0",
            "3 Running / 0 Waiting / 0 Succeeded / 0 Failed",
        ],
    );
    assert!(
        has_normal_event(
            &out,
            "SuccessfulCreate",
            "daemonset-controller",
            "Created pod: fluentd-elasticsearch-"
        ),
        "{out}"
    );

    // DS-06, DS-08: each pod is pinned to its node and carries the automatic tolerations.
    let revisions = c
        .get(&format!(
            "/apis/apps/v1/namespaces/{SEED_NS}/controllerrevisions"
        ))
        .unwrap()["items"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(revisions.len(), 1, "{revisions:#?}");
    let hash = revisions[0]["metadata"]["labels"][HASH_LABEL]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(name(&revisions[0]), format!("{FLUENTD}-{hash}"));
    for (node, p) in &live {
        assert_eq!(
            p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"],
            json!({"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}),
            "{p:#}"
        );
        let mut tolerations: Vec<String> = p["spec"]["tolerations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                format!(
                    "{}:{}:{}",
                    t["key"].as_str().unwrap_or(""),
                    t["effect"].as_str().unwrap_or(""),
                    t["tolerationSeconds"]
                )
            })
            .collect();
        tolerations.sort();
        assert_eq!(
            tolerations,
            [
                "node-role.kubernetes.io/control-plane:NoSchedule:null",
                "node-role.kubernetes.io/master:NoSchedule:null",
                "node.kubernetes.io/disk-pressure:NoSchedule:null",
                "node.kubernetes.io/memory-pressure:NoSchedule:null",
                "node.kubernetes.io/not-ready:NoExecute:null",
                "node.kubernetes.io/pid-pressure:NoSchedule:null",
                "node.kubernetes.io/unreachable:NoExecute:null",
                "node.kubernetes.io/unschedulable:NoSchedule:null",
            ],
            "{}",
            name(p)
        );
        assert_eq!(p["metadata"]["labels"][HASH_LABEL], json!(hash));
        assert_eq!(p["metadata"]["labels"]["pod-template-generation"], "1");
        assert_eq!(
            p["spec"]["containers"][0]["image"],
            "quay.io/fluentd_elasticsearch/fluentd:v2.5.2"
        );
    }

    // T-DS-02: a nodeSelector picks the labelled nodes; labels move the pods.
    labels(&c, a, &["disk=ssd"]);
    c.apply(&web_daemon_set(
        "ssd-monitor",
        json!({"template": {"spec": {"nodeSelector": {"disk": "ssd"}}}}),
    ));
    let sel = "app=ssd-monitor";
    wait_ready_on(&c, NS, sel, &[a]);
    labels(&c, b, &["disk=ssd"]);
    wait_ready_on(&c, NS, sel, &[a, b]);
    labels(&c, a, &["disk-"]);
    wait_ready_on(&c, NS, sel, &[b]);

    // A matching node with an untolerated NoSchedule taint gets none.
    labels(&c, cp, &["disk=ssd"]);
    c.ensure_for(secs(3), "no ssd-monitor pod on the tainted node", || {
        let on: Vec<String> = live_by_node(&c, NS, sel)
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        if on == [b] { Ok(()) } else { Err(on) }
    });
    let s = observed_status(&c, NS, "ssd-monitor");
    assert_eq!(
        (&s["desiredNumberScheduled"], &s["numberMisscheduled"]),
        (&json!(1), &json!(0)),
        "{s}"
    );

    // DS-10: a cordoned node keeps its daemon pods and gets a deleted one back.
    c.kubectl().ok(&["cordon", b]);
    let (_, old) = live_by_node(&c, NS, sel).remove(0);
    c.kubectl()
        .ok(&["delete", "pod", &name(&old), "-n", NS, "--wait=false"]);
    let back = wait_ready_on(&c, NS, sel, &[b]);
    assert_ne!(name(&back[0].1), name(&old));
    wait_ready_on(&c, SEED_NS, "name=fluentd-elasticsearch", &[a, b, cp]);
    c.kubectl().ok(&["uncordon", b]);

    // T-DS-03: an orphaning delete leaves the pod; the same DaemonSet again adopts it.
    let before: Vec<String> = live_by_node(&c, NS, sel)
        .iter()
        .map(|(_, p)| name(p))
        .collect();
    let out = c
        .kubectl()
        .ok(&["delete", "ds", "ssd-monitor", "-n", NS, "--cascade=orphan"]);
    assert_eq!(out.trim(), "daemonset.apps \"ssd-monitor\" deleted");
    let orphans = pods(&c, NS, sel);
    assert_eq!(orphans.len(), 1, "{orphans:#?}");
    assert!(
        orphans[0]["metadata"]["ownerReferences"].is_null(),
        "{:#}",
        orphans[0]
    );
    c.apply(&web_daemon_set(
        "ssd-monitor",
        json!({"template": {"spec": {"nodeSelector": {"disk": "ssd"}}}}),
    ));
    let ds = c
        .get(&format!(
            "/apis/apps/v1/namespaces/{NS}/daemonsets/ssd-monitor"
        ))
        .unwrap();
    c.wait_for(secs(30), "the pod adopted", || {
        let p = pods(&c, NS, sel);
        let owners: Vec<&Value> = p
            .iter()
            .map(|p| &p["metadata"]["ownerReferences"][0]["uid"])
            .collect();
        ok_if(owners == [&ds["metadata"]["uid"]], format!("{owners:?}"))
    });
    let after: Vec<String> = wait_ready_on(&c, NS, sel, &[b])
        .iter()
        .map(|(_, p)| name(p))
        .collect();
    assert_eq!(after, before, "adopted, not replaced");

    // DS-01: a node joining later gets the seed's pod.
    let d = c.add_agent(&AgentOptions::default());
    let late = c.node_name(d).to_string();
    wait_ready_on(
        &c,
        SEED_NS,
        "name=fluentd-elasticsearch",
        &[a, b, cp, &late],
    );
    let s = observed_status(&c, SEED_NS, FLUENTD);
    assert_eq!(s["desiredNumberScheduled"], 4, "{s}");
}

/// Asserts the pod watch never had more than `max` of `nodes` without an available pod; returns
/// the timeline.
fn at_most_unavailable(w: DaemonPodWatch, nodes: &[String], max: usize) -> Timeline<NodeSample> {
    let t = w.finish();
    let worst = t.most_unavailable(nodes).expect("samples");
    assert!(
        worst.unavailable(nodes) <= max,
        "{} nodes without an available pod at {}\n{}",
        worst.unavailable(nodes),
        worst.stamp.event,
        t.describe()
    );
    t
}

fn history(c: &Cluster, bin: Option<&Path>) -> Vec<u64> {
    let k = bin.map_or_else(|| c.kubectl(), |b| c.kubectl().with_binary(b));
    let out = k.ok(&["rollout", "history", "daemonset/web", "-n", NS]);
    output::history(&out, "daemonset.apps/web")
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .map(|(r, _)| r)
        .collect()
}

/// The current revision's hash (the one whose pods are being made).
fn current_hash(c: &Cluster) -> String {
    let list = c
        .get(&format!(
            "/apis/apps/v1/namespaces/{NS}/controllerrevisions?labelSelector=app%3Dweb"
        ))
        .expect("the revisions list");
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .max_by_key(|r| r["revision"].as_i64())
        .and_then(|r| r["metadata"]["labels"][HASH_LABEL].as_str())
        .unwrap_or("")
        .to_string()
}

fn settle(c: &Cluster, w: &DaemonPodWatch, nodes: &[String], what: &str) -> String {
    let hash = current_hash(c);
    w.wait_until(c, secs(60), what, |t: &DaemonPods| {
        t.settled_on(nodes, &hash)
    });
    hash
}

#[test]
fn rolling_updates_keep_their_bounds_and_rollout_history_undo_and_on_delete_work() {
    let c = Cluster::start(3);
    let nodes: Vec<String> = (0..3).map(|i| c.node_name(i).to_string()).collect();
    let target = "daemonset/web";
    c.apply(&web_daemon_set("web", json!({})));
    rollout_status(&c, NS, target);

    // maxUnavailable 1 (the default): never more than one node without an available pod.
    let w = Watcher::daemon_pods(&c, NS, "app=web");
    let first = settle(&c, &w, &nodes, "revision 1 everywhere");
    c.kubectl()
        .ok(&["set", "image", target, "web=nginx:1.16.1", "-n", NS]);
    let out = rollout_status(&c, NS, target);
    assert!(
        out.contains("daemon set \"web\" successfully rolled out"),
        "{out}"
    );
    let second = settle(&c, &w, &nodes, "revision 2 everywhere");
    assert_ne!(first, second);
    let t = at_most_unavailable(w, &nodes, 1);
    assert_eq!(
        t.most_unavailable(&nodes).map(|s| s.unavailable(&nodes)),
        Some(1),
        "the update went one node at a time\n{}",
        t.describe()
    );
    assert_eq!(history(&c, None), [1, 2]);

    // maxSurge 1, maxUnavailable 0: a new pod starts beside the old one, none is ever missing.
    let patch = json!({"spec": {"updateStrategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}}});
    c.kubectl()
        .ok(&["patch", target, "-n", NS, "-p", &patch.to_string()]);
    let w = Watcher::daemon_pods(&c, NS, "app=web");
    let out = c.kubectl().ok(&["rollout", "restart", target, "-n", NS]);
    assert_eq!(out.trim(), "daemonset.apps/web restarted");
    rollout_status(&c, NS, target);
    let third = settle(&c, &w, &nodes, "revision 3 everywhere");
    let t = at_most_unavailable(w, &nodes, 0);
    let most = t.most_on_a_node().map_or(0, NodeSample::most_on_a_node);
    assert_eq!(
        most,
        2,
        "old and new overlapped on a node\n{}",
        t.describe()
    );
    assert_eq!(history(&c, None), [1, 2, 3]);

    // History and undo, with the oldest and newest kubectl too.
    let out = c
        .kubectl()
        .ok(&["rollout", "history", target, "-n", NS, "--revision=2"]);
    assert!(out.contains("nginx:1.16.1"), "{out}");
    for v in ["1.27", "1.33"] {
        let bin = format!("/usr/lib/google-cloud-sdk/bin/kubectl.{v}");
        assert_eq!(history(&c, Some(Path::new(&bin))), [1, 2, 3], "kubectl {v}");
    }
    let w = Watcher::daemon_pods(&c, NS, "app=web");
    let out = c
        .kubectl()
        .ok(&["rollout", "undo", target, "-n", NS, "--to-revision=1"]);
    assert_eq!(out.trim(), "daemonset.apps/web rolled back");
    rollout_status(&c, NS, target);
    let back = settle(&c, &w, &nodes, "revision 1's template everywhere");
    assert_eq!(
        back, first,
        "the undo reuses revision 1's ControllerRevision"
    );
    at_most_unavailable(w, &nodes, 0);
    assert_eq!(history(&c, None), [2, 3, 4]);
    // kubectl compares the revision's data with the DaemonSet byte for byte.
    let out = c
        .kubectl()
        .ok(&["rollout", "undo", target, "-n", NS, "--to-revision=4"]);
    assert_eq!(
        out.trim(),
        "daemonset.apps/web skipped rollback (current template already matches revision 4)"
    );
    for (_, p) in live_by_node(&c, NS, "app=web") {
        assert_eq!(p["spec"]["containers"][0]["image"], "nginx:1.14.2");
    }
    assert_ne!(third, back);

    // OnDelete: a template change waits for pods to be deleted.
    let patch = json!({"spec": {"updateStrategy": {"type": "OnDelete", "rollingUpdate": null}}});
    c.kubectl()
        .ok(&["patch", target, "-n", NS, "-p", &patch.to_string()]);
    let before: Vec<String> = live_by_node(&c, NS, "app=web")
        .iter()
        .map(|(_, p)| name(p))
        .collect();
    c.kubectl()
        .ok(&["set", "image", target, "web=nginx:1.16.1", "-n", NS]);
    let s = observed_status(&c, NS, "web");
    assert_eq!(s["updatedNumberScheduled"].as_i64().unwrap_or(0), 0, "{s}");
    c.ensure_for(secs(3), "OnDelete leaves the pods alone", || {
        let now: Vec<String> = live_by_node(&c, NS, "app=web")
            .iter()
            .map(|(_, p)| name(p))
            .collect();
        if now == before { Ok(()) } else { Err(now) }
    });
    let r = c.kubectl().fails(&["rollout", "status", target, "-n", NS]);
    r.assert_stderr_has("rollout status is only available for RollingUpdate strategy type");
    let (node, victim) = live_by_node(&c, NS, "app=web").remove(0);
    c.kubectl().ok(&["delete", "pod", &name(&victim), "-n", NS]);
    let live = wait_ready_on(
        &c,
        NS,
        "app=web",
        &nodes.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    for (n, p) in &live {
        let want = if *n == node {
            "nginx:1.16.1"
        } else {
            "nginx:1.14.2"
        };
        assert_eq!(p["spec"]["containers"][0]["image"], want, "{n}");
    }
    // The status follows the pods: the replacement's count arrives after it runs.
    c.wait_for(secs(30), "the status to count the replaced pod", || {
        let s = observed_status(&c, NS, "web");
        if s["updatedNumberScheduled"] == 1 && s["currentNumberScheduled"] == nodes.len() {
            Ok(())
        } else {
            Err(s)
        }
    });
}
