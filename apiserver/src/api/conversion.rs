//! Requests in a version stored as another one (autoscaling/v1 HorizontalPodAutoscalers,
//! stored as autoscaling/v2; custom resources of a definition with several versions): bodies
//! converted to the stored version before admission, and every object an answer carries
//! converted back to the version asked for. A definition with a conversion webhook has its
//! objects converted by the webhook ([`Registry::convert_by_webhook`], on a blocking thread):
//! every object not in the version wanted, whatever version it was stored in (objects written
//! before the storage version changed stay in the old one), a list's in one review.

use std::sync::Arc;

use super::error::ApiError;
use axum::body::Body;
use axum::http::header;
use axum::response::Response;
use berth_registry::Registry;
use berth_registry::webhook::conversion::Converting;
use berth_shared::conversion;
use berth_shared::conversion::webhook::gvk_of;
use berth_shared::custom::{self, Served};
use berth_shared::resource::{ResourceType, storage_of};
use serde_json::Value;

/// Whether requests to `view` are converted.
pub fn is_converted(view: &'static ResourceType) -> bool {
    !std::ptr::eq(storage_of(view), view) || webhook_of(view).is_some()
}

/// Whether `view`'s objects are converted by a webhook.
pub fn converts_by_webhook(view: &ResourceType) -> bool {
    webhook_of(view).is_some()
}

/// The served type of `view` when its definition converts through a webhook.
fn webhook_of(view: &ResourceType) -> Option<Arc<Served>> {
    custom::served(view).filter(|s| s.definition.conversion_webhook.is_some())
}

/// Converts `objects` (a list's items when `list`) to `group/version` through `served`'s
/// webhook; blocks.
fn by_webhook(
    registry: &Registry,
    served: &Served,
    version: &str,
    objects: &mut [Value],
    list: bool,
) -> Result<(), ApiError> {
    let Some(webhook) = &served.definition.conversion_webhook else {
        return Ok(());
    };
    let desired = format!("{}/{version}", served.definition.group);
    let Some(first) = objects.iter().find(|o| o["apiVersion"] != desired.as_str()) else {
        return Ok(());
    };
    let kind = &served.definition.names.kind;
    let gvk = if list {
        gvk_of(first, &served.definition.names.list_kind)
    } else {
        gvk_of(first, kind)
    };
    let c = Converting {
        webhook,
        desired: &desired,
        gvk: &gvk,
        list,
    };
    registry
        .convert_by_webhook(c, objects)
        .map_err(|e| ApiError::Unknown(e.to_string()))
}

/// A body written in `view`'s version, in the stored version. The body's own apiVersion and
/// kind are checked against `view` first (and filled in when absent), as upstream's decoder
/// does before converting. May block on a conversion webhook.
pub fn body_to_storage_blocking(
    registry: &Registry,
    view: &'static ResourceType,
    mut body: Value,
) -> Result<Value, ApiError> {
    if !is_converted(view) {
        return Ok(body);
    }
    berth_registry::meta::check_type(view, &mut body)?;
    if let Some(served) = webhook_of(view) {
        if body["kind"] != view.kind {
            return Ok(body);
        }
        let mut one = [body];
        by_webhook(registry, &served, served.storage_version, &mut one, false)?;
        let [body] = one;
        return Ok(body);
    }
    conversion::to_storage(view, body).map_err(|e| ApiError::BadRequest(e.to_string()))
}

/// An object read from the store, in `view`'s version. May block on a conversion webhook.
pub fn object_in_version_blocking(
    registry: &Registry,
    view: &'static ResourceType,
    obj: Value,
) -> Result<Value, ApiError> {
    if !is_converted(view) {
        return Ok(obj);
    }
    if let Some(served) = webhook_of(view) {
        if obj["kind"] != view.kind {
            return Ok(obj);
        }
        let mut one = [obj];
        by_webhook(registry, &served, view.version, &mut one, false)?;
        let [obj] = one;
        return Ok(obj);
    }
    Ok(conversion::from_storage(view, obj))
}

/// [`body_to_storage_blocking`] off the async workers when a webhook is called.
pub async fn body_to_storage(
    registry: &Registry,
    view: &'static ResourceType,
    body: Value,
) -> Result<Value, ApiError> {
    if webhook_of(view).is_none() {
        return body_to_storage_blocking(registry, view, body);
    }
    let registry = registry.clone();
    super::blocking(move || body_to_storage_blocking(&registry, view, body)).await
}

/// [`object_in_version_blocking`] off the async workers when a webhook is called.
pub async fn object_in_version(
    registry: &Registry,
    view: &'static ResourceType,
    obj: Value,
) -> Result<Value, ApiError> {
    if webhook_of(view).is_none() {
        return object_in_version_blocking(registry, view, obj);
    }
    let registry = registry.clone();
    super::blocking(move || object_in_version_blocking(&registry, view, obj)).await
}

/// A stored object in `view`'s version by the `None` strategy's rule (apiVersion rewritten),
/// for what prints an object without calling anything (Tables).
pub fn apiversion_in(view: &'static ResourceType, obj: Value) -> Value {
    if std::ptr::eq(storage_of(view), view) {
        return obj;
    }
    conversion::from_storage(view, obj)
}

/// A whole (non-streaming) JSON answer in `view`'s version: an object, a list of them (its
/// items in one review for a webhook), or anything else (a Status, a Table) as it was.
pub async fn answer_in_version(
    registry: &Registry,
    view: &'static ResourceType,
    answer: Response,
) -> Result<Response, ApiError> {
    let (mut parts, body) = answer.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return Ok(Response::from_parts(parts, Body::empty()));
    };
    let Ok(value) = serde_json::from_slice::<Value>(&bytes) else {
        return Ok(Response::from_parts(parts, Body::from(bytes)));
    };
    let converted = match webhook_of(view) {
        None => conversion::response_from_storage(view, value),
        Some(served) => {
            let registry = registry.clone();
            super::blocking(move || answer_by_webhook(&registry, &served, view, value)).await?
        }
    };
    let out = serde_json::to_vec(&converted).unwrap_or_else(|_| bytes.to_vec());
    parts.headers.remove(header::CONTENT_LENGTH);
    Ok(Response::from_parts(parts, Body::from(out)))
}

fn answer_by_webhook(
    registry: &Registry,
    served: &Served,
    view: &'static ResourceType,
    mut body: Value,
) -> Result<Value, ApiError> {
    if body["kind"] == view.list_kind().as_str() {
        if let Some(items) = body.get_mut("items").and_then(Value::as_array_mut) {
            by_webhook(registry, served, view.version, items, true)?;
        }
        body["apiVersion"] = Value::String(view.api_version());
        return Ok(body);
    }
    if body["kind"] != view.kind {
        return Ok(body);
    }
    let mut one = [body];
    by_webhook(registry, served, view.version, &mut one, false)?;
    let [body] = one;
    Ok(body)
}

/// A whole JSON answer (an object or a list) converted to `view`'s version and printed as
/// `view`'s Table (its own printer columns), as upstream converts before printing.
pub async fn table_in_version(
    registry: &Registry,
    view: &'static ResourceType,
    answer: Response,
    include: berth_shared::table::IncludeObject,
) -> Result<Response, ApiError> {
    let (mut parts, body) = answer.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let value: Value =
        serde_json::from_slice(&bytes).map_err(|e| ApiError::Internal(e.to_string()))?;
    let Some(served) = custom::served(view) else {
        return Ok(Response::from_parts(parts, Body::from(bytes)));
    };
    let registry = registry.clone();
    let table = super::blocking(move || {
        let converted = answer_by_webhook(&registry, &served, view, value)?;
        let (items, meta) = if converted["kind"] == view.list_kind().as_str() {
            let items = converted["items"].as_array().cloned().unwrap_or_default();
            (items, converted["metadata"].clone())
        } else {
            let meta = converted["metadata"].clone();
            (vec![converted], meta)
        };
        Ok::<_, ApiError>(custom::printer::table(
            &served,
            &items,
            meta["resourceVersion"].as_str(),
            meta["continue"].as_str(),
            jiff::Timestamp::now(),
            include,
        ))
    })
    .await?;
    let out = serde_json::to_vec(&table).map_err(|e| ApiError::Internal(e.to_string()))?;
    parts.headers.remove(header::CONTENT_LENGTH);
    Ok(Response::from_parts(parts, Body::from(out)))
}
