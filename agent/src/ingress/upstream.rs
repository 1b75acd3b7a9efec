//! Connections to upstreams: the proxy's pooled HTTP/1.1 client dials a Service port's ready
//! endpoints, named in the request URI by [`authority`] (`PORT.SERVICE.NAMESPACE.eHASH`), so
//! idle connections are reused per upstream and set of ready endpoints (as nginx's upstream
//! `keepalive`). A new connection
//! goes to the next endpoint in turn (round robin); one that cannot be connected to is
//! skipped for the next, so a request is retried on another ready endpoint when the first
//! refuses or does not answer within [`CONNECT_TIMEOUT`] — before any byte of it is sent,
//! so a request with a body is retried as safely as one without.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::Uri;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::Snapshot;
use super::routes::Upstream;

/// How long one endpoint gets to accept a connection before the next is tried.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// The URI authority naming `up`'s pool: `PORT.SERVICE.NAMESPACE.eHASH` (DNS labels all),
/// where HASH is of the ready endpoints: when they change, requests go to a new pool and the
/// old one's idle connections (to an endpoint that may no longer be ready) are never used
/// again, and close after the idle timeout.
pub fn authority(up: &Upstream) -> String {
    use std::hash::{Hash, Hasher};
    let port = if up.port.is_empty() { "none" } else { &up.port };
    let mut h = std::collections::hash_map::DefaultHasher::new();
    up.endpoints.hash(&mut h);
    format!(
        "{port}.{}.{}.e{:016x}",
        up.service,
        up.namespace,
        h.finish()
    )
}

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("no upstream named {0}")]
    Unknown(String),
    #[error("no endpoint of {upstream} accepted a connection: {last}")]
    Refused { upstream: String, last: String },
}

/// Dials the endpoints of the upstream a URI names, from the current snapshot.
#[derive(Clone)]
pub struct EndpointConnector {
    pub snapshot: watch::Receiver<Arc<Snapshot>>,
    pub next: Arc<AtomicUsize>,
}

impl EndpointConnector {
    fn endpoints(&self, authority: &str) -> Option<Vec<SocketAddr>> {
        self.snapshot
            .borrow()
            .routes
            .upstreams()
            .find_map(|u| (self::authority(u) == authority).then(|| u.endpoints.clone()))
    }
}

async fn connect_any(
    name: String,
    endpoints: Vec<SocketAddr>,
    start: usize,
) -> Result<TokioIo<TcpStream>, ConnectError> {
    let mut last = String::from("no ready endpoint");
    for i in 0..endpoints.len() {
        let addr = endpoints[(start + i) % endpoints.len()];
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => {
                let _ = stream.set_nodelay(true);
                return Ok(TokioIo::new(stream));
            }
            Ok(Err(e)) => last = format!("{addr}: {e}"),
            Err(_) => last = format!("{addr}: no answer within {CONNECT_TIMEOUT:?}"),
        }
        tracing::debug!(upstream = %name, error = %last, "ingress: endpoint refused; trying the next");
    }
    Err(ConnectError::Refused {
        upstream: name,
        last,
    })
}

impl tower::Service<Uri> for EndpointConnector {
    type Response = TokioIo<TcpStream>;
    type Error = ConnectError;
    type Future = Pin<Box<dyn Future<Output = Result<TokioIo<TcpStream>, ConnectError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), ConnectError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let name = uri.host().unwrap_or_default().to_string();
        let endpoints = self.endpoints(&name);
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        Box::pin(async move {
            let endpoints = endpoints.ok_or_else(|| ConnectError::Unknown(name.clone()))?;
            connect_any(name, endpoints, start).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_refused_endpoint_is_skipped_for_the_next() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let good = listener.local_addr().unwrap();
        // A port nothing listens on: bound, then closed.
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        for start in 0..2 {
            let io = connect_any("web".into(), vec![closed, good], start)
                .await
                .unwrap();
            assert_eq!(io.inner().peer_addr().unwrap(), good);
        }
        let none = connect_any("web".into(), vec![closed], 0).await;
        assert!(matches!(none, Err(ConnectError::Refused { .. })));
    }
}
