//! The checks a CustomResourceDefinition's rules get when the CRD is created or updated, with
//! upstream's paths (`<schema>.properties[spec].x-kubernetes-validations[0].rule`) and
//! messages (`compilation failed: ERROR: <input>:1:6: ...`).

use serde_json::Value;

use super::field_path;
use super::rule::{REASONS, Rule, compiled, go_quote};
use crate::admission::{FieldError, FieldErrorType};

/// Upstream's longest `message`.
const MAX_MESSAGE_LEN: usize = 2048;

/// Problems with the rules anywhere in `schema` (a version's `openAPIV3Schema`), reported under
/// `prefix` (that schema's own path, `spec.versions[0].schema.openAPIV3Schema`).
pub fn compile_errors(schema: &Value, prefix: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    walk(schema, prefix, None, &mut errs);
    errs
}

/// `uncorrelatable`: the path of the nearest enclosing list whose items do not correlate with
/// the old object's (not `x-kubernetes-list-type: map`), where `oldSelf` cannot be used.
fn walk(schema: &Value, path: &str, uncorrelatable: Option<&str>, errs: &mut Vec<FieldError>) {
    check_node(schema, path, uncorrelatable, errs);
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, sub) in props {
            walk(
                sub,
                &format!("{path}.properties[{name}]"),
                uncorrelatable,
                errs,
            );
        }
    }
    if let Some(sub) = schema.get("additionalProperties").filter(|s| s.is_object()) {
        walk(
            sub,
            &format!("{path}.additionalProperties"),
            uncorrelatable,
            errs,
        );
    }
    if let Some(items) = schema.get("items").filter(|s| s.is_object()) {
        let items_path = format!("{path}.items");
        let is_map_list =
            schema.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("map");
        let inner = match uncorrelatable {
            Some(p) => Some(p.to_string()),
            None if !is_map_list => Some(items_path.clone()),
            None => None,
        };
        walk(items, &items_path, inner.as_deref(), errs);
    }
    if let Some(all_of) = schema.get("allOf").and_then(Value::as_array) {
        for (i, sub) in all_of.iter().enumerate() {
            walk(sub, &format!("{path}.allOf[{i}]"), uncorrelatable, errs);
        }
    }
}

fn error(
    error_type: FieldErrorType,
    field: String,
    bad: Option<Value>,
    detail: &str,
) -> FieldError {
    FieldError {
        error_type,
        field,
        bad_value: bad,
        detail: detail.to_string(),
    }
}

/// An `Invalid value` whose bad value is the rule itself, printed as Go's `%#v` prints it:
/// carried in the detail (no JSON value renders as a Go struct), which gives the same message.
fn invalid_rule(field: String, rule: &Rule<'_>, detail: &str) -> FieldError {
    error(
        FieldErrorType::Invalid,
        field,
        None,
        &format!("{}: {detail}", rule.go_repr()),
    )
}

fn check_node(
    schema: &Value,
    path: &str,
    uncorrelatable: Option<&str>,
    errs: &mut Vec<FieldError>,
) {
    let rules = Rule::all_of(schema);
    let before = errs.len();
    for (i, rule) in rules.iter().enumerate() {
        let at = |field: &str| format!("{path}.x-kubernetes-validations[{i}].{field}");
        let message = rule.message.trim();
        if rule.rule.trim().is_empty() {
            errs.push(error(
                FieldErrorType::Required,
                at("rule"),
                None,
                "rule is not specified",
            ));
        } else if !rule.message.is_empty() && message.is_empty() {
            errs.push(error(
                FieldErrorType::Invalid,
                at("message"),
                Some(rule.message.into()),
                "message must be non-empty if specified",
            ));
        } else if rule.message.len() > MAX_MESSAGE_LEN {
            let head: String = rule.message.chars().take(10).collect();
            errs.push(error(
                FieldErrorType::Invalid,
                at("message"),
                Some(format!("{head}...").into()),
                "message must have a maximum length of 2048 characters",
            ));
        } else if has_newlines(message) {
            errs.push(error(
                FieldErrorType::Invalid,
                at("message"),
                Some(rule.message.into()),
                "message must not contain line breaks",
            ));
        } else if has_newlines(rule.rule.trim()) && message.is_empty() {
            errs.push(error(
                FieldErrorType::Required,
                at("message"),
                None,
                "message must be specified if rule contains line breaks",
            ));
        }
        if !rule.message_expression.is_empty() && rule.message_expression.trim().is_empty() {
            errs.push(error(
                FieldErrorType::Required,
                at("messageExpression"),
                None,
                "messageExpression must be non-empty if specified",
            ));
        }
        if let Some(reason) = rule.reason.filter(|r| !REASONS.contains(r)) {
            let supported: Vec<String> = REASONS.iter().map(|r| go_quote(r)).collect();
            errs.push(error(
                FieldErrorType::NotSupported,
                at("reason"),
                Some(reason.into()),
                &format!("supported values: {}", supported.join(", ")),
            ));
        }
        let field_path = rule.field_path;
        if !field_path.is_empty() && field_path.trim().is_empty() {
            errs.push(error(
                FieldErrorType::Invalid,
                at("fieldPath"),
                Some(field_path.into()),
                "fieldPath must be non-empty if specified",
            ));
        }
        if has_newlines(field_path) {
            errs.push(error(
                FieldErrorType::Invalid,
                at("fieldPath"),
                Some(field_path.into()),
                "fieldPath must not contain line breaks",
            ));
        }
        if !field_path.is_empty()
            && let Err(e) = field_path::resolve(field_path, schema, "")
        {
            errs.push(error(
                FieldErrorType::Invalid,
                at("fieldPath"),
                Some(field_path.into()),
                &format!("fieldPath must be a valid path: {e}"),
            ));
        }
    }
    // As upstream: expressions are compiled only once the node's rules are well-formed.
    if errs.len() > before {
        return;
    }
    for (i, rule) in rules.iter().enumerate() {
        let at = |field: &str| format!("{path}.x-kubernetes-validations[{i}].{field}");
        match compiled(rule.rule) {
            Err(e) => errs.push(invalid_rule(
                at("rule"),
                rule,
                &format!("compilation failed: {e}"),
            )),
            Ok(p) => {
                if p.references("oldSelf")
                    && let Some(list) = uncorrelatable
                {
                    errs.push(error(
                        FieldErrorType::Invalid,
                        at("rule"),
                        Some(rule.rule.into()),
                        &format!(
                            "oldSelf cannot be used on the uncorrelatable portion of the schema within {list}"
                        ),
                    ));
                }
            }
        }
        if !rule.message_expression.trim().is_empty()
            && let Err(e) = compiled(rule.message_expression)
        {
            errs.push(invalid_rule(
                at("messageExpression"),
                rule,
                &format!("messageExpression compilation failed: {e}"),
            ));
        }
    }
}

/// Line breaks as CEL's grammar knows them.
fn has_newlines(s: &str) -> bool {
    s.contains(['\n', '\r'])
}
