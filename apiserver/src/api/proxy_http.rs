//! `services/proxy` and `pods/proxy`: the request (method, headers less credentials and
//! hop-by-hop ones, body, query) is sent to a pod's address, and the answer comes back with its
//! links rewritten (the `Location` header by [`super::proxy_rewrite`], HTML pages by
//! [`super::proxy_html`]). The controller need not route to pod IPs: it asks
//! the agent of the pod's node for a TCP tunnel to the address (`/tunnel/NS/POD`) and speaks
//! HTTP — or TLS without verification, as upstream's proxy transport, for `https:` ids — over
//! it. Authorization is the method's verb on `services/proxy` or `pods/proxy`.

use berth_shared::client::any_certificate::AnyServerCertificate;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use berth_shared::resource::{ENDPOINTS, PODS, SERVICES};
use hyper_util::rt::TokioIo;
use rand::seq::SliceRandom;

use super::SharedState;
use super::authn::Identity;
use super::error::ApiError;
use super::proxy_rewrite::Rewriter;
use super::proxy_target::{self, Backend, ProxyId, ProxyPath, Scheme, Through};
use crate::rbac::rules::Attributes;

/// Headers that belong to one connection, never forwarded either way (RFC 9110 §7.6.1, as Go's
/// reverse proxy drops them).
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// CORS headers of the backend's answer, dropped as upstream drops them (the API server's own
/// CORS policy applies, not the pod's).
const CORS: &[&str] = &[
    "access-control-allow-credentials",
    "access-control-allow-headers",
    "access-control-allow-methods",
    "access-control-allow-origin",
];

/// Serves one proxy request.
pub async fn serve(
    state: &SharedState,
    target: ProxyPath,
    req: Request,
) -> Result<Response, ApiError> {
    authorize(
        state,
        req.extensions().get::<Identity>(),
        req.method(),
        &target,
    )
    .await?;
    let id = proxy_target::split_id(&target.id).ok_or_else(|| {
        let kind = match target.through {
            Through::Service => "service",
            Through::Pod => "pod",
        };
        ApiError::BadRequest(format!("invalid {kind} request {:?}", target.id))
    })?;
    let path = proxy_target::backend_path(&target.rest);
    // Upstream redirects `…/proxy` to `…/proxy/` for reads (links on the page then resolve).
    if path.is_empty() && matches!(*req.method(), Method::GET | Method::HEAD) {
        let query = req
            .uri()
            .query()
            .map(|q| format!("?{q}"))
            .unwrap_or_default();
        let location = format!("{}/{query}", req.uri().path());
        let mut r = Response::new(Body::empty());
        *r.status_mut() = StatusCode::MOVED_PERMANENTLY;
        if let Ok(v) = HeaderValue::from_str(&location) {
            r.headers_mut().insert(header::LOCATION, v);
        }
        return Ok(r);
    }
    let backend = match target.through {
        Through::Service => service_backend(state, &target.namespace, &id)?,
        Through::Pod => {
            let pod = state
                .registry
                .get(PODS, Some(&target.namespace), &id.name)?
                .value()?;
            proxy_target::pod_backend(&pod, &id)?
        }
    };
    let full_path = req.uri().path().to_string();
    let prefix = full_path[..full_path.len() - target.rest.len()].to_string();
    forward(
        state,
        &target.namespace,
        &backend,
        id.scheme,
        &path,
        &prefix,
        req,
    )
    .await
}

/// The method's verb on `services/proxy` or `pods/proxy` of the named object.
async fn authorize(
    state: &SharedState,
    id: Option<&Identity>,
    method: &Method,
    target: &ProxyPath,
) -> Result<(), ApiError> {
    let Some(id) = id else {
        return Err(ApiError::Unauthorized);
    };
    // The object's name is the whole path segment (`https:web:443`), as upstream's request
    // info names it: a rule's resourceNames must spell the port to match a request with one.
    let attrs = Attributes::Resource {
        verb: proxy_target::verb(method).to_string(),
        group: String::new(),
        resource: target.through.plural().to_string(),
        subresource: "proxy".to_string(),
        namespace: target.namespace.clone(),
        name: target.id.clone(),
    };
    super::authz::rbac_allows(state, id, &attrs, None).await
}

/// An endpoint of the Service serving the id's port, at random among those whose pod still has
/// the address.
fn service_backend(state: &SharedState, ns: &str, id: &ProxyId) -> Result<Backend, ApiError> {
    let service = state.registry.get(SERVICES, Some(ns), &id.name)?.value()?;
    let port_name = proxy_target::service_port_name(&service, id)?;
    let endpoints = state.registry.get(ENDPOINTS, Some(ns), &id.name)?.value()?;
    let mut candidates = proxy_target::endpoint_candidates(&endpoints, ns, &port_name);
    candidates.shuffle(&mut rand::rng());
    candidates
        .into_iter()
        .find(|b| {
            state
                .registry
                .get(PODS, Some(ns), &b.pod)
                .ok()
                .and_then(|p| p.value().ok())
                .is_some_and(|p| proxy_target::pod_has_ip(&p, b.ip))
        })
        .ok_or_else(|| {
            ApiError::ServiceUnavailable(format!(
                "no endpoints available for service {:?}",
                id.name
            ))
        })
}

/// A connection to the backend: a tunnel through the pod's agent, with TLS for `https`.
async fn dial(
    state: &SharedState,
    ns: &str,
    backend: &Backend,
    scheme: Scheme,
) -> Result<hyper::client::conn::http1::SendRequest<Body>, ApiError> {
    let unreachable =
        |e: String| ApiError::ServiceUnavailable(format!("error trying to reach service: {e}"));
    let (addr, port) = super::proxy::pod_agent(state, ns, &backend.pod)?;
    let mut agent = state.dialer.connect(&addr, port).await?;
    let tunnel = hyper::Request::get(format!(
        "/tunnel/{ns}/{}?address={}&port={}",
        backend.pod, backend.ip, backend.port
    ))
    .header(header::HOST, format!("{addr}:{port}"))
    .header(header::CONNECTION, "Upgrade")
    .header(header::UPGRADE, "tcp")
    .body(Body::empty())
    .map_err(|e| ApiError::Internal(e.to_string()))?;
    let resp = agent
        .send_request(tunnel)
        .await
        .map_err(|e| unreachable(e.to_string()))?;
    if resp.status() != StatusCode::SWITCHING_PROTOCOLS {
        let body = http_body_util::BodyExt::collect(resp.into_body())
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        return Err(unreachable(
            String::from_utf8_lossy(&body).trim().to_string(),
        ));
    }
    let io = hyper::upgrade::on(resp)
        .await
        .map_err(|e| unreachable(e.to_string()))?;
    match scheme {
        Scheme::Http => handshake(io).await,
        Scheme::Https => {
            let name = rustls::pki_types::ServerName::from(backend.ip);
            let tls = tls_connector()
                .map_err(|e| ApiError::Internal(e.to_string()))?
                .connect(name, TokioIo::new(io))
                .await
                .map_err(|e| unreachable(e.to_string()))?;
            handshake(TokioIo::new(tls)).await
        }
    }
}

async fn handshake<IO>(io: IO) -> Result<hyper::client::conn::http1::SendRequest<Body>, ApiError>
where
    IO: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| ApiError::ServiceUnavailable(format!("error trying to reach service: {e}")))?;
    tokio::spawn(async move {
        if let Err(e) = conn.with_upgrades().await {
            tracing::debug!(error = %e, "proxied connection ended");
        }
    });
    Ok(sender)
}

/// Sends the request to the backend and its answer back.
async fn forward(
    state: &SharedState,
    ns: &str,
    backend: &Backend,
    scheme: Scheme,
    path: &str,
    prefix: &str,
    mut req: Request,
) -> Result<Response, ApiError> {
    let backend_host = host_port(backend);
    let request_host = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(String::from)
        .or_else(|| req.uri().authority().map(|a| a.to_string()))
        .unwrap_or_else(|| backend_host.clone());
    let upgrade = req.headers().get(header::UPGRADE).cloned();
    let uri = match req.uri().query() {
        Some(q) => format!("{}?{q}", or_root(path)),
        None => or_root(path).to_string(),
    };
    let mut out = hyper::Request::builder()
        .method(req.method().clone())
        .uri(&uri)
        .body(Body::empty())
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    copy_request_headers(req.headers(), out.headers_mut());
    if let Ok(v) = HeaderValue::from_str(&request_host) {
        out.headers_mut().insert(header::HOST, v);
    }
    if let Ok(v) = HeaderValue::from_str(&format!("{prefix}{path}")) {
        out.headers_mut()
            .insert(HeaderName::from_static("x-forwarded-uri"), v);
    }
    if let Some(u) = &upgrade {
        out.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
        out.headers_mut().insert(header::UPGRADE, u.clone());
    }
    let client_upgrade = upgrade.is_some().then(|| hyper::upgrade::on(&mut req));
    *out.body_mut() = req.into_body();
    let mut sender = dial(state, ns, backend, scheme).await?;
    let mut resp = sender
        .send_request(out)
        .await
        .map_err(|e| ApiError::ServiceUnavailable(format!("error trying to reach service: {e}")))?;
    let rewriter = Rewriter {
        prefix: prefix.to_string(),
        backend_host,
        request_host,
    };
    if resp.status() == StatusCode::SWITCHING_PROTOCOLS
        && let Some(client_upgrade) = client_upgrade
    {
        splice(client_upgrade, &mut resp);
        let mut r = Response::new(Body::empty());
        *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        for (k, v) in resp.headers() {
            r.headers_mut().append(k.clone(), v.clone());
        }
        return Ok(r);
    }
    let (parts, body) = resp.into_parts();
    let mut answer = Response::new(Body::empty());
    *answer.status_mut() = parts.status;
    copy_response_headers(&parts.headers, answer.headers_mut());
    if let Some(location) = parts
        .headers
        .get(header::LOCATION)
        .and_then(|v| v.to_str().ok())
        && let Ok(v) = HeaderValue::from_str(&rewriter.rewrite(location))
    {
        answer.headers_mut().insert(header::LOCATION, v);
        *answer.body_mut() = Body::new(body);
        return Ok(answer);
    }
    let html = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(super::proxy_html::is_html);
    let encoded = parts
        .headers
        .get(header::CONTENT_ENCODING)
        .is_some_and(|v| !v.as_bytes().eq_ignore_ascii_case(b"identity"));
    if !html || encoded {
        *answer.body_mut() = Body::new(body);
        return Ok(answer);
    }
    // An HTML page is read whole (as upstream reads it) and its links rewritten.
    let page = http_body_util::BodyExt::collect(body)
        .await
        .map_err(|e| ApiError::ServiceUnavailable(format!("error trying to reach service: {e}")))?
        .to_bytes();
    let page = match super::proxy_html::rewrite(&page, &rewriter) {
        Some(rewritten) => bytes::Bytes::from(rewritten),
        None => page,
    };
    answer.headers_mut().remove(header::CONTENT_LENGTH);
    *answer.body_mut() = Body::from(page);
    Ok(answer)
}

/// Joins the client's upgraded connection to the backend's once both have switched.
pub(super) fn splice(
    client_upgrade: hyper::upgrade::OnUpgrade,
    resp: &mut hyper::Response<hyper::body::Incoming>,
) {
    let backend_upgrade = hyper::upgrade::on(resp);
    tokio::spawn(async move {
        let (Ok(client), Ok(backend)) = (client_upgrade.await, backend_upgrade.await) else {
            return;
        };
        let _ =
            tokio::io::copy_bidirectional(&mut TokioIo::new(client), &mut TokioIo::new(backend))
                .await;
    });
}

fn or_root(path: &str) -> &str {
    if path.is_empty() { "/" } else { path }
}

/// `ip:port`, with brackets for IPv6.
fn host_port(b: &Backend) -> String {
    std::net::SocketAddr::new(b.ip, b.port).to_string()
}

/// The names a `Connection` header lists (hop-by-hop for this message too).
fn connection_listed(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect()
}

/// The client's headers less hop-by-hop ones and its credentials (the API server consumed
/// them; the pod must not see them).
pub(super) fn copy_request_headers(from: &HeaderMap, to: &mut HeaderMap) {
    let listed = connection_listed(from);
    for (name, value) in from {
        let n = name.as_str();
        if HOP_BY_HOP.contains(&n)
            || listed.iter().any(|l| l == n)
            || n == "authorization"
            || n.starts_with("impersonate-")
            || n == "host"
        {
            continue;
        }
        to.append(name.clone(), value.clone());
    }
}

/// The backend's headers less hop-by-hop and CORS ones.
pub(super) fn copy_response_headers(from: &HeaderMap, to: &mut HeaderMap) {
    let listed = connection_listed(from);
    for (name, value) in from {
        let n = name.as_str();
        if HOP_BY_HOP.contains(&n) || listed.iter().any(|l| l == n) || CORS.contains(&n) {
            continue;
        }
        to.append(name.clone(), value.clone());
    }
}

/// TLS to a backend without verifying its certificate, as upstream's proxy transport
/// (`InsecureSkipVerify`): pods serve self-signed certificates for their IPs.
fn tls_connector() -> Result<tokio_rustls::TlsConnector, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(AnyServerCertificate::new(provider))
        .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_and_hop_by_hop_headers_stay_behind() {
        let mut from = HeaderMap::new();
        for (k, v) in [
            ("authorization", "Bearer secret"),
            ("impersonate-user", "alice"),
            ("connection", "keep-alive, x-private"),
            ("x-private", "1"),
            ("keep-alive", "timeout=5"),
            ("host", "api:6443"),
            ("accept", "text/html"),
            ("x-custom", "kept"),
        ] {
            from.append(k, HeaderValue::from_static(v));
        }
        let mut to = HeaderMap::new();
        copy_request_headers(&from, &mut to);
        let mut names: Vec<&str> = to.keys().map(|k| k.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["accept", "x-custom"]);
    }

    #[test]
    fn the_backends_cors_headers_are_dropped() {
        let mut from = HeaderMap::new();
        from.append("access-control-allow-origin", HeaderValue::from_static("*"));
        from.append("content-type", HeaderValue::from_static("text/plain"));
        from.append("transfer-encoding", HeaderValue::from_static("chunked"));
        let mut to = HeaderMap::new();
        copy_response_headers(&from, &mut to);
        assert_eq!(
            to.keys().map(|k| k.as_str()).collect::<Vec<_>>(),
            ["content-type"]
        );
    }
}
