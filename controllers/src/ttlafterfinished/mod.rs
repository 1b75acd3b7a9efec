//! The TTL-after-finished controller (upstream `ttlafterfinished`): deletes a finished Job
//! `spec.ttlSecondsAfterFinished` seconds after its `Complete`/`Failed` condition, cascading in
//! the foreground (its pods go first, finalizers honoured) with a UID precondition. The TTL may
//! be set or changed at any time: every change of a Job enqueues it, and a Job whose time is
//! not up asks to run again at the exact instant it is (no polling). Before deleting, the Job
//! is read again from the registry and judged on that, as upstream re-reads it from the API
//! (its TTL may have just been extended).

pub mod plan;
#[cfg(test)]
mod tests;

use berth_registry::{DeleteOptions, DeletePreconditions, Propagation, Registry, RegistryError};
use berth_runtime::informer::{Informer, ObjectKey};
use berth_runtime::{Clock, Context, Controller, Reconciler};
use berth_shared::reconcile::{ErrorPolicy, Outcome, Retry};
use berth_shared::resource::JOBS;
use plan::{Decision, TtlError};
use serde_json::Value;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Why a pass failed.
#[derive(Debug, thiserror::Error)]
pub enum CleanupError {
    #[error(transparent)]
    Api(#[from] RegistryError),
    #[error(transparent)]
    Ttl(#[from] TtlError),
}

impl ErrorPolicy for CleanupError {
    fn retry(&self) -> Retry {
        match self {
            CleanupError::Api(e) => e.retry(),
            // Only a change of the Job can mend it.
            CleanupError::Ttl(_) => Retry::Never,
        }
    }
}

struct Cleanup {
    /// Where `now` comes from.
    clock: Clock,
    registry: Registry,
    jobs: Arc<Informer>,
}

impl Cleanup {
    fn new(ctx: &Context) -> Cleanup {
        Cleanup {
            clock: ctx.clock.clone(),
            registry: ctx.registry.clone(),
            jobs: ctx.informer(JOBS),
        }
    }

    fn decide(&self, job: &Value, now: jiff::Timestamp) -> Result<Decision, CleanupError> {
        let d = plan::decide(job, now)?;
        let future = crate::job::conditions::finished_value(job)
            .and_then(|f| f.at)
            .is_some_and(|at| at > now);
        if future && matches!(d, Decision::Wait(_)) {
            let name = job.pointer("/metadata/name").and_then(Value::as_str);
            tracing::warn!(
                job = name.unwrap_or_default(),
                "Found Job finished in the future. This is likely due to time skew in the cluster. Job cleanup will be deferred."
            );
        }
        Ok(d)
    }
}

impl Reconciler for Cleanup {
    type Key = ObjectKey;
    type Error = CleanupError;

    fn reconcile(&self, key: &ObjectKey) -> Result<Outcome, CleanupError> {
        self.jobs.reconcile_cached(key, |obj| {
            let cached = obj.value().map_err(RegistryError::from)?;
            match self.decide(&cached, self.clock.now())? {
                Decision::Keep => return Ok(Outcome::Done),
                Decision::Wait(d) => return Ok(Outcome::RequeueAfter(d)),
                Decision::Delete => {}
            }
            // The cache may be behind an update of the TTL: judge the stored Job.
            let fresh = match self.registry.get(JOBS, key.namespace(), key.name()) {
                Ok(o) => o.value().map_err(RegistryError::from)?,
                Err(RegistryError::NotFound { .. }) => return Ok(Outcome::Done),
                Err(e) => return Err(e.into()),
            };
            match self.decide(&fresh, self.clock.now())? {
                Decision::Keep => return Ok(Outcome::Done),
                Decision::Wait(d) => return Ok(Outcome::RequeueAfter(d)),
                Decision::Delete => {}
            }
            let uid = fresh
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .map(String::from);
            tracing::info!(job = %key, "cleaning up a finished Job whose TTL expired");
            let opts = DeleteOptions {
                propagation_policy: Some(Propagation::Foreground),
                preconditions: Some(DeletePreconditions {
                    uid,
                    resource_version: None,
                }),
                ..DeleteOptions::default()
            };
            match self
                .registry
                .delete(JOBS, key.namespace(), key.name(), &opts)
            {
                Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(Outcome::Done),
                Err(e) => Err(e.into()),
            }
        })
    }
}

/// Runs the TTL-after-finished controller until `shutdown`.
pub async fn run(ctx: Context, shutdown: CancellationToken) {
    let cleanup = Arc::new(Cleanup::new(&ctx));
    Controller::new("ttl-after-finished", &ctx, JOBS)
        .workers(2)
        .run(cleanup, shutdown)
        .await;
}
