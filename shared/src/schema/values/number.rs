//! kube-openapi's number validator: multipleOf, minimum and maximum (exclusive or not), compared
//! as integers when both the value and the bound are (bounds truncated, as Go converts them),
//! as floats otherwise; on an integer schema a non-integral value or bound is reported too.

use std::cmp::Ordering;

use serde_json::Value;

use super::{At, Walk};
use crate::schema::node::{JsonType, Node};
use crate::schema::report::go_float;

impl Walk<'_> {
    pub(super) fn number(&mut self, n: &Node, v: &Value, path: &At) {
        let c = &n.checks;
        let type_name = if n.int_or_string {
            ""
        } else {
            match n.ty {
                Some(JsonType::Integer) => "integer",
                Some(JsonType::Number) => "number",
                _ => "",
            }
        };
        let int = v.as_i64();
        let data = v.as_f64().unwrap_or_default();
        if type_name == "integer" && !integer_representable(v) {
            self.unnamed(format!(
                "Checked value must be of type integer (default format) in {path}"
            ));
        }
        if let Some(factor) = c.multiple_of {
            let native = self.bound_ok(type_name, factor, "MultipleOf", path);
            match int.filter(|_| native) {
                Some(i) => {
                    let f = factor as i64;
                    if f <= 0 {
                        self.invalid(
                            path,
                            Value::from(f),
                            format!("factor MultipleOf declared for {path} must be positive: {f}"),
                        );
                    } else if i % f != 0 {
                        let detail = format!("{path} in body should be a multiple of {f}");
                        self.invalid(path, v.clone(), detail);
                    }
                }
                None => {
                    if factor <= 0.0 {
                        let detail = format!(
                            "factor MultipleOf declared for {path} must be positive: {}",
                            go_float(factor)
                        );
                        self.invalid(path, Value::from(factor), detail);
                    } else {
                        let mult = if factor < 1.0 {
                            1.0 / factor * data
                        } else {
                            data / factor
                        };
                        if !is_json_integer(mult) {
                            let detail = format!(
                                "{path} in body should be a multiple of {}",
                                go_float(factor)
                            );
                            self.invalid(path, v.clone(), detail);
                        }
                    }
                }
            }
        }
        if let Some(min) = c.minimum {
            self.bound(Side::Minimum, min, c.exclusive_minimum, type_name, v, path);
        }
        if let Some(max) = c.maximum {
            self.bound(Side::Maximum, max, c.exclusive_maximum, type_name, v, path);
        }
    }

    /// `minimum` or `maximum` (`exclusive` or not): compared as integers when the value and
    /// the bound are, as floats otherwise.
    fn bound(
        &mut self,
        side: Side,
        bound: f64,
        exclusive: bool,
        type_name: &str,
        v: &Value,
        path: &At,
    ) {
        let (what, outside, rel) = match (side, exclusive) {
            (Side::Minimum, true) => ("Minimum boundary", Ordering::Less, "greater than"),
            (Side::Minimum, false) => (
                "Minimum boundary",
                Ordering::Less,
                "greater than or equal to",
            ),
            (Side::Maximum, true) => ("Maximum boundary", Ordering::Greater, "less than"),
            (Side::Maximum, false) => (
                "Maximum boundary",
                Ordering::Greater,
                "less than or equal to",
            ),
        };
        let native = self.bound_ok(type_name, bound, what, path);
        let (order, shown) = match v.as_i64().filter(|_| native) {
            Some(i) => {
                let b = bound as i64;
                (Some(i.cmp(&b)), b.to_string())
            }
            None => (
                v.as_f64().unwrap_or_default().partial_cmp(&bound),
                go_float(bound),
            ),
        };
        if order == Some(outside) || (exclusive && order == Some(Ordering::Equal)) {
            self.invalid(
                path,
                v.clone(),
                format!("{path} in body should be {rel} {shown}"),
            );
        }
    }

    /// kube-openapi's `IsValueValidAgainstRange` for a schema bound: on an integer schema a
    /// bound must be an integer, or it is reported and compared as a float.
    fn bound_ok(&mut self, type_name: &str, bound: f64, what: &str, path: &At) -> bool {
        if type_name == "integer" && !integer_representable(&Value::from(bound)) {
            self.unnamed(format!(
                "{what} value must be of type integer (default format) in {path}"
            ));
            return false;
        }
        true
    }
}

/// Which bound of a number's range.
#[derive(Debug, Clone, Copy)]
enum Side {
    Minimum,
    Maximum,
}

/// Whether a number prints (as Go's `FormatFloat(f, 'f', -1)`) as an int64.
fn integer_representable(v: &Value) -> bool {
    if v.as_i64().is_some() {
        return true;
    }
    match v.as_f64() {
        Some(f) => {
            f.fract() == 0.0 && (-9.223_372_036_854_775e18..9.223_372_036_854_775e18).contains(&f)
        }
        None => false,
    }
}

/// go-openapi's `IsFloat64AJSONInteger`.
pub(super) fn is_json_integer(f: f64) -> bool {
    const MAX: f64 = 9_007_199_254_740_992.0; // 2^53
    if !f.is_finite() || !(-MAX..=MAX).contains(&f) {
        return false;
    }
    let g = f.trunc();
    if f == g {
        return true;
    }
    let diff = (f - g).abs();
    diff / (f.abs() + g.abs()) < 1e-9
}
