//! Voluntary disruptions acceptance (issue 10, item 4), on real agents with the real kubectl:
//!
//! - A Deployment of 3 under `minAvailable: 2`: the budget's status and `kubectl get pdb` as
//!   upstream; the first eviction is granted (201, the pod marked `DisruptionTarget`
//!   `EvictionByEvictionAPI` and deleted gracefully), an immediate second one gets upstream's 429
//!   (`DisruptionBudget` cause); of two evictions racing for the one disruption allowed, exactly
//!   one wins; a pod under two budgets gets upstream's 500. The seed's zookeeper budgets
//!   (`minAvailable: 2`, then `maxUnavailable: 1`, over 3 replicas) each allow one disruption.
//! - `kubectl drain --ignore-daemonsets` of a node holding 2 of the 3 pods: the second eviction
//!   waits (kubectl retries the 429) until the first pod's replacement is Ready elsewhere, the
//!   drain completes, and a watch of the pods never sees fewer than 2 Ready; the daemon pod
//!   stays; `cordon`/`uncordon` put and take the `unschedulable` taint.

use std::sync::{Arc, Barrier};

use berth_tests::objects::nginx_daemon_set;
use berth_tests::pod_reading::is_ready;
use berth_tests::rollout::PodWatch;
use berth_tests::wait::ok_if;
use berth_tests::{Api, Cluster, Credentials, Req, Table, secs};
use serde_json::{Value, json};

const NS: &str = "default";
const PDB_PATH: &str = "/apis/policy/v1/namespaces/default/poddisruptionbudgets";

/// A Deployment of `replicas` nginx stand-ins labelled `app=<app>`.
fn deployment(name: &str, app: &str, replicas: u32) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": app}},
            "template": {"metadata": {"labels": {"app": app}},
                "spec": {"terminationGracePeriodSeconds": 5,
                    "containers": [{"name": "web", "image": "nginx:1.14.2"}]}}}})
}

fn budget(name: &str, app: &str, spec: Value) -> Value {
    let mut spec = spec;
    spec["selector"] = json!({"matchLabels": {"app": app}});
    json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": NS}, "spec": spec})
}

/// The live (not terminating) pods of `app`.
fn live(c: &Cluster, app: &str) -> Vec<Value> {
    c.live_pods(NS, &format!("app%3D{app}"))
}

fn name(v: &Value) -> String {
    v["metadata"]["name"].as_str().unwrap_or("").to_string()
}

/// Waits until `app` has exactly `n` live pods, all Ready; returns them.
fn ready(c: &Cluster, app: &str, n: usize) -> Vec<Value> {
    c.wait_for(secs(90), &format!("{n} Ready pods of {app}"), || {
        let pods = live(c, app);
        if pods.len() == n && pods.iter().all(is_ready) {
            Ok(pods)
        } else {
            Err(format!(
                "{} live, {} Ready",
                pods.len(),
                pods.iter().filter(|p| is_ready(p)).count()
            ))
        }
    })
}

/// Waits until budget `name` has observed its generation with `allowed` disruptions; returns it.
fn settled(c: &Cluster, name: &str, allowed: i64) -> Value {
    c.wait_for(secs(60), &format!("{name} allows {allowed}"), || {
        let b = c.get(&format!("{PDB_PATH}/{name}")).ok_or("no budget")?;
        let s = &b["status"];
        if s["observedGeneration"] == b["metadata"]["generation"]
            && s["disruptionsAllowed"] == allowed
        {
            Ok(b)
        } else {
            Err(format!("status {s}"))
        }
    })
}

fn eviction(pod: &str) -> Value {
    json!({"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": pod, "namespace": NS}, "deleteOptions": {}})
}

fn evict(api: &Api, pod: &str) -> berth_tests::Reply {
    api.send(Req::post(
        format!("/api/v1/namespaces/{NS}/pods/{pod}/eviction"),
        &eviction(pod),
    ))
}

fn get_pdb(c: &Cluster) -> Table {
    let out = c.kubectl().ok(&["get", "pdb", "-n", NS]);
    Table::parse(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[test]
fn evictions_spend_the_budget_and_are_refused_past_it_as_upstream_refuses_them() {
    let c = Cluster::start(1);
    c.apply(&deployment("web", "web", 3));
    c.apply(&budget("web-pdb", "web", json!({"minAvailable": 2})));
    let pods = ready(&c, "web", 3);
    let b = settled(&c, "web-pdb", 1);
    let s = &b["status"];
    assert_eq!(
        (
            &s["expectedPods"],
            &s["desiredHealthy"],
            &s["currentHealthy"]
        ),
        (&json!(3), &json!(2), &json!(3)),
        "{s:#}"
    );
    let cond = &s["conditions"][0];
    assert_eq!(
        (&cond["type"], &cond["status"], &cond["reason"]),
        (
            &json!("DisruptionAllowed"),
            &json!("True"),
            &json!("SufficientPods")
        ),
        "{s:#}"
    );
    let t = get_pdb(&c);
    assert_eq!(
        t.headers,
        [
            "NAME",
            "MIN AVAILABLE",
            "MAX UNAVAILABLE",
            "ALLOWED DISRUPTIONS",
            "AGE"
        ]
    );
    assert_eq!(t.cell("web-pdb", "MIN AVAILABLE"), Some("2"));
    assert_eq!(t.cell("web-pdb", "MAX UNAVAILABLE"), Some("N/A"));
    assert_eq!(t.cell("web-pdb", "ALLOWED DISRUPTIONS"), Some("1"));

    // The first eviction is granted, an immediate second one refused.
    let api = c.api();
    let first = evict(api, &name(&pods[0]));
    assert_eq!(first.status, 201, "{}", first.describe());
    assert_eq!(first.json()["status"], "Success");
    let evicted = c.pod(NS, &name(&pods[0])).expect("terminating, not gone");
    assert!(
        !evicted["metadata"]["deletionTimestamp"].is_null(),
        "{evicted:#}"
    );
    let target = evicted["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "DisruptionTarget"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        (&target["reason"], &target["message"]),
        (
            &json!("EvictionByEvictionAPI"),
            &json!("Eviction API: evicting")
        )
    );
    let second = evict(api, &name(&pods[1]));
    assert_eq!(second.status, 429, "{}", second.describe());
    let body = second.json();
    assert_eq!(body["reason"], "TooManyRequests");
    assert_eq!(
        body["message"],
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    let cause = &body["details"]["causes"][0];
    assert_eq!(cause["reason"], "DisruptionBudget", "{body:#}");
    assert!(
        cause["message"].as_str().is_some_and(
            |m| m.starts_with("The disruption budget web-pdb needs 2 healthy pods and has ")
        ),
        "{body:#}"
    );
    assert!(
        c.pod(NS, &name(&pods[1]))
            .is_some_and(|p| p["metadata"]["deletionTimestamp"].is_null())
    );

    // Two evictions racing for the one disruption allowed: exactly one wins.
    let pods = ready(&c, "web", 3);
    settled(&c, "web-pdb", 1);
    let barrier = Arc::new(Barrier::new(2));
    let codes: Vec<u16> = std::thread::scope(|s| {
        let racers: Vec<_> = pods[..2]
            .iter()
            .map(|p| {
                let (barrier, pod) = (barrier.clone(), name(p));
                let endpoint = c
                    .controller()
                    .endpoint(Credentials::ClientCert(c.controller().admin_identity()));
                let api = Api::new(endpoint, c.logs());
                s.spawn(move || {
                    barrier.wait();
                    evict(&api, &pod).status
                })
            })
            .collect();
        racers
            .into_iter()
            .map(|r| r.join().expect("racer"))
            .collect()
    });
    let mut sorted = codes.clone();
    sorted.sort();
    assert_eq!(sorted, [201, 429], "{codes:?}");

    // A pod under two budgets cannot be evicted.
    let pods = ready(&c, "web", 3);
    c.apply(&budget("web-pdb-2", "web", json!({"maxUnavailable": 1})));
    let both = evict(api, &name(&pods[0]));
    assert_eq!(both.status, 500, "{}", both.describe());
    assert_eq!(
        both.json()["message"],
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    );
    c.kubectl().ok(&["delete", "pdb", "web-pdb-2", "-n", NS]);

    // The seed's zookeeper budgets over 3 replicas each allow one disruption.
    c.apply(&deployment("zk", "zookeeper", 3));
    ready(&c, "zookeeper", 3);
    c.apply(&budget("zk-pdb", "zookeeper", json!({"minAvailable": 2})));
    settled(&c, "zk-pdb", 1);
    let t = get_pdb(&c);
    assert_eq!(t.cell("zk-pdb", "MIN AVAILABLE"), Some("2"));
    assert_eq!(t.cell("zk-pdb", "MAX UNAVAILABLE"), Some("N/A"));
    assert_eq!(t.cell("zk-pdb", "ALLOWED DISRUPTIONS"), Some("1"));
    c.apply(&budget("zk-pdb", "zookeeper", json!({"maxUnavailable": 1})));
    let b = c.wait_for(secs(30), "zk-pdb as maxUnavailable 1", || {
        let b = settled(&c, "zk-pdb", 1);
        if b["spec"]["minAvailable"].is_null() && b["status"]["observedGeneration"] == 2 {
            Ok(b)
        } else {
            Err(format!("{:#}", b["spec"]))
        }
    });
    assert_eq!(b["status"]["expectedPods"], 3, "{:#}", b["status"]);
    assert_eq!(b["status"]["desiredHealthy"], 2);
    let t = get_pdb(&c);
    assert_eq!(t.cell("zk-pdb", "MIN AVAILABLE"), Some("N/A"));
    assert_eq!(t.cell("zk-pdb", "MAX UNAVAILABLE"), Some("1"));
    assert_eq!(t.cell("zk-pdb", "ALLOWED DISRUPTIONS"), Some("1"));
}

fn taint_keys(c: &Cluster, node: &str) -> Vec<String> {
    let n = c.get(&format!("/api/v1/nodes/{node}")).unwrap_or_default();
    berth_tests::objects::taint_keys(&n)
}

fn wait_taint(c: &Cluster, node: &str, present: bool) {
    let unschedulable = "node.kubernetes.io/unschedulable:NoSchedule".to_string();
    c.wait_for(
        secs(30),
        &format!("{node}'s unschedulable taint present: {present}"),
        || {
            let keys = taint_keys(c, node);
            ok_if(keys.contains(&unschedulable) == present, keys)
        },
    );
}

#[test]
fn drain_waits_on_the_budget_and_never_leaves_fewer_ready_pods_than_it_protects() {
    let c = Cluster::start(3);
    let nodes: Vec<String> = (0..3).map(|i| c.node_name(i).to_string()).collect();
    c.apply(&nginx_daemon_set("daemon", NS));
    // The third node is cordoned while the Deployment starts, so one of the others holds two of
    // its three pods.
    let out = c.kubectl().ok(&["cordon", &nodes[2]]);
    assert!(
        out.contains(&format!("node/{} cordoned", nodes[2])),
        "{out}"
    );
    wait_taint(&c, &nodes[2], true);
    c.apply(&deployment("web", "web", 3));
    c.apply(&budget("web-pdb", "web", json!({"minAvailable": 2})));
    let pods = ready(&c, "web", 3);
    let out = c.kubectl().ok(&["uncordon", &nodes[2]]);
    assert!(
        out.contains(&format!("node/{} uncordoned", nodes[2])),
        "{out}"
    );
    wait_taint(&c, &nodes[2], false);
    settled(&c, "web-pdb", 1);
    let on = |n: &str| pods.iter().filter(|p| p["spec"]["nodeName"] == n).count();
    let drained = nodes[..2]
        .iter()
        .find(|n| on(n) == 2)
        .unwrap_or_else(|| panic!("no node holds 2 of {:#?}", pods))
        .clone();
    let daemon_before = c.wait_for(secs(60), "the daemon pod on the drained node", || {
        live(&c, "daemon")
            .into_iter()
            .find(|p| p["spec"]["nodeName"] == drained.as_str() && is_ready(p))
            .ok_or("none Ready yet")
    });

    let watch = PodWatch::pods(&c, NS, "app=web");
    let drain = c.kubectl().with_deadline(secs(150)).run(&[
        "drain",
        &drained,
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--timeout=120s",
    ]);
    assert!(
        drain.success(),
        "{}\n{}",
        drain.describe(),
        c.logs().render()
    );
    let out = format!("{}{}", drain.stdout, drain.stderr);
    assert!(out.contains(&format!("node/{drained} cordoned")), "{out}");
    assert!(
        out.contains("Warning: ignoring DaemonSet-managed Pods"),
        "{out}"
    );
    assert!(out.contains("evicting pod default/web-"), "{out}");
    assert!(
        out.contains(
            "(will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget."
        ),
        "the drain never waited on the budget:\n{out}"
    );
    assert!(out.contains(&format!("node/{drained} drained")), "{out}");

    let after = ready(&c, "web", 3);
    assert!(
        after
            .iter()
            .all(|p| p["spec"]["nodeName"] != drained.as_str()),
        "{after:#?}"
    );
    let timeline = watch.finish();
    let least = timeline.min_available().expect("samples");
    assert!(
        least.total.available >= 2,
        "{} Ready at {}\n{}",
        least.total.available,
        least.stamp.line(),
        timeline.describe()
    );
    let daemon_after = c
        .pod(NS, &name(&daemon_before))
        .expect("the daemon pod stays");
    assert!(daemon_after["metadata"]["deletionTimestamp"].is_null());
    let nodes_out = c.kubectl().ok(&["get", "nodes"]);
    let t = Table::parse(&nodes_out).unwrap();
    assert_eq!(
        t.cell(&drained, "STATUS"),
        Some("Ready,SchedulingDisabled"),
        "{nodes_out}"
    );
    wait_taint(&c, &drained, true);
}
