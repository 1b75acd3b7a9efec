//! The writes of the PersistentVolume controller's steps, each conditional on the version
//! the pass read (a conflict requeues the key; an object gone meanwhile ends the step, its
//! deletion brings the keys back).

use super::plan::{
    BETA_STORAGE_PROVISIONER, BIND_COMPLETED, BOUND_BY_CONTROLLER, ClaimStep, STORAGE_PROVISIONER,
    VolumeStep,
};
use crate::delete::delete_unchanged;
use berth_registry::{Part, Registry, RegistryError, WriteOptions};
use berth_shared::admission::storage::{PV_PROTECTION, PVC_PROTECTION};
use berth_shared::k8s_openapi::Metadata;
use berth_shared::k8s_openapi::api::core::v1::{
    ObjectReference, PersistentVolume, PersistentVolumeClaim,
};
use berth_shared::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use berth_shared::resource::{PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, ResourceType};
use serde_json::json;

const YES: &str = "yes";

fn annotate(meta: &mut ObjectMeta, key: &str, value: &str) {
    meta.annotations
        .get_or_insert_with(Default::default)
        .insert(key.to_string(), value.to_string());
}

fn drop_finalizer(meta: &mut ObjectMeta, name: &str) {
    if let Some(f) = &mut meta.finalizers {
        f.retain(|x| x != name);
    }
}

/// Writes `obj` (or its status), conditional on its resourceVersion; gone meanwhile is fine.
fn write<K>(
    registry: &Registry,
    rt: &'static ResourceType,
    obj: &K,
    part: Part,
) -> Result<(), RegistryError>
where
    K: Metadata<Ty = ObjectMeta> + serde::Serialize,
{
    let meta = obj.metadata();
    let name = meta.name.as_deref().unwrap_or_default();
    let value = serde_json::to_value(obj)?;
    let opts = WriteOptions::default();
    match registry.update(rt, meta.namespace.as_deref(), name, value, part, &opts) {
        Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

fn set_volume_phase(
    registry: &Registry,
    volume: &PersistentVolume,
    phase: &str,
    message: Option<String>,
) -> Result<(), RegistryError> {
    let mut v = volume.clone();
    let status = v.status.get_or_insert_with(Default::default);
    status.phase = Some(phase.to_string());
    status.message = message;
    // As upstream's VolumeLastPhaseTransitionTime (on by default since 1.29).
    status.last_phase_transition_time =
        serde_json::from_value(json!(berth_registry::meta::now_rfc3339())).ok();
    write(registry, PERSISTENT_VOLUMES, &v, Part::Status)
}

/// Carries out one claim step; `volumes` is what the pass planned with.
pub fn claim_step(
    registry: &Registry,
    claim: &PersistentVolumeClaim,
    volumes: &[PersistentVolume],
    step: ClaimStep,
) -> Result<(), RegistryError> {
    let volume_named = |name: &str| {
        volumes
            .iter()
            .find(|v| v.metadata.name.as_deref() == Some(name))
    };
    match step {
        ClaimStep::RemoveFinalizer => {
            let mut c = claim.clone();
            drop_finalizer(&mut c.metadata, PVC_PROTECTION);
            write(registry, PERSISTENT_VOLUME_CLAIMS, &c, Part::Main)
        }
        ClaimStep::BindVolume {
            volume,
            by_controller,
        } => {
            let Some(v) = volume_named(&volume) else {
                return Ok(());
            };
            let mut v = v.clone();
            let spec = v.spec.get_or_insert_with(Default::default);
            spec.claim_ref = Some(ObjectReference {
                api_version: Some("v1".to_string()),
                kind: Some("PersistentVolumeClaim".to_string()),
                namespace: claim.metadata.namespace.clone(),
                name: claim.metadata.name.clone(),
                uid: claim.metadata.uid.clone(),
                resource_version: claim.metadata.resource_version.clone(),
                ..ObjectReference::default()
            });
            if by_controller {
                annotate(&mut v.metadata, BOUND_BY_CONTROLLER, YES);
            }
            write(registry, PERSISTENT_VOLUMES, &v, Part::Main)
        }
        ClaimStep::SetVolumePhase { volume, phase } => match volume_named(&volume) {
            Some(v) => set_volume_phase(registry, v, phase.as_str(), None),
            None => Ok(()),
        },
        ClaimStep::BindClaim {
            volume,
            by_controller,
        } => {
            let mut c = claim.clone();
            c.spec.get_or_insert_with(Default::default).volume_name = Some(volume);
            annotate(&mut c.metadata, BIND_COMPLETED, YES);
            if by_controller {
                annotate(&mut c.metadata, BOUND_BY_CONTROLLER, YES);
            }
            write(registry, PERSISTENT_VOLUME_CLAIMS, &c, Part::Main)
        }
        ClaimStep::SetClaimStatus { phase, from_volume } => {
            let mut c = claim.clone();
            let status = c.status.get_or_insert_with(Default::default);
            status.phase = Some(phase.as_str().to_string());
            match from_volume.as_deref().and_then(volume_named) {
                Some(v) => {
                    let spec = v.spec.clone().unwrap_or_default();
                    status.capacity = spec.capacity;
                    status.access_modes = spec.access_modes;
                }
                None if phase == super::plan::ClaimPhase::Lost => {}
                None => {
                    status.capacity = None;
                    status.access_modes = None;
                }
            }
            write(registry, PERSISTENT_VOLUME_CLAIMS, &c, Part::Status)
        }
        ClaimStep::AnnotateProvisioner { provisioner } => {
            let mut c = claim.clone();
            annotate(&mut c.metadata, STORAGE_PROVISIONER, &provisioner);
            annotate(&mut c.metadata, BETA_STORAGE_PROVISIONER, &provisioner);
            write(registry, PERSISTENT_VOLUME_CLAIMS, &c, Part::Main)
        }
        ClaimStep::Provision(volume) => {
            let value = serde_json::to_value(&*volume)?;
            match registry.create(PERSISTENT_VOLUMES, None, value, &WriteOptions::default()) {
                Ok(_) | Err(RegistryError::AlreadyExists { .. }) => Ok(()),
                Err(e) => Err(e),
            }
        }
    }
}

/// Carries out one volume step.
pub fn volume_step(
    registry: &Registry,
    volume: &PersistentVolume,
    step: VolumeStep,
) -> Result<(), RegistryError> {
    match step {
        VolumeStep::RemoveFinalizer => {
            let mut v = volume.clone();
            drop_finalizer(&mut v.metadata, PV_PROTECTION);
            write(registry, PERSISTENT_VOLUMES, &v, Part::Main)
        }
        VolumeStep::SetPhase { phase, message } => {
            set_volume_phase(registry, volume, phase.as_str(), message)
        }
        VolumeStep::Unbind => {
            let mut v = volume.clone();
            if let Some(spec) = &mut v.spec {
                spec.claim_ref = None;
            }
            if let Some(a) = &mut v.metadata.annotations {
                a.remove(BOUND_BY_CONTROLLER);
            }
            write(registry, PERSISTENT_VOLUMES, &v, Part::Main)
        }
        VolumeStep::Delete => {
            let name = volume.metadata.name.as_deref().unwrap_or_default();
            delete_unchanged(registry, PERSISTENT_VOLUMES, None, name, &volume.metadata)
        }
    }
}
