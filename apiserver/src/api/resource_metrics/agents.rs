//! The scrape's connections to agents: one kept-alive HTTPS connection per agent, reused from
//! tick to tick (hyper-util's pooled client over hyper-rustls), as metrics-server's Go transport
//! keeps its connections to kubelets.
//!
//! The pool is keyed by the agent's address and port, so a node that posts another one is
//! dialled anew; a connection the agent closed is dropped and dialled again; one left idle for
//! [`idle_timeout`] (a node gone, or backed off) is closed.
//!
//! Certificates: every dial verifies the agent's serving certificate against the cluster CA and
//! presents the controller's agent-client certificate, with the TLS config of
//! [`super::super::proxy::AgentDialer`]. Both are fixed for the controller's life (the client
//! certificate is renewed at a start), so a new dial never uses an older config than the
//! proxy's. An agent's renewed serving certificate is checked on the next dial; a connection
//! already open stays as trusted as its handshake, as in Go's transport, where client-go closes
//! its connections only when its own client certificate rotates — were ours to rotate in
//! place, this client would have to be built again with it.

use axum::http::{StatusCode, Uri};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use std::time::Duration;

use super::backoff::Endpoint;

/// Why a scrape of an agent failed.
#[derive(Debug, thiserror::Error)]
pub enum ScrapeError {
    #[error("invalid agent address {0:?}")]
    Address(String),
    #[error("error dialing backend: {0}")]
    Dial(#[source] hyper_util::client::legacy::Error),
    #[error("error reading from the agent: {0}")]
    Request(#[source] hyper_util::client::legacy::Error),
    #[error("error reading from the agent: {0}")]
    Body(#[source] hyper::Error),
    #[error("the agent answered {status}: {body}")]
    Status { status: StatusCode, body: String },
    #[error("the agent's answer is not UTF-8: {0}")]
    Utf8(#[from] std::string::FromUtf8Error),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

impl ScrapeError {
    /// Whether the same scrape may succeed later: not with an address that is no address or
    /// an answer that is no text.
    pub fn is_transient(&self) -> bool {
        !matches!(self, ScrapeError::Address(_) | ScrapeError::Utf8(_))
    }
}

/// How long an unused connection is kept: Go's `http.Transport` default (90 s, which client-go
/// and so metrics-server use), or two resolutions when that is longer, so a connection always
/// outlasts the wait for the next tick.
pub fn idle_timeout(resolution: Duration) -> Duration {
    resolution.saturating_mul(2).max(Duration::from_secs(90))
}

/// `https://addr:port/path`, the address in brackets when it is IPv6.
fn agent_uri(endpoint: &Endpoint, path: &str) -> Result<Uri, ScrapeError> {
    let (addr, port) = endpoint;
    let host = if addr.parse::<std::net::Ipv6Addr>().is_ok() {
        format!("[{addr}]")
    } else {
        addr.clone()
    };
    format!("https://{host}:{port}{path}")
        .parse()
        .map_err(|_| ScrapeError::Address(format!("{addr}:{port}")))
}

/// Kept-alive HTTPS connections to agents, at most one idle per agent.
pub struct AgentClient {
    client: Client<hyper_rustls::HttpsConnector<HttpConnector>, Empty<Bytes>>,
}

impl AgentClient {
    /// A client dialling with `tls` (without ALPN: HTTP/1.1 is offered by the connector),
    /// closing connections unused for `idle`.
    pub fn new(tls: rustls::ClientConfig, idle: Duration) -> AgentClient {
        let mut http = HttpConnector::new();
        // The scheme is https; the TLS is the wrapper's.
        http.enforce_http(false);
        http.set_nodelay(true);
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_only()
            .enable_http1()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(idle)
            .pool_max_idle_per_host(1)
            .pool_timer(TokioTimer::new())
            .build(https);
        AgentClient { client }
    }

    /// The body of the agent's answer to a GET for `path`, within `timeout`; an error unless
    /// it is a 2xx.
    pub async fn get_text(
        &self,
        endpoint: &Endpoint,
        path: &str,
        timeout: Duration,
    ) -> Result<String, ScrapeError> {
        tokio::time::timeout(timeout, self.get(endpoint, path))
            .await
            .map_err(|_| ScrapeError::Timeout(timeout))?
    }

    async fn get(&self, endpoint: &Endpoint, path: &str) -> Result<String, ScrapeError> {
        let uri = agent_uri(endpoint, path)?;
        let resp = match self.client.get(uri.clone()).await {
            Ok(resp) => resp,
            Err(e) if e.is_connect() => return Err(ScrapeError::Dial(e)),
            // A kept connection the agent closed as the request went out (an agent restarted
            // between two ticks): the GET once more, on a new connection, as Go's transport
            // retries an idempotent request that a reused connection lost.
            Err(_) => self.client.get(uri).await.map_err(|e| {
                if e.is_connect() {
                    ScrapeError::Dial(e)
                } else {
                    ScrapeError::Request(e)
                }
            })?,
        };
        let status = resp.status();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(ScrapeError::Body)?
            .to_bytes();
        if !status.is_success() {
            return Err(ScrapeError::Status {
                status,
                body: String::from_utf8_lossy(&body).into_owned(),
            });
        }
        Ok(String::from_utf8(body.to_vec())?)
    }
}

#[cfg(test)]
mod tests;
