//! ValidatingWebhookConfiguration and MutatingWebhookConfiguration admission
//! (admissionregistration.k8s.io/v1): upstream's v1 defaults (failure policy `Fail`, match
//! policy `Equivalent`, empty selectors, timeout 10 s, rule scope `*`, service port 443,
//! reinvocation `Never`) and `ValidateValidatingWebhookConfiguration` /
//! `ValidateMutatingWebhookConfiguration`: names, rules, enumerated fields, `sideEffects` and
//! `admissionReviewVersions` required, exactly one of `url` and `service`, match conditions
//! that compile.

use std::collections::BTreeSet;

use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MutatingWebhook, MutatingWebhookConfiguration, NamedRuleWithOperations,
    RuleWithOperations, ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;

use super::admission_policy::validate_rule;
use super::admission_rules::choice;
use super::field::{FieldError, Path};
use super::names::{dns1123_subdomain, each_invalid, qualified_name};
use super::selector::validate_label_selector;
use crate::cel::Program;

const FAILURE_POLICIES: &[&str] = &["Fail", "Ignore"];
const MATCH_POLICIES: &[&str] = &["Equivalent", "Exact"];
const SIDE_EFFECTS: &[&str] = &["None", "NoneOnDryRun"];
const REINVOCATION_POLICIES: &[&str] = &["IfNeeded", "Never"];
const REVIEW_VERSIONS: &[&str] = &["v1", "v1beta1"];
const MAX_MATCH_CONDITIONS: usize = 64;

/// The fields both webhook kinds share, borrowed for validation.
struct Webhook<'a> {
    name: &'a str,
    client_config: &'a WebhookClientConfig,
    rules: &'a [RuleWithOperations],
    failure_policy: Option<&'a str>,
    match_policy: Option<&'a str>,
    namespace_selector: Option<&'a LabelSelector>,
    object_selector: Option<&'a LabelSelector>,
    side_effects: &'a str,
    timeout_seconds: Option<i32>,
    admission_review_versions: &'a [String],
    match_conditions: &'a [MatchCondition],
}

macro_rules! common {
    ($w:expr) => {
        Webhook {
            name: &$w.name,
            client_config: &$w.client_config,
            rules: $w.rules.as_deref().unwrap_or_default(),
            failure_policy: $w.failure_policy.as_deref(),
            match_policy: $w.match_policy.as_deref(),
            namespace_selector: $w.namespace_selector.as_ref(),
            object_selector: $w.object_selector.as_ref(),
            side_effects: &$w.side_effects,
            timeout_seconds: $w.timeout_seconds,
            admission_review_versions: &$w.admission_review_versions,
            match_conditions: $w.match_conditions.as_deref().unwrap_or_default(),
        }
    };
}

/// The two fields v1 requires but k8s-openapi cannot decode without: filled empty when
/// missing, so that validation answers upstream's `Required value` instead of a decode error.
pub(crate) fn fill_required(raw: &mut Value) {
    let Some(hooks) = raw.get_mut("webhooks").and_then(Value::as_array_mut) else {
        return;
    };
    for h in hooks.iter_mut().filter_map(Value::as_object_mut) {
        h.entry("sideEffects")
            .or_insert(Value::String(String::new()));
        h.entry("admissionReviewVersions")
            .or_insert(Value::Array(Vec::new()));
        h.entry("name").or_insert(Value::String(String::new()));
        h.entry("clientConfig")
            .or_insert(Value::Object(Default::default()));
    }
}

macro_rules! default_common {
    ($w:expr) => {{
        $w.failure_policy.get_or_insert_with(|| "Fail".into());
        $w.match_policy.get_or_insert_with(|| "Equivalent".into());
        $w.namespace_selector
            .get_or_insert_with(LabelSelector::default);
        $w.object_selector
            .get_or_insert_with(LabelSelector::default);
        $w.timeout_seconds.get_or_insert(10);
        for r in $w.rules.iter_mut().flatten() {
            r.scope.get_or_insert_with(|| "*".into());
        }
        if let Some(s) = $w.client_config.service.as_mut() {
            s.port.get_or_insert(443);
        }
    }};
}

pub(crate) fn default_validating(c: &mut ValidatingWebhookConfiguration) {
    for w in c.webhooks.iter_mut().flatten() {
        default_common!(w);
    }
}

pub(crate) fn default_mutating(c: &mut MutatingWebhookConfiguration) {
    for w in c.webhooks.iter_mut().flatten() {
        default_common!(w);
        w.reinvocation_policy.get_or_insert_with(|| "Never".into());
    }
}

/// Upstream `validateWebhookClientConfig`.
pub(crate) fn validate_client_config(c: &WebhookClientConfig, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match (&c.url, &c.service) {
        (Some(_), Some(_)) | (None, None) => errs.push(FieldError::required(
            path,
            "exactly one of url or service is required",
        )),
        (Some(url), None) => {
            let p = path.child("url");
            if !url.starts_with("https://") {
                errs.push(FieldError::invalid(
                    &p,
                    url.as_str(),
                    "'https' is the only allowed URL scheme",
                ));
            } else if url["https://".len()..]
                .split(['/', '?', '#'])
                .next()
                .is_none_or(str::is_empty)
            {
                errs.push(FieldError::invalid(
                    &p,
                    url.as_str(),
                    "host must be specified",
                ));
            }
            if url.contains('#') {
                errs.push(FieldError::invalid(
                    &p,
                    url.as_str(),
                    "fragments are not permitted",
                ));
            }
            if url.contains('?') {
                errs.push(FieldError::invalid(
                    &p,
                    url.as_str(),
                    "query parameters are not permitted",
                ));
            }
        }
        (None, Some(s)) => {
            let p = path.child("service");
            if s.name.is_empty() {
                errs.push(FieldError::required(
                    &p.child("name"),
                    "service name is required",
                ));
            }
            if s.namespace.is_empty() {
                errs.push(FieldError::required(
                    &p.child("namespace"),
                    "service namespace is required",
                ));
            }
            if let Some(path_) = &s.path
                && !path_.starts_with('/')
            {
                errs.push(FieldError::invalid(
                    &p.child("path"),
                    path_.as_str(),
                    "must start with a '/'",
                ));
            }
            if let Some(port) = s.port
                && !(1..=65535).contains(&port)
            {
                errs.push(FieldError::invalid(
                    &p.child("port"),
                    port,
                    "port is not valid: must be between 1 and 65535, inclusive",
                ));
            }
        }
    }
    errs
}

fn validate_webhook(w: &Webhook<'_>, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = path.child("name");
    if w.name.is_empty() {
        errs.push(FieldError::required(&name, ""));
    } else {
        errs.extend(each_invalid(&name, w.name, dns1123_subdomain(w.name)));
        if w.name.split('.').count() < 3 {
            errs.push(FieldError::invalid(
                &name,
                w.name,
                "should be a domain with at least three segments separated by dots",
            ));
        }
    }
    for (i, r) in w.rules.iter().enumerate() {
        let named = NamedRuleWithOperations {
            api_groups: r.api_groups.clone(),
            api_versions: r.api_versions.clone(),
            operations: r.operations.clone(),
            resources: r.resources.clone(),
            scope: r.scope.clone(),
            resource_names: None,
        };
        errs.extend(validate_rule(&named, &path.child("rules").index(i)));
    }
    choice(
        w.failure_policy,
        FAILURE_POLICIES,
        &path.child("failurePolicy"),
        &mut errs,
    );
    choice(
        w.match_policy,
        MATCH_POLICIES,
        &path.child("matchPolicy"),
        &mut errs,
    );
    let side_effects = (!w.side_effects.is_empty()).then_some(w.side_effects);
    choice(
        side_effects,
        SIDE_EFFECTS,
        &path.child("sideEffects"),
        &mut errs,
    );
    for (field, sel) in [
        ("namespaceSelector", w.namespace_selector),
        ("objectSelector", w.object_selector),
    ] {
        if let Some(s) = sel {
            errs.extend(validate_label_selector(s, &path.child(field)));
        }
    }
    if let Some(t) = w.timeout_seconds
        && !(1..=30).contains(&t)
    {
        errs.push(FieldError::invalid(
            &path.child("timeoutSeconds"),
            t,
            "the timeout value must be between 1 and 30 seconds",
        ));
    }
    let versions_path = path.child("admissionReviewVersions");
    let mut seen = BTreeSet::new();
    for (i, v) in w.admission_review_versions.iter().enumerate() {
        if !seen.insert(v.as_str()) {
            errs.push(FieldError::invalid(
                &versions_path.index(i),
                v.as_str(),
                "duplicate version",
            ));
        }
    }
    if !w
        .admission_review_versions
        .iter()
        .any(|v| REVIEW_VERSIONS.contains(&v.as_str()))
    {
        errs.push(FieldError::required(
            &versions_path,
            "must specify one of v1, v1beta1",
        ));
    }
    errs.extend(validate_client_config(
        w.client_config,
        &path.child("clientConfig"),
    ));
    if w.match_conditions.len() > MAX_MATCH_CONDITIONS {
        errs.push(FieldError::too_many(
            &path.child("matchConditions"),
            w.match_conditions.len(),
            MAX_MATCH_CONDITIONS,
        ));
    }
    let mut names = BTreeSet::new();
    for (i, c) in w.match_conditions.iter().enumerate() {
        let p = path.child("matchConditions").index(i);
        if c.name.is_empty() {
            errs.push(FieldError::required(&p.child("name"), ""));
        } else {
            errs.extend(each_invalid(
                &p.child("name"),
                &c.name,
                qualified_name(&c.name),
            ));
            if !names.insert(c.name.as_str()) {
                errs.push(FieldError::duplicate(&p.child("name"), c.name.as_str()));
            }
        }
        if c.expression.trim().is_empty() {
            errs.push(FieldError::required(&p.child("expression"), ""));
        } else if let Err(e) = Program::compile(c.expression.trim()) {
            errs.push(FieldError::invalid(
                &p.child("expression"),
                c.expression.as_str(),
                format!("compilation failed: {e}"),
            ));
        }
    }
    errs
}

/// Every webhook validated, and their names unique.
fn validate_all<'a>(hooks: impl Iterator<Item = Webhook<'a>>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut names = BTreeSet::new();
    for (i, w) in hooks.enumerate() {
        let path = Path::new("webhooks").index(i);
        errs.extend(validate_webhook(&w, &path));
        if !w.name.is_empty() && !names.insert(w.name) {
            errs.push(FieldError::duplicate(&path.child("name"), w.name));
        }
    }
    errs
}

pub(crate) fn validate_validating(c: &ValidatingWebhookConfiguration) -> Vec<FieldError> {
    validate_all(
        c.webhooks
            .iter()
            .flatten()
            .map(|w: &ValidatingWebhook| common!(w)),
    )
}

pub(crate) fn validate_mutating(c: &MutatingWebhookConfiguration) -> Vec<FieldError> {
    let mut errs = validate_all(
        c.webhooks
            .iter()
            .flatten()
            .map(|w: &MutatingWebhook| common!(w)),
    );
    for (i, w) in c.webhooks.iter().flatten().enumerate() {
        choice(
            w.reinvocation_policy.as_deref(),
            REINVOCATION_POLICIES,
            &Path::new("webhooks").index(i).child("reinvocationPolicy"),
            &mut errs,
        );
    }
    errs
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn hook(overrides: Value) -> Value {
        let mut h = json!({
            "name": "pods.example.com",
            "clientConfig": {"url": "https://127.0.0.1:9443/validate"},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                       "resources": ["pods"]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        });
        if let (Some(h), Some(o)) = (h.as_object_mut(), overrides.as_object()) {
            for (k, v) in o {
                if v.is_null() {
                    h.remove(k);
                } else {
                    h.insert(k.clone(), v.clone());
                }
            }
        }
        h
    }

    fn errors_of(h: Value) -> Vec<String> {
        let mut raw = json!({"metadata": {"name": "c"}, "webhooks": [h]});
        fill_required(&mut raw);
        let mut c: MutatingWebhookConfiguration = match serde_json::from_value(raw) {
            Ok(c) => c,
            Err(e) => return vec![format!("decode: {e}")],
        };
        default_mutating(&mut c);
        validate_mutating(&c)
            .iter()
            .map(FieldError::message)
            .collect()
    }

    #[test]
    fn configurations_are_judged_as_upstream_judges_them() {
        let cases: &[(&str, Value, &[&str])] = &[
            ("a complete webhook", json!({}), &[]),
            (
                "sideEffects is required",
                json!({"sideEffects": null}),
                &["webhooks[0].sideEffects: Required value"],
            ),
            (
                "sideEffects Some is not v1",
                json!({"sideEffects": "Some"}),
                &[
                    r#"webhooks[0].sideEffects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun""#,
                ],
            ),
            (
                "admissionReviewVersions is required",
                json!({"admissionReviewVersions": null}),
                &[
                    "webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1",
                ],
            ),
            (
                "a name needs three segments",
                json!({"name": "example.com"}),
                &[
                    r#"webhooks[0].name: Invalid value: "example.com": should be a domain with at least three segments separated by dots"#,
                ],
            ),
            (
                "url and service together",
                json!({"clientConfig": {"url": "https://a.b", "service": {"name": "s", "namespace": "n"}}}),
                &[
                    "webhooks[0].clientConfig: Required value: exactly one of url or service is required",
                ],
            ),
            (
                "plain http",
                json!({"clientConfig": {"url": "http://a.b/x"}}),
                &[
                    r#"webhooks[0].clientConfig.url: Invalid value: "http://a.b/x": 'https' is the only allowed URL scheme"#,
                ],
            ),
            (
                "timeout over 30 s",
                json!({"timeoutSeconds": 31}),
                &[
                    "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds",
                ],
            ),
            (
                "unknown failure policy",
                json!({"failurePolicy": "Maybe"}),
                &[
                    r#"webhooks[0].failurePolicy: Unsupported value: "Maybe": supported values: "Fail", "Ignore""#,
                ],
            ),
            (
                "unknown reinvocation policy",
                json!({"reinvocationPolicy": "Always"}),
                &[
                    r#"webhooks[0].reinvocationPolicy: Unsupported value: "Always": supported values: "IfNeeded", "Never""#,
                ],
            ),
        ];
        for (name, overrides, want) in cases {
            let got = errors_of(hook(overrides.clone()));
            assert_eq!(got, *want, "{name}");
        }
    }

    #[test]
    fn defaults_fill_what_upstream_defaults() {
        let mut c: MutatingWebhookConfiguration = serde_json::from_value(json!({
            "metadata": {"name": "c"},
            "webhooks": [hook(json!({"clientConfig": {"service": {"name": "s", "namespace": "n"}}}))],
        }))
        .unwrap_or_default();
        default_mutating(&mut c);
        let w = &c.webhooks.unwrap_or_default()[0];
        assert_eq!(w.failure_policy.as_deref(), Some("Fail"));
        assert_eq!(w.match_policy.as_deref(), Some("Equivalent"));
        assert_eq!(w.timeout_seconds, Some(10));
        assert_eq!(w.reinvocation_policy.as_deref(), Some("Never"));
        assert_eq!(
            w.client_config.service.as_ref().and_then(|s| s.port),
            Some(443)
        );
        assert_eq!(
            w.rules.as_deref().unwrap_or_default()[0].scope.as_deref(),
            Some("*")
        );
    }

    #[test]
    fn duplicate_webhook_names_are_refused() {
        let mut raw =
            json!({"metadata": {"name": "c"}, "webhooks": [hook(json!({})), hook(json!({}))]});
        fill_required(&mut raw);
        let mut c: ValidatingWebhookConfiguration = serde_json::from_value(raw).unwrap_or_default();
        default_validating(&mut c);
        let msgs: Vec<String> = validate_validating(&c)
            .iter()
            .map(FieldError::message)
            .collect();
        assert_eq!(
            msgs,
            vec![r#"webhooks[1].name: Duplicate value: "pods.example.com""#]
        );
    }
}
