//! Authorization: node credentials go through the node authorizer ([`policy::decide`], with
//! facts looked up here) and then RBAC; everyone else through RBAC ([`crate::rbac`]), whose
//! `system:masters` members may do everything. Non-resource paths (discovery, OpenAPI,
//! `/metrics`) are checked by [`non_resource`]; writes of RBAC objects by [`escalation`].

pub mod escalation;
pub mod policy;

use super::authn::Identity;
use super::error::ApiError;
use super::path::{ApiPath, ResourcePath};
use super::query::Query;
use super::{ApiState, SharedState};
use crate::rbac::rules::{Attributes, User};
use axum::extract::{Request as HttpRequest, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use berth_registry::{Registry, prefix};
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
    // HEAD is a GET, as upstream's RequestInfo reads it.
    match (method, path.name.is_some()) {
        (&Method::GET | &Method::HEAD, _) if q.flag("watch") => Verb::Watch,
        (&Method::GET | &Method::HEAD, true) => Verb::Get,
        (&Method::GET | &Method::HEAD, false) => Verb::List,
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

/// Whether a volume's required node affinity names `node` as a `kubernetes.io/hostname In`
/// value (how the local-path provisioner pins its volumes).
fn volume_pinned_to(volume: &Value, node: &str) -> bool {
    volume
        .pointer("/spec/nodeAffinity/required/nodeSelectorTerms")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(|t| {
            t["matchExpressions"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .any(|e| {
            e["key"] == "kubernetes.io/hostname"
                && e["operator"] == "In"
                && e["values"]
                    .as_array()
                    .is_some_and(|vs| vs.iter().any(|v| v == node))
        })
}

fn facts(registry: &Registry, node: &str, path: &ResourcePath) -> Facts {
    let mut facts = Facts::default();
    if let (("", "persistentvolumes"), Some(name)) =
        ((path.rt.group, path.rt.plural), path.name.as_deref())
    {
        facts.volume_on_node = registry
            .get(path.rt, None, name)
            .ok()
            .and_then(|v| v.value().ok())
            .is_some_and(|v| volume_pinned_to(&v, node));
        return facts;
    }
    let (Some(name), Some(ns)) = (path.name.as_deref(), path.namespace.as_deref()) else {
        return facts;
    };
    match (path.rt.group, path.rt.plural) {
        ("", "pods") => {
            facts.pod_node = registry
                .get(path.rt, Some(ns), name)
                .ok()
                .and_then(|p| p.index.field("spec.nodeName").map(str::to_string));
        }
        ("", kind @ ("configmaps" | "secrets")) => {
            facts.referenced_by_node_pod =
                referenced_by_node_pod(registry, node, ns, kind == "secrets", name);
            if kind == "secrets" && !facts.referenced_by_node_pod {
                facts.ingress_tls_secret = ingress_tls_secret(registry, path.rt, ns, name);
            }
        }
        _ => {}
    }
    facts
}

/// Whether the Secret `ns/name` is of type `kubernetes.io/tls` and an Ingress of `ns` names it
/// in `spec.tls` (the agents' ingress proxies terminate TLS with it; no other Secret of the
/// namespace is opened to them).
fn ingress_tls_secret(
    registry: &Registry,
    secrets: &'static resource::ResourceType,
    ns: &str,
    name: &str,
) -> bool {
    let is_tls = registry
        .get(secrets, Some(ns), name)
        .ok()
        .and_then(|s| s.value().ok())
        .is_some_and(|s| s["type"] == "kubernetes.io/tls");
    if !is_tls {
        return false;
    }
    let (_, items, _) =
        registry
            .store()
            .list(&prefix(resource::INGRESSES, Some(ns)), None, None, |_| true);
    items.iter().filter_map(|i| i.value().ok()).any(|i| {
        i.pointer("/spec/tls")
            .and_then(Value::as_array)
            .is_some_and(|tls| tls.iter().any(|t| t["secretName"] == name))
    })
}

/// Whether a pod bound to `node` references the ConfigMap (or Secret) `ns/name`.
fn referenced_by_node_pod(
    registry: &Registry,
    node: &str,
    ns: &str,
    secret: bool,
    name: &str,
) -> bool {
    let Some(pods) = resource::by_plural("", "v1", "pods") else {
        return false;
    };
    let (_, items, _) = registry
        .store()
        .list(&prefix(pods, Some(ns)), None, None, |o| {
            o.index.field("spec.nodeName") == Some(node)
        });
    items
        .iter()
        .filter_map(|p| p.value().ok())
        .any(|p| references(&p, secret, name))
}

/// The node authorizer's answer for a node's request (`Err`: its refusal message).
fn node_decision(
    registry: &Registry,
    node: &str,
    method: &Method,
    path: &ResourcePath,
    q: &Query,
    token_request_pod: Option<&str>,
) -> Result<(), String> {
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
    let mut facts = facts(registry, node, path);
    // A list or watch of one referenced ConfigMap or Secret, named by a `metadata.name` field
    // selector: the kubelet's watch-based manager keeps its pods' objects current this way.
    if let (("", kind @ ("configmaps" | "secrets")), None, Some(ns), Some(name)) = (
        (path.rt.group, path.rt.plural),
        path.name.as_deref(),
        path.namespace.as_deref(),
        request.name_selector,
    ) {
        facts.referenced_by_node_pod =
            referenced_by_node_pod(registry, node, ns, kind == "secrets", name);
    }
    if let (Some(pod), Some(ns)) = (token_request_pod, path.namespace.as_deref()) {
        // A node may ask for a token of an account only for a pod bound to it that runs as it.
        facts.token_for_own_pod = registry
            .get(resource::PODS, Some(ns), pod)
            .ok()
            .and_then(|p| p.value().ok())
            .is_some_and(|p| {
                p.pointer("/spec/nodeName").and_then(Value::as_str) == Some(node)
                    && p.pointer("/spec/serviceAccountName")
                        .and_then(Value::as_str)
                        == path.name.as_deref()
            });
    }
    policy::decide(node, &request, &facts)
}

/// The RBAC attributes of a resource request.
pub fn attributes(method: &Method, path: &ResourcePath, q: &Query) -> Attributes {
    Attributes::Resource {
        verb: verb(method, path, q).as_str().to_string(),
        group: path.rt.group.to_string(),
        resource: path.rt.plural.to_string(),
        subresource: path.subresource.clone().unwrap_or_default(),
        namespace: path.namespace.clone().unwrap_or_default(),
        name: path.name.clone().unwrap_or_default(),
    }
}

/// Upstream's refusal message for a resource request.
pub fn forbidden_message(user: &str, attrs: &Attributes) -> String {
    match attrs {
        Attributes::Resource {
            verb,
            group,
            resource,
            subresource,
            namespace,
            name,
        } => {
            let qualified = if group.is_empty() {
                resource.clone()
            } else {
                format!("{resource}.{group}")
            };
            let what = if name.is_empty() {
                qualified
            } else {
                format!("{qualified} \"{name}\"")
            };
            let res = if subresource.is_empty() {
                resource.clone()
            } else {
                format!("{resource}/{subresource}")
            };
            let scope = if namespace.is_empty() {
                "at the cluster scope".to_string()
            } else {
                format!("in the namespace \"{namespace}\"")
            };
            format!(
                "{what} is forbidden: User \"{user}\" cannot {verb} resource \"{res}\" in API group \"{group}\" {scope}"
            )
        }
        Attributes::NonResource { verb, path } => {
            format!("forbidden: User \"{user}\" cannot {verb} path \"{path}\"")
        }
    }
}

/// Checks a resource request: nodes by the node authorizer first, then everyone by RBAC.
/// `token_request_pod` is the pod a `serviceaccounts/token` request binds to.
pub async fn authorize(
    state: &ApiState,
    id: Option<&Identity>,
    method: &Method,
    path: &ResourcePath,
    q: &Query,
    token_request_pod: Option<&str>,
) -> Result<(), ApiError> {
    let Some(id) = id else {
        return Err(ApiError::Unauthorized);
    };
    let attrs = attributes(method, path, q);
    let node_refusal = match node_of(id) {
        Some(node) => {
            let registry = state.registry.clone();
            let (node, method, path, q) =
                (node.to_string(), method.clone(), path.clone(), q.clone());
            let pod = token_request_pod.map(String::from);
            let decision = tokio::task::spawn_blocking(move || {
                node_decision(&registry, &node, &method, &path, &q, pod.as_deref())
            })
            .await
            .map_err(|e| ApiError::Internal(format!("authorization task failed: {e}")))?;
            match decision {
                Ok(()) => return Ok(()),
                Err(msg) => Some(msg),
            }
        }
        None => None,
    };
    rbac_allows(state, id, &attrs, node_refusal).await
}

/// RBAC's answer for `attrs`: a refusal is upstream's Forbidden, worded as `refusal` (the node
/// authorizer's reason) when given.
pub(crate) async fn rbac_allows(
    state: &ApiState,
    id: &Identity,
    attrs: &Attributes,
    refusal: Option<String>,
) -> Result<(), ApiError> {
    if state
        .authorizer
        .allowed_fresh(&User::from(id), attrs)
        .await
        .is_some()
    {
        return Ok(());
    }
    Err(ApiError::Forbidden(
        refusal.unwrap_or_else(|| forbidden_message(&id.user, attrs)),
    ))
}

/// Middleware: requests for non-resource paths (discovery, OpenAPI, `/metrics`) need an RBAC
/// grant on the path; resource requests are checked where they are dispatched.
pub async fn non_resource(
    State(state): State<SharedState>,
    req: HttpRequest,
    next: Next,
) -> Response {
    let Some(id) = req.extensions().get::<Identity>() else {
        // Public paths (health, version, joining) carry no identity and need none.
        return next.run(req).await;
    };
    // Proxy paths (`…/pods/NAME/proxy/any/path`) are resource requests too.
    let path = req.uri().path();
    if matches!(super::path::parse(path), ApiPath::Resource(_))
        || super::proxy_target::parse_path(path).is_some()
        || super::proxy::node_proxy_path(path).is_some()
        || super::aggregated::is_remote_resource_path(&state, path)
    {
        return next.run(req).await;
    }
    let attrs = Attributes::NonResource {
        verb: req.method().as_str().to_lowercase(),
        path: req.uri().path().to_string(),
    };
    if state
        .authorizer
        .allowed_fresh(&User::from(id), &attrs)
        .await
        .is_some()
    {
        return next.run(req).await;
    }
    ApiError::Forbidden(forbidden_message(&id.user, &attrs)).into_response()
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

    #[test]
    fn methods_map_to_verbs_as_upstreams_request_info_maps_them() {
        let rt = berth_shared::resource::by_plural("", "v1", "pods").unwrap();
        let at = |name: Option<&str>| ResourcePath {
            rt,
            namespace: Some("default".into()),
            name: name.map(String::from),
            subresource: None,
        };
        let none = Query::parse(None);
        let watch = Query::parse(Some("watch=1"));
        for (method, name, q, want) in [
            (Method::HEAD, Some("p"), &none, Verb::Get),
            (Method::HEAD, None, &none, Verb::List),
            (Method::GET, None, &watch, Verb::Watch),
            (Method::DELETE, Some("p"), &none, Verb::Delete),
            (Method::DELETE, None, &none, Verb::DeleteCollection),
        ] {
            assert_eq!(verb(&method, &at(name), q), want, "{method} {name:?}");
        }
    }
}
