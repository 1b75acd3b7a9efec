//! The resource metrics API (`metrics.k8s.io/v1beta1` NodeMetrics and PodMetrics), served as
//! metrics-server serves it: every `--metric-resolution` the controller scrapes each node's
//! agent at `/metrics/resource` ([`scrape`]), and answers with the usage between an agent's
//! last two scrapes ([`usage`]): CPU as a rate over that window, memory as the latest working
//! set. Nothing is stored; `kubectl top` reads it. The scrape keeps one connection per agent
//! ([`agents`]) and backs off from nodes whose scrapes keep failing ([`backoff`]).

pub mod agents;
pub mod backoff;
pub mod scrape;
pub mod usage;

use super::SharedState;
use super::error::ApiError;
use super::path::ResourcePath;
use axum::Json;
use axum::response::{IntoResponse, Response};
use berth_registry::RegistryError;
use berth_shared::query::Query;
use berth_shared::resource::{NODE_METRICS, NODES, POD_METRICS, PODS};
use berth_shared::selector::LabelSelector;
use jiff::Timestamp;
use scrape::Scrape;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use usage::{NodeUsage, Usage, cpu_quantity, memory_quantity};

/// Each node's last scrape and the usage it and the one before tell.
#[derive(Default)]
pub struct ResourceMetrics {
    nodes: Mutex<HashMap<String, (Scrape, NodeUsage)>>,
}

impl ResourceMetrics {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Scrape, NodeUsage)>> {
        self.nodes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a fresh scrape of `node`, which is scraped every `resolution`.
    fn record(&self, node: &str, cur: Scrape, resolution: Duration) {
        let mut map = self.lock();
        let resolution_ms = i64::try_from(resolution.as_millis()).unwrap_or(i64::MAX);
        let usage = usage::usage(map.get(node).map(|(prev, _)| prev), &cur, resolution_ms);
        map.insert(node.to_string(), (cur, usage));
    }

    /// Keeps only the nodes in `names`.
    fn retain(&self, names: &HashSet<&str>) {
        self.lock().retain(|n, _| names.contains(n.as_str()));
    }

    fn node(&self, node: &str) -> Option<Usage> {
        self.lock().get(node).and_then(|(_, u)| u.node)
    }

    fn pod(&self, ns: &str, pod: &str) -> Option<Vec<(String, Usage)>> {
        let key = (ns.to_string(), pod.to_string());
        self.lock()
            .values()
            .find_map(|(_, u)| u.pods.get(&key).cloned())
    }
}

/// The autoscaler reads pods' usage from the same scrapes `kubectl top` shows.
impl berth_runtime::pod_usage::PodUsage for ResourceMetrics {
    fn pod_usage(&self, namespace: &str, pod: &str) -> Option<Vec<(String, u64, u64)>> {
        self.pod(namespace, pod).map(|containers| {
            containers
                .into_iter()
                .map(|(c, u)| (c, u.cpu_nanocores, u.memory_bytes))
                .collect()
        })
    }
}

/// Scrapes every node's agent every `resolution` until `shutdown`: each over its kept-alive
/// connection, except nodes backed off after failed scrapes.
pub async fn run(state: SharedState, resolution: Duration, shutdown: CancellationToken) {
    let client = agents::AgentClient::new(
        state.dialer.client_config(),
        agents::idle_timeout(resolution),
    );
    let max_skip = backoff::max_skip(resolution);
    let mut failing: HashMap<String, backoff::Failing> = HashMap::new();
    let mut tick = tokio::time::interval(resolution);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for n in 0u64.. {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.cancelled() => return,
        }
        let nodes = match state.registry.list_values(NODES, None) {
            Ok(nodes) => nodes,
            Err(e) => {
                tracing::warn!(error = %e, "metrics: listing nodes");
                continue;
            }
        };
        let targets: Vec<(&str, backoff::Endpoint)> = nodes
            .iter()
            .filter_map(|node| {
                let name = node.pointer("/metadata/name").and_then(Value::as_str)?;
                match super::proxy::node_endpoint(node, name) {
                    Ok(endpoint) => Some((name, endpoint)),
                    Err(e) => {
                        tracing::debug!(node = %name, error = %e, "metrics: no agent to scrape");
                        None
                    }
                }
            })
            .collect();
        let names: HashSet<&str> = nodes
            .iter()
            .filter_map(|n| n.pointer("/metadata/name").and_then(Value::as_str))
            .collect();
        state.resource_metrics.retain(&names);
        failing.retain(|name, _| names.contains(name.as_str()));
        let scrapes = targets
            .iter()
            .filter(|(name, endpoint)| backoff::plan_scrape(failing.get(*name), endpoint, n))
            .map(|(name, endpoint)| {
                let (state, client) = (&state, &client);
                async move {
                    let text = client
                        .get_text(endpoint, "/metrics/resource", resolution)
                        .await;
                    let ok = match text {
                        Ok(text) => {
                            let scrape = scrape::parse(&text);
                            state.resource_metrics.record(name, scrape, resolution);
                            true
                        }
                        Err(e) => {
                            tracing::debug!(node = %name, error = %e, "metrics: scrape failed");
                            false
                        }
                    };
                    (*name, endpoint, ok)
                }
            });
        for (name, endpoint, ok) in futures::future::join_all(scrapes).await {
            match backoff::plan_after_scrape(failing.get(name), endpoint, n, ok, max_skip) {
                Some(f) => {
                    failing.insert(name.to_string(), f);
                }
                None => {
                    failing.remove(name);
                }
            }
        }
    }
}

fn time(ms: i64) -> String {
    Timestamp::from_millisecond(ms)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

fn window(ms: i64) -> String {
    format!("{}s", ms as f64 / 1e3)
}

fn usage_json(u: &Usage) -> Value {
    json!({"cpu": cpu_quantity(u.cpu_nanocores), "memory": memory_quantity(u.memory_bytes)})
}

/// The metadata a metrics object carries: its object's name, namespace and labels, and the
/// time it was computed.
fn metadata(obj: &Value, now: &str) -> Value {
    let mut m = json!({
        "name": obj.pointer("/metadata/name").cloned().unwrap_or(Value::Null),
        "creationTimestamp": now,
    });
    if let Some(ns) = obj.pointer("/metadata/namespace") {
        m["namespace"] = ns.clone();
    }
    if let Some(l) = obj.pointer("/metadata/labels") {
        m["labels"] = l.clone();
    }
    m
}

fn labels_of(obj: &Value) -> BTreeMap<String, String> {
    obj.pointer("/metadata/labels")
        .and_then(|l| serde_json::from_value(l.clone()).ok())
        .unwrap_or_default()
}

fn node_metrics(state: &SharedState, node: &Value, now: &str) -> Option<Value> {
    let name = node.pointer("/metadata/name")?.as_str()?;
    let u = state.resource_metrics.node(name)?;
    Some(json!({
        "metadata": metadata(node, now),
        "timestamp": time(u.at_ms),
        "window": window(u.window_ms),
        "usage": usage_json(&u),
    }))
}

fn pod_metrics(state: &SharedState, pod: &Value, now: &str) -> Option<Value> {
    let ns = pod.pointer("/metadata/namespace")?.as_str()?;
    let name = pod.pointer("/metadata/name")?.as_str()?;
    let containers = state.resource_metrics.pod(ns, name)?;
    let first = containers.first()?.1;
    Some(json!({
        "metadata": metadata(pod, now),
        "timestamp": time(first.at_ms),
        "window": window(first.window_ms),
        "containers": containers
            .iter()
            .map(|(c, u)| json!({"name": c, "usage": usage_json(u)}))
            .collect::<Vec<_>>(),
    }))
}

fn not_found(resource: &str, name: String) -> ApiError {
    RegistryError::NotFound {
        resource: format!("{resource}.metrics.k8s.io"),
        group: "metrics.k8s.io".to_string(),
        name,
    }
    .into()
}

/// GET (one or a list of) NodeMetrics or PodMetrics.
pub fn serve(
    state: &SharedState,
    target: &ResourcePath,
    query: &Query,
) -> Result<Response, ApiError> {
    let selector = match query.get("labelSelector") {
        Some(s) => LabelSelector::parse(s).map_err(|e| ApiError::BadRequest(e.to_string()))?,
        None => LabelSelector::everything(),
    };
    let now = Timestamp::now().to_string();
    let is_nodes = std::ptr::eq(target.rt, NODE_METRICS);
    let (source, rt) = if is_nodes {
        (NODES, NODE_METRICS)
    } else {
        (PODS, POD_METRICS)
    };
    let compute = |obj: &Value| {
        if is_nodes {
            node_metrics(state, obj, &now)
        } else {
            pod_metrics(state, obj, &now)
        }
    };
    if let Some(name) = &target.name {
        let ns = target.namespace.as_deref();
        let missing = || {
            if is_nodes {
                not_found("nodemetrics", name.clone())
            } else {
                not_found("podmetrics", format!("{}/{name}", ns.unwrap_or_default()))
            }
        };
        let obj = state
            .registry
            .get(source, ns, name)
            .ok()
            .and_then(|o| o.value().ok())
            .ok_or_else(missing)?;
        let mut m = compute(&obj).ok_or_else(missing)?;
        m["kind"] = json!(rt.kind);
        m["apiVersion"] = json!(rt.api_version());
        return Ok(Json(m).into_response());
    }
    let items: Vec<Value> = state
        .registry
        .list_values(source, target.namespace.as_deref())?
        .iter()
        .filter(|o| selector.matches(&labels_of(o)))
        .filter_map(compute)
        .collect();
    Ok(Json(json!({
        "kind": rt.list_kind(),
        "apiVersion": rt.api_version(),
        "metadata": {},
        "items": items,
    }))
    .into_response())
}
