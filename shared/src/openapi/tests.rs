use super::*;

/// A served document, parsed.
fn doc(path: &str) -> Value {
    let d = v3_document(path).unwrap_or_else(|| panic!("no document for {path}"));
    serde_json::from_slice(d.json()).unwrap()
}

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
        let doc = doc(&gv_path(r.group, r.version));
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
    let apps = doc("apis/apps/v1");
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

    let core = doc("/api/v1");
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
fn subresources_answer_with_their_own_kinds() {
    let apps = doc("apis/apps/v1");
    let scale = &apps["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"];
    assert_eq!(
        scale["patch"]["x-kubernetes-group-version-kind"],
        json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
    );
    assert_eq!(
        scale["patch"]["operationId"],
        "patchAppsV1NamespacedDeploymentScale"
    );
    assert_eq!(
        scale["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/io.k8s.api.autoscaling.v1.Scale"
    );
    assert!(apps["components"]["schemas"]["io.k8s.api.autoscaling.v1.Scale"].is_object());
    let status = &apps["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/status"];
    assert_eq!(
        status["put"]["x-kubernetes-group-version-kind"]["kind"],
        "Deployment"
    );
    assert_eq!(
        status["get"]["operationId"],
        "readAppsV1NamespacedDeploymentStatus"
    );

    let core = doc("api/v1");
    let eviction = &core["paths"]["/api/v1/namespaces/{namespace}/pods/{name}/eviction"];
    assert_eq!(
        eviction["post"]["x-kubernetes-group-version-kind"],
        json!({"group": "policy", "version": "v1", "kind": "Eviction"})
    );
    assert_eq!(
        eviction["post"]["operationId"],
        "createCoreV1NamespacedPodEviction"
    );
    let schemas = &core["components"]["schemas"];
    for name in [
        "io.k8s.api.policy.v1.Eviction",
        "io.k8s.api.core.v1.Binding",
        "io.k8s.api.authentication.v1.TokenRequest",
    ] {
        assert!(schemas[name].is_object(), "{name}");
    }
    // Streams have no schema and no path here.
    assert!(
        core["paths"]
            .get("/api/v1/namespaces/{namespace}/pods/{name}/log")
            .is_none()
    );
}

#[test]
fn patch_bodies_leave_out_strategic_merge_so_kubectl_uses_builtin_types() {
    for path in DOCUMENTS.by_path.keys() {
        let doc = doc(path);
        for (p, item) in doc["paths"].as_object().unwrap() {
            if let Some(content) = item["patch"]["requestBody"]["content"].as_object() {
                assert!(content.contains_key("application/merge-patch+json"), "{p}");
                assert!(
                    !content.contains_key("application/strategic-merge-patch+json"),
                    "{p}"
                );
            }
        }
    }
}

/// Every `$ref` string in `v`.
fn refs(v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    refs_in(v, &mut |r| out.push(r.to_string()));
    out
}

#[test]
fn every_reference_in_every_served_document_resolves_inside_that_document() {
    for path in DOCUMENTS.by_path.keys() {
        let doc = doc(path);
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        let all = refs(&doc);
        assert!(!all.is_empty(), "{path}");
        for r in all {
            let name = r
                .strip_prefix("#/components/schemas/")
                .unwrap_or_else(|| panic!("{path}: {r}"));
            assert!(schemas.contains_key(name), "{path}: {r}");
        }
        // And nothing is there that nothing references.
        let referenced: std::collections::BTreeSet<String> = refs(&doc)
            .into_iter()
            .map(|r| r.trim_start_matches("#/components/schemas/").to_string())
            .collect();
        for name in schemas.keys() {
            assert!(referenced.contains(name), "{path}: {name} unreferenced");
        }
    }
}

/// What `kubectl explain <resource>` does with a document: the GVK of the first operation on
/// the resource's list or item path, then the schema carrying that GVK.
fn explain_schema<'d>(doc: &'d Value, r: &ResourceType) -> Option<&'d Value> {
    let base = format!("/{}", gv_path(r.group, r.version));
    let candidates = [
        format!("{base}/{}", r.plural),
        format!("{base}/{}/{{name}}", r.plural),
        format!("{base}/namespaces/{{namespace}}/{}", r.plural),
        format!("{base}/namespaces/{{namespace}}/{}/{{name}}", r.plural),
    ];
    let gvk = candidates.iter().find_map(|p| {
        let item = doc["paths"].get(p)?;
        ["get", "post", "put", "patch", "delete"]
            .iter()
            .find_map(|m| item.get(*m)?.get("x-kubernetes-group-version-kind"))
    })?;
    doc["components"]["schemas"]
        .as_object()?
        .values()
        .find(|s| {
            s["x-kubernetes-group-version-kind"]
                .as_array()
                .is_some_and(|a| a.contains(gvk))
        })
}

#[test]
fn explain_finds_every_served_kinds_schema_with_its_fields() {
    for r in RESOURCES.iter().filter(|r| !r.read_only) {
        let doc = doc(&gv_path(r.group, r.version));
        let schema = explain_schema(&doc, r).unwrap_or_else(|| panic!("{}: no schema", r.kind));
        let props = schema["properties"].as_object().unwrap();
        for field in ["apiVersion", "kind", "metadata"] {
            assert!(props.contains_key(field), "{} {field}", r.kind);
        }
    }
    let apps = doc("apis/apps/v1");
    let schemas = &apps["components"]["schemas"];
    let strategy = &schemas["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["strategy"];
    assert_eq!(
        strategy["allOf"][0]["$ref"],
        "#/components/schemas/io.k8s.api.apps.v1.DeploymentStrategy"
    );
    let fields = schemas["io.k8s.api.apps.v1.DeploymentStrategy"]["properties"]
        .as_object()
        .unwrap();
    assert!(fields.contains_key("rollingUpdate") && fields.contains_key("type"));
    assert_eq!(
        schemas["io.k8s.api.apps.v1.DeploymentSpec"]["required"],
        json!(["selector", "template"])
    );
}

#[test]
fn the_root_points_at_every_group_version_by_its_documents_hash() {
    let root: Value = serde_json::from_slice(&v3_root()).unwrap();
    let paths = root["paths"].as_object().unwrap();
    let keys: Vec<&str> = paths.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "api/v1",
            "apis/apiregistration.k8s.io/v1",
            "apis/apps/v1",
            "apis/authentication.k8s.io/v1",
            "apis/authorization.k8s.io/v1",
            "apis/autoscaling/v2",
            "apis/autoscaling/v1",
            "apis/batch/v1",
            "apis/certificates.k8s.io/v1",
            "apis/networking.k8s.io/v1",
            "apis/policy/v1",
            "apis/rbac.authorization.k8s.io/v1",
            "apis/storage.k8s.io/v1",
            "apis/admissionregistration.k8s.io/v1",
            "apis/apiextensions.k8s.io/v1",
            "apis/scheduling.k8s.io/v1",
            "apis/coordination.k8s.io/v1",
            "apis/node.k8s.io/v1",
            "apis/discovery.k8s.io/v1"
        ]
    );
    for (key, entry) in paths {
        let d = v3_document(key).unwrap();
        assert_eq!(d.hash(), content_hash(d.json()));
        assert_eq!(
            entry["serverRelativeURL"],
            format!("/openapi/v3/{key}?hash={}", d.hash())
        );
    }
    assert_ne!(
        paths["api/v1"]["serverRelativeURL"],
        paths["apis/apps/v1"]["serverRelativeURL"]
    );
}

#[test]
fn documents_are_built_once_and_rebuild_identically() {
    let first = v3_document("apis/apps/v1").unwrap();
    assert!(Arc::ptr_eq(&first, &v3_document("/apis/apps/v1/").unwrap()));
    let again = group_version_document(&Catalog::build(), "apps", "v1").unwrap();
    assert_eq!(again.to_string().into_bytes(), first.json());
}

#[test]
fn namespaces_cannot_be_deleted_as_a_collection() {
    let core = doc("api/v1");
    assert!(core["paths"]["/api/v1/namespaces"].get("delete").is_none());
    let pods = &core["paths"]["/api/v1/namespaces/{namespace}/pods"]["delete"];
    assert_eq!(pods["x-kubernetes-action"], "deletecollection");
    assert_eq!(pods["operationId"], "deleteCoreV1CollectionNamespacedPod");
}

#[test]
fn unknown_group_versions_have_no_document() {
    assert!(v3_document("apis/apps/v1beta1").is_none());
    assert!(v3_document("apis/autoscaling/v1beta1").is_none());
    assert!(v3_document("apis/metrics.k8s.io/v1beta1").is_none());
    assert!(v3_document("").is_none());
}
