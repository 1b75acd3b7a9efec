//! Printers for the storage kinds: PersistentVolume, PersistentVolumeClaim and StorageClass
//! (upstream's `printPersistentVolume`, `printPersistentVolumeClaim`, `printStorageClass`).

use jiff::Timestamp;
use serde_json::{Value, json};

use super::lookup::{has, list_at, opt_bool, opt_str, str_at};
use super::{ColumnDefinition, age_col, col, created, name, name_col, wide};

/// The beta annotation that named a class before `storageClassName` existed; upstream's
/// printers still prefer it.
const BETA_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

/// Upstream `GetAccessModesAsString`: each mode once, always in the order RWO, ROX, RWX, RWOP.
fn access_modes(modes: &[Value]) -> String {
    let has = |m: &str| modes.iter().any(|v| v.as_str() == Some(m));
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(mode, _)| has(mode))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

/// `GetPersistentVolumeClass` / `GetPersistentVolumeClaimClass`: the beta annotation, else
/// `spec.storageClassName`.
fn class_of(obj: &Value) -> String {
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get(BETA_CLASS_ANNOTATION))
        .and_then(Value::as_str)
        .unwrap_or_else(|| str_at(obj, &["spec", "storageClassName"]))
        .to_string()
}

/// The phase, or `Terminating` once deletion has started.
fn phase(obj: &Value) -> String {
    if has(obj, &["metadata", "deletionTimestamp"]) {
        "Terminating".to_string()
    } else {
        str_at(obj, &["status", "phase"]).to_string()
    }
}

fn unset_or(obj: &Value, path: &[&str]) -> String {
    opt_str(obj, path).unwrap_or("<unset>").to_string()
}

pub(crate) fn persistent_volume_columns() -> Vec<ColumnDefinition> {
    vec![
        name_col(),
        col(
            "Capacity",
            "string",
            "capacity is the description of the persistent volume's resources and capacity.",
        ),
        col(
            "Access Modes",
            "string",
            "accessModes contains all ways the volume can be mounted.",
        ),
        col(
            "Reclaim Policy",
            "string",
            "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim.",
        ),
        col(
            "Status",
            "string",
            "phase indicates if a volume is available, bound to a claim, or released by a claim.",
        ),
        col(
            "Claim",
            "string",
            "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim.",
        ),
        col("StorageClass", "string", "StorageClass of the pv"),
        col(
            "VolumeAttributesClass",
            "string",
            "VolumeAttributesClass of the pv",
        ),
        col(
            "Reason",
            "string",
            "reason is a brief CamelCase string that describes any failure and is meant for machine parsing and tidy display in the CLI.",
        ),
        age_col(),
        wide(
            "VolumeMode",
            "string",
            "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state.",
        ),
    ]
}

pub(crate) fn persistent_volume_cells(pv: &Value, now: Timestamp) -> Vec<Value> {
    let claim = match pv.pointer("/spec/claimRef") {
        Some(r) if r.is_object() => {
            format!("{}/{}", str_at(r, &["namespace"]), str_at(r, &["name"]))
        }
        _ => String::new(),
    };
    vec![
        name(pv),
        json!(str_at(pv, &["spec", "capacity", "storage"])),
        json!(access_modes(list_at(pv, &["spec", "accessModes"]))),
        json!(str_at(pv, &["spec", "persistentVolumeReclaimPolicy"])),
        json!(phase(pv)),
        json!(claim),
        json!(class_of(pv)),
        json!(unset_or(pv, &["spec", "volumeAttributesClassName"])),
        json!(str_at(pv, &["status", "reason"])),
        created(pv, now),
        json!(unset_or(pv, &["spec", "volumeMode"])),
    ]
}

pub(crate) fn persistent_volume_claim_columns() -> Vec<ColumnDefinition> {
    vec![
        name_col(),
        col(
            "Status",
            "string",
            "phase represents the current phase of PersistentVolumeClaim.",
        ),
        col(
            "Volume",
            "string",
            "volumeName is the binding reference to the PersistentVolume backing this claim.",
        ),
        col(
            "Capacity",
            "string",
            "capacity represents the actual resources of the underlying volume.",
        ),
        col(
            "Access Modes",
            "string",
            "accessModes contains the actual access modes the volume backing the PVC has.",
        ),
        col("StorageClass", "string", "StorageClass of the pvc"),
        col(
            "VolumeAttributesClass",
            "string",
            "VolumeAttributesClass of the pvc",
        ),
        age_col(),
        wide(
            "VolumeMode",
            "string",
            "volumeMode defines what type of volume is required by the claim.",
        ),
    ]
}

/// Capacity and access modes come from the status, and only once the claim names a volume.
pub(crate) fn persistent_volume_claim_cells(pvc: &Value, now: Timestamp) -> Vec<Value> {
    let volume = str_at(pvc, &["spec", "volumeName"]);
    let (capacity, modes) = if volume.is_empty() {
        (String::new(), String::new())
    } else {
        (
            str_at(pvc, &["status", "capacity", "storage"]).to_string(),
            access_modes(list_at(pvc, &["status", "accessModes"])),
        )
    };
    vec![
        name(pvc),
        json!(phase(pvc)),
        json!(volume),
        json!(capacity),
        json!(modes),
        json!(class_of(pvc)),
        json!(unset_or(pvc, &["spec", "volumeAttributesClassName"])),
        created(pvc, now),
        json!(unset_or(pvc, &["spec", "volumeMode"])),
    ]
}

pub(crate) fn storage_class_columns() -> Vec<ColumnDefinition> {
    vec![
        name_col(),
        col(
            "Provisioner",
            "string",
            "provisioner indicates the type of the provisioner.",
        ),
        col(
            "ReclaimPolicy",
            "string",
            "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class.",
        ),
        col(
            "VolumeBindingMode",
            "string",
            "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.",
        ),
        col(
            "AllowVolumeExpansion",
            "string",
            "allowVolumeExpansion shows whether the storage class allow volume expand.",
        ),
        age_col(),
    ]
}

/// The default class's name gets ` (default)`, as upstream's `IsDefaultAnnotation` decides.
pub(crate) fn storage_class_cells(sc: &Value, now: Timestamp) -> Vec<Value> {
    let annotations = sc.pointer("/metadata/annotations");
    let is_default = [
        "storageclass.kubernetes.io/is-default-class",
        "storageclass.beta.kubernetes.io/is-default-class",
    ]
    .iter()
    .any(|k| annotations.and_then(|a| a.get(*k)).and_then(Value::as_str) == Some("true"));
    let mut shown = str_at(sc, &["metadata", "name"]).to_string();
    if is_default {
        shown.push_str(" (default)");
    }
    vec![
        json!(shown),
        json!(str_at(sc, &["provisioner"])),
        json!(opt_str(sc, &["reclaimPolicy"]).unwrap_or("Delete")),
        json!(opt_str(sc, &["volumeBindingMode"]).unwrap_or("Immediate")),
        json!(opt_bool(sc, &["allowVolumeExpansion"]).unwrap_or(false)),
        created(sc, now),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        "2026-01-01T00:10:00Z".parse().expect("a timestamp")
    }

    fn meta(name: &str) -> Value {
        json!({"name": name, "creationTimestamp": "2026-01-01T00:00:00Z"})
    }

    #[test]
    fn volumes_print_capacity_short_modes_claim_and_class_like_upstream() {
        let pv = json!({"metadata": meta("pvc-1"), "spec": {"capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteMany", "ReadWriteOnce", "ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "local-path",
            "claimRef": {"namespace": "default", "name": "data"}, "volumeMode": "Filesystem"},
            "status": {"phase": "Bound"}});
        assert_eq!(
            persistent_volume_cells(&pv, now()),
            vec![
                json!("pvc-1"),
                json!("1Gi"),
                json!("RWO,RWX"),
                json!("Delete"),
                json!("Bound"),
                json!("default/data"),
                json!("local-path"),
                json!("<unset>"),
                json!(""),
                json!("10m"),
                json!("Filesystem"),
            ]
        );
        assert_eq!(
            persistent_volume_columns().len(),
            persistent_volume_cells(&pv, now()).len()
        );
        let mut deleting = pv.clone();
        deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:09:00Z");
        deleting["spec"]["claimRef"] = Value::Null;
        let cells = persistent_volume_cells(&deleting, now());
        assert_eq!(cells[4..6], [json!("Terminating"), json!("")]);
    }

    #[test]
    fn claims_show_capacity_and_modes_only_once_bound_to_a_volume() {
        let pending = json!({"metadata": meta("data"), "spec": {"accessModes": ["ReadWriteOncePod"],
            "resources": {"requests": {"storage": "1Gi"}}, "storageClassName": "local-path"},
            "status": {"phase": "Pending"}});
        assert_eq!(
            persistent_volume_claim_cells(&pending, now()),
            vec![
                json!("data"),
                json!("Pending"),
                json!(""),
                json!(""),
                json!(""),
                json!("local-path"),
                json!("<unset>"),
                json!("10m"),
                json!("<unset>"),
            ]
        );
        let mut bound = pending.clone();
        bound["spec"]["volumeName"] = json!("pvc-1");
        bound["status"] = json!({"phase": "Bound", "capacity": {"storage": "2Gi"},
            "accessModes": ["ReadWriteOncePod"]});
        let cells = persistent_volume_claim_cells(&bound, now());
        assert_eq!(
            cells[1..5],
            [json!("Bound"), json!("pvc-1"), json!("2Gi"), json!("RWOP")]
        );
        assert_eq!(persistent_volume_claim_columns().len(), cells.len());
    }

    #[test]
    fn the_default_class_is_marked_and_unset_fields_print_upstreams_defaults() {
        let sc = json!({"metadata": {"name": "local-path", "creationTimestamp": "2026-01-01T00:00:00Z",
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": "berth.io/local-path", "reclaimPolicy": "Delete",
            "volumeBindingMode": "WaitForFirstConsumer"});
        assert_eq!(
            storage_class_cells(&sc, now()),
            vec![
                json!("local-path (default)"),
                json!("berth.io/local-path"),
                json!("Delete"),
                json!("WaitForFirstConsumer"),
                json!(false),
                json!("10m"),
            ]
        );
        let bare = json!({"metadata": meta("slow"), "provisioner": "example.com/nfs",
            "allowVolumeExpansion": true});
        assert_eq!(
            storage_class_cells(&bare, now())[..5],
            [
                json!("slow"),
                json!("example.com/nfs"),
                json!("Delete"),
                json!("Immediate"),
                json!(true)
            ]
        );
    }
}
