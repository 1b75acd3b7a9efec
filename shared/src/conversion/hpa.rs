//! HorizontalPodAutoscaler autoscaling/v1 ↔ autoscaling/v2, as upstream's
//! `pkg/apis/autoscaling/v1/conversion.go`: v1 holds only a CPU utilization target
//! (`targetCPUUtilizationPercentage`, `currentCPUUtilizationPercentage`); everything else
//! v2 can say travels in v1 as JSON annotations — the other metrics
//! (`autoscaling.alpha.kubernetes.io/metrics`) and their current values
//! (`…/current-metrics`) in v1's own (v2beta1-shaped) metric form, the behaviour
//! (`…/behavior`) and the conditions (`…/conditions`) as v2 writes them — so an object
//! read and written back in v1 loses nothing.

use super::ConversionError;
use serde_json::{Map, Value, json};

pub const METRICS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/metrics";
pub const CURRENT_METRICS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
pub const CONDITIONS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/conditions";
pub const BEHAVIOR_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/behavior";
const ROUND_TRIP: &[&str] = &[
    METRICS_ANNOTATION,
    CURRENT_METRICS_ANNOTATION,
    CONDITIONS_ANNOTATION,
    BEHAVIOR_ANNOTATION,
];

fn take(obj: &mut Value, key: &str) -> Option<Value> {
    obj.as_object_mut()
        .and_then(|m| m.remove(key))
        .filter(|v| !v.is_null())
}

/// Sets `key` unless `value` is null.
fn put(map: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(v) = value.filter(|v| !v.is_null()) {
        map.insert(key.to_string(), v);
    }
}

/// The round-trip annotations of `obj`, removed from it (an emptied map is dropped).
fn take_annotations(obj: &mut Value) -> Map<String, Value> {
    let mut out = Map::new();
    let Some(annotations) = obj
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    else {
        return out;
    };
    for key in ROUND_TRIP {
        if let Some(v) = annotations.remove(*key) {
            out.insert(key.to_string(), v);
        }
    }
    if annotations.is_empty()
        && let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut)
    {
        meta.remove("annotations");
    }
    out
}

fn decode_annotation(
    annotations: &Map<String, Value>,
    key: &str,
) -> Result<Value, ConversionError> {
    match annotations.get(key).and_then(Value::as_str) {
        None => Ok(Value::Null),
        Some(text) => serde_json::from_str(text)
            .map_err(|e| ConversionError::Annotation(format!("annotation {key}: {e}"))),
    }
}

fn set_annotation(obj: &mut Value, key: &str, value: &Value) {
    if !obj["metadata"].is_object() {
        obj["metadata"] = json!({});
    }
    if !obj["metadata"]["annotations"].is_object() {
        obj["metadata"]["annotations"] = json!({});
    }
    obj["metadata"]["annotations"][key] = Value::String(value.to_string());
}

/// A v1 (v2beta1-shaped) MetricSpec as v2 writes it.
fn metric_spec_v1_to_v2(m: &Value) -> Value {
    let kind = m["type"].as_str().unwrap_or_default();
    let mut out = Map::new();
    out.insert("type".into(), json!(kind));
    let target = |value: Option<&Value>, average: Option<&Value>, utilization: Option<&Value>| {
        let mut t = Map::new();
        if let Some(u) = utilization.filter(|v| !v.is_null()) {
            t.insert("type".into(), json!("Utilization"));
            t.insert("averageUtilization".into(), u.clone());
        } else if let Some(a) = average.filter(|v| !v.is_null()) {
            t.insert("type".into(), json!("AverageValue"));
            t.insert("averageValue".into(), a.clone());
        } else if let Some(v) = value.filter(|v| !v.is_null()) {
            t.insert("type".into(), json!("Value"));
            t.insert("value".into(), v.clone());
        }
        Value::Object(t)
    };
    let metric = |name: &Value, selector: Option<&Value>| {
        let mut id = Map::new();
        id.insert("name".into(), name.clone());
        put(&mut id, "selector", selector.cloned());
        Value::Object(id)
    };
    match kind {
        "Resource" | "ContainerResource" => {
            let key = if kind == "Resource" {
                "resource"
            } else {
                "containerResource"
            };
            let s = &m[key];
            let mut src = Map::new();
            src.insert("name".into(), s["name"].clone());
            put(&mut src, "container", s.get("container").cloned());
            src.insert(
                "target".into(),
                target(
                    None,
                    s.get("targetAverageValue"),
                    s.get("targetAverageUtilization"),
                ),
            );
            out.insert(key.into(), Value::Object(src));
        }
        "Pods" => {
            let s = &m["pods"];
            out.insert(
                "pods".into(),
                json!({"metric": metric(&s["metricName"], s.get("selector")),
                       "target": target(None, s.get("targetAverageValue"), None)}),
            );
        }
        "Object" => {
            let s = &m["object"];
            out.insert(
                "object".into(),
                json!({"describedObject": s["target"].clone(),
                       "metric": metric(&s["metricName"], s.get("selector")),
                       "target": target(s.get("targetValue"), s.get("averageValue"), None)}),
            );
        }
        "External" => {
            let s = &m["external"];
            out.insert(
                "external".into(),
                json!({"metric": metric(&s["metricName"], s.get("metricSelector")),
                       "target": target(s.get("targetValue"), s.get("targetAverageValue"), None)}),
            );
        }
        _ => {}
    }
    Value::Object(out)
}

/// A v2 MetricSpec in v1's (v2beta1-shaped) form.
fn metric_spec_v2_to_v1(m: &Value) -> Value {
    let kind = m["type"].as_str().unwrap_or_default();
    let mut out = Map::new();
    out.insert("type".into(), json!(kind));
    match kind {
        "Resource" | "ContainerResource" => {
            let key = if kind == "Resource" {
                "resource"
            } else {
                "containerResource"
            };
            let s = &m[key];
            let mut src = Map::new();
            src.insert("name".into(), s["name"].clone());
            put(&mut src, "container", s.get("container").cloned());
            put(
                &mut src,
                "targetAverageUtilization",
                s.pointer("/target/averageUtilization").cloned(),
            );
            put(
                &mut src,
                "targetAverageValue",
                s.pointer("/target/averageValue").cloned(),
            );
            out.insert(key.into(), Value::Object(src));
        }
        "Pods" => {
            let s = &m["pods"];
            let mut src = Map::new();
            src.insert("metricName".into(), s["metric"]["name"].clone());
            put(
                &mut src,
                "targetAverageValue",
                s.pointer("/target/averageValue").cloned(),
            );
            put(&mut src, "selector", s.pointer("/metric/selector").cloned());
            out.insert("pods".into(), Value::Object(src));
        }
        "Object" => {
            let s = &m["object"];
            let mut src = Map::new();
            src.insert("target".into(), s["describedObject"].clone());
            src.insert("metricName".into(), s["metric"]["name"].clone());
            put(&mut src, "targetValue", s.pointer("/target/value").cloned());
            put(&mut src, "selector", s.pointer("/metric/selector").cloned());
            put(
                &mut src,
                "averageValue",
                s.pointer("/target/averageValue").cloned(),
            );
            out.insert("object".into(), Value::Object(src));
        }
        "External" => {
            let s = &m["external"];
            let mut src = Map::new();
            src.insert("metricName".into(), s["metric"]["name"].clone());
            put(
                &mut src,
                "metricSelector",
                s.pointer("/metric/selector").cloned(),
            );
            put(&mut src, "targetValue", s.pointer("/target/value").cloned());
            put(
                &mut src,
                "targetAverageValue",
                s.pointer("/target/averageValue").cloned(),
            );
            out.insert("external".into(), Value::Object(src));
        }
        _ => {}
    }
    Value::Object(out)
}

/// A v1 (v2beta1-shaped) MetricStatus as v2 writes it.
fn metric_status_v1_to_v2(m: &Value) -> Value {
    let kind = m["type"].as_str().unwrap_or_default();
    let current = |value: Option<&Value>, average: Option<&Value>, utilization: Option<&Value>| {
        let mut c = Map::new();
        put(&mut c, "averageUtilization", utilization.cloned());
        put(&mut c, "averageValue", average.cloned());
        put(&mut c, "value", value.cloned());
        Value::Object(c)
    };
    let metric = |name: &Value, selector: Option<&Value>| {
        let mut id = Map::new();
        id.insert("name".into(), name.clone());
        put(&mut id, "selector", selector.cloned());
        Value::Object(id)
    };
    let mut out = Map::new();
    out.insert("type".into(), json!(kind));
    match kind {
        "Resource" | "ContainerResource" => {
            let key = if kind == "Resource" {
                "resource"
            } else {
                "containerResource"
            };
            let s = &m[key];
            let mut src = Map::new();
            src.insert("name".into(), s["name"].clone());
            put(&mut src, "container", s.get("container").cloned());
            src.insert(
                "current".into(),
                current(
                    None,
                    s.get("currentAverageValue"),
                    s.get("currentAverageUtilization"),
                ),
            );
            out.insert(key.into(), Value::Object(src));
        }
        "Pods" => {
            let s = &m["pods"];
            out.insert(
                "pods".into(),
                json!({"metric": metric(&s["metricName"], s.get("selector")),
                       "current": current(None, s.get("currentAverageValue"), None)}),
            );
        }
        "Object" => {
            let s = &m["object"];
            out.insert(
                "object".into(),
                json!({"describedObject": s["target"].clone(),
                       "metric": metric(&s["metricName"], s.get("selector")),
                       "current": current(s.get("currentValue"), s.get("averageValue"), None)}),
            );
        }
        "External" => {
            let s = &m["external"];
            out.insert(
                "external".into(),
                json!({"metric": metric(&s["metricName"], s.get("metricSelector")),
                       "current": current(s.get("currentValue"), s.get("currentAverageValue"), None)}),
            );
        }
        _ => {}
    }
    Value::Object(out)
}

/// A v2 MetricStatus in v1's (v2beta1-shaped) form.
fn metric_status_v2_to_v1(m: &Value) -> Value {
    let kind = m["type"].as_str().unwrap_or_default();
    let mut out = Map::new();
    out.insert("type".into(), json!(kind));
    let cur = |s: &Value, f: &str| s.pointer(&format!("/current/{f}")).cloned();
    match kind {
        "Resource" | "ContainerResource" => {
            let key = if kind == "Resource" {
                "resource"
            } else {
                "containerResource"
            };
            let s = &m[key];
            let mut src = Map::new();
            src.insert("name".into(), s["name"].clone());
            put(&mut src, "container", s.get("container").cloned());
            put(
                &mut src,
                "currentAverageUtilization",
                cur(s, "averageUtilization"),
            );
            put(&mut src, "currentAverageValue", cur(s, "averageValue"));
            out.insert(key.into(), Value::Object(src));
        }
        "Pods" => {
            let s = &m["pods"];
            let mut src = Map::new();
            src.insert("metricName".into(), s["metric"]["name"].clone());
            put(&mut src, "currentAverageValue", cur(s, "averageValue"));
            put(&mut src, "selector", s.pointer("/metric/selector").cloned());
            out.insert("pods".into(), Value::Object(src));
        }
        "Object" => {
            let s = &m["object"];
            let mut src = Map::new();
            src.insert("target".into(), s["describedObject"].clone());
            src.insert("metricName".into(), s["metric"]["name"].clone());
            put(&mut src, "currentValue", cur(s, "value"));
            put(&mut src, "selector", s.pointer("/metric/selector").cloned());
            put(&mut src, "averageValue", cur(s, "averageValue"));
            out.insert("object".into(), Value::Object(src));
        }
        "External" => {
            let s = &m["external"];
            let mut src = Map::new();
            src.insert("metricName".into(), s["metric"]["name"].clone());
            put(
                &mut src,
                "metricSelector",
                s.pointer("/metric/selector").cloned(),
            );
            put(&mut src, "currentValue", cur(s, "value"));
            put(&mut src, "currentAverageValue", cur(s, "averageValue"));
            out.insert("external".into(), Value::Object(src));
        }
        _ => {}
    }
    Value::Object(out)
}

fn is_cpu_utilization_target(m: &Value) -> bool {
    m["type"] == "Resource"
        && m.pointer("/resource/name") == Some(&json!("cpu"))
        && m.pointer("/resource/target/averageUtilization")
            .is_some_and(|u| !u.is_null())
}

/// autoscaling/v1 → autoscaling/v2.
pub fn v1_to_v2(mut obj: Value) -> Result<Value, ConversionError> {
    let annotations = take_annotations(&mut obj);
    obj["apiVersion"] = json!("autoscaling/v2");
    let mut spec = take(&mut obj, "spec").unwrap_or_else(|| json!({}));
    let mut metrics: Vec<Value> = decode_annotation(&annotations, METRICS_ANNOTATION)?
        .as_array()
        .map(|ms| ms.iter().map(metric_spec_v1_to_v2).collect())
        .unwrap_or_default();
    if let Some(cpu) = take(&mut spec, "targetCPUUtilizationPercentage") {
        metrics.push(json!({"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": cpu}}}));
    }
    if !metrics.is_empty() {
        spec["metrics"] = Value::Array(metrics);
    }
    let behavior = decode_annotation(&annotations, BEHAVIOR_ANNOTATION)?;
    if !behavior.is_null() {
        spec["behavior"] = behavior;
    }
    obj["spec"] = spec;
    if let Some(mut status) = take(&mut obj, "status") {
        let cpu = take(&mut status, "currentCPUUtilizationPercentage");
        let current = decode_annotation(&annotations, CURRENT_METRICS_ANNOTATION)?;
        let current: Vec<Value> = match (current.as_array(), cpu) {
            (Some(ms), _) => ms.iter().map(metric_status_v1_to_v2).collect(),
            (None, Some(cpu)) => vec![json!({"type": "Resource", "resource": {"name": "cpu",
                "current": {"averageUtilization": cpu}}})],
            (None, None) => Vec::new(),
        };
        if !current.is_empty() {
            status["currentMetrics"] = Value::Array(current);
        }
        let conditions = decode_annotation(&annotations, CONDITIONS_ANNOTATION)?;
        if !conditions.is_null() {
            status["conditions"] = conditions;
        }
        obj["status"] = status;
    }
    Ok(obj)
}

/// autoscaling/v2 → autoscaling/v1.
pub fn v2_to_v1(mut obj: Value) -> Value {
    // A v2 object never carries the round-trip annotations.
    take_annotations(&mut obj);
    obj["apiVersion"] = json!("autoscaling/v1");
    let mut spec = take(&mut obj, "spec").unwrap_or_else(|| json!({}));
    let metrics = take(&mut spec, "metrics");
    let behavior = take(&mut spec, "behavior");
    let metrics = metrics.as_ref().and_then(Value::as_array);
    if let Some(cpu) = metrics
        .and_then(|ms| ms.iter().find(|m| is_cpu_utilization_target(m)))
        .and_then(|m| m.pointer("/resource/target/averageUtilization"))
    {
        spec["targetCPUUtilizationPercentage"] = cpu.clone();
    }
    let others: Vec<Value> = metrics
        .map(|ms| {
            ms.iter()
                .filter(|m| !is_cpu_utilization_target(m))
                .map(metric_spec_v2_to_v1)
                .collect()
        })
        .unwrap_or_default();
    obj["spec"] = spec;
    if !others.is_empty() {
        set_annotation(&mut obj, METRICS_ANNOTATION, &Value::Array(others));
    }
    if let Some(b) = behavior {
        set_annotation(&mut obj, BEHAVIOR_ANNOTATION, &b);
    }
    if let Some(mut status) = take(&mut obj, "status") {
        let current = take(&mut status, "currentMetrics");
        let conditions = take(&mut status, "conditions");
        if let Some(ms) = current.as_ref().and_then(Value::as_array) {
            if let Some(cpu) = ms
                .iter()
                .find(|m| {
                    m["type"] == "Resource" && m.pointer("/resource/name") == Some(&json!("cpu"))
                })
                .and_then(|m| m.pointer("/resource/current/averageUtilization"))
                .filter(|u| !u.is_null())
            {
                status["currentCPUUtilizationPercentage"] = cpu.clone();
            }
            if !ms.is_empty() {
                let v1: Vec<Value> = ms.iter().map(metric_status_v2_to_v1).collect();
                set_annotation(&mut obj, CURRENT_METRICS_ANNOTATION, &Value::Array(v1));
            }
        }
        if let Some(c) = conditions.filter(|c| c.as_array().is_some_and(|a| !a.is_empty())) {
            set_annotation(&mut obj, CONDITIONS_ANNOTATION, &c);
        }
        obj["status"] = status;
    }
    obj
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed_v1() -> Value {
        json!({
            "apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "frontend-scaler", "namespace": "default"},
            "spec": {"scaleTargetRef": {"kind": "ReplicaSet", "name": "frontend"},
                     "minReplicas": 3, "maxReplicas": 10,
                     "targetCPUUtilizationPercentage": 50}
        })
    }

    #[test]
    fn the_seed_v1_manifest_becomes_a_v2_cpu_utilization_metric() {
        let v2 = v1_to_v2(seed_v1()).unwrap();
        assert_eq!(v2["apiVersion"], "autoscaling/v2");
        assert_eq!(
            v2["spec"]["metrics"],
            json!([{"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 50}}}])
        );
        assert!(v2["spec"].get("targetCPUUtilizationPercentage").is_none());
        assert!(v2["metadata"].get("annotations").is_none());
    }

    #[test]
    fn a_v2_object_read_in_v1_and_written_back_loses_nothing() {
        let v2 = json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "namespace": "default", "annotations": {"team": "a"}},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": 2, "maxReplicas": 5,
                "metrics": [
                    {"type": "Resource", "resource": {"name": "memory",
                        "target": {"type": "AverageValue", "averageValue": "100Mi"}}},
                    {"type": "Resource", "resource": {"name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 50}}}
                ],
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": 30}}
            },
            "status": {
                "currentReplicas": 2, "desiredReplicas": 3,
                "currentMetrics": [
                    {"type": "Resource", "resource": {"name": "memory",
                        "current": {"averageValue": "50Mi"}}},
                    {"type": "Resource", "resource": {"name": "cpu",
                        "current": {"averageUtilization": 80, "averageValue": "80m"}}}
                ],
                "conditions": [{"type": "AbleToScale", "status": "True",
                                "reason": "ReadyForNewScale"}]
            }
        });
        let v1 = v2_to_v1(v2.clone());
        assert_eq!(v1["apiVersion"], "autoscaling/v1");
        assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 50);
        assert_eq!(v1["status"]["currentCPUUtilizationPercentage"], 80);
        let annotations = &v1["metadata"]["annotations"];
        assert_eq!(annotations["team"], "a");
        let others: Value =
            serde_json::from_str(annotations[METRICS_ANNOTATION].as_str().unwrap()).unwrap();
        assert_eq!(
            others,
            json!([{"type": "Resource", "resource": {"name": "memory",
                    "targetAverageValue": "100Mi"}}])
        );
        let back = v1_to_v2(v1).unwrap();
        // Other metrics come first, then the CPU target, as upstream orders them.
        assert_eq!(back["spec"], v2["spec"]);
        assert_eq!(back["status"], v2["status"]);
        assert_eq!(back["metadata"], v2["metadata"]);
    }

    #[test]
    fn a_malformed_round_trip_annotation_is_refused() {
        let mut v1 = seed_v1();
        v1["metadata"]["annotations"] = json!({METRICS_ANNOTATION: "[not json"});
        assert!(matches!(
            v1_to_v2(v1),
            Err(ConversionError::Annotation(m)) if m.contains(METRICS_ANNOTATION)
        ));
    }
}
