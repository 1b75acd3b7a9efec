//! The HorizontalPodAutoscaler printer (upstream `printHorizontalPodAutoscaler` and
//! `formatHPAMetrics`): the scale target, each metric as `current/target` (at most two, then
//! `+ N more...`), the replica bounds and the current replicas; and autoscaling/v1 Scale, as
//! `kubectl get --subresource=scale` shows it (desired and available replicas).

use jiff::Timestamp;
use serde_json::{Value, json};

use super::lookup::int_at;
use super::{ColumnDefinition, age_col, col, created, name, name_col};

pub(crate) fn hpa_columns() -> Vec<ColumnDefinition> {
    vec![
        name_col(),
        col(
            "Reference",
            "string",
            "scaleTargetRef points to the target resource to scale, and is used to the pods for which metrics should be collected, as well as to actually change the replica count.",
        ),
        col(
            "Targets",
            "string",
            "metrics contains the specifications for which to use to calculate the desired replica count (the maximum replica count across all metrics will be used).  The desired replica count is calculated multiplying the ratio between the target value and the current value by the current number of pods.  Ergo, metrics used must decrease as the pod count is increased, and vice-versa.  See the individual metric source types for more information about how each type of metric must respond. If not set, the default metric will be set to 80% average CPU utilization.",
        ),
        col(
            "MinPods",
            "string",
            "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.  It defaults to 1 pod.  minReplicas is allowed to be 0 if the alpha feature gate HPAScaleToZero is enabled and at least one Object or External metric is configured.  Scaling is active as long as at least one metric value is available.",
        ),
        col(
            "MaxPods",
            "integer",
            "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up. It cannot be less that minReplicas.",
        ),
        col(
            "Replicas",
            "integer",
            "currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler.",
        ),
        age_col(),
    ]
}

pub(crate) fn scale_columns() -> Vec<ColumnDefinition> {
    vec![
        name_col(),
        col(
            "Desired",
            "integer",
            "replicas is the desired number of instances for the scaled object.",
        ),
        col(
            "Available",
            "integer",
            "replicas is the actual number of observed instances of the scaled object.",
        ),
        age_col(),
    ]
}

pub(crate) fn scale_cells(scale: &Value, now: Timestamp) -> Vec<Value> {
    let count = |p: &str| json!(scale.pointer(p).and_then(Value::as_i64).unwrap_or(0));
    vec![
        name(scale),
        count("/spec/replicas"),
        count("/status/replicas"),
        created(scale, now),
    ]
}

fn text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// One metric as `current/target`, as upstream words each source type.
fn metric(spec: &Value, status: Option<&Value>) -> String {
    let unknown = || "<unknown>".to_string();
    let cur = |source: &str, field: &str| {
        text(status.and_then(|s| s.pointer(&format!("/{source}/current/{field}"))))
    };
    let target = |source: &str, field: &str| {
        text(spec.pointer(&format!("/{source}/target/{field}"))).unwrap_or_default()
    };
    // `current/target` of one field of a source.
    let current_of_target = |source: &str, field: &str| {
        let c = cur(source, field).unwrap_or_else(unknown);
        format!("{c}/{}", target(source, field))
    };
    let targets_average_value = |source: &str| {
        spec.pointer(&format!("/{source}/target/averageValue"))
            .is_some()
    };
    match spec["type"].as_str().unwrap_or_default() {
        source @ ("External" | "Object") => {
            let key = if source == "External" {
                "external"
            } else {
                "object"
            };
            if targets_average_value(key) {
                format!("{} (avg)", current_of_target(key, "averageValue"))
            } else {
                current_of_target(key, "value")
            }
        }
        "Pods" => current_of_target("pods", "averageValue"),
        source @ ("Resource" | "ContainerResource") => {
            let key = if source == "Resource" {
                "resource"
            } else {
                "containerResource"
            };
            let resource = spec
                .pointer(&format!("/{key}/name"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            if targets_average_value(key) {
                format!("{resource}: {}", current_of_target(key, "averageValue"))
            } else {
                let c = cur(key, "averageUtilization")
                    .map(|u| format!("{u}%"))
                    .unwrap_or_else(unknown);
                let t = text(spec.pointer(&format!("/{key}/target/averageUtilization")))
                    .map(|u| format!("{u}%"))
                    .unwrap_or_else(|| "<auto>".to_string());
                format!("{resource}: {c}/{t}")
            }
        }
        _ => "<unknown type>".to_string(),
    }
}

/// Upstream `formatHPAMetrics`: statuses are matched to specs by position.
pub(crate) fn format_metrics(hpa: &Value) -> String {
    let specs = hpa
        .pointer("/spec/metrics")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if specs.is_empty() {
        return "<none>".to_string();
    }
    let statuses = hpa
        .pointer("/status/currentMetrics")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let list: Vec<String> = specs
        .iter()
        .enumerate()
        .map(|(i, s)| metric(s, statuses.get(i)))
        .collect();
    const MAXIMUM: usize = 2;
    if list.len() > MAXIMUM {
        format!(
            "{} + {} more...",
            list[..MAXIMUM].join(", "),
            list.len() - MAXIMUM
        )
    } else {
        list.join(", ")
    }
}

pub(crate) fn hpa_cells(hpa: &Value, now: Timestamp) -> Vec<Value> {
    let reference = format!(
        "{}/{}",
        hpa.pointer("/spec/scaleTargetRef/kind")
            .and_then(Value::as_str)
            .unwrap_or_default(),
        hpa.pointer("/spec/scaleTargetRef/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
    );
    let min = hpa
        .pointer("/spec/minReplicas")
        .and_then(Value::as_i64)
        .map_or_else(|| "<unset>".to_string(), |n| n.to_string());
    vec![
        name(hpa),
        json!(reference),
        json!(format_metrics(hpa)),
        json!(min),
        json!(int_at(hpa, &["spec", "maxReplicas"])),
        json!(int_at(hpa, &["status", "currentReplicas"])),
        created(hpa, now),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::fixture;

    fn cpu(target: i64) -> Value {
        json!({"type": "Resource", "resource": {"name": "cpu",
               "target": {"type": "Utilization", "averageUtilization": target}}})
    }

    #[test]
    fn an_autoscaler_prints_its_target_metrics_bounds_and_replicas() {
        let now = fixture::now();
        let hpa = json!({
            "metadata": {"name": "web", "creationTimestamp": "2024-05-01T11:59:00Z"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"},
                     "minReplicas": 2, "maxReplicas": 5, "metrics": [cpu(50)]},
            "status": {"currentReplicas": 3, "currentMetrics": [
                {"type": "Resource", "resource": {"name": "cpu",
                 "current": {"averageUtilization": 250, "averageValue": "250m"}}}]}
        });
        assert_eq!(
            hpa_cells(&hpa, now),
            vec![
                json!("web"),
                json!("Deployment/web"),
                json!("cpu: 250%/50%"),
                json!("2"),
                json!(5),
                json!(3),
                json!("60s")
            ]
        );
    }

    #[test]
    fn metrics_without_status_are_unknown_and_more_than_two_are_summarised() {
        let hpa = json!({"spec": {"metrics": [
            cpu(50),
            {"type": "Resource", "resource": {"name": "memory",
             "target": {"type": "AverageValue", "averageValue": "100Mi"}}},
            {"type": "Pods", "pods": {"metric": {"name": "qps"},
             "target": {"type": "AverageValue", "averageValue": "10"}}}
        ]}});
        assert_eq!(
            format_metrics(&hpa),
            "cpu: <unknown>/50%, memory: <unknown>/100Mi + 1 more..."
        );
        assert_eq!(format_metrics(&json!({"spec": {}})), "<none>");
    }
}
