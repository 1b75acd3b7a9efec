//! `x-kubernetes-list-type`: the uniqueness that `set` and `map` lists promise, checked as
//! apiextensions-apiserver's `listtype.ValidateListSetsAndMaps` does (`Duplicate value`), and
//! the list type at a path, for server-side apply's merge rules.

use serde_json::{Map, Value};

use super::node::{JsonType, Node};
use super::report::{self, child};
use crate::admission::FieldError;

pub use crate::managed_fields::ListType;

/// The list type a list's schema declares (atomic when it declares none).
pub(crate) fn of(n: &Node) -> ListType {
    match n.list_type.as_deref() {
        Some("set") => ListType::Set,
        Some("map") => ListType::Map(n.list_map_keys.clone()),
        _ => ListType::Atomic,
    }
}

/// The schema at a path of field names: lists on the way are walked through to their items,
/// names not among an object's properties go to its additionalProperties schema.
pub(crate) fn node_at<'a, S: AsRef<str>>(root: &'a Node, path: &[S]) -> Option<&'a Node> {
    let mut n = root;
    for name in path {
        while n.ty == Some(JsonType::Array) {
            n = n.items.as_deref()?;
        }
        n = match n.properties.get(name.as_ref()) {
            Some(p) => p,
            None => n.additional_schema()?,
        };
    }
    Some(n)
}

/// The list type of the list at `path`, or `None` when the schema has no list there.
pub(crate) fn at<S: AsRef<str>>(root: &Node, path: &[S]) -> Option<ListType> {
    node_at(root, path)
        .filter(|n| n.ty == Some(JsonType::Array) || n.items.is_some())
        .map(of)
}

pub(crate) fn validate(root: &Node, obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Value::Object(m) = obj
        && root.keyed_lists_below
    {
        object(root, m, "", &mut errs);
    }
    errs
}

fn object(s: &Node, m: &Map<String, Value>, path: &str, errs: &mut Vec<FieldError>) {
    if let Some(a) = s.additional_schema() {
        for (k, v) in m {
            value(a, v, &format!("{path}[{k}]"), errs);
        }
    }
    for (k, v) in m {
        if let Some(p) = s.properties.get(k) {
            value(p, v, &child(path, k), errs);
        }
    }
}

fn value(s: &Node, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
    if !s.keyed_lists_below {
        return;
    }
    match v {
        Value::Array(items) => array(s, items, path, errs),
        Value::Object(m) => object(s, m, path, errs),
        _ => {}
    }
}

fn array(s: &Node, items: &[Value], path: &str, errs: &mut Vec<FieldError>) {
    match s.list_type.as_deref() {
        Some("set") => {
            for i in repeated(items) {
                errs.push(report::duplicate(&format!("{path}[{i}]"), items[i].clone()));
            }
        }
        Some("map") => map_list(s, items, path, errs),
        _ => {}
    }
    if let Some(item) = s.items.as_deref() {
        for (i, v) in items.iter().enumerate() {
            value(item, v, &format!("{path}[{i}]"), errs);
        }
    }
}

/// The index of the second occurrence of each value that occurs more than once.
fn repeated(items: &[Value]) -> Vec<usize> {
    let mut out = Vec::new();
    for (i, v) in items.iter().enumerate() {
        let earlier = items[..i].iter().filter(|e| *e == v).count();
        if earlier == 1 {
            out.push(i);
        }
    }
    out
}

fn map_list(s: &Node, items: &[Value], path: &str, errs: &mut Vec<FieldError>) {
    for (i, x) in items.iter().enumerate() {
        if !x.is_null() && !x.is_object() {
            errs.push(report::invalid(
                &format!("{path}[{i}]"),
                x.clone(),
                "must be an object for an array of list-type map",
            ));
            return;
        }
    }
    if items.len() <= 1 {
        return;
    }
    // An item's key: the map of its key fields that are present (absent keys are unspecified),
    // in sorted order, as Go's JSON encoding prints a map.
    let mut key_names: Vec<&String> = s.list_map_keys.iter().collect();
    key_names.sort();
    let keys: Vec<Value> = items
        .iter()
        .map(|x| {
            let mut key = Map::new();
            if let Value::Object(o) = x {
                for k in &key_names {
                    if let Some(v) = o.get(*k) {
                        key.insert((*k).clone(), v.clone());
                    }
                }
            }
            Value::Object(key)
        })
        .collect();
    for i in repeated(&keys) {
        errs.push(report::duplicate(&format!("{path}[{i}]"), keys[i].clone()));
    }
}
