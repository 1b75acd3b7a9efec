//! Requests in a version stored as another one (autoscaling/v1 HorizontalPodAutoscalers,
//! stored as autoscaling/v2): bodies converted to the stored version before admission, and
//! every object an answer carries converted back to the version asked for.

use super::error::ApiError;
use axum::body::Body;
use axum::http::header;
use axum::response::Response;
use berth_shared::conversion;
use berth_shared::resource::{ResourceType, storage_of};
use serde_json::Value;

/// Whether requests to `view` are converted.
pub fn is_converted(view: &'static ResourceType) -> bool {
    !std::ptr::eq(storage_of(view), view)
}

/// A body written in `view`'s version, in the stored version. The body's own apiVersion and
/// kind are checked against `view` first (and filled in when absent), as upstream's decoder
/// does before converting.
pub fn body_to_storage(view: &'static ResourceType, mut body: Value) -> Result<Value, ApiError> {
    if !is_converted(view) {
        return Ok(body);
    }
    berth_registry::meta::check_type(view, &mut body)?;
    conversion::to_storage(view, body).map_err(|e| ApiError::BadRequest(e.to_string()))
}

/// An object read from the store, in `view`'s version.
pub fn object_in_version(view: &'static ResourceType, obj: Value) -> Value {
    if !is_converted(view) {
        return obj;
    }
    conversion::from_storage(view, obj)
}

/// A whole (non-streaming) JSON answer in `view`'s version: an object, a list of them, or
/// anything else (a Status, a Table) as it was.
pub async fn answer_in_version(view: &'static ResourceType, answer: Response) -> Response {
    let (mut parts, body) = answer.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return Response::from_parts(parts, Body::empty());
    };
    let Ok(value) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    let converted = conversion::response_from_storage(view, value);
    let out = serde_json::to_vec(&converted).unwrap_or_else(|_| bytes.to_vec());
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(out))
}
