//! The agent's built-in Ingress controller: a reverse proxy on host ports (`--ingress-http-port`,
//! default 80, and `--ingress-https-port`, default 443; 0 turns one off; with
//! `--ingress-node-label`, only on a node that carries the label at start) serving the Ingresses of
//! Berth's class ([`routes`]) from every agent, straight to the ready endpoints' pod addresses
//! ([`upstream`], [`forward`]), terminating TLS with the Ingresses' Secrets ([`certs`]), with an
//! access log line and metrics per request ([`access`]). [`state`] keeps the route table and
//! certificates current; a change swaps them whole, so open connections are never dropped.
//!
//! The proxy binds its ports directly: no iptables rule, address or file outlives it, and
//! `berth-agent uninstall` has nothing of it to remove. A port it cannot bind (someone else
//! listens there) is a warning, not a failure of the agent.

pub mod access;
pub mod certs;
pub mod forward;
pub mod listener;
pub mod routes;
pub mod state;
pub mod upstream;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use berth_api::client::Client;
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::network::service_state::ServiceState;
use certs::Certificates;
use routes::RouteTable;

/// Idle upstream connections are closed after this long (nginx's `keepalive_timeout` default is
/// 60 s; upstream servers commonly close at 60–75 s, so ours closes first).
const POOL_IDLE: Duration = Duration::from_secs(50);
/// At most this many idle connections are kept per upstream.
const POOL_MAX_IDLE: usize = 256;

/// What the proxy is told at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngressConfig {
    /// Plain HTTP; 0: off.
    pub http_port: u16,
    /// TLS; 0: off.
    pub https_port: u16,
    /// `--ingress-node-label`: serve only if the Node has this label (`KEY`, any value, or
    /// `KEY=VALUE`) when the agent starts.
    pub node_label: Option<String>,
}

impl IngressConfig {
    pub fn enabled(&self) -> bool {
        self.http_port != 0 || self.https_port != 0
    }

    /// This config for a Node labelled `labels`: both ports off when a required label is
    /// missing.
    pub fn for_labels(&self, labels: &std::collections::BTreeMap<String, String>) -> IngressConfig {
        let has = |want: &str| match want.split_once('=') {
            Some((k, v)) => labels.get(k).is_some_and(|have| have == v),
            None => labels.contains_key(want),
        };
        match &self.node_label {
            Some(want) if !has(want) => IngressConfig {
                http_port: 0,
                https_port: 0,
                node_label: self.node_label.clone(),
            },
            _ => self.clone(),
        }
    }

    /// The value of [`PORTS_ANNOTATION`](berth_api::ingress_class::PORTS_ANNOTATION).
    pub fn ports_annotation(&self) -> String {
        let ports: Vec<String> = [self.http_port, self.https_port]
            .iter()
            .filter(|p| **p != 0)
            .map(u16::to_string)
            .collect();
        if ports.is_empty() {
            "none".into()
        } else {
            ports.join(",")
        }
    }
}

/// What the proxy serves at one moment: the route table and the certificates of its TLS
/// entries.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub routes: RouteTable,
    pub certificates: Certificates,
    /// The Services and EndpointSlices have been listed (before that, no route has endpoints).
    pub synced: bool,
}

/// Binds `port` on every address, or says why not (a warning: the agent goes on without it).
async fn bind(port: u16, what: &str) -> Option<tokio::net::TcpListener> {
    if port == 0 {
        return None;
    }
    let addr = SocketAddr::from((Ipv4Addr::UNSPECIFIED, port));
    match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => {
            tracing::info!(port, "ingress: serving {what}");
            Some(l)
        }
        Err(e) => {
            tracing::warn!(port, error = %e, "ingress: cannot listen for {what}; not served on this node");
            None
        }
    }
}

/// Runs the proxy until `shutdown`: binds its ports, then keeps its state and serves.
pub async fn run(
    client: Client,
    services: watch::Receiver<Arc<ServiceState>>,
    config: IngressConfig,
    shutdown: CancellationToken,
) {
    if !config.enabled() {
        return;
    }
    let http = bind(config.http_port, "HTTP").await;
    let https = bind(config.https_port, "HTTPS").await;
    if http.is_none() && https.is_none() {
        return;
    }
    let (tx, rx) = watch::channel(Arc::new(Snapshot::default()));
    tokio::spawn(state::run(client, services, tx, shutdown.clone()));
    let proxy = proxy(rx.clone());
    if let Some(l) = http {
        tokio::spawn(listener::serve(l, None, proxy.clone(), shutdown.clone()));
    }
    if let Some(l) = https {
        match tls_acceptor(rx) {
            Ok(acceptor) => {
                tokio::spawn(listener::serve(l, Some(acceptor), proxy, shutdown.clone()));
            }
            Err(e) => tracing::warn!(error = %e, "ingress: no HTTPS"),
        }
    }
}

/// The request handler over `snapshot`, with its pooled upstream client.
fn proxy(snapshot: watch::Receiver<Arc<Snapshot>>) -> Arc<forward::Proxy> {
    let connector = upstream::EndpointConnector {
        snapshot: snapshot.clone(),
        next: Arc::new(AtomicUsize::new(0)),
    };
    let client = HttpClient::builder(TokioExecutor::new())
        .pool_idle_timeout(POOL_IDLE)
        .pool_max_idle_per_host(POOL_MAX_IDLE)
        .pool_timer(TokioTimer::new())
        .build(connector);
    Arc::new(forward::Proxy { snapshot, client })
}

/// The TLS side: certificates by SNI, the default one otherwise; ALPN `h2`, then `http/1.1`.
fn tls_acceptor(
    snapshot: watch::Receiver<Arc<Snapshot>>,
) -> Result<tokio_rustls::TlsAcceptor, certs::CertError> {
    let fallback = certs::default_certificate()?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| certs::CertError::Generate(e.to_string()))?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(certs::SniResolver { snapshot, fallback }));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

#[cfg(test)]
mod proxy_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_label_requirement_turns_both_ports_off_where_it_is_missing() {
        let cfg = |label: Option<&str>| IngressConfig {
            http_port: 80,
            https_port: 443,
            node_label: label.map(String::from),
        };
        let labels = [("role".to_string(), "edge".to_string())].into();
        for (label, served) in [
            (None, true),
            (Some("role"), true),
            (Some("role=edge"), true),
            (Some("role=core"), false),
            (Some("ingress"), false),
        ] {
            let got = cfg(label).for_labels(&labels);
            assert_eq!(got.enabled(), served, "{label:?}");
            let annotation = if served { "80,443" } else { "none" };
            assert_eq!(got.ports_annotation(), annotation, "{label:?}");
        }
    }
}
