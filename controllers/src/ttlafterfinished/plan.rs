//! When a finished Job's time is up (upstream `processTTL`/`timeLeft`): a Job with
//! `spec.ttlSecondsAfterFinished` that is `Complete` or `Failed` expires that many seconds after
//! its condition's `lastTransitionTime`. A Job not finished, without a TTL, or already being
//! deleted is left alone; one that finished "in the future" (clock skew) waits until then plus
//! its TTL, as upstream defers it.
//!
//! Worked example: `ttlSecondsAfterFinished: 5`, `Complete` at 12:00:00; a pass at 12:00:01.3
//! asks to run again in 3.7 s and one at 12:00:05 deletes the Job.
//!
//! Planner: pure, no I/O.

use crate::job::conditions;
use jiff::{SignedDuration, Timestamp};
use serde_json::Value;
use std::time::Duration;

/// What to do about one Job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Not (yet) a candidate: no TTL, not finished, or being deleted.
    Keep,
    /// Look again after this long.
    Wait(Duration),
    /// The TTL expired.
    Delete,
}

/// Why an expiry cannot be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TtlError {
    #[error("unable to find the time when the Job {0} finished")]
    NoFinishTime(String),
}

/// The decision for the stored Job `job` at `now`.
pub fn decide(job: &Value, now: Timestamp) -> Result<Decision, TtlError> {
    let Some(ttl) = job
        .pointer("/spec/ttlSecondsAfterFinished")
        .and_then(Value::as_i64)
    else {
        return Ok(Decision::Keep);
    };
    if job.pointer("/metadata/deletionTimestamp").is_some() {
        return Ok(Decision::Keep);
    }
    let Some(finished) = conditions::finished_value(job) else {
        return Ok(Decision::Keep);
    };
    let name = job
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let at = finished
        .at
        .ok_or_else(|| TtlError::NoFinishTime(name.to_string()))?;
    let expires = at + SignedDuration::from_secs(ttl);
    match Duration::try_from(expires.duration_since(now)) {
        Ok(left) if !left.is_zero() => Ok(Decision::Wait(left)),
        _ => Ok(Decision::Delete),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> Timestamp {
        "2024-06-01T12:00:01.3Z".parse().unwrap()
    }

    fn job(ttl: Value, conditions: Value, deleting: bool) -> Value {
        let mut j = json!({"metadata": {"name": "pi"}, "spec": {"ttlSecondsAfterFinished": ttl},
            "status": {"conditions": conditions}});
        if deleting {
            j["metadata"]["deletionTimestamp"] = json!("2024-06-01T12:00:00Z");
        }
        j
    }

    fn done(type_: &str, at: &str) -> Value {
        json!([{"type": type_, "status": "True", "lastTransitionTime": at}])
    }

    #[test]
    fn a_finished_job_expires_its_ttl_after_its_condition() {
        let at = "2024-06-01T12:00:00Z";
        let cases = [
            (
                "complete, time left",
                job(json!(5), done("Complete", at), false),
                Decision::Wait(Duration::from_millis(3700)),
            ),
            (
                "failed counts the same",
                job(json!(5), done("Failed", at), false),
                Decision::Wait(Duration::from_millis(3700)),
            ),
            (
                "the TTL is up",
                job(json!(1), done("Complete", at), false),
                Decision::Delete,
            ),
            (
                "a TTL of 0 expires at once",
                job(json!(0), done("Complete", at), false),
                Decision::Delete,
            ),
            (
                "no TTL, never",
                job(Value::Null, done("Complete", at), false),
                Decision::Keep,
            ),
            (
                "not finished yet",
                job(
                    json!(5),
                    json!([{"type": "FailureTarget", "status": "True"}]),
                    false,
                ),
                Decision::Keep,
            ),
            (
                "already being deleted",
                job(json!(0), done("Complete", at), true),
                Decision::Keep,
            ),
            (
                "finished in the future: deferred",
                job(json!(5), done("Complete", "2024-06-01T12:00:10Z"), false),
                Decision::Wait(Duration::from_millis(13700)),
            ),
        ];
        for (name, j, want) in cases {
            assert_eq!(decide(&j, now()), Ok(want), "{name}");
        }
        let no_time = job(
            json!(5),
            json!([{"type": "Complete", "status": "True"}]),
            false,
        );
        assert_eq!(
            decide(&no_time, now()),
            Err(TtlError::NoFinishTime("pi".into()))
        );
    }
}
