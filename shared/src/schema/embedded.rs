//! Embedded resources (`x-kubernetes-embedded-resource`), as apiextensions-apiserver's
//! `objectmeta.Validate` checks them: `apiVersion` and `kind` required and well-formed, and
//! `metadata` an ObjectMeta whose name is a valid path segment. The rest of ObjectMeta's rules
//! (labels, annotations, owner references) belong to the admission layer, which gets every
//! embedded metadata from [`metadata_of`].

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Map, Value};

use super::node::{Additional, Node};
use super::report::{self, child};
use crate::admission::FieldError;

const DNS1035_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

/// Validates the embedded resources in `obj` (at field path `path`, empty for a whole
/// resource, which is not itself checked as an embedded one unless its schema says so).
pub(crate) fn validate(root: &Node, obj: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    walk(root, obj, path, &mut |path, m| errs.extend(check(path, m)));
    errs
}

/// The `metadata` of every embedded resource, with its field path (`spec.template.metadata`).
pub(crate) fn metadata_of<'a>(root: &Node, obj: &'a Value) -> Vec<(String, &'a Value)> {
    let mut out = Vec::new();
    walk(root, obj, "", &mut |path, m| {
        if let Some(meta) = m.get("metadata") {
            out.push((child(path, "metadata"), meta));
        }
    });
    out
}

/// Calls `f` with each embedded resource's path and fields, in document order.
fn walk<'a>(s: &Node, x: &'a Value, path: &str, f: &mut dyn FnMut(&str, &'a Map<String, Value>)) {
    if !s.embedded_below {
        return;
    }
    match x {
        Value::Object(m) => {
            if s.embedded {
                f(path, m);
            }
            for (k, v) in m {
                if let Some(p) = s.properties.get(k) {
                    walk(p, v, &child(path, k), f);
                } else if let Some(Additional::Schema(a)) = &s.additional {
                    walk(a, v, &format!("{path}[{k}]"), f);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = s.items.as_deref() {
                for (i, v) in items.iter().enumerate() {
                    walk(item, v, &format!("{path}[{i}]"), f);
                }
            }
        }
        _ => {}
    }
}

fn check(path: &str, m: &Map<String, Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let api_version = child(path, "apiVersion");
    let kind = child(path, "kind");
    if !m.contains_key("apiVersion") {
        errs.push(report::required(&api_version, ""));
    }
    if !m.contains_key("kind") {
        errs.push(report::required(&kind, ""));
    }
    match m.get("apiVersion") {
        None => {}
        Some(Value::String(s)) if s.is_empty() => {
            errs.push(report::invalid(
                &api_version,
                Value::from(""),
                "must not be empty",
            ));
        }
        Some(Value::String(s)) if s != "/" && s.matches('/').count() > 1 => {
            let detail = format!("unexpected GroupVersion string: {s}");
            errs.push(report::invalid(
                &api_version,
                Value::from(s.as_str()),
                detail,
            ));
        }
        Some(Value::String(_)) => {}
        Some(other) => errs.push(report::invalid(
            &api_version,
            other.clone(),
            "must be a string",
        )),
    }
    match m.get("kind") {
        None => {}
        Some(Value::String(s)) if s.is_empty() => {
            errs.push(report::invalid(&kind, Value::from(""), "must not be empty"));
        }
        Some(Value::String(s)) => {
            let msgs = dns1035_label(&s.to_lowercase());
            if !msgs.is_empty() {
                let detail = format!(
                    "may have mixed case, but should otherwise match: {}",
                    msgs.join(",")
                );
                errs.push(report::invalid(&kind, Value::from(s.as_str()), detail));
            }
        }
        Some(other) => errs.push(report::invalid(&kind, other.clone(), "must be a string")),
    }
    if let Some(meta) = m.get("metadata") {
        errs.extend(check_metadata(&child(path, "metadata"), meta));
    }
    errs
}

fn check_metadata(path: &str, v: &Value) -> Vec<FieldError> {
    let meta: ObjectMeta = match serde_json::from_value(v.clone()) {
        Ok(m) => m,
        Err(e) => return vec![report::invalid(path, v.clone(), e.to_string())],
    };
    let mut errs = Vec::new();
    if let Some(name) = meta.name.as_deref().filter(|n| !n.is_empty()) {
        errs.extend(path_segment(&format!("{path}.name"), name, false));
    }
    if let Some(prefix) = meta.generate_name.as_deref().filter(|n| !n.is_empty()) {
        errs.extend(path_segment(&format!("{path}.generateName"), prefix, true));
    }
    errs
}

/// Upstream `ValidatePathSegmentName` (the name rule for custom resources' embedded objects).
fn path_segment(field: &str, name: &str, prefix: bool) -> Vec<FieldError> {
    let mut msgs = Vec::new();
    if !prefix && (name == "." || name == "..") {
        msgs.push(format!("may not be {}", quote_single(name)));
    }
    for bad in ["/", "%"] {
        if name.contains(bad) {
            msgs.push(format!("may not contain '{bad}'"));
        }
    }
    msgs.into_iter()
        .map(|m| report::invalid(field, Value::from(name), m))
        .collect()
}

fn quote_single(s: &str) -> String {
    format!("'{s}'")
}

/// Upstream `IsDNS1035Label`.
fn dns1035_label(s: &str) -> Vec<String> {
    let mut msgs = Vec::new();
    if s.len() > 63 {
        msgs.push("must be no more than 63 characters".to_string());
    }
    let ok = s.starts_with(|c: char| c.is_ascii_lowercase())
        && s.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !ok {
        msgs.push(DNS1035_MSG.to_string());
    }
    msgs
}
