//! A StatefulSet pod's sticky identity (STS-08..14, STS-27): its ordinal, its name
//! `<set>-<ordinal>`, hostname and subdomain, the pod-name and pod-index labels, and one claim
//! per `volumeClaimTemplates` entry named `<template>-<set>-<ordinal>` mounted in place of the
//! template's volume of that name (upstream `newStatefulSetPod`, `updateIdentity`,
//! `updateStorage`, `getPersistentVolumeClaims`).
//!
//! Planner: pure, no I/O.

use super::view::{
    HASH_LABEL, POD_INDEX_LABEL, POD_NAME_LABEL, REVISION_LABEL, SetPod, StatefulSet,
};
use crate::{history, workload};
use berth_shared::k8s_openapi::api::core::v1 as core;
use berth_shared::resource::STATEFUL_SETS;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

pub const KIND: &str = "StatefulSet";
pub const API_VERSION: &str = "apps/v1";

/// The ordinal in a pod's name, when the name is `<set>-<ordinal>` (upstream `getOrdinal`).
pub fn ordinal_of(set: &str, pod: &str) -> Option<i32> {
    let (parent, ordinal) = pod.rsplit_once('-')?;
    if parent != set || ordinal.is_empty() || !ordinal.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    ordinal.parse().ok()
}

pub fn pod_name(set: &StatefulSet, ordinal: i32) -> String {
    format!("{}-{ordinal}", set.name)
}

/// `<template>-<set>-<ordinal>`.
pub fn claim_name(template: &str, set: &StatefulSet, ordinal: i32) -> String {
    format!("{template}-{}-{ordinal}", set.name)
}

/// The controller reference a StatefulSet's pods and revisions carry.
pub fn controller_ref(set: &StatefulSet) -> Value {
    json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": set.name,
        "uid": set.uid,
        "controller": true,
        "blockOwnerDeletion": true,
    })
}

fn template_name(t: &core::PersistentVolumeClaim) -> &str {
    t.metadata.name.as_deref().unwrap_or_default()
}

/// The claims pod `ordinal` mounts, by template name: `(template, claim name)`.
pub fn claim_names(set: &StatefulSet, ordinal: i32) -> Vec<(String, String)> {
    set.claim_templates
        .iter()
        .map(|t| {
            let name = template_name(t);
            (name.to_string(), claim_name(name, set, ordinal))
        })
        .collect()
}

/// A new claim from its template for pod `ordinal`: the template with the selector's labels
/// added (upstream `getPersistentVolumeClaims`); owner references are the retention policy's
/// ([`super::retention`]).
pub fn new_claim(set: &StatefulSet, template: &core::PersistentVolumeClaim, ordinal: i32) -> Value {
    let mut claim = template.clone();
    claim.metadata.name = Some(claim_name(template_name(template), set, ordinal));
    claim.metadata.namespace = Some(set.namespace.clone());
    let labels = claim.metadata.labels.get_or_insert_with(BTreeMap::new);
    for (k, v) in &set.match_labels {
        labels.insert(k.clone(), v.clone());
    }
    claim.status = None;
    let mut v = serde_json::to_value(&claim).unwrap_or_else(|_| json!({}));
    v["apiVersion"] = json!("v1");
    v["kind"] = json!("PersistentVolumeClaim");
    v
}

/// Sets the pod's identity: name, namespace, the pod-name and pod-index labels, hostname and
/// subdomain (upstream `updateIdentity`).
pub fn set_identity(set: &StatefulSet, ordinal: i32, pod: &mut Value) {
    let name = pod_name(set, ordinal);
    pod["metadata"]["name"] = json!(name);
    pod["metadata"]["namespace"] = json!(set.namespace);
    set_identity_labels(pod, &name, ordinal);
    pod["spec"]["hostname"] = json!(name);
    if !set.service_name.is_empty() {
        pod["spec"]["subdomain"] = json!(set.service_name);
    }
}

/// Puts the pod-name and pod-index labels on the pod `name` (the part of its identity that
/// can drift: a pod's hostname and volumes cannot change).
pub fn set_identity_labels(pod: &mut Value, name: &str, ordinal: i32) {
    if !pod["metadata"]["labels"].is_object() {
        pod["metadata"]["labels"] = json!({});
    }
    pod["metadata"]["labels"][POD_NAME_LABEL] = json!(name);
    pod["metadata"]["labels"][POD_INDEX_LABEL] = json!(ordinal.to_string());
}

/// Puts the claims' volumes first, replacing the template's volumes of the same names
/// (upstream `updateStorage`).
pub fn set_storage(set: &StatefulSet, ordinal: i32, pod: &mut Value) {
    let claims = claim_names(set, ordinal);
    let mut volumes: Vec<Value> = claims
        .iter()
        .map(|(t, c)| json!({"name": t, "persistentVolumeClaim": {"claimName": c}}))
        .collect();
    let current = pod["spec"]["volumes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    volumes.extend(current.into_iter().filter(|v| {
        let n = v.get("name").and_then(Value::as_str).unwrap_or_default();
        !claims.iter().any(|(t, _)| t == n)
    }));
    if !volumes.is_empty() {
        pod["spec"]["volumes"] = json!(volumes);
    }
}

/// A new pod `ordinal` of `template` (the current or the update revision's) labelled with
/// `revision` (upstream `newVersionedStatefulSetPod`).
pub fn new_pod(
    set: &StatefulSet,
    template: &core::PodTemplateSpec,
    ordinal: i32,
    revision: &str,
) -> Value {
    let mut meta = template.metadata.clone().unwrap_or_default();
    let mut labels = meta.labels.take().unwrap_or_default();
    labels.insert(REVISION_LABEL.into(), revision.into());
    let mut m = Map::new();
    m.insert("labels".into(), json!(labels));
    let spec = template.spec.clone().unwrap_or_default();
    let mut pod = workload::new_pod::from_template(m, meta, controller_ref(set), &spec);
    set_identity(set, ordinal, &mut pod);
    set_storage(set, ordinal, &mut pod);
    pod
}

/// Upstream `identityMatches`: the pod is `<set>-<ordinal>` in the set's namespace with its
/// pod-name label.
pub fn identity_matches(set: &StatefulSet, ordinal: i32, pod: &SetPod) -> bool {
    let name = pod_name(set, ordinal);
    pod.pod.name == name
        && pod.volumes.namespace == set.namespace
        && pod.pod.labels.get(POD_NAME_LABEL) == Some(&name)
}

/// The pod template of a revision: its data is `{"spec":{"template":{…,"$patch":"replace"}}}`
/// (see [`crate::history::data`]).
pub fn revision_template(data: &Value) -> Option<core::PodTemplateSpec> {
    let mut t = data.pointer("/spec/template")?.clone();
    if let Some(m) = t.as_object_mut() {
        m.remove("$patch");
    }
    serde_json::from_value(t).ok()
}

/// The StatefulSet as the owner of its pods and revisions.
pub fn ownership(set: &StatefulSet) -> workload::Owner<'_> {
    workload::Owner {
        resource: STATEFUL_SETS,
        namespace: &set.namespace,
        name: &set.name,
        uid: &set.uid,
        selector: &set.selector,
        deleting: set.deleting,
        rules: workload::Rules::default(),
    }
}

/// The StatefulSet as its revision history sees it.
pub fn history_owner(set: &StatefulSet) -> history::Owner<'_> {
    history::Owner {
        resource: STATEFUL_SETS,
        namespace: &set.namespace,
        name: &set.name,
        uid: &set.uid,
        controller_ref: controller_ref(set),
        template: &set.template,
        pod_template: &set.pod_template,
        collision_count: set.collision_count,
        history_limit: set.revision_history_limit,
        annotations: &set.annotations,
        hash_label: HASH_LABEL,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::statefulset::view::PodVolumes;
    use crate::views::Pod;
    use std::sync::Arc;

    fn web() -> StatefulSet {
        StatefulSet::from_value(&json!({
            "metadata": {"name": "web", "namespace": "default", "uid": "u"},
            "spec": {"selector": {"matchLabels": {"app": "nginx"}}, "serviceName": "nginx",
                "replicas": 2,
                "template": {"metadata": {"labels": {"app": "nginx"}}, "spec": {
                    "containers": [{"name": "nginx", "image": "nginx",
                        "volumeMounts": [{"name": "www", "mountPath": "/usr/share/nginx/html"}]}],
                    "volumes": [{"name": "www", "emptyDir": {}}, {"name": "cache", "emptyDir": {}}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "www", "labels": {"tier": "data"}},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}}))
        .expect("web")
    }

    #[test]
    fn ordinals_come_from_names_of_the_set_only() {
        assert_eq!(ordinal_of("web", "web-0"), Some(0));
        assert_eq!(ordinal_of("web", "web-12"), Some(12));
        assert_eq!(ordinal_of("my-web", "my-web-3"), Some(3));
        assert_eq!(ordinal_of("web", "web-x"), None);
        assert_eq!(ordinal_of("web", "web-"), None);
        assert_eq!(ordinal_of("web", "db-0"), None);
        assert_eq!(
            ordinal_of("web", "web-1-0"),
            None,
            "parent web-1 is not web"
        );
    }

    #[test]
    fn a_new_pod_has_its_identity_its_claims_and_the_revision() {
        let set = web();
        let p = new_pod(&set, &set.pod_template, 1, "web-abc");
        assert_eq!(p["metadata"]["name"], "web-1");
        assert_eq!(p["metadata"]["namespace"], "default");
        assert_eq!(
            p["metadata"]["labels"],
            json!({"app": "nginx", "controller-revision-hash": "web-abc",
                "statefulset.kubernetes.io/pod-name": "web-1", "apps.kubernetes.io/pod-index": "1"})
        );
        assert_eq!(p["spec"]["hostname"], "web-1");
        assert_eq!(p["spec"]["subdomain"], "nginx");
        assert_eq!(
            p["spec"]["volumes"],
            json!([{"name": "www", "persistentVolumeClaim": {"claimName": "www-web-1"}},
                {"name": "cache", "emptyDir": {}}]),
            "the claim replaces the template's volume of its name and comes first"
        );
        assert_eq!(p["metadata"]["ownerReferences"][0]["kind"], "StatefulSet");
    }

    #[test]
    fn a_claim_is_its_template_named_for_the_pod_with_the_selector_labels() {
        let set = web();
        let c = new_claim(&set, &set.claim_templates[0], 3);
        assert_eq!(c["metadata"]["name"], "www-web-3");
        assert_eq!(c["metadata"]["namespace"], "default");
        assert_eq!(
            c["metadata"]["labels"],
            json!({"tier": "data", "app": "nginx"})
        );
        assert_eq!(c["spec"]["resources"]["requests"]["storage"], "1Gi");
        assert_eq!(c["kind"], "PersistentVolumeClaim");
    }

    #[test]
    fn identity_matches_only_the_pods_own() {
        let set = web();
        let made = new_pod(&set, &set.pod_template, 0, "r");
        let mut obj = made.clone();
        obj["metadata"]["uid"] = json!("p");
        let pod = |v: &Value| SetPod {
            pod: Arc::new(Pod::from_value(v)),
            volumes: Arc::new(PodVolumes::from_value(v)),
        };
        assert!(identity_matches(&set, 0, &pod(&obj)));
        let mut relabelled = obj.clone();
        relabelled["metadata"]["labels"][POD_NAME_LABEL] = json!("other");
        assert!(!identity_matches(&set, 0, &pod(&relabelled)));
        assert!(!identity_matches(&set, 1, &pod(&obj)), "web-0 is not web-1");
    }

    #[test]
    fn a_revisions_template_comes_back_from_its_data() {
        let set = web();
        let data = crate::history::data::template_patch(&set.template);
        let t = revision_template(&data).expect("template");
        assert_eq!(
            t.spec.expect("spec").containers[0].image.as_deref(),
            Some("nginx")
        );
    }
}
