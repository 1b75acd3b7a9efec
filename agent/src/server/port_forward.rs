//! `/portForward/{ns}/{pod}`: `kubectl port-forward` as the kubelet serves it. The connection
//! is upgraded to SPDY/3.1 (`portforward.k8s.io`); kubectl opens an error stream and a data
//! stream per local connection, paired by their `requestID` header, and each pair is joined
//! to a TCP connection to `localhost:<port>` inside the pod's network namespace (so a server
//! listening on the pod's loopback is reachable, as upstream). A port nothing listens on is
//! reported on the error stream in the kubelet's words. A WebSocket upgrade is served by
//! `port_forward_ws.rs` (SPDY tunnelled in it, or the channel protocol).

use std::collections::HashMap;
use std::time::Duration;

use axum::body::Body;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{FromRequest, Path, RawQuery, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::port_forward_ws;
use super::spdy::{Session, Stream, header as spdy_header};
use super::{PodNetwork, SharedBackend};

/// The protocol kubectl asks for.
pub const PROTOCOL: &str = "portforward.k8s.io";

/// Whether a request asks to upgrade to SPDY/3.1.
pub fn wants_spdy(headers: &HeaderMap) -> bool {
    headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("SPDY/3.1"))
}

/// The `X-Stream-Protocol-Version` values a client offers, in its order.
pub fn offered_protocols(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all("x-stream-protocol-version")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|p| p.trim().to_string()))
        .filter(|p| !p.is_empty())
        .collect()
}

/// Runs `serve` on the connection once the 101 has gone out, in a task of its own. A failed
/// upgrade (the client went away) ends it quietly.
pub fn on_upgrade<F, Fut>(req: &mut Request, serve: F)
where
    F: FnOnce(TokioIo<Upgraded>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let upgrade = hyper::upgrade::on(req);
    tokio::spawn(async move {
        if let Ok(io) = upgrade.await {
            serve(TokioIo::new(io)).await;
        }
    });
}

/// A 101 switching to SPDY/3.1 with `protocol`.
pub fn switching(protocol: &str) -> Response {
    let mut r = Response::new(Body::empty());
    *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = r.headers_mut();
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    h.insert(header::UPGRADE, HeaderValue::from_static("SPDY/3.1"));
    if let Ok(v) = HeaderValue::from_str(protocol) {
        h.insert("x-stream-protocol-version", v);
    }
    r
}

/// `/portForward/{ns}/{pod}`: SPDY/3.1 for a client that asks to upgrade to it; else a
/// WebSocket carrying SPDY (`SPDY/3.1+portforward.k8s.io`, kubectl 1.31+) or the channel
/// protocol (`v4.channel.k8s.io`, the Python client).
pub async fn serve(
    State(backend): State<SharedBackend>,
    Path((ns, pod)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    req: Request,
) -> Response {
    if wants_spdy(req.headers()) {
        return serve_spdy(backend, ns, pod, req).await;
    }
    let tunnel = port_forward_ws::offers_tunnel(req.headers());
    let ws = match WebSocketUpgrade::from_request(req, &backend).await {
        Ok(ws) => ws,
        Err(_) => {
            return (
                StatusCode::BAD_REQUEST,
                "port-forward needs an upgrade to SPDY/3.1 or WebSocket",
            )
                .into_response();
        }
    };
    let ports = if tunnel {
        Vec::new()
    } else {
        match port_forward_ws::ports(query.as_deref().unwrap_or_default()) {
            Ok(p) => p,
            Err(why) => return (StatusCode::BAD_REQUEST, why).into_response(),
        }
    };
    let target = match backend.pod_netns(&ns, &pod).await {
        Ok(t) => t,
        Err(e) => return (StatusCode::NOT_FOUND, e).into_response(),
    };
    if tunnel {
        return ws
            .protocols([port_forward_ws::TUNNEL_PROTOCOL])
            .on_upgrade(move |socket| port_forward_ws::tunnel(socket, target, pod));
    }
    let ws = ws.protocols(port_forward_ws::CHANNEL_PROTOCOLS);
    let base64 = ws
        .selected_protocol()
        .is_some_and(|p| p.as_bytes() == port_forward_ws::BASE64_PROTOCOL.as_bytes());
    ws.on_upgrade(move |socket| port_forward_ws::channels(socket, base64, ports, target, pod))
}

async fn serve_spdy(backend: SharedBackend, ns: String, pod: String, mut req: Request) -> Response {
    if !offered_protocols(req.headers())
        .iter()
        .any(|p| p == PROTOCOL)
    {
        return (
            StatusCode::FORBIDDEN,
            format!("unable to upgrade: unable to negotiate protocol: client supports {:?}, server supports [\"{PROTOCOL}\"]", offered_protocols(req.headers())),
        )
            .into_response();
    }
    let target = match backend.pod_netns(&ns, &pod).await {
        Ok(t) => t,
        Err(e) => return (StatusCode::NOT_FOUND, e).into_response(),
    };
    on_upgrade(&mut req, move |io| forward(Session::start(io), target, pod));
    switching(PROTOCOL)
}

/// Pairs the streams kubectl opens and forwards each pair.
pub(super) async fn forward(mut session: Session, target: PodNetwork, pod: String) {
    let mut pending: HashMap<String, (Option<Stream>, Option<Stream>)> = HashMap::new();
    while let Some(stream) = session.streams.recv().await {
        let request = spdy_header(&stream.headers, "requestID")
            .unwrap_or_default()
            .to_string();
        let kind = spdy_header(&stream.headers, "streamType").unwrap_or_default();
        let slot = pending.entry(request.clone()).or_default();
        match kind {
            "error" => slot.0 = Some(stream),
            "data" => slot.1 = Some(stream),
            _ => {
                stream.writer.finish().await;
                continue;
            }
        }
        if slot.0.is_some()
            && slot.1.is_some()
            && let Some((Some(error), Some(data))) = pending.remove(&request)
        {
            tokio::spawn(pair(error, data, target.clone(), pod.clone()));
        }
    }
}

/// One forwarded connection.
async fn pair(error: Stream, data: Stream, target: PodNetwork, pod: String) {
    drop(error.incoming);
    let port = spdy_header(&data.headers, "port")
        .and_then(|p| p.parse::<u16>().ok())
        .unwrap_or(0);
    let conn = match dial(&target.netns, port).await {
        Ok(c) => c,
        Err(e) => {
            let msg = format!(
                "error forwarding port {port} to pod {pod}, uid {}: {e}",
                target.uid
            );
            tracing::info!(%pod, port, error = %e, "port-forward");
            error.writer.write(msg.as_bytes()).await;
            error.writer.finish().await;
            data.writer.finish().await;
            return;
        }
    };
    let (mut from_pod, mut to_pod) = conn.into_split();
    let Stream {
        mut incoming,
        writer,
        ..
    } = data;
    let upstream = tokio::spawn(async move {
        while let Some(bytes) = incoming.recv().await {
            if to_pod.write_all(&bytes).await.is_err() {
                return;
            }
        }
        // The client closed its side: so does the connection to the pod.
        let _ = to_pod.shutdown().await;
    });
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        match from_pod.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if !writer.write(&buf[..n]).await {
                    break;
                }
            }
        }
    }
    writer.finish().await;
    error.writer.finish().await;
    upstream.abort();
}

/// A TCP connection to `localhost:port` in the network namespace at `netns`.
pub(super) async fn dial(
    netns: &std::path::Path,
    port: u16,
) -> Result<tokio::net::TcpStream, String> {
    dial_addr(netns, std::net::SocketAddr::from(([127, 0, 0, 1], port))).await
}

/// A TCP connection to `addr` from the network namespace at `netns`, made on a thread of its
/// own that enters the namespace and ends (a socket keeps the namespace it was made in).
pub(super) async fn dial_addr(
    netns: &std::path::Path,
    addr: std::net::SocketAddr,
) -> Result<tokio::net::TcpStream, String> {
    let netns = netns.to_path_buf();
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let result = (|| {
            let ns = std::fs::File::open(&netns)
                .map_err(|e| format!("opening {}: {e}", netns.display()))?;
            nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET)
                .map_err(|e| format!("entering the pod's network namespace: {e}"))?;
            let s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(10))
                .map_err(|e| format!("dial tcp {addr}: connect: {}", go_errno_text(&e)))?;
            s.set_nonblocking(true).map_err(|e| e.to_string())?;
            Ok::<_, String>(s)
        })();
        let _ = tx.send(result);
    });
    let std = rx
        .await
        .map_err(|_| "the dialing thread died".to_string())??;
    tokio::net::TcpStream::from_std(std).map_err(|e| e.to_string())
}

/// Go's words for the common connect errors (`connection refused`).
fn go_errno_text(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connection refused".into(),
        std::io::ErrorKind::TimedOut => "i/o timeout".into(),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn protocols_are_read_from_every_header_value_in_order() {
        let mut h = HeaderMap::new();
        h.append(
            "x-stream-protocol-version",
            HeaderValue::from_static("v4.channel.k8s.io"),
        );
        h.append(
            "x-stream-protocol-version",
            HeaderValue::from_static("v3.channel.k8s.io, channel.k8s.io"),
        );
        assert_eq!(
            offered_protocols(&h),
            ["v4.channel.k8s.io", "v3.channel.k8s.io", "channel.k8s.io"]
        );
        h.insert(header::UPGRADE, HeaderValue::from_static("spdy/3.1"));
        assert!(wants_spdy(&h));
    }

    #[tokio::test]
    async fn dialing_in_our_own_namespace_reaches_a_loopback_listener() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binds");
        let port = listener.local_addr().expect("addr").port();
        let me = PathBuf::from("/proc/self/ns/net");
        let mut conn = dial(&me, port).await.expect("dials");
        let (mut accepted, _) = listener.accept().await.expect("accepts");
        conn.write_all(b"hi").await.expect("writes");
        let mut got = [0u8; 2];
        accepted.read_exact(&mut got).await.expect("reads");
        assert_eq!(&got, b"hi");
        drop(listener);
        let refused = dial(&me, port).await.expect_err("nothing listens");
        assert!(
            refused.ends_with("connect: connection refused"),
            "{refused}"
        );
    }
}
