//! The ingress listeners: plain HTTP and TLS on the configured host ports, each connection
//! served by hyper's automatic server (HTTP/1.1 or HTTP/2 — by preface in clear text, by ALPN
//! `h2`/`http/1.1` over TLS) with upgrades enabled, every request handed to the
//! [`Proxy`](super::forward::Proxy).

use std::net::SocketAddr;
use std::sync::Arc;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use super::forward::{Listener, Proxy};

/// A request head must arrive within this long of the connection's first byte or the previous
/// response (nginx's `client_header_timeout` is 60 s).
const HEADER_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Serves one connection until it closes.
async fn serve_connection<I>(io: I, peer: SocketAddr, listener: Listener, proxy: Arc<Proxy>)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let svc = service_fn(move |req| proxy.clone().handle(peer, listener, req));
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // A client that opens a connection and trickles a request head is cut off (slowloris).
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    builder.http2().timer(TokioTimer::new());
    if let Err(e) = builder
        .serve_connection_with_upgrades(TokioIo::new(io), svc)
        .await
    {
        tracing::trace!(%peer, error = %e, "ingress: connection ended");
    }
}

/// Accepts connections on `tcp` until `shutdown`; TLS first when `tls` is given. Open
/// connections are not cut at shutdown: the process ending ends them.
pub async fn serve(
    tcp: TcpListener,
    tls: Option<TlsAcceptor>,
    proxy: Arc<Proxy>,
    shutdown: CancellationToken,
) {
    let port = tcp.local_addr().map(|a| a.port()).unwrap_or_default();
    let listener = Listener {
        https: tls.is_some(),
        port,
    };
    loop {
        let (stream, peer) = tokio::select! {
            _ = shutdown.cancelled() => return,
            accepted = tcp.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors and the like: pass, as the next accept may work.
                    tracing::warn!(port, error = %e, "ingress: accept failed");
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let (proxy, tls) = (proxy.clone(), tls.clone());
        tokio::spawn(async move {
            match tls {
                None => serve_connection(stream, peer, listener, proxy).await,
                Some(acceptor) => match acceptor.accept(stream).await {
                    Ok(s) => serve_connection(s, peer, listener, proxy).await,
                    Err(e) => tracing::debug!(%peer, error = %e, "ingress: TLS handshake failed"),
                },
            }
        });
    }
}
