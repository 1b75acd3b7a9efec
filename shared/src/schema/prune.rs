//! Pruning as apiextensions-apiserver prunes a custom resource on its way in: fields the
//! schema does not specify are dropped (kept under `x-kubernetes-preserve-unknown-fields`;
//! `apiVersion`, `kind` and `metadata` kept at the root and in embedded resources), non-nullable
//! nulls without a default are dropped, and every `metadata` (the root's and embedded
//! resources') is cut down to ObjectMeta's fields. Returns the dropped fields' paths in
//! upstream's order: the root metadata's, the schema's (sorted), the embedded metadata's (sorted).

use serde_json::{Map, Value};

use super::node::{Additional, Node};
use super::report;

/// The fields of `apiVersion`, `kind` and `metadata` that pruning leaves to the resource.
const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

const OBJECT_META_FIELDS: [&str; 15] = [
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

const OWNER_REFERENCE_FIELDS: [&str; 6] = [
    "apiVersion",
    "kind",
    "name",
    "uid",
    "controller",
    "blockOwnerDeletion",
];

const MANAGED_FIELDS_ENTRY_FIELDS: [&str; 7] = [
    "manager",
    "operation",
    "apiVersion",
    "time",
    "fieldsType",
    "fieldsV1",
    "subresource",
];

pub(crate) fn prune(root: &Node, obj: &mut Value) -> Vec<String> {
    let mut unknown = Vec::new();
    if let Some(meta) = obj.as_object_mut().and_then(|m| m.get_mut("metadata")) {
        prune_object_meta(meta, "metadata", &mut unknown);
    }
    let mut p = Pruner {
        path: String::new(),
        unknown: Vec::new(),
    };
    p.prune(obj, Some(root), true);
    p.unknown.sort();
    unknown.append(&mut p.unknown);
    prune_nulls(obj, Some(root));
    let mut embedded = Vec::new();
    coerce_embedded(obj, root, "", &mut embedded);
    embedded.sort();
    unknown.append(&mut embedded);
    unknown
}

/// Upstream `pruning.Prune` alone (no metadata or null handling): what CRD defaults must
/// survive. `root` treats the value as a resource (its `apiVersion`, `kind`, `metadata` kept).
/// Returns the pruned paths, sorted.
pub(crate) fn prune_fields(s: &Node, x: &mut Value, root: bool) -> Vec<String> {
    let mut p = Pruner {
        path: String::new(),
        unknown: Vec::new(),
    };
    p.prune(x, Some(s), root);
    p.unknown.sort();
    p.unknown
}

struct Pruner {
    /// The path of the value being pruned (`spec.items[0]`).
    path: String,
    unknown: Vec<String>,
}

impl Pruner {
    fn push_key(&mut self, k: &str) {
        if !self.path.is_empty() {
            self.path.push('.');
        }
        self.path.push_str(k);
    }

    fn record(&mut self, k: &str) {
        let base = self.path.len();
        self.push_key(k);
        self.unknown.push(self.path.clone());
        self.path.truncate(base);
    }

    /// Prunes `v`, the value of field `k` of an object with schema `s`, by the property's or
    /// `additionalProperties`' schema; false, touching nothing, when `s` allows no such field.
    fn prune_field(&mut self, k: &str, v: &mut Value, s: &Node) -> bool {
        let field = match (s.properties.get(k), &s.additional) {
            (Some(p), _) => Some(p),
            (None, Some(a)) => additional_node(a),
            (None, None) => return false,
        };
        let base = self.path.len();
        self.push_key(k);
        self.prune(v, field, false);
        self.path.truncate(base);
        true
    }

    /// `root` makes the node an embedded resource (the resource itself is one).
    fn prune(&mut self, x: &mut Value, s: Option<&Node>, root: bool) {
        if let Some(s) = s
            && s.preserve_unknown
        {
            self.keep_unknown(x, s, root);
            return;
        }
        let base = self.path.len();
        match x {
            Value::Object(m) => {
                let Some(s) = s else {
                    for k in m.keys() {
                        self.record(k);
                    }
                    m.clear();
                    return;
                };
                let embedded = root || s.embedded;
                let mut drop = Vec::new();
                for (k, v) in m.iter_mut() {
                    if embedded && META_FIELDS.contains(&k.as_str()) {
                        continue;
                    }
                    if !self.prune_field(k, v, s) {
                        if !META_FIELDS.contains(&k.as_str()) || base > 0 {
                            self.record(k);
                        }
                        drop.push(k.clone());
                    }
                }
                remove_keys(m, &drop);
            }
            Value::Array(items) => {
                let item_schema = s.and_then(|s| s.items.as_deref());
                for (i, v) in items.iter_mut().enumerate() {
                    self.path.push_str(&format!("[{i}]"));
                    self.prune(v, item_schema, false);
                    self.path.truncate(base);
                }
            }
            _ => {}
        }
    }

    /// Under `x-kubernetes-preserve-unknown-fields`: unknown fields stay, known ones are pruned
    /// by their schemas.
    fn keep_unknown(&mut self, x: &mut Value, s: &Node, root: bool) {
        let base = self.path.len();
        match x {
            Value::Object(m) => {
                let embedded = root || s.embedded;
                for (k, v) in m.iter_mut() {
                    if embedded && META_FIELDS.contains(&k.as_str()) {
                        continue;
                    }
                    self.prune_field(k, v, s);
                }
            }
            Value::Array(items) => {
                if let Some(item_schema) = s.items.as_deref() {
                    for (i, v) in items.iter_mut().enumerate() {
                        self.path.push_str(&format!("[{i}]"));
                        self.keep_unknown(v, item_schema, false);
                        self.path.truncate(base);
                    }
                }
            }
            _ => {}
        }
    }
}

fn additional_node(a: &Additional) -> Option<&Node> {
    match a {
        Additional::Schema(s) => Some(s),
        Additional::Allows(_) => None,
    }
}

fn remove_keys(m: &mut Map<String, Value>, keys: &[String]) {
    if !keys.is_empty() {
        m.retain(|k, _| !keys.contains(k));
    }
}

fn field_schema<'a>(s: Option<&'a Node>, k: &str) -> Option<&'a Node> {
    let s = s?;
    s.properties
        .get(k)
        .or_else(|| s.additional.as_ref().and_then(additional_node))
}

/// Upstream `PruneNonNullableNullsWithoutDefaults`.
fn prune_nulls(x: &mut Value, s: Option<&Node>) {
    match x {
        Value::Object(m) => {
            let mut drop = Vec::new();
            for (k, v) in m.iter_mut() {
                let fs = field_schema(s, k);
                match fs {
                    Some(f) if v.is_null() && !f.nullable && f.default.is_none() => {
                        drop.push(k.clone())
                    }
                    _ => prune_nulls(v, fs),
                }
            }
            remove_keys(m, &drop);
        }
        Value::Array(items) => {
            let item_schema = s.and_then(|s| s.items.as_deref());
            for v in items {
                prune_nulls(v, item_schema);
            }
        }
        _ => {}
    }
}

/// Upstream `objectmeta.Coerce` on the resource (not itself treated as embedded): the metadata
/// of embedded resources is cut down to ObjectMeta.
fn coerce_embedded(x: &mut Value, s: &Node, path: &str, unknown: &mut Vec<String>) {
    if !s.embedded_below {
        return;
    }
    match x {
        Value::Object(m) => {
            if s.embedded
                && let Some(meta) = m.get_mut("metadata")
            {
                prune_object_meta(meta, &report::child(path, "metadata"), unknown);
                if let Value::Object(meta) = meta
                    && meta.get("creationTimestamp").is_some_and(Value::is_null)
                {
                    meta.remove("creationTimestamp");
                }
            }
            for (k, v) in m.iter_mut() {
                if let Some(p) = s.properties.get(k) {
                    coerce_embedded(v, p, &report::child(path, k), unknown);
                } else if let Some(Additional::Schema(a)) = &s.additional {
                    coerce_embedded(v, a, &format!("{path}[{k}]"), unknown);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = s.items.as_deref() {
                for (i, v) in items.iter_mut().enumerate() {
                    coerce_embedded(v, item_schema, &format!("{path}[{i}]"), unknown);
                }
            }
        }
        _ => {}
    }
}

/// Drops what ObjectMeta does not have (as a strict decode into ObjectMeta reports it:
/// `metadata.foo`, `metadata.ownerReferences[0].bar`).
fn prune_object_meta(meta: &mut Value, prefix: &str, unknown: &mut Vec<String>) {
    let Value::Object(m) = meta else {
        return;
    };
    drop_unknown(m, &OBJECT_META_FIELDS, prefix, unknown);
    for (list, fields) in [
        ("ownerReferences", &OWNER_REFERENCE_FIELDS[..]),
        ("managedFields", &MANAGED_FIELDS_ENTRY_FIELDS[..]),
    ] {
        if let Some(Value::Array(items)) = m.get_mut(list) {
            for (i, item) in items.iter_mut().enumerate() {
                if let Value::Object(o) = item {
                    drop_unknown(o, fields, &format!("{prefix}.{list}[{i}]"), unknown);
                }
            }
        }
    }
}

fn drop_unknown(
    m: &mut Map<String, Value>,
    known: &[&str],
    prefix: &str,
    unknown: &mut Vec<String>,
) {
    let drop: Vec<String> = m
        .keys()
        .filter(|k| !known.contains(&k.as_str()))
        .cloned()
        .collect();
    for k in &drop {
        unknown.push(format!("{prefix}.{k}"));
    }
    remove_keys(m, &drop);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Upstream's pruning/algorithm_test.go case "nested x-kubernetes-preserve-unknown-fields".
    #[test]
    fn preserving_and_pruning_nest_as_upstream_tests_them() {
        let schema = Node::parse(&json!({
            "type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {
                "alpha": {"type": "string"},
                "beta": {"type": "number"},
                "pruning": {"type": "object", "properties": {
                    "preserving": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "pruning": {"type": "object"}}},
                "preserving": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                    "properties": {
                        "preserving": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "preservingUnknownType": {"x-kubernetes-preserve-unknown-fields": true},
                        "pruning": {"type": "object"}}},
                "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields": {
                    "type": "object", "x-kubernetes-preserve-unknown-fields": true,
                    "additionalProperties": {"type": "object", "properties": {
                        "specified": {"type": "object"}}}},
                "preservingAdditionalPropertiesKeyPruneValues": {
                    "type": "object",
                    "additionalProperties": {"type": "object", "properties": {
                        "specified": {"type": "object"}}}}}}));
        let mut obj = json!({
            "unspecified": "bar", "alpha": "abc", "beta": 42.0,
            "unspecifiedObject": {"unspecified": "bar"},
            "pruning": {"unspecified": "bar", "unspecifiedObject": {"unspecified": "bar"},
                        "pruning": {"unspecified": "bar"}, "apiVersion": "unknown",
                        "preserving": {"unspecified": "bar"}},
            "preserving": {"unspecified": "bar", "unspecifiedObject": {"unspecified": "bar"},
                           "pruning": {"unspecified": "bar"}, "preserving": {"unspecified": "bar"},
                           "preservingUnknownType": [{"foo": true}, {"bar": true}]},
            "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields": {
                "foo": {"specified": {"unspecified": "bar"}, "unspecified": "bar"}},
            "preservingAdditionalPropertiesKeyPruneValues": {
                "foo": {"specified": {"unspecified": "bar"}, "unspecified": "bar"}}});
        let pruned = prune_fields(&schema, &mut obj, false);
        assert_eq!(
            obj,
            json!({
                "unspecified": "bar", "alpha": "abc", "beta": 42.0,
                "unspecifiedObject": {"unspecified": "bar"},
                "pruning": {"pruning": {}, "preserving": {"unspecified": "bar"}},
                "preserving": {"unspecified": "bar", "unspecifiedObject": {"unspecified": "bar"},
                               "pruning": {}, "preserving": {"unspecified": "bar"},
                               "preservingUnknownType": [{"foo": true}, {"bar": true}]},
                "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields": {
                    "foo": {"specified": {}}},
                "preservingAdditionalPropertiesKeyPruneValues": {"foo": {"specified": {}}}})
        );
        assert_eq!(
            pruned,
            [
                "preserving.pruning.unspecified",
                "preservingAdditionalPropertiesKeyPruneValues.foo.specified.unspecified",
                "preservingAdditionalPropertiesKeyPruneValues.foo.unspecified",
                "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields.foo.specified.unspecified",
                "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields.foo.unspecified",
                "pruning.apiVersion",
                "pruning.pruning.unspecified",
                "pruning.unspecified",
                "pruning.unspecifiedObject",
            ]
        );
    }

    /// Upstream's cases "object array with nil schema" and "additionalProperties with bool".
    #[test]
    fn values_without_a_schema_lose_every_field() {
        let schema = Node::parse(&json!({"type": "object", "properties": {
            "a": {}, "c": {"type": "object", "additionalProperties": false}}}));
        let mut obj =
            json!({"a": 1, "b": 1, "c": {"a": 1, "b": 2, "c": {"a": 1, "apiVersion": "unknown"}}});
        let pruned = prune_fields(&schema, &mut obj, false);
        assert_eq!(obj, json!({"a": 1, "c": {"a": 1, "b": 2, "c": {}}}));
        assert_eq!(pruned, ["b", "c.c.a", "c.c.apiVersion"]);
    }
}
