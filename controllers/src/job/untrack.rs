//! The tracking-finalizer cleaner (upstream's orphan-pod queue, `syncOrphanPod`): a pod that
//! carries `batch.kubernetes.io/job-tracking` while no unfinished Job controls it (it was
//! orphaned, released, or its Job was deleted or finished) loses the finalizer, so no pod is
//! ever kept by it for good. Keyed by pod; woken by pod changes and by Jobs that go or finish.

use super::orphans::tracked_index;
use super::routing::{self, untrackable};
use super::view::TRACKING_FINALIZER;
use crate::workload::claim::drop_finalizer;
use crate::workload::write;
use berth_registry::{Registry, RegistryError};
use berth_runtime::informer::{Informer, ObjectKey};
use berth_runtime::{self as runtime, Context, Reconciler};
use berth_shared::reconcile::Outcome;
use berth_shared::resource::{JOBS, PODS};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The pods' index of pods carrying the tracking finalizer.
const TRACKED: &str = "job-tracked";
/// How often every tracked pod is looked at again.
const RESYNC: Duration = Duration::from_secs(300);

/// Takes the tracking finalizer off the pod `name` of uid `uid`: the pod as written, `None`
/// when it is gone (the cleaner's write, and the Job controller's for pods it counted).
pub(super) fn untrack(
    registry: &Registry,
    namespace: &str,
    name: &str,
    uid: &str,
) -> Result<Option<Value>, RegistryError> {
    write::edit(registry, PODS, namespace, name, uid, |obj| {
        drop_finalizer(obj, TRACKING_FINALIZER)
    })
}

struct Cleaner {
    registry: Registry,
    jobs: Arc<Informer>,
    pods: Arc<Informer>,
}

impl Reconciler for Cleaner {
    type Key = ObjectKey;
    type Error = RegistryError;

    /// Drops the tracking finalizer of a cached pod once no live Job tracks it.
    fn reconcile(&self, key: &ObjectKey) -> Result<Outcome, RegistryError> {
        self.pods.reconcile_cached(key, |pod| {
            if untrackable(&self.jobs, &pod) {
                let ns = key.namespace().unwrap_or_default();
                untrack(&self.registry, ns, key.name(), pod.uid())?;
            }
            Ok(Outcome::Done)
        })
    }
}

/// Runs the cleaner until `shutdown`.
pub async fn run(ctx: Context, shutdown: CancellationToken) {
    let pods = ctx.informer(PODS);
    pods.add_index(TRACKED, Arc::new(tracked_index));
    let jobs = ctx.informer(JOBS);
    let cleaner = Arc::new(Cleaner {
        registry: ctx.registry.clone(),
        jobs: jobs.clone(),
        pods: pods.clone(),
    });
    let (for_pods, for_jobs) = (jobs.clone(), pods.clone());
    let (resync_jobs, resync_pods) = (jobs, pods);
    runtime::Controller::keyed("job-finalizers", &ctx)
        .watches(PODS, move |d| routing::pod_to_untrack(&for_pods, d))
        .watches(JOBS, move |d| routing::job_gone_or_finished(&for_jobs, d))
        .resync_with(RESYNC, move || {
            resync_pods
                .by_index(TRACKED, "")
                .into_iter()
                .filter(|p| untrackable(&resync_jobs, p))
                .map(|p| p.key().clone())
                .collect()
        })
        .run(cleaner, shutdown)
        .await;
}
