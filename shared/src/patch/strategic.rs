//! Strategic merge patch (`application/strategic-merge-patch+json`) as upstream's
//! `k8s.io/apimachinery/pkg/util/strategicpatch` applies it: maps merge recursively, `null`
//! deletes, and the `$patch`, `$retainKeys`, `$setElementOrder/…` and
//! `$deleteFromPrimitiveList/…` directives steer the merge. How lists merge comes from
//! [`schema`](super::schema); this file handles maps, `list.rs` handles lists.
//!
//! A value taken from the patch wholesale (a new key, a replaced list) is stripped of `null`s and
//! directives, which is what upstream stores once the result is decoded into its typed object.

use serde_json::{Map, Value};

use super::PatchError;

pub(super) const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
pub(super) const SET_ELEMENT_ORDER: &str = "$setElementOrder";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList";

/// Applies a strategic merge `patch` to `target`, an object of Kubernetes kind `kind`; returns
/// the patched object. `target` may be `null` (an empty object).
pub fn apply_strategic_merge_patch(
    target: &Value,
    patch: &Value,
    kind: &str,
) -> Result<Value, PatchError> {
    let Value::Object(patch) = patch else {
        return Err(PatchError::InvalidDocument);
    };
    let original = match target {
        Value::Object(map) => map.clone(),
        Value::Null => Map::new(),
        _ => return Err(PatchError::InvalidDocument),
    };
    let mut merger = Merger {
        kind,
        path: Vec::new(),
    };
    merger.merge_map(original, patch.clone()).map(Value::Object)
}

/// The merge in progress: the object's kind and the field path being merged (list items add no
/// segment), which together select list strategies.
pub(super) struct Merger<'k> {
    pub(super) kind: &'k str,
    pub(super) path: Vec<String>,
}

impl Merger<'_> {
    /// Runs `f` with `field` pushed on the path.
    pub(super) fn within<T>(&mut self, field: &str, f: impl FnOnce(&mut Self) -> T) -> T {
        self.path.push(field.to_string());
        let out = f(self);
        self.path.pop();
        out
    }

    /// Merges `patch` into `original` (upstream's `mergeMap`).
    pub(super) fn merge_map(
        &mut self,
        mut original: Map<String, Value>,
        mut patch: Map<String, Value>,
    ) -> Result<Map<String, Value>, PatchError> {
        if let Some(directive) = patch.get(DIRECTIVE) {
            return match directive.as_str() {
                Some("replace") => {
                    patch.shift_remove(DIRECTIVE);
                    Ok(clean_map(patch))
                }
                // Upstream leaves an empty map in place rather than removing the key.
                Some("delete") => Ok(Map::new()),
                _ => Err(PatchError::UnknownDirective {
                    directive: render_scalar(directive),
                    item: render_map(&patch),
                }),
            };
        }
        apply_retain_keys(&mut original, &mut patch)?;
        self.apply_element_orders(&mut original, &mut patch)?;

        for (key, value) in patch {
            let (key, is_delete_list) = match key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
                Some(rest) => match rest.strip_prefix('/') {
                    Some(field) => (field.to_string(), true),
                    None => return Err(PatchError::BadPrimitiveListFormat),
                },
                None => (key, false),
            };
            if value.is_null() {
                original.shift_remove(&key);
                continue;
            }
            let Some(current) = original.get_mut(&key) else {
                if !is_delete_list && let Some(value) = clean(value) {
                    original.insert(key, value);
                }
                continue;
            };
            if JsonType::of(current) != JsonType::of(&value) {
                if !is_delete_list {
                    match clean(value) {
                        Some(value) => *current = value,
                        None => {
                            original.shift_remove(&key);
                        }
                    }
                }
                continue;
            }
            let merged = match (current.take(), value) {
                (Value::Object(o), Value::Object(p)) => {
                    Value::Object(self.within(&key, |m| m.merge_map(o, p))?)
                }
                (Value::Array(o), Value::Array(p)) => {
                    Value::Array(self.within(&key, |m| m.merge_list_field(o, p, is_delete_list))?)
                }
                (_, scalar) => scalar,
            };
            original.insert(key, merged);
        }
        Ok(original)
    }
}

/// `$retainKeys: [..]`: every key the patch sets must be listed, and the original keeps only
/// listed keys before the merge.
fn apply_retain_keys(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
) -> Result<(), PatchError> {
    let Some(list) = patch.shift_remove(RETAIN_KEYS) else {
        return Ok(());
    };
    let Value::Array(list) = list else {
        return Err(PatchError::BadRetainKeysFormat);
    };
    let retained = |k: &str| list.iter().any(|v| v.as_str() == Some(k));
    for (k, v) in patch.iter() {
        let exempt = v.is_null()
            || k.starts_with(DELETE_FROM_PRIMITIVE_LIST)
            || k.starts_with(SET_ELEMENT_ORDER);
        if !exempt && !retained(k) {
            return Err(PatchError::BadRetainKeysFormat);
        }
    }
    original.retain(|k, _| retained(k));
    Ok(())
}

/// A patch value fit to store: `null` map entries and directive keys dropped, maps carrying
/// `$patch` dropped (`None` when `value` itself is one). Upstream's `discardNullValuesFromPatch`
/// plus `removeDirectives`.
pub(super) fn clean(value: Value) -> Option<Value> {
    match value {
        Value::Object(map) if map.contains_key(DIRECTIVE) => None,
        Value::Object(map) => Some(Value::Object(clean_map(map))),
        Value::Array(items) => Some(Value::Array(clean_list(items))),
        other => Some(other),
    }
}

pub(super) fn clean_map(map: Map<String, Value>) -> Map<String, Value> {
    map.into_iter()
        .filter(|(k, v)| !v.is_null() && !is_directive_key(k))
        .filter_map(|(k, v)| clean(v).map(|v| (k, v)))
        .collect()
}

pub(super) fn clean_list(items: Vec<Value>) -> Vec<Value> {
    items.into_iter().filter_map(clean).collect()
}

fn is_directive_key(key: &str) -> bool {
    key == RETAIN_KEYS
        || key.starts_with(SET_ELEMENT_ORDER)
        || key.starts_with(DELETE_FROM_PRIMITIVE_LIST)
}

/// The JSON type of a value, the granularity at which upstream compares original and patch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum JsonType {
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
}

impl JsonType {
    pub(super) fn of(v: &Value) -> JsonType {
        match v {
            Value::Null => JsonType::Null,
            Value::Bool(_) => JsonType::Bool,
            Value::Number(_) => JsonType::Number,
            Value::String(_) => JsonType::String,
            Value::Array(_) => JsonType::Array,
            Value::Object(_) => JsonType::Object,
        }
    }

    /// How Go names the decoded type, for error messages.
    pub(super) fn go_name(self) -> &'static str {
        match self {
            JsonType::Null => "<nil>",
            JsonType::Bool => "bool",
            JsonType::Number => "float64",
            JsonType::String => "string",
            JsonType::Array => "[]interface {}",
            JsonType::Object => "map[string]interface {}",
        }
    }
}

/// JSON equality where numbers compare by value (`80` equals `80.0`), as Go's float64s do.
pub(super) fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// A directive value as Go's `%s` shows it: strings bare, anything else as JSON.
pub(super) fn render_scalar(v: &Value) -> String {
    v.as_str().map_or_else(|| render(v), str::to_string)
}

pub(super) fn render(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

pub(super) fn render_map(m: &Map<String, Value>) -> String {
    serde_json::to_string(m).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn smp(kind: &str, target: Value, patch: Value) -> Value {
        apply_strategic_merge_patch(&target, &patch, kind).unwrap()
    }

    fn smp_err(kind: &str, target: Value, patch: Value) -> PatchError {
        apply_strategic_merge_patch(&target, &patch, kind).unwrap_err()
    }

    fn deployment(containers: Value) -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {
                "replicas": 2,
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": containers, "restartPolicy": "Always"}
                }
            }
        })
    }

    #[test]
    fn kubectl_apply_drops_the_sidecar_removes_env_and_sets_ports() {
        let target = deployment(json!([
            {"name": "nginx", "image": "nginx:1.14.2", "env": [{"name": "A", "value": "1"}]},
            {"name": "sidecar", "image": "busybox"}
        ]));
        let patch = json!({"spec":{"template":{"spec":{
        "$setElementOrder/containers":[{"name":"nginx"}],
        "containers":[
            {"env":null,"name":"nginx","ports":[{"containerPort":80}]},
            {"$patch":"delete","name":"sidecar"}
        ]}}}});
        let got = smp("Deployment", target, patch);
        assert_eq!(
            got["spec"]["template"]["spec"]["containers"],
            json!([{"name": "nginx", "image": "nginx:1.14.2", "ports": [{"containerPort": 80}]}])
        );
        assert_eq!(got["spec"]["template"]["spec"]["restartPolicy"], "Always");
    }

    #[test]
    fn kubectl_set_image_changes_only_the_image() {
        let target = deployment(json!([
            {"name": "nginx", "image": "nginx:1.14.2", "ports": [{"containerPort": 80}]}
        ]));
        let patch = json!({"spec":{"template":{"spec":{
            "$setElementOrder/containers":[{"name":"nginx"}],
            "containers":[{"image":"nginx:1.16.1","name":"nginx"}]}}}});
        let got = smp("Deployment", target.clone(), patch);
        let mut want = target;
        want["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.16.1");
        assert_eq!(got, want);
    }

    #[test]
    fn rollout_pause_sets_and_resume_removes_paused() {
        let paused = smp(
            "Deployment",
            deployment(json!([])),
            json!({"spec":{"paused":true}}),
        );
        assert_eq!(paused["spec"]["paused"], true);
        let resumed = smp("Deployment", paused, json!({"spec":{"paused":null}}));
        assert!(resumed["spec"].get("paused").is_none());
        assert_eq!(resumed["spec"]["replicas"], 2);
    }

    #[test]
    fn node_taints_are_replaced_as_a_whole_and_null_removes_them() {
        let node = json!({"kind": "Node", "spec": {
        "podCIDR": "10.0.0.0/24",
        "taints": [
            {"key": "a", "effect": "NoSchedule"},
            {"key": "b", "value": "x", "effect": "NoExecute"}
        ]}});
        let patch = json!({"spec":{"taints":[{"key":"c","effect":"NoSchedule"}]}});
        let got = smp("Node", node.clone(), patch);
        assert_eq!(
            got["spec"]["taints"],
            json!([{"key":"c","effect":"NoSchedule"}])
        );
        let got = smp("Node", node, json!({"spec":{"taints":null}}));
        assert_eq!(got["spec"], json!({"podCIDR": "10.0.0.0/24"}));
    }

    #[test]
    fn pod_env_is_merged_by_name_in_one_container_only() {
        let pod = json!({"kind": "Pod", "spec": {"containers": [
            {"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}]},
            {"name": "log", "image": "log:1", "env": [{"name": "A", "value": "keep"}]}
        ]}});
        let patch = json!({"spec":{"containers":[
            {"name":"app","env":[{"name":"B","value":"2"},{"name":"A","value":"changed"}]}
        ]}});
        let got = smp("Pod", pod, patch);
        assert_eq!(
            got["spec"]["containers"],
            json!([
                {"name": "app", "image": "app:1",
                 "env": [{"name": "B", "value": "2"}, {"name": "A", "value": "changed"}]},
                {"name": "log", "image": "log:1", "env": [{"name": "A", "value": "keep"}]}
            ])
        );
    }

    #[test]
    fn finalizers_merge_as_a_set_and_delete_from_primitive_list_removes() {
        let cm = json!({"metadata": {"name": "c", "finalizers": ["a", "b"]}});
        let got = smp(
            "ConfigMap",
            cm.clone(),
            json!({"metadata":{"finalizers":["b","c"]}}),
        );
        assert_eq!(got["metadata"]["finalizers"], json!(["a", "b", "c"]));
        let got = smp(
            "ConfigMap",
            cm.clone(),
            json!({"metadata":{"$deleteFromPrimitiveList/finalizers":["a"]}}),
        );
        assert_eq!(got["metadata"]["finalizers"], json!(["b"]));
        let got = smp(
            "ConfigMap",
            cm,
            json!({"metadata":{
                "$setElementOrder/finalizers":["c","b"],
                "$deleteFromPrimitiveList/finalizers":["a"],
                "finalizers":["c"]}}),
        );
        assert_eq!(got["metadata"]["finalizers"], json!(["c", "b"]));
    }

    #[test]
    fn patch_replace_directive_replaces_maps_and_lists() {
        let target = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {
            "containers": [{"name": "x", "image": "x"}, {"name": "y", "image": "y"}]}});
        let got = smp(
            "Pod",
            target.clone(),
            json!({"metadata":{"labels":{"$patch":"replace","c":"3"}}}),
        );
        assert_eq!(got["metadata"]["labels"], json!({"c": "3"}));
        let got = smp(
            "Pod",
            target,
            json!({"spec":{"containers":[{"$patch":"replace"},{"name":"z","image":"z"}]}}),
        );
        assert_eq!(
            got["spec"]["containers"],
            json!([{"name": "z", "image": "z"}])
        );
    }

    #[test]
    fn patch_delete_directive_empties_a_map_like_upstream() {
        let target = json!({"spec": {"selector": {"app": "x"}, "type": "ClusterIP"}});
        let got = smp(
            "Service",
            target,
            json!({"spec":{"selector":{"$patch":"delete"}}}),
        );
        assert_eq!(got["spec"], json!({"selector": {}, "type": "ClusterIP"}));
        let got = smp(
            "Service",
            json!({"spec": {}}),
            json!({"spec":{"selector":{"$patch":"delete"}}}),
        );
        assert_eq!(got["spec"], json!({}));
        let got = smp("Secret", json!({"a": 1}), json!({"$patch":"delete"}));
        assert_eq!(got, json!({}));
    }

    #[test]
    fn retain_keys_clears_unlisted_keys_before_merging() {
        let target = json!({"spec": {"strategy": {
            "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}});
        let patch = json!({"spec":{"strategy":{"$retainKeys":["type"],"type":"Recreate"}}});
        let got = smp("Deployment", target.clone(), patch);
        assert_eq!(got["spec"]["strategy"], json!({"type": "Recreate"}));
        let bad = json!({"spec":{"strategy":{"$retainKeys":["type"],"rollingUpdate":{}}}});
        assert_eq!(
            smp_err("Deployment", target, bad),
            PatchError::BadRetainKeysFormat
        );
    }

    #[test]
    fn retain_keys_on_a_volume_switches_its_source() {
        let target = json!({"spec": {"volumes": [
            {"name": "data", "emptyDir": {}},
            {"name": "conf", "configMap": {"name": "c"}}]}});
        let patch = json!({"spec": {
            "$setElementOrder/volumes": [{"name": "data"}, {"name": "conf"}],
            "volumes": [{"$retainKeys": ["hostPath", "name"], "hostPath": {"path": "/d"}, "name": "data"}]}});
        let got = smp("Pod", target, patch);
        assert_eq!(
            got["spec"]["volumes"],
            json!([{"name": "data", "hostPath": {"path": "/d"}}, {"name": "conf", "configMap": {"name": "c"}}])
        );
    }

    #[test]
    fn merged_lists_follow_upstream_ordering() {
        let cases = [
            (json!([1, 2]), json!([2, 3]), json!([1, 2, 3])),
            (json!([1, 2, 3]), json!([3, 1, 2]), json!([3, 1, 2])),
            (json!([1, 2, 3]), json!([3, 1]), json!([2, 3, 1])),
            (json!(["a", "b"]), json!(["c"]), json!(["a", "b", "c"])),
        ];
        for (target, patch, want) in cases {
            let got = smp(
                "Pod",
                json!({"metadata": {"finalizers": target}}),
                json!({"metadata": {"finalizers": patch}}),
            );
            assert_eq!(got["metadata"]["finalizers"], want);
        }
        let got = smp(
            "Pod",
            json!({"spec": {"volumes": [{"name": "1"}, {"name": "2", "v": "b"}, {"name": "3"}]}}),
            json!({"spec": {"volumes": [{"name": "3", "v": "c"}, {"name": "1", "v": "a"}]}}),
        );
        assert_eq!(
            got["spec"]["volumes"],
            json!([{"name": "2", "v": "b"}, {"name": "3", "v": "c"}, {"name": "1", "v": "a"}])
        );
    }

    #[test]
    fn set_element_order_orders_the_merged_list() {
        let target = json!({"spec": {"containers": [
            {"name": "a"}, {"name": "x"}, {"name": "b"}]}});
        let patch =
            json!({"spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}]}});
        let got = smp("Pod", target.clone(), patch);
        assert_eq!(
            got["spec"]["containers"],
            json!([{"name": "x"}, {"name": "b"}, {"name": "a"}])
        );
        let patch = json!({"spec": {
            "$setElementOrder/containers": [{"name": "c"}, {"name": "a"}, {"name": "b"}],
            "containers": [{"name": "c", "image": "c"}]}});
        let got = smp("Pod", target, patch);
        assert_eq!(
            got["spec"]["containers"],
            json!([{"name": "x"}, {"name": "c", "image": "c"}, {"name": "a"}, {"name": "b"}])
        );
    }

    #[test]
    fn status_conditions_and_owner_references_merge_by_key() {
        let target = json!({
            "metadata": {"ownerReferences": [{"uid": "1", "name": "rs"}]},
            "status": {"conditions": [
                {"type": "Available", "status": "False"},
                {"type": "Progressing", "status": "True"}]}});
        let patch = json!({
            "metadata": {"ownerReferences": [{"uid": "2", "name": "other"}]},
            "status": {"conditions": [{"type": "Available", "status": "True"}]}});
        let got = smp("Deployment", target, patch);
        assert_eq!(
            got["status"]["conditions"],
            json!([{"type": "Available", "status": "True"}, {"type": "Progressing", "status": "True"}])
        );
        assert_eq!(
            got["metadata"]["ownerReferences"],
            json!([{"uid": "1", "name": "rs"}, {"uid": "2", "name": "other"}])
        );
    }

    #[test]
    fn cron_job_pod_template_lists_merge_by_name() {
        let target = json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {
            "containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}]}}}}}});
        let patch = json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {
            "containers": [{"name": "b", "image": "2"}]}}}}}});
        let got = smp("CronJob", target, patch);
        assert_eq!(
            got["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"],
            json!([{"name": "a", "image": "1"}, {"name": "b", "image": "2"}])
        );
    }

    #[test]
    fn unknown_kinds_merge_maps_and_replace_lists() {
        let target =
            json!({"data": {"a": "1"}, "items": [1, 2], "spec": {"containers": [{"name": "x"}]}});
        let patch =
            json!({"data": {"b": "2"}, "items": [3], "spec": {"containers": [{"name": "y"}]}});
        let got = smp("Widget", target, patch);
        assert_eq!(
            got,
            json!({"data": {"a": "1", "b": "2"}, "items": [3], "spec": {"containers": [{"name": "y"}]}})
        );
    }

    #[test]
    fn new_values_are_stored_without_nulls_or_directives() {
        let patch = json!({"spec": {"template": {
            "$setElementOrder/x": [],
            "a": null,
            "b": {"c": null, "d": 1, "e": {"$patch": "delete"}}}}});
        let got = smp("ConfigMap", json!({"spec": {}}), patch);
        assert_eq!(got, json!({"spec": {"template": {"b": {"d": 1}}}}));
        let got = smp(
            "ConfigMap",
            json!({"spec": "scalar"}),
            json!({"spec": {"x": null, "y": 1}}),
        );
        assert_eq!(got, json!({"spec": {"y": 1}}));
    }

    #[test]
    fn malformed_patches_are_rejected_with_upstream_messages() {
        let pod = json!({"spec": {"containers": [{"name": "a"}], "tolerations": [[1]]}});
        let cases = [
            (json!([1]), "invalid JSON document"),
            (
                json!({"spec": {"containers": [{"image": "x"}]}}),
                "map: {\"image\":\"x\"} does not contain declared merge key: name",
            ),
            (
                json!({"spec": {"containers": [{"$patch": "delete"}]}}),
                "map: {\"$patch\":\"delete\"} does not contain declared merge key: name",
            ),
            (
                json!({"spec": {"containers": [{"$patch": "merge", "name": "a"}]}}),
                "merging lists cannot yet be specified in the patch",
            ),
            (
                json!({"spec": {"$patch": "frob"}}),
                "unknown patch type: frob in map: {\"$patch\":\"frob\"}",
            ),
            (
                json!({"spec": {"$retainKeys": "x"}}),
                "invalid patch format of retainKeys",
            ),
            (
                json!({"spec": {"$setElementOrderx": []}}),
                "invalid patch format of setElementOrder list",
            ),
            (
                json!({"spec": {"$deleteFromPrimitiveListx": []}}),
                "invalid patch format of primitive list",
            ),
            (
                json!({"spec": {"$setElementOrder/containers": [{"name": "a"}],
                             "containers": [{"name": "b"}]}}),
                "The order in patch list:\n[{\"name\":\"b\"}]\n doesn't match $setElementOrder list:\n[{\"name\":\"a\"}]\n",
            ),
            (
                json!({"spec": {"containers": ["a"]}}),
                "list element types are not identical: [{\"name\":\"a\"}] [\"a\"]",
            ),
            (
                json!({"spec": {"$deleteFromPrimitiveList/tolerations": [[2]]}}),
                "lists of lists are not supported",
            ),
        ];
        for (patch, want) in cases {
            let err = smp_err("Pod", pod.clone(), patch.clone());
            assert_eq!(err.to_string(), want, "{patch}");
        }
    }
}
