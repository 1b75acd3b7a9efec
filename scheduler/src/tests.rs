//! The scheduler's loop against a real in-process store and registry: bindings, the
//! unschedulable condition and events, and retrying when a node arrives.

use super::*;
use berth_registry::{Registry, WriteOptions};
use berth_runtime::testing::ControlPlane;
use berth_shared::resource::{EVENTS, ResourceType, by_plural};
use serde_json::{Value, json};

struct Cluster {
    cp: ControlPlane,
    registry: Registry,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.cp.stop.cancel();
    }
}

fn rt(plural: &str) -> &'static ResourceType {
    by_plural("", "v1", plural).unwrap()
}

fn start_cluster() -> Cluster {
    let cp = ControlPlane::start();
    start(&cp.ctx, cp.stop.clone());
    Cluster {
        registry: cp.registry().clone(),
        cp,
    }
}

impl Cluster {
    fn node(&self, name: &str, cpu: &str) {
        let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": cpu, "memory": "4Gi", "pods": "10"},
                "conditions": [{"type": "Ready", "status": "True"}]}});
        self.registry
            .create(rt("nodes"), None, node, &WriteOptions::default())
            .unwrap();
    }

    fn pod(&self, name: &str, cpu: &str) {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "nginx",
                "resources": {"requests": {"cpu": cpu}}}]}});
        self.registry
            .create(rt("pods"), Some("default"), pod, &WriteOptions::default())
            .unwrap();
    }

    fn get_pod(&self, name: &str) -> Value {
        self.registry
            .get(rt("pods"), Some("default"), name)
            .unwrap()
            .value()
            .unwrap()
    }

    /// The node the pod is bound to, once it is.
    fn node_of(&self, pod: &str) -> Option<String> {
        self.get_pod(pod)["spec"]["nodeName"]
            .as_str()
            .map(String::from)
    }

    fn events(&self) -> Vec<Value> {
        self.cp.list(EVENTS)
    }

    /// Waits until `f` finds something, looking again after every store change.
    async fn until<T>(&self, what: &str, f: impl Fn(&Cluster) -> Option<T>) -> T {
        let found = std::sync::Mutex::new(None);
        self.cp
            .wait_until(
                what,
                || {
                    let v = f(self);
                    let done = v.is_some();
                    *found.lock().unwrap() = v;
                    done
                },
                || format!("events: {:#?}", self.events()),
            )
            .await;
        found.into_inner().unwrap().unwrap()
    }
}

fn event_with(c: &Cluster, reason: &str) -> Option<Value> {
    c.events().into_iter().find(|e| e["reason"] == reason)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_pod_is_bound_and_a_scheduled_event_recorded() {
    let c = start_cluster();
    c.node("node-1", "2");
    c.pod("nginx-abc", "500m");
    let node = c.until("the binding", |c| c.node_of("nginx-abc")).await;
    assert_eq!(node, "node-1");
    let ev = c
        .until("the Scheduled event", |c| event_with(c, "Scheduled"))
        .await;
    assert_eq!(
        ev["message"],
        "Successfully assigned default/nginx-abc to node-1"
    );
    assert_eq!(ev["type"], "Normal");
    assert_eq!(ev["source"]["component"], "default-scheduler");
    let scheduled = c.get_pod("nginx-abc")["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["type"] == "PodScheduled" && c["status"] == "True");
    assert!(scheduled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_too_big_for_every_node_waits_with_the_reason_and_goes_when_a_node_arrives() {
    let c = start_cluster();
    c.node("small", "1");
    c.pod("big", "2");
    // The scheduler may meet the pod before the node (they come on separate watches) and
    // first say "0/0 nodes"; what matters is the verdict once it knows the node.
    let message = c
        .until("the unschedulable condition naming the node", |c| {
            let pod = c.get_pod("big");
            let cond = pod["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "PodScheduled")?
                .clone();
            let message = cond["message"].as_str().unwrap_or_default();
            (cond["status"] == "False"
                && cond["reason"] == "Unschedulable"
                && message.starts_with("0/1 "))
            .then(|| message.to_string())
        })
        .await;
    assert_eq!(
        message,
        "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 \
         No preemption victims found for incoming pod.."
    );
    let ev = c
        .until("the FailedScheduling event naming the node", |c| {
            c.events().into_iter().find(|e| {
                e["reason"] == "FailedScheduling"
                    && e["message"].as_str().is_some_and(|m| m.starts_with("0/1 "))
            })
        })
        .await;
    assert_eq!(
        (&ev["type"], &ev["message"]),
        (&json!("Warning"), &json!(message))
    );
    c.node("large", "4");
    let node = c
        .until("the binding after a node arrived", |c| c.node_of("big"))
        .await;
    assert_eq!(node, "large");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_fill_nodes_without_overcommitting_them() {
    let c = start_cluster();
    c.node("a", "1");
    c.node("b", "1");
    for i in 0..5 {
        c.pod(&format!("p{i}"), "400m");
    }
    // Two fit on each node; the fifth waits.
    let placed = c
        .until("four bindings", |c| {
            let nodes: Vec<String> = (0..5).filter_map(|i| c.node_of(&format!("p{i}"))).collect();
            (nodes.len() == 4).then_some(nodes)
        })
        .await;
    assert_eq!(placed.iter().filter(|n| *n == "a").count(), 2);
    // The fifth was decided too: it fits nowhere and says so.
    c.until("the fifth pod marked unschedulable", |c| {
        (0..5).find(|i| {
            c.get_pod(&format!("p{i}"))["status"]["conditions"]
                .as_array()
                .is_some_and(|cs| cs.iter().any(|x| x["reason"] == "Unschedulable"))
        })
    })
    .await;
    let bound = (0..5)
        .filter(|i| c.get_pod(&format!("p{i}"))["spec"]["nodeName"].is_string())
        .count();
    assert_eq!(bound, 4);
}
