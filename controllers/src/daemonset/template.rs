//! What the DaemonSet controller writes from the template: a daemon pod for one node (upstream
//! `CreatePodTemplate` + `ReplaceDaemonSetPodNodeNameNodeAffinity`), and the DaemonSet as its
//! revision history ([`crate::history`]) sees it.
//!
//! Planner: pure, no I/O.

use super::eligibility::add_daemon_tolerations;
use super::view::{DaemonSet, GENERATION_LABEL, HASH_LABEL};
use crate::history::Owner;
use crate::workload::{self, Rules};
use berth_shared::k8s_openapi::api::core::v1 as core;
use berth_shared::scheduling::node_affinity::NODE_NAME_FIELD;
use serde_json::{Map, Value, json};

/// The kind of the pods' and revisions' controller reference.
pub const KIND: &str = "DaemonSet";
pub const API_VERSION: &str = "apps/v1";

/// The controller reference a DaemonSet's pods and revisions carry.
pub fn controller_ref(ds: &DaemonSet) -> Value {
    ownership(ds).controller_ref().to_value()
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
    let mut template_meta = ds.pod_template.metadata.clone().unwrap_or_default();
    let mut labels = template_meta.labels.take().unwrap_or_default();
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
    workload::new_pod::from_template(meta, template_meta, controller_ref(ds), &spec)
}

/// The DaemonSet as the owner of its pods and revisions.
pub fn ownership(ds: &DaemonSet) -> workload::Owner<'_> {
    workload::Owner {
        resource: berth_shared::resource::DAEMON_SETS,
        namespace: &ds.namespace,
        name: &ds.name,
        uid: &ds.uid,
        selector: &ds.selector,
        deleting: ds.deleting,
        rules: Rules::default(),
    }
}

/// The DaemonSet as its revision history sees it.
pub fn history_owner(ds: &DaemonSet) -> Owner<'_> {
    Owner {
        resource: berth_shared::resource::DAEMON_SETS,
        namespace: &ds.namespace,
        name: &ds.name,
        uid: &ds.uid,
        controller_ref: controller_ref(ds),
        template: &ds.template,
        pod_template: &ds.pod_template,
        collision_count: ds.collision_count,
        history_limit: ds.revision_history_limit,
        annotations: &ds.annotations,
        hash_label: HASH_LABEL,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemonset::view::TEMPLATE_GENERATION;

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
        let data = history_owner(&ds).revision_data();
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
        let r = history_owner(&ds).new_revision("abc", 3);
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
        assert_ne!(
            history_owner(&a).template_hash(),
            history_owner(&b).template_hash()
        );
        let mut collided = a.clone();
        collided.collision_count = Some(1);
        assert_ne!(
            history_owner(&a).template_hash(),
            history_owner(&collided).template_hash()
        );
        assert_eq!(
            history_owner(&a).template_hash(),
            history_owner(&fluentd(json!({}))).template_hash()
        );
    }
}
