//! The Table of a custom resource type: `Name`, then the version's `additionalPrinterColumns`
//! (or `Age` when it has none), each cell read by the column's JSONPath as upstream's
//! `tableconvertor` reads it.

use jiff::Timestamp;
use serde_json::{Map, Value, json};
use serde_json_path::JsonPath;

use super::Served;
use crate::table::{ColumnDefinition, IncludeObject, duration, partial_object_metadata};

/// A printer column, its path compiled.
struct Column {
    definition: ColumnDefinition,
    path: Option<JsonPath>,
}

/// The columns of `served`'s Table.
fn columns(served: &Served) -> Vec<Column> {
    let mut out = vec![Column {
        definition: ColumnDefinition {
            name: "Name".into(),
            type_: "string".into(),
            format: "name".into(),
            description: NAME_DESCRIPTION.into(),
            priority: 0,
        },
        path: None,
    }];
    let given = &served.version.columns;
    if given.is_empty() {
        out.push(column(
            "Age",
            "date",
            "",
            AGE_DESCRIPTION,
            0,
            ".metadata.creationTimestamp",
        ));
        return out;
    }
    for c in given {
        let s = |k: &str| c[k].as_str().unwrap_or_default();
        out.push(column(
            s("name"),
            s("type"),
            s("format"),
            s("description"),
            c["priority"].as_i64().unwrap_or(0) as i32,
            s("jsonPath"),
        ));
    }
    out
}

fn column(
    name: &str,
    type_: &str,
    format: &str,
    description: &str,
    priority: i32,
    path: &str,
) -> Column {
    Column {
        definition: ColumnDefinition {
            name: name.into(),
            type_: type_.into(),
            format: format.into(),
            description: description.into(),
            priority,
        },
        path: compile(path),
    }
}

/// A Kubernetes JSONPath (`.spec.replicas`, `.status.conditions[?(@.type=="Ready")].status`)
/// as RFC 9535 reads it.
pub fn compile(path: &str) -> Option<JsonPath> {
    let path = path.trim().trim_start_matches('{').trim_end_matches('}');
    JsonPath::parse(&format!("${path}")).ok()
}

const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const AGE_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// One row's cells: the first match of each column's path, typed as the column says (`nil`
/// when absent or of another type), dates as ages.
fn cells(columns: &[Column], obj: &Value, now: Timestamp) -> Vec<Value> {
    columns
        .iter()
        .map(|c| match &c.path {
            None => obj["metadata"]["name"].clone(),
            Some(path) => match path.query(obj).first() {
                Some(v) => cell(&c.definition.type_, v, now),
                None => Value::Null,
            },
        })
        .collect()
}

/// Upstream's `cellForJSONValue`, and strings printed as the JSONPath template prints them.
fn cell(type_: &str, v: &Value, now: Timestamp) -> Value {
    match (type_, v) {
        ("integer", Value::Number(n)) => n.as_i64().map(Value::from).unwrap_or(Value::Null),
        ("number", Value::Number(n)) => n.as_f64().map(Value::from).unwrap_or(Value::Null),
        ("boolean", Value::Bool(b)) => Value::Bool(*b),
        ("date", Value::String(s)) => match duration::parse_time(Some(s)) {
            Some(_) => Value::String(duration::age(Some(s), now)),
            None => Value::Null,
        },
        ("string", Value::String(s)) => Value::String(s.clone()),
        ("string", other) => Value::String(other.to_string()),
        _ => Value::Null,
    }
}

/// A Table of `served` objects (stored JSON each) with the list's resource version and
/// `continue` token.
pub fn table<'a>(
    served: &Served,
    objects: impl IntoIterator<Item = &'a Value>,
    resource_version: Option<&str>,
    cont: Option<&str>,
    now: Timestamp,
    include: IncludeObject,
) -> Value {
    let columns = columns(served);
    let mut metadata = Map::new();
    if let Some(rv) = resource_version {
        metadata.insert("resourceVersion".into(), Value::String(rv.into()));
    }
    if let Some(c) = cont {
        metadata.insert("continue".into(), Value::String(c.into()));
    }
    let rows: Vec<Value> = objects
        .into_iter()
        .map(|o| {
            let object = match include {
                IncludeObject::None => Value::Null,
                IncludeObject::Metadata => partial_object_metadata(o),
                IncludeObject::Object => o.clone(),
            };
            json!({"cells": cells(&columns, o, now), "object": object})
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": columns.iter().map(|c| &c.definition).collect::<Vec<_>>(),
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::custom::parse_definition;
    use std::sync::Arc;

    fn served(columns: Value) -> Served {
        let def = parse_definition(&json!({
            "metadata": {"name": "crontabs.stable.example.com"},
            "spec": {"group": "stable.example.com", "names": {"plural": "crontabs", "kind": "CronTab"},
                     "versions": [{"name": "v1", "served": true, "storage": true,
                                   "additionalPrinterColumns": columns}]}
        }))
        .expect("parses");
        let version = def.versions[0].clone();
        Served {
            rt: crate::resource::PODS,
            definition: Arc::new(def),
            version,
            storage_version: "v1",
            structural: None,
        }
    }

    #[test]
    fn printer_columns_read_their_paths_and_types() {
        let s = served(json!([
            {"name": "Spec", "type": "string", "jsonPath": ".spec.cronSpec"},
            {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
            {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
            {"name": "Wrong", "type": "integer", "jsonPath": ".spec.cronSpec"},
            {"name": "Missing", "type": "string", "jsonPath": ".spec.nothing", "priority": 1},
        ]));
        let obj = json!({"metadata": {"name": "a"}, "spec": {"cronSpec": "* * * * */5", "replicas": 3},
                         "status": {"conditions": [{"type": "Synced", "status": "False"}, {"type": "Ready", "status": "True"}]}});
        let t = table(
            &s,
            [&obj],
            Some("7"),
            None,
            Timestamp::UNIX_EPOCH,
            IncludeObject::None,
        );
        assert_eq!(
            t["rows"][0]["cells"],
            json!(["a", "* * * * */5", 3, "True", null, null])
        );
        let names: Vec<&str> = t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            ["Name", "Spec", "Replicas", "Ready", "Wrong", "Missing"]
        );
        assert_eq!(t["columnDefinitions"][5]["priority"], 1);
    }

    #[test]
    fn without_printer_columns_the_table_shows_the_age() {
        let s = served(json!([]));
        let obj = json!({"metadata": {"name": "a", "creationTimestamp": "1970-01-01T00:00:00Z"}});
        let now = Timestamp::from_second(300).unwrap();
        let t = table(&s, [&obj], None, None, now, IncludeObject::None);
        assert_eq!(t["rows"][0]["cells"], json!(["a", "5m"]));
        assert_eq!(t["columnDefinitions"][1]["name"], "Age");
    }
}
