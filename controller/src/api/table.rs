//! `meta.k8s.io/v1` Table responses for lists, gets and watch events, built with the shared
//! printers (rows carry PartialObjectMetadata so `-A` and `--show-labels` work).

use super::error::ApiError;
use crate::store::StoredObject;
use berth_shared::resource::ResourceType;
use berth_shared::table;
use serde_json::{Value, json};

/// A Table of `items`, with the list's `continue` token when paginated.
pub fn render(
    rt: &ResourceType,
    items: &[StoredObject],
    resource_version: &str,
    cont: Option<&str>,
) -> Result<Value, ApiError> {
    let objects = items
        .iter()
        .map(StoredObject::value)
        .collect::<Result<Vec<_>, _>>()?;
    let mut t = table::table(
        rt.kind,
        &objects,
        Some(resource_version),
        jiff::Timestamp::now(),
    );
    if let Some(c) = cont {
        t["metadata"]["continue"] = json!(c);
    }
    Ok(t)
}

/// A one-row Table for a watch event.
pub fn render_one(rt: &ResourceType, obj: &Value) -> Value {
    let rv = obj
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str);
    table::table(
        rt.kind,
        std::slice::from_ref(obj),
        rv,
        jiff::Timestamp::now(),
    )
}
