//! Table tests of the Job controller's decisions: pods to create and remove, indexes, back-off,
//! and the failure and success criteria.

use super::*;
use crate::job::removal::removal_order;
use crate::job::view::ContainerEnd;
use serde_json::{Value, json};

pub(crate) fn now() -> Timestamp {
    "2024-06-01T12:00:00Z".parse().unwrap()
}

pub(crate) fn ago(secs: i64) -> Timestamp {
    now() - SignedDuration::from_secs(secs)
}

/// A Job `j` (uid `u`, restartPolicy Never) with `spec` merged over its spec and `status`.
pub(crate) fn job(spec: Value, status: Value) -> Job {
    let mut s = json!({"parallelism": 1, "completions": 1, "backoffLimit": 6,
        "completionMode": "NonIndexed", "suspend": false,
        "podReplacementPolicy": "TerminatingOrFailed",
        "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u"}},
        "template": {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": "u"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "x"}]}}});
    json_patch::merge(&mut s, &spec);
    Job::from_value(
        &json!({"metadata": {"name": "j", "namespace": "ns", "uid": "u"},
        "spec": s, "status": status}),
    )
    .unwrap()
}

/// A tracked pod of the Job in `phase`, created a minute ago.
pub(crate) fn pod(name: &str, phase: &str) -> JobPod {
    JobPod {
        name: name.into(),
        namespace: "ns".into(),
        uid: format!("uid-{name}"),
        phase: phase.into(),
        finalizer: true,
        node_name: "n1".into(),
        created: Some(ago(60)),
        ..JobPod::default()
    }
}

pub(crate) fn indexed(mut p: JobPod, ix: i32) -> JobPod {
    p.index = Some(ix);
    p
}

/// Ended with `code` at `finished` seconds ago.
pub(crate) fn ended(mut p: JobPod, code: i32, finished: i64) -> JobPod {
    p.containers = vec![ContainerEnd {
        name: "main".into(),
        terminated: Some((code, Some(ago(finished)))),
    }];
    p
}

pub(crate) fn arcs(pods: Vec<JobPod>) -> Vec<Arc<JobPod>> {
    pods.into_iter().map(Arc::new).collect()
}

fn created(m: &Manage) -> Vec<Option<i32>> {
    match &m.change {
        Change::Create(n) => n.iter().map(|p| p.index).collect(),
        _ => Vec::new(),
    }
}

fn removed(m: &Manage) -> Vec<String> {
    match &m.change {
        Change::Remove(p) => p.iter().map(|p| p.name.clone()).collect(),
        _ => Vec::new(),
    }
}

fn reason(m: &Manage) -> Option<String> {
    m.finish.as_ref().and_then(|f| f.terminal.reason.clone())
}

#[test]
fn pods_are_created_up_to_parallelism_and_the_remaining_completions() {
    let cases = [
        ("a non-parallel Job starts one pod", json!({}), vec![], 1),
        (
            "a fixed count runs parallelism pods",
            json!({"completions": 5, "parallelism": 3}),
            vec![],
            3,
        ),
        (
            "no more pods than remaining completions",
            json!({"completions": 5, "parallelism": 3}),
            vec![
                pod("a", "Succeeded"),
                pod("b", "Succeeded"),
                pod("c", "Succeeded"),
                pod("d", "Running"),
            ],
            1,
        ),
        (
            "a work queue runs parallelism pods",
            json!({"completions": null, "parallelism": 3}),
            vec![pod("a", "Running")],
            2,
        ),
        (
            "a work queue starts nothing after a success",
            json!({"completions": null, "parallelism": 3}),
            vec![pod("a", "Succeeded"), pod("b", "Running")],
            0,
        ),
        (
            "parallelism 0 pauses the Job",
            json!({"parallelism": 0}),
            vec![],
            0,
        ),
        (
            "a terminating pod is replaced at once by default",
            json!({}),
            vec![{
                let mut p = pod("a", "Running");
                p.deleting = true;
                p
            }],
            1,
        ),
        (
            "with podReplacementPolicy Failed it is not",
            json!({"podReplacementPolicy": "Failed"}),
            vec![{
                let mut p = pod("a", "Running");
                p.deleting = true;
                p
            }],
            0,
        ),
    ];
    for (name, spec, pods, want) in cases {
        let m = manage(&job(spec, json!({})), &arcs(pods), now());
        assert_eq!(created(&m).len(), want, "{name}");
        assert!(m.finish.is_none(), "{name}");
    }
}

#[test]
fn surplus_and_suspended_pods_are_removed_least_advanced_first() {
    let mut ready = pod("ready", "Running");
    ready.ready = true;
    let mut unbound = pod("unbound", "Pending");
    unbound.node_name.clear();
    let pending = pod("pending", "Pending");
    let running = pod("running", "Running");
    let all = || {
        vec![
            ready.clone(),
            running.clone(),
            pending.clone(),
            unbound.clone(),
        ]
    };
    let m = manage(
        &job(json!({"completions": 4, "parallelism": 2}), json!({})),
        &arcs(all()),
        now(),
    );
    assert_eq!(removed(&m), ["unbound", "pending"], "lowered parallelism");
    let m = manage(
        &job(
            json!({"completions": 4, "parallelism": 4, "suspend": true}),
            json!({}),
        ),
        &arcs(all()),
        now(),
    );
    assert_eq!(
        removed(&m),
        ["unbound", "pending", "running", "ready"],
        "suspended"
    );
    assert!(m.start_time.is_none(), "a suspended Job does not start");
}

#[test]
fn an_indexed_job_creates_the_first_pending_indexes_and_removes_duplicates() {
    let spec = json!({"completionMode": "Indexed", "completions": 6, "parallelism": 3});
    let pods = vec![
        indexed(pod("s0", "Succeeded"), 0),
        indexed(pod("r2", "Running"), 2),
    ];
    let m = manage(
        &job(spec.clone(), json!({"completedIndexes": "1"})),
        &arcs(pods),
        now(),
    );
    assert_eq!(created(&m), [Some(3), Some(4)]);
    assert_eq!(m.succeeded_indexes.to_string(), "0,1");
    let mut older = indexed(pod("older", "Running"), 2);
    older.created = Some(ago(120));
    let dup = vec![indexed(pod("newer", "Running"), 2), older, {
        let mut p = pod("stray", "Running");
        p.index = None;
        p
    }];
    let m = manage(&job(spec, json!({})), &arcs(dup), now());
    assert_eq!(removed(&m), ["stray", "newer"]);
}

#[test]
fn failed_pods_are_replaced_after_the_back_off() {
    let cases = [
        (
            "one failure 4 s ago waits 6 s more",
            vec![ended(pod("a", "Failed"), 1, 4)],
            Some(6),
        ),
        (
            "one failure 12 s ago is replaced",
            vec![ended(pod("a", "Failed"), 1, 12)],
            None,
        ),
        (
            "two failures wait 20 s from the last",
            vec![
                ended(pod("a", "Failed"), 1, 40),
                ended(pod("b", "Failed"), 1, 5),
            ],
            Some(15),
        ),
        (
            "a success in between restarts the count",
            vec![
                ended(pod("a", "Failed"), 1, 40),
                ended(pod("ok", "Succeeded"), 0, 30),
                ended(pod("b", "Failed"), 1, 15),
            ],
            None,
        ),
    ];
    for (name, pods, wait) in cases {
        let m = manage(
            &job(json!({"completions": 3}), json!({})),
            &arcs(pods),
            now(),
        );
        match wait {
            Some(s) => {
                assert_eq!(m.change, Change::None, "{name}");
                assert_eq!(m.requeue_after, Some(Duration::from_secs(s)), "{name}");
            }
            None => assert_eq!(created(&m).len(), 1, "{name}"),
        }
    }
}

#[test]
fn failure_criteria_finish_the_job_with_upstreams_reasons() {
    let failed = |n: usize| {
        (0..n)
            .map(|i| ended(pod(&format!("f{i}"), "Failed"), 1, 100))
            .collect::<Vec<_>>()
    };
    let mut restarting = pod("r", "Running");
    restarting.total_restarts = 2;
    let cases = [
        (
            "failures within the limit",
            json!({"backoffLimit": 2}),
            json!({}),
            failed(2),
            None,
        ),
        (
            "one failure past backoffLimit",
            json!({"backoffLimit": 2}),
            json!({}),
            failed(3),
            Some(BACKOFF_LIMIT_EXCEEDED),
        ),
        (
            "counted failures in the status count too",
            json!({"backoffLimit": 2}),
            json!({"failed": 2}),
            failed(1),
            Some(BACKOFF_LIMIT_EXCEEDED),
        ),
        (
            "OnFailure restarts reaching the limit",
            json!({"backoffLimit": 2, "template": {"spec": {"restartPolicy": "OnFailure"}}}),
            json!({}),
            vec![restarting],
            Some(BACKOFF_LIMIT_EXCEEDED),
        ),
        (
            "the active deadline passed",
            json!({"activeDeadlineSeconds": 30}),
            json!({"startTime": "2024-06-01T11:59:00Z"}),
            vec![pod("r", "Running")],
            Some(DEADLINE_EXCEEDED),
        ),
        (
            "a FailJob rule matched",
            json!({"podFailurePolicy": {"rules": [{"action": "FailJob",
                "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}}]}}),
            json!({}),
            vec![ended(pod("x", "Failed"), 42, 1)],
            Some(POD_FAILURE_POLICY),
        ),
        (
            "an Ignore rule does not count towards the limit",
            json!({"backoffLimit": 0, "podFailurePolicy": {"rules": [{"action": "Ignore",
                "onExitCodes": {"operator": "In", "values": [1]}}]}}),
            json!({}),
            failed(1),
            None,
        ),
    ];
    for (name, spec, status, pods, want) in cases {
        let m = manage(&job(spec, status), &arcs(pods.clone()), now());
        assert_eq!(reason(&m).as_deref(), want, "{name}");
        if want.is_some() {
            let f = m.finish.as_ref().unwrap();
            assert_eq!(
                f.interim.as_ref().map(|c| c.type_.as_str()),
                Some(FAILURE_TARGET),
                "{name}"
            );
            assert_eq!(f.terminal.type_, conditions::FAILED, "{name}");
            let active: Vec<&str> = pods
                .iter()
                .filter(|p| p.active())
                .map(|p| p.name.as_str())
                .collect();
            match &m.change {
                Change::Terminate(t) => {
                    assert_eq!(
                        t.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
                        active,
                        "{name}"
                    )
                }
                other => panic!("{name}: {other:?}"),
            }
        }
    }
}

#[test]
fn the_deadline_and_the_failure_target_drive_the_next_passes() {
    let m = manage(
        &job(
            json!({"activeDeadlineSeconds": 100}),
            json!({"startTime": "2024-06-01T11:59:00Z"}),
        ),
        &arcs(vec![pod("r", "Running")]),
        now(),
    );
    assert_eq!(m.requeue_after, Some(Duration::from_secs(40)));
    let target = json!({"conditions": [{"type": "FailureTarget", "status": "True",
        "reason": "BackoffLimitExceeded", "message": "m"}]});
    let m = manage(&job(json!({}), target), &arcs(vec![]), now());
    let f = m.finish.unwrap();
    assert_eq!(f.interim, None, "written already");
    assert_eq!(
        (f.terminal.type_.as_str(), f.terminal.reason.as_deref()),
        ("Failed", Some("BackoffLimitExceeded"))
    );
}

#[test]
fn per_index_limits_fail_indexes_and_the_job() {
    let spec = json!({"completionMode": "Indexed", "completions": 4, "parallelism": 2,
        "backoffLimitPerIndex": 1, "backoffLimit": 2147483647});
    let second = |ix: i32| {
        let mut p = indexed(ended(pod(&format!("f{ix}"), "Failed"), 1, 50), ix);
        p.index_failures = 1;
        p
    };
    let first = indexed(ended(pod("first0", "Failed"), 1, 50), 0);
    // Index 0 failed once: its pod waits (finalizer kept) for a replacement carrying count 1.
    let m = manage(
        &job(spec.clone(), json!({})),
        &arcs(vec![first.clone()]),
        now(),
    );
    assert_eq!(m.delayed.get(&0), Some(&"uid-first0".to_string()));
    match &m.change {
        Change::Create(n) => {
            assert_eq!(
                n[0],
                NewPod {
                    index: Some(0),
                    failures: Some((1, 0))
                },
                "the retry of 0"
            );
            assert_eq!(
                n[1],
                NewPod {
                    index: Some(1),
                    failures: Some((0, 0))
                }
            );
        }
        other => panic!("{other:?}"),
    }
    // Its retry failed too: the index failed, the Job goes on with the others.
    let m = manage(&job(spec.clone(), json!({})), &arcs(vec![second(0)]), now());
    assert_eq!(
        m.failed_indexes.as_ref().map(|f| f.to_string()).as_deref(),
        Some("0")
    );
    assert_eq!(created(&m), [Some(1), Some(2)]);
    // Every index done, one failed: the Job fails with FailedIndexes.
    let status = json!({"completedIndexes": "1-3", "failedIndexes": "0"});
    let m = manage(&job(spec.clone(), status), &arcs(vec![]), now());
    assert_eq!(reason(&m).as_deref(), Some(FAILED_INDEXES));
    // More failed indexes than maxFailedIndexes: the Job fails at once.
    let mut max = spec;
    max["maxFailedIndexes"] = json!(1);
    let m = manage(
        &job(max, json!({})),
        &arcs(vec![second(0), second(2)]),
        now(),
    );
    assert_eq!(reason(&m).as_deref(), Some(MAX_FAILED_INDEXES_EXCEEDED));
}

#[test]
fn a_success_policy_declares_success_criteria_met() {
    let spec = json!({"completionMode": "Indexed", "completions": 10, "parallelism": 10,
        "successPolicy": {"rules": [{"succeededIndexes": "0,2-3", "succeededCount": 1}]}});
    let pods = vec![
        indexed(pod("two", "Succeeded"), 2),
        indexed(pod("five", "Running"), 5),
    ];
    let m = manage(&job(spec, json!({})), &arcs(pods), now());
    let f = m.finish.as_ref().unwrap();
    let interim = f.interim.as_ref().unwrap();
    assert_eq!(
        (interim.type_.as_str(), interim.reason.as_deref()),
        (SUCCESS_CRITERIA_MET, Some(SUCCESS_POLICY))
    );
    assert_eq!(interim.message.as_deref(), Some("Matched rules at index 0"));
    assert!(f.success());
    assert!(
        matches!(&m.change, Change::Terminate(p) if p.len() == 1),
        "lingering pods end"
    );
}

#[test]
fn pods_are_removed_in_upstreams_active_pods_order() {
    let mut a = pod("a", "Running");
    a.ready = true;
    a.ready_since = Some(ago(10));
    let mut b = a.clone();
    b.name = "b".into();
    b.ready_since = Some(ago(100));
    let mut c = pod("c", "Running");
    c.max_restarts = 3;
    let d = pod("d", "Running");
    let mut e = pod("e", "Running");
    e.created = Some(ago(5));
    let mut list = [&b, &a, &d, &c, &e];
    list.sort_by(|x, y| removal_order(x, y));
    let names: Vec<&str> = list.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["c", "e", "d", "a", "b"]);
}

#[test]
fn pods_are_claimed_by_controller_reference_and_selector() {
    use crate::views::ControllerRef;
    use Claim::*;
    // A pod the Job's selector matches, controlled by the Job of uid `uid` (none: an orphan).
    let matching = |uid: Option<&str>| {
        let mut p = pod("p", "Running");
        Arc::make_mut(&mut p.labels)
            .insert("batch.kubernetes.io/controller-uid".into(), "u".into());
        p.controller = uid.map(|uid| ControllerRef {
            api_version: "batch/v1".into(),
            kind: "Job".into(),
            name: "j".into(),
            uid: uid.into(),
        });
        p
    };
    let relabelled = |mut p: JobPod| {
        Arc::make_mut(&mut p.labels).remove("batch.kubernetes.io/controller-uid");
        p
    };
    let deleting = |mut p: JobPod| {
        p.deleting = true;
        p
    };
    let ours = Some("u");
    let live = job(json!({}), json!({}));
    let mut going = live.clone();
    going.deleting = true;
    let cases = [
        ("ours and matching", &live, matching(ours), Owned),
        (
            "ours, matching, being deleted",
            &live,
            deleting(matching(ours)),
            Owned,
        ),
        (
            "ours but relabelled",
            &live,
            relabelled(matching(ours)),
            Release,
        ),
        (
            "ours, relabelled, the Job going",
            &going,
            relabelled(matching(ours)),
            Ignore,
        ),
        (
            "an orphan the selector matches",
            &live,
            matching(None),
            Adopt,
        ),
        (
            "a matching orphan being deleted",
            &live,
            deleting(matching(None)),
            Ignore,
        ),
        (
            "a matching orphan of a Job going",
            &going,
            matching(None),
            Ignore,
        ),
        ("another Job's", &live, matching(Some("other")), Ignore),
    ];
    for (name, j, p, want) in cases {
        assert_eq!(claim(j, &p), want, "{name}");
    }
}

#[test]
fn scaling_an_indexed_job_down_removes_the_highest_indexes() {
    // T-JOB-14: parallelism and completions from 5 to 3 together.
    let spec = json!({"completionMode": "Indexed", "completions": 3, "parallelism": 3});
    let pods = (0..5)
        .map(|i| indexed(pod(&format!("p{i}"), "Running"), i))
        .collect();
    let m = manage(
        &job(spec, json!({"completedIndexes": "4"})),
        &arcs(pods),
        now(),
    );
    assert_eq!(removed(&m), ["p3", "p4"]);
    assert_eq!(m.succeeded, 0, "an index past completions no longer counts");
}
