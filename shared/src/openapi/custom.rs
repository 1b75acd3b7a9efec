//! The OpenAPI v3 documents of custom resource group-versions: each served definition
//! version's paths (as the built-in kinds' are made) and its schema as a component (with
//! `apiVersion`, `kind` and `metadata`, tagged with its group-version-kind, and its list
//! type), so `kubectl explain` reads custom resources; and the same paths and schemas (in
//! their v2 form, `custom_v2`) appended to `/openapi/v2` for kubectl ≤ 1.26. Built again when
//! the served types change (tens of milliseconds: the meta schemas come from a fresh catalog).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};

use super::custom_v2::{encode_part, to_v2};
use super::paths::{paths, schema_name};
use super::schemas::{Catalog, refs_in, schema_ref};
use super::{DOCUMENTS, Document, content_hash, gv_path};
use crate::custom::{self, Served, selectable};
use crate::resource::ResourceType;

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";

/// The documents for one generation of the served types.
pub(super) struct CustomDocuments {
    generation: u64,
    pub(super) by_path: BTreeMap<String, Arc<Document>>,
    /// `/openapi/v2` in protobuf: the built-in document with these types' part appended.
    pub(super) v2: Arc<Vec<u8>>,
}

static CACHE: Mutex<Option<Arc<CustomDocuments>>> = Mutex::new(None);

/// The documents of the custom types served now.
pub(super) fn documents() -> Arc<CustomDocuments> {
    let generation = custom::generation();
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(docs) = cache.as_ref().filter(|d| d.generation == generation) {
        return docs.clone();
    }
    let docs = Arc::new(build(generation, &custom::all_served()));
    *cache = Some(docs.clone());
    docs
}

fn build(generation: u64, served: &[Arc<Served>]) -> CustomDocuments {
    let mut by_gv: BTreeMap<(&str, &str), Vec<&Arc<Served>>> = BTreeMap::new();
    for s in served {
        by_gv.entry((s.rt.group, s.rt.version)).or_default().push(s);
    }
    let mut by_path = BTreeMap::new();
    if by_gv.is_empty() {
        return CustomDocuments {
            generation,
            by_path,
            v2: DOCUMENTS.v2.clone(),
        };
    }
    let (mut v2_paths, mut v2_schemas) = (Map::new(), Map::new());
    let catalog = Catalog::build();
    for ((group, version), mut list) in by_gv {
        list.sort_by_key(|s| s.rt.plural);
        let key = gv_path(group, version);
        let rts: Vec<&ResourceType> = list.iter().map(|s| s.rt).collect();
        let paths = paths(&format!("/{key}"), group, version, &rts);
        let mut refs = vec![
            format!("#/components/schemas/{OBJECT_META}"),
            format!("#/components/schemas/{LIST_META}"),
        ];
        refs_in(&Value::Object(paths.clone()), &mut |r| {
            refs.push(r.to_string())
        });
        let mut schemas = catalog.closure(refs.iter().map(String::as_str));
        for s in &list {
            let name = schema_name(group, version, s.rt.kind);
            let list = list_schema(s.rt, &name);
            v2_schemas.insert(format!("{name}List"), list.clone());
            schemas.insert(format!("{name}List"), list);
            let base = s.schema().cloned().unwrap_or_else(open_schema);
            v2_schemas.insert(name.clone(), kind_schema(s, to_v2(&base)));
            schemas.insert(name, kind_schema(s, base));
        }
        v2_paths.extend(paths.iter().map(|(k, v)| (k.clone(), v.clone())));
        let doc = json!({
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes CRD Swagger", "version": "v0.1.0"},
            "paths": paths,
            "components": {"schemas": schemas},
        });
        let json = doc.to_string().into_bytes();
        let hash = content_hash(&json);
        by_path.insert(key, Arc::new(Document { json, hash }));
    }
    let v2 = match encode_part(&v2_paths, &v2_schemas) {
        Ok(part) if !DOCUMENTS.v2.is_empty() => {
            let mut all = Vec::with_capacity(DOCUMENTS.v2.len() + part.len());
            all.extend_from_slice(&DOCUMENTS.v2);
            all.extend_from_slice(&part);
            Arc::new(all)
        }
        Ok(_) => DOCUMENTS.v2.clone(),
        Err(e) => {
            tracing::error!(error = %e, "custom resources left out of OpenAPI v2");
            DOCUMENTS.v2.clone()
        }
    };
    CustomDocuments {
        generation,
        by_path,
        v2,
    }
}

fn open_schema() -> Value {
    json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

fn gvk(rt: &ResourceType, kind: &str) -> Value {
    json!([{"group": rt.group, "kind": kind, "version": rt.version}])
}

/// The version's schema as a component: `schema` (the definition's), with the object's type
/// fields, its group-version-kind and its selectable fields.
fn kind_schema(s: &Served, mut schema: Value) -> Value {
    let Some(map) = schema.as_object_mut() else {
        return schema;
    };
    let props = map.entry("properties").or_insert_with(|| json!({}));
    if let Some(props) = props.as_object_mut() {
        props.insert(
            "apiVersion".into(),
            json!({"type": "string", "description": API_VERSION}),
        );
        props.insert(
            "kind".into(),
            json!({"type": "string", "description": KIND}),
        );
        props.insert("metadata".into(), schema_ref(OBJECT_META));
    }
    map.insert(
        "x-kubernetes-group-version-kind".into(),
        gvk(s.rt, s.rt.kind),
    );
    if !s.version.selectable_fields.is_empty() {
        let fields: Vec<Value> = s
            .version
            .selectable_fields
            .iter()
            .map(|p| json!({"fieldPath": selectable::label(p)}))
            .collect();
        map.insert(
            "x-kubernetes-selectable-fields".into(),
            Value::Array(fields),
        );
    }
    schema
}

fn list_schema(rt: &ResourceType, item: &str) -> Value {
    let mut props = Map::new();
    props.insert(
        "apiVersion".into(),
        json!({"type": "string", "description": API_VERSION}),
    );
    props.insert(
        "items".into(),
        json!({"type": "array", "description": format!("List of {}. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md", rt.plural), "items": schema_ref(item)}),
    );
    props.insert(
        "kind".into(),
        json!({"type": "string", "description": KIND}),
    );
    props.insert("metadata".into(), schema_ref(LIST_META));
    json!({
        "description": format!("{} is a list of {}", rt.list_kind(), rt.kind),
        "type": "object",
        "required": ["items"],
        "properties": props,
        "x-kubernetes-group-version-kind": gvk(rt, &rt.list_kind()),
    })
}

const API_VERSION: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
