//! The Job controller (upstream `pkg/controller/job`, v1.31 behaviour): runs a Job's pods to
//! the wanted number of completions (non-parallel, fixed count, work queue, Indexed), replaces
//! failed pods after a growing back-off, fails the Job on its `backoffLimit`, per-index limits,
//! a `FailJob` rule or its active deadline, succeeds it on its completions or success policy,
//! suspends and resumes it, and counts every finished pod exactly once through the
//! `batch.kubernetes.io/job-tracking` finalizer and `status.uncountedTerminatedPods`
//! ([`tracking`]).
//!
//! A pass: claim the pods (adopt matching orphans, release pods that stopped matching), decide
//! ([`plan::manage`]), apply the pod changes, then the three tracking steps: write the status
//! with the newly finished pods listed as uncounted, remove their finalizers, write the counts
//! and, once no pod is left, the terminal condition. The runtime releases a key only once the
//! informers reflect the pass's writes, so the next pass never counts a pod twice (what
//! upstream's expectations guard against). A second, small reconciler ([`untrack`]) removes the
//! finalizer from pods no unfinished Job controls any more ([`orphans`]).
//! The `DisruptionTarget` condition that `onPodConditions` rules match is set by the Eviction
//! API, taint eviction and preemption.

mod apply;
pub mod backoff;
pub mod conditions;
pub mod failure_policy;
pub mod indexes;
pub mod intervals;
pub mod orphans;
pub mod plan;
pub mod removal;
pub mod routing;
pub mod success_policy;
pub mod template;
pub mod tracking;
mod untrack;
pub mod view;

#[cfg(test)]
mod tests;

use super::workload::{self, Parsed, PodControl, SyncError};
use berth_registry::{Registry, RegistryError};
use berth_runtime::informer::{Informer, ObjectKey};
use berth_runtime::{self as runtime, Clock, Context, Reconciler};
use berth_shared::reconcile::Outcome;
use berth_shared::resource::{JOBS, PODS};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use view::{Job, JobPod};

/// The events' `source.component`, as upstream.
pub const COMPONENT: &str = "job-controller";

struct Controller {
    /// Where `now` comes from.
    clock: Clock,
    registry: Registry,
    jobs: Arc<Informer>,
    pods: Arc<Informer>,
    pods_control: PodControl,
}

impl Reconciler for Controller {
    type Key = ObjectKey;
    type Error = SyncError;

    /// One pass over one Job.
    fn reconcile(&self, key: &ObjectKey) -> Result<Outcome, SyncError> {
        workload::parsed::reconcile_observed::<Job, _>(&self.jobs, key, |obj, job| {
            if conditions::finished(job.conditions()).is_some() || job.managed_elsewhere() {
                return Ok(Outcome::Done);
            }
            let raw = obj.value().map_err(RegistryError::from)?;
            // Claimed through the kit (an adopted pod as written, with its finalizer).
            let pods: Vec<Arc<JobPod>> =
                plan::owner(&job).claim_views(&self.registry, &self.pods)?;
            let now = self.clock.now();
            let m = plan::manage(&job, &pods, now);
            let (applied, failure) = self.apply_change(&job, &raw, &m.change);
            let settled = tracking::settle(&job, &m, applied, now);
            self.record(&raw, &settled.events);
            let t = tracking::track(&job, &pods, &m, settled);
            // Finished pods are listed as uncounted before any of their finalizers goes.
            let revision = self.apply_status(&job, obj.revision(), &job.status, &t.status)?;
            let (removed, untrack_failure) = self.apply_untrack_all(&job, &t.remove);
            let (status, events) = tracking::finish(&job, &t, &removed, now);
            self.apply_status(&job, revision, &t.status, &status)?;
            self.record(&raw, &events);
            if let Some(e) = failure.or(untrack_failure) {
                return Err(e);
            }
            Ok(m.requeue_after.map_or(Outcome::Done, Outcome::RequeueAfter))
        })
    }
}

/// Runs the Job controller (and the finalizer cleaner beside it) until `shutdown`.
pub async fn run(ctx: Context, shutdown: CancellationToken) {
    let pods = ctx.informer(PODS);
    let jobs = ctx.informer(JOBS);
    let controller = Arc::new(Controller {
        registry: ctx.registry.clone(),
        clock: ctx.clock.clone(),
        jobs: jobs.clone(),
        pods,
        pods_control: PodControl::new(ctx.registry.clone(), ctx.recorder(COMPONENT)),
    });
    let cleaner = tokio::spawn(untrack::run(ctx.clone(), shutdown.clone()));
    runtime::Controller::new("job", &ctx, JOBS)
        .owns(PODS)
        .adopts(PODS, Parsed::<Job>::selector)
        .resync(workload::RESYNC)
        .workers(workload::WORKERS)
        .run(controller, shutdown)
        .await;
    let _ = cleaner.await;
}
