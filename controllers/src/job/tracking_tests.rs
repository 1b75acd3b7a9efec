//! Table tests of pod tracking: each finished pod counted once whatever step a crash
//! interrupts, the interim and terminal conditions, suspension, and the finish events.

use super::*;
use crate::job::plan::tests::{arcs, ended, indexed, job, now, pod};
use crate::job::plan::{self, Manage};
use serde_json::{Value, json};

/// A whole pass with every write succeeding: the status written first, the pods untracked,
/// the status written last, and the events.
struct Pass {
    first: batch::JobStatus,
    untracked: Vec<String>,
    last: batch::JobStatus,
    events: Vec<String>,
    manage: Manage,
}

fn pass(spec: Value, status: Value, pods: Vec<JobPod>, applied: Option<Applied>) -> Pass {
    let j = job(spec, status);
    let pods = arcs(pods);
    let m = plan::manage(&j, &pods, now());
    let applied = applied.unwrap_or(match &m.change {
        Change::Create(n) => Applied::of_created(n.len()),
        Change::Terminate(p) | Change::Remove(p) => Applied::of_deleted(p),
        Change::None => Applied::default(),
    });
    let s = settle(&j, &m, applied, now());
    let mut events: Vec<String> = s.events.iter().map(|e| e.reason.clone()).collect();
    let t = track(&j, &pods, &m, s);
    let removed: BTreeSet<String> = t.remove.iter().map(|p| p.uid.clone()).collect();
    let (last, ev) = finish(&j, &t, &removed, now());
    events.extend(ev.iter().map(|e| e.reason.clone()));
    Pass {
        first: t.status.clone(),
        untracked: t.remove.iter().map(|p| p.name.clone()).collect(),
        last,
        events,
        manage: m,
    }
}

fn uncounted_of(s: &batch::JobStatus) -> (Vec<String>, Vec<String>) {
    let u = s.uncounted_terminated_pods.clone().unwrap_or_default();
    (
        u.succeeded.unwrap_or_default(),
        u.failed.unwrap_or_default(),
    )
}

fn types(s: &batch::JobStatus) -> Vec<String> {
    s.conditions
        .iter()
        .flatten()
        .map(|c| format!("{}={}", c.type_, c.status))
        .collect()
}

fn untracked(mut p: JobPod) -> JobPod {
    p.finalizer = false;
    p
}

#[test]
fn a_finished_pod_is_counted_once_whatever_step_a_crash_interrupts() {
    let spec = json!({"completions": 3, "parallelism": 2});
    let done = || ended(pod("a", "Succeeded"), 0, 5);
    let cases = [
        (
            "newly finished: listed, untracked, counted",
            json!({}),
            vec![done()],
            vec!["a"],
        ),
        (
            "crash after the first write: untracked and counted now",
            json!({"uncountedTerminatedPods": {"succeeded": ["uid-a"]}}),
            vec![done()],
            vec!["a"],
        ),
        (
            "crash after the untracking: counted without touching the pod",
            json!({"uncountedTerminatedPods": {"succeeded": ["uid-a"]}}),
            vec![untracked(done())],
            vec![],
        ),
        (
            "crash after the untracking, pod gone since",
            json!({"uncountedTerminatedPods": {"succeeded": ["uid-a"]}}),
            vec![],
            vec![],
        ),
        (
            "counted long ago: nothing to do",
            json!({"succeeded": 1}),
            vec![untracked(done())],
            vec![],
        ),
    ];
    for (name, status, pods, want_untracked) in cases {
        let p = pass(spec.clone(), status, pods, None);
        assert_eq!(p.untracked, want_untracked, "{name}");
        if !want_untracked.is_empty() {
            assert_eq!(
                uncounted_of(&p.first).0,
                ["uid-a"],
                "{name}: listed before untracking"
            );
        }
        assert_eq!(p.last.succeeded, Some(1), "{name}");
        assert_eq!(uncounted_of(&p.last), (vec![], vec![]), "{name}");
        assert_eq!(p.manage.succeeded, 1, "{name}");
    }
}

#[test]
fn finish_conditions_follow_the_pods() {
    let ok = |n: &str| ended(pod(n, "Succeeded"), 0, 5);
    let mut running = pod("r", "Running");
    running.ready = true;
    let mut going = pod("g", "Running");
    going.deleting = true;
    let cases = [
        (
            "the last success completes the Job in one pass",
            json!({"completions": 2}),
            json!({"succeeded": 1}),
            vec![ok("b")],
            vec!["SuccessCriteriaMet=True", "Complete=True"],
            vec!["Completed"],
        ),
        (
            "a work queue completes once every pod ended",
            json!({"completions": null, "parallelism": 2}),
            json!({}),
            vec![ok("a"), ok("b")],
            vec!["SuccessCriteriaMet=True", "Complete=True"],
            vec!["Completed"],
        ),
        (
            "a work queue waits for its other pods",
            json!({"completions": null, "parallelism": 2}),
            json!({}),
            vec![ok("a"), running.clone()],
            vec![],
            vec![],
        ),
        (
            "a failure with a pod running waits for it to end",
            json!({"backoffLimit": 0, "parallelism": 2, "completions": 2}),
            json!({"failed": 1}),
            vec![running],
            vec!["FailureTarget=True"],
            vec!["SuccessfulDelete"],
        ),
        (
            "the failure target turns Failed once nothing is terminating",
            json!({"backoffLimit": 0}),
            json!({"failed": 1, "conditions": [{"type": "FailureTarget", "status": "True",
                "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"}]}),
            vec![],
            vec!["FailureTarget=True", "Failed=True"],
            vec!["BackoffLimitExceeded"],
        ),
        (
            "but not while a pod is still terminating",
            json!({"backoffLimit": 0}),
            json!({"failed": 1, "conditions": [{"type": "FailureTarget", "status": "True",
                "reason": "BackoffLimitExceeded", "message": "m"}]}),
            vec![going],
            vec!["FailureTarget=True"],
            vec![],
        ),
    ];
    for (name, spec, status, pods, want, events) in cases {
        let p = pass(spec, status, pods, None);
        assert_eq!(types(&p.last), want, "{name}");
        let finish_events: Vec<&str> = p
            .events
            .iter()
            .map(String::as_str)
            .filter(|e| *e != "SuccessfulDelete")
            .collect();
        let want_events: Vec<&str> = events
            .into_iter()
            .filter(|e| *e != "SuccessfulDelete")
            .collect();
        assert_eq!(finish_events, want_events, "{name}");
        let complete = want.contains(&"Complete=True");
        assert_eq!(p.last.completion_time.is_some(), complete, "{name}");
        if want.contains(&"FailureTarget=True") && !want.contains(&"Failed=True") {
            assert!(
                types(&p.first).contains(&"FailureTarget=True".to_string()),
                "{name}"
            );
        }
    }
}

#[test]
fn pods_of_a_failing_job_are_counted_as_failed_and_untracked() {
    let mut running = pod("r", "Running");
    running.ready = true;
    let failed = ended(pod("x", "Failed"), 42, 1);
    let spec = json!({"parallelism": 2, "completions": 4,
        "podFailurePolicy": {"rules": [{"action": "FailJob",
            "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}}]}});
    let p = pass(spec, json!({}), vec![failed, running], None);
    assert_eq!(uncounted_of(&p.first).1, ["uid-x", "uid-r"]);
    assert_eq!(p.untracked, ["x", "r"]);
    assert_eq!(p.last.failed, Some(2));
    assert_eq!(
        types(&p.last),
        ["FailureTarget=True"],
        "the running pod is terminating"
    );
    assert_eq!(
        (p.last.active, p.last.ready, p.last.terminating),
        (None, Some(0), Some(1))
    );
    let target = &p.last.conditions.as_ref().unwrap()[0];
    assert_eq!(target.reason.as_deref(), Some("PodFailurePolicy"));
    assert_eq!(
        target.message.as_deref(),
        Some(
            "Container main for pod ns/x failed with exit code 42 matching FailJob rule at index 0"
        )
    );
}

#[test]
fn a_job_that_cannot_stop_every_pod_is_not_declared_finished() {
    let p = pass(
        json!({"backoffLimit": 0, "parallelism": 2, "completions": 2}),
        json!({"failed": 1}),
        vec![pod("r", "Running")],
        Some(Applied::default()),
    );
    assert_eq!(types(&p.last), Vec::<String>::new());
    assert_eq!(p.last.active, Some(1));
}

#[test]
fn removed_pods_are_never_counted_and_suspension_is_recorded() {
    let mut r = pod("r", "Running");
    r.ready = true;
    let p = pass(
        json!({"suspend": true}),
        json!({"startTime": "2024-06-01T11:00:00Z"}),
        vec![r],
        None,
    );
    assert!(
        p.untracked.is_empty(),
        "the removal took the finalizer off already"
    );
    assert_eq!(uncounted_of(&p.last), (vec![], vec![]));
    assert_eq!(
        (p.last.failed, p.last.active, p.last.terminating),
        (None, None, Some(1))
    );
    assert_eq!(types(&p.last), ["Suspended=True"]);
    assert_eq!(p.events, ["Suspended"]);
    let suspended = json!({"startTime": "2024-06-01T11:00:00Z", "conditions": [
        {"type": "Suspended", "status": "True", "reason": "JobSuspended", "message": "Job suspended"}]});
    let p = pass(json!({}), suspended, vec![], None);
    assert_eq!(types(&p.last), ["Suspended=False"]);
    assert_eq!(p.events, ["Resumed"]);
    assert_eq!(
        p.last.start_time.map(|t| t.0),
        Some(now()),
        "the deadline counts from now"
    );
}

#[test]
fn an_indexed_job_records_completed_indexes_before_untracking() {
    let spec = json!({"completionMode": "Indexed", "completions": 6, "parallelism": 6});
    let pods = vec![
        indexed(ended(pod("p3", "Succeeded"), 0, 5), 3),
        indexed(ended(pod("p5", "Succeeded"), 0, 5), 5),
        indexed(ended(pod("again", "Succeeded"), 0, 5), 1),
    ];
    let p = pass(
        spec,
        json!({"completedIndexes": "0-2", "succeeded": 3}),
        pods,
        None,
    );
    assert_eq!(p.first.completed_indexes.as_deref(), Some("0-3,5"));
    assert_eq!(p.first.succeeded, Some(5));
    assert_eq!(
        uncounted_of(&p.first),
        (vec![], vec![]),
        "indexes need no UIDs"
    );
    assert_eq!(p.untracked, ["again", "p3", "p5"]);
    assert_eq!(p.last.succeeded, Some(5), "a repeated index counts once");
}
