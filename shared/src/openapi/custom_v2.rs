//! Custom resources in `/openapi/v2`, as upstream's CRD OpenAPI controller publishes them for
//! kubectl ≤ 1.26: each served version's schema in the form Swagger 2.0 (and kubectl's parser
//! of it) can take (upstream's `ToStructuralOpenAPIV2`), and its paths. The built-in document
//! is encoded once; the custom part is encoded on its own and appended, since protobuf merges
//! two encoded messages by concatenation (the repeated `paths` and `definitions` entries add
//! up, the equal `swagger`/`info` fields are kept).

use serde_json::{Map, Value};

use super::v2::{self, V2Error};

/// `schema` as upstream turns a structural schema into its v2 form: the junctors (`allOf`,
/// `anyOf`, `oneOf`, `not`) dropped; a `nullable` field without type, properties or items
/// (kubectl cannot take a null where a type is declared); a field keeping unknown fields
/// without properties or items, and without its `object` type; an array without items
/// untyped. Descriptions, formats and the `x-kubernetes-*` extensions stay.
pub(super) fn to_v2(schema: &Value) -> Value {
    let mut out = schema.clone();
    convert(&mut out);
    out
}

fn convert(v: &mut Value) {
    let Some(map) = v.as_object_mut() else {
        return;
    };
    for junctor in ["allOf", "anyOf", "oneOf", "not"] {
        map.remove(junctor);
    }
    if map.remove("nullable") == Some(Value::Bool(true)) {
        for key in ["type", "items", "properties"] {
            map.remove(key);
        }
    }
    if map.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
        map.remove("items");
        map.remove("properties");
        if map.get("type").and_then(Value::as_str) == Some("object") {
            map.remove("type");
        }
    }
    if map.get("type").and_then(Value::as_str) == Some("array") && !map.contains_key("items") {
        map.remove("type");
    }
    if let Some(Value::Object(props)) = map.get_mut("properties") {
        props.values_mut().for_each(convert);
    }
    if let Some(items) = map.get_mut("items") {
        convert(items);
    }
    if let Some(additional @ Value::Object(_)) = map.get_mut("additionalProperties") {
        convert(additional);
    }
}

/// The custom part of the v2 document, encoded: `paths` and `schemas` are v3 paths and
/// component schemas (already in v2's form, see [`to_v2`]). A schema kubectl's parser would
/// refuse (and with it the whole document) is replaced by an untyped one that keeps its
/// group-version-kind, so `explain` still finds the kind and validation lets it through.
pub(super) fn encode_part(
    paths: &Map<String, Value>,
    schemas: &Map<String, Value>,
) -> Result<Vec<u8>, V2Error> {
    let mut checked = Map::new();
    for (name, s) in schemas {
        let s = match v2::schema(name, s) {
            Ok(_) => s.clone(),
            Err(e) => {
                tracing::warn!(schema = %name, error = %e, "a custom schema has no OpenAPI v2 form; published untyped");
                let mut open = Map::new();
                for key in ["description", "x-kubernetes-group-version-kind"] {
                    if let Some(v) = s.get(key) {
                        open.insert(key.into(), v.clone());
                    }
                }
                Value::Object(open)
            }
        };
        checked.insert(name.clone(), s);
    }
    let mut doc = v2::document(paths, &checked)?;
    doc.swagger.clear();
    doc.info = None;
    Ok(v2::encode(&doc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schemas_lose_what_v2_cannot_say_as_upstream_converts_them() {
        let v3 = json!({
            "type": "object", "description": "a backup",
            "properties": {
                "spec": {"type": "object", "required": ["target"], "properties": {
                    "target": {"type": "string", "description": "what to back up", "pattern": "^a"},
                    "retain": {"type": "integer", "nullable": true, "format": "int32"},
                    "port": {"x-kubernetes-int-or-string": true,
                        "anyOf": [{"type": "integer"}, {"type": "string"}]},
                    "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                        "properties": {"a": {"type": "string"}}},
                    "raw": {"type": "array", "x-kubernetes-preserve-unknown-fields": true,
                        "items": {"type": "string"}},
                    "tags": {"type": "array", "x-kubernetes-list-type": "set",
                        "items": {"type": "string", "nullable": false}},
                    "labels": {"type": "object", "additionalProperties": {"type": "string", "allOf": [{"minLength": 1}]}},
                }},
            },
        });
        let spec = json!({"type": "object", "required": ["target"], "properties": {
            "target": {"type": "string", "description": "what to back up", "pattern": "^a"},
            "retain": {"format": "int32"},
            "port": {"x-kubernetes-int-or-string": true},
            "extra": {"x-kubernetes-preserve-unknown-fields": true},
            "raw": {"x-kubernetes-preserve-unknown-fields": true},
            "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        }});
        let want =
            json!({"type": "object", "description": "a backup", "properties": {"spec": spec}});
        let got = to_v2(&v3);
        assert_eq!(got, want);
        assert!(v2::schema("backup", &got).is_ok());
    }

    #[test]
    fn a_schema_kubectl_would_refuse_is_published_untyped() {
        let schemas: Map<String, Value> = serde_json::from_value(json!({
            "com.example.v1.Odd": {"type": "object", "description": "odd",
                "properties": {"x": {"type": "weird"}},
                "x-kubernetes-group-version-kind": [{"group": "example.com", "kind": "Odd", "version": "v1"}]},
        }))
        .unwrap();
        let bytes = encode_part(&Map::new(), &schemas).unwrap();
        let doc = <v2::messages::Document as prost::Message>::decode(bytes.as_slice()).unwrap();
        let defs = doc.definitions.unwrap().additional_properties;
        let odd = defs[0].value.as_ref().unwrap();
        assert!(odd.r#type.is_none() && odd.properties.is_none());
        assert_eq!(odd.description, "odd");
        assert_eq!(doc.swagger, "");
    }
}
