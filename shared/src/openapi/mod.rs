//! The OpenAPI surface: `/openapi/v3` and one document per group-version, with every path
//! kubectl looks for (each operation tagged with its group-version-kind and declaring the
//! `fieldValidation` query parameter, so kubectl hands validation to the server) and real
//! component schemas (generated from k8s-openapi, see `schemas`), so `kubectl explain` works;
//! and the same paths and schemas as one Swagger 2.0 document in protobuf for `/openapi/v2`
//! (`v2`), which kubectl ≤ 1.26 reads. All are built once, on first use, and served from memory.
//!
//! One deliberate omission keeps kubectl on its well-tested path: PATCH request bodies do not
//! list `application/strategic-merge-patch+json`. When they do, kubectl 1.27+ builds its
//! client-side-apply patch from these component schemas instead of its compiled-in Go types;
//! k8s-openapi's schemas carry no patch metadata, the one added here (`patch_meta`) covers the
//! served kinds' merge keys but not `x-kubernetes-list-type`/`-list-map-keys`, so the Go types
//! stay the reference. (kubectl ≤ 1.26 uses a served v2 schema whenever it has one; that is
//! what the patch merge keys are for.)

mod custom;
mod custom_v2;
mod patch_meta;
mod paths;
mod schemas;
mod v2;

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};
use std::time::Instant;

use serde_json::{Value, json};

use crate::resource::{self, RESOURCES, ResourceType};
use schemas::{Catalog, refs_in};

/// One served document: its JSON and the content hash its URL carries.
#[derive(Debug)]
pub struct Document {
    json: Vec<u8>,
    hash: String,
}

impl Document {
    /// The document as JSON.
    pub fn json(&self) -> &[u8] {
        &self.json
    }

    /// The hash in the root's URL for it (`?hash=…`): changes exactly when the JSON does.
    pub fn hash(&self) -> &str {
        &self.hash
    }
}

/// Every document, built together on first use.
struct Documents {
    /// The root's `paths`: each group-version's URL.
    root: serde_json::Map<String, Value>,
    by_path: BTreeMap<String, Arc<Document>>,
    /// `/openapi/v2` in protobuf: every built-in group-version's paths and schemas in one
    /// document (custom resources' are appended, see `custom`).
    v2: Arc<Vec<u8>>,
}

static DOCUMENTS: LazyLock<Documents> = LazyLock::new(Documents::build);

/// `/openapi/v3`: every served group-version with the URL of its document, custom resources'
/// included.
pub fn v3_root() -> Vec<u8> {
    let mut root = DOCUMENTS.root.clone();
    for (key, doc) in &custom::documents().by_path {
        let url = format!("/openapi/v3/{key}?hash={}", doc.hash);
        root.insert(key.clone(), json!({"serverRelativeURL": url}));
    }
    json!({"paths": root}).to_string().into_bytes()
}

/// The document of one group-version (`api/v1`, `apis/apps/v1`; leading and trailing `/`
/// allowed); `None` when the group-version is not served.
pub fn v3_document(path: &str) -> Option<Arc<Document>> {
    let path = path.trim_matches('/');
    DOCUMENTS
        .by_path
        .get(path)
        .cloned()
        .or_else(|| custom::documents().by_path.get(path).cloned())
}

/// `/openapi/v2` in protobuf (`application/com.github.proto-openapi.spec.v2.v1.0+protobuf`),
/// custom resources' served versions included; empty (no paths, no definitions) if the
/// conversion failed, which a unit test rules out.
pub fn v2_protobuf() -> Arc<Vec<u8>> {
    custom::documents().v2.clone()
}

/// The key of a group-version in the root document (`api/v1`, `apis/apps/v1`).
fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

impl Documents {
    fn build() -> Documents {
        let started = Instant::now();
        let catalog = Catalog::build();
        let mut by_path = BTreeMap::new();
        let mut root = serde_json::Map::new();
        let (mut all_paths, mut all_schemas) = (BTreeMap::new(), BTreeMap::new());
        for (group, version) in resource::groups()
            .into_iter()
            .flat_map(|(g, versions)| versions.into_iter().map(move |v| (g, v)))
        {
            let key = gv_path(group, version);
            let Some(doc) = group_version_document(&catalog, group, version) else {
                continue;
            };
            let json = doc.to_string().into_bytes();
            for (section, into) in [
                (&doc["paths"], &mut all_paths),
                (&doc["components"]["schemas"], &mut all_schemas),
            ] {
                if let Some(entries) = section.as_object() {
                    into.extend(entries.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
            }
            let hash = content_hash(&json);
            let url = format!("/openapi/v3/{key}?hash={hash}");
            root.insert(key.clone(), json!({"serverRelativeURL": url}));
            by_path.insert(key, Arc::new(Document { json, hash }));
        }
        let v2 = match v2::document(&all_paths, &all_schemas) {
            Ok(doc) => Arc::new(v2::encode(&doc)),
            Err(e) => {
                tracing::error!(error = %e, "no OpenAPI v2 document: a schema has no v2 form");
                Arc::new(Vec::new())
            }
        };
        tracing::info!(
            elapsed_ms = started.elapsed().as_millis(),
            documents = by_path.len(),
            bytes = by_path.values().map(|d| d.json.len()).sum::<usize>(),
            v2_bytes = v2.len(),
            "built the OpenAPI v3 documents and the v2 document"
        );
        Documents { root, by_path, v2 }
    }
}

/// The document for one group-version; `None` when it serves no kind with a schema (the
/// metrics.k8s.io kinds have none: k8s-openapi does not carry them).
fn group_version_document(catalog: &Catalog, group: &str, version: &str) -> Option<Value> {
    let mut list: Vec<&ResourceType> = RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version && !r.read_only)
        .collect();
    if list.is_empty() {
        return None;
    }
    list.sort_by_key(|r| r.plural);
    let base = format!("/{}", gv_path(group, version));
    let paths = Value::Object(paths::paths(&base, group, version, &list));
    // The schemas the paths answer with, and everything those reference.
    let mut refs = Vec::new();
    refs_in(&paths, &mut |r| refs.push(r));
    let schemas = catalog.closure(refs);
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "unversioned"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// FNV-1a (64-bit) of the document's JSON: a deterministic content hash for the root's URLs,
/// so kubectl's cache refreshes exactly when a document changes.
fn content_hash(json: &[u8]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in json {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016X}")
}

#[cfg(test)]
mod tests;
