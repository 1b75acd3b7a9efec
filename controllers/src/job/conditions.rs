//! Job conditions: their types and reasons as upstream spells them, upstream's
//! `ensureJobConditionStatus`, whether a Job is finished (also for the CronJob and
//! TTL-after-finished controllers), and the finish transitions of v1.31: a Job that meets its
//! success or failure criteria first gets the interim `SuccessCriteriaMet` / `FailureTarget`
//! condition (its pods are terminated meanwhile), and the terminal `Complete` / `Failed` one,
//! with the same reason and message, only once no pod is uncounted and none is terminating.
//!
//! Planner: pure, no I/O.

use berth_shared::k8s_openapi::api::batch::v1 as batch;
use jiff::Timestamp;
use serde_json::Value;

pub const COMPLETE: &str = "Complete";
pub const FAILED: &str = "Failed";
pub const FAILURE_TARGET: &str = "FailureTarget";
pub const SUCCESS_CRITERIA_MET: &str = "SuccessCriteriaMet";
pub const SUSPENDED: &str = "Suspended";

pub const BACKOFF_LIMIT_EXCEEDED: &str = "BackoffLimitExceeded";
pub const DEADLINE_EXCEEDED: &str = "DeadlineExceeded";
pub const POD_FAILURE_POLICY: &str = "PodFailurePolicy";
pub const MAX_FAILED_INDEXES_EXCEEDED: &str = "MaxFailedIndexesExceeded";
pub const FAILED_INDEXES: &str = "FailedIndexes";
pub const SUCCESS_POLICY: &str = "SuccessPolicy";
pub const COMPLETIONS_REACHED: &str = "CompletionsReached";

pub use crate::workload::status::stamp;

/// A condition that changed at `now`.
pub fn new_condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> batch::JobCondition {
    let at = stamp(now);
    let text = |s: &str| (!s.is_empty()).then(|| s.to_string());
    batch::JobCondition {
        type_: type_.into(),
        status: status.into(),
        reason: text(reason),
        message: text(message),
        last_probe_time: Some(at.clone()),
        last_transition_time: Some(at),
    }
}

pub fn find<'a>(list: &'a [batch::JobCondition], type_: &str) -> Option<&'a batch::JobCondition> {
    list.iter().find(|c| c.type_ == type_)
}

/// The condition of `type_` when it is True.
pub fn true_condition<'a>(
    list: &'a [batch::JobCondition],
    type_: &str,
) -> Option<&'a batch::JobCondition> {
    find(list, type_).filter(|c| c.status == "True")
}

/// Upstream `ensureJobConditionStatus`: sets the condition of `type_` (a new one only when it
/// is not False: from nothing to False means nothing); true when the list changed.
pub fn ensure(
    list: &mut Vec<batch::JobCondition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> bool {
    let wanted = new_condition(type_, status, reason, message, now);
    match list.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != wanted.status || c.reason != wanted.reason || c.message != wanted.message
            {
                *c = wanted;
                return true;
            }
            false
        }
        None if status != "False" => {
            list.push(wanted);
            true
        }
        None => false,
    }
}

/// How a Job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Complete,
    Failed,
}

/// A finished Job's outcome and when its condition became True.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    pub outcome: Outcome,
    pub at: Option<Timestamp>,
    pub reason: Option<String>,
}

/// Upstream `IsJobFinished` (+ the finish time the TTL controller counts from): a `Complete`
/// or `Failed` condition that is True.
pub fn finished(conditions: &[batch::JobCondition]) -> Option<Finished> {
    conditions.iter().find_map(|c| {
        let outcome = match c.type_.as_str() {
            COMPLETE => Outcome::Complete,
            FAILED => Outcome::Failed,
            _ => return None,
        };
        (c.status == "True").then(|| Finished {
            outcome,
            at: c.last_transition_time.as_ref().map(|t| t.0),
            reason: c.reason.clone(),
        })
    })
}

/// [`finished`] of a stored Job's JSON.
pub fn finished_value(job: &Value) -> Option<Finished> {
    let conditions: Vec<batch::JobCondition> = job
        .pointer("/status/conditions")
        .and_then(|c| serde_json::from_value(c.clone()).ok())
        .unwrap_or_default();
    finished(&conditions)
}

/// The terminal condition an interim one leads to: `FailureTarget` → `Failed`,
/// `SuccessCriteriaMet` → `Complete`, same reason and message.
pub fn terminal_for(interim: &batch::JobCondition, now: Timestamp) -> batch::JobCondition {
    let type_ = if interim.type_ == SUCCESS_CRITERIA_MET {
        COMPLETE
    } else {
        FAILED
    };
    new_condition(
        type_,
        "True",
        interim.reason.as_deref().unwrap_or_default(),
        interim.message.as_deref().unwrap_or_default(),
        now,
    )
}

/// Upstream `enactJobFinished`: adds the terminal condition (and, for `Complete`, the
/// completion time) once no pod is left uncounted or terminating; true when it did.
pub fn enact(
    status: &mut batch::JobStatus,
    terminal: &batch::JobCondition,
    terminating: i32,
    now: Timestamp,
) -> bool {
    let uncounted = status.uncounted_terminated_pods.as_ref().map_or(0, |u| {
        u.succeeded.as_ref().map_or(0, Vec::len) + u.failed.as_ref().map_or(0, Vec::len)
    });
    if uncounted > 0 || terminating > 0 {
        return false;
    }
    let list = status.conditions.get_or_insert_with(Vec::new);
    ensure(
        list,
        &terminal.type_,
        &terminal.status,
        terminal.reason.as_deref().unwrap_or_default(),
        terminal.message.as_deref().unwrap_or_default(),
        now,
    );
    if terminal.type_ == COMPLETE {
        status.completion_time = Some(stamp(now));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_shared::k8s_openapi::api::batch::v1::UncountedTerminatedPods;

    fn now() -> Timestamp {
        "2024-06-01T12:00:00.7Z".parse().unwrap()
    }

    fn types(s: &batch::JobStatus) -> Vec<(String, String)> {
        s.conditions
            .iter()
            .flatten()
            .map(|c| (c.type_.clone(), c.status.clone()))
            .collect()
    }

    #[test]
    fn interim_conditions_turn_terminal_only_when_no_pod_is_left() {
        let target = new_condition(FAILURE_TARGET, "True", BACKOFF_LIMIT_EXCEEDED, "m", now());
        let met = new_condition(
            SUCCESS_CRITERIA_MET,
            "True",
            COMPLETIONS_REACHED,
            "r",
            now(),
        );
        let uncounted = |n: usize| UncountedTerminatedPods {
            failed: (n > 0).then(|| vec!["u".to_string(); n]),
            succeeded: None,
        };
        let cases = [
            (
                "a failure with nothing left fails the Job",
                &target,
                0,
                0,
                Some(FAILED),
            ),
            ("a pod still terminating holds it", &target, 0, 1, None),
            ("an uncounted pod holds it", &target, 1, 0, None),
            (
                "success criteria with nothing left complete it",
                &met,
                0,
                0,
                Some(COMPLETE),
            ),
            (
                "success criteria wait for terminating pods",
                &met,
                0,
                2,
                None,
            ),
        ];
        for (name, interim, left, terminating, want) in cases {
            let mut status = batch::JobStatus {
                conditions: Some(vec![interim.clone()]),
                uncounted_terminated_pods: Some(uncounted(left)),
                ..Default::default()
            };
            let terminal = terminal_for(interim, now());
            let done = enact(&mut status, &terminal, terminating, now());
            assert_eq!(done, want.is_some(), "{name}");
            let mut expected = vec![(interim.type_.clone(), "True".to_string())];
            if let Some(t) = want {
                expected.push((t.to_string(), "True".to_string()));
                let c = find(status.conditions.as_deref().unwrap(), t).unwrap();
                assert_eq!(
                    (&c.reason, &c.message),
                    (&interim.reason, &interim.message),
                    "{name}"
                );
            }
            assert_eq!(types(&status), expected, "{name}");
            assert_eq!(
                status.completion_time.is_some(),
                want == Some(COMPLETE),
                "{name}"
            );
        }
    }

    #[test]
    fn ensuring_a_condition_adds_updates_or_leaves_it() {
        let mut list = Vec::new();
        let resumed = ("False", "JobResumed", "Job resumed");
        let suspended = ("True", "JobSuspended", "Job suspended");
        // (what is ensured, whether it changes the list, the list's length after, why)
        let steps = [
            (resumed, false, 0, "from nothing to False is no change"),
            (suspended, true, 1, "a new True condition is added"),
            (suspended, false, 1, "the same condition again is no change"),
            (resumed, true, 1, "a change of status updates it in place"),
        ];
        for ((status, reason, message), changed, len, why) in steps {
            let got = ensure(&mut list, SUSPENDED, status, reason, message, now());
            assert_eq!((got, list.len()), (changed, len), "{why}");
        }
        assert_eq!(list[0].status, "False");
        let at = list[0].last_transition_time.clone().unwrap().0;
        assert_eq!(at.to_string(), "2024-06-01T12:00:00Z", "whole seconds");
    }

    #[test]
    fn a_job_is_finished_by_a_true_complete_or_failed_condition() {
        let done = serde_json::json!({"status": {"conditions": [
            {"type": "SuccessCriteriaMet", "status": "True"},
            {"type": "Complete", "status": "True", "lastTransitionTime": "2024-06-01T12:00:00Z"}]}});
        let f = finished_value(&done).unwrap();
        assert_eq!(f.outcome, Outcome::Complete);
        assert_eq!(
            f.at.map(|t| t.to_string()).as_deref(),
            Some("2024-06-01T12:00:00Z")
        );
        let target = serde_json::json!({"status": {"conditions": [
            {"type": "FailureTarget", "status": "True"}, {"type": "Failed", "status": "False"}]}});
        assert_eq!(finished_value(&target), None, "interim only");
        assert_eq!(finished_value(&serde_json::json!({})), None);
    }
}
