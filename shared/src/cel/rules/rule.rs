//! One `x-kubernetes-validations` entry: read from the schema, compiled once (a bounded cache
//! keyed by expression), and turned into upstream's field errors when it fails.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, PoisonError};

use serde_json::Value;

use crate::admission::{FieldError, FieldErrorType};
use crate::cel::{CelError, Program};

/// The reasons a rule may give (`reason`), sorted as upstream lists them.
pub(super) const REASONS: &[&str] = &[
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

/// A validation rule as written in the schema.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Rule<'s> {
    pub(super) rule: &'s str,
    pub(super) message: &'s str,
    pub(super) message_expression: &'s str,
    pub(super) reason: Option<&'s str>,
    pub(super) field_path: &'s str,
    pub(super) optional_old_self: Option<bool>,
}

impl<'s> Rule<'s> {
    pub(super) fn from_json(v: &'s Value) -> Rule<'s> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default();
        Rule {
            rule: s("rule"),
            message: s("message"),
            message_expression: s("messageExpression"),
            reason: v.get("reason").and_then(Value::as_str),
            field_path: s("fieldPath"),
            optional_old_self: v.get("optionalOldSelf").and_then(Value::as_bool),
        }
    }

    /// The rules of a schema node.
    pub(super) fn all_of(schema: &'s Value) -> Vec<Rule<'s>> {
        match schema.get("x-kubernetes-validations") {
            Some(Value::Array(rules)) => rules.iter().map(Rule::from_json).collect(),
            _ => Vec::new(),
        }
    }

    /// Upstream's `ruleErrorString`: the message if there is one, else the rule.
    pub(super) fn error_string(&self) -> &'s str {
        match self.message.trim() {
            "" => self.rule.trim(),
            m => m,
        }
    }

    /// Upstream's `ruleMessageOrDefault`.
    pub(super) fn message_or_default(&self) -> String {
        match self.message.trim() {
            "" => format!("failed rule: {}", self.error_string()),
            m => m.to_string(),
        }
    }

    /// The rule as Go's `%#v` prints upstream's internal `ValidationRule` (the bad value of
    /// errors about a rule in a CRD).
    pub(super) fn go_repr(&self) -> String {
        let q = go_quote;
        let reason = match self.reason {
            None => "(*apiextensions.FieldValueErrorReason)(nil)".to_string(),
            Some(r) => format!("(*apiextensions.FieldValueErrorReason)({})", q(r)),
        };
        let optional = match self.optional_old_self {
            None => "(*bool)(nil)".to_string(),
            Some(b) => format!("(*bool)({b})"),
        };
        format!(
            "apiextensions.ValidationRule{{Rule:{}, Message:{}, MessageExpression:{}, Reason:{reason}, FieldPath:{}, OptionalOldSelf:{optional}}}",
            q(self.rule),
            q(self.message),
            q(self.message_expression),
            q(self.field_path),
        )
    }

    /// The error for a rule that evaluated to false at `path`, typed by `reason`; `type_name`
    /// is the node's schema type, the value upstream reports.
    pub(super) fn failure(&self, path: &str, type_name: &str, detail: String) -> FieldError {
        let (error_type, bad_value, detail) = match self.reason {
            Some("FieldValueForbidden") => (FieldErrorType::Forbidden, None, detail),
            Some("FieldValueRequired") => (FieldErrorType::Required, None, detail),
            Some("FieldValueDuplicate") => (
                FieldErrorType::Duplicate,
                Some(type_name.into()),
                String::new(),
            ),
            _ => (FieldErrorType::Invalid, Some(type_name.into()), detail),
        };
        FieldError {
            error_type,
            field: path.to_string(),
            bad_value,
            detail,
        }
    }
}

/// Go's `%q` of `s` (JSON string escaping agrees with it on everything a rule holds).
pub(super) fn go_quote(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// An `Invalid value: "<type>": <detail>` error, the form of every evaluation problem.
pub(super) fn invalid(path: &str, type_name: &str, detail: String) -> FieldError {
    FieldError {
        error_type: FieldErrorType::Invalid,
        field: path.to_string(),
        bad_value: Some(type_name.into()),
        detail,
    }
}

/// How many distinct expressions the cache keeps; past it the cache starts over (one CRD with
/// hundreds of rules fits many times; a flood of distinct expressions cannot grow memory).
const CACHE_CAPACITY: usize = 8192;

type Compiled = Result<Program, CelError>;

static CACHE: LazyLock<Mutex<HashMap<String, Compiled>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// `expr` compiled, from the cache when it was compiled before.
pub(super) fn compiled(expr: &str) -> Compiled {
    if let Some(hit) = CACHE
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(expr)
    {
        return hit.clone();
    }
    // Compiled outside the lock: two threads may both compile a new expression, which is
    // cheaper than making every other rule wait.
    let result = Program::compile(expr);
    let mut cache = CACHE.lock().unwrap_or_else(PoisonError::into_inner);
    if cache.len() >= CACHE_CAPACITY {
        cache.clear();
    }
    cache.insert(expr.to_string(), result.clone());
    result
}
