//! Request bodies: the 3 MiB limit, content types (JSON, YAML; protobuf is refused with 415)
//! and decoding errors as upstream words them. The decoding itself is `berth_shared::body`.

use super::MAX_BODY_BYTES;
use super::error::ApiError;
use axum::body::Body;
use axum::http::{HeaderMap, header};
use berth_shared::body::{self as shared_body, BodyError};
use bytes::Bytes;
use serde_json::Value;

/// The request's media type without parameters; a missing one is JSON, as upstream treats it.
pub fn content_type(headers: &HeaderMap) -> String {
    shared_body::media_type(
        headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok()),
    )
}

/// Reads the raw body, refusing more than [`MAX_BODY_BYTES`].
pub async fn read_raw(body: Body) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|_| ApiError::TooLarge(MAX_BODY_BYTES))
}

/// Decodes a JSON or YAML document.
pub fn decode(content_type: &str, raw: &[u8]) -> Result<Value, ApiError> {
    shared_body::decode(content_type, raw).map_err(ApiError::from)
}

impl From<BodyError> for ApiError {
    fn from(e: BodyError) -> ApiError {
        match e {
            BodyError::UnsupportedMediaType => ApiError::UnsupportedMediaType,
            other => ApiError::BadRequest(other.to_string()),
        }
    }
}

/// Reads and decodes a write body.
pub async fn read(body: Body, headers: &HeaderMap) -> Result<Value, ApiError> {
    let ct = content_type(headers);
    if ct.contains("protobuf") {
        return Err(ApiError::UnsupportedMediaType);
    }
    let raw = read_raw(body).await?;
    decode(&ct, &raw)
}
