//! Value validation of a custom resource against its schema, as kube-openapi's
//! `SchemaValidator` checks it (type, allOf/anyOf/oneOf/not, string, format, number, array,
//! enum, object, in that order at each node) and apiextensions-apiserver turns its results into
//! field errors: kube-openapi's own sentence as the detail (`spec.replicas in body should be
//! less than or equal to 10`), errors without a field (the allOf/anyOf/oneOf/not summaries)
//! at the path `<nil>` with the value `""`.

use std::fmt;

use serde_json::{Map, Value};

use super::node::{Additional, JsonType, Node};
use super::ratchet::Correlation;
use super::report::{self, quote};
use crate::admission::FieldError;

mod number;

use number::is_json_integer;

/// Validates `v` against `root`. `prefix` is the field path of `v` in the object (`status` when
/// only the status is validated), `None` for the whole object.
pub(crate) fn validate(root: &Node, v: &Value, prefix: Option<&str>) -> Vec<FieldError> {
    let mut w = Walk {
        prefix,
        errs: Vec::new(),
    };
    w.node(root, v, None, &At::Root);
    w.errs
}

/// Validates an update of `old` to `v`, ratcheting: the errors of values unchanged from their
/// correlated old values are dropped.
pub(crate) fn validate_update(
    root: &Node,
    v: &Value,
    old: &Value,
    prefix: Option<&str>,
) -> Vec<FieldError> {
    let mut w = Walk {
        prefix,
        errs: Vec::new(),
    };
    let corr = Correlation { schema: root, old };
    w.node(root, v, Some(corr), &At::Root);
    w.errs
}

struct Walk<'p> {
    prefix: Option<&'p str>,
    errs: Vec<FieldError>,
}

/// kube-openapi's path of a value (`spec.ports[0].name`; the root's is empty), rendered only
/// when an error needs it.
#[derive(Debug, Clone, Copy)]
enum At<'a> {
    Root,
    Field(&'a At<'a>, &'a str),
    Item(&'a At<'a>, usize),
}

impl At<'_> {
    fn is_root(&self) -> bool {
        matches!(self, At::Root)
    }
}

impl fmt::Display for At<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            At::Root => Ok(()),
            At::Field(At::Root, name) => f.write_str(name),
            At::Field(parent, name) => write!(f, "{parent}.{name}"),
            At::Item(parent, i) => write!(f, "{parent}[{i}]"),
        }
    }
}

impl Walk<'_> {
    /// The field path apiextensions-apiserver reports for kube-openapi's name of a value.
    fn field(&self, at: &At) -> String {
        let name = at.to_string();
        match (self.prefix, name.as_str()) {
            (Some(p), "") => p.to_string(),
            (None, "") => "<nil>".to_string(),
            (Some(p), n) => format!("{p}.{n}"),
            (None, n) => n.to_string(),
        }
    }

    /// An error kube-openapi raises without a field (composite results, range checks).
    fn unnamed(&mut self, detail: String) {
        let field = self.prefix.unwrap_or("<nil>").to_string();
        self.errs
            .push(report::invalid(&field, Value::from(""), detail));
    }

    fn invalid(&mut self, path: &At, value: Value, detail: String) {
        let f = self.field(path);
        self.errs.push(report::invalid(&f, value, detail));
    }

    /// kube-openapi's `InvalidType`: the value is the type (or format) name it found.
    fn type_error(&mut self, path: &At, expected: &str, found: &str) {
        let detail = format!(
            "{path} in body must be of type {expected}: {}",
            quote(found)
        );
        self.invalid(path, Value::from(found), detail);
    }

    /// Validates one value, reached through a property or an item, dropping its errors when
    /// it is correlated with an old value and unchanged. Returns how many schema nodes were
    /// visited (kube-openapi's match count, which picks the anyOf/oneOf branch reported).
    fn node(&mut self, n: &Node, v: &Value, corr: Option<Correlation>, path: &At) -> usize {
        let start = self.errs.len();
        let count = self.check(n, v, corr, path);
        if let Some(c) = corr
            && self.errs.len() > start
            && c.unchanged(v)
        {
            self.errs.truncate(start);
        }
        count
    }

    fn check(&mut self, n: &Node, v: &Value, corr: Option<Correlation>, path: &At) -> usize {
        let types = declared_types(n);
        let format_name = n
            .format
            .and(n.declared.format.as_deref())
            .unwrap_or_default();
        if v.is_null() {
            if !types.is_empty() && !n.nullable {
                self.type_error(path, &types.join(","), "null");
            }
            self.enumeration(n, v, path);
            return 1;
        }
        if !types.is_empty() || !format_name.is_empty() {
            self.check_type(types, format_name, v, path);
        }
        let mut count = 1 + self.combinators(n, v, corr, path);
        match v {
            Value::String(s) => {
                self.string(n, s, path);
                if let Some(f) = n.format
                    && !f.accepts(s)
                {
                    let detail =
                        format!("{path} in body must be of type {format_name}: {}", quote(s));
                    self.invalid(path, v.clone(), detail);
                }
            }
            Value::Number(_) => self.number(n, v, path),
            Value::Array(items) => count += self.array(n, items, corr, path),
            _ => {}
        }
        self.enumeration(n, v, path);
        if let Value::Object(m) = v {
            count += self.object(n, v, m, corr, path);
        }
        count
    }

    fn check_type(&mut self, types: &[&str], format: &str, v: &Value, path: &At) {
        let (found, found_format) = kind_of(v);
        let contains = |t: &str| types.contains(&t);
        let is_float_int =
            found == "number" && v.as_f64().is_some_and(is_json_integer) && contains("integer");
        let is_int_float = found == "integer" && contains("number");
        let scalar = !v.is_string() && !v.is_array();
        if scalar
            && !format.is_empty()
            && !(contains(found) || found_format == format || is_float_int || is_int_float)
        {
            self.type_error(path, format, found_format);
            return;
        }
        // A string or list with a format on a non-numeric schema: the format validator's business.
        if !(contains("number") || contains("integer") || format.is_empty() || scalar) {
            return;
        }
        if !(contains(found) || is_float_int || is_int_float) {
            self.type_error(path, &types.join(","), found);
        }
    }

    fn combinators(&mut self, n: &Node, v: &Value, corr: Option<Correlation>, path: &At) -> usize {
        let c = &n.checks;
        let mut count = 0;
        let quoted = || quote(&path.to_string());
        if !c.any_of.is_empty() {
            let mut best: Option<(usize, Vec<FieldError>)> = None;
            let mut ok = false;
            for s in &c.any_of {
                let (k, errs) = self.branch(s, v, corr, path);
                count += k;
                if errs.is_empty() {
                    ok = true;
                    best = None;
                    break;
                }
                if best.as_ref().is_none_or(|(bk, _)| k > *bk) {
                    best = Some((k, errs));
                }
            }
            if !ok {
                self.unnamed(format!(
                    "{} must validate at least one schema (anyOf)",
                    quoted()
                ));
            }
            if let Some((_, errs)) = best {
                self.errs.extend(errs);
            }
        }
        if !c.one_of.is_empty() {
            let mut best: Option<(usize, Vec<FieldError>)> = None;
            let mut valid = 0;
            for s in &c.one_of {
                let (k, errs) = self.branch(s, v, corr, path);
                count += k;
                if errs.is_empty() {
                    valid += 1;
                    best = None;
                } else if valid == 0 && best.as_ref().is_none_or(|(bk, _)| k > *bk) {
                    best = Some((k, errs));
                }
            }
            if valid != 1 {
                let more = if valid == 0 {
                    "Found none valid".to_string()
                } else {
                    format!("Found {valid} valid alternatives")
                };
                self.unnamed(format!(
                    "{} must validate one and only one schema (oneOf). {more}",
                    quoted()
                ));
                if let Some((_, errs)) = best {
                    self.errs.extend(errs);
                }
            }
        }
        if !c.all_of.is_empty() {
            let mut valid = 0;
            for s in &c.all_of {
                let (k, errs) = self.branch(s, v, corr, path);
                count += k;
                if errs.is_empty() {
                    valid += 1;
                }
                self.errs.extend(errs);
            }
            if valid != c.all_of.len() {
                let more = if valid == 0 { ". None validated" } else { "" };
                self.unnamed(format!(
                    "{} must validate all the schemas (allOf){more}",
                    quoted()
                ));
            }
        }
        if let Some(not) = &c.not {
            let (k, errs) = self.branch(not, v, corr, path);
            count += k;
            if errs.is_empty() {
                self.unnamed(format!("{} must not validate the schema (not)", quoted()));
            }
        }
        count
    }

    /// Validates against a sub-schema, keeping its errors apart.
    /// (Its fields are correlated through the enclosing value's correlation, as upstream's
    /// sub-validators share their parent's.)
    fn branch(
        &mut self,
        s: &Node,
        v: &Value,
        corr: Option<Correlation>,
        path: &At,
    ) -> (usize, Vec<FieldError>) {
        let mut sub = Walk {
            prefix: self.prefix,
            errs: Vec::new(),
        };
        let k = sub.check(s, v, corr, path);
        (k, sub.errs)
    }

    /// kube-openapi's string validator reports only its first failure.
    fn string(&mut self, n: &Node, s: &str, path: &At) {
        let c = &n.checks;
        let len = || s.chars().count() as i64;
        if let Some(max) = c.max_length
            && len() > max
        {
            let f = self.field(path);
            self.errs.push(report::too_long(&f, max));
        } else if let Some(min) = c.min_length
            && len() < min
        {
            let detail = format!("{path} in body should be at least {min} chars long");
            self.invalid(path, Value::from(s), detail);
        } else if let Some(p) = &c.pattern
            && !p.regex.is_match(s)
        {
            let detail = format!("{path} in body should match '{}'", p.source);
            self.invalid(path, Value::from(s), detail);
        }
    }

    fn array(&mut self, n: &Node, items: &[Value], corr: Option<Correlation>, path: &At) -> usize {
        let c = &n.checks;
        let mut count = 0;
        if let Some(s) = &n.items {
            for (i, item) in items.iter().enumerate() {
                let item_corr = corr.and_then(|c| c.item(item));
                count += self.node(s, item, item_corr, &At::Item(path, i));
            }
        }
        let size = items.len() as i64;
        self.size_bounds(path, size, c.min_items, c.max_items, "items");
        if c.unique_items && has_duplicates(items) {
            let detail = format!("{path} in body shouldn't contain duplicates");
            self.invalid(path, Value::from(""), detail);
        }
        count
    }

    /// `minItems`/`maxItems` or `minProperties`/`maxProperties`: an array's or object's `size`
    /// counts `what` (items, properties).
    fn size_bounds(
        &mut self,
        path: &At,
        size: i64,
        min: Option<i64>,
        max: Option<i64>,
        what: &str,
    ) {
        if let Some(min) = min
            && size < min
        {
            let detail = format!("{path} in body should have at least {min} {what}");
            self.invalid(path, Value::from(size), detail);
        }
        if let Some(max) = max
            && size > max
        {
            let f = self.field(path);
            self.errs.push(report::too_many(&f, size, max));
        }
    }

    fn enumeration(&mut self, n: &Node, v: &Value, path: &At) {
        let Some(allowed) = &n.checks.enumeration else {
            return;
        };
        if allowed.is_empty() || allowed.iter().any(|e| enum_matches(v, e)) {
            return;
        }
        let names: Vec<String> = allowed
            .iter()
            .map(|e| match e {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect();
        let f = self.field(path);
        self.errs.push(report::not_supported(&f, v.clone(), &names));
    }

    fn object(
        &mut self,
        n: &Node,
        v: &Value,
        m: &Map<String, Value>,
        corr: Option<Correlation>,
        path: &At,
    ) -> usize {
        let field_corr = |k: &str| corr.and_then(|c| c.field(v, k, path.is_root()));
        let c = &n.checks;
        let mut count = 0;
        let size = m.len() as i64;
        self.size_bounds(path, size, c.min_properties, c.max_properties, "properties");
        match &n.additional {
            Some(Additional::Allows(false)) => {
                for k in m.keys().filter(|k| !n.properties.contains_key(*k)) {
                    let detail = format!("{path}.{k} in body is a forbidden property");
                    self.invalid(path, Value::from(k.as_str()), detail);
                }
            }
            Some(Additional::Schema(s)) => {
                for (k, fv) in m.iter().filter(|(k, _)| !n.properties.contains_key(*k)) {
                    count += self.node(s, fv, field_corr(k), &At::Field(path, k));
                }
            }
            _ => {}
        }
        for (name, s) in &n.properties {
            if let Some(fv) = m.get(name) {
                count += self.node(s, fv, field_corr(name), &At::Field(path, name));
            }
        }
        for r in &c.required {
            if !m.contains_key(r) {
                let f = self.field(&At::Field(path, r));
                self.errs.push(report::required(&f, ""));
            }
        }
        count
    }
}

/// The types a node accepts, as kube-openapi's `type` list (int-or-string is both).
fn declared_types(n: &Node) -> &'static [&'static str] {
    if n.int_or_string {
        return &["integer", "string"];
    }
    match n.ty {
        None => &[],
        Some(JsonType::Object) => &["object"],
        Some(JsonType::Array) => &["array"],
        Some(JsonType::String) => &["string"],
        Some(JsonType::Integer) => &["integer"],
        Some(JsonType::Number) => &["number"],
        Some(JsonType::Boolean) => &["boolean"],
        Some(JsonType::Null) => &["null"],
    }
}

/// The JSON type of a decoded value and the Go format kube-openapi derives from it.
fn kind_of(v: &Value) -> (&'static str, &'static str) {
    match v {
        Value::Null => ("null", ""),
        Value::Bool(_) => ("boolean", ""),
        Value::Number(n) if n.is_i64() => ("integer", "int64"),
        Value::Number(_) => ("number", "float64"),
        Value::String(_) => ("string", ""),
        Value::Array(_) => ("array", ""),
        Value::Object(_) => ("object", ""),
    }
}

fn has_duplicates(items: &[Value]) -> bool {
    items
        .iter()
        .enumerate()
        .any(|(i, a)| items[..i].iter().any(|b| a == b))
}

/// kube-openapi's enum match: the value converted to the enum entry's Go type, then compared
/// (an integer entry matches a float by truncation, a float entry an integer as a float).
fn enum_matches(v: &Value, e: &Value) -> bool {
    // A null never matches, not even a null entry: kube-openapi cannot convert it.
    if v.is_null() {
        return false;
    }
    if v == e {
        return true;
    }
    match (v, e) {
        (Value::Number(a), Value::Number(b)) => match (b.as_i64(), a.as_f64(), b.as_f64()) {
            (Some(bi), Some(af), _) if !b.is_f64() => af.trunc() == bi as f64,
            (_, Some(af), Some(bf)) => af == bf,
            _ => false,
        },
        (Value::Number(a), Value::String(s)) => a
            .as_i64()
            .and_then(|i| u32::try_from(i).ok())
            .and_then(char::from_u32)
            .is_some_and(|c| s.chars().eq(std::iter::once(c))),
        _ => false,
    }
}
