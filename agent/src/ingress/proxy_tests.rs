//! The proxy in process: a listener on a free loopback port, a route table planned from an
//! Ingress, and a local upstream that answers with the request it got.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Bytes;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::Ingress;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::routes::{Backends, plan_routes};
use super::{Snapshot, listener, proxy};

/// An upstream answering each request with its head: the request line, then `name: value`
/// lines in order.
async fn echo_upstream() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = l.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let svc = service_fn(|req: Request<hyper::body::Incoming>| async move {
                    let mut text = format!("{} {}\n", req.method(), req.uri());
                    for (k, v) in req.headers() {
                        text.push_str(&format!("{k}: {}\n", v.to_str().unwrap_or("?")));
                    }
                    Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::from(text))))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), svc)
                    .await;
            });
        }
    });
    addr
}

/// A snapshot routing `shop.test` to Service `web` (endpoints `eps`) and `/empty` to a
/// Service without endpoints.
fn snapshot(eps: &[SocketAddr]) -> Snapshot {
    let ing: Ingress = serde_json::from_value(json!({
    "metadata": {"namespace": "default", "name": "shop"},
    "spec": {"ingressClassName": "berth", "rules": [{"host": "shop.test", "http": {"paths": [
        {"path": "/", "pathType": "Prefix",
         "backend": {"service": {"name": "web", "port": {"number": 80}}}},
        {"path": "/empty", "pathType": "Prefix",
         "backend": {"service": {"name": "none", "port": {"number": 80}}}},
    ]}}]}}))
    .unwrap();
    let svc: Service = serde_json::from_value(
        json!({"metadata": {"namespace": "default", "name": "web"}, "spec": {"ports": [{"port": 80}]}}),
    )
    .unwrap();
    // One slice per endpoint: a slice has one port for all its endpoints.
    let slices: BTreeMap<String, EndpointSlice> = eps
        .iter()
        .enumerate()
        .map(|(i, ep)| {
            let slice = serde_json::from_value(json!({
                "metadata": {"namespace": "default", "name": format!("web-{i}"),
                             "labels": {"kubernetes.io/service-name": "web"}},
                "addressType": "IPv4",
                "ports": [{"port": ep.port()}],
                "endpoints": [{"addresses": [ep.ip().to_string()], "conditions": {"ready": true}}],
            }))
            .unwrap();
            (format!("default/web-{i}"), slice)
        })
        .collect();
    let services = BTreeMap::from([("default/web".to_string(), svc)]);
    Snapshot {
        routes: plan_routes(
            &[ing],
            &[],
            &Backends {
                services: &services,
                slices: &slices,
            },
        ),
        certificates: Default::default(),
        synced: true,
    }
}

/// Serves `snapshot` on a free port; the port.
async fn serve(snapshot: Snapshot) -> (SocketAddr, watch::Sender<Arc<Snapshot>>) {
    let (tx, rx) = watch::channel(Arc::new(snapshot));
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(listener::serve(
        l,
        None,
        proxy(rx),
        CancellationToken::new(),
    ));
    (addr, tx)
}

/// `GET path` with `Host: host` and extra headers on a new connection: status and body.
async fn get(proxy: SocketAddr, host: &str, path: &str, extra: &[(&str, &str)]) -> (u16, String) {
    let tcp = tokio::net::TcpStream::connect(proxy).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut req = Request::get(path).header("host", host);
    for (k, v) in extra {
        req = req.header(*k, *v);
    }
    let resp = send
        .send_request(req.body(Empty::<Bytes>::new()).unwrap())
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn a_request_reaches_its_upstream_with_forwarded_headers_and_without_hop_by_hop_ones() {
    let up = echo_upstream().await;
    let (addr, _tx) = serve(snapshot(&[up])).await;
    let (status, body) = get(
        addr,
        "Shop.Test:8080",
        "/a/b?x=1",
        &[
            ("x-forwarded-for", "6.6.6.6"),
            ("connection", "keep-alive, x-secret"),
            ("x-secret", "1"),
            ("accept", "text/plain"),
        ],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let lines: Vec<&str> = body.lines().collect();
    assert_eq!(lines[0], "GET /a/b?x=1");
    for want in [
        "host: Shop.Test:8080",
        "x-forwarded-for: 127.0.0.1",
        "x-real-ip: 127.0.0.1",
        "x-forwarded-host: Shop.Test:8080",
        &format!("x-forwarded-port: {}", addr.port()),
        "x-forwarded-proto: http",
        "accept: text/plain",
    ] {
        assert!(lines.contains(&want), "{want} in\n{body}");
    }
    assert!(
        !body.contains("6.6.6.6"),
        "the client's own X-Forwarded-For is replaced"
    );
    assert!(
        !body.contains("x-secret"),
        "headers Connection names are dropped"
    );
}

#[tokio::test]
async fn no_route_is_404_no_endpoint_503_and_a_refusing_endpoint_is_skipped() {
    let up = echo_upstream().await;
    // A port nothing listens on: bound, then closed.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (addr, tx) = serve(snapshot(&[closed, up])).await;
    assert_eq!(get(addr, "other.test", "/", &[]).await.0, 404);
    assert_eq!(get(addr, "shop.test", "/empty", &[]).await.0, 503);
    // New connections start at each endpoint in turn: every one gets an answer.
    for _ in 0..4 {
        assert_eq!(get(addr, "shop.test", "/", &[]).await.0, 200);
    }
    // Only the refusing endpoint: a bad gateway.
    tx.send_replace(Arc::new(snapshot(&[closed])));
    assert_eq!(get(addr, "shop.test", "/", &[]).await.0, 502);
}
