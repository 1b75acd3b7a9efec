//! Reads fields out of an untyped JSON object by path, treating absent, null and wrongly typed
//! fields as Go's zero values, the way the upstream printers see a decoded object.

use serde_json::{Map, Value};

/// The value at `path`, if every step exists.
pub(crate) fn at<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(obj, |v, key| v.get(key))
}

/// A string field, `""` when absent.
pub(crate) fn str_at<'a>(obj: &'a Value, path: &[&str]) -> &'a str {
    opt_str(obj, path).unwrap_or("")
}

/// A string field, `None` when absent or null.
pub(crate) fn opt_str<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(obj, path).and_then(Value::as_str)
}

/// An integer field, `0` when absent.
pub(crate) fn int_at(obj: &Value, path: &[&str]) -> i64 {
    opt_int(obj, path).unwrap_or(0)
}

/// An integer field, `None` when absent or null.
pub(crate) fn opt_int(obj: &Value, path: &[&str]) -> Option<i64> {
    at(obj, path).and_then(Value::as_i64)
}

/// A boolean field, `None` when absent or null.
pub(crate) fn opt_bool(obj: &Value, path: &[&str]) -> Option<bool> {
    at(obj, path).and_then(Value::as_bool)
}

/// An array field, empty when absent.
pub(crate) fn list_at<'a>(obj: &'a Value, path: &[&str]) -> &'a [Value] {
    at(obj, path)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// An object field, `None` when absent or not an object.
pub(crate) fn map_at<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a Map<String, Value>> {
    at(obj, path).and_then(Value::as_object)
}

/// Whether a field is present and not null.
pub(crate) fn has(obj: &Value, path: &[&str]) -> bool {
    at(obj, path).is_some_and(|v| !v.is_null())
}

/// The number of entries of an object field (a map such as `data`), `0` when absent.
pub(crate) fn map_len(obj: &Value, path: &[&str]) -> usize {
    map_at(obj, path).map_or(0, Map::len)
}

/// The status (`"True"`, `"False"`, `"Unknown"`) of the first condition of the given type.
pub(crate) fn condition_status<'a>(obj: &'a Value, type_: &str) -> Option<&'a str> {
    list_at(obj, &["status", "conditions"])
        .iter()
        .find(|c| str_at(c, &["type"]) == type_)
        .map(|c| str_at(c, &["status"]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn missing_and_null_fields_read_as_zero_values() {
        let o = json!({"spec": {"replicas": 3, "paused": null, "name": "x"}});
        assert_eq!(int_at(&o, &["spec", "replicas"]), 3);
        assert_eq!(int_at(&o, &["spec", "missing"]), 0);
        assert_eq!(str_at(&o, &["spec", "paused"]), "");
        assert!(!has(&o, &["spec", "paused"]));
        assert!(has(&o, &["spec", "name"]));
        assert!(list_at(&o, &["status", "conditions"]).is_empty());
    }

    #[test]
    fn the_first_condition_of_a_type_wins() {
        let o = json!({"status": {"conditions": [
            {"type": "Ready", "status": "False"}, {"type": "Ready", "status": "True"}]}});
        assert_eq!(condition_status(&o, "Ready"), Some("False"));
        assert_eq!(condition_status(&o, "Initialized"), None);
    }
}
