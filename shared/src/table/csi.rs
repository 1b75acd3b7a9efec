//! Printers for the CSI kinds of storage.k8s.io: CSIDriver, CSINode and VolumeAttachment
//! (upstream's `printCSIDriver`, `printCSINode`, `printVolumeAttachment`).

use jiff::Timestamp;
use serde_json::{Value, json};

use super::lookup::{list_at, opt_bool, str_at};
use super::{ColumnDefinition, age_col, col, created, name, name_col};

pub(crate) fn csi_driver_columns() -> Vec<ColumnDefinition> {
    vec![
        name_col(),
        col(
            "AttachRequired",
            "boolean",
            "attachRequired indicates this CSI volume driver requires an attach operation (because it implements the CSI ControllerPublishVolume() method), and that the Kubernetes attach detach controller should call the attach volume interface which checks the volumeattachment status and waits until the volume is attached before proceeding to mounting.",
        ),
        col(
            "PodInfoOnMount",
            "boolean",
            "podInfoOnMount indicates this CSI volume driver requires additional pod information (like podName, podUID, etc.) during mount operations, if set to true.",
        ),
        col(
            "StorageCapacity",
            "boolean",
            "storageCapacity indicates that the CSI volume driver wants pod scheduling to consider the storage capacity that the driver deployment will report by creating CSIStorageCapacity objects with capacity information, if set to true.",
        ),
        col(
            "TokenRequests",
            "string",
            "tokenRequests indicates the CSI driver needs pods' service account tokens it is mounting volume for to do necessary authentication.",
        ),
        col(
            "RequiresRepublish",
            "boolean",
            "requiresRepublish indicates the CSI driver wants `NodePublishVolume` being periodically called to reflect any possible change in the mounted volume.",
        ),
        col(
            "Modes",
            "string",
            "volumeLifecycleModes defines what kind of volumes this CSI volume driver supports.",
        ),
        age_col(),
    ]
}

pub(crate) fn csi_driver_cells(d: &Value, now: Timestamp) -> Vec<Value> {
    let flag = |field: &str, default: bool| json!(opt_bool(d, &["spec", field]).unwrap_or(default));
    let modes: Vec<&str> = list_at(d, &["spec", "volumeLifecycleModes"])
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let modes = if modes.is_empty() {
        "<none>".to_string()
    } else {
        modes.join(",")
    };
    let tokens = match d.pointer("/spec/tokenRequests") {
        Some(Value::Array(list)) => list
            .iter()
            .map(|t| str_at(t, &["audience"]))
            .collect::<Vec<_>>()
            .join(","),
        _ => "<unset>".to_string(),
    };
    vec![
        name(d),
        flag("attachRequired", true),
        flag("podInfoOnMount", false),
        flag("storageCapacity", false),
        json!(tokens),
        flag("requiresRepublish", false),
        json!(modes),
        created(d, now),
    ]
}

pub(crate) fn csi_node_columns() -> Vec<ColumnDefinition> {
    vec![
        name_col(),
        col(
            "Drivers",
            "integer",
            "Drivers indicates the number of CSI drivers registered on the node",
        ),
        age_col(),
    ]
}

pub(crate) fn csi_node_cells(n: &Value, now: Timestamp) -> Vec<Value> {
    vec![
        name(n),
        json!(list_at(n, &["spec", "drivers"]).len()),
        created(n, now),
    ]
}

pub(crate) fn volume_attachment_columns() -> Vec<ColumnDefinition> {
    let mut attacher = col(
        "Attacher",
        "string",
        "attacher indicates the name of the volume driver that MUST handle this request. This is the name returned by GetPluginName().",
    );
    attacher.format = "name".to_string();
    vec![
        name_col(),
        attacher,
        col(
            "PV",
            "string",
            "persistentVolumeName represents the name of the persistent volume to attach.",
        ),
        col(
            "Node",
            "string",
            "nodeName represents the node that the volume should be attached to.",
        ),
        col(
            "Attached",
            "boolean",
            "attached indicates the volume is successfully attached. This field must only be set by the entity completing the attach operation, i.e. the external-attacher.",
        ),
        age_col(),
    ]
}

pub(crate) fn volume_attachment_cells(va: &Value, now: Timestamp) -> Vec<Value> {
    vec![
        name(va),
        json!(str_at(va, &["spec", "attacher"])),
        json!(str_at(va, &["spec", "source", "persistentVolumeName"])),
        json!(str_at(va, &["spec", "nodeName"])),
        json!(opt_bool(va, &["status", "attached"]).unwrap_or(false)),
        created(va, now),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::fixture;

    fn meta(name: &str) -> Value {
        json!({"name": name, "creationTimestamp": "2024-05-01T11:59:00Z"})
    }

    #[test]
    fn csi_drivers_print_their_flags_audiences_and_modes() {
        let now = fixture::now();
        let defaulted = json!({"metadata": meta("hostpath.csi.k8s.io"), "spec": {
            "attachRequired": false, "podInfoOnMount": true, "storageCapacity": false,
            "requiresRepublish": false, "volumeLifecycleModes": ["Persistent", "Ephemeral"],
            "tokenRequests": [{"audience": "vault"}, {"audience": ""}]}});
        assert_eq!(
            csi_driver_cells(&defaulted, now),
            [
                json!("hostpath.csi.k8s.io"),
                json!(false),
                json!(true),
                json!(false),
                json!("vault,"),
                json!(false),
                json!("Persistent,Ephemeral"),
                json!("60s")
            ]
        );
        let bare = json!({"metadata": meta("bare"), "spec": {}});
        let cells = csi_driver_cells(&bare, now);
        assert_eq!(cells[1], json!(true));
        assert_eq!(cells[4], json!("<unset>"));
        assert_eq!(cells[6], json!("<none>"));
        assert_eq!(csi_driver_columns().len(), cells.len());
    }

    #[test]
    fn csi_nodes_count_their_drivers() {
        let n = json!({"metadata": meta("node-1"), "spec": {"drivers": [{"name": "a"}, {"name": "b"}]}});
        assert_eq!(
            csi_node_cells(&n, fixture::now()),
            [json!("node-1"), json!(2), json!("60s")]
        );
        assert_eq!(csi_node_columns().len(), 3);
    }

    #[test]
    fn volume_attachments_print_attacher_volume_node_and_state() {
        let va = json!({"metadata": meta("csi-123"), "spec": {"attacher": "hostpath.csi.k8s.io",
            "nodeName": "node-1", "source": {"persistentVolumeName": "pv-1"}},
            "status": {"attached": true}});
        assert_eq!(
            volume_attachment_cells(&va, fixture::now()),
            [
                json!("csi-123"),
                json!("hostpath.csi.k8s.io"),
                json!("pv-1"),
                json!("node-1"),
                json!(true),
                json!("60s")
            ]
        );
        let pending = json!({"metadata": meta("p"), "spec": {"source": {"inlineVolumeSpec": {}}}});
        assert_eq!(
            volume_attachment_cells(&pending, fixture::now())[2],
            json!("")
        );
        assert_eq!(
            volume_attachment_cells(&pending, fixture::now())[4],
            json!(false)
        );
        assert_eq!(volume_attachment_columns().len(), 6);
    }
}
