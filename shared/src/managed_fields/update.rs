//! Updates (create, PUT, and every PATCH but server-side apply) recorded in
//! `metadata.managedFields` as kube-apiserver records them: the fields a write changed
//! become its manager's and are taken from every other manager, appliers included (an update
//! never conflicts); what it removed leaves every set.
//!
//! The sets follow upstream's shape — leaves, list items by their keys, maps of data marked
//! owned — without its whole schema machinery: a nested struct that upstream marks `.`
//! because Go declares it a pointer is not marked here.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::Writer;
use super::entries::{self, Entry};
use super::schema::{FieldSchema, ListType, WithObjectMeta, item_element};
use super::set::FieldSet;

/// Metadata fields no manager owns (upstream's stripped set).
pub(super) const STRIPPED_META: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "selfLink",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// What a write changed: the paths it added or modified, and those it removed.
#[derive(Default)]
struct Change {
    set: FieldSet,
    removed: FieldSet,
}

struct Walk<'a> {
    schema: &'a dyn FieldSchema,
}

impl Walk<'_> {
    /// Compares the top-level fields of `old` and `new` that `wanted` names, as [`Walk::diff`]
    /// compares an object's (without copying the wanted part out first).
    fn top_level(
        &self,
        old: Option<&Value>,
        new: &Value,
        wanted: impl Fn(&str) -> bool,
        change: &mut Change,
    ) {
        let empty = Map::new();
        let o = old.and_then(Value::as_object).unwrap_or(&empty);
        let n = new.as_object().unwrap_or(&empty);
        let keys = n.keys().chain(o.keys().filter(|k| !n.contains_key(*k)));
        for key in keys.filter(|k| wanted(k)) {
            let mut path = vec![key.clone()];
            self.field(&mut path, key, o.get(key), n.get(key), change);
        }
    }

    /// Compares one field of an object, `old` and `new` its values, and adds what changed
    /// under `f:<key>` to the object's `change`; `path` ends with `key`. A field whose value
    /// is the same on both sides changed nothing (so it is not walked).
    fn field(
        &self,
        path: &mut Vec<String>,
        key: &str,
        old: Option<&Value>,
        new: Option<&Value>,
        change: &mut Change,
    ) {
        if old == new {
            return;
        }
        let mut child = Change::default();
        self.diff(path, old, new, &mut child);
        let name = format!("f:{key}");
        if !child.set.is_empty() {
            change.set.children.insert(name.clone(), child.set);
        }
        if !child.removed.is_empty() {
            change.removed.children.insert(name, child.removed);
        }
    }

    /// Compares `old` and `new` at `path` (field names only, as the schema wants them)
    /// into `change`, whose node is this value's.
    fn diff(
        &self,
        path: &mut Vec<String>,
        old: Option<&Value>,
        new: Option<&Value>,
        change: &mut Change,
    ) {
        match (old, new) {
            (_, Some(Value::Object(n))) if !n.is_empty() && !self.schema.is_atomic_object(path) => {
                let empty = Map::new();
                let o = old.and_then(Value::as_object).unwrap_or(&empty);
                if old.is_none_or(|o| !o.is_object()) && self.schema.keys_are_data(path) {
                    change.set.me = true;
                }
                for key in n.keys().chain(o.keys().filter(|k| !n.contains_key(*k))) {
                    if path.len() == 1
                        && path[0] == "metadata"
                        && STRIPPED_META.contains(&key.as_str())
                    {
                        continue;
                    }
                    path.push(key.clone());
                    self.field(path, key, o.get(key), n.get(key), change);
                    path.pop();
                }
            }
            (_, Some(Value::Array(items))) if !items.is_empty() => {
                match self.schema.list_type(path) {
                    ListType::Map(keys) => {
                        self.keyed(path, &ListType::Map(keys), old, items, change)
                    }
                    ListType::Set => {
                        let before: Vec<&Value> = old
                            .and_then(Value::as_array)
                            .map(|a| a.iter().collect())
                            .unwrap_or_default();
                        let (had, has): (HashSet<String>, HashSet<String>) = (
                            before.iter().map(|v| v.to_string()).collect(),
                            items.iter().map(|v| v.to_string()).collect(),
                        );
                        leaves_not_in(items, &had, &mut change.set);
                        leaves_not_in(before, &has, &mut change.removed);
                    }
                    ListType::Atomic => {
                        if old != new {
                            change.set.me = true;
                        }
                    }
                }
            }
            (Some(_), None) => change.removed.me = true,
            (o, Some(n)) => {
                if o != Some(n) {
                    change.set.me = true;
                }
            }
            (None, None) => {}
        }
    }

    /// A list merged by keys: items are `k:{"key":value}` nodes, themselves owned.
    fn keyed(
        &self,
        path: &mut Vec<String>,
        list: &ListType,
        old: Option<&Value>,
        items: &[Value],
        change: &mut Change,
    ) {
        let id = |path: &[String], item: &Value| {
            item_element(self.schema, path, list, item).unwrap_or_default()
        };
        // By name, so long lists compare in linear time (the first of duplicates wins).
        let mut before: Vec<(String, &Value)> = Vec::new();
        let mut index: HashMap<String, &Value> = HashMap::new();
        for i in old.and_then(Value::as_array).into_iter().flatten() {
            let name = id(path, i);
            index.entry(name.clone()).or_insert(i);
            before.push((name, i));
        }
        let find = |name: &str| index.get(name).copied();
        let mut seen = HashSet::new();
        for item in items {
            let name = id(path, item);
            let was = find(&name);
            if was == Some(item) {
                seen.insert(name);
                continue;
            }
            let mut child = Change::default();
            self.diff(path, was, Some(item), &mut child);
            if was.is_none() {
                child.set.me = true;
            }
            if !child.set.is_empty() {
                change.set.children.insert(name.clone(), child.set);
            }
            if !child.removed.is_empty() {
                change.removed.children.insert(name.clone(), child.removed);
            }
            seen.insert(name);
        }
        for (name, _) in before.iter().filter(|(n, _)| !seen.contains(n)) {
            change
                .removed
                .children
                .insert(name.clone(), FieldSet::leaf());
        }
    }
}

/// Whether the top-level field `key` is in the part of an object a write through
/// `subresource` may own: `status` through the status subresource, the rest otherwise.
fn in_scope(key: &str, subresource: Option<&str>, status_subresource: bool) -> bool {
    let in_status = key == "status";
    match subresource {
        Some("status") => in_status,
        _ => (!in_status || !status_subresource) && key != "apiVersion" && key != "kind",
    }
}

/// Records `writer`'s write of `new` (over `old`, none for a create) in `new`'s
/// `metadata.managedFields`: what the write changed becomes its own and is taken from every
/// other manager, appliers included (an update never conflicts); what it removed leaves every
/// set. The sets start from `old`'s entries, or from those `new` carries when it carries
/// different ones (upstream lets a client rewrite them: kubectl moves a client-side applier's
/// fields to its server-side one so), none when it carries an empty list (a reset). A write
/// that changes no field leaves the entries as they were.
pub fn record_with(
    schema: &dyn FieldSchema,
    old: Option<&Value>,
    new: &mut Value,
    writer: &Writer,
) {
    let mut change = Change::default();
    Walk {
        schema: &WithObjectMeta(schema),
    }
    .top_level(
        old,
        new,
        |k| in_scope(k, writer.subresource, writer.status_subresource),
        &mut change,
    );

    let stored = old.and_then(|o| o.pointer("/metadata/managedFields"));
    let base = match new.pointer("/metadata/managedFields") {
        Some(Value::Array(a)) if a.is_empty() => None,
        Some(sent @ Value::Array(_)) if !entries::read(Some(new)).is_empty() => Some(sent.clone()),
        _ => stored.cloned(),
    };
    if change.set.is_empty() && change.removed.is_empty() {
        if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
            match base {
                Some(k) => meta.insert("managedFields".into(), k),
                None => meta.remove("managedFields"),
            };
        }
        return;
    }
    let mut list = match &base {
        Some(b) => entries::read(Some(&serde_json::json!({"metadata": {"managedFields": b}}))),
        None => Vec::new(),
    };
    let mine_at = list
        .iter()
        .position(|e| e.is(writer.manager, writer.operation, writer.subresource));
    let mut mine = mine_at.map(|i| list.remove(i).fields).unwrap_or_default();
    for e in list.iter_mut() {
        e.fields.difference(&change.set);
        e.fields.remove_subtrees(&change.removed);
    }
    mine.remove_subtrees(&change.removed);
    mine.union(&change.set);
    list.push(Entry {
        manager: writer.manager.to_string(),
        operation: writer.operation.to_string(),
        api_version: writer.api_version.to_string(),
        time: Some(writer.time.to_string()),
        subresource: writer.subresource.map(String::from),
        fields: mine,
    });
    entries::write(new, list);
}

/// A `v:<value>` leaf in `into` for each of a set list's `values` not in `others` (values
/// compared as JSON text).
fn leaves_not_in<'a>(
    values: impl IntoIterator<Item = &'a Value>,
    others: &HashSet<String>,
    into: &mut FieldSet,
) {
    for v in values {
        if !others.contains(&v.to_string()) {
            into.children.insert(format!("v:{v}"), FieldSet::leaf());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::managed_fields::record;
    use serde_json::json;

    fn writer<'a>(manager: &'a str, subresource: Option<&'a str>) -> Writer<'a> {
        Writer {
            manager,
            operation: "Update",
            subresource,
            api_version: "apps/v1",
            time: "2024-05-06T07:08:09Z",
            status_subresource: true,
        }
    }

    /// Records a write by `manager` to the main resource.
    fn update(kind: &str, old: Option<&Value>, new: &mut Value, manager: &str) {
        record(kind, old, new, &writer(manager, None));
    }

    fn deployment(image: &str) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "uid": "u", "labels": {"app": "web"}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "nginx", "image": image,
                        "ports": [{"containerPort": 80, "protocol": "TCP"}]}]}}},
            "status": {"replicas": 1}})
    }

    fn managers(obj: &Value) -> Vec<String> {
        obj["metadata"]["managedFields"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|e| e["manager"].as_str().unwrap_or_default().to_string())
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn a_create_owns_every_field_but_status_and_server_metadata_in_upstreams_form() {
        let mut obj = deployment("nginx:1.14.2");
        update("Deployment", None, &mut obj, "kubectl-create");
        let entry = &obj["metadata"]["managedFields"][0];
        assert_eq!(entry["manager"], "kubectl-create");
        assert_eq!(entry["operation"], "Update");
        assert_eq!(entry["fieldsType"], "FieldsV1");
        assert!(entry.get("subresource").is_none());
        let f = &entry["fieldsV1"];
        assert_eq!(f["f:metadata"], json!({"f:labels": {".": {}, "f:app": {}}}));
        assert!(f.get("f:status").is_none());
        let container =
            &f["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"nginx\"}"];
        assert_eq!(container["."], json!({}));
        assert_eq!(container["f:image"], json!({}));
        assert_eq!(
            container["f:ports"]["k:{\"containerPort\":80,\"protocol\":\"TCP\"}"]["f:containerPort"],
            json!({})
        );
        assert_eq!(f["f:spec"]["f:replicas"], json!({}));
    }

    #[test]
    fn an_update_takes_the_fields_it_changes_from_other_updaters() {
        let mut created = deployment("nginx:1.14.2");
        update("Deployment", None, &mut created, "kubectl-create");
        let mut set = created.clone();
        set["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.16.1");
        update("Deployment", Some(&created), &mut set, "kubectl-set");
        assert_eq!(managers(&set), ["kubectl-create", "kubectl-set"]);
        let key = "k:{\"name\":\"nginx\"}";
        let by = |i: usize| {
            set["metadata"]["managedFields"][i]["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"][key].clone()
        };
        assert!(
            by(0).get("f:image").is_none(),
            "the creator lost the image: {}",
            by(0)
        );
        assert_eq!(by(1), json!({"f:image": {}}));

        // The same write again changes nothing: the entries (and their times) stay.
        let mut again = set.clone();
        record(
            "Deployment",
            Some(&set),
            &mut again,
            &Writer {
                time: "2030-01-01T00:00:00Z",
                ..writer("kubectl-set", None)
            },
        );
        assert_eq!(
            again["metadata"]["managedFields"],
            set["metadata"]["managedFields"]
        );
    }

    #[test]
    fn status_writes_are_their_own_entry_and_a_manager_left_with_nothing_goes() {
        let mut obj = deployment("a");
        update("Deployment", None, &mut obj, "kubectl-create");
        let mut status = obj.clone();
        status["status"]["replicas"] = json!(2);
        record(
            "Deployment",
            Some(&obj),
            &mut status,
            &writer("berth-controller", Some("status")),
        );
        // Entries come in upstream's order: same operation and time, so by manager name.
        let entry = &status["metadata"]["managedFields"][0];
        assert_eq!(entry["manager"], "berth-controller");
        assert_eq!(entry["subresource"], "status");
        assert_eq!(entry["fieldsV1"], json!({"f:status": {"f:replicas": {}}}));

        // A manager that changes everything the creator set leaves the creator nothing.
        let mut replaced = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
        update("ConfigMap", None, &mut replaced, "one");
        let mut second = replaced.clone();
        second["data"]["a"] = json!("2");
        update("ConfigMap", Some(&replaced), &mut second, "two");
        assert_eq!(
            managers(&second),
            ["one", "two"],
            "one still owns data itself"
        );
        let mut third = second.clone();
        third.as_object_mut().map(|o| o.remove("data"));
        update("ConfigMap", Some(&second), &mut third, "two");
        assert!(third["metadata"].get("managedFields").is_none(), "{third}");
    }

    #[test]
    fn finalizers_are_a_set_of_values() {
        let mut obj = json!({"metadata": {"name": "p", "finalizers": ["a.io/x"]}});
        update("Pod", None, &mut obj, "m");
        assert_eq!(
            obj["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:metadata": {"f:finalizers": {"v:\"a.io/x\"": {}}}})
        );
    }

    #[test]
    fn a_client_may_rewrite_or_reset_the_entries() {
        let mut created = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
        update("ConfigMap", None, &mut created, "kubectl-client-side-apply");
        // kubectl's move of a client-side applier's fields to its server-side applier.
        let mut moved = created.clone();
        moved["metadata"]["managedFields"][0]["manager"] = json!("kubectl");
        moved["metadata"]["managedFields"][0]["operation"] = json!("Apply");
        update("ConfigMap", Some(&created), &mut moved, "kubectl");
        assert_eq!(moved["metadata"]["managedFields"][0]["manager"], "kubectl");
        assert_eq!(moved["metadata"]["managedFields"][0]["operation"], "Apply");
        // An empty list resets them: only this write's fields are left.
        let mut reset = moved.clone();
        reset["metadata"]["managedFields"] = json!([]);
        reset["data"]["b"] = json!("2");
        update("ConfigMap", Some(&moved), &mut reset, "m");
        let entries = reset["metadata"]["managedFields"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0]["fieldsV1"], json!({"f:data": {"f:b": {}}}));
    }
}
