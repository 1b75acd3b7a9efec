//! The StatefulSet controller (STS-*): pods with a sticky identity `<set>-<ordinal>`, each
//! with its own claims from `volumeClaimTemplates` ([`identity`]), created in order and
//! removed in reverse under `OrderedReady` or all at once under `Parallel`, replaced by
//! `RollingUpdate` from the highest ordinal down to the partition or by `OnDelete`
//! ([`plan`]); the template's versions are ControllerRevisions
//! ([`crate::history`]); the claim retention policy is carried by owner
//! references ([`retention`]).
//!
//! A pass (upstream `syncStatefulSet`): claim revisions and settle the update revision, find
//! the current one, claim pods, plan, apply, write the status, trim the history. The runtime
//! releases a key only once the informers reflect the pass's writes, so the next pass sees
//! the pods and claims this one made.

mod apply;
pub mod events;
pub mod identity;
pub mod plan;
pub mod retention;
pub mod status;
pub mod view;

#[cfg(test)]
mod tests;

use super::history;
use super::workload::status::Target;
use super::workload::{self, Parsed, SyncError};
use berth_registry::events::Recorder;
use berth_registry::{Registry, RegistryError};
use berth_runtime::informer::{Informer, ObjectKey};
use berth_runtime::{self as runtime, Clock, Context, Reconciler};
use berth_shared::reconcile::Outcome;
use berth_shared::resource::{CONTROLLER_REVISIONS, PERSISTENT_VOLUME_CLAIMS, PODS, STATEFUL_SETS};
use identity::{history_owner, ownership};
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use view::{Claim, Revision, SetPod, StatefulSet};

/// The events' `source.component`, as upstream.
pub const COMPONENT: &str = "statefulset-controller";

struct Controller {
    /// Where `now` comes from.
    clock: Clock,
    registry: Registry,
    sets: Arc<Informer>,
    pods: Arc<Informer>,
    revisions: Arc<Informer>,
    claims: Arc<Informer>,
    recorder: Recorder,
}

impl Controller {
    /// The set's revisions, claimed (none while it is being deleted).
    fn observe_revisions(&self, set: &StatefulSet) -> Result<Vec<Arc<Revision>>, SyncError> {
        if set.deleting {
            return Ok(Vec::new());
        }
        Ok(ownership(set).claim_views(&self.registry, &self.revisions)?)
    }

    /// The set's pods, claimed (only those it controls while it is being deleted).
    fn observe_pods(&self, set: &StatefulSet) -> Result<Vec<SetPod>, SyncError> {
        let pods = if set.deleting {
            self.pods.controlled_by(&set.uid)
        } else {
            ownership(set).claim(&self.registry, &self.pods)?
        };
        Ok(pods.iter().map(|p| SetPod::of(p)).collect())
    }

    /// The claims the set's pods would mount, by name.
    fn observe_claims(&self, set: &StatefulSet) -> BTreeMap<String, Arc<Claim>> {
        if set.claim_templates.is_empty() {
            return BTreeMap::new();
        }
        let claims = self.claims.in_namespace(&set.namespace);
        claims
            .iter()
            .map(|c| (c.name().to_string(), c.view()))
            .collect()
    }
}

impl Reconciler for Controller {
    type Key = ObjectKey;
    type Error = SyncError;

    fn reconcile(&self, key: &ObjectKey) -> Result<Outcome, SyncError> {
        workload::parsed::reconcile_observed::<StatefulSet, _>(&self.sets, key, |obj, set| {
            if set.selector.is_empty() {
                return Ok(Outcome::Done);
            }
            let raw = obj.value().map_err(RegistryError::from)?;
            let now = self.clock.now();
            let owner = history_owner(&set);
            let revisions = self.observe_revisions(&set)?;
            let history = history::plan(&owner, &revisions);
            if !set.deleting {
                history::write::settle(&self.registry, &owner, &history)?;
            }
            let update = history.current.name();
            let (current, current_template) = plan::current_revision(&set, &revisions, &update);
            let pods = self.observe_pods(&set)?;
            let claims = self.observe_claims(&set);
            let names = plan::Revisions {
                current: &current,
                current_template: &current_template,
                update: &update,
            };
            let pass = plan::plan(&set, &names, &pods, &claims, now);
            let failure = self.apply_actions(&set, &raw, &pass.actions);
            if status::needs_write(&set, &pass.status) {
                let target = Target::of(STATEFUL_SETS, &set.namespace, &set.name, &set.uid);
                workload::status::write(&self.registry, &target, |obj| {
                    status::apply(obj, &pass.status)
                })?;
            }
            if !set.deleting {
                let live = plan::live_revisions(&pods, &current, &update);
                let keep = |r: &Revision| live.contains(r.name.as_str());
                history::write::trim(&self.registry, &owner, &history.old, keep)?;
            }
            if let Some(e) = failure {
                return Err(e);
            }
            Ok(pass
                .requeue_after
                .map_or(Outcome::Done, Outcome::RequeueAfter))
        })
    }
}

/// Runs the StatefulSet controller until `shutdown`.
pub async fn run(ctx: Context, shutdown: CancellationToken) {
    let controller = Arc::new(Controller {
        registry: ctx.registry.clone(),
        clock: ctx.clock.clone(),
        sets: ctx.informer(STATEFUL_SETS),
        pods: ctx.informer(PODS),
        revisions: ctx.informer(CONTROLLER_REVISIONS),
        claims: ctx.informer(PERSISTENT_VOLUME_CLAIMS),
        recorder: ctx.recorder(COMPONENT),
    });
    runtime::Controller::new("statefulset", &ctx, STATEFUL_SETS)
        .owns(PODS)
        .owns(CONTROLLER_REVISIONS)
        .adopts(PODS, Parsed::<StatefulSet>::selector)
        .adopts(CONTROLLER_REVISIONS, Parsed::<StatefulSet>::selector)
        // Claims carry the selector's labels, and their owner references are not controller
        // references: a claim's change concerns every set that selects it.
        .selects(PERSISTENT_VOLUME_CLAIMS, Parsed::<StatefulSet>::selector)
        .resync(workload::RESYNC)
        .workers(workload::WORKERS)
        .run(controller, shutdown)
        .await;
}
