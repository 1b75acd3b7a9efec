//! A strategic-merge patch whose result does not decode (`labels: "invalid"`): upstream turns
//! the patched map into its type with the unstructured converter and answers 422 `Invalid` on
//! `patch`, its value the patch as Go prints a map (`map[metadata:map[labels:invalid]]`), its
//! message the converter's (`cannot restore map from string`). Pure.

use crate::admission::{FieldError, FieldErrorType};
use serde_json::Value;

/// The `Invalid` cause upstream gives for a strategic-merge patch `doc` whose result failed to
/// decode with `decode_error` (serde's words, possibly after a `path: `).
pub fn type_error_cause(doc: &Value, decode_error: &str) -> FieldError {
    FieldError {
        error_type: FieldErrorType::Invalid,
        field: "patch".to_string(),
        bad_value: Some(Value::String(go_print(doc))),
        detail: restore_message(decode_error),
    }
}

/// A JSON value as Go's `%+v` prints its decoded `map[string]interface{}`: maps with sorted
/// keys, slices in brackets, strings bare, null as `<nil>`.
pub fn go_print(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let items: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{k}:{}", go_print(&m[k])))
                .collect();
            format!("map[{}]", items.join(" "))
        }
        Value::Array(a) => {
            let items: Vec<String> = a.iter().map(go_print).collect();
            format!("[{}]", items.join(" "))
        }
        Value::String(s) => s.clone(),
        Value::Null => "<nil>".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
    }
}

/// serde's `invalid type: string "x", expected a map` as the converter words it: `cannot
/// restore map from string`. Anything else is kept as it is.
fn restore_message(decode_error: &str) -> String {
    let text = decode_error
        .rsplit_once(": invalid type: ")
        .map(|(_, t)| t)
        .or_else(|| decode_error.strip_prefix("invalid type: "));
    let Some((found, expected)) = text.and_then(|t| t.split_once(", expected ")) else {
        return decode_error.to_string();
    };
    match (go_kind_expected(expected), go_kind_found(found)) {
        (Some(want), Some(got)) => format!("cannot restore {want} from {got}"),
        _ => decode_error.to_string(),
    }
}

fn go_kind_found(found: &str) -> Option<&'static str> {
    let word = found.split([' ', '`']).next()?;
    Some(match word {
        "string" => "string",
        "integer" => "int64",
        "floating" => "float64",
        "boolean" => "bool",
        "sequence" => "slice",
        "map" => "map",
        "null" | "unit" => "nil",
        _ => return None,
    })
}

fn go_kind_expected(expected: &str) -> Option<&'static str> {
    let e = expected.trim_start_matches("a ").trim_start_matches("an ");
    Some(match e.split(' ').next()? {
        "map" => "map",
        "struct" => "struct",
        "sequence" | "vec" | "list" => "slice",
        "string" => "string",
        "boolean" | "bool" => "bool",
        "i32" | "i64" | "u32" | "u64" | "integer" => "int64",
        "f32" | "f64" => "float64",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_patch_prints_as_go_prints_its_map() {
        let doc = json!({"metadata": {"labels": "invalid", "a": [1, true, null]}});
        assert_eq!(
            go_print(&doc),
            "map[metadata:map[a:[1 true <nil>] labels:invalid]]"
        );
    }

    #[test]
    fn type_errors_are_worded_as_the_converter_words_them() {
        for (serde, want) in [
            (
                "metadata.labels: invalid type: string \"invalid\", expected a map",
                "cannot restore map from string",
            ),
            (
                "spec.containers: invalid type: map, expected a sequence",
                "cannot restore slice from map",
            ),
            (
                "spec.replicas: invalid type: string \"x\", expected i32",
                "cannot restore int64 from string",
            ),
            ("something else entirely", "something else entirely"),
        ] {
            assert_eq!(restore_message(serde), want, "{serde}");
        }
    }

    #[test]
    fn the_cause_is_invalid_on_patch_with_the_patch_as_its_value() {
        let c = type_error_cause(
            &json!({"metadata": {"labels": "invalid"}}),
            "metadata.labels: invalid type: string \"invalid\", expected a map",
        );
        assert_eq!(
            c.message(),
            "patch: Invalid value: \"map[metadata:map[labels:invalid]]\": cannot restore map from string"
        );
    }
}
