//! Reading a stored object's status conditions, which Nodes and Pods both carry.

use serde_json::Value;

/// Whether the stored object `v` has the condition `type_` with status `True`.
pub(crate) fn is_true(v: &Value, type_: &str) -> bool {
    v.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == type_ && c["status"] == "True")
        })
}
