//! Table tests of the budget arithmetic (int and percent, upstream's rounding), the disrupted
//! pods' expiry and the DisruptionAllowed condition.

use super::*;
use serde_json::{Value, json};

const T0: i64 = 1_700_000_000;

fn at(s: i64) -> Timestamp {
    Timestamp::from_second(T0 + s).unwrap()
}

fn ts(s: i64) -> String {
    at(s).strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn pdb(spec: Value, status: Value) -> policy::PodDisruptionBudget {
    let mut spec = spec;
    spec["selector"] = json!({"matchLabels": {"app": "zk"}});
    serde_json::from_value(
        json!({"metadata": {"name": "zk-pdb", "namespace": "default",
        "generation": 1}, "spec": spec, "status": status}),
    )
    .unwrap()
}

/// `n` pods named zk-0… of ReplicaSet `rs` (scale looked up in [`scales`]), the first
/// `ready` of them Ready.
fn pods(n: usize, ready: usize) -> Vec<Pod> {
    (0..n)
        .map(|i| Pod {
            name: format!("zk-{i}"),
            ready: i < ready,
            controller: Some(ControllerRef {
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                name: "rs".into(),
                uid: "rs-uid".into(),
            }),
            ..Pod::default()
        })
        .collect()
}

/// The ReplicaSet's pods count toward the Deployment of `replicas`.
fn scales(replicas: i32) -> Scales {
    [(
        "rs-uid".to_string(),
        Some(("dep-uid".to_string(), replicas)),
    )]
    .into_iter()
    .collect()
}

fn refs(p: &[Pod]) -> Vec<&Pod> {
    p.iter().collect()
}

/// The plan for the budget `spec` (with `status`) over `pods` of a scale of `replicas`, `secs`
/// after the epoch.
fn plan_for(spec: Value, status: Value, pods: &[Pod], replicas: i32, secs: i64) -> Plan {
    budget(&pdb(spec, status), &refs(pods), &scales(replicas), at(secs))
}

/// `{field: value}`: the value an integer when it reads as one, else a percentage (as
/// `kubectl create pdb --min-available` takes either).
fn spec_of(field: &str, value: &str) -> Value {
    match value.parse::<i64>() {
        Ok(n) => json!({ field: n }),
        Err(_) => json!({ field: value }),
    }
}

fn status_of(plan: &Plan) -> (i32, i32, i32, i32) {
    let s = plan.status.clone().expect("a status");
    (
        s.expected_pods,
        s.desired_healthy,
        s.current_healthy,
        s.disruptions_allowed,
    )
}

#[test]
fn budgets_resolve_ints_and_percentages_with_upstreams_rounding() {
    // (name, spec, pods, ready, replicas, (expected, desired, current, allowed))
    type Case = (&'static str, Value, usize, usize, i32, (i32, i32, i32, i32));
    let cases: Vec<Case> = vec![
        (
            "minAvailable 2 of 3 ready: one disruption",
            spec_of("minAvailable", "2"),
            3,
            3,
            3,
            (3, 2, 3, 1),
        ),
        (
            "minAvailable 2 of 2 ready: none",
            spec_of("minAvailable", "2"),
            3,
            2,
            3,
            (3, 2, 2, 0),
        ),
        (
            "an integer minAvailable counts the selected pods, not the scale",
            spec_of("minAvailable", "2"),
            2,
            2,
            5,
            (2, 2, 2, 0),
        ),
        (
            "maxUnavailable 1 of 3: desired 2",
            spec_of("maxUnavailable", "1"),
            3,
            3,
            3,
            (3, 2, 3, 1),
        ),
        (
            "maxUnavailable counts the scale, not the pods",
            spec_of("maxUnavailable", "1"),
            3,
            3,
            5,
            (5, 4, 3, 0),
        ),
        (
            "minAvailable 50% of 3 rounds up to 2",
            spec_of("minAvailable", "50%"),
            3,
            3,
            3,
            (3, 2, 3, 1),
        ),
        (
            "maxUnavailable 50% of 3 rounds up to 2 unavailable",
            spec_of("maxUnavailable", "50%"),
            3,
            3,
            3,
            (3, 1, 3, 2),
        ),
        (
            "minAvailable 80% of 5 is 4",
            spec_of("minAvailable", "80%"),
            5,
            5,
            5,
            (5, 4, 5, 1),
        ),
        (
            "maxUnavailable 0: nothing may go",
            spec_of("maxUnavailable", "0"),
            3,
            3,
            3,
            (3, 3, 3, 0),
        ),
        (
            "maxUnavailable beyond the scale: desired never below 0",
            spec_of("maxUnavailable", "10"),
            3,
            3,
            3,
            (3, 0, 3, 3),
        ),
        (
            "no pods yet: nothing expected, nothing allowed",
            spec_of("minAvailable", "0"),
            0,
            0,
            3,
            (0, 0, 0, 0),
        ),
    ];
    for (name, spec, n, ready, replicas, want) in cases {
        let p = pods(n, ready);
        let plan = plan_for(spec, json!({}), &p, replicas, 0);
        assert_eq!(status_of(&plan), want, "{name}");
    }
}

#[test]
fn the_condition_says_whether_a_disruption_is_allowed() {
    let p = pods(3, 3);
    let plan = plan_for(json!({"minAvailable": 2}), json!({}), &p, 3, 0);
    let c = plan.status.unwrap().conditions.unwrap();
    assert_eq!(
        (
            c[0].type_.as_str(),
            c[0].status.as_str(),
            c[0].reason.as_str()
        ),
        ("DisruptionAllowed", "True", "SufficientPods")
    );
    assert_eq!(c[0].observed_generation, Some(1));
    let p = pods(3, 2);
    let plan = plan_for(json!({"minAvailable": 2}), json!({}), &p, 3, 0);
    let c = plan.status.unwrap().conditions.unwrap();
    assert_eq!(
        (c[0].status.as_str(), c[0].reason.as_str()),
        ("False", "InsufficientPods")
    );
}

#[test]
fn an_up_to_date_status_is_not_written_again() {
    let p = pods(3, 3);
    let first = plan_for(json!({"minAvailable": 2}), json!({}), &p, 3, 0);
    let written = serde_json::to_value(first.status.unwrap()).unwrap();
    let again = plan_for(json!({"minAvailable": 2}), written, &p, 3, 60);
    assert_eq!(again.status, None);
}

#[test]
fn granted_evictions_hold_their_pods_out_of_the_count_for_two_minutes() {
    let p = pods(3, 3);
    let status = json!({"disruptedPods": {"zk-0": ts(0), "gone": ts(0)}});
    let early = plan_for(json!({"minAvailable": 2}), status.clone(), &p, 3, 30);
    assert_eq!(status_of(&early), (3, 2, 2, 0), "zk-0 is on its way out");
    assert_eq!(
        early
            .status
            .as_ref()
            .unwrap()
            .disrupted_pods
            .as_ref()
            .map(|m| m.len()),
        Some(1),
        "a pod that is gone leaves the map"
    );
    assert_eq!(early.recheck_after, Some(Duration::from_millis(90_001)));
    let late = plan_for(json!({"minAvailable": 2}), status, &p, 3, 121);
    assert_eq!(status_of(&late), (3, 2, 3, 1), "the grant expired");
    assert_eq!(late.status.unwrap().disrupted_pods, None);
    assert!(late.events.iter().any(|e| e.reason == "NotDeleted"
        && e.pod.as_deref() == Some("zk-0")
        && e.message == "Pod was expected by PDB default/zk-pdb to be deleted but it wasn't"));
}

#[test]
fn pods_being_deleted_or_not_ready_are_not_healthy() {
    let mut p = pods(3, 3);
    p[0].deleting = true;
    p[1].ready = false;
    let plan = plan_for(json!({"minAvailable": 1}), json!({}), &p, 3, 0);
    assert_eq!(status_of(&plan), (3, 1, 1, 0));
}

#[test]
fn a_percentage_over_pods_without_a_scale_fails_safe() {
    let mut p = pods(2, 2);
    p[1].controller = Some(ControllerRef {
        api_version: "apps/v1".into(),
        kind: "DaemonSet".into(),
        name: "ds".into(),
        uid: "ds-uid".into(),
    });
    let plan = plan_for(
        json!({"maxUnavailable": 1}),
        json!({"disruptionsAllowed": 1, "observedGeneration": 1}),
        &p,
        3,
        0,
    );
    let s = plan.status.unwrap();
    assert_eq!(s.disruptions_allowed, 0);
    let c = &s.conditions.unwrap()[0];
    assert_eq!(
        (c.status.as_str(), c.reason.as_str(), c.message.as_str()),
        (
            "False",
            "SyncFailed",
            "found no controllers for pod \"zk-1\""
        )
    );
    assert!(
        plan.events
            .iter()
            .any(|e| e.reason == "CalculateExpectedPodCountFailed")
    );
}

#[test]
fn pods_without_a_controller_are_reported_but_counted_by_an_integer_budget() {
    let mut p = pods(2, 2);
    p[0].controller = None;
    let int = plan_for(json!({"minAvailable": 1}), json!({}), &p, 3, 0);
    assert_eq!(status_of(&int), (2, 1, 2, 1));
    let pct = plan_for(json!({"minAvailable": "50%"}), json!({}), &p, 3, 0);
    assert_eq!(
        status_of(&pct),
        (3, 2, 2, 0),
        "the controller's scale alone"
    );
    assert!(pct.events.iter().any(|e| e.reason == "UnmanagedPods"));
}
