//! Label selectors in admission: syntax checks for `LabelSelector`s and the "does the selector
//! select the template's labels" test workload kinds need.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use super::field::{FieldError, Path};
use super::meta::validate_labels;
use super::names::{each_invalid, label_value, qualified_name};

/// Upstream `ValidateLabelSelector` (label values in selectors must be valid label values).
pub(crate) fn validate_label_selector(sel: &LabelSelector, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(labels) = &sel.match_labels {
        errs.extend(validate_labels(labels, &path.child("matchLabels")));
    }
    for (i, req) in sel.match_expressions.iter().flatten().enumerate() {
        errs.extend(validate_requirement(
            req,
            &path.child("matchExpressions").index(i),
        ));
    }
    errs
}

fn validate_requirement(req: &LabelSelectorRequirement, path: &Path) -> Vec<FieldError> {
    let values = req.values.as_deref().unwrap_or_default();
    let mut errs = validate_operator(&req.operator, values.len(), &req.key, path, false);
    for (i, v) in values.iter().enumerate() {
        errs.extend(each_invalid(
            &path.child("values").index(i),
            v,
            label_value(v),
        ));
    }
    errs
}

/// A selector requirement's operator against its number of `values`, then its `key`: the checks
/// upstream's `ValidateLabelSelectorRequirement` and `ValidateNodeSelectorRequirement` share.
/// Node requirements also know `Gt` and `Lt` (`numeric`), with a single value.
pub(crate) fn validate_operator(
    operator: &str,
    values: usize,
    key: &str,
    path: &Path,
    numeric: bool,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match operator {
        "In" | "NotIn" if values == 0 => errs.push(FieldError::required(
            &path.child("values"),
            "must be specified when `operator` is 'In' or 'NotIn'",
        )),
        "Exists" | "DoesNotExist" if values > 0 => errs.push(FieldError::forbidden(
            &path.child("values"),
            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        )),
        "Gt" | "Lt" if numeric && values != 1 => errs.push(FieldError::required(
            &path.child("values"),
            "must be specified single value when `operator` is 'Lt' or 'Gt'",
        )),
        "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
        "Gt" | "Lt" if numeric => {}
        other => errs.push(FieldError::invalid(
            &path.child("operator"),
            other,
            "not a valid selector operator",
        )),
    }
    errs.extend(each_invalid(&path.child("key"), key, qualified_name(key)));
    errs
}

/// Whether a selector converts to a usable selector at all (upstream `LabelSelectorAsSelector`).
pub(crate) fn is_convertible(sel: &LabelSelector) -> bool {
    sel.match_expressions.iter().flatten().all(|r| {
        let n = r.values.as_ref().map_or(0, Vec::len);
        match r.operator.as_str() {
            "In" | "NotIn" => n > 0,
            "Exists" | "DoesNotExist" => n == 0,
            _ => false,
        }
    })
}

/// Whether the selector has no terms (and so selects everything).
pub(crate) fn is_empty(sel: &LabelSelector) -> bool {
    sel.match_labels.as_ref().is_none_or(BTreeMap::is_empty)
        && sel.match_expressions.as_ref().is_none_or(Vec::is_empty)
}

/// Whether `labels` satisfy every term of the selector.
pub(crate) fn matches(sel: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let labels_ok = sel
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let exprs_ok = sel.match_expressions.iter().flatten().all(|r| {
        let values = r.values.as_deref().unwrap_or_default();
        let got = labels.get(&r.key);
        match r.operator.as_str() {
            "In" => got.is_some_and(|g| values.contains(g)),
            "NotIn" => got.is_none_or(|g| !values.contains(g)),
            "Exists" => got.is_some(),
            "DoesNotExist" => got.is_none(),
            _ => false,
        }
    });
    labels_ok && exprs_ok
}

/// The selector as JSON, for error values.
pub(crate) fn to_value(sel: &LabelSelector) -> serde_json::Value {
    serde_json::to_value(sel).unwrap_or(serde_json::Value::Null)
}

/// The labels as JSON (`null` when absent, which renders as a nil Go map).
pub(crate) fn labels_value(labels: Option<&BTreeMap<String, String>>) -> serde_json::Value {
    labels.map_or(serde_json::Value::Null, |l| {
        serde_json::to_value(l).unwrap_or_default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selector::label_set as labels;

    fn sel(json: serde_json::Value) -> LabelSelector {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn selectors_match_by_labels_and_expressions() {
        let s = sel(serde_json::json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["a", "b"]},
                {"key": "canary", "operator": "DoesNotExist"},
                {"key": "env", "operator": "NotIn", "values": ["prod"]},
            ]
        }));
        let cases = [
            (labels(&[("app", "web"), ("tier", "a")]), true),
            (labels(&[("app", "web"), ("tier", "c")]), false),
            (
                labels(&[("app", "web"), ("tier", "a"), ("canary", "1")]),
                false,
            ),
            (
                labels(&[("app", "web"), ("tier", "b"), ("env", "prod")]),
                false,
            ),
            (labels(&[("app", "db"), ("tier", "a")]), false),
        ];
        for (l, want) in cases {
            assert_eq!(matches(&s, &l), want, "{l:?}");
        }
    }

    #[test]
    fn bad_requirements_are_reported_with_upstream_text() {
        let s = sel(serde_json::json!({"matchExpressions": [
            {"key": "a", "operator": "In"},
            {"key": "b", "operator": "Exists", "values": ["x"]},
            {"key": "c", "operator": "Like", "values": ["x"]},
        ]}));
        let msgs: Vec<String> = validate_label_selector(&s, &Path::new("spec").child("selector"))
            .iter()
            .map(|e| e.message())
            .collect();
        assert_eq!(
            msgs,
            vec![
                "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
                "spec.selector.matchExpressions[1].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                "spec.selector.matchExpressions[2].operator: Invalid value: \"Like\": not a valid selector operator",
            ]
        );
        assert!(!is_convertible(&s));
    }

    #[test]
    fn empty_selectors_are_empty() {
        assert!(is_empty(&LabelSelector::default()));
        assert!(is_empty(&sel(serde_json::json!({"matchLabels": {}}))));
        assert!(!is_empty(&sel(
            serde_json::json!({"matchLabels": {"a": "b"}})
        )));
    }
}
