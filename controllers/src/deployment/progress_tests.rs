//! Condition transitions: each Progressing reason, the deadline, pause and resume.

use super::super::fixtures::*;
use super::*;
use berth_shared::k8s_openapi::api::apps::v1::ReplicaSetCondition;

fn status(replicas: i32, updated: i32, ready: i32, available: i32) -> DeploymentStatus {
    DeploymentStatus {
        observed_generation: Some(1),
        replicas: Some(replicas),
        updated_replicas: Some(updated),
        ready_replicas: Some(ready),
        available_replicas: Some(available),
        ..Default::default()
    }
}

fn with_progressing(mut s: DeploymentStatus, st: &str, reason: &str, at: i64) -> DeploymentStatus {
    let mut c = new_condition(PROGRESSING, st, reason, "before".into(), t(at));
    c.last_transition_time = Some(stamp(t(at - 100)));
    s.conditions = Some(vec![c]);
    s
}

fn deployment_with(s: DeploymentStatus) -> Deployment {
    let mut d = deployment(3, "25%", "25%");
    d.status = Some(s);
    d
}

fn new_rs() -> ReplicaSet {
    rs("web-abc", 2, 3)
}

#[test]
fn progressing_reasons_follow_the_rollout() {
    struct Case {
        name: &'static str,
        before: DeploymentStatus,
        now_status: DeploymentStatus,
        now: i64,
        want: (&'static str, &'static str, &'static str),
    }
    let cases = vec![
        Case {
            name: "more updated replicas is progress",
            before: with_progressing(status(3, 1, 3, 3), "True", NEW_RS_CREATED, 0),
            now_status: status(4, 2, 3, 3),
            now: 30,
            want: ("True", RS_UPDATED, "ReplicaSet \"web-abc\" is progressing."),
        },
        Case {
            name: "fewer old replicas is progress",
            before: with_progressing(status(4, 1, 4, 4), "True", RS_UPDATED, 0),
            now_status: status(3, 1, 3, 3),
            now: 30,
            want: ("True", RS_UPDATED, "ReplicaSet \"web-abc\" is progressing."),
        },
        Case {
            name: "more available replicas is progress",
            before: with_progressing(status(4, 1, 3, 3), "True", RS_UPDATED, 0),
            now_status: status(4, 1, 4, 4),
            now: 30,
            want: ("True", RS_UPDATED, "ReplicaSet \"web-abc\" is progressing."),
        },
        Case {
            name: "everything updated and available completes the rollout",
            before: with_progressing(status(4, 3, 3, 3), "True", RS_UPDATED, 0),
            now_status: status(3, 3, 3, 3),
            now: 30,
            want: (
                "True",
                NEW_RS_AVAILABLE,
                "ReplicaSet \"web-abc\" has successfully progressed.",
            ),
        },
        Case {
            name: "no progress within the deadline keeps the condition",
            before: with_progressing(status(4, 1, 3, 3), "True", RS_UPDATED, 0),
            now_status: status(4, 1, 3, 3),
            now: 600,
            want: ("True", RS_UPDATED, "before"),
        },
        Case {
            name: "no progress past the deadline times out",
            before: with_progressing(status(4, 1, 3, 3), "True", RS_UPDATED, 0),
            now_status: status(4, 1, 3, 3),
            now: 601,
            want: (
                "False",
                TIMED_OUT,
                "ReplicaSet \"web-abc\" has timed out progressing.",
            ),
        },
        Case {
            name: "a complete rollout stays complete when availability drops",
            before: with_progressing(status(3, 3, 3, 3), "True", NEW_RS_AVAILABLE, 0),
            now_status: status(3, 3, 2, 2),
            now: 9999,
            want: ("True", NEW_RS_AVAILABLE, "before"),
        },
        Case {
            name: "a timed-out rollout that progresses again is progressing",
            before: with_progressing(status(4, 1, 3, 3), "False", TIMED_OUT, 0),
            now_status: status(4, 1, 4, 4),
            now: 700,
            want: ("True", RS_UPDATED, "ReplicaSet \"web-abc\" is progressing."),
        },
    ];
    for c in cases {
        let d = deployment_with(c.before.clone());
        let mut calculated = c.now_status.clone();
        calculated.conditions = c.before.conditions.clone();
        let rs = new_rs();
        let s = rollout_status(&d, calculated, Some(&rs), &[&rs], t(c.now));
        let got = condition(&s, PROGRESSING).unwrap();
        assert_eq!(
            (
                got.status.as_str(),
                got.reason.as_deref().unwrap(),
                got.message.as_deref().unwrap()
            ),
            c.want,
            "{}",
            c.name
        );
    }
}

#[test]
fn progress_bumps_the_update_time_and_keeps_the_transition_time() {
    let before = with_progressing(status(3, 1, 3, 3), "True", RS_UPDATED, 0);
    let d = deployment_with(before.clone());
    let mut calculated = status(4, 2, 3, 3);
    calculated.conditions = before.conditions.clone();
    let rs = new_rs();
    let s = rollout_status(&d, calculated, Some(&rs), &[&rs], t(30));
    let c = condition(&s, PROGRESSING).unwrap();
    assert_eq!(c.last_update_time, Some(stamp(t(30))));
    assert_eq!(c.last_transition_time, Some(stamp(t(-100))));
}

#[test]
fn timing_out_is_a_transition() {
    let before = with_progressing(status(4, 1, 3, 3), "True", RS_UPDATED, 0);
    let d = deployment_with(before.clone());
    let mut calculated = status(4, 1, 3, 3);
    calculated.conditions = before.conditions;
    let rs = new_rs();
    let s = rollout_status(&d, calculated, Some(&rs), &[&rs], t(700));
    let c = condition(&s, PROGRESSING).unwrap();
    assert_eq!(c.last_transition_time, Some(stamp(t(700))));
}

#[test]
fn without_a_deadline_there_is_no_progressing_condition() {
    let before = with_progressing(status(3, 1, 3, 3), "True", RS_UPDATED, 0);
    let mut d = deployment_with(before.clone());
    if let Some(s) = d.spec.as_mut() {
        s.progress_deadline_seconds = Some(i32::MAX);
    }
    let mut calculated = status(4, 2, 3, 3);
    calculated.conditions = before.conditions;
    let rs = new_rs();
    let s = rollout_status(&d, calculated, Some(&rs), &[&rs], t(30));
    assert!(condition(&s, PROGRESSING).is_none());
}

#[test]
fn replica_failures_are_copied_from_the_new_replica_set() {
    let d = deployment_with(status(2, 2, 2, 2));
    let mut rs = new_rs().with_status(2, 2, 2);
    if let Some(s) = rs.status.as_mut() {
        s.conditions = Some(vec![ReplicaSetCondition {
            type_: REPLICA_FAILURE.into(),
            status: "True".into(),
            reason: Some("FailedCreate".into()),
            message: Some("pods \"web-abc-\" is forbidden: exceeded quota".into()),
            last_transition_time: Some(stamp(t(5))),
        }]);
    }
    let s = rollout_status(&d, status(2, 2, 2, 2), Some(&rs), &[&rs], t(30));
    let c = condition(&s, REPLICA_FAILURE).unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_deref()),
        ("True", Some("FailedCreate"))
    );
    assert_eq!(c.last_update_time, Some(stamp(t(5))));
    let healthy = new_rs().with_status(2, 2, 2);
    let mut with_failure = status(2, 2, 2, 2);
    with_failure.conditions = Some(vec![c.clone()]);
    let s = rollout_status(&d, with_failure, Some(&healthy), &[&healthy], t(40));
    assert!(condition(&s, REPLICA_FAILURE).is_none());
}

#[test]
fn pausing_and_resuming_set_unknown_progress() {
    let mut d = deployment(3, "25%", "25%");
    d.status = Some(with_progressing(
        status(3, 3, 3, 3),
        "True",
        NEW_RS_AVAILABLE,
        0,
    ));
    if let Some(s) = d.spec.as_mut() {
        s.paused = Some(true);
    }
    assert!(check_paused(&mut d, t(10)));
    let c = condition(d.status.as_ref().unwrap(), PROGRESSING)
        .unwrap()
        .clone();
    assert_eq!(
        (c.status.as_str(), c.reason.as_deref(), c.message.as_deref()),
        ("Unknown", Some(PAUSED), Some("Deployment is paused"))
    );
    assert_eq!(c.last_transition_time, Some(stamp(t(10))));
    assert!(!check_paused(&mut d, t(20)), "already paused");
    if let Some(s) = d.spec.as_mut() {
        s.paused = None;
    }
    assert!(check_paused(&mut d, t(30)));
    let c = condition(d.status.as_ref().unwrap(), PROGRESSING).unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_deref(), c.message.as_deref()),
        ("Unknown", Some(RESUMED), Some("Deployment is resumed"))
    );
    assert_eq!(c.last_transition_time, Some(stamp(t(10))), "same status");
}

#[test]
fn a_timed_out_rollout_is_not_marked_paused() {
    let mut d = deployment(3, "25%", "25%");
    d.status = Some(with_progressing(status(4, 1, 3, 3), "False", TIMED_OUT, 0));
    if let Some(s) = d.spec.as_mut() {
        s.paused = Some(true);
    }
    assert!(!check_paused(&mut d, t(10)));
}

#[test]
fn a_stalled_rollout_is_looked_at_again_when_its_deadline_passes() {
    let d = deployment(3, "25%", "25%");
    let s = with_progressing(status(4, 1, 3, 3), "True", RS_UPDATED, 0);
    assert_eq!(
        requeue_after(&d, &s, t(180)),
        Some(Duration::from_secs(421))
    );
    assert_eq!(requeue_after(&d, &s, t(900)), Some(Duration::from_secs(1)));
    let done = with_progressing(status(3, 3, 3, 3), "True", NEW_RS_AVAILABLE, 0);
    assert_eq!(requeue_after(&d, &done, t(180)), None);
    let out = with_progressing(status(4, 1, 3, 3), "False", TIMED_OUT, 0);
    assert_eq!(requeue_after(&d, &out, t(180)), None);
}

#[test]
fn a_failed_create_is_reported_as_a_progressing_failure() {
    let d = deployment(3, "25%", "25%");
    let s = failed_create(&d, "web-abc", "quota exceeded", t(3)).unwrap();
    let c = condition(&s, PROGRESSING).unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_deref(), c.message.as_deref()),
        (
            "False",
            Some(FAILED_RS_CREATE),
            Some("Failed to create new replica set \"web-abc\": quota exceeded")
        )
    );
}

#[test]
fn the_first_passes_create_then_find_the_new_replica_set() {
    // NewReplicaSetCreated on creation.
    let d = deployment(3, "25%", "25%");
    let p = run(&d, &[], &[], t(1));
    let s = written_status(&p).unwrap();
    let (st, reason, msg) = progressing(&s);
    assert_eq!((st.as_str(), reason.as_str()), ("True", NEW_RS_CREATED));
    assert!(msg.starts_with("Created new replica set \"web-"), "{msg}");
    assert_eq!(
        cond(&s, AVAILABLE).unwrap().reason.as_deref(),
        Some(MIN_UNAVAILABLE)
    );
    // FoundNewReplicaSet when the new replica set exists but no progress was recorded.
    let existing = new_rs_of(&d, "web-abc", 1, 3)
        .sized_for(3, 4)
        .with_status(0, 0, 0);
    let p = run(&d, &[existing], &[], t(2));
    let (st, reason, msg) = progressing(&written_status(&p).unwrap());
    assert_eq!(
        (st.as_str(), reason.as_str(), msg.as_str()),
        ("True", FOUND_NEW_RS, "Found new replica set \"web-abc\"")
    );
}

#[test]
fn a_stuck_rollout_exceeds_its_deadline_on_time() {
    let mut d = with_image(deployment(3, "25%", "25%"), "nginx:1.16.1");
    if let Some(s) = d.spec.as_mut() {
        s.progress_deadline_seconds = Some(10);
    }
    let mut sim = Sim::new(d, Vec::new());
    sim.settle(|_| true);
    sim.set_template_image("nginx:1.161");
    sim.settle(|rs| image(rs) != "nginx:1.161");
    let s = sim.d.status.clone().unwrap();
    assert_eq!(progressing(&s).1, RS_UPDATED);
    let updated = condition(&s, PROGRESSING)
        .unwrap()
        .last_update_time
        .clone()
        .unwrap();
    let elapsed = sim.clock - updated.0.as_second() + 1_700_000_000;
    let p = run(&sim.d, &sim.rss, &[], t(sim.clock));
    assert_eq!(
        p.requeue_after,
        Some(Duration::from_secs(
            u64::try_from(10 - elapsed + 1).unwrap()
        )),
        "looked at again when the deadline passes"
    );
    sim.clock += 11;
    let p = sim.pass();
    let s = written_status(&p).unwrap();
    assert_eq!(
        progressing(&s),
        (
            "False".to_string(),
            TIMED_OUT.to_string(),
            format!(
                "ReplicaSet {:?} has timed out progressing.",
                sim.rss
                    .iter()
                    .find(|r| image(r) == "nginx:1.161")
                    .and_then(|r| r.metadata.name.clone())
                    .unwrap()
            )
        )
    );
    assert_eq!(p.requeue_after, None);
    assert_eq!(sim.size_of("nginx:1.161"), 1, "no automatic rollback");
}
