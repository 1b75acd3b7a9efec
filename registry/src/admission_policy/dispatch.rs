//! Every policy and binding applied to one request, as upstream's validating dispatcher:
//! for each policy whose constraints match, each of its bindings that matches is evaluated
//! once per parameter object; a failed validation is denied, warned of or audited as the
//! binding's `validationActions` say; configuration errors and evaluation errors go by the
//! policy's failure policy. The first denial answers the request.

use std::sync::Arc;

use serde_json::Value;

use super::compiled::{Binding, FailurePolicy, Policy, Reason};
use super::evaluate::{self, Action, Annotation, Inputs};
use super::matching::{Attributes, Match, labels_of};
use super::params::{self, ParamSource};
use super::request::Requester;

/// A policy with the bindings that name it.
#[derive(Debug, Clone)]
pub struct Hook {
    pub policy: Arc<Policy>,
    pub bindings: Vec<Arc<Binding>>,
}

/// What dispatch reads besides the request: namespaces and parameter objects.
pub trait Lookup: ParamSource {
    /// The Namespace `name`; an error when it cannot be read or does not exist.
    fn namespace(&self, name: &str) -> Result<Value, String>;
}

/// One request as dispatch sees it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub attributes: Attributes<'a>,
    /// The other versions the request's resource is served at (`matchPolicy: Equivalent`).
    pub equivalents: &'a [&'a str],
    pub user: Requester<'a>,
    pub dry_run: bool,
}

/// Why a request is refused.
#[derive(Debug, Clone, PartialEq)]
pub struct Denial {
    pub policy: String,
    pub binding: Option<String>,
    pub message: String,
    pub reason: Reason,
}

impl Denial {
    /// Upstream's message (`ValidatingAdmissionPolicy 'p' with binding 'b' denied request: m`).
    pub fn text(&self) -> String {
        match &self.binding {
            Some(b) => format!(
                "ValidatingAdmissionPolicy '{}' with binding '{b}' denied request: {}",
                self.policy, self.message
            ),
            None => format!(
                "ValidatingAdmissionPolicy '{}' denied request: {}",
                self.policy, self.message
            ),
        }
    }
}

/// Everything the policies made of one request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdict {
    /// The first denial, if any.
    pub denial: Option<Denial>,
    /// `Warning` headers for the answer.
    pub warnings: Vec<String>,
    /// What upstream writes to the audit log: `validation_failure` records of bindings with
    /// the Audit action, and the policies' audit annotations (`policy/key`, value).
    pub audit: Vec<(String, String)>,
}

/// The resources policies never apply to (upstream's `isPolicyResource`): a policy cannot lock
/// out the objects that would fix it.
fn is_policy_resource(a: &Attributes<'_>) -> bool {
    a.group == "admissionregistration.k8s.io"
        && matches!(
            a.resource,
            "validatingadmissionpolicies"
                | "validatingadmissionpolicybindings"
                | "mutatingadmissionpolicies"
                | "mutatingadmissionpolicybindings"
        )
}

struct Dispatch<'a> {
    verdict: Verdict,
    denials: Vec<Denial>,
    lookup: &'a dyn Lookup,
}

impl Dispatch<'_> {
    /// Upstream's `addConfigError`.
    fn config_error(&mut self, policy: &Policy, binding: Option<&Binding>, error: &str) {
        if policy.failure_policy == FailurePolicy::Ignore {
            return;
        }
        let message = match binding {
            None => format!("failed to configure policy: {error}"),
            Some(_) => format!("failed to configure binding: {error}"),
        };
        self.denials.push(Denial {
            policy: policy.name.clone(),
            binding: binding.map(|b| b.name.clone()),
            message,
            reason: Reason::Invalid,
        });
    }

    fn namespace_labels(
        &self,
        name: &str,
    ) -> Result<std::collections::BTreeMap<String, String>, String> {
        self.lookup.namespace(name).map(|n| labels_of(Some(&n)))
    }
}

/// Applies `hooks` to `req`.
pub fn dispatch(hooks: &[Hook], req: &Request<'_>, lookup: &dyn Lookup) -> Verdict {
    let a = &req.attributes;
    if hooks.is_empty() || is_policy_resource(a) {
        return Verdict::default();
    }
    let mut d = Dispatch {
        verdict: Verdict::default(),
        denials: Vec::new(),
        lookup,
    };
    let mut request: Option<Value> = None;
    // The namespace object, read at most once: `None` until read.
    let mut namespace: Option<Value> = None;
    for hook in hooks {
        let policy = &*hook.policy;
        let Some(constraints) = &policy.constraints else {
            if let Some(e) = &policy.error {
                // Constraints that could not be read: upstream cannot tell whether the policy
                // applies; it reports the error on every request it would see.
                d.config_error(policy, None, e);
            }
            continue;
        };
        match constraints.matches(a, req.equivalents, || d.namespace_labels(a.namespace)) {
            Match::No => continue,
            Match::Error(e) => {
                d.config_error(policy, None, &e);
                continue;
            }
            Match::Yes => {}
        }
        if let Some(e) = &policy.error {
            d.config_error(policy, None, e);
            continue;
        }
        let mut annotations: Vec<(String, String)> = Vec::new();
        for binding in &hook.bindings {
            let binding = &**binding;
            if let Some(e) = &binding.error {
                d.config_error(policy, Some(binding), e);
                continue;
            }
            if let Some(c) = &binding.constraints {
                match c.matches(a, req.equivalents, || d.namespace_labels(a.namespace)) {
                    Match::No => continue,
                    Match::Error(e) => {
                        d.config_error(policy, Some(binding), &e);
                        continue;
                    }
                    Match::Yes => {}
                }
            }
            let params = match params::collect(
                policy.param_kind.as_ref(),
                binding.param_ref.as_ref(),
                a.namespace,
                lookup,
            ) {
                Ok(p) => p,
                Err(e) => {
                    d.config_error(policy, Some(binding), &e);
                    continue;
                }
            };
            if namespace.is_none() && !a.namespace.is_empty() && !a.is_namespace() {
                match lookup.namespace(a.namespace) {
                    Ok(ns) => namespace = Some(namespace_object(&ns)),
                    Err(e) => {
                        d.config_error(policy, Some(binding), &e);
                        continue;
                    }
                }
            }
            let request =
                request.get_or_insert_with(|| super::request::request(a, req.user, req.dry_run));
            for param in &params {
                let inputs = Inputs {
                    object: a.object.unwrap_or(&Value::Null),
                    old_object: a.old_object.unwrap_or(&Value::Null),
                    request,
                    params: param.as_ref().unwrap_or(&Value::Null),
                    namespace_object: namespace.as_ref().unwrap_or(&Value::Null),
                };
                let outcome = evaluate::evaluate(policy, &inputs);
                for decision in outcome.decisions {
                    if decision.action != Action::Deny {
                        continue;
                    }
                    if binding.actions.deny {
                        d.denials.push(Denial {
                            policy: policy.name.clone(),
                            binding: Some(binding.name.clone()),
                            message: decision.message.clone(),
                            reason: decision.reason,
                        });
                    }
                    if binding.actions.audit {
                        d.verdict.audit.push((
                            "validation.policy.admission.k8s.io/validation_failure".into(),
                            serde_json::json!([{
                                "message": decision.message,
                                "policy": policy.name,
                                "binding": binding.name,
                                "expressionIndex": decision.index,
                                "validationActions": actions_list(binding),
                            }])
                            .to_string(),
                        ));
                    }
                    if binding.actions.warn {
                        d.verdict.warnings.push(format!(
                            "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {}",
                            policy.name, binding.name, decision.message
                        ));
                    }
                }
                for (key, annotation) in outcome.annotations {
                    match annotation {
                        Annotation::Publish(value) => {
                            let value: String = value.chars().take(10 * 1024).collect();
                            if !annotations.iter().any(|(k, v)| *k == key && *v == value) {
                                annotations.push((key, value));
                            }
                        }
                        Annotation::Error(message) => d.denials.push(Denial {
                            policy: policy.name.clone(),
                            binding: Some(binding.name.clone()),
                            message,
                            reason: Reason::Invalid,
                        }),
                        Annotation::Exclude => {}
                    }
                }
            }
        }
        publish_annotations(&mut d.verdict, &policy.name, annotations);
    }
    d.verdict.denial = d.denials.into_iter().next();
    d.verdict
}

/// Upstream's collector: one annotation per key, several bindings' distinct values joined.
fn publish_annotations(verdict: &mut Verdict, policy: &str, annotations: Vec<(String, String)>) {
    let mut keys: Vec<&String> = annotations.iter().map(|(k, _)| k).collect();
    keys.dedup();
    for key in keys {
        let values: Vec<&str> = annotations
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect();
        verdict
            .audit
            .push((format!("{policy}/{key}"), values.join(", ")));
    }
}

fn actions_list(b: &Binding) -> Vec<&'static str> {
    [
        (b.actions.deny, "Deny"),
        (b.actions.warn, "Warn"),
        (b.actions.audit, "Audit"),
    ]
    .into_iter()
    .filter_map(|(on, name)| on.then_some(name))
    .collect()
}

/// The `namespaceObject` variable: the namespace's spec, status and the metadata upstream's
/// `CreateNamespaceObject` keeps (not its managedFields or owner references).
fn namespace_object(ns: &Value) -> Value {
    const KEPT: &[&str] = &[
        "name",
        "generateName",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "finalizers",
    ];
    let mut out = serde_json::Map::new();
    if let Some(meta) = ns.get("metadata").and_then(Value::as_object) {
        let kept = meta
            .iter()
            .filter(|(k, _)| KEPT.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        out.insert("metadata".into(), Value::Object(kept));
    }
    for part in ["spec", "status"] {
        if let Some(v) = ns.get(part) {
            out.insert(part.into(), v.clone());
        }
    }
    Value::Object(out)
}
