//! A minimal OpenAPI v3 surface (`/openapi/v3` and one document per group-version) carrying
//! just what kubectl reads: PATCH operations tagged with their group-version-kind and declaring
//! the `fieldValidation` query parameter, so kubectl hands validation to the server.
//!
//! Two deliberate omissions keep kubectl on its well-tested paths:
//! - PATCH request bodies do not list `application/strategic-merge-patch+json`. When they do,
//!   kubectl's client-side apply builds its patch from the component schemas, which are stubs
//!   here; without it kubectl falls back to its compiled-in Go types.
//! - `components.schemas` are stubs (`type: object` with the GVK): enough for kubectl to find
//!   the kind, not enough for `kubectl explain` to show fields.

use serde_json::{Map, Value, json};

use crate::resource::{self, RESOURCES, ResourceType};

/// The key of a group-version in the root document (`api/v1`, `apis/apps/v1`).
fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `coreV1`, `appsV1`, `coordinationV1`: upstream's tag and operation-id stem.
fn tag(group: &str, version: &str) -> String {
    let stem = group
        .split('.')
        .next()
        .filter(|s| !s.is_empty())
        .unwrap_or("core");
    format!("{stem}{}", capitalize(version))
}

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// `#/components/schemas/io.k8s.api.apps.v1.Deployment`-style schema name.
fn schema_name(group: &str, version: &str, kind: &str) -> String {
    let package = group
        .split('.')
        .next()
        .filter(|s| !s.is_empty())
        .unwrap_or("core");
    format!("io.k8s.api.{package}.{version}.{kind}")
}

fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn query(name: &str, type_: &str, description: &str) -> Value {
    json!({"name": name, "in": "query", "description": description, "schema": {"type": type_}})
}

fn path_param(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "path", "description": description, "required": true,
           "schema": {"type": "string"}})
}

fn write_params(with_force: bool) -> Vec<Value> {
    let mut params = vec![
        query(
            "dryRun",
            "string",
            "When present, modifications are not persisted. Valid value: All.",
        ),
        query(
            "fieldManager",
            "string",
            "Name of the actor making the change.",
        ),
        query(
            "fieldValidation",
            "string",
            "How to treat unknown or duplicate fields: Ignore, Warn or Strict.",
        ),
    ];
    if with_force {
        params.push(query(
            "force",
            "boolean",
            "Force an apply request to take fields owned by other managers.",
        ));
    }
    params
}

fn list_params() -> Vec<Value> {
    [
        ("allowWatchBookmarks", "boolean"),
        ("continue", "string"),
        ("fieldSelector", "string"),
        ("labelSelector", "string"),
        ("limit", "integer"),
        ("resourceVersion", "string"),
        ("timeoutSeconds", "integer"),
        ("watch", "boolean"),
    ]
    .into_iter()
    .map(|(n, t)| query(n, t, ""))
    .collect()
}

/// The operations of one resource type, all tagged with its GVK.
struct Ops<'a> {
    r: &'a ResourceType,
    tag: String,
    schema: String,
}

impl Ops<'_> {
    fn op(&self, action: &str, id: &str, params: Vec<Value>, response: &str) -> Map<String, Value> {
        let r = self.r;
        let mut op = Map::new();
        op.insert("tags".into(), json!([self.tag]));
        op.insert("operationId".into(), json!(id));
        if !params.is_empty() {
            op.insert("parameters".into(), Value::Array(params));
        }
        op.insert(
            "responses".into(),
            json!({"200": {"description": "OK",
                           "content": {"application/json": {"schema": schema_ref(response)}}},
                   "401": {"description": "Unauthorized"}}),
        );
        op.insert("x-kubernetes-action".into(), json!(action));
        op.insert(
            "x-kubernetes-group-version-kind".into(),
            json!({"group": r.group, "version": r.version, "kind": r.kind}),
        );
        op
    }

    fn id(&self, verb: &str, scope: &str, suffix: &str) -> String {
        format!(
            "{verb}{}{scope}{}{suffix}",
            capitalize(&self.tag),
            self.r.kind
        )
    }

    fn with_body(mut op: Map<String, Value>, content: Value) -> Value {
        op.insert(
            "requestBody".into(),
            json!({"content": content, "required": true}),
        );
        Value::Object(op)
    }

    fn item_path(&self, scope: &str) -> Value {
        let mut path = Map::new();
        let mut params = vec![path_param("name", &format!("name of the {}", self.r.kind))];
        if self.r.namespaced {
            params.push(path_param("namespace", "object name and auth scope"));
        }
        params.push(query(
            "pretty",
            "string",
            "If 'true', the output is pretty printed.",
        ));
        path.insert("parameters".into(), Value::Array(params));
        let read = self.op("get", &self.id("read", scope, ""), vec![], &self.schema);
        path.insert("get".into(), Value::Object(read));
        let replace = self.op(
            "put",
            &self.id("replace", scope, ""),
            write_params(false),
            &self.schema,
        );
        path.insert(
            "put".into(),
            Self::with_body(
                replace,
                json!({"*/*": {"schema": schema_ref(&self.schema)}}),
            ),
        );
        let delete_params = vec![
            query("dryRun", "string", ""),
            query("gracePeriodSeconds", "integer", ""),
            query("propagationPolicy", "string", ""),
        ];
        let delete = self.op(
            "delete",
            &self.id("delete", scope, ""),
            delete_params,
            STATUS,
        );
        path.insert("delete".into(), Value::Object(delete));
        let patch = self.op(
            "patch",
            &self.id("patch", scope, ""),
            write_params(true),
            &self.schema,
        );
        // No strategic-merge-patch here on purpose: see the module documentation.
        let patch_content = json!({
            "application/apply-patch+yaml": {"schema": schema_ref(PATCH)},
            "application/json-patch+json": {"schema": schema_ref(PATCH)},
            "application/merge-patch+json": {"schema": schema_ref(PATCH)},
        });
        path.insert("patch".into(), Self::with_body(patch, patch_content));
        Value::Object(path)
    }

    fn collection_path(&self, scope: &str) -> Value {
        let mut path = Map::new();
        let mut params = Vec::new();
        if self.r.namespaced {
            params.push(path_param("namespace", "object name and auth scope"));
        }
        params.push(query(
            "pretty",
            "string",
            "If 'true', the output is pretty printed.",
        ));
        path.insert("parameters".into(), Value::Array(params));
        if self.r.create_only {
            let create = self.op(
                "post",
                &self.id("create", scope, ""),
                write_params(false),
                &self.schema,
            );
            path.insert(
                "post".into(),
                Self::with_body(create, json!({"*/*": {"schema": schema_ref(&self.schema)}})),
            );
            return Value::Object(path);
        }
        let list_schema = format!("{}List", self.schema);
        let list = self.op(
            "list",
            &self.id("list", scope, ""),
            list_params(),
            &list_schema,
        );
        path.insert("get".into(), Value::Object(list));
        let create = self.op(
            "post",
            &self.id("create", scope, ""),
            write_params(false),
            &self.schema,
        );
        path.insert(
            "post".into(),
            Self::with_body(create, json!({"*/*": {"schema": schema_ref(&self.schema)}})),
        );
        if crate::discovery::verbs(self.r).contains(&"deletecollection") {
            let delete = self.op(
                "deletecollection",
                &self.id("delete", &format!("Collection{scope}"), ""),
                list_params(),
                STATUS,
            );
            path.insert("delete".into(), Value::Object(delete));
        }
        Value::Object(path)
    }

    fn all_namespaces_path(&self) -> Value {
        let list_schema = format!("{}List", self.schema);
        let list = self.op(
            "list",
            &self.id("list", "", "ForAllNamespaces"),
            list_params(),
            &list_schema,
        );
        json!({"parameters": [query("pretty", "string", "")], "get": list})
    }
}

const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";

fn stub(description: &str, gvk: Option<Value>) -> Value {
    let mut s = Map::new();
    s.insert("description".into(), json!(description));
    s.insert("type".into(), json!("object"));
    if let Some(gvk) = gvk {
        s.insert("x-kubernetes-group-version-kind".into(), json!([gvk]));
    }
    Value::Object(s)
}

/// The document for one group-version (`api/v1` or `apis/apps/v1`, a leading `/` allowed);
/// `None` when the group-version is not served.
pub fn openapi_v3_group_version(path: &str) -> Option<Value> {
    let path = path.trim_start_matches('/');
    let (group, version) = resource::groups()
        .into_iter()
        .flat_map(|(g, versions)| versions.into_iter().map(move |v| (g, v)))
        .find(|(g, v)| gv_path(g, v) == path)?;
    // The computed metrics kinds have no schema here (metrics-server's are not published
    // either without aggregation).
    let mut list: Vec<&ResourceType> = RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version && !r.read_only)
        .collect();
    if list.is_empty() {
        return None;
    }
    list.sort_by_key(|r| r.plural);

    let base = format!("/{}", gv_path(group, version));
    let mut paths = Map::new();
    let mut schemas = Map::new();
    for r in list {
        let ops = Ops {
            r,
            tag: tag(group, version),
            schema: schema_name(group, version, r.kind),
        };
        let (collection, scope) = if r.namespaced {
            (
                format!("{base}/namespaces/{{namespace}}/{}", r.plural),
                "Namespaced",
            )
        } else {
            (format!("{base}/{}", r.plural), "")
        };
        paths.insert(collection.clone(), ops.collection_path(scope));
        let gvk = |kind: String| json!({"group": group, "kind": kind, "version": version});
        schemas.insert(
            ops.schema.clone(),
            stub(r.kind, Some(gvk(r.kind.to_string()))),
        );
        if r.create_only {
            continue;
        }
        paths.insert(format!("{collection}/{{name}}"), ops.item_path(scope));
        if r.namespaced {
            paths.insert(format!("{base}/{}", r.plural), ops.all_namespaces_path());
        }
        schemas.insert(
            format!("{}List", ops.schema),
            stub(&r.list_kind(), Some(gvk(r.list_kind()))),
        );
    }
    schemas.insert(
        STATUS.into(),
        stub(
            "Status is a return value for calls that don't return other objects.",
            None,
        ),
    );
    schemas.insert(
        PATCH.into(),
        stub("A patch in one of the supported patch formats.", None),
    );
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "unversioned"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// FNV-1a (64-bit) of the document's JSON: a deterministic content hash for the root's URLs,
/// so kubectl's cache refreshes exactly when a document changes.
fn content_hash(doc: &Value) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in doc.to_string().bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016X}")
}

/// `/openapi/v3`: every served group-version with the URL of its document.
pub fn openapi_v3_root() -> Value {
    let mut paths = Map::new();
    for (g, v) in resource::groups()
        .into_iter()
        .flat_map(|(g, versions)| versions.into_iter().map(move |v| (g, v)))
    {
        let key = gv_path(g, v);
        if let Some(doc) = openapi_v3_group_version(&key) {
            let url = format!("/openapi/v3/{key}?hash={}", content_hash(&doc));
            paths.insert(key, json!({"serverRelativeURL": url}));
        }
    }
    json!({"paths": paths})
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kubectl's query-parameter verifier: the first PATCH operation tagged with the GVK must
    /// declare the parameter in the query.
    fn patch_supports(doc: &Value, group: &str, version: &str, kind: &str, param: &str) -> bool {
        let gvk = json!({"group": group, "version": version, "kind": kind});
        let patches: Vec<&Value> = doc["paths"]
            .as_object()
            .unwrap()
            .values()
            .filter_map(|p| p.get("patch"))
            .filter(|op| op["x-kubernetes-group-version-kind"] == gvk)
            .collect();
        !patches.is_empty()
            && patches.iter().all(|op| {
                op["parameters"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|p| p["name"] == param && p["in"] == "query")
            })
    }

    #[test]
    fn every_kind_declares_field_validation_on_its_patch() {
        for r in resource::stored() {
            let doc = openapi_v3_group_version(&gv_path(r.group, r.version)).unwrap();
            for param in ["fieldValidation", "dryRun", "fieldManager", "force"] {
                assert!(
                    patch_supports(&doc, r.group, r.version, r.kind, param),
                    "{} {param}",
                    r.kind
                );
            }
        }
    }

    #[test]
    fn item_and_collection_paths_follow_the_resource_scope() {
        let apps = openapi_v3_group_version("apis/apps/v1").unwrap();
        let paths = apps["paths"].as_object().unwrap();
        let item = &paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"];
        for verb in ["get", "put", "delete", "patch"] {
            assert_eq!(
                item[verb]["x-kubernetes-group-version-kind"]["kind"], "Deployment",
                "{verb}"
            );
        }
        assert_eq!(
            item["patch"]["operationId"],
            "patchAppsV1NamespacedDeployment"
        );
        let collection = &paths["/apis/apps/v1/namespaces/{namespace}/deployments"];
        assert_eq!(collection["post"]["x-kubernetes-action"], "post");
        assert!(
            collection["post"]["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == "fieldValidation")
        );
        assert!(paths.contains_key("/apis/apps/v1/deployments"));

        let core = openapi_v3_group_version("/api/v1").unwrap();
        let node = &core["paths"]["/api/v1/nodes/{name}"];
        assert_eq!(
            node["patch"]["x-kubernetes-group-version-kind"],
            json!({"group": "", "version": "v1", "kind": "Node"})
        );
        assert_eq!(node["patch"]["operationId"], "patchCoreV1Node");
        assert!(
            core["paths"]
                .get("/api/v1/namespaces/{namespace}/nodes")
                .is_none()
        );
    }

    #[test]
    fn patch_bodies_leave_out_strategic_merge_so_kubectl_uses_builtin_types() {
        let doc = openapi_v3_group_version("apis/batch/v1").unwrap();
        let content = &doc["paths"]["/apis/batch/v1/namespaces/{namespace}/jobs/{name}"]["patch"]["requestBody"]
            ["content"];
        assert!(content.get("application/merge-patch+json").is_some());
        assert!(
            content
                .get("application/strategic-merge-patch+json")
                .is_none()
        );
    }

    #[test]
    fn schemas_are_stubs_tagged_with_their_gvk() {
        let doc = openapi_v3_group_version("apis/coordination.k8s.io/v1").unwrap();
        assert_eq!(
            doc["components"]["schemas"]["io.k8s.api.coordination.v1.Lease"],
            json!({"description": "Lease", "type": "object", "x-kubernetes-group-version-kind":
                   [{"group": "coordination.k8s.io", "kind": "Lease", "version": "v1"}]})
        );
        assert_eq!(doc["openapi"], "3.0.0");
    }

    #[test]
    fn the_root_points_at_every_group_version_with_a_stable_hash() {
        let root = openapi_v3_root();
        let paths = root["paths"].as_object().unwrap();
        let keys: Vec<&str> = paths.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "api/v1",
                "apis/apps/v1",
                "apis/authentication.k8s.io/v1",
                "apis/authorization.k8s.io/v1",
                "apis/autoscaling/v2",
                "apis/autoscaling/v1",
                "apis/batch/v1",
                "apis/policy/v1",
                "apis/rbac.authorization.k8s.io/v1",
                "apis/storage.k8s.io/v1",
                "apis/scheduling.k8s.io/v1",
                "apis/coordination.k8s.io/v1",
                "apis/discovery.k8s.io/v1"
            ]
        );
        let url = paths["apis/apps/v1"]["serverRelativeURL"].as_str().unwrap();
        assert!(url.starts_with("/openapi/v3/apis/apps/v1?hash="), "{url}");
        assert_eq!(openapi_v3_root(), root);
        assert_ne!(
            paths["api/v1"]["serverRelativeURL"],
            paths["apis/apps/v1"]["serverRelativeURL"]
        );
    }

    #[test]
    fn namespaces_cannot_be_deleted_as_a_collection() {
        let core = openapi_v3_group_version("api/v1").unwrap();
        assert!(core["paths"]["/api/v1/namespaces"].get("delete").is_none());
        let pods = &core["paths"]["/api/v1/namespaces/{namespace}/pods"]["delete"];
        assert_eq!(pods["x-kubernetes-action"], "deletecollection");
        assert_eq!(pods["operationId"], "deleteCoreV1CollectionNamespacedPod");
    }

    #[test]
    fn unknown_group_versions_have_no_document() {
        assert!(openapi_v3_group_version("apis/apps/v1beta1").is_none());
        assert!(openapi_v3_group_version("apis/autoscaling/v1beta1").is_none());
        assert!(openapi_v3_group_version("").is_none());
    }
}
