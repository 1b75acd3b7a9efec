//! Server-side apply as structured-merge-diff's `Updater.Apply` does it: the configuration
//! is merged into the stored object; what the applier applied last time and applies no more
//! is pruned unless some manager still owns it; the fields the result changes that other
//! managers own are conflicts (refused, or taken from them with `force`); the applier then
//! owns exactly what its configuration sets. Equal values are no change, so applying the
//! value another manager owns shares the field instead of conflicting.

use serde_json::Value;

use super::Writer;
use super::compare::{compare, fields_of};
use super::conflict::{Conflict, Conflicts};
use super::entries::{self, Entry};
use super::last_applied;
use super::merge::{merge, prune};
use super::schema::{FieldSchema, WithObjectMeta};
use super::set::{FieldSet, render_path};
use super::update::STRIPPED_META;

/// Applies `config` as `writer` (operation `Apply`) over `live` (none for a create), and
/// returns the object to store with its `metadata.managedFields`, not yet defaulted (defaults
/// filled in afterwards are nobody's). `force` takes conflicting fields from their owners.
pub fn apply(
    schema: &dyn FieldSchema,
    live: Option<&Value>,
    config: &Value,
    writer: &Writer,
    force: bool,
) -> Result<Value, Conflicts> {
    let schema = &WithObjectMeta(schema);
    let config = scoped_config(config, writer);
    let live_value = live
        .cloned()
        .unwrap_or_else(|| Value::Object(Default::default()));
    let mut list = entries::read(live);
    let mine_at = list
        .iter()
        .position(|e| e.is(writer.manager, "Apply", writer.subresource));
    let previous = mine_at.map(|i| list.remove(i));
    let last = previous
        .as_ref()
        .map(|e| e.fields.clone())
        .unwrap_or_default();

    let applied = fields_of(schema, &config);
    let mut merged = merge(schema, &live_value, &config);
    let mut owned = applied.clone();
    for e in &list {
        owned.union(&e.fields);
    }
    prune(schema, &mut merged, &last, &owned);

    let change = compare(schema, &live_value, &merged);
    let changed = ownable(change.changed(), writer);
    let removed = ownable(change.removed, writer);
    if !force {
        // kubectl's fields from client-side apply, still at their last applied values, are
        // its own to take.
        let allowed = (writer.manager == last_applied::KUBECTL)
            .then(|| last_applied::allowed_conflicts(schema, &live_value))
            .flatten()
            .unwrap_or_default();
        let mut conflicts = Vec::new();
        for e in &list {
            let mut theirs = e.fields.intersection(&changed);
            theirs.difference(&allowed);
            for path in theirs.members() {
                conflicts.push(Conflict {
                    manager: e.describe(),
                    field: render_path(&path),
                });
            }
        }
        if !conflicts.is_empty() {
            conflicts.sort_by(|a, b| a.manager.cmp(&b.manager));
            return Err(Conflicts(conflicts));
        }
    }
    for e in list.iter_mut() {
        e.fields.difference(&changed);
        e.fields.difference(&removed);
    }
    let fields = ownable(applied, writer);
    let object_changed = !changed.is_empty() || !removed.is_empty();
    let time = match &previous {
        Some(p) if !object_changed && p.fields == fields => p.time.clone(),
        _ => Some(writer.time.to_string()),
    };
    list.push(Entry {
        manager: writer.manager.to_string(),
        operation: "Apply".to_string(),
        api_version: writer.api_version.to_string(),
        time,
        subresource: writer.subresource.map(String::from),
        fields,
    });
    entries::write(&mut merged, list);
    if writer.manager == last_applied::KUBECTL {
        last_applied::keep_annotation(live, &config, &mut merged);
    }
    Ok(merged)
}

/// The part of a configuration an apply through `writer.subresource` writes: the status
/// subresource writes `status`; the object itself everything else when the kind's status has
/// its own subresource. Its `managedFields` are never applied.
fn scoped_config(config: &Value, writer: &Writer) -> Value {
    let mut out = config.clone();
    if let Some(map) = out.as_object_mut() {
        match writer.subresource {
            Some("status") => map
                .retain(|k, _| matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status")),
            _ if writer.status_subresource => {
                map.remove("status");
            }
            _ => {}
        }
    }
    if let Some(meta) = out.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
        if writer.subresource == Some("status") {
            meta.retain(|k, _| matches!(k.as_str(), "name" | "namespace"));
        }
    }
    out
}

/// `set` less what no manager owns: the object's type and server-set metadata, and what lies
/// outside the writer's part of the object.
fn ownable(mut set: FieldSet, writer: &Writer) -> FieldSet {
    set.children.remove("f:apiVersion");
    set.children.remove("f:kind");
    if let Some(meta) = set.children.get_mut("f:metadata") {
        for field in STRIPPED_META {
            meta.children.remove(&format!("f:{field}"));
        }
        meta.me = false;
        if meta.is_empty() {
            set.children.remove("f:metadata");
        }
    }
    match writer.subresource {
        Some("status") => set.children.retain(|k, _| k == "f:status"),
        _ if writer.status_subresource => {
            set.children.remove("f:status");
        }
        _ => {}
    }
    set.me = false;
    set
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::managed_fields::schema::BuiltIn;
    use serde_json::json;

    const CM: BuiltIn = BuiltIn { kind: "ConfigMap" };

    fn writer(manager: &str) -> Writer<'_> {
        Writer {
            manager,
            operation: "Apply",
            subresource: None,
            api_version: "v1",
            time: "2024-05-06T07:08:09Z",
            status_subresource: false,
        }
    }

    fn config(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data})
    }

    /// The stored object after `manager` applies `data` over `live`.
    fn applied(
        live: Option<&Value>,
        manager: &str,
        data: Value,
        force: bool,
    ) -> Result<Value, Conflicts> {
        apply(&CM, live, &config(data), &writer(manager), force)
    }

    /// Records an update (not an apply) of the ConfigMap by `manager`.
    fn update(old: Option<&Value>, new: &mut Value, manager: &str) {
        let w = Writer {
            operation: "Update",
            ..writer(manager)
        };
        crate::managed_fields::record("ConfigMap", old, new, &w);
    }

    fn owners(obj: &Value, field: &str) -> Vec<String> {
        let key = format!("f:{field}");
        obj["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["fieldsV1"]["f:data"].get(&key).is_some())
            .filter_map(|e| e["manager"].as_str().map(String::from))
            .collect()
    }

    #[test]
    fn a_first_apply_owns_what_its_configuration_sets() {
        let obj = applied(None, "a", json!({"x": "1"}), false).unwrap();
        assert_eq!(obj["data"], json!({"x": "1"}));
        let entry = &obj["metadata"]["managedFields"][0];
        assert_eq!(entry["manager"], "a");
        assert_eq!(entry["operation"], "Apply");
        assert_eq!(entry["fieldsV1"], json!({"f:data": {"f:x": {}}}));
    }

    #[test]
    fn ownership_follows_upstreams_rules() {
        struct Case {
            name: &'static str,
            /// Applies made before, (manager, data), all succeeding.
            before: &'static [(&'static str, &'static str)],
            manager: &'static str,
            data: &'static str,
            force: bool,
            /// The conflict message, or the data and the owners of `x` after.
            want: Result<(&'static str, &'static [&'static str]), &'static str>,
        }
        let cases = [
            Case {
                name: "a different value of another applier's field conflicts",
                before: &[("a", r#"{"x": "1"}"#)],
                manager: "b",
                data: r#"{"x": "2"}"#,
                force: false,
                want: Err("Apply failed with 1 conflict: conflict with \"a\": .data.x"),
            },
            Case {
                name: "force takes the field",
                before: &[("a", r#"{"x": "1"}"#)],
                manager: "b",
                data: r#"{"x": "2"}"#,
                force: true,
                want: Ok((r#"{"x": "2"}"#, &["b"])),
            },
            Case {
                name: "the same value is shared, not a conflict",
                before: &[("a", r#"{"x": "1"}"#)],
                manager: "b",
                data: r#"{"x": "1"}"#,
                force: false,
                want: Ok((r#"{"x": "1"}"#, &["a", "b"])),
            },
            Case {
                name: "a field its applier stops applying is removed",
                before: &[("a", r#"{"x": "1", "y": "2"}"#)],
                manager: "a",
                data: r#"{"y": "2"}"#,
                force: false,
                want: Ok((r#"{"y": "2"}"#, &[])),
            },
            Case {
                name: "a dropped field another applier shares stays, theirs alone",
                before: &[("a", r#"{"x": "1", "y": "2"}"#), ("b", r#"{"x": "1"}"#)],
                manager: "a",
                data: r#"{"y": "2"}"#,
                force: false,
                want: Ok((r#"{"x": "1", "y": "2"}"#, &["b"])),
            },
            Case {
                name: "an applier changes its own field freely",
                before: &[("a", r#"{"x": "1"}"#)],
                manager: "a",
                data: r#"{"x": "3"}"#,
                force: false,
                want: Ok((r#"{"x": "3"}"#, &["a"])),
            },
        ];
        for c in cases {
            let mut live: Option<Value> = None;
            for (m, data) in c.before {
                let data: Value = serde_json::from_str(data).unwrap();
                live = Some(
                    applied(live.as_ref(), m, data, false)
                        .unwrap_or_else(|e| panic!("{}: {e}", c.name)),
                );
            }
            let data: Value = serde_json::from_str(c.data).unwrap();
            let got = applied(live.as_ref(), c.manager, data, c.force);
            match (c.want, got) {
                (Err(msg), Err(e)) => {
                    assert_eq!(e.to_string(), msg, "{}", c.name);
                    assert_eq!(e.0[0].field, ".data.x", "{}", c.name);
                }
                (Ok((data, x_owners)), Ok(obj)) => {
                    let data: Value = serde_json::from_str(data).unwrap();
                    assert_eq!(obj["data"], data, "{}", c.name);
                    assert_eq!(owners(&obj, "x"), x_owners, "{}: owners of x", c.name);
                }
                (want, got) => panic!("{}: wanted {want:?}, got {got:?}", c.name),
            }
        }
    }

    #[test]
    fn an_updater_s_field_conflicts_with_its_apiversion_named() {
        let mut live = config(json!({"x": "1"}));
        update(None, &mut live, "kubectl-create");
        let e = applied(Some(&live), "kubectl", json!({"x": "2"}), false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Apply failed with 1 conflict: conflict with \"kubectl-create\" using v1: .data.x"
        );
        // Forced, the updater loses the field (it keeps `data` itself, as upstream's does).
        let obj = applied(Some(&live), "kubectl", json!({"x": "2"}), true).unwrap();
        assert_eq!(owners(&obj, "x"), ["kubectl"]);
        assert_eq!(
            obj["metadata"]["managedFields"][1]["fieldsV1"],
            json!({"f:data": {}})
        );
    }

    #[test]
    fn an_update_takes_an_applied_field_without_conflict() {
        let live = applied(None, "a", json!({"x": "1", "y": "1"}), false).unwrap();
        let mut edited = live.clone();
        edited["data"]["x"] = json!("9");
        update(Some(&live), &mut edited, "kubectl-edit");
        assert_eq!(owners(&edited, "x"), ["kubectl-edit"]);
        assert_eq!(owners(&edited, "y"), ["a"]);
        // The applier dropping x now leaves it: an updater owns it.
        let obj = applied(Some(&edited), "a", json!({"y": "1"}), false).unwrap();
        assert_eq!(obj["data"], json!({"x": "9", "y": "1"}));
    }

    #[test]
    fn keyed_list_items_conflict_and_prune_by_key() {
        let schema = BuiltIn { kind: "Deployment" };
        let deployment = |containers: Value| {
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                "spec": {"template": {"spec": {"containers": containers}}}})
        };
        let w = |m| Writer {
            api_version: "apps/v1",
            status_subresource: true,
            ..writer(m)
        };
        let applied_by = |live: Option<&Value>, containers: Value, manager| {
            apply(&schema, live, &deployment(containers), &w(manager), false)
        };
        let first = applied_by(
            None,
            json!([{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]),
            "one",
        )
        .unwrap();
        // Another applier adding a container of its own does not conflict.
        let second = applied_by(Some(&first), json!([{"name": "c", "image": "z"}]), "two").unwrap();
        let names = |v: &Value| -> Vec<String> {
            v["spec"]["template"]["spec"]["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["name"].as_str().map(String::from))
                .collect()
        };
        assert_eq!(names(&second), ["a", "b", "c"]);
        // Changing another's container image conflicts, naming the item by its key.
        let e =
            applied_by(Some(&second), json!([{"name": "a", "image": "new"}]), "two").unwrap_err();
        assert_eq!(
            e.0[0].field,
            ".spec.template.spec.containers[name=\"a\"].image"
        );
        // The first applier dropping `b` removes that item only.
        let third = applied_by(Some(&second), json!([{"name": "a", "image": "x"}]), "one").unwrap();
        assert_eq!(names(&third), ["a", "c"]);
    }

    #[test]
    fn atomic_lists_conflict_whole() {
        let schema = BuiltIn { kind: "Pod" };
        let pod = |args: Value| {
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "a", "args": args}]}})
        };
        let w = |m| Writer {
            status_subresource: true,
            ..writer(m)
        };
        let first = apply(&schema, None, &pod(json!(["x", "y"])), &w("one"), false).unwrap();
        let e = apply(&schema, Some(&first), &pod(json!(["x"])), &w("two"), false).unwrap_err();
        let fields: Vec<&str> = e.0.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, [".spec.containers[name=\"a\"].args"]);
        let forced = apply(&schema, Some(&first), &pod(json!(["x"])), &w("two"), true).unwrap();
        assert_eq!(forced["spec"]["containers"][0]["args"], json!(["x"]));
    }

    #[test]
    fn an_unchanged_apply_keeps_its_time() {
        let first = applied(None, "a", json!({"x": "1"}), false).unwrap();
        let again = apply(
            &CM,
            Some(&first),
            &config(json!({"x": "1"})),
            &Writer {
                time: "2030-01-01T00:00:00Z",
                ..writer("a")
            },
            false,
        )
        .unwrap();
        assert_eq!(again, first);
    }

    #[test]
    fn kubectl_takes_its_client_side_fields_at_their_last_applied_values() {
        let last = config(json!({"x": "1"}));
        let mut live = config(json!({"x": "1"}));
        live["metadata"]["annotations"] =
            json!({"kubectl.kubernetes.io/last-applied-configuration": last.to_string()});
        update(None, &mut live, "kubectl-client-side-apply");
        // Another manager still conflicts; kubectl does not, and rewrites the annotation.
        assert!(applied(Some(&live), "other", json!({"x": "2"}), false).is_err());
        let obj = applied(Some(&live), "kubectl", json!({"x": "2"}), false).unwrap();
        assert_eq!(obj["data"]["x"], "2");
        assert_eq!(
            obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
            r#"{"apiVersion":"v1","data":{"x":"2"},"kind":"ConfigMap","metadata":{"name":"c"}}"#
        );
        // A field changed since the client-side apply is a conflict still.
        let mut edited = live.clone();
        edited["data"]["x"] = json!("5");
        assert!(applied(Some(&edited), "kubectl", json!({"x": "2"}), false).is_err());
    }

    #[test]
    fn an_apply_owns_only_its_part_of_the_object() {
        let schema = BuiltIn { kind: "Deployment" };
        let live = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"replicas": 1}, "status": {"replicas": 1}});
        let config = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"replicas": 5}, "status": {"replicas": 2}});
        let w = |subresource| Writer {
            api_version: "apps/v1",
            status_subresource: true,
            subresource,
            ..writer("m")
        };
        // Through the status subresource: the status alone.
        let status = apply(&schema, Some(&live), &config, &w(Some("status")), false).unwrap();
        assert_eq!(status["spec"]["replicas"], 1);
        assert_eq!(status["status"]["replicas"], 2);
        let entry = &status["metadata"]["managedFields"][0];
        assert_eq!(entry["subresource"], "status");
        assert_eq!(entry["fieldsV1"], json!({"f:status": {"f:replicas": {}}}));
        // The object itself: everything but the status.
        let main = apply(&schema, Some(&live), &config, &w(None), false).unwrap();
        assert_eq!(main["spec"]["replicas"], 5);
        assert_eq!(main["status"]["replicas"], 1);
        assert_eq!(
            main["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:spec": {"f:replicas": {}}})
        );
    }

    #[test]
    fn odd_shapes_apply_without_panicking() {
        let schema = BuiltIn { kind: "Deployment" };
        let live = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "a"}, {"name": "a"}, 7]}}}});
        let configs = [
            json!({"apiVersion": "apps/v1", "spec": {"replicas": [1, 2]}}),
            json!({"apiVersion": "apps/v1", "spec": {"template": {"spec": {"containers": {"name": "x"}}}}}),
            json!({"apiVersion": "apps/v1", "spec": {"template": {"spec": {"containers": [null, 3, {"image": "no-name"}, {"name": "a"}, {"name": "a"}]}}}}),
            json!({"apiVersion": "apps/v1", "metadata": "not an object", "spec": null}),
            json!({"apiVersion": "apps/v1", "metadata": {"finalizers": [{"a": 1}, {"a": 1}], "labels": []}}),
            json!([1, 2, 3]),
            json!("text"),
        ];
        let w = Writer {
            api_version: "apps/v1",
            status_subresource: true,
            ..writer("m")
        };
        for config in configs {
            for live in [None, Some(&live)] {
                let first = apply(&schema, live, &config, &w, false);
                // Whatever it made, a second manager and a re-apply work on it too.
                if let Ok(obj) = &first {
                    let _ = apply(
                        &schema,
                        Some(obj),
                        &config,
                        &Writer {
                            manager: "n",
                            ..w.clone()
                        },
                        true,
                    );
                    let _ = apply(&schema, Some(obj), &json!({}), &w, false);
                }
            }
        }
    }
}
