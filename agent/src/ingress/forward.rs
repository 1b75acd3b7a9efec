//! One request through the proxy: routed by the current snapshot's table, sent to an endpoint
//! of its upstream over a pooled connection with the `X-Forwarded-*` and `X-Real-IP` headers
//! set, hop-by-hop headers dropped, and answered with the upstream's response; a WebSocket (any
//! `Connection: Upgrade`) request is passed on with its upgrade headers and, once the upstream
//! answers 101, the two upgraded connections are joined byte for byte. No route: 404; no ready
//! endpoint: 503; no endpoint accepting a connection, or a broken upstream: 502 — as
//! ingress-nginx answers.
//!
//! Client-supplied `X-Forwarded-*` headers are replaced, not extended (ingress-nginx's
//! default, `use-forwarded-headers: false`): the proxy is the edge.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode, Uri, Version};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpInfo;
use tokio::sync::watch;

use super::Snapshot;
use super::access::{self, Record};
use super::routes::normalize_host;
use super::upstream::{EndpointConnector, authority};

pub type ProxyBody = BoxBody<Bytes, hyper::Error>;

/// Headers that belong to one connection, not to the request (RFC 9110 §7.6.1).
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
];

/// The listener a request came in on.
#[derive(Debug, Clone, Copy)]
pub struct Listener {
    pub https: bool,
    pub port: u16,
}

/// The proxy's shared parts: the snapshot it routes by and the pooled client.
pub struct Proxy {
    pub snapshot: watch::Receiver<Arc<Snapshot>>,
    pub client: Client<EndpointConnector, Incoming>,
}

fn local(status: StatusCode, text: &'static str) -> Response<ProxyBody> {
    let mut r = Response::new(
        Full::new(Bytes::from_static(text.as_bytes()))
            .map_err(|never| match never {})
            .boxed(),
    );
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn is_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(header::UPGRADE)
        && headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
}

/// Drops hop-by-hop headers and those `Connection` names; keeps `Connection: upgrade` and
/// `Upgrade` when `upgrade`.
fn strip_hop_by_hop(headers: &mut HeaderMap, upgrade: bool) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|t| HeaderName::from_bytes(t.trim().as_bytes()).ok())
        .collect();
    for n in named {
        if !(upgrade && n == header::UPGRADE) {
            headers.remove(n);
        }
    }
    for h in HOP_BY_HOP {
        headers.remove(h);
    }
    if upgrade {
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    } else {
        headers.remove(header::UPGRADE);
    }
}

fn version_text(v: Version) -> &'static str {
    match v {
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_2 => "HTTP/2.0",
        Version::HTTP_3 => "HTTP/3.0",
        _ => "HTTP/1.1",
    }
}

impl Proxy {
    /// Answers one request from `client` on `listener`.
    pub async fn handle(
        self: Arc<Self>,
        client: SocketAddr,
        listener: Listener,
        mut req: Request<Incoming>,
    ) -> Result<Response<ProxyBody>, Infallible> {
        let started = Instant::now();
        let host_header = req
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .map(str::to_string)
            .or_else(|| req.uri().authority().map(|a| a.as_str().to_string()))
            .unwrap_or_default();
        let host = normalize_host(&host_header);
        let method = req.method().to_string();
        let path_and_query = req
            .uri()
            .path_and_query()
            .map_or("/".to_string(), |p| p.as_str().to_string());
        let version = version_text(req.version());
        let snapshot = self.snapshot.borrow().clone();
        let upstream = snapshot.routes.route(&host, req.uri().path()).cloned();
        let mut rec = Record {
            client: client.ip(),
            method: &method,
            path: &path_and_query,
            version,
            host: &host_header,
            status: 0,
            size: None,
            elapsed: Default::default(),
            route: upstream.as_ref().map(|u| {
                (
                    u.namespace.as_str(),
                    u.ingress.as_str(),
                    format!("{}:{}", u.service, u.port),
                )
            }),
            upstream: None,
        };
        let response = match &upstream {
            None => local(StatusCode::NOT_FOUND, "404 page not found\n"),
            Some(up) if up.endpoints.is_empty() => local(
                StatusCode::SERVICE_UNAVAILABLE,
                "503 Service Temporarily Unavailable\n",
            ),
            Some(up) => {
                let upgrade = is_upgrade(req.headers());
                let client_upgrade = upgrade.then(|| hyper::upgrade::on(&mut req));
                let (mut parts, body) = req.into_parts();
                strip_hop_by_hop(&mut parts.headers, upgrade);
                let h = &mut parts.headers;
                let ip = client.ip().to_string();
                let set = |h: &mut HeaderMap, name: &'static str, v: &str| {
                    if let Ok(v) = HeaderValue::from_str(v) {
                        h.insert(name, v);
                    }
                };
                set(h, "host", &host_header);
                set(h, "x-forwarded-for", &ip);
                set(h, "x-real-ip", &ip);
                set(h, "x-forwarded-host", &host_header);
                set(h, "x-forwarded-port", &listener.port.to_string());
                set(
                    h,
                    "x-forwarded-proto",
                    if listener.https { "https" } else { "http" },
                );
                parts.version = Version::HTTP_11;
                match Uri::try_from(format!("http://{}{path_and_query}", authority(up))) {
                    Ok(uri) => parts.uri = uri,
                    Err(_) => {
                        let r = local(StatusCode::BAD_REQUEST, "400 bad request\n");
                        return Ok(self.finish(rec, started, r));
                    }
                }
                match self.client.request(Request::from_parts(parts, body)).await {
                    Ok(mut resp) => {
                        rec.upstream = resp.extensions().get::<HttpInfo>().map(|i| i.remote_addr());
                        if resp.status() == StatusCode::SWITCHING_PROTOCOLS
                            && let Some(client_side) = client_upgrade
                        {
                            let upstream_side = hyper::upgrade::on(&mut resp);
                            tokio::spawn(async move {
                                match tokio::try_join!(client_side, upstream_side) {
                                    Ok((c, u)) => {
                                        let (mut c, mut u) = (
                                            hyper_util::rt::TokioIo::new(c),
                                            hyper_util::rt::TokioIo::new(u),
                                        );
                                        let _ = tokio::io::copy_bidirectional(&mut c, &mut u).await;
                                    }
                                    Err(e) => {
                                        tracing::debug!(error = %e, "ingress: upgrade failed")
                                    }
                                }
                            });
                        } else {
                            strip_hop_by_hop(resp.headers_mut(), false);
                        }
                        resp.map(|b| b.boxed())
                    }
                    Err(e) => {
                        tracing::debug!(upstream = %up.key(), error = %e, "ingress: upstream failed");
                        local(StatusCode::BAD_GATEWAY, "502 Bad Gateway\n")
                    }
                }
            }
        };
        Ok(self.finish(rec, started, response))
    }

    fn finish(
        &self,
        mut rec: Record<'_>,
        started: Instant,
        response: Response<ProxyBody>,
    ) -> Response<ProxyBody> {
        rec.status = response.status().as_u16();
        rec.size = response
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse().ok());
        rec.elapsed = started.elapsed();
        access::record(&rec);
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_headers_go_and_an_upgrade_keeps_its_own() {
        let mut h = HeaderMap::new();
        h.insert(
            "connection",
            HeaderValue::from_static("keep-alive, X-Secret, Upgrade"),
        );
        h.insert("x-secret", HeaderValue::from_static("1"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert("upgrade", HeaderValue::from_static("websocket"));
        h.insert("accept", HeaderValue::from_static("*/*"));
        assert!(is_upgrade(&h));
        let mut plain = h.clone();
        strip_hop_by_hop(&mut plain, false);
        assert_eq!(
            plain.keys().map(|k| k.as_str()).collect::<Vec<_>>(),
            ["accept"]
        );
        strip_hop_by_hop(&mut h, true);
        assert_eq!(h["upgrade"], "websocket");
        assert_eq!(h["connection"], "upgrade");
        assert!(!h.contains_key("x-secret") && !h.contains_key("keep-alive"));
    }
}
