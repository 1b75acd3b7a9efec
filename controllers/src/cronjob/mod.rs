//! The CronJob controller: creates a CronJob's Jobs on its schedule. A pass (upstream
//! `ControllerV2.sync`) reads the CronJob and the Jobs it controls from the informers, parses
//! the schedule in its zone ([`berth_shared::cron`]: `spec.timeZone`, a `TZ=` prefix, or the
//! controller's local zone), plans ([`plan::plan`]: history limits, active list, the due
//! scheduled time and the concurrency policy), applies the Job deletions and creation, writes
//! the status, and asks the runtime to wake it just after the next scheduled time, so a Job is
//! created within milliseconds of its time instead of on a 10-second poll.

mod apply;
pub mod missed;
pub mod plan;
pub mod template;
pub mod view;

#[cfg(test)]
mod plan_tests;
#[cfg(test)]
mod tests;

use super::workload::{self, write};
use berth_registry::events::Recorder;
use berth_registry::{Registry, RegistryError};
use berth_runtime::informer::{Informer, ObjectKey};
use berth_runtime::{self as runtime, Clock, Context, Reconciler};
use berth_shared::cron::load_zone;
use berth_shared::reconcile::{ErrorPolicy, Outcome, Retry};
use berth_shared::resource::{CRON_JOBS, JOBS};
use jiff::Timestamp;
use jiff::tz::TimeZone;
use plan::Input;
use std::collections::BTreeSet;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use view::{CronJob, Job};

/// The events' `source.component`, as upstream.
pub const COMPONENT: &str = "cronjob-controller";

/// Why a pass failed.
#[derive(Debug, thiserror::Error)]
pub enum CronJobError {
    #[error(transparent)]
    Api(#[from] RegistryError),
    #[error("Error creating job: {0}")]
    Create(RegistryError),
    #[error("could not delete job: {0}")]
    Delete(RegistryError),
}

impl ErrorPolicy for CronJobError {
    fn retry(&self) -> Retry {
        match self {
            CronJobError::Api(e) => e.retry(),
            CronJobError::Create(_) | CronJobError::Delete(_) => Retry::Backoff,
        }
    }
}

pub struct Controller {
    /// Where `now` comes from.
    clock: Clock,
    registry: Registry,
    cron_jobs: Arc<Informer>,
    jobs: Arc<Informer>,
    recorder: Recorder,
    /// The zone of schedules without `timeZone` or a `TZ=` prefix (upstream: the
    /// kube-controller-manager's local zone).
    local_zone: TimeZone,
}

impl Controller {
    pub fn new(ctx: &Context) -> Controller {
        Controller {
            registry: ctx.registry.clone(),
            clock: ctx.clock.clone(),
            cron_jobs: ctx.informer(CRON_JOBS),
            jobs: ctx.informer(JOBS),
            recorder: ctx.recorder(COMPONENT),
            local_zone: TimeZone::system(),
        }
    }

    /// The Jobs `cj` controls, and the uids of its active Jobs that the API no longer has
    /// (asked of the registry, not the cache, as upstream does before dropping them).
    fn observe_jobs(&self, cj: &CronJob) -> Result<(Vec<Job>, BTreeSet<String>), CronJobError> {
        let parsed = workload::parsed::each::<Job>(self.jobs.controlled_by(&cj.uid));
        let jobs: Vec<Job> = parsed.iter().map(|j| Job::clone(j)).collect();
        let mut gone = BTreeSet::new();
        for r in cj
            .status
            .active
            .iter()
            .filter(|r| !jobs.iter().any(|j| j.uid == r.uid))
        {
            if !write::holds(&self.registry, JOBS, &cj.namespace, &r.name, &r.uid)? {
                gone.insert(r.uid.clone());
            }
        }
        Ok((jobs, gone))
    }

    /// One pass over the CronJob `ns/name` at `now`. Blocking.
    pub fn reconcile_at(
        &self,
        ns: &str,
        name: &str,
        now: Timestamp,
    ) -> Result<Outcome, CronJobError> {
        let key = ObjectKey::new(Some(ns), name);
        let Some((obj, cj)) = workload::parsed::observe::<CronJob>(&self.cron_jobs, &key) else {
            return Ok(Outcome::Done);
        };
        let raw = obj.value().map_err(RegistryError::from)?;
        let (jobs, gone) = self.observe_jobs(&cj)?;
        let schedule = plan::schedule(&cj, &self.local_zone, load_zone);
        let plan = plan::plan(
            Input {
                cron_job: &cj,
                jobs: &jobs,
                gone: &gone,
                schedule: schedule.as_ref().map_err(Clone::clone),
            },
            now,
        );
        let requeue = plan.requeue_after;
        self.apply(&cj, &raw, plan)?;
        Ok(requeue.map_or(Outcome::Done, Outcome::RequeueAfter))
    }
}

impl Reconciler for Controller {
    type Key = ObjectKey;
    type Error = CronJobError;

    fn reconcile(&self, key: &ObjectKey) -> Result<Outcome, CronJobError> {
        let ns = key.namespace().unwrap_or("default");
        self.reconcile_at(ns, key.name(), self.clock.now())
    }
}

/// Runs the CronJob controller until `shutdown`.
pub async fn run(ctx: Context, shutdown: CancellationToken) {
    let controller = Arc::new(Controller::new(&ctx));
    runtime::Controller::new("cronjob", &ctx, CRON_JOBS)
        .owns(JOBS)
        .resync(workload::RESYNC)
        .workers(workload::WORKERS)
        .run(controller, shutdown)
        .await;
}
