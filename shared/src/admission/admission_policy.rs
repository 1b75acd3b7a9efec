//! ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding admission
//! (admissionregistration.k8s.io/v1): upstream's defaults (failure policy `Fail`, match policy
//! `Equivalent`, empty selectors, rule scope `*`) and `ValidateValidatingAdmissionPolicy` /
//! `ValidateValidatingAdmissionPolicyBinding`: every expression compiles, the enumerated
//! fields hold upstream's values, required fields are there. Berth's CEL has no type checker,
//! so an expression that parses but names something undeclared is refused only when it runs.

use std::collections::BTreeSet;

use k8s_openapi::api::admissionregistration::v1::{
    ParamKind, ParamRef, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    ValidatingAdmissionPolicySpec,
};

use super::admission_rules::{
    choice, default_match_resources, optional_choice, path_segment, validate_match_resources,
};
// The webhooks' rules are the policies' rules.
pub(super) use super::admission_rules::validate_rule;
use super::field::{FieldError, Path};
use super::names::{dns1035_label, dns1123_subdomain, each_invalid, qualified_name};
use super::selector::validate_label_selector;
use crate::cel::Program;

const FAILURE_POLICIES: &[&str] = &["Fail", "Ignore"];
const REASONS: &[&str] = &["Forbidden", "Invalid", "RequestEntityTooLarge"];
const ACTIONS: &[&str] = &["Audit", "Deny", "Warn"];
const MAX_MATCH_CONDITIONS: usize = 64;
const MAX_AUDIT_ANNOTATIONS: usize = 20;
const MAX_VALUE_EXPRESSION_BYTES: usize = 5 * 1024;

pub(crate) fn default_policy(p: &mut ValidatingAdmissionPolicy) {
    let spec = p.spec.get_or_insert_with(Default::default);
    spec.failure_policy.get_or_insert_with(|| "Fail".into());
    if let Some(m) = spec.match_constraints.as_mut() {
        default_match_resources(m);
    }
}

pub(crate) fn default_binding(b: &mut ValidatingAdmissionPolicyBinding) {
    if let Some(m) = b.spec.as_mut().and_then(|s| s.match_resources.as_mut()) {
        default_match_resources(m);
    }
}

/// An expression's compile error as upstream reports it.
fn compiles(expr: &str, path: &Path) -> Option<FieldError> {
    Program::compile(expr)
        .err()
        .map(|e| FieldError::invalid(path, expr, format!("compilation failed: {e}")))
}

/// A variable's or validation's `expression`: required, and it must compile.
fn required_expression(expr: &str, path: &Path) -> Option<FieldError> {
    if expr.trim().is_empty() {
        Some(FieldError::required(path, "expression is not specified"))
    } else {
        compiles(expr, path)
    }
}

/// Upstream `validateParamKind`.
fn validate_param_kind(k: &ParamKind, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let api_version = k.api_version.as_deref().unwrap_or_default();
    let p = path.child("apiVersion");
    if api_version.is_empty() {
        errs.push(FieldError::required(&p, ""));
    } else if api_version.matches('/').count() > 1 {
        errs.push(FieldError::invalid(
            &p,
            api_version,
            format!("unexpected GroupVersion string: {api_version}"),
        ));
    } else {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let group_errs = dns1123_subdomain(group);
        if !group.is_empty() && !group_errs.is_empty() {
            errs.push(FieldError::invalid(&p, group, group_errs.join(",")));
        }
        if version.is_empty() {
            errs.push(FieldError::invalid(
                &p,
                api_version,
                "version must be specified",
            ));
        } else {
            let version_errs = dns1035_label(version);
            if !version_errs.is_empty() {
                errs.push(FieldError::invalid(&p, version, version_errs.join(",")));
            }
        }
    }
    let kind = k.kind.as_deref().unwrap_or_default();
    if kind.is_empty() {
        errs.push(FieldError::required(&path.child("kind"), ""));
    } else {
        let kind_errs = dns1035_label(&kind.to_lowercase());
        if !kind_errs.is_empty() {
            errs.push(FieldError::invalid(
                &path.child("kind"),
                kind,
                format!(
                    "may have mixed case, but should otherwise match: {}",
                    kind_errs.join(",")
                ),
            ));
        }
    }
    errs
}

/// Upstream `isCELIdentifier`.
fn is_cel_identifier(name: &str) -> bool {
    const RESERVED: &[&str] = &[
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    ];
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
        && !RESERVED.contains(&name)
}

fn has_newlines(s: &str) -> bool {
    s.contains('\n') || s.contains('\r')
}

fn validate_spec(name: &str, spec: &ValidatingAdmissionPolicySpec, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    choice(
        spec.failure_policy.as_deref(),
        FAILURE_POLICIES,
        &path.child("failurePolicy"),
        &mut errs,
    );
    if let Some(k) = &spec.param_kind {
        errs.extend(validate_param_kind(k, &path.child("paramKind")));
    }
    match &spec.match_constraints {
        None => errs.push(FieldError::required(&path.child("matchConstraints"), "")),
        Some(m) => {
            errs.extend(validate_match_resources(m, &path.child("matchConstraints")));
            if m.resource_rules.as_ref().is_none_or(Vec::is_empty) {
                errs.push(FieldError::required(
                    &path.child("matchConstraints").child("resourceRules"),
                    "",
                ));
            }
        }
    }
    let conditions = spec.match_conditions.as_deref().unwrap_or_default();
    if conditions.len() > MAX_MATCH_CONDITIONS {
        errs.push(FieldError::too_many(
            &path.child("matchConditions"),
            conditions.len(),
            MAX_MATCH_CONDITIONS,
        ));
    }
    let mut names = BTreeSet::new();
    for (i, c) in conditions.iter().enumerate() {
        let p = path.child("matchConditions").index(i);
        if c.expression.trim().is_empty() {
            errs.push(FieldError::required(&p.child("expression"), ""));
        } else {
            errs.extend(compiles(c.expression.trim(), &p.child("expression")));
        }
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
    }
    for (i, v) in spec.variables.iter().flatten().enumerate() {
        let p = path.child("variables").index(i);
        if v.name.trim().is_empty() {
            errs.push(FieldError::required(
                &p.child("name"),
                "name is not specified",
            ));
        } else if !is_cel_identifier(&v.name) {
            errs.push(FieldError::invalid(
                &p.child("name"),
                v.name.as_str(),
                "name is not a valid CEL identifier",
            ));
        }
        errs.extend(required_expression(&v.expression, &p.child("expression")));
    }
    let validations = spec.validations.as_deref().unwrap_or_default();
    let annotations = spec.audit_annotations.as_deref().unwrap_or_default();
    if validations.is_empty() && annotations.is_empty() {
        let why = "validations or auditAnnotations must contain at least one item";
        errs.push(FieldError::required(&path.child("validations"), why));
        errs.push(FieldError::required(&path.child("auditAnnotations"), why));
        return errs;
    }
    for (i, v) in validations.iter().enumerate() {
        let p = path.child("validations").index(i);
        errs.extend(required_expression(&v.expression, &p.child("expression")));
        if let Some(m) = &v.message_expression {
            if !m.is_empty() && m.trim().is_empty() {
                errs.push(FieldError::invalid(
                    &p.child("messageExpression"),
                    m.as_str(),
                    "must be non-empty if specified",
                ));
            } else if !m.trim().is_empty() {
                errs.extend(compiles(m, &p.child("messageExpression")));
            }
        }
        if let Some(m) = &v.message {
            if !m.is_empty() && m.trim().is_empty() {
                errs.push(FieldError::invalid(
                    &p.child("message"),
                    m.as_str(),
                    "message must be non-empty if specified",
                ));
            } else if has_newlines(m.trim()) {
                errs.push(FieldError::invalid(
                    &p.child("message"),
                    m.as_str(),
                    "message must not contain line breaks",
                ));
            }
        }
        optional_choice(v.reason.as_deref(), REASONS, &p.child("reason"), &mut errs);
    }
    if annotations.len() > MAX_AUDIT_ANNOTATIONS {
        errs.push(FieldError::invalid(
            &path.child("auditAnnotations"),
            serde_json::to_value(annotations).unwrap_or_default(),
            format!("must not have more than {MAX_AUDIT_ANNOTATIONS} auditAnnotations"),
        ));
    }
    let mut keys = BTreeSet::new();
    for (i, a) in annotations.iter().enumerate() {
        let p = path.child("auditAnnotations").index(i);
        if name.is_empty() {
            errs.push(FieldError::invalid(
                &p.child("key"),
                a.key.as_str(),
                "requires metadata.name be non-empty",
            ));
        } else {
            let qualified = format!("{name}/{}", a.key);
            errs.extend(each_invalid(
                &p.child("key"),
                &qualified,
                qualified_name(&qualified),
            ));
        }
        let value = a.value_expression.trim();
        if value.is_empty() {
            errs.push(FieldError::required(
                &p.child("valueExpression"),
                "valueExpression is not specified",
            ));
        } else if value.len() > MAX_VALUE_EXPRESSION_BYTES {
            errs.push(FieldError::required(
                &p.child("valueExpression"),
                format!("must not exceed {MAX_VALUE_EXPRESSION_BYTES} bytes in length"),
            ));
        } else if let Err(e) = Program::compile(value) {
            errs.push(FieldError::invalid(
                &p.child("valueExpression"),
                a.value_expression.as_str(),
                format!("compilation failed: {e}"),
            ));
        }
        if !keys.insert(a.key.as_str()) {
            errs.push(FieldError::duplicate(&p.child("key"), a.key.as_str()));
        }
    }
    errs
}

/// Upstream `validateValidatingAdmissionPolicySpec` (the metadata is checked by the caller).
pub(crate) fn validate_policy(p: &ValidatingAdmissionPolicy) -> Vec<FieldError> {
    let name = p.metadata.name.as_deref().unwrap_or_default();
    match &p.spec {
        Some(spec) => validate_spec(name, spec, &Path::new("spec")),
        None => validate_spec(name, &Default::default(), &Path::new("spec")),
    }
}

/// Upstream `validateParamRef`.
fn validate_param_ref(r: &ParamRef, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = r.name.as_deref().unwrap_or_default();
    let exclusive = "name and selector are mutually exclusive";
    if !name.is_empty() {
        errs.extend(each_invalid(&path.child("name"), name, path_segment(name)));
        if r.selector.is_some() {
            errs.push(FieldError::forbidden(&path.child("name"), exclusive));
        }
    }
    if let Some(s) = &r.selector {
        errs.extend(validate_label_selector(s, &path.child("selector")));
        if !name.is_empty() {
            errs.push(FieldError::forbidden(&path.child("selector"), exclusive));
        }
    }
    if name.is_empty() && r.selector.is_none() {
        errs.push(FieldError::required(
            path,
            "one of name or selector must be specified",
        ));
    }
    choice(
        r.parameter_not_found_action
            .as_deref()
            .filter(|a| !a.is_empty()),
        &["Deny", "Allow"],
        &path.child("parameterNotFoundAction"),
        &mut errs,
    );
    errs
}

/// Upstream `validateValidatingAdmissionPolicyBindingSpec` (the metadata is checked by the
/// caller).
pub(crate) fn validate_binding(b: &ValidatingAdmissionPolicyBinding) -> Vec<FieldError> {
    let path = Path::new("spec");
    let spec = b.spec.clone().unwrap_or_default();
    let mut errs = Vec::new();
    let policy = spec.policy_name.as_deref().unwrap_or_default();
    if policy.is_empty() {
        errs.push(FieldError::required(&path.child("policyName"), ""));
    } else {
        errs.extend(each_invalid(
            &path.child("policyName"),
            policy,
            dns1123_subdomain(policy),
        ));
    }
    if let Some(r) = &spec.param_ref {
        errs.extend(validate_param_ref(r, &path.child("paramRef")));
    }
    if let Some(m) = &spec.match_resources {
        // Upstream's path has this spelling.
        errs.extend(validate_match_resources(m, &path.child("matchResouces")));
    }
    let actions = spec.validation_actions.as_deref().unwrap_or_default();
    let p = path.child("validationActions");
    let mut seen = BTreeSet::new();
    for (i, a) in actions.iter().enumerate() {
        if !ACTIONS.contains(&a.as_str()) {
            errs.push(FieldError::not_supported(&p.index(i), a.as_str(), ACTIONS));
        }
        if !seen.insert(a.as_str()) {
            errs.push(FieldError::duplicate(&p.index(i), a.as_str()));
        }
    }
    if seen.contains("Deny") && seen.contains("Warn") {
        errs.push(FieldError::invalid(
            &p,
            actions.to_vec(),
            "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
        ));
    }
    if seen.is_empty() {
        errs.push(FieldError::required(
            &p,
            "at least one validation action is required",
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    use serde_json::{Value, json};

    fn policy(spec: Value) -> ValidatingAdmissionPolicy {
        let mut p: ValidatingAdmissionPolicy =
            serde_json::from_value(json!({"metadata": {"name": "replicas"}, "spec": spec}))
                .unwrap();
        default_policy(&mut p);
        p
    }

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(FieldError::message).collect()
    }

    fn rules() -> Value {
        json!({"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
            "operations": ["CREATE"], "resources": ["deployments"]}]})
    }

    #[test]
    fn a_valid_policy_is_defaulted_and_accepted() {
        let p = policy(json!({"matchConstraints": rules(),
            "validations": [{"expression": "object.spec.replicas <= 5"}]}));
        assert_eq!(messages(&validate_policy(&p)), Vec::<String>::new());
        let spec = p.spec.unwrap();
        assert_eq!(spec.failure_policy.as_deref(), Some("Fail"));
        let m = spec.match_constraints.unwrap();
        assert_eq!(m.match_policy.as_deref(), Some("Equivalent"));
        assert_eq!(m.namespace_selector, Some(LabelSelector::default()));
        assert_eq!(m.resource_rules.unwrap()[0].scope.as_deref(), Some("*"));
    }

    #[test]
    fn policies_are_refused_with_upstream_messages() {
        let cases = [
            (
                json!({"matchConstraints": rules(), "failurePolicy": "Sometimes",
                       "validations": [{"expression": "true"}]}),
                vec![
                    r#"spec.failurePolicy: Unsupported value: "Sometimes": supported values: "Fail", "Ignore""#,
                ],
            ),
            (
                json!({"validations": [{"expression": "true"}]}),
                vec!["spec.matchConstraints: Required value"],
            ),
            (
                json!({"matchConstraints": rules()}),
                vec![
                    "spec.validations: Required value: validations or auditAnnotations must contain at least one item",
                    "spec.auditAnnotations: Required value: validations or auditAnnotations must contain at least one item",
                ],
            ),
            (
                json!({"matchConstraints": rules(), "validations": [
                    {"expression": "true", "message": "two\nlines", "reason": "Teapot"}]}),
                vec![
                    r#"spec.validations[0].message: Invalid value: "two\nlines": message must not contain line breaks"#,
                    r#"spec.validations[0].reason: Unsupported value: "Teapot": supported values: "Forbidden", "Invalid", "RequestEntityTooLarge""#,
                ],
            ),
            (
                json!({"matchConstraints": {"resourceRules": [{"apiGroups": ["*", "apps"],
                    "apiVersions": ["v1"], "operations": ["PATCH"], "resources": ["*", "pods"]}]},
                    "validations": [{"expression": "true"}]}),
                vec![
                    r#"spec.matchConstraints.resourceRules[0].operations[0]: Unsupported value: "PATCH": supported values: "*", "CONNECT", "CREATE", "DELETE", "UPDATE""#,
                    r#"spec.matchConstraints.resourceRules[0].apiGroups: Invalid value: []string{"*", "apps"}: if '*' is present, must not specify other API groups"#,
                    r#"spec.matchConstraints.resourceRules[0].resources: Invalid value: []string{"*", "pods"}: if '*' is present, must not specify other resources without subresources"#,
                ],
            ),
            (
                json!({"matchConstraints": rules(), "paramKind": {"apiVersion": "v1"},
                    "variables": [{"name": "in", "expression": "1"}],
                    "validations": [{"expression": "true"}]}),
                vec![
                    "spec.paramKind.kind: Required value",
                    r#"spec.variables[0].name: Invalid value: "in": name is not a valid CEL identifier"#,
                ],
            ),
        ];
        for (spec, want) in cases {
            let got = messages(&validate_policy(&policy(spec.clone())));
            assert_eq!(got, want, "{spec}");
        }
    }

    #[test]
    fn expressions_that_do_not_compile_are_refused() {
        let p = policy(json!({"matchConstraints": rules(),
            "matchConditions": [{"name": "c", "expression": "object.("}],
            "validations": [{"expression": "object.spec.replicas <=", "messageExpression": "'a' +"}],
            "auditAnnotations": [{"key": "k", "valueExpression": "]"}]}));
        let got = messages(&validate_policy(&p));
        let fields: Vec<&str> = got
            .iter()
            .map(|m| m.split(':').next().unwrap_or(""))
            .collect();
        assert_eq!(
            fields,
            [
                "spec.matchConditions[0].expression",
                "spec.validations[0].expression",
                "spec.validations[0].messageExpression",
                "spec.auditAnnotations[0].valueExpression"
            ]
        );
        assert!(
            got.iter().all(|m| m.contains("compilation failed: ")),
            "{got:?}"
        );
    }

    fn binding(spec: Value) -> ValidatingAdmissionPolicyBinding {
        let mut b: ValidatingAdmissionPolicyBinding =
            serde_json::from_value(json!({"metadata": {"name": "b"}, "spec": spec})).unwrap();
        default_binding(&mut b);
        b
    }

    #[test]
    fn bindings_are_refused_with_upstream_messages() {
        let cases = [
            (
                json!({"policyName": "replicas", "validationActions": ["Deny"]}),
                vec![],
            ),
            (
                json!({"validationActions": []}),
                vec![
                    "spec.policyName: Required value",
                    "spec.validationActions: Required value: at least one validation action is required",
                ],
            ),
            (
                json!({"policyName": "p", "validationActions": ["Deny", "Warn", "Deny", "Log"]}),
                vec![
                    r#"spec.validationActions[2]: Duplicate value: "Deny""#,
                    r#"spec.validationActions[3]: Unsupported value: "Log": supported values: "Audit", "Deny", "Warn""#,
                    r#"spec.validationActions: Invalid value: []string{"Deny", "Warn", "Deny", "Log"}: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)"#,
                ],
            ),
            (
                json!({"policyName": "p", "validationActions": ["Audit"],
                       "paramRef": {"name": "a", "selector": {}}}),
                vec![
                    "spec.paramRef.name: Forbidden: name and selector are mutually exclusive",
                    "spec.paramRef.selector: Forbidden: name and selector are mutually exclusive",
                    "spec.paramRef.parameterNotFoundAction: Required value",
                ],
            ),
            (
                json!({"policyName": "p", "validationActions": ["Audit"],
                       "paramRef": {"parameterNotFoundAction": "Maybe"}}),
                vec![
                    "spec.paramRef: Required value: one of name or selector must be specified",
                    r#"spec.paramRef.parameterNotFoundAction: Unsupported value: "Maybe": supported values: "Deny", "Allow""#,
                ],
            ),
            (
                json!({"policyName": "p", "validationActions": ["Deny"],
                       "matchResources": {"matchPolicy": "Fuzzy"}}),
                vec![
                    r#"spec.matchResouces.matchPolicy: Unsupported value: "Fuzzy": supported values: "Equivalent", "Exact""#,
                ],
            ),
        ];
        for (spec, want) in cases {
            let got = messages(&validate_binding(&binding(spec.clone())));
            assert_eq!(got, want, "{spec}");
        }
    }
}
