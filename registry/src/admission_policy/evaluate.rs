//! One policy evaluated for one request and one parameter object, as upstream's validator:
//! variables, then `matchConditions` (any false: the policy does not apply), then every
//! validation (its message from `messageExpression`, `message` or the expression itself),
//! then the audit annotations. Evaluation errors become decisions under the failure policy.
//! All expressions of one evaluation share upstream's runtime cost budget.

use berth_shared::cel::{Activation, CelError, PER_CALL_LIMIT, Program, RUNTIME_BUDGET};
use serde_json::{Map, Value};

use super::compiled::{FailurePolicy, Policy, Reason};

/// Upstream's `MaxEvaluatedMessageExpressionSizeBytes`.
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

/// Upstream's message when the cost budget runs out.
const OUT_OF_BUDGET: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";

/// The variables every expression sees (`variables` is computed here).
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    pub object: &'a Value,
    pub old_object: &'a Value,
    pub request: &'a Value,
    pub params: &'a Value,
    pub namespace_object: &'a Value,
}

/// What the request is to be: let through or refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Admit,
    Deny,
}

/// How a decision came about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Evaluation {
    Admit,
    Deny,
    Error,
}

/// The verdict of one validation (or of the whole policy when it could not be evaluated).
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub action: Action,
    pub evaluation: Evaluation,
    pub message: String,
    pub reason: Reason,
    /// The validation's index (0 for a policy-wide error).
    pub index: usize,
}

/// What an audit annotation's `valueExpression` gave.
#[derive(Debug, Clone, PartialEq)]
pub enum Annotation {
    Publish(String),
    Exclude,
    /// The expression failed under `failurePolicy: Fail`: the request is denied.
    Error(String),
}

/// Every decision and annotation of one evaluation; empty when `matchConditions` exclude it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    pub decisions: Vec<Decision>,
    pub annotations: Vec<(String, Annotation)>,
}

impl Outcome {
    fn failed(policy: &Policy, message: String) -> Outcome {
        Outcome {
            decisions: vec![error_decision(policy.failure_policy, message, 0)],
            annotations: Vec::new(),
        }
    }
}

fn error_decision(f: FailurePolicy, message: String, index: usize) -> Decision {
    Decision {
        action: match f {
            FailurePolicy::Fail => Action::Deny,
            FailurePolicy::Ignore => Action::Admit,
        },
        evaluation: Evaluation::Error,
        message,
        reason: Reason::Invalid,
        index,
    }
}

fn expression_error(p: &Program, e: &CelError) -> String {
    format!("expression '{}' resulted in error: {e}", p.source())
}

/// The cost budget of one evaluation.
struct Budget(u64);

impl Budget {
    fn limit(&self) -> u64 {
        self.0.min(PER_CALL_LIMIT)
    }

    fn spend(&mut self, cost: u64) {
        self.0 = self.0.saturating_sub(cost);
    }

    /// Whether a cost-limit error means the whole budget is gone (not just one call's).
    fn exhausted_by(&self, e: &CelError) -> bool {
        matches!(e, CelError::CostLimit) && self.0 < PER_CALL_LIMIT
    }
}

fn bind<'a>(inputs: &Inputs<'a>, variables: &'a Value) -> Activation<'a> {
    let mut a = Activation::new();
    a.bind("object", inputs.object)
        .bind("oldObject", inputs.old_object)
        .bind("request", inputs.request)
        .bind("params", inputs.params)
        .bind("namespaceObject", inputs.namespace_object)
        .bind("variables", variables);
    a
}

/// The `variables` map, each variable evaluated in order with the earlier ones in scope. A
/// variable that fails is left out: an expression reading it fails in its turn.
fn variables(policy: &Policy, inputs: &Inputs<'_>, budget: &mut Budget) -> Value {
    let mut vars = Map::new();
    for (name, program) in &policy.variables {
        let so_far = Value::Object(vars.clone());
        match program.eval_within(&bind(inputs, &so_far), budget.limit()) {
            Ok((v, cost)) => {
                budget.spend(cost);
                vars.insert(name.clone(), v);
            }
            Err(e) => tracing::debug!(policy = %policy.name, variable = %name, error = %e,
                "admission policy variable failed"),
        }
    }
    Value::Object(vars)
}

/// Evaluates `policy` (compiled without error) for `inputs`.
pub fn evaluate(policy: &Policy, inputs: &Inputs<'_>) -> Outcome {
    let mut budget = Budget(RUNTIME_BUDGET);
    let vars = if policy.variables.is_empty() {
        Value::Object(Map::new())
    } else {
        variables(policy, inputs, &mut budget)
    };
    let act = bind(inputs, &vars);

    // matchConditions: any false wins over errors; errors otherwise decide by failure policy.
    let mut errors = Vec::new();
    for (_, program) in &policy.match_conditions {
        match program.eval_bool_within(&act, budget.limit()) {
            Ok((false, _)) => return Outcome::default(),
            Ok((true, cost)) => budget.spend(cost),
            Err(e) if budget.exhausted_by(&e) => {
                return Outcome::failed(policy, OUT_OF_BUDGET.to_string());
            }
            Err(e) => errors.push(expression_error(program, &e)),
        }
    }
    if !errors.is_empty() {
        let message = if errors.len() == 1 {
            errors.remove(0)
        } else {
            format!("[{}]", errors.join(", "))
        };
        return Outcome::failed(policy, message);
    }

    let mut outcome = Outcome::default();
    for (index, v) in policy.validations.iter().enumerate() {
        let passed = match v.expression.eval_bool_within(&act, budget.limit()) {
            Ok((ok, cost)) => {
                budget.spend(cost);
                ok
            }
            // A result that is not `true` fails the validation, as upstream compares with
            // `celtypes.True`.
            Err(CelError::Type { .. }) => false,
            Err(e) if budget.exhausted_by(&e) => {
                return Outcome::failed(policy, OUT_OF_BUDGET.to_string());
            }
            Err(e) => {
                let message = expression_error(&v.expression, &e);
                outcome
                    .decisions
                    .push(error_decision(policy.failure_policy, message, index));
                continue;
            }
        };
        if passed {
            outcome.decisions.push(Decision {
                action: Action::Admit,
                evaluation: Evaluation::Admit,
                message: String::new(),
                reason: v.reason,
                index,
            });
            continue;
        }
        let from_expression = v.message_expression.as_ref().and_then(|m| {
            match m.eval_string_within(&act, budget.limit()) {
                Ok((s, cost)) => {
                    budget.spend(cost);
                    let s = s.trim();
                    (!s.is_empty() && s.len() <= MAX_MESSAGE_BYTES && !s.contains('\n'))
                        .then(|| s.to_string())
                }
                Err(e) => {
                    tracing::debug!(policy = %policy.name, error = %e, "messageExpression failed");
                    None
                }
            }
        });
        let message = from_expression
            .or_else(|| {
                v.message
                    .as_deref()
                    .map(str::trim)
                    .filter(|m| !m.is_empty())
                    .map(String::from)
            })
            .unwrap_or_else(|| format!("failed expression: {}", v.expression.source().trim()));
        outcome.decisions.push(Decision {
            action: Action::Deny,
            evaluation: Evaluation::Deny,
            message,
            reason: v.reason,
            index,
        });
    }

    for a in &policy.audit_annotations {
        let value = match a.value.eval_within(&act, budget.limit()) {
            Ok((Value::String(s), cost)) => {
                budget.spend(cost);
                match s.trim() {
                    "" => Annotation::Exclude,
                    t => Annotation::Publish(t.to_string()),
                }
            }
            Ok((Value::Null, _)) => Annotation::Exclude,
            Ok((other, _)) => Annotation::Error(format!(
                "valueExpression '{}' resulted in unsupported return type: {}. Return type must be either string or null.",
                a.value.source(),
                json_type(&other)
            )),
            Err(_) if policy.failure_policy == FailurePolicy::Ignore => Annotation::Exclude,
            Err(e) => Annotation::Error(expression_error(&a.value, &e)),
        };
        outcome.annotations.push((a.key.clone(), value));
    }
    outcome
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null_type",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_i64() || n.is_u64() => "int",
        Value::Number(_) => "double",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "map",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(spec: Value) -> Policy {
        let p = Policy::compile(&json!({"metadata": {"name": "p"}, "spec": spec}));
        assert_eq!(p.error, None);
        p
    }

    fn run(p: &Policy, object: &Value, params: &Value) -> Outcome {
        let request = json!({"operation": "CREATE", "namespace": "team",
            "userInfo": {"username": "alice"}});
        let ns = json!({"metadata": {"name": "team", "labels": {"env": "test"}}});
        evaluate(
            p,
            &Inputs {
                object,
                old_object: &Value::Null,
                request: &request,
                params,
                namespace_object: &ns,
            },
        )
    }

    fn deployment(replicas: i64) -> Value {
        json!({"metadata": {"name": "web"}, "spec": {"replicas": replicas}})
    }

    fn actions(o: &Outcome) -> Vec<(Action, Evaluation)> {
        o.decisions
            .iter()
            .map(|d| (d.action, d.evaluation))
            .collect()
    }

    #[test]
    fn a_failed_validation_denies_with_its_message_else_the_expression() {
        let p = policy(json!({"validations": [
            {"expression": "object.spec.replicas <= 5", "message": " at most 5 replicas "},
            {"expression": "object.spec.replicas <= 3"},
            {"expression": "object.metadata.name == 'web'"},
        ]}));
        let o = run(&p, &deployment(6), &Value::Null);
        assert_eq!(
            actions(&o),
            [
                (Action::Deny, Evaluation::Deny),
                (Action::Deny, Evaluation::Deny),
                (Action::Admit, Evaluation::Admit)
            ]
        );
        assert_eq!(o.decisions[0].message, "at most 5 replicas");
        assert_eq!(
            o.decisions[1].message,
            "failed expression: object.spec.replicas <= 3"
        );
        assert_eq!(o.decisions[0].reason, Reason::Invalid);
        let o = run(&p, &deployment(2), &Value::Null);
        assert!(o.decisions.iter().all(|d| d.action == Action::Admit));
    }

    #[test]
    fn message_expressions_see_params_variables_and_the_request() {
        let p = policy(json!({
            "variables": [{"name": "max", "expression": "int(params.data.max)"},
                          {"name": "over", "expression": "object.spec.replicas - variables.max"}],
            "validations": [{"expression": "object.spec.replicas <= variables.max",
                "reason": "Forbidden",
                "messageExpression": "request.userInfo.username + ' asked ' + string(variables.over) + ' too many in ' + namespaceObject.metadata.labels.env"}]
        }));
        let params = json!({"data": {"max": "4"}});
        let o = run(&p, &deployment(6), &params);
        assert_eq!(o.decisions[0].message, "alice asked 2 too many in test");
        assert_eq!(o.decisions[0].reason, Reason::Forbidden);
        assert_eq!(o.decisions[0].action, Action::Deny);
    }

    #[test]
    fn a_message_expression_that_fails_or_spans_lines_falls_back() {
        let p = policy(json!({"validations": [
            {"expression": "false", "message": "fixed", "messageExpression": "object.nope"},
            {"expression": "false", "message": "fixed", "messageExpression": "'a\\nb'"},
        ]}));
        let o = run(&p, &deployment(1), &Value::Null);
        assert_eq!(o.decisions[0].message, "fixed");
        assert_eq!(o.decisions[1].message, "fixed");
    }

    #[test]
    fn evaluation_errors_follow_the_failure_policy() {
        let spec = |f: &str| json!({"failurePolicy": f, "validations": [{"expression": "object.spec.missing > 1"}]});
        let o = run(&policy(spec("Fail")), &deployment(1), &Value::Null);
        assert_eq!(actions(&o), [(Action::Deny, Evaluation::Error)]);
        assert!(
            o.decisions[0]
                .message
                .starts_with("expression 'object.spec.missing > 1' resulted in error: "),
            "{}",
            o.decisions[0].message
        );
        let o = run(&policy(spec("Ignore")), &deployment(1), &Value::Null);
        assert_eq!(actions(&o), [(Action::Admit, Evaluation::Error)]);
    }

    #[test]
    fn a_false_match_condition_skips_the_policy_and_errors_decide_by_failure_policy() {
        let p = policy(json!({
            "matchConditions": [{"name": "big", "expression": "object.spec.replicas > 2"}],
            "validations": [{"expression": "false"}]
        }));
        assert_eq!(run(&p, &deployment(1), &Value::Null), Outcome::default());
        assert_eq!(
            actions(&run(&p, &deployment(3), &Value::Null)),
            [(Action::Deny, Evaluation::Deny)]
        );
        let p = policy(json!({
            "matchConditions": [{"name": "a", "expression": "object.nope"},
                                {"name": "b", "expression": "object.spec.replicas > 2"}],
            "validations": [{"expression": "true"}]
        }));
        // A false condition wins over an erroring one.
        assert_eq!(run(&p, &deployment(1), &Value::Null), Outcome::default());
        let o = run(&p, &deployment(3), &Value::Null);
        assert_eq!(actions(&o), [(Action::Deny, Evaluation::Error)]);
    }

    #[test]
    fn a_non_boolean_result_fails_the_validation() {
        let p = policy(json!({"validations": [{"expression": "object.metadata.name"}]}));
        let o = run(&p, &deployment(1), &Value::Null);
        assert_eq!(actions(&o), [(Action::Deny, Evaluation::Deny)]);
    }

    #[test]
    fn audit_annotations_publish_strings_and_exclude_null_and_empty() {
        let p = policy(json!({"auditAnnotations": [
            {"key": "replicas", "valueExpression": "'replicas: ' + string(object.spec.replicas)"},
            {"key": "none", "valueExpression": "null"},
            {"key": "blank", "valueExpression": "'  '"},
            {"key": "number", "valueExpression": "object.spec.replicas"},
        ]}));
        let o = run(&p, &deployment(4), &Value::Null);
        assert_eq!(
            o.annotations[0].1,
            Annotation::Publish("replicas: 4".into())
        );
        assert_eq!(o.annotations[1].1, Annotation::Exclude);
        assert_eq!(o.annotations[2].1, Annotation::Exclude);
        assert!(
            matches!(&o.annotations[3].1, Annotation::Error(m) if m.contains("unsupported return type: int")),
            "{:?}",
            o.annotations[3]
        );
    }

    #[test]
    fn a_runaway_expression_is_stopped_by_the_cost_limit() {
        let p = policy(json!({"validations": [{"expression":
            "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, [1,2,3,4,5,6,7,8,9,10].all(d, [1,2,3,4,5,6,7,8,9,10].all(e, [1,2,3,4,5,6,7,8,9,10].all(f, a+b+c+d+e+f > 0))))))"}]}));
        let o = run(&p, &deployment(1), &Value::Null);
        assert_eq!(actions(&o), [(Action::Deny, Evaluation::Error)]);
        assert!(
            o.decisions[0].message.contains("cost limit exceeded"),
            "{}",
            o.decisions[0].message
        );
    }
}
