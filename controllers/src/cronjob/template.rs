//! Planner: pure, no I/O.
//!
//! The Job a CronJob creates for a scheduled time (upstream `getJobFromTemplate2`): named
//! `<cronjob>-<scheduled time in minutes since the epoch>` (the name is the lock that keeps a
//! time from running twice), the template's labels and annotations plus
//! `batch.kubernetes.io/cronjob-scheduled-timestamp` (RFC 3339 in the CronJob's `timeZone`,
//! UTC without one), controlled by the CronJob, with the template's spec.

use super::view::{ActiveRef, CronJob, Job};
use crate::views::array_at;
use crate::workload::Stored;
use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde_json::{Map, Value, json};

pub const SCHEDULED_TIMESTAMP: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// The Job name for a scheduled time: a name of at most 52 characters stays within 63.
pub fn job_name(cron_job: &str, scheduled: Timestamp) -> String {
    format!("{cron_job}-{}", scheduled.as_second().div_euclid(60))
}

/// Go's `time.RFC3339` of `t` in `zone`: `Z` for a zero offset, `+05:30` otherwise.
pub fn rfc3339_in(t: Timestamp, zone: &TimeZone) -> String {
    let zoned = t.to_zoned(zone.clone());
    if zoned.offset().seconds() == 0 {
        zoned.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
    } else {
        zoned.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string()
    }
}

/// The Job for `scheduled`. `raw` is the stored CronJob (for its template); `zone` is the zone
/// of its `timeZone` field (UTC without one).
pub fn job(cj: &CronJob, raw: &Value, scheduled: Timestamp, zone: &TimeZone) -> Value {
    let template = raw
        .pointer("/spec/jobTemplate")
        .cloned()
        .unwrap_or_default();
    let map_at = |p: &str| {
        template
            .pointer(p)
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    };
    let labels = map_at("/metadata/labels");
    let mut annotations: Map<String, Value> = map_at("/metadata/annotations");
    annotations.insert(
        SCHEDULED_TIMESTAMP.to_string(),
        json!(rfc3339_in(scheduled, zone)),
    );
    let mut metadata = json!({
        "name": job_name(&cj.name, scheduled),
        "namespace": cj.namespace,
        "annotations": annotations,
        "ownerReferences": [{
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "name": cj.name,
            "uid": cj.uid,
            "controller": true,
            "blockOwnerDeletion": true,
        }],
    });
    if !labels.is_empty() {
        metadata["labels"] = Value::Object(labels);
    }
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": template.get("spec").cloned().unwrap_or_else(|| json!({})),
    })
}

/// The zone the Job's scheduled-timestamp annotation is written in: `spec.timeZone`, or UTC
/// (also for a zone `load` does not know).
pub fn zone<E>(cj: &CronJob, load: impl FnOnce(&str) -> Result<TimeZone, E>) -> TimeZone {
    cj.time_zone
        .as_deref()
        .and_then(|tz| load(tz).ok())
        .unwrap_or(TimeZone::UTC)
}

/// What a Job found under the scheduled Job's name (a Job of this time was made already) is
/// to the CronJob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// Ours, running and missing from the active list (the status write after its creation
    /// failed): it is listed, not made.
    List,
    /// Ours and finished (a later pass of the same scheduled minute: `@every 10s` names a Job by
    /// its minute): the run happened, but listing it again would make every later pass see it
    /// complete anew.
    Finished,
    /// Ours and listed already, or not ours: nothing to do.
    Leave,
}

/// What the Job `existing`, found under the scheduled Job's name, is to `cj`.
pub fn existing(cj: &CronJob, existing: &Value) -> Existing {
    let ours = array_at(existing, "/metadata/ownerReferences")
        .any(|r| r["controller"] == json!(true) && r["uid"] == json!(cj.uid));
    // Finished as the planner reads every Job: a Complete or Failed condition that is True.
    let finished = Job::from_value(existing).is_ok_and(|j| j.finished.is_some());
    let uid = existing.pointer("/metadata/uid").and_then(Value::as_str);
    let listed = cj.status.active.iter().any(|r| Some(r.uid.as_str()) == uid);
    match (ours, listed, finished) {
        (true, false, false) => Existing::List,
        (true, false, true) => Existing::Finished,
        _ => Existing::Leave,
    }
}

/// The `status.active` entry for a created Job (upstream `ref.GetReference`).
pub fn active_ref(job: &Value) -> ActiveRef {
    let s = |p: &str| job.pointer(p).cloned().unwrap_or(Value::Null);
    let raw = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": s("/metadata/name"),
        "namespace": s("/metadata/namespace"),
        "uid": s("/metadata/uid"),
        "resourceVersion": s("/metadata/resourceVersion"),
    });
    let text = |k: &str| raw[k].as_str().unwrap_or_default().to_string();
    ActiveRef {
        name: text("name"),
        uid: text("uid"),
        raw,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cronjob::view::CronJob;
    use crate::workload::Stored;

    fn cron_job() -> (CronJob, Value) {
        let raw = json!({
            "apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "hello", "namespace": "default", "uid": "u-1",
                "creationTimestamp": "2024-05-01T00:00:00Z"},
            "spec": {"schedule": "* * * * *", "jobTemplate": {
                "metadata": {"labels": {"team": "a"}, "annotations": {"note": "x"}},
                "spec": {"template": {"spec": {"restartPolicy": "OnFailure",
                    "containers": [{"name": "c", "image": "busybox"}]}}}}},
        });
        (CronJob::from_value(&raw).expect("cron job"), raw)
    }

    #[test]
    fn job_names_carry_the_scheduled_minute_since_the_epoch() {
        let t: Timestamp = "2024-05-01T12:34:00Z".parse().expect("time");
        assert_eq!(job_name("hello", t), "hello-28576114");
        // Upstream reserves 11 characters (from its seconds-based names); minutes need 9 today.
        assert_eq!(job_name(&"a".repeat(52), t).len(), 61);
    }

    #[test]
    fn the_scheduled_timestamp_is_rfc3339_in_the_time_zone() {
        let t: Timestamp = "2024-05-01T12:34:00Z".parse().expect("time");
        assert_eq!(rfc3339_in(t, &TimeZone::UTC), "2024-05-01T12:34:00Z");
        let kolkata = TimeZone::get("Asia/Kolkata").expect("zone");
        assert_eq!(rfc3339_in(t, &kolkata), "2024-05-01T18:04:00+05:30");
        let london = TimeZone::get("Europe/London").expect("zone");
        let winter: Timestamp = "2024-01-01T00:00:00Z".parse().expect("time");
        assert_eq!(rfc3339_in(winter, &london), "2024-01-01T00:00:00Z");
    }

    #[test]
    fn jobs_copy_the_template_and_are_controlled_by_the_cron_job() {
        let (cj, raw) = cron_job();
        let t: Timestamp = "2024-05-01T12:34:00Z".parse().expect("time");
        let job = job(&cj, &raw, t, &TimeZone::UTC);
        assert_eq!(job["metadata"]["name"], "hello-28576114");
        assert_eq!(job["metadata"]["labels"], json!({"team": "a"}));
        assert_eq!(
            job["metadata"]["annotations"],
            json!({"note": "x", SCHEDULED_TIMESTAMP: "2024-05-01T12:34:00Z"})
        );
        assert_eq!(
            job["metadata"]["ownerReferences"],
            json!([{"apiVersion": "batch/v1", "kind": "CronJob", "name": "hello", "uid": "u-1",
                "controller": true, "blockOwnerDeletion": true}])
        );
        assert_eq!(job["spec"], raw["spec"]["jobTemplate"]["spec"]);
    }

    #[test]
    fn an_existing_job_is_listed_only_when_it_is_ours_running_and_not_listed_yet() {
        use Existing::{Finished, Leave, List};
        let (mut cj, _) = cron_job();
        let job = |owner: &str, controller: bool, uid: &str| {
            json!({"metadata": {"name": "hello-1", "uid": uid, "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "CronJob", "name": "hello", "uid": owner,
                    "controller": controller}]}})
        };
        let finished = |mut job: Value, kind: &str, status: &str| {
            job["status"] = json!({"conditions": [{"type": kind, "status": status}]});
            job
        };
        cj.status.active.push(ActiveRef {
            name: "hello-0".into(),
            uid: "listed".into(),
            raw: json!({}),
        });
        let cases = [
            (job("u-1", true, "new"), List),
            (job("u-1", true, "listed"), Leave),
            (job("u-1", false, "new"), Leave),
            (job("other", true, "new"), Leave),
            (
                json!({"metadata": {"name": "hello-1", "uid": "new"}}),
                Leave,
            ),
            (
                finished(job("u-1", true, "new"), "Complete", "True"),
                Finished,
            ),
            (
                finished(job("u-1", true, "new"), "Failed", "True"),
                Finished,
            ),
            (finished(job("u-1", true, "new"), "Complete", "False"), List),
            (finished(job("u-1", true, "new"), "Suspended", "True"), List),
            (
                finished(job("other", true, "new"), "Complete", "True"),
                Leave,
            ),
        ];
        for (found, want) in cases {
            assert_eq!(existing(&cj, &found), want, "{found}");
        }
    }

    #[test]
    fn the_annotation_zone_is_the_time_zone_or_utc() {
        let (mut cj, _) = cron_job();
        let load = |name: &str| match name {
            "Asia/Kolkata" => Ok(TimeZone::fixed(jiff::tz::offset(5))),
            _ => Err(()),
        };
        assert_eq!(zone(&cj, load), TimeZone::UTC);
        cj.time_zone = Some("Asia/Kolkata".into());
        assert_eq!(zone(&cj, load), TimeZone::fixed(jiff::tz::offset(5)));
        cj.time_zone = Some("Mars/Olympus".into());
        assert_eq!(zone(&cj, load), TimeZone::UTC);
    }
}
