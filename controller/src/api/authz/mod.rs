//! Authorization: cluster admins (and other authenticated users: Berth has no RBAC yet) may do
//! everything; node credentials go through [`policy::decide`] with facts looked up here.

pub mod policy;

use super::authn::Identity;
use super::error::ApiError;
use super::path::ResourcePath;
use super::query::Query;
use crate::registry::{Registry, prefix};
use axum::http::Method;
use berth_shared::resource;
use policy::{Facts, Request, Verb};
use serde_json::Value;

/// The node name of a node credential (`system:node:<name>` in group `system:nodes`).
pub fn node_of(id: &Identity) -> Option<&str> {
    if !id.groups.iter().any(|g| g == "system:nodes") {
        return None;
    }
    id.user.strip_prefix("system:node:")
}

pub fn verb(method: &Method, path: &ResourcePath, q: &Query) -> Verb {
    match (method, path.name.is_some()) {
        (&Method::GET, _) if q.flag("watch") => Verb::Watch,
        (&Method::GET, true) => Verb::Get,
        (&Method::GET, false) => Verb::List,
        (&Method::POST, _) => Verb::Create,
        (&Method::PUT, _) => Verb::Update,
        (&Method::PATCH, _) => Verb::Patch,
        (&Method::DELETE, true) => Verb::Delete,
        _ => Verb::DeleteCollection,
    }
}

/// Whether `pod` references a configmap (or secret) named `name`.
fn references(pod: &Value, secret: bool, name: &str) -> bool {
    let spec = &pod["spec"];
    let is = |v: &Value| v.as_str() == Some(name);
    let volume_hit = spec["volumes"].as_array().is_some_and(|vols| {
        vols.iter().any(|v| {
            if secret {
                is(&v["secret"]["secretName"])
                    || v["projected"]["sources"]
                        .as_array()
                        .is_some_and(|s| s.iter().any(|s| is(&s["secret"]["name"])))
            } else {
                is(&v["configMap"]["name"])
                    || v["projected"]["sources"]
                        .as_array()
                        .is_some_and(|s| s.iter().any(|s| is(&s["configMap"]["name"])))
            }
        })
    });
    let (key_ref, from_ref) = if secret {
        ("secretKeyRef", "secretRef")
    } else {
        ("configMapKeyRef", "configMapRef")
    };
    let container_hit = ["containers", "initContainers"].iter().any(|list| {
        spec[*list].as_array().is_some_and(|cs| {
            cs.iter().any(|c| {
                c["env"]
                    .as_array()
                    .is_some_and(|e| e.iter().any(|e| is(&e["valueFrom"][key_ref]["name"])))
                    || c["envFrom"]
                        .as_array()
                        .is_some_and(|e| e.iter().any(|e| is(&e[from_ref]["name"])))
            })
        })
    });
    let pull_hit = secret
        && spec["imagePullSecrets"]
            .as_array()
            .is_some_and(|s| s.iter().any(|s| is(&s["name"])));
    volume_hit || container_hit || pull_hit
}

fn facts(registry: &Registry, node: &str, path: &ResourcePath) -> Facts {
    let mut facts = Facts::default();
    let (Some(name), Some(ns)) = (path.name.as_deref(), path.namespace.as_deref()) else {
        return facts;
    };
    match (path.rt.group, path.rt.plural) {
        ("", "pods") => {
            facts.pod_node = registry
                .get(path.rt, Some(ns), name)
                .ok()
                .and_then(|p| p.index.field("spec.nodeName"));
        }
        ("", kind @ ("configmaps" | "secrets")) => {
            let Some(pods) = resource::by_plural("", "v1", "pods") else {
                return facts;
            };
            let (_, items, _) = registry
                .store()
                .list(&prefix(pods, Some(ns)), None, None, |o| {
                    o.index.field("spec.nodeName").as_deref() == Some(node)
                });
            facts.referenced_by_node_pod = items
                .iter()
                .filter_map(|p| p.value().ok())
                .any(|p| references(&p, kind == "secrets", name));
        }
        _ => {}
    }
    facts
}

/// Checks a resource request; node credentials are confined by the node policy.
pub fn authorize(
    registry: &Registry,
    id: Option<&Identity>,
    method: &Method,
    path: &ResourcePath,
    q: &Query,
) -> Result<(), ApiError> {
    let Some(node) = id.and_then(node_of) else {
        return Ok(());
    };
    let fields = q
        .field_selector()
        .unwrap_or_else(|_| berth_shared::selector::FieldSelector::everything());
    let request = Request {
        verb: verb(method, path, q),
        group: path.rt.group,
        resource: path.rt.plural,
        subresource: path.subresource.as_deref(),
        namespace: path.namespace.as_deref(),
        name: path.name.as_deref(),
        node_name_selector: fields.single_value("spec.nodeName"),
        name_selector: fields.single_value("metadata.name"),
    };
    policy::decide(node, &request, &facts(registry, node, path)).map_err(ApiError::Forbidden)
}

/// For creates by a node: the body must name the node's own Node or Lease.
pub fn authorize_create(
    id: Option<&Identity>,
    path: &ResourcePath,
    body: &Value,
) -> Result<(), ApiError> {
    let Some(node) = id.and_then(node_of) else {
        return Ok(());
    };
    let name = body.pointer("/metadata/name").and_then(Value::as_str);
    policy::created_name_allowed(node, path.rt.group, path.rt.plural, name)
        .map_err(ApiError::Forbidden)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pods_reference_configmaps_and_secrets_through_volumes_env_and_pull_secrets() {
        let pod = json!({"spec": {
            "volumes": [{"name": "v", "configMap": {"name": "cm1"}}, {"name": "s", "secret": {"secretName": "sec1"}}],
            "containers": [{"name": "c", "env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "sec2", "key": "k"}}}],
                            "envFrom": [{"configMapRef": {"name": "cm2"}}]}],
            "imagePullSecrets": [{"name": "pull"}]
        }});
        for (secret, name) in [
            (false, "cm1"),
            (false, "cm2"),
            (true, "sec1"),
            (true, "sec2"),
            (true, "pull"),
        ] {
            assert!(references(&pod, secret, name), "{name}");
        }
        assert!(!references(&pod, false, "sec1"));
        assert!(!references(&pod, true, "other"));
    }
}
