//! Node lifecycle acceptance (issue 10, items 3 and 5), on real agents:
//!
//! - A node whose agent is SIGKILLed (its containers keep running) goes Unknown after the grace
//!   period (`--node-monitor-grace-period 15s` here) with upstream's reasons and the
//!   `unreachable` NoSchedule and NoExecute taints; its pods are marked not Ready; a pod
//!   tolerating `unreachable` for 20 s is evicted 20 s after the taint (DisruptionTarget
//!   `DeletionByTaintManager`, a `TaintManagerEviction` event) and replaced on another node; a
//!   pod with only admission's 300 s toleration is still there a minute after the taint, and so
//!   are the daemon pods. The agent restarted: Ready, taints gone, the evicted pod's container
//!   stopped and its pod gone, the other containers untouched (same ids, same task pids).
//! - `--eviction-hard nodefs.available<…` above the host's free space: DiskPressure and its
//!   NoSchedule taint; a pod meant for that node without a toleration is not scheduled; the
//!   agent restarted with the defaults: both clear and the pod runs there. (The kubelet's
//!   defaults when the host's disk allows them; on a host whose disk is mostly taken they
//!   report pressure themselves, and the harness's thresholds stand in.)

use std::time::Duration;

use berth_tests::objects::{nginx_daemon_set, taint_keys};
use berth_tests::pod_reading::{container_id, container_status, is_ready, restart_count};
use berth_tests::wait::ok_if;
use berth_tests::{AgentOptions, Cluster, ClusterConfig, secs};
use jiff::Timestamp;
use serde_json::{Value, json};

const NS: &str = "default";
const GRACE: &str = "15s";
/// How soon after the kill the node must be Unknown: the grace period, a heartbeat interval
/// that may have just passed, and slack for a loaded machine.
const UNKNOWN_WITHIN: Duration = secs(45);

fn node(c: &Cluster, name: &str) -> Value {
    c.get(&format!("/api/v1/nodes/{name}"))
        .unwrap_or_else(|| panic!("node {name} is gone"))
}

/// `(status, reason, message)` of condition `kind`.
/// Waits (a minute) until Node `name` has no taints and its condition `kind` says `status`.
fn wait_untainted_with(c: &Cluster, name: &str, (kind, status): (&str, &str), what: &str) {
    c.wait_for(secs(60), what, || {
        let n = node(c, name);
        let keys = taint_keys(&n);
        let now = condition(&n, kind);
        ok_if(
            now.0 == status && keys.is_empty(),
            format!("{kind} {now:?}, taints {keys:?}"),
        )
    });
}

fn condition(node: &Value, kind: &str) -> (String, String, String) {
    let c = node["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == kind))
        .cloned()
        .unwrap_or(Value::Null);
    let s = |k: &str| c[k].as_str().unwrap_or("").to_string();
    (s("status"), s("reason"), s("message"))
}

/// `key:effect` of each taint, and the taints themselves.
fn taints(node: &Value) -> Vec<Value> {
    node["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn time(v: &Value) -> Option<Timestamp> {
    v.as_str()?.parse().ok()
}

/// A Deployment of one nginx stand-in preferring `node`, with `tolerations`.
fn deployment(name: &str, node: &str, tolerations: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"terminationGracePeriodSeconds": 5, "tolerations": tolerations,
                    "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 100, "preference": {"matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}}]}},
                    "containers": [{"name": "web", "image": "nginx:1.14.2"}]}}}})
}

fn pods(c: &Cluster, selector: &str) -> Vec<Value> {
    c.get(&format!(
        "/api/v1/namespaces/{NS}/pods?labelSelector={}",
        selector.replace('=', "%3D")
    ))
    .and_then(|l| l["items"].as_array().cloned())
    .unwrap_or_default()
}

/// The one live Ready pod of `app`, and its node.
fn ready_pod(c: &Cluster, app: &str) -> Result<(Value, String), String> {
    let live: Vec<Value> = pods(c, &format!("app={app}"))
        .into_iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .collect();
    match live.as_slice() {
        [p] if is_ready(p) => Ok((
            p.clone(),
            p["spec"]["nodeName"].as_str().unwrap_or("").to_string(),
        )),
        other => Err(format!("{} live pods of {app}, not one Ready", other.len())),
    }
}

fn name(v: &Value) -> String {
    v["metadata"]["name"].as_str().unwrap_or("").to_string()
}

/// The container id of the pod's only container.
fn container(pod: &Value) -> String {
    container_status(pod, "web")
        .and_then(container_id)
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_lost_node_goes_unknown_its_pods_leave_as_their_tolerations_say_and_it_comes_back_untouched() {
    let mut c = Cluster::start_with(ClusterConfig {
        controller_args: vec!["--node-monitor-grace-period".into(), GRACE.into()],
        ..ClusterConfig::agents(3)
    });
    let lost = c.node_name(2).to_string();
    c.apply(&nginx_daemon_set("daemon", NS));
    let unreachable_20s = json!([{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
        "effect": "NoExecute", "tolerationSeconds": 20}]);
    c.apply(&deployment("tolerant", &lost, unreachable_20s));
    c.apply(&deployment("patient", &lost, json!([])));
    let (tolerant, on) = c.wait_for(secs(90), "tolerant Ready", || ready_pod(&c, "tolerant"));
    assert_eq!(on, lost, "the preferred node takes the pod");
    let (patient, on) = c.wait_for(secs(30), "patient Ready", || ready_pod(&c, "patient"));
    assert_eq!(on, lost);
    let admitted = patient["spec"]["tolerations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        admitted
            .iter()
            .any(|t| t["key"] == "node.kubernetes.io/unreachable"
                && t["effect"] == "NoExecute"
                && t["tolerationSeconds"] == 300),
        "admission's default toleration: {admitted:#?}"
    );
    let daemon = c.wait_for(secs(60), "a daemon pod Ready on the lost node", || {
        pods(&c, "app=daemon")
            .into_iter()
            .find(|p| p["spec"]["nodeName"] == lost.as_str() && is_ready(p))
            .ok_or("none yet")
    });
    let kept = [patient.clone(), daemon.clone()];
    let pids_before = c.running_tasks(2);

    c.kill9_agent(2);
    let killed = Timestamp::now();
    let lease = c
        .get(&format!(
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{lost}"
        ))
        .expect("the lost node's Lease");
    let last_heartbeat = time(&lease["spec"]["renewTime"]).expect("renewTime");
    let unknown = c.wait_for(UNKNOWN_WITHIN, "the lost node Unknown and tainted", || {
        let n = node(&c, &lost);
        let keys = taint_keys(&n);
        let tainted = ["NoSchedule", "NoExecute"]
            .iter()
            .all(|e| keys.contains(&format!("node.kubernetes.io/unreachable:{e}")));
        if condition(&n, "Ready").0 == "Unknown" && tainted {
            Ok(n)
        } else {
            Err(format!(
                "Ready {:?}, taints {keys:?}",
                condition(&n, "Ready")
            ))
        }
    });
    let marked = Timestamp::now();
    for kind in ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"] {
        assert_eq!(
            condition(&unknown, kind),
            (
                "Unknown".to_string(),
                "NodeStatusUnknown".to_string(),
                "Kubelet stopped posting node status.".to_string()
            ),
            "{kind}"
        );
    }
    let silent = marked.duration_since(last_heartbeat);
    assert!(
        silent >= jiff::SignedDuration::from_millis(14_500),
        "marked Unknown {silent:?} after the last heartbeat, before the grace period"
    );
    let no_execute = taints(&unknown)
        .into_iter()
        .find(|t| t["key"] == "node.kubernetes.io/unreachable" && t["effect"] == "NoExecute")
        .unwrap_or_default();
    let tainted_at = time(&no_execute["timeAdded"]).expect("the taint's timeAdded");
    assert_eq!(
        condition(&unknown, "Ready").0,
        "Unknown",
        "{}",
        c.kubectl().ok(&["describe", "node", &lost])
    );
    let get = c.kubectl().ok(&["get", "node", &lost]);
    assert!(get.contains("NotReady"), "{get}");

    for p in [&tolerant, &patient, &daemon] {
        c.wait_for(secs(20), &format!("{} not Ready", name(p)), || {
            let now = c.pod(NS, &name(p)).ok_or("gone")?;
            if is_ready(&now) {
                Err("still Ready".to_string())
            } else {
                Ok(())
            }
        });
    }

    // The tolerant pod goes 20 s after the taint, with the condition and the event first.
    let evicted = c.wait_for(secs(45), "the tolerant pod evicted", || {
        let p = c.pod(NS, &name(&tolerant)).ok_or("gone")?;
        if p["metadata"]["deletionTimestamp"].is_null() {
            return Err("not terminating".to_string());
        }
        Ok(p)
    });
    let target = evicted["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "DisruptionTarget"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(target["reason"], "DeletionByTaintManager", "{evicted:#}");
    assert_eq!(
        target["message"],
        "Taint manager: deleting due to NoExecute taint"
    );
    let at = time(&target["lastTransitionTime"]).expect("the condition's time");
    let after = at.duration_since(tainted_at).as_secs();
    assert!(
        (20..=24).contains(&after),
        "evicted {after} s after the taint (tolerationSeconds 20)"
    );
    let events = c.pod_events(NS, &name(&tolerant));
    assert!(
        events.iter().any(|e| e["reason"] == "TaintManagerEviction"
            && e["message"] == format!("Marking for deletion Pod {NS}/{}", name(&tolerant))),
        "{}",
        c.event_lines(NS, &name(&tolerant))
    );
    let (replacement, on) = c.wait_for(secs(60), "the tolerant pod replaced", || {
        ready_pod(&c, "tolerant")
    });
    assert_ne!(on, lost, "{replacement:#}");
    // The benchmark: death to replacement Ready, against its floor.
    let secs_after = |t: Timestamp| t.duration_since(killed).as_secs_f64();
    eprintln!(
        "benchmark: the replacement was Ready {:.1} s after the agent's death; the floor (last \
         heartbeat + grace 15 s + tolerationSeconds 20 s) is {:.1} s after it",
        secs_after(Timestamp::now()),
        secs_after(last_heartbeat + jiff::SignedDuration::from_secs(35))
    );

    // A minute after the taint, admission's 300 s still hold the patient pod and the daemon
    // pods tolerate it for ever.
    let minute = tainted_at + jiff::SignedDuration::from_secs(60);
    let left = Timestamp::now()
        .until(minute)
        .ok()
        .and_then(|s| Duration::try_from(s).ok());
    c.ensure_for(
        left.unwrap_or_default(),
        "the patient and daemon pods stay on the lost node",
        || {
            for p in &kept {
                let now = c.pod(NS, &name(p)).ok_or(format!("{} gone", name(p)))?;
                if !now["metadata"]["deletionTimestamp"].is_null() {
                    return Err(format!("{} evicted", name(p)));
                }
            }
            Ok(())
        },
    );

    c.restart_agent(2);
    wait_untainted_with(
        &c,
        &lost,
        ("Ready", "True"),
        "the node Ready again without its taints",
    );
    c.wait_pod_gone(NS, &name(&tolerant), secs(60));
    let evicted_container = container(&tolerant);
    c.wait_for(secs(30), "the evicted pod's container removed", || {
        let ids = c.containers(2);
        if ids.contains(&evicted_container) {
            Err(ids)
        } else {
            Ok(())
        }
    });
    for p in &kept {
        let now = c.wait_for(secs(30), &format!("{} Ready again", name(p)), || {
            let now = c.pod(NS, &name(p)).ok_or("gone")?;
            if is_ready(&now) {
                Ok(now)
            } else {
                Err("not Ready")
            }
        });
        let (before, after) = (container(p), container(&now));
        assert_eq!(after, before, "{} kept its container", name(p));
        let restarts = |pod: &Value| container_status(pod, "web").map_or(0, restart_count);
        assert_eq!(restarts(&now), restarts(p), "{} not restarted", name(p));
        let pids = c.running_tasks(2);
        assert_eq!(
            pids.get(&before),
            pids_before.get(&before),
            "{}'s task kept its pid",
            name(p)
        );
    }
}

/// Bytes available to unprivileged users on the filesystem of the temp dir (the agents'
/// root dirs are made there), and its size.
fn disk() -> (u64, u64) {
    let s = nix::sys::statvfs::statvfs(&std::env::temp_dir()).expect("statvfs of the temp dir");
    (
        s.blocks_available() * s.fragment_size(),
        s.blocks() * s.fragment_size(),
    )
}

#[test]
fn a_disk_pressure_threshold_above_the_free_space_taints_the_node_until_the_agent_drops_it() {
    // Over a TiB more than there is: no other work on the machine can make room for it.
    let threshold = format!("nodefs.available<{}Ki", disk().0 / 1024 + (1 << 30));
    let mut c = Cluster::start_with(ClusterConfig {
        agents: vec![
            AgentOptions::default(),
            AgentOptions {
                extra_args: vec!["--eviction-hard".into(), threshold.clone()],
                ..AgentOptions::default()
            },
        ],
        ..ClusterConfig::default()
    });
    let pressed = c.node_name(1).to_string();
    let n = c.wait_for(secs(30), "DiskPressure and its taint", || {
        let n = node(&c, &pressed);
        let keys = taint_keys(&n);
        if condition(&n, "DiskPressure").0 == "True"
            && keys.contains(&"node.kubernetes.io/disk-pressure:NoSchedule".to_string())
        {
            Ok(n)
        } else {
            Err(format!(
                "DiskPressure {:?}, taints {keys:?}",
                condition(&n, "DiskPressure")
            ))
        }
    });
    assert_eq!(
        condition(&n, "DiskPressure"),
        (
            "True".to_string(),
            "KubeletHasDiskPressure".to_string(),
            "kubelet has disk pressure".to_string()
        )
    );
    assert_eq!(
        condition(&n, "Ready").0,
        "True",
        "pressure is not unreadiness"
    );
    assert_eq!(condition(&n, "MemoryPressure").0, "False");

    c.apply(&json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "wants-the-disk", "namespace": NS},
        "spec": {"terminationGracePeriodSeconds": 5,
            "nodeSelector": {"kubernetes.io/hostname": pressed},
            "containers": [{"name": "web", "image": "nginx:1.14.2"}]}}));
    let pending = c.wait_for(secs(30), "the pod refused by the taint", || {
        let p = c.pod(NS, "wants-the-disk").ok_or("no pod")?;
        let scheduled = p["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "PodScheduled"))
            .cloned()
            .unwrap_or_default();
        if scheduled["status"] == "False" && scheduled["reason"] == "Unschedulable" {
            Ok(scheduled)
        } else {
            Err(format!("{p:#}"))
        }
    });
    assert!(
        pending["message"]
            .as_str()
            .is_some_and(|m| m.contains("untolerated taint {node.kubernetes.io/disk-pressure: }")),
        "{pending:#}"
    );
    c.ensure_for(secs(3), "the pod stays unbound", || {
        let p = c.pod(NS, "wants-the-disk").ok_or("gone")?;
        ok_if(p["spec"]["nodeName"].is_null(), format!("bound: {p:#}"))
    });

    // The kubelet's defaults (imagefs.available<15% the strictest) if the disk allows them.
    let (free, size) = disk();
    if free as f64 >= 0.2 * size as f64 {
        c.restart_agent_with(1, &[]);
    } else {
        eprintln!(
            "the disk is {:.0}% full: the agent restarts with the harness's thresholds",
            100.0 - 100.0 * free as f64 / size as f64
        );
        c.restart_agent_with(
            1,
            &["--eviction-hard", berth_tests::cluster::TEST_EVICTION_HARD],
        );
    }
    let want = ("DiskPressure", "False");
    wait_untainted_with(&c, &pressed, want, "DiskPressure and its taint cleared");
    let running = c.wait_for_pod_ready(NS, "wants-the-disk", secs(60));
    assert_eq!(running["spec"]["nodeName"], pressed.as_str());
}
