//! The Pod printer: READY, the STATUS reason logic (init containers, sidecars, waiting and
//! terminated reasons, Terminating) and RESTARTS with the time of the last restart.

use std::collections::HashMap;

use jiff::Timestamp;
use serde_json::{Value, json};

use super::duration::{human_nanos, nanos_between, parse_time};
use super::lookup::{condition_status, has, int_at, list_at, opt_bool, opt_str, str_at};
use super::{ColumnDefinition, age_col, col, created, name, name_col, wide};

pub(crate) fn columns() -> Vec<ColumnDefinition> {
    vec![
        name_col(),
        col(
            "Ready",
            "string",
            "The aggregate readiness state of this pod for accepting traffic.",
        ),
        col(
            "Status",
            "string",
            "The aggregate status of the containers in this pod.",
        ),
        col(
            "Restarts",
            "string",
            "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
        ),
        age_col(),
        wide("IP", "string", "IP address allocated to the pod."),
        wide("Node", "string", "Node the pod is scheduled onto."),
        wide(
            "Nominated Node",
            "string",
            "Node the scheduler nominated for this pod after preemption.",
        ),
        wide(
            "Readiness Gates",
            "string",
            "How many of the pod's readiness gates are true.",
        ),
    ]
}

/// What the pod's status and restarts add up to.
struct Summary {
    ready: i64,
    total: i64,
    reason: String,
    restarts: i64,
    last_restart: Option<Timestamp>,
}

/// A sidecar: an init container that keeps running (`restartPolicy: Always`).
fn is_restartable(container: Option<&&Value>) -> bool {
    container.is_some_and(|c| str_at(c, &["restartPolicy"]) == "Always")
}

fn later(current: Option<Timestamp>, candidate: Option<Timestamp>) -> Option<Timestamp> {
    match (current, candidate) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// When a container last terminated before its current run.
fn last_termination(status: &Value) -> Option<Timestamp> {
    if !has(status, &["lastState", "terminated"]) {
        return None;
    }
    parse_time(opt_str(status, &["lastState", "terminated", "finishedAt"]))
}

/// `Signal:N` or `ExitCode:N` for a terminated state without a reason.
fn exit_text(terminated: &Value) -> String {
    let signal = int_at(terminated, &["signal"]);
    if signal != 0 {
        format!("Signal:{signal}")
    } else {
        format!("ExitCode:{}", int_at(terminated, &["exitCode"]))
    }
}

fn summarize(pod: &Value) -> Summary {
    let phase = str_at(pod, &["status", "phase"]);
    let mut reason = match str_at(pod, &["status", "reason"]) {
        "" => phase.to_string(),
        r => r.to_string(),
    };
    for c in list_at(pod, &["status", "conditions"]) {
        if str_at(c, &["type"]) == "PodScheduled" && str_at(c, &["reason"]) == "SchedulingGated" {
            reason = "SchedulingGated".to_string();
        }
    }

    let init_specs = list_at(pod, &["spec", "initContainers"]);
    let init_by_name: HashMap<&str, &Value> = init_specs
        .iter()
        .map(|c| (str_at(c, &["name"]), c))
        .collect();
    let sidecars = init_specs
        .iter()
        .filter(|c| str_at(c, &["restartPolicy"]) == "Always")
        .count();
    let total = (list_at(pod, &["spec", "containers"]).len() + sidecars) as i64;

    let mut ready = 0;
    let mut restarts = 0;
    let mut last_restart = None;
    let mut sidecar_restarts = 0;
    let mut last_sidecar_restart = None;
    let mut initializing = false;
    for (i, status) in list_at(pod, &["status", "initContainerStatuses"])
        .iter()
        .enumerate()
    {
        let count = int_at(status, &["restartCount"]);
        restarts += count;
        last_restart = later(last_restart, last_termination(status));
        let sidecar = is_restartable(init_by_name.get(str_at(status, &["name"])));
        if sidecar {
            sidecar_restarts += count;
            last_sidecar_restart = later(last_sidecar_restart, last_termination(status));
        }
        let terminated = status.pointer("/state/terminated").filter(|t| !t.is_null());
        let waiting_reason = str_at(status, &["state", "waiting", "reason"]);
        if terminated.is_some_and(|t| int_at(t, &["exitCode"]) == 0) {
            continue;
        }
        if sidecar && opt_bool(status, &["started"]) == Some(true) {
            if opt_bool(status, &["ready"]) == Some(true) {
                ready += 1;
            }
            continue;
        }
        reason = if let Some(t) = terminated {
            match str_at(t, &["reason"]) {
                "" => format!("Init:{}", exit_text(t)),
                r => format!("Init:{r}"),
            }
        } else if has(status, &["state", "waiting"])
            && !waiting_reason.is_empty()
            && waiting_reason != "PodInitializing"
        {
            format!("Init:{waiting_reason}")
        } else {
            format!("Init:{i}/{}", init_specs.len())
        };
        initializing = true;
        break;
    }

    if !initializing || condition_status(pod, "Initialized") == Some("True") {
        restarts = sidecar_restarts;
        last_restart = last_sidecar_restart;
        let mut has_running = false;
        for status in list_at(pod, &["status", "containerStatuses"]).iter().rev() {
            restarts += int_at(status, &["restartCount"]);
            last_restart = later(last_restart, last_termination(status));
            let terminated = status.pointer("/state/terminated").filter(|t| !t.is_null());
            let waiting_reason = str_at(status, &["state", "waiting", "reason"]);
            if has(status, &["state", "waiting"]) && !waiting_reason.is_empty() {
                reason = waiting_reason.to_string();
            } else if let Some(t) = terminated {
                reason = match str_at(t, &["reason"]) {
                    "" => exit_text(t),
                    r => r.to_string(),
                };
            } else if opt_bool(status, &["ready"]) == Some(true)
                && has(status, &["state", "running"])
            {
                has_running = true;
                ready += 1;
            }
        }
        // A pod with a container still running is not "Completed" even if another one is.
        if reason == "Completed" && has_running {
            reason = if condition_status(pod, "Ready") == Some("True") {
                "Running".to_string()
            } else {
                "NotReady".to_string()
            };
        }
    }

    if has(pod, &["metadata", "deletionTimestamp"]) {
        if str_at(pod, &["status", "reason"]) == "NodeLost" {
            reason = "Unknown".to_string();
        } else if phase != "Succeeded" && phase != "Failed" {
            reason = "Terminating".to_string();
        }
    }

    Summary {
        ready,
        total,
        reason,
        restarts,
        last_restart,
    }
}

fn or_none(s: &str) -> String {
    if s.is_empty() {
        "<none>".to_string()
    } else {
        s.to_string()
    }
}

fn readiness_gates(pod: &Value) -> String {
    let gates = list_at(pod, &["spec", "readinessGates"]);
    if gates.is_empty() {
        return "<none>".to_string();
    }
    let passing = gates
        .iter()
        .filter(|g| condition_status(pod, str_at(g, &["conditionType"])) == Some("True"))
        .count();
    format!("{passing}/{}", gates.len())
}

pub(crate) fn cells(pod: &Value, now: Timestamp) -> Vec<Value> {
    let s = summarize(pod);
    let restarts = match s.last_restart {
        Some(t) if s.restarts != 0 => {
            format!(
                "{} ({} ago)",
                s.restarts,
                human_nanos(nanos_between(t, now))
            )
        }
        _ => s.restarts.to_string(),
    };
    let ip = list_at(pod, &["status", "podIPs"])
        .first()
        .map(|p| str_at(p, &["ip"]))
        .unwrap_or_else(|| str_at(pod, &["status", "podIP"]));
    vec![
        name(pod),
        json!(format!("{}/{}", s.ready, s.total)),
        json!(s.reason),
        json!(restarts),
        created(pod, now),
        json!(or_none(ip)),
        json!(or_none(str_at(pod, &["spec", "nodeName"]))),
        json!(or_none(str_at(pod, &["status", "nominatedNodeName"]))),
        json!(readiness_gates(pod)),
    ]
}

/// The row condition upstream attaches to finished pods.
pub(crate) fn row_conditions(pod: &Value) -> Option<Value> {
    let (reason, message) = match str_at(pod, &["status", "phase"]) {
        "Succeeded" => ("Succeeded", "The pod has completed successfully."),
        "Failed" => ("Failed", "The pod failed."),
        _ => return None,
    };
    Some(json!([{"type": "Completed", "status": "True", "reason": reason, "message": message}]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::fixture::now;

    /// A pod created ten minutes before `fixture::NOW`, one `app` container, the given status.
    fn pod(status: Value) -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-0", "namespace": "default",
                         "creationTimestamp": "2024-05-01T11:50:00Z"},
            "spec": {"containers": [{"name": "app", "image": "nginx:1.16.1"}],
                     "nodeName": "node-1"},
            "status": status,
        })
    }

    fn running(ready: bool) -> Value {
        json!({"name": "app", "ready": ready, "restartCount": 0, "started": true,
               "state": {"running": {"startedAt": "2024-05-01T11:50:05Z"}}})
    }

    fn status_and_ready(p: &Value) -> (String, String) {
        let c = cells(p, now());
        (c[2].as_str().unwrap().into(), c[1].as_str().unwrap().into())
    }

    #[test]
    fn status_column_follows_upstream_reason_logic() {
        let crash = json!({"name": "app", "ready": false, "restartCount": 5,
            "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}},
            "lastState": {"terminated": {"exitCode": 1, "reason": "Error",
                                         "finishedAt": "2024-05-01T11:55:00Z"}}});
        let cases: Vec<(&str, Value, &str, &str)> = vec![
            (
                "running",
                json!({"phase": "Running", "containerStatuses": [running(true)],
                "conditions": [{"type": "Ready", "status": "True"}]}),
                "Running",
                "1/1",
            ),
            (
                "pending unscheduled",
                json!({"phase": "Pending"}),
                "Pending",
                "0/1",
            ),
            (
                "container creating",
                json!({"phase": "Pending", "containerStatuses": [
                {"name": "app", "ready": false, "restartCount": 0,
                 "state": {"waiting": {"reason": "ContainerCreating"}}}]}),
                "ContainerCreating",
                "0/1",
            ),
            (
                "crash loop",
                json!({"phase": "Running", "containerStatuses": [crash]}),
                "CrashLoopBackOff",
                "0/1",
            ),
            (
                "image pull",
                json!({"phase": "Pending", "containerStatuses": [
                {"name": "app", "ready": false, "restartCount": 0,
                 "state": {"waiting": {"reason": "ErrImagePull"}}}]}),
                "ErrImagePull",
                "0/1",
            ),
            (
                "completed",
                json!({"phase": "Succeeded", "containerStatuses": [
                {"name": "app", "ready": false, "restartCount": 0,
                 "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}),
                "Completed",
                "0/1",
            ),
            (
                "error",
                json!({"phase": "Failed", "containerStatuses": [
                {"name": "app", "ready": false, "restartCount": 0,
                 "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]}),
                "Error",
                "0/1",
            ),
            (
                "signal without reason",
                json!({"phase": "Failed", "containerStatuses": [
                {"name": "app", "restartCount": 0,
                 "state": {"terminated": {"exitCode": 137, "signal": 9}}}]}),
                "Signal:9",
                "0/1",
            ),
            (
                "exit code without reason",
                json!({"phase": "Failed", "containerStatuses": [
                {"name": "app", "restartCount": 0,
                 "state": {"terminated": {"exitCode": 3}}}]}),
                "ExitCode:3",
                "0/1",
            ),
            (
                "pod reason wins over phase",
                json!({"phase": "Failed", "reason": "Evicted"}),
                "Evicted",
                "0/1",
            ),
            (
                "scheduling gated",
                json!({"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}),
                "SchedulingGated",
                "0/1",
            ),
        ];
        for (what, status, want_status, want_ready) in cases {
            let got = status_and_ready(&pod(status));
            assert_eq!(
                got,
                (want_status.to_string(), want_ready.to_string()),
                "{what}"
            );
        }
    }

    fn with_init(status: Value, restart_policy: Option<&str>) -> Value {
        let mut p = pod(status);
        let mut init = json!({"name": "init", "image": "busybox:1.28"});
        if let Some(rp) = restart_policy {
            init["restartPolicy"] = json!(rp);
        }
        p["spec"]["initContainers"] = json!([init]);
        p
    }

    #[test]
    fn init_containers_report_progress_and_failures() {
        let waiting_app = json!({"name": "app", "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": "PodInitializing"}}});
        let cases: Vec<(&str, Value, &str)> = vec![
            (
                "init running",
                json!({"name": "init", "ready": false, "restartCount": 0,
                "state": {"running": {"startedAt": "2024-05-01T11:50:01Z"}}}),
                "Init:0/1",
            ),
            (
                "init crash loop",
                json!({"name": "init", "ready": false, "restartCount": 3,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error",
                                             "finishedAt": "2024-05-01T11:58:00Z"}}}),
                "Init:CrashLoopBackOff",
            ),
            (
                "init failed",
                json!({"name": "init", "restartCount": 0,
                "state": {"terminated": {"exitCode": 2, "reason": "Error"}}}),
                "Init:Error",
            ),
            (
                "init exit code",
                json!({"name": "init", "restartCount": 0,
                "state": {"terminated": {"exitCode": 2}}}),
                "Init:ExitCode:2",
            ),
            (
                "init waiting to start",
                json!({"name": "init", "restartCount": 0,
                "state": {"waiting": {"reason": "PodInitializing"}}}),
                "Init:0/1",
            ),
        ];
        for (what, init_status, want) in cases {
            let p = with_init(
                json!({"phase": "Pending", "initContainerStatuses": [init_status],
                       "containerStatuses": [waiting_app.clone()]}),
                None,
            );
            assert_eq!(cells(&p, now())[2], json!(want), "{what}");
        }
        // Restarts of a failing init container are counted while the pod initializes.
        let crash = with_init(
            json!({"phase": "Pending", "initContainerStatuses": [
                {"name": "init", "restartCount": 3,
                 "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                 "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2024-05-01T11:58:00Z"}}}]}),
            None,
        );
        assert_eq!(cells(&crash, now())[3], json!("3 (2m ago)"));
    }

    #[test]
    fn a_finished_init_container_lets_the_main_containers_speak() {
        let p = with_init(
            json!({"phase": "Running",
                   "initContainerStatuses": [{"name": "init", "restartCount": 1,
                       "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
                       "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2024-05-01T11:51:00Z"}}}],
                   "containerStatuses": [running(true)],
                   "conditions": [{"type": "Initialized", "status": "True"},
                                  {"type": "Ready", "status": "True"}]}),
            None,
        );
        let c = cells(&p, now());
        assert_eq!(c[1], json!("1/1"));
        assert_eq!(c[2], json!("Running"));
        // Restarts of ordinary init containers stop counting once the pod is initialized.
        assert_eq!(c[3], json!("0"));
    }

    #[test]
    fn sidecars_count_towards_ready_and_restarts() {
        let p = with_init(
            json!({"phase": "Running",
                   "initContainerStatuses": [{"name": "init", "ready": true, "started": true,
                       "restartCount": 2,
                       "state": {"running": {"startedAt": "2024-05-01T11:56:00Z"}},
                       "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2024-05-01T11:56:00Z"}}}],
                   "containerStatuses": [running(true)],
                   "conditions": [{"type": "Initialized", "status": "True"},
                                  {"type": "Ready", "status": "True"}]}),
            Some("Always"),
        );
        let c = cells(&p, now());
        assert_eq!(c[1], json!("2/2"));
        assert_eq!(c[2], json!("Running"));
        assert_eq!(c[3], json!("2 (4m ago)"));
    }

    #[test]
    fn a_completed_container_beside_a_running_one_is_running_or_not_ready() {
        let status = |ready_condition: &str| {
            let mut p = pod(json!({"phase": "Running",
                "containerStatuses": [
                    running(true),
                    {"name": "job", "ready": false, "restartCount": 0,
                     "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}],
                "conditions": [{"type": "Ready", "status": ready_condition}]}));
            p["spec"]["containers"] = json!([{"name": "app"}, {"name": "job"}]);
            cells(&p, now())[2].clone()
        };
        assert_eq!(status("True"), json!("Running"));
        assert_eq!(status("False"), json!("NotReady"));
    }

    #[test]
    fn restarts_show_when_the_last_one_happened() {
        let mut c = running(true);
        c["restartCount"] = json!(5);
        c["lastState"] = json!({"terminated": {"exitCode": 1, "reason": "Error",
            "finishedAt": "2024-05-01T11:55:00Z"}});
        let p = pod(json!({"phase": "Running", "containerStatuses": [c]}));
        assert_eq!(cells(&p, now())[3], json!("5 (5m ago)"));
        let fresh = pod(json!({"phase": "Running", "containerStatuses": [running(true)]}));
        assert_eq!(cells(&fresh, now())[3], json!("0"));
    }

    #[test]
    fn deletion_shows_terminating_unless_finished_or_node_lost() {
        let mut p = pod(json!({"phase": "Running", "containerStatuses": [running(true)]}));
        p["metadata"]["deletionTimestamp"] = json!("2024-05-01T11:59:00Z");
        assert_eq!(cells(&p, now())[2], json!("Terminating"));
        p["status"]["reason"] = json!("NodeLost");
        assert_eq!(cells(&p, now())[2], json!("Unknown"));
        let mut done = pod(json!({"phase": "Succeeded", "containerStatuses": [
            {"name": "app", "restartCount": 0,
             "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}));
        done["metadata"]["deletionTimestamp"] = json!("2024-05-01T11:59:00Z");
        assert_eq!(cells(&done, now())[2], json!("Completed"));
    }

    #[test]
    fn wide_cells_show_ip_node_nominated_node_and_gates() {
        let mut p = pod(json!({"phase": "Running", "podIP": "10.42.0.7",
            "podIPs": [{"ip": "10.42.0.7"}], "containerStatuses": [running(true)],
            "conditions": [{"type": "example.com/gate", "status": "True"}]}));
        let c = cells(&p, now());
        assert_eq!(c[0], json!("web-0"));
        assert_eq!(c[4], json!("10m"));
        assert_eq!(
            &c[5..],
            &[
                json!("10.42.0.7"),
                json!("node-1"),
                json!("<none>"),
                json!("<none>")
            ]
        );
        p["spec"]["readinessGates"] =
            json!([{"conditionType": "example.com/gate"}, {"conditionType": "example.com/other"}]);
        p["spec"]["nodeName"] = json!(null);
        p["status"]["podIPs"] = json!(null);
        let c = cells(&p, now());
        assert_eq!(c[5], json!("10.42.0.7"));
        assert_eq!(c[6], json!("<none>"));
        assert_eq!(c[8], json!("1/2"));
        assert_eq!(c.len(), columns().len());
    }

    #[test]
    fn finished_pods_carry_a_completed_row_condition() {
        let done = pod(json!({"phase": "Succeeded"}));
        assert_eq!(row_conditions(&done).unwrap()[0]["reason"], "Succeeded");
        assert_eq!(
            row_conditions(&pod(json!({"phase": "Failed"}))).unwrap()[0]["type"],
            "Completed"
        );
        assert!(row_conditions(&pod(json!({"phase": "Running"}))).is_none());
    }
}
