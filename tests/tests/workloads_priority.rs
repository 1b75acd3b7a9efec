//! Pod priority and preemption acceptance (issue 17), on real agents with the real kubectl:
//!
//! 1. PriorityClasses as upstream serves them (`kubectl get priorityclass` columns, the
//!    built-in classes, admission's refusals); one node filled with low-priority pods by cpu
//!    requests: a high-priority pod preempts exactly as many as it needs (the lowest priority,
//!    most recently started), shows `NOMINATED NODE` in `kubectl get pods -o wide` while they
//!    terminate, then runs there; the victims carry `DisruptionTarget`/`PreemptionByScheduler`
//!    and the `Preempted` event; their ReplicaSet recreates them and they stay Pending with
//!    upstream's message.
//! 2. Two candidate nodes: the one whose victims violate no PodDisruptionBudget is chosen.
//! 3. `preemptionPolicy: Never` stays Pending, a pod of equal priority never preempts, and a
//!    DaemonSet pod of `system-node-critical` priority preempts on a full node.

use berth_tests::pod_reading::{phase, unschedulable_message};
use berth_tests::pod_specs::sh_container;
use berth_tests::wait::ok_if;
use berth_tests::{Cluster, Table, secs};
use serde_json::{Value, json};
use std::collections::BTreeSet;

const NS: &str = "default";
/// Ignores TERM, so a victim stays terminating for its whole grace period.
const STUBBORN: &str = "trap '' TERM; while true; do sleep 1; done";
const GRACE: i64 = 8;

fn priority_class(name: &str, value: i64, extra: Value) -> Value {
    let mut pc = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": name}, "value": value});
    if let (Some(pc), Some(extra)) = (pc.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            pc.insert(k.clone(), v.clone());
        }
    }
    pc
}

/// A pod spec asking `milli` millicores, of class `class`, pinned to `node` when given.
fn spec(class: &str, milli: i64, node: Option<&str>) -> Value {
    let mut c = sh_container("main", STUBBORN);
    c["resources"] = json!({"requests": {"cpu": format!("{milli}m")}});
    let mut s = json!({"priorityClassName": class, "terminationGracePeriodSeconds": GRACE,
        "containers": [c]});
    if let Some(n) = node {
        s["nodeSelector"] = json!({"kubernetes.io/hostname": n});
    }
    s
}

fn pod(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"app": name}}, "spec": spec})
}

fn deployment(name: &str, replicas: u32, spec: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}})
}

fn name(v: &Value) -> String {
    v["metadata"]["name"].as_str().unwrap_or("").to_string()
}

/// Every pod of `app` (terminating ones included).
fn pods_of(c: &Cluster, app: &str) -> Vec<Value> {
    c.get(&format!(
        "/api/v1/namespaces/{NS}/pods?labelSelector=app%3D{app}"
    ))
    .and_then(|l| l["items"].as_array().cloned())
    .unwrap_or_default()
}

fn terminating(p: &Value) -> bool {
    !p["metadata"]["deletionTimestamp"].is_null()
}

/// Waits until `app` has `n` live pods, all Running; returns them.
fn running(c: &Cluster, app: &str, n: usize) -> Vec<Value> {
    c.wait_for(secs(120), &format!("{n} Running pods of {app}"), || {
        let live: Vec<Value> = pods_of(c, app)
            .into_iter()
            .filter(|p| !terminating(p))
            .collect();
        let up = live.iter().filter(|p| phase(p) == "Running").count();
        if live.len() == n && up == n {
            Ok(live)
        } else {
            Err(format!("{} live, {up} Running", live.len()))
        }
    })
}

/// The node's allocatable cpu in millicores.
fn allocatable_milli(c: &Cluster, node: &str) -> i64 {
    let n = c.get(&format!("/api/v1/nodes/{node}")).expect("node");
    let cpu = n["status"]["allocatable"]["cpu"].as_str().expect("cpu");
    match cpu.strip_suffix('m') {
        Some(m) => m.parse().expect("millicores"),
        None => cpu.parse::<i64>().expect("cores") * 1000,
    }
}

fn wait_message(c: &Cluster, pod: &str, want: &str) {
    c.wait_pod(NS, pod, secs(60), want, |p| {
        let m = unschedulable_message(p)?;
        if m == want { Ok(()) } else { Err(m) }
    })
}

fn disruption_target(p: &Value) -> Option<(String, String)> {
    p["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "DisruptionTarget" && c["status"] == "True")
        .map(|c| {
            (
                c["reason"].as_str().unwrap_or("").to_string(),
                c["message"].as_str().unwrap_or("").to_string(),
            )
        })
}

const NO_ROOM: &str = "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are \
                       available: 1 No preemption victims found for incoming pod..";

#[test]
fn a_high_priority_pod_preempts_the_fewest_lowest_priority_pods_and_their_replacements_wait() {
    let (c, node) = Cluster::start_one();

    // The classes, as kubectl shows them; the built-ins are there from the start.
    c.apply(&priority_class("low", 10, json!({"description": "batch"})));
    c.apply(&priority_class("mid", 50, json!({})));
    c.apply(&priority_class("high", 1000, json!({})));
    let out = c.kubectl().ok(&["get", "priorityclass"]);
    let t = Table::parse(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(
        t.headers,
        ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"]
    );
    assert_eq!(t.cell("system-node-critical", "VALUE"), Some("2000001000"));
    assert_eq!(
        t.cell("system-cluster-critical", "VALUE"),
        Some("2000000000")
    );
    assert_eq!(
        t.cell("low", "PREEMPTIONPOLICY"),
        Some("PreemptLowerPriority")
    );
    assert_eq!(t.cell("low", "GLOBAL-DEFAULT"), Some("false"));
    // Admission refuses as upstream does.
    let err = c
        .kubectl()
        .fails_stdin(
            &["apply", "-f", "-"],
            &pod("unknown", spec("nope", 100, None)).to_string(),
        )
        .stderr;
    assert!(
        err.contains("pods \"unknown\" is forbidden: no PriorityClass with name nope was found"),
        "{err}"
    );
    let mut own = pod("own", spec("", 100, None));
    own["spec"]["priority"] = json!(5);
    if let Some(s) = own["spec"].as_object_mut() {
        s.remove("priorityClassName");
    }
    let err = c
        .kubectl()
        .fails_stdin(&["apply", "-f", "-"], &own.to_string())
        .stderr;
    assert!(
        err.contains("the integer value of priority (5) must not be provided in pod spec; priority admission controller computed 0 from the given PriorityClass name"),
        "{err}"
    );
    let err = c
        .kubectl()
        .fails(&["delete", "priorityclass", "system-node-critical"])
        .stderr;
    assert!(
        err.contains("this is a system priority class and cannot be deleted"),
        "{err}"
    );

    // Fill the node: three batch pods (low) and one mid pod, a quarter of the cpu each.
    let quarter = allocatable_milli(&c, &node) / 4;
    c.apply(&deployment("batch", 3, spec("low", quarter, None)));
    running(&c, "batch", 3);
    c.apply(&pod("mid", spec("mid", quarter, None)));
    running(&c, "mid", 1);
    let before = running(&c, "batch", 3);

    // Half the node: two victims, both batch pods (the lowest priority), the most recently
    // started of them.
    c.apply(&pod("urgent", spec("high", 2 * quarter, None)));
    let victims: Vec<Value> = c.wait_for(secs(60), "urgent nominated, victims terminating", || {
        let u = c.pod(NS, "urgent").ok_or("no urgent pod")?;
        let nominated = u["status"]["nominatedNodeName"].as_str().unwrap_or("");
        let going: Vec<Value> = pods_of(&c, "batch")
            .into_iter()
            .filter(terminating)
            .collect();
        if nominated == node && going.len() == 2 && u["spec"]["nodeName"].is_null() {
            Ok(going)
        } else {
            Err(format!(
                "nominated {nominated:?}, {} terminating, node {}",
                going.len(),
                u["spec"]["nodeName"]
            ))
        }
    });
    let out = c.kubectl().ok(&["get", "pods", "-o", "wide", "-n", NS]);
    let t = Table::parse(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(
        t.cell("urgent", "NOMINATED NODE"),
        Some(node.as_str()),
        "{out}"
    );
    assert_eq!(t.cell("urgent", "STATUS"), Some("Pending"), "{out}");
    let victim_names: BTreeSet<String> = victims.iter().map(name).collect();
    let survivor = before
        .iter()
        .find(|p| !victim_names.contains(&name(p)))
        .expect("one batch pod survives");
    for v in &victims {
        assert_eq!(
            disruption_target(v),
            Some((
                "PreemptionByScheduler".to_string(),
                "default-scheduler: preempting to accommodate a higher priority pod".to_string()
            )),
            "{v:#}"
        );
        assert!(
            v["status"]["startTime"].as_str() >= survivor["status"]["startTime"].as_str(),
            "the most recently started go: {v:#} vs {survivor:#}"
        );
    }
    assert!(c.pod(NS, "mid").is_some_and(|m| !terminating(&m)));

    // The preemptor runs there once they are gone; each victim has its event.
    let urgent = c.wait_pod(NS, "urgent", secs(90), "urgent Running", |p| {
        match (p["spec"]["nodeName"].as_str(), phase(p)) {
            (Some(n), "Running") => Ok(n.to_string()),
            _ => Err("not yet".to_string()),
        }
    });
    assert_eq!(urgent, node);
    let uid = c.pod(NS, "urgent").expect("urgent")["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    for v in &victim_names {
        c.wait_for(secs(30), &format!("Preempted event about {v}"), || {
            let events = c.pod_events(NS, v);
            events
                .iter()
                .find(|e| e["reason"] == "Preempted")
                .map(|e| e["message"].clone())
                .ok_or_else(|| c.event_lines(NS, v))
                .and_then(|m| {
                    if m == format!("Preempted by pod {uid} on node {node}") {
                        Ok(())
                    } else {
                        Err(format!("message {m}"))
                    }
                })
        });
    }

    // The ReplicaSet replaces them; the replacements wait with upstream's message.
    let waiting: Vec<String> = c.wait_for(secs(60), "two replacements Pending", || {
        let pending: Vec<String> = pods_of(&c, "batch")
            .into_iter()
            .filter(|p| !terminating(p) && p["spec"]["nodeName"].is_null())
            .map(|p| name(&p))
            .collect();
        if pending.len() == 2 {
            Ok(pending)
        } else {
            Err(format!("{pending:?}"))
        }
    });
    for p in &waiting {
        wait_message(&c, p, NO_ROOM);
    }
}

#[test]
fn of_two_candidate_nodes_the_one_whose_victims_violate_no_budget_is_chosen() {
    let c = Cluster::start(2);
    let (a, b) = (c.node_name(0).to_string(), c.node_name(1).to_string());
    c.apply(&priority_class("lowest", 5, json!({})));
    c.apply(&priority_class("low", 10, json!({})));
    c.apply(&priority_class("high", 1000, json!({})));
    let half_a = allocatable_milli(&c, &a) / 2;
    let half_b = allocatable_milli(&c, &b) / 2;
    // Node a holds pods of the lowest priority (the better victims but for their budget).
    c.apply(&deployment("guarded", 2, spec("lowest", half_a, Some(&a))));
    c.apply(&deployment("free", 2, spec("low", half_b, Some(&b))));
    c.apply(
        &json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "guarded", "namespace": NS},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "guarded"}}}}),
    );
    running(&c, "guarded", 2);
    running(&c, "free", 2);
    c.wait_for(secs(60), "the budget allows no disruption", || {
        let b = c
            .get(&format!(
                "/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/guarded"
            ))
            .ok_or("no budget")?;
        ok_if(
            b["status"]["currentHealthy"] == 2 && b["status"]["disruptionsAllowed"] == 0,
            format!("{}", b["status"]),
        )
    });
    c.apply(&pod("urgent", spec("high", half_a.min(half_b), None)));
    let node = c.wait_pod(NS, "urgent", secs(90), "urgent Running", |p| {
        match (p["spec"]["nodeName"].as_str(), phase(p)) {
            (Some(n), "Running") => Ok(n.to_string()),
            _ => Err(format!("nominated {}", p["status"]["nominatedNodeName"])),
        }
    });
    assert_eq!(node, b);
    assert_eq!(running(&c, "guarded", 2).len(), 2);
    assert!(
        pods_of(&c, "guarded")
            .iter()
            .all(|p| disruption_target(p).is_none()),
        "no guarded pod was disrupted"
    );
}

#[test]
fn never_and_equal_priority_wait_while_a_system_node_critical_daemon_pod_preempts() {
    let (c, node) = Cluster::start_one();
    c.apply(&priority_class("low", 10, json!({})));
    c.apply(&priority_class(
        "polite",
        1000,
        json!({"preemptionPolicy": "Never"}),
    ));
    let quarter = allocatable_milli(&c, &node) / 4;
    c.apply(&deployment("filler", 4, spec("low", quarter, None)));
    let filler: BTreeSet<String> = running(&c, "filler", 4).iter().map(name).collect();

    c.apply(&pod("polite", spec("polite", quarter, None)));
    c.apply(&pod("peer", spec("low", quarter, None)));
    wait_message(
        &c,
        "polite",
        "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to \
         preemptionPolicy=Never..",
    );
    wait_message(&c, "peer", NO_ROOM);
    c.ensure_for(secs(5), "no filler pod is preempted", || {
        let now: BTreeSet<String> = pods_of(&c, "filler")
            .iter()
            .filter(|p| !terminating(p))
            .map(name)
            .collect();
        ok_if(now == filler, format!("{now:?}"))
    });

    // A node-critical daemon pod takes a quarter by preempting one filler pod.
    c.apply(&json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "agentd", "namespace": NS},
        "spec": {"selector": {"matchLabels": {"app": "agentd"}},
            "template": {"metadata": {"labels": {"app": "agentd"}},
                "spec": spec("system-node-critical", quarter, None)}}}));
    let daemon = running(&c, "agentd", 1);
    assert_eq!(daemon[0]["spec"]["nodeName"].as_str(), Some(node.as_str()));
    assert_eq!(daemon[0]["spec"]["priority"], json!(2_000_001_000));
    let kept: BTreeSet<String> = pods_of(&c, "filler")
        .iter()
        .filter(|p| filler.contains(&name(p)) && !terminating(p))
        .map(name)
        .collect();
    assert_eq!(kept.len(), 3, "exactly one filler pod preempted: {kept:?}");
    // The polite pod still waits: the room went to the daemon pod.
    let polite = c.pod(NS, "polite").expect("polite");
    assert!(polite["spec"]["nodeName"].is_null(), "{polite:#}");
}
