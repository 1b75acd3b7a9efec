//! PersistentVolume, PersistentVolumeClaim and StorageClass admission: upstream's
//! `SetDefaults_*`, the StorageObjectInUseProtection plugin's finalizers on create, and
//! `ValidatePersistentVolume(Update)`, `ValidatePersistentVolumeClaim(Update)` and
//! `ValidateStorageClass(Update)` with upstream's paths and messages. The default
//! StorageClass and the resize check need the stored classes: the server does those
//! (the constants they share with the controller are here; the local-path names, which the
//! agent needs too, live in `berth_api::local_path` and are re-exported here).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec, PersistentVolumeSpec,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as WireQuantity;
use serde_json::Value;

use super::Operation;
use super::affinity::validate_node_selector;
use super::field::{FieldError, Path};
use super::names::{dns1123_subdomain, each_invalid, qualified_name};
use super::selector::validate_label_selector;
use super::volume::{no_backsteps, validate_host_path};
use crate::quantity::Quantity;

/// The finalizer that keeps a claim while a pod uses it (StorageObjectInUseProtection).
pub const PVC_PROTECTION: &str = "kubernetes.io/pvc-protection";
/// The finalizer that keeps a volume while it is bound.
pub const PV_PROTECTION: &str = "kubernetes.io/pv-protection";
/// The annotation naming the default StorageClass.
pub const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";
const BETA_DEFAULT_CLASS_ANNOTATION: &str = "storageclass.beta.kubernetes.io/is-default-class";
/// The claim annotation the scheduler sets when it places a pod using a
/// WaitForFirstConsumer claim.
pub const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// The built-in local-path provisioner's names (in `berth-api`, which the agent shares).
pub use berth_api::local_path::{
    DEFAULT_LOCAL_PATH_DIR, LOCAL_PATH_CLASS, LOCAL_PATH_CLEANUP, LOCAL_PATH_DIR_ANNOTATION,
    LOCAL_PATH_PROVISIONER,
};

pub const READ_WRITE_ONCE: &str = "ReadWriteOnce";
pub const READ_ONLY_MANY: &str = "ReadOnlyMany";
pub const READ_WRITE_MANY: &str = "ReadWriteMany";
pub const READ_WRITE_ONCE_POD: &str = "ReadWriteOncePod";
/// Upstream's supported access modes, sorted as its error messages list them.
const ACCESS_MODES: &[&str] = &[
    READ_ONLY_MANY,
    READ_WRITE_MANY,
    READ_WRITE_ONCE,
    READ_WRITE_ONCE_POD,
];
const VOLUME_MODES: &[&str] = &["Block", "Filesystem"];
const PV_RECLAIM_POLICIES: &[&str] = &["Delete", "Recycle", "Retain"];
const CLASS_RECLAIM_POLICIES: &[&str] = &["Delete", "Retain"];
const BINDING_MODES: &[&str] = &["Immediate", "WaitForFirstConsumer"];
/// Upstream `maxProvisionerParameterSize` and `maxProvisionerParameterLen`.
const MAX_PARAMETERS_BYTES: usize = 256 * 1024;
const MAX_PARAMETERS: usize = 512;

/// The persistent volume sources Berth stores (it mounts `hostPath` and `local`); the
/// key names of `PersistentVolumeSpec`'s one-of, in upstream's checking order.
const PV_SOURCES: &[&str] = &[
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "glusterfs",
    "flocker",
    "nfs",
    "rbd",
    "quobyte",
    "cephfs",
    "iscsi",
    "cinder",
    "fc",
    "flexVolume",
    "azureFile",
    "vsphereVolume",
    "photonPersistentDisk",
    "portworxVolume",
    "azureDisk",
    "scaleIO",
    "local",
    "storageos",
    "csi",
];

fn add_finalizer(finalizers: &mut Option<Vec<String>>, name: &str) {
    let list = finalizers.get_or_insert_with(Vec::new);
    if !list.iter().any(|f| f == name) {
        list.push(name.to_string());
    }
}

/// Upstream `SetDefaults_PersistentVolume` (reclaim policy Retain, volume mode Filesystem,
/// phase Pending) and, on create, the `kubernetes.io/pv-protection` finalizer.
pub(crate) fn default_persistent_volume(pv: &mut PersistentVolume, op: Operation) {
    let spec = pv.spec.get_or_insert_with(Default::default);
    spec.persistent_volume_reclaim_policy
        .get_or_insert_with(|| "Retain".to_string());
    spec.volume_mode
        .get_or_insert_with(|| "Filesystem".to_string());
    if let Some(h) = &mut spec.host_path {
        h.type_.get_or_insert_with(String::new);
    }
    let status = pv.status.get_or_insert_with(Default::default);
    status.phase.get_or_insert_with(|| "Pending".to_string());
    if op == Operation::Create {
        add_finalizer(&mut pv.metadata.finalizers, PV_PROTECTION);
    }
}

/// Upstream `SetDefaults_PersistentVolumeClaim` (volume mode Filesystem, phase Pending) and,
/// on create, the `kubernetes.io/pvc-protection` finalizer.
pub(crate) fn default_persistent_volume_claim(pvc: &mut PersistentVolumeClaim, op: Operation) {
    let spec = pvc.spec.get_or_insert_with(Default::default);
    spec.volume_mode
        .get_or_insert_with(|| "Filesystem".to_string());
    let status = pvc.status.get_or_insert_with(Default::default);
    status.phase.get_or_insert_with(|| "Pending".to_string());
    if op == Operation::Create {
        add_finalizer(&mut pvc.metadata.finalizers, PVC_PROTECTION);
    }
}

/// Upstream `SetDefaults_StorageClass`: reclaim policy Delete, binding mode Immediate.
pub(crate) fn default_storage_class(sc: &mut StorageClass) {
    sc.reclaim_policy
        .get_or_insert_with(|| "Delete".to_string());
    sc.volume_binding_mode
        .get_or_insert_with(|| "Immediate".to_string());
}

/// Access modes: at least one (with `required_detail`), each supported, ReadWriteOncePod alone.
fn validate_access_modes(modes: &[String], path: &Path, required_detail: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if modes.is_empty() {
        errs.push(FieldError::required(path, required_detail));
    }
    for m in modes {
        if !ACCESS_MODES.contains(&m.as_str()) {
            errs.push(FieldError::not_supported(path, m.as_str(), ACCESS_MODES));
        }
    }
    if modes.len() > 1 && modes.iter().any(|m| m == READ_WRITE_ONCE_POD) {
        errs.push(FieldError::forbidden(
            path,
            "may not use ReadWriteOncePod with other access modes",
        ));
    }
    errs
}

/// A storage quantity: valid syntax, not negative, greater than zero.
fn validate_storage_quantity(q: &WireQuantity, path: &Path) -> Vec<FieldError> {
    match Quantity::parse(&q.0) {
        Err(msg) => vec![FieldError::invalid(path, q.0.as_str(), msg)],
        Ok(v) if v.is_negative() => vec![
            FieldError::invalid(path, q.0.as_str(), "must be greater than or equal to 0"),
            FieldError::invalid(path, q.0.as_str(), "must be greater than zero"),
        ],
        Ok(v) if !v.is_positive() => vec![FieldError::invalid(
            path,
            q.0.as_str(),
            "must be greater than zero",
        )],
        Ok(_) => Vec::new(),
    }
}

fn validate_class_name(name: Option<&str>, path: &Path) -> Vec<FieldError> {
    match name {
        Some(n) if !n.is_empty() => each_invalid(path, n, dns1123_subdomain(n)),
        _ => Vec::new(),
    }
}

fn validate_volume_mode(mode: Option<&str>, path: &Path) -> Vec<FieldError> {
    match mode {
        Some(m) if !VOLUME_MODES.contains(&m) => {
            vec![FieldError::not_supported(path, m, VOLUME_MODES)]
        }
        _ => Vec::new(),
    }
}

/// The volume sources set on a PV spec, in upstream's checking order.
fn pv_sources(spec: &PersistentVolumeSpec) -> Vec<&'static str> {
    let json = serde_json::to_value(spec).unwrap_or(Value::Null);
    PV_SOURCES
        .iter()
        .copied()
        .filter(|k| json.get(k).is_some_and(|v| !v.is_null()))
        .collect()
}

/// Upstream `ValidatePersistentVolume` (and `ValidatePersistentVolumeUpdate` with `old`).
pub(crate) fn validate_persistent_volume(
    pv: &PersistentVolume,
    old: Option<&PersistentVolume>,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let sp = Path::new("spec");
    let empty = PersistentVolumeSpec::default();
    let spec = pv.spec.as_ref().unwrap_or(&empty);
    errs.extend(validate_access_modes(
        spec.access_modes.as_deref().unwrap_or_default(),
        &sp.child("accessModes"),
        "",
    ));
    let capacity = spec.capacity.clone().unwrap_or_default();
    let cp = sp.child("capacity");
    if capacity.is_empty() {
        errs.push(FieldError::required(&cp, ""));
    }
    if !capacity.contains_key("storage") || capacity.len() > 1 {
        errs.push(FieldError::not_supported(
            &cp,
            capacity_value(&capacity),
            &["storage"],
        ));
    }
    for (name, q) in &capacity {
        errs.extend(validate_storage_quantity(q, &cp.key(name)));
    }
    if let Some(p) = spec.persistent_volume_reclaim_policy.as_deref()
        && !p.is_empty()
        && !PV_RECLAIM_POLICIES.contains(&p)
    {
        errs.push(FieldError::not_supported(
            &sp.child("persistentVolumeReclaimPolicy"),
            p,
            PV_RECLAIM_POLICIES,
        ));
    }
    let na = sp.child("nodeAffinity");
    match spec.node_affinity.as_ref().map(|a| a.required.as_ref()) {
        None => {}
        Some(None) => errs.push(FieldError::required(
            &na.child("required"),
            "must specify required node constraints",
        )),
        Some(Some(req)) => errs.extend(validate_node_selector(req, &na.child("required"))),
    }
    errs.extend(validate_pv_sources(spec, &sp));
    errs.extend(validate_class_name(
        spec.storage_class_name.as_deref(),
        &sp.child("storageClassName"),
    ));
    errs.extend(validate_volume_mode(
        spec.volume_mode.as_deref(),
        &sp.child("volumeMode"),
    ));
    if let Some(c) = &spec.claim_ref
        && c.name.as_deref().unwrap_or_default().is_empty()
    {
        errs.push(FieldError::required(
            &sp.child("claimRef").child("name"),
            "",
        ));
    }
    if let Some(o) = old {
        errs.extend(validate_persistent_volume_update(spec, o));
    }
    errs
}

/// How upstream prints a capacity map in an error (`core.ResourceList{"cpu":…}` is printed
/// with `%v`): `map[cpu:1]`.
fn capacity_value(capacity: &BTreeMap<String, WireQuantity>) -> String {
    let items: Vec<String> = capacity
        .iter()
        .map(|(k, v)| format!("{k}:{}", v.0))
        .collect();
    format!("map[{}]", items.join(" "))
}

/// Exactly one volume source, and the rules of the ones Berth mounts (hostPath, local).
fn validate_pv_sources(spec: &PersistentVolumeSpec, sp: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let sources = pv_sources(spec);
    match sources.as_slice() {
        [] => errs.push(FieldError::required(sp, "must specify a volume type")),
        [_, rest @ ..] => {
            for extra in rest {
                errs.push(FieldError::forbidden(
                    &sp.child(extra),
                    "may not specify more than 1 volume type",
                ));
            }
        }
    }
    let first = sources.first().copied();
    if let (Some("hostPath"), Some(h)) = (first, &spec.host_path) {
        errs.extend(validate_host_path(h, &sp.child("hostPath"), true));
    }
    if let (Some("local"), Some(l)) = (first, &spec.local) {
        let lp = sp.child("local").child("path");
        if l.path.is_empty() {
            errs.push(FieldError::required(&lp, ""));
        } else {
            errs.extend(no_backsteps(&l.path, &lp));
        }
        if spec.node_affinity.is_none() {
            errs.push(FieldError::required(
                &Path::new("metadata").child("annotations"),
                "Local volume requires node affinity",
            ));
        }
    }
    errs
}

/// `ValidatePersistentVolumeUpdate`: the source, volume mode and (once set) node affinity
/// are immutable.
fn validate_persistent_volume_update(
    spec: &PersistentVolumeSpec,
    old: &PersistentVolume,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let empty = PersistentVolumeSpec::default();
    let old_spec = old.spec.as_ref().unwrap_or(&empty);
    let source = |s: &PersistentVolumeSpec| -> Vec<Value> {
        let json = serde_json::to_value(s).unwrap_or(Value::Null);
        PV_SOURCES
            .iter()
            .map(|k| json.get(k).cloned().unwrap_or(Value::Null))
            .collect()
    };
    if source(spec) != source(old_spec) {
        errs.push(FieldError::forbidden(
            &Path::new("spec").child("persistentvolumesource"),
            "spec.persistentvolumesource is immutable after creation",
        ));
    }
    if spec.volume_mode != old_spec.volume_mode {
        errs.push(FieldError::immutable(
            &Path::new("volumeMode"),
            spec.volume_mode.clone().unwrap_or_default(),
        ));
    }
    if old_spec.node_affinity.is_some() && spec.node_affinity != old_spec.node_affinity {
        errs.push(FieldError::immutable(
            &Path::new("nodeAffinity"),
            serde_json::to_value(&spec.node_affinity).unwrap_or(Value::Null),
        ));
    }
    errs
}

/// Upstream `ValidatePersistentVolumeClaimSpec`.
fn validate_claim_spec(spec: &PersistentVolumeClaimSpec, sp: &Path) -> Vec<FieldError> {
    let mut errs = validate_access_modes(
        spec.access_modes.as_deref().unwrap_or_default(),
        &sp.child("accessModes"),
        "at least 1 access mode is required",
    );
    if let Some(sel) = &spec.selector {
        errs.extend(validate_label_selector(sel, &sp.child("selector")));
    }
    let rp = sp.child("resources").key("storage");
    match claim_request(spec) {
        None => errs.push(FieldError::required(&rp, "")),
        Some(q) => errs.extend(validate_storage_quantity(q, &rp)),
    }
    errs.extend(validate_class_name(
        spec.storage_class_name.as_deref(),
        &sp.child("storageClassName"),
    ));
    errs.extend(validate_volume_mode(
        spec.volume_mode.as_deref(),
        &sp.child("volumeMode"),
    ));
    errs
}

/// The claim's `resources.requests.storage`.
pub fn claim_request(spec: &PersistentVolumeClaimSpec) -> Option<&WireQuantity> {
    spec.resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
}

/// Upstream `ValidatePersistentVolumeClaim` (and `ValidatePersistentVolumeClaimUpdate`).
pub(crate) fn validate_persistent_volume_claim(
    pvc: &PersistentVolumeClaim,
    old: Option<&PersistentVolumeClaim>,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let sp = Path::new("spec");
    let empty = PersistentVolumeClaimSpec::default();
    let spec = pvc.spec.as_ref().unwrap_or(&empty);
    errs.extend(validate_claim_spec(spec, &sp));
    if let Some(o) = old {
        errs.extend(validate_claim_update(pvc, spec, o));
    }
    errs
}

/// `ValidatePersistentVolumeClaimUpdate`: the spec is immutable except the storage request
/// of a bound claim (never smaller), a `volumeName` that was empty and a class that was
/// unset (the retroactive default).
fn validate_claim_update(
    pvc: &PersistentVolumeClaim,
    spec: &PersistentVolumeClaimSpec,
    old: &PersistentVolumeClaim,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let empty = PersistentVolumeClaimSpec::default();
    let old_spec = old.spec.as_ref().unwrap_or(&empty);
    let mut old_clone = old_spec.clone();
    let mut new_clone = spec.clone();
    if old_spec
        .volume_name
        .as_deref()
        .unwrap_or_default()
        .is_empty()
    {
        old_clone.volume_name.clone_from(&spec.volume_name);
    }
    if old_spec.storage_class_name.is_none() {
        old_clone
            .storage_class_name
            .clone_from(&spec.storage_class_name);
    }
    let bound = pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
    if bound && let Some(old_request) = claim_request(old_spec) {
        let requests = new_clone
            .resources
            .get_or_insert_with(Default::default)
            .requests
            .get_or_insert_with(Default::default);
        requests.insert("storage".to_string(), old_request.clone());
    }
    if new_clone != old_clone {
        errs.push(FieldError::forbidden(
            &Path::new("spec"),
            "spec is immutable after creation except resources.requests for bound claims",
        ));
    }
    let parse = |q: Option<&WireQuantity>| q.and_then(|q| Quantity::parse(&q.0).ok());
    if let (Some(new), Some(old)) = (parse(claim_request(spec)), parse(claim_request(old_spec)))
        && new.cmp_to(&old).is_lt()
    {
        errs.push(FieldError::forbidden(
            &Path::new("spec")
                .child("resources")
                .child("requests")
                .child("storage"),
            "field can not be less than previous value",
        ));
    }
    errs
}

/// Upstream `ValidateStorageClass` (and `ValidateStorageClassUpdate` with `old`).
pub(crate) fn validate_storage_class(
    sc: &StorageClass,
    old: Option<&StorageClass>,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let pp = Path::new("provisioner");
    if sc.provisioner.is_empty() {
        errs.push(FieldError::required(&pp, ""));
    } else {
        for msg in qualified_name(&sc.provisioner.to_lowercase()) {
            errs.push(FieldError::invalid(&pp, sc.provisioner.as_str(), msg));
        }
    }
    errs.extend(validate_parameters(sc.parameters.as_ref()));
    let policy = sc.reclaim_policy.as_deref().unwrap_or_default();
    if !CLASS_RECLAIM_POLICIES.contains(&policy) {
        errs.push(FieldError::not_supported(
            &Path::new("reclaimPolicy"),
            policy,
            CLASS_RECLAIM_POLICIES,
        ));
    }
    let bp = Path::new("volumeBindingMode");
    match sc.volume_binding_mode.as_deref() {
        None => errs.push(FieldError::required(&bp, "")),
        Some(m) if !BINDING_MODES.contains(&m) => {
            errs.push(FieldError::not_supported(&bp, m, BINDING_MODES));
        }
        Some(_) => {}
    }
    if let Some(o) = old {
        errs.extend(validate_storage_class_update(sc, o));
    }
    errs
}

/// Upstream `validateParameters`: at most 512 entries and 256 KiB, no empty key.
fn validate_parameters(params: Option<&BTreeMap<String, String>>) -> Vec<FieldError> {
    let Some(params) = params else {
        return Vec::new();
    };
    let path = Path::new("parameters");
    let mut errs = Vec::new();
    if params.len() > MAX_PARAMETERS {
        errs.push(FieldError::too_many(&path, params.len(), MAX_PARAMETERS));
        return errs;
    }
    let mut total = 0;
    for (k, v) in params {
        if k.is_empty() {
            errs.push(FieldError::invalid(
                &path,
                k.as_str(),
                "field can not be empty.",
            ));
        }
        total += k.len() + v.len();
    }
    if total > MAX_PARAMETERS_BYTES {
        errs.push(FieldError::too_long(&path, MAX_PARAMETERS_BYTES));
    }
    errs
}

/// `ValidateStorageClassUpdate`: parameters, provisioner, reclaim policy and binding mode
/// are fixed at creation.
fn validate_storage_class_update(sc: &StorageClass, old: &StorageClass) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let forbidden = [
        (
            "parameters",
            sc.parameters.clone().unwrap_or_default() != old.parameters.clone().unwrap_or_default(),
        ),
        ("provisioner", sc.provisioner != old.provisioner),
        ("reclaimPolicy", sc.reclaim_policy != old.reclaim_policy),
    ];
    for (field, _) in forbidden.iter().filter(|(_, changed)| *changed) {
        errs.push(FieldError::forbidden(
            &Path::new(field),
            format!("updates to {field} are forbidden."),
        ));
    }
    if sc.volume_binding_mode != old.volume_binding_mode {
        errs.push(FieldError::immutable(
            &Path::new("volumeBindingMode"),
            sc.volume_binding_mode.clone().unwrap_or_default(),
        ));
    }
    errs
}

/// Whether a StorageClass is annotated as the default one (the beta annotation counts too,
/// as upstream's `IsDefaultAnnotation`).
pub fn is_default_class(sc: &StorageClass) -> bool {
    let Some(ann) = sc.metadata.annotations.as_ref() else {
        return false;
    };
    [DEFAULT_CLASS_ANNOTATION, BETA_DEFAULT_CLASS_ANNOTATION]
        .iter()
        .any(|k| ann.get(*k).is_some_and(|v| v == "true"))
}

/// Upstream `GetDefaultClass`: among the classes annotated default, the newest (by
/// creation time; the first name in order among equally old ones). `None` when none is.
pub fn pick_default_class(classes: &[StorageClass]) -> Option<&StorageClass> {
    classes
        .iter()
        .filter(|c| is_default_class(c))
        .min_by(|a, b| {
            let created = |c: &StorageClass| c.metadata.creation_timestamp.clone();
            created(b)
                .cmp(&created(a))
                .then_with(|| a.metadata.name.cmp(&b.metadata.name))
        })
}

/// Upstream's DefaultStorageClass plugin on a claim being created: a claim with no
/// `storageClassName` field (and no beta class annotation) gets the default class's name; an
/// explicit `""` asks for no class and is left alone.
pub fn fill_default_class(claim: &mut Value, classes: &[StorageClass]) {
    let spec = &claim["spec"];
    if !spec.is_object() || spec.get("storageClassName").is_some_and(|c| !c.is_null()) {
        return;
    }
    let beta = claim
        .pointer("/metadata/annotations/volume.beta.kubernetes.io~1storage-class")
        .and_then(Value::as_str)
        .is_some_and(|c| !c.is_empty());
    if beta {
        return;
    }
    if let Some(name) = pick_default_class(classes).and_then(|c| c.metadata.name.clone()) {
        claim["spec"]["storageClassName"] = Value::String(name);
    }
}

/// The message of upstream's PersistentVolumeClaimResize plugin when a claim's request grows
/// and its class does not allow expansion.
pub const RESIZE_FORBIDDEN: &str = "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize";

/// Upstream's PersistentVolumeClaimResize plugin: whether the update of `old` to `new` grows
/// the storage request of a claim whose class (unchanged, named) does not allow expansion.
pub fn resize_forbidden(
    new: &PersistentVolumeClaim,
    old: &PersistentVolumeClaim,
    class: Option<&StorageClass>,
) -> bool {
    let request = |c: &PersistentVolumeClaim| {
        c.spec
            .as_ref()
            .and_then(claim_request)
            .and_then(|q| Quantity::parse(&q.0).ok())
    };
    let grows = match (request(new), request(old)) {
        (Some(n), Some(o)) => n.cmp_to(&o).is_gt(),
        _ => false,
    };
    if !grows {
        return false;
    }
    let class_name = |c: &PersistentVolumeClaim| {
        c.spec
            .as_ref()
            .and_then(|s| s.storage_class_name.clone())
            .unwrap_or_default()
    };
    let name = class_name(new);
    let allowed = !name.is_empty()
        && name == class_name(old)
        && class.is_some_and(|c| c.allow_volume_expansion == Some(true));
    !allowed
}

#[cfg(test)]
#[path = "storage_tests.rs"]
mod tests;
