//! `pods/log` and `pods/exec` (and `attach`), and `nodes/proxy` GETs (the agent's metrics):
//! proxied to the agent of the pod's node over HTTPS, authenticated with the controller's agent-client certificate and verifying the
//! agent's node certificate against the cluster CA. Log bodies are streamed through; exec's
//! WebSocket upgrade is forwarded and the two upgraded connections are spliced.

use super::SharedState;
use super::error::ApiError;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use berth_shared::resource::{NODES, PODS};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use std::sync::Arc;

/// How the controller reaches agents.
pub struct AgentDialer {
    /// Trusts the cluster CA, presents the agent-client certificate; no ALPN.
    config: rustls::ClientConfig,
    /// `config` offering `http/1.1`.
    tls: tokio_rustls::TlsConnector,
}

impl AgentDialer {
    pub fn new(pki: &crate::pki::Pki) -> Result<AgentDialer, super::tls::TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for c in rustls_pemfile::certs(&mut pki.ca_cert.as_bytes()) {
            let c = c.map_err(|e| super::tls::TlsError::Pem(e.to_string()))?;
            roots.add(c)?;
        }
        let certs = rustls_pemfile::certs(&mut pki.agent_client_cert.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| super::tls::TlsError::Pem(e.to_string()))?;
        let key = rustls_pemfile::private_key(&mut pki.agent_client_key.as_bytes())
            .map_err(|e| super::tls::TlsError::Pem(e.to_string()))?
            .ok_or_else(|| super::tls::TlsError::Pem("no agent client key".to_string()))?;
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_client_auth_cert(certs, key)?;
        let mut http1 = config.clone();
        http1.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(AgentDialer {
            config,
            tls: tokio_rustls::TlsConnector::from(Arc::new(http1)),
        })
    }

    /// The TLS config agents are dialled with, without ALPN: for the resource-metrics scrape's
    /// kept-alive connections (`resource_metrics::agents`), whose connector sets its own.
    pub fn client_config(&self) -> rustls::ClientConfig {
        self.config.clone()
    }

    pub(super) async fn connect(
        &self,
        addr: &str,
        port: u16,
    ) -> Result<hyper::client::conn::http1::SendRequest<Body>, ApiError> {
        let unreachable = |e: String| ApiError::Internal(format!("error dialing backend: {e}"));
        let tcp = tokio::net::TcpStream::connect((addr, port))
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let name = rustls::pki_types::ServerName::try_from(addr.to_string())
            .map_err(|e| unreachable(e.to_string()))?;
        let tls = self
            .tls
            .connect(name, tcp)
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        tokio::spawn(async move {
            if let Err(e) = conn.with_upgrades().await {
                tracing::debug!(error = %e, "agent connection ended");
            }
        });
        Ok(sender)
    }
}

/// The pod's node address and agent port, and the container to use.
fn locate(
    state: &SharedState,
    ns: &str,
    pod: &str,
    container: Option<&str>,
) -> Result<(String, u16, String), ApiError> {
    let p = state.registry.get(PODS, Some(ns), pod)?.value()?;
    let names: Vec<String> = ["containers", "initContainers", "ephemeralContainers"]
        .iter()
        .flat_map(|l| p["spec"][*l].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c["name"].as_str().map(String::from))
        .collect();
    let container = match container {
        Some(c) if names.iter().any(|n| n == c) => c.to_string(),
        Some(c) => {
            return Err(ApiError::BadRequest(format!(
                "container {c} is not valid for pod {pod}"
            )));
        }
        None => {
            let apps: Vec<&str> = p["spec"]["containers"]
                .as_array()
                .map(|a| a.iter().filter_map(|c| c["name"].as_str()).collect())
                .unwrap_or_default();
            let default = p
                .pointer("/metadata/annotations/kubectl.kubernetes.io~1default-container")
                .and_then(Value::as_str);
            match (default, apps.as_slice()) {
                (Some(d), _) => d.to_string(),
                (None, [only]) => only.to_string(),
                _ => {
                    return Err(ApiError::BadRequest(format!(
                        "a container name must be specified for pod {pod}, choose one of: [{}]",
                        apps.join(" ")
                    )));
                }
            }
        }
    };
    let (addr, port) = agent_of(state, &p, pod)?;
    Ok((addr, port, container))
}

/// The agent of a pod's node.
pub fn pod_agent(state: &SharedState, ns: &str, pod: &str) -> Result<(String, u16), ApiError> {
    let p = state.registry.get(PODS, Some(ns), pod)?.value()?;
    agent_of(state, &p, pod)
}

/// The agent of the node the pod `p` (named `pod`) is bound to.
pub fn agent_of(state: &SharedState, p: &Value, pod: &str) -> Result<(String, u16), ApiError> {
    let node_name = p
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::BadRequest(format!("pod {pod} does not have a host assigned")))?;
    agent_endpoint(state, node_name)
}

/// A node's agent: its InternalIP and the port it posted as its kubelet endpoint.
fn agent_endpoint(state: &SharedState, node_name: &str) -> Result<(String, u16), ApiError> {
    let node = state.registry.get(NODES, None, node_name)?.value()?;
    node_endpoint(&node, node_name)
}

/// The agent of `node` (named `node_name`): its InternalIP and the port it posted as its
/// kubelet endpoint (10250 when none).
pub fn node_endpoint(node: &Value, node_name: &str) -> Result<(String, u16), ApiError> {
    let addr = node
        .pointer("/status/addresses")
        .and_then(Value::as_array)
        .and_then(|a| {
            a.iter()
                .find(|x| x["type"] == "InternalIP")
                .and_then(|x| x["address"].as_str())
                .map(String::from)
        })
        .ok_or_else(|| ApiError::Internal(format!("node {node_name} has no InternalIP address")))?;
    let port = node
        .pointer("/status/daemonEndpoints/kubeletEndpoint/Port")
        .and_then(Value::as_u64)
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(10250);
    Ok((addr, port))
}

/// `/api/v1/nodes/{name}/proxy[/{path}]`: the node's name and the path on its agent.
pub fn node_proxy_path(path: &str) -> Option<(String, String)> {
    let rest = path.strip_prefix("/api/v1/nodes/")?;
    let (name, rest) = rest.split_once('/')?;
    let tail = rest.strip_prefix("proxy")?;
    if !(tail.is_empty() || tail.starts_with('/')) || name.is_empty() {
        return None;
    }
    Some((
        name.to_string(),
        format!("/{}", tail.trim_start_matches('/')),
    ))
}

/// GET nodes/proxy: the agent's answer for `path` (its metrics, say), streamed back.
pub async fn node(
    state: &SharedState,
    node: &str,
    path: &str,
    query: &str,
) -> Result<Response, ApiError> {
    let (addr, port) = agent_endpoint(state, node)?;
    let uri = if query.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{query}")
    };
    forward_get(state, &addr, port, &uri).await
}

/// Sends a GET for `uri` to the agent at `addr:port` and streams its answer back, with its
/// status and content type.
async fn forward_get(
    state: &SharedState,
    addr: &str,
    port: u16,
    uri: &str,
) -> Result<Response, ApiError> {
    let mut sender = state.dialer.connect(addr, port).await?;
    let req = hyper::Request::get(uri)
        .header(header::HOST, format!("{addr}:{port}"))
        .body(Body::empty())
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| ApiError::Internal(format!("error reading from the agent: {e}")))?;
    let (parts, body) = resp.into_parts();
    let mut out = Response::new(Body::new(body));
    *out.status_mut() = parts.status;
    if let Some(ct) = parts.headers.get(header::CONTENT_TYPE) {
        out.headers_mut().insert(header::CONTENT_TYPE, ct.clone());
    }
    Ok(out)
}

fn query_param(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == key).then(|| {
            percent_encoding::percent_decode_str(v)
                .decode_utf8_lossy()
                .into_owned()
        })
    })
}

/// GET pods/log: streams the agent's answer back.
pub async fn log(
    state: &SharedState,
    ns: &str,
    pod: &str,
    query: &str,
) -> Result<Response, ApiError> {
    let (addr, port, container) =
        locate(state, ns, pod, query_param(query, "container").as_deref())?;
    let uri = format!("/containerLogs/{ns}/{pod}/{container}?{query}");
    forward_get(state, &addr, port, &uri).await
}

/// The headers of an upgrade that pass through to the agent and back.
const UPGRADE_HEADERS: &[&str] = &[
    "connection",
    "upgrade",
    "sec-websocket-key",
    "sec-websocket-version",
    "sec-websocket-protocol",
    "x-stream-protocol-version",
];

/// pods/exec, attach and portforward with a WebSocket or SPDY/3.1 upgrade: forwarded to the
/// agent (`/exec|attach/{ns}/{pod}/{container}`, `/portForward/{ns}/{pod}`), then spliced.
pub async fn upgrade(
    state: &SharedState,
    ns: &str,
    pod: &str,
    sub: &str,
    mut req: Request,
) -> Result<Response, ApiError> {
    let query = req.uri().query().unwrap_or_default().to_string();
    let wants_upgrade = req
        .headers()
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket") || v.eq_ignore_ascii_case("SPDY/3.1"));
    if !wants_upgrade {
        return Err(ApiError::BadRequest(format!(
            "{sub} needs an upgrade to WebSocket (v5.channel.k8s.io) or SPDY/3.1"
        )));
    }
    // Port-forward is per pod (its network namespace): upstream never asks for a container.
    let (addr, port, path) = if sub == "portforward" {
        let (addr, port) = pod_agent(state, ns, pod)?;
        (addr, port, format!("/portForward/{ns}/{pod}?{query}"))
    } else {
        let (addr, port, container) =
            locate(state, ns, pod, query_param(&query, "container").as_deref())?;
        (addr, port, format!("/{sub}/{ns}/{pod}/{container}?{query}"))
    };
    let mut sender = state.dialer.connect(&addr, port).await?;
    let mut forward = hyper::Request::builder()
        .method(req.method().clone())
        .uri(path)
        .header(header::HOST, format!("{addr}:{port}"))
        .body(Body::empty())
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    for (name, value) in req.headers() {
        if UPGRADE_HEADERS.contains(&name.as_str()) {
            forward.headers_mut().append(name.clone(), value.clone());
        }
    }
    let mut resp = sender
        .send_request(forward)
        .await
        .map_err(|e| ApiError::Internal(format!("error dialing backend: {e}")))?;
    if resp.status() != StatusCode::SWITCHING_PROTOCOLS {
        let status = resp.status();
        let body = http_body_util::BodyExt::collect(resp.into_body())
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let mut out = Response::new(Body::from(body));
        *out.status_mut() = status;
        return Ok(out);
    }
    let client_upgrade = hyper::upgrade::on(&mut req);
    let agent_upgrade = hyper::upgrade::on(&mut resp);
    tokio::spawn(async move {
        let (Ok(client), Ok(agent)) = (client_upgrade.await, agent_upgrade.await) else {
            tracing::debug!("upgrade failed");
            return;
        };
        let mut client = TokioIo::new(client);
        let mut agent = TokioIo::new(agent);
        let _ = tokio::io::copy_bidirectional(&mut client, &mut agent).await;
    });
    let mut out = Response::new(Body::empty());
    *out.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    for (k, v) in resp.headers() {
        if UPGRADE_HEADERS.contains(&k.as_str()) || k == "sec-websocket-accept" {
            out.headers_mut().insert(k.clone(), v.clone());
        }
    }
    if !out.headers().contains_key(header::CONNECTION) {
        out.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::node_proxy_path;

    #[test]
    fn node_proxy_paths_name_the_node_and_the_agents_path() {
        let cases = [
            (
                "/api/v1/nodes/n1/proxy/metrics/resource",
                Some(("n1", "/metrics/resource")),
            ),
            ("/api/v1/nodes/n1/proxy/metrics", Some(("n1", "/metrics"))),
            ("/api/v1/nodes/n1/proxy", Some(("n1", "/"))),
            ("/api/v1/nodes/n1/proxy/", Some(("n1", "/"))),
            ("/api/v1/nodes/n1/proxyx/metrics", None),
            ("/api/v1/nodes/n1/status", None),
            ("/api/v1/nodes//proxy/metrics", None),
            ("/api/v1/namespaces/default/pods/p/proxy/x", None),
        ];
        for (path, want) in cases {
            let got = node_proxy_path(path);
            assert_eq!(
                got.as_ref().map(|(n, p)| (n.as_str(), p.as_str())),
                want,
                "{path}"
            );
        }
    }
}
