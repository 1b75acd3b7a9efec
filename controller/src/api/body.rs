//! Request bodies: the 3 MiB limit, content types (JSON, YAML; protobuf is refused with 415)
//! and decoding errors as upstream words them.

use super::MAX_BODY_BYTES;
use super::error::ApiError;
use axum::body::Body;
use axum::http::{HeaderMap, header};
use bytes::Bytes;
use serde_json::Value;

/// The request's media type without parameters; a missing one is JSON, as upstream treats it.
pub fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "application/json".to_string())
}

/// Reads the raw body, refusing more than [`MAX_BODY_BYTES`].
pub async fn read_raw(body: Body) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|_| ApiError::TooLarge(MAX_BODY_BYTES))
}

/// Decodes a JSON or YAML document.
pub fn decode(content_type: &str, raw: &[u8]) -> Result<Value, ApiError> {
    match content_type {
        "application/json" | "application/apply-patch+yaml" | "*/*" => {
            match serde_json::from_slice(raw) {
                Ok(v) => Ok(v),
                Err(e) if content_type == "application/apply-patch+yaml" => {
                    yaml(raw).map_err(|_| bad_json(e))
                }
                Err(e) => Err(bad_json(e)),
            }
        }
        "application/yaml" | "application/x-yaml" | "text/yaml" => yaml(raw),
        t if t.contains("protobuf") => Err(ApiError::UnsupportedMediaType),
        _ => Err(ApiError::UnsupportedMediaType),
    }
}

fn bad_json(e: serde_json::Error) -> ApiError {
    ApiError::BadRequest(format!("couldn't get version/kind; json parse error: {e}"))
}

fn yaml(raw: &[u8]) -> Result<Value, ApiError> {
    let text = std::str::from_utf8(raw)
        .map_err(|e| ApiError::BadRequest(format!("yaml: invalid UTF-8: {e}")))?;
    serde_saphyr::from_str::<Value>(text)
        .map_err(|e| ApiError::BadRequest(format!("error converting YAML to JSON: {e}")))
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
