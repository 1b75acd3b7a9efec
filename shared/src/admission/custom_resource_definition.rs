//! CustomResourceDefinition admission (apiextensions.k8s.io/v1): upstream's
//! `SetDefaults_CustomResourceDefinitionSpec` and the parts of
//! `ValidateCustomResourceDefinition` / `…Update` that decide what can be served: names, group,
//! scope, versions (exactly one storage version), structural schemas, CEL rules that compile,
//! the scale subresource's paths and printer columns' JSONPaths.

use std::collections::HashSet;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition,
};
use serde_json::Value;

use super::Operation;
use super::field::{FieldError, Path};
use super::names::{dns1035_label, dns1123_label, dns1123_subdomain, each_invalid};

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
    errs.extend(validate_versions(crd, &sp.child("versions")));
    if let Some(conv) = &spec.conversion {
        let p = sp.child("conversion").child("strategy");
        match conv.strategy.as_str() {
            "None" => {}
            "Webhook" => errs.push(FieldError::forbidden(
                &p,
                "conversion webhooks are not supported by this server (only \"None\")",
            )),
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

fn validate_versions(crd: &CustomResourceDefinition, p: &Path) -> Vec<FieldError> {
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
