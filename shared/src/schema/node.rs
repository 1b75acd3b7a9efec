//! One node of a CRD's `openAPIV3Schema`, read once from its JSON form (`JSONSchemaProps`):
//! the structural part (type, properties, items, additionalProperties, the `x-kubernetes-*`
//! extensions, default) that pruning and defaulting walk, and the value validations that
//! kube-openapi checks, with `pattern`s compiled here so validation never compiles one.

use std::collections::BTreeMap;

use regex::Regex;
use serde_json::{Map, Value};

use super::format::Format;

/// `type` as the schema declares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JsonType {
    Object,
    Array,
    String,
    Integer,
    Number,
    Boolean,
    /// `type: null` (refused by the CRD checks, kept so they can say so).
    Null,
}

impl JsonType {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "object" => Self::Object,
            "array" => Self::Array,
            "string" => Self::String,
            "integer" => Self::Integer,
            "number" => Self::Number,
            "boolean" => Self::Boolean,
            "null" => Self::Null,
            _ => return None,
        })
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Object => "object",
            Self::Array => "array",
            Self::String => "string",
            Self::Integer => "integer",
            Self::Number => "number",
            Self::Boolean => "boolean",
            Self::Null => "null",
        }
    }
}

/// `additionalProperties`: a boolean or a schema.
#[derive(Debug)]
pub(crate) enum Additional {
    Allows(bool),
    Schema(Box<Node>),
}

/// A compiled `pattern`, with its source for messages.
#[derive(Debug)]
pub(crate) struct Pattern {
    pub(crate) source: String,
    pub(crate) regex: Regex,
}

/// The value validations of one node (kube-openapi's checks besides the type).
#[derive(Debug, Default)]
pub(crate) struct Checks {
    pub(crate) maximum: Option<f64>,
    pub(crate) exclusive_maximum: bool,
    pub(crate) minimum: Option<f64>,
    pub(crate) exclusive_minimum: bool,
    pub(crate) max_length: Option<i64>,
    pub(crate) min_length: Option<i64>,
    pub(crate) pattern: Option<Pattern>,
    pub(crate) max_items: Option<i64>,
    pub(crate) min_items: Option<i64>,
    pub(crate) unique_items: bool,
    pub(crate) multiple_of: Option<f64>,
    pub(crate) enumeration: Option<Vec<Value>>,
    pub(crate) max_properties: Option<i64>,
    pub(crate) min_properties: Option<i64>,
    pub(crate) required: Vec<String>,
    pub(crate) all_of: Vec<Node>,
    pub(crate) one_of: Vec<Node>,
    pub(crate) any_of: Vec<Node>,
    pub(crate) not: Option<Box<Node>>,
}

impl Checks {
    fn is_empty(&self) -> bool {
        self.maximum.is_none()
            && self.minimum.is_none()
            && self.max_length.is_none()
            && self.min_length.is_none()
            && self.pattern.is_none()
            && self.max_items.is_none()
            && self.min_items.is_none()
            && !self.unique_items
            && self.multiple_of.is_none()
            && self.enumeration.is_none()
            && self.max_properties.is_none()
            && self.min_properties.is_none()
            && self.required.is_empty()
            && self.all_of.is_empty()
            && self.one_of.is_empty()
            && self.any_of.is_empty()
            && self.not.is_none()
    }
}

/// What a node declares that structural-ness and the CRD checks look at but validation does not.
#[derive(Debug, Default)]
pub(crate) struct Declared {
    /// `type` as written, when it is no type we know (`type: foo`).
    pub(crate) unknown_type: Option<String>,
    pub(crate) title: bool,
    pub(crate) description: bool,
    /// `x-kubernetes-preserve-unknown-fields` as written (`false` is refused).
    pub(crate) preserve_unknown_fields: Option<bool>,
    pub(crate) x_validations: bool,
    /// Keywords structural schemas do not support (`$ref`, `patternProperties` …), in order.
    pub(crate) unsupported: Vec<&'static str>,
    /// `items` given as an array of schemas.
    pub(crate) items_array: bool,
    /// `pattern` as written when it does not compile, with the reason.
    pub(crate) bad_pattern: Option<(String, String)>,
    /// `format` as written (also formats validation ignores).
    pub(crate) format: Option<String>,
}

/// One schema node.
#[derive(Debug, Default)]
pub(crate) struct Node {
    pub(crate) ty: Option<JsonType>,
    pub(crate) nullable: bool,
    pub(crate) default: Option<Value>,
    pub(crate) properties: BTreeMap<String, Node>,
    pub(crate) additional: Option<Additional>,
    pub(crate) items: Option<Box<Node>>,
    pub(crate) preserve_unknown: bool,
    pub(crate) embedded: bool,
    pub(crate) int_or_string: bool,
    pub(crate) list_type: Option<String>,
    pub(crate) list_map_keys: Vec<String>,
    pub(crate) map_type: Option<String>,
    /// The format validation checks (unsupported formats are dropped, as upstream strips them).
    pub(crate) format: Option<Format>,
    pub(crate) checks: Box<Checks>,
    pub(crate) declared: Box<Declared>,
    /// Whether this node or one under it (through properties, items, additionalProperties)
    /// is an embedded resource: the walks that only look at those skip the rest.
    pub(crate) embedded_below: bool,
    /// Whether this node or one under it is a `set` or `map` list.
    pub(crate) keyed_lists_below: bool,
}

impl Node {
    /// Reads a `JSONSchemaProps`. Keywords of the wrong JSON type are ignored: the caller
    /// decoded the CRD into its typed form first, which refuses them.
    pub(crate) fn parse(v: &Value) -> Node {
        let Some(m) = v.as_object() else {
            return Node::default();
        };
        let mut n = Node::default();
        let mut d = Declared::default();
        if let Some(t) = str_of(m, "type") {
            n.ty = JsonType::parse(t);
            if n.ty.is_none() && !t.is_empty() {
                d.unknown_type = Some(t.to_string());
            }
        }
        n.nullable = bool_of(m, "nullable");
        // A `default: null` is no default (upstream reads it as a nil default).
        n.default = m.get("default").filter(|d| !d.is_null()).cloned();
        if let Some(Value::Object(props)) = m.get("properties") {
            n.properties = props
                .iter()
                .map(|(k, v)| (k.clone(), Node::parse(v)))
                .collect();
        }
        n.additional = match m.get("additionalProperties") {
            Some(Value::Bool(b)) => Some(Additional::Allows(*b)),
            Some(s @ Value::Object(_)) => Some(Additional::Schema(Box::new(Node::parse(s)))),
            _ => None,
        };
        match m.get("items") {
            Some(s @ Value::Object(_)) => n.items = Some(Box::new(Node::parse(s))),
            Some(Value::Array(_)) => d.items_array = true,
            _ => {}
        }
        d.preserve_unknown_fields = m
            .get("x-kubernetes-preserve-unknown-fields")
            .and_then(Value::as_bool);
        n.preserve_unknown = d.preserve_unknown_fields == Some(true);
        n.embedded = bool_of(m, "x-kubernetes-embedded-resource");
        n.int_or_string = bool_of(m, "x-kubernetes-int-or-string");
        n.list_type = str_of(m, "x-kubernetes-list-type").map(str::to_string);
        n.list_map_keys = strings_of(m, "x-kubernetes-list-map-keys");
        n.map_type = str_of(m, "x-kubernetes-map-type").map(str::to_string);
        d.format = str_of(m, "format")
            .filter(|f| !f.is_empty())
            .map(str::to_string);
        n.format = d.format.as_deref().and_then(Format::supported);
        d.title = str_of(m, "title").is_some_and(|s| !s.is_empty());
        d.description = str_of(m, "description").is_some_and(|s| !s.is_empty());
        d.x_validations = m
            .get("x-kubernetes-validations")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty());
        for (key, name) in [
            ("id", "id"),
            ("$schema", "$schema"),
            ("$ref", "$ref"),
            ("patternProperties", "patternProperties"),
            ("dependencies", "dependencies"),
            ("additionalItems", "additionalItems"),
            ("definitions", "definitions"),
        ] {
            if m.get(key).is_some_and(|v| !is_empty_value(v)) {
                d.unsupported.push(name);
            }
        }
        n.checks = Box::new(parse_checks(m, &mut d));
        n.declared = Box::new(d);
        let (embedded_below, keyed_lists_below) = n
            .properties
            .values()
            .chain(n.items.as_deref())
            .chain(n.additional_schema())
            .fold((false, false), |(e, k), c| {
                (e || c.embedded_below, k || c.keyed_lists_below)
            });
        n.embedded_below = n.embedded || embedded_below;
        n.keyed_lists_below =
            matches!(n.list_type.as_deref(), Some("set" | "map")) || keyed_lists_below;
        n
    }

    pub(crate) fn additional_schema(&self) -> Option<&Node> {
        match &self.additional {
            Some(Additional::Schema(s)) => Some(s),
            _ => None,
        }
    }

    /// Whether the node declares any value validation.
    pub(crate) fn has_checks(&self) -> bool {
        !self.checks.is_empty()
    }
}

fn parse_checks(m: &Map<String, Value>, d: &mut Declared) -> Checks {
    let nodes = |key: &str| -> Vec<Node> {
        m.get(key)
            .and_then(Value::as_array)
            .map(|a| a.iter().map(Node::parse).collect())
            .unwrap_or_default()
    };
    let pattern = match str_of(m, "pattern").filter(|p| !p.is_empty()) {
        None => None,
        Some(p) => match Regex::new(p) {
            Ok(regex) => Some(Pattern {
                source: p.to_string(),
                regex,
            }),
            Err(e) => {
                d.bad_pattern = Some((p.to_string(), e.to_string()));
                None
            }
        },
    };
    Checks {
        maximum: m.get("maximum").and_then(Value::as_f64),
        exclusive_maximum: bool_of(m, "exclusiveMaximum"),
        minimum: m.get("minimum").and_then(Value::as_f64),
        exclusive_minimum: bool_of(m, "exclusiveMinimum"),
        max_length: m.get("maxLength").and_then(Value::as_i64),
        min_length: m.get("minLength").and_then(Value::as_i64),
        pattern,
        max_items: m.get("maxItems").and_then(Value::as_i64),
        min_items: m.get("minItems").and_then(Value::as_i64),
        unique_items: bool_of(m, "uniqueItems"),
        multiple_of: m.get("multipleOf").and_then(Value::as_f64),
        enumeration: m.get("enum").and_then(Value::as_array).cloned(),
        max_properties: m.get("maxProperties").and_then(Value::as_i64),
        min_properties: m.get("minProperties").and_then(Value::as_i64),
        required: strings_of(m, "required"),
        all_of: nodes("allOf"),
        one_of: nodes("oneOf"),
        any_of: nodes("anyOf"),
        not: m
            .get("not")
            .filter(|v| v.is_object())
            .map(|v| Box::new(Node::parse(v))),
    }
}

fn str_of<'a>(m: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    m.get(key).and_then(Value::as_str)
}

fn bool_of(m: &Map<String, Value>, key: &str) -> bool {
    m.get(key).and_then(Value::as_bool).unwrap_or(false)
}

fn strings_of(m: &Map<String, Value>, key: &str) -> Vec<String> {
    m.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn is_empty_value(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}
