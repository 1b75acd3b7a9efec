//! `/tunnel/{ns}/{pod}?address=IP&port=N`: a TCP connection to a pod's address, dialled from
//! inside the pod's network namespace, for the controller's `services/proxy` and `pods/proxy`
//! (it speaks HTTP, or TLS, over it; pod IPs need not be routable from the controller). The
//! request upgrades (`Upgrade: tcp`) once the connection is made; a failed dial is a 502 whose
//! body is Go's words for it (`dial tcp 10.42.0.5:80: connect: connection refused`).

use std::net::{IpAddr, SocketAddr};

use axum::body::Body;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::SharedBackend;
use super::port_forward::{dial_addr, on_upgrade};

/// The `Upgrade` token of a tunnel.
pub const UPGRADE: &str = "tcp";

/// The address and port a tunnel request names.
fn destination(query: &str) -> Result<SocketAddr, String> {
    let (mut address, mut port) = (None, None);
    for kv in query.split('&') {
        match kv.split_once('=') {
            Some(("address", v)) => address = Some(v),
            Some(("port", v)) => port = Some(v),
            _ => {}
        }
    }
    let address = address
        .ok_or("query parameter \"address\" is required")?
        .parse::<IpAddr>()
        .map_err(|e| format!("address: {e}"))?;
    let port = port
        .ok_or("query parameter \"port\" is required")?
        .parse::<u16>()
        .map_err(|e| format!("port: {e}"))?;
    Ok(SocketAddr::new(address, port))
}

pub async fn serve(
    State(backend): State<SharedBackend>,
    Path((ns, pod)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    mut req: Request,
) -> Response {
    let asks_upgrade = req
        .headers()
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case(UPGRADE));
    if !asks_upgrade {
        return (StatusCode::BAD_REQUEST, "a tunnel needs `Upgrade: tcp`").into_response();
    }
    let addr = match destination(query.as_deref().unwrap_or_default()) {
        Ok(a) => a,
        Err(why) => return (StatusCode::BAD_REQUEST, why).into_response(),
    };
    let target = match backend.pod_netns(&ns, &pod).await {
        Ok(t) => t,
        Err(e) => return (StatusCode::NOT_FOUND, e).into_response(),
    };
    let mut conn = match dial_addr(&target.netns, addr).await {
        Ok(c) => c,
        Err(e) => return (StatusCode::BAD_GATEWAY, e).into_response(),
    };
    on_upgrade(&mut req, move |mut io| async move {
        let _ = tokio::io::copy_bidirectional(&mut io, &mut conn).await;
    });
    let mut r = Response::new(Body::empty());
    *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    r.headers_mut()
        .insert(header::UPGRADE, HeaderValue::from_static(UPGRADE));
    r
}

#[cfg(test)]
mod tests {
    use super::destination;

    #[test]
    fn a_tunnel_names_an_address_and_a_port() {
        assert_eq!(
            destination("address=10.42.0.5&port=80"),
            Ok("10.42.0.5:80".parse().expect("addr"))
        );
        assert_eq!(
            destination("port=443&address=fd00::5"),
            Ok("[fd00::5]:443".parse().expect("addr"))
        );
        assert!(destination("address=10.42.0.5").is_err());
        assert!(destination("address=web&port=80").is_err());
        assert!(destination("address=10.42.0.5&port=http").is_err());
    }
}
