//! Agent acceptance 2: restart policy. Each of Always / OnFailure / Never × exit 0 / exit 1
//! gives Kubernetes' phase, restartCount, and terminated reason (Completed / Error) with the
//! exit code; a crashing container backs off 10 s, then 20 s, between restarts (measured from
//! its status: lastState.terminated.finishedAt → the next run's startedAt) and waits in
//! `CrashLoopBackOff` meanwhile. A container whose command does not exist fails to start and
//! goes through the same back-off, 10 s, 20 s, then 40 s (its failed starts measured from
//! `finishedAt` of the `StartError` terminations), instead of being retried at once.

use std::time::Duration;

use std::collections::BTreeMap;

use berth_tests::pod_reading::{
    RunLog, condition, container_status, judge_backoff, judge_backoffs, last_terminated, phase,
    restart_count, terminated, time, waiting_reason,
};
use berth_tests::pod_specs::{bound_pod, sh_container};
use berth_tests::{Cluster, Table, secs};
use serde_json::{Value, json};

const START: Duration = secs(90);

struct Case {
    name: &'static str,
    policy: &'static str,
    code: i64,
    phase: &'static str,
    restarts: bool,
    reason: &'static str,
}

const CASES: [Case; 6] = [
    Case {
        name: "always-0",
        policy: "Always",
        code: 0,
        phase: "Running",
        restarts: true,
        reason: "Completed",
    },
    Case {
        name: "always-1",
        policy: "Always",
        code: 1,
        phase: "Running",
        restarts: true,
        reason: "Error",
    },
    Case {
        name: "onfailure-0",
        policy: "OnFailure",
        code: 0,
        phase: "Succeeded",
        restarts: false,
        reason: "Completed",
    },
    Case {
        name: "onfailure-1",
        policy: "OnFailure",
        code: 1,
        phase: "Running",
        restarts: true,
        reason: "Error",
    },
    Case {
        name: "never-0",
        policy: "Never",
        code: 0,
        phase: "Succeeded",
        restarts: false,
        reason: "Completed",
    },
    Case {
        name: "never-1",
        policy: "Never",
        code: 1,
        phase: "Failed",
        restarts: false,
        reason: "Error",
    },
];

fn pod(case: &Case, node: &str) -> Value {
    bound_pod(
        case.name,
        node,
        json!({
            "restartPolicy": case.policy,
            "containers": [sh_container("main", &format!("sleep 1; exit {}", case.code))],
        }),
    )
}

/// What is still missing before `pod` shows what `case` expects.
fn check(case: &Case, pod: &Value) -> Result<(), String> {
    let cs = container_status(pod, "main").ok_or("no status for container main")?;
    if phase(pod) != case.phase {
        return Err(format!("phase {:?}, want {}", phase(pod), case.phase));
    }
    let (term, restarts_ok) = if case.restarts {
        (last_terminated(cs), restart_count(cs) >= 1)
    } else {
        (terminated(cs), restart_count(cs) == 0)
    };
    if !restarts_ok {
        return Err(format!("restartCount {}", restart_count(cs)));
    }
    let term = term.ok_or("no terminated state yet")?;
    if term["reason"] != case.reason || term["exitCode"] != case.code {
        return Err(format!(
            "terminated reason {} exitCode {}, want {} {}",
            term["reason"], term["exitCode"], case.reason, case.code
        ));
    }
    if !case.restarts && condition(pod, "Ready") != Some("False") {
        return Err("a finished pod must not be Ready".into());
    }
    Ok(())
}

#[test]
fn restart_policy_and_exit_code_give_the_kubernetes_outcome() {
    let (c, node) = Cluster::start_one();
    for case in &CASES {
        c.apply(&pod(case, &node));
    }
    for case in &CASES {
        c.wait_pod(
            "default",
            case.name,
            START,
            &format!("the {} outcome", case.name),
            |p| check(case, p),
        );
    }
    // The finished ones stay finished.
    c.ensure_for(secs(5), "finished pods are not restarted", || {
        for case in CASES.iter().filter(|k| !k.restarts) {
            let p = c.pod("default", case.name).ok_or(case.name)?;
            check(case, &p).map_err(|_| case.name)?;
        }
        Ok::<(), &str>(())
    });
    let table = Table::parse(&c.kubectl().ok(&["get", "pods"])).unwrap();
    assert_eq!(table.cell("never-0", "STATUS"), Some("Completed"));
    assert_eq!(table.cell("never-1", "STATUS"), Some("Error"));
    assert_eq!(table.cell("onfailure-0", "STATUS"), Some("Completed"));
}

#[test]
fn a_crashing_container_backs_off_10s_then_20s() {
    let (c, node) = Cluster::start_one();
    c.apply(&bound_pod(
        "crasher",
        &node,
        json!({"restartPolicy": "Always", "containers": [sh_container("main", "exit 1")]}),
    ));
    let mut log = RunLog::default();
    let mut table_status = None;
    let (first, second) = c.watch_pod(
        "default",
        "crasher",
        secs(150),
        "two back-off intervals and CrashLoopBackOff",
        |pod| {
            let cs = container_status(pod, "main").ok_or("no container status")?;
            log.observe(cs);
            if table_status.is_none() && log.waiting_reasons.contains("CrashLoopBackOff") {
                let out = c.kubectl().ok(&["get", "pod", "crasher"]);
                table_status = Table::parse(&out)
                    .ok()
                    .and_then(|t| t.cell("crasher", "STATUS").map(str::to_string));
            }
            match judge_backoff(&log.gaps()) {
                Err(e) => panic!("{e}\nruns: {:#?}", log.ordered()),
                Ok(Some(pair)) if log.waiting_reasons.contains("CrashLoopBackOff") => Ok(pair),
                Ok(_) => Err(format!(
                    "gaps so far {:?}, waiting reasons {:?}, runs {:?}",
                    log.gaps(),
                    log.waiting_reasons,
                    log.ordered()
                )),
            }
        },
    );
    assert!(first >= 10 && second >= 20, "{first} s, {second} s");
    assert_eq!(table_status.as_deref(), Some("CrashLoopBackOff"));
    let pod = c.pod("default", "crasher").unwrap();
    assert_eq!(phase(&pod), "Running", "a restarting pod stays Running");
    let cs = container_status(&pod, "main").unwrap();
    assert_eq!(last_terminated(cs).unwrap()["reason"], "Error");
    let backoff: Vec<Value> = c
        .pod_events("default", "crasher")
        .into_iter()
        .filter(|e| e["reason"] == "BackOff")
        .collect();
    assert!(
        backoff.iter().any(|e| e["type"] == "Warning"
            && e["message"].as_str().is_some_and(|m| m
                .starts_with("Back-off restarting failed container main in pod crasher_default("))),
        "BackOff events: {backoff:?}"
    );
}

#[test]
fn a_container_whose_command_does_not_exist_backs_off_10s_20s_then_40s() {
    let (c, node) = Cluster::start_one();
    c.apply(&bound_pod(
        "nocommand",
        &node,
        json!({"restartPolicy": "Always", "containers": [{
            "name": "main",
            "image": "busybox:1.28",
            "command": ["/no/such/command"],
        }]}),
    ));
    // Each failed start is a `StartError` termination; its finishedAt is when it was tried.
    let mut failures: BTreeMap<String, jiff::Timestamp> = BTreeMap::new();
    let mut reasons = std::collections::BTreeSet::new();
    let gaps = c.watch_pod(
        "default",
        "nocommand",
        secs(150),
        "three back-off intervals between failed starts and CrashLoopBackOff",
        |pod| {
            let cs = container_status(pod, "main").ok_or("no container status")?;
            if let Some(r) = waiting_reason(cs) {
                reasons.insert(r.to_string());
            }
            for t in [terminated(cs), last_terminated(cs)].into_iter().flatten() {
                if t["reason"] != "StartError" {
                    continue;
                }
                let id = t["containerID"].as_str().unwrap_or_default().to_string();
                if let Some(at) = time(&t["finishedAt"]) {
                    failures.entry(id).or_insert(at);
                }
            }
            let mut times: Vec<jiff::Timestamp> = failures.values().copied().collect();
            times.sort();
            let gaps: Vec<i64> = times
                .windows(2)
                .map(|w| w[1].as_second() - w[0].as_second())
                .collect();
            if restart_count(cs) > 8 {
                panic!("restarted {} times: gaps {gaps:?}", restart_count(cs));
            }
            match judge_backoffs(&gaps, 3) {
                Err(e) => panic!("{e}"),
                Ok(Some(gaps)) if reasons.contains("CrashLoopBackOff") => Ok(gaps),
                Ok(_) => Err(format!("gaps so far {gaps:?}, waiting reasons {reasons:?}")),
            }
        },
    );
    assert!(gaps[0] >= 10 && gaps[1] >= 20 && gaps[2] >= 40, "{gaps:?}");
    let pod = c.pod("default", "nocommand").unwrap();
    let cs = container_status(&pod, "main").unwrap();
    let last = last_terminated(cs).unwrap();
    assert_eq!(
        (&last["reason"], &last["exitCode"], &last["startedAt"]),
        (
            &json!("StartError"),
            &json!(128),
            // As the kubelet writes CRI's 0 (kubectl describe: `Started: Thu, 01 Jan 1970`).
            &json!("1970-01-01T00:00:00Z")
        )
    );
    let events = c.pod_events("default", "nocommand");
    let has = |reason: &str, kind: &str, prefix: &str| {
        events.iter().any(|e| {
            e["reason"] == reason
                && e["type"] == kind
                && e["message"].as_str().is_some_and(|m| m.starts_with(prefix))
        })
    };
    assert!(
        has(
            "BackOff",
            "Warning",
            "Back-off restarting failed container main in pod nocommand_default("
        ),
        "events: {events:#?}"
    );
    assert!(has("Failed", "Warning", "Error: "), "events: {events:#?}");
}
