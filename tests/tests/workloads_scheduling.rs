//! Scheduler acceptance 3, on real agents: pods without `spec.nodeName` land where their
//! nodeSelector, required node affinity and tolerations allow; a pod nothing fits stays Pending
//! with upstream's `Unschedulable` condition and `FailedScheduling` event, and is placed once the
//! cluster changes (a taint removed, a node added); a zone spread constraint overrides a
//! preference for one zone.

use berth_tests::pod_reading::{condition, phase, unschedulable_message};
use berth_tests::pod_specs::{SLEEP_FOREVER, sh_container};
use berth_tests::{AgentOptions, Cluster, ClusterConfig, secs};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

const START: Duration = Duration::from_secs(90);
const REACT: Duration = Duration::from_secs(30);
const ZONE: &str = "topology.kubernetes.io/zone";

/// A pod for the scheduler to place: busybox sleeping, `extra` merged into its spec.
fn unbound_pod(name: &str, extra: Value) -> Value {
    let mut spec = json!({"containers": [sh_container("main", SLEEP_FOREVER)]});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            spec.insert(k.clone(), v.clone());
        }
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"test": name}},
        "spec": spec,
    })
}

fn node_of(pod: &Value) -> Option<&str> {
    pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty())
}

/// Waits until the pod is bound and Running; returns its node.
fn running_on(c: &Cluster, name: &str) -> String {
    c.wait_pod("default", name, START, "bound and Running", |p| {
        match (node_of(p), phase(p)) {
            (Some(node), "Running") => Ok(node.to_string()),
            _ => Err("not yet".into()),
        }
    })
}

/// Waits for `PodScheduled=False` reason `Unschedulable`; returns its message.
fn unschedulable(c: &Cluster, name: &str) -> String {
    c.wait_pod(
        "default",
        name,
        REACT,
        "Unschedulable",
        unschedulable_message,
    )
}

fn scheduling_events(c: &Cluster, name: &str) -> Vec<String> {
    c.pod_events("default", name)
        .iter()
        .filter(|e| e["reason"] == "FailedScheduling")
        .filter_map(|e| e["message"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn selectors_affinity_and_taints_decide_the_node_and_a_removed_taint_unblocks() {
    let mut config = ClusterConfig::agents(2);
    config.agents[0].labels = format!("disk=ssd,{ZONE}=zone-a");
    config.agents[1].labels = format!("disk=hdd,{ZONE}=zone-b");
    config.agents[1].taints = "dedicated=gpu:NoSchedule".into();
    let c = Cluster::start_with(config);
    let (a, b) = (c.node_name(0).to_string(), c.node_name(1).to_string());
    let zone_b_affinity = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": ZONE, "operator": "In", "values": ["zone-b"]},
            {"key": "disk", "operator": "NotIn", "values": ["ssd"]},
        ]}]
    }}});

    // nodeSelector: only node-a has disk=ssd.
    c.apply(&unbound_pod(
        "on-ssd",
        json!({"nodeSelector": {"disk": "ssd"}}),
    ));
    // Required affinity to zone-b plus a toleration of its taint (operator Equal).
    c.apply(&unbound_pod(
        "tolerates-gpu",
        json!({
            "affinity": zone_b_affinity,
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
        }),
    ));
    // The same affinity without the toleration fits nowhere.
    c.apply(&unbound_pod(
        "wants-gpu",
        json!({"affinity": zone_b_affinity}),
    ));
    // No constraints and no toleration: only the untainted node-a.
    c.apply(&unbound_pod("anywhere", json!({})));
    // A toleration with operator Exists and no key tolerates every taint: either node will do.
    c.apply(&unbound_pod(
        "tolerates-all",
        json!({"tolerations": [{"operator": "Exists"}], "nodeSelector": {ZONE: "zone-b"}}),
    ));

    assert_eq!(running_on(&c, "on-ssd"), a);
    assert_eq!(running_on(&c, "tolerates-gpu"), b);
    assert_eq!(running_on(&c, "anywhere"), a);
    assert_eq!(running_on(&c, "tolerates-all"), b);

    let message = unschedulable(&c, "wants-gpu");
    assert_eq!(
        message,
        "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, \
         1 node(s) had untolerated taint {dedicated: gpu}. preemption: 0/2 nodes are available: \
         2 Preemption is not helpful for scheduling.."
    );
    let pending = c.pod("default", "wants-gpu").unwrap();
    assert_eq!(phase(&pending), "Pending");
    assert_eq!(node_of(&pending), None);
    let events = c.wait_for(REACT, "a FailedScheduling event", || {
        let e = scheduling_events(&c, "wants-gpu");
        if e.is_empty() { Err("none") } else { Ok(e) }
    });
    assert!(events.iter().all(|m| m == &message), "{events:?}");
    let table = c.kubectl().ok(&["get", "pod", "wants-gpu"]);
    assert!(table.contains("Pending"), "{table}");

    // Removing the taint is a node change: the pending pod is retried and lands on node-b.
    c.kubectl()
        .ok(&["taint", "nodes", &b, "dedicated=gpu:NoSchedule-"]);
    assert_eq!(running_on(&c, "wants-gpu"), b);
    let scheduled = c.pod("default", "wants-gpu").unwrap();
    assert_eq!(condition(&scheduled, "PodScheduled"), Some("True"));

    // As with the kubelet, --register-with-taints applies when the Node is created: an agent
    // restart does not put the removed taint back.
    let mut c = c;
    c.restart_agent(1);
    let log = c.agent(1).stderr_log();
    c.wait_for(
        REACT,
        "the restarted agent registers its node again",
        || {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            match text.matches(" registered node=").count() {
                n if n >= 2 => Ok(()),
                n => Err(format!("{n} registrations in {}", log.display())),
            }
        },
    );
    let node = c.get(&format!("/api/v1/nodes/{b}")).unwrap();
    assert!(
        node["spec"]["taints"].as_array().is_none_or(Vec::is_empty),
        "{}",
        node["spec"]
    );
}

#[test]
fn insufficient_cpu_keeps_a_pod_pending_until_a_node_joins() {
    let mut c = Cluster::start(1);
    let a = c.node_name(0).to_string();
    let node = c.get(&format!("/api/v1/nodes/{a}")).unwrap();
    let cpus = node["status"]["allocatable"]["cpu"]
        .as_str()
        .and_then(|s| s.parse::<u64>().ok())
        .expect("allocatable cpu in whole cores");
    // Two thirds of the node each: the first fits, the second does not.
    let request = format!("{}m", cpus * 1000 * 2 / 3);
    let big = |name: &str| {
        let mut pod = unbound_pod(name, json!({}));
        pod["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": request}});
        pod
    };
    c.apply(&big("big-1"));
    assert_eq!(running_on(&c, "big-1"), a);
    c.apply(&big("big-2"));
    let message = unschedulable(&c, "big-2");
    assert_eq!(
        message,
        "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: \
         1 No preemption victims found for incoming pod.."
    );
    c.wait_for(REACT, "a FailedScheduling event", || {
        if scheduling_events(&c, "big-2").contains(&message) {
            Ok(())
        } else {
            Err(c.event_lines("default", "big-2"))
        }
    });
    c.ensure_for(secs(3), "big-2 stays unbound", || {
        match c.pod("default", "big-2").as_ref().and_then(node_of) {
            None => Ok(()),
            Some(n) => Err(n.to_string()),
        }
    });

    let b = c.add_agent(&AgentOptions::default());
    let b = c.node_name(b).to_string();
    assert_eq!(running_on(&c, "big-2"), b);
}

#[test]
fn a_zone_spread_constraint_beats_a_preference_for_one_zone() {
    let mut config = ClusterConfig::agents(2);
    config.agents[0].labels = format!("{ZONE}=zone-a");
    config.agents[1].labels = format!("{ZONE}=zone-b");
    let c = Cluster::start_with(config);
    let (a, b) = (c.node_name(0).to_string(), c.node_name(1).to_string());
    let prefer_a = json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
        "weight": 100,
        "preference": {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zone-a"]}]},
    }]}});
    let deployment = |name: &str, spread: bool| {
        let mut spec = json!({
            "affinity": prefer_a,
            "containers": [sh_container("main", SLEEP_FOREVER)],
            "terminationGracePeriodSeconds": 2,
        });
        if spread {
            spec["topologySpreadConstraints"] = json!([{
                "maxSkew": 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": name}},
            }]);
        }
        berth_tests::objects::deployment(name, 4, spec)
    };
    let placement = |app: &str| -> BTreeMap<String, usize> {
        c.wait_for(START, &format!("4 running pods of {app}"), || {
            let list = c
                .get(&format!(
                    "/api/v1/namespaces/default/pods?labelSelector=app%3D{app}"
                ))
                .ok_or("no list")?;
            let pods = list["items"].as_array().cloned().unwrap_or_default();
            let running: Vec<&Value> = pods.iter().filter(|p| phase(p) == "Running").collect();
            if running.len() != 4 {
                return Err(format!("{} of {} running", running.len(), pods.len()));
            }
            let mut per_node = BTreeMap::new();
            for p in running {
                *per_node
                    .entry(node_of(p).unwrap_or("?").to_string())
                    .or_insert(0) += 1;
            }
            Ok(per_node)
        })
    };

    // Without the constraint the preference puts every replica into zone-a (the control case:
    // it shows the spread below is the constraint's doing).
    c.apply(&deployment("preferring", false));
    assert_eq!(placement("preferring"), BTreeMap::from([(a.clone(), 4)]));
    c.kubectl().ok(&["delete", "deployment", "preferring"]);

    c.apply(&deployment("spread", true));
    assert_eq!(placement("spread"), BTreeMap::from([(a, 2), (b, 2)]));
}
