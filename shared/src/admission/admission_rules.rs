//! Admission rules as policies and webhooks share them (admissionregistration.k8s.io/v1
//! `MatchResources` and `NamedRuleWithOperations`): upstream's defaults (match policy
//! `Equivalent`, empty selectors, rule scope `*`) and validation (operations, groups,
//! versions, the resource and subresource shapes, scopes, resource names, selectors).

use std::collections::BTreeSet;

use k8s_openapi::api::admissionregistration::v1::{MatchResources, NamedRuleWithOperations};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::field::{FieldError, Path};
use super::names::each_invalid;
use super::selector::validate_label_selector;

const MATCH_POLICIES: &[&str] = &["Equivalent", "Exact"];
const OPERATIONS: &[&str] = &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
const SCOPES: &[&str] = &["*", "Cluster", "Namespaced"];

/// Upstream's `SetDefaults_MatchResources` and `SetDefaults_Rule`.
pub(crate) fn default_match_resources(m: &mut MatchResources) {
    m.match_policy.get_or_insert_with(|| "Equivalent".into());
    m.namespace_selector
        .get_or_insert_with(LabelSelector::default);
    m.object_selector.get_or_insert_with(LabelSelector::default);
    for r in m
        .resource_rules
        .iter_mut()
        .flatten()
        .chain(m.exclude_resource_rules.iter_mut().flatten())
    {
        r.scope.get_or_insert_with(|| "*".into());
    }
}

fn has_wildcard(items: &[String]) -> bool {
    items.iter().any(|i| i == "*")
}

/// A required field with one of the `valid` values (a failure or match policy).
pub(crate) fn choice(value: Option<&str>, valid: &[&str], path: &Path, errs: &mut Vec<FieldError>) {
    if value.is_none() {
        errs.push(FieldError::required(path, ""));
    }
    optional_choice(value, valid, path, errs);
}

/// An optional field that, when set, has one of the `valid` values (a scope, a reason).
pub(crate) fn optional_choice(
    value: Option<&str>,
    valid: &[&str],
    path: &Path,
    errs: &mut Vec<FieldError>,
) {
    if let Some(v) = value
        && !valid.contains(&v)
    {
        errs.push(FieldError::not_supported(path, v, valid));
    }
}

/// A rule's operations, API groups or API versions (`what`): at least one, and `*` alone.
fn wildcard_list(path: &Path, items: &[String], what: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if items.is_empty() {
        errs.push(FieldError::required(path, ""));
    }
    if items.len() > 1 && has_wildcard(items) {
        errs.push(FieldError::invalid(
            path,
            items.to_vec(),
            format!("if '*' is present, must not specify other {what}"),
        ));
    }
    errs
}

/// Upstream `ValidatePathSegmentName`.
pub(crate) fn path_segment(name: &str) -> Vec<String> {
    let mut msgs = Vec::new();
    if name == "." || name == ".." {
        msgs.push(format!("may not be '{name}'"));
    }
    for bad in ["/", "%"] {
        if name.contains(bad) {
            msgs.push(format!("may not contain '{bad}'"));
        }
    }
    msgs
}

/// Upstream `validateResources` (subresources allowed).
fn validate_resources(resources: &[String], path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if resources.is_empty() {
        errs.push(FieldError::required(path, ""));
    }
    let mut wildcard_sub: BTreeSet<&str> = BTreeSet::new();
    let mut wildcard_res: BTreeSet<&str> = BTreeSet::new();
    let (mut double, mut single, mut plain) = (false, false, false);
    for (i, r) in resources.iter().enumerate() {
        if r.is_empty() {
            errs.push(FieldError::required(&path.index(i), ""));
            continue;
        }
        double |= r == "*/*";
        single |= r == "*";
        let Some((res, sub)) = r.split_once('/') else {
            plain = r != "*";
            continue;
        };
        if wildcard_sub.contains(res) {
            errs.push(FieldError::invalid(
                &path.index(i),
                r.as_str(),
                format!("if '{res}/*' is present, must not specify {r}"),
            ));
        }
        if wildcard_res.contains(sub) {
            errs.push(FieldError::invalid(
                &path.index(i),
                r.as_str(),
                format!("if '*/{sub}' is present, must not specify {r}"),
            ));
        }
        if sub == "*" {
            wildcard_sub.insert(res);
        }
        if res == "*" {
            wildcard_res.insert(sub);
        }
    }
    if resources.len() > 1 && double {
        errs.push(FieldError::invalid(
            path,
            resources.to_vec(),
            "if '*/*' is present, must not specify other resources",
        ));
    }
    if single && plain {
        errs.push(FieldError::invalid(
            path,
            resources.to_vec(),
            "if '*' is present, must not specify other resources without subresources",
        ));
    }
    errs
}

/// Upstream `validateNamedRuleWithOperations`.
pub(super) fn validate_rule(r: &NamedRuleWithOperations, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, name) in r.resource_names.iter().flatten().enumerate() {
        let p = path.child("resourceNames").index(i);
        errs.extend(each_invalid(&p, name, path_segment(name)));
        if !seen.insert(name.as_str()) {
            errs.push(FieldError::duplicate(&p, name.as_str()));
        }
    }
    let ops = r.operations.as_deref().unwrap_or_default();
    errs.extend(wildcard_list(&path.child("operations"), ops, "operations"));
    for (i, op) in ops.iter().enumerate() {
        if !OPERATIONS.contains(&op.as_str()) {
            errs.push(FieldError::not_supported(
                &path.child("operations").index(i),
                op.as_str(),
                OPERATIONS,
            ));
        }
    }
    let groups = r.api_groups.as_deref().unwrap_or_default();
    errs.extend(wildcard_list(
        &path.child("apiGroups"),
        groups,
        "API groups",
    ));
    let versions = r.api_versions.as_deref().unwrap_or_default();
    errs.extend(wildcard_list(
        &path.child("apiVersions"),
        versions,
        "API versions",
    ));
    for (i, v) in versions.iter().enumerate() {
        if v.is_empty() {
            errs.push(FieldError::required(
                &path.child("apiVersions").index(i),
                "",
            ));
        }
    }
    errs.extend(validate_resources(
        r.resources.as_deref().unwrap_or_default(),
        &path.child("resources"),
    ));
    optional_choice(r.scope.as_deref(), SCOPES, &path.child("scope"), &mut errs);
    errs
}

/// Upstream `validateMatchResources` (of an object already defaulted).
pub(crate) fn validate_match_resources(m: &MatchResources, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    choice(
        m.match_policy.as_deref(),
        MATCH_POLICIES,
        &path.child("matchPolicy"),
        &mut errs,
    );
    for (name, sel) in [
        ("namespaceSelector", &m.namespace_selector),
        ("objectSelector", &m.object_selector),
    ] {
        match sel {
            None => errs.push(FieldError::required(&path.child(name), "")),
            Some(s) => errs.extend(validate_label_selector(s, &path.child(name))),
        }
    }
    for (name, rules) in [
        ("resourceRules", &m.resource_rules),
        ("excludeResourceRules", &m.exclude_resource_rules),
    ] {
        for (i, r) in rules.iter().flatten().enumerate() {
            errs.extend(validate_rule(r, &path.child(name).index(i)));
        }
    }
    errs
}
