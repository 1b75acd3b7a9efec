//! The APIService printer (upstream `printAPIService`): where the group-version is served
//! (`Local`, or the Service's `namespace/name`) and its `Available` condition, with the reason
//! when it is not `True`.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::lookup::{list_at, opt_str, str_at};
use super::{ColumnDefinition, age_col, col, created, name, name_col};

pub(crate) fn api_service_columns() -> Vec<ColumnDefinition> {
    vec![
        name_col(),
        col(
            "Service",
            "string",
            "The reference to the service that hosts this API endpoint.",
        ),
        col("Available", "string", "Whether this service is available."),
        age_col(),
    ]
}

pub(crate) fn api_service_cells(s: &Value, now: Timestamp) -> Vec<Value> {
    let service = match s.pointer("/spec/service") {
        Some(svc) if svc.is_object() => {
            format!("{}/{}", str_at(svc, &["namespace"]), str_at(svc, &["name"]))
        }
        _ => "Local".to_string(),
    };
    let available = list_at(s, &["status", "conditions"])
        .iter()
        .find(|c| opt_str(c, &["type"]) == Some("Available"))
        .map_or_else(
            || "Unknown".to_string(),
            |c| {
                let status = str_at(c, &["status"]);
                match opt_str(c, &["reason"]) {
                    Some(reason) if !reason.is_empty() && status != "True" => {
                        format!("{status} ({reason})")
                    }
                    _ => status.to_string(),
                }
            },
        );
    vec![name(s), json!(service), json!(available), created(s, now)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::fixture;

    #[test]
    fn local_and_remote_services_print_where_they_are_served_and_why_not_available() {
        let now = fixture::now();
        let with = |spec: Value, conditions: Value| {
            json!({"metadata": {"name": "v1beta1.metrics.k8s.io",
                                "creationTimestamp": "2024-05-01T11:59:00Z"},
                   "spec": spec, "status": {"conditions": conditions}})
        };
        assert_eq!(
            api_service_cells(
                &with(
                    json!({}),
                    json!([{"type": "Available", "status": "True", "reason": "Local"}])
                ),
                now
            ),
            [
                json!("v1beta1.metrics.k8s.io"),
                json!("Local"),
                json!("True"),
                json!("60s")
            ]
        );
        assert_eq!(
            api_service_cells(
                &with(
                    json!({"service": {"namespace": "kube-system", "name": "metrics-server"}}),
                    json!([{"type": "Available", "status": "False", "reason": "MissingEndpoints"}])
                ),
                now
            )[1..3],
            [
                json!("kube-system/metrics-server"),
                json!("False (MissingEndpoints)")
            ]
        );
        assert_eq!(
            api_service_cells(&with(json!({}), json!([])), now)[2],
            json!("Unknown")
        );
    }
}
