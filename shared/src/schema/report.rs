//! Field errors built the way apimachinery's `field` package builds them, from already
//! rendered upstream paths (`spec.ports[0].name`, `spec.labels[app]`), plus Go's `%v`
//! rendering of the numbers that kube-openapi writes into its messages.

use serde_json::Value;

use crate::admission::{FieldError, FieldErrorType};

/// `path.name` in upstream's rendering, or `name` at the root (an empty `path`).
pub(crate) fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn error(t: FieldErrorType, field: &str, value: Option<Value>, detail: String) -> FieldError {
    FieldError {
        error_type: t,
        field: field.to_string(),
        bad_value: value,
        detail,
    }
}

pub(crate) fn required(field: &str, detail: impl Into<String>) -> FieldError {
    error(FieldErrorType::Required, field, None, detail.into())
}

pub(crate) fn invalid(field: &str, value: Value, detail: impl Into<String>) -> FieldError {
    error(
        FieldErrorType::Invalid,
        field,
        Some(display_value(value)),
        detail.into(),
    )
}

pub(crate) fn forbidden(field: &str, detail: impl Into<String>) -> FieldError {
    error(FieldErrorType::Forbidden, field, None, detail.into())
}

pub(crate) fn duplicate(field: &str, value: Value) -> FieldError {
    error(
        FieldErrorType::Duplicate,
        field,
        Some(display_value(value)),
        String::new(),
    )
}

/// `Unsupported value: "x": supported values: "a", "b"` (an empty list gives no detail).
pub(crate) fn not_supported(field: &str, value: Value, supported: &[String]) -> FieldError {
    let detail = if supported.is_empty() {
        String::new()
    } else {
        let quoted: Vec<String> = supported.iter().map(|s| quote(s)).collect();
        format!("supported values: {}", quoted.join(", "))
    };
    error(
        FieldErrorType::NotSupported,
        field,
        Some(display_value(value)),
        detail,
    )
}

/// apimachinery's `field.TooLong`: the value is omitted.
pub(crate) fn too_long(field: &str, max: i64) -> FieldError {
    let unit = if max == 1 { "byte" } else { "bytes" };
    let detail = if max >= 0 {
        format!("may not be more than {max} {unit}")
    } else {
        "value is too long".to_string()
    };
    error(FieldErrorType::TooLong, field, None, detail)
}

/// apimachinery's `field.TooMany`.
pub(crate) fn too_many(field: &str, actual: i64, max: i64) -> FieldError {
    let unit = if max == 1 { "item" } else { "items" };
    let detail = if max >= 0 {
        format!("must have at most {max} {unit}")
    } else {
        "has too many items".to_string()
    };
    error(
        FieldErrorType::TooMany,
        field,
        (actual >= 0).then(|| Value::from(actual)),
        detail,
    )
}

/// Go `%q`.
pub(crate) fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

/// A decoded JSON number as upstream holds it: integral floats decode to int64 there
/// (`1.0` prints as `1`).
fn display_value(v: Value) -> Value {
    match &v {
        Value::Number(n) if n.is_f64() => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Value::from(f as i64),
            _ => v,
        },
        _ => v,
    }
}

/// Go's `%v` of a float64: the shortest representation, in exponent form from 1e21 up and
/// below 1e-4 (`1e+21`, `1.5e-05`).
pub(crate) fn go_float(f: f64) -> String {
    if f == 0.0 || !f.is_finite() {
        return if f.is_nan() {
            "NaN".to_string()
        } else if f.is_infinite() {
            if f > 0.0 { "+Inf" } else { "-Inf" }.to_string()
        } else {
            "0".to_string()
        };
    }
    let a = f.abs();
    if (1e-4..1e21).contains(&a) {
        return format!("{f}");
    }
    let s = format!("{f:e}");
    match s.split_once('e') {
        Some((mantissa, exp)) => {
            let (sign, digits) = match exp.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', exp),
            };
            format!("{mantissa}e{sign}{digits:0>2}")
        }
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_go_prints_them() {
        let cases = [
            (10.0, "10"),
            (1.5, "1.5"),
            (-0.25, "-0.25"),
            (1e21, "1e+21"),
            (1.5e-5, "1.5e-05"),
            (0.0001, "0.0001"),
            (123456789.0, "123456789"),
        ];
        for (f, want) in cases {
            assert_eq!(go_float(f), want, "{f}");
        }
    }

    #[test]
    fn messages_follow_apimachinery() {
        let cases = [
            (
                too_long("spec.name", 5),
                "spec.name: Too long: may not be more than 5 bytes",
            ),
            (
                too_long("spec.c", 1),
                "spec.c: Too long: may not be more than 1 byte",
            ),
            (
                too_many("spec.items", 4, 3),
                "spec.items: Too many: 4: must have at most 3 items",
            ),
            (
                not_supported("spec.color", Value::from("x"), &["a".into(), "b".into()]),
                "spec.color: Unsupported value: \"x\": supported values: \"a\", \"b\"",
            ),
            (
                invalid("spec.n", serde_json::json!(2.0), "d"),
                "spec.n: Invalid value: 2: d",
            ),
            (required("spec.x", ""), "spec.x: Required value"),
        ];
        for (e, want) in cases {
            assert_eq!(e.message(), want);
        }
    }
}
