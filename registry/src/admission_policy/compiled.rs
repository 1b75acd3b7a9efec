//! Stored ValidatingAdmissionPolicies and their bindings, compiled once per version: CEL
//! programs for every expression, parsed match constraints, the failure policy and actions.
//! A policy that cannot be compiled (an object stored before validation refused it) keeps its
//! error, which every request it matches meets under its failure policy, as upstream's
//! `ConfigurationError`.

use berth_shared::cel::Program;
use berth_shared::k8s_openapi::api::admissionregistration::v1::{
    ParamKind, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use berth_shared::k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as K8sSelector;
use serde_json::Value;

use super::matching::Constraints;

/// What a failure to evaluate (or to configure) a policy does to the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailurePolicy {
    Fail,
    Ignore,
}

/// The status reason a failed validation answers with, and its HTTP code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Invalid,
    Forbidden,
    Unauthorized,
    RequestEntityTooLarge,
}

impl Reason {
    pub fn parse(s: &str) -> Reason {
        match s {
            "Forbidden" => Reason::Forbidden,
            "Unauthorized" => Reason::Unauthorized,
            "RequestEntityTooLarge" => Reason::RequestEntityTooLarge,
            // Validation allows no other value; upstream answers anything else as Invalid.
            _ => Reason::Invalid,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Invalid => "Invalid",
            Reason::Forbidden => "Forbidden",
            Reason::Unauthorized => "Unauthorized",
            Reason::RequestEntityTooLarge => "RequestEntityTooLarge",
        }
    }

    /// Upstream's `reasonToCode`.
    pub fn code(self) -> u16 {
        match self {
            Reason::Invalid => 422,
            Reason::Forbidden => 403,
            Reason::Unauthorized => 401,
            Reason::RequestEntityTooLarge => 413,
        }
    }
}

/// One compiled `validations` entry.
#[derive(Debug, Clone)]
pub struct Validation {
    pub expression: Program,
    pub message: Option<String>,
    pub message_expression: Option<Program>,
    pub reason: Reason,
}

/// One compiled `auditAnnotations` entry.
#[derive(Debug, Clone)]
pub struct AuditAnnotation {
    pub key: String,
    pub value: Program,
}

/// A policy ready to evaluate.
#[derive(Debug, Clone)]
pub struct Policy {
    pub name: String,
    pub failure_policy: FailurePolicy,
    pub param_kind: Option<ParamKind>,
    pub constraints: Option<Constraints>,
    pub match_conditions: Vec<(String, Program)>,
    pub variables: Vec<(String, Program)>,
    pub validations: Vec<Validation>,
    pub audit_annotations: Vec<AuditAnnotation>,
    /// Why the policy could not be compiled, if it could not.
    pub error: Option<String>,
}

/// A binding's `paramRef`.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamRef {
    pub name: Option<String>,
    pub namespace: Option<String>,
    pub selector: Option<K8sSelector>,
    /// `parameterNotFoundAction: Deny`.
    pub deny_when_missing: bool,
}

/// What a binding does with a failed validation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Actions {
    pub deny: bool,
    pub warn: bool,
    pub audit: bool,
}

/// A binding ready to dispatch.
#[derive(Debug, Clone)]
pub struct Binding {
    pub name: String,
    pub policy_name: String,
    pub param_ref: Option<ParamRef>,
    /// `matchResources`, when the binding narrows the policy's constraints.
    pub constraints: Option<Constraints>,
    pub actions: Actions,
    pub error: Option<String>,
}

/// The string at `pointer` in a stored object, empty when absent: the name a policy or binding
/// is known by even when the rest of it does not decode.
fn string_at(obj: &Value, pointer: &str) -> String {
    obj.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn compile(expr: &str) -> Result<Program, String> {
    Program::compile(expr).map_err(|e| format!("compilation failed: {e}"))
}

impl Policy {
    /// Compiles a stored policy; errors stay in [`Policy::error`].
    pub fn compile(obj: &Value) -> Policy {
        let mut policy = Policy {
            name: string_at(obj, "/metadata/name"),
            failure_policy: FailurePolicy::Fail,
            param_kind: None,
            constraints: None,
            match_conditions: Vec::new(),
            variables: Vec::new(),
            validations: Vec::new(),
            audit_annotations: Vec::new(),
            error: None,
        };
        if let Err(e) = policy.fill(obj) {
            policy.error = Some(e);
        }
        policy
    }

    fn fill(&mut self, obj: &Value) -> Result<(), String> {
        let typed: ValidatingAdmissionPolicy =
            serde_json::from_value(obj.clone()).map_err(|e| e.to_string())?;
        let spec = typed.spec.unwrap_or_default();
        self.failure_policy = match spec.failure_policy.as_deref() {
            Some("Ignore") => FailurePolicy::Ignore,
            _ => FailurePolicy::Fail,
        };
        self.param_kind = spec.param_kind;
        self.constraints = spec
            .match_constraints
            .as_ref()
            .map(Constraints::new)
            .transpose()?;
        for c in spec.match_conditions.unwrap_or_default() {
            self.match_conditions
                .push((c.name.clone(), compile(&c.expression)?));
        }
        for v in spec.variables.unwrap_or_default() {
            self.variables
                .push((v.name.clone(), compile(&v.expression)?));
        }
        for v in spec.validations.unwrap_or_default() {
            let message_expression = match v.message_expression.as_deref().map(str::trim) {
                Some(m) if !m.is_empty() => Some(compile(m)?),
                _ => None,
            };
            self.validations.push(Validation {
                expression: compile(&v.expression)?,
                message: v.message.clone(),
                message_expression,
                reason: v.reason.as_deref().map_or(Reason::Invalid, Reason::parse),
            });
        }
        for a in spec.audit_annotations.unwrap_or_default() {
            self.audit_annotations.push(AuditAnnotation {
                key: a.key.clone(),
                value: compile(a.value_expression.trim())?,
            });
        }
        Ok(())
    }
}

impl Binding {
    /// Compiles a stored binding; errors stay in [`Binding::error`].
    pub fn compile(obj: &Value) -> Binding {
        let mut binding = Binding {
            name: string_at(obj, "/metadata/name"),
            policy_name: string_at(obj, "/spec/policyName"),
            param_ref: None,
            constraints: None,
            actions: Actions::default(),
            error: None,
        };
        if let Err(e) = binding.fill(obj) {
            binding.error = Some(e);
        }
        binding
    }

    fn fill(&mut self, obj: &Value) -> Result<(), String> {
        let typed: ValidatingAdmissionPolicyBinding =
            serde_json::from_value(obj.clone()).map_err(|e| e.to_string())?;
        let spec = typed.spec.unwrap_or_default();
        self.param_ref = spec.param_ref.map(|p| ParamRef {
            name: p.name.filter(|n| !n.is_empty()),
            namespace: p.namespace.filter(|n| !n.is_empty()),
            selector: p.selector,
            deny_when_missing: p.parameter_not_found_action.as_deref() == Some("Deny"),
        });
        self.constraints = spec
            .match_resources
            .as_ref()
            .map(Constraints::new)
            .transpose()?;
        for a in spec.validation_actions.unwrap_or_default() {
            match a.as_str() {
                "Deny" => self.actions.deny = true,
                "Warn" => self.actions.warn = true,
                "Audit" => self.actions.audit = true,
                _ => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_policy_compiles_its_expressions_and_defaults_its_failure_policy() {
        let p = Policy::compile(&json!({
            "metadata": {"name": "replicas"},
            "spec": {
                "matchConstraints": {"resourceRules": []},
                "variables": [{"name": "r", "expression": "object.spec.replicas"}],
                "validations": [{"expression": "variables.r <= 5", "reason": "Forbidden",
                                 "messageExpression": "  'too many: ' + string(variables.r) "}],
            }
        }));
        assert_eq!(p.error, None);
        assert_eq!(p.name, "replicas");
        assert_eq!(p.failure_policy, FailurePolicy::Fail);
        assert_eq!(p.variables.len(), 1);
        assert_eq!(p.validations[0].reason, Reason::Forbidden);
        assert!(p.validations[0].message_expression.is_some());
    }

    #[test]
    fn a_policy_that_does_not_compile_keeps_its_error() {
        let p = Policy::compile(&json!({
            "metadata": {"name": "broken"},
            "spec": {"failurePolicy": "Ignore", "validations": [{"expression": "object.spec.("}]}
        }));
        assert_eq!(p.failure_policy, FailurePolicy::Ignore);
        let e = p.error.expect("an error");
        assert!(e.starts_with("compilation failed: "), "{e}");
    }

    #[test]
    fn a_binding_reads_its_actions_and_param_ref() {
        let b = Binding::compile(&json!({
            "metadata": {"name": "b"},
            "spec": {"policyName": "p", "validationActions": ["Warn", "Audit"],
                     "paramRef": {"name": "limits", "parameterNotFoundAction": "Deny"}}
        }));
        assert_eq!(b.error, None);
        assert_eq!(b.policy_name, "p");
        assert_eq!(
            b.actions,
            Actions {
                deny: false,
                warn: true,
                audit: true
            }
        );
        let p = b.param_ref.expect("a paramRef");
        assert_eq!(p.name.as_deref(), Some("limits"));
        assert!(p.deny_when_missing);
    }

    #[test]
    fn reasons_answer_with_upstream_codes() {
        for (reason, code) in [
            ("Invalid", 422),
            ("Forbidden", 403),
            ("Unauthorized", 401),
            ("RequestEntityTooLarge", 413),
        ] {
            assert_eq!(Reason::parse(reason).code(), code, "{reason}");
            assert_eq!(Reason::parse(reason).as_str(), reason);
        }
    }
}
