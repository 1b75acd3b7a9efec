//! The DaemonSet controller: one pod of the template on every eligible node
//! ([`eligibility`]), each pinned to its node by a `matchFields` node affinity and bound by the
//! scheduler; pods follow nodes as they come, go, and change labels or taints; failed pods are
//! replaced with back-off; matching orphans are adopted; the template's versions are kept as
//! ControllerRevisions ([`crate::history`]) and rolled out by `RollingUpdate` ([`rolling`]) or
//! `OnDelete`; the status counts nodes ([`status`]).
//!
//! A pass (upstream `syncDaemonSet`): claim revisions and settle the current one, claim pods,
//! plan the per-node changes ([`plan::manage`]) and, only when there are none, the rolling
//! update's; apply them; trim the history; write the status. The runtime releases a key only
//! once the informers reflect the pass's writes, so the next pass sees the pods this one made
//! (what upstream's expectations guard against).

mod apply;
pub mod backoff;
pub mod eligibility;
pub mod plan;
pub mod rolling;
pub mod routing;
pub mod status;
pub mod template;
pub mod view;

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod tests;

use super::history;
use super::workload::status::Target;
use super::workload::{self, Parsed, PodControl, SyncError};
use backoff::FailedBackoff;
use berth_registry::events::EventType;
use berth_registry::{Registry, RegistryError};
use berth_runtime::informer::{Informer, ObjectKey};
use berth_runtime::{self as runtime, Clock, Context, Reconciler};
use berth_shared::reconcile::Outcome;
use berth_shared::resource::{CONTROLLER_REVISIONS, DAEMON_SETS, NODES, PODS};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;
use view::{DaemonPod, DaemonSet, HASH_LABEL, Node, Revision, Strategy, TargetNode};

/// The events' `source.component`, as upstream.
pub const COMPONENT: &str = "daemonset-controller";

struct Controller {
    /// Where `now` comes from.
    clock: Clock,
    registry: Registry,
    sets: Arc<Informer>,
    pods: Arc<Informer>,
    nodes: Arc<Informer>,
    revisions: Arc<Informer>,
    pods_control: PodControl,
    failed: Mutex<FailedBackoff>,
}

impl Controller {
    fn backoff(&self) -> std::sync::MutexGuard<'_, FailedBackoff> {
        self.failed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every node, in name order.
    fn observe_nodes(&self) -> Vec<Arc<Node>> {
        let mut nodes: Vec<Arc<Node>> = self.nodes.list().iter().map(|n| n.view()).collect();
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        nodes
    }

    /// The DaemonSet's pods, claimed.
    fn observe_pods(&self, ds: &DaemonSet) -> Result<Vec<DaemonPod>, SyncError> {
        let claimed = template::ownership(ds).claim(&self.registry, &self.pods)?;
        Ok(claimed
            .iter()
            .map(|o| DaemonPod {
                node: o.view::<TargetNode>().0.clone(),
                pod: o.view(),
            })
            .collect())
    }
}

impl Reconciler for Controller {
    type Key = ObjectKey;
    type Error = SyncError;

    /// One pass over one DaemonSet.
    fn reconcile(&self, key: &ObjectKey) -> Result<Outcome, SyncError> {
        workload::parsed::reconcile_observed::<DaemonSet, _>(&self.sets, key, |obj, ds| {
            // Its revisions may be going already (orphaned or deleted): nothing is reliable.
            if ds.deleting {
                return Ok(Outcome::Done);
            }
            let raw = obj.value().map_err(RegistryError::from)?;
            if ds.selector.is_empty() {
                let msg =
                    "This daemon set is selecting all pods. A non-empty selector is required.";
                self.pods_control
                    .record(&raw, EventType::Warning, "SelectingAll", msg);
                return Ok(Outcome::Done);
            }
            let now = self.clock.now();
            let nodes = self.observe_nodes();
            let revisions: Vec<Arc<Revision>> =
                template::ownership(&ds).claim_views(&self.registry, &self.revisions)?;
            let owner = template::history_owner(&ds);
            let history = history::plan(&owner, &revisions);
            history::write::settle(&self.registry, &owner, &history)?;
            let hash = history.current.hash(HASH_LABEL);
            let pods = self.observe_pods(&ds)?;
            self.apply_dedup(&ds, &history.duplicates, &pods, &hash)?;
            let by_node = plan::by_node(&pods);
            let mut changes = {
                let failed = self.backoff();
                plan::manage(&ds, &nodes, &by_node, &hash, &failed, now)
            };
            let mut requeue = changes.requeue_after;
            // As upstream: the rolling update moves only once the core loop has nothing to do.
            if changes.is_empty() && matches!(ds.strategy, Strategy::RollingUpdate { .. }) {
                changes = rolling::rolling_update(&ds, &nodes, &by_node, &hash, now);
            }
            let failure = self.apply_changes(&ds, &raw, changes.capped(), &hash, now);
            let live = plan::live_hashes(&pods);
            let keep = history::by_hash(HASH_LABEL, &live);
            history::write::trim(&self.registry, &owner, &history.old, keep)?;
            let new = status::compute(&ds, &nodes, &by_node, &hash, now);
            if status::needs_write(&ds, &new) {
                let target = Target::of(DAEMON_SETS, &ds.namespace, &ds.name, &ds.uid);
                workload::status::write(&self.registry, &target, |obj| status::apply(obj, &new))?;
            }
            if let Some(e) = failure {
                return Err(e);
            }
            if let Some(d) = status::next_availability_check(&ds, &by_node, now) {
                requeue = Some(requeue.map_or(d, |r| r.min(d)));
            }
            Ok(requeue.map_or(Outcome::Done, Outcome::RequeueAfter))
        })
    }
}

/// Runs the DaemonSet controller until `shutdown`.
pub async fn run(ctx: Context, shutdown: CancellationToken) {
    let pods = ctx.informer(PODS);
    let sets = ctx.informer(DAEMON_SETS);
    let controller = Arc::new(Controller {
        registry: ctx.registry.clone(),
        clock: ctx.clock.clone(),
        sets: sets.clone(),
        pods,
        nodes: ctx.informer(NODES),
        revisions: ctx.informer(CONTROLLER_REVISIONS),
        pods_control: PodControl::new(ctx.registry.clone(), ctx.recorder(COMPONENT)),
        failed: Mutex::new(FailedBackoff::default()),
    });
    let for_nodes = sets;
    runtime::Controller::new("daemonset", &ctx, DAEMON_SETS)
        .owns(PODS)
        .owns(CONTROLLER_REVISIONS)
        .adopts(PODS, Parsed::<DaemonSet>::selector)
        .adopts(CONTROLLER_REVISIONS, Parsed::<DaemonSet>::selector)
        .watches(NODES, move |d| routing::node_change(&for_nodes, d))
        .resync(workload::RESYNC)
        .paced(workload::PACE)
        .workers(workload::WORKERS)
        .run(controller, shutdown)
        .await;
}
