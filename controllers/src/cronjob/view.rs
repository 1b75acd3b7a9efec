//! What the CronJob controller reads of a CronJob and of its Jobs, decoded once per pass from
//! the informers' objects, and the status it writes back.
//!
//! Planner: pure, no I/O.

use crate::views::{array_at, str_at};
use crate::workload::Stored;
use berth_shared::k8s_openapi::api::batch::v1 as batch;
use jiff::Timestamp;
use serde_json::{Value, json};

/// `spec.concurrencyPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Concurrency {
    Allow,
    Forbid,
    Replace,
}

/// An entry of `status.active`: an ObjectReference to a Job.
#[derive(Debug, Clone, PartialEq)]
pub struct ActiveRef {
    pub name: String,
    pub uid: String,
    /// The reference as stored, written back unchanged.
    pub raw: Value,
}

/// A CronJob, as one pass sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct CronJob {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub created: Timestamp,
    pub deleting: bool,
    pub schedule: String,
    pub time_zone: Option<String>,
    pub suspend: bool,
    pub concurrency: Concurrency,
    pub starting_deadline_seconds: Option<i64>,
    pub successful_jobs_history_limit: Option<i32>,
    pub failed_jobs_history_limit: Option<i32>,
    pub status: Status,
}

/// The status fields the controller owns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Status {
    pub active: Vec<ActiveRef>,
    pub last_schedule_time: Option<Timestamp>,
    pub last_successful_time: Option<Timestamp>,
}

/// How a Job ended (its `Complete` or `Failed` condition is True).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finished {
    Complete,
    Failed,
}

impl Finished {
    pub fn as_str(self) -> &'static str {
        match self {
            Finished::Complete => "Complete",
            Finished::Failed => "Failed",
        }
    }
}

/// A Job the CronJob controls.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub name: String,
    pub uid: String,
    pub deleting: bool,
    pub finished: Option<Finished>,
    pub start_time: Option<Timestamp>,
    pub completion_time: Option<Timestamp>,
}

/// Why an object could not be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot decode {kind}: {source}")]
pub struct DecodeError {
    kind: &'static str,
    source: serde_json::Error,
}

impl From<serde_json::Error> for DecodeError {
    fn from(source: serde_json::Error) -> DecodeError {
        DecodeError {
            kind: "object",
            source,
        }
    }
}

/// Decodes a stored object of `kind`.
fn decode<T: serde::de::DeserializeOwned>(kind: &'static str, v: &Value) -> Result<T, DecodeError> {
    serde_json::from_value(v.clone()).map_err(|source| DecodeError { kind, source })
}

impl Stored for CronJob {
    type Error = DecodeError;
    fn from_value(v: &Value) -> Result<CronJob, DecodeError> {
        let cj: batch::CronJob = decode("CronJob", v)?;
        let meta = cj.metadata;
        let spec = cj.spec.unwrap_or_default();
        let status = cj.status.unwrap_or_default();
        let concurrency = match spec.concurrency_policy.as_deref() {
            Some("Forbid") => Concurrency::Forbid,
            Some("Replace") => Concurrency::Replace,
            _ => Concurrency::Allow,
        };
        let active = array_at(v, "/status/active")
            .map(|r| ActiveRef {
                name: str_at(r, "/name").to_string(),
                uid: str_at(r, "/uid").to_string(),
                raw: r.clone(),
            })
            .collect();
        Ok(CronJob {
            namespace: meta.namespace.unwrap_or_default(),
            name: meta.name.unwrap_or_default(),
            uid: meta.uid.unwrap_or_default(),
            created: meta
                .creation_timestamp
                .map_or(Timestamp::UNIX_EPOCH, |t| t.0),
            deleting: meta.deletion_timestamp.is_some(),
            schedule: spec.schedule,
            time_zone: spec.time_zone,
            suspend: spec.suspend == Some(true),
            concurrency,
            starting_deadline_seconds: spec.starting_deadline_seconds,
            successful_jobs_history_limit: spec.successful_jobs_history_limit,
            failed_jobs_history_limit: spec.failed_jobs_history_limit,
            status: Status {
                active,
                last_schedule_time: status.last_schedule_time.map(|t| t.0),
                last_successful_time: status.last_successful_time.map(|t| t.0),
            },
        })
    }
}

impl Status {
    /// The status as written: `active`, `lastScheduleTime` and `lastSuccessfulTime`, each
    /// left out when empty.
    pub fn to_value(&self) -> Value {
        let mut s = json!({});
        if !self.active.is_empty() {
            let active: Vec<Value> = self.active.iter().map(|r| r.raw.clone()).collect();
            s["active"] = json!(active);
        }
        for (k, t) in [
            ("lastScheduleTime", self.last_schedule_time),
            ("lastSuccessfulTime", self.last_successful_time),
        ] {
            if let Some(t) = t {
                s[k] = json!(t.to_string());
            }
        }
        s
    }
}

impl Stored for Job {
    type Error = DecodeError;
    fn from_value(v: &Value) -> Result<Job, DecodeError> {
        let job: batch::Job = decode("Job", v)?;
        let status = job.status.unwrap_or_default();
        let finished = status.conditions.iter().flatten().find_map(|c| {
            let finished = match c.type_.as_str() {
                "Complete" => Finished::Complete,
                "Failed" => Finished::Failed,
                _ => return None,
            };
            (c.status == "True").then_some(finished)
        });
        Ok(Job {
            name: job.metadata.name.unwrap_or_default(),
            uid: job.metadata.uid.unwrap_or_default(),
            deleting: job.metadata.deletion_timestamp.is_some(),
            finished,
            start_time: status.start_time.map(|t| t.0),
            completion_time: status.completion_time.map(|t| t.0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_is_written_with_only_the_fields_it_has() {
        let t: Timestamp = "2026-11-25T10:00:00Z".parse().expect("time");
        let job = ActiveRef {
            name: "j".into(),
            uid: "u".into(),
            raw: json!({"kind": "Job", "name": "j", "uid": "u"}),
        };
        let cases = [
            (Status::default(), json!({})),
            (
                Status {
                    last_schedule_time: Some(t),
                    ..Status::default()
                },
                json!({"lastScheduleTime": "2026-11-25T10:00:00Z"}),
            ),
            (
                Status {
                    active: vec![job.clone()],
                    last_schedule_time: Some(t),
                    last_successful_time: Some(t),
                },
                json!({"active": [job.raw], "lastScheduleTime": "2026-11-25T10:00:00Z",
                    "lastSuccessfulTime": "2026-11-25T10:00:00Z"}),
            ),
        ];
        for (status, want) in cases {
            assert_eq!(status.to_value(), want, "{status:?}");
        }
    }
}
