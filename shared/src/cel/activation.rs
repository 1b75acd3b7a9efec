//! The variables an expression sees: JSON values converted once, when bound, into CEL values
//! that borrow the JSON's strings; and CEL results converted back to JSON.
//!
//! JSON → CEL: objects are maps with string keys, arrays lists, integers `int` (i64), other
//! numbers `double` (so does an integer beyond i64), strings `string`, `null` null.

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use cel::common::types::{
    CelBool, CelBytes, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelOptional,
    CelString, CelUInt,
};
use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use serde_json::Value;

use super::CelError;
use super::duration::Duration;

/// Named values for one evaluation (`self`, `oldSelf`, `object`, `params` ...), bound by
/// reference: an activation converts each value when an expression first reads it, once, and
/// may be reused for many programs; a value no expression reads is never converted.
#[derive(Default)]
pub struct Activation<'a> {
    vars: BTreeMap<String, Binding<'a>>,
}

enum Binding<'a> {
    Json(&'a Value, OnceLock<Box<dyn Val + 'a>>),
    Typed(&'a Value, &'a Value, OnceLock<Box<dyn Val + 'a>>),
    Converted(Box<dyn Val + 'a>),
}

impl<'a> Binding<'a> {
    fn val(&self) -> &(dyn Val + 'a) {
        match self {
            Binding::Json(json, converted) => converted.get_or_init(|| to_val(json)).as_ref(),
            Binding::Typed(json, schema, converted) => converted
                .get_or_init(|| to_typed_val(json, Some(schema)))
                .as_ref(),
            Binding::Converted(v) => v.as_ref(),
        }
    }
}

impl<'a> Activation<'a> {
    pub fn new() -> Self {
        Activation {
            vars: BTreeMap::new(),
        }
    }

    /// Binds `name` to `value`, replacing an earlier binding of the same name.
    pub fn bind(&mut self, name: &str, value: &'a Value) -> &mut Self {
        self.vars
            .insert(name.to_string(), Binding::Json(value, OnceLock::new()));
        self
    }

    /// Binds `name` to `value` typed by its OpenAPI `schema`, as upstream does for CRD rules:
    /// integers where the schema says `type: number` are doubles (so `self.ratio * 2.0` works
    /// whether the client sent `1` or `1.0`), strings with `format: duration` durations.
    pub fn bind_typed(&mut self, name: &str, value: &'a Value, schema: &'a Value) -> &mut Self {
        self.vars.insert(
            name.to_string(),
            Binding::Typed(value, schema, OnceLock::new()),
        );
        self
    }

    /// Binds `name` to an optional value (`optional.of(value)`, or `optional.none()`), as
    /// upstream binds `oldSelf` for rules with `optionalOldSelf: true`.
    pub fn bind_optional(&mut self, name: &str, value: Option<&'a Value>) -> &mut Self {
        let optional = match value {
            Some(v) => CelOptional::of(to_val(v)),
            None => CelOptional::none(),
        };
        self.vars
            .insert(name.to_string(), Binding::Converted(Box::new(optional)));
        self
    }

    /// Whether `name` is bound.
    pub fn is_bound(&self, name: &str) -> bool {
        self.vars.contains_key(name)
    }
}

impl std::fmt::Debug for Activation<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.vars.keys()).finish()
    }
}

impl VariableResolver for Activation<'_> {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        self.vars
            .get(variable)
            .map(|v| CowVal::Borrowed(v.val() as &(dyn Val + 'b)))
    }
}

/// A JSON value as a CEL value, borrowing its strings.
pub(crate) fn to_val(value: &Value) -> Box<dyn Val + '_> {
    to_typed_val(value, None)
}

/// The schema of `key`'s value in an object of `schema`: its property, else its
/// additionalProperties.
fn field_schema<'s>(schema: Option<&'s Value>, key: &str) -> Option<&'s Value> {
    let schema = schema?;
    schema
        .get("properties")
        .and_then(|p| p.get(key))
        .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()))
}

/// [`to_val`], following `schema` (an OpenAPI schema) where there is one.
fn to_typed_val<'a>(value: &'a Value, schema: Option<&Value>) -> Box<dyn Val + 'a> {
    let is_format =
        |f: &str| schema.and_then(|s| s.get("format")).and_then(Value::as_str) == Some(f);
    let is_number = || schema.and_then(|s| s.get("type")).and_then(Value::as_str) == Some("number");
    match value {
        Value::Null => Box::new(CelNull),
        Value::Bool(b) => Box::new(CelBool::from(*b)),
        Value::Number(n) => match n.as_i64() {
            Some(i) if !is_number() => Box::new(CelInt::from(i)),
            _ => Box::new(CelDouble::from(n.as_f64().unwrap_or(f64::NAN))),
        },
        Value::String(s) if is_format("duration") => match Duration::parse(s) {
            Some(d) => Box::new(d),
            None => Box::new(CelString::from(s.as_str())),
        },
        Value::String(s) => Box::new(CelString::from(s.as_str())),
        Value::Array(items) => {
            let item_schema = schema.and_then(|s| s.get("items"));
            let items: Vec<Box<dyn Val + '_>> =
                items.iter().map(|i| to_typed_val(i, item_schema)).collect();
            Box::new(CelList::from(items))
        }
        Value::Object(fields) => {
            let map: HashMap<CelMapKey<'_>, Box<dyn Val + '_>> = fields
                .iter()
                .map(|(k, v)| {
                    let sub = field_schema(schema, k);
                    (CelMapKey::from(k.as_str()), to_typed_val(v, sub))
                })
                .collect();
            Box::new(CelMap::from(map))
        }
    }
}

/// A CEL value as JSON: maps become objects (keys printed as strings), bytes a base64-free
/// list of numbers is not JSON's way, so bytes are refused like types and other opaque values.
pub(crate) fn to_json(value: &dyn Val) -> Result<Value, CelError> {
    if let Some(b) = value.downcast_ref::<CelBool>() {
        return Ok(Value::Bool(*b.inner()));
    }
    if let Some(i) = value.downcast_ref::<CelInt>() {
        return Ok(Value::from(*i.inner()));
    }
    if let Some(u) = value.downcast_ref::<CelUInt>() {
        return Ok(Value::from(*u.inner()));
    }
    if let Some(d) = value.downcast_ref::<CelDouble>() {
        return Ok(serde_json::Number::from_f64(*d.inner()).map_or(Value::Null, Value::Number));
    }
    if let Some(s) = value.downcast_ref::<CelString>() {
        return Ok(Value::String(s.inner().to_string()));
    }
    if value.downcast_ref::<CelNull>().is_some() {
        return Ok(Value::Null);
    }
    if value.downcast_ref::<CelBytes>().is_some() {
        return Err(unsupported(value));
    }
    if let Some(map) = value.downcast_ref::<CelMap>() {
        let mut out = serde_json::Map::new();
        for (k, v) in map.inner() {
            out.insert(key_string(k), to_json(v.as_ref())?);
        }
        return Ok(Value::Object(out));
    }
    if let Some(iter) = value.as_iterable()
        && value.get_type().name() == "list"
    {
        let mut out = Vec::new();
        let mut items = iter.iter();
        while let Some(item) = items.next() {
            out.push(to_json(item)?);
        }
        return Ok(Value::Array(out));
    }
    if let Some(d) = value.downcast_ref::<Duration>() {
        return Ok(Value::String(d.to_cel_string()));
    }
    if let Some(q) = super::quantity::as_quantity(value) {
        return Ok(Value::String(q.to_string()));
    }
    Err(unsupported(value))
}

fn key_string(key: &CelMapKey<'_>) -> String {
    match key {
        CelMapKey::String(s) => s.inner().to_string(),
        CelMapKey::Int(i) => i.inner().to_string(),
        CelMapKey::UInt(u) => u.inner().to_string(),
        CelMapKey::Bool(b) => b.inner().to_string(),
    }
}

fn unsupported(value: &dyn Val) -> CelError {
    CelError::Type {
        want: "a JSON value",
        got: value.get_type().name().to_string(),
    }
}
