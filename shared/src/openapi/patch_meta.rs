//! Upstream's strategic-merge metadata on the component schemas: `x-kubernetes-patch-strategy`
//! and `x-kubernetes-patch-merge-key` on the fields whose Go struct tags carry `patchStrategy`
//! / `patchMergeKey` (k8s.io/api's `types.go` and apimachinery's ObjectMeta). k8s-openapi's
//! schemas have none of it, and a kubectl that builds strategic-merge patches from a served
//! schema (kubectl ≤ 1.26 from `/openapi/v2`) treats a list without it as atomic: a container
//! removed from a manifest would then stay, because the patch carries no `$patch: delete`.

use serde_json::{Map, Value, json};

/// (schema, field, patch strategy, merge key): k8s.io/api's tags for the kinds served here.
/// Fields that an older API version does not have are skipped.
const PATCH_META: &[(&str, &str, &str, Option<&str>)] = &[
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "finalizers",
        "merge",
        None,
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "ownerReferences",
        "merge",
        Some("uid"),
    ),
    (
        "io.k8s.api.core.v1.PersistentVolumeClaimStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    (
        "io.k8s.api.core.v1.Container",
        "ports",
        "merge",
        Some("containerPort"),
    ),
    ("io.k8s.api.core.v1.Container", "env", "merge", Some("name")),
    (
        "io.k8s.api.core.v1.Container",
        "volumeMounts",
        "merge",
        Some("mountPath"),
    ),
    (
        "io.k8s.api.core.v1.Container",
        "volumeDevices",
        "merge",
        Some("devicePath"),
    ),
    (
        "io.k8s.api.core.v1.ContainerStatus",
        "volumeMounts",
        "merge",
        Some("mountPath"),
    ),
    (
        "io.k8s.api.core.v1.ContainerStatus",
        "allocatedResourcesStatus",
        "merge",
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "ports",
        "merge",
        Some("containerPort"),
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "env",
        "merge",
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "volumeMounts",
        "merge",
        Some("mountPath"),
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "volumeDevices",
        "merge",
        Some("devicePath"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "volumes",
        "merge,retainKeys",
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "initContainers",
        "merge",
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "containers",
        "merge",
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "ephemeralContainers",
        "merge",
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "imagePullSecrets",
        "merge",
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "hostAliases",
        "merge",
        Some("ip"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "topologySpreadConstraints",
        "merge",
        Some("topologyKey"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "schedulingGates",
        "merge",
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "resourceClaims",
        "merge,retainKeys",
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.PodStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    (
        "io.k8s.api.core.v1.PodStatus",
        "hostIPs",
        "merge",
        Some("ip"),
    ),
    (
        "io.k8s.api.core.v1.PodStatus",
        "podIPs",
        "merge",
        Some("ip"),
    ),
    (
        "io.k8s.api.core.v1.PodStatus",
        "resourceClaimStatuses",
        "merge,retainKeys",
        Some("name"),
    ),
    (
        "io.k8s.api.core.v1.ReplicationControllerStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    (
        "io.k8s.api.core.v1.ServiceStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    (
        "io.k8s.api.core.v1.ServiceSpec",
        "ports",
        "merge",
        Some("port"),
    ),
    (
        "io.k8s.api.core.v1.ServiceAccount",
        "secrets",
        "merge",
        Some("name"),
    ),
    ("io.k8s.api.core.v1.NodeSpec", "podCIDRs", "merge", None),
    (
        "io.k8s.api.core.v1.NodeStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    (
        "io.k8s.api.core.v1.NodeStatus",
        "addresses",
        "merge",
        Some("type"),
    ),
    (
        "io.k8s.api.core.v1.NamespaceStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    (
        "io.k8s.api.apps.v1.StatefulSetStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    (
        "io.k8s.api.apps.v1.DeploymentSpec",
        "strategy",
        "retainKeys",
        None,
    ),
    (
        "io.k8s.api.apps.v1.DeploymentStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    (
        "io.k8s.api.apps.v1.DaemonSetStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    (
        "io.k8s.api.apps.v1.ReplicaSetStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    (
        "io.k8s.api.batch.v1.JobStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    (
        "io.k8s.api.policy.v1.PodDisruptionBudgetSpec",
        "selector",
        "replace",
        None,
    ),
    (
        "io.k8s.api.policy.v1.PodDisruptionBudgetStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
    (
        "io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerStatus",
        "conditions",
        "merge",
        Some("type"),
    ),
];

/// Adds the patch extensions to the fields `PATCH_META` names, where the schema has them.
pub(super) fn annotate(schemas: &mut Map<String, Value>) {
    for (schema, field, strategy, key) in PATCH_META {
        let Some(Value::Object(property)) = schemas
            .get_mut(*schema)
            .and_then(|s| s.get_mut("properties"))
            .and_then(|p| p.get_mut(*field))
        else {
            continue;
        };
        property.insert("x-kubernetes-patch-strategy".into(), json!(strategy));
        if let Some(key) = key {
            property.insert("x-kubernetes-patch-merge-key".into(), json!(key));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::schema::{ListStrategy, list_strategy};

    fn catalog_schemas() -> Map<String, Value> {
        let mut schemas = Map::new();
        for (schema, field, _, _) in PATCH_META {
            let entry = schemas
                .entry(schema.to_string())
                .or_insert_with(|| json!({"properties": {}}));
            entry["properties"][*field] = json!({"type": "array"});
        }
        schemas
    }

    #[test]
    fn fields_get_upstreams_strategy_and_merge_key() {
        let mut schemas = catalog_schemas();
        annotate(&mut schemas);
        let containers = &schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        let finalizers =
            &schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"]["finalizers"];
        assert!(finalizers.get("x-kubernetes-patch-merge-key").is_none());
    }

    /// The table agrees with the server's own strategic-merge table for the lists both name.
    #[test]
    fn the_table_agrees_with_the_servers_merge_strategies() {
        let path = |p: &str| p.split('.').map(String::from).collect::<Vec<_>>();
        for (kind, at, schema, field) in [
            (
                "Deployment",
                "spec.template.spec.containers",
                "io.k8s.api.core.v1.PodSpec",
                "containers",
            ),
            (
                "Pod",
                "spec.containers.env",
                "io.k8s.api.core.v1.Container",
                "env",
            ),
            (
                "Pod",
                "spec.containers.ports",
                "io.k8s.api.core.v1.Container",
                "ports",
            ),
            (
                "Pod",
                "spec.containers.volumeMounts",
                "io.k8s.api.core.v1.Container",
                "volumeMounts",
            ),
            (
                "Pod",
                "spec.volumes",
                "io.k8s.api.core.v1.PodSpec",
                "volumes",
            ),
            (
                "Pod",
                "status.conditions",
                "io.k8s.api.core.v1.PodStatus",
                "conditions",
            ),
            (
                "Service",
                "spec.ports",
                "io.k8s.api.core.v1.ServiceSpec",
                "ports",
            ),
            (
                "Pod",
                "metadata.ownerReferences",
                "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
                "ownerReferences",
            ),
        ] {
            let (_, _, _, key) = PATCH_META
                .iter()
                .find(|(s, f, _, _)| *s == schema && *f == field)
                .unwrap_or_else(|| panic!("{schema}.{field}"));
            let key = key.unwrap_or_else(|| panic!("{schema}.{field} has no key"));
            assert_eq!(
                list_strategy(kind, &path(at)),
                ListStrategy::MergeByKey(key),
                "{kind} {at}"
            );
        }
        assert_eq!(
            list_strategy("Pod", &path("metadata.finalizers")),
            ListStrategy::MergePrimitives
        );
    }
}
