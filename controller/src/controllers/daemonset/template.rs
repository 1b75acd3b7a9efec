//! What the DaemonSet controller writes from the template: a daemon pod for one node (upstream
//! `CreatePodTemplate` + `ReplaceDaemonSetPodNodeNameNodeAffinity`), and a ControllerRevision
//! of the template (upstream `snapshot`: `<ds>-<hash>`, its data the strategic merge patch
//! that puts the template back, which `kubectl rollout undo` sends as is).
//!
//! Planner: pure, no I/O.

use super::eligibility::add_daemon_tolerations;
use super::view::{DaemonSet, GENERATION_LABEL, HASH_LABEL};
use crate::controllers::deployment::template::compute_hash;
use berth_shared::k8s_openapi::api::core::v1 as core;
use berth_shared::scheduling::node_affinity::NODE_NAME_FIELD;
use serde_json::{Map, Value, json};

/// The kind of the pods' and revisions' controller reference.
pub const KIND: &str = "DaemonSet";
pub const API_VERSION: &str = "apps/v1";

/// The controller reference a DaemonSet's pods and revisions carry.
pub fn controller_ref(ds: &DaemonSet) -> Value {
    json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": ds.name,
        "uid": ds.uid,
        "controller": true,
        "blockOwnerDeletion": true,
    })
}

/// The node affinity a daemon pod for `node` carries: the user's required terms are replaced by
/// one `matchFields metadata.name In [node]` term (the user's affinity picked the node
/// already), everything else is kept (DS-06).
pub fn pin_to_node(affinity: Option<core::Affinity>, node: &str) -> core::Affinity {
    let term = core::NodeSelectorTerm {
        match_fields: Some(vec![core::NodeSelectorRequirement {
            key: NODE_NAME_FIELD.into(),
            operator: "In".into(),
            values: Some(vec![node.into()]),
        }]),
        ..Default::default()
    };
    let mut affinity = affinity.unwrap_or_default();
    let node_affinity = affinity.node_affinity.get_or_insert_with(Default::default);
    node_affinity.required_during_scheduling_ignored_during_execution = Some(core::NodeSelector {
        node_selector_terms: vec![term],
    });
    affinity
}

/// A new daemon pod for `node`: the template's labels plus the revision `hash` and the
/// template generation, its annotations and finalizers, `generateName: <ds>-`, the controller
/// reference; its spec with the automatic tolerations and pinned to `node`.
pub fn new_pod(ds: &DaemonSet, node: &str, hash: &str) -> Value {
    let template_meta = ds.pod_template.metadata.clone().unwrap_or_default();
    let mut labels = template_meta.labels.unwrap_or_default();
    if let Some(g) = ds.template_generation {
        labels.insert(GENERATION_LABEL.into(), g.to_string());
    }
    if !hash.is_empty() {
        labels.insert(HASH_LABEL.into(), hash.into());
    }
    let mut spec = ds.pod_template.spec.clone().unwrap_or_default();
    add_daemon_tolerations(&mut spec);
    spec.affinity = Some(pin_to_node(spec.affinity.take(), node));
    let mut meta = Map::new();
    meta.insert("generateName".into(), json!(format!("{}-", ds.name)));
    meta.insert("namespace".into(), json!(ds.namespace));
    meta.insert("labels".into(), json!(labels));
    if let Some(a) = template_meta.annotations.filter(|a| !a.is_empty()) {
        meta.insert("annotations".into(), json!(a));
    }
    if let Some(f) = template_meta.finalizers.filter(|f| !f.is_empty()) {
        meta.insert("finalizers".into(), json!(f));
    }
    meta.insert("ownerReferences".into(), json!([controller_ref(ds)]));
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": serde_json::to_value(&spec).unwrap_or_else(|_| json!({})),
    })
}

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
/// patch that restores the template. A revision whose data equals it is the DaemonSet's
/// current one (upstream `Match`). It is written as Go writes it (sorted keys, the fields Go
/// never omits), so kubectl's own byte comparison (`rollout undo` of the current revision:
/// "skipped rollback") holds too.
pub fn revision_data(ds: &DaemonSet) -> Value {
    let mut template = match &ds.template {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    go_shape(&mut template);
    template.insert("$patch".into(), json!("replace"));
    sorted(&json!({"spec": {"template": template}}))
}

/// The hash naming the current template's revision (upstream `ComputeHash` over the template
/// and `status.collisionCount`).
pub fn template_hash(ds: &DaemonSet) -> String {
    compute_hash(&ds.pod_template, ds.collision_count)
}

/// A new ControllerRevision of the DaemonSet's template, numbered `revision`, named
/// `<ds>-<hash>`, labelled with the template's labels and the hash, annotated with the
/// DaemonSet's annotations (where `rollout history` finds the change cause).
pub fn new_revision(ds: &DaemonSet, hash: &str, revision: i64) -> Value {
    let mut labels = ds.template_labels();
    labels.insert(HASH_LABEL.into(), hash.into());
    let mut meta = Map::new();
    meta.insert("name".into(), json!(format!("{}-{hash}", ds.name)));
    meta.insert("namespace".into(), json!(ds.namespace));
    meta.insert("labels".into(), json!(labels));
    if !ds.annotations.is_empty() {
        meta.insert("annotations".into(), json!(ds.annotations));
    }
    meta.insert("ownerReferences".into(), json!([controller_ref(ds)]));
    json!({
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": meta,
        "data": revision_data(ds),
        "revision": revision,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::daemonset::view::TEMPLATE_GENERATION;

    fn fluentd(spec_patch: Value) -> DaemonSet {
        let mut spec = json!({
            "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "fluentd-elasticsearch", "image": "quay.io/fluentd_elasticsearch/fluentd:v2.5.2"}],
        });
        json_patch::merge(&mut spec, &spec_patch);
        DaemonSet::from_value(&json!({
            "metadata": {"name": "fluentd-elasticsearch", "namespace": "kube-system", "uid": "ds-uid",
                "annotations": {TEMPLATE_GENERATION: "1", "kubernetes.io/change-cause": "first"}},
            "spec": {"selector": {"matchLabels": {"name": "fluentd-elasticsearch"}},
                "template": {"metadata": {"labels": {"name": "fluentd-elasticsearch"},
                    "annotations": {"a": "b"}}, "spec": spec}}}))
        .unwrap()
    }

    #[test]
    fn a_daemon_pod_is_pinned_to_its_node_with_the_automatic_tolerations() {
        let p = new_pod(&fluentd(json!({})), "node-a", "6d4f8b");
        assert_eq!(p["metadata"]["generateName"], "fluentd-elasticsearch-");
        assert_eq!(p["metadata"]["namespace"], "kube-system");
        assert_eq!(
            p["metadata"]["labels"],
            json!({"name": "fluentd-elasticsearch", "pod-template-generation": "1",
                "controller-revision-hash": "6d4f8b"})
        );
        assert_eq!(p["metadata"]["annotations"], json!({"a": "b"}));
        assert_eq!(p["metadata"]["ownerReferences"][0]["kind"], "DaemonSet");
        assert_eq!(p["metadata"]["ownerReferences"][0]["controller"], true);
        assert_eq!(
            p["spec"]["affinity"],
            json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}]}}})
        );
        let tolerations = p["spec"]["tolerations"].as_array().unwrap();
        assert_eq!(
            tolerations.len(),
            7,
            "the user's and the six automatic ones"
        );
        assert!(
            p["spec"].get("nodeName").is_none(),
            "the scheduler binds it"
        );
    }

    #[test]
    fn the_users_required_terms_are_replaced_and_the_rest_kept() {
        let ds = fluentd(json!({
            "nodeSelector": {"disk": "ssd"},
            "affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]},
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "preference": {"matchExpressions": [{"key": "x", "operator": "Exists"}]}}]},
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"a": "b"}}}]}}}));
        let p = new_pod(&ds, "node-b", "h");
        let na = &p["spec"]["affinity"]["nodeAffinity"];
        assert_eq!(
            na["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"],
            json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-b"]}]}])
        );
        assert_eq!(
            na["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"],
            1
        );
        assert!(p["spec"]["affinity"]["podAntiAffinity"].is_object());
        assert_eq!(
            p["spec"]["nodeSelector"],
            json!({"disk": "ssd"}),
            "kept, as upstream"
        );
    }

    #[test]
    fn the_revision_data_replaces_the_template_with_keys_in_gos_order() {
        let ds = fluentd(json!({}));
        let data = revision_data(&ds);
        let text = data.to_string();
        assert!(
            text.starts_with(
                r#"{"spec":{"template":{"$patch":"replace","metadata":{"annotations":{"a":"b"},"creationTimestamp":null,"labels":"#
            ),
            "{text}"
        );
        assert_eq!(
            data["spec"]["template"]["spec"]["containers"][0]["resources"],
            json!({}),
            "as Go writes an empty struct"
        );
        let r = new_revision(&ds, "abc", 3);
        assert_eq!(r["metadata"]["name"], "fluentd-elasticsearch-abc");
        assert_eq!(
            r["metadata"]["labels"],
            json!({"name": "fluentd-elasticsearch", "controller-revision-hash": "abc"})
        );
        assert_eq!(
            r["metadata"]["annotations"]["kubernetes.io/change-cause"],
            "first"
        );
        assert_eq!(r["revision"], 3);
        assert_eq!(r["data"], data);
    }

    #[test]
    fn the_hash_follows_the_template_and_the_collision_count() {
        let a = fluentd(json!({}));
        let b =
            fluentd(json!({"containers": [{"name": "fluentd-elasticsearch", "image": "other"}]}));
        assert_ne!(template_hash(&a), template_hash(&b));
        let mut collided = a.clone();
        collided.collision_count = Some(1);
        assert_ne!(template_hash(&a), template_hash(&collided));
        assert_eq!(template_hash(&a), template_hash(&fluentd(json!({}))));
    }
}
