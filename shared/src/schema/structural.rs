//! Whether a schema is structural, as apiextensions-apiserver's `ValidateStructural` decides:
//! every specified field has a type (or int-or-string / preserve-unknown-fields), arrays have
//! items, the root is an object whose metadata says nothing but name and generateName, and the
//! value validations inside allOf/anyOf/oneOf/not add no types, defaults, descriptions or
//! extensions and name only fields the structural part specifies. Errors come sorted by
//! message, as upstream sorts them.

use serde_json::Value;

use super::node::{Additional, JsonType, Node};
use super::report;
use crate::admission::FieldError;

/// A field path being built (upstream `field.Path` rendering: `a.b`, `a[k]`, `a[0]`).
#[derive(Debug, Clone)]
pub(crate) struct SchemaPath(String);

impl SchemaPath {
    pub(crate) fn new(root: &str) -> Self {
        SchemaPath(root.to_string())
    }

    pub(crate) fn child(&self, name: &str) -> Self {
        SchemaPath(report::child(&self.0, name))
    }

    pub(crate) fn key(&self, k: &str) -> Self {
        SchemaPath(format!("{}[{k}]", self.0))
    }

    pub(crate) fn index(&self, i: usize) -> Self {
        SchemaPath(format!("{}[{i}]", self.0))
    }

    pub(crate) fn prop(&self, k: &str) -> Self {
        self.child("properties").key(k)
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Item,
    Field,
}

/// `ValidateStructural` (invariants and completeness), sorted by message.
pub(crate) fn validate(root: &Node, path: &SchemaPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    invariants(root, Level::Root, path, &mut errs);
    completeness(root, root, path, path, &mut errs);
    errs.sort_by_cached_key(FieldError::message);
    errs
}

fn type_name(n: &Node) -> String {
    n.ty.map(|t| t.name().to_string())
        .or_else(|| n.declared.unknown_type.clone())
        .unwrap_or_default()
}

fn invariants(s: &Node, lvl: Level, path: &SchemaPath, errs: &mut Vec<FieldError>) {
    if s.ty == Some(JsonType::Array) && s.items.is_none() {
        errs.push(report::required(
            path.child("items").as_str(),
            "must be specified",
        ));
    }
    if let Some(items) = &s.items {
        invariants(items, Level::Item, &path.child("items"), errs);
    }
    for (k, p) in &s.properties {
        invariants(p, Level::Field, &path.prop(k), errs);
    }
    if let Some(a) = &s.additional {
        if lvl == Level::Root {
            errs.push(report::forbidden(
                path.child("additionalProperties").as_str(),
                "must not be used at the root",
            ));
        }
        if let Additional::Schema(a) = a {
            invariants(a, Level::Field, &path.child("additionalProperties"), errs);
        }
    }
    extensions(s, path, errs);
    let skip_any_of = int_or_string_any_of(&s.checks.any_of);
    let skip_first_all_of_any_of = s
        .checks
        .all_of
        .first()
        .is_some_and(|a| int_or_string_any_of(&a.checks.any_of));
    value_validation(s, skip_any_of, skip_first_all_of_any_of, path, errs);

    let ty = type_name(s);
    let check_metadata = lvl == Level::Root || s.embedded;
    if s.embedded && s.ty != Some(JsonType::Object) {
        let p = path.child("type");
        let detail = "must be object if x-kubernetes-embedded-resource is true";
        if ty.is_empty() {
            errs.push(report::required(p.as_str(), detail));
        } else {
            errs.push(report::invalid(
                p.as_str(),
                Value::from(ty.as_str()),
                detail,
            ));
        }
    } else if ty.is_empty() && !s.int_or_string && !s.preserve_unknown {
        let detail = match lvl {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errs.push(report::required(path.child("type").as_str(), detail));
    }
    if s.embedded && s.additional.is_some() {
        errs.push(report::forbidden(
            path.child("additionalProperties").as_str(),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if lvl == Level::Root && !ty.is_empty() && ty != "object" {
        errs.push(report::invalid(
            path.child("type").as_str(),
            Value::from(ty.as_str()),
            "must be object at the root",
        ));
    }
    if check_metadata {
        for name in ["kind", "apiVersion"] {
            if let Some(p) = s.properties.get(name)
                && p.ty != Some(JsonType::String)
            {
                errs.push(report::invalid(
                    path.prop(name).child("type").as_str(),
                    Value::from(type_name(p)),
                    "must be string",
                ));
            }
        }
    }
    if let Some(meta) = s.properties.get("metadata") {
        metadata_invariants(meta, check_metadata, lvl, &path.prop("metadata"), errs);
    }
    if s.embedded && !s.preserve_unknown && s.properties.is_empty() {
        errs.push(report::required(
            path.child("properties").as_str(),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

fn metadata_invariants(
    s: &Node,
    check_metadata: bool,
    lvl: Level,
    path: &SchemaPath,
    errs: &mut Vec<FieldError>,
) {
    if check_metadata && s.ty != Some(JsonType::Object) {
        errs.push(report::invalid(
            path.child("type").as_str(),
            Value::from(type_name(s)),
            "must be object",
        ));
    }
    if lvl != Level::Root {
        return;
    }
    // Only name and generateName may be specified; type and default are checked elsewhere.
    let only_names = !s.properties.is_empty()
        && s.properties.len() <= 2
        && s.properties
            .keys()
            .all(|k| k == "name" || k == "generateName");
    let d = &s.declared;
    let says_more = (!s.properties.is_empty() && !only_names)
        || s.items.is_some()
        || s.additional.is_some()
        || s.nullable
        || d.title
        || d.description
        || s.preserve_unknown
        || s.embedded
        || s.int_or_string
        || !s.list_map_keys.is_empty()
        || s.list_type.is_some()
        || s.map_type.is_some()
        || d.x_validations
        || d.format.is_some()
        || d.bad_pattern.is_some()
        || s.has_checks();
    if says_more {
        errs.push(report::forbidden(
            path.as_str(),
            "must not specify anything other than name and generateName, but metadata is implicitly specified",
        ));
    }
}

/// The int-or-string idiom `anyOf: [{type: integer}, {type: string}]`, allowed beside
/// `x-kubernetes-int-or-string`.
fn int_or_string_any_of(any_of: &[Node]) -> bool {
    let only_type = |n: &Node, t: JsonType| {
        n.ty == Some(t)
            && !n.has_checks()
            && n.properties.is_empty()
            && n.items.is_none()
            && n.additional.is_none()
            && n.default.is_none()
            && !n.nullable
            && !n.declared.title
            && !n.declared.description
            && n.declared.format.is_none()
            && !n.preserve_unknown
            && !n.embedded
            && !n.int_or_string
            && n.list_type.is_none()
            && n.map_type.is_none()
            && n.list_map_keys.is_empty()
            && !n.declared.x_validations
    };
    any_of.len() == 2
        && only_type(&any_of[0], JsonType::Integer)
        && only_type(&any_of[1], JsonType::String)
}

fn extensions(s: &Node, path: &SchemaPath, errs: &mut Vec<FieldError>) {
    if s.int_or_string && s.preserve_unknown {
        errs.push(report::invalid(
            path.child("x-kubernetes-preserve-unknown-fields").as_str(),
            Value::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if s.int_or_string && s.embedded {
        errs.push(report::invalid(
            path.child("x-kubernetes-embedded-resource").as_str(),
            Value::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
}

fn value_validation(
    s: &Node,
    skip_any_of: bool,
    skip_first_all_of_any_of: bool,
    path: &SchemaPath,
    errs: &mut Vec<FieldError>,
) {
    let c = &s.checks;
    if !skip_any_of {
        for (i, n) in c.any_of.iter().enumerate() {
            nested(n, false, &path.child("anyOf").index(i), errs);
        }
    }
    for (i, n) in c.all_of.iter().enumerate() {
        nested(
            n,
            skip_first_all_of_any_of && i == 0,
            &path.child("allOf").index(i),
            errs,
        );
    }
    for (i, n) in c.one_of.iter().enumerate() {
        nested(n, false, &path.child("oneOf").index(i), errs);
    }
    if let Some(n) = &c.not {
        nested(n, false, &path.child("not"), errs);
    }
    if let Some((p, e)) = &s.declared.bad_pattern {
        errs.push(report::invalid(
            path.child("pattern").as_str(),
            Value::from(p.as_str()),
            format!("must be a valid regular expression, but isn't: {e}"),
        ));
    }
}

/// A schema inside allOf/anyOf/oneOf/not: value validations only.
fn nested(v: &Node, skip_any_of: bool, path: &SchemaPath, errs: &mut Vec<FieldError>) {
    value_validation(v, skip_any_of, false, path, errs);
    if let Some(items) = &v.items {
        nested(items, false, &path.child("items"), errs);
    }
    for (k, p) in &v.properties {
        nested(p, false, &path.prop(k), errs);
    }
    let forbid = |errs: &mut Vec<FieldError>, name: &str, detail: &str| {
        errs.push(report::forbidden(path.child(name).as_str(), detail));
    };
    if v.ty.is_some() || v.declared.unknown_type.is_some() {
        forbid(errs, "type", "must be empty to be structural");
    }
    if v.additional.is_some() {
        forbid(
            errs,
            "additionalProperties",
            "must be undefined to be structural",
        );
    }
    if v.default.as_ref().is_some_and(|d| !d.is_null()) {
        forbid(errs, "default", "must be undefined to be structural");
    }
    if v.declared.title {
        forbid(errs, "title", "must be empty to be structural");
    }
    if v.declared.description {
        forbid(errs, "description", "must be empty to be structural");
    }
    if v.nullable {
        forbid(errs, "nullable", "must be false to be structural");
    }
    if v.preserve_unknown {
        forbid(
            errs,
            "x-kubernetes-preserve-unknown-fields",
            "must be false to be structural",
        );
    }
    if v.embedded {
        forbid(
            errs,
            "x-kubernetes-embedded-resource",
            "must be false to be structural",
        );
    }
    if v.int_or_string {
        forbid(
            errs,
            "x-kubernetes-int-or-string",
            "must be false to be structural",
        );
    }
    if !v.list_map_keys.is_empty() {
        forbid(
            errs,
            "x-kubernetes-list-map-keys",
            "must be empty to be structural",
        );
    }
    if v.list_type.is_some() {
        forbid(
            errs,
            "x-kubernetes-list-type",
            "must be undefined to be structural",
        );
    }
    if v.map_type.is_some() {
        forbid(
            errs,
            "x-kubernetes-map-type",
            "must be undefined to be structural",
        );
    }
    if v.declared.x_validations {
        forbid(
            errs,
            "x-kubernetes-validations",
            "must be empty to be structural",
        );
    }
    if v.properties.contains_key("metadata") {
        errs.push(report::forbidden(
            path.prop("metadata").as_str(),
            "must not be specified in a nested context",
        ));
    }
}

/// Upstream `validateStructuralCompleteness`: what the root's value validations name must be
/// specified by the structural part.
fn completeness(
    v: &Node,
    s: &Node,
    s_path: &SchemaPath,
    v_path: &SchemaPath,
    errs: &mut Vec<FieldError>,
) {
    let c = &v.checks;
    if let Some(n) = &c.not {
        nested_completeness(n, Some(s), s_path, &v_path.child("not"), errs);
    }
    for (name, list) in [
        ("allOf", &c.all_of),
        ("anyOf", &c.any_of),
        ("oneOf", &c.one_of),
    ] {
        for (i, n) in list.iter().enumerate() {
            nested_completeness(n, Some(s), s_path, &v_path.child(name).index(i), errs);
        }
    }
}

fn nested_completeness(
    v: &Node,
    s: Option<&Node>,
    s_path: &SchemaPath,
    v_path: &SchemaPath,
    errs: &mut Vec<FieldError>,
) {
    let Some(s) = s else {
        errs.push(report::required(
            s_path.as_str(),
            format!("because it is defined in {}", v_path.as_str()),
        ));
        return;
    };
    completeness(v, s, s_path, v_path, errs);
    if let Some(items) = &v.items {
        nested_completeness(
            items,
            s.items.as_deref(),
            &s_path.child("items"),
            &v_path.child("items"),
            errs,
        );
    }
    for (k, p) in &v.properties {
        match s.properties.get(k) {
            None => errs.push(report::required(
                s_path.prop(k).as_str(),
                format!("because it is defined in {}", v_path.prop(k).as_str()),
            )),
            Some(sp) => nested_completeness(p, Some(sp), &s_path.prop(k), &v_path.prop(k), errs),
        }
    }
}
