//! Pod Security admission, as upstream's built-in `PodSecurity` plugin decides it: the
//! namespace's `pod-security.kubernetes.io/*` labels (over the controller's defaults) choose a
//! level per mode; `enforce` refuses pods, `warn` answers warnings and `audit` records what it
//! would refuse, for pods and for the pod templates of workloads; namespace writes check their
//! labels and warn about existing pods a stricter `enforce` would refuse. The caller looks the
//! namespace up; everything here decides.
//! Planner: pure, no I/O.

mod baseline;
mod checks;
pub mod level;
mod probes;
mod profiles;
mod restricted;
#[cfg(test)]
mod tests;

pub use checks::{Violation, evaluate, forbidden_detail, forbidden_reason};
pub use level::{Level, LevelVersion, Policy, Version, policy_to_evaluate};

use super::Operation;
use super::field::quote;
use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;
use std::collections::BTreeMap;

/// Who and what is never checked (upstream's `PodSecurityConfiguration.exemptions`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Exemptions {
    pub usernames: Vec<String>,
    pub namespaces: Vec<String>,
    pub runtime_classes: Vec<String>,
}

/// The controller's configuration: the policy of namespaces without labels, and exemptions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    pub defaults: Policy,
    pub exemptions: Exemptions,
}

impl Config {
    /// Writes into `namespace` or by `user` are not checked at all.
    pub fn exempt(&self, namespace: &str, user: Option<&str>) -> bool {
        let has = |list: &[String], s: &str| !s.is_empty() && list.iter().any(|e| e == s);
        has(&self.exemptions.namespaces, namespace)
            || user.is_some_and(|u| has(&self.exemptions.usernames, u))
    }

    fn exempt_runtime_class(&self, spec: &PodSpec) -> bool {
        spec.runtime_class_name.as_deref().is_some_and(|rc| {
            !rc.is_empty() && self.exemptions.runtime_classes.iter().any(|e| e == rc)
        })
    }
}

/// What admission decided about one write.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decision {
    /// Refused (403): `violates PodSecurity "restricted:latest": …`, to follow
    /// `pods "x" is forbidden: `.
    pub forbidden: Option<String>,
    /// `Warning` headers of the answer.
    pub warnings: Vec<String>,
    /// What upstream would put in the audit log (`pod-security.kubernetes.io/audit-violations`).
    pub audit: Option<String>,
}

/// The labels of a namespace object.
pub fn labels_of(namespace: &Value) -> BTreeMap<String, String> {
    namespace
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// A pod's metadata and spec, or a template's.
fn decode(template: &Value) -> Option<(ObjectMeta, PodSpec)> {
    let meta = match template.get("metadata") {
        Some(m) if !m.is_null() => serde_json::from_value(m.clone()).ok()?,
        _ => ObjectMeta::default(),
    };
    let spec = serde_json::from_value(template.get("spec")?.clone()).ok()?;
    Some((meta, spec))
}

/// Where the pod template of a kind upstream checks is (`None` for other kinds).
fn template_path(group: &str, kind: &str) -> Option<&'static str> {
    match (group, kind) {
        ("", "PodTemplate") => Some("/template"),
        ("", "ReplicationController")
        | ("apps", "ReplicaSet" | "Deployment" | "DaemonSet" | "StatefulSet")
        | ("batch", "Job") => Some("/spec/template"),
        ("batch", "CronJob") => Some("/spec/jobTemplate/spec/template"),
        _ => None,
    }
}

/// Whether `group`/`kind` carries a pod template Pod Security looks at.
pub fn has_template(group: &str, kind: &str) -> bool {
    template_path(group, kind).is_some()
}

/// The pod template of `obj` (`None` for other kinds, or a workload without one).
pub fn template_of<'a>(group: &str, kind: &str, obj: &'a Value) -> Option<&'a Value> {
    obj.pointer(template_path(group, kind)?)
        .filter(|t| !t.is_null())
}

/// Upstream's `isSignificantPodUpdate`: only a changed image, or containers added or removed,
/// is checked again (the rest of a pod's spec cannot change).
pub fn is_significant_pod_update(pod: &Value, old: &Value) -> bool {
    let list = |v: &Value, k: &str| {
        v.pointer(&format!("/spec/{k}"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let image = |c: &Value| c.get("image").cloned();
    for k in ["containers", "initContainers"] {
        let (new, old) = (list(pod, k), list(old, k));
        if new.len() != old.len() || new.iter().zip(&old).any(|(a, b)| image(a) != image(b)) {
            return true;
        }
    }
    let old_ephemeral = list(old, "ephemeralContainers");
    list(pod, "ephemeralContainers").iter().any(|c| {
        match old_ephemeral
            .iter()
            .find(|o| o.get("name") == c.get("name"))
        {
            None => true,
            Some(o) => image(o) != image(c),
        }
    })
}

/// A pod's write (create, update or its `ephemeralcontainers`), already past the exemptions of
/// namespace and user: enforce, audit and warn of the namespace's policy.
pub fn admit_pod(
    config: &Config,
    ns_labels: &BTreeMap<String, String>,
    op: Operation,
    pod: &Value,
    old: Option<&Value>,
) -> Decision {
    let (policy, errs) = policy_to_evaluate(ns_labels, config.defaults);
    if errs.is_empty() && policy.fully_privileged() {
        return Decision::default();
    }
    if op == Operation::Update
        && let Some(old) = old
        && !is_significant_pod_update(pod, old)
    {
        return Decision::default();
    }
    match decode(pod) {
        Some((meta, spec)) => evaluate_pod(config, policy, &meta, &spec, true),
        None => Decision::default(),
    }
}

/// A workload's write: its pod template is warned and audited about, never refused (its pods
/// are, when they are created).
pub fn admit_template(
    config: &Config,
    ns_labels: &BTreeMap<String, String>,
    template: &Value,
) -> Decision {
    let (policy, errs) = policy_to_evaluate(ns_labels, config.defaults);
    if errs.is_empty()
        && policy.warn.level == Level::Privileged
        && policy.audit.level == Level::Privileged
    {
        return Decision::default();
    }
    match decode(template) {
        Some((meta, spec)) => evaluate_pod(config, policy, &meta, &spec, false),
        None => Decision::default(),
    }
}

fn evaluate_pod(
    config: &Config,
    policy: Policy,
    meta: &ObjectMeta,
    spec: &PodSpec,
    enforce: bool,
) -> Decision {
    if config.exempt_runtime_class(spec) {
        return Decision::default();
    }
    let mut cache: Vec<(LevelVersion, Vec<Violation>)> = Vec::new();
    let mut at = |lv: LevelVersion| -> Vec<Violation> {
        if let Some((_, v)) = cache.iter().find(|(c, _)| *c == lv) {
            return v.clone();
        }
        let v = evaluate(lv, meta, spec);
        cache.push((lv, v.clone()));
        v
    };
    let mut d = Decision::default();
    if enforce {
        let v = at(policy.enforce);
        if !v.is_empty() {
            d.forbidden = Some(format!(
                "violates PodSecurity {}: {}",
                quote(&policy.enforce.to_string()),
                forbidden_detail(&v)
            ));
        }
    }
    let v = at(policy.audit);
    if !v.is_empty() {
        d.audit = Some(would_violate(policy.audit, &v));
    }
    // No warnings on a request that is refused anyway.
    if d.forbidden.is_none() {
        let v = at(policy.warn);
        if !v.is_empty() {
            d.warnings.push(would_violate(policy.warn, &v));
        }
    }
    d
}

fn would_violate(lv: LevelVersion, v: &[Violation]) -> String {
    format!(
        "would violate PodSecurity {}: {}",
        quote(&lv.to_string()),
        forbidden_detail(v)
    )
}

mod namespace;
pub use namespace::{NamespaceDecision, admit_namespace, existing_pods_warnings};
