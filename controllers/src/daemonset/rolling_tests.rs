//! Table tests of the rolling update: which old pods go, where new pods start, and the limits.

use super::*;
use crate::daemonset::fixtures::*;
use crate::daemonset::plan::Why;
use serde_json::{Value, json};

fn deleted(c: &Changes) -> Vec<String> {
    c.delete.iter().map(|d| d.pod.name.clone()).collect()
}

fn step(strategy: Value, node_names: &[&str], pods: Vec<Pod>) -> Changes {
    let ds = daemon_set(strategy, json!({}));
    rolling_update(&ds, &nodes(node_names), &placed(pods), NEW, now())
}

/// Old available pods on `n` nodes named n0, n1, …
fn old_everywhere(n: usize) -> (Vec<String>, Vec<Pod>) {
    let names: Vec<String> = (0..n).map(|i| format!("n{i}")).collect();
    let pods = names
        .iter()
        .map(|n| ready(pod(&format!("old-{n}"), n, OLD), 100))
        .collect();
    (names, pods)
}

/// Old pods on n0, n1 and n2, only the last one available.
fn two_old_unavailable() -> Vec<Pod> {
    vec![
        pod("a", "n0", OLD),
        pod("b", "n1", OLD),
        old_ready("c", "n2"),
    ]
}

#[test]
fn the_limits_are_counts_of_nodes_rounded_up() {
    let cases = [
        ("1 of 3", unavailable(json!(1)), 3, (0, 1)),
        ("30% of 10", unavailable(json!("30%")), 10, (0, 3)),
        ("30% of 11 rounds up", unavailable(json!("30%")), 11, (0, 4)),
        ("10% of 3 rounds up", unavailable(json!("10%")), 3, (0, 1)),
        ("surge 1", surge(json!(1)), 3, (1, 0)),
        ("surge 50% of 3", surge(json!("50%")), 3, (2, 0)),
        (
            "both 0 on nodes allows one unavailable",
            unavailable(json!(0)),
            3,
            (0, 1),
        ),
        ("no nodes", unavailable(json!("50%")), 0, (0, 0)),
    ];
    for (name, strategy, desired, want) in cases {
        assert_eq!(
            limits(&daemon_set(strategy, json!({})), desired),
            want,
            "{name}"
        );
    }
    assert!(allows_surge(&daemon_set(surge(json!("1%")), json!({}))));
    assert!(!allows_surge(&daemon_set(unavailable(json!(1)), json!({}))));
    assert!(!allows_surge(&daemon_set(
        json!({"type": "OnDelete"}),
        json!({})
    )));
}

#[test]
fn max_unavailable_one_replaces_one_available_old_pod_at_a_time() {
    let cases: Vec<(&str, Vec<Pod>, Vec<&str>)> = vec![
        (
            "all old and available: the first node's pod goes",
            vec![
                old_ready("a", "n0"),
                old_ready("b", "n1"),
                old_ready("c", "n2"),
            ],
            vec!["a"],
        ),
        (
            "a new pod not available yet uses the budget",
            vec![
                pod("a", "n0", NEW),
                old_ready("b", "n1"),
                old_ready("c", "n2"),
            ],
            vec![],
        ),
        (
            "a node without a pod uses the budget",
            vec![old_ready("b", "n1"), old_ready("c", "n2")],
            vec![],
        ),
        (
            "a deleted old pod leaves its node without one: it uses the budget",
            vec![
                deleting(old_ready("a", "n0")),
                old_ready("b", "n1"),
                old_ready("c", "n2"),
            ],
            vec![],
        ),
        (
            "the available new pod frees the budget for the next node",
            vec![
                new_ready("a", "n0"),
                old_ready("b", "n1"),
                old_ready("c", "n2"),
            ],
            vec!["b"],
        ),
        (
            "old pods that are not available are replaced beyond the budget",
            two_old_unavailable(),
            vec!["a", "b"],
        ),
        (
            "a node with two new pods is the core loop's, counted unavailable",
            vec![
                new_ready("a", "n0"),
                new_ready("a2", "n0"),
                old_ready("b", "n1"),
            ],
            vec![],
        ),
        (
            "all up to date: nothing",
            vec![
                new_ready("a", "n0"),
                new_ready("b", "n1"),
                new_ready("c", "n2"),
            ],
            vec![],
        ),
    ];
    for (name, pods, want) in cases {
        let c = step(unavailable(json!(1)), &["n0", "n1", "n2"], pods);
        assert_eq!(deleted(&c), want, "{name}");
        assert!(c.create.is_empty(), "{name}: the core loop creates");
    }
}

#[test]
fn a_percentage_replaces_that_many_nodes_at_once() {
    let (names, pods) = old_everywhere(10);
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let c = step(unavailable(json!("30%")), &refs, pods);
    assert_eq!(deleted(&c), ["old-n0", "old-n1", "old-n2"]);
    assert!(c.delete.iter().all(|d| d.why == Why::Update));
}

#[test]
fn max_surge_one_starts_one_new_pod_beside_an_old_available_one() {
    type Case = (&'static str, Vec<Pod>, Vec<&'static str>, Vec<&'static str>);
    let cases: Vec<Case> = vec![
        (
            "all old and available: one new pod on the first node",
            vec![
                old_ready("a", "n0"),
                old_ready("b", "n1"),
                old_ready("c", "n2"),
            ],
            vec!["n0"],
            vec![],
        ),
        (
            "a surged node whose new pod is not available holds the budget",
            vec![
                old_ready("a", "n0"),
                pod("a2", "n0", NEW),
                old_ready("b", "n1"),
            ],
            vec![],
            vec![],
        ),
        (
            "the new pod is available: the old one goes, the next node surges",
            vec![
                old_ready("a", "n0"),
                new_ready("a2", "n0"),
                old_ready("b", "n1"),
                old_ready("c", "n2"),
            ],
            vec!["n1"],
            vec!["a"],
        ),
        (
            "an old pod that is not available gets its new pod at once",
            two_old_unavailable(),
            vec!["n0", "n1", "n2"],
            vec![],
        ),
    ];
    for (name, pods, creates, deletes) in cases {
        let c = step(surge(json!(1)), &["n0", "n1", "n2"], pods);
        assert_eq!(c.create, creates, "{name}");
        assert_eq!(deleted(&c), deletes, "{name}");
    }
}

#[test]
fn with_surge_a_pod_on_a_node_that_left_the_set_goes_only_when_another_is_available() {
    let ds = daemon_set(surge(json!(1)), json!({"nodeSelector": {"run": "yes"}}));
    let nodes = vec![
        node_with("in", &[("run", "yes")], &[]),
        node_with("out", &[], &[]),
    ];
    let waiting = placed(vec![pod("new-in", "in", NEW), old_ready("old-out", "out")]);
    let c = rolling_update(&ds, &nodes, &waiting, NEW, now());
    assert!(deleted(&c).is_empty(), "one available of one desired");
    let ready_in = placed(vec![new_ready("new-in", "in"), old_ready("old-out", "out")]);
    let c = rolling_update(&ds, &nodes, &ready_in, NEW, now());
    assert_eq!(deleted(&c), ["old-out"]);
}
