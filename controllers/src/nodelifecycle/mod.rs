//! The node lifecycle controller (upstream's `node-lifecycle-controller`): watches every
//! node's heartbeats (its Lease in `kube-node-lease` and its posted status), marks a node
//! whose agent went silent for the grace period Unknown, keeps each node's condition taints
//! (TaintNodesByCondition) and readiness `NoExecute` taint in step with its conditions, and
//! marks the pods of a node that is not Ready not Ready ([`plan`]). Taint-based eviction of
//! those pods is [`super::tainteviction`]'s.
//!
//! Keyed by node. Heartbeats are recorded as they arrive ([`health`]), without a pass: a node
//! whose heartbeats keep coming is looked at once per grace period, when its deadline comes
//! (a pass then finds the newer probe time and sets the next deadline). A node that is not
//! Ready gets a pass on every heartbeat, so its recovery shows at once.

pub mod health;
pub mod plan;
pub mod zones;

#[cfg(test)]
mod tests;

use berth_registry::events::{EventType, Recorder};
use berth_registry::{Part, Registry, RegistryError, WriteOptions};
use berth_runtime::informer::{BY_NODE, Delta, DeltaType, Informer, Object, ObjectKey, View};
use berth_runtime::{self as runtime, Clock, Context, Reconciler};
use berth_shared::k8s_openapi::api::core::v1 as core;
use berth_shared::reconcile::{Outcome, Queue};
use berth_shared::resource::{LEASES, NODES, PODS};
use health::{Health, Heartbeats};
use jiff::Timestamp;
use plan::Grace;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use zones::{Tainting, Zones};

/// The events' `source.component`, as upstream.
pub const COMPONENT: &str = "node-controller";
/// The namespace of the nodes' Leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";
/// How old a zone census may be when a pass only keeps or removes taints.
const ZONES_MAX_AGE: Duration = Duration::from_secs(1);
const WORKERS: usize = 4;

/// The controller's settings.
#[derive(Debug, Clone, Copy, Default)]
pub struct Config {
    pub grace: Grace,
}

/// What a node change is judged by: everything a pass depends on but the heartbeat times.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Signals {
    conditions: Vec<(String, String)>,
    unschedulable: bool,
    taints: Vec<(String, String, String)>,
    ready_heartbeat: Option<String>,
}

impl Signals {
    fn ready(&self) -> Option<&str> {
        self.conditions
            .iter()
            .find(|(t, _)| t == "Ready")
            .map(|(_, s)| s.as_str())
    }

    /// The same, heartbeats aside.
    fn same_as(&self, other: &Signals) -> bool {
        self.conditions == other.conditions
            && self.unschedulable == other.unschedulable
            && self.taints == other.taints
    }
}

impl View for Signals {
    fn derive(obj: &Object) -> Self {
        let v = obj.value().unwrap_or(Value::Null);
        let s = |c: &Value, k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let conditions: Vec<&Value> = v
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .map(|a| a.iter().collect())
            .unwrap_or_default();
        Signals {
            conditions: conditions
                .iter()
                .map(|c| (s(c, "type"), s(c, "status")))
                .collect(),
            unschedulable: v.pointer("/spec/unschedulable") == Some(&json!(true)),
            taints: v
                .pointer("/spec/taints")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .map(|t| (s(t, "key"), s(t, "value"), s(t, "effect")))
                        .collect()
                })
                .unwrap_or_default(),
            ready_heartbeat: conditions
                .iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
                .and_then(|c| c.get("lastHeartbeatTime"))
                .and_then(Value::as_str)
                .map(String::from),
        }
    }
}

/// The Lease's `spec.renewTime`.
struct Renewed(Option<String>);

impl View for Renewed {
    fn derive(obj: &Object) -> Self {
        Renewed(obj.value().ok().and_then(|v| {
            v.pointer("/spec/renewTime")
                .and_then(Value::as_str)
                .map(String::from)
        }))
    }
}

/// Every node's heartbeat record.
#[derive(Default)]
struct HealthMap(Mutex<HashMap<String, Health>>);

impl HealthMap {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Health>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn observe(&self, node: &str, seen: &Heartbeats, now: Timestamp) -> Health {
        let mut map = self.lock();
        let next = health::observe(map.get(node), seen, now);
        map.insert(node.to_string(), next.clone());
        next
    }

    fn forget(&self, node: &str) {
        self.lock().remove(node);
    }

    /// Upstream, leaving full disruption: every node starts a fresh grace period.
    fn reset_all(&self, now: Timestamp) {
        for h in self.lock().values_mut() {
            h.probe = now;
        }
    }
}

/// The last zone census and whether every zone was fully disrupted then.
#[derive(Default)]
struct ZoneMemo {
    /// When the census was taken, by the controller's clock.
    last: Option<(Timestamp, Arc<Zones>)>,
    all_down: bool,
}

struct Controller {
    /// Where `now` comes from.
    clock: Clock,
    registry: Registry,
    nodes: Arc<Informer>,
    leases: Arc<Informer>,
    pods: Arc<Informer>,
    recorder: Recorder,
    health: Arc<HealthMap>,
    zones: Mutex<ZoneMemo>,
    grace: Grace,
    queue: Queue<ObjectKey>,
}

impl Controller {
    fn record(&self, obj: &Value, t: EventType, reason: &str, message: &str) {
        if let Err(e) = self.recorder.record(obj, t, reason, message) {
            tracing::debug!(error = %e, reason, "recording event");
        }
    }

    /// The zone census, at most [`ZONES_MAX_AGE`] old (`fresh`: taken now). Entering or
    /// leaving "every zone down" concerns every node: all are enqueued, and leaving it gives
    /// each a fresh grace period, as upstream.
    fn observe_zones(&self, fresh: bool, now: Timestamp) -> Arc<Zones> {
        let mut memo = self.zones.lock().unwrap_or_else(|e| e.into_inner());
        if !fresh
            && let Some((at, z)) = &memo.last
            && now.duration_since(*at).unsigned_abs() < ZONES_MAX_AGE
        {
            return z.clone();
        }
        let nodes = self.nodes.list();
        let census: Vec<(String, bool)> = nodes
            .iter()
            .filter(|n| !n.labels().contains_key(zones::EXCLUDE_DISRUPTION))
            .map(|n| {
                (
                    zones::zone_key(n.labels()),
                    n.view::<Signals>().ready() == Some("True"),
                )
            })
            .collect();
        let z = Arc::new(Zones::of(census.iter().map(|(k, r)| (k.as_str(), *r))));
        let all_down = z.all_fully_disrupted();
        if all_down != memo.all_down {
            tracing::info!(
                all_down,
                "every zone fully disrupted: readiness taints {}",
                if all_down { "suspended" } else { "resumed" }
            );
            if !all_down {
                self.health.reset_all(now);
            }
            for n in &nodes {
                self.queue.add(n.key().clone());
            }
            memo.all_down = all_down;
        }
        memo.last = Some((now, z.clone()));
        z
    }

    fn observe_health(&self, name: &str, node: &Object, now: Timestamp) -> Health {
        let lease = self
            .leases
            .get(Some(LEASE_NAMESPACE), name)
            .and_then(|l| l.view::<Renewed>().0.clone());
        let signals = node.view::<Signals>();
        let seen = Heartbeats {
            lease_renewed: Some(lease),
            status_heartbeat: Some(signals.ready_heartbeat.clone()),
            ready: Some(signals.ready() == Some("True")),
        };
        self.health.observe(name, &seen, now)
    }

    /// Writes the node (its status or its main part), conditional on the version the pass
    /// planned from (a write meanwhile wins, and the next pass sees it).
    fn apply_node(&self, name: &str, raw: Value, part: Part) -> Result<(), RegistryError> {
        self.registry
            .update(NODES, None, name, raw, part, &WriteOptions::default())?;
        Ok(())
    }

    /// Writes the node's taints, and logs them.
    fn apply_taints(
        &self,
        name: &str,
        raw: Value,
        taints: Vec<core::Taint>,
    ) -> Result<(), RegistryError> {
        let keys: Vec<String> = taints
            .iter()
            .map(|t| format!("{}:{}", t.key, t.effect))
            .collect();
        self.apply_node(name, with_taints(raw, taints)?, Part::Main)?;
        tracing::info!(node = name, taints = ?keys, "node taints updated");
        Ok(())
    }

    /// Upstream `MarkPodsNotReady`: each pod of the node still Ready becomes not Ready (only
    /// the Ready condition changes; its transition time moves), with a `NodeNotReady` event.
    fn apply_pods_not_ready(&self, node: &str) -> Result<(), RegistryError> {
        for pod in self.pods.by_index(BY_NODE, node) {
            let view = pod.view::<crate::views::Pod>();
            if !view.ready {
                continue;
            }
            let ns = pod.namespace().map(String::from);
            let now = berth_registry::meta::now_rfc3339();
            let r = self.registry.update_with(
                PODS,
                ns.as_deref(),
                pod.name(),
                Part::Status,
                &WriteOptions::default(),
                |mut p| {
                    if let Some(conds) = p
                        .pointer_mut("/status/conditions")
                        .and_then(Value::as_array_mut)
                        && let Some(c) = conds
                            .iter_mut()
                            .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
                        && c.get("status").and_then(Value::as_str) == Some("True")
                    {
                        c["status"] = json!("False");
                        c["lastTransitionTime"] = json!(now);
                    }
                    Ok::<_, RegistryError>(p)
                },
            );
            match r {
                Ok(updated) => {
                    tracing::info!(node, pod = %pod.key(), "pod marked not ready");
                    self.record(
                        &updated,
                        EventType::Warning,
                        "NodeNotReady",
                        "Node is not ready",
                    );
                }
                Err(RegistryError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// The stored node `raw` with the planned conditions as its status's.
fn with_conditions(
    mut raw: Value,
    conditions: Vec<core::NodeCondition>,
) -> Result<Value, RegistryError> {
    raw["status"]["conditions"] = serde_json::to_value(conditions)?;
    Ok(raw)
}

/// The stored node `raw` with the planned taints (none: the field goes).
fn with_taints(mut raw: Value, taints: Vec<core::Taint>) -> Result<Value, RegistryError> {
    if taints.is_empty() {
        if let Some(spec) = raw.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove("taints");
        }
    } else {
        raw["spec"]["taints"] = serde_json::to_value(taints)?;
    }
    Ok(raw)
}

/// The fields of a Node an event needs.
fn node_ref(raw: &Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": raw.pointer("/metadata/name"),
        "uid": raw.pointer("/metadata/uid"),
    }})
}

impl Reconciler for Controller {
    type Key = ObjectKey;
    type Error = RegistryError;

    fn reconcile(&self, key: &ObjectKey) -> Result<Outcome, RegistryError> {
        let Some(obj) = self.nodes.get_key(key) else {
            self.health.forget(key.name());
            return Ok(Outcome::Done);
        };
        let Some(typed) = obj.decoded::<core::Node>() else {
            return Ok(Outcome::Done);
        };
        let now = self.clock.now();
        let health = self.observe_health(key.name(), &obj, now);
        let zone = zones::zone_key(obj.labels());
        let signals = obj.view::<Signals>();
        // The census matters only where readiness taints may come or go.
        let concerned = signals.ready() != Some("True")
            || signals.taints.iter().any(|(k, _, e)| {
                e == "NoExecute" && (k == plan::NOT_READY || k == plan::UNREACHABLE)
            });
        let tainting = |fresh| {
            if concerned {
                self.observe_zones(fresh, now).tainting(&zone)
            } else {
                Tainting::Allowed
            }
        };
        let mut p = plan::node(&typed, &health, &self.grace, tainting(false), now);
        if p.adds_no_execute {
            p = plan::node(&typed, &health, &self.grace, tainting(true), now);
        }
        let raw = obj.value().map_err(RegistryError::from)?;
        if let Some(conditions) = p.conditions {
            let written = with_conditions(raw.clone(), conditions)?;
            self.apply_node(key.name(), written, Part::Status)?;
            if p.became_not_ready {
                tracing::info!(node = %key, "node stopped posting status: Unknown");
                let msg = format!("Node {} status is now: NodeNotReady", key.name());
                self.record(&node_ref(&raw), EventType::Normal, "NodeNotReady", &msg);
            }
            // One step per pass: the taints follow from the new conditions.
            return Ok(Outcome::RequeueAfter(Duration::ZERO));
        }
        if let Some(taints) = p.taints {
            self.apply_taints(key.name(), raw, taints)?;
        }
        if p.pods_not_ready {
            self.apply_pods_not_ready(key.name())?;
        }
        Ok(p.requeue_after.map_or(Outcome::Done, Outcome::RequeueAfter))
    }
}

/// A node change: record its status heartbeat; a pass when anything else changed, or on a
/// heartbeat of a node that is not Ready.
fn node_change(health: &HealthMap, d: &Delta, now: Timestamp) -> Vec<ObjectKey> {
    let key = d.object.key().clone();
    if d.kind == DeltaType::Deleted {
        return vec![key];
    }
    let new = d.object.view::<Signals>();
    let seen = Heartbeats {
        lease_renewed: None,
        status_heartbeat: Some(new.ready_heartbeat.clone()),
        ready: Some(new.ready() == Some("True")),
    };
    let before = health.lock().get(key.name()).map(|h| h.probe);
    let after = health.observe(key.name(), &seen, now).probe;
    let Some(old) = d.old.as_ref().map(|o| o.view::<Signals>()) else {
        return vec![key];
    };
    let beat = before.is_some_and(|b| b != after);
    if !old.same_as(&new) || (beat && new.ready() != Some("True")) {
        vec![key]
    } else {
        Vec::new()
    }
}

/// A Lease change in `kube-node-lease`: record the heartbeat; a pass only for a node that is
/// not Ready.
fn lease_change(health: &HealthMap, nodes: &Informer, d: &Delta, now: Timestamp) -> Vec<ObjectKey> {
    if d.object.namespace() != Some(LEASE_NAMESPACE) || d.kind == DeltaType::Deleted {
        return Vec::new();
    }
    let name = d.object.name();
    let seen = Heartbeats {
        lease_renewed: Some(d.object.view::<Renewed>().0.clone()),
        ..Heartbeats::default()
    };
    health.observe(name, &seen, now);
    match nodes.get(None, name) {
        Some(n) if n.view::<Signals>().ready() != Some("True") => vec![n.key().clone()],
        _ => Vec::new(),
    }
}

/// A pod change: a Ready pod bound to a node that is not Ready concerns that node.
fn pod_change(nodes: &Informer, d: &Delta) -> Vec<ObjectKey> {
    if d.kind == DeltaType::Deleted {
        return Vec::new();
    }
    let pod = d.object.view::<crate::views::Pod>();
    if !pod.ready || pod.node_name.is_empty() {
        return Vec::new();
    }
    match nodes.get(None, &pod.node_name) {
        Some(n) if n.view::<Signals>().ready().is_some_and(|r| r != "True") => {
            vec![n.key().clone()]
        }
        _ => Vec::new(),
    }
}

/// Runs the node lifecycle controller until `shutdown`.
pub async fn run(ctx: Context, config: Config, shutdown: CancellationToken) {
    let nodes = ctx.informer(NODES);
    let health = Arc::new(HealthMap::default());
    let (for_nodes, for_leases) = (health.clone(), health.clone());
    let (nodes_for_leases, nodes_for_pods) = (nodes.clone(), nodes.clone());
    let (clock_for_nodes, clock_for_leases) = (ctx.clock.clone(), ctx.clock.clone());
    let wiring = runtime::Controller::keyed("node-lifecycle", &ctx)
        .watches(NODES, move |d| {
            node_change(&for_nodes, d, clock_for_nodes.now())
        })
        .watches(LEASES, move |d| {
            lease_change(&for_leases, &nodes_for_leases, d, clock_for_leases.now())
        })
        .watches(PODS, move |d| pod_change(&nodes_for_pods, d));
    let controller = Arc::new(Controller {
        registry: ctx.registry.clone(),
        clock: ctx.clock.clone(),
        nodes: nodes.clone(),
        leases: ctx.informer(LEASES),
        pods: ctx.informer(PODS),
        recorder: ctx.recorder(COMPONENT),
        health,
        zones: Mutex::new(ZoneMemo::default()),
        grace: config.grace,
        queue: wiring.queue(),
    });
    let keys = nodes.clone();
    wiring
        .resync_with(Duration::from_secs(300), move || keys.keys())
        .workers(WORKERS)
        .run(controller, shutdown)
        .await;
}
