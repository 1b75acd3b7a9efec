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
pub mod identity;
pub mod plan;
pub mod retention;
pub mod routing;
pub mod status;
pub mod view;

#[cfg(test)]
mod tests;

use super::history::{self, Owner, write::HistoryError};
use super::workload;
use berth_registry::events::{EventType, Recorder};
use berth_registry::{Registry, RegistryError};
use berth_runtime::informer::{Informer, Object, ObjectKey};
use berth_runtime::{self as runtime, Clock, Context, Reconciler};
use berth_shared::reconcile::{ErrorPolicy, Outcome, Retry};
use berth_shared::resource::{CONTROLLER_REVISIONS, PERSISTENT_VOLUME_CLAIMS, PODS, STATEFUL_SETS};
use routing::ParsedSet;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use view::{Claim, HASH_LABEL, PodVolumes, REVISION_LABEL, Revision, SetPod, StatefulSet};

/// The events' `source.component`, as upstream.
pub const COMPONENT: &str = "statefulset-controller";
/// Every StatefulSet gets a pass this often, whatever the events.
pub const RESYNC: Duration = Duration::from_secs(300);
/// Passes of different StatefulSets that may run at once.
const WORKERS: usize = 4;

/// Why a pass failed.
#[derive(Debug, thiserror::Error)]
pub enum StatefulSetError {
    #[error(transparent)]
    Api(#[from] RegistryError),
    #[error(transparent)]
    History(#[from] HistoryError),
    /// A pod or claim creation failed; the message is the API's.
    #[error("{0}")]
    Create(RegistryError),
    #[error("unable to delete pods: {0}")]
    Delete(RegistryError),
}

impl ErrorPolicy for StatefulSetError {
    fn retry(&self) -> Retry {
        match self {
            StatefulSetError::Api(e) => e.retry(),
            StatefulSetError::History(e) => e.retry(),
            StatefulSetError::Create(_) | StatefulSetError::Delete(_) => Retry::Backoff,
        }
    }
}

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

/// The StatefulSet as the owner of its pods and revisions.
fn ownership(set: &StatefulSet) -> workload::Owner<'_> {
    workload::Owner {
        resource: STATEFUL_SETS,
        namespace: &set.namespace,
        name: &set.name,
        uid: &set.uid,
        selector: &set.selector,
        deleting: set.deleting,
        rules: workload::Rules::default(),
    }
}

/// A claimed pod with its volumes' view.
fn set_pod(o: &Object) -> SetPod {
    SetPod {
        pod: o.view(),
        volumes: o.view::<PodVolumes>(),
    }
}

/// The StatefulSet as its revision history sees it.
fn history_owner(set: &StatefulSet) -> Owner<'_> {
    Owner {
        resource: STATEFUL_SETS,
        namespace: &set.namespace,
        name: &set.name,
        uid: &set.uid,
        controller_ref: identity::controller_ref(set),
        template: &set.template,
        pod_template: &set.pod_template,
        collision_count: set.collision_count,
        history_limit: set.revision_history_limit,
        annotations: &set.annotations,
        hash_label: HASH_LABEL,
    }
}

impl Controller {
    fn record(&self, raw: &Value, t: EventType, reason: &str, message: &str) {
        if let Err(e) = self.recorder.record(raw, t, reason, message) {
            tracing::debug!(error = %e, reason, "recording event");
        }
    }

    fn observe_revisions(&self, set: &StatefulSet) -> Result<Vec<Arc<Revision>>, StatefulSetError> {
        let claimed = ownership(set).claim(&self.registry, &self.revisions)?;
        Ok(claimed.iter().map(|o| o.view::<Revision>()).collect())
    }

    fn observe_pods(&self, set: &StatefulSet) -> Result<Vec<SetPod>, StatefulSetError> {
        let claimed = ownership(set).claim(&self.registry, &self.pods)?;
        Ok(claimed.iter().map(|o| set_pod(o)).collect())
    }

    /// The claims the set's pods would mount, by name.
    fn observe_claims(&self, set: &StatefulSet) -> BTreeMap<String, Arc<Claim>> {
        let mut out = BTreeMap::new();
        if set.claim_templates.is_empty() {
            return out;
        }
        for c in self.claims.in_namespace(&set.namespace) {
            out.insert(c.name().to_string(), c.view::<Claim>());
        }
        out
    }

    fn sync(&self, key: &ObjectKey) -> Result<Outcome, StatefulSetError> {
        let Some(obj) = self.sets.get_key(key) else {
            return Ok(Outcome::Done);
        };
        let parsed = obj.view::<ParsedSet>();
        let set = match &parsed.0 {
            Ok(set) => set,
            Err(e) => {
                tracing::warn!(%key, error = %e, "ignoring StatefulSet");
                return Ok(Outcome::Done);
            }
        };
        if set.selector.is_empty() {
            return Ok(Outcome::Done);
        }
        let raw = obj.value().map_err(RegistryError::from)?;
        let now = self.clock.now();
        let owner = history_owner(set);
        let revisions = if set.deleting {
            Vec::new()
        } else {
            self.observe_revisions(set)?
        };
        let history = history::plan(&owner, &revisions);
        if !set.deleting {
            history::write::settle(&self.registry, &owner, &history)?;
        }
        let update = history.current.name();
        let current = revisions.iter().find(|r| {
            !set.status.current_revision.is_empty() && r.name == set.status.current_revision
        });
        let (current_name, current_template) = match current {
            Some(r) if r.name != update => (
                r.name.clone(),
                identity::revision_template(&r.data).unwrap_or_else(|| set.pod_template.clone()),
            ),
            _ => (update.clone(), set.pod_template.clone()),
        };
        let pods = if set.deleting {
            self.pods
                .controlled_by(&set.uid)
                .iter()
                .map(|o| set_pod(o))
                .collect()
        } else {
            self.observe_pods(set)?
        };
        let claims = self.observe_claims(set);
        let pass = plan::plan(
            set,
            &plan::Revisions {
                current: &current_name,
                current_template: &current_template,
                update: &update,
            },
            &pods,
            &claims,
            now,
        );
        let failure = self.apply_actions(set, &raw, &pass.actions);
        if status::needs_write(set, &pass.status) {
            self.apply_status(set, &pass.status)?;
        }
        if !set.deleting {
            // Revisions a pod or the status still names stay (upstream `truncateHistory`).
            let live: BTreeSet<&str> = pods
                .iter()
                .filter_map(|p| p.pod.labels.get(REVISION_LABEL).map(String::as_str))
                .chain([current_name.as_str(), update.as_str()])
                .collect();
            for r in history::cleanup(&owner, &history.old, |r| live.contains(r.name.as_str())) {
                history::write::delete_revision(&self.registry, &set.namespace, &r)?;
            }
        }
        if let Some(e) = failure {
            return Err(e);
        }
        Ok(pass
            .requeue_after
            .map_or(Outcome::Done, Outcome::RequeueAfter))
    }
}

impl Reconciler for Controller {
    type Key = ObjectKey;
    type Error = StatefulSetError;

    fn reconcile(&self, key: &ObjectKey) -> Result<Outcome, StatefulSetError> {
        self.sync(key)
    }
}

/// Runs the StatefulSet controller until `shutdown`.
pub async fn run(ctx: Context, shutdown: CancellationToken) {
    let sets = ctx.informer(STATEFUL_SETS);
    let controller = Arc::new(Controller {
        registry: ctx.registry.clone(),
        clock: ctx.clock.clone(),
        sets: sets.clone(),
        pods: ctx.informer(PODS),
        revisions: ctx.informer(CONTROLLER_REVISIONS),
        claims: ctx.informer(PERSISTENT_VOLUME_CLAIMS),
        recorder: ctx.recorder(COMPONENT),
    });
    let for_claims = sets;
    runtime::Controller::new("statefulset", &ctx, STATEFUL_SETS)
        .owns(PODS)
        .owns(CONTROLLER_REVISIONS)
        .adopts(PODS, routing::selector)
        .adopts(CONTROLLER_REVISIONS, routing::selector)
        .watches(PERSISTENT_VOLUME_CLAIMS, move |d| {
            routing::claim_change(&for_claims, d)
        })
        .resync(RESYNC)
        .workers(WORKERS)
        .run(controller, shutdown)
        .await;
}
