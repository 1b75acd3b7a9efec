//! What the aggregator writes at start, as kube-apiserver does:
//! - a local APIService for each built-in group-version (`v1.`, `v1.apps`, …,
//!   `v1beta1.metrics.k8s.io`), created when missing and never overwritten, so that a user's
//!   own APIService of the same name (metrics-server's, prometheus-adapter's) replaces it;
//! - the `extension-apiserver-authentication` ConfigMap in `kube-system`, which tells
//!   aggregated servers which client CA and which front proxy (CA, names, headers) to trust;
//! - the `extension-apiserver-authentication-reader` Role that lets them read it.

use berth_registry::{Part, Registry, RegistryError, WriteOptions};
use berth_shared::resource::{self, API_SERVICES, CONFIG_MAPS, ROLES};
use serde_json::{Value, json};

use super::front_proxy::{EXTRA_PREFIX, GROUP_HEADER, UID_HEADER, USER_HEADER};

pub const AUTHENTICATION_CONFIG_MAP: &str = "extension-apiserver-authentication";
const READER_ROLE: &str = "extension-apiserver-authentication-reader";
const KUBE_SYSTEM: &str = "kube-system";
/// Upstream's label on the APIServices it registers for its own group-versions at start.
const AUTOMANAGED: &str = "kube-aggregator.kubernetes.io/automanaged";

/// Upstream's `groupPriorityMinimum` of the built-in groups (kube-apiserver's table); the
/// metrics API takes metrics-server's own registration's values.
fn group_priority(group: &str) -> i64 {
    match group {
        "" => 18000,
        "apiregistration.k8s.io" => 17900,
        "apps" => 17800,
        "authentication.k8s.io" => 17700,
        "authorization.k8s.io" => 17600,
        "autoscaling" => 17500,
        "batch" => 17400,
        "certificates.k8s.io" => 17300,
        "networking.k8s.io" => 17200,
        "policy" => 17100,
        "rbac.authorization.k8s.io" => 17000,
        "storage.k8s.io" => 16800,
        "admissionregistration.k8s.io" | "apiextensions.k8s.io" => 16700,
        "scheduling.k8s.io" => 16600,
        "coordination.k8s.io" => 16500,
        "node.k8s.io" => 16300,
        "discovery.k8s.io" => 16200,
        "metrics.k8s.io" => 100,
        _ => 1000,
    }
}

fn version_priority(group: &str, version: &str) -> i64 {
    match (group, version) {
        ("", _) => 1,
        ("autoscaling", "v2") => 30,
        ("metrics.k8s.io", _) => 100,
        _ => 15,
    }
}

/// The local APIServices of the group-versions this process serves itself.
pub fn local_api_services() -> Vec<Value> {
    let mut out = Vec::new();
    for (group, versions) in resource::groups() {
        for version in versions {
            out.push(json!({
                "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                "metadata": {"name": format!("{version}.{group}"),
                             "labels": {AUTOMANAGED: "onstart"}},
                "spec": {"group": group, "version": version,
                         "groupPriorityMinimum": group_priority(group),
                         "versionPriority": version_priority(group, version)},
            }));
        }
    }
    out
}

/// The ConfigMap aggregated servers read their authentication settings from.
pub fn authentication_config_map(client_ca: &str, front_proxy_ca: &str) -> Value {
    let list = |items: &[&str]| json!(items).to_string();
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": AUTHENTICATION_CONFIG_MAP, "namespace": KUBE_SYSTEM},
        "data": {
            "client-ca-file": client_ca,
            "requestheader-client-ca-file": front_proxy_ca,
            "requestheader-allowed-names": list(&[crate::pki::FRONT_PROXY_CLIENT]),
            "requestheader-extra-headers-prefix": list(&[EXTRA_PREFIX]),
            "requestheader-group-headers": list(&[GROUP_HEADER]),
            "requestheader-username-headers": list(&[USER_HEADER]),
            "requestheader-uid-headers": list(&[UID_HEADER]),
        },
    })
}

fn reader_role() -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": READER_ROLE, "namespace": KUBE_SYSTEM,
                     "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
                     "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"],
                   "resourceNames": [AUTHENTICATION_CONFIG_MAP]}],
    })
}

fn create_missing(
    registry: &Registry,
    rt: &resource::ResourceType,
    ns: Option<&str>,
    obj: Value,
) -> Result<(), RegistryError> {
    match registry.create(rt, ns, obj, &WriteOptions::default()) {
        Ok(_) | Err(RegistryError::AlreadyExists { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Writes what is missing, and the ConfigMap's data when it changed.
pub fn ensure(
    registry: &Registry,
    client_ca: &str,
    front_proxy_ca: &str,
) -> Result<(), RegistryError> {
    for s in local_api_services() {
        create_missing(registry, API_SERVICES, None, s)?;
    }
    create_missing(registry, ROLES, Some(KUBE_SYSTEM), reader_role())?;
    let wanted = authentication_config_map(client_ca, front_proxy_ca);
    match registry.get(CONFIG_MAPS, Some(KUBE_SYSTEM), AUTHENTICATION_CONFIG_MAP) {
        Err(RegistryError::NotFound { .. }) => {
            create_missing(registry, CONFIG_MAPS, Some(KUBE_SYSTEM), wanted)
        }
        Err(e) => Err(e),
        Ok(stored) if stored.value()?.get("data") == wanted.get("data") => Ok(()),
        Ok(_) => registry
            .update_with(
                CONFIG_MAPS,
                Some(KUBE_SYSTEM),
                AUTHENTICATION_CONFIG_MAP,
                Part::Main,
                &WriteOptions::default(),
                move |mut stored| {
                    stored["data"] = wanted["data"].clone();
                    Ok::<_, RegistryError>(stored)
                },
            )
            .map(drop),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_group_version_has_a_valid_local_api_service() {
        let services = local_api_services();
        let names: Vec<&str> = services
            .iter()
            .map(|s| s["metadata"]["name"].as_str().unwrap())
            .collect();
        for want in ["v1.", "v1.apps", "v2.autoscaling", "v1beta1.metrics.k8s.io"] {
            assert!(names.contains(&want), "{want} in {names:?}");
        }
        for s in services {
            let mut obj = s.clone();
            berth_shared::admission::admit(
                "APIService",
                berth_shared::admission::Operation::Create,
                &mut obj,
                None,
            )
            .unwrap_or_else(|e| panic!("{s}: {e}"));
        }
    }

    #[test]
    fn the_config_map_names_upstreams_headers_as_json_lists() {
        let cm = authentication_config_map("CLIENT", "FRONT");
        assert_eq!(
            cm["data"]["requestheader-allowed-names"],
            "[\"front-proxy-client\"]"
        );
        assert_eq!(
            cm["data"]["requestheader-username-headers"],
            "[\"X-Remote-User\"]"
        );
        assert_eq!(cm["data"]["requestheader-client-ca-file"], "FRONT");
        assert_eq!(cm["data"]["client-ca-file"], "CLIENT");
    }
}
