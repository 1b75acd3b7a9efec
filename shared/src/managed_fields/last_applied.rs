//! kubectl's move from client-side to server-side apply, as kube-apiserver eases it for the
//! manager `kubectl` alone: conflicts on fields the `last-applied-configuration` annotation
//! holds at their stored values are no conflicts (they were kubectl's own, applied client
//! side), and an object that carries the annotation gets it rewritten to the configuration
//! applied, so a later client-side apply compares against what the server-side one set.

use serde_json::{Map, Value};

use super::compare::{compare, fields_of};
use super::schema::FieldSchema;
use super::set::FieldSet;

/// The annotation client-side apply keeps its last configuration in.
pub const ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The one manager the annotation is kept for.
pub const KUBECTL: &str = "kubectl";

/// The fields kubectl last applied client side that still hold the values it applied: an
/// apply by kubectl may take them without a conflict. `None` without a readable annotation.
pub fn allowed_conflicts(schema: &dyn FieldSchema, live: &Value) -> Option<FieldSet> {
    let text = live
        .pointer("/metadata/annotations")?
        .get(ANNOTATION)?
        .as_str()?;
    let last: Value = serde_json::from_str(text).ok()?;
    let mut allowed = fields_of(schema, &last);
    let change = compare(schema, &last, live);
    allowed.difference(&change.modified);
    allowed.difference(&change.removed);
    Some(allowed)
}

/// Rewrites `merged`'s annotation, if `live` carries one, to `config` (without the
/// annotation), keys sorted as Go writes JSON.
pub fn keep_annotation(live: Option<&Value>, config: &Value, merged: &mut Value) {
    let carried = live
        .and_then(|l| l.pointer("/metadata/annotations"))
        .is_some_and(|a| a.get(ANNOTATION).is_some());
    if !carried {
        return;
    }
    let mut last = config.clone();
    if let Some(annotations) = last
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.remove(ANNOTATION);
    }
    let text = sorted(&last).to_string();
    if let Some(annotations) = merged
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.insert(ANNOTATION.to_string(), Value::String(text));
    }
}

fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let out: Map<String, Value> = keys
                .into_iter()
                .map(|k| (k.clone(), sorted(&m[k])))
                .collect();
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::managed_fields::schema::BuiltIn;
    use crate::managed_fields::set::render_path;
    use serde_json::json;

    #[test]
    fn fields_still_at_their_last_applied_values_are_allowed() {
        let last = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
            "data": {"same": "1", "edited": "2", "gone": "3"}});
        let live = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "annotations": {ANNOTATION: last.to_string()}},
            "data": {"same": "1", "edited": "9", "other": "4"}});
        let allowed = allowed_conflicts(&BuiltIn { kind: "ConfigMap" }, &live).unwrap();
        let data: Vec<String> = allowed
            .members()
            .iter()
            .map(|p| render_path(p))
            .filter(|p| p.starts_with(".data"))
            .collect();
        assert_eq!(data, [".data.same"]);
        assert!(
            allowed_conflicts(&BuiltIn { kind: "ConfigMap" }, &json!({"metadata": {}})).is_none()
        );
    }

    #[test]
    fn the_annotation_is_rewritten_only_where_it_was() {
        let config = json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "c"}, "data": {"a": "1"}});
        let live = json!({"metadata": {"annotations": {ANNOTATION: "{}"}}});
        let mut merged = live.clone();
        keep_annotation(Some(&live), &config, &mut merged);
        assert_eq!(
            merged["metadata"]["annotations"][ANNOTATION],
            r#"{"apiVersion":"v1","data":{"a":"1"},"kind":"ConfigMap","metadata":{"name":"c"}}"#
        );
        let mut untouched = json!({"metadata": {}});
        keep_annotation(Some(&json!({"metadata": {}})), &config, &mut untouched);
        assert_eq!(untouched, json!({"metadata": {}}));
    }
}
