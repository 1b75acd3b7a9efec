//! The data of a ControllerRevision: upstream `getPatch`, the strategic merge patch that puts a
//! template back (`kubectl rollout undo` sends it as is), written as Go writes it.
//!
//! Planner: pure, no I/O.

use serde_json::{Map, Value, json};

/// `value` with every object's keys sorted, as Go's encoder writes a map (so the stored data
/// reads byte for byte like upstream's `getPatch` of the same template).
fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted(&m[k])))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// The two fields Go's encoder writes for a pod template even when empty (a struct, not a
/// pointer, under `omitempty`): `metadata.creationTimestamp: null` and each container's
/// `resources: {}`.
fn go_shape(template: &mut Map<String, Value>) {
    let meta = template
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(m) = meta.as_object_mut() {
        m.entry("creationTimestamp").or_insert(Value::Null);
    }
    let Some(spec) = template.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for c in spec
            .get_mut(list)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
            .filter_map(Value::as_object_mut)
        {
            c.entry("resources").or_insert_with(|| json!({}));
        }
    }
}

/// Upstream `getPatch`: `{"spec":{"template":{…,"$patch":"replace"}}}`, the strategic merge
/// patch that restores the template. A revision whose data equals it is the owner's
/// current one (upstream `Match`). It is written as Go writes it (sorted keys, the fields Go
/// never omits), so kubectl's own byte comparison (`rollout undo` of the current revision:
/// "skipped rollback") holds too.
pub fn template_patch(stored_template: &Value) -> Value {
    let mut template = match stored_template {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    go_shape(&mut template);
    template.insert("$patch".into(), json!("replace"));
    sorted(&json!({"spec": {"template": template}}))
}
