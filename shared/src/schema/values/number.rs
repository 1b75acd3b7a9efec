//! kube-openapi's number validator: multipleOf, minimum and maximum (exclusive or not), compared
//! as integers when both the value and the bound are (bounds truncated, as Go converts them),
//! as floats otherwise; on an integer schema a non-integral value or bound is reported too.

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
            let native = self.bound_ok(type_name, min, "Minimum boundary", path);
            let excl = c.exclusive_minimum;
            let (below, shown) = match int.filter(|_| native) {
                Some(i) => {
                    let m = min as i64;
                    ((!excl && i < m) || (excl && i <= m), m.to_string())
                }
                None => (
                    (!excl && data < min) || (excl && data <= min),
                    go_float(min),
                ),
            };
            if below {
                let rel = if excl {
                    "greater than"
                } else {
                    "greater than or equal to"
                };
                self.invalid(
                    path,
                    v.clone(),
                    format!("{path} in body should be {rel} {shown}"),
                );
            }
        }
        if let Some(max) = c.maximum {
            let native = self.bound_ok(type_name, max, "Maximum boundary", path);
            let excl = c.exclusive_maximum;
            let (above, shown) = match int.filter(|_| native) {
                Some(i) => {
                    let m = max as i64;
                    ((!excl && i > m) || (excl && i >= m), m.to_string())
                }
                None => (
                    (!excl && data > max) || (excl && data >= max),
                    go_float(max),
                ),
            };
            if above {
                let rel = if excl {
                    "less than"
                } else {
                    "less than or equal to"
                };
                self.invalid(
                    path,
                    v.clone(),
                    format!("{path} in body should be {rel} {shown}"),
                );
            }
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
