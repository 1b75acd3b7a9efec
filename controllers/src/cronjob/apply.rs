//! The writes of a pass: Job deletions and the Job creation with their events, and the status
//! (`active`, `lastScheduleTime`, `lastSuccessfulTime`), written only when it changed.

use super::plan::{Action, Plan};
use super::template::{self, Existing};
use super::view::{ActiveRef, CronJob};
use super::{Controller, CronJobError};
use crate::workload::{self, status::Target};
use berth_registry::events::EventType;
use berth_registry::{DeleteOptions, Propagation, RegistryError, WriteOptions};
use berth_shared::cron::load_zone;
use berth_shared::resource::{CRON_JOBS, JOBS};
use jiff::Timestamp;
use serde_json::Value;

impl Controller {
    fn record(&self, raw: &Value, t: EventType, reason: &str, message: &str) {
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
                Action::CreateJob { scheduled } => match self.apply_create(cj, raw, scheduled)? {
                    Run::Listed(r) => {
                        status.active.push(r);
                        status.last_schedule_time = Some(scheduled);
                    }
                    Run::Finished => status.last_schedule_time = Some(scheduled),
                    Run::Left => {}
                },
            }
        }
        if status != cj.status {
            let target = Target::of(CRON_JOBS, &cj.namespace, &cj.name, &cj.uid);
            let body = status.to_value();
            workload::status::write(&self.registry, &target, |obj| obj["status"] = body.clone())?;
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
                let msg = format!("Deleted job {name}");
                self.record(raw, EventType::Normal, "SuccessfulDelete", &msg);
                Ok(())
            }
            Err(source) => {
                let msg = format!("Deleted job: {source}");
                self.record(raw, EventType::Warning, "FailedDelete", &msg);
                Err(CronJobError::Delete(source))
            }
        }
    }

    /// Creates the Job for `scheduled`, or finds the one made already ([`Run`]).
    fn apply_create(
        &self,
        cj: &CronJob,
        raw: &Value,
        scheduled: Timestamp,
    ) -> Result<Run, CronJobError> {
        let zone = template::zone(cj, load_zone);
        let job = template::job(cj, raw, scheduled, &zone);
        let name = template::job_name(&cj.name, scheduled);
        let opts = WriteOptions::default();
        let created = match self.registry.create(JOBS, Some(&cj.namespace), job, &opts) {
            Ok(created) => {
                let msg = format!("Created job {name}");
                self.record(raw, EventType::Normal, "SuccessfulCreate", &msg);
                created
            }
            // A Job of this time was made already (the status write after it failed, or an
            // earlier pass of the same minute): a running one of ours is listed.
            Err(RegistryError::AlreadyExists { .. }) => {
                let existing = self.registry.get(JOBS, Some(&cj.namespace), &name)?;
                let v = existing.value().map_err(RegistryError::from)?;
                tracing::info!(cronjob = %cj.name, job = %name, "Job already exists");
                match template::existing(cj, &v) {
                    Existing::List => v,
                    Existing::Finished => return Ok(Run::Finished),
                    Existing::Leave => return Ok(Run::Left),
                }
            }
            Err(e) if e.is_namespace_terminating() => return Err(e.into()),
            Err(e) => {
                let msg = format!("Error creating job: {e}");
                self.record(raw, EventType::Warning, "FailedCreate", &msg);
                return Err(CronJobError::Create(e));
            }
        };
        Ok(Run::Listed(template::active_ref(&created)))
    }
}

/// What became of a scheduled run's Job.
enum Run {
    /// Created, or found running and not listed: it goes into `status.active`.
    Listed(ActiveRef),
    /// Found finished: the run happened and is not listed again.
    Finished,
    /// Found listed already, or not this CronJob's.
    Left,
}
