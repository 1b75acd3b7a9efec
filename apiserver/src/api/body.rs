//! Request bodies: the 3 MiB limit, content types (JSON, YAML, protobuf; others are refused with 415)
//! and decoding errors as upstream words them. The decoding itself is `berth_shared::body`.

use super::MAX_BODY_BYTES;
use super::error::ApiError;
use axum::body::Body;
use axum::http::{HeaderMap, header};
use berth_shared::body::{self as shared_body, BodyError};
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde_json::Value;

/// The request's media type without parameters; a missing one is JSON, as upstream treats it.
pub fn content_type(headers: &HeaderMap) -> String {
    shared_body::media_type(
        headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok()),
    )
}

/// A body whose declared length is over [`MAX_BODY_BYTES`] is refused before any of it is read:
/// a client that asked `Expect: 100-continue` gets the 413 instead of a `100 Continue`, and one
/// that sends anyway has what it sends discarded by the connection's lingering close.
fn check_declared_length(headers: &HeaderMap) -> Result<(), ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    match declared {
        Some(n) if n > MAX_BODY_BYTES as u64 => Err(ApiError::TooLarge(MAX_BODY_BYTES)),
        _ => Ok(()),
    }
}

/// Reads the raw body, refusing more than [`MAX_BODY_BYTES`] (413). A body that cannot be read
/// (a broken chunked encoding, a client gone) is upstream's plain read error: a 500 with its
/// message and no reason.
pub async fn read_raw(body: Body, headers: &HeaderMap) -> Result<Bytes, ApiError> {
    check_declared_length(headers)?;
    match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<LengthLimitError>() => Err(ApiError::TooLarge(MAX_BODY_BYTES)),
        Err(e) => Err(ApiError::Unknown(format!(
            "error reading the request body: {e}"
        ))),
    }
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
    let raw = read_raw(body, headers).await?;
    decode(&ct, &raw)
}

/// The struct Go's decoder first reads a body into (`SimpleMetaFactory.Interpret`), as its
/// `cannot unmarshal` error names it.
const GO_TYPE_META: &str = "struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }";

/// Decodes a write body that must be a `kind`. A body that does not decode, or is not an
/// object, is refused as upstream's create and update handlers refuse it
/// (`transformDecodeError` without a kind): `the object provided is unrecognized (must be of
/// type Namespace): couldn't get version/kind; json parse error: … (<summary of the body>)`.
/// A body of another kind is the registry's to refuse (it knows the kind then).
pub fn decode_as(content_type: &str, raw: &[u8], kind: &str) -> Result<Value, ApiError> {
    let unrecognized = |why: String| {
        ApiError::BadRequest(format!(
            "the object provided is unrecognized (must be of type {kind}): {why} ({})",
            shared_body::summarize(raw)
        ))
    };
    match shared_body::decode(content_type, raw) {
        Ok(v) if v.is_object() || v.is_null() => Ok(v),
        Ok(v) => Err(unrecognized(format!(
            "couldn't get version/kind; json parse error: json: cannot unmarshal {} into Go \
             value of type {GO_TYPE_META}",
            shared_body::go_json_type(&v)
        ))),
        Err(BodyError::UnsupportedMediaType) => Err(ApiError::UnsupportedMediaType),
        Err(e) => Err(unrecognized(e.to_string())),
    }
}

/// Reads and decodes a write body that must be a `kind` (see [`decode_as`]), also naming the
/// fields a JSON body repeats in one object (the decoded value keeps the last of each):
/// `fieldValidation` decides whether that is a warning or an error.
pub async fn read_as(
    body: Body,
    headers: &HeaderMap,
    kind: &str,
) -> Result<(Value, Vec<String>), ApiError> {
    let ct = content_type(headers);
    let raw = read_raw(body, headers).await?;
    let value = decode_as(&ct, &raw, kind)?;
    let duplicates = if ct == "application/json" {
        shared_body::duplicates::duplicate_fields(&raw)
    } else {
        Vec::new()
    };
    Ok((value, duplicates))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn with_length(n: usize) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(n));
        h
    }

    #[tokio::test]
    async fn a_declared_length_over_the_limit_is_413_before_the_body_is_read() {
        // A body that would fail if it were read: only the header decides.
        let body = Body::from_stream(futures::stream::once(async {
            Err::<Bytes, std::io::Error>(std::io::Error::other("must not be read"))
        }));
        let e = read_raw(body, &with_length(MAX_BODY_BYTES + 1))
            .await
            .unwrap_err();
        assert_eq!(e.reason(), "RequestEntityTooLarge");
        assert_eq!(e.to_string(), "Request entity too large: limit is 3145728");
    }

    #[tokio::test]
    async fn a_body_over_the_limit_without_a_length_is_413() {
        let big = Body::from(vec![b'x'; MAX_BODY_BYTES + 1]);
        let e = read_raw(big, &HeaderMap::new()).await.unwrap_err();
        assert_eq!(e.code(), axum::http::StatusCode::PAYLOAD_TOO_LARGE);
        let exact = Body::from(vec![b'x'; MAX_BODY_BYTES]);
        let ok = read_raw(exact, &with_length(MAX_BODY_BYTES)).await;
        assert_eq!(ok.map(|b| b.len()).ok(), Some(MAX_BODY_BYTES));
    }

    #[tokio::test]
    async fn a_body_that_breaks_off_is_a_500_without_a_reason_not_a_413() {
        let broken = Body::from_stream(futures::stream::once(async {
            Err::<Bytes, std::io::Error>(std::io::Error::other("connection reset"))
        }));
        let e = read_raw(broken, &HeaderMap::new()).await.unwrap_err();
        assert_eq!(e.code(), axum::http::StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(e.reason(), "");
        assert!(e.status().get("reason").is_none(), "{}", e.status());
        assert!(e.to_string().contains("connection reset"), "{e}");
    }

    #[test]
    fn a_body_that_is_not_an_object_is_unrecognized_in_upstreams_words() {
        let table: [(&[u8], &str); 3] = [
            (
                b"apiVersion: v1\r\nkind: Pod\r\nmetadata:\r\n  name: valid-pod\r\n",
                "the object provided is unrecognized (must be of type Namespace): couldn't get \
                 version/kind; json parse error: invalid character 'a' looking for beginning of \
                 value (61706956657273696f6e3a2076310d0a6b696e643a20506f640d0a6d6574 ...)",
            ),
            (
                b"[]",
                "the object provided is unrecognized (must be of type Namespace): couldn't get \
                 version/kind; json parse error: json: cannot unmarshal array into Go value of \
                 type struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind \
                 string \"json:\\\"kind,omitempty\\\"\" } (5b5d)",
            ),
            (
                b"{\"kind\":",
                "the object provided is unrecognized (must be of type Namespace): couldn't get \
                 version/kind; json parse error: unexpected end of JSON input ({\"kind\":)",
            ),
        ];
        for (raw, want) in table {
            let e = decode_as("application/json", raw, "Namespace").unwrap_err();
            assert_eq!(e.reason(), "BadRequest");
            assert_eq!(e.to_string(), want);
        }
        assert!(decode_as("application/json", b"{}", "Namespace").is_ok());
        assert!(decode_as("application/json", b"null", "Namespace").is_ok());
    }
}
