//! The CRD's own rules for its `openAPIV3Schema` besides structural-ness, as
//! apiextensions-apiserver's `ValidateCustomResourceDefinitionOpenAPISchema` states them:
//! unsupported keywords, `uniqueItems`, properties beside additionalProperties, defaults in
//! resource metadata, and the `x-kubernetes-list-type` / `-map-type` / `-list-map-keys` rules.
//! (`x-kubernetes-validations` are the CEL rules' business.)

use serde_json::Value;

use super::node::{Additional, JsonType, Node};
use super::report;
use super::structural::SchemaPath;
use crate::admission::FieldError;

const META_FIELDS: [&str; 3] = ["metadata", "kind", "apiVersion"];

/// What the enclosing schema allows here.
#[derive(Debug, Clone, Default)]
struct Context {
    /// Why a `default` is not allowed here, if it is not.
    no_defaults: Option<String>,
    inside_resource_meta: bool,
}

pub(crate) fn validate(root: &Node, path: &SchemaPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    node(root, path, &Context::default(), true, &mut errs);
    errs
}

fn type_name(n: &Node) -> String {
    n.ty.map(|t| t.name().to_string())
        .or_else(|| n.declared.unknown_type.clone())
        .unwrap_or_default()
}

fn keyword_checks(s: &Node, path: &SchemaPath, ctx: &Context, errs: &mut Vec<FieldError>) {
    let d = &s.declared;
    if let Some(t) = &d.unknown_type {
        errs.push(report::not_supported(
            path.child("type").as_str(),
            Value::from(t.as_str()),
            &["array", "boolean", "integer", "number", "object", "string"].map(String::from),
        ));
    }
    if s.ty == Some(JsonType::Null) {
        errs.push(report::not_supported(
            path.child("type").as_str(),
            Value::from("null"),
            &["array", "boolean", "integer", "number", "object", "string"].map(String::from),
        ));
    }
    if s.default.is_some()
        && let Some(reason) = &ctx.no_defaults
    {
        errs.push(report::forbidden(
            path.child("default").as_str(),
            format!("must not be set {reason}"),
        ));
    }
    for keyword in &d.unsupported {
        let detail = match *keyword {
            "$schema" => continue,
            k => format!("{k} is not supported"),
        };
        errs.push(report::forbidden(path.child(keyword).as_str(), detail));
    }
    if s.ty == Some(JsonType::Null) {
        errs.push(report::forbidden(
            path.child("type").as_str(),
            "type cannot be set to null, use nullable as an alternative",
        ));
    }
    if d.items_array {
        errs.push(report::forbidden(
            path.child("items").as_str(),
            "items must be a schema object and not an array",
        ));
    }
    if ctx.inside_resource_meta && s.embedded {
        errs.push(report::forbidden(
            path.child("x-kubernetes-embedded-resource").as_str(),
            "must not be used inside of resource meta",
        ));
    }
}

fn node(s: &Node, path: &SchemaPath, ctx: &Context, is_root: bool, errs: &mut Vec<FieldError>) {
    keyword_checks(s, path, ctx, errs);
    if s.checks.unique_items {
        errs.push(report::forbidden(
            path.child("uniqueItems").as_str(),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    if let Some(a) = &s.additional {
        let exclusive = match a {
            Additional::Allows(b) => !b,
            Additional::Schema(_) => true,
        };
        if !s.properties.is_empty() && exclusive {
            errs.push(report::forbidden(
                path.child("additionalProperties").as_str(),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        if let Additional::Schema(a) = a {
            let mut sub = ctx.clone();
            if ctx.inside_resource_meta {
                sub.no_defaults =
                    Some("inside additionalProperties applying to object metadata".to_string());
            }
            node(a, &path.child("additionalProperties"), &sub, false, errs);
        }
    }
    for (k, p) in &s.properties {
        let mut sub = ctx.clone();
        if (is_root || s.embedded) && META_FIELDS.contains(&k.as_str()) {
            sub.inside_resource_meta = true;
            if is_root {
                sub.no_defaults = Some(format!("in top-level {k}"));
            }
        }
        node(p, &path.prop(k), &sub, false, errs);
    }
    if let Some(n) = &s.checks.not {
        node(n, &path.child("not"), ctx, false, errs);
    }
    for (name, list) in [
        ("allOf", &s.checks.all_of),
        ("oneOf", &s.checks.one_of),
        ("anyOf", &s.checks.any_of),
    ] {
        for (i, n) in list.iter().enumerate() {
            node(n, &path.child(name).index(i), ctx, false, errs);
        }
    }
    if let Some(items) = &s.items {
        node(items, &path.child("items"), ctx, false, errs);
    }
    if s.declared.preserve_unknown_fields == Some(false) {
        errs.push(report::invalid(
            path.child("x-kubernetes-preserve-unknown-fields").as_str(),
            Value::Bool(false),
            "must be true or undefined",
        ));
    }
    map_and_list_types(s, path, errs);
}

fn map_and_list_types(s: &Node, path: &SchemaPath, errs: &mut Vec<FieldError>) {
    let ty = type_name(s);
    let type_path = path.child("type");
    let need_type = |errs: &mut Vec<FieldError>, want: &str, detail: &str| {
        if ty.is_empty() {
            errs.push(report::required(type_path.as_str(), detail));
        } else if ty != want {
            errs.push(report::invalid(
                type_path.as_str(),
                Value::from(ty.as_str()),
                detail,
            ));
        }
    };
    if s.map_type.is_some() {
        need_type(
            errs,
            "object",
            "must be object if x-kubernetes-map-type is specified",
        );
    }
    if let Some(mt) = &s.map_type
        && mt != "atomic"
        && mt != "granular"
    {
        errs.push(report::not_supported(
            path.child("x-kubernetes-map-type").as_str(),
            Value::from(mt.as_str()),
            &["atomic".into(), "granular".into()],
        ));
    }
    let list_type = s.list_type.as_deref();
    if list_type.is_some() && ty != "array" {
        need_type(
            errs,
            "array",
            "must be array if x-kubernetes-list-type is specified",
        );
    } else if list_type == Some("set")
        && let Some(items) = &s.items
    {
        match items.ty {
            Some(JsonType::Array) if items.list_type.as_deref().is_some_and(|l| l != "atomic") => {
                errs.push(report::invalid(
                    path.child("items").child("x-kubernetes-list-type").as_str(),
                    Value::from(items.list_type.clone()),
                    "must be atomic as item of a list with x-kubernetes-list-type=set",
                ));
            }
            Some(JsonType::Object) if items.map_type.as_deref() != Some("atomic") => {
                errs.push(report::invalid(
                    path.child("items").child("x-kubernetes-map-type").as_str(),
                    Value::from(items.list_type.clone()),
                    "must be atomic as item of a list with x-kubernetes-list-type=set",
                ));
            }
            _ => {}
        }
    }
    if let Some(lt) = list_type
        && !["atomic", "set", "map"].contains(&lt)
    {
        errs.push(report::not_supported(
            path.child("x-kubernetes-list-type").as_str(),
            Value::from(lt),
            &["atomic".into(), "set".into(), "map".into()],
        ));
    }
    if !s.list_map_keys.is_empty() {
        let p = path.child("x-kubernetes-list-type");
        let detail = "must be map if x-kubernetes-list-map-keys is non-empty";
        match list_type {
            None => errs.push(report::required(p.as_str(), detail)),
            Some("map") => {}
            Some(lt) => errs.push(report::invalid(p.as_str(), Value::from(lt), detail)),
        }
    }
    if list_type == Some("map") {
        map_list(s, path, errs);
    }
    if matches!(list_type, Some("set" | "map"))
        && let Some(items) = &s.items
    {
        map_list_keys(s, items, path, errs);
    }
}

fn map_list(s: &Node, path: &SchemaPath, errs: &mut Vec<FieldError>) {
    let keys_path = path.child("x-kubernetes-list-map-keys");
    let keys_value = || Value::from(s.list_map_keys.clone());
    if s.list_map_keys.is_empty() {
        errs.push(report::required(
            keys_path.as_str(),
            "must not be empty if x-kubernetes-list-type is map",
        ));
    }
    let Some(items) = &s.items else {
        if !s.declared.items_array {
            errs.push(report::required(
                path.child("items").as_str(),
                "must have a schema if x-kubernetes-list-type is map",
            ));
        }
        return;
    };
    if items.ty != Some(JsonType::Object) {
        errs.push(report::invalid(
            path.child("items").child("type").as_str(),
            Value::from(type_name(items)),
            "must be object if parent array's x-kubernetes-list-type is map",
        ));
        return;
    }
    let mut seen: Vec<&str> = Vec::new();
    for k in &s.list_map_keys {
        match items.properties.get(k) {
            Some(p) if matches!(p.ty, Some(JsonType::Array | JsonType::Object)) => {
                errs.push(report::invalid(
                    path.child("items").prop(k).child("type").as_str(),
                    Value::from("object"),
                    "must be a scalar type if parent array's x-kubernetes-list-type is map",
                ));
            }
            Some(_) => {}
            None => errs.push(report::invalid(
                keys_path.as_str(),
                keys_value(),
                "entries must all be names of item properties",
            )),
        }
        if seen.contains(&k.as_str()) {
            errs.push(report::invalid(
                keys_path.as_str(),
                keys_value(),
                "must not contain duplicate entries",
            ));
        }
        seen.push(k);
    }
}

/// Upstream `validateMapListKeysMapSet`: set and map items are not nullable, map keys are
/// required or defaulted and not nullable.
fn map_list_keys(s: &Node, items: &Node, path: &SchemaPath, errs: &mut Vec<FieldError>) {
    let lt = s.list_type.as_deref().unwrap_or_default();
    if items.nullable {
        errs.push(report::forbidden(
            path.child("items").child("nullable").as_str(),
            format!("cannot be nullable when x-kubernetes-list-type is {lt}"),
        ));
    }
    if lt != "map" {
        return;
    }
    for k in &s.list_map_keys {
        let Some(p) = items.properties.get(k) else {
            continue;
        };
        let kp = path.child("items").prop(k);
        if !items.checks.required.contains(k) && p.default.is_none() {
            errs.push(report::required(
                kp.child("default").as_str(),
                "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
            ));
        }
        if p.nullable {
            errs.push(report::forbidden(
                kp.child("nullable").as_str(),
                "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
            ));
        }
    }
}
