//! Prometheus metrics of the API: request count and latency by verb, resource and code, store
//! revision and object counts, open watches, requests in flight and refused, connections. Served
//! at `/metrics` in the text format.

use super::SharedState;
use super::path::{self, ApiPath};
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Latency histogram bucket bounds, in seconds.
const BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0,
];

#[derive(Default)]
struct Series {
    count: u64,
    sum: f64,
    buckets: Vec<u64>,
}

#[derive(Default)]
struct Inner {
    requests: Mutex<BTreeMap<(String, String, u16), Series>>,
    watches: AtomicI64,
}

/// The API's metrics. Cheap to clone.
#[derive(Clone, Default)]
pub struct Metrics {
    inner: Arc<Inner>,
}

impl Metrics {
    pub fn observe(&self, verb: &str, resource: &str, code: u16, seconds: f64) {
        let mut map = self
            .inner
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let s = map
            .entry((verb.to_string(), resource.to_string(), code))
            .or_insert_with(|| Series {
                buckets: vec![0; BUCKETS.len()],
                ..Series::default()
            });
        s.count += 1;
        s.sum += seconds;
        for (i, b) in BUCKETS.iter().enumerate() {
            if seconds <= *b {
                s.buckets[i] += 1;
            }
        }
    }

    pub fn watch_started(&self) {
        self.inner.watches.fetch_add(1, Ordering::Relaxed);
    }

    pub fn watch_ended(&self) {
        self.inner.watches.fetch_sub(1, Ordering::Relaxed);
    }

    pub fn render(&self, store: &berth_store::Store) -> String {
        let mut out = String::new();
        out.push_str("# HELP apiserver_request_total Requests by verb, resource and HTTP code.\n# TYPE apiserver_request_total counter\n");
        let map = self
            .inner
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for ((verb, res, code), s) in map.iter() {
            let _ = writeln!(
                out,
                "apiserver_request_total{{verb=\"{verb}\",resource=\"{res}\",code=\"{code}\"}} {}",
                s.count
            );
        }
        out.push_str("# HELP apiserver_request_duration_seconds Request latency by verb and resource.\n# TYPE apiserver_request_duration_seconds histogram\n");
        for ((verb, res, code), s) in map.iter() {
            let labels = format!("verb=\"{verb}\",resource=\"{res}\",code=\"{code}\"");
            for (i, b) in BUCKETS.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "apiserver_request_duration_seconds_bucket{{{labels},le=\"{b}\"}} {}",
                    s.buckets[i]
                );
            }
            let _ = writeln!(
                out,
                "apiserver_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}",
                s.count
            );
            let _ = writeln!(
                out,
                "apiserver_request_duration_seconds_sum{{{labels}}} {}",
                s.sum
            );
            let _ = writeln!(
                out,
                "apiserver_request_duration_seconds_count{{{labels}}} {}",
                s.count
            );
        }
        drop(map);
        out.push_str("# HELP berth_store_revision The store's current revision.\n# TYPE berth_store_revision gauge\n");
        let _ = writeln!(out, "berth_store_revision {}", store.current_revision());
        out.push_str("# HELP apiserver_storage_objects Stored objects by resource.\n# TYPE apiserver_storage_objects gauge\n");
        // Each stored resource once (a version converted to another's storage shares its keys).
        for rt in berth_shared::resource::stored() {
            let n = store.count(&berth_registry::prefix(rt, None));
            let _ = writeln!(
                out,
                "apiserver_storage_objects{{resource=\"{}\"}} {n}",
                rt.group_resource()
            );
        }
        out.push_str("# HELP apiserver_registered_watchers Open watch streams.\n# TYPE apiserver_registered_watchers gauge\n");
        let _ = writeln!(
            out,
            "apiserver_registered_watchers {}",
            self.inner.watches.load(Ordering::Relaxed)
        );
        out
    }
}

pub async fn serve(State(state): State<SharedState>) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(state.registry.store())
            + &state.controller_metrics.render()
            + &state.inflight.render()
            + &state.connections.render()
            + &state.leader.render()
            + &state.serving.render()
            + &store_health(state.registry.store()),
    )
        .into_response()
}

/// The store's commits: failures (a full disk), whether commits fail now, and the commits,
/// writes and commit time of the embedded store's group commit.
fn store_health(store: &berth_store::Store) -> String {
    let health = store.write_health();
    format!(
        "# HELP berth_store_commit_failures_total Store commits that failed (their writes were refused).\n\
         # TYPE berth_store_commit_failures_total counter\n\
         berth_store_commit_failures_total {}\n\
         # HELP berth_store_commits_failing Whether the last store commit failed (1) or not (0).\n\
         # TYPE berth_store_commits_failing gauge\n\
         berth_store_commits_failing {}\n\
         # HELP berth_store_committed_writes_total Writes made durable by the embedded store's commits.\n\
         # TYPE berth_store_committed_writes_total counter\n\
         berth_store_committed_writes_total {}\n\
         # HELP berth_store_commit_duration_seconds Time of the embedded store's commits (a group of writes each), durable and visible.\n\
         # TYPE berth_store_commit_duration_seconds histogram\n\
         berth_store_commit_duration_seconds_bucket{{le=\"+Inf\"}} {}\n\
         berth_store_commit_duration_seconds_sum {}\n\
         berth_store_commit_duration_seconds_count {}\n",
        health.failures,
        u8::from(health.failing.is_some()),
        health.committed_writes,
        health.commits,
        health.commit_seconds,
        health.commits,
    )
}

/// Kubernetes' verb for a request.
fn verb(method: &Method, named: bool, watch: bool) -> &'static str {
    match *method {
        Method::GET if watch => "WATCH",
        Method::GET if named => "GET",
        Method::GET => "LIST",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        _ => "OTHER",
    }
}

pub async fn observe(State(state): State<SharedState>, req: Request, next: Next) -> Response {
    let start = Instant::now();
    let watch = req
        .uri()
        .query()
        .is_some_and(|q| q.contains("watch=true") || q.contains("watch=1"));
    let (resource, named) = match path::parse(req.uri().path()) {
        ApiPath::Resource(r) => {
            let mut res = r.rt.plural.to_string();
            if let Some(sub) = &r.subresource {
                res = format!("{res}/{sub}");
            }
            (res, r.name.is_some())
        }
        _ => (String::new(), true),
    };
    let verb = verb(req.method(), named, watch);
    let resp = next.run(req).await;
    state.metrics.observe(
        verb,
        &resource,
        resp.status().as_u16(),
        start.elapsed().as_secs_f64(),
    );
    resp
}
