//! Request bodies as the API server decodes them: the media type of a `Content-Type` header
//! and JSON or YAML documents into JSON values, with upstream's error wording. Pure (no I/O),
//! so the decoder can be fuzzed outside the server.

use serde_json::Value;

/// Why a body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// A media type the API does not decode (protobuf, CBOR, anything unknown): HTTP 415.
    #[error(
        "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml"
    )]
    UnsupportedMediaType,
    /// Malformed JSON (HTTP 400); the text is upstream's.
    #[error("couldn't get version/kind; json parse error: {0}")]
    Json(String),
    /// YAML that is not UTF-8 (HTTP 400).
    #[error("yaml: invalid UTF-8: {0}")]
    Utf8(String),
    /// Malformed YAML, or YAML over the parser's depth and alias budgets (HTTP 400).
    #[error("error converting YAML to JSON: {0}")]
    Yaml(String),
}

impl BodyError {
    /// The same body fails the same way.
    pub fn is_transient(&self) -> bool {
        false
    }
}

/// The media type of a `Content-Type` header value, without parameters and lower-cased; a
/// missing or empty one is JSON, as upstream treats it.
pub fn media_type(header: Option<&str>) -> String {
    header
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

/// Decodes a JSON or YAML document of media type `content_type` (as [`media_type`] gives it).
/// A server-side apply body (`application/apply-patch+yaml`) may be either.
pub fn decode(content_type: &str, raw: &[u8]) -> Result<Value, BodyError> {
    match content_type {
        "application/json" | "application/apply-patch+yaml" | "*/*" => {
            match serde_json::from_slice(raw) {
                Ok(v) => Ok(v),
                Err(e) if content_type == "application/apply-patch+yaml" => {
                    yaml(raw).map_err(|_| BodyError::Json(e.to_string()))
                }
                Err(e) => Err(BodyError::Json(e.to_string())),
            }
        }
        "application/yaml" | "application/x-yaml" | "text/yaml" => yaml(raw),
        _ => Err(BodyError::UnsupportedMediaType),
    }
}

fn yaml(raw: &[u8]) -> Result<Value, BodyError> {
    let text = std::str::from_utf8(raw).map_err(|e| BodyError::Utf8(e.to_string()))?;
    serde_saphyr::from_str::<Value>(text).map_err(|e| BodyError::Yaml(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn media_types_drop_parameters_and_default_to_json() {
        assert_eq!(
            media_type(Some("Application/YAML; charset=utf-8")),
            "application/yaml"
        );
        assert_eq!(media_type(Some(" ")), "application/json");
        assert_eq!(media_type(None), "application/json");
    }

    #[test]
    fn json_and_yaml_bodies_decode_to_the_same_value() {
        let want = json!({"kind": "ConfigMap", "data": {"a": "1"}});
        let from_json = decode(
            "application/json",
            br#"{"kind":"ConfigMap","data":{"a":"1"}}"#,
        );
        let from_yaml = decode("application/yaml", b"kind: ConfigMap\ndata:\n  a: \"1\"\n");
        assert_eq!(from_json, Ok(want.clone()));
        assert_eq!(from_yaml, Ok(want.clone()));
        let apply = decode(
            "application/apply-patch+yaml",
            b"kind: ConfigMap\ndata: {a: \"1\"}",
        );
        assert_eq!(apply, Ok(want));
    }

    #[test]
    fn malformed_bodies_and_unknown_media_types_are_refused() {
        let err = decode("application/json", b"{").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("couldn't get version/kind; json parse error: "),
            "{err}"
        );
        assert!(matches!(
            decode("application/apply-patch+yaml", b"a: [").unwrap_err(),
            BodyError::Json(_)
        ));
        assert!(matches!(
            decode("application/yaml", b"\xff").unwrap_err(),
            BodyError::Utf8(_)
        ));
        assert_eq!(
            decode("application/vnd.kubernetes.protobuf", b"k8s\0"),
            Err(BodyError::UnsupportedMediaType)
        );
        assert_eq!(
            decode("text/plain", b"{}"),
            Err(BodyError::UnsupportedMediaType)
        );
    }
}
