//! `metadata` admission shared by every kind: name and namespace syntax, labels, annotations,
//! owner references, finalizers, and which metadata fields an update may not change.

use std::any::TypeId;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::{Metadata, NamespaceResourceScope, Resource};

use super::field::{FieldError, Path};
use super::names::{
    dns1123_label, each_invalid, label_value, name_messages, name_rule, qualified_name,
};

/// Upstream `TotalAnnotationSizeLimitB`: keys plus values, 256 KiB.
pub(crate) const ANNOTATIONS_MAX_BYTES: usize = 256 * 1024;

/// Upstream `ValidateLabels`: keys are qualified names, values label values; errors carry the
/// map's path, not the key's.
pub(crate) fn validate_labels(labels: &BTreeMap<String, String>, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (k, v) in labels {
        errs.extend(each_invalid(path, k, qualified_name(k)));
        errs.extend(each_invalid(path, v, label_value(v)));
    }
    errs
}

/// Upstream `ValidateAnnotations`: case-insensitive qualified-name keys, total size capped.
pub(crate) fn validate_annotations(ann: &BTreeMap<String, String>, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for k in ann.keys() {
        errs.extend(each_invalid(path, k, qualified_name(&k.to_lowercase())));
    }
    let total: usize = ann.iter().map(|(k, v)| k.len() + v.len()).sum();
    if total > ANNOTATIONS_MAX_BYTES {
        errs.push(FieldError::too_long(path, ANNOTATIONS_MAX_BYTES));
    }
    errs
}

/// Labels, annotations, owner references and finalizers: the checks every write repeats.
fn validate_meta_contents(meta: &ObjectMeta, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(labels) = &meta.labels {
        errs.extend(validate_labels(labels, &path.child("labels")));
    }
    if let Some(ann) = &meta.annotations {
        errs.extend(validate_annotations(ann, &path.child("annotations")));
    }
    if let Some(refs) = &meta.owner_references {
        errs.extend(validate_owner_references(
            refs,
            &path.child("ownerReferences"),
        ));
    }
    for f in meta.finalizers.iter().flatten() {
        errs.extend(each_invalid(
            &path.child("finalizers"),
            f,
            qualified_name(f),
        ));
    }
    errs
}

/// Upstream's first step of every `Validate<Kind>`: the metadata of a new object
/// ([`validate_object_meta`], namespaced as the kind is), or on an update what may not change
/// of it ([`validate_object_meta_update`]).
pub(crate) fn validate_meta<K>(obj: &K, old: Option<&K>) -> Vec<FieldError>
where
    K: Resource + Metadata<Ty = ObjectMeta>,
    K::Scope: 'static,
{
    match old {
        None => validate_object_meta(obj.metadata(), K::KIND, namespaced::<K>()),
        Some(o) => validate_object_meta_update(obj.metadata(), o.metadata()),
    }
}

/// Whether objects of kind `K` live in a namespace.
pub(crate) fn namespaced<K>() -> bool
where
    K: Resource,
    K::Scope: 'static,
{
    TypeId::of::<K::Scope>() == TypeId::of::<NamespaceResourceScope>()
}

/// Upstream `ValidateObjectMeta` for a create: name (or generateName) syntax for the kind, the
/// namespace required exactly when the kind is namespaced, and the contents above.
pub(crate) fn validate_object_meta(
    meta: &ObjectMeta,
    kind: &str,
    namespaced: bool,
) -> Vec<FieldError> {
    let path = Path::new("metadata");
    let rule = name_rule(kind);
    let mut errs = Vec::new();
    if let Some(gen_name) = meta.generate_name.as_deref().filter(|g| !g.is_empty()) {
        let p = path.child("generateName");
        errs.extend(each_invalid(
            &p,
            gen_name,
            name_messages(rule, gen_name, true),
        ));
    }
    match meta.name.as_deref().unwrap_or_default() {
        "" => errs.push(FieldError::required(
            &path.child("name"),
            "name or generateName is required",
        )),
        name => errs.extend(each_invalid(
            &path.child("name"),
            name,
            name_messages(rule, name, false),
        )),
    }
    errs.extend(validate_namespace_field(meta, namespaced, &path));
    errs.extend(validate_meta_contents(meta, &path));
    errs
}

fn validate_namespace_field(meta: &ObjectMeta, namespaced: bool, path: &Path) -> Vec<FieldError> {
    let ns = meta.namespace.as_deref().unwrap_or_default();
    let p = path.child("namespace");
    match (namespaced, ns) {
        (true, "") => vec![FieldError::required(&p, "")],
        (true, ns) => each_invalid(&p, ns, dns1123_label(ns)),
        (false, "") => Vec::new(),
        (false, _) => vec![FieldError::forbidden(&p, "not allowed on this type")],
    }
}

/// Upstream `ValidateObjectMetaUpdate`: identity fields are immutable; the contents are
/// re-checked; no finalizer may be added once deletion has started.
pub(crate) fn validate_object_meta_update(new: &ObjectMeta, old: &ObjectMeta) -> Vec<FieldError> {
    let path = Path::new("metadata");
    let mut errs = Vec::new();
    let pairs = [
        ("name", &new.name, &old.name),
        ("namespace", &new.namespace, &old.namespace),
        ("uid", &new.uid, &old.uid),
    ];
    for (field, n, o) in pairs {
        let (n, o) = (
            n.as_deref().unwrap_or_default(),
            o.as_deref().unwrap_or_default(),
        );
        if n != o {
            errs.push(FieldError::immutable(&path.child(field), n));
        }
    }
    if old.deletion_timestamp.is_some() {
        let old_f: std::collections::HashSet<&String> = old.finalizers.iter().flatten().collect();
        let added: Vec<&String> = new
            .finalizers
            .iter()
            .flatten()
            .filter(|f| !old_f.contains(f))
            .collect();
        if !added.is_empty() {
            let list: Vec<String> = added.iter().map(|f| super::field::quote(f)).collect();
            errs.push(FieldError::forbidden(
                &path.child("finalizers"),
                format!(
                    "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                    list.join(", ")
                ),
            ));
        }
    }
    errs.extend(validate_meta_contents(new, &path));
    errs
}

/// Carries the server-owned identity fields of the stored object into an update that omitted
/// them, as upstream's `BeforeUpdate` does.
pub(crate) fn carry_identity(new: &mut ObjectMeta, old: &ObjectMeta) {
    if new.uid.as_deref().unwrap_or_default().is_empty() {
        new.uid.clone_from(&old.uid);
    }
    if old.creation_timestamp.is_some() {
        new.creation_timestamp.clone_from(&old.creation_timestamp);
    }
    new.deletion_timestamp.clone_from(&old.deletion_timestamp);
    new.deletion_grace_period_seconds = old.deletion_grace_period_seconds;
}

fn validate_owner_references(refs: &[OwnerReference], path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut controller: Option<String> = None;
    for r in refs {
        let version = r.api_version.rsplit('/').next().unwrap_or_default();
        if version.is_empty() {
            errs.push(FieldError::invalid(
                &path.child("apiVersion"),
                r.api_version.as_str(),
                "version must not be empty",
            ));
        }
        for (field, value) in [("kind", &r.kind), ("name", &r.name), ("uid", &r.uid)] {
            if value.is_empty() {
                errs.push(FieldError::invalid(
                    &path.child(field),
                    "",
                    "must not be empty",
                ));
            }
        }
        if r.api_version == "v1" && r.kind == "Event" {
            let v = serde_json::to_value(r).unwrap_or_default();
            errs.push(FieldError::invalid(
                path,
                v,
                "/v1, Kind=Event is disallowed from being an owner",
            ));
        }
        if r.controller == Some(true) {
            let this = format!("{}/{}", r.kind, r.name);
            match &controller {
                Some(first) => {
                    let v = serde_json::to_value(refs).unwrap_or_default();
                    errs.push(FieldError::invalid(path, v, format!(
                        "Only one reference can have Controller set to true. Found \"true\" in references for {first} and {this}"
                    )));
                }
                None => controller = Some(this),
            }
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(v: serde_json::Value) -> ObjectMeta {
        serde_json::from_value(v).unwrap()
    }

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(FieldError::message).collect()
    }

    #[test]
    fn namespaced_kinds_need_a_namespace_and_cluster_kinds_refuse_one() {
        let m = meta(json!({"name": "a"}));
        assert_eq!(
            messages(&validate_object_meta(&m, "Pod", true)),
            vec!["metadata.namespace: Required value"]
        );
        let m = meta(json!({"name": "a", "namespace": "x"}));
        assert_eq!(
            messages(&validate_object_meta(&m, "Node", false)),
            vec!["metadata.namespace: Forbidden: not allowed on this type"]
        );
    }

    #[test]
    fn bad_label_keys_and_values_point_at_the_label_map() {
        let m =
            meta(json!({"name": "a", "namespace": "d", "labels": {"bad key": "ok", "ok": "-bad"}}));
        let errs = validate_object_meta(&m, "Pod", true);
        assert_eq!(errs.len(), 2);
        assert!(errs.iter().all(|e| e.field == "metadata.labels"));
        assert!(
            errs[0]
                .message()
                .starts_with("metadata.labels: Invalid value: \"bad key\": name part must consist")
        );
        assert!(
            errs[1]
                .message()
                .starts_with("metadata.labels: Invalid value: \"-bad\": a valid label must be")
        );
    }

    #[test]
    fn annotations_are_capped_at_256_kib() {
        let big = "x".repeat(ANNOTATIONS_MAX_BYTES);
        let m = meta(json!({"name": "a", "namespace": "d", "annotations": {"k": big}}));
        assert_eq!(
            messages(&validate_object_meta(&m, "Pod", true)),
            vec!["metadata.annotations: Too long: must have at most 262144 bytes"]
        );
    }

    #[test]
    fn owner_references_need_identity_and_one_controller() {
        let m = meta(json!({"name": "a", "namespace": "d", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r1", "uid": "u1", "controller": true},
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r2", "uid": "", "controller": true},
        ]}));
        let errs = validate_object_meta(&m, "Pod", true);
        assert_eq!(
            errs[0].message(),
            "metadata.ownerReferences.uid: Invalid value: \"\": must not be empty"
        );
        assert!(errs[1].detail.starts_with("Only one reference can have Controller set to true. Found \"true\" in references for ReplicaSet/r1 and ReplicaSet/r2"));
    }

    #[test]
    fn generate_name_is_checked_as_a_prefix() {
        let m = meta(json!({"generateName": "web-", "name": "web-abcde", "namespace": "d"}));
        assert!(validate_object_meta(&m, "Pod", true).is_empty());
        let m = meta(json!({"generateName": "Web-", "name": "web-abcde", "namespace": "d"}));
        assert_eq!(
            validate_object_meta(&m, "Pod", true)[0].field,
            "metadata.generateName"
        );
    }

    #[test]
    fn identity_fields_are_immutable_on_update() {
        let old = meta(json!({"name": "a", "namespace": "d", "uid": "1"}));
        let new = meta(json!({"name": "b", "namespace": "d", "uid": "1"}));
        assert_eq!(
            messages(&validate_object_meta_update(&new, &old)),
            vec!["metadata.name: Invalid value: \"b\": field is immutable"]
        );
    }

    #[test]
    fn no_finalizers_may_be_added_during_deletion() {
        let old = meta(json!({"name": "a", "deletionTimestamp": "2024-01-01T00:00:00Z"}));
        let new = meta(json!({"name": "a", "finalizers": ["example.com/x"]}));
        let errs = validate_object_meta_update(&new, &old);
        assert_eq!(errs[0].field, "metadata.finalizers");
    }

    #[test]
    fn identity_is_carried_into_updates_that_omit_it() {
        let old =
            meta(json!({"name": "a", "uid": "u", "creationTimestamp": "2024-01-01T00:00:00Z"}));
        let mut new = meta(json!({"name": "a"}));
        carry_identity(&mut new, &old);
        assert_eq!(new.uid.as_deref(), Some("u"));
        assert!(new.creation_timestamp.is_some());
    }
}
