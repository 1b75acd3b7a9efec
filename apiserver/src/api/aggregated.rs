//! Aggregated APIs in the HTTP API: a request under a group-version a remote APIService serves
//! is authorized here (RBAC on the attributes upstream's request info reads from the path) and
//! proxied to that APIService's server with the caller's identity in the front proxy's
//! headers, the answer streamed back (watches included); and the discovery documents list the
//! remote group-versions, from what their servers answered the availability check.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use serde_json::{Map, Value, json};

use super::SharedState;
use super::authn::Identity;
use super::error::ApiError;
use crate::aggregation::front_proxy::{add_identity, is_identity_header};
use crate::aggregation::registration::sort_versions;
use crate::aggregation::{Registration, backend};
use crate::rbac::rules::Attributes;

/// `(group, version, rest)` of a path under `/apis/<group>/<version>`.
fn split(path: &str) -> Option<(&str, &str, Vec<&str>)> {
    let rest = path.strip_prefix("/apis/")?;
    let mut segs = rest.trim_end_matches('/').split('/');
    let group = segs.next().filter(|s| !s.is_empty())?;
    let version = segs.next().filter(|s| !s.is_empty())?;
    Some((group, version, segs.filter(|s| !s.is_empty()).collect()))
}

/// The remote registration serving `path`, if a remote APIService serves its group-version.
pub fn remote_for(state: &SharedState, path: &str) -> Option<Registration> {
    let (group, version, _) = split(path)?;
    state.aggregator.remote(group, version)
}

/// Whether `path` is a resource request under a remote group-version (authorized by
/// [`serve`], not as a non-resource URL).
pub fn is_remote_resource_path(state: &SharedState, path: &str) -> bool {
    split(path)
        .is_some_and(|(g, v, rest)| !rest.is_empty() && state.aggregator.remote(g, v).is_some())
}

/// The RBAC attributes upstream's request info reads from a resource path under a group-version
/// (`rest`: the segments after `/apis/<group>/<version>`).
fn attributes(method: &Method, group: &str, rest: &[&str], watch: bool) -> Attributes {
    let (namespace, tail): (String, &[&str]) = match rest {
        ["namespaces", ns, tail @ ..] if !tail.is_empty() => (ns.to_string(), tail),
        _ => (String::new(), rest),
    };
    let resource = tail.first().copied().unwrap_or_default().to_string();
    let name = tail.get(1).copied().unwrap_or_default().to_string();
    let subresource = tail.get(2).copied().unwrap_or_default().to_string();
    let verb = match (method, name.is_empty()) {
        (&Method::GET | &Method::HEAD, _) if watch => "watch",
        (&Method::GET | &Method::HEAD, false) => "get",
        (&Method::GET | &Method::HEAD, true) => "list",
        (&Method::POST, _) => "create",
        (&Method::PUT, _) => "update",
        (&Method::PATCH, _) => "patch",
        (&Method::DELETE, false) => "delete",
        (&Method::DELETE, true) => "deletecollection",
        _ => "",
    };
    Attributes::Resource {
        verb: verb.to_string(),
        group: group.to_string(),
        resource,
        subresource,
        namespace,
        name,
    }
}

fn watching(query: Option<&str>) -> bool {
    query
        .unwrap_or_default()
        .split('&')
        .any(|kv| matches!(kv, "watch=true" | "watch=1" | "watch"))
}

/// Proxies `req` to `reg`'s server.
pub async fn serve(
    state: &SharedState,
    reg: Registration,
    mut req: Request,
) -> Result<Response, ApiError> {
    let Some(id) = req.extensions().get::<Identity>().cloned() else {
        return Err(ApiError::Unauthorized);
    };
    let path = req.uri().path().to_string();
    if let Some((group, _, rest)) = split(&path)
        && !rest.is_empty()
    {
        let attrs = attributes(req.method(), group, &rest, watching(req.uri().query()));
        super::authz::rbac_allows(state, &id, &attrs, None).await?;
    }
    let unavailable = || ApiError::ServiceUnavailable("service unavailable".to_string());
    let Some(svc) = reg.service.clone() else {
        return Err(unavailable());
    };
    let endpoint = {
        let (registry, svc) = (state.registry.clone(), svc.clone());
        tokio::task::spawn_blocking(move || backend::endpoint(&registry, &svc))
            .await
            .map_err(|e| ApiError::Internal(e.to_string()))?
    };
    let (host, port) = endpoint.map_err(|u| {
        tracing::debug!(apiservice = %reg.name, error = u.message(), "aggregated API unreachable");
        unavailable()
    })?;
    let mut sender = backend::connect(&state.front_proxy, &reg, &svc, &host, port)
        .await
        .map_err(|u| {
            ApiError::ServiceUnavailable(format!("error trying to reach service: {}", u.message()))
        })?;
    let uri = match req.uri().query() {
        Some(q) => format!("{path}?{q}"),
        None => path.clone(),
    };
    let upgrade = req.headers().get(header::UPGRADE).cloned();
    let mut out = hyper::Request::builder()
        .method(req.method().clone())
        .uri(&uri)
        .body(Body::empty())
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    // The client's headers less hop-by-hop ones and its credentials, as services/proxy
    // sends them, and less any identity header it made up.
    super::proxy_http::copy_request_headers(req.headers(), out.headers_mut());
    let made_up: Vec<_> = out
        .headers()
        .keys()
        .filter(|n| is_identity_header(n.as_str()))
        .cloned()
        .collect();
    for n in made_up {
        out.headers_mut().remove(n);
    }
    // Go servers (metrics-server) refuse an HTTP/1.1 request without a Host.
    if let Ok(host) = HeaderValue::from_str(&format!("{}:{}", svc.server_name(), svc.port)) {
        out.headers_mut().insert(header::HOST, host);
    }
    add_identity(out.headers_mut(), &id);
    if let Some(u) = &upgrade {
        out.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
        out.headers_mut().insert(header::UPGRADE, u.clone());
    }
    let client_upgrade = upgrade.is_some().then(|| hyper::upgrade::on(&mut req));
    *out.body_mut() = req.into_body();
    let mut resp = sender
        .send_request(out)
        .await
        .map_err(|e| ApiError::ServiceUnavailable(format!("error trying to reach service: {e}")))?;
    if resp.status() == StatusCode::SWITCHING_PROTOCOLS
        && let Some(client_upgrade) = client_upgrade
    {
        super::proxy_http::splice(client_upgrade, &mut resp);
    }
    let (parts, body) = resp.into_parts();
    let mut answer = Response::new(Body::new(body));
    *answer.status_mut() = parts.status;
    if parts.status == StatusCode::SWITCHING_PROTOCOLS {
        answer.headers_mut().extend(parts.headers);
    } else {
        super::proxy_http::copy_response_headers(&parts.headers, answer.headers_mut());
    }
    Ok(answer)
}

/// `/apis/<group>` of a group only remote APIServices serve: its `APIGroup`, versions in
/// upstream's order.
pub fn group_document(state: &SharedState, group: &str) -> Option<Value> {
    let regs = state.aggregator.remote_group(group);
    group_entry(group, &regs).map(|mut doc| {
        if let Some(m) = doc.as_object_mut() {
            m.insert("kind".into(), json!("APIGroup"));
            m.insert("apiVersion".into(), json!("v1"));
        }
        doc
    })
}

fn group_entry(group: &str, regs: &[Registration]) -> Option<Value> {
    let first = regs.first()?;
    let versions: Vec<Value> = regs
        .iter()
        .map(|r| json!({"groupVersion": r.group_version(), "version": r.version}))
        .collect();
    Some(json!({"name": group, "versions": versions,
        "preferredVersion": {"groupVersion": first.group_version(), "version": first.version}}))
}

/// The remote-only groups, by upstream's order: the highest `groupPriorityMinimum` first, then
/// by name; each with its versions sorted.
fn remote_groups(state: &SharedState) -> Vec<(String, Vec<Registration>)> {
    let served = berth_shared::resource::groups();
    let mut groups: Vec<(String, Vec<Registration>)> = Vec::new();
    for r in state.aggregator.registrations().iter() {
        if r.service.is_none() || served.iter().any(|(g, _)| *g == r.group) {
            continue;
        }
        match groups.iter_mut().find(|(g, _)| *g == r.group) {
            Some((_, regs)) => regs.push(r.clone()),
            None => groups.push((r.group.clone(), vec![r.clone()])),
        }
    }
    for (_, regs) in &mut groups {
        sort_versions(regs);
    }
    let top = |regs: &[Registration]| {
        regs.iter()
            .map(|r| r.group_priority_minimum)
            .max()
            .unwrap_or(0)
    };
    groups.sort_by(|(ga, a), (gb, b)| top(b).cmp(&top(a)).then_with(|| ga.cmp(gb)));
    groups
}

/// The legacy `/apis` list with the remote-only groups after the built-in ones.
pub fn with_remote_groups(state: &SharedState, mut list: Value) -> Value {
    if let Some(groups) = list.get_mut("groups").and_then(Value::as_array_mut) {
        for (g, regs) in remote_groups(state) {
            if let Some(entry) = group_entry(&g, &regs) {
                groups.push(entry);
            }
        }
    }
    list
}

/// One version of aggregated discovery from a server's `APIResourceList`.
fn aggregated_version(version: &str, list: Option<&Value>) -> Value {
    let Some(list) = list else {
        return json!({"version": version, "resources": [], "freshness": "Stale"});
    };
    let gv = list
        .get("groupVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let (group, v) = gv.split_once('/').unwrap_or(("", gv));
    let entries = list
        .get("resources")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let str_of = |e: &Value, k: &str| {
        e.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let mut resources: Vec<Map<String, Value>> = Vec::new();
    for e in entries.iter().filter(|e| !str_of(e, "name").contains('/')) {
        let mut r = Map::new();
        r.insert("resource".into(), json!(str_of(e, "name")));
        r.insert(
            "responseKind".into(),
            json!({"group": e.get("group").and_then(Value::as_str).unwrap_or(group),
                   "version": e.get("version").and_then(Value::as_str).unwrap_or(v),
                   "kind": str_of(e, "kind")}),
        );
        let namespaced = e
            .get("namespaced")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        r.insert(
            "scope".into(),
            json!(if namespaced { "Namespaced" } else { "Cluster" }),
        );
        r.insert("singularResource".into(), json!(str_of(e, "singularName")));
        r.insert("verbs".into(), e.get("verbs").cloned().unwrap_or(json!([])));
        for k in ["shortNames", "categories"] {
            if let Some(l) = e
                .get(k)
                .filter(|l| l.as_array().is_some_and(|a| !a.is_empty()))
            {
                r.insert(k.into(), l.clone());
            }
        }
        resources.push(r);
    }
    for e in entries.iter() {
        let name = str_of(e, "name");
        let Some((parent, sub)) = name.split_once('/') else {
            continue;
        };
        if let Some(r) = resources
            .iter_mut()
            .find(|r| r.get("resource").and_then(Value::as_str) == Some(parent))
        {
            let subs = r.entry("subresources").or_insert_with(|| json!([]));
            if let Some(a) = subs.as_array_mut() {
                a.push(json!({"subresource": sub,
                    "responseKind": {"group": e.get("group").and_then(Value::as_str).unwrap_or(group),
                                     "version": e.get("version").and_then(Value::as_str).unwrap_or(v),
                                     "kind": str_of(e, "kind")},
                    "verbs": e.get("verbs").cloned().unwrap_or(json!([]))}));
            }
        }
    }
    json!({"version": version, "resources": resources, "freshness": "Current"})
}

/// Aggregated discovery (`/apis`) with the remote group-versions: a built-in version a remote
/// APIService replaces is listed as its server answered it, and remote-only groups follow.
pub fn with_remote_discovery(state: &SharedState, mut doc: Value) -> Value {
    let Some(items) = doc.get_mut("items").and_then(Value::as_array_mut) else {
        return doc;
    };
    for item in items.iter_mut() {
        let group = item
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if let Some(versions) = item.get_mut("versions").and_then(Value::as_array_mut) {
            for v in versions.iter_mut() {
                let version = v
                    .get("version")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                if state.aggregator.remote(&group, &version).is_some() {
                    *v = aggregated_version(
                        &version,
                        state.aggregator.discovered(&group, &version).as_ref(),
                    );
                }
            }
        }
    }
    for (g, regs) in remote_groups(state) {
        let versions: Vec<Value> = regs
            .iter()
            .map(|r| {
                aggregated_version(
                    &r.version,
                    state.aggregator.discovered(&g, &r.version).as_ref(),
                )
            })
            .collect();
        items.push(
            json!({"metadata": {"name": g, "creationTimestamp": null}, "versions": versions}),
        );
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_paths_give_upstreams_request_attributes() {
        let attrs = |m: Method, path: &str, watch: bool| {
            let (g, _, rest) = split(path).unwrap();
            attributes(&m, g, &rest, watch)
        };
        assert_eq!(
            attrs(
                Method::GET,
                "/apis/example.com/v1/namespaces/ns/widgets",
                false
            ),
            Attributes::Resource {
                verb: "list".into(),
                group: "example.com".into(),
                resource: "widgets".into(),
                subresource: String::new(),
                namespace: "ns".into(),
                name: String::new(),
            }
        );
        assert_eq!(
            attrs(Method::GET, "/apis/example.com/v1/widgets", true),
            Attributes::Resource {
                verb: "watch".into(),
                group: "example.com".into(),
                resource: "widgets".into(),
                subresource: String::new(),
                namespace: String::new(),
                name: String::new(),
            }
        );
        assert_eq!(
            attrs(
                Method::PUT,
                "/apis/example.com/v1/namespaces/ns/widgets/w/status",
                false
            ),
            Attributes::Resource {
                verb: "update".into(),
                group: "example.com".into(),
                resource: "widgets".into(),
                subresource: "status".into(),
                namespace: "ns".into(),
                name: "w".into(),
            }
        );
        assert_eq!(
            attrs(Method::DELETE, "/apis/example.com/v1/namespaces/ns", false),
            Attributes::Resource {
                verb: "delete".into(),
                group: "example.com".into(),
                resource: "namespaces".into(),
                subresource: String::new(),
                namespace: String::new(),
                name: "ns".into(),
            }
        );
        assert!(watching(Some("labelSelector=a&watch=true")));
        assert!(!watching(Some("watchy=true")));
    }

    #[test]
    fn a_resource_list_becomes_an_aggregated_version_with_its_subresources() {
        let list = json!({"kind": "APIResourceList", "groupVersion": "metrics.k8s.io/v1beta1",
            "resources": [
                {"name": "pods", "singularName": "", "namespaced": true, "kind": "PodMetrics",
                 "verbs": ["get", "list"]},
                {"name": "widgets/status", "namespaced": true, "kind": "Widget",
                 "verbs": ["get"]},
                {"name": "widgets", "singularName": "widget", "namespaced": true,
                 "kind": "Widget", "verbs": ["get"], "shortNames": ["wd"]}]});
        let v = aggregated_version("v1beta1", Some(&list));
        assert_eq!(v["freshness"], "Current");
        assert_eq!(
            v["resources"][0],
            json!({"resource": "pods", "responseKind": {"group": "metrics.k8s.io",
                   "version": "v1beta1", "kind": "PodMetrics"}, "scope": "Namespaced",
                   "singularResource": "", "verbs": ["get", "list"]})
        );
        assert_eq!(v["resources"][1]["shortNames"], json!(["wd"]));
        assert_eq!(
            v["resources"][1]["subresources"][0]["subresource"],
            "status"
        );
        assert_eq!(aggregated_version("v1", None)["freshness"], "Stale");
    }
}
