//! JSON values to protobuf messages, the inverse of `decode`: every JSON field the schema
//! knows is written under its tag; fields the schema lacks are left out.

use base64::Engine;
use serde_json::{Map, Value};

use super::ProtobufError;
use super::decode::MAX_DEPTH;
use super::schema::{Card, Field, Message, Schema, Ty};
use super::special::{self, Special};
use super::wire::Writer;

/// Encodes `value` as message `name`.
pub fn message(
    schema: &Schema,
    name: &str,
    value: &Value,
    depth: usize,
) -> Result<Vec<u8>, ProtobufError> {
    if depth > MAX_DEPTH {
        return Err(ProtobufError::Unencodable(format!(
            "values nested deeper than {MAX_DEPTH}"
        )));
    }
    if let Some(kind) = Special::of(name) {
        return special::encode(kind, value);
    }
    let msg = schema
        .message(name)
        .ok_or_else(|| ProtobufError::Unencodable(format!("unknown message {name}")))?;
    let mut w = Writer::default();
    if msg.is_string_list() {
        let mut wrapped = Map::new();
        wrapped.insert("items".into(), value.clone());
        fields(schema, msg, &wrapped, depth, &mut w)?;
        return Ok(w.bytes);
    }
    let object = value
        .as_object()
        .ok_or_else(|| ProtobufError::Unencodable(format!("{name} must be an object")))?;
    fields(schema, msg, object, depth, &mut w)?;
    Ok(w.bytes)
}

fn fields(
    schema: &Schema,
    msg: &Message,
    object: &Map<String, Value>,
    depth: usize,
    w: &mut Writer,
) -> Result<(), ProtobufError> {
    for field in &msg.fields {
        let Some(name) = field.name else {
            // An inline embedding reads its fields from the same JSON object.
            if let Ty::Message(inner) = field.ty {
                let bytes = message(schema, inner, &Value::Object(object.clone()), depth + 1)?;
                if !bytes.is_empty() {
                    w.len_field(field.tag, &bytes);
                }
            }
            continue;
        };
        let Some(value) = object.get(name).filter(|v| !v.is_null()) else {
            continue;
        };
        match field.card {
            Card::Single => element(schema, field, value, depth, w)?,
            Card::Repeated => {
                let items = value.as_array().ok_or_else(|| not_a(field, "list"))?;
                for item in items {
                    element(schema, field, item, depth, w)?;
                }
            }
            Card::Map => {
                let map = value.as_object().ok_or_else(|| not_a(field, "map"))?;
                for (k, v) in map {
                    let mut entry = Writer::default();
                    entry.len_field(1, k.as_bytes());
                    // The entry's value is field 2 of the entry message.
                    let value_field = Field {
                        tag: 2,
                        ..field.clone()
                    };
                    let mut keyed = Writer::default();
                    element(schema, &value_field, v, depth, &mut keyed)?;
                    entry.bytes.extend_from_slice(&keyed.bytes);
                    w.len_field(field.tag, &entry.bytes);
                }
            }
        }
    }
    Ok(())
}

fn not_a(field: &Field, what: &str) -> ProtobufError {
    ProtobufError::Unencodable(format!(
        "field {} must be a {what}",
        field.name.unwrap_or("inline")
    ))
}

/// Writes one value of `field`'s element type under its tag.
fn element(
    schema: &Schema,
    field: &Field,
    v: &Value,
    depth: usize,
    w: &mut Writer,
) -> Result<(), ProtobufError> {
    let tag = field.tag;
    match field.ty {
        Ty::String => w.len_field(
            tag,
            v.as_str().ok_or_else(|| not_a(field, "string"))?.as_bytes(),
        ),
        Ty::Int32 | Ty::Int64 => {
            let i = v.as_i64().ok_or_else(|| not_a(field, "integer"))?;
            w.varint_field(tag, i as u64);
        }
        Ty::Bool => w.varint_field(
            tag,
            u64::from(v.as_bool().ok_or_else(|| not_a(field, "bool"))?),
        ),
        Ty::Double => {
            let f = v.as_f64().ok_or_else(|| not_a(field, "number"))?;
            w.fixed64_field(tag, f.to_bits());
        }
        Ty::Bytes => {
            let s = v.as_str().ok_or_else(|| not_a(field, "base64 string"))?;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(s)
                .map_err(|_| not_a(field, "base64 string"))?;
            w.len_field(tag, &bytes);
        }
        Ty::Message(name) => {
            let bytes = message(schema, name, v, depth + 1)?;
            w.len_field(tag, &bytes);
        }
    }
    Ok(())
}
