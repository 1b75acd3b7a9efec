//! CustomResourceDefinition validation rules (`x-kubernetes-validations`), evaluated as
//! upstream's apiextensions CEL validator does.
//!
//! The schema (a version's `openAPIV3Schema`) is walked together with the object. At each
//! node with rules, each rule runs with `self` bound to the value there and `oldSelf` to the
//! old object's value at the same place, when there is one: object properties and map values
//! correlate by name, list items only in `x-kubernetes-list-type: map` lists, by their
//! `x-kubernetes-list-map-keys`. Null values are not validated. A transition rule (one naming
//! `oldSelf`) is skipped without an old value unless `optionalOldSelf` is set, in which case
//! `oldSelf` is an optional. Errors go at the node's path (or its `fieldPath`), with the
//! `message`, the `messageExpression`'s result or `failed rule: <rule>`, typed by `reason`.
//!
//! Costs: each rule within [`PER_CALL_LIMIT`], all of them within [`RUNTIME_BUDGET`]; past
//! either the validation stops with upstream's messages. Ratcheting as upstream's
//! (CRDValidationRatcheting, on by default since 1.30): a failing rule that does not use
//! `oldSelf` on a value unchanged since the old object (or under an unchanged correlated
//! ancestor) is a warning, not an error.

mod definition;
mod field_path;
mod rule;

use std::collections::HashMap;

use serde_json::Value;

use super::{Activation, CelError, PER_CALL_LIMIT, RUNTIME_BUDGET};
use crate::admission::FieldError;
use rule::{Rule, compiled, invalid};

pub use definition::compile_errors;
pub use field_path::{FieldPathError, Walked, walk as walk_field_path};

/// The longest `messageExpression` result used as a message (upstream's
/// `MaxEvaluatedMessageExpressionSizeBytes`).
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

/// What validating an object found: errors refuse the write, warnings (ratcheted errors) go
/// back to the client.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Outcome {
    pub errors: Vec<FieldError>,
    pub warnings: Vec<String>,
}

/// The rule errors of `new` (with `old` on update) against `schema`.
pub fn check(schema: &Value, new: &Value, old: Option<&Value>) -> Vec<FieldError> {
    validate(schema, new, old).errors
}

/// [`check`], with the ratcheted errors as warnings.
pub fn validate(schema: &Value, new: &Value, old: Option<&Value>) -> Outcome {
    validate_within(schema, new, old, RUNTIME_BUDGET)
}

/// [`validate`] with a total cost budget of `budget`.
pub fn validate_within(schema: &Value, new: &Value, old: Option<&Value>, budget: u64) -> Outcome {
    let mut walk = Walk {
        budget,
        out: Outcome::default(),
        has_rules: HashMap::new(),
        stopped: false,
    };
    walk.node(schema, &NodePath::Root, new, old, None);
    walk.out
}

/// Where a node is; the root renders as upstream's nil `field.Path` does, `<nil>`.
enum NodePath {
    Root,
    At(String),
}

impl NodePath {
    fn render(&self) -> &str {
        match self {
            NodePath::Root => "<nil>",
            NodePath::At(p) => p,
        }
    }

    fn base(&self) -> &str {
        match self {
            NodePath::Root => "",
            NodePath::At(p) => p,
        }
    }

    fn child(&self, name: &str) -> NodePath {
        match self {
            NodePath::Root => NodePath::At(name.to_string()),
            NodePath::At(p) => NodePath::At(format!("{p}.{name}")),
        }
    }

    fn key(&self, key: &str) -> NodePath {
        NodePath::At(format!("{}[{key}]", self.base()))
    }

    fn index(&self, i: usize) -> NodePath {
        NodePath::At(format!("{}[{i}]", self.base()))
    }
}

/// The nearest node (this one or an ancestor) that has an old value: `(new, old)`.
type Correlated<'v> = Option<(&'v Value, &'v Value)>;

struct Walk {
    budget: u64,
    out: Outcome,
    /// Whether a schema node or anything under it has rules, by node address (the schema is
    /// borrowed for the whole walk, so addresses are stable).
    has_rules: HashMap<*const Value, bool>,
    /// Set when a cost limit ended the validation.
    stopped: bool,
}

impl Walk {
    fn subtree_has_rules(&mut self, schema: &Value) -> bool {
        let key = schema as *const Value;
        if let Some(&known) = self.has_rules.get(&key) {
            return known;
        }
        let found = schema.get("x-kubernetes-validations").is_some()
            || children_of(schema).any(|c| self.subtree_has_rules(c));
        self.has_rules.insert(key, found);
        found
    }

    fn node<'v>(
        &mut self,
        schema: &Value,
        path: &NodePath,
        value: &'v Value,
        old: Option<&'v Value>,
        nearest: Correlated<'v>,
    ) {
        if self.stopped || value.is_null() || !self.subtree_has_rules(schema) {
            return;
        }
        let old = old.filter(|o| !o.is_null());
        let nearest = old.map(|o| (value, o)).or(nearest);
        self.rules(schema, path, value, old, nearest);
        if let Some(Value::Array(all_of)) = schema.get("allOf") {
            for sub in all_of {
                self.node(sub, path, value, old, nearest);
            }
        }
        match value {
            Value::Object(fields) => {
                let props = schema.get("properties").and_then(Value::as_object);
                let additional = schema.get("additionalProperties").filter(|a| a.is_object());
                for (k, v) in fields {
                    let old_v = old.and_then(|o| o.get(k));
                    if let Some(sub) = additional {
                        self.node(sub, &path.key(k), v, old_v, nearest);
                    }
                    if let Some(sub) = props.and_then(|p| p.get(k)) {
                        self.node(sub, &path.child(k), v, old_v, nearest);
                    }
                }
            }
            Value::Array(items) => {
                let Some(item_schema) = schema.get("items").filter(|i| i.is_object()) else {
                    return;
                };
                let old_items = MapList::new(schema, old);
                for (i, item) in items.iter().enumerate() {
                    let old_item = old_items.as_ref().and_then(|m| m.get(item));
                    self.node(item_schema, &path.index(i), item, old_item, nearest);
                }
            }
            _ => {}
        }
    }

    fn rules(
        &mut self,
        schema: &Value,
        path: &NodePath,
        value: &Value,
        old: Option<&Value>,
        nearest: Correlated<'_>,
    ) {
        let rules = Rule::all_of(schema);
        if rules.is_empty() {
            return;
        }
        let type_name = schema
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let at = path.render();
        if self.budget == 0 {
            return self.stop(invalid(at, type_name, out_of_budget()));
        }
        // Values are converted for CEL once per node (per activation), when a rule reads them.
        let mut vars = Activation::new();
        vars.bind_typed("self", value, schema);
        if let Some(o) = old {
            vars.bind_typed("oldSelf", o, schema);
        }
        let mut optional_vars = None;

        for rule in rules {
            let program = match compiled(rule.rule) {
                Ok(p) => p,
                Err(e) => {
                    self.out.errors.push(invalid(
                        at,
                        type_name,
                        format!("rule compile error: {e}"),
                    ));
                    continue;
                }
            };
            let optional = rule.optional_old_self == Some(true);
            let transition = program.references("oldSelf");
            if transition && old.is_none() && !optional {
                continue;
            }
            let activation = if optional {
                optional_vars.get_or_insert_with(|| {
                    let mut a = Activation::new();
                    a.bind_typed("self", value, schema)
                        .bind_optional("oldSelf", old);
                    a
                })
            } else {
                &vars
            };
            let passed = match program.eval_bool_within(activation, PER_CALL_LIMIT) {
                Ok((_, cost)) if cost > self.budget => {
                    return self.stop(invalid(at, type_name, out_of_budget()));
                }
                Ok((passed, cost)) => {
                    self.budget -= cost;
                    passed
                }
                Err(CelError::CostLimit) => {
                    let detail = format!(
                        "'{}': no further validation rules will be run due to call cost exceeds limit for rule: {}",
                        CelError::CostLimit,
                        rule.error_string()
                    );
                    return self.stop(invalid(at, type_name, detail));
                }
                Err(e) => {
                    self.out
                        .errors
                        .push(invalid(at, type_name, eval_error(&e, &rule)));
                    continue;
                }
            };
            if passed {
                continue;
            }
            let error_path = match rule.field_path {
                "" => at.to_string(),
                fp => {
                    field_path::resolve(fp, schema, path.base()).unwrap_or_else(|_| at.to_string())
                }
            };
            let detail = match self.message(&rule, &vars) {
                Ok(detail) => detail,
                Err(stop) => return self.stop(invalid(&error_path, type_name, stop)),
            };
            let err = rule.failure(&error_path, type_name, detail);
            if !transition && nearest.is_some_and(|(n, o)| n == o) {
                self.out.warnings.push(err.message());
            } else {
                self.out.errors.push(err);
            }
        }
    }

    /// The failure message: the `messageExpression`'s result when it gives a usable one, else
    /// the rule's message or default. Running out of cost stops the validation (`Err`, with the
    /// detail of the error that says so).
    fn message(&mut self, rule: &Rule<'_>, vars: &Activation<'_>) -> Result<String, String> {
        let expr = rule.message_expression;
        if expr.trim().is_empty() {
            return Ok(rule.message_or_default());
        }
        let Ok(program) = compiled(expr) else {
            return Ok(rule.message_or_default());
        };
        match program.eval_string_within(vars, PER_CALL_LIMIT) {
            Ok((_, cost)) if cost > self.budget => Err(
                "messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run".to_string(),
            ),
            Ok((message, cost)) => {
                self.budget -= cost;
                let message = message.trim();
                let usable = !message.is_empty()
                    && message.len() <= MAX_MESSAGE_BYTES
                    && !message.contains('\n');
                Ok(if usable {
                    message.to_string()
                } else {
                    rule.message_or_default()
                })
            }
            Err(CelError::CostLimit) => Err(
                format!(
                    "no further validation rules will be run due to call cost exceeds limit for messageExpression: {}",
                    rule::go_quote(expr)
                ),
            ),
            Err(_) => Ok(rule.message_or_default()),
        }
    }

    fn stop(&mut self, err: FieldError) {
        self.out.errors.push(err);
        self.stopped = true;
    }
}

fn out_of_budget() -> String {
    "validation failed due to running out of cost budget, no further validation rules will be run"
        .to_string()
}

/// Upstream's detail for a rule that failed to evaluate.
fn eval_error(e: &CelError, rule: &Rule<'_>) -> String {
    let e = e.to_string();
    if e.starts_with("no such overload") {
        format!(
            "'{e}': call arguments did not match a supported operator, function or macro signature for rule: {}",
            rule.error_string()
        )
    } else {
        format!("{e} evaluating rule: {}", rule.error_string())
    }
}

/// The schemas directly under `schema`: properties, additionalProperties, items, allOf.
fn children_of(schema: &Value) -> impl Iterator<Item = &Value> {
    let props = schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|p| p.values());
    let all_of = schema
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    let single = ["additionalProperties", "items"]
        .into_iter()
        .filter_map(|k| schema.get(k).filter(|s| s.is_object()));
    props.chain(all_of).chain(single)
}

/// The old items of an `x-kubernetes-list-type: map` list by their keys; `None` for other
/// lists, whose items do not correlate.
struct MapList<'v> {
    /// Each key field and its schema default.
    keys: Vec<(String, Option<Value>)>,
    by_key: HashMap<String, &'v Value>,
}

impl<'v> MapList<'v> {
    fn new(schema: &Value, old: Option<&'v Value>) -> Option<MapList<'v>> {
        if schema.get("x-kubernetes-list-type").and_then(Value::as_str) != Some("map") {
            return None;
        }
        let item_props = schema.get("items").and_then(|i| i.get("properties"));
        let keys: Vec<(String, Option<Value>)> = schema
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)?
            .iter()
            .filter_map(Value::as_str)
            .map(|k| {
                let default = item_props
                    .and_then(|p| p.get(k))
                    .and_then(|p| p.get("default"));
                (k.to_string(), default.cloned())
            })
            .collect();
        let mut list = MapList {
            keys,
            by_key: HashMap::new(),
        };
        for item in old.and_then(Value::as_array).into_iter().flatten() {
            let key = list.key_of(item);
            list.by_key.entry(key).or_insert(item);
        }
        Some(list)
    }

    /// The item's key values (a missing key takes its schema default), as one string.
    fn key_of(&self, item: &Value) -> String {
        let values: Vec<&Value> = self
            .keys
            .iter()
            .map(|(k, default)| item.get(k).or(default.as_ref()).unwrap_or(&Value::Null))
            .collect();
        serde_json::to_string(&values).unwrap_or_default()
    }

    fn get(&self, item: &Value) -> Option<&'v Value> {
        self.by_key.get(&self.key_of(item)).copied()
    }
}

#[cfg(test)]
mod tests;
