//! Rules shared by the workload controllers' specs: non-negative counts, int-or-percent
//! fields, the selector-versus-template-labels check, and templates that must restart Always.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

use super::field::{FieldError, Path};
use super::names::percent;
use super::pod_spec::validate_pod_template;
use super::selector::{self, is_convertible, labels_value, matches, validate_label_selector};

pub(crate) const NEGATIVE: &str = "must be greater than or equal to 0";

/// `Invalid value: -1: must be greater than or equal to 0` when negative.
pub(crate) fn nonnegative(value: Option<impl Into<i64>>, path: &Path) -> Option<FieldError> {
    value
        .map(Into::into)
        .filter(|v| *v < 0)
        .map(|v| FieldError::invalid(path, v, NEGATIVE))
}

/// An int-or-string as its JSON value (`0` or `"25%"`).
pub(crate) fn int_or_string_value(v: &IntOrString) -> Value {
    match v {
        IntOrString::Int(i) => Value::from(*i),
        IntOrString::String(s) => Value::from(s.as_str()),
    }
}

/// Upstream `ValidatePositiveIntOrPercent`: a non-negative int or a `N%` string.
pub(crate) fn int_or_percent(v: &IntOrString, path: &Path) -> Vec<FieldError> {
    match v {
        IntOrString::String(s) => percent(s)
            .into_iter()
            .map(|m| FieldError::invalid(path, s.as_str(), m))
            .collect(),
        IntOrString::Int(i) => nonnegative(Some(*i), path).into_iter().collect(),
    }
}

/// The number in an int-or-percent (`25%` → 25); malformed percents count as 0.
pub(crate) fn int_or_percent_number(v: &IntOrString) -> i64 {
    match v {
        IntOrString::Int(i) => (*i).into(),
        IntOrString::String(s) => s
            .strip_suffix('%')
            .and_then(|n| n.parse().ok())
            .unwrap_or(0),
    }
}

/// Upstream `IsNotMoreThan100Percent`.
pub(crate) fn at_most_100_percent(v: &IntOrString, path: &Path) -> Option<FieldError> {
    match v {
        IntOrString::String(s) if int_or_percent_number(v) > 100 => Some(FieldError::invalid(
            path,
            s.as_str(),
            "must not be greater than 100%",
        )),
        _ => None,
    }
}

/// apps/v1 selectors: required (absent in the body), valid, non-empty, and selecting the
/// template's labels. `what` names the kind in the empty-selector message.
pub(crate) fn validate_required_selector(
    sel: &LabelSelector,
    present: bool,
    required: bool,
    template: Option<&PodTemplateSpec>,
    what: &str,
    spec_path: &Path,
) -> Vec<FieldError> {
    let sp = spec_path.child("selector");
    let mut errs = Vec::new();
    if !present {
        if required {
            errs.push(FieldError::required(&sp, ""));
        }
    } else {
        errs.extend(validate_label_selector(sel, &sp));
        if selector::is_empty(sel) {
            errs.push(FieldError::invalid(
                &sp,
                selector::to_value(sel),
                format!("empty selector is invalid for {what}"),
            ));
        }
    }
    if !present {
        // A missing selector selects nothing, so no template can match it.
        let labels = template_labels(template);
        errs.push(mismatch(labels, &spec_path.child("template")));
    } else if !is_convertible(sel) {
        errs.push(FieldError::invalid(
            &sp,
            selector::to_value(sel),
            "invalid label selector",
        ));
    } else if !selector::is_empty(sel) {
        let labels = template_labels(template);
        if !matches(sel, labels.unwrap_or(&BTreeMap::new())) {
            errs.push(mismatch(labels, &spec_path.child("template")));
        }
    }
    errs
}

/// The selector and template of a controller that makes pods from one (Deployment,
/// ReplicaSet, DaemonSet): the selector as [`validate_required_selector`] checks it (`raw` says
/// whether the body had one), then the template as `template_kind`'s pods'.
pub(crate) fn validate_selector_and_template(
    sel: &LabelSelector,
    raw: &Value,
    required: bool,
    template: Option<&PodTemplateSpec>,
    what: &str,
    template_kind: &str,
    spec_path: &Path,
) -> Vec<FieldError> {
    let has_selector = present(raw, "/spec/selector");
    let mut errs =
        validate_required_selector(sel, has_selector, required, template, what, spec_path);
    errs.extend(validate_controller_template(
        template,
        template_kind,
        &spec_path.child("template"),
    ));
    errs
}

/// apps/v1's update rule: a controller's selector is immutable. `old` is the stored object's
/// selector (`Some(None)`: it had no spec); `None` on create.
pub(crate) fn immutable_selector(
    sel: &LabelSelector,
    old: Option<Option<&LabelSelector>>,
    spec_path: &Path,
) -> Option<FieldError> {
    old.filter(|o| *o != Some(sel))
        .map(|_| FieldError::immutable(&spec_path.child("selector"), selector::to_value(sel)))
}

pub(crate) fn template_labels(t: Option<&PodTemplateSpec>) -> Option<&BTreeMap<String, String>> {
    t.and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.as_ref())
}

/// The upstream selector/template mismatch error.
pub(crate) fn mismatch(
    labels: Option<&BTreeMap<String, String>>,
    template_path: &Path,
) -> FieldError {
    FieldError::invalid(
        &template_path.child("metadata").child("labels"),
        labels_value(labels),
        "`selector` does not match template `labels`",
    )
}

/// A controller's pod template: valid, restarting Always, and without activeDeadlineSeconds.
pub(crate) fn validate_controller_template(
    t: Option<&PodTemplateSpec>,
    kind: &str,
    template_path: &Path,
) -> Vec<FieldError> {
    let Some(t) = t else {
        return vec![FieldError::required(template_path, "")];
    };
    let mut errs = validate_pod_template(t, template_path);
    errs.extend(validate_template_policies(t, kind, template_path));
    errs
}

/// The template rules every replicating controller has: restartPolicy Always and no
/// activeDeadlineSeconds. (StatefulSets stop here: upstream leaves their pod spec unvalidated
/// because volume mounts may name volumeClaimTemplates.)
pub(crate) fn validate_template_policies(
    t: &PodTemplateSpec,
    kind: &str,
    template_path: &Path,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = t.spec.as_ref();
    let rp = spec
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or_default();
    if rp != "Always" {
        errs.push(FieldError::not_supported(
            &template_path.child("spec").child("restartPolicy"),
            rp,
            &["Always"],
        ));
    }
    if spec.and_then(|s| s.active_deadline_seconds).is_some() {
        let p = template_path.child("spec").child("activeDeadlineSeconds");
        errs.push(FieldError::forbidden(
            &p,
            format!("activeDeadlineSeconds in {kind} is not Supported"),
        ));
    }
    errs
}

/// Whether the raw request body has a non-null value at the JSON pointer.
pub(crate) fn present(raw: &Value, pointer: &str) -> bool {
    raw.pointer(pointer).is_some_and(|v| !v.is_null())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn int_or_percent_accepts_counts_and_percents() {
        let p = Path::new("x");
        assert!(int_or_percent(&IntOrString::Int(0), &p).is_empty());
        assert!(int_or_percent(&IntOrString::String("30%".into()), &p).is_empty());
        assert_eq!(
            int_or_percent(&IntOrString::Int(-1), &p)[0].message(),
            "x: Invalid value: -1: must be greater than or equal to 0"
        );
        assert_eq!(
            int_or_percent(&IntOrString::String("30".into()), &p).len(),
            1
        );
        assert_eq!(
            at_most_100_percent(&IntOrString::String("150%".into()), &p).map(|e| e.message()),
            Some("x: Invalid value: \"150%\": must not be greater than 100%".to_string())
        );
        assert_eq!(
            int_or_percent_number(&IntOrString::String("25%".into())),
            25
        );
    }

    #[test]
    fn selectors_must_select_the_template() {
        let sel: LabelSelector =
            serde_json::from_value(json!({"matchLabels": {"app": "a"}})).unwrap();
        let t: PodTemplateSpec =
            serde_json::from_value(json!({"metadata": {"labels": {"app": "b"}}})).unwrap();
        let errs = validate_required_selector(
            &sel,
            true,
            true,
            Some(&t),
            "deployment",
            &Path::new("spec"),
        );
        assert_eq!(
            errs[0].message(),
            "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"b\"}: `selector` does not match template `labels`"
        );
    }

    #[test]
    fn missing_and_empty_selectors_are_reported() {
        let t: PodTemplateSpec =
            serde_json::from_value(json!({"metadata": {"labels": {"app": "b"}}})).unwrap();
        let msgs = |present: bool| -> Vec<String> {
            let sel = LabelSelector::default();
            let errs = validate_required_selector(
                &sel,
                present,
                true,
                Some(&t),
                "deployment",
                &Path::new("spec"),
            );
            errs.iter().map(FieldError::message).collect()
        };
        assert_eq!(msgs(false)[0], "spec.selector: Required value");
        assert_eq!(
            msgs(true),
            vec![
                "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment"
            ]
        );
    }
}
