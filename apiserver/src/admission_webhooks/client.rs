//! The HTTPS client admission webhooks are called with: one POST of an `AdmissionReview`
//! per call over a fresh TLS connection that trusts only the webhook's `caBundle`, run on
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

/// Calls webhooks on `handle`'s runtime.
pub struct HttpsClient {
    handle: tokio::runtime::Handle,
    /// TLS configurations by CA bundle: most webhooks share few bundles, and building the
    /// root store parses certificates.
    configs: Mutex<HashMap<Vec<u8>, Arc<rustls::ClientConfig>>>,
}

impl HttpsClient {
    pub fn new(handle: tokio::runtime::Handle) -> HttpsClient {
        HttpsClient {
            handle,
            configs: Mutex::new(HashMap::new()),
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
    host: String,
    port: u16,
    server_name: String,
    path: String,
    body: Vec<u8>,
}

fn dial_error(host: &str, port: u16, e: &std::io::Error) -> String {
    let cause = match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connect: connection refused".to_string(),
        _ => e.to_string(),
    };
    format!("dial tcp {host}:{port}: {cause}")
}

async fn post(config: Arc<rustls::ClientConfig>, p: Post) -> Result<Vec<u8>, String> {
    let tcp = tokio::net::TcpStream::connect((p.host.as_str(), p.port))
        .await
        .map_err(|e| dial_error(&p.host, p.port, &e))?;
    let _ = tcp.set_nodelay(true);
    let name = rustls::pki_types::ServerName::try_from(p.server_name.clone())
        .map_err(|e| format!("invalid server name {:?}: {e}", p.server_name))?;
    let tls = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .map_err(|e| format!("tls: {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "webhook connection ended");
        }
    });
    let authority = if p.host.contains(':') {
        format!("[{}]:{}", p.host, p.port)
    } else {
        format!("{}:{}", p.host, p.port)
    };
    let request = hyper::Request::post(p.path.as_str())
        .header(hyper::header::HOST, authority)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .header(hyper::header::ACCEPT, "application/json, */*")
        .body(Full::new(Bytes::from(p.body)))
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let body = Limited::new(response.into_body(), MAX_RESPONSE_BYTES)
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    if status != hyper::StatusCode::OK {
        return Err(format!(
            "the server responded with the status code {} but did not return more information",
            status.as_u16()
        ));
    }
    Ok(body.to_vec())
}

impl Transport for HttpsClient {
    fn post(&self, call: &Call<'_>) -> Result<Vec<u8>, String> {
        let config = self.config(call.ca_bundle)?;
        let p = Post {
            host: call.host.clone(),
            port: call.port,
            server_name: call.server_name.clone(),
            path: call.path.clone(),
            body: call.body.clone(),
        };
        let timeout = call.timeout;
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.handle.spawn(async move {
            let result = tokio::time::timeout(timeout, post(config, p))
                .await
                .unwrap_or_else(|_| Err(DEADLINE.to_string()));
            let _ = tx.send(result);
        });
        // The task keeps the deadline; the margin only covers a runtime too busy to report.
        rx.recv_timeout(timeout + Duration::from_secs(1))
            .unwrap_or_else(|_| Err(DEADLINE.to_string()))
    }
}
