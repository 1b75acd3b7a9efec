//! The component schemas of the OpenAPI v3 documents: every served kind, its list, the
//! subresource kinds (Scale, Eviction, Binding, TokenRequest) and every type they reference,
//! generated from k8s-openapi's `JsonSchema` implementations (schemars) under upstream's names
//! (`io.k8s.api.apps.v1.Deployment`) and in kube-apiserver's shapes.
//!
//! Two things are added to what k8s-openapi generates, as upstream has them:
//! - `x-kubernetes-group-version-kind` on each top-level kind (kubectl explain finds a kind's
//!   schema by it);
//! - the `<Kind>List` schemas (k8s-openapi has one generic `List<T>` without a schema).
//!
//! A field that refers to another type and has its own description is written as upstream
//! writes it, `{"allOf": [{"$ref": …}], "description": …}` (schemars' OpenAPI 3.0 settings
//! move a `$ref`'s siblings that way): kubectl explain prints the field's description and then
//! the type's, and OpenAPI 3.0 ignores anything beside a bare `$ref`.

use k8s_openapi::Resource;
use k8s_openapi::api::{
    admissionregistration, apps, authentication, authorization, autoscaling, batch, certificates,
    coordination, core, discovery, networking, node, policy, rbac, scheduling, storage,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as apiregistration;
use k8s_openapi::schemars::JsonSchema;
use k8s_openapi::schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};

use crate::resource::RESOURCES;

/// Where every `$ref` of a document points.
pub(super) const REF_PREFIX: &str = "#/components/schemas/";

/// `{"$ref": "#/components/schemas/<name>"}`.
pub(super) fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("{REF_PREFIX}{name}")})
}

const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";

/// A top-level kind whose schema carries its group-version-kind.
struct Tagged {
    name: String,
    group: &'static str,
    version: &'static str,
    kind: &'static str,
}

/// Generates `T`'s schema (and those it references) into `generator`.
fn kind<T: JsonSchema + Resource>(generator: &mut SchemaGenerator) -> Tagged {
    generator.subschema_for::<T>();
    Tagged {
        name: T::schema_name().into_owned(),
        group: T::GROUP,
        version: T::VERSION,
        kind: T::KIND,
    }
}

/// Every kind a document describes: the table's kinds (less metrics.k8s.io, which k8s-openapi
/// does not have), the kinds subresources answer with, and `Status`.
fn kinds(generator: &mut SchemaGenerator) -> Vec<Tagged> {
    vec![
        kind::<core::v1::Namespace>(generator),
        kind::<core::v1::Node>(generator),
        kind::<core::v1::Pod>(generator),
        kind::<core::v1::Event>(generator),
        kind::<core::v1::ConfigMap>(generator),
        kind::<core::v1::Secret>(generator),
        kind::<core::v1::ReplicationController>(generator),
        kind::<core::v1::ServiceAccount>(generator),
        kind::<core::v1::Service>(generator),
        kind::<core::v1::Endpoints>(generator),
        kind::<core::v1::PersistentVolume>(generator),
        kind::<core::v1::PersistentVolumeClaim>(generator),
        kind::<core::v1::Binding>(generator),
        kind::<apps::v1::Deployment>(generator),
        kind::<apps::v1::ReplicaSet>(generator),
        kind::<apps::v1::StatefulSet>(generator),
        kind::<apps::v1::DaemonSet>(generator),
        kind::<apps::v1::ControllerRevision>(generator),
        kind::<batch::v1::Job>(generator),
        kind::<batch::v1::CronJob>(generator),
        kind::<policy::v1::PodDisruptionBudget>(generator),
        kind::<policy::v1::Eviction>(generator),
        kind::<coordination::v1::Lease>(generator),
        kind::<rbac::v1::Role>(generator),
        kind::<rbac::v1::RoleBinding>(generator),
        kind::<rbac::v1::ClusterRole>(generator),
        kind::<rbac::v1::ClusterRoleBinding>(generator),
        kind::<scheduling::v1::PriorityClass>(generator),
        kind::<authentication::v1::SelfSubjectReview>(generator),
        kind::<authentication::v1::TokenReview>(generator),
        kind::<authentication::v1::TokenRequest>(generator),
        kind::<authorization::v1::LocalSubjectAccessReview>(generator),
        kind::<authorization::v1::SelfSubjectAccessReview>(generator),
        kind::<authorization::v1::SelfSubjectRulesReview>(generator),
        kind::<authorization::v1::SubjectAccessReview>(generator),
        kind::<autoscaling::v2::HorizontalPodAutoscaler>(generator),
        kind::<autoscaling::v1::HorizontalPodAutoscaler>(generator),
        kind::<autoscaling::v1::Scale>(generator),
        kind::<discovery::v1::EndpointSlice>(generator),
        kind::<storage::v1::StorageClass>(generator),
        kind::<certificates::v1::CertificateSigningRequest>(generator),
        kind::<apiextensions::CustomResourceDefinition>(generator),
        kind::<admissionregistration::v1::ValidatingAdmissionPolicy>(generator),
        kind::<admissionregistration::v1::ValidatingAdmissionPolicyBinding>(generator),
        kind::<admissionregistration::v1::ValidatingWebhookConfiguration>(generator),
        kind::<admissionregistration::v1::MutatingWebhookConfiguration>(generator),
        kind::<apiregistration::APIService>(generator),
        kind::<networking::v1::Ingress>(generator),
        kind::<networking::v1::IngressClass>(generator),
        kind::<networking::v1::NetworkPolicy>(generator),
        kind::<node::v1::RuntimeClass>(generator),
        kind::<storage::v1::CSIDriver>(generator),
        kind::<storage::v1::CSINode>(generator),
        kind::<storage::v1::VolumeAttachment>(generator),
        kind::<meta::Status>(generator),
    ]
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!([{"group": group, "kind": kind, "version": version}])
}

/// Upstream's `<Kind>List`: `items` of the kind and list metadata.
fn list_schema(t: &Tagged) -> Value {
    let kind = t.kind;
    let mut items = Map::new();
    items.insert("allOf".into(), json!([schema_ref(&t.name)]));
    items.insert("default".into(), json!({}));
    json!({
        "description": format!("{kind}List is a list of {kind} objects."),
        "type": "object",
        "properties": {
            "apiVersion": {
                "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources",
                "type": "string",
            },
            "items": {
                "description": format!("Items is the list of {kind} objects."),
                "type": "array",
                "items": items,
            },
            "kind": {
                "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
                "type": "string",
            },
            "metadata": {
                "allOf": [schema_ref(LIST_META)],
                "default": {},
                "description": "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
            },
        },
        "required": ["items"],
        "x-kubernetes-group-version-kind": gvk(t.group, t.version, &format!("{kind}List")),
    })
}

/// Every schema any document may need, by upstream name.
pub(super) struct Catalog {
    pub(super) schemas: Map<String, Value>,
}

impl Catalog {
    /// Generates every schema. Tens of milliseconds; the documents are built from it once.
    pub(super) fn build() -> Catalog {
        let mut generator = SchemaSettings::openapi3()
            .with(|s| s.meta_schema = None)
            .into_generator();
        let tagged = kinds(&mut generator);
        generator.subschema_for::<meta::ListMeta>();
        generator.subschema_for::<meta::Patch>();
        let mut schemas = generator.take_definitions(true);
        super::patch_meta::annotate(&mut schemas);
        for t in &tagged {
            if let Some(Value::Object(schema)) = schemas.get_mut(&t.name) {
                schema.insert(
                    "x-kubernetes-group-version-kind".into(),
                    gvk(t.group, t.version, t.kind),
                );
            }
            let listed = RESOURCES.iter().any(|r| {
                r.group == t.group
                    && r.version == t.version
                    && r.kind == t.kind
                    && !r.create_only
                    && !r.read_only
            });
            if listed {
                schemas.insert(format!("{}List", t.name), list_schema(t));
            }
        }
        Catalog { schemas }
    }

    /// The schemas that `refs` (`$ref` values) name and everything those reference, sorted by
    /// name; a name the catalog does not have is left out (a unit test keeps there being none).
    pub(super) fn closure<'a>(
        &self,
        refs: impl IntoIterator<Item = &'a str>,
    ) -> Map<String, Value> {
        let mut pending: Vec<String> = refs
            .into_iter()
            .filter_map(|r| r.strip_prefix(REF_PREFIX))
            .map(str::to_string)
            .collect();
        let mut found = std::collections::BTreeMap::new();
        while let Some(name) = pending.pop() {
            if found.contains_key(&name) {
                continue;
            }
            let Some(schema) = self.schemas.get(&name) else {
                continue;
            };
            refs_in(schema, &mut |r| {
                if let Some(n) = r.strip_prefix(REF_PREFIX) {
                    pending.push(n.to_string());
                }
            });
            found.insert(name, schema.clone());
        }
        found.into_iter().collect()
    }
}

/// Calls `f` with every `$ref` string inside `v`.
pub(super) fn refs_in<'a>(v: &'a Value, f: &mut impl FnMut(&'a str)) {
    match v {
        Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("$ref", Value::String(r)) => f(r),
                    _ => refs_in(value, f),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| refs_in(item, f)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog() -> Catalog {
        Catalog::build()
    }

    #[test]
    fn every_served_kind_has_a_schema_under_upstreams_name_tagged_with_its_gvk() {
        let c = catalog();
        for r in RESOURCES.iter().filter(|r| !r.read_only) {
            let name = crate::openapi::paths::schema_name(r.group, r.version, r.kind);
            let schema = c.schemas.get(&name).unwrap_or_else(|| panic!("{name}"));
            assert_eq!(
                schema["x-kubernetes-group-version-kind"],
                gvk(r.group, r.version, r.kind),
                "{name}"
            );
            assert_eq!(schema["type"], "object", "{name}");
            assert!(schema["description"].is_string(), "{name}");
            if !r.create_only {
                let list = &c.schemas[&format!("{name}List")];
                assert_eq!(
                    list["properties"]["items"]["items"]["allOf"][0]["$ref"],
                    format!("{REF_PREFIX}{name}")
                );
                assert_eq!(
                    list["x-kubernetes-group-version-kind"][0]["kind"],
                    format!("{}List", r.kind)
                );
            }
        }
    }

    #[test]
    fn subresource_kinds_and_status_carry_their_own_gvk() {
        let c = catalog();
        for (name, group, version, kind) in [
            (
                "io.k8s.api.autoscaling.v1.Scale",
                "autoscaling",
                "v1",
                "Scale",
            ),
            ("io.k8s.api.policy.v1.Eviction", "policy", "v1", "Eviction"),
            ("io.k8s.api.core.v1.Binding", "", "v1", "Binding"),
            (
                "io.k8s.api.authentication.v1.TokenRequest",
                "authentication.k8s.io",
                "v1",
                "TokenRequest",
            ),
            (
                "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
                "",
                "v1",
                "Status",
            ),
        ] {
            assert_eq!(
                c.schemas[name]["x-kubernetes-group-version-kind"],
                gvk(group, version, kind),
                "{name}"
            );
        }
        assert!(
            !c.schemas
                .contains_key("io.k8s.api.autoscaling.v1.ScaleList")
        );
    }

    #[test]
    fn a_described_reference_is_an_all_of_beside_its_description_as_upstream_writes_it() {
        let c = catalog();
        let strategy = &c.schemas["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["strategy"];
        assert_eq!(
            strategy["allOf"],
            json!([{"$ref": "#/components/schemas/io.k8s.api.apps.v1.DeploymentStrategy"}])
        );
        assert!(strategy.get("$ref").is_none());
        assert!(
            strategy["description"]
                .as_str()
                .is_some_and(|d| d.contains("deployment strategy")),
            "{strategy}"
        );
        let meta = &c.schemas["io.k8s.api.core.v1.Pod"]["properties"]["metadata"];
        assert_eq!(
            meta["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );
    }

    #[test]
    fn no_reference_has_siblings_and_every_reference_resolves_in_the_catalog() {
        fn check(v: &Value, c: &Catalog, at: &str) {
            match v {
                Value::Object(map) => {
                    // JSONSchemaProps has a *property* named `$ref` (a string field), as upstream's.
                    if let Some(r) = map.get("$ref").filter(|r| r.is_string()) {
                        assert_eq!(map.len(), 1, "{at}: {v}");
                        let name = r.as_str().and_then(|r| r.strip_prefix(REF_PREFIX));
                        assert!(name.is_some_and(|n| c.schemas.contains_key(n)), "{at}: {r}");
                    }
                    map.values().for_each(|x| check(x, c, at));
                }
                Value::Array(items) => items.iter().for_each(|x| check(x, c, at)),
                _ => {}
            }
        }
        let c = catalog();
        for (name, schema) in &c.schemas {
            check(schema, &c, name);
        }
    }

    #[test]
    fn the_closure_follows_references_transitively() {
        let c = catalog();
        let got = c.closure([format!("{REF_PREFIX}io.k8s.api.batch.v1.CronJob").as_str()]);
        for name in [
            "io.k8s.api.batch.v1.CronJob",
            "io.k8s.api.batch.v1.JobTemplateSpec",
            "io.k8s.api.core.v1.PodSpec",
            "io.k8s.api.core.v1.ContainerPort",
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
            "io.k8s.apimachinery.pkg.apis.meta.v1.Time",
        ] {
            assert!(got.contains_key(name), "{name}");
        }
        assert!(!got.contains_key("io.k8s.api.apps.v1.Deployment"));
        let keys: Vec<&String> = got.keys().collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
    }
}
