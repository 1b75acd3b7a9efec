//! Protobuf messages to their JSON form, as kube-apiserver's Go types would write them after
//! decoding: field names from the schema, inline embeddings flattened, meta.v1 `Time` as
//! RFC 3339, `Quantity` and `IntOrString` in their JSON shapes, bytes in base64.
//!
//! Go's protobuf encoder writes every non-pointer field, zero or not, and its JSON encoder
//! leaves zero values out (`omitempty`): a zero scalar is dropped here, except for the pointer
//! fields in [`ZERO_MEANS_SOMETHING`], whose zero is a value a client chose (`replicas: 0`,
//! `terminationGracePeriodSeconds: 0`, `runAsUser: 0`).

use base64::Engine;
use serde_json::{Map, Value};

use super::ProtobufError;
use super::schema::{Card, Field, Message, Schema, Ty};
use super::special::{self, Special};
use super::wire::{Reader, Value as Wire};

/// Nesting deeper than this is refused (Kubernetes' deepest types nest about 20 levels).
pub const MAX_DEPTH: usize = 100;

/// Pointer fields whose zero value (0, false, "") is a client's choice, not an unset field.
/// Every other scalar zero is dropped, as Go's `omitempty` drops the non-pointer ones.
pub const ZERO_MEANS_SOMETHING: &[&str] = &[
    "replicas",
    "minReplicas",
    "parallelism",
    "completions",
    "backoffLimit",
    "backoffLimitPerIndex",
    "maxFailedIndexes",
    "revisionHistoryLimit",
    "successfulJobsHistoryLimit",
    "failedJobsHistoryLimit",
    "startingDeadlineSeconds",
    "ttlSecondsAfterFinished",
    "terminationGracePeriodSeconds",
    "gracePeriodSeconds",
    "deletionGracePeriodSeconds",
    "progressDeadlineSeconds",
    "runAsUser",
    "runAsGroup",
    "fsGroup",
    "runAsNonRoot",
    "privileged",
    "allowPrivilegeEscalation",
    "readOnlyRootFilesystem",
    "automountServiceAccountToken",
    "enableServiceLinks",
    "hostUsers",
    "suspend",
    "orphanDependents",
    "storageClassName",
    "selectPolicy",
    "stabilizationWindowSeconds",
    "targetCPUUtilizationPercentage",
    "averageUtilization",
    "optional",
    "defaultMode",
    "mode",
    "priority",
    "value",
    "ready",
    "serving",
    "terminating",
];

/// Decodes `bytes` as message `name`.
pub fn message(
    schema: &Schema,
    name: &'static str,
    bytes: &[u8],
    depth: usize,
) -> Result<Value, ProtobufError> {
    if depth > MAX_DEPTH {
        return Err(ProtobufError::Malformed(format!(
            "messages nested deeper than {MAX_DEPTH}"
        )));
    }
    if let Some(kind) = Special::of(name) {
        return special::decode(kind, bytes, depth);
    }
    let msg = schema
        .message(name)
        .ok_or_else(|| ProtobufError::Malformed(format!("unknown message {name}")))?;
    if msg.is_string_list() {
        let mut out = Map::new();
        fields(schema, msg, bytes, depth, &mut out)?;
        return Ok(out.remove("items").unwrap_or_else(|| Value::Array(vec![])));
    }
    let mut out = Map::new();
    fields(schema, msg, bytes, depth, &mut out)?;
    Ok(Value::Object(out))
}

/// Decodes the fields of `msg` into `out` (an inline embedding's fields land in its parent's).
fn fields(
    schema: &Schema,
    msg: &Message,
    bytes: &[u8],
    depth: usize,
    out: &mut Map<String, Value>,
) -> Result<(), ProtobufError> {
    let mut reader = Reader::new(bytes);
    while let Some((tag, wire)) = reader.next_field()? {
        let Some(field) = msg.by_tag(tag) else {
            continue;
        };
        let Some(name) = field.name else {
            let Ty::Message(inner) = field.ty else {
                continue;
            };
            if let Value::Object(embedded) = message(schema, inner, len(field, wire)?, depth + 1)? {
                out.extend(embedded);
            }
            continue;
        };
        match field.card {
            Card::Single => {
                let value = element(schema, field, wire, depth)?;
                let is_message = matches!(field.ty, Ty::Message(_));
                if (is_message && !value.is_null()) || keeps(name, &value) {
                    out.insert(name.to_string(), value);
                }
            }
            Card::Repeated => {
                let items = out.entry(name).or_insert_with(|| Value::Array(vec![]));
                if let Value::Array(items) = items {
                    repeated(schema, field, wire, depth, items)?;
                }
            }
            Card::Map => {
                let (key, value) = entry(schema, field, len(field, wire)?, depth)?;
                let map = out.entry(name).or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(map) = map {
                    map.insert(key, value);
                }
            }
        }
    }
    Ok(())
}

/// Whether a single scalar field's decoded value belongs in the JSON form.
fn keeps(name: &str, value: &Value) -> bool {
    let zero = match value {
        Value::Null => return false,
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        _ => false,
    };
    !zero || ZERO_MEANS_SOMETHING.contains(&name)
}

fn len<'a>(field: &Field, wire: Wire<'a>) -> Result<&'a [u8], ProtobufError> {
    match wire {
        Wire::Len(b) => Ok(b),
        other => Err(mismatch(field, other)),
    }
}

fn mismatch(field: &Field, wire: Wire<'_>) -> ProtobufError {
    ProtobufError::Malformed(format!(
        "field {} ({}) has the wrong wire type ({wire:?})",
        field.tag,
        field.name.unwrap_or("inline")
    ))
}

/// One value of `field`'s element type.
fn element(
    schema: &Schema,
    field: &Field,
    wire: Wire<'_>,
    depth: usize,
) -> Result<Value, ProtobufError> {
    Ok(match (field.ty, wire) {
        (Ty::String, Wire::Len(b)) => Value::String(
            std::str::from_utf8(b)
                .map_err(|_| ProtobufError::Malformed(format!("field {} is not UTF-8", field.tag)))?
                .to_string(),
        ),
        (Ty::Int32, Wire::Varint(v)) => Value::from(v as i64 as i32),
        (Ty::Int64, Wire::Varint(v)) => Value::from(v as i64),
        (Ty::Bool, Wire::Varint(v)) => Value::Bool(v != 0),
        (Ty::Double, Wire::Fixed64(v)) => {
            serde_json::Number::from_f64(f64::from_bits(v)).map_or(Value::Null, Value::Number)
        }
        (Ty::Bytes, Wire::Len(b)) => {
            Value::String(base64::engine::general_purpose::STANDARD.encode(b))
        }
        (Ty::Message(name), Wire::Len(b)) => message(schema, name, b, depth + 1)?,
        (_, other) => return Err(mismatch(field, other)),
    })
}

/// The elements one occurrence of a repeated field holds: one, or a packed run of numbers.
fn repeated(
    schema: &Schema,
    field: &Field,
    wire: Wire<'_>,
    depth: usize,
    items: &mut Vec<Value>,
) -> Result<(), ProtobufError> {
    match (field.ty, wire) {
        (Ty::Int32 | Ty::Int64 | Ty::Bool, Wire::Len(packed)) => {
            let mut reader = PackedVarints { rest: packed };
            while let Some(v) = reader.next_varint()? {
                items.push(element(schema, field, Wire::Varint(v), depth)?);
            }
        }
        (_, wire) => {
            let v = element(schema, field, wire, depth)?;
            if !v.is_null() {
                items.push(v);
            }
        }
    }
    Ok(())
}

/// A map entry: key 1 (a string), value 2 (of the field's type).
fn entry(
    schema: &Schema,
    field: &Field,
    bytes: &[u8],
    depth: usize,
) -> Result<(String, Value), ProtobufError> {
    let mut key = String::new();
    let mut value = None;
    let mut reader = Reader::new(bytes);
    while let Some((tag, wire)) = reader.next_field()? {
        match (tag, wire) {
            (1, Wire::Len(b)) => {
                key = String::from_utf8(b.to_vec())
                    .map_err(|_| ProtobufError::Malformed("a map key is not UTF-8".into()))?;
            }
            (2, wire) => value = Some(element(schema, field, wire, depth)?),
            _ => {}
        }
    }
    let value = value.unwrap_or_else(|| match field.ty {
        Ty::String | Ty::Bytes => Value::String(String::new()),
        Ty::Message(_) => Value::Object(Map::new()),
        Ty::Bool => Value::Bool(false),
        Ty::Int32 | Ty::Int64 | Ty::Double => Value::from(0),
    });
    Ok((key, value))
}

/// Varints packed in one length-delimited field.
struct PackedVarints<'a> {
    rest: &'a [u8],
}

impl PackedVarints<'_> {
    fn next_varint(&mut self) -> Result<Option<u64>, ProtobufError> {
        if self.rest.is_empty() {
            return Ok(None);
        }
        let mut value = 0u64;
        for i in 0..10 {
            let Some((&byte, rest)) = self.rest.split_first() else {
                return Err(ProtobufError::Truncated);
            };
            self.rest = rest;
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(Some(value));
            }
        }
        Err(ProtobufError::Malformed(
            "varint longer than 10 bytes".into(),
        ))
    }
}
