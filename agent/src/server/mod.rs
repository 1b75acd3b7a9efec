//! The agent's HTTPS server (port 10250 by default): container logs and exec for the
//! controller, which proxies `kubectl logs` and `kubectl exec` here, and the agent's metrics
//! (`/metrics`, `/metrics/resource`), which the controller proxies as `nodes/proxy`, and TCP
//! tunnels to pods for `services/proxy` and `pods/proxy`. Only clients with a
//! certificate from the cluster CA in group `system:masters` (the controller) are served.
//! The pod worker supplies where logs are and how to exec, through [`Backend`].

mod attach;
mod cri_log;
mod exec;
mod exec_spdy;
mod log_follow;
mod log_history;
mod logs;
mod metric_sections;
mod metrics;
mod pod_tunnel;
mod port_forward;
mod port_forward_ws;
mod spdy;

pub use attach::AttachRequest;
pub use cri_log::format as format_log_line;

use axum::Router;
use axum::routing::get;
use futures::future::BoxFuture;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::sync::CancellationToken;
use tower::Service;

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("TLS configuration: {0}")]
    Tls(String),
    #[error("listening on {addr}: {source}")]
    Listen {
        addr: String,
        source: std::io::Error,
    },
}

/// Where a container's log is, and whether it may still grow.
pub struct LogTarget {
    pub path: PathBuf,
    /// Whether the container attempt writing this file is still running.
    pub running: Arc<dyn Fn() -> bool + Send + Sync>,
}

/// An exec request.
#[derive(Debug, Clone)]
pub struct ExecRequest {
    pub namespace: String,
    pub pod: String,
    pub container: String,
    pub command: Vec<String>,
    pub stdin: bool,
    pub tty: bool,
}

/// The streams of a running exec.
pub struct ExecStreams {
    pub stdout: Pin<Box<dyn AsyncRead + Send>>,
    /// Absent with a TTY (stderr is merged into stdout).
    pub stderr: Option<Pin<Box<dyn AsyncRead + Send>>>,
    pub stdin: Option<Pin<Box<dyn AsyncWrite + Send>>>,
    pub resize: Option<Box<dyn Fn(u16, u16) + Send + Sync>>,
    /// Ends the process's stdin (the client closed it).
    pub close_stdin: Option<Box<dyn Fn() + Send + Sync>>,
    pub exit: BoxFuture<'static, Result<i32, String>>,
}

/// Where a pod's forwarded connections go.
#[derive(Debug, Clone)]
pub struct PodNetwork {
    /// A path to the pod's network namespace (`/proc/<pid>/ns/net` of one of its containers).
    pub netns: PathBuf,
    pub uid: String,
}

/// What the server needs from the rest of the agent.
pub use metric_sections::{MetricsSection, WithSections};

pub trait Backend: Send + Sync + 'static {
    /// The log file of a container (the previous attempt's with `previous`).
    fn log_target(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        previous: bool,
    ) -> Result<LogTarget, String>;
    /// Starts a process in a running container.
    fn exec(&self, req: ExecRequest) -> BoxFuture<'static, Result<ExecStreams, String>>;
    /// The network namespace of a pod with a running container (port forwarding).
    fn pod_netns(
        &self,
        namespace: &str,
        pod: &str,
    ) -> BoxFuture<'static, Result<PodNetwork, String>>;
    /// The agent's own metrics, in the Prometheus text format.
    fn metrics(&self) -> BoxFuture<'static, Result<String, String>>;
    /// The node's, pods' and containers' resource usage, in the Prometheus text format.
    fn resource_metrics(&self) -> BoxFuture<'static, Result<String, String>>;
    /// Attaches to a running container; the streams' `exit` resolves (with 0) when the
    /// container's output ended.
    fn attach(&self, req: AttachRequest) -> BoxFuture<'static, Result<ExecStreams, String>>;
}

pub type SharedBackend = Arc<dyn Backend>;

/// Clients must present a certificate from the cluster CA; the server's own certificate is
/// whatever `certificate` resolves at each handshake (renewed in place, see
/// [`crate::certificates::serving`]).
fn tls_config(
    ca_pem: &str,
    certificate: Arc<dyn rustls::server::ResolvesServerCert>,
) -> Result<Arc<rustls::ServerConfig>, ServerError> {
    let err = |e: String| ServerError::Tls(e);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pemfile::certs(&mut ca_pem.as_bytes()) {
        roots
            .add(c.map_err(|e| err(e.to_string()))?)
            .map_err(|e| err(e.to_string()))?;
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .map_err(|e| err(e.to_string()))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| err(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(certificate);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Whether the verified peer is the controller (a CA-signed certificate in `system:masters`).
fn is_controller(der: &[u8]) -> bool {
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(der) else {
        return false;
    };
    cert.subject()
        .iter_organization()
        .any(|o| o.as_str().is_ok_and(|o| o == "system:masters"))
}

pub fn router(backend: SharedBackend) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/containerLogs/{ns}/{pod}/{container}", get(logs::serve))
        .route(
            "/exec/{ns}/{pod}/{container}",
            get(exec_spdy::route::<ExecRequest>).post(exec_spdy::route::<ExecRequest>),
        )
        .route(
            "/attach/{ns}/{pod}/{container}",
            get(exec_spdy::route::<AttachRequest>).post(exec_spdy::route::<AttachRequest>),
        )
        .route(
            "/portForward/{ns}/{pod}",
            get(port_forward::serve).post(port_forward::serve),
        )
        .route("/tunnel/{ns}/{pod}", get(pod_tunnel::serve))
        .route("/metrics", get(metrics::own))
        .route("/metrics/resource", get(metrics::resource))
        .with_state(backend)
}

/// Serves until `shutdown`.
pub async fn serve(
    listen: std::net::SocketAddr,
    ca_pem: &str,
    certificate: Arc<dyn rustls::server::ResolvesServerCert>,
    backend: SharedBackend,
    shutdown: CancellationToken,
) -> Result<std::net::SocketAddr, ServerError> {
    let config = tls_config(ca_pem, certificate)?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|source| ServerError::Listen {
            addr: listen.to_string(),
            source,
        })?;
    let bound = listener
        .local_addr()
        .map_err(|source| ServerError::Listen {
            addr: listen.to_string(),
            source,
        })?;
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let app = router(backend);
    tokio::spawn(async move {
        loop {
            let (tcp, _) = tokio::select! {
                r = listener.accept() => match r { Ok(c) => c, Err(_) => continue },
                _ = shutdown.cancelled() => return,
            };
            let acceptor = acceptor.clone();
            let app = app.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let allowed = tls
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|c| c.first())
                    .is_some_and(|c| is_controller(c));
                let svc = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let mut app = app.clone();
                        async move {
                            if !allowed {
                                let mut r = axum::response::Response::new(axum::body::Body::from(
                                    "Forbidden",
                                ));
                                *r.status_mut() = axum::http::StatusCode::FORBIDDEN;
                                return Ok(r);
                            }
                            app.call(req.map(axum::body::Body::new)).await
                        }
                    },
                );
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection_with_upgrades(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    Ok(bound)
}
