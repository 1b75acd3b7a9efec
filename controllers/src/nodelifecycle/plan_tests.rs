//! Table tests of one node's pass: condition transitions of a silent node, taints by condition,
//! readiness taints by zone verdict, pods marked not Ready.

use super::*;
use serde_json::{Value, json};

const T0: i64 = 1_700_000_000;

fn at(s: i64) -> Timestamp {
    Timestamp::from_second(T0 + s).unwrap()
}

fn ts(s: i64) -> String {
    at(s).strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn node(v: Value) -> core::Node {
    let mut base = json!({"metadata": {"name": "n1", "creationTimestamp": ts(-100)}});
    json_patch::merge(&mut base, &v);
    serde_json::from_value(base).unwrap()
}

fn conditions(pairs: &[(&str, &str)]) -> Value {
    json!({"status": {"conditions": pairs.iter().map(|(t, s)| json!({
        "type": t, "status": s, "reason": "KubeletSays", "message": "m",
        "lastHeartbeatTime": ts(0), "lastTransitionTime": ts(-50)})).collect::<Vec<_>>()}})
}

fn healthy() -> Vec<(&'static str, &'static str)> {
    vec![
        ("MemoryPressure", "False"),
        ("DiskPressure", "False"),
        ("PIDPressure", "False"),
        ("Ready", "True"),
    ]
}

fn probed(s: i64) -> Health {
    Health {
        probe: at(s),
        lease_renewed: None,
        status_heartbeat: None,
        ready: true,
    }
}

fn statuses(plan: &NodePlan) -> Vec<(String, String, String)> {
    plan.conditions
        .iter()
        .flatten()
        .map(|c| {
            (
                c.type_.clone(),
                c.status.clone(),
                c.reason.clone().unwrap_or_default(),
            )
        })
        .collect()
}

fn taint_keys(plan: &NodePlan) -> Option<Vec<String>> {
    plan.taints.as_ref().map(|ts| {
        ts.iter()
            .map(|t| format!("{}:{}", t.key, t.effect))
            .collect()
    })
}

/// A node tainted unreachable (NoSchedule and NoExecute) whose Ready condition is `ready`.
fn unreachable_and(ready: &str) -> Value {
    json!({"spec": {"taints": [
        {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]},
        "status": conditions(&[("Ready", ready)])["status"]})
}

#[test]
fn a_silent_node_goes_unknown_only_after_its_grace_period() {
    let grace = Grace::default();
    let n = node(conditions(&healthy()));
    let cases: Vec<(&str, Health, i64, bool, Option<Duration>)> = vec![
        (
            "a fresh heartbeat: look again when the grace period ends",
            probed(0),
            10,
            false,
            Some(Duration::from_millis(30_001)),
        ),
        (
            "exactly the grace period is not past it",
            probed(0),
            40,
            false,
            Some(Duration::from_millis(1)),
        ),
        ("past the grace period: Unknown", probed(0), 41, true, None),
    ];
    for (name, health, now, unknown, requeue) in cases {
        let plan = super::node(&n, &health, &grace, Tainting::Allowed, at(now));
        assert_eq!(plan.conditions.is_some(), unknown, "{name}");
        assert_eq!(plan.requeue_after, requeue, "{name}");
    }
}

#[test]
fn silence_sets_the_monitored_conditions_unknown_with_upstreams_words() {
    let n = node(conditions(&[
        ("Ready", "True"),
        ("DiskPressure", "True"),
        ("NetworkUnavailable", "False"),
    ]));
    let plan = super::node(&n, &probed(0), &Grace::default(), Tainting::Allowed, at(41));
    assert_eq!(
        statuses(&plan),
        [
            ("Ready", "Unknown", "NodeStatusUnknown"),
            ("DiskPressure", "Unknown", "NodeStatusUnknown"),
            ("NetworkUnavailable", "False", "KubeletSays"),
            ("MemoryPressure", "Unknown", "NodeStatusNeverUpdated"),
            ("PIDPressure", "Unknown", "NodeStatusNeverUpdated"),
        ]
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
    );
    let c = plan.conditions.unwrap();
    assert_eq!(
        c[0].message.as_deref(),
        Some("Kubelet stopped posting node status.")
    );
    assert_eq!(c[0].last_heartbeat_time.as_ref().map(|t| t.0), Some(at(0)));
    assert_eq!(
        c[0].last_transition_time.as_ref().map(|t| t.0),
        Some(at(41))
    );
    assert_eq!(
        c[3].message.as_deref(),
        Some("Kubelet never posted node status.")
    );
    assert_eq!(
        c[3].last_heartbeat_time.as_ref().map(|t| t.0),
        Some(at(-100)),
        "a never-posted condition's heartbeat is the node's creation"
    );
    assert!(plan.became_not_ready);
    assert!(plan.taints.is_none(), "the status is the whole pass");
}

#[test]
fn a_node_that_never_posted_status_gets_the_startup_grace_period() {
    let n = node(json!({}));
    let early = super::node(&n, &probed(0), &Grace::default(), Tainting::Allowed, at(50));
    assert!(early.conditions.is_none(), "40 s < 50 s < 60 s");
    let late = super::node(&n, &probed(0), &Grace::default(), Tainting::Allowed, at(61));
    assert_eq!(
        statuses(&late)
            .iter()
            .map(|(_, _, r)| r.as_str())
            .collect::<Vec<_>>(),
        ["NodeStatusNeverUpdated"; 4]
    );
    assert!(!late.became_not_ready);
}

#[test]
fn an_unknown_node_stays_so_without_another_write() {
    let n = node(conditions(&[
        ("Ready", "Unknown"),
        ("MemoryPressure", "Unknown"),
        ("DiskPressure", "Unknown"),
        ("PIDPressure", "Unknown"),
    ]));
    let plan = super::node(
        &n,
        &probed(0),
        &Grace::default(),
        Tainting::Allowed,
        at(500),
    );
    assert!(plan.conditions.is_none());
    assert_eq!(
        plan.requeue_after, None,
        "only a heartbeat can change it now"
    );
    assert!(plan.pods_not_ready);
}

#[test]
fn taints_follow_conditions_and_go_when_they_clear() {
    let cases: Vec<(&str, Value, Tainting, Option<Vec<&str>>)> = vec![
        (
            "a healthy node has none",
            conditions(&healthy()),
            Tainting::Allowed,
            None,
        ),
        (
            "Ready False: not-ready NoSchedule and NoExecute",
            conditions(&[("Ready", "False")]),
            Tainting::Allowed,
            Some(vec![
                "node.kubernetes.io/not-ready:NoSchedule",
                "node.kubernetes.io/not-ready:NoExecute",
            ]),
        ),
        (
            "Ready Unknown: unreachable NoSchedule and NoExecute",
            conditions(&[("Ready", "Unknown")]),
            Tainting::Allowed,
            Some(vec![
                "node.kubernetes.io/unreachable:NoSchedule",
                "node.kubernetes.io/unreachable:NoExecute",
            ]),
        ),
        (
            "pressure conditions: their NoSchedule taints",
            conditions(&[
                ("Ready", "True"),
                ("MemoryPressure", "True"),
                ("DiskPressure", "True"),
                ("PIDPressure", "True"),
            ]),
            Tainting::Allowed,
            Some(vec![
                "node.kubernetes.io/memory-pressure:NoSchedule",
                "node.kubernetes.io/disk-pressure:NoSchedule",
                "node.kubernetes.io/pid-pressure:NoSchedule",
            ]),
        ),
        (
            "a cordoned node: unschedulable NoSchedule",
            json!({"spec": {"unschedulable": true}, "status": conditions(&healthy())["status"]}),
            Tainting::Allowed,
            Some(vec!["node.kubernetes.io/unschedulable:NoSchedule"]),
        ),
        (
            "cleared conditions take their taints, others stay",
            json!({"spec": {"taints": [
                {"key": "dedicated", "value": "db", "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/disk-pressure", "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
                {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]},
                "status": conditions(&healthy())["status"]}),
            Tainting::Allowed,
            Some(vec!["dedicated:NoSchedule"]),
        ),
        (
            "unreachable turns to not-ready when the agent reports not ready",
            unreachable_and("False"),
            Tainting::Held,
            Some(vec![
                "node.kubernetes.io/not-ready:NoSchedule",
                "node.kubernetes.io/not-ready:NoExecute",
            ]),
        ),
        (
            "a held zone adds no NoExecute taint",
            conditions(&[("Ready", "Unknown")]),
            Tainting::Held,
            Some(vec!["node.kubernetes.io/unreachable:NoSchedule"]),
        ),
        (
            "a suspended zone takes NoExecute taints off",
            unreachable_and("Unknown"),
            Tainting::Suspended,
            Some(vec!["node.kubernetes.io/unreachable:NoSchedule"]),
        ),
        (
            "a node without a Ready condition gets no readiness taint",
            json!({}),
            Tainting::Allowed,
            None,
        ),
    ];
    for (name, n, tainting, want) in cases {
        let plan = super::node(&node(n), &probed(0), &Grace::default(), tainting, at(1));
        let want = want.map(|w| w.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(taint_keys(&plan), want, "{name}");
    }
}

#[test]
fn new_taints_carry_their_time_and_kept_ones_keep_theirs() {
    let n = node(json!({"spec": {"taints": [
        {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule", "timeAdded": ts(-5)}]},
        "status": conditions(&[("Ready", "Unknown")])["status"]}));
    let plan = super::node(&n, &probed(0), &Grace::default(), Tainting::Allowed, at(1));
    let t = plan.taints.unwrap();
    assert_eq!(t[0].time_added.as_ref().map(|t| t.0), Some(at(-5)));
    assert_eq!(t[1].effect, "NoExecute");
    assert_eq!(t[1].time_added.as_ref().map(|t| t.0), Some(at(1)));
    assert!(plan.adds_no_execute);
}

#[test]
fn pods_are_marked_not_ready_while_ready_is_not_true() {
    let cases = [
        ("Ready True", "True", false),
        ("Ready False", "False", true),
        ("Ready Unknown", "Unknown", true),
    ];
    for (name, ready, want) in cases {
        let n = node(conditions(&[("Ready", ready)]));
        let plan = super::node(&n, &probed(0), &Grace::default(), Tainting::Allowed, at(1));
        assert_eq!(plan.pods_not_ready, want, "{name}");
    }
}
