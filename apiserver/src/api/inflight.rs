//! Upstream's limits on requests in flight, split as API Priority and Fairness splits them:
//! each priority level (see [`super::flow_control`]: nodes, kube-system ServiceAccounts, other
//! ServiceAccounts, users, joining agents, the unauthenticated rest) gets its share of
//! `--max-requests-inflight` read-only and `--max-mutating-requests-inflight` mutating
//! requests; over its share a request gets 429 TooManyRequests with `Retry-After: 1`, and only
//! requests of that level do. Long-running requests (watch, exec, attach, log, port-forward,
//! proxy) are not counted, and `system:masters` and health probes are exempt, as upstream's
//! `exempt` and `probes` flow schemas are.

use super::authn::Identity;
use super::error::ApiError;
use super::flow_control::{LEVELS, Level, classify, share_of};
use super::guarded::Guarded;
use super::query::Query;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::Response;
use serde_json::json;
use std::fmt::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::Semaphore;

/// Subresources upstream serves as long-running requests.
const LONG_RUNNING_SUBRESOURCES: &[&str] = &["attach", "exec", "log", "portforward", "proxy"];

/// One cap: its permits, and the requests it let through and refused.
#[derive(Debug)]
struct Cap {
    permits: Arc<Semaphore>,
    max: usize,
    dispatched: AtomicU64,
    dropped: AtomicU64,
}

impl Cap {
    fn new(max: usize) -> Cap {
        Cap {
            permits: Arc::new(Semaphore::new(max)),
            max,
            dispatched: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    fn in_flight(&self) -> usize {
        self.max - self.permits.available_permits()
    }
}

/// A level's two caps; `None` means unlimited (a flag value of 0, as upstream).
#[derive(Debug)]
struct Caps {
    level: Level,
    read_only: Option<Cap>,
    mutating: Option<Cap>,
}

/// Every limited level's caps.
#[derive(Debug)]
pub struct InFlight {
    levels: Vec<Caps>,
}

impl InFlight {
    pub fn new(max_requests: usize, max_mutating: usize) -> InFlight {
        let cap = |total: usize, share: u32| (total > 0).then(|| Cap::new(share_of(total, share)));
        InFlight {
            levels: LEVELS
                .iter()
                .map(|(level, _, _, share)| Caps {
                    level: *level,
                    read_only: cap(max_requests, *share),
                    mutating: cap(max_mutating, *share),
                })
                .collect(),
        }
    }

    fn caps(&self, level: Level) -> Option<&Caps> {
        self.levels.iter().find(|c| c.level == level)
    }

    /// Upstream's gauges and counters, in the Prometheus text format: requests in flight by
    /// kind (summed over the levels) and refused ones, and per priority level (upstream's
    /// `apiserver_flowcontrol_*` names) the limit, the requests executing, dispatched and
    /// rejected.
    pub fn render(&self) -> String {
        let sum = |kind: fn(&Caps) -> &Option<Cap>, f: fn(&Cap) -> u64| -> u64 {
            self.levels
                .iter()
                .filter_map(|c| kind(c).as_ref())
                .map(f)
                .sum()
        };
        let read_only: fn(&Caps) -> &Option<Cap> = |c| &c.read_only;
        let mutating: fn(&Caps) -> &Option<Cap> = |c| &c.mutating;
        let kinds = [("readOnly", read_only), ("mutating", mutating)];
        let mut out = String::from(
            "# HELP apiserver_current_inflight_requests Requests in flight, by kind (long-running ones are not counted).\n\
             # TYPE apiserver_current_inflight_requests gauge\n",
        );
        for (name, kind) in kinds {
            let n = sum(kind, |c| c.in_flight() as u64);
            let _ = writeln!(
                out,
                "apiserver_current_inflight_requests{{request_kind=\"{name}\"}} {n}"
            );
        }
        out.push_str(
            "# HELP apiserver_dropped_requests_total Requests refused with 429 by the in-flight limits.\n\
             # TYPE apiserver_dropped_requests_total counter\n",
        );
        for (name, kind) in kinds {
            let n = sum(kind, |c| c.dropped.load(Ordering::Relaxed));
            let _ = writeln!(
                out,
                "apiserver_dropped_requests_total{{request_kind=\"{name}\"}} {n}"
            );
        }
        type Read = fn(&Cap) -> u64;
        let families: [(&str, &str, &str, &str, Read); 4] = [
            (
                "apiserver_flowcontrol_nominal_limit_seats",
                "gauge",
                "Requests a priority level may have in flight.",
                "",
                |c| c.max as u64,
            ),
            (
                "apiserver_flowcontrol_current_executing_requests",
                "gauge",
                "Requests of a priority level in flight.",
                "",
                |c| c.in_flight() as u64,
            ),
            (
                "apiserver_flowcontrol_dispatched_requests_total",
                "counter",
                "Requests a priority level let through.",
                "",
                |c| c.dispatched.load(Ordering::Relaxed),
            ),
            (
                "apiserver_flowcontrol_rejected_requests_total",
                "counter",
                "Requests a priority level refused with 429.",
                ",reason=\"concurrency-limit\"",
                |c| c.dropped.load(Ordering::Relaxed),
            ),
        ];
        for (family, kind, help, extra, read) in families {
            let _ = writeln!(out, "# HELP {family} {help}\n# TYPE {family} {kind}");
            for (caps, (_, level, schema, _)) in self.levels.iter().zip(LEVELS.iter()) {
                let n: u64 = [&caps.read_only, &caps.mutating]
                    .into_iter()
                    .flatten()
                    .map(read)
                    .sum();
                let _ = writeln!(
                    out,
                    "{family}{{priority_level=\"{level}\",flow_schema=\"{schema}\"{extra}}} {n}"
                );
            }
        }
        out
    }
}

/// Health probes: never refused, or a busy server would be restarted by its liveness probe.
const PROBES: &[&str] = &["/healthz", "/livez", "/readyz"];

/// Upstream's read-only verbs are get, list and watch: the GET and HEAD methods.
fn is_mutating(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD)
}

/// Not counted: a health probe, a watch (`?watch=true` or the old `/watch/` paths), or a
/// long-running subresource.
fn is_exempt(req: &Request) -> bool {
    let path = req.uri().path();
    if PROBES
        .iter()
        .any(|p| path == *p || path.strip_prefix(p).is_some_and(|r| r.starts_with('/')))
    {
        return true;
    }
    if Query::parse(req.uri().query()).flag("watch") {
        return true;
    }
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let rest = match segs.as_slice() {
        ["api", _, rest @ ..] | ["apis", _, _, rest @ ..] => rest,
        _ => return false,
    };
    if rest.first() == Some(&"watch") {
        return true;
    }
    let sub = match rest {
        ["namespaces", _, _, _, sub, ..] | [_, _, sub, ..] => *sub,
        _ => return false,
    };
    LONG_RUNNING_SUBRESOURCES.contains(&sub)
}

/// The 429 answer: upstream's message, a `Status` body and `Retry-After: 1`.
fn too_many_requests() -> Response {
    let err = ApiError::TooManyRequests("Too many requests, please try again later.".into());
    let mut status = err.status();
    status["details"] = json!({"retryAfterSeconds": 1});
    let mut resp = super::json_response(err.code(), &status);
    resp.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    resp
}

/// The middleware. Must run after authentication (it reads the request's [`Identity`]).
pub async fn limit(State(limits): State<Arc<InFlight>>, req: Request, next: Next) -> Response {
    if is_exempt(&req) {
        return next.run(req).await;
    }
    let level = classify(req.extensions().get::<Identity>(), req.uri().path());
    let Some(caps) = limits.caps(level) else {
        return next.run(req).await;
    };
    let cap = if is_mutating(req.method()) {
        &caps.mutating
    } else {
        &caps.read_only
    };
    let Some(cap) = cap else {
        return next.run(req).await;
    };
    match cap.permits.clone().try_acquire_owned() {
        // The permit is held until the response body is sent, as upstream holds it until the
        // handler has written its answer.
        Ok(permit) => {
            cap.dispatched.fetch_add(1, Ordering::Relaxed);
            next.run(req).await.map(|body| Guarded::wrap(body, permit))
        }
        Err(_) => {
            cap.dropped.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(method = %req.method(), path = %req.uri().path(), ?level, "too many requests in flight at this priority level");
            too_many_requests()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Router;
    use axum::body::Body;
    use axum::routing::any;
    use tower::ServiceExt;

    const CMS: &str = "/api/v1/namespaces/default/configmaps";

    /// A router behind the limiter whose handler keeps requests with `hold` in their query in
    /// flight for the whole test and answers the others at once; every request carries the
    /// identity `groups`.
    fn app(limits: InFlight, groups: &'static [&'static str]) -> Router {
        let handler = |req: Request| async move {
            if req.uri().query().is_some_and(|q| q.contains("hold")) {
                std::future::pending::<()>().await;
            }
            "done"
        };
        Router::new()
            .route("/{*path}", any(handler))
            .layer(axum::middleware::from_fn_with_state(
                Arc::new(limits),
                limit,
            ))
            .layer(axum::middleware::from_fn(
                move |mut req: Request, next: Next| async move {
                    req.extensions_mut().insert(Identity::new(
                        "u",
                        groups.iter().map(|g| g.to_string()).collect(),
                    ));
                    next.run(req).await
                },
            ))
    }

    fn req(method: Method, uri: &str) -> Request {
        Request::builder()
            .method(method)
            .uri(uri)
            .body(Body::empty())
            .expect("request")
    }

    /// Starts a request that stays in flight, and lets it take its permit.
    async fn hold(app: &Router, method: Method) {
        let pending = app.clone().oneshot(req(method, &format!("{CMS}?hold=1")));
        tokio::spawn(pending);
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    /// Holds one request of each kind: with caps of one, both are full.
    async fn hold_a_read_and_a_write(app: &Router) {
        hold(app, Method::GET).await;
        hold(app, Method::POST).await;
    }

    async fn status(app: &Router, method: Method, uri: &str) -> u16 {
        let resp = app.clone().oneshot(req(method, uri)).await.expect("answer");
        resp.status().as_u16()
    }

    #[tokio::test]
    async fn a_mutating_request_over_the_cap_gets_429_with_retry_after_and_a_status() {
        let app = app(InFlight::new(10, 1), &[]);
        hold(&app, Method::POST).await;
        let resp = app
            .clone()
            .oneshot(req(Method::POST, CMS))
            .await
            .expect("answer");
        assert_eq!(resp.status().as_u16(), 429);
        assert_eq!(resp.headers()[header::RETRY_AFTER], "1");
        let body = axum::body::to_bytes(resp.into_body(), 4096)
            .await
            .expect("body");
        let status: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["reason"], "TooManyRequests");
        assert_eq!(status["code"], 429);
        assert_eq!(status["details"]["retryAfterSeconds"], 1);
    }

    #[tokio::test]
    async fn the_metrics_show_requests_in_flight_and_refused() {
        let limits = Arc::new(InFlight::new(0, 1));
        let app = Router::new()
            .route("/{*path}", any(std::future::pending::<&'static str>))
            .layer(axum::middleware::from_fn_with_state(limits.clone(), limit));
        tokio::spawn(app.clone().oneshot(req(Method::POST, CMS)));
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert_eq!(status(&app, Method::POST, CMS).await, 429);
        let text = limits.render();
        assert!(
            text.contains("apiserver_current_inflight_requests{request_kind=\"mutating\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("apiserver_current_inflight_requests{request_kind=\"readOnly\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains("apiserver_dropped_requests_total{request_kind=\"mutating\"} 1\n"),
            "{text}"
        );
        // Anonymous requests are the catch-all level's: its counters, no other level's.
        assert!(
            text.contains("apiserver_flowcontrol_rejected_requests_total{priority_level=\"catch-all\",flow_schema=\"catch-all\",reason=\"concurrency-limit\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("apiserver_flowcontrol_rejected_requests_total{priority_level=\"node-high\",flow_schema=\"system-nodes\",reason=\"concurrency-limit\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains("apiserver_flowcontrol_current_executing_requests{priority_level=\"catch-all\",flow_schema=\"catch-all\"} 1\n"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn reads_and_writes_are_counted_separately() {
        let app = app(InFlight::new(1, 1), &[]);
        hold(&app, Method::POST).await;
        assert_eq!(status(&app, Method::GET, CMS).await, 200);
        assert_eq!(status(&app, Method::DELETE, CMS).await, 429);
        hold(&app, Method::GET).await;
        assert_eq!(status(&app, Method::GET, CMS).await, 429);
    }

    #[tokio::test]
    async fn a_permit_is_returned_when_the_answer_is_done() {
        let app = app(InFlight::new(1, 1), &[]);
        for _ in 0..3 {
            assert_eq!(status(&app, Method::POST, CMS).await, 200);
        }
    }

    #[tokio::test]
    async fn probes_watches_and_long_running_subresources_are_not_counted() {
        let app = app(InFlight::new(1, 1), &[]);
        hold_a_read_and_a_write(&app).await;
        assert_eq!(status(&app, Method::GET, CMS).await, 429);
        for uri in [
            format!("{CMS}?watch=true"),
            "/api/v1/watch/namespaces/default/configmaps".to_string(),
            "/api/v1/namespaces/default/pods/p/log?follow=true".to_string(),
            "/api/v1/namespaces/default/pods/p/exec?command=sh".to_string(),
            "/api/v1/namespaces/default/services/s/proxy/x/y".to_string(),
            "/api/v1/nodes/n/proxy/metrics".to_string(),
            "/readyz".to_string(),
            "/livez/ping".to_string(),
        ] {
            assert_eq!(status(&app, Method::GET, &uri).await, 200, "{uri}");
        }
        let exec = "/api/v1/namespaces/default/pods/p/exec?command=sh";
        assert_eq!(status(&app, Method::POST, exec).await, 200);
    }

    #[tokio::test]
    async fn system_masters_are_never_refused() {
        let app = app(InFlight::new(1, 1), &["system:masters"]);
        hold(&app, Method::POST).await;
        assert_eq!(status(&app, Method::POST, CMS).await, 200);
    }

    #[tokio::test]
    async fn a_cap_of_zero_means_unlimited() {
        let app = app(InFlight::new(0, 0), &[]);
        hold_a_read_and_a_write(&app).await;
        for method in [Method::POST, Method::GET] {
            assert_eq!(status(&app, method.clone(), CMS).await, 200, "{method}");
        }
    }
}
