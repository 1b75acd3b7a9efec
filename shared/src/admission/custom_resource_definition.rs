//! CustomResourceDefinition admission (apiextensions.k8s.io/v1): upstream's
//! `SetDefaults_CustomResourceDefinitionSpec` and the parts of
//! `ValidateCustomResourceDefinition` / `…Update` that decide what can be served: names, group,
//! scope, versions (exactly one storage version), structural schemas, CEL rules that compile,
//! the scale subresource's paths, printer columns' JSONPaths and selectable fields.

use std::collections::HashSet;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, CustomResourceDefinitionVersion,
};
use serde_json::Value;

use super::Operation;
use super::field::{FieldError, Path};
use super::names::{dns1035_label, dns1123_label, dns1123_subdomain, each_invalid};
use crate::custom::selectable::MAX_SELECTABLE_FIELDS;

/// The finalizer that deletes a definition's objects before the definition goes.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

pub(crate) fn default_crd(crd: &mut CustomResourceDefinition, op: Operation) {
    let names = &mut crd.spec.names;
    if names.singular.as_deref().unwrap_or_default().is_empty() {
        names.singular = Some(names.kind.to_lowercase());
    }
    if names.list_kind.as_deref().unwrap_or_default().is_empty() && !names.kind.is_empty() {
        names.list_kind = Some(format!("{}List", names.kind));
    }
    if crd.spec.conversion.is_none() {
        crd.spec.conversion = Some(CustomResourceConversion {
            strategy: "None".into(),
            webhook: None,
        });
    }
    if op == Operation::Create {
        let finalizers = crd.metadata.finalizers.get_or_insert_with(Vec::new);
        if !finalizers.iter().any(|f| f == CLEANUP_FINALIZER) {
            finalizers.push(CLEANUP_FINALIZER.to_string());
        }
    }
}

pub(crate) fn validate_crd(
    crd: &CustomResourceDefinition,
    old: Option<&CustomResourceDefinition>,
) -> Vec<FieldError> {
    let spec = &crd.spec;
    let sp = Path::new("spec");
    let mut errs = Vec::new();
    let name = crd.metadata.name.as_deref().unwrap_or_default();
    let expected = format!("{}.{}", spec.names.plural, spec.group);
    if name != expected {
        errs.push(FieldError::invalid(
            &Path::new("metadata").child("name"),
            name,
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    let group = sp.child("group");
    if spec.group.is_empty() {
        errs.push(FieldError::required(&group, ""));
    } else {
        errs.extend(each_invalid(
            &group,
            &spec.group,
            dns1123_subdomain(&spec.group),
        ));
        if !spec.group.contains('.') {
            errs.push(FieldError::invalid(
                &group,
                spec.group.as_str(),
                "should be a domain with at least one dot",
            ));
        }
    }
    if !matches!(spec.scope.as_str(), "Cluster" | "Namespaced") {
        errs.push(FieldError::not_supported(
            &sp.child("scope"),
            spec.scope.as_str(),
            &["Cluster", "Namespaced"],
        ));
    }
    errs.extend(validate_names(crd, &sp.child("names")));
    errs.extend(validate_versions(crd, old, &sp.child("versions")));
    if let Some(conv) = &spec.conversion {
        let p = sp.child("conversion").child("strategy");
        match conv.strategy.as_str() {
            // Judged with its webhook in `crd_conversion`.
            "None" | "Webhook" => {}
            other => errs.push(FieldError::not_supported(&p, other, &["None", "Webhook"])),
        }
    }
    if let Some(old) = old {
        if old.spec.scope != spec.scope {
            errs.push(FieldError::immutable(
                &sp.child("scope"),
                spec.scope.as_str(),
            ));
        }
        if old.spec.group != spec.group {
            errs.push(FieldError::immutable(&group, spec.group.as_str()));
        }
    }
    errs
}

fn validate_names(crd: &CustomResourceDefinition, p: &Path) -> Vec<FieldError> {
    let n = &crd.spec.names;
    let mut errs = Vec::new();
    let label = |field: &str, value: &str, errs: &mut Vec<FieldError>| {
        let path = p.child(field);
        if value.is_empty() {
            errs.push(FieldError::required(&path, ""));
        } else {
            errs.extend(each_invalid(&path, value, dns1123_label(value)));
        }
    };
    label("plural", &n.plural, &mut errs);
    label(
        "singular",
        n.singular.as_deref().unwrap_or_default(),
        &mut errs,
    );
    for (i, s) in n.short_names.iter().flatten().enumerate() {
        let path = p.child("shortNames").index(i);
        errs.extend(each_invalid(&path, s, dns1123_label(s)));
    }
    for (i, c) in n.categories.iter().flatten().enumerate() {
        let path = p.child("categories").index(i);
        errs.extend(each_invalid(&path, c, dns1123_label(c)));
    }
    let kind = p.child("kind");
    if n.kind.is_empty() {
        errs.push(FieldError::required(&kind, ""));
    } else if !dns1035_label(&n.kind.to_lowercase()).is_empty() {
        errs.push(FieldError::invalid(
            &kind,
            n.kind.as_str(),
            "may have mixed case, but should otherwise match: [a-z]([-a-z0-9]*[a-z0-9])?",
        ));
    }
    let list_kind = n.list_kind.as_deref().unwrap_or_default();
    if list_kind.is_empty() {
        errs.push(FieldError::required(&p.child("listKind"), ""));
    } else if list_kind == n.kind {
        errs.push(FieldError::invalid(
            &p.child("listKind"),
            list_kind,
            "kind and listKind may not be the same or parsing become ambiguous",
        ));
    }
    errs
}

fn validate_versions(
    crd: &CustomResourceDefinition,
    old: Option<&CustomResourceDefinition>,
    p: &Path,
) -> Vec<FieldError> {
    let versions = &crd.spec.versions;
    let mut errs = Vec::new();
    if versions.is_empty() {
        errs.push(FieldError::invalid(
            p,
            "null",
            "must have exactly one version marked as storage version",
        ));
        return errs;
    }
    let storage = versions.iter().filter(|v| v.storage).count();
    if storage != 1 {
        errs.push(FieldError::invalid(
            p,
            Value::Array(Vec::new()),
            "must have exactly one version marked as storage version",
        ));
    }
    let mut seen = HashSet::new();
    for (i, v) in versions.iter().enumerate() {
        let vp = p.index(i);
        if !seen.insert(v.name.as_str()) {
            errs.push(FieldError::duplicate(&vp.child("name"), v.name.as_str()));
        }
        errs.extend(each_invalid(
            &vp.child("name"),
            &v.name,
            dns1035_label(&v.name),
        ));
        let schema_path = vp.child("schema").child("openAPIV3Schema");
        let schema = serde_json::to_value(&v.schema)
            .ok()
            .and_then(|s| s.get("openAPIV3Schema").cloned());
        match schema {
            None => errs.push(FieldError::required(&schema_path, "schemas are required")),
            Some(schema) => {
                if let Err(e) =
                    crate::schema::Structural::from_schema(&schema, schema_path.as_str())
                {
                    errs.extend(e);
                }
                errs.extend(crate::cel::rules::compile_errors(
                    &schema,
                    schema_path.as_str(),
                ));
            }
        }
        let old_version = old.and_then(|o| o.spec.versions.iter().find(|o| o.name == v.name));
        errs.extend(validate_selectable_fields(v, old_version, &vp));
        if let Some(scale) = v.subresources.as_ref().and_then(|s| s.scale.as_ref()) {
            let sp = vp.child("subresources").child("scale");
            if !scale.spec_replicas_path.starts_with(".spec.") {
                errs.push(FieldError::invalid(
                    &sp.child("specReplicasPath"),
                    scale.spec_replicas_path.as_str(),
                    "should be a json path under .spec",
                ));
            }
            if !scale.status_replicas_path.starts_with(".status.") {
                errs.push(FieldError::invalid(
                    &sp.child("statusReplicasPath"),
                    scale.status_replicas_path.as_str(),
                    "should be a json path under .status",
                ));
            }
        }
        for (j, c) in v.additional_printer_columns.iter().flatten().enumerate() {
            let cp = vp.child("additionalPrinterColumns").index(j);
            if crate::custom::printer::compile(&c.json_path).is_none() {
                errs.push(FieldError::invalid(
                    &cp.child("jsonPath"),
                    c.json_path.as_str(),
                    "must be a simple json path",
                ));
            }
            if !matches!(
                c.type_.as_str(),
                "integer" | "number" | "string" | "boolean" | "date"
            ) {
                errs.push(FieldError::not_supported(
                    &cp.child("type"),
                    c.type_.as_str(),
                    &["boolean", "date", "integer", "number", "string"],
                ));
            }
        }
    }
    errs
}

/// Upstream's `ValidateCustomResourceSelectableFields`: each path a simple one (no brackets)
/// to a string, boolean or integer field of the version's schema, outside `metadata`, none
/// twice, at most [`MAX_SELECTABLE_FIELDS`] of them, unless an update leaves a longer list
/// that was stored already unchanged.
fn validate_selectable_fields(
    v: &CustomResourceDefinitionVersion,
    old: Option<&CustomResourceDefinitionVersion>,
    vp: &Path,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(fields) = v.selectable_fields.as_deref().filter(|f| !f.is_empty()) else {
        return errs;
    };
    let p = vp.child("selectableFields");
    let schema = v
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .and_then(|s| serde_json::to_value(s).ok());
    let Some(schema) = schema else {
        // Upstream's words, though they mean the opposite.
        errs.push(FieldError::invalid(
            &p,
            "",
            "may only be set when `version.schema.openAPIV3Schema` is not included",
        ));
        return errs;
    };
    let mut unique = HashSet::new();
    for (i, f) in fields.iter().enumerate() {
        let jp = p.index(i).child("jsonPath");
        let path = f.json_path.as_str();
        if path.is_empty() {
            errs.push(FieldError::required(&jp, ""));
            continue;
        }
        let walked = match crate::cel::rules::walk_field_path(path, &schema, "", false) {
            Ok(w) => w,
            Err(e) => {
                errs.push(FieldError::invalid(
                    &jp,
                    path,
                    format!("is an invalid path: {e}"),
                ));
                continue;
            }
        };
        let root = walked.path.split(['.', '[']).next().unwrap_or_default();
        if root == "metadata" {
            errs.push(FieldError::invalid(
                &jp,
                path,
                "must not point to fields in metadata",
            ));
        }
        if !matches!(
            walked.schema["type"].as_str(),
            Some("string" | "boolean" | "integer")
        ) {
            errs.push(FieldError::invalid(
                &jp,
                path,
                "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.",
            ));
        }
        if !unique.insert(walked.path) {
            errs.push(FieldError::duplicate(&jp, path));
        }
    }
    let grandfathered = old.is_some_and(|o| {
        o.selectable_fields.as_ref().map_or(0, Vec::len) > MAX_SELECTABLE_FIELDS
            && o.selectable_fields == v.selectable_fields
    });
    if unique.len() > MAX_SELECTABLE_FIELDS && !grandfathered {
        errs.push(FieldError::too_many(
            &p,
            unique.len(),
            MAX_SELECTABLE_FIELDS,
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shirts(selectable: Value) -> CustomResourceDefinition {
        serde_json::from_value(json!({
            "metadata": {"name": "shirts.tests.example.com"},
            "spec": {
                "group": "tests.example.com", "scope": "Namespaced",
                "names": {"plural": "shirts", "singular": "shirt", "kind": "Shirt", "listKind": "ShirtList"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "metadata": {"type": "object", "properties": {"name": {"type": "string"}}},
                        "spec": {"type": "object", "properties": {
                            "color": {"type": "string"},
                            "size": {"type": "string", "enum": ["S", "M"]},
                            "quantity": {"type": "integer"},
                            "branded": {"type": "boolean"},
                            "weight": {"type": "number"},
                            "tags": {"type": "object", "additionalProperties": {"type": "string"}},
                            "parts": {"type": "array", "items": {"type": "string"}},
                        }},
                    }}},
                    "selectableFields": selectable}]
            }
        }))
        .expect("a definition")
    }

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(FieldError::message).collect()
    }

    #[test]
    fn selectable_fields_of_scalar_types_are_accepted() {
        let crd = shirts(json!([
            {"jsonPath": ".spec.color"}, {"jsonPath": ".spec.size"},
            {"jsonPath": ".spec.quantity"}, {"jsonPath": ".spec.branded"},
            {"jsonPath": ".spec.tags.team"},
        ]));
        assert_eq!(messages(&validate_crd(&crd, None)), Vec::<String>::new());
    }

    #[test]
    fn selectable_fields_are_refused_with_upstreams_messages() {
        let p = "spec.versions[0].selectableFields";
        let type_msg = "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.";
        let cases = [
            (
                json!([{"jsonPath": ""}]),
                format!("{p}[0].jsonPath: Required value"),
            ),
            (
                json!([{"jsonPath": ".spec.nope"}]),
                format!(
                    "{p}[0].jsonPath: Invalid value: \".spec.nope\": is an invalid path: does not refer to a valid field"
                ),
            ),
            (
                json!([{"jsonPath": ".spec['color']"}]),
                format!(
                    "{p}[0].jsonPath: Invalid value: \".spec['color']\": is an invalid path: array notation is not allowed"
                ),
            ),
            (
                json!([{"jsonPath": "spec.color"}]),
                format!(
                    "{p}[0].jsonPath: Invalid value: \"spec.color\": is an invalid path: expected [ or . but got: spec"
                ),
            ),
            (
                json!([{"jsonPath": ".spec.weight"}]),
                format!("{p}[0].jsonPath: Invalid value: \".spec.weight\": {type_msg}"),
            ),
            (
                json!([{"jsonPath": ".spec.parts"}]),
                format!("{p}[0].jsonPath: Invalid value: \".spec.parts\": {type_msg}"),
            ),
            (
                json!([{"jsonPath": ".metadata.name"}]),
                format!(
                    "{p}[0].jsonPath: Invalid value: \".metadata.name\": must not point to fields in metadata"
                ),
            ),
            (
                json!([{"jsonPath": ".spec.color"}, {"jsonPath": ".spec.color"}]),
                format!("{p}[1].jsonPath: Duplicate value: \".spec.color\""),
            ),
        ];
        for (selectable, want) in cases {
            let crd = shirts(selectable.clone());
            assert_eq!(messages(&validate_crd(&crd, None)), [want], "{selectable}");
        }
    }

    #[test]
    fn more_than_eight_selectable_fields_are_refused_unless_stored_already() {
        let mut crd = shirts(json!([]));
        let props = (0..9)
            .map(|i| (format!("f{i}"), json!({"type": "string"})))
            .collect::<serde_json::Map<_, _>>();
        let fields: Vec<Value> = (0..9)
            .map(|i| json!({"jsonPath": format!(".f{i}")}))
            .collect();
        let mut v = serde_json::to_value(&crd.spec.versions[0]).expect("a version");
        v["schema"]["openAPIV3Schema"]["properties"] = Value::Object(props);
        v["selectableFields"] = Value::Array(fields);
        crd.spec.versions[0] = serde_json::from_value(v).expect("a version");
        assert_eq!(
            messages(&validate_crd(&crd, None)),
            ["spec.versions[0].selectableFields: Too many: 9: must have at most 8 items"]
        );
        assert!(validate_crd(&crd, Some(&crd.clone())).is_empty());
    }

    #[test]
    fn selectable_fields_need_a_schema() {
        let mut crd = shirts(json!([{"jsonPath": ".spec.color"}]));
        crd.spec.versions[0].schema = None;
        let msgs = messages(&validate_crd(&crd, None));
        assert!(
            msgs.contains(&"spec.versions[0].selectableFields: Invalid value: \"\": may only be set when `version.schema.openAPIV3Schema` is not included".to_string()),
            "{msgs:?}"
        );
    }
}
