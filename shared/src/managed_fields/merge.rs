//! Merging an applied configuration into the stored object, and pruning what its applier
//! stopped applying — structured-merge-diff's `Merge` and `prune`. Objects merge field by
//! field; map lists item by item on their keys, set lists value by value; atomic values and
//! lists are replaced. A `null` in the configuration removes the field.
//!
//! Order of merged lists (upstream's): the stored items the configuration does not name keep
//! their places; the configuration's items come in its order, each shared item where the
//! configuration puts it. Worked example: stored `[a, b, c]`, applied `[c, a, d]` gives
//! `[b, c, a, d]`: `b` is only stored and comes before the first shared item; `c` and `a`
//! follow in the configuration's order; `d` is new and follows `a`.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::schema::{FieldSchema, ListType, item_element};
use super::set::FieldSet;

/// `config` merged into `live`.
pub fn merge(schema: &dyn FieldSchema, live: &Value, config: &Value) -> Value {
    merge_at(schema, &mut Vec::new(), Some(live), config)
}

fn merge_at(
    schema: &dyn FieldSchema,
    path: &mut Vec<String>,
    live: Option<&Value>,
    config: &Value,
) -> Value {
    match (live, config) {
        (Some(Value::Object(l)), Value::Object(c)) if !schema.is_atomic_object(path) => {
            let mut out = l.clone();
            for (key, value) in c {
                if value.is_null() {
                    out.remove(key);
                    continue;
                }
                path.push(key.clone());
                let merged = merge_at(schema, path, l.get(key), value);
                path.pop();
                out.insert(key.clone(), merged);
            }
            Value::Object(out)
        }
        (Some(Value::Array(l)), Value::Array(c)) => match schema.list_type(path) {
            ListType::Atomic => config.clone(),
            list => Value::Array(merge_list(schema, path, &list, l, c)),
        },
        _ => without_nulls(config),
    }
}

/// A configuration's value taken whole: its `null` fields mean absent.
fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

fn merge_list(
    schema: &dyn FieldSchema,
    path: &mut Vec<String>,
    list: &ListType,
    live: &[Value],
    config: &[Value],
) -> Vec<Value> {
    let name = |v: &Value| item_element(schema, path, list, v).unwrap_or_default();
    let live_names: Vec<String> = live.iter().map(name).collect();
    let config_names: Vec<String> = config.iter().map(name).collect();
    // Lookups by name, so a long list merges in linear time (the first of duplicates wins).
    let mut positions: HashMap<&str, usize> = HashMap::with_capacity(live.len());
    for (i, n) in live_names.iter().enumerate() {
        positions.entry(n.as_str()).or_insert(i);
    }
    let stored = |n: &str| positions.get(n).copied();
    let in_config: HashSet<&str> = config_names.iter().map(String::as_str).collect();
    // The shared items, in the configuration's order; `next` is the one due.
    let shared: Vec<&String> = config_names
        .iter()
        .filter(|n| stored(n).is_some())
        .collect();
    let mut next = 0;
    let mut emitted: HashSet<&str> = HashSet::new();
    let mut out = Vec::with_capacity(live.len().max(config.len()));
    let (mut l, mut c) = (0, 0);
    while l < live.len() || c < config.len() {
        if l < live.len() && c < config.len() {
            if live_names[l] == config_names[c] {
                out.push(merge_item(schema, path, list, Some(&live[l]), &config[c]));
                emitted.insert(&config_names[c]);
                (l, c, next) = (l + 1, c + 1, next + 1);
                continue;
            }
            // A shared item the configuration puts later waits for its turn.
            if in_config.contains(live_names[l].as_str())
                && shared.get(next).is_some_and(|s| **s != live_names[l])
            {
                l += 1;
                continue;
            }
        }
        if l < live.len() {
            if !in_config.contains(live_names[l].as_str()) {
                out.push(live[l].clone());
                l += 1;
                continue;
            }
            if emitted.contains(live_names[l].as_str()) {
                l += 1;
                continue;
            }
        }
        if c < config.len() {
            let before = stored(&config_names[c]).map(|i| &live[i]);
            out.push(merge_item(schema, path, list, before, &config[c]));
            emitted.insert(&config_names[c]);
            if shared.get(next).is_some_and(|s| **s == config_names[c]) {
                next += 1;
            }
            c += 1;
        }
    }
    out
}

/// One item of a merged list: a map list's item merged with the stored one.
fn merge_item(
    schema: &dyn FieldSchema,
    path: &mut Vec<String>,
    list: &ListType,
    live: Option<&Value>,
    config: &Value,
) -> Value {
    match (list, live) {
        (ListType::Map(_), Some(l)) => merge_at(schema, path, Some(l), config),
        _ => without_nulls(config),
    }
}

/// Removes from `merged` what `last` (the applier's previous configuration) set and no
/// manager owns any more (`owned`: every other manager's fields and the new configuration's).
/// A field is removed whole, with whatever is below it, when it was in `last` (itself or
/// something below it) and nothing of it is owned; otherwise the walk goes into it.
pub fn prune(schema: &dyn FieldSchema, merged: &mut Value, last: &FieldSet, owned: &FieldSet) {
    prune_at(schema, &mut Vec::new(), merged, last, owned);
}

fn prune_at(
    schema: &dyn FieldSchema,
    path: &mut Vec<String>,
    value: &mut Value,
    last: &FieldSet,
    owned: &FieldSet,
) {
    let none = FieldSet::default();
    match value {
        Value::Object(map) if !schema.is_atomic_object(path) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                let element = format!("f:{key}");
                let Some(was) = last.child(&element) else {
                    continue;
                };
                // The object's identity is never the applier's to remove.
                let identity =
                    path.is_empty() && matches!(key.as_str(), "apiVersion" | "kind" | "metadata");
                match owned.child(&element) {
                    None if !identity => {
                        map.remove(&key);
                    }
                    still => {
                        if let Some(child) = map.get_mut(&key) {
                            path.push(key.clone());
                            prune_at(schema, path, child, was, still.unwrap_or(&none));
                            path.pop();
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            let list = schema.list_type(path);
            if list == ListType::Atomic {
                return;
            }
            let mut kept = Vec::with_capacity(items.len());
            for mut item in std::mem::take(items) {
                let Some(element) = item_element(schema, path, &list, &item) else {
                    kept.push(item);
                    continue;
                };
                match (last.child(&element), owned.child(&element)) {
                    (Some(_), None) => continue,
                    (Some(was), Some(still)) if matches!(list, ListType::Map(_)) => {
                        prune_at(schema, path, &mut item, was, still);
                    }
                    _ => {}
                }
                kept.push(item);
            }
            *items = kept;
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::managed_fields::compare::fields_of;
    use crate::managed_fields::schema::BuiltIn;
    use serde_json::json;

    const DEPLOYMENT: BuiltIn = BuiltIn { kind: "Deployment" };

    fn containers(names: &[&str]) -> Value {
        let items: Vec<Value> = names.iter().map(|n| json!({"name": n})).collect();
        json!({"spec": {"template": {"spec": {"containers": items}}}})
    }

    fn names(v: &Value) -> Vec<String> {
        v["spec"]["template"]["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| c["name"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    #[test]
    fn merges_follow_list_types_and_keep_stored_fields() {
        struct Case {
            name: &'static str,
            live: Value,
            config: Value,
            want: Value,
        }
        let cases = [
            Case {
                name: "objects merge field by field; null removes",
                live: json!({"spec": {"replicas": 1, "paused": true, "minReadySeconds": 5}}),
                config: json!({"spec": {"replicas": 3, "paused": null}}),
                want: json!({"spec": {"replicas": 3, "minReadySeconds": 5}}),
            },
            Case {
                name: "keyed items merge with the stored item of the same key",
                live: json!({"spec": {"template": {"spec": {"containers": [
                    {"name": "a", "image": "x", "imagePullPolicy": "Always",
                     "ports": [{"containerPort": 80, "protocol": "TCP", "name": "http"}]}]}}}}),
                config: json!({"spec": {"template": {"spec": {"containers": [
                    {"name": "a", "image": "y", "ports": [{"containerPort": 80}]}]}}}}),
                want: json!({"spec": {"template": {"spec": {"containers": [
                    {"name": "a", "image": "y", "imagePullPolicy": "Always",
                     "ports": [{"containerPort": 80, "protocol": "TCP", "name": "http"}]}]}}}}),
            },
            Case {
                name: "atomic lists are replaced",
                live: json!({"spec": {"template": {"spec": {"tolerations": [{"key": "a"}, {"key": "b"}]}}}}),
                config: json!({"spec": {"template": {"spec": {"tolerations": [{"key": "c"}]}}}}),
                want: json!({"spec": {"template": {"spec": {"tolerations": [{"key": "c"}]}}}}),
            },
            Case {
                name: "sets are unions",
                live: json!({"metadata": {"finalizers": ["a", "b"]}}),
                config: json!({"metadata": {"finalizers": ["c", "a"]}}),
                want: json!({"metadata": {"finalizers": ["c", "a", "b"]}}),
            },
            Case {
                name: "atomic objects are replaced",
                live: json!({"spec": {"selector": {"matchLabels": {"a": "1", "b": "2"}}}}),
                config: json!({"spec": {"selector": {"matchLabels": {"a": "1"}}}}),
                want: json!({"spec": {"selector": {"matchLabels": {"a": "1"}}}}),
            },
        ];
        for c in cases {
            assert_eq!(merge(&DEPLOYMENT, &c.live, &c.config), c.want, "{}", c.name);
        }
    }

    #[test]
    fn merged_lists_keep_stored_items_in_place_and_take_the_configurations_order() {
        let cases: [(&[&str], &[&str], &[&str]); 4] = [
            (&["a", "b", "c"], &["c", "a", "d"], &["b", "c", "a", "d"]),
            (&["a"], &["a", "sidecar"], &["a", "sidecar"]),
            (&["a", "b"], &["b"], &["a", "b"]),
            (&[], &["x", "y"], &["x", "y"]),
        ];
        for (live, config, want) in cases {
            let got = merge(&DEPLOYMENT, &containers(live), &containers(config));
            assert_eq!(names(&got), want, "{live:?} + {config:?}");
        }
    }

    #[test]
    fn pruning_removes_what_the_applier_dropped_unless_someone_owns_it() {
        let merged = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "labels": {"a": "1", "b": "2"}},
            "data": {"kept": "1", "dropped": "2", "shared": "3", "unowned": "4"}});
        let last = fields_of(
            &DEPLOYMENT,
            &json!({"metadata": {"labels": {"a": "1"}},
            "data": {"kept": "1", "dropped": "2", "shared": "3"}}),
        );
        // The new configuration keeps `kept` and names the object; another manager owns
        // `shared`; nobody owns `unowned`, which the applier never set, so it stays. Nothing
        // of `labels` is owned any more: it goes whole, `b` (nobody's) with it, as upstream's
        // prune removes a field named in the last set that no manager holds.
        let mut owned = fields_of(
            &DEPLOYMENT,
            &json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c"}, "data": {"kept": "1"}}),
        );
        owned.union(&fields_of(&DEPLOYMENT, &json!({"data": {"shared": "3"}})));
        let mut pruned = merged.clone();
        prune(&DEPLOYMENT, &mut pruned, &last, &owned);
        assert_eq!(
            pruned,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c"},
                "data": {"kept": "1", "unowned": "4", "shared": "3"}})
        );
    }

    #[test]
    fn pruning_removes_keyed_items_and_set_values_the_applier_dropped() {
        let mut merged = containers(&["a", "b"]);
        merged["metadata"] = json!({"name": "d", "finalizers": ["x", "y"]});
        let last = fields_of(&DEPLOYMENT, &{
            let mut c = containers(&["a", "b"]);
            c["metadata"] = json!({"finalizers": ["x", "y"]});
            c
        });
        let owned = fields_of(&DEPLOYMENT, &{
            let mut c = containers(&["a"]);
            c["metadata"] = json!({"name": "d", "finalizers": ["y"]});
            c
        });
        prune(&DEPLOYMENT, &mut merged, &last, &owned);
        assert_eq!(names(&merged), ["a"]);
        assert_eq!(merged["metadata"]["finalizers"], json!(["y"]));
    }
}
