//! Views of stored objects that several controllers share: the pod as the controllers read
//! it, the controller reference, and the readers of JSON fields they are parsed with. Each
//! controller's own objects (a ReplicaSet, a Job, a DaemonSet's nodes) keep their views in
//! the controller's module. Pure: no I/O.
//!
//! Planner: pure, no I/O.

mod pod;

pub use pod::{DELETION_COST, Pod, parse_deletion_cost};

use jiff::Timestamp;
use serde_json::Value;

/// A controller ownerReference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
}

/// The string at `ptr`, empty when absent.
pub(crate) fn str_at<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

/// The elements of the array at `ptr`; none when absent.
pub(crate) fn array_at<'a>(v: &'a Value, ptr: &str) -> impl Iterator<Item = &'a Value> {
    v.pointer(ptr)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// The integer at `ptr`.
pub(crate) fn int_at(v: &Value, ptr: &str) -> Option<i64> {
    v.pointer(ptr).and_then(Value::as_i64)
}

/// The RFC 3339 time at `ptr`.
pub(crate) fn time_at(v: &Value, ptr: &str) -> Option<Timestamp> {
    v.pointer(ptr)?.as_str()?.parse().ok()
}

/// A JSON object of strings as a map (the registry's, which needs it below the controllers).
pub use berth_registry::meta::string_map;

/// The int32 at `ptr`; 0 when absent or out of range.
pub(crate) fn i32_at(v: &Value, ptr: &str) -> i32 {
    int_at(v, ptr)
        .and_then(|n| i32::try_from(n).ok())
        .unwrap_or_default()
}

/// The ownerReference with `controller: true`, if any.
pub fn controller_of(obj: &Value) -> Option<ControllerRef> {
    obj.pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        .map(|r| ControllerRef {
            api_version: str_at(r, "/apiVersion").to_string(),
            kind: str_at(r, "/kind").to_string(),
            name: str_at(r, "/name").to_string(),
            uid: str_at(r, "/uid").to_string(),
        })
}
