//! Table tests of [`manage`]: which nodes get a pod and which pods go, node by node.

use super::*;
use crate::daemonset::fixtures::*;
use TaintEffect::{NoExecute, NoSchedule};
use berth_shared::scheduling::TaintEffect;
use serde_json::json;

fn names(c: &Changes) -> Vec<(String, Why)> {
    c.delete
        .iter()
        .map(|d| (d.pod.name.clone(), d.why.clone()))
        .collect()
}

fn plan(ds: &DaemonSet, nodes: &[Arc<Node>], pods: &BTreeMap<String, Vec<Arc<Pod>>>) -> Changes {
    manage(ds, nodes, pods, NEW, &FailedBackoff::default(), now())
}

fn rolling() -> DaemonSet {
    daemon_set(unavailable(json!(1)), json!({}))
}

#[test]
fn every_eligible_node_without_a_pod_gets_one() {
    let ds = daemon_set(
        unavailable(json!(1)),
        json!({"nodeSelector": {"disk": "ssd"}}),
    );
    let nodes = vec![
        node_with("a", &[("disk", "ssd")], &[]),
        node_with("b", &[("disk", "ssd")], &[]),
        node_with("c", &[("disk", "hdd")], &[]),
        node_with("d", &[("disk", "ssd")], &[]),
    ];
    let pods = placed(vec![pod("pa", "a", NEW)]);
    let c = plan(&ds, &nodes, &pods);
    assert_eq!(c.create, ["b", "d"]);
    assert!(c.delete.is_empty());
}

#[test]
fn taints_and_labels_decide_which_pods_go() {
    let ds = rolling();
    let cases = [
        (
            "an untolerated NoSchedule taint keeps the pod there",
            node_with("n", &[], &[("dedicated", NoSchedule)]),
            vec![],
        ),
        (
            "an untolerated NoExecute taint takes it away",
            node_with("n", &[], &[("dedicated", NoExecute)]),
            vec![("p".to_string(), Why::NotEligible)],
        ),
        (
            "a cordoned node keeps it (the unschedulable taint is tolerated)",
            node_with(
                "n",
                &[],
                &[("node.kubernetes.io/unschedulable", NoSchedule)],
            ),
            vec![],
        ),
    ];
    for (name, n, want) in cases {
        let c = plan(&ds, &[n], &placed(vec![pod("p", "n", NEW)]));
        assert_eq!(names(&c), want, "{name}");
        assert!(c.create.is_empty(), "{name}");
    }
    let picky = daemon_set(
        unavailable(json!(1)),
        json!({"nodeSelector": {"disk": "ssd"}}),
    );
    let c = plan(
        &picky,
        &[node_with("n", &[("disk", "hdd")], &[])],
        &placed(vec![pod("p", "n", NEW), deleting(pod("q", "n", NEW))]),
    );
    assert_eq!(
        names(&c),
        [("p".to_string(), Why::NotEligible)],
        "relabelled: its pod goes, the one going already is left alone"
    );
}

#[test]
fn an_untolerated_no_schedule_taint_gets_no_new_pod() {
    let c = plan(
        &rolling(),
        &[node_with(
            "cp",
            &[],
            &[("node-role.kubernetes.io/control-plane", NoSchedule)],
        )],
        &BTreeMap::new(),
    );
    assert!(c.is_empty());
    let tolerant = daemon_set(
        unavailable(json!(1)),
        json!({"tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}]}),
    );
    let c = plan(
        &tolerant,
        &[node_with(
            "cp",
            &[],
            &[("node-role.kubernetes.io/control-plane", NoSchedule)],
        )],
        &BTreeMap::new(),
    );
    assert_eq!(c.create, ["cp"]);
}

#[test]
fn a_pod_on_its_way_out_holds_the_node_until_it_is_gone() {
    let c = plan(
        &rolling(),
        &nodes(&["n"]),
        &placed(vec![deleting(old_ready("p", "n"))]),
    );
    assert!(c.is_empty(), "{c:?}");
    // A finished pod being deleted no longer counts: the node gets its pod.
    let c = plan(
        &rolling(),
        &nodes(&["n"]),
        &placed(vec![deleting(phase(pod("p", "n", OLD), "Failed"))]),
    );
    assert_eq!(c.create, ["n"]);
}

#[test]
fn failed_pods_are_deleted_with_back_off_and_succeeded_ones_at_once() {
    let ds = rolling();
    let pods = placed(vec![
        phase(pod("failed", "a", NEW), "Failed"),
        phase(pod("done", "b", NEW), "Succeeded"),
    ]);
    let c = plan(&ds, &nodes(&["a", "b"]), &pods);
    let key = backoff::key("ds-uid", 2, "a");
    assert_eq!(
        names(&c),
        [
            (
                "failed".to_string(),
                Why::Failed {
                    node: "a".into(),
                    key: key.clone()
                }
            ),
            ("done".to_string(), Why::Succeeded { node: "b".into() }),
        ]
    );
    assert_eq!(c.requeue_after, None);
    let mut failed = FailedBackoff::default();
    failed.step(&key, ago(1) + jiff::SignedDuration::from_millis(400));
    let only_failed = placed(vec![phase(pod("failed", "a", NEW), "Failed")]);
    let c = manage(&ds, &nodes(&["a"]), &only_failed, NEW, &failed, now());
    assert!(c.delete.is_empty(), "in back-off");
    assert_eq!(c.requeue_after, Some(Duration::from_millis(400)));
    // Two failed pods on one node: the second waits for the back-off the first started.
    let two = placed(vec![
        phase(pod("f1", "a", NEW), "Failed"),
        phase(pod("f2", "a", NEW), "Failed"),
    ]);
    let c = plan(&ds, &nodes(&["a"]), &two);
    assert_eq!(c.delete.len(), 1);
    assert_eq!(c.requeue_after, Some(backoff::INITIAL));
}

#[test]
fn without_surge_only_the_oldest_running_pod_stays() {
    let pods = placed_with(
        vec![
            created(pod("young", "n", NEW), 10),
            created(pod("old", "n", NEW), 100),
        ],
        vec![unbound(created(pod("older-unbound", "n", NEW), 500))],
    );
    let c = plan(&rolling(), &nodes(&["n"]), &pods);
    assert_eq!(
        names(&c),
        [
            ("young".to_string(), Why::Excess),
            ("older-unbound".to_string(), Why::Excess)
        ],
        "bound pods first, then the oldest"
    );
}

#[test]
fn with_surge_an_old_and_a_new_pod_share_a_node_until_the_new_one_is_available() {
    let mut ds = daemon_set(surge(json!(1)), json!({}));
    ds.min_ready_seconds = 10;
    let cases = [
        (
            "the new pod is not available yet: both stay",
            vec![old_ready("o", "n"), ready(pod("x", "n", NEW), 5)],
            vec![],
        ),
        (
            "the new pod is available: the old one goes",
            vec![old_ready("o", "n"), ready(pod("x", "n", NEW), 50)],
            vec![("o".to_string(), Why::Update)],
        ),
        (
            "the old pod is not ready: it goes at once",
            vec![pod("o", "n", OLD), pod("x", "n", NEW)],
            vec![("o".to_string(), Why::Update)],
        ),
        (
            "a second new pod is excess",
            vec![
                created(pod("x", "n", NEW), 100),
                created(pod("y", "n", NEW), 10),
                old_ready("o", "n"),
            ],
            vec![("y".to_string(), Why::Excess)],
        ),
    ];
    for (name, pods, want) in cases {
        let c = plan(&ds, &nodes(&["n"]), &placed(pods));
        assert_eq!(names(&c), want, "{name}");
    }
    let c = plan(
        &ds,
        &nodes(&["n"]),
        &placed(vec![phase(pod("f", "n", NEW), "Succeeded")]),
    );
    assert_eq!(
        c.create,
        ["n"],
        "surging: a node left without a running pod gets one"
    );
}

#[test]
fn unbound_pods_meant_for_nodes_that_are_gone_are_deleted_and_bound_ones_left_to_pod_gc() {
    let pods = placed_with(
        vec![pod("bound", "gone", NEW), pod("kept", "here", NEW)],
        vec![unbound(pod("unbound", "gone", NEW))],
    );
    let c = plan(&rolling(), &nodes(&["here"]), &pods);
    let got: Vec<&str> = c.delete.iter().map(|d| d.pod.name.as_str()).collect();
    assert_eq!(
        got,
        ["unbound"],
        "the scheduler never binds the unbound one; the pod garbage collector removes the bound one"
    );
}

#[test]
fn one_pass_does_at_most_the_burst() {
    let names: Vec<String> = (0..300).map(|i| format!("n{i:03}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let c = plan(&rolling(), &nodes(&refs), &BTreeMap::new()).capped();
    assert_eq!(c.create.len(), BURST_REPLICAS);
}
