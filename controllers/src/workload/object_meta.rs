//! A stored object's name and uid, as the controllers' loop tests read them from the JSON
//! the fake control plane returns.

use serde_json::Value;

fn field(v: &Value, key: &str) -> String {
    v["metadata"][key].as_str().unwrap_or_default().to_string()
}

/// `metadata.name`, empty when unset.
pub(crate) fn name(v: &Value) -> String {
    field(v, "name")
}

/// `metadata.uid`, empty when unset.
pub(crate) fn uid(v: &Value) -> String {
    field(v, "uid")
}
