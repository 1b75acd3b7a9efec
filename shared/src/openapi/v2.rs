//! `/openapi/v2` in protobuf (gnostic's `openapi.v2.Document`), as kubectl ≤ 1.26 reads it for
//! `explain`, client-side validation, its query-parameter checks (`dryRun`,
//! `fieldValidation`) and its patch types: the v3 paths and schemas rewritten in Swagger 2.0's
//! shapes (`#/definitions/` references, a described reference as `$ref` beside its
//! description, typed query and path parameters, a body parameter).
//!
//! The messages (`messages`) are the subset of gnostic's `OpenAPIv2.proto` this needs. kubectl's
//! parser rejects the whole document for one malformed schema (a `$ref` with a type, an array
//! without exactly one item schema, an unknown type), so the conversion refuses anything it
//! does not know instead of guessing.

pub(super) mod messages;

use prost::Message;
use serde_json::Value;

use super::schemas::REF_PREFIX;
use messages::*;

/// Why a v3 schema or operation has no Swagger 2.0 form here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum V2Error {
    #[error("{at}: {what}")]
    Unsupported { at: String, what: String },
}

impl V2Error {
    /// The same documents fail the same way.
    #[allow(dead_code)]
    pub(super) fn is_transient(&self) -> bool {
        false
    }
}

fn unsupported(at: &str, what: impl Into<String>) -> V2Error {
    V2Error::Unsupported {
        at: at.to_string(),
        what: what.into(),
    }
}

const TYPES: &[&str] = &["string", "number", "integer", "boolean", "object", "array"];

fn definition_ref(at: &str, r: &Value) -> Result<String, V2Error> {
    r.as_str()
        .and_then(|r| r.strip_prefix(REF_PREFIX))
        .map(|name| format!("#/definitions/{name}"))
        .ok_or_else(|| unsupported(at, format!("reference {r}")))
}

/// The `x-…` keys of a v3 object, as gnostic vendor extensions.
fn extensions(map: &serde_json::Map<String, Value>) -> Vec<NamedAny> {
    map.iter()
        .filter(|(k, _)| k.starts_with("x-"))
        .map(|(k, v)| NamedAny {
            name: k.clone(),
            value: Some(Any {
                yaml: v.to_string(),
            }),
        })
        .collect()
}

fn string_of(map: &serde_json::Map<String, Value>, key: &str) -> String {
    map.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// One v3 schema in Swagger 2.0's form; `at` names it in errors.
pub(super) fn schema(at: &str, v: &Value) -> Result<Schema, V2Error> {
    let map = v
        .as_object()
        .ok_or_else(|| unsupported(at, format!("schema {v}")))?;
    let mut out = Schema {
        description: string_of(map, "description"),
        format: string_of(map, "format"),
        vendor_extension: extensions(map),
        ..Schema::default()
    };
    let reference = match map.get("allOf") {
        Some(Value::Array(all)) => match all.as_slice() {
            [only] => Some(only.get("$ref").ok_or_else(|| unsupported(at, "allOf"))?),
            _ => return Err(unsupported(at, "allOf of several schemas")),
        },
        Some(other) => return Err(unsupported(at, format!("allOf {other}"))),
        None => map.get("$ref"),
    };
    if let Some(r) = reference {
        // kubectl refuses a reference with a type or properties beside it.
        out.r#ref = definition_ref(at, r)?;
        return Ok(out);
    }
    match map.get("type") {
        Some(Value::String(t)) if TYPES.contains(&t.as_str()) => {
            out.r#type = Some(TypeItem {
                value: vec![t.clone()],
            });
        }
        Some(other) => return Err(unsupported(at, format!("type {other}"))),
        // IntOrString and Quantity: upstream's v2 calls them strings (any scalar validates).
        None if map.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) => {
            out.r#type = Some(TypeItem {
                value: vec!["string".into()],
            });
            out.format = "int-or-string".into();
        }
        None => {}
    }
    // No `required`: kubectl ≤ 1.26 refuses a manifest missing a required field before sending
    // it, and k8s-openapi's lists name fields the server defaults (a pod failure policy
    // pattern's `status`); the server's own validation answers for missing fields, in its words.
    if let Some(Value::Object(props)) = map.get("properties") {
        let mut named = Vec::with_capacity(props.len());
        for (name, p) in props {
            named.push(NamedSchema {
                name: name.clone(),
                value: Some(schema(&format!("{at}.{name}"), p)?),
            });
        }
        out.properties = Some(Properties {
            additional_properties: named,
        });
    }
    match map.get("items") {
        Some(items @ Value::Object(_)) => {
            out.items = Some(ItemsItem {
                schema: vec![schema(&format!("{at}[]"), items)?],
            });
        }
        Some(other) => return Err(unsupported(at, format!("items {other}"))),
        None if map.get("type") == Some(&Value::String("array".into())) => {
            return Err(unsupported(at, "array without items"));
        }
        None => {}
    }
    out.additional_properties = match map.get("additionalProperties") {
        Some(Value::Bool(b)) => Some(AdditionalPropertiesItem {
            schema: None,
            boolean: Some(*b),
        }),
        Some(s @ Value::Object(_)) => Some(AdditionalPropertiesItem {
            schema: Some(Box::new(schema(&format!("{at}{{}}"), s)?)),
            boolean: None,
        }),
        Some(other) => return Err(unsupported(at, format!("additionalProperties {other}"))),
        None => None,
    };
    Ok(out)
}

fn parameter(at: &str, p: &Value) -> Result<ParametersItem, V2Error> {
    let map = p
        .as_object()
        .ok_or_else(|| unsupported(at, format!("parameter {p}")))?;
    let type_ = p["schema"]["type"].as_str().unwrap_or("string").to_string();
    let non_body = match map.get("in").and_then(Value::as_str) {
        Some("query") => NonBodyParameter {
            query_parameter_sub_schema: Some(QueryParameterSubSchema {
                required: p["required"].as_bool().unwrap_or(false),
                r#in: "query".into(),
                description: string_of(map, "description"),
                name: string_of(map, "name"),
                r#type: type_,
            }),
            path_parameter_sub_schema: None,
        },
        Some("path") => NonBodyParameter {
            query_parameter_sub_schema: None,
            path_parameter_sub_schema: Some(PathParameterSubSchema {
                required: true,
                r#in: "path".into(),
                description: string_of(map, "description"),
                name: string_of(map, "name"),
                r#type: type_,
            }),
        },
        other => return Err(unsupported(at, format!("parameter in {other:?}"))),
    };
    Ok(ParametersItem {
        parameter: Some(Parameter {
            body_parameter: None,
            non_body_parameter: Some(non_body),
        }),
    })
}

fn parameters(at: &str, v: Option<&Value>) -> Result<Vec<ParametersItem>, V2Error> {
    match v {
        Some(Value::Array(ps)) => ps.iter().map(|p| parameter(at, p)).collect(),
        Some(other) => Err(unsupported(at, format!("parameters {other}"))),
        None => Ok(Vec::new()),
    }
}

fn operation(at: &str, op: &Value) -> Result<Operation, V2Error> {
    let map = op.as_object().ok_or_else(|| unsupported(at, "operation"))?;
    let mut params = parameters(at, map.get("parameters"))?;
    let mut consumes = Vec::new();
    if let Some(content) = op["requestBody"]["content"].as_object() {
        consumes = content.keys().cloned().collect();
        let body = content
            .values()
            .next()
            .ok_or_else(|| unsupported(at, "request body without content"))?;
        params.insert(
            0,
            ParametersItem {
                parameter: Some(Parameter {
                    body_parameter: Some(BodyParameter {
                        description: String::new(),
                        name: "body".into(),
                        r#in: "body".into(),
                        required: true,
                        schema: Some(schema(at, &body["schema"])?),
                    }),
                    non_body_parameter: None,
                }),
            },
        );
    }
    let mut codes = Vec::new();
    if let Some(responses) = map.get("responses").and_then(Value::as_object) {
        for (code, r) in responses {
            let body = match r["content"].as_object().and_then(|c| c.values().next()) {
                Some(media) => Some(SchemaItem {
                    schema: Some(schema(at, &media["schema"])?),
                }),
                None => None,
            };
            codes.push(NamedResponseValue {
                name: code.clone(),
                value: Some(ResponseValue {
                    response: Some(Response {
                        description: r["description"].as_str().unwrap_or_default().into(),
                        schema: body,
                    }),
                }),
            });
        }
    }
    Ok(Operation {
        tags: map
            .get("tags")
            .and_then(Value::as_array)
            .map(|t| {
                t.iter()
                    .filter_map(Value::as_str)
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default(),
        operation_id: string_of(map, "operationId"),
        produces: vec!["application/json".into()],
        consumes,
        parameters: params,
        responses: Some(Responses {
            response_code: codes,
        }),
        vendor_extension: extensions(map),
    })
}

/// kubectl's v2 query-parameter check (`fieldValidation`, `dryRun`; kubectl 1.27/1.28, and
/// 1.29+ when the v3 document lacks a kind) asks, for a kind no PATCH operation names, whether
/// Namespace PATCH declares the parameter; if it does, it lists CustomResourceDefinitions to see
/// whether the kind is a custom one, and this API serves none, so the 404 fails the command
/// (`failed to check CRD`) instead of its reaching the server's `no matches for kind`. Namespace
/// PATCH here leaves the two out: kubectl then validates namespaces itself, from the definition.
fn without_crd_lookup(op: &mut Operation) {
    let namespace = serde_json::json!({"group": "", "version": "v1", "kind": "Namespace"});
    let is_namespace = op.vendor_extension.iter().any(|e| {
        e.name == "x-kubernetes-group-version-kind"
            && e.value
                .as_ref()
                .and_then(|v| serde_json::from_str::<Value>(&v.yaml).ok())
                == Some(namespace.clone())
    });
    if is_namespace {
        op.parameters.retain(|p| {
            let query = p
                .parameter
                .as_ref()
                .and_then(|p| p.non_body_parameter.as_ref())
                .and_then(|n| n.query_parameter_sub_schema.as_ref());
            !query.is_some_and(|q| q.name == "fieldValidation" || q.name == "dryRun")
        });
    }
}

fn path_item(at: &str, item: &Value) -> Result<PathItem, V2Error> {
    let op = |verb: &str| -> Result<Option<Operation>, V2Error> {
        item.get(verb)
            .map(|o| operation(&format!("{verb} {at}"), o))
            .transpose()
    };
    let mut patch = op("patch")?;
    if let Some(patch) = patch.as_mut() {
        without_crd_lookup(patch);
    }
    Ok(PathItem {
        get: op("get")?,
        put: op("put")?,
        post: op("post")?,
        delete: op("delete")?,
        patch,
        parameters: parameters(at, item.get("parameters"))?,
    })
}

/// The whole v2 document from every group-version's v3 `paths` and the schemas they use.
pub(super) fn document<'a>(
    paths: impl IntoIterator<Item = (&'a String, &'a Value)>,
    schemas: impl IntoIterator<Item = (&'a String, &'a Value)>,
) -> Result<Document, V2Error> {
    let mut named_paths = Vec::new();
    for (name, item) in paths {
        named_paths.push(NamedPathItem {
            name: name.clone(),
            value: Some(path_item(name, item)?),
        });
    }
    let mut definitions = Vec::new();
    for (name, s) in schemas {
        definitions.push(NamedSchema {
            name: name.clone(),
            value: Some(schema(name, s)?),
        });
    }
    Ok(Document {
        swagger: "2.0".into(),
        info: Some(Info {
            title: "Kubernetes".into(),
            version: "unversioned".into(),
        }),
        paths: Some(Paths { path: named_paths }),
        definitions: Some(Definitions {
            additional_properties: definitions,
        }),
    })
}

/// The document's protobuf bytes.
pub(super) fn encode(doc: &Document) -> Vec<u8> {
    doc.encode_to_vec()
}

#[cfg(test)]
mod tests;
