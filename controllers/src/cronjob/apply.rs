//! The writes of a pass: Job deletions and the Job creation with their events, and the status
//! (`active`, `lastScheduleTime`, `lastSuccessfulTime`), written only when it changed.

use super::plan::{Action, Kind, Plan};
use super::template;
use super::view::{ActiveRef, CronJob, Status};
use super::{Controller, CronJobError};
use crate::workload::{self, status::Target};
use berth_registry::events::EventType;
use berth_registry::{DeleteOptions, Propagation, RegistryError, WriteOptions};
use berth_shared::cron::load_zone;
use berth_shared::resource::{CRON_JOBS, JOBS};
use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde_json::{Value, json};

impl Controller {
    fn record(&self, raw: &Value, kind: Kind, reason: &str, message: &str) {
        let t = match kind {
            Kind::Normal => EventType::Normal,
            Kind::Warning => EventType::Warning,
        };
        workload::record(&self.recorder, raw, t, reason, message);
    }

    pub(super) fn apply(&self, cj: &CronJob, raw: &Value, plan: Plan) -> Result<(), CronJobError> {
        let mut status = plan.status;
        for action in plan.actions {
            match action {
                Action::Event {
                    kind,
                    reason,
                    message,
                } => self.record(raw, kind, reason, &message),
                Action::DeleteJob { name, uid, .. } => {
                    self.apply_delete(cj, raw, &name)?;
                    status.active.retain(|r| r.uid != uid);
                }
                Action::CreateJob { scheduled } => {
                    if let Some(r) = self.apply_create(cj, raw, scheduled)? {
                        status.active.push(r);
                        status.last_schedule_time = Some(scheduled);
                    }
                }
            }
        }
        if status != cj.status {
            self.apply_status(cj, &status)?;
        }
        Ok(())
    }

    fn apply_delete(&self, cj: &CronJob, raw: &Value, name: &str) -> Result<(), CronJobError> {
        let opts = DeleteOptions {
            propagation_policy: Some(Propagation::Background),
            ..DeleteOptions::default()
        };
        match self.registry.delete(JOBS, Some(&cj.namespace), name, &opts) {
            Ok(_) | Err(RegistryError::NotFound { .. }) => {
                self.record(
                    raw,
                    Kind::Normal,
                    "SuccessfulDelete",
                    &format!("Deleted job {name}"),
                );
                Ok(())
            }
            Err(source) => {
                self.record(
                    raw,
                    Kind::Warning,
                    "FailedDelete",
                    &format!("Deleted job: {source}"),
                );
                Err(CronJobError::Delete(source))
            }
        }
    }

    /// Creates the Job for `scheduled`; the reference to add to `status.active`, or `None` when
    /// a Job of that name exists that this CronJob does not control or already lists.
    fn apply_create(
        &self,
        cj: &CronJob,
        raw: &Value,
        scheduled: Timestamp,
    ) -> Result<Option<ActiveRef>, CronJobError> {
        let zone = cj
            .time_zone
            .as_deref()
            .and_then(|tz| load_zone(tz).ok())
            .unwrap_or(TimeZone::UTC);
        let job = template::job(cj, raw, scheduled, &zone);
        let name = template::job_name(&cj.name, scheduled);
        let created =
            match self
                .registry
                .create(JOBS, Some(&cj.namespace), job, &WriteOptions::default())
            {
                Ok(created) => {
                    self.record(
                        raw,
                        Kind::Normal,
                        "SuccessfulCreate",
                        &format!("Created job {name}"),
                    );
                    created
                }
                // A Job of this time was made already (the status write after it failed): adopt
                // it into the active list if it is ours.
                Err(RegistryError::AlreadyExists { .. }) => {
                    let existing = self.registry.get(JOBS, Some(&cj.namespace), &name)?;
                    let v = existing.value().map_err(RegistryError::from)?;
                    let ours = v
                        .pointer("/metadata/ownerReferences")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .any(|r| r["controller"] == json!(true) && r["uid"] == json!(cj.uid));
                    let uid = v.pointer("/metadata/uid").and_then(Value::as_str);
                    if !ours || cj.status.active.iter().any(|r| Some(r.uid.as_str()) == uid) {
                        return Ok(None);
                    }
                    tracing::info!(cronjob = %cj.name, job = %name, "Job already exists");
                    v
                }
                Err(e) if e.is_namespace_terminating() => return Err(e.into()),
                Err(e) => {
                    self.record(
                        raw,
                        Kind::Warning,
                        "FailedCreate",
                        &format!("Error creating job: {e}"),
                    );
                    return Err(CronJobError::Create(e));
                }
            };
        let r = template::active_ref(&created);
        Ok(Some(ActiveRef {
            name: name.clone(),
            uid: r["uid"].as_str().unwrap_or_default().to_string(),
            raw: r,
        }))
    }

    fn apply_status(&self, cj: &CronJob, status: &Status) -> Result<(), CronJobError> {
        let time = |t: Option<Timestamp>| t.map_or(Value::Null, |t| json!(t.to_string()));
        let active: Vec<Value> = status.active.iter().map(|r| r.raw.clone()).collect();
        let target = Target::of(CRON_JOBS, &cj.namespace, &cj.name, &cj.uid);
        workload::status::write(&self.registry, &target, |obj| {
            let mut s = json!({});
            if !active.is_empty() {
                s["active"] = json!(active);
            }
            for (k, v) in [
                ("lastScheduleTime", time(status.last_schedule_time)),
                ("lastSuccessfulTime", time(status.last_successful_time)),
            ] {
                if !v.is_null() {
                    s[k] = v;
                }
            }
            obj["status"] = s;
        })?;
        Ok(())
    }
}
