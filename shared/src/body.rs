//! Request bodies as the API server decodes them: the media type of a `Content-Type` header
//! and JSON, YAML or protobuf documents into JSON values, with upstream's error wording. Pure (no I/O),
//! so the decoder can be fuzzed outside the server.

pub mod duplicates;

use serde_json::Value;

use crate::protobuf::{self, ProtobufError};

/// Why a body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// A media type the API does not decode (CBOR, anything unknown): HTTP 415.
    #[error(
        "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf"
    )]
    UnsupportedMediaType,
    /// A protobuf body that does not decode (HTTP 400).
    #[error("{0}")]
    Protobuf(#[from] ProtobufError),
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

/// Decodes a JSON, YAML or protobuf document of media type `content_type` (as [`media_type`] gives it).
/// A server-side apply body (`application/apply-patch+yaml`) may be either.
pub fn decode(content_type: &str, raw: &[u8]) -> Result<Value, BodyError> {
    match content_type {
        "application/json" | "application/apply-patch+yaml" | "*/*" => {
            match serde_json::from_slice(raw) {
                Ok(v) => Ok(v),
                Err(e) if content_type == "application/apply-patch+yaml" => {
                    yaml(raw).map_err(|_| BodyError::Json(go_json_error(raw, &e)))
                }
                Err(e) => Err(BodyError::Json(go_json_error(raw, &e))),
            }
        }
        "application/yaml" | "application/x-yaml" | "text/yaml" => yaml(raw),
        protobuf::MEDIA_TYPE => Ok(protobuf::decode(raw)?),
        _ => Err(BodyError::UnsupportedMediaType),
    }
}

/// A JSON syntax error in the words of Go's `encoding/json` where clients look for them: a
/// body that is not JSON at all (YAML sent as JSON, say) is `invalid character 'a' looking for
/// beginning of value`, a cut-off one `unexpected end of JSON input`; other errors keep serde's
/// text.
fn go_json_error(raw: &[u8], e: &serde_json::Error) -> String {
    let first = raw.iter().find(|b| !b.is_ascii_whitespace());
    match first {
        None => "unexpected end of JSON input".to_string(),
        Some(b)
            if !matches!(
                b,
                b'{' | b'[' | b'"' | b'-' | b'0'..=b'9' | b't' | b'f' | b'n'
            ) =>
        {
            let c = if b.is_ascii_graphic() {
                format!("'{}'", *b as char)
            } else {
                format!("'\\x{b:02x}'")
            };
            format!("invalid character {c} looking for beginning of value")
        }
        Some(_) if e.is_eof() => "unexpected end of JSON input".to_string(),
        Some(_) => e.to_string(),
    }
}

/// The JSON type name Go's decoder gives a value it cannot unmarshal into a struct.
pub fn go_json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Upstream's `summarizeData(body, 30)`, the tail of a decode error: `<empty>`, the first 30
/// bytes as text when the body starts with `{`, else their hex, with ` ...` when cut.
pub fn summarize(raw: &[u8]) -> String {
    const MAX: usize = 30;
    if raw.is_empty() {
        return "<empty>".to_string();
    }
    let head = &raw[..raw.len().min(MAX)];
    let more = if raw.len() > MAX { " ..." } else { "" };
    if raw[0] == b'{' {
        format!("{}{more}", String::from_utf8_lossy(head))
    } else {
        let hex: String = head.iter().map(|b| format!("{b:02x}")).collect();
        format!("{hex}{more}")
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
    fn json_syntax_errors_use_gos_words_where_clients_look_for_them() {
        let table: [(&[u8], &str); 4] = [
            (
                b"apiVersion: v1\nkind: Pod\n",
                "couldn't get version/kind; json parse error: invalid character 'a' looking for beginning of value",
            ),
            (
                b"",
                "couldn't get version/kind; json parse error: unexpected end of JSON input",
            ),
            (
                b"  ",
                "couldn't get version/kind; json parse error: unexpected end of JSON input",
            ),
            (
                b"{\"kind\": ",
                "couldn't get version/kind; json parse error: unexpected end of JSON input",
            ),
        ];
        for (body, want) in table {
            let got = decode("application/json", body).unwrap_err().to_string();
            assert_eq!(got, want, "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn summaries_are_upstreams_first_thirty_bytes_as_text_or_hex() {
        assert_eq!(summarize(b""), "<empty>");
        assert_eq!(summarize(b"{\"a\":1}"), "{\"a\":1}");
        assert_eq!(
            summarize(b"{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{}}"),
            "{\"kind\":\"Pod\",\"apiVersion\":\"v1 ..."
        );
        // The case kubectl's own tests post: a YAML file sent as JSON.
        assert_eq!(
            summarize(b"apiVersion: v1\r\nkind: PersistentVolume\r\n"),
            "61706956657273696f6e3a2076310d0a6b696e643a205065727369737465 ..."
        );
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
            decode("application/vnd.kubernetes.protobuf", b"{}"),
            Err(BodyError::Protobuf(ProtobufError::NoMagic))
        );
        assert_eq!(
            decode("application/cbor", b"{}"),
            Err(BodyError::UnsupportedMediaType)
        );
        assert_eq!(
            decode("text/plain", b"{}"),
            Err(BodyError::UnsupportedMediaType)
        );
    }
}
