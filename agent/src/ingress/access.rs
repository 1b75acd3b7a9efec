//! What each proxied request leaves behind: one access log line on the agent's log and the
//! request metrics on its `/metrics`.
//!
//! The line (target `berth_agent::ingress::access`, level info), one per request, written when
//! the response headers are sent (so the duration is the time to the first byte of the
//! response, and the size is the `Content-Length` the response declares, `-` when streamed):
//!
//! ```text
//! ingress 10.0.3.9 "GET /api/x HTTP/1.1" 200 512 0.002 host=shop.example.com ingress=default/shop service=web:80 upstream=10.42.1.7:8080
//! ```
//!
//! fields: client address, request line, status, response size, duration in seconds, `Host`,
//! the Ingress and Service port that routed it (`-` when none did), the endpoint that answered
//! (`-` when none did).

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use crate::metrics::exposition::{CounterVec, HistogramVec, Text};
use crate::server::MetricsSection;

static REQUESTS: CounterVec = CounterVec::new(
    "berth_ingress_requests_total",
    "Requests the ingress proxy answered, by Ingress, Service and status code.",
    &["namespace", "ingress", "service", "code"],
);

static DURATION: HistogramVec = HistogramVec::new(
    "berth_ingress_request_duration_seconds",
    "Time from a request to its response headers, through the ingress proxy.",
    &["namespace", "ingress", "service"],
    &[
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    ],
);

/// One answered request.
pub struct Record<'a> {
    pub client: core::net::IpAddr,
    pub method: &'a str,
    pub path: &'a str,
    pub version: &'a str,
    pub host: &'a str,
    pub status: u16,
    pub size: Option<u64>,
    pub elapsed: Duration,
    /// `(namespace, ingress, service:port)`, when a route matched.
    pub route: Option<(&'a str, &'a str, String)>,
    pub upstream: Option<core::net::SocketAddr>,
}

/// The access log line of `r` (see the module's documentation).
pub fn line(r: &Record<'_>) -> String {
    let dash = |o: Option<String>| o.unwrap_or_else(|| "-".into());
    format!(
        "ingress {} \"{} {} {}\" {} {} {:.3} host={} ingress={} service={} upstream={}",
        r.client,
        r.method,
        r.path,
        r.version,
        r.status,
        dash(r.size.map(|s| s.to_string())),
        r.elapsed.as_secs_f64(),
        if r.host.is_empty() { "-" } else { r.host },
        dash(r.route.as_ref().map(|(ns, ing, _)| format!("{ns}/{ing}"))),
        dash(r.route.as_ref().map(|(_, _, svc)| svc.clone())),
        dash(r.upstream.map(|u| u.to_string())),
    )
}

/// Logs `r` and counts it.
pub fn record(r: &Record<'_>) {
    tracing::info!(target: "berth_agent::ingress::access", "{}", line(r));
    let (ns, ing, svc) = match &r.route {
        Some((ns, ing, svc)) => (*ns, *ing, svc.as_str()),
        None => ("", "", ""),
    };
    let code = r.status.to_string();
    REQUESTS.inc(&[ns, ing, svc, &code]);
    DURATION.observe(&[ns, ing, svc], r.elapsed.as_secs_f64());
}

/// The ingress metric families, for the agent's `/metrics`.
pub struct IngressMetrics;

impl MetricsSection for IngressMetrics {
    fn render(self: Arc<Self>) -> BoxFuture<'static, String> {
        Box::pin(async move {
            let mut t = Text::default();
            REQUESTS.render(&mut t);
            DURATION.render(&mut t);
            t.finish()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_access_line_has_the_documented_fields() {
        let r = Record {
            client: "10.0.3.9".parse().unwrap(),
            method: "GET",
            path: "/api/x",
            version: "HTTP/1.1",
            host: "shop.example.com",
            status: 200,
            size: Some(512),
            elapsed: Duration::from_millis(2),
            route: Some(("default", "shop", "web:80".into())),
            upstream: Some("10.42.1.7:8080".parse().unwrap()),
        };
        assert_eq!(
            line(&r),
            "ingress 10.0.3.9 \"GET /api/x HTTP/1.1\" 200 512 0.002 host=shop.example.com \
             ingress=default/shop service=web:80 upstream=10.42.1.7:8080"
        );
        let none = Record {
            size: None,
            host: "",
            route: None,
            upstream: None,
            status: 404,
            ..r
        };
        assert!(line(&none).ends_with("404 - 0.002 host=- ingress=- service=- upstream=-"));
    }
}
