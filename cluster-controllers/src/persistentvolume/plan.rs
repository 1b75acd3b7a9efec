//! Planner: pure, no I/O.
//!
//! The PersistentVolume controller's decisions (upstream `pv_controller` `syncClaim` and
//! `syncVolume`, the pvc- and pv-protection controllers, and the built-in local-path
//! provisioner), one safe step per pass:
//!
//! - a claim: remove its protection finalizer once it is being deleted and no running pod
//!   uses it; a claim naming a volume is completed step by step (the volume's `claimRef`,
//!   the volume's phase, the claim's `volumeName` and annotations, the claim's status), or
//!   marked Lost when its volume is gone; an unbound claim binds to the best volume
//!   ([`super::matching`]), waits for its first consumer's node (WaitForFirstConsumer), has a
//!   local-path volume provisioned on that node, or stays Pending with upstream's event;
//! - a volume: Available without a claim, Bound to its claim, Released once the claim is gone
//!   (then kept under Retain, deleted under Delete when a provisioner made it, Failed with
//!   `VolumeFailedDelete` otherwise), and its protection finalizer removed once it is being
//!   deleted and not Bound.

use berth_shared::admission::storage::{
    DEFAULT_LOCAL_PATH_DIR, LOCAL_PATH_CLEANUP, LOCAL_PATH_DIR_ANNOTATION, LOCAL_PATH_PROVISIONER,
    PV_PROTECTION, PVC_PROTECTION, SELECTED_NODE, claim_request,
};
use berth_shared::k8s_openapi::api::core::v1::{
    HostPathVolumeSource, Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    ObjectReference, PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec,
    VolumeNodeAffinity,
};
use berth_shared::k8s_openapi::api::storage::v1::StorageClass;
use berth_shared::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::BTreeMap;

use super::matching::{best_volume, is_bound_to, mismatch};

pub const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
pub const BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
pub const PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
pub const STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
pub const BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
const WAIT_FOR_FIRST_CONSUMER: &str = "WaitForFirstConsumer";

/// Normal or Warning, as the event recorder writes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Normal,
    Warning,
}

/// An event about the object being planned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub severity: Severity,
    pub reason: &'static str,
    pub message: String,
}

fn normal(reason: &'static str, message: impl Into<String>) -> Event {
    Event {
        severity: Severity::Normal,
        reason,
        message: message.into(),
    }
}

fn warning(reason: &'static str, message: impl Into<String>) -> Event {
    Event {
        severity: Severity::Warning,
        reason,
        message: message.into(),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimPhase {
    Pending,
    Bound,
    Lost,
}

impl ClaimPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimPhase::Pending => "Pending",
            ClaimPhase::Bound => "Bound",
            ClaimPhase::Lost => "Lost",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VolumePhase {
    Available,
    Bound,
    Released,
    Failed,
}

impl VolumePhase {
    pub fn as_str(self) -> &'static str {
        match self {
            VolumePhase::Available => "Available",
            VolumePhase::Bound => "Bound",
            VolumePhase::Released => "Released",
            VolumePhase::Failed => "Failed",
        }
    }
}

/// One write a claim's pass makes.
#[derive(Debug, Clone, PartialEq)]
pub enum ClaimStep {
    /// Drop `kubernetes.io/pvc-protection` from the claim.
    RemoveFinalizer,
    /// Point the volume's `claimRef` at the claim (`by_controller`: the controller chose it).
    BindVolume { volume: String, by_controller: bool },
    /// Set the volume's phase (its status).
    SetVolumePhase { volume: String, phase: VolumePhase },
    /// Set the claim's `volumeName` and its bind annotations.
    BindClaim { volume: String, by_controller: bool },
    /// Write the claim's status: the phase and, when Bound, the volume's capacity and modes.
    SetClaimStatus {
        phase: ClaimPhase,
        from_volume: Option<String>,
    },
    /// Annotate the claim with the provisioner that will make its volume.
    AnnotateProvisioner { provisioner: String },
    /// Create this volume (a local-path one, pre-bound to the claim).
    Provision(Box<PersistentVolume>),
}

/// What a claim's pass does: at most one step, and the events to record.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ClaimPlan {
    pub step: Option<ClaimStep>,
    pub events: Vec<Event>,
}

impl ClaimPlan {
    fn step(step: ClaimStep) -> ClaimPlan {
        ClaimPlan {
            step: Some(step),
            events: Vec::new(),
        }
    }

    fn with(mut self, event: Event) -> ClaimPlan {
        self.events.push(event);
        self
    }
}

/// What a claim's pass sees besides the claim.
pub struct ClaimView<'a> {
    pub volumes: &'a [PersistentVolume],
    /// The claim's class; `None` when it names none or the class does not exist.
    pub class: Option<&'a StorageClass>,
    /// The node named by the claim's `volume.kubernetes.io/selected-node`, if it exists.
    pub selected_node: Option<&'a Node>,
    /// A pod that is not Succeeded or Failed names the claim in its volumes.
    pub in_use: bool,
}

fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

fn has_finalizer(meta: &ObjectMeta, name: &str) -> bool {
    meta.finalizers.iter().flatten().any(|f| f == name)
}

fn claim_phase(claim: &PersistentVolumeClaim) -> Option<&str> {
    claim.status.as_ref().and_then(|s| s.phase.as_deref())
}

fn volume_phase(volume: &PersistentVolume) -> Option<&str> {
    volume.status.as_ref().and_then(|s| s.phase.as_deref())
}

fn volume_name(claim: &PersistentVolumeClaim) -> &str {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .unwrap_or_default()
}

fn claim_key(claim: &PersistentVolumeClaim) -> String {
    format!(
        "{}/{}",
        claim.metadata.namespace.as_deref().unwrap_or_default(),
        claim.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The next step for a claim.
pub fn plan_claim(claim: &PersistentVolumeClaim, view: &ClaimView<'_>) -> ClaimPlan {
    if claim.metadata.deletion_timestamp.is_some() {
        if has_finalizer(&claim.metadata, PVC_PROTECTION) && !view.in_use {
            return ClaimPlan::step(ClaimStep::RemoveFinalizer);
        }
        return ClaimPlan::default();
    }
    match volume_name(claim) {
        "" => plan_unbound_claim(claim, view),
        name => plan_named_claim(claim, name, view),
    }
}

/// A claim with `volumeName`: complete the binding, or notice the volume is lost.
fn plan_named_claim(claim: &PersistentVolumeClaim, name: &str, view: &ClaimView<'_>) -> ClaimPlan {
    let completed = annotation(&claim.metadata, BIND_COMPLETED).is_some();
    let Some(volume) = view
        .volumes
        .iter()
        .find(|v| v.metadata.name.as_deref() == Some(name))
    else {
        return if completed {
            lost(
                claim,
                "ClaimLost",
                "Bound claim has lost its PersistentVolume. Data on the volume is lost!",
            )
        } else {
            pending(claim)
        };
    };
    let claim_ref = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
    if claim_ref.is_none() {
        // Asked for by name; upstream binds it when it fits.
        return match mismatch(volume, claim) {
            Some(why) => pending(claim).with(warning(
                "VolumeMismatch",
                format!("Cannot bind to requested volume {name:?}: {why}"),
            )),
            None => ClaimPlan::step(ClaimStep::BindVolume {
                volume: name.to_string(),
                by_controller: true,
            }),
        };
    }
    if !is_bound_to(volume, claim) {
        return if completed {
            lost(
                claim,
                "ClaimMisbound",
                "Two claims are bound to the same volume, this one is bound incorrectly",
            )
        } else {
            pending(claim)
        };
    }
    complete_binding(claim, volume, false)
}

/// Upstream `bind`, one write at a time: the volume's `claimRef` (with the claim's uid), its
/// phase, the claim's `volumeName` and annotations, the claim's status.
fn complete_binding(
    claim: &PersistentVolumeClaim,
    volume: &PersistentVolume,
    chosen: bool,
) -> ClaimPlan {
    let name = volume.metadata.name.clone().unwrap_or_default();
    let uid_missing = volume
        .spec
        .as_ref()
        .and_then(|s| s.claim_ref.as_ref())
        .is_none_or(|r| r.uid.as_deref().unwrap_or_default().is_empty());
    if uid_missing {
        return ClaimPlan::step(ClaimStep::BindVolume {
            volume: name,
            by_controller: chosen,
        });
    }
    if volume_phase(volume) != Some("Bound") {
        return ClaimPlan::step(ClaimStep::SetVolumePhase {
            volume: name,
            phase: VolumePhase::Bound,
        });
    }
    if volume_name(claim) != name || annotation(&claim.metadata, BIND_COMPLETED).is_none() {
        let by_controller = volume_name(claim).is_empty();
        return ClaimPlan::step(ClaimStep::BindClaim {
            volume: name,
            by_controller,
        });
    }
    let status = claim.status.as_ref();
    let capacity = volume.spec.as_ref().and_then(|s| s.capacity.clone());
    let modes = volume.spec.as_ref().and_then(|s| s.access_modes.clone());
    let current = claim_phase(claim) == Some("Bound")
        && status.and_then(|s| s.capacity.clone()) == capacity
        && status.and_then(|s| s.access_modes.clone()) == modes;
    if current {
        return ClaimPlan::default();
    }
    ClaimPlan::step(ClaimStep::SetClaimStatus {
        phase: ClaimPhase::Bound,
        from_volume: Some(name),
    })
}

fn pending(claim: &PersistentVolumeClaim) -> ClaimPlan {
    if claim_phase(claim) == Some("Pending") {
        ClaimPlan::default()
    } else {
        ClaimPlan::step(ClaimStep::SetClaimStatus {
            phase: ClaimPhase::Pending,
            from_volume: None,
        })
    }
}

fn lost(claim: &PersistentVolumeClaim, reason: &'static str, message: &str) -> ClaimPlan {
    if claim_phase(claim) == Some("Lost") {
        return ClaimPlan::default();
    }
    ClaimPlan::step(ClaimStep::SetClaimStatus {
        phase: ClaimPhase::Lost,
        from_volume: None,
    })
    .with(warning(reason, message))
}

/// An unbound claim: bind, wait for the first consumer, provision, or wait with an event.
fn plan_unbound_claim(claim: &PersistentVolumeClaim, view: &ClaimView<'_>) -> ClaimPlan {
    let class_name = super::matching::claim_class(claim);
    let delayed = view
        .class
        .is_some_and(|c| c.volume_binding_mode.as_deref() == Some(WAIT_FOR_FIRST_CONSUMER));
    let selected = annotation(&claim.metadata, SELECTED_NODE);
    if delayed && selected.is_none() {
        return pending(claim).with(normal(
            "WaitForFirstConsumer",
            "waiting for first consumer to be created before binding",
        ));
    }
    let node = if delayed { view.selected_node } else { None };
    if delayed && node.is_none() {
        // The scheduler named a node that does not exist (any more): nothing fits yet.
        return pending(claim);
    }
    if let Some(volume) = best_volume(claim, view.volumes, node) {
        return complete_binding(claim, volume, true);
    }
    if class_name.is_empty() {
        return pending(claim).with(normal(
            "FailedBinding",
            "no persistent volumes available for this claim and no storage class is set",
        ));
    }
    let Some(class) = view.class else {
        return pending(claim).with(warning(
            "ProvisioningFailed",
            format!("storageclass.storage.k8s.io {class_name:?} not found"),
        ));
    };
    plan_provisioning(claim, class, node)
}

/// Upstream `provisionClaim` for the built-in local-path provisioner; other provisioners
/// are external (their claims get the annotation and wait).
fn plan_provisioning(
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    node: Option<&Node>,
) -> ClaimPlan {
    let provisioner = class.provisioner.as_str();
    if annotation(&claim.metadata, STORAGE_PROVISIONER) != Some(provisioner) {
        let plan = ClaimPlan::step(ClaimStep::AnnotateProvisioner {
            provisioner: provisioner.to_string(),
        });
        return if provisioner == LOCAL_PATH_PROVISIONER {
            plan
        } else {
            plan.with(external_provisioning(provisioner))
        };
    }
    if provisioner != LOCAL_PATH_PROVISIONER {
        return pending(claim).with(external_provisioning(provisioner));
    }
    let Some(node) = node else {
        return pending(claim).with(warning(
            "ProvisioningFailed",
            "configuration error, no node was specified",
        ));
    };
    let Some(volume) = local_path_volume(claim, class, node) else {
        return pending(claim);
    };
    let name = volume.metadata.name.clone().unwrap_or_default();
    ClaimPlan::step(ClaimStep::Provision(Box::new(volume)))
        .with(normal(
            "Provisioning",
            format!(
                "External provisioner is provisioning volume for claim {:?}",
                claim_key(claim)
            ),
        ))
        .with(normal(
            "ProvisioningSucceeded",
            format!("Successfully provisioned volume {name}"),
        ))
}

fn external_provisioning(provisioner: &str) -> Event {
    normal(
        "ExternalProvisioning",
        format!(
            "Waiting for a volume to be created either by the external provisioner '{provisioner}' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered."
        ),
    )
}

/// The directory local-path volumes go under on `node`: its annotation, else the class's
/// `nodePath` parameter, else [`DEFAULT_LOCAL_PATH_DIR`].
pub fn local_path_dir(node: &Node, class: &StorageClass) -> String {
    annotation(&node.metadata, LOCAL_PATH_DIR_ANNOTATION)
        .or_else(|| {
            class
                .parameters
                .as_ref()
                .and_then(|p| p.get("nodePath"))
                .map(String::as_str)
        })
        .filter(|d| !d.is_empty())
        .unwrap_or(DEFAULT_LOCAL_PATH_DIR)
        .trim_end_matches('/')
        .to_string()
}

/// The volume the local-path provisioner makes for `claim` on `node`: `pvc-<uid>`, a
/// `DirectoryOrCreate` hostPath `<dir>/pvc-<uid>_<namespace>_<name>`, node affinity on the
/// node's hostname, pre-bound to the claim, kept by the cleanup finalizer until the node's
/// agent has removed the directory. `None` when the claim has no uid or request.
pub fn local_path_volume(
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    node: &Node,
) -> Option<PersistentVolume> {
    let uid = claim.metadata.uid.as_deref().filter(|u| !u.is_empty())?;
    let spec = claim.spec.as_ref()?;
    let request = claim_request(spec)?.clone();
    let ns = claim.metadata.namespace.clone().unwrap_or_default();
    let claim_name = claim.metadata.name.clone().unwrap_or_default();
    let node_name = node.metadata.name.clone().unwrap_or_default();
    let hostname = node
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(HOSTNAME_LABEL))
        .cloned()
        .unwrap_or_else(|| node_name.clone());
    let name = format!("pvc-{uid}");
    let path = format!("{}/{name}_{ns}_{claim_name}", local_path_dir(node, class));
    let class_name = class.metadata.name.clone().unwrap_or_default();
    Some(PersistentVolume {
        metadata: ObjectMeta {
            name: Some(name),
            annotations: Some(BTreeMap::from([(
                PROVISIONED_BY.to_string(),
                LOCAL_PATH_PROVISIONER.to_string(),
            )])),
            finalizers: Some(vec![
                PV_PROTECTION.to_string(),
                LOCAL_PATH_CLEANUP.to_string(),
            ]),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeSpec {
            capacity: Some(BTreeMap::from([("storage".to_string(), request)])),
            access_modes: spec.access_modes.clone(),
            volume_mode: spec.volume_mode.clone(),
            storage_class_name: Some(class_name),
            persistent_volume_reclaim_policy: Some(
                class
                    .reclaim_policy
                    .clone()
                    .unwrap_or_else(|| "Delete".to_string()),
            ),
            host_path: Some(HostPathVolumeSource {
                path,
                type_: Some("DirectoryOrCreate".to_string()),
            }),
            node_affinity: Some(VolumeNodeAffinity {
                required: Some(NodeSelector {
                    node_selector_terms: vec![NodeSelectorTerm {
                        match_expressions: Some(vec![NodeSelectorRequirement {
                            key: HOSTNAME_LABEL.to_string(),
                            operator: "In".to_string(),
                            values: Some(vec![hostname]),
                        }]),
                        match_fields: None,
                    }],
                }),
            }),
            claim_ref: Some(ObjectReference {
                api_version: Some("v1".to_string()),
                kind: Some("PersistentVolumeClaim".to_string()),
                namespace: Some(ns),
                name: Some(claim_name),
                uid: Some(uid.to_string()),
                resource_version: claim.metadata.resource_version.clone(),
                ..ObjectReference::default()
            }),
            ..PersistentVolumeSpec::default()
        }),
        status: None,
    })
}

/// One write a volume's pass makes.
#[derive(Debug, Clone, PartialEq)]
pub enum VolumeStep {
    /// Drop `kubernetes.io/pv-protection`.
    RemoveFinalizer,
    /// Set the phase, with a message (Failed) or none.
    SetPhase {
        phase: VolumePhase,
        message: Option<String>,
    },
    /// Clear a `claimRef` the controller set for a claim now bound elsewhere.
    Unbind,
    /// Delete the volume object (reclaim policy Delete, provisioned volume).
    Delete,
}

/// What a volume's pass does: at most one step, and the events to record.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct VolumePlan {
    pub step: Option<VolumeStep>,
    pub events: Vec<Event>,
}

/// The claim a volume's `claimRef` names, as the informer has it.
pub enum ClaimLookup<'a> {
    /// The volume has no `claimRef`.
    NoRef,
    /// The claim exists (it may be another claim of that name: the uid tells).
    Found(&'a PersistentVolumeClaim),
    Missing,
}

fn set_phase(volume: &PersistentVolume, phase: VolumePhase) -> VolumePlan {
    if volume_phase(volume) == Some(phase.as_str()) {
        return VolumePlan::default();
    }
    VolumePlan {
        step: Some(VolumeStep::SetPhase {
            phase,
            message: None,
        }),
        events: Vec::new(),
    }
}

/// The next step for a volume.
pub fn plan_volume(volume: &PersistentVolume, claim: ClaimLookup<'_>) -> VolumePlan {
    if volume.metadata.deletion_timestamp.is_some() {
        let bound = volume_phase(volume) == Some("Bound");
        if has_finalizer(&volume.metadata, PV_PROTECTION) && !bound {
            return VolumePlan {
                step: Some(VolumeStep::RemoveFinalizer),
                events: Vec::new(),
            };
        }
        return VolumePlan::default();
    }
    let claim_ref = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
    let ref_uid = claim_ref.and_then(|r| r.uid.as_deref()).unwrap_or_default();
    let name = volume.metadata.name.as_deref().unwrap_or_default();
    match claim {
        ClaimLookup::NoRef => set_phase(volume, VolumePhase::Available),
        // Pre-bound by a user to a claim that is not there yet.
        ClaimLookup::Missing if ref_uid.is_empty() => set_phase(volume, VolumePhase::Available),
        ClaimLookup::Found(c)
            if c.metadata.uid.as_deref() == Some(ref_uid) || ref_uid.is_empty() =>
        {
            match volume_name(c) {
                n if n == name => set_phase(volume, VolumePhase::Bound),
                "" if ref_uid.is_empty() => set_phase(volume, VolumePhase::Available),
                // The claim's pass is binding it.
                "" => VolumePlan::default(),
                _ if annotation(&volume.metadata, BOUND_BY_CONTROLLER).is_some() => VolumePlan {
                    step: Some(VolumeStep::Unbind),
                    events: Vec::new(),
                },
                _ => set_phase(volume, VolumePhase::Available),
            }
        }
        ClaimLookup::Found(_) | ClaimLookup::Missing => plan_released(volume),
    }
}

/// Upstream `reclaimVolume`: Released first, then the policy.
fn plan_released(volume: &PersistentVolume) -> VolumePlan {
    match volume_phase(volume) {
        Some("Failed") => return VolumePlan::default(),
        Some("Released") => {}
        _ => return set_phase(volume, VolumePhase::Released),
    }
    let policy = volume
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_reclaim_policy.as_deref())
        .unwrap_or("Retain");
    let name = volume.metadata.name.as_deref().unwrap_or_default();
    let failed = |reason: &'static str, message: String| VolumePlan {
        step: Some(VolumeStep::SetPhase {
            phase: VolumePhase::Failed,
            message: Some(message.clone()),
        }),
        events: vec![warning(reason, message)],
    };
    match policy {
        "Retain" => VolumePlan::default(),
        "Delete" => match annotation(&volume.metadata, PROVISIONED_BY) {
            Some(LOCAL_PATH_PROVISIONER) => VolumePlan {
                step: Some(VolumeStep::Delete),
                events: Vec::new(),
            },
            // An external provisioner deletes its own volumes.
            Some(_) => VolumePlan::default(),
            None => failed(
                "VolumeFailedDelete",
                format!(
                    "error getting deleter volume plugin for volume {name:?}: no deletable volume plugin matched"
                ),
            ),
        },
        "Recycle" => failed(
            "VolumeFailedRecycle",
            "No recycler plugin found for the volume!".to_string(),
        ),
        other => failed(
            "VolumeUnknownReclaimPolicy",
            format!("Volume has unrecognized PersistentVolumeReclaimPolicy {other:?}"),
        ),
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
