//! Pod conditions the control plane writes on pods it disrupts (`DisruptionTarget`, set before
//! an eviction, a taint-based eviction or a garbage collection), with upstream's
//! `UpdatePodCondition` rule: the transition time moves only when the status does.

use serde_json::{Value, json};

/// The condition marking a pod about to be deleted by a disruption.
pub const DISRUPTION_TARGET: &str = "DisruptionTarget";

/// Sets condition `type_` of the pod `pod` (a whole Pod as JSON); whether anything changed.
pub fn set_pod_condition(
    pod: &mut Value,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: &str,
) -> bool {
    if !pod.get("status").is_some_and(Value::is_object) {
        pod["status"] = json!({});
    }
    let status_obj = &mut pod["status"];
    if !status_obj.get("conditions").is_some_and(Value::is_array) {
        status_obj["conditions"] = json!([]);
    }
    let Some(conditions) = status_obj["conditions"].as_array_mut() else {
        return false;
    };
    let existing = conditions
        .iter_mut()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_));
    match existing {
        Some(c) => {
            let same = |k: &str, v: &str| c.get(k).and_then(Value::as_str) == Some(v);
            if same("status", status) && same("reason", reason) && same("message", message) {
                return false;
            }
            if !same("status", status) {
                c["lastTransitionTime"] = json!(now);
            }
            c["status"] = json!(status);
            c["reason"] = json!(reason);
            c["message"] = json!(message);
            true
        }
        None => {
            conditions.push(json!({"type": type_, "status": status, "reason": reason,
                "message": message, "lastProbeTime": null, "lastTransitionTime": now}));
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condition_is_added_or_updated_and_its_time_moves_with_its_status() {
        let mut pod = json!({"metadata": {"name": "p"}});
        assert!(set_pod_condition(
            &mut pod,
            DISRUPTION_TARGET,
            "True",
            "R",
            "m",
            "t1"
        ));
        assert_eq!(pod["status"]["conditions"][0]["lastTransitionTime"], "t1");
        assert!(
            !set_pod_condition(&mut pod, DISRUPTION_TARGET, "True", "R", "m", "t2"),
            "unchanged"
        );
        assert!(set_pod_condition(
            &mut pod,
            DISRUPTION_TARGET,
            "True",
            "R2",
            "m",
            "t3"
        ));
        assert_eq!(
            pod["status"]["conditions"][0]["lastTransitionTime"], "t1",
            "same status"
        );
        assert!(set_pod_condition(
            &mut pod,
            DISRUPTION_TARGET,
            "False",
            "R2",
            "m",
            "t4"
        ));
        assert_eq!(pod["status"]["conditions"][0]["lastTransitionTime"], "t4");
        assert_eq!(
            pod["status"]["conditions"].as_array().map(Vec::len),
            Some(1)
        );
    }
}
