//! The HTTPS client admission webhooks are called with: one POST of an `AdmissionReview`
//! per call over a kept-alive TLS connection that trusts only the webhook's `caBundle`, run on
//! the API server's tokio runtime while the registry's blocking thread waits for the answer
//! no longer than the webhook's timeout. Errors are worded as Go's HTTP client words them,
//! since they end up in upstream's `failed calling webhook` messages.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use berth_registry::webhook::dispatch::{Call, Transport};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;

/// Upstream's cap on a webhook's response body.
const MAX_RESPONSE_BYTES: usize = 3 * 1024 * 1024;

/// Go's text for a call past its deadline.
const DEADLINE: &str = "context deadline exceeded";

/// An open HTTP/1.1 connection to a webhook.
type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

/// Idle connections kept per webhook server.
const MAX_IDLE_PER_SERVER: usize = 8;

/// Which connections may carry a call: the same server, reached the same way, trusted by
/// the same bundle.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ServerKey {
    host: String,
    port: u16,
    server_name: String,
    ca_bundle: Vec<u8>,
}

/// Idle keep-alive connections by server, as Go's transport keeps them.
type Pool = Arc<Mutex<HashMap<ServerKey, Vec<Sender>>>>;

/// Calls webhooks on `handle`'s runtime.
pub struct HttpsClient {
    handle: tokio::runtime::Handle,
    /// TLS configurations by CA bundle: most webhooks share few bundles, and building the
    /// root store parses certificates.
    configs: Mutex<HashMap<Vec<u8>, Arc<rustls::ClientConfig>>>,
    idle: Pool,
}

impl HttpsClient {
    pub fn new(handle: tokio::runtime::Handle) -> HttpsClient {
        HttpsClient {
            handle,
            configs: Mutex::new(HashMap::new()),
            idle: Pool::default(),
        }
    }

    fn config(&self, ca_bundle: Option<&[u8]>) -> Result<Arc<rustls::ClientConfig>, String> {
        let key = ca_bundle.unwrap_or_default().to_vec();
        let mut configs = self.configs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = configs.get(&key) {
            return Ok(c.clone());
        }
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_pemfile::certs(&mut key.as_slice()) {
            let cert = cert.map_err(|e| format!("unable to load root certificates: {e}"))?;
            roots
                .add(cert)
                .map_err(|e| format!("unable to load root certificates: {e}"))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let config = Arc::new(config);
        configs.insert(key, config.clone());
        Ok(config)
    }
}

/// What one call needs, owned, to move onto the runtime.
struct Post {
    key: ServerKey,
    path: String,
    body: Bytes,
}

fn dial_error(host: &str, port: u16, e: &std::io::Error) -> String {
    let cause = match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connect: connection refused".to_string(),
        _ => e.to_string(),
    };
    format!("dial tcp {host}:{port}: {cause}")
}

/// A new TLS connection to the call's server.
async fn dial(config: Arc<rustls::ClientConfig>, key: &ServerKey) -> Result<Sender, String> {
    let tcp = tokio::net::TcpStream::connect((key.host.as_str(), key.port))
        .await
        .map_err(|e| dial_error(&key.host, key.port, &e))?;
    let _ = tcp.set_nodelay(true);
    let name = rustls::pki_types::ServerName::try_from(key.server_name.clone())
        .map_err(|e| format!("invalid server name {:?}: {e}", key.server_name))?;
    let tls = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .map_err(|e| format!("tls: {e}"))?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "webhook connection ended");
        }
    });
    Ok(sender)
}

/// How an exchange failed: on the connection (a reused one may just have been closed by
/// the server: worth one more try on a new one), or in the webhook's answer (final).
enum Failure {
    Connection(String),
    Answer(String),
}

impl Failure {
    fn text(self) -> String {
        match self {
            Failure::Connection(e) | Failure::Answer(e) => e,
        }
    }
}

/// One request and its answer's body over `sender`.
async fn exchange(sender: &mut Sender, p: &Post) -> Result<Vec<u8>, Failure> {
    let connection = |e: hyper::Error| Failure::Connection(e.to_string());
    sender.ready().await.map_err(connection)?;
    let authority = if p.key.host.contains(':') {
        format!("[{}]:{}", p.key.host, p.key.port)
    } else {
        format!("{}:{}", p.key.host, p.key.port)
    };
    let request = hyper::Request::post(p.path.as_str())
        .header(hyper::header::HOST, authority)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .header(hyper::header::ACCEPT, "application/json, */*")
        .body(Full::new(p.body.clone()))
        .map_err(|e| Failure::Answer(e.to_string()))?;
    let response = sender.send_request(request).await.map_err(connection)?;
    let status = response.status();
    let body = Limited::new(response.into_body(), MAX_RESPONSE_BYTES)
        .collect()
        .await
        .map_err(|e| Failure::Answer(e.to_string()))?
        .to_bytes();
    if status != hyper::StatusCode::OK {
        return Err(Failure::Answer(format!(
            "the server responded with the status code {} but did not return more information",
            status.as_u16()
        )));
    }
    Ok(body.to_vec())
}

fn take_idle(pool: &Pool, key: &ServerKey) -> Option<Sender> {
    let mut idle = pool.lock().unwrap_or_else(|e| e.into_inner());
    let senders = idle.get_mut(key)?;
    while let Some(s) = senders.pop() {
        if !s.is_closed() {
            return Some(s);
        }
    }
    None
}

fn put_back(pool: &Pool, key: ServerKey, sender: Sender) {
    if sender.is_closed() {
        return;
    }
    let mut idle = pool.lock().unwrap_or_else(|e| e.into_inner());
    let senders = idle.entry(key).or_default();
    if senders.len() < MAX_IDLE_PER_SERVER {
        senders.push(sender);
    }
}

/// Posts over an idle connection if there is one (a fresh one when it turns out closed,
/// as Go's transport retries a request a reused connection dropped), else a new one.
async fn post(config: Arc<rustls::ClientConfig>, pool: Pool, p: Post) -> Result<Vec<u8>, String> {
    if let Some(mut sender) = take_idle(&pool, &p.key) {
        match exchange(&mut sender, &p).await {
            Ok(body) => {
                put_back(&pool, p.key.clone(), sender);
                return Ok(body);
            }
            Err(Failure::Connection(e)) => {
                tracing::debug!(error = %e, "idle webhook connection failed; dialling");
            }
            Err(answer @ Failure::Answer(_)) => return Err(answer.text()),
        }
    }
    let mut sender = dial(config, &p.key).await?;
    let body = exchange(&mut sender, &p).await.map_err(Failure::text)?;
    put_back(&pool, p.key.clone(), sender);
    Ok(body)
}

impl Transport for HttpsClient {
    fn post(&self, call: &Call<'_>) -> Result<Vec<u8>, String> {
        let config = self.config(call.ca_bundle)?;
        let p = Post {
            key: ServerKey {
                host: call.host.clone(),
                port: call.port,
                server_name: call.server_name.clone(),
                ca_bundle: call.ca_bundle.unwrap_or_default().to_vec(),
            },
            path: call.path.clone(),
            body: Bytes::from(call.body.clone()),
        };
        let timeout = call.timeout;
        let pool = self.idle.clone();
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.handle.spawn(async move {
            let result = tokio::time::timeout(timeout, post(config, pool, p))
                .await
                .unwrap_or_else(|_| Err(DEADLINE.to_string()));
            let _ = tx.send(result);
        });
        // The task keeps the deadline; the margin only covers a runtime too busy to report.
        rx.recv_timeout(timeout + Duration::from_secs(1))
            .unwrap_or_else(|_| Err(DEADLINE.to_string()))
    }
}
