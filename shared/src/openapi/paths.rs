//! The `paths` of a group-version document: each resource's collection, item, all-namespaces
//! and subresource paths, every operation tagged with the group-version-kind it reads or writes
//! (`x-kubernetes-group-version-kind`) and answering with its schema, named as upstream names
//! them (`patchAppsV1NamespacedDeployment`).

use serde_json::{Map, Value, json};

use super::schemas::schema_ref;
use crate::discovery::{self, Subresource};
use crate::resource::ResourceType;

pub(super) const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";

/// The paths of one group-version's resources (`list` sorted by plural); `base` is `/apis/g/v`.
pub(super) fn paths(
    base: &str,
    group: &str,
    version: &str,
    list: &[&ResourceType],
) -> Map<String, Value> {
    let mut paths = Map::new();
    for r in list {
        let ops = Ops::new(r, tag(group, version), (r.group, r.version, r.kind));
        let (collection, scope) = if r.namespaced {
            (
                format!("{base}/namespaces/{{namespace}}/{}", r.plural),
                "Namespaced",
            )
        } else {
            (format!("{base}/{}", r.plural), "")
        };
        paths.insert(collection.clone(), ops.collection_path(scope));
        if r.create_only {
            continue;
        }
        let item = format!("{collection}/{{name}}");
        paths.insert(item.clone(), ops.item_path(scope));
        if r.namespaced {
            paths.insert(format!("{base}/{}", r.plural), ops.all_namespaces_path());
        }
        for s in discovery::subresources(r) {
            if let Some(path) = ops.subresource_path(scope, &s) {
                paths.insert(format!("{item}/{}", s.name), path);
            }
        }
    }
    paths
}

/// `coreV1`, `appsV1`, `coordinationV1`: upstream's tag and operation-id stem.
fn tag(group: &str, version: &str) -> String {
    format!("{}{}", package(group), capitalize(version))
}

/// `apps`, `rbac` (of `rbac.authorization.k8s.io`), `core` for the core group.
fn package(group: &str) -> &str {
    group
        .split('.')
        .next()
        .filter(|s| !s.is_empty())
        .unwrap_or("core")
}

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// `io.k8s.api.apps.v1.Deployment`: upstream's (and k8s-openapi's) schema name of a built-in
/// kind; `com.example.stable.v1.CronTab` (the group's labels reversed) of a custom one.
pub(super) fn schema_name(group: &str, version: &str, kind: &str) -> String {
    if group == "apiextensions.k8s.io" {
        format!("io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.{version}.{kind}")
    } else if group == "apiregistration.k8s.io" {
        format!("io.k8s.kube-aggregator.pkg.apis.apiregistration.{version}.{kind}")
    } else if crate::resource::RESOURCES.iter().any(|r| r.group == group) {
        format!("io.k8s.api.{}.{version}.{kind}", package(group))
    } else {
        let reversed: Vec<&str> = group.rsplit('.').collect();
        format!("{}.{version}.{kind}", reversed.join("."))
    }
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

/// The operations on one resource type's paths (or one subresource's), all tagged with the
/// group-version-kind they answer with.
struct Ops<'a> {
    r: &'a ResourceType,
    tag: String,
    gvk: Value,
    schema: String,
}

impl<'a> Ops<'a> {
    fn new(
        r: &'a ResourceType,
        tag: String,
        (group, version, kind): (&str, &str, &str),
    ) -> Ops<'a> {
        Ops {
            r,
            tag,
            gvk: json!({"group": group, "version": version, "kind": kind}),
            schema: schema_name(group, version, kind),
        }
    }

    fn op(&self, action: &str, id: &str, params: Vec<Value>, response: &str) -> Map<String, Value> {
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
        op.insert("x-kubernetes-group-version-kind".into(), self.gvk.clone());
        op
    }

    /// `patchAppsV1NamespacedDeploymentScale`: verb, tag, scope, the resource's kind, suffix.
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

    fn item_params(&self) -> Value {
        let name = path_param("name", &format!("name of the {}", self.r.kind));
        Value::Array(self.scope_params(vec![name]))
    }

    /// `params`, then the namespace for a namespaced kind, then `pretty`: the parameters every
    /// path of the kind shares.
    fn scope_params(&self, mut params: Vec<Value>) -> Vec<Value> {
        if self.r.namespaced {
            params.push(path_param("namespace", "object name and auth scope"));
        }
        params.push(query(
            "pretty",
            "string",
            "If 'true', the output is pretty printed.",
        ));
        params
    }

    /// get, put and patch of an object (or of a subresource named by `suffix`).
    fn read_write(&self, path: &mut Map<String, Value>, scope: &str, suffix: &str) {
        let read = self.op("get", &self.id("read", scope, suffix), vec![], &self.schema);
        path.insert("get".into(), Value::Object(read));
        let replace = self.op(
            "put",
            &self.id("replace", scope, suffix),
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
        let patch = self.op(
            "patch",
            &self.id("patch", scope, suffix),
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
    }

    fn create(&self, scope: &str, suffix: &str) -> Value {
        let create = self.op(
            "post",
            &self.id("create", scope, suffix),
            write_params(false),
            &self.schema,
        );
        Self::with_body(create, json!({"*/*": {"schema": schema_ref(&self.schema)}}))
    }

    fn item_path(&self, scope: &str) -> Value {
        let mut path = Map::new();
        path.insert("parameters".into(), self.item_params());
        self.read_write(&mut path, scope, "");
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
        Value::Object(path)
    }

    /// `…/{name}/status`, `/scale` (read-write) and `/eviction`, `/binding`, `/token`
    /// (create); `None` for the streaming ones (`log`, `exec`), which have no schema.
    fn subresource_path(&self, scope: &str, s: &Subresource) -> Option<Value> {
        let (group, version) = s.group_version.unwrap_or((self.r.group, self.r.version));
        let kind = s.kind.unwrap_or(self.r.kind);
        let ops = Ops::new(self.r, self.tag.clone(), (group, version, kind));
        let suffix = capitalize(s.name);
        let mut path = Map::new();
        path.insert("parameters".into(), self.item_params());
        if s.verbs.contains(&"patch") {
            ops.read_write(&mut path, scope, &suffix);
        } else if s.verbs == ["create"] {
            path.insert("post".into(), ops.create(scope, &suffix));
        } else {
            return None;
        }
        Some(Value::Object(path))
    }

    fn collection_path(&self, scope: &str) -> Value {
        let mut path = Map::new();
        let params = self.scope_params(Vec::new());
        path.insert("parameters".into(), Value::Array(params));
        if !self.r.create_only {
            let list_schema = format!("{}List", self.schema);
            let list = self.op(
                "list",
                &self.id("list", scope, ""),
                list_params(),
                &list_schema,
            );
            path.insert("get".into(), Value::Object(list));
        }
        path.insert("post".into(), self.create(scope, ""));
        if discovery::verbs(self.r).contains(&"deletecollection") {
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
