//! Pod Security on namespace writes: labels that are not a level or version are refused, an
//! exempt namespace is told its labels do nothing, and a stricter `enforce` level is checked
//! against the pods already there (upstream answers what they violate as warnings).
//! Planner: pure, no I/O.

use super::checks::{evaluate, forbidden_reason};
use super::level::{
    AUDIT_LEVEL_LABEL, AUDIT_VERSION_LABEL, ENFORCE_LEVEL_LABEL, ENFORCE_VERSION_LABEL, Level,
    LevelVersion, Policy, WARN_LEVEL_LABEL, WARN_VERSION_LABEL, policy_to_evaluate,
};
use super::{Config, decode};
use crate::admission::Operation;
use crate::admission::field::{FieldError, quote};
use serde_json::Value;
use std::collections::BTreeMap;

/// Pods checked at most when `enforce` changes (upstream's limit).
pub const MAX_PODS_TO_CHECK: usize = 3000;

/// What a namespace write gets when its labels are valid.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespaceDecision {
    pub warnings: Vec<String>,
    /// Check the namespace's pods against this new enforce level
    /// ([`existing_pods_warnings`]).
    pub check_pods: Option<LevelVersion>,
}

/// A namespace create or update (`old_labels` on update); `Err` refuses it as Invalid.
pub fn admit_namespace(
    config: &Config,
    op: Operation,
    name: &str,
    labels: &BTreeMap<String, String>,
    old_labels: Option<&BTreeMap<String, String>>,
) -> Result<NamespaceDecision, Vec<FieldError>> {
    let (policy, errs) = policy_to_evaluate(labels, config.defaults);
    let exempt = config.exemptions.namespaces.iter().any(|n| n == name);
    let exempt_warning = || NamespaceDecision {
        warnings: exempt_warning(config, name, &policy, labels)
            .into_iter()
            .collect(),
        check_pods: None,
    };
    let old = match (op, old_labels) {
        (Operation::Update, Some(old)) => old,
        _ => {
            if !errs.is_empty() {
                return Err(errs);
            }
            return Ok(if exempt {
                exempt_warning()
            } else {
                NamespaceDecision::default()
            });
        }
    };
    let (old_policy, old_errs) = policy_to_evaluate(old, config.defaults);
    // Labels that were already wrong the same way do not block other changes.
    if !errs.is_empty() && (old_errs.is_empty() || errs != old_errs) {
        return Err(errs);
    }
    let (new, was) = (policy.enforce, old_policy.enforce);
    if new == was
        || new.level == Level::Privileged
        || (new.version == was.version && new.level <= was.level)
    {
        return Ok(NamespaceDecision::default());
    }
    if exempt {
        return Ok(exempt_warning());
    }
    Ok(NamespaceDecision {
        warnings: Vec::new(),
        check_pods: Some(new),
    })
}

/// `namespace "x" is exempt from Pod Security, and the policy (enforce=…) will be ignored`,
/// naming the modes the labels set; none when the policy is the defaults or privileged.
fn exempt_warning(
    config: &Config,
    name: &str,
    policy: &Policy,
    labels: &BTreeMap<String, String>,
) -> Option<String> {
    if policy.fully_privileged() || policy.equivalent(&config.defaults) {
        return None;
    }
    let modes = [
        (
            "enforce",
            policy.enforce,
            ENFORCE_LEVEL_LABEL,
            ENFORCE_VERSION_LABEL,
        ),
        (
            "audit",
            policy.audit,
            AUDIT_LEVEL_LABEL,
            AUDIT_VERSION_LABEL,
        ),
        ("warn", policy.warn, WARN_LEVEL_LABEL, WARN_VERSION_LABEL),
    ];
    let set: Vec<String> = modes
        .iter()
        .filter(|(_, lv, level, version)| {
            lv.level != Level::Privileged
                && (labels.contains_key(*level) || labels.contains_key(*version))
        })
        .map(|(mode, lv, _, _)| format!("{mode}={lv}"))
        .collect();
    Some(format!(
        "namespace {} is exempt from Pod Security, and the policy ({}) will be ignored",
        quote(name),
        set.join(", ")
    ))
}

/// The controller's uid of a pod, if a controller owns it.
fn controller_uid(pod: &Value) -> Option<&str> {
    pod.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        .and_then(|r| r.get("uid")?.as_str())
}

/// What the pods of `namespace` violate at its new `enforce` level, as upstream words it: a
/// headline, then one line per distinct set of reasons naming a pod (`web-1 (and 2 other
/// pods): privileged`). One pod per controller is looked at first, so a big ReplicaSet does
/// not use up the [`MAX_PODS_TO_CHECK`] on its copies.
pub fn existing_pods_warnings(
    config: &Config,
    namespace: &str,
    enforce: LevelVersion,
    pods: &[Value],
) -> Vec<String> {
    let mut first = Vec::new();
    let mut repeats = Vec::new();
    let mut seen_controllers = Vec::new();
    for pod in pods {
        let Some((meta, spec)) = decode(pod) else {
            continue;
        };
        if config.exempt_runtime_class(&spec) {
            continue;
        }
        let entry = (meta, spec);
        match controller_uid(pod) {
            Some(uid) if seen_controllers.contains(&uid) => repeats.push(entry),
            Some(uid) => {
                seen_controllers.push(uid);
                first.push(entry);
            }
            None => first.push(entry),
        }
    }
    first.extend(repeats);
    let total = first.len();
    first.truncate(MAX_PODS_TO_CHECK);
    // Each distinct reason list, with the smallest pod name and how many pods have it.
    let mut found: Vec<(String, String, usize)> = Vec::new();
    for (meta, spec) in &first {
        let v = evaluate(enforce, meta, spec);
        if v.is_empty() {
            continue;
        }
        let reason = forbidden_reason(&v);
        let name = meta.name.clone().unwrap_or_default();
        match found.iter_mut().find(|(r, _, _)| *r == reason) {
            Some((_, n, count)) => {
                *count += 1;
                if name < *n {
                    *n = name;
                }
            }
            None => found.push((reason, name, 1)),
        }
    }
    let mut warnings = Vec::new();
    if first.len() < total {
        warnings.push(format!(
            "new PodSecurity enforce level only checked against the first {} of {total} existing pods",
            first.len()
        ));
    }
    if !found.is_empty() {
        warnings.push(format!(
            "existing pods in namespace {} violate the new PodSecurity enforce level {}",
            quote(namespace),
            quote(&enforce.to_string())
        ));
    }
    let mut lines: Vec<String> = found
        .into_iter()
        .map(|(reason, name, count)| match count {
            1 => format!("{name}: {reason}"),
            2 => format!("{name} (and 1 other pod): {reason}"),
            n => format!("{name} (and {} other pods): {reason}", n - 1),
        })
        .collect();
    lines.sort();
    warnings.extend(lines);
    warnings
}
