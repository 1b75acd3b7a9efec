//! Custom resource admission, as apiextensions-apiserver's decoder and strategy do it: unknown
//! fields pruned (and reported, for `fieldValidation`), the schema's defaults applied, then the
//! metadata, the structural schema's value validations and the `x-kubernetes-validations` CEL
//! rules checked.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use std::collections::BTreeMap;

use super::field::Path;
use super::{AdmissionError, Operation, meta};
use crate::custom::Served;

/// Admits `obj` (a whole custom resource, its type already checked) in place: pruned,
/// defaulted and validated. Returns the pruned fields as `fieldValidation=Warn` words them
/// (`unknown field "spec.foo"`); with `strict` (`fieldValidation=Strict`) they are refused, as
/// upstream's decoder refuses them, before any validation. On failure `obj` may have been
/// pruned and defaulted but nothing else.
pub fn admit_custom(
    served: &Served,
    op: Operation,
    obj: &mut Value,
    old: Option<&Value>,
    strict: bool,
) -> Result<Vec<String>, AdmissionError> {
    let unknown = match &served.structural {
        Some(s) => {
            let unknown = unknown_field_messages(&s.prune(obj));
            if strict && !unknown.is_empty() {
                return Err(AdmissionError::Decode(format!(
                    "strict decoding error: {}",
                    unknown.join(", ")
                )));
            }
            s.apply_defaults(obj);
            unknown
        }
        None => Vec::new(),
    };
    let meta = decode_meta(obj)?;
    let old_meta = match (op, old) {
        (Operation::Update, Some(o)) => Some(decode_meta(o)?),
        _ => None,
    };
    let mut errs = match &old_meta {
        None => meta::validate_object_meta(&meta, served.rt.kind, served.rt.namespaced),
        Some(o) => meta::validate_object_meta_update(&meta, o),
    };
    let old = old.filter(|_| op == Operation::Update);
    if let Some(s) = &served.structural {
        // Embedded resources' metadata: their labels and annotations, as ObjectMeta's.
        for (path, embedded) in s.embedded_metadata(obj) {
            errs.extend(embedded_meta_errors(&path, embedded));
        }
        // On an update, errors in values the update leaves as they were are not reported
        // (upstream's validation ratcheting).
        errs.extend(match old {
            Some(o) => s.validate_update(obj, o),
            None => s.validate(obj),
        });
    }
    // CEL rules run unless an error means a rule could see a value its schema does not
    // promise (upstream's `hasBlockingErr`): then one error says they were not checked.
    if let Some(schema) = served.schema() {
        match crate::schema::rules_blocked_by(&errs) {
            Some(blocked) => errs.push(blocked),
            None => errs.extend(crate::cel::rules::check(schema, obj, old)),
        }
    }
    if !errs.is_empty() {
        return Err(AdmissionError::Invalid(errs));
    }
    Ok(unknown)
}

/// Upstream's label and annotation rules for an embedded resource's `metadata` at `path`
/// (`spec.template.metadata`); what does not decode as string maps is the schema's to report.
fn embedded_meta_errors(path: &str, metadata: &Value) -> Vec<super::FieldError> {
    let map = |key: &str| -> Option<BTreeMap<String, String>> {
        serde_json::from_value(metadata.get(key)?.clone()).ok()
    };
    let at = Path::new(path);
    let mut errs = Vec::new();
    if let Some(labels) = map("labels") {
        errs.extend(meta::validate_labels(&labels, &at.child("labels")));
    }
    if let Some(annotations) = map("annotations") {
        errs.extend(meta::validate_annotations(
            &annotations,
            &at.child("annotations"),
        ));
    }
    errs
}

fn decode_meta(obj: &Value) -> Result<ObjectMeta, AdmissionError> {
    serde_json::from_value(obj.get("metadata").cloned().unwrap_or(Value::Null))
        .map_err(|e| AdmissionError::Decode(format!("metadata: {e}")))
}

/// The paths of pruned fields as `fieldValidation` reports them: `unknown field "spec.foo"`.
fn unknown_field_messages(paths: &[String]) -> Vec<String> {
    paths
        .iter()
        .map(|p| format!("unknown field {}", super::field::quote(p)))
        .collect()
}
