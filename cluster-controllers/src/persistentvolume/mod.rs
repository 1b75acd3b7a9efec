//! The PersistentVolume controller (upstream's `persistentvolume-binder`, `pvc-protection`
//! and `pv-protection` controllers, and the built-in local-path provisioner): binds claims
//! to volumes, provisions local-path volumes on the node chosen for a claim's first consumer,
//! keeps both phases, reclaims released volumes and lifts the protection finalizers
//! ([`plan`], [`matching`]). Keyed by claim or by volume; a change of either enqueues both
//! sides of its binding, a pod change the claims it names, a class change its pending claims.

pub mod apply;
pub mod matching;
pub mod plan;
pub mod routing;
#[cfg(test)]
mod tests;

use berth_registry::events::Recorder;
use berth_registry::{Registry, RegistryError};
use berth_runtime::informer::{Informer, ObjectKey};
use berth_runtime::{self as runtime, Context, Reconciler};
use berth_shared::admission::storage::SELECTED_NODE;
use berth_shared::k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use berth_shared::k8s_openapi::api::storage::v1::StorageClass;
use berth_shared::reconcile::Outcome;
use berth_shared::resource::{
    NODES, PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, PODS, STORAGE_CLASSES,
};
use routing::Key;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

const COMPONENT: &str = "persistentvolume-controller";
const WORKERS: usize = 2;
/// Upstream's `--pvclaimbinder-sync-period`: pending claims are looked at again this often
/// (a static volume created later, a class appearing).
const RESYNC: Duration = Duration::from_secs(15);

struct Controller {
    registry: Registry,
    recorder: Recorder,
    claims: Arc<Informer>,
    volumes: Arc<Informer>,
    classes: Arc<Informer>,
    nodes: Arc<Informer>,
    pods: Arc<Informer>,
}

/// Decodes an informer object, logging (and skipping) one that does not decode.
fn decoded<T: serde::de::DeserializeOwned>(obj: &berth_runtime::informer::Object) -> Option<T> {
    match obj.decode() {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::warn!(object = %obj.key(), error = %e, "ignoring an object that does not decode");
            None
        }
    }
}

impl Controller {
    fn observe_volumes(&self) -> Vec<PersistentVolume> {
        self.volumes
            .list()
            .iter()
            .filter_map(|v| decoded(v))
            .collect()
    }

    fn observe_class(&self, name: &str) -> Option<StorageClass> {
        if name.is_empty() {
            return None;
        }
        self.classes.get(None, name).and_then(|c| decoded(&c))
    }

    fn observe_selected_node(&self, claim: &PersistentVolumeClaim) -> Option<Node> {
        let name = claim.metadata.annotations.as_ref()?.get(SELECTED_NODE)?;
        self.nodes.get(None, name).and_then(|n| decoded(&n))
    }

    fn reconcile_claim(&self, key: &ObjectKey) -> Result<Outcome, RegistryError> {
        let Some(obj) = self.claims.get_key(key) else {
            return Ok(Outcome::Done);
        };
        let Some(claim) = decoded::<PersistentVolumeClaim>(&obj) else {
            return Ok(Outcome::Done);
        };
        let volumes = self.observe_volumes();
        let class = self.observe_class(matching::claim_class(&claim));
        let node = self.observe_selected_node(&claim);
        let in_use =
            claim.metadata.deletion_timestamp.is_some() && routing::claim_in_use(&self.pods, key);
        let view = plan::ClaimView {
            volumes: &volumes,
            class: class.as_ref(),
            selected_node: node.as_ref(),
            in_use,
        };
        let plan = plan::plan_claim(&claim, &view);
        self.record(&obj, &plan.events);
        if let Some(step) = plan.step {
            tracing::debug!(claim = %key, ?step, "persistent volume claim step");
            apply::claim_step(&self.registry, &claim, &volumes, step)?;
        }
        Ok(Outcome::Done)
    }

    fn reconcile_volume(&self, name: &str) -> Result<Outcome, RegistryError> {
        let Some(obj) = self.volumes.get(None, name) else {
            return Ok(Outcome::Done);
        };
        let Some(volume) = decoded::<PersistentVolume>(&obj) else {
            return Ok(Outcome::Done);
        };
        let claim_ref = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
        let claim: Option<PersistentVolumeClaim> = claim_ref.and_then(|r| {
            let key = ObjectKey::new(r.namespace.as_deref(), r.name.as_deref()?);
            self.claims.get_key(&key).and_then(|c| decoded(&c))
        });
        let lookup = match (claim_ref, &claim) {
            (None, _) => plan::ClaimLookup::NoRef,
            (Some(_), Some(c)) => plan::ClaimLookup::Found(c),
            (Some(_), None) => plan::ClaimLookup::Missing,
        };
        let plan = plan::plan_volume(&volume, lookup);
        self.record(&obj, &plan.events);
        if let Some(step) = plan.step {
            tracing::debug!(volume = name, ?step, "persistent volume step");
            apply::volume_step(&self.registry, &volume, step)?;
        }
        Ok(Outcome::Done)
    }

    /// Events are best effort: a failed one is logged, the pass goes on.
    fn record(&self, obj: &berth_runtime::informer::Object, events: &[plan::Event]) {
        if events.is_empty() {
            return;
        }
        let Ok(value) = obj.value() else {
            return;
        };
        for e in events {
            let t = match e.severity {
                plan::Severity::Normal => berth_registry::events::EventType::Normal,
                plan::Severity::Warning => berth_registry::events::EventType::Warning,
            };
            if let Err(err) = self.recorder.record(&value, t, e.reason, &e.message) {
                tracing::warn!(object = %obj.key(), reason = e.reason, error = %err, "recording an event failed");
            }
        }
    }
}

impl Reconciler for Controller {
    type Key = Key;
    type Error = RegistryError;

    fn reconcile(&self, key: &Key) -> Result<Outcome, RegistryError> {
        match key {
            Key::Claim(k) => self.reconcile_claim(k),
            Key::Volume(name) => self.reconcile_volume(name),
        }
    }
}

/// Runs the PersistentVolume controller until `shutdown`.
pub async fn run(ctx: Context, shutdown: CancellationToken) {
    let claims = ctx.informer(PERSISTENT_VOLUME_CLAIMS);
    let volumes = ctx.informer(PERSISTENT_VOLUMES);
    let controller = Arc::new(Controller {
        registry: ctx.registry.clone(),
        recorder: ctx.recorder(COMPONENT),
        claims: claims.clone(),
        volumes: volumes.clone(),
        classes: ctx.informer(STORAGE_CLASSES),
        nodes: ctx.informer(NODES),
        pods: ctx.informer(PODS),
    });
    let (for_classes, for_resync) = (claims.clone(), (claims.clone(), volumes.clone()));
    runtime::Controller::keyed("persistentvolume", &ctx)
        .watches(PERSISTENT_VOLUME_CLAIMS, routing::claim_change)
        .watches(PERSISTENT_VOLUMES, routing::volume_change)
        .watches(PODS, routing::pod_change)
        .watches(STORAGE_CLASSES, move |d| {
            routing::class_change(&for_classes, d)
        })
        .reads(NODES)
        .resync_with(RESYNC, move || {
            routing::every_key(&for_resync.0, &for_resync.1)
        })
        .workers(WORKERS)
        .run(controller, shutdown)
        .await;
}
