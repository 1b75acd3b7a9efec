use super::*;
use crate::openapi::v2_protobuf;

fn served() -> Document {
    let bytes = v2_protobuf();
    assert!(!bytes.is_empty(), "the v2 document failed to build");
    Document::decode(bytes.as_slice()).unwrap()
}

fn definitions(doc: &Document) -> std::collections::BTreeMap<&str, &Schema> {
    doc.definitions
        .as_ref()
        .unwrap()
        .additional_properties
        .iter()
        .map(|n| (n.name.as_str(), n.value.as_ref().unwrap()))
        .collect()
}

fn extension(exts: &[NamedAny], name: &str) -> Option<Value> {
    exts.iter()
        .find(|e| e.name == name)
        .map(|e| serde_json::from_str(&e.value.as_ref().unwrap().yaml).unwrap())
}

/// kube-openapi's `ParseSchema` rules, which reject the whole document on one violation.
fn check(at: &str, s: &Schema, defs: &std::collections::BTreeMap<&str, &Schema>) {
    let types = s
        .r#type
        .as_ref()
        .map(|t| t.value.clone())
        .unwrap_or_default();
    if !s.r#ref.is_empty() {
        assert!(
            types.is_empty() && s.properties.is_none(),
            "{at}: ref with type or properties"
        );
        let target = s
            .r#ref
            .strip_prefix("#/definitions/")
            .unwrap_or_else(|| panic!("{at}"));
        assert!(defs.contains_key(target), "{at}: unknown model {target}");
        return;
    }
    assert!(types.len() <= 1, "{at}: several types");
    if let Some(t) = types.first() {
        assert!(TYPES.contains(&t.as_str()), "{at}: type {t}");
        if t == "array" {
            let items = s.items.as_ref().map(|i| i.schema.len());
            assert_eq!(items, Some(1), "{at}: array needs exactly one item schema");
        }
    }
    for p in s.properties.iter().flat_map(|p| &p.additional_properties) {
        check(&format!("{at}.{}", p.name), p.value.as_ref().unwrap(), defs);
    }
    for i in s.items.iter().flat_map(|i| &i.schema) {
        check(&format!("{at}[]"), i, defs);
    }
    if let Some(a) = s
        .additional_properties
        .as_ref()
        .and_then(|a| a.schema.as_deref())
    {
        check(&format!("{at}{{}}"), a, defs);
    }
}

#[test]
fn every_definition_is_one_kubectls_parser_accepts() {
    let doc = served();
    assert_eq!(doc.swagger, "2.0");
    let defs = definitions(&doc);
    assert!(defs.len() > 300, "{}", defs.len());
    for (name, s) in &defs {
        check(name, s, &defs);
    }
}

#[test]
fn kinds_carry_their_gvk_and_lists_their_patch_merge_keys() {
    let doc = served();
    let defs = definitions(&doc);
    let deployment = defs["io.k8s.api.apps.v1.Deployment"];
    assert_eq!(
        extension(
            &deployment.vendor_extension,
            "x-kubernetes-group-version-kind"
        ),
        Some(serde_json::json!([{"group": "apps", "kind": "Deployment", "version": "v1"}]))
    );
    let field = |schema: &str, name: &str| -> Schema {
        defs[schema]
            .properties
            .as_ref()
            .unwrap()
            .additional_properties
            .iter()
            .find(|p| p.name == name)
            .and_then(|p| p.value.clone())
            .unwrap_or_else(|| panic!("{schema}.{name}"))
    };
    let containers = field("io.k8s.api.core.v1.PodSpec", "containers");
    assert_eq!(
        extension(&containers.vendor_extension, "x-kubernetes-patch-merge-key"),
        Some(Value::from("name"))
    );
    assert_eq!(
        containers.items.as_ref().unwrap().schema[0].r#ref,
        "#/definitions/io.k8s.api.core.v1.Container"
    );
    let strategy = field("io.k8s.api.apps.v1.DeploymentSpec", "strategy");
    assert_eq!(
        strategy.r#ref,
        "#/definitions/io.k8s.api.apps.v1.DeploymentStrategy"
    );
    assert!(strategy.description.contains("deployment strategy"));
    assert_eq!(
        extension(&strategy.vendor_extension, "x-kubernetes-patch-strategy"),
        Some(Value::from("retainKeys"))
    );
    let int_or_string = defs["io.k8s.apimachinery.pkg.util.intstr.IntOrString"];
    assert_eq!(int_or_string.r#type.as_ref().unwrap().value, ["string"]);
    assert_eq!(int_or_string.format, "int-or-string");
}

#[test]
fn patch_operations_declare_the_query_parameters_and_no_strategic_merge() {
    let doc = served();
    let item = doc
        .paths
        .as_ref()
        .unwrap()
        .path
        .iter()
        .find(|p| p.name == "/apis/apps/v1/namespaces/{namespace}/deployments/{name}")
        .and_then(|p| p.value.clone())
        .unwrap();
    let patch = item.patch.unwrap();
    assert_eq!(
        extension(&patch.vendor_extension, "x-kubernetes-group-version-kind"),
        Some(serde_json::json!({"group": "apps", "version": "v1", "kind": "Deployment"}))
    );
    let query: Vec<&str> = patch
        .parameters
        .iter()
        .filter_map(|p| {
            p.parameter
                .as_ref()?
                .non_body_parameter
                .as_ref()?
                .query_parameter_sub_schema
                .as_ref()
        })
        .map(|q| q.name.as_str())
        .collect();
    for wanted in ["dryRun", "fieldManager", "fieldValidation", "force"] {
        assert!(query.contains(&wanted), "{wanted}: {query:?}");
    }
    assert!(
        patch
            .consumes
            .contains(&"application/merge-patch+json".to_string())
    );
    assert!(
        !patch
            .consumes
            .contains(&"application/strategic-merge-patch+json".to_string())
    );
    let body = patch.parameters[0]
        .parameter
        .as_ref()
        .unwrap()
        .body_parameter
        .as_ref()
        .unwrap();
    assert_eq!(
        body.schema.as_ref().unwrap().r#ref,
        "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"
    );
    assert_eq!(item.parameters.len(), 3);
}

#[test]
fn schemas_without_a_v2_form_are_refused() {
    for bad in [
        serde_json::json!({"type": ["string", "null"]}),
        serde_json::json!({"type": "array"}),
        serde_json::json!({"allOf": [{"type": "string"}, {"type": "integer"}]}),
        serde_json::json!({"$ref": "#/definitions/elsewhere"}),
    ] {
        assert!(schema("t", &bad).is_err(), "{bad}");
    }
}

#[test]
fn namespace_patch_declares_neither_field_validation_nor_dry_run_so_kubectl_lists_no_crds() {
    let doc = served();
    let paths = &doc.paths.as_ref().unwrap().path;
    let query_of = |path: &str| -> Vec<String> {
        let item = paths
            .iter()
            .find(|p| p.name == path)
            .and_then(|p| p.value.clone())
            .unwrap();
        item.patch
            .unwrap()
            .parameters
            .iter()
            .filter_map(|p| {
                let q = p.parameter.as_ref()?.non_body_parameter.as_ref()?;
                q.query_parameter_sub_schema
                    .as_ref()
                    .map(|q| q.name.clone())
            })
            .collect()
    };
    let namespace = query_of("/api/v1/namespaces/{name}");
    assert!(
        !namespace
            .iter()
            .any(|q| q == "fieldValidation" || q == "dryRun"),
        "{namespace:?}"
    );
    assert!(namespace.iter().any(|q| q == "fieldManager"));
    let pod = query_of("/api/v1/namespaces/{namespace}/pods/{name}");
    assert!(pod.iter().any(|q| q == "fieldValidation") && pod.iter().any(|q| q == "dryRun"));
}
