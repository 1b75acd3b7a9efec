//! The API client the agent (and tests) use: typed CRUD, status writes, merge patches and
//! watch streams against a Berth (or Kubernetes) API server, over TLS that trusts only the
//! cluster CA and authenticates with a client certificate or a bearer token. Given several
//! servers (one cluster's controllers), it fails over between them (see [`failover`]).

pub mod any_certificate;
mod error;
pub mod failover;
mod resuming;
mod watch;

pub use error::ClientError;
pub use resuming::ResumingWatch;
pub use watch::{WatchEvent, WatchStream};

use crate::resource::ResourceType;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// How the client proves who it is.
#[derive(Clone)]
pub enum Credentials {
    /// PEM client certificate and key.
    Certificate {
        cert_pem: String,
        key_pem: String,
    },
    Bearer(String),
    None,
}

/// Options of a list or watch.
#[derive(Debug, Clone, Default)]
pub struct ListParams {
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub limit: Option<usize>,
    pub timeout_seconds: Option<u64>,
}

impl ListParams {
    fn query(&self) -> Vec<(String, String)> {
        let mut q = Vec::new();
        if let Some(l) = &self.label_selector {
            q.push(("labelSelector".to_string(), l.clone()));
        }
        if let Some(f) = &self.field_selector {
            q.push(("fieldSelector".to_string(), f.clone()));
        }
        if let Some(l) = self.limit {
            q.push(("limit".to_string(), l.to_string()));
        }
        if let Some(t) = self.timeout_seconds {
            q.push(("timeoutSeconds".to_string(), t.to_string()));
        }
        q
    }
}

/// A list answer: items and the list's resourceVersion.
#[derive(Debug, Clone)]
pub struct ObjectList<T> {
    pub items: Vec<T>,
    pub resource_version: String,
}

/// The API client. Cheap to clone; clones share the choice of server and the connections
/// (swapped together by [`Client::set_client_certificate`]).
#[derive(Clone)]
pub struct Client {
    http: Arc<std::sync::RwLock<reqwest::Client>>,
    ca_pem: Arc<str>,
    servers: Arc<failover::Servers>,
    bearer: Option<Arc<str>>,
}

fn tls_config(ca_pem: &str, creds: &Credentials) -> Result<rustls::ClientConfig, ClientError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut ca_pem.as_bytes()) {
        let cert = cert.map_err(|e| ClientError::Config(format!("CA certificate: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| ClientError::Config(format!("CA certificate: {e}")))?;
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ClientError::Config(e.to_string()))?
        .with_root_certificates(roots);
    let mut config = match creds {
        Credentials::Certificate { cert_pem, key_pem } => {
            let certs = rustls_pemfile::certs(&mut cert_pem.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| ClientError::Config(format!("client certificate: {e}")))?;
            let key = rustls_pemfile::private_key(&mut key_pem.as_bytes())
                .map_err(|e| ClientError::Config(format!("client key: {e}")))?
                .ok_or_else(|| ClientError::Config("no client key".to_string()))?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| ClientError::Config(e.to_string()))?
        }
        _ => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// An HTTP client trusting `ca_pem` and presenting `creds`' certificate, if any. Keep-alive
/// pings find a server that vanished without closing its connections (a host powered off):
/// the watches over them fail, and resume elsewhere.
fn http_client(ca_pem: &str, creds: &Credentials) -> Result<reqwest::Client, ClientError> {
    let tls = tls_config(ca_pem, creds)?;
    reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .connect_timeout(Duration::from_secs(10))
        .tcp_keepalive(Duration::from_secs(30))
        .http2_keep_alive_interval(Duration::from_secs(10))
        .http2_keep_alive_timeout(Duration::from_secs(10))
        .http2_keep_alive_while_idle(true)
        .build()
        .map_err(|e| ClientError::Config(e.to_string()))
}

/// `body` (serialized once, sent to each server tried) as the request's JSON.
fn json_body(r: reqwest::RequestBuilder, body: &bytes::Bytes) -> reqwest::RequestBuilder {
    r.header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body.clone())
}

fn collection_path(rt: &ResourceType, ns: Option<&str>) -> String {
    let root = if rt.group.is_empty() {
        format!("/api/{}", rt.version)
    } else {
        format!("/apis/{}/{}", rt.group, rt.version)
    };
    match (rt.namespaced, ns) {
        (true, Some(ns)) => format!("{root}/namespaces/{ns}/{}", rt.plural),
        _ => format!("{root}/{}", rt.plural),
    }
}

/// The path of one object, or of its `status` subresource when `status` is true.
fn object_path(rt: &ResourceType, ns: Option<&str>, name: &str, status: bool) -> String {
    let subresource = if status { "/status" } else { "" };
    format!("{}/{name}{subresource}", collection_path(rt, ns))
}

impl Client {
    /// A client for `server` (`https://host:port`) trusting only `ca_pem`.
    pub fn new(server: &str, ca_pem: &str, creds: Credentials) -> Result<Client, ClientError> {
        Client::with_servers(&[server], ca_pem, creds)
    }

    /// A client for the servers of one cluster (`https://host:port` each), tried in order: it
    /// sticks with one that answers and moves on to the next when it fails (see [`failover`]).
    pub fn with_servers<S: AsRef<str>>(
        servers: &[S],
        ca_pem: &str,
        creds: Credentials,
    ) -> Result<Client, ClientError> {
        let servers = failover::Servers::new(servers)
            .ok_or_else(|| ClientError::Config("no API server given".to_string()))?;
        let http = http_client(ca_pem, &creds)?;
        let bearer = match creds {
            Credentials::Bearer(t) => Some(Arc::from(t.as_str())),
            _ => None,
        };
        Ok(Client {
            http: Arc::new(std::sync::RwLock::new(http)),
            ca_pem: Arc::from(ca_pem),
            servers: Arc::new(servers),
            bearer,
        })
    }

    /// Authenticates from now on with a new client certificate (a renewed one), for this
    /// client and all its clones: later requests go over new connections that present it,
    /// while requests under way (open watches) keep the connections they have until they end.
    pub fn set_client_certificate(&self, cert_pem: &str, key_pem: &str) -> Result<(), ClientError> {
        let http = http_client(
            &self.ca_pem,
            &Credentials::Certificate {
                cert_pem: cert_pem.to_string(),
                key_pem: key_pem.to_string(),
            },
        )?;
        // A poisoned lock only means a writer panicked between two whole values.
        *self.http.write().unwrap_or_else(|p| p.into_inner()) = http;
        Ok(())
    }

    /// The connections requests go over now.
    fn http(&self) -> reqwest::Client {
        self.http.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The server requests go to now.
    pub fn server(&self) -> Arc<str> {
        self.servers.current().1
    }

    /// Every server, in the order given.
    pub fn servers(&self) -> &[Arc<str>] {
        self.servers.urls()
    }

    /// Sends `method path` (the request finished by `build`) to the current server, moving on
    /// to the next server and sending it again there as [`failover::decide`] says.
    async fn execute(
        &self,
        method: reqwest::Method,
        path: &str,
        build: impl Fn(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, ClientError> {
        use failover::{Decision, Failure};
        let idempotent = matches!(
            method,
            reqwest::Method::GET
                | reqwest::Method::HEAD
                | reqwest::Method::PUT
                | reqwest::Method::DELETE
                | reqwest::Method::OPTIONS
        );
        let (mut index, mut base) = self.servers.current();
        let mut tried = 1;
        loop {
            let mut req = self.http().request(method.clone(), format!("{base}{path}"));
            if let Some(t) = &self.bearer {
                req = req.bearer_auth(t);
            }
            let result = build(req).send().await;
            let (failure, why) = match &result {
                Ok(resp) if matches!(resp.status().as_u16(), 502..=504) => (
                    Failure::Status(resp.status().as_u16()),
                    resp.status().to_string(),
                ),
                Ok(_) => return result.map_err(ClientError::Http),
                Err(e) if e.is_connect() => (Failure::Connect, e.to_string()),
                Err(e) => (Failure::Transport, e.to_string()),
            };
            match failover::decide(failure, idempotent, tried < self.servers.len()) {
                Decision::Return => return result.map_err(ClientError::Http),
                Decision::SwitchAndReturn => {
                    self.servers.move_on(index, &why);
                    return result.map_err(ClientError::Http);
                }
                Decision::SwitchAndRetry => {
                    (index, base) = self.servers.move_on(index, &why);
                    tried += 1;
                }
            }
        }
    }

    async fn send<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        build: impl Fn(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
    ) -> Result<T, ClientError> {
        let resp = self.execute(method, path, build).await?;
        let status = resp.status();
        let bytes = resp.bytes().await.map_err(ClientError::Http)?;
        if !status.is_success() {
            return Err(ClientError::from_status(status.as_u16(), &bytes));
        }
        serde_json::from_slice(&bytes).map_err(ClientError::Decode)
    }

    /// GET of one object; `None` when it does not exist.
    pub async fn get<T: DeserializeOwned>(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
    ) -> Result<Option<T>, ClientError> {
        let path = format!("{}/{name}", collection_path(rt, ns));
        match self.send(reqwest::Method::GET, &path, |r| r).await {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub async fn list<T: DeserializeOwned>(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        params: &ListParams,
    ) -> Result<ObjectList<T>, ClientError> {
        let query = params.query();
        let v: Value = self
            .send(reqwest::Method::GET, &collection_path(rt, ns), |r| {
                r.query(&query)
            })
            .await?;
        let resource_version = v
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let items = match v.get("items") {
            Some(Value::Array(items)) => items
                .iter()
                .map(|i| serde_json::from_value(i.clone()))
                .collect::<Result<Vec<T>, _>>()
                .map_err(ClientError::Decode)?,
            _ => Vec::new(),
        };
        Ok(ObjectList {
            items,
            resource_version,
        })
    }

    pub async fn create<T: Serialize + DeserializeOwned>(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        obj: &T,
    ) -> Result<T, ClientError> {
        let body = bytes::Bytes::from(serde_json::to_vec(obj).map_err(ClientError::Encode)?);
        self.send(reqwest::Method::POST, &collection_path(rt, ns), |r| {
            json_body(r, &body)
        })
        .await
    }

    /// POST to a subresource of an object (`serviceaccounts/<name>/token`, `pods/<name>/eviction`).
    pub async fn create_subresource<B: Serialize, T: DeserializeOwned>(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        subresource: &str,
        body: &B,
    ) -> Result<T, ClientError> {
        let path = format!("{}/{name}/{subresource}", collection_path(rt, ns));
        let body = bytes::Bytes::from(serde_json::to_vec(body).map_err(ClientError::Encode)?);
        self.send(reqwest::Method::POST, &path, |r| json_body(r, &body))
            .await
    }

    /// PUT of the object (or of its `status` subresource when `status` is true).
    pub async fn replace<T: Serialize + DeserializeOwned>(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        obj: &T,
        status: bool,
    ) -> Result<T, ClientError> {
        let path = object_path(rt, ns, name, status);
        let body = bytes::Bytes::from(serde_json::to_vec(obj).map_err(ClientError::Encode)?);
        self.send(reqwest::Method::PUT, &path, |r| json_body(r, &body))
            .await
    }

    /// A JSON merge patch of the object (or of its `status` subresource).
    pub async fn merge_patch<T: DeserializeOwned>(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        patch: &Value,
        status: bool,
    ) -> Result<T, ClientError> {
        let path = object_path(rt, ns, name, status);
        let body = patch.to_string();
        self.send(reqwest::Method::PATCH, &path, |r| {
            r.header(
                reqwest::header::CONTENT_TYPE,
                "application/merge-patch+json",
            )
            .body(body.clone())
        })
        .await
    }

    /// DELETE with DeleteOptions (e.g. `{"gracePeriodSeconds":0}`); a missing object is fine.
    pub async fn delete(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        options: &Value,
    ) -> Result<(), ClientError> {
        let path = format!("{}/{name}", collection_path(rt, ns));
        let body = bytes::Bytes::from(serde_json::to_vec(options).map_err(ClientError::Encode)?);
        match self
            .send::<Value>(reqwest::Method::DELETE, &path, |r| json_body(r, &body))
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Watches from `resource_version` (empty: current state first, as ADDED events).
    pub async fn watch<T: DeserializeOwned + Send + 'static>(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        params: &ListParams,
        resource_version: &str,
    ) -> Result<WatchStream<T>, ClientError> {
        let mut query = params.query();
        query.push(("watch".to_string(), "true".to_string()));
        query.push(("allowWatchBookmarks".to_string(), "true".to_string()));
        if !resource_version.is_empty() {
            query.push(("resourceVersion".to_string(), resource_version.to_string()));
        }
        let resp = self
            .execute(reqwest::Method::GET, &collection_path(rt, ns), |r| {
                r.query(&query)
            })
            .await?;
        let status = resp.status();
        if !status.is_success() {
            let bytes = resp.bytes().await.map_err(ClientError::Http)?;
            return Err(ClientError::from_status(status.as_u16(), &bytes));
        }
        Ok(WatchStream::new(resp))
    }

    /// A raw GET (for `/version`, subresources the typed calls do not cover, tests).
    pub async fn get_raw(&self, path: &str) -> Result<(u16, Vec<u8>), ClientError> {
        let resp = self.execute(reqwest::Method::GET, path, |r| r).await?;
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await.map_err(ClientError::Http)?;
        Ok((status, bytes.to_vec()))
    }
}
