//! The async HTTPS client for raw API requests (reqwest over rustls with the ring provider):
//! trusts only the controller's CA and presents the chosen credentials. The benchmark uses it
//! directly; tests use the blocking facade in `api`.

use std::net::SocketAddr;
use std::sync::Once;

pub use reqwest::Method;
use reqwest::{Certificate, Identity};
use serde_json::Value;

/// Who the client claims to be.
#[derive(Debug, Clone)]
pub enum Credentials {
    /// No client certificate and no token.
    Anonymous,
    /// A client certificate: PEM of the certificate followed by its private key.
    ClientCert(Vec<u8>),
    /// `Authorization: Bearer <token>`.
    Bearer(String),
}

/// Where to connect and how.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// `https://127.0.0.1:PORT`
    pub url: String,
    /// PEM of the CA that signed the serving certificate.
    pub ca_pem: Vec<u8>,
    pub credentials: Credentials,
    /// Resolve this host name to this address (to check `--tls-san` names).
    pub resolve: Option<(String, SocketAddr)>,
    /// Speak HTTP/2 only (ALPN `h2`), instead of negotiating.
    pub http2_only: bool,
}

/// One request; build with the constructors, add headers with `header`.
#[derive(Debug, Clone)]
pub struct Req {
    pub method: Method,
    /// Path and query, e.g. `/api/v1/namespaces/default/pods?limit=500`.
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
}

impl Req {
    pub fn new(method: Method, path: impl Into<String>) -> Req {
        Req {
            method,
            path: path.into(),
            headers: Vec::new(),
            body: None,
        }
    }
    pub fn get(path: impl Into<String>) -> Req {
        Req::new(Method::GET, path)
    }
    pub fn delete(path: impl Into<String>) -> Req {
        Req::new(Method::DELETE, path)
    }
    pub fn post(path: impl Into<String>, body: &Value) -> Req {
        Req::new(Method::POST, path).json(body)
    }
    pub fn put(path: impl Into<String>, body: &Value) -> Req {
        Req::new(Method::PUT, path).json(body)
    }
    /// PATCH with a JSON body and the given patch content type
    /// (`application/merge-patch+json`, `application/strategic-merge-patch+json`, ...).
    pub fn patch(path: impl Into<String>, content_type: &str, body: &Value) -> Req {
        Req::new(Method::PATCH, path).raw(content_type, body.to_string().into_bytes())
    }
    /// Replaces the body with `body` as `application/json`.
    pub fn json(self, body: &Value) -> Req {
        self.raw("application/json", body.to_string().into_bytes())
    }
    /// Replaces the body with raw bytes of the given content type.
    pub fn raw(mut self, content_type: &str, body: Vec<u8>) -> Req {
        self.headers
            .retain(|(k, _)| !k.eq_ignore_ascii_case("content-type"));
        self.headers
            .push(("Content-Type".into(), content_type.into()));
        self.body = Some(body);
        self
    }
    pub fn header(mut self, name: &str, value: &str) -> Req {
        self.headers.push((name.into(), value.into()));
        self
    }
    /// `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` (what kubectl asks for, first).
    pub fn table(self) -> Req {
        self.header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
    }
    /// `METHOD path`, for messages.
    pub fn line(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// A complete response.
#[derive(Debug, Clone)]
pub struct Reply {
    pub request: String,
    pub status: u16,
    pub content_type: String,
    pub http_version: String,
    /// `Retry-After` in seconds, if the server sent it.
    pub retry_after: Option<u64>,
    /// The `Warning` headers' texts (`299 - "text"` → `text`).
    pub warnings: Vec<String>,
    pub body: String,
}

/// The texts of a response's `Warning` headers (RFC 7234's `code agent "text"`).
pub fn warnings(headers: &reqwest::header::HeaderMap) -> Vec<String> {
    headers
        .get_all(reqwest::header::WARNING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(|v| {
            let text = v.splitn(3, ' ').nth(2).unwrap_or(v).trim();
            let text = text.strip_prefix('"').and_then(|t| t.strip_suffix('"'));
            text.map_or_else(|| v.to_string(), |t| t.replace("\\\"", "\""))
        })
        .collect()
}

impl Reply {
    /// The body as JSON; panics with the whole reply if it is not JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("reply is not JSON ({e}):\n{}", self.describe()))
    }

    /// The body as JSON, or `Value::Null` when it is not JSON.
    pub fn json_or_null(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    /// Request line, status, content type and (the start of) the body.
    pub fn describe(&self) -> String {
        let body: String = self.body.chars().take(4000).collect();
        let cut = if body.len() < self.body.len() {
            " [cut]"
        } else {
            ""
        };
        format!(
            "{} -> {} ({}, {}), body{cut}:\n{body}",
            self.request, self.status, self.content_type, self.http_version
        )
    }

    /// Asserts that the body contains `needle`; the failure shows the whole reply.
    #[track_caller]
    pub fn assert_body_has(&self, needle: &str) {
        assert!(self.body.contains(needle), "{}", self.describe());
    }

    /// Requires a Failure `Status` with HTTP `code` and `reason` whose message contains each of
    /// `needles`; returns the message. A failure prints the reply and `logs()` (the log tail of
    /// the component that answered).
    #[track_caller]
    pub fn failure_naming(
        &self,
        code: u16,
        reason: &str,
        needles: &[&str],
        logs: impl Fn() -> String,
    ) -> String {
        let context = || format!("{}\n{}", self.describe(), logs());
        assert_eq!(self.status, code, "HTTP status\n{}", context());
        let message = crate::objects::failure_status(&self.json(), code, reason)
            .unwrap_or_else(|e| panic!("not the expected Status: {e}\n{}", context()));
        for needle in needles {
            assert!(
                message.contains(needle),
                "message should name {needle:?}: {message}\n{}",
                context()
            );
        }
        message
    }
}

/// Installs ring as rustls' process-wide crypto provider, once (reqwest is built with
/// `rustls-no-provider`).
pub fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Err means another provider is already installed, which is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// An HTTPS client bound to one endpoint.
#[derive(Clone)]
pub struct AsyncApi {
    client: reqwest::Client,
    endpoint: Endpoint,
}

impl AsyncApi {
    /// Builds the client; panics on bad PEM (the harness's own files, so a loud failure).
    pub fn new(endpoint: Endpoint) -> AsyncApi {
        install_crypto_provider();
        let ca = Certificate::from_pem(&endpoint.ca_pem)
            .unwrap_or_else(|e| panic!("CA certificate is not PEM: {e}"));
        let mut builder = reqwest::Client::builder().tls_certs_only([ca]);
        if let Credentials::ClientCert(pem) = &endpoint.credentials {
            let identity = Identity::from_pem(pem)
                .unwrap_or_else(|e| panic!("client certificate + key is not usable PEM: {e}"));
            builder = builder.identity(identity);
        }
        if let Some((host, addr)) = &endpoint.resolve {
            builder = builder.resolve(host, *addr);
        }
        if endpoint.http2_only {
            builder = builder.http2_prior_knowledge();
        }
        let client = builder
            .build()
            .unwrap_or_else(|e| panic!("cannot build HTTPS client: {e}"));
        AsyncApi { client, endpoint }
    }

    pub fn url(&self) -> &str {
        &self.endpoint.url
    }

    fn request(&self, req: &Req) -> reqwest::RequestBuilder {
        let url = format!("{}{}", self.endpoint.url, req.path);
        let mut rb = self.client.request(req.method.clone(), &url);
        if let Credentials::Bearer(token) = &self.endpoint.credentials {
            rb = rb.bearer_auth(token);
        }
        for (k, v) in &req.headers {
            rb = rb.header(k, v);
        }
        rb
    }

    /// Sends `req` and returns the response with its body still unread (for watches).
    pub async fn open(&self, req: &Req) -> Result<reqwest::Response, String> {
        let mut rb = self.request(req);
        if let Some(body) = &req.body {
            rb = rb.body(body.clone());
        }
        rb.send()
            .await
            .map_err(|e| format!("{} failed: {}", req.line(), error_chain(&e)))
    }

    /// Sends `req` with `body` streamed in its place (e.g. a body the test holds back), and
    /// returns the response with its body unread.
    pub async fn open_streaming(
        &self,
        req: &Req,
        body: reqwest::Body,
    ) -> Result<reqwest::Response, String> {
        self.request(req)
            .body(body)
            .send()
            .await
            .map_err(|e| format!("{} failed: {}", req.line(), error_chain(&e)))
    }

    /// Sends `req` and reads the whole body.
    pub async fn send(&self, req: &Req) -> Result<Reply, String> {
        let resp = self.open(req).await?;
        let status = resp.status().as_u16();
        let http_version = format!("{:?}", resp.version());
        let content_type = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse().ok());
        let warnings = warnings(resp.headers());
        let body = resp.text().await.map_err(|e| {
            format!(
                "{}: reading the body failed: {}",
                req.line(),
                error_chain(&e)
            )
        })?;
        Ok(Reply {
            request: req.line(),
            status,
            content_type,
            http_version,
            retry_after,
            warnings,
            body,
        })
    }
}

/// An error and its sources, one line (reqwest hides the TLS reason in the sources).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}
