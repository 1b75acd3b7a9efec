//! Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`), which kubectl 1.32
//! and later send for `create`: the `k8s\0` envelope around a `runtime.Unknown` that names the
//! object's apiVersion and kind and holds its message. Objects are transcoded to and from
//! their JSON form through a wire schema generated from the k8s-pb and k8s-openapi crates
//! (`schema.txt`, `scripts/gen-protobuf-schema.py`), so the rest of the server only sees JSON.
//! Pure (no I/O); fuzzed with the other body decoders.

mod decode;
mod encode;
mod schema;
mod special;
mod wire;

use serde_json::{Map, Value};

pub use schema::schema;
use wire::{Reader, Value as Wire, Writer};

/// The media type.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The four bytes every enveloped object starts with.
pub const MAGIC: &[u8] = b"k8s\0";

/// Why a protobuf body could not be transcoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtobufError {
    #[error("provided object is not a protobuf message: missing the k8s\\0 prefix")]
    NoMagic,
    #[error("unexpected end of protobuf data")]
    Truncated,
    #[error("malformed protobuf data: {0}")]
    Malformed(String),
    #[error("no kind \"{kind}\" is registered for version \"{api_version}\"")]
    UnknownKind { api_version: String, kind: String },
    #[error("content encoding \"{0}\" is not supported")]
    ContentEncoding(String),
    #[error("cannot encode as protobuf: {0}")]
    Unencodable(String),
}

/// The envelope's parts.
struct Unknown<'a> {
    api_version: String,
    kind: String,
    raw: &'a [u8],
    content_encoding: String,
}

fn unknown(bytes: &[u8]) -> Result<Unknown<'_>, ProtobufError> {
    let mut out = Unknown {
        api_version: String::new(),
        kind: String::new(),
        raw: &[],
        content_encoding: String::new(),
    };
    let text = |b: &[u8]| {
        String::from_utf8(b.to_vec())
            .map_err(|_| ProtobufError::Malformed("the envelope's strings are not UTF-8".into()))
    };
    let mut reader = Reader::new(bytes);
    while let Some((tag, wire)) = reader.next_field()? {
        match (tag, wire) {
            (1, Wire::Len(type_meta)) => {
                let mut tm = Reader::new(type_meta);
                while let Some((tag, wire)) = tm.next_field()? {
                    match (tag, wire) {
                        (1, Wire::Len(b)) => out.api_version = text(b)?,
                        (2, Wire::Len(b)) => out.kind = text(b)?,
                        _ => {}
                    }
                }
            }
            (2, Wire::Len(raw)) => out.raw = raw,
            (3, Wire::Len(b)) => out.content_encoding = text(b)?,
            _ => {}
        }
    }
    Ok(out)
}

/// Decodes an enveloped object to its JSON form, `apiVersion` and `kind` first.
pub fn decode(bytes: &[u8]) -> Result<Value, ProtobufError> {
    decode_at(bytes, 0)
}

/// [`decode`] of an object `depth` messages deep (a `RawExtension` may hold an envelope).
fn decode_at(bytes: &[u8], depth: usize) -> Result<Value, ProtobufError> {
    let body = bytes.strip_prefix(MAGIC).ok_or(ProtobufError::NoMagic)?;
    let envelope = unknown(body)?;
    if !envelope.content_encoding.is_empty() {
        return Err(ProtobufError::ContentEncoding(envelope.content_encoding));
    }
    let schema = schema();
    let name = schema
        .message_for(&envelope.api_version, &envelope.kind)
        .ok_or_else(|| ProtobufError::UnknownKind {
            api_version: envelope.api_version.clone(),
            kind: envelope.kind.clone(),
        })?;
    let fields = match decode::message(schema, name, envelope.raw, depth + 1)? {
        Value::Object(fields) => fields,
        _ => Map::new(),
    };
    let mut object = Map::new();
    object.insert("apiVersion".into(), Value::String(envelope.api_version));
    object.insert("kind".into(), Value::String(envelope.kind));
    object.extend(
        fields
            .into_iter()
            .filter(|(k, _)| k != "apiVersion" && k != "kind"),
    );
    Ok(Value::Object(object))
}

/// Encodes an object (with its `apiVersion` and `kind`) in the envelope.
pub fn encode(object: &Value) -> Result<Vec<u8>, ProtobufError> {
    let field = |k: &str| object.get(k).and_then(Value::as_str).unwrap_or_default();
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    let schema = schema();
    let name = schema
        .message_for(api_version, kind)
        .ok_or_else(|| ProtobufError::UnknownKind {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
        })?;
    let raw = encode::message(schema, name, object, 0)?;
    let mut type_meta = Writer::default();
    type_meta.len_field(1, api_version.as_bytes());
    type_meta.len_field(2, kind.as_bytes());
    let mut envelope = Writer {
        bytes: MAGIC.to_vec(),
    };
    envelope.len_field(1, &type_meta.bytes);
    envelope.len_field(2, &raw);
    envelope.len_field(3, b"");
    envelope.len_field(4, b"");
    Ok(envelope.bytes)
}

#[cfg(test)]
mod tests;
