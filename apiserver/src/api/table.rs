//! `meta.k8s.io/v1` Table responses for lists, gets and watch events, built with the shared
//! printers (rows carry PartialObjectMetadata so `-A` and `--show-labels` work, or the whole
//! object or nothing, as `includeObject` asks).

use super::error::ApiError;
use berth_shared::resource::ResourceType;
use berth_shared::table::{self, IncludeObject};
use berth_store::StoredObject;
use serde_json::Value;

/// A Table of `items` as JSON bytes, with the list's `continue` token when paginated: each row
/// is written as it is made, from the stored bytes (see [`table::write_table`]).
pub fn render(
    rt: &ResourceType,
    items: &[StoredObject],
    resource_version: &str,
    cont: Option<&str>,
    include: IncludeObject,
) -> Result<Vec<u8>, ApiError> {
    if let Some(served) = berth_shared::custom::served(rt) {
        let objects = items
            .iter()
            .map(|i| i.value())
            .collect::<Result<Vec<Value>, _>>()
            .map_err(|e| ApiError::Internal(format!("a stored {} is not JSON: {e}", rt.kind)))?;
        let objects: Vec<Value> = objects
            .into_iter()
            .map(|o| super::conversion::apiversion_in(served.rt, o))
            .collect();
        let t = berth_shared::custom::printer::table(
            &served,
            &objects,
            Some(resource_version),
            cont,
            jiff::Timestamp::now(),
            include,
        );
        return serde_json::to_vec(&t).map_err(|e| ApiError::Internal(e.to_string()));
    }
    // Most of a row is its object's metadata, most of that its managedFields.
    let mut out = Vec::with_capacity(512 + items.iter().map(|i| i.data.len()).sum::<usize>());
    table::write_table(
        &mut out,
        rt.kind,
        items.iter().map(|i| &i.data[..]),
        Some(resource_version),
        cont,
        jiff::Timestamp::now(),
        include,
    )
    .map_err(|e| ApiError::Internal(format!("a stored {} is not JSON: {e}", rt.kind)))?;
    Ok(out)
}

/// A one-row Table for a watch event.
pub fn render_one(rt: &ResourceType, obj: &Value, include: IncludeObject) -> Value {
    let rv = obj
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str);
    if let Some(served) = berth_shared::custom::served(rt) {
        return berth_shared::custom::printer::table(
            &served,
            std::slice::from_ref(obj),
            rv,
            None,
            jiff::Timestamp::now(),
            include,
        );
    }
    table::table_with(
        rt.kind,
        std::slice::from_ref(obj),
        rv,
        jiff::Timestamp::now(),
        include,
    )
}

/// What a GET asks for: a Table (with rows carrying what `includeObject` says) when the first
/// media type of `Accept` is `as=Table`, else `None` (plain JSON).
pub fn requested(
    accept: Option<&str>,
    q: &berth_shared::query::Query,
) -> Result<Option<IncludeObject>, ApiError> {
    let wants = accept.is_some_and(|a| {
        a.split(',')
            .next()
            .is_some_and(|first| first.contains("as=Table"))
    });
    if !wants {
        return Ok(None);
    }
    IncludeObject::parse(q.get("includeObject"))
        .map(Some)
        .map_err(ApiError::BadRequest)
}
