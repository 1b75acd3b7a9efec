//! A custom resource's selectable fields (`selectableFields[*].jsonPath`, GA in 1.32): the
//! field labels a field selector may name for one served version, and the value of such a
//! field in an object, as upstream's `customResourceStrategy.selectableFields` reads it.
//!
//! A label is the path without its leading dot (`.spec.color` → `spec.color`). The value is
//! the scalar at the path written as Go's `fmt.Sprint` writes it (`blue`, `3`, `true`); a
//! missing field, or one that is not a scalar, is the empty string.

use serde_json::Value;

use super::Served;

/// Upstream's `MaxSelectableFields`: distinct selectable fields per version.
pub const MAX_SELECTABLE_FIELDS: usize = 8;

/// The field label a `selectableFields` JSONPath is selected by.
pub fn label(json_path: &str) -> &str {
    json_path.strip_prefix('.').unwrap_or(json_path)
}

/// The field labels a field selector may use on `served`: `metadata.name`,
/// `metadata.namespace` when namespaced (upstream's `ConvertFieldLabel`), and the version's
/// selectable fields.
pub fn field_labels(served: &Served) -> Vec<&str> {
    let mut labels = vec!["metadata.name"];
    if served.rt.namespaced {
        labels.push("metadata.namespace");
    }
    labels.extend(served.version.selectable_fields.iter().map(|p| label(p)));
    labels
}

/// The value at `json_path` in `obj` (a field selector's view of it); `None` when the path is
/// not a simple field path (the definition's admission refuses those).
pub fn value(obj: &Value, json_path: &str) -> Option<String> {
    let found = names(json_path)?
        .into_iter()
        .try_fold(obj, |v, name| v.get(name));
    Some(match found {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    })
}

/// The names of a dotted path (`.spec.color`); the definition's admission allows no other
/// form (no brackets: upstream's "array notation is not allowed").
fn names(json_path: &str) -> Option<Vec<&str>> {
    let names: Vec<&str> = json_path.strip_prefix('.')?.split('.').collect();
    names
        .iter()
        .all(|n| !n.is_empty() && !n.contains(['[', ']']))
        .then_some(names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_written_as_upstream_prints_them_and_missing_ones_are_empty() {
        let obj = json!({"spec": {"color": "blue", "quantity": 3, "branded": true,
            "nested": {"deep": "x"}, "list": [1]}});
        let cases = [
            (".spec.color", Some("blue")),
            (".spec.quantity", Some("3")),
            (".spec.branded", Some("true")),
            (".spec.nested.deep", Some("x")),
            (".spec.size", Some("")),
            (".spec.nested", Some("")),
            (".spec.list", Some("")),
            (".status.phase", Some("")),
            (".spec['color']", None),
            ("spec.color", None),
            (".spec..color", None),
        ];
        for (path, want) in cases {
            assert_eq!(value(&obj, path).as_deref(), want, "{path}");
        }
    }

    #[test]
    fn a_label_is_the_path_without_its_leading_dot() {
        assert_eq!(label(".spec.color"), "spec.color");
        assert_eq!(label("spec.color"), "spec.color");
    }
}
