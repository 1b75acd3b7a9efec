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

/// Sets `key` of `target` to what the round-trip `annotation` held, if it held anything.
fn restore(
    annotations: &Map<String, Value>,
    annotation: &str,
    target: &mut Value,
    key: &str,
) -> Result<(), ConversionError> {
    let value = decode_annotation(annotations, annotation)?;
    if !value.is_null() {
        target[key] = value;
    }
    Ok(())
}

/// Sets `key` of `target` to `list` unless it is empty.
fn put_list(target: &mut Value, key: &str, list: Vec<Value>) {
    if !list.is_empty() {
        target[key] = Value::Array(list);
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

/// Which half of a metric converts: the spec's targets or the status's current values. v1
/// names the values `target…`/`current…`; v2 keeps them under `target`/`current`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    Spec,
    Status,
}

impl Block {
    fn name(self) -> &'static str {
        match self {
            Block::Spec => "target",
            Block::Status => "current",
        }
    }
}

/// How one field of a v1 (v2beta1-shaped) metric source maps to v2.
#[derive(Debug, Clone, Copy)]
enum Field {
    /// Identifies the metric: copied to the v2 path as it is, null included.
    Id(&'static str, &'static str),
    /// Copied to the v2 path unless null.
    Optional(&'static str, &'static str),
    /// A target or current value: v1's `target<Suffix>`/`current<Suffix>` ↔ v2's
    /// `target.<field>`/`current.<field>`.
    Value(&'static str, &'static str),
    /// A target or current value that v1 names without the prefix (Object's `averageValue`).
    Unprefixed(&'static str),
}

impl Field {
    /// The v1 field name and the v2 JSON pointer of this field in `block`.
    fn names(self, block: Block) -> (String, String) {
        match self {
            Field::Id(v1, v2) | Field::Optional(v1, v2) => (v1.to_string(), v2.to_string()),
            Field::Value(suffix, field) => (
                format!("{}{suffix}", block.name()),
                format!("/{}/{field}", block.name()),
            ),
            Field::Unprefixed(field) => (field.to_string(), format!("/{}/{field}", block.name())),
        }
    }
}

/// The fields of each metric source type, in the order v1 writes them; the spec and the
/// status share them (upstream's v2beta1 ↔ v2 conversion).
fn source_fields(kind: &str) -> &'static [Field] {
    use Field::*;
    match kind {
        "Resource" | "ContainerResource" => &[
            Id("name", "/name"),
            Optional("container", "/container"),
            Value("AverageUtilization", "averageUtilization"),
            Value("AverageValue", "averageValue"),
        ],
        "Pods" => &[
            Id("metricName", "/metric/name"),
            Value("AverageValue", "averageValue"),
            Optional("selector", "/metric/selector"),
        ],
        "Object" => &[
            Id("target", "/describedObject"),
            Id("metricName", "/metric/name"),
            Value("Value", "value"),
            Optional("selector", "/metric/selector"),
            Unprefixed("averageValue"),
        ],
        "External" => &[
            Id("metricName", "/metric/name"),
            Optional("metricSelector", "/metric/selector"),
            Value("Value", "value"),
            Value("AverageValue", "averageValue"),
        ],
        _ => &[],
    }
}

/// The key of a metric source type's stanza (`resource`, `containerResource`, `pods` …).
fn source_key(kind: &str) -> Option<&'static str> {
    match kind {
        "Resource" => Some("resource"),
        "ContainerResource" => Some("containerResource"),
        "Pods" => Some("pods"),
        "Object" => Some("object"),
        "External" => Some("external"),
        _ => None,
    }
}

/// Sets `value` at the JSON `pointer` below `map`, making the objects on the way.
fn put_at(map: &mut Map<String, Value>, pointer: &str, value: Value) {
    let mut parts = pointer.trim_start_matches('/').split('/').peekable();
    let mut here = map;
    while let Some(part) = parts.next() {
        if parts.peek().is_none() {
            here.insert(part.to_string(), value);
            return;
        }
        let next = here
            .entry(part.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if !next.is_object() {
            *next = Value::Object(Map::new());
        }
        let Value::Object(next) = next else { return };
        here = next;
    }
}

/// v2's form of the values v1 carried: a spec keeps one target, typed by what it holds (the
/// utilization wins, then the average value, then the value); a status keeps every current
/// value.
fn v2_values(block: Block, values: &Map<String, Value>) -> Value {
    const ORDER: [(&str, &str); 3] = [
        ("averageUtilization", "Utilization"),
        ("averageValue", "AverageValue"),
        ("value", "Value"),
    ];
    let mut out = Map::new();
    for (field, kind) in ORDER {
        let Some(v) = values.get(field) else { continue };
        if block == Block::Spec {
            out.insert("type".into(), json!(kind));
            out.insert(field.into(), v.clone());
            break;
        }
        out.insert(field.into(), v.clone());
    }
    Value::Object(out)
}

/// `m` with the stanza of its source type (`resource`, `pods` …) converted: `convert` is given
/// each of the source type's fields with its v1 name and v2 pointer, then `finish` the stanza.
fn convert_source(
    m: &Value,
    block: Block,
    convert: impl Fn(&Value, &mut Map<String, Value>, Field, String, String),
    finish: impl FnOnce(&mut Map<String, Value>),
) -> Value {
    let kind = m["type"].as_str().unwrap_or_default();
    let mut out = Map::new();
    out.insert("type".into(), json!(kind));
    if let Some(key) = source_key(kind) {
        let mut src = Map::new();
        for field in source_fields(kind) {
            let (v1, v2) = field.names(block);
            convert(&m[key], &mut src, *field, v1, v2);
        }
        finish(&mut src);
        out.insert(key.into(), Value::Object(src));
    }
    Value::Object(out)
}

/// A v1 (v2beta1-shaped) MetricSpec or MetricStatus as v2 writes it.
fn metric_v1_to_v2(m: &Value, block: Block) -> Value {
    let convert = |s: &Value, src: &mut Map<String, Value>, field, v1: String, v2: String| match (
        field,
        s.get(&v1),
    ) {
        (Field::Id(..), v) => put_at(src, &v2, v.cloned().unwrap_or(Value::Null)),
        (_, Some(v)) if !v.is_null() => put_at(src, &v2, v.clone()),
        _ => {}
    };
    // The target or current block is always there, in v2's form.
    let finish = |src: &mut Map<String, Value>| {
        let values = match src.get(block.name()) {
            Some(Value::Object(values)) => v2_values(block, values),
            _ => v2_values(block, &Map::new()),
        };
        src.insert(block.name().into(), values);
    };
    convert_source(m, block, convert, finish)
}

/// A v2 MetricSpec or MetricStatus in v1's (v2beta1-shaped) form.
fn metric_v2_to_v1(m: &Value, block: Block) -> Value {
    let convert = |s: &Value, src: &mut Map<String, Value>, field, v1: String, v2: String| {
        let value = s.pointer(&v2).cloned();
        match field {
            Field::Id(..) => {
                src.insert(v1, value.unwrap_or(Value::Null));
            }
            _ => put(src, &v1, value),
        }
    };
    convert_source(m, block, convert, |_| {})
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
        .map(|ms| ms.iter().map(|m| metric_v1_to_v2(m, Block::Spec)).collect())
        .unwrap_or_default();
    if let Some(cpu) = take(&mut spec, "targetCPUUtilizationPercentage") {
        metrics.push(json!({"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": cpu}}}));
    }
    put_list(&mut spec, "metrics", metrics);
    restore(&annotations, BEHAVIOR_ANNOTATION, &mut spec, "behavior")?;
    obj["spec"] = spec;
    if let Some(mut status) = take(&mut obj, "status") {
        let cpu = take(&mut status, "currentCPUUtilizationPercentage");
        let current = decode_annotation(&annotations, CURRENT_METRICS_ANNOTATION)?;
        let current: Vec<Value> = match (current.as_array(), cpu) {
            (Some(ms), _) => ms
                .iter()
                .map(|m| metric_v1_to_v2(m, Block::Status))
                .collect(),
            (None, Some(cpu)) => vec![json!({"type": "Resource", "resource": {"name": "cpu",
                "current": {"averageUtilization": cpu}}})],
            (None, None) => Vec::new(),
        };
        put_list(&mut status, "currentMetrics", current);
        restore(
            &annotations,
            CONDITIONS_ANNOTATION,
            &mut status,
            "conditions",
        )?;
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
                .map(|m| metric_v2_to_v1(m, Block::Spec))
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
                let v1: Vec<Value> = ms
                    .iter()
                    .map(|m| metric_v2_to_v1(m, Block::Status))
                    .collect();
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

    /// Each metric source type in v1's form and in v2's, for the spec (targets) and the status
    /// (current values); each row converts both ways, keys in the order each side writes them.
    #[test]
    fn every_metric_source_type_converts_both_ways() {
        let sel = json!({"matchLabels": {"a": "b"}});
        let obj = json!({"kind": "Service", "name": "s"});
        use Block::*;
        let cases = [
            (
                Spec,
                json!({"type": "Resource", "resource": {"name": "cpu", "targetAverageUtilization": 50}}),
                json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}),
            ),
            (
                Spec,
                json!({"type": "ContainerResource", "containerResource": {"name": "memory", "container": "c", "targetAverageValue": "1Mi"}}),
                json!({"type": "ContainerResource", "containerResource": {"name": "memory", "container": "c", "target": {"type": "AverageValue", "averageValue": "1Mi"}}}),
            ),
            (
                Spec,
                json!({"type": "Pods", "pods": {"metricName": "qps", "targetAverageValue": "1k", "selector": sel}}),
                json!({"type": "Pods", "pods": {"metric": {"name": "qps", "selector": sel}, "target": {"type": "AverageValue", "averageValue": "1k"}}}),
            ),
            (
                Spec,
                json!({"type": "Object", "object": {"target": obj, "metricName": "hits", "targetValue": "10", "selector": sel}}),
                json!({"type": "Object", "object": {"describedObject": obj, "metric": {"name": "hits", "selector": sel}, "target": {"type": "Value", "value": "10"}}}),
            ),
            (
                Spec,
                json!({"type": "Object", "object": {"target": obj, "metricName": "hits", "averageValue": "2"}}),
                json!({"type": "Object", "object": {"describedObject": obj, "metric": {"name": "hits"}, "target": {"type": "AverageValue", "averageValue": "2"}}}),
            ),
            (
                Spec,
                json!({"type": "External", "external": {"metricName": "queue", "metricSelector": sel, "targetValue": "5"}}),
                json!({"type": "External", "external": {"metric": {"name": "queue", "selector": sel}, "target": {"type": "Value", "value": "5"}}}),
            ),
            (
                Spec,
                json!({"type": "External", "external": {"metricName": "queue", "targetAverageValue": "3"}}),
                json!({"type": "External", "external": {"metric": {"name": "queue"}, "target": {"type": "AverageValue", "averageValue": "3"}}}),
            ),
            (Spec, json!({"type": "Unknown"}), json!({"type": "Unknown"})),
            (
                Status,
                json!({"type": "Resource", "resource": {"name": "cpu", "container": "c", "currentAverageUtilization": 80, "currentAverageValue": "80m"}}),
                json!({"type": "Resource", "resource": {"name": "cpu", "container": "c", "current": {"averageUtilization": 80, "averageValue": "80m"}}}),
            ),
            (
                Status,
                json!({"type": "Pods", "pods": {"metricName": "qps", "currentAverageValue": "1k", "selector": sel}}),
                json!({"type": "Pods", "pods": {"metric": {"name": "qps", "selector": sel}, "current": {"averageValue": "1k"}}}),
            ),
            (
                Status,
                json!({"type": "Object", "object": {"target": obj, "metricName": "hits", "currentValue": "10", "selector": sel, "averageValue": "2"}}),
                json!({"type": "Object", "object": {"describedObject": obj, "metric": {"name": "hits", "selector": sel}, "current": {"averageValue": "2", "value": "10"}}}),
            ),
            (
                Status,
                json!({"type": "External", "external": {"metricName": "queue", "metricSelector": sel, "currentValue": "5", "currentAverageValue": "3"}}),
                json!({"type": "External", "external": {"metric": {"name": "queue", "selector": sel}, "current": {"averageValue": "3", "value": "5"}}}),
            ),
            (
                Status,
                json!({"type": "Unknown"}),
                json!({"type": "Unknown"}),
            ),
        ];
        for (block, v1, v2) in &cases {
            let to_v2 = metric_v1_to_v2(v1, *block);
            assert_eq!(to_v2.to_string(), v2.to_string(), "{block:?} {v1} to v2");
            let to_v1 = metric_v2_to_v1(v2, *block);
            assert_eq!(to_v1.to_string(), v1.to_string(), "{block:?} {v2} to v1");
        }
    }

    /// v2 keeps one target, v1 may say several: the utilization wins, then the average value;
    /// the identifying fields are kept even when missing (as null), and the target block even
    /// when empty.
    #[test]
    fn a_v1_metric_keeps_one_target_and_its_identity_in_v2() {
        let cases = [
            (
                json!({"type": "Resource", "resource": {"name": "cpu", "targetAverageUtilization": 5, "targetAverageValue": "1"}}),
                json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 5}}}),
            ),
            (
                json!({"type": "Object", "object": {"target": obj(), "metricName": "m", "targetValue": "1", "averageValue": "2"}}),
                json!({"type": "Object", "object": {"describedObject": obj(), "metric": {"name": "m"}, "target": {"type": "AverageValue", "averageValue": "2"}}}),
            ),
            (
                json!({"type": "Pods", "pods": {}}),
                json!({"type": "Pods", "pods": {"metric": {"name": null}, "target": {}}}),
            ),
            (
                json!({"type": "Object"}),
                json!({"type": "Object", "object": {"describedObject": null, "metric": {"name": null}, "target": {}}}),
            ),
        ];
        for (v1, v2) in cases {
            assert_eq!(
                metric_v1_to_v2(&v1, Block::Spec).to_string(),
                v2.to_string(),
                "{v1}"
            );
        }
        assert_eq!(
            metric_v1_to_v2(&json!({"type": "Resource", "resource": {}}), Block::Status),
            json!({"type": "Resource", "resource": {"name": null, "current": {}}})
        );
        assert_eq!(
            metric_v2_to_v1(&json!({"type": "External"}), Block::Spec),
            json!({"type": "External", "external": {"metricName": null}})
        );
        assert_eq!(
            metric_v2_to_v1(&json!({"type": "Object", "object": {}}), Block::Status),
            json!({"type": "Object", "object": {"target": null, "metricName": null}})
        );
    }

    fn obj() -> Value {
        json!({"kind": "Service", "name": "s"})
    }
}
