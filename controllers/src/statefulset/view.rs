//! What the StatefulSet controller reads from a StatefulSet, its pods and their claims: the
//! fields its decisions depend on, parsed once per object version from the stored JSON.
//!
//! Planner: pure, no I/O.

pub use crate::history::Revision;
pub use crate::views::Pod;
use crate::views::{array_at, string_map};
pub use crate::workload::parsed::ViewError;
use crate::workload::parsed::{or_default, owner_view, required_uid, stored_template};
use berth_runtime::informer::{Object, View};
use berth_shared::k8s_openapi::api::apps::v1 as apps;
use berth_shared::k8s_openapi::api::core::v1 as core;
use berth_shared::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use berth_shared::selector::LabelSelector;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The label naming the revision a pod was made from (upstream `StatefulSetRevisionLabel`):
/// the ControllerRevision's name.
pub const REVISION_LABEL: &str = "controller-revision-hash";
/// The label under which a StatefulSet's ControllerRevisions keep their hash (upstream
/// `ControllerRevisionHashLabel`).
pub const HASH_LABEL: &str = "controller.kubernetes.io/hash";
/// The label naming the pod itself, for per-pod Services (STS-14).
pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// The label carrying the pod's ordinal.
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";

/// How pods are replaced when the template changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Strategy {
    /// Only pods someone else deletes come back at the new revision.
    OnDelete,
    RollingUpdate {
        /// Ordinals below `start + partition` stay at the current revision.
        partition: i32,
        max_unavailable: IntOrString,
    },
}

/// `whenDeleted` / `whenScaled`: does the claim go with the set or the scaled-down pod?
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Retention {
    pub delete_when_deleted: bool,
    pub delete_when_scaled: bool,
}

/// The status fields the controller writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    pub observed_generation: i64,
    pub replicas: i32,
    pub ready_replicas: i32,
    pub current_replicas: i32,
    pub updated_replicas: i32,
    pub available_replicas: i32,
    pub current_revision: String,
    pub update_revision: String,
}

/// A StatefulSet, normalised.
#[derive(Debug, Clone)]
pub struct StatefulSet {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub generation: i64,
    pub selector: LabelSelector,
    /// `spec.selector.matchLabels`, which claims are labelled with.
    pub match_labels: BTreeMap<String, String>,
    /// `spec.template` as stored (admission defaulted it).
    pub template: Value,
    /// The same, typed.
    pub pod_template: core::PodTemplateSpec,
    pub replicas: i32,
    /// `spec.ordinals.start` (0 when unset).
    pub start: i32,
    /// `spec.serviceName`: the pods' subdomain.
    pub service_name: String,
    pub claim_templates: Vec<core::PersistentVolumeClaim>,
    /// `podManagementPolicy: Parallel`.
    pub parallel: bool,
    pub strategy: Strategy,
    pub retention: Retention,
    pub min_ready_seconds: i32,
    pub revision_history_limit: i32,
    pub annotations: BTreeMap<String, String>,
    pub deleting: bool,
    pub status: Status,
    pub collision_count: Option<i32>,
}

owner_view!(StatefulSet);

impl StatefulSet {
    /// Reads a stored StatefulSet.
    pub fn from_value(obj: &Value) -> Result<StatefulSet, ViewError> {
        let typed: apps::StatefulSet = serde_json::from_value(obj.clone())?;
        let meta = &typed.metadata;
        let uid = required_uid(meta.uid.as_ref())?;
        let spec = typed.spec.unwrap_or_default();
        let strategy = match &spec.update_strategy {
            Some(s) if s.type_.as_deref() == Some("OnDelete") => Strategy::OnDelete,
            other => {
                let ru = other.as_ref().and_then(|s| s.rolling_update.as_ref());
                Strategy::RollingUpdate {
                    partition: ru.and_then(|r| r.partition).unwrap_or(0),
                    max_unavailable: ru
                        .and_then(|r| r.max_unavailable.clone())
                        .unwrap_or(IntOrString::Int(1)),
                }
            }
        };
        let policy = spec
            .persistent_volume_claim_retention_policy
            .unwrap_or_default();
        let status = typed.status.unwrap_or_default();
        Ok(StatefulSet {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            generation: meta.generation.unwrap_or(0),
            selector: LabelSelector::from_k8s(&spec.selector)?,
            match_labels: spec.selector.match_labels.clone().unwrap_or_default(),
            template: stored_template(obj),
            pod_template: spec.template,
            replicas: spec.replicas.unwrap_or(1),
            start: spec.ordinals.and_then(|o| o.start).unwrap_or(0),
            service_name: spec.service_name.unwrap_or_default(),
            claim_templates: spec.volume_claim_templates.unwrap_or_default(),
            parallel: spec.pod_management_policy.as_deref() == Some("Parallel"),
            strategy,
            retention: Retention {
                delete_when_deleted: policy.when_deleted.as_deref() == Some("Delete"),
                delete_when_scaled: policy.when_scaled.as_deref() == Some("Delete"),
            },
            min_ready_seconds: spec.min_ready_seconds.unwrap_or(0),
            revision_history_limit: spec.revision_history_limit.unwrap_or(10),
            annotations: meta.annotations.clone().unwrap_or_default(),
            deleting: meta.deletion_timestamp.is_some(),
            status: Status {
                observed_generation: status.observed_generation.unwrap_or(0),
                replicas: status.replicas,
                ready_replicas: status.ready_replicas.unwrap_or(0),
                current_replicas: status.current_replicas.unwrap_or(0),
                updated_replicas: status.updated_replicas.unwrap_or(0),
                available_replicas: status.available_replicas.unwrap_or(0),
                current_revision: status.current_revision.unwrap_or_default(),
                update_revision: status.update_revision.unwrap_or_default(),
            },
            collision_count: status.collision_count,
            uid,
        })
    }

    /// One past the last ordinal wanted.
    pub fn end(&self) -> i32 {
        self.start.saturating_add(self.replicas.max(0))
    }

    /// Whether `ordinal` is among the wanted ones (upstream `podInOrdinalRange`).
    pub fn in_range(&self, ordinal: i32) -> bool {
        ordinal >= self.start && ordinal < self.end()
    }
}

/// What of a pod's spec the StatefulSet checks beyond [`Pod`]: the claims its volumes name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodVolumes {
    /// Volume name → `persistentVolumeClaim.claimName`, for the volumes that are claims.
    pub claims: BTreeMap<String, String>,
    pub namespace: String,
}

impl PodVolumes {
    pub fn from_value(obj: &Value) -> PodVolumes {
        let claims = array_at(obj, "/spec/volumes")
            .filter_map(|v| {
                let name = v.get("name")?.as_str()?;
                let claim = v.pointer("/persistentVolumeClaim/claimName")?.as_str()?;
                Some((name.to_string(), claim.to_string()))
            })
            .collect();
        PodVolumes {
            claims,
            namespace: obj
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        }
    }
}

/// A claimed pod of the set.
#[derive(Debug, Clone)]
pub struct SetPod {
    pub pod: Arc<Pod>,
    pub volumes: Arc<PodVolumes>,
}

impl SetPod {
    /// A cached pod, through its two views.
    pub fn of(obj: &Object) -> SetPod {
        SetPod {
            pod: obj.view(),
            volumes: obj.view(),
        }
    }
}

/// A reference from `ownerReferences`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
}

impl OwnerRef {
    /// As written into `ownerReferences` (neither controller nor blocking, as upstream's
    /// `setOwnerRef`).
    pub fn to_value(&self) -> Value {
        serde_json::json!({
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
        })
    }
}

/// A PersistentVolumeClaim, as the StatefulSet sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Claim {
    pub name: String,
    pub uid: String,
    pub deleting: bool,
    pub owners: Vec<OwnerRef>,
    pub labels: BTreeMap<String, String>,
}

impl Claim {
    pub fn from_value(obj: &Value) -> Claim {
        let s = |v: &Value, p: &str| {
            v.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        Claim {
            name: s(obj, "/metadata/name"),
            uid: s(obj, "/metadata/uid"),
            deleting: obj.pointer("/metadata/deletionTimestamp").is_some(),
            owners: array_at(obj, "/metadata/ownerReferences")
                .map(|r| OwnerRef {
                    api_version: s(r, "/apiVersion"),
                    kind: s(r, "/kind"),
                    name: s(r, "/name"),
                    uid: s(r, "/uid"),
                })
                .collect(),
            labels: string_map(obj.pointer("/metadata/labels")),
        }
    }

    pub fn owned_by(&self, uid: &str) -> bool {
        self.owners.iter().any(|o| o.uid == uid)
    }
}
impl View for PodVolumes {
    fn derive(obj: &Object) -> Self {
        or_default(obj, PodVolumes::from_value)
    }
}

impl View for Claim {
    fn derive(obj: &Object) -> Self {
        or_default(obj, Claim::from_value)
    }
}
