//! Conversion between the versions of a kind that share one storage: a request in a version
//! that is not stored (`ResourceType::stored_as`) has its body converted to the stored version
//! on the way in and every object it is answered with converted back on the way out: the
//! HorizontalPodAutoscaler ([`hpa`]: autoscaling/v1 ↔ autoscaling/v2), and custom resources of
//! a definition with several versions (conversion `None`: only `apiVersion` changes, as
//! upstream's `nopConverter` does; conversion `Webhook`: [`webhook`], called by the API
//! server).

pub mod hpa;
pub mod webhook;

use crate::resource::ResourceType;
use serde_json::Value;

/// Why a body could not be converted to the stored version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConversionError {
    /// An annotation that carries the fields the older version cannot hold does not decode.
    #[error("{0}")]
    Annotation(String),
}

/// Converts `obj`, a body written in `rt`'s version, to the stored version. Objects of other
/// kinds (a Status, a DeleteOptions) pass unchanged.
pub fn to_storage(rt: &ResourceType, obj: Value) -> Result<Value, ConversionError> {
    match (rt.kind, rt.version, rt.stored_as) {
        ("HorizontalPodAutoscaler", "v1", Some("v2")) if is_kind(&obj, rt.kind) => {
            hpa::v1_to_v2(obj)
        }
        (_, _, Some(storage)) if rt.custom && is_kind(&obj, rt.kind) => {
            Ok(with_version(obj, rt.group, storage))
        }
        _ => Ok(obj),
    }
}

/// Converts a stored object to `rt`'s version. Objects of other kinds pass unchanged.
pub fn from_storage(rt: &ResourceType, obj: Value) -> Value {
    match (rt.kind, rt.version, rt.stored_as) {
        ("HorizontalPodAutoscaler", "v1", Some("v2")) if is_kind(&obj, rt.kind) => {
            hpa::v2_to_v1(obj)
        }
        (_, version, Some(_)) if rt.custom && is_kind(&obj, rt.kind) => {
            with_version(obj, rt.group, version)
        }
        _ => obj,
    }
}

/// Converts whatever a response carries to `rt`'s version: an object of the kind, a list of
/// them (`<Kind>List`), or a watch event (`{"type", "object"}`). Anything else (a Status, a
/// Table) passes unchanged.
pub fn response_from_storage(rt: &ResourceType, mut body: Value) -> Value {
    if body.get("type").is_some()
        && let Some(obj) = body.get_mut("object")
    {
        *obj = from_storage(rt, obj.take());
        return body;
    }
    if is_kind(&body, &rt.list_kind()) {
        body["apiVersion"] = Value::String(rt.api_version());
        if let Some(items) = body.get_mut("items").and_then(Value::as_array_mut) {
            for item in items.iter_mut() {
                *item = from_storage(rt, item.take());
            }
        }
        return body;
    }
    from_storage(rt, body)
}

/// `obj` with its `apiVersion` set to `group/version`.
fn with_version(mut obj: Value, group: &str, version: &str) -> Value {
    obj["apiVersion"] = Value::String(format!("{group}/{version}"));
    obj
}

fn is_kind(obj: &Value, kind: &str) -> bool {
    obj.get("kind").and_then(Value::as_str) == Some(kind)
}
