//! Defaulting as apiextensions-apiserver's structural defaulting: a property's `default` is set
//! where the property is absent, or null and not nullable; additionalProperties and array items
//! that are non-nullable nulls take their schema's default. Only objects that exist are walked,
//! so the defaults of an absent object's properties are not created.

use serde_json::Value;

use super::node::{Additional, Node};
use super::structural::SchemaPath;
use super::{embedded, prune, report, values};
use crate::admission::FieldError;

pub(crate) fn apply(x: &mut Value, s: &Node) {
    match x {
        Value::Object(m) => {
            for (k, prop) in &s.properties {
                let Some(d) = &prop.default else {
                    continue;
                };
                match m.get_mut(k) {
                    None => {
                        m.insert(k.clone(), d.clone());
                    }
                    Some(v) if v.is_null() && !prop.nullable => *v = d.clone(),
                    Some(_) => {}
                }
            }
            let additional = match &s.additional {
                Some(Additional::Schema(a)) => Some(&**a),
                _ => None,
            };
            for (k, v) in m.iter_mut() {
                if let Some(prop) = s.properties.get(k) {
                    apply(v, prop);
                } else if let Some(a) = additional {
                    if v.is_null() && !a.nullable {
                        *v = a.default.clone().unwrap_or(Value::Null);
                    }
                    apply(v, a);
                }
            }
        }
        Value::Array(items) => {
            let Some(item) = s.items.as_deref() else {
                return;
            };
            for v in items.iter_mut() {
                if v.is_null() && !item.nullable {
                    *v = item.default.clone().unwrap_or(Value::Null);
                }
                apply(v, item);
            }
        }
        _ => {}
    }
}

/// Upstream `ValidateDefaults` (without the CEL rules): each `default` of the structural part
/// (through properties and items) must survive pruning, make valid embedded resources, and
/// validate against its own schema; errors are under `…default`. Defaults inside resource
/// metadata are refused by the CRD rules instead.
pub(crate) fn validate_defaults(root: &Node, path: &SchemaPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    walk_defaults(root, path, true, false, &mut errs);
    errs
}

fn walk_defaults(
    s: &Node,
    path: &SchemaPath,
    root: bool,
    inside_meta: bool,
    errs: &mut Vec<FieldError>,
) {
    let resource = root || s.embedded;
    let inside_meta = inside_meta && !s.embedded;
    if let Some(d) = &s.default
        && !inside_meta
    {
        let at = path.child("default");
        let mut pruned = d.clone();
        let _ = prune::prune_fields(s, &mut pruned, resource);
        if &pruned != d {
            errs.push(report::invalid(
                at.as_str(),
                d.clone(),
                "must not have unknown fields",
            ));
        }
        let embedded = embedded::validate(s, d, at.as_str());
        if embedded.is_empty() {
            errs.extend(values::validate(s, d, Some(at.as_str())));
        } else {
            errs.extend(embedded);
        }
    }
    if let Some(items) = &s.items {
        walk_defaults(items, &path.child("items"), false, inside_meta, errs);
    }
    for (k, p) in &s.properties {
        let meta = resource && ["metadata", "apiVersion", "kind"].contains(&k.as_str());
        walk_defaults(p, &path.prop(k), false, inside_meta || meta, errs);
    }
}
