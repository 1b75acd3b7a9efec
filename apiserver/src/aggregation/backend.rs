//! Reaching a remote APIService's server: its Service (and the port it names), a ready
//! endpoint of the Service's EndpointSlices, then TLS as the front proxy. The controller dials
//! the endpoint's pod address itself, as it calls admission webhooks: its host must route to
//! pod IPs (an agent on the controller host, or the pod network's routes). Failures are told
//! apart as upstream's availability reasons.

use axum::body::Body;
use berth_registry::webhook::dispatch::Lookup;
use berth_registry::{Registry, RegistryError};
use berth_shared::resource::SERVICES;
use hyper_util::rt::TokioIo;

use super::front_proxy::FrontProxy;
use super::registration::{Registration, ServiceRef};

/// An open connection to an aggregated server.
pub type Sender = hyper::client::conn::http1::SendRequest<Body>;

/// Why a server could not be reached, with upstream's `Available` reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unreachable {
    ServiceNotFound(String),
    ServicePortError(String),
    MissingEndpoints(String),
    /// Dialling, TLS or the HTTP handshake failed.
    Failed(String),
}

impl Unreachable {
    pub fn reason(&self) -> &'static str {
        match self {
            Unreachable::ServiceNotFound(_) => "ServiceNotFound",
            Unreachable::ServicePortError(_) => "ServicePortError",
            Unreachable::MissingEndpoints(_) => "MissingEndpoints",
            Unreachable::Failed(_) => "FailedDiscoveryCheck",
        }
    }

    pub fn message(&self) -> &str {
        match self {
            Unreachable::ServiceNotFound(m)
            | Unreachable::ServicePortError(m)
            | Unreachable::MissingEndpoints(m)
            | Unreachable::Failed(m) => m,
        }
    }
}

/// The address and port serving `svc`'s port, from the store.
pub fn endpoint(registry: &Registry, svc: &ServiceRef) -> Result<(String, u16), Unreachable> {
    let described = format!("service/{} in {:?}", svc.name, svc.namespace);
    match registry.get(SERVICES, Some(&svc.namespace), &svc.name) {
        Ok(_) => {}
        Err(RegistryError::NotFound { .. }) => {
            return Err(Unreachable::ServiceNotFound(format!(
                "{described} is not present"
            )));
        }
        Err(e) => return Err(Unreachable::Failed(e.to_string())),
    }
    registry
        .service_endpoint(&svc.namespace, &svc.name, svc.port)
        .map_err(|e| {
            if e.starts_with("no service port") {
                Unreachable::ServicePortError(format!(
                    "{described} is not listening on port {}",
                    svc.port
                ))
            } else {
                Unreachable::MissingEndpoints(format!(
                    "endpoints for {described} have no addresses with port {}",
                    svc.port
                ))
            }
        })
}

/// `https://<address>:<port>`, as upstream's messages name a server.
pub fn url(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("https://[{host}]:{port}")
    } else {
        format!("https://{host}:{port}")
    }
}

/// A TLS connection to `reg`'s server at `host`:`port`.
pub async fn connect(
    front: &FrontProxy,
    reg: &Registration,
    svc: &ServiceRef,
    host: &str,
    port: u16,
) -> Result<Sender, Unreachable> {
    let fail = |e: String| Unreachable::Failed(e);
    let roots = if reg.insecure_skip_tls_verify {
        None
    } else {
        Some(reg.ca_bundle.as_deref().unwrap_or_default())
    };
    let connector = front.connector(roots).map_err(fail)?;
    let tcp = tokio::net::TcpStream::connect((host, port))
        .await
        .map_err(|e| {
            let cause = match e.kind() {
                std::io::ErrorKind::ConnectionRefused => "connect: connection refused".to_string(),
                _ => e.to_string(),
            };
            fail(format!(
                "dial tcp {}: {cause}",
                url(host, port).trim_start_matches("https://")
            ))
        })?;
    let _ = tcp.set_nodelay(true);
    let name = rustls::pki_types::ServerName::try_from(svc.server_name())
        .map_err(|e| fail(e.to_string()))?;
    let tls = connector
        .connect(name, tcp)
        .await
        .map_err(|e| fail(format!("tls: {e}")))?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| fail(e.to_string()))?;
    tokio::spawn(async move {
        if let Err(e) = conn.with_upgrades().await {
            tracing::debug!(error = %e, "aggregated API connection ended");
        }
    });
    Ok(sender)
}
