//! Server-side printing: the `meta.k8s.io/v1` Table columns and cells of each kind, computed like
//! upstream `pkg/printers/internalversion` (Kubernetes 1.31) so stock `kubectl get` output matches.
//!
//! The server always renders every column (upstream passes `Wide: true`); kubectl hides the
//! `priority > 0` ones unless `-o wide` is given.

mod admission;
mod api_service;
mod apps;
mod autoscaling;
mod batch;
mod certificates;
mod cluster;
mod core;
mod csi;
pub(crate) mod duration;
#[cfg(test)]
mod fixture;
mod lookup;
mod network;
mod networking;
mod pod;
mod policy;
mod rbac;
mod scheduling;
mod selector;
mod storage;
mod stream;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

pub use duration::{age, human_duration};
pub use stream::{TableList, write_table};

use lookup::{list_at, opt_str, str_at};

/// One column of a Table (`metav1.TableColumnDefinition`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ColumnDefinition {
    pub name: String,
    #[serde(rename = "type")]
    pub type_: String,
    pub format: String,
    pub description: String,
    pub priority: i32,
}

/// A column shown by plain `kubectl get`.
pub(crate) fn col(name: &str, type_: &str, description: &str) -> ColumnDefinition {
    ColumnDefinition {
        name: name.to_string(),
        type_: type_.to_string(),
        format: String::new(),
        description: description.to_string(),
        priority: 0,
    }
}

/// A column shown only by `kubectl get -o wide`.
pub(crate) fn wide(name: &str, type_: &str, description: &str) -> ColumnDefinition {
    ColumnDefinition {
        priority: 1,
        ..col(name, type_, description)
    }
}

/// The `Name` column every printer starts with (format `name`).
pub(crate) fn name_col() -> ColumnDefinition {
    ColumnDefinition {
        format: "name".to_string(),
        ..col(
            "Name",
            "string",
            "Name of the object, unique within its namespace.",
        )
    }
}

/// The `Age` column.
pub(crate) fn age_col() -> ColumnDefinition {
    col(
        "Age",
        "string",
        "Time since the object was created (metadata.creationTimestamp).",
    )
}

/// The wide `Containers` and `Images` columns of the workload printers.
pub(crate) fn container_cols() -> [ColumnDefinition; 2] {
    [
        wide(
            "Containers",
            "string",
            "Names of each container in the template.",
        ),
        wide(
            "Images",
            "string",
            "Images referenced by each container in the template.",
        ),
    ]
}

/// A workload printer's columns: the name, the kind's own `columns`, the age, then the wide
/// containers and images of its pod template and, for a kind that has one, the wide selector
/// (described as `selector`).
pub(crate) fn workload_columns(
    columns: Vec<ColumnDefinition>,
    selector: Option<&str>,
) -> Vec<ColumnDefinition> {
    let [containers, images] = container_cols();
    let mut out = vec![name_col()];
    out.extend(columns);
    out.extend([age_col(), containers, images]);
    out.extend(selector.map(|s| wide("Selector", "string", s)));
    out
}

/// A workload printer's cells, matching [`workload_columns`]: its own `cells` (name to age),
/// then the containers and images of the pod template in the workload spec at `spec`, and the
/// `selector` for a kind that prints one.
pub(crate) fn workload_cells(
    obj: &Value,
    mut cells: Vec<Value>,
    spec: &[&str],
    selector: Option<String>,
) -> Vec<Value> {
    let template: Vec<&str> = spec.iter().copied().chain(["template", "spec"]).collect();
    cells.extend(container_cells(obj, &template));
    cells.extend(selector.map(|s| json!(s)));
    cells
}

/// The Table columns for a kind, in upstream order; unknown kinds get the default table.
pub fn columns(kind: &str) -> Vec<ColumnDefinition> {
    match kind {
        "Pod" => pod::columns(),
        "Node" => cluster::node_columns(),
        "Namespace" => cluster::namespace_columns(),
        "Lease" => cluster::lease_columns(),
        "Event" => core::event_columns(),
        "ConfigMap" => core::config_map_columns(),
        "Secret" => core::secret_columns(),
        "ReplicationController" | "ReplicaSet" => apps::replica_set_columns(),
        "Deployment" => apps::deployment_columns(),
        "StatefulSet" => apps::stateful_set_columns(),
        "DaemonSet" => apps::daemon_set_columns(),
        "ControllerRevision" => apps::controller_revision_columns(),
        "Job" => batch::job_columns(),
        "CronJob" => batch::cron_job_columns(),
        "PodDisruptionBudget" => policy::pdb_columns(),
        "PriorityClass" => scheduling::priority_class_columns(),
        "HorizontalPodAutoscaler" => autoscaling::hpa_columns(),
        "Scale" => autoscaling::scale_columns(),
        "ServiceAccount" => rbac::service_account_columns(),
        "RoleBinding" | "ClusterRoleBinding" => rbac::binding_columns(),
        "Service" => network::service_columns(),
        "Endpoints" => network::endpoints_columns(),
        "EndpointSlice" => network::endpoint_slice_columns(),
        "PersistentVolume" => storage::persistent_volume_columns(),
        "PersistentVolumeClaim" => storage::persistent_volume_claim_columns(),
        "StorageClass" => storage::storage_class_columns(),
        "CertificateSigningRequest" => certificates::csr_columns(),
        "ValidatingAdmissionPolicy" => admission::policy_columns(),
        "ValidatingAdmissionPolicyBinding" => admission::binding_columns(),
        "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" => {
            admission::webhook_configuration_columns()
        }
        "Ingress" => networking::ingress_columns(),
        "IngressClass" => networking::ingress_class_columns(),
        "NetworkPolicy" => networking::network_policy_columns(),
        "RuntimeClass" => cluster::runtime_class_columns(),
        "CSIDriver" => csi::csi_driver_columns(),
        "CSINode" => csi::csi_node_columns(),
        "VolumeAttachment" => csi::volume_attachment_columns(),
        "APIService" => api_service::api_service_columns(),
        _ => default_columns(),
    }
}

/// One row's cells for an object of the given kind: same length and order as [`columns`].
/// Counts are JSON integers, everything else strings.
pub fn cells(kind: &str, obj: &Value, now: Timestamp) -> Vec<Value> {
    match kind {
        "Pod" => pod::cells(obj, now),
        "Node" => cluster::node_cells(obj, now),
        "Namespace" => cluster::namespace_cells(obj, now),
        "Lease" => cluster::lease_cells(obj, now),
        "Event" => core::event_cells(obj, now),
        "ConfigMap" => core::config_map_cells(obj, now),
        "Secret" => core::secret_cells(obj, now),
        "ReplicationController" => apps::replication_controller_cells(obj, now),
        "ReplicaSet" => apps::replica_set_cells(obj, now),
        "Deployment" => apps::deployment_cells(obj, now),
        "StatefulSet" => apps::stateful_set_cells(obj, now),
        "DaemonSet" => apps::daemon_set_cells(obj, now),
        "ControllerRevision" => apps::controller_revision_cells(obj, now),
        "Job" => batch::job_cells(obj, now),
        "CronJob" => batch::cron_job_cells(obj, now),
        "PodDisruptionBudget" => policy::pdb_cells(obj, now),
        "PriorityClass" => scheduling::priority_class_cells(obj, now),
        "HorizontalPodAutoscaler" => autoscaling::hpa_cells(obj, now),
        "Scale" => autoscaling::scale_cells(obj, now),
        "ServiceAccount" => rbac::service_account_cells(obj, now),
        "RoleBinding" | "ClusterRoleBinding" => rbac::binding_cells(obj, now),
        "Service" => network::service_cells(obj, now),
        "Endpoints" => network::endpoints_cells(obj, now),
        "EndpointSlice" => network::endpoint_slice_cells(obj, now),
        "PersistentVolume" => storage::persistent_volume_cells(obj, now),
        "PersistentVolumeClaim" => storage::persistent_volume_claim_cells(obj, now),
        "StorageClass" => storage::storage_class_cells(obj, now),
        "CertificateSigningRequest" => certificates::csr_cells(obj, now),
        "ValidatingAdmissionPolicy" => admission::policy_cells(obj, now),
        "ValidatingAdmissionPolicyBinding" => admission::binding_cells(obj, now),
        "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" => {
            admission::webhook_configuration_cells(obj, now)
        }
        "Ingress" => networking::ingress_cells(obj, now),
        "IngressClass" => networking::ingress_class_cells(obj, now),
        "NetworkPolicy" => networking::network_policy_cells(obj, now),
        "RuntimeClass" => cluster::runtime_class_cells(obj, now),
        "CSIDriver" => csi::csi_driver_cells(obj, now),
        "CSINode" => csi::csi_node_cells(obj, now),
        "VolumeAttachment" => csi::volume_attachment_cells(obj, now),
        "APIService" => api_service::api_service_cells(obj, now),
        _ => default_cells(obj),
    }
}

/// The object a row carries: `meta.k8s.io/v1` PartialObjectMetadata with the full metadata, which
/// kubectl reads for the NAMESPACE column (`-A`) and `--show-labels`.
pub fn partial_object_metadata(obj: &Value) -> Value {
    let metadata = obj
        .get("metadata")
        .cloned()
        .unwrap_or_else(|| Value::Object(Map::new()));
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": metadata})
}

/// What each row's `object` carries: the `includeObject` query parameter of a Table request.
/// kubectl leaves it out (`Metadata`) except with `--sort-by`, which asks for `Object` so its
/// JSONPath can reach fields outside the metadata (`.lastTimestamp`, `.status.phase`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IncludeObject {
    /// `object: null`.
    None,
    /// A `PartialObjectMetadata` with the object's metadata (the default).
    #[default]
    Metadata,
    /// The whole object.
    Object,
}

impl IncludeObject {
    /// The parameter's value; absent or empty is `Metadata`. An unknown value is refused with
    /// upstream's message (a 400).
    pub fn parse(value: Option<&str>) -> Result<IncludeObject, String> {
        match value.unwrap_or_default() {
            "" | "Metadata" => Ok(IncludeObject::Metadata),
            "Object" => Ok(IncludeObject::Object),
            "None" => Ok(IncludeObject::None),
            other => Err(format!("unrecognized includeObject value: {other:?}")),
        }
    }
}

/// One Table row: cells, the PartialObjectMetadata object and, for finished pods, the
/// `Completed` row condition upstream attaches.
pub fn row(kind: &str, obj: &Value, now: Timestamp) -> Value {
    row_with(kind, obj, now, IncludeObject::Metadata)
}

/// One Table row whose `object` is what `include` asks for.
pub fn row_with(kind: &str, obj: &Value, now: Timestamp, include: IncludeObject) -> Value {
    let mut row = Map::new();
    row.insert("cells".to_string(), Value::Array(cells(kind, obj, now)));
    if kind == "Pod"
        && let Some(conditions) = pod::row_conditions(obj)
    {
        row.insert("conditions".to_string(), conditions);
    }
    let object = match include {
        IncludeObject::None => Value::Null,
        IncludeObject::Metadata => partial_object_metadata(obj),
        IncludeObject::Object => obj.clone(),
    };
    row.insert("object".to_string(), object);
    Value::Object(row)
}

/// A whole `meta.k8s.io/v1` Table for objects of one kind (a list, a single get, or one watch
/// event's object), rows carrying PartialObjectMetadata.
pub fn table(
    kind: &str,
    objects: &[Value],
    resource_version: Option<&str>,
    now: Timestamp,
) -> Value {
    table_with(
        kind,
        objects,
        resource_version,
        now,
        IncludeObject::Metadata,
    )
}

/// [`table`] with rows carrying what `include` asks for.
pub fn table_with(
    kind: &str,
    objects: &[Value],
    resource_version: Option<&str>,
    now: Timestamp,
    include: IncludeObject,
) -> Value {
    let mut metadata = Map::new();
    if let Some(rv) = resource_version {
        metadata.insert("resourceVersion".to_string(), Value::String(rv.to_string()));
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": columns(kind),
        "rows": objects.iter().map(|o| row_with(kind, o, now, include)).collect::<Vec<_>>(),
    })
}

/// The object's name cell.
pub(crate) fn name(obj: &Value) -> Value {
    Value::String(str_at(obj, &["metadata", "name"]).to_string())
}

/// The object's Age cell.
pub(crate) fn created(obj: &Value, now: Timestamp) -> Value {
    Value::String(age(opt_str(obj, &["metadata", "creationTimestamp"]), now))
}

/// The Containers and Images cells for the pod spec at `pod_spec` (comma-joined, in order).
pub(crate) fn container_cells(obj: &Value, pod_spec: &[&str]) -> [Value; 2] {
    let mut path = pod_spec.to_vec();
    path.push("containers");
    let containers = list_at(obj, &path);
    let names: Vec<&str> = containers.iter().map(|c| str_at(c, &["name"])).collect();
    let images: Vec<&str> = containers.iter().map(|c| str_at(c, &["image"])).collect();
    [
        Value::String(names.join(",")),
        Value::String(images.join(",")),
    ]
}

/// Upstream's default table for kinds without a printer: Name and Created At.
fn default_columns() -> Vec<ColumnDefinition> {
    vec![
        name_col(),
        col(
            "Created At",
            "date",
            "Time the object was created (metadata.creationTimestamp).",
        ),
    ]
}

fn default_cells(obj: &Value) -> Vec<Value> {
    // Go formats the zero time when the timestamp is missing.
    let created_at = duration::parse_time(opt_str(obj, &["metadata", "creationTimestamp"]))
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_else(|| "0001-01-01T00:00:00Z".to_string());
    vec![name(obj), Value::String(created_at)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::RESOURCES;
    use crate::table::fixture::now;

    #[test]
    fn every_served_kind_has_cells_matching_its_columns() {
        let empty = json!({});
        for r in RESOURCES {
            let cols = columns(r.kind);
            assert_eq!(cols.len(), cells(r.kind, &empty, now()).len(), "{}", r.kind);
            assert!(cols.iter().any(|c| c.format == "name"), "{}", r.kind);
            if r.kind != "Event" {
                assert_eq!(cols[0], name_col(), "{}", r.kind);
            }
        }
    }

    #[test]
    fn unknown_kinds_get_name_and_created_at() {
        let obj = json!({"metadata": {"name": "x", "creationTimestamp": "2024-04-30T10:00:00Z"}});
        let names: Vec<String> = columns("Widget").into_iter().map(|c| c.name).collect();
        assert_eq!(names, ["Name", "Created At"]);
        assert_eq!(
            cells("Widget", &obj, now()),
            vec![json!("x"), json!("2024-04-30T10:00:00Z")]
        );
        assert_eq!(
            cells("Widget", &json!({}), now())[1],
            json!("0001-01-01T00:00:00Z")
        );
    }

    #[test]
    fn a_table_carries_partial_object_metadata_and_the_resource_version() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cfg", "namespace": "dev", "labels": {"a": "b"},
                         "creationTimestamp": "2024-05-01T11:00:00Z"},
            "data": {"k": "v"}});
        let t = table("ConfigMap", std::slice::from_ref(&cm), Some("137"), now());
        assert_eq!(t["kind"], "Table");
        assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(t["metadata"]["resourceVersion"], "137");
        assert_eq!(t["columnDefinitions"][0]["name"], "Name");
        assert_eq!(t["columnDefinitions"][0]["format"], "name");
        assert_eq!(t["columnDefinitions"][0]["priority"], 0);
        assert_eq!(t["rows"][0]["cells"], json!(["cfg", 1, "60m"]));
        let object = &t["rows"][0]["object"];
        assert_eq!(object["kind"], "PartialObjectMetadata");
        assert_eq!(object["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(object["metadata"]["namespace"], "dev");
        assert_eq!(object["metadata"]["labels"]["a"], "b");
    }

    #[test]
    fn rows_carry_the_object_include_object_asks_for() {
        let ev = json!({"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "dev"},
            "lastTimestamp": "2024-05-01T11:59:00Z", "reason": "Started"});
        let object = |include| {
            table_with("Event", std::slice::from_ref(&ev), None, now(), include)["rows"][0]
                ["object"]
                .clone()
        };
        assert_eq!(object(IncludeObject::Object), ev);
        assert_eq!(
            object(IncludeObject::Metadata)["kind"],
            "PartialObjectMetadata"
        );
        assert_eq!(object(IncludeObject::Metadata).get("lastTimestamp"), None);
        assert_eq!(object(IncludeObject::None), Value::Null);
        let table = [
            (None, Ok(IncludeObject::Metadata)),
            (Some(""), Ok(IncludeObject::Metadata)),
            (Some("Metadata"), Ok(IncludeObject::Metadata)),
            (Some("Object"), Ok(IncludeObject::Object)),
            (Some("None"), Ok(IncludeObject::None)),
            (
                Some("object"),
                Err("unrecognized includeObject value: \"object\"".to_string()),
            ),
        ];
        for (value, want) in table {
            assert_eq!(IncludeObject::parse(value), want, "{value:?}");
        }
    }

    #[test]
    fn column_definitions_serialize_with_type_and_priority() {
        let v = serde_json::to_value(wide("IP", "string", "d")).unwrap();
        assert_eq!(
            v,
            json!({"name": "IP", "type": "string", "format": "", "description": "d", "priority": 1})
        );
    }
}
