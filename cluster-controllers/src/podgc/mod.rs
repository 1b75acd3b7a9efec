//! The pod garbage collector (upstream's `pod-garbage-collector`): force-deletes pods that
//! nothing else will ever finish ([`plan`]): those bound to a node that is gone, those
//! terminating without ever being bound, and those terminating on an unready node declared out
//! of service. Keyed by pod; a node's deletion concerns its pods. The time a node was first
//! found missing is soft state (a restarted controller starts the quarantine again).
//!
//! A second loop, keyed by one sweep, deletes the finished pods beyond
//! `--terminated-pod-gc-threshold` ([`terminated`]) whenever a pod finishes and every 20 s (as
//! upstream's `gcCheckPeriod`).

pub mod plan;
pub mod terminated;

#[cfg(test)]
mod tests;

use berth_registry::conditions::{DISRUPTION_TARGET, set_pod_condition};
use berth_registry::{
    DeleteOptions, DeletePreconditions, Part, Registry, RegistryError, WriteOptions,
};
use berth_runtime::informer::{BY_NODE, Delta, DeltaType, Informer, Object, ObjectKey, View};
use berth_runtime::{self as runtime, Clock, Context, Reconciler};
use berth_shared::reconcile::Outcome;
use berth_shared::resource::{NODES, PODS};
use jiff::Timestamp;
use plan::{NodeFacts, PodFacts, Verdict};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

const WORKERS: usize = 2;

/// The fields of a stored pod its facts need beyond the index's; the rest is skipped.
#[derive(Default, Deserialize)]
#[serde(default)]
struct PodDoc {
    metadata: MetaDoc,
    status: StatusDoc,
}

#[derive(Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct MetaDoc {
    creation_timestamp: Option<String>,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct StatusDoc {
    reason: Option<String>,
}

impl View for PodFacts {
    fn derive(obj: &Object) -> Self {
        let doc: PodDoc = obj.decode().unwrap_or_default();
        let phase = obj.field("status.phase").unwrap_or_default();
        PodFacts {
            node: obj.field("spec.nodeName").unwrap_or_default().to_string(),
            terminating: obj.is_deleting(),
            terminal: phase == "Succeeded" || phase == "Failed",
            evicted: phase == "Failed" && doc.status.reason.as_deref() == Some("Evicted"),
            created: doc.metadata.creation_timestamp.unwrap_or_default(),
        }
    }
}

/// Whether a node is Ready and declared out of service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct NodeState {
    ready: bool,
    out_of_service: bool,
}

impl View for NodeState {
    fn derive(obj: &Object) -> Self {
        let v = obj.value().unwrap_or(Value::Null);
        let ready = crate::condition::is_true(&v, "Ready");
        let out_of_service = v
            .pointer("/spec/taints")
            .and_then(Value::as_array)
            .is_some_and(|a| {
                a.iter()
                    .any(|t| t["key"] == plan::OUT_OF_SERVICE && t["effect"] == "NoExecute")
            });
        NodeState {
            ready,
            out_of_service,
        }
    }
}

struct Controller {
    /// Where `now` comes from.
    clock: Clock,
    registry: Registry,
    pods: Arc<Informer>,
    nodes: Arc<Informer>,
    /// When each missing node was first found missing.
    missing: Mutex<HashMap<String, Timestamp>>,
    quarantine: std::time::Duration,
}

impl Controller {
    fn missing(&self) -> std::sync::MutexGuard<'_, HashMap<String, Timestamp>> {
        self.missing.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn observe_node(&self, name: &str, now: Timestamp) -> Option<NodeFacts> {
        if name.is_empty() {
            return None;
        }
        match self.nodes.get(None, name) {
            Some(n) => {
                self.missing().remove(name);
                let s = n.view::<NodeState>();
                Some(NodeFacts::Present {
                    ready: s.ready,
                    out_of_service: s.out_of_service,
                })
            }
            None => Some(NodeFacts::Missing {
                since: *self.missing().entry(name.to_string()).or_insert(now),
            }),
        }
    }

    /// Upstream `markFailedAndDeletePodWithCondition`'s status write.
    fn apply_failed(&self, key: &ObjectKey, uid: &str) -> Result<(), RegistryError> {
        let now = berth_registry::meta::now_rfc3339();
        let r = self.registry.update_with(
            PODS,
            key.namespace(),
            key.name(),
            Part::Status,
            &WriteOptions::default(),
            |mut p| {
                if p.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid) {
                    return Err(RegistryError::not_found(PODS, key.name()));
                }
                p["status"]["phase"] = json!("Failed");
                set_pod_condition(
                    &mut p,
                    DISRUPTION_TARGET,
                    "True",
                    "DeletionByPodGC",
                    "PodGC: node no longer exists",
                    &now,
                );
                Ok(p)
            },
        );
        match r {
            Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn apply_force_delete(&self, key: &ObjectKey, uid: &str) -> Result<Outcome, RegistryError> {
        force_delete(&self.registry, key, uid).map(|()| Outcome::Done)
    }
}

/// Deletes the pod `key` with grace 0, if it is still the one with `uid`.
fn force_delete(registry: &Registry, key: &ObjectKey, uid: &str) -> Result<(), RegistryError> {
    let opts = DeleteOptions {
        grace_period_seconds: Some(0),
        preconditions: Some(DeletePreconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        ..DeleteOptions::default()
    };
    match registry.delete(PODS, key.namespace(), key.name(), &opts) {
        Ok(_) | Err(RegistryError::NotFound { .. } | RegistryError::Conflict { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

impl Reconciler for Controller {
    type Key = ObjectKey;
    type Error = RegistryError;

    fn reconcile(&self, key: &ObjectKey) -> Result<Outcome, RegistryError> {
        self.pods.reconcile_cached(key, |obj| {
            let pod = obj.view::<PodFacts>();
            let now = self.clock.now();
            let node = self.observe_node(&pod.node, now);
            match plan::verdict(&pod, node, self.quarantine, now) {
                Verdict::Keep => Ok(Outcome::Done),
                Verdict::Wait(d) => Ok(Outcome::RequeueAfter(d)),
                Verdict::ForceDelete => {
                    tracing::info!(pod = %key, "force deleting a pod that cannot terminate");
                    self.apply_force_delete(key, obj.uid())
                }
                Verdict::Orphaned => {
                    // The cache may lag: only a fresh read says the node is gone.
                    if self.registry.get(NODES, None, &pod.node).is_ok() {
                        self.missing().remove(&pod.node);
                        return Ok(Outcome::Done);
                    }
                    tracing::info!(pod = %key, node = %pod.node, "deleting a pod whose node is gone");
                    if !pod.terminal {
                        self.apply_failed(key, obj.uid())?;
                    }
                    self.apply_force_delete(key, obj.uid())
                }
            }
        })
    }
}

/// The one key of the finished-pod sweep.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Sweep;

impl std::fmt::Display for Sweep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("finished-pods")
    }
}

/// Deletes the finished pods beyond the threshold.
struct FinishedSweep {
    registry: Registry,
    pods: Arc<Informer>,
    threshold: usize,
}

impl Reconciler for FinishedSweep {
    type Key = Sweep;
    type Error = RegistryError;

    fn reconcile(&self, _: &Sweep) -> Result<Outcome, RegistryError> {
        let pods = self.pods.list();
        let finished = pods
            .iter()
            .filter_map(|obj| {
                let pod = obj.view::<PodFacts>();
                pod.terminal.then(|| terminated::Finished {
                    key: obj.key().clone(),
                    evicted: pod.evicted,
                    created: pod.created.clone(),
                })
            })
            .collect();
        let surplus = terminated::surplus(finished, self.threshold);
        if !surplus.is_empty() {
            tracing::info!(pods = surplus.len(), "garbage collecting finished pods");
        }
        for key in surplus {
            if let Some(obj) = self.pods.get_key(&key) {
                force_delete(&self.registry, &key, obj.uid())?;
            }
        }
        Ok(Outcome::Done)
    }
}

/// A pod change: the sweep, when the pod has just finished.
fn finished_change(d: &Delta) -> Vec<Sweep> {
    let now = d.kind != DeltaType::Deleted && d.object.view::<PodFacts>().terminal;
    let before = d
        .old
        .as_ref()
        .is_some_and(|o| o.view::<PodFacts>().terminal);
    if now && !before {
        vec![Sweep]
    } else {
        Vec::new()
    }
}

/// A pod change: the pod, when nothing but the collector can end it.
fn pod_change(nodes: &Informer, d: &Delta) -> Vec<ObjectKey> {
    if d.kind == DeltaType::Deleted {
        return Vec::new();
    }
    let pod = d.object.view::<PodFacts>();
    let concerned = if pod.node.is_empty() {
        pod.terminating
    } else {
        match nodes.get(None, &pod.node) {
            None => true,
            Some(n) => {
                let s = n.view::<NodeState>();
                pod.terminating && !s.ready && s.out_of_service
            }
        }
    };
    if concerned {
        vec![d.object.key().clone()]
    } else {
        Vec::new()
    }
}

/// A node change: its pods, when it is deleted or declared out of service.
fn node_change(pods: &Informer, d: &Delta) -> Vec<ObjectKey> {
    let concerned = match d.kind {
        DeltaType::Deleted => true,
        _ => {
            let s = d.object.view::<NodeState>();
            let before = d.old.as_ref().map(|o| *o.view::<NodeState>());
            s.out_of_service && !s.ready && before != Some(*s)
        }
    };
    if !concerned {
        return Vec::new();
    }
    pods.by_index(BY_NODE, d.object.name())
        .iter()
        .map(|p| p.key().clone())
        .collect()
}

/// The collector's settings.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// How long a node must be missing before its pods are collected.
    pub quarantine: std::time::Duration,
    /// Finished pods kept at most (`--terminated-pod-gc-threshold`; 0: no limit).
    pub terminated_threshold: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            quarantine: plan::QUARANTINE,
            terminated_threshold: terminated::DEFAULT_THRESHOLD,
        }
    }
}

/// How often the finished-pod sweep runs besides when a pod finishes (upstream's
/// `gcCheckPeriod`).
const SWEEP_PERIOD: std::time::Duration = std::time::Duration::from_secs(20);

/// Runs the pod garbage collector until `shutdown`.
pub async fn run(ctx: Context, config: Config, shutdown: CancellationToken) {
    let (pods, nodes) = (ctx.informer(PODS), ctx.informer(NODES));
    let controller = Arc::new(Controller {
        registry: ctx.registry.clone(),
        clock: ctx.clock.clone(),
        pods: pods.clone(),
        nodes: nodes.clone(),
        missing: Mutex::new(HashMap::new()),
        quarantine: config.quarantine,
    });
    let orphans = {
        let pods = pods.clone();
        runtime::Controller::keyed("pod-garbage-collector", &ctx)
            .watches(PODS, move |d| pod_change(&nodes, d))
            .watches(NODES, move |d| node_change(&pods, d))
            .workers(WORKERS)
            .run(controller, shutdown.clone())
    };
    if config.terminated_threshold == 0 {
        orphans.await;
        return;
    }
    let sweep = Arc::new(FinishedSweep {
        registry: ctx.registry.clone(),
        pods,
        threshold: config.terminated_threshold,
    });
    let finished = runtime::Controller::keyed("pod-garbage-collector-finished", &ctx)
        .watches(PODS, finished_change)
        .resync_with(SWEEP_PERIOD, || vec![Sweep])
        .paced(4)
        .run(sweep, shutdown);
    tokio::join!(orphans, finished);
}
