//! Reading field sets off values, as structured-merge-diff's typed values do: the fields an
//! applied configuration sets (`ToFieldSet`), and what changed between two versions of an
//! object (`Compare`: added, modified and removed paths).

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::schema::{FieldSchema, ListType, item_element};
use super::set::FieldSet;

/// The fields `value` sets: every leaf, every atomic value, every list item, every entry of a
/// map of data, every `null` and empty object.
pub fn fields_of(schema: &dyn FieldSchema, value: &Value) -> FieldSet {
    let mut out = FieldSet::default();
    if let Value::Object(map) = value {
        object_fields(schema, &mut Vec::new(), map, &mut out);
    }
    out
}

fn object_fields(
    schema: &dyn FieldSchema,
    path: &mut Vec<String>,
    map: &Map<String, Value>,
    out: &mut FieldSet,
) {
    let data = schema.keys_are_data(path);
    for (key, child) in map {
        path.push(key.clone());
        let node = out.child_mut(&format!("f:{key}"));
        value_fields(schema, path, child, node);
        if data || child.is_null() || child.as_object().is_some_and(Map::is_empty) {
            node.me = true;
        }
        path.pop();
    }
}

/// The fields of `value`, at `path`, into its own node `out`.
fn value_fields(
    schema: &dyn FieldSchema,
    path: &mut Vec<String>,
    value: &Value,
    out: &mut FieldSet,
) {
    match value {
        Value::Object(map) if !schema.is_atomic_object(path) => {
            object_fields(schema, path, map, out)
        }
        Value::Array(items) => {
            let list = schema.list_type(path);
            if list == ListType::Atomic {
                out.me = true;
                return;
            }
            for item in items {
                let Some(element) = item_element(schema, path, &list, item) else {
                    continue;
                };
                let node = out.child_mut(&element);
                node.me = true;
                if let (ListType::Map(_), Value::Object(m)) = (&list, item) {
                    object_fields(schema, path, m, node);
                }
            }
        }
        _ => out.me = true,
    }
}

/// What changed between two versions of an object.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Comparison {
    pub added: FieldSet,
    pub modified: FieldSet,
    pub removed: FieldSet,
}

impl Comparison {
    /// The paths a write set: added or modified.
    pub fn changed(&self) -> FieldSet {
        let mut s = self.added.clone();
        s.union(&self.modified);
        s
    }
}

/// Compares `old` with `new`. An inner node that appears or goes is itself added or removed,
/// beside its children; leaves (scalars, atomic values) are added, removed or modified.
pub fn compare(schema: &dyn FieldSchema, old: &Value, new: &Value) -> Comparison {
    let mut out = Comparison::default();
    let mut walk = Walk {
        schema,
        path: Vec::new(),
        elements: Vec::new(),
        out: &mut out,
    };
    walk.value(Some(old), Some(new));
    out
}

struct Walk<'a> {
    schema: &'a dyn FieldSchema,
    /// Field names, as the schema takes them.
    path: Vec<String>,
    /// Path elements, as sets hold them.
    elements: Vec<String>,
    out: &'a mut Comparison,
}

impl Walk<'_> {
    fn value(&mut self, old: Option<&Value>, new: Option<&Value>) {
        let inner = match (old, new) {
            (Some(Value::Object(_)) | None, Some(Value::Object(_)) | None)
                if !self.schema.is_atomic_object(&self.path) =>
            {
                self.object(
                    old.and_then(Value::as_object),
                    new.and_then(Value::as_object),
                );
                true
            }
            (Some(Value::Array(_)) | None, Some(Value::Array(_)) | None) => {
                let list = self.schema.list_type(&self.path);
                if list == ListType::Atomic {
                    false
                } else {
                    self.list(
                        &list,
                        old.and_then(Value::as_array),
                        new.and_then(Value::as_array),
                    );
                    true
                }
            }
            _ => false,
        };
        if self.elements.is_empty() {
            return;
        }
        match (old, new) {
            (None, Some(_)) => self.out.added.insert(&self.elements),
            (Some(_), None) => self.out.removed.insert(&self.elements),
            (Some(o), Some(n)) if !inner && o != n => self.out.modified.insert(&self.elements),
            _ => {}
        }
    }

    fn object(&mut self, old: Option<&Map<String, Value>>, new: Option<&Map<String, Value>>) {
        let empty = Map::new();
        let (o, n) = (old.unwrap_or(&empty), new.unwrap_or(&empty));
        for key in n.keys().chain(o.keys().filter(|k| !n.contains_key(*k))) {
            self.path.push(key.clone());
            self.elements.push(format!("f:{key}"));
            self.value(o.get(key), n.get(key));
            self.elements.pop();
            self.path.pop();
        }
    }

    fn list(&mut self, list: &ListType, old: Option<&Vec<Value>>, new: Option<&Vec<Value>>) {
        let index = |items: Option<&Vec<Value>>| -> Vec<(String, Value)> {
            items
                .into_iter()
                .flatten()
                .filter_map(|i| {
                    item_element(self.schema, &self.path, list, i).map(|e| (e, i.clone()))
                })
                .collect()
        };
        let (o, n) = (index(old), index(new));
        // By name, so long lists compare in linear time (the first of duplicates wins).
        let by_name = |items: &[(String, Value)]| -> HashMap<String, Value> {
            let mut m = HashMap::with_capacity(items.len());
            for (k, v) in items {
                m.entry(k.clone()).or_insert_with(|| v.clone());
            }
            m
        };
        let (before_items, after_items) = (by_name(&o), by_name(&n));
        let mut names: Vec<String> = n.iter().map(|(e, _)| e.clone()).collect();
        names.extend(
            o.iter()
                .map(|(e, _)| e.clone())
                .filter(|e| !after_items.contains_key(e)),
        );
        let mut seen = HashSet::new();
        names.retain(|e| seen.insert(e.clone()));
        for element in names {
            let (before, after) = (
                before_items.get(&element).cloned(),
                after_items.get(&element).cloned(),
            );
            self.elements.push(element);
            match list {
                ListType::Map(_) => self.value(before.as_ref(), after.as_ref()),
                _ => match (&before, &after) {
                    (None, Some(_)) => self.out.added.insert(&self.elements),
                    (Some(_), None) => self.out.removed.insert(&self.elements),
                    _ => {}
                },
            }
            self.elements.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::managed_fields::schema::BuiltIn;
    use crate::managed_fields::set::render_path;
    use serde_json::json;

    fn printed(s: &FieldSet) -> Vec<String> {
        s.members().iter().map(|p| render_path(p)).collect()
    }

    const DEPLOYMENT: BuiltIn = BuiltIn { kind: "Deployment" };

    #[test]
    fn an_applied_configuration_owns_leaves_items_and_atomic_values() {
        let config = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx",
                    "args": ["a", "b"], "ports": [{"containerPort": 80}]}]}}}});
        let set = fields_of(&DEPLOYMENT, &config);
        assert_eq!(
            printed(&set),
            [
                ".apiVersion",
                ".kind",
                ".metadata.name",
                ".metadata.labels.app",
                ".spec.replicas",
                ".spec.selector",
                ".spec.template.spec.containers[name=\"nginx\"]",
                ".spec.template.spec.containers[name=\"nginx\"].args",
                ".spec.template.spec.containers[name=\"nginx\"].image",
                ".spec.template.spec.containers[name=\"nginx\"].name",
                ".spec.template.spec.containers[name=\"nginx\"].ports[containerPort=80,protocol=\"TCP\"]",
                ".spec.template.spec.containers[name=\"nginx\"].ports[containerPort=80,protocol=\"TCP\"].containerPort",
            ]
        );
    }

    #[test]
    fn comparisons_tell_added_modified_and_removed_apart() {
        struct Case {
            name: &'static str,
            old: Value,
            new: Value,
            added: &'static [&'static str],
            modified: &'static [&'static str],
            removed: &'static [&'static str],
        }
        let cases = [
            Case {
                name: "a changed scalar is modified",
                old: json!({"spec": {"replicas": 1}}),
                new: json!({"spec": {"replicas": 2}}),
                added: &[],
                modified: &[".spec.replicas"],
                removed: &[],
            },
            Case {
                name: "an equal value is no change",
                old: json!({"spec": {"replicas": 1}}),
                new: json!({"spec": {"replicas": 1}}),
                added: &[],
                modified: &[],
                removed: &[],
            },
            Case {
                name: "a new object is added with its leaves",
                old: json!({"spec": {}}),
                new: json!({"spec": {"strategy": {"type": "Recreate"}}}),
                added: &[".spec.strategy", ".spec.strategy.type"],
                modified: &[],
                removed: &[],
            },
            Case {
                name: "an atomic list changes whole",
                old: json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "args": ["x"]}]}}}}),
                new: json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "args": ["y"]}]}}}}),
                added: &[],
                modified: &[".spec.template.spec.containers[name=\"a\"].args"],
                removed: &[],
            },
            Case {
                name: "keyed items come and go by key",
                old: json!({"spec": {"template": {"spec": {"containers": [{"name": "a"}]}}}}),
                new: json!({"spec": {"template": {"spec": {"containers": [{"name": "b"}]}}}}),
                added: &[
                    ".spec.template.spec.containers[name=\"b\"]",
                    ".spec.template.spec.containers[name=\"b\"].name",
                ],
                modified: &[],
                removed: &[
                    ".spec.template.spec.containers[name=\"a\"]",
                    ".spec.template.spec.containers[name=\"a\"].name",
                ],
            },
            Case {
                name: "an atomic selector is one value",
                old: json!({"spec": {"selector": {"matchLabels": {"a": "1"}}}}),
                new: json!({"spec": {"selector": {"matchLabels": {"a": "2"}}}}),
                added: &[],
                modified: &[".spec.selector"],
                removed: &[],
            },
        ];
        for c in cases {
            let got = compare(&DEPLOYMENT, &c.old, &c.new);
            assert_eq!(printed(&got.added), c.added, "{}: added", c.name);
            assert_eq!(printed(&got.modified), c.modified, "{}: modified", c.name);
            assert_eq!(printed(&got.removed), c.removed, "{}: removed", c.name);
        }
    }

    #[test]
    fn set_items_are_added_and_removed_by_value() {
        let got = compare(
            &BuiltIn { kind: "Pod" },
            &json!({"metadata": {"finalizers": ["a", "b"]}}),
            &json!({"metadata": {"finalizers": ["b", "c"]}}),
        );
        assert_eq!(printed(&got.added), [".metadata.finalizers[=\"c\"]"]);
        assert_eq!(printed(&got.removed), [".metadata.finalizers[=\"a\"]"]);
        assert!(got.modified.is_empty());
    }
}
