//! `meta.k8s.io/v1` Table responses: the shared printers' columns and cells, with each row
//! carrying the object's metadata (PartialObjectMetadata) so `-A` and `--show-labels` work.

use super::error::ApiError;
use crate::store::StoredObject;
use berth_shared::resource::ResourceType;
use berth_shared::table;
use serde_json::{Value, json};

fn row(rt: &ResourceType, obj: &Value, now: jiff::Timestamp) -> Value {
    json!({
        "cells": table::cells(rt.kind, obj, now),
        "object": {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
        },
    })
}

/// A Table of `items`.
pub fn render(
    rt: &ResourceType,
    items: &[StoredObject],
    resource_version: &str,
    cont: Option<&str>,
) -> Result<Value, ApiError> {
    let now = jiff::Timestamp::now();
    let mut rows = Vec::with_capacity(items.len());
    for item in items {
        rows.push(row(rt, &item.value()?, now));
    }
    let mut meta = json!({"resourceVersion": resource_version});
    if let Some(c) = cont {
        meta["continue"] = json!(c);
    }
    Ok(json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": table::columns(rt.kind),
        "rows": rows,
    }))
}

/// A one-row Table for a watch event (column definitions included every time: kubectl
/// tolerates it, and a client joining mid-stream needs them).
pub fn render_one(rt: &ResourceType, obj: &Value) -> Value {
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": obj.pointer("/metadata/resourceVersion").cloned().unwrap_or(Value::Null)},
        "columnDefinitions": table::columns(rt.kind),
        "rows": [row(rt, obj, jiff::Timestamp::now())],
    })
}
