//! `metadata.managedFields`: which field manager set which fields, as kube-apiserver records
//! it for every write. A write's manager is its `fieldManager` parameter or its client's
//! user-agent (`kubectl-set`, `kubectl-client-side-apply`, `kubectl`…); the fields it
//! changed become its own, in upstream's `FieldsV1` form (`f:name`, `k:{"name":"nginx"}` for
//! items of lists merged by key, `v:"x"` for set items, `.` for a node that is itself owned),
//! and are taken from every other `Update` manager. One entry per manager, operation and
//! subresource; an entry left with no fields goes.
//!
//! The sets follow upstream's shape — leaves, list items by their merge keys (from the
//! strategic-merge table), maps of string keys marked owned — without its whole schema
//! machinery: a nested struct that upstream marks `.` because Go declares it a pointer is
//! not marked here. Server-side apply's conflict detection is not built on these sets.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::patch::{ListStrategy, list_strategy};

/// Who writes, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Writer<'a> {
    pub manager: &'a str,
    /// `Update`, or `Apply` for server-side apply.
    pub operation: &'a str,
    /// `status`, `scale`… or `None` for the object itself.
    pub subresource: Option<&'a str>,
    /// The apiVersion the write was made in.
    pub api_version: &'a str,
    /// When (RFC 3339, seconds).
    pub time: &'a str,
    /// The kind's `status` is written through its own subresource (so a write of the object
    /// itself owns no status field).
    pub status_subresource: bool,
}

/// The manager name upstream derives from a user-agent: what comes before the first `/`
/// (`kubectl/v1.33.0 (linux/amd64) …` is `kubectl`).
pub fn manager_from_user_agent(user_agent: &str) -> String {
    let name = user_agent.split('/').next().unwrap_or_default().trim();
    name.chars().take(128).collect()
}

/// A set of field paths, as a tree.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Set {
    /// The node itself is in the set (`.` when it has children, `{}` when it does not).
    me: bool,
    children: BTreeMap<String, Set>,
}

impl Set {
    fn is_empty(&self) -> bool {
        !self.me && self.children.is_empty()
    }

    fn union(&mut self, other: &Set) {
        self.me |= other.me;
        for (k, v) in &other.children {
            self.children.entry(k.clone()).or_default().union(v);
        }
    }

    fn difference(&mut self, other: &Set) {
        if other.me {
            self.me = false;
        }
        for (k, v) in &other.children {
            if let Some(mine) = self.children.get_mut(k) {
                mine.difference(v);
                if mine.is_empty() {
                    self.children.remove(k);
                }
            }
        }
    }

    /// Drops what a write removed: a node removed whole (owned, no children listed) takes
    /// its subtree with it.
    fn remove(&mut self, removed: &Set) {
        if removed.me && removed.children.is_empty() {
            *self = Set::default();
            return;
        }
        for (k, v) in &removed.children {
            if let Some(mine) = self.children.get_mut(k) {
                mine.remove(v);
                if mine.is_empty() {
                    self.children.remove(k);
                }
            }
        }
    }

    fn to_json(&self) -> Value {
        let mut out = Map::new();
        if self.me && !self.children.is_empty() {
            out.insert(".".into(), json!({}));
        }
        for (k, v) in &self.children {
            out.insert(k.clone(), v.to_json());
        }
        Value::Object(out)
    }

    fn from_json(v: &Value) -> Set {
        let mut s = Set::default();
        if let Some(o) = v.as_object() {
            if o.is_empty() {
                s.me = true;
            }
            for (k, child) in o {
                if k == "." {
                    s.me = true;
                } else {
                    s.children.insert(k.clone(), Set::from_json(child));
                }
            }
        }
        s
    }
}

/// Metadata fields no manager owns (upstream's stripped set).
const STRIPPED_META: &[&str] = &[
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

/// Object fields whose keys are data, not declared fields: the map itself is owned (`.`).
const STRING_MAPS: &[&str] = &[
    "labels",
    "annotations",
    "nodeSelector",
    "matchLabels",
    "data",
    "binaryData",
    "stringData",
    "limits",
    "requests",
    "capacity",
    "allocatable",
    "parameters",
];

/// What a write changed: the paths it added or modified, and those it removed.
#[derive(Default)]
struct Change {
    set: Set,
    removed: Set,
}

struct Walk<'a> {
    kind: &'a str,
}

impl Walk<'_> {
    /// Compares `old` and `new` at `path` (field names only, as the list table wants them)
    /// into `change`, whose node is this value's.
    fn diff(
        &self,
        path: &mut Vec<String>,
        old: Option<&Value>,
        new: Option<&Value>,
        change: &mut Change,
    ) {
        match (old, new) {
            (_, Some(Value::Object(n))) if !n.is_empty() => {
                let empty = Map::new();
                let o = old.and_then(Value::as_object).unwrap_or(&empty);
                if old.is_none_or(|o| !o.is_object())
                    && path
                        .last()
                        .is_some_and(|f| STRING_MAPS.contains(&f.as_str()))
                {
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
                    let mut child = Change::default();
                    self.diff(path, o.get(key), n.get(key), &mut child);
                    path.pop();
                    let name = format!("f:{key}");
                    if !child.set.is_empty() {
                        change.set.children.insert(name.clone(), child.set);
                    }
                    if !child.removed.is_empty() {
                        change.removed.children.insert(name, child.removed);
                    }
                }
            }
            (_, Some(Value::Array(items))) if !items.is_empty() => {
                match list_strategy(self.kind, path) {
                    ListStrategy::MergeByKey(key) => self.keyed(path, key, old, items, change),
                    ListStrategy::MergePrimitives => {
                        let before: Vec<&Value> = old
                            .and_then(Value::as_array)
                            .map(|a| a.iter().collect())
                            .unwrap_or_default();
                        for item in items {
                            if !before.contains(&item) {
                                change.set.children.insert(
                                    format!("v:{item}"),
                                    Set {
                                        me: true,
                                        ..Set::default()
                                    },
                                );
                            }
                        }
                        for item in before {
                            if !items.contains(item) {
                                change.removed.children.insert(
                                    format!("v:{item}"),
                                    Set {
                                        me: true,
                                        ..Set::default()
                                    },
                                );
                            }
                        }
                    }
                    ListStrategy::Atomic => {
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

    /// A list merged by `key`: items are `k:{"key":value}` nodes, themselves owned.
    fn keyed(
        &self,
        path: &mut Vec<String>,
        key: &str,
        old: Option<&Value>,
        items: &[Value],
        change: &mut Change,
    ) {
        let id = |item: &Value| {
            let mut k = Map::new();
            k.insert(
                key.to_string(),
                item.get(key).cloned().unwrap_or(Value::Null),
            );
            if matches!(key, "containerPort" | "port")
                && let Some(p) = item.get("protocol")
            {
                k.insert("protocol".into(), p.clone());
            }
            format!("k:{}", Value::Object(k))
        };
        let before: BTreeMap<String, &Value> = old
            .and_then(Value::as_array)
            .map(|a| a.iter().map(|i| (id(i), i)).collect())
            .unwrap_or_default();
        let mut seen = Vec::new();
        for item in items {
            let name = id(item);
            let mut child = Change::default();
            self.diff(path, before.get(&name).copied(), Some(item), &mut child);
            if !before.contains_key(&name) {
                child.set.me = true;
            }
            if !child.set.is_empty() {
                change.set.children.insert(name.clone(), child.set);
            }
            if !child.removed.is_empty() {
                change.removed.children.insert(name.clone(), child.removed);
            }
            seen.push(name);
        }
        for name in before.keys().filter(|n| !seen.contains(n)) {
            change.removed.children.insert(
                name.clone(),
                Set {
                    me: true,
                    ..Set::default()
                },
            );
        }
    }
}

/// The part of an object a write through `subresource` may own: `status` through the status
/// subresource, the rest otherwise.
fn scoped(obj: &Value, subresource: Option<&str>, status_subresource: bool) -> Value {
    let mut out = Map::new();
    if let Some(o) = obj.as_object() {
        for (k, v) in o {
            let in_status = k == "status";
            let wanted = match subresource {
                Some("status") => in_status,
                _ => (!in_status || !status_subresource) && k != "apiVersion" && k != "kind",
            };
            if wanted {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(out)
}

/// Records `writer`'s write of `new` (over `old`, none for a create) in `new`'s
/// `metadata.managedFields`, starting from `old`'s entries. A write that changes nothing
/// leaves them as they were.
pub fn record(kind: &str, old: Option<&Value>, new: &mut Value, writer: &Writer) {
    let before = old.map(|o| scoped(o, writer.subresource, writer.status_subresource));
    let after = scoped(new, writer.subresource, writer.status_subresource);
    let mut change = Change::default();
    Walk { kind }.diff(&mut Vec::new(), before.as_ref(), Some(&after), &mut change);

    let mut entries: Vec<Value> = old
        .and_then(|o| o.pointer("/metadata/managedFields"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let is_mine = |e: &Value| {
        e["manager"] == writer.manager
            && e["operation"] == writer.operation
            && e.get("subresource").and_then(Value::as_str) == writer.subresource
    };
    let changed = !change.set.is_empty() || !change.removed.is_empty();
    if changed {
        let mut mine = Set::default();
        for e in entries.iter_mut() {
            let mut fields = Set::from_json(&e["fieldsV1"]);
            if is_mine(e) {
                mine = fields;
                continue;
            }
            // Fields this write changed are no longer another updater's.
            if e["operation"] == "Update" {
                fields.difference(&change.set);
            }
            fields.remove(&change.removed);
            e["fieldsV1"] = fields.to_json();
        }
        mine.remove(&change.removed);
        mine.union(&change.set);
        entries.retain(|e| !is_mine(e));
        let mut entry = Map::new();
        entry.insert("manager".into(), json!(writer.manager));
        entry.insert("operation".into(), json!(writer.operation));
        entry.insert("apiVersion".into(), json!(writer.api_version));
        entry.insert("time".into(), json!(writer.time));
        entry.insert("fieldsType".into(), json!("FieldsV1"));
        entry.insert("fieldsV1".into(), mine.to_json());
        if let Some(sub) = writer.subresource {
            entry.insert("subresource".into(), json!(sub));
        }
        entries.push(Value::Object(entry));
        entries.retain(|e| e["fieldsV1"].as_object().is_some_and(|o| !o.is_empty()));
    }
    if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
        if entries.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(entries));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        record(
            "Deployment",
            None,
            &mut obj,
            &writer("kubectl-create", None),
        );
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
        record(
            "Deployment",
            None,
            &mut created,
            &writer("kubectl-create", None),
        );
        let mut set = created.clone();
        set["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.16.1");
        record(
            "Deployment",
            Some(&created),
            &mut set,
            &writer("kubectl-set", None),
        );
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
        record(
            "Deployment",
            None,
            &mut obj,
            &writer("kubectl-create", None),
        );
        let mut status = obj.clone();
        status["status"]["replicas"] = json!(2);
        record(
            "Deployment",
            Some(&obj),
            &mut status,
            &writer("berth-controller", Some("status")),
        );
        let entry = &status["metadata"]["managedFields"][1];
        assert_eq!(entry["subresource"], "status");
        assert_eq!(entry["fieldsV1"], json!({"f:status": {"f:replicas": {}}}));

        // A manager that changes everything the creator set leaves the creator nothing.
        let mut replaced = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
        record("ConfigMap", None, &mut replaced, &writer("one", None));
        let mut second = replaced.clone();
        second["data"]["a"] = json!("2");
        record(
            "ConfigMap",
            Some(&replaced),
            &mut second,
            &writer("two", None),
        );
        assert_eq!(
            managers(&second),
            ["one", "two"],
            "one still owns data itself"
        );
        let mut third = second.clone();
        third.as_object_mut().map(|o| o.remove("data"));
        record("ConfigMap", Some(&second), &mut third, &writer("two", None));
        assert!(third["metadata"].get("managedFields").is_none(), "{third}");
    }

    #[test]
    fn finalizers_are_a_set_of_values() {
        let mut obj = json!({"metadata": {"name": "p", "finalizers": ["a.io/x"]}});
        record("Pod", None, &mut obj, &writer("m", None));
        assert_eq!(
            obj["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:metadata": {"f:finalizers": {"v:\"a.io/x\"": {}}}})
        );
    }

    #[test]
    fn user_agents_name_managers_as_upstream_does() {
        assert_eq!(
            manager_from_user_agent("kubectl/v1.33.0 (linux/amd64) kubernetes/abc"),
            "kubectl"
        );
        assert_eq!(
            manager_from_user_agent("kubectl.1.32/v1.32.5"),
            "kubectl.1.32"
        );
        assert_eq!(
            manager_from_user_agent("OpenAPI-Generator/37.0.2/python"),
            "OpenAPI-Generator"
        );
    }
}
